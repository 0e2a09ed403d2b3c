#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# `make demo`: build everything, boot the guest and run tests/demo.sh there.
set -euo pipefail
. "$(dirname "$0")/../scripts/prepare.sh"
exec bash "$here/scripts/vm.sh" "bash $here/tests/demo.sh"
