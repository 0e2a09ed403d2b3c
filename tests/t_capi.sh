# SPDX-License-Identifier: GPL-2.0
#
# The exported C API, used by a C consumer module (tests/modules/
# rcd_consumer.c) that includes include/rust_cm_disconnect.h, and reaches
# the module's own connections through the test-only rcd_test_with_conn()
# (tests/modules/rcd_test.h, symbol namespace RCD_TEST).

CONSUMER=$RCD_MODS/rcd_consumer.ko

# The consumer's lines in this test's kernel log (dmesg_test): a line an
# earlier test left must not count.
consumer_failures() { dmesg_test | grep -c 'rcd_consumer: FAIL'; }

test_capi_exports_and_dependency() {
	local f
	if insmod "$CONSUMER" conn=1 2>/dev/null; then
		fail "consumer loaded without the module"
		return 1
	fi
	rxe_add rxe0 v0 && rcd_load || return 1
	for f in rcd_send_dreq rcd_send_drep rcd_disconnect; do
		check "$f in kallsyms" \
			grep -qE " $f\s+\[rust_cm_disconnect\]" /proc/kallsyms || return 1
	done
	# The test-only entry point is the harness's, not the product's.
	check "rcd_test_with_conn in kallsyms, the harness's" \
		grep -qE " rcd_test_with_conn\s+\[rcd_harness\]" /proc/kallsyms || return 1
	# No function hands out a pointer the module may free: the old
	# rcd_conn_borrow() is gone from the header and the exports.
	check "no rcd_conn_borrow in the public header" \
		sh -c "! grep -q rcd_conn_borrow $RCD_TOP/include/rust_cm_disconnect.h" || return 1
	check "no rcd_conn_borrow exported" \
		sh -c "! grep -qE ' rcd_conn_borrow\s' /proc/kallsyms" || return 1
	check "rcd_test_with_conn only in namespace RCD_TEST" \
		sh -c "modinfo -F import_ns $CONSUMER | grep -qx RCD_TEST" || return 1
	check "consumer depends on the module" \
		sh -c "modinfo -F depends $CONSUMER | tr , '\\n' |
			grep -qx rust_cm_disconnect" || return 1
	ctl listen 1 rxe0 0x1000 || return 1
	check "a listener's QP is refused" \
		sh -c "! insmod $CONSUMER conn=1 steps=bad 2>/dev/null" || return 1
	check "the listener has no QP: -ENODEV" \
		dmesg_has 'rcd_consumer: cannot run on connection 1: -19$' || return 1
}

# Bad inputs through the C API: lengths 221 .. SIZE_MAX, NULL with a length,
# NULL ids, a DREP in the wrong state. Nothing reaches the wire, the
# connection stays ESTABLISHED, and the module cannot be unloaded under its
# consumer.
test_capi_bad_inputs() {
	local n=200 p=$((200 + PASSIVE_BASE))
	cm_pair $n || return 1
	insmod "$CONSUMER" conn=$n steps=bad,drep || return 1
	dmesg_test | grep 'rcd_consumer:' | tail -3 | sed 's/^/# /'
	check "no failures" test "$(consumer_failures)" = 0 || return 1
	check "every check ran" dmesg_has 'rcd_consumer: done, 0 failure' || return 1
	check "still ESTABLISHED" test "$(conn_state $n)" = ESTABLISHED || return 1
	check "the peer saw nothing" \
		sh -c "! grep -q '^$p DREQ_RECEIVED' $RCD_DBG/events" || return 1
	check "unloading the module under its consumer is refused" \
		sh -c "! rmmod rust_cm_disconnect 2>/dev/null" || return 1
	check "still loaded" rcd_loaded || return 1
	rmmod rcd_consumer || return 1
	ctl dreq $n text:after || return 1
	wait_event 20 $p DREQ_RECEIVED
}

# rcd_disconnect() from C on a live connection: the QP flushes, the peer gets
# the DREQ with the C caller's bytes, a second call is -EALREADY.
test_capi_disconnect_live() {
	local n=210 p=$((210 + PASSIVE_BASE))
	cm_pair $n || return 1
	ctl post $n 8 || return 1
	insmod "$CONSUMER" conn=$n steps=disc || return 1
	check "no failures" test "$(consumer_failures)" = 0 || return 1
	wait_event 20 $p DREQ_RECEIVED || return 1
	check "the peer got 'from-c' (the whole 220-byte field)" \
		test "$(event_field $p DREQ_RECEIVED data)" = "$(field_hex from-c 220)" || return 1
	ctl poll $n || return 1
	check "8 flushed" test "$(conn_field $n flushed)" = 8 || return 1
	rmmod rcd_consumer || return 1
	ctl disconnect $p || return 1
	wait_event 20 $n DREP_RECEIVED
}

# rcd_disconnect() from C after the peer destroyed its id: the call itself
# succeeds (the peer's CM answers a DREQ for an unknown id with a DREP of
# its own, or the DREQ times out), and the connection ends.
test_capi_peer_gone() {
	local n=220 p=$((220 + PASSIVE_BASE)) rx0
	cm_base
	cm_pair $n || return 1
	rx0=$(cm_counter rxe0 cm_rx_msgs dreq)
	ctl close $p || return 1
	after_peer_destroy $n $rx0 || return 1
	local st
	st=$(conn_state $n)
	log "after the peer's destroy: $st"
	# The path under test needs a connection the peer has left: our end is
	# ESTABLISHED (the peer's DREQ was cancelled) or DREQ_RCVD (it came).
	# Anything else skips rcd_disconnect() altogether: a failure, not a pass.
	case $st in
	ESTABLISHED|DREQ_RCVD) ;;
	*) fail "unexpected state $st: rcd_disconnect() not exercised"; return 1 ;;
	esac
	insmod "$CONSUMER" conn=$n steps=gone || return 1
	check "no failures" test "$(consumer_failures)" = 0 || return 1
	rmmod rcd_consumer || return 1
	wait_event 60 $n TIMEWAIT_EXIT || return 1
	log "events: $(grep "^$n " $RCD_DBG/events | awk '{print $2}' | tr '\n' ' ')"
	check "one DISCONNECTED" test "$(event_count $n DISCONNECTED)" = 1
}

# Calls from atomic context: the functions that may sleep begin with
# might_sleep(), so that the debug kernel reports the wrong-context caller
# (with interrupts off, and under a spinlock); rcd_send_dreq() works under
# a spinlock without a report, as ib_send_cm_dreq() does. The consumer
# provokes the reports with arguments refused right after might_sleep()
# (nothing sleeps in atomic context); they lie in a window of the log that
# this test checks and dmesg_clean skips. Any other report fails the run.
test_capi_atomic_context() {
	local n=230 p=$((230 + PASSIVE_BASE)) rc win
	cm_pair $n || return 1
	expect_reports_begin
	insmod "$CONSUMER" conn=$n steps=atomic; rc=$?
	expect_reports_end
	check "the consumer loaded" test $rc = 0 || return 1
	dmesg_test | grep 'rcd_consumer:' | tail -5 | sed 's/^/# /'
	check "no failures" test "$(consumer_failures)" = 0 || return 1
	check "every check ran" dmesg_has 'rcd_consumer: done, 0 failure' || return 1
	win=$(expected_reports)
	# In each report's backtrace, the first of the API's functions above
	# the consumer's step (run_steps, where step_atomic is inlined) is the
	# one called in the wrong context (or its helper checked_send, where
	# that is not inlined).
	local callers sleeping='BUG: sleeping function called from invalid context'
	callers=$(awk '/BUG: sleeping function called from invalid context/ {
			on = 1; ct = 0; f = ""; next
		}
		on && /Call Trace:/ { ct = 1; next }
		ct && f == "" &&
		match($0, /checked_send|rcd_(rs_)?(send_drep|disconnect|test_with_conn)/) {
			f = substr($0, RSTART, RLENGTH)
		}
		ct && /run_steps|step_atomic/ { print f; on = ct = 0 }' <<<"$win" |
		sed 's/checked_send/rcd_send_drep/; s/rcd_rs_/rcd_/' | tr '\n' ' ')
	log "wrong-context reports, by the function called: $callers"
	awk '/BUG: sleeping function/ { n++ }
		n == 1 && /Call Trace:/ { on = 1 }
		on && /run_steps|step_atomic/ { print; exit }
		on' <<<"$win" | sed 's/^/#   first report: /'
	check "three might_sleep() reports" \
		test "$(grep -c "$sleeping" <<<"$win")" = 3 || return 1
	check "from the DREP, the disconnect and with_conn, in that order" \
		test "$callers" = "rcd_send_drep rcd_disconnect rcd_test_with_conn " || return 1
	check "nothing else reported" test -z \
		"$(grep -E "$DMESG_BAD" <<<"$win" | grep -vE "$sleeping|Call Trace")" || return 1
	rmmod rcd_consumer || return 1
	wait_event 20 $p DREQ_RECEIVED || return 1
	check "the peer got 'atomic' (the whole 220-byte field)" \
		test "$(event_field $p DREQ_RECEIVED data)" = "$(field_hex atomic 220)" || return 1
	# Had a refused call reached the CM (the disconnect's DREQ, with no
	# data), it would have come first and the later DREQ would have failed.
	check "exactly one DREQ" test "$(event_count $p DREQ_RECEIVED)" = 1
}

# An id the module has freed or closed is not lent out: a consumer asking
# for a closed connection gets -ENOENT. (A consumer's own destroyed id is a
# dangling pointer: no callee can detect that; see the README.)
test_capi_closed_connection() {
	local n=240
	cm_pair $n || return 1
	ctl close $n || return 1
	check "a closed connection is refused" \
		sh -c "! insmod $CONSUMER conn=$n steps=dreq 2>/dev/null" || return 1
	check "-ENOENT" dmesg_has "rcd_consumer: cannot run on connection $n: -2\$"
}
