# SPDX-License-Identifier: GPL-2.0
#
# What the kernel crate's CM id and QP attributes keep alive: a handler's
# id for as long as the handler runs, and a QP attribute's GID entry for
# as long as the attributes live, whoever destroys the id meanwhile. Each
# window is held open with a test hook of the module and the debug kernel's
# KASAN tells whether freed memory was read; every test also checks for
# the report itself.

# cmid_mark: a mark in the kernel log, from which kasan_clean looks.
cmid_mark() { echo "rcd-test: t_cmid mark" > /dev/kmsg; }
# kasan_clean WHAT: no KASAN report (or BUG) in the log since the last
# cmid_mark. (Without kasan_multi_shot KASAN reports only its first
# finding: a test run after another's report cannot fail here.)
kasan_clean() {
	local r
	r=$(dmesg | awk '/rcd-test: t_cmid mark/ { r = ""; next }
		/KASAN|BUG:/ && r == "" { r = $0 } END { print r }')
	[ -z "$r" ] || fail "$1: $r"
}

cmid_state_is() { conn_field_v "$1" state && [ "$REPLY" = "$2" ]; }

# The CM frees an id with kfree_rcu, which 6.12 batches for up to 5 s
# (KFREE_DRAIN_JIFFIES) before the grace period: a handler must sleep
# longer than that after the destroy for KASAN to see its read.
#
# A DREQ nobody answers (v0 drops everything), the DREQ_ERROR handler
# sleeps 9 s and then reads its id (on_error=sleep:9000). With lifetime=14
# the id's timewait is about 130 ms: the CM delivers TIMEWAIT_EXIT on its
# own workqueue while the DREQ_ERROR handler (the MAD completion, not
# serialised with that workqueue) still sleeps, and that callback frees the
# id (destroy queued on the reaper). Two callbacks of one id at once; the
# destroy must wait for the sleeping one (ib_destroy_cm_id does, since the
# CM's fix holds the id for it) before the id and its data are freed.
#
# KASAN alone does not see a destroy that did not wait: 7.3's CM frees the
# id with kfree_rcu into a per-CPU sheaf that can outlive the handler's
# sleep unpoisoned, and what the handler reads after it (its endpoint) is
# not the id's. So the order is checked too: the id's data leaves
# cm_ids_live only when the reaper's destroy returned, which is after the
# handler's line. cm_ids_live is read before the log, each round, so that a
# drop seen with the line still absent came before it. (With the CM's fix
# left out, RCD_KERNEL_OMIT=0000-IB-cm-Keep, it drops about 9 s early.)
test_error_callback_outlives_timewait() {
	local n=81 live0 after="conn 81: after an error callback" i
	# 16 tries (retries=15): the REQ 3 s, the REP's RTU 1 s, the DREQ's
	# timeout 3 s, well inside the handler's 9 s sleep.
	CONNECT_OPTS="lifetime=14 resp=14 retries=15 on_error=sleep:9000" cm_pair2 $n || return 1
	cmid_mark
	[ -d /sys/module/sch_netem ] || modprobe sch_netem || return 1
	tc qdisc add dev v0 root netem loss 100% || return 1
	live0=$(rcd_stat cm_ids_live)
	ctl dreq $n text:anyone-there || return 1
	wait_event 60 $n DREQ_ERROR || return 1
	wait_event 30 $n TIMEWAIT_EXIT || return 1
	check "TIMEWAIT_EXIT came while the DREQ_ERROR handler slept" \
		eval "! dmesg_has '$after'" || return 1
	# Up to 60 s (the handler sleeps 9 s): until the handler's line.
	for ((i = 0; i < 300; i++)); do
		rcd_stat_v cm_ids_live
		dmesg_has "$after" && break
		[ "$REPLY" = "$live0" ] || {
			fail "the id was destroyed while its DREQ_ERROR handler slept" \
				"(cm_ids_live $live0, then $REPLY)"
			return 1
		}
		nap 0.2
	done
	log "cm_ids_live stayed $live0 for $i polls, until the handler's line"
	check "the count was read while the handler slept" test "$i" -gt 0 || return 1
	check "the handler used its id after its sleep" dmesg_has "$after" || return 1
	log "$(dmesg_test | grep "conn $n: after an error callback")"
	check "freed" wait_for 10 cmid_state_is $n FREED || return 1
	kasan_clean "a handler's id was freed under it"
}

# The same handler, its id destroyed by close from another task while it
# sleeps: lifetime=18 makes the timewait about 2 s, so close (right after
# DREQ_ERROR shows) is the destroy. close waits for the handler: the
# handler's line is in the log when close returns (as above, KASAN alone
# would not see a close that did not wait).
test_error_callback_outlives_close() {
	local n=82 t0 dt
	# resp=17: the REP waits 2 x 512 ms for its RTU (resp=14: 2 x 64).
	CONNECT_OPTS="lifetime=18 resp=17 retries=1 on_error=sleep:9000" cm_pair2 $n || return 1
	cmid_mark
	[ -d /sys/module/sch_netem ] || modprobe sch_netem || return 1
	tc qdisc add dev v0 root netem loss 100% || return 1
	ctl dreq $n text:anyone-there || return 1
	wait_event 60 $n DREQ_ERROR || return 1
	check "close starts while the handler sleeps" \
		eval "! dmesg_has 'conn $n: after an error callback'" || return 1
	t0=${EPOCHREALTIME/./}
	ctl close $n || return 1
	dt=$(( (${EPOCHREALTIME/./} - t0) / 1000 ))
	log "close took $dt ms"
	check "close returned after the handler's sleep and its use of the id" \
		dmesg_has "conn $n: after an error callback" || return 1
	log "$(dmesg_test | grep "conn $n: after an error callback")"
	kasan_clean "a handler's id was freed under it"
}

# A passive end's job takes the QP's attributes for RTR from the CM (the
# address vector with its GID entry, cm.c cm_init_qp_rtr_attr) and, with
# on_req=job_sleep, moves the QP 16 s later whatever became of the id.
# Meanwhile the address it was reached at is deleted from v1 (rxe1's GID
# entry leaves the table, the id's address vector still holds it) and the
# passive end is closed (its id destroyed: the CM puts its hold). Unless
# the attributes hold the entry themselves, ib_modify_qp then reads a
# freed GID entry. The address is a secondary one, 10.77.0.3, routed like
# 10.77.0.2 (veth_cross_routes): deleting and re-adding the kept veth's
# own 10.77.0.2 left the next two-device test without a connection.
# rxe1_has_ip_gid: rxe1's GID table has 10.77.0.3 (::ffff:10.77.0.3);
# CMID_GID is then its entry's file. Scanned from index 0 with builtins,
# up to the first match: the entries take the lowest free indices (a grep
# of all 1,024 files took 2 s here, and the same grep for the entry's
# absence 6 s: traced). The entry leaves the table from that index
# (cache.c: an entry is deleted where it is, never moved), so its absence
# is read there (rxe1_ip_gid_gone).
rxe1_has_ip_gid() {
	local f g i
	for ((i = 0; i < 1024; i++)); do
		f=/sys/class/infiniband/rxe1/ports/1/gids/$i
		read -r g 2>/dev/null < "$f" || return 1
		[[ $g != *:0a4d:0003 ]] || { CMID_GID=$f; return 0; }
	done
	return 1
}
rxe1_ip_gid_gone() {
	local g
	read -r g 2>/dev/null < "$CMID_GID" && [[ $g != *:0a4d:0003 ]]
}
cmid_undo_addr() {
	ip addr del 10.77.0.3/24 dev v1 2>/dev/null
	ip rule del pref 10 iif lo to 10.77.0.3 lookup 100 2>/dev/null
	true
}
test_qp_attr_outlives_id() {
	local p=$((10 + PASSIVE_BASE)) q1 t0 bad=0
	rxe_add rxe0 v0 && rxe_add rxe1 v1 && veth_cross_routes && rcd_load || return 1
	q1=$(rdma_res qp link rxe1/1)
	cmid_mark
	ip addr add 10.77.0.3/24 dev v1 || return 1
	ip route add 10.77.0.3 dev v0 src 10.77.0.1 table 100 || bad=1
	ip rule add pref 10 iif lo to 10.77.0.3 lookup 100 || bad=1
	check "rxe1 has the GID of 10.77.0.3" wait_for 10 rxe1_has_ip_gid || bad=1
	ctl listen 1 rxe1 0x1000 on_req=job_sleep:16000 auto_drep=- || bad=1
	ctl connect 10 rxe0 10.77.0.1 10.77.0.3 0x1000 || bad=1
	[ $bad = 0 ] || { cmid_undo_addr; return 1; }
	wait_for 10 text_in $RCD_DBG/conns $'\n'"$p " ||
		{ fail "no passive end"; cmid_undo_addr; return 1; }
	t0=$SECONDS
	ip addr del 10.77.0.3/24 dev v1 || bad=1
	check "the GID entry left rxe1's table (${CMID_GID##*/gids/})" \
		wait_for 5 rxe1_ip_gid_gone || bad=1
	ctl close $p || bad=1
	ctl close 10 || bad=1
	# The job wakes 16 s after the REQ, moves the QP with its attributes,
	# finds its entry gone and frees the QP. (8 s were too few once: the
	# address's deletion and the two closes took 9 s on a slow machine.)
	check "the close came before the job woke ($((SECONDS - t0)) s < 16 s)" \
		test $((SECONDS - t0)) -lt 16 || bad=1
	# Polled from the job's wake-up on (each poll is three processes: not
	# before it): the QP goes only after the job's ib_modify_qp, the read
	# KASAN would report, so once it is gone the report would be there.
	# (This waited 4 s more before its first poll.)
	local left=$((16 - (SECONDS - t0)))
	[ $left -le 0 ] || nap $left
	check "the job freed its QP" \
		wait_for 30 rdma_res_cmp -le "$q1" qp link rxe1/1 ||
		bad=1
	cmid_undo_addr
	kasan_clean "ib_modify_qp read a freed GID entry" || bad=1
	# A two-device test that ran next in the same guest got no connection
	# (twice, cause not found in time): rxe1 is deleted, the next test
	# makes a fresh one.
	rxe_del rxe1
	return $bad
}

# A CmId holds its device. `hold_id rxe1 MS` (a test
# hook, conn/test_hooks.rs) makes an id on rxe1 and drops the module's
# handle on rxe1 at once, as a careless consumer may; the write then sleeps
# MS ms, reads the id's device (its name: CmIdRef::device) and drops the
# id. The id is in no table, so the module's device removal does not see
# it: only the id's own reference (kernel::rdma::cm, Inner::device) holds
# rxe1 meanwhile. `rdma link del rxe1` in that window must wait for the id:
# ib_unregister_device (device.c, disable_device) first calls every
# client's removal (the module's drops its own references: rxe1 leaves its
# devices file), then waits for the last reference. Without the id's it
# returns at once, ib_dealloc_device frees the ib_device, and the id's read
# of its device is a use after free that KASAN reports.
rcd_lacks_device() { ! rcd_has_device "$1"; }
test_cm_id_holds_its_device() {
	local hold=12000 ids0 t0 t1 el w del rc bad=0
	rxe_add rxe0 v0 && rxe_add rxe1 v1 && rcd_load || return 1
	ids0=$(rcd_stat cm_ids_live)
	cmid_mark
	rm -f /run/rcd-hold.rc
	( echo "hold_id rxe1 $hold" > "$RCD_DBG/ctl"; echo $? > /run/rcd-hold.rc ) & w=$!
	t0=$EPOCHREALTIME
	check "the id is made" wait_for 10 stat_is cm_ids_live $((ids0 + 1)) ||
		{ wait $w; return 1; }
	t1=$EPOCHREALTIME
	rdma link del rxe1 & del=$!
	check "the module's removal of rxe1 ran (rxe1 left its devices file)" \
		wait_for 10 rcd_lacks_device rxe1 || bad=1
	check "rdma link del still waits" kill -0 $del || bad=1
	check "... while the id is held" kill -0 $w || bad=1
	wait $del || { fail "rdma link del rxe1: status $?"; bad=1; }
	el=$(awk -v a="$t0" -v b="$t1" -v c="$EPOCHREALTIME" \
		'BEGIN { printf "%d %d", (b - a) * 1000, (c - b) * 1000 }')
	log "the id made after ${el% *} ms; rdma link del took ${el#* } ms (hold $hold ms)"
	# It began well inside the hold, so it waited for the rest of it.
	check "rdma link del waited for the id (${el#* } ms >= $hold - ${el% *} - 1000)" \
		test "${el#* }" -ge $((hold - ${el% *} - 1000)) || bad=1
	wait $w
	read -r rc < /run/rcd-hold.rc
	check "the hold's write succeeded (status $rc)" test "$rc" = 0 || bad=1
	check "the id read its device, rxe1, after the hold" \
		dmesg_has "hold_id: after $hold ms: id 0x[0-9a-f]* on rxe1 in " || bad=1
	log "$(dmesg_test | grep 'hold_id: after')"
	check "ids back to $ids0" wait_for 10 stat_is cm_ids_live "$ids0" || bad=1
	kasan_clean "the id outlived its device" || bad=1
	return $bad
}

# cmhold_is V: rcd_cmhold's held parameter is V.
cmhold_is() {
	local v
	read -r v 2>/dev/null < /sys/module/rcd_cmhold/parameters/held && [ "$v" = "$1" ]
}

# A handler that accepts a REQ, sends the REP from the REQ callback and then
# fails (on_req=rep_then_fail): the accepted id is dropped in its own REQ
# callback after a REP went out. The peer lets the REP time out at once
# (resp=8: 1 ms, retries=0; on_rep=ignore: no RTU), and rcd_cmhold holds
# the CM's destroy of the id for a second: the REP's failure, which the CM
# reports from the MAD's completion, not serialized with the REQ callback,
# lands before the destroy. The id's context must live through it: the
# crate defers the destroy of an id that sent a REP or MRA. Before, it
# freed the context when the callback returned, and the failure's callback
# read it (KASAN: use-after-free in the trampoline).
test_rep_sent_then_dropped_in_req_callback() {
	local n=84 sin sout
	rxe_add rxe0 v0 && rcd_load || return 1
	insmod "$RCD_MODS/rcd_cmhold.ko" hold_ms=1000 || return 1
	cmid_mark
	ctl listen 1 rxe0 0x1000 on_req=rep_then_fail &&
		ctl connect $n rxe0 10.77.0.1 10.77.0.1 0x1000 resp=8 retries=0 on_rep=ignore ||
		{ rmmod rcd_cmhold; return 1; }
	if ! wait_for 60 cmhold_is 2; then
		fail "the passive id was not destroyed within 60 s"
		rmmod rcd_cmhold; return 1
	fi
	read -r sin < /sys/module/rcd_cmhold/parameters/state_in
	read -r sout < /sys/module/rcd_cmhold/parameters/state_out
	rmmod rcd_cmhold || return 1
	log "the passive id's destroy came in state $sin (6 REP_SENT: held; 0 IDLE)," \
		"made in state $sout; $n's events:$(awk -v n=$n '$1 == n { printf " %s", $2 }' \
		"$RCD_DBG/events")"
	check "the REP timed out while the id existed (IDLE at its destroy, got $sout)" \
		test "$sout" = 0 || return 1
	kasan_clean "the REP's failure after the drop"
}
