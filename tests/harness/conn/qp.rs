// SPDX-License-Identifier: GPL-2.0

//! The QP of every connection: the kernel crate's RC QP, its size, and the
//! module's count of what it holds.

use super::stats::STATS;
use core::sync::atomic::Ordering;
use kernel::{
    prelude::*,
    rdma::{
        device::Device,
        verbs::{Completion, Cq, Pd, QpSize, RcQp, WrKind},
    },
    sync::Arc,
};

/// Every connection's QP: its queue sizes, MRs, and the module's name.
pub(super) fn qp_size() -> QpSize {
    QpSize {
        send: 64,
        recv: 64,
        max_mrs: 8,
        caller: kernel::c_str!("rcd_harness"),
    }
}

/// The kernel crate's [`RcQp`] with its share of the module's counts
/// (`STATS.bufs_mapped`, `STATS.mrs`) brought up to date after each call that
/// changes what the QP holds; the rest is the QP's own (`Deref`).
pub(crate) struct CountedQp {
    qp: RcQp,
    /// This QP's share of `STATS.bufs_mapped` and `STATS.mrs`.
    bufs: usize,
    mrs: usize,
}

impl CountedQp {
    /// A QP on a PD and a CQ of its own (the tests count each per
    /// connection).
    pub(crate) fn new(dev: &Device, size: QpSize) -> Result<Self> {
        let pd = Arc::new(Pd::new(dev, size.caller)?, GFP_KERNEL)?;
        let cq = Cq::new(dev, size.send + size.recv, size.caller)?;
        Ok(Self {
            qp: RcQp::new(pd, cq, size)?,
            bufs: 0,
            mrs: 0,
        })
    }

    /// Brings this QP's share of the counts up to date, and returns `r`.
    pub(super) fn counted<R>(&mut self, r: R) -> R {
        let (bufs, mrs) = (self.qp.bufs_mapped(), self.qp.mrs_allocated());
        // Adds the difference (wrapping: a decrease is a wrapped negative).
        STATS
            .bufs_mapped
            .fetch_add(bufs.wrapping_sub(self.bufs), Ordering::Relaxed);
        STATS
            .mrs
            .fetch_add(mrs.wrapping_sub(self.mrs), Ordering::Relaxed);
        (self.bufs, self.mrs) = (bufs, mrs);
        r
    }

    pub(crate) fn post_recv(&mut self, buf: KVec<u8>) -> Result {
        let r = self.qp.post_recv(buf);
        self.counted(r)
    }

    pub(crate) fn post_send(&mut self, buf: KVec<u8>) -> Result {
        let r = self.qp.post_send(buf);
        self.counted(r)
    }

    pub(crate) fn post_rdma(
        &mut self,
        kind: WrKind,
        buf: KVec<u8>,
        addr: u64,
        rkey: u32,
    ) -> Result {
        let r = self.qp.post_rdma(kind, buf, addr, rkey);
        self.counted(r)
    }

    pub(crate) fn reg_mr(&mut self, buf: KVec<u8>) -> Result<usize> {
        let r = self.qp.reg_mr(buf);
        self.counted(r)
    }

    pub(crate) fn invalidate_mr(&mut self, idx: usize) -> Result {
        let r = self.qp.invalidate_mr(idx);
        self.counted(r)
    }

    pub(crate) fn poll_one(&mut self) -> Result<Option<Completion>> {
        let r = self.qp.poll_one();
        self.counted(r)
    }

    pub(crate) fn drain(&mut self, wait_ms: u32, f: impl FnMut(Completion)) -> u32 {
        let r = self.qp.drain(wait_ms, f);
        self.counted(r)
    }
}

impl core::ops::Deref for CountedQp {
    type Target = RcQp;

    fn deref(&self) -> &RcQp {
        &self.qp
    }
}

impl Drop for CountedQp {
    fn drop(&mut self) {
        // The QP's drop unmaps and frees what it still holds.
        STATS.bufs_mapped.fetch_sub(self.bufs, Ordering::Relaxed);
        STATS.mrs.fetch_sub(self.mrs, Ordering::Relaxed);
    }
}
