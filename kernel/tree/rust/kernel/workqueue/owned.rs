// SPDX-License-Identifier: GPL-2.0

//! Workqueues a module makes and destroys: [`OwnedQueue`], and
//! [`CountedQueue`], one whose users hold [`QueueRef`]s.
//!
//! C header: [`include/linux/workqueue.h`](srctree/include/linux/workqueue.h)

use super::Queue;
use crate::{
    bindings,
    prelude::*,
    str::CStr,
    sync::{Arc, Completion},
};
use core::{mem::ManuallyDrop, ops::Deref, ptr::NonNull};

/// Flags of a new workqueue (`WQ_*`), combined with `|`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct QueueFlags(u32);

impl QueueFlags {
    /// Per-CPU workers (the default).
    pub const PERCPU: QueueFlags = QueueFlags(0);
    /// Workers not bound to a CPU (`WQ_UNBOUND`): for items that sleep or
    /// run long.
    pub const UNBOUND: QueueFlags = QueueFlags(bindings::wq_flags_WQ_UNBOUND);
    /// A rescuer thread, so that items make progress under memory pressure
    /// (`WQ_MEM_RECLAIM`).
    pub const MEM_RECLAIM: QueueFlags = QueueFlags(bindings::wq_flags_WQ_MEM_RECLAIM);
    /// High-priority workers (`WQ_HIGHPRI`).
    pub const HIGHPRI: QueueFlags = QueueFlags(bindings::wq_flags_WQ_HIGHPRI);
}

impl core::ops::BitOr for QueueFlags {
    type Output = QueueFlags;

    fn bitor(self, rhs: QueueFlags) -> QueueFlags {
        QueueFlags(self.0 | rhs.0)
    }
}

/// A workqueue made by `alloc_workqueue()`, destroyed (`destroy_workqueue()`)
/// when dropped.
///
/// It derefs to [`Queue`] to queue work items on it. Dropping it first runs
/// every item still queued and waits for those running, so the items it ran
/// cannot outlive it: a module that drops its queues in its exit has no work
/// of its own running after that. The drop must not happen in an item of the
/// same queue, which it would wait for.
///
/// # Examples
///
/// ```
/// use kernel::{
///     c_str,
///     workqueue::{OwnedQueue, QueueFlags},
/// };
///
/// // Items go on it through `Queue`'s methods (`enqueue`, `try_spawn`).
/// let queue = OwnedQueue::new(c_str!("rust_doctest"), QueueFlags::UNBOUND, 0)?;
/// queue.flush();
/// let ordered = OwnedQueue::new_ordered(c_str!("rust_doctest_ordered"), QueueFlags::PERCPU)?;
/// drop(ordered);
/// # Ok::<(), Error>(())
/// ```
///
/// # Invariants
///
/// `ptr` is a workqueue made by `alloc_workqueue()`, destroyed only by
/// `drop`.
pub struct OwnedQueue {
    ptr: NonNull<bindings::workqueue_struct>,
}

// SAFETY: A workqueue is used through the workqueue API, which is
// thread-safe, and may be destroyed from any task in process context.
unsafe impl Send for OwnedQueue {}
// SAFETY: As for `Send`: `&OwnedQueue` only queues and flushes.
unsafe impl Sync for OwnedQueue {}

impl OwnedQueue {
    /// A workqueue named `name` (copied) with `flags`, at most `max_active`
    /// items running at once per CPU, or per node when unbound (0: the
    /// default, 256 or 1024 depending on the kernel). `ENOMEM` if it cannot
    /// be made. Process context.
    pub fn new(name: &CStr, flags: QueueFlags, max_active: i32) -> Result<Self> {
        Self::alloc(name, flags.0, max_active)
    }

    /// An ordered workqueue (`alloc_ordered_workqueue()`): one item at a
    /// time, in the order queued. `ENOMEM` if it cannot be made. Process
    /// context.
    pub fn new_ordered(name: &CStr, flags: QueueFlags) -> Result<Self> {
        Self::alloc(
            name,
            flags.0 | bindings::wq_flags_WQ_UNBOUND | bindings::wq_flags___WQ_ORDERED,
            1,
        )
    }

    fn alloc(name: &CStr, flags: u32, max_active: i32) -> Result<Self> {
        // SAFETY: Process context; `"%s"` with one NUL-terminated string,
        // which the workqueue copies. `alloc_workqueue()` is a macro over this
        // function (and memory allocation profiling), which bindgen does not
        // see.
        let ptr = unsafe {
            bindings::alloc_workqueue_noprof(
                c"%s".as_char_ptr(),
                flags,
                max_active,
                name.as_char_ptr(),
            )
        };
        // INVARIANT: Made by `alloc_workqueue()` just above, if not null.
        Ok(Self {
            ptr: NonNull::new(ptr).ok_or(ENOMEM)?,
        })
    }

    /// Waits until every item queued before the call has run
    /// (`flush_workqueue()`). Not from an item of this queue.
    pub fn flush(&self) {
        // SAFETY: The workqueue is live (type invariant).
        unsafe { bindings::__flush_workqueue(self.ptr.as_ptr()) };
    }
}

impl Deref for OwnedQueue {
    type Target = Queue;

    fn deref(&self) -> &Queue {
        // SAFETY: The workqueue is live until `drop` (type invariant), so as
        // long as the borrow of `self`.
        unsafe { Queue::from_raw(self.ptr.as_ptr()) }
    }
}

impl Drop for OwnedQueue {
    fn drop(&mut self) {
        // SAFETY: The workqueue is live (type invariant) and this is its only
        // destroy; it runs what is still queued first.
        unsafe { bindings::destroy_workqueue(self.ptr.as_ptr()) };
    }
}

/// An [`OwnedQueue`] whose users hold counted references ([`QueueRef`]):
/// its drop waits until the last reference is gone, then destroys the queue.
///
/// For objects that queue work from wherever they are dropped: each holds a
/// [`QueueRef`], so the queue outlives them. A module makes it at init and
/// drops it last at exit; the drop sleeps until every [`QueueRef`] is gone
/// (items already queued keep running meanwhile, and may drop the last one)
/// and then destroys the queue, which waits for them. The drop must not
/// happen in an item of the queue.
///
/// # Examples
///
/// ```
/// use kernel::{
///     c_str,
///     workqueue::{CountedQueue, OwnedQueue, QueueFlags},
/// };
///
/// let queue = OwnedQueue::new(c_str!("rust_doctest_counted"), QueueFlags::UNBOUND, 0)?;
/// let queue = CountedQueue::new(queue)?;
/// // Held by whatever queues work on it (`spawn`, `queue().enqueue()`).
/// let user = queue.as_ref().get();
/// user.flush();
/// drop(user);
/// // Waits for every `QueueRef`, then destroys the workqueue.
/// drop(queue);
/// # Ok::<(), Error>(())
/// ```
///
/// # Invariants
///
/// `token` is dropped only in `drop`; every [`QueueRef`] holds a clone of
/// it, and the `Token`'s drop, when the last clone goes, completes `unused`.
#[pin_data(PinnedDrop)]
pub struct CountedQueue {
    queue: OwnedQueue,
    token: ManuallyDrop<Arc<Token>>,
    #[pin]
    unused: Completion,
}

impl CountedQueue {
    /// Takes `queue` over. `ENOMEM` if the count cannot be allocated.
    pub fn new(queue: OwnedQueue) -> Result<Pin<KBox<Self>>> {
        KBox::pin_init(
            try_pin_init!(&this in Self {
                queue,
                // Before the token, whose drop completes it.
                unused <- Completion::new(),
                token: ManuallyDrop::new(Arc::new(
                    // INVARIANT: `this` is where the queue is being made,
                    // pinned from here on; its drop waits for the last clone
                    // of the token.
                    Token { owner: this },
                    GFP_KERNEL,
                )?),
            }? Error),
            GFP_KERNEL,
        )
    }

    /// A counted reference.
    pub fn get(self: Pin<&Self>) -> QueueRef {
        // INVARIANT: A clone of the token, which is there until `drop`.
        QueueRef {
            token: Arc::clone(&self.token),
        }
    }
}

#[pinned_drop]
impl PinnedDrop for CountedQueue {
    fn drop(mut self: Pin<&mut Self>) {
        // SAFETY: `token` is not pinned (no `#[pin]`), and this is its only
        // drop: nothing uses it after (`get` needs the queue, which is being
        // dropped).
        unsafe { ManuallyDrop::drop(&mut self.as_mut().get_unchecked_mut().token) };
        // A reference that is leaked (a bug) makes this wait for ever rather
        // than free the queue under it; the hung task detector names it.
        self.unused.wait_for_completion();
        // `queue` drops next: destroyed after running what is still queued,
        // including the tail of an item that dropped the last reference.
    }
}

/// What every [`QueueRef`] holds a clone of: the last one to go tells the
/// owner.
///
/// # Invariants
///
/// `owner` points at a live, pinned [`CountedQueue`], whose drop waits for
/// this token's drop.
struct Token {
    owner: NonNull<CountedQueue>,
}

// SAFETY: The owner is only used through `&`, and its queue and its
// completion are thread-safe.
unsafe impl Send for Token {}
// SAFETY: As for `Send`.
unsafe impl Sync for Token {}

impl Drop for Token {
    fn drop(&mut self) {
        // SAFETY: Live until this drop has returned (type invariant).
        let owner = unsafe { self.owner.as_ref() };
        // The last use of the owner: once the completion is done, its drop
        // may free it (`complete_all` touches nothing after it wakes the
        // waiter under the completion's lock, which the waiter takes again).
        owner.unused.complete_all();
    }
}

/// A counted reference on a [`CountedQueue`], which it keeps alive.
#[derive(Clone)]
pub struct QueueRef {
    token: Arc<Token>,
}

impl QueueRef {
    /// The queue, to queue work items on.
    pub fn queue(&self) -> &Queue {
        // SAFETY: The owner is live while the token is (its type invariant),
        // so while `self` is.
        unsafe { &self.token.owner.as_ref().queue }
    }

    /// Runs `f` once on the queue. `ENOMEM` if the item cannot be
    /// allocated.
    pub fn spawn(&self, f: impl FnOnce() + Send + 'static) -> Result {
        self.queue().try_spawn(GFP_KERNEL, f).map_err(|_| ENOMEM)
    }

    /// Waits until every item queued before the call has run. Not from an
    /// item of this queue.
    pub fn flush(&self) {
        // SAFETY: As in `queue`.
        unsafe { self.token.owner.as_ref() }.queue.flush();
    }
}
