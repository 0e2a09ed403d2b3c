#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# `make bench`, inside the guest: for each N, the DREQ -> DREP round trip of
# N connections disconnected at once, three ways, in this one guest run:
#   rust   the module: its passive ends send the DREQs (`dreq` with all N),
#          times from its own event records (ktime_get)
#   c      tests/modules/rcd_cbase.ko: the same with raw ib_send_cm_dreq()
#          and a C handler
#   cmtime rdma-core's cmtime client against the module as server: its
#          `disconnect` step (librdmacm -> ucma -> rdma_cm -> ib_cm)
# The peer answering the DREQs is the same for rust and c: the module's
# active ends with auto_drep. The whole set runs RCD_BENCH_REPS times
# (default 5), the three ways interleaved, so that a slow moment of the
# host hits all three alike. Prints one CSV line per (rep, N, way) on
# stdout, prefixed with "csv,".
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

stat_ge() { [ "$(rcd_stat "$1")" -ge "$2" ]; }

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

bench_rust() {
	local n=$1 i s0 s1 k base rounds
	rounds=$(bench_rounds "$n")
	rcd_load && ctl listen 1 rxe0 0x1000 || return 1
	s0=$(slab_kb)
	for ((k = 0; k < rounds; k++)); do
		base=$((10 + k * n))
		for ((i = 1; i <= n; i++)); do
			echo "connect $((base + i)) rxe0 10.77.0.1 10.77.0.1 0x1000 auto_drep=-" > "$RCD_DBG/ctl" || return 1
		done
		# Wait on the counters, not on `events`: formatting every event takes
		# the endpoints' locks, which the callbacks being measured need.
		wait_for 600 stat_ge established $((2 * n * (k + 1))) || { echo "# rust: not all established"; return 1; }
		[ $k != 0 ] || s1=$(slab_kb)
		echo "dreq $((base + 1 + PASSIVE_BASE))-$((base + n + PASSIVE_BASE))" > "$RCD_DBG/ctl" || { echo "# rust: dreq refused"; return 1; }
		wait_for 600 stat_ge drep_received $((n * (k + 1))) || { echo "# rust: DREPs missing"; return 1; }
	done
	local r
	r=$(awk -v n="$n" -v pb="$PASSIVE_BASE" '$2 == "DREQ_SENT" || $2 == "DREP_RECEIVED" { for (i = 3; i <= NF; i++) if ($i ~ /^t=/) t[$1, $2] = substr($i, 3) }
		END { for (k in t) { split(k, p, SUBSEP); if (p[2] == "DREQ_SENT" && ((p[1], "DREP_RECEIVED") in t)) print t[k], t[p[1], "DREP_RECEIVED"], int((p[1] - pb - 11) / n) } }' "$RCD_DBG/events" | stats)
	echo "csv,$REP,$n,rust,$r,$(( (s1 - s0) * 1024 / n )),$(rcd_stat endpoint_bytes_avg)"
	[ "$REP" != 1 ] || echo "# module bytes: endpoint_fixed_bytes $(rcd_stat endpoint_fixed_bytes), event_bytes $(rcd_stat event_bytes)"
	rcd_unload
}

bench_c() {
	local n=$1 i k rounds lat=/tmp/bench-c-lat
	rounds=$(bench_rounds "$n")
	rcd_load || return 1
	: > $lat
	# A round per load of rcd_cbase, which sends its DREQs once.
	for ((k = 0; k < rounds; k++)); do
		insmod "$CBASE" dev=rxe0 service=0x2000 || return 1
		for ((i = 1; i <= n; i++)); do
			echo "connect $((k * n + i)) rxe0 10.77.0.1 10.77.0.1 0x2000 auto_drep=-" > "$RCD_DBG/ctl" || return 1
		done
		wait_for 600 sh -c "head -1 /sys/kernel/debug/rcd_cbase/lat | grep -q 'established $n '" || { echo "# c: not all established"; return 1; }
		# The same polling load as for rust: the module's counters.
		wait_for 600 stat_ge established $((n * (k + 1))) || return 1
		echo go > /sys/kernel/debug/rcd_cbase/ctl
		wait_for 600 sh -c "head -1 /sys/kernel/debug/rcd_cbase/lat | grep -q 'done $n\$'" || { echo "# c: DREPs missing"; return 1; }
		tail -n +2 /sys/kernel/debug/rcd_cbase/lat | sed "s/\$/ $k/" >> $lat
		rmmod rcd_cbase
	done
	echo "csv,$REP,$n,c,$(stats < $lat),,"
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

rxe_add rxe0 v0 || exit 1
for ((REP = 1; REP <= ${RCD_BENCH_REPS:-5}; REP++)); do
	for n in ${RCD_BENCH_N:-100 1000}; do
		for way in rust c cmtime; do
			"bench_$way" "$n" || echo "# bench $way $n failed (rep $REP)"
			rmmod rcd_cbase >/dev/null 2>&1
			cleanup >/dev/null 2>&1; rxe_add rxe0 v0 >/dev/null 2>&1
		done
	done
done
dmesg | grep -E 'BUG:|WARNING:|Oops' && echo "# dmesg has warnings"
rmmod rcd_cbase >/dev/null 2>&1
cleanup >/dev/null 2>&1
exit 0
