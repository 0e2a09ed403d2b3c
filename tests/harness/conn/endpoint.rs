// SPDX-License-Identifier: GPL-2.0

//! One end of a connection (or a listener): the endpoint, its state and
//! event record, its QP, and what frees them.

use super::{
    behaviour::Behaviour,
    now_ns,
    qp::CountedQp,
    stats::{Counted, STATS},
    wr_stats::{DataStats, WrStats},
};
use crate::{
    cm::{CmIdRef, Message},
    rping::{self, Rping},
};
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use kernel::{
    new_mutex,
    prelude::*,
    rdma::{
        device::Device,
        verbs::{QpAttr, QpState, Waker, WrKind},
    },
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

/// How long freeing a QP waits for the flushes of its posted work requests.
pub(super) const DRAIN_WAIT_MS: u32 = 2000;

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
    pub(super) verbs: Option<CountedQp>,
    pub(super) behaviour: Behaviour,
    /// `disconnect` was called: a crossing DREQ is answered at once.
    pub(super) disconnecting: bool,
    /// The DISCONNECTED event was recorded.
    pub(super) disconnected: bool,
    /// Work requests posted, their completions, what they carried.
    pub(super) wr: WrStats,
    /// The rping protocol, if the connection speaks it.
    pub(super) rping: Option<KBox<Rping>>,
    /// Queues the rping protocol's next step (its QP's waker, see
    /// `pollers`).
    pub(super) rping_wake: Option<Waker>,
    /// A passive end's place in its listener's handshakes in flight, until
    /// the handshake is over (established, failed or freed).
    pub(super) handshake: Option<Handshake>,
    /// A passive end's deadline on the list of [`PendingDreqs`], once its
    /// disconnect began (see [`Core::free_at`]).
    pub(super) deadline: Option<(i64, u64)>,
}

/// One handshake in flight on a listener: counted in its `handshakes`
/// while this exists; with its peer's bucket (`cma=1` listeners: see
/// [`super::pace`]), in which, once its REP is sent, it counts as a REP in
/// flight until it is over.
pub(super) struct Handshake(
    pub(super) Arc<Endpoint>,
    pub(super) Option<usize>,
    pub(super) bool,
);

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

    /// Its REP is sent: a REP in flight to its peer until it is over. The
    /// peer's bucket, the first time, to count it in (`Peers::rep_sent`).
    pub(super) fn rep_sent(&mut self) -> Option<usize> {
        if self.2 {
            return None;
        }
        self.2 = self.1.is_some();
        self.1
    }

    /// Its peer's bucket.
    pub(super) fn peer(&self) -> Option<usize> {
        self.1
    }
}

/// A passive end's place among its listener's `ends`, held by its id's
/// data ([`EpHandle`]): given back when the id
/// is destroyed, whoever destroys it.
pub(super) struct EndSlot(Arc<Endpoint>);

impl EndSlot {
    /// A place on `listener`, or `ENOSPC` if it has `max` ends already.
    pub(super) fn new(listener: &Arc<Endpoint>, max: u32) -> Result<Self> {
        let n = listener.ends.fetch_add(1, Ordering::AcqRel);
        let slot = Self(listener.clone());
        if n >= max as usize {
            // Dropped: the count goes back.
            return Err(ENOSPC);
        }
        Ok(slot)
    }
}

impl Drop for EndSlot {
    fn drop(&mut self) {
        self.0.ends.fetch_sub(1, Ordering::AcqRel);
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
    pub(super) fn drain_cq_for_rping(&mut self) -> Result<rping::Action> {
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
            } else if c.kind == Some(WrKind::LocalInv) {
                self.wr.keep_mr(core::mem::take(&mut c.buf));
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

    /// A passive end's connection is over (its DREP sent or received, or
    /// its DREQ unanswered): its QP is taken out to be freed now, as an
    /// rdma_cm consumer frees its QP at DISCONNECTED, not at timewait exit,
    /// whose length the peer chooses. An end of ours keeps its QP until
    /// then: tests read its state after a disconnect.
    pub(super) fn connection_over(&mut self, role: Role) -> Option<CountedQp> {
        if role != Role::Passive {
            return None;
        }
        self.verbs.take()
    }

    /// Takes the QP out to be freed, its posted work requests ended first
    /// (flushed, and counted with the completions still on its CQ).
    pub(super) fn take_verbs(&mut self) -> Option<CountedQp> {
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

    pub(super) fn record(&mut self, kind: EventKind, status: i32, data: &[u8]) {
        self.record_at(now_ns(), kind, status, data);
    }

    /// As `record`, at time `t_ns`.
    pub(super) fn record_at(&mut self, t_ns: i64, kind: EventKind, status: i32, data: &[u8]) {
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
            STATS.events_lost.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Records DISCONNECTED, once, whatever path ends the connection.
    pub(super) fn record_disconnected(&mut self, status: i32) {
        if let Some(r) = self.rping.as_mut() {
            r.stop();
        }
        if !self.disconnected {
            self.disconnected = true;
            self.record(EventKind::Disconnected, status, &[]);
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
    pub(super) cma: bool,
    /// A listener's handshakes in flight (see [`Handshake`]).
    pub(super) handshakes: AtomicUsize,
    /// A listener's passive ends whose id exists (see [`EndSlot`]).
    pub(super) ends: AtomicUsize,
    /// The endpoint's lock (`conn::Endpoint::st`): taken after the table's,
    /// never before it (see the lock order in [`super`]).
    #[pin]
    pub(super) st: Mutex<EndpointState>,
    /// Its entry left the table (close, unload): work of its own (the rping
    /// poller) stops.
    pub(super) gone: AtomicBool,
    _live: Counted,
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
                ends: AtomicUsize::new(0),
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
                        rping_wake: None,
                        handshake: None,
                        deadline: None,
                    },
                    "conn::Endpoint::st"
                ),
                gone: AtomicBool::new(false),
                _live: Counted::new(&STATS.endpoints),
            }? Error),
            GFP_KERNEL,
        )?;
        Ok(ep)
    }

    pub(super) fn record(&self, kind: EventKind, status: i32, data: &[u8]) {
        self.st.lock().record(kind, status, data);
    }

    /// Moves the QP to `state` with the attributes the CM computes.
    pub(super) fn move_qp(&self, id: &CmIdRef, state: QpState) -> Result {
        let attr = id.init_qp_attr(state)?;
        self.modify_qp(&attr)
    }

    /// Modifies the QP as `attr` says; `ENODEV` once it is freed.
    pub(super) fn modify_qp(&self, attr: &QpAttr) -> Result {
        let mut st = self.st.lock();
        st.verbs.as_mut().ok_or(ENODEV)?.modify(attr)
    }
}

/// An endpoint as the data of its `CmId`: a type of the module's own, so
/// that it can implement the kernel crate's `Handler` (the orphan rule
/// forbids an impl for `Arc<Endpoint>` outside the kernel crate; the impl
/// is in `handler`, above the table that holds the ids).
pub(crate) struct EpHandle(
    Arc<Endpoint>,
    // Held for its drop: a passive end's place on its listener.
    #[allow(dead_code)] Option<EndSlot>,
    // Held for its drop: one of the module's CM ids.
    #[allow(dead_code)] Counted,
);

impl EpHandle {
    /// The data of a new id of `ep`'s, counted in `cm_ids_live` until
    /// dropped.
    pub(crate) fn new(ep: Arc<Endpoint>) -> Self {
        Self(ep, None, Counted::new(&STATS.cm_ids))
    }

    /// The same for a passive end, holding its place on its listener.
    pub(super) fn passive(ep: Arc<Endpoint>, slot: EndSlot) -> Self {
        Self(ep, Some(slot), Counted::new(&STATS.cm_ids))
    }
}

impl core::ops::Deref for EpHandle {
    type Target = Arc<Endpoint>;

    fn deref(&self) -> &Arc<Endpoint> {
        &self.0
    }
}
