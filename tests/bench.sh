#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# `make bench`, inside the guest: for each N (RCD_BENCH_N, default 1, 100,
# 1,000 and 5,000), the DREQ -> DREP round trip of N connections
# disconnected at once, and the teardown (the first DREQ to the last DREP),
# four ways in this one guest run:
#   c       tests/modules/rcd_cbase.ko, a C consumer of the CM: raw
#           ib_send_cm_dreq() and a C handler, the floor for any consumer
#   product the same consumer, its DREQs through the product's
#           rcd_send_dreq(): what a consumer of rust_cm_disconnect.ko pays
#   harness the test harness's endpoints (rcd_harness.ko) sending the DREQs
#           (`dreq` with all N) through the product, times from its event
#           records (ktime_get): the harness's own cost, reported apart
#   cmtime  rdma-core's cmtime client against the harness's listener: its
#           `disconnect` step (librdmacm -> ucma -> rdma_cm -> ib_cm)
# The peer answering the DREQs is the same for all but cmtime: the
# harness's active ends with auto_drep. The whole set runs RCD_BENCH_REPS
# times (default 5), the ways interleaved (c and product round by round),
# so that a slow moment of the host hits them alike. Prints one CSV line
# per (rep, N, way) on stdout, prefixed with "csv,".
#
# Below 100 connections one round says little (N = 1: one round trip), so
# each repetition runs rounds (bench_rounds: enough for 100 round trips, at
# most RCD_BENCH_ROUNDS_MAX, default 20) within one load: the round trips
# of all rounds make the percentiles, the teardown is the median round's.
RCD_TOP=$(cd "$(dirname "$0")/.." && pwd)
. "$RCD_TOP/tests/lib.sh"
mount | grep -q ' /sys/kernel/debug ' || mount -t debugfs none /sys/kernel/debug
CBASE=$RCD_TOP/tests/modules/rcd_cbase.ko
set -u

slab_kb() { awk '/^Slab:/ {print $2}' /proc/meminfo; }

# bench_rounds N: the rounds of N connections per repetition (above).
bench_rounds() {
	local r=$(((100 + $1 - 1) / $1)) max=${RCD_BENCH_ROUNDS_MAX:-20}
	echo $((r > max ? max : r))
}

# stats: connections per round, p50, p99, max (us) and teardown (ms, the
# median round's) from "t_dreq t_drep [round]" lines.
stats() {
	python3 -c '
import statistics, sys
rows = [tuple(map(int, l.split())) for l in sys.stdin if l.strip()]
rtt = sorted((r[1] - r[0]) / 1000 for r in rows)
n = len(rtt)
q = lambda p: rtt[min(n - 1, int(p * n))]
rounds = {}
for r in rows:
    rounds.setdefault(r[2] if len(r) > 2 else 0, []).append(r)
span = statistics.median((max(r[1] for r in v) - min(r[0] for r in v)) / 1e6 for v in rounds.values())
per = n // len(rounds)
print("%d,%.1f,%.1f,%.1f,%.2f,%.1f" % (per, q(0.50), q(0.99), rtt[-1], span, per / (span / 1000)))
'
}

bench_harness() {
	local n=$1 i s0 s1 k base rounds
	rounds=$(bench_rounds "$n")
	# keep: every passive end's record (its DREQ_SENT and DREP_RECEIVED
	# times) until `events` is read, which ends freed meanwhile (timewait
	# exit) would otherwise lose beyond the default 1,024.
	rcd_load && ctl listen 1 rxe0 0x1000 keep=$((n * rounds)) || return 1
	s0=$(slab_kb)
	for ((k = 0; k < rounds; k++)); do
		base=$((10 + k * n))
		for ((i = 1; i <= n; i++)); do
			echo "connect $((base + i)) rxe0 10.77.0.1 10.77.0.1 0x1000 auto_drep=-" > "$RCD_DBG/ctl" || return 1
		done
		# Wait on the counters, not on `events`: formatting every event takes
		# the endpoints' locks, which the callbacks being measured need.
		wait_for 600 stat_ge established $((2 * n * (k + 1))) || { echo "# harness: not all established"; return 1; }
		[ $k != 0 ] || s1=$(slab_kb)
		echo "dreq $((base + 1 + PASSIVE_BASE))-$((base + n + PASSIVE_BASE))" > "$RCD_DBG/ctl" || { echo "# harness: dreq refused"; return 1; }
		wait_for 600 stat_ge drep_received $((n * (k + 1))) || { echo "# harness: DREPs missing"; return 1; }
	done
	local r
	r=$(awk -v n="$n" -v pb="$PASSIVE_BASE" '$2 == "DREQ_SENT" || $2 == "DREP_RECEIVED" { for (i = 3; i <= NF; i++) if ($i ~ /^t=/) t[$1, $2] = substr($i, 3) }
		END { for (k in t) { split(k, p, SUBSEP); if (p[2] == "DREQ_SENT" && ((p[1], "DREP_RECEIVED") in t)) print t[k], t[p[1], "DREP_RECEIVED"], int((p[1] - pb - 11) / n) } }' "$RCD_DBG/events" | stats)
	echo "csv,$REP,$n,harness,$r,$(( (s1 - s0) * 1024 / n )),$(rcd_stat endpoint_bytes_avg)"
	[ "$REP" != 1 ] || echo "# module bytes: endpoint_fixed_bytes $(rcd_stat endpoint_fixed_bytes), event_bytes $(rcd_stat event_bytes)"
	rcd_unload
}

# bench_c N: the C baseline and the product side by side, both as
# rcd_cbase (tests/modules/rcd_cbase.c) listening and sending the DREQs:
# "c" with raw ib_send_cm_dreq() (via=cm), "product" through the product's
# rcd_send_dreq() (via=rcd), the consumer and its state the same. Their
# rounds alternate, the order swapped every round and every repetition, so
# that a slow moment of the host hits both alike. (No slab figure: the
# product holds nothing per connection, which scripts/bench.sh shows from
# its imports; the slab's growth over a round is the CM's timewait ids and
# the caches' pages, thousands of bytes of noise a connection.)
# cbase_round VIA N: rcd_cbase loaded with via=VIA, N of the harness's
# active ends connected to it (numbered on from $est, which it advances),
# its DREQs sent, and all N DREPs back; rcd_cbase stays loaded.
cbase_round() {
	local via=$1 n=$2 i
	insmod "$CBASE" dev=rxe0 service=0x2000 via="$via" || return 1
	for ((i = 1; i <= n; i++)); do
		echo "connect $((est + i)) rxe0 10.77.0.1 10.77.0.1 0x2000 auto_drep=-" > "$RCD_DBG/ctl" || return 1
	done
	est=$((est + n))
	wait_for 600 sh -c "head -1 /sys/kernel/debug/rcd_cbase/lat | grep -q 'established $n '" || { echo "# $via: not all established"; return 1; }
	# The same polling load as for the harness: the module's counters.
	wait_for 600 stat_ge established $est || return 1
	echo go > /sys/kernel/debug/rcd_cbase/ctl
	wait_for 600 sh -c "head -1 /sys/kernel/debug/rcd_cbase/lat | grep -q 'done $n\$'" || { echo "# $via: DREPs missing"; return 1; }
}

bench_c() {
	local n=$1 k rounds via way
	rounds=$(bench_rounds "$n")
	rcd_load || return 1
	: > /tmp/bench-lat-cm; : > /tmp/bench-lat-rcd
	: > /tmp/bench-call-cm; : > /tmp/bench-call-rcd
	local est=0
	for ((k = 0; k < rounds; k++)); do
		for via in $( (((k + REP) % 2)) && echo rcd cm || echo cm rcd); do
			cbase_round "$via" "$n" || return 1
			tail -n +2 /sys/kernel/debug/rcd_cbase/lat | awk -v k=$k '{ print $1, $2, k }' >> /tmp/bench-lat-$via
			tail -n +2 /sys/kernel/debug/rcd_cbase/lat | awk '{ print $4 }' >> /tmp/bench-call-$via
			rmmod rcd_cbase
		done
	done
	for via in cm rcd; do
		way=$([ $via = cm ] && echo c || echo product)
		echo "csv,$REP,$n,$way,$(stats < /tmp/bench-lat-$via),,"
		# The calls of its own rounds (ns), as the burst's below.
		sort -n /tmp/bench-call-$via | awk -v r=$REP -v n=$n -v w=$way \
			'{ v[NR] = $1 } END { if (NR) { q = int(NR * 0.99) + 1; if (q > NR) q = NR
				printf "csv,%d,%d,%s_owncall,%d,%.3f,%.3f,%.3f,,,,\n", r, n, w, NR,
					v[int(NR / 2) + 1] / 1000, v[q] / 1000, v[NR] / 1000 } }'
	done
	# The calls themselves: one burst of at least 100 connections taking
	# turns (via=mix), each call timed: "c_call" and "product_call", their
	# median and p99 in the p50_us and p99_us columns; and the round trips
	# of the same burst, each way's half: "c_mix" and "product_mix".
	cbase_round mix $((n < 100 ? 100 : n)) || return 1
	tail -n +2 /sys/kernel/debug/rcd_cbase/lat | python3 -c '
import sys
calls, rtt = {0: [], 1: []}, {0: [], 1: []}
for l in sys.stdin:
    f = l.split()
    calls[int(f[2])].append(int(f[3]) / 1000)
    rtt[int(f[2])].append((int(f[1]) - int(f[0])) / 1000)
for w, name in ((0, "c"), (1, "product")):
    for what, v in (("call", sorted(calls[w])), ("mix", sorted(rtt[w]))):
        q = lambda p: v[min(len(v) - 1, int(p * len(v)))]
        print("csv,%s,%s,%s_%s,%d,%.3f,%.3f,%.3f,,,," % (sys.argv[1], sys.argv[2], name, what, len(v), q(0.5), q(0.99), v[-1]))
' "$REP" "$n"
	rmmod rcd_cbase
	rcd_unload
}

bench_cmtime() {
	local n=$1 out
	rcd_load && ctl listen 1 rxe0 tcp:7471 cma=1 auto_drep=- || return 1
	local k rounds all=
	rounds=$(bench_rounds "$n")
	# Its rounds: the median round's disconnect step.
	for ((k = 0; k < rounds; k++)); do
		out=$(timeout 600 cmtime -s 10.77.0.1 -p 7471 -c "$n" 2>&1) || { echo "# cmtime failed: $out"; return 1; }
		# "disconnect   :   total_ms   max_ms   min_us   us/conn"
		all+="$(echo "$out" | awk '$1 == "disconnect" { print $3, $4 }')"$'\n'
	done
	echo "$all" | sort -n | awk NF | awk -v rep="$REP" -v n="$n" -v r="$rounds" 'NR == int((r + 1) / 2) { printf "csv,%d,%d,cmtime,%d,,,%.1f,%.2f,%.1f,,\n", rep, n, n, $2 * 1000, $1, n / ($1 / 1000) }'
	rcd_unload
}

# storm_sampler N SERVER: every 50 ms until killed, a "stormt," line: ms
# since it began, and rxe0's CM counters as they stand (both ends are on
# rxe0): RTUs received (connections established), DREPs received
# (connections disconnected), REQ and REP retransmissions. Builtins only.
storm_sampler() {
	local c=/sys/class/infiniband/rxe0/ports/1 s0=${EPOCHREALTIME/./} rtu drep rq rp
	while :; do
		read -r rtu < $c/cm_rx_msgs/rtu; read -r drep < $c/cm_rx_msgs/drep
		read -r rq < $c/cm_tx_retries/req; read -r rp < $c/cm_tx_retries/rep
		echo "stormt,$REP,$1,$2,$(( (${EPOCHREALTIME/./} - s0) / 1000 )),$rtu,$drep,$rq,$rp"
		nap 0.05
	done
}

# bench_storm N: the storm of cmtime's REQs side by side, as t_safety.sh's
# storm_side_by_side runs it: rdma-core's cmtime client with N connections
# against rdma_cm's own server (cmtime -b) and against the harness's
# listener (tcp:7999, cma=1, auto_drep=-), both on rxe0 to itself, the
# one or the other first in turn by repetition. Per
# server a "storm," line: the wall time (ms), cmtime's connect and
# disconnect steps (ms), the REQ and REP retransmissions on rxe0 over its
# run, and the connections cmtime did not report failed. While cmtime runs,
# storm_sampler's "stormt," lines: the connections over time.
bench_storm() {
	local n=$1 srv pid cpid spid t0 out=/tmp/bench-storm r0 r1 ok
	retries() { echo "$(cm_counter rxe0 cm_tx_retries req) $(cm_counter rxe0 cm_tx_retries rep)"; }
	step() { awk -F: -v s="$2" '$1 ~ "^" s " *$" { split($2, a, " "); print int(a[1]) }' "$1"; }
	cm_base
	rcd_load && ctl listen 1 rxe0 tcp:7999 cma=1 auto_drep=- || return 1
	for srv in $( ((REP % 2)) && echo b module || echo module b); do
		if [ $srv = b ]; then
			timeout 600 cmtime -b 10.77.0.1 -p 7998 -c "$n" > $out.srv 2>&1 & pid=$!
			wait_for 60 cma_listening 7998 || { echo "# cmtime -b not listening"; return 1; }
		fi
		r0=$(retries)
		t0=$(date +%s%N)
		# To a file in the guest, printed after the run: no console
		# output while cmtime runs.
		storm_sampler "$n" $srv > $out.time & spid=$!
		timeout 600 cmtime -s 10.77.0.1 -p $([ $srv = b ] && echo 7998 || echo 7999) \
			-c "$n" > $out.cli 2>&1 & cpid=$!
		wait $cpid || echo "# storm: cmtime against $srv: exit $?"
		t0=$(( ($(date +%s%N) - t0) / 1000000 ))
		kill $spid; wait $spid 2>/dev/null; cat $out.time
		r1=$(retries)
		[ $srv != b ] || { kill $pid 2>/dev/null; wait $pid 2>/dev/null; }
		ok=$((n - $(grep -cE 'RDMA_CM_EVENT_(UNREACHABLE|REJECTED|CONNECT_ERROR)' $out.cli)))
		set -- $r0 $r1
		echo "storm,$REP,$n,$srv,$t0,$(step $out.cli connect),$(step $out.cli disconnect),$(($3 - $1)),$(($4 - $2)),$ok"
	done
	wait_for 120 stat_is cm_ids_live 1 || echo "# storm: the module's ends not all freed"
	rcd_unload
}

rxe_add rxe0 v0 || exit 1
# A warm-up, not counted: what the first connections of a guest allocate
# once (the caches' first slabs, rdma_cm's and the CM's tables) would
# otherwise fall on whichever way runs first.
REP=0
bench_c 100 > /dev/null || echo "# warm-up failed"
rmmod rcd_cbase >/dev/null 2>&1
cleanup >/dev/null 2>&1; rxe_add rxe0 v0 >/dev/null 2>&1
for ((REP = 1; REP <= ${RCD_BENCH_REPS:-5}; REP++)); do
	for n in ${RCD_BENCH_N:-1 100 1000 5000}; do
		for way in c harness cmtime; do
			"bench_$way" "$n" || echo "# bench $way $n failed (rep $REP)"
			rmmod rcd_cbase >/dev/null 2>&1
			cleanup >/dev/null 2>&1; rxe_add rxe0 v0 >/dev/null 2>&1
		done
	done
	for n in ${RCD_BENCH_STORM:-1000 2000}; do
		bench_storm "$n" || echo "# bench storm $n failed (rep $REP)"
		cleanup >/dev/null 2>&1; rxe_add rxe0 v0 >/dev/null 2>&1
	done
done
dmesg | grep -E 'BUG:|WARNING:|Oops' && echo "# dmesg has warnings"
rmmod rcd_cbase >/dev/null 2>&1
cleanup >/dev/null 2>&1
exit 0
