// SPDX-License-Identifier: GPL-2.0

//! The QP of every connection: the kernel crate's RC QP, its size, and the
//! module's count of what it holds.

use super::stats::STATS;
use core::sync::atomic::Ordering;
use kernel::{
    prelude::*,
    rdma::{
        device::Device,
        verbs::{Completion, Cq, Mr, MrState, Pd, QpAttr, QpSize, RcQp, WrKind},
    },
    sync::Arc,
    time::{Instant, Monotonic},
};

/// Every connection's QP: its queue sizes and the module's name.
pub(super) fn qp_size() -> QpSize {
    QpSize {
        send: 64,
        recv: 64,
        sge: 4,
        caller: kernel::c_str!("rcd_harness"),
    }
}

/// The most MRs a connection registers at once (`ENOSPC` beyond).
const MAX_MRS: usize = 8;

/// The most bytes one MR of a connection registers (`EMSGSIZE` beyond):
/// three pages, so that a registration spans pages.
pub(crate) const MR_BYTES: usize = 3 * kernel::page::PAGE_SIZE;

/// Which MR a registration uses (`mr NUM reg|reg-at IDX|reg-foreign`).
pub(crate) enum RegWith {
    /// A free MR of the connection's, or a new one.
    Next,
    /// MR `idx` of the connection's, whatever its state (the kernel crate
    /// checks it).
    At(usize),
    /// A new MR of a new PD of the QP's device, which the QP must refuse.
    Foreign,
}

/// One of a connection's MRs, by the index the tests and rping use.
enum MrSlot {
    /// None yet (or its allocation failed): made on use.
    Gone,
    /// The connection's.
    Held(Mr),
    /// In the QP, its REG_MR or LOCAL_INV posted: the raw MR, to find its
    /// slot when the completion hands it back, and what was posted.
    Posted(usize, WrKind),
}

/// The kernel crate's [`RcQp`] with the connection's MRs (at most
/// [`MAX_MRS`], reused) and its share of the module's counts
/// (`STATS.bufs_mapped`, `STATS.mrs`) brought up to date after each call that
/// changes what the QP holds; the rest is the QP's own (`Deref`).
pub(crate) struct CountedQp {
    qp: RcQp,
    pd: Arc<Pd>,
    mrs: KVec<MrSlot>,
    /// The index of the MR the last completion taken was about.
    taken_mr: Option<usize>,
    /// This QP's share of `STATS.bufs_mapped` and `STATS.mrs`.
    bufs: usize,
    nmrs: usize,
}

impl CountedQp {
    /// A QP on a PD and a CQ of its own (the tests count each per
    /// connection).
    pub(crate) fn new(dev: &Device, size: QpSize) -> Result<Self> {
        let pd = Arc::new(Pd::new(dev, size.caller)?, GFP_KERNEL)?;
        // Two entries more for the QP's drain (`RcQp::new`).
        let cq = Cq::new(dev, size.send + size.recv + 2, size.caller)?;
        Ok(Self {
            qp: RcQp::new(pd.clone(), cq, size)?,
            pd,
            mrs: KVec::new(),
            taken_mr: None,
            bufs: 0,
            nmrs: 0,
        })
    }

    /// Brings this QP's share of the counts up to date, and returns `r`.
    pub(super) fn counted<R>(&mut self, r: R) -> R {
        let held = |s: &&MrSlot| matches!(s, MrSlot::Held(m) if !m.is_empty());
        let bufs = self.qp.bufs_mapped() + self.mrs.iter().filter(held).count();
        let mrs = self
            .mrs
            .iter()
            .filter(|s| !matches!(s, MrSlot::Gone))
            .count();
        // Adds the difference (wrapping: a decrease is a wrapped negative).
        STATS
            .bufs_mapped
            .fetch_add(bufs.wrapping_sub(self.bufs), Ordering::Relaxed);
        STATS
            .mrs
            .fetch_add(mrs.wrapping_sub(self.nmrs), Ordering::Relaxed);
        (self.bufs, self.nmrs) = (bufs, mrs);
        r
    }

    pub(crate) fn post_recv(&mut self, buf: KVec<u8>) -> Result {
        self.post_recv_sg(buf, KVec::new())
    }

    pub(crate) fn post_recv_sg(&mut self, buf: KVec<u8>, more: KVec<KVec<u8>>) -> Result {
        let r = self.qp.post_recv_sg(buf, more);
        self.counted(r)
    }

    pub(crate) fn post_send(&mut self, buf: KVec<u8>) -> Result {
        self.post_send_sg(buf, KVec::new(), true)
    }

    pub(crate) fn post_send_sg(
        &mut self,
        buf: KVec<u8>,
        more: KVec<KVec<u8>>,
        sig: bool,
    ) -> Result {
        let r = self.qp.post_send_sg(buf, more, sig);
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

    /// Modifies the QP as `attr` says.
    pub(crate) fn modify(&mut self, attr: &QpAttr) -> Result {
        self.qp.modify(attr)
    }

    /// Registers `buf` with a free MR of the connection's (one made if
    /// none is free: `ENOSPC` beyond [`MAX_MRS`]); returns the MR's index.
    pub(crate) fn reg_mr(&mut self, buf: KVec<u8>) -> Result<usize> {
        let r = self.reg_mr_next(buf);
        self.counted(r)
    }

    /// Registers `buf` with the MR `with` names.
    pub(crate) fn reg_mr_with(&mut self, with: RegWith, buf: KVec<u8>) -> Result {
        let r = match with {
            RegWith::Next => self.reg_mr_next(buf).map(|_| ()),
            RegWith::At(idx) => self
                .take_held(idx, |_| true)
                .and_then(|mr| self.post_mr(idx, mr, Some(buf))),
            RegWith::Foreign => self.reg_mr_foreign(buf),
        };
        self.counted(r)
    }

    fn reg_mr_next(&mut self, buf: KVec<u8>) -> Result<usize> {
        if buf.is_empty() || buf.len() > MR_BYTES {
            return Err(EMSGSIZE);
        }
        let free = |s: &MrSlot| matches!(s, MrSlot::Held(m) if m.state() == MrState::Free);
        let gone = |s: &MrSlot| matches!(s, MrSlot::Gone);
        let slot = self.mrs.iter().position(free);
        let idx = match slot.or_else(|| self.mrs.iter().position(gone)) {
            Some(i) => i,
            None if self.mrs.len() < MAX_MRS => {
                self.mrs.push(MrSlot::Gone, GFP_KERNEL)?;
                self.mrs.len() - 1
            }
            None => return Err(ENOSPC),
        };
        let mr = match core::mem::replace(&mut self.mrs[idx], MrSlot::Gone) {
            MrSlot::Held(m) => m,
            _ => Mr::new(&self.pd, MR_BYTES)?,
        };
        self.post_mr(idx, mr, Some(buf))?;
        Ok(idx)
    }

    /// Registers `buf` with a new MR of a new PD of the QP's device; the
    /// MR, given back with the error, is freed here.
    fn reg_mr_foreign(&mut self, buf: KVec<u8>) -> Result {
        let pd = Arc::new(Pd::new(self.qp.device(), qp_size().caller)?, GFP_KERNEL)?;
        self.qp
            .reg_mr(Mr::new(&pd, MR_BYTES)?, buf)
            .map_err(|e| e.error)
    }

    /// Invalidates MR `idx` (`EINVAL` unless it is valid): its buffer comes
    /// back with the completion.
    pub(crate) fn invalidate_mr(&mut self, idx: usize) -> Result {
        let r = self
            .take_held(idx, |m| m.state() == MrState::Valid)
            .and_then(|mr| self.post_mr(idx, mr, None));
        self.counted(r)
    }

    /// Takes MR `idx` out of its slot if the connection holds it and `ok`
    /// accepts it (`EINVAL` otherwise).
    fn take_held(&mut self, idx: usize, ok: impl Fn(&Mr) -> bool) -> Result<Mr> {
        let slot = self.mrs.get_mut(idx).ok_or(EINVAL)?;
        if !matches!(slot, MrSlot::Held(m) if ok(m)) {
            return Err(EINVAL);
        }
        match core::mem::replace(slot, MrSlot::Gone) {
            MrSlot::Held(mr) => Ok(mr),
            _ => Err(EINVAL),
        }
    }

    /// Posts `mr`'s REG_MR of `buf`, or its LOCAL_INV (`None`), marking
    /// slot `idx` posted; the QP gives the MR back into the slot if it
    /// refuses it.
    fn post_mr(&mut self, idx: usize, mr: Mr, buf: Option<KVec<u8>>) -> Result {
        let kind = if buf.is_some() {
            WrKind::RegMr
        } else {
            WrKind::LocalInv
        };
        self.mrs[idx] = MrSlot::Posted(mr.as_raw() as usize, kind);
        let r = match buf {
            Some(buf) => self.qp.reg_mr(mr, buf),
            None => self.qp.invalidate_mr(mr),
        };
        r.map_err(|e| {
            self.mrs[idx] = MrSlot::Held(e.mr);
            e.error
        })
    }

    /// MR `idx`, if the connection holds it (not posted).
    pub(crate) fn mr(&self, idx: usize) -> Option<&Mr> {
        match self.mrs.get(idx)? {
            MrSlot::Held(m) => Some(m),
            _ => None,
        }
    }

    /// Each MR's index, and the MR (`Err`: in the QP, with what was posted).
    pub(crate) fn mrs(&self) -> impl Iterator<Item = (usize, Result<&Mr, WrKind>)> + '_ {
        self.mrs.iter().enumerate().filter_map(|(i, s)| match s {
            MrSlot::Gone => None,
            MrSlot::Held(m) => Some((i, Ok(m))),
            MrSlot::Posted(_, k) => Some((i, Err(*k))),
        })
    }

    /// The index of the MR the last completion taken was about.
    pub(crate) fn taken_mr(&self) -> Option<usize> {
        self.taken_mr
    }

    pub(crate) fn poll_one(&mut self) -> Result<Option<Completion>> {
        let mut r = self.qp.poll_one();
        self.taken_mr = None;
        if let Ok(Some(c)) = &mut r {
            self.taken_mr = mr_back(&mut self.mrs, c);
        }
        self.counted(r)
    }

    /// Ends every posted work request before the QP is freed, waiting at
    /// most `wait_ms` in all (less if a signal is pending), not as long as
    /// `RcQp::drain()` (`ib_drain_qp()`) may: the harness frees QPs in CM
    /// callbacks, which hold up the CM's one workqueue. Moves the QP to the
    /// error state if anything is posted, so that the device flushes it,
    /// and hands each completion to `f`. Returns how many requests did not
    /// come back (their buffers and MRs are freed with the QP).
    pub(crate) fn drain(&mut self, wait_ms: u32, mut f: impl FnMut(Completion)) -> u32 {
        if self.qp.outstanding_all() > 0 {
            // Failing, the QP is already in error or gone with the device:
            // what comes back is taken below, the rest is counted.
            let _ = self.qp.qp().to_error();
        }
        let start = Instant::<Monotonic>::now();
        loop {
            while let Ok(Some(c)) = self.poll_one() {
                f(c);
            }
            let left = self.qp.outstanding_all();
            let rest = i64::from(wait_ms).saturating_sub(start.elapsed().as_millis());
            let ms = u32::try_from(rest).unwrap_or(u32::MAX);
            if left == 0 || rest <= 0 || !self.qp.wait_completion(ms) {
                while let Ok(Some(c)) = self.poll_one() {
                    f(c);
                }
                self.taken_mr = None;
                return self.qp.outstanding_all();
            }
        }
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
        STATS.mrs.fetch_sub(self.nmrs, Ordering::Relaxed);
    }
}

/// Puts the MR a completion hands back in its slot; returns the index.
fn mr_back(mrs: &mut [MrSlot], c: &mut Completion) -> Option<usize> {
    let mr = c.mr.take()?;
    let raw = mr.as_raw() as usize;
    let i = mrs
        .iter()
        .position(|s| matches!(s, MrSlot::Posted(r, _) if *r == raw))?;
    mrs[i] = MrSlot::Held(mr);
    Some(i)
}
