// SPDX-License-Identifier: GPL-2.0

//! [`RcQp`]: an RC QP on a caller's PD and CQ, with the work requests
//! posted on it with their buffers and MRs.
//!
//! A request of the send queue may be unsignalled (no completion of its
//! own unless it fails): the queue runs in order, so the completion of a
//! later request tells that it ended, and hands its buffers back first.

use super::{
    attr::{QpAttr, QpRef, QpState},
    cq::{Completions, Cq, Done, Waker},
    mapping::{Mapping, Posted},
    mr::{Mr, MrError},
    pd::Pd,
    wc::{Completion, WcStatus, WrKind},
};
use crate::{
    bindings,
    error::{from_err_ptr, to_result},
    ffi::c_int,
    prelude::*,
    rdma::device::Device,
    str::CStr,
    sync::Arc,
};
use core::{mem::ManuallyDrop, ptr::NonNull};

/// The requests `ib_drain_qp()` posts on a QP, one on each queue, each with
/// its completion: room for them is reserved in the QP and its CQ.
const DRAIN_WRS: u32 = 2;

/// What an [`RcQp`] is made with: its queue sizes and the user's choices,
/// all of them the caller's (there is no default).
///
/// # Examples
///
/// ```
/// use kernel::{c_str, rdma::verbs::QpSize};
///
/// let size = QpSize { send: 64, recv: 256, sge: 2, caller: c_str!("my_ulp") };
/// assert_eq!((size.send, size.recv, size.sge), (64, 256, 2));
/// ```
#[derive(Clone, Copy)]
pub struct QpSize {
    /// Work requests the send queue holds (completions not yet polled
    /// included).
    pub send: u32,
    /// Work requests the receive queue holds.
    pub recv: u32,
    /// Buffers (scatter/gather entries) a work request may have, on
    /// either queue: at least 1, at most the device's.
    pub sge: u32,
    /// The name the RDMA core records for the QP (restrack, as `rdma
    /// resource` shows it): usually the module's.
    pub caller: &'static CStr,
}

/// An RC QP on a [`Pd`] and a [`Cq`] of the caller's (which QPs may share;
/// the QP uses the CQ for both queues), and the work requests posted on it
/// with their buffers and [`Mr`]s.
///
/// # Invariants
///
/// `qp` is a live RC QP on `pd` with `cq` as its send and receive CQ, with
/// room for `send + 1` and `recv + 1` requests (one each for
/// `ib_drain_qp()`'s), on which it reserved `send + recv + DRAIN_WRS`
/// entries (those of its completions not
/// taken stay reserved after it, see [`Cq`]); it is destroyed exactly once,
/// in `drop`, before the buffers and MRs of its requests are freed,
/// `comps` is freed (or handed to the CQ if completions may still come),
/// and the CQ's and the PD's references are put (in that order), which are
/// leaked with it if it could not be destroyed. `wrs` and `comps` have one
/// entry per slot, `send + recv` of them, and are never resized. Every work request posted
/// on `qp` whose completion was not yet taken is in `wrs` at its slot, with
/// the buffer it was posted with (mapped for the device) or the MR it is
/// about, and carries its slot's `ib_cqe` of `comps` as its `wr_cqe`:
/// nothing else reaches those buffers and MRs until the request's
/// completion is taken or the QP is destroyed. The send queue's requests
/// in `wrs` have distinct `seq`s, in the order they were posted, at most
/// `sq_seq`. `held`, if any, is a completion taken from `comps` whose
/// request is still in `wrs`, behind unsignalled requests posted before it.
pub struct RcQp {
    qp: NonNull<bindings::ib_qp>,
    size: QpSize,
    wrs: KVec<Option<Posted>>,
    sq_seq: u64,
    held: Option<Done>,
    comps: ManuallyDrop<KBox<Completions>>,
    cq: ManuallyDrop<Arc<Cq>>,
    pd: ManuallyDrop<Arc<Pd>>,
}

impl RcQp {
    /// Makes an RC QP on `pd`, with `cq` (of the same device: `EINVAL`) for
    /// both queues, reserving `send + recv + 2` of its entries (`ENOSPC`):
    /// the two are for [`RcQp::drain`]'s own requests. `EINVAL` for no
    /// scatter/gather entry. May sleep.
    pub fn new(pd: Arc<Pd>, cq: Arc<Cq>, size: QpSize) -> Result<Self> {
        if !core::ptr::eq(pd.device(), cq.device()) || size.sge == 0 {
            return Err(EINVAL);
        }
        let cqe = size.send.checked_add(size.recv).ok_or(EINVAL)?;
        if cqe == 0 {
            return Err(EINVAL);
        }
        let reserved = cqe.checked_add(DRAIN_WRS).ok_or(EINVAL)?;
        c_int::try_from(reserved).map_err(|_| EINVAL)?;
        let slots = usize::try_from(cqe).map_err(|_| EINVAL)?;
        let comps = Completions::new(cqe)?;
        let mut wrs = KVec::with_capacity(slots, GFP_KERNEL)?;
        for _ in 0..cqe {
            wrs.push(None, GFP_KERNEL)?;
        }
        cq.reserve(reserved)?;
        let mut attr = bindings::ib_qp_init_attr {
            send_cq: cq.as_raw(),
            recv_cq: cq.as_raw(),
            cap: bindings::ib_qp_cap {
                max_send_wr: size.send + 1,
                max_recv_wr: size.recv + 1,
                max_send_sge: size.sge,
                max_recv_sge: size.sge,
                ..Default::default()
            },
            sq_sig_type: bindings::ib_sig_type_IB_SIGNAL_REQ_WR,
            qp_type: bindings::ib_qp_type_IB_QPT_RC,
            ..Default::default()
        };
        // SAFETY: `pd` and `cq` are live objects of one device; `attr` is
        // valid.
        let qp = from_err_ptr(unsafe {
            bindings::ib_create_qp_kernel(pd.as_raw(), &mut attr, size.caller.as_char_ptr())
        });
        let qp = match qp.and_then(|qp| NonNull::new(qp).ok_or(ENOMEM)) {
            Ok(qp) => qp,
            Err(e) => {
                cq.release(reserved);
                return Err(e);
            }
        };
        // INVARIANT: the QP on `pd` with `cq`, nothing posted.
        Ok(Self {
            qp,
            size,
            wrs,
            sq_seq: 0,
            held: None,
            comps: ManuallyDrop::new(comps),
            cq: ManuallyDrop::new(cq),
            pd: ManuallyDrop::new(pd),
        })
    }

    /// The device the QP is on.
    pub fn device(&self) -> &Device {
        self.pd.device()
    }

    /// Sets (or clears) the function called for each completion of the
    /// QP's requests, in the CQ's work: it may sleep (the completions of
    /// every QP on the CQ wait meanwhile), and must not wait for anything
    /// that polls, drains or frees the QP (the free waits for a call in
    /// progress). Waits for a call in progress (not from a waker, nor with
    /// a lock a waker takes), then drops the old waker here.
    pub fn set_waker(&self, waker: Option<Waker>) {
        self.comps.set_waker(waker);
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

    /// Modifies the QP (`ib_modify_qp`) as `attr` says, its address
    /// vectors included (hence `&mut`). `EBUSY` for RESET while a work
    /// request is posted and its completion not taken: RESET drops it
    /// without one, and its buffer and CQ entry would stay held.
    pub fn modify(&mut self, attr: &QpAttr) -> Result {
        if attr.state() == Some(QpState::Reset) && self.outstanding_all() > 0 {
            return Err(EBUSY);
        }
        // SAFETY: `&mut self` excludes every other modify through the
        // owner; one through a `QpRef` (`RcQp::qp`) names no address vector.
        unsafe { self.qp().modify_any(attr) }
    }

    /// The QP's path MTU in bytes, once it has one (RTR or later);
    /// `ENOTCONN` before.
    pub fn path_mtu(&self) -> Result<u32> {
        let attr = self.query()?;
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

    /// The QP's state and path MTU (`ib_query_qp`).
    fn query(&self) -> Result<bindings::ib_qp_attr> {
        let mut attr = bindings::ib_qp_attr::default();
        let mut init = bindings::ib_qp_init_attr::default();
        let mask = bindings::ib_qp_attr_mask_IB_QP_STATE | bindings::ib_qp_attr_mask_IB_QP_PATH_MTU;
        // SAFETY: By the type invariant the QP is live; `attr` and `init` are
        // valid for writes.
        to_result(unsafe {
            bindings::ib_query_qp(self.qp.as_ptr(), &mut attr, mask as c_int, &mut init)
        })?;
        Ok(attr)
    }

    /// Work requests of `kind` posted and not yet handed back (an
    /// unsignalled one until a later completion of its queue).
    pub fn outstanding(&self, kind: WrKind) -> u32 {
        self.wrs.iter().flatten().filter(|p| p.kind == kind).count() as u32
    }

    /// Requests posted and not yet handed back, on both queues.
    pub fn outstanding_all(&self) -> u32 {
        self.wrs.iter().flatten().count() as u32
    }

    /// The caller's buffers this QP holds now: those of its posted work
    /// requests (mapped for its device) and those of the MRs its posted
    /// REG_MRs and LOCAL_INVs are about. 0 once every request came back.
    pub fn bufs_mapped(&self) -> usize {
        let held = |p: &Posted| {
            let mr = p.mr.as_ref().is_some_and(|m| !m.is_empty());
            usize::from(p.buf.len > 0) + p.more.len() + usize::from(mr)
        };
        self.wrs.iter().flatten().map(held).sum()
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
    fn free_slot(&mut self) -> Result<(usize, *mut bindings::ib_cqe)> {
        let slot = self.wrs.iter().position(|p| p.is_none()).ok_or(ENOMEM)?;
        Ok((slot, self.comps.cqe(slot)?))
    }

    /// Maps `buf` and `more` for a request of `kind` if its queue has room
    /// for `room` (`ENOMEM`), and gives its free slot and scatter/gather
    /// list. `EINVAL` for an empty buffer among several, or more than
    /// [`QpSize::sge`] (for a READ, than the device takes for one, its
    /// `max_read_sge`), checked here for every driver.
    fn prepare(
        &mut self,
        kind: WrKind,
        buf: KVec<u8>,
        more: KVec<KVec<u8>>,
        room: u32,
    ) -> Result<Prepared> {
        if !self.has_room(kind, room) {
            return Err(ENOMEM);
        }
        // SAFETY: By the type invariant the QP is live; the core set
        // `max_read_sge` when it made the QP and never changes it.
        let read_sge = unsafe { (*self.qp.as_ptr()).max_read_sge };
        let sge = match kind {
            WrKind::RdmaRead => self.size.sge.min(read_sge),
            _ => self.size.sge,
        };
        let empty = buf.is_empty() || more.iter().any(|b| b.is_empty());
        if !more.is_empty() && (empty || more.len() >= sge as usize) {
            return Err(EINVAL);
        }
        let (slot, cqe) = self.free_slot()?;
        let (dev, lkey) = self.pd.dma()?;
        let dir = match kind {
            WrKind::Recv | WrKind::RdmaRead => bindings::dma_data_direction::DMA_FROM_DEVICE,
            _ => bindings::dma_data_direction::DMA_TO_DEVICE,
        };
        let map = |buf: KVec<u8>| -> Result<(Mapping, bindings::ib_sge)> {
            let length = u32::try_from(buf.len()).map_err(|_| EINVAL)?;
            // SAFETY: The PD's device is registered; the mapping goes into
            // our table, freed before the device goes (see `Mapping`).
            let map = unsafe { Mapping::new(dev, buf, dir)? };
            let sge = bindings::ib_sge {
                addr: map.addr,
                length,
                lkey,
            };
            Ok((map, sge))
        };
        let (buf, first) = map(buf)?;
        let mut maps = KVec::with_capacity(more.len(), GFP_KERNEL)?;
        let mut sges = KVec::new();
        if !more.is_empty() {
            sges = KVec::with_capacity(more.len() + 1, GFP_KERNEL)?;
            sges.push(first, GFP_KERNEL)?;
            for b in more {
                let (m, sge) = map(b)?;
                maps.push(m, GFP_KERNEL)?;
                sges.push(sge, GFP_KERNEL)?;
            }
        }
        Ok(Prepared {
            slot,
            cqe,
            buf,
            more: maps,
            first,
            sges,
        })
    }

    /// Posts a receive work request into `buf` (all of its `len()` bytes; an
    /// empty one: no scatter entry). The buffer comes back with the
    /// request's completion (see [`RcQp::poll_one`]); on an error it is
    /// freed. `ENOMEM` if the receive queue is full.
    pub fn post_recv(&mut self, buf: KVec<u8>) -> Result {
        self.post_recv_sg(buf, KVec::new())
    }

    /// Posts a receive work request into `buf`, then each of `more` (one
    /// scatter entry each, all of their bytes; `EINVAL` for more than the
    /// QP's [`QpSize::sge`], or an empty one among several). They come
    /// back with the completion (`buf` and [`Completion::more`]); on an
    /// error they are freed. `ENOMEM` if the receive queue is full.
    pub fn post_recv_sg(&mut self, buf: KVec<u8>, more: KVec<KVec<u8>>) -> Result {
        let mut p = self.prepare(WrKind::Recv, buf, more, 1)?;
        let mut wr = bindings::ib_recv_wr::default();
        wr.__bindgen_anon_1.wr_cqe = p.cqe;
        (wr.sg_list, wr.num_sge) = p.sg_list();
        let mut bad: *const bindings::ib_recv_wr = core::ptr::null();
        // SAFETY: By the type invariant the QP is live; `wr` and its list
        // are only read during the call; the buffers the list names are
        // mapped and, from here, owned by the table until the completion
        // is taken.
        to_result(unsafe { bindings::ib_post_recv(self.qp.as_ptr(), &wr, &mut bad) })?;
        self.posted(WrKind::Recv, p, true);
        Ok(())
    }

    /// Posts a signalled SEND of `buf` (all of its `len()` bytes; empty: a
    /// zero-length SEND). The buffer comes back with the completion; on an
    /// error it is freed. `ENOMEM` if the send queue is full.
    pub fn post_send(&mut self, buf: KVec<u8>) -> Result {
        self.post_sq(WrKind::Send, buf, KVec::new(), None, true)
            .map(|_| ())
    }

    /// Posts a SEND of `buf` then each of `more` (one gather entry each, as
    /// in [`RcQp::post_recv_sg`]), signalled or not. An unsignalled one
    /// has no completion of its own unless it fails: its buffers come back
    /// (with [`WcStatus::Success`], `byte_len` 0) just before the
    /// completion of a later request on the send queue, for which it needs
    /// room (`ENOMEM` unless the queue has room for two). Until then they
    /// stay the QP's, through [`RcQp::drain`] too (whose own requests tell
    /// its user nothing): end a run of them with a signalled request.
    pub fn post_send_sg(&mut self, buf: KVec<u8>, more: KVec<KVec<u8>>, signaled: bool) -> Result {
        self.post_sq(WrKind::Send, buf, more, None, signaled)
            .map(|_| ())
    }

    /// Posts a signalled RDMA READ (`kind` [`WrKind::RdmaRead`]: the peer's
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
        self.post_sq(kind, buf, KVec::new(), Some((remote_addr, rkey)), true)
            .map(|_| ())
    }

    /// [`RcQp::post_rdma`] from (or into) `buf` then each of `more`,
    /// signalled or not (as in [`RcQp::post_send_sg`]).
    pub fn post_rdma_sg(
        &mut self,
        kind: WrKind,
        buf: KVec<u8>,
        more: KVec<KVec<u8>>,
        remote: (u64, u32),
        signaled: bool,
    ) -> Result {
        self.post_sq(kind, buf, more, Some(remote), signaled)
            .map(|_| ())
    }

    /// Posts a SEND, or an RDMA READ or WRITE to `remote` (address, rkey);
    /// returns its slot.
    fn post_sq(
        &mut self,
        kind: WrKind,
        buf: KVec<u8>,
        more: KVec<KVec<u8>>,
        remote: Option<(u64, u32)>,
        signaled: bool,
    ) -> Result<usize> {
        let opcode = match (kind, remote) {
            (WrKind::Send, None) => bindings::ib_wr_opcode_IB_WR_SEND,
            (WrKind::RdmaRead, Some(_)) => bindings::ib_wr_opcode_IB_WR_RDMA_READ,
            (WrKind::RdmaWrite, Some(_)) => bindings::ib_wr_opcode_IB_WR_RDMA_WRITE,
            _ => return Err(EINVAL),
        };
        // Room for a signalled request after an unsignalled one: only a
        // later completion tells that it ended.
        let mut p = self.prepare(kind, buf, more, if signaled { 1 } else { 2 })?;
        let (remote_addr, rkey) = remote.unwrap_or_default();
        let flags = if signaled {
            bindings::ib_send_flags_IB_SEND_SIGNALED as c_int
        } else {
            0
        };
        let mut wr = bindings::ib_rdma_wr {
            wr: bindings::ib_send_wr {
                opcode,
                send_flags: flags,
                ..Default::default()
            },
            remote_addr,
            rkey,
        };
        wr.wr.__bindgen_anon_1.wr_cqe = p.cqe;
        (wr.wr.sg_list, wr.wr.num_sge) = p.sg_list();
        let mut bad: *const bindings::ib_send_wr = core::ptr::null();
        // SAFETY: As in `post_recv_sg`; `wr.wr` is the first member of an
        // `ib_rdma_wr`, as the driver reads it for READ and WRITE (a SEND's
        // driver reads only `wr.wr`). Only a READ's buffers are mapped for
        // the device to write.
        to_result(unsafe { bindings::ib_post_send(self.qp.as_ptr(), &wr.wr, &mut bad) })?;
        let slot = p.slot;
        self.posted(kind, p, signaled);
        Ok(slot)
    }

    /// The next place in the send queue's order.
    fn next_seq(&mut self) -> u64 {
        self.sq_seq += 1;
        self.sq_seq
    }

    /// Puts the request of `kind` just posted with `p`'s buffers into the
    /// table at its slot.
    fn posted(&mut self, kind: WrKind, p: Prepared, signaled: bool) {
        let seq = if kind.on_send_queue() {
            self.next_seq()
        } else {
            0
        };
        // INVARIANT: the posted request is in the table at its slot, the
        // last of the send queue's if it is on it.
        self.wrs[p.slot] = Some(Posted {
            kind,
            buf: p.buf,
            more: p.more,
            mr: None,
            seq,
            signaled,
        });
    }

    /// Registers `buf` with `mr` for the peer's RDMA READ and WRITE
    /// (`ib_map_mr_sg`, an `IB_WR_REG_MR` on the send queue, a new key each
    /// time). The REG_MR's completion hands `mr` back (valid if it
    /// succeeded); the LOCAL_INV's ([`RcQp::invalidate_mr`]) hands `buf`
    /// back with the MR's bytes, the peer's writes included. On an error
    /// `mr` comes back in its state, with what it held (and a valid one
    /// with its key), and `buf` is freed: `EINVAL` for an MR of another PD,
    /// `EMSGSIZE` if `buf` is empty or longer than [`Mr::capacity`],
    /// `EBUSY` if `mr` holds a buffer, `ENOMEM` if the send queue is full.
    pub fn reg_mr(&mut self, mut mr: Mr, buf: KVec<u8>) -> Result<(), MrError> {
        let posted = self.post_reg(&mut mr, &buf);
        if posted.is_ok() {
            mr.registered(buf);
        }
        self.hold_mr(WrKind::RegMr, mr, posted)
    }

    /// Posts `mr`'s REG_MR for `buf`; returns its slot.
    fn post_reg(&mut self, mr: &mut Mr, buf: &[u8]) -> Result<usize> {
        // Not only rxe's check: a driver reads the request's MR as one of
        // its own type, which an MR of another device is not.
        if !core::ptr::eq(mr.pd(), &**self.pd) {
            return Err(EINVAL);
        }
        if !self.has_room(WrKind::RegMr, 1) {
            return Err(ENOMEM);
        }
        let (slot, cqe) = self.free_slot()?;
        let mut wr = mr.prepare_reg(buf)?;
        wr.wr.__bindgen_anon_1.wr_cqe = cqe;
        let mut bad: *const bindings::ib_send_wr = core::ptr::null();
        // SAFETY: By the type invariant the QP is live; `wr.wr` is the first
        // member of an `ib_reg_wr`, as the driver reads it for REG_MR, and
        // names an MR of the QP's PD. The caller puts the MR (and its memory)
        // into the table at `slot`, until the request's completion is taken
        // or the QP is destroyed.
        to_result(unsafe { bindings::ib_post_send(self.qp.as_ptr(), &wr.wr, &mut bad) })?;
        Ok(slot)
    }

    /// Posts the LOCAL_INV of `mr`: the peer's rkey stops working, and the
    /// completion hands `mr` back, free, with its buffer (with what the
    /// peer wrote into it). On an error `mr` comes back as it was: `EINVAL`
    /// unless it is valid and of the QP's PD, `ENOMEM` if the send queue is
    /// full.
    pub fn invalidate_mr(&mut self, mr: Mr) -> Result<(), MrError> {
        let posted = self.post_inv(&mr);
        self.hold_mr(WrKind::LocalInv, mr, posted)
    }

    /// Posts `mr`'s LOCAL_INV; returns its slot.
    fn post_inv(&mut self, mr: &Mr) -> Result<usize> {
        if !core::ptr::eq(mr.pd(), &**self.pd) {
            return Err(EINVAL);
        }
        let mut wr = mr.prepare_inv()?;
        if !self.has_room(WrKind::LocalInv, 1) {
            return Err(ENOMEM);
        }
        let (slot, cqe) = self.free_slot()?;
        wr.__bindgen_anon_1.wr_cqe = cqe;
        let mut bad: *const bindings::ib_send_wr = core::ptr::null();
        // SAFETY: By the type invariant the QP is live; `wr` is only read.
        // The caller puts the MR into the table, as in `post_reg`.
        to_result(unsafe { bindings::ib_post_send(self.qp.as_ptr(), &wr, &mut bad) })?;
        Ok(slot)
    }

    /// Puts `mr`, whose `kind` request was posted at `posted`'s slot, into
    /// the table until its completion; or hands it back with the error.
    fn hold_mr(&mut self, kind: WrKind, mr: Mr, posted: Result<usize>) -> Result<(), MrError> {
        match posted {
            Ok(slot) => {
                // INVARIANT: the posted request is in the table at its
                // slot, the last of the send queue's.
                let seq = self.next_seq();
                self.wrs[slot] = Some(Posted::about(kind, mr, seq));
                Ok(())
            }
            Err(error) => Err(MrError { error, mr }),
        }
    }

    /// Takes one completion, if there is one, with its work request's
    /// buffers or MR back: before a completion of the send queue, one for
    /// each unsignalled request posted before it and not yet handed back,
    /// oldest first. `ENOMEM` (nothing taken) if the list of the request's
    /// buffers cannot be allocated.
    pub fn poll_one(&mut self) -> Result<Option<Completion>> {
        let d = match self.held.take().or_else(|| self.comps.pop()) {
            Some(d) => d,
            None => return Ok(None),
        };
        let slot = usize::try_from(d.slot).unwrap_or(usize::MAX);
        // The send queue runs in order: an unsignalled request before this
        // one ended with success (had it failed, its own completion would
        // have come, and been taken, first).
        let (i, status, byte_len) = match self.unsignaled_before(slot) {
            Some(i) => (i, WcStatus::Success, 0),
            None => (slot, WcStatus::from_raw(d.status), d.byte_len),
        };
        let c = self.complete(i, status, byte_len);
        if c.is_err() || i != slot {
            // INVARIANT: `d`'s request is still in the table.
            self.held = Some(d);
        }
        c.map(Some)
    }

    /// The oldest unsignalled request of the send queue posted before the
    /// one in `slot`, if that one is on the send queue.
    fn unsignaled_before(&self, slot: usize) -> Option<usize> {
        let p = self.wrs.get(slot)?.as_ref()?;
        if !p.kind.on_send_queue() {
            return None;
        }
        let before =
            |(_, q): &(usize, &Posted)| q.kind.on_send_queue() && !q.signaled && q.seq < p.seq;
        self.wrs
            .iter()
            .enumerate()
            .filter_map(|(i, q)| Some((i, q.as_ref()?)))
            .filter(before)
            .min_by_key(|(_, q)| q.seq)
            .map(|(i, _)| i)
    }

    /// Takes the request in `slot` out of the table: it ended with
    /// `status`. Its buffers are unmapped and handed back.
    fn complete(&mut self, slot: usize, status: WcStatus, byte_len: u32) -> Result<Completion> {
        let n = self
            .wrs
            .get(slot)
            .and_then(Option::as_ref)
            .map_or(0, |p| p.more.len());
        let mut more = KVec::with_capacity(n, GFP_KERNEL)?;
        let Some(p) = self.wrs.get_mut(slot).and_then(Option::take) else {
            return Ok(Completion {
                status,
                kind: None,
                byte_len,
                buf: KVec::new(),
                more,
                mr: None,
            });
        };
        let mut buf = p.buf.into_buf();
        for m in p.more {
            more.push(m.into_buf(), GFP_KERNEL)?;
        }
        let mut mr = p.mr;
        if let Some(b) = mr.as_mut().and_then(|m| m.completed(p.kind, status)) {
            buf = b;
        }
        Ok(Completion {
            status,
            kind: Some(p.kind),
            byte_len,
            buf,
            more,
            mr,
        })
    }

    /// Sleeps until a completion of the QP's requests is queued (at once if
    /// one is), for at most `ms`; `false` if a signal is pending. For a
    /// user that takes completions in its own thread, with a bound of its
    /// own (a drain that must not wait as long as [`RcQp::drain`] may).
    pub fn wait_completion(&self, ms: u32) -> bool {
        self.held.is_some() || self.comps.wait(ms)
    }

    /// Ends every posted work request (`ib_drain_qp()`): moves the QP to the
    /// error state, so that the device flushes what is posted, waits
    /// (uninterruptibly, without a bound) until both queues are flushed,
    /// and hands each completion to `f`. Returns how many requests did not
    /// come back: unsignalled requests after the last completion of the
    /// send queue (no completion tells the QP's user that they ended), or
    /// what the core could not drain (it may warn, once per boot). Not from
    /// the waker of any QP on the same CQ, nor holding a lock one of them
    /// takes: the CQ's work, which calls them one at a time, delivers the
    /// flushes. May sleep.
    pub fn drain(&mut self, mut f: impl FnMut(Completion)) -> u32 {
        // SAFETY: By the type invariant the QP is live, on a CQ from
        // `ib_alloc_cq()` polled on a workqueue, with room in each queue and
        // in the CQ for the request the drain posts there. The caller does
        // not hold up the CQ's work (see above), which delivers them.
        unsafe { bindings::ib_drain_qp(self.qp.as_ptr()) };
        // Each flushed completion came before the drain's own.
        while let Ok(Some(c)) = self.poll_one() {
            f(c);
        }
        self.outstanding_all()
    }
}

/// A request about to be posted: its slot and `ib_cqe`, its buffers mapped
/// for the device, and its scatter/gather list (`first`, or all of them in
/// `sges` if there are several).
struct Prepared {
    slot: usize,
    cqe: *mut bindings::ib_cqe,
    buf: Mapping,
    more: KVec<Mapping>,
    first: bindings::ib_sge,
    sges: KVec<bindings::ib_sge>,
}

impl Prepared {
    /// The list and its length, for the work request (none for a lone
    /// empty buffer); valid while `self` does not move.
    fn sg_list(&mut self) -> (*mut bindings::ib_sge, c_int) {
        match (self.buf.len, self.sges.len()) {
            (0, 0) => (core::ptr::null_mut(), 0),
            (_, 0) => (&mut self.first, 1),
            // At most `QpSize::sge` (`RcQp::prepare`), a `u32` the device
            // took as a `c_int`.
            (_, n) => (self.sges.as_mut_ptr(), n as c_int),
        }
    }
}

impl Drop for RcQp {
    fn drop(&mut self) {
        // The user's waker goes first, and a call of it in progress ends
        // first: if the QP had to be leaked below, the CQ's work would
        // otherwise keep calling it, in a module that may be gone; and the
        // references it holds are put here, not in the CQ's work.
        self.comps.set_waker(None);
        // A completion taken and held (behind unsignalled requests) came:
        // its request and theirs are over.
        while self.held.is_some() && self.poll_one().is_ok() {}
        // SAFETY: By the type invariant the QP is live and destroyed only
        // here, before the MRs of its requests, its CQ and its PD.
        let ret = unsafe { bindings::ib_destroy_qp_user(self.qp.as_ptr(), core::ptr::null_mut()) };
        if ret != 0 {
            // The QP still exists (a driver refused; rxe refuses only a QP
            // with multicast attachments, which an RC QP cannot have, but a
            // driver may fail its destroy): the device may still write into
            // the buffers of its posted requests and complete on the CQ,
            // and the peer may still reach its MRs. Leaking them, the
            // buffers, the `ib_cqe`s, the CQ's and the PD's references
            // (with the device's reference they hold: the device's
            // unregistration then waits, a hang rather than a use after
            // free) is the only safe choice; all but `wrs` are in their
            // `ManuallyDrop`.
            pr_warn!(
                "QP {} not destroyed ({}): its buffers, MRs, CQ and PD references are leaked\n",
                self.qp_num(),
                ret
            );
            core::mem::forget(core::mem::take(&mut self.wrs));
            return;
        }
        // Completions of requests not taken may still be in the CQ: their
        // entries stay reserved until they came (an unsignalled request's
        // may never come: until the CQ goes).
        let pending = self.outstanding_all();
        // The drain's requests are never outstanding here: it waited for
        // their completions.
        let slots = self.size.send + self.size.recv + DRAIN_WRS;
        // SAFETY: Each dropped or taken once, here. The QP is gone: the
        // device no longer touches the buffers of the requests still in
        // the table, nor runs the REG_MRs and LOCAL_INVs of the MRs there,
        // whose deregistration ends the device's access to their pages
        // through any other QP of the PD. They are freed while the device
        // is still ours (the PD holds its reference). The `ib_cqe`s are freed only
        // if every completion of the QP was taken (each was queued, and its
        // `done` released the ring's lock, before it could be taken) and
        // no waker call is in progress (`set_waker`); otherwise the CQ
        // keeps them until those completions came. The CQ's and the PD's
        // references go last.
        unsafe {
            drop(core::mem::take(&mut self.wrs));
            let comps = ManuallyDrop::take(&mut self.comps);
            self.cq.release(slots - pending);
            if pending > 0 {
                self.cq.orphan(comps, pending);
            } else {
                drop(comps);
            }
            ManuallyDrop::drop(&mut self.cq);
            ManuallyDrop::drop(&mut self.pd);
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
