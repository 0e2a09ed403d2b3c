// SPDX-License-Identifier: GPL-2.0

//! Fast-registration MRs of an [`RcQp`](super::RcQp)'s PD: a buffer registered for the
//! peer's RDMA READ and WRITE with an `IB_WR_REG_MR`, and handed back by
//! the completion of its `IB_WR_LOCAL_INV`.

use super::{mapping::Mapping, pd::Pd, wc::WcStatus, wc::WrKind};
use crate::{bindings, error::from_err_ptr, ffi::c_int, prelude::*};
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

/// What the peer needs to use an MR, and its state.
#[derive(Clone, Copy, Debug)]
pub struct MrInfo {
    /// Its index among the QP's MRs (what
    /// [`RcQp::invalidate_mr`](super::RcQp::invalidate_mr) takes).
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
/// and the MR's until the MR is deregistered: a device may still be
/// writing a peer's RDMA WRITE that passed its key check before the
/// invalidation (rxe's LOCAL_INV only changes the MR's state, its
/// responder copies a packet after checking it), and through any QP of
/// the PD, not only the one that registered it (an rkey is the PD's).
/// `ib_dereg_mr()` is the one point from which the device no longer
/// touches the MR's memory (rxe's waits for the references its responder
/// holds while it copies).
///
/// `user` is the caller's buffer from its REG_MR's post until its
/// LOCAL_INV completes with success (then it goes back) or the QP is
/// destroyed; `None` while the MR is free for a new registration.
struct MrSlot {
    mr: NonNull<bindings::ib_mr>,
    page: Option<Mapping>,
    user: Option<KVec<u8>>,
    state: MrState,
    key: u8,
}

/// The MRs of a QP's PD: at most `max`, allocated on first use and reused,
/// deregistered when dropped, which their QP does after it is destroyed
/// (no request of its own uses them any more), each before its page is
/// unmapped and freed.
///
/// # Invariants
///
/// Each slot's `mr` is a live MR of the QP's PD, deregistered exactly once,
/// in `drop`; its `page`, once set, is mapped on the PD's device, which
/// outlives `self` (the QP drops its PD last).
pub(super) struct Mrs {
    slots: KVec<MrSlot>,
    max: usize,
}

impl Mrs {
    pub(super) fn new(max: usize) -> Self {
        Self {
            slots: KVec::new(),
            max,
        }
    }

    /// MRs allocated (reused, freed with the QP).
    pub(super) fn allocated(&self) -> usize {
        self.slots.len()
    }

    /// MRs holding a caller's buffer.
    pub(super) fn holding(&self) -> usize {
        self.slots.iter().filter(|m| m.user.is_some()).count()
    }

    /// A free MR for a registration of `len` bytes (`EMSGSIZE`, `ENOSPC`),
    /// allocated on `pd` if none is free.
    pub(super) fn free_mr(&mut self, pd: &Pd, len: usize) -> Result<usize> {
        if len == 0 || len > MAX_REG_BYTES {
            return Err(EMSGSIZE);
        }
        if let Some(i) = self.slots.iter().position(|m| m.user.is_none()) {
            return Ok(i);
        }
        if self.slots.len() >= self.max {
            return Err(ENOSPC);
        }
        // SAFETY: The PD is live. Two pages hold any buffer of up to a
        // page, wherever it starts.
        let mr = from_err_ptr(unsafe {
            bindings::ib_alloc_mr(pd.as_raw(), bindings::ib_mr_type_IB_MR_TYPE_MEM_REG, 2)
        })?;
        let mr = NonNull::new(mr).ok_or(ENOMEM)?;
        let slot = MrSlot {
            mr,
            page: None,
            user: None,
            state: MrState::Failed,
            key: 0,
        };
        if let Err(e) = self.slots.push(slot, GFP_KERNEL) {
            // SAFETY: Just allocated, never used.
            unsafe { bindings::ib_dereg_mr_user(mr.as_ptr(), core::ptr::null_mut()) };
            return Err(e.into());
        }
        // INVARIANT: a live MR of the PD, in its slot.
        Ok(self.slots.len() - 1)
    }

    /// The REG_MR of free MR `idx` for `buf`: its page (mapped on the PD's
    /// device at first use) gets `buf`'s bytes and the MR a new key. The
    /// caller sets the request's `wr_cqe`, posts it, then calls
    /// [`Mrs::registered`].
    pub(super) fn prepare_reg(
        &mut self,
        pd: &Pd,
        idx: usize,
        buf: &[u8],
    ) -> Result<bindings::ib_reg_wr> {
        let len = u32::try_from(buf.len()).map_err(|_| EINVAL)?;
        let m = self.slots.get_mut(idx).ok_or(ENOENT)?;
        if m.user.is_some() {
            return Err(EBUSY);
        }
        if m.page.is_none() {
            let page = KVec::from_elem(0u8, MAX_REG_BYTES, GFP_KERNEL)?;
            let (dev, _) = pd.dma()?;
            // SAFETY: The PD's device is registered; the mapping is kept by
            // the slot, freed after the QP and before the device goes (see
            // `Mapping`).
            m.page = Some(unsafe {
                Mapping::new(dev, page, bindings::dma_data_direction::DMA_BIDIRECTIONAL)?
            });
        }
        let map = m.page.as_mut().ok_or(EINVAL)?;
        map.write_for_device(buf)?;
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
        // SAFETY: The MR is live and holds no caller's buffer: its key and
        // page list may change (on rxe a copy that passed the old key's
        // check may still be writing: into this same page, the slot's for
        // the QP's life, so into memory no caller owns). `sg` names a
        // mapping of `len` bytes.
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
        m.key = key;
        let access = bindings::ib_access_flags_IB_ACCESS_LOCAL_WRITE
            | bindings::ib_access_flags_IB_ACCESS_REMOTE_READ
            | bindings::ib_access_flags_IB_ACCESS_REMOTE_WRITE;
        Ok(bindings::ib_reg_wr {
            wr: bindings::ib_send_wr {
                opcode: bindings::ib_wr_opcode_IB_WR_REG_MR,
                send_flags: bindings::ib_send_flags_IB_SEND_SIGNALED as c_int,
                ..Default::default()
            },
            mr: m.mr.as_ptr(),
            // SAFETY: As above; `rkey` was just set.
            key: unsafe { (*m.mr.as_ptr()).rkey },
            access: access as c_int,
        })
    }

    /// MR `idx`'s REG_MR was posted: it holds `buf` until its LOCAL_INV
    /// completes.
    pub(super) fn registered(&mut self, idx: usize, buf: KVec<u8>) {
        if let Some(m) = self.slots.get_mut(idx) {
            m.user = Some(buf);
            m.state = MrState::Registering;
        }
    }

    /// The LOCAL_INV of MR `idx` (`ENOENT`; `EINVAL` unless it is valid).
    /// The caller sets the request's `wr_cqe`, posts it, then calls
    /// [`Mrs::invalidating`].
    pub(super) fn prepare_inv(&self, idx: usize) -> Result<bindings::ib_send_wr> {
        let m = self.slots.get(idx).ok_or(ENOENT)?;
        if m.state != MrState::Valid {
            return Err(EINVAL);
        }
        let mut wr = bindings::ib_send_wr {
            opcode: bindings::ib_wr_opcode_IB_WR_LOCAL_INV,
            send_flags: bindings::ib_send_flags_IB_SEND_SIGNALED as c_int,
            ..Default::default()
        };
        // SAFETY: By the type invariant the MR is live; `rkey` is its key.
        wr.ex.invalidate_rkey = unsafe { (*m.mr.as_ptr()).rkey };
        Ok(wr)
    }

    /// MR `idx`'s LOCAL_INV was posted.
    pub(super) fn invalidating(&mut self, idx: usize) {
        if let Some(m) = self.slots.get_mut(idx) {
            m.state = MrState::Invalidating;
        }
    }

    /// A REG_MR or LOCAL_INV of MR `idx` completed with `status`: a
    /// successful LOCAL_INV gives the caller's buffer back with the page's
    /// bytes (the peer's rkey no longer reaches the page).
    pub(super) fn completed(
        &mut self,
        kind: WrKind,
        status: WcStatus,
        idx: usize,
    ) -> Option<KVec<u8>> {
        let m = self.slots.get_mut(idx)?;
        match (kind, status) {
            (WrKind::RegMr, WcStatus::Success) => m.state = MrState::Valid,
            (WrKind::LocalInv, WcStatus::Success) => {
                let mut buf = m.user.take()?;
                if let Some(page) = m.page.as_ref() {
                    // Never longer than the page (`free_mr`).
                    let _ = page.read_for_cpu(&mut buf);
                }
                return Some(buf);
            }
            (WrKind::RegMr | WrKind::LocalInv, _) => m.state = MrState::Failed,
            _ => {}
        }
        None
    }

    /// The MRs holding a buffer, for the peer.
    pub(super) fn infos(&self) -> impl Iterator<Item = MrInfo> + '_ {
        self.slots.iter().enumerate().filter_map(|(index, m)| {
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

impl Drop for Mrs {
    fn drop(&mut self) {
        for m in core::mem::take(&mut self.slots).into_iter() {
            // SAFETY: By the type invariant the MR is live and deregistered
            // only here; its QP is destroyed, so no REG_MR or LOCAL_INV of
            // it is pending. Deregistered, the device no longer reaches its
            // page through any QP of the PD: the page is freed after it.
            unsafe { bindings::ib_dereg_mr_user(m.mr.as_ptr(), core::ptr::null_mut()) };
            drop(m.page);
            drop(m.user);
        }
    }
}
