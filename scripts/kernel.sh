#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Unpack Debian's 6.12 kernel source into the cache, apply kernel/*.patch,
# configure it on top of allnoconfig and build bzImage plus the in-tree
# modules. Prints the tree's path on its last line.
#
# Two variants, each its own cached tree ($RCD_KERNEL, default debug):
#   debug  kernel/rust-cm-disconnect.config + kernel/debug.config: the
#          kernel's own checkers (KASAN, lockdep, kmemleak, ...). make check,
#          make check-intree and make demo use it.
#   plain  kernel/rust-cm-disconnect.config alone. make bench uses it: the
#          checkers would dominate what it measures.
#
# A tree is keyed on what goes into it: the linux-source package version,
# the variant's fragments, the toolchain and this script. A change of any of
# them gives a fresh tree (and the variant's old tree is deleted). A change
# of the patch alone is reverse-applied and rebuilt incrementally. Nothing
# changed: nothing is done.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/scripts/env.sh"

tarball=/usr/src/linux-source-6.12.tar.xz
[ -f "$tarball" ] || { echo "kernel: $tarball missing: run scripts/setup.sh" >&2; exit 1; }

variant=${RCD_KERNEL:-debug}
case $variant in
debug) fragments=("$here/kernel/rust-cm-disconnect.config" "$here/kernel/debug.config") ;;
plain) fragments=("$here/kernel/rust-cm-disconnect.config") ;;
*) echo "kernel: RCD_KERNEL=$variant: want debug or plain" >&2; exit 2 ;;
esac
patches=("$here"/kernel/*.patch)

base_key=$( {
	dpkg-query -W -f='${Version}\n' linux-source-6.12
	echo "$variant"; cat "${fragments[@]}" "$here/scripts/kernel.sh"
	"$RUSTC" --version; "$BINDGEN" --version; clang-19 --version | head -1
} | sha256sum | cut -c1-16)
patch_key=$(cat "${patches[@]}" | sha256sum | cut -c1-16)

KDIR=${KDIR:-$RCD_CACHE/linux-$variant-$base_key}
stamp=$KDIR/.rcd-stamp
log=$RCD_CACHE/kernel-build-$variant.log

kmake() { make -C "$KDIR" -s "${KMAKE_VARS[@]}" "$@"; }

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$base_key $patch_key" ] &&
	[ -f "$KDIR/arch/x86/boot/bzImage" ]; then
	echo "kernel: $variant up to date"
	echo "$KDIR"
	exit 0
fi

start=$(date +%s)
if [ ! -f "$KDIR/.rcd-unpacked" ]; then
	echo "kernel: unpacking $tarball into $KDIR"
	# Trees of this variant with other keys are stale (as are those from
	# before there were variants): drop them, they are 1.5-3 GiB each.
	find "$RCD_CACHE" -maxdepth 1 -type d ! -path "$KDIR" \
		\( -name "linux-$variant-*" -o -regex '.*/linux-[0-9a-f]*' \) \
		-exec rm -rf {} +
	rm -rf "$KDIR"
	mkdir -p "$KDIR"
	tar -xf "$tarball" -C "$KDIR" --strip-components=1
	touch "$KDIR/.rcd-unpacked"
fi

applied=$KDIR/.rcd-applied.patch
if [ -f "$applied" ] && ! cmp -s "$applied" <(cat "${patches[@]}"); then
	echo "kernel: patch changed, reverting the old one"
	patch -d "$KDIR" -p1 -R -s --no-backup-if-mismatch < "$applied"
	rm -f "$applied"
fi
if [ ! -f "$applied" ]; then
	echo "kernel: applying ${patches[*]##*/}"
	cat "${patches[@]}" | patch -d "$KDIR" -p1 -s --no-backup-if-mismatch
	cat "${patches[@]}" > "$applied"
fi

if [ ! -f "$KDIR/.config" ]; then
	echo "kernel: configuring $variant (allnoconfig + ${fragments[*]##*/})"
	cat "${fragments[@]}" > "$KDIR/.rcd-fragment"
	kmake allnoconfig KCONFIG_ALLCONFIG="$KDIR/.rcd-fragment"
	# Every line of the fragment must have taken: a silently dropped
	# option (a missing dependency) would only show up as a failed test.
	bad=0
	while IFS='=' read -r k v; do
		if [ "$v" = n ]; then
			grep -q "^$k=" "$KDIR/.config" && { echo "kernel: $k is not off" >&2; bad=1; }
		else
			grep -qx "$k=$v" "$KDIR/.config" || { echo "kernel: $k=$v did not take" >&2; bad=1; }
		fi
	done < <(grep -E '^CONFIG_' "$KDIR/.rcd-fragment")
	if [ $bad = 1 ]; then rm -f "$KDIR/.config"; exit 1; fi
	kmake rustavailable >/dev/null
fi

echo "kernel: building $variant bzImage and modules (log: $log)"
if ! kmake -j"$(nproc)" bzImage modules >"$log" 2>&1; then
	tail -40 "$log" >&2
	echo "kernel: build failed, full log in $log" >&2
	exit 1
fi
echo "$base_key $patch_key" > "$stamp"
echo "kernel: $variant built in $(( $(date +%s) - start )) s"
echo "$KDIR"
