// SPDX-License-Identifier: GPL-2.0

//! Workqueues a module makes and destroys: [`OwnedQueue`].
//!
//! C header: [`include/linux/workqueue.h`](srctree/include/linux/workqueue.h)

use super::Queue;
use crate::{bindings, prelude::*, str::CStr};
use core::{ops::Deref, ptr::NonNull};

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
