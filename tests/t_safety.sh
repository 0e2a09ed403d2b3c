# SPDX-License-Identifier: GPL-2.0
#
# The edges of the ib_cm_id lifecycle: ids the CM makes on its
# own (SIDR), ids destroyed from their own callbacks while the module goes,
# a listener dropped in its own REQ callback, numbers reused while an old
# callback is in flight.

# safety_kmalloc_bytes: bytes in use in the caches the CM's ids live in
# (struct cm_id_private, its timewait info and work items: kmalloc-512, -1k,
# -2k), after shrinking them: KASAN keeps freed objects in its quarantine
# until their cache is shrunk (kasan_cache_shrink takes that cache's
# objects out of the quarantine), and would hide the frees. Only these
# three: the other caches' shrinking (some hundreds, each a walk of the
# whole quarantine under KASAN) does nothing for these counts (measured
# untraced, the test took 27 s either way: little time is saved here).
safety_kmalloc_bytes() {
	local f
	for f in /sys/kernel/slab/kmalloc-{512,1k,2k}/shrink; do echo 1 > "$f" 2>/dev/null; done
	nap 1
	for f in /sys/kernel/slab/kmalloc-{512,1k,2k}/shrink; do echo 1 > "$f" 2>/dev/null; done
	awk '$1 ~ /^kmalloc-(512|1k|2k)$/ { b += $2 * $4 } END { print b + 0 }' /proc/slabinfo
}

# SIDR REQs (rdma_cm's UD address resolution) to a listener of the module
# on the service id of UDP port 7174. The CM makes a new id for each SIDR
# REQ and hands it to the listener's handler. The module serves no UD
# service: every SIDR REQ must be answered with a rejecting SIDR REP at
# once, and no id may stay behind.
#  - rdma-core's udaddy (one UD "connection"): it must print
#    RDMA_CM_EVENT_UNREACHABLE with status 2 (IB_SIDR_REJECT); unanswered it
#    would wait 16 tries of 4 s.
#  - tests/sidr_flood.c: RCD_SIDR_REQS (default 200) SIDR REQs in flight
#    together from distinct ids (udaddy stops at its first answer); each
#    must be answered with IB_SIDR_REJECT within 60 s.
# Leak checks that see the CM's own ids (kmemleak cannot: the CM's tables
# still reference a leaked id): the CM's counters must show one SIDR REP
# sent per SIDR REQ received, and the caches the ids live in (kmalloc-512,
# -1k, -2k; read after shrinking every cache, which empties KASAN's
# quarantine) must grow by less than 100 KB over all the requests. A
# leaked SIDR id costs about 1.9 KB, so 200 would be ~380 KB;
# the check can fail on noise only if the rest of the kernel allocates
# 100 KB in those caches meanwhile (measured without a listener: 5 KB).
test_sidr_req_answered_no_id_left() {
	local n=${RCD_SIDR_REQS:-200} before after rx0 tx0 rx tx res t0
	local tol=$((100 * 1024)) bin=$RCD_TESTS/sidr_flood
	cm_base
	command -v udaddy >/dev/null ||
		{ echo "# SKIP udaddy (rdmacm-utils) not installed"; return $KSFT_SKIP; }
	# Built on the host with the module out of tree (scripts/prepare.sh), by
	# the selftests' make (TEST_GEN_PROGS_EXTENDED) in a kernel tree: gcc in
	# the guest costs about 25 s under TCG on the debug kernel.
	if [ ! -x "$bin" ]; then
		bin=/tmp/sidr_flood
		gcc -O1 -o $bin "$RCD_TESTS/sidr_flood.c" -lrdmacm ||
			{ echo "# SKIP cannot build sidr_flood.c (gcc, librdmacm-dev)"
			  return $KSFT_SKIP; }
	fi
	rxe_add rxe0 v0 && rcd_load || return 1
	ctl listen 1 rxe0 udp:7174 cma=1 || return 1
	t0=$SECONDS
	res=$(timeout 60 stdbuf -oL udaddy -s 10.77.0.1 -c 1 -C 0 2>&1)
	log "udaddy in $((SECONDS - t0)) s: $(echo "$res" | grep -E 'event|status' | tr '\n' ' ')"
	local udaddy=$res
	# Warmed up: caches, the CM's per-port state, the tool itself.
	$bin 10.77.0.1 7174 5 30 >/dev/null
	before=$(safety_kmalloc_bytes)
	rx0=$(cm_counter rxe0 cm_rx_msgs sidr_req); tx0=$(cm_counter rxe0 cm_tx_msgs sidr_rep)
	t0=$SECONDS
	res=$($bin 10.77.0.1 7174 $n 60)
	log "sidr_flood $n in $((SECONDS - t0)) s: $res"
	# The tool has its n answers; the CM counts a SIDR REP when its send
	# completes.
	wait_for 10 counter_ge rxe0 cm_tx_msgs sidr_rep $((tx0 + n))
	rx=$(( $(cm_counter rxe0 cm_rx_msgs sidr_req) - rx0 ))
	tx=$(( $(cm_counter rxe0 cm_tx_msgs sidr_rep) - tx0 ))
	log "CM counters: $rx SIDR REQs received, $tx SIDR REPs sent"
	# The ids go by kfree_rcu: the lowest of samples taken until two in a
	# row did not fall (up to 10 s), as peer_held_within_bound's settle.
	local cur flat=0 i
	after=$(safety_kmalloc_bytes)
	for ((i = 0; i < 10 && flat < 2; i++)); do
		cur=$(safety_kmalloc_bytes)
		if [ "$cur" -lt "$after" ]; then after=$cur; flat=0; else flat=$((flat + 1)); fi
	done
	log "kmalloc-512/1k/2k: $before -> $after bytes ($(( (after - before) / 1024 )) KB;" \
		"limit $((tol / 1024)) KB)"
	check "udaddy got IB_SIDR_REJECT" \
		grep -q 'RDMA_CM_EVENT_UNREACHABLE, error: 2$' <<< "$udaddy" || return 1
	check "every SIDR REQ rejected at once" test "$res" = \
		"sent $n rejected $n unsupported 0 accepted 0 timedout 0 errors 0" || return 1
	check "every SIDR REQ answered ($rx received, $tx SIDR REPs)" \
		test "$rx" -ge "$n" -a "$tx" = "$rx" || return 1
	check "the ids' caches grew by < $((tol / 1024)) KB" \
		test $((after - before)) -lt $tol || return 1
	check "only the listener's id is the module's" test "$(rcd_stat cm_ids_live)" = 1
}
timeout_test_sidr_req_answered_no_id_left=300

# close N + connect N while N's timewait-exit callback is in flight: the old
# callback must free only its own id, never the new N's. N's timewait-exit
# callback sleeps 10 s (on_timewait=sleep:10000) before it frees its id;
# close N meanwhile takes N out of the table and waits for that callback; a
# second writer connects a new N in the meantime. (4 s held what the test
# does inside the window, 1.5 to 3 s under TCG, with too little to spare
# for a guest two or three times slower.)
test_timewait_exit_frees_its_own_id_only() {
	local p=$((2 + PASSIVE_BASE)) pid rc
	cm_base
	CONNECT_OPTS="on_timewait=sleep:10000" cm_pair 2 auto_drep=- || return 1
	log "the first 2 established"
	ctl dreq 2 || return 1
	wait_event 20 2 TIMEWAIT_EXIT || return 1
	# The passive end goes (its timewait exit may be queued behind 2's
	# sleeping callback: the CM runs one callback at a time per CPU), so
	# that the new 2's passive end can take its number.
	ctl close $p || return 1
	( ctl close 2 ) & pid=$!
	# close takes 2 out of the table first, then waits for the callback
	# (asleep for 10 s): once 2 has left the table, close must still be
	# waiting.
	check "close 2 took 2 out of the table" \
		wait_for 10 conn_gone 2 || return 1
	check "close 2 waits for 2's timewait-exit callback" kill -0 $pid || return 1
	ctl connect 2 rxe0 10.77.0.1 10.77.0.1 0x1000 || return 1
	log "the new 2 sent its REQ"
	# The window: the new 2 exists while the old 2's callback is still
	# in flight (close still waits for it). Had the callback returned
	# first, nothing here would be tested.
	check "the window was reached: the new 2 made while close 2 still waits" \
		kill -0 $pid || return 1
	wait $pid; rc=$?
	check "close 2 returned 0 (got $rc)" test $rc = 0 || return 1
	log "close 2 returned; the new 2: state $(conn_state 2), events:" \
		"$(grep '^2 ' $RCD_DBG/events | awk '{print $2}' | tr '\n' ' ')"
	check "the new 2 established" wait_for 20 has_event 2 ESTABLISHED || return 1
	wait_event 20 $p ESTABLISHED || return 1
	# The old callback has returned (close waited for it, and destroying
	# an id waits for its callbacks): the new 2 must still have its id.
	check "the new 2 keeps its id (state $(conn_state 2))" \
		test "$(conn_state 2)" = ESTABLISHED || return 1
	ctl dreq 2 text:still-here || return 1
	wait_event 20 2 DREP_RECEIVED
}
timeout_test_timewait_exit_frees_its_own_id_only=120

# rmmod while timewait exits and DREQ callbacks are being delivered,
# RCD_UNLOAD_ROUNDS times: each time RCD_UNLOAD_CONNS connections (default 10: 20 ends). The
# passive ends' DREQ callbacks sleep 10 ms before their DREP (the listener's
# on_dreq). The active ends' timewait-exit callbacks sleep 100 ms before
# they free their ids (on_timewait=sleep:100) in even rounds, and 300 ms
# after they freed them (on_timewait=after:300) in odd ones: then each is
# still in module code while nothing refers to its id any more, the window
# of a past bug (an id dropped in its own callback, which unload
# did not wait for). The CM delivers callbacks one at a time per CPU, so
# about a second of timewait exits is in flight when the first is
# recorded; rmmod comes then (or 0.3 s later in the last two rounds of every
# four, so that four rounds meet each of the four timings once). rmmod
# returns, no QP is left, and the kernel reported nothing meanwhile (no
# BUG, Oops or KASAN report: module code run after unload; dmesg_clean
# checks the rest at the end).
test_unload_during_timewait_exits() {
	local rounds=${RCD_UNLOAD_ROUNDS:-20} k=${RCD_UNLOAD_CONNS:-10} r first=10 last
	local t0=$SECONDS qps tw tw_opt bad0 inwin=0
	last=$((first + k - 1))
	rxe_add rxe0 v0 || return 1
	# The kernel's own QPs (the MAD layer's), there before the module.
	qps=$(rdma_res qp)
	bad0=$(dmesg | grep -cE 'BUG:|Oops|KASAN')
	for ((r = 0; r < rounds; r++)); do
		rcd_load || return 1
		ctl listen 1 rxe0 0x1000 auto_drep=- on_dreq=sleep:10 || return 1
		tw_opt=on_timewait=sleep:100
		[ $((r % 2)) = 0 ] || tw_opt=on_timewait=after:300
		connect_range $first $last 10.77.0.1 $tw_opt || return 1
		wait_for 60 stat_above established $((2 * k - 1)) ||
			fail "round $r: $(rcd_stat established) of $((2 * k)) ends established" ||
			return 1
		ctl dreq $first-$last || return 1
		until text_in $RCD_DBG/events ' TIMEWAIT_EXIT '; do
			[ $((SECONDS - t0)) -lt 600 ] ||
				{ fail "round $r: no timewait exit"; return 1; }
			nap 0.05
		done
		[ $((r % 4)) -lt 2 ] || nap 0.3
		tw=$(text_count $RCD_DBG/events ' TIMEWAIT_EXIT ')
		rmmod rcd_harness || fail "round $r: rmmod" || return 1
		check "round $r: no QP of ours left" test "$(rdma_res qp)" = "$qps" || return 1
		# In the window: rmmod came while timewait exits were still being
		# delivered (some recorded, not all).
		[ "$tw" -ge $((2 * k)) ] || inwin=$((inwin + 1))
		log "round $r ($tw_opt): $((SECONDS - t0)) s, rmmod after $tw of" \
			"$((2 * k)) timewait exits recorded"
	done
	log "rmmod met timewait exits in flight in $inwin of $rounds rounds"
	check "the window was reached (rmmod during the timewait exits) at least once" \
		test $inwin -gt 0 || return 1
	# The callbacks that slept after freeing their ids have woken up by now.
	nap 1
	check "no BUG, Oops or KASAN report during the rounds" \
		test "$(dmesg | grep -cE 'BUG:|Oops|KASAN')" = "$bad0" || {
		dmesg | grep -E -A12 'BUG:|Oops|KASAN' | head -40 | sed 's/^/#   /'; return 1; }
	log "$rounds rounds of $k connections in $((SECONDS - t0)) s"
}
timeout_test_unload_during_timewait_exits=400

# A peer that sends REQs and never completes the handshake: its REP is
# never answered (on_rep=ignore: no RTU), or answered with a REJ
# (on_rep=reject). Each passive end's REP times out (REP_ERROR, after the
# 2 retries the REQ asks for, 64 ms apart) or is rejected, and the passive
# end frees its id and QP at once, keeping its record (state=FREED). Only the
# listener's and the active ends' ids and QPs stay; nothing after close.
test_failed_handshake_frees_passive_end() {
	local k=20 a=10 b qps ids
	b=$((a + k - 1))
	rxe_add rxe0 v0 && rcd_load || return 1
	qps=$(rdma_res qp)
	ctl listen 1 rxe0 0x1000 || return 1
	connect_range $a $((a + k / 2 - 1)) 10.77.0.1 on_rep=ignore resp=14 retries=2 || return 1
	connect_range $((a + k / 2)) $b 10.77.0.1 on_rep=reject || return 1
	wait_events 60 CONNECT_ERROR \
		$((a + PASSIVE_BASE)) $((a + k / 2 - 1 + PASSIVE_BASE)) $((k / 2)) || return 1
	wait_events 60 REJ_RECEIVED \
		$((a + k / 2 + PASSIVE_BASE)) $((b + PASSIVE_BASE)) $((k / 2)) || return 1
	log "passive ends: $(grep -c " listener=1 " $RCD_DBG/conns)," \
		"FREED $(state_count FREED $((a + PASSIVE_BASE)) $((b + PASSIVE_BASE)));" \
		"ids $(rcd_stat cm_ids_live), QPs $(rdma_res qp) (kernel's $qps)"
	check "every passive end freed at once" \
		wait_for 10 sh -c "[ \$(awk '\$1 >= $((a + PASSIVE_BASE)) && / state=FREED / { n++ }
			END { print n + 0 }' $RCD_DBG/conns) = $k ]" || return 1
	check "ids: the listener's and the active ends' only" \
		test "$(rcd_stat cm_ids_live)" = $((1 + k)) || return 1
	check "QPs: the active ends' only" wait_for 10 rdma_res_cmp -eq $((qps + k)) qp || return 1
	ctl close $a-$b || return 1
	ctl close 1 || return 1
	check "nothing left after close" test "$(rcd_stat cm_ids_live)/$(rdma_res qp)" = "0/$qps"
}
timeout_test_failed_handshake_frees_passive_end=180

# A listener bounds its handshakes in flight (backlog=4): with 4 REPs
# unanswered (on_rep=ignore), further REQs are rejected at once; once those
# handshakes end (the active ends close: their REJ reaches the passive ends,
# which free themselves), the listener takes connections again.
test_listener_backlog_rejects_excess() {
	rxe_add rxe0 v0 && rcd_load || return 1
	ctl listen 1 rxe0 0x1000 backlog=4 || return 1
	connect_range 10 17 10.77.0.1 on_rep=ignore || return 1
	wait_events 30 REJ_RECEIVED 10 17 4 || return 1
	check "4 passive ends" test "$(grep -c ' listener=1 ' $RCD_DBG/conns)" = 4 || return 1
	ctl close 10-17 || return 1
	check "the 4 passive ends freed" wait_for 20 \
		sh -c "[ \$(grep -c ' state=FREED .*listener=1 ' $RCD_DBG/conns) = 4 ]" || return 1
	ctl close "$(awk '/ listener=1 / { print $1 }' $RCD_DBG/conns | paste -sd,)" || return 1
	ctl connect 20 rxe0 10.77.0.1 10.77.0.1 0x1000 || return 1
	wait_event 20 20 ESTABLISHED
}
timeout_test_listener_backlog_rejects_excess=120

# The window between a passive end's REQ callback and its job's REP, held
# open with on_req=job_delay:MS (the job sleeps after making the QP, before
# it moves it and sends the REP), one setup for every case: rxe0 (active
# ends, 10.77.0.1) and rxe1 (listeners, 10.77.0.2) over the veth, so that
# each side's CM counters are its own.
#  - close of the passive end during the delay: close does not wait for
#    the job (< 1 s; the job held the table's lock through its QP work
#    before, review S2), the peer gets the REJ that the CM sends for an id
#    in MRA_REQ_SENT, the job frees its QP;
#  - the active end closes during the delay: its REJ frees the passive
#    end (FREED), the job frees its QP;
#  - a REQ retransmitted while the job sleeps (resp=14: 64 ms) is answered
#    with an MRA (rxe1's cm_tx_msgs/mra), and the connection comes up after
#    the 3 s delay, longer than the peer's 6 tries without the MRA;
#  - S1: the MRA is the CM's own (ib_prepare_cm_mra() takes no timeout;
#    6.12 has it from the series' backport) with the exponent 24
#    (CM_MRA_SETTING, about 68.7 s a retry): the peer of a silent passive
#    side outlives any silence this test could wait out. The case checks
#    what that MRA does instead: it holds the peer through a 5 s silence,
#    and the connection comes up when the job ends (without it, the REQ
#    with retries=2 fails within a second: its timer's, whatever the
#    guest's speed);
#  - S3: a REQ callback that fails with ENOMEM after its accept
#    (on_req=fail_job) sends no REJ: the peer retries, and its REQ times
#    out (CONNECT_ERROR, no REJ_RECEIVED);
#  - S2: no REQ callback waits behind a job: with cmtime -c 3 (rdma_cm,
#    outside the module's locks) against a listener whose jobs sleep 1 s,
#    req_callback_us_max < 0.5 s (before: the second and third REQ
#    callbacks waited for the table's lock the sleeping job held);
#  - rdma link del rxe1 during a delay, then rmmod during another (on
#    rxe0, talking to itself): both return, no QP of the module is left.
# Each case checks ids (cm_ids_live), QPs (rdma res) and the peer's REJ.
# Every check runs, a failed one does not stop the rest (bad=1).
qps_on() { rdma_res qp link "$1/1"; }
# ms_now: the time in ms into REPLY (no command substitution: a fork, about
# 50 ms of the debug guest under TCG, inside the window it times).
ms_now() { local t=${EPOCHREALTIME/./}; REPLY=$((t / 1000)); }
test_req_to_rep_window() {
	local bad=0 q0 q1 t0 dt p=$PASSIVE_BASE
	cm_base
	rxe_add rxe0 v0 && rxe_add rxe1 v1 && veth_cross_routes && rcd_load || return 1
	q0=$(qps_on rxe0); q1=$(qps_on rxe1)
	ctl listen 1 rxe1 0x1000 on_req=job_delay:3000 auto_drep=- || return 1
	local s1=5000
	ctl listen 2 rxe1 0x1001 on_req=job_delay:$s1 || return 1
	ctl listen 3 rxe1 0x1002 on_req=fail_job || return 1
	local fast="lifetime=14 resp=14"
	ctl connect 14 rxe0 10.77.0.1 10.77.0.2 0x1002 $fast retries=2 || return 1
	ctl connect 10 rxe0 10.77.0.1 10.77.0.2 0x1000 || return 1
	wait_for 10 text_in $RCD_DBG/conns $'\n'"$((p + 10)) " ||
		fail "no passive end 10" || return 1
	ms_now; t0=$REPLY
	ctl close $((p + 10)) || return 1
	ms_now; dt=$((REPLY - t0))
	log "close of the passive end during its job's delay: $dt ms"
	check "close did not wait for the job ($dt ms < 1000)" test $dt -lt 1000 || bad=1
	ctl connect 11 rxe0 10.77.0.1 10.77.0.2 0x1000 || return 1
	wait_for 10 text_in $RCD_DBG/conns $'\n'"$((p + 11)) " ||
		fail "no passive end 11" || return 1
	ctl close 11 || return 1
	# Jobs run one at a time (an ordered queue): 12's 3 s, then 13's 5 s.
	ctl connect 12 rxe0 10.77.0.1 10.77.0.2 0x1000 $fast retries=5 || return 1
	check "an MRA answered a retransmitted REQ, and 12 came up" \
		wait_for 30 has_event $((p + 12)) ESTABLISHED || bad=1
	check "... both ends" wait_for 10 has_event 12 ESTABLISHED || bad=1
	log "MRAs sent by rxe1: $(cm_counter rxe1 cm_tx_msgs mra), REQ retries of rxe0:" \
		"$(cm_counter rxe0 cm_tx_retries req), duplicate REQs at rxe1:" \
		"$(cm_counter rxe1 cm_rx_duplicates req)"
	check "MRAs sent" test "$(cm_counter rxe1 cm_tx_msgs mra)" -gt 0 || bad=1
	ms_now; t0=$REPLY
	ctl connect 13 rxe0 10.77.0.1 10.77.0.2 0x1001 $fast retries=2 || return 1
	wait_for 30 has_event 13 ESTABLISHED
	ms_now; dt=$((REPLY - t0))
	log "13 after $dt ms:" \
		"$(grep '^13 ' $RCD_DBG/events | awk '{ print $2, $3 }' | tr '\n' ' ')"
	local what="S1 (the CM's MRA): it held the peer through the $s1 ms silence"
	check "$what ($dt ms)" sh -c \
		"[ $dt -ge $s1 ] && grep -q '^13 ESTABLISHED' $RCD_DBG/events" || bad=1
	ctl close $((p + 13)) || return 1
	check "the peer got the REJ of the closed passive end" has_event 10 REJ_RECEIVED || bad=1
	check "the active end's REJ freed the passive end" \
		has_event $((p + 11)) REJ_RECEIVED || bad=1
	check "... at once" grep -q "^$((p + 11)) .*state=FREED" $RCD_DBG/conns || bad=1
	log "events: $(grep -E "^($((p + 10))|10|$((p + 11))) " $RCD_DBG/events |
		awk '{ print $1, $2, $3 }' | tr '\n' ' ')"
	check "S3: ENOMEM after accept: the peer's REQ timed out" \
		has_event 14 CONNECT_ERROR || bad=1
	check "S3: ... with no REJ ($(grep '^14 ' $RCD_DBG/events | awk '{ print $2 }' |
		tr '\n' ' '))" sh -c "! grep -q '^14 REJ_RECEIVED' $RCD_DBG/events" || bad=1
	# Left: listeners 1-3, active ends 10, 12, 13, 14, passive end 12.
	check "ids: $(rcd_stat cm_ids_live), expected 8" wait_for 10 stat_is cm_ids_live 8 || bad=1
	check "QPs on rxe1: passive end 12's only ($(qps_on rxe1) - $q1)" wait_for 10 \
		rdma_res_cmp -eq $((q1 + 1)) qp link rxe1/1 || bad=1
	check "QPs on rxe0: the active ends' ($(qps_on rxe0) - $q0)" \
		test "$(qps_on rxe0)" = $((q0 + 4)) || bad=1
	# rdma link del rxe1 while a job sleeps.
	ctl connect 15 rxe0 10.77.0.1 10.77.0.2 0x1000 || return 1
	wait_for 10 text_in $RCD_DBG/conns $'\n'"$((p + 15)) " ||
		fail "no passive end 15" || return 1
	ms_now; t0=$REPLY
	rdma link del rxe1 || fail "rdma link del rxe1" || return 1
	ms_now; dt=$((REPLY - t0))
	log "rdma link del rxe1 during a job's delay: $dt ms; 15:" \
		"$(grep '^15 ' $RCD_DBG/events | awk '{ print $2, $3 }' | tr '\n' ' ')"
	check "rxe1's ends freed" test "$(grep -c 'dev=rxe1 .*state=FREED' $RCD_DBG/conns)" = \
		"$(grep -c ' dev=rxe1 ' $RCD_DBG/conns)" || bad=1
	check "ids: only those of rxe0's ends not yet freed ($(rcd_stat cm_ids_live))" \
		wait_for 10 sh -c "[ \$(grep ' dev=rxe0 ' $RCD_DBG/conns | grep -vc 'state=FREED') \
			= \$(awk '\$1 == \"cm_ids_live\" { print \$2 }' $RCD_DBG/stats) ]" || bad=1
	ctl close 10,12,13,14,15 || return 1
	check "nothing of ours on rxe0 after close ($(rcd_stat cm_ids_live) ids)" \
		test "$(rcd_stat cm_ids_live)/$(qps_on rxe0)" = "0/$q0" || bad=1
	# S2: REQs from rdma_cm (cmtime, which does not share the module's
	# locks, as a remote peer) while the jobs before them sleep 1 s each:
	# no REQ callback waits for a job (the table's lock; rxe0 to itself,
	# over lo as in the storm: the routes across the veth go first).
	veth_cross_routes_undo
	if command -v cmtime >/dev/null; then
		local reps; reps=$(rcd_stat reps_sent)
		ctl listen 5 rxe0 tcp:7999 cma=1 auto_drep=- on_req=job_delay:1000 || return 1
		local crc=0
		timeout 60 cmtime -s 10.77.0.1 -p 7999 -c 3 > /tmp/cmtime-window.out 2>&1 ||
			crc=$?
		check "cmtime -c 3: exit 0, 3 REPs, no error (exit $crc, $(( \
			$(rcd_stat reps_sent) - reps )) REPs)" \
			test $crc = 0 -a $(( $(rcd_stat reps_sent) - reps )) = 3 \
			-a "$(grep -c RDMA_CM_EVENT /tmp/cmtime-window.out)" = 0 ||
			{ sed 's/^/#   cmtime: /' /tmp/cmtime-window.out | head; bad=1; }
		local us; us=$(rcd_stat req_callback_us_max)
		log "REQ callbacks: $(rcd_stat req_callbacks)," \
			"$(rcd_stat req_callback_us_avg) us on average, $us us at most; REPs:" \
			"$(rcd_stat reps_sent), REQ to REP $(rcd_stat rep_latency_us_avg) us on" \
			"average, $(rcd_stat rep_latency_us_max) at most"
		check "S2: no REQ callback waited behind a job ($us us < 500000)" \
			test "$us" -lt 500000 || bad=1
	else
		log "SKIP of the S2 case: no cmtime"
	fi
	# rmmod while a job sleeps (rxe0 to itself).
	ctl listen 4 rxe0 0x1003 on_req=job_delay:3000 || return 1
	ctl connect 16 rxe0 10.77.0.1 10.77.0.1 0x1003 || return 1
	wait_for 10 text_in $RCD_DBG/conns $'\n'"$((p + 16)) " ||
		fail "no passive end 16" || return 1
	ms_now; t0=$REPLY
	rmmod rcd_harness || fail "rmmod" || return 1
	ms_now; dt=$((REPLY - t0))
	log "rmmod during a job's delay: $dt ms"
	check "no QP left on rxe0 after rmmod" test "$(qps_on rxe0)" = "$q0" || bad=1
	return $bad
}
timeout_test_req_to_rep_window=180

# A storm of REQs, side by side in one guest: rdma-core's cmtime
# client, RCD_STORM connections (make stress 1,000 and, in
# storm_big_cmtime_vs_rdma_cm, RCD_STORM_BIG 2,000: the larger size the
# storm was measured at, see the commit that added this), against the
# module's listener (tcp:7999, cma=1, auto_drep=-) and against rdma_cm's
# own server (cmtime -b). Printed: cmtime's exit status, time and errors, the
# connections each side established, DREQ retransmissions, REP
# retransmissions and MRAs sent, and what is left afterwards (ids, QPs).
# Checked: the module connects at least as many as cmtime -b does, and
# at least RCD_STORM_FLOOR (default: all) both in cmtime's count and in its
# own (passive ends that got their RTU), its REQ callbacks are short, and
# it holds no id or QP once cmtime is done (only the listener's id).
# Printed too: REQ retries and MRAs, and the job queue's latency from the
# REQ callback to the REP (rep_latency_us_*), which the MRA's timeout must
# cover. make check leaves both storms out (tests/run.sh): below 1,000 the
# comparison means little (storm_side_by_side), and what a small storm
# checks, every connection of rdma-core's cmtime served, disconnected and
# freed, is interop_cmtime_client_100's, with 100 connections.
# storm_sample T0: one line of the storm's timeline, read with shell
# builtins only (a process costs 0.25 s of the guest's vCPU): seconds since
# T0, then the IB CM's counters on rxe0 (client and server share it) as
# REQ tx/retries/rx/dup, REP tx/retries/rx/dup, RTU tx/rx/dup, MRA tx/rx,
# REJ tx/rx, and the module's established ends, ids and REQ callbacks.
storm_sample() {
	local d=/sys/class/infiniband/rxe0/ports/1 line="t=$((SECONDS - $1))" m g v k
	# Since the test began (cm_counter's base, without its process).
	cm_base_load || return 1
	for m in req rep rtu; do
		line+=" $m"
		for g in cm_tx_msgs cm_tx_retries cm_rx_msgs cm_rx_duplicates; do
			read -r v < $d/$g/$m; line+="/$((v - ${CM_BASE[rxe0/$g/$m]:-0}))"
		done
	done
	for m in mra rej; do
		line+=" $m"
		for g in cm_tx_msgs cm_rx_msgs; do
			read -r v < $d/$g/$m; line+="/$((v - ${CM_BASE[rxe0/$g/$m]:-0}))"
		done
	done
	if [ -e $RCD_DBG/stats ]; then
		while read -r k v; do
			case $k in
			established|cm_ids_live|req_callbacks|req_callback_us_avg|\
			req_callback_us_max|reps_sent|rep_latency_us_max) line+=" $k=$v" ;;
			esac
		done < $RCD_DBG/stats
	fi
	echo "#   timeline: $line"
}

# storm_timeline PID T0: a sample every 10 s while PID runs, printed as it
# is taken (a test killed by its timeout still shows where it was), and one
# when it has ended (looked for every 0.2 s: no waiting out the 10 s).
storm_timeline() {
	local next=$SECONDS
	while kill -0 "$1" 2>/dev/null; do
		[ $SECONDS -lt $next ] || { storm_sample "$2"; next=$((SECONDS + 10)); }
		nap 0.2
	done
	storm_sample "$2"
}

# storm_step FILE STEP: cmtime's STEP (connect, disconnect) in its output
# FILE: the step's total, in whole ms.
storm_step() {
	awk -F: -v s="$2" '$1 ~ "^" s " *$" { split($2, a, " "); print int(a[1]) }' "$1"
}

# storm_steps FILE: "connect MS, disconnect MS" of cmtime's output FILE.
storm_steps() {
	echo "connect $(storm_step "$1" connect) ms, disconnect $(storm_step "$1" disconnect) ms"
}

# storm_ratio A B: A / B to two decimals ("-" without a B).
storm_ratio() {
	awk -v a="${1:-0}" -v b="${2:-0}" \
		'BEGIN { if (b > 0) printf "%.2f", a / b; else printf "-" }'
}

# storm_retries: the REQ and REP retransmissions on rxe0 so far, as
# "REQ REP" (both sides share rxe0: the client's REQs, the server's REPs).
storm_retries() {
	echo "$(cm_counter rxe0 cm_tx_retries req) $(cm_counter rxe0 cm_tx_retries rep)"
}

# Two cmtime runs of up to 600 s each, then up to 120 s for the module's
# ends to go.
timeout_test_storm_cmtime_vs_rdma_cm=1500
test_storm_cmtime_vs_rdma_cm() { storm_side_by_side "${RCD_STORM:-100}"; }
	cm_base

# The same with RCD_STORM_BIG connections (make stress: 2,000; skipped
# unless set), the larger size the storm was measured at.
timeout_test_storm_big_cmtime_vs_rdma_cm=1500
test_storm_big_cmtime_vs_rdma_cm() {
	cm_base
	[ "${RCD_STORM_BIG:-0}" -gt 0 ] ||
		{ echo "# SKIP RCD_STORM_BIG not set:" \
			"a make stress test (make check leaves it out)"; return $KSFT_SKIP; }
	storm_side_by_side "$RCD_STORM_BIG"
}

# storm_side_by_side N: the storm above with N connections. From
# RCD_STORM_GOAL connections up (default 1,000: the sizes measured; below it
# the run is too short for the comparison to mean much) also checked: no
# more REQ and REP retransmissions than against cmtime -b. The two steps'
# times are printed side by side, not checked: one run's ratio is not a
# measurement here (cmtime -b's disconnect step at 1,000 on the debug
# kernel took 25.8 to 32.9 s in three runs of the same code); make bench
# repeats the storm and gives each ratio's median and range.
storm_side_by_side() {
	local n=$1 qps t0 rc pid cpid out=/tmp/storm b_ok m_ok b_rc floor
	local r0 r1 r2 b_wall m_wall
	# The module's own floor, whatever cmtime -b does (it crashed at 500 on
	# one vCPU): every connection, unless RCD_STORM_FLOOR says less.
	floor=${RCD_STORM_FLOOR:-$n}
	command -v cmtime >/dev/null ||
		{ echo "# SKIP cmtime (rdmacm-utils) not installed"; return $KSFT_SKIP; }
	rxe_add rxe0 v0 && rcd_load || return 1
	mkdir -p $out
	qps=$(rdma_res qp)
	storm_counters() {
		echo "REQ retries $(cm_counter rxe0 cm_tx_retries req) (duplicates received" \
			"$(cm_counter rxe0 cm_rx_duplicates req)), REP sent $(sent rxe0 rep)" \
			"(retries $(cm_counter rxe0 cm_tx_retries rep))," \
			"MRA sent $(sent rxe0 mra), DREQ retries" \
			"$(cm_counter rxe0 cm_tx_retries dreq), REJ sent $(sent rxe0 rej)"
	}
	local before_rep before_mra before_dreq
	# 1. rdma_cm's own server.
	timeout 600 cmtime -b 10.77.0.1 -p 7998 -c $n > $out/srv.out 2>&1 & pid=$!
	wait_for 60 cma_listening 7998 || fail "cmtime -b not listening" || return 1
	log "before cmtime -b: $(storm_counters)"
	r0=$(storm_retries)
	t0=$SECONDS
	timeout 600 cmtime -s 10.77.0.1 -p 7998 -c $n > $out/cli-b.out 2>&1 & cpid=$!
	storm_timeline $cpid $t0
	wait $cpid; rc=$?
	b_wall=$((SECONDS - t0))
	r1=$(storm_retries)
	log "cmtime -c $n against cmtime -b: exit $rc in $b_wall s;" \
		"$(grep -c 'RDMA_CM_EVENT' $out/cli-b.out) error events"
	sed 's/^/#   client: /' $out/cli-b.out | grep -v 'ing ' | head -16
	# cmtime's server waits for more than its connections: stop it (it
	# otherwise sits out its whole timeout).
	kill $pid 2>/dev/null; wait $pid; log "server exit $? (143: stopped here)"
	sed 's/^/#   server: /' $out/srv.out | head -12
	log "after cmtime -b: $(storm_counters); QPs $(rdma_res qp) (kernel's $qps)"
	# cmtime exits 0 whatever happened: count its failed connections.
	# (A cmtime that ran out of time printed no error for what it still
	# waited for: then this is an upper bound.)
	local failed='RDMA_CM_EVENT_(UNREACHABLE|REJECTED|CONNECT_ERROR)'
	b_ok=$((n - $(grep -cE "$failed" $out/cli-b.out)))
	b_rc=$rc
	# 2. The module's listener.
	ctl listen 1 rxe0 tcp:7999 cma=1 auto_drep=- || return 1
	t0=$SECONDS
	timeout 600 cmtime -s 10.77.0.1 -p 7999 -c $n > $out/cli-m.out 2>&1 & cpid=$!
	storm_timeline $cpid $t0
	wait $cpid; rc=$?
	m_wall=$((SECONDS - t0))
	r2=$(storm_retries)
	log "cmtime -c $n against the module: exit $rc in $m_wall s;" \
		"$(grep -c 'RDMA_CM_EVENT' $out/cli-m.out) error events"
	sed 's/^/#   client: /' $out/cli-m.out | grep -v 'ing ' | head -16
	# Each side's retransmissions: the counters' growth over its run.
	local b_req b_rep m_req m_rep
	set -- $r0 $r1 $r2
	b_req=$(($3 - $1)) b_rep=$(($4 - $2)) m_req=$(($5 - $3)) m_rep=$(($6 - $4))
	log "storm $n side by side: cmtime -b $b_wall s, $(storm_steps $out/cli-b.out)," \
		"REQ retries $b_req, REP retries $b_rep; the module $m_wall s," \
		"$(storm_steps $out/cli-m.out), REQ retries $m_req, REP retries $m_rep"
	# Counted the same way on both sides: by the client (a passive end
	# whose REP timed out before the client's late RTU is connected in the
	# client's eyes until its DREQ, which the CM answers for an unknown id).
	# The module's own count, the passive ends that got their RTU, beside it.
	m_ok=$((n - $(grep -cE "$failed" $out/cli-m.out)))
	[ $rc = 0 ] || m_ok=$(rcd_stat established)
	log "connected (cmtime's count): $m_ok against the module (passive ends that got their" \
		"RTU: $(rcd_stat established))," \
		"$b_ok against cmtime" \
		"-b$([ $b_rc = 0 ] || echo " (an upper bound: cmtime ran out of time)")"
	# Every passive end has its DREQ (or its REP timed out) and freed its id
	# once only the listener's is left: the counts below are final then.
	local est settled=0
	wait_for 120 stat_is cm_ids_live 1 || settled=1
	est=$(grep -c ' listener=1 ' $RCD_DBG/conns)
	log "module: $est passive ends, ESTABLISHED events" \
		"$(events_in ESTABLISHED 2000000 2999999), CONNECT_ERROR" \
		"$(events_in CONNECT_ERROR 2000000 2999999)," \
		"REJ $(events_in REJ_RECEIVED 2000000 2999999), DREQ_RECEIVED" \
		"$(events_in DREQ_RECEIVED 2000000 2999999)"
	log "after the module: $(storm_counters)"
	log "left: ids $(rcd_stat cm_ids_live) (the listener's: 1), QPs $(rdma_res qp)" \
		"(kernel's $qps)," \
		"not FREED $(grep ' listener=1 ' $RCD_DBG/conns | grep -vc 'state=FREED')"
	check "every passive end freed within 120 s" test $settled = 0 || return 1
	check "cmtime against the module exits 0 (got $rc)" test $rc = 0 || return 1
	check "at least as many connected as against cmtime -b ($m_ok vs $b_ok)" \
		test $m_ok -ge $b_ok || return 1
	check "at least $floor of $n connected in cmtime's count ($m_ok)" \
		test $m_ok -ge $floor || return 1
	check "at least $floor of $n passive ends got their RTU ($(rcd_stat established))" \
		test "$(rcd_stat established)" -ge $floor || return 1
	log "the job queue: $(rcd_stat reps_sent) REPs," \
		"$(rcd_stat rep_latency_us_avg) us from the REQ callback to the REP on average," \
		"$(rcd_stat rep_latency_us_max) us at most; a job $(rcd_stat job_us_avg) us" \
		"on average, $(rcd_stat job_us_max) at most;" \
		"$(rcd_stat reps_held_total) REPs held until their peer had room (a window of" \
		"$(rcd_stat rep_window_max) at most)"
	check "no REP counted in flight once every end is freed ($(rcd_stat reps_in_flight))" \
		test "$(rcd_stat reps_in_flight)" = 0 || return 1
	check "no REP held once every end is freed ($(rcd_stat reps_held))" \
		test "$(rcd_stat reps_held)" = 0 || return 1
	if [ "$n" -ge "${RCD_STORM_GOAL:-1000}" ]; then
		local bc bd mc md
		bc=$(storm_step $out/cli-b.out connect) bd=$(storm_step $out/cli-b.out disconnect)
		mc=$(storm_step $out/cli-m.out connect) md=$(storm_step $out/cli-m.out disconnect)
		log "the module against cmtime -b, this run (make bench: the measure):" \
			"connect step $mc ms vs $bc ms ($(storm_ratio "$mc" "$bc"))," \
			"disconnect step $md ms vs $bd ms ($(storm_ratio "$md" "$bd"))"
		check "no more REQ retransmissions than against cmtime -b ($m_req vs $b_req)" \
			test $m_req -le $b_req || return 1
		check "no more REP retransmissions than against cmtime -b ($m_rep vs $b_rep)" \
			test $m_rep -le $b_rep || return 1
	fi
	# The REQ callback only accepts, sends the MRA and queues a job: it
	# does not hold up the CM's workqueue for a QP and a REP, which are the
	# job's. So a callback takes less than half a job, both measured in
	# this run (an absolute bound does not hold: on 6.12's debug kernel a
	# callback took 1.8 ms, 17 ms with the QP and REP inside; on 7.3's,
	# whose preemptible kernel shares the vCPUs with cmtime, 11 ms, with
	# 67 ms a job).
	local cb job
	cb=$(rcd_stat req_callback_us_avg) job=$(rcd_stat job_us_avg)
	log "REQ callbacks: $cb us on average, $(rcd_stat req_callback_us_max) us at most"
	check "REQ callbacks short: $cb us on average, less than half a job's $job us" \
		test "$((2 * cb))" -lt "$job" || return 1
	check "no QP left" test "$(rdma_res qp)" = "$qps"
}

# Last in this file: before its fix this deadlocked the CM's workqueue.
# A listener whose REQ callback closes the listener itself (drops its CmId
# there): the CM holds the listener until that callback returns, so a
# destroy that waited for it would wait for itself. The REQ is still
# handled (the connection comes up), the listener is gone, and the
# module's ids are all freed once everything is closed.
test_listener_dropped_in_its_req_callback() {
	rxe_add rxe0 v0 && rcd_load || return 1
	ctl listen 1 rxe0 0x1000 on_req=close || return 1
	ctl connect 2 rxe0 10.77.0.1 10.77.0.1 0x1000 || return 1
	wait_event 20 2 ESTABLISHED && wait_event 20 $((2 + PASSIVE_BASE)) ESTABLISHED || return 1
	check "the listener is gone" sh -c "! grep -q '^1 ' $RCD_DBG/conns" || return 1
	check "its id was destroyed" wait_for 10 stat_is cm_ids_live 2 || return 1
	# Nothing listens on 0x1000 any more: a new REQ is not answered by us.
	ctl connect 3 rxe0 10.77.0.1 10.77.0.1 0x1000 retries=2 resp=14 || return 1
	# With no listener, the CM itself answers the REQ with a REJ (reason 8,
	# invalid service id: cm_req_handler), and makes no passive end.
	wait_event 20 3 REJ_RECEIVED || return 1
	check "the CM's REJ: reason $(event_field 3 REJ_RECEIVED status) (8, invalid service id)" \
		test "$(event_field 3 REJ_RECEIVED status)" = 8 || return 1
	check "no passive end for the second REQ" \
		sh -c "! grep -q '^$((3 + PASSIVE_BASE)) ' $RCD_DBG/conns" || return 1
	ctl close 2,3,$((2 + PASSIVE_BASE)) || return 1
	check "every id freed" test "$(rcd_stat cm_ids_live)" = 0
}
timeout_test_listener_dropped_in_its_req_callback=120
