# SPDX-License-Identifier: GPL-2.0
#
# samples/rust/rust_rdma_cm.rs, the series' sample user of kernel::rdma,
# with the harness as its peer: it accepts a REQ (its REP, then the RTU),
# logs the REQ's and the DREQ's private data, echoes a message, answers
# the DREQ with its DREP, frees the connection at timewait exit (its QP,
# not the device's one PD, which its other connection's QP shares and
# still echoes on), and disconnects what is still connected when it is
# unloaded. Then with
# rdma-core's clients: ucmatose and rdma_client.

SAMPLE_KO=$RCD_MODS/rust_rdma_cm.ko
# rdma_cm's service id of TCP port 21075 (the sample's SERVICE_ID).
SAMPLE_SID=0x01065253

# text_hex_padded TEXT BYTES: TEXT's bytes in hex, zeros up to BYTES.
text_hex_padded() {
	local h
	h=$(text_hex "$1")
	printf '%s' "$h"
	printf '%0*d' $(($2 * 2 - ${#h})) 0
}

# dmesg_count_ge ERE N: at least N lines since the test began match ERE.
dmesg_count_ge() { local REPLY; dmesg_count "$1" && [ "$REPLY" -ge "$2" ]; }

# sample_qps_are N: the sample's QPs (restrack names them after it).
sample_qps_are() { rdma_res_match '*comm \[rust_rdma_cm\]*' qp && [ "$REPLY" = "$1" ]; }

# sample_res_are KIND N [DEV]: the sample's PDs or CQs (one of each per
# device it listens on), on DEV if given.
sample_res_are() {
	rdma_res_match "dev ${3:-*} *comm \[rust_rdma_cm\]*" "$1" && [ "$REPLY" = "$2" ]
}

# sample_users_are KIND N: the users of the sample's PD or CQ on rxe0 (a
# PD's: its QPs; a CQ's: two per QP, its send and receive queues).
sample_users_are() {
	rdma_res_match "dev rxe0 * users $2 *comm \[rust_rdma_cm\]*" "$1" && [ "$REPLY" -gt 0 ]
}

# sample_shares N: rxe0's one PD and one CQ of the sample, with N QPs on
# them.
sample_shares() {
	sample_res_are pd 1 rxe0 && sample_users_are pd "$1" &&
		sample_res_are cq 1 rxe0 && sample_users_are cq $(($1 * 2))
}

# sample_load: the sample loaded, listening on rxe0. Built beside the
# tests out of tree (make), or by the kernel in tree
# (CONFIG_SAMPLE_RUST_RDMA_CM).
sample_load() {
	if [ -f "$SAMPLE_KO" ]; then
		insmod "$SAMPLE_KO" || { fail "insmod $SAMPLE_KO"; return 1; }
	else
		modprobe rust_rdma_cm ||
			{ fail "no $SAMPLE_KO, no rust_rdma_cm to modprobe"; return 1; }
	fi
	check "the sample listens on rxe0" \
		wait_for 10 dmesg_has 'rust_rdma_cm: listening on rxe0$'
}

test_sample_rdma_cm() {
	local got want
	# rxe1 too: the sample makes a PD and a CQ on each device it listens on.
	rxe_add rxe0 v0 && rxe_add rxe1 v1 && rcd_load && sample_load || return 1
	kcount ib_drain_qp on || return 1
	ctl connect 2 rxe0 10.77.0.1 10.77.0.1 $SAMPLE_SID req_data=text:hello-sample recv=1:64 &&
		ctl connect 3 rxe0 10.77.0.1 10.77.0.1 $SAMPLE_SID req_data=text:second recv=1:64 ||
		return 1
	wait_event 20 2 ESTABLISHED && wait_event 20 3 ESTABLISHED || return 1
	check "the sample's two QPs" sample_qps_are 2 ||
		{ rdma resource show qp | sed 's/^/# /'; return 1; }
	check "on rxe0's one PD and CQ (and rxe1 has its own)" wait_for 10 \
		eval 'sample_shares 2 && sample_res_are pd 2 && sample_res_are cq 2' ||
		{ { rdma resource show pd; rdma resource show cq; } | sed 's/^/# /'; return 1; }
	check "the sample logged the REQ's private data" \
		dmesg_has 'rust_rdma_cm: REQ on rxe0: hello-sample$' || return 1
	check "the RTU reached the sample" \
		wait_for 10 dmesg_count_ge 'rust_rdma_cm: connection 0x[0-9a-f]+ established$' 2 ||
		return 1
	ctl post 2 0 1 data=text:echo-me || return 1
	check "the sample echoed our message" wait_for 20 polled_is 2 rx_msgs 1 ||
		{ log "$(wr_line 2)"; return 1; }
	check "its 7 bytes" test "$(conn_field 2 rx_bytes)/$(conn_field 2 rx_last)" = \
		"7/$(text_hex echo-me)" || { log "$(wr_line 2)"; return 1; }
	check "the sample logged it" \
		dmesg_has 'rust_rdma_cm: received 7 bytes on 0x[0-9a-f]+$' || return 1
	ctl dreq 2 text:bye-sample && wait_event 20 2 DREP_RECEIVED || return 1
	got=$(event_field 2 DREP_RECEIVED data)
	want=$(text_hex_padded "rust_rdma_cm: bye" 224)
	check "the sample's DREP carries its private data" test "$got" = "$want" ||
		{ log "got ${got:0:80}..."; return 1; }
	check "the sample logged the DREQ's" \
		dmesg_has 'rust_rdma_cm: DREQ on 0x[0-9a-f]+: bye-sample$' || return 1
	check "the sample freed it at timewait exit" \
		wait_for 30 dmesg_has 'rust_rdma_cm: connection 0x[0-9a-f]+ freed$' || return 1
	# Its QP freed after ib_drain_qp(): nothing posted left to warn about.
	check "its QP drained by ib_drain_qp() ($(kcount_hits ib_drain_qp) calls), nothing left" \
		eval '[ "$(kcount_hits ib_drain_qp)" = 1 ] && ! dmesg_has "requests not flushed"' ||
		return 1
	kcount ib_drain_qp off
	check "its QP with it, not the PD and CQ connection 3 shares" wait_for 10 \
		eval 'sample_qps_are 1 && sample_shares 1' ||
		{ { rdma resource show pd; rdma resource show cq; } | sed 's/^/# /'; return 1; }
	# Connection 3's QP works on the PD and CQ the freed one shared.
	ctl post 3 0 1 data=text:still-here || return 1
	check "the sample echoes on connection 3" wait_for 20 polled_is 3 rx_msgs 1 ||
		{ log "$(wr_line 3)"; return 1; }
	# Unloaded with connection 3 up: its id's destroy sends the DREQ.
	rmmod rust_rdma_cm || { fail "rmmod rust_rdma_cm"; return 1; }
	check "unload disconnected connection 3 (its DREQ)" wait_event 20 3 DREQ_RECEIVED ||
		return 1
	check "the sample left no QP, PD or CQ" \
		wait_for 10 eval 'sample_qps_are 0 && sample_res_are pd 0 && sample_res_are cq 0'
}
timeout_test_sample_rdma_cm=120

# The sample with an rdma_cm client: rdma-core's ucmatose (rxe0 to
# itself), as it would connect to a server listening on TCP port 21075
# (the sample's service id is rdma_cm's for that port). No messages (-C 0:
# ucmatose's server side sends first, which the sample does not).
# ucmatose's client connects, then waits for the server to disconnect:
# the sample accepted the REQ with its cma header; its unload sends the
# DREQ, which ucmatose answers (its DISCONNECTED, rdma_disconnect()'s
# DREP) before it exits 0.
test_sample_rdma_cm_ucmatose() {
	local rc=0 bad=0 pid out=/tmp/sample-ucmatose.out
	command -v ucmatose >/dev/null ||
		{ echo "# SKIP ucmatose (rdmacm-utils) not installed"; return $KSFT_SKIP; }
	rxe_add rxe0 v0 && sample_load || return 1
	timeout 60 ucmatose -s 10.77.0.1 -p 21075 -C 0 -c 1 > $out 2>&1 & pid=$!
	check "the RTU reached the sample" wait_for 30 \
		dmesg_has 'rust_rdma_cm: connection 0x[0-9a-f]+ established$' || bad=1
	rmmod rust_rdma_cm || { fail "rmmod rust_rdma_cm"; bad=1; }
	wait $pid || rc=$?
	sed 's/^/#   ucmatose: /' $out
	# What the sample logged, on either outcome.
	dmesg_test | grep rust_rdma_cm | sed 's/^/#   /'
	# Its exit status is 0 only once its DISCONNECTED came (cmatose.c:
	# run_client, disconnect_events).
	check "ucmatose -C 0 against the sample exits 0 (got $rc)" test $rc = 0 || return 1
	[ $bad = 0 ] || return 1
	check "the sample's REQ callback ran" dmesg_has 'rust_rdma_cm: REQ on rxe0: ' ||
		return 1
	check "the sample left no QP" wait_for 10 sample_qps_are 0
}
timeout_test_sample_rdma_cm_ucmatose=120

# The sample with rdma-core's rdma_client (librdmacm's synchronous verbs
# example), as a server listening on TCP port 21075: rdma_client posts a
# 16-byte receive, connects, sends 16 bytes and waits for their SEND's and
# that receive's completions, then disconnects (rdma_client.c: run). The
# sample's echo answers the receive; its DREP, the DREQ.
test_sample_rdma_client() {
	local rc=0 out=/tmp/sample-rdma_client.out
	command -v rdma_client >/dev/null ||
		{ echo "# SKIP rdma_client (rdmacm-utils) not installed"; return $KSFT_SKIP; }
	rxe_add rxe0 v0 && sample_load || return 1
	kcount ib_drain_qp on || return 1
	timeout 60 rdma_client -s 10.77.0.1 -p 21075 > $out 2>&1 || rc=$?
	sed 's/^/#   rdma_client: /' $out
	dmesg_test | grep rust_rdma_cm | sed 's/^/#   /'
	# It ends 0 once a completion of its receive came: only our echo
	# completes it before its own disconnect.
	check "rdma_client ended 0 (status $rc)" grep -qx 'rdma_client: end 0' $out || return 1
	# (The echo's own completion may be a flush: rdma_client disconnects
	# as soon as the echo arrived, and the sample's DREQ handler moves its
	# QP to error, maybe before the ACK is processed; see
	# send_came_back_once.)
	check "the sample received its 16 bytes" \
		dmesg_has 'rust_rdma_cm: received 16 bytes on 0x[0-9a-f]+$' || return 1
	check "its DREQ reached the sample" \
		wait_for 10 dmesg_has 'rust_rdma_cm: DREQ on 0x[0-9a-f]+: ?$' || return 1
	check "the sample freed it at timewait exit" \
		wait_for 30 dmesg_has 'rust_rdma_cm: connection 0x[0-9a-f]+ freed$' || return 1
	# Its QP freed after ib_drain_qp(): nothing posted left to warn about.
	check "its QP drained by ib_drain_qp() ($(kcount_hits ib_drain_qp) calls), nothing left" \
		eval '[ "$(kcount_hits ib_drain_qp)" = 1 ] && ! dmesg_has "requests not flushed"' ||
		return 1
	kcount ib_drain_qp off
	check "the sample left no QP" wait_for 10 sample_qps_are 0
}
timeout_test_sample_rdma_client=120
