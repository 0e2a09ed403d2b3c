# SPDX-License-Identifier: GPL-2.0
#
# Two hosts: guests 1 and 2 of `make check` are hosts a (10.78.0.1) and b
# (10.78.0.2), their virtio NICs on one QEMU socket network, rxe0 on each
# NIC, the module on both (tests/run.sh starts them, tests/guest.sh runs
# these first). Each hosts_* function runs on both hosts at once, each its
# half (RCD_HOST is a or b); they meet at barriers (peer_sync), files in the
# run's shared directory, never after fixed sleeps. The peer's address is
# resolved by the module as rdma_cm resolves it (path.rs: ARP), not found in
# a local GID table.
#
# Environment (tests/guest.sh: run_hosts): RCD_HOST, RCD_PEER (a or b),
# RCD_MY_IP, RCD_PEER_IP, RCD_NIC, RCD_HOSTS_DIR (this test's directory).

# --- barriers ------------------------------------------------------------

# peer_put KEY [VALUE]: tell the other host KEY (and VALUE), atomically:
# VALUE into KEY.v, closed, and only then KEY, which the other host waits
# for (an empty file made by the shell: no mv, whose process costs half a
# second under TCG, four or five times a test on each host).
peer_put() {
	local f=$RCD_HOSTS_DIR/$RCD_HOST.$1
	printf '%s\n' "${2:-}" > "$f.v" && : > "$f"
}

# peer_wait KEY [SECONDS] [quiet]: wait until the other host has put KEY;
# prints its VALUE. Fails at once if the other host's half has ended
# without putting it (a failure there) or its guest has stopped (tests/run.sh
# marks it: RCD_PEER_DEAD), or after SECONDS (default 120). Why it failed
# goes to stderr, which the callers' redirects of the VALUE leave alone.
peer_wait() {
	local f=$RCD_HOSTS_DIR/$RCD_PEER.$1 end=$((SECONDS + ${2:-120})) v
	until [ -e "$f" ]; do
		if [ "$1" != end ] && [ -e "$RCD_HOSTS_DIR/$RCD_PEER.end" ]; then
			fail "host $RCD_PEER ended its half before '$1'" >&2
			return 1
		fi
		if [ -n "${RCD_PEER_DEAD:-}" ] && [ -e "$RCD_PEER_DEAD" ]; then
			fail "host $RCD_PEER's guest has stopped (waiting for '$1')" >&2
			return 1
		fi
		if [ $SECONDS -ge $end ]; then
			[ -n "${3:-}" ] || fail "host $RCD_PEER: no '$1' within ${2:-120} s" >&2
			return 1
		fi
		nap 0.2
	done
	read -r v < "$f.v"
	echo "$v"
}

# peer_sync KEY [SECONDS] [quiet]: both hosts reach KEY.
peer_sync() { peer_put "$1" "${RCD_SYNC_VALUE:-}" && peer_wait "$@" >/dev/null; }

# --- setup -----------------------------------------------------------------

# host_setup: rxe0 on this host's NIC, the module loaded. rxe0 and the
# product stay from the test before (tests/guest.sh: run_host_test), unless
# it deleted them (hosts_link_del_50): each costs seconds to add again.
host_setup() {
	if ! rxe_on rxe0 "$RCD_NIC"; then
		[ -d /sys/module/rdma_rxe ] || modprobe rdma_rxe || return 1
		[ ! -e /sys/class/infiniband/rxe0 ] || rxe_del rxe0
		rdma link add rxe0 type rxe netdev "$RCD_NIC" || return 1
		# A new device counts from zero.
		cm_base_forget rxe0
		wait_for 10 port_active rxe0 || fail "rxe0 on $RCD_NIC not ACTIVE" || return 1
	fi
	# (product_load's modprobes of the CM, built in here, cost a process each.)
	product_loaded || product_load || return 1
	insmod "$RCD_HARNESS_KO" || fail "insmod $RCD_HARNESS_KO"
}

# connect_to_peer FIRST LAST [OPTS...]: connections FIRST..LAST from this
# host to the peer's listener on service 0x1000.
connect_to_peer() {
	local i first=$1 last=$2; shift 2
	for ((i = first; i <= last; i++)); do
		ctl connect $i rxe0 "$RCD_MY_IP" "$RCD_PEER_IP" 0x1000 "$@" || return 1
	done
}

# status_count KIND STATUS FIRST LAST: events KIND with STATUS of FIRST..LAST.
status_count() {
	awk -v k="$1" -v s="status=$2" -v a="$3" -v b="$4" \
		'$2 == k && $3 == s && $1 >= a && $1 <= b { n++ } END { print n + 0 }' \
		"$RCD_DBG/events"
}

# peer_mac: the other host's NIC's MAC, as tests/run.sh gives guest N
# (host a is guest 1, host b guest 2): 52:54:00:12:78:0N.
peer_mac() { echo "52:54:00:12:78:0$([ "$RCD_PEER" = a ] && echo 1 || echo 2)"; }

# neigh_of IP: the MAC the neighbour table has for IP on the NIC, one line.
neigh_of() {
	local v
	v=$(ip neigh show "$1" dev "$RCD_NIC")
	v=${v//$'\n'/ }
	while [[ $v == *"  "* ]]; do v=${v//  / }; done
	echo "$v"
}

# The helpers below read the harness's files with shell builtins, for
# the tests with few endpoints (a file of a few lines): under TCG every
# grep or awk costs half a second of the host's one vCPU, and a poll
# makes one every 0.2 s. Each reads its file once (mapfile: one open, and
# a debugfs file is made whole at its first read: a consistent copy).

# h_events NUM KIND: H_EV, the lines of NUM's events KIND, in order (as
# grep '^NUM KIND ' finds them).
h_events() {
	local l all
	H_EV=()
	mapfile -t all < "$RCD_DBG/events"
	for l in "${all[@]}"; do
		[[ $l != "$1 $2 "* ]] || H_EV+=("$l")
	done
}

# h_event_count NUM KIND: as event_count.
h_event_count() { h_events "$1" "$2"; echo ${#H_EV[@]}; }

# h_event_field NUM KIND FIELD: as event_field (FIELD of NUM's first KIND).
h_event_field() {
	local kv
	h_events "$1" "$2"
	[ ${#H_EV[@]} -gt 0 ] || return 0
	for kv in ${H_EV[0]#* * }; do
		[[ $kv != "$3="* ]] || { kv=${kv#*=}; echo "${kv%%=*}"; return 0; }
	done
}

# H_PAT: pat_hex 255 255, made once without a process: pat_hex N N is its
# first 2N characters for N up to 255 (a bash loop of N printfs costs
# about half a second under TCG).
printf -v H_PAT '%02x' {1..255}

# h_conn_line NUM: H_CONN, NUM's line of conns (empty if none).
h_conn_line() {
	local l all
	H_CONN=
	mapfile -t all < "$RCD_DBG/conns"
	for l in "${all[@]}"; do
		[[ $l != "$1 "* ]] || { H_CONN=$l; return 0; }
	done
}

# h_kind_cmp OP KIND N: the lines of events that have KIND (as grep -c
# ' KIND ' counts them: a line has one kind, and its data is hex), counted
# by one substitution over the whole file, compared (OP: -eq, -ge) with N.
h_kind_cmp() {
	local all s t
	mapfile -t all < "$RCD_DBG/events"
	printf -v s '%s\n' "${all[@]}"
	t=${s//" $2 "/}
	[ $(((${#s} - ${#t}) / (${#2} + 2))) "$1" "$3" ]
}

# h_wait_events SECONDS KIND FIRST LAST N: as wait_events, within the
# same SECONDS; first polls (builtins only) until the whole file has N
# events KIND, which it has before FIRST..LAST have, and only then polls
# with wait_events's awk (events_at_least), which counts FIRST..LAST; on
# failure it says so with SECONDS. A poll by awk costs half a second of
# the one vCPU that the CM's and rxe's work, waited for, needs.
h_wait_events() {
	local end=$((SECONDS + $1))
	wait_for "$1" h_kind_cmp -ge "$2" "$5"
	wait_for $((end > SECONDS ? end - SECONDS : 0)) events_at_least "$2" "$3" "$4" "$5" ||
		fail "$(events_in "$2" "$3" "$4") of $5 $2 in $3-$4 within $1 s;" \
			"events there:$(events_tally "$3" "$4"); CM: REQ sent" \
			"$(cm_counter rxe0 cm_tx_msgs req) retried" \
			"$(cm_counter rxe0 cm_tx_retries req)," \
			"REP sent $(cm_counter rxe0 cm_tx_msgs rep) retried" \
			"$(cm_counter rxe0 cm_tx_retries rep), RTU sent" \
			"$(cm_counter rxe0 cm_tx_msgs rtu)" \
			"received $(cm_counter rxe0 cm_rx_msgs rtu)"
}

# events_tally FIRST LAST: how many events of each kind FIRST..LAST had,
# " KIND N" each (what a failed wait saw instead).
events_tally() {
	awk -v a=$1 -v b=$2 '$1 >= a && $1 <= b { c[$2]++ }
		END { for (k in c) printf " %s %d", k, c[k] }' "$RCD_DBG/events"
}

# h_stats_line: as stats_line.
h_stats_line() {
	local k v out=
	while read -r k v; do
		case $k in
		dreq_sent|drep_sent|drep_received|cm_ids_live|endpoints_live|events_lost)
			out+="$k $v " ;;
		esac
	done < "$RCD_DBG/stats"
	echo "$out"
}

# --- tests -------------------------------------------------------------------

# Module to module across the hosts, both directions: each host's
# connection 2 goes to the other's listener, the peer's MAC resolved by ARP
# on each side in turn (host a first; then host b, once its end of a's
# connection is established, forgets the entry a's ARP request left in its
# table): before each connect the neighbour table has no MAC for the peer,
# after it the peer's MAC; each sends a DREQ of 220 bytes, the other's
# listener answers with a DREP of 224; both arrive byte for byte; each end
# sees one DISCONNECTED, reaches timewait exit and is freed, on both hosts.
hosts_module_to_module() {
	local p=$((2 + PASSIVE_BASE)) got ms before after mac
	host_setup || return 1
	ctl listen 1 rxe0 0x1000 auto_drep=pat:224 || return 1
	peer_sync listening || return 1
	if [ "$RCD_HOST" = b ]; then
		peer_wait resolved 60 >/dev/null || return 1
		wait_event 30 $p ESTABLISHED || return 1
	fi
	ip neigh flush dev "$RCD_NIC"
	before=$(neigh_of "$RCD_PEER_IP")
	read -r got ms < <(ctl_errno_alarm 60 "connect 2 rxe0 $RCD_MY_IP $RCD_PEER_IP 0x1000")
	after=$(neigh_of "$RCD_PEER_IP")
	log "connect $RCD_MY_IP -> $RCD_PEER_IP, neighbour before: '${before:-none}':" \
		"$got in $ms ms; after: $after"
	check "connect accepted (got $got)" test "$got" = OK || return 1
	check "no MAC for the peer before the connect" \
		test "${before/lladdr/}" = "$before" || return 1
	mac=$(peer_mac)
	check "the peer's MAC ($mac) learned by the connect's ARP" \
		test "${after/lladdr $mac/}" != "$after" || return 1
	wait_event 30 2 ESTABLISHED || return 1
	[ "$RCD_HOST" = b ] || peer_put resolved
	wait_event 30 $p ESTABLISHED || return 1
	peer_sync established || return 1
	ctl dreq 2 pat:220 || return 1
	wait_event 30 2 DREP_RECEIVED || return 1
	wait_event 30 $p DREQ_RECEIVED || return 1
	got=$(h_event_field $p DREQ_RECEIVED data)
	check "host $RCD_PEER's DREQ: 220 bytes here (len $(h_event_field $p DREQ_RECEIVED len))" \
		test "$(h_event_field $p DREQ_RECEIVED len)" = 220 || return 1
	[ "$got" = "${H_PAT:0:440}" ] ||
		fail "host $RCD_PEER's DREQ: saw ${got:0:80}..." || return 1
	got=$(h_event_field 2 DREP_RECEIVED data)
	check "host $RCD_PEER's DREP: 224 bytes here" \
		test "$(h_event_field 2 DREP_RECEIVED len)" = 224 || return 1
	[ "$got" = "${H_PAT:0:448}" ] ||
		fail "host $RCD_PEER's DREP: saw ${got:0:80}..." || return 1
	log "DREQ 220 bytes and DREP 224 bytes from host $RCD_PEER: byte for byte"
	wait_event 60 2 TIMEWAIT_EXIT && wait_event 60 $p TIMEWAIT_EXIT || return 1
	check "one DISCONNECTED on 2 (status $(h_event_field 2 DISCONNECTED status))" \
		test "$(h_event_count 2 DISCONNECTED)" = 1 || return 1
	check "one DISCONNECTED on $p" test "$(h_event_count $p DISCONNECTED)" = 1 || return 1
	check "2 freed" test "$(conn_field 2 state)" = FREED || return 1
	check "$p freed" test "$(conn_field $p state)" = FREED || return 1
	check "ids freed (cm_ids_live $(rcd_stat cm_ids_live))" \
		test "$(rcd_stat cm_ids_live)" = 1 || return 1
	log "rxe0: DREQ sent $(sent rxe0 dreq) received $(cm_counter rxe0 cm_rx_msgs dreq)," \
		"DREP sent $(sent rxe0 drep) received" \
		"$(cm_counter rxe0 cm_rx_msgs drep); $(h_stats_line)"
}

# rdma-core's cmtime across the hosts: host b's `cmtime -c 30` against the
# module as server on host a (all connected and disconnected, cmtime exits
# 0, every DREQ answered, every id freed); then the module on host a as the
# client of `cmtime -b` on host b: 10 connections established and
# disconnected by the module, each DREQ answered by rdma_cm.
hosts_cmtime() {
	local rc pid n
	command -v cmtime >/dev/null ||
		{ echo "# SKIP rdmacm-utils not installed (scripts/setup.sh installs it)"
		  return $KSFT_SKIP; }
	host_setup || return 1
	if [ "$RCD_HOST" = a ]; then
		ctl listen 1 rxe0 tcp:7471 cma=1 auto_drep=- || return 1
		peer_sync listening || return 1
		rc=$(peer_wait cmtime_done 300) || return 1
		check "host b's cmtime exits 0 (got $rc)" test "$rc" = 0 || return 1
		n=$(grep -c ' listener=1 ' "$RCD_DBG/conns")
		check "30 passive ends (got $n)" test "$n" = 30 || return 1
		wait_for 60 h_kind_cmp -eq TIMEWAIT_EXIT 30 ||
			fail "timewait exits: $(count_events TIMEWAIT_EXIT) of 30" || return 1
		check "30 DREQs received" test "$(count_events DREQ_RECEIVED)" = 30 || return 1
		check "30 DREPs sent" \
			test "$(grep -c ' DREP_SENT status=0 ' "$RCD_DBG/events")" = 30 || return 1
		check "ids freed" test "$(rcd_stat cm_ids_live)" = 1 || return 1
		log "cmtime -c 30 from host b: 30 connected and disconnected; $(h_stats_line)"
		# The module as client of host b's cmtime -b.
		peer_wait cmtime_listening 120 >/dev/null || return 1
		for ((n = 2; n <= 11; n++)); do
			ctl connect $n rxe0 "$RCD_MY_IP" "$RCD_PEER_IP" tcp:7472 \
				cma_port=$((5000 + n)) || return 1
		done
		h_wait_events 60 ESTABLISHED 2 11 10 || return 1
		ctl disconnect 2-11 text:from-module || return 1
		h_wait_events 60 DREP_RECEIVED 2 11 10 || return 1
		exactly_once DISCONNECTED 2 11 || return 1
		h_wait_events 60 TIMEWAIT_EXIT 2 11 10 || return 1
		check "ids freed" test "$(rcd_stat cm_ids_live)" = 1 || return 1
		log "the module as client of cmtime -b on host b: 10 connected, disconnected," \
			"DREPs received; rxe0 DREQ retries $(cm_counter rxe0 cm_tx_retries dreq)"
		peer_put module_done
	else
		peer_sync listening || return 1
		timeout 240 cmtime -s "$RCD_PEER_IP" -p 7471 -c 30 > /run/cmtime.out 2>&1
		rc=$?
		grep -E 'step|connect|disconnect' /run/cmtime.out | sed 's/^/# cmtime -c 30: /'
		peer_put cmtime_done $rc
		check "cmtime exits 0 (got $rc)" test $rc = 0 || return 1
		timeout 240 cmtime -b "$RCD_MY_IP" -p 7472 -c 10 >/dev/null 2>&1 & pid=$!
		wait_for 60 cma_listening 7472 || fail "cmtime -b not listening" || return 1
		peer_put cmtime_listening
		peer_wait module_done 240 >/dev/null; rc=$?
		# cmtime's server waits for more than these connections: stop it.
		kill $pid 2>/dev/null; wait $pid 2>/dev/null
		return $rc
	fi
}

# The CM timing of the lossy test: packet life time 2^14 x 4.096 us (64 ms
# as the CM rounds it) and response timeout 2^17 x 4.096 us (512 ms), so
# that a DREQ is retried every 640 ms (twice the one plus the other), 15
# times. The response timeout is also what host a's passive ends wait for
# each RTU, 16 times: with t_faults.sh's 64 ms (resp=14) that was about
# 1 s, and in a CI run five of 20 passive ends on a one-vCPU guest
# ran out of it before host b's RTUs came ("15 of 20 ESTABLISHED") while
# host b had all 20 established.
HOSTS_FAST="lifetime=14 resp=17"

# pin_peer: the peer's MAC as a permanent neighbour entry, until cleanup
# (lib.sh) flushes it. For the lossy tests, which are about the CM's
# retries, not ARP: with 30% loss an address resolution whose 3 probes are
# all lost (2.7%) failed a connect with "No route to host", and either
# host may have to resolve the other (cleanup flushed both tables after
# the last test with a loss).
pin_peer() {
	: > /run/rcd-neigh-pinned
	ip neigh replace "$RCD_PEER_IP" lladdr "$(peer_mac)" dev "$RCD_NIC" nud permanent
}

# netem_loss PERCENT: this host's NIC drops PERCENT of what it sends.
netem_loss() {
	[ -d /sys/module/sch_netem ] || modprobe sch_netem || return 1
	tc qdisc replace dev "$RCD_NIC" root netem loss "$1%"
}

# 30% loss on host a's NIC while host b disconnects 20 connections to it at
# once: host a's DREPs are lost, host b's CM retries its DREQs, host a's
# sees them again and answers again; every DREQ is answered, each end sees
# its DREQ or DREP once and one DISCONNECTED, every id is freed on both.
hosts_loss_disconnect_20() {
	local p1=$((2 + PASSIVE_BASE)) p2=$((21 + PASSIVE_BASE)) v
	host_setup && pin_peer || return 1
	if [ "$RCD_HOST" = a ]; then
		ctl listen 1 rxe0 0x1000 auto_drep=text:bye || return 1
		peer_sync listening || return 1
		h_wait_events 120 ESTABLISHED $p1 $p2 20 ||
			fail "REPs sent $(cm_counter rxe0 cm_tx_msgs rep), retried" \
				"$(cm_counter rxe0 cm_tx_retries rep); connect errors" \
				"$(events_in CONNECT_ERROR $p1 $p2)" || return 1
		peer_wait established 120 >/dev/null || return 1
		netem_loss 30 || return 1
		peer_put lossy
		h_wait_events 300 DREQ_RECEIVED $p1 $p2 20 || return 1
		peer_wait dreps 300 >/dev/null || return 1
		h_wait_events 120 TIMEWAIT_EXIT $p1 $p2 20 || return 1
		tc qdisc del dev "$RCD_NIC" root
		log "host a (30% loss on its NIC): duplicate DREQs" \
			"$(cm_counter rxe0 cm_rx_duplicates dreq), DREPs sent" \
			"$(cm_counter rxe0 cm_tx_msgs drep) for 20 connections"
		exactly_once DREQ_RECEIVED $p1 $p2 && exactly_once DISCONNECTED $p1 $p2 || return 1
		check "ids freed" wait_for 30 stat_is cm_ids_live 1 || return 1
	else
		peer_sync listening || return 1
		connect_to_peer 2 21 $HOSTS_FAST retries=15 || return 1
		h_wait_events 120 ESTABLISHED 2 21 20 || return 1
		peer_put established
		peer_wait lossy 120 >/dev/null || return 1
		ctl dreq 2-21 text:lossy || return 1
		h_wait_events 300 DREP_RECEIVED 2 21 20 || return 1
		peer_put dreps
		h_wait_events 120 TIMEWAIT_EXIT 2 21 20 || return 1
		v=$(cm_counter rxe0 cm_tx_retries dreq)
		log "host b: 20 DREPs through host a's 30% loss; DREQ retries $v, DREQ_ERROR" \
			"$(events_in DREQ_ERROR 2 21)"
		check "the CM retried (a DREP lost)" test "$v" -ge 1 || return 1
		check "no DREQ timed out" test "$(events_in DREQ_ERROR 2 21)" = 0 || return 1
		exactly_once DREP_RECEIVED 2 21 && exactly_once DISCONNECTED 2 21 || return 1
		check "ids freed" wait_for 30 stat_is cm_ids_live 0 || return 1
	fi
	log "$(h_stats_line)"
}

# established_then_dreq FIRST LAST: sends each connection of FIRST..LAST
# its DREQ as soon as it is established (polled from conns), until all
# have one. conns is read whole first (mapfile: one read of one open):
# a read builtin seeks back after each line, and the file changes between
# its reads.
established_then_dreq() {
	local num rest line done_list=" " left=$(($2 - $1 + 1)) snap
	while [ $left -gt 0 ]; do
		mapfile -t snap < "$RCD_DBG/conns"
		for line in "${snap[@]}"; do
			num=${line%% *} rest=${line#"$num"}
			case $num in *[!0-9]* | "") continue ;; esac
			[ "$num" -ge "$1" ] && [ "$num" -le "$2" ] || continue
			case $rest in *" state=ESTABLISHED "*) ;; *) continue ;; esac
			case $done_list in *" $num "*) continue ;; esac
			ctl dreq "$num" text:early || return 1
			done_list="$done_list$num "
			left=$((left - 1))
		done
		[ $left -eq 0 ] || nap 0.1
	done
}

# Loss from before the handshake: 30% on host b's NIC, then 30 connections
# from b to a, each sent its DREQ as soon as it is established on b. Some
# RTUs are lost, and host a's CM waits 2.1 s before it sends the REP again
# (resp=19): a DREQ that arrives in that time finds the passive end still
# waiting for its RTU (REP_SENT). Such an end gets DREQ_RECEIVED without
# ever being ESTABLISHED; like every other it answers with its DREP, sees
# one DISCONNECTED and is freed. (Chance that none of 30 meets it: 0.1%.)
hosts_loss_before_handshake() {
	local p1=$((2 + PASSIVE_BASE)) p2=$((31 + PASSIVE_BASE)) e early=0
	host_setup && pin_peer || return 1
	if [ "$RCD_HOST" = a ]; then
		ctl listen 1 rxe0 0x1000 auto_drep=text:bye || return 1
		peer_sync listening || return 1
		h_wait_events 300 DREQ_RECEIVED $p1 $p2 30 || return 1
		peer_wait dreps 300 >/dev/null || return 1
		h_wait_events 120 TIMEWAIT_EXIT $p1 $p2 30 || return 1
		# (One awk for the 30: an event_count each cost 15 s under TCG.)
		early=$(awk -v a=$p1 -v b=$p2 '$2 == "ESTABLISHED" && $1 >= a && $1 <= b { c[$1]++ }
			END { for (e = a; e <= b; e++) if (c[e] != 1) n++; print n + 0 }' \
			"$RCD_DBG/events")
		log "host a: $early of 30 passive ends got their DREQ before any RTU; REPs resent" \
			"$(cm_counter rxe0 cm_tx_retries rep), RTUs received" \
			"$(cm_counter rxe0 cm_rx_msgs rtu), duplicate REQs" \
			"$(cm_counter rxe0 cm_rx_duplicates req)"
		check "some DREQ came before its RTU" test $early -ge 1 || return 1
		exactly_once DREQ_RECEIVED $p1 $p2 && exactly_once DISCONNECTED $p1 $p2 || return 1
		check "30 DREPs sent" test "$(events_in DREP_SENT $p1 $p2)" = 30 || return 1
		check "all freed" test "$(state_count FREED $p1 $p2)" = 30 || return 1
		check "ids freed" wait_for 30 stat_is cm_ids_live 1 || return 1
	else
		peer_sync listening || return 1
		netem_loss 30 || return 1
		connect_to_peer 2 31 lifetime=14 resp=19 retries=15 resolve_ms=10000 || return 1
		established_then_dreq 2 31 || return 1
		h_wait_events 300 DREP_RECEIVED 2 31 30 || return 1
		peer_put dreps
		h_wait_events 120 TIMEWAIT_EXIT 2 31 30 || return 1
		tc qdisc del dev "$RCD_NIC" root
		log "host b (30% loss on its NIC): REQ retries" \
			"$(cm_counter rxe0 cm_tx_retries req)," \
			"RTUs sent $(cm_counter rxe0 cm_tx_msgs rtu), DREQ retries" \
			"$(cm_counter rxe0 cm_tx_retries dreq)"
		exactly_once DREP_RECEIVED 2 31 && exactly_once DISCONNECTED 2 31 || return 1
		check "ids freed" wait_for 30 stat_is cm_ids_live 0 || return 1
	fi
	log "$(h_stats_line)"
}

# One host's device deleted under 50 live connections: host a deletes its
# rxe0 (`rdma link del`), having first cut its NIC's sending (100% loss) so
# that the DREQs 6.12 sends for ids destroyed while ESTABLISHED stay home.
# Host a's 50 ends get DISCONNECTED -ENODEV and are freed, and the module
# unloads; host b's DREQs then go unanswered: each of its 50 ends gets
# DREQ_ERROR, DISCONNECTED -ETIMEDOUT, timewait exit, and everything is
# freed (ids, QPs).
#
# Host b's connections use the short CM timing of the lossy tests
# (HOSTS_FAST, 15 retries), so that an unanswered DREQ is given up after
# seconds (16 tries of 640 ms, 10 s) instead of the minute and more of
# rdma_cm's timing (16 tries of 2 x 256 + 4,096 ms, 74 s). The timing only
# sets how long the CM waits for each try and how often it tries; the path
# is the same whatever the values: each DREQ is sent retries + 1 times (the
# test checks the count of retries), the MAD layer reports the last one
# timed out, the CM gives DREQ_ERROR and the end is freed at timewait exit.
# The same timing governs the handshake: host a's passive ends wait
# retries + 1 times the response timeout for their RTU (the REQ's:
# cm_req_handler), host b's REQs as long for a REP. With 4 tries of 256 ms
# (resp=16 retries=3) a CI run on one-vCPU 7.3 guests had 31 of 50
# passive ends and 45 of 50 active ones established after 120 s: 50
# handshakes at once took longer than that on host a. Now 8 s.
# And no DREP can come late: host a's device, and its ids, are gone.
HOSTS_LINK_DEL="$HOSTS_FAST retries=15"

# dis_statuses FIRST LAST: how many DISCONNECTED of FIRST..LAST had each
# status, " N status=S;" each (for the log; one awk, not five processes).
dis_statuses() {
	awk -v a=$1 -v b=$2 '$2 == "DISCONNECTED" && $1 >= a && $1 <= b { c[$3]++ }
		END { for (s in c) printf " %d %s;", c[s], s }' "$RCD_DBG/events"
}
hosts_link_del_50() {
	local p1=$((2 + PASSIVE_BASE)) p2=$((51 + PASSIVE_BASE)) t0=$SECONDS t qps v ends nb rc
	host_setup || return 1
	if [ "$RCD_HOST" = a ]; then
		ctl listen 1 rxe0 0x1000 auto_drep=- || return 1
		peer_sync listening || return 1
		h_wait_events 120 ESTABLISHED $p1 $p2 50 || return 1
		peer_wait established 120 >/dev/null || return 1
		log "host a: 50 passive ends established at $((SECONDS - t0)) s"
		netem_loss 100 || return 1
		t=$SECONDS
		check "rdma link del rxe0 returns" timeout 120 rdma link del rxe0 || return 1
		t=$((SECONDS - t))
		# Host b may start now; this host's checks run meanwhile.
		peer_put deleted
		ends=$(dis_statuses $p1 $p2)
		log "host a: rxe0 deleted under 50 connections in $t s; its ends: $ends"
		check "all 50 freed" test "$(state_count FREED $p1 $p2)" = 50 || return 1
		exactly_once DISCONNECTED $p1 $p2 || return 1
		check "every one -ENODEV" \
			test "$(status_count DISCONNECTED -19 $p1 $p2)" = 50 || return 1
		check "no id left" test "$(rcd_stat cm_ids_live)" = 0 || return 1
		log "$(h_stats_line)"
		t=$SECONDS
		check "the module unloads" timeout 120 rmmod rcd_harness || return 1
		log "host a: unloaded in $((SECONDS - t)) s; done at $((SECONDS - t0)) s"
		peer_wait freed 360 >/dev/null || return 1
		tc qdisc del dev "$RCD_NIC" root
	else
		qps=$(rdma_res qp)
		peer_sync listening || return 1
		connect_to_peer 2 51 $HOSTS_LINK_DEL || return 1
		h_wait_events 120 ESTABLISHED 2 51 50 || return 1
		log "host b: 50 connections established at $((SECONDS - t0)) s (REQ retries" \
			"$(cm_counter rxe0 cm_tx_retries req), REP duplicates" \
			"$(cm_counter rxe0 cm_rx_duplicates rep))"
		peer_put established
		peer_wait deleted 120 >/dev/null || return 1
		log "host b: host a's device deleted at $((SECONDS - t0)) s"
		# Host a answers no ARP any more (its NIC sends nothing): once
		# this host's entry for it went stale, the DREQs waited on its
		# resolution (measured 13 s with the entry REACHABLE, 18 s from
		# STALE, 34 to 42 s in full runs) where the CM's 16 tries of
		# 640 ms are 10 s. The test is about the CM's retries, not ARP:
		# host a's MAC is pinned so that every try goes out at once.
		ip neigh replace "$RCD_PEER_IP" lladdr "$(peer_mac)" dev "$RCD_NIC" \
			nud permanent || return 1
		t=$SECONDS nb=$(neigh_of "$RCD_PEER_IP")
		ctl disconnect 2-51 text:anyone
		rc=$?
		[ $rc = 0 ] && h_wait_events 240 DISCONNECTED 2 51 50 || rc=1
		ip neigh del "$RCD_PEER_IP" dev "$RCD_NIC"
		[ $rc = 0 ] || return 1
		v=$(cm_counter rxe0 cm_tx_retries dreq)
		ends=$(dis_statuses 2 51)
		log "host b: 50 DREQs to the deleted device; DISCONNECTED after" \
			"$((SECONDS - t)) s: $ends DREQ retries $v; host a's neighbour entry" \
			"before: '$nb', after: '$(neigh_of "$RCD_PEER_IP")'"
		check "50 DREQ_ERROR" test "$(events_in DREQ_ERROR 2 51)" = 50 || return 1
		check "every one -ETIMEDOUT" \
			test "$(status_count DISCONNECTED -110 2 51)" = 50 || return 1
		check "each DREQ tried 16 times (retries $v)" test "$v" = $((50 * 15)) || return 1
		exactly_once DISCONNECTED 2 51 || return 1
		h_wait_events 60 TIMEWAIT_EXIT 2 51 50 || return 1
		log "host b: 50 timewait exits at $((SECONDS - t0)) s"
		check "all freed" test "$(state_count FREED 2 51)" = 50 || return 1
		check "ids freed" wait_for 30 stat_is cm_ids_live 0 || return 1
		check "QPs freed ($(rdma_res qp), $qps before)" \
			wait_for 20 rdma_res_cmp -eq "$qps" qp || return 1
		peer_put freed
		log "$(h_stats_line); all done at $((SECONDS - t0)) s"
	fi
}
# Host b's bounds add up past the default 300 s (the DREQs' 240 s among
# them: see above); a run takes under a minute.
timeout_hosts_link_del_50=480

# wr_counts NUM: NUM's posted/completed/flushed/failed/dropped, one line.
wr_counts() {
	local kv out=
	h_conn_line "$1"
	for kv in ${H_CONN#* }; do
		case ${kv%%=*} in
		posted|completed|flushed|failed|dropped|rx_msgs|rx_bytes|tx_msgs) out+="$kv " ;;
		esac
	done
	echo "$out"
}

# Payloads across the hosts, then a disconnect with receives still posted:
# host b's connection 2 to host a's listener, 8 receives of 1024 bytes
# posted on each end before the handshake (recv=), 4 SENDs of 1024 bytes
# (the path MTU of rxe on the 1500-byte NIC) each way: what one host sent
# arrived on the other (bytes, messages, FNV-1a checksums compared across
# the hosts). Then 16 more receives on each end, and host b disconnects:
# its 20 receives still posted come back flushed; host a's end, told by the
# DREQ, disconnects too: its 20 flushed. On both hosts posted = completed +
# flushed, nothing failed or dropped, no buffer mapped (wr_bufs_mapped 0),
# one DISCONNECTED, ids freed at timewait exit; kmemleak_clean on both.
hosts_data_flush() {
	local n=2 p=$((2 + PASSIVE_BASE)) e sums
	host_setup || return 1
	if [ "$RCD_HOST" = a ]; then
		e=$p
		ctl listen 1 rxe0 0x1000 recv=8:1024 || return 1
		peer_sync listening || return 1
		wait_event 60 $e ESTABLISHED || return 1
	else
		e=$n
		peer_sync listening || return 1
		ctl connect $n rxe0 "$RCD_MY_IP" "$RCD_PEER_IP" 0x1000 recv=8:1024 || return 1
		wait_event 60 $e ESTABLISHED || return 1
	fi
	peer_sync established || return 1
	ctl post $e 0 4 size=1024 || return 1
	check "4 SENDs completed, 4 received" wait_for 30 polled_is $e completed 8 || return 1
	peer_sync exchanged || return 1
	check "4 x 1024 bytes from host $RCD_PEER" \
		test "$(conn_field $e rx_msgs)/$(conn_field $e rx_bytes)" = 4/4096 || return 1
	RCD_SYNC_VALUE="$(conn_field $e tx_sum) $(conn_field $e rx_sum)" \
		peer_sync sums || return 1
	read -r -a sums < "$RCD_HOSTS_DIR/$RCD_PEER.sums.v"
	check "what host $RCD_PEER sent arrived here (FNV-1a ${sums[0]})" \
		test "${sums[0]}" = "$(conn_field $e rx_sum)" || return 1
	check "what this host sent arrived there (FNV-1a ${sums[1]})" \
		test "${sums[1]}" = "$(conn_field $e tx_sum)" || return 1
	ctl post $e 16 0 size=1024 || return 1
	check "20 receives mapped" stat_is wr_bufs_mapped 20 || return 1
	peer_sync posted || return 1
	if [ "$RCD_HOST" = b ]; then
		ctl disconnect $e text:flush || return 1
	else
		wait_event 60 $e DISCONNECTED || return 1
		ctl disconnect $e || return 1
	fi
	check "20 receives flushed" wait_for 30 polled_is $e flushed 20 || return 1
	wait_event 60 $e TIMEWAIT_EXIT || return 1
	log "host $RCD_HOST's end $e: $(wr_counts $e)"
	balanced $e || return 1
	check "nothing mapped" wait_for 10 stat_is wr_bufs_mapped 0 || return 1
	check "one DISCONNECTED on $e" test "$(h_event_count $e DISCONNECTED)" = 1 || return 1
	check "ids freed" wait_for 30 \
		stat_is cm_ids_live $([ "$RCD_HOST" = a ] && echo 1 || echo 0) || return 1
	peer_sync done || return 1
	log "$(h_stats_line)"
}
