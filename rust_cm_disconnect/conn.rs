// SPDX-License-Identifier: GPL-2.0

//! Connections over the IB CM, made and torn down by this module: listeners,
//! the active and passive ends of RC connections, their disconnect, and the
//! record of every event each end saw.
//!
//! Locking: one mutex ([`Core`]) guards the device set and the connection
//! table. A [`CmId`] is never dropped with it held: dropping an id waits for
//! the id's callbacks, and callbacks take the lock.

use crate::{
    cm::{self, CmId, CmIdRef, Handler, ReaperRef, Rep, Req, Request},
    cma, delay,
    devices::{DeviceEntry, Devices},
    disconnect::{self, Message},
    errno,
    ib_client::{Client, Device},
    path::{self, GidAttr, Timing},
    rping::{self, Rping},
    verbs::{self, Completion, MrState, QpSize, RcQp, WrKind, WC_WR_FLUSH_ERR},
};
use core::{
    fmt::Write,
    sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
};
use kernel::{
    bindings,
    error::code::*,
    ffi::c_int,
    fmt, new_condvar, new_mutex,
    prelude::*,
    rbtree::RBTree,
    str::CString,
    sync::{Arc, CondVar, Mutex},
    time::Ktime,
};

/// The REQ private data of a connection made here starts with this, then the
/// active end's number (little endian): the passive end takes the number
/// plus [`PASSIVE_BASE`], so tests know both names.
const REQ_MAGIC: &[u8; 4] = b"RCD1";
/// Passive ends of this module's own connections: active number + this.
pub(crate) const PASSIVE_BASE: u32 = 1_000_000;
/// Passive ends of foreign connections are numbered from here.
const FOREIGN_BASE: u32 = 2_000_000;

/// Handshakes a listener has in flight at most, unless `backlog=N` says
/// otherwise: as many as ucma's default listen backlog.
pub(crate) const DEFAULT_BACKLOG: u32 = 1024;

/// The time a passive end asks for in its MRA (sent only when the peer
/// retransmits its REQ): enough for the job queue's latency from the REQ
/// callback to the REP (`stats`: `rep_latency_us_*`), and short enough that
/// a peer whose passive side vanishes after the MRA is not held for long.
///
/// The CM computes 2^(20 - 8) = 4,096 ms (`cm_convert_to_ms`); the peer's CM
/// adds its packet lifetime (`cm_convert_to_ms(av.timeout)`: 512 ms for
/// rdma_cm on RoCE, 128 ms for `connect ... lifetime=14`) and waits that
/// long for each of its remaining REQ retries (`cm_mra_handler` stores it
/// with `ib_modify_mad`, and `retry_send` reuses it; later MRAs are
/// duplicates). The MRA answers the first retransmission, so such a peer
/// gives up after its first timeout plus (retries - 1 + 1) x (4,096 ms +
/// its lifetime): about 69 s with rdma_cm's 15 retries, 8.6 s with
/// `retries=2 lifetime=14 resp=14`. rdma_cm's own 24 is
/// 65,536 ms a retry (about 16 min with 15 retries), sized for a user-space
/// accept; the job's latency here is bounded by the queue's depth times
/// one QP (measured: see the README).
const MRA_SERVICE_TIMEOUT: u8 = 20;

/// The counts `stats` shows over every connection's QP.
static VERBS_COUNTERS: verbs::Counters = verbs::Counters::new();

/// Every connection's QP: its queue sizes, and the module's name and counts.
fn qp_size() -> QpSize {
    QpSize {
        send: 64,
        recv: 64,
        caller: kernel::c_str!("rust_cm_disconnect"),
        counters: Some(&VERBS_COUNTERS),
        ..QpSize::default()
    }
}

/// The largest buffer a work request of `post` (or an MR) carries: the
/// module's own bound (one page, one scatter entry). Not a limit of RC,
/// which segments a SEND into packets of the path MTU; what bounds a SEND
/// on the wire is the peer's posted receive buffer (see `post`).
pub(crate) const MAX_WR_BYTES: usize = 4096;

/// How long freeing a QP waits for the flushes of its posted work requests.
const DRAIN_WAIT_MS: u32 = 2000;

/// Endpoints alive (in the table or still held by an id): 0 once everything
/// is freed.
static LIVE_ENDPOINTS: AtomicUsize = AtomicUsize::new(0);

/// What an endpoint is.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    Listener,
    Active,
    Passive,
}

impl Role {
    fn name(self) -> &'static str {
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

/// What an endpoint's DREQ callback does besides recording the DREQ: the
/// careless consumer callbacks the tests need (`on_dreq=` in `ctl`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnDreq {
    Nothing,
    /// Sleeps this many milliseconds first.
    Sleep(u32),
    /// Sends a DREQ on its own connection (the CM refuses: DREQ_RCVD).
    Dreq,
    /// `disconnect()` of its own connection: QP to error, DREP.
    Disconnect,
    /// `disconnect()` of another connection.
    DisconnectOther(u32),
}

/// What an active end does with the REP (`on_rep=` in `ctl`): the peer
/// that never completes a handshake, for the tests.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnRep {
    /// QP to RTR and RTS, then the RTU.
    Accept,
    /// Nothing: no RTU (the passive end's REP times out).
    Ignore,
    /// A REJ instead of the RTU.
    Reject,
}

/// What a listener's REQ callback and its passive ends' jobs do besides
/// their work (`on_req=` in `ctl`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnReq {
    Nothing,
    /// Closes the listener (drops its `CmId` inside its own REQ callback),
    /// then handles the REQ as usual.
    Close,
    /// The passive end's job sleeps this many milliseconds after making
    /// the QP, before it moves it and sends the REP (up to 60 s; cut short
    /// once the entry leaves the table or its id is freed): the window
    /// between the REQ callback and the REP, held open.
    JobDelay(u32),
    /// The REQ callback fails as if queueing the job had failed with
    /// `ENOMEM` (after the accept and the table's insert).
    FailJob,
}

/// The test-only behaviours, together: with these `ctl` options the tests
/// hold open the windows of an id's lifecycle and play careless consumers
/// and broken peers. Nothing else sets them, and with their defaults
/// (`TestHooks::NONE`) the module behaves as a consumer would.
#[derive(Clone, Copy)]
pub(crate) struct TestHooks {
    /// What the DREQ callback does besides recording the DREQ
    /// (`on_dreq=`).
    pub(crate) on_dreq: OnDreq,
    /// A listener's REQ callback and its passive ends' jobs (`on_req=`).
    pub(crate) on_req: OnReq,
    /// Milliseconds the timewait-exit callback sleeps before it frees the
    /// id (`on_timewait=sleep:MS`): widens the window of a callback in
    /// flight.
    pub(crate) timewait_sleep: u32,
    /// The sleep comes after the id is freed (`on_timewait=after:MS`): the
    /// callback is still in module code once nothing refers to the id, the
    /// window an unload must wait for.
    pub(crate) timewait_after: bool,
    /// What an active end does with the REP (`on_rep=`).
    pub(crate) on_rep: OnRep,
}

impl TestHooks {
    pub(crate) const NONE: Self = Self {
        on_dreq: OnDreq::Nothing,
        on_req: OnReq::Nothing,
        timewait_sleep: 0,
        timewait_after: false,
        on_rep: OnRep::Accept,
    };
}

/// How an endpoint answers its peer, set by `listen`/`connect` options; a
/// listener's is copied to its passive ends.
pub(crate) struct Behaviour {
    /// Answer a peer's DREQ at once with a DREP carrying these bytes.
    pub(crate) auto_drep: Option<KVec<u8>>,
    /// For the tests only (see [`TestHooks`]).
    pub(crate) test: TestHooks,
    /// A listener's bound on handshakes in flight (REQ accepted, REP sent,
    /// no RTU yet): the excess is rejected (`backlog=N`).
    pub(crate) backlog: u32,
    /// Receives (count, buffer size) posted before the REQ or REP leaves
    /// (`recv=COUNT[:SIZE]`), as a ULP does before it connects or accepts.
    pub(crate) pre_recv: Option<(u32, usize)>,
    /// Speak rping's protocol on the connection (`rping=1` on a listener:
    /// the server; `rping=COUNT:SIZE` on connect: the client).
    pub(crate) rping: Option<rping::Role>,
}

impl Default for Behaviour {
    fn default() -> Self {
        Self {
            auto_drep: None,
            test: TestHooks::NONE,
            backlog: DEFAULT_BACKLOG,
            pre_recv: None,
            rping: None,
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
            test: self.test,
            backlog: self.backlog,
            pre_recv: self.pre_recv,
            rping: self.rping,
        })
    }
}

impl EventKind {
    /// The event of our `msg` leaving.
    fn sent(msg: Message) -> Self {
        match msg {
            Message::Dreq => Self::DreqSent,
            Message::Drep => Self::DrepSent,
        }
    }

    fn name(self) -> &'static str {
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

struct Event {
    /// `ktime_get()` when it was recorded, in ns: what `make bench` uses.
    t_ns: i64,
    kind: EventKind,
    /// An errno (negative), a CM reason or a work completion status.
    status: i32,
    /// The private data the message carried (the whole field).
    data: KVec<u8>,
}

struct EndpointState {
    events: KVec<Event>,
    verbs: Option<RcQp>,
    behaviour: Behaviour,
    /// `disconnect` was called: a crossing DREQ is answered at once.
    disconnecting: bool,
    /// The DISCONNECTED event was recorded.
    disconnected: bool,
    /// Work requests posted, their completions, what they carried.
    wr: WrStats,
    /// The rping protocol, if the connection speaks it.
    rping: Option<KBox<Rping>>,
    /// A passive end's place in its listener's handshakes in flight, until
    /// the handshake is over (established, failed or freed).
    handshake: Option<Handshake>,
}

/// One handshake in flight on a listener: counted in its `handshakes`
/// while this exists.
struct Handshake(Arc<Endpoint>);

impl Handshake {
    /// A place on `listener`, or `EBUSY` if its backlog is full.
    fn new(listener: &Arc<Endpoint>, backlog: u32) -> Result<Self> {
        let n = listener.handshakes.fetch_add(1, Ordering::AcqRel);
        let slot = Self(listener.clone());
        if n >= backlog as usize {
            // Dropped: the count goes back.
            return Err(EBUSY);
        }
        Ok(slot)
    }
}

impl Drop for Handshake {
    fn drop(&mut self) {
        self.0.handshakes.fetch_sub(1, Ordering::AcqRel);
    }
}

/// What `post` asks for: `recv` receives, each with a `size`-byte buffer,
/// and `send` SENDs, each carrying `data`, or else `size` bytes of the
/// pattern 1, 2, .., 255, 1, .. (0: zero-length work requests).
pub(crate) struct Post {
    pub(crate) recv: u32,
    pub(crate) send: u32,
    pub(crate) size: usize,
    pub(crate) data: Option<KVec<u8>>,
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

/// The work requests of an endpoint: how many were posted, how each came
/// back, and what the successful ones carried.
///
/// Every request posted comes back once: `posted == completed_ok + flushed
/// + completed_err + dropped + ` those still outstanding.
#[derive(Default)]
struct WrStats {
    posted: u64,
    completed_ok: u64,
    flushed: u64,
    completed_err: u64,
    /// Still posted when the QP was freed, after its flush was waited for
    /// (their buffers freed after the QP's destroy).
    dropped: u64,
    /// Allocated by the first `post`: most endpoints never carry data.
    data: Option<KBox<DataStats>>,
}

/// The payloads of an endpoint's successful receives and SENDs.
#[derive(Default)]
struct DataStats {
    rx_msgs: u64,
    rx_bytes: u64,
    /// FNV-1a (32 bits) over every byte received, in order.
    rx_sum: u32,
    /// The first bytes of the last message received.
    rx_last: [u8; 16],
    rx_last_len: usize,
    tx_msgs: u64,
    tx_bytes: u64,
    /// FNV-1a over every byte sent (completed with success), in order.
    tx_sum: u32,
    /// MR buffers handed back by their LOCAL_INV, and the last one's
    /// FNV-1a and first bytes (what the peer left in it).
    mr_back: u64,
    mr_sum: u32,
    mr_last: [u8; 16],
}

const FNV_OFFSET: u32 = 0x811c_9dc5;

/// FNV-1a, continued from `h` over `bytes`.
fn fnv1a(mut h: u32, bytes: &[u8]) -> u32 {
    for b in bytes {
        h = (h ^ u32::from(*b)).wrapping_mul(0x0100_0193);
    }
    h
}

impl WrStats {
    /// Counts a completion and what it carried.
    fn add(&mut self, c: &Completion) {
        match c.status {
            0 => self.completed_ok += 1,
            WC_WR_FLUSH_ERR => self.flushed += 1,
            _ => self.completed_err += 1,
        }
        let (Some(d), 0) = (self.data.as_mut(), c.status) else {
            return;
        };
        match c.kind {
            // A READ brings data in as a receive does; a WRITE sends it.
            Some(WrKind::Recv | WrKind::RdmaRead) => {
                let got = &c.buf[..(c.byte_len as usize).min(c.buf.len())];
                if d.rx_msgs == 0 {
                    d.rx_sum = FNV_OFFSET;
                }
                d.rx_msgs += 1;
                d.rx_bytes += got.len() as u64;
                d.rx_sum = fnv1a(d.rx_sum, got);
                let n = got.len().min(d.rx_last.len());
                d.rx_last[..n].copy_from_slice(&got[..n]);
                d.rx_last_len = n;
            }
            Some(WrKind::LocalInv) => {
                d.mr_back += 1;
                d.mr_sum = fnv1a(FNV_OFFSET, &c.buf);
                let n = c.buf.len().min(d.mr_last.len());
                d.mr_last = [0; 16];
                d.mr_last[..n].copy_from_slice(&c.buf[..n]);
            }
            Some(WrKind::RegMr) => {}
            Some(WrKind::Send | WrKind::RdmaWrite) => {
                if d.tx_msgs == 0 {
                    d.tx_sum = FNV_OFFSET;
                }
                d.tx_msgs += 1;
                d.tx_bytes += c.buf.len() as u64;
                d.tx_sum = fnv1a(d.tx_sum, &c.buf);
            }
            None => {}
        }
    }

    /// Prints the counters for `conns`.
    fn show(&self, out: &mut impl Write) -> core::fmt::Result {
        write!(
            out,
            " posted={} completed={} flushed={} failed={} dropped={}",
            self.posted, self.completed_ok, self.flushed, self.completed_err, self.dropped
        )?;
        let zero = DataStats::default();
        let d = self.data.as_deref().unwrap_or(&zero);
        write!(
            out,
            " rx_msgs={} rx_bytes={} rx_sum={:08x} rx_last=",
            d.rx_msgs, d.rx_bytes, d.rx_sum
        )?;
        if d.rx_last_len == 0 {
            write!(out, "-")?;
        }
        for b in d.rx_last[..d.rx_last_len].iter() {
            write!(out, "{:02x}", b)?;
        }
        write!(
            out,
            " tx_msgs={} tx_bytes={} tx_sum={:08x}",
            d.tx_msgs, d.tx_bytes, d.tx_sum
        )?;
        if d.mr_back > 0 {
            write!(
                out,
                " mr_back={} mr_sum={:08x} mr_last=",
                d.mr_back, d.mr_sum
            )?;
            for b in d.mr_last.iter() {
                write!(out, "{:02x}", b)?;
            }
        }
        Ok(())
    }
}

/// `len` bytes of the pattern 1, 2, .., 255, 1, ...
fn pattern(len: usize) -> Result<KVec<u8>> {
    let mut v = KVec::with_capacity(len, GFP_KERNEL)?;
    for i in 0..len {
        v.push((i % 255) as u8 + 1, GFP_KERNEL)?;
    }
    Ok(v)
}

impl EndpointState {
    /// Takes every completion from the QP's CQ and counts it.
    fn drain_cq(&mut self) -> Result {
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
    fn rping_setup(&mut self, role: rping::Role) -> Result {
        let mut r = KBox::new(Rping::new(role)?, GFP_KERNEL)?;
        self.data_stats()?;
        let verbs = self.verbs.as_mut().ok_or(ENODEV)?;
        self.wr.posted += u64::from(r.pre_post(verbs)?);
        self.rping = Some(r);
        Ok(())
    }

    /// Takes the QP out to be freed, its posted work requests ended first
    /// (flushed, and counted with the completions still on its CQ).
    fn take_verbs(&mut self) -> Option<RcQp> {
        let mut verbs = self.verbs.take()?;
        let wr = &mut self.wr;
        let left = verbs.drain(DRAIN_WAIT_MS, |c| wr.add(&c));
        wr.dropped += u64::from(left);
        Some(verbs)
    }

    /// Allocates the data statistics on the first post.
    fn data_stats(&mut self) -> Result {
        if self.wr.data.is_none() {
            self.wr.data = Some(KBox::new(DataStats::default(), GFP_KERNEL)?);
        }
        Ok(())
    }

    /// `mr NUM reg DATA`: registers a buffer holding DATA for the peer's
    /// RDMA READ and WRITE.
    fn reg_mr(&mut self, data: &[u8]) -> Result {
        if data.len() > MAX_WR_BYTES {
            return Err(errno::emsgsize());
        }
        self.data_stats()?;
        let verbs = self.verbs.as_mut().ok_or(ENODEV)?;
        verbs.reg_mr(copy(data)?)?;
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
            return Err(errno::emsgsize());
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
    /// a path (RTR), `ENOMEM` if a queue has no room for them all.
    ///
    /// The path-MTU bound on a SEND is this module's choice (one packet per
    /// message, what the tests count), not RC's: RC segments a larger SEND.
    /// The limit that matters on the wire is the peer's: a SEND longer than
    /// the receive buffer the peer posted completes there with
    /// `IB_WC_LOC_LEN_ERR` and moves both QPs to the error state. Nothing
    /// here can see the peer's buffers; sender and receiver agree on sizes
    /// (`recv=COUNT:SIZE`, `post ... size=N`).
    fn post(&mut self, p: &Post) -> Result {
        let verbs = self.verbs.as_mut().ok_or(ENODEV)?;
        let send_len = p.data.as_ref().map_or(p.size, |d| d.len());
        if p.size > MAX_WR_BYTES || send_len > MAX_WR_BYTES {
            return Err(errno::emsgsize());
        }
        if p.send > 0 && send_len > 0 && send_len > verbs.path_mtu()? as usize {
            return Err(errno::emsgsize());
        }
        if !verbs.has_room(WrKind::Recv, p.recv) || !verbs.has_room(WrKind::Send, p.send) {
            return Err(ENOMEM);
        }
        self.data_stats()?;
        let verbs = self.verbs.as_mut().ok_or(ENODEV)?;
        for _ in 0..p.recv {
            let mut buf = KVec::new();
            buf.extend_with(p.size, 0, GFP_KERNEL)?;
            verbs.post_recv(buf)?;
            self.wr.posted += 1;
        }
        for _ in 0..p.send {
            let buf = match &p.data {
                Some(d) => copy(d)?,
                None => pattern(p.size)?,
            };
            verbs.post_send(buf)?;
            self.wr.posted += 1;
        }
        Ok(())
    }

    fn record(&mut self, core: &Core, kind: EventKind, status: i32, data: &[u8]) {
        self.record_at(core, Ktime::ktime_get().to_ns(), kind, status, data);
    }

    /// As `record`, at time `t_ns`.
    fn record_at(&mut self, core: &Core, t_ns: i64, kind: EventKind, status: i32, data: &[u8]) {
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
    fn record_disconnected(&mut self, core: &Core, status: i32) {
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
#[pin_data]
pub(crate) struct Endpoint {
    num: u32,
    role: Role,
    dev_index: u32,
    dev_name: CString,
    /// The listener that made a passive end.
    listener: u32,
    /// A listener that takes rdma_cm's REQs only (a valid `cma_hdr` first).
    cma: bool,
    core: Arc<Core>,
    /// A listener's handshakes in flight (see [`Handshake`]).
    handshakes: AtomicUsize,
    #[pin]
    st: Mutex<EndpointState>,
    /// Its entry left the table (close, unload): work of its own (the rping
    /// poller) stops.
    gone: AtomicBool,
    _live: LiveToken,
}

impl Endpoint {
    fn new(
        core: &Arc<Core>,
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
                core: core.clone(),
                handshakes: AtomicUsize::new(0),
                st <- new_mutex!(EndpointState {
                    // A connection's life is about eight events: reserved now,
                    // callbacks do not reallocate.
                    events: KVec::with_capacity(8, GFP_KERNEL)?,
                    verbs: None,
                    behaviour,
                    disconnecting: false,
                    disconnected: false,
                    wr: WrStats::default(),
                    rping: None,
                    handshake: None,
                }),
                gone: AtomicBool::new(false),
                _live: LiveToken::new(),
            }? Error),
            GFP_KERNEL,
        )?;
        Ok(ep)
    }

    fn record(&self, kind: EventKind, status: i32, data: &[u8]) {
        self.st.lock().record(&self.core, kind, status, data);
    }

    /// Moves the QP to `state` with the attributes the CM computes.
    fn move_qp(&self, id: &CmIdRef, state: bindings::ib_qp_state) -> Result {
        let (attr, mask) = id.init_qp_attr(state)?;
        self.modify_qp(attr, mask)
    }

    /// Modifies the QP with `attr` for the attributes in `mask`; `ENODEV`
    /// once it is freed.
    fn modify_qp(&self, mut attr: bindings::ib_qp_attr, mask: c_int) -> Result {
        let st = self.st.lock();
        st.verbs.as_ref().ok_or(ENODEV)?.modify(&mut attr, mask)
    }

    /// From one of its id's callbacks (timewait exit, a failed handshake):
    /// free the id and the QP; keep the record (with the completions still
    /// on the CQ counted). Acts on this endpoint's own entry only, whatever
    /// now has its number.
    fn free_id(&self) {
        let (verbs, handshake) = {
            let mut st = self.st.lock();
            (st.take_verbs(), st.handshake.take())
        };
        self.core.destroy_own_cm(self);
        drop(verbs);
        drop(handshake);
    }

    /// A REQ to this listener (see [`Handler::req_received`]).
    fn take_req(self: &Arc<Self>, req: Request<'_, Arc<Self>>) -> Result {
        let core = &self.core;
        if self.st.lock().behaviour.test.on_req == OnReq::Close {
            // Drops our own `CmId` inside its REQ callback (the CM holds the
            // listener until we return): the abstraction defers the destroy.
            drop(core.remove_own(self));
        }
        // This module makes RC QPs only: a REQ for UC or XRC is rejected, as
        // rdma_cm rejects a REQ whose QP type is not its listener's; so is
        // one to rdma_cm's UDP port space, where rdma_cm serves UD only.
        if !req.is_rc() || (self.cma && cma::is_udp(req.service_id())) {
            return Err(EINVAL);
        }
        let pd = req.private_data();
        let ours = if self.cma {
            // Garbage is rejected: the CM sends the REJ. So is a REQ for an
            // address this device does not have, as rdma_cm's
            // `validate_net_dev` rejects it: a peer that lies about where
            // it connects to.
            let (_, _, dst) = cma::parse(pd)?;
            let (device, gid) = (req.id().device(), path::ipv4_gid(dst));
            if !device
                .ports()
                .any(|port| GidAttr::find_roce_v2(device, &gid, port).is_ok())
            {
                return Err(errno::ehostunreach());
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
        let on_req = behaviour.test.on_req;
        // Over the backlog: rejected (the CM sends the REJ).
        let handshake = Handshake::new(self, behaviour.backlog)?;
        let device = req.id().device();
        let ep = Endpoint::new(core, num, Role::Passive, device, self.num, false, behaviour)?;
        ep.st.lock().handshake = Some(handshake);
        let cm = req.accept(ep.clone())?;
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
        // gave up (issue 11's storm).
        let job = ep.clone();
        let t_req = Ktime::ktime_get().to_ns();
        let spawned = if on_req == OnReq::FailJob {
            Err(ENOMEM)
        } else {
            core.reaper
                .spawn_job(move || job.accept_later(depth, resources, t_req))
        };
        if let Err(e) = spawned {
            // Out again, dropped in its REQ callback: the CM destroys it.
            drop(core.remove_own(&ep));
            return Err(e);
        }
        // Each retransmission of the peer's REQ is answered with an MRA
        // from now on, as rdma_cm does, so that the peer waits for the job.
        // Last, and its error ignored: with `delay` and no private data it
        // fails only with `EINVAL`, when the job has already sent its REP
        // or the peer's REJ has reset the id (whose callback frees the
        // end), or `ENOENT`/`ENOTCONN` when the end is already gone; in
        // none of these is an MRA needed.
        let _ = core.with_own_cm(num, &ep, |cm| cm.send_mra(MRA_SERVICE_TIMEOUT, true));
        Ok(())
    }

    /// A passive end's job, after its REQ callback: the QP, its moves to
    /// INIT and RTR, and the REP, on the id made for this endpoint. A
    /// failure is recorded (`CONNECT_ERROR`) and frees the id and QP (the CM
    /// rejects the REQ); an endpoint closed or freed meanwhile (`close`, the
    /// peer's REJ, device removal, unload) is left as it is, and the QP the
    /// job made for it is freed.
    fn accept_later(self: &Arc<Self>, depth: u8, resources: u8, t_req: i64) {
        let verbs = match Device::get_by_name(&self.dev_name) {
            // The same device, not a new one of the same name.
            Ok(dev) if dev.index() == self.dev_index => RcQp::new(&dev, qp_size()),
            _ => Err(ENODEV),
        };
        match self.send_rep(verbs, depth, resources) {
            Ok(Ok(())) => {
                self.core.rep_times.add(Ktime::ktime_get().to_ns() - t_req);
                if self.st.lock().behaviour.rping.is_some() {
                    // If this fails the protocol only runs on `poll`.
                    let ep = self.clone();
                    let _ = self.core.reaper.spawn(move || rping_poller(ep));
                }
            }
            Ok(Err(e)) => {
                self.record(EventKind::ConnectError, e.to_errno(), &[]);
                self.free_id();
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

    /// `on_req=job_delay:MS` (a test hook): sleeps up to MS ms, cut short
    /// once the entry leaves the table or the id is freed (a REJ, a failed
    /// REP).
    fn job_delay(&self) {
        let OnReq::JobDelay(ms) = self.st.lock().behaviour.test.on_req else {
            return;
        };
        let end = Ktime::ktime_get().to_ns() + i64::from(ms) * 1_000_000;
        while Ktime::ktime_get().to_ns() < end
            && !self.gone.load(Ordering::Relaxed)
            && self.st.lock().handshake.is_some()
        {
            delay::msleep(10);
        }
    }

    /// Readies a passive end's QP `verbs` and answers the REQ: `Ok(Err)` if
    /// ours failed, `Err` if the endpoint is gone (out of the table, or its
    /// id freed or reset by the peer's REJ).
    ///
    /// The table's lock, which every REQ, REJ, REP_ERROR and timewait-exit
    /// callback takes, is held only to use the id (the CM's computation of
    /// the QP's attributes, the REP), never across the QP's moves: those run
    /// under the endpoint's lock alone, so that the CM's workqueue does not
    /// wait behind QP work (review S2).
    fn send_rep(self: &Arc<Self>, verbs: Result<RcQp>, depth: u8, resources: u8) -> Result<Result> {
        let init_rtr = self.core.with_own_cm(self.num, self, |cm| {
            Ok(cm
                .init_qp_attr(bindings::ib_qp_state_IB_QPS_INIT)
                .and_then(|init| Ok((init, cm.init_qp_attr(bindings::ib_qp_state_IB_QPS_RTR)?))))
        })?;
        let res = verbs.and_then(|verbs| {
            let ((init, init_mask), (mut rtr, rtr_mask)) = init_rtr?;
            let qp_num = verbs.qp_num();
            self.st.lock().verbs = Some(verbs);
            self.job_delay();
            // Our PSN: what the peer sends with, announced in the REP.
            let starting_psn = qp_num;
            self.modify_qp(init, init_mask)?;
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
            rtr.rq_psn = starting_psn;
            self.modify_qp(rtr, rtr_mask)?;
            Ok(qp_num)
        });
        let qp_num = match res {
            Ok(qp_num) => qp_num,
            Err(e) => {
                // An id the peer's REJ reset (idle; its callback frees the
                // end) or one gone meanwhile is not ours to reject.
                let state = self.core.with_own_cm(self.num, self, |cm| Ok(cm.state()))?;
                return if state == cm::State::Idle {
                    Err(errno::enotconn())
                } else {
                    Ok(Err(e))
                };
            }
        };
        self.core.with_own_cm(self.num, self, |cm| {
            let res = cm.send_rep(&Rep {
                qp_num,
                starting_psn: qp_num,
                responder_resources: depth.min(1),
                initiator_depth: resources.min(1),
                private_data: &[],
            });
            match res {
                // The peer's REJ came first: its callback frees the end.
                Err(_) if cm.state() == cm::State::Idle => Err(errno::enotconn()),
                res => Ok(res),
            }
        })
    }

    /// `disconnect()` of this endpoint on `id` (its own id, or `None` once
    /// freed): see [`Core::disconnect`].
    fn disconnect_on(&self, id: Option<&CmIdRef>, data: &[u8]) -> Result {
        // Held while deciding and sending: see `dreq_received`.
        let mut st = self.st.lock();
        // A second call is `EALREADY` whenever it comes, also once the id
        // has left timewait and been freed.
        if st.disconnecting {
            return Err(errno::ealready());
        }
        let cm = id.ok_or_else(errno::enotconn)?;
        let qp = st.verbs.as_ref().map(|v| v.qp());
        let t_ns = Ktime::ktime_get().to_ns();
        // Refused (the outer `?`): nothing was done, nothing changes.
        let (msg, res) = disconnect::disconnect(cm, qp, data)?;
        st.disconnecting = true;
        if msg == Message::Dreq && res.is_ok() {
            st.record_at(&self.core, t_ns, EventKind::DreqSent, 0, data);
        }
        self.core.count(msg, res.is_ok());
        res
    }
}

/// Counted in [`LIVE_ENDPOINTS`] while it exists: one per endpoint.
struct LiveToken;

impl LiveToken {
    fn new() -> Self {
        LIVE_ENDPOINTS.fetch_add(1, Ordering::Relaxed);
        Self
    }
}

impl Drop for LiveToken {
    fn drop(&mut self) {
        LIVE_ENDPOINTS.fetch_sub(1, Ordering::Relaxed);
    }
}

#[vtable]
impl Handler for Arc<Endpoint> {
    fn req_received(&self, req: Request<'_, Self>) -> Result {
        // Timed: what a REQ costs the CM's workqueue, which runs one
        // callback at a time per CPU (`stats`: `req_callback_us_*`).
        let t0 = Ktime::ktime_get().to_ns();
        let res = self.take_req(req);
        self.core.req_times.add(Ktime::ktime_get().to_ns() - t0);
        res
    }

    fn rep_received(&self, id: &CmIdRef, _remote_qpn: u32) {
        match self.st.lock().behaviour.test.on_rep {
            OnRep::Accept => {}
            OnRep::Ignore => return,
            OnRep::Reject => {
                let _ = id.send_rej(b"on_rep=reject");
                return;
            }
        }
        let res = self
            .move_qp(id, bindings::ib_qp_state_IB_QPS_RTR)
            .and_then(|()| self.move_qp(id, bindings::ib_qp_state_IB_QPS_RTS))
            .and_then(|()| id.send_rtu(&[]));
        match res {
            Ok(()) => {
                {
                    let mut guard = self.st.lock();
                    guard.record(&self.core, EventKind::Established, 0, &[]);
                    // rping's client: the first ping.
                    let st = &mut *guard;
                    if let (Some(r), Some(v)) = (st.rping.as_mut(), st.verbs.as_mut()) {
                        st.wr.posted += u64::from(r.start(v));
                    }
                }
                self.core.established.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                self.record(EventKind::ConnectError, e.to_errno(), &[]);
                let _ = id.send_rej(&[]);
            }
        }
    }

    fn established(&self, id: &CmIdRef) {
        let status = match self.move_qp(id, bindings::ib_qp_state_IB_QPS_RTS) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        };
        let mut st = self.st.lock();
        st.record(&self.core, EventKind::Established, status, &[]);
        // The handshake is over: its place on the listener is free.
        let handshake = st.handshake.take();
        drop(st);
        drop(handshake);
        self.core.established.fetch_add(1, Ordering::Relaxed);
    }

    fn rej_received(&self, _id: &CmIdRef, reason: u32, private_data: &[u8]) {
        self.record(EventKind::RejReceived, reason as i32, private_data);
        if self.role == Role::Passive {
            // Rejected after our REP: the CM has forgotten the peer (the id
            // is idle) and a retried REQ would make a new passive end. Free
            // the id and QP now, keep the record.
            self.free_id();
        }
    }

    fn dreq_received(&self, id: &CmIdRef, private_data: &[u8]) {
        let action = self.st.lock().behaviour.test.on_dreq;
        if let OnDreq::Sleep(ms) = action {
            // Before anything, so that the DREP is late too.
            delay::msleep(ms);
        }
        // Under the lock `disconnect` holds while it decides and sends: a
        // DREQ crossing ours is answered exactly once.
        let mut st = self.st.lock();
        st.record(&self.core, EventKind::DreqReceived, 0, private_data);
        st.record_disconnected(&self.core, 0);
        let answer = if st.disconnecting {
            Some(KVec::new())
        } else {
            match &st.behaviour.auto_drep {
                Some(d) => copy(d).ok(),
                None => None,
            }
        };
        if let Some(data) = answer {
            let res = id.send_drep(&data);
            self.core.count(Message::Drep, res.is_ok());
            let status = res.err().map_or(0, |e| e.to_errno());
            st.record(&self.core, EventKind::DrepSent, status, &data);
        }
        // Without our lock: `disconnect` takes the table's and ours.
        drop(st);
        let res = match action {
            OnDreq::Nothing => return,
            OnDreq::Sleep(_) => Ok(()),
            OnDreq::Dreq => id.send_dreq(b"from-callback"),
            // Our own connection, on the id of this callback.
            OnDreq::Disconnect => self.disconnect_on(Some(id), &[]),
            OnDreq::DisconnectOther(num) => self.core.disconnect(num, &[]),
        };
        let status = res.err().map_or(0, |e| e.to_errno());
        self.record(EventKind::OnDreq, status, &[]);
    }

    fn drep_received(&self, _id: &CmIdRef, private_data: &[u8]) {
        let mut st = self.st.lock();
        st.record(&self.core, EventKind::DrepReceived, 0, private_data);
        st.record_disconnected(&self.core, 0);
        self.core.drep_received.fetch_add(1, Ordering::Relaxed);
    }

    fn dreq_error(&self, _id: &CmIdRef, send_status: u32) {
        let mut st = self.st.lock();
        st.record(&self.core, EventKind::DreqError, send_status as i32, &[]);
        st.record_disconnected(&self.core, errno::etimedout().to_errno());
    }

    fn connect_error(&self, _id: &CmIdRef, send_status: u32) {
        self.record(EventKind::ConnectError, send_status as i32, &[]);
        if self.role == Role::Passive {
            // Our REP timed out (REP_ERROR): as for a REJ.
            self.free_id();
        }
    }

    fn timewait_exit(&self, _id: &CmIdRef) {
        self.record(EventKind::TimewaitExit, 0, &[]);
        let test = self.st.lock().behaviour.test;
        let (ms, after) = (test.timewait_sleep, test.timewait_after);
        if ms > 0 && !after {
            delay::msleep(ms);
        }
        self.free_id();
        if ms > 0 && after {
            delay::msleep(ms);
        }
    }
}

fn copy(data: &[u8]) -> Result<KVec<u8>> {
    let mut v = KVec::new();
    v.extend_from_slice(data, GFP_KERNEL)?;
    Ok(v)
}

/// An entry of the connection table: the endpoint, and its id until freed.
struct Conn {
    ep: Arc<Endpoint>,
    cm: Option<CmId<Arc<Endpoint>>>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.ep.gone.store(true, Ordering::Relaxed);
    }
}

/// Drives an rping endpoint: takes its completions as they come (its CQ is
/// polled directly) until its protocol is over, its QP freed or its entry
/// gone. Runs on the reaper, which device removal and unload flush.
fn rping_poller(ep: Arc<Endpoint>) {
    loop {
        if ep.gone.load(Ordering::Relaxed) {
            return;
        }
        let action = {
            let mut st = ep.st.lock();
            if st.verbs.is_none() || st.rping.as_ref().map_or(true, |r| r.done()) {
                return;
            }
            st.drain_cq_for_rping()
        };
        match action {
            Ok(rping::Action::Nothing) => delay::msleep(1),
            // The client's last ping: `disconnect()` of its own entry.
            Ok(rping::Action::Disconnect) => {
                let _ = ep
                    .core
                    .with_own_cm(ep.num, &ep, |cm| ep.disconnect_on(Some(cm), &[]));
                return;
            }
            Err(_) => return,
        }
    }
}

struct CoreInner {
    devices: Devices,
    conns: RBTree<u32, Conn>,
    /// Connections `close` has taken out of the table and is still
    /// destroying (their id, then their QP): device removal waits for them.
    closing: usize,
}

/// The module's state: devices, connections, counters.
#[pin_data]
pub(crate) struct Core {
    #[pin]
    inner: Mutex<CoreInner>,
    /// Signalled when `closing` drops to zero.
    #[pin]
    closed: CondVar,
    /// Destroys the ids dropped in their own callbacks; flushed on device
    /// removal.
    reaper: ReaperRef,
    next_foreign: AtomicUsize,
    lost_events: AtomicUsize,
    pub(crate) dreq_sent: AtomicU64,
    pub(crate) dreq_failed: AtomicU64,
    pub(crate) drep_sent: AtomicU64,
    pub(crate) drep_failed: AtomicU64,
    /// Endpoints that reached ESTABLISHED, and DREPs received: cheap to
    /// read (`stats`) for whoever waits on many connections.
    established: AtomicU64,
    drep_received: AtomicU64,
    /// REQ callbacks of the listeners and their passive ends' REPs.
    req_times: Durations,
    rep_times: Durations,
}

/// How many of something, their total and longest time in ns (`stats`).
struct Durations {
    n: AtomicU64,
    ns: AtomicU64,
    ns_max: AtomicU64,
}

impl Durations {
    const fn new() -> Self {
        Self {
            n: AtomicU64::new(0),
            ns: AtomicU64::new(0),
            ns_max: AtomicU64::new(0),
        }
    }

    fn add(&self, ns: i64) {
        let ns = u64::try_from(ns).unwrap_or(0);
        self.n.fetch_add(1, Ordering::Relaxed);
        self.ns.fetch_add(ns, Ordering::Relaxed);
        self.ns_max.fetch_max(ns, Ordering::Relaxed);
    }

    /// `NAME N`, `PREFIX_us_avg US`, `PREFIX_us_max US`.
    fn show(&self, out: &mut impl Write, name: &str, prefix: &str) -> core::fmt::Result {
        let n = self.n.load(Ordering::Relaxed);
        writeln!(out, "{} {}", name, n)?;
        let avg = self.ns.load(Ordering::Relaxed) / n.max(1) / 1000;
        writeln!(out, "{}_us_avg {}", prefix, avg)?;
        let max = self.ns_max.load(Ordering::Relaxed) / 1000;
        writeln!(out, "{}_us_max {}", prefix, max)
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
}

impl Core {
    pub(crate) fn new(reaper: ReaperRef) -> impl PinInit<Self> {
        pin_init!(Self {
            inner <- new_mutex!(CoreInner {
                devices: Devices::new(),
                conns: RBTree::new(),
                closing: 0,
            }),
            closed <- new_condvar!("rcd_core_closed"),
            reaper,
            next_foreign: AtomicUsize::new(0),
            lost_events: AtomicUsize::new(0),
            dreq_sent: AtomicU64::new(0),
            dreq_failed: AtomicU64::new(0),
            drep_sent: AtomicU64::new(0),
            drep_failed: AtomicU64::new(0),
            established: AtomicU64::new(0),
            drep_received: AtomicU64::new(0),
            req_times: Durations::new(),
            rep_times: Durations::new(),
        })
    }

    fn insert(&self, num: u32, ep: Arc<Endpoint>, cm: CmId<Arc<Endpoint>>) -> Result {
        let mut inner = self.inner.lock();
        if !inner.devices.contains(ep.dev_index) {
            // The device went away while the connection was being set up.
            drop(inner);
            drop(cm);
            return Err(ENODEV);
        }
        if inner.conns.get(&num).is_some() {
            drop(inner);
            drop(cm);
            return Err(EEXIST);
        }
        let conn = Conn { ep, cm: Some(cm) };
        inner.conns.try_create_and_insert(num, conn, GFP_KERNEL)?;
        Ok(())
    }

    /// Destroys the id of `ep`'s own entry (not of whatever else may have
    /// its number by now), from one of the id's callbacks: queued on the
    /// reaper under the table's lock, so that device removal and unload,
    /// which take ids out under that lock and then flush the reaper, either
    /// find the id or wait for its destroy.
    fn destroy_own_cm(&self, ep: &Endpoint) {
        let mut inner = self.inner.lock();
        if let Some(conn) = inner.conns.get_mut(&ep.num) {
            if core::ptr::eq(&*conn.ep, ep) {
                if let Some(cm) = conn.cm.take() {
                    cm.destroy_deferred();
                }
            }
        }
    }

    /// Takes `ep`'s own entry out of the table (none if its number now
    /// belongs to another endpoint).
    fn remove_own(&self, ep: &Endpoint) -> Option<Conn> {
        let mut inner = self.inner.lock();
        match inner.conns.get(&ep.num) {
            Some(conn) if core::ptr::eq(&*conn.ep, ep) => inner.conns.remove(&ep.num),
            _ => None,
        }
    }

    /// `listen NUM DEV SERVICE_ID`: a listener for REQs to `service_id`.
    pub(crate) fn listen(
        self: &Arc<Self>,
        num: u32,
        device: &CStr,
        service_id: u64,
        cma: bool,
        behaviour: Behaviour,
    ) -> Result {
        let dev = Device::get_by_name(device)?;
        let ep = Endpoint::new(self, num, Role::Listener, &dev, 0, cma, behaviour)?;
        let cm = CmId::new(&dev, &self.reaper, ep.clone())?;
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
        // The netdev the source address leaves from, with the device held
        // only for that: the resolution may wait for ARP (bounded), and a
        // device held meanwhile would hold up its unregistration as long.
        let (dev_index, ifindex) = {
            let dev = Device::get_by_name(a.device)?;
            (dev.index(), path::source_netdev(&dev, a.port, a.src)?)
        };
        // The next hop's MAC from the kernel's neighbour resolution.
        let hop = path::next_hop(ifindex, a.src, a.dst, a.resolve_ms)?;
        // A group MAC: the destination was a broadcast address after all
        // (a subnet's, which only the route knows).
        if hop.dmac[0] & 1 != 0 {
            return Err(EINVAL);
        }
        // The same device again: `ENODEV` if it went away meanwhile (or its
        // name is another device's now).
        let dev = Device::get_by_name(a.device)?;
        if dev.index() != dev_index {
            return Err(ENODEV);
        }
        let route = path::route(&dev, a.port, a.src, a.dst, &hop, a.timing)?;
        let pre_recv = a.behaviour.pre_recv;
        let rping_role = a.behaviour.rping;
        let ep = Endpoint::new(self, a.num, Role::Active, &dev, 0, false, a.behaviour)?;
        let cm = CmId::new(&dev, &self.reaper, ep.clone())?;
        let verbs = RcQp::new(&dev, qp_size())?;
        let qp_num = verbs.qp_num();
        let mut attr = bindings::ib_qp_attr {
            qp_state: bindings::ib_qp_state_IB_QPS_INIT,
            pkey_index: 0,
            port_num: a.port,
            // The peer may READ and WRITE the MRs this end registers (the
            // passive end gets the same from the CM).
            qp_access_flags: (bindings::ib_access_flags_IB_ACCESS_REMOTE_READ
                | bindings::ib_access_flags_IB_ACCESS_REMOTE_WRITE)
                as c_int,
            ..Default::default()
        };
        verbs.modify(
            &mut attr,
            (bindings::ib_qp_attr_mask_IB_QP_STATE
                | bindings::ib_qp_attr_mask_IB_QP_PKEY_INDEX
                | bindings::ib_qp_attr_mask_IB_QP_PORT
                | bindings::ib_qp_attr_mask_IB_QP_ACCESS_FLAGS) as i32,
        )?;
        {
            let mut st = ep.st.lock();
            st.verbs = Some(verbs);
            if let Some((recv, size)) = pre_recv {
                // Before the REQ: the peer may send as soon as it has the RTU.
                st.post(&Post {
                    recv,
                    send: 0,
                    size,
                    data: None,
                })?;
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
            cm.send_req(&Req {
                route: &route,
                service_id: a.service_id,
                qp_num,
                starting_psn: qp_num,
                timing: a.timing,
                private_data: &pd,
            })
        });
        if res.is_err() {
            drop(self.remove_own(&ep));
        } else if rping_role.is_some() {
            // If this fails the protocol only runs on `poll`.
            let _ = self.reaper.spawn(move || rping_poller(ep));
        }
        res
    }

    /// Runs `f` on the id of `ep`, which is connection `num`: `ENOENT` if
    /// `num` is now another endpoint or gone, `ENOTCONN` if the id was freed.
    fn with_own_cm<R>(
        &self,
        num: u32,
        ep: &Arc<Endpoint>,
        f: impl FnOnce(&CmId<Arc<Endpoint>>) -> Result<R>,
    ) -> Result<R> {
        self.with_conn(num, |cm, e| {
            if !core::ptr::eq(e, &**ep) {
                return Err(ENOENT);
            }
            f(cm)
        })
    }

    /// Runs `f` on the id and endpoint of connection `num` (the table's
    /// lock held): `ENOENT` if there is no such connection, `ENOTCONN` if its
    /// id was already freed.
    fn with_conn<R>(
        &self,
        num: u32,
        f: impl FnOnce(&CmId<Arc<Endpoint>>, &Endpoint) -> Result<R>,
    ) -> Result<R> {
        let inner = self.inner.lock();
        let conn = inner.conns.get(&num).ok_or(ENOENT)?;
        f(conn.cm.as_ref().ok_or_else(errno::enotconn)?, &conn.ep)
    }

    /// `dreq NUM [DATA]`, `drep NUM [DATA]`: sends `msg` with `data` as
    /// private data.
    pub(crate) fn send(&self, num: u32, msg: Message, data: &[u8]) -> Result {
        let res = self.with_conn(num, |cm, ep| {
            // Under the endpoint's lock, as the callbacks' own sends.
            let mut st = ep.st.lock();
            // Taken before the send: the start of the DREQ/DREP round trip.
            let t_ns = Ktime::ktime_get().to_ns();
            msg.send(cm, data)?;
            st.record_at(self, t_ns, EventKind::sent(msg), 0, data);
            Ok(())
        });
        self.count(msg, res.is_ok());
        res
    }

    /// Counts a DREQ or DREP sent or failed.
    fn count(&self, msg: Message, sent: bool) {
        let counter = match (msg, sent) {
            (Message::Dreq, true) => &self.dreq_sent,
            (Message::Drep, true) => &self.drep_sent,
            (Message::Dreq, false) => &self.dreq_failed,
            (Message::Drep, false) => &self.drep_failed,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// `disconnect NUM [DATA]`: rdma_disconnect(3), reporting every failure
    /// (see [`disconnect::disconnect`]); `EALREADY` for a second call. The
    /// DISCONNECTED event follows, once, on the DREP, the peer's DREQ or the
    /// DREQ's timeout (`-ETIMEDOUT`).
    pub(crate) fn disconnect(&self, num: u32, data: &[u8]) -> Result {
        let inner = self.inner.lock();
        let conn = inner.conns.get(&num).ok_or(ENOENT)?;
        // The table's lock keeps the id alive meanwhile.
        conn.ep.disconnect_on(conn.cm.as_deref(), data)
    }

    /// `post NUM RECV [SEND] [size=N] [data=DATA]`: posts work requests,
    /// with their buffers, on the connection's QP (see [`Post`]).
    pub(crate) fn post(&self, num: u32, p: &Post) -> Result {
        self.ep(num)?.st.lock().post(p)
    }

    /// `mr NUM reg DATA`: see [`EndpointState::reg_mr`].
    pub(crate) fn reg_mr(&self, num: u32, data: &[u8]) -> Result {
        self.ep(num)?.st.lock().reg_mr(data)
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

    /// Runs `f` on the raw id and QP of connection `num`, for the test-only
    /// `rcd_test_with_conn()`. The table's lock keeps the id, the
    /// endpoint's lock the QP: neither is freed until `f` returns (timewait
    /// exit frees the QP under the endpoint's lock and the id under the
    /// table's; close, device removal and unload take the entry out under
    /// the table's). `f` must neither post on the QP nor poll its CQ
    /// (`rcd_test.h`): `RcQp::poll_one` trusts every `wr_id` to be ours.
    pub(crate) fn with_raw<R>(
        &self,
        num: u32,
        f: impl FnOnce(*mut bindings::ib_cm_id, *mut bindings::ib_qp) -> R,
    ) -> Result<R> {
        let inner = self.inner.lock();
        let conn = inner.conns.get(&num).ok_or(ENOENT)?;
        let cm = conn.cm.as_ref().ok_or_else(errno::enotconn)?;
        let st = conn.ep.st.lock();
        let qp = st.verbs.as_ref().ok_or(ENODEV)?.qp().as_raw();
        Ok(f(cm.as_raw(), qp))
    }

    fn ep(&self, num: u32) -> Result<Arc<Endpoint>> {
        let inner = self.inner.lock();
        Ok(inner.conns.get(&num).ok_or(ENOENT)?.ep.clone())
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
        drop(conn);
        let mut inner = self.inner.lock();
        inner.closing -= 1;
        if inner.closing == 0 {
            self.closed.notify_all();
        }
        Ok(())
    }

    /// Waits until no `close` is destroying a connection it took out of
    /// the table. A close waits only for its id's callbacks, never for
    /// device removal, so this ends.
    fn wait_for_closes(&self) {
        let mut inner = self.inner.lock();
        while inner.closing != 0 {
            self.closed.wait(&mut inner);
        }
    }

    /// Prints `devices`.
    pub(crate) fn show_devices(&self, out: &mut impl Write) -> core::fmt::Result {
        self.inner.lock().devices.show(out)
    }

    /// Prints `conns`: one line per endpoint.
    pub(crate) fn show_conns(&self, out: &mut impl Write) -> core::fmt::Result {
        let inner = self.inner.lock();
        for (num, c) in inner.conns.iter() {
            let ep = &c.ep;
            write!(
                out,
                "{} role={} dev={}",
                num,
                ep.role.name(),
                ep.dev_name.to_str().unwrap_or("?")
            )?;
            match &c.cm {
                Some(cm) => write!(
                    out,
                    " state={} local_id={:#x} remote_id={:#x}",
                    cm.state().name(),
                    cm.local_id(),
                    cm.remote_id()
                )?,
                None => write!(out, " state=FREED")?,
            }
            let st = ep.st.lock();
            if let Some(v) = &st.verbs {
                write!(out, " qpn={}", v.qp_num())?;
                for m in v.mrs() {
                    let state = match m.state {
                        MrState::Registering => "registering",
                        MrState::Valid => "valid",
                        MrState::Invalidating => "invalidating",
                        MrState::Failed => "failed",
                    };
                    write!(
                        out,
                        " mr{}={}:{:#x}:{:#x}:{}",
                        m.index, state, m.addr, m.rkey, m.len
                    )?;
                }
            }
            if st.wr.posted > 0 {
                st.wr.show(out)?;
            }
            if let Some(r) = &st.rping {
                let (role, step) = r.describe();
                write!(
                    out,
                    " rping={}:{}:{}:{}:{}",
                    role, r.pings, r.validated, step, r.error
                )?;
            }
            if ep.role == Role::Passive {
                write!(out, " listener={}", ep.listener)?;
            }
            writeln!(out, " events={}", st.events.len())?;
        }
        Ok(())
    }

    /// Prints `events`: every event of every endpoint, in order per endpoint.
    pub(crate) fn show_events(&self, out: &mut impl Write) -> core::fmt::Result {
        let inner = self.inner.lock();
        for (num, c) in inner.conns.iter() {
            let st = c.ep.st.lock();
            for ev in st.events.iter() {
                write!(
                    out,
                    "{} {} status={} len={} t={}",
                    num,
                    ev.kind.name(),
                    ev.status,
                    ev.data.len(),
                    ev.t_ns
                )?;
                if !ev.data.is_empty() {
                    write!(out, " data=")?;
                    for b in ev.data.iter() {
                        write!(out, "{:02x}", b)?;
                    }
                }
                writeln!(out)?;
            }
        }
        Ok(())
    }

    /// Prints `stats`.
    pub(crate) fn show_stats(&self, out: &mut impl Write) -> core::fmt::Result {
        let inner = self.inner.lock();
        inner.devices.show_stats(out)?;
        let count = inner.conns.iter().count();
        writeln!(out, "conns {}", count)?;
        // What the module itself holds per endpoint (the verbs objects and
        // the CM's own id are the RDMA core's and the CM's).
        let mut bytes = 0;
        for c in inner.conns.values() {
            let st = c.ep.st.lock();
            bytes += core::mem::size_of::<Endpoint>()
                + core::mem::size_of::<Conn>()
                + st.events.capacity() * core::mem::size_of::<Event>()
                + st.events.iter().map(|e| e.data.capacity()).sum::<usize>()
                + st.verbs
                    .as_ref()
                    .map_or(0, |_| core::mem::size_of::<RcQp>());
            if c.cm.is_some() {
                bytes += CmId::<Arc<Endpoint>>::ALLOC_BYTES;
            }
        }
        writeln!(out, "endpoint_bytes_avg {}", bytes / count.max(1))?;
        // The part that does not depend on the event record.
        writeln!(
            out,
            "endpoint_fixed_bytes {}",
            core::mem::size_of::<Endpoint>()
                + core::mem::size_of::<Conn>()
                + core::mem::size_of::<RcQp>()
                + CmId::<Arc<Endpoint>>::ALLOC_BYTES
        )?;
        writeln!(out, "event_bytes {}", core::mem::size_of::<Event>())?;
        drop(inner);
        writeln!(out, "cm_ids_live {}", cm::live_ids())?;
        writeln!(out, "wr_bufs_mapped {}", VERBS_COUNTERS.mapped_bufs())?;
        writeln!(out, "resolutions_live {}", path::live_resolutions())?;
        writeln!(out, "mrs_live {}", VERBS_COUNTERS.live_mrs())?;
        writeln!(
            out,
            "endpoints_live {}",
            LIVE_ENDPOINTS.load(Ordering::Relaxed)
        )?;
        writeln!(
            out,
            "established {}",
            self.established.load(Ordering::Relaxed)
        )?;
        writeln!(
            out,
            "drep_received {}",
            self.drep_received.load(Ordering::Relaxed)
        )?;
        writeln!(out, "dreq_sent {}", self.dreq_sent.load(Ordering::Relaxed))?;
        writeln!(
            out,
            "dreq_failed {}",
            self.dreq_failed.load(Ordering::Relaxed)
        )?;
        writeln!(out, "drep_sent {}", self.drep_sent.load(Ordering::Relaxed))?;
        writeln!(
            out,
            "drep_failed {}",
            self.drep_failed.load(Ordering::Relaxed)
        )?;
        writeln!(
            out,
            "events_lost {}",
            self.lost_events.load(Ordering::Relaxed)
        )?;
        self.req_times.show(out, "req_callbacks", "req_callback")?;
        // From the REQ callback to the REP: the job queue's latency, which
        // the MRA's service timeout must cover (`MRA_SERVICE_TIMEOUT`).
        self.rep_times.show(out, "reps_sent", "rep_latency")
    }

    /// Frees the id and QP of every endpoint on device `index`. The
    /// endpoints keep their records (`state=FREED`): a connection that was
    /// not over yet gets its DISCONNECTED event, with `-ENODEV`.
    fn remove_all_on(&self, index: u32) {
        self.take_each(
            |inner| {
                inner
                    .conns
                    .iter_mut()
                    .find(|(_, c)| c.ep.dev_index == index && c.cm.is_some())
                    .map(|(_, c)| (c.ep.clone(), c.cm.take()))
            },
            |(ep, cm)| {
                // Waits for the id's callbacks in progress: none comes after.
                drop(cm);
                let verbs = {
                    let mut st = ep.st.lock();
                    if ep.role != Role::Listener {
                        st.record_disconnected(self, ENODEV.to_errno());
                    }
                    st.take_verbs()
                };
                drop(verbs);
            },
        );
    }

    /// Takes entries out of the table one at a time with `take`, under the
    /// table's lock, and hands each to `dispose` with the lock released:
    /// destroying an id waits for its callbacks, which may take the lock.
    fn take_each<R>(
        &self,
        mut take: impl FnMut(&mut CoreInner) -> Option<R>,
        mut dispose: impl FnMut(R),
    ) {
        loop {
            // The guard is dropped at the end of this statement.
            let taken = take(&mut self.inner.lock());
            let Some(item) = taken else {
                break;
            };
            dispose(item);
        }
    }
}

/// Owns the module's [`Core`] for as long as the module is loaded.
///
/// Endpoints hold a reference on the core (their callbacks need it) and the
/// core's table holds the endpoints, records of freed ones included: the
/// table is emptied when the module goes, or neither would ever be freed.
pub(crate) struct Owner(Arc<Core>);

impl Owner {
    pub(crate) fn new(core: Arc<Core>) -> Self {
        Self(core)
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        self.0.take_each(
            |inner| {
                let num = *inner.conns.keys().next()?;
                inner.conns.remove(&num)
            },
            drop,
        );
        // Destroys queued by callbacks: run now, while the core is whole.
        self.0.reaper.flush();
    }
}

impl Client for Core {
    type DeviceData = Arc<DeviceEntry>;

    fn add(&self, device: &Device) -> Result<Arc<DeviceEntry>> {
        let entry = DeviceEntry::new(device)?;
        self.inner.lock().devices.insert(device, entry.clone())?;
        pr_info!(
            "device {} added ({} IB CM port(s))\n",
            device.name(),
            entry.ports.len()
        );
        Ok(entry)
    }

    fn remove(&self, device: &Device, _entry: Arc<DeviceEntry>) {
        // Not usable for new connections from here on.
        self.inner.lock().devices.remove(device);
        self.remove_all_on(device.index());
        // A connection `close` took out of the table before we looked may
        // still have its id and QP on this device.
        self.wait_for_closes();
        // The ids their own callbacks dropped before `remove_all_on` could
        // take them (queued under the table's lock): destroyed before the
        // CM's own `remove` (which runs after ours) tears the device down.
        self.reaper.flush();
        pr_info!("device {} removed\n", device.name());
    }
}
