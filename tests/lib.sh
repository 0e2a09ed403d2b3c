# SPDX-License-Identifier: GPL-2.0
#
# Helpers for the guest-side tests. Sourced by tests/guest.sh; every test
# function may use them. A failed check prints why and returns 1.

RCD_DBG=/sys/kernel/debug/rust_cm_disconnect
RCD_KO=${RCD_KO:-$RCD_TOP/rust_cm_disconnect.ko}
KSFT_SKIP=4

log() { echo "# $*"; }
fail() { echo "# FAIL: $*"; return 1; }

# check DESCRIPTION COMMAND...: run a command, fail with DESCRIPTION if it fails.
check() {
	local what=$1; shift
	"$@" || fail "$what"
}

# wait_for SECONDS COMMAND...: poll until COMMAND succeeds.
wait_for() {
	local t=$1; shift
	local end=$((SECONDS + t))
	until "$@"; do
		[ $SECONDS -lt $end ] || return 1
		sleep 0.2
	done
}

rcd_loaded() { [ -d /sys/module/rust_cm_disconnect ]; }

rcd_load() {
	modprobe ib_cm && modprobe rdma_cm || return 1
	insmod "$RCD_KO" || fail "insmod $RCD_KO"
}

rcd_unload() {
	rcd_loaded || return 0
	rmmod rust_cm_disconnect || fail "rmmod rust_cm_disconnect"
}

# stat NAME: a counter from the stats file.
rcd_stat() { awk -v k="$1" '$1 == k { print $2 }' "$RCD_DBG/stats"; }

rcd_has_device() { grep -q "^$1 " "$RCD_DBG/devices"; }

# The veth pair both topologies use: v0 10.77.0.1 <-> v1 10.77.0.2.
veth_up() {
	ip link show v0 >/dev/null 2>&1 && return 0
	ip link add v0 type veth peer name v1 &&
	ip addr add 10.77.0.1/24 dev v0 &&
	ip addr add 10.77.0.2/24 dev v1 &&
	ip link set v0 up && ip link set v1 up
}

# rxe_add NAME NETDEV
rxe_add() {
	modprobe rdma_rxe || return 1
	veth_up || return 1
	rdma link add "$1" type rxe netdev "$2" || return 1
	wait_for 10 sh -c "rdma link show $1/1 | grep -q ACTIVE"
}

rxe_del() { rdma link del "$1" 2>/dev/null; }

# Back to a clean guest: the module out, rxe links and the veth pair gone.
cleanup() {
	rcd_unload >/dev/null 2>&1
	for l in $(rdma link show 2>/dev/null | awk '{print $2}' | cut -d/ -f1); do
		rxe_del "$l"
	done
	ip link del v0 2>/dev/null
	true
}
