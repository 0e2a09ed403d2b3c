// SPDX-License-Identifier: GPL-2.0

//! The REP pacer at work (its policy, the peers' windows, is `pace`): a
//! passive end's REP put on the list when its peer has no room
//! ([`Core::hold_rep`]), the sweeper that sends it once the peer has,
//! and the end of a handshake, which makes room ([`Core::rep_done`], from
//! the drop of its [`Handshake`]).

use super::{
    endpoint::{Endpoint, Handshake},
    pace::{now_ns, HeldRep, HeldReps, Peers, PEER_BUCKETS, REP_HOLD_MAX_MS, REP_STALL_MS},
    table::Core,
};
use core::sync::atomic::Ordering;
use kernel::{
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation},
    sync::{Arc, CondVarTimeoutResult},
    time::msecs_to_jiffies,
};

impl Core {
    /// From a passive end's job, its QP ready: `rep` back to be sent now,
    /// or `None` if it was put on the list to be sent by the sweeper, when
    /// its peer has room (it has `REP_WINDOW` REPs in flight and is
    /// answering them, or REPs of its own held before).
    pub(super) fn hold_rep(self: &Arc<Self>, rep: HeldRep) -> Option<HeldRep> {
        let peers = &self.bounds.peers;
        let now = now_ns();
        // Allocated before the lock; without memory the REP goes now.
        let Ok(node) = RBTreeNodeReservation::new(GFP_KERNEL) else {
            return Some(rep);
        };
        let mut h = self.bounds.held.lock();
        let b = rep.bucket;
        let waiting = h.per.get(b).copied().unwrap_or(0);
        if waiting == 0 && peers.room(b, now) > 0 {
            return Some(rep);
        }
        if !h.sweeping {
            let core = self.clone();
            // On `sweepers`, as the sweeper of unanswered DREQs: it sends
            // REPs, which takes the table's lock.
            if self
                .bounds
                .sweepers
                .spawn(move || sweep_reps(core))
                .is_err()
            {
                return Some(rep);
            }
            h.sweeping = true;
        }
        let key = (i64::try_from(now).unwrap_or(i64::MAX), h.next);
        h.next = h.next.wrapping_add(1);
        if let Some(n) = h.per.get_mut(b) {
            *n += 1;
        }
        h.list.insert(node.into_node(key, rep));
        peers.holds.fetch_add(1, Ordering::Relaxed);
        // A sweeper already waiting computed its wake-up without this REP,
        // whose peer may fall silent sooner: it looks again.
        self.bounds.held_changed.notify_all();
        None
    }
}

/// Held REPs let go in one pass at most (then the next pass).
const PASS: usize = 32;

/// The sweeper of held REPs: sends those whose peer has room, or that
/// were held [`REP_HOLD_MAX_MS`], then waits on `held_changed` (no
/// polling) until one of them may go: a handshake of a peer with REPs held
/// ends ([`Core::rep_done`]), a peer stops answering ([`REP_STALL_MS`]) or
/// a REP was held the longest. Returns once none is left, or at unload
/// (`stop`: the list is dropped, the ends with it; their ids and QPs are
/// the table's to free).
fn sweep_reps(core: Arc<Core>) {
    let bounds = &core.bounds;
    let mut h = bounds.held.lock();
    // Whether this pass was started by a wake-up (or the spawn), not by
    // the timer: what a pass lets go by room then went at an answer.
    let mut woken = true;
    loop {
        // Read under the lock `Owner` takes to wake us after setting it.
        if bounds.stop.load(Ordering::Relaxed) {
            h.sweeping = false;
            h.per = [0; PEER_BUCKETS];
            let list = core::mem::replace(&mut h.list, RBTree::new());
            drop(h);
            drop(list);
            return;
        }
        if h.list.keys().next().is_none() {
            h.sweeping = false;
            return;
        }
        let now = now_ns();
        let oldest = i64::try_from(now)
            .unwrap_or(i64::MAX)
            .saturating_sub(REP_HOLD_MAX_MS * 1_000_000);
        let mut keys = [(0i64, 0u64); PASS];
        let mut n = 0;
        // Each bucket's room now (`u64::MAX`: its peer stopped answering),
        // for those with REPs held: one look per bucket, not per REP.
        let mut room = [0u64; PEER_BUCKETS];
        let mut with_room = 0;
        for (b, held) in h.per.iter().enumerate() {
            if let (true, Some(r)) = (*held > 0, room.get_mut(b)) {
                *r = bounds.peers.room(b, now);
                with_room += usize::from(*r > 0);
            }
        }
        for (key, rep) in h.list.iter() {
            let timed_out = key.0 <= oldest;
            // Oldest first: past the timed-out ones, only room lets go.
            if n == PASS || (!timed_out && with_room == 0) {
                break;
            }
            let Some(r) = room.get_mut(rep.bucket) else {
                continue;
            };
            if !timed_out && *r == 0 {
                continue;
            }
            let why = if timed_out || *r == u64::MAX || !woken {
                &bounds.peers.let_go_timed
            } else {
                &bounds.peers.let_go_answered
            };
            why.fetch_add(1, Ordering::Relaxed);
            if *r != u64::MAX && *r > 0 {
                *r -= 1;
                with_room -= usize::from(*r == 0);
            }
            if let Some(k) = keys.get_mut(n) {
                *k = *key;
            }
            n += 1;
        }
        if n == 0 {
            let ms = next_release_ms(&h, &bounds.peers, now);
            let res = bounds
                .held_changed
                .wait_interruptible_timeout(&mut h, msecs_to_jiffies(ms));
            woken = !matches!(res, CondVarTimeoutResult::Timeout);
            continue;
        }
        drop(h);
        for key in keys.iter().take(n) {
            let rep = {
                let mut h = core.bounds.held.lock();
                let rep = h.list.remove(key);
                if let Some(r) = &rep {
                    if let Some(c) = h.per.get_mut(r.bucket) {
                        *c = c.saturating_sub(1);
                    }
                }
                rep
            };
            if let Some(rep) = rep {
                let ep = rep.ep.clone();
                ep.send_held_rep(&core, rep);
            }
        }
        h = bounds.held.lock();
    }
}

/// How long until a REP of `h` may go by time alone (ms, at least 1): the
/// oldest reaches [`REP_HOLD_MAX_MS`], or a peer with REPs held has had no
/// handshake end for [`REP_STALL_MS`]. Its room from an answer comes with
/// a wake-up ([`Core::rep_done`]).
fn next_release_ms(h: &HeldReps, peers: &Peers, now: u64) -> u32 {
    let hold_max = (REP_HOLD_MAX_MS as u64) * 1_000_000;
    let stall = (REP_STALL_MS as u64) * 1_000_000;
    let mut at = h.list.keys().next().map_or(u64::MAX, |k| {
        u64::try_from(k.0).unwrap_or(0).saturating_add(hold_max)
    });
    for (b, held) in h.per.iter().enumerate() {
        if *held > 0 {
            let done = peers
                .done_ns
                .get(b)
                .map_or(0, |d| d.load(Ordering::Relaxed));
            at = at.min(done.saturating_add(stall));
        }
    }
    let ms = at.saturating_sub(now).saturating_add(999_999) / 1_000_000;
    u32::try_from(ms.max(1)).unwrap_or(u32::MAX)
}

impl Core {
    /// Takes `ep`'s held REP, if any, off the list (`close`): its REP would
    /// never be sent (its entry is gone), and the list's reference would
    /// keep the end until the REP's time ran out.
    pub(super) fn forget_held(&self, ep: &Endpoint) {
        let gone = {
            let mut h = self.bounds.held.lock();
            let key = h
                .list
                .iter()
                .find(|(_, r)| core::ptr::eq(&*r.ep, ep))
                .map(|(k, _)| *k);
            let rep = key.and_then(|k| h.list.remove(&k));
            if let Some(c) = rep.as_ref().and_then(|r| h.per.get_mut(r.bucket)) {
                *c = c.saturating_sub(1);
            }
            rep
        };
        // Not the last reference (the caller's is alive): dropped without
        // the list's lock all the same.
        drop(gone);
    }

    /// A handshake of bucket `b` whose REP was sent is over: counted, and
    /// the sweeper woken if a REP of `b`'s is held (its peer may have room
    /// now). Under the list's lock, which the sweeper holds from its look
    /// at the room to its wait: the wake-up is never lost.
    pub(super) fn rep_done(&self, b: usize) {
        self.bounds.peers.rep_done(b);
        let h = self.bounds.held.lock();
        if h.per.get(b).is_some_and(|n| *n > 0) {
            self.bounds.held_changed.notify_all();
        }
    }
}

impl Drop for Handshake {
    fn drop(&mut self) {
        self.0.handshakes.fetch_sub(1, Ordering::AcqRel);
        // The core is reached as the callbacks reach it (the endpoint holds
        // none): `None` only once the module's core is gone, when no count
        // is read and no job waits any more.
        let Some(core) = Core::get() else {
            return;
        };
        if let (Some(b), true) = (self.1, self.2) {
            core.rep_done(b);
        }
        // Taken out of its end's state under its lock before: a job that
        // waits for it (`job_delay`) looked before and waits now.
        core.ends_changed.notify_all();
    }
}
