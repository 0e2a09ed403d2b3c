# SPDX-License-Identifier: GPL-2.0
#
# Sourced by the scripts that boot a guest (demo, bench, tests/run.sh):
# install what is missing, build or reuse the cached kernel (KDIR, exported)
# and build the modules against it. Defines $here (the copy the modules are
# built in, below) and the env.sh variables.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$here/scripts/env.sh"
bash "$here/scripts/setup.sh" >/dev/null || exit 1
KDIR=${KDIR:-$(bash "$here/scripts/kernel.sh" | tail -n 1)} || exit 1
export KDIR
# The modules are built, and the run goes on, in a copy of the sources
# of the tree's own (RCD_CACHE/build-<tree>): each kernel tree keeps its
# objects, so a run on the other kernel (or make bench's plain kernel)
# neither starts from `make clean` nor touches this run's objects, and the
# two kernels' runs of make check go side by side (tests/check.sh). Only a
# file whose content differs is copied, and gets the time of the copy: a
# checkout's file older than the objects of another checkout's build is
# still rebuilt. A file deleted here stays there, unused.
src_top=$here
here=$RCD_CACHE/build-${KDIR##*/}
# The copies of trees that are gone (kernel.sh drops a tree whose key
# changed) go too.
for b in "$RCD_CACHE"/build-*; do
	if [ -d "$b" ] && [ "$b" != "$here" ] && [ ! -d "$RCD_CACHE/${b##*/build-}" ]; then
		rm -rf "$b"
	fi
done
stage=$(mktemp -d)
mkdir -p "$here"
tar -C "$src_top" -cf - --exclude=./.git --exclude='*.o' --exclude='*.ko' \
	--exclude='*.mod' --exclude='*.mod.c' --exclude='.*.cmd' --exclude='.*.d' \
	--exclude='*.rmeta' --exclude=modules.order --exclude=Module.symvers \
	--exclude=.rcd-kdir --exclude=./tests/sidr_flood --exclude=./tests/rcd_mod \
	--exclude=./tests/rcd_kmsg . |
	tar -C "$stage" -xf - &&
	(cd "$stage" && find . -type f) | while read -r f; do
		cmp -s "$stage/$f" "$here/$f" && continue
		mkdir -p "$(dirname "$here/$f")" && cp --preserve=mode "$stage/$f" "$here/$f" || exit 1
	done || { echo "copy of the sources to $here failed" >&2; rm -rf "$stage"; exit 1; }
# Sources the tree no longer has go too: a test file left here would still
# be sourced by the guests and run.
(cd "$here" && find . -type f \( -name '*.sh' -o -name '*.rs' -o -name '*.c' -o -name '*.h' \
	-o -name '*.py' \) ! -name '*.mod.c') | while read -r f; do
	[ -e "$stage/$f" ] || rm -f "$here/$f"
done
rm -rf "$stage"
echo "$KDIR" > "$here/.rcd-kdir"
bash "$here/scripts/build.sh" -s modules || { echo "module build failed" >&2; exit 1; }
# The suite's user-space helpers, built here: gcc in the guest costs
# about 25 s under TCG on the debug kernel (the guest runs the host's
# binaries, so the host's gcc and librdmacm are the guest's too).
f=$here/tests/sidr_flood
if [ ! -x "$f" ] || [ "$f.c" -nt "$f" ]; then
	gcc -O1 -Wall -o "$f" "$f.c" /usr/lib/x86_64-linux-gnu/librdmacm.so.1 ||
		{ echo "tests/sidr_flood.c: build failed" >&2; exit 1; }
fi
# rcd_mod and rcd_kmsg static: no dynamic loader to run at each start.
for f in "$here"/tests/rcd_mod "$here"/tests/rcd_kmsg; do
	if [ ! -x "$f" ] || [ "$f.c" -nt "$f" ]; then
		gcc -O2 -Wall -static -o "$f" "$f.c" ||
			{ echo "tests/${f##*/}.c: build failed" >&2; exit 1; }
	fi
done
