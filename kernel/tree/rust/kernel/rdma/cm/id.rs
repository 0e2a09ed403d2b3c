// SPDX-License-Identifier: GPL-2.0

//! The ids: [`CmIdRef`], an id borrowed (what can be done with one), and
//! [`CmId`], an owned id with the consumer's data, and its destroy.

use super::{
    enums::State,
    handler::Adapter,
    msg::{Message, Rep, Req},
    Handler,
};
use crate::{
    bindings,
    error::{from_err_ptr, to_result},
    ffi::{c_int, c_void},
    prelude::*,
    rdma::{
        device::Device,
        verbs::{QpAttr, QpState},
    },
    str::CStr,
    sync::aref::ARef,
    sync::Arc,
    types::Opaque,
    workqueue::{QueueRef, Work, WorkItem},
};
use core::{
    ops::Deref,
    sync::atomic::{AtomicBool, AtomicPtr, Ordering},
};

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
    /// Creates a reference to a [`CmIdRef`] from a raw pointer.
    ///
    /// # Safety
    ///
    /// `ptr` must be a valid `struct ib_cm_id` that is not destroyed during
    /// `'a`.
    pub(super) unsafe fn from_raw<'a>(ptr: *mut bindings::ib_cm_id) -> &'a Self {
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
        // SAFETY: The id is valid (type invariant) and its device outlives it: every id is
        // owned by a `CmId` (a REQ's new id: the listener's during its callback), which holds a
        // reference on the device (`Inner::device`) until the id is destroyed, and the
        // unregistration of a device waits for its references.
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
        let mut path = *req.route.path_record().as_raw();
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
    /// [`RejReason::ConsumerDefined`](super::RejReason::ConsumerDefined) and
    /// `data` (at most 148 bytes).
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

    /// Tells the peer that our answer will take a while
    /// (`ib_prepare_cm_mra()`): the CM answers each retransmission of the
    /// message received with an MRA, which gives the peer's CM about 68 s
    /// more per retry. Nothing is sent now. Legal in `REQ_RCVD` (after
    /// [`Request::accept`](super::Request::accept)), `REP_RCVD` and
    /// `ESTABLISHED` with a LAP received; `EINVAL` elsewhere.
    pub fn prepare_mra(&self) -> Result {
        // SAFETY: By the type invariant the id is valid.
        to_result(unsafe { bindings::ib_prepare_cm_mra(self.as_raw()) })
    }

    /// Sends a disconnection request carrying `data` (at most
    /// [`DREQ_PRIVATE_DATA_SIZE`](super::DREQ_PRIVATE_DATA_SIZE) bytes, else
    /// `EINVAL` and nothing is sent). Otherwise the CM's answer: `EINVAL`
    /// unless `ESTABLISHED`, `ENOMEM` or a MAD error (the id then enters
    /// timewait). Callable with a spinlock held or interrupts disabled, not
    /// from interrupt context.
    pub fn send_dreq(&self, data: &[u8]) -> Result {
        let (ptr, len) = Message::Dreq.raw(data)?;
        // SAFETY: By the type invariant the id is valid; `ptr` is NULL or
        // valid for `len` bytes, which the CM copies into the MAD.
        to_result(unsafe { bindings::ib_send_cm_dreq(self.as_raw(), ptr, len) })
    }

    /// Answers the peer's DREQ with a DREP carrying `data` (at most
    /// [`DREP_PRIVATE_DATA_SIZE`](super::DREP_PRIVATE_DATA_SIZE) bytes, else
    /// `EINVAL`); `EINVAL` from the CM unless `DREQ_RCVD`. May sleep.
    pub fn send_drep(&self, data: &[u8]) -> Result {
        let (ptr, len) = Message::Drep.raw(data)?;
        // SAFETY: As in `send_dreq`.
        to_result(unsafe { bindings::ib_send_cm_drep(self.as_raw(), ptr, len) })
    }

    /// The QP attributes for moving the connection's QP to `state`, as
    /// `ib_cm_init_qp_attr` computes them. They hold the GID entry of their
    /// address vector, so they may be applied after the id is gone; `EAGAIN`
    /// or a GID table error as [`QpAttr::from_cm`] says.
    pub fn init_qp_attr(&self, state: QpState) -> Result<QpAttr> {
        let mut attr = bindings::ib_qp_attr {
            qp_state: state.to_raw(),
            ..Default::default()
        };
        let mut mask: c_int = 0;
        // SAFETY: By the type invariant the id is valid; `attr` and `mask` are
        // valid for writes.
        to_result(unsafe { bindings::ib_cm_init_qp_attr(self.as_raw(), &mut attr, &mut mask) })?;
        QpAttr::from_cm(self.device(), attr, mask)
    }
}

/// The memory behind a [`CmId`]: the id, the consumer's data, and what the
/// callback trampoline needs to know.
#[pin_data]
pub(super) struct Inner<T: Handler> {
    pub(super) id: AtomicPtr<bindings::ib_cm_id>,
    /// The id's device, held while the id lives (the CM uses it down to
    /// `cm_destroy_id`); its unregistration waits for this reference.
    pub(super) device: ARef<Device>,
    /// The task running the REQ callback that accepted this id, until it
    /// returns; else null.
    pub(super) req_task: AtomicPtr<c_void>,
    /// The [`CmId`] was dropped in `REQ_RCVD` inside that callback: the
    /// trampoline rejects the REQ instead (the CM destroys the id).
    pub(super) destroy_on_return: AtomicBool,
    /// The [`CmId`] is gone: no more events reach the handler. A callback
    /// that read it before runs to its end, and `ib_destroy_cm_id` waits for
    /// it: the CM holds the id for every handler it calls.
    pub(super) dropped: AtomicBool,
    #[pin]
    pub(super) work: Work<Inner<T>>,
    pub(super) reaper: QueueRef,
    pub(super) data: T,
}

kernel::impl_has_work! {
    impl{T: Handler} HasWork<Inner<T>> for Inner<T> { self.work }
}

/// The lockdep name of `Inner`'s work, made in this crate alone
/// (`inline(never)`) so that its one key (a static in `Inner::new`, shared
/// by every `T`) has one name whichever module instantiates `Inner<T>`, and
/// no name left in an unloaded module's memory.
#[inline(never)]
fn work_name() -> &'static CStr {
    crate::c_str!("cm::Inner::work")
}

impl<T: Handler> Inner<T> {
    pub(super) fn new(
        id: *mut bindings::ib_cm_id,
        device: &Device,
        req_task: *mut c_void,
        reaper: QueueRef,
        data: T,
    ) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                id: AtomicPtr::new(id),
                device: device.into(),
                req_task: AtomicPtr::new(req_task),
                destroy_on_return: AtomicBool::new(false),
                dropped: AtomicBool::new(false),
                work <- Work::new(work_name(), crate::static_lock_class!()),
                reaper,
                data,
            }),
            GFP_KERNEL,
        )
    }

    /// Destroys the id, not from one of its callbacks, waiting for them (see
    /// `dropped`), and releases the context's reference (`CmId`'s
    /// invariant), which the caller must not use afterwards.
    pub(super) fn destroy(&self) {
        self.dropped.store(true, Ordering::Release);
        let id = self.id.load(Ordering::Acquire);
        // SAFETY: The id is live (`CmId`'s invariant) and this is its only
        // destroy; we are not in one of its callbacks (the caller's
        // promise), so waiting for them ends.
        unsafe { bindings::ib_destroy_cm_id(id) };
        let ctx: *const Inner<T> = self;
        // SAFETY: The id's `context` reference (`CmId`'s invariant: `Arc::into_raw` gave this
        // address); the id is gone and no callback is inside the trampoline, so nothing uses
        // it any more.
        drop(unsafe { Arc::from_raw(ctx) });
    }
}

/// The deferred destroy of an id whose [`CmId`] was dropped in a callback.
impl<T: Handler> WorkItem for Inner<T> {
    type Pointer = Arc<Inner<T>>;

    fn run(this: Arc<Self>) {
        // The id is live: its `CmId` queued this instead of destroying it.
        // We are not in one of its callbacks (a work item of our own queue),
        // so this waits for them, the one that dropped the `CmId` included.
        this.destroy();
        // Usually the last reference: `data` and the `QueueRef` go here.
        drop(this);
    }
}

/// Whether the running task is a workqueue worker running a work item, as
/// every task that runs a CM handler is (the CM's and the MAD layer's).
fn in_worker() -> bool {
    // SAFETY: No precondition: it reads the running task's worker.
    !unsafe { bindings::current_work() }.is_null()
}

/// The running task's address, only ever compared, never dereferenced.
pub(super) fn current_task() -> *mut c_void {
    crate::current!().as_ptr().cast()
}

/// An owned `struct ib_cm_id` with the consumer's data `T`.
///
/// Dropping it destroys the id, waiting for its callbacks; in any workqueue
/// worker (every callback runs in one) the destroy is queued on the id's
/// [`QueueRef`] instead, and no further event reaches `T`. Dropped in the
/// REQ callback that accepted it, before anything was sent on it, the REQ
/// is rejected as if never accepted. It holds its device: a client destroys
/// its ids in `remove` and flushes their queue, else `rdma link del` waits.
///
/// # Invariants
///
/// `inner.id` is a live id whose handler is `Adapter::<T>::handler` and whose
/// `context` holds a reference on `inner` taken with [`Arc::into_raw`].
pub struct CmId<T: Handler> {
    pub(super) inner: Arc<Inner<T>>,
    /// Queue the destroy whatever the context ([`CmId::destroy_deferred`]).
    pub(super) deferred: bool,
}

impl<T: Handler> CmId<T> {
    /// Creates an id on `device` for an active connection or a listener;
    /// `reaper` destroys it if it is dropped in a callback (or in a worker).
    pub fn new(device: &Device, reaper: &QueueRef, data: T) -> Result<Self> {
        let (id, task) = (core::ptr::null_mut(), core::ptr::null_mut());
        let inner = Inner::new(id, device, task, reaper.clone(), data)?;
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

    /// The consumer's data: the handler whose callbacks the id's events run,
    /// for what the owner keeps in it (a connection's QP, say).
    pub fn data(&self) -> &T {
        &self.inner.data
    }

    /// Destroys the id from its queue, never waiting here (for callers that
    /// hold a lock its callbacks may need); [`QueueRef::flush`] waits for it.
    pub fn destroy_deferred(mut self) {
        self.deferred = true;
    }

    /// Queues the destroy on the id's queue.
    fn defer(&self) {
        // No event reaches the handler from here on; one that read the flag
        // before runs to its end, and the queued destroy waits for it.
        self.inner.dropped.store(true, Ordering::Release);
        let queue = self.inner.reaper.queue();
        // The only enqueue of this work item: it cannot be queued already.
        if queue.enqueue(self.inner.clone()).is_err() {
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
        if self.inner.req_task.load(Ordering::Acquire) == current_task() {
            // The REQ callback that accepted it. Nothing sent yet: un-accept,
            // the CM destroys the id when the callback returns. Once a REP or
            // an MRA went out, its failure may reach the handler from the MAD
            // completion at any time before the destroy, so the context must
            // outlive it: the destroy is deferred like any other.
            if self.state() == State::ReqRcvd {
                self.inner.destroy_on_return.store(true, Ordering::Release);
            } else {
                self.defer();
            }
            return;
        }
        if self.deferred || in_worker() {
            // A worker may run one of the id's own callbacks (waiting would
            // wait for itself) or another id's, which this one's may wait
            // for or be queued behind.
            self.defer();
            return;
        }
        // Not in one of its callbacks: this waits for them, then frees the
        // id and releases the context's reference (type invariant).
        self.inner.destroy();
    }
}
