// SPDX-License-Identifier: GPL-2.0

//! What still differs between the kernel crates the harness builds for.
//!
//! The harness builds against Linux 7.3 and against Linux 6.12 with the
//! series, which gives 6.12 7.3's spelling of what the harness uses
//! (`module!`'s `authors` and `LocalModule`, `sync::aref::ARef`,
//! `time::Monotonic`, `sync::global_lock!`, `prelude::fmt`,
//! `kernel::debugfs::Scope` with callback files). The one difference left is
//! here, and only here: `Kbuild` passes `--cfg rcd_kernel_7_3` when the
//! kernel's `VERSION.PATCHLEVEL` is 7.3 or later.

/// Sleeps at least `ms` milliseconds: 7.3's `fsleep`, the series' `msleep`
/// on 6.12 (which has no Rust `fsleep`).
pub(crate) fn sleep_ms(ms: u32) {
    #[cfg(rcd_kernel_7_3)]
    kernel::time::delay::fsleep(kernel::time::Delta::from_millis(i64::from(ms)));
    #[cfg(not(rcd_kernel_7_3))]
    kernel::time::msleep(ms);
}
