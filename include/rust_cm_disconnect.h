/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rust_cm_disconnect: checked disconnect paths for IB CM connections.
 *
 * The C face of the Rust module rust_cm_disconnect.ko. Every function takes a
 * consumer's own struct ib_cm_id (and QP); lengths are size_t and are never
 * truncated: what does not fit the message's private data field is -EINVAL
 * and nothing is sent. All return 0 or a negative errno.
 *
 * The functions that may sleep (all but rcd_send_dreq()) begin with
 * might_sleep(): calling them in atomic context is a bug, which a kernel
 * with CONFIG_DEBUG_ATOMIC_SLEEP reports ("sleeping function called from
 * invalid context"), as it does for any sleeping function.
 */
#ifndef RUST_CM_DISCONNECT_H
#define RUST_CM_DISCONNECT_H

#include <linux/types.h>
#include <rdma/ib_cm.h>

struct ib_qp;

/*
 * Private data bytes a DREQ and a DREP carry: the CM's own limits (220 and
 * 224), under the names this header used first.
 */
#define RCD_DREQ_PRIVATE_DATA_SIZE IB_CM_DREQ_PRIVATE_DATA_SIZE
#define RCD_DREP_PRIVATE_DATA_SIZE IB_CM_DREP_PRIVATE_DATA_SIZE

/**
 * rcd_send_dreq() - Send a disconnection request, checked.
 * @cm_id: the consumer's connection identifier.
 * @private_data: bytes the peer receives with the DREQ, or NULL.
 * @len: bytes at @private_data; 0 with NULL for none.
 *
 * Unlike ib_send_cm_dreq(), whose u8 length silently wraps (300 becomes 44),
 * a @len over IB_CM_DREQ_PRIVATE_DATA_SIZE is refused.
 *
 * Context: process context; may hold a spinlock or have interrupts
 * disabled (it takes a spinlock, allocates with GFP_ATOMIC). Not from hard
 * or soft IRQ context: the CM read-locks its device's MAD agent lock, which
 * device removal (cm_remove_one()) write-locks with interrupts enabled.
 * Return: 0 on success (the id is then in DREQ_SENT); -EINVAL for a NULL
 * @cm_id, NULL @private_data with a non-zero @len, or @len > 220 (nothing
 * sent, the connection untouched); otherwise ib_send_cm_dreq()'s result:
 * -EINVAL unless the id is ESTABLISHED (a second DREQ, one after the peer's
 * DREQ, one before the connection is up).
 */
int rcd_send_dreq(struct ib_cm_id *cm_id, const void *private_data, size_t len);

/**
 * rcd_send_drep() - Answer the peer's DREQ with a DREP, checked.
 * @cm_id: the consumer's connection identifier, in DREQ_RCVD.
 * @private_data: bytes the peer receives with the DREP, or NULL.
 * @len: bytes at @private_data; 0 with NULL for none.
 *
 * The length is checked before ib_send_cm_drep() is called: 6.12's
 * ib_send_cm_drep() leaks its copy of the data when the length is too long.
 *
 * Context: process context, may sleep (ib_send_cm_drep() copies the data
 * with GFP_KERNEL).
 * Return: 0 on success; -EINVAL for a NULL @cm_id, NULL @private_data with a
 * non-zero @len, or @len > 224; otherwise ib_send_cm_drep()'s result
 * (-EINVAL unless the id is in DREQ_RCVD).
 */
int rcd_send_drep(struct ib_cm_id *cm_id, const void *private_data, size_t len);

/**
 * rcd_disconnect() - rdma_disconnect(3) for an ib_cm_id, reporting failures.
 * @cm_id: the consumer's connection identifier.
 * @qp: the connection's QP, or NULL if it has none.
 * @private_data: bytes for the DREQ or DREP, or NULL.
 * @len: bytes at @private_data.
 *
 * Moves @qp to the error state, so that its posted work requests complete
 * on the CQ with IB_WC_WR_FLUSH_ERR, then sends a DREQ if the connection is
 * ESTABLISHED, or a DREP if the peer's DREQ came first (also when it crosses
 * ours). Both steps are tried. The consumer's CM handler then sees the DREP,
 * the peer's DREQ or the DREQ's timeout (IB_CM_DREQ_ERROR), as usual.
 *
 * Unlike the kernel's rdma_disconnect(), which returns only the QP's result,
 * every failure is returned.
 *
 * Context: process context, may sleep.
 * Return: 0 on success; -EINVAL for a NULL @cm_id, NULL @private_data with a
 * non-zero @len or a @len too long for the message; -EALREADY if the
 * connection is already disconnecting (DREQ_SENT, TIMEWAIT: a second call);
 * -ENOTCONN if it is not connected (not yet established, or idle); otherwise
 * the first error of the QP modification and the DREQ/DREP.
 */
int rcd_disconnect(struct ib_cm_id *cm_id, struct ib_qp *qp,
		   const void *private_data, size_t len);

#endif /* RUST_CM_DISCONNECT_H */
