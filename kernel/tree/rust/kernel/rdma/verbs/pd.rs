// SPDX-License-Identifier: GPL-2.0

//! [`Pd`]: a protection domain.

use crate::{
    bindings, error::from_err_ptr, prelude::*, rdma::device::Device, str::CStr, sync::aref::ARef,
};
use core::{mem::ManuallyDrop, ptr::NonNull};

/// A protection domain of a device (`ib_alloc_pd()`), holding a reference
/// on the device. QPs and MRs share it through an [`Arc`](crate::sync::Arc):
/// each [`RcQp`](super::RcQp) and [`Mr`](super::Mr) made on it holds one.
///
/// # Invariants
///
/// `pd` is a live PD of `device`, deallocated at most once, in `drop`;
/// the device's reference is put after it, and only if it was.
pub struct Pd {
    pd: NonNull<bindings::ib_pd>,
    device: ManuallyDrop<ARef<Device>>,
}

impl Pd {
    /// Allocates a PD on `device`, recorded under `caller` (restrack). May
    /// sleep.
    pub fn new(device: &Device, caller: &'static CStr) -> Result<Self> {
        // SAFETY: `device` is registered; `caller` is a static string. No
        // flags: no unsafe global rkey.
        let pd = from_err_ptr(unsafe {
            bindings::__ib_alloc_pd(device.as_raw(), 0, caller.as_char_ptr())
        })?;
        // INVARIANT: just allocated on `device`.
        Ok(Self {
            pd: NonNull::new(pd).ok_or(ENOMEM)?,
            device: ManuallyDrop::new(device.into()),
        })
    }

    /// The device the PD is on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The raw PD, live as long as `self`.
    pub fn as_raw(&self) -> *mut bindings::ib_pd {
        self.pd.as_ptr()
    }

    /// The device DMA mappings are made for, and the PD's local DMA key.
    pub(super) fn dma(&self) -> Result<(NonNull<bindings::ib_device>, u32)> {
        // SAFETY: By the type invariant the PD is live; both fields are
        // fixed at its allocation.
        let (dev, lkey) = unsafe {
            let pd = self.pd.as_ptr();
            ((*pd).device, (*pd).local_dma_lkey)
        };
        Ok((NonNull::new(dev).ok_or(EINVAL)?, lkey))
    }
}

impl Drop for Pd {
    fn drop(&mut self) {
        // SAFETY: By the type invariant the PD is live and freed only here;
        // whoever made objects on it (an `RcQp`, an `Mr`) destroyed them
        // first, as it holds a reference on this PD (an `Arc`) that it puts
        // after them.
        let ret = unsafe { bindings::ib_dealloc_pd_user(self.pd.as_ptr(), core::ptr::null_mut()) };
        if ret != 0 {
            // The driver still has the PD (rxe never refuses; another
            // driver may): leaking the device's reference with it makes the
            // device's unregistration wait, a hang rather than a use after
            // free, as for a QP or an MR that could not be freed.
            pr_warn!(
                "PD not deallocated ({}): its device reference is leaked\n",
                ret
            );
            return;
        }
        // SAFETY: Dropped once, here, after the PD is gone.
        unsafe { ManuallyDrop::drop(&mut self.device) };
    }
}

// SAFETY: A PD is used through the RDMA core, which locks it itself.
unsafe impl Send for Pd {}
// SAFETY: As for `Send`: `&self` only reads fixed fields.
unsafe impl Sync for Pd {}
