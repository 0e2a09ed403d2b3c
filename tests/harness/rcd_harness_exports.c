// SPDX-License-Identifier: GPL-2.0
/*
 * The C part of rcd_harness: the test-only rcd_test_with_conn()
 * (tests/modules/rcd_test.h), implemented in test_conn.rs and defined and
 * exported here because 6.12's Rust cannot export a symbol. In its own
 * namespace: a module must MODULE_IMPORT_NS(RCD_TEST_NS) (rcd_test.h) to link
 * against it.
 * The locks it takes are mutexes.
 *
 * rcd_rs_test_with_conn() is a safe Rust function whose @fn is typed: C
 * upholds that @fn is NULL or a function that takes the id and QP it is
 * lent only for its call (rcd_test.h, passed on from the caller).
 */

#include <linux/kernel.h>
#include <linux/module.h>

#include "rcd_test.h"

int rcd_rs_test_with_conn(u32 num,
			  int (*fn)(struct ib_cm_id *id, struct ib_qp *qp, void *arg),
			  void *arg);

int rcd_test_with_conn(u32 num,
		       int (*fn)(struct ib_cm_id *id, struct ib_qp *qp, void *arg),
		       void *arg)
{
	might_sleep();
	return rcd_rs_test_with_conn(num, fn, arg);
}
EXPORT_SYMBOL_NS_GPL(rcd_test_with_conn, RCD_TEST_NS);
