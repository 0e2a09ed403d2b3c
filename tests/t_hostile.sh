# SPDX-License-Identifier: GPL-2.0
#
# Hostile and careless callers: of the control interface (malformed input,
# unknown ids, huge writes, concurrent writers, a fuzzer) and consumer
# callbacks that sleep or call back into the module. The C API's bad
# callers are in t_capi.sh.

FUZZ=$RCD_TESTS/fuzz.py

# ctl_snapshot: what must not change when a command is refused.
ctl_snapshot() {
	cat "$RCD_DBG/conns" "$RCD_DBG/events"
	grep -vE '^(dreq_failed|drep_failed) ' "$RCD_DBG/stats"
}

# Malformed commands, unknown numbers, oversized writes: each refused with
# its errno; connection 2 and everything the module shows stay as they were.
test_ctl_malformed_and_unknown() {
	local before after
	cm_pair 2 || return 1
	before=$(ctl_snapshot)
	expect_errnos <<'EOF' || return 1
EINVAL|bogus
EINVAL|listen
EINVAL|listen 1 rxe0
EINVAL|listen x rxe0 0x1000
EBUSY|listen 1 rxe0 0x1000
EEXIST|listen 1 rxe0 0x2000
EINVAL|listen 9 rxe0 0x1000 cma=2
EINVAL|listen 9 rxe0 0x1000 on_dreq=sleep:10001
EINVAL|listen 9 rxe0 0x1000 on_dreq=fly
EINVAL|listen 9 rxe0 tcp:65536
EINVAL|listen 9 rxe0 0x1000 auto_drep=pat:225
EINVAL|listen 9 rxe0 0x1000 auto_drep=pat:1048576
ENODEV|listen 9 nodev 0x1000
EINVAL|connect 3 rxe0 10.77.0.1 10.77.0.1
EINVAL|connect 3 rxe0 10.77.0.1 10.77.0.1.5 0x1000
EINVAL|connect 3 rxe0 10.77.0.1 10.77.0 0x1000
EINVAL|connect 3 rxe0 10.77.0.1 10.77.0.256 0x1000
EINVAL|connect 3 rxe0 10.77.0.1 10.77.0.1 0x1000 retries=16
EINVAL|connect 3 rxe0 10.77.0.1 10.77.0.1 0x1000 lifetime=32
EINVAL|connect 3 rxe0 10.77.0.1 10.77.0.1 0x1000 resp=-1
EINVAL|connect 3 rxe0 10.77.0.1 10.77.0.1 0x1000 nosuch=1
EINVAL|connect 3 rxe0 10.77.0.1 10.77.0.1 0x1000 cma_port=65536
EINVAL|connect 3 rxe0 10.77.0.1 10.77.0.1 0x1000 auto_drep=pat:225
EINVAL|connect 1000003 rxe0 10.77.0.1 10.77.0.1 0x1000
EEXIST|connect 2 rxe0 10.77.0.1 10.77.0.1 0x1000
EINVAL|connect 3 rxe0 10.77.0.1 10.77.0.1 0x1000 resolve_ms=0
EINVAL|connect 3 rxe0 10.77.0.1 10.77.0.1 0x1000 resolve_ms=60001
EHOSTUNREACH|connect 3 rxe0 10.77.0.1 10.99.0.1 0x1000 resolve_ms=200
EHOSTUNREACH|connect 3 rxe0 10.77.0.1 10.77.0.9 0x1000 resolve_ms=200
ENODEV|connect 3 rxe9 10.77.0.1 10.77.0.1 0x1000
EINVAL|dreq
EINVAL|dreq x
EINVAL|dreq 2 hex:abc
EINVAL|dreq 2 hex:zz
EINVAL|dreq 2 fill:3:zzz
EINVAL|dreq 2 bogus:1
EINVAL|dreq 2 text:a extra
E2BIG|dreq 2 pat:1048577
EINVAL|dreq 2 pat:221
EINVAL|dreq 2 fill:65536:ff
EINVAL|dreq 3-2
EINVAL|dreq 0-4294967295
EINVAL|dreq 4294967296
EINVAL|dreq 2,,3
ENOENT|dreq 424242
ENOENT|drep 424242
ENOENT|disconnect 424242
ENOENT|post 424242 1
ENOENT|poll 424242
ENOENT|close 424242
EINVAL|drep 2
EINVAL|disconnect 2 pat:225
EINVAL|close 2 extra
EINVAL|post 2
EINVAL|poll
EOF
	# Bytes no command is made of: not UTF-8, NUL inside, 4096 of garbage,
	# one byte over the 4096 a write may carry.
	check "not UTF-8" \
		test "$(python3 -c 'import os,errno;fd=os.open("'$RCD_DBG'/ctl",os.O_WRONLY)
try: os.write(fd,b"dreq 2 text:\xff\xfe"); print("OK")
except OSError as e: print(errno.errorcode[e.errno])')" = EINVAL || return 1
	check "NUL inside" \
		test "$(python3 -c 'import os,errno;fd=os.open("'$RCD_DBG'/ctl",os.O_WRONLY)
try: os.write(fd,b"dreq 2\x00text:x"); print("OK")
except OSError as e: print(errno.errorcode[e.errno])')" = EINVAL || return 1
	expect_errno EINVAL "$(head -c 4096 /dev/zero | tr '\0' x)" || return 1
	expect_errno E2BIG "$(head -c 4097 /dev/zero | tr '\0' x)" || return 1
	after=$(ctl_snapshot)
	check "nothing changed" test "$before" = "$after" ||
		{ diff <(echo "$before") <(echo "$after") | sed 's/^/# /'; return 1; }
	check "still ESTABLISHED" test "$(conn_state 2)" = ESTABLISHED || return 1
	ctl dreq 2 text:still-works && wait_event 20 $((2 + PASSIVE_BASE)) DREQ_RECEIVED
}

# Four processes writing at once, 300 commands each, on the same ten
# connections (connect, dreq, drep, disconnect, post, poll, close): every
# write succeeds or is refused with a state errno, and once everything is
# closed nothing is left.
test_ctl_concurrent_writers() {
	local w pids=
	cm_pair 2 auto_drep=text:bye || return 1
	for w in 1 2 3 4; do
		python3 - "$RCD_DBG/ctl" $w > /tmp/writer.$w <<'PY' &
import errno, os, random, sys
ctl, seed = sys.argv[1], int(sys.argv[2])
r = random.Random(seed)
ok = {0, errno.ENOENT, errno.EEXIST, errno.ENOTCONN, errno.EALREADY, errno.EINVAL, errno.ENODEV,
      errno.ENOMEM}
seen, bad = {}, 0
for i in range(300):
    n = r.randrange(7000, 7010)
    p = n + 1000000
    cmd = r.choice(["connect %d rxe0 10.77.0.1 10.77.0.1 0x1000" % n, "dreq %d" % n, "dreq %d" % p,
                    "drep %d" % p, "disconnect %d" % n, "disconnect %d" % p, "post %d 1" % n,
                    "poll %d" % n, "close %d" % n, "close %d" % p, "dreq 7000-7009 text:all"])
    fd = os.open(ctl, os.O_WRONLY)
    try:
        os.write(fd, cmd.encode()); e = 0
    except OSError as x:
        e = x.errno
    os.close(fd)
    name = errno.errorcode.get(e, "OK") if e else "OK"
    seen[name] = seen.get(name, 0) + 1
    if e not in ok:
        bad += 1
        print("# FAIL: %s for %s" % (name, cmd))
print("# writer %d: %s" % (seed, " ".join("%s=%d" % kv for kv in sorted(seen.items()))))
sys.exit(1 if bad else 0)
PY
		pids="$pids $!"
	done
	local rc=0
	for w in $pids; do wait "$w" || rc=1; done
	cat /tmp/writer.[1-4]
	[ $rc = 0 ] || fail "a writer got an unexpected errno" || return 1
	log "after: $(stats_line)"
	ctl_errno "close 7000-7009,1007000-1007009" >/dev/null
	check "only the listener's and pair 2's ids left" \
		wait_for 60 stat_is cm_ids_live 3 || return 1
	check "pair 2 untouched" test "$(conn_state 2)" = ESTABLISHED
}

# The fuzzer (tests/fuzz.py ctl) for RCD_FUZZ_SECONDS (default 120) with a
# seed from the clock (printed: rerun with RCD_FUZZ_SEED): only allowed
# errnos; afterwards the module still works, everything closes and it
# unloads.
test_fuzz_ctl() {
	local seed=${RCD_FUZZ_SEED:-$(date +%s)}
	cm_pair 2 auto_drep=text:bye || return 1
	python3 "$FUZZ" ctl "${RCD_FUZZ_SECONDS:-120}" "$seed" || return 1
	log "after: $(stats_line)"
	# Everything the fuzzer may have made, closed; then the module still
	# makes a connection.
	ctl_errno "close 0-11,1000000-1000011,2000000-2009999" >/dev/null
	check "no id left" wait_for 60 stat_is cm_ids_live 0 ||
		{ sed 's/^/# /' $RCD_DBG/conns; return 1; }
	check "no endpoint left" test "$(rcd_stat endpoints_live)" = 0 || return 1
	ctl listen 1 rxe0 0x1000 || return 1
	ctl connect 3 rxe0 10.77.0.1 10.77.0.1 0x1000 || return 1
	wait_event 30 3 ESTABLISHED || return 1
	check "the module unloads" timeout 120 rmmod rcd_harness
}

# Random DREQ/DREP private data (tests/fuzz.py data): RCD_FUZZ_ROUNDS
# (default 40) connections, random lengths 0..300 and random bytes; too long
# is EINVAL with nothing sent, anything else arrives exactly.
test_fuzz_private_data() {
	local seed=${RCD_FUZZ_SEED:-$(date +%s)}
	cm_pair 2 || return 1
	python3 "$FUZZ" data "${RCD_FUZZ_ROUNDS:-40}" "$seed"
}

# --- consumer callbacks that sleep or call back in (on_dreq=) -------------------

# The DREQ callback sleeps 2 s, then answers: the DREP comes late, nothing
# breaks. (The CM's work queued behind the callback on its CPU waits too:
# the workqueue runs one item at a time per CPU.)
test_callback_sleeps() {
	local n=40 p=$((40 + PASSIVE_BASE)) t0 t1
	cm_pair $n auto_drep=text:late on_dreq=sleep:2000 || return 1
	t0=$(date +%s%N)
	ctl dreq $n || return 1
	wait_event 30 $n DREP_RECEIVED || return 1
	t1=$(date +%s%N)
	log "DREP after $(( (t1 - t0) / 1000000 )) ms"
	check "the callback's sleep ran" test "$(event_field $p ON_DREQ status)" = 0 || return 1
	check "ON_DREQ after 2 s" test $(( (t1 - t0) / 1000000 )) -ge 2000 || return 1
	wait_event 30 $n TIMEWAIT_EXIT && wait_event 30 $p TIMEWAIT_EXIT
}

# The DREQ callback sends a DREQ on its own connection: the CM refuses
# (-EINVAL: the id is in DREQ_RCVD), the connection still ends normally.
test_callback_dreq_on_own() {
	local n=41 p=$((41 + PASSIVE_BASE))
	cm_pair $n on_dreq=dreq || return 1
	ctl dreq $n || return 1
	wait_event 30 $p ON_DREQ || return 1
	check "refused with EINVAL" test "$(event_field $p ON_DREQ status)" = -22 || return 1
	check "still DREQ_RCVD" test "$(conn_state $p)" = DREQ_RCVD || return 1
	ctl drep $p text:after || return 1
	wait_event 30 $n DREP_RECEIVED || return 1
	exactly_once DISCONNECTED $p $p && exactly_once DISCONNECTED $n $n
}

# The DREQ callback calls disconnect() on its own connection: its QP
# flushes the 8 receives posted, the DREP goes out from inside the callback.
test_callback_disconnects_own() {
	local n=42 p=$((42 + PASSIVE_BASE))
	cm_pair $n on_dreq=disconnect || return 1
	ctl post $p 8 || return 1
	ctl dreq $n text:bye || return 1
	wait_event 30 $n DREP_RECEIVED || return 1
	check "disconnect() in the callback succeeded" \
		test "$(event_field $p ON_DREQ status)" = 0 || return 1
	# The CQ is drained at timewait exit, when the QP is freed.
	wait_event 30 $p TIMEWAIT_EXIT || return 1
	check "8 flushed" test "$(conn_field $p flushed)" = 8 || return 1
	check "a second disconnect() is EALREADY" expect_errno EALREADY "disconnect $p" || return 1
	exactly_once DISCONNECTED $p $p
}

# The DREQ callback of connection 43 disconnects connection 44: 44's peer
# gets the DREQ, 44 its DREP, and 43 is answered afterwards.
test_callback_disconnects_other() {
	local a=43 b=44
	CONNECT_OPTS=on_dreq=disconnect:$b cm_pair $a auto_drep=text:bye || return 1
	cm_pair $b || return 1
	ctl dreq $((a + PASSIVE_BASE)) text:start || return 1
	wait_event 30 $b DREP_RECEIVED || return 1
	check "disconnect(44) from 43's callback succeeded" \
		test "$(event_field $a ON_DREQ status)" = 0 || return 1
	check "43 still waits for its DREP" test "$(conn_state $a)" = DREQ_RCVD || return 1
	ctl drep $a text:later || return 1
	wait_event 30 $((a + PASSIVE_BASE)) DREP_RECEIVED || return 1
	exactly_once DISCONNECTED $a $b
}

# A drop of another connection's id inside a callback does not wait for
# that id's callbacks: b's DREQ goes unanswered (rxe0's traffic dropped on
# v0), and its DREQ_ERROR callback (from the MAD layer's worker) sleeps
# 10 s; meanwhile a's DREQ callback (the CM's worker) closes b, dropping its
# CmId. A drop that waited for b's callback there could wait for ever (b's
# callback dropping a's id in turn, each waiting for the other); deferred,
# a's callback returns at once and b's id goes when its callback returned.
# The window: a's callback ran while b's still slept (its line "after an
# error callback's 10000 ms" not yet in the log when a's ON_DREQ came).
# Timing: b's packet life time 2^20 x 4.096 us and no retry: its DREQ fails
# after about 8.7 s, and its timewait (as long) would free it only after
# that, so b is still there to close for 8 s (a few steps take about 1 s
# here). a's long timing keeps its ends where they are meanwhile (its
# peer's DREQ is not answered: no auto_drep), so b is the only id that goes.
dmesg_lacks() { ! dmesg_has "$@"; }
test_callback_closes_other_without_waiting() {
	local mac rc
	cm_base
	rxe_add rxe0 v0 && rxe_add rxe1 v1 || return 1
	# rxe1 reaches 10.77.0.1 while v0 drops everything it sends: ARP's
	# answers too, so the neighbour is made permanent for the test.
	read -r mac < /sys/class/net/v0/address || return 1
	ip neigh replace 10.77.0.1 lladdr "$mac" dev v1 nud permanent || return 1
	closes_other_body
	rc=$?
	ip neigh del 10.77.0.1 dev v1
	return $rc
}
closes_other_body() {
	local a=95 b=96 live
	# One try of each message: the DREQ's about 9 s (lifetime=20), the
	# REP's 1 s for the RTU (resp=18; resp=14 gave it 64 ms).
	CONNECT_OPTS="lifetime=20 resp=18 retries=0 on_error=sleep:10000" cm_pair2 $b || return 1
	CONNECT_OPTS="lifetime=20 resp=20 retries=3 on_dreq=close:$b" cm_pair2 $a || return 1
	[ -d /sys/module/sch_netem ] || modprobe sch_netem || return 1
	tc qdisc add dev v0 root netem loss 100% || return 1
	ctl dreq $b text:unanswered || return 1
	wait_event 60 $b DREQ_ERROR || return 1
	check "b's error callback sleeps" \
		dmesg_lacks "conn $b: after an error callback's" || return 1
	ctl dreq $((a + PASSIVE_BASE)) text:close-b || return 1
	if ! wait_event 30 $a ON_DREQ; then
		log "DREQs: rxe1 sent $(cm_counter rxe1 cm_tx_msgs dreq), rxe0 received" \
			"$(cm_counter rxe0 cm_rx_msgs dreq); $((a + PASSIVE_BASE)):" \
			"$(conn_state $((a + PASSIVE_BASE)));" \
			"neighbours of v1: $(ip neigh show dev v1)"
		return 1
	fi
	check "a's callback closed b and returned while b's error callback slept" \
		dmesg_lacks "conn $b: after an error callback's" || return 1
	check "the close succeeded" test "$(event_field $a ON_DREQ status)" = 0 || return 1
	check "b left the table" test -z "$(conn_state $b)" || return 1
	# b's id is destroyed once its callback returned (the reaper's work).
	live=$(rcd_stat cm_ids_live)
	check "b's error callback ended" \
		wait_for 30 dmesg_has "conn $b: after an error callback's 10000 ms" || return 1
	check "b's id destroyed after its callback (cm_ids_live $live, then one less)" \
		wait_for 10 stat_is cm_ids_live $((live - 1))
}

# The numbers one `dreq`/`disconnect` names are bounded
# in total, not per range: a 4 KiB write of `dreq 0-65535,0-65535,...`
# (about 370 ranges, 24 million numbers) is refused with E2BIG before it
# allocates anything big; 65,536 numbers in all are still taken (ENOENT:
# no such connection), one more is E2BIG. The module lives on.
test_ctl_range_total_bounded() {
	local cmd="dreq 0-65535" slab0 slab1 got
	rxe_add rxe0 v0 && rcd_load || return 1
	while [ $((${#cmd} + 8)) -le 4096 ]; do cmd+=",0-65535"; done
	slab0=$(slab_kb)
	got=$(ctl_errno "$cmd")
	check "one ${#cmd}-byte dreq of ranges of 65,536: E2BIG (got $got)" \
		test "$got" = E2BIG || return 1
	got=$(ctl_errno "disconnect ${cmd#dreq }")
	check "the same as a disconnect: E2BIG (got $got)" test "$got" = E2BIG || return 1
	slab1=$(slab_kb)
	log "one write of ${#cmd} bytes; slab ${slab0} kB -> ${slab1} kB"
	expect_errnos <<'EOF2' || return 1
ENOENT|dreq 0-32767,32768-65535
E2BIG|dreq 0-32767,32768-65536
E2BIG|dreq 0-65535,7
EINVAL|dreq 0-65536
EOF2
	ctl listen 1 rxe0 0x1000 && ctl close 1
}
