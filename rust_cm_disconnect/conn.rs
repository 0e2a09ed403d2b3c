// SPDX-License-Identifier: GPL-2.0

//! Connections over the IB CM, made and torn down by this module: listeners,
//! the active and passive ends of RC connections, their disconnect, and the
//! record of every event each end saw.
//!
//! By job:
//! - [`endpoint`]: one end of a connection (or a listener), its state and
//!   event record, and its CM handler (the callbacks, the passive end's job);
//! - [`table`]: the connection table ([`Core`]), the counters, the device
//!   lifecycle (the `ib_client`'s add and remove) and unload ([`Owner`]);
//! - [`commands`]: the control interface's commands on the table;
//! - [`reports`]: `conns`, `events`, `stats`, `devices`;
//! - [`test_hooks`]: the test-only behaviours ([`TestHooks`]).
//!
//! Locking: one mutex ([`Core`]) guards the device set and the connection
//! table. A [`CmId`](crate::cm::CmId) is never dropped with it held:
//! dropping an id waits for the id's callbacks, and callbacks take the lock.

#[path = "conn/commands.rs"]
mod commands;
#[path = "conn/endpoint.rs"]
mod endpoint;
#[path = "conn/reports.rs"]
mod reports;
#[path = "conn/table.rs"]
mod table;
#[path = "conn/test_hooks.rs"]
mod test_hooks;

pub(crate) use commands::{ConnectArgs, Post, Rdma};
pub(crate) use endpoint::Behaviour;
pub(crate) use table::{Core, Owner};
pub(crate) use test_hooks::{OnDreq, OnRep, OnReq, TestHooks};
