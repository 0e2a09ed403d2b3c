/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rcd_ib_device_get_by_name() for the test modules: the registered RDMA
 * device called @name, with a reference (ib_device_put() it), or NULL.
 *
 * ib_device_get_by_name() did this on 6.12; later kernels (7.3) no longer
 * have it. A client registered for the lookup sees every registered device
 * in its add callback, takes a reference on the one with that name and
 * binds to none (an add callback's error only leaves that device out), so
 * unregistering it calls no remove. The same code on both kernels.
 */
#ifndef RCD_IBDEV_H
#define RCD_IBDEV_H

#include <linux/atomic.h>
#include <linux/mutex.h>
#include <linux/string.h>
#include <rdma/ib_verbs.h>

static DEFINE_MUTEX(rcd_ibdev_lock);
static const char *rcd_ibdev_want;
static struct ib_device *rcd_ibdev_found;

static int rcd_ibdev_add(struct ib_device *ibdev)
{
	/* Another device may be registered while we look: keep the first. */
	if (!strcmp(dev_name(&ibdev->dev), rcd_ibdev_want) &&
	    ib_device_try_get(ibdev) && cmpxchg(&rcd_ibdev_found, NULL, ibdev))
		ib_device_put(ibdev);
	return -EOPNOTSUPP;
}

static void rcd_ibdev_remove(struct ib_device *ibdev, void *client_data)
{
}

static struct ib_client rcd_ibdev_client = {
	.name = "rcd_ibdev_lookup",
	.add = rcd_ibdev_add,
	.remove = rcd_ibdev_remove,
};

static inline struct ib_device *rcd_ib_device_get_by_name(const char *name)
{
	struct ib_device *ibdev = NULL;

	mutex_lock(&rcd_ibdev_lock);
	rcd_ibdev_want = name;
	rcd_ibdev_found = NULL;
	if (!ib_register_client(&rcd_ibdev_client)) {
		ib_unregister_client(&rcd_ibdev_client);
		ibdev = xchg(&rcd_ibdev_found, NULL);
	}
	mutex_unlock(&rcd_ibdev_lock);
	return ibdev;
}

#endif /* RCD_IBDEV_H */
