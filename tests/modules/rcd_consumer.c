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
 * The steps that prove the product's own promises (tests/t_promise.sh)
 * watch what the call does in this task (struct watch below: kprobes on
 * ib_modify_qp(), ib_send_cm_dreq(), ib_send_cm_drep() and
 * rdma_create_ah(), counted and ordered), and some make the CM or the QP
 * fail where timing never would:
 *
 *   max      rcd_send_dreq() with 220 pattern bytes (pat:220): 0
 *   drepmax  rcd_send_drep() with 224 pattern bytes, in DREQ_RCVD: 0
 *   disc220  rcd_disconnect() with 220 pattern bytes: 0, QP then DREQ
 *   disc224  rcd_disconnect() with 224 pattern bytes, in DREQ_RCVD: 0, DREP
 *   drepbad  in DREQ_RCVD, every DREP length the product must refuse
 *            (225, 255, 256, SIZE_MAX, NULL with 5): -EINVAL, and neither
 *            the QP nor the CM called
 *   nullqp   rcd_disconnect() with a NULL QP on a connected id: 0, the
 *            DREQ sent, no QP touched
 *   irqoff   rcd_send_dreq() with interrupts disabled: 0
 *   nomem    rcd_disconnect() whose DREQ or DREP finds no memory (the
 *            MAD's address handle failed through fail_nth): -ENOMEM, the
 *            QP in ERR all the same, the id in TIMEWAIT; a second call
 *            -EALREADY (the product's TIMEWAIT branch)
 *   qpfail   rcd_disconnect() whose QP modify fails (ib_modify_qp()'s
 *            result replaced with -EIO by a kretprobe): -EIO, and the
 *            DREQ sent all the same
 *   cross    rcd_disconnect() held at the entry of ib_send_cm_dreq() until
 *            the peer's DREQ has moved the id to DREQ_RCVD (the window
 *            between the product's read of the state and its send): the
 *            DREQ refused, a DREP sent instead, 0; the step says whether
 *            the window was reached
 *
 * Each check logs "rcd_consumer: ok|FAIL <what>: got <ret>". The module
 * stays loaded (it holds rust_cm_disconnect and rcd_harness) until removed.
 */
#include <linux/delay.h>
#include <linux/kernel.h>
#include <linux/kprobes.h>
#include <linux/ptrace.h>
#include <linux/sched.h>
#include <linux/jiffies.h>
#include <linux/timekeeping.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/string.h>

#include <rdma/ib_verbs.h>
#include <rust_cm_disconnect.h>

#include "rcd_test.h"

MODULE_IMPORT_NS(RCD_TEST_NS);

static unsigned int conn;
module_param(conn, uint, 0444);
MODULE_PARM_DESC(conn, "connection number in rust_cm_disconnect's ctl");

static char *steps = "bad";
module_param(steps, charp, 0444);
MODULE_PARM_DESC(steps, "comma-separated steps (see the file's header)");

static unsigned int hold_ms = 60000;
module_param(hold_ms, uint, 0444);
MODULE_PARM_DESC(hold_ms, "cross: how long the DREQ call is held at most");

/* cross: 1 while the call is held in the window, 2 once it went on. */
static int window;
module_param(window, int, 0444);
MODULE_PARM_DESC(window, "cross: 0 before the window, 1 in it, 2 after it");

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

static void expect_true(const char *what, bool ok)
{
	if (ok) {
		pr_info("rcd_consumer: ok %s\n", what);
	} else {
		pr_err("rcd_consumer: FAIL %s\n", what);
		failures++;
	}
}

/*
 * What a call of the product does, seen from inside this task: the CM's
 * and the QP's entry points it reaches, counted and numbered in the order
 * of their first call, and the faults a step asks for. The probes act
 * only for @task (the step's own, set while it calls the product), so the
 * harness's and the CM's own calls on other tasks pass untouched.
 *
 * The handlers run in the probes' context (interrupts off): they read and
 * write these plain fields of the one watched task, which the step reads
 * after its call returned.
 */
static struct watch {
	struct task_struct *task;
	struct ib_cm_id *id;
	int seq;
	int n_modify, n_dreq, n_drep, n_ah;
	int seq_modify, seq_dreq, seq_drep;
	/* nomem: the next rdma_create_ah() of the task fails (fail_nth). */
	bool fail_ah;
	int ah_failed;
	/* qpfail: ib_modify_qp()'s result, replaced. */
	int modify_ret;
	/* cross: ib_send_cm_dreq() on @id held until @id is DREQ_RCVD. */
	bool hold;
	int state_in, state_out;
	u64 held_ns;
} watch;

static void watch_begin(struct ib_cm_id *id)
{
	memset(&watch, 0, sizeof(watch));
	watch.id = id;
	/* The probes see the task once the rest is in place. */
	smp_store_release(&watch.task, current);
}

static void watch_end(void)
{
	WRITE_ONCE(watch.task, NULL);
	/* A probe that saw the task has finished: they run with irqs off. */
	synchronize_rcu();
}

static bool watched(void)
{
	return READ_ONCE(watch.task) == current;
}

#if IS_ENABLED(CONFIG_KPROBES)
static int on_modify_qp(struct kprobe *p, struct pt_regs *regs)
{
	if (watched() && !watch.n_modify++)
		watch.seq_modify = ++watch.seq;
	return 0;
}

/* The kretprobe's instances: only the watched task's calls of a qpfail step. */
static int on_modify_qp_entry(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	return watched() && watch.modify_ret ? 0 : 1;
}

static int on_modify_qp_ret(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	regs_set_return_value(regs, watch.modify_ret);
	return 0;
}

/*
 * cross: where the held call of ib_send_cm_dreq() goes. It has the same
 * prototype and runs in the caller's task, on the caller's stack, in its
 * place (on_send_dreq() moved the instruction pointer here at the entry of
 * ib_send_cm_dreq()); rcd_disconnect() may sleep, so this may too. It
 * waits for the peer's DREQ to move the id to DREQ_RCVD (t_promise.sh lets
 * it through once it sees @window at 1), then makes the real call.
 */
static int cross_detour(struct ib_cm_id *id, const void *data, u8 len)
{
	u64 t0 = ktime_get_ns();
	unsigned long end = jiffies + msecs_to_jiffies(hold_ms);

	WRITE_ONCE(window, 1);
	while (READ_ONCE(id->state) != IB_CM_DREQ_RCVD && time_before(jiffies, end))
		usleep_range(5000, 10000);
	watch.state_out = READ_ONCE(id->state);
	watch.held_ns = ktime_get_ns() - t0;
	WRITE_ONCE(window, 2);
	return ib_send_cm_dreq(id, data, len);
}

static int on_send_dreq(struct kprobe *p, struct pt_regs *regs)
{
	struct ib_cm_id *id = (void *)regs_get_kernel_argument(regs, 0);

	if (!watched())
		return 0;
	if (watch.hold && id == watch.id) {
		/*
		 * The window of rdma_disconnect(3): the product has read the
		 * state and is about to send its DREQ. Run cross_detour()
		 * instead (returning 1 tells kprobes the handler moved the
		 * instruction pointer: no single step of the probed one).
		 */
		watch.hold = false;
		watch.state_in = READ_ONCE(id->state);
		instruction_pointer_set(regs, (unsigned long)cross_detour);
		return 1;
	}
	if (!watch.n_dreq++)
		watch.seq_dreq = ++watch.seq;
	return 0;
}

/*
 * A probe with a post handler is never optimized into a jump, which would
 * ignore on_send_dreq()'s change of the instruction pointer.
 */
static void no_opt(struct kprobe *p, struct pt_regs *regs, unsigned long flags)
{
}

static int on_send_drep(struct kprobe *p, struct pt_regs *regs)
{
	if (watched() && !watch.n_drep++)
		watch.seq_drep = ++watch.seq;
	return 0;
}

static int on_create_ah(struct kprobe *p, struct pt_regs *regs)
{
	if (!watched())
		return 0;
	watch.n_ah++;
	if (watch.fail_ah) {
		/*
		 * The AH is the first atomic allocation of the CM's message
		 * (cm_alloc_msg_agent(): rdma_create_ah(.., 0), then the MAD):
		 * failslab fails the task's next allocation that may not sleep.
		 */
		watch.fail_ah = false;
#ifdef CONFIG_FAULT_INJECTION
		current->fail_nth = 1;
		watch.ah_failed = 1;
#endif
	}
	return 0;
}

static struct kprobe kp_modify = { .symbol_name = "ib_modify_qp", .pre_handler = on_modify_qp };
static struct kprobe kp_dreq = {
	.symbol_name = "ib_send_cm_dreq",
	.pre_handler = on_send_dreq,
	.post_handler = no_opt,
};

static struct kprobe kp_drep = { .symbol_name = "ib_send_cm_drep", .pre_handler = on_send_drep };
static struct kprobe kp_ah = { .symbol_name = "rdma_create_ah", .pre_handler = on_create_ah };
static struct kprobe *kps[] = { &kp_modify, &kp_dreq, &kp_drep, &kp_ah };
static struct kretprobe krp_modify = {
	.kp.symbol_name = "ib_modify_qp",
	.entry_handler = on_modify_qp_entry,
	.handler = on_modify_qp_ret,
	.maxactive = 4,
};

static int probes_register(void)
{
	int ret = register_kprobes(kps, ARRAY_SIZE(kps));

	if (ret)
		return ret;
	ret = register_kretprobe(&krp_modify);
	if (ret)
		unregister_kprobes(kps, ARRAY_SIZE(kps));
	return ret;
}

static void probes_unregister(void)
{
	unregister_kretprobe(&krp_modify);
	unregister_kprobes(kps, ARRAY_SIZE(kps));
}
#else
/* The watched steps need the debug kernel's kprobes (kernel/debug.config). */
static int probes_register(void)
{
	pr_err("rcd_consumer: FAIL no CONFIG_KPROBES: the calls cannot be watched\n");
	failures++;
	return 0;
}

static void probes_unregister(void)
{
}
#endif

/* The QP's state, as its device says. */
static int qp_state(struct ib_qp *qp)
{
	struct ib_qp_init_attr init;
	struct ib_qp_attr attr;
	int ret;

	ret = ib_query_qp(qp, &attr, IB_QP_STATE, &init);
	return ret ? ret : attr.qp_state;
}

/* Nothing of the refused calls reached the QP or the CM. */
static void expect_untouched(const char *what)
{
	char buf[96];

	snprintf(buf, sizeof(buf), "%s: no QP modify, DREQ or DREP call (%d, %d, %d)", what,
		 watch.n_modify, watch.n_dreq, watch.n_drep);
	expect_true(buf, !watch.n_modify && !watch.n_dreq && !watch.n_drep);
}

/* @len bytes 1, 2, .., 255, 1, .. (the harness's pat:N). */
static u8 *pattern(size_t len)
{
	u8 *buf = kmalloc(len, GFP_KERNEL);
	size_t i;

	for (i = 0; buf && i < len; i++)
		buf[i] = i % 255 + 1;
	return buf;
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

/* step_bad, watched: nothing of it may reach the QP or the CM. */
static void step_bad_watched(struct ib_cm_id *id, struct ib_qp *qp)
{
	watch_begin(id);
	step_bad(id, qp);
	watch_end();
	expect_untouched("bad");
	expect("the QP still in RTS", qp_state(qp), IB_QPS_RTS);
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

/* The longest private data each message carries, from C, sent whole. */
static void step_max(struct ib_cm_id *id, struct ib_qp *qp, const char *step)
{
	bool disc = !strncmp(step, "disc", 4);
	size_t len = strstr(step, "224") || !strcmp(step, "drepmax") ? 224 : 220;
	u8 *buf = pattern(len);
	char what[64];
	int ret;

	if (!buf) {
		failures++;
		return;
	}
	watch_begin(id);
	if (disc)
		ret = rcd_disconnect(id, qp, buf, len);
	else if (len == 224)
		ret = rcd_send_drep(id, buf, len);
	else
		ret = rcd_send_dreq(id, buf, len);
	watch_end();
	kfree(buf);
	snprintf(what, sizeof(what), "%s: %zu bytes sent", step, len);
	expect(what, ret, 0);
	snprintf(what, sizeof(what), "%s: one %s", step, len == 224 ? "DREP" : "DREQ");
	expect_true(what, len == 224 ? watch.n_drep == 1 : watch.n_dreq == 1);
	if (disc) {
		/* rdma_disconnect(3)'s order: the QP first, then the message. */
		snprintf(what, sizeof(what), "%s: the QP moved before the %s", step,
			 len == 224 ? "DREP" : "DREQ");
		expect_true(what, watch.seq_modify == 1 &&
			    (len == 224 ? watch.seq_drep : watch.seq_dreq) == 2);
		expect("the QP in ERR", qp_state(qp), IB_QPS_ERR);
	}
}

/* Every DREP the product must refuse, on an id in DREQ_RCVD. */
static void step_drepbad(struct ib_cm_id *id, struct ib_qp *qp)
{
	static const size_t lens[] = { 225, 255, 256, SIZE_MAX };
	u8 *buf = pattern(256);
	char what[64];
	int i;

	if (!buf) {
		failures++;
		return;
	}
	expect_true("the id is in DREQ_RCVD", READ_ONCE(id->state) == IB_CM_DREQ_RCVD);
	watch_begin(id);
	for (i = 0; i < ARRAY_SIZE(lens); i++) {
		snprintf(what, sizeof(what), "drep len %zu in DREQ_RCVD", lens[i]);
		expect(what, rcd_send_drep(id, buf, lens[i]), -EINVAL);
		snprintf(what, sizeof(what), "disconnect len %zu in DREQ_RCVD", lens[i]);
		expect(what, rcd_disconnect(id, qp, buf, lens[i]), -EINVAL);
	}
	expect("drep NULL data, len 5, in DREQ_RCVD", rcd_send_drep(id, NULL, 5), -EINVAL);
	expect("disconnect NULL data, len 5, in DREQ_RCVD", rcd_disconnect(id, qp, NULL, 5),
	       -EINVAL);
	watch_end();
	kfree(buf);
	expect_untouched("drepbad");
	expect_true("still DREQ_RCVD", READ_ONCE(id->state) == IB_CM_DREQ_RCVD);
	expect("the QP still in RTS", qp_state(qp), IB_QPS_RTS);
}

/* A connected id without a QP: only the message. */
static void step_nullqp(struct ib_cm_id *id, struct ib_qp *qp)
{
	int ret;

	watch_begin(id);
	ret = rcd_disconnect(id, NULL, "no-qp", 5);
	watch_end();
	expect("disconnect with a NULL QP", ret, 0);
	expect_true("a DREQ and no QP modify", watch.n_dreq == 1 && !watch.n_modify);
	expect("the connection's QP untouched (RTS)", qp_state(qp), IB_QPS_RTS);
	expect_true("the id in DREQ_SENT", READ_ONCE(id->state) == IB_CM_DREQ_SENT);
}

/* rcd_send_dreq() with interrupts disabled: allowed (header: Context). */
static void step_irqoff(struct ib_cm_id *id)
{
	unsigned long flags;
	int ret;

	local_irq_save(flags);
	ret = rcd_send_dreq(id, "irqoff", 6);
	local_irq_restore(flags);
	expect("dreq with interrupts disabled", ret, 0);
}

/*
 * The DREQ or DREP (whichever the state calls for) finds no memory: the
 * product returns the CM's -ENOMEM, though the QP step succeeded; the CM
 * put the id in TIMEWAIT (cm.c: cm_enter_timewait() on a failed
 * allocation), where a second call is the product's -EALREADY.
 */
static void step_nomem(struct ib_cm_id *id, struct ib_qp *qp)
{
	bool drep = READ_ONCE(id->state) == IB_CM_DREQ_RCVD;
	int ret;

	watch_begin(id);
	watch.fail_ah = true;
	ret = rcd_disconnect(id, qp, "nomem", 5);
	watch_end();
	pr_info("rcd_consumer: nomem: %s, calls: modify %d, dreq %d, drep %d, ah %d\n",
		drep ? "DREP" : "DREQ", watch.n_modify, watch.n_dreq, watch.n_drep, watch.n_ah);
	expect_true("nomem: the message's allocation was failed", watch.ah_failed == 1);
#ifdef CONFIG_FAULT_INJECTION
	expect_true("nomem: the fault was taken (fail_nth back to 0)", !current->fail_nth);
	current->fail_nth = 0;
#endif
	expect("disconnect, the message not allocated", ret, -ENOMEM);
	expect_true("nomem: the QP, then the message",
		    watch.seq_modify == 1 && (drep ? watch.seq_drep : watch.seq_dreq) == 2);
	expect("nomem: the QP in ERR all the same", qp_state(qp), IB_QPS_ERR);
	expect_true("nomem: the id in TIMEWAIT", READ_ONCE(id->state) == IB_CM_TIMEWAIT);
	watch_begin(id);
	ret = rcd_disconnect(id, qp, NULL, 0);
	watch_end();
	expect("a second disconnect in TIMEWAIT", ret, -EALREADY);
	expect_untouched("the second disconnect");
}

/*
 * The QP's modify fails: the product still sends the DREQ, and returns
 * the QP's error.
 */
static void step_qpfail(struct ib_cm_id *id, struct ib_qp *qp)
{
	int ret;

	watch_begin(id);
	watch.modify_ret = -EIO;
	ret = rcd_disconnect(id, qp, "qpfail", 6);
	watch_end();
	expect("disconnect, the QP's modify failed", ret, -EIO);
	expect_true("qpfail: the QP, then the DREQ all the same",
		    watch.seq_modify == 1 && watch.seq_dreq == 2);
	expect_true("qpfail: the id in DREQ_SENT", READ_ONCE(id->state) == IB_CM_DREQ_SENT);
}

/*
 * The peer's DREQ lands between the product's read of the state and its
 * DREQ (t_promise.sh keeps it on the wire until this step is in the
 * window): the CM refuses the DREQ, and the product answers the peer's
 * with a DREP and returns 0.
 */
static void step_cross(struct ib_cm_id *id, struct ib_qp *qp)
{
	int ret;

	expect_true("cross: ESTABLISHED before the call",
		    READ_ONCE(id->state) == IB_CM_ESTABLISHED);
	watch_begin(id);
	watch.hold = true;
	ret = rcd_disconnect(id, qp, "cross", 5);
	watch_end();
	pr_info("rcd_consumer: cross: held at ib_send_cm_dreq() %llu ms, state %d -> %d\n",
		watch.held_ns / NSEC_PER_MSEC, watch.state_in, watch.state_out);
	expect_true("cross: the window was reached (ESTABLISHED at the DREQ, DREQ_RCVD while held)",
		    watch.state_in == IB_CM_ESTABLISHED && watch.state_out == IB_CM_DREQ_RCVD);
	expect("disconnect across the peer's DREQ", ret, 0);
	expect_true("cross: the QP, the DREQ tried, then a DREP",
		    watch.seq_modify == 1 && watch.seq_dreq == 2 && watch.seq_drep == 3 &&
		    watch.n_dreq == 1 && watch.n_drep == 1);
	expect_true("cross: the id in TIMEWAIT", READ_ONCE(id->state) == IB_CM_TIMEWAIT);
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
			step_bad_watched(id, qp);
		} else if (!strcmp(step, "drep")) {
			expect("drep without a DREQ", rcd_send_drep(id, "x", 1), -EINVAL);
		} else if (!strcmp(step, "disc")) {
			watch_begin(id);
			expect("disconnect", rcd_disconnect(id, qp, "from-c", 6), 0);
			watch_end();
			expect_true("the QP moved before the DREQ",
				    watch.seq_modify == 1 && watch.seq_dreq == 2);
			expect("second disconnect", rcd_disconnect(id, qp, NULL, 0), -EALREADY);
			expect("dreq in DREQ_SENT", rcd_send_dreq(id, NULL, 0), -EINVAL);
		} else if (!strcmp(step, "gone")) {
			expect("disconnect, peer gone", rcd_disconnect(id, qp, NULL, 0), 0);
		} else if (!strcmp(step, "atomic")) {
			step_atomic(id, qp);
		} else if (!strcmp(step, "dreq")) {
			expect("dreq", rcd_send_dreq(id, "c-dreq", 6), 0);
		} else if (!strcmp(step, "max") || !strcmp(step, "drepmax") ||
			   !strcmp(step, "disc220") || !strcmp(step, "disc224")) {
			step_max(id, qp, step);
		} else if (!strcmp(step, "drepbad")) {
			step_drepbad(id, qp);
		} else if (!strcmp(step, "nullqp")) {
			step_nullqp(id, qp);
		} else if (!strcmp(step, "irqoff")) {
			step_irqoff(id);
		} else if (!strcmp(step, "nomem")) {
			step_nomem(id, qp);
		} else if (!strcmp(step, "qpfail")) {
			step_qpfail(id, qp);
		} else if (!strcmp(step, "cross")) {
			step_cross(id, qp);
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

	/*
	 * The probes, before any step: registering one patches the kernel's
	 * text, which waits for every CPU (cross holds one).
	 */
	ret = probes_register();
	if (ret) {
		pr_err("rcd_consumer: FAIL probes not registered: %d\n", ret);
		return ret;
	}
	ret = rcd_test_with_conn(conn, run_steps, NULL);
	probes_unregister();
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
