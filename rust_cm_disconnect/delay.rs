// SPDX-License-Identifier: GPL-2.0

//! Sleeping, which 6.12's `kernel` crate has no safe form of.

use kernel::bindings;

/// Sleeps for at least `ms` milliseconds. Process context only.
pub(crate) fn msleep(ms: u32) {
    // SAFETY: `msleep` takes any value; callers are in process context
    // (CM callbacks run on the CM's workqueue).
    unsafe { bindings::msleep(ms) }
}
