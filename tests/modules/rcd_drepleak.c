// SPDX-License-Identifier: GPL-2.0
/*
 * rcd_drepleak: calls ib_send_cm_drep() directly with every private data
 * length the DREP cannot carry, for tests/t_cmbugs.sh
 * (drep_too_long_no_leak).
 *
 * ib_send_cm_drep() copies the private data (cm_copy_private_data,
 * kmemdup) before cm_send_drep_locked() checks the length against
 * IB_CM_DREP_PRIVATE_DATA_SIZE (224); the too-long path returns -EINVAL
 * without freeing the copy, whatever the id's state (the check comes
 * before the state's). On a CM without the fix (kernel/0000-IB-cm-*.patch)
 * each call here leaks one object that kmemleak reports; with it, none.
 *
 * At load: an ib_cm_id on @dev (idle: the leak needs no connection), then
 * ib_send_cm_drep(id, data, len) for len = 225..255 (the u8 lengths over
 * the field), each of which must return -EINVAL; the id is destroyed.
 * Then the control: CONTROLS planted objects of the same size, allocated
 * here, whose only pointers are kept XORed (kmemleak must report at least
 * one: proof that a scan in the test's window finds an object this young),
 * and freed at unload so that they never reach the end-of-guest kmemleak
 * check. More than one because a stale copy of the last pointer (in a
 * register this function saved, or a stack slot of the calls it made, in
 * a task stack kept for reuse) can look like a reference: a 6.12 guest's
 * kmemleak_clean once saw no unreferenced object at all. Each pointer
 * goes through the same slots, so the earlier ones' copies are
 * overwritten by the later ones'.
 *
 * The controls are the first objects of a cache of its own, never ones of
 * kmalloc's. SLUB keeps a free object's free pointer in the middle of the
 * object (mm/slub.c, calculate_sizes), and without
 * CONFIG_SLAB_FREELIST_HARDENED it is the next free object's plain
 * address. So an object from a shared cache is named by its predecessor
 * in the free list, and that object is allocated next to it: just before
 * it from 6.12's per-CPU free list, just after it from 7.3's per-CPU
 * sheaves (which hand out a refill's objects last first). If that
 * neighbour's owner does not write over those bytes, kmemleak scans it,
 * finds the pointer and never reports the control. In a new cache the
 * free list runs ahead of the allocations, and each control, written over
 * whole, no longer names the next one. To keep that cause in view, the
 * controls are planted between two kmalloc() objects of their size that
 * this module keeps (referenced, never written): the neighbours a
 * kmalloc()ed control would have on either kernel.
 * Results in the read-only parameters calls, einval and planted.
 *
 * With plant_only=1 it plants the control objects and nothing else (no
 * device needed): the planted leaks of the end-of-guest kmemleak check
 * (tests/t_kernel.sh: kmemleak_clean), which must report them as ours.
 */
#include <linux/module.h>
#include <linux/slab.h>
#include <rdma/ib_cm.h>
#include <rdma/ib_verbs.h>

#include "rcd_ibdev.h"

static char *dev = "rxe0";
module_param(dev, charp, 0444);
MODULE_PARM_DESC(dev, "the IB device to create the ib_cm_id on");

static int calls;
module_param(calls, int, 0444);
MODULE_PARM_DESC(calls, "ib_send_cm_drep() calls made (read only): 31");

static int einval;
module_param(einval, int, 0444);
MODULE_PARM_DESC(einval, "of which returned -EINVAL (read only): 31");

static bool plant_only;
module_param(plant_only, bool, 0444);
MODULE_PARM_DESC(plant_only, "only plant the control object (no CM calls, no device)");

static int planted;
module_param(planted, int, 0444);
MODULE_PARM_DESC(planted, "control objects allocated (read only): 3");

/* Not a kernel address once XORed: kmemleak sees no reference to it. */
#define HIDE 0x5a5a5a5a5a5a5a5aUL
/* The control's size: the shortest DREP private data the CM refuses. */
#define CONTROL_SIZE (IB_CM_DREP_PRIVATE_DATA_SIZE + 1)
#define CONTROLS 3
static unsigned long planted_hidden[CONTROLS];
static struct kmem_cache *control_cache;
static void *neighbour[2];

static u8 data[U8_MAX];

static int handler(struct ib_cm_id *id, const struct ib_cm_event *event)
{
	/* An idle id that never connects: no event is expected. */
	pr_warn("rcd_drepleak: unexpected CM event %d\n", event->event);
	return 0;
}

/*
 * Not __init: kmemleak prints an object's backtrace when it reports it, and
 * an init function's address no longer resolves to a symbol by then (the
 * module's init section is freed after it loaded). The control object's
 * backtrace must name this module.
 */
static noinline int drepleak_run(void)
{
	struct ib_device *ibdev;
	struct ib_cm_id *id;
	unsigned int len;
	void *p;
	int ret, i;

	if (plant_only)
		goto plant;
	ibdev = rcd_ib_device_get_by_name(dev);
	if (!ibdev)
		return -ENODEV;
	id = ib_create_cm_id(ibdev, handler, NULL);
	if (IS_ERR(id)) {
		ib_device_put(ibdev);
		return PTR_ERR(id);
	}
	memset(data, 0xa5, sizeof(data));
	for (len = IB_CM_DREP_PRIVATE_DATA_SIZE + 1; len <= U8_MAX; len++) {
		ret = ib_send_cm_drep(id, data, len);
		calls++;
		if (ret == -EINVAL)
			einval++;
		else
			pr_err("rcd_drepleak: ib_send_cm_drep(len %u): %d, want -EINVAL\n",
			       len, ret);
	}
	ib_destroy_cm_id(id);
	ib_device_put(ibdev);
	pr_info("rcd_drepleak: %d ib_send_cm_drep() calls on %s, lengths %u..%u: %d -EINVAL\n",
		calls, dev, IB_CM_DREP_PRIVATE_DATA_SIZE + 1, U8_MAX, einval);

plant:
	control_cache = kmem_cache_create("rcd_control", CONTROL_SIZE, 0, SLAB_NO_MERGE, NULL);
	if (!control_cache)
		return -ENOMEM;
	neighbour[0] = kmalloc(CONTROL_SIZE, GFP_KERNEL);
	for (i = 0; i < CONTROLS; i++) {
		p = kmem_cache_alloc(control_cache, GFP_KERNEL);
		if (!p)
			break;
		memcpy(p, data, CONTROL_SIZE);
		planted_hidden[i] = (unsigned long)p ^ HIDE;
		planted++;
	}
	neighbour[1] = kmalloc(CONTROL_SIZE, GFP_KERNEL);
	return 0;
}

static int __init drepleak_init(void)
{
	return drepleak_run();
}

static void __exit drepleak_exit(void)
{
	int i;

	for (i = 0; i < planted; i++)
		kmem_cache_free(control_cache, (void *)(planted_hidden[i] ^ HIDE));
	kmem_cache_destroy(control_cache);
	kfree(neighbour[0]);
	kfree(neighbour[1]);
}

module_init(drepleak_init);
module_exit(drepleak_exit);
MODULE_DESCRIPTION("ib_send_cm_drep() with too long private data: the CM's DREP leak test");
MODULE_LICENSE("GPL");
