// SPDX-License-Identifier: GPL-2.0

//! What the CM sends and receives: the private data of each message and
//! its size ([`Message`]), and the REQ and REP a connection sends ([`Req`],
//! [`Rep`]).

use crate::{
    bindings,
    ffi::c_void,
    prelude::*,
    rdma::path::{Route, Timing},
};

/// Bytes of private data a DREQ carries (`IB_CM_DREQ_PRIVATE_DATA_SIZE`).
pub const DREQ_PRIVATE_DATA_SIZE: usize = Message::Dreq.private_data_size();
/// Bytes of private data a DREP carries (`IB_CM_DREP_PRIVATE_DATA_SIZE`).
pub const DREP_PRIVATE_DATA_SIZE: usize = Message::Drep.private_data_size();

/// A CM message that carries private data, and the size of its field.
///
/// The CM takes private data as `(const void *, u8)`: a length over 255
/// would be truncated by the C caller's cast, and one over the field's size
/// is rejected by some messages and not others (6.12's `ib_send_cm_drep()`
/// leaks its copy then). Here every send checks the slice against its
/// message's field first ([`Message::check`]), and every field is shorter
/// than 256 bytes, so a length that fits the field also fits the `u8`.
///
/// # Examples
///
/// ```
/// use kernel::rdma::cm::{Message, DREQ_PRIVATE_DATA_SIZE};
///
/// assert_eq!(Message::Drep.private_data_size(), 224);
/// assert_eq!(Message::Dreq.check(&[7u8; DREQ_PRIVATE_DATA_SIZE]), Ok(220));
/// assert_eq!(Message::Dreq.check(&[7u8; 221]), Err(EINVAL));
/// // 300 would be 44 as a `u8`: never truncated, rejected.
/// assert_eq!(Message::Rej.check(&[0u8; 300]), Err(EINVAL));
/// assert_eq!(Message::Rtu.check(&[]), Ok(0));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Message {
    /// A connection request.
    Req,
    /// A connection reply.
    Rep,
    /// Ready to use: the active end's last message.
    Rtu,
    /// A rejection of a REQ or REP.
    Rej,
    /// A disconnection request.
    Dreq,
    /// A disconnection reply.
    Drep,
}

impl Message {
    /// Bytes of private data the message carries (`enum ib_cm_data_size`).
    pub const fn private_data_size(self) -> usize {
        (match self {
            Self::Req => bindings::ib_cm_data_size_IB_CM_REQ_PRIVATE_DATA_SIZE,
            Self::Rep => bindings::ib_cm_data_size_IB_CM_REP_PRIVATE_DATA_SIZE,
            Self::Rtu => bindings::ib_cm_data_size_IB_CM_RTU_PRIVATE_DATA_SIZE,
            Self::Rej => bindings::ib_cm_data_size_IB_CM_REJ_PRIVATE_DATA_SIZE,
            Self::Dreq => bindings::ib_cm_data_size_IB_CM_DREQ_PRIVATE_DATA_SIZE,
            Self::Drep => bindings::ib_cm_data_size_IB_CM_DREP_PRIVATE_DATA_SIZE,
        }) as usize
    }

    /// The length the CM is given for `data` in this message, or `EINVAL`
    /// if `data` is longer than the message's field.
    pub fn check(self, data: &[u8]) -> Result<u8> {
        if data.len() > self.private_data_size() {
            return Err(EINVAL);
        }
        u8::try_from(data.len()).map_err(|_| EINVAL)
    }

    /// `(pointer, length)` for the CM's `(const void *, u8)` private data
    /// arguments, or `EINVAL` (see [`Message::check`]). An empty slice is
    /// passed as `NULL`, which is how the CM spells "no private data".
    pub(super) fn raw(self, data: &[u8]) -> Result<(*const c_void, u8)> {
        let len = self.check(data)?;
        let ptr = if data.is_empty() {
            core::ptr::null()
        } else {
            data.as_ptr().cast()
        };
        Ok((ptr, len))
    }
}

/// What [`CmIdRef::send_req`](super::CmIdRef::send_req) sends: the connection's addressing, and its
/// policy (resources, retries, flow control, timing), all the caller's
/// (rdma_cm's: one RDMA READ each way, flow control, 7 retries of each kind).
pub struct Req<'a> {
    /// The path to the peer, and the GID entry it leaves from.
    pub route: &'a Route,
    /// The service id the peer listens on (host order).
    pub service_id: u64,
    /// Our QP's number.
    pub qp_num: u32,
    /// The PSN our QP starts sending with.
    pub starting_psn: u32,
    /// The CM's timing and retries ([`Timing::cm_response_timeout`],
    /// [`Timing::max_cm_retries`]).
    pub timing: Timing,
    /// RDMA READs the peer may have outstanding at our QP.
    pub responder_resources: u8,
    /// RDMA READs our QP may have outstanding at the peer.
    pub initiator_depth: u8,
    /// Whether our QP's receive queue takes part in end-to-end flow control.
    pub flow_control: bool,
    /// Transport retries of the QPs (0..=7).
    pub retry_count: u8,
    /// RNR retries of the QPs (0..=7; 7 is "forever").
    pub rnr_retry_count: u8,
    /// The REQ's private data (at most 92 bytes).
    pub private_data: &'a [u8],
}

/// What [`CmIdRef::send_rep`](super::CmIdRef::send_rep) sends, all of it the caller's choice.
pub struct Rep<'a> {
    /// Our QP's number.
    pub qp_num: u32,
    /// The PSN our QP starts sending with.
    pub starting_psn: u32,
    /// RDMA READs the peer may have outstanding at our QP.
    pub responder_resources: u8,
    /// RDMA READs our QP may have outstanding at the peer.
    pub initiator_depth: u8,
    /// Whether our QP's receive queue takes part in end-to-end flow control.
    pub flow_control: bool,
    /// RNR retries of the QPs (0..=7; 7 is "forever").
    pub rnr_retry_count: u8,
    /// The REP's private data (at most 196 bytes).
    pub private_data: &'a [u8],
}
