// SPDX-License-Identifier: GPL-2.0

//! What ends an endpoint's hold on the RDMA core: its id freed from its own
//! callbacks with its QP ([`Endpoint::free_id`]), the QP drained and
//! destroyed off the CM's workqueue ([`Endpoint::release_qp`]), and its
//! `disconnect()` ([`Endpoint::disconnect_on`]).

use super::{
    endpoint::{Endpoint, EventKind, DRAIN_WAIT_MS},
    now_ns,
    qp::CountedQp,
    table::Core,
};
use crate::{
    cm::{CmIdRef, Message},
    product,
};
use kernel::{prelude::*, sync::Arc};

/// How long a CM callback that frees its endpoint's QP waits for those
/// flushes itself (see [`Endpoint::release_qp`]).
const CALLBACK_DRAIN_MS: u32 = 100;

impl Endpoint {
    /// From one of its id's callbacks (timewait exit, a failed handshake):
    /// free the id and the QP; keep the record (with the completions still
    /// on the CQ counted). Acts on this endpoint's own entry only, whatever
    /// now has its number.
    ///
    /// The QP's drain does not run under the endpoint's lock, and waits
    /// here (in a CM callback, which holds up the CM's workqueue) at most
    /// [`CALLBACK_DRAIN_MS`]: see [`Endpoint::release_qp`].
    pub(super) fn free_id(self: &Arc<Self>, core: &Core) {
        let (verbs, handshake) = {
            let mut st = self.st.lock();
            core.cancel_deadline(&mut st);
            (st.verbs.take(), st.handshake.take())
        };
        core.destroy_own_cm(self);
        drop(handshake);
        if let Some(verbs) = verbs {
            self.release_qp(core, verbs);
        }
    }

    /// Frees `verbs`, this endpoint's QP taken out in one of its id's
    /// callbacks, its posted work requests ended first (flushed, and
    /// counted in the endpoint's record), without the endpoint's lock. The
    /// callback waits at most [`CALLBACK_DRAIN_MS`] for the flushes (rxe
    /// flushes in microseconds); what is still out then is waited for by a
    /// job on the reaper (up to [`DRAIN_WAIT_MS`]), which device removal
    /// and unload flush (and the QP's device reference holds up the
    /// device's unregistration until it is freed), so that no CM callback
    /// waits seconds for a device. A drained QP is destroyed by a job too.
    pub(super) fn release_qp(self: &Arc<Self>, core: &Core, mut verbs: CountedQp) {
        let left = verbs.drain(CALLBACK_DRAIN_MS, |c| self.st.lock().wr.add(&c));
        if left == 0 {
            // Drained: what is left is destroying the QP, its CQ and MRs
            // and unmapping the buffers, milliseconds under a debug kernel,
            // which here held up every DREQ and DREP behind it on the CM's
            // one workqueue (the cmtime storm's disconnect step took
            // 1.12 times as long as against rdma_cm's server, which
            // destroys its QPs after the step). If the job cannot be
            // queued, the closure drops the QP here.
            let _ = core.reaper.spawn(move || drop(verbs));
            return;
        }
        let ep = self.clone();
        let spawned = core.reaper.spawn(move || {
            let left = verbs.drain(DRAIN_WAIT_MS, |c| ep.st.lock().wr.add(&c));
            ep.st.lock().wr.dropped += u64::from(left);
            drop(verbs);
        });
        if spawned.is_err() {
            // The job (with the QP) was dropped: the QP is freed with what
            // it still had posted, counted as dropped.
            self.st.lock().wr.dropped += u64::from(left);
        }
    }

    /// `disconnect()` of this endpoint on `id` (its own id, or `None` once
    /// freed): see [`Core::disconnect`].
    pub(super) fn disconnect_on(&self, core: &Core, id: Option<&CmIdRef>, data: &[u8]) -> Result {
        // Held while deciding and sending: see `dreq_received`.
        let mut st = self.st.lock();
        // A second call is `EALREADY` whenever it comes, also once the id
        // has left timewait and been freed.
        if st.disconnecting {
            return Err(EALREADY);
        }
        let cm = id.ok_or(ENOTCONN)?;
        let qp = st.verbs.as_ref().map(|v| v.qp());
        let t_ns = now_ns();
        // Refused (the outer `?`): nothing was done, nothing changes.
        let (msg, res) = product::disconnect(cm, qp, data)?;
        st.disconnecting = true;
        if msg == Message::Dreq && res.is_ok() {
            st.record_at(t_ns, EventKind::DreqSent, 0, data);
        }
        core.count(msg, res.is_ok());
        res
    }
}
