#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# `make check` and `make stress`: build the module, boot the debug test
# kernel in RCD_JOBS guests side by side, run the KTAP suite there
# (tests/guest.sh, the tests shared out through a queue), print the report
# and end with
#   N passed, N failed[, N skipped]
# Exits non-zero if a test failed, or if a guest did not run all it took.
#   tests/run.sh [NAME-FILTER]
#
# Tiers (RCD_TIER):
#   check   every test but the storms, at the sizes that prove each
#           property (the stress tests at a tenth to a fortieth of their
#           full size, the fuzzer for 10 s): the README's test command
#           and CI.
#   stress  the full-size runs only: 10,000 cycles, 1,000 connections at once
#           twice, unload with 1,000 live, 40 rounds of unload under
#           timewait exits, 50 load/use/unload cycles, the storms at 1,000
#           and 2,000, the fuzzer for 120 s and its 40-round data pass,
#           2,000 cycles against a peer's hold (peer_held_within_bound), a
#           flood of 3,000 never-answered REQs (flood_vs_rdma_cm).
# Every size can still be set by hand (RCD_CYCLES, RCD_ROUND, RCD_MANY,
# RCD_LOADS, RCD_UNLOAD_ROUNDS, RCD_STORM, RCD_FLOOD, RCD_PINGERS, RCD_FUZZ_SECONDS,
# RCD_FUZZ_ROUNDS).
# RCD_KO=/path/to/rust_cm_disconnect.ko tests another build of the module
# (the product; the harness is tests/harness/rcd_harness.ko, RCD_HARNESS_KO).
# RCD_TESTS=DIR runs the tests of DIR instead of tests/: `make check-intree`
# gives the kernel tree's selftests directory, whose tests load the module
# that tree built (tests/lib.sh).
set -uo pipefail
. "$(dirname "$0")/../scripts/prepare.sh"

tier=${RCD_TIER:-check}
case $tier in
check)
	: "${RCD_CYCLES:=250}" "${RCD_ROUND:=125}" "${RCD_MANY:=50}" "${RCD_LOADS:=5}"
	: "${RCD_UNLOAD_ROUNDS:=4}" "${RCD_FLOOD:=150}"
	: "${RCD_PINGERS:=10}" "${RCD_RPING_PROCS:=2}" "${RCD_PAIRS:=4}"
	: "${RCD_FUZZ_SECONDS:=10}" "${RCD_FUZZ_ROUNDS:=10}"
	# The randomized hostile CM peer (tests/t_fuzzpeer.sh).
	: "${RCD_FUZZPEER_SECONDS:=10}"
	# A skip fails the run (tests/lib.sh: rcd_result).
	: "${RCD_NO_SKIP:=1}"
	# Two guests of one vCPU each: the suite is one shell after another,
	# so one guest keeps about one core busy. Measured: see README.
	# 1 GiB each: the guests are CPU-bound, and with less memory kmemleak
	# scans less (every scan reads each page's struct page) and the guest
	# boots faster. The most memory a test keeps is flood_vs_rdma_cm's
	# (SUnreclaim about 54 MB after its floods).
	: "${RCD_JOBS:=2}" "${RCD_VM_MEM:=1G}"
	# The guests' limit: about 3.5 times the guests' part at the pace
	# tests/test-times records (about 1,030 s; 1,442 s were measured on a
	# machine at 1.4 times those times), so that a machine three times
	# slower still ends inside it.
	: "${RCD_VM_TIMEOUT:=3600}"
	only=.
	# Stress-only: the storms (their comparison needs 1,000 connections
	# and more; a small one checks what interop_cmtime_client_100 does).
	except='^(storm_cmtime_vs_rdma_cm|storm_big_cmtime_vs_rdma_cm)$'
	;;
stress)
	: "${RCD_CYCLES:=10000}" "${RCD_ROUND:=500}" "${RCD_MANY:=1000}" "${RCD_LOADS:=50}"
	: "${RCD_UNLOAD_ROUNDS:=40}" "${RCD_STORM:=1000}" "${RCD_STORM_BIG:=2000}"
	: "${RCD_FLOOD:=3000}"
	: "${RCD_PINGERS:=300}" "${RCD_RPING_PROCS:=10}" "${RCD_PAIRS:=16}"
	: "${RCD_FUZZ_SECONDS:=120}" "${RCD_FUZZ_ROUNDS:=40}"
	: "${RCD_FUZZPEER_SECONDS:=600}"
	: "${RCD_NO_SKIP:=1}"
	# One guest: the slab levels the stress tests watch are per guest, and
	# 1,000 connections (2,000 QPs) under KASAN want the memory.
	: "${RCD_JOBS:=1}" "${RCD_VM_MEM:=4G}" "${RCD_VM_TIMEOUT:=4500}"
	only='^(storm_cmtime_vs_rdma_cm|pings_and_long_timers_bounded|storm_big_cmtime_vs_rdma_cm|flood_vs_rdma_cm|churn_cycles|peer_held_within_bound|many_at_once_both_sides|unload_with_many_live|unload_during_timewait_exits|load_use_unload|fuzz_ctl|fuzz_private_data|fuzz_cm_peer)$'
	;;
*) echo "run: RCD_TIER=$tier: want check or stress" >&2; exit 2 ;;
esac
export RCD_VM_MEM RCD_VM_TIMEOUT

# The plan: every test_* of the t_*.sh files that both filters select, by
# the last run's times on this kernel (kept in the cache: NAME CLEANUP-S
# TEST-S BUSY-S a line). First the tests that mostly wait (at least 3 s
# and 30% of their time not busy: timers, deletions, a callback's sleep),
# the longest wait first, while make check's third guest (6.12's set) can
# use the CPU they leave; then the rest longest first, so that the guests
# finish together. (Measured: with the longest first only, the waits of
# the tests left after the third guest's end left a CPU idle for about
# 116 s of the two 7.3 guests' last 400 s.)
times=$RCD_CACHE/test-times-$KERNEL
# A fresh cache starts from the times shipped with the tests (tests/test-times:
# NAME KERNEL CLEANUP-S TEST-S BUSY-S).
[ -s "$times" ] || awk -v k="$KERNEL" '!/^#/ && $2 == k { print $1, $3, $4, $5 }' \
	"$here/tests/test-times" > "$times" 2>/dev/null
q=$(mktemp -d "$RCD_CACHE/queue.XXXXXX")
trap 'rm -rf "$q"' EXIT
# The tests each guest ends with (lib.sh: RCD_END_TESTS), out of the queue;
# a tests directory from before them had these two.
end_tests=$(sed -n 's/^RCD_END_TESTS="\(.*\)"$/\1/p' "${RCD_TESTS:-$here/tests}/lib.sh" 2>/dev/null)
end_tests=${end_tests:-kmemleak_clean dmesg_clean}
nend=$(wc -w <<<"$end_tests")
for f in "$here"/tests/t_*.sh; do
	grep -oE '^test_[a-z0-9_]+\(\)' "$f" | sed 's/^test_//; s/()$//'
done | grep -vxE "${end_tests// /|}" | grep -E "$only" | grep -vE "${except:-^$}" |
	grep -E "${1:-.}" > "$q/names"
awk 'NR == FNR { d[$1] = $2 + $3; if ($4 != "") w[$1] = $2 + $3 - $4; next }
	{ t = ($1 in d) ? d[$1] : 60; i = ($1 in w) ? w[$1] : 0
	  if (i >= 3 && i * 10 >= t * 3) print 1, i, FNR, $1; else print 2, t, FNR, $1 }' \
	"$times" "$q/names" 2>/dev/null | sort -k1,1n -k2,2nr -k3,3n | awk '{ print $4 }' > "$q/plan" ||
	cp "$q/names" "$q/plan"
[ -s "$q/plan" ] || cp "$q/names" "$q/plan"
ntests=$(wc -l < "$q/plan")
# The two-host tests (tests/t_hosts.sh, functions hosts_*): guests 1 and 2
# are also two hosts on a network of their own, and run these first, side
# by side, each its half (tests/guest.sh); then both go on with the queue.
grep -oE '^hosts_[a-z0-9_]+\(\)' "$here/tests/t_hosts.sh" 2>/dev/null | sed 's/()$//' |
	grep -E "$only" | grep -E "${1:-.}" > "$q/hosts"
nhosts=$(wc -l < "$q/hosts")
[ $((ntests + nhosts)) -gt 0 ] || { echo "run: no test matches '${1:-.}' in tier $tier" >&2; exit 2; }
jobs=$RCD_JOBS
[ "$jobs" -le "$ntests" ] || jobs=$ntests
[ "$nhosts" -eq 0 ] || [ "$jobs" -ge 2 ] || jobs=2
# One vCPU a guest when there are two or more; a lone guest gets both.
export RCD_VM_CPUS=${RCD_VM_CPUS:-$((jobs > 1 ? 1 : 2))}
# Each guest: its end tests, then guest_end (it got to its end: below).
plan=$((nhosts + ntests + (nend + 1) * jobs))
# The hosts' network: QEMU's UDP socket netdev, a port each on loopback
# (either guest may start first). Ports from this run's number, moved on
# while one is taken.
port_free() { ! ss -Hlun "sport = :$1" 2>/dev/null | grep -q .; }
hport=$((20000 + ($$ % 20000) * 2))
until port_free $hport && port_free $((hport + 1)); do hport=$((hport + 2)); done

knobs="RCD_CYCLES=$RCD_CYCLES RCD_ROUND=$RCD_ROUND RCD_MANY=$RCD_MANY RCD_LOADS=$RCD_LOADS"
knobs="$knobs RCD_UNLOAD_ROUNDS=$RCD_UNLOAD_ROUNDS RCD_FLOOD=$RCD_FLOOD"
# The kernel's kselftest runner and KTAP helpers, from the test kernel's tree.
knobs="$knobs RCD_KSFT=$KDIR/tools/testing/selftests"
# Its configuration: which detectors it has (tests/t_kernel.sh:
# detectors_armed).
knobs="$knobs RCD_KCONFIG=$KDIR/.config"
knobs="$knobs RCD_FUZZ_SECONDS=$RCD_FUZZ_SECONDS RCD_FUZZ_ROUNDS=$RCD_FUZZ_ROUNDS"
knobs="$knobs RCD_FUZZPEER_SECONDS=$RCD_FUZZPEER_SECONDS"
if [ -n "${RCD_TESTS:-}" ]; then
	knobs="$knobs RCD_TESTS=$RCD_TESTS"
	[ -z "${RCD_KO:-}" ] || knobs="$knobs RCD_KO=$RCD_KO"
else
	knobs="$knobs RCD_KO=${RCD_KO:-$here/rust_cm_disconnect.ko}"
fi
for v in RCD_NO_SKIP RCD_FUZZ_SEED RCD_TEST_TIMEOUT RCD_STORM RCD_STORM_BIG RCD_STORM_GOAL RCD_STORM_FLOOR \
	RCD_FUZZPEER_SEED RCD_FUZZPEER_DRAIN RCD_HARNESS_KO RCD_PINGERS RCD_RPING_PROCS RCD_PAIRS RCD_LOAD_SLACK_MS \
	RCD_REMOVAL_BOUND_S; do
	[ -z "${!v:-}" ] || knobs="$knobs $v=${!v}"
done

echo "# make ${tier} (Linux $KERNEL): $ntests tests in $jobs guest(s) of $RCD_VM_CPUS vCPU, $RCD_VM_MEM each$([ "$nhosts" = 0 ] || echo ", first $nhosts two-host tests in guests 1 and 2"); $knobs"
start=$SECONDS
for ((g = 1; g <= jobs; g++)); do
	(
		if [ "$nhosts" -gt 0 ] && [ $g -le 2 ]; then
			export RCD_VM_MAC=52:54:00:12:78:0$g
			export RCD_VM_NET="udp=127.0.0.1:$((hport + 2 - g)),localaddr=127.0.0.1:$((hport + g - 1))"
		fi
		RCD_VM_RWDIR=$q bash "$here/scripts/vm.sh" \
			"$knobs bash $here/tests/guest.sh --queue $q $g" \
			2>&1 | sed -u "s/\r//g" > "$q/g$g.log"
		echo "${PIPESTATUS[0]}" > "$q/g$g.rc"
		# The other host's barriers fail at once from now on
		# (tests/t_hosts.sh: peer_wait).
		: > "$q/dead.$g"
	) &
	# Progress as it happens; the report is printed whole at the end.
	tail -s 2 --pid=$! -F "$q/g$g.log" 2>/dev/null | while read -r l; do
		case $l in
		"# guest "*" up after"*) echo "# [$((SECONDS - start)) s] ${l#\# }" ;;
		"RESULT "*) echo "# [$((SECONDS - start)) s] guest $g: ${l#RESULT }" ;;
		"# guest "*" is host "*) echo "# [$((SECONDS - start)) s] ${l#\# }" ;;
		esac
	done &
done
wait
elapsed=$((SECONDS - start))

# The KTAP report: each test's block, in plan order; a guest's own end
# tests after it, and whether it got to its end.
report() {
	local g name n=0 why vm_rc
	block() { # LOG NAME [LABEL]: print NAME's block from LOG, numbered
		awk -v name="$2" -v label="${3:-$2}" -v n="$n" '
			$0 == "# test: " name { on = 1; print; next }
			on && /^RESULT / { sub(/^RESULT /, ""); sub(" " name, " " n " " label); print; found = 1; exit }
			on && /^# test: / { exit }
			on { print }
			END { if (!found) { print "# no result: the guest stopped during this test or before it"; print "not ok " n " " label } }' "$1"
	}
	# A two-host test: both halves, then one result, ok if both were.
	hosts_block() { # NAME
		local g h res=ok
		for g in 1 2; do
			h=$([ $g = 1 ] && echo a || echo b)
			echo "# host $h (guest $g):"
			awk -v name="$1" '
				$0 == "# test: " name { on = 1; next }
				on && /^RESULT / { print "# " $0; found = 1; exit }
				on && /^# test: / { exit }
				on { print }
				END { if (!found) print "# no result: the guest stopped during this test or before it" }' "$q/g$g.log"
			if grep -q "^RESULT ok $1 # SKIP" "$q/g$g.log"; then
				[ "$res" != ok ] || res="ok # SKIP $(sed -n "s/^RESULT ok $1 # SKIP //p" "$q/g$g.log")"
			else
				grep -qx "RESULT ok $1" "$q/g$g.log" || res="not ok"
			fi
		done
		case $res in
		"ok # SKIP"*) echo "ok $n $1 ${res#ok }" ;;
		*) echo "$res $n $1" ;;
		esac
	}
	while read -r name; do
		n=$((n + 1))
		hosts_block "$name"
	done < "$q/hosts"
	while read -r name; do
		n=$((n + 1))
		g=$(grep -lx "# test: $name" "$q"/g*.log 2>/dev/null | head -1)
		if [ -n "$g" ]; then block "$g" "$name"; else
			echo "# never started: its guest ran out of time or died"
			echo "not ok $n $name"
		fi
	done < "$q/plan"
	for ((g = 1; g <= jobs; g++)); do
		head -3 "$q/g$g.log" | grep '^# guest' || echo "# guest $g printed nothing: it did not come up"
		for name in $end_tests; do
			n=$((n + 1))
			block "$q/g$g.log" "$name" "$name$([ "$jobs" = 1 ] || echo "_guest$g")"
		done
		# guest_end: the guest ran to its last line (tests/guest.sh) and the
		# kselftest runner saw its program end well; else whatever it did
		# after its last result (a crash, a hang to the timeout) is lost.
		n=$((n + 1)) why=
		vm_rc=$(cat "$q/g$g.rc" 2>/dev/null || echo "?")
		[ "$vm_rc" = 0 ] || why="$why; it exited with status $vm_rc (124: RCD_VM_TIMEOUT=$RCD_VM_TIMEOUT s ran out)"
		grep -q '^# ok 1 selftests: rdma/rust_cm_disconnect' "$q/g$g.log" ||
			why="$why; the kselftest runner did not see its program end well (killed, timed out)"
		grep -qx "# guest $g end" "$q/g$g.log" ||
			why="$why; it never printed its last line: it died or hung after its last result"
		if [ -z "$why" ]; then
			echo "ok $n guest_end$([ "$jobs" = 1 ] || echo "_guest$g")"
		else
			echo "# guest $g: ${why#; }"
			echo "not ok $n guest_end$([ "$jobs" = 1 ] || echo "_guest$g")"
		fi
	done
}
# RCD_LOG names the logs of one run of several (tests/check.sh: the 6.12
# part's are check-6.12*.log).
tag=${RCD_LOG:-$tier}
log=$RCD_CACHE/$tag.log
# Each guest's whole output (and its boot log), next to the report: the
# queue goes at exit, and with it what a guest that never came up printed
# (QEMU's own "terminating on signal N from pid P", a panic with
# RCD_VM_CONSOLE=1).
rm -f "$RCD_CACHE/$tag"-g*.log "$RCD_CACHE/$tag"-boot.g*.log
for f in "$q"/g*.log "$q"/boot.g*.log; do
	[ ! -f "$f" ] || cp "$f" "$RCD_CACHE/$tag-${f##*/}"
done
# The plan and the report must agree: a result missing (or one too many)
# is a failure of its own, never a quiet difference in the count.
report > "$q/body"
nres=$(grep -cE '^(not )?ok [0-9]+ ' "$q/body")
{
	echo "KTAP version 1"
	if [ "$nres" -eq "$plan" ]; then
		echo "1..$plan"
		cat "$q/body"
	else
		echo "1..$((plan + 1))"
		cat "$q/body"
		echo "# the plan had $plan tests, the report $nres results"
		echo "not ok $((plan + 1)) report_matches_plan"
	fi
} | tee "$log"

# Keep each test's clean-up and test times for the next plan's order (this
# run's replace the earlier ones; a two-host test keeps the slower host's).
# The guest's CPU during both (busy) is kept beside them, for the reader.
# Not a slowed run's (make check-slow: the guests pinned to a host CPU),
# whose times are not this machine's.
if [ -z "${RCD_VM_HOST_CPUS:-}" ]; then
	cat "$q"/g*.log |
		awk '/^# test: / { t = $3 } /^# time: / && t { print t, $4, $7, $10; t = "" }' \
		> "$q/times.new"
	touch "$times"
	awk 'NR == FNR { t[$1] = $2 " " $3 " " $4; next }
		!($1 in s) || $2 + $3 > s[$1] { s[$1] = $2 + $3; n[$1] = $2 " " $3 " " $4 }
		END { for (k in t) if (!(k in n)) n[k] = t[k]; for (k in n) print k, n[k] }' \
		"$times" "$q/times.new" | sort > "$q/times.all" && mv "$q/times.all" "$times"
fi

# The storm's connections over time (tests/t_safety.sh), as a picture
# next to the log, when the run had one (scripts/storm-plot.sh).
if grep -q '^#   timeline: ' "$log" && command -v gnuplot >/dev/null; then
	bash "$here/scripts/storm-plot.sh" "$log" "$RCD_CACHE/$tag-storm" || true
fi

passed=$(grep -cE '^ok [0-9]+ ' "$log")
skipped=$(grep -cE '^ok [0-9]+ .*# SKIP' "$log")
failed=$(grep -cE '^not ok [0-9]+ ' "$log")
passed=$((passed - skipped))
rc=0
for ((g = 1; g <= jobs; g++)); do
	vm_rc=$(cat "$q/g$g.rc" 2>/dev/null || echo "?")
	[ "$vm_rc" = 0 ] || { echo "# guest $g exited with status $vm_rc (124: RCD_VM_TIMEOUT=$RCD_VM_TIMEOUT s ran out)"; rc=1; }
done
# (guest_end and report_matches_plan have failed the count already.)
[ $((passed + skipped + failed)) -eq "$plan" ] || [ $((passed + skipped + failed)) -eq $((plan + 1)) ] ||
	{ echo "# planned $plan, reported $((passed + skipped + failed))"; failed=$((failed + 1)); }
echo "# $tier: $elapsed s in the guests; cleanup $(awk '/^# time: / { c += $4; t += $7; b += $10 } END { print c " s, tests " t " s, busy " b " s" }' "$log")"
[ "$failed" -eq 0 ] || rc=1
line="$passed passed, $failed failed"
[ "$skipped" -eq 0 ] || line="$line, $skipped skipped"
echo "$line"
exit $rc
