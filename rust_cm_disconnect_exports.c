// SPDX-License-Identifier: GPL-2.0
/*
 * The C part of rust_cm_disconnect.
 *
 * 6.12's Rust cannot export symbols, so the C API declared in
 * include/rust_cm_disconnect.h is defined and exported here, each function
 * a wrapper of its Rust entry point in rust_cm_disconnect/shim/capi.rs:
 * it copies the caller's private data into a struct rcd_private_data (only
 * what fits, only when the caller says it is there), calls might_sleep()
 * if the function may sleep, and passes on the caller's id and QP.
 *
 * No logic lives here: every check of the caller's input and every
 * decision is taken by the Rust code.
 */

#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/string.h>

#include <rust_cm_disconnect.h>

#include "rust_cm_disconnect_shim.h"

/*
 * The caller's private data for Rust: @len and whether @private_data is
 * NULL as given, and the bytes when they fit (a longer @len is an error
 * that Rust reports without any byte read).
 */
static void rcd_copy_private_data(struct rcd_private_data *pd,
				  const void *private_data, size_t len)
{
	pd->len = len;
	pd->null = !private_data;
	if (private_data && len <= sizeof(pd->bytes))
		memcpy(pd->bytes, private_data, len);
}

/*
 * The C API (include/rust_cm_disconnect.h, documented there), implemented
 * in shim/capi.rs: Rust cannot export a symbol, so each is defined here.
 */
int rcd_send_dreq(struct ib_cm_id *cm_id, const void *private_data, size_t len)
{
	struct rcd_private_data pd = {};

	rcd_copy_private_data(&pd, private_data, len);
	return rcd_rs_send_dreq(cm_id, &pd);
}
EXPORT_SYMBOL_GPL(rcd_send_dreq);

int rcd_send_drep(struct ib_cm_id *cm_id, const void *private_data, size_t len)
{
	struct rcd_private_data pd = {};

	/*
	 * ib_send_cm_drep() copies the data with GFP_KERNEL (ib_send_cm_dreq()
	 * allocates atomically: rcd_send_dreq() may be called with a spinlock
	 * held or interrupts off, though not from an interrupt, see the header).
	 */
	might_sleep();
	rcd_copy_private_data(&pd, private_data, len);
	return rcd_rs_send_drep(cm_id, &pd);
}
EXPORT_SYMBOL_GPL(rcd_send_drep);

int rcd_disconnect(struct ib_cm_id *cm_id, struct ib_qp *qp,
		   const void *private_data, size_t len)
{
	struct rcd_private_data pd = {};

	might_sleep();
	rcd_copy_private_data(&pd, private_data, len);
	return rcd_rs_disconnect(cm_id, qp, &pd);
}
EXPORT_SYMBOL_GPL(rcd_disconnect);
