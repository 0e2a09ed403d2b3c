#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Undo a concatenation of patches in a tree, its last file diff first:
#   scripts/revert-patch.sh TREE PATCH
# patch -R reads a concatenation in order, but two patches of a series may
# change neighbouring lines of one file (6.12's backport adds rcu.c to
# rust/helpers/helpers.c, the next patch rdma.c just after it): the later
# change is then in the earlier one's context, which matches again only
# once the later one is undone. (In order, the undo stopped half way and
# left the tree half reverted.)
set -euo pipefail
tree=$1 p=$2
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
# One file a diff, from its "--- a/..." (or "--- /dev/null") line on.
awk -v d="$d" '/^--- (a\/|\/dev\/null)/ { if (f) close(f); f = sprintf("%s/%05d", d, ++n) }
	f { print > f }' "$p"
for f in $(ls -r "$d"); do
	patch -d "$tree" -p1 -R -s --no-backup-if-mismatch < "$d/$f"
done
