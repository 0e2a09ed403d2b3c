// SPDX-License-Identifier: GPL-2.0
/*
 * rcd_senderr: does ib_destroy_cm_id() wait for a running REQ_ERROR
 * handler? For tests/t_cmbugs.sh (send_error_handler_holds_id).
 *
 * 6.12's cm_process_send_error() drops the failed MAD's reference on the
 * cm_id before it calls the handler (kernel/0000-IB-cm-Keep-*.patch keeps
 * one for the handler). At load, from @dev (rxe1 on v1, @src): an RC REQ
 * to @dst, a GID nobody has, through a MAC nobody has, so that no answer
 * comes and the REQ times out (REQ_ERROR after about 50 ms). The handler
 * says it started, sleeps @sleep_ms and then reads its id (KASAN sees the
 * read if the id was freed meanwhile: kfree_rcu, batched for up to 5 s).
 * Meanwhile the loading thread calls ib_destroy_cm_id() once the handler
 * has started, and records whether the handler had returned when the
 * destroy did (it must have). It then waits for the handler before
 * returning, so that the handler's code stays.
 * Results in the read-only parameters handler_ran, destroy_waited and
 * destroy_ms.
 */
#include <linux/completion.h>
#include <linux/delay.h>
#include <linux/inet.h>
#include <linux/module.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_cm.h>
#include <rdma/ib_sa.h>
#include <rdma/ib_verbs.h>

#include "rcd_ibdev.h"

static char *dev = "rxe1";
module_param(dev, charp, 0444);
MODULE_PARM_DESC(dev, "the IB device to send the REQ from (port 1)");
static char *src = "10.77.0.2";
module_param(src, charp, 0444);
MODULE_PARM_DESC(src, "the IPv4 address of @dev's GID to send from");
static char *dst = "10.77.0.99";
module_param(dst, charp, 0444);
MODULE_PARM_DESC(dst, "an IPv4 address nobody answers for");
static int sleep_ms = 9000;
module_param(sleep_ms, int, 0444);
MODULE_PARM_DESC(sleep_ms, "how long the REQ_ERROR handler sleeps");

static int handler_ran;
module_param(handler_ran, int, 0444);
MODULE_PARM_DESC(handler_ran, "the REQ_ERROR handler ran (read only)");
static int destroy_waited;
module_param(destroy_waited, int, 0444);
MODULE_PARM_DESC(destroy_waited,
		 "ib_destroy_cm_id() returned after the handler did (read only)");
static int destroy_ms;
module_param(destroy_ms, int, 0444);
MODULE_PARM_DESC(destroy_ms, "how long ib_destroy_cm_id() took (read only)");

static DECLARE_COMPLETION(started);
static DECLARE_COMPLETION(done);
static atomic_t returned = ATOMIC_INIT(0);

static int handler(struct ib_cm_id *id, const struct ib_cm_event *event)
{
	if (event->event != IB_CM_REQ_ERROR) {
		pr_info("rcd_senderr: event %d\n", event->event);
		return 0;
	}
	handler_ran = 1;
	complete(&started);
	msleep(sleep_ms);
	/* The id must still be there: its owner's destroy waits for us. */
	pr_info("rcd_senderr: REQ_ERROR callback after %d ms: id state %d\n",
		sleep_ms, READ_ONCE(id->state));
	atomic_set(&returned, 1);
	complete(&done);
	return 0;
}

static noinline int senderr_run(void)
{
	struct sa_path_rec path = {};
	struct ib_cm_req_param req = {};
	const struct ib_gid_attr *sgid_attr;
	struct ib_port_attr port_attr;
	struct ib_device *ibdev;
	struct ib_cm_id *id;
	u8 mac[ETH_ALEN] = { 0x02, 0, 0, 0, 0, 0x99 };
	__be32 saddr, daddr;
	ktime_t t0;
	int ret;

	if (!in4_pton(src, -1, (u8 *)&saddr, -1, NULL) ||
	    !in4_pton(dst, -1, (u8 *)&daddr, -1, NULL))
		return -EINVAL;
	ibdev = rcd_ib_device_get_by_name(dev);
	if (!ibdev)
		return -ENODEV;
	ipv6_addr_set_v4mapped(saddr, (struct in6_addr *)path.sgid.raw);
	ipv6_addr_set_v4mapped(daddr, (struct in6_addr *)path.dgid.raw);
	sgid_attr = rdma_find_gid_by_port(ibdev, &path.sgid,
					  IB_GID_TYPE_ROCE_UDP_ENCAP, 1, NULL);
	if (IS_ERR(sgid_attr)) {
		ret = PTR_ERR(sgid_attr);
		goto put_dev;
	}
	ret = ib_query_port(ibdev, 1, &port_attr);
	if (ret)
		goto put_gid;
	path.rec_type = SA_PATH_REC_TYPE_ROCE_V2;
	path.reversible = 1;
	path.pkey = cpu_to_be16(0xffff);
	path.mtu_selector = IB_SA_EQ;
	path.mtu = port_attr.active_mtu;
	path.rate_selector = IB_SA_EQ;
	path.rate = IB_RATE_PORT_CURRENT;
	path.packet_life_time_selector = IB_SA_EQ;
	path.packet_life_time = 12;
	path.hop_limit = 64;
	path.roce.route_resolved = true;
	memcpy(path.roce.dmac, mac, ETH_ALEN);

	id = ib_create_cm_id(ibdev, handler, NULL);
	if (IS_ERR(id)) {
		ret = PTR_ERR(id);
		goto put_gid;
	}
	req.primary_path = &path;
	req.ppath_sgid_attr = sgid_attr;
	req.service_id = cpu_to_be64(0x10000ce5);
	req.qp_num = 0x123;
	req.qp_type = IB_QPT_RC;
	req.starting_psn = 0x123;
	req.responder_resources = 1;
	req.initiator_depth = 1;
	req.remote_cm_response_timeout = 12;
	req.local_cm_response_timeout = 12;
	req.flow_control = 1;
	req.retry_count = 7;
	req.rnr_retry_count = 7;
	req.max_cm_retries = 1;
	ret = ib_send_cm_req(id, &req);
	if (ret) {
		pr_err("rcd_senderr: ib_send_cm_req: %d\n", ret);
		ib_destroy_cm_id(id);
		goto put_gid;
	}
	if (!wait_for_completion_timeout(&started, 30 * HZ)) {
		pr_err("rcd_senderr: no REQ_ERROR within 30 s\n");
		ib_destroy_cm_id(id);
		ret = -ETIMEDOUT;
		goto put_gid;
	}
	/* The handler runs (and sleeps): destroy the id from here. */
	t0 = ktime_get();
	ib_destroy_cm_id(id);
	destroy_ms = ktime_ms_delta(ktime_get(), t0);
	destroy_waited = atomic_read(&returned);
	pr_info("rcd_senderr: ib_destroy_cm_id() took %d ms, the handler had %s\n",
		destroy_ms, destroy_waited ? "returned" : "NOT returned");
	/* Keep the handler's code until it is done. */
	wait_for_completion(&done);
	ret = 0;
put_gid:
	rdma_put_gid_attr(sgid_attr);
put_dev:
	ib_device_put(ibdev);
	return ret;
}

static int __init senderr_init(void)
{
	return senderr_run();
}

static void __exit senderr_exit(void)
{
}

module_init(senderr_init);
module_exit(senderr_exit);
MODULE_DESCRIPTION("Does ib_destroy_cm_id() wait for a running REQ_ERROR handler?");
MODULE_LICENSE("GPL");
