// SPDX-License-Identifier: GPL-2.0

//! RDMA devices: `struct ib_device`.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use crate::{bindings, prelude::*, sync::aref::AlwaysRefCounted, types::Opaque};
use core::ptr::NonNull;

/// An RDMA device, borrowed for the duration of a call from the RDMA core,
/// or held by an [`ARef`](crate::sync::aref::ARef).
///
/// # Invariants
///
/// The wrapped `struct ib_device` is valid and registered for the lifetime of
/// every `&Device`: its reference count (`ib_device_try_get()`) is not zero.
#[repr(transparent)]
pub struct Device(Opaque<bindings::ib_device>);

impl Device {
    /// Creates a reference to a [`Device`] from a raw pointer.
    ///
    /// # Safety
    ///
    /// `ptr` must point to a valid, registered `struct ib_device` for the
    /// whole lifetime `'a` (as in a client's `add` and `remove` callbacks,
    /// or while a reference is held on it).
    pub unsafe fn from_raw<'a>(ptr: *mut bindings::ib_device) -> &'a Self {
        // SAFETY: `Device` is a transparent wrapper of `struct ib_device`, and the
        // caller guarantees that `ptr` is valid for `'a`.
        unsafe { &*ptr.cast() }
    }

    /// Returns the raw `struct ib_device` pointer.
    pub fn as_raw(&self) -> *mut bindings::ib_device {
        self.0.get()
    }

    /// The device's name, as `rdma link` shows it (`rxe0`).
    pub fn name(&self) -> &CStr {
        // SAFETY: By the type invariant the device is valid. `name` is a
        // NUL-terminated array that the core keeps terminated, also on rename.
        unsafe { CStr::from_char_ptr((*self.as_raw()).name.as_ptr()) }
    }

    /// The device's index in the RDMA core: unique among registered devices.
    pub fn index(&self) -> u32 {
        // SAFETY: By the type invariant the device is valid; `index` is set
        // before registration and never changes.
        unsafe { (*self.as_raw()).index }
    }

    /// The device's port numbers, `rdma_start_port()..=rdma_end_port()`.
    pub fn ports(&self) -> core::ops::RangeInclusive<u32> {
        // SAFETY: By the type invariant the device is valid.
        let (first, last) = unsafe {
            (
                bindings::rdma_start_port(self.as_raw()),
                bindings::rdma_end_port(self.as_raw()),
            )
        };
        first..=last
    }

    /// Whether port `port` supports the IB connection manager (IB and RoCE do).
    pub fn has_ib_cm(&self, port: u32) -> bool {
        // SAFETY: By the type invariant the device is valid; `rdma_cap_ib_cm`
        // only reads its immutable port capabilities.
        self.ports().contains(&port) && unsafe { bindings::rdma_cap_ib_cm(self.as_raw(), port) }
    }

    /// Whether port `port` runs RoCE (rxe does).
    pub fn is_roce(&self, port: u32) -> bool {
        // SAFETY: As in `has_ib_cm`.
        self.ports().contains(&port) && unsafe { bindings::rdma_protocol_roce(self.as_raw(), port) }
    }
}

// SAFETY: A reference on a device keeps it valid (`ib_device_put()` after
// the last one completes its unregistration, which waits for it): `inc_ref`
// takes one on the count `ib_device_try_get()` takes, `dec_ref` is
// `ib_device_put()`.
unsafe impl AlwaysRefCounted for Device {
    fn inc_ref(&self) {
        // SAFETY: By the type invariant the device is valid and its count is
        // not zero, so this is what `ib_device_try_get()` does (its
        // `refcount_inc_not_zero()` cannot fail here). A plain increment
        // rather than `try_get`, whose failure could not be reported from
        // here: on a zero count (a broken invariant) `refcount_inc()` warns
        // and saturates, where a failed `try_get` would have been followed by
        // an unbalanced put at the `ARef`'s drop.
        unsafe { bindings::refcount_inc(core::ptr::addr_of_mut!((*self.as_raw()).refcount)) };
    }

    unsafe fn dec_ref(obj: NonNull<Self>) {
        // SAFETY: The caller owns a reference (`AlwaysRefCounted`'s contract).
        unsafe { bindings::ib_device_put(obj.as_ref().as_raw()) };
    }
}

// SAFETY: The RDMA core locks what changes in a device; `&Device` only reads
// what is fixed at registration (or NUL-terminated, `name`).
unsafe impl Send for Device {}
// SAFETY: As for `Send`.
unsafe impl Sync for Device {}
