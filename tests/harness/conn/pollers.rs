// SPDX-License-Identifier: GPL-2.0

//! The rping pollers: a capped number of work items that drive rping
//! endpoints' completions on the core's `pollers` queue.

use super::{
    endpoint::Endpoint,
    table::{Core, MAX_POLLERS},
};
use crate::kcompat::sleep_ms;
use crate::rping;
use core::sync::atomic::Ordering;
use kernel::sync::Arc;

impl Core {
    /// Starts `ep`'s rping poller, unless [`MAX_POLLERS`] run: then (or if
    /// the work cannot be allocated) its protocol runs only on `poll`.
    pub(super) fn spawn_poller(self: &Arc<Self>, ep: Arc<Endpoint>) {
        let live = &self.bounds.pollers_live;
        if live.fetch_add(1, Ordering::Relaxed) >= MAX_POLLERS {
            live.fetch_sub(1, Ordering::Relaxed);
            self.bounds
                .counts
                .pollers_refused
                .fetch_add(1, Ordering::Relaxed);
            return;
        }
        let core = self.clone();
        let spawned = self.bounds.pollers.spawn(move || {
            rping_poller(core.clone(), ep);
            core.bounds.pollers_live.fetch_sub(1, Ordering::Relaxed);
        });
        if spawned.is_err() {
            live.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// Drives an rping endpoint: takes its completions as they come (its CQ is
/// polled directly) until its protocol is over, its QP freed or its entry
/// gone (unload, close) or the core stopping (unload). Runs on the core's
/// `pollers`, which neither device removal nor unload flushes: removal frees
/// the QP (`take_verbs`, under the endpoint's lock, which this takes for
/// each poll), unload takes the entry out and sets `stop`, and the poller
/// returns at its next turn, within a millisecond's sleep.
fn rping_poller(core: Arc<Core>, ep: Arc<Endpoint>) {
    loop {
        if ep.gone.load(Ordering::Relaxed) || core.bounds.stop.load(Ordering::Relaxed) {
            return;
        }
        let action = {
            let mut st = ep.st.lock();
            // A match: 7.3's clippy wants `is_none_or` for `map_or(true, ..)`,
            // newer than 6.12's minimum Rust.
            let rping_done = match st.rping.as_ref() {
                Some(r) => r.done(),
                None => true,
            };
            if st.verbs.is_none() || rping_done {
                return;
            }
            st.drain_cq_for_rping()
        };
        match action {
            Ok(rping::Action::Nothing) => sleep_ms(1),
            // The client's last ping: `disconnect()` of its own entry.
            Ok(rping::Action::Disconnect) => {
                let _ = core.with_own_cm(ep.num, &ep, |cm| ep.disconnect_on(&core, Some(cm), &[]));
                return;
            }
            Err(_) => return,
        }
    }
}
