#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Unpack the kernel source ($KERNEL: 6.12, Debian bookworm's linux-source-6.12,
# or 7.3, linux-source-7.3 from trixie-backports, see scripts/env.sh) into the
# cache, apply its series ($KSERIES/*.patch: kernel/ or kernel/7.3/),
# configure it on top of allnoconfig and build bzImage plus the in-tree
# modules. Says what it does as it goes (the build: a progress line a
# minute); prints the tree's path on its last line.
#
# Two variants, each its own cached tree ($RCD_KERNEL, default debug):
#   debug  kernel/rust-cm-disconnect.config + kernel/debug.config: the
#          kernel's own checkers (KASAN, lockdep, kmemleak, ...). make check,
#          make check-intree and make demo use it.
#   plain  kernel/rust-cm-disconnect.config alone. make bench uses it: the
#          checkers would dominate what it measures.
# $KSERIES/overlay.config, if there is one, comes after those (what one
# kernel needs that the other's Kconfig does not have).
#
# RCD_KERNEL_OMIT=PREFIX leaves the series' patches whose names start with
# PREFIX out (space-separated prefixes), in a tree of its own (its variant
# name gets an "_omit<hash>" suffix): e.g. RCD_KERNEL_OMIT=0000-IB-cm-Fix
# builds the kernel without the CM's DREP leak fix, to see its test fail.
#
# A tree is keyed on what goes into it: the linux-source package version,
# the variant's fragments, the toolchain and this script. A change of any of
# them gives a fresh tree (and the variant's old tree of the same kernel is
# deleted; the other kernel's trees stay). A change of the patch alone is
# reverse-applied and rebuilt incrementally. Nothing changed: nothing is done.
# Trees: 6.12 $RCD_CACHE/linux-<variant>-<key>, 7.3 linux-7.3-<variant>-<key>.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/scripts/env.sh"

tarball=$KTARBALL
[ -f "$tarball" ] || { echo "kernel: $tarball missing: run scripts/setup.sh (KERNEL=$KERNEL)" >&2; exit 1; }
case $KERNEL in
6.12) src_version=$(dpkg-query -W -f='${Version}\n' linux-source-6.12) ;;
*) src_version=$(cat "${tarball%/usr/src/*}/VERSION") ;;
esac

variant=${RCD_KERNEL:-debug}
case $variant in
debug) fragments=("$here/kernel/rust-cm-disconnect.config" "$here/kernel/debug.config") ;;
plain) fragments=("$here/kernel/rust-cm-disconnect.config") ;;
*) echo "kernel: RCD_KERNEL=$variant: want debug or plain" >&2; exit 2 ;;
esac
[ -f "$KSERIES/overlay.config" ] && fragments+=("$KSERIES/overlay.config")
patches=()
for p in "$KSERIES"/*.patch; do
	for o in ${RCD_KERNEL_OMIT:-}; do
		case ${p##*/} in "$o"*) echo "kernel: leaving ${p##*/} out" >&2; continue 2 ;; esac
	done
	patches+=("$p")
done
flavor=$variant
[ -z "${RCD_KERNEL_OMIT:-}" ] ||
	flavor=${variant}_omit$(echo "$RCD_KERNEL_OMIT" | sha256sum | cut -c1-6)

key_of() { {
	echo "$src_version"
	echo "$1"; cat "${fragments[@]}" "$here/scripts/kernel.sh"
	"$RUSTC" --version; "$BINDGEN" --version; clang-19 --version | head -1
} | sha256sum | cut -c1-16; }
base_key=$(key_of "$flavor")
patch_key=$(cat "${patches[@]}" | sha256sum | cut -c1-16)

# 6.12's trees keep the names they had before there were two kernels.
tree_of() { case $KERNEL in 6.12) echo "linux-$1" ;; *) echo "linux-$KERNEL-$1" ;; esac; }
tree=$(tree_of "$flavor")
KDIR=${KDIR:-$RCD_CACHE/$tree-$base_key}
stamp=$KDIR/.rcd-stamp
log=$RCD_CACHE/kernel-build-${tree#linux-}.log

kmake() { make -C "$KDIR" -s "${KMAKE_VARS[@]}" "$@"; }

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$base_key $patch_key" ] &&
	[ -f "$KDIR/arch/x86/boot/bzImage" ]; then
	echo "kernel: $KERNEL $flavor up to date" >&2
	echo "$KDIR"
	exit 0
fi

start=$(date +%s)
if [ ! -f "$KDIR/.rcd-unpacked" ]; then
	# Trees of this kernel and variant with other keys are stale (as are
	# 6.12's from before there were variants): drop them, they are 1.5-3
	# GiB each. The key is hex, so "linux-debug-*" matches neither 7.3's
	# "linux-7.3-debug-*" nor "linux-debug_omit...-*", and the reverse.
	stale=(-name "$tree-*")
	[ "$KERNEL" != 6.12 ] || stale=(\( -name "$tree-*" -o -regex '.*/linux-[0-9a-f]*' \))
	find "$RCD_CACHE" -maxdepth 1 -type d ! -path "$KDIR" "${stale[@]}" \
		-print -exec rm -rf {} + | sed 's/^/kernel: removing stale tree /' >&2
	rm -rf "$KDIR"
	# A tree that leaves patches out starts as a copy of the built tree with
	# all of them, if there is one: the times stay (cp -a), and the
	# commands in the .cmd files that name the tree's path (objtool's, the
	# Rust crates') are pointed at the copy (as scripts/intree.sh's
	# copy_tree does), so only what the patches change is rebuilt. Else
	# from the source.
	seed=$RCD_CACHE/$(tree_of "$variant")-$(key_of "$variant")
	if [ "$flavor" != "$variant" ] && [ -f "$seed/.rcd-stamp" ]; then
		echo "kernel: copying $seed into $KDIR" >&2
		cp -a "$seed" "$KDIR"
		find "$KDIR" -name '.*.cmd' -print0 | xargs -0 grep -lF "$seed/" |
			xargs -r sed -i "s|$seed/|$KDIR/|g"
	else
		echo "kernel: unpacking $tarball into $KDIR (about a minute)" >&2
		mkdir -p "$KDIR"
		tar -xf "$tarball" -C "$KDIR" --strip-components=1
		cold=1
	fi
	touch "$KDIR/.rcd-unpacked"
fi

# The files a patch touches.
touched() { sed -n 's/^+++ b\/\([^\t]*\).*/\1/p; s/^--- a\/\([^\t]*\).*/\1/p' "$@" | sort -u; }
applied=$KDIR/.rcd-applied.patch
if [ -f "$applied" ] && ! cmp -s "$applied" <(cat "${patches[@]}"); then
	echo "kernel: patch changed, reverting the old one" >&2
	# The time and contents of every file either patch touches: those the
	# change leaves as they were get their time back, so make rebuilds only
	# what the change changed.
	before=$(cd "$KDIR" && touched "$applied" "${patches[@]}" | while read -r f; do
		[ ! -f "$f" ] || echo "$(stat -c %.9Y "$f") $(sha256sum < "$f" | cut -c1-64) $f"
	done)
	bash "$here/scripts/revert-patch.sh" "$KDIR" "$applied"
	rm -f "$applied"
fi
if [ ! -f "$applied" ]; then
	echo "kernel: applying ${patches[*]##*/}" >&2
	cat "${patches[@]}" | patch -d "$KDIR" -p1 -s --no-backup-if-mismatch
	cat "${patches[@]}" > "$applied"
	[ -z "${before:-}" ] || while read -r t h f; do
		[ -f "$KDIR/$f" ] && [ "$(sha256sum < "$KDIR/$f" | cut -c1-64)" = "$h" ] &&
			touch -d "@$t" "$KDIR/$f" || true
	done <<<"$before"
fi

if [ ! -f "$KDIR/.config" ]; then
	echo "kernel: configuring $KERNEL $flavor (allnoconfig + ${fragments[*]##*/})" >&2
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

# Kbuild's own lines (not -s) go to the log: one line per object, which
# the progress line counts. A cold debug build is 7-30 minutes.
echo "kernel: building $KERNEL $flavor bzImage and modules in $KDIR (log: $log)" >&2
make -C "$KDIR" "${KMAKE_VARS[@]}" -j"$(nproc)" bzImage modules >"$log" 2>&1 &
build=$!
last=$(cat "$RCD_CACHE/kernel-build-${tree#linux-}.steps" 2>/dev/null || true)
t=0
while kill -0 "$build" 2>/dev/null; do
	sleep 5
	t=$((t + 5))
	[ $((t % 60)) = 0 ] && kill -0 "$build" 2>/dev/null || continue
	n=$(grep -c '^  [A-Z]' "$log" || true)
	echo "kernel: $KERNEL $flavor: $n build steps done${last:+ of about $last}, $((t / 60)) min (log: $log)" >&2
done
if ! wait $build; then
	tail -40 "$log" >&2
	echo "kernel: build failed, full log in $log" >&2
	exit 1
fi
[ -z "${cold:-}" ] || grep -c '^  [A-Z]' "$log" > "$RCD_CACHE/kernel-build-${tree#linux-}.steps" || true
echo "$base_key $patch_key" > "$stamp"
echo "kernel: $KERNEL $flavor built in $(( $(date +%s) - start )) s" >&2
echo "$KDIR"
