# SPDX-License-Identifier: GPL-2.0
#
# Faults on the wire: netem on the veth pair between rxe0 (v0) and rxe1
# (v1), and the device deleted under live connections. (100% loss after
# establishment: test_dreq_unanswered in t_cm.sh and test_peer_vanished in
# t_disconnect.sh.)
#
# The CM timing the module sets for these connections (connect options):
# packet life time and CM response timeout 2^14 x 4.096 us (67 ms) each,
# so that a DREQ is retried after a few hundred ms, not seconds.
FAST="lifetime=14 resp=14"

# pair2_range FIRST LAST [OPTS...]: connections FIRST..LAST from rxe0 to the
# listener 1 on rxe1 (listener options in LISTEN_OPTS), all established.
pair2_range() {
	local first=$1 last=$2; shift 2
	CONNECT_OPTS="$*" cm_pair2 "$first" ${LISTEN_OPTS:-} || return 1
	connect_range $((first + 1)) "$last" 10.77.0.2 "$@" || return 1
	local n=$((last - first + 1))
	wait_events 120 ESTABLISHED "$first" "$last" $n &&
		wait_events 120 ESTABLISHED $((first + PASSIVE_BASE)) $((last + PASSIVE_BASE)) $n
}

# 30% loss both ways on the veth: 20 connections disconnected at once all
# get their DREP (the CM retries their DREQs; cm_tx_retries moves); each
# end sees the DREQ/DREP once however often it crossed the wire, and every
# id is freed.
test_loss_30_percent() {
	local a=4000 b=4019 pa pb retries dups
	cm_base
	pa=$((a + PASSIVE_BASE)); pb=$((b + PASSIVE_BASE))
	LISTEN_OPTS=auto_drep=text:bye pair2_range $a $b $FAST retries=15 || return 1
	[ -d /sys/module/sch_netem ] || modprobe sch_netem || return 1
	tc qdisc add dev v0 root netem loss 30% &&
		tc qdisc add dev v1 root netem loss 30% || return 1
	ctl dreq $a-$b text:lossy || return 1
	wait_events 300 DREP_RECEIVED $a $b 20 || return 1
	wait_events 120 TIMEWAIT_EXIT $a $b 20 &&
		wait_events 120 TIMEWAIT_EXIT $pa $pb 20 || return 1
	retries=$(cm_counter rxe0 cm_tx_retries dreq)
	dups=$(cm_counter rxe1 cm_rx_duplicates dreq)
	log "20 DREPs through 30% loss; rxe0 DREQ retries $retries, rxe1 duplicate DREQs $dups," \
		"DREPs sent by rxe1 $(cm_counter rxe1 cm_tx_msgs drep)"
	check "the CM retried" test "$retries" -ge 1 || return 1
	exactly_once DREQ_RECEIVED $pa $pb && exactly_once DREP_RECEIVED $a $b || return 1
	exactly_once DISCONNECTED $a $b && exactly_once DISCONNECTED $pa $pb || return 1
	tc qdisc del dev v0 root; tc qdisc del dev v1 root
	check "ids freed" wait_for 30 stat_is cm_ids_live 1 || return 1
	log "$(stats_line)"
}

# 800 ms +- 50 ms of delay both ways (netem reorders what the jitter
# crosses), both sides of 20 connections disconnecting at once: DREQs cross
# and are retried (duplicates), yet no end sees an event twice, each sees one
# DISCONNECTED, and all reach timewait exit. Both ends of each connection
# disconnect in one write, one right after the other: a DREQ takes at least
# 750 ms on the wire, so each connection's first DREQ to arrive finds its
# receiver in DREQ_SENT (crossed, for at least one end of each of the 20).
# (Two writers in the background left the crossing to the scheduler: in a
# CI run the second ran after rxe0's DREQs had arrived, and none
# crossed.) Each end's DREQ is answered no sooner than the peer's crossing
# DREQ arrives, 750 ms or more after it was sent, and the CM gives it
# 2 x 64 + 512 ms (active end) or 512 ms (passive, the REQ's response
# timeout) before it sends it again: every end retries at least once,
# whatever the guest's speed (40 retries or more), and its retry reaches
# the peer after the first DREQ (a duplicate, unless it finds the peer's
# id between timewait exit and its destruction). 16 tries make about 8 s
# before a DREQ_ERROR.
# (With 100 +- 50 ms and 384/256 ms tries, the retries were the guest's
# slowness: 0 to 25 in one run or another, and a CI run saw 0.)
test_delay_and_reorder() {
	local a=4100 b=4119 pa pb k i list=
	cm_base
	pa=$((a + PASSIVE_BASE)); pb=$((b + PASSIVE_BASE))
	pair2_range $a $b lifetime=14 resp=17 retries=15 || return 1
	[ -d /sys/module/sch_netem ] || modprobe sch_netem || return 1
	tc qdisc add dev v0 root netem delay 800ms 50ms &&
		tc qdisc add dev v1 root netem delay 800ms 50ms || return 1
	local crossed retries dups what
	for ((i = a; i <= b; i++)); do
		list+="${list:+,}$i,$((i + PASSIVE_BASE))"
	done
	{ local_ids $a $b; local_ids $pa $pb; } > /run/rcd-ids
	cm_trace_on || return 1
	ctl disconnect "$list" text:crossing || return 1
	wait_events 300 TIMEWAIT_EXIT $a $b 20 &&
		wait_events 300 TIMEWAIT_EXIT $pa $pb 20 || return 1
	log "DREQ retries rxe0 $(cm_counter rxe0 cm_tx_retries dreq) rxe1" \
		"$(cm_counter rxe1 cm_tx_retries dreq); duplicates rxe0" \
		"$(cm_counter rxe0 cm_rx_duplicates dreq) rxe1" \
		"$(cm_counter rxe1 cm_rx_duplicates dreq); crossed by the harness's records" \
		"(DREQ_SENT, then DREQ_RECEIVED) $(crossed_in $a $b) + $(crossed_in $pa $pb)"
	# What the test is about, reached: DREQs crossed on the wire, and were
	# retried and seen again (duplicates) by the other side.
	crossed=$(crossed_on_wire /run/rcd-ids)
	retries=$(($(cm_counter rxe0 cm_tx_retries dreq) + $(cm_counter rxe1 cm_tx_retries dreq)))
	dups=$(($(cm_counter rxe0 cm_rx_duplicates dreq) +
		$(cm_counter rxe1 cm_rx_duplicates dreq)))
	what="DREQs crossed on the wire ($crossed of 40 ends; at least each connection's first"
	what+=" to arrive)"
	check "$what" \
		test $crossed -ge 20 || return 1
	check "DREQs retried ($retries; at least once for each end)" \
		test $retries -ge 40 || return 1
	check "duplicate DREQs seen ($dups)" test $dups -gt 0 || return 1
	exactly_once DISCONNECTED $a $b && exactly_once DISCONNECTED $pa $pb || return 1
	for k in DREQ_RECEIVED DREP_RECEIVED DREQ_SENT DREP_SENT TIMEWAIT_EXIT DREQ_ERROR; do
		check "no $k twice" \
			test "$(twice_in $k $a $b)$(twice_in $k $pa $pb)" = 00 || return 1
	done
	check "no DREQ timed out" test "$(events_in DREQ_ERROR $a $pb)" = 0 || return 1
	tc qdisc del dev v0 root; tc qdisc del dev v1 root
	check "ids freed" wait_for 30 stat_is cm_ids_live 1
}

# link_del_frees DEV FIRST LAST: rdma link del DEV returns in time, and the
# 100 ends FIRST..LAST on it are freed with one DISCONNECTED each.
link_del_frees() {
	local t0=$SECONDS
	check "rdma link del $1 returns" timeout 120 rdma link del "$1" || return 1
	log "$1 deleted in $((SECONDS - t0)) s"
	check "all of $1's ends freed" test "$(state_count FREED "$2" "$3")" = 100 || return 1
	exactly_once DISCONNECTED "$2" "$3" || return 1
	# (What sort | uniq -c | tr | tr printed, in one awk: four processes less.)
	log "$1's ends: $(awk -v a="$2" -v b="$3" \
		'$2 == "DISCONNECTED" && $1 >= a && $1 <= b { c[$3]++ }
		END { n = 0; for (s in c) k[++n] = s
			for (i = 2; i <= n; i++) for (j = i; j > 1 && k[j - 1] > k[j]; j--) {
				t = k[j]; k[j] = k[j - 1]; k[j - 1] = t }
			for (i = 1; i <= n; i++) printf " %d %s;", c[k[i]], k[i] }' \
		"$RCD_DBG/events")"
}

# disc_statuses FIRST LAST: the DISCONNECTED statuses of FIRST..LAST, each
# once, sorted ("-19", "-110 -19", ...).
disc_statuses() {
	# (sort -u | paste in the awk: two processes less.)
	awk -v a="$1" -v b="$2" '$2 == "DISCONNECTED" && $1 >= a && $1 <= b {
		for (i = 3; i <= NF; i++) if ($i ~ /^status=/) s[substr($i, 8)] = 1
	} END { n = 0; for (v in s) k[++n] = v
		for (i = 2; i <= n; i++) for (j = i; j > 1 && k[j - 1] > k[j]; j--) {
			t = k[j]; k[j] = k[j - 1]; k[j - 1] = t }
		for (i = 1; i <= n; i++) printf "%s%s", (i > 1 ? " " : ""), k[i]
		if (n) print "" }' "$RCD_DBG/events"
}

# statuses_are FIRST LAST WHAT ALLOWED...: every DISCONNECTED status of
# FIRST..LAST is one of ALLOWED (and there is one).
statuses_are() {
	local a=$1 b=$2 what=$3 s got; shift 3
	got=$(disc_statuses $a $b)
	[ -n "$got" ] || { fail "$what ($a-$b): no DISCONNECTED"; return 1; }
	for s in $got; do
		[[ " $* " == *" $s "* ]] ||
			{ fail "$what ($a-$b): DISCONNECTED status $s (allowed: $*; got: $got)"
			  return 1; }
	done
}

# The device is deleted (rdma link del) under 100 live connections in mixed
# states: 25 idle, 25 with receives posted, 25 with the peer's DREQ
# unanswered (DREQ_RCVD here, DREQ_SENT there), 25 disconnected (timewait).
# Every end on rxe1 is freed with its DISCONNECTED (-ENODEV if its
# connection was not over yet); the other ends hear the destroyed ids'
# DREQs or get -ENODEV when rxe0 goes too. No hang, and the module unloads.
test_device_deleted_under_100() {
	local a=4200 b=4299 pa pb k passes
	pa=$((a + PASSIVE_BASE)); pb=$((b + PASSIVE_BASE))
	# 100 handshakes at once on a slow guest: each REQ gets 16 tries
	# (retries=15) of about 640 ms, each REP as many of 512 ms for its RTU
	# (resp=17: the passive end's timer is the REQ's response timeout,
	# cm.c cm_req_handler). 4 tries of about 200 ms ran out before the
	# first REP left a slow guest.
	pair2_range $a $b lifetime=14 resp=17 retries=15 || return 1
	for ((k = 4225; k <= 4249; k++)); do ctl post $k 8 || return 1; done
	ctl dreq $((4250 + PASSIVE_BASE))-$((4274 + PASSIVE_BASE)) text:unanswered || return 1
	ctl disconnect 4275-4299 || return 1
	wait_events 60 DREQ_RECEIVED 4250 4274 25 || return 1
	# The last 25's DREQs have arrived before the deletion.
	wait_events 60 DREQ_RECEIVED $((4275 + PASSIVE_BASE)) $pb 25 || return 1
	log "before: $(state_count ESTABLISHED $a $b) established," \
		"$(state_count DREQ_RCVD $a $b) DREQ_RCVD, $(state_count TIMEWAIT $a $b) +" \
		"$(state_count FREED $a $b) disconnecting/freed"
	passes=$(rcd_stat removal_passes)
	link_del_frees rxe1 $pa $pb || return 1
	# One pass over the table for all of rxe1's 100 ends and one that finds
	# none left, not one per end (quadratic under the table's lock).
	passes=$(( $(rcd_stat removal_passes) - passes ))
	check "rxe1's removal: $passes passes over the table, 2 at most" test $passes -le 2 ||
		return 1
	# The status mix, by what each of rxe1's ends was doing: not over
	# (idle, receives posted): -ENODEV; its own DREQ unanswered: -ETIMEDOUT
	# if the DREQ had timed out (16 tries: about 10 s) before the deletion,
	# else -ENODEV; the peer's DREQ received before (DISCONNECTED then): 0.
	statuses_are $pa $((pa + 49)) "rxe1's idle and posted ends" -19 || return 1
	statuses_are $((pa + 50)) $((pa + 74)) "rxe1's ends with their DREQ unanswered" \
		-110 -19 || return 1
	statuses_are $((pa + 75)) $pb "rxe1's ends that had got the peer's DREQ" 0 || return 1
	# rxe1's ends destroyed their ids before the CM let go of rxe1 (the
	# module is the later client, removed first): the 50 still ESTABLISHED
	# here hear those DREQs, unless a DREQ lost the race with its cancel.
	# Give them up to 10 s, so that rxe0's deletion meets ends in DREQ_RCVD.
	wait_for 10 events_at_least DREQ_RECEIVED $a $((a + 49)) 50 || true
	log "rxe0's established ends that heard their peer's DREQ:" \
		"$(events_in DREQ_RECEIVED $a $((a + 49))) of 50"
	link_del_frees rxe0 $a $b || return 1
	# rxe0's: ended by the peer's DREQ or DREP (0), their own DREQ's
	# timeout (-ETIMEDOUT) or the deletion (-ENODEV).
	statuses_are $a $b "rxe0's ends" 0 -19 -110 || return 1
	check "no id left" test "$(rcd_stat cm_ids_live)" = 0 || return 1
	check "the module unloads" timeout 120 rmmod rcd_harness
}
