// SPDX-License-Identifier: GPL-2.0

//! The module's boundary with C.
//!
//! [`capi`]: the Rust side of the C API (`rcd_send_dreq`, `rcd_send_drep`,
//! `rcd_disconnect`). 6.12's Rust cannot export symbols, so the C file
//! `rust_cm_disconnect_exports.c` defines and exports the public functions;
//! each copies its caller's private data into a [`capi::PrivateData`],
//! calls `might_sleep()` where the function may sleep, and calls the entry
//! point here, a safe `extern "C" fn` with typed arguments
//! (`Option<&CmIdRef>`, `Option<&QpRef>`). The module's Rust asks the
//! compiler to trust nothing, but these entry points rely on the C wrapper:
//! that the pointers it passes are what their Rust types say is the
//! contract of the C API's callers (`include/rust_cm_disconnect.h`, passed
//! on in `rust_cm_disconnect_shim.h`), as for any C function; and
//! `#[no_mangle]`, which lets C call them by name, is one of the attributes
//! the 2024 edition makes the programmer vouch for (RFC 3325: the compiler
//! cannot check that the name clashes with no other symbol).

#[path = "shim/capi.rs"]
pub(crate) mod capi;
