# SPDX-License-Identifier: GPL-2.0
#
# The kernel's own checkers, after everything else (tests/guest.sh runs
# these two last in every guest, tests/ksft.sh last in a run; `make check`
# keeps them out of the queue):
# kmemleak and the kernel log.

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
	ours=$(awk 'BEGIN {
			RS = "unreferenced object"
			ours = "rust_cm_disconnect|rcd_|rxe|ib_cm|ib_core|[ \t]ib_|[ \t]cm_|rdma"
			ours = ours "|[ \t]0xffffffff[0-9a-f]+\n"
		}
		NR > 1 { bt = substr($0, index($0, "backtrace")) }
		NR > 1 && bt ~ ours { n++; if (n <= 3) print "unreferenced object" $0 }
		END { print "ours " n + 0 }' $f)
	echo "# kmemleak: $all unreferenced object(s) in the whole kernel;" \
		"by first caller past the allocator:"
	awk 'BEGIN { RS = "unreferenced object" }
		NR > 1 {
			n = split($0, l, "\n")
			for (i = 1; i <= n; i++) if (l[i] ~ /backtrace/) break
			for (i++; i <= n; i++)
				if (l[i] !~ /alloc|kmem_cache|krealloc|kmemdup|kstrdup|reserve/)
					break
			sub(/^[ \t]*/, "", l[i]); sub(/\+.*/, "", l[i]); c[l[i]]++
		}
		END { for (f in c) print c[f], f }' $f | sort -rn | head -8 | sed 's/^/#   /'
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

# The kernel crate's doctests, run by KUnit at boot (CONFIG_RUST_KERNEL_DOCTESTS,
# kernel/debug.config; scripts/vm.sh's kunit.filter_glob selects them): each
# passed, and those of the series' abstractions (kernel::rdma, and
# kernel::debugfs and kernel::sync::ArcSlot) were among them. KUnit's
# debugfs results of the suite are its KTAP; a doctest that fails prints
# where.
RCD_DOCTESTS="rdma_ debugfs_ sync_arc_slot_"
test_rdma_doctests() {
	local f=/sys/kernel/debug/kunit/rust_doctests_kernel/results ok=0 bad=0 all=0 l p n
	if [ ! -e /sys/kernel/debug/kunit ]; then
		echo "# SKIP this kernel has no KUnit (CONFIG_KUNIT_DEBUGFS): the plain kernel"
		return $KSFT_SKIP
	fi
	[ -r $f ] || {
		fail "no $f: the kernel crate's doctests did not run" \
			"(CONFIG_RUST_KERNEL_DOCTESTS, kunit.filter_glob)"
		return 1
	}
	while IFS= read -r l; do
		l=${l#"${l%%[! ]*}"}
		case $l in
		"ok "*rust_doctest_kernel_*"# SKIP"*) echo "# skipped: $l" ;;
		"ok "*rust_doctest_kernel_*) all=$((all + 1)) ;;
		"not ok "*rust_doctest_kernel_*) bad=$((bad + 1)); echo "# $l" ;;
		"# rust_doctest_kernel_"*"location:"*|"# "*"ASSERTION"*|"# "*"Expected"*)
			echo "$l" ;;
		esac
	done < $f
	log "the kernel crate's doctests: $all passed, $bad failed"
	for p in $RCD_DOCTESTS; do
		n=$(grep -c "^ *ok .*rust_doctest_kernel_$p" $f)
		l=$(grep -o "rust_doctest_kernel_$p[a-z0-9_]*" $f | sort -u)
		log "  kernel::${p%_}: $n passed:" ${l//rust_doctest_kernel_/}
		[ "$n" -gt 0 ] || { fail "no ${p%_} doctest passed"; bad=$((bad + 1)); }
	done
	[ $bad -eq 0 ]
}
