#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# The test runner inside a guest. tests/run.sh boots one or more guests and
# gives each a shared queue directory: the plan (one test name a line, the
# longest first) and a claim directory. A guest takes the next test nobody
# has claimed (mkdir of its claim is atomic across guests), runs it in its
# own process under a timeout with a clean guest before it, and streams its
# output as it runs; when the queue is empty it checks its own kmemleak and
# dmesg (the last two tests of every guest).
#
#   tests/guest.sh --queue DIR GUEST   run tests from DIR's plan as GUEST
#   tests/guest.sh --one test_NAME     run one test (used by the runner)
#
# Each test's lines, as tests/run.sh reads them:
#   # test: NAME            it starts
#   # ...                   what it prints, as it prints it
#   # time: cleanup C s, test T s
#   RESULT ok NAME | RESULT not ok NAME | RESULT ok NAME # SKIP reason
# A test returns 0 (pass), 4 (skip: it prints "# SKIP reason") or anything
# else (fail).
RCD_TOP=$(cd "$(dirname "$0")/.." && pwd)
export RCD_TOP
. "$RCD_TOP/tests/lib.sh"
for f in "$RCD_TOP"/tests/t_*.sh; do . "$f"; done

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
	# Reports a test provoked on purpose and checked itself are skipped
	# (expect_reports_begin/end in lib.sh).
	bad=$(dmesg_outside_expected | grep -E "$DMESG_BAD")
	[ -z "$bad" ] || { echo "$bad" | head -40 | sed 's/^/# /'; return 1; }
}

if [ "${1:-}" = --one ]; then
	set -o pipefail
	"$2"
	exit $?
fi

# run_one NAME: one test with a clean guest before it, streamed.
run_one() {
	local t=$1 t0=$SECONDS t1 tmo rc reason out
	echo "# test: ${t#test_}"
	[ "$t" = test_dmesg_clean ] || cleanup
	# A test file may give one of its tests longer: timeout_test_NAME=SECONDS.
	tmo=timeout_$t; tmo=${!tmo:-${RCD_TEST_TIMEOUT:-600}}
	t1=$SECONDS
	out=/run/rcd-test.out
	# Streamed line by line (a test cut short by a timeout keeps what it
	# printed); a SKIP reason is read back from the copy.
	# stdin from /dev/null: the caller's loop reads the test names from
	# its stdin, and a test step that read stdin would eat them.
	timeout --kill-after=10 "$tmo" bash "$0" --one "$t" </dev/null 2>&1 |
		tee "$out" | sed -u 's/^\([^#]\)/# \1/; s/^$/#/'
	rc=${PIPESTATUS[0]}
	# Where a run's time goes: the clean guest before the test, the test.
	echo "# time: cleanup $((t1 - t0)) s, test $((SECONDS - t1)) s"
	if [ $rc -eq 0 ]; then
		echo "RESULT ok ${t#test_}"
	elif [ $rc -eq $KSFT_SKIP ]; then
		reason=$(sed -n 's/^# SKIP //p' "$out" | tail -1)
		echo "RESULT ok ${t#test_} # SKIP ${reason:-no reason given}"
	else
		[ $rc -ne 124 ] || echo "# timed out after $tmo s"
		echo "RESULT not ok ${t#test_}"
	fi
}

# run_hosts: guests 1 and 2 are hosts a and b of the two-host tests
# (tests/t_hosts.sh): their NICs share a QEMU socket network. Each test
# runs on both at once, each its half; they meet at barriers (files in
# the shared queue directory, tests/t_hosts.sh: peer_put, peer_wait), never
# after fixed sleeps. The clean guest before a test and the end of a test
# are barriers too, so neither host cleans up under the other.
run_hosts() {
	local g=$1 t f
	RCD_HOST=$([ "$g" = 1 ] && echo a || echo b)
	RCD_PEER=$([ "$g" = 1 ] && echo b || echo a)
	RCD_MY_IP=10.78.0.$g
	RCD_PEER_IP=10.78.0.$((3 - g))
	RCD_NIC=
	for f in /sys/class/net/*; do
		[ -e "$f/device" ] && { RCD_NIC=${f##*/}; break; }
	done
	# tests/run.sh creates it when the other guest's QEMU has exited: every
	# barrier then fails at once (tests/t_hosts.sh: peer_wait).
	RCD_PEER_DEAD=$queue/dead.$((3 - g))
	export RCD_HOST RCD_PEER RCD_MY_IP RCD_PEER_IP RCD_NIC RCD_PEER_DEAD
	if [ -z "$RCD_NIC" ]; then
		echo "# guest $g is host $RCD_HOST but has no NIC"
	else
		ip addr add "$RCD_MY_IP/24" dev "$RCD_NIC" && ip link set "$RCD_NIC" up
		read -r mac < "/sys/class/net/$RCD_NIC/address"
		echo "# guest $g is host $RCD_HOST: $RCD_NIC $mac $RCD_MY_IP, peer $RCD_PEER_IP"
	fi
	while read -r t; do
		run_host_test "$t"
	done < "$queue/hosts"
}

# run_host_test NAME: this host's half of a two-host test.
run_host_test() {
	local t=$1 t0=$SECONDS t1 rc=1 tmo
	export RCD_HOSTS_DIR=$queue/hosts.d/$t
	mkdir -p "$RCD_HOSTS_DIR"
	echo "# test: $t"
	cleanup
	# The first test also waits for the other guest to boot.
	t1=$SECONDS
	if [ -z "$RCD_NIC" ]; then
		echo "# no NIC: the guest was started without the hosts' network"
	elif [ -n "${RCD_HOSTS_MISSED:-}" ]; then
		# The other host missed an earlier test's start: no waiting again.
		echo "# not run: host $RCD_PEER did not come to the start of $RCD_HOSTS_MISSED"
	elif ! peer_sync start "${RCD_HOSTS_FIRST_WAIT:-300}" 2>&1; then
		RCD_HOSTS_MISSED=$t
	else
		tmo=timeout_$t; tmo=${!tmo:-${RCD_TEST_TIMEOUT:-300}}
		t1=$SECONDS
		timeout --kill-after=10 "$tmo" bash "$0" --one "$t" </dev/null 2>&1 |
			tee /run/rcd-test.out | sed -u 's/^\([^#]\)/# \1/; s/^$/#/'
		rc=${PIPESTATUS[0]}
		[ $rc -ne 124 ] || echo "# timed out after $tmo s"
	fi
	RCD_HOSTS_FIRST_WAIT=60
	# Done here: the other host may clean up once it is done too.
	peer_put end "$rc"
	[ -n "${RCD_HOSTS_MISSED:-}" ] ||
		peer_wait end 120 quiet 2>&1 >/dev/null || echo "# host $RCD_PEER did not end its half (in 120 s, or its guest stopped)"
	echo "# time: cleanup $((t1 - t0)) s, test $((SECONDS - t1)) s"
	if [ $rc -eq 0 ]; then
		echo "RESULT ok $t"
	elif [ $rc -eq $KSFT_SKIP ]; then
		echo "RESULT ok $t # SKIP $(sed -n 's/^# SKIP //p' /run/rcd-test.out | tail -1)"
	else
		echo "RESULT not ok $t"
	fi
}

[ "${1:-}" = --queue ] || { echo "usage: $0 --queue DIR GUEST | --one test_NAME" >&2; exit 2; }
queue=$2
mount | grep -q ' /sys/kernel/debug ' || mount -t debugfs none /sys/kernel/debug
dmesg -C
echo "# guest $3 up after $(cut -d' ' -f1 /proc/uptime) s (kernel $(uname -r), $(nproc) vCPU)"
if [ -s "$queue/hosts" ] && [ "$3" -le 2 ]; then
	run_hosts "$3"
fi
mkdir -p "$queue/claim"
while read -r t; do
	mkdir "$queue/claim/$t" 2>/dev/null || continue
	run_one "test_$t"
done < "$queue/plan"
cleanup
run_one test_kmemleak_clean
run_one test_dmesg_clean
