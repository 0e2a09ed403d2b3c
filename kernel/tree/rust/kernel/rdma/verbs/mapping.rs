// SPDX-License-Identifier: GPL-2.0

//! A work request's buffer, DMA-mapped for the device while the request
//! owns it.

use super::{mr::Mr, wc::WrKind};
use crate::{bindings, prelude::*};
use core::ptr::NonNull;

/// A kernel buffer DMA-mapped for a device, for one work request.
///
/// # Invariants
///
/// If `len > 0`, the first `len` bytes of `buf`'s allocation (kmalloc'd,
/// physically contiguous) are mapped on `dev` at `addr` in direction `dir`,
/// and are unmapped exactly once, in `drop`; `buf`'s allocation does not move
/// or shrink meanwhile (only `into_buf` takes it, and the unmap follows at
/// once). A `Mapping` with `len > 0` lives only in the table of an
/// [`RcQp`](super::RcQp) of `dev` or in an [`Mr`](super::Mr) of `dev` (or
/// on the stack of their methods), so `dev` outlives it: the QP's or the MR's
/// PD holds a reference on its device, put after the mapping is freed.
/// With `len == 0`, `dev` is never used.
pub(super) struct Mapping {
    buf: KVec<u8>,
    pub(super) len: usize,
    pub(super) addr: u64,
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
    pub(super) unsafe fn new(
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
            addr = unsafe {
                bindings::ib_dma_map_single(dev.as_ptr(), buf.as_mut_ptr().cast(), len, dir)
            };
            // SAFETY: `dev` is registered; `addr` is what it just returned.
            if unsafe { bindings::ib_dma_mapping_error(dev.as_ptr(), addr) } != 0 {
                return Err(ENOMEM);
            }
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

    /// No buffer: for requests that carry none (REG_MR, LOCAL_INV).
    pub(super) fn none() -> Self {
        // INVARIANT: `len == 0`: nothing mapped.
        Self {
            buf: KVec::new(),
            len: 0,
            addr: 0,
            dev: NonNull::dangling(),
            dir: bindings::dma_data_direction::DMA_NONE,
        }
    }

    /// Copies `src` to the start of the mapped buffer, for the device
    /// (`EMSGSIZE` if it does not fit).
    pub(super) fn write_for_device(&mut self, src: &[u8]) -> Result {
        if src.len() > self.len {
            return Err(EMSGSIZE);
        }
        // SAFETY: `src.len()` bytes fit in `buf`'s allocation (its first
        // `len` bytes are initialised and ours); written through a pointer,
        // as the device may still write there too (a peer's late RDMA
        // WRITE: see `Mr`).
        unsafe { core::ptr::copy_nonoverlapping(src.as_ptr(), self.buf.as_mut_ptr(), src.len()) };
        // SAFETY: By the type invariant the range is mapped on `dev`.
        unsafe {
            bindings::ib_dma_sync_single_for_device(
                self.dev.as_ptr(),
                self.addr,
                src.len(),
                self.dir,
            )
        };
        Ok(())
    }

    /// Copies the start of the mapped buffer into `dst`, from the device
    /// (`EMSGSIZE` if `dst` is longer).
    pub(super) fn read_for_cpu(&self, dst: &mut [u8]) -> Result {
        if dst.len() > self.len {
            return Err(EMSGSIZE);
        }
        // SAFETY: By the type invariant the range is mapped on `dev`.
        unsafe {
            bindings::ib_dma_sync_single_for_cpu(self.dev.as_ptr(), self.addr, dst.len(), self.dir)
        };
        // SAFETY: As in `write_for_device`: read through a pointer, never
        // as a reference the device's writes could change under.
        unsafe { core::ptr::copy_nonoverlapping(self.buf.as_ptr(), dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }

    /// Unmaps the buffer and gives it back.
    pub(super) fn into_buf(mut self) -> KVec<u8> {
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
                bindings::ib_dma_unmap_single(self.dev.as_ptr(), self.addr, self.len, self.dir)
            };
        }
    }
}

/// A work request on the QP, owning its buffers until its completion.
pub(super) struct Posted {
    pub(super) kind: WrKind,
    /// Its first scatter/gather entry's buffer.
    pub(super) buf: Mapping,
    /// The buffers of its other entries, in order.
    pub(super) more: KVec<Mapping>,
    /// The MR a REG_MR or LOCAL_INV is about, the QP's until its
    /// completion.
    pub(super) mr: Option<Mr>,
    /// On the send queue: its place in the queue's order (from 1).
    pub(super) seq: u64,
    /// Whether its completion comes (`IB_SEND_SIGNALED`; receives always):
    /// an unsignalled request ends with the next completion of a later
    /// request on its queue.
    pub(super) signaled: bool,
}

impl Posted {
    /// A request without buffers about `mr` (REG_MR, LOCAL_INV: signalled).
    pub(super) fn about(kind: WrKind, mr: Mr, seq: u64) -> Self {
        Self {
            kind,
            buf: Mapping::none(),
            more: KVec::new(),
            mr: Some(mr),
            seq,
            signaled: true,
        }
    }
}
