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
 *   ack          the primary path's local ACK timeout (REQ; default 18):
 *                the receiving CM's timewait is 2^(ack - 8) ms (cm.c:
 *                cm_convert_to_ms), 2^23 ms at 31
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
#include <linux/hex.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "rcd_cm_wire.h"

/* 7.3's typed allocator (slab.h); 6.12 has none. */
#ifndef kzalloc_obj
#define kzalloc_obj(P, GFP) kzalloc(sizeof(P), GFP)
#endif

static char *dev = "rxe1";
module_param(dev, charp, 0444);
static char *src = "10.77.0.2";
module_param(src, charp, 0444);
static char *dst = "10.77.0.1";
module_param(dst, charp, 0444);
/* The MAC of @dst's netdev (rxe sends through the IP stack; kept exact). */
static char *dmac = "00:00:00:00:00:00";
module_param(dmac, charp, 0444);

static struct rcd_wire wire;
static struct dentry *dir;
static atomic64_t next_tid = ATOMIC64_INIT(0x7eed0000);
static atomic_t sent_ok = ATOMIC_INIT(0), sent_err = ATOMIC_INIT(0);

/* A command: one message, posted count times. */
struct cmd {
	u32 count;
	struct rcd_cm_msg cm;
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

static const struct {
	const char *name;
	u16 attr;
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
	{ "lcid", offsetof(struct cmd, cm.lcid), sizeof_field(struct cmd, cm.lcid) },
	{ "rcid", offsetof(struct cmd, cm.rcid), sizeof_field(struct cmd, cm.rcid) },
	{ "qpn", offsetof(struct cmd, cm.qpn), sizeof_field(struct cmd, cm.qpn) },
	{ "ts", offsetof(struct cmd, cm.ts), sizeof_field(struct cmd, cm.ts) },
	{ "resp", offsetof(struct cmd, cm.resp), sizeof_field(struct cmd, cm.resp) },
	{ "retries", offsetof(struct cmd, cm.retries), sizeof_field(struct cmd, cm.retries) },
	{ "ack", offsetof(struct cmd, cm.ack), sizeof_field(struct cmd, cm.ack) },
	{ "msg", offsetof(struct cmd, cm.msgd), sizeof_field(struct cmd, cm.msgd) },
	{ "reason", offsetof(struct cmd, cm.reason), sizeof_field(struct cmd, cm.reason) },
	{ "timeout", offsetof(struct cmd, cm.timeout), sizeof_field(struct cmd, cm.timeout) },
	{ "count", offsetof(struct cmd, count), sizeof_field(struct cmd, count) },
	{ "sid", offsetof(struct cmd, cm.sid), sizeof_field(struct cmd, cm.sid) },
	{ "guid", offsetof(struct cmd, cm.guid), sizeof_field(struct cmd, cm.guid) },
	{ "tid", offsetof(struct cmd, cm.tid), sizeof_field(struct cmd, cm.tid) },
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
	c->cm.attr = 0;
	for (i = 0; i < ARRAY_SIZE(kinds); i++)
		if (!strcmp(tok, kinds[i].name))
			c->cm.attr = kinds[i].attr;
	if (!c->cm.attr)
		return -EINVAL;
	c->cm.qpn = 0x100;
	c->cm.resp = 14;
	c->cm.retries = 2;
	c->cm.reason = IB_CM_REJ_CONSUMER_DEFINED;
	c->cm.timeout = 20;
	c->count = 1;
	c->cm.guid = be64_to_cpu(wire.ibdev->node_guid);
	c->cm.tid = atomic64_inc_return(&next_tid);
	while ((tok = strsep(&line, "\n "))) {
		if (!*tok)
			continue;
		val = strchr(tok, '=');
		if (!val)
			return -EINVAL;
		*val++ = 0;
		if (!strcmp(tok, "pd")) {
			size_t n = strlen(val);

			if (n % 2 || n / 2 > sizeof(c->cm.pd))
				return -EINVAL;
			ret = hex2bin(c->cm.pd, val, n / 2);
			if (ret)
				return ret;
			c->cm.pd_len = n / 2;
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
	/* Private data too long for its field: EINVAL. */
	for (i = 0; !ret && i < c->count; i++)
		ret = rcd_cm_post(&wire, &c->cm, false);
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
	int ret;

	ret = rcd_wire_open(&wire, dev, src, dst, dmac, send_handler);
	if (ret)
		return ret;
	dir = debugfs_create_dir("rcd_peer", NULL);
	debugfs_create_file("send", 0200, dir, NULL, &send_fops);
	debugfs_create_file("stats", 0400, dir, NULL, &stats_fops);
	return 0;
}

static void __exit rcd_peer_exit(void)
{
	debugfs_remove(dir);
	rcd_wire_close(&wire);
}

module_init(rcd_peer_init);
module_exit(rcd_peer_exit);
MODULE_DESCRIPTION("A hostile IB CM peer for rust_cm_disconnect's tests");
MODULE_LICENSE("GPL");
