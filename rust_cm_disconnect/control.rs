// SPDX-License-Identifier: GPL-2.0

//! The control interface: `/sys/kernel/debug/rust_cm_disconnect/`.
//!
//! - `devices` (read): one line per usable RDMA device and its IB CM ports.
//! - `stats` (read): `name value` counters.

use crate::{
    debugfs::{File, Ops, Output},
    devices::Devices,
};
use kernel::{error::code::*, prelude::*, sync::Arc};

const DEVICES: u32 = 0;
const STATS: u32 = 1;

/// The files of the control directory.
pub(crate) static FILES: [File; 2] = [
    File::new(c_str!("devices"), 0o444, DEVICES),
    File::new(c_str!("stats"), 0o444, STATS),
];

/// What the control files reach.
pub(crate) struct State {
    devices: Arc<Devices>,
}

impl State {
    pub(crate) fn new(devices: Arc<Devices>) -> Self {
        Self { devices }
    }
}

impl Ops for State {
    fn show(&self, id: u32, out: &mut Output<'_>) -> Result {
        match id {
            DEVICES => self.devices.show(out),
            STATS => self.devices.show_stats(out),
            _ => return Err(EINVAL),
        }
        .map_err(|_| ENOMEM)
    }

    fn write(&self, _id: u32, _input: &[u8]) -> Result {
        Err(EPERM)
    }
}
