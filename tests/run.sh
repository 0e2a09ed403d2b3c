#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# `make check`: build the module, boot the test kernel in a guest, run the
# KTAP suite there (tests/guest.sh) and print its report, ending with
#   N passed, N failed[, N skipped]
# Exits non-zero if a test failed, or if the guest did not run them all.
#   tests/run.sh [NAME-FILTER]
# RCD_KO=/path/to/rust_cm_disconnect.ko tests another build of the module.
set -uo pipefail
. "$(dirname "$0")/../scripts/prepare.sh"

log=$RCD_CACHE/check.log
# Room for 1,000 connections (2,000 QPs) under KASAN, whose shadow takes an
# eighth of memory.
export RCD_VM_MEM=${RCD_VM_MEM:-4G}
# The whole suite on the debug kernel takes about an hour under TCG on two
# cores; CI gives 90 minutes, the kernel build included.
export RCD_VM_TIMEOUT=${RCD_VM_TIMEOUT:-5100}
# RCD_KO: test another build of the module (make check-intree).
# The suite's knobs (sizes, fuzzing time and seed, timeouts) go along.
knobs=
for v in RCD_CYCLES RCD_ROUND RCD_MANY RCD_FUZZ_SECONDS RCD_FUZZ_ROUNDS RCD_FUZZ_SEED RCD_TEST_TIMEOUT; do
	[ -z "${!v:-}" ] || knobs="$knobs $v=${!v}"
done
bash "$here/scripts/vm.sh" "$knobs RCD_KO=${RCD_KO:-$here/rust_cm_disconnect.ko} bash $here/tests/guest.sh '${1:-.}'" 2>&1 | tee "$log"
vm_rc=${PIPESTATUS[0]}

plan=$(sed -n 's/^1\.\.\([0-9][0-9]*\)$/\1/p' "$log" | head -1)
passed=$(grep -cE '^ok [0-9]+ ' "$log" | tr -d ' ')
skipped=$(grep -cE '^ok [0-9]+ .*# SKIP' "$log" | tr -d ' ')
failed=$(grep -cE '^not ok [0-9]+ ' "$log" | tr -d ' ')
passed=$((passed - skipped))
ran=$((passed + skipped + failed))
rc=0
if [ -z "$plan" ]; then
	echo "# the guest printed no test plan (vm exit $vm_rc): it did not come up"
	failed=$((failed + 1)); rc=1
elif [ "$ran" -ne "$plan" ]; then
	echo "# planned $plan tests, $ran reported (vm exit $vm_rc): the guest died or hung"
	failed=$((failed + plan - ran)); rc=1
elif [ "$vm_rc" -ne 0 ]; then
	echo "# the guest exited with status $vm_rc after the tests"
	rc=1
fi
[ "$failed" -eq 0 ] || rc=1
line="$passed passed, $failed failed"
[ "$skipped" -eq 0 ] || line="$line, $skipped skipped"
echo "$line"
exit $rc
