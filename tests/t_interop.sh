# SPDX-License-Identifier: GPL-2.0
#
# Interop with rdma-core's own tools (rdmacm-utils, librdmacm in user space)
# over rxe: the module speaks rdma_cm's wire format (service ids of the TCP
# port space, a cma_hdr at the start of the REQ's private data).

interop_setup() {
	command -v cmtime >/dev/null && command -v ucmatose >/dev/null ||
		{ echo "# SKIP rdmacm-utils not installed (scripts/setup.sh installs it)"; return $KSFT_SKIP; }
	rxe_add rxe0 v0 && rcd_load
}

# foreign_established: waits for listener 1's passive end of a user-space
# peer's REQ to be established; its number is then in FOREIGN.
foreign_established() {
	wait_for 30 sh -c "grep -q ' listener=1 ' $RCD_DBG/conns" || fail "no passive end" || return 1
	FOREIGN=$(awk '/ listener=1 / {print $1}' "$RCD_DBG/conns")
	wait_event 20 "$FOREIGN" ESTABLISHED
}

# cmtime connects 100 connections to the module as server and disconnects
# them: every one established, every DREQ answered, cmtime exits 0.
test_interop_cmtime_client_100() {
	interop_setup || return
	ctl listen 1 rxe0 tcp:7471 cma=1 auto_drep=- || return 1
	timeout 300 cmtime -s 10.77.0.1 -p 7471 -c 100 > /tmp/cmtime.out 2>&1
	local rc=$?
	grep -E 'connect|disconnect' /tmp/cmtime.out | sed 's/^/# cmtime: /'
	check "cmtime exits 0 (got $rc)" test $rc = 0 || return 1
	check "100 passive ends" test "$(grep -c ' listener=1 ' $RCD_DBG/conns)" = 100 || return 1
	check "100 DREQs received" test "$(count_events DREQ_RECEIVED)" = 100 || return 1
	check "100 DREPs sent" test "$(grep -c ' DREP_SENT status=0 ' $RCD_DBG/events)" = 100 || return 1
	check "all timewait exits" wait_for 60 sh -c "[ \$(grep -c ' TIMEWAIT_EXIT ' $RCD_DBG/events) = 100 ]" || return 1
	check "ids freed" test "$(rcd_stat cm_ids_live)" = 1
}

# The module as client of rdma_cm servers: cmtime -b and ucmatose (server
# mode) accept it; the module disconnects and gets their DREP.
test_interop_module_client() {
	local pid
	interop_setup || return
	timeout 120 cmtime -b 10.77.0.1 -p 7472 -c 1 >/dev/null 2>&1 & pid=$!
	wait_for 60 cma_listening 7472 || fail "cmtime -b not listening" || return 1
	ctl connect 2 rxe0 10.77.0.1 10.77.0.1 tcp:7472 cma_port=5000 || return 1
	wait_event 20 2 ESTABLISHED || return 1
	ctl disconnect 2 text:from-module || return 1
	wait_event 20 2 DREP_RECEIVED || return 1
	log "cmtime -b: accepted, answered the DREQ"
	# cmtime's server waits for more than this one connection: stop it.
	kill $pid 2>/dev/null; wait $pid 2>/dev/null

	timeout 120 ucmatose -b 10.77.0.1 -p 7475 -c 1 -C 0 > /tmp/ucmatose-srv.out 2>&1 & pid=$!
	wait_for 60 cma_listening 7475 || fail "ucmatose not listening" || return 1
	ctl connect 3 rxe0 10.77.0.1 10.77.0.1 tcp:7475 cma_port=5001 || return 1
	wait_event 20 3 ESTABLISHED || return 1
	ctl disconnect 3 || return 1
	wait_event 20 3 DISCONNECTED || return 1
	wait $pid; local rc=$?
	sed 's/^/# ucmatose server: /' /tmp/ucmatose-srv.out
	check "ucmatose server exits 0 (got $rc)" test $rc = 0
}

# ucmatose as client; the module initiates the disconnect: ucmatose sees
# DISCONNECTED, answers with its own rdma_disconnect (a DREP) and exits 0.
test_interop_ucmatose_client() {
	local pid p rc
	interop_setup || return
	ctl listen 1 rxe0 tcp:7473 cma=1 || return 1
	timeout 120 ucmatose -s 10.77.0.1 -p 7473 -c 1 -C 0 > /tmp/ucmatose.out 2>&1 & pid=$!
	foreign_established || return 1; p=$FOREIGN
	ctl disconnect $p text:module-says-bye || return 1
	wait_event 20 $p DREP_RECEIVED || return 1
	wait $pid; rc=$?
	sed 's/^/# ucmatose: /' /tmp/ucmatose.out
	check "ucmatose exits 0 (got $rc)" test $rc = 0 || return 1
	check "one DISCONNECTED" test "$(event_count $p DISCONNECTED)" = 1
}

# Data between the module and ucmatose: ucmatose (client, 4 messages) posts
# its receives before connecting and moves on ("sending replies") only once
# 4 messages have arrived; the module sends 4 (zero-length) SENDs and sees
# them acknowledged. ucmatose's own 100-byte messages find no receive here
# (the module's receives have no buffer) and wait in RNR retries until the
# module disconnects; ucmatose then answers the DREQ and exits 0.
test_interop_ucmatose_data() {
	local pid p rc
	interop_setup || return
	ctl listen 1 rxe0 tcp:7476 cma=1 || return 1
	# Line-buffered, so that its progress can be read while it runs.
	timeout 120 stdbuf -oL ucmatose -s 10.77.0.1 -p 7476 -c 1 -C 4 > /tmp/ucmatose-data.out 2>&1 & pid=$!
	foreign_established || return 1; p=$FOREIGN
	ctl post $p 0 4 || return 1
	check "our 4 SENDs acknowledged" wait_for 20 completed_is $p 4 || return 1
	if ! wait_for 20 grep -q "sending replies" /tmp/ucmatose-data.out; then
		kill $pid 2>/dev/null; wait $pid 2>/dev/null
		sed 's/^/# ucmatose: /' /tmp/ucmatose-data.out
		fail "ucmatose did not receive them"
		return 1
	fi
	ctl disconnect $p || return 1
	wait_event 20 $p DREP_RECEIVED || return 1
	wait $pid; rc=$?
	sed 's/^/# ucmatose: /' /tmp/ucmatose-data.out
	check "ucmatose exits 0 (got $rc)" test $rc = 0 || return 1
	check "no failed completion" test "$(conn_field $p failed)" = 0
}

# A REQ whose private data is not a valid cma_hdr is rejected by an
# rdma_cm-style listener and leaves nothing behind.
test_interop_bad_cma_hdr() {
	interop_setup || return
	ctl listen 1 rxe0 tcp:7474 cma=1 || return 1
	# Version 1, and then a cma_hdr claiming IPv6: both garbage here.
	ctl connect 2 rxe0 10.77.0.1 10.77.0.1 tcp:7474 req_data=hex:0140aaaa || return 1
	ctl connect 3 rxe0 10.77.0.1 10.77.0.1 tcp:7474 req_data=fill:36:60 || return 1
	# No cma_hdr at all (the module's own REQ format).
	ctl connect 4 rxe0 10.77.0.1 10.77.0.1 tcp:7474 || return 1
	wait_event 20 2 REJ_RECEIVED && wait_event 20 3 REJ_RECEIVED && wait_event 20 4 REJ_RECEIVED || return 1
	check "no passive end made" sh -c "! grep -q ' listener=1 ' $RCD_DBG/conns" || return 1
	check "the rejected ids are not established" test "$(count_state ESTABLISHED)" = 0 || return 1
	# A well-formed one is accepted.
	ctl connect 5 rxe0 10.77.0.1 10.77.0.1 tcp:7474 cma_port=6000 || return 1
	wait_event 20 5 ESTABLISHED
}
