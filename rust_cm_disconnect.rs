// SPDX-License-Identifier: GPL-2.0

//! rust_cm_disconnect: a safe disconnect for InfiniBand/RoCE CM connections.
//!
//! The crate root: the module, its state and the order in which it is set up
//! and torn down. The pieces live in `rust_cm_disconnect/`.

use kernel::prelude::*;
use kernel::sync::Arc;

#[path = "rust_cm_disconnect/control.rs"]
mod control;
#[path = "rust_cm_disconnect/debugfs.rs"]
mod debugfs;
#[path = "rust_cm_disconnect/devices.rs"]
mod devices;
#[path = "rust_cm_disconnect/ib_client.rs"]
mod ib_client;

module! {
    type: RustCmDisconnect,
    name: "rust_cm_disconnect",
    author: "rust_cm_disconnect developers",
    description: "Safe disconnect (DREQ/DREP) for IB CM connections, in Rust",
    license: "GPL",
}

struct RustCmDisconnect {
    // Dropped in this order: the control files go first so that no command
    // runs during teardown, then the RDMA client, whose unregistration
    // removes every device and everything on it.
    _debugfs: debugfs::Dir<control::State>,
    _client: ib_client::Registration<devices::Devices>,
}

impl kernel::Module for RustCmDisconnect {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        let devices = Arc::pin_init(devices::Devices::new(), GFP_KERNEL)?;
        let client = ib_client::Registration::new(c_str!("rust_cm_disconnect"), devices.clone())?;
        let state = Arc::new(control::State::new(devices), GFP_KERNEL)?;
        let debugfs = debugfs::Dir::new(c_str!("rust_cm_disconnect"), &control::FILES, state)?;
        pr_info!("loaded\n");
        Ok(Self {
            _debugfs: debugfs,
            _client: client,
        })
    }
}

impl Drop for RustCmDisconnect {
    fn drop(&mut self) {
        pr_info!("unloading\n");
    }
}
