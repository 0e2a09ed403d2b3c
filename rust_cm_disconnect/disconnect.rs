// SPDX-License-Identifier: GPL-2.0

//! rdma_disconnect(3) on an IB CM id, reporting every failure.
//!
//! rdma_cm's `rdma_disconnect` moves the QP to the error state, then sends a
//! DREQ, falling back to a DREP, and returns only the QP's result: a second
//! call, or one on a connection never established, returns 0. This one
//! says what happened.

use crate::{
    cm::{CmIdRef, State, DREP_PRIVATE_DATA_SIZE, DREQ_PRIVATE_DATA_SIZE},
    errno,
    verbs::QpRef,
};
use kernel::{error::code::*, prelude::*};

/// The message a disconnect sends.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Message {
    Dreq,
    Drep,
}

/// Disconnects `id`: `qp` (if any) to the error state, so that its posted
/// work requests flush to its CQ, then a DREQ if the connection is
/// established, or a DREP if the peer's DREQ came first (also when it
/// crosses ours between the two). Both steps are tried.
///
/// Refused with nothing done (the outer error): `EINVAL` if `data` does not
/// fit the message, `EALREADY` if the connection is already disconnecting
/// (`DREQ_SENT`, `TIMEWAIT`), `ENOTCONN` if it is not connected. Otherwise
/// the message sent (or tried) and the first failure of the two steps.
pub(crate) fn disconnect(
    id: &CmIdRef,
    qp: Option<&QpRef>,
    data: &[u8],
) -> Result<(Message, Result)> {
    let msg = match id.state() {
        State::Established => Message::Dreq,
        State::DreqRcvd => Message::Drep,
        State::DreqSent | State::Timewait => return Err(errno::ealready()),
        _ => return Err(errno::enotconn()),
    };
    let max = match msg {
        Message::Dreq => DREQ_PRIVATE_DATA_SIZE,
        Message::Drep => DREP_PRIVATE_DATA_SIZE,
    };
    if data.len() > max {
        return Err(EINVAL);
    }
    let flushed = qp.map_or(Ok(()), |qp| qp.to_error());
    let (msg, sent) = match msg {
        Message::Drep => (msg, id.send_drep(data)),
        Message::Dreq => match id.send_dreq(data) {
            // The peer's DREQ arrived since we looked: answer it instead.
            Err(_) if id.state() == State::DreqRcvd => (Message::Drep, id.send_drep(data)),
            res => (msg, res),
        },
    };
    Ok((msg, flushed.and(sent)))
}
