# SPDX-License-Identifier: GPL-2.0
#
# rping (rdma-core's librdmacm/examples/rping.c) as a partner: the module
# speaks its protocol (descriptor exchange, RDMA READ of the client's start
# buffer, RDMA WRITE back into its sink, the go-aheads) as server (listen
# rping=1) and as client (connect rping=COUNT:SIZE, with fast-registered
# MRs taken back by LOCAL_INV every ping), and is disconnected mid-flight.

rping_setup() {
	command -v rping >/dev/null || { echo "# SKIP rping not installed"; return $KSFT_SKIP; }
	rxe_add rxe0 v0 && rcd_load
}

# rping_field NUM PART: role, pings, validated, state or error of NUM's
# rping=role:pings:validated:state:error; rping_field_v: into REPLY (polls).
rping_field() { local REPLY; rping_field_v "$@"; echo "$REPLY"; }
rping_field_v() {
	local -a p
	local i
	conn_field_v "$1" rping
	IFS=: read -r -a p <<< "$REPLY"
	case $2 in
	role) i=0 ;; pings) i=1 ;; validated) i=2 ;; state) i=3 ;; error) i=4 ;;
	esac
	REPLY=${p[i]}
}

# pings_at_least NUM N: for wait_for.
pings_at_least() { rping_field_v "$1" pings; [ "${REPLY:-0}" -ge "$2" ]; }

# all_back NUM: every work request NUM posted came back (completed, flushed
# or failed), none dropped. NUM's line must have the counters (an absent
# field would compare equal to 0) and something posted.
all_back() {
	awk -v n="$1" '{ for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] } }
		END {
			if (!("posted" in v) || !("completed" in v) || !("flushed" in v) ||
			    !("failed" in v) || !("dropped" in v) || v["posted"] + 0 == 0) {
				print "# FAIL: " n ": no work-request counters (posted=" \
					v["posted"] ")"
				exit 1
			}
			ok = v["posted"] == v["completed"] + v["flushed"] + v["failed"] &&
				v["dropped"] == 0
			if (!ok)
				print "# FAIL: " n ": posted " v["posted"] " completed " \
					v["completed"] " flushed " v["flushed"] " failed " \
					v["failed"] " dropped " v["dropped"]
			exit !ok
		}' <<< "$(grep "^$1 " "$RCD_DBG/conns")"
}

# rping -c -C 100 -S 1024 -V against the module: 100 pings, each READ by
# the module from rping's start buffer and WRITTEN back into its sink,
# validated by rping; rping disconnects and exits 0.
test_rping_client_against_module() {
	local pid p rc t0
	rping_setup || return
	ctl listen 1 rxe0 tcp:7180 cma=1 rping=1 auto_drep=- || return 1
	t0=$SECONDS
	timeout 300 rping -c -a 10.77.0.1 -p 7180 -C 100 -S 1024 -V > /tmp/rping-c.out 2>&1 & pid=$!
	foreign_established || return 1; p=$FOREIGN
	wait $pid; rc=$?
	log "rping -c -C 100 -S 1024 -V: exit $rc after $((SECONDS - t0)) s"
	sed 's/^/# rping: /' /tmp/rping-c.out | head -20
	check "rping exits 0" test $rc = 0 || return 1
	wait_event 30 $p TIMEWAIT_EXIT || return 1
	log "module (server): rping=$(conn_field $p rping) $(wr_line $p)"
	check "100 pings served" test "$(rping_field $p pings)" = 100 || return 1
	check "no protocol error" test "$(rping_field $p error)" = 0 || return 1
	check "one DISCONNECTED" test "$(event_count $p DISCONNECTED)" = 1 || return 1
	all_back $p || return 1
	check "nothing mapped, no MR" wait_for 10 nothing_mapped
}

# The server's count is a remote peer's (rping -C 0
# pings for ever): past 2^32 pings it saturates, neither panics (overflow
# checks are on in the debug kernel: CONFIG_RUST_OVERFLOW_CHECKS) nor wraps.
# The test hook rping_from starts the count 5 below u32::MAX; rping -C 12
# pings 7 past it, validated by rping. The log is read for the panic first,
# before the module's files: a poller that panicked holds its endpoint's
# lock for good, and reading `conns` would wait for it (with `+= 1`, 6.12
# debug kernel: "attempt to add with overflow" at the sixth ping, and rping
# waits for a go-ahead until timeout kills it).
test_rping_server_count_saturates() {
	local pid p rc max=4294967295 r
	rping_setup || return
	echo "rcd-test: rping count mark" > /dev/kmsg
	ctl listen 1 rxe0 tcp:7187 cma=1 rping=1 rping_from=$((max - 5)) auto_drep=- || return 1
	timeout 30 rping -c -a 10.77.0.1 -p 7187 -C 12 -S 1024 -V > /tmp/rping-m.out 2>&1 & pid=$!
	wait $pid; rc=$?
	sed 's/^/# rping: /' /tmp/rping-m.out | tail -3
	r=$(dmesg | awk '/rcd-test: rping count mark/ { r = ""; next }
		/panicked|overflow|BUG:|Oops/ && r == "" { r = $0 } END { print r }')
	[ -z "$r" ] || dmesg | awk '/rcd-test: rping count mark/ { p = 1 } p' |
		grep -E -A3 'panicked|overflow|BUG:|Oops' | head -12 | sed 's/^/#   /'
	check "no panic serving pings past 2^32${r:+: $r}" test -z "$r" || return 1
	check "rping -C 12 exits 0 (got $rc)" test $rc = 0 || return 1
	foreign_established || return 1; p=$FOREIGN
	wait_event 30 $p TIMEWAIT_EXIT || return 1
	log "module (server): rping=$(conn_field $p rping)"
	check "the count saturated at $max, did not wrap" \
		test "$(rping_field $p pings)" = $max || return 1
	check "no protocol error" test "$(rping_field $p error)" = 0
}

# The module as client of rping -s -V: 100 pings of 1024 bytes, its start
# and sink buffers registered for rping's READ and WRITE every ping and
# taken back by LOCAL_INV to be compared; then it disconnects, rping sees
# DISCONNECTED and exits 0.
test_rping_module_client() {
	local pid rc t0
	rping_setup || return
	timeout 300 rping -s -a 10.77.0.1 -p 7181 -S 1024 -V > /tmp/rping-s.out 2>&1 & pid=$!
	wait_for 60 cma_listening 7181 || fail "rping -s not listening" || return 1
	t0=$SECONDS
	ctl connect 6 rxe0 10.77.0.1 10.77.0.1 tcp:7181 cma_port=5004 rping=100:1024 || return 1
	wait_event 120 6 DISCONNECTED || { log "rping=$(conn_field 6 rping)"; return 1; }
	log "100 pings in $((SECONDS - t0)) s"
	wait $pid; rc=$?
	sed 's/^/# rping -s: /' /tmp/rping-s.out | head -20
	check "rping -s exits 0" test $rc = 0 || return 1
	wait_event 30 6 TIMEWAIT_EXIT || return 1
	log "module (client): rping=$(conn_field 6 rping) $(wr_line 6)"
	check "100 pings, all validated" \
		test "$(rping_field 6 pings)/$(rping_field 6 validated)" = 100/100 || return 1
	check "no protocol error" test "$(rping_field 6 error)" = 0 || return 1
	check "one DISCONNECTED" test "$(event_count 6 DISCONNECTED)" = 1 || return 1
	all_back 6 || return 1
	check "MRs deregistered, nothing mapped" wait_for 10 nothing_mapped
}

# child_of PID: the process PID started (timeout(1)'s command); builtins.
child_of() {
	local st p pp
	for st in /proc/[0-9]*/stat; do
		read -r p _ _ pp _ 2>/dev/null < "$st" && [ "$pp" = "$1" ] &&
			{ echo "$p"; return 0; }
	done
	return 1
}

# cq_reader PID: the thread of PID in read() on a completion channel.
cq_reader() {
	local t sys fd
	for t in /proc/"$1"/task/*; do
		read -r sys fd _ 2>/dev/null < "$t/syscall" || continue
		[ "$sys" = 0 ] &&
			[[ $(readlink "/proc/$1/fd/$((fd))") == 'anon_inode:[infinibandevent]' ]] &&
			{ echo "${t##*/}"; return 0; }
	done
	return 1
}

# cq_reader_wait PID: cq_reader, polled for up to 10 s: a thread that
# takes a completion is out of read() meanwhile.
cq_reader_wait() {
	local i
	for i in $(seq 50); do
		cq_reader "$1" && return 0
		nap 0.2
	done
	return 1
}

# rping_end PID OUT: waits up to RPING_END_WAIT (60) s for the rping run
# by timeout(1) PID (its output in OUT) to end after our DREP_RECEIVED, and
# sets RC to its exit status, or to "hung" for the one hang that is rping's.
# Our DREP_RECEIVED says rping called rdma_disconnect(), which first moved
# its QP to the error state; after it rping joins its CQ thread, and that
# thread ends only on a flushed completion. When the peer's last message,
# sent before its DREQ, is taken from the CQ after that (its receive had
# completed, nothing was posted, so nothing was flushed), the thread posts a
# new receive, which nothing flushes (rxe's user-space post does not enter
# the kernel), and waits for good. Seen so: rping left its test loop after
# the DISCONNECT EVENT (its last line a wait's failure or "rping ...
# failed: -1"), a thread in futex (the join) and one in read() on its
# completion channel. Any other rping still running is killed and fails
# the check. (rping_end_tells_hangs.)
rping_end() {
	local pid=$1 out=$2 r t sys fd _ futex=0 cq left
	local own='^(wait for RDMA_(READ|WRITE)_(ADV|COMPLETE) state ([6-9]|10)'
	own+='|rping (client|server) failed: -1)$'
	if wait_for "${RPING_END_WAIT:-60}" proc_ended "$pid"; then
		wait "$pid"; RC=$?
		return 0
	fi
	r=$(child_of "$pid") || r=$pid
	for t in /proc/"$r"/task/*; do
		read -r sys fd _ 2>/dev/null < "$t/syscall" || continue
		[ "$sys" != 202 ] || futex=1
		log "rping thread ${t##*/}: syscall $sys $fd, wchan $(< "$t/wchan")"
	done
	cq=$(cq_reader "$r")
	left=$(sed -n '/DISCONNECT EVENT/,$p' "$out" | grep -v '^unhandled event' | tail -1)
	kill "$r"; wait "$pid"; RC=$?
	if [ -n "$cq" ] && [ $futex = 1 ] && [[ $left =~ $own ]]; then
		log "rping waited for a flush its QP in the error state never gives" \
			"(its own race; left its loop with \"$left\"): killed"
		RC=hung
	fi
}

# rping_end's two verdicts on hangs made on purpose. rping -c's CQ thread
# is held (ptrace, tests/freeze_thread.py) from before our disconnect until
# after our DREP_RECEIVED: the server's go-ahead completes its one receive,
# rping's main thread sees the DISCONNECTED, moves the QP to the error
# state (nothing posted: nothing flushed) and joins the held thread, which,
# let go, takes the go-ahead, posts a receive and waits: rping's hang,
# "hung". A process that prints the same lines but waits in nothing of
# rping's (sleep) is not, and is killed.
test_rping_end_tells_hangs() {
	local pid p r cq fz t0 flag=/run/rcd-thaw RPING_END_WAIT=5
	rping_setup || return
	command -v python3 >/dev/null || { echo "# SKIP python3 not installed"; return $KSFT_SKIP; }
	rm -f $flag
	ctl listen 1 rxe0 tcp:7184 cma=1 rping=1 || return 1
	timeout 120 rping -c -a 10.77.0.1 -p 7184 -C 0 -S 1024 -V > /tmp/rping-h.out 2>&1 & pid=$!
	foreign_established || return 1; p=$FOREIGN
	check "5 pings served" wait_for 60 pings_at_least $p 5 || return 1
	r=$(child_of $pid) && cq=$(cq_reader_wait "$r") ||
		{ fail "no CQ thread in rping ($r)"; return 1; }
	t0=$SECONDS
	python3 "$RCD_TESTS/freeze_thread.py" "$cq" $flag > /tmp/freeze.out 2>&1 & fz=$!
	# python3's start and the tries to catch the thread in read(2) (the
	# helper gives up after 90 s) take seconds, more on a slow guest.
	wait_for 120 eval 'text_in /tmp/freeze.out frozen || proc_ended $fz'
	check "rping's CQ thread held (after $((SECONDS - t0)) s; the helper: $(tr '\n' ' ' \
		< /tmp/freeze.out))" text_in /tmp/freeze.out frozen || return 1
	# The pings stop: the go-ahead waits in the CQ.
	check "pings stopped" wait_for 30 pings_stopped $p || return 1
	ctl disconnect $p || return 1
	wait_event 30 $p DREP_RECEIVED || return 1
	touch $flag; wait $fz
	check "the CQ thread let go after our DREP_RECEIVED" \
		grep -qx thawed /tmp/freeze.out || return 1
	rping_end $pid /tmp/rping-h.out
	sed 's/^/# rping -c: /' /tmp/rping-h.out | tail -3
	check "rping's hang is rping's (got $RC)" test "$RC" = hung || return 1

	printf '%s\n' 'client DISCONNECT EVENT...' \
		'wait for RDMA_WRITE_COMPLETE state 10' > /tmp/rping-h.out
	timeout 120 sleep 100 & pid=$!
	RPING_END_WAIT=1 rping_end $pid /tmp/rping-h.out
	check "a hang in anything else is not (got $RC)" test "$RC" != hung
}

# pings_stopped NUM: NUM's ping count stayed the same for 2 s.
pings_stopped() {
	local a b
	rping_field_v "$1" pings; a=$REPLY
	nap 2
	rping_field_v "$1" pings; b=$REPLY
	[ "$a" = "$b" ]
}

# Disconnects from the module's side in the middle of endless runs (-C 0),
# as server and as client: rping reports the disconnect and exits; every
# work request of ours comes back (the receives, the READ/WRITE or SEND in
# flight, the client's REG_MRs and LOCAL_INVs), flushed if not completed;
# the client's MRs are deregistered and every buffer unmapped; one
# DISCONNECTED per side.
test_rping_disconnect_mid_flight() {
	local pid p rc
	cm_base
	rping_setup || return
	ctl listen 1 rxe0 tcp:7182 cma=1 rping=1 || return 1
	timeout 300 rping -c -a 10.77.0.1 -p 7182 -C 0 -S 1024 -V > /tmp/rping-c0.out 2>&1 & pid=$!
	foreign_established || return 1; p=$FOREIGN
	check "20 pings served" wait_for 60 pings_at_least $p 20 || return 1
	ctl disconnect $p || return 1
	wait_event 30 $p DREP_RECEIVED || return 1
	rping_end $pid /tmp/rping-c0.out; rc=$RC
	sed 's/^/# rping -c: /' /tmp/rping-c0.out | tail -5
	log "rping -c exit $rc after the disconnect"
	# rping ends a run cut by the peer's disconnect with 0 (its test loop
	# returns 0 once its state is DISCONNECTED); 124 would be timeout's.
	# But its CM thread and its CQ thread share one state word, which two
	# races overwrite, and rping then returns -1 (255):
	# - rping_test_client() sets RDMA_READ_ADV (6) at the top of every
	#   ping: a DISCONNECTED that lands between two pings is overwritten,
	#   its sem_post ends the next wait with state 6;
	# - client_recv() makes any state but RDMA_READ_ADV into
	#   RDMA_WRITE_COMPLETE (9): the server's go-ahead, sent before its
	#   DREQ but taken from the CQ after the DISCONNECTED event, turns the
	#   DISCONNECTED into 9 at the RDMA_WRITE_ADV wait.
	# - a wait that saw DISCONNECTED (10) breaks out with -1 and returns 0
	#   only if the state is still DISCONNECTED at the return: a completion
	#   the CQ thread takes in between (the peer's last message or WRITE,
	#   from before its DREQ) overwrites it.
	# Those exact signatures, after the DISCONNECT EVENT, are the
	# disconnect too; any other failure is not.
	local lost='wait for RDMA_WRITE_ADV state [69]|wait for RDMA_WRITE_(ADV|COMPLETE) state 10'
	if [ "$rc" = hung ]; then
		:
	elif [ "$rc" = 255 ] && grep -q 'DISCONNECT EVENT' /tmp/rping-c0.out &&
		tail -3 /tmp/rping-c0.out | grep -qxE "$lost"; then
		log "rping -c lost the DISCONNECTED state (its own race:" \
			"$(grep "^wait for" /tmp/rping-c0.out | tail -1)): exit 255"
	else
		check "rping -c exits 0 after the disconnect (got $rc)" test $rc = 0 || return 1
	fi
	check "rping -c reports the disconnect" \
		grep -q 'DISCONNECT EVENT' /tmp/rping-c0.out || return 1
	wait_event 30 $p TIMEWAIT_EXIT || return 1
	log "module (server): rping=$(conn_field $p rping) $(wr_line $p)"
	check "server: something flushed" test "$(conn_field $p flushed)" -gt 0 || return 1
	all_back $p || return 1
	check "server: one DISCONNECTED" test "$(event_count $p DISCONNECTED)" = 1 || return 1

	timeout 300 rping -s -a 10.77.0.1 -p 7183 -S 1024 -V > /tmp/rping-s0.out 2>&1 & pid=$!
	wait_for 60 cma_listening 7183 || fail "rping -s not listening" || return 1
	ctl connect 7 rxe0 10.77.0.1 10.77.0.1 tcp:7183 cma_port=5005 rping=0:1024 || return 1
	check "20 pings done" wait_for 60 pings_at_least 7 20 || return 1
	log "mapped at the disconnect: $(rcd_stat wr_bufs_mapped), MRs $(rcd_stat mrs_live)"
	ctl disconnect 7 || return 1
	wait_event 30 7 DREP_RECEIVED || return 1
	rping_end $pid /tmp/rping-s0.out; rc=$RC
	sed 's/^/# rping -s: /' /tmp/rping-s0.out | tail -5
	log "rping -s exit $rc after the disconnect"
	# rping's server has the same kind of race (librdmacm/examples/rping.c):
	# its DISCONNECTED handler sets the state and posts the semaphore, and a
	# receive completion the CQ thread takes after it (the client's last
	# message, sent before its DREQ) goes through server_recv, which sets
	# RDMA_WRITE_ADV (8) over any state but RDMA_WRITE_COMPLETE and those
	# up to CONNECTED; the server thread then wakes to state 8 where it
	# waits for something else, and returns -1 (255) as the state is no
	# longer DISCONNECTED ("wait for RDMA_WRITE_COMPLETE state 8" after
	# "server DISCONNECT EVENT"). Or the server thread sees DISCONNECTED
	# (10) at its wait and breaks out, and such a completion overwrites
	# the state before rping_test_server() returns, which then returns -1
	# ("wait for ... state 10", then "rping server failed: -1"). The same
	# goes for the completion of its RDMA READ from our buffer (its
	# response came before our DREQ): taken after the DISCONNECTED, it sets
	# RDMA_READ_COMPLETE (7) and posts, and the server thread, woken at its
	# READ wait by the DISCONNECTED's post, goes on to its next wait and
	# finds 7 there ("wait for RDMA_WRITE_ADV state 7", seen in a make
	# check on 2026-12-05); its RDMA WRITE's sets RDMA_WRITE_COMPLETE (9).
	# So: after the DISCONNECT EVENT, a wait that found a state a
	# successful completion writes (6 to 9) or DISCONNECTED (10), then
	# "rping server failed: -1", is the disconnect too; any other failure
	# (ERROR, 11: a failed completion) is not.
	local late='^wait for RDMA_(READ|WRITE)_(ADV|COMPLETE) state ([6-9]|10)$'
	if [ "$rc" = hung ]; then
		:
	elif [ "$rc" = 255 ] &&
		sed -n '/server DISCONNECT EVENT/,$p' /tmp/rping-s0.out | grep -qE "$late" &&
		tail -1 /tmp/rping-s0.out | grep -qx 'rping server failed: -1'; then
		log "rping -s lost the DISCONNECTED state to a late completion" \
			"(its own race): exit 255"
	else
		check "rping -s exits 0 after the disconnect (got $rc)" test $rc = 0 || return 1
	fi
	check "rping -s reports the disconnect" \
		grep -q 'DISCONNECT EVENT' /tmp/rping-s0.out || return 1
	wait_event 30 7 TIMEWAIT_EXIT || return 1
	log "module (client): rping=$(conn_field 7 rping) $(wr_line 7)"
	check "client: something flushed" test "$(conn_field 7 flushed)" -gt 0 || return 1
	all_back 7 || return 1
	check "client: one DISCONNECTED" test "$(event_count 7 DISCONNECTED)" = 1 || return 1
	check "MRs deregistered, nothing mapped" wait_for 10 nothing_mapped
}

# proc_ended PID: PID (a child) has exited (gone, or a zombie not yet
# reaped): builtins only.
proc_ended() {
	local s
	read -r _ _ s _ 2>/dev/null < "/proc/$1/stat" || return 0
	[ "$s" = Z ]
}

# uverbs_of DEV: the name of DEV's uverbs character device (uverbsN).
uverbs_of() {
	local d n
	for d in /sys/class/infiniband_verbs/uverbs*; do
		read -r n 2>/dev/null < "$d/ibdev" || continue
		[ "$n" != "$1" ] || { echo "${d##*/}"; return 0; }
	done
	return 1
}

# uverbs_users UVERBS: the processes with /dev/infiniband/UVERBS open, as
# COMM(PID); builtins only (find(1) over /proc took 15 s under TCG).
uverbs_users() {
	local f pid c out=
	for f in /proc/[0-9]*/fd/*; do
		[[ $f -ef /dev/infiniband/$1 ]] || continue
		pid=${f#/proc/}; pid=${pid%%/*}
		read -r c 2>/dev/null < /proc/$pid/comm || continue
		[[ $out == *"($pid)"* ]] || out+=" $c($pid)"
	done
	echo "${out:- none}"
}

# RPING_BOUND: what a remote peer that keeps pinging may add to `rmmod` or
# to `rdma link del` of a device: the module's own work,
# a destroy and a QP drain per connection on the device (2 s at most each,
# milliseconds on rxe), not the peer's protocol (its DREQ's retries run
# for minutes). Seconds: removal_bounded_under_churn's deletion, the
# longest, took 2-6 s in make check's guests here and 12 s in make
# check-slow's, at half their speed; 30 s holds at a third.
RPING_BOUND=30

# timed_or_unblock WHAT PID PEER: waits up to RPING_BOUND s for PID to end;
# if it does not, kills PEER (what holds it), reaps both and fails. Sets
# DT to the seconds it took and RC to its status.
timed_or_unblock() {
	local t0=$SECONDS
	if ! wait_for $RPING_BOUND proc_ended "$2"; then
		fail "$1 still blocked after $RPING_BOUND s with the pings going on" \
			"(pings $(rping_field "$FOREIGN" pings))"
		kill "$3" 2>/dev/null; wait "$3"; wait "$2"
		log "$1 returned $((SECONDS - t0)) s after the start, once rping was killed"
		return 1
	fi
	wait "$2"; RC=$?; DT=$((SECONDS - t0))
	log "$1: exit $RC after $DT s"
}

# rping_endless_on_rxe1: rping -c -C 0 against a `listen rping=1` listener
# on rxe1 (10.77.0.2), both ends on rxe1, until 5 pings are served (the
# loop runs); rxe1 is made after rxe0 (a higher index: the IB core removes
# a client from its devices in index order, so at unload rxe0, the device
# that has nothing to do with the pings, goes first). Sets PID and FOREIGN.
rping_endless_on_rxe1() {
	ctl listen 1 rxe1 tcp:7184 cma=1 rping=1 auto_drep=- || return 1
	timeout 300 rping -c -a 10.77.0.2 -p 7184 -C 0 -S 1024 > /tmp/rping-h.out 2>&1 & PID=$!
	foreign_established || return 1
	check "5 pings served" wait_for 60 pings_at_least "$FOREIGN" 5
}

# rxe1_after_rxe0: both devices exist and rxe1's index is above rxe0's
# (`rdma dev show`: "INDEX: NAME: ...").
rxe1_after_rxe0() {
	local l i0= i1=
	while read -r l; do
		case $l in
		*": rxe0: "*) i0=${l%%:*} ;;
		*": rxe1: "*) i1=${l%%:*} ;;
		esac
	done < <(rdma dev show 2>/dev/null)
	[ -n "$i0" ] && [ -n "$i1" ] && [ "$i1" -gt "$i0" ]
}

# rtus_on_both N0 N1: rxe0's CM has received N0 RTUs and rxe1's N1 (for
# wait_for).
rtus_on_both() { counter_ge rxe0 cm_rx_msgs rtu "$1" && counter_ge rxe1 cm_rx_msgs rtu "$2"; }

# churn_loop IP PORT: rdma-core's cmtime, 10 connections at a time, again
# and again against the module's listener at IP:PORT until killed (a short
# pause after a failed round: the device may be gone).
churn_loop() {
	while :; do
		timeout 60 cmtime -s "$1" -p "$2" -c 10 >/dev/null 2>&1 || sleep 0.2
	done
}

# `rdma link del` and `rmmod` return
# within RPING_BOUND s while peers keep pinging, connecting and
# disconnecting on every device: rping -c -C 0 on rxe1, and cmtime rounds
# against a listener on each of rxe0 and rxe1. The deletion of rxe0 touches
# only rxe0's ends (the pings and rxe1's rounds go on), then `rmmod` ends
# everything: rping sees the DISCONNECT. (This test took over the checks of
# rping_peer_holds_no_removal_nor_unload, which did the same with the pings
# alone, in a second setup; our own disconnect of an endless rping, with no
# protocol error, is rping_disconnect_mid_flight's.)
test_removal_bounded_under_churn() {
	local del p0 p1 n0 r0 r1 d0 d1 rc uv t0 bad=0
	cm_base
	rping_setup || return
	command -v cmtime >/dev/null || { echo "# SKIP cmtime not installed"; return $KSFT_SKIP; }
	# rxe1 after rxe0 (rping_endless_on_rxe1): made again only if the kept
	# rxe1 is older (a device costs about 3 s to delete and make again).
	rxe1_after_rxe0 || rxe_del rxe1
	rxe_add rxe1 v1 || return 1
	rxe1_after_rxe0 || fail "rxe1 was made before rxe0" || return 1
	rping_endless_on_rxe1 || return 1
	ctl listen 2 rxe0 tcp:7185 cma=1 auto_drep=- || return 1
	ctl listen 3 rxe1 tcp:7186 cma=1 auto_drep=- || return 1
	r0=$(cm_counter rxe0 cm_rx_msgs rtu); r1=$(cm_counter rxe1 cm_rx_msgs rtu)
	churn_loop 10.77.0.1 7185 & p0=$!
	churn_loop 10.77.0.2 7186 & p1=$!
	# Each listener has had 5 RTUs, half a round: the deletion comes amid
	# rounds on both devices.
	check "both devices churn (RTUs on rxe0 and on rxe1)" \
		wait_for 60 rtus_on_both $((r0 + 5)) $((r1 + 5)) || bad=1
	uv=$(uverbs_of rxe0) || { fail "no uverbs device of rxe0"; bad=1; }
	t0=$SECONDS
	rdma link del rxe0 & del=$!
	# Our part: the IB core removes its clients last registered first, so
	# the module lets rxe0 go (its ends destroyed, their QPs drained)
	# before uverbs does. The rest of the deletion waits for user space:
	# rxe cannot disassociate a user context, so ib_uverbs_remove_one()
	# waits until every process with rxe0 open has closed it, here the
	# cmtime rounds of rxe0's loop (each ends by itself, within its
	# `timeout 60`).
	check "the module let rxe0 go within $RPING_BOUND s" \
		wait_for $RPING_BOUND dmesg_has 'device rxe0 removed$' || bad=1
	log "the module let rxe0 go after $((SECONDS - t0)) s"
	# No new rounds: they could not open rxe0 any more, they only fail,
	# again and again, three processes every 0.2 s that took the guest's
	# vCPU from the pings and the rounds on rxe1 the checks below wait for.
	kill $p0 2>/dev/null
	# Who holds rxe0's uverbs, if the deletion still waits after 10 s.
	wait_for 10 proc_ended $del ||
		log "rdma link del still waits; $uv (rxe0's uverbs) open in:$(uverbs_users $uv)"
	RPING_BOUND=70 timed_or_unblock "rdma link del rxe0" $del $PID || bad=1
	check "rdma link del rxe0 succeeds" test "${RC:-1}" = 0 || bad=1
	n0=$(rping_field "$FOREIGN" pings)
	r1=$(cm_counter rxe1 cm_rx_msgs rtu)
	check "the pings on rxe1 go on" wait_for 30 pings_at_least "$FOREIGN" $((n0 + 10)) || bad=1
	check "rxe1's rounds go on (its RTUs)" \
		wait_for 60 counter_ge rxe1 cm_rx_msgs rtu $((r1 + 2)) || bad=1
	d0=$(cm_counter rxe1 cm_tx_msgs dreq); d1=$(cm_counter rxe1 cm_rx_msgs dreq)
	rmmod rcd_harness & del=$!
	timed_or_unblock "rmmod" $del $PID || bad=1
	check "rmmod succeeds" test "${RC:-1}" = 0 || bad=1
	kill $p0 $p1 2>/dev/null
	wait $p0 $p1 2>/dev/null
	pkill -x cmtime
	# rping ends once its CM delivers the DISCONNECTED of our end's DREQ.
	# Or it hangs on its own: its test loop ends at the DISCONNECTED
	# ("wait for ... state 10", then returns 0), and main joins its CQ
	# thread, which leaves only on a flushed completion (rping.c's
	# cq_thread); when none comes, it waits for ever (seen in CI runs:
	# main in futex_wait, the CQ thread in ib_uverbs_event_read, the CM
	# thread past TIMEWAIT_EXIT, rxe1's DREQ sent and received). That is
	# after the disconnect reached it: the module's part, checked below.
	# Waited for: its end, or its loop's end then 5 s for it to leave.
	if ! { wait_for 30 eval 'proc_ended $PID || rping_loop_ended' &&
		wait_for 5 proc_ended $PID; }; then
		rping_stuck_diag $PID $d0 $d1
		if rping_loop_ended; then
			log "rping -c ended its loop at the DISCONNECTED and hangs in its" \
				"CQ thread (its own wait for a flush): killed"
		else
			fail "rping -c still runs 30 s after the unload:" \
				"$(tail -1 /tmp/rping-h.out)"
			bad=1
		fi
		kill $PID
	fi
	wait $PID; rc=$?
	log "rping -c: exit $rc after the unload: $(tail -1 /tmp/rping-h.out)"
	check "rping -c saw the disconnect" grep -q 'DISCONNECT EVENT' /tmp/rping-h.out || bad=1
	return $bad
}

# rping_loop_ended: /tmp/rping-h.out's rping -c ended its test loop at the
# DISCONNECTED ("wait for ... state 10" after the DISCONNECT EVENT).
# Builtins only: it is polled, and a poll's sed | grep cost the debug
# guest two process starts.
rping_loop_ended() {
	local -a l
	local x seen=
	mapfile -t l 2>/dev/null < /tmp/rping-h.out
	for x in "${l[@]}"; do
		[[ $x != *'DISCONNECT EVENT'* ]] || seen=1
		[ -n "$seen" ] &&
			[[ $x =~ ^wait\ for\ RDMA_(READ|WRITE)_(ADV|COMPLETE)\ state\ 10$ ]] &&
			return 0
	done
	return 1
}

# rping_stuck_diag PID TX0 RX0: what an rping (PID its timeout(1)) that did
# not end shows: its last lines, rxe1's DREQs sent and received since TX0
# and RX0 were read (a send counts once it completed, a receipt once the CM
# took it: a burst in flight makes them differ for a moment), and the
# kernel stack of each of its threads.
rping_stuck_diag() {
	local t r
	r=$(pgrep -P "$1" -x rping) || r=$1
	tail -5 /tmp/rping-h.out | sed 's/^/# rping -c: /'
	log "rxe1's DREQs since: sent $(($(cm_counter rxe1 cm_tx_msgs dreq) - $2)) (retries" \
		"$(cm_counter rxe1 cm_tx_retries dreq)), received" \
		"$(($(cm_counter rxe1 cm_rx_msgs dreq) - $3))"
	for t in /proc/"$r"/task/*; do
		log "thread ${t##*/} ($(cat "$t/comm" 2>/dev/null)):" \
			"$(tr '\n' ' ' < "$t/stack" 2>/dev/null)"
	done
}
timeout_test_removal_bounded_under_churn=300
