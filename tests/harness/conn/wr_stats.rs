// SPDX-License-Identifier: GPL-2.0

//! The record of an endpoint's work requests ([`WrStats`]): how many were
//! posted, how each came back, and what the successful ones carried
//! (shown by `conns`: see `reports`).

use core::iter::once;
use kernel::prelude::*;
use kernel::rdma::verbs::{Completion, WcStatus, WrKind};

/// The work requests of an endpoint: how many were posted, how each came
/// back, and what the successful ones carried.
///
/// Every request posted comes back once: `posted == completed_ok + flushed
/// + completed_err + dropped + ` those still outstanding.
#[derive(Default)]
pub(super) struct WrStats {
    pub(super) posted: u64,
    pub(super) completed_ok: u64,
    pub(super) flushed: u64,
    pub(super) completed_err: u64,
    /// Still posted when the QP was freed, after its flush was waited for
    /// (their buffers freed after the QP's destroy).
    pub(super) dropped: u64,
    /// Allocated by the first `post`: most endpoints never carry data.
    pub(super) data: Option<KBox<DataStats>>,
}

/// The payloads of an endpoint's successful receives and SENDs.
#[derive(Default)]
pub(super) struct DataStats {
    pub(super) rx_msgs: u64,
    pub(super) rx_bytes: u64,
    /// FNV-1a (32 bits) over every byte received, in order.
    pub(super) rx_sum: u32,
    /// The first bytes of the last message received.
    pub(super) rx_last: [u8; 16],
    pub(super) rx_last_len: usize,
    pub(super) tx_msgs: u64,
    pub(super) tx_bytes: u64,
    /// FNV-1a over every byte sent (completed with success), in order.
    pub(super) tx_sum: u32,
    /// MR buffers handed back by their LOCAL_INV, and the last one's
    /// FNV-1a and first bytes (what the peer left in it).
    pub(super) mr_back: u64,
    pub(super) mr_sum: u32,
    pub(super) mr_last: [u8; 16],
    /// The last buffer handed back (outside rping), kept: `mr_now` reads
    /// its first bytes again, so that a test sees whether anything wrote
    /// into it after it came back.
    pub(super) mr_kept: Option<KVec<u8>>,
}

pub(super) const FNV_OFFSET: u32 = 0x811c_9dc5;

/// FNV-1a, continued from `h` over `bytes`.
pub(super) fn fnv1a(mut h: u32, bytes: &[u8]) -> u32 {
    for b in bytes {
        h = (h ^ u32::from(*b)).wrapping_mul(0x0100_0193);
    }
    h
}

impl WrStats {
    /// Counts a completion and what it carried.
    pub(super) fn add(&mut self, c: &Completion) {
        match c.status {
            WcStatus::Success => self.completed_ok += 1,
            WcStatus::WrFlushErr => self.flushed += 1,
            _ => self.completed_err += 1,
        }
        let (Some(d), WcStatus::Success) = (self.data.as_mut(), c.status) else {
            return;
        };
        match c.kind {
            // A READ brings data in as a receive does; a WRITE sends it.
            Some(WrKind::Recv | WrKind::RdmaRead) => {
                if d.rx_msgs == 0 {
                    d.rx_sum = FNV_OFFSET;
                }
                d.rx_msgs += 1;
                // The message fills the buffers in order, up to its length.
                let mut left = c.byte_len as usize;
                for (i, b) in Iterator::chain(once(&c.buf), c.more.iter()).enumerate() {
                    let got = &b[..left.min(b.len())];
                    left -= got.len();
                    d.rx_bytes += got.len() as u64;
                    d.rx_sum = fnv1a(d.rx_sum, got);
                    if i == 0 {
                        let n = got.len().min(d.rx_last.len());
                        d.rx_last[..n].copy_from_slice(&got[..n]);
                        d.rx_last_len = n;
                    }
                }
            }
            Some(WrKind::LocalInv) => {
                d.mr_back += 1;
                d.mr_sum = fnv1a(FNV_OFFSET, &c.buf);
                let n = c.buf.len().min(d.mr_last.len());
                d.mr_last = [0; 16];
                d.mr_last[..n].copy_from_slice(&c.buf[..n]);
            }
            Some(WrKind::RegMr) => {}
            Some(WrKind::Send | WrKind::RdmaWrite) => {
                if d.tx_msgs == 0 {
                    d.tx_sum = FNV_OFFSET;
                }
                d.tx_msgs += 1;
                for b in Iterator::chain(once(&c.buf), c.more.iter()) {
                    d.tx_bytes += b.len() as u64;
                    d.tx_sum = fnv1a(d.tx_sum, b);
                }
            }
            None => {}
        }
    }

    /// Keeps `buf`, the buffer a LOCAL_INV handed back (see `mr_kept`).
    pub(super) fn keep_mr(&mut self, buf: KVec<u8>) {
        if let Some(d) = self.data.as_mut() {
            d.mr_kept = Some(buf);
        }
    }
}
