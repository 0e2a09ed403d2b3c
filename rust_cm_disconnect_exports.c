// SPDX-License-Identifier: GPL-2.0
/*
 * The C part of rust_cm_disconnect.
 *
 * 6.12 has neither a Rust debugfs abstraction nor a way for Rust code to
 * export symbols, so the module carries this small C file:
 *
 *  - debugfs: one directory whose files call back into Rust through a table
 *    of function pointers (struct rcd_debugfs_ops) and an opaque context;
 *  - exports: EXPORT_SYMBOL_GPL of the C API declared in
 *    include/rust_cm_disconnect.h, implemented in rust_cm_disconnect/shim/capi.rs.
 *
 * No logic lives here: every decision is taken by the Rust code.
 */

#include <linux/debugfs.h>
#include <linux/preempt.h>
#include <linux/fs.h>
#include <linux/module.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include <rust_cm_disconnect.h>

#include "rust_cm_disconnect_shim.h"

/* A control write is one command line; this bounds what is copied in. */
#define RCD_CTL_MAX 4096

static struct dentry *rcd_dir;
static const struct rcd_debugfs_ops *rcd_ops;
static void *rcd_ctx;

void rcd_seq_write(struct seq_file *m, const void *buf, size_t len)
{
	seq_write(m, buf, len);
}

static int rcd_show(struct seq_file *m, void *unused)
{
	return rcd_ops->show(rcd_ctx, (unsigned long)m->private, m);
}

static int rcd_open(struct inode *inode, struct file *file)
{
	return single_open(file, rcd_show, inode->i_private);
}

static ssize_t rcd_write(struct file *file, const char __user *ubuf,
			 size_t len, loff_t *ppos)
{
	struct seq_file *m = file->private_data;
	char *buf;
	int ret;

	if (len > RCD_CTL_MAX)
		return -E2BIG;
	buf = memdup_user_nul(ubuf, len);
	if (IS_ERR(buf))
		return PTR_ERR(buf);
	ret = rcd_ops->write(rcd_ctx, (unsigned long)m->private, buf, len);
	kfree(buf);
	return ret ? ret : len;
}

static const struct file_operations rcd_fops = {
	.owner = THIS_MODULE,
	.open = rcd_open,
	.read = seq_read,
	.llseek = seq_lseek,
	.write = rcd_write,
	.release = single_release,
};

int rcd_debugfs_create(const char *name, const struct rcd_debugfs_file *files,
		       size_t nr_files, const struct rcd_debugfs_ops *ops,
		       void *ctx)
{
	size_t i;

	if (rcd_dir)
		return -EBUSY;
	rcd_ops = ops;
	rcd_ctx = ctx;
	rcd_dir = debugfs_create_dir(name, NULL);
	if (IS_ERR(rcd_dir)) {
		int ret = PTR_ERR(rcd_dir);

		rcd_dir = NULL;
		return ret;
	}
	for (i = 0; i < nr_files; i++)
		debugfs_create_file(files[i].name, files[i].mode, rcd_dir,
				    (void *)(unsigned long)files[i].id,
				    &rcd_fops);
	return 0;
}

void rcd_debugfs_remove(void)
{
	/* Waits for every open file's operation in progress to finish. */
	debugfs_remove(rcd_dir);
	rcd_dir = NULL;
	rcd_ops = NULL;
	rcd_ctx = NULL;
}

/*
 * might_sleep() for the C API's functions that may sleep: a macro, which
 * 6.12's kernel crate does not wrap. A caller in the wrong context gets
 * the kernel's own report (CONFIG_DEBUG_ATOMIC_SLEEP), with this
 * function's caller in the backtrace.
 */
void rcd_might_sleep(void)
{
	might_sleep();
}

/*
 * The C API (include/rust_cm_disconnect.h, documented there), implemented
 * in shim/capi.rs: Rust cannot export a symbol, so each is defined here too.
 */
int rcd_send_dreq(struct ib_cm_id *cm_id, const void *private_data, size_t len)
{
	return rcd_rs_send_dreq(cm_id, private_data, len);
}
EXPORT_SYMBOL_GPL(rcd_send_dreq);

int rcd_send_drep(struct ib_cm_id *cm_id, const void *private_data, size_t len)
{
	return rcd_rs_send_drep(cm_id, private_data, len);
}
EXPORT_SYMBOL_GPL(rcd_send_drep);

int rcd_disconnect(struct ib_cm_id *cm_id, struct ib_qp *qp,
		   const void *private_data, size_t len)
{
	return rcd_rs_disconnect(cm_id, qp, private_data, len);
}
EXPORT_SYMBOL_GPL(rcd_disconnect);

/*
 * Test-only (tests/modules/rcd_test.h), in its own namespace: a module must
 * MODULE_IMPORT_NS(RCD_TEST) to link against it.
 */
int rcd_test_with_conn(u32 num,
		       int (*fn)(struct ib_cm_id *id, struct ib_qp *qp, void *arg),
		       void *arg)
{
	return rcd_rs_test_with_conn(num, fn, arg);
}
EXPORT_SYMBOL_NS_GPL(rcd_test_with_conn, RCD_TEST);
