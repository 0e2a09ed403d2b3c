// SPDX-License-Identifier: GPL-2.0
/*
 * rcd_fuzzpeer: a randomized hostile IB CM peer for the tests.
 * Like rcd_peer.ko it puts CM MADs on the wire from device @dev (rxe1 on
 * v1, @src) to the GSI QP of the device that owns @dst (rxe0 on v0, where
 * rust_cm_disconnect listens), with the MAD layer alone (no ib_cm_id of its
 * own), so the receiving CM sees what a remote host's broken or malicious
 * CM would send. Unlike rcd_peer it makes the messages up itself: a kernel
 * thread draws, from a seeded PRNG, for a stated time,
 *
 *  - messages of every kind (REQ, MRA, REJ, REP, RTU, DREQ, DREP, SIDR REQ,
 *    SIDR REP, LAP, APR) with every field at random;
 *  - REQs to the service ids it was told (the module's listeners: plain,
 *    cma=1 with a valid or a lying cma_hdr, rping=1, backlog=N, auto_drep),
 *    as new connections, duplicates (same id, same or another TID), stale
 *    ones (an id or QPN already used), UC, with the module's own REQ
 *    header naming one of the test's connections ("RCD1" and a number);
 *  - follow-ups to the ends it has seen: the module's local id, the
 *    remote id (the peer's own, or that of a connection the module made
 *    itself) and the module's QPN, as written to `pool` by the test from
 *    the module's conns file (what a peer learns from the REPs it gets):
 *    RTU, DREQ (right or wrong QPN), DREP, REJ (of a REQ, a REP, other;
 *    every reason), MRA, LAP, APR, REP, a REQ again, one field mutated now
 *    and then;
 *  - out-of-order sequences of 2-5 of those for one end with no gap
 *    (DREQ before RTU, REJ after DREQ, RTU twice, ...);
 *  - SIDR REQs to the listeners.
 *
 * The seed is printed (stats, and the kernel log at the start): the same
 * seed draws the same choices; what the pool holds depends on timing, so
 * a replay takes the same path only as far as the module answers alike.
 *
 * The timers a peer sets are bounded in every message, by @max_resp (REQ
 * response timeout exponents, MRA service timeout) and @max_retries (REQ),
 * so that the CM's own timers end every handshake within a few seconds of
 * the run: with 31 a peer holds an end for hours by cm.c's
 * design (cm_convert_to_ms, cm_req_handler's timeout_ms, cm_mra_handler):
 * that is for the bound on what a peer can make the module hold (t_peer.sh),
 * not the fuzzer's business.
 * Every other field of a random message carries any value.
 *
 * debugfs /sys/kernel/debug/rcd_fuzzpeer/:
 *   ctl    write: "run seed=S ms=M gap_us=G" (seed 0 or none: a random
 *          one), "stop", "sid SID" (a service id to aim REQs and SIDR REQs
 *          at), "end LID RID QPN" (one end per line, several lines a write)
 *   stats  the seed, whether it runs, messages posted per kind, actions
 *          per kind, send completions, the pool's size
 */
#include <linux/debugfs.h>
#include <linux/delay.h>
#include <linux/hex.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/prandom.h>
#include <linux/random.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/unaligned.h>

#include "rcd_cm_wire.h"

static char *dev = "rxe1";
module_param(dev, charp, 0444);
static char *src = "10.77.0.2";
module_param(src, charp, 0444);
static char *dst = "10.77.0.1";
module_param(dst, charp, 0444);
/* The MAC of @dst's netdev (rxe sends through the IP stack; kept exact). */
static char *dmac = "00:00:00:00:00:00";
module_param(dmac, charp, 0444);
/* Bounds on the timers a message asks for (see above). */
static uint max_resp = 19;
module_param(max_resp, uint, 0444);
static uint max_retries = 5;
module_param(max_retries, uint, 0444);

/* Message kinds, by attribute id - 0x10 (0x1b: none). */
enum { K_REQ, K_MRA, K_REJ, K_REP, K_RTU, K_DREQ, K_DREP, K_SIDR_REQ,
	K_SIDR_REP, K_LAP, K_APR, NKINDS };
static const char *const kind_name[NKINDS] = {
	"req", "mra", "rej", "rep", "rtu", "dreq", "drep", "sidr_req",
	"sidr_rep", "lap", "apr",
};

static const u16 kind_attr[NKINDS] = {
	CM_REQ_ATTR, CM_MRA_ATTR, CM_REJ_ATTR, CM_REP_ATTR, CM_RTU_ATTR,
	CM_DREQ_ATTR, CM_DREP_ATTR, CM_SIDR_REQ_ATTR, CM_SIDR_REP_ATTR,
	CM_LAP_ATTR, CM_APR_ATTR,
};

enum { A_RANDOM, A_REQ, A_FOLLOW, A_SEQ, A_SIDR, NACTIONS };
static const char *const action_name[NACTIONS] = {
	"random", "new_req", "follow_up", "sequence", "sidr_req",
};

static struct rcd_wire wire;
static struct dentry *dir;

static atomic_t sent_kind[NKINDS], actions[NACTIONS];
static atomic_t comp_ok, comp_err, post_err, in_flight;

/* What the peer has seen: service ids, ends, its own REQs. */
#define NSIDS 32
#define NENDS 512
#define NOWN 256
struct end {
	u32 lid, rid, qpn;
};

struct own_req {
	u32 lcid, qpn;
	u64 sid, tid;
};

static DEFINE_SPINLOCK(pool_lock);
static u64 sids[NSIDS];
static unsigned int nsids;
static struct end ends[NENDS];
static unsigned int nends, ends_next;
static struct own_req own[NOWN];
static unsigned int nown, own_next;

/* The run: one thread at a time, under run_lock. */
static DEFINE_MUTEX(run_lock);
static struct task_struct *thread;
static u64 run_seed;
static u32 run_ms, run_gap_us;
static bool running;
static unsigned long steps;

/* One message of a kind, posted count times. */
struct msg {
	int kind;
	unsigned int count;
	struct rcd_cm_msg cm;
};

static void send_handler(struct ib_mad_agent *a, struct ib_mad_send_wc *wc)
{
	if (wc->status == IB_WC_SUCCESS)
		atomic_inc(&comp_ok);
	else
		atomic_inc(&comp_err);
	atomic_dec(&in_flight);
	ib_free_send_mad(wc->send_buf);
}

/* Posts @m->count copies of @m (duplicates: same TID). */
static void send_msg(const struct msg *m)
{
	unsigned int i;

	for (i = 0; i < m->count; i++) {
		/* Keep the send queue short: the CM must keep up. */
		while (atomic_read(&in_flight) > 32 && !kthread_should_stop())
			usleep_range(500, 1000);
		atomic_inc(&in_flight);
		/* Private data too long for its field: cut to it. */
		if (rcd_cm_post(&wire, &m->cm, true)) {
			atomic_dec(&in_flight);
			atomic_inc(&post_err);
			return;
		}
		atomic_inc(&sent_kind[m->kind]);
	}
}

/* --- drawing --------------------------------------------------------- */

static struct rnd_state rs;

static u32 rnd(u32 n)
{
	return n ? prandom_u32_state(&rs) % n : 0;
}

static u64 rnd64(void)
{
	return ((u64)prandom_u32_state(&rs) << 32) | prandom_u32_state(&rs);
}

/* An id or QPN: at random, or one seen, or a seen one off by one. */
static u32 some_u32(u32 seen)
{
	switch (rnd(4)) {
	case 0:
		return prandom_u32_state(&rs);
	case 1:
		return seen + 1;
	default:
		return seen;
	}
}

/* A valid cma_hdr (version 0, IPv4) from @src:PORT to @dst, or one lying
 * about one thing.
 */
static void cma_hdr(struct msg *m, bool lie)
{
	u8 *p = m->cm.pd;

	memset(p, 0, 36);
	p[1] = 0x40;
	put_unaligned_be16(rnd(2) ? 0 : 1024 + rnd(60000), p + 2);
	memcpy(p + 16, &wire.src_ip, 4);
	memcpy(p + 32, &wire.dst_ip, 4);
	m->cm.pd_len = 36 + rnd(20);
	if (lie)
		p[rnd(36)] ^= 1 << rnd(8);
}

static void random_pd(struct msg *m)
{
	size_t i;

	m->cm.pd_len = rnd(5) ? rnd(40) : rnd(sizeof(m->cm.pd) + 1);
	for (i = 0; i < m->cm.pd_len; i++)
		m->cm.pd[i] = rnd(4) ? prandom_u32_state(&rs) : 0;
}

static void base_msg(struct msg *m, int kind)
{
	memset(m, 0, sizeof(*m));
	m->kind = kind;
	m->cm.attr = kind_attr[kind];
	m->cm.guid = be64_to_cpu(wire.ibdev->node_guid);
	m->cm.tid = rnd64();
	m->count = rnd(10) ? 1 : 2 + rnd(2);
	/* Long enough that the test can tell the peer the ids of its new
	 * ends (twice a second) while they wait for its RTU.
	 */
	m->cm.resp = max_resp - rnd(5);
	m->cm.retries = 1 + rnd(max_retries);
	m->cm.timeout = rnd(max_resp + 1);
	m->cm.msgd = rnd(3);
	m->cm.reason = rnd(4) ? IB_CM_REJ_CONSUMER_DEFINED : 1 + rnd(33);
	m->cm.status = rnd(4);
	random_pd(m);
}

static bool pick_end(struct end *e)
{
	bool ok;

	spin_lock(&pool_lock);
	ok = nends > 0;
	if (ok)
		*e = ends[rnd(nends)];
	spin_unlock(&pool_lock);
	return ok;
}

static u64 pick_sid(void)
{
	u64 sid = rnd64();

	spin_lock(&pool_lock);
	if (nsids && rnd(10))
		sid = sids[rnd(nsids)];
	spin_unlock(&pool_lock);
	return sid;
}

static bool pick_own(struct own_req *o)
{
	bool ok;

	spin_lock(&pool_lock);
	ok = nown > 0;
	if (ok)
		*o = own[rnd(nown)];
	spin_unlock(&pool_lock);
	return ok;
}

static void remember_own(const struct msg *m)
{
	spin_lock(&pool_lock);
	own[own_next] = (struct own_req){ m->cm.lcid, m->cm.qpn, m->cm.sid, m->cm.tid };
	own_next = (own_next + 1) % NOWN;
	if (nown < NOWN)
		nown++;
	spin_unlock(&pool_lock);
}

/* Every field at random. */
static void act_random(void)
{
	struct msg m;
	struct end e = {};

	base_msg(&m, rnd(NKINDS));
	pick_end(&e);
	m.cm.lcid = some_u32(e.rid);
	m.cm.rcid = some_u32(e.lid);
	m.cm.qpn = some_u32(e.qpn) & 0xffffff;
	m.cm.sid = pick_sid();
	/* Timers stay bounded (see the top): the rest is anything. */
	m.cm.resp = rnd(max_resp + 1);
	m.cm.timeout = rnd(max_resp + 1);
	m.cm.msgd = rnd(4);
	m.cm.reason = rnd(64);
	m.cm.ts = rnd(4);
	m.cm.status = rnd(256);
	send_msg(&m);
}

static bool is_cma_sid(u64 sid)
{
	return (sid >> 16) == 0x106 || (sid >> 16) == 0x111;
}

/* A REQ to a listener: new, or one of ours again (duplicate, stale). */
static void act_req(void)
{
	struct msg m;
	struct own_req o;

	base_msg(&m, K_REQ);
	m.cm.sid = pick_sid();
	m.cm.lcid = prandom_u32_state(&rs);
	m.cm.qpn = 0x100 + rnd(0xfff00);
	if (!rnd(8) && pick_own(&o)) {
		/* The same REQ again (a duplicate) or with a new TID or a
		 * new QPN (stale).
		 */
		m.cm.lcid = o.lcid;
		m.cm.sid = o.sid;
		m.cm.qpn = rnd(2) ? o.qpn : m.cm.qpn;
		m.cm.tid = rnd(2) ? o.tid : m.cm.tid;
	}
	if (is_cma_sid(m.cm.sid))
		cma_hdr(&m, !rnd(5));
	if (!rnd(4)) {
		/* The module's own REQ header (REQ_MAGIC and the active
		 * end's number, which names the passive end): numbers of the
		 * test's own connections, or any.
		 */
		size_t off = is_cma_sid(m.cm.sid) ? 36 : 0;
		u32 num = rnd(2) ? 100 + rnd(20) : prandom_u32_state(&rs);

		memcpy(m.cm.pd + off, "RCD1", 4);
		put_unaligned_le32(num, m.cm.pd + off + 4);
		m.cm.pd_len = max(m.cm.pd_len, off + 8);
	}
	if (!rnd(20))
		m.cm.ts = 1;
	send_msg(&m);
	remember_own(&m);
}

/* One message to an end seen: its ids and QPN, now and then one wrong. */
static void follow_up(const struct end *e, int kind)
{
	struct msg m;

	base_msg(&m, kind);
	m.cm.lcid = e->rid;
	m.cm.rcid = e->lid;
	m.cm.qpn = e->qpn;
	m.cm.sid = pick_sid();
	switch (rnd(10)) {
	case 0:
		m.cm.lcid = some_u32(e->rid);
		break;
	case 1:
		m.cm.rcid = some_u32(e->lid);
		break;
	case 2:
		m.cm.qpn = some_u32(e->qpn) & 0xffffff;
		break;
	}
	if (kind == K_REQ && is_cma_sid(m.cm.sid))
		cma_hdr(&m, !rnd(5));
	send_msg(&m);
}

/* The kinds a follow-up draws, weighted. */
static const u8 follow_kinds[] = {
	K_RTU, K_RTU, K_RTU, K_RTU, K_DREQ, K_DREQ, K_DREQ, K_DREQ, K_DREP,
	K_DREP, K_REJ, K_REJ, K_REJ, K_MRA, K_MRA, K_LAP, K_APR, K_REP, K_REP,
	K_REQ, K_SIDR_REP,
};

static void act_follow(void)
{
	struct end e;

	if (!pick_end(&e)) {
		act_req();
		return;
	}
	follow_up(&e, follow_kinds[rnd(ARRAY_SIZE(follow_kinds))]);
}

/* 2-5 follow-ups to one end, back to back, in any order. */
static void act_seq(void)
{
	struct end e;
	unsigned int i, n = 2 + rnd(4);

	if (!pick_end(&e)) {
		act_req();
		return;
	}
	for (i = 0; i < n; i++)
		follow_up(&e, follow_kinds[rnd(ARRAY_SIZE(follow_kinds))]);
}

static void act_sidr(void)
{
	struct msg m;

	base_msg(&m, K_SIDR_REQ);
	m.cm.sid = pick_sid();
	m.cm.lcid = prandom_u32_state(&rs);
	if (is_cma_sid(m.cm.sid))
		cma_hdr(&m, !rnd(4));
	send_msg(&m);
}

static int fuzz_thread(void *unused)
{
	unsigned long end = jiffies + msecs_to_jiffies(run_ms);
	u32 r;

	pr_info("rcd_fuzzpeer: seed %llu, %u ms, gap %u us\n", run_seed,
		run_ms, run_gap_us);
	/* Below the module's work and the test's shell: under TCG the
	 * thread would otherwise starve the test that tells it what it sees.
	 */
	set_user_nice(current, MAX_NICE);
	while (!kthread_should_stop() && time_before(jiffies, end)) {
		r = rnd(100);
		if (r < 15) {
			atomic_inc(&actions[A_RANDOM]);
			act_random();
		} else if (r < 35) {
			atomic_inc(&actions[A_REQ]);
			act_req();
		} else if (r < 80) {
			atomic_inc(&actions[A_FOLLOW]);
			act_follow();
		} else if (r < 95) {
			atomic_inc(&actions[A_SEQ]);
			act_seq();
		} else {
			atomic_inc(&actions[A_SIDR]);
			act_sidr();
		}
		steps++;
		if (run_gap_us)
			usleep_range(run_gap_us / 2 + 1,
				     run_gap_us + run_gap_us / 2 + 1);
		cond_resched();
	}
	WRITE_ONCE(running, false);
	pr_info("rcd_fuzzpeer: done after %lu steps\n", steps);
	/* Stay until stopped: kthread_stop() wants a live thread. */
	while (!kthread_should_stop()) {
		set_current_state(TASK_INTERRUPTIBLE);
		if (!kthread_should_stop())
			schedule();
		__set_current_state(TASK_RUNNING);
	}
	return 0;
}

static void stop_run(void)
{
	if (thread) {
		kthread_stop(thread);
		thread = NULL;
	}
	WRITE_ONCE(running, false);
}

/* --- debugfs ---------------------------------------------------------- */

static int cmd_run(char *args)
{
	char *tok, *val;
	u64 seed = 0;
	u32 ms = 10000, gap = 5000;
	int i, ret;

	while ((tok = strsep(&args, " \t"))) {
		if (!*tok)
			continue;
		val = strchr(tok, '=');
		if (!val)
			return -EINVAL;
		*val++ = 0;
		if (!strcmp(tok, "seed"))
			ret = kstrtou64(val, 0, &seed);
		else if (!strcmp(tok, "ms"))
			ret = kstrtou32(val, 0, &ms);
		else if (!strcmp(tok, "gap_us"))
			ret = kstrtou32(val, 0, &gap);
		else
			ret = -EINVAL;
		if (ret)
			return ret;
	}
	if (gap > 1000000)
		return -EINVAL;
	stop_run();
	if (!seed)
		seed = get_random_u64() ?: 1;
	run_seed = seed;
	run_ms = ms;
	run_gap_us = gap;
	prandom_seed_state(&rs, seed);
	steps = 0;
	for (i = 0; i < NKINDS; i++)
		atomic_set(&sent_kind[i], 0);
	for (i = 0; i < NACTIONS; i++)
		atomic_set(&actions[i], 0);
	atomic_set(&comp_ok, 0);
	atomic_set(&comp_err, 0);
	atomic_set(&post_err, 0);
	WRITE_ONCE(running, true);
	thread = kthread_run(fuzz_thread, NULL, "rcd_fuzzpeer");
	if (IS_ERR(thread)) {
		ret = PTR_ERR(thread);
		thread = NULL;
		WRITE_ONCE(running, false);
		return ret;
	}
	return 0;
}

static int cmd_end(char *args)
{
	char *l, *r, *q;
	struct end e;
	int ret;

	l = strsep(&args, " \t");
	r = strsep(&args, " \t");
	q = strsep(&args, " \t");
	if (!l || !r || !q)
		return -EINVAL;
	ret = kstrtou32(l, 0, &e.lid) ?: kstrtou32(r, 0, &e.rid) ?:
	      kstrtou32(q, 0, &e.qpn);
	if (ret)
		return ret;
	spin_lock(&pool_lock);
	ends[ends_next] = e;
	ends_next = (ends_next + 1) % NENDS;
	if (nends < NENDS)
		nends++;
	spin_unlock(&pool_lock);
	return 0;
}

static int cmd_sid(char *args)
{
	u64 sid;
	int ret = kstrtou64(strim(args), 0, &sid);

	if (ret)
		return ret;
	spin_lock(&pool_lock);
	if (nsids < NSIDS)
		sids[nsids++] = sid;
	else
		ret = -ENOSPC;
	spin_unlock(&pool_lock);
	return ret;
}

static int do_line(char *line)
{
	char *word = strsep(&line, " \t");

	if (!word || !*word)
		return 0;
	if (!strcmp(word, "run"))
		return cmd_run(line ?: (char *)"");
	if (!strcmp(word, "stop")) {
		stop_run();
		return 0;
	}
	if (!line)
		return -EINVAL;
	if (!strcmp(word, "end"))
		return cmd_end(line);
	if (!strcmp(word, "sid"))
		return cmd_sid(line);
	return -EINVAL;
}

static ssize_t ctl_write(struct file *f, const char __user *ubuf, size_t len,
			 loff_t *off)
{
	char *buf, *p, *line, *nl;
	int ret = 0;

	if (len > 8192)
		return -E2BIG;
	buf = memdup_user_nul(ubuf, len);
	if (IS_ERR(buf))
		return PTR_ERR(buf);
	/* Whole lines only: a writer's stdio may cut a long string into
	 * several writes anywhere; the part after the last newline is left
	 * unconsumed (a short write), and the writer sends it again with
	 * the rest. A write with no newline at all is one line.
	 */
	nl = strrchr(buf, '\n');
	if (nl && nl[1]) {
		nl[1] = 0;
		len = nl + 1 - buf;
	}
	mutex_lock(&run_lock);
	p = buf;
	while (!ret && (line = strsep(&p, "\n")))
		ret = do_line(line);
	mutex_unlock(&run_lock);
	kfree(buf);
	return ret ? ret : len;
}

static int stats_show(struct seq_file *s, void *unused)
{
	int i, total = 0;

	seq_printf(s, "seed %llu\nrunning %d\nms %u\ngap_us %u\nsteps %lu\n",
		   run_seed, READ_ONCE(running), run_ms, run_gap_us, steps);
	for (i = 0; i < NKINDS; i++)
		total += atomic_read(&sent_kind[i]);
	seq_printf(s, "sent %d\n", total);
	for (i = 0; i < NKINDS; i++)
		seq_printf(s, "sent_%s %d\n", kind_name[i],
			   atomic_read(&sent_kind[i]));
	for (i = 0; i < NACTIONS; i++)
		seq_printf(s, "action_%s %d\n", action_name[i],
			   atomic_read(&actions[i]));
	seq_printf(s, "completed %d\ncompletion_errors %d\npost_errors %d\n",
		   atomic_read(&comp_ok), atomic_read(&comp_err),
		   atomic_read(&post_err));
	spin_lock(&pool_lock);
	seq_printf(s, "pool_sids %u\npool_ends %u\npool_own %u\n", nsids,
		   nends, nown);
	spin_unlock(&pool_lock);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(stats);

static const struct file_operations ctl_fops = {
	.owner = THIS_MODULE,
	.write = ctl_write,
};

static int __init rcd_fuzzpeer_init(void)
{
	int ret;

	if (max_resp < 12 || max_resp > 31 || max_retries < 1 || max_retries > 15)
		return -EINVAL;
	ret = rcd_wire_open(&wire, dev, src, dst, dmac, send_handler);
	if (ret)
		return ret;
	dir = debugfs_create_dir("rcd_fuzzpeer", NULL);
	debugfs_create_file("ctl", 0200, dir, NULL, &ctl_fops);
	debugfs_create_file("stats", 0400, dir, NULL, &stats_fops);
	return 0;
}

static void __exit rcd_fuzzpeer_exit(void)
{
	debugfs_remove(dir);
	mutex_lock(&run_lock);
	stop_run();
	mutex_unlock(&run_lock);
	rcd_wire_close(&wire);
}

module_init(rcd_fuzzpeer_init);
module_exit(rcd_fuzzpeer_exit);
MODULE_DESCRIPTION("A randomized hostile IB CM peer for rust_cm_disconnect's tests");
MODULE_LICENSE("GPL");
