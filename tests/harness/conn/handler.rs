// SPDX-License-Identifier: GPL-2.0

//! The endpoints' CM handler ([`EpHandle`]): what each CM event does to an
//! endpoint.

use super::{
    behaviour::copy,
    endpoint::{EpHandle, EventKind, Role},
    now_ns,
    table::Core,
};
use crate::{
    cm::{CmIdRef, Handler, Message, RejReason, Request},
    product,
};
use core::sync::atomic::Ordering;
use kernel::prelude::*;
use kernel::rdma::verbs::{QpState, WcStatus};

#[vtable]
impl Handler for EpHandle {
    fn req_received(&self, req: Request<'_, Self>) -> Result {
        let Some(core) = Core::get() else {
            return Err(ENODEV);
        };
        // Timed: what a REQ costs the CM's workqueue, which runs one
        // callback at a time per CPU (`stats`: `req_callback_us_*`).
        let t0 = now_ns();
        let res = self.take_req(&core, req);
        core.req_times.add(now_ns() - t0);
        res
    }

    fn rep_received(&self, id: &CmIdRef, _remote_qpn: u32) {
        let Some(core) = Core::get() else {
            return;
        };
        if !self.test_hooks().on_rep(id) {
            return;
        }
        let res = self
            .move_qp(id, QpState::Rtr)
            .and_then(|()| self.move_qp(id, QpState::Rts))
            .and_then(|()| id.send_rtu(&[]));
        match res {
            Ok(()) => {
                {
                    let mut guard = self.st.lock();
                    guard.record(EventKind::Established, 0, &[]);
                    // rping's client: the first ping.
                    let st = &mut *guard;
                    if let (Some(r), Some(v)) = (st.rping.as_mut(), st.verbs.as_mut()) {
                        st.wr.posted += u64::from(r.start(v));
                    }
                }
                core.established.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                self.record(EventKind::ConnectError, e.to_errno(), &[]);
                let _ = id.send_rej(&[]);
            }
        }
    }

    fn established(&self, id: &CmIdRef) {
        let Some(core) = Core::get() else {
            return;
        };
        let status = match self.move_qp(id, QpState::Rts) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        };
        let mut st = self.st.lock();
        st.record(EventKind::Established, status, &[]);
        // The handshake is over: its place on the listener is free, and its
        // deadline (`handshake_max`) goes.
        let handshake = st.handshake.take();
        core.cancel_deadline(&mut st);
        // rping's server: what came before the RTU is answered now.
        let wake = st.rping_wake.clone();
        drop(st);
        drop(handshake);
        if let Some(w) = wake {
            w();
        }
        core.established.fetch_add(1, Ordering::Relaxed);
    }

    fn rej_received(&self, _id: &CmIdRef, reason: RejReason, private_data: &[u8]) {
        let Some(core) = Core::get() else {
            return;
        };
        self.record(EventKind::RejReceived, reason.to_raw() as i32, private_data);
        if self.role == Role::Passive {
            // Rejected after our REP: the CM has forgotten the peer (the id
            // is idle) and a retried REQ would make a new passive end. Free
            // the id and QP now, keep the record.
            self.free_id(&core);
        }
    }

    fn dreq_received(&self, id: &CmIdRef, private_data: &[u8]) {
        let Some(core) = Core::get() else {
            return;
        };
        let test = self.test_hooks();
        test.before_dreq();
        // Under the lock `disconnect` holds while it decides and sends: a
        // DREQ crossing ours is answered exactly once.
        let mut st = self.st.lock();
        st.record(EventKind::DreqReceived, 0, private_data);
        st.record_disconnected(0);
        // A DREQ before the RTU ends the handshake: cm.c moves a passive end
        // from REP_SENT (or MRA_REP_RCVD) straight to DREQ_RCVD and cancels
        // the REP (`cm_dreq_handler`), so neither the RTU (ESTABLISHED) nor
        // a REP_ERROR ever comes to give the listener its place back.
        let handshake = st.handshake.take();
        let answer = if st.disconnecting {
            Some(KVec::new())
        } else {
            match &st.behaviour.auto_drep {
                Some(d) => copy(d).ok(),
                None => None,
            }
        };
        // Freed at last once its answer is due and the peer's timewait is
        // over, or would be had the peer not made it hours long.
        let mut after = i64::from(st.behaviour.free_after_ms);
        if answer.is_none() {
            after += i64::from(st.behaviour.drep_after_ms);
        }
        core.free_at(self, &mut st, after);
        // Nobody answers now: the sweeper does after the deadline, unless
        // the consumer does first (or it cannot be queued: then now).
        let answer = match answer {
            None => {
                let after = i64::from(st.behaviour.drep_after_ms) * 1_000_000;
                let due = now_ns().saturating_add(after);
                match core.answer_later(self, due) {
                    Ok(()) => None,
                    Err(_) => Some(KVec::new()),
                }
            }
            answer => answer,
        };
        let mut over = None;
        if let Some(data) = answer {
            let res = product::send(Message::Drep, id, &data);
            core.count(Message::Drep, res.is_ok());
            let status = res.err().map_or(0, |e| e.to_errno());
            st.record(EventKind::DrepSent, status, &data);
            over = st.connection_over(self.role);
        }
        // Without our lock: `disconnect` takes the table's and ours.
        drop(st);
        drop(handshake);
        if let Some(verbs) = over {
            self.release_qp(&core, verbs);
        }
        test.after_dreq(&core, self, id);
    }

    fn drep_received(&self, _id: &CmIdRef, private_data: &[u8]) {
        let Some(core) = Core::get() else {
            return;
        };
        let mut st = self.st.lock();
        st.record(EventKind::DrepReceived, 0, private_data);
        st.record_disconnected(0);
        core.drep_received.fetch_add(1, Ordering::Relaxed);
        let after = i64::from(st.behaviour.free_after_ms);
        core.free_at(self, &mut st, after);
        let over = st.connection_over(self.role);
        drop(st);
        if let Some(verbs) = over {
            self.release_qp(&core, verbs);
        }
    }

    fn dreq_error(&self, id: &CmIdRef, send_status: WcStatus) {
        let Some(core) = Core::get() else {
            return;
        };
        let mut st = self.st.lock();
        st.record(EventKind::DreqError, send_status.to_raw() as i32, &[]);
        st.record_disconnected(ETIMEDOUT.to_errno());
        let after = i64::from(st.behaviour.free_after_ms);
        core.free_at(self, &mut st, after);
        let over = st.connection_over(self.role);
        drop(st);
        if let Some(verbs) = over {
            self.release_qp(&core, verbs);
        }
        self.test_hooks().after_error(self.num, id);
    }

    fn connect_error(&self, id: &CmIdRef, send_status: WcStatus) {
        let Some(core) = Core::get() else {
            return;
        };
        self.record(EventKind::ConnectError, send_status.to_raw() as i32, &[]);
        self.test_hooks().after_error(self.num, id);
        if self.role == Role::Passive {
            // Our REP timed out (REP_ERROR): as for a REJ.
            self.free_id(&core);
        }
    }

    fn timewait_exit(&self, _id: &CmIdRef) {
        let Some(core) = Core::get() else {
            return;
        };
        self.record(EventKind::TimewaitExit, 0, &[]);
        let test = self.test_hooks();
        test.before_timewait_free();
        self.free_id(&core);
        test.after_timewait_free();
    }
}
