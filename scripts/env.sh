# SPDX-License-Identifier: GPL-2.0
# Sourced by every script: where the cache lives and which tools to use.
# RCD_CACHE is the one knob: everything fetched or built lives below it.
RCD_CACHE=${RCD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rust-cm-disconnect}
TOOLS=$RCD_CACHE/tools
RUSTC=/usr/bin/rustc
# rustdoc of the same toolchain as rustc (make rustdoc, the kernel crate's
# doctests): a rustup one first in PATH cannot read 1.85's metadata.
RUSTDOC=/usr/bin/rustdoc
RUST_LIB_SRC=/usr/src/rustc-1.85.0/library
# KERNEL: which kernel the project builds against, 7.3 (the default: the
# seed's kernel, linux-source-7.3 from trixie-backports, which
# scripts/setup.sh unpacks under $TOOLS) or 6.12 (Debian bookworm's
# linux-source-6.12, the LTS). Each has its own series
# (KSERIES: kernel/ for 6.12, kernel/7.3/ for 7.3), its own cached trees and
# the bindgen its scripts/min-tool-version.sh wants.
KERNEL=${KERNEL:-7.3}
_rcd_top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
case $KERNEL in
6.12)
	KSERIES=$_rcd_top/kernel
	BINDGEN=$TOOLS/bin/bindgen
	KTARBALL=/usr/src/linux-source-6.12.tar.xz ;;
7.3)
	KSERIES=$_rcd_top/kernel/7.3
	BINDGEN=$TOOLS/bindgen-0.71.1/bin/bindgen
	KTARBALL=$TOOLS/linux-source-7.3/usr/src/linux-source-7.3.tar.xz ;;
*) echo "KERNEL=$KERNEL: want 6.12 or 7.3" >&2; exit 2 ;;
esac
VNG=$TOOLS/venv/bin/vng
LIBCLANG_PATH=/usr/lib/llvm-19/lib
PATH=$TOOLS/venv/bin:$PATH
export RCD_CACHE LIBCLANG_PATH PATH KERNEL
# What every kernel `make` gets: Debian's rustc (it ships core/alloc source),
# LLVM 19, our pinned bindgen.
KMAKE_VARS=(LLVM=-19 RUSTC="$RUSTC" RUST_LIB_SRC="$RUST_LIB_SRC" BINDGEN="$BINDGEN"
	RUSTDOC="$RUSTDOC"
	CLIPPY_DRIVER=/usr/bin/clippy-driver RUSTFMT=/usr/bin/rustfmt
	HOSTRUSTC="$RUSTC")
mkdir -p "$RCD_CACHE"
# scripts/kernel.sh runs one at a time per cache: two makes in one tree
# corrupt it, and worktrees and parallel runs share the cache. A second
# caller waits, then finds the tree up to date. The lock is taken here, as
# kernel.sh sources this file, because kernel.sh's own text is part of its
# trees' key.
if [ "${BASH_SOURCE[1]##*/}" = kernel.sh ]; then
	exec 9>"$RCD_CACHE/kernel.lock"
	flock 9
	# The new kernel files the series names (from kernel/tree/) as one
	# more patch, which kernel.sh's $KSERIES/*.patch takes in after the
	# numbered ones (see scripts/kernel-patch.sh): made here for the same
	# reason.
	bash "$_rcd_top/scripts/kernel-patch.sh" "$KSERIES" > "$KSERIES/.new-files.tmp"
	mv "$KSERIES/.new-files.tmp" "$KSERIES/new-files.generated.patch"
fi
