// SPDX-License-Identifier: GPL-2.0

//! The module's global counts ([`STATS`]): what it holds over all its
//! connections, counted where it is taken and given back (`stats`:
//! `wr_bufs_mapped`, `mrs_live`, `resolutions_live`, `cm_ids_live`,
//! `endpoints_live`: each is 0 once everything is freed, which the tests
//! check after every close), and the events its records could not keep
//! (`events_lost`).
//!
//! Counted where no [`Core`](super::Core) is at hand (a QP's or an id's
//! drop, an endpoint's record), so the counts are the module's, not the
//! core's: one core per load.

use core::{
    fmt::Write,
    sync::atomic::{AtomicUsize, Ordering},
};

/// The module's live objects by kind, and its lost events.
pub(super) struct Stats {
    /// Buffers mapped for a device over every QP (see
    /// [`CountedQp`](super::qp::CountedQp)).
    pub(super) bufs_mapped: AtomicUsize,
    /// MRs allocated over every QP.
    pub(super) mrs: AtomicUsize,
    /// Address resolutions under way: counted around `path::next_hop`,
    /// which cancels its request before it returns.
    pub(super) resolutions: AtomicUsize,
    /// CM ids alive: one per [`EpHandle`](super::endpoint::EpHandle), the
    /// data of every id the module makes, which the kernel crate frees only
    /// once the id is destroyed.
    pub(super) cm_ids: AtomicUsize,
    /// Endpoints alive, in the table or still held by an id (see
    /// [`Counted`]).
    pub(super) endpoints: AtomicUsize,
    /// Events an endpoint's record could not keep (no memory).
    pub(super) events_lost: AtomicUsize,
}

/// The module's counts.
pub(super) static STATS: Stats = Stats {
    bufs_mapped: AtomicUsize::new(0),
    mrs: AtomicUsize::new(0),
    resolutions: AtomicUsize::new(0),
    cm_ids: AtomicUsize::new(0),
    endpoints: AtomicUsize::new(0),
    events_lost: AtomicUsize::new(0),
};

impl Stats {
    /// The live counts as `stats` shows them, one `name value` line each.
    pub(super) fn show(&self, out: &mut impl Write) -> core::fmt::Result {
        for (name, c) in [
            ("cm_ids_live", &self.cm_ids),
            ("wr_bufs_mapped", &self.bufs_mapped),
            ("resolutions_live", &self.resolutions),
            ("mrs_live", &self.mrs),
            ("endpoints_live", &self.endpoints),
        ] {
            writeln!(out, "{name} {}", c.load(Ordering::Relaxed))?;
        }
        Ok(())
    }
}

/// One count of `counter` for as long as it lives.
pub(super) struct Counted(&'static AtomicUsize);

impl Counted {
    pub(super) fn new(counter: &'static AtomicUsize) -> Self {
        counter.fetch_add(1, Ordering::Relaxed);
        Self(counter)
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}
