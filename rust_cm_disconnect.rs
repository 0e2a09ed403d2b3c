// SPDX-License-Identifier: GPL-2.0

//! rust_cm_disconnect: a safe disconnect for InfiniBand/RoCE CM connections.
//!
//! What a kernel consumer loads for the checked DREQ/DREP/disconnect paths
//! of `include/rust_cm_disconnect.h` (`rcd_send_dreq`, `rcd_send_drep`,
//! `rcd_disconnect`), on its own `struct ib_cm_id` and QP. The module owns
//! no id, QP or device and keeps no state: each call checks its caller's
//! input and acts on the caller's connection ([`disconnect`]), through the
//! kernel crate's `kernel::rdma::cm` and `verbs`. The C side of the
//! boundary is [`shim`].
//!
//! The test harness that drives connections over soft-RoCE is a separate
//! module, `tests/harness/` (`rcd_harness.ko`), a consumer of this one.

use kernel::prelude::*;

#[path = "rust_cm_disconnect/disconnect.rs"]
mod disconnect;
#[path = "rust_cm_disconnect/shim.rs"]
mod shim;

// The abstractions of the kernel crate (`kernel::rdma`), under the paths the
// modules have always used.
use kernel::rdma::{cm, verbs};

module! {
    type: RustCmDisconnect,
    name: "rust_cm_disconnect",
    authors: ["rust_cm_disconnect developers"],
    description: "Safe disconnect (DREQ/DREP) for IB CM connections, in Rust",
    license: "GPL",
}

/// The module: the C API's functions live while it is loaded, and a
/// consumer that links against them holds it (`rmmod` is refused).
struct RustCmDisconnect;

impl kernel::Module for RustCmDisconnect {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        Ok(Self)
    }
}
