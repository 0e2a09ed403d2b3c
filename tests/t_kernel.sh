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
# The control: leaks planted before the scans (tests/modules/rcd_drepleak.c
# with plant_only=1: three objects whose only pointers are hidden), which
# these two scans must report (one at least: a stale copy of a pointer can
# hide one) and the filter below must count as ours; else a scan that
# reports nothing, or a filter that matches nothing, would pass. They are
# freed at their module's unload, after the count.
test_kmemleak_clean() {
	local f=/sys/kernel/debug/kmemleak all ours t0 left
	local ko=$RCD_MODS/rcd_drepleak.ko planted=0 ctl n
	if [ ! -e $f ]; then
		echo "# SKIP this kernel has no kmemleak (CONFIG_DEBUG_KMEMLEAK): the plain kernel"
		return $KSFT_SKIP
	fi
	[ -e "$ko" ] || { fail "no $ko (make builds it)"; return 1; }
	[ ! -d /sys/module/rcd_drepleak ] || rmmod rcd_drepleak || return 1
	plant_insmod "$ko" plant_only=1 || { fail "insmod $ko plant_only=1"; return 1; }
	read -r planted < /sys/module/rcd_drepleak/parameters/planted
	# A scan lists an object that it finds unreferenced, 5 s old at the
	# scan's start (jiffies_last_scan) and unchanged since the scan before
	# (its checksum: the first scan that sees an object only records it;
	# mm/kmemleak.c, kmemleak_scan, unreferenced_object). So two scans
	# whose starts are more than 5 s apart, and no wait before the first:
	# a scan takes longer than that here (about 15 s under TCG), so the
	# nap between them is mostly nothing. A kmemleak that disabled itself
	# (an internal error) refuses the write (EPERM) and lists nothing:
	# that fails, it is no clean result.
	t0=$SECONDS
	echo scan 2>/dev/null > $f || {
		rmmod rcd_drepleak; fail "kmemleak refused a scan: it disabled itself"; return 1
	}
	left=$((t0 + 7 - SECONDS))
	log "first scan: $((SECONDS - t0)) s; the second after $((left > 0 ? left : 0)) s more"
	[ $left -le 0 ] || nap $left
	echo scan 2>/dev/null > $f || {
		rmmod rcd_drepleak; fail "kmemleak refused a scan: it disabled itself"; return 1
	}
	cat $f > /run/rcd-kmemleak.txt || { rmmod rcd_drepleak; fail "cannot read $f"; return 1; }
	rmmod rcd_drepleak || { fail "rmmod rcd_drepleak"; return 1; }
	f=/run/rcd-kmemleak.txt
	all=$(grep -c '^unreferenced object' $f)
	# Matched in the backtrace only: a hex dump's bytes may spell anything.
	# Not ours either: the slab allocator's own sheaves (7.3's per-CPU
	# sheaves, mm/slub.c), which kmemleak lists as unreferenced whoever's
	# allocation needed a new one: an object whose first caller past the
	# allocator is the sheaf code (an rxe skb's kmalloc in its backtrace
	# failed make stress's kmemleak_clean on 2026-12-02). The object a
	# caller asked for is recorded after the sheaf code returned, without
	# it in its backtrace.
	ours=$(awk 'BEGIN {
			RS = "unreferenced object"
			ours = "rust_cm_disconnect|rcd_|rxe|ib_cm|ib_core|[ \t]ib_|[ \t]cm_|rdma"
			ours = ours "|[ \t]0xffffffff[0-9a-f]+\n"
		}
		NR > 1 {
			bt = substr($0, index($0, "backtrace"))
			n_l = split(bt, l, "\n")
			for (i = 2; i <= n_l; i++)
				if (l[i] !~ /alloc|kmem_cache|krealloc|kmemdup|kstrdup|reserve/)
					break
			if (l[i] ~ /__pcs_replace_|sheaf/) { sheaves++; next }
		}
		NR > 1 && bt ~ /rcd_drepleak/ { ctl++ }
		NR > 1 && bt ~ ours {
			n++
			if (n - ctl <= 3 && bt !~ /rcd_drepleak/) print "unreferenced object" $0
		}
		END {
			if (sheaves) {
				printf "the slab allocator'"'"'s own sheaves: "
				print sheaves " (not counted)"
			}
			print "ours " n + 0 " control " ctl + 0
		}' $f)
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
	read -r _ n _ ctl <<<"$(echo "$ours" | tail -1)"
	check "kmemleak reported planted control objects as ours ($ctl of $planted planted)" \
		test "$planted" -ge 1 -a "$ctl" -ge 1 -a "$ctl" -le "$planted" || return 1
	check "no other object of ours unreferenced ($((n - ctl)))" test "$((n - ctl))" = 0
}

# dmesg: KASAN, lockdep, BUG/WARNING/Oops, sleeping in atomic context, debug
# objects, hung tasks, soft lockups, RCU stalls.
# In a make check guest, also the boot's log, which tests/guest.sh saved
# before it cleared the log for the guest's run (/run/rcd-boot-dmesg: the
# KUnit doctests' results, any report at boot), and the log must be whole:
# a ring that wrapped lost lines nobody read (scripts/vm.sh: log_buf_len).
test_dmesg_clean() {
	local bad rc=0 first
	if [ -r /run/rcd-boot-dmesg ]; then
		# A report, or a KUnit test that failed (its KTAP "not ok"
		# lines: the kernel crate's doctests, whatever T= selected).
		bad=$(grep -E "$DMESG_BAD|\] +not ok [0-9]+ " /run/rcd-boot-dmesg)
		[ -z "$bad" ] ||
			{ echo "# at boot:"; echo "$bad" | head -20 | sed 's/^/# /'; rc=1; }
		first=$(kmsg_first_seq) || { fail "cannot read /dev/kmsg"; return 1; }
		[ "$first" = 0 ] ||
			{ fail "the kernel log wrapped: its first $first lines are lost" \
				"(log_buf_len)"; rc=1; }
	fi
	# Reports a test provoked on purpose and checked itself are skipped
	# (expect_reports_begin/end in lib.sh).
	bad=$(dmesg_outside_expected | grep -E "$DMESG_BAD")
	[ -z "$bad" ] || {
		echo "$bad" | head -40 | sed 's/^/# /'
		# The first report whole (its lines up to 80), for its stack.
		echo "# the first report, from its first line:"
		dmesg_outside_expected | RCD_ERE=$DMESG_BAD awk '
			!n && $0 ~ ENVIRON["RCD_ERE"] { n = 1 } n && n++ <= 80' | sed 's/^/#   /'
		return 1
	}
	return $rc
}

# kconfig_on NAME: the running kernel was built with CONFIG_NAME=y (its
# .config: RCD_KCONFIG, which tests/run.sh passes, else /proc/config.gz);
# status 2 when neither is there to tell.
kconfig_on() {
	if [ -n "${RCD_KCONFIG:-}" ] && [ -r "$RCD_KCONFIG" ]; then
		grep -qx "CONFIG_$1=y" "$RCD_KCONFIG"
	elif [ -r /proc/config.gz ]; then
		zcat /proc/config.gz | grep -qx "CONFIG_$1=y"
	else
		return 2
	fi
}

# Every verbs object is only checked when its device goes (rdma restrack's
# and rxe's warnings, lib.sh: rxe_del_checked), and cleanup keeps rxe0 and
# rxe1 from test to test: so every guest deletes all of its devices at the
# end, before kmemleak's scan, and fails on those warnings. verbs_leak_detected
# shows that this fails on a planted leak.
# Software devices only (rxe and siw have a parent netdev): in a kernel
# tree's kselftest run on real hardware its HCAs stay.
test_devices_deleted() {
	local d devs=()
	for d in /sys/class/infiniband/*; do
		[ -e "$d/parent" ] && devs+=("${d##*/}")
	done
	log "deleting ${#devs[@]} device(s): ${devs[*]}; what restrack counts on them:"
	[ ${#devs[@]} -eq 0 ] || rdma resource show 2>&1 | sed 's/^/#   /'
	[ ${#devs[@]} -eq 0 ] || rxe_del_checked "${devs[@]}" || return 1
	rm -f /run/rcd-cm-base
	devs=()
	for d in /sys/class/infiniband/*; do
		[ -e "$d/parent" ] && devs+=("${d##*/}")
	done
	check "no device left (${devs[*]})" test ${#devs[@]} = 0
}

# The negative control of devices_deleted, at the end of every make check
# guest (lib.sh: RCD_END_TESTS, after kmemleak_clean):
# tests/modules/rcd_leak.ko leaks a PD, a CQ and an RC QP on a device only
# this test uses (rxeleak, on a veth pair of its own); deleting it with the
# same check must fail and name restrack's and rxe's warnings. Those lie in
# a window of expected reports (dmesg_clean skips it, detectors_armed allows
# the W taint it sets). The module stays loaded: nothing uses the objects
# again. What the leak leaves for kmemleak (rxe's pool xarrays, freed with
# the device but not emptied) is why this comes after kmemleak's scan.
test_verbs_leak_detected() {
	local ko=$RCD_MODS/rcd_leak.ko out rc leaked=0 qps
	[ -e "$ko" ] || { fail "no $ko (make builds it)"; return 1; }
	[ ! -d /sys/module/rcd_leak ] || { fail "rcd_leak is loaded already"; return 1; }
	[ -d /sys/module/rdma_rxe ] || modprobe rdma_rxe || return 1
	ip link add vl0 type veth peer name vl1 && ip link set vl0 up &&
		ip link set vl1 up || return 1
	rdma link add rxeleak type rxe netdev vl0 || { ip link del vl0; return 1; }
	expect_reports_begin
	insmod "$ko" dev=rxeleak
	[ ! -r /sys/module/rcd_leak/parameters/leaked ] ||
		read -r leaked < /sys/module/rcd_leak/parameters/leaked
	qps=$(rdma resource show qp 2>/dev/null | grep -cE '^link rxeleak/.* type RC ')
	out=$(rxe_del_checked rxeleak); rc=$?
	expect_reports_end
	ip link del vl0
	echo "$out" | grep -E 'FAIL|WARNING' | head -12 |
		sed 's/^# FAIL: /# (failed, as it must:) /'
	log "rcd_leak leaked $leaked object(s), restrack listed $qps RC QP(s) on rxeleak;" \
		"the check's status: $rc"
	check "rcd_leak leaked its PD, CQ and QP" test "$leaked" = 3 || return 1
	check "restrack listed the leaked QP" test "$qps" = 1 || return 1
	check "the device check failed on the planted leak" test "$rc" != 0 || return 1
	check "it named restrack's warning" grep -q 'rdma_restrack_clean' <<<"$out" || return 1
	check "it named rxe's warning" grep -q 'rxe_pool_cleanup' <<<"$out" || return 1
	# The window excuses the planted leak's reports only: any other one
	# in it (a KASAN report, lockdep, a WARNING elsewhere) fails here, as
	# dmesg_clean would fail it outside a window.
	local others
	others=$(expected_reports | grep -E "$DMESG_BAD" |
		grep -vE 'Call Trace|WARNING: .*(rxe_pool_cleanup|rdma_restrack_clean)')
	check "no other report in the window: ${others:0:300}" test -z "$others"
}

# The detectors are still armed at the end of the guest:
# a detector that switched itself off after a first report, or on an
# internal error, passes every later check by saying nothing.
#   taint      /proc/sys/kernel/tainted has no bit beyond RCD_TAINT_OK
#              (lib.sh) and those set inside windows of expected reports
#   lockdep    debug_locks is still 1 (/proc/lockdep_stats: lockdep turns
#              itself off after its first report, or a KASAN report)
#   kmemleak   still enabled: a write it accepts (stack=on, the default;
#              EPERM once it disabled itself), no "disabled" line in the log
#   KASAN      in multi-shot mode (kasan_multi_shot on the command line,
#              scripts/vm.sh; else it reports only once) and initialized
#   hung tasks the detector still reports (hung_task_warnings, 10 at boot,
#              counts down to 0 with each report and then it is silent)
# A detector the kernel was not built with is not checked, but a kernel
# built with it (its .config) must have it.
RCD_TAINT_LETTERS=PFSRMBUDAWCIOELKXTN
test_detectors_armed() {
	local t e=0 extra i letters= bad=0 s n=0 logs
	logs=$( { cat /run/rcd-boot-dmesg 2>/dev/null; dmesg; } )
	read -r t < /proc/sys/kernel/tainted
	[ ! -r /run/rcd-taint-expected ] || read -r e < /run/rcd-taint-expected
	extra=$((t & ~(RCD_TAINT_OK | e)))
	for ((i = 0; i < ${#RCD_TAINT_LETTERS}; i++)); do
		[ $(((t >> i) & 1)) = 0 ] || letters+=${RCD_TAINT_LETTERS:i:1}
	done
	log "taint: $t ($letters); allowed $RCD_TAINT_OK (O E N) and $e" \
		"(set inside windows of expected reports)"
	[ "$extra" = 0 ] || { fail "tainted beyond what a clean run sets: bits $extra"; bad=1; }
	if [ -r /proc/lockdep_stats ]; then
		n=$((n + 1))
		s=$(awk '$1 == "debug_locks:" { print $2 }' /proc/lockdep_stats)
		log "lockdep: debug_locks $s"
		[ "$s" = 1 ] ||
			{ fail "lockdep switched itself off (debug_locks: ${s:-none})"; bad=1; }
	elif kconfig_on PROVE_LOCKING; then
		fail "a lockdep kernel without /proc/lockdep_stats"; bad=1
	fi
	if [ -e /sys/kernel/debug/kmemleak ]; then
		n=$((n + 1))
		if echo stack=on 2>/dev/null > /sys/kernel/debug/kmemleak; then
			log "kmemleak: enabled"
		else
			fail "kmemleak refused a write: it disabled itself"; bad=1
		fi
		s=$(grep -E 'kmemleak: .*(disabled|[Cc]annot|[Ff]ail)' <<<"$logs")
		[ -z "$s" ] || {
			echo "$s" | head -5 | sed 's/^/# /'
			fail "kmemleak said it stopped"; bad=1
		}
	elif kconfig_on DEBUG_KMEMLEAK; then
		fail "a kmemleak kernel without /sys/kernel/debug/kmemleak"; bad=1
	fi
	if kconfig_on KASAN || grep -q 'KernelAddressSanitizer initialized' <<<"$logs"; then
		n=$((n + 1)) s=ok
		grep -qw kasan_multi_shot /proc/cmdline ||
			{ fail "KASAN reports only its first error:" \
				"no kasan_multi_shot on the command line"; s=; }
		if [ -r /run/rcd-boot-dmesg ]; then
			grep -q 'KernelAddressSanitizer initialized' /run/rcd-boot-dmesg ||
				{ fail "KASAN did not say it was initialized at boot"; s=; }
		fi
		if [ -n "$s" ]; then log "KASAN: initialized, multi-shot"; else bad=1; fi
	fi
	if [ -r /proc/sys/kernel/hung_task_warnings ]; then
		read -r s < /proc/sys/kernel/hung_task_warnings
		log "hung tasks: $s more reports"
		[ "$s" != 0 ] ||
			{ fail "the hung task detector is silent (hung_task_warnings 0)"; bad=1; }
	fi
	if [ $n = 0 ] && [ $bad = 0 ]; then
		echo "# SKIP this kernel has none of lockdep, kmemleak, KASAN:" \
			"the plain kernel (taint clean)"
		return $KSFT_SKIP
	fi
	return $bad
}

# The kernel crate's doctests, run by KUnit at boot (CONFIG_RUST_KERNEL_DOCTESTS,
# kernel/debug.config; scripts/vm.sh's kunit.filter_glob selects them): each
# passed, and those of the series' abstractions (kernel::rdma,
# kernel::workqueue::OwnedQueue, and kernel::debugfs and the backported
# kernel::sync::global_lock!) were among them. KUnit's debugfs results of
# the suite are its KTAP; a doctest that fails prints where. On 7.3 the
# series adds kernel::rdma and OwnedQueue only (kernel::debugfs and
# global_lock! are upstream's, whose doctests run there too).
RCD_DOCTESTS="rdma_ debugfs_ sync_lock_global_ workqueue_owned_"
test_rdma_doctests() {
	local f=/sys/kernel/debug/kunit/rust_doctests_kernel/results ok=0 bad=0 all=0 l p n
	local want=$RCD_DOCTESTS
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
	for p in $want; do
		n=$(grep -c "^ *ok .*rust_doctest_kernel_$p" $f)
		l=$(grep -o "rust_doctest_kernel_$p[a-z0-9_]*" $f | sort -u)
		log "  kernel::${p%_}: $n passed:" ${l//rust_doctest_kernel_/}
		[ "$n" -gt 0 ] || { fail "no ${p%_} doctest passed"; bad=$((bad + 1)); }
	done
	[ $bad -eq 0 ]
}
