// SPDX-License-Identifier: GPL-2.0

//! The CQ of an [`RcQp`]: allocated with `ib_alloc_cq()` and polled by the
//! RDMA core on its workqueue, which hands each completion to its request's
//! `ib_cqe`. Completions wait in the QP's queue until the user takes them
//! ([`RcQp::poll_one`]) or sleeps for them ([`RcQp::drain`]); a waker the
//! user sets ([`RcQp::set_waker`]) is called for each.

use super::{
    mr::MrState,
    wc::{Completion, WcStatus, WrKind},
    RcQp,
};
use crate::{
    bindings, new_condvar, new_mutex,
    prelude::*,
    sync::{Arc, CondVar, Mutex},
    time::{msecs_to_jiffies, Instant, Monotonic},
};

/// What the CQ's handler hands to the user for a completion: the request's
/// slot in the QP's table, its status and byte count.
#[derive(Clone, Copy, Default)]
pub(super) struct Done {
    slot: u32,
    status: u32,
    byte_len: u32,
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
pub(super) struct CqShared {
    #[pin]
    ring: Mutex<Ring>,
    #[pin]
    more: CondVar,
}

impl CqShared {
    pub(super) fn new(slots: usize) -> Result<Pin<KBox<Self>>> {
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

    /// The pointer a work request of this slot carries.
    pub(super) fn as_raw(&mut self) -> *mut bindings::ib_cqe {
        &mut self.cqe
    }
}

/// The `done` of every request of an [`RcQp`], called by the RDMA core in
/// the CQ's work for each completion.
///
/// # Safety
///
/// `cq` is an [`RcQp`]'s CQ, whose context is its live [`CqShared`]; `wc` is
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

impl RcQp {
    /// Sets (or clears) the function called for each completion, in the
    /// CQ's work: it may sleep, and must not wait for anything that polls
    /// or drains this QP.
    pub fn set_waker(&self, waker: Option<Waker>) {
        let old = core::mem::replace(&mut self.shared.ring.lock().waker, waker);
        drop(old);
    }

    /// Takes one completion, if there is one, with its work request's
    /// buffer back.
    pub fn poll_one(&mut self) -> Result<Option<Completion>> {
        let Some(d) = self.shared.ring.lock().pop() else {
            return Ok(None);
        };
        let status = WcStatus::from_raw(d.status);
        let posted = usize::try_from(d.slot)
            .ok()
            .and_then(|i| self.wrs.get_mut(i))
            .and_then(Option::take);
        // The request is over: its buffer is unmapped and handed back.
        let mut mr = None;
        let (kind, buf) = match posted {
            Some(p) => {
                if matches!(p.kind, WrKind::RegMr | WrKind::LocalInv) {
                    mr = Some(p.mr);
                }
                let mut buf = p.buf.into_buf();
                if let Some(m) = self.mrs.get_mut(p.mr) {
                    match (p.kind, status) {
                        (WrKind::RegMr, WcStatus::Success) => m.state = MrState::Valid,
                        // Invalidated: the peer's rkey no longer reaches the
                        // page, whose bytes go back in the caller's buffer.
                        (WrKind::LocalInv, WcStatus::Success) => {
                            buf = m.user.take().unwrap_or_else(KVec::new);
                            if let Some(page) = m.page.as_ref() {
                                // Never longer than the page (`reg_mr`).
                                let _ = page.read_for_cpu(&mut buf);
                            }
                        }
                        (WrKind::RegMr | WrKind::LocalInv, _) => m.state = MrState::Failed,
                        _ => {}
                    }
                }
                (Some(p.kind), buf)
            }
            None => (None, KVec::new()),
        };
        Ok(Some(Completion {
            status,
            kind,
            byte_len: d.byte_len,
            buf,
            mr,
        }))
    }

    /// Ends every posted work request before the QP is freed: moves the QP
    /// to the error state if anything is posted, so that the device flushes
    /// it, and hands each completion to `f`, sleeping until the next one
    /// comes for at most `wait_ms` in all (less if a signal is pending).
    /// Returns how many requests did not come back (their buffers are
    /// freed with the QP, after it is destroyed). May sleep.
    pub fn drain(&mut self, wait_ms: u32, mut f: impl FnMut(Completion)) -> u32 {
        if self.outstanding_all() > 0 {
            // Failing, the QP is already in error or gone with the device:
            // what comes back is taken below, the rest is counted.
            let _ = self.qp().to_error();
        }
        let start = Instant::<Monotonic>::now();
        loop {
            while let Ok(Some(c)) = self.poll_one() {
                f(c);
            }
            let left = self.outstanding_all();
            let rest = i64::from(wait_ms).saturating_sub(start.elapsed().as_millis());
            if left == 0 || rest <= 0 {
                return left;
            }
            let jiffies = msecs_to_jiffies(u32::try_from(rest).unwrap_or(u32::MAX));
            let mut ring = self.shared.ring.lock();
            if ring.len == 0 {
                let r = self
                    .shared
                    .more
                    .wait_interruptible_timeout(&mut ring, jiffies);
                if matches!(r, crate::sync::CondVarTimeoutResult::Signal { .. }) {
                    drop(ring);
                    while let Ok(Some(c)) = self.poll_one() {
                        f(c);
                    }
                    return self.outstanding_all();
                }
            }
        }
    }
}

/// The new CQ, polled by the core on its workqueue, its completions queued
/// in `shared`.
///
/// # Safety
///
/// `device` is registered; `shared` outlives the CQ.
pub(super) unsafe fn alloc_cq(
    device: *mut bindings::ib_device,
    shared: &CqShared,
    cqe: u32,
    caller: &'static crate::str::CStr,
) -> Result<*mut bindings::ib_cq> {
    let nr = crate::ffi::c_int::try_from(cqe).map_err(|_| EINVAL)?;
    let ctx = shared as *const CqShared as *mut crate::ffi::c_void;
    // SAFETY: By the function's safety requirements; `caller` is static.
    crate::error::from_err_ptr(unsafe {
        bindings::__ib_alloc_cq(
            device,
            ctx,
            nr,
            0,
            bindings::ib_poll_context_IB_POLL_WORKQUEUE,
            caller.as_char_ptr(),
        )
    })
}
