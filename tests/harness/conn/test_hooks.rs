// SPDX-License-Identifier: GPL-2.0

//! The test-only behaviours, in one place: the `ctl` options with which the
//! tests hold open the windows of an id's lifecycle and play careless
//! consumers and broken peers ([`TestHooks`]), and what each does at its
//! point of an endpoint's life (the methods of [`TestHooks`], which the
//! endpoint calls at those points and which do nothing without hooks).
//! Nothing else sets them: an endpoint carries them only if the tests asked
//! for one (`Behaviour::test`), and without them the module behaves as a
//! consumer would. Also here: the test-only access to a connection
//! ([`Core::with_test_conn`]).

use super::{
    behaviour::{Behaviour, OnDreq, OnRep, OnReq, TestHooks},
    endpoint::{Endpoint, EpHandle, EventKind, Role},
    now_ns,
    table::Core,
};
use crate::cm::{CmId, CmIdRef};
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::{
    new_mutex,
    prelude::*,
    rdma::{
        device::Device,
        verbs::{Access, Cq, Mr, Pd, QpAttr, QpRef, QpSize, RcQp, Waker, WcStatus, WrKind},
    },
    str::CStr,
    sync::{Arc, Mutex},
    time::{delay::fsleep, msecs_to_jiffies, Delta},
};

/// A QP of 1 + 1 on `dev`, with a PD and a CQ of its own (2 entries more
/// for its drain).
fn lone_qp(dev: &Device) -> Result<RcQp> {
    let caller = kernel::c_str!("rcd_harness");
    let pd = Arc::new(Pd::new(dev, caller)?, GFP_KERNEL)?;
    let size = QpSize {
        send: 1,
        recv: 1,
        sge: 2,
        caller,
    };
    RcQp::new(pd, Cq::new(dev, 4, caller)?, size)
}

/// Moves `qp` to INIT on port 1, posts a receive and moves it to the error
/// state: the receive's flushed completion comes.
fn flushed_recv(qp: &mut RcQp) -> Result {
    qp.modify(&QpAttr::to_init(1, 0, Access::LOCAL_WRITE))?;
    qp.post_recv(KVec::from_elem(0u8, 64, GFP_KERNEL)?)?;
    qp.modify(&QpAttr::to_error())
}

/// A test hook's step `what` of `hook`, logged: `EPROTO` unless `ok`.
fn step(hook: &str, what: &str, ok: bool) -> Result {
    pr_info!("{}: {}: {}\n", hook, what, if ok { "ok" } else { "FAILED" });
    if ok {
        Ok(())
    } else {
        Err(EPROTO)
    }
}

/// Sleeps at least `ms` milliseconds.
fn sleep_ms(ms: u32) {
    fsleep(Delta::from_millis(i64::from(ms)));
}

impl TestHooks {
    /// A listener's REQ callback, first (`on_req=close`): closes the
    /// listener, dropping its `CmId` inside its own REQ callback (the CM
    /// holds the listener until the callback returns: the `cm` abstraction
    /// defers the destroy).
    pub(super) fn before_req(&self, core: &Core, listener: &Endpoint) {
        if self.on_req == OnReq::Close {
            drop(core.remove_own(listener));
        }
    }

    /// Before a listener's REQ callback queues its passive end's job
    /// (`on_req=fail_job`): fails as if queueing it had failed.
    pub(super) fn spawn_job(&self) -> Result {
        match self.on_req {
            OnReq::FailJob | OnReq::RepThenFail => Err(ENOMEM),
            _ => Ok(()),
        }
    }

    /// A passive end's job, after it made the QP and before the QP's moves
    /// and the REP (`on_req=job_delay:MS`): waits up to MS ms, cut short
    /// once the entry leaves the table or the id is freed (a REJ, a failed
    /// REP). Woken by either (`Core::ends_changed`): both come under the
    /// endpoint's lock (the handshake taken out of its state, the entry's
    /// `gone`), which this holds from its look to its wait, so no wake-up
    /// is lost.
    pub(super) fn job_delay(&self, ep: &Endpoint) {
        let ms = match self.on_req {
            OnReq::JobDelay(ms) => ms,
            OnReq::JobSleep(ms) => {
                sleep_ms(ms);
                return;
            }
            _ => return,
        };
        let Some(core) = Core::get() else {
            return;
        };
        let end = now_ns() + i64::from(ms) * 1_000_000;
        let mut st = ep.st.lock();
        loop {
            let left = end - now_ns();
            if left <= 0 || ep.gone.load(Ordering::Relaxed) || st.handshake.is_none() {
                return;
            }
            let left = u32::try_from((left + 999_999) / 1_000_000).unwrap_or(u32::MAX);
            let _ = core
                .ends_changed
                .wait_interruptible_timeout(&mut st, msecs_to_jiffies(left));
        }
    }

    /// An active end's REP callback, first (`on_rep=`): whether it goes on
    /// (QP to RTR and RTS, the RTU); with `ignore` it sends nothing, with
    /// `reject` a REJ.
    pub(super) fn on_rep(&self, id: &CmIdRef) -> bool {
        match self.on_rep {
            OnRep::Accept => true,
            OnRep::Ignore => false,
            OnRep::Reject => {
                let _ = id.send_rej(b"on_rep=reject");
                false
            }
        }
    }

    /// The DREQ callback, first (`on_dreq=sleep:MS`): sleeps, so that the
    /// DREP is late too.
    pub(super) fn before_dreq(&self) {
        if let OnDreq::Sleep(ms) = self.on_dreq {
            sleep_ms(ms);
        }
    }

    /// The DREQ callback, last, without the endpoint's lock (`on_dreq=`):
    /// the careless consumer's action, its result recorded as `ON_DREQ`.
    pub(super) fn after_dreq(&self, core: &Core, ep: &Endpoint, id: &CmIdRef) {
        let res = match self.on_dreq {
            OnDreq::Nothing => return,
            OnDreq::Sleep(_) => Ok(()),
            OnDreq::Dreq => id.send_dreq(b"from-callback"),
            // Our own connection, on the id of this callback.
            OnDreq::Disconnect => ep.disconnect_on(core, Some(id), &[]),
            OnDreq::DisconnectOther(num) => core.disconnect(num, &[]),
            OnDreq::CloseOther(num) => core.close(num),
        };
        let status = res.err().map_or(0, |e| e.to_errno());
        ep.record(EventKind::OnDreq, status, &[]);
    }

    /// A `*_ERROR` callback, last, without the endpoint's lock
    /// (`on_error=sleep:MS`): sleeps, then uses its id (reads its state).
    pub(super) fn after_error(&self, num: u32, id: &CmIdRef) {
        if self.error_sleep > 0 {
            sleep_ms(self.error_sleep);
            pr_info!(
                "conn {}: after an error callback's {} ms: id {:#x} in {}\n",
                num,
                self.error_sleep,
                id.local_id(),
                id.state().name()
            );
        }
    }

    /// The timewait-exit callback, before it frees the id
    /// (`on_timewait=sleep:MS`): widens the window of a callback in flight.
    pub(super) fn before_timewait_free(&self) {
        if self.timewait_sleep > 0 && !self.timewait_after {
            sleep_ms(self.timewait_sleep);
        }
    }

    /// The timewait-exit callback, after it freed the id
    /// (`on_timewait=after:MS`): still in module code once nothing refers
    /// to the id, the window an unload must wait for.
    pub(super) fn after_timewait_free(&self) {
        if self.timewait_sleep > 0 && self.timewait_after {
            sleep_ms(self.timewait_sleep);
        }
    }
}

impl Endpoint {
    /// The endpoint's test hooks: [`TestHooks::NONE`] unless the tests set
    /// some.
    pub(super) fn test_hooks(&self) -> TestHooks {
        let st = self.st.lock();
        st.behaviour
            .test
            .as_deref()
            .copied()
            .unwrap_or(TestHooks::NONE)
    }
}

impl Core {
    /// Runs `f` on the id and QP of connection `num`, for the test-only
    /// `rcd_test_with_conn()` (`test_conn`). The table's lock keeps the id,
    /// the endpoint's lock the QP: neither is freed until `f` returns
    /// (timewait exit frees the QP under the endpoint's lock and the id
    /// under the table's; close, device removal and unload take the entry
    /// out under the table's). `f` must neither post on the QP nor poll its
    /// CQ (`rcd_test.h`): every request on it carries one of our `ib_cqe`s.
    pub(crate) fn with_test_conn<R>(
        &self,
        num: u32,
        f: impl FnOnce(&CmIdRef, &QpRef) -> R,
    ) -> Result<R> {
        let inner = self.inner.lock();
        let conn = inner.conns.get(&num).ok_or(ENOENT)?;
        let cm = conn.cm.as_ref().ok_or(ENOTCONN)?;
        let st = conn.ep.st.lock();
        let qp = st.verbs.as_ref().ok_or(ENODEV)?.qp();
        Ok(f(cm, qp))
    }

    /// `hold_id DEV MS` (tests only): a `CmId` on DEV
    /// that nothing else refers to, kept outside the table (device removal
    /// does not see it) and with no reference of ours on DEV (the handle is
    /// dropped at once, as a careless consumer may). The write sleeps MS ms
    /// (at most 60,000), then uses the id (its device's name, its state)
    /// and drops it. Only the id's own reference on its device keeps the
    /// device meanwhile (`kernel::rdma::cm`: `Inner::device`): `rdma link
    /// del DEV` must wait for this write, and the use is of a live device.
    pub(crate) fn hold_id(self: &Arc<Self>, device: &CStr, ms: u32) -> Result {
        if ms > 60_000 {
            return Err(EINVAL);
        }
        let cm = {
            let dev = self.device_by_name(device)?;
            let ep = Endpoint::new(0, Role::Listener, &dev, 0, false, Behaviour::default())?;
            CmId::new(&dev, &self.reaper, EpHandle::new(ep))?
        };
        pr_info!(
            "hold_id: id {:#x} held, no device reference of ours\n",
            cm.local_id()
        );
        sleep_ms(ms);
        pr_info!(
            "hold_id: after {} ms: id {:#x} on {} in {}\n",
            ms,
            cm.local_id(),
            cm.device().name(),
            cm.state().name()
        );
        drop(cm);
        Ok(())
    }

    /// `shared_cq DEV [OTHER]`: QPs that share one CQ of `DEV`, of 12
    /// entries: two QPs of 2 + 2 on it (each reserves 2 more for its
    /// drain), a third is refused (`ENOSPC`). The CQ's work is held (2 s) in
    /// the first QP's waker while the second, its receive posted and
    /// flushed, is freed: the entry of the completion it did not take stays
    /// reserved (a QP of 2 + 2 is refused, one of 1 + 2 fits). The first is
    /// freed during its waker's call, which the free waits for. The CQ's
    /// work then delivers the freed second QP's completion, after the QP is
    /// gone, into what the QP left with the CQ, and its entry comes back: a
    /// QP of 5 + 5 fits, and gets no completion of another. With `OTHER`, a
    /// PD of that device makes no QP with the CQ (`EINVAL`). Each step is logged; the first that
    /// differs fails the write with `EPROTO`.
    pub(crate) fn shared_cq(&self, device: &CStr, other: Option<&CStr>) -> Result {
        let dev = self.device_by_name(device)?;
        let caller = kernel::c_str!("rcd_harness");
        let size = |send, recv| QpSize {
            send,
            recv,
            sge: 1,
            caller,
        };
        let expect = |what: &str, ok: bool| step("shared_cq", what, ok);
        let pd = Arc::new(Pd::new(&dev, caller)?, GFP_KERNEL)?;
        let cq = Cq::new(&dev, 12, caller)?;
        let qp = |send, recv| RcQp::new(pd.clone(), cq.clone(), size(send, recv));
        let is = |r: &Result<RcQp>, errno: Error| matches!(r, Err(e) if *e == errno);
        let mut first = qp(2, 2)?;
        let mut second = qp(2, 2)?;
        expect(
            "a QP beyond the CQ's entries: ENOSPC",
            is(&qp(1, 0), ENOSPC),
        )?;
        // 0: not called yet; 1: sleeping; 2: returned.
        let held = Arc::new(AtomicU32::new(0), GFP_KERNEL)?;
        let h = held.clone();
        let waker: Waker = Arc::new(
            move || {
                if h.swap(1, Ordering::SeqCst) == 0 {
                    sleep_ms(2000);
                }
                h.store(2, Ordering::SeqCst);
            },
            GFP_KERNEL,
        )?;
        first.set_waker(Some(waker));
        flushed_recv(&mut first)?;
        let mut waited = 0;
        while held.load(Ordering::SeqCst) == 0 && waited < 10_000 {
            sleep_ms(10);
            waited += 10;
        }
        expect("the CQ's work held", held.load(Ordering::SeqCst) == 1)?;
        flushed_recv(&mut second)?;
        // Time for the device to queue the flush on the CQ.
        sleep_ms(200);
        drop(second);
        expect(
            "a QP freed, its completion not taken, the CQ's work still held",
            held.load(Ordering::SeqCst) == 1,
        )?;
        expect(
            "its pending entry kept: 2 + 2 refused",
            is(&qp(2, 2), ENOSPC),
        )?;
        expect("its other 5 given back: 1 + 2 fits", qp(1, 2).is_ok())?;
        drop(first);
        expect(
            "a QP freed during its waker's call, after the call",
            held.load(Ordering::SeqCst) == 2,
        )?;
        let mut fourth = Err(ENOSPC);
        waited = 0;
        while is(&fourth, ENOSPC) && waited < 10_000 {
            sleep_ms(10);
            waited += 10;
            fourth = qp(5, 5);
        }
        expect(
            "the late completion came, its entry back: 5 + 5 fits",
            fourth.is_ok(),
        )?;
        let stray = matches!(fourth?.poll_one(), Ok(Some(_)));
        expect("the new QP got no completion of another", !stray)?;
        if let Some(other) = other {
            let dev2 = self.device_by_name(other)?;
            let pd2 = Arc::new(Pd::new(&dev2, caller)?, GFP_KERNEL)?;
            let r = RcQp::new(pd2, cq.clone(), size(1, 1));
            expect("a PD of another device: EINVAL", is(&r, EINVAL))?;
        }
        Ok(())
    }

    /// `qp_ports DEV`: a QP of `DEV` refuses a move to INIT on port 0 and
    /// on the port after its device's last (`EINVAL`, before the RDMA core
    /// reads the device's ports there), and takes one on its first port.
    /// Each step is logged; the first that differs fails with `EPROTO`.
    pub(crate) fn qp_ports(&self, device: &CStr) -> Result {
        let dev = self.device_by_name(device)?;
        let mut qp = lone_qp(&dev)?;
        let ports = dev.ports();
        let mut to_init = |port| qp.modify(&QpAttr::to_init(port, 0, Access::LOCAL_WRITE));
        let r = to_init(0);
        step("qp_ports", "port 0: EINVAL", r == Err(EINVAL))?;
        let r = to_init(ports.end() + 1);
        step(
            "qp_ports",
            "the port after the last: EINVAL",
            r == Err(EINVAL),
        )?;
        let r = to_init(*ports.start());
        step("qp_ports", "the first port: taken", r.is_ok())
    }

    /// `mr_sizes DEV`: an MR of `DEV` is made with the size its user asks
    /// for (its capacity), not of 0 bytes, nor of more pages than the
    /// device's fast-registration page list takes (one more than the size
    /// needs: the memory may start anywhere in its first page). Each step
    /// is logged; the first that differs fails with `EPROTO`.
    pub(crate) fn mr_sizes(&self, device: &CStr) -> Result {
        let dev = self.device_by_name(device)?;
        let pd = Arc::new(Pd::new(&dev, kernel::c_str!("rcd_harness"))?, GFP_KERNEL)?;
        let page = kernel::page::PAGE_SIZE;
        // SAFETY: The device is registered; its attributes are fixed.
        let list = unsafe { (*dev.as_raw()).attrs.max_fast_reg_page_list_len } as usize;
        let cap = Mr::new(&pd, 3 * page).map(|m| m.capacity());
        step(
            "mr_sizes",
            "three pages: made, of that capacity",
            cap == Ok(3 * page),
        )?;
        step(
            "mr_sizes",
            "0 bytes: EINVAL",
            Mr::new(&pd, 0).err() == Some(EINVAL),
        )?;
        let r = Mr::new(&pd, (list - 1) * page + 1);
        step(
            "mr_sizes",
            "a page list too long: EINVAL",
            r.err() == Some(EINVAL),
        )?;
        let r = Mr::new(&pd, 8 * page - 1).map(|m| m.capacity());
        step(
            "mr_sizes",
            "a size not of whole pages",
            r == Ok(8 * page - 1),
        )
    }

    /// `qp_drain DEV`: a QP of 1 + 1 of `DEV` in INIT, its receive queue
    /// full (one receive posted), drained (`RcQp::drain()`, the core's
    /// `ib_drain_qp()`, whose own receive needs the room the QP keeps for
    /// it): the drain hands back the receive, flushed, and leaves nothing
    /// posted. Each step is logged; the first that differs fails with
    /// `EPROTO`.
    pub(crate) fn qp_drain(&self, device: &CStr) -> Result {
        let dev = self.device_by_name(device)?;
        let mut qp = lone_qp(&dev)?;
        qp.modify(&QpAttr::to_init(1, 0, Access::LOCAL_WRITE))?;
        qp.post_recv(KVec::from_elem(0u8, 64, GFP_KERNEL)?)?;
        let full = !qp.has_room(WrKind::Recv, 1);
        step("qp_drain", "the receive queue full", full)?;
        let mut got = KVec::new();
        let left = qp.drain(|c| {
            let _ = got.push((c.kind, c.status, c.buf.len()), GFP_KERNEL);
        });
        let flushed = got.as_slice() == [(Some(WrKind::Recv), WcStatus::WrFlushErr, 64)];
        step(
            "qp_drain",
            "its receive back, flushed, with its buffer",
            flushed,
        )?;
        step(
            "qp_drain",
            "nothing left posted",
            left == 0 && qp.outstanding_all() == 0,
        )
    }

    /// `qp_sgl DEV`: requests of several buffers and unsignalled SENDs, on
    /// QPs of 1 + 1 of `DEV` in INIT with two buffers a request: a receive
    /// of three refused (`EINVAL`), nothing posted; one of two
    /// holds both and the drain hands both back, in order; an unsignalled
    /// SEND refused (`ENOMEM`: no room for a signalled one after it), where
    /// a signalled one reaches the device (which refuses it in INIT,
    /// `EINVAL`). Each step is logged; the first that differs fails with
    /// `EPROTO`.
    pub(crate) fn qp_sgl(&self, device: &CStr) -> Result {
        let dev = self.device_by_name(device)?;
        let buf = |n| KVec::from_elem(0u8, n, GFP_KERNEL);
        let bufs = |sizes: &[usize]| -> Result<KVec<KVec<u8>>> {
            let mut v = KVec::new();
            for &n in sizes {
                v.push(buf(n)?, GFP_KERNEL)?;
            }
            Ok(v)
        };
        let mut qp = lone_qp(&dev)?;
        qp.modify(&QpAttr::to_init(1, 0, Access::LOCAL_WRITE))?;
        let r = qp.post_recv_sg(buf(64)?, bufs(&[32, 16])?);
        let none = qp.outstanding_all() == 0 && qp.bufs_mapped() == 0;
        step("qp_sgl", "three buffers refused", r == Err(EINVAL) && none)?;
        qp.post_recv_sg(buf(64)?, bufs(&[32])?)?;
        step("qp_sgl", "two buffers held", qp.bufs_mapped() == 2)?;
        let mut got = KVec::new();
        let left = qp.drain(|c| {
            let more = c.more.first().map(|b| b.len());
            let _ = got.push((c.status, c.buf.len(), c.more.len(), more), GFP_KERNEL);
        });
        let back = got.as_slice() == [(WcStatus::WrFlushErr, 64, 1, Some(32))];
        step("qp_sgl", "both back, in order", back && left == 0)?;
        let mut qp = lone_qp(&dev)?;
        qp.modify(&QpAttr::to_init(1, 0, Access::LOCAL_WRITE))?;
        let r = qp.post_send_sg(buf(16)?, KVec::new(), false);
        step(
            "qp_sgl",
            "an unsignalled SEND with no room after it",
            r == Err(ENOMEM),
        )?;
        let r = qp.post_send(buf(16)?);
        let none = qp.outstanding_all() == 0;
        step(
            "qp_sgl",
            "a signalled one reaches the device",
            r == Err(EINVAL) && none,
        )
    }

    /// `waker_owns_qp DEV`: a QP whose waker owns the QP's last other
    /// reference, cleared during a call of it: the clear returns after the
    /// call, and the QP is freed where its owner drops it, not in the CQ's
    /// work (whose free of the QP would wait for the call it is in).
    /// Each step is logged; the first that differs fails with `EPROTO`.
    pub(crate) fn waker_owns_qp(&self, device: &CStr) -> Result {
        let dev = self.device_by_name(device)?;
        let qp = lone_qp(&dev)?;
        let owner: Arc<Mutex<Option<RcQp>>> =
            Arc::pin_init(new_mutex!(Some(qp), "waker_owns_qp"), GFP_KERNEL)?;
        // 0: not called yet; 1: in the call; 2: returned.
        let held = Arc::new(AtomicU32::new(0), GFP_KERNEL)?;
        let (h, o) = (held.clone(), owner.clone());
        let waker: Waker = Arc::new(
            move || {
                // The closure owns `o`, a reference to the QP's owner.
                let _ = &o;
                if h.swap(1, Ordering::SeqCst) == 0 {
                    sleep_ms(1000);
                }
                h.store(2, Ordering::SeqCst);
            },
            GFP_KERNEL,
        )?;
        {
            let mut guard = owner.lock();
            let qp = Option::as_mut(&mut *guard).ok_or(EINVAL)?;
            qp.set_waker(Some(waker));
            flushed_recv(qp)?;
        }
        let mut waited = 0;
        while held.load(Ordering::SeqCst) == 0 && waited < 10_000 {
            sleep_ms(10);
            waited += 10;
        }
        let called = held.load(Ordering::SeqCst) == 1;
        owner.lock().as_ref().ok_or(EINVAL)?.set_waker(None);
        let after = held.load(Ordering::SeqCst) == 2;
        if called && !after {
            // Cleared during the call: the CQ's work still holds the waker,
            // and would free the QP (waiting for its own call) if it
            // dropped the last reference. Once the call and that drop are
            // over, the owner's is the last again.
            while held.load(Ordering::SeqCst) != 2 && waited < 10_000 {
                sleep_ms(10);
                waited += 10;
            }
            sleep_ms(100);
        }
        // The owner's is the QP's last reference: the QP is freed here.
        let qp = owner.lock().take();
        drop(qp);
        step("waker_owns_qp", "the waker called", called)?;
        step("waker_owns_qp", "cleared after the call in progress", after)
    }

    /// `qp_refusals DEV`: the moves of a QP of `DEV` only its owner may
    /// make, and only once nothing is posted. With a receive posted: RESET
    /// through the owner is refused (`EBUSY`), RESET and an address vector
    /// through a borrowed `QpRef` are refused (`EINVAL`), all before
    /// `ib_modify_qp()`. Once the flushed receive's completion is taken,
    /// the owner's RESET is done. The test counts the calls of
    /// `ib_modify_qp()`: to INIT, to the error state and to RESET.
    /// Each step is logged; the first that differs fails with `EPROTO`.
    pub(crate) fn qp_refusals(&self, device: &CStr) -> Result {
        let hook = "qp_refusals";
        let dev = self.device_by_name(device)?;
        let mut qp = lone_qp(&dev)?;
        qp.modify(&QpAttr::to_init(1, 0, Access::LOCAL_WRITE))?;
        qp.post_recv(KVec::from_elem(0u8, 64, GFP_KERNEL)?)?;
        let r = qp.modify(&QpAttr::to_reset());
        step(hook, "RESET, a receive posted: EBUSY", r == Err(EBUSY))?;
        let r = qp.qp().modify(&QpAttr::to_reset());
        step(hook, "RESET through a QpRef: EINVAL", r == Err(EINVAL))?;
        // INIT to RTR with an address vector: the GID entry the core
        // looks up itself (none given), the QP's own address.
        let mut raw = kernel::bindings::ib_qp_attr {
            qp_state: kernel::bindings::ib_qp_state_IB_QPS_RTR,
            path_mtu: kernel::bindings::ib_mtu_IB_MTU_1024,
            dest_qp_num: qp.qp_num(),
            ..Default::default()
        };
        raw.ah_attr.type_ = kernel::bindings::rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE;
        raw.ah_attr.port_num = 1;
        raw.ah_attr.ah_flags = kernel::bindings::ib_ah_flags_IB_AH_GRH as u8;
        raw.ah_attr.grh.sgid_index = 1;
        raw.ah_attr.grh.hop_limit = 64;
        let mask = kernel::bindings::ib_qp_attr_mask_IB_QP_STATE
            | kernel::bindings::ib_qp_attr_mask_IB_QP_AV
            | kernel::bindings::ib_qp_attr_mask_IB_QP_PATH_MTU
            | kernel::bindings::ib_qp_attr_mask_IB_QP_DEST_QPN
            | kernel::bindings::ib_qp_attr_mask_IB_QP_RQ_PSN
            | kernel::bindings::ib_qp_attr_mask_IB_QP_MAX_DEST_RD_ATOMIC
            | kernel::bindings::ib_qp_attr_mask_IB_QP_MIN_RNR_TIMER;
        let av = QpAttr::from_cm(&dev, raw, mask as kernel::ffi::c_int)?;
        let r = qp.qp().modify(&av);
        step(
            hook,
            "an address vector through a QpRef: EINVAL",
            r == Err(EINVAL),
        )?;
        qp.modify(&QpAttr::to_error())?;
        let mut waited = 0;
        while qp.outstanding_all() > 0 && waited < 10_000 {
            while qp.poll_one()?.is_some() {}
            sleep_ms(10);
            waited += 10;
        }
        step(hook, "the flushed receive taken", qp.outstanding_all() == 0)?;
        let r = qp.modify(&QpAttr::to_reset());
        step(hook, "RESET, nothing posted: done", r.is_ok())
    }

    /// `occupy_pollers N`: `n` work items on the pollers' queue, each
    /// waiting until `release_pollers` (or unload): the queue of the long
    /// running work kept full, as enough endless rping peers would keep it
    /// (more items than it runs at once: the rest wait).
    pub(crate) fn occupy_pollers(self: &Arc<Self>, n: u32) -> Result {
        if n > 4096 {
            return Err(EINVAL);
        }
        for _ in 0..n {
            let core = self.clone();
            self.bounds.pollers.spawn(move || {
                let b = &core.bounds;
                b.occupiers.fetch_add(1, Ordering::Relaxed);
                b.occupied.wait_for_completion();
                b.occupiers.fetch_sub(1, Ordering::Relaxed);
            })?;
        }
        Ok(())
    }

    /// `release_pollers`: the items of `occupy_pollers` return (for good:
    /// a later `occupy_pollers` returns at once).
    pub(crate) fn release_pollers(&self) {
        self.bounds.occupied.complete_all();
    }
}
