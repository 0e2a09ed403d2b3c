// SPDX-License-Identifier: GPL-2.0

//! [`Reaper`]: the caller's workqueues for the destroys that cannot wait
//! where the [`super::CmId`] is dropped, and for the jobs CM callbacks hand
//! off; [`ReaperRef`], the counted reference everything that makes ids
//! holds.

use crate::{
    bindings, new_condvar, new_spinlock,
    prelude::*,
    str::CStr,
    sync::{CondVar, SpinLock},
    workqueue::Queue,
};
use core::ptr::NonNull;

/// The caller's workqueue that destroys the ids whose [`CmId`](super::CmId) was dropped
/// where `ib_destroy_cm_id` would wait for the caller itself (see
/// [`CmId`](super::CmId)), and an ordered one for the jobs CM callbacks hand off
/// ([`ReaperRef::spawn_job`]).
///
/// Its work items run the caller's code (the drop of a [`Handler`](super::Handler), a job's
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
        // `alloc_workqueue()` is a macro over this function (and memory
        // allocation profiling), which bindgen does not see.
        let wq = NonNull::new(unsafe {
            bindings::alloc_workqueue_noprof(
                c"%s".as_char_ptr(),
                bindings::wq_flags_WQ_UNBOUND,
                0,
                name.as_char_ptr(),
            )
        })
        .ok_or(ENOMEM)?;
        // SAFETY: As above; these are `alloc_ordered_workqueue()`'s flags and
        // limit.
        let Some(jobs) = NonNull::new(unsafe {
            bindings::alloc_workqueue_noprof(
                c"%s".as_char_ptr(),
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
    pub(super) fn reaper(&self) -> &Reaper {
        // SAFETY: Live while `self` is (type invariant).
        unsafe { self.reaper.as_ref() }
    }

    pub(super) fn queue(&self) -> &Queue {
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
