// SPDX-License-Identifier: GPL-2.0

//! The pace of the passive ends' REPs to each peer (a storm of REQs).
//!
//! A peer answers each REP (with its RTU) on its CM's single workqueue,
//! and a user-space peer (rdma_cm, `cmtime`) only once its program has
//! taken the REP's event: REPs sent faster than that wait there until their
//! timeout (4,096 ms for rdma_cm's peers) sends them again, more work for
//! the same workqueue. So a peer with [`REP_WINDOW`] REPs in flight (sent,
//! the handshake not over: no RTU, REJ, DREQ or REP timeout yet) gets its
//! next REPs only as its handshakes end: the job that readied the QP puts
//! the REP on a list (`Core::hold_rep` (in `pacer`)) instead of sending it, and a
//! sweeper sends it once the peer has room again.
//!
//! What no peer can do with it (one window for all peers, reverted, could):
//! - slow another peer: the job queue never waits (a held REP is on the
//!   list, not in a job), and each peer has its own window (peers are told
//!   apart by the source address of their `cma_hdr`, in [`PEER_BUCKETS`]
//!   buckets; REQs without one, to a listener without `cma=1`, are never
//!   held);
//! - be held back by its own unanswered REPs for long: a peer none of whose
//!   handshakes ended in the last [`REP_STALL_MS`] is not answering, and its
//!   REPs go at once, as before; and none is held more than
//!   [`REP_HOLD_MAX_MS`].

use super::endpoint::Endpoint;
use core::sync::atomic::{AtomicU64, Ordering};
use kernel::{rbtree::RBTree, sync::Arc};

/// REPs one peer has in flight from which its next ones are held back,
/// at least: the window grows with the peer's pace (see [`REP_BUDGET_MS`]).
pub(super) const REP_WINDOW: u64 = 32;

/// How long the last REP of a full window should wait for its answer at
/// the peer's measured pace: half of what an rdma_cm peer gives a REP
/// before the CM sends it again (4,096 ms). The window is this over the
/// mean time between two of the peer's answers, and never under
/// [`REP_WINDOW`]: a fixed 32 held a peer that answers 2,000 REPs in a
/// second to 32 at a time (plain kernel, storm of 2,000: the connect step
/// 1,752 ms against `cmtime -b`'s 892 ms, 1,957 REPs held), where a slow
/// peer (debug kernel, a user-space peer answering tens a second) still
/// gets no more than it answers in about 2 s.
pub(super) const REP_BUDGET_MS: u64 = 2048;

/// A peer whose handshakes have not ended for this long is not answering:
/// its REPs go at once (holding them gains nothing).
pub(super) const REP_STALL_MS: i64 = 1000;

/// The longest a REP is held, whatever the peer does.
pub(super) const REP_HOLD_MAX_MS: i64 = 4000;

/// Peers' buckets: two peers in one bucket share a window.
pub(super) const PEER_BUCKETS: usize = 64;

/// The bucket of a peer's IPv4 address (its `cma_hdr`'s source).
pub(super) fn peer_bucket(addr: [u8; 4]) -> usize {
    // The top 6 bits of a multiplicative hash: 0..64.
    (u32::from_be_bytes(addr).wrapping_mul(0x9e37_79b9) >> 26) as usize
}

/// Each bucket's REPs in flight and when one of its handshakes last ended.
pub(super) struct Peers {
    pub(super) out: [AtomicU64; PEER_BUCKETS],
    pub(super) done_ns: [AtomicU64; PEER_BUCKETS],
    /// The mean time between two handshakes' ends (ns, a moving average
    /// over about 8; 0 before two), pauses of [`REP_STALL_MS`] left out.
    pub(super) gap_ns: [AtomicU64; PEER_BUCKETS],
    /// The widest window any peer had (`stats`: `rep_window_max`).
    pub(super) window_max: AtomicU64,
    /// REPs held back so far (`stats`: `reps_held_total`).
    pub(super) holds: AtomicU64,
    /// Held REPs let go as their peer made room by answering, seen at the
    /// sweeper's wake-up by that answer (`reps_let_go_answered`), and at
    /// its timer: their peer stopped answering, they were held the
    /// longest, or the room was found only then (`reps_let_go_timed`).
    pub(super) let_go_answered: AtomicU64,
    pub(super) let_go_timed: AtomicU64,
}

impl Peers {
    pub(super) const fn new() -> Self {
        Self {
            out: [const { AtomicU64::new(0) }; PEER_BUCKETS],
            done_ns: [const { AtomicU64::new(0) }; PEER_BUCKETS],
            gap_ns: [const { AtomicU64::new(0) }; PEER_BUCKETS],
            window_max: AtomicU64::new(REP_WINDOW),
            holds: AtomicU64::new(0),
            let_go_answered: AtomicU64::new(0),
            let_go_timed: AtomicU64::new(0),
        }
    }

    /// A REP of bucket `b` is sent.
    pub(super) fn rep_sent(&self, b: usize) {
        if let Some(out) = self.out.get(b) {
            out.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A handshake of bucket `b` whose REP was sent is over.
    pub(super) fn rep_done(&self, b: usize) {
        if let (Some(out), Some(done), Some(gap)) =
            (self.out.get(b), self.done_ns.get(b), self.gap_ns.get(b))
        {
            out.fetch_sub(1, Ordering::Relaxed);
            let now = now_ns();
            let last = done.swap(now, Ordering::Relaxed);
            let d = now.saturating_sub(last);
            // Racy updates lose a sample at worst.
            if last != 0 && d < (REP_STALL_MS as u64) * 1_000_000 {
                let g = gap.load(Ordering::Relaxed);
                let g = if g == 0 { d } else { g - g / 8 + d / 8 };
                gap.store(g, Ordering::Relaxed);
            }
        }
    }

    /// Bucket `b`'s window: [`REP_BUDGET_MS`] over its mean gap between
    /// answers, at least [`REP_WINDOW`].
    fn window(&self, b: usize) -> u64 {
        let g = self.gap_ns.get(b).map_or(0, |g| g.load(Ordering::Relaxed));
        let w = match g {
            0 => REP_WINDOW,
            g => (REP_BUDGET_MS * 1_000_000 / g).max(REP_WINDOW),
        };
        self.window_max.fetch_max(w, Ordering::Relaxed);
        w
    }

    /// REPs of bucket `b` that may go now: the window's room, or every one
    /// if the peer is not answering (none of its handshakes ended for
    /// [`REP_STALL_MS`]).
    pub(super) fn room(&self, b: usize, now: u64) -> u64 {
        let (Some(out), Some(done)) = (self.out.get(b), self.done_ns.get(b)) else {
            return u64::MAX;
        };
        let done = done.load(Ordering::Relaxed);
        if now.saturating_sub(done) >= (REP_STALL_MS as u64) * 1_000_000 {
            return u64::MAX;
        }
        self.window(b).saturating_sub(out.load(Ordering::Relaxed))
    }

    /// REPs in flight, all buckets (`stats`: `reps_in_flight`).
    pub(super) fn in_flight(&self) -> u64 {
        self.out.iter().map(|o| o.load(Ordering::Relaxed)).sum()
    }
}

/// The monotonic clock in ns, unsigned.
pub(super) fn now_ns() -> u64 {
    u64::try_from(super::now_ns()).unwrap_or(0)
}

/// A passive end whose QP is ready (RTR) and whose REP waits for room.
pub(super) struct HeldRep {
    pub(super) ep: Arc<Endpoint>,
    pub(super) bucket: usize,
    pub(super) qp_num: u32,
    pub(super) depth: u8,
    pub(super) resources: u8,
    /// When its REQ came (ns): the REP's latency (`rep_latency_us_*`).
    pub(super) t_req: i64,
}

/// The held REPs (see `Core::hold_rep` (in `pacer`)), and whether a sweeper runs. Its
/// lock (`conn::Core::held`) is a leaf: nothing is taken under it (it is
/// taken under an endpoint's when a handshake ends, [`Core::rep_done`]).
pub(super) struct HeldReps {
    /// By (when held, a sequence number): each peer's oldest first.
    pub(super) list: RBTree<(i64, u64), HeldRep>,
    /// How many of each bucket are on the list.
    pub(super) per: [u32; PEER_BUCKETS],
    pub(super) next: u64,
    pub(super) sweeping: bool,
}

impl HeldReps {
    pub(super) fn new() -> Self {
        Self {
            list: RBTree::new(),
            per: [0; PEER_BUCKETS],
            next: 0,
            sweeping: false,
        }
    }
}
