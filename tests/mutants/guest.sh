#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# `make mutants`' guest (scripts/mutants.sh): for each line of LIST,
#   NAME KIND KO TEST...
# the tests run against product KO (RCD_KO), each with a clean guest before
# it (tests/ksft.sh: rcd_one), until one fails. One line a mutant:
#   MUTANT NAME killed by TEST | MUTANT NAME passed
# Each test's output goes to LOGDIR/NAME.log.
#   tests/mutants/guest.sh LIST LOGDIR
. "$(dirname "$0")/../ksft.sh"

list=$1 logs=$2
mount | grep -q ' /sys/kernel/debug ' || mount -t debugfs none /sys/kernel/debug
dmesg -C
echo "# guest up after $(cut -d' ' -f1 /proc/uptime) s (kernel $(uname -r), $(nproc) vCPU)"
while read -r name kind ko tests; do
	export RCD_KO=$ko
	# The product under test is loaded fresh by the first test.
	product_loaded && ! rcd_loaded && rmmod rust_cm_disconnect
	res=passed
	for t in $tests; do
		if ! rcd_one "$t" >> "$logs/$name.log" 2>&1; then
			res="killed by $t"
			[ "$kind" = original ] && res="failed $t"
			break
		fi
	done
	echo "MUTANT $name $res"
done < "$list"
cleanup > /dev/null 2>&1
echo "# mutants guest end"
