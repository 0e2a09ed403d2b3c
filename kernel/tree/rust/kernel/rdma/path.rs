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
//! A consumer that has its path by other means (an SA query on InfiniBand,
//! its own neighbour table, a peer's REQ) builds a [`PathRecord`] and makes
//! it a [`Route`] with [`Route::new`]: the resolution above is rdma_cm's
//! way, for IPv4 only (its resolution and its GID lookup take an IPv4
//! address), and not the only one.
//!
//! # The resolution's callback
//!
//! `rdma_resolve_ip()` is asynchronous: it calls back from ib_core's
//! `ib_addr` workqueue once the neighbour is known, or with an error (no
//! route, `-ETIMEDOUT` when no neighbour answered in time). [`next_hop`]
//! waits for that callback, bounded, and then always calls
//! `rdma_addr_cancel()`, which returns only when no callback for the request
//! runs and none will: so no callback outlives the call (nor the caller's
//! data), and a waiter that gives up (its bound, a signal) takes the
//! request back before it frees anything. The callback owns a reference on
//! the resolution it completes (the `context` ib_core hands back), so its
//! memory is alive whenever the callback runs; a callback cancelled before
//! it ran leaves that reference to the waiter.
//!
//! C headers: [`include/rdma/ib_addr.h`](srctree/include/rdma/ib_addr.h),
//! [`include/rdma/ib_cache.h`](srctree/include/rdma/ib_cache.h)

use super::device::Device;
use crate::{
    bindings,
    error::{from_err_ptr, to_result},
    ffi::{c_int, c_void},
    new_condvar, new_mutex,
    prelude::*,
    sync::aref::{ARef, AlwaysRefCounted},
    sync::{rcu, Arc, CondVar, CondVarTimeoutResult, Mutex},
    time::msecs_to_jiffies,
    types::Opaque,
};
use core::ptr::NonNull;

/// A GID: a port's 128-bit address (for RoCE v2 over IPv4, the IPv4-mapped
/// IPv6 address of one of the netdev's addresses).
///
/// # Examples
///
/// ```
/// use kernel::rdma::path::Gid;
///
/// let gid = Gid::ipv4_mapped([192, 168, 1, 2]);
/// assert_eq!(gid.0[..12], [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]);
/// assert_eq!(gid.0[12..], [192, 168, 1, 2]);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Gid(pub [u8; 16]);

impl Gid {
    /// The IPv4-mapped GID `::ffff:a.b.c.d`, as RoCE v2 uses for IPv4.
    pub fn ipv4_mapped(ip: [u8; 4]) -> Self {
        let mut raw = [0u8; 16];
        raw[10] = 0xff;
        raw[11] = 0xff;
        raw[12..].copy_from_slice(&ip);
        Self(raw)
    }

    fn to_raw(self) -> bindings::ib_gid {
        bindings::ib_gid { raw: self.0 }
    }

    fn from_raw(gid: &bindings::ib_gid) -> Self {
        // SAFETY: Every member of `union ib_gid` is plain bytes; `raw`
        // covers all 16 of them.
        Self(unsafe { gid.raw })
    }
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

/// An entry of a port's GID table (`struct ib_gid_attr`), held by an
/// [`ARef`]: its GID, its type and the netdev its traffic leaves from.
///
/// # Invariants
///
/// The wrapped `struct ib_gid_attr` is valid for the lifetime of every
/// `&GidAttr`: a reference on it (`rdma_hold_gid_attr()`) is held.
#[repr(transparent)]
pub struct GidAttr(Opaque<bindings::ib_gid_attr>);

impl GidAttr {
    /// The RoCE v2 entry for `gid` on `device` port `port`, held, or
    /// `ENOENT`.
    pub fn find_roce_v2(device: &Device, gid: &Gid, port: u32) -> Result<ARef<Self>> {
        Self::find(
            device,
            gid,
            bindings::ib_gid_type_IB_GID_TYPE_ROCE_UDP_ENCAP,
            port,
        )
    }

    /// The entry of type `gid_type` for `gid` on `device` port `port`, held,
    /// or `ENOENT`.
    fn find(
        device: &Device,
        gid: &Gid,
        gid_type: bindings::ib_gid_type,
        port: u32,
    ) -> Result<ARef<Self>> {
        let raw = gid.to_raw();
        // SAFETY: `device` is registered and `raw` valid for the call; no
        // netdev filter.
        let attr = unsafe {
            bindings::rdma_find_gid_by_port(
                device.as_raw(),
                &raw,
                gid_type,
                port,
                core::ptr::null_mut(),
            )
        };
        let attr = from_err_ptr(attr.cast_mut())?;
        let attr = NonNull::new(attr).ok_or(ENOENT)?;
        // SAFETY: The lookup returned a held entry, whose reference the
        // `ARef` owns from here; `GidAttr` is a transparent wrapper.
        Ok(unsafe { ARef::from_raw(attr.cast()) })
    }

    /// Returns the raw `struct ib_gid_attr` pointer.
    pub fn as_raw(&self) -> *const bindings::ib_gid_attr {
        self.0.get()
    }

    /// The ifindex of the netdev this entry's traffic leaves from; `ENODEV`
    /// if the entry has lost its netdev (being deleted).
    pub fn ifindex(&self) -> Result<c_int> {
        let _rcu = rcu::read_lock();
        // SAFETY: The entry is held (type invariant), and read under RCU as
        // `rdma_read_gid_attr_ndev_rcu()` wants.
        let ndev = unsafe { bindings::rdma_read_gid_attr_ndev_rcu(self.as_raw()) };
        match from_err_ptr(ndev) {
            // SAFETY: A netdev the entry pointed at under RCU stays valid
            // while `_rcu` is held; `ifindex` is set at registration.
            Ok(ndev) if !ndev.is_null() => Ok(unsafe { (*ndev).ifindex }),
            _ => Err(ENODEV),
        }
    }
}

// SAFETY: A reference on an entry keeps it valid: `inc_ref` and `dec_ref`
// are `rdma_hold_gid_attr()` and `rdma_put_gid_attr()`.
unsafe impl AlwaysRefCounted for GidAttr {
    fn inc_ref(&self) {
        // SAFETY: By the type invariant the entry is held, so valid.
        unsafe { bindings::rdma_hold_gid_attr(self.as_raw()) };
    }

    unsafe fn dec_ref(obj: NonNull<Self>) {
        // SAFETY: The caller owns a reference (`AlwaysRefCounted`'s contract).
        unsafe { bindings::rdma_put_gid_attr(obj.as_ref().as_raw()) };
    }
}

// SAFETY: A GID entry does not change once published (its netdev is read
// under RCU); its reference count is atomic.
unsafe impl Send for GidAttr {}
// SAFETY: As for `Send`.
unsafe impl Sync for GidAttr {}

/// CM timing of a connection: what its DREQ (and REQ, REP) retries wait.
///
/// The CM waits `2 * 4.096 us * 2^packet_life_time + 4.096 us *
/// 2^cm_response_timeout` per try and tries `max_cm_retries + 1` times.
/// The path record carries `packet_life_time` ([`route`]), the REQ the
/// other two (`kernel::rdma::cm::Req`).
///
/// # Examples
///
/// ```
/// use kernel::rdma::path::Timing;
///
/// // rdma_cm's values for RoCE are 16, 20 and 15 (`CMA_IBOE_PACKET_LIFETIME`,
/// // `CMA_CM_RESPONSE_TIMEOUT`, `CMA_MAX_CM_RETRIES`): the caller's choice.
/// let t = Timing { packet_life_time: 16, cm_response_timeout: 20, max_cm_retries: 2 };
/// assert!(t.check().is_ok());
/// assert!(Timing { max_cm_retries: 16, ..t }.check().is_err());
/// assert!(Timing { packet_life_time: 32, ..t }.check().is_err());
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Timing {
    /// The path's packet lifetime, `4.096 us * 2^packet_life_time` (0..=31).
    pub packet_life_time: u8,
    /// How long the peer's CM may take to answer,
    /// `4.096 us * 2^cm_response_timeout` (0..=31).
    pub cm_response_timeout: u8,
    /// How often the CM resends an unanswered REQ, REP or DREQ (0..=15).
    pub max_cm_retries: u8,
}

impl Timing {
    /// `EINVAL` unless every field fits its wire field (5, 5 and 4 bits).
    pub fn check(&self) -> Result {
        if self.packet_life_time > 31 || self.cm_response_timeout > 31 || self.max_cm_retries > 15 {
            return Err(EINVAL);
        }
        Ok(())
    }
}

/// A path record (`struct sa_path_rec`): what a REQ carries about the path
/// to the peer, and what the CM builds its address handle from.
///
/// A consumer builds one for RoCE v2 ([`PathRecord::roce_v2`]) or
/// InfiniBand ([`PathRecord::ib`]) from what it knows of the peer, and
/// makes it a [`Route`] on a port with [`Route::new`]; [`route`] builds one
/// as rdma_cm does.
///
/// # Examples
///
/// ```
/// use kernel::rdma::path::{Gid, PathRecord};
///
/// let rec = PathRecord::roce_v2(
///     Gid::ipv4_mapped([10, 0, 0, 1]),
///     Gid::ipv4_mapped([10, 0, 0, 2]),
///     [0x02, 0, 0, 0, 0, 2],
///     64,
/// );
/// assert_eq!(rec.dgid(), Gid::ipv4_mapped([10, 0, 0, 2]));
/// assert_eq!(rec.hop_limit(), 64);
/// assert!(rec.is_roce_v2());
/// assert!(!PathRecord::ib(rec.sgid(), rec.dgid(), 1, 2, 0).is_roce_v2());
/// ```
#[derive(Clone, Copy)]
pub struct PathRecord(bindings::sa_path_rec);

impl PathRecord {
    fn new(sgid: Gid, dgid: Gid, rec_type: bindings::sa_path_rec_type, hop_limit: u8) -> Self {
        Self(bindings::sa_path_rec {
            sgid: sgid.to_raw(),
            dgid: dgid.to_raw(),
            rec_type,
            reversible: 1,
            pkey: 0xffffu16.to_be(),
            mtu_selector: bindings::ib_sa_selector_IB_SA_EQ as u8,
            rate_selector: bindings::ib_sa_selector_IB_SA_EQ as u8,
            rate: bindings::ib_rate_IB_RATE_PORT_CURRENT as u8,
            packet_life_time_selector: bindings::ib_sa_selector_IB_SA_EQ as u8,
            hop_limit,
            ..Default::default()
        })
    }

    /// A RoCE v2 path from `sgid` (one of the port's RoCE v2 GIDs) to
    /// `dgid`, whose next hop is `dmac`, with `hop_limit` for its IP
    /// header. Default partition; the MTU and the packet lifetime are set
    /// by [`Route::new`].
    pub fn roce_v2(sgid: Gid, dgid: Gid, dmac: [u8; 6], hop_limit: u8) -> Self {
        let mut rec = Self::new(
            sgid,
            dgid,
            bindings::sa_path_rec_type_SA_PATH_REC_TYPE_ROCE_V2,
            hop_limit,
        );
        // SAFETY: The record is a RoCE record, so `roce` is the union's
        // member.
        let roce = unsafe { &mut rec.0.__bindgen_anon_1.roce };
        roce.route_resolved = true;
        roce.dmac = dmac;
        rec
    }

    /// An InfiniBand path in one subnet from LID `slid` to LID `dlid` (host
    /// order) at service level `sl`, as an SA path query gives it; `sgid`
    /// is one of the port's GIDs, `dgid` the peer's. No GRH (hop limit 0);
    /// default partition; the MTU and the packet lifetime are set by
    /// [`Route::new`].
    pub fn ib(sgid: Gid, dgid: Gid, slid: u16, dlid: u16, sl: u8) -> Self {
        let mut rec = Self::new(
            sgid,
            dgid,
            bindings::sa_path_rec_type_SA_PATH_REC_TYPE_IB,
            0,
        );
        rec.0.sl = sl;
        // SAFETY: The record is an IB record, so `ib` is the union's member.
        let ib = unsafe { &mut rec.0.__bindgen_anon_1.ib };
        ib.slid = slid.to_be();
        ib.dlid = dlid.to_be();
        rec
    }

    /// Returns the raw `struct sa_path_rec`.
    pub fn as_raw(&self) -> &bindings::sa_path_rec {
        &self.0
    }

    /// Whether this is a RoCE v2 path (else InfiniBand or RoCE v1).
    pub fn is_roce_v2(&self) -> bool {
        self.0.rec_type == bindings::sa_path_rec_type_SA_PATH_REC_TYPE_ROCE_V2
    }

    /// The source GID.
    pub fn sgid(&self) -> Gid {
        Gid::from_raw(&self.0.sgid)
    }

    /// The destination GID.
    pub fn dgid(&self) -> Gid {
        Gid::from_raw(&self.0.dgid)
    }

    /// The hop limit (RoCE v2: the IP header's TTL; InfiniBand: the GRH's,
    /// 0 for none).
    pub fn hop_limit(&self) -> u8 {
        self.0.hop_limit
    }

    /// The path MTU, as `enum ib_mtu` numbers it (1: 256 bytes ... 5:
    /// 4096); 0 where [`Route::new`] has not set it yet.
    pub fn mtu(&self) -> u8 {
        self.0.mtu
    }

    /// The packet lifetime, `4.096 us * 2^packet_life_time`.
    pub fn packet_life_time(&self) -> u8 {
        self.0.packet_life_time
    }
}

/// A path to a peer and the source GID entry it leaves from: what a REQ is
/// sent along ([`Route::new`], or [`route`] as rdma_cm resolves it).
pub struct Route {
    path: PathRecord,
    sgid_attr: ARef<GidAttr>,
}

impl Route {
    /// `record` on `device` port `port`: its source GID entry (held), the
    /// port's active MTU, and `timing`'s packet lifetime.
    ///
    /// Errors: `EINVAL` if `port` is not one of the device's, the record's
    /// type is not the port's link layer (an InfiniBand path on a RoCE
    /// port, or the reverse) or `timing` does not fit; `ENOENT` if the
    /// record's source GID is not in the port's GID table with that type;
    /// the port query's error.
    pub fn new(device: &Device, port: u32, record: PathRecord, timing: Timing) -> Result<Self> {
        timing.check()?;
        // Drivers index their ports with it, unchecked.
        if !device.ports().contains(&port) {
            return Err(EINVAL);
        }
        // SAFETY: `device` is registered (a `&Device` is held) and `port` is
        // one of its ports.
        let link = unsafe { bindings::rdma_port_get_link_layer(device.as_raw(), port) };
        let gid_type = match link {
            bindings::rdma_link_layer_IB_LINK_LAYER_ETHERNET if record.is_roce_v2() => {
                bindings::ib_gid_type_IB_GID_TYPE_ROCE_UDP_ENCAP
            }
            bindings::rdma_link_layer_IB_LINK_LAYER_INFINIBAND
                if record.0.rec_type == bindings::sa_path_rec_type_SA_PATH_REC_TYPE_IB =>
            {
                bindings::ib_gid_type_IB_GID_TYPE_IB
            }
            _ => return Err(EINVAL),
        };
        let sgid_attr = GidAttr::find(device, &record.sgid(), gid_type, port)?;
        let mut port_attr = bindings::ib_port_attr::default();
        // SAFETY: `device` is registered, `port` one of its ports (the GID was
        // found there), `port_attr` valid for writes.
        to_result(unsafe { bindings::ib_query_port(device.as_raw(), port, &mut port_attr) })?;
        let mut path = record;
        path.0.mtu = port_attr.active_mtu as u8;
        path.0.packet_life_time = timing.packet_life_time;
        Ok(Self { path, sgid_attr })
    }

    /// The source GID entry the connection leaves from.
    pub fn sgid_attr(&self) -> &GidAttr {
        &self.sgid_attr
    }

    /// The path record a REQ sent along this route carries (the peer's GID
    /// and MAC, the MTU, the rate, the packet life time).
    pub fn path_record(&self) -> &PathRecord {
        &self.path
    }
}

/// The ifindex of the netdev that `src`, a RoCE v2 address of `device` port
/// `port`, leaves from: what [`next_hop`] is bound to. `ENOENT` if `src` is
/// not such an address.
pub fn source_netdev(device: &Device, port: u32, src: [u8; 4]) -> Result<c_int> {
    GidAttr::find_roce_v2(device, &Gid::ipv4_mapped(src), port)?.ifindex()
}

/// The next hop from `src` to `dst` out of netdev `ifindex`, by the kernel's
/// neighbour resolution (ARP when the neighbour is not known), which gives
/// up after `resolve_ms`. Holds no device meanwhile.
///
/// ib_core reports the outcome from its `ib_addr` workqueue, which may run
/// late on a busy machine: the caller's `wait_ms` bounds the wait for that
/// report (more than `resolve_ms`, or a resolution that would have
/// succeeded is cut short). Either way the request is cancelled before this
/// returns: nothing of it outlives the call.
///
/// Errors: the route's (`ENETUNREACH`, `EHOSTUNREACH`, ...); `EHOSTUNREACH`
/// if no neighbour answered within `resolve_ms`; `ETIMEDOUT` if the
/// resolution did not report within `wait_ms`; `EINTR` on a signal.
///
/// Process context; sleeps.
pub fn next_hop(
    ifindex: c_int,
    src: [u8; 4],
    dst: [u8; 4],
    resolve_ms: u32,
    wait_ms: u32,
) -> Result<NextHop> {
    Resolution::run(ifindex, src, dst, resolve_ms, wait_ms)
}

/// The path record from `src` on `device` port `port` to `dst` through
/// `hop` (from [`next_hop`]), as rdma_cm fills it in: the source GID entry
/// (looked up again: `ENOENT` if `src` is gone from the port, `ENODEV` if
/// it now leaves from another netdev than the one resolved), the port's MTU,
/// and `timing`'s packet lifetime (`EINVAL` if `timing` does not fit).
pub fn route(
    device: &Device,
    port: u32,
    src: [u8; 4],
    dst: [u8; 4],
    hop: &NextHop,
    timing: Timing,
) -> Result<Route> {
    let record = PathRecord::roce_v2(
        Gid::ipv4_mapped(src),
        Gid::ipv4_mapped(dst),
        hop.dmac,
        hop.hop_limit,
    );
    let route = Route::new(device, port, record, timing)?;
    if route.sgid_attr.ifindex()? != hop.ifindex {
        return Err(ENODEV);
    }
    Ok(route)
}

/// What the neighbour resolution found ([`next_hop`]).
pub struct NextHop {
    /// The next hop's MAC.
    pub dmac: [u8; 6],
    hop_limit: u8,
    /// The netdev the resolution was bound to.
    ifindex: c_int,
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
}

impl Resolution {
    /// Resolves `dst`'s next hop from `src`, through netdev `ifindex`,
    /// within `resolve_ms`, waiting for the callback at most `wait_ms`.
    fn run(
        ifindex: c_int,
        src: [u8; 4],
        dst: [u8; 4],
        resolve_ms: u32,
        wait_ms: u32,
    ) -> Result<NextHop> {
        let init = bindings::rdma_dev_addr {
            // Bound to the source's netdev, as `rdma_resolve_addr()` binds a
            // request (`resolve_by_gid_attr` false below): no GID entry is
            // held while the request waits. Addresses are looked up in the
            // initial network namespace.
            net: core::ptr::addr_of_mut!(bindings::init_net),
            bound_dev_if: ifindex,
            ..Default::default()
        };
        let this = Arc::pin_init(
            pin_init!(Self {
                addr: Opaque::new(init),
                status <- new_mutex!(None),
                done <- new_condvar!("path::Resolution::done"),
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
                core::ptr::from_mut(&mut src_in).cast(),
                core::ptr::from_ref(&dst_in).cast(),
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
        let waited = this.wait(wait_ms);
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
                return Err(ETIMEDOUT);
            }
        };
        match -status {
            0 => {}
            // No neighbour answered in time (ib_core says `-ETIMEDOUT`, or
            // `-ENODATA` if the last try found none): the address is not
            // reachable, as a socket's connect reports it.
            e if e == bindings::ETIMEDOUT as c_int || e == bindings::ENODATA as c_int => {
                return Err(EHOSTUNREACH)
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
                CondVarTimeoutResult::Timeout => return Err(ETIMEDOUT),
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
