// SPDX-License-Identifier: GPL-2.0

//! RDMA: InfiniBand, RoCE and iWARP, for kernel consumers of the RDMA core.
//!
//! [`device`]: the devices the core registers. [`verbs`]: a protection
//! domain, a completion queue and an RC queue pair owned together, with the
//! buffers of the work requests posted on it.
//!
//! C headers: [`include/rdma/`](srctree/include/rdma/)

pub mod device;
pub mod verbs;
