// SPDX-License-Identifier: GPL-2.0

//! RoCE v2 path records between IPv4 addresses of this host's RDMA devices.
//!
//! What rdma_cm's route resolution (`cma_resolve_iboe_route`) fills in, taken
//! from the GID tables instead of ARP: the source GID entry of the local
//! address on the local port, and the peer's MAC from the GID entry of the
//! destination address on whichever local device holds it. That covers one
//! rxe device talking to itself (the MAC is its own) and two rxe devices of
//! one host; a peer on another host would need neighbour resolution.
//!
//! C header: [`include/rdma/ib_cache.h`](srctree/include/rdma/ib_cache.h)

use crate::ib_client::Device;
use core::ptr::NonNull;
use kernel::{bindings, error::from_err_ptr, prelude::*};

/// The IPv4-mapped GID `::ffff:a.b.c.d`, as RoCE v2 uses for IPv4.
pub(crate) fn ipv4_gid(ip: [u8; 4]) -> bindings::ib_gid {
    let mut raw = [0u8; 16];
    raw[10] = 0xff;
    raw[11] = 0xff;
    raw[12..].copy_from_slice(&ip);
    bindings::ib_gid { raw }
}

/// A reference on a GID table entry.
///
/// # Invariants
///
/// Holds a reference on a valid `struct ib_gid_attr`, put in `drop`.
pub(crate) struct GidAttr(NonNull<bindings::ib_gid_attr>);

impl GidAttr {
    /// The RoCE v2 entry for `gid` on `device` (on `port` if given), or
    /// `ENOENT`.
    pub(crate) fn find_roce_v2(
        device: &Device,
        gid: &bindings::ib_gid,
        port: Option<u32>,
    ) -> Result<Self> {
        let gid_type = bindings::ib_gid_type_IB_GID_TYPE_ROCE_UDP_ENCAP;
        let null = core::ptr::null_mut();
        let attr = match port {
            // SAFETY: `device` is registered and `gid` valid; no netdev filter.
            Some(port) => unsafe {
                bindings::rdma_find_gid_by_port(device.as_raw(), gid, gid_type, port, null)
            },
            // SAFETY: As above.
            None => unsafe { bindings::rdma_find_gid(device.as_raw(), gid, gid_type, null) },
        };
        let attr = from_err_ptr(attr.cast_mut())?;
        // INVARIANT: both lookups return a held entry on success.
        NonNull::new(attr).map(Self).ok_or(ENOENT)
    }

    /// The MAC address of the entry's network device.
    pub(crate) fn mac(&self) -> Result<[u8; 6]> {
        let mut mac = [0u8; 6];
        let mut vlan: u16 = 0;
        // SAFETY: By the type invariant the entry is valid; `mac` has the six
        // bytes of an Ethernet address.
        kernel::error::to_result(unsafe {
            bindings::rdma_read_gid_l2_fields(self.0.as_ptr(), &mut vlan, mac.as_mut_ptr())
        })?;
        Ok(mac)
    }

    pub(crate) fn as_raw(&self) -> *const bindings::ib_gid_attr {
        self.0.as_ptr()
    }
}

impl Drop for GidAttr {
    fn drop(&mut self) {
        // SAFETY: The reference taken by the lookup (type invariant).
        unsafe { bindings::rdma_put_gid_attr(self.0.as_ptr()) };
    }
}

/// CM timing of a connection: what its DREQ (and REQ, REP) retries wait.
///
/// The CM waits `2 * 4.096 us * 2^packet_life_time + 4.096 us *
/// 2^cm_response_timeout` per try and tries `max_cm_retries + 1` times.
#[derive(Clone, Copy)]
pub(crate) struct Timing {
    pub(crate) packet_life_time: u8,
    pub(crate) cm_response_timeout: u8,
    pub(crate) max_cm_retries: u8,
}

impl Timing {
    /// rdma_cm's values for RoCE (`CMA_IBOE_PACKET_LIFETIME`,
    /// `CMA_CM_RESPONSE_TIMEOUT`, `CMA_MAX_CM_RETRIES`).
    pub(crate) const RDMA_CM: Self = Self {
        packet_life_time: 16,
        cm_response_timeout: 20,
        max_cm_retries: 15,
    };
}

/// A path to a peer and the source GID entry it leaves from.
pub(crate) struct Route {
    pub(crate) path: bindings::sa_path_rec,
    pub(crate) sgid_attr: GidAttr,
}

/// The path from `src` on `device` port `port` to `dst`, whose GID entry
/// `peer` was found on some device of this host.
pub(crate) fn roce_v2(
    device: &Device,
    port: u32,
    src: [u8; 4],
    peer: &GidAttr,
    timing: Timing,
) -> Result<Route> {
    let sgid = ipv4_gid(src);
    let sgid_attr = GidAttr::find_roce_v2(device, &sgid, Some(port))?;
    let mut port_attr = bindings::ib_port_attr::default();
    // SAFETY: `device` is registered, `port` one of its ports (the GID was
    // found there), `port_attr` valid for writes.
    kernel::error::to_result(unsafe {
        bindings::ib_query_port(device.as_raw(), port, &mut port_attr)
    })?;

    let mut path = bindings::sa_path_rec {
        sgid,
        // SAFETY: `gid` is the first field of a valid entry.
        dgid: unsafe { (*peer.as_raw()).gid },
        rec_type: bindings::sa_path_rec_type_SA_PATH_REC_TYPE_ROCE_V2,
        reversible: 1,
        pkey: 0xffffu16.to_be(),
        mtu_selector: bindings::ib_sa_selector_IB_SA_EQ as u8,
        mtu: port_attr.active_mtu as u8,
        rate_selector: bindings::ib_sa_selector_IB_SA_EQ as u8,
        rate: bindings::ib_rate_IB_RATE_PORT_CURRENT as u8,
        packet_life_time_selector: bindings::ib_sa_selector_IB_SA_EQ as u8,
        packet_life_time: timing.packet_life_time,
        hop_limit: 64,
        ..Default::default()
    };
    // SAFETY: The path is a RoCE record, so `roce` is the union's member.
    let roce = unsafe { &mut path.__bindgen_anon_1.roce };
    roce.route_resolved = true;
    roce.dmac = peer.mac()?;
    Ok(Route { path, sgid_attr })
}
