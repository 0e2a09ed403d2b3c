#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Build the module (the product, rust_cm_disconnect.ko) and, with
# RCD_TEST_MODULES=m, the test harness (tests/harness/) and the test modules
# (tests/modules/) against the cached kernel tree:
#   scripts/build.sh [kbuild targets and variables...]
# KDIR=/path/to/built/tree uses that tree instead (no setup, no kernel build).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/scripts/env.sh"

if [ -z "${KDIR:-}" ]; then
	bash "$here/scripts/setup.sh" >/dev/null
	KDIR=$(bash "$here/scripts/kernel.sh" | tail -n 1)
fi
# The objects here are built against one tree at a time: make check (debug
# kernel) and make bench (plain kernel) take turns, so start clean when the
# tree changes rather than trust Kbuild to notice a different vmlinux.
if [ "$(cat "$here/.rcd-kdir" 2>/dev/null)" != "$KDIR" ]; then
	make -s -C "$here" clean
	echo "$KDIR" > "$here/.rcd-kdir"
fi
exec make -C "$KDIR" "${KMAKE_VARS[@]}" M="$here" CONFIG_RUST_CM_DISCONNECT=m \
	RCD_TEST_MODULES=m "$@"
