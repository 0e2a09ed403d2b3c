#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# The test runner inside a guest. tests/run.sh boots one or more guests and
# gives each a shared queue directory: the plan (one test name a line, the
# longest first) and a claim directory. A guest takes the next test nobody
# has claimed (its claim, a file made with O_EXCL, is atomic across guests) and runs it
# with a clean guest before it, in a subshell under a timeout (lib.sh: rcd_run),
# streaming its output as it runs; when the queue is empty it checks its
# own kmemleak and dmesg (tests/t_kernel.sh, the last two tests of every
# guest). That part is the kselftest program tests/rust_cm_disconnect.sh
# (tests/ksft.sh) in queue mode, run by the kernel's own kselftest runner
# (RCD_KSFT/kselftest/runner.sh). The two-host tests come first, here.
#
#   tests/guest.sh --queue DIR GUEST   run tests from DIR's plan as GUEST
#   tests/guest.sh --one FUNCTION      run one test function (the two-host
#                                      tests' unit)
#
# Each test's lines, as tests/run.sh reads them:
#   # test: NAME            it starts
#   # ...                   what it prints, as it prints it
#   # time: cleanup C s, test T s, busy B s
#   RESULT ok NAME | RESULT not ok NAME | RESULT ok NAME # SKIP reason
# A test returns 0 (pass), 4 (skip: it prints "# SKIP reason") or anything
# else (fail).
# RCD_TESTS: the tests to run, this directory by default; `make
# check-intree` passes the kernel tree's copy
# (tools/testing/selftests/rdma/rust_cm_disconnect/), which finds the module
# its tree built and the harness its selftests' make built (tests/lib.sh).
RCD_TESTS=${RCD_TESTS:-$(cd "$(dirname "$0")" && pwd)}
. "$RCD_TESTS/lib.sh"
for f in "$RCD_TESTS"/t_*.sh; do . "$f"; done

if [ "${1:-}" = --one ]; then
	set -o pipefail
	"$2"
	exit $?
fi

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
	local t=$1 t0=$SECONDS t1 rc=1 tmo clean=ok b0
	cpu_busy; b0=$CPU_BUSY
	export RCD_HOSTS_DIR=$queue/hosts.d/$t
	mkdir -p "$RCD_HOSTS_DIR"
	echo "# test: $t"
	# What cleanup could not undo fails this half, after the test (the
	# other host still meets it at every barrier). rxe0 on the NIC and the
	# product stay from test to test, as the queue keeps its devices and
	# the product (lib.sh: cleanup): a device deleted and added again, and
	# the product unloaded and loaded again, cost each host about 6 s a
	# test under TCG (10 processes). What the last test left on them fails
	# here as it fails there: a held product, a device that is not rxe0 on
	# the NIC (deleted); the CM's counters start from zero again.
	RCD_KEEP_NIC=$RCD_NIC RCD_KEEP_PRODUCT=1 cleanup || clean=failed
	# The two-host tests read the CM's counters (lib.sh: cm_base).
	cm_base
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
		rcd_run "$t" "$tmo"
		rc=$?
		[ $rc -ne 124 ] || echo "# timed out after $tmo s"
	fi
	RCD_HOSTS_FIRST_WAIT=60
	# Done here: the other host may clean up once it is done too.
	peer_put end "$rc"
	[ -n "${RCD_HOSTS_MISSED:-}" ] ||
		peer_wait end 120 quiet 2>&1 >/dev/null || echo "# host $RCD_PEER did not end its half (in 120 s, or its guest stopped)"
	cpu_busy
	echo "# time: cleanup $((t1 - t0)) s, test $((SECONDS - t1)) s," \
		"busy $(( (CPU_BUSY - b0 + 50) / 100 )) s"
	if [ $clean = failed ]; then
		echo "# the clean guest before it failed (cleanup above)"
		rc=1
	fi
	RCD_REASON=$(sed -n 's/^# SKIP //p' /run/rcd-test.out | tail -1)
	rcd_result "$t" "$rc"
}

[ "${1:-}" = --queue ] || { echo "usage: $0 --queue DIR GUEST | --one test_NAME" >&2; exit 2; }
queue=$2
mount | grep -q ' /sys/kernel/debug ' || mount -t debugfs none /sys/kernel/debug
# The boot's log (the KUnit doctests, any report at boot) before the log is
# cleared for the tests: dmesg_clean reads it too (tests/t_kernel.sh), and
# the host keeps a copy in the queue directory.
dmesg > /run/rcd-boot-dmesg
cp /run/rcd-boot-dmesg "$queue/boot.g$3.log" 2>/dev/null
dmesg -C
echo "# guest $3 up after $(cut -d' ' -f1 /proc/uptime) s (kernel $(uname -r), $(nproc) vCPU)"
if [ -s "$queue/hosts" ] && [ "$3" -le 2 ]; then
	run_hosts "$3"
fi
unset RCD_HOSTS_DIR
# The queue: the selftest program in queue mode, run by the kernel's
# kselftest runner. The runner writes the program's lines, prefixed with
# "# ", to its $logfile (/dev/stdout: in a virtme-ng guest a link to the
# console port, not this pipe: so fd 1 by /proc); one "# " is taken off
# again so that they read as the tests' own.
BASE_DIR=$RCD_KSFT
. "$BASE_DIR/kselftest/runner.sh"
(
	export RCD_QUEUE=$queue
	logfile=/proc/self/fd/1
	kselftest_override_timeout=${RCD_VM_TIMEOUT:-4500}
	run_one rdma/rust_cm_disconnect "$RCD_TESTS/rust_cm_disconnect.sh" 1
) 2>&1 < /dev/null | sed -u 's/^# //; /^RESULT /!s/^\([^#]\)/# \1/; s/^$/#/'
# The last line of a guest that got to its end: tests/run.sh fails the
# guest (its guest_end) without it, or without the kselftest runner's
# "ok 1" of the program above (not a timeout, not a crash).
echo "# guest $3 end"
