// SPDX-License-Identifier: GPL-2.0

//! The commands of the control interface on the table: listen, connect,
//! dreq/drep, disconnect, post, mr, rdma, poll, close.

use super::{
    behaviour::{copy, Behaviour},
    endpoint::{Endpoint, EndpointState, EpHandle, EventKind, Role, PASSIVE_BASE, REQ_MAGIC},
    now_ns,
    qp::{qp_size, CountedQp, RegWith},
    stats::{Counted, STATS},
    table::Core,
};
use crate::{
    cm::Message,
    cm::{CmId, Req},
    cma,
    path::{self, Gid, PathRecord, Route, Timing},
    product,
};
use kernel::{
    prelude::*,
    rdma::{
        device::Device,
        verbs::{Access, QpAttr, WrKind},
    },
    sync::{aref::ARef, Arc},
};

/// The largest buffer a work request of `post` carries: the module's own
/// bound (one page, one scatter entry; an MR registers up to
/// [`MR_BYTES`](super::qp::MR_BYTES)). Not a limit of RC,
/// which segments a SEND into packets of the path MTU; what bounds a SEND
/// on the wire is the peer's posted receive buffer (see `post`).
pub(crate) const MAX_WR_BYTES: usize = 4096;

/// What `post` asks for: `recv` receives, each with a `size`-byte buffer,
/// and `send` SENDs, each carrying `data`, or else `size` bytes of the
/// pattern 1, 2, .., 255, 1, .. (0: zero-length work requests); each
/// request's bytes in `sge` buffers, the first `unsig` SENDs unsignalled.
pub(crate) struct Post {
    pub(crate) recv: u32,
    pub(crate) send: u32,
    pub(crate) size: usize,
    pub(crate) data: Option<KVec<u8>>,
    pub(crate) sge: usize,
    pub(crate) unsig: u32,
}

impl Post {
    /// `recv` receives of `size` bytes, one buffer each.
    pub(crate) fn recv(recv: u32, size: usize) -> Self {
        Self {
            recv,
            send: 0,
            size,
            data: None,
            sge: 1,
            unsig: 0,
        }
    }
}

/// `buf` in `n` buffers of equal size (the last takes the rest), in
/// order: the first, and the others.
fn split(buf: KVec<u8>, n: usize) -> Result<(KVec<u8>, KVec<KVec<u8>>)> {
    if n <= 1 {
        return Ok((buf, KVec::new()));
    }
    let part = buf.len() / n;
    let mut more = KVec::with_capacity(n - 1, GFP_KERNEL)?;
    for i in 1..n {
        let end = if i == n - 1 {
            buf.len()
        } else {
            (i + 1) * part
        };
        more.push(copy(&buf[i * part..end])?, GFP_KERNEL)?;
    }
    Ok((copy(&buf[..part])?, more))
}

/// What `rdma` asks for: `count` RDMA READs (`kind` [`WrKind::RdmaRead`]) of
/// `len` bytes at the peer's `addr` with its `rkey`, or WRITEs of `data`
/// (or `len` pattern bytes) there.
pub(crate) struct Rdma {
    pub(crate) kind: WrKind,
    pub(crate) addr: u64,
    pub(crate) rkey: u32,
    pub(crate) len: usize,
    pub(crate) count: u32,
    pub(crate) data: Option<KVec<u8>>,
}

/// `len` bytes of the pattern 1, 2, .., 255, 1, ...
pub(super) fn pattern(len: usize) -> Result<KVec<u8>> {
    let mut v = KVec::with_capacity(len, GFP_KERNEL)?;
    for i in 0..len {
        v.push((i % 255) as u8 + 1, GFP_KERNEL)?;
    }
    Ok(v)
}

impl EndpointState {
    /// `mr NUM reg DATA`: registers a buffer holding DATA for the peer's
    /// RDMA READ and WRITE. `reg-at IDX`: with MR IDX whatever its state;
    /// `reg-foreign`: with an MR of a PD of its own, not the QP's.
    fn reg_mr(&mut self, with: RegWith, data: &[u8]) -> Result {
        if data.len() > super::qp::MR_BYTES {
            return Err(EMSGSIZE);
        }
        self.data_stats()?;
        let verbs = self.verbs.as_mut().ok_or(ENODEV)?;
        verbs.reg_mr_with(with, copy(data)?)?;
        self.wr.posted += 1;
        Ok(())
    }

    /// `mr NUM inval IDX`: invalidates MR `idx`; its buffer comes back.
    fn invalidate_mr(&mut self, idx: usize) -> Result {
        let verbs = self.verbs.as_mut().ok_or(ENODEV)?;
        verbs.invalidate_mr(idx)?;
        self.wr.posted += 1;
        Ok(())
    }

    /// `rdma NUM read|write ADDR RKEY LEN`: `r.count` RDMA READs of the
    /// peer's LEN bytes at ADDR, or WRITEs of `r.data` (or LEN pattern
    /// bytes) there. Checked first: `EMSGSIZE` over [`MAX_WR_BYTES`],
    /// `ENOMEM` if the send queue has no room for them all.
    fn rdma(&mut self, r: &Rdma) -> Result {
        let len = match (&r.data, r.kind) {
            (Some(d), WrKind::RdmaWrite) => d.len(),
            _ => r.len,
        };
        if len > MAX_WR_BYTES {
            return Err(EMSGSIZE);
        }
        if !self.verbs.as_ref().ok_or(ENODEV)?.has_room(r.kind, r.count) {
            return Err(ENOMEM);
        }
        self.data_stats()?;
        let verbs = self.verbs.as_mut().ok_or(ENODEV)?;
        for _ in 0..r.count {
            let buf = match (&r.data, r.kind) {
                (Some(d), WrKind::RdmaWrite) => copy(d)?,
                (None, WrKind::RdmaWrite) => pattern(len)?,
                _ => {
                    let mut v = KVec::new();
                    v.extend_with(len, 0, GFP_KERNEL)?;
                    v
                }
            };
            verbs.post_rdma(r.kind, buf, r.addr, r.rkey)?;
            self.wr.posted += 1;
        }
        Ok(())
    }

    /// Posts what `p` asks for on the QP. Checked first, nothing posted on
    /// these errors: `EMSGSIZE` for a buffer over [`MAX_WR_BYTES`] or a SEND
    /// over the path MTU, `ENOTCONN` for a SEND with data before the QP has
    /// a path (RTR), `EINVAL` for fewer bytes than buffers or more
    /// unsignalled SENDs than SENDs, `ENOMEM` if a queue has no room for
    /// them all (and a signalled SEND after an unsignalled last one).
    ///
    /// The path-MTU bound on a SEND is this module's choice (one packet per
    /// message, what the tests count), not RC's: RC segments a larger SEND.
    /// The limit that matters on the wire is the peer's: a SEND longer than
    /// the receive buffer the peer posted completes there with
    /// `IB_WC_LOC_LEN_ERR` and moves both QPs to the error state. Nothing
    /// here can see the peer's buffers; sender and receiver agree on sizes
    /// (`recv=COUNT:SIZE`, `post ... size=N`).
    pub(super) fn post(&mut self, p: &Post) -> Result {
        let verbs = self.verbs.as_mut().ok_or(ENODEV)?;
        let send_len = p.data.as_ref().map_or(p.size, |d| d.len());
        if p.size > MAX_WR_BYTES || send_len > MAX_WR_BYTES {
            return Err(EMSGSIZE);
        }
        if p.send > 0 && send_len > 0 && send_len > verbs.path_mtu()? as usize {
            return Err(EMSGSIZE);
        }
        let few = |n: u32, len: usize| n > 0 && p.sge > 1 && len < p.sge;
        if p.sge == 0 || few(p.recv, p.size) || few(p.send, send_len) || p.unsig > p.send {
            return Err(EINVAL);
        }
        let after = u32::from(p.send > 0 && p.unsig == p.send);
        if !verbs.has_room(WrKind::Recv, p.recv) || !verbs.has_room(WrKind::Send, p.send + after) {
            return Err(ENOMEM);
        }
        self.data_stats()?;
        let verbs = self.verbs.as_mut().ok_or(ENODEV)?;
        for _ in 0..p.recv {
            let mut buf = KVec::new();
            buf.extend_with(p.size, 0, GFP_KERNEL)?;
            let (buf, more) = split(buf, p.sge)?;
            verbs.post_recv_sg(buf, more)?;
            self.wr.posted += 1;
        }
        for i in 0..p.send {
            let buf = match &p.data {
                Some(d) => copy(d)?,
                None => pattern(p.size)?,
            };
            let (buf, more) = split(buf, p.sge)?;
            verbs.post_send_sg(buf, more, i >= p.unsig)?;
            self.wr.posted += 1;
        }
        Ok(())
    }
}

/// How to set up an active connection.
pub(crate) struct ConnectArgs<'a> {
    pub(crate) num: u32,
    pub(crate) device: &'a CStr,
    pub(crate) port: u32,
    pub(crate) src: [u8; 4],
    pub(crate) dst: [u8; 4],
    pub(crate) service_id: u64,
    pub(crate) timing: Timing,
    pub(crate) behaviour: Behaviour,
    /// Start the REQ's private data with a `cma_hdr` from this source port,
    /// as rdma_cm does (for an rdma_cm listener).
    pub(crate) cma_port: Option<u16>,
    /// Send exactly these bytes as the REQ's private data.
    pub(crate) req_data: Option<KVec<u8>>,
    /// How long to wait for the peer's neighbour (ARP), in ms.
    pub(crate) resolve_ms: u32,
    /// A path record the caller gives, instead of one resolved as rdma_cm
    /// does.
    pub(crate) given: Option<GivenPath>,
}

/// A path record the test gives to `connect` (`dmac=`, `ib_path=`).
pub(crate) enum GivenPath {
    /// RoCE v2 to `dst` through the next hop `dmac`.
    Roce { dmac: [u8; 6] },
    /// InfiniBand from LID `slid` to `dlid`.
    Ib { slid: u16, dlid: u16 },
}

impl Core {
    /// `listen NUM DEV SERVICE_ID`: a listener for REQs to `service_id`.
    pub(crate) fn listen(
        self: &Arc<Self>,
        num: u32,
        device: &CStr,
        service_id: u64,
        cma: bool,
        behaviour: Behaviour,
    ) -> Result {
        let dev = self.device_by_name(device)?;
        let ep = Endpoint::new(num, Role::Listener, &dev, 0, cma, behaviour)?;
        let cm = CmId::new(&dev, &self.reaper, EpHandle::new(ep.clone()))?;
        cm.listen(service_id)?;
        self.insert(num, ep, cm)
    }

    /// `connect NUM DEV SRC DST SERVICE_ID`: an active connection.
    pub(crate) fn connect(self: &Arc<Self>, a: ConnectArgs<'_>) -> Result {
        // A peer is one host: not 0.0.0.0, multicast (224/4) nor the
        // reserved 240/4 with the broadcast address.
        if a.num >= PASSIVE_BASE || a.dst == [0; 4] || a.dst[0] >= 224 {
            return Err(EINVAL);
        }
        // A number taken is refused before the resolution, which may wait
        // for ARP (`insert` checks again).
        if self.inner.lock().conns.get(&a.num).is_some() {
            return Err(EEXIST);
        }
        let (src, dst) = (Gid::ipv4_mapped(a.src), Gid::ipv4_mapped(a.dst));
        let route = match a.given {
            Some(GivenPath::Roce { dmac }) => {
                let dev = self.device_by_name(a.device)?;
                // The IPv4 default TTL, what a resolved route gives.
                let record = PathRecord::roce_v2(src, dst, dmac, 64);
                (Route::new(&dev, a.port, record, a.timing)?, dev)
            }
            Some(GivenPath::Ib { slid, dlid }) => {
                let dev = self.device_by_name(a.device)?;
                let record = PathRecord::ib(src, dst, slid, dlid, 0);
                (Route::new(&dev, a.port, record, a.timing)?, dev)
            }
            None => self.resolve(&a)?,
        };
        self.connect_along(a, route)
    }

    /// The route to `a.dst` as rdma_cm resolves it, and the device again.
    fn resolve(&self, a: &ConnectArgs<'_>) -> Result<(Route, ARef<Device>)> {
        // The netdev the source address leaves from, with the device held
        // only for that: the resolution may wait for ARP (bounded), and a
        // device held meanwhile would hold up its unregistration as long.
        let (dev_index, ifindex) = {
            let dev = self.device_by_name(a.device)?;
            (dev.index(), path::source_netdev(&dev, a.port, a.src)?)
        };
        // The next hop's MAC from the kernel's neighbour resolution.
        // The report of a resolution that runs out may come late from
        // ib_core's workqueue on a busy machine: a second more for it.
        let wait_ms = a.resolve_ms.saturating_add(1000);
        let hop = {
            let _resolving = Counted::new(&STATS.resolutions);
            path::next_hop(ifindex, a.src, a.dst, a.resolve_ms, wait_ms)
        }?;
        // A group MAC: the destination was a broadcast address after all
        // (a subnet's, which only the route knows).
        if hop.dmac[0] & 1 != 0 {
            return Err(EINVAL);
        }
        // The same device again, by its index in the module's set: `ENODEV`
        // if its removal began meanwhile (a new device of the same name is
        // another index).
        let dev = self.device_at(dev_index)?;
        let route = path::route(&dev, a.port, a.src, a.dst, &hop, a.timing)?;
        Ok((route, dev))
    }

    /// `connect`'s connection along `route` from `dev`.
    fn connect_along(
        self: &Arc<Self>,
        a: ConnectArgs<'_>,
        (route, dev): (Route, ARef<Device>),
    ) -> Result {
        let pre_recv = a.behaviour.pre_recv;
        let rping_role = a.behaviour.rping;
        let ep = Endpoint::new(a.num, Role::Active, &dev, 0, false, a.behaviour)?;
        let cm = CmId::new(&dev, &self.reaper, EpHandle::new(ep.clone()))?;
        let mut verbs = CountedQp::new(&dev, qp_size())?;
        let qp_num = verbs.qp_num();
        // The peer may READ and WRITE the MRs this end registers (the
        // passive end gets the same from the CM).
        verbs.modify(&QpAttr::to_init(
            a.port,
            0,
            Access::REMOTE_READ | Access::REMOTE_WRITE,
        ))?;
        {
            let mut st = ep.st.lock();
            st.verbs = Some(verbs);
            if let Some((recv, size)) = pre_recv {
                // Before the REQ: the peer may send as soon as it has the RTU.
                st.post(&Post::recv(recv, size))?;
            }
            if let Some(role) = rping_role {
                st.rping_setup(role)?;
            }
        }
        // Our number after the `cma_hdr` if any, so that our passive end,
        // even behind an rdma_cm-style listener, knows whose it is.
        let mut pd = KVec::new();
        match a.req_data {
            Some(d) => pd = d,
            None => {
                if let Some(port) = a.cma_port {
                    pd.extend_from_slice(&cma::hdr(a.src, port, a.dst), GFP_KERNEL)?;
                }
                pd.extend_from_slice(REQ_MAGIC, GFP_KERNEL)?;
                pd.extend_from_slice(&a.num.to_le_bytes(), GFP_KERNEL)?;
            }
        }
        // In the table before the REQ leaves, so that nothing it causes can
        // miss the entry; the REQ goes out on the id made here (`ENOENT` if
        // another writer closed the connection in between).
        self.insert(a.num, ep.clone(), cm)?;
        let res = self.with_own_cm(a.num, &ep, |cm| {
            // rdma_cm's choices but the timing: one RDMA READ each way,
            // flow control, 7 retries of each kind.
            cm.send_req(&Req {
                route: &route,
                service_id: a.service_id,
                qp_num,
                starting_psn: qp_num,
                timing: a.timing,
                responder_resources: 1,
                initiator_depth: 1,
                flow_control: true,
                retry_count: 7,
                rnr_retry_count: 7,
                private_data: &pd,
            })
        });
        if res.is_err() {
            drop(self.remove_own(&ep));
        } else if rping_role.is_some() {
            self.spawn_poller(ep);
        }
        res
    }

    /// `dreq NUM [DATA]`, `drep NUM [DATA]`: sends `msg` with `data` as
    /// private data.
    pub(crate) fn send(&self, num: u32, msg: Message, data: &[u8]) -> Result {
        let res = self.with_conn(num, |cm, ep| {
            // Under the endpoint's lock, as the callbacks' own sends.
            let mut st = ep.st.lock();
            // Taken before the send: the start of the DREQ/DREP round trip.
            let t_ns = now_ns();
            product::send(msg, cm, data)?;
            if let Some(kind) = EventKind::sent(msg) {
                st.record_at(t_ns, kind, 0, data);
            }
            Ok(())
        });
        self.count(msg, res.is_ok());
        res
    }

    /// `disconnect NUM [DATA]`: rdma_disconnect(3), reporting every failure
    /// (see [`crate::product::disconnect`]); `EALREADY` for a second call. The
    /// DISCONNECTED event follows, once, on the DREP, the peer's DREQ or the
    /// DREQ's timeout (`-ETIMEDOUT`).
    pub(crate) fn disconnect(&self, num: u32, data: &[u8]) -> Result {
        let inner = self.inner.lock();
        let conn = inner.conns.get(&num).ok_or(ENOENT)?;
        // The table's lock keeps the id alive meanwhile.
        conn.ep.disconnect_on(self, conn.cm.as_deref(), data)
    }

    /// `post NUM RECV [SEND] [size=N] [data=DATA]`: posts work requests,
    /// with their buffers, on the connection's QP (see [`Post`]).
    pub(crate) fn post(&self, num: u32, p: &Post) -> Result {
        self.ep(num)?.st.lock().post(p)
    }

    /// `mr NUM reg|reg-at IDX|reg-foreign DATA`: see
    /// [`EndpointState::reg_mr`].
    pub(crate) fn reg_mr(&self, num: u32, with: RegWith, data: &[u8]) -> Result {
        self.ep(num)?.st.lock().reg_mr(with, data)
    }

    /// `mr NUM inval IDX`: see [`EndpointState::invalidate_mr`].
    pub(crate) fn invalidate_mr(&self, num: u32, idx: usize) -> Result {
        self.ep(num)?.st.lock().invalidate_mr(idx)
    }

    /// `rdma NUM read|write ...`: see [`EndpointState::rdma`].
    pub(crate) fn rdma(&self, num: u32, r: &Rdma) -> Result {
        self.ep(num)?.st.lock().rdma(r)
    }

    /// `poll NUM`: takes every completion from the connection's CQ and
    /// counts it (`flushed` for `IB_WC_WR_FLUSH_ERR`).
    pub(crate) fn poll(&self, num: u32) -> Result {
        self.ep(num)?.st.lock().drain_cq()
    }

    /// `close NUM`: destroys the connection's id and QP and forgets it.
    ///
    /// The connection leaves the table first, so device removal no longer
    /// finds it, and nothing else keeps its device registered while its id
    /// is destroyed (which waits for the id's callbacks) and its QP after
    /// it: the close is counted in `closing`, under the same lock, and
    /// removal waits until no close is in progress (`wait_for_closes`).
    pub(crate) fn close(&self, num: u32) -> Result {
        let conn = {
            let mut inner = self.inner.lock();
            let conn = inner.conns.remove(&num).ok_or(ENOENT)?;
            inner.closing += 1;
            conn
        };
        self.forget_pending(&conn.ep);
        self.forget_held(&conn.ep);
        drop(conn);
        let mut inner = self.inner.lock();
        inner.closing -= 1;
        if inner.closing == 0 {
            self.closed.notify_all();
        }
        Ok(())
    }
}
