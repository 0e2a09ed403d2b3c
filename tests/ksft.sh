# SPDX-License-Identifier: GPL-2.0
#
# The test suite as a kselftest program (tests/rust_cm_disconnect.sh, the
# TEST_PROGS of tests/Makefile) and the unit everything runs a test with.
# The tests are functions test_NAME in tests/t_*.sh (hosts_NAME in
# t_hosts.sh: two hosts, tests/guest.sh runs those); tests/t_kernel.sh's
# end tests (lib.sh: RCD_END_TESTS: devices_deleted, kmemleak_clean,
# verbs_leak_detected in make check's guests, dmesg_clean,
# detectors_armed) come last, as they check what ran before.
#
#   rust_cm_disconnect.sh              every test (not the two-host ones),
#                                      KTAP through the kernel's
#                                      kselftest/ktap_helpers.sh
#   rust_cm_disconnect.sh NAME...      those tests, then the end tests
#   RCD_QUEUE=DIR rust_cm_disconnect.sh
#                                      this guest's share of `make check`'s
#                                      queue (tests/guest.sh, through the
#                                      kernel's kselftest runner)
#   ksft.sh --one FUNCTION             one test function, nothing else
#
# Each test is run with a clean guest before it (lib.sh's cleanup: harness
# unloaded, no qdisc or policy route, only rxe0/rxe1 on the veth pair, their
# CM counters read from zero), in a subshell under its timeout (lib.sh: rcd_run)
# (timeout_FUNCTION=SECONDS in its file, else RCD_TEST_TIMEOUT or 600 s),
# its lines streamed as they come:
#   # test: NAME
#   # ...                  what it measured
#   # time: cleanup C s, test T s, busy B s (the guest's CPU: lib.sh cpu_busy)
# then its KTAP result, or in queue mode the line tests/run.sh reads:
#   RESULT ok NAME | RESULT not ok NAME | RESULT ok NAME # SKIP reason
# A test function returns 0 (pass), 4 (skip, after printing
# "# SKIP reason") or anything else (fail).
# Where the kernel's selftests are: RCD_KSFT (tools/testing/selftests of the
# test kernel's tree; tests/run.sh passes it), or ../.. of this directory
# when it sits in a kernel tree.

RCD_TESTS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$RCD_TESTS/lib.sh"
for f in "$RCD_TESTS"/t_*.sh; do . "$f"; done
unset f

if [ "${1:-}" = --one ]; then
	set -o pipefail
	"$2"
	exit $?
fi

# rcd_one NAME: test NAME (function test_NAME or hosts_NAME), streamed.
# Returns 0, 4 (skipped) or 1; RCD_REASON is a skip's reason.
rcd_one() {
	local t=$1 fn=test_$1 t0=$SECONDS t1 tmo rc b0
	[[ $t != hosts_* ]] || fn=$t
	cpu_busy; b0=$CPU_BUSY
	echo "# test: $t"
	RCD_REASON=
	declare -F "$fn" >/dev/null || { echo "# no test $t in tests/t_*.sh"; return 1; }
	# dmesg_clean and detectors_armed read what the tests before them
	# left; the two-host runner cleans both hosts itself, between barriers.
	# A clean guest that could not be had fails the test (cleanup says why).
	if [ "$t" != dmesg_clean ] && [ "$t" != detectors_armed ] &&
		[[ $fn != hosts_* ]] && ! cleanup; then
		echo "# not run: the clean guest before it failed"
		return 1
	fi
	tmo=timeout_$fn; tmo=${!tmo:-${RCD_TEST_TIMEOUT:-600}}
	t1=$SECONDS
	# stdin from /dev/null: the queue's loop reads the test names from its
	# stdin, and a test step that read stdin would eat them.
	rcd_run "$fn" "$tmo"
	rc=$?
	[ "$rc" -ne 124 ] || echo "# timed out after $tmo s"
	cpu_busy
	echo "# time: cleanup $((t1 - t0)) s, test $((SECONDS - t1)) s," \
		"busy $(( (CPU_BUSY - b0 + 50) / 100 )) s"
	if [ "$rc" -eq "$KSFT_SKIP" ]; then
		RCD_REASON=$(sed -n 's/^# SKIP //p' /run/rcd-test.out | tail -1)
		RCD_REASON=${RCD_REASON:-no reason given}
		return "$KSFT_SKIP"
	fi
	[ "$rc" -eq 0 ]
}

# claim FILE: FILE made here, and not by another guest: created with
# O_EXCL (bash's noclobber), atomic across the guests as the host's open()
# on the shared directory is. No process: each guest tries every line of
# the plan, and a process costs the debug guest about 0.17 s under TCG.
claim() {
	local rc
	set -C
	{ : > "$1"; } 2>/dev/null
	rc=$?
	set +C
	return $rc
}

# rcd_queue DIR: the tests of DIR's plan nobody else has claimed (claim),
# then this guest's end tests.
rcd_queue() {
	local t rc
	mkdir -p "$1/claim"
	# The product stays loaded from test to test (lib.sh: cleanup).
	RCD_KEEP_PRODUCT=1
	while read -r t; do
		claim "$1/claim/$t" || continue
		rcd_one "$t"; rc=$?
		rcd_result "$t" "$rc"
	done < "$1/plan"
	RCD_KEEP_PRODUCT=0
	for t in $RCD_END_TESTS; do
		rcd_one "$t"; rc=$?
		rcd_result "$t" "$rc"
	done
}

# rcd_ksft_main [NAME...]: the program.
rcd_ksft_main() {
	local d ktap= t names=() nskip=0
	if [ -n "${RCD_QUEUE:-}" ]; then
		rcd_queue "$RCD_QUEUE"
		exit 0
	fi
	for d in "${RCD_KSFT:-}" "$RCD_TESTS/../.."; do
		[ -n "$d" ] && [ -r "$d/kselftest/ktap_helpers.sh" ] &&
			{ ktap=$d/kselftest/ktap_helpers.sh; break; }
	done
	[ -n "$ktap" ] || {
		echo "no kselftest/ktap_helpers.sh: set RCD_KSFT to a kernel's" \
			"tools/testing/selftests" >&2
		exit 1
	}
	. "$ktap"
	if [ $# -gt 0 ]; then
		names=("$@")
	else
		mapfile -t names < <(cat "$RCD_TESTS"/t_*.sh | grep -oE '^test_[a-z0-9_]+\(\)' |
			sed 's/^test_//; s/()$//' | grep -vxE "${RCD_END_TESTS// /|}")
	fi
	# Not the planted leak (verbs_leak_detected: make check's guests only).
	names+=(${RCD_END_TESTS/verbs_leak_detected /})
	ktap_print_header
	ktap_set_plan ${#names[@]}
	for t in "${names[@]}"; do
		if [[ $t == hosts_* ]]; then
			ktap_print_msg "SKIP $t needs two hosts (make check runs it in two guests)"
			ktap_test_skip "$t"; nskip=$((nskip + 1))
		elif rcd_one "$t"; then
			ktap_test_pass "$t"
		elif [ $? -eq "$KSFT_SKIP" ]; then
			ktap_print_msg "SKIP $RCD_REASON"
			ktap_test_skip "$t"; nskip=$((nskip + 1))
		else
			ktap_test_fail "$t"
		fi
	done
	ktap_finished
}
