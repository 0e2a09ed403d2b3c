# SPDX-License-Identifier: GPL-2.0
#
# Interop with rdma-core's own tools (rdmacm-utils, librdmacm in user space)
# over rxe: the module speaks rdma_cm's wire format (service ids of the TCP
# port space, a cma_hdr at the start of the REQ's private data).

interop_setup() {
	command -v cmtime >/dev/null && command -v ucmatose >/dev/null ||
		{ echo "# SKIP rdmacm-utils not installed (scripts/setup.sh installs it)"
		  return $KSFT_SKIP; }
	rxe_add rxe0 v0 && rcd_load
}

# foreign_established: waits for listener 1's passive end of a user-space
# peer's REQ to be established; its number is then in FOREIGN.
foreign_established() {
	wait_for 30 text_in "$RCD_DBG/conns" ' listener=1 ' ||
		fail "no passive end" || return 1
	FOREIGN=$(awk '/ listener=1 / {print $1}' "$RCD_DBG/conns")
	wait_event 20 "$FOREIGN" ESTABLISHED
}

# cmtime connects 100 connections to the module as server and disconnects
# them: every one established, every DREQ answered, cmtime exits 0.
test_interop_cmtime_client_100() {
	cm_base
	interop_setup || return
	ctl listen 1 rxe0 tcp:7471 cma=1 auto_drep=- || return 1
	timeout 300 cmtime -s 10.77.0.1 -p 7471 -c 100 > /tmp/cmtime.out 2>&1
	local rc=$?
	grep -E 'connect|disconnect' /tmp/cmtime.out | sed 's/^/# cmtime: /'
	check "cmtime exits 0 (got $rc)" test $rc = 0 || return 1
	check "100 passive ends" test "$(grep -c ' listener=1 ' $RCD_DBG/conns)" = 100 || return 1
	check "100 DREQs received" test "$(count_events DREQ_RECEIVED)" = 100 || return 1
	check "100 DREPs sent" \
		test "$(grep -c ' DREP_SENT status=0 ' $RCD_DBG/events)" = 100 || return 1
	check "all timewait exits" wait_for 60 \
		sh -c "[ \$(grep -c ' TIMEWAIT_EXIT ' $RCD_DBG/events) = 100 ]" || return 1
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

# The payload tests' sizes: rxe's path MTU on a 1500-byte veth (1024), and
# rdma_client/rdma_server's fixed 16-byte messages.
MTU=1024

# peer_done PID FILE WHAT: waits for a peer tool to exit, prints its output
# and checks its exit status 0.
peer_done() {
	local rc
	wait "$1"; rc=$?
	sed "s/^/# $3: /" "$2"
	check "$3 exits 0 (got $rc)" test $rc = 0
}

# one_dreq_drep: over the one device every message of both sides is counted
# on rxe0: exactly one DREQ and one DREP left (retries not counted). The CM
# counts a DREQ when its send completes, which is when the DREP arrives: a
# tool that exits right after its DREQ may be done before that, so the
# counts are awaited (10 s), then compared. One DREP more for each copy of
# the DREQ the answering side saw twice: a DREQ answered after its 4 s try
# is sent again, and the CM answers the copy from timewait (cm.c,
# cm_dreq_handler) with a DREP of its own, as it must.
dreq_drep_counted() { [ "$(sent rxe0 dreq)" -ge 1 ] && [ "$(sent rxe0 drep)" -ge 1 ]; }
one_dreq_drep() {
	local q p d
	wait_for 10 dreq_drep_counted
	q=$(sent rxe0 dreq); p=$(sent rxe0 drep); d=$(cm_counter rxe0 cm_rx_duplicates dreq)
	check "one DREQ on the wire ($q)" test "$q" = 1 || return 1
	check "one DREP, and one more for each DREQ seen twice ($p; $d seen twice)" \
		drep_sent_once 0 0
}

# ucmatose as client with payloads (-C 10 -S MTU): it posts its receives,
# connects, waits for 10 messages, then sends 10 replies, which land in the
# receives the module posted before its REP (ucmatose's SENDs have no RNR
# retries). The module sends its 10 first, disconnects once all 10 replies
# have arrived; ucmatose sees DISCONNECTED, answers with its DREP, exits 0.
test_interop_ucmatose_data() {
	local pid p t0 k=10
	cm_base
	interop_setup || return
	ctl listen 1 rxe0 tcp:7476 cma=1 recv=$k:$MTU || return 1
	t0=$SECONDS
	timeout 120 stdbuf -oL ucmatose -s 10.77.0.1 -p 7476 -c 1 -C $k -S $MTU \
		> /tmp/ucmatose-data.out 2>&1 & pid=$!
	foreign_established || return 1; p=$FOREIGN
	ctl post $p 0 $k size=$MTU || return 1
	check "our $k SENDs acknowledged, its $k received" \
		wait_for 30 polled_is $p completed $((2 * k)) || return 1
	log "$k x $MTU B each way in $((SECONDS - t0)) s: $(wr_line $p)"
	check "$((k * MTU)) bytes in $k messages" test \
		"$(conn_field $p rx_bytes)/$(conn_field $p rx_msgs)" = "$((k * MTU))/$k" || return 1
	ctl disconnect $p || return 1
	wait_event 20 $p DREP_RECEIVED || return 1
	# ucmatose exits 0 only once it has seen its DISCONNECTED.
	peer_done $pid /tmp/ucmatose-data.out ucmatose || return 1
	check "one DISCONNECTED here" test "$(event_count $p DISCONNECTED)" = 1 || return 1
	one_dreq_drep && balanced $p
}

# ucmatose as server with payloads: the module connects with its 10
# receives posted before the REQ; ucmatose sends 10 messages as soon as it
# is established, waits for its sends and for 10 from the module, then
# disconnects. The module answers the DREQ (auto_drep), ucmatose sees
# DISCONNECTED and exits 0.
test_interop_ucmatose_server_data() {
	local pid t0 k=10
	cm_base
	interop_setup || return
	timeout 120 stdbuf -oL ucmatose -b 10.77.0.1 -p 7477 -c 1 -C $k -S $MTU \
		> /tmp/ucmatose-srvdata.out 2>&1 & pid=$!
	wait_for 60 cma_listening 7477 || fail "ucmatose not listening" || return 1
	t0=$SECONDS
	ctl connect 4 rxe0 10.77.0.1 10.77.0.1 tcp:7477 cma_port=5002 recv=$k:$MTU auto_drep=- ||
		return 1
	wait_event 20 4 ESTABLISHED || return 1
	check "its $k messages arrived" wait_for 30 polled_is 4 rx_msgs $k || return 1
	ctl post 4 0 $k size=$MTU || return 1
	wait_event 30 4 DREQ_RECEIVED || return 1
	log "$k x $MTU B each way, then its DREQ, in $((SECONDS - t0)) s"
	# ucmatose exits 0 only once it has seen its DISCONNECTED.
	peer_done $pid /tmp/ucmatose-srvdata.out "ucmatose server" || return 1
	# Freed at timewait exit: what was still on the CQ is counted by then.
	wait_event 30 4 TIMEWAIT_EXIT || return 1
	log "$(wr_line 4)"
	check "$((k * MTU)) bytes received, $k sent" test \
		"$(conn_field 4 rx_bytes)/$(conn_field 4 tx_msgs)" = "$((k * MTU))/$k" || return 1
	check "one DISCONNECTED here" test "$(event_count 4 DISCONNECTED)" = 1 || return 1
	one_dreq_drep && balanced 4
}

# send_came_back_once NUM: NUM posted one receive, which completed, and one
# SEND, which came back once, completed or flushed. rdma_client and
# rdma_server take our 16 bytes (each ends 0 only after that receive
# completed) and disconnect soon after. Their rxe responder posts the
# receive's CQE first and sends the ACK after it, unless the QP is in
# error by then (rxe_resp.c, do_complete); and our DREQ handler may move
# our QP to error before an ACK that came is processed. So our SEND may be
# flushed though it arrived (seen on 7.3, whose rxe work items are
# preemptible: rdma_client, and rdma_server in a CI run).
send_came_back_once() {
	local tx fl n rx what
	tx=$(conn_field $1 tx_msgs) fl=$(conn_field $1 flushed) n=$(conn_field $1 posted)
	rx=$(conn_field $1 rx_msgs)
	what="our SEND came back once, completed or flushed (tx_msgs=$tx flushed=$fl"
	what+=" posted=$n rx_msgs=$rx)"
	check "$what" test "$n/$rx/$((tx + fl))" = 2/1/1
}

# rdma_client (librdmacm's synchronous verbs example) against the module:
# it posts a 16-byte receive, connects, sends 16 bytes, waits for that SEND
# and for the module's 16 bytes, then disconnects and exits.
test_interop_rdma_client() {
	local pid p t0
	cm_base
	command -v rdma_client >/dev/null ||
		{ echo "# SKIP rdma_client not installed"; return $KSFT_SKIP; }
	interop_setup || return
	ctl listen 1 rxe0 tcp:7478 cma=1 recv=1:16 auto_drep=- || return 1
	t0=$SECONDS
	timeout 120 rdma_client -s 10.77.0.1 -p 7478 > /tmp/rdma_client.out 2>&1 & pid=$!
	foreign_established || return 1; p=$FOREIGN
	check "its 16 bytes arrived" wait_for 30 polled_is $p rx_msgs 1 || return 1
	ctl post $p 0 1 data=text:from-the-module || return 1
	wait_event 30 $p DREQ_RECEIVED || return 1
	log "16 B each way, then its DREQ, in $((SECONDS - t0)) s"
	peer_done $pid /tmp/rdma_client.out rdma_client || return 1
	check "rdma_client ended with 0" \
		grep -q 'rdma_client: end 0' /tmp/rdma_client.out || return 1
	wait_event 30 $p TIMEWAIT_EXIT || return 1
	log "$(wr_line $p)"
	check "its message: 16 zero bytes" test \
		"$(conn_field $p rx_bytes)/$(conn_field $p rx_last)" = "16/$(pat_hex 0 16)" ||
		return 1
	send_came_back_once $p || return 1
	check "one DISCONNECTED here" test "$(event_count $p DISCONNECTED)" = 1 || return 1
	one_dreq_drep && balanced $p
}

# rdma_server against the module as client: it posts a 16-byte receive,
# accepts, waits for the module's message, sends 16 bytes back, then
# disconnects and exits.
test_interop_rdma_server() {
	local pid t0
	cm_base
	command -v rdma_server >/dev/null ||
		{ echo "# SKIP rdma_server not installed"; return $KSFT_SKIP; }
	interop_setup || return
	timeout 120 rdma_server -s 10.77.0.1 -p 7479 > /tmp/rdma_server.out 2>&1 & pid=$!
	wait_for 60 cma_listening 7479 || fail "rdma_server not listening" || return 1
	t0=$SECONDS
	ctl connect 5 rxe0 10.77.0.1 10.77.0.1 tcp:7479 cma_port=5003 recv=1:16 auto_drep=- ||
		return 1
	wait_event 20 5 ESTABLISHED || return 1
	ctl post 5 0 1 size=16 || return 1
	wait_event 30 5 DREQ_RECEIVED || return 1
	log "16 B each way, then its DREQ, in $((SECONDS - t0)) s"
	peer_done $pid /tmp/rdma_server.out rdma_server || return 1
	check "rdma_server ended with 0" \
		grep -q 'rdma_server: end 0' /tmp/rdma_server.out || return 1
	wait_event 30 5 TIMEWAIT_EXIT || return 1
	log "$(wr_line 5)"
	check "its message: 16 zero bytes" test \
		"$(conn_field 5 rx_bytes)/$(conn_field 5 rx_last)" = "16/$(pat_hex 0 16)" ||
		return 1
	send_came_back_once 5 || return 1
	check "one DISCONNECTED here" test "$(event_count 5 DISCONNECTED)" = 1 || return 1
	one_dreq_drep && balanced 5
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
	wait_event 20 2 REJ_RECEIVED && wait_event 20 3 REJ_RECEIVED &&
		wait_event 20 4 REJ_RECEIVED || return 1
	check "no passive end made" sh -c "! grep -q ' listener=1 ' $RCD_DBG/conns" || return 1
	check "the rejected ids are not established" \
		test "$(count_state ESTABLISHED)" = 0 || return 1
	# A well-formed one is accepted.
	ctl connect 5 rxe0 10.77.0.1 10.77.0.1 tcp:7474 cma_port=6000 || return 1
	wait_event 20 5 ESTABLISHED
}
