// SPDX-License-Identifier: GPL-2.0
/*
 * rcd_peer: a hostile IB CM peer for the tests. It puts CM MADs that
 * nobody's CM would send on the wire: from device @dev (rxe1 on v1,
 * @src), over the veth, to the GSI QP of the device that owns @dst (rxe0
 * on v0, where rust_cm_disconnect listens). It uses only the MAD layer (a
 * send-only MAD agent on QP1): no ib_cm_id of its own, so the receiving CM
 * sees what a remote host's broken or malicious CM would send. The answers
 * (REJ, DREP, REP, MRA) go to @dev's own CM, which counts them in
 * /sys/class/infiniband/@dev/ports/1/cm_rx_msgs and drops them (it knows
 * none of the ids).
 *
 * One command per write to /sys/kernel/debug/rcd_peer/send:
 *
 *   KIND [key=value ...]
 *
 * KIND: req rep rtu rej mra dreq drep lap apr. Keys (numbers in C syntax):
 *   lcid, rcid   local and remote communication ids (host order)
 *   sid          service id (REQ)
 *   guid         local CA GUID (REQ, REP; default @dev's node GUID)
 *   tid          transaction id (default: a counter)
 *   qpn          local QPN (REQ, REP; default 0x100)
 *   ts           REQ transport service type: 0 RC (default), 1 UC
 *   resp         local CM response timeout exponent (REQ; default 14)
 *   retries      max CM retries (REQ; default 2)
 *   msg          message rejected or MRAed: 0 REQ, 1 REP, 2 other (REJ, MRA)
 *   reason       REJ reason (default 28, consumer defined; 4, timeout,
 *                carries guid as its ARI, as a CM whose REQ timed out sends)
 *   timeout      MRA service timeout (default 20)
 *   pd           private data, hex bytes (no prefix)
 *   count        send the same MAD this many times (default 1)
 *
 * A REQ carries a valid RoCE v2 primary path from @src to @dst (as cm.c's
 * cm_format_req makes one), so the receiving CM takes it; everything else
 * in it is what the keys say.
 */
#include <linux/ctype.h>
#include <linux/debugfs.h>
#include <linux/etherdevice.h>
#include <linux/hex.h>
#include <linux/inet.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <rdma/iba.h>
#include <rdma/ib_cm.h>
#include <rdma/ib_mad.h>
#include <rdma/ib_verbs.h>
#include <rdma/ib_cache.h>
#include <rdma/ibta_vol1_c12.h>

#include "rcd_ibdev.h"

/* 7.3's typed allocator (slab.h); 6.12 has none. */
#ifndef kzalloc_obj
#define kzalloc_obj(P, GFP) kzalloc(sizeof(P), GFP)
#endif

/* cm_msgs.h (private to the CM): the class version of its MADs. */
#define IB_CM_CLASS_VERSION 2

static char *dev = "rxe1";
module_param(dev, charp, 0444);
static char *src = "10.77.0.2";
module_param(src, charp, 0444);
static char *dst = "10.77.0.1";
module_param(dst, charp, 0444);
/* The MAC of @dst's netdev (rxe sends through the IP stack; kept exact). */
static char *dmac = "00:00:00:00:00:00";
module_param(dmac, charp, 0444);

#define CM_REQ_ATTR 0x10
#define CM_MRA_ATTR 0x11
#define CM_REJ_ATTR 0x12
#define CM_REP_ATTR 0x13
#define CM_RTU_ATTR 0x14
#define CM_DREQ_ATTR 0x15
#define CM_DREP_ATTR 0x16
#define CM_LAP_ATTR 0x19
#define CM_APR_ATTR 0x1a

static struct ib_device *ibdev;
static struct ib_mad_agent *agent;
static struct ib_ah *ah;
static union ib_gid sgid, dgid;
static struct dentry *dir;
static atomic64_t next_tid = ATOMIC64_INIT(0x7eed0000);
static atomic_t sent_ok = ATOMIC_INIT(0), sent_err = ATOMIC_INIT(0);

struct cmd {
	u8 attr;
	u32 lcid, rcid, qpn, ts, resp, retries, msg, reason, timeout, count;
	u64 sid, guid, tid;
	u8 pd[256];
	size_t pd_len;
};

static void send_handler(struct ib_mad_agent *a,
			 struct ib_mad_send_wc *wc)
{
	if (wc->status == IB_WC_SUCCESS)
		atomic_inc(&sent_ok);
	else
		atomic_inc(&sent_err);
	ib_free_send_mad(wc->send_buf);
}

static void format_hdr(struct ib_mad_hdr *hdr, u8 attr, u64 tid)
{
	hdr->base_version = IB_MGMT_BASE_VERSION;
	hdr->mgmt_class = IB_MGMT_CLASS_CM;
	hdr->class_version = IB_CM_CLASS_VERSION;
	hdr->method = IB_MGMT_METHOD_SEND;
	hdr->attr_id = cpu_to_be16(attr);
	hdr->tid = cpu_to_be64(tid);
}

/* Private data: at most @max bytes of the message's field. */
static int put_pd(void *field, size_t max, const struct cmd *c)
{
	if (c->pd_len > max)
		return -EINVAL;
	memcpy(field, c->pd, c->pd_len);
	return 0;
}

static int format(void *mad, const struct cmd *c)
{
	memset(mad, 0, 256);
	format_hdr(mad, c->attr, c->tid);
	switch (c->attr) {
	case CM_REQ_ATTR: {
		struct cm_req_msg *m = mad;

		IBA_SET(CM_REQ_LOCAL_COMM_ID, m, c->lcid);
		IBA_SET(CM_REQ_SERVICE_ID, m, c->sid);
		IBA_SET(CM_REQ_LOCAL_CA_GUID, m, c->guid);
		IBA_SET(CM_REQ_LOCAL_QPN, m, c->qpn);
		IBA_SET(CM_REQ_RESPONDER_RESOURCES, m, 1);
		IBA_SET(CM_REQ_INITIATOR_DEPTH, m, 1);
		IBA_SET(CM_REQ_REMOTE_CM_RESPONSE_TIMEOUT, m, c->resp);
		IBA_SET(CM_REQ_TRANSPORT_SERVICE_TYPE, m, c->ts);
		IBA_SET(CM_REQ_END_TO_END_FLOW_CONTROL, m, 1);
		IBA_SET(CM_REQ_STARTING_PSN, m, c->qpn);
		IBA_SET(CM_REQ_LOCAL_CM_RESPONSE_TIMEOUT, m, c->resp);
		IBA_SET(CM_REQ_RETRY_COUNT, m, 7);
		IBA_SET(CM_REQ_PARTITION_KEY, m, 0xffff);
		IBA_SET(CM_REQ_PATH_PACKET_PAYLOAD_MTU, m, IB_MTU_1024);
		IBA_SET(CM_REQ_RNR_RETRY_COUNT, m, 7);
		IBA_SET(CM_REQ_MAX_CM_RETRIES, m, c->retries);
		*IBA_GET_MEM_PTR(CM_REQ_PRIMARY_LOCAL_PORT_GID, m) = sgid;
		*IBA_GET_MEM_PTR(CM_REQ_PRIMARY_REMOTE_PORT_GID, m) = dgid;
		/* RoCE: routed (hop limit > 1), LIDs permissive. */
		IBA_SET(CM_REQ_PRIMARY_LOCAL_PORT_LID, m, 0xffff);
		IBA_SET(CM_REQ_PRIMARY_REMOTE_PORT_LID, m, 0xffff);
		IBA_SET(CM_REQ_PRIMARY_PACKET_RATE, m, IB_RATE_10_GBPS);
		IBA_SET(CM_REQ_PRIMARY_HOP_LIMIT, m, 64);
		IBA_SET(CM_REQ_PRIMARY_SUBNET_LOCAL, m, 0);
		IBA_SET(CM_REQ_PRIMARY_LOCAL_ACK_TIMEOUT, m, 18);
		return put_pd(IBA_GET_MEM_PTR(CM_REQ_PRIVATE_DATA, m),
			      IB_CM_REQ_PRIVATE_DATA_SIZE, c);
	}
	case CM_REP_ATTR: {
		struct cm_rep_msg *m = mad;

		IBA_SET(CM_REP_LOCAL_COMM_ID, m, c->lcid);
		IBA_SET(CM_REP_REMOTE_COMM_ID, m, c->rcid);
		IBA_SET(CM_REP_LOCAL_QPN, m, c->qpn);
		IBA_SET(CM_REP_STARTING_PSN, m, c->qpn);
		IBA_SET(CM_REP_RESPONDER_RESOURCES, m, 1);
		IBA_SET(CM_REP_INITIATOR_DEPTH, m, 1);
		IBA_SET(CM_REP_RNR_RETRY_COUNT, m, 7);
		IBA_SET(CM_REP_LOCAL_CA_GUID, m, c->guid);
		return put_pd(IBA_GET_MEM_PTR(CM_REP_PRIVATE_DATA, m),
			      IB_CM_REP_PRIVATE_DATA_SIZE, c);
	}
	case CM_RTU_ATTR: {
		struct cm_rtu_msg *m = mad;

		IBA_SET(CM_RTU_LOCAL_COMM_ID, m, c->lcid);
		IBA_SET(CM_RTU_REMOTE_COMM_ID, m, c->rcid);
		return put_pd(IBA_GET_MEM_PTR(CM_RTU_PRIVATE_DATA, m),
			      IB_CM_RTU_PRIVATE_DATA_SIZE, c);
	}
	case CM_REJ_ATTR: {
		struct cm_rej_msg *m = mad;

		IBA_SET(CM_REJ_LOCAL_COMM_ID, m, c->lcid);
		IBA_SET(CM_REJ_REMOTE_COMM_ID, m, c->rcid);
		IBA_SET(CM_REJ_MESSAGE_REJECTED, m, c->msg);
		IBA_SET(CM_REJ_REASON, m, c->reason);
		if (c->reason == IB_CM_REJ_TIMEOUT) {
			/* As cm_destroy_id sends it: our CA GUID as the ARI,
			 * by which the receiver finds its id for our REQ.
			 */
			__be64 guid = cpu_to_be64(c->guid);

			IBA_SET(CM_REJ_REJECTED_INFO_LENGTH, m, sizeof(guid));
			memcpy(IBA_GET_MEM_PTR(CM_REJ_ARI, m), &guid,
			       sizeof(guid));
		}
		return put_pd(IBA_GET_MEM_PTR(CM_REJ_PRIVATE_DATA, m),
			      IB_CM_REJ_PRIVATE_DATA_SIZE, c);
	}
	case CM_MRA_ATTR: {
		struct cm_mra_msg *m = mad;

		IBA_SET(CM_MRA_LOCAL_COMM_ID, m, c->lcid);
		IBA_SET(CM_MRA_REMOTE_COMM_ID, m, c->rcid);
		IBA_SET(CM_MRA_MESSAGE_MRAED, m, c->msg);
		IBA_SET(CM_MRA_SERVICE_TIMEOUT, m, c->timeout);
		return put_pd(IBA_GET_MEM_PTR(CM_MRA_PRIVATE_DATA, m),
			      IB_CM_MRA_PRIVATE_DATA_SIZE, c);
	}
	case CM_DREQ_ATTR: {
		struct cm_dreq_msg *m = mad;

		IBA_SET(CM_DREQ_LOCAL_COMM_ID, m, c->lcid);
		IBA_SET(CM_DREQ_REMOTE_COMM_ID, m, c->rcid);
		IBA_SET(CM_DREQ_REMOTE_QPN_EECN, m, c->qpn);
		return put_pd(IBA_GET_MEM_PTR(CM_DREQ_PRIVATE_DATA, m),
			      IB_CM_DREQ_PRIVATE_DATA_SIZE, c);
	}
	case CM_DREP_ATTR: {
		struct cm_drep_msg *m = mad;

		IBA_SET(CM_DREP_LOCAL_COMM_ID, m, c->lcid);
		IBA_SET(CM_DREP_REMOTE_COMM_ID, m, c->rcid);
		return put_pd(IBA_GET_MEM_PTR(CM_DREP_PRIVATE_DATA, m),
			      IB_CM_DREP_PRIVATE_DATA_SIZE, c);
	}
	case CM_LAP_ATTR: {
		struct cm_lap_msg *m = mad;

		IBA_SET(CM_LAP_LOCAL_COMM_ID, m, c->lcid);
		IBA_SET(CM_LAP_REMOTE_COMM_ID, m, c->rcid);
		IBA_SET(CM_LAP_REMOTE_QPN_EECN, m, c->qpn);
		IBA_SET(CM_LAP_REMOTE_CM_RESPONSE_TIMEOUT, m, c->resp);
		*IBA_GET_MEM_PTR(CM_LAP_ALTERNATE_LOCAL_PORT_GID, m) = sgid;
		*IBA_GET_MEM_PTR(CM_LAP_ALTERNATE_REMOTE_PORT_GID, m) = dgid;
		IBA_SET(CM_LAP_ALTERNATE_LOCAL_PORT_LID, m, 0xffff);
		IBA_SET(CM_LAP_ALTERNATE_REMOTE_PORT_LID, m, 0xffff);
		IBA_SET(CM_LAP_ALTERNATE_HOP_LIMIT, m, 64);
		IBA_SET(CM_LAP_ALTERNATE_PACKET_RATE, m, IB_RATE_10_GBPS);
		IBA_SET(CM_LAP_ALTERNATE_LOCAL_ACK_TIMEOUT, m, 18);
		return put_pd(IBA_GET_MEM_PTR(CM_LAP_PRIVATE_DATA, m),
			      IB_CM_LAP_PRIVATE_DATA_SIZE, c);
	}
	case CM_APR_ATTR: {
		struct cm_apr_msg *m = mad;

		IBA_SET(CM_APR_LOCAL_COMM_ID, m, c->lcid);
		IBA_SET(CM_APR_REMOTE_COMM_ID, m, c->rcid);
		IBA_SET(CM_APR_AR_STATUS, m, 0);
		return put_pd(IBA_GET_MEM_PTR(CM_APR_PRIVATE_DATA, m),
			      IB_CM_APR_PRIVATE_DATA_SIZE, c);
	}
	}
	return -EINVAL;
}

static int send_one(const struct cmd *c)
{
	struct ib_mad_send_buf *msg;
	int ret;

	msg = ib_create_send_mad(agent, 1, 0, 0, IB_MGMT_MAD_HDR,
				 IB_MGMT_MAD_DATA, GFP_KERNEL,
				 IB_MGMT_BASE_VERSION);
	if (IS_ERR(msg))
		return PTR_ERR(msg);
	ret = format(msg->mad, c);
	if (ret)
		goto free;
	msg->ah = ah;
	msg->timeout_ms = 0;
	msg->retries = 0;
	ret = ib_post_send_mad(msg, NULL);
	if (!ret)
		return 0;
free:
	ib_free_send_mad(msg);
	return ret;
}

static const struct {
	const char *name;
	u8 attr;
} kinds[] = {
	{ "req", CM_REQ_ATTR }, { "rep", CM_REP_ATTR }, { "rtu", CM_RTU_ATTR },
	{ "rej", CM_REJ_ATTR }, { "mra", CM_MRA_ATTR },
	{ "dreq", CM_DREQ_ATTR }, { "drep", CM_DREP_ATTR },
	{ "lap", CM_LAP_ATTR }, { "apr", CM_APR_ATTR },
};

/* The numeric keys of a command, by name: where in struct cmd, how wide. */
static const struct {
	const char *name;
	size_t off, size;
} keys[] = {
	{ "lcid", offsetof(struct cmd, lcid), sizeof_field(struct cmd, lcid) },
	{ "rcid", offsetof(struct cmd, rcid), sizeof_field(struct cmd, rcid) },
	{ "qpn", offsetof(struct cmd, qpn), sizeof_field(struct cmd, qpn) },
	{ "ts", offsetof(struct cmd, ts), sizeof_field(struct cmd, ts) },
	{ "resp", offsetof(struct cmd, resp), sizeof_field(struct cmd, resp) },
	{ "retries", offsetof(struct cmd, retries), sizeof_field(struct cmd, retries) },
	{ "msg", offsetof(struct cmd, msg), sizeof_field(struct cmd, msg) },
	{ "reason", offsetof(struct cmd, reason), sizeof_field(struct cmd, reason) },
	{ "timeout", offsetof(struct cmd, timeout), sizeof_field(struct cmd, timeout) },
	{ "count", offsetof(struct cmd, count), sizeof_field(struct cmd, count) },
	{ "sid", offsetof(struct cmd, sid), sizeof_field(struct cmd, sid) },
	{ "guid", offsetof(struct cmd, guid), sizeof_field(struct cmd, guid) },
	{ "tid", offsetof(struct cmd, tid), sizeof_field(struct cmd, tid) },
};

/* parse_key: KEY=VAL into c, or -EINVAL for an unknown key. */
static int parse_key(struct cmd *c, const char *key, const char *val)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(keys); i++) {
		void *p = (u8 *)c + keys[i].off;

		if (strcmp(key, keys[i].name))
			continue;
		if (keys[i].size == sizeof(u64))
			return kstrtou64(val, 0, p);
		return kstrtou32(val, 0, p);
	}
	return -EINVAL;
}

static int parse(char *line, struct cmd *c)
{
	char *tok, *val;
	size_t i;
	int ret;

	tok = strsep(&line, "\n ");
	if (!tok)
		return -EINVAL;
	c->attr = 0;
	for (i = 0; i < ARRAY_SIZE(kinds); i++)
		if (!strcmp(tok, kinds[i].name))
			c->attr = kinds[i].attr;
	if (!c->attr)
		return -EINVAL;
	c->qpn = 0x100;
	c->resp = 14;
	c->retries = 2;
	c->reason = IB_CM_REJ_CONSUMER_DEFINED;
	c->timeout = 20;
	c->count = 1;
	c->guid = be64_to_cpu(ibdev->node_guid);
	c->tid = atomic64_inc_return(&next_tid);
	while ((tok = strsep(&line, "\n "))) {
		if (!*tok)
			continue;
		val = strchr(tok, '=');
		if (!val)
			return -EINVAL;
		*val++ = 0;
		if (!strcmp(tok, "pd")) {
			size_t n = strlen(val);

			if (n % 2 || n / 2 > sizeof(c->pd))
				return -EINVAL;
			ret = hex2bin(c->pd, val, n / 2);
			if (ret)
				return ret;
			c->pd_len = n / 2;
			continue;
		}
		ret = parse_key(c, tok, val);
		if (ret)
			return ret;
	}
	if (c->count == 0 || c->count > 10000)
		return -EINVAL;
	return 0;
}

static ssize_t send_write(struct file *f, const char __user *ubuf,
			  size_t len, loff_t *off)
{
	struct cmd *c;
	char *buf;
	u32 i;
	int ret;

	if (len > 1024)
		return -E2BIG;
	buf = memdup_user_nul(ubuf, len);
	if (IS_ERR(buf))
		return PTR_ERR(buf);
	c = kzalloc_obj(*c, GFP_KERNEL);
	ret = c ? parse(buf, c) : -ENOMEM;
	for (i = 0; !ret && i < c->count; i++)
		ret = send_one(c);
	kfree(c);
	kfree(buf);
	return ret ? ret : len;
}

static int stats_show(struct seq_file *s, void *unused)
{
	seq_printf(s, "sent %d\nerrors %d\n", atomic_read(&sent_ok),
		   atomic_read(&sent_err));
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(stats);

static const struct file_operations send_fops = {
	.owner = THIS_MODULE,
	.write = send_write,
};

static int __init rcd_peer_init(void)
{
	const struct ib_gid_attr *attr;
	struct rdma_ah_attr ah_attr = {};
	__be32 a;
	u8 mac[ETH_ALEN];
	int ret;

	if (!in4_pton(src, -1, (u8 *)&a, -1, NULL))
		return -EINVAL;
	ipv6_addr_set_v4mapped(a, (struct in6_addr *)sgid.raw);
	if (!in4_pton(dst, -1, (u8 *)&a, -1, NULL))
		return -EINVAL;
	ipv6_addr_set_v4mapped(a, (struct in6_addr *)dgid.raw);
	if (!mac_pton(dmac, mac))
		return -EINVAL;

	ibdev = rcd_ib_device_get_by_name(dev);
	if (!ibdev)
		return -ENODEV;
	attr = rdma_find_gid_by_port(ibdev, &sgid, IB_GID_TYPE_ROCE_UDP_ENCAP,
				     1, NULL);
	if (IS_ERR(attr)) {
		ret = PTR_ERR(attr);
		goto put_dev;
	}
	agent = ib_register_mad_agent(ibdev, 1, IB_QPT_GSI, NULL, 0,
				      send_handler, NULL, NULL, 0);
	if (IS_ERR(agent)) {
		ret = PTR_ERR(agent);
		goto put_attr;
	}
	ah_attr.type = RDMA_AH_ATTR_TYPE_ROCE;
	rdma_ah_set_port_num(&ah_attr, 1);
	rdma_ah_set_grh(&ah_attr, &dgid, 0, attr->index, 64, 0);
	memcpy(ah_attr.roce.dmac, mac, ETH_ALEN);
	ah = rdma_create_ah(agent->qp->pd, &ah_attr, RDMA_CREATE_AH_SLEEPABLE);
	if (IS_ERR(ah)) {
		ret = PTR_ERR(ah);
		goto unreg;
	}
	rdma_put_gid_attr(attr);
	dir = debugfs_create_dir("rcd_peer", NULL);
	debugfs_create_file("send", 0200, dir, NULL, &send_fops);
	debugfs_create_file("stats", 0400, dir, NULL, &stats_fops);
	return 0;

unreg:
	ib_unregister_mad_agent(agent);
put_attr:
	rdma_put_gid_attr(attr);
put_dev:
	ib_device_put(ibdev);
	return ret;
}

static void __exit rcd_peer_exit(void)
{
	debugfs_remove(dir);
	/* Waits for (cancels) the sends still in flight. */
	ib_unregister_mad_agent(agent);
	rdma_destroy_ah(ah, RDMA_DESTROY_AH_SLEEPABLE);
	ib_device_put(ibdev);
}

module_init(rcd_peer_init);
module_exit(rcd_peer_exit);
MODULE_DESCRIPTION("A hostile IB CM peer for rust_cm_disconnect's tests");
MODULE_LICENSE("GPL");
