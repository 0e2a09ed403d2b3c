/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the two crafted IB CM peers of the tests (rcd_peer, rcd_fuzzpeer)
 * share: a send-only MAD agent on QP1 of a RoCE device with an address
 * handle to the peer's GID (struct rcd_wire), and CM messages formatted
 * from a few fields (struct rcd_cm_msg), as cm.c's cm_format_*() would,
 * but with every field the caller's.
 */
#ifndef RCD_CM_WIRE_H
#define RCD_CM_WIRE_H

#include <linux/etherdevice.h>
#include <linux/inet.h>
#include <linux/string.h>
#include <rdma/iba.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_cm.h>
#include <rdma/ib_mad.h>
#include <rdma/ib_verbs.h>
#include <rdma/ibta_vol1_c12.h>

#include "rcd_ibdev.h"

/* cm_msgs.h (private to the CM): the class version of its MADs. */
#define IB_CM_CLASS_VERSION 2

/* The CM's attribute ids (ib_cm.h has them big-endian, as CM_*_ATTR_ID). */
#define CM_REQ_ATTR 0x10
#define CM_MRA_ATTR 0x11
#define CM_REJ_ATTR 0x12
#define CM_REP_ATTR 0x13
#define CM_RTU_ATTR 0x14
#define CM_DREQ_ATTR 0x15
#define CM_DREP_ATTR 0x16
#define CM_SIDR_REQ_ATTR 0x17
#define CM_SIDR_REP_ATTR 0x18
#define CM_LAP_ATTR 0x19
#define CM_APR_ATTR 0x1a

/* One CM message; @attr is its CM_*_ATTR. */
struct rcd_cm_msg {
	u16 attr;
	u32 lcid, rcid, qpn, ts, resp, retries, msgd, reason, timeout, status;
	/* REQ: the primary path's local ACK timeout (0: 18). */
	u32 ack;
	u64 sid, guid, tid;
	u8 pd[256];
	size_t pd_len;
};

/*
 * A send-only MAD agent on port 1 of @ibdev, from @sgid (@src_ip) to
 * @dgid (@dst_ip) through @ah.
 */
struct rcd_wire {
	struct ib_device *ibdev;
	struct ib_mad_agent *agent;
	struct ib_ah *ah;
	union ib_gid sgid, dgid;
	__be32 src_ip, dst_ip;
};

/*
 * rcd_wire_open - the agent and address handle from device @dev (@src, an
 * IPv4 address of its RoCE v2 GID table) to @dst at MAC @dmac; @handler
 * gets each send's completion (and must free its buffer).
 */
static int rcd_wire_open(struct rcd_wire *w, const char *dev, const char *src,
			 const char *dst, const char *dmac,
			 ib_mad_send_handler handler)
{
	const struct ib_gid_attr *attr;
	struct rdma_ah_attr ah_attr = {};
	u8 mac[ETH_ALEN];
	int ret;

	if (!in4_pton(src, -1, (u8 *)&w->src_ip, -1, NULL))
		return -EINVAL;
	ipv6_addr_set_v4mapped(w->src_ip, (struct in6_addr *)w->sgid.raw);
	if (!in4_pton(dst, -1, (u8 *)&w->dst_ip, -1, NULL))
		return -EINVAL;
	ipv6_addr_set_v4mapped(w->dst_ip, (struct in6_addr *)w->dgid.raw);
	if (!mac_pton(dmac, mac))
		return -EINVAL;

	w->ibdev = rcd_ib_device_get_by_name(dev);
	if (!w->ibdev)
		return -ENODEV;
	attr = rdma_find_gid_by_port(w->ibdev, &w->sgid,
				     IB_GID_TYPE_ROCE_UDP_ENCAP, 1, NULL);
	if (IS_ERR(attr)) {
		ret = PTR_ERR(attr);
		goto put_dev;
	}
	w->agent = ib_register_mad_agent(w->ibdev, 1, IB_QPT_GSI, NULL, 0,
					 handler, NULL, NULL, 0);
	if (IS_ERR(w->agent)) {
		ret = PTR_ERR(w->agent);
		goto put_attr;
	}
	ah_attr.type = RDMA_AH_ATTR_TYPE_ROCE;
	rdma_ah_set_port_num(&ah_attr, 1);
	rdma_ah_set_grh(&ah_attr, &w->dgid, 0, attr->index, 64, 0);
	memcpy(ah_attr.roce.dmac, mac, ETH_ALEN);
	w->ah = rdma_create_ah(w->agent->qp->pd, &ah_attr,
			       RDMA_CREATE_AH_SLEEPABLE);
	if (IS_ERR(w->ah)) {
		ret = PTR_ERR(w->ah);
		goto unreg;
	}
	rdma_put_gid_attr(attr);
	return 0;

unreg:
	ib_unregister_mad_agent(w->agent);
put_attr:
	rdma_put_gid_attr(attr);
put_dev:
	ib_device_put(w->ibdev);
	return ret;
}

/* rcd_wire_close - waits for (cancels) the sends still in flight. */
static void rcd_wire_close(struct rcd_wire *w)
{
	ib_unregister_mad_agent(w->agent);
	rdma_destroy_ah(w->ah, RDMA_DESTROY_AH_SLEEPABLE);
	ib_device_put(w->ibdev);
}

/*
 * Private data into a message's field of @max bytes: too long is -EINVAL,
 * or, with @cut, cut to the field.
 */
static int rcd_cm_put_pd(void *field, size_t max, const struct rcd_cm_msg *m,
			 bool cut)
{
	if (m->pd_len > max && !cut)
		return -EINVAL;
	memcpy(field, m->pd, min(m->pd_len, max));
	return 0;
}

#define RCD_CM_PD(KIND, p, m, cut)                                        \
	rcd_cm_put_pd(IBA_GET_MEM_PTR(CM_##KIND##_PRIVATE_DATA, p),       \
		      IB_CM_##KIND##_PRIVATE_DATA_SIZE, m, cut)

/*
 * rcd_cm_format - @m into @mad (a 256-byte MAD) sent over @w. Private data
 * too long for its field: -EINVAL, or cut with @cut. An @attr that is no
 * CM message of these: -EINVAL.
 */
static int rcd_cm_format(void *mad, const struct rcd_cm_msg *m,
			 const struct rcd_wire *w, bool cut)
{
	struct ib_mad_hdr *hdr = mad;

	memset(mad, 0, 256);
	hdr->base_version = IB_MGMT_BASE_VERSION;
	hdr->mgmt_class = IB_MGMT_CLASS_CM;
	hdr->class_version = IB_CM_CLASS_VERSION;
	hdr->method = IB_MGMT_METHOD_SEND;
	hdr->attr_id = cpu_to_be16(m->attr);
	hdr->tid = cpu_to_be64(m->tid);
	switch (m->attr) {
	case CM_REQ_ATTR: {
		struct cm_req_msg *p = mad;

		IBA_SET(CM_REQ_LOCAL_COMM_ID, p, m->lcid);
		IBA_SET(CM_REQ_SERVICE_ID, p, m->sid);
		IBA_SET(CM_REQ_LOCAL_CA_GUID, p, m->guid);
		IBA_SET(CM_REQ_LOCAL_QPN, p, m->qpn);
		IBA_SET(CM_REQ_RESPONDER_RESOURCES, p, 1);
		IBA_SET(CM_REQ_INITIATOR_DEPTH, p, 1);
		IBA_SET(CM_REQ_REMOTE_CM_RESPONSE_TIMEOUT, p, m->resp);
		IBA_SET(CM_REQ_TRANSPORT_SERVICE_TYPE, p, m->ts);
		IBA_SET(CM_REQ_END_TO_END_FLOW_CONTROL, p, 1);
		IBA_SET(CM_REQ_STARTING_PSN, p, m->qpn);
		IBA_SET(CM_REQ_LOCAL_CM_RESPONSE_TIMEOUT, p, m->resp);
		IBA_SET(CM_REQ_RETRY_COUNT, p, 7);
		IBA_SET(CM_REQ_PARTITION_KEY, p, 0xffff);
		IBA_SET(CM_REQ_PATH_PACKET_PAYLOAD_MTU, p, IB_MTU_1024);
		IBA_SET(CM_REQ_RNR_RETRY_COUNT, p, 7);
		IBA_SET(CM_REQ_MAX_CM_RETRIES, p, m->retries);
		*IBA_GET_MEM_PTR(CM_REQ_PRIMARY_LOCAL_PORT_GID, p) = w->sgid;
		*IBA_GET_MEM_PTR(CM_REQ_PRIMARY_REMOTE_PORT_GID, p) = w->dgid;
		/* RoCE: routed (hop limit > 1), LIDs permissive. */
		IBA_SET(CM_REQ_PRIMARY_LOCAL_PORT_LID, p, 0xffff);
		IBA_SET(CM_REQ_PRIMARY_REMOTE_PORT_LID, p, 0xffff);
		IBA_SET(CM_REQ_PRIMARY_PACKET_RATE, p, IB_RATE_10_GBPS);
		IBA_SET(CM_REQ_PRIMARY_HOP_LIMIT, p, 64);
		IBA_SET(CM_REQ_PRIMARY_SUBNET_LOCAL, p, 0);
		IBA_SET(CM_REQ_PRIMARY_LOCAL_ACK_TIMEOUT, p, m->ack ?: 18);
		return RCD_CM_PD(REQ, p, m, cut);
	}
	case CM_MRA_ATTR: {
		struct cm_mra_msg *p = mad;

		IBA_SET(CM_MRA_LOCAL_COMM_ID, p, m->lcid);
		IBA_SET(CM_MRA_REMOTE_COMM_ID, p, m->rcid);
		IBA_SET(CM_MRA_MESSAGE_MRAED, p, m->msgd);
		IBA_SET(CM_MRA_SERVICE_TIMEOUT, p, m->timeout);
		return RCD_CM_PD(MRA, p, m, cut);
	}
	case CM_REJ_ATTR: {
		struct cm_rej_msg *p = mad;

		IBA_SET(CM_REJ_LOCAL_COMM_ID, p, m->lcid);
		IBA_SET(CM_REJ_REMOTE_COMM_ID, p, m->rcid);
		IBA_SET(CM_REJ_MESSAGE_REJECTED, p, m->msgd);
		IBA_SET(CM_REJ_REASON, p, m->reason);
		if (m->reason == IB_CM_REJ_TIMEOUT) {
			/* As cm_destroy_id sends it: our CA GUID as the ARI,
			 * by which the receiver finds its id for our REQ.
			 */
			__be64 guid = cpu_to_be64(m->guid);

			IBA_SET(CM_REJ_REJECTED_INFO_LENGTH, p, sizeof(guid));
			memcpy(IBA_GET_MEM_PTR(CM_REJ_ARI, p), &guid,
			       sizeof(guid));
		}
		return RCD_CM_PD(REJ, p, m, cut);
	}
	case CM_REP_ATTR: {
		struct cm_rep_msg *p = mad;

		IBA_SET(CM_REP_LOCAL_COMM_ID, p, m->lcid);
		IBA_SET(CM_REP_REMOTE_COMM_ID, p, m->rcid);
		IBA_SET(CM_REP_LOCAL_QPN, p, m->qpn);
		IBA_SET(CM_REP_STARTING_PSN, p, m->qpn);
		IBA_SET(CM_REP_RESPONDER_RESOURCES, p, 1);
		IBA_SET(CM_REP_INITIATOR_DEPTH, p, 1);
		IBA_SET(CM_REP_RNR_RETRY_COUNT, p, 7);
		IBA_SET(CM_REP_LOCAL_CA_GUID, p, m->guid);
		return RCD_CM_PD(REP, p, m, cut);
	}
	case CM_RTU_ATTR: {
		struct cm_rtu_msg *p = mad;

		IBA_SET(CM_RTU_LOCAL_COMM_ID, p, m->lcid);
		IBA_SET(CM_RTU_REMOTE_COMM_ID, p, m->rcid);
		return RCD_CM_PD(RTU, p, m, cut);
	}
	case CM_DREQ_ATTR: {
		struct cm_dreq_msg *p = mad;

		IBA_SET(CM_DREQ_LOCAL_COMM_ID, p, m->lcid);
		IBA_SET(CM_DREQ_REMOTE_COMM_ID, p, m->rcid);
		IBA_SET(CM_DREQ_REMOTE_QPN_EECN, p, m->qpn);
		return RCD_CM_PD(DREQ, p, m, cut);
	}
	case CM_DREP_ATTR: {
		struct cm_drep_msg *p = mad;

		IBA_SET(CM_DREP_LOCAL_COMM_ID, p, m->lcid);
		IBA_SET(CM_DREP_REMOTE_COMM_ID, p, m->rcid);
		return RCD_CM_PD(DREP, p, m, cut);
	}
	case CM_SIDR_REQ_ATTR: {
		struct cm_sidr_req_msg *p = mad;

		IBA_SET(CM_SIDR_REQ_REQUESTID, p, m->lcid);
		IBA_SET(CM_SIDR_REQ_PARTITION_KEY, p, 0xffff);
		IBA_SET(CM_SIDR_REQ_SERVICEID, p, m->sid);
		return RCD_CM_PD(SIDR_REQ, p, m, cut);
	}
	case CM_SIDR_REP_ATTR: {
		struct cm_sidr_rep_msg *p = mad;

		IBA_SET(CM_SIDR_REP_REQUESTID, p, m->lcid);
		IBA_SET(CM_SIDR_REP_STATUS, p, m->status);
		IBA_SET(CM_SIDR_REP_QPN, p, m->qpn);
		IBA_SET(CM_SIDR_REP_SERVICEID, p, m->sid);
		IBA_SET(CM_SIDR_REP_Q_KEY, p, m->rcid);
		return RCD_CM_PD(SIDR_REP, p, m, cut);
	}
	case CM_LAP_ATTR: {
		struct cm_lap_msg *p = mad;

		IBA_SET(CM_LAP_LOCAL_COMM_ID, p, m->lcid);
		IBA_SET(CM_LAP_REMOTE_COMM_ID, p, m->rcid);
		IBA_SET(CM_LAP_REMOTE_QPN_EECN, p, m->qpn);
		IBA_SET(CM_LAP_REMOTE_CM_RESPONSE_TIMEOUT, p, m->resp);
		*IBA_GET_MEM_PTR(CM_LAP_ALTERNATE_LOCAL_PORT_GID, p) = w->sgid;
		*IBA_GET_MEM_PTR(CM_LAP_ALTERNATE_REMOTE_PORT_GID, p) = w->dgid;
		IBA_SET(CM_LAP_ALTERNATE_LOCAL_PORT_LID, p, 0xffff);
		IBA_SET(CM_LAP_ALTERNATE_REMOTE_PORT_LID, p, 0xffff);
		IBA_SET(CM_LAP_ALTERNATE_HOP_LIMIT, p, 64);
		IBA_SET(CM_LAP_ALTERNATE_PACKET_RATE, p, IB_RATE_10_GBPS);
		IBA_SET(CM_LAP_ALTERNATE_LOCAL_ACK_TIMEOUT, p, 18);
		return RCD_CM_PD(LAP, p, m, cut);
	}
	case CM_APR_ATTR: {
		struct cm_apr_msg *p = mad;

		IBA_SET(CM_APR_LOCAL_COMM_ID, p, m->lcid);
		IBA_SET(CM_APR_REMOTE_COMM_ID, p, m->rcid);
		IBA_SET(CM_APR_AR_STATUS, p, m->status);
		return RCD_CM_PD(APR, p, m, cut);
	}
	}
	return -EINVAL;
}

/*
 * rcd_cm_post - one MAD of @m over @w, no timeout and no retry: the
 * completion goes to the agent's handler. Nothing posted on an error.
 */
static int rcd_cm_post(const struct rcd_wire *w, const struct rcd_cm_msg *m,
		       bool cut)
{
	struct ib_mad_send_buf *buf;
	int ret;

	buf = ib_create_send_mad(w->agent, 1, 0, 0, IB_MGMT_MAD_HDR,
				 IB_MGMT_MAD_DATA, GFP_KERNEL,
				 IB_MGMT_BASE_VERSION);
	if (IS_ERR(buf))
		return PTR_ERR(buf);
	ret = rcd_cm_format(buf->mad, m, w, cut);
	if (ret)
		goto free;
	buf->ah = w->ah;
	buf->timeout_ms = 0;
	buf->retries = 0;
	ret = ib_post_send_mad(buf, NULL);
	if (!ret)
		return 0;
free:
	ib_free_send_mad(buf);
	return ret;
}

#endif /* RCD_CM_WIRE_H */
