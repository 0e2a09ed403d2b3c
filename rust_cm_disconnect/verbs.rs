// SPDX-License-Identifier: GPL-2.0

//! The verbs objects a connection needs: a protection domain, a completion
//! queue and an RC queue pair, owned together and freed in that order's
//! reverse.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use crate::ib_client::Device;
use core::ptr::NonNull;
use kernel::{
    bindings, c_str,
    error::{code::*, from_err_ptr, to_result},
    ffi::c_int,
    prelude::*,
    types::{Opaque, ScopeGuard},
};

/// The caller name the RDMA core records for our objects (restrack).
const CALLER: &CStr = c_str!("rust_cm_disconnect");

/// A completion taken from a CQ.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Completion {
    /// `enum ib_wc_status`: 0 is success, `IB_WC_WR_FLUSH_ERR` a flush.
    pub(crate) status: u32,
}

/// `IB_WC_WR_FLUSH_ERR`: the status of work requests flushed by a QP in the
/// error state.
pub(crate) const WC_WR_FLUSH_ERR: u32 = bindings::ib_wc_status_IB_WC_WR_FLUSH_ERR;

/// A QP borrowed from its owner: what a disconnect does to it.
///
/// # Invariants
///
/// The wrapped `struct ib_qp` is a live kernel QP for the lifetime of every
/// `&QpRef`.
#[repr(transparent)]
pub(crate) struct QpRef(Opaque<bindings::ib_qp>);

impl QpRef {
    /// # Safety
    ///
    /// `ptr` must be a live kernel QP that is not destroyed during `'a`.
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut bindings::ib_qp) -> &'a Self {
        // SAFETY: `QpRef` is a transparent wrapper; the caller guarantees
        // validity for `'a`.
        unsafe { &*ptr.cast() }
    }

    pub(crate) fn as_raw(&self) -> *mut bindings::ib_qp {
        self.0.get()
    }

    /// Modifies the QP (`ib_modify_qp`) with `attr` for the fields in `mask`.
    pub(crate) fn modify(&self, attr: &mut bindings::ib_qp_attr, mask: c_int) -> Result {
        // SAFETY: By the type invariant the QP is live; `attr` is valid.
        to_result(unsafe { bindings::ib_modify_qp(self.0.get(), attr, mask) })
    }

    /// Moves the QP to the error state: every posted work request completes
    /// on its CQ with `IB_WC_WR_FLUSH_ERR`.
    pub(crate) fn to_error(&self) -> Result {
        let mut attr = bindings::ib_qp_attr {
            qp_state: bindings::ib_qp_state_IB_QPS_ERR,
            ..Default::default()
        };
        self.modify(&mut attr, bindings::ib_qp_attr_mask_IB_QP_STATE as c_int)
    }
}

/// Queue sizes of an [`RcQp`].
#[derive(Clone, Copy)]
pub(crate) struct QpSize {
    pub(crate) send: u32,
    pub(crate) recv: u32,
}

/// A protection domain, a CQ polled directly, and an RC QP using both.
///
/// # Invariants
///
/// `pd`, `cq` and `qp` are live objects of one device; `qp` was created on
/// `pd` with `cq` as its send and receive CQ. They are destroyed in the
/// order QP, CQ, PD, each exactly once, in `drop`.
pub(crate) struct RcQp {
    pd: NonNull<bindings::ib_pd>,
    cq: NonNull<bindings::ib_cq>,
    qp: NonNull<bindings::ib_qp>,
}

impl RcQp {
    /// Allocates a PD, a CQ and an RC QP on `device`. May sleep.
    pub(crate) fn new(device: &Device, size: QpSize) -> Result<Self> {
        // SAFETY: `device` is registered; `CALLER` is a static string.
        let pd = from_err_ptr(unsafe {
            bindings::__ib_alloc_pd(device.as_raw(), 0, CALLER.as_char_ptr())
        })?;
        // Released on the error paths below, until the QP exists.
        let pd = ScopeGuard::new_with_data(NonNull::new(pd).ok_or(ENOMEM)?, |pd| {
            // SAFETY: A live PD with no users left (its QP was not created).
            unsafe { bindings::ib_dealloc_pd_user(pd.as_ptr(), core::ptr::null_mut()) };
        });

        let cqe = c_int::try_from(size.send + size.recv).map_err(|_| EINVAL)?;
        // SAFETY: As above; no private context, completion vector 0, polled
        // directly by `poll`.
        let cq = from_err_ptr(unsafe {
            bindings::__ib_alloc_cq(
                device.as_raw(),
                core::ptr::null_mut(),
                cqe,
                0,
                bindings::ib_poll_context_IB_POLL_DIRECT,
                CALLER.as_char_ptr(),
            )
        })?;
        let cq = ScopeGuard::new_with_data(NonNull::new(cq).ok_or(ENOMEM)?, |cq| {
            // SAFETY: A live CQ with no users left (its QP was not created).
            unsafe { bindings::ib_free_cq(cq.as_ptr()) };
        });

        let mut attr = bindings::ib_qp_init_attr {
            send_cq: cq.as_ptr(),
            recv_cq: cq.as_ptr(),
            cap: bindings::ib_qp_cap {
                max_send_wr: size.send,
                max_recv_wr: size.recv,
                max_send_sge: 1,
                max_recv_sge: 1,
                ..Default::default()
            },
            sq_sig_type: bindings::ib_sig_type_IB_SIGNAL_ALL_WR,
            qp_type: bindings::ib_qp_type_IB_QPT_RC,
            ..Default::default()
        };
        // SAFETY: `pd` and `cq` are live objects of `device`; `attr` is valid.
        let qp = from_err_ptr(unsafe {
            bindings::ib_create_qp_kernel(pd.as_ptr(), &mut attr, CALLER.as_char_ptr())
        })?;
        let qp = NonNull::new(qp).ok_or(ENOMEM)?;
        // INVARIANT: all three live, the QP on `pd` with `cq`; ownership moves
        // from the guards to `Self`.
        Ok(Self {
            pd: pd.dismiss(),
            cq: cq.dismiss(),
            qp,
        })
    }

    /// The QP number, for the REQ or REP.
    pub(crate) fn qp_num(&self) -> u32 {
        // SAFETY: By the type invariant the QP is live; `qp_num` is fixed.
        unsafe { (*self.qp.as_ptr()).qp_num }
    }

    /// The QP, for what does not depend on owning it.
    pub(crate) fn qp(&self) -> &QpRef {
        // SAFETY: By the type invariant the QP is live as long as `self`.
        unsafe { QpRef::from_raw(self.qp.as_ptr()) }
    }

    /// Modifies the QP (`ib_modify_qp`) with `attr` for the fields in `mask`.
    pub(crate) fn modify(&self, attr: &mut bindings::ib_qp_attr, mask: c_int) -> Result {
        self.qp().modify(attr, mask)
    }

    /// Posts a receive work request with no buffer (`wr_id` comes back in
    /// its completion).
    pub(crate) fn post_recv(&self, wr_id: u64) -> Result {
        let mut wr = bindings::ib_recv_wr::default();
        wr.__bindgen_anon_1.wr_id = wr_id;
        let mut bad: *const bindings::ib_recv_wr = core::ptr::null();
        // SAFETY: By the type invariant the QP is live; `wr` has no SGEs and
        // no successor, and is only read during the call.
        to_result(unsafe { bindings::ib_post_recv(self.qp.as_ptr(), &wr, &mut bad) })
    }

    /// Posts a zero-length SEND (`wr_id` comes back in its completion).
    pub(crate) fn post_send(&self, wr_id: u64) -> Result {
        let mut wr = bindings::ib_send_wr {
            opcode: bindings::ib_wr_opcode_IB_WR_SEND,
            send_flags: bindings::ib_send_flags_IB_SEND_SIGNALED as c_int,
            ..Default::default()
        };
        wr.__bindgen_anon_1.wr_id = wr_id;
        let mut bad: *const bindings::ib_send_wr = core::ptr::null();
        // SAFETY: As in `post_recv`.
        to_result(unsafe { bindings::ib_post_send(self.qp.as_ptr(), &wr, &mut bad) })
    }

    /// Takes up to `out.len()` completions from the CQ; returns how many.
    pub(crate) fn poll(&self, out: &mut [Completion]) -> Result<usize> {
        let mut n = 0;
        while n < out.len() {
            let mut wc = bindings::ib_wc::default();
            // SAFETY: By the type invariant the CQ is live and polled only
            // here (IB_POLL_DIRECT); `wc` is valid for one entry.
            let got = unsafe { bindings::ib_poll_cq(self.cq.as_ptr(), 1, &mut wc) };
            if got < 0 {
                return Err(Error::from_errno(got));
            }
            if got == 0 {
                break;
            }
            out[n] = Completion { status: wc.status };
            n += 1;
        }
        Ok(n)
    }
}

impl Drop for RcQp {
    fn drop(&mut self) {
        // SAFETY: By the type invariant each object is live and destroyed only
        // here, users first: the QP, then its CQ, then their PD.
        unsafe {
            bindings::ib_destroy_qp_user(self.qp.as_ptr(), core::ptr::null_mut());
            bindings::ib_free_cq(self.cq.as_ptr());
            bindings::ib_dealloc_pd_user(self.pd.as_ptr(), core::ptr::null_mut());
        }
    }
}

// SAFETY: The verbs objects are used through the RDMA core, which locks them
// itself; kernel QPs may be posted to and modified from any thread.
unsafe impl Send for RcQp {}
// SAFETY: As for `Send`: every method goes through the core's own locking.
unsafe impl Sync for RcQp {}
