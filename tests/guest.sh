#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# The test runner inside the guest: sources tests/t_*.sh, runs every
# function named test_* in file order, each in its own process under a
# timeout with a clean guest before it, and prints KTAP. A test returns 0
# (pass), 4 (skip: it prints "# SKIP reason") or anything else (fail).
# The last two tests of every run check kmemleak and dmesg.
#   tests/guest.sh [NAME-FILTER]    a grep -E pattern over test names
#   tests/guest.sh --one test_NAME  runs one test (used by the runner)
RCD_TOP=$(cd "$(dirname "$0")/.." && pwd)
export RCD_TOP
. "$RCD_TOP/tests/lib.sh"
for f in "$RCD_TOP"/tests/t_*.sh; do . "$f"; done

# Every run ends with these two: a leak of ours or a warning anywhere in the
# run is a failure.

# kmemleak, scanned now (the test kernel does not scan by itself): any
# unreferenced object allocated by this module, rxe, the IB CM or core (a
# backtrace naming them, or with a bare address: code of a module since
# unloaded) fails the run. Others are counted in the log.
test_kmemleak_clean() {
	local f=/sys/kernel/debug/kmemleak all ours
	if [ ! -e $f ]; then
		echo "# SKIP this kernel has no kmemleak (CONFIG_DEBUG_KMEMLEAK): the plain kernel"
		return $KSFT_SKIP
	fi
	# Objects must be 5 s old and unreferenced in two scans to count.
	sleep 6; echo scan > $f; sleep 6; echo scan > $f
	all=$(grep -c '^unreferenced object' $f)
	# Matched in the backtrace only: a hex dump's bytes may spell anything.
	ours=$(awk 'BEGIN { RS = "unreferenced object" } NR > 1 { bt = substr($0, index($0, "backtrace")) }
		NR > 1 && bt ~ /rust_cm_disconnect|rcd_|rxe|ib_cm|ib_core|[ \t]ib_|[ \t]cm_|rdma|[ \t]0xffffffff[0-9a-f]+\n/ { n++; if (n <= 3) print "unreferenced object" $0 } END { print "ours " n + 0 }' $f)
	echo "# kmemleak: $all unreferenced object(s) in the whole kernel; by first caller past the allocator:"
	awk 'BEGIN { RS = "unreferenced object" } NR > 1 { n = split($0, l, "\n"); for (i = 1; i <= n; i++) if (l[i] ~ /backtrace/) break; for (i++; i <= n; i++) if (l[i] !~ /alloc|kmem_cache|krealloc|kmemdup|kstrdup|reserve/) break; sub(/^[ \t]*/, "", l[i]); sub(/\+.*/, "", l[i]); c[l[i]]++ } END { for (f in c) print c[f], f }' $f | sort -rn | head -8 | sed 's/^/#   /'
	echo "$ours" | sed 's/^/# /'
	[ "$(echo "$ours" | tail -1)" = "ours 0" ]
}

# dmesg: KASAN, lockdep, BUG/WARNING/Oops, sleeping in atomic context, debug
# objects, hung tasks, soft lockups, RCU stalls.
test_dmesg_clean() {
	local bad
	bad=$(dmesg | grep -E 'BUG:|WARNING:|Oops|Call Trace|sleeping function called from invalid context|KASAN|ODEBUG|possible recursive locking|circular locking|inconsistent lock state|blocked for more than|soft lockup|rcu.*stall')
	[ -z "$bad" ] || { echo "$bad" | head -40 | sed 's/^/# /'; return 1; }
}

if [ "${1:-}" = --one ]; then
	set -o pipefail
	"$2"
	exit $?
fi

filter=${1:-.}
mount | grep -q ' /sys/kernel/debug ' || mount -t debugfs none /sys/kernel/debug
dmesg -C
mapfile -t tests < <(for f in "$RCD_TOP"/tests/t_*.sh; do
	grep -oE '^test_[a-z0-9_]+\(\)' "$f" | tr -d '()'
done | grep -E "$filter")
tests+=(test_kmemleak_clean test_dmesg_clean)

echo "KTAP version 1"
echo "1..${#tests[@]}"
n=0
for t in "${tests[@]}"; do
	n=$((n + 1))
	t0=$SECONDS
	[ "$t" = test_dmesg_clean ] || cleanup
	# A test file may give one of its tests longer: timeout_test_NAME=SECONDS.
	tmo=timeout_$t; tmo=${!tmo:-${RCD_TEST_TIMEOUT:-600}}
	t1=$SECONDS
	out=$(timeout --kill-after=10 "$tmo" bash "$0" --one "$t" 2>&1)
	rc=$?
	[ -z "$out" ] || echo "$out" | sed 's/^\([^#]\)/# \1/; s/^$/#/'
	# Where a run's time goes: the clean guest before the test, the test.
	echo "# time: cleanup $((t1 - t0)) s, test $((SECONDS - t1)) s"
	name=${t#test_}
	if [ $rc -eq 0 ]; then
		echo "ok $n $name"
	elif [ $rc -eq $KSFT_SKIP ]; then
		reason=$(echo "$out" | sed -n 's/^# SKIP //p' | tail -1)
		echo "ok $n $name # SKIP ${reason:-no reason given}"
	else
		[ $rc -ne 124 ] || echo "# timed out after $tmo s"
		echo "not ok $n $name"
	fi
done
cleanup
