// SPDX-License-Identifier: GPL-2.0

//! The RDMA devices this module can use: every device with a port that
//! supports the IB connection manager (InfiniBand, RoCE: rxe included).
//! The set is kept under the lock of `conn::Core`, and holds a reference on
//! each device from its `add` to its `remove`: the commands take their device
//! from here, by reference, and never ask the RDMA core for it by name.

use core::fmt::Write;
use kernel::{
    prelude::*,
    rbtree::RBTree,
    rdma::device::Device,
    str::{CStr, CString},
    sync::{aref::ARef, Arc},
};

/// What is known of one device between its `add` and its `remove`.
pub(crate) struct DeviceEntry {
    /// The device, held until its `remove` (the RDMA core waits for every
    /// reference only after its clients' `remove`).
    device: ARef<Device>,
    pub(crate) name: CString,
    /// Ports with IB CM support, and whether each is RoCE.
    pub(crate) ports: KVec<(u32, bool)>,
}

impl DeviceEntry {
    /// The entry for `device`, or `EOPNOTSUPP` if no port has the IB CM.
    pub(crate) fn new(device: &Device) -> Result<Arc<Self>> {
        let mut ports = KVec::new();
        for port in device.ports() {
            if device.has_ib_cm(port) {
                ports.push((port, device.is_roce(port)), GFP_KERNEL)?;
            }
        }
        if ports.is_empty() {
            // Not a device the IB CM can use (iWARP, for instance).
            return Err(EOPNOTSUPP);
        }
        let name = CString::try_from_fmt(fmt!("{}", device.name()))?;
        Ok(Arc::new(
            Self {
                device: device.into(),
                name,
                ports,
            },
            GFP_KERNEL,
        )?)
    }
}

/// All usable devices, keyed by their index in the RDMA core, and how many
/// came and went.
pub(crate) struct Devices {
    live: RBTree<u32, Arc<DeviceEntry>>,
    added: u64,
    removed: u64,
}

impl Devices {
    pub(crate) fn new() -> Self {
        Self {
            live: RBTree::new(),
            added: 0,
            removed: 0,
        }
    }

    pub(crate) fn insert(&mut self, device: &Device, entry: Arc<DeviceEntry>) -> Result {
        self.live
            .try_create_and_insert(device.index(), entry, GFP_KERNEL)?;
        self.added += 1;
        Ok(())
    }

    pub(crate) fn remove(&mut self, device: &Device) {
        if self.live.remove(&device.index()).is_some() {
            self.removed += 1;
        }
    }

    pub(crate) fn contains(&self, index: u32) -> bool {
        self.live.get(&index).is_some()
    }

    /// The device with index `index`, while it is in the set.
    pub(crate) fn get(&self, index: u32) -> Option<ARef<Device>> {
        self.live.get(&index).map(|e| e.device.clone())
    }

    /// The device called `name` now (a device may be renamed), while it is
    /// in the set. Names compare as UTF-8 (`to_str`, which both kernels'
    /// `CStr` have); one that is not matches nothing.
    pub(crate) fn find(&self, name: &CStr) -> Option<ARef<Device>> {
        self.live
            .values()
            .find(|e| matches!((e.device.name().to_str(), name.to_str()), (Ok(a), Ok(b)) if a == b))
            .map(|e| e.device.clone())
    }

    /// Writes one line per device: `rxe0 port=1 roce=1`.
    pub(crate) fn show(&self, out: &mut impl Write) -> core::fmt::Result {
        for dev in self.live.values() {
            write!(out, "{}", dev.name.to_str().unwrap_or("?"))?;
            for (port, roce) in dev.ports.iter() {
                write!(out, " port={} roce={}", port, u8::from(*roce))?;
            }
            writeln!(out)?;
        }
        Ok(())
    }

    /// Writes the counters: `devices_live`, `devices_added`, `devices_removed`.
    pub(crate) fn show_stats(&self, out: &mut impl Write) -> core::fmt::Result {
        writeln!(out, "devices_live {}", self.live.iter().count())?;
        writeln!(out, "devices_added {}", self.added)?;
        writeln!(out, "devices_removed {}", self.removed)
    }
}
