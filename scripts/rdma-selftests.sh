#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# `make rdma-selftests`: the test kernel's own rdma selftests
# (tools/testing/selftests/rdma/: rxe between namespaces, over tun, its
# IPv6, NETDEV_UNREGISTER, ...; 7.3 has them, 6.12 does not), run once in
# a guest by the kselftest runner, as a check of the guest's rxe setup.
# Prints their KTAP; exits non-zero if one failed. Nothing of this project
# is loaded in that guest.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/scripts/env.sh"
bash "$here/scripts/setup.sh" >/dev/null
KDIR=${KDIR:-$(bash "$here/scripts/kernel.sh" | tail -n 1)}
export KDIR
d=$KDIR/tools/testing/selftests/rdma
[ -f "$d/Makefile" ] || { echo "rdma-selftests: $KERNEL has no $d" >&2; exit 2; }
# kselftest's make run_tests exits 0 whatever the tests did: the verdict
# is in its KTAP lines.
out=$(mktemp); trap 'rm -f "$out"' EXIT
# kselftest's 45 s a script is too little for rxe_netns_names.sh on the
# debug kernel under TCG: 300 s (RCD_RDMA_SELFTESTS_TIMEOUT).
bash "$here/scripts/vm.sh" \
	"kselftest_override_timeout=${RCD_RDMA_SELFTESTS_TIMEOUT:-300} make -s --no-print-directory -C $KDIR/tools/testing/selftests TARGETS=rdma run_tests 2>&1" |
	tee "$out"
! grep -q '^not ok ' "$out"
