#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# `make check`: the whole suite on 7.3, the seed's kernel, in two guests,
# and beside it the core set below on 6.12 LTS with its own series (the
# backport) in a third, as one KTAP report with a subtest per kernel,
# ending "N passed, N failed" over both. (`make check KERNEL=6.12` or
# `T=regex` runs one kernel's suite.) The guests are CPU-bound: three on
# the host's two CPUs make each test about 1.3 times slower, and the
# whole shorter, as the guests' waits (timers, deletions) no longer leave
# a CPU idle; the 6.12 set needs one guest's boot and end tests, not two.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)

# The 6.12 core set: what depends on the kernel, each once: the 6.12
# series' own kernel::rdma (its CM, device client and verbs) and 6.12's CM
# under the product. What the product decides alone (its argument checks,
# errnos, load and unload) is the same code on both kernels and runs on 7.3.
# - send_dreq and the peer's DREQ/DREP with their private data, crossing
#   DREQs, a DREQ never answered, a disconnect from the id's own callback;
# - the CM's DREP leak on a too-long length, fixed in the 6.12 series'
#   cm.c too, as is its REQ_ERROR handler's hold on the id (the product's
#   own length checks, before the CM is called, run on 7.3);
# - rcd_disconnect: the QP to error, its work flushed, both sides' events,
#   the calls in the wrong states;
# - timewait's exit, unload with live connections, a device deleted under
#   100 connections in mixed states;
# - the C API: a C consumer disconnects a live connection through the
#   exports;
# - the product's promises that rest on what 6.12's CM does: a DREQ or DREP
#   whose allocation fails leaves the id in TIMEWAIT (-ENOMEM, then
#   -EALREADY), a DREQ refused in DREQ_RCVD answered with a DREP;
# - kernel::rdma::cm on 6.12's CM: an id's context alive for a REP's
#   failure after the id was dropped in its REQ callback, another id
#   dropped in a callback without waiting for that id's callbacks, and its
#   REQ callback's bounds (req_to_rep_window: the MRA of the backport's
#   ib_prepare_cm_mra());
# - interop with rdma-core's ucmatose and rdma_server;
# - the 6.12 kernel crate (its doctests, the backported global_lock!'s
#   among them), the series' debugfs (.owner) and its sample user of
#   kernel::rdma;
# and each guest's end tests (devices deleted, kmemleak, verbs leaks, dmesg,
# detectors), as always.
core612='^(dreq_drep_private_data|crossing_dreqs|dreq_unanswered|callback_disconnects_own'
core612+='|drep_too_long_no_leak'
core612+='|send_error_handler_holds_id'
core612+='|disconnect_flushes_and_events|wrong_states'
core612+='|timewait_exit_frees_its_own_id_only|unload_with_live_connections'
core612+='|device_deleted_under_100'
core612+='|capi_disconnect_live'
core612+='|promise_failed_message_returned|promise_crossing_answered_with_drep'
core612+='|rep_sent_then_dropped_in_req_callback|callback_closes_other_without_waiting'
core612+='|req_to_rep_window'
core612+='|interop_ucmatose_client|interop_rdma_server'
core612+='|rdma_doctests|debugfs_open_file_holds_module|sample_rdma_cm)$'

echo "KTAP version 1"
echo "1..2"
total_p=0 total_f=0 total_s=0 rc=0 n=0
# report NAME OUT PRC: one kernel's run (its lines in OUT, its exit status
# PRC) as subtest NAME, its lines indented: a nested KTAP document.
report() {
	local name=$1 out=$2 prc=$3 summary p f s
	n=$((n + 1))
	summary=$(tail -n 1 "$out")
	p=$(sed -n 's/^\([0-9]*\) passed, .*/\1/p' <<<"$summary")
	f=$(sed -n 's/.* \([0-9]*\) failed.*/\1/p' <<<"$summary")
	s=$(sed -n 's/.* \([0-9]*\) skipped$/\1/p' <<<"$summary")
	if [ -z "$p" ] || [ -z "$f" ]; then
		# The run ended before its report (a build or boot that failed):
		# one failure, never a quiet zero.
		p=0 f=1
		echo "  # $name: the run printed no summary line (exit $prc)"
	fi
	total_p=$((total_p + p)) total_f=$((total_f + f)) total_s=$((total_s + ${s:-0}))
	if [ "$prc" -eq 0 ] && [ "$f" -eq 0 ]; then
		echo "ok $n $name"
	else
		echo "not ok $n $name"
		rc=1
	fi
}
out73=$(mktemp) out612=$(mktemp)
trap 'rm -f "$out73" "$out612"' EXIT
# Both kernels and their modules built first, one after the other (a cold
# run's two kernel builds would otherwise take the CPUs from the guests).
for k in 7.3 6.12; do
	KERNEL=$k bash -c '. "$1/scripts/prepare.sh"' _ "$here" 2>&1 | sed -u 's/^/# /'
	[ "${PIPESTATUS[0]}" -eq 0 ] || { echo "# the $k kernel or its modules did not build"; }
done
# Then side by side: 7.3's suite in two guests, the 6.12 set in a third,
# of one vCPU each. 7.3's lines stream as they come, 6.12's follow them.
RCD_LOG=check-6.12 RCD_JOBS=1 RCD_VM_CPUS=1 KERNEL=6.12 \
	bash "$here/tests/run.sh" "$core612" > "$out612" 2>&1 &
p612=$!
KERNEL=7.3 bash "$here/tests/run.sh" 2>&1 | tee "$out73" | sed -u 's/^/  /'
report linux_7_3 "$out73" "${PIPESTATUS[0]}"
wait $p612
prc=$?
sed 's/^/  /' "$out612"
report linux_6_12_core "$out612" $prc
line="$total_p passed, $total_f failed"
[ "$total_s" -eq 0 ] || line="$line, $total_s skipped"
echo "$line"
exit $rc
