#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# `make bench`: one guest run of tests/bench.sh (the module, the C baseline
# and cmtime, for N = 100 and 1000, the set repeated RCD_BENCH_REPS times),
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
	"RCD_BENCH_N='${RCD_BENCH_N:-100 1000}' RCD_BENCH_REPS='${RCD_BENCH_REPS:-5}' bash $here/tests/bench.sh" |
	tee "$out.log" | grep -v '^csv,' || true
{
	echo "rep,n,way,conns,p50_us,p99_us,max_us,teardown_ms,conns_per_s,slab_bytes_per_conn,module_bytes_per_endpoint"
	sed -n 's/^csv,//p' "$out.log"
} > "$out.csv"

python3 - "$out.csv" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
cols = ["conns", "p50_us", "p99_us", "max_us", "teardown_ms", "conns_per_s", "slab_bytes_per_conn", "module_bytes_per_endpoint"]
keys = []
for r in rows:
    if (r["n"], r["way"]) not in keys:
        keys.append((r["n"], r["way"]))
def med(n, way, col):
    v = [float(r[col]) for r in rows if r["n"] == n and r["way"] == way and r[col]]
    return statistics.median(v) if v else None
reps = sorted({r["rep"] for r in rows}, key=int)
print("\nmedians over %d repetition(s):" % len(reps))
print("%-6s %-7s %6s %9s %9s %9s %12s %10s %10s %8s" % ("N", "way", "conns", "p50 us", "p99 us", "max us", "teardown ms", "conns/s", "slab B/c", "mod B/ep"))
for n, way in keys:
    v = [med(n, way, c) for c in cols]
    f = lambda x, fmt: fmt % x if x is not None else "-"
    print("%-6s %-7s %6s %9s %9s %9s %12s %10s %10s %8s" % (n, way, f(v[0], "%d"), f(v[1], "%.1f"), f(v[2], "%.1f"), f(v[3], "%.1f"), f(v[4], "%.2f"), f(v[5], "%.1f"), f(v[6], "%d"), f(v[7], "%d")))
def ratio(n, a, b, col):
    out = []
    for rep in reps:
        x = [r for r in rows if r["rep"] == rep and r["n"] == n and r["way"] == a and r[col]]
        y = [r for r in rows if r["rep"] == rep and r["n"] == n and r["way"] == b and r[col]]
        if x and y and float(y[0][col]) > 0:
            out.append(float(x[0][col]) / float(y[0][col]))
    return out
def show(n, label, v, goal):
    if v:
        print("  N=%-5s %-24s %6.3f  [%.3f .. %.3f over %d]%s" % (n, label, statistics.median(v), min(v), max(v), len(v), goal))
print("\nratios, each repetition's side by side, median [range]:")
for n in sorted({r["n"] for r in rows}, key=int):
    show(n, "rust/c p50 round trip", ratio(n, "rust", "c", "p50_us"), "  (goal <= 1.05)")
    show(n, "rust/c teardown time", ratio(n, "rust", "c", "teardown_ms"), "")
    show(n, "cmtime/rust teardown", ratio(n, "cmtime", "rust", "teardown_ms"), "  (goal >= 2)")
PY

# The pictures, next to the CSV: the round trip's p50 and p99 per way
# against N (medians of the repetitions, their range as error bars), and
# the teardown time against N (log scales: a straight line of slope 1 is
# linear growth). Needs gnuplot (scripts/setup.sh installs gnuplot-nox).
python3 - "$out.csv" > "$out.dat" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
for way in ("rust", "c", "cmtime"):
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
plot for [i=0:1] '$out.dat' index i using 1:2:3:4 with yerrorlines title (i == 0 ? "rust p50" : "c p50"), \
     for [i=0:1] '$out.dat' index i using 1:5:6:7 with yerrorlines dashtype 2 title (i == 0 ? "rust p99" : "c p99")
set ylabel "teardown of N connections (ms)"
set title "teardown time against N"
plot for [i=0:2] '$out.dat' index i using 1:8:9:10 with yerrorlines title (i == 0 ? "rust" : i == 1 ? "c" : "cmtime disconnect")
unset multiplot
GP
	done
	echo "plots: $out.png $out.svg"
else
	echo "no gnuplot (scripts/setup.sh installs gnuplot-nox): no plots"
fi
echo
echo "csv: $out.csv"
