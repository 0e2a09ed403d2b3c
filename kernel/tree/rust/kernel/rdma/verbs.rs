// SPDX-License-Identifier: GPL-2.0

//! The verbs objects a connection needs: a protection domain ([`Pd`]), a
//! completion queue the RDMA core polls ([`Cq`]), which QPs share, an RC
//! queue pair ([`RcQp`]) on a PD and a CQ, and fast-registration memory
//! regions ([`Mr`]) of a PD; and the buffers of the work requests posted
//! on the QP.
//!
//! A posted work request owns its buffer, or the MR it registers or
//! invalidates: the buffer is DMA-mapped for the device when it is posted,
//! kept in the QP's table of posted work requests (where nothing else can
//! reach it) and unmapped and handed back to the caller with the request's
//! completion, successful or flushed. Buffers and MRs whose completion
//! never comes (the QP is destroyed first) are freed after the QP is
//! destroyed, when the device can no longer touch them.
//!
//! Policy is the user's: queue sizes, scatter/gather entries per request
//! and the name the RDMA core records are fields of [`QpSize`], which has
//! no default; which sends are signalled ([`RcQp::post_send_sg`]), how
//! many MRs it keeps and how large each is ([`Mr::new`]) are its own. What
//! the QP holds right now it reports itself ([`RcQp::bufs_mapped`],
//! [`RcQp::outstanding`]); a user that keeps counts over its QPs keeps
//! them itself.
//!
//! Each buffer of a request is one scatter/gather entry, which is what
//! lets a request own its buffers and hand them back whole with its
//! completion (or, unsignalled, with the completion of a later request).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

mod attr;
mod cq;
mod mapping;
mod mr;
mod pd;
mod qp;
mod wc;

pub use attr::{Access, QpAttr, QpRef, QpState};
pub use cq::{Cq, Waker};
pub use mr::{Mr, MrError, MrState};
pub use pd::Pd;
pub use qp::{QpSize, RcQp};
pub use wc::{Completion, WcStatus, WrKind};
