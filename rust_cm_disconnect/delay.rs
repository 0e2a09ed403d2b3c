// SPDX-License-Identifier: GPL-2.0

//! Sleeping, which 6.12's `kernel` crate has no form of (upstream added
//! `kernel::time::delay::fsleep` in 6.15): built here from the crate's safe
//! timed wait, in safe code.

use kernel::{
    new_condvar, new_mutex, stack_pin_init,
    sync::{CondVar, CondVarTimeoutResult},
    time::{msecs_to_jiffies, Ktime},
};

/// Sleeps for at least `ms` milliseconds, as `msleep()`. Process context
/// only.
///
/// The wait is on a condition variable of its own that nothing notifies, so
/// only its timeout ends it; an early wakeup (a stray wakeup of the task, or
/// a signal) waits again for what is left. Unlike `msleep()` the sleep is
/// interruptible: a task with a signal pending (a writer of `ctl` or
/// `rmmod` being killed while it waits for callbacks) goes through the
/// scheduler on each round instead of sleeping, until the time is up. The
/// callers on workqueues (the CM's, the reaper's) take no signals. Once the
/// kernel crate has a sleep (`fsleep`, 6.15), this goes.
pub(crate) fn msleep(ms: u32) {
    stack_pin_init!(let lock = new_mutex!((), "delay::msleep::lock"));
    stack_pin_init!(let cv: CondVar = new_condvar!("delay::msleep"));
    let end = Ktime::ktime_get().to_ms() + i64::from(ms);
    let mut guard = lock.lock();
    let mut left = ms;
    while left > 0 {
        if let CondVarTimeoutResult::Timeout =
            cv.wait_interruptible_timeout(&mut guard, msecs_to_jiffies(left))
        {
            return;
        }
        left = u32::try_from(end - Ktime::ktime_get().to_ms()).unwrap_or(0);
    }
}
