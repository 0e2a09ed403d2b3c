/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Private interface between the Rust and the C parts of rust_cm_disconnect.
 * Not for consumers: they include include/rust_cm_disconnect.h.
 * Mirrored by hand in rust_cm_disconnect/shim/debugfs.rs and shim/capi.rs.
 */
#ifndef RUST_CM_DISCONNECT_SHIM_H
#define RUST_CM_DISCONNECT_SHIM_H

#include <linux/types.h>

struct seq_file;

struct rcd_debugfs_file {
	const char *name;
	umode_t mode;
	unsigned int id;
};

struct rcd_debugfs_ops {
	/* Prints file @id into @m. */
	int (*show)(void *ctx, unsigned int id, struct seq_file *m);
	/* Takes one write of @len bytes (NUL-terminated copy) to file @id. */
	int (*write)(void *ctx, unsigned int id, const char *buf, size_t len);
};

int rcd_debugfs_create(const char *name, const struct rcd_debugfs_file *files,
		       size_t nr_files, const struct rcd_debugfs_ops *ops,
		       void *ctx);
void rcd_debugfs_remove(void);
void rcd_seq_write(struct seq_file *m, const void *buf, size_t len);

struct ib_cm_id;
struct ib_qp;

/*
 * The C API's implementations (shim/capi.rs), which rust_cm_disconnect_exports.c
 * defines and exports under their public names (include/rust_cm_disconnect.h):
 * Rust cannot export a symbol.
 */
int rcd_rs_send_dreq(struct ib_cm_id *cm_id, const void *private_data, size_t len);
int rcd_rs_send_drep(struct ib_cm_id *cm_id, const void *private_data, size_t len);
int rcd_rs_disconnect(struct ib_cm_id *cm_id, struct ib_qp *qp,
		      const void *private_data, size_t len);

/*
 * The test-only entry point, exported in namespace RCD_TEST as
 * rcd_test_with_conn(); consumers see it in tests/modules/rcd_test.h
 * (documented there), never in include/.
 */
int rcd_test_with_conn(u32 num,
		       int (*fn)(struct ib_cm_id *id, struct ib_qp *qp, void *arg),
		       void *arg);
int rcd_rs_test_with_conn(u32 num,
			  int (*fn)(struct ib_cm_id *id, struct ib_qp *qp, void *arg),
			  void *arg);

/* might_sleep(): the kernel's report for a caller in atomic context. */
void rcd_might_sleep(void);

#endif
