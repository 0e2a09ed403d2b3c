// SPDX-License-Identifier: GPL-2.0

//! IB connection manager identifiers: `struct ib_cm_id`.
//!
//! A [`CmId`] owns one `struct ib_cm_id` and the consumer's data for it; the
//! CM calls the consumer's [`Handler`] with that data for every event on the
//! id. What the C interface leaves to the caller is checked here: private
//! data is a `&[u8]` checked against its message's field (220 bytes for a
//! DREQ, 224 for a DREP, ...) before the CM is called, so a length is never
//! truncated to the C `u8`; received private data is lent to the handler
//! for the callback only; a listener's new id gets its data
//! ([`Request::accept`]) before any other event can reach it; every event
//! type is matched with what the CM does with the handler's return value.
//!
//! Dropping a [`CmId`] destroys the id, or queues the destroy (see
//! [`CmId`]). Who destroys an id on each path, the `*_ERROR` events and
//! device removal are described in
//! `Documentation/infiniband/rust_cm_disconnect.rst`. Policy (timing,
//! retries, flow control, resources) is the caller's, in [`Req`] and
//! [`Rep`], with no defaults.
//!
//! C header: [`include/rdma/ib_cm.h`](srctree/include/rdma/ib_cm.h)

mod enums;
mod handler;
mod id;
mod msg;

pub use enums::{RejReason, State};
pub use handler::{Handler, Request};
pub use id::{CmId, CmIdRef};
pub use msg::{Message, Rep, Req, DREP_PRIVATE_DATA_SIZE, DREQ_PRIVATE_DATA_SIZE};
