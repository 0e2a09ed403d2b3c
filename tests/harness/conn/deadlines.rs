// SPDX-License-Identifier: GPL-2.0

//! What is due at a deadline whatever a peer does: the DREP of a peer's
//! DREQ nobody answered, the freeing of a passive end whose disconnect
//! began; their list and its sweeper.

use super::{
    bounds::Due,
    endpoint::{Endpoint, EndpointState, EventKind, Role},
    now_ns,
    table::Core,
};
use crate::{
    cm::{self, Message},
    product,
};
use core::sync::atomic::Ordering;
use kernel::{
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation},
    sync::Arc,
    time::msecs_to_jiffies,
};

impl Core {
    /// Answers `ep`'s DREQ at `due` unless someone does first: queued for
    /// the sweeper, which is started if none runs. On an error (no memory)
    /// the caller answers at once.
    ///
    /// The bound: an end in DREQ_RCVD holds its id and QP for its
    /// listener's `drep_after` (30 s unless set), then its DREP (sent by
    /// the sweeper as the deadline passes) puts it in timewait, whose exit
    /// frees both. The list holds
    /// one entry (a tree node, about 64 bytes) per such end.
    pub(super) fn answer_later(self: &Arc<Self>, ep: &Arc<Endpoint>, due: i64) -> Result {
        self.defer(ep, due, Due::Drep).map(|_| ())
    }

    /// Frees passive end `ep` (its state `st`, locked) `after` ms from now
    /// if nothing else did first: from its callbacks once its disconnect
    /// began, the first of them only. Without memory for the list the
    /// peer's timers bound it, as without this.
    ///
    /// The bound: a passive end whose peer sent a DREQ is freed at most
    /// its listener's `drep_after` plus `free_after` (60 s unless set) later,
    /// one whose disconnect ended another way `free_after` later, whatever
    /// timewait its peer asked for.
    pub(super) fn free_at(
        self: &Arc<Self>,
        ep: &Arc<Endpoint>,
        st: &mut EndpointState,
        after: i64,
    ) {
        if ep.role != Role::Passive || st.deadline.is_some() {
            return;
        }
        let due = now_ns().saturating_add(after.saturating_mul(1_000_000));
        if let Ok(key) = self.defer(ep, due, Due::Free) {
            st.deadline = Some(key);
        }
    }

    /// Takes a passive end's deadline (its state `st`, locked) off the
    /// list: its handshake ended with the RTU (the deadline of its
    /// disconnect can be set when that begins), or the end is freed.
    pub(super) fn cancel_deadline(&self, st: &mut EndpointState) {
        if let Some(key) = st.deadline.take() {
            // Not the last reference (the caller's is alive): the endpoint's
            // lock is held, the list's is a leaf.
            drop(self.bounds.pending.lock().list.remove(&key));
        }
    }

    /// Puts `ep` on the list for `what` at `due`, and starts the sweeper if
    /// none runs, or wakes it if `due` is now the first deadline: the
    /// entry's key, or the error (no memory) with nothing on the list.
    fn defer(self: &Arc<Self>, ep: &Arc<Endpoint>, due: i64, what: Due) -> Result<(i64, u64)> {
        // Allocated before the lock.
        let node = RBTreeNodeReservation::new(GFP_KERNEL)?;
        let mut p = self.bounds.pending.lock();
        let key = (due, p.next);
        p.next = p.next.wrapping_add(1);
        p.list.insert(node.into_node(key, (ep.clone(), what)));
        if p.sweeping {
            if p.list.keys().next() == Some(&key) {
                self.bounds.due_changed.notify_all();
            }
        } else {
            let core = self.clone();
            // On `sweepers`: a sweep may send DREPs for the whole table, and
            // device removal need not wait for it (it takes the table's
            // lock to reach an id, and removal takes ids out under it); nor
            // does it wait behind the pollers.
            if let Err(e) = self.bounds.sweepers.spawn(move || sweep_dreqs(core)) {
                let ep = p.list.remove(&key);
                drop(p);
                drop(ep);
                return Err(e);
            }
            p.sweeping = true;
        }
        Ok(key)
    }

    /// Takes `ep`'s unanswered DREQ and its deadline, if any, off the
    /// sweeper's list: an end that is closed or pruned is nobody's to
    /// answer (destroying its id in DREQ_RCVD sends the DREP), and the
    /// list's reference would keep its record, and its QP, alive until the
    /// deadline.
    pub(super) fn forget_pending(&self, ep: &Endpoint) {
        // Its DREQ to answer and its deadline to be freed: two at most.
        let mut gone: [Option<(Arc<Endpoint>, Due)>; 2] = Default::default();
        {
            let mut p = self.bounds.pending.lock();
            let mut keys = [None; 2];
            let mine = p.list.iter().filter(|(_, (e, _))| core::ptr::eq(&**e, ep));
            for (slot, (k, _)) in keys.iter_mut().zip(mine) {
                *slot = Some(*k);
            }
            for (slot, k) in gone.iter_mut().zip(keys.iter()) {
                *slot = k.and_then(|k| p.list.remove(&k));
            }
        }
        // Not the last references (the caller's is alive): dropped without
        // the list's lock all the same.
        drop(gone);
    }

    /// Forgets the DREQs to answer and the deadlines of every endpoint on
    /// device `index` (its removal destroyed their ids and QPs): one pass
    /// over the list, or one entry per pass without memory for the keys.
    pub(super) fn forget_pending_on(&self, index: u32) {
        loop {
            let mut gone = KVec::new();
            {
                let mut p = self.bounds.pending.lock();
                let on = |e: &Arc<Endpoint>| e.dev_index == index;
                let n = p.list.values().filter(|(e, _)| on(e)).count();
                if n == 0 {
                    return;
                }
                let mut keys = KVec::new();
                let room =
                    keys.reserve(n, GFP_KERNEL).is_ok() && gone.reserve(n, GFP_KERNEL).is_ok();
                for (k, _) in p.list.iter().filter(|(_, (e, _))| on(e)) {
                    // Within the `n` reserved: no allocation, no failure.
                    let _ = keys.push(*k, GFP_KERNEL);
                    if !room {
                        break;
                    }
                }
                if keys.is_empty() {
                    // Not even one key's memory: what is left goes at its
                    // deadline, as before.
                    return;
                }
                for k in keys.iter() {
                    if let Some(item) = p.list.remove(k) {
                        // Failing (one key per pass, nothing reserved), the
                        // item is dropped under the lock: not the last
                        // reference, the table's entry keeps the endpoint.
                        let _ = gone.push(item, GFP_KERNEL);
                    }
                }
            }
            // The endpoints' references dropped without the list's lock.
            drop(gone);
        }
    }
}

/// The sweeper of what is due ([`PendingDreqs`]): answers and frees each
/// entry at its deadline, waiting in between on `due_changed` until the
/// first deadline (no polling: [`Core::defer`] wakes it for an earlier
/// one, unload for `stop`); returns once the list is empty, or at unload.
fn sweep_dreqs(core: Arc<Core>) {
    let bounds = &core.bounds;
    let mut p = bounds.pending.lock();
    loop {
        // Read under the lock `Owner` takes to wake us after setting it:
        // either seen here, or we wait before its wake-up.
        if bounds.stop.load(Ordering::Relaxed) {
            p.sweeping = false;
            let list = core::mem::replace(&mut p.list, RBTree::new());
            drop(p);
            // Endpoints dropped without the lock.
            drop(list);
            return;
        }
        let Some(first) = p.list.keys().next().copied() else {
            p.sweeping = false;
            return;
        };
        let now = now_ns();
        if first.0 <= now {
            let due = p.list.remove(&first);
            drop(p);
            if let Some((ep, what)) = due {
                match what {
                    Due::Drep => ep.answer_late_dreq(&core),
                    Due::Free => ep.free_late(&core),
                }
            }
            p = bounds.pending.lock();
            continue;
        }
        // Until the first deadline (rounded up to a jiffy), an earlier one
        // or unload; spurious wake-ups only cost a look.
        let ms = (first.0 - now).saturating_add(999_999) / 1_000_000;
        let ms = u32::try_from(ms).unwrap_or(u32::MAX);
        let _ = bounds
            .due_changed
            .wait_interruptible_timeout(&mut p, msecs_to_jiffies(ms));
    }
}

impl Endpoint {
    /// A passive end's deadline passed ([`Core::free_at`]): freed if its id
    /// is still held, its disconnect not over.
    fn free_late(self: &Arc<Self>, core: &Core) {
        self.st.lock().deadline = None;
        let held = core.with_own_cm(self.num, self, |cm| Ok(cm.state()));
        let count = match held {
            Ok(cm::State::DreqSent | cm::State::DreqRcvd | cm::State::Timewait) => {
                &core.bounds.counts.ends_freed_late
            }
            // No RTU within `handshake_max` ([`Endpoint::rep_went_out`]).
            Ok(cm::State::RepSent | cm::State::MraRepRcvd) => {
                &core.bounds.counts.handshakes_ended_late
            }
            _ => return,
        };
        count.fetch_add(1, Ordering::Relaxed);
        self.free_id(core);
    }

    /// The deadline of a peer's DREQ passed: a DREP, if the id is still in
    /// DREQ_RCVD (nobody answered, nothing freed it).
    fn answer_late_dreq(self: &Arc<Self>, core: &Core) {
        let mut over = None;
        let _ = core.with_own_cm(self.num, self, |cm| {
            let mut st = self.st.lock();
            if cm.state() != cm::State::DreqRcvd {
                return Ok(());
            }
            let res = product::send(Message::Drep, cm, &[]);
            core.count(Message::Drep, res.is_ok());
            if res.is_ok() {
                core.bounds
                    .counts
                    .dreq_answered_late
                    .fetch_add(1, Ordering::Relaxed);
            }
            let status = res.err().map_or(0, |e| e.to_errno());
            st.record(EventKind::DrepSent, status, &[]);
            over = st.connection_over(self.role);
            Ok(())
        });
        if let Some(verbs) = over {
            self.release_qp(core, verbs);
        }
    }
}
