// SPDX-License-Identifier: GPL-2.0

//! The verbs objects a connection needs: a protection domain, a completion
//! queue and an RC queue pair, owned together and freed in that order's
//! reverse; and the buffers of the work requests posted on the QP.
//!
//! A posted work request owns its buffer: the buffer is DMA-mapped for the
//! device when it is posted, kept in the QP's table of posted work requests
//! (where nothing else can reach it) and unmapped and handed back to the
//! caller with the request's completion, successful or flushed. Buffers
//! whose completion never comes (the QP is destroyed first) are unmapped and
//! freed after the QP is destroyed, when the device can no longer touch them.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use crate::{delay, ib_client::Device};
use core::{
    ffi::c_void,
    ptr::NonNull,
    sync::atomic::{AtomicUsize, Ordering},
};
use kernel::{
    bindings, c_str,
    error::{code::*, from_err_ptr, to_result},
    ffi::c_int,
    prelude::*,
    types::{Opaque, ScopeGuard},
};

/// The caller name the RDMA core records for our objects (restrack).
const CALLER: &CStr = c_str!("rust_cm_disconnect");

// `struct ib_device` holds members bindgen cannot express (as the kernel's
// own bindings, which allow the same): only pointers to it cross here.
#[allow(improper_ctypes)]
extern "C" {
    /// In `rust_cm_disconnect_exports.c`: `ib_dma_map_single()` and its
    /// `ib_dma_mapping_error()` check (both static inlines); the address in
    /// `*addr`, or `-ENOMEM`.
    fn rcd_ib_dma_map_single(
        dev: *mut bindings::ib_device,
        cpu_addr: *mut c_void,
        size: usize,
        dir: c_int,
        addr: *mut u64,
    ) -> c_int;
    /// In `rust_cm_disconnect_exports.c`: `ib_dma_unmap_single()`.
    fn rcd_ib_dma_unmap_single(dev: *mut bindings::ib_device, addr: u64, size: usize, dir: c_int);
}

/// Work-request buffers mapped for a device right now, over every QP: 0
/// once every buffer came back or was freed.
static MAPPED_BUFS: AtomicUsize = AtomicUsize::new(0);

/// How many work-request buffers are mapped for a device right now.
pub(crate) fn mapped_bufs() -> usize {
    MAPPED_BUFS.load(Ordering::Relaxed)
}

/// What a posted work request is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WrKind {
    Recv,
    Send,
}

/// A completion taken from a CQ, with the buffer of its work request back.
pub(crate) struct Completion {
    /// `enum ib_wc_status`: 0 is success, `IB_WC_WR_FLUSH_ERR` a flush.
    pub(crate) status: u32,
    /// What the work request was (`None`: not one of ours, never expected).
    pub(crate) kind: Option<WrKind>,
    /// Bytes received, for a successful receive.
    pub(crate) byte_len: u32,
    /// The buffer the work request was posted with, unmapped: the caller's
    /// again (empty for a zero-length request).
    pub(crate) buf: KVec<u8>,
}

/// `IB_WC_WR_FLUSH_ERR`: the status of work requests flushed by a QP in the
/// error state.
pub(crate) const WC_WR_FLUSH_ERR: u32 = bindings::ib_wc_status_IB_WC_WR_FLUSH_ERR;

/// A kernel buffer DMA-mapped for a device, for one work request.
///
/// # Invariants
///
/// If `len > 0`, the first `len` bytes of `buf`'s allocation (kmalloc'd,
/// physically contiguous) are mapped on `dev` at `addr` in direction `dir`,
/// and are unmapped exactly once, in `drop`; `buf`'s allocation does not move
/// or shrink meanwhile (only `into_buf` takes it, and the unmap follows at
/// once). A `Mapping` lives only in the table of an [`RcQp`] of `dev` (or on
/// the stack of its methods), so `dev` outlives it: a device's QPs are freed
/// before it is unregistered.
struct Mapping {
    buf: KVec<u8>,
    len: usize,
    addr: u64,
    dev: NonNull<bindings::ib_device>,
    dir: bindings::dma_data_direction,
}

impl Mapping {
    /// Maps `buf` (all of its `len()` bytes) on `dev` for `dir`; an empty
    /// buffer is not mapped.
    ///
    /// # Safety
    ///
    /// `dev` is a registered device that outlives the returned value.
    unsafe fn new(
        dev: NonNull<bindings::ib_device>,
        mut buf: KVec<u8>,
        dir: bindings::dma_data_direction,
    ) -> Result<Self> {
        let len = buf.len();
        let mut addr = 0;
        if len > 0 {
            // SAFETY: `dev` is registered (the caller's contract); `buf`'s
            // first `len` bytes are one kmalloc allocation, which stays where
            // it is while `Self` owns it.
            to_result(unsafe {
                rcd_ib_dma_map_single(
                    dev.as_ptr(),
                    buf.as_mut_ptr().cast(),
                    len,
                    dir as c_int,
                    &mut addr,
                )
            })?;
            MAPPED_BUFS.fetch_add(1, Ordering::Relaxed);
        }
        // INVARIANT: mapped above if `len > 0`.
        Ok(Self {
            buf,
            len,
            addr,
            dev,
            dir,
        })
    }

    /// Unmaps the buffer and gives it back.
    fn into_buf(mut self) -> KVec<u8> {
        let buf = core::mem::take(&mut self.buf);
        // Unmapped here (`drop`), before the caller can read the buffer.
        drop(self);
        buf
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        if self.len > 0 {
            // SAFETY: By the type invariant the mapping exists and `dev` is
            // alive; this is its one unmap.
            unsafe {
                rcd_ib_dma_unmap_single(self.dev.as_ptr(), self.addr, self.len, self.dir as c_int)
            };
            MAPPED_BUFS.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// A work request on the QP, owning its buffer until its completion.
struct Posted {
    kind: WrKind,
    buf: Mapping,
}

/// A QP borrowed from its owner: what a disconnect does to it.
///
/// # Invariants
///
/// The wrapped `struct ib_qp` is a live kernel QP for the lifetime of every
/// `&QpRef`.
#[repr(transparent)]
pub(crate) struct QpRef(Opaque<bindings::ib_qp>);

impl QpRef {
    /// # Safety
    ///
    /// `ptr` must be a live kernel QP that is not destroyed during `'a`.
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut bindings::ib_qp) -> &'a Self {
        // SAFETY: `QpRef` is a transparent wrapper; the caller guarantees
        // validity for `'a`.
        unsafe { &*ptr.cast() }
    }

    pub(crate) fn as_raw(&self) -> *mut bindings::ib_qp {
        self.0.get()
    }

    /// Modifies the QP (`ib_modify_qp`) with `attr` for the fields in `mask`.
    pub(crate) fn modify(&self, attr: &mut bindings::ib_qp_attr, mask: c_int) -> Result {
        // SAFETY: By the type invariant the QP is live; `attr` is valid.
        to_result(unsafe { bindings::ib_modify_qp(self.0.get(), attr, mask) })
    }

    /// Moves the QP to the error state: every posted work request completes
    /// on its CQ with `IB_WC_WR_FLUSH_ERR`.
    pub(crate) fn to_error(&self) -> Result {
        let mut attr = bindings::ib_qp_attr {
            qp_state: bindings::ib_qp_state_IB_QPS_ERR,
            ..Default::default()
        };
        self.modify(&mut attr, bindings::ib_qp_attr_mask_IB_QP_STATE as c_int)
    }
}

/// Queue sizes of an [`RcQp`].
#[derive(Clone, Copy)]
pub(crate) struct QpSize {
    pub(crate) send: u32,
    pub(crate) recv: u32,
}

/// A protection domain, a CQ polled directly, an RC QP using both, and the
/// work requests posted on the QP with their buffers.
///
/// # Invariants
///
/// `pd`, `cq` and `qp` are live objects of one device; `qp` was created on
/// `pd` with `cq` as its send and receive CQ. They are destroyed in the
/// order QP, CQ, PD, each exactly once, in `drop`. Every work request posted
/// on `qp` and not yet taken from `cq` is in `wrs`, at the index that is its
/// `wr_id`, with the buffer it was posted with (mapped for the device):
/// nothing else reaches those buffers until the request's completion is
/// polled or the QP is destroyed.
pub(crate) struct RcQp {
    pd: NonNull<bindings::ib_pd>,
    cq: NonNull<bindings::ib_cq>,
    qp: NonNull<bindings::ib_qp>,
    size: QpSize,
    wrs: KVec<Option<Posted>>,
}

impl RcQp {
    /// Allocates a PD, a CQ and an RC QP on `device`. May sleep.
    pub(crate) fn new(device: &Device, size: QpSize) -> Result<Self> {
        // SAFETY: `device` is registered; `CALLER` is a static string. No
        // flags: no unsafe global rkey.
        let pd = from_err_ptr(unsafe {
            bindings::__ib_alloc_pd(device.as_raw(), 0, CALLER.as_char_ptr())
        })?;
        // Released on the error paths below, until the QP exists.
        let pd = ScopeGuard::new_with_data(NonNull::new(pd).ok_or(ENOMEM)?, |pd| {
            // SAFETY: A live PD with no users left (its QP was not created).
            unsafe { bindings::ib_dealloc_pd_user(pd.as_ptr(), core::ptr::null_mut()) };
        });

        let cqe = c_int::try_from(size.send + size.recv).map_err(|_| EINVAL)?;
        // SAFETY: As above; no private context, completion vector 0, polled
        // directly by `poll_one`.
        let cq = from_err_ptr(unsafe {
            bindings::__ib_alloc_cq(
                device.as_raw(),
                core::ptr::null_mut(),
                cqe,
                0,
                bindings::ib_poll_context_IB_POLL_DIRECT,
                CALLER.as_char_ptr(),
            )
        })?;
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
            bindings::ib_create_qp_kernel(pd.as_ptr(), &mut attr, CALLER.as_char_ptr())
        })?;
        let qp = NonNull::new(qp).ok_or(ENOMEM)?;
        // INVARIANT: all three live, the QP on `pd` with `cq`, nothing posted;
        // ownership moves from the guards to `Self`.
        Ok(Self {
            pd: pd.dismiss(),
            cq: cq.dismiss(),
            qp,
            size,
            wrs: KVec::new(),
        })
    }

    /// The QP number, for the REQ or REP.
    pub(crate) fn qp_num(&self) -> u32 {
        // SAFETY: By the type invariant the QP is live; `qp_num` is fixed.
        unsafe { (*self.qp.as_ptr()).qp_num }
    }

    /// The QP, for what does not depend on owning it.
    pub(crate) fn qp(&self) -> &QpRef {
        // SAFETY: By the type invariant the QP is live as long as `self`.
        unsafe { QpRef::from_raw(self.qp.as_ptr()) }
    }

    /// Modifies the QP (`ib_modify_qp`) with `attr` for the fields in `mask`.
    pub(crate) fn modify(&self, attr: &mut bindings::ib_qp_attr, mask: c_int) -> Result {
        self.qp().modify(attr, mask)
    }

    /// The QP's path MTU in bytes, once it has one (RTR or later);
    /// `ENOTCONN` before.
    pub(crate) fn path_mtu(&self) -> Result<u32> {
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
            return Err(crate::errno::enotconn());
        }
        // `ib_mtu_enum_to_int()`: IB_MTU_256 (1) .. IB_MTU_4096 (5).
        match attr.path_mtu {
            m @ 1..=5 => Ok(128 << m),
            _ => Err(EINVAL),
        }
    }

    /// Work requests of `kind` posted and not yet completed.
    pub(crate) fn outstanding(&self, kind: WrKind) -> u32 {
        self.wrs.iter().flatten().filter(|p| p.kind == kind).count() as u32
    }

    /// Room for `n` more work requests of `kind` (the QP's queue size).
    pub(crate) fn has_room(&self, kind: WrKind, n: u32) -> bool {
        let cap = match kind {
            WrKind::Recv => self.size.recv,
            WrKind::Send => self.size.send,
        };
        self.outstanding(kind).saturating_add(n) <= cap
    }

    /// A free index of the table, for a new work request's `wr_id`.
    fn free_slot(&mut self) -> Result<usize> {
        if let Some(i) = self.wrs.iter().position(|p| p.is_none()) {
            return Ok(i);
        }
        self.wrs.push(None, GFP_KERNEL)?;
        Ok(self.wrs.len() - 1)
    }

    /// Maps `buf` for `kind`, and gives its free slot and scatter entry.
    fn prepare(
        &mut self,
        kind: WrKind,
        buf: KVec<u8>,
    ) -> Result<(usize, Mapping, bindings::ib_sge)> {
        if !self.has_room(kind, 1) {
            return Err(ENOMEM);
        }
        let length = u32::try_from(buf.len()).map_err(|_| EINVAL)?;
        let slot = self.free_slot()?;
        // SAFETY: By the type invariant the PD is live; its device is fixed.
        let (dev, lkey) = unsafe {
            let pd = self.pd.as_ptr();
            ((*pd).device, (*pd).local_dma_lkey)
        };
        let dir = match kind {
            WrKind::Recv => bindings::dma_data_direction_DMA_FROM_DEVICE,
            WrKind::Send => bindings::dma_data_direction_DMA_TO_DEVICE,
        };
        // SAFETY: The PD's device is registered; the mapping goes into our
        // table, freed before the device goes (see `Mapping`).
        let map = unsafe { Mapping::new(NonNull::new(dev).ok_or(EINVAL)?, buf, dir)? };
        let sge = bindings::ib_sge {
            addr: map.addr,
            length,
            lkey,
        };
        Ok((slot, map, sge))
    }

    /// Posts a receive work request into `buf` (all of its `len()` bytes; an
    /// empty one: no scatter entry). The buffer comes back with the
    /// request's completion (see [`RcQp::poll_one`]); on an error it is
    /// freed. `ENOMEM` if the receive queue is full.
    pub(crate) fn post_recv(&mut self, buf: KVec<u8>) -> Result {
        let (slot, map, mut sge) = self.prepare(WrKind::Recv, buf)?;
        let mut wr = bindings::ib_recv_wr::default();
        wr.__bindgen_anon_1.wr_id = slot as u64;
        if map.len > 0 {
            wr.sg_list = &mut sge;
            wr.num_sge = 1;
        }
        let mut bad: *const bindings::ib_recv_wr = core::ptr::null();
        // SAFETY: By the type invariant the QP is live; `wr` and `sge` are
        // only read during the call; the buffer `sge` names is mapped and,
        // from here, owned by the table until the completion is polled.
        to_result(unsafe { bindings::ib_post_recv(self.qp.as_ptr(), &wr, &mut bad) })?;
        // INVARIANT: the posted request is in the table at its `wr_id`.
        self.wrs[slot] = Some(Posted {
            kind: WrKind::Recv,
            buf: map,
        });
        Ok(())
    }

    /// Posts a signaled SEND of `buf` (all of its `len()` bytes; empty: a
    /// zero-length SEND). The buffer comes back with the completion; on an
    /// error it is freed. `ENOMEM` if the send queue is full.
    pub(crate) fn post_send(&mut self, buf: KVec<u8>) -> Result {
        let (slot, map, mut sge) = self.prepare(WrKind::Send, buf)?;
        let mut wr = bindings::ib_send_wr {
            opcode: bindings::ib_wr_opcode_IB_WR_SEND,
            send_flags: bindings::ib_send_flags_IB_SEND_SIGNALED as c_int,
            ..Default::default()
        };
        wr.__bindgen_anon_1.wr_id = slot as u64;
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
        });
        Ok(())
    }

    /// Takes one completion from the CQ, if there is one, with its work
    /// request's buffer back.
    pub(crate) fn poll_one(&mut self) -> Result<Option<Completion>> {
        let mut wc = bindings::ib_wc::default();
        // SAFETY: By the type invariant the CQ is live and polled only here
        // (IB_POLL_DIRECT, under `&mut self`); `wc` is valid for one entry.
        let got = unsafe { bindings::ib_poll_cq(self.cq.as_ptr(), 1, &mut wc) };
        if got < 0 {
            return Err(Error::from_errno(got));
        }
        if got == 0 {
            return Ok(None);
        }
        // SAFETY: Every work request on this QP is posted with a `wr_id`
        // (never a `wr_cqe`): both are a `u64`-sized union member.
        let wr_id = unsafe { wc.__bindgen_anon_1.wr_id };
        let posted = usize::try_from(wr_id)
            .ok()
            .and_then(|i| self.wrs.get_mut(i))
            .and_then(Option::take);
        // The request is over: its buffer is unmapped and handed back.
        let (kind, buf) = match posted {
            Some(p) => (Some(p.kind), p.buf.into_buf()),
            None => (None, KVec::new()),
        };
        Ok(Some(Completion {
            status: wc.status,
            kind,
            byte_len: wc.byte_len,
            buf,
        }))
    }

    /// Ends every posted work request before the QP is freed, as
    /// `ib_drain_qp()` would (which a directly polled CQ cannot use): moves
    /// the QP to the error state if anything is posted, so that the device
    /// flushes it, and hands each completion to `f`, waiting up to
    /// `wait_ms` for the last. Returns how many requests did not come back
    /// (their buffers are freed with the QP, after it is destroyed). May
    /// sleep.
    pub(crate) fn drain(&mut self, wait_ms: u32, mut f: impl FnMut(Completion)) -> u32 {
        let left = |qp: &Self| qp.outstanding(WrKind::Recv) + qp.outstanding(WrKind::Send);
        if left(self) > 0 {
            // Failing, the QP is already in error or gone with the device:
            // what comes back is taken below, the rest is counted.
            let _ = self.qp().to_error();
        }
        let mut waited = 0;
        loop {
            while let Ok(Some(c)) = self.poll_one() {
                f(c);
            }
            if left(self) == 0 || waited >= wait_ms {
                return left(self);
            }
            delay::msleep(1);
            waited += 1;
        }
    }
}

impl Drop for RcQp {
    fn drop(&mut self) {
        // SAFETY: By the type invariant each object is live and destroyed only
        // here, users first: the QP, then its CQ, then their PD.
        unsafe { bindings::ib_destroy_qp_user(self.qp.as_ptr(), core::ptr::null_mut()) };
        // The QP is gone: the device no longer touches the buffers of the
        // requests still in the table. Unmapped and freed here, while the
        // device is still ours.
        drop(core::mem::take(&mut self.wrs));
        // SAFETY: As above.
        unsafe {
            bindings::ib_free_cq(self.cq.as_ptr());
            bindings::ib_dealloc_pd_user(self.pd.as_ptr(), core::ptr::null_mut());
        }
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
