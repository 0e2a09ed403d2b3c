#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# The demo, inside the guest: two endpoints connect over soft-RoCE, one
# disconnects with a DREQ carrying a message, the other shows it and answers
# with a DREP carrying its own, both reach timewait exit, and the harness
# and the product are unloaded with nothing left. The DREQ and DREP go
# through the product's C API (the harness calls rcd_send_dreq/_drep).
set -euo pipefail
RCD_TOP=$(cd "$(dirname "$0")/.." && pwd)
. "$RCD_TOP/tests/lib.sh"
mount | grep -q ' /sys/kernel/debug ' || mount -t debugfs none /sys/kernel/debug
dmesg -C

step() { echo; echo "== $*"; }
# text_of NUM KIND: the private data of an event, as text (zeros dropped).
text_of() { event_field "$1" "$2" data | python3 -c 'import sys; print(bytes.fromhex(sys.stdin.read().strip()).rstrip(b"\0").decode())'; }
show() { sed 's/data=\([0-9a-f]\{40\}\)[0-9a-f]*/data=\1.../' "$RCD_DBG/$1"; }

step "soft-RoCE: rxe0 on veth v0 (10.77.0.1) <-> rxe1 on v1 (10.77.0.2)"
rxe_add rxe0 v0
rxe_add rxe1 v1
veth_cross_routes
rdma link show
# The CM's counters from here on (lib.sh: cm_base).
cm_base

# The product first, then the test harness, its consumer, which drives
# connections from debugfs.
step "insmod rust_cm_disconnect.ko, then rcd_harness.ko; the harness sees:"
rcd_load
cat "$RCD_DBG/devices"

step "passive: listen on rxe1, service 0x1000; active: connect from rxe0"
ctl listen 1 rxe1 0x1000
ctl connect 2 rxe0 10.77.0.1 10.77.0.2 0x1000
wait_event 30 2 ESTABLISHED
wait_event 30 1000002 ESTABLISHED
cat "$RCD_DBG/conns"

step "active sends a DREQ carrying 'hello-from-rxe0'"
ctl dreq 2 text:hello-from-rxe0
wait_event 30 1000002 DREQ_RECEIVED
echo "passive got a DREQ ($(event_field 1000002 DREQ_RECEIVED len) bytes of private data): '$(text_of 1000002 DREQ_RECEIVED)'"

step "passive answers with a DREP carrying 'bye-from-rxe1'"
ctl drep 1000002 text:bye-from-rxe1
wait_event 30 2 DREP_RECEIVED
echo "active got a DREP ($(event_field 2 DREP_RECEIVED len) bytes of private data): '$(text_of 2 DREP_RECEIVED)'"

step "both ends reach timewait exit and free their ids"
wait_event 30 2 TIMEWAIT_EXIT
wait_event 30 1000002 TIMEWAIT_EXIT
show events
cat "$RCD_DBG/conns"
grep -E 'cm_ids_live|endpoints_live' "$RCD_DBG/stats"
echo "wire counters: rxe0 sent $(cm_counter rxe0 cm_tx_msgs dreq) DREQ, rxe1 sent $(cm_counter rxe1 cm_tx_msgs drep) DREP"

step "close the listener and the two records: nothing left"
ctl close 1
ctl close 2
ctl close 1000002
grep -E 'conns|cm_ids_live|endpoints_live' "$RCD_DBG/stats"

step "rmmod"
rcd_unload
dmesg | grep -E 'rust_cm_disconnect|rcd_harness'
if dmesg | grep -qE 'BUG:|WARNING:|Oops'; then echo "dmesg has warnings"; exit 1; fi
echo "clean dmesg"
cleanup || true
