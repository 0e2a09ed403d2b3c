// SPDX-License-Identifier: GPL-2.0

//! [`Mr`]: a fast-registration MR of a PD, which a QP of the PD registers
//! for the peer's RDMA READ and WRITE with an `IB_WR_REG_MR` and takes back
//! with an `IB_WR_LOCAL_INV`.

use super::{mapping::Mapping, pd::Pd, wc::WcStatus, wc::WrKind};
use crate::{
    alloc::flags::__GFP_NOWARN, bindings, error::from_err_ptr, ffi::c_int, prelude::*, sync::Arc,
};
use core::{mem::ManuallyDrop, ptr::NonNull};

/// Where an [`Mr`] the caller holds is in its life (while its REG_MR or
/// LOCAL_INV is posted, the QP holds it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MrState {
    /// Holds no buffer: new, or its LOCAL_INV completed with success.
    Free,
    /// Registered: the peer may read and write it with [`Mr::rkey`].
    Valid,
    /// Its REG_MR or LOCAL_INV did not complete with success (flushed by a
    /// QP in error). The device may have run it before the flush (rxe
    /// does), so the peer may still reach its memory: the MR keeps the buffer
    /// and can only be freed, which ends that.
    Failed,
}

/// A fast-registration MR of a PD (`ib_alloc_mr`), with memory of its own
/// (as many bytes as its user chose) that the peer reaches once a QP of the
/// PD registered it ([`RcQp::reg_mr`](super::RcQp::reg_mr)).
///
/// The peer reaches that memory, never the caller's buffer: registration
/// copies the caller's bytes in, a successful LOCAL_INV copies them out
/// into the caller's buffer, which its completion hands back. The memory
/// stays mapped and the MR's until the MR is freed: a device may still be
/// writing a peer's RDMA WRITE that passed its key check before the
/// invalidation (rxe's LOCAL_INV only changes the MR's state, its
/// responder copies a packet after checking it), and through any QP of the
/// PD (an rkey is the PD's). `ib_dereg_mr()` is the one point from which
/// the device no longer touches the MR's memory (rxe's waits for the
/// references its responder holds while it copies a packet, up to 50 s,
/// then warns). Dropping an `Mr` may sleep.
///
/// [`RcQp::reg_mr`](super::RcQp::reg_mr) takes the MR with the buffer to
/// register, and the REG_MR's completion hands the MR back, valid: the
/// peer needs its [`Mr::addr`], [`Mr::rkey`] and [`Mr::len`].
/// [`RcQp::invalidate_mr`](super::RcQp::invalidate_mr) takes it again, and
/// the LOCAL_INV's completion hands it back, free, with the buffer.
///
/// # Invariants
///
/// `mr` is a live MR of `pd`, allocated for a page list that covers
/// `mem` wherever it starts, and deregistered exactly once, in `drop`,
/// before `mem` (physically contiguous, mapped on `pd`'s device) is
/// unmapped and freed and before `pd`'s reference is put; both are leaked
/// if it could not be deregistered.
/// `user` is the caller's buffer from its REG_MR's post until its
/// LOCAL_INV completes with success, `None` otherwise.
pub struct Mr {
    mr: NonNull<bindings::ib_mr>,
    mem: ManuallyDrop<Mapping>,
    user: Option<KVec<u8>>,
    state: MrState,
    key: u8,
    pd: ManuallyDrop<Arc<Pd>>,
}

/// An [`Mr`] a QP did not take, given back in the state it was in, with
/// what it held (a valid one with its key), with why. (There is no
/// `From<MrError> for Error`: a `?` would free the MR unseen.)
#[derive(Debug)]
pub struct MrError {
    /// Why.
    pub error: Error,
    /// The MR.
    pub mr: Mr,
}

impl Mr {
    /// Allocates an MR on `pd` that registers buffers of up to `size`
    /// bytes, with memory of that size: `EINVAL` for 0 or for more pages
    /// than the device's fast-registration page list takes, `ENOMEM` beyond
    /// what `kmalloc` gives in one piece. May sleep.
    pub fn new(pd: &Arc<Pd>, size: usize) -> Result<Self> {
        if size == 0 {
            return Err(EINVAL);
        }
        // One page more than `size` needs: the memory may start anywhere
        // in its first page.
        let pages = size.div_ceil(crate::page::PAGE_SIZE) + 1;
        let pages = u32::try_from(pages).map_err(|_| EINVAL)?;
        // SAFETY: The PD's device is registered; its attributes are fixed.
        if pages > unsafe { (*pd.device().as_raw()).attrs.max_fast_reg_page_list_len } {
            return Err(EINVAL);
        }
        // `kmalloc`: one physically contiguous piece, mapped as one; a size
        // it cannot give is `ENOMEM`, not a warning.
        let mem = KVec::from_elem(0u8, size, GFP_KERNEL | __GFP_NOWARN)?;
        let (dev, _) = pd.dma()?;
        // SAFETY: The PD's device is registered and outlives the mapping:
        // the MR holds the PD, which holds the device, until the mapping is
        // dropped.
        let mem =
            unsafe { Mapping::new(dev, mem, bindings::dma_data_direction::DMA_BIDIRECTIONAL)? };
        // SAFETY: The PD is live; `pages` covers `mem` wherever it starts.
        let mr = from_err_ptr(unsafe {
            bindings::ib_alloc_mr(pd.as_raw(), bindings::ib_mr_type_IB_MR_TYPE_MEM_REG, pages)
        })?;
        let mr = NonNull::new(mr).ok_or(ENOMEM)?;
        // SAFETY: Just allocated. Its key byte, which each registration
        // increments, starts where the driver chose (rxe: at random).
        let key = unsafe { (*mr.as_ptr()).rkey } as u8;
        // INVARIANT: a live MR of `pd`, nothing registered yet.
        Ok(Self {
            mr,
            mem: ManuallyDrop::new(mem),
            user: None,
            state: MrState::Free,
            key,
            pd: ManuallyDrop::new(pd.clone()),
        })
    }

    /// Where the MR is in its life.
    pub fn state(&self) -> MrState {
        self.state
    }

    /// The address the peer's RDMA READ and WRITE use.
    pub fn addr(&self) -> u64 {
        self.mem.addr
    }

    /// The key the peer's RDMA READ and WRITE use (a new one at each
    /// registration).
    pub fn rkey(&self) -> u32 {
        // SAFETY: By the type invariant the MR is live; `rkey` is a plain
        // field, changed only under `&mut self`.
        unsafe { (*self.mr.as_ptr()).rkey }
    }

    /// The most bytes it registers (the size it was made with).
    pub fn capacity(&self) -> usize {
        self.mem.len
    }

    /// The length of the buffer it holds (0: none).
    pub fn len(&self) -> usize {
        self.user.as_ref().map_or(0, |b| b.len())
    }

    /// Whether it holds no buffer.
    pub fn is_empty(&self) -> bool {
        self.user.is_none()
    }

    /// The raw MR, live as long as `self`.
    pub fn as_raw(&self) -> *mut bindings::ib_mr {
        self.mr.as_ptr()
    }

    /// The PD the MR is on.
    pub(super) fn pd(&self) -> &Pd {
        &self.pd
    }

    /// The REG_MR of a free MR (`EBUSY` otherwise) for `buf` (`EMSGSIZE`
    /// if empty or longer than [`Mr::capacity`]): its memory gets `buf`'s
    /// bytes and the MR a new key. The caller sets the request's `wr_cqe`,
    /// posts it, then calls [`Mr::registered`]: a REG_MR not posted uses
    /// up no key, the next one takes the same.
    pub(super) fn prepare_reg(&mut self, buf: &[u8]) -> Result<bindings::ib_reg_wr> {
        if buf.is_empty() || buf.len() > self.capacity() {
            return Err(EMSGSIZE);
        }
        let len = u32::try_from(buf.len()).map_err(|_| EINVAL)?;
        if self.user.is_some() {
            return Err(EBUSY);
        }
        self.mem.write_for_device(buf)?;
        let key = self.key.wrapping_add(1);
        // The memory already mapped, as a scatterlist of one entry (on the
        // stack: the driver copies the page addresses out of it).
        let mut sg = bindings::scatterlist::default();
        // SAFETY: `sg` is one entry, valid for writes.
        unsafe { bindings::sg_init_table(&mut sg, 1) };
        sg.dma_address = self.mem.addr;
        #[cfg(CONFIG_NEED_SG_DMA_LENGTH)]
        {
            sg.dma_length = len;
        }
        #[cfg(not(CONFIG_NEED_SG_DMA_LENGTH))]
        {
            sg.length = len;
        }
        // SAFETY: The MR is live and holds no caller's buffer, so no REG_MR
        // or LOCAL_INV of it is posted: its key and page list may change (on
        // rxe a copy that passed the old key's check may still be writing:
        // into this same memory, the MR's for its life, so into memory no
        // caller owns). `sg` names a mapping of `len` bytes.
        let n = unsafe {
            bindings::ib_update_fast_reg_key(self.mr.as_ptr(), key);
            bindings::ib_map_mr_sg(
                self.mr.as_ptr(),
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
        Ok(bindings::ib_reg_wr {
            wr: bindings::ib_send_wr {
                opcode: bindings::ib_wr_opcode_IB_WR_REG_MR,
                send_flags: bindings::ib_send_flags_IB_SEND_SIGNALED as c_int,
                ..Default::default()
            },
            mr: self.mr.as_ptr(),
            key: self.rkey(),
            access: access as c_int,
        })
    }

    /// The REG_MR was posted: the MR holds `buf` until its LOCAL_INV
    /// completes, and keeps its new key.
    pub(super) fn registered(&mut self, buf: KVec<u8>) {
        self.key = self.rkey() as u8;
        self.user = Some(buf);
    }

    /// The LOCAL_INV of a valid MR (`EINVAL` otherwise).
    pub(super) fn prepare_inv(&self) -> Result<bindings::ib_send_wr> {
        if self.state != MrState::Valid {
            return Err(EINVAL);
        }
        let mut wr = bindings::ib_send_wr {
            opcode: bindings::ib_wr_opcode_IB_WR_LOCAL_INV,
            send_flags: bindings::ib_send_flags_IB_SEND_SIGNALED as c_int,
            ..Default::default()
        };
        wr.ex.invalidate_rkey = self.rkey();
        Ok(wr)
    }

    /// Its REG_MR or LOCAL_INV completed with `status`: a successful
    /// LOCAL_INV gives the caller's buffer back with the MR's bytes (the
    /// peer's rkey no longer reaches them).
    pub(super) fn completed(&mut self, kind: WrKind, status: WcStatus) -> Option<KVec<u8>> {
        match (kind, status) {
            (WrKind::RegMr, WcStatus::Success) => self.state = MrState::Valid,
            (WrKind::LocalInv, WcStatus::Success) => {
                self.state = MrState::Free;
                let mut buf = self.user.take()?;
                // Never longer than the memory (`prepare_reg`).
                let _ = self.mem.read_for_cpu(&mut buf);
                return Some(buf);
            }
            _ => self.state = MrState::Failed,
        }
        None
    }
}

impl core::fmt::Debug for Mr {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Mr")
            .field("state", &self.state)
            .field("rkey", &self.rkey())
            .field("len", &self.len())
            .finish()
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        // SAFETY: By the type invariant the MR is live and deregistered only
        // here. No REG_MR or LOCAL_INV of it is pending: a posted one holds
        // the `Mr` in its QP's table until its completion, or until the QP
        // is destroyed.
        let ret = unsafe { bindings::ib_dereg_mr_user(self.mr.as_ptr(), core::ptr::null_mut()) };
        if ret != 0 {
            // Still registered (rxe refuses only an MR with memory windows
            // bound, which this API cannot bind; another driver may fail):
            // the peer may still reach its memory, which is leaked with the
            // PD's reference (and the device's, which it holds).
            pr_warn!(
                "MR not deregistered ({}): its memory and PD reference are leaked\n",
                ret
            );
            return;
        }
        // SAFETY: Each dropped once, here. Deregistered, the device no
        // longer reaches the memory through any QP of the PD; the PD's
        // reference goes last.
        unsafe {
            ManuallyDrop::drop(&mut self.mem);
            ManuallyDrop::drop(&mut self.pd);
        }
    }
}

// SAFETY: The C calls on an MR have no affinity to a thread; everything that
// changes it (its key, its page list, the fields) goes through `&mut self`.
unsafe impl Send for Mr {}
// SAFETY: `&self` only reads fields that change under `&mut self`.
unsafe impl Sync for Mr {}
