# SPDX-License-Identifier: GPL-2.0
#
# A randomized hostile peer on the wire: tests/modules/
# rcd_fuzzpeer.ko on rxe1 (v1) sends CM MADs of every kind, fields drawn
# from a seeded PRNG and from what it has seen, at every kind of listener
# the module has on rxe0 and at connections the module made itself, for
# RCD_FUZZPEER_SECONDS (make check: 10 s, make stress: 600 s). The seed is
# printed; RCD_FUZZPEER_SEED=N draws the same choices again.
#
# What the peer has seen: it gets no answers of its own (they go to rxe1's
# CM, which drops them), so the test tells it, twice a second, every end the
# module has on rxe0 (its local id, its remote id, its QPN) from the
# module's conns file: what a peer learns from the REPs it is sent. The
# REQs ask the CM to wait 0.5-2 s for an RTU (rcd_fuzzpeer.c, max_resp),
# 2-6 times, so that the peer can answer most of the module's REPs.
#
# Afterwards: the counts (the peer's messages by kind, rxe0's CM's
# received and sent messages by kind, the module's counters and events);
# within RCD_FUZZPEER_DRAIN s (45) of the end every end the peer made is
# either ESTABLISHED (a connection the peer keeps) or freed: the peer holds
# nothing in a handshake or a disconnect (the CM's timers, bounded by the
# peer's REQs, end handshakes in seconds; a DREQ nobody answers must be
# answered by the module's own deadline: `drep_after=5000`
# on the listeners without `auto_drep`); every listener and the module's
# own connections still connect, disconnect (DREQ/DREP) and ping; once
# everything is closed only the listeners' ids are left, no QP of ours;
# the module unloads; nothing in the kernel log (DMESG_BAD). kmemleak is
# scanned at the end of the guest (t_kernel.sh).

FUZZPEER_DBG=/sys/kernel/debug/rcd_fuzzpeer
FUZZPEER_KINDS="req mra rej rep rtu dreq drep sidr_req sidr_rep lap apr"

# flog MSG: log with the seconds since the test began.
flog() { log "[$((SECONDS - FP_T0)) s] $*"; }

# fuzzpeer_stat NAME: a line of the peer's stats; fuzzpeer_stat_v: into
# REPLY (no command substitution, which is a process: polls use it).
fuzzpeer_stat() { fuzzpeer_stat_v "$1" && echo "$REPLY"; }
fuzzpeer_stat_v() {
	local k v
	REPLY=
	while read -r k v; do
		[ "$k" != "$1" ] || { REPLY=$v; return 0; }
	done < $FUZZPEER_DBG/stats
	return 1
}

fuzzpeer_running() { fuzzpeer_stat_v running && [ "$REPLY" = 1 ]; }

fuzzpeer_stopped() { ! fuzzpeer_running; }

# fp_lines FILE ERE [FORMAT]: the lines "KEY VALUE" of FILE whose KEY
# matches ERE, on one line, each as FORMAT ("%s %s " by default) with KEY's
# part that ERE's first group matched, or all of it; builtins only (each
# of these was a grep | sed | tr: three processes).
fp_lines() {
	local k v out= key
	while read -r k v; do
		[[ $k =~ $2 ]] || continue
		key=${BASH_REMATCH[1]:-$k}
		# shellcheck disable=SC2059
		printf -v k "${3:-%s %s }" "$key" "$v"
		out+=$k
	done < "$1"
	echo "$out"
}

# fuzzpeer_sent_every_kind: no line "sent_KIND 0" in the peer's stats.
fuzzpeer_sent_every_kind() {
	local k v
	while read -r k v; do
		[[ ! $k =~ ^sent_[a-z_]+$ ]] || [ "$v" != 0 ] || return 1
	done < $FUZZPEER_DBG/stats
}

# fuzzpeer_write LINES: one write(2) of LINES to the peer's ctl; if it is
# refused, each line again on its own, and the refused ones printed.
fuzzpeer_write() {
	local l bad=0
	printf '%s' "$1" 2>/dev/null > $FUZZPEER_DBG/ctl && return 0
	while read -r l; do
		printf '%s\n' "$l" 2>/dev/null > $FUZZPEER_DBG/ctl ||
			{ fail "rcd_fuzzpeer refused '$l'"; bad=1; }
	done <<< "$1"
	return $bad
}

# fuzzpeer_feed: while the peer runs, twice a second, every end the module
# has on rxe0 (listeners included: remote id 0, no QPN) into its pool.
# Builtins only.
fuzzpeer_feed() {
	local num rest kv dev lid rid qpn batch rounds=0 conns
	while fuzzpeer_running; do
		# The file in one read: bash's read builtin seeks back after
		# each line, and a seq_file makes all of it again for each seek
		# (a round of 800 ends took 15 s under TCG).
		conns=$(< "$RCD_DBG/conns")
		batch=
		while read -r num rest; do
			[[ $rest == *' dev=rxe0 '* && $rest != *state=FREED* ]] || continue
			dev=; lid=; rid=0; qpn=0
			for kv in $rest; do
				case $kv in
				dev=*) dev=${kv#*=} ;;
				local_id=*) lid=${kv#*=} ;;
				remote_id=*) rid=${kv#*=} ;;
				qpn=*) qpn=${kv#*=} ;;
				esac
			done
			[ "$dev" = rxe0 ] && [ -n "$lid" ] || continue
			batch+="end $lid $rid $qpn"$'\n'
			# One write(2) a batch: lines are not split.
			if [ ${#batch} -gt 3000 ]; then
				fuzzpeer_write "$batch" || return 1
				batch=
			fi
		done <<< "$conns"
		[ -z "$batch" ] || fuzzpeer_write "$batch" || return 1
		rounds=$((rounds + 1))
		nap 0.5
	done
	log "feeder: $rounds rounds"
}

# fuzzpeer_counts DIR: rxe0's CM counter DIR for every kind, since the
# baseline in FP_BASE (fuzzpeer_base DIR).
declare -A FP_BASE
fuzzpeer_base() {
	local m
	for m in $FUZZPEER_KINDS; do
		cm_counter_v rxe0 "$1" $m || return 1
		FP_BASE[$1/$m]=$REPLY
	done
}
fuzzpeer_counts() {
	local m out=
	for m in $FUZZPEER_KINDS; do
		cm_counter_v rxe0 "$1" $m || return 1
		out+=" $m=$((REPLY - ${FP_BASE[$1/$m]}))"
	done
	echo "${out# }"
}

# The numbers of the module's own connections (not the peer's).
FP_OWN='^(10[0-3]|11[01]|100010[0-3]|100011[01]|3[01][0-5]|10003[01][0-5]|[1-7])$'

# fuzzpeer_held: the peer's ends (passive, on rxe0, not the module's own)
# neither ESTABLISHED nor FREED, as "NUM:STATE:listenerN" words.
fuzzpeer_held() {
	awk -v own="$FP_OWN" '$1 !~ own && / dev=rxe0 / && / listener=/ {
		s = ""; l = ""
		for (i = 2; i <= NF; i++) {
			if ($i ~ /^state=/) s = substr($i, 7)
			if ($i ~ /^listener=/) l = substr($i, 10)
		}
		if (s != "ESTABLISHED" && s != "FREED") printf "%s:%s:listener%s ", $1, s, l
	}' "$RCD_DBG/conns"
}
fuzzpeer_none_held() { [ -z "$(fuzzpeer_held)" ]; }

# fuzzpeer_round_trip: a new connection from rxe1 to each RC listener on
# rxe0 and one from rxe0 to rxe1's: each ESTABLISHED both ends, then a DREQ
# from the active end answered by a DREP (by auto_drep, or by the test for
# listeners without one); an rping client of 3 pings against the rping
# listener, which disconnects when done.
# rt_connect N DEV SRC DST SID [OPTS]: connection N, ESTABLISHED within 60 s;
# its number in RT_N. Once more as N + 10 if rxe0's CM rejected it as a
# stale connection (REJ reason 10): the peer sends REQs from rxe1's GUID
# with QPNs it saw plus one (rcd_fuzzpeer.c: some_u32), and a QPN rxe1
# then gives a new QP is still in rxe0's CM's table until that REQ's
# timewait ends (seen once in make check: "300: no ESTABLISHED within
# 60 s; its events: REJ_RECEIVED TIMEWAIT_EXIT").
rt_connect() {
	local n=$1; shift
	RT_N=$n
	ctl connect "$n" "$@" || return 1
	wait_for 60 has_event "$n" ESTABLISHED && return 0
	if has_event "$n" REJ_RECEIVED && [ "$(event_field "$n" REJ_RECEIVED status)" = 10 ]; then
		log "$n: rejected as a stale connection (its QPN was the peer's);" \
			"again as $((n + 10))"
		RT_N=$((n + 10))
		ctl connect "$RT_N" "$@" || return 1
	fi
	wait_event 60 "$RT_N" ESTABLISHED
}

fuzzpeer_round_trip() {
	local n ns= n1 n2 r
	rt_connect 300 rxe1 10.77.0.2 10.77.0.1 0x1000 || return 1
	n1=$RT_N
	rt_connect 301 rxe1 10.77.0.2 10.77.0.1 0x2000 || return 1
	n2=$RT_N
	rt_connect 302 rxe1 10.77.0.2 10.77.0.1 0x3000 || return 1
	ns=$RT_N
	rt_connect 303 rxe1 10.77.0.2 10.77.0.1 tcp:7474 cma_port=5000 || return 1
	ns+=" $RT_N"
	rt_connect 304 rxe0 10.77.0.1 10.77.0.2 0x7000 || return 1
	ns+=" $RT_N"
	rt_connect 305 rxe1 10.77.0.2 10.77.0.1 0x6000 rping=3:64 || return 1
	r=$RT_N
	for n in $n1 $n2 $ns; do
		ctl dreq "$n" text:after-the-fuzz || return 1
	done
	for n in $n1 $n2; do
		# Listeners 1 and 2 have no auto_drep: the test answers (unless
		# the module already did).
		wait_event 30 $((n + PASSIVE_BASE)) DREQ_RECEIVED || return 1
		echo "drep $((n + PASSIVE_BASE)) text:bye" 2>/dev/null > "$RCD_DBG/ctl"
	done
	for n in $n1 $n2 $ns; do
		wait_event 30 "$n" DREP_RECEIVED || return 1
	done
	wait_event 60 "$r" DREP_RECEIVED || return 1
	flog "rping after the fuzz: $(conn_field "$r" rping)"
}

test_fuzz_cm_peer() {
	local secs=${RCD_FUZZPEER_SECONDS:-10} seed=${RCD_FUZZPEER_SEED:-0}
	local drain=${RCD_FUZZPEER_DRAIN:-45} mac qps0 n feeder t0 held bad=0 nums
	cm_base
	FP_T0=$SECONDS
	rxe_add rxe0 v0 && rxe_add rxe1 v1 && veth_cross_routes || return 1
	qps0=$(rdma_res qp)
	echo "rcd-test: fuzz_cm_peer begins" > /dev/kmsg
	rcd_load || return 1
	read -r mac < /sys/class/net/v0/address
	insmod "$RCD_MODS/rcd_fuzzpeer.ko" dev=rxe1 src=10.77.0.2 dst=10.77.0.1 dmac="$mac" ||
		fail "insmod rcd_fuzzpeer" || return 1
	# Every kind of listener on rxe0: plain (no auto_drep), a backlog of
	# 2, auto_drep with data, rdma_cm's TCP and UDP port spaces (cma=1),
	# an rping server. And the module's own connections, made before the
	# peer starts: rxe0 -> a listener on rxe1 (100-103), rxe1 -> rxe0's
	# listener 3 (110, 111).
	ctl listen 1 rxe0 0x1000 drep_after=5000 &&
		ctl listen 2 rxe0 0x2000 backlog=2 drep_after=5000 &&
		ctl listen 3 rxe0 0x3000 auto_drep=text:fuzz &&
		ctl listen 4 rxe0 tcp:7474 cma=1 auto_drep=- &&
		ctl listen 5 rxe0 udp:7475 cma=1 drep_after=5000 &&
		ctl listen 6 rxe0 0x6000 rping=1 auto_drep=- &&
		ctl listen 7 rxe1 0x7000 auto_drep=- || return 1
	for n in 100 101 102 103; do
		ctl connect $n rxe0 10.77.0.1 10.77.0.2 0x7000 || return 1
	done
	ctl connect 110 rxe1 10.77.0.2 10.77.0.1 0x3000 &&
		ctl connect 111 rxe1 10.77.0.2 10.77.0.1 0x3000 || return 1
	for n in 100 101 102 103 110 111; do
		wait_event 60 $n ESTABLISHED || return 1
	done
	local tcp=$(( (0x106 << 16) + 7474 )) udp=$(( (0x111 << 16) + 7475 ))
	printf 'sid %s\n' 0x1000 0x2000 0x3000 $tcp $udp 0x6000 > $FUZZPEER_DBG/ctl ||
		fail "rcd_fuzzpeer: sids" || return 1
	flog "set up: 7 listeners, 6 connections"
	fuzzpeer_base cm_rx_msgs; fuzzpeer_base cm_tx_msgs; fuzzpeer_base cm_rx_duplicates
	echo "run seed=$seed ms=$((secs * 1000)) gap_us=${RCD_FUZZPEER_GAP_US:-5000}" \
		> $FUZZPEER_DBG/ctl || fail "rcd_fuzzpeer: run" || return 1
	flog "fuzz: seed $(fuzzpeer_stat seed) for $secs s" \
		"(replay: RCD_FUZZPEER_SEED=$(fuzzpeer_stat seed))"
	fuzzpeer_feed &
	feeder=$!
	t0=$SECONDS
	# The peer checks its deadline once a step, at nice 19: under TCG,
	# with the feeder's rounds growing with the ends (make stress: 3 s a
	# round after 10 minutes), it may get so little of a vCPU that it
	# overruns (make stress, 2026-12-01: still running 660 s after a
	# 600 s start). Then it is told to stop, and must: a peer that does
	# not stop fails; one that overran is logged, and the run goes on to
	# its counts and checks.
	if ! wait_for $((secs + 60)) fuzzpeer_stopped; then
		flog "the peer still runs $((SECONDS - t0)) s after its start, at step" \
			"$(fuzzpeer_stat steps): stopping it"
		echo stop > $FUZZPEER_DBG/ctl
		check "the peer stops when told to" wait_for 30 fuzzpeer_stopped || return 1
	fi
	wait $feeder || { fail "the feeder failed"; bad=1; }
	# The counts.
	flog "peer: $(fp_lines $FUZZPEER_DBG/stats \
		'^(seed|steps|sent|completed|completion_errors|post_errors|pool_ends)$')"
	log "peer sent: $(fp_lines $FUZZPEER_DBG/stats '^sent_(.+)$' '%s=%s ')"
	log "peer actions: $(fp_lines $FUZZPEER_DBG/stats '^action_(.+)$' '%s=%s ')"
	# Let the last messages arrive before counting the CM's answers.
	nap 2
	log "rxe0's CM received: $(fuzzpeer_counts cm_rx_msgs)"
	log "rxe0's CM duplicates: $(fuzzpeer_counts cm_rx_duplicates)"
	log "rxe0's CM sent (retries included): $(fuzzpeer_counts cm_tx_msgs)"
	log "module: $(fp_lines "$RCD_DBG/stats" \
		'^(conns|cm_ids_live|endpoints_live|established|reps_sent|req_callbacks|'\
'drep_received|dreq_sent|drep_sent|events_lost)$')"
	log "module events: $(awk '{ c[$2]++ } END { for (k in c) printf "%s=%d ", k, c[k] }' \
		"$RCD_DBG/events")"
	log "module ends by state: $(ends_by_state)"
	check "the peer sent messages of every kind" fuzzpeer_sent_every_kind || bad=1
	# Nothing held in a handshake or a disconnect once the CM's own
	# timers (bounded by the peer's max_resp and max_retries) have run:
	# after a late MRA, up to 6 more REP tries of 2 s + 1 s (max_resp 19,
	# max_retries 5), about 18 s, and the CM's queue behind them; the
	# drain is a poll, 45 s its bound.
	if ! wait_for "$drain" fuzzpeer_none_held; then
		held=$(fuzzpeer_held)
		fail "$(echo "$held" | wc -w) ends of the peer's still held" \
			"$drain s after it stopped" \
			"(seed $(fuzzpeer_stat seed)): $(echo "$held" | tr ' ' '\n' |
			awk -F: 'NF { c[$2]++ } END { for (k in c) printf "%s=%d ", k, c[k] }')" \
			"e.g. $(echo "$held" | cut -d' ' -f1-5)"
		bad=1
	fi
	flog "ESTABLISHED ends the peer keeps: $(awk -v own="$FP_OWN" \
		'$1 !~ own && / listener=/ && / state=ESTABLISHED / { n++ } END { print n + 0 }' \
		"$RCD_DBG/conns")"
	# Every listener still works.
	flog "drained; the round trip"
	fuzzpeer_round_trip || { fail "the module no longer connects and disconnects"; bad=1; }
	# Everything closed but the listeners: only their ids left, no QP.
	flog "closing everything but the listeners"
	# 300 numbers a write (close N,M,...).
	awk '$1 !~ /^[1-7]$/ { a = (a == "" ? $1 : a "," $1);
		if (++n % 300 == 0) { print a; a = "" } }
		END { if (a != "") print a }' "$RCD_DBG/conns" > /run/fuzzpeer-close
	local e
	while read -r nums; do
		e=$(ctl_errno "close $nums")
		[ "$e" = OK ] ||
			log "close of $(echo "$nums" | tr ',' '\n' | grep -c .) at once: $e"
	done < /run/fuzzpeer-close
	# Whatever is left but the listeners: one by one, each must close.
	for n in $(awk '$1 !~ /^[1-7]$/ { print $1 }' "$RCD_DBG/conns"); do
		e=$(ctl_errno "close $n")
		[ "$e" = OK ] || { fail "close $n: $e"; bad=1; }
	done
	flog "closed"
	check "only the 7 listeners' ids left ($(rcd_stat cm_ids_live))" \
		wait_for 30 stat_is cm_ids_live 7 || bad=1
	# And their endpoints only (within the module's 30 s deadline for
	# the DREQs it answers itself, which may still hold a closed end).
	check "only the 7 listeners' endpoints left ($(rcd_stat endpoints_live))" \
		wait_for 45 stat_is endpoints_live 7 || bad=1
	check "no QP of ours left ($(rdma_res qp) vs $qps0)" \
		wait_for 30 rdma_res_cmp -eq "$qps0" qp ||
		bad=1
	flog "module after close: $(stats_line)"
	rmmod rcd_fuzzpeer || { fail "rmmod rcd_fuzzpeer"; bad=1; }
	t0=$SECONDS
	rcd_unload || bad=1
	log "rmmod rcd_harness, rust_cm_disconnect: $((SECONDS - t0)) s"
	check "no QP left after unload" test "$(rdma_res qp)" = "$qps0" || bad=1
	local reports
	reports=$(dmesg | awk '/rcd-test: fuzz_cm_peer begins/ { buf = ""; on = 1; next }
		on { buf = buf $0 "\n" } END { printf "%s", buf }' | grep -E "$DMESG_BAD")
	[ -z "$reports" ] ||
		{ echo "$reports" | head -40 | sed 's/^/# /'; fail "kernel reports"; bad=1; }
	return $bad
}
timeout_test_fuzz_cm_peer=$(( ${RCD_FUZZPEER_SECONDS:-10} + ${RCD_FUZZPEER_DRAIN:-45} + 300 ))
