// SPDX-License-Identifier: GPL-2.0
/*
 * rcd_leak: a planted verbs leak, the negative control of the check that
 * ends every test guest (tests/t_kernel.sh: devices_deleted, and
 * verbs_leak_detected, the only test that loads this module).
 *
 * When the IB device named by dev= is added it allocates a PD, a CQ and an
 * RC QP on it, and it never frees them when the device goes: deleting that
 * device must then make rdma restrack (rdma_restrack_clean) and rxe
 * (rxe_pool_cleanup) warn. The pointers stay in this module's data, so
 * kmemleak sees the objects referenced while it is loaded; after the device
 * is gone nothing here touches them again. Unloaded while the device still
 * exists, it frees them as a well-behaved client would.
 */
#include <linux/module.h>
#include <rdma/ib_verbs.h>

static char *dev = "rxeleak";
module_param(dev, charp, 0444);
MODULE_PARM_DESC(dev, "the IB device to leak a PD, a CQ and an RC QP on");

static int leaked;
module_param(leaked, int, 0444);
MODULE_PARM_DESC(leaked, "how many objects it leaked (read only): 3");

static struct ib_device *leak_dev;
static struct ib_pd *leak_pd;
static struct ib_cq *leak_cq;
static struct ib_qp *leak_qp;
static bool unloading;

static void leak_free(void)
{
	if (leak_qp)
		ib_destroy_qp(leak_qp);
	if (leak_cq)
		ib_free_cq(leak_cq);
	if (leak_pd)
		ib_dealloc_pd(leak_pd);
	leak_qp = NULL;
	leak_cq = NULL;
	leak_pd = NULL;
	leaked = 0;
}

static int leak_add(struct ib_device *ibdev)
{
	struct ib_qp_init_attr attr = {};

	if (strcmp(dev_name(&ibdev->dev), dev) || leak_pd)
		return -EOPNOTSUPP;
	leak_pd = ib_alloc_pd(ibdev, 0);
	if (IS_ERR(leak_pd)) {
		pr_err("rcd_leak: ib_alloc_pd on %s: %ld\n", dev, PTR_ERR(leak_pd));
		leak_pd = NULL;
		return -EOPNOTSUPP;
	}
	leak_cq = ib_alloc_cq(ibdev, NULL, 16, 0, IB_POLL_DIRECT);
	if (IS_ERR(leak_cq)) {
		pr_err("rcd_leak: ib_alloc_cq on %s: %ld\n", dev, PTR_ERR(leak_cq));
		leak_cq = NULL;
		leak_free();
		return -EOPNOTSUPP;
	}
	attr.send_cq = leak_cq;
	attr.recv_cq = leak_cq;
	attr.qp_type = IB_QPT_RC;
	attr.sq_sig_type = IB_SIGNAL_REQ_WR;
	attr.cap.max_send_wr = 4;
	attr.cap.max_recv_wr = 4;
	attr.cap.max_send_sge = 1;
	attr.cap.max_recv_sge = 1;
	leak_qp = ib_create_qp(leak_pd, &attr);
	if (IS_ERR(leak_qp)) {
		pr_err("rcd_leak: ib_create_qp on %s: %ld\n", dev, PTR_ERR(leak_qp));
		leak_qp = NULL;
		leak_free();
		return -EOPNOTSUPP;
	}
	leak_dev = ibdev;
	leaked = 3;
	pr_info("rcd_leak: a PD, a CQ and QP %u on %s, never to be freed\n",
		leak_qp->qp_num, dev);
	return 0;
}

static void leak_remove(struct ib_device *ibdev, void *client_data)
{
	if (ibdev != leak_dev)
		return;
	if (unloading) {
		leak_free();
	} else {
		/* The device goes: leave the objects on it, on purpose. */
		pr_info("rcd_leak: %s goes with its PD, CQ and QP\n", dev);
	}
	leak_dev = NULL;
}

static struct ib_client leak_client = {
	.name = "rcd_leak",
	.add = leak_add,
	.remove = leak_remove,
};

static int __init leak_init(void)
{
	return ib_register_client(&leak_client);
}

static void __exit leak_exit(void)
{
	unloading = true;
	ib_unregister_client(&leak_client);
}

module_init(leak_init);
module_exit(leak_exit);
MODULE_DESCRIPTION("A planted verbs leak: the negative control of the test guests' device check");
MODULE_LICENSE("GPL");
