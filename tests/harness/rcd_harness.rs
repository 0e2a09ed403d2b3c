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

use kernel::{
    c_str,
    prelude::*,
    str::CStr,
    sync::Arc,
    workqueue::{CountedQueue, OwnedQueue, QueueFlags},
};

mod cma;
mod conn;
mod control;
mod control_dir;
mod devices;
mod product;
mod rping;
mod test_conn;

// The kernel crate's CM and path records (`kernel::rdma`), by their short
// names.
use kernel::rdma::{cm, path};
// The RDMA client's context: a slot of the module's own.
kernel::rdma_client_slot!(conn::Core);

module! {
    type: RcdHarness,
    name: "rcd_harness",
    authors: ["rust_cm_disconnect developers"],
    description: "Test harness of rust_cm_disconnect: IB CM connections driven from debugfs",
    license: "GPL",
}

struct RcdHarness {
    // Dropped in this order, and why: see `DESIGN.md` ("Unload"). The
    // control files, the RDMA client (every id and QP on every device),
    // the table and the core's slot (`Owner`, which also stops and wakes
    // the long-running work), the pollers' and sweepers' queues (whose
    // items end by themselves once stopped), the jobs' queue, and last the
    // reaper. Each queue's drop waits for every `QueueRef` on it.
    _debugfs: control_dir::ControlDir<conn::Core>,
    _client: kernel::rdma::client::Registration<conn::Core>,
    _owner: conn::Owner,
    _pollers: Pin<KBox<CountedQueue>>,
    _sweepers: Pin<KBox<CountedQueue>>,
    _jobs: Pin<KBox<CountedQueue>>,
    _reaper: Pin<KBox<CountedQueue>>,
}

/// How a queue runs its items.
enum Runs {
    /// Unbound, as many at once as the kernel's default allows: items that
    /// sleep.
    Many,
    /// Unbound, at most this many at once: items that only compute.
    AtMost(i32),
    /// One at a time, in order.
    Ordered,
}

/// The rping pollers' items run at most this many at once. A step is a
/// few microseconds of work on the CPU that waits for nothing but locks:
/// more workers than CPUs only contend for the table's lock. With the default limit (1,024
/// on 7.3), 300 endless sessions kept about 500 workers asleep on that
/// lock and took 740 s to come up in a debug guest.
const POLLERS_AT_ONCE: i32 = 8;

/// A queue whose drop waits for every reference on it.
fn queue(name: &'static CStr, runs: Runs) -> Result<Pin<KBox<CountedQueue>>> {
    CountedQueue::new(match runs {
        Runs::Many => OwnedQueue::new(name, QueueFlags::UNBOUND, 0)?,
        Runs::AtMost(n) => OwnedQueue::new(name, QueueFlags::UNBOUND, n)?,
        Runs::Ordered => OwnedQueue::new_ordered(name, QueueFlags::PERCPU)?,
    })
}

impl kernel::Module for RcdHarness {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        // Made first, dropped last (also when init fails below: locals drop
        // in reverse order).
        let reaper = queue(c_str!("rcd_reaper"), Runs::Many)?;
        let jobs = queue(c_str!("rcd_jobs"), Runs::Ordered)?;
        // Dropped before `jobs` and `reaper`: their items hold the core, and
        // with it a reference on both.
        let pollers = queue(c_str!("rcd_pollers"), Runs::AtMost(POLLERS_AT_ONCE))?;
        let sweepers = queue(c_str!("rcd_sweepers"), Runs::Many)?;
        let core = Arc::pin_init(
            conn::Core::new(
                reaper.as_ref().get(),
                jobs.as_ref().get(),
                pollers.as_ref().get(),
                sweepers.as_ref().get(),
            ),
            GFP_KERNEL,
        )?;
        // Before the client: the endpoints' callbacks reach the core
        // through the slot `Owner` fills.
        // SAFETY: Module init: once per load, the first use of the slot.
        let owner = unsafe { conn::Owner::new(core.clone()) };
        let client = kernel::rdma::client::Registration::new(c_str!("rcd_harness"), core.clone())?;
        let debugfs = control_dir::ControlDir::new(c_str!("rcd_harness"), &control::FILES, core)?;
        pr_info!("loaded\n");
        Ok(Self {
            _debugfs: debugfs,
            _client: client,
            _owner: owner,
            _pollers: pollers,
            _sweepers: sweepers,
            _jobs: jobs,
            _reaper: reaper,
        })
    }
}

impl Drop for RcdHarness {
    fn drop(&mut self) {
        pr_info!("unloading\n");
    }
}
