// SPDX-License-Identifier: GPL-2.0

//! The product, `rust_cm_disconnect.ko`, as the harness calls it: through
//! its exported C API (`include/rust_cm_disconnect.h`), like any kernel
//! consumer, so that every DREQ, DREP and disconnect the control interface
//! asks for runs the product's checks and code. The symbols resolve against
//! the product's `EXPORT_SYMBOL_GPL`s at load time (modpost records the
//! dependency: the product must be loaded first, and cannot be unloaded
//! while the harness is).
//!
//! The C API returns 0 or an errno, not which message `rcd_disconnect()`
//! sent; the harness's event record and counts need it, so [`disconnect`]
//! reads the id's state first, as the product does (see its doc).

use crate::cm::{CmIdRef, Message, State};
use kernel::{
    error::to_result,
    ffi::{c_int, c_void},
    prelude::*,
    rdma::verbs::QpRef,
};

// The header's prototypes. The `struct ib_cm_id *` and `struct ib_qp *` are
// untyped here (`CmIdRef::as_raw`, `QpRef::as_raw`, cast): the bindings'
// structs hold members that the FFI-safety lint rejects.
extern "C" {
    fn rcd_send_dreq(cm_id: *mut c_void, private_data: *const c_void, len: usize) -> c_int;
    fn rcd_send_drep(cm_id: *mut c_void, private_data: *const c_void, len: usize) -> c_int;
    fn rcd_disconnect(
        cm_id: *mut c_void,
        qp: *mut c_void,
        private_data: *const c_void,
        len: usize,
    ) -> c_int;
}

/// Sends `msg`, a DREQ or a DREP (the kernel crate's [`Message`]; the
/// product sends no other, `EINVAL`), on `id` with `data`:
/// `rcd_send_dreq()` or `rcd_send_drep()`, which check the length
/// (`EINVAL`) first.
///
/// `rcd_send_drep()` may sleep: not for atomic context (the harness calls
/// it from commands and CM callbacks, both process context).
pub(crate) fn send(msg: Message, id: &CmIdRef, data: &[u8]) -> Result {
    let f = match msg {
        Message::Dreq => rcd_send_dreq,
        Message::Drep => rcd_send_drep,
        _ => return Err(EINVAL),
    };
    // SAFETY: `id` is a live `struct ib_cm_id` that the caller keeps alive
    // for the call (a reference to it); `data` is valid for reads of
    // `data.len()` bytes for the call, and the product reads no more (it
    // copies what it sends).
    to_result(unsafe { f(id.as_raw().cast(), data.as_ptr().cast(), data.len()) })
}

/// `rcd_disconnect()` of `id` and `qp` with `data`.
///
/// As the product's (`rust_cm_disconnect/disconnect.rs`): refused with
/// nothing done (the outer error) for `EALREADY`, `ENOTCONN`, or data too
/// long for the message; otherwise the message sent (or tried) and the
/// result. The message is the one the id's state called for when the
/// harness read it, just before the call: a peer's DREQ that lands between
/// the two reads makes the product answer with a DREP where the harness
/// counts and records a DREQ (`stats`, a DREQ_SENT event; the peer's DREQ
/// itself is recorded as usual).
pub(crate) fn disconnect(
    id: &CmIdRef,
    qp: Option<&QpRef>,
    data: &[u8],
) -> Result<(Message, Result)> {
    let msg = match id.state() {
        State::DreqRcvd => Message::Drep,
        _ => Message::Dreq,
    };
    let qp = qp.map_or(core::ptr::null_mut(), |qp| qp.as_raw().cast());
    // SAFETY: `id` is a live `struct ib_cm_id` kept alive by the caller for
    // the call; `qp` is NULL or the connection's live QP (from a reference
    // the caller holds for the call); `data` is valid for reads of
    // `data.len()` bytes.
    let res = to_result(unsafe {
        rcd_disconnect(id.as_raw().cast(), qp, data.as_ptr().cast(), data.len())
    });
    match res {
        Err(e) if e == EALREADY || e == ENOTCONN => Err(e),
        Err(e) if e == EINVAL && data.len() > msg.private_data_size() => Err(e),
        res => Ok((msg, res)),
    }
}
