#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# The in-tree build of the module:
#   scripts/intree.sh patch    write the change as a git-format-patch series
#                              against a fresh 6.12 tree to
#                              $RCD_CACHE/intree/series/: one patch per
#                              kernel/*.patch (with the new files it names
#                              from kernel/tree/), then the module
#                              (drivers/infiniband/ulp/rust_cm_disconnect/, its
#                              Kconfig and Makefile, the wiring in
#                              drivers/infiniband/{Kconfig,ulp/Makefile});
#                              check that it applies with `git am` to a fresh
#                              tree and run checkpatch --strict on each
#   scripts/intree.sh build    copy the cached kernel tree (once) to
#                              $RCD_CACHE/intree/linux, place the module in it,
#                              set CONFIG_RUST_CM_DISCONNECT=m and build; prints
#                              the tree and the .ko path last. The test tree
#                              itself is never changed.
# `make check-intree` runs the test suite against that in-tree .ko.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/scripts/env.sh"

rel=drivers/infiniband/ulp/rust_cm_disconnect
out=$RCD_CACHE/intree
mkdir -p "$out"

# place TREE: copy the module's sources into TREE/$rel and wire it in.
place() {
	local t=$1
	rm -rf "${t:?}/$rel"
	mkdir -p "$t/$rel/rust_cm_disconnect/conn" "$t/$rel/rust_cm_disconnect/shim" \
		"$t/$rel/include"
	cp "$here"/rust_cm_disconnect.rs "$here"/rust_cm_disconnect_exports.c \
		"$here"/rust_cm_disconnect_shim.h "$t/$rel/"
	cp "$here"/rust_cm_disconnect/*.rs "$t/$rel/rust_cm_disconnect/"
	cp "$here"/rust_cm_disconnect/conn/*.rs "$t/$rel/rust_cm_disconnect/conn/"
	cp "$here"/rust_cm_disconnect/shim/*.rs "$t/$rel/rust_cm_disconnect/shim/"
	cp "$here"/include/rust_cm_disconnect.h "$t/$rel/include/"
	# The same Kbuild as out of tree, less the test modules.
	sed '/RCD_TEST_MODULES\|test modules\|tests\/modules/d' "$here/Kbuild" |
		awk 'NF { while (blank-- > 0) print ""; blank = 0; print; next } { blank++ }' \
		> "$t/$rel/Makefile"
	cat > "$t/$rel/Kconfig" <<'KCONFIG'
# SPDX-License-Identifier: GPL-2.0
config RUST_CM_DISCONNECT
	tristate "Safe disconnect (DREQ/DREP) for IB CM connections, in Rust"
	depends on RUST_RDMA_ABSTRACTIONS && INFINIBAND_ADDR_TRANS
	help
	  Wraps the IB connection manager's struct ib_cm_id in safe Rust:
	  DREQ and DREP private data checked against their fields, DREQ/DREP
	  events with their private data, an rdma_disconnect() that reports
	  every failure, and the same checked paths for C kernel code
	  (rcd_send_dreq, rcd_send_drep, rcd_disconnect). Its debugfs
	  directory drives test connections over soft-RoCE.

	  If unsure, say N.
KCONFIG
	grep -q rust_cm_disconnect "$t/drivers/infiniband/Kconfig" ||
		sed -i '/^source "drivers\/infiniband\/ulp\/opa_vnic\/Kconfig"/a source "drivers/infiniband/ulp/rust_cm_disconnect/Kconfig"' \
			"$t/drivers/infiniband/Kconfig"
	grep -q rust_cm_disconnect "$t/drivers/infiniband/ulp/Makefile" ||
		echo 'obj-$(CONFIG_RUST_CM_DISCONNECT)	+= rust_cm_disconnect/' >> "$t/drivers/infiniband/ulp/Makefile"
}

# The module's step of the series: its message.
module_msg() {
	cat <<'MSG'
RDMA: add rust_cm_disconnect, a safe IB CM disconnect in Rust

ib_send_cm_dreq() takes its private data length as a u8: a caller's 300
silently becomes 44, and the DREQ field holds 220 bytes. ib_send_cm_drep()
leaks its copy of the data when the length is too long, and rdma_cm's
rdma_disconnect() swallows every DREQ/DREP failure.

rust_cm_disconnect wraps struct ib_cm_id in safe Rust so that none of this
can be gotten wrong, and exports the checked paths to C. It uses the
kernel crate's RDMA abstractions (kernel::rdma) for devices and verbs.

MSG
	echo "Signed-off-by: $ident"
}

case "${1:-}" in
patch)
	tmp=$(mktemp -d "$RCD_CACHE/intree/tmp.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	name=$(git -C "$here" config user.name || true)
	email=$(git -C "$here" config user.email || true)
	if [ -n "$name" ] && [ -n "$email" ]; then
		ident="$name <$email>"
	else
		ident="Rust CM Disconnect Developers <rcd@example.org>"
	fi
	git=(git -c user.name="${ident% <*}" -c user.email="$(echo "${ident##*<}" | tr -d '>')"
		-c commit.gpgsign=false -c core.abbrev=12)
	# What the series touches, from a fresh tree, as a git repository.
	subset="rust drivers/infiniband scripts/checkpatch.pl scripts/spelling.txt
		scripts/const_structs.checkpatch"
	fresh() {
		mkdir -p "$1"
		# shellcheck disable=SC2086
		tar -xf /usr/src/linux-source-6.12.tar.xz -C "$1" --strip-components=1 \
			$(for f in $subset; do echo "linux-source-6.12/$f"; done)
		(cd "$1" && "${git[@]}" init -q && "${git[@]}" add -A &&
			"${git[@]}" commit -q -m "linux-source-6.12 $(dpkg-query -W -f='${Version}' linux-source-6.12)")
	}
	fresh "$tmp/git"
	# One commit per kernel/*.patch: its changes to existing files, the new
	# files it names from kernel/tree/ (with those named so far: rdma.rs
	# declares only the modules already there), its message.
	placed=()
	for p in "$here"/kernel/[0-9]*.patch; do
		if grep -q '^+++ ' "$p"; then
			patch -d "$tmp/git" -p1 -s --no-backup-if-mismatch < "$p"
		fi
		# shellcheck disable=SC2207
		placed+=($(sed -n 's/^kernel\/tree: //p' "$p"))
		for f in "${placed[@]}"; do
			mkdir -p "$(dirname "$tmp/git/$f")"
			cp "$here/kernel/tree/$f" "$tmp/git/$f"
		done
		r=$tmp/git/rust/kernel/rdma.rs
		if [ -f "$r" ]; then
			for m in $(sed -n 's/^pub mod \([a-z_]*\);$/\1/p' "$r"); do
				[ -f "$tmp/git/rust/kernel/rdma/$m.rs" ] || sed -i "/^pub mod $m;\$/d" "$r"
			done
		fi
		git mailinfo "$tmp/msg" /dev/null < "$p" > "$tmp/info"
		{ sed -n 's/^Subject: //p' "$tmp/info"; echo; cat "$tmp/msg"; } > "$tmp/commit-msg"
		(cd "$tmp/git" && "${git[@]}" add -A &&
			"${git[@]}" commit -q --author="$(sed -n 's/^Author: //p' "$tmp/info") <$(sed -n 's/^Email: //p' "$tmp/info")>" \
				-F "$tmp/commit-msg")
	done
	# The module.
	place "$tmp/git"
	module_msg > "$tmp/commit-msg"
	(cd "$tmp/git" && "${git[@]}" add -A && "${git[@]}" commit -q --author="$ident" -F "$tmp/commit-msg")
	n=$(( $(ls "$here"/kernel/[0-9]*.patch | wc -l) + 1 ))
	rm -rf "$out/series"
	(cd "$tmp/git" && "${git[@]}" format-patch -q -o "$out/series" "HEAD~$n")
	# Does it apply to a fresh tree with git am?
	fresh "$tmp/check"
	(cd "$tmp/check" && "${git[@]}" am -q "$out"/series/*.patch)
	echo "intree: $out/series: $n patches, apply with git am to a fresh linux-source-6.12 tree"
	# checkpatch --strict, patch by patch (reported, not fatal).
	for s in "$out"/series/*.patch; do
		r=$(cd "$tmp/check" && perl scripts/checkpatch.pl --no-tree --strict --terse "$s" || true)
		echo "checkpatch ${s##*/}: $(echo "$r" | tail -n 1)"
		echo "$r" | grep -E '^[^ ]+: (ERROR|WARNING|CHECK):' | head -n 20 | sed 's/^/  /' || true
	done
	;;
build)
	src=$(bash "$here/scripts/kernel.sh" | tail -n 1)
	KDIR=$out/linux
	if [ "$(cat "$KDIR/.rcd-copied-from" 2>/dev/null)" != "$(cat "$src/.rcd-stamp") $src" ]; then
		echo "intree: copying $src to $KDIR" >&2
		rm -rf "$KDIR"
		cp -a "$src" "$KDIR"
		echo "$(cat "$src/.rcd-stamp") $src" > "$KDIR/.rcd-copied-from"
	fi
	place "$KDIR"
	"$KDIR/scripts/config" --file "$KDIR/.config" --module RUST_CM_DISCONNECT
	make -C "$KDIR" -s "${KMAKE_VARS[@]}" olddefconfig
	grep -qx 'CONFIG_RUST_CM_DISCONNECT=m' "$KDIR/.config" ||
		{ echo "intree: CONFIG_RUST_CM_DISCONNECT=m did not take" >&2; exit 1; }
	# A config change rebuilds the Rust crates of vmlinux too: build both.
	make -C "$KDIR" -s "${KMAKE_VARS[@]}" -j"$(nproc)" bzImage modules >&2
	echo "$KDIR $KDIR/$rel/rust_cm_disconnect.ko"
	;;
*)
	echo "usage: $0 patch|build" >&2
	exit 2
	;;
esac
