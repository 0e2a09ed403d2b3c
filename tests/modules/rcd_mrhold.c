// SPDX-License-Identifier: GPL-2.0
/*
 * Holds one of rxe's copies of a peer's RDMA WRITE into an MR, between its
 * key check and the copy, for tests/t_rdma.sh (mr_late_write_not_handed_back).
 *
 * rxe checks a WRITE packet's rkey (check_rkey(): the MR valid), then
 * copies the payload (write_data_in(): rxe_mr_copy()). Its LOCAL_INV only
 * changes the MR's state, on the QP's send task, while the copy runs on
 * its receive task: a LOCAL_INV may complete between the two, and the
 * copy then writes into memory its owner was told the peer no longer
 * reaches. The window is a packet's copy wide; this module makes it last
 * until the test releases it: a kprobe on rxe_mr_copy() sends the first
 * copy into an MR of exactly len bytes to a detour that waits (the receive
 * task is a work item: it may sleep) and then makes the real call.
 *
 * Parameters, read by the test: held (0 armed, 1 holding a copy, 2 done:
 * the real copy returned), release (written 1 by the test: the held copy
 * goes on; it also goes on by itself after 60 s).
 */
#include <linux/delay.h>
#include <linux/jiffies.h>
#include <linux/kernel.h>
#include <linux/kprobes.h>
#include <linux/module.h>
#include <linux/ptrace.h>

static unsigned int len = 333;
module_param(len, uint, 0444);
MODULE_PARM_DESC(len, "the length of the copy held (a WRITE's payload)");

static int held;
module_param(held, int, 0444);
MODULE_PARM_DESC(held, "0 armed, 1 holding a copy, 2 done");

static int release;
module_param(release, int, 0644);
MODULE_PARM_DESC(release, "1: the held copy goes on");

/* rxe_verbs.h: enum rxe_mr_copy_dir { RXE_TO_MR_OBJ, RXE_FROM_MR_OBJ }. */
#define RCD_RXE_TO_MR_OBJ 0

static int (*mr_copy_fn)(void *mr, u64 iova, void *addr, unsigned int length,
			 int dir);

/*
 * Where the held call goes: same prototype, rxe's receive task and stack.
 * It holds a reference on this module until the real copy returned.
 */
static int hold_detour(void *mr, u64 iova, void *addr, unsigned int length,
		       int dir)
{
	unsigned long end = jiffies + 60 * HZ;
	int ret;

	while (!READ_ONCE(release) && time_before(jiffies, end))
		usleep_range(10000, 20000);
	/* The probe lets this one through: held is no longer 0. */
	ret = mr_copy_fn(mr, iova, addr, length, dir);
	WRITE_ONCE(held, 2);
	module_put(THIS_MODULE);
	return ret;
}

static int on_copy(struct kprobe *p, struct pt_regs *regs)
{
	unsigned int length = regs_get_kernel_argument(regs, 3);
	int dir = regs_get_kernel_argument(regs, 4);

	if (READ_ONCE(held) || dir != RCD_RXE_TO_MR_OBJ || length != len)
		return 0;
	if (!try_module_get(THIS_MODULE))
		return 0;
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
	.symbol_name = "rxe_mr_copy",
	.pre_handler = on_copy,
	.post_handler = no_opt,
};

static int __init rcd_mrhold_init(void)
{
	int ret = register_kprobe(&kp);

	if (ret) {
		pr_err("rcd_mrhold: no kprobe on rxe_mr_copy: %d\n", ret);
		return ret;
	}
	mr_copy_fn = (void *)kp.addr;
	return 0;
}

static void __exit rcd_mrhold_exit(void)
{
	unregister_kprobe(&kp);
}

module_init(rcd_mrhold_init);
module_exit(rcd_mrhold_exit);
MODULE_DESCRIPTION("Holds an rxe copy into an MR between its key check and the copy (tests)");
MODULE_LICENSE("GPL");
