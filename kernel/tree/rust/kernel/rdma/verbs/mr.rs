// SPDX-License-Identifier: GPL-2.0

//! Fast-registration MRs of an [`RcQp`]'s PD: a buffer registered for the
//! peer's RDMA READ and WRITE with an `IB_WR_REG_MR`, and handed back by
//! the completion of its `IB_WR_LOCAL_INV`.

use super::{
    mapping::{Mapping, Posted},
    wc::WrKind,
    RcQp,
};
use crate::{bindings, error::from_err_ptr, error::to_result, ffi::c_int, prelude::*};
use core::ptr::NonNull;

/// The largest buffer an MR registers: a page, which the two entries of
/// the page list each MR is allocated with cover wherever it starts (a
/// property of the mechanism, not a choice: a larger buffer would need a
/// longer page list).
pub const MAX_REG_BYTES: usize = crate::page::PAGE_SIZE;

/// Where an MR of the QP is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MrState {
    /// Its REG_MR is posted.
    Registering,
    /// Registered: the peer may read and write the buffer with its rkey.
    Valid,
    /// Its LOCAL_INV is posted.
    Invalidating,
    /// Its REG_MR or LOCAL_INV did not complete with success (flushed by a
    /// QP in error): the buffer stays with the MR until the QP is freed.
    Failed,
}

/// What the peer needs to use an MR, and its state (for `conns`).
#[derive(Clone, Copy, Debug)]
pub struct MrInfo {
    /// Its index among the QP's MRs (what [`RcQp::invalidate_mr`] takes).
    pub index: usize,
    /// The address the peer's RDMA READ and WRITE use.
    pub addr: u64,
    /// The key the peer's RDMA READ and WRITE use.
    pub rkey: u32,
    /// The buffer's length in bytes.
    pub len: usize,
    /// Where it is in its life.
    pub state: MrState,
}

/// A fast-registration MR of the QP's PD, with the page it exposes.
///
/// The peer reaches `page`, never the caller's buffer: registration copies
/// the caller's bytes in, a successful LOCAL_INV copies them out into the
/// caller's buffer (`user`), which goes back. The page itself stays mapped
/// and the MR's until the QP is destroyed: a device may still be writing
/// a peer's RDMA WRITE that passed its key check before the invalidation
/// (rxe's LOCAL_INV only changes the MR's state, its responder copies a
/// packet after checking it), and the QP's destruction is the one point
/// from which nothing writes there any more.
///
/// `user` is the caller's buffer from its REG_MR's post until its
/// LOCAL_INV completes with success (then it goes back) or the QP is
/// destroyed; `None` while the MR is free for a new registration.
pub(super) struct MrSlot {
    pub(super) mr: NonNull<bindings::ib_mr>,
    pub(super) page: Option<Mapping>,
    pub(super) user: Option<KVec<u8>>,
    pub(super) state: MrState,
    pub(super) key: u8,
}

impl RcQp {
    /// Registers `buf` for the peer's RDMA READ and WRITE with a fast
    /// registration MR of the QP's PD (`ib_alloc_mr`, `ib_map_mr_sg`, an
    /// `IB_WR_REG_MR` on the send queue, a new key each time an MR is
    /// reused). Returns the MR's index; [`RcQp::mrs`] says when it is valid
    /// and what to tell the peer. The MR exposes a page of its own, which
    /// `buf`'s bytes are copied to; `buf` is kept until
    /// [`RcQp::invalidate_mr`]'s LOCAL_INV completes (the completion hands it
    /// back with the page's bytes, the peer's writes included) or the QP is
    /// freed. At most [`QpSize::max_mrs`](super::QpSize::max_mrs) MRs (`ENOSPC`)
    /// and [`MAX_REG_BYTES`] bytes (`EMSGSIZE`).
    pub fn reg_mr(&mut self, buf: KVec<u8>) -> Result<usize> {
        if buf.is_empty() || buf.len() > MAX_REG_BYTES {
            return Err(EMSGSIZE);
        }
        if !self.has_room(WrKind::RegMr, 1) {
            return Err(ENOMEM);
        }
        let idx = match self.mrs.iter().position(|m| m.user.is_none()) {
            Some(i) => i,
            None if self.mrs.len() < self.size.max_mrs => {
                // SAFETY: By the type invariant the PD is live. Two pages
                // hold any buffer of up to a page, wherever it starts.
                let mr = from_err_ptr(unsafe {
                    bindings::ib_alloc_mr(
                        self.pd.as_ptr(),
                        bindings::ib_mr_type_IB_MR_TYPE_MEM_REG,
                        2,
                    )
                })?;
                let mr = NonNull::new(mr).ok_or(ENOMEM)?;
                let slot = MrSlot {
                    mr,
                    page: None,
                    user: None,
                    state: MrState::Failed,
                    key: 0,
                };
                if let Err(e) = self.mrs.push(slot, GFP_KERNEL) {
                    // SAFETY: Just allocated, never used.
                    unsafe { bindings::ib_dereg_mr_user(mr.as_ptr(), core::ptr::null_mut()) };
                    return Err(e.into());
                }
                self.mrs.len() - 1
            }
            None => return Err(ENOSPC),
        };
        let (slot, cqe) = self.free_slot()?;
        let len = u32::try_from(buf.len()).map_err(|_| EINVAL)?;
        let m = &mut self.mrs[idx];
        if m.page.is_none() {
            let page = KVec::from_elem(0u8, MAX_REG_BYTES, GFP_KERNEL)?;
            // SAFETY: By the type invariant the PD is live; its device is
            // fixed.
            let dev = unsafe { (*self.pd.as_ptr()).device };
            // SAFETY: The PD's device is registered; the mapping is kept by
            // the MR slot, freed after the QP and before the device goes
            // (see `Mapping`).
            m.page = Some(unsafe {
                Mapping::new(
                    NonNull::new(dev).ok_or(EINVAL)?,
                    page,
                    bindings::dma_data_direction::DMA_BIDIRECTIONAL,
                )?
            });
        }
        let map = m.page.as_mut().ok_or(EINVAL)?;
        map.write_for_device(&buf)?;
        let key = m.key.wrapping_add(1);
        // The one range already mapped, as a scatterlist of one entry (on
        // the stack: the driver copies the page addresses out of it).
        let mut sg = bindings::scatterlist::default();
        // SAFETY: `sg` is one entry, valid for writes.
        unsafe { bindings::sg_init_table(&mut sg, 1) };
        sg.dma_address = map.addr;
        #[cfg(CONFIG_NEED_SG_DMA_LENGTH)]
        {
            sg.dma_length = len;
        }
        #[cfg(not(CONFIG_NEED_SG_DMA_LENGTH))]
        {
            sg.length = len;
        }
        // SAFETY: The MR is ours and not registered (free slot): its key and
        // page list may change. `sg` names a mapping of `len` bytes.
        let n = unsafe {
            bindings::ib_update_fast_reg_key(m.mr.as_ptr(), key);
            bindings::ib_map_mr_sg(
                m.mr.as_ptr(),
                &mut sg,
                1,
                core::ptr::null_mut(),
                crate::page::PAGE_SIZE as u32,
            )
        };
        if n != 1 {
            return Err(if n < 0 { Error::from_errno(n) } else { EINVAL });
        }
        let access = bindings::ib_access_flags_IB_ACCESS_LOCAL_WRITE
            | bindings::ib_access_flags_IB_ACCESS_REMOTE_READ
            | bindings::ib_access_flags_IB_ACCESS_REMOTE_WRITE;
        let mut wr = bindings::ib_reg_wr {
            wr: bindings::ib_send_wr {
                opcode: bindings::ib_wr_opcode_IB_WR_REG_MR,
                send_flags: bindings::ib_send_flags_IB_SEND_SIGNALED as c_int,
                ..Default::default()
            },
            mr: m.mr.as_ptr(),
            // SAFETY: As above; `rkey` was just set.
            key: unsafe { (*m.mr.as_ptr()).rkey },
            access: access as c_int,
        };
        wr.wr.__bindgen_anon_1.wr_cqe = cqe;
        let mut bad: *const bindings::ib_send_wr = core::ptr::null();
        // SAFETY: By the type invariant the QP is live; `wr.wr` is the first
        // member of an `ib_reg_wr`, as the driver reads it for REG_MR. The
        // page the MR maps is the slot's until the QP is destroyed.
        to_result(unsafe { bindings::ib_post_send(self.qp.as_ptr(), &wr.wr, &mut bad) })?;
        m.key = key;
        m.user = Some(buf);
        m.state = MrState::Registering;
        // INVARIANT: the posted request is in the table at its slot.
        self.wrs[slot] = Some(Posted {
            kind: WrKind::RegMr,
            buf: Mapping::none(),
            mr: idx,
        });
        Ok(idx)
    }

    /// Posts the LOCAL_INV of MR `idx` (`EINVAL` unless it is valid): the
    /// peer's rkey stops working, and the completion hands the MR's buffer
    /// back (with what the peer wrote into it) and frees the MR for reuse.
    pub fn invalidate_mr(&mut self, idx: usize) -> Result {
        let m = self.mrs.get(idx).ok_or(ENOENT)?;
        if m.state != MrState::Valid {
            return Err(EINVAL);
        }
        if !self.has_room(WrKind::LocalInv, 1) {
            return Err(ENOMEM);
        }
        let (slot, cqe) = self.free_slot()?;
        let m = &mut self.mrs[idx];
        let mut wr = bindings::ib_send_wr {
            opcode: bindings::ib_wr_opcode_IB_WR_LOCAL_INV,
            send_flags: bindings::ib_send_flags_IB_SEND_SIGNALED as c_int,
            ..Default::default()
        };
        wr.__bindgen_anon_1.wr_cqe = cqe;
        // SAFETY: By the type invariant the MR is live; `rkey` is its key.
        wr.ex.invalidate_rkey = unsafe { (*m.mr.as_ptr()).rkey };
        let mut bad: *const bindings::ib_send_wr = core::ptr::null();
        // SAFETY: By the type invariant the QP is live; `wr` is only read.
        to_result(unsafe { bindings::ib_post_send(self.qp.as_ptr(), &wr, &mut bad) })?;
        m.state = MrState::Invalidating;
        // INVARIANT: as in `reg_mr`.
        self.wrs[slot] = Some(Posted {
            kind: WrKind::LocalInv,
            buf: Mapping::none(),
            mr: idx,
        });
        Ok(())
    }

    /// The MRs holding a buffer, for the peer and for `conns`.
    pub fn mrs(&self) -> impl Iterator<Item = MrInfo> + '_ {
        self.mrs.iter().enumerate().filter_map(|(index, m)| {
            let len = m.user.as_ref()?.len();
            let b = m.page.as_ref()?;
            // SAFETY: By the type invariant the MR is live; `rkey` is a plain
            // field, changed only under `&mut self`.
            let rkey = unsafe { (*m.mr.as_ptr()).rkey };
            Some(MrInfo {
                index,
                addr: b.addr,
                rkey,
                len,
                state: m.state,
            })
        })
    }
}
