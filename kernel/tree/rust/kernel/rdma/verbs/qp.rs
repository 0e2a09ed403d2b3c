// SPDX-License-Identifier: GPL-2.0

//! [`RcQp`]: a protection domain, a CQ and an RC QP owned together, and
//! the work requests posted on the QP with their buffers.

use super::{
    attr::{QpAttr, QpRef},
    cq::{alloc_cq, CqShared, WrCqe},
    mapping::{Mapping, Posted},
    mr::MrSlot,
    wc::WrKind,
};
use crate::{
    bindings,
    error::{from_err_ptr, to_result},
    ffi::c_int,
    prelude::*,
    rdma::device::Device,
    str::CStr,
    sync::aref::ARef,
    types::ScopeGuard,
};
use core::{mem::ManuallyDrop, pin::Pin, ptr::NonNull};

/// What an [`RcQp`] is made with: its queue sizes and the user's choices,
/// all of them the caller's (there is no default).
///
/// # Examples
///
/// ```
/// use kernel::{c_str, rdma::verbs::QpSize};
///
/// let size = QpSize { send: 64, recv: 256, max_mrs: 2, caller: c_str!("rping") };
/// assert_eq!((size.send, size.recv, size.max_mrs), (64, 256, 2));
/// ```
#[derive(Clone, Copy)]
pub struct QpSize {
    /// Work requests the send queue holds (completions not yet polled
    /// included).
    pub send: u32,
    /// Work requests the receive queue holds.
    pub recv: u32,
    /// The most MRs the QP registers at once (`ENOSPC` beyond; 0: none).
    pub max_mrs: usize,
    /// The name the RDMA core records for the PD, CQ and QP (restrack, as
    /// `rdma resource` shows it): usually the module's.
    pub caller: &'static CStr,
}

/// A protection domain, a CQ the RDMA core polls, an RC QP using both, and
/// the work requests posted on the QP with their buffers.
///
/// # Invariants
///
/// `pd`, `cq` and `qp` are live objects of `device`; `qp` was created on
/// `pd` with `cq` as its send and receive CQ, and `cq`'s context is
/// `shared`. They are destroyed in the order QP, CQ, PD, each exactly once,
/// in `drop`. `wrs` and `cqes` have one entry per slot, `send + recv` of
/// them, and are never resized. Every work request posted on `qp` and not
/// yet taken from `shared` is in `wrs` at its slot, with the buffer it was
/// posted with (mapped for the device), and carries its slot's `cqes`
/// entry as its `wr_cqe`: nothing else reaches those buffers until the
/// request's completion is taken or the QP is destroyed. `shared` and
/// `cqes` are freed after the CQ. `device` (a reference) is released after
/// them, and never if the QP could not be destroyed (it is leaked with it).
pub struct RcQp {
    pub(super) pd: NonNull<bindings::ib_pd>,
    pub(super) cq: NonNull<bindings::ib_cq>,
    pub(super) shared: ManuallyDrop<Pin<KBox<CqShared>>>,
    pub(super) cqes: ManuallyDrop<KVec<WrCqe>>,
    pub(super) qp: NonNull<bindings::ib_qp>,
    pub(super) size: QpSize,
    pub(super) wrs: KVec<Option<Posted>>,
    pub(super) mrs: KVec<MrSlot>,
    // Released by `drop` after it has freed the objects and mappings above;
    // leaked with them if the QP could not be destroyed.
    pub(super) device: ManuallyDrop<ARef<Device>>,
}

impl RcQp {
    /// Allocates a PD, a CQ and an RC QP on `device`. May sleep.
    pub fn new(device: &Device, size: QpSize) -> Result<Self> {
        // SAFETY: `device` is registered; `caller` is a static string. No
        // flags: no unsafe global rkey.
        let pd = from_err_ptr(unsafe {
            bindings::__ib_alloc_pd(device.as_raw(), 0, size.caller.as_char_ptr())
        })?;
        // Released on the error paths below, until the QP exists.
        let pd = ScopeGuard::new_with_data(NonNull::new(pd).ok_or(ENOMEM)?, |pd| {
            // SAFETY: A live PD with no users left (its QP was not created).
            unsafe { bindings::ib_dealloc_pd_user(pd.as_ptr(), core::ptr::null_mut()) };
        });

        let cqe = size.send.checked_add(size.recv).ok_or(EINVAL)?;
        c_int::try_from(cqe).map_err(|_| EINVAL)?;
        let slots = usize::try_from(cqe).map_err(|_| EINVAL)?;
        let shared = CqShared::new(slots)?;
        let mut cqes = KVec::with_capacity(slots, GFP_KERNEL)?;
        let mut wrs = KVec::with_capacity(slots, GFP_KERNEL)?;
        for slot in 0..cqe {
            cqes.push(WrCqe::new(slot), GFP_KERNEL)?;
            wrs.push(None, GFP_KERNEL)?;
        }
        // SAFETY: As above; `shared` outlives the CQ (freed after it, here
        // and in `drop`).
        let cq = unsafe { alloc_cq(device.as_raw(), &shared, cqe, size.caller)? };
        // Declared after `shared`, so dropped (on an error below) before it.
        let cq = ScopeGuard::new_with_data(NonNull::new(cq).ok_or(ENOMEM)?, |cq| {
            // SAFETY: A live CQ with no users left (its QP was not created).
            unsafe { bindings::ib_free_cq(cq.as_ptr()) };
        });

        let mut attr = bindings::ib_qp_init_attr {
            send_cq: cq.as_ptr(),
            recv_cq: cq.as_ptr(),
            cap: bindings::ib_qp_cap {
                max_send_wr: size.send,
                max_recv_wr: size.recv,
                max_send_sge: 1,
                max_recv_sge: 1,
                ..Default::default()
            },
            sq_sig_type: bindings::ib_sig_type_IB_SIGNAL_ALL_WR,
            qp_type: bindings::ib_qp_type_IB_QPT_RC,
            ..Default::default()
        };
        // SAFETY: `pd` and `cq` are live objects of `device`; `attr` is valid.
        let qp = from_err_ptr(unsafe {
            bindings::ib_create_qp_kernel(pd.as_ptr(), &mut attr, size.caller.as_char_ptr())
        })?;
        let qp = NonNull::new(qp).ok_or(ENOMEM)?;
        // INVARIANT: all three live, the QP on `pd` with `cq`, nothing posted;
        // ownership moves from the guards to `Self`.
        Ok(Self {
            device: ManuallyDrop::new(device.into()),
            pd: pd.dismiss(),
            cq: cq.dismiss(),
            shared: ManuallyDrop::new(shared),
            cqes: ManuallyDrop::new(cqes),
            qp,
            size,
            wrs,
            mrs: KVec::new(),
        })
    }

    /// The device the QP is on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The QP number, for the REQ or REP.
    pub fn qp_num(&self) -> u32 {
        // SAFETY: By the type invariant the QP is live; `qp_num` is fixed.
        unsafe { (*self.qp.as_ptr()).qp_num }
    }

    /// The QP, for what does not depend on owning it.
    pub fn qp(&self) -> &QpRef {
        // SAFETY: By the type invariant the QP is live as long as `self`.
        unsafe { QpRef::from_raw(self.qp.as_ptr()) }
    }

    /// Modifies the QP (`ib_modify_qp`) as `attr` says.
    pub fn modify(&self, attr: &QpAttr) -> Result {
        self.qp().modify(attr)
    }

    /// The QP's path MTU in bytes, once it has one (RTR or later);
    /// `ENOTCONN` before.
    pub fn path_mtu(&self) -> Result<u32> {
        let mut attr = bindings::ib_qp_attr::default();
        let mut init = bindings::ib_qp_init_attr::default();
        let mask = bindings::ib_qp_attr_mask_IB_QP_STATE | bindings::ib_qp_attr_mask_IB_QP_PATH_MTU;
        // SAFETY: By the type invariant the QP is live; `attr` and `init` are
        // valid for writes.
        to_result(unsafe {
            bindings::ib_query_qp(self.qp.as_ptr(), &mut attr, mask as c_int, &mut init)
        })?;
        if attr.qp_state == bindings::ib_qp_state_IB_QPS_RESET
            || attr.qp_state == bindings::ib_qp_state_IB_QPS_INIT
        {
            return Err(ENOTCONN);
        }
        // `ib_mtu_enum_to_int()`: IB_MTU_256 (1) .. IB_MTU_4096 (5).
        match attr.path_mtu {
            m @ 1..=5 => Ok(128 << m),
            _ => Err(EINVAL),
        }
    }

    /// Work requests of `kind` posted and not yet completed.
    pub fn outstanding(&self, kind: WrKind) -> u32 {
        self.wrs.iter().flatten().filter(|p| p.kind == kind).count() as u32
    }

    /// Requests posted and not yet completed, on both queues.
    pub fn outstanding_all(&self) -> u32 {
        self.wrs.iter().flatten().count() as u32
    }

    /// The caller's buffers this QP holds now: those of its posted work
    /// requests (mapped for its device) and those registered with its MRs
    /// (copied to the MRs' own pages, which stay mapped until the QP is
    /// freed). 0 once every request came back and every MR was invalidated.
    pub fn bufs_mapped(&self) -> usize {
        let posted = self.wrs.iter().flatten().filter(|p| p.buf.len > 0);
        let mrs = self.mrs.iter().filter(|m| m.user.is_some());
        posted.count() + mrs.count()
    }

    /// MRs this QP has allocated (they are reused, and freed with the QP):
    /// at most [`QpSize::max_mrs`].
    pub fn mrs_allocated(&self) -> usize {
        self.mrs.len()
    }

    /// Room for `n` more work requests of `kind` (the QP's queue size).
    pub fn has_room(&self, kind: WrKind, n: u32) -> bool {
        let (cap, used) = if kind.on_send_queue() {
            let used = self.wrs.iter().flatten().filter(|p| p.kind.on_send_queue());
            (self.size.send, used.count() as u32)
        } else {
            (self.size.recv, self.outstanding(WrKind::Recv))
        };
        used.saturating_add(n) <= cap
    }

    /// A free slot of the table for a new work request, and the `ib_cqe`
    /// the request carries.
    pub(super) fn free_slot(&mut self) -> Result<(usize, *mut bindings::ib_cqe)> {
        let slot = self.wrs.iter().position(|p| p.is_none()).ok_or(ENOMEM)?;
        let cqe = self.cqes.get_mut(slot).ok_or(ENOMEM)?.as_raw();
        Ok((slot, cqe))
    }

    /// Maps `buf` for `kind`, and gives its free slot and scatter entry.
    pub(super) fn prepare(
        &mut self,
        kind: WrKind,
        buf: KVec<u8>,
    ) -> Result<(usize, *mut bindings::ib_cqe, Mapping, bindings::ib_sge)> {
        if !self.has_room(kind, 1) {
            return Err(ENOMEM);
        }
        let length = u32::try_from(buf.len()).map_err(|_| EINVAL)?;
        let (slot, cqe) = self.free_slot()?;
        // SAFETY: By the type invariant the PD is live; its device is fixed.
        let (dev, lkey) = unsafe {
            let pd = self.pd.as_ptr();
            ((*pd).device, (*pd).local_dma_lkey)
        };
        let dir = match kind {
            WrKind::Recv | WrKind::RdmaRead => bindings::dma_data_direction::DMA_FROM_DEVICE,
            _ => bindings::dma_data_direction::DMA_TO_DEVICE,
        };
        // SAFETY: The PD's device is registered; the mapping goes into our
        // table, freed before the device goes (see `Mapping`).
        let map = unsafe { Mapping::new(NonNull::new(dev).ok_or(EINVAL)?, buf, dir)? };
        let sge = bindings::ib_sge {
            addr: map.addr,
            length,
            lkey,
        };
        Ok((slot, cqe, map, sge))
    }

    /// Posts a receive work request into `buf` (all of its `len()` bytes; an
    /// empty one: no scatter entry). The buffer comes back with the
    /// request's completion (see [`RcQp::poll_one`]); on an error it is
    /// freed. `ENOMEM` if the receive queue is full.
    pub fn post_recv(&mut self, buf: KVec<u8>) -> Result {
        let (slot, cqe, map, mut sge) = self.prepare(WrKind::Recv, buf)?;
        let mut wr = bindings::ib_recv_wr::default();
        wr.__bindgen_anon_1.wr_cqe = cqe;
        if map.len > 0 {
            wr.sg_list = &mut sge;
            wr.num_sge = 1;
        }
        let mut bad: *const bindings::ib_recv_wr = core::ptr::null();
        // SAFETY: By the type invariant the QP is live; `wr` and `sge` are
        // only read during the call; the buffer `sge` names is mapped and,
        // from here, owned by the table until the completion is polled.
        to_result(unsafe { bindings::ib_post_recv(self.qp.as_ptr(), &wr, &mut bad) })?;
        // INVARIANT: the posted request is in the table at its slot.
        self.wrs[slot] = Some(Posted {
            kind: WrKind::Recv,
            buf: map,
            mr: 0,
        });
        Ok(())
    }

    /// Posts a signaled SEND of `buf` (all of its `len()` bytes; empty: a
    /// zero-length SEND). The buffer comes back with the completion; on an
    /// error it is freed. `ENOMEM` if the send queue is full.
    pub fn post_send(&mut self, buf: KVec<u8>) -> Result {
        let (slot, cqe, map, mut sge) = self.prepare(WrKind::Send, buf)?;
        let mut wr = bindings::ib_send_wr {
            opcode: bindings::ib_wr_opcode_IB_WR_SEND,
            send_flags: bindings::ib_send_flags_IB_SEND_SIGNALED as c_int,
            ..Default::default()
        };
        wr.__bindgen_anon_1.wr_cqe = cqe;
        if map.len > 0 {
            wr.sg_list = &mut sge;
            wr.num_sge = 1;
        }
        let mut bad: *const bindings::ib_send_wr = core::ptr::null();
        // SAFETY: As in `post_recv`; the device only reads the buffer.
        to_result(unsafe { bindings::ib_post_send(self.qp.as_ptr(), &wr, &mut bad) })?;
        // INVARIANT: as in `post_recv`.
        self.wrs[slot] = Some(Posted {
            kind: WrKind::Send,
            buf: map,
            mr: 0,
        });
        Ok(())
    }

    /// Posts a signaled RDMA READ (`kind` [`WrKind::RdmaRead`]: the peer's
    /// `len()` bytes at `remote_addr` into `buf`) or WRITE
    /// ([`WrKind::RdmaWrite`]: `buf` to there), with the peer's `rkey`. The
    /// buffer comes back with the completion (a READ's with what was read);
    /// on an error it is freed. `ENOMEM` if the send queue is full.
    pub fn post_rdma(
        &mut self,
        kind: WrKind,
        buf: KVec<u8>,
        remote_addr: u64,
        rkey: u32,
    ) -> Result {
        let opcode = match kind {
            WrKind::RdmaRead => bindings::ib_wr_opcode_IB_WR_RDMA_READ,
            WrKind::RdmaWrite => bindings::ib_wr_opcode_IB_WR_RDMA_WRITE,
            _ => return Err(EINVAL),
        };
        let (slot, cqe, map, mut sge) = self.prepare(kind, buf)?;
        let mut wr = bindings::ib_rdma_wr {
            wr: bindings::ib_send_wr {
                opcode,
                send_flags: bindings::ib_send_flags_IB_SEND_SIGNALED as c_int,
                ..Default::default()
            },
            remote_addr,
            rkey,
        };
        wr.wr.__bindgen_anon_1.wr_cqe = cqe;
        if map.len > 0 {
            wr.wr.sg_list = &mut sge;
            wr.wr.num_sge = 1;
        }
        let mut bad: *const bindings::ib_send_wr = core::ptr::null();
        // SAFETY: As in `post_send`; `wr.wr` is the first member of an
        // `ib_rdma_wr`, as the driver reads it for these opcodes. A READ's
        // buffer is mapped for the device to write.
        to_result(unsafe { bindings::ib_post_send(self.qp.as_ptr(), &wr.wr, &mut bad) })?;
        // INVARIANT: as in `post_recv`.
        self.wrs[slot] = Some(Posted {
            kind,
            buf: map,
            mr: 0,
        });
        Ok(())
    }
}

impl Drop for RcQp {
    fn drop(&mut self) {
        // SAFETY: By the type invariant each object is live and destroyed only
        // here, users first: the QP, then its CQ, then their PD.
        let ret = unsafe { bindings::ib_destroy_qp_user(self.qp.as_ptr(), core::ptr::null_mut()) };
        if ret != 0 {
            // The QP still exists (a driver refused, as rxe does for a QP
            // with multicast attachments): the device may still write into
            // the buffers of its posted requests and complete on the CQ,
            // and the peer may still reach its MRs. Leaking them, the
            // buffers, the CQ and the PD is the only safe choice.
            pr_warn!(
                "QP {} not destroyed ({}): its MRs, buffers, CQ, PD and device reference are leaked\n",
                self.qp_num(),
                ret
            );
            // The device too: the leaked QP, CQ and PD are its objects,
            // which its unregistration would tear down under the driver
            // (its reference is never put, so it waits; a hang rather than
            // a use after free).
            core::mem::forget(core::mem::take(&mut self.mrs));
            core::mem::forget(core::mem::take(&mut self.wrs));
            // `shared` and `cqes` too (left in their `ManuallyDrop`): the
            // CQ's work may still reach them.
            return;
        }
        // The QP is gone: the device no longer touches the buffers of the
        // requests still in the table, and the peer no longer reaches the
        // MRs (RC: only through this QP). Deregistered, unmapped and freed
        // here, while the device is still ours.
        for m in core::mem::take(&mut self.mrs).into_iter() {
            // SAFETY: The MR is live and ours; nothing uses it any more.
            unsafe { bindings::ib_dereg_mr_user(m.mr.as_ptr(), core::ptr::null_mut()) };
            drop(m.page);
            drop(m.user);
        }
        drop(core::mem::take(&mut self.wrs));
        // SAFETY: As above. `ib_free_cq()` waits for the CQ's work: its
        // context and the requests' `ib_cqe`s go after it, nothing reaches
        // them any more.
        unsafe {
            bindings::ib_free_cq(self.cq.as_ptr());
            ManuallyDrop::drop(&mut self.shared);
            ManuallyDrop::drop(&mut self.cqes);
            bindings::ib_dealloc_pd_user(self.pd.as_ptr(), core::ptr::null_mut());
        }
        // SAFETY: Released once, here, last: nothing of the device is used
        // after this.
        unsafe { ManuallyDrop::drop(&mut self.device) };
    }
}

// SAFETY: The verbs objects are used through the RDMA core, which locks them
// itself; kernel QPs may be posted to and modified from any thread. The
// table of posted requests (and the device pointer of each mapping) is only
// changed through `&mut self`.
unsafe impl Send for RcQp {}
// SAFETY: As for `Send`: every `&self` method goes through the core's own
// locking and only reads the table.
unsafe impl Sync for RcQp {}
