// SPDX-License-Identifier: GPL-2.0

//! The completions of an [`RcQp`]'s CQ: taken one at a time by the user
//! ([`RcQp::poll_one`]), or slept for while the QP's flushes come back
//! ([`RcQp::drain`]), woken by the CQ's completion events.

use super::{
    mapping::Mapping,
    mr::MrState,
    wc::{Completion, WcStatus, WrKind},
    RcQp,
};
use crate::{
    bindings,
    ffi::{c_int, c_void},
    prelude::*,
    time::{msecs_to_jiffies, Instant, Monotonic},
    types::Opaque,
};

/// The CQ's completion events, as a `struct completion` the CQ's handler
/// completes once per event: [`RcQp::drain`] sleeps on it.
///
/// Not a `kernel::sync::Completion`: the CQ's handler is C's, called with
/// the raw pointer as its context, it completes one event at a time
/// (`complete()`), and the drain waits with a timeout.
///
/// # Invariants
///
/// The `completion` is initialised (`init_completion()`) and, boxed, never
/// moves.
pub(super) struct CqEvents(pub(super) Opaque<bindings::completion>);

impl CqEvents {
    pub(super) fn new() -> Result<KBox<Self>> {
        let this = KBox::new(Self(Opaque::uninit()), GFP_KERNEL)?;
        let c = this.0.get();
        // SAFETY: `c` is valid for writes and stays where it is (boxed).
        unsafe { bindings::init_completion(c) };
        // INVARIANT: initialised above, in its box.
        Ok(this)
    }

    /// The CQ's `comp_handler`, called by the driver (any context, IRQs
    /// perhaps off) for an event requested with `ib_req_notify_cq()`.
    ///
    /// # Safety
    ///
    /// `ctx` is the `completion` of a live [`CqEvents`] (the CQ's context,
    /// which outlives the CQ).
    pub(super) unsafe extern "C" fn handler(_cq: *mut bindings::ib_cq, ctx: *mut c_void) {
        // SAFETY: By the function's safety requirement; `complete()` may be
        // called from any context.
        unsafe { bindings::complete(ctx.cast()) };
    }
}

impl RcQp {
    /// Takes one completion from the CQ, if there is one, with its work
    /// request's buffer back.
    pub fn poll_one(&mut self) -> Result<Option<Completion>> {
        let mut wc = bindings::ib_wc::default();
        // SAFETY: By the type invariant the CQ is live and polled only here
        // (under `&mut self`); `wc` is valid for one entry.
        let got = unsafe { bindings::ib_poll_cq(self.cq.as_ptr(), 1, &mut wc) };
        if got < 0 {
            return Err(Error::from_errno(got));
        }
        if got == 0 {
            return Ok(None);
        }
        // SAFETY: Every work request on this QP is posted with a `wr_id`
        // (never a `wr_cqe`): both are a `u64`-sized union member.
        let wr_id = unsafe { wc.__bindgen_anon_1.wr_id };
        let posted = usize::try_from(wr_id)
            .ok()
            .and_then(|i| self.wrs.get_mut(i))
            .and_then(Option::take);
        // The request is over: its buffer is unmapped and handed back.
        let mut mr = None;
        let (kind, buf) = match posted {
            Some(p) => {
                if matches!(p.kind, WrKind::RegMr | WrKind::LocalInv) {
                    mr = Some(p.mr);
                }
                let mut buf = p.buf.into_buf();
                if let Some(m) = self.mrs.get_mut(p.mr) {
                    match (p.kind, WcStatus::from_raw(wc.status)) {
                        (WrKind::RegMr, WcStatus::Success) => m.state = MrState::Valid,
                        // Invalidated: the peer's rkey no longer reaches the
                        // buffer, which goes back with this completion.
                        (WrKind::LocalInv, WcStatus::Success) => {
                            buf = m.buf.take().map_or_else(KVec::new, Mapping::into_buf);
                        }
                        (WrKind::RegMr | WrKind::LocalInv, _) => m.state = MrState::Failed,
                        _ => {}
                    }
                }
                (Some(p.kind), buf)
            }
            None => (None, KVec::new()),
        };
        Ok(Some(Completion {
            status: WcStatus::from_raw(wc.status),
            kind,
            byte_len: wc.byte_len,
            buf,
            mr,
        }))
    }

    /// Ends every posted work request before the QP is freed, as
    /// `ib_drain_qp()` would (which a CQ the consumer polls cannot use):
    /// moves the QP to the error state if anything is posted, so that the
    /// device flushes it, and hands each completion to `f`, sleeping until
    /// the CQ reports the next one (`ib_req_notify_cq()`) for at most
    /// `wait_ms` in all. Returns how many requests did not come back (their
    /// buffers are freed with the QP, after it is destroyed). May sleep.
    pub fn drain(&mut self, wait_ms: u32, mut f: impl FnMut(Completion)) -> u32 {
        if self.outstanding_all() > 0 {
            // Failing, the QP is already in error or gone with the device:
            // what comes back is taken below, the rest is counted.
            let _ = self.qp().to_error();
        }
        let start = Instant::<Monotonic>::now();
        loop {
            while let Ok(Some(c)) = self.poll_one() {
                f(c);
            }
            let left = self.outstanding_all();
            let waited = start.elapsed().as_millis();
            let rest = i64::from(wait_ms).saturating_sub(waited);
            if left == 0 || rest <= 0 {
                return left;
            }
            let flags = bindings::ib_cq_notify_flags_IB_CQ_NEXT_COMP
                | bindings::ib_cq_notify_flags_IB_CQ_REPORT_MISSED_EVENTS;
            // SAFETY: By the type invariant the CQ is live; `req_notify_cq`
            // is a mandatory operation of every kernel verbs driver.
            let armed = unsafe {
                let cq = self.cq.as_ptr();
                match (*(*cq).device).ops.req_notify_cq {
                    Some(notify) => notify(cq, flags),
                    None => -(bindings::EOPNOTSUPP as c_int),
                }
            };
            match armed {
                // Completions came in before the request: poll them.
                1.. => continue,
                // No events to wait for: what is out stays out.
                ..=-1 => return left,
                0 => {}
            }
            // SAFETY: `events` is live (type invariant). An event from before
            // (a count left over) only ends this wait early: the loop polls
            // and asks again.
            unsafe {
                bindings::wait_for_completion_timeout(
                    self.events.0.get(),
                    msecs_to_jiffies(u32::try_from(rest).unwrap_or(u32::MAX)),
                )
            };
        }
    }
}
