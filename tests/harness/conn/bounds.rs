// SPDX-License-Identifier: GPL-2.0

//! What bounds what a peer can make the module hold ([`Bounds`], one per
//! core): the queues of the long-running work, the lists of what is due at
//! a deadline ([`PendingDreqs`]: swept by `deadlines`) and of the REPs
//! held for their peer ([`HeldReps`]: swept by `pacer`), and the counts of
//! what the bounds did.

use super::{
    endpoint::Endpoint,
    pace::{HeldReps, Peers},
};
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use kernel::{
    new_condvar, new_mutex,
    prelude::*,
    rbtree::RBTree,
    sync::{Arc, Completion, CondVar, Mutex},
    workqueue::QueueRef,
};

/// What is due at a deadline of [`PendingDreqs`].
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Due {
    /// The DREP of a peer's DREQ nobody answered ([`Core::answer_later`]).
    Drep,
    /// A passive end freed whatever its id's state ([`Core::free_at`]).
    Free,
}

/// The peers' DREQs nobody answered yet and the passive ends to free, each
/// with its deadline (ns, `ktime_get()`), and whether a sweeper runs (see
/// [`Core::answer_later`], [`Core::free_at`]). Its lock
/// (`conn::Core::pending`) is a leaf: taken under an endpoint's (in the
/// CM callbacks), nothing is taken under it.
pub(super) struct PendingDreqs {
    /// By (deadline, a sequence number): the earliest first.
    pub(super) list: RBTree<(i64, u64), (Arc<Endpoint>, Due)>,
    pub(super) next: u64,
    pub(super) sweeping: bool,
}

/// Passive ends' jobs queued and not yet begun, and how long each took
/// once begun (the QP, its moves, the REP): what a new REQ waits for.
pub(super) struct Jobs {
    pub(super) queued: AtomicU64,
    pub(super) times: Durations,
}

/// The long-running work's queue and its unload flag, the peers' DREQs
/// waiting for their deadline, and the counts of what the module did to
/// bound what a peer can make it hold (`stats`).
#[pin_data]
pub(super) struct Bounds {
    /// Runs the rping endpoints' steps (one queued per endpoint at most,
    /// by its completions): never flushed by device removal or unload,
    /// which instead make each step end by itself (its QP freed, its entry
    /// gone, `stop`).
    pub(super) pollers: QueueRef,
    /// Rping steps running or queued on `pollers`.
    pub(super) pollers_live: AtomicUsize,
    /// Runs the two sweepers (unanswered DREQs, held REPs), one item each
    /// at most: never behind the pollers, however many peers ping. Not
    /// flushed either: a sweeper returns once its list is empty or at
    /// `stop`.
    pub(super) sweepers: QueueRef,
    /// Tests only (`occupy_pollers`): work items on `pollers` waiting for
    /// this, completed by `release_pollers` or unload.
    #[pin]
    pub(super) occupied: Completion,
    /// Tests only: how many of those items run now.
    pub(super) occupiers: AtomicUsize,
    /// The peers' DREQs waiting for their deadline (see
    /// [`Core::answer_later`]): a leaf lock.
    #[pin]
    pub(super) pending: Mutex<PendingDreqs>,
    /// Wakes the sweeper of `pending` (an earlier deadline, unload).
    #[pin]
    pub(super) due_changed: CondVar,
    /// Set at unload (`Owner`): the work on `pollers` returns.
    pub(super) stop: AtomicBool,
    /// What the bounds did (`stats`).
    pub(super) counts: BoundCounts,
    /// The passive ends' jobs: what a new REQ waits behind.
    pub(super) jobs: Jobs,
    /// Each peer's REPs in flight, and the REPs held until it has room
    /// (see [`super::pace`]): a leaf lock.
    pub(super) peers: Peers,
    #[pin]
    pub(super) held: Mutex<HeldReps>,
    /// Wakes the sweeper of `held` (room for a held REP, unload).
    #[pin]
    pub(super) held_changed: CondVar,
}

/// The counts of what the module did to bound what a peer can make it
/// hold (`stats`).
pub(super) struct BoundCounts {
    /// DREQs the module answered at their deadline.
    pub(super) dreq_answered_late: AtomicU64,
    /// Records of freed passive ends dropped beyond their listener's
    /// `keep`.
    pub(super) records_pruned: AtomicU64,
    /// Scans of the table for records to prune ([`prune_freed`]).
    pub(super) prune_scans: AtomicU64,
    /// Passive ends freed at their deadline ([`Core::free_at`]).
    pub(super) ends_freed_late: AtomicU64,
    /// Passive ends freed as no RTU came within `handshake_max`.
    pub(super) handshakes_ended_late: AtomicU64,
    /// REQs rejected as their listener had `max_ends` passive ends.
    pub(super) ends_refused: AtomicU64,
    /// Passes of device removals over the table (`remove_all_on`): one
    /// for all of a device's ends, and one that finds none left.
    pub(super) removal_passes: AtomicU64,
}

impl BoundCounts {
    pub(super) const fn new() -> Self {
        Self {
            dreq_answered_late: AtomicU64::new(0),
            records_pruned: AtomicU64::new(0),
            prune_scans: AtomicU64::new(0),
            ends_freed_late: AtomicU64::new(0),
            handshakes_ended_late: AtomicU64::new(0),
            ends_refused: AtomicU64::new(0),
            removal_passes: AtomicU64::new(0),
        }
    }
}

/// How many of something, their total and longest time in ns (`stats`).
pub(super) struct Durations {
    pub(super) n: AtomicU64,
    pub(super) ns: AtomicU64,
    pub(super) ns_max: AtomicU64,
}

impl Durations {
    pub(super) const fn new() -> Self {
        Self {
            n: AtomicU64::new(0),
            ns: AtomicU64::new(0),
            ns_max: AtomicU64::new(0),
        }
    }

    pub(super) fn add(&self, ns: i64) {
        let ns = u64::try_from(ns).unwrap_or(0);
        self.n.fetch_add(1, Ordering::Relaxed);
        self.ns.fetch_add(ns, Ordering::Relaxed);
        self.ns_max.fetch_max(ns, Ordering::Relaxed);
    }
}

impl Bounds {
    pub(super) fn new(pollers: QueueRef, sweepers: QueueRef) -> impl PinInit<Self> {
        pin_init!(Self {
            pollers,
            pollers_live: AtomicUsize::new(0),
            sweepers,
            occupied <- Completion::new(),
            occupiers: AtomicUsize::new(0),
            pending <- new_mutex!(
                PendingDreqs {
                    list: RBTree::new(),
                    next: 0,
                    sweeping: false,
                },
                "conn::Core::pending"
            ),
            due_changed <- new_condvar!("conn::Core::due_changed"),
            stop: AtomicBool::new(false),
            counts: BoundCounts::new(),
            jobs: Jobs {
                queued: AtomicU64::new(0),
                times: Durations::new(),
            },
            peers: Peers::new(),
            held <- new_mutex!(HeldReps::new(), "conn::Core::held"),
            held_changed <- new_condvar!("conn::Core::held_changed"),
        })
    }
}
