#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Boot the cached test kernel in a QEMU guest and run one command as root:
#   scripts/vm.sh 'command'
# The guest sees the host's root file system (read-only, with writable
# overlays), so the repository and the built modules are at the same path.
# Returns the command's exit status; 124 when RCD_VM_TIMEOUT (s) runs out.
#
# KVM is not used: on this kind of machine a KVM guest hangs after SeaBIOS.
# TCG is slower but always works.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/scripts/env.sh"

[ $# -eq 1 ] || { echo "usage: $0 'command'" >&2; exit 2; }
KDIR=${KDIR:-$(bash "$here/scripts/kernel.sh" | tail -n 1)}

# The guest gets its own /tmp: a checkout there must be shared explicitly.
share=()
case "$here" in /tmp/*) share=(--rodir "$here") ;; esac

exec timeout --kill-after=30 "${RCD_VM_TIMEOUT:-3600}" \
	"$VNG" --run "$KDIR" --disable-kvm --user root \
	--memory "${RCD_VM_MEM:-2G}" --cpus "${RCD_VM_CPUS:-2}" \
	"${share[@]}" --exec "$1" </dev/null
