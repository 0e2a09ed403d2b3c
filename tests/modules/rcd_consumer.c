// SPDX-License-Identifier: GPL-2.0
/*
 * rcd_consumer: a C kernel consumer of rust_cm_disconnect's exported API,
 * used by tests/t_capi.sh. It uses the public header, and the test-only
 * entry point of rcd_test.h (namespace RCD_TEST, exported by the test
 * harness rcd_harness.ko) to reach a connection the harness owns.
 *
 * On load it runs, inside rcd_test_with_conn() on connection @conn (made
 * through the harness's control interface; its passive end is @conn +
 * 1000000), the steps named by @steps against its CM id and QP, which the
 * harness keeps alive for as long as that call lasts:
 *
 *   bad      bad inputs to every function: nothing may reach the CM
 *   drep     a DREP with no DREQ received (the CM's -EINVAL)
 *   disc     rcd_disconnect() with "from-c", then a second call (-EALREADY)
 *            and a DREQ in DREQ_SENT (the CM's -EINVAL)
 *   dreq     rcd_send_dreq() with "c-dreq"
 *   gone     rcd_disconnect() after the peer destroyed its id: 0, the CM
 *            still answers (see t_capi.sh)
 *   atomic   the functions that may sleep, called with interrupts off and
 *            under a spinlock with arguments they refuse before anything
 *            could sleep: -EINVAL, and the kernel's might_sleep() report
 *            for each; then rcd_send_dreq() with "atomic" under a
 *            spinlock, which is allowed: 0 and no report
 *
 * Each check logs "rcd_consumer: ok|FAIL <what>: got <ret>". The module
 * stays loaded (it holds rust_cm_disconnect and rcd_harness) until removed.
 */
#include <linux/delay.h>
#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/string.h>

#include <rust_cm_disconnect.h>

#include "rcd_test.h"

MODULE_IMPORT_NS(RCD_TEST_NS);

static unsigned int conn;
module_param(conn, uint, 0444);
MODULE_PARM_DESC(conn, "connection number in rust_cm_disconnect's ctl");

static char *steps = "bad";
module_param(steps, charp, 0444);
MODULE_PARM_DESC(steps, "comma-separated steps: bad, drep, disc, gone, dreq, atomic");

static int failures;

static void expect(const char *what, int got, int want)
{
	if (got == want) {
		pr_info("rcd_consumer: ok %s: got %d\n", what, got);
	} else {
		pr_err("rcd_consumer: FAIL %s: got %d, want %d\n", what, got, want);
		failures++;
	}
}

static void step_bad(struct ib_cm_id *id, struct ib_qp *qp)
{
	static const size_t lens[] = { 221, 255, 256, 300, 65536, SIZE_MAX };
	u8 *buf = kzalloc(65536, GFP_KERNEL);
	int i;

	if (!buf) {
		failures++;
		return;
	}
	expect("dreq NULL id", rcd_send_dreq(NULL, NULL, 0), -EINVAL);
	expect("drep NULL id", rcd_send_drep(NULL, NULL, 0), -EINVAL);
	expect("disconnect NULL id", rcd_disconnect(NULL, qp, NULL, 0), -EINVAL);
	expect("dreq NULL data, len 5", rcd_send_dreq(id, NULL, 5), -EINVAL);
	expect("drep NULL data, len 5", rcd_send_drep(id, NULL, 5), -EINVAL);
	expect("disconnect NULL data, len 5", rcd_disconnect(id, qp, NULL, 5), -EINVAL);
	for (i = 0; i < ARRAY_SIZE(lens); i++) {
		char what[64];
		/* SIZE_MAX with a real buffer: the length alone must stop it. */
		snprintf(what, sizeof(what), "dreq len %zu", lens[i]);
		expect(what, rcd_send_dreq(id, buf, lens[i]), -EINVAL);
		snprintf(what, sizeof(what), "disconnect len %zu", lens[i]);
		expect(what, rcd_disconnect(id, qp, buf, lens[i]), -EINVAL);
	}
	expect("drep len 225", rcd_send_drep(id, buf, 225), -EINVAL);
	expect("drep len SIZE_MAX", rcd_send_drep(id, buf, SIZE_MAX), -EINVAL);
	expect("with_conn NULL fn", rcd_test_with_conn(conn, NULL, NULL), -EINVAL);
	kfree(buf);
}

/*
 * A wrong-context call is the caller's bug: the functions that may sleep
 * begin with might_sleep(), and the debug kernel reports the caller. To
 * provoke that report without really sleeping in atomic context, each is
 * given an argument it refuses (a NULL id, a NULL function) right after
 * might_sleep(). The checker reports at most once a second, hence the
 * pauses. t_capi.sh matches each report to its function.
 */
static void step_atomic(struct ib_cm_id *id, struct ib_qp *qp)
{
	static DEFINE_SPINLOCK(lock);
	unsigned long flags;
	int ret;

	spin_lock_irqsave(&lock, flags);
	ret = rcd_send_drep(NULL, "x", 1);
	spin_unlock_irqrestore(&lock, flags);
	expect("drep with irqs off (NULL id)", ret, -EINVAL);
	msleep(1100);

	spin_lock(&lock);
	ret = rcd_disconnect(NULL, qp, NULL, 0);
	spin_unlock(&lock);
	expect("disconnect under a spinlock (NULL id)", ret, -EINVAL);
	msleep(1100);

	spin_lock(&lock);
	ret = rcd_test_with_conn(conn, NULL, NULL);
	spin_unlock(&lock);
	expect("with_conn under a spinlock (NULL fn)", ret, -EINVAL);
	msleep(1100);

	/* Like ib_send_cm_dreq(), allowed in any context: no report. */
	spin_lock(&lock);
	ret = rcd_send_dreq(id, "atomic", 6);
	spin_unlock(&lock);
	expect("dreq under a spinlock", ret, 0);
}

/* The steps, on @id and @qp, valid during this call only. */
static int run_steps(struct ib_cm_id *id, struct ib_qp *qp, void *arg)
{
	char *s, *list, *step;

	list = kstrdup(steps, GFP_KERNEL);
	if (!list)
		return -ENOMEM;
	s = list;
	while ((step = strsep(&s, ",")) != NULL) {
		if (!strcmp(step, "bad")) {
			step_bad(id, qp);
		} else if (!strcmp(step, "drep")) {
			expect("drep without a DREQ", rcd_send_drep(id, "x", 1), -EINVAL);
		} else if (!strcmp(step, "disc")) {
			expect("disconnect", rcd_disconnect(id, qp, "from-c", 6), 0);
			expect("second disconnect", rcd_disconnect(id, qp, NULL, 0), -EALREADY);
			expect("dreq in DREQ_SENT", rcd_send_dreq(id, NULL, 0), -EINVAL);
		} else if (!strcmp(step, "gone")) {
			expect("disconnect, peer gone", rcd_disconnect(id, qp, NULL, 0), 0);
		} else if (!strcmp(step, "atomic")) {
			step_atomic(id, qp);
		} else if (!strcmp(step, "dreq")) {
			expect("dreq", rcd_send_dreq(id, "c-dreq", 6), 0);
		} else {
			pr_err("rcd_consumer: FAIL unknown step %s\n", step);
			failures++;
		}
	}
	kfree(list);
	return 0;
}

static int __init rcd_consumer_init(void)
{
	int ret;

	ret = rcd_test_with_conn(conn, run_steps, NULL);
	if (ret) {
		pr_err("rcd_consumer: cannot run on connection %u: %d\n", conn, ret);
		return ret;
	}
	pr_info("rcd_consumer: done, %d failure(s)\n", failures);
	return 0;
}

static void __exit rcd_consumer_exit(void)
{
}

module_init(rcd_consumer_init);
module_exit(rcd_consumer_exit);
MODULE_DESCRIPTION("C consumer of rust_cm_disconnect's API (tests)");
MODULE_LICENSE("GPL");
