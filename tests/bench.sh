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
# Each repetition measures every way over at least RCD_BENCH_MIN_RT round
# trips (default 1,000): N = 100 is ten rounds of 100 connections, the
# ways taking turns round by round (rust, c, cmtime, then c, cmtime, rust,
# ...). One round of 100 lasts a few milliseconds, as long as one of the
# host's scheduling hiccups: a single round per repetition gave rust/c
# ratios from 0.53 to 1.37 (issue 24). The round trips of a repetition's
# rounds are pooled for its percentiles; its teardown time and cmtime's
# disconnect step are the median of its rounds'.
RCD_TOP=$(cd "$(dirname "$0")/.." && pwd)
. "$RCD_TOP/tests/lib.sh"
mount | grep -q ' /sys/kernel/debug ' || mount -t debugfs none /sys/kernel/debug
CBASE=$RCD_TOP/tests/modules/rcd_cbase.ko
set -u

stat_ge() { [ "$(rcd_stat "$1")" -ge "$2" ]; }

slab_kb() { awk '/^Slab:/ {print $2}' /proc/meminfo; }

# stats: conns (per round), p50, p99, max (us), teardown (ms, the median
# of the rounds') and conns/s from "round t_dreq t_drep" lines.
stats() {
	python3 -c '
import statistics, sys
rows = [tuple(map(int, l.split())) for l in sys.stdin if l.strip()]
rtt = sorted((b - a) / 1000 for r, a, b in rows)
n = len(rtt)
q = lambda p: rtt[min(n - 1, int(p * n))]
rounds = sorted({r for r, a, b in rows})
spans = [(max(b for r, a, b in rows if r == k) - min(a for r, a, b in rows if r == k)) / 1e6 for k in rounds]
span = statistics.median(spans)
per = n / len(rounds)
print("%d,%.1f,%.1f,%.1f,%.2f,%.1f" % (per, q(0.50), q(0.99), rtt[-1], span, per / (span / 1000)))
'
}

# bench_WAY N ROUND: one round of N connections; appends "ROUND t_dreq
# t_drep" lines to $RAW/WAY (cmtime: "ROUND disconnect_ms"), and the
# memory figures to $RAW/WAY.mem.
bench_rust() {
	local n=$1 round=$2 i s0 s1
	rcd_load && ctl listen 1 rxe0 0x1000 || return 1
	s0=$(slab_kb)
	for ((i = 1; i <= n; i++)); do
		echo "connect $((10 + i)) rxe0 10.77.0.1 10.77.0.1 0x1000 auto_drep=-" > "$RCD_DBG/ctl" || return 1
	done
	# Wait on the counters, not on `events`: formatting every event takes
	# the endpoints' locks, which the callbacks being measured need.
	wait_for 600 stat_ge established $((2 * n)) || { echo "# rust: not all established"; return 1; }
	s1=$(slab_kb)
	echo "dreq $((11 + PASSIVE_BASE))-$((10 + n + PASSIVE_BASE))" > "$RCD_DBG/ctl" || { echo "# rust: dreq refused"; return 1; }
	wait_for 600 stat_ge drep_received $n || { echo "# rust: DREPs missing"; return 1; }
	local r
	awk -v r="$round" '$2 == "DREQ_SENT" || $2 == "DREP_RECEIVED" { for (i = 3; i <= NF; i++) if ($i ~ /^t=/) t[$1, $2] = substr($i, 3) }
		END { for (k in t) { split(k, p, SUBSEP); if (p[2] == "DREQ_SENT" && ((p[1], "DREP_RECEIVED") in t)) print r, t[k], t[p[1], "DREP_RECEIVED"] } }' "$RCD_DBG/events" >> "$RAW/rust"
	echo "$(( (s1 - s0) * 1024 / n )),$(rcd_stat endpoint_bytes_avg)" > "$RAW/rust.mem"
	[ "$REP.$round" != 1.1 ] || {
		echo "# harness bytes per endpoint: endpoint_fixed_bytes $(rcd_stat endpoint_fixed_bytes), event_bytes $(rcd_stat event_bytes)"
		# The product allocates nothing per connection (each call acts
		# on its caller's id and QP, its buffers on the stack): all
		# it holds is its module image.
		echo "# product bytes per connection: 0 (no state); its module: $(awk '$1 == "rust_cm_disconnect" { print $2 }' /proc/modules) bytes"
	}
	rcd_unload
}

bench_c() {
	local n=$1 round=$2 i
	rcd_load && insmod "$CBASE" dev=rxe0 service=0x2000 || return 1
	for ((i = 1; i <= n; i++)); do
		echo "connect $i rxe0 10.77.0.1 10.77.0.1 0x2000 auto_drep=-" > "$RCD_DBG/ctl" || return 1
	done
	wait_for 600 sh -c "head -1 /sys/kernel/debug/rcd_cbase/lat | grep -q 'established $n '" || { echo "# c: not all established"; return 1; }
	# The same polling load as for rust: the module's counters.
	wait_for 600 stat_ge established $n || return 1
	echo go > /sys/kernel/debug/rcd_cbase/ctl
	wait_for 600 sh -c "head -1 /sys/kernel/debug/rcd_cbase/lat | grep -q 'done $n\$'" || { echo "# c: DREPs missing"; return 1; }
	tail -n +2 /sys/kernel/debug/rcd_cbase/lat | sed "s/^/$round /" >> "$RAW/c"
	rmmod rcd_cbase; rcd_unload
}

bench_cmtime() {
	local n=$1 round=$2 out
	rcd_load && ctl listen 1 rxe0 tcp:7471 cma=1 auto_drep=- || return 1
	out=$(timeout 600 cmtime -s 10.77.0.1 -p 7471 -c "$n" 2>&1) || { echo "# cmtime failed: $out"; return 1; }
	# "disconnect   :   total_ms   max_ms   min_us   us/conn"
	echo "$out" | awk -v r="$round" '$1 == "disconnect" { print r, $3, $4 * 1000 }' >> "$RAW/cmtime"
	rcd_unload
}

RAW=$(mktemp -d)
ways=(rust c cmtime)
rxe_add rxe0 v0 || exit 1
for ((REP = 1; REP <= ${RCD_BENCH_REPS:-5}; REP++)); do
	for n in ${RCD_BENCH_N:-100 1000}; do
		rounds=$(( (${RCD_BENCH_MIN_RT:-1000} + n - 1) / n ))
		rm -f "$RAW"/*
		for ((round = 1; round <= rounds; round++)); do
			# Each round another way first.
			for ((w = 0; w < 3; w++)); do
				way=${ways[(w + round + REP) % 3]}
				"bench_$way" "$n" "$round" || echo "# bench $way $n failed (rep $REP, round $round)"
				rmmod rcd_cbase >/dev/null 2>&1
				cleanup >/dev/null 2>&1; rxe_add rxe0 v0 >/dev/null 2>&1
			done
		done
		[ ! -s "$RAW/rust" ] ||
			echo "csv,$REP,$n,rust,$(stats < "$RAW/rust"),$(cat "$RAW/rust.mem" 2>/dev/null || echo ,)"
		[ ! -s "$RAW/c" ] || echo "csv,$REP,$n,c,$(stats < "$RAW/c"),,"
		# cmtime: the median of the rounds' disconnect steps.
		[ ! -s "$RAW/cmtime" ] || python3 -c '
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
total = statistics.median(float(r[1]) for r in rows)
mx = statistics.median(float(r[2]) for r in rows)
n = int(sys.argv[3])
print("csv,%s,%d,cmtime,%d,,,%.1f,%.2f,%.1f,," % (sys.argv[2], n, n, mx, total, n / (total / 1000)))
' "$RAW/cmtime" "$REP" "$n"
		# Each round's own rust/c ratio of the p50s: what one repetition
		# of a single round measured (before the rounds).
		[ ! -s "$RAW/rust" ] || [ ! -s "$RAW/c" ] || python3 -c '
import sys
def p50(f, k):
    v = sorted(int(b) - int(a) for r, a, b in (l.split() for l in open(f) if l.strip()) if r == k)
    return v[len(v) // 2] if v else None
ks = sorted({l.split()[0] for l in open(sys.argv[1]) if l.strip()}, key=int)
q = [(k, p50(sys.argv[1], k), p50(sys.argv[2], k)) for k in ks]
r = ["%.3f" % (a / b) for k, a, b in q if a and b]
print("# rep %s, N=%s: %d round(s); each round'"'"'s rust/c p50 ratio: %s" % (sys.argv[3], sys.argv[4], len(ks), " ".join(r)))
' "$RAW/rust" "$RAW/c" "$REP" "$n"
	done
done
rm -rf "$RAW"
dmesg | grep -E 'BUG:|WARNING:|Oops' && echo "# dmesg has warnings"
rmmod rcd_cbase >/dev/null 2>&1
cleanup >/dev/null 2>&1
exit 0
