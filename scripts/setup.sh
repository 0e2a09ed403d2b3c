#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Install everything the build, the guest and the tests need, on Debian 12.
# Idempotent: a second run checks versions and returns in seconds.
# What takes long says so on stderr (callers hide the stdout's "ok").
set -euo pipefail
. "$(dirname "$0")/env.sh"

RUST_PIN=1.85.0+dfsg3-1~deb12u3
LINUX_PIN=6.12.117-1~deb12u1
BINDGEN_PIN=0.70.1
# KERNEL=7.3 (scripts/env.sh): linux-source-7.3 from trixie-backports,
# unpacked under $TOOLS (not installed: nothing else on the machine
# changes), and the bindgen its min-tool-version.sh wants.
LINUX73_PIN=7.3.4-1~bpo13+1
BINDGEN73_PIN=0.71.1
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
	# ping, which the kernel's own rdma selftests use (make rdma-selftests).
	iputils-ping
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
	echo "setup: installing ${missing[*]}" >&2
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

if ! "$TOOLS/bin/bindgen" --version 2>/dev/null | grep -q " $BINDGEN_PIN\$"; then
	echo "setup: cargo install bindgen-cli $BINDGEN_PIN" >&2
	cargo install --locked --root "$TOOLS" bindgen-cli --version "$BINDGEN_PIN" -q
fi

if [ "$KERNEL" = 7.3 ]; then
	if ! "$BINDGEN" --version 2>/dev/null | grep -q " $BINDGEN73_PIN\$"; then
		echo "setup: cargo install bindgen-cli $BINDGEN73_PIN (a few minutes)" >&2
		cargo install --locked --root "$TOOLS/bindgen-$BINDGEN73_PIN" bindgen-cli \
			--version "$BINDGEN73_PIN" -q
	fi
	src73=${KTARBALL%/usr/src/*}
	if [ "$(cat "$src73/VERSION" 2>/dev/null)" != "$LINUX73_PIN" ]; then
		need_root
		# One package from one more suite, through an apt configuration of
		# its own: the machine's sources, lists and packages stay as they are.
		echo "setup: fetching linux-source-7.3 $LINUX73_PIN from trixie-backports (167 MB)" >&2
		tmp=$(mktemp -d)
		mkdir -p "$tmp/lists/partial" "$tmp/cache/archives/partial"
		mirror=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources 2>/dev/null)
		echo "deb ${mirror:-http://deb.debian.org/debian} trixie-backports main" > "$tmp/sources.list"
		A=(-o Dir::Etc::SourceList="$tmp/sources.list" -o Dir::Etc::SourceParts=/dev/null
			-o Dir::State::Lists="$tmp/lists" -o Dir::Cache="$tmp/cache"
			-o Acquire::Languages=none -o APT::Sandbox::User=root)
		apt-get "${A[@]}" -qq update
		if ! apt-cache "${A[@]}" madison linux-source-7.3 | awk '{print $3}' | grep -qxF "$LINUX73_PIN"; then
			echo "setup: linux-source-7.3 $LINUX73_PIN is no longer offered by trixie-backports (pin gone)." >&2
			echo "setup: update LINUX73_PIN in scripts/setup.sh and check the 7.3 series still applies." >&2
			exit 1
		fi
		(cd "$tmp" && apt-get "${A[@]}" -qq download "linux-source-7.3=$LINUX73_PIN")
		deb=$(echo "$tmp"/linux-source-7.3_*_all.deb)
		[ "$(dpkg-deb -f "$deb" Version)" = "$LINUX73_PIN" ] ||
			{ echo "setup: $deb is not $LINUX73_PIN" >&2; exit 1; }
		rm -rf "$src73"
		dpkg-deb -x "$deb" "$src73"
		echo "$LINUX73_PIN" > "$src73/VERSION"
		rm -rf "$tmp"
	fi
	[ -f "$KTARBALL" ] || { echo "setup: no $KTARBALL in the package" >&2; exit 1; }
fi

if ! "$VNG" --version 2>/dev/null | grep -q "$VNG_PIN"; then
	echo "setup: virtme-ng $VNG_PIN in $TOOLS/venv" >&2
	python3 -m venv "$TOOLS/venv"
	"$TOOLS/venv/bin/pip" install -q "virtme-ng==$VNG_PIN"
fi

"$RUSTC" --version | grep -q '^rustc 1\.85\.' ||
	{ echo "setup: $RUSTC is not 1.85" >&2; exit 1; }
[ -d "$RUST_LIB_SRC/core" ] || { echo "setup: no $RUST_LIB_SRC" >&2; exit 1; }
[ "$KERNEL" = 7.3 ] && BINDGEN_PIN=$BINDGEN73_PIN
echo "setup: ok ($("$RUSTC" --version), bindgen $BINDGEN_PIN, vng $VNG_PIN, linux $KERNEL)"
