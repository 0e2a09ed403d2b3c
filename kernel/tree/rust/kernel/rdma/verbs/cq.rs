// SPDX-License-Identifier: GPL-2.0

//! [`Cq`]: a completion queue from `ib_alloc_cq()`, polled by the RDMA
//! core on its workqueue, which hands each completion to its request's
//! `ib_cqe`. Completions wait in the CQ's ring until its QP's user takes
//! them ([`RcQp::poll_one`](super::RcQp::poll_one)); a waker the user sets
//! ([`Cq::set_waker`]) is called for each.

use crate::{
    bindings, new_condvar, new_mutex,
    prelude::*,
    rdma::device::Device,
    str::CStr,
    sync::{Arc, CondVar, CondVarTimeoutResult, Mutex},
    time::msecs_to_jiffies,
};
use core::ptr::NonNull;

/// What the CQ's handler hands to the user for a completion: the request's
/// slot in the QP's table, its status and byte count.
#[derive(Clone, Copy, Default)]
pub(super) struct Done {
    pub(super) slot: u32,
    pub(super) status: u32,
    pub(super) byte_len: u32,
}

/// The user's waker: called once per completion, in the CQ's work (process
/// context, the RDMA core's `ib_comp_wq`).
pub type Waker = Arc<dyn Fn() + Send + Sync>;

/// The completions not yet taken, oldest first, in a ring of one entry per
/// slot of the QP's table.
///
/// # Invariants
///
/// `head < buf.len()` (or `buf` is empty) and `len <= buf.len()`.
pub(super) struct Ring {
    buf: KVec<Done>,
    head: usize,
    len: usize,
    waker: Option<Waker>,
}

impl Ring {
    fn push(&mut self, d: Done) -> bool {
        let cap = self.buf.len();
        if self.len == cap {
            return false;
        }
        let i = (self.head + self.len) % cap;
        self.buf[i] = d;
        // INVARIANT: `len < cap` before.
        self.len += 1;
        true
    }

    fn pop(&mut self) -> Option<Done> {
        if self.len == 0 {
            return None;
        }
        let d = self.buf[self.head];
        // INVARIANT: `len > 0`, so `cap > 0`.
        self.head = (self.head + 1) % self.buf.len();
        self.len -= 1;
        Some(d)
    }
}

/// The CQ's context: the ring its handler fills and the condition a drain
/// sleeps on.
#[pin_data]
struct CqShared {
    #[pin]
    ring: Mutex<Ring>,
    #[pin]
    more: CondVar,
}

impl CqShared {
    fn new(slots: usize) -> Result<Pin<KBox<Self>>> {
        let mut buf = KVec::with_capacity(slots, GFP_KERNEL)?;
        for _ in 0..slots {
            buf.push(Done::default(), GFP_KERNEL)?;
        }
        let ring = Ring {
            buf,
            head: 0,
            len: 0,
            waker: None,
        };
        KBox::pin_init(
            pin_init!(Self {
                ring <- new_mutex!(ring, "CqShared::ring"),
                more <- new_condvar!("CqShared::more"),
            }),
            GFP_KERNEL,
        )
    }
}

/// The `ib_cqe` of one slot of the QP's table: every request posted in that
/// slot carries it as its `wr_cqe`.
///
/// # Invariants
///
/// `cqe` is the first field (the handler finds `slot` from it).
#[repr(C)]
pub(super) struct WrCqe {
    cqe: bindings::ib_cqe,
    slot: u32,
}

impl WrCqe {
    pub(super) fn new(slot: u32) -> Self {
        Self {
            cqe: bindings::ib_cqe {
                done: Some(wr_done),
            },
            slot,
        }
    }

    /// The pointer a work request of the slot at `this` carries.
    ///
    /// # Safety
    ///
    /// `this` points to a live `WrCqe`.
    pub(super) unsafe fn raw_cqe(this: *mut Self) -> *mut bindings::ib_cqe {
        // SAFETY: By the function's safety requirement; no reference made.
        unsafe { core::ptr::addr_of_mut!((*this).cqe) }
    }
}

/// The `done` of every request of an [`RcQp`](super::RcQp), called by the RDMA core in
/// the CQ's work for each completion.
///
/// # Safety
///
/// `cq` is a [`Cq`], whose context is its live [`CqShared`]; `wc` is
/// a completion of one of its requests, whose `wr_cqe` is a live [`WrCqe`]
/// of that QP (both are freed after the CQ).
unsafe extern "C" fn wr_done(cq: *mut bindings::ib_cq, wc: *mut bindings::ib_wc) {
    // SAFETY: By the function's safety requirement; `cqe` is the first
    // field of a `#[repr(C)]` `WrCqe`.
    let (shared, d) = unsafe {
        let shared = &*(*cq).cq_context.cast::<CqShared>();
        let cqe = (*wc).__bindgen_anon_1.wr_cqe.cast::<WrCqe>();
        let d = Done {
            slot: (*cqe).slot,
            status: (*wc).status,
            byte_len: (*wc).byte_len,
        };
        (shared, d)
    };
    let waker = {
        let mut ring = shared.ring.lock();
        // Never full: a slot holds one request at a time, and stays taken
        // until its completion leaves the ring.
        if !ring.push(d) {
            pr_warn!("rdma: a completion found its QP's ring full\n");
        }
        shared.more.notify_all();
        ring.waker.clone()
    };
    if let Some(w) = waker {
        w();
    }
}

/// A completion queue of `nr` entries for the requests of one QP, each of
/// which carries its slot's `ib_cqe`: the RDMA core polls it on its
/// workqueue and queues each completion in the CQ's ring.
///
/// # Invariants
///
/// `cq` is a live CQ (`IB_POLL_WORKQUEUE`) whose context is `shared`; it is
/// freed exactly once, in `drop`, which waits for its work: `shared` (a
/// field, dropped after `drop`) outlives every call of the handler.
pub struct Cq {
    cq: NonNull<bindings::ib_cq>,
    shared: Pin<KBox<CqShared>>,
}

impl Cq {
    /// Allocates a CQ of `nr` entries on `device`, with a ring of as many
    /// (a QP posts at most that many requests at once). May sleep.
    pub(super) fn new(device: &Device, nr: u32, caller: &'static CStr) -> Result<Self> {
        let n = crate::ffi::c_int::try_from(nr).map_err(|_| EINVAL)?;
        let shared = CqShared::new(usize::try_from(nr).map_err(|_| EINVAL)?)?;
        let ctx = core::ptr::from_ref::<CqShared>(&shared)
            .cast_mut()
            .cast::<crate::ffi::c_void>();
        // SAFETY: `device` is registered; `caller` is static; `ctx` is
        // `shared`, which `Self` frees after the CQ.
        let cq = crate::error::from_err_ptr(unsafe {
            bindings::__ib_alloc_cq(
                device.as_raw(),
                ctx,
                n,
                0,
                bindings::ib_poll_context_IB_POLL_WORKQUEUE,
                caller.as_char_ptr(),
            )
        })?;
        // INVARIANT: allocated above with `shared` as its context.
        Ok(Self {
            cq: NonNull::new(cq).ok_or(ENOMEM)?,
            shared,
        })
    }

    /// The raw CQ, live as long as `self`.
    pub fn as_raw(&self) -> *mut bindings::ib_cq {
        self.cq.as_ptr()
    }

    /// Sets (or clears) the function called for each completion, in the
    /// CQ's work: it may sleep, and must not wait for anything that polls
    /// or drains the QP.
    pub fn set_waker(&self, waker: Option<Waker>) {
        let old = core::mem::replace(&mut self.shared.ring.lock().waker, waker);
        drop(old);
    }

    /// The oldest completion not yet taken.
    pub(super) fn pop(&self) -> Option<Done> {
        self.shared.ring.lock().pop()
    }

    /// Sleeps until a completion is in the ring, for at most `ms`; `false`
    /// if a signal is pending (the caller stops waiting).
    pub(super) fn wait(&self, ms: u32) -> bool {
        let mut ring = self.shared.ring.lock();
        if ring.len > 0 {
            return true;
        }
        let r = self
            .shared
            .more
            .wait_interruptible_timeout(&mut ring, msecs_to_jiffies(ms));
        !matches!(r, CondVarTimeoutResult::Signal { .. })
    }
}

impl Drop for Cq {
    fn drop(&mut self) {
        // SAFETY: By the type invariant the CQ is live and freed only here;
        // its QP (the one user) was destroyed first. `ib_free_cq()` waits
        // for the CQ's work: nothing reaches `shared` after it.
        unsafe { bindings::ib_free_cq(self.cq.as_ptr()) };
    }
}

// SAFETY: The CQ is used through the RDMA core, which locks it itself; the
// ring is behind its mutex.
unsafe impl Send for Cq {}
// SAFETY: As for `Send`.
unsafe impl Sync for Cq {}
