#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# `make demo`: build everything, boot the guest and run tests/demo.sh there.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/scripts/env.sh"

bash "$here/scripts/setup.sh" >/dev/null
KDIR=${KDIR:-$(bash "$here/scripts/kernel.sh" | tail -n 1)}
export KDIR
bash "$here/scripts/build.sh" -s modules
exec bash "$here/scripts/vm.sh" "bash $here/tests/demo.sh"
