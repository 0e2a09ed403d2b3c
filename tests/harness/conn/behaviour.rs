// SPDX-License-Identifier: GPL-2.0

//! How an endpoint behaves ([`Behaviour`]), set by the `listen` and
//! `connect` options, and its defaults: the bounds on what a peer can make
//! a listener hold (handshakes, passive ends, records kept, how long an
//! unanswered DREQ and a finished passive end are held). Also the
//! test-only behaviours' settings ([`TestHooks`]; what each does is in
//! `test_hooks`).

use crate::rping;
use kernel::prelude::*;

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

/// How long a passive end waits at most for the RTU once its REP went out,
/// unless `handshake_max=MS` on its listener says otherwise: then it is
/// freed (the CM sends a REJ). Its peer sets how long the CM would wait
/// (its REQ's CM response timeout and retries: up to 16 times 2^23 ms,
/// about 37 h). 120 s: beyond any REP timeout of the suite's peers that is
/// meant to run out (64 s at most).
pub(crate) const HANDSHAKE_MAX_MS: u32 = 120_000;

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

/// Passive ends a listener has at most at once with their id (and QP),
/// unless `max_ends=N` says otherwise: the REQs beyond are rejected. A
/// handshake, a connection and its disconnect each hold an id and a QP
/// for as long as its peer makes them last (the handshake's backlog and
/// the deadline after the disconnect bound each kind; this bounds them
/// all). 16,384: twice the backlog, room for the bench's 5,000.
pub(crate) const DEFAULT_MAX_ENDS: u32 = 16384;

/// How many records of freed passive ends a listener keeps, unless
/// `keep=N` says otherwise: beyond that, the lowest-numbered goes (see
/// `Core::destroy_own_cm`).
pub(crate) const DEFAULT_KEEP: u32 = 1024;

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
    /// A listener's bound on its passive ends with an id (`max_ends=N`):
    /// the REQs beyond are rejected.
    pub(crate) max_ends: u32,
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
    /// A passive end is freed this long (ms) after its REP went out if no
    /// RTU came (see [`HANDSHAKE_MAX_MS`]).
    pub(crate) handshake_max_ms: u32,
}

impl Default for Behaviour {
    fn default() -> Self {
        Self {
            auto_drep: None,
            test: None,
            backlog: DEFAULT_BACKLOG,
            max_ends: DEFAULT_MAX_ENDS,
            pre_recv: None,
            rping: None,
            drep_after_ms: DREQ_ANSWER_MS,
            keep: DEFAULT_KEEP,
            free_after_ms: FREE_AFTER_MS,
            handshake_max_ms: HANDSHAKE_MAX_MS,
        }
    }
}

impl Behaviour {
    pub(super) fn try_clone(&self) -> Result<Self> {
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
            max_ends: self.max_ends,
            pre_recv: self.pre_recv,
            rping: self.rping,
            drep_after_ms: self.drep_after_ms,
            keep: self.keep,
            free_after_ms: self.free_after_ms,
            handshake_max_ms: self.handshake_max_ms,
        })
    }
}

/// `data` (private data) in a vector of its own.
pub(super) fn copy(data: &[u8]) -> Result<KVec<u8>> {
    let mut v = KVec::new();
    v.extend_from_slice(data, GFP_KERNEL)?;
    Ok(v)
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
    /// `close` of another connection: its `CmId` dropped in this callback.
    CloseOther(u32),
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
    /// The same sleep, never cut short: the job then moves the QP with the
    /// attributes it took from the id before, whatever became of the id
    /// (`QpAttr` holds its GID entry).
    JobSleep(u32),
    /// The REQ callback fails as if queueing the job had failed with
    /// `ENOMEM` (after the accept and the table's insert).
    FailJob,
    /// The REQ callback sends a REP itself (a made-up QP number: the peer
    /// is to let it time out), then fails as `FailJob` does, which drops
    /// the accepted id in its own REQ callback after a REP went out.
    RepThenFail,
}

/// The test-only behaviours, together: with these `ctl` options the tests
/// hold open the windows of an id's lifecycle and play careless consumers
/// and broken peers. Nothing else sets them, and with their defaults
/// (`TestHooks::NONE`) the module behaves as a consumer would.
#[derive(Clone, Copy, PartialEq, Eq)]
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
    /// Milliseconds the `*_ERROR` callbacks sleep before they read their
    /// id's state (`on_error=sleep:MS`): a handler that uses its id late,
    /// while the id may be destroyed by another path.
    pub(crate) error_sleep: u32,
    /// The count an rping endpoint starts from (`rping_from=N`), instead
    /// of 0: a peer's 2^32 pings reached in a few.
    pub(crate) rping_from: u32,
}

impl TestHooks {
    pub(crate) const NONE: Self = Self {
        on_dreq: OnDreq::Nothing,
        on_req: OnReq::Nothing,
        timewait_sleep: 0,
        timewait_after: false,
        on_rep: OnRep::Accept,
        error_sleep: 0,
        rping_from: 0,
    };

    /// What an endpoint carries for these hooks: nothing for
    /// [`TestHooks::NONE`].
    pub(crate) fn boxed(self) -> Result<Option<KBox<Self>>> {
        Ok(if self == Self::NONE {
            None
        } else {
            Some(KBox::new(self, GFP_KERNEL)?)
        })
    }
}
