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
BINDGEN=$TOOLS/bin/bindgen
VNG=$TOOLS/venv/bin/vng
LIBCLANG_PATH=/usr/lib/llvm-19/lib
PATH=$TOOLS/venv/bin:$PATH
export RCD_CACHE LIBCLANG_PATH PATH
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
	# The new kernel files of kernel/tree/ as one more patch, which
	# kernel.sh's kernel/*.patch takes in after the numbered ones (see
	# scripts/kernel-patch.sh): made here for the same reason.
	_rcd_kernel=$(cd "$(dirname "${BASH_SOURCE[0]}")/../kernel" && pwd)
	bash "$_rcd_kernel/../scripts/kernel-patch.sh" > "$_rcd_kernel/.tree-files.tmp"
	mv "$_rcd_kernel/.tree-files.tmp" "$_rcd_kernel/tree-files.generated.patch"
fi
