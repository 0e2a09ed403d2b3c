// SPDX-License-Identifier: GPL-2.0

//! IB connection manager identifiers: `struct ib_cm_id`.
//!
//! A [`CmId`] owns one `struct ib_cm_id` and the consumer's data for it. The
//! CM calls the consumer's [`Handler`] with that data for every event on the
//! id. What the C interface leaves to the caller is checked here:
//!
//! - private data is a `&[u8]`: longer than the message's field (220 bytes
//!   for a DREQ, 224 for a DREP, ...) is `EINVAL` before anything reaches
//!   the CM, so a length can never be truncated to the C `u8`;
//! - event private data is only lent to the handler for the callback, which
//!   is as long as the CM keeps the received MAD;
//! - a listener's new ids get their own data ([`Request::accept`]) before
//!   any other event can reach them; a SIDR REQ's new id is only lent to
//!   the listener's handler ([`Handler::sidr_req_received`]), which answers
//!   it there or leaves the CM to reject it (a SIDR REP with
//!   IB_SIDR_REJECT);
//! - every event type the CM has is matched explicitly in the trampoline,
//!   with what the CM does with the handler's return value;
//! - dropping a [`CmId`] destroys the id and waits for its callbacks, except
//!   where waiting could deadlock: inside one of the id's own callbacks, or
//!   in any workqueue worker, where the CM runs every callback of every id
//!   (a listener it holds for a REQ callback, two handlers dropping each
//!   other's ids). There the destroy is queued on the id's [`Reaper`].
//!
//! Policy is the caller's: the timing, retries, flow control and resources
//! of a connection are fields of [`Req`] and [`Rep`], with no defaults; the
//! answer to a SIDR REQ is the handler's. A caller that counts its ids
//! counts them in its own data (`T`), which lives exactly as long as the
//! id.
//!
//! # Who destroys an id, and who waits for it
//!
//! The user's code (a module's) runs in three kinds of context: its own
//! (module init and exit, its file operations, its `ib_client`'s add and
//! remove), a CM callback of one of its ids, and a work item of its
//! [`Reaper`] (a queued destroy, or a job a callback handed off:
//! [`ReaperRef::spawn_job`]). An id is destroyed on exactly one of these
//! paths:
//!
//! 1. [`CmId`] dropped elsewhere than below: no event reaches the handler
//!    any more, the callbacks inside it are waited for, then
//!    `ib_destroy_cm_id`, which returns only when no callback of the id
//!    runs (the CM holds a reference on the id for each callback it
//!    delivers through `cm_process_work`; for the `*_ERROR` ones see
//!    below). Whoever drops it waits.
//! 2. [`CmId`] dropped inside one of its own callbacks, or in a workqueue
//!    worker (any id's callback, a job), or [`CmId::destroy_deferred`]: a work
//!    item of the [`Reaper`] destroys it as in 1, waiting for the callback
//!    that dropped it. Device removal flushes the reaper (`ReaperRef::flush`),
//!    and the reaper's drop (at module exit) runs everything queued and
//!    waits until no id that could still be queued exists.
//! 3. A REQ's new id that the handler does not accept (or accepts and drops
//!    before returning, having sent nothing on it; once a REP or MRA went
//!    out, its failure can reach the id until the CM destroys it, so such a
//!    drop is 2): non-zero return (the handler's errno), the CM
//!    destroys it (a REJ, none for `-ENOMEM` in `REQ_RCVD`) inside
//!    `cm_req_handler`, before it drops its reference on the listener. The
//!    listener's destroy (1 or 2) waits for that reference, so for this.
//! 4. A SIDR REQ's new id: lent to the listener's
//!    [`Handler::sidr_req_received`], then a non-zero return, and the CM
//!    destroys it (with a SIDR REP of IB_SIDR_REJECT unless the handler
//!    answered); `cm_sidr_req_handler` holds the listener until our handler
//!    has returned, so the listener's destroy waits for it.
//!
//! So once the user's own contexts have destroyed every id they hold (1)
//! and the reaper is gone (2, and 3 and 4 through the listeners), no CM
//! callback and no work item runs the user's code: a module that makes its
//! [`Reaper`] at init and drops it last at exit cannot be unloaded under
//! one. What a handler may drop: any [`CmId`], its own and its listener's
//! included; no [`Reaper`].
//!
//! The `*_ERROR` events (REQ, REP, DREQ timed out) are the exception to
//! "the CM holds the id": 6.12's `cm_process_send_error` drops its
//! reference on the id (`cm_free_priv_msg`) before it calls the handler,
//! from the MAD layer's completion, not serialised with the id's other
//! callbacks (a `DREQ_ERROR` handler still runs when `TIMEWAIT_EXIT`
//! comes on the CM's workqueue). So `ib_destroy_cm_id` from another task
//! would free the id under such a handler. Every task inside a callback of
//! the id is recorded (`Inner::callbacks`, one record per task on its
//! stack), and both destroy paths first mark the id dropped under that
//! list's lock (no callback reaches the handler after that), then sleep
//! until the list is empty (the last callback to leave wakes them) *before*
//! `ib_destroy_cm_id`, and again after it: a handler may sleep and then use
//! its `&CmIdRef`. The records also let two callbacks at once each see
//! their own drop of the [`CmId`] as one from a callback. What remains is
//! the CM's own window between its unlock and the call of our handler
//! (cm.c `cm_process_send_error`, between `spin_unlock_irq` and
//! `cm_handler`): a destroy that completes in those few instructions frees
//! the id under the CM itself; nothing outside the CM can close it (it
//! would need the CM's reference).
//!
//! C header: [`include/rdma/ib_cm.h`](srctree/include/rdma/ib_cm.h)

mod enums;
mod handler;
mod id;
mod msg;
mod reaper;

pub use enums::{RejReason, SidrStatus, State};
pub use handler::{Handler, Request, SidrRequest};
pub use id::{CmId, CmIdRef};
pub use msg::{
    Message, Rep, Req, DREP_PRIVATE_DATA_SIZE, DREQ_PRIVATE_DATA_SIZE, REJ_PRIVATE_DATA_SIZE,
    REP_PRIVATE_DATA_SIZE, REQ_PRIVATE_DATA_SIZE, RTU_PRIVATE_DATA_SIZE,
    SIDR_REP_PRIVATE_DATA_SIZE, SIDR_REQ_PRIVATE_DATA_SIZE,
};
pub use reaper::{Reaper, ReaperRef};
