// SPDX-License-Identifier: GPL-2.0

//! The control interface: `/sys/kernel/debug/rcd_harness/`.
//!
//! Read:
//! - `devices`: one line per usable RDMA device and its IB CM ports;
//! - `conns`: one line per endpoint (listener, active or passive end);
//! - `events`: every event each endpoint saw, with its private data in hex;
//! - `stats`: `name value` counters.
//!
//! `ctl` takes one command per write; fields are separated by spaces:
//!
//! ```text
//! listen  NUM DEV SERVICE_ID [auto_drep=DATA] [on_dreq=ACTION] [cma=1]
//!         [backlog=N] [on_req=close|job_delay:MS|job_sleep:MS|fail_job|rep_then_fail]
//!         [on_timewait=sleep:MS|after:MS] [on_error=sleep:MS]
//!         [recv=COUNT[:SIZE]] [drep_after=MS] [keep=N] [free_after=MS]
//!         [handshake_max=MS] [max_ends=N]
//! connect NUM DEV SRC_IP DST_IP SERVICE_ID [port=N] [auto_drep=DATA]
//!         [on_dreq=ACTION] [lifetime=N] [resp=N] [retries=N] [cma_port=N]
//!         [req_data=DATA] [on_timewait=sleep:MS|after:MS] [on_error=sleep:MS]
//!         [on_rep=ignore|reject] [recv=COUNT[:SIZE]] [resolve_ms=N]
//!         [dmac=MAC] [ib_path=SLID:DLID]
//! dreq    NUM[,NUM...] [DATA]   (NUM may be a range, A-B)
//! drep    NUM [DATA]
//! disconnect NUM[,NUM...] [DATA]  QP to error, then DREQ or DREP (rdma_disconnect)
//! post    NUM RECV [SEND] [size=N] [data=DATA] [sge=N] [unsig=N]
//!                         post work requests on the connection's QP: RECV
//!                         receives with N-byte buffers, SEND SENDs of DATA
//!                         or N pattern bytes (none: zero-length), each in
//!                         sge= buffers (1), the first unsig= unsignalled
//! mr      NUM reg DATA    register a buffer holding DATA for the peer's
//!                         RDMA READ/WRITE (fast registration)
//! hold_id DEV MS          tests only: an id on DEV with no device handle of
//!                         ours, used and dropped after MS ms (the write waits)
//! shared_cq DEV [OTHER]   tests only: QPs on one CQ of DEV (conn::TestHooks)
//! qp_ports DEV            tests only: a QP's move to a port DEV lacks
//! mr_sizes DEV            tests only: the sizes an MR of DEV is made with
//! qp_drain DEV            tests only: a QP's drain (ib_drain_qp) with its
//!                         receive queue full
//! qp_sgl DEV              tests only: requests of several buffers, and an
//!                         unsignalled SEND's room
//! waker_owns_qp DEV       tests only: a QP's waker that owns the QP
//! qp_refusals DEV         tests only: a QP's moves only its owner may make
//! occupy_pollers N       tests only: N work items on the rping pollers'
//!                         queue, each waiting for `release_pollers`
//! release_pollers         tests only: those items return
//! mr      NUM inval IDX   invalidate MR IDX: its buffer comes back
//! rdma    NUM read|write ADDR RKEY LEN [count=N] [data=DATA]
//!                         RDMA READs of the peer's LEN bytes at ADDR, or
//!                         WRITEs of DATA (or LEN pattern bytes) there
//! poll    NUM             count the CQ's completions (and flushes)
//! close   NUM[,NUM...]
//! ```
//!
//! SERVICE_ID is a number (`0x1000`), `tcp:PORT` or `udp:PORT`, rdma_cm's
//! service id of a TCP or UDP port. `cma=1`: a listener for rdma_cm peers (a REQ must start with a
//! valid `cma_hdr`, or it is rejected); `cma_port=N`: start the REQ's private
//! data with a `cma_hdr` from port N, as rdma_cm does; `req_data`: send
//! exactly DATA as the REQ's private data. `connect` resolves DST_IP's
//! next hop as rdma_cm does (`path.rs`: ARP when the neighbour is not known
//! yet) and waits for it at most `resolve_ms` (1..60000, default 2000):
//! `EHOSTUNREACH` when no neighbour answered (`dmac=MAC`: no resolution,
//! a RoCE v2 path record the harness builds, next hop MAC, hop limit 64,
//! made a route by `path::Route::new`; `ib_path`: an InfiniBand record from
//! LID SLID to DLID, `EINVAL` on a RoCE port);
//! a number taken is `EEXIST`
//! before any resolution; a DST_IP that is not one host (0.0.0.0,
//! multicast, a broadcast address) is `EINVAL`. `on_dreq`: what the DREQ
//! callback does besides recording it, `sleep:MS`, `dreq` (a DREQ on its own
//! connection), `disconnect` (its own), `disconnect:NUM` (another one) or
//! `close:NUM` (closes another one, its id dropped in the callback).
//! `backlog=N`: a listener takes at most N handshakes in flight (REP sent,
//! no RTU yet; default 8192) and rejects the excess; a DREQ before the RTU
//! ends a handshake too. `drep_after=MS`: a peer's DREQ to a passive end
//! that nobody answers (no `auto_drep`, no `drep`, `disconnect` or `close`)
//! is answered with a DREP after MS (1..600000, default 30000). `keep=N`:
//! the listener keeps at most N records of its freed passive ends (default
//! 1024); the lowest-numbered goes first. `free_after=MS`: a passive end
//! is freed MS (1..600000, default 60000) after its disconnect began (a
//! DREP or a DREQ_ERROR received; a DREQ received: after its answer was
//! due), whatever timewait its peer asked for. `handshake_max=MS`: a
//! passive end whose REP got no RTU is freed MS (1..600000, default
//! 120000) after the REP, whatever REP timeout its peer asked for (the CM
//! sends a REJ). `max_ends=N`: the listener
//! has at most N passive ends with their id and QP (default 16384); the
//! REQs beyond are rejected. `recv=COUNT[:SIZE]`: COUNT
//! receives with SIZE-byte buffers are posted before the REQ (connect) or
//! each passive end's REP (listen), as a ULP does before it connects.
//! `post`: buffers and SENDs up to 4096 bytes, SENDs up to the path MTU
//! (`EMSGSIZE` beyond; `ENOTCONN` for a SEND with data before the QP has a
//! path), at most the QP's queue sizes outstanding (`ENOMEM`, nothing
//! posted).
//! Test-only options (`conn::TestHooks`, nothing else sets them):
//! `on_dreq` (above), `on_req=close` (listen: the REQ callback closes its
//! own listener first), `on_req=job_delay:MS` (listen: each passive end's
//! job sleeps up to MS ms, at most 60000, after making its QP and before
//! the QP moves and the REP; cut short when the entry leaves the table or
//! its id is freed; `job_sleep:MS` the same, never cut short: the job
//! moves the QP with the attributes it took before, whatever happened to
//! the id meanwhile), `on_req=fail_job` (listen: the REQ callback fails as
//! if its job could not be queued, `ENOMEM`; `rep_then_fail`: it sends a
//! REP itself first), `on_timewait=sleep:MS` (the
//! timewait-exit callback sleeps before freeing the id; `after:MS`: after
//! it), `on_error=sleep:MS` (the `*_ERROR` callbacks sleep, then read
//! their id's state: a handler that uses its id late) and `on_rep=ignore`
//! or `on_rep=reject` (connect: no RTU, or a REJ, after the REP).
//!
//! `auto_drep`'s DATA is at most 224 bytes (a DREP's), `EINVAL` beyond.
//! DATA is `-` (none), `hex:0a0b...`, `text:WORD`, `pat:N` (N bytes 1, 2,
//! ..., 255, 1, ...) or `fill:N:XX` (N bytes of hex XX). A write fails with
//! the command's errno and changes nothing when the command is malformed.

use crate::control_dir::{Control, ControlFile};
use crate::{
    cm::Message,
    cma::{self, PortSpace},
    conn::{
        Behaviour, ConnectArgs, Core, GivenPath, OnDreq, OnRep, OnReq, Post, Rdma, RegWith,
        TestHooks, DREQ_ANSWER_MAX_MS,
    },
    rping,
};
use kernel::{c_str, prelude::*, rdma::verbs::WrKind, str::CString, sync::Arc};

const DEVICES: u32 = 0;
const STATS: u32 = 1;
const CONNS: u32 = 2;
const EVENTS: u32 = 3;
const CTL: u32 = 4;

/// The files of the control directory.
pub(crate) static FILES: [ControlFile; 5] = [
    ControlFile::new(c_str!("devices"), false, DEVICES),
    ControlFile::new(c_str!("stats"), false, STATS),
    ControlFile::new(c_str!("conns"), false, CONNS),
    ControlFile::new(c_str!("events"), false, EVENTS),
    ControlFile::new(c_str!("ctl"), true, CTL),
];

/// The most connections one `dreq` or `disconnect` names (in all its
/// numbers and ranges together: `E2BIG` beyond).
const MAX_LIST: u32 = 65536;

/// The largest DATA a command may build (the checks under test reject
/// anything over 224 bytes; this only bounds the allocation).
const MAX_DATA: usize = 1 << 20;

impl Control for Core {
    fn show<W: core::fmt::Write>(&self, id: u32, out: &mut W) -> core::fmt::Result {
        match id {
            DEVICES => self.show_devices(out),
            STATS => self.show_stats(out),
            CONNS => self.show_conns(out),
            EVENTS => self.show_events(out),
            // The written file is not read.
            _ => Err(core::fmt::Error),
        }
    }

    fn write(core: &Arc<Self>, id: u32, input: &[u8]) -> Result {
        if id != CTL {
            return Err(EPERM);
        }
        let line = core::str::from_utf8(input).map_err(|_| EINVAL)?;
        let mut words = line.split_ascii_whitespace();
        let cmd = words.next().ok_or(EINVAL)?;
        let mut args = KVec::new();
        for w in words {
            args.push(w, GFP_KERNEL)?;
        }
        match cmd {
            "listen" => listen(core, &args),
            "connect" => connect(core, &args),
            // Several connections (`dreq 2,1000002`) are handled back to
            // back, so that their DREQs cross on the wire.
            "dreq" => for_each(&args, |num, data| core.send(num, Message::Dreq, data)),
            "disconnect" => for_each(&args, |num, data| core.disconnect(num, data)),
            "drep" => {
                let (num, data) = num_and_data(&args)?;
                core.send(num, Message::Drep, &data)
            }
            "post" => post(core, &args),
            "mr" => match args.as_slice() {
                [num, "reg", data] => {
                    core.reg_mr(parse_u32(num)?, RegWith::Next, &parse_data(data)?)
                }
                [num, "reg-at", idx, data] => core.reg_mr(
                    parse_u32(num)?,
                    RegWith::At(parse_u32(idx)? as usize),
                    &parse_data(data)?,
                ),
                [num, "reg-foreign", data] => {
                    core.reg_mr(parse_u32(num)?, RegWith::Foreign, &parse_data(data)?)
                }
                [num, "inval", idx] => {
                    core.invalidate_mr(parse_u32(num)?, parse_u32(idx)? as usize)
                }
                _ => Err(EINVAL),
            },
            "rdma" => rdma(core, &args),
            "poll" => match args.as_slice() {
                [num] => core.poll(parse_u32(num)?),
                _ => Err(EINVAL),
            },
            "close" => match args.as_slice() {
                [_] => for_each(&args, |num, _| core.close(num)),
                _ => Err(EINVAL),
            },
            // Test-only: the pollers' queue kept full, then let go.
            "occupy_pollers" => match args.as_slice() {
                [n] => core.occupy_pollers(parse_u32(n)?),
                _ => Err(EINVAL),
            },
            "release_pollers" => match args.as_slice() {
                [] => {
                    core.release_pollers();
                    Ok(())
                }
                _ => Err(EINVAL),
            },
            // Test-only (`conn::TestHooks`): an id kept past its device's handle.
            "hold_id" => match args.as_slice() {
                [dev, ms] => core.hold_id(&CString::try_from_fmt(fmt!("{}", dev))?, parse_u32(ms)?),
                _ => Err(EINVAL),
            },
            // Test-only (`conn::TestHooks`): QPs on one CQ.
            "shared_cq" => match args.as_slice() {
                [dev] => core.shared_cq(&CString::try_from_fmt(fmt!("{}", dev))?, None),
                [dev, other] => core.shared_cq(
                    &CString::try_from_fmt(fmt!("{}", dev))?,
                    Some(&CString::try_from_fmt(fmt!("{}", other))?),
                ),
                _ => Err(EINVAL),
            },
            // Test-only (`conn::TestHooks`): the ports a QP's move takes.
            "qp_ports" => match args.as_slice() {
                [dev] => core.qp_ports(&CString::try_from_fmt(fmt!("{}", dev))?),
                _ => Err(EINVAL),
            },
            // Test-only (`conn::TestHooks`): an MR's sizes.
            "mr_sizes" => match args.as_slice() {
                [dev] => core.mr_sizes(&CString::try_from_fmt(fmt!("{}", dev))?),
                _ => Err(EINVAL),
            },
            // Test-only (`conn::TestHooks`): a QP's drain.
            "qp_drain" => match args.as_slice() {
                [dev] => core.qp_drain(&CString::try_from_fmt(fmt!("{}", dev))?),
                _ => Err(EINVAL),
            },
            "qp_sgl" => match args.as_slice() {
                [dev] => core.qp_sgl(&CString::try_from_fmt(fmt!("{}", dev))?),
                _ => Err(EINVAL),
            },
            // Test-only (`conn::TestHooks`): what a QP's owner alone may do.
            "qp_refusals" => match args.as_slice() {
                [dev] => core.qp_refusals(&CString::try_from_fmt(fmt!("{}", dev))?),
                _ => Err(EINVAL),
            },
            // Test-only (`conn::TestHooks`): a waker that owns its QP.
            "waker_owns_qp" => match args.as_slice() {
                [dev] => core.waker_owns_qp(&CString::try_from_fmt(fmt!("{}", dev))?),
                _ => Err(EINVAL),
            },
            _ => Err(EINVAL),
        }
    }
}

fn listen(core: &Arc<Core>, args: &[&str]) -> Result {
    let [num, dev, service, opts @ ..] = args else {
        return Err(EINVAL);
    };
    let mut behaviour = Behaviour::default();
    let mut test = TestHooks::NONE;
    let mut cma = false;
    for opt in opts {
        match opt.split_once('=') {
            Some(("auto_drep", d)) => behaviour.auto_drep = Some(parse_drep(d)?),
            Some(("on_req", a)) => test.on_req = parse_on_req(a)?,
            Some((k, v)) if test_hook(&mut test, k, v)? => {}
            Some(("backlog", n)) => behaviour.backlog = parse_u32(n)?,
            Some(("max_ends", n)) => behaviour.max_ends = parse_u32(n)?,
            Some(("drep_after", ms)) => {
                behaviour.drep_after_ms = parse_u32(ms)?;
                if !(1..=DREQ_ANSWER_MAX_MS).contains(&behaviour.drep_after_ms) {
                    return Err(EINVAL);
                }
            }
            Some(("keep", n)) => behaviour.keep = parse_u32(n)?,
            Some(("free_after", ms)) => {
                behaviour.free_after_ms = parse_u32(ms)?;
                if !(1..=DREQ_ANSWER_MAX_MS).contains(&behaviour.free_after_ms) {
                    return Err(EINVAL);
                }
            }
            Some(("handshake_max", ms)) => {
                behaviour.handshake_max_ms = parse_u32(ms)?;
                if !(1..=DREQ_ANSWER_MAX_MS).contains(&behaviour.handshake_max_ms) {
                    return Err(EINVAL);
                }
            }
            Some(("recv", r)) => behaviour.pre_recv = Some(parse_recv(r)?),
            Some(("rping", "1")) => behaviour.rping = Some(rping::Role::Server),
            Some(("cma", "1")) => cma = true,
            Some(("cma", "0")) => cma = false,
            _ => return Err(EINVAL),
        }
    }
    behaviour.test = test.boxed()?;
    let dev = CString::try_from_fmt(fmt!("{}", dev))?;
    core.listen(
        parse_u32(num)?,
        &dev,
        parse_service(service)?,
        cma,
        behaviour,
    )
}

/// How long a connect waits for the neighbour by default, in ms (what
/// rdma-core's tools give `rdma_resolve_addr`).
const RESOLVE_MS_DEFAULT: u32 = 2000;
/// The longest wait a connect may ask for, in ms.
const RESOLVE_MS_MAX: u32 = 60_000;

fn connect(core: &Arc<Core>, args: &[&str]) -> Result {
    let [num, dev, src, dst, service, opts @ ..] = args else {
        return Err(EINVAL);
    };
    let dev = CString::try_from_fmt(fmt!("{}", dev))?;
    let mut a = ConnectArgs {
        num: parse_u32(num)?,
        device: &dev,
        port: 1,
        src: parse_ipv4(src)?,
        dst: parse_ipv4(dst)?,
        service_id: parse_service(service)?,
        timing: cma::TIMING,
        behaviour: Behaviour::default(),
        cma_port: None,
        req_data: None,
        resolve_ms: RESOLVE_MS_DEFAULT,
        given: None,
    };
    let mut test = TestHooks::NONE;
    for opt in opts {
        match opt.split_once('=').ok_or(EINVAL)? {
            ("port", v) => a.port = parse_u32(v)?,
            ("auto_drep", d) => a.behaviour.auto_drep = Some(parse_drep(d)?),
            ("on_rep", "ignore") => test.on_rep = OnRep::Ignore,
            ("on_rep", "reject") => test.on_rep = OnRep::Reject,
            (k, v) if test_hook(&mut test, k, v)? => {}
            ("cma_port", v) => a.cma_port = Some(v.parse().map_err(|_| EINVAL)?),
            ("req_data", d) => a.req_data = Some(parse_data(d)?),
            ("recv", r) => a.behaviour.pre_recv = Some(parse_recv(r)?),
            ("dmac", m) => {
                a.given = Some(GivenPath::Roce {
                    dmac: parse_mac(m)?,
                })
            }
            ("ib_path", p) => {
                let (slid, dlid) = p.split_once(':').ok_or(EINVAL)?;
                a.given = Some(GivenPath::Ib {
                    slid: slid.parse().map_err(|_| EINVAL)?,
                    dlid: dlid.parse().map_err(|_| EINVAL)?,
                });
            }
            ("resolve_ms", v) => match parse_u32(v)? {
                ms @ 1..=RESOLVE_MS_MAX => a.resolve_ms = ms,
                _ => return Err(EINVAL),
            },
            ("rping", r) => {
                let (count, size) = r.split_once(':').ok_or(EINVAL)?;
                a.behaviour.rping = Some(rping::Role::Client {
                    count: parse_u32(count)?,
                    size: parse_len(size)?,
                });
            }
            ("lifetime", v) => a.timing.packet_life_time = parse_u5(v)?,
            ("resp", v) => a.timing.cm_response_timeout = parse_u5(v)?,
            ("retries", v) => {
                a.timing.max_cm_retries = parse_u32(v)?.try_into().map_err(|_| EINVAL)?
            }
            _ => return Err(EINVAL),
        }
    }
    a.timing.check()?;
    a.behaviour.test = test.boxed()?;
    core.connect(a)
}

/// `post NUM RECV [SEND] [size=N] [data=DATA] [sge=N] [unsig=N]`.
fn post(core: &Core, args: &[&str]) -> Result {
    let (num, counts, opts) = match args {
        [num, recv, rest @ ..] => {
            let (send, opts) = match rest.split_first() {
                Some((s, opts)) if !s.contains('=') => (parse_u32(s)?, opts),
                _ => (0, rest),
            };
            (parse_u32(num)?, (parse_u32(recv)?, send), opts)
        }
        _ => return Err(EINVAL),
    };
    let mut p = Post {
        recv: counts.0,
        send: counts.1,
        size: 0,
        data: None,
        sge: 1,
        unsig: 0,
    };
    for opt in opts {
        match opt.split_once('=').ok_or(EINVAL)? {
            ("size", n) => p.size = parse_len(n)?,
            ("data", d) => p.data = Some(parse_data(d)?),
            ("sge", n) => p.sge = parse_u32(n)? as usize,
            ("unsig", n) => p.unsig = parse_u32(n)?,
            _ => return Err(EINVAL),
        }
    }
    core.post(num, &p)
}

/// `rdma NUM read|write ADDR RKEY LEN [count=N] [data=DATA]`.
fn rdma(core: &Core, args: &[&str]) -> Result {
    let [num, op, addr, rkey, len, opts @ ..] = args else {
        return Err(EINVAL);
    };
    let mut r = Rdma {
        kind: match *op {
            "read" => WrKind::RdmaRead,
            "write" => WrKind::RdmaWrite,
            _ => return Err(EINVAL),
        },
        addr: parse_u64(addr)?,
        rkey: u32::try_from(parse_u64(rkey)?).map_err(|_| EINVAL)?,
        len: parse_len(len)?,
        count: 1,
        data: None,
    };
    for opt in opts {
        match opt.split_once('=').ok_or(EINVAL)? {
            ("count", n) => r.count = parse_u32(n)?,
            ("data", d) => r.data = Some(parse_data(d)?),
            _ => return Err(EINVAL),
        }
    }
    core.rdma(parse_u32(num)?, &r)
}

/// `COUNT[:SIZE]`: receives posted before the REQ or REP.
fn parse_recv(s: &str) -> Result<(u32, usize)> {
    match s.split_once(':') {
        Some((n, size)) => Ok((parse_u32(n)?, parse_len(size)?)),
        None => Ok((parse_u32(s)?, 0)),
    }
}

/// Runs `f` for each `NUM` of `NUM[,NUM...] [DATA]`; the first error wins.
fn for_each(args: &[&str], f: impl Fn(u32, &[u8]) -> Result) -> Result {
    let (nums, data) = nums_and_data(args)?;
    let mut res = Ok(());
    for num in nums.iter() {
        res = res.and(f(*num, &data));
    }
    res
}

fn nums_and_data(args: &[&str]) -> Result<(KVec<u32>, KVec<u8>)> {
    let (list, data) = match args {
        [list] => (list, KVec::new()),
        [list, data] => (list, parse_data(data)?),
        _ => return Err(EINVAL),
    };
    let mut nums = KVec::new();
    for n in list.split(',') {
        // `A-B`: every number from A to B.
        let (first, last) = match n.split_once('-') {
            Some((a, b)) => (parse_u32(a)?, parse_u32(b)?),
            None => (parse_u32(n)?, parse_u32(n)?),
        };
        if last < first || last - first >= MAX_LIST {
            return Err(EINVAL);
        }
        // The bound is on the whole list, not on each range: one 4 KiB
        // write holds about 370 ranges of `0-65535`, which would be 24
        // million numbers (96 MiB) in one command.
        if nums.len() as u64 + u64::from(last - first) + 1 > u64::from(MAX_LIST) {
            return Err(E2BIG);
        }
        for num in first..=last {
            nums.push(num, GFP_KERNEL)?;
        }
    }
    Ok((nums, data))
}

fn num_and_data(args: &[&str]) -> Result<(u32, KVec<u8>)> {
    match args {
        [num] => Ok((parse_u32(num)?, KVec::new())),
        [num, data] => Ok((parse_u32(num)?, parse_data(data)?)),
        _ => Err(EINVAL),
    }
}

/// `sleep:MS` (up to 10 s), `dreq`, `disconnect` or `disconnect:NUM`.
/// The test-only options both `listen` and `connect` take (see
/// [`TestHooks`]): `Ok(false)` if `key` is none of them.
fn test_hook(hooks: &mut TestHooks, key: &str, value: &str) -> Result<bool> {
    match key {
        "on_dreq" => hooks.on_dreq = parse_on_dreq(value)?,
        "on_timewait" => (hooks.timewait_sleep, hooks.timewait_after) = parse_timewait(value)?,
        "on_error" => hooks.error_sleep = parse_sleep(value)?,
        "rping_from" => hooks.rping_from = parse_u32(value)?,
        _ => return Ok(false),
    }
    Ok(true)
}

/// `close`, `job_delay:MS`, `job_sleep:MS` (up to 60 s), `fail_job` or
/// `rep_then_fail` (listen only).
fn parse_on_req(s: &str) -> Result<OnReq> {
    match s.split_once(':') {
        None if s == "close" => Ok(OnReq::Close),
        None if s == "fail_job" => Ok(OnReq::FailJob),
        None if s == "rep_then_fail" => Ok(OnReq::RepThenFail),
        Some(("job_delay", ms)) => match parse_u32(ms)? {
            ms @ 0..=60_000 => Ok(OnReq::JobDelay(ms)),
            _ => Err(EINVAL),
        },
        Some(("job_sleep", ms)) => match parse_u32(ms)? {
            ms @ 0..=60_000 => Ok(OnReq::JobSleep(ms)),
            _ => Err(EINVAL),
        },
        _ => Err(EINVAL),
    }
}

fn parse_on_dreq(s: &str) -> Result<OnDreq> {
    match s.split_once(':') {
        None if s == "dreq" => Ok(OnDreq::Dreq),
        None if s == "disconnect" => Ok(OnDreq::Disconnect),
        Some(("sleep", ms)) => match parse_u32(ms)? {
            ms @ 0..=10_000 => Ok(OnDreq::Sleep(ms)),
            _ => Err(EINVAL),
        },
        Some(("disconnect", num)) => Ok(OnDreq::DisconnectOther(parse_u32(num)?)),
        Some(("close", num)) => Ok(OnDreq::CloseOther(parse_u32(num)?)),
        _ => Err(EINVAL),
    }
}

/// `sleep:MS`, up to 10 s.
/// `sleep:MS` (before the id is freed) or `after:MS` (after it).
fn parse_timewait(s: &str) -> Result<(u32, bool)> {
    match s.split_once(':') {
        Some(("after", ms)) => match parse_u32(ms)? {
            ms @ 0..=10_000 => Ok((ms, true)),
            _ => Err(EINVAL),
        },
        _ => Ok((parse_sleep(s)?, false)),
    }
}

fn parse_sleep(s: &str) -> Result<u32> {
    match s.split_once(':') {
        Some(("sleep", ms)) => match parse_u32(ms)? {
            ms @ 0..=10_000 => Ok(ms),
            _ => Err(EINVAL),
        },
        _ => Err(EINVAL),
    }
}

fn parse_u32(s: &str) -> Result<u32> {
    s.parse().map_err(|_| EINVAL)
}

/// A CM timeout exponent: 5 bits on the wire.
fn parse_u5(s: &str) -> Result<u8> {
    match s.parse::<u8>() {
        Ok(v) if v < 32 => Ok(v),
        _ => Err(EINVAL),
    }
}

fn parse_u64(s: &str) -> Result<u64> {
    match s.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => s.parse(),
    }
    .map_err(|_| EINVAL)
}

/// A service id, or `tcp:PORT` / `udp:PORT` for rdma_cm's TCP and UDP port
/// spaces.
fn parse_service(s: &str) -> Result<u64> {
    let port = |p: &str| p.parse::<u16>().map_err(|_| EINVAL);
    if let Some(p) = s.strip_prefix("tcp:") {
        return Ok(PortSpace::Tcp.service_id(port(p)?));
    }
    if let Some(p) = s.strip_prefix("udp:") {
        return Ok(PortSpace::Udp.service_id(port(p)?));
    }
    parse_u64(s)
}

fn parse_ipv4(s: &str) -> Result<[u8; 4]> {
    parse_fixed(s, '.', |p| p.parse().map_err(|_| EINVAL))
}

/// `aa:bb:cc:dd:ee:ff`.
fn parse_mac(s: &str) -> Result<[u8; 6]> {
    parse_fixed(s, ':', hex_byte)
}

/// Exactly `N` parts of `s` separated by `sep`, each parsed by `one`.
fn parse_fixed<const N: usize>(
    s: &str,
    sep: char,
    one: impl Fn(&str) -> Result<u8>,
) -> Result<[u8; N]> {
    let mut out = [0u8; N];
    let mut parts = s.split(sep);
    for b in out.iter_mut() {
        *b = one(parts.next().ok_or(EINVAL)?)?;
    }
    if parts.next().is_some() {
        return Err(EINVAL);
    }
    Ok(out)
}

fn hex_byte(s: &str) -> Result<u8> {
    u8::from_str_radix(s, 16).map_err(|_| EINVAL)
}

/// A DREP's private data (`auto_drep=`): at most what a DREP carries, so
/// that no end holds more than it can send (every passive end copies its
/// listener's).
fn parse_drep(s: &str) -> Result<KVec<u8>> {
    let v = parse_data(s)?;
    if v.len() > Message::Drep.private_data_size() {
        return Err(EINVAL);
    }
    Ok(v)
}

/// DATA as described in the module documentation.
fn parse_data(s: &str) -> Result<KVec<u8>> {
    let mut v = KVec::new();
    if s == "-" {
        return Ok(v);
    }
    let (kind, rest) = s.split_once(':').ok_or(EINVAL)?;
    match kind {
        "text" => v.extend_from_slice(rest.as_bytes(), GFP_KERNEL)?,
        "hex" => {
            if rest.len() % 2 != 0 || rest.len() / 2 > MAX_DATA {
                return Err(EINVAL);
            }
            for i in (0..rest.len()).step_by(2) {
                v.push(hex_byte(rest.get(i..i + 2).ok_or(EINVAL)?)?, GFP_KERNEL)?;
            }
        }
        "pat" => {
            let n = parse_len(rest)?;
            v.reserve(n, GFP_KERNEL)?;
            for i in 0..n {
                v.push((i % 255) as u8 + 1, GFP_KERNEL)?;
            }
        }
        "fill" => {
            let (n, byte) = rest.split_once(':').ok_or(EINVAL)?;
            v.extend_with(parse_len(n)?, hex_byte(byte)?, GFP_KERNEL)?;
        }
        _ => return Err(EINVAL),
    }
    Ok(v)
}

fn parse_len(s: &str) -> Result<usize> {
    let n: usize = s.parse().map_err(|_| EINVAL)?;
    if n > MAX_DATA {
        return Err(E2BIG);
    }
    Ok(n)
}
