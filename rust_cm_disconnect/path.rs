// SPDX-License-Identifier: GPL-2.0

//! RoCE v2 path records to an IPv4 peer, resolved as rdma_cm resolves them.
//!
//! What rdma_cm's address and route resolution (`rdma_resolve_addr`, then
//! `cma_resolve_iboe_route`) fills in: the source GID entry of the local
//! address on the local port (its `ib_gid_attr`, which names the netdev the
//! connection leaves from), the next hop's MAC from the kernel's neighbour
//! resolution (`rdma_resolve_ip()`, bound to that netdev, which sends an ARP
//! request when the neighbour is not known yet and waits for its answer),
//! the hop limit of the route, and the path MTU of the port. One rxe device
//! talking to itself resolves through the loopback route to its own MAC;
//! a peer on another host, or another device of this host reached over a
//! wire, through ARP.
//!
//! Three steps: [`source_netdev`] (the source GID entry's netdev, with the
//! device held), [`next_hop`] (the neighbour resolution, bound to that
//! netdev's ifindex as `rdma_resolve_addr()` binds a request, holding
//! neither the GID entry nor the device: a device being unregistered is not
//! held up by a connect waiting for ARP), then [`route`] (the GID entry
//! looked up again, from a device the caller holds again, and the port's
//! MTU).
//!
//! # The resolution's callback
//!
//! `rdma_resolve_ip()` is asynchronous: it calls back from ib_core's
//! `ib_addr` workqueue once the neighbour is known, or with an error (no
//! route, `-ETIMEDOUT` when no neighbour answered in time). [`next_hop`]
//! waits for that callback, bounded, and then always calls
//! `rdma_addr_cancel()`, which returns only when no callback for the request
//! runs and none will: so no callback of ours outlives the call (the module
//! cannot unload under one: `next_hop` runs in a control write, which unload
//! waits for), and a waiter that gives up (its bound, a signal) takes the
//! request back before it frees anything. The callback owns a reference on
//! the [`Resolution`] it completes (the `context` ib_core hands back), so its
//! memory is alive whenever the callback runs; a callback cancelled before
//! it ran leaves that reference to the waiter.
//!
//! C headers: [`include/rdma/ib_addr.h`](srctree/include/rdma/ib_addr.h),
//! [`include/rdma/ib_cache.h`](srctree/include/rdma/ib_cache.h)

use crate::{errno, ib_client::Device};
use core::{
    ptr::NonNull,
    sync::atomic::{AtomicUsize, Ordering},
};
use kernel::{
    bindings,
    error::{code::*, from_err_ptr, to_result},
    ffi::{c_int, c_void},
    new_condvar, new_mutex,
    prelude::*,
    sync::{Arc, CondVar, CondVarTimeoutResult, Mutex},
    time::msecs_to_jiffies,
    types::Opaque,
};

/// How long a connect waits for the neighbour by default, in ms (what
/// rdma-core's tools give `rdma_resolve_addr`).
pub(crate) const RESOLVE_MS_DEFAULT: u32 = 2000;
/// The longest wait a connect may ask for, in ms.
pub(crate) const RESOLVE_MS_MAX: u32 = 60_000;
/// How much longer than the resolution's own bound its waiter waits for the
/// callback (ib_core's workqueue may run late on a busy machine).
const WAIT_SLACK_MS: u32 = 1000;

extern "C" {
    /// In `rust_cm_disconnect_exports.c`: the ifindex of the netdev of a GID
    /// entry, read under RCU (`rdma_read_gid_attr_ndev_rcu()`), or a negative
    /// errno if the entry has none any more. (`attr` is a `struct
    /// ib_gid_attr`, passed untyped: its binding is not FFI-safe.)
    fn rcd_gid_attr_ifindex(attr: *const c_void) -> c_int;
}

/// Resolutions alive ([`Resolution`]s not yet freed): 0 whenever no connect
/// is resolving, unless a request outlived its waiter.
static LIVE_RESOLUTIONS: AtomicUsize = AtomicUsize::new(0);

/// How many resolutions are alive right now (`stats`: `resolutions_live`).
pub(crate) fn live_resolutions() -> usize {
    LIVE_RESOLUTIONS.load(Ordering::Relaxed)
}

/// The IPv4-mapped GID `::ffff:a.b.c.d`, as RoCE v2 uses for IPv4.
pub(crate) fn ipv4_gid(ip: [u8; 4]) -> bindings::ib_gid {
    let mut raw = [0u8; 16];
    raw[10] = 0xff;
    raw[11] = 0xff;
    raw[12..].copy_from_slice(&ip);
    bindings::ib_gid { raw }
}

/// A `struct sockaddr_in` for `ip`, port 0.
fn sockaddr_in(ip: [u8; 4]) -> bindings::sockaddr_in {
    bindings::sockaddr_in {
        sin_family: bindings::AF_INET as u16,
        sin_port: 0,
        sin_addr: bindings::in_addr {
            // Network order: the bytes as they are written.
            s_addr: u32::from_ne_bytes(ip),
        },
        __pad: [0; 8],
    }
}

/// A reference on a GID table entry.
///
/// # Invariants
///
/// Holds a reference on a valid `struct ib_gid_attr`, put in `drop`.
pub(crate) struct GidAttr(NonNull<bindings::ib_gid_attr>);

impl GidAttr {
    /// The RoCE v2 entry for `gid` on `device` port `port`, or `ENOENT`.
    pub(crate) fn find_roce_v2(device: &Device, gid: &bindings::ib_gid, port: u32) -> Result<Self> {
        let gid_type = bindings::ib_gid_type_IB_GID_TYPE_ROCE_UDP_ENCAP;
        // SAFETY: `device` is registered and `gid` valid; no netdev filter.
        let attr = unsafe {
            bindings::rdma_find_gid_by_port(
                device.as_raw(),
                gid,
                gid_type,
                port,
                core::ptr::null_mut(),
            )
        };
        let attr = from_err_ptr(attr.cast_mut())?;
        // INVARIANT: the lookup returns a held entry on success.
        NonNull::new(attr).map(Self).ok_or(ENOENT)
    }

    pub(crate) fn as_raw(&self) -> *const bindings::ib_gid_attr {
        self.0.as_ptr()
    }

    /// The ifindex of the netdev this entry's traffic leaves from; `ENODEV`
    /// if the entry has lost its netdev (being deleted). `device` is the
    /// device the entry was found on.
    fn ifindex(&self, device: &Device) -> Result<c_int> {
        // SAFETY: The entry is held (type invariant); the C side reads its
        // device's GID table, and that device is `device` (both callers in
        // this file found the entry on it), registered while `&Device` lives.
        let ret = unsafe { rcd_gid_attr_ifindex(self.as_raw().cast()) };
        let _ = device;
        if ret < 0 {
            return Err(Error::from_errno(ret));
        }
        Ok(ret)
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

/// The ifindex of the netdev that `src`, a RoCE v2 address of `device` port
/// `port`, leaves from: what [`next_hop`] is bound to. `ENOENT` if `src` is
/// not such an address.
pub(crate) fn source_netdev(device: &Device, port: u32, src: [u8; 4]) -> Result<c_int> {
    GidAttr::find_roce_v2(device, &ipv4_gid(src), port)?.ifindex(device)
}

/// The next hop from `src` to `dst` out of netdev `ifindex`, by the kernel's
/// neighbour resolution (ARP when the neighbour is not known), waiting at
/// most about `resolve_ms`. Holds no device meanwhile.
///
/// Errors: the route's (`ENETUNREACH`, `EHOSTUNREACH`, ...); `EHOSTUNREACH`
/// if no neighbour answered within `resolve_ms`; `ETIMEDOUT` if the
/// resolution did not report within a second more; `EINTR` on a signal.
pub(crate) fn next_hop(
    ifindex: c_int,
    src: [u8; 4],
    dst: [u8; 4],
    resolve_ms: u32,
) -> Result<NextHop> {
    Resolution::run(ifindex, src, dst, resolve_ms)
}

/// The path record from `src` on `device` port `port` to `dst` through
/// `hop` (from [`next_hop`]), as rdma_cm fills it in: the source GID entry
/// (looked up again: `ENOENT` if `src` is gone from the port, `ENODEV` if
/// it now leaves from another netdev than the one resolved), the port's MTU.
pub(crate) fn route(
    device: &Device,
    port: u32,
    src: [u8; 4],
    dst: [u8; 4],
    hop: &NextHop,
    timing: Timing,
) -> Result<Route> {
    let sgid = ipv4_gid(src);
    let sgid_attr = GidAttr::find_roce_v2(device, &sgid, port)?;
    if sgid_attr.ifindex(device)? != hop.ifindex {
        return Err(ENODEV);
    }
    let mut port_attr = bindings::ib_port_attr::default();
    // SAFETY: `device` is registered, `port` one of its ports (the GID was
    // found there), `port_attr` valid for writes.
    to_result(unsafe { bindings::ib_query_port(device.as_raw(), port, &mut port_attr) })?;

    let mut path = bindings::sa_path_rec {
        sgid,
        dgid: ipv4_gid(dst),
        rec_type: bindings::sa_path_rec_type_SA_PATH_REC_TYPE_ROCE_V2,
        reversible: 1,
        pkey: 0xffffu16.to_be(),
        mtu_selector: bindings::ib_sa_selector_IB_SA_EQ as u8,
        mtu: port_attr.active_mtu as u8,
        rate_selector: bindings::ib_sa_selector_IB_SA_EQ as u8,
        rate: bindings::ib_rate_IB_RATE_PORT_CURRENT as u8,
        packet_life_time_selector: bindings::ib_sa_selector_IB_SA_EQ as u8,
        packet_life_time: timing.packet_life_time,
        hop_limit: hop.hop_limit,
        ..Default::default()
    };
    // SAFETY: The path is a RoCE record, so `roce` is the union's member.
    let roce = unsafe { &mut path.__bindgen_anon_1.roce };
    roce.route_resolved = true;
    roce.dmac = hop.dmac;
    Ok(Route { path, sgid_attr })
}

/// What the neighbour resolution found.
pub(crate) struct NextHop {
    /// The next hop's MAC.
    pub(crate) dmac: [u8; 6],
    hop_limit: u8,
    /// The netdev the resolution was bound to.
    ifindex: c_int,
}

/// Counts itself in [`LIVE_RESOLUTIONS`] while it exists.
struct Live;

impl Live {
    fn new() -> Self {
        LIVE_RESOLUTIONS.fetch_add(1, Ordering::Relaxed);
        Live
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        LIVE_RESOLUTIONS.fetch_sub(1, Ordering::Relaxed);
    }
}

/// One `rdma_resolve_ip()` request and its completion.
///
/// # Invariants
///
/// While a request on `addr` is queued in ib_core (from a successful
/// `rdma_resolve_ip()` until its callback has returned or
/// `rdma_addr_cancel()` has returned), that request holds one reference on
/// this `Resolution` (its `context`), and nothing but ib_core writes `addr`.
#[pin_data]
struct Resolution {
    #[pin]
    addr: Opaque<bindings::rdma_dev_addr>,
    /// The callback's status, `None` until it has run.
    #[pin]
    status: Mutex<Option<c_int>>,
    #[pin]
    done: CondVar,
    _live: Live,
}

impl Resolution {
    /// Resolves `dst`'s next hop from `src`, through netdev `ifindex`,
    /// waiting for the callback at most `resolve_ms` and a second.
    fn run(ifindex: c_int, src: [u8; 4], dst: [u8; 4], resolve_ms: u32) -> Result<NextHop> {
        let init = bindings::rdma_dev_addr {
            // Bound to the source's netdev, as `rdma_resolve_addr()` binds a
            // request (`resolve_by_gid_attr` false below): no GID entry is
            // held while the request waits. The test bed's addresses are in
            // the initial namespace.
            net: core::ptr::addr_of_mut!(bindings::init_net),
            bound_dev_if: ifindex,
            ..Default::default()
        };
        let this = Arc::pin_init(
            pin_init!(Self {
                addr: Opaque::new(init),
                status <- new_mutex!(None),
                done <- new_condvar!("path::Resolution::done"),
                _live: Live::new(),
            }),
            GFP_KERNEL,
        )?;
        let mut src_in = sockaddr_in(src);
        let dst_in = sockaddr_in(dst);
        let ctx = Arc::into_raw(this.clone());
        // SAFETY: Both addresses are valid `sockaddr_in`s (copied before the
        // call returns); `addr` is valid and stays so while the request is
        // queued (the request's reference `ctx`, type invariant), and has no
        // `sgid_attr` (not resolved by one); `resolved` matches the
        // callback's type and takes `ctx`.
        let ret = unsafe {
            bindings::rdma_resolve_ip(
                (&mut src_in as *mut bindings::sockaddr_in).cast(),
                (&dst_in as *const bindings::sockaddr_in).cast(),
                this.addr.get(),
                resolve_ms as usize,
                Some(Self::resolved),
                false,
                ctx.cast_mut().cast(),
            )
        };
        if ret != 0 {
            // SAFETY: Nothing was queued, so no callback takes the
            // reference given for it: it is ours again.
            drop(unsafe { Arc::from_raw(ctx) });
            return Err(Error::from_errno(ret));
        }
        let waited = this.wait(resolve_ms.saturating_add(WAIT_SLACK_MS));
        // SAFETY: `addr` is the request's, alive (we hold `this`). On return
        // no callback for it runs any more, nor will one start.
        unsafe { bindings::rdma_addr_cancel(this.addr.get()) };
        let status = *this.status.lock();
        let status = match status {
            Some(status) => status,
            None => {
                // SAFETY: The request was cancelled before its callback ran,
                // so the reference given for it is ours again.
                drop(unsafe { Arc::from_raw(ctx) });
                waited?;
                // The callback was seen (`waited` is `Ok` only then), so a
                // status is there: not reached.
                return Err(errno::etimedout());
            }
        };
        match -status {
            0 => {}
            // No neighbour answered in time (ib_core says `-ETIMEDOUT`, or
            // `-ENODATA` if the last try found none): the address is not
            // reachable, as a socket's connect reports it.
            e if e == bindings::ETIMEDOUT as c_int || e == bindings::ENODATA as c_int => {
                return Err(errno::ehostunreach())
            }
            _ => return Err(Error::from_errno(status)),
        }
        // SAFETY: The request is over (cancelled above), so nothing else
        // accesses `addr`.
        let addr = unsafe { &*this.addr.get() };
        let mut dmac = [0u8; 6];
        dmac.copy_from_slice(&addr.dst_dev_addr[..6]);
        Ok(NextHop {
            dmac,
            hop_limit: addr.hoplimit.clamp(1, 255) as u8,
            ifindex,
        })
    }

    /// Waits until the callback has recorded its status: `ETIMEDOUT` after
    /// `ms`, `EINTR` on a signal.
    fn wait(&self, ms: u32) -> Result {
        let mut left = msecs_to_jiffies(ms);
        let mut status = self.status.lock();
        while status.is_none() {
            match self.done.wait_interruptible_timeout(&mut status, left) {
                CondVarTimeoutResult::Woken { jiffies } => left = jiffies,
                CondVarTimeoutResult::Timeout => return Err(errno::etimedout()),
                CondVarTimeoutResult::Signal { .. } => return Err(EINTR),
            }
        }
        Ok(())
    }

    /// `rdma_resolve_ip()`'s callback, on ib_core's `ib_addr` workqueue.
    ///
    /// # Safety
    ///
    /// `context` is the reference on a `Resolution` given with its request
    /// (type invariant); this callback takes it over.
    unsafe extern "C" fn resolved(
        status: c_int,
        _src: *mut bindings::sockaddr,
        _addr: *mut bindings::rdma_dev_addr,
        context: *mut c_void,
    ) {
        // SAFETY: The request's reference (function's safety requirement).
        let this = unsafe { Arc::<Self>::from_raw(context.cast_const().cast()) };
        *this.status.lock() = Some(status);
        this.done.notify_all();
        // The waiter holds its own reference until it has cancelled the
        // request, which waits for this callback to return.
        drop(this);
    }
}
