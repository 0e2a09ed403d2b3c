// SPDX-License-Identifier: GPL-2.0
/*
 * rcd_cbase: the C baseline of `make bench`. The same DREQ -> DREP round
 * trip the Rust module measures, with raw ib_send_cm_dreq() and a C CM
 * handler, and no Rust.
 *
 * With via=rcd it is instead a consumer of the product, as the C API's
 * users are: the DREQs go through rust_cm_disconnect's rcd_send_dreq()
 * (taken with symbol_get(): the product must be loaded, and is held while
 * this is), all else the same. The bench compares the two: the product's
 * cost on a consumer's path, the consumer and its state being equal. With
 * via=mix the connections take turns, one through each, in the same burst:
 * the calls' own times compared under the same load.
 *
 * It listens on @service on device @dev. Every REQ gets a PD, a CQ and an
 * RC QP (as the Rust module does) and a REP. Writing "go" to
 * /sys/kernel/debug/rcd_cbase/ctl sends a DREQ on every established
 * connection at once; /sys/kernel/debug/rcd_cbase/lat then lists, per
 * connection, the ktime_get() ns of the DREQ and of its DREP, which way
 * sent it (0 ib_send_cm_dreq, 1 rcd_send_dreq) and the ns the call took;
 * the first line says how many are established and done.
 */
#include <linux/debugfs.h>
#include <linux/ktime.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <rdma/ib_cm.h>
#include <rdma/ib_verbs.h>

#include <rust_cm_disconnect.h>

#include "rcd_ibdev.h"

static char *dev = "rxe0";
module_param(dev, charp, 0444);
static ulong service = 0x2000;
module_param(service, ulong, 0444);
static char *via = "cm";
module_param(via, charp, 0444);
MODULE_PARM_DESC(via, "cm: ib_send_cm_dreq() (default); rcd: the product's rcd_send_dreq(); "
		 "mix: by turns");

static int cm_send_dreq(struct ib_cm_id *id, const void *data, size_t len)
{
	return ib_send_cm_dreq(id, data, len);
}

/* [0]: raw, [1]: the product's (symbol_get); which by via. */
static int (*send_dreq[2])(struct ib_cm_id *id, const void *data, size_t len) = {
	cm_send_dreq, NULL
};

static bool mix;

#define MAX_CONNS 8192

struct cconn {
	struct ib_cm_id *id;
	struct ib_pd *pd;
	struct ib_cq *cq;
	struct ib_qp *qp;
	bool established;
	u8 way;
	u64 t_dreq, t_drep, t_call;
};

static struct ib_device *ibdev;
static struct ib_cm_id *listen_id;
static struct cconn *conns;
static atomic_t nconns = ATOMIC_INIT(0);
static atomic_t ndone = ATOMIC_INIT(0);
static struct dentry *dir;
static DEFINE_MUTEX(lock);

static int move_qp(struct cconn *c, enum ib_qp_state state)
{
	struct ib_qp_attr attr = { .qp_state = state };
	int mask, ret;

	ret = ib_cm_init_qp_attr(c->id, &attr, &mask);
	return ret ? ret : ib_modify_qp(c->qp, &attr, mask);
}

static int req_received(struct ib_cm_id *id, const struct ib_cm_event *ev)
{
	struct ib_qp_init_attr qa = {};
	struct ib_cm_rep_param rep = {};
	/* REQ handlers of different ids may run at once: reserve a slot. */
	int n = atomic_fetch_inc(&nconns);
	struct cconn *c;

	if (n >= MAX_CONNS)
		return -ENOSPC;
	c = &conns[n];
	c->id = id;
	id->context = c;
	c->pd = ib_alloc_pd(id->device, 0);
	if (IS_ERR(c->pd))
		return PTR_ERR(c->pd);
	c->cq = ib_alloc_cq(id->device, NULL, 128, 0, IB_POLL_DIRECT);
	if (IS_ERR(c->cq))
		goto err_pd;
	qa.send_cq = c->cq;
	qa.recv_cq = c->cq;
	qa.cap.max_send_wr = 64;
	qa.cap.max_recv_wr = 64;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	qa.sq_sig_type = IB_SIGNAL_ALL_WR;
	qa.qp_type = IB_QPT_RC;
	c->qp = ib_create_qp(c->pd, &qa);
	if (IS_ERR(c->qp))
		goto err_cq;
	if (move_qp(c, IB_QPS_INIT) || move_qp(c, IB_QPS_RTR))
		goto err_qp;
	rep.qp_num = c->qp->qp_num;
	rep.starting_psn = c->qp->qp_num;
	rep.responder_resources = min_t(u8, ev->param.req_rcvd.initiator_depth, 1);
	rep.initiator_depth = min_t(u8, ev->param.req_rcvd.responder_resources, 1);
	rep.flow_control = 1;
	rep.rnr_retry_count = 7;
	if (ib_send_cm_rep(id, &rep))
		goto err_qp;
	return 0;
err_qp:
	ib_destroy_qp(c->qp);
err_cq:
	ib_free_cq(c->cq);
err_pd:
	ib_dealloc_pd(c->pd);
	c->qp = NULL;
	c->cq = NULL;
	c->pd = NULL;
	c->id = NULL;	/* the CM destroys the id and rejects */
	return -EINVAL;
}

static int handler(struct ib_cm_id *id, const struct ib_cm_event *ev)
{
	struct cconn *c = id->context;

	switch (ev->event) {
	case IB_CM_REQ_RECEIVED:
		return req_received(id, ev);
	case IB_CM_RTU_RECEIVED:
		move_qp(c, IB_QPS_RTS);
		WRITE_ONCE(c->established, true);
		break;
	case IB_CM_DREP_RECEIVED:
		c->t_drep = ktime_get_ns();
		atomic_inc(&ndone);
		break;
	case IB_CM_DREQ_RECEIVED:
		ib_send_cm_drep(id, NULL, 0);
		break;
	default:
		break;
	}
	return 0;
}

static int slots(void)
{
	return min(atomic_read(&nconns), MAX_CONNS);
}

static ssize_t ctl_write(struct file *f, const char __user *buf, size_t len,
			 loff_t *pos)
{
	int i, n = slots();

	mutex_lock(&lock);
	atomic_set(&ndone, 0);
	for (i = 0; i < n; i++) {
		struct cconn *c = &conns[i];

		if (!READ_ONCE(c->established))
			continue;
		c->way = mix ? i & 1 : !!send_dreq[1];
		c->t_drep = 0;
		c->t_dreq = ktime_get_ns();
		if (send_dreq[c->way](c->id, NULL, 0))
			c->t_dreq = 0;
		c->t_call = ktime_get_ns() - c->t_dreq;
	}
	mutex_unlock(&lock);
	return len;
}

static int lat_show(struct seq_file *m, void *v)
{
	int i, n = slots(), est = 0;

	for (i = 0; i < n; i++)
		est += READ_ONCE(conns[i].established);
	seq_printf(m, "conns %d established %d done %d\n", n, est,
		   atomic_read(&ndone));
	for (i = 0; i < n; i++)
		if (conns[i].t_dreq && conns[i].t_drep)
			seq_printf(m, "%llu %llu %u %llu\n", conns[i].t_dreq,
				   conns[i].t_drep, conns[i].way, conns[i].t_call);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(lat);

static const struct file_operations ctl_fops = {
	.owner = THIS_MODULE,
	.write = ctl_write,
};

static int __init rcd_cbase_init(void)
{
	int ret;

	mix = !strcmp(via, "mix");
	if (mix || !strcmp(via, "rcd")) {
		send_dreq[1] = symbol_get(rcd_send_dreq);
		if (!send_dreq[1])
			return -ENOENT;
	} else if (strcmp(via, "cm")) {
		return -EINVAL;
	}
	conns = kvcalloc(MAX_CONNS, sizeof(*conns), GFP_KERNEL);
	if (!conns) {
		ret = -ENOMEM;
		goto err_put;
	}
	ibdev = rcd_ib_device_get_by_name(dev);
	if (!ibdev) {
		ret = -ENODEV;
		goto err;
	}
	listen_id = ib_create_cm_id(ibdev, handler, NULL);
	ib_device_put(ibdev);
	if (IS_ERR(listen_id)) {
		ret = PTR_ERR(listen_id);
		goto err;
	}
	ret = ib_cm_listen(listen_id, cpu_to_be64(service));
	if (ret) {
		ib_destroy_cm_id(listen_id);
		goto err;
	}
	dir = debugfs_create_dir("rcd_cbase", NULL);
	debugfs_create_file("ctl", 0200, dir, NULL, &ctl_fops);
	debugfs_create_file("lat", 0444, dir, NULL, &lat_fops);
	return 0;
err:
	kvfree(conns);
err_put:
	if (send_dreq[1])
		symbol_put(rcd_send_dreq);
	return ret;
}

static void __exit rcd_cbase_exit(void)
{
	int i, n = slots();

	debugfs_remove(dir);
	ib_destroy_cm_id(listen_id);
	for (i = 0; i < n; i++) {
		if (!conns[i].id)
			continue;
		ib_destroy_cm_id(conns[i].id);
		ib_destroy_qp(conns[i].qp);
		ib_free_cq(conns[i].cq);
		ib_dealloc_pd(conns[i].pd);
	}
	kvfree(conns);
	if (send_dreq[1])
		symbol_put(rcd_send_dreq);
}

module_init(rcd_cbase_init);
module_exit(rcd_cbase_exit);
MODULE_DESCRIPTION("C baseline of rust_cm_disconnect's benchmark");
MODULE_LICENSE("GPL");
