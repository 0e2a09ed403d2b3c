# SPDX-License-Identifier: GPL-2.0
#
# The IB CM's own bugs, fixed in C by the series' first patches
# (kernel/0000-*.patch), tested through the CM's API directly from a C test
# module: nothing of rust_cm_disconnect is loaded.

# ib_send_cm_drep() with private data longer than the DREP's field (224
# bytes) returns -EINVAL and, without the fix, leaks its kmemdup'd copy
# (cm.c: cm_send_drep_locked returns before kfree on the length check;
# only the wrong-state path frees it). tests/modules/rcd_drepleak.ko calls
# it on an idle id for every length 225..255 and plants three objects of
# its own (the control: this window's scans must find one this young).
# kmemleak, scanned twice (the second scan starting when the objects are
# 5 s old), must list the planted object and no object allocated under
# ib_send_cm_drep.
test_drep_too_long_no_leak() {
	local ko=$RCD_MODS/rcd_drepleak.ko f=/sys/kernel/debug/kmemleak
	local calls=0 einval=0 planted=0 counts cm ctl
	if [ ! -e $f ]; then
		echo "# SKIP this kernel has no kmemleak (CONFIG_DEBUG_KMEMLEAK): the plain kernel"
		return $KSFT_SKIP
	fi
	[ -e "$ko" ] || { fail "no $ko (make builds it)"; return 1; }
	rxe_add rxe0 v0 || return 1
	[ ! -d /sys/module/rcd_drepleak ] || rmmod rcd_drepleak || return 1
	plant_insmod "$ko" dev=rxe0 || { fail "insmod $ko"; return 1; }
	read -r calls < /sys/module/rcd_drepleak/parameters/calls
	read -r einval < /sys/module/rcd_drepleak/parameters/einval
	read -r planted < /sys/module/rcd_drepleak/parameters/planted
	# kmemleak reports an object at least 5 s old at the scan's start
	# (MSECS_MIN_AGE) and unchanged since the scan before (its checksum).
	# Only the reporting scan has to wait for the age: the first one just
	# records every white object's checksum, whatever its age
	# (mm/kmemleak.c, kmemleak_scan: update_checksum for each allocated
	# white object; unreferenced_object checks the age against
	# jiffies_last_scan, the start of the scan that reports). So the first
	# scan at once, and the second not before the objects (made by insmod,
	# before t0) are 6 s old: under TCG the first scan alone takes longer
	# (about 13 s), so the nap before the first scan (6 s) was all wait.
	# The planted control object must still be found by this pair of
	# scans, which fails if the second came too early.
	local t0=$SECONDS left
	if ! echo scan 2>/dev/null > $f; then
		rmmod rcd_drepleak
		fail "kmemleak refused a scan: it disabled itself"
		return 1
	fi
	left=$((t0 + 6 - SECONDS))
	[ $left -le 0 ] || nap $left
	if ! echo scan 2>/dev/null > $f; then
		rmmod rcd_drepleak
		fail "kmemleak refused a scan: it disabled itself"
		return 1
	fi
	# By backtrace: under ib_send_cm_drep (the CM's copy), or allocated
	# by rcd_drepleak itself (the control).
	counts=$(awk 'BEGIN { RS = "unreferenced object" }
		NR > 1 { bt = substr($0, index($0, "backtrace")) }
		NR > 1 && bt ~ /ib_send_cm_drep/ {
			if (++cm <= 2) print "unreferenced object" $0 > "/dev/stderr"
			next
		}
		NR > 1 && bt ~ /rcd_drepleak/ { ctl++ }
		END { print cm + 0, ctl + 0 }' $f 2>/run/rcd-drepleak.txt)
	read -r cm ctl <<<"$counts"
	# Unloaded: the control object is freed, and leaves kmemleak's list.
	rmmod rcd_drepleak || { fail "rmmod rcd_drepleak"; return 1; }
	sed 's/^/#   /' /run/rcd-drepleak.txt | head -40
	log "ib_send_cm_drep: $calls calls with lengths 225..255, $einval returned -EINVAL;" \
		"kmemleak: $cm object(s) allocated under ib_send_cm_drep," \
		"$ctl control object(s) of $planted planted"
	check "every call returned -EINVAL" test "$calls" = 31 -a "$einval" = 31 || return 1
	check "no DREP private data leaked ($cm object(s) under ib_send_cm_drep)" \
		test "$cm" = 0 || return 1
	check "kmemleak found a planted control object in this window" \
		test "$planted" -ge 1 -a "$ctl" -ge 1
}

# ib_destroy_cm_id() must not return while the id's REQ_ERROR handler
# still runs (cm.c: cm_process_send_error drops the MAD's reference before
# it calls the handler; the fix holds one for the handler).
# tests/modules/rcd_senderr.ko sends a REQ from rxe1 to a GID and MAC
# nobody has; its REQ_ERROR handler sleeps 9 s and then reads its id, and
# the loading thread destroys the id as soon as the handler started.
# Without the fix the destroy returns at once and frees the id under the
# handler; with it the destroy waits the 9 s. That order is what is
# checked: KASAN may not see the read, as 7.3's kfree_rcu can keep the
# freed id in a per-CPU sheaf, unpoisoned, past the handler's sleep (the
# run without the fix saw no report).
test_send_error_handler_holds_id() {
	local ko=$RCD_MODS/rcd_senderr.ko p=/sys/module/rcd_senderr/parameters
	local ran=0 waited=0 ms=0 rep
	[ -e "$ko" ] || { fail "no $ko (make builds it)"; return 1; }
	rxe_add rxe1 v1 || return 1
	[ ! -d /sys/module/rcd_senderr ] || rmmod rcd_senderr || return 1
	expect_reports_begin
	insmod "$ko" dev=rxe1 src=10.77.0.2 dst=10.77.0.99 sleep_ms=9000 ||
		{ expect_reports_end; fail "insmod $ko"; return 1; }
	# A KASAN report of the handler's read needs the kfree_rcu done.
	nap 2
	expect_reports_end
	read -r ran < $p/handler_ran
	read -r waited < $p/destroy_waited
	read -r ms < $p/destroy_ms
	rmmod rcd_senderr || { fail "rmmod rcd_senderr"; return 1; }
	rep=$(expected_reports | grep -E "$DMESG_BAD" | head -3)
	[ -z "$rep" ] || echo "$rep" | sed 's/^/# /'
	log "REQ_ERROR handler ran: $ran; ib_destroy_cm_id() took $ms ms," \
		"the handler had returned: $waited"
	check "the REQ timed out into REQ_ERROR" test "$ran" = 1 || return 1
	check "ib_destroy_cm_id() waited for the running handler ($ms ms)" \
		test "$waited" = 1 || return 1
	check "no report while the handler ran" test -z "$rep"
}
