# SPDX-License-Identifier: GPL-2.0
#
# disconnect(): rdma_disconnect(3) done right, over rxe. Each end posts K
# receive work requests; a disconnect moves the QP to the error state, so
# each CQ must give back exactly K IB_WC_WR_FLUSH_ERR completions, and each
# end gets exactly one DISCONNECTED event.

K=8

# post_both A P: K receive WRs on both ends.
post_both() { ctl post "$1" $K && ctl post "$2" $K; }

# flushed NUM: poll NUM's CQ and print how many completions were flushes.
flushed() { ctl poll "$1" && conn_field "$1" flushed; }

test_disconnect_flushes_and_events() {
	local n=100 p=$((100 + PASSIVE_BASE))
	cm_pair $n || return 1
	post_both $n $p || return 1
	check "nothing flushed before" test "$(flushed $n)" = 0 || return 1
	ctl disconnect $n text:initiator || return 1
	check "initiator: $K flushed" test "$(flushed $n)" = $K || return 1
	# The responder hears of it by the DREQ, and disconnects in turn: a DREP.
	wait_event 20 $p DISCONNECTED || return 1
	check "responder still has its WRs" test "$(flushed $p)" = 0 || return 1
	ctl disconnect $p text:responder || return 1
	check "responder: $K flushed" test "$(flushed $p)" = $K || return 1
	wait_event 20 $n DISCONNECTED || return 1
	check "the DREP carried the responder's data (the whole 224-byte field)" test \
		"$(event_field $n DREP_RECEIVED data)" = "$(field_hex responder 224)" || return 1
	wait_event 30 $n TIMEWAIT_EXIT && wait_event 30 $p TIMEWAIT_EXIT || return 1
	check "one DISCONNECTED for the initiator" \
		test "$(event_count $n DISCONNECTED)" = 1 || return 1
	check "one DISCONNECTED for the responder" \
		test "$(event_count $p DISCONNECTED)" = 1 || return 1
	check "initiator's event status 0" test "$(event_field $n DISCONNECTED status)" = 0
}

# A second call, and calls on what is not connected, say so (rdma_cm
# returns 0 for all of them).
test_disconnect_errnos() {
	local n=110 p=$((110 + PASSIVE_BASE))
	cm_pair $n || return 1
	expect_errno ENOTCONN "disconnect 1" || return 1
	ctl connect 111 rxe0 10.77.0.1 10.77.0.1 0x4444 || return 1
	wait_event 20 111 REJ_RECEIVED || return 1
	expect_errno ENOTCONN "disconnect 111" || return 1
	expect_errno EINVAL "disconnect $n pat:221" || return 1
	check "still ESTABLISHED after EINVAL" test "$(conn_state $n)" = ESTABLISHED || return 1
	ctl disconnect $n || return 1
	expect_errno EALREADY "disconnect $n" || return 1
	wait_event 20 $p DISCONNECTED || return 1
	ctl disconnect $p || return 1
	expect_errno EALREADY "disconnect $p" || return 1
	wait_event 30 $n TIMEWAIT_EXIT || return 1
	# Still a second call once the id is freed, whatever the timing.
	expect_errno EALREADY "disconnect $n" || return 1
	expect_errno ENOENT "disconnect 4242"
}

# Both ends call disconnect() at the same moment: the DREQs cross, each end
# answers the other's, each gets one DISCONNECTED and flushes its WRs. Over
# the veth with 500 ms each way (both ends in one write), so that both
# DREQs are sent before either arrives and the crossing is checked, not
# left to the scheduler (on one rxe device the first DREQ can be answered
# before the second is sent; t_cm.sh's crossing_dreqs, with the CM's trace).
test_disconnect_simultaneous() {
	local n=120 p=$((120 + PASSIVE_BASE))
	cm_base
	cm_pair2 $n || return 1
	post_both $n $p || return 1
	[ -d /sys/module/sch_netem ] || modprobe sch_netem || return 1
	tc qdisc add dev v0 root netem delay 500ms &&
		tc qdisc add dev v1 root netem delay 500ms || return 1
	{ local_ids $n $n; local_ids $p $p; } > /run/rcd-ids
	cm_trace_on || return 1
	ctl disconnect $n,$p || return 1
	wait_event 20 $n DISCONNECTED && wait_event 20 $p DISCONNECTED || return 1
	wait_event 30 $n TIMEWAIT_EXIT && wait_event 30 $p TIMEWAIT_EXIT || return 1
	tc qdisc del dev v0 root; tc qdisc del dev v1 root
	grep -E "^($n|$p) " "$RCD_DBG/events" | cut -c1-50 | sed 's/^/# /'
	check "both DREQs crossed on the wire (a DREQ, then a DREP, from each end)" \
		test "$(crossed_on_wire /run/rcd-ids)" = 2 || { cm_trace_dump; return 1; }
	check "$n: one DISCONNECTED" test "$(event_count $n DISCONNECTED)" = 1 || return 1
	check "$p: one DISCONNECTED" test "$(event_count $p DISCONNECTED)" = 1 || return 1
	# The QPs are freed at timewait exit; what was on their CQs is counted.
	check "$n flushed $K" test "$(conn_field $n flushed)" = $K || return 1
	check "$p flushed $K" test "$(conn_field $p flushed)" = $K
}

# The peer vanished (all traffic dropped): the disconnect still flushes the
# QP, and the DISCONNECTED event says ETIMEDOUT after the CM's retries.
test_disconnect_peer_vanished() {
	local n=130
	# 16 tries (about 3 s for the REQ, 1 s for the REP's RTU): a slow
	# guest's handshake fits, and the DREQ still times out in 3 s.
	CONNECT_OPTS="lifetime=14 resp=14 retries=15" cm_pair2 $n || return 1
	ctl post $n $K || return 1
	{ [ -d /sys/module/sch_netem ] || modprobe sch_netem; } &&
		tc qdisc add dev v0 root netem loss 100% || return 1
	ctl disconnect $n || return 1
	check "$K flushed at once" test "$(flushed $n)" = $K || return 1
	wait_event 60 $n DISCONNECTED || return 1
	check "DISCONNECTED with -ETIMEDOUT" \
		test "$(event_field $n DISCONNECTED status)" = -110 || return 1
	check "one DISCONNECTED" test "$(event_count $n DISCONNECTED)" = 1 || return 1
	wait_event 30 $n TIMEWAIT_EXIT
}

# Send WRs too: the initiator posts K receives and S SENDs that stay
# outstanding (the peer posts no receive), and the disconnect flushes all
# K + S of them.
test_disconnect_flushes_sends() {
	local n=140 S=3
	cm_pair $n || return 1
	ctl post $n $K $S || return 1
	check "nothing completed before" test "$(flushed $n)" = 0 || return 1
	ctl disconnect $n || return 1
	check "initiator: $K receives + $S sends flushed" \
		test "$(flushed $n)" = $((K + S)) || return 1
	check "no other completion" \
		test "$(conn_field $n completed)" = 0 -a "$(conn_field $n failed)" = 0
}

# Data flows before the disconnect: SENDs from each end meet receives posted
# at the other and complete with success on both sides; what is still
# posted when each end disconnects is flushed, nothing else.
test_disconnect_after_data() {
	local n=150 p=$((150 + PASSIVE_BASE))
	cm_pair $n || return 1
	ctl post $p 3 1 || return 1
	ctl post $n 2 2 || return 1
	# The active end: 2 SENDs and the passive end's SEND received.
	check "active: 3 completions" wait_for 20 completed_is $n 3 || return 1
	# The passive end: 2 receives and its SEND.
	check "passive: 3 completions" wait_for 20 completed_is $p 3 || return 1
	check "no errors" test \
		"$(conn_field $n failed)$(conn_field $p failed)$(flushed $n)$(flushed $p)" = 0000 ||
		return 1
	ctl disconnect $n || return 1
	check "active: its 1 receive left flushed" test "$(flushed $n)" = 1 || return 1
	wait_event 20 $p DISCONNECTED || return 1
	ctl disconnect $p || return 1
	check "passive: its 1 receive left flushed" test "$(flushed $p)" = 1 || return 1
	wait_event 30 $n TIMEWAIT_EXIT && wait_event 30 $p TIMEWAIT_EXIT || return 1
	check "no other completion" test "$(conn_field $n completed)$(conn_field $p completed)" = 33
}
