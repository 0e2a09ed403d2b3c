#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# The demo, inside the guest: bring up soft-RoCE, load the module, show what
# it sees, unload it.
set -euo pipefail
RCD_TOP=$(cd "$(dirname "$0")/.." && pwd)
. "$RCD_TOP/tests/lib.sh"
mount | grep -q ' /sys/kernel/debug ' || mount -t debugfs none /sys/kernel/debug

step() { echo; echo "== $*"; }

step "soft-RoCE: rxe0 on veth v0 (10.77.0.1), rxe1 on v1 (10.77.0.2)"
rxe_add rxe0 v0
rxe_add rxe1 v1
rdma link show

step "insmod rust_cm_disconnect.ko"
rcd_load
dmesg | grep rust_cm_disconnect

step "what the module sees: $RCD_DBG/devices"
cat "$RCD_DBG/devices"
cat "$RCD_DBG/stats"

step "rmmod rust_cm_disconnect"
rcd_unload
dmesg | grep rust_cm_disconnect | tail -3
cleanup
