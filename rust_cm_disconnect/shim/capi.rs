// SPDX-License-Identifier: GPL-2.0

//! The C API of `include/rust_cm_disconnect.h`, for a consumer's own
//! `struct ib_cm_id` and QP. `rust_cm_disconnect_exports.c` defines and
//! exports the public functions (`EXPORT_SYMBOL_GPL`: 6.12 has no way to
//! export from Rust), and calls these entry points.
//!
//! The entry points are safe `extern "C" fn`s with typed arguments: an id is
//! an `Option<&CmIdRef>`, a QP an `Option<&QpRef>` (both
//! `#[repr(transparent)]` over the C struct, so the same ABI as a nullable
//! C pointer), the caller's private data a [`PrivateData`] the C wrapper
//! filled. That they are what their types say is the C wrapper's word: it
//! passes on its caller's pointers, whose contract is the header's (a live
//! id, not destroyed during the call; the connection's live QP), and a
//! pointer to its own [`PrivateData`]. `#[no_mangle]` makes the name the C
//! wrapper's to call; the 2024 edition asks the programmer to vouch for it
//! (RFC 3325), the compiler cannot check that no other symbol has it.
//!
//! Every check of the caller's input is here: a length is compared with the
//! message's field before any slice is made (so `SIZE_MAX` is just too
//! long), NULL with a length is `EINVAL`, a NULL id is `EINVAL`. The C
//! wrappers of the functions that may sleep call `might_sleep()` first, so a
//! caller in atomic context gets the kernel's own report
//! (`CONFIG_DEBUG_ATOMIC_SLEEP`) naming the function it called.

use crate::{
    cm::{CmIdRef, DREP_PRIVATE_DATA_SIZE},
    disconnect::{self, Message},
    verbs::QpRef,
};
use kernel::{
    error::{code::*, from_result},
    ffi::c_int,
    prelude::*,
};

/// The caller's private data, as the C wrapper copies it:
/// `struct rcd_private_data` in `rust_cm_disconnect_shim.h`.
#[repr(C)]
pub(crate) struct PrivateData {
    /// The caller's bytes when `len` fits here (the larger field, the
    /// DREP's), zeroes after them and otherwise.
    bytes: [u8; DREP_PRIVATE_DATA_SIZE],
    /// The caller's length, as given.
    len: usize,
    /// Whether the caller's pointer was NULL.
    null: bool,
}

// The layout `rust_cm_disconnect_shim.h` checks too (`static_assert`): the
// bytes, then the length at the next word, then the flag.
const _: () = assert!(core::mem::offset_of!(PrivateData, len) == DREP_PRIVATE_DATA_SIZE);
const _: () = assert!(
    core::mem::offset_of!(PrivateData, null)
        == DREP_PRIVATE_DATA_SIZE + core::mem::size_of::<usize>()
);

impl PrivateData {
    /// The caller's data: `EINVAL` if longer than `max`, or NULL with a
    /// length.
    fn get(&self, max: usize) -> Result<&[u8]> {
        if self.len > max {
            return Err(EINVAL);
        }
        if self.null {
            return if self.len == 0 { Ok(&[]) } else { Err(EINVAL) };
        }
        self.bytes.get(..self.len).ok_or(EINVAL)
    }
}

/// Sends `msg` with the caller's private data, checked first: `EINVAL` for
/// a NULL id, NULL data with a length, or more than the message carries.
fn checked_send(cm_id: Option<&CmIdRef>, data: &PrivateData, msg: Message) -> c_int {
    from_result(|| {
        let id = cm_id.ok_or(EINVAL)?;
        msg.send(id, data.get(msg.max_private_data())?)?;
        Ok(0)
    })
}

/// `rcd_send_dreq()`: see `include/rust_cm_disconnect.h`.
#[no_mangle]
pub(crate) extern "C" fn rcd_rs_send_dreq(cm_id: Option<&CmIdRef>, data: &PrivateData) -> c_int {
    checked_send(cm_id, data, Message::Dreq)
}

/// `rcd_send_drep()`: see `include/rust_cm_disconnect.h`. The C wrapper
/// calls `might_sleep()` first.
#[no_mangle]
pub(crate) extern "C" fn rcd_rs_send_drep(cm_id: Option<&CmIdRef>, data: &PrivateData) -> c_int {
    checked_send(cm_id, data, Message::Drep)
}

/// `rcd_disconnect()`: see `include/rust_cm_disconnect.h`. The C wrapper
/// calls `might_sleep()` first.
#[no_mangle]
pub(crate) extern "C" fn rcd_rs_disconnect(
    cm_id: Option<&CmIdRef>,
    qp: Option<&QpRef>,
    data: &PrivateData,
) -> c_int {
    from_result(|| {
        let id = cm_id.ok_or(EINVAL)?;
        // The bound is the larger field (the DREP's); `disconnect` checks the
        // message it picks.
        let data = data.get(Message::Drep.max_private_data())?;
        disconnect::disconnect(id, qp, data)?.1?;
        Ok(0)
    })
}
