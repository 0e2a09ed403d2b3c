// SPDX-License-Identifier: GPL-2.0

//! rcd_harness: the test harness of rust_cm_disconnect.
//!
//! Makes and tears down IB CM connections over soft-RoCE for the kselftests
//! (`tests/t_*.sh`), driven through its debugfs directory
//! (`/sys/kernel/debug/rcd_harness/`: `ctl`, `conns`, `events`, `stats`), with rping, the event
//! log, the counters and the test hooks. Every DREQ, DREP and disconnect it
//! sends goes through the product's C API (`product`), so the product
//! (`rust_cm_disconnect.ko`) is loaded first and stays while this is.
//!
//! The crate root: the module, its state and the order in which it is set up
//! and torn down.

use kernel::{c_str, prelude::*, sync::Arc};

mod cma;
mod conn;
mod control;
mod devices;
mod kcompat;
mod product;
mod rping;
mod test_conn;

// The kernel crate's CM and path records (`kernel::rdma`), by their short
// names.
use kernel::rdma::{cm, path};
// The RDMA client's context: a slot of the module's own.
kernel::rdma_client_slot!(conn::Core);

kcompat::harness_module! {
    type: RcdHarness,
    name: "rcd_harness",
    author: "rust_cm_disconnect developers",
    description: "Test harness of rust_cm_disconnect: IB CM connections driven from debugfs",
    license: "GPL",
}

struct RcdHarness {
    // Dropped in this order: the control files (no command runs during
    // teardown), then the RDMA client, whose unregistration frees every id
    // and QP on every device (each device's `remove` destroys the ids in the
    // table at once and waits for the destroys its callbacks queued), then
    // the connection table with the endpoints' records and the module's
    // reference on the core (`Owner`, which also takes the core out of reach
    // of `rcd_test_with_conn()` and of the endpoints, once no callback of
    // theirs can run), and last the reaper: it waits until every holder of a
    // `ReaperRef` (every id, the core) is gone, then destroys its workqueue,
    // which runs what is still queued first. After that no id of ours exists
    // and no callback or work item runs module code (see the `cm` module's
    // documentation for why).
    //
    // The long-running work runs on queues of its own, which neither device
    // removal nor unload flushes while a peer may still keep them busy:
    // `_pollers` (the rping pollers) and `_sweepers` (the sweepers of
    // unanswered DREQs and held REPs, never behind a poller). Each item
    // ends by itself once its entry left the table, its QP was freed
    // (device removal) or the core stopped (unload, `Owner`). Their drops
    // then wait only for those ends (a millisecond's poll, a sweep).
    _debugfs: kcompat::ControlDir<conn::Core>,
    _client: kernel::rdma::client::Registration<conn::Core>,
    _owner: conn::Owner,
    _pollers: Pin<KBox<cm::Reaper>>,
    _sweepers: Pin<KBox<cm::Reaper>>,
    _reaper: Pin<KBox<cm::Reaper>>,
}

impl kernel::Module for RcdHarness {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        // Made first, dropped last (also when init fails below: locals drop
        // in reverse order).
        let reaper = cm::Reaper::new(c_str!("rcd_reaper"), c_str!("rcd_jobs"))?;
        // Dropped before `reaper`: its items hold the core, and with it a
        // reference on `reaper`.
        let pollers = cm::Reaper::new(c_str!("rcd_pollers"), c_str!("rcd_pollers_jobs"))?;
        let sweepers = cm::Reaper::new(c_str!("rcd_sweepers"), c_str!("rcd_sweepers_jobs"))?;
        let core = Arc::pin_init(
            conn::Core::new(
                reaper.as_ref().get(),
                pollers.as_ref().get(),
                sweepers.as_ref().get(),
            ),
            GFP_KERNEL,
        )?;
        // Before the client: the endpoints' callbacks reach the core
        // through the slot `Owner` fills.
        // SAFETY: Module init: once per load, the first use of the slot.
        let owner = unsafe { conn::Owner::new(core.clone()) }?;
        let client = kernel::rdma::client::Registration::new(c_str!("rcd_harness"), core.clone())?;
        let debugfs = kcompat::ControlDir::new(c_str!("rcd_harness"), &control::FILES, core)?;
        pr_info!("loaded\n");
        Ok(Self {
            _debugfs: debugfs,
            _client: client,
            _owner: owner,
            _pollers: pollers,
            _sweepers: sweepers,
            _reaper: reaper,
        })
    }
}

impl Drop for RcdHarness {
    fn drop(&mut self) {
        pr_info!("unloading\n");
    }
}
