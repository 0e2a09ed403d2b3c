// SPDX-License-Identifier: GPL-2.0

//! `rcd_test_with_conn()` (`tests/modules/rcd_test.h`): lends one of the
//! harness's connections to C test code (`tests/modules/rcd_consumer.c`) for
//! one call, so that the product's C API can be tried on a connection the
//! harness made. `rcd_harness_exports.c` defines and exports it in the
//! `RCD_TEST` namespace (6.12's Rust cannot export a symbol) and calls
//! [`rcd_rs_test_with_conn`].

use crate::{cm::CmIdRef, conn::Core};
use kernel::rdma::verbs::QpRef;
use kernel::{
    error::from_result,
    ffi::{c_int, c_void},
    prelude::*,
};

/// What `rcd_test_with_conn()` calls: a connection's id and QP, lent for
/// the call, and the caller's argument.
type WithConnFn = extern "C" fn(id: &CmIdRef, qp: &QpRef, arg: *mut c_void) -> c_int;

/// `rcd_test_with_conn()`: see `tests/modules/rcd_test.h`. It lends a
/// connection the harness owns to C test code for the duration of one
/// call, and nothing escapes it (the id and QP are valid only while `f`
/// runs, under the locks that keep them). The C wrapper calls
/// `might_sleep()` first (the locks are mutexes).
///
/// `f` is the C caller's function, which the header asks not to keep the
/// id or QP past its return, not to call `rcd_test_with_conn()`, not to wait
/// for the connection's callbacks, and neither to post on the QP nor to poll
/// its CQ (the RDMA core calls every completion's `wr_cqe`, which must be
/// one of the QP's own: `kernel::rdma::verbs`). `#[no_mangle]` makes the name the C
/// wrapper's to call (RFC 3325: the programmer vouches that no other symbol
/// has it).
#[no_mangle]
pub(crate) extern "C" fn rcd_rs_test_with_conn(
    num: u32,
    f: Option<WithConnFn>,
    arg: *mut c_void,
) -> c_int {
    from_result(|| {
        let f = f.ok_or(EINVAL)?;
        let core = Core::get().ok_or(ENODEV)?;
        core.with_test_conn(num, |id, qp| f(id, qp, arg))
    })
}
