// SPDX-License-Identifier: GPL-2.0

//! A slot that may hold an [`Arc`], readable from anywhere.
//!
//! C header: [`include/linux/rcupdate.h`](srctree/include/linux/rcupdate.h).

use crate::sync::{rcu, Arc, ArcBorrow};
use core::{
    marker::PhantomData,
    ptr,
    sync::atomic::{AtomicPtr, Ordering},
};

/// A slot that holds an [`Arc<T>`] or nothing, with a `const` constructor
/// so that it can be a `static`.
///
/// It is for the state that a C entry point has to reach without a context
/// pointer of its own: the owner puts an [`Arc`] in with [`ArcSlot::set`]
/// and takes it out with [`ArcSlot::take`]; anyone gets a clone of what the
/// slot holds with [`ArcSlot::get`]. Readers take `rcu_read_lock()` for the
/// time of a reference count increment, and [`ArcSlot::take`] waits for an
/// RCU grace period before it hands the [`Arc`] back, so a reader never
/// touches an object that is being freed.
///
/// A slot is not dropped when it is a `static`: what it holds when its
/// module unloads is leaked. Its owner takes the [`Arc`] out first.
///
/// # Invariants
///
/// `ptr` is NULL or comes from [`Arc::into_raw`]: the slot owns that
/// reference. A pointer read from `ptr` inside an RCU read-side critical
/// section stays valid until the section ends.
///
/// # Examples
///
/// ```
/// use kernel::sync::{Arc, ArcSlot};
///
/// static SLOT: ArcSlot<u32> = ArcSlot::new();
///
/// assert!(SLOT.get().is_none());
/// SLOT.set(Arc::new(42, GFP_KERNEL)?).map_err(|_| EBUSY)?;
/// // A second `set` gives its `Arc` back.
/// assert!(SLOT.set(Arc::new(7, GFP_KERNEL)?).is_err());
/// let a = SLOT.get().ok_or(ENOENT)?;
/// assert_eq!(*a, 42);
/// let b = SLOT.take().ok_or(ENOENT)?;
/// assert!(SLOT.get().is_none());
/// // The clone outlives the slot's reference.
/// drop(b);
/// assert_eq!(*a, 42);
/// # Ok::<(), Error>(())
/// ```
pub struct ArcSlot<T: Send + Sync> {
    ptr: AtomicPtr<T>,
    _p: PhantomData<Arc<T>>,
}

impl<T: Send + Sync> ArcSlot<T> {
    /// An empty slot.
    pub const fn new() -> Self {
        // INVARIANT: NULL.
        Self {
            ptr: AtomicPtr::new(ptr::null_mut()),
            _p: PhantomData,
        }
    }

    /// Puts `value` in the slot if it is empty; gives it back otherwise.
    pub fn set(&self, value: Arc<T>) -> core::result::Result<(), Arc<T>> {
        let raw = Arc::into_raw(value).cast_mut();
        match self
            .ptr
            .compare_exchange(ptr::null_mut(), raw, Ordering::AcqRel, Ordering::Acquire)
        {
            // INVARIANT: The slot owns the reference `into_raw` gave.
            Ok(_) => Ok(()),
            // SAFETY: `raw` comes from `into_raw` just above and was not
            // stored.
            Err(_) => Err(unsafe { Arc::from_raw(raw) }),
        }
    }

    /// A clone of the [`Arc`] in the slot, if any.
    ///
    /// Context: any context (it does not sleep).
    pub fn get(&self) -> Option<Arc<T>> {
        let guard = rcu::read_lock();
        let raw = self.ptr.load(Ordering::Acquire);
        let value = if raw.is_null() {
            None
        } else {
            // SAFETY: `raw` came from `Arc::into_raw` (type invariant), and
            // `take` waits for the end of this RCU read-side critical
            // section before it lets the reference go, so the object is
            // alive for the borrow, which ends inside the section.
            let borrow = unsafe { ArcBorrow::from_raw(raw) };
            Some(Arc::from(borrow))
        };
        guard.unlock();
        value
    }

    /// Takes the [`Arc`] out of the slot, leaving it empty; it waits for
    /// every [`ArcSlot::get`] that may have seen it to finish.
    ///
    /// Context: process context; it sleeps (`synchronize_rcu()`).
    pub fn take(&self) -> Option<Arc<T>> {
        let raw = self.ptr.swap(ptr::null_mut(), Ordering::AcqRel);
        if raw.is_null() {
            return None;
        }
        // After the grace period no reader still uses `raw`: one that
        // starts now finds NULL.
        rcu::synchronize_rcu();
        // SAFETY: `raw` came from `Arc::into_raw` (type invariant) and the
        // slot no longer holds it: its reference is ours.
        Some(unsafe { Arc::from_raw(raw) })
    }
}

impl<T: Send + Sync> Default for ArcSlot<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Send + Sync> Drop for ArcSlot<T> {
    fn drop(&mut self) {
        let raw = *self.ptr.get_mut();
        if !raw.is_null() {
            // SAFETY: The slot owns the reference (type invariant), and
            // `&mut self` means no reader is in `get`.
            drop(unsafe { Arc::from_raw(raw) });
        }
    }
}

// SAFETY: The slot hands out and takes `Arc<T>`s, which may move between
// threads as `T: Send + Sync`.
unsafe impl<T: Send + Sync> Send for ArcSlot<T> {}

// SAFETY: Every method takes `&self` and synchronises through the atomic
// pointer and RCU; what crosses threads is an `Arc<T>` with `T: Send + Sync`.
unsafe impl<T: Send + Sync> Sync for ArcSlot<T> {}
