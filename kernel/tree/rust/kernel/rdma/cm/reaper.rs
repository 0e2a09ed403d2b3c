// SPDX-License-Identifier: GPL-2.0

//! [`Reaper`]: the caller's workqueues for the destroys that cannot wait
//! where the [`super::CmId`] is dropped, and for the jobs CM callbacks hand
//! off; [`ReaperRef`], the counted reference everything that makes ids
//! holds.

use crate::{
    prelude::*,
    str::CStr,
    sync::{Arc, Completion},
    workqueue::{OwnedQueue, Queue, QueueFlags},
};
use core::{mem::ManuallyDrop, ptr::NonNull};

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
/// last one to go completes `unused`; queued destroys run meanwhile, as the
/// queues are live), then destroys the workqueues, jobs first (a job may
/// queue a destroy), each running what is still queued first. It is never
/// reference counted by its own work items: the last owner is the caller.
///
/// # Invariants
///
/// `token` is dropped only in `drop`; every [`ReaperRef`] holds a clone of it,
/// and the `Token`'s drop, when the last clone goes, completes `unused`.
#[pin_data(PinnedDrop)]
pub struct Reaper {
    /// Ordered: the work a CM callback hands off ([`ReaperRef::spawn_job`]).
    /// Declared first: dropped (destroyed) before `wq`.
    jobs: OwnedQueue,
    wq: OwnedQueue,
    token: ManuallyDrop<Arc<Token>>,
    #[pin]
    unused: Completion,
}

impl Reaper {
    /// Makes the workqueues, named `name` (the destroys: unbound, as a
    /// destroy waits for a CM callback, which may sleep, and many may wait
    /// at once) and `jobs` (ordered: jobs that each take a CPU for a while
    /// run one after the other instead of as hundreds of kworkers).
    /// Process context.
    pub fn new(name: &'static CStr, jobs: &'static CStr) -> Result<Pin<KBox<Self>>> {
        let wq = OwnedQueue::new(name, QueueFlags::UNBOUND, 0)?;
        let jobs = OwnedQueue::new_ordered(jobs, QueueFlags::PERCPU)?;
        let reaper = KBox::pin_init(
            try_pin_init!(&this in Self {
                jobs,
                wq,
                // Before the token, whose drop completes it.
                unused <- Completion::new(),
                token: ManuallyDrop::new(Arc::new(
                    // INVARIANT: `this` is where the reaper is being made, pinned
                    // from here on; its drop waits for the last clone of the token.
                    Token {
                        reaper: this,
                    },
                    GFP_KERNEL,
                )?),
            }? Error),
            GFP_KERNEL,
        )?;
        Ok(reaper)
    }

    /// A counted reference, for those that make ids.
    pub fn get(self: Pin<&Self>) -> ReaperRef {
        // INVARIANT: A clone of the token, which is there until `drop`.
        ReaperRef {
            token: Arc::clone(&self.token),
        }
    }

    /// Runs what is queued on both queues: the jobs first, since a job may
    /// queue a destroy.
    fn flush(&self) {
        self.jobs.flush();
        self.wq.flush();
    }
}

#[pinned_drop]
impl PinnedDrop for Reaper {
    fn drop(mut self: Pin<&mut Self>) {
        // An id's last reference may sit in a queued destroy, which runs on
        // its own; the others are with owners still being torn down (or
        // leaked, a bug: then this waits rather than free the queues under
        // them, and the hung task detector names it).
        // SAFETY: `token` is not pinned (no `#[pin]`), and this is its only
        // drop: nothing uses it after (`get` needs the reaper, which is being
        // dropped).
        unsafe { ManuallyDrop::drop(&mut self.as_mut().get_unchecked_mut().token) };
        self.unused.wait_for_completion();
        // The fields drop next: `jobs`, then `wq`, each destroyed after
        // running what is queued, including the tail of a work item that
        // dropped the last `ReaperRef` (a job's closure, an id's data).
    }
}

/// What every [`ReaperRef`] holds a clone of: the last one to go tells the
/// reaper.
///
/// # Invariants
///
/// `reaper` points at a live, pinned [`Reaper`], whose drop waits for this
/// token's drop.
struct Token {
    reaper: NonNull<Reaper>,
}

// SAFETY: The reaper is only used through `&`, and its queues and its
// completion are thread-safe.
unsafe impl Send for Token {}
// SAFETY: As for `Send`.
unsafe impl Sync for Token {}

impl Drop for Token {
    fn drop(&mut self) {
        // SAFETY: Live until this drop has returned (type invariant).
        let reaper = unsafe { self.reaper.as_ref() };
        // The last use of the reaper: once the completion is done, its drop
        // may free it (`complete_all` touches nothing after it wakes the
        // waiter under the completion's lock, which the waiter takes again).
        reaper.unused.complete_all();
    }
}

/// A counted reference on the caller's [`Reaper`].
#[derive(Clone)]
pub struct ReaperRef {
    token: Arc<Token>,
}

impl ReaperRef {
    fn reaper(&self) -> &Reaper {
        // SAFETY: Live while the token is (its type invariant), so while
        // `self` is.
        unsafe { self.token.reaper.as_ref() }
    }

    pub(super) fn queue(&self) -> &Queue {
        &self.reaper().wq
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
        self.reaper()
            .jobs
            .try_spawn(GFP_KERNEL, f)
            .map_err(|_| ENOMEM)
    }
}
