// SPDX-License-Identifier: GPL-2.0

//! An rping-compatible endpoint (rdma-core's `librdmacm/examples/rping.c`),
//! driven by the completions of its connection's QP.
//!
//! rping's protocol, per ping: the client SENDs a 16-byte descriptor of its
//! start buffer (`be64` address, `be32` rkey, `be32` size); the server RDMA
//! READs it, SENDs a go-ahead (16 bytes); the client SENDs the descriptor of
//! its sink buffer; the server RDMA WRITEs what it read there (up to and
//! including the first NUL) and SENDs a go-ahead; the client (with `-V`)
//! compares its two buffers. The client stops after `-C` pings (0: never)
//! and disconnects.
//!
//! The client's buffers are registered with fast-registration MRs for the
//! peer; each ping takes them back with a LOCAL_INV before it reads or
//! writes them, and registers them again (a new key) for the next. No
//! buffer is touched while the peer may reach it.

use crate::conn::CountedQp;
use kernel::prelude::*;
use kernel::rdma::verbs::{Completion, WcStatus, WrKind};

/// rping's descriptor message: `struct rping_rdma_info`.
const INFO_LEN: usize = 16;

/// The largest buffer rping may ask of us (`-S`): a page, as for the
/// harness's other messages (an MR registers more).
pub(crate) const MAX_SIZE: usize = kernel::page::PAGE_SIZE;

/// Receives kept posted: two go-aheads (or descriptors) may be in flight.
const RECVS: u32 = 2;

/// Which end of rping's protocol this is.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// `rping -c` connects to us.
    Server,
    /// We connect to `rping -s`: `count` pings (0: until disconnected) of
    /// `size` bytes.
    Client { count: u32, size: usize },
}

/// Where the protocol is.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Step {
    /// Not started (the client waits for its connection).
    Idle,
    /// Server: waits for the client's start-buffer descriptor.
    WaitReadAdv,
    /// Server: its RDMA READ is posted.
    Reading,
    /// Server: waits for the client's sink descriptor.
    WaitWriteAdv,
    /// Server: its RDMA WRITE is posted.
    Writing,
    /// Client: its two MRs are being registered.
    Registering,
    /// Client: its start descriptor is sent; waits for the go-ahead.
    WaitReadDone,
    /// Client: its sink descriptor is sent; waits for the go-ahead.
    WaitWriteDone,
    /// Client: its two MRs are being invalidated.
    Invalidating,
    /// Over: finished, disconnected or failed.
    Done,
}

/// What the connection should do after a step.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    Nothing,
    /// The client's last ping is done: disconnect.
    Disconnect,
}

/// The state of an rping endpoint.
pub(crate) struct Rping {
    role: Role,
    step: Step,
    /// Pings done (server: WRITEs completed; client: go-aheads after them).
    pub(crate) pings: u32,
    /// Client: pings whose sink matched the start buffer.
    pub(crate) validated: u32,
    /// What went wrong, as an errno (0: nothing).
    pub(crate) error: i32,
    /// Server: what its READ brought, to WRITE back. Client: the start
    /// buffer's content of this ping, to compare the sink with.
    data: KVec<u8>,
    /// Client: MR indexes of the start and sink buffers, and the buffers
    /// back from their LOCAL_INV.
    mrs: [usize; 2],
    regs_left: u32,
    back: [Option<KVec<u8>>; 2],
    /// Client: the first letter of the next ping's text (rping's `start`).
    letter: u8,
}

impl Rping {
    pub(crate) fn new(role: Role) -> Result<Self> {
        if let Role::Client { size, .. } = role {
            // rping's own minimum (RPING_MIN_BUFSIZE) and our MRs' maximum.
            if !(26..=MAX_SIZE).contains(&size) {
                return Err(EMSGSIZE);
            }
        }
        Ok(Self {
            role,
            step: Step::Idle,
            pings: 0,
            validated: 0,
            error: 0,
            data: KVec::new(),
            mrs: [0; 2],
            regs_left: 0,
            back: [None, None],
            letter: 65,
        })
    }

    /// Its state for `conns`: `role:pings:validated:step[:errno]`.
    pub(crate) fn describe(&self) -> (&'static str, &'static str) {
        let role = match self.role {
            Role::Server => "server",
            Role::Client { .. } => "client",
        };
        let step = match self.step {
            Step::Idle => "idle",
            Step::Done => "done",
            _ => "running",
        };
        (role, step)
    }

    /// Over (finished, disconnected or failed).
    pub(crate) fn done(&self) -> bool {
        self.step == Step::Done
    }

    /// Receives for the descriptors or go-aheads, before the connection is
    /// made (the peer may send as soon as it is established).
    pub(crate) fn pre_post(&mut self, qp: &mut CountedQp) -> Result<u32> {
        for _ in 0..RECVS {
            qp.post_recv(zeroed(INFO_LEN)?)?;
        }
        if self.role == Role::Server {
            self.step = Step::WaitReadAdv;
        }
        Ok(RECVS)
    }

    /// The client's connection is established: the first ping. Returns the
    /// work requests posted.
    pub(crate) fn start(&mut self, qp: &mut CountedQp) -> u32 {
        if self.step != Step::Idle {
            return 0;
        }
        self.run(qp, |s, qp| s.client_ping(qp))
    }

    /// The connection is over: nothing more is posted.
    pub(crate) fn stop(&mut self) {
        self.step = Step::Done;
    }

    /// Takes one completion of the connection's QP; returns the work
    /// requests it posted in turn and what the connection should do.
    pub(crate) fn on_completion(
        &mut self,
        qp: &mut CountedQp,
        c: &mut Completion,
    ) -> (u32, Action) {
        if self.step == Step::Done {
            return (0, Action::Nothing);
        }
        if !c.status.is_success() {
            // A flush (the connection is going) or an error: stop here.
            if c.status != WcStatus::WrFlushErr {
                self.error = EIO.to_errno();
            }
            self.step = Step::Done;
            return (0, Action::Nothing);
        }
        let mut action = Action::Nothing;
        let posted = self.run(qp, |s, qp| {
            let (n, a) = s.step(qp, c)?;
            action = a;
            Ok(n)
        });
        (posted, action)
    }

    /// Runs `f`; an error ends the protocol (recorded).
    fn run(
        &mut self,
        qp: &mut CountedQp,
        f: impl FnOnce(&mut Self, &mut CountedQp) -> Result<u32>,
    ) -> u32 {
        match f(self, qp) {
            Ok(n) => n,
            Err(e) => {
                self.error = e.to_errno();
                self.step = Step::Done;
                0
            }
        }
    }

    fn step(&mut self, qp: &mut CountedQp, c: &mut Completion) -> Result<(u32, Action)> {
        let Some(kind) = c.kind else {
            return Ok((0, Action::Nothing));
        };
        match (self.role, kind, self.step) {
            // SEND completions: nothing waits for them.
            (_, WrKind::Send, _) => Ok((0, Action::Nothing)),
            (Role::Server, WrKind::Recv, Step::WaitReadAdv) => {
                let (addr, rkey, len) = info(c)?;
                if len > MAX_SIZE {
                    return Err(EMSGSIZE);
                }
                qp.post_recv(zeroed(INFO_LEN)?)?;
                qp.post_rdma(WrKind::RdmaRead, zeroed(len)?, addr, rkey)?;
                self.step = Step::Reading;
                Ok((2, Action::Nothing))
            }
            (Role::Server, WrKind::RdmaRead, Step::Reading) => {
                self.data = core::mem::take(&mut c.buf);
                qp.post_send(zeroed(INFO_LEN)?)?;
                self.step = Step::WaitWriteAdv;
                Ok((1, Action::Nothing))
            }
            (Role::Server, WrKind::Recv, Step::WaitWriteAdv) => {
                let (addr, rkey, len) = info(c)?;
                // rping's server writes the text and its NUL.
                let end = self
                    .data
                    .iter()
                    .position(|b| *b == 0)
                    .map_or(self.data.len(), |i| i + 1);
                let end = end.min(len);
                let mut out = KVec::new();
                out.extend_from_slice(&self.data[..end], GFP_KERNEL)?;
                qp.post_recv(zeroed(INFO_LEN)?)?;
                qp.post_rdma(WrKind::RdmaWrite, out, addr, rkey)?;
                self.step = Step::Writing;
                Ok((2, Action::Nothing))
            }
            (Role::Server, WrKind::RdmaWrite, Step::Writing) => {
                qp.post_send(zeroed(INFO_LEN)?)?;
                // A remote client's count (`rping -C 0` pings for ever):
                // saturates rather than overflow (a panic with overflow
                // checks on) after 2^32 pings.
                self.pings = self.pings.saturating_add(1);
                self.step = Step::WaitReadAdv;
                Ok((1, Action::Nothing))
            }
            (Role::Client { size, .. }, WrKind::RegMr, Step::Registering) => {
                self.regs_left -= 1;
                if self.regs_left > 0 {
                    return Ok((0, Action::Nothing));
                }
                let n = self.send_info(qp, self.mrs[0], size)?;
                self.step = Step::WaitReadDone;
                Ok((n, Action::Nothing))
            }
            (Role::Client { size, .. }, WrKind::Recv, Step::WaitReadDone) => {
                qp.post_recv(zeroed(INFO_LEN)?)?;
                let n = self.send_info(qp, self.mrs[1], size)?;
                self.step = Step::WaitWriteDone;
                Ok((n + 1, Action::Nothing))
            }
            (Role::Client { .. }, WrKind::Recv, Step::WaitWriteDone) => {
                qp.post_recv(zeroed(INFO_LEN)?)?;
                // The peer is done with both buffers: take them back.
                qp.invalidate_mr(self.mrs[0])?;
                qp.invalidate_mr(self.mrs[1])?;
                self.step = Step::Invalidating;
                Ok((3, Action::Nothing))
            }
            (Role::Client { count, .. }, WrKind::LocalInv, Step::Invalidating) => {
                let slot = usize::from(qp.taken_mr() != Some(self.mrs[0]));
                self.back[slot] = Some(core::mem::take(&mut c.buf));
                let (Some(start), Some(sink)) = (&self.back[0], &self.back[1]) else {
                    return Ok((0, Action::Nothing));
                };
                // rping -V: the sink holds what the start buffer held.
                if start[..] == sink[..] && start[..] == self.data[..] {
                    self.validated = self.validated.saturating_add(1);
                } else {
                    self.error = EIO.to_errno();
                }
                self.back = [None, None];
                // Endless with `count` 0, as the server's: saturates.
                self.pings = self.pings.saturating_add(1);
                if count != 0 && self.pings >= count {
                    self.step = Step::Done;
                    return Ok((0, Action::Disconnect));
                }
                let n = self.client_ping(qp)?;
                Ok((n, Action::Nothing))
            }
            // Anything else breaks the protocol.
            _ => Err(EPROTO),
        }
    }

    /// The client's next ping: its start buffer (rping's text) and a zeroed
    /// sink, both registered for the peer.
    fn client_ping(&mut self, qp: &mut CountedQp) -> Result<u32> {
        let Role::Client { size, .. } = self.role else {
            return Err(EINVAL);
        };
        let mut text = KVec::new();
        // RPING_MSG_FMT, "rdma-ping-%d: ".
        let mut w = Writer(&mut text);
        core::fmt::Write::write_fmt(&mut w, format_args!("rdma-ping-{}: ", self.pings))
            .map_err(|_| ENOMEM)?;
        let mut c = self.letter;
        while text.len() < size {
            text.push(c, GFP_KERNEL)?;
            c += 1;
            if c > 122 {
                c = 65;
            }
        }
        // The prefix is at most 22 bytes, `size` at least 26.
        text[size - 1] = 0;
        self.letter += 1;
        if self.letter > 122 {
            self.letter = 65;
        }
        let mut start = KVec::new();
        start.extend_from_slice(&text, GFP_KERNEL)?;
        self.data = text;
        self.mrs[0] = qp.reg_mr(start)?;
        self.mrs[1] = qp.reg_mr(zeroed(size)?)?;
        self.regs_left = 2;
        self.step = Step::Registering;
        Ok(2)
    }

    /// SENDs the descriptor of MR `idx`.
    fn send_info(&mut self, qp: &mut CountedQp, idx: usize, size: usize) -> Result<u32> {
        let m = qp.mr(idx).ok_or(EPROTO)?;
        let mut msg = KVec::with_capacity(INFO_LEN, GFP_KERNEL)?;
        msg.extend_from_slice(&m.addr().to_be_bytes(), GFP_KERNEL)?;
        msg.extend_from_slice(&m.rkey().to_be_bytes(), GFP_KERNEL)?;
        msg.extend_from_slice(&(size as u32).to_be_bytes(), GFP_KERNEL)?;
        qp.post_send(msg)?;
        Ok(1)
    }
}

/// rping's descriptor in a receive: (address, rkey, size).
fn info(c: &Completion) -> Result<(u64, u32, usize)> {
    if c.byte_len as usize != INFO_LEN || c.buf.len() < INFO_LEN {
        return Err(EPROTO);
    }
    let b = &c.buf;
    let addr = u64::from_be_bytes(b[0..8].try_into().map_err(|_| EPROTO)?);
    let rkey = u32::from_be_bytes(b[8..12].try_into().map_err(|_| EPROTO)?);
    let len = u32::from_be_bytes(b[12..16].try_into().map_err(|_| EPROTO)?);
    Ok((addr, rkey, len as usize))
}

fn zeroed(len: usize) -> Result<KVec<u8>> {
    let mut v = KVec::new();
    v.extend_with(len, 0, GFP_KERNEL)?;
    Ok(v)
}

/// `core::fmt::Write` into a `KVec<u8>`.
struct Writer<'a>(&'a mut KVec<u8>);

impl core::fmt::Write for Writer<'_> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        self.0
            .extend_from_slice(s.as_bytes(), GFP_KERNEL)
            .map_err(|_| core::fmt::Error)
    }
}
