# SPDX-License-Identifier: GPL-2.0
#
# The product's own promises, each against the product itself: the C
# consumer (tests/modules/rcd_consumer.c) calls the C API on a connection
# the harness made, and watches from inside its own task what each call
# reaches (kprobes on ib_modify_qp(), ib_send_cm_dreq(), ib_send_cm_drep(),
# rdma_create_ah()), where a fault is injected (fail_nth, a kretprobe) or
# the call is held in a window. What went on the wire comes from the CM's
# tracepoints and the peer's events. `make mutants` (scripts/mutants.sh)
# names, for each change of the product's logic, the test here that fails.

# The kernel crate's entry points the product sends through
# (kernel::rdma::cm::CmIdRef::send_dreq and ::send_drep), counted by kprobe
# events: the product's own bound stops a call before them.
RCD_KPROBES=$RCD_TRACING/kprobe_events

# crate_probes_on: kprobe events rcd_crate_dreq and rcd_crate_drep on the
# crate's CmIdRef::send_dreq and ::send_drep, rcd_cm_dreq and rcd_cm_drep on
# the CM's ib_send_cm_dreq and ib_send_cm_drep (group rcd_promise).
crate_probes_on() {
	local dreq drep
	[ -d $RCD_TRACING/events ] || mount -t tracefs nodev $RCD_TRACING 2>/dev/null
	[ -w "$RCD_KPROBES" ] ||
		{ fail "no $RCD_KPROBES: a kernel without CONFIG_KPROBE_EVENTS"; return 1; }
	# v0-mangled names: ..7CmIdRef9send_dreq (in the kernel crate, so no
	# module suffix).
	dreq=$(awk '$3 ~ /7CmIdRef9send_dreq$/ && NF == 3 { print $3; exit }' /proc/kallsyms)
	drep=$(awk '$3 ~ /7CmIdRef9send_drep$/ && NF == 3 { print $3; exit }' /proc/kallsyms)
	[ -n "$dreq" ] && [ -n "$drep" ] ||
		{ fail "CmIdRef::send_dreq/send_drep not in kallsyms ('$dreq' '$drep')"; return 1; }
	crate_probes_off
	printf 'p:rcd_promise/rcd_crate_%s %s\n' dreq "$dreq" drep "$drep" \
		cm_dreq ib_send_cm_dreq cm_drep ib_send_cm_drep >> "$RCD_KPROBES" &&
		echo 1 > $RCD_TRACING/events/rcd_promise/enable ||
		{ fail "kprobe events on $dreq, $drep not set"; return 1; }
}

crate_probes_off() {
	[ -d $RCD_TRACING/events/rcd_promise ] || return 0
	echo 0 > $RCD_TRACING/events/rcd_promise/enable
	printf -- '-:rcd_promise/rcd_crate_%s\n' dreq drep cm_dreq cm_drep \
		>> "$RCD_KPROBES" 2>/dev/null
	return 0
}

# probe_hits NAME: how often kprobe event rcd_crate_NAME was hit
# (kprobe_profile names an event without its group).
probe_hits() {
	awk -v e="rcd_crate_$1" '$1 == e { print $2; f = 1 } END { if (!f) print "none" }' \
		$RCD_TRACING/kprobe_profile
}

# probe_hits_are DREQ DREP CM_DREQ CM_DREP: the four counts, in that order.
probe_hits_are() {
	local got
	got="$(probe_hits dreq) $(probe_hits drep) $(probe_hits cm_dreq) $(probe_hits cm_drep)"
	[ "$got" = "$*" ] ||
		fail "calls into send_dreq, send_drep, ib_send_cm_dreq, ib_send_cm_drep:" \
			"$got, want $*"
}

# consumer STEPS CONN [PARAMS...]: load the consumer for STEPS on CONN, show
# its last lines, check every step passed, unload it.
consumer() {
	local steps=$1 conn=$2 rc l done=0
	local -a shown=() fails=()
	shift 2
	insmod "$CONSUMER" conn="$conn" steps="$steps" "$@"; rc=$?
	# Its lines in this test's log, read once and sorted with builtins: a
	# process costs the debug guest about 0.17 s, and a pipeline for each
	# of the four would start 15 a call.
	while IFS= read -r l; do
		[[ $l == *'rcd_consumer:'* ]] || continue
		[[ $l == *': ok '* ]] || shown+=("# $l")
		[[ $l != *'rcd_consumer: FAIL'* ]] || fails+=("# $l")
		[[ $l != *'rcd_consumer: done, 0 failure'* ]] || done=1
	done <<< "$(dmesg_test)"
	# The last 8 ("${a[@]: -8}" is empty when there are fewer).
	l=$(( ${#shown[@]} > 8 ? ${#shown[@]} - 8 : 0 ))
	[ ${#shown[@]} = 0 ] || printf '%s\n' "${shown[@]:l}"
	[ ${#fails[@]} = 0 ] || printf '%s\n' "${fails[@]}"
	check "the consumer ran ($steps on $conn)" test $rc = 0 || return 1
	check "no failures ($steps)" test ${#fails[@]} = 0 || return 1
	check "every step ran ($steps)" test $done = 1 || return 1
	rmmod rcd_consumer
}

# reaches_nothing CONN REFUSED ALLOWED: the consumer's step REFUSED on CONN
# reaches neither the crate's send functions nor the CM's (kprobe events),
# and ALLOWED, the control, reaches the crate's send_drep and the CM's
# ib_send_cm_drep once each.
reaches_nothing() {
	local rc=1
	crate_probes_on || return 1
	consumer "$2" "$1" && probe_hits_are 0 0 0 0 &&
		consumer "$3" "$1" && probe_hits_are 0 1 0 1 && rc=0
	crate_probes_off
	return $rc
}

# flushed_is NUM N: NUM's CQ polled (while it has one: the QP is drained
# and freed at timewait exit, its flushes counted) shows N flushes.
flushed_is() {
	ctl_errno "poll $1" > /dev/null
	[ "$(conn_field "$1" flushed)" = "$2" ]
}

# A refused call touches nothing: with receives posted, every call the
# product must refuse (too long, NULL with a length, NULL id: the
# consumer's "bad" step) reaches neither the QP nor the CM nor the kernel
# crate's send functions (for 221..255 too: the product's bound, not the
# crate's or the CM's), nothing is flushed, and a SEND still completes.
test_promise_refused_touches_nothing() {
	local n=300 p=$((300 + PASSIVE_BASE))
	cm_pair $n || return 1
	ctl post $n 8 || return 1
	# The control: a DREP in the wrong state goes through the product and
	# the crate to the CM, which refuses it (-EINVAL, the consumer checks).
	reaches_nothing $n bad drep || return 1
	check "nothing flushed" test "$(ctl poll $n && conn_field $n flushed)" = 0 || return 1
	check "still ESTABLISHED" test "$(conn_state $n)" = ESTABLISHED || return 1
	ctl post $p 0 1 || return 1
	check "a SEND from the peer completes on a posted receive" \
		wait_for 30 completed_is $n 1 || return 1
	check "the peer saw no DREQ" test "$(event_count $p DREQ_RECEIVED)" = 0
}

# The longest private data, from C, sent and received byte for byte: a
# 220-byte DREQ (rcd_send_dreq), then on the peer in DREQ_RCVD every DREP
# length the product must refuse (nothing reaches the crate, the CM or the
# QP) and a 224-byte DREP (rcd_send_drep).
test_promise_longest_data_from_c() {
	local n=310 p=$((310 + PASSIVE_BASE))
	cm_pair $n drep_after=600000 || return 1
	consumer max $n || return 1
	wait_event 30 $p DREQ_RECEIVED || return 1
	check "the peer got the 220 pattern bytes" \
		test "$(event_field $p DREQ_RECEIVED data)" = "$(pat_hex 220 220)" || return 1
	reaches_nothing $p drepbad drepmax || return 1
	wait_event 30 $n DREP_RECEIVED || return 1
	check "the DREP carried the 224 pattern bytes" \
		test "$(event_field $n DREP_RECEIVED data)" = "$(pat_hex 224 224)"
}

# rcd_disconnect() with the longest data each message takes: 220 bytes in
# the DREQ, 224 in the DREP of the peer's, each after its QP moved to ERR.
test_promise_disconnect_longest_data() {
	local n=320 p=$((320 + PASSIVE_BASE))
	cm_pair $n drep_after=600000 || return 1
	ctl post $n 8 && ctl post $p 8 || return 1
	consumer disc220 $n || return 1
	wait_event 30 $p DREQ_RECEIVED || return 1
	check "the peer got the 220 pattern bytes" \
		test "$(event_field $p DREQ_RECEIVED data)" = "$(pat_hex 220 220)" || return 1
	consumer disc224 $p || return 1
	wait_event 30 $n DREP_RECEIVED || return 1
	check "the DREP carried the 224 pattern bytes" \
		test "$(event_field $n DREP_RECEIVED data)" = "$(pat_hex 224 224)" || return 1
	check "$n flushed its 8" wait_for 20 flushed_is $n 8 || return 1
	check "$p flushed its 8" wait_for 20 flushed_is $p 8
}

# A connected id with no QP (NULL): the DREQ alone, the connection's QP
# untouched; and rcd_send_dreq() with interrupts disabled.
test_promise_null_qp_and_irqs_off() {
	local n=330 p=$((330 + PASSIVE_BASE)) m=331 q=$((331 + PASSIVE_BASE))
	cm_pair $n || return 1
	ctl post $n 8 || return 1
	consumer nullqp $n || return 1
	wait_event 30 $p DREQ_RECEIVED || return 1
	check "the peer got 'no-qp'" \
		test "$(event_field $p DREQ_RECEIVED data)" = "$(field_hex no-qp 220)" || return 1
	check "nothing flushed: the QP was not passed" \
		test "$(ctl poll $n && conn_field $n flushed)" = 0 || return 1
	cm_pair $m || return 1
	consumer irqoff $m || return 1
	wait_event 30 $q DREQ_RECEIVED || return 1
	check "the peer got 'irqoff'" \
		test "$(event_field $q DREQ_RECEIVED data)" = "$(field_hex irqoff 220)"
}

# failslab's report of each fault it injects: one line, no stack (its
# default, 2, dumps one, which dmesg_clean would count as a report).
failslab_quiet() { echo "${1:-1}" > /sys/kernel/debug/failslab/verbose; }

# Every failure returned, and both steps tried: the DREQ's MAD finds no
# memory (the fault injected in the caller's task), and the product
# returns -ENOMEM although its QP step succeeded, where rdma_disconnect(3)
# returns 0; the CM put the id in TIMEWAIT, and a second call is the
# product's -EALREADY. Then the same for a DREP; the peer's retried DREQ
# then gets the CM's own DREP (with the product's data while the id is in
# TIMEWAIT, without once it left: the CM's timing, logged).
test_promise_failed_message_returned() {
	local n=340 p=$((340 + PASSIVE_BASE)) m=341 q=$((341 + PASSIVE_BASE)) x
	[ -w /sys/kernel/debug/failslab/verbose ] ||
		{ fail "no failslab: a kernel without CONFIG_FAILSLAB"; return 1; }
	cm_pair $m drep_after=600000 && cm_pair $n || return 1
	ctl post $n 8 || return 1
	cm_trace_on || return 1
	failslab_quiet 1
	consumer nomem $n; x=$?
	failslab_quiet 2
	[ $x = 0 ] || return 1
	check "failslab forced the failure" \
		dmesg_has 'FAULT_INJECTION: forcing a failure' || return 1
	check "the QP's 8 receives flushed" wait_for 20 flushed_is $n 8 || return 1
	cm_trace_none icm_send_dreq "local_id=$(cm_local_id $n)" || return 1
	check "the peer got nothing" test "$(event_count $p DREQ_RECEIVED)" = 0 || return 1
	# The DREP: the peer's DREQ first.
	ctl dreq $m text:ask || return 1
	wait_event 30 $q DREQ_RECEIVED || return 1
	failslab_quiet 1
	consumer nomem $q; x=$?
	failslab_quiet 2
	[ $x = 0 ] || return 1
	check "the consumer saw a DREP fail" dmesg_has 'rcd_consumer: nomem: DREP' || return 1
	wait_event 60 $m DREP_RECEIVED || return 1
	log "the peer's DREP data: $(event_field $m DREP_RECEIVED data | cut -c1-16)..."
}

# The QP's modify fails: the product still sends the DREQ, and returns the
# QP's error (-EIO, ib_modify_qp()'s result replaced by a kretprobe).
test_promise_failed_qp_returned() {
	local n=350 p=$((350 + PASSIVE_BASE))
	cm_pair $n || return 1
	consumer qpfail $n || return 1
	wait_event 30 $p DREQ_RECEIVED || return 1
	check "the peer got 'qpfail'" \
		test "$(event_field $p DREQ_RECEIVED data)" = "$(field_hex qpfail 220)"
}

# window_is V: the consumer's cross step is in its window (1) or past it (2).
window_is() {
	local w
	read -r w 2>/dev/null < /sys/module/rcd_consumer/parameters/window && [ "$w" = "$1" ]
}

# The crossing fallback: the peer's DREQ lands between the product's read
# of the state (ESTABLISHED) and its DREQ. The consumer holds the call at
# the entry of ib_send_cm_dreq() (window 1); the peer's DREQ, sent first
# and dropped on the wire, gets through on the CM's next try only then.
# The CM refuses the product's DREQ (icm_dreq_skipped), the product answers
# with a DREP instead and returns 0, and it never sends a DREQ. Over the
# veth (rxe1's DREQ can be dropped alone), with 1 s tries, 16 of them.
test_promise_crossing_answered_with_drep() {
	local n=360 p=$((360 + PASSIVE_BASE)) id pid rc
	cm_base
	# The peer's DREQ is tried 16 times, 4 s apart (resp=20): it must
	# outlast the consumer's load and the window's poll in a slowed guest
	# (resp=18, 1 s apart, ran out there before the window opened).
	CONNECT_OPTS="resp=20 retries=15" cm_pair2 $n drep_after=600000 || return 1
	id=$(cm_local_id $n) || return 1
	cm_trace_on || return 1
	[ -d /sys/module/sch_netem ] || modprobe sch_netem || return 1
	tc qdisc add dev v1 root netem loss 100% || return 1
	ctl dreq $p text:peer || return 1
	insmod "$CONSUMER" conn=$n steps=cross &
	pid=$!
	# Nothing of the harness's is read in the window: the consumer holds
	# its table (rcd_test_with_conn()) until the call returns.
	if ! wait_for 60 window_is 1; then
		fail "the consumer never reached the window"
		tc qdisc del dev v1 root; wait $pid; return 1
	fi
	tc qdisc del dev v1 root || return 1
	wait $pid; rc=$?
	dmesg_test | grep 'rcd_consumer: cross' | sed 's/^/# /'
	check "the consumer ran" test $rc = 0 || return 1
	check "no failures" test "$(consumer_failures)" = 0 || return 1
	rmmod rcd_consumer || return 1
	wait_event 30 $p DREP_RECEIVED || return 1
	check "the peer's DREQ took a retry (it waited on the wire)" \
		counter_ge rxe1 cm_tx_retries dreq 1 || return 1
	cm_trace_expect 1 icm_dreq_skipped "local_id=$id" || return 1
	cm_trace_none icm_send_dreq "local_id=$id" || return 1
	cm_trace_expect 1 icm_send_drep "local_id=$id" || return 1
	check "the peer got the DREP with 'cross'" \
		test "$(event_field $p DREP_RECEIVED data)" = "$(field_hex cross 224)"
}
