// SPDX-License-Identifier: GPL-2.0

//! The consumer's side of the CM's callbacks: the [`Handler`] trait, the
//! REQ lent to it ([`Request`]), and the one `ib_cm_handler` of every id
//! (`Adapter::handler`), which matches every event type the CM has and says
//! what the CM does with its return value.

use super::{
    enums::RejReason,
    id::{current_task, CmId, CmIdRef, Inner},
    msg::{Message, DREP_PRIVATE_DATA_SIZE, DREQ_PRIVATE_DATA_SIZE},
};
use crate::{bindings, ffi::c_int, prelude::*, rdma::verbs::WcStatus, sync::Arc};
use core::{cell::Cell, marker::PhantomData, ptr::NonNull, sync::atomic::Ordering};

/// What the CM tells the owner of an id. Every method has a default that
/// ignores the event; a listener implements [`Handler::req_received`].
///
/// Handlers run in process context and may sleep, in the CM's workqueue or
/// (the `*_error` events) the MAD layer's completion or timeout work, so
/// two may run at once. The `&CmIdRef` a handler gets stays valid until it returns: a
/// destroy waits for it. A handler may drop any [`CmId`] (see [`CmId`]).
#[vtable]
pub trait Handler: Sized + Send + Sync + 'static {
    /// A REQ for a listening id: accept it with [`Request::accept`] (and send
    /// a REP), or return an error (or drop the request) to reject it
    /// (`ENOMEM`: no REJ while `REQ_RCVD`, the peer retries). Long work
    /// (making the QP) belongs on a queue of the caller's, after
    /// [`CmIdRef::prepare_mra`] here: the CM runs one callback at a time per
    /// CPU for the whole host.
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
}

/// A REQ for a listening id, lent to [`Handler::req_received`]. Its new id
/// is nobody's until [`Request::accept`]; if not accepted, the CM destroys
/// it and sends a REJ.
pub struct Request<'a, T: Handler> {
    id: &'a CmIdRef,
    event: &'a bindings::ib_cm_event,
    listener: &'a Inner<T>,
    accepted: &'a Cell<Option<Arc<Inner<T>>>>,
}

impl<'a, T: Handler> Request<'a, T> {
    /// The device the REQ arrived on. No message can be sent on the id before
    /// [`Request::accept`]: its failure would reach the listener's handler.
    pub fn device(&self) -> &crate::rdma::device::Device {
        self.id.device()
    }

    /// The new id's local communication id (host order).
    pub fn local_id(&self) -> u32 {
        self.id.local_id()
    }

    /// Rejects the REQ with a REJ carrying `data` (at most 148 bytes, else
    /// `EINVAL`, nothing sent, and the CM sends its own REJ). The handler
    /// then returns an error: the CM destroys the id, sending no second REJ.
    pub fn reject(self, data: &[u8]) -> Result {
        self.id.send_rej(data)
    }

    fn param(&self) -> &bindings::ib_cm_req_event_param {
        // SAFETY: The event is a REQ_RECEIVED (checked by the trampoline), so
        // `req_rcvd` is the union's active member.
        unsafe { &self.event.param.req_rcvd }
    }

    /// The 92 bytes of the REQ's private data.
    pub fn private_data(&self) -> &[u8] {
        // SAFETY: For a REQ the CM points `private_data` at the MAD's field of
        // `Message::Req`'s size, alive during the callback.
        unsafe { event_private_data(self.event, Message::Req.private_data_size()) }
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
    /// Dropped before the REQ callback returns and before anything was sent
    /// on it, it rejects the REQ (see [`CmId`]).
    pub fn accept(self, data: T) -> Result<CmId<T>> {
        let inner = Inner::new(
            self.id.as_raw(),
            self.id.device(),
            current_task(),
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

crate::rdma_raw_enum! {
    /// `enum ib_cm_event_type`, so that the events' match is exhaustive.
    enum EventType: u32, "ib_cm_event_type_IB_CM_" {
        ReqError = ib_cm_event_type_IB_CM_REQ_ERROR,
        ReqReceived = ib_cm_event_type_IB_CM_REQ_RECEIVED,
        RepError = ib_cm_event_type_IB_CM_REP_ERROR,
        RepReceived = ib_cm_event_type_IB_CM_REP_RECEIVED,
        RtuReceived = ib_cm_event_type_IB_CM_RTU_RECEIVED,
        UserEstablished = ib_cm_event_type_IB_CM_USER_ESTABLISHED,
        DreqError = ib_cm_event_type_IB_CM_DREQ_ERROR,
        DreqReceived = ib_cm_event_type_IB_CM_DREQ_RECEIVED,
        DrepReceived = ib_cm_event_type_IB_CM_DREP_RECEIVED,
        TimewaitExit = ib_cm_event_type_IB_CM_TIMEWAIT_EXIT,
        MraReceived = ib_cm_event_type_IB_CM_MRA_RECEIVED,
        RejReceived = ib_cm_event_type_IB_CM_REJ_RECEIVED,
        LapError = ib_cm_event_type_IB_CM_LAP_ERROR,
        LapReceived = ib_cm_event_type_IB_CM_LAP_RECEIVED,
        AprReceived = ib_cm_event_type_IB_CM_APR_RECEIVED,
        SidrReqError = ib_cm_event_type_IB_CM_SIDR_REQ_ERROR,
        SidrReqReceived = ib_cm_event_type_IB_CM_SIDR_REQ_RECEIVED,
        SidrRepReceived = ib_cm_event_type_IB_CM_SIDR_REP_RECEIVED,
    }
    Unknown
}

pub(super) struct Adapter<T: Handler>(PhantomData<T>);

impl<T: Handler> Adapter<T> {
    /// The `ib_cm_handler` of every id made here.
    ///
    /// # Safety
    ///
    /// Called by the CM with a live id whose context is an `Inner<T>` (a
    /// REQ's new id: the listener's) and an event valid during the call.
    pub(super) unsafe extern "C" fn handler(
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

        // A non-zero return makes the CM destroy the id after the handler
        // (`cm_process_work`, `cm_sidr_req_handler`, `cm_process_send_error`
        // for the `*_ERROR` events), which holds it during the call.
        match EventType::from_raw(event.event) {
            // A listener's new id, the listener's context, both held until we
            // return. Non-zero: the CM destroys the new id with a REJ (none
            // for -ENOMEM, so the peer's retry can succeed). Zero: accepted.
            EventType::ReqReceived => {
                // SAFETY: The listener, alive while the CM holds it for us.
                Self::req(unsafe { &*ctx }, id, event)
            }
            // A listener's new id for a SIDR REQ (UD service id resolution,
            // which this API does not serve). Non-zero: the CM destroys it,
            // answering with a SIDR REP of status REJECT.
            EventType::SidrReqReceived => EINVAL.to_errno(),
            // An id we own. Zero: it stays ours; its destroy goes through its
            // queue (see `CmId`), where unload can wait for it. Once the owner
            // is gone, its destroy answers what needs an answer (REJ, DREP);
            // a destroy that sets `dropped` after this read waits for this
            // callback in `ib_destroy_cm_id`.
            kind => {
                // SAFETY: Our own id's context, which its reference keeps
                // alive until the id is destroyed, after this callback.
                let inner = unsafe { &*ctx };
                if !inner.dropped.load(Ordering::Acquire) {
                    Self::dispatch(&inner.data, id, event, kind);
                }
                0
            }
        }
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
        let ret = listener.data.req_received(req);
        let Some(inner) = accepted.take() else {
            // Not accepted: the CM destroys the new id and sends a REJ.
            return ret.err().unwrap_or(EINVAL).to_errno();
        };
        let null = core::ptr::null_mut();
        inner.req_task.store(null, Ordering::Release);
        if !inner.destroy_on_return.load(Ordering::Acquire) {
            return 0;
        }
        // Its owner was dropped in this callback: the CM destroys the id,
        // told the handler's errno (`-ENOMEM` sends no REJ).
        let ctx: *const Inner<T> = &*inner;
        drop(inner);
        // SAFETY: The context's reference: the owner is gone, and the CM
        // destroys the id when we return non-zero (`cm_process_work`), with
        // no callback in between or after: the id was dropped in `REQ_RCVD`
        // (`CmId::drop`), so it sent nothing that could fail, and a REQ's id
        // gets no other event before its handler returned.
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
                // `Message::Rej`'s size, alive during the callback.
                let pd = unsafe { event_private_data(event, Message::Rej.private_data_size()) };
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
            // The MRA has already stretched the CM's timer. A LAP (path
            // migration) is left unanswered and the connection keeps its
            // path. An APR, a SIDR REP and their errors answer what we never
            // send; 6.12's CM never delivers LAP_ERROR. Handled by `handler`:
            // REQ, SIDR REQ. Unknown: not an event of these kernels.
            EventType::MraReceived
            | EventType::LapReceived
            | EventType::AprReceived
            | EventType::SidrRepReceived
            | EventType::SidrReqError
            | EventType::LapError
            | EventType::ReqReceived
            | EventType::SidrReqReceived
            | EventType::Unknown(_) => {}
        }
    }
}
