// SPDX-License-Identifier: GPL-2.0

//! RDMA: InfiniBand, RoCE and iWARP, for kernel consumers of the RDMA core.
//!
//! The devices the core registers and the clients it tells about them, the
//! verbs objects a connection needs, RoCE path records and the address
//! resolution behind them, and the IB connection manager: one module each.
//!
//! C headers: [`include/rdma/`](srctree/include/rdma/)

pub mod client;
pub mod cm;
pub mod device;
pub mod path;
pub mod verbs;
