// SPDX-License-Identifier: GPL-2.0

//! [`Cq`]: a completion queue from `ib_alloc_cq()`, polled by the RDMA
//! core on its workqueue, which QPs of its device share. The core hands
//! each completion to its request's `ib_cqe`, which queues it for the
//! request's QP until the QP's user takes it
//! ([`RcQp::poll_one`](super::RcQp::poll_one)) and calls the QP's waker
//! ([`RcQp::set_waker`](super::RcQp::set_waker)).

use crate::{
    bindings, new_condvar, new_mutex, new_spinlock,
    prelude::*,
    rdma::device::Device,
    str::CStr,
    sync::{aref::ARef, Arc, CondVar, CondVarTimeoutResult, Mutex, SpinLock},
    time::msecs_to_jiffies,
};
use core::ptr::NonNull;

/// What a request's `ib_cqe` queues for its QP's user: the request's slot
/// in the QP's table, its status and byte count.
#[derive(Clone, Copy, Default)]
pub(super) struct Done {
    pub(super) slot: u32,
    pub(super) status: u32,
    pub(super) byte_len: u32,
}

/// A QP's waker: called once per completion the device delivers, in the
/// CQ's work (process context, the RDMA core's `ib_comp_wq`). One such
/// completion may hand back several requests (unsignalled ones before
/// it): the QP's user takes completions until there is none.
pub type Waker = Arc<dyn Fn() + Send + Sync>;

/// The completions of a QP not yet taken, oldest first, in a ring of one
/// entry per slot of the QP's table.
///
/// # Invariants
///
/// `head < buf.len()` (or `buf` is empty) and `len <= buf.len()`.
struct Ring {
    buf: KVec<Done>,
    head: usize,
    len: usize,
    waker: Option<Waker>,
    /// Calls of `waker` in progress (the CQ's work runs them unlocked).
    calls: u32,
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

/// Where a QP's completions wait, and the condition
/// [`RcQp::wait_completion`](super::RcQp::wait_completion) (or the QP's
/// free, for a waker's call) sleeps on.
///
/// A spinlock, not a mutex: the QP frees this once it took its last
/// completion and no call of its waker is in progress, which may be while
/// the CQ's work is still leaving the `done` that released the lock last;
/// a spinlock's unlock no longer touches the lock once it is released, a
/// mutex's may.
#[pin_data]
struct Sink {
    #[pin]
    ring: SpinLock<Ring>,
    #[pin]
    more: CondVar,
}

/// The `ib_cqe` of one slot of a QP's table: every request posted in that
/// slot carries it as its `wr_cqe`.
///
/// # Invariants
///
/// `cqe` is the first field (`done` finds the rest from it); `sink` is the
/// [`Sink`] of the [`Completions`] this is in.
#[repr(C)]
struct WrCqe {
    cqe: bindings::ib_cqe,
    sink: *const Sink,
    slot: u32,
}

/// A QP's side of its CQ: the `ib_cqe` of each slot of its table, and where
/// their completions wait.
///
/// # Invariants
///
/// `cqes` has one entry per slot and is never resized; each points to
/// `sink`, which is pinned. Both live until no completion of the QP's
/// requests can reach them: the QP took every one, or the CQ delivered
/// every one the QP left (see [`Cq::orphan`]), or the CQ was freed.
pub(super) struct Completions {
    sink: Pin<KBox<Sink>>,
    cqes: KVec<WrCqe>,
    /// Once an orphan: the completions its QP did not take.
    pending: u32,
    /// The next in the CQ's list of orphans (see [`Cq::orphan`]).
    next: Option<KBox<Completions>>,
}

impl Completions {
    /// The side of a QP of `slots` slots. May sleep.
    pub(super) fn new(slots: u32) -> Result<KBox<Self>> {
        let n = usize::try_from(slots).map_err(|_| EINVAL)?;
        let mut buf = KVec::with_capacity(n, GFP_KERNEL)?;
        let mut cqes = KVec::with_capacity(n, GFP_KERNEL)?;
        for _ in 0..n {
            buf.push(Done::default(), GFP_KERNEL)?;
        }
        let ring = Ring {
            buf,
            head: 0,
            len: 0,
            waker: None,
            calls: 0,
        };
        let sink = KBox::pin_init(
            pin_init!(Sink {
                ring <- new_spinlock!(ring, "Completions::ring"),
                more <- new_condvar!("Completions::more"),
            }),
            GFP_KERNEL,
        )?;
        let to: *const Sink = &*sink;
        for slot in 0..slots {
            let cqe = bindings::ib_cqe {
                done: Some(wr_done),
            };
            // INVARIANT: each entry points to `sink`.
            cqes.push(
                WrCqe {
                    cqe,
                    sink: to,
                    slot,
                },
                GFP_KERNEL,
            )?;
        }
        Ok(KBox::new(
            Self {
                sink,
                cqes,
                pending: 0,
                next: None,
            },
            GFP_KERNEL,
        )?)
    }

    /// The `ib_cqe` a request posted in `slot` carries.
    pub(super) fn cqe(&mut self, slot: usize) -> Result<*mut bindings::ib_cqe> {
        if slot >= self.cqes.len() {
            return Err(ENOMEM);
        }
        // SAFETY: `slot` is within `cqes`, which is never resized. A raw
        // pointer, no reference: the CQ's work reads other entries (and the
        // RDMA core their `done`) meanwhile.
        Ok(unsafe { core::ptr::addr_of_mut!((*self.cqes.as_mut_ptr().add(slot)).cqe) })
    }

    /// Sets (or clears) the QP's waker, and waits (uninterruptibly) until
    /// no call of a waker is in progress: the old one is dropped here, never
    /// in the CQ's work (where dropping what its closure owns could free
    /// the QP, whose free would wait for that very call). Not from a waker.
    pub(super) fn set_waker(&self, waker: Option<Waker>) {
        let old = {
            let mut ring = self.sink.ring.lock();
            let old = core::mem::replace(&mut ring.waker, waker);
            while ring.calls > 0 {
                self.sink.more.wait(&mut ring);
            }
            old
        };
        drop(old);
    }

    /// Every completion the QP left was delivered.
    fn all_delivered(&self) -> bool {
        self.sink.ring.lock().len >= self.pending as usize
    }

    /// The oldest completion not yet taken.
    pub(super) fn pop(&self) -> Option<Done> {
        self.sink.ring.lock().pop()
    }

    /// Sleeps until a completion is queued, for at most `ms`; `false` if a
    /// signal is pending (the caller stops waiting).
    pub(super) fn wait(&self, ms: u32) -> bool {
        let mut ring = self.sink.ring.lock();
        if ring.len > 0 {
            return true;
        }
        let r = self
            .sink
            .more
            .wait_interruptible_timeout(&mut ring, msecs_to_jiffies(ms));
        !matches!(r, CondVarTimeoutResult::Signal { .. })
    }
}

/// The `done` of every request of an [`RcQp`](super::RcQp), called by the
/// RDMA core in the CQ's work for each completion.
///
/// # Safety
///
/// `wc` is a completion of a request whose `wr_cqe` is a live [`WrCqe`]
/// (its [`Completions`] live until this call released their lock for the
/// last time: see their invariant).
unsafe extern "C" fn wr_done(_cq: *mut bindings::ib_cq, wc: *mut bindings::ib_wc) {
    // SAFETY: By the function's safety requirement; `cqe` is the first
    // field of a `#[repr(C)]` `WrCqe`, whose `sink` is live with it.
    let (sink, d) = unsafe {
        let cqe = (*wc).__bindgen_anon_1.wr_cqe.cast::<WrCqe>();
        let d = Done {
            slot: (*cqe).slot,
            status: (*wc).status,
            byte_len: (*wc).byte_len,
        };
        (&*(*cqe).sink, d)
    };
    let waker = {
        let mut ring = sink.ring.lock();
        // Never full: a slot holds one request at a time, and stays taken
        // until its completion leaves the ring (an unsignalled request is
        // retired without one only once a later request of its queue
        // completed: the queue completes in order, so none comes later).
        if !ring.push(d) {
            pr_warn!("rdma: a completion found its QP's ring full\n");
        }
        sink.more.notify_all();
        let waker = ring.waker.clone();
        if waker.is_some() {
            ring.calls += 1;
        }
        // Without a waker: from the unlock, the QP may take the completion
        // and free `sink`.
        waker
    };
    if let Some(w) = waker {
        w();
        // Before the call is counted out: the ring's reference, dropped
        // only once no call is counted (`set_waker`), outlives this one.
        drop(w);
        let mut ring = sink.ring.lock();
        ring.calls -= 1;
        sink.more.notify_all();
        // From the unlock, the QP may free `sink`.
    }
}

/// What QPs hold of a CQ: its entries they reserved, and the
/// [`Completions`] of QPs destroyed with requests outstanding (a list
/// through their `next`, which needs no allocation), each still holding an
/// entry per completion not delivered.
struct Users {
    reserved: u32,
    orphans: Option<KBox<Completions>>,
}

impl Users {
    /// Frees the orphans whose completions all came, and their entries.
    fn reclaim(&mut self) {
        let mut list = self.orphans.take();
        while let Some(mut c) = list {
            list = c.next.take();
            if c.all_delivered() {
                // Each of its requests completes once: nothing reaches it
                // any more, and its last `done` released its lock.
                self.reserved = self.reserved.saturating_sub(c.pending);
                drop(c);
            } else {
                c.next = self.orphans.take();
                self.orphans = Some(c);
            }
        }
    }
}

impl Drop for Users {
    fn drop(&mut self) {
        // One at a time, not recursively through `next`.
        let mut next = self.orphans.take();
        while let Some(mut c) = next {
            next = c.next.take();
            drop(c);
        }
    }
}

/// A completion queue of a device (`ib_alloc_cq()`, `IB_POLL_WORKQUEUE`),
/// holding a reference on the device. QPs share it through an [`Arc`]:
/// each [`RcQp`](super::RcQp) on it holds one and reserves an entry for
/// each request it can have posted, and two for its drain's.
///
/// # Invariants
///
/// `cq` is a live CQ of `device` with `entries` entries, freed exactly
/// once, in `drop`, before `users` (the orphans' `ib_cqe`s) and the
/// device's reference; every QP using it was destroyed before (each holds
/// a reference on `self`).
#[pin_data(PinnedDrop)]
pub struct Cq {
    cq: NonNull<bindings::ib_cq>,
    entries: u32,
    #[pin]
    users: Mutex<Users>,
    device: ARef<Device>,
}

impl Cq {
    /// Allocates a CQ of `entries` entries on `device`, recorded under
    /// `caller` (restrack). The QPs on it may have as many requests posted
    /// in all, two per QP for its drain included (`ENOSPC` for a QP
    /// beyond). May sleep.
    pub fn new(device: &Device, entries: u32, caller: &'static CStr) -> Result<Arc<Self>> {
        // `ib_alloc_cq()` warns on a CQ of no entries.
        let n = crate::ffi::c_int::try_from(entries).map_err(|_| EINVAL)?;
        if n == 0 {
            return Err(EINVAL);
        }
        // SAFETY: `device` is registered; `caller` is static. No context:
        // each completion finds its QP through its `wr_cqe`.
        let cq = crate::error::from_err_ptr(unsafe {
            bindings::__ib_alloc_cq(
                device.as_raw(),
                core::ptr::null_mut(),
                n,
                0,
                bindings::ib_poll_context_IB_POLL_WORKQUEUE,
                caller.as_char_ptr(),
            )
        })?;
        let cq = NonNull::new(cq).ok_or(ENOMEM)?;
        let users = Users {
            reserved: 0,
            orphans: None,
        };
        // INVARIANT: just allocated on `device`, with `entries` entries.
        let this = Arc::pin_init(
            pin_init!(Self {
                cq,
                entries,
                users <- new_mutex!(users, "Cq::users"),
                device: device.into(),
            }),
            GFP_KERNEL,
        );
        if this.is_err() {
            // SAFETY: Just allocated, never used.
            unsafe { bindings::ib_free_cq(cq.as_ptr()) };
        }
        this
    }

    /// The device the CQ is on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The raw CQ, live as long as `self`.
    pub fn as_raw(&self) -> *mut bindings::ib_cq {
        self.cq.as_ptr()
    }

    /// Reserves `n` entries for a QP (`ENOSPC` beyond the CQ's).
    pub(super) fn reserve(&self, n: u32) -> Result {
        let mut users = self.users.lock();
        users.reclaim();
        let total = users.reserved.checked_add(n).ok_or(ENOSPC)?;
        if total > self.entries {
            return Err(ENOSPC);
        }
        users.reserved = total;
        Ok(())
    }

    /// Gives back `n` entries a QP reserved (the QP is destroyed).
    pub(super) fn release(&self, n: u32) {
        let mut users = self.users.lock();
        users.reserved = users.reserved.saturating_sub(n);
    }

    /// Keeps the [`Completions`] of a QP destroyed with `pending`
    /// requests whose completions it did not take, and their entries: the
    /// CQ may still hold some, whose `wr_cqe` points into them. They are
    /// freed, and the entries given back, once all came, or after the CQ
    /// (whose `ib_free_cq()` drops what it still holds): a device may
    /// never complete the requests of a QP destroyed before it flushed
    /// them.
    pub(super) fn orphan(&self, mut c: KBox<Completions>, pending: u32) {
        c.pending = pending;
        let mut users = self.users.lock();
        c.next = users.orphans.take();
        users.orphans = Some(c);
        users.reclaim();
    }
}

#[pinned_drop]
impl PinnedDrop for Cq {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: By the type invariant the CQ is live, freed only here,
        // and its QPs were destroyed. `ib_free_cq()` waits for its work
        // (this is not in it: the work never puts a user's last reference,
        // as its clone of a waker goes while the QP still holds the waker,
        // `Completions::set_waker`) and drops the completions it still
        // holds: nothing reaches an orphan's `ib_cqe` after it (`users` is
        // dropped after this).
        unsafe { bindings::ib_free_cq(self.cq.as_ptr()) };
    }
}

// SAFETY: The CQ is used through the RDMA core, which locks it itself;
// `users` is behind its mutex.
unsafe impl Send for Cq {}
// SAFETY: As for `Send`.
unsafe impl Sync for Cq {}

// SAFETY: The raw pointers of a QP's side point into its own boxes, which
// move with it; the ring is behind its lock.
unsafe impl Send for Completions {}
// SAFETY: As for `Send`: `&self` only takes the lock.
unsafe impl Sync for Completions {}
