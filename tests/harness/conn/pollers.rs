// SPDX-License-Identifier: GPL-2.0

//! The rping pollers: one step of an rping endpoint's protocol, queued on
//! the core's `pollers` by its QP's completions.

use super::{endpoint::Endpoint, table::Core};
use crate::rping;
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::rdma::verbs::Waker;
use kernel::{prelude::*, sync::Arc};

/// Whether an rping endpoint's step is queued: shared by the endpoint and
/// its QP's waker, which holds neither the endpoint nor the core (the
/// table holds the endpoint, whose QP holds the waker).
struct Kick {
    num: u32,
    queued: AtomicBool,
}

impl Core {
    /// Makes `ep`'s rping protocol run on its completions: each queues one
    /// step (at most one queued per endpoint), and one runs now for what
    /// came before.
    pub(super) fn spawn_poller(self: &Arc<Self>, ep: Arc<Endpoint>) {
        let Ok(kick) = Arc::new(
            Kick {
                num: ep.num,
                queued: AtomicBool::new(false),
            },
            GFP_KERNEL,
        ) else {
            return;
        };
        let k = kick.clone();
        let Ok(waker) = Arc::new(move || k.queue(), GFP_KERNEL) else {
            return;
        };
        let waker: Waker = waker;
        {
            let mut st = ep.st.lock();
            let Some(verbs) = st.verbs.as_ref() else {
                return;
            };
            verbs.set_waker(Some(waker.clone()));
            st.rping_wake = Some(waker);
        }
        kick.queue();
    }
}

impl Kick {
    /// Queues the endpoint's next step, unless one is queued already.
    fn queue(self: &Arc<Self>) {
        if self.queued.swap(true, Ordering::AcqRel) {
            return;
        }
        let Some(core) = Core::get() else {
            return;
        };
        let this = self.clone();
        let c = core.clone();
        core.bounds.pollers_live.fetch_add(1, Ordering::Relaxed);
        let spawned = core.bounds.pollers.spawn(move || {
            this.queued.store(false, Ordering::Release);
            rping_step(&c, this.num);
            c.bounds.pollers_live.fetch_sub(1, Ordering::Relaxed);
        });
        if spawned.is_err() {
            // Not queued (no memory): the next completion tries again.
            core.bounds.pollers_live.fetch_sub(1, Ordering::Relaxed);
            self.queued.store(false, Ordering::Release);
        }
    }
}

/// One step of an rping endpoint: takes its completions and answers them,
/// unless its protocol is over, its QP freed or its entry gone (unload,
/// close) or the core stopping (unload). Runs on the core's `pollers`,
/// which neither device removal nor unload flushes: removal frees the QP
/// (`take_verbs`, under the endpoint's lock, which this takes), unload
/// takes the entry out and sets `stop`, and a step queued before finds it.
fn rping_step(core: &Arc<Core>, num: u32) {
    if core.bounds.stop.load(Ordering::Relaxed) {
        return;
    }
    let Ok(ep) = core.ep(num) else {
        return;
    };
    if ep.gone.load(Ordering::Relaxed) {
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
    // The client's last ping: `disconnect()` of its own entry.
    if let Ok(rping::Action::Disconnect) = action {
        let _ = core.with_own_cm(ep.num, &ep, |cm| ep.disconnect_on(core, Some(cm), &[]));
    }
}
