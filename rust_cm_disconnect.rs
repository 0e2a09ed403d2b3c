// SPDX-License-Identifier: GPL-2.0

//! rust_cm_disconnect: a safe disconnect for InfiniBand/RoCE CM connections.
//!
//! The crate root: the module, its state and the order in which it is set up
//! and torn down. The pieces live in `rust_cm_disconnect/`.

use kernel::{c_str, prelude::*, sync::Arc};

#[path = "rust_cm_disconnect/cma.rs"]
mod cma;
#[path = "rust_cm_disconnect/conn.rs"]
mod conn;
#[path = "rust_cm_disconnect/control.rs"]
mod control;
#[path = "rust_cm_disconnect/devices.rs"]
mod devices;
#[path = "rust_cm_disconnect/disconnect.rs"]
mod disconnect;
#[path = "rust_cm_disconnect/rping.rs"]
mod rping;
#[path = "rust_cm_disconnect/shim.rs"]
mod shim;

// The boundary with C (see `shim`).
use kernel::debugfs;
use shim::capi;

// The abstractions of the kernel crate (`kernel::rdma`), under the paths the
// modules have always used.
use kernel::rdma::{cm, path};
/// The kernel crate's verbs, with the module's counting QP in place of its
/// `RcQp`.
mod verbs {
    pub(crate) use crate::conn::RcQp;
    pub(crate) use kernel::rdma::verbs::*;
}
mod ib_client {
    pub(crate) use kernel::rdma::{
        client::{Client, Registration},
        device::Device,
    };
}

// The RDMA client's context: a slot of the module's own.
kernel::rdma_client_slot!(conn::Core);

module! {
    type: RustCmDisconnect,
    name: "rust_cm_disconnect",
    author: "rust_cm_disconnect developers",
    description: "Safe disconnect (DREQ/DREP) for IB CM connections, in Rust",
    license: "GPL",
}

struct RustCmDisconnect {
    // Dropped in this order: the C API's view of the state, then the control
    // files (no command runs during teardown), then the RDMA client, whose
    // unregistration frees every id and QP on every device (each device's
    // `remove` destroys the ids in the table at once and waits for the
    // destroys its callbacks queued), then the connection table with the
    // endpoints' records, and last the reaper: it waits until every holder
    // of a `ReaperRef` (every id, the core) is gone, then destroys its
    // workqueue, which runs what is still queued first. After that no id of
    // ours exists and no callback or work item runs module code (see the
    // `cm` module's documentation for why).
    //
    // The long-running work (the rping pollers, the sweeper of unanswered
    // DREQs) runs on a queue of its own, `_pollers`, which neither device
    // removal nor unload flushes while a peer may still keep it busy: each
    // of its items ends by itself once its entry left the table, its QP was
    // freed (device removal) or the core stopped (unload, `Owner`). Its drop
    // then waits only for those ends (a millisecond's poll, a sweep).
    _capi: capi::Registration,
    _debugfs: debugfs::Dir<conn::Core>,
    _client: ib_client::Registration<conn::Core>,
    _owner: conn::Owner,
    _pollers: Pin<KBox<cm::Reaper>>,
    _reaper: Pin<KBox<cm::Reaper>>,
}

impl kernel::Module for RustCmDisconnect {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        // Made first, dropped last (also when init fails below: locals drop
        // in reverse order).
        let reaper = cm::Reaper::new(c_str!("rcd_reaper"), c_str!("rcd_jobs"))?;
        // Dropped before `reaper`: its items hold endpoints, which hold the
        // core and with it a reference on `reaper`.
        let pollers = cm::Reaper::new(c_str!("rcd_pollers"), c_str!("rcd_pollers_jobs"))?;
        let core = Arc::pin_init(
            conn::Core::new(reaper.as_ref().get(), pollers.as_ref().get()),
            GFP_KERNEL,
        )?;
        let client = ib_client::Registration::new(c_str!("rust_cm_disconnect"), core.clone())?;
        let debugfs =
            debugfs::Dir::new(c_str!("rust_cm_disconnect"), &control::FILES, core.clone())?;
        pr_info!("loaded\n");
        Ok(Self {
            _capi: capi::Registration::new(core.clone())?,
            _debugfs: debugfs,
            _client: client,
            _owner: conn::Owner::new(core),
            _pollers: pollers,
            _reaper: reaper,
        })
    }
}

impl Drop for RustCmDisconnect {
    fn drop(&mut self) {
        pr_info!("unloading\n");
    }
}
