#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# The in-tree build of the module:
#   scripts/intree.sh patch    write the whole change as one patch against a
#                              fresh 6.12 tree (the bindings/helpers patch,
#                              drivers/infiniband/ulp/rust_cm_disconnect/,
#                              its Kconfig and Makefile, the wiring in
#                              drivers/infiniband/{Kconfig,ulp/Makefile}) to
#                              $RCD_CACHE/intree/, and check that it applies
#                              with `patch -p1` to a fresh tree
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
	mkdir -p "$t/$rel/rust_cm_disconnect" "$t/$rel/include"
	cp "$here"/rust_cm_disconnect.rs "$here"/rust_cm_disconnect_exports.c \
		"$here"/rust_cm_disconnect_shim.h "$t/$rel/"
	cp "$here"/rust_cm_disconnect/*.rs "$t/$rel/rust_cm_disconnect/"
	cp "$here"/include/rust_cm_disconnect.h "$t/$rel/include/"
	# The same Kbuild as out of tree, less the test modules.
	sed '/RCD_TEST_MODULES\|test modules\|tests\/modules/d' "$here/Kbuild" > "$t/$rel/Makefile"
	cat > "$t/$rel/Kconfig" <<'KCONFIG'
# SPDX-License-Identifier: GPL-2.0
config RUST_CM_DISCONNECT
	tristate "Safe disconnect (DREQ/DREP) for IB CM connections, in Rust"
	depends on RUST && INFINIBAND && INFINIBAND_ADDR_TRANS
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

case "${1:-}" in
patch)
	tmp=$(mktemp -d "$RCD_CACHE/intree/tmp.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	files="rust/bindings rust/helpers drivers/infiniband/Kconfig drivers/infiniband/ulp"
	mkdir -p "$tmp/a" "$tmp/b" "$tmp/check"
	# shellcheck disable=SC2086
	tar -xf /usr/src/linux-source-6.12.tar.xz -C "$tmp/a" --strip-components=1 \
		$(for f in $files; do echo "linux-source-6.12/$f"; done)
	cp -a "$tmp/a/." "$tmp/b/"
	cat "$here"/kernel/*.patch | patch -d "$tmp/b" -p1 -s --no-backup-if-mismatch
	place "$tmp/b"
	p=$out/0001-RDMA-add-rust_cm_disconnect.patch
	{
		cat <<'HDR'
From: rust_cm_disconnect developers
Subject: [PATCH] RDMA: add rust_cm_disconnect, a safe IB CM disconnect in Rust

ib_send_cm_dreq() takes its private data length as a u8: a caller's 300
silently becomes 44, and the DREQ field holds 220 bytes. ib_send_cm_drep()
leaks its copy of the data when the length is too long, and rdma_cm's
rdma_disconnect() swallows every DREQ/DREP failure.

rust_cm_disconnect wraps struct ib_cm_id in safe Rust so that none of this
can be gotten wrong, and exports the checked paths to C. It needs the RDMA
CM headers in the Rust bindings and helpers for a few static inlines.

---
HDR
		(cd "$tmp" && diff -urN a b) | sed -E 's/^(---|\+\+\+) ([ab]\/[^\t]*)\t.*/\1 \2/' || true
	} > "$p"
	# Does it apply to a fresh tree?
	tar -xf /usr/src/linux-source-6.12.tar.xz -C "$tmp/check" --strip-components=1 \
		$(for f in $files; do echo "linux-source-6.12/$f"; done)
	patch -d "$tmp/check" -p1 --dry-run -s < "$p"
	echo "intree: $p applies to a fresh linux-source-6.12 tree ($(grep -c '^+++ ' "$p") files)"
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
