#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Boot the cached test kernel in a QEMU guest and run one command as root:
#   scripts/vm.sh 'command'
# The guest sees the host's root file system (read-only, with writable
# overlays), so the repository and the built modules are at the same path.
# Returns the command's exit status; 124 when RCD_VM_TIMEOUT (s) runs out.
#   RCD_VM_MEM, RCD_VM_CPUS   the guest's memory and vCPUs (2G, 2)
#   RCD_VM_RWDIR              a host directory the guest may write to
#   RCD_VM_UDEV=1             the real udev coldplug at boot (default: none)
#   RCD_VM_9P_CACHE           the root's 9p cache mode (default loose; none)
#   RCD_VM_KUNIT              the KUnit tests run at boot (kunit.filter_glob;
#                             default kernel::rdma's doctests)
#   RCD_VM_CONSOLE=1          the kernel's console (boot messages, oopses,
#                             panics) on stderr; without it a guest that dies
#                             before its command starts prints nothing
#   RCD_VM_HOST_CPUS          the host CPUs QEMU may run on (taskset -c: make
#                             check-slow puts every guest on CPU 0)
#   RCD_VM_NET, RCD_VM_MAC    a virtio NIC on a QEMU socket network: RCD_VM_NET
#                             is the socket's options (udp=HOST:PORT,
#                             localaddr=HOST:PORT), RCD_VM_MAC its MAC
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
[ -z "${RCD_VM_RWDIR:-}" ] || share+=(--rwdir "$RCD_VM_RWDIR")

# The root file system is the host's, over 9p, which virtme-ng mounts
# without a cache: every exec then reads the binary and its libraries from
# the host again. The suite starts thousands of processes; a later
# rootflags= wins, and the host's files do not change while a guest runs
# (RCD_VM_9P_CACHE=none for virtme-ng's own).
cmdline=
[ "${RCD_VM_9P_CACHE:-loose}" = none ] ||
	cmdline="rootflags=version=9p2000.L,trans=virtio,access=any,msize=524288,cache=${RCD_VM_9P_CACHE:-loose}"
# The debug kernel runs the kernel crate's doctests (KUnit) at boot, all of
# them: kernel::rdma's and the patches' kernel::debugfs and
# kernel::sync::global_lock! among the rest (tests/t_kernel.sh: rdma_doctests
# reads their results). 133 doctests cost no measurable boot time (30.5 s
# either way, 2026-11-30). RCD_VM_KUNIT overrides the glob.
kunit=rust_doctests_kernel.*
# 7.3's KUnit runs them at boot only with kunit.autorun: the option that
# sets its default (CONFIG_KUNIT_AUTORUN_ENABLED, new since 6.12) is off
# under allnoconfig. 6.12 always runs them and has no such parameter.
# 7.3's own kernel::time::hrtimer doctests (hrtimer.rs:245 and :315) set
# up timers on the stack that DEBUG_OBJECTS_TIMERS reports ("ODEBUG:
# object ... is on stack ..., but NOT annotated", a WARNING: dmesg_clean
# fails on it): they are left out, and with them the other doctests of
# modules whose names start with t (task, transmute, types: 17 of 369),
# as one glob cannot leave out less.
if grep -qx '# CONFIG_KUNIT_AUTORUN_ENABLED is not set' "$KDIR/.config" 2>/dev/null; then
	cmdline="$cmdline kunit.autorun=1"
	kunit='rust_doctests_kernel.rust_doctest_kernel_[!t]*'
fi
cmdline="$cmdline kunit.filter_glob=${RCD_VM_KUNIT:-$kunit}"
# The detectors stay armed for the whole guest (tests/t_kernel.sh:
# detectors_armed checks it at the end): KASAN reports
# every bad access, not only the first (kasan_multi_shot; only on a KASAN
# kernel: an unknown parameter would go to init). And the kernel log keeps
# every line of a guest's hours: the config's 128 KiB ring wraps in one
# long guest, and a report that scrolled out is a report dmesg_clean never
# reads (it fails on a wrapped log instead).
cmdline="$cmdline log_buf_len=16M"
! grep -qx CONFIG_KASAN=y "$KDIR/.config" 2>/dev/null || cmdline="$cmdline kasan_multi_shot"
append=(--append "$cmdline")
vng=("$VNG" --run "$KDIR" --disable-kvm --user root
	--memory "${RCD_VM_MEM:-2G}" --cpus "${RCD_VM_CPUS:-2}"
	"${share[@]}" "${append[@]}" --exec "$1")
[ "${RCD_VM_CONSOLE:-0}" != 1 ] || vng+=(--verbose)
# 7.3's pgtable_l5_enabled() is the boot CPU's LA57 capability, and
# identify_cpu() zeroes the capabilities and reads them back from CPUID
# with interrupts on. A tick in between sees 4-level paging's
# KASAN_SHADOW_START, so each access of the handler to the (5-level)
# direct map is a "KASAN: wild-memory-access" report (rcu_is_watching,
# calc_global_load_tick). With kasan_multi_shot under TCG each report
# outlasts the next tick, and the boot never leaves identify_cpu: the
# 7.3 boots that printed nothing (seen with RCD_VM_CONSOLE=1).
# A guest CPU without LA57 has no such window. 6.12's configuration has no
# X86_5LEVEL (4 levels: the capability is never set), and keeps QEMU's CPU.
! grep -qx CONFIG_PGTABLE_LEVELS=5 "$KDIR/.config" 2>/dev/null ||
	vng+=(--qemu-opt=-cpu --qemu-opt=max,la57=off)
# Two guests, two hosts: a NIC on a UDP socket network between two QEMUs
# (either may start first).
[ -z "${RCD_VM_NET:-}" ] ||
	vng+=("--qemu-opts=-netdev socket,id=rcdnet,$RCD_VM_NET -device virtio-net-pci,netdev=rcdnet,mac=${RCD_VM_MAC:-52:54:00:12:78:01}")

# A guest slowed on purpose (make check-slow): QEMU and its vCPU threads
# only on these host CPUs.
[ -z "${RCD_VM_HOST_CPUS:-}" ] || vng=(taskset -c "$RCD_VM_HOST_CPUS" "${vng[@]}")

# The guest boots on the host's root file system, so what its init finds
# there is what QEMU's 9p server sees: in a mount namespace of our own,
# udevadm (systemd-udevd is a link to it) is scripts/guest-udev and
# systemd-tmpfiles is true. Measured on the debug kernel under TCG: the two
# took 100 of the 150 s before the script started (README, Test times).
if [ "${RCD_VM_UDEV:-0}" = 1 ]; then
	exec timeout --kill-after=30 "${RCD_VM_TIMEOUT:-3600}" "${vng[@]}" </dev/null
fi
exec timeout --kill-after=30 "${RCD_VM_TIMEOUT:-3600}" \
	unshare --mount --propagation private sh -c '
		mount --bind "$0" /usr/bin/udevadm &&
		mount --bind /bin/true /usr/bin/systemd-tmpfiles &&
		exec "$@"' "$here/scripts/guest-udev" "${vng[@]}" </dev/null
