// SPDX-License-Identifier: GPL-2.0

//! The C API of `include/rust_cm_disconnect.h`, for a consumer's own
//! `struct ib_cm_id` and QP. `rust_cm_disconnect_exports.c` exports these
//! functions (`EXPORT_SYMBOL_GPL`): 6.12 has no way to export from Rust.
//!
//! The C arguments are turned into the Rust types here and nowhere else: a
//! length is compared with the message's field before any slice is made
//! (so `SIZE_MAX` is just too long), NULL with a length is `EINVAL`. The
//! functions that may sleep say so first with `might_sleep()`: a caller in
//! atomic context is a bug of the caller, which the kernel's own checker
//! (`CONFIG_DEBUG_ATOMIC_SLEEP`) reports, as for any sleeping function.

use crate::{
    cm::CmIdRef,
    conn::Core,
    disconnect::{self, Message},
    verbs::QpRef,
};
use core::{
    ptr::NonNull,
    sync::atomic::{AtomicPtr, Ordering},
};
use kernel::{
    bindings,
    error::{code::*, from_result},
    ffi::{c_int, c_void},
    prelude::*,
    sync::Arc,
};

extern "C" {
    /// In `rust_cm_disconnect_exports.c`: `might_sleep()`.
    fn rcd_might_sleep();
}

/// `might_sleep()`: annotates a function that may sleep; in atomic context
/// the debug kernel reports the caller.
fn might_sleep() {
    // SAFETY: `might_sleep()` only checks and reports the current context;
    // it may be called from any context.
    unsafe { rcd_might_sleep() }
}

/// The caller's private data: `EINVAL` if longer than `max`, or NULL with a
/// length.
///
/// # Safety
///
/// `ptr` must be NULL or valid for reads of `len` bytes during `'a`.
unsafe fn c_private_data<'a>(ptr: *const c_void, len: usize, max: usize) -> Result<&'a [u8]> {
    if len > max {
        return Err(EINVAL);
    }
    if ptr.is_null() {
        return if len == 0 { Ok(&[]) } else { Err(EINVAL) };
    }
    // SAFETY: `ptr` is valid for `len` bytes (the caller's contract), and
    // `len <= max`, a few hundred bytes.
    Ok(unsafe { core::slice::from_raw_parts(ptr.cast::<u8>(), len) })
}

/// The caller's id, or `EINVAL` for NULL.
///
/// # Safety
///
/// `id` must be NULL or a live `struct ib_cm_id` during `'a`.
unsafe fn borrow_id<'a>(id: *mut bindings::ib_cm_id) -> Result<&'a CmIdRef> {
    if id.is_null() {
        return Err(EINVAL);
    }
    // SAFETY: Not NULL, so live for `'a` by the caller's contract.
    Ok(unsafe { CmIdRef::from_raw(id) })
}

/// Sends `msg` with the caller's private data, checked first (after
/// `might_sleep()` if the send may sleep): `EINVAL` for a NULL id, NULL
/// data with a length, or more than the message carries.
///
/// # Safety
///
/// As for [`rcd_rs_send_dreq`].
unsafe fn checked_send(
    cm_id: *mut bindings::ib_cm_id,
    private_data: *const c_void,
    len: usize,
    msg: Message,
) -> c_int {
    from_result(|| {
        if msg.send_may_sleep() {
            might_sleep();
        }
        // SAFETY: The caller's contract, as documented for `rcd_send_dreq`.
        let (id, data) = unsafe {
            (
                borrow_id(cm_id)?,
                c_private_data(private_data, len, msg.max_private_data())?,
            )
        };
        msg.send(id, data)?;
        Ok(0)
    })
}

/// `rcd_send_dreq()` (`rust_cm_disconnect_exports.c` exports it): see
/// `include/rust_cm_disconnect.h`.
///
/// # Safety
///
/// `cm_id` must be NULL or a live id of the caller, not destroyed during the
/// call; `private_data` NULL or valid for `len` bytes.
#[no_mangle]
pub(crate) unsafe extern "C" fn rcd_rs_send_dreq(
    cm_id: *mut bindings::ib_cm_id,
    private_data: *const c_void,
    len: usize,
) -> c_int {
    // SAFETY: Our caller's contract is `checked_send`'s.
    unsafe { checked_send(cm_id, private_data, len, Message::Dreq) }
}

/// `rcd_send_drep()` (`rust_cm_disconnect_exports.c` exports it): see
/// `include/rust_cm_disconnect.h`.
///
/// # Safety
///
/// As for [`rcd_rs_send_dreq`]; the caller may sleep.
#[no_mangle]
pub(crate) unsafe extern "C" fn rcd_rs_send_drep(
    cm_id: *mut bindings::ib_cm_id,
    private_data: *const c_void,
    len: usize,
) -> c_int {
    // SAFETY: Our caller's contract is `checked_send`'s.
    unsafe { checked_send(cm_id, private_data, len, Message::Drep) }
}

/// `rcd_disconnect()` (`rust_cm_disconnect_exports.c` exports it): see
/// `include/rust_cm_disconnect.h`.
///
/// # Safety
///
/// As for [`rcd_rs_send_dreq`]; `qp` must be NULL or the connection's live QP;
/// the caller may sleep.
#[no_mangle]
pub(crate) unsafe extern "C" fn rcd_rs_disconnect(
    cm_id: *mut bindings::ib_cm_id,
    qp: *mut bindings::ib_qp,
    private_data: *const c_void,
    len: usize,
) -> c_int {
    from_result(|| {
        might_sleep();
        // SAFETY: The caller's contract. The bound is the larger field (the
        // DREP's); `disconnect` checks the message it picks.
        let (id, data) = unsafe {
            (
                borrow_id(cm_id)?,
                c_private_data(private_data, len, Message::Drep.max_private_data())?,
            )
        };
        // SAFETY: NULL, or the caller's live QP.
        let qp = (!qp.is_null()).then(|| unsafe { QpRef::from_raw(qp) });
        disconnect::disconnect(id, qp, data)?.1?;
        Ok(0)
    })
}

/// The module's state, for the C functions that reach it.
static CORE: AtomicPtr<Core> = AtomicPtr::new(core::ptr::null_mut());

/// Makes the module's state reachable from the C API while it lives.
///
/// # Invariants
///
/// `CORE` holds a reference of an `Arc<Core>` taken with [`Arc::into_raw`]
/// from `new` until `drop`.
pub(crate) struct Registration(());

impl Registration {
    pub(crate) fn new(core: Arc<Core>) -> Self {
        CORE.store(Arc::into_raw(core).cast_mut(), Ordering::Release);
        // INVARIANT: stored just above.
        Self(())
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let core = CORE.swap(core::ptr::null_mut(), Ordering::AcqRel);
        // SAFETY: The reference stored in `new` (type invariant). No consumer
        // calls in any more: consumers hold the module while they can.
        drop(unsafe { Arc::from_raw(core) });
    }
}

/// What `rcd_test_with_conn()` calls.
type WithConnFn = unsafe extern "C" fn(
    id: *mut bindings::ib_cm_id,
    qp: *mut bindings::ib_qp,
    arg: *mut c_void,
) -> c_int;

/// `rcd_test_with_conn()`: see `tests/modules/rcd_test.h`. Test-only,
/// exported in the `RCD_TEST` namespace: it lends a connection the module
/// owns to C test code for the duration of one call, and nothing escapes
/// it (the id and QP are valid only while `f` runs, under the locks that
/// keep them).
///
/// # Safety
///
/// `f` must be NULL or a function that may be called with a live id and
/// QP and `arg`, that does not keep them past its return, does not call
/// `rcd_test_with_conn()`, does not wait for the connection's callbacks,
/// and neither posts on the QP nor polls its CQ (the module trusts every
/// completion's `wr_id` to be one of its own requests: `RcQp::poll_one`).
#[no_mangle]
pub(crate) unsafe extern "C" fn rcd_rs_test_with_conn(
    num: u32,
    f: Option<WithConnFn>,
    arg: *mut c_void,
) -> c_int {
    from_result(|| {
        // The locks are mutexes.
        might_sleep();
        let f = f.ok_or(EINVAL)?;
        let core = NonNull::new(CORE.load(Ordering::Acquire)).ok_or(ENODEV)?;
        // SAFETY: `CORE` holds a reference while the module is loaded, which
        // it is while a consumer runs.
        let core = unsafe { core.as_ref() };
        // SAFETY: The id and QP are live while `with_test_conn` holds its
        // locks, that is, during `f`; the rest is the caller's contract.
        core.with_test_conn(num, |id, qp| unsafe { f(id.as_raw(), qp.as_raw(), arg) })
    })
}
