// SPDX-License-Identifier: GPL-2.0

//! Rust RDMA connection manager sample.
//!
//! A passive side of the IB connection manager over `kernel::rdma`: on every
//! RDMA device with an IB CM port it listens on [`SERVICE_ID`]; it accepts
//! each REQ for a reliable connection with an RC QP of its own (on the
//! device's one PD and CQ, which every connection shares), moved to RTS
//! with the attributes the CM computes (as rdma_cm's `rdma_accept()` does,
//! before the REP), and a REP carrying [`REP_DATA`]. It echoes each message
//! the peer sends (up to [`MSG_MAX`] bytes): a receive is posted before the
//! REP, and the QP's completions queue the echo. It answers the peer's DREQ
//! by moving the QP to the error state and sending a DREP carrying
//! [`DREP_DATA`], and frees the connection once it left timewait. Unloading
//! it (or removing the device) disconnects whatever is still connected:
//! dropping an id sends its DREQ.
//!
//! The private data a peer sends in its REQ and DREQ is logged, as text.

use kernel::{
    c_str, new_mutex,
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation},
    rdma::{
        client::{Client, Registration},
        cm::{CmId, CmIdRef, Handler, Rep, Request},
        device::Device,
        verbs::{Cq, Pd, QpAttr, QpSize, QpState, RcQp, Waker, WcStatus, WrKind},
    },
    str::BStr,
    sync::{Arc, Mutex},
    workqueue::{CountedQueue, OwnedQueue, QueueFlags, QueueRef},
};

module! {
    type: RustRdmaCm,
    name: "rust_rdma_cm",
    authors: ["Rust for Linux Contributors"],
    description: "Rust RDMA connection manager sample",
    license: "GPL",
}

/// The service id the sample listens on: rdma_cm's for TCP port 21075
/// (`RDMA_PS_TCP << 16 | port`), so that an rdma_cm client reaches it as it
/// would reach a server listening on that port (`ucmatose -C 0 -p 21075`:
/// a connection without messages, then its disconnect; `rdma_client -p
/// 21075`: 16 bytes each way).
const SERVICE_ID: u64 = 0x0106_5253;

/// The longest message echoed: the size of each receive posted.
const MSG_MAX: usize = 64;

/// A connection's QP: the requests each of its queues holds.
const QP_DEPTH: u32 = 16;

/// The most connections of a device at once: its CQ has room for this
/// many QPs (a REQ beyond is rejected).
const MAX_CONNS: u32 = 32;

/// A device's CQ: room for the requests of each connection's QP, and for
/// the two its drain posts.
const CQ_ENTRIES: u32 = (2 * QP_DEPTH + 2) * MAX_CONNS;

/// The REP's private data.
const REP_DATA: &[u8] = b"rust_rdma_cm: accepted";

/// The DREP's private data.
const DREP_DATA: &[u8] = b"rust_rdma_cm: bye";

/// The RDMA client: one listener per device, made by `add`.
struct Sample {
    /// Where ids dropped in their own callbacks are destroyed.
    reaper: QueueRef,
}

kernel::rdma_client_slot!(Sample);

/// A device's listener (until its removal) and its connections.
struct Listening {
    listener: Option<CmId<Endpoint>>,
    conns: Arc<Conns>,
}

/// A device's accepted connections not yet freed, by local id, and the
/// PD and CQ their QPs are made on.
#[pin_data]
struct Conns {
    #[pin]
    list: Mutex<RBTree<u32, CmId<Endpoint>>>,
    pd: Arc<Pd>,
    cq: Arc<Cq>,
    /// Where the echoes run.
    reaper: QueueRef,
}

impl Conns {
    /// Takes the connection of `id` out of the list: its caller drops it
    /// after the lock (dropping an id may wait for its callbacks, which may
    /// take the lock).
    fn take(&self, id: &CmIdRef) -> Option<CmId<Endpoint>> {
        self.list.lock().remove(&id.local_id())
    }

    /// Echoes what connection `local_id` received, with a new receive
    /// posted for the next message first. Queued by the QP's completions;
    /// a completion of a connection already freed finds nothing.
    fn echo(&self, local_id: u32) {
        let conns = self.list.lock();
        let qp = conns.get(&local_id).and_then(|id| id.data().qp.clone());
        drop(conns);
        let Some(qp) = qp else {
            return;
        };
        let mut verbs = qp.lock();
        while let Ok(Some(c)) = verbs.poll_one() {
            // Flushed requests (the disconnect) end here, their buffers freed.
            if c.status != WcStatus::Success {
                continue;
            }
            let res = match c.kind {
                Some(WrKind::Recv) => {
                    let len = usize::try_from(c.byte_len).map_or(0, |n| n.min(c.buf.len()));
                    pr_info!("received {} bytes on {:#x}\n", len, local_id);
                    answer(&mut verbs, &c.buf[..len])
                }
                Some(WrKind::Send) => {
                    pr_info!("echoed {} bytes on {:#x}\n", c.buf.len(), local_id);
                    Ok(())
                }
                _ => Ok(()),
            };
            if let Err(e) = res {
                pr_warn!("echo on {:#x}: {:?}\n", local_id, e);
            }
        }
    }
}

/// Posts the receive of the next message (of up to [`MSG_MAX`] bytes).
fn post_recv(verbs: &mut RcQp) -> Result {
    verbs.post_recv(KVec::from_elem(0, MSG_MAX, GFP_KERNEL)?)
}

/// Posts the receive of the next message, then the echo of `msg`.
fn answer(verbs: &mut RcQp, msg: &[u8]) -> Result {
    post_recv(verbs)?;
    let mut echo = KVec::with_capacity(msg.len(), GFP_KERNEL)?;
    echo.extend_from_slice(msg, GFP_KERNEL)?;
    verbs.post_send(echo)
}

/// A listener (no QP) or an accepted connection (its QP): the CM gives a
/// listener's new ids the listener's handler type.
struct Endpoint {
    conns: Arc<Conns>,
    qp: Option<Arc<Mutex<RcQp>>>,
}

impl Endpoint {
    /// Makes the connection's QP, takes the new id and sends the REP.
    fn accept(&self, req: Request<'_, Self>) -> Result {
        // A QP takes a while to make: a ULP under load makes it in a job
        // (on a workqueue of its own), after `CmIdRef::prepare_mra`.
        let size = QpSize {
            send: QP_DEPTH,
            recv: QP_DEPTH,
            sge: 1,
            caller: c_str!("rust_rdma_cm"),
        };
        let (pd, cq) = (self.conns.pd.clone(), self.conns.cq.clone());
        let verbs = RcQp::new(pd, cq, size)?;
        let qp = Arc::pin_init(new_mutex!(verbs), GFP_KERNEL)?;
        // The list's node, allocated before anything is sent.
        let node = RBTreeNodeReservation::new(GFP_KERNEL)?;
        let (depth, resources) = (req.initiator_depth(), req.responder_resources());
        let endpoint = Endpoint {
            conns: self.conns.clone(),
            qp: Some(qp.clone()),
        };
        let id = req.accept(endpoint)?;
        let local_id = id.local_id();
        // An error from here drops `id` in its own REQ callback: the CM
        // destroys it, and rejects the REQ unless the REP went out.
        let qp_num = {
            let mut verbs = qp.lock();
            verbs.modify(&id.init_qp_attr(QpState::Init)?)?;
            // The peer may send as soon as it has sent its RTU.
            post_recv(&mut verbs)?;
            // Each completion queues the echo; the waker holds the list
            // (not the QP, which holds the waker), until the connection
            // leaves it.
            let (conns, reaper) = (self.conns.clone(), self.conns.reaper.clone());
            let waker: Waker = Arc::new(
                move || {
                    let conns = conns.clone();
                    if reaper.spawn(move || conns.echo(local_id)).is_err() {
                        pr_warn!("echo on {:#x}: not queued\n", local_id);
                    }
                },
                GFP_KERNEL,
            )?;
            verbs.set_waker(Some(waker));
            let mut rtr = id.init_qp_attr(QpState::Rtr)?;
            // Our PSN, announced in the REP: the CM learns it only then.
            rtr.set_rq_psn(verbs.qp_num());
            verbs.modify(&rtr)?;
            verbs.modify(&id.init_qp_attr(QpState::Rts)?)?;
            verbs.qp_num()
        };
        let rep = Rep {
            qp_num,
            starting_psn: qp_num,
            responder_resources: depth.min(1),
            initiator_depth: resources.min(1),
            flow_control: true,
            rnr_retry_count: 7,
            private_data: REP_DATA,
        };
        // In the list before the REP goes: its failure (REP_ERROR, from the
        // MAD's completion, not serialised with this callback) frees the
        // connection through the list.
        let mut conns = self.conns.list.lock();
        let replaced = conns.insert(node.into_node(local_id, id));
        let sent = conns.get(&local_id).ok_or(ENOENT)?.send_rep(&rep);
        let failed = sent.is_err().then(|| conns.remove(&local_id)).flatten();
        drop(conns);
        // Dropped after the lock (this is the id's own REQ callback: the
        // destroy is deferred).
        drop((replaced, failed));
        sent
    }

    /// The connection is over: its QP drained (`ib_drain_qp()`, which the
    /// QP's waker does not hold up: it only queues the echo), then freed
    /// (its id's destroy is deferred, as this runs in one of the id's
    /// callbacks). A QP freed with requests not flushed would keep their
    /// entries of the device's CQ until they came (or the CQ is freed).
    /// The drain's wait has no bound: the sample relies on the device
    /// flushing, as kernel ULPs that drain in their CM handlers do.
    fn free(&self, id: &CmIdRef) {
        if let Some(qp) = &self.qp {
            let left = qp.lock().drain(|_| {});
            if left > 0 {
                pr_warn!("{:#x}: {} requests not flushed\n", id.local_id(), left);
            }
        }
        drop(self.conns.take(id));
    }
}

#[vtable]
impl Handler for Endpoint {
    fn req_received(&self, req: Request<'_, Self>) -> Result {
        if !req.is_rc() {
            return Err(EINVAL);
        }
        pr_info!(
            "REQ on {}: {}\n",
            req.device().name(),
            BStr::from_bytes(text(req.private_data()))
        );
        self.accept(req)
    }

    fn established(&self, id: &CmIdRef) {
        pr_info!("connection {:#x} established\n", id.local_id());
    }

    fn dreq_received(&self, id: &CmIdRef, private_data: &[u8]) {
        pr_info!(
            "DREQ on {:#x}: {}\n",
            id.local_id(),
            BStr::from_bytes(text(private_data))
        );
        // As rdma_disconnect() does: the QP to the error state first, so
        // that what is posted on it is flushed, then the DREP.
        if let Some(qp) = &self.qp {
            if let Err(e) = qp.lock().modify(&QpAttr::to_error()) {
                pr_warn!("QP of {:#x} to error: {:?}\n", id.local_id(), e);
            }
        }
        if let Err(e) = id.send_drep(DREP_DATA) {
            pr_warn!("DREP on {:#x}: error {:?}\n", id.local_id(), e);
        }
    }

    fn rej_received(&self, id: &CmIdRef, _reason: kernel::rdma::cm::RejReason, _pd: &[u8]) {
        self.free(id);
    }

    fn connect_error(&self, id: &CmIdRef, _status: kernel::rdma::verbs::WcStatus) {
        self.free(id);
    }

    fn timewait_exit(&self, id: &CmIdRef) {
        pr_info!("connection {:#x} freed\n", id.local_id());
        self.free(id);
    }
}

/// `data` up to its first NUL: the text a peer sent, padded by the CM.
fn text(data: &[u8]) -> &[u8] {
    let end = data.iter().position(|&b| b == 0).unwrap_or(data.len());
    &data[..end]
}

impl Client for Sample {
    type DeviceData = KBox<Listening>;

    fn add(&self, device: &Device) -> Result<KBox<Listening>> {
        if !device.ports().any(|port| device.has_ib_cm(port)) {
            return Err(EOPNOTSUPP);
        }
        let pd = Arc::new(Pd::new(device, c_str!("rust_rdma_cm"))?, GFP_KERNEL)?;
        let cq = Cq::new(device, CQ_ENTRIES, c_str!("rust_rdma_cm"))?;
        let conns = Arc::pin_init(
            pin_init!(Conns {
                list <- new_mutex!(RBTree::new()),
                pd,
                cq,
                reaper: self.reaper.clone(),
            }),
            GFP_KERNEL,
        )?;
        let endpoint = Endpoint {
            conns: conns.clone(),
            qp: None,
        };
        let listener = CmId::new(device, &self.reaper, endpoint)?;
        listener.listen(SERVICE_ID)?;
        pr_info!("listening on {}\n", device.name());
        let listening = Listening {
            listener: Some(listener),
            conns,
        };
        Ok(KBox::new(listening, GFP_KERNEL)?)
    }

    fn remove(&self, _device: &Device, mut listening: KBox<Listening>) {
        drop(listening.listener.take());
        // The device may be removed from a workqueue worker, where the
        // listener's destroy is queued: run it, which waits for a REQ
        // callback still running. No new connection from here.
        self.reaper.flush();
        let gone = core::mem::replace(&mut *listening.conns.list.lock(), RBTree::new());
        // Each drop sends the DREQ of a connection still up, destroys its id
        // and frees its QP, or queues that: run as well.
        drop(gone);
        self.reaper.flush();
    }
}

struct RustRdmaCm {
    _registration: Registration<Sample>,
    _reaper: Pin<KBox<CountedQueue>>,
}

impl kernel::Module for RustRdmaCm {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        // Made first, dropped last: it outlives every id.
        let reaper = OwnedQueue::new(c_str!("rust_rdma_cm"), QueueFlags::UNBOUND, 0)?;
        let reaper = CountedQueue::new(reaper)?;
        let sample = Arc::new(
            Sample {
                reaper: reaper.as_ref().get(),
            },
            GFP_KERNEL,
        )?;
        let registration = Registration::new(c_str!("rust_rdma_cm"), sample)?;
        Ok(Self {
            _registration: registration,
            _reaper: reaper,
        })
    }
}
