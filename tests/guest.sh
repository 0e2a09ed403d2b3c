#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# The test runner inside the guest: sources tests/t_*.sh, runs every
# function named test_* in file order, each in its own process under a
# timeout with a clean guest before it, and prints KTAP. A test returns 0
# (pass), 4 (skip: it prints "# SKIP reason") or anything else (fail).
# The last test of every run checks dmesg.
#   tests/guest.sh [NAME-FILTER]    a grep -E pattern over test names
#   tests/guest.sh --one test_NAME  runs one test (used by the runner)
RCD_TOP=$(cd "$(dirname "$0")/.." && pwd)
export RCD_TOP
. "$RCD_TOP/tests/lib.sh"
for f in "$RCD_TOP"/tests/t_*.sh; do . "$f"; done

# Every run ends with this one: a warning anywhere in the run is a failure.
test_dmesg_clean() {
	local bad
	bad=$(dmesg | grep -E 'BUG:|WARNING:|Oops|Call Trace|sleeping function called from invalid context|KASAN|kmemleak|possible recursive locking|circular locking')
	[ -z "$bad" ] || { echo "$bad" | sed 's/^/# /'; return 1; }
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
tests+=(test_dmesg_clean)

echo "KTAP version 1"
echo "1..${#tests[@]}"
n=0
for t in "${tests[@]}"; do
	n=$((n + 1))
	[ "$t" = test_dmesg_clean ] || cleanup
	out=$(timeout --kill-after=10 "${RCD_TEST_TIMEOUT:-600}" bash "$0" --one "$t" 2>&1)
	rc=$?
	[ -z "$out" ] || echo "$out" | sed 's/^\([^#]\)/# \1/; s/^$/#/'
	name=${t#test_}
	if [ $rc -eq 0 ]; then
		echo "ok $n $name"
	elif [ $rc -eq $KSFT_SKIP ]; then
		reason=$(echo "$out" | sed -n 's/^# SKIP //p' | tail -1)
		echo "ok $n $name # SKIP ${reason:-no reason given}"
	else
		[ $rc -ne 124 ] || echo "# timed out after ${RCD_TEST_TIMEOUT:-600} s"
		echo "not ok $n $name"
	fi
done
cleanup
