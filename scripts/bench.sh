#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# `make bench`: one guest run of tests/bench.sh (the module, the C baseline
# and cmtime, for N = 100 and 1000), printed as a table with the ratios and
# written as CSV to $RCD_CACHE/bench/. Absolute times under TCG mean little;
# the ratios, taken side by side in one run, are the result.
set -euo pipefail
# The plain kernel: KASAN and lockdep would be most of what is measured.
export RCD_KERNEL=plain
. "$(dirname "$0")/../scripts/prepare.sh"
mkdir -p "$RCD_CACHE/bench"
out=$RCD_CACHE/bench/bench-$(date +%Y%m%d-%H%M%S)
RCD_VM_MEM=${RCD_VM_MEM:-4G} bash "$here/scripts/vm.sh" \
	"RCD_BENCH_N='${RCD_BENCH_N:-100 1000}' bash $here/tests/bench.sh" | tee "$out.log" | grep -v '^csv,' || true
{
	echo "n,way,conns,p50_us,p99_us,max_us,teardown_ms,conns_per_s,slab_bytes_per_conn,module_bytes_per_endpoint"
	sed -n 's/^csv,//p' "$out.log"
} > "$out.csv"

python3 - "$out.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
by = {(r["n"], r["way"]): r for r in rows}
f = lambda v: v if v else "-"
print("\n%-6s %-7s %6s %9s %9s %9s %12s %10s %10s %8s" % ("N", "way", "conns", "p50 us", "p99 us", "max us", "teardown ms", "conns/s", "slab B/c", "mod B/ep"))
for r in rows:
    print("%-6s %-7s %6s %9s %9s %9s %12s %10s %10s %8s" % (r["n"], r["way"], r["conns"], f(r["p50_us"]), f(r["p99_us"]), f(r["max_us"]), f(r["teardown_ms"]), f(r["conns_per_s"]), f(r["slab_bytes_per_conn"]), f(r["module_bytes_per_endpoint"])))
print("\nratios (same guest run):")
for n in sorted({r["n"] for r in rows}, key=int):
    rs, c, cm = by.get((n, "rust")), by.get((n, "c")), by.get((n, "cmtime"))
    if rs and c and rs["p50_us"] and c["p50_us"]:
        print("  N=%s  rust/c p50 round trip   %.3f  (goal <= 1.05)" % (n, float(rs["p50_us"]) / float(c["p50_us"])))
        print("  N=%s  rust/c teardown time    %.3f" % (n, float(rs["teardown_ms"]) / float(c["teardown_ms"])))
    if rs and cm and cm["teardown_ms"]:
        print("  N=%s  cmtime/rust teardown    %.2f  (goal >= 2)" % (n, float(cm["teardown_ms"]) / float(rs["teardown_ms"])))
PY
echo
echo "csv: $out.csv"
