#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Print the new kernel files of a series' tree/ as one patch of creations, in
# the order the kernel patches name them:
#   scripts/kernel-patch.sh [SERIES_DIR]
# SERIES_DIR is kernel/ (6.12, the default) or kernel/7.3/ (7.3). The files
# named by either series are taken from kernel/tree/, their one copy: written
# for 7.3, built on 6.12 through its backport patch (kernel/0000-rust-*).
# Each SERIES_DIR/NNNN-*.patch is one step of the series (its message, its
# changes to existing files) and names the whole new files it adds on a line
# "kernel/tree: FILE..." after its "---". The new files (rust/kernel/rdma/*.rs, rust/helpers/rdma.c) are kept
# as files so that they can be reviewed, edited and rebased as sources.
#
# env.sh writes this to kernel/new-files.generated.patch when kernel.sh
# sources it, so that kernel.sh's kernel/*.patch takes it in (and its patch
# key covers it: a change of a file rebuilds incrementally) while kernel.sh's
# own text, which keys the trees, stays as it is. scripts/intree.sh turns
# the same steps into a git-format-patch series.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
series=${1:-$here/kernel}

for p in "$series"/[0-9]*.patch; do
	for f in $(sed -n 's/^kernel\/tree: //p' "$p"); do
		src=$here/kernel/tree/$f
		[ -f "$src" ] ||
			{ echo "kernel-patch: ${p##*/} names $f, not in kernel/tree" >&2; exit 1; }
		diff -u --label /dev/null --label "b/$f" /dev/null "$src" || [ $? = 1 ]
	done
done
