/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The test harness's (rcd_harness.ko) test-only entry point, for
 * tests/modules/ only.
 *
 * Not part of the C API (include/rust_cm_disconnect.h): exported in its own
 * symbol namespace, RCD_TEST, so that a module must say
 * MODULE_IMPORT_NS(RCD_TEST) to use it.
 */
#ifndef RCD_TEST_H
#define RCD_TEST_H

#include <linux/types.h>

/*
 * The namespace as EXPORT_SYMBOL_NS_GPL() and MODULE_IMPORT_NS() take it,
 * a string; Linux 6.12's take a bare word, which its Kbuild passes here.
 */
#ifndef RCD_TEST_NS
#define RCD_TEST_NS "RCD_TEST"
#endif

struct ib_cm_id;
struct ib_qp;

/**
 * rcd_test_with_conn() - Run @fn on a connection the harness owns.
 * @num: the connection's number in the harness's control interface.
 * @fn: called with the connection's CM id and QP, and @arg.
 * @arg: passed to @fn.
 *
 * The id and the QP are valid only during @fn: the harness's connection
 * table and the connection's own lock are held around the call, so neither
 * can be freed (timewait exit, close, device removal, unload) until @fn
 * returns. @fn must not keep them, must not call rcd_test_with_conn() and
 * must not wait for the connection's CM callbacks. It may sleep.
 *
 * The QP is lent for its state only (rcd_disconnect() moves it to the
 * error state): @fn must not post work requests on it, poll its CQ, or
 * destroy or re-create anything of it. The harness owns every work request
 * on that QP: the RDMA core polls its CQ and calls each completion's
 * wr_cqe, which must be one of the harness's own (kernel::rdma::verbs); a
 * request posted here would make it call through a foreign cookie.
 *
 * Context: process context, may sleep (it takes mutexes).
 * Return: @fn's return value; -EINVAL for a NULL @fn; -ENOENT if there is
 * no such connection; -ENOTCONN if its id is already freed; -ENODEV if it
 * has no QP; -ENODEV if the harness is going away.
 */
int rcd_test_with_conn(u32 num,
		       int (*fn)(struct ib_cm_id *id, struct ib_qp *qp, void *arg),
		       void *arg);

#endif /* RCD_TEST_H */
