#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# rust_cm_disconnect's selftests over soft-RoCE (rdma_rxe): the safe
# DREQ/DREP of an ib_cm_id, rdma_disconnect semantics, the C API, hostile
# peers and interop with rdma-core's tools. Needs root, rdma_rxe, iproute2's
# rdma and rdma-core's tools; the product is RCD_KO (default
# ../rust_cm_disconnect.ko), the test harness that drives it RCD_HARNESS_KO
# (default harness/rcd_harness.ko, else modules/harness/rcd_harness.ko).
# See tests/ksft.sh for the arguments.
. "$(dirname "$0")/ksft.sh"
rcd_ksft_main "$@"
