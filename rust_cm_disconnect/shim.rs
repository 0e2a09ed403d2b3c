// SPDX-License-Identifier: GPL-2.0

//! The module's boundary with C, and with what 6.12's kernel crate lacks.
//!
//! Everything of the module's own code that needs `unsafe` or `bindings::`
//! is here (the `cm`, `path` and `cma` abstractions aside, which move into
//! `kernel::rdma`); the rest of the crate is safe code over these and over
//! the kernel crate. What stays, and why:
//!
//! - [`capi`]: the C API's entry points (`rcd_send_dreq`, `rcd_send_drep`,
//!   `rcd_disconnect`, the test-only `rcd_test_with_conn`). Their arguments
//!   are raw pointers from C callers, turned into the Rust types there and
//!   nowhere else; 6.12's Rust cannot export symbols, so the C file
//!   `rust_cm_disconnect_exports.c` exports them.
//! - [`debugfs`]: a debugfs directory served by a safe [`debugfs::Ops`]
//!   (the control interface): 6.12 has no Rust debugfs, so the C file
//!   creates the files and calls back through a function table.
//!
//! Each `unsafe` block here has its `// SAFETY:` comment.

#[path = "shim/capi.rs"]
pub(crate) mod capi;
#[path = "shim/debugfs.rs"]
pub(crate) mod debugfs;
