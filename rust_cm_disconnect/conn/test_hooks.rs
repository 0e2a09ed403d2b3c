// SPDX-License-Identifier: GPL-2.0

//! The test-only behaviours ([`TestHooks`]): the `ctl` options with which
//! the tests hold open the windows of an id's lifecycle and play careless
//! consumers and broken peers. Nothing else sets them; with their defaults
//! ([`TestHooks::NONE`]) the module behaves as a consumer would. Also here:
//! the C API's test-only access to a connection ([`Core::with_test_conn`]).

use super::table::Core;
use crate::{cm::CmIdRef, errno, verbs::QpRef};
use kernel::{error::code::*, prelude::*};

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

impl Core {
    /// Runs `f` on the id and QP of connection `num`, for the test-only
    /// `rcd_test_with_conn()` of the C API. The table's lock keeps the id,
    /// the endpoint's lock the QP: neither is freed until `f` returns
    /// (timewait exit frees the QP under the endpoint's lock and the id
    /// under the table's; close, device removal and unload take the entry
    /// out under the table's). `f` must neither post on the QP nor poll its
    /// CQ (`rcd_test.h`): `RcQp::poll_one` trusts every `wr_id` to be ours.
    pub(crate) fn with_test_conn<R>(
        &self,
        num: u32,
        f: impl FnOnce(&CmIdRef, &QpRef) -> R,
    ) -> Result<R> {
        let inner = self.inner.lock();
        let conn = inner.conns.get(&num).ok_or(ENOENT)?;
        let cm = conn.cm.as_ref().ok_or_else(errno::enotconn)?;
        let st = conn.ep.st.lock();
        let qp = st.verbs.as_ref().ok_or(ENODEV)?.qp();
        Ok(f(cm, qp))
    }
}
