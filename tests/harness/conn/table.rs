// SPDX-License-Identifier: GPL-2.0

//! The connection table ([`Core`]) and the device lifecycle: the table's
//! entries and the helpers that find an endpoint's own entry, the counters,
//! device add and removal (the `ib_client`), and emptying the table at unload
//! ([`Owner`]).

use super::{
    bounds::{Bounds, Durations},
    endpoint::{Endpoint, EpHandle, Role},
};
use crate::{
    cm::{CmId, Message},
    devices::{DeviceEntry, Devices},
};
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use kernel::{
    new_condvar, new_mutex,
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation},
    rdma::{client::Client, device::Device},
    str::CStr,
    sync::{aref::ARef, Arc, CondVar, Mutex},
    workqueue::QueueRef,
};

/// An entry of the connection table: the endpoint, and its id until freed.
pub(super) struct Conn {
    pub(super) ep: Arc<Endpoint>,
    pub(super) cm: Option<CmId<EpHandle>>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        // Under the endpoint's lock, which a job waiting for its end to go
        // (`job_delay`) holds from its look at `gone` to its wait: the
        // wake-up is never lost. No entry is dropped with a lock held.
        let _st = self.ep.st.lock();
        self.ep.gone.store(true, Ordering::Relaxed);
        // `None` once the module's core is gone, when no job runs any more.
        if let Some(core) = Core::get() {
            core.ends_changed.notify_all();
        }
    }
}

pub(super) struct CoreInner {
    pub(super) devices: Devices,
    pub(super) conns: RBTree<u32, Conn>,
    /// Connections `close` has taken out of the table and is still
    /// destroying (their id, then their QP): device removal waits for them.
    pub(super) closing: usize,
    /// At least the number of records of freed passive ends in `conns`, all
    /// listeners together: one more for each end freed, the true count
    /// after each scan of [`prune_freed`]. A record that leaves the table
    /// another way leaves it high until the next scan, which costs a scan,
    /// never a record beyond `keep`.
    pub(super) freed_at_most: usize,
}

/// The module's state: devices, connections, counters.
#[pin_data]
pub(crate) struct Core {
    /// The table's lock (`conn::Core::inner`): taken before any endpoint's
    /// (see the lock order in [`super`]).
    #[pin]
    pub(super) inner: Mutex<CoreInner>,
    /// Signalled when `closing` drops to zero.
    #[pin]
    pub(super) closed: CondVar,
    /// Notified when an end's handshake ends or its entry leaves the table:
    /// wakes the test hook `job_delay`.
    #[pin]
    pub(super) ends_changed: CondVar,
    /// Destroys the ids dropped in their own callbacks, and drains and
    /// frees the QPs of ended connections; flushed on device removal and
    /// unload ([`Core::flush_work`]).
    pub(super) reaper: QueueRef,
    /// Ordered: the jobs the listeners' REQ callbacks hand off (bounded
    /// work: a passive end's QP and REP), one at a time; flushed with
    /// `reaper`, first, as a job may queue a destroy.
    pub(super) jobs: QueueRef,
    /// What bounds what a peer can make the module hold: the queue of the
    /// long-running work, the DREQs waiting for their deadline, the counts.
    #[pin]
    pub(super) bounds: Bounds,
    pub(super) next_foreign: AtomicUsize,
    pub(crate) dreq_sent: AtomicU64,
    pub(crate) dreq_failed: AtomicU64,
    pub(crate) drep_sent: AtomicU64,
    pub(crate) drep_failed: AtomicU64,
    /// Endpoints that reached ESTABLISHED, and DREPs received: cheap to
    /// read (`stats`) for whoever waits on many connections.
    pub(super) established: AtomicU64,
    pub(super) drep_received: AtomicU64,
    /// REQ callbacks of the listeners and their passive ends' REPs.
    pub(super) req_times: Durations,
    pub(super) rep_times: Durations,
}

impl Core {
    pub(crate) fn new(
        reaper: QueueRef,
        jobs: QueueRef,
        pollers: QueueRef,
        sweepers: QueueRef,
    ) -> impl PinInit<Self> {
        pin_init!(Self {
            inner <- new_mutex!(
                CoreInner {
                    devices: Devices::new(),
                    conns: RBTree::new(),
                    closing: 0,
                    freed_at_most: 0,
                },
                "conn::Core::inner"
            ),
            closed <- new_condvar!("conn::Core::closed"),
            ends_changed <- new_condvar!("conn::Core::ends_changed"),
            reaper,
            jobs,
            bounds <- Bounds::new(pollers, sweepers),
            next_foreign: AtomicUsize::new(0),
            dreq_sent: AtomicU64::new(0),
            dreq_failed: AtomicU64::new(0),
            drep_sent: AtomicU64::new(0),
            drep_failed: AtomicU64::new(0),
            established: AtomicU64::new(0),
            drep_received: AtomicU64::new(0),
            req_times: Durations::new(),
            rep_times: Durations::new(),
        })
    }

    /// Waits for every job and destroy queued so far: jobs first, as a job
    /// may queue a destroy. Never from a CM callback or one of these jobs.
    pub(super) fn flush_work(&self) {
        self.jobs.flush();
        self.reaper.flush();
    }

    /// Puts `ep` with its id `cm` in the table as connection `num`:
    /// `ENODEV` if its device has gone, `EEXIST` if `num` is taken. On an
    /// error the id is dropped after the lock (see the lock order).
    pub(super) fn insert(&self, num: u32, ep: Arc<Endpoint>, cm: CmId<EpHandle>) -> Result {
        // Allocated before the lock: a failed allocation under it would drop
        // the id there.
        let node = match RBTreeNodeReservation::new(GFP_KERNEL) {
            Ok(node) => node,
            Err(e) => {
                drop(cm);
                return Err(e);
            }
        };
        let mut inner = self.inner.lock();
        if !inner.devices.contains(ep.dev_index) {
            // The device went away while the connection was being set up.
            drop(inner);
            drop(cm);
            return Err(ENODEV);
        }
        if inner.conns.get(&num).is_some() {
            drop(inner);
            drop(cm);
            return Err(EEXIST);
        }
        let conn = Conn { ep, cm: Some(cm) };
        // Nothing is replaced: `num` was free under this lock.
        inner.conns.insert(node.into_node(num, conn));
        Ok(())
    }

    /// Destroys the id of `ep`'s own entry (not of whatever else may have
    /// its number by now), from one of the id's callbacks: queued on the
    /// reaper under the table's lock, so that device removal and unload,
    /// which take ids out under that lock and then flush the reaper, either
    /// find the id or wait for its destroy.
    ///
    /// A passive end's record then counts among its listener's records of
    /// freed ends, which are pruned beyond the listener's `keep` here.
    pub(super) fn destroy_own_cm(&self, ep: &Endpoint) {
        // Read before the table's lock (which comes first in the order).
        let keep = ep.st.lock().behaviour.keep;
        let mut inner = self.inner.lock();
        let mut freed = false;
        if let Some(conn) = inner.conns.get_mut(&ep.num) {
            if core::ptr::eq(&*conn.ep, ep) {
                if let Some(cm) = conn.cm.take() {
                    cm.destroy_deferred();
                    freed = true;
                }
            }
        }
        if !freed || ep.role != Role::Passive {
            return;
        }
        inner.freed_at_most += 1;
        if inner.freed_at_most <= keep as usize {
            // No listener has more than `keep`: no scan (scanning the
            // whole table at every timewait exit, 1,000 and more kept
            // records, took 0.26 s of the CM's workqueue in a storm of
            // 2,000 connections).
            return;
        }
        let pruned = prune_freed(&mut inner, ep.listener, keep);
        drop(inner);
        self.bounds
            .counts
            .prune_scans
            .fetch_add(1, Ordering::Relaxed);
        // Their endpoints go without the lock, and off the sweeper's list.
        let n = pruned.iter().flatten().count();
        for conn in pruned.iter().flatten() {
            self.forget_pending(&conn.ep);
        }
        drop(pruned);
        self.bounds
            .counts
            .records_pruned
            .fetch_add(n as u64, Ordering::Relaxed);
    }

    /// Takes `ep`'s own entry out of the table (none if its number now
    /// belongs to another endpoint).
    pub(super) fn remove_own(&self, ep: &Endpoint) -> Option<Conn> {
        let mut inner = self.inner.lock();
        match inner.conns.get(&ep.num) {
            Some(conn) if core::ptr::eq(&*conn.ep, ep) => inner.conns.remove(&ep.num),
            _ => None,
        }
    }

    /// The usable device called `name`, held by reference: `ENODEV` if no
    /// device of the set has that name.
    pub(super) fn device_by_name(&self, name: &CStr) -> Result<ARef<Device>> {
        self.inner.lock().devices.find(name).ok_or(ENODEV)
    }

    /// The usable device `index`, held by reference: `ENODEV` once its
    /// removal has begun.
    pub(super) fn device_at(&self, index: u32) -> Result<ARef<Device>> {
        self.inner.lock().devices.get(index).ok_or(ENODEV)
    }

    /// Runs `f` on the id of `ep`, which is connection `num`: `ENOENT` if
    /// `num` is now another endpoint or gone, `ENOTCONN` if the id was freed.
    pub(super) fn with_own_cm<R>(
        &self,
        num: u32,
        ep: &Arc<Endpoint>,
        f: impl FnOnce(&CmId<EpHandle>) -> Result<R>,
    ) -> Result<R> {
        self.with_conn(num, |cm, e| {
            if !core::ptr::eq(e, &**ep) {
                return Err(ENOENT);
            }
            f(cm)
        })
    }

    /// Runs `f` on the id and endpoint of connection `num` (the table's
    /// lock held): `ENOENT` if there is no such connection, `ENOTCONN` if its
    /// id was already freed.
    pub(super) fn with_conn<R>(
        &self,
        num: u32,
        f: impl FnOnce(&CmId<EpHandle>, &Endpoint) -> Result<R>,
    ) -> Result<R> {
        let inner = self.inner.lock();
        let conn = inner.conns.get(&num).ok_or(ENOENT)?;
        f(conn.cm.as_ref().ok_or(ENOTCONN)?, &conn.ep)
    }

    /// Counts a DREQ or DREP sent or failed (the harness sends no other
    /// message through the product).
    pub(super) fn count(&self, msg: Message, sent: bool) {
        let counter = match (msg, sent) {
            (Message::Dreq, true) => &self.dreq_sent,
            (Message::Drep, true) => &self.drep_sent,
            (Message::Dreq, false) => &self.dreq_failed,
            (Message::Drep, false) => &self.drep_failed,
            _ => return,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn ep(&self, num: u32) -> Result<Arc<Endpoint>> {
        let inner = self.inner.lock();
        Ok(inner.conns.get(&num).ok_or(ENOENT)?.ep.clone())
    }

    /// Waits until no `close` is destroying a connection it took out of
    /// the table. A close waits only for its id's callbacks, never for
    /// device removal, so this ends.
    fn wait_for_closes(&self) {
        let mut inner = self.inner.lock();
        while inner.closing != 0 {
            self.closed.wait(&mut inner);
        }
    }

    /// Frees the id and QP of every endpoint on device `index`. The
    /// endpoints keep their records (`state=FREED`): a connection that was
    /// not over yet gets its DISCONNECTED event, with `-ENODEV`.
    fn remove_all_on(&self, index: u32) {
        let on = |c: &Conn| c.ep.dev_index == index && c.cm.is_some();
        loop {
            let mut batch = KVec::new();
            let mut one = None;
            {
                let mut inner = self.inner.lock();
                let CoreInner {
                    conns,
                    freed_at_most,
                    ..
                } = &mut *inner;
                let n = conns.values().filter(|c| on(c)).count();
                self.bounds
                    .counts
                    .removal_passes
                    .fetch_add(1, Ordering::Relaxed);
                if n == 0 {
                    return;
                }
                // All of them in one pass (a scan of the table per entry
                // was quadratic, under the lock every CM callback takes);
                // without memory for the list, one per pass.
                let room = batch.reserve(n, GFP_KERNEL).is_ok();
                for (_, c) in conns.iter_mut().filter(|(_, c)| on(c)) {
                    // The record stays: one more for `prune_freed`.
                    *freed_at_most += usize::from(c.ep.role == Role::Passive);
                    let item = (c.ep.clone(), c.cm.take());
                    if !room {
                        one = Some(item);
                        break;
                    }
                    // Within the `n` reserved, all counted under this
                    // lock: no allocation, so no failure (and no id
                    // dropped under the lock).
                    let _ = batch.push(item, GFP_KERNEL);
                }
            }
            for (ep, cm) in Iterator::chain(batch.into_iter(), one) {
                // Destroys the id, or (in a worker: a queued unregistration)
                // queues its destroy, which the flush below waits for.
                drop(cm);
                let (verbs, handshake) = {
                    let mut st = ep.st.lock();
                    if ep.role != Role::Listener {
                        st.record_disconnected(ENODEV.to_errno());
                    }
                    (st.take_verbs(), st.take_handshake())
                };
                drop(verbs);
                drop(handshake);
            }
            self.forget_pending_on(index);
        }
    }

    /// Takes entries out of the table one at a time with `take`, under the
    /// table's lock, and hands each to `dispose` with the lock released:
    /// destroying an id waits for its callbacks, which may take the lock.
    fn take_each<R>(
        &self,
        mut take: impl FnMut(&mut CoreInner) -> Option<R>,
        mut dispose: impl FnMut(R),
    ) {
        loop {
            // The guard is dropped at the end of this statement.
            let taken = take(&mut self.inner.lock());
            let Some(item) = taken else {
                break;
            };
            dispose(item);
        }
    }
}

/// How many records one scan of [`prune_freed`] takes out of the table once
/// a listener has more than `keep`: a batch, so that the scan (of the whole
/// table) runs once for that many freed ends, not for each.
const PRUNE_AT_ONCE: usize = 16;

/// Takes out of the table the lowest-numbered records of `listener`'s
/// freed passive ends if it has more than `keep`: [`PRUNE_AT_ONCE`] of
/// them (or all); the caller drops them after the lock. Sets
/// `freed_at_most` to what is left, all listeners together.
///
/// Every REQ a peer sends may leave a record (its end freed after a REJ, a
/// REP timeout, a DREQ and its timewait); these are what a peer could make
/// the module hold for ever, and this is their bound: each time one of a
/// listener's passive ends is freed, its records of freed ends are cut back
/// to `keep` (default [`DEFAULT_KEEP`]), each about `endpoint_fixed_bytes`
/// (`stats`, under 1 KiB) plus its events (eight reserved, each with the
/// private data its message carried, 224 bytes at most). Ends freed by
/// device removal count, but their freeing prunes nothing (their device
/// is gone, their peer with it); active ends and listeners are the
/// consumer's, never pruned.
fn prune_freed(inner: &mut CoreInner, listener: u32, keep: u32) -> [Option<Conn>; PRUNE_AT_ONCE] {
    let mut first = [0u32; PRUNE_AT_ONCE];
    let mut count = 0usize;
    let mut all = 0usize;
    for (num, c) in inner.conns.iter() {
        if c.cm.is_none() && c.ep.role == Role::Passive {
            all += 1;
            if c.ep.listener == listener {
                if let Some(slot) = first.get_mut(count) {
                    *slot = *num;
                }
                count += 1;
            }
        }
    }
    let excess = if count > keep as usize {
        count.min(PRUNE_AT_ONCE)
    } else {
        0
    };
    let mut out: [Option<Conn>; PRUNE_AT_ONCE] = Default::default();
    for (slot, num) in out.iter_mut().zip(first.iter()).take(excess) {
        *slot = inner.conns.remove(num);
    }
    inner.freed_at_most = all - excess;
    out
}

kernel::sync::global_lock! {
    // The module's one `Core`, for the code that has no reference of its
    // own: the endpoints' CM callbacks (their `Handler` is the id's data,
    // which the core's table holds) and `rcd_test_with_conn()`. Set and
    // emptied by `Owner`.
    //
    // SAFETY: `Owner::new` initialises it, once per load of the module,
    // before any other use (its safety requirement).
    unsafe(uninit) static CORE: Mutex<Option<Arc<Core>>> = None;
}

impl Core {
    /// The module's core, counted for as long as the caller keeps it:
    /// `None` only outside the module's life (before [`Owner::new`], or once
    /// [`Owner`]'s drop emptied the slot, when no id of ours is left to call
    /// back).
    pub(crate) fn get() -> Option<Arc<Core>> {
        CORE.lock().clone()
    }
}

/// Owns the module's [`Core`] for as long as the module is loaded, and makes
/// it reachable ([`Core::get`]) meanwhile.
///
/// The core's table holds the endpoints, and each endpoint's id holds it
/// (its `Handler`): nothing of an endpoint holds the core, or neither would
/// ever be freed. What runs for an endpoint (a CM callback, a job, a
/// poller, the sweeper) holds a counted reference for its time, from
/// [`Core::get`] or from whoever queued it, so the core is freed by its last
/// holder, never under running code.
///
/// # Invariants
///
/// While an `Owner` exists, [`CORE`] holds its core. Its drop empties the
/// slot only after the table is empty (every id destroyed, which waits for
/// its callbacks) and the reaper flushed (the ids destroyed from their own
/// callbacks, the passive ends' jobs): from then on no CM callback of ours
/// can run, and the work left on `pollers` (rping pollers, the sweeper)
/// holds its own reference and sees `stop`.
pub(crate) struct Owner(Arc<Core>);

impl Owner {
    /// Puts `core` in the module's slot.
    ///
    /// # Safety
    ///
    /// Called once per load of the module, from its `init`, before the
    /// module's symbols (`rcd_test_with_conn()`) or its RDMA client can use
    /// the slot.
    pub(crate) unsafe fn new(core: Arc<Core>) -> Self {
        // SAFETY: As this function's: once per load, the first use.
        unsafe { CORE.init() };
        *CORE.lock() = Some(core.clone());
        // INVARIANT: the slot holds `core` from here.
        Self(core)
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        // The pollers' work ends (also for endpoints no longer in the
        // table); their queue is drained by its reaper's drop, after this.
        self.0.bounds.stop.store(true, Ordering::Relaxed);
        self.0.bounds.occupied.complete_all();
        // The sweepers see `stop` under their list's lock: taken here, so
        // that a sweeper either saw it or waits already and is woken.
        {
            let _p = self.0.bounds.pending.lock();
            self.0.bounds.due_changed.notify_all();
        }
        {
            let _h = self.0.bounds.held.lock();
            self.0.bounds.held_changed.notify_all();
        }
        self.0.take_each(
            |inner| {
                let num = *inner.conns.keys().next()?;
                inner.conns.remove(&num)
            },
            drop,
        );
        // Destroys queued by callbacks: run now, while the core is whole.
        self.0.flush_work();
        // No callback of ours is left to reach the core (see the type's
        // invariants); waits for an `rcd_test_with_conn()` taking its
        // reference. The slot's lock is released before the core is
        // dropped.
        let core = CORE.lock().take();
        drop(core);
    }
}

impl Client for Core {
    type DeviceData = Arc<DeviceEntry>;

    fn add(&self, device: &Device) -> Result<Arc<DeviceEntry>> {
        let entry = DeviceEntry::new(device)?;
        self.inner.lock().devices.insert(device, entry.clone())?;
        pr_info!(
            "device {} added ({} IB CM port(s))\n",
            device.name(),
            entry.ports.len()
        );
        Ok(entry)
    }

    fn remove(&self, device: &Device, _entry: Arc<DeviceEntry>) {
        // Not usable for new connections from here on.
        self.inner.lock().devices.remove(device);
        self.remove_all_on(device.index());
        // A connection `close` took out of the table before we looked may
        // still have its id and QP on this device.
        self.wait_for_closes();
        // The ids their own callbacks dropped before `remove_all_on` could
        // take them (queued under the table's lock): destroyed before the
        // CM's own `remove` (which runs after ours) tears the device down.
        // Only bounded work is on this queue (destroys, which wait for one
        // callback; a passive end's QP and REP); the rping pollers, which
        // run as long as their peers ping, are on `pollers`, not flushed
        // here: those of this device's endpoints found their QP gone above
        // and return, the others are not this device's business.
        //
        // The bound on this removal, whatever a peer does: per endpoint on
        // the device, one destroy (the CM sends its DREQ or REJ and waits
        // for no answer; it waits for the id's callback in progress, which
        // takes our locks only for bounded work) and one QP drain
        // (`DRAIN_WAIT_MS`, 2 s at most, microseconds on rxe); plus one
        // queued job per passive end in its handshake (a QP, a REP).
        self.flush_work();
        pr_info!("device {} removed\n", device.name());
    }
}
