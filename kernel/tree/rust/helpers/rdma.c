// SPDX-License-Identifier: GPL-2.0

#include <rdma/ib_verbs.h>

__rust_helper bool rust_helper_ib_device_try_get(struct ib_device *dev)
{
	return ib_device_try_get(dev);
}

__rust_helper bool rust_helper_rdma_cap_ib_cm(const struct ib_device *device,
					      u32 port_num)
{
	return rdma_cap_ib_cm(device, port_num);
}

__rust_helper bool
rust_helper_rdma_protocol_roce(const struct ib_device *device, u32 port_num)
{
	return rdma_protocol_roce(device, port_num);
}

__rust_helper u32 rust_helper_rdma_start_port(const struct ib_device *device)
{
	return rdma_start_port(device);
}

__rust_helper u32 rust_helper_rdma_end_port(const struct ib_device *device)
{
	return rdma_end_port(device);
}

__rust_helper u64
rust_helper_ib_dma_map_single(struct ib_device *dev, void *cpu_addr,
			      size_t size, enum dma_data_direction direction)
{
	return ib_dma_map_single(dev, cpu_addr, size, direction);
}

__rust_helper int rust_helper_ib_dma_mapping_error(struct ib_device *dev,
						   u64 dma_addr)
{
	return ib_dma_mapping_error(dev, dma_addr);
}

__rust_helper void
rust_helper_ib_dma_unmap_single(struct ib_device *dev, u64 addr, size_t size,
				enum dma_data_direction direction)
{
	ib_dma_unmap_single(dev, addr, size, direction);
}

__rust_helper void
rust_helper_ib_dma_sync_single_for_cpu(struct ib_device *dev, u64 addr,
				       size_t size,
				       enum dma_data_direction dir)
{
	ib_dma_sync_single_for_cpu(dev, addr, size, dir);
}

__rust_helper void
rust_helper_ib_dma_sync_single_for_device(struct ib_device *dev, u64 addr,
					  size_t size,
					  enum dma_data_direction dir)
{
	ib_dma_sync_single_for_device(dev, addr, size, dir);
}

__rust_helper void rust_helper_ib_update_fast_reg_key(struct ib_mr *mr,
						      u8 newkey)
{
	ib_update_fast_reg_key(mr, newkey);
}

__rust_helper int
rust_helper_ib_post_send(struct ib_qp *qp, const struct ib_send_wr *send_wr,
			 const struct ib_send_wr **bad_send_wr)
{
	return ib_post_send(qp, send_wr, bad_send_wr);
}

__rust_helper int
rust_helper_ib_post_recv(struct ib_qp *qp, const struct ib_recv_wr *recv_wr,
			 const struct ib_recv_wr **bad_recv_wr)
{
	return ib_post_recv(qp, recv_wr, bad_recv_wr);
}

__rust_helper int rust_helper_ib_poll_cq(struct ib_cq *cq, int num_entries,
					 struct ib_wc *wc)
{
	return ib_poll_cq(cq, num_entries, wc);
}
