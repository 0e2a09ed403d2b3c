// SPDX-License-Identifier: GPL-2.0

//! IB connection manager identifiers: `struct ib_cm_id`.
//!
//! A [`CmId`] owns one `struct ib_cm_id` and the consumer's data for it. The
//! CM calls the consumer's [`Handler`] with that data for every event on the
//! id. What the C interface leaves to the caller is checked here:
//!
//! - private data is a `&[u8]`: longer than the message's field (220 bytes
//!   for a DREQ, 224 for a DREP, ...) is `EINVAL` before anything reaches
//!   the CM, so a length can never be truncated to the C `u8`;
//! - event private data is only lent to the handler for the callback, which
//!   is as long as the CM keeps the received MAD;
//! - a listener's new ids get their own data ([`Request::accept`]) before
//!   any other event can reach them; a SIDR REQ's new id is only lent to
//!   the listener's handler ([`Handler::sidr_req_received`]), which answers
//!   it there or leaves the CM to reject it (a SIDR REP with
//!   IB_SIDR_REJECT);
//! - every event type the CM has is matched explicitly in the trampoline,
//!   with what the CM does with the handler's return value;
//! - dropping a [`CmId`] destroys the id and waits for its callbacks, except
//!   where waiting would deadlock: inside one of the id's own callbacks, or
//!   inside a REQ callback of a listening id (the CM holds the listener
//!   until that callback returns). There the destroy is queued on the
//!   caller's [`Reaper`].
//!
//! Policy is the caller's: the timing, retries, flow control and resources
//! of a connection are fields of [`Req`] and [`Rep`], with no defaults; the
//! answer to a SIDR REQ is the handler's. A caller that counts its ids
//! counts them in its own data (`T`), which lives exactly as long as the
//! id.
//!
//! # Who destroys an id, and who waits for it
//!
//! The user's code (a module's) runs in three kinds of context: its own
//! (module init and exit, its file operations, its `ib_client`'s add and
//! remove), a CM callback of one of its ids, and a work item of its
//! [`Reaper`] (a queued destroy, or a job a callback handed off:
//! [`ReaperRef::spawn_job`]). An id is destroyed on exactly one of these
//! paths:
//!
//! 1. [`CmId`] dropped elsewhere than below: no event reaches the handler
//!    any more, the callbacks inside it are waited for, then
//!    `ib_destroy_cm_id`, which returns only when no callback of the id
//!    runs (the CM holds a reference on the id for each callback it
//!    delivers through `cm_process_work`; for the `*_ERROR` ones see
//!    below). Whoever drops it waits.
//! 2. [`CmId`] dropped inside one of its own callbacks, or a listener's
//!    inside one of its REQ callbacks, or [`CmId::destroy_deferred`]: a work
//!    item of the [`Reaper`] destroys it as in 1, waiting for the callback
//!    that dropped it. Device removal flushes the reaper (`ReaperRef::flush`),
//!    and the reaper's drop (at module exit) runs everything queued and
//!    waits until no id that could still be queued exists.
//! 3. A REQ's new id that the handler does not accept (or accepts and drops
//!    before returning): non-zero return (the handler's errno), the CM
//!    destroys it (a REJ, none for `-ENOMEM` in `REQ_RCVD`) inside
//!    `cm_req_handler`, before it drops its reference on the listener. The
//!    listener's destroy (1 or 2) waits for that reference, so for this.
//! 4. A SIDR REQ's new id: lent to the listener's
//!    [`Handler::sidr_req_received`], then a non-zero return, and the CM
//!    destroys it (with a SIDR REP of IB_SIDR_REJECT unless the handler
//!    answered); `cm_sidr_req_handler` holds the listener until our handler
//!    has returned, so the listener's destroy waits for it.
//!
//! So once the user's own contexts have destroyed every id they hold (1)
//! and the reaper is gone (2, and 3 and 4 through the listeners), no CM
//! callback and no work item runs the user's code: a module that makes its
//! [`Reaper`] at init and drops it last at exit cannot be unloaded under
//! one. What a handler may drop: any [`CmId`], its own and its listener's
//! included; no [`Reaper`].
//!
//! The `*_ERROR` events (REQ, REP, DREQ timed out) are the exception to
//! "the CM holds the id": 6.12's `cm_process_send_error` drops its
//! reference on the id (`cm_free_priv_msg`) before it calls the handler,
//! from the MAD layer's completion, not serialised with the id's other
//! callbacks (a `DREQ_ERROR` handler still runs when `TIMEWAIT_EXIT`
//! comes on the CM's workqueue). So `ib_destroy_cm_id` from another task
//! would free the id under such a handler. Every task inside a callback of
//! the id is recorded (`Inner::callbacks`, one record per task on its
//! stack), and both destroy paths first mark the id dropped under that
//! list's lock (no callback reaches the handler after that), then sleep
//! until the list is empty (the last callback to leave wakes them) *before*
//! `ib_destroy_cm_id`, and again after it: a handler may sleep and then use
//! its `&CmIdRef`. The records also let two callbacks at once each see
//! their own drop of the [`CmId`] as one from a callback. What remains is
//! the CM's own window between its unlock and the call of our handler
//! (cm.c `cm_process_send_error`, between `spin_unlock_irq` and
//! `cm_handler`): a destroy that completes in those few instructions frees
//! the id under the CM itself; nothing outside the CM can close it (it
//! would need the CM's reference).
//!
//! C header: [`include/rdma/ib_cm.h`](srctree/include/rdma/ib_cm.h)

use super::{
    device::Device,
    path::{Route, Timing},
    verbs::{QpAttr, QpState, WcStatus},
};
use crate::{
    bindings, c_str,
    error::{from_err_ptr, to_result},
    ffi::{c_int, c_void},
    new_condvar, new_mutex, new_spinlock, new_work,
    prelude::*,
    str::CStr,
    sync::{Arc, CondVar, Mutex, SpinLock},
    task::Task,
    types::{ARef, Opaque},
    workqueue::{Queue, Work, WorkItem},
};
use core::{
    cell::Cell,
    marker::PhantomData,
    ops::Deref,
    ptr::NonNull,
    sync::atomic::{AtomicBool, AtomicPtr, Ordering},
};
/// Bytes of private data a DREQ carries (`IB_CM_DREQ_PRIVATE_DATA_SIZE`).
pub const DREQ_PRIVATE_DATA_SIZE: usize =
    bindings::ib_cm_data_size_IB_CM_DREQ_PRIVATE_DATA_SIZE as usize;
/// Bytes of private data a DREP carries (`IB_CM_DREP_PRIVATE_DATA_SIZE`).
pub const DREP_PRIVATE_DATA_SIZE: usize =
    bindings::ib_cm_data_size_IB_CM_DREP_PRIVATE_DATA_SIZE as usize;
/// Bytes of private data a REQ carries (`IB_CM_REQ_PRIVATE_DATA_SIZE`).
pub const REQ_PRIVATE_DATA_SIZE: usize =
    bindings::ib_cm_data_size_IB_CM_REQ_PRIVATE_DATA_SIZE as usize;
/// Bytes of private data a REP carries (`IB_CM_REP_PRIVATE_DATA_SIZE`).
pub const REP_PRIVATE_DATA_SIZE: usize =
    bindings::ib_cm_data_size_IB_CM_REP_PRIVATE_DATA_SIZE as usize;
/// Bytes of private data an RTU carries (`IB_CM_RTU_PRIVATE_DATA_SIZE`).
pub const RTU_PRIVATE_DATA_SIZE: usize =
    bindings::ib_cm_data_size_IB_CM_RTU_PRIVATE_DATA_SIZE as usize;
/// Bytes of private data a REJ carries (`IB_CM_REJ_PRIVATE_DATA_SIZE`).
pub const REJ_PRIVATE_DATA_SIZE: usize =
    bindings::ib_cm_data_size_IB_CM_REJ_PRIVATE_DATA_SIZE as usize;
/// Bytes of private data a SIDR REQ carries
/// (`IB_CM_SIDR_REQ_PRIVATE_DATA_SIZE`).
pub const SIDR_REQ_PRIVATE_DATA_SIZE: usize =
    bindings::ib_cm_data_size_IB_CM_SIDR_REQ_PRIVATE_DATA_SIZE as usize;
/// Bytes of private data a SIDR REP carries
/// (`IB_CM_SIDR_REP_PRIVATE_DATA_SIZE`).
pub const SIDR_REP_PRIVATE_DATA_SIZE: usize =
    bindings::ib_cm_data_size_IB_CM_SIDR_REP_PRIVATE_DATA_SIZE as usize;

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
/// assert_eq!(Message::Dreq.private_data_size(), 220);
/// assert_eq!(Message::Drep.private_data_size(), 224);
/// assert_eq!(Message::Req.private_data_size(), 92);
/// // The whole field fits; one byte more is `EINVAL`, whatever the length.
/// assert_eq!(Message::Dreq.check(&[7u8; DREQ_PRIVATE_DATA_SIZE]), Ok(220));
/// assert_eq!(Message::Dreq.check(&[7u8; 221]), Err(EINVAL));
/// assert_eq!(Message::Drep.check(&[0u8; 300]), Err(EINVAL));
/// // 300 would be 44 as a `u8`: never truncated, rejected.
/// assert_eq!(Message::Rej.check(&[0u8; 256 + 44]), Err(EINVAL));
/// // An empty slice sends no private data (the peer sees zeros).
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
    /// A reply to a SIDR REQ (UD service id resolution).
    SidrRep,
}

impl Message {
    /// Bytes of private data the message carries.
    pub const fn private_data_size(self) -> usize {
        match self {
            Self::Req => REQ_PRIVATE_DATA_SIZE,
            Self::Rep => REP_PRIVATE_DATA_SIZE,
            Self::Rtu => RTU_PRIVATE_DATA_SIZE,
            Self::Rej => REJ_PRIVATE_DATA_SIZE,
            Self::Dreq => DREQ_PRIVATE_DATA_SIZE,
            Self::Drep => DREP_PRIVATE_DATA_SIZE,
            Self::SidrRep => SIDR_REP_PRIVATE_DATA_SIZE,
        }
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
    fn raw(self, data: &[u8]) -> Result<(*const c_void, u8)> {
        let len = self.check(data)?;
        let ptr = if data.is_empty() {
            core::ptr::null()
        } else {
            data.as_ptr().cast()
        };
        Ok((ptr, len))
    }
}

macro_rules! raw_enum {
    (
        $(#[$meta:meta])*
        pub enum $ty:ident: $raw_ty:ty, $prefix:literal {
            $($(#[$doc:meta])* $name:ident = $raw:ident,)*
        }
        $unknown:ident
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, PartialEq, Eq, Debug)]
        pub enum $ty {
            $($(#[$doc])* $name,)*
            /// A value the kernel's enum does not have.
            $unknown($raw_ty),
        }

        impl $ty {
            /// The value of a raw C enum value.
            pub fn from_raw(raw: $raw_ty) -> Self {
                $(if raw == bindings::$raw {
                    return Self::$name;
                })*
                Self::$unknown(raw)
            }

            /// The raw C enum value.
            pub fn to_raw(self) -> $raw_ty {
                match self {
                    $(Self::$name => bindings::$raw,)*
                    Self::$unknown(raw) => raw,
                }
            }

            /// The name the kernel's sources use, without their prefix
            /// (`"UNKNOWN"` for a value they do not have).
            pub fn name(self) -> &'static str {
                match self {
                    $(Self::$name => &stringify!($raw)[$prefix.len()..],)*
                    Self::$unknown(_) => "UNKNOWN",
                }
            }
        }
    };
}

raw_enum! {
    /// The state of an id, as the CM keeps it (`enum ib_cm_state`).
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::{bindings, rdma::cm::State};
    ///
    /// let s = State::from_raw(bindings::ib_cm_state_IB_CM_DREQ_SENT);
    /// assert_eq!(s, State::DreqSent);
    /// assert_eq!(s.name(), "DREQ_SENT");
    /// assert_eq!(State::from_raw(s.to_raw()), s);
    /// assert_eq!(State::from_raw(bindings::ib_cm_state_IB_CM_IDLE), State::Idle);
    /// assert_eq!(State::from_raw(1000), State::Unknown(1000));
    /// assert_eq!(State::Unknown(1000).name(), "UNKNOWN");
    /// ```
    pub enum State: u32, "ib_cm_state_IB_CM_" {
        /// No connection: new, or after a REJ or a failed handshake.
        Idle = ib_cm_state_IB_CM_IDLE,
        /// Listening for REQs.
        Listen = ib_cm_state_IB_CM_LISTEN,
        /// A REQ sent, no answer yet.
        ReqSent = ib_cm_state_IB_CM_REQ_SENT,
        /// A REQ received (a listener's new id).
        ReqRcvd = ib_cm_state_IB_CM_REQ_RCVD,
        /// An MRA sent for the REQ received.
        MraReqSent = ib_cm_state_IB_CM_MRA_REQ_SENT,
        /// An MRA received for the REQ sent.
        MraReqRcvd = ib_cm_state_IB_CM_MRA_REQ_RCVD,
        /// A REP sent, waiting for the RTU.
        RepSent = ib_cm_state_IB_CM_REP_SENT,
        /// A REP received, the RTU not sent yet.
        RepRcvd = ib_cm_state_IB_CM_REP_RCVD,
        /// An MRA sent for the REP received.
        MraRepSent = ib_cm_state_IB_CM_MRA_REP_SENT,
        /// An MRA received for the REP sent.
        MraRepRcvd = ib_cm_state_IB_CM_MRA_REP_RCVD,
        /// Connected.
        Established = ib_cm_state_IB_CM_ESTABLISHED,
        /// A DREQ sent, waiting for the DREP.
        DreqSent = ib_cm_state_IB_CM_DREQ_SENT,
        /// A DREQ received, not answered yet.
        DreqRcvd = ib_cm_state_IB_CM_DREQ_RCVD,
        /// Disconnected, waiting for stray packets to die out.
        Timewait = ib_cm_state_IB_CM_TIMEWAIT,
        /// A SIDR REQ sent.
        SidrReqSent = ib_cm_state_IB_CM_SIDR_REQ_SENT,
        /// A SIDR REQ received.
        SidrReqRcvd = ib_cm_state_IB_CM_SIDR_REQ_RCVD,
    }
    Unknown
}

raw_enum! {
    /// Why the peer rejected a REQ or REP (`enum ib_cm_rej_reason`), as its
    /// REJ says. The wire field is 16 bits: a value the kernel does not
    /// name is kept as [`RejReason::Unknown`].
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::rdma::cm::RejReason;
    ///
    /// let r = RejReason::from_raw(28);
    /// assert_eq!(r, RejReason::ConsumerDefined);
    /// assert_eq!(r.name(), "CONSUMER_DEFINED");
    /// assert_eq!(RejReason::InvalidServiceId.to_raw(), 8);
    /// assert_eq!(RejReason::from_raw(34), RejReason::Unknown(34));
    /// assert_eq!(RejReason::from_raw(RejReason::Unknown(34).to_raw()), RejReason::Unknown(34));
    /// ```
    pub enum RejReason: u32, "ib_cm_rej_reason_IB_CM_REJ_" {
        /// No QP available.
        NoQp = ib_cm_rej_reason_IB_CM_REJ_NO_QP,
        /// No EE context available.
        NoEec = ib_cm_rej_reason_IB_CM_REJ_NO_EEC,
        /// No resources available.
        NoResources = ib_cm_rej_reason_IB_CM_REJ_NO_RESOURCES,
        /// A timeout: the peer's CM gave up waiting (also a local REJ).
        Timeout = ib_cm_rej_reason_IB_CM_REJ_TIMEOUT,
        /// Unsupported request.
        Unsupported = ib_cm_rej_reason_IB_CM_REJ_UNSUPPORTED,
        /// Invalid communication id.
        InvalidCommId = ib_cm_rej_reason_IB_CM_REJ_INVALID_COMM_ID,
        /// Invalid communication instance.
        InvalidCommInstance = ib_cm_rej_reason_IB_CM_REJ_INVALID_COMM_INSTANCE,
        /// Nobody listens on the service id.
        InvalidServiceId = ib_cm_rej_reason_IB_CM_REJ_INVALID_SERVICE_ID,
        /// Invalid transport type.
        InvalidTransportType = ib_cm_rej_reason_IB_CM_REJ_INVALID_TRANSPORT_TYPE,
        /// Stale connection.
        StaleConn = ib_cm_rej_reason_IB_CM_REJ_STALE_CONN,
        /// The RD channel does not exist.
        RdcNotExist = ib_cm_rej_reason_IB_CM_REJ_RDC_NOT_EXIST,
        /// Invalid GID.
        InvalidGid = ib_cm_rej_reason_IB_CM_REJ_INVALID_GID,
        /// Invalid LID.
        InvalidLid = ib_cm_rej_reason_IB_CM_REJ_INVALID_LID,
        /// Invalid SL.
        InvalidSl = ib_cm_rej_reason_IB_CM_REJ_INVALID_SL,
        /// Invalid traffic class.
        InvalidTrafficClass = ib_cm_rej_reason_IB_CM_REJ_INVALID_TRAFFIC_CLASS,
        /// Invalid hop limit.
        InvalidHopLimit = ib_cm_rej_reason_IB_CM_REJ_INVALID_HOP_LIMIT,
        /// Invalid packet rate.
        InvalidPacketRate = ib_cm_rej_reason_IB_CM_REJ_INVALID_PACKET_RATE,
        /// Invalid alternate GID.
        InvalidAltGid = ib_cm_rej_reason_IB_CM_REJ_INVALID_ALT_GID,
        /// Invalid alternate LID.
        InvalidAltLid = ib_cm_rej_reason_IB_CM_REJ_INVALID_ALT_LID,
        /// Invalid alternate SL.
        InvalidAltSl = ib_cm_rej_reason_IB_CM_REJ_INVALID_ALT_SL,
        /// Invalid alternate traffic class.
        InvalidAltTrafficClass = ib_cm_rej_reason_IB_CM_REJ_INVALID_ALT_TRAFFIC_CLASS,
        /// Invalid alternate hop limit.
        InvalidAltHopLimit = ib_cm_rej_reason_IB_CM_REJ_INVALID_ALT_HOP_LIMIT,
        /// Invalid alternate packet rate.
        InvalidAltPacketRate = ib_cm_rej_reason_IB_CM_REJ_INVALID_ALT_PACKET_RATE,
        /// Port CM redirect.
        PortCmRedirect = ib_cm_rej_reason_IB_CM_REJ_PORT_CM_REDIRECT,
        /// Port redirect.
        PortRedirect = ib_cm_rej_reason_IB_CM_REJ_PORT_REDIRECT,
        /// Invalid MTU.
        InvalidMtu = ib_cm_rej_reason_IB_CM_REJ_INVALID_MTU,
        /// Insufficient responder resources.
        InsufficientRespResources = ib_cm_rej_reason_IB_CM_REJ_INSUFFICIENT_RESP_RESOURCES,
        /// The peer's consumer rejected it ([`CmIdRef::send_rej`]).
        ConsumerDefined = ib_cm_rej_reason_IB_CM_REJ_CONSUMER_DEFINED,
        /// Invalid RNR retry count.
        InvalidRnrRetry = ib_cm_rej_reason_IB_CM_REJ_INVALID_RNR_RETRY,
        /// Duplicate local communication id.
        DuplicateLocalCommId = ib_cm_rej_reason_IB_CM_REJ_DUPLICATE_LOCAL_COMM_ID,
        /// Invalid class version.
        InvalidClassVersion = ib_cm_rej_reason_IB_CM_REJ_INVALID_CLASS_VERSION,
        /// Invalid flow label.
        InvalidFlowLabel = ib_cm_rej_reason_IB_CM_REJ_INVALID_FLOW_LABEL,
        /// Invalid alternate flow label.
        InvalidAltFlowLabel = ib_cm_rej_reason_IB_CM_REJ_INVALID_ALT_FLOW_LABEL,
        /// Vendor option not supported.
        VendorOptionNotSupported = ib_cm_rej_reason_IB_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED,
    }
    Unknown
}

/// An id borrowed from the CM: during a callback, or from a [`CmId`].
///
/// Everything that can be done with an id without owning it: sending CM
/// messages, reading its state, preparing its QP's attributes.
///
/// # Invariants
///
/// The wrapped `struct ib_cm_id` is valid (not destroyed) for the lifetime of
/// every `&CmIdRef`.
#[repr(transparent)]
pub struct CmIdRef(Opaque<bindings::ib_cm_id>);

impl CmIdRef {
    /// Creates a reference to a [`CmIdRef`] from a raw pointer: for C code
    /// that hands its own ids to Rust.
    ///
    /// # Safety
    ///
    /// `ptr` must be a valid `struct ib_cm_id` that is not destroyed during
    /// `'a`.
    pub unsafe fn from_raw<'a>(ptr: *mut bindings::ib_cm_id) -> &'a Self {
        // SAFETY: `CmIdRef` is a transparent wrapper; the caller guarantees
        // validity for `'a`.
        unsafe { &*ptr.cast() }
    }

    /// Returns the raw `struct ib_cm_id` pointer.
    pub fn as_raw(&self) -> *mut bindings::ib_cm_id {
        self.0.get()
    }

    /// The id's state as the CM last set it (a snapshot: the CM changes it
    /// under its own lock as messages arrive).
    pub fn state(&self) -> State {
        // SAFETY: By the type invariant the id is valid. The CM writes `state`
        // under its spinlock; a volatile read gives one consistent value.
        State::from_raw(unsafe { core::ptr::addr_of!((*self.as_raw()).state).read_volatile() })
    }

    /// The local communication id (host order), as in the CM's messages.
    pub fn local_id(&self) -> u32 {
        // SAFETY: By the type invariant the id is valid; set at creation.
        u32::from_be(unsafe { (*self.as_raw()).local_id })
    }

    /// The peer's communication id (host order), once known.
    pub fn remote_id(&self) -> u32 {
        // SAFETY: By the type invariant the id is valid. Written once by the
        // CM when the REQ or REP arrives; a volatile read sees 0 or that value.
        u32::from_be(unsafe { core::ptr::addr_of!((*self.as_raw()).remote_id).read_volatile() })
    }

    /// The RDMA device the id lives on.
    pub fn device(&self) -> &Device {
        // SAFETY: The id is valid (type invariant) and its device outlives it: an id made here is
        // owned by a `CmId`, which holds a reference on the device (`Inner::device`) until the
        // id is destroyed, and the unregistration of a device waits for its references; an id
        // lent by C code (`from_raw`) is valid, its device with it, by that caller's contract.
        unsafe { Device::from_raw((*self.as_raw()).device) }
    }

    /// Starts listening for REQs to `service_id` (host order).
    pub fn listen(&self, service_id: u64) -> Result {
        // SAFETY: By the type invariant the id is valid.
        to_result(unsafe { bindings::ib_cm_listen(self.as_raw(), service_id.to_be()) })
    }

    /// Sends a REQ as `req` says: for its QP along its route to its service
    /// id. `EINVAL` if a field does not fit the message (private data, the
    /// 3-bit retry counts, the timing), before anything is sent.
    pub fn send_req(&self, req: &Req<'_>) -> Result {
        let (ptr, len) = Message::Req.raw(req.private_data)?;
        req.timing.check()?;
        if req.retry_count > 7 || req.rnr_retry_count > 7 {
            return Err(EINVAL);
        }
        let mut path = *req.route.path_record();
        let mut param = bindings::ib_cm_req_param {
            primary_path: &mut path,
            ppath_sgid_attr: req.route.sgid_attr().as_raw(),
            service_id: req.service_id.to_be(),
            qp_num: req.qp_num,
            qp_type: bindings::ib_qp_type_IB_QPT_RC,
            starting_psn: req.starting_psn,
            private_data: ptr,
            private_data_len: len,
            responder_resources: req.responder_resources,
            initiator_depth: req.initiator_depth,
            remote_cm_response_timeout: req.timing.cm_response_timeout,
            local_cm_response_timeout: req.timing.cm_response_timeout,
            flow_control: req.flow_control.into(),
            retry_count: req.retry_count,
            rnr_retry_count: req.rnr_retry_count,
            max_cm_retries: req.timing.max_cm_retries,
            ..Default::default()
        };
        // SAFETY: The id is valid (type invariant); `param` and what it points to (path, GID
        // entry, private data) are valid for the call; the CM copies or refs what it keeps.
        to_result(unsafe { bindings::ib_send_cm_req(self.as_raw(), &mut param) })
    }

    /// Answers a REQ with a REP as `rep` says. `EINVAL` if a field does not
    /// fit the message, before anything is sent.
    pub fn send_rep(&self, rep: &Rep<'_>) -> Result {
        let (ptr, len) = Message::Rep.raw(rep.private_data)?;
        if rep.rnr_retry_count > 7 {
            return Err(EINVAL);
        }
        let mut param = bindings::ib_cm_rep_param {
            qp_num: rep.qp_num,
            starting_psn: rep.starting_psn,
            private_data: ptr,
            private_data_len: len,
            responder_resources: rep.responder_resources,
            initiator_depth: rep.initiator_depth,
            flow_control: rep.flow_control.into(),
            rnr_retry_count: rep.rnr_retry_count,
            ..Default::default()
        };
        // SAFETY: By the type invariant the id is valid; `param` and the
        // private data are valid for the call (the CM copies them).
        to_result(unsafe { bindings::ib_send_cm_rep(self.as_raw(), &mut param) })
    }

    /// Sends the RTU that completes an active connection.
    pub fn send_rtu(&self, data: &[u8]) -> Result {
        let (ptr, len) = Message::Rtu.raw(data)?;
        // SAFETY: By the type invariant the id is valid; `ptr` is NULL or
        // valid for `len` bytes.
        to_result(unsafe { bindings::ib_send_cm_rtu(self.as_raw(), ptr, len) })
    }

    /// Rejects a connection (REQ or REP received) with the reason
    /// [`RejReason::ConsumerDefined`] and `data` (at most 148 bytes).
    pub fn send_rej(&self, data: &[u8]) -> Result {
        let (ptr, len) = Message::Rej.raw(data)?;
        // SAFETY: As in `send_rtu`; no ARI is passed.
        to_result(unsafe {
            bindings::ib_send_cm_rej(
                self.as_raw(),
                bindings::ib_cm_rej_reason_IB_CM_REJ_CONSUMER_DEFINED,
                core::ptr::null_mut(),
                0,
                ptr,
                len,
            )
        })
    }

    /// Tells the peer that our answer will take a while (a Message Receipt
    /// Acknowledgment), so that its CM waits `service_timeout` (the CM
    /// computes `1 << (service_timeout - 8)` ms, `cm_convert_to_ms`) plus
    /// its packet lifetime for each of its remaining retries instead of the
    /// message's own timeout. The peer's CM takes only the first MRA
    /// (`cm_mra_handler`: later ones are duplicates in `MRA_REQ_RCVD`).
    ///
    /// Legal where `ib_send_cm_mra` takes it: `REQ_RCVD` (the REQ callback,
    /// after [`Request::accept`]; the id goes to `MRA_REQ_SENT`, where a REP
    /// or a REJ may follow from anywhere), `REP_RCVD` (to `MRA_REP_SENT`)
    /// and `ESTABLISHED` with a LAP received; `EINVAL` elsewhere. With
    /// `delay`, nothing is sent now: the CM answers each retransmission of
    /// the message with the MRA (rdma_cm's `CMA_CM_MRA_SETTING`), so a quick
    /// answer costs no MAD, and the call cannot fail for want of memory
    /// (no private data is copied).
    pub fn send_mra(&self, service_timeout: u8, delay: bool) -> Result {
        if service_timeout > 31 {
            return Err(EINVAL);
        }
        let flag = if delay {
            bindings::IB_CM_MRA_FLAG_DELAY as u8
        } else {
            0
        };
        // SAFETY: By the type invariant the id is valid; no private data.
        to_result(unsafe {
            bindings::ib_send_cm_mra(self.as_raw(), service_timeout | flag, core::ptr::null(), 0)
        })
    }

    /// Sends a disconnection request carrying `data` (at most 220 bytes; an
    /// empty slice sends none).
    ///
    /// `EINVAL` if `data` is longer than [`DREQ_PRIVATE_DATA_SIZE`]: nothing
    /// is sent and the connection is untouched. Otherwise the CM's answer as
    /// it is: `EINVAL` unless the id is `ESTABLISHED` (a second DREQ, one
    /// after the peer's DREQ, one before the RTU), `ENOMEM` or a MAD error
    /// (the id then enters timewait). Callable from atomic context.
    pub fn send_dreq(&self, data: &[u8]) -> Result {
        let (ptr, len) = Message::Dreq.raw(data)?;
        // SAFETY: By the type invariant the id is valid; `ptr` is NULL or
        // valid for `len` bytes, which the CM copies into the MAD.
        to_result(unsafe { bindings::ib_send_cm_dreq(self.as_raw(), ptr, len) })
    }

    /// Answers the peer's DREQ with a DREP carrying `data` (at most 224
    /// bytes).
    ///
    /// `EINVAL` if `data` is longer than [`DREP_PRIVATE_DATA_SIZE`], checked
    /// here because 6.12's `ib_send_cm_drep` leaks its copy of the data in
    /// that case; `EINVAL` from the CM unless the id is `DREQ_RCVD`. May
    /// sleep (the CM copies the data with `GFP_KERNEL`).
    pub fn send_drep(&self, data: &[u8]) -> Result {
        let (ptr, len) = Message::Drep.raw(data)?;
        // SAFETY: As in `send_dreq`.
        to_result(unsafe { bindings::ib_send_cm_drep(self.as_raw(), ptr, len) })
    }

    /// The QP attributes for moving the connection's QP to `state`, as
    /// `ib_cm_init_qp_attr` computes them from the REQ and REP.
    ///
    /// The attributes for RTR carry the id's address vector, whose GID
    /// entry the CM holds only until the id is destroyed: the value holds
    /// the entry itself, so it may be applied after the id is gone (see
    /// [`QpAttr`]).
    pub fn init_qp_attr(&self, state: QpState) -> Result<QpAttr> {
        let mut attr = bindings::ib_qp_attr {
            qp_state: state.to_raw(),
            ..Default::default()
        };
        let mut mask: c_int = 0;
        // SAFETY: By the type invariant the id is valid; `attr` and `mask` are
        // valid for writes.
        to_result(unsafe { bindings::ib_cm_init_qp_attr(self.as_raw(), &mut attr, &mut mask) })?;
        // SAFETY: `attr` was zeroed, so each non-null GID entry in it is the
        // CM's copy of one of the id's address vectors, which hold their
        // entries until the id is destroyed, and the id is live (type
        // invariant) during this call.
        Ok(unsafe { QpAttr::from_raw_held(attr, mask) })
    }
}

/// What [`CmIdRef::send_req`] sends: the connection's addressing, and its
/// policy (resources, retries, flow control, timing), all the caller's.
///
/// # Examples
///
/// ```
/// use kernel::rdma::{cm::Req, path::{Route, Timing}};
///
/// // rdma_cm's choices: one RDMA READ each way, flow control, 7 retries.
/// fn req<'a>(route: &'a Route, qp_num: u32, timing: Timing) -> Req<'a> {
///     Req {
///         route,
///         service_id: 0x1234,
///         qp_num,
///         starting_psn: qp_num,
///         timing,
///         responder_resources: 1,
///         initiator_depth: 1,
///         flow_control: true,
///         retry_count: 7,
///         rnr_retry_count: 7,
///         private_data: b"hello",
///     }
/// }
/// # let _ = req;
/// ```
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
    /// The REQ's private data (at most [`REQ_PRIVATE_DATA_SIZE`] bytes).
    pub private_data: &'a [u8],
}

/// What [`CmIdRef::send_rep`] sends, all of it the caller's choice.
///
/// # Examples
///
/// ```
/// use kernel::rdma::cm::Rep;
///
/// // rdma_cm's choices: flow control, RNR retries for ever.
/// let rep = Rep {
///     qp_num: 17,
///     starting_psn: 17,
///     responder_resources: 1,
///     initiator_depth: 1,
///     flow_control: true,
///     rnr_retry_count: 7,
///     private_data: &[],
/// };
/// # let _ = rep;
/// ```
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
    /// The REP's private data (at most [`REP_PRIVATE_DATA_SIZE`] bytes).
    pub private_data: &'a [u8],
}

/// What the CM tells the owner of an id. Every method has a default that
/// ignores the event; a listener implements [`Handler::req_received`].
///
/// Handlers run in process context and may sleep: the CM's workqueue
/// (serialised per id) for received messages and timewait exit, the MAD
/// layer's completion for the `*_error` events (which may run beside one
/// of the others: a `dreq_error` still sleeping when `timewait_exit`
/// comes). The `&CmIdRef` a handler gets stays valid until it returns,
/// whoever drops the [`CmId`] meanwhile: the destroy waits for it. A
/// handler may drop any [`CmId`], its own and its listener's included
/// (see [`CmId`]).
#[vtable]
pub trait Handler: Sized + Send + Sync + 'static {
    /// A REQ for a listening id: accept it with [`Request::accept`] (and send
    /// a REP), or return an error (or drop the request) to reject it. An
    /// id accepted and then dropped before returning is destroyed by the CM
    /// told the returned errno: `ENOMEM` sends no REJ while the id is
    /// `REQ_RCVD` (the peer retries; after [`CmIdRef::send_mra`] the CM
    /// rejects whatever the errno). Work
    /// that takes long (making the QP) belongs in a job
    /// ([`ReaperRef::spawn`]) that sends the REP later, after
    /// [`CmIdRef::send_mra`] here: the CM runs one callback at a time per
    /// CPU for every id on the host.
    fn req_received(&self, _req: Request<'_, Self>) -> Result {
        Err(EINVAL)
    }
    /// The REP for our REQ: move the QP to RTR and RTS, send the RTU.
    fn rep_received(&self, _id: &CmIdRef, _remote_qpn: u32) {}
    /// The RTU for our REP (or `ib_cm_notify` of a first packet).
    fn established(&self, _id: &CmIdRef) {}
    /// The peer rejected our REQ or REP (or the CM did: [`RejReason::Timeout`]
    /// when the peer's MRA time ran out), with the REJ's 148 bytes of
    /// private data.
    fn rej_received(&self, _id: &CmIdRef, _reason: RejReason, _private_data: &[u8]) {}
    /// The peer's DREQ, with its 220 bytes of private data. The CM sends no
    /// DREP by itself: answer with [`CmIdRef::send_drep`].
    fn dreq_received(&self, _id: &CmIdRef, _private_data: &[u8]) {}
    /// The DREP for our DREQ, with its 224 bytes of private data.
    fn drep_received(&self, _id: &CmIdRef, _private_data: &[u8]) {}
    /// Our DREQ got no answer after all retries (`send_status` is how the
    /// MAD ended, [`WcStatus::RespTimeoutErr`] for no answer). The id is in
    /// timewait.
    fn dreq_error(&self, _id: &CmIdRef, _send_status: WcStatus) {}
    /// Our REQ or REP got no answer (`send_status` as for `dreq_error`).
    /// The id is idle: the CM has forgotten the peer.
    fn connect_error(&self, _id: &CmIdRef, _send_status: WcStatus) {}
    /// The id left timewait: the connection is gone for good.
    fn timewait_exit(&self, _id: &CmIdRef) {}
    /// A SIDR REQ (a UD peer resolving a service id) for a listening id:
    /// answer it with [`SidrRequest::reply`], or not, and the CM rejects it
    /// (a SIDR REP of status [`SidrStatus::Reject`]). Either way the CM's
    /// id for it is destroyed when this returns: there is no connection.
    fn sidr_req_received(&self, _req: SidrRequest<'_>) {}
}

raw_enum! {
    /// The status a SIDR REP carries (`enum ib_cm_sidr_status`).
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::rdma::cm::SidrStatus;
    ///
    /// assert_eq!(SidrStatus::Reject.to_raw(), 2);
    /// assert_eq!(SidrStatus::from_raw(0), SidrStatus::Success);
    /// assert_eq!(SidrStatus::NoQp.name(), "NO_QP");
    /// ```
    pub enum SidrStatus: u32, "ib_cm_sidr_status_IB_SIDR_" {
        /// Served: the REP names the QP and its Q_Key.
        Success = ib_cm_sidr_status_IB_SIDR_SUCCESS,
        /// Nobody serves the service id.
        Unsupported = ib_cm_sidr_status_IB_SIDR_UNSUPPORTED,
        /// Refused.
        Reject = ib_cm_sidr_status_IB_SIDR_REJECT,
        /// No QP for it.
        NoQp = ib_cm_sidr_status_IB_SIDR_NO_QP,
        /// Served elsewhere (the REP's additional information says where).
        Redirect = ib_cm_sidr_status_IB_SIDR_REDIRECT,
        /// The class version is not supported.
        UnsupportedVersion = ib_cm_sidr_status_IB_SIDR_UNSUPPORTED_VERSION,
    }
    Unknown
}

/// A SIDR REQ for a listening id, lent to [`Handler::sidr_req_received`].
///
/// The id the CM made for it belongs to the CM, which destroys it when the
/// callback returns: it is never the consumer's.
pub struct SidrRequest<'a> {
    id: &'a CmIdRef,
    event: &'a bindings::ib_cm_event,
}

impl SidrRequest<'_> {
    /// The service id the peer resolves (host order).
    pub fn service_id(&self) -> u64 {
        // SAFETY: The new id is valid during its callback; the CM set
        // `service_id` from the SIDR REQ before it delivered the event.
        u64::from_be(unsafe { (*self.id.as_raw()).service_id })
    }

    /// The SIDR REQ's private data ([`SIDR_REQ_PRIVATE_DATA_SIZE`] bytes).
    pub fn private_data(&self) -> &[u8] {
        // SAFETY: For a SIDR REQ the CM points `private_data` at the MAD's
        // field of `SIDR_REQ_PRIVATE_DATA_SIZE` bytes, alive during the
        // callback.
        unsafe { event_private_data(self.event, SIDR_REQ_PRIVATE_DATA_SIZE) }
    }

    /// Answers with a SIDR REP of `status` naming UD QP `qp_num` and its
    /// `qkey`, with `private_data` (at most [`SIDR_REP_PRIVATE_DATA_SIZE`]
    /// bytes, else `EINVAL` and nothing is sent).
    pub fn reply(self, status: SidrStatus, qp_num: u32, qkey: u32, private_data: &[u8]) -> Result {
        let (ptr, len) = Message::SidrRep.raw(private_data)?;
        let mut param = bindings::ib_cm_sidr_rep_param {
            qp_num,
            qkey,
            status: status.to_raw(),
            private_data: ptr,
            private_data_len: len,
            ..Default::default()
        };
        // SAFETY: The id is valid during its SIDR REQ callback (it is in
        // SIDR_REQ_RCVD until this REP); `param` and the private data are
        // valid for the call (the CM copies them into the MAD).
        to_result(unsafe { bindings::ib_send_cm_sidr_rep(self.id.as_raw(), &mut param) })
    }
}

/// The caller's workqueue that destroys the ids whose [`CmId`] was dropped
/// where `ib_destroy_cm_id` would wait for the caller itself (see
/// [`CmId`]), and an ordered one for the jobs CM callbacks hand off
/// ([`ReaperRef::spawn_job`]).
///
/// Its work items run the caller's code (the drop of a [`Handler`], a job's
/// closure), so the caller owns it: a module makes it at init and drops it
/// last at exit, which makes the module's text outlive every work item.
/// Everything that makes ids holds a [`ReaperRef`]. Dropping it sleeps
/// until no [`ReaperRef`] is left (every id it could destroy is gone: the
/// last one to go wakes it; queued destroys run meanwhile, as the queues
/// are live), then destroys the workqueues, which run what is still queued
/// first. It is never reference counted by its own work items: the last
/// owner is the caller.
///
/// # Invariants
///
/// `wq` and `jobs` are workqueues made by `alloc_workqueue()`, destroyed
/// only in `drop`; `refs` counts the live [`ReaperRef`]s, which point at
/// `self`, and `unused` is notified when it falls to 0.
#[pin_data(PinnedDrop)]
pub struct Reaper {
    wq: NonNull<bindings::workqueue_struct>,
    /// Ordered: the work a CM callback hands off ([`ReaperRef::spawn_job`]).
    jobs: NonNull<bindings::workqueue_struct>,
    /// A spinlock, not a mutex: the last [`ReaperRef`]'s drop unlocks it
    /// and the waiter may free the reaper at once, which `spin_unlock`
    /// allows and `mutex_unlock` does not (it may touch the mutex after
    /// another task took it).
    #[pin]
    refs: SpinLock<usize>,
    #[pin]
    unused: CondVar,
}

// SAFETY: The workqueues are used only through the workqueue API, which is
// thread-safe; `refs` is under its lock.
unsafe impl Send for Reaper {}
// SAFETY: As for `Send`.
unsafe impl Sync for Reaper {}

impl Reaper {
    /// Makes the workqueues, named `name` (the destroys: unbound, as a
    /// destroy waits for a CM callback, which may sleep, and many may wait
    /// at once) and `jobs` (ordered: jobs that each take a CPU for a while
    /// run one after the other instead of as hundreds of kworkers).
    /// Process context.
    pub fn new(name: &'static CStr, jobs: &'static CStr) -> Result<Pin<KBox<Self>>> {
        // SAFETY: Process context; `"%s"` with one NUL-terminated string.
        let wq = NonNull::new(unsafe {
            bindings::alloc_workqueue(
                c_str!("%s").as_char_ptr(),
                bindings::wq_flags_WQ_UNBOUND,
                0,
                name.as_char_ptr(),
            )
        })
        .ok_or(ENOMEM)?;
        // SAFETY: As above; these are `alloc_ordered_workqueue()`'s flags and
        // limit.
        let Some(jobs) = NonNull::new(unsafe {
            bindings::alloc_workqueue(
                c_str!("%s").as_char_ptr(),
                bindings::wq_flags_WQ_UNBOUND | bindings::wq_flags___WQ_ORDERED,
                1,
                jobs.as_char_ptr(),
            )
        }) else {
            // SAFETY: Made just above, nothing queued on it.
            unsafe { bindings::destroy_workqueue(wq.as_ptr()) };
            return Err(ENOMEM);
        };
        let reaper = KBox::pin_init(
            pin_init!(Self {
                wq,
                jobs,
                refs <- new_spinlock!(0, "cm::Reaper::refs"),
                unused <- new_condvar!("cm::Reaper::unused"),
            }),
            GFP_KERNEL,
        );
        if reaper.is_err() {
            // SAFETY: Made above, nothing queued on them, no `Reaper` owns
            // them.
            unsafe {
                bindings::destroy_workqueue(jobs.as_ptr());
                bindings::destroy_workqueue(wq.as_ptr());
            }
        }
        reaper
    }

    /// A counted reference, for those that make ids.
    pub fn get(self: Pin<&Self>) -> ReaperRef {
        *self.refs.lock() += 1;
        // INVARIANT: counted just above; `self` is pinned, so it stays where
        // it is until `drop`, which waits for the count to fall to 0.
        ReaperRef {
            reaper: NonNull::from(self.get_ref()),
        }
    }

    /// Runs what is queued on both queues: the jobs first, since a job may
    /// queue a destroy.
    fn flush(&self) {
        // SAFETY: `jobs` and `wq` are live (type invariant).
        unsafe {
            bindings::__flush_workqueue(self.jobs.as_ptr());
            bindings::__flush_workqueue(self.wq.as_ptr());
        }
    }
}

#[pinned_drop]
impl PinnedDrop for Reaper {
    fn drop(self: Pin<&mut Self>) {
        // An id's last reference may sit in a queued destroy, which runs on
        // its own; the others are with owners still being torn down (or
        // leaked, a bug: then this waits rather than free the queues under
        // them, and the hung task detector names it).
        let mut refs = self.refs.lock();
        while *refs != 0 {
            self.unused.wait(&mut refs);
        }
        drop(refs);
        // SAFETY: `jobs` and `wq` are live (type invariant) and nothing can
        // queue on them any more (no `ReaperRef` is left); `destroy_workqueue`
        // first runs what is queued, including the tail of a work item that
        // dropped the last `ReaperRef` (a job's closure, an id's data).
        unsafe {
            bindings::destroy_workqueue(self.jobs.as_ptr());
            bindings::destroy_workqueue(self.wq.as_ptr());
        }
    }
}

/// A counted reference on the caller's [`Reaper`].
///
/// # Invariants
///
/// `reaper` points at a live, pinned [`Reaper`] whose `refs` counts this
/// reference.
pub struct ReaperRef {
    reaper: NonNull<Reaper>,
}

// SAFETY: The reaper is only used through `&` and atomics / the workqueue
// API, which are thread-safe.
unsafe impl Send for ReaperRef {}
// SAFETY: As for `Send`.
unsafe impl Sync for ReaperRef {}

impl ReaperRef {
    fn reaper(&self) -> &Reaper {
        // SAFETY: Live while `self` is (type invariant).
        unsafe { self.reaper.as_ref() }
    }

    fn queue(&self) -> &Queue {
        // SAFETY: The workqueue lives as long as the reaper, so as `self`.
        unsafe { Queue::from_raw(self.reaper().wq.as_ptr()) }
    }

    /// Runs `f` once on the reaper's workqueue: the caller's work that its
    /// teardown waits for (by [`ReaperRef::flush`], or the reaper's drop).
    pub fn spawn(&self, f: impl FnOnce() + Send + 'static) -> Result {
        self.queue().try_spawn(GFP_KERNEL, f).map_err(|_| ENOMEM)
    }

    /// Waits until every job and every destroy queued so far is done: every
    /// id dropped before the call is destroyed and its callbacks have
    /// returned. Must not be called from a CM callback (a queued destroy
    /// waits for it) or from a job.
    pub fn flush(&self) {
        self.reaper().flush();
    }

    /// Runs `f` later on the reaper's job queue, one job at a time in the
    /// order queued, in process context: for work a CM callback must not do
    /// itself. The IB CM runs every callback of every id on its own
    /// workqueue, one at a time per CPU (`alloc_workqueue("ib_cm", 0, 1)`):
    /// a callback that takes long (making a QP under a debug kernel) holds
    /// up every REQ, REP, RTU and timer event behind it, and the peers'
    /// timers run out. The reaper's drop waits for every job (it flushes,
    /// then destroys the queue), [`ReaperRef::flush`] too. `ENOMEM` if the
    /// job cannot be allocated.
    pub fn spawn_job(&self, f: impl FnOnce() + Send + 'static) -> Result {
        // SAFETY: `jobs` lives as long as the reaper, so as `self`.
        let queue = unsafe { Queue::from_raw(self.reaper().jobs.as_ptr()) };
        queue.try_spawn(GFP_KERNEL, f).map_err(|_| ENOMEM)
    }
}

impl Clone for ReaperRef {
    fn clone(&self) -> Self {
        *self.reaper().refs.lock() += 1;
        // INVARIANT: counted just above.
        Self {
            reaper: self.reaper,
        }
    }
}

impl Drop for ReaperRef {
    fn drop(&mut self) {
        let reaper = self.reaper();
        let mut refs = reaper.refs.lock();
        *refs -= 1;
        if *refs == 0 {
            reaper.unused.notify_all();
        }
        // The last use of the reaper: once the count is 0 and the lock free,
        // its drop may free it.
        drop(refs);
    }
}

/// The memory behind a [`CmId`]: the id, the consumer's data, and what the
/// callback trampoline needs to know.
/// A task inside one of an id's callbacks: a record on the trampoline's
/// stack, linked into the id's list ([`Inner::callbacks`]) for as long as
/// the callback runs.
struct CallbackRecord {
    task: *mut c_void,
    next: *mut CallbackRecord,
}

/// The head of an id's list of [`CallbackRecord`]s.
///
/// # Invariants
///
/// Every record reachable from the head is alive and not moved: it lives
/// in the frame of the `Adapter::own` call that linked it, which unlinks
/// it before it returns. The list is only read or changed under its lock.
struct CallbackList(*mut CallbackRecord);

// SAFETY: The records are only reached under the list's lock, from any task
// (each is unlinked by its own task before its frame ends).
unsafe impl Send for CallbackList {}

#[pin_data]
struct Inner<T: Handler> {
    id: AtomicPtr<bindings::ib_cm_id>,
    /// The device the id is on, held for as long as the id lives: the CM
    /// keeps using it (`cm_id->device`, down to `cm_destroy_id`), and the
    /// device's unregistration waits for this reference, so the id never
    /// outlives it, whatever the owner of the [`CmId`] holds.
    device: ARef<Device>,
    /// The tasks running one of this id's callbacks now (more than one at
    /// once: a `*_ERROR` callback comes from the MAD completion, beside
    /// the CM's workqueue). `dropped` is set under this lock, and a
    /// callback reads it under the lock before it enters the list, so a
    /// destroy that has set it and then seen the list empty is seen by
    /// every later callback. A spinlock: the last callback to leave wakes
    /// `idle` and unlocks, and then the memory may go.
    #[pin]
    callbacks: SpinLock<CallbackList>,
    /// Notified when the last task leaves `callbacks`.
    #[pin]
    idle: CondVar,
    /// The task running the REQ callback that accepted this id, while
    /// `in_req`; else null.
    req_task: AtomicPtr<c_void>,
    /// The tasks running a REQ callback for this (listening) id: the CM holds
    /// a reference on the listener until each returns, so destroying the
    /// listener there would wait for itself.
    #[pin]
    req_tasks: Mutex<KVec<usize>>,
    /// An accepted id still in the REQ callback that accepted it.
    in_req: AtomicBool,
    /// The [`CmId`] was dropped inside the REQ callback that accepted it:
    /// the trampoline rejects the REQ instead (the CM destroys the id).
    destroy_on_return: AtomicBool,
    /// The [`CmId`] is gone and the destroy queued: no more events are
    /// delivered, REQs are rejected. The CM holds no reference on the id
    /// while it delivers the `*_ERROR` events, so `ib_destroy_cm_id` does
    /// not wait for those: the destroy paths set this, then wait for
    /// `callbacks` to empty before `ib_destroy_cm_id` frees the id and
    /// again before they free this memory.
    dropped: AtomicBool,
    #[pin]
    work: Work<Inner<T>>,
    reaper: ReaperRef,
    data: T,
}

kernel::impl_has_work! {
    impl{T: Handler} HasWork<Inner<T>> for Inner<T> { self.work }
}

impl<T: Handler> Inner<T> {
    fn new(
        id: *mut bindings::ib_cm_id,
        device: &Device,
        in_req: bool,
        reaper: ReaperRef,
        data: T,
    ) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                id: AtomicPtr::new(id),
                device: device.into(),
                callbacks <- new_spinlock!(CallbackList(core::ptr::null_mut())),
                idle <- new_condvar!("cm::Inner::idle"),
                req_task: AtomicPtr::new(if in_req {
                    current_task()
                } else {
                    core::ptr::null_mut()
                }),
                req_tasks <- new_mutex!(KVec::new()),
                in_req: AtomicBool::new(in_req),
                destroy_on_return: AtomicBool::new(false),
                dropped: AtomicBool::new(false),
                work <- new_work!("cm::Inner::work"),
                reaper,
                data,
            }),
            GFP_KERNEL,
        )
    }

    /// Delivers no more events (`dropped`) and sleeps until no callback is
    /// inside the handler.
    fn stop_callbacks(&self) {
        let mut list = self.callbacks.lock();
        self.dropped.store(true, Ordering::Relaxed);
        while !list.0.is_null() {
            self.idle.wait(&mut list);
        }
    }

    /// Records that the running task is inside a callback of this id, unless
    /// the id is `dropped` (then `false`, and nothing is linked).
    ///
    /// # Safety
    ///
    /// `record` must be valid, not moved and not linked, until [`Inner::leave`]
    /// unlinks it, which the same caller must do before `record` goes.
    unsafe fn enter(&self, record: *mut CallbackRecord) -> bool {
        let mut list = self.callbacks.lock();
        if self.dropped.load(Ordering::Relaxed) {
            return false;
        }
        // SAFETY: The caller's record, valid and ours to change.
        unsafe { (*record).next = list.0 };
        // INVARIANT: valid until `leave` unlinks it (the caller's promise).
        list.0 = record;
        true
    }

    /// Unlinks a record [`Inner::enter`] linked, and wakes a destroy waiting
    /// for the last one. After this the caller must not use `self`: a
    /// destroy may free it.
    ///
    /// # Safety
    ///
    /// `record` must have been linked by `enter` and not unlinked since.
    unsafe fn leave(&self, record: *mut CallbackRecord) {
        let mut list = self.callbacks.lock();
        let mut link: *mut *mut CallbackRecord = &mut list.0;
        // SAFETY: `link` points at the head or at the `next` of a linked
        // record, all alive under the lock (type invariant of the list).
        unsafe {
            while !(*link).is_null() {
                if *link == record {
                    *link = (*record).next;
                    break;
                }
                link = &mut (**link).next;
            }
        }
        if list.0.is_null() {
            self.idle.notify_all();
        }
    }

    /// Whether `task` is inside one of this id's callbacks.
    fn in_callback(&self, task: *mut c_void) -> bool {
        let list = self.callbacks.lock();
        let mut p = list.0;
        while let Some(r) = NonNull::new(p) {
            // SAFETY: A linked record, alive under the lock (type invariant
            // of the list).
            let r = unsafe { r.as_ref() };
            if r.task == task {
                return true;
            }
            p = r.next;
        }
        false
    }

    /// Destroys the id, not from one of its callbacks, and releases the
    /// context's reference (`CmId`'s invariant), which the caller must not
    /// use afterwards.
    ///
    /// No callback reaches the handler once `dropped` is set; those already
    /// in it are waited for before `ib_destroy_cm_id`, as the CM does not
    /// hold the id for its `*_ERROR` callbacks: a handler may sleep and
    /// then use its id. `ib_destroy_cm_id` waits for the callbacks the CM
    /// holds; a `*_ERROR` callback that came in between saw `dropped`, and
    /// is waited for before this memory goes.
    fn destroy(&self) {
        self.stop_callbacks();
        let id = self.id.load(Ordering::Acquire);
        // SAFETY: The id is live (`CmId`'s invariant) and this is its only
        // destroy; we are not in one of its callbacks (the caller's
        // promise), so waiting for them ends.
        unsafe { bindings::ib_destroy_cm_id(id) };
        self.stop_callbacks();
        let ctx: *const Inner<T> = self;
        // SAFETY: The id's `context` reference (`CmId`'s invariant: `Arc::into_raw` gave this
        // address); the id is gone and no callback is inside the trampoline, so nothing uses
        // it any more.
        drop(unsafe { Arc::from_raw(ctx) });
    }

    /// Whether `task` is running a REQ callback of this listening id.
    fn in_req_callback(&self, task: *mut c_void) -> bool {
        self.req_tasks.lock().iter().any(|&t| t == task as usize)
    }
}

/// The deferred destroy of an id whose [`CmId`] was dropped in a callback.
impl<T: Handler> WorkItem for Inner<T> {
    type Pointer = Arc<Inner<T>>;

    fn run(this: Arc<Self>) {
        // The id is live: its `CmId` queued this destroy instead of
        // destroying it, and nothing else destroys it. We are not in one of
        // its callbacks (a work item of our own queue), so this waits for
        // them, the one that dropped the `CmId` included.
        this.destroy();
        // The last reference, usually: `data` and the `ReaperRef` go here,
        // and `Reaper::drop` waits for this work item to return.
        drop(this);
    }
}

/// The running task's address, only ever compared, never dereferenced.
fn current_task() -> *mut c_void {
    let task: *const Task = crate::current!();
    task.cast_mut().cast()
}

/// An owned `struct ib_cm_id` with the consumer's data `T`.
///
/// Dropping it destroys the id; which way depends on where:
///
/// - anywhere that may sleep, except the cases below: at once, waiting for
///   the id's callbacks in progress (the `*_ERROR` ones included, which the
///   CM does not hold the id for) before `ib_destroy_cm_id` frees the id;
/// - inside one of the id's own callbacks, or inside a REQ callback of the
///   id (a listener) while the CM holds the listener for it: waiting would
///   deadlock, so the destroy is queued on the caller's [`Reaper`] and runs
///   as soon as the callback has returned; no further event reaches `T`
///   (REQs to a listener are rejected);
/// - inside the REQ callback that accepted it ([`Request::accept`]): the
///   REQ is rejected as if never accepted (the CM destroys the id when the
///   callback returns, and sends a REJ).
///
/// [`CmId::destroy_deferred`] queues the destroy from anywhere, without
/// waiting.
///
/// It holds a reference on its device for as long as the id lives, as
/// [`super::verbs::RcQp`] does: the CM uses `cm_id->device` until the id is
/// destroyed, and a device's unregistration waits for its references
/// after its clients' `remove`. An owner that keeps a [`CmId`] past its
/// client's `remove` makes `rdma link del` wait for it, instead of
/// leaving the id on a freed device; a client destroys its ids in
/// `remove`.
///
/// # Invariants
///
/// `inner.id` is a live id whose handler is `Adapter::<T>::handler` and whose
/// `context` holds a reference on `inner` taken with [`Arc::into_raw`].
pub struct CmId<T: Handler> {
    inner: Arc<Inner<T>>,
    /// Queue the destroy whatever the context ([`CmId::destroy_deferred`]).
    deferred: bool,
}

impl<T: Handler> CmId<T> {
    /// Creates an id on `device` for an active connection or a listener;
    /// `reaper` destroys it if it is dropped in a callback.
    pub fn new(device: &Device, reaper: &ReaperRef, data: T) -> Result<Self> {
        let inner = Inner::new(core::ptr::null_mut(), device, false, reaper.clone(), data)?;
        let ctx = Arc::into_raw(inner.clone());
        // SAFETY: `device` is registered; `ctx` stays valid until the id is destroyed (`Drop`).
        // No callback runs before the id is used, so `id` is stored below in time.
        let id = unsafe {
            bindings::ib_create_cm_id(
                device.as_raw(),
                Some(Adapter::<T>::handler),
                ctx.cast_mut().cast(),
            )
        };
        match from_err_ptr(id) {
            Ok(id) => inner.id.store(id, Ordering::Release),
            Err(e) => {
                // SAFETY: The id was not created: `ctx` is unused.
                drop(unsafe { Arc::from_raw(ctx) });
                return Err(e);
            }
        }
        // INVARIANT: the id is live, with our handler and `ctx`.
        Ok(Self {
            inner,
            deferred: false,
        })
    }

    /// Destroys the id from the caller's [`Reaper`], never waiting here: for
    /// callers that hold a lock a callback of the id may need. The id gets
    /// no more events; [`ReaperRef::flush`] waits for the destroy.
    pub fn destroy_deferred(mut self) {
        self.deferred = true;
    }

    /// Queues the destroy on the reaper.
    fn defer(&self) {
        self.inner.dropped.store(true, Ordering::SeqCst);
        // The only enqueue of this work item: it cannot be queued already.
        if self
            .inner
            .reaper
            .queue()
            .enqueue(self.inner.clone())
            .is_err()
        {
            pr_err!("cm: an id's destroy was queued twice\n");
        }
    }
}

impl<T: Handler> Deref for CmId<T> {
    type Target = CmIdRef;

    fn deref(&self) -> &CmIdRef {
        // SAFETY: By the type invariant the id is live while `self` exists.
        unsafe { CmIdRef::from_raw(self.inner.id.load(Ordering::Acquire)) }
    }
}

impl<T: Handler> Drop for CmId<T> {
    fn drop(&mut self) {
        let me = current_task();
        if self.inner.in_req.load(Ordering::Acquire)
            && self.inner.req_task.load(Ordering::Acquire) == me
        {
            // The REQ callback that accepted it: un-accept, the CM destroys
            // the id when the callback returns and sends a REJ.
            self.inner.destroy_on_return.store(true, Ordering::Release);
            return;
        }
        if self.deferred || self.inner.in_callback(me) || self.inner.in_req_callback(me) {
            // One of its own callbacks (waiting for them would wait for
            // itself), or a listener inside one of its REQ callbacks (the CM
            // holds it until the callback returns).
            self.defer();
            return;
        }
        // Not in one of its callbacks: this waits for them, then frees the
        // id and releases the context's reference (type invariant).
        self.inner.destroy();
    }
}

/// A REQ for a listening id, lent to [`Handler::req_received`].
///
/// The new id it carries belongs to nobody until [`Request::accept`]: if the
/// handler does not accept it, the CM destroys it and sends a REJ.
pub struct Request<'a, T: Handler> {
    id: &'a CmIdRef,
    event: &'a bindings::ib_cm_event,
    listener: &'a Inner<T>,
    accepted: &'a Cell<Option<Arc<Inner<T>>>>,
}

impl<'a, T: Handler> Request<'a, T> {
    /// The new id, to reject the REQ with a private message.
    pub fn id(&self) -> &CmIdRef {
        self.id
    }

    fn param(&self) -> &bindings::ib_cm_req_event_param {
        // SAFETY: The event is a REQ_RECEIVED (checked by the trampoline), so
        // `req_rcvd` is the union's active member.
        unsafe { &self.event.param.req_rcvd }
    }

    /// The 92 bytes of the REQ's private data.
    pub fn private_data(&self) -> &[u8] {
        // SAFETY: For a REQ the CM points `private_data` at the MAD's field of
        // `REQ_PRIVATE_DATA_SIZE` bytes, alive during the callback.
        unsafe { event_private_data(self.event, REQ_PRIVATE_DATA_SIZE) }
    }

    /// Whether the REQ asks for a reliable connection (the transport type
    /// field says RC, not UC or XRC).
    pub fn is_rc(&self) -> bool {
        self.param().qp_type == bindings::ib_qp_type_IB_QPT_RC
    }

    /// The service id the REQ was sent to (host order).
    pub fn service_id(&self) -> u64 {
        // SAFETY: The new id is valid during its REQ callback; the CM set
        // `service_id` from the REQ before it delivered the event.
        u64::from_be(unsafe { (*self.id.as_raw()).service_id })
    }

    /// The initiator depth the peer asked for.
    pub fn initiator_depth(&self) -> u8 {
        self.param().initiator_depth
    }

    /// The responder resources the peer offers.
    pub fn responder_resources(&self) -> u8 {
        self.param().responder_resources
    }

    /// Takes the new id, with `data` as its data, and returns its owner.
    /// Dropped before the REQ callback returns, it rejects the REQ.
    pub fn accept(self, data: T) -> Result<CmId<T>> {
        // In this id's REQ callback already (`in_req`).
        let inner = Inner::new(
            self.id.as_raw(),
            self.id.device(),
            true,
            self.listener.reaper.clone(),
            data,
        )?;
        let ctx = Arc::into_raw(inner.clone());
        // SAFETY: The new id is valid in its REQ callback and events on one id are serialised:
        // nothing reads `context` until we return. From now on it holds our reference.
        unsafe { (*self.id.as_raw()).context = ctx.cast_mut().cast() };
        self.accepted.set(Some(inner.clone()));
        // INVARIANT: The id is live, has our handler (inherited from the
        // listener) and its context holds `ctx`.
        Ok(CmId {
            inner,
            deferred: false,
        })
    }
}

/// The private data of `event`, as a slice of the field's `size` bytes.
///
/// # Safety
///
/// `event.private_data` must be null or point to `size` bytes that stay
/// valid for `'a`.
unsafe fn event_private_data<'a>(event: &'a bindings::ib_cm_event, size: usize) -> &'a [u8] {
    match NonNull::new(event.private_data.cast::<u8>()) {
        None => &[],
        // SAFETY: The caller guarantees `size` valid bytes for `'a`.
        Some(p) => unsafe { core::slice::from_raw_parts(p.as_ptr(), size) },
    }
}

/// `enum ib_cm_event_type`, so that the trampoline's match is checked to be
/// exhaustive.
#[derive(Clone, Copy)]
enum EventType {
    ReqError,
    ReqReceived,
    RepError,
    RepReceived,
    RtuReceived,
    UserEstablished,
    DreqError,
    DreqReceived,
    DrepReceived,
    TimewaitExit,
    MraReceived,
    RejReceived,
    LapError,
    LapReceived,
    AprReceived,
    SidrReqError,
    SidrReqReceived,
    SidrRepReceived,
}

impl EventType {
    fn from_raw(e: bindings::ib_cm_event_type) -> Option<Self> {
        Some(match e {
            bindings::ib_cm_event_type_IB_CM_REQ_ERROR => Self::ReqError,
            bindings::ib_cm_event_type_IB_CM_REQ_RECEIVED => Self::ReqReceived,
            bindings::ib_cm_event_type_IB_CM_REP_ERROR => Self::RepError,
            bindings::ib_cm_event_type_IB_CM_REP_RECEIVED => Self::RepReceived,
            bindings::ib_cm_event_type_IB_CM_RTU_RECEIVED => Self::RtuReceived,
            bindings::ib_cm_event_type_IB_CM_USER_ESTABLISHED => Self::UserEstablished,
            bindings::ib_cm_event_type_IB_CM_DREQ_ERROR => Self::DreqError,
            bindings::ib_cm_event_type_IB_CM_DREQ_RECEIVED => Self::DreqReceived,
            bindings::ib_cm_event_type_IB_CM_DREP_RECEIVED => Self::DrepReceived,
            bindings::ib_cm_event_type_IB_CM_TIMEWAIT_EXIT => Self::TimewaitExit,
            bindings::ib_cm_event_type_IB_CM_MRA_RECEIVED => Self::MraReceived,
            bindings::ib_cm_event_type_IB_CM_REJ_RECEIVED => Self::RejReceived,
            bindings::ib_cm_event_type_IB_CM_LAP_ERROR => Self::LapError,
            bindings::ib_cm_event_type_IB_CM_LAP_RECEIVED => Self::LapReceived,
            bindings::ib_cm_event_type_IB_CM_APR_RECEIVED => Self::AprReceived,
            bindings::ib_cm_event_type_IB_CM_SIDR_REQ_ERROR => Self::SidrReqError,
            bindings::ib_cm_event_type_IB_CM_SIDR_REQ_RECEIVED => Self::SidrReqReceived,
            bindings::ib_cm_event_type_IB_CM_SIDR_REP_RECEIVED => Self::SidrRepReceived,
            _ => return None,
        })
    }
}

struct Adapter<T: Handler>(PhantomData<T>);

impl<T: Handler> Adapter<T> {
    /// The `ib_cm_handler` of every id made here.
    ///
    /// # Safety
    ///
    /// Called by the CM with a live id whose context is an `Inner<T>` (a
    /// REQ's or SIDR REQ's new id: the listener's) and an event valid during
    /// the call.
    unsafe extern "C" fn handler(
        cm_id: *mut bindings::ib_cm_id,
        event: *const bindings::ib_cm_event,
    ) -> c_int {
        // SAFETY: The CM passes a valid event for the duration of the call.
        let event = unsafe { &*event };
        // SAFETY: The id is valid during its callback.
        let id = unsafe { CmIdRef::from_raw(cm_id) };
        // SAFETY: Every id with this handler has an `Inner<T>` context holding a reference (a
        // REQ's new id: the listener's, which the CM keeps alive while it delivers the REQ).
        let ctx = unsafe { (*cm_id).context }.cast::<Inner<T>>().cast_const();

        // What the CM does with our return value, per event (cm.c, 6.12):
        // for events delivered through `cm_process_work` a non-zero return
        // destroys the id right after the handler; for the `*_ERROR` events
        // (`cm_process_send_error`) the same, but from the MAD completion and
        // with no reference of the CM's held during the call. Nothing here
        // returns non-zero on an id we own: destroys go through the `Reaper`
        // (see `CmId`), where unload can wait for them.
        let Some(kind) = EventType::from_raw(event.event) else {
            // Not an event 6.12 has: the id's owner keeps it, nothing is done.
            return 0;
        };
        match kind {
            // A new id for a REQ to a listener, context the listener's; the
            // CM holds both until we return. Non-zero: the CM destroys the
            // new id and sends a REJ (or, for -ENOMEM, forgets the REQ so
            // that the peer's retry can succeed). Zero: `Request::accept`
            // made us its owner.
            EventType::ReqReceived => {
                // SAFETY: The listener, alive while the CM holds it for us.
                Self::req(unsafe { &*ctx }, id, event)
            }
            // A new id for a SIDR REQ (UD service resolution) to a listener,
            // context the listener's, the listener held until we return.
            // The listener's handler may answer it; then non-zero: the CM
            // destroys it (`cm_destroy_id`: in SIDR_REQ_RCVD, unanswered, with
            // a SIDR REP of status IB_SIDR_REJECT; answered, it is idle and
            // only freed). Zero would leave the id to nobody.
            EventType::SidrReqReceived => {
                // SAFETY: The listener, alive while the CM holds it for us.
                Self::sidr_req(unsafe { &*ctx }, id, event)
            }
            // Events on an id we own (our context), the CM holding a
            // reference during the call. Zero: the id stays ours.
            EventType::RepReceived
            | EventType::RtuReceived
            | EventType::UserEstablished
            | EventType::RejReceived
            | EventType::DreqReceived
            | EventType::DrepReceived
            | EventType::TimewaitExit
            // The MRA has already stretched the CM's timer; LAP and APR
            // (path migration) are not used: a LAP is left unanswered and
            // the connection keeps its path; an APR answers a LAP we never
            // send. A SIDR REP answers a SIDR REQ we never send.
            | EventType::MraReceived
            | EventType::LapReceived
            | EventType::AprReceived
            | EventType::SidrRepReceived
            // Our REQ, REP or DREQ got no answer (the id is idle, or in
            // timewait for the DREQ). SIDR_REQ_ERROR answers a SIDR REQ we
            // never send; 6.12's CM never delivers LAP_ERROR.
            | EventType::ReqError
            | EventType::RepError
            | EventType::DreqError
            | EventType::SidrReqError
            | EventType::LapError => {
                // SAFETY: Our own id's context, which its reference keeps
                // alive until the id is destroyed, after this callback.
                Self::own(unsafe { &*ctx }, id, event, kind)
            }
        }
    }

    /// An event on an id we own.
    fn own(
        inner: &Inner<T>,
        id: &CmIdRef,
        event: &bindings::ib_cm_event,
        kind: EventType,
    ) -> c_int {
        let mut record = CallbackRecord {
            task: current_task(),
            next: core::ptr::null_mut(),
        };
        let record: *mut CallbackRecord = &mut record;
        // Under the list's lock with the destroy's `dropped`: either the
        // destroy sees this callback linked and waits for it before
        // `ib_destroy_cm_id`, or this callback sees `dropped` and leaves the
        // id alone (its owner is gone and its destroy under way: the destroy
        // answers what needs an answer, REJ or DREP).
        //
        // SAFETY: `record` lives in this frame, is not moved, and is
        // unlinked below before the frame ends.
        if unsafe { inner.enter(record) } {
            Self::dispatch(&inner.data, id, event, kind);
            // SAFETY: Linked above by this same task. The last access to
            // `inner`: a destroy waits for this.
            unsafe { inner.leave(record) };
        }
        0
    }

    /// Runs `f` as a REQ or SIDR REQ callback of `listener`: recorded, so
    /// that dropping the listener in there is seen (`CmId`). `ENOMEM` if
    /// it cannot be recorded.
    fn as_req_task<R>(listener: &Inner<T>, f: impl FnOnce() -> R) -> Result<R> {
        let me = current_task() as usize;
        listener.req_tasks.lock().push(me, GFP_KERNEL)?;
        let ret = f();
        let mut tasks = listener.req_tasks.lock();
        if let Some(i) = tasks.iter().position(|&t| t == me) {
            let last = tasks.len() - 1;
            tasks.swap(i, last);
            // SAFETY: Shortens the vector by one: the element dropped is a
            // `usize` (nothing to drop) and the others stay initialised.
            unsafe { tasks.set_len(last) };
        }
        Ok(ret)
    }

    /// A SIDR REQ on a listener's new id: the listener's handler may answer.
    fn sidr_req(listener: &Inner<T>, id: &CmIdRef, event: &bindings::ib_cm_event) -> c_int {
        if T::HAS_SIDR_REQ_RECEIVED && !listener.dropped.load(Ordering::Acquire) {
            let req = SidrRequest { id, event };
            // Unrecorded (`ENOMEM`), the REQ goes unanswered: the CM rejects it.
            let _ = Self::as_req_task(listener, || listener.data.sidr_req_received(req));
        }
        // The CM destroys the id, which is never the consumer's.
        EINVAL.to_errno()
    }

    /// A REQ on a listener's new id: the listener's handler decides.
    fn req(listener: &Inner<T>, id: &CmIdRef, event: &bindings::ib_cm_event) -> c_int {
        if !T::HAS_REQ_RECEIVED || listener.dropped.load(Ordering::Acquire) {
            return EINVAL.to_errno();
        }
        let accepted = Cell::new(None);
        let req = Request {
            id,
            event,
            listener,
            accepted: &accepted,
        };
        let Ok(ret) = Self::as_req_task(listener, || listener.data.req_received(req)) else {
            // The CM forgets the REQ without a REJ: the peer retries.
            return ENOMEM.to_errno();
        };
        match accepted.take() {
            // Not accepted: the CM destroys the new id and sends a REJ.
            None => ret.err().unwrap_or(EINVAL).to_errno(),
            Some(inner) => {
                inner
                    .req_task
                    .store(core::ptr::null_mut(), Ordering::Release);
                inner.in_req.store(false, Ordering::Release);
                let ctx: *const Inner<T> = &*inner;
                drop(inner);
                Self::finish(ctx, ret)
            }
        }
    }

    /// The end of the REQ callback of an accepted id: if its owner was
    /// dropped during the callback, the CM destroys the id, told the
    /// handler's errno (`ret`): `-ENOMEM` while the id is still `REQ_RCVD`
    /// sends no REJ (the peer retries), anything else, or any errno once an
    /// MRA moved it to `MRA_REQ_SENT`, a REJ (`cm_destroy_id`).
    fn finish(ctx: *const Inner<T>, ret: Result) -> c_int {
        // SAFETY: `ctx` is the id's context, alive until we release it here.
        if !unsafe { &*ctx }.destroy_on_return.load(Ordering::Acquire) {
            return 0;
        }
        // SAFETY: `ctx` is the id's context, alive until released below.
        let inner = unsafe { &*ctx };
        // A REP sent from the REQ callback may have timed out meanwhile:
        // its `REP_ERROR` callback (not held by the CM) is waited for, and
        // none reaches the handler from here on.
        inner.stop_callbacks();
        // SAFETY: The context's reference: the owner is gone and the CM
        // destroys the id without further callbacks when we return non-zero,
        // inside `cm_req_handler`, before it lets go of the listener.
        drop(unsafe { Arc::from_raw(ctx) });
        ret.err().unwrap_or(EINVAL).to_errno()
    }

    fn dispatch(data: &T, id: &CmIdRef, event: &bindings::ib_cm_event, kind: EventType) {
        match kind {
            EventType::RepReceived => {
                // SAFETY: `rep_rcvd` is the member the CM fills for a REP.
                let qpn = unsafe { event.param.rep_rcvd.remote_qpn };
                data.rep_received(id, qpn)
            }
            EventType::RtuReceived | EventType::UserEstablished => data.established(id),
            EventType::RejReceived => {
                // SAFETY: `rej_rcvd` is the member the CM fills for a REJ.
                let reason = RejReason::from_raw(unsafe { event.param.rej_rcvd.reason });
                // SAFETY: A received REJ's private data is its MAD's field of
                // `REJ_PRIVATE_DATA_SIZE` bytes, alive during the callback.
                let pd = unsafe { event_private_data(event, REJ_PRIVATE_DATA_SIZE) };
                data.rej_received(id, reason, pd)
            }
            EventType::DreqReceived => {
                // SAFETY: As for the REJ, with the DREQ's field size.
                let pd = unsafe { event_private_data(event, DREQ_PRIVATE_DATA_SIZE) };
                data.dreq_received(id, pd)
            }
            EventType::DrepReceived => {
                // SAFETY: As for the REJ, with the DREP's field size.
                let pd = unsafe { event_private_data(event, DREP_PRIVATE_DATA_SIZE) };
                data.drep_received(id, pd)
            }
            EventType::DreqError => {
                // SAFETY: `send_status` is the member the CM fills for errors.
                let status = WcStatus::from_raw(unsafe { event.param.send_status });
                data.dreq_error(id, status)
            }
            EventType::ReqError | EventType::RepError => {
                // SAFETY: As for DREQ_ERROR.
                let status = WcStatus::from_raw(unsafe { event.param.send_status });
                data.connect_error(id, status)
            }
            EventType::TimewaitExit => data.timewait_exit(id),
            // Not delivered to the consumer: see `handler`.
            EventType::MraReceived
            | EventType::LapReceived
            | EventType::AprReceived
            | EventType::SidrRepReceived
            | EventType::SidrReqError
            | EventType::LapError
            | EventType::ReqReceived
            | EventType::SidrReqReceived => {}
        }
    }
}
