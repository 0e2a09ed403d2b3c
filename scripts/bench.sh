#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# `make bench`: one guest run of tests/bench.sh (the C baseline, the
# product, the harness and cmtime, for N = 1, 100, 1,000 and 5,000, the set
# repeated RCD_BENCH_REPS times),
# printed as a table of medians with the ratios and written as CSV to
# $RCD_CACHE/bench/, with its plots (PNG and SVG). Absolute times under
# TCG mean little; the ratios, taken side by side in one run, are the
# result. One repetition's ratio moves by
# a factor of two on a busy host, so each ratio is the median of the
# repetitions' ratios, printed with their range.
set -euo pipefail
# The plain kernel: KASAN and lockdep would be most of what is measured.
export RCD_KERNEL=plain
. "$(dirname "$0")/../scripts/prepare.sh"
mkdir -p "$RCD_CACHE/bench"
out=$RCD_CACHE/bench/bench-$(date +%Y%m%d-%H%M%S)
RCD_VM_MEM=${RCD_VM_MEM:-4G} bash "$here/scripts/vm.sh" \
	"RCD_BENCH_N='${RCD_BENCH_N:-1 100 1000 5000}' RCD_BENCH_STORM='${RCD_BENCH_STORM:-1000 2000}' RCD_BENCH_REPS='${RCD_BENCH_REPS:-5}' bash $here/tests/bench.sh" |
	tee "$out.log" | grep -vE '^(csv|storm|stormt),' || true
{
	echo "rep,n,way,conns,p50_us,p99_us,max_us,teardown_ms,conns_per_s,slab_bytes_per_conn,module_bytes_per_endpoint"
	sed -n 's/^csv,//p' "$out.log"
} > "$out.csv"

python3 - "$out.csv" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
cols = ["conns", "p50_us", "p99_us", "max_us", "teardown_ms", "conns_per_s", "slab_bytes_per_conn", "module_bytes_per_endpoint"]
order = ["c", "product", "harness", "cmtime"]
ns = sorted({r["n"] for r in rows}, key=int)
keys = [(n, w) for n in ns for w in order if any(r["n"] == n and r["way"] == w for r in rows)]
def med(n, way, col):
    v = [float(r[col]) for r in rows if r["n"] == n and r["way"] == way and r[col]]
    return statistics.median(v) if v else None
reps = sorted({r["rep"] for r in rows}, key=int)
print("\nmedians over %d repetition(s):" % len(reps))
print("%-6s %-8s %6s %9s %9s %9s %12s %10s %10s %8s" % ("N", "way", "conns", "p50 us", "p99 us", "max us", "teardown ms", "conns/s", "slab B/c", "mod B/ep"))
for n, way in keys:
    v = [med(n, way, c) for c in cols]
    f = lambda x, fmt: fmt % x if x is not None else "-"
    print("%-6s %-8s %6s %9s %9s %9s %12s %10s %10s %8s" % (n, way, f(v[0], "%d"), f(v[1], "%.1f"), f(v[2], "%.1f"), f(v[3], "%.1f"), f(v[4], "%.2f"), f(v[5], "%.1f"), f(v[6], "%d"), f(v[7], "%d")))
def per_rep(n, a, b, col, op):
    out = []
    for rep in reps:
        x = [r for r in rows if r["rep"] == rep and r["n"] == n and r["way"] == a and r[col]]
        y = [r for r in rows if r["rep"] == rep and r["n"] == n and r["way"] == b and r[col]]
        if x and y:
            v = op(float(x[0][col]), float(y[0][col]))
            if v is not None:
                out.append(v)
    return out
ratio = lambda x, y: x / y if y > 0 else None
# A goal is met when the whole range of the repetitions is on its side,
# "median only" when the median is and the range crosses it.
def verdict(v, le, goal):
    ok = (lambda x: x <= goal) if le else (lambda x: x >= goal)
    if all(ok(x) for x in v):
        return "met"
    return "median only" if ok(statistics.median(v)) else "NOT met"
def show(n, label, v, fmt, le=None, goal=None):
    if not v:
        return
    g = "" if goal is None else "  goal %s %s: %s" % ("<=" if le else ">=", goal, verdict(v, le, goal))
    print(("  N=%-5s %-28s " + fmt + "  [" + fmt + " .. " + fmt + " over %d]%s") % (n, label, statistics.median(v), min(v), max(v), len(v), g))
# A way that measured fewer round trips than it made connections lost
# some (a record pruned, a round trip not paired): said, not hidden in
# the medians.
for r in rows:
    if r["way"] in order and r["conns"] and int(r["conns"]) != int(r["n"]):
        print("warning: repetition %s, N=%s, %s: %s of %s round trips measured" % (r["rep"], r["n"], r["way"], r["conns"], r["n"]))
print("\nratios, each repetition's side by side, median [range]; a goal is met when the whole range is:")
for n in ns:
    show(n, "product/c p50 round trip", per_rep(n, "product", "c", "p50_us", ratio), "%6.3f", True, 1.05)
    show(n, "product/c teardown", per_rep(n, "product", "c", "teardown_ms", ratio), "%6.3f", True, 1.05)
    show(n, "cmtime/product teardown", per_rep(n, "cmtime", "product", "teardown_ms", ratio), "%6.3f", False, 2)
    # What raw ib_send_cm_dreq() reaches against cmtime: no consumer of
    # the CM beats it (at N = 1 one DREQ and DREP each, so below 2).
    show(n, "cmtime/c teardown, the floor", per_rep(n, "cmtime", "c", "teardown_ms", ratio), "%6.3f")
    show(n, "harness/c p50 round trip", per_rep(n, "harness", "c", "p50_us", ratio), "%6.3f")
# The product's only difference from c on this path is the DREQ call
# (rcd_send_dreq() around ib_send_cm_dreq()): timed call by call in bursts
# where the two take turns, so that the host's moods fall on both alike.
# What it adds to a teardown of N is at most N times the call's extra
# time: that bound, against c's teardown in the same repetition, is the
# product's teardown cost with the host's noise taken out.
print("\nthe same, the two taking turns in one burst of max(N, 100): the DREQ call itself, the round trip of each")
print("way's half, and the bound on the teardown (c's, plus N times the call's extra time), median [range]:")
for n in ns:
    c = per_rep(n, "c_call", "c_call", "p50_us", lambda x, y: x * 1000)
    p = per_rep(n, "product_call", "product_call", "p50_us", lambda x, y: x * 1000)
    if not c or not p:
        continue
    show(n, "c call ns", c, "%6.0f")
    show(n, "product call ns", p, "%6.0f")
    show(n, "c call ns, own rounds", per_rep(n, "c_owncall", "c_owncall", "p50_us", lambda x, y: x * 1000), "%6.0f")
    show(n, "product call ns, own rounds", per_rep(n, "product_owncall", "product_owncall", "p50_us", lambda x, y: x * 1000), "%6.0f")
    d = per_rep(n, "product_call", "c_call", "p50_us", lambda x, y: (x - y) * 1000)
    show(n, "product - c ns per call", d, "%6.0f")
    show(n, "product/c p50 round trip", per_rep(n, "product_mix", "c_mix", "p50_us", ratio), "%6.3f", True, 1.05)
    bound = []
    for rep in reps:
        pc = [r for r in rows if r["rep"] == rep and r["n"] == n and r["way"] == "product_call"]
        cc = [r for r in rows if r["rep"] == rep and r["n"] == n and r["way"] == "c_call"]
        tc = [r for r in rows if r["rep"] == rep and r["n"] == n and r["way"] == "c" and r["teardown_ms"]]
        if pc and cc and tc and float(tc[0]["teardown_ms"]) > 0:
            extra_ms = int(n) * max(0.0, float(pc[0]["p50_us"]) - float(cc[0]["p50_us"])) / 1000
            bound.append(1 + extra_ms / float(tc[0]["teardown_ms"]))
    show(n, "product/c teardown, bound", bound, "%6.3f", True, 1.05)
print("\nhow the teardown grows: us per connection (median), and against the N before it (1.00: linear)")
print("%-8s" % "way" + "".join("%16s" % ("N=" + n) for n in ns))
for way in order:
    line, prev = "%-8s" % way, None
    for n in ns:
        t = med(n, way, "teardown_ms")
        if t is None:
            line += "%16s" % "-"
            continue
        per = t * 1000 / int(n)
        line += "%16s" % ("%.1f" % per + (" (x%.2f)" % (per / prev) if prev else ""))
        prev = per
    print(line)
print("(c is the floor: raw ib_send_cm_dreq() from C, every DREQ and DREP through the CM's one workqueue)")
PY

# The storm side by side (tests/bench.sh: bench_storm): each server's
# medians, and the module's against cmtime -b repetition by repetition.
{
	echo "rep,n,server,wall_ms,connect_ms,disconnect_ms,req_retries,rep_retries,connected"
	sed -n 's/^storm,//p' "$out.log"
} > "$out-storm.csv"
python3 - "$out-storm.csv" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
if not rows:
    sys.exit(0)
reps = sorted({r["rep"] for r in rows}, key=int)
cols = ["wall_ms", "connect_ms", "disconnect_ms", "req_retries", "rep_retries", "connected"]
print("\nthe storm (cmtime -c N against rdma_cm's server, cmtime -b, and against the harness's listener), medians over %d repetition(s):" % len(reps))
print("%-6s %-8s %9s %11s %14s %12s %12s %10s" % ("N", "server", "wall ms", "connect ms", "disconnect ms", "REQ retries", "REP retries", "connected"))
ns = sorted({r["n"] for r in rows}, key=int)
def get(rep, n, srv, col):
    v = [r[col] for r in rows if r["rep"] == rep and r["n"] == n and r["server"] == srv and r[col] != ""]
    return float(v[0]) if v else None
for n in ns:
    for srv in ("b", "module"):
        v = []
        for c in cols:
            x = [get(rep, n, srv, c) for rep in reps]
            x = [y for y in x if y is not None]
            v.append("%d" % statistics.median(x) if x else "-")
        print("%-6s %-8s %9s %11s %14s %12s %12s %10s" % (n, "cmtime-b" if srv == "b" else "module", *v))
print("\nthe module against cmtime -b, each repetition's ratio, median [range]; goal: no slower, no more retransmissions:")
for n in ns:
    for c, label in (("wall_ms", "wall"), ("connect_ms", "connect step"), ("disconnect_ms", "disconnect step")):
        r = []
        for rep in reps:
            m, b = get(rep, n, "module", c), get(rep, n, "b", c)
            if m is not None and b:
                r.append(m / b)
        if r:
            ok = "met" if max(r) <= 1 else ("median only" if statistics.median(r) <= 1 else "NOT met")
            print("  N=%-5s module/b %-16s %6.3f  [%.3f .. %.3f over %d]  goal <= 1: %s" % (n, label, statistics.median(r), min(r), max(r), len(r), ok))
    for c, label in (("req_retries", "REQ retries"), ("rep_retries", "REP retries")):
        d = []
        for rep in reps:
            m, b = get(rep, n, "module", c), get(rep, n, "b", c)
            if m is not None and b is not None:
                d.append(m - b)
        if d:
            ok = "met" if max(d) <= 0 else "NOT met"
            print("  N=%-5s module-b %-16s %6d  [%d .. %d over %d]  goal <= 0: %s" % (n, label, statistics.median(d), min(d), max(d), len(d), ok))
PY

# The product's own memory per connection: what rust_cm_disconnect.ko
# could allocate is what it imports. It imports no allocator (kernel::rdma's
# state, send_dreq, send_drep and QpRef::to_error, which allocate nothing:
# the CM's own MAD is the same for c), so it holds no byte per connection
# beyond its caller's: 0, against the goal of 256. The harness's bytes per
# endpoint are its own column above (mod B/ep).
ko=$here/rust_cm_disconnect.ko
imports=$(nm -u -C "$ko" | sed 's/^ *U //')
allocs=$(grep -E 'alloc|kmem_cache|vmalloc|kvrealloc|get_free_page|kstrdup|kmemdup' <<<"$imports" || true)
echo
if [ -z "$imports" ]; then
	echo "product's own bytes/connection: not known (nm -u $ko printed nothing)"
elif [ -z "$allocs" ]; then
	echo "product's own bytes/connection: 0 (goal <= 256: met): $(basename "$ko") imports no allocator," \
		"only: $(paste -sd, <<<"$imports" | sed 's/,/, /g')"
else
	echo "product's own bytes/connection: not 0: $(basename "$ko") imports $(paste -sd, <<<"$allocs")"
fi

# The pictures, next to the CSV: the round trip's p50 and p99 per way
# against N (medians of the repetitions, their range as error bars), and
# the teardown time against N (log scales: a straight line of slope 1 is
# linear growth). Needs gnuplot (scripts/setup.sh installs gnuplot-nox).
python3 - "$out.csv" > "$out.dat" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
for way in ("c", "product", "harness", "cmtime"):
    print("# %s" % way)
    for n in sorted({r["n"] for r in rows}, key=int):
        vals = []
        for col in ("p50_us", "p99_us", "teardown_ms"):
            v = [float(r[col]) for r in rows if r["n"] == n and r["way"] == way and r[col]]
            vals += [statistics.median(v), min(v), max(v)] if v else ["NaN"] * 3
        print(n, *vals)
    print("\n")
PY
if command -v gnuplot >/dev/null; then
	for term in "pngcairo size 1200,500" "svg size 1200,500"; do
		ext=${term%% *}; ext=${ext%cairo}
		gnuplot <<GP
set terminal $term
set output '$out.$ext'
set multiplot layout 1,2 title "make bench $(basename "$out"): medians of the repetitions, bars their range"
set logscale xy
set grid
set key left top
set xlabel "connections (N)"
set ylabel "DREQ to DREP round trip (us)"
set title "round trip per way: p50 (solid), p99 (dashed)"
names = "c product harness cmtime"
plot for [i=0:2] '$out.dat' index i using 1:2:3:4 with yerrorlines linecolor i+1 title word(names, i+1)." p50", \
     for [i=0:2] '$out.dat' index i using 1:5:6:7 with yerrorlines linecolor i+1 dashtype 2 title word(names, i+1)." p99"
set ylabel "teardown of N connections (ms)"
set title "teardown time against N"
plot for [i=0:3] '$out.dat' index i using 1:8:9:10 with yerrorlines linecolor i+1 title (i == 3 ? "cmtime disconnect" : word(names, i+1))
unset multiplot
GP
	done
	echo "plots: $out.png $out.svg"
else
	echo "no gnuplot (scripts/setup.sh installs gnuplot-nox): no plots"
fi

# The storm over time (tests/bench.sh: storm_sampler), for each N the
# repetition with the median module/b wall ratio: connections established
# (RTUs received) and disconnected (DREPs received), and the REQ+REP
# retransmissions, for cmtime -b and the module, one panel per N.
{
	echo "rep,n,server,ms,rtu,drep,req_retries,rep_retries"
	sed -n 's/^stormt,//p' "$out.log"
} > "$out-storm-time.csv"
python3 - "$out-storm.csv" "$out-storm-time.csv" > "$out-storm.dat" <<'PY'
import csv, statistics, sys
runs = list(csv.DictReader(open(sys.argv[1])))
samples = list(csv.DictReader(open(sys.argv[2])))
for n in sorted({r["n"] for r in runs}, key=int):
    ratio = {}
    for rep in {r["rep"] for r in runs if r["n"] == n}:
        w = {r["server"]: float(r["wall_ms"]) for r in runs if r["n"] == n and r["rep"] == rep}
        if w.get("b") and "module" in w:
            ratio[rep] = w["module"] / w["b"]
    if not ratio:
        continue
    med = statistics.median_low(sorted(ratio.values()))
    rep = [k for k, v in ratio.items() if v == med][0]
    for srv in ("b", "module"):
        s = [r for r in samples if r["n"] == n and r["rep"] == rep and r["server"] == srv]
        if not s:
            continue
        print("# N=%s %s (repetition %s, module/b wall %.3f)" % (n, "cmtime -b" if srv == "b" else "module", rep, med))
        b = s[0]
        for r in s:
            print(int(r["ms"]) / 1000, *(int(r[c]) - int(b[c]) for c in ("rtu", "drep")),
                  sum(int(r[c]) - int(b[c]) for c in ("req_retries", "rep_retries")))
        print("\n")
PY
if command -v gnuplot >/dev/null && grep -q '^# N=' "$out-storm.dat"; then
	mapfile -t titles < <(sed -n 's/^# //p' "$out-storm.dat")
	ns=$(printf '%s\n' "${titles[@]}" | sed 's/^N=\([0-9]*\).*/\1/' | uniq)
	for term in "pngcairo size 1200,500" "svg size 1200,500"; do
		ext=${term%% *}; ext=${ext%cairo}
		{
			echo "set terminal $term"
			echo "set output '$out-storm.$ext'"
			echo "set multiplot layout 1,$(wc -w <<<"$ns") title \"make bench $(basename "$out"): cmtime -c N against cmtime -b and the module, connections over time\""
			echo "set grid; set key right bottom; set xlabel 'seconds since cmtime began'"
			echo "set ylabel 'connections'; set y2label 'REQ+REP retransmissions'; set ytics nomirror; set y2tics; set y2range [0:1<*]"
			for n in $ns; do
				plot=
				for i in "${!titles[@]}"; do
					[[ ${titles[$i]} == "N=$n "* ]] || continue
					t=${titles[$i]#N=$n }; t=${t%% (*}
					c=$([ "$t" = module ] && echo 2 || echo 1)
					plot+="'$out-storm.dat' index $i using 1:2 with lines linecolor $c linewidth 2 title '$t: established', "
					plot+="'$out-storm.dat' index $i using 1:3 with lines linecolor $c dashtype 2 title '$t: disconnected', "
					plot+="'$out-storm.dat' index $i using 1:4 axes x1y2 with lines linecolor $c dashtype 3 title '$t: retransmissions', "
				done
				echo "set title 'N = $n ($(grep -m1 "^# N=$n " "$out-storm.dat" | sed 's/.*(\(repetition [0-9]*\).*/\1/'))'"
				echo "plot ${plot%, }"
			done
			echo "unset multiplot"
		} | gnuplot 2>&1 | { grep -v 'empty y2 range' || true; } >&2
	done
	echo "storm plots: $out-storm.png $out-storm.svg"
fi
echo
echo "csv: $out.csv $out-storm.csv $out-storm-time.csv"
