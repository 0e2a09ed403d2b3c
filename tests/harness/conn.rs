// SPDX-License-Identifier: GPL-2.0

//! Connections over the IB CM, made and torn down by this module: listeners,
//! the active and passive ends of RC connections, their disconnect, and the
//! record of every event each end saw.
//!
//! By job, each file importing only those above it (no ring:
//! `tests/imports.py tests/harness` checks):
//! - [`stats`]: the module's global counts; [`qp`]: every connection's QP,
//!   counted; [`wr_stats`]: the record of an endpoint's work requests;
//! - [`behaviour`]: how an endpoint behaves (the `listen`/`connect`
//!   options), its defaults and bounds, and the test hooks' settings;
//! - [`endpoint`]: one end of a connection (or a listener), its state and
//!   event record, its handshake, and its id's data ([`endpoint::EpHandle`]);
//! - [`pace`]: the peers' REP windows; [`bounds`]: what bounds what a peer
//!   can make the module hold (the lists of deadlines and held REPs, their
//!   queues, their counts);
//! - [`table`]: the connection table ([`Core`]), the device lifecycle (the
//!   `ib_client`'s add and remove) and unload ([`Owner`]);
//! - above the table: [`handler`], what each CM event does to an endpoint;
//!   [`release`], what frees its id and QP; [`commands`], the control
//!   interface's commands; [`passive`], a listener's REQs and its passive
//!   ends' job; [`deadlines`] and [`pacer`], the two sweepers (the DREPs and
//!   frees due whatever a peer does; the held REPs); [`pollers`], the rping
//!   pollers; [`reports`], `conns`, `events`, `stats`, `devices`;
//!   [`test_hooks`], what the test-only behaviours do.
//!
//! Ownership runs one way: the module owns the [`Core`] ([`Owner`]), the
//! core's table owns the endpoints and their ids, and an id owns its
//! endpoint (its `Handler`). No endpoint holds the core: what runs for one
//! (a CM callback, a job, a poller) takes a counted reference for its time
//! (`Core::get`, or from whoever queued it), and unload empties the table
//! before it lets go of the core.
//!
//! # Locks and their order
//!
//! The module has two kinds of lock, each named for lockdep:
//!
//! 1. `conn::Core::inner` ([`Core`], one): the device set, the connection
//!    table, and the count of `close`s in progress (`closing`, with its
//!    condition variable `conn::Core::closed`). It also keeps every id in
//!    the table alive while it is held: the CM calls on an id of the table
//!    (`send_req`, `send_rep`, `prepare_mra`, `init_qp_attr`, DREQ/DREP from a
//!    command) run under it.
//! 2. `conn::Endpoint::st` (one per endpoint, one lockdep class): the
//!    endpoint's event record, its QP and what is posted on it, its
//!    behaviour, its disconnect state and its rping protocol. The QP's
//!    moves and posts, and a DREQ or DREP sent in answer to a crossing DREQ,
//!    run under it.
//!
//! 3. `conn::Core::pending` (one): the peers' DREQs waiting for their
//!    deadline (see `Core::answer_later`); a leaf, taken under an
//!    endpoint's lock in the DREQ callback, nothing taken under it.
//! 4. `conn::Core::held` (one): the REPs held until their peer has room
//!    (see `pace`); a leaf, taken with no other lock held (also when a
//!    handshake ends: `Core::rep_done`), nothing taken under it.
//!
//! The order is `Core::inner` before `Endpoint::st`: code holding an
//! endpoint's lock never takes the table's (a callback that needs both, as
//! `dreq_received` before its `on_dreq` action, or the rping poller before
//! its disconnect, releases the endpoint's lock first), and no code holds
//! two endpoints' locks at once. Below both come the locks of the code we
//! call under them, none of which calls back into the module: the IB CM's
//! (`cm_id_priv->lock`), the verbs provider's, and the `cm` abstraction's
//! own leaf lock (an id's record of its running callbacks); and the lock
//! of the module's slot that `Core::get` reads (`CORE`, a global mutex), a
//! leaf. The IB core
//! calls the `ib_client`'s `add` with its device's `client_data_rwsem` held
//! for read, so that lock comes before `Core::inner`; nothing here registers
//! a client with a lock of ours held.
//!
//! Waits that must never happen with either lock held, because what they
//! wait for takes them:
//! - dropping a [`CmId`](crate::cm::CmId) (`ib_destroy_cm_id` waits for the
//!   id's callbacks, and every callback takes `Endpoint::st`, most take
//!   `Core::inner`): entries leave the table under the lock and are dropped
//!   after it (`close`, `remove_all_on`, `Owner`, `insert`'s failures); an
//!   id freed from its own callback is queued on the reaper instead
//!   (`destroy_own_cm`);
//! - flushing the reaper and the jobs (they take both locks): device
//!   removal and unload flush it with no lock held; the work that runs as
//!   long as a peer wants (the rping pollers; the sweepers of unanswered
//!   DREQs and held REPs) is on the core's `pollers` and `sweepers`
//!   instead, which nothing flushes while it may still be busy (it ends by
//!   itself: see `Core`);
//! - `rdma_addr_cancel()` at the end of an address resolution (`connect`
//!   resolves with no lock held).
//!
//! Waits that do happen under a lock, bounded and taking none of ours: a
//! QP's drain when device removal, `close` or a failed job frees it (up to
//! 2 s for its flushes, under `Endpoint::st`; a CM callback that frees its
//! QP drains without the lock, 100 ms at most, and leaves the rest to a
//! job), and `wait_for_closes` (on `Core::closed`, which releases
//! `Core::inner` while it waits).

mod behaviour;
mod bounds;
mod commands;
mod deadlines;
mod endpoint;
mod handler;
mod pace;
mod pacer;
mod passive;
mod pollers;
mod qp;
mod release;
mod reports;
mod stats;
mod table;
mod test_hooks;
mod wr_stats;

use kernel::time::{ClockSource, Monotonic};

/// `CLOCK_MONOTONIC` now, in nanoseconds: the clock of every time the
/// harness records (the one an `Instant<Monotonic>` reads).
pub(crate) fn now_ns() -> i64 {
    Monotonic::ktime_get()
}

pub(crate) use behaviour::{Behaviour, OnDreq, OnRep, OnReq, TestHooks, DREQ_ANSWER_MAX_MS};
pub(crate) use commands::{ConnectArgs, GivenPath, Post, Rdma};
pub(crate) use qp::{CountedQp, RegWith};
pub(crate) use table::{Core, Owner};
