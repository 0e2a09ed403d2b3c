// SPDX-License-Identifier: GPL-2.0

//! A listener's REQs and its passive ends' job: the REQ callback takes the
//! REQ (checks, the table's entry, the MRA), a job on `jobs` makes the
//! QP, moves it and sends the REP (or holds it, see `pace`).

use super::{
    behaviour::OnReq,
    commands::Post,
    endpoint::{
        EndSlot, Endpoint, EpHandle, EventKind, Handshake, Role, FOREIGN_BASE, PASSIVE_BASE,
        REQ_MAGIC,
    },
    now_ns, pace,
    qp::{qp_size, CountedQp},
    table::Core,
};
use crate::{
    cm::{self, Rep, Request},
    cma::{self, PortSpace},
    path::{Gid, GidAttr},
};
use core::sync::atomic::Ordering;
use kernel::{prelude::*, rdma::verbs::QpState, sync::Arc};

/// Counted in `jobs.queued` (`stats`: `jobs_queued`) from before its job
/// is queued until that job begins (or is dropped unrun): the REQs a new
/// REQ waits behind.
struct Queued(Arc<Core>);

impl Queued {
    pub(super) fn new(core: Arc<Core>) -> Self {
        core.bounds.jobs.queued.fetch_add(1, Ordering::Relaxed);
        Self(core)
    }
}

impl Drop for Queued {
    fn drop(&mut self) {
        self.0.bounds.jobs.queued.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Endpoint {
    /// A REQ to this listener (see [`Handler::req_received`](crate::cm::Handler::req_received)).
    pub(super) fn take_req(
        self: &Arc<Self>,
        core: &Arc<Core>,
        req: Request<'_, EpHandle>,
    ) -> Result {
        let test = self.test_hooks();
        test.before_req(core, self);
        // This module makes RC QPs only: a REQ for UC or XRC is rejected, as
        // rdma_cm rejects a REQ whose QP type is not its listener's; so is
        // one to rdma_cm's UDP port space, where rdma_cm serves UD only.
        if !req.is_rc() || (self.cma && PortSpace::of(req.service_id()) == Some(PortSpace::Udp)) {
            return Err(EINVAL);
        }
        let pd = req.private_data();
        let mut peer = None;
        let ours = if self.cma {
            // Garbage is rejected: the CM sends the REJ. So is a REQ for an
            // address this device does not have, as rdma_cm's
            // `validate_net_dev` rejects it: a peer that lies about where
            // it connects to.
            let (src, _, dst) = cma::parse(pd)?;
            peer = Some(pace::peer_bucket(src));
            let (device, gid) = (req.device(), Gid::ipv4_mapped(dst));
            if !device
                .ports()
                .any(|port| GidAttr::find_roce_v2(device, &gid, port).is_ok())
            {
                return Err(EHOSTUNREACH);
            }
            &pd[cma::HDR_SIZE..]
        } else {
            pd
        };
        let ours = ours
            .strip_prefix(REQ_MAGIC)
            .and_then(|n| n.get(..4))
            .and_then(|n| <[u8; 4]>::try_from(n).ok());
        let num = match ours {
            Some(n) => PASSIVE_BASE + u32::from_le_bytes(n) % PASSIVE_BASE,
            // Numbers wrap rather than overflow after 2^32 foreign REQs.
            None => {
                FOREIGN_BASE.wrapping_add(core.next_foreign.fetch_add(1, Ordering::Relaxed) as u32)
            }
        };
        let (depth, resources) = (req.initiator_depth(), req.responder_resources());
        let behaviour = self.st.lock().behaviour.try_clone()?;
        // Over the backlog: rejected (the CM sends the REJ).
        let handshake = Handshake::new(self, behaviour.backlog, peer)?;
        // Over `max_ends`: rejected too.
        let slot = EndSlot::new(self, behaviour.max_ends).inspect_err(|_| {
            core.bounds
                .counts
                .ends_refused
                .fetch_add(1, Ordering::Relaxed);
        })?;
        let device = req.device();
        let ep = Endpoint::new(num, Role::Passive, device, self.num, false, behaviour)?;
        ep.st.lock().handshake = Some(handshake);
        let cm = req.accept(EpHandle::passive(ep.clone(), slot))?;
        // From here an error drops `cm` in its own callback: the CM destroys
        // the new id, and rejects the REQ unless the error is `ENOMEM` (the
        // CM's contract for a REQ handler: the peer retries; see
        // `cm::Handler::req_received`). Every `ENOMEM` of ours comes before
        // the MRA below: after it (`MRA_REQ_SENT`) the CM would send a REJ
        // whatever the errno.
        //
        // In the table before the job runs, so that close, device removal
        // and unload find the id.
        core.insert(num, ep.clone(), cm)?;
        // The QP and the REP are a job's (`accept_later`): the CM runs every
        // callback on one workqueue, one at a time per CPU, and making a QP
        // there held up every REQ, REP and RTU behind it until the peers
        // gave up (in a storm of REQs from cmtime).
        let t_req = now_ns();
        if test.on_req == OnReq::RepThenFail {
            // A REP from the callback, whose failure the CM reports from
            // the MAD's completion while the callback may still run.
            let _ = core.with_own_cm(num, &ep, |cm| {
                cm.send_rep(&Rep {
                    qp_num: 1,
                    starting_psn: 1,
                    responder_resources: 0,
                    initiator_depth: 0,
                    flow_control: true,
                    rnr_retry_count: 7,
                    private_data: &[],
                })
            });
        }
        let queued = Queued::new(core.clone());
        let job = ep.clone();
        let spawned = test.spawn_job().and_then(|()| {
            core.jobs.spawn(move || {
                let core = queued.0.clone();
                // Begun: no longer ahead of anyone.
                drop(queued);
                job.accept_later(&core, depth, resources, t_req)
            })
        });
        if let Err(e) = spawned {
            // Out again, dropped in its REQ callback: the CM destroys it.
            drop(core.remove_own(&ep));
            return Err(e);
        }
        // Each retransmission of the peer's REQ is answered with an MRA
        // from now on, as rdma_cm does, so that the peer waits for the job
        // (the CM's own service timeout, about 68.7 s a retry). Last, and
        // its error ignored: it fails only with `EINVAL`, when the job has
        // already sent its REP or the peer's REJ has reset the id (whose
        // callback frees the end), or `ENOENT`/`ENOTCONN` when the end is
        // already gone; in none of these is an MRA needed.
        let _ = core.with_own_cm(num, &ep, |cm| cm.prepare_mra());
        Ok(())
    }

    /// A passive end's job, after its REQ callback: the QP, its moves to
    /// INIT and RTR, and the REP, on the id made for this endpoint. A
    /// failure is recorded (`CONNECT_ERROR`) and frees the id and QP (the CM
    /// rejects the REQ); an endpoint closed or freed meanwhile (`close`, the
    /// peer's REJ, device removal, unload) is left as it is, and the QP the
    /// job made for it is freed.
    pub(super) fn accept_later(
        self: &Arc<Self>,
        core: &Arc<Core>,
        depth: u8,
        resources: u8,
        t_req: i64,
    ) {
        let t_job = now_ns();
        // The endpoint's device, by its index in the module's set: `ENODEV`
        // once its removal has begun.
        let verbs = core
            .device_at(self.dev_index)
            .and_then(|dev| CountedQp::new(&dev, qp_size()));
        let qp_num = match self.ready_qp(core, verbs) {
            Ok(Ok(qp_num)) => qp_num,
            Ok(Err(e)) => return self.rep_failed(core, Ok(Err(e))),
            Err(e) => return self.rep_failed(core, Err(e)),
        };
        // A peer with a full window gets its REP from the sweeper, when it
        // has room (see `pace`): the queue goes on meanwhile.
        let bucket = self.st.lock().handshake.as_ref().and_then(Handshake::peer);
        let rep = pace::HeldRep {
            ep: self.clone(),
            bucket: bucket.unwrap_or(0),
            qp_num,
            depth,
            resources,
            t_req,
        };
        let rep = match bucket {
            Some(_) => core.hold_rep(rep),
            None => Some(rep),
        };
        if let Some(rep) = rep {
            self.send_held_rep(core, rep);
        }
        core.bounds.jobs.times.add(now_ns() - t_job);
    }

    /// Sends the REP of a passive end whose QP is ready (`rep`), from its
    /// job or, once held, from the sweeper (see `pace`).
    pub(super) fn send_held_rep(self: &Arc<Self>, core: &Arc<Core>, rep: pace::HeldRep) {
        let res = self.send_rep_msg(core, rep.qp_num, rep.depth, rep.resources);
        if let Ok(Ok(())) = res {
            self.rep_went_out(core);
            // Unless the handshake is over already (the RTU came).
            let bucket = self.st.lock().handshake.as_mut().and_then(|h| h.rep_sent());
            if let Some(b) = bucket {
                core.bounds.peers.rep_sent(b);
            }
            core.rep_times.add(now_ns() - rep.t_req);
            if self.st.lock().behaviour.rping.is_some() {
                core.spawn_poller(self.clone());
            }
            return;
        }
        self.rep_failed(core, res);
    }

    /// The REP went out: the end is freed if no RTU comes within its
    /// listener's `handshake_max`, whatever timers its peer asked for (the
    /// CM would wait up to 16 times 2^23 ms). Not once the RTU came: the
    /// state is read under the endpoint's lock, which the ESTABLISHED
    /// callback takes to drop the deadline.
    fn rep_went_out(self: &Arc<Self>, core: &Arc<Core>) {
        let _ = core.with_own_cm(self.num, self, |cm| {
            let mut st = self.st.lock();
            if matches!(cm.state(), cm::State::RepSent | cm::State::MraRepRcvd) {
                let after = i64::from(st.behaviour.handshake_max_ms);
                core.free_at(self, &mut st, after);
            }
            Ok(())
        });
    }

    /// A passive end's QP or REP failed (`Ok(Err)`: the end is freed and
    /// the CM rejects the REQ) or its endpoint is gone (`Err`: its QP goes).
    pub(super) fn rep_failed(self: &Arc<Self>, core: &Core, res: Result<Result>) {
        match res {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                self.record(EventKind::ConnectError, e.to_errno(), &[]);
                self.free_id(core);
            }
            // Gone: whoever took the id frees the rest; the QP given to the
            // endpoint here goes now (the job is flushed before a device
            // goes).
            Err(_) => {
                let verbs = self.st.lock().take_verbs();
                drop(verbs);
            }
        }
    }

    /// Readies a passive end's QP `verbs` for its REP: its QP number, or
    /// `Ok(Err)` if ours failed, `Err` if the endpoint is gone (out of the
    /// table, or its id freed or reset by the peer's REJ).
    ///
    /// The table's lock, which every REQ, REJ, REP_ERROR and timewait-exit
    /// callback takes, is held only to use the id (the CM's computation of
    /// the QP's attributes, the REP), never across the QP's moves: those run
    /// under the endpoint's lock alone, so that the CM's workqueue does not
    /// wait behind QP work (review S2).
    pub(super) fn ready_qp(
        self: &Arc<Self>,
        core: &Core,
        verbs: Result<CountedQp>,
    ) -> Result<Result<u32>> {
        let init_rtr = core.with_own_cm(self.num, self, |cm| {
            Ok(cm
                .init_qp_attr(QpState::Init)
                .and_then(|init| Ok((init, cm.init_qp_attr(QpState::Rtr)?))))
        })?;
        let res = verbs.and_then(|verbs| {
            let (init, mut rtr) = init_rtr?;
            let qp_num = verbs.qp_num();
            self.st.lock().verbs = Some(verbs);
            self.test_hooks().job_delay(self);
            // Our PSN: what the peer sends with, announced in the REP.
            let starting_psn = qp_num;
            self.modify_qp(&init)?;
            let pre_recv = self.st.lock().behaviour.pre_recv;
            if let Some((recv, size)) = pre_recv {
                // Before the REP: the peer may send as soon as it has our RTU.
                self.st.lock().post(&Post::recv(recv, size))?;
            }
            let rping = self.st.lock().behaviour.rping;
            if let Some(role) = rping {
                self.st.lock().rping_setup(role)?;
            }
            // The CM learns the PSN our peer starts sending with (the REP's
            // starting PSN, `rq_psn`) only when the REP is sent, and would
            // give the QP 0. rdma_cm sets it the same way
            // (`rdma_init_qp_attr`).
            rtr.set_rq_psn(starting_psn);
            self.modify_qp(&rtr)?;
            Ok(qp_num)
        });
        match res {
            Ok(qp_num) => Ok(Ok(qp_num)),
            Err(e) => {
                // An id the peer's REJ reset (idle; its callback frees the
                // end) or one gone meanwhile is not ours to reject.
                let state = core.with_own_cm(self.num, self, |cm| Ok(cm.state()))?;
                if state == cm::State::Idle {
                    Err(ENOTCONN)
                } else {
                    Ok(Err(e))
                }
            }
        }
    }

    /// Answers the REQ with the REP for the QP `qp_num`: `Ok(Err)` if ours
    /// failed, `Err` if the endpoint is gone or the peer's REJ came first.
    pub(super) fn send_rep_msg(
        self: &Arc<Self>,
        core: &Core,
        qp_num: u32,
        depth: u8,
        resources: u8,
    ) -> Result<Result> {
        core.with_own_cm(self.num, self, |cm| {
            // rdma_cm's choices: flow control, RNR retries for ever.
            let res = cm.send_rep(&Rep {
                qp_num,
                starting_psn: qp_num,
                responder_resources: depth.min(1),
                initiator_depth: resources.min(1),
                flow_control: true,
                rnr_retry_count: 7,
                private_data: &[],
            });
            match res {
                // The peer's REJ came first: its callback frees the end.
                Err(_) if cm.state() == cm::State::Idle => Err(ENOTCONN),
                res => Ok(res),
            }
        })
    }
}
