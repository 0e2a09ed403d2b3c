// SPDX-License-Identifier: GPL-2.0

//! The reports: `conns`, `events`, `stats` and `devices`, and the per-endpoint
//! counts of work requests and payloads they print.

use super::{
    bounds::{Due, Durations},
    endpoint::{Endpoint, EpHandle, Event, Role},
    qp::CountedQp,
    stats::STATS,
    table::{Conn, Core},
    wr_stats::{DataStats, WrStats},
};
use core::{fmt::Write, sync::atomic::Ordering};
use kernel::rdma::verbs::{MrState, WrKind};

impl WrStats {
    /// Prints the counters for `conns`.
    fn show(&self, out: &mut impl Write) -> core::fmt::Result {
        write!(
            out,
            " posted={} completed={} flushed={} failed={} dropped={}",
            self.posted, self.completed_ok, self.flushed, self.completed_err, self.dropped
        )?;
        let zero = DataStats::default();
        let d = self.data.as_deref().unwrap_or(&zero);
        write!(
            out,
            " rx_msgs={} rx_bytes={} rx_sum={:08x} rx_last=",
            d.rx_msgs, d.rx_bytes, d.rx_sum
        )?;
        if d.rx_last_len == 0 {
            write!(out, "-")?;
        }
        for b in d.rx_last[..d.rx_last_len].iter() {
            write!(out, "{:02x}", b)?;
        }
        write!(
            out,
            " tx_msgs={} tx_bytes={} tx_sum={:08x}",
            d.tx_msgs, d.tx_bytes, d.tx_sum
        )?;
        if d.mr_back > 0 {
            write!(
                out,
                " mr_back={} mr_sum={:08x} mr_last=",
                d.mr_back, d.mr_sum
            )?;
            for b in d.mr_last.iter() {
                write!(out, "{:02x}", b)?;
            }
            write!(out, " mr_now=")?;
            let (p, n) = match d.mr_kept.as_ref() {
                Some(v) => (v.as_ptr(), v.len()),
                None => (core::ptr::null(), 0),
            };
            for i in 0..n.min(d.mr_last.len()) {
                // SAFETY: `i` is within the buffer. Read through a pointer:
                // the point is to see whether a device still writes there.
                let b = unsafe { core::ptr::read_volatile(p.add(i)) };
                write!(out, "{:02x}", b)?;
            }
        }
        Ok(())
    }
}

impl Durations {
    /// `NAME N`, `PREFIX_us_avg US`, `PREFIX_us_max US`.
    fn show(&self, out: &mut impl Write, name: &str, prefix: &str) -> core::fmt::Result {
        let n = self.n.load(Ordering::Relaxed);
        writeln!(out, "{} {}", name, n)?;
        let avg = self.ns.load(Ordering::Relaxed) / n.max(1) / 1000;
        writeln!(out, "{}_us_avg {}", prefix, avg)?;
        let max = self.ns_max.load(Ordering::Relaxed) / 1000;
        writeln!(out, "{}_us_max {}", prefix, max)
    }
}

impl Core {
    /// Prints `devices`.
    pub(crate) fn show_devices(&self, out: &mut impl Write) -> core::fmt::Result {
        self.inner.lock().devices.show(out)
    }

    /// Prints `conns`: one line per endpoint.
    pub(crate) fn show_conns(&self, out: &mut impl Write) -> core::fmt::Result {
        let inner = self.inner.lock();
        for (num, c) in inner.conns.iter() {
            let ep = &c.ep;
            write!(
                out,
                "{} role={} dev={}",
                num,
                ep.role.name(),
                ep.dev_name.to_str().unwrap_or("?")
            )?;
            match &c.cm {
                Some(cm) => write!(
                    out,
                    " state={} local_id={:#x} remote_id={:#x}",
                    cm.state().name(),
                    cm.local_id(),
                    cm.remote_id()
                )?,
                None => write!(out, " state=FREED")?,
            }
            let st = ep.st.lock();
            if let Some(v) = &st.verbs {
                write!(out, " qpn={}", v.qp_num())?;
                for (i, m) in v.mrs() {
                    let m = match m {
                        Ok(m) => m,
                        Err(WrKind::RegMr) => {
                            write!(out, " mr{i}=registering")?;
                            continue;
                        }
                        Err(_) => {
                            write!(out, " mr{i}=invalidating")?;
                            continue;
                        }
                    };
                    let state = match m.state() {
                        MrState::Free => "free",
                        MrState::Valid => "valid",
                        MrState::Failed => "failed",
                    };
                    write!(
                        out,
                        " mr{}={}:{:#x}:{:#x}:{}",
                        i,
                        state,
                        m.addr(),
                        m.rkey(),
                        m.len()
                    )?;
                }
            }
            if st.wr.posted > 0 {
                st.wr.show(out)?;
            }
            if let Some(r) = &st.rping {
                let (role, step) = r.describe();
                write!(
                    out,
                    " rping={}:{}:{}:{}:{}",
                    role, r.pings, r.validated, step, r.error
                )?;
            }
            if ep.role == Role::Passive {
                write!(out, " listener={}", ep.listener)?;
            }
            writeln!(out, " events={}", st.events.len())?;
        }
        Ok(())
    }

    /// Prints `events`: every event of every endpoint, in order per endpoint.
    pub(crate) fn show_events(&self, out: &mut impl Write) -> core::fmt::Result {
        let inner = self.inner.lock();
        for (num, c) in inner.conns.iter() {
            let st = c.ep.st.lock();
            for ev in st.events.iter() {
                write!(
                    out,
                    "{} {} status={} len={} t={}",
                    num,
                    ev.kind.name(),
                    ev.status,
                    ev.data.len(),
                    ev.t_ns
                )?;
                if !ev.data.is_empty() {
                    write!(out, " data=")?;
                    for b in ev.data.iter() {
                        write!(out, "{:02x}", b)?;
                    }
                }
                writeln!(out)?;
            }
        }
        Ok(())
    }

    /// Prints `stats`.
    pub(crate) fn show_stats(&self, out: &mut impl Write) -> core::fmt::Result {
        let inner = self.inner.lock();
        inner.devices.show_stats(out)?;
        let count = inner.conns.iter().count();
        writeln!(out, "conns {}", count)?;
        // What the module itself holds per endpoint (the verbs objects and
        // the CM's own id are the RDMA core's and the CM's).
        let mut bytes = 0;
        for c in inner.conns.values() {
            let st = c.ep.st.lock();
            bytes += core::mem::size_of::<Endpoint>()
                + core::mem::size_of::<Conn>()
                + st.events.capacity() * core::mem::size_of::<Event>()
                + st.events.iter().map(|e| e.data.capacity()).sum::<usize>()
                + st.verbs
                    .as_ref()
                    .map_or(0, |_| core::mem::size_of::<CountedQp>());
            if c.cm.is_some() {
                // The id's data; the kernel crate's memory per id, like the
                // CM's own, is not the module's.
                bytes += core::mem::size_of::<EpHandle>();
            }
        }
        writeln!(out, "endpoint_bytes_avg {}", bytes / count.max(1))?;
        // The part that does not depend on the event record.
        writeln!(
            out,
            "endpoint_fixed_bytes {}",
            core::mem::size_of::<Endpoint>()
                + core::mem::size_of::<Conn>()
                + core::mem::size_of::<CountedQp>()
                + core::mem::size_of::<EpHandle>()
        )?;
        writeln!(out, "event_bytes {}", core::mem::size_of::<Event>())?;
        drop(inner);
        STATS.show(out)?;
        writeln!(
            out,
            "established {}",
            self.established.load(Ordering::Relaxed)
        )?;
        writeln!(
            out,
            "drep_received {}",
            self.drep_received.load(Ordering::Relaxed)
        )?;
        writeln!(out, "dreq_sent {}", self.dreq_sent.load(Ordering::Relaxed))?;
        writeln!(
            out,
            "dreq_failed {}",
            self.dreq_failed.load(Ordering::Relaxed)
        )?;
        writeln!(out, "drep_sent {}", self.drep_sent.load(Ordering::Relaxed))?;
        writeln!(
            out,
            "drep_failed {}",
            self.drep_failed.load(Ordering::Relaxed)
        )?;
        writeln!(
            out,
            "events_lost {}",
            STATS.events_lost.load(Ordering::Relaxed)
        )?;
        // What a peer makes the module hold: DREQs
        // waiting for their deadline, those answered at it, and records of
        // freed passive ends dropped beyond their listener's `keep`.
        let (pending, to_free) = {
            let p = self.bounds.pending.lock();
            let drep = p.list.values().filter(|(_, d)| *d == Due::Drep).count();
            (drep, p.list.values().count() - drep)
        };
        writeln!(out, "dreqs_pending {}", pending)?;
        // Passive ends with a deadline, and those freed at it.
        writeln!(out, "ends_to_free {}", to_free)?;
        let late = self.bounds.counts.ends_freed_late.load(Ordering::Relaxed);
        writeln!(out, "ends_freed_late {}", late)?;
        let late = self
            .bounds
            .counts
            .handshakes_ended_late
            .load(Ordering::Relaxed);
        writeln!(out, "handshakes_ended_late {}", late)?;
        let refused = self.bounds.counts.ends_refused.load(Ordering::Relaxed);
        writeln!(out, "ends_refused {}", refused)?;
        writeln!(
            out,
            "dreq_answered_late {}",
            self.bounds
                .counts
                .dreq_answered_late
                .load(Ordering::Relaxed)
        )?;
        writeln!(
            out,
            "records_pruned {}",
            self.bounds.counts.records_pruned.load(Ordering::Relaxed)
        )?;
        writeln!(
            out,
            "prune_scans {}",
            self.bounds.counts.prune_scans.load(Ordering::Relaxed)
        )?;
        let passes = self.bounds.counts.removal_passes.load(Ordering::Relaxed);
        writeln!(out, "removal_passes {}", passes)?;
        // The rping steps queued or running, and the test's items
        // occupying their queue (`occupy_pollers`).
        let b = &self.bounds;
        let live = b.pollers_live.load(Ordering::Relaxed);
        writeln!(out, "pollers_live {}", live)?;
        let occupiers = b.occupiers.load(Ordering::Relaxed);
        writeln!(out, "pollers_occupiers {}", occupiers)?;
        self.req_times.show(out, "req_callbacks", "req_callback")?;
        // From the REQ callback to the REP: the job queue's latency.
        self.rep_times.show(out, "reps_sent", "rep_latency")?;
        // Each job once begun.
        self.bounds.jobs.times.show(out, "jobs_run", "job")?;
        writeln!(
            out,
            "jobs_queued {}",
            self.bounds.jobs.queued.load(Ordering::Relaxed)
        )?;
        // The REPs' pace: in flight, held now, held so far.
        writeln!(out, "reps_in_flight {}", self.bounds.peers.in_flight())?;
        writeln!(
            out,
            "rep_window_max {}",
            self.bounds.peers.window_max.load(Ordering::Relaxed)
        )?;
        let held = self.bounds.held.lock().list.keys().count();
        writeln!(out, "reps_held {}", held)?;
        let peers = &self.bounds.peers;
        for (name, c) in [
            ("reps_let_go_answered", &peers.let_go_answered),
            ("reps_let_go_timed", &peers.let_go_timed),
        ] {
            writeln!(out, "{name} {}", c.load(Ordering::Relaxed))?;
        }
        writeln!(
            out,
            "reps_held_total {}",
            self.bounds.peers.holds.load(Ordering::Relaxed)
        )
    }
}
