#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Install everything the build, the guest and the tests need, on Debian 12.
# Idempotent: a second run checks versions and returns in seconds.
set -euo pipefail
. "$(dirname "$0")/env.sh"

RUST_PIN=1.85.0+dfsg3-1~deb12u3
LINUX_PIN=6.12.117-1~deb12u1
BINDGEN_PIN=0.70.1
VNG_PIN=1.42

need_root() { [ "$(id -u)" = 0 ] || { echo "setup: must run as root (apt-get)" >&2; exit 1; }; }

pkgs=(
	"rustc-web=$RUST_PIN" "rust-web-src=$RUST_PIN" "libstd-rust-web-dev=$RUST_PIN"
	"rust-web-clippy=$RUST_PIN" "rustfmt-web=$RUST_PIN"
	"linux-source-6.12=$LINUX_PIN"
	clang-19 lld-19 llvm-19 libclang-19-dev
	bc flex bison libelf-dev libssl-dev cpio kmod xz-utils make gcc python3-venv
	qemu-system-x86 udev iproute2 rdmacm-utils ibverbs-utils ibverbs-providers
	librdmacm-dev
	# The bench's and the storm's plots (scripts/bench.sh, storm-plot.sh).
	gnuplot-nox
)

missing=()
for p in "${pkgs[@]}"; do
	name=${p%%=*}
	want=${p#*=}
	have=$(dpkg-query -W -f='${Status} ${Version}' "$name" 2>/dev/null || true)
	case "$have" in
	"install ok installed "*|"hold ok installed "*)
		[ "$want" = "$p" ] || [ "${have##* }" = "$want" ] || missing+=("$p") ;;
	*) missing+=("$p") ;;
	esac
done

if [ ${#missing[@]} -gt 0 ]; then
	need_root
	echo "setup: installing ${missing[*]}"
	apt-get update -qq
	for p in "${missing[@]}"; do
		case "$p" in *=*)
			name=${p%%=*}; want=${p#*=}
			if ! apt-cache madison "$name" | awk '{print $3}' | grep -qxF "$want"; then
				echo "setup: $name $want is no longer offered by apt (pin gone)." >&2
				echo "setup: update the pin in scripts/setup.sh and check the kernel still builds." >&2
				exit 1
			fi ;;
		esac
	done
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		--allow-downgrades "${missing[@]}" >/dev/null
	# Keep apt from "upgrading" the pinned toolchain behind our back.
	apt-mark hold rustc-web rust-web-src libstd-rust-web-dev rust-web-clippy rustfmt-web linux-source-6.12 >/dev/null
fi

if ! "$BINDGEN" --version 2>/dev/null | grep -q " $BINDGEN_PIN\$"; then
	echo "setup: cargo install bindgen-cli $BINDGEN_PIN"
	cargo install --locked --root "$TOOLS" bindgen-cli --version "$BINDGEN_PIN" -q
fi

if ! "$VNG" --version 2>/dev/null | grep -q "$VNG_PIN"; then
	echo "setup: virtme-ng $VNG_PIN in $TOOLS/venv"
	python3 -m venv "$TOOLS/venv"
	"$TOOLS/venv/bin/pip" install -q "virtme-ng==$VNG_PIN"
fi

"$RUSTC" --version | grep -q '^rustc 1\.85\.' ||
	{ echo "setup: $RUSTC is not 1.85" >&2; exit 1; }
[ -d "$RUST_LIB_SRC/core" ] || { echo "setup: no $RUST_LIB_SRC" >&2; exit 1; }
echo "setup: ok ($("$RUSTC" --version), bindgen $BINDGEN_PIN, vng $VNG_PIN)"
