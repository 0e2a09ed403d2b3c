# SPDX-License-Identifier: GPL-2.0
#
# The suite's own checks can fail: each helper below is
# fed what used to pass it by accident, and must now refuse it. Only the
# helpers' names of tests/lib.sh as they were before the fix are used
# here, so that this file also runs against the old helpers and shows
# their holes.

# all_back (tests/t_rping.sh) and balanced (tests/t_data.sh) on a number
# that has no work-request counters (no such connection, or nothing
# posted): awk compared the absent fields as 0 == 0 + 0 + 0 and passed.
test_harness_wr_checks_need_counters() {
	rxe_add rxe0 v0 && rcd_load || return 1
	! all_back 4242 >/dev/null ||
		fail "all_back passed on a connection that does not exist" || return 1
	! balanced 4242 >/dev/null ||
		fail "balanced passed on a connection that does not exist" || return 1
	cm_pair 2 || return 1
	! all_back 2 >/dev/null ||
		fail "all_back passed on a connection with nothing posted" || return 1
	ctl post 2 1 && ctl post $((2 + PASSIVE_BASE)) 1 || return 1
	ctl disconnect 2 || return 1
	wait_event 20 $((2 + PASSIVE_BASE)) DISCONNECTED || return 1
	ctl disconnect $((2 + PASSIVE_BASE)) || return 1
	wait_event 30 2 TIMEWAIT_EXIT || return 1
	check "all_back passes on a connection whose receive came back" all_back 2 || return 1
}

# dreqs_received_above N (lib.sh) takes N from cm_counter, which counts
# from the clean guest on; it read the raw counter, so that any DREQ an
# earlier test made rxe0 receive counted as one of this test's.
test_harness_dreq_counter_since_clean() {
	local v
	cm_pair 2 auto_drep=text:bye || return 1
	ctl dreq 2 || return 1
	wait_event 20 2 DREP_RECEIVED || return 1
	read -r v < /sys/class/infiniband/rxe0/ports/1/cm_rx_msgs/dreq
	log "rxe0 has received $v DREQs in all"
	check "a DREQ was received" test "$v" -ge 1 || return 1
	# A test's start: the clean guest (rxe0 stays); nothing is sent
	# after it, so the first read takes the base (lib.sh: cm_base_load).
	cleanup || return 1
	check "the counter since the clean guest is 0" \
		test "$(cm_counter rxe0 cm_rx_msgs dreq)" = 0 || return 1
	! dreqs_received_above 0 ||
		fail "dreqs_received_above 0 with no DREQ since the clean guest" || return 1
}

# cm_counter counts from the test's own base (cm_base); a test that reads
# the counters with none fails and says so, rather than count from what the
# devices did before it (lib.sh: cm_base_load). Here a DREQ and its DREP go
# by with no base; the read that follows fails, and after cm_base the same
# counter is 0.
test_harness_counters_need_a_base() {
	local out
	cm_pair 2 auto_drep=text:bye || return 1
	ctl dreq 2 || return 1
	wait_event 20 2 DREP_RECEIVED || return 1
	if out=$(cm_counter rxe0 cm_rx_msgs drep); then
		fail "cm_counter read $out with no base after the DREP"
		return 1
	fi
	log "with no base: $out"
	[[ $out == *"no base (cm_base)"* ]] || fail "the read does not say why" || return 1
	cm_base
	check "from cm_base on, no DREP received" test "$(cm_counter rxe0 cm_rx_msgs drep)" = 0
}

# cleanup ends the rdma-core tools a test left, reading the comm of only
# the processes made since the last clean-up (its PID floor): an rping
# server in a session of its own (the test's end would not end it) is
# made after the clean guest of this test, and cleanup must find it.
_comm_is() { local c; read -r c 2>/dev/null < "/proc/$1/comm" && [ "$c" = "$2" ]; }
test_harness_cleanup_ends_left_tools() {
	local pid floor
	command -v rping >/dev/null ||
		{ echo "# SKIP rping (rdmacm-utils) not installed"; return $KSFT_SKIP; }
	rxe_add rxe0 v0 || return 1
	read -r floor < /run/rcd-pid-floor || return 1
	setsid rping -s -a 10.77.0.1 -p 7998 > /dev/null 2>&1 & pid=$!
	check "rping -s running" wait_for 10 _comm_is "$pid" rping || return 1
	log "rping -s is $pid, the floor $floor"
	cleanup || return 1
	check "cleanup ended it" wait_for 10 procs_gone "$pid"
}

# The runner's timeout (lib.sh: rcd_run, which replaced timeout(1)) still
# ends a test that hangs: one that would sleep 30 s under a timeout of 2 s
# ends with status 124 within seconds, its line before the sleep kept and
# none after it; a test that ends in time keeps its own status; and what a
# test leaves in the background (a helper loop, a peer) ends with it.
_rcd_hangs() { echo "before the sleep"; nap 30; echo "after the sleep"; }
_rcd_fails_3() { echo "quick"; return 3; }
# (Its output elsewhere, as a loop logging to a file has: one on the test's
# pipe kept rcd_run waiting for it, and so passed the check below late.)
_rcd_leaves_helper() { sleep 300 > /dev/null 2>&1 & echo $! > /run/rcd-helper.pid; }
_rcd_prints() { echo "# a comment"; echo "-n plain"; echo; printf 'no newline'; }
test_harness_timeout_kills_test() {
	local rc t0=$SECONDS out=/run/rcd-timeout-test.out pid
	rcd_run _rcd_hangs 2 "$out" > /dev/null; rc=$?
	log "a test of 30 s under a timeout of 2 s: status $rc after $((SECONDS - t0)) s"
	check "status 124 (got $rc)" test $rc = 124 || return 1
	# Far below the sleep's 30 s on any guest: the bound was 8 s, and the
	# listing of the processes (a ps) alone took 4 to 7 s of it on slow
	# machines (status 124 after 9 s on one).
	check "ended within 20 s" test $((SECONDS - t0)) -le 20 || return 1
	check "its line before the sleep kept" grep -qx "before the sleep" "$out" || return 1
	check "no line after the sleep" sh -c "! grep -q 'after the sleep' $out" || return 1
	check "the processes at the timeout printed, with where each sleeps" \
		grep -qE '^ +PID +STAT +WCHAN +ELAPSED' "$out" || return 1
	rcd_run _rcd_fails_3 10 "$out" > /dev/null; rc=$?
	check "a test that ends in time keeps its status (3, got $rc)" test $rc = 3 || return 1
	# A helper the test left in the background ends with the test.
	rcd_run _rcd_leaves_helper 10 "$out" > /dev/null; rc=$?
	check "the test with a helper passed (got $rc)" test $rc = 0 || return 1
	read -r pid < /run/rcd-helper.pid
	check "its helper ($pid) ended with it" wait_for 10 procs_gone "$pid" || return 1
	# The lines as they were to OUT, as comments to stdout (rcd_stream).
	rcd_run _rcd_prints 10 "$out" > /run/rcd-stream.out || return 1
	check "the test's lines kept as they were" \
		test "$(cat "$out")" = "$(printf '# a comment\n-n plain\n\nno newline')" || return 1
	check "and streamed as comments" test "$(cat /run/rcd-stream.out)" = \
		"$(printf '# a comment\n# -n plain\n#\n# no newline')"
}

# cleanup reports what it could not undo: here a module held by an open
# file of its debugfs directory cannot be unloaded. It used to drop rmmod's
# error and return 0, and the next test ran on the old module. (The file
# is waited for, not a fixed nap: a cleanup before the holder opened it
# would succeed.)
holds_stats() { [ "$(readlink "/proc/$1/fd/3" 2>/dev/null)" = "$RCD_DBG/stats" ]; }
test_harness_cleanup_reports_failure() {
	local holder rc
	rxe_add rxe0 v0 && rcd_load || return 1
	( exec 3< "$RCD_DBG/stats"; exec sleep 60 ) & holder=$!
	check "the holder opened stats" wait_for 10 holds_stats $holder ||
		{ kill $holder; return 1; }
	cleanup; rc=$?
	log "cleanup with the module held: $rc"
	kill $holder; wait $holder
	check "cleanup failed (got $rc)" test $rc != 0 || return 1
	check "the module is still loaded" rcd_loaded || return 1
	cleanup || fail "cleanup once the module is free" || return 1
	check "the module is gone" sh -c "! test -d /sys/module/rcd_harness"
}

# mod_insert and mod_remove, the suite's insmod and rmmod (lib.sh): the
# static tool tests/rcd_mod.c was built (make check's prepare and the
# selftests' make build it; without it they fall back to kmod's, whose
# starts cost the debug guest twice as much), a module's parameters reach
# it, and a second insert, the removal of a module in use and of one not
# loaded fail, change nothing and say why.
test_harness_mod_tool() {
	local out v
	check "rcd_mod was built ($RCD_TESTS/rcd_mod)" test -n "$RCD_MOD_TOOL" || return 1
	rxe_add rxe0 v0 && rcd_load || return 1
	out=$(mod_insert "$RCD_HARNESS_KO" 2>&1) && { fail "a second insert succeeded"; return 1; }
	check "a second insert says why ($out)" eval '[[ $out == *"File exists" ]]' || return 1
	out=$(mod_remove rust_cm_disconnect 2>&1) &&
		{ fail "the product was removed under the harness"; return 1; }
	log "the product's removal with the harness loaded: $out"
	check "the product is still loaded" product_loaded || return 1
	check "the harness is still loaded" rcd_loaded || return 1
	mod_remove rcd_harness || { fail "mod_remove rcd_harness"; return 1; }
	check "the harness is gone" eval '! rcd_loaded' || return 1
	out=$(mod_remove rcd_harness 2>&1) && { fail "a second removal succeeded"; return 1; }
	check "a second removal says why ($out)" \
		eval '[[ $out == *"No such file or directory" ]]' || return 1
	mod_insert "$RCD_MODS/rcd_cmhold.ko" hold_ms=1234 state_in=7 || return 1
	read -r v < /sys/module/rcd_cmhold/parameters/hold_ms
	read -r out < /sys/module/rcd_cmhold/parameters/state_in
	mod_remove rcd_cmhold || { fail "mod_remove rcd_cmhold"; return 1; }
	check "both parameters reached the module (hold_ms=$v state_in=$out)" \
		test "$v $out" = "1234 7"
}

# A test's log checks see its own log only (dmesg_has, since the marker the
# clean guest leaves): a line of an earlier test, here one this test
# writes before a marker of its own, no longer satisfies them, where the
# log-wide grep they replace still did. And an errno is matched whole:
# "-2" is not "-22". (The errno half looks at this test's own log too:
# t_capi's -ENOENT test leaves a real "connection 240: -2" line earlier
# in the same guest.)
test_harness_log_checks_are_the_tests() {
	local n=240 old
	echo "rcd_harness: device rxe9 added (1 IB CM port(s))" > /dev/kmsg
	dmesg_mark
	echo "rcd_consumer: cannot run on connection $n: -22" > /dev/kmsg
	! dmesg_has "rcd_consumer: cannot run on connection $n: -2\$" ||
		fail "the errno -2 matched the line of -22" || return 1
	old=$(dmesg_test | grep -c "cannot run on connection $n: -2")
	log "the old unanchored grep matched -22: $old line(s)"
	check "the unanchored grep did match -22" test "$old" = 1 || return 1
	old=$(dmesg | grep -c 'device rxe9 added')
	log "the old log-wide grep finds the earlier line: $old line(s)"
	! dmesg_has 'device rxe9 added' ||
		fail "dmesg_has found a line from before the test's marker" || return 1
	echo "rcd_harness: device rxe9 added (1 IB CM port(s))" > /dev/kmsg
	check "dmesg_has finds the test's own line" dmesg_has 'device rxe9 added ' || return 1
	check "dmesg_test has no line from before the marker" \
		test "$(dmesg_test | grep -c 'device rxe9 added (1')" = 1 || return 1
	kmsg_tool_checks
}

# Where tests/rcd_kmsg.c was built (make check's prepare and the selftests'
# make build it), the looks go through it, each reads only what the last
# did not, and they give dmesg's lines: a kernel's escape undone (a tab), a
# line counted once however often it was looked at, the same count as the
# fallback's without the tool.
kmsg_tool_checks() {
	local -a KMSG
	local t=$'rcd-kmsg: a\ttab' old new
	check "rcd_kmsg was built ($RCD_TESTS/rcd_kmsg)" test -n "$RCD_KMSG_TOOL" || return 1
	check "the marker opened /dev/kmsg for it" test -n "${RCD_KMSG_FD:-}" || return 1
	printf '%s\n' "$t" > /dev/kmsg
	dmesg_count 'rcd-kmsg: ' && dmesg_count 'rcd-kmsg: '
	check "a line looked at twice counts once ($REPLY)" test "$REPLY" = 1 || return 1
	check "the looks went through rcd_kmsg" kmsg_lines || return 1
	new=$(dmesg_test)
	old=$(dmesg_after_mark)
	log "rcd_kmsg: ${#KMSG[@]} lines, the last: ${KMSG[-1]}"
	check "dmesg_test's lines are dmesg's" test "$new" = "${old:0:${#new}}" || return 1
	check "the escape undone" dmesg_has $'a\ttab$' || return 1
	# Without the tool: the same two lines, not the rxe9 line before the
	# test's marker.
	RCD_KMSG_FD='' dmesg_count 'device rxe9 added|rcd-kmsg: '
	check "without rcd_kmsg, dmesg_count counts the same 2 lines ($REPLY)" \
		test "$REPLY" = 2 || return 1
	# A look that read the whole log again would rebuild the file from
	# the marker on, without this line.
	echo "rcd-kmsg: not in the log" >> "$RCD_KMSG_FILE"
	check "a look reads only what is new" dmesg_has 'rcd-kmsg: not in the log'
}

# The harness's files import each other one way only: no file imports one
# that imports it back, through any chain (tests/imports.py follows every
# `use` and path of a sibling file, and the re-exports of conn.rs). One
# ring once held seven of conn/'s files (endpoint, table, handler,
# deadlines, pace, reports, test_hooks).
test_harness_imports_no_ring() {
	local h=$RCD_TESTS/harness out rc=0
	[ -f "$h/rcd_harness.rs" ] || h=$RCD_TESTS/modules/harness
	out=$(python3 "$RCD_TESTS/imports.py" "$h") || rc=$?
	echo "$out" | grep '^ring: ' | sed 's/^/# /'
	log "$(echo "$out" | tail -n 1)"
	check "no import ring among the harness's files" test $rc = 0
}
