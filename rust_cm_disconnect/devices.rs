// SPDX-License-Identifier: GPL-2.0

//! The RDMA devices this module can use: every device with a port that
//! supports the IB connection manager (InfiniBand, RoCE: rxe included).

use crate::ib_client::{Client, Device};
use core::fmt::Write;
use kernel::{
    error::code::*,
    new_mutex,
    prelude::*,
    str::CString,
    sync::{Arc, Mutex},
};

/// What is known of one device between its `add` and its `remove`.
pub(crate) struct DeviceEntry {
    pub(crate) name: CString,
    /// Ports with IB CM support, and whether each is RoCE.
    pub(crate) ports: KVec<(u32, bool)>,
}

/// All devices seen, and how many came and went.
#[pin_data]
pub(crate) struct Devices {
    #[pin]
    inner: Mutex<DevicesInner>,
}

struct DevicesInner {
    live: KVec<Arc<DeviceEntry>>,
    added: u64,
    removed: u64,
}

impl Devices {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            inner <- new_mutex!(DevicesInner {
                live: KVec::new(),
                added: 0,
                removed: 0,
            }),
        })
    }

    /// Writes one line per live device: `rxe0 port=1 roce=1`.
    pub(crate) fn show(&self, out: &mut impl Write) -> core::fmt::Result {
        let inner = self.inner.lock();
        for dev in inner.live.iter() {
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
        let inner = self.inner.lock();
        writeln!(out, "devices_live {}", inner.live.len())?;
        writeln!(out, "devices_added {}", inner.added)?;
        writeln!(out, "devices_removed {}", inner.removed)
    }
}

impl Client for Devices {
    type DeviceData = Arc<DeviceEntry>;

    fn add(&self, device: &Device) -> Result<Arc<DeviceEntry>> {
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
        let entry = Arc::new(
            DeviceEntry {
                name: CString::try_from_fmt(fmt!("{}", device.name()))?,
                ports,
            },
            GFP_KERNEL,
        )?;
        let mut inner = self.inner.lock();
        inner.live.push(entry.clone(), GFP_KERNEL)?;
        inner.added += 1;
        pr_info!(
            "device {} added ({} IB CM port(s))\n",
            device.name(),
            entry.ports.len()
        );
        Ok(entry)
    }

    fn remove(&self, device: &Device, entry: Arc<DeviceEntry>) {
        let mut inner = self.inner.lock();
        inner.live.retain(|e| !Arc::ptr_eq(e, &entry));
        inner.removed += 1;
        pr_info!("device {} removed\n", device.name());
    }
}
