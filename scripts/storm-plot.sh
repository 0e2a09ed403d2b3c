#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# storm-plot.sh LOG [OUT]: the storm's connections over time for both
# servers, from the timeline that storm_cmtime_vs_rdma_cm (tests/t_safety.sh)
# prints every 10 s in a make check/stress log: RTUs received (connections
# established, and those for ends already gone), the module's established
# passive ends, and REQ/REP retransmissions since each server's run began,
# cmtime -b against the module, every storm in LOG in one panel. Written as
# OUT.png and OUT.svg (OUT defaults to LOG without its extension, plus
# -storm), the data as OUT.dat. Needs gnuplot (scripts/setup.sh installs
# gnuplot-nox).
set -euo pipefail
log=$1
out=${2:-${log%.*}-storm}
command -v gnuplot >/dev/null || { echo "storm-plot: no gnuplot (scripts/setup.sh)" >&2; exit 1; }

# One block per (size, server): t, RTUs received (not duplicates), REQ
# retries, REP retries, each since the block's first sample, and the
# module's established ends; blocks separated by two blank lines
# (gnuplot's index), titled in a comment.
awk '
	/^# test: storm/ { test = ($3 ~ /big/) ? "big storm" : "storm" }
	/^# before cmtime -b:/ { phase = "cmtime -b"; first = 1 }
	/^# after cmtime -b:/ { phase = "module"; first = 1 }
	/^# cmtime -c [0-9]+ against/ { n = $4; phase = "" }
	/^#   timeline: / && phase != "" {
		t = substr($3, 3)
		# req/tx/retries/rx/dup, rep/..., rtu/...
		split($4, req, "/"); split($5, rep, "/"); split($6, rtu, "/")
		if (first) {
			if (blocks++) printf "\n\n"
			printf "# %s %s\n", test, phase
			t0 = t; rtu0 = rtu[4] - rtu[5]; rq0 = req[3]; rp0 = rep[3]; first = 0
		}
		est = "NaN"
		for (i = 7; i <= NF; i++)
			if ($i ~ /^established=/ && phase == "module") est = substr($i, 13)
		print t - t0, (rtu[4] - rtu[5]) - rtu0, req[3] - rq0, rep[3] - rp0, est
	}
' "$log" > "$out.dat"
blocks=$(grep -c '^# ' "$out.dat" || true)
[ "$blocks" -gt 0 ] || { echo "storm-plot: no storm timeline in $log" >&2; exit 1; }

# The blocks' titles, in order, for the legend.
mapfile -t titles < <(sed -n 's/^# //p' "$out.dat")
plot=""
for i in "${!titles[@]}"; do
	t=${titles[$i]}
	plot+="'$out.dat' index $i using 1:2 with linespoints title '${t#* }: RTUs received', "
	plot+="'$out.dat' index $i using 1:(\$3 + \$4) axes x1y2 with lines dashtype 2 title '${t#* }: REQ+REP retries (right)', "
	[ "${t#* }" != module ] ||
		plot+="'$out.dat' index $i using 1:5 with linespoints title '${t#* }: established (its stats)', "
done
for term in "pngcairo size 1000,600" "svg size 1000,600"; do
	ext=${term%% *}; ext=${ext%cairo}
	gnuplot <<EOF
set terminal $term
set output '$out.$ext'
set title "cmtime storm: connections established over time, against cmtime -b and the module"
set xlabel "seconds since cmtime began"
set ylabel "RTUs received, connections"
set y2label "REQ + REP retransmissions"
set ytics nomirror
set y2tics
set key left top
set grid
plot ${plot%, }
EOF
done
echo "storm-plot: $out.png $out.svg ($blocks runs)"
