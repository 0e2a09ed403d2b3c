/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Private interface between the Rust and the C parts of rust_cm_disconnect.
 * Not for consumers: they include include/rust_cm_disconnect.h.
 * Mirrored by hand in rust_cm_disconnect/shim/capi.rs.
 *
 * The Rust entry points below are safe Rust functions whose arguments are
 * typed: an id is an Option<&CmIdRef>, a QP an Option<&QpRef> (the same ABI
 * as a nullable pointer), @pd a &PrivateData. So the C side upholds, for
 * the duration of each call:
 *
 *  - @cm_id is NULL or a live struct ib_cm_id, not destroyed during the
 *    call (the contract of the public function's caller, passed on);
 *  - @qp is NULL or a live struct ib_qp, the connection's (likewise);
 *  - @pd points to an initialized struct rcd_private_data (the wrapper's
 *    own, zeroed, then filled by rcd_copy_private_data());
 *  - the functions that may sleep are called in process context, after
 *    might_sleep() (a wrong context is the caller's bug, reported by the
 *    kernel as for any sleeping function).
 */
#ifndef RUST_CM_DISCONNECT_SHIM_H
#define RUST_CM_DISCONNECT_SHIM_H

#include <linux/build_bug.h>
#include <linux/stddef.h>
#include <linux/types.h>
#include <rdma/ib_cm.h>

struct ib_cm_id;
struct ib_qp;

/*
 * The caller's private data, as the C wrappers copy it for Rust
 * (PrivateData in shim/capi.rs): @bytes holds the caller's @len bytes when
 * they fit (the DREP's field, the larger), zeroes otherwise; @len is the
 * caller's length as given and @null whether its pointer was NULL, so
 * that Rust takes every decision (EINVAL for too long or NULL with a
 * length).
 */
struct rcd_private_data {
	u8 bytes[IB_CM_DREP_PRIVATE_DATA_SIZE];
	size_t len;
	bool null;
};

/* The layout capi.rs checks too (offset_of!). */
static_assert(offsetof(struct rcd_private_data, len) == IB_CM_DREP_PRIVATE_DATA_SIZE);
static_assert(offsetof(struct rcd_private_data, null) ==
	      IB_CM_DREP_PRIVATE_DATA_SIZE + sizeof(size_t));

/*
 * The C API's implementations (shim/capi.rs), which rust_cm_disconnect_exports.c
 * wraps and exports under their public names (include/rust_cm_disconnect.h):
 * Rust cannot export a symbol.
 */
int rcd_rs_send_dreq(struct ib_cm_id *cm_id, const struct rcd_private_data *pd);
int rcd_rs_send_drep(struct ib_cm_id *cm_id, const struct rcd_private_data *pd);
int rcd_rs_disconnect(struct ib_cm_id *cm_id, struct ib_qp *qp,
		      const struct rcd_private_data *pd);

#endif
