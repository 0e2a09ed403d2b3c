// SPDX-License-Identifier: GPL-2.0

//! Errnos that 6.12's `kernel::error::code` has no constant for.

use kernel::{bindings, error::Error};

macro_rules! errnos {
    ($($fn:ident => $c:ident),* $(,)?) => {
        $(
            #[doc = concat!("`-", stringify!($c), "`.")]
            #[allow(dead_code)]
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
    eisconn => EISCONN,
    ealready => EALREADY,
    econnreset => ECONNRESET,
    econnrefused => ECONNREFUSED,
    enodata => ENODATA,
    ehostunreach => EHOSTUNREACH,
    eaddrinuse => EADDRINUSE,
    emsgsize => EMSGSIZE,
    enospc => ENOSPC,
    eproto => EPROTO,
}
