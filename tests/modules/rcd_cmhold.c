// SPDX-License-Identifier: GPL-2.0
/*
 * rcd_cmhold: holds the IB CM between a handler's return and the id's
 * destroy, for tests/t_cmid.sh (rep_sent_then_dropped_in_req_callback).
 *
 * When a REQ handler returns non-zero, the CM destroys the new id after the
 * handler returned (cm_process_work(): the handler, then cm_destroy_id()).
 * If the handler sent a REP, the REP's failure (its timeout) is reported
 * to the id's handler from the MAD's completion (cm_process_send_error()),
 * not serialized with that, until cm_destroy_id() changed the id's state.
 * The window is microseconds wide; this module makes it hold_ms long: a
 * kprobe on cm_destroy_id() sends the next call for an id in REP_SENT to
 * a detour that sleeps (the CM's workqueue may sleep there: cm_destroy_id()
 * itself waits) and then makes the real call.
 *
 * It acts on the first destroy of an id in REP_SENT or IDLE (the REP's
 * failure handled already: a deferred destroy comes later) and holds only
 * the former. Parameters, read by the test: held (0 armed, 1 holding, 2
 * done: the real destroy returned), state_in and state_out (the id's
 * state when its destroy came, and when the real call was made: IB_CM_IDLE
 * once the REP's failure was handled).
 */
#include <linux/delay.h>
#include <linux/kernel.h>
#include <linux/kprobes.h>
#include <linux/module.h>
#include <linux/ptrace.h>

#include <rdma/ib_cm.h>

static unsigned int hold_ms = 1000;
module_param(hold_ms, uint, 0444);
MODULE_PARM_DESC(hold_ms, "how long the destroy is held");

static int held;
module_param(held, int, 0444);
MODULE_PARM_DESC(held, "0 armed, 1 holding a destroy, 2 done");

static int state_in = -1;
module_param(state_in, int, 0444);
MODULE_PARM_DESC(state_in, "the held id's state when its destroy came");

static int state_out = -1;
module_param(state_out, int, 0444);
MODULE_PARM_DESC(state_out, "the held id's state after the hold");

static void (*cm_destroy_id_fn)(struct ib_cm_id *cm_id, int err);

/*
 * Where the held call goes: same prototype, the CM's task and stack. It
 * holds a reference on this module until the real destroy returned.
 */
static void hold_detour(struct ib_cm_id *cm_id, int err)
{
	msleep(hold_ms);
	WRITE_ONCE(state_out, READ_ONCE(cm_id->state));
	/* The probe lets this one through: held is no longer 0. */
	cm_destroy_id_fn(cm_id, err);
	WRITE_ONCE(held, 2);
	module_put(THIS_MODULE);
}

static int on_destroy(struct kprobe *p, struct pt_regs *regs)
{
	struct ib_cm_id *cm_id = (void *)regs_get_kernel_argument(regs, 0);
	int state = READ_ONCE(cm_id->state);

	if (READ_ONCE(held) || (state != IB_CM_REP_SENT && state != IB_CM_IDLE))
		return 0;
	WRITE_ONCE(state_in, state);
	if (state == IB_CM_IDLE || !try_module_get(THIS_MODULE)) {
		WRITE_ONCE(state_out, state);
		WRITE_ONCE(held, 2);
		return 0;
	}
	WRITE_ONCE(held, 1);
	/* Run the detour instead (1: the handler moved the instruction pointer). */
	instruction_pointer_set(regs, (unsigned long)hold_detour);
	return 1;
}

/* A probe with a post handler is never optimized (which would ignore the detour). */
static void no_opt(struct kprobe *p, struct pt_regs *regs, unsigned long flags)
{
}

static struct kprobe kp = {
	.symbol_name = "cm_destroy_id",
	.pre_handler = on_destroy,
	.post_handler = no_opt,
};

static int __init rcd_cmhold_init(void)
{
	int ret = register_kprobe(&kp);

	if (ret) {
		pr_err("rcd_cmhold: no kprobe on cm_destroy_id: %d\n", ret);
		return ret;
	}
	cm_destroy_id_fn = (void *)kp.addr;
	return 0;
}

static void __exit rcd_cmhold_exit(void)
{
	unregister_kprobe(&kp);
}

module_init(rcd_cmhold_init);
module_exit(rcd_cmhold_exit);
MODULE_DESCRIPTION("Holds the IB CM's destroy of an id in REP_SENT (tests)");
MODULE_LICENSE("GPL");
