// SPDX-License-Identifier: GPL-2.0

//! rdma_disconnect(3) on an IB CM id, reporting every failure.
//!
//! rdma_cm's `rdma_disconnect` moves the QP to the error state, then sends a
//! DREQ, falling back to a DREP, and returns only the QP's result: a second
//! call, or one on a connection never established, returns 0. This one
//! says what happened.

use crate::{
    cm::{CmIdRef, State, DREP_PRIVATE_DATA_SIZE, DREQ_PRIVATE_DATA_SIZE},
    verbs::QpRef,
};
use kernel::{error::code::*, prelude::*};

/// The message a disconnect sends.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Message {
    Dreq,
    Drep,
}

impl Message {
    /// Bytes of private data the message carries.
    pub(crate) fn max_private_data(self) -> usize {
        match self {
            Self::Dreq => DREQ_PRIVATE_DATA_SIZE,
            Self::Drep => DREP_PRIVATE_DATA_SIZE,
        }
    }

    /// Sends the message on `id` (`EINVAL` if `data` does not fit it).
    pub(crate) fn send(self, id: &CmIdRef, data: &[u8]) -> Result {
        match self {
            Self::Dreq => id.send_dreq(data),
            Self::Drep => id.send_drep(data),
        }
    }
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
        State::DreqSent | State::Timewait => return Err(EALREADY),
        _ => return Err(ENOTCONN),
    };
    if data.len() > msg.max_private_data() {
        return Err(EINVAL);
    }
    let flushed = qp.map_or(Ok(()), |qp| qp.to_error());
    let (msg, sent) = match msg.send(id, data) {
        // The peer's DREQ arrived since we looked: answer it instead.
        Err(_) if msg == Message::Dreq && id.state() == State::DreqRcvd => {
            (Message::Drep, Message::Drep.send(id, data))
        }
        res => (msg, res),
    };
    Ok((msg, flushed.and(sent)))
}
