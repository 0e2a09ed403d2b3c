// SPDX-License-Identifier: GPL-2.0

//! Sleeping, which 6.12's `kernel` crate has no form of (upstream added
//! `kernel::time::delay::fsleep` in 6.15): built here from the crate's safe
//! timed wait, in safe code.

use kernel::{
    new_condvar, new_mutex, stack_pin_init,
    sync::{CondVar, CondVarTimeoutResult},
    time::msecs_to_jiffies,
};

/// Sleeps for at least `ms` milliseconds, as `msleep()`: the same number
/// of jiffies, `msecs_to_jiffies(ms) + 1` (the extra one because the first
/// tick may come at once). Process context only.
///
/// The wait is on a condition variable of its own that nothing notifies, so
/// only its timeout ends it; an early wakeup (a stray wakeup of the task, or
/// a signal) waits again for the jiffies left, as `msleep()` does. Unlike
/// `msleep()` the sleep is interruptible: a task with a signal pending (a
/// writer of `ctl` or `rmmod` being killed while it waits for callbacks)
/// goes through the scheduler on each round instead of sleeping, until the
/// time is up. The callers on workqueues (the CM's, the reaper's) take no
/// signals. Once the kernel crate has a sleep (`fsleep`, 6.15), this goes.
pub(crate) fn msleep(ms: u32) {
    stack_pin_init!(let lock = new_mutex!((), "delay::msleep::lock"));
    stack_pin_init!(let cv: CondVar = new_condvar!("delay::msleep"));
    let mut guard = lock.lock();
    let mut left = msecs_to_jiffies(ms).saturating_add(1);
    while left > 0 {
        left = match cv.wait_interruptible_timeout(&mut guard, left) {
            CondVarTimeoutResult::Timeout => 0,
            CondVarTimeoutResult::Woken { jiffies } | CondVarTimeoutResult::Signal { jiffies } => {
                jiffies
            }
        };
    }
}
