// SPDX-License-Identifier: GPL-2.0

//! One end of a connection (or a listener) and its CM handler: the endpoint's
//! state and event record, the REQ callback and the passive end's job (QP and
//! REP), the callbacks of every CM event, and the rping poller.

use super::{
    commands::Post,
    pace,
    reports::{DataStats, WrStats},
    table::{Core, MAX_POLLERS},
    test_hooks::{OnReq, TestHooks},
};
use crate::kcompat::{fmt, now_ns, sleep_ms};
use crate::{
    cm::{self, CmIdRef, Handler, Message, RejReason, Rep, Request},
    cma::{self, PortSpace},
    ib_client::Device,
    path::{Gid, GidAttr},
    product,
    rping::{self, Rping},
    verbs::{Completion, QpAttr, QpSize, QpState, WcStatus, WrKind},
};
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use kernel::{
    new_mutex,
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation},
    str::CString,
    sync::{Arc, Mutex},
};

/// The REQ private data of a connection made here starts with this, then the
/// active end's number (little endian): the passive end takes the number
/// plus [`PASSIVE_BASE`], so tests know both names.
pub(super) const REQ_MAGIC: &[u8; 4] = b"RCD1";
/// Passive ends of this module's own connections: active number + this.
pub(crate) const PASSIVE_BASE: u32 = 1_000_000;
/// Passive ends of foreign connections are numbered from here.
pub(super) const FOREIGN_BASE: u32 = 2_000_000;

/// Handshakes a listener has in flight at most, unless `backlog=N` says
/// otherwise (from the REQ to the RTU, the REJ or the end's failure).
///
/// Not ucma's default listen backlog (1,024): that bounds only the connection
/// requests its program has not fetched yet, and rdma_cm's server bounds
/// none of the handshakes it has taken. A storm of 2,000 REQs at once
/// (`cmtime -c 2000`) had 975 rejected here at 1,024 where `cmtime -b`
/// took all 2,000 (plain kernel). 8,192: room for the tests' largest
/// sizes (2,000 in the storm, 5,000 in the bench), still a bound
/// on what a peer that never answers its REPs makes a listener hold.
pub(crate) const DEFAULT_BACKLOG: u32 = 8192;

/// Counted in `jobs.queued` (`stats`: `jobs_queued`) from before its job
/// is queued until that job begins (or is dropped unrun): the REQs a new
/// REQ waits behind.
struct Queued(Arc<Core>);

impl Queued {
    fn new(core: Arc<Core>) -> Self {
        core.bounds.jobs.queued.fetch_add(1, Ordering::Relaxed);
        Self(core)
    }
}

impl Drop for Queued {
    fn drop(&mut self) {
        self.0.bounds.jobs.queued.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Buffers mapped for a device over every QP of the module (`stats`:
/// `wr_bufs_mapped`): see [`RcQp`].
pub(super) static BUFS_MAPPED: AtomicUsize = AtomicUsize::new(0);
/// MRs allocated over every QP of the module (`stats`: `mrs_live`).
pub(super) static MRS_LIVE: AtomicUsize = AtomicUsize::new(0);
/// The module's address resolutions under way (`stats`:
/// `resolutions_live`): counted around `path::next_hop`, which cancels its
/// request before it returns.
pub(super) static RESOLUTIONS: AtomicUsize = AtomicUsize::new(0);
/// The module's CM ids alive (`stats`: `cm_ids_live`): one per
/// [`EpHandle`], the data of every id the module makes, which the kernel
/// crate frees only once the id is destroyed.
pub(super) static CM_IDS: AtomicUsize = AtomicUsize::new(0);

/// Every connection's QP: its queue sizes, MRs, and the module's name.
pub(super) fn qp_size() -> QpSize {
    QpSize {
        send: 64,
        recv: 64,
        max_mrs: 8,
        caller: kernel::c_str!("rcd_harness"),
    }
}

/// The kernel crate's [`kernel::rdma::verbs::RcQp`] with the module's counts over all its
/// QPs ([`BUFS_MAPPED`], [`MRS_LIVE`]) kept up to date after each call that
/// changes what the QP holds; the rest is the QP's own (`Deref`).
pub(crate) struct RcQp {
    qp: kernel::rdma::verbs::RcQp,
    /// This QP's share of [`BUFS_MAPPED`] and [`MRS_LIVE`].
    bufs: usize,
    mrs: usize,
}

impl RcQp {
    pub(crate) fn new(dev: &Device, size: QpSize) -> Result<Self> {
        Ok(Self {
            qp: kernel::rdma::verbs::RcQp::new(dev, size)?,
            bufs: 0,
            mrs: 0,
        })
    }

    /// Brings this QP's share of the counts up to date, and returns `r`.
    fn counted<R>(&mut self, r: R) -> R {
        let (bufs, mrs) = (self.qp.bufs_mapped(), self.qp.mrs_allocated());
        // Adds the difference (wrapping: a decrease is a wrapped negative).
        BUFS_MAPPED.fetch_add(bufs.wrapping_sub(self.bufs), Ordering::Relaxed);
        MRS_LIVE.fetch_add(mrs.wrapping_sub(self.mrs), Ordering::Relaxed);
        (self.bufs, self.mrs) = (bufs, mrs);
        r
    }

    pub(crate) fn post_recv(&mut self, buf: KVec<u8>) -> Result {
        let r = self.qp.post_recv(buf);
        self.counted(r)
    }

    pub(crate) fn post_send(&mut self, buf: KVec<u8>) -> Result {
        let r = self.qp.post_send(buf);
        self.counted(r)
    }

    pub(crate) fn post_rdma(
        &mut self,
        kind: WrKind,
        buf: KVec<u8>,
        addr: u64,
        rkey: u32,
    ) -> Result {
        let r = self.qp.post_rdma(kind, buf, addr, rkey);
        self.counted(r)
    }

    pub(crate) fn reg_mr(&mut self, buf: KVec<u8>) -> Result<usize> {
        let r = self.qp.reg_mr(buf);
        self.counted(r)
    }

    pub(crate) fn invalidate_mr(&mut self, idx: usize) -> Result {
        let r = self.qp.invalidate_mr(idx);
        self.counted(r)
    }

    pub(crate) fn poll_one(&mut self) -> Result<Option<Completion>> {
        let r = self.qp.poll_one();
        self.counted(r)
    }

    pub(crate) fn drain(&mut self, wait_ms: u32, f: impl FnMut(Completion)) -> u32 {
        let r = self.qp.drain(wait_ms, f);
        self.counted(r)
    }
}

impl core::ops::Deref for RcQp {
    type Target = kernel::rdma::verbs::RcQp;

    fn deref(&self) -> &kernel::rdma::verbs::RcQp {
        &self.qp
    }
}

impl Drop for RcQp {
    fn drop(&mut self) {
        // The QP's drop unmaps and frees what it still holds.
        BUFS_MAPPED.fetch_sub(self.bufs, Ordering::Relaxed);
        MRS_LIVE.fetch_sub(self.mrs, Ordering::Relaxed);
    }
}

/// How long a peer's DREQ waits for its answer (`drep`, `disconnect`,
/// `close`, or `auto_drep` at once) before the module sends the DREP itself
/// (`drep_after=MS` on a listener sets its passive ends'). Without it an end
/// in DREQ_RCVD would hold its id and QP for ever: cm.c has no timer in
/// that state (`cm_dreq_handler` queues the event and nothing else), and
/// rdma_cm has none either (`cma_ib_handler` turns the DREQ into
/// DISCONNECTED and leaves the DREP to `rdma_disconnect` or the destroy).
///
/// 30 s: three times the longest any consumer here takes to answer (the
/// tests' `on_dreq=sleep:10000`), and well inside what an rdma_cm peer waits
/// for its DREP (its CM tries 16 times, about 4.5 s each with rdma_cm's
/// response timeout on RoCE: 72 s), so the peer still gets a DREP, not a
/// DREQ_ERROR.
pub(crate) const DREQ_ANSWER_MS: u32 = 30_000;

/// The longest `drep_after=MS` a listener may set (10 minutes).
pub(crate) const DREQ_ANSWER_MAX_MS: u32 = 600_000;

/// How long a passive end is held at most once its disconnect began (its
/// DREQ answered, a DREP or a DREQ_ERROR received), unless `free_after=MS`
/// on its listener says otherwise: then it is freed whatever the state of
/// its id. Its peer sets how long the CM would keep it in timewait (from
/// its REQ's packet life time: up to 2^23 ms, about 2.3 h, for two MADs).
/// 60 s: beyond any timewait of the suite's peers, which the tests see
/// end (`TIMEWAIT_EXIT`).
pub(crate) const FREE_AFTER_MS: u32 = 60_000;

/// How many records of freed passive ends a listener keeps, unless
/// `keep=N` says otherwise: beyond that, the lowest-numbered goes (see
/// `Core::destroy_own_cm`).
pub(crate) const DEFAULT_KEEP: u32 = 1024;

/// How often the sweeper of unanswered DREQs looks at them, and so what it
/// may add to the deadline and to unload.
const SWEEP_MS: u32 = 100;

/// How long freeing a QP waits for the flushes of its posted work requests.
pub(super) const DRAIN_WAIT_MS: u32 = 2000;

/// How long a CM callback that frees its endpoint's QP waits for those
/// flushes itself (see [`Endpoint::release_qp`]).
const CALLBACK_DRAIN_MS: u32 = 100;

/// Endpoints alive (in the table or still held by an id): 0 once everything
/// is freed.
pub(super) static LIVE_ENDPOINTS: AtomicUsize = AtomicUsize::new(0);

/// What an endpoint is.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    Listener,
    Active,
    Passive,
}

impl Role {
    pub(super) fn name(self) -> &'static str {
        match self {
            Self::Listener => "listener",
            Self::Active => "active",
            Self::Passive => "passive",
        }
    }
}

/// What happened to an endpoint, in order.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventKind {
    Established,
    RejReceived,
    ConnectError,
    DreqReceived,
    DrepReceived,
    DrepSent,
    /// A DREQ left (by `dreq` or `disconnect`): the start of a round trip.
    DreqSent,
    DreqError,
    TimewaitExit,
    /// Once per endpoint: its connection is over (status 0, `-ETIMEDOUT`
    /// when our DREQ got no answer, `-ENODEV` when its device went away),
    /// as rdma_cm's DISCONNECTED.
    Disconnected,
    /// The `on_dreq` action ran in the DREQ callback: its result.
    OnDreq,
}

/// How an endpoint answers its peer, set by `listen`/`connect` options; a
/// listener's is copied to its passive ends.
pub(crate) struct Behaviour {
    /// Answer a peer's DREQ at once with a DREP carrying these bytes.
    pub(crate) auto_drep: Option<KVec<u8>>,
    /// The test-only behaviours (see [`TestHooks`]), if the tests asked for
    /// any: `None` for every other endpoint.
    pub(crate) test: Option<KBox<TestHooks>>,
    /// A listener's bound on handshakes in flight (REQ accepted, REP sent,
    /// no RTU yet): the excess is rejected (`backlog=N`).
    pub(crate) backlog: u32,
    /// Receives (count, buffer size) posted before the REQ or REP leaves
    /// (`recv=COUNT[:SIZE]`), as a ULP does before it connects or accepts.
    pub(crate) pre_recv: Option<(u32, usize)>,
    /// Speak rping's protocol on the connection (`rping=1` on a listener:
    /// the server; `rping=COUNT:SIZE` on connect: the client).
    pub(crate) rping: Option<rping::Role>,
    /// A peer's DREQ nobody answered is answered after this (ms).
    pub(crate) drep_after_ms: u32,
    /// A listener keeps at most this many records of freed passive ends.
    pub(crate) keep: u32,
    /// A passive end is freed this long (ms) after its disconnect began
    /// (see [`FREE_AFTER_MS`]).
    pub(crate) free_after_ms: u32,
}

impl Default for Behaviour {
    fn default() -> Self {
        Self {
            auto_drep: None,
            test: None,
            backlog: DEFAULT_BACKLOG,
            pre_recv: None,
            rping: None,
            drep_after_ms: DREQ_ANSWER_MS,
            keep: DEFAULT_KEEP,
            free_after_ms: FREE_AFTER_MS,
        }
    }
}

impl Behaviour {
    fn try_clone(&self) -> Result<Self> {
        Ok(Self {
            auto_drep: match &self.auto_drep {
                Some(d) => Some(copy(d)?),
                None => None,
            },
            test: match &self.test {
                Some(t) => Some(KBox::new(**t, GFP_KERNEL)?),
                None => None,
            },
            backlog: self.backlog,
            pre_recv: self.pre_recv,
            rping: self.rping,
            drep_after_ms: self.drep_after_ms,
            keep: self.keep,
            free_after_ms: self.free_after_ms,
        })
    }
}

impl EventKind {
    /// The event of our `msg` leaving: a DREQ or a DREP, the messages the
    /// harness sends through the product (none for any other).
    pub(super) fn sent(msg: Message) -> Option<Self> {
        match msg {
            Message::Dreq => Some(Self::DreqSent),
            Message::Drep => Some(Self::DrepSent),
            _ => None,
        }
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            Self::Established => "ESTABLISHED",
            Self::RejReceived => "REJ_RECEIVED",
            Self::ConnectError => "CONNECT_ERROR",
            Self::DreqReceived => "DREQ_RECEIVED",
            Self::DrepReceived => "DREP_RECEIVED",
            Self::DrepSent => "DREP_SENT",
            Self::DreqSent => "DREQ_SENT",
            Self::DreqError => "DREQ_ERROR",
            Self::TimewaitExit => "TIMEWAIT_EXIT",
            Self::Disconnected => "DISCONNECTED",
            Self::OnDreq => "ON_DREQ",
        }
    }
}

pub(super) struct Event {
    /// `ktime_get()` when it was recorded, in ns: what `make bench` uses.
    pub(super) t_ns: i64,
    pub(super) kind: EventKind,
    /// An errno (negative), a CM reason or a work completion status.
    pub(super) status: i32,
    /// The private data the message carried (the whole field).
    pub(super) data: KVec<u8>,
}

pub(super) struct EndpointState {
    pub(super) events: KVec<Event>,
    pub(super) verbs: Option<RcQp>,
    pub(super) behaviour: Behaviour,
    /// `disconnect` was called: a crossing DREQ is answered at once.
    disconnecting: bool,
    /// The DISCONNECTED event was recorded.
    disconnected: bool,
    /// Work requests posted, their completions, what they carried.
    pub(super) wr: WrStats,
    /// The rping protocol, if the connection speaks it.
    pub(super) rping: Option<KBox<Rping>>,
    /// A passive end's place in its listener's handshakes in flight, until
    /// the handshake is over (established, failed or freed).
    handshake: Option<Handshake>,
    /// A passive end's deadline on the list of [`PendingDreqs`], once its
    /// disconnect began (see [`Core::free_at`]).
    deadline: Option<(i64, u64)>,
}

/// One handshake in flight on a listener: counted in its `handshakes`
/// while this exists; with its peer's bucket (`cma=1` listeners: see
/// [`super::pace`]), in which, once its REP is sent, it counts as a REP in
/// flight until it is over.
pub(super) struct Handshake(Arc<Endpoint>, Option<usize>, bool);

impl Handshake {
    /// A place on `listener` for a REQ from `peer`'s bucket, or `EBUSY` if
    /// its backlog is full.
    pub(super) fn new(listener: &Arc<Endpoint>, backlog: u32, peer: Option<usize>) -> Result<Self> {
        let n = listener.handshakes.fetch_add(1, Ordering::AcqRel);
        let slot = Self(listener.clone(), peer, false);
        if n >= backlog as usize {
            // Dropped: the count goes back.
            return Err(EBUSY);
        }
        Ok(slot)
    }

    /// Its REP is sent: a REP in flight to its peer until it is over.
    fn rep_sent(&mut self, core: &Core) {
        if let (Some(b), false) = (self.1, self.2) {
            self.2 = true;
            core.bounds.peers.rep_sent(b);
        }
    }

    /// Its peer's bucket.
    fn peer(&self) -> Option<usize> {
        self.1
    }
}

impl Drop for Handshake {
    fn drop(&mut self) {
        self.0.handshakes.fetch_sub(1, Ordering::AcqRel);
        if let (Some(b), true) = (self.1, self.2) {
            // The core is reached as the callbacks reach it (the endpoint
            // holds none): `None` only once the module's core is gone,
            // when no count is read any more.
            if let Some(core) = Core::get() {
                core.bounds.peers.rep_done(b);
            }
        }
    }
}

impl EndpointState {
    /// Takes every completion from the QP's CQ and counts it.
    pub(super) fn drain_cq(&mut self) -> Result {
        self.drain_cq_for_rping().map(|_| ())
    }

    /// Takes every completion from the QP's CQ, counts it and hands it to
    /// the rping protocol if the connection speaks it; says whether that
    /// protocol now wants the connection closed.
    fn drain_cq_for_rping(&mut self) -> Result<rping::Action> {
        if self.rping.is_some() && !self.events.iter().any(|e| e.kind == EventKind::Established) {
            // A passive end's QP is RTR until the RTU: the peer's first
            // message may come before it, and what the protocol posts in
            // answer needs RTS. Taken once established.
            return Ok(rping::Action::Nothing);
        }
        let verbs = self.verbs.as_mut().ok_or(ENODEV)?;
        let mut action = rping::Action::Nothing;
        while let Some(mut c) = verbs.poll_one()? {
            self.wr.add(&c);
            if let Some(r) = self.rping.as_mut() {
                let (posted, a) = r.on_completion(verbs, &mut c);
                self.wr.posted += u64::from(posted);
                if a != rping::Action::Nothing {
                    action = a;
                }
            }
        }
        Ok(action)
    }

    /// Sets up rping's protocol (`role`): its receives posted now, before
    /// the REQ or REP.
    pub(super) fn rping_setup(&mut self, role: rping::Role) -> Result {
        let mut r = KBox::new(Rping::new(role)?, GFP_KERNEL)?;
        if let Some(t) = self.behaviour.test.as_deref() {
            r.pings = t.rping_from;
        }
        self.data_stats()?;
        let verbs = self.verbs.as_mut().ok_or(ENODEV)?;
        self.wr.posted += u64::from(r.pre_post(verbs)?);
        self.rping = Some(r);
        Ok(())
    }

    /// Takes the QP out to be freed, its posted work requests ended first
    /// (flushed, and counted with the completions still on its CQ).
    pub(super) fn take_verbs(&mut self) -> Option<RcQp> {
        let mut verbs = self.verbs.take()?;
        let wr = &mut self.wr;
        let left = verbs.drain(DRAIN_WAIT_MS, |c| wr.add(&c));
        wr.dropped += u64::from(left);
        Some(verbs)
    }

    /// Ends a passive end's handshake (its place on the listener is
    /// given back when the result is dropped).
    pub(super) fn take_handshake(&mut self) -> Option<Handshake> {
        self.handshake.take()
    }

    /// Allocates the data statistics on the first post.
    pub(super) fn data_stats(&mut self) -> Result {
        if self.wr.data.is_none() {
            self.wr.data = Some(KBox::new(DataStats::default(), GFP_KERNEL)?);
        }
        Ok(())
    }

    fn record(&mut self, core: &Core, kind: EventKind, status: i32, data: &[u8]) {
        self.record_at(core, now_ns(), kind, status, data);
    }

    /// As `record`, at time `t_ns`.
    pub(super) fn record_at(
        &mut self,
        core: &Core,
        t_ns: i64,
        kind: EventKind,
        status: i32,
        data: &[u8],
    ) {
        let mut ev = Event {
            t_ns,
            kind,
            status,
            data: KVec::new(),
        };
        // A record that cannot keep its data still says what happened.
        if ev.data.extend_from_slice(data, GFP_KERNEL).is_err() {
            ev.status = ENOMEM.to_errno();
        }
        if self.events.push(ev, GFP_KERNEL).is_err() {
            core.lost_events.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Records DISCONNECTED, once, whatever path ends the connection.
    pub(super) fn record_disconnected(&mut self, core: &Core, status: i32) {
        if let Some(r) = self.rping.as_mut() {
            r.stop();
        }
        if !self.disconnected {
            self.disconnected = true;
            self.record(core, EventKind::Disconnected, status, &[]);
        }
    }
}

/// One end of a connection (or a listener), shared by its entry in the
/// table and its CM id.
///
/// It holds no reference on the [`Core`] whose table holds it: its
/// callbacks and work items reach the core through [`Core::get`] (a
/// counted reference for their time), and its methods that need the core
/// are given it by their caller.
#[pin_data]
pub(crate) struct Endpoint {
    pub(super) num: u32,
    pub(super) role: Role,
    pub(super) dev_index: u32,
    pub(super) dev_name: CString,
    /// The listener that made a passive end.
    pub(super) listener: u32,
    /// A listener that takes rdma_cm's REQs only (a valid `cma_hdr` first).
    cma: bool,
    /// A listener's handshakes in flight (see [`Handshake`]).
    handshakes: AtomicUsize,
    /// The endpoint's lock (`conn::Endpoint::st`): taken after the table's,
    /// never before it (see the lock order in [`super`]).
    #[pin]
    pub(super) st: Mutex<EndpointState>,
    /// Its entry left the table (close, unload): work of its own (the rping
    /// poller) stops.
    pub(super) gone: AtomicBool,
    _live: LiveToken,
}

impl Endpoint {
    pub(super) fn new(
        num: u32,
        role: Role,
        device: &Device,
        listener: u32,
        cma: bool,
        behaviour: Behaviour,
    ) -> Result<Arc<Self>> {
        let ep = Arc::pin_init(
            try_pin_init!(Self {
                num,
                role,
                dev_index: device.index(),
                dev_name: CString::try_from_fmt(fmt!("{}", device.name()))?,
                listener,
                cma,
                handshakes: AtomicUsize::new(0),
                st <- new_mutex!(
                    EndpointState {
                        // A connection's life is about eight events: reserved
                        // now, callbacks do not reallocate.
                        events: KVec::with_capacity(8, GFP_KERNEL)?,
                        verbs: None,
                        behaviour,
                        disconnecting: false,
                        disconnected: false,
                        wr: WrStats::default(),
                        rping: None,
                        handshake: None,
                        deadline: None,
                    },
                    "conn::Endpoint::st"
                ),
                gone: AtomicBool::new(false),
                _live: LiveToken::new(),
            }? Error),
            GFP_KERNEL,
        )?;
        Ok(ep)
    }

    pub(super) fn record(&self, core: &Core, kind: EventKind, status: i32, data: &[u8]) {
        self.st.lock().record(core, kind, status, data);
    }

    /// Moves the QP to `state` with the attributes the CM computes.
    fn move_qp(&self, id: &CmIdRef, state: QpState) -> Result {
        let attr = id.init_qp_attr(state)?;
        self.modify_qp(&attr)
    }

    /// Modifies the QP as `attr` says; `ENODEV` once it is freed.
    fn modify_qp(&self, attr: &QpAttr) -> Result {
        let st = self.st.lock();
        st.verbs.as_ref().ok_or(ENODEV)?.modify(attr)
    }

    /// Whether a passive end's handshake is still in flight (not yet
    /// established, failed or freed).
    pub(super) fn in_handshake(&self) -> bool {
        self.st.lock().handshake.is_some()
    }

    /// From one of its id's callbacks (timewait exit, a failed handshake):
    /// free the id and the QP; keep the record (with the completions still
    /// on the CQ counted). Acts on this endpoint's own entry only, whatever
    /// now has its number.
    ///
    /// The QP's drain does not run under the endpoint's lock, and waits
    /// here (in a CM callback, which holds up the CM's workqueue) at most
    /// [`CALLBACK_DRAIN_MS`]: see [`Endpoint::release_qp`].
    fn free_id(self: &Arc<Self>, core: &Core) {
        let (verbs, handshake, deadline) = {
            let mut st = self.st.lock();
            (st.verbs.take(), st.handshake.take(), st.deadline.take())
        };
        if let Some(key) = deadline {
            // Not the last reference (the caller's is alive).
            drop(core.bounds.pending.lock().list.remove(&key));
        }
        core.destroy_own_cm(self);
        drop(handshake);
        if let Some(verbs) = verbs {
            self.release_qp(core, verbs);
        }
    }

    /// Frees `verbs`, this endpoint's QP taken out in one of its id's
    /// callbacks, its posted work requests ended first (flushed, and
    /// counted in the endpoint's record), without the endpoint's lock. The
    /// callback waits at most [`CALLBACK_DRAIN_MS`] for the flushes (rxe
    /// flushes in microseconds); what is still out then is waited for by a
    /// job on the reaper (up to [`DRAIN_WAIT_MS`]), which device removal
    /// and unload flush (and the QP's device reference holds up the
    /// device's unregistration until it is freed), so that no CM callback
    /// waits seconds for a device. A drained QP is destroyed by a job too.
    fn release_qp(self: &Arc<Self>, core: &Core, mut verbs: RcQp) {
        let left = verbs.drain(CALLBACK_DRAIN_MS, |c| self.st.lock().wr.add(&c));
        if left == 0 {
            // Drained: what is left is destroying the QP, its CQ and MRs
            // and unmapping the buffers, milliseconds under a debug kernel,
            // which here held up every DREQ and DREP behind it on the CM's
            // one workqueue (the cmtime storm's disconnect step took
            // 1.12 times as long as against rdma_cm's server, which
            // destroys its QPs after the step). If the job cannot be
            // queued, the closure drops the QP here.
            let _ = core.reaper.spawn(move || drop(verbs));
            return;
        }
        let ep = self.clone();
        let spawned = core.reaper.spawn(move || {
            let left = verbs.drain(DRAIN_WAIT_MS, |c| ep.st.lock().wr.add(&c));
            ep.st.lock().wr.dropped += u64::from(left);
            drop(verbs);
        });
        if spawned.is_err() {
            // The job (with the QP) was dropped: the QP is freed with what
            // it still had posted, counted as dropped.
            self.st.lock().wr.dropped += u64::from(left);
        }
    }

    /// A REQ to this listener (see [`Handler::req_received`]).
    fn take_req(self: &Arc<Self>, core: &Arc<Core>, req: Request<'_, EpHandle>) -> Result {
        let test = self.test_hooks();
        test.before_req(core, self);
        // This module makes RC QPs only: a REQ for UC or XRC is rejected, as
        // rdma_cm rejects a REQ whose QP type is not its listener's; so is
        // one to rdma_cm's UDP port space, where rdma_cm serves UD only.
        if !req.is_rc() || (self.cma && PortSpace::of(req.service_id()) == Some(PortSpace::Udp)) {
            return Err(EINVAL);
        }
        let pd = req.private_data();
        let mut peer = None;
        let ours = if self.cma {
            // Garbage is rejected: the CM sends the REJ. So is a REQ for an
            // address this device does not have, as rdma_cm's
            // `validate_net_dev` rejects it: a peer that lies about where
            // it connects to.
            let (src, _, dst) = cma::parse(pd)?;
            peer = Some(pace::peer_bucket(src));
            let (device, gid) = (req.device(), Gid::ipv4_mapped(dst));
            if !device
                .ports()
                .any(|port| GidAttr::find_roce_v2(device, &gid, port).is_ok())
            {
                return Err(EHOSTUNREACH);
            }
            &pd[cma::HDR_SIZE..]
        } else {
            pd
        };
        let ours = ours
            .strip_prefix(REQ_MAGIC)
            .and_then(|n| n.get(..4))
            .and_then(|n| <[u8; 4]>::try_from(n).ok());
        let num = match ours {
            Some(n) => PASSIVE_BASE + u32::from_le_bytes(n) % PASSIVE_BASE,
            // Numbers wrap rather than overflow after 2^32 foreign REQs.
            None => {
                FOREIGN_BASE.wrapping_add(core.next_foreign.fetch_add(1, Ordering::Relaxed) as u32)
            }
        };
        let (depth, resources) = (req.initiator_depth(), req.responder_resources());
        let behaviour = self.st.lock().behaviour.try_clone()?;
        // Over the backlog: rejected (the CM sends the REJ).
        let handshake = Handshake::new(self, behaviour.backlog, peer)?;
        let device = req.device();
        let ep = Endpoint::new(num, Role::Passive, device, self.num, false, behaviour)?;
        ep.st.lock().handshake = Some(handshake);
        let cm = req.accept(EpHandle::new(ep.clone()))?;
        // From here an error drops `cm` in its own callback: the CM destroys
        // the new id, and rejects the REQ unless the error is `ENOMEM` (the
        // CM's contract for a REQ handler: the peer retries; see
        // `cm::Handler::req_received`). Every `ENOMEM` of ours comes before
        // the MRA below: after it (`MRA_REQ_SENT`) the CM would send a REJ
        // whatever the errno.
        //
        // In the table before the job runs, so that close, device removal
        // and unload find the id.
        core.insert(num, ep.clone(), cm)?;
        // The QP and the REP are a job's (`accept_later`): the CM runs every
        // callback on one workqueue, one at a time per CPU, and making a QP
        // there held up every REQ, REP and RTU behind it until the peers
        // gave up (in a storm of REQs from cmtime).
        let t_req = now_ns();
        if test.on_req == OnReq::RepThenFail {
            // A REP from the callback, whose failure the CM reports from
            // the MAD's completion while the callback may still run.
            let _ = core.with_own_cm(num, &ep, |cm| {
                cm.send_rep(&Rep {
                    qp_num: 1,
                    starting_psn: 1,
                    responder_resources: 0,
                    initiator_depth: 0,
                    flow_control: true,
                    rnr_retry_count: 7,
                    private_data: &[],
                })
            });
        }
        let queued = Queued::new(core.clone());
        let job = ep.clone();
        let spawned = test.spawn_job().and_then(|()| {
            core.reaper.spawn_job(move || {
                let core = queued.0.clone();
                // Begun: no longer ahead of anyone.
                drop(queued);
                job.accept_later(&core, depth, resources, t_req)
            })
        });
        if let Err(e) = spawned {
            // Out again, dropped in its REQ callback: the CM destroys it.
            drop(core.remove_own(&ep));
            return Err(e);
        }
        // Each retransmission of the peer's REQ is answered with an MRA
        // from now on, as rdma_cm does, so that the peer waits for the job
        // (the CM's own service timeout, about 68.7 s a retry). Last, and
        // its error ignored: it fails only with `EINVAL`, when the job has
        // already sent its REP or the peer's REJ has reset the id (whose
        // callback frees the end), or `ENOENT`/`ENOTCONN` when the end is
        // already gone; in none of these is an MRA needed.
        let _ = core.with_own_cm(num, &ep, |cm| cm.prepare_mra());
        Ok(())
    }

    /// A passive end's job, after its REQ callback: the QP, its moves to
    /// INIT and RTR, and the REP, on the id made for this endpoint. A
    /// failure is recorded (`CONNECT_ERROR`) and frees the id and QP (the CM
    /// rejects the REQ); an endpoint closed or freed meanwhile (`close`, the
    /// peer's REJ, device removal, unload) is left as it is, and the QP the
    /// job made for it is freed.
    fn accept_later(self: &Arc<Self>, core: &Arc<Core>, depth: u8, resources: u8, t_req: i64) {
        let t_job = now_ns();
        // The endpoint's device, by its index in the module's set: `ENODEV`
        // once its removal has begun.
        let verbs = core
            .device_at(self.dev_index)
            .and_then(|dev| RcQp::new(&dev, qp_size()));
        let qp_num = match self.ready_qp(core, verbs) {
            Ok(Ok(qp_num)) => qp_num,
            Ok(Err(e)) => return self.rep_failed(core, Ok(Err(e))),
            Err(e) => return self.rep_failed(core, Err(e)),
        };
        // A peer with a full window gets its REP from the sweeper, when it
        // has room (see `pace`): the queue goes on meanwhile.
        let bucket = self.st.lock().handshake.as_ref().and_then(Handshake::peer);
        let rep = pace::HeldRep {
            ep: self.clone(),
            bucket: bucket.unwrap_or(0),
            qp_num,
            depth,
            resources,
            t_req,
        };
        let rep = match bucket {
            Some(_) => core.hold_rep(rep),
            None => Some(rep),
        };
        if let Some(rep) = rep {
            self.send_held_rep(core, rep);
        }
        core.bounds.jobs.times.add(now_ns() - t_job);
    }

    /// Sends the REP of a passive end whose QP is ready (`rep`), from its
    /// job or, once held, from the sweeper (see `pace`).
    pub(super) fn send_held_rep(self: &Arc<Self>, core: &Arc<Core>, rep: pace::HeldRep) {
        let res = self.send_rep_msg(core, rep.qp_num, rep.depth, rep.resources);
        if let Ok(Ok(())) = res {
            // Unless the handshake is over already (the RTU came).
            if let Some(h) = self.st.lock().handshake.as_mut() {
                h.rep_sent(core);
            }
            core.rep_times.add(now_ns() - rep.t_req);
            if self.st.lock().behaviour.rping.is_some() {
                core.spawn_poller(self.clone());
            }
            return;
        }
        self.rep_failed(core, res);
    }

    /// A passive end's QP or REP failed (`Ok(Err)`: the end is freed and
    /// the CM rejects the REQ) or its endpoint is gone (`Err`: its QP goes).
    fn rep_failed(self: &Arc<Self>, core: &Core, res: Result<Result>) {
        match res {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                self.record(core, EventKind::ConnectError, e.to_errno(), &[]);
                self.free_id(core);
            }
            // Gone: whoever took the id frees the rest; the QP given to the
            // endpoint here goes now (the job is flushed before a device
            // goes).
            Err(_) => {
                let verbs = self.st.lock().take_verbs();
                drop(verbs);
            }
        }
    }

    /// Readies a passive end's QP `verbs` for its REP: its QP number, or
    /// `Ok(Err)` if ours failed, `Err` if the endpoint is gone (out of the
    /// table, or its id freed or reset by the peer's REJ).
    ///
    /// The table's lock, which every REQ, REJ, REP_ERROR and timewait-exit
    /// callback takes, is held only to use the id (the CM's computation of
    /// the QP's attributes, the REP), never across the QP's moves: those run
    /// under the endpoint's lock alone, so that the CM's workqueue does not
    /// wait behind QP work (review S2).
    fn ready_qp(self: &Arc<Self>, core: &Core, verbs: Result<RcQp>) -> Result<Result<u32>> {
        let init_rtr = core.with_own_cm(self.num, self, |cm| {
            Ok(cm
                .init_qp_attr(QpState::Init)
                .and_then(|init| Ok((init, cm.init_qp_attr(QpState::Rtr)?))))
        })?;
        let res = verbs.and_then(|verbs| {
            let (init, mut rtr) = init_rtr?;
            let qp_num = verbs.qp_num();
            self.st.lock().verbs = Some(verbs);
            self.test_hooks().job_delay(self);
            // Our PSN: what the peer sends with, announced in the REP.
            let starting_psn = qp_num;
            self.modify_qp(&init)?;
            let pre_recv = self.st.lock().behaviour.pre_recv;
            if let Some((recv, size)) = pre_recv {
                // Before the REP: the peer may send as soon as it has our RTU.
                self.st.lock().post(&Post {
                    recv,
                    send: 0,
                    size,
                    data: None,
                })?;
            }
            let rping = self.st.lock().behaviour.rping;
            if let Some(role) = rping {
                self.st.lock().rping_setup(role)?;
            }
            // The CM learns the PSN our peer starts sending with (the REP's
            // starting PSN, `rq_psn`) only when the REP is sent, and would
            // give the QP 0. rdma_cm sets it the same way
            // (`rdma_init_qp_attr`).
            rtr.set_rq_psn(starting_psn);
            self.modify_qp(&rtr)?;
            Ok(qp_num)
        });
        match res {
            Ok(qp_num) => Ok(Ok(qp_num)),
            Err(e) => {
                // An id the peer's REJ reset (idle; its callback frees the
                // end) or one gone meanwhile is not ours to reject.
                let state = core.with_own_cm(self.num, self, |cm| Ok(cm.state()))?;
                if state == cm::State::Idle {
                    Err(ENOTCONN)
                } else {
                    Ok(Err(e))
                }
            }
        }
    }

    /// Answers the REQ with the REP for the QP `qp_num`: `Ok(Err)` if ours
    /// failed, `Err` if the endpoint is gone or the peer's REJ came first.
    fn send_rep_msg(
        self: &Arc<Self>,
        core: &Core,
        qp_num: u32,
        depth: u8,
        resources: u8,
    ) -> Result<Result> {
        core.with_own_cm(self.num, self, |cm| {
            // rdma_cm's choices: flow control, RNR retries for ever.
            let res = cm.send_rep(&Rep {
                qp_num,
                starting_psn: qp_num,
                responder_resources: depth.min(1),
                initiator_depth: resources.min(1),
                flow_control: true,
                rnr_retry_count: 7,
                private_data: &[],
            });
            match res {
                // The peer's REJ came first: its callback frees the end.
                Err(_) if cm.state() == cm::State::Idle => Err(ENOTCONN),
                res => Ok(res),
            }
        })
    }

    /// `disconnect()` of this endpoint on `id` (its own id, or `None` once
    /// freed): see [`Core::disconnect`].
    pub(super) fn disconnect_on(&self, core: &Core, id: Option<&CmIdRef>, data: &[u8]) -> Result {
        // Held while deciding and sending: see `dreq_received`.
        let mut st = self.st.lock();
        // A second call is `EALREADY` whenever it comes, also once the id
        // has left timewait and been freed.
        if st.disconnecting {
            return Err(EALREADY);
        }
        let cm = id.ok_or(ENOTCONN)?;
        let qp = st.verbs.as_ref().map(|v| v.qp());
        let t_ns = now_ns();
        // Refused (the outer `?`): nothing was done, nothing changes.
        let (msg, res) = product::disconnect(cm, qp, data)?;
        st.disconnecting = true;
        if msg == Message::Dreq && res.is_ok() {
            st.record_at(core, t_ns, EventKind::DreqSent, 0, data);
        }
        core.count(msg, res.is_ok());
        res
    }
}

/// Counted in [`LIVE_ENDPOINTS`] while it exists: one per endpoint.
pub(super) struct LiveToken;

impl LiveToken {
    pub(super) fn new() -> Self {
        LIVE_ENDPOINTS.fetch_add(1, Ordering::Relaxed);
        Self
    }
}

impl Drop for LiveToken {
    fn drop(&mut self) {
        LIVE_ENDPOINTS.fetch_sub(1, Ordering::Relaxed);
    }
}

/// An endpoint as the data of its `CmId`: a type of the module's own, so
/// that it can implement the kernel crate's `Handler` (the orphan rule
/// forbids an impl for `Arc<Endpoint>` outside the kernel crate).
pub(crate) struct EpHandle(Arc<Endpoint>);

impl EpHandle {
    /// The data of a new id of `ep`'s, counted in [`CM_IDS`] until dropped.
    pub(crate) fn new(ep: Arc<Endpoint>) -> Self {
        CM_IDS.fetch_add(1, Ordering::Relaxed);
        Self(ep)
    }
}

impl Drop for EpHandle {
    fn drop(&mut self) {
        CM_IDS.fetch_sub(1, Ordering::Relaxed);
    }
}

impl core::ops::Deref for EpHandle {
    type Target = Arc<Endpoint>;

    fn deref(&self) -> &Arc<Endpoint> {
        &self.0
    }
}

#[vtable]
impl Handler for EpHandle {
    fn req_received(&self, req: Request<'_, Self>) -> Result {
        let Some(core) = Core::get() else {
            return Err(ENODEV);
        };
        // Timed: what a REQ costs the CM's workqueue, which runs one
        // callback at a time per CPU (`stats`: `req_callback_us_*`).
        let t0 = now_ns();
        let res = self.take_req(&core, req);
        core.req_times.add(now_ns() - t0);
        res
    }

    fn rep_received(&self, id: &CmIdRef, _remote_qpn: u32) {
        let Some(core) = Core::get() else {
            return;
        };
        if !self.test_hooks().on_rep(id) {
            return;
        }
        let res = self
            .move_qp(id, QpState::Rtr)
            .and_then(|()| self.move_qp(id, QpState::Rts))
            .and_then(|()| id.send_rtu(&[]));
        match res {
            Ok(()) => {
                {
                    let mut guard = self.st.lock();
                    guard.record(&core, EventKind::Established, 0, &[]);
                    // rping's client: the first ping.
                    let st = &mut *guard;
                    if let (Some(r), Some(v)) = (st.rping.as_mut(), st.verbs.as_mut()) {
                        st.wr.posted += u64::from(r.start(v));
                    }
                }
                core.established.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                self.record(&core, EventKind::ConnectError, e.to_errno(), &[]);
                let _ = id.send_rej(&[]);
            }
        }
    }

    fn established(&self, id: &CmIdRef) {
        let Some(core) = Core::get() else {
            return;
        };
        let status = match self.move_qp(id, QpState::Rts) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        };
        let mut st = self.st.lock();
        st.record(&core, EventKind::Established, status, &[]);
        // The handshake is over: its place on the listener is free.
        let handshake = st.handshake.take();
        drop(st);
        drop(handshake);
        core.established.fetch_add(1, Ordering::Relaxed);
    }

    fn rej_received(&self, _id: &CmIdRef, reason: RejReason, private_data: &[u8]) {
        let Some(core) = Core::get() else {
            return;
        };
        self.record(
            &core,
            EventKind::RejReceived,
            reason.to_raw() as i32,
            private_data,
        );
        if self.role == Role::Passive {
            // Rejected after our REP: the CM has forgotten the peer (the id
            // is idle) and a retried REQ would make a new passive end. Free
            // the id and QP now, keep the record.
            self.free_id(&core);
        }
    }

    fn dreq_received(&self, id: &CmIdRef, private_data: &[u8]) {
        let Some(core) = Core::get() else {
            return;
        };
        let test = self.test_hooks();
        test.before_dreq();
        // Under the lock `disconnect` holds while it decides and sends: a
        // DREQ crossing ours is answered exactly once.
        let mut st = self.st.lock();
        st.record(&core, EventKind::DreqReceived, 0, private_data);
        st.record_disconnected(&core, 0);
        // A DREQ before the RTU ends the handshake: cm.c moves a passive end
        // from REP_SENT (or MRA_REP_RCVD) straight to DREQ_RCVD and cancels
        // the REP (`cm_dreq_handler`), so neither the RTU (ESTABLISHED) nor
        // a REP_ERROR ever comes to give the listener its place back.
        let handshake = st.handshake.take();
        let answer = if st.disconnecting {
            Some(KVec::new())
        } else {
            match &st.behaviour.auto_drep {
                Some(d) => copy(d).ok(),
                None => None,
            }
        };
        // Freed at last once its answer is due and the peer's timewait is
        // over, or would be had the peer not made it hours long.
        let mut after = i64::from(st.behaviour.free_after_ms);
        if answer.is_none() {
            after += i64::from(st.behaviour.drep_after_ms);
        }
        core.free_at(&self.0, &mut st, after);
        // Nobody answers now: the sweeper does after the deadline, unless
        // the consumer does first (or it cannot be queued: then now).
        let answer = match answer {
            None => {
                let after = i64::from(st.behaviour.drep_after_ms) * 1_000_000;
                let due = now_ns().saturating_add(after);
                match core.answer_later(&self.0, due) {
                    Ok(()) => None,
                    Err(_) => Some(KVec::new()),
                }
            }
            answer => answer,
        };
        if let Some(data) = answer {
            let res = product::send(Message::Drep, id, &data);
            core.count(Message::Drep, res.is_ok());
            let status = res.err().map_or(0, |e| e.to_errno());
            st.record(&core, EventKind::DrepSent, status, &data);
        }
        // Without our lock: `disconnect` takes the table's and ours.
        drop(st);
        drop(handshake);
        test.after_dreq(&core, self, id);
    }

    fn drep_received(&self, _id: &CmIdRef, private_data: &[u8]) {
        let Some(core) = Core::get() else {
            return;
        };
        let mut st = self.st.lock();
        st.record(&core, EventKind::DrepReceived, 0, private_data);
        st.record_disconnected(&core, 0);
        core.drep_received.fetch_add(1, Ordering::Relaxed);
        let after = i64::from(st.behaviour.free_after_ms);
        core.free_at(&self.0, &mut st, after);
    }

    fn dreq_error(&self, id: &CmIdRef, send_status: WcStatus) {
        let Some(core) = Core::get() else {
            return;
        };
        let mut st = self.st.lock();
        st.record(
            &core,
            EventKind::DreqError,
            send_status.to_raw() as i32,
            &[],
        );
        st.record_disconnected(&core, ETIMEDOUT.to_errno());
        let after = i64::from(st.behaviour.free_after_ms);
        core.free_at(&self.0, &mut st, after);
        drop(st);
        self.test_hooks().after_error(self.num, id);
    }

    fn connect_error(&self, id: &CmIdRef, send_status: WcStatus) {
        let Some(core) = Core::get() else {
            return;
        };
        self.record(
            &core,
            EventKind::ConnectError,
            send_status.to_raw() as i32,
            &[],
        );
        self.test_hooks().after_error(self.num, id);
        if self.role == Role::Passive {
            // Our REP timed out (REP_ERROR): as for a REJ.
            self.free_id(&core);
        }
    }

    fn timewait_exit(&self, _id: &CmIdRef) {
        let Some(core) = Core::get() else {
            return;
        };
        self.record(&core, EventKind::TimewaitExit, 0, &[]);
        let test = self.test_hooks();
        test.before_timewait_free();
        self.free_id(&core);
        test.after_timewait_free();
    }
}

pub(super) fn copy(data: &[u8]) -> Result<KVec<u8>> {
    let mut v = KVec::new();
    v.extend_from_slice(data, GFP_KERNEL)?;
    Ok(v)
}

impl Core {
    /// Starts `ep`'s rping poller, unless [`MAX_POLLERS`] run: then (or if
    /// the work cannot be allocated) its protocol runs only on `poll`.
    pub(super) fn spawn_poller(self: &Arc<Self>, ep: Arc<Endpoint>) {
        let live = &self.bounds.pollers_live;
        if live.fetch_add(1, Ordering::Relaxed) >= MAX_POLLERS {
            live.fetch_sub(1, Ordering::Relaxed);
            self.bounds
                .counts
                .pollers_refused
                .fetch_add(1, Ordering::Relaxed);
            return;
        }
        let core = self.clone();
        let spawned = self.bounds.pollers.spawn(move || {
            rping_poller(core.clone(), ep);
            core.bounds.pollers_live.fetch_sub(1, Ordering::Relaxed);
        });
        if spawned.is_err() {
            live.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// Drives an rping endpoint: takes its completions as they come (its CQ is
/// polled directly) until its protocol is over, its QP freed or its entry
/// gone (unload, close) or the core stopping (unload). Runs on the core's
/// `pollers`, which neither device removal nor unload flushes: removal frees
/// the QP (`take_verbs`, under the endpoint's lock, which this takes for
/// each poll), unload takes the entry out and sets `stop`, and the poller
/// returns at its next turn, within a millisecond's sleep.
fn rping_poller(core: Arc<Core>, ep: Arc<Endpoint>) {
    loop {
        if ep.gone.load(Ordering::Relaxed) || core.bounds.stop.load(Ordering::Relaxed) {
            return;
        }
        let action = {
            let mut st = ep.st.lock();
            // A match: 7.3's clippy wants `is_none_or` for `map_or(true, ..)`,
            // newer than 6.12's minimum Rust.
            let rping_done = match st.rping.as_ref() {
                Some(r) => r.done(),
                None => true,
            };
            if st.verbs.is_none() || rping_done {
                return;
            }
            st.drain_cq_for_rping()
        };
        match action {
            Ok(rping::Action::Nothing) => sleep_ms(1),
            // The client's last ping: `disconnect()` of its own entry.
            Ok(rping::Action::Disconnect) => {
                let _ = core.with_own_cm(ep.num, &ep, |cm| ep.disconnect_on(&core, Some(cm), &[]));
                return;
            }
            Err(_) => return,
        }
    }
}

/// What is due at a deadline of [`PendingDreqs`].
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Due {
    /// The DREP of a peer's DREQ nobody answered ([`Core::answer_later`]).
    Drep,
    /// A passive end freed whatever its id's state ([`Core::free_at`]).
    Free,
}

/// The peers' DREQs nobody answered yet and the passive ends to free, each
/// with its deadline (ns, `ktime_get()`), and whether a sweeper runs (see
/// [`Core::answer_later`], [`Core::free_at`]). Its lock
/// (`conn::Core::pending`) is a leaf: taken under an endpoint's (in the
/// CM callbacks), nothing is taken under it.
pub(super) struct PendingDreqs {
    /// By (deadline, a sequence number): the earliest first.
    pub(super) list: RBTree<(i64, u64), (Arc<Endpoint>, Due)>,
    pub(super) next: u64,
    pub(super) sweeping: bool,
}

impl Core {
    /// Answers `ep`'s DREQ at `due` unless someone does first: queued for
    /// the sweeper, which is started if none runs. On an error (no memory)
    /// the caller answers at once.
    ///
    /// The bound: an end in DREQ_RCVD holds its id and QP for its
    /// listener's `drep_after` (30 s unless set) plus a sweep (100 ms), then
    /// its DREP puts it in timewait, whose exit frees both. The list holds
    /// one entry (a tree node, about 64 bytes) per such end.
    pub(super) fn answer_later(self: &Arc<Self>, ep: &Arc<Endpoint>, due: i64) -> Result {
        self.defer(ep, due, Due::Drep).map(|_| ())
    }

    /// Frees passive end `ep` (its state `st`, locked) `after` ms from now
    /// if nothing else did first: from its callbacks once its disconnect
    /// began, the first of them only. Without memory for the list the
    /// peer's timers bound it, as without this.
    ///
    /// The bound: a passive end whose peer sent a DREQ is freed at most
    /// its listener's `drep_after` plus `free_after` (60 s unless set) plus
    /// a sweep later, one whose disconnect ended another way `free_after`
    /// plus a sweep later, whatever timewait its peer asked for.
    pub(super) fn free_at(
        self: &Arc<Self>,
        ep: &Arc<Endpoint>,
        st: &mut EndpointState,
        after: i64,
    ) {
        if ep.role != Role::Passive || st.deadline.is_some() {
            return;
        }
        let due = now_ns().saturating_add(after.saturating_mul(1_000_000));
        if let Ok(key) = self.defer(ep, due, Due::Free) {
            st.deadline = Some(key);
        }
    }

    /// Puts `ep` on the list for `what` at `due`, and starts the sweeper if
    /// none runs: the entry's key, or the error (no memory) with nothing
    /// on the list.
    fn defer(self: &Arc<Self>, ep: &Arc<Endpoint>, due: i64, what: Due) -> Result<(i64, u64)> {
        // Allocated before the lock.
        let node = RBTreeNodeReservation::new(GFP_KERNEL)?;
        let mut p = self.bounds.pending.lock();
        let key = (due, p.next);
        p.next = p.next.wrapping_add(1);
        p.list.insert(node.into_node(key, (ep.clone(), what)));
        if !p.sweeping {
            let core = self.clone();
            // On `sweepers`: a sweep may send DREPs for the whole table, and
            // device removal need not wait for it (it takes the table's
            // lock to reach an id, and removal takes ids out under it); nor
            // does it wait behind the pollers.
            if let Err(e) = self.bounds.sweepers.spawn(move || sweep_dreqs(core)) {
                let ep = p.list.remove(&key);
                drop(p);
                drop(ep);
                return Err(e);
            }
            p.sweeping = true;
        }
        Ok(key)
    }
}

/// The sweeper of unanswered DREQs: every [`SWEEP_MS`], answers those whose
/// deadline passed; returns once none is left, or at unload (`stop`).
fn sweep_dreqs(core: Arc<Core>) {
    loop {
        if core.bounds.stop.load(Ordering::Relaxed) {
            let list = {
                let mut p = core.bounds.pending.lock();
                p.sweeping = false;
                core::mem::replace(&mut p.list, RBTree::new())
            };
            // Endpoints dropped without the lock.
            drop(list);
            return;
        }
        let now = now_ns();
        loop {
            let due = {
                let mut p = core.bounds.pending.lock();
                let first = p.list.keys().next().copied();
                match first {
                    Some(key) if key.0 <= now => p.list.remove(&key),
                    _ => None,
                }
            };
            let Some((ep, what)) = due else {
                break;
            };
            match what {
                Due::Drep => ep.answer_late_dreq(&core),
                Due::Free => ep.free_late(&core),
            }
        }
        {
            let mut p = core.bounds.pending.lock();
            if p.list.keys().next().is_none() {
                p.sweeping = false;
                return;
            }
        }
        sleep_ms(SWEEP_MS);
    }
}

impl Endpoint {
    /// A passive end's deadline passed ([`Core::free_at`]): freed if its id
    /// is still held, its disconnect not over.
    fn free_late(self: &Arc<Self>, core: &Core) {
        self.st.lock().deadline = None;
        let held = core.with_own_cm(self.num, self, |cm| {
            Ok(matches!(
                cm.state(),
                cm::State::DreqSent | cm::State::DreqRcvd | cm::State::Timewait
            ))
        });
        if let Ok(true) = held {
            core.bounds
                .counts
                .ends_freed_late
                .fetch_add(1, Ordering::Relaxed);
            self.free_id(core);
        }
    }

    /// The deadline of a peer's DREQ passed: a DREP, if the id is still in
    /// DREQ_RCVD (nobody answered, nothing freed it).
    fn answer_late_dreq(self: &Arc<Self>, core: &Core) {
        let _ = core.with_own_cm(self.num, self, |cm| {
            let mut st = self.st.lock();
            if cm.state() != cm::State::DreqRcvd {
                return Ok(());
            }
            let res = product::send(Message::Drep, cm, &[]);
            core.count(Message::Drep, res.is_ok());
            if res.is_ok() {
                core.bounds
                    .counts
                    .dreq_answered_late
                    .fetch_add(1, Ordering::Relaxed);
            }
            let status = res.err().map_or(0, |e| e.to_errno());
            st.record(core, EventKind::DrepSent, status, &[]);
            Ok(())
        });
    }
}
