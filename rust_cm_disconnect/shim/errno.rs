// SPDX-License-Identifier: GPL-2.0

//! Errnos that 6.12's `kernel::error::code` has no constant for.
//!
//! The rest come from `kernel::error::code` (`EINVAL`, `ENODEV`, `ENOSPC`,
//! ...). These take their numbers from `bindings::` (they differ between
//! architectures), which is safe but is the C bindings: each would be one
//! `declare_err!` line in the kernel crate's `error.rs`, and then this file
//! goes.

use kernel::{bindings, error::Error};

macro_rules! errnos {
    ($($fn:ident => $c:ident),* $(,)?) => {
        $(
            #[doc = concat!("`-", stringify!($c), "`.")]
            pub(crate) fn $fn() -> Error {
                Error::from_errno(-(bindings::$c as i32))
            }
        )*
    };
}

errnos! {
    eopnotsupp => EOPNOTSUPP,
    etimedout => ETIMEDOUT,
    enotconn => ENOTCONN,
    ealready => EALREADY,
    ehostunreach => EHOSTUNREACH,
    emsgsize => EMSGSIZE,
    eproto => EPROTO,
}
