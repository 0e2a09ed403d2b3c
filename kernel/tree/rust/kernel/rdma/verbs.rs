// SPDX-License-Identifier: GPL-2.0

//! The verbs objects a connection needs: a protection domain, a completion
//! queue and an RC queue pair, owned together and freed in that order's
//! reverse; and the buffers of the work requests posted on the QP.
//!
//! A posted work request owns its buffer: the buffer is DMA-mapped for the
//! device when it is posted, kept in the QP's table of posted work requests
//! (where nothing else can reach it) and unmapped and handed back to the
//! caller with the request's completion, successful or flushed. Buffers
//! whose completion never comes (the QP is destroyed first) are unmapped and
//! freed after the QP is destroyed, when the device can no longer touch them.
//!
//! Policy is the user's: queue sizes, how many MRs and the name the RDMA
//! core records are fields of [`QpSize`], which has no default. What the
//! QP holds right now (buffers mapped, MRs allocated) it reports itself
//! ([`RcQp::bufs_mapped`], [`RcQp::mrs_allocated`]); a user that keeps
//! counts over its QPs keeps them itself.
//!
//! Each work request carries one buffer (one scatter/gather entry:
//! `max_send_sge` and `max_recv_sge` are 1), which is what lets a request
//! own its buffer and hand it back whole with its completion.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use super::device::Device;
use crate::{
    bindings, c_str,
    error::{from_err_ptr, to_result},
    ffi::{c_int, c_void},
    prelude::*,
    str::CStr,
    time::{ktime_ms_delta, msecs_to_jiffies, Ktime},
    types::{ARef, Opaque, ScopeGuard},
};
use core::{mem::ManuallyDrop, ptr::NonNull};

/// What a posted work request is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WrKind {
    /// A receive, into the request's buffer.
    Recv,
    /// A SEND of the request's buffer.
    Send,
    /// An RDMA READ into the request's buffer.
    RdmaRead,
    /// An RDMA WRITE of the request's buffer.
    RdmaWrite,
    /// The fast registration of one of the QP's MRs (`IB_WR_REG_MR`).
    RegMr,
    /// The local invalidation of one of the QP's MRs (`IB_WR_LOCAL_INV`):
    /// its completion hands the MR's buffer back.
    LocalInv,
}

impl WrKind {
    /// A request of the send queue (all but receives).
    fn on_send_queue(self) -> bool {
        self != Self::Recv
    }
}

/// The largest buffer an MR registers: two pages of page list cover it
/// wherever it starts.
pub const MAX_REG_BYTES: usize = 4096;

/// Where an MR of the QP is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MrState {
    /// Its REG_MR is posted.
    Registering,
    /// Registered: the peer may read and write the buffer with its rkey.
    Valid,
    /// Its LOCAL_INV is posted.
    Invalidating,
    /// Its REG_MR or LOCAL_INV did not complete with success (flushed by a
    /// QP in error): the buffer stays with the MR until the QP is freed.
    Failed,
}

/// What the peer needs to use an MR, and its state (for `conns`).
#[derive(Clone, Copy, Debug)]
pub struct MrInfo {
    /// Its index among the QP's MRs (what [`RcQp::invalidate_mr`] takes).
    pub index: usize,
    /// The address the peer's RDMA READ and WRITE use.
    pub addr: u64,
    /// The key the peer's RDMA READ and WRITE use.
    pub rkey: u32,
    /// The buffer's length in bytes.
    pub len: usize,
    /// Where it is in its life.
    pub state: MrState,
}

/// A fast-registration MR of the QP's PD, with the buffer it exposes.
///
/// `buf` is the buffer registered, from its REG_MR's post until its
/// LOCAL_INV completes with success (then it goes back to the caller) or the
/// QP is destroyed; `None` while the MR is free for a new registration.
struct MrSlot {
    mr: NonNull<bindings::ib_mr>,
    buf: Option<Mapping>,
    state: MrState,
    key: u8,
}

/// A completion taken from a CQ, with the buffer of its work request back.
pub struct Completion {
    /// How the work request ended: [`WcStatus::Success`], or
    /// [`WcStatus::WrFlushErr`] for a flush.
    pub status: WcStatus,
    /// What the work request was (`None`: not one of ours, never expected).
    pub kind: Option<WrKind>,
    /// Bytes received, for a successful receive.
    pub byte_len: u32,
    /// The buffer the work request was posted with, unmapped: the caller's
    /// again (empty for a zero-length request; for a successful LOCAL_INV,
    /// the MR's buffer).
    pub buf: KVec<u8>,
    /// The MR a REG_MR or LOCAL_INV was about.
    pub mr: Option<usize>,
}

macro_rules! wc_status {
    ($($(#[$doc:meta])* $name:ident = $raw:ident,)*) => {
        /// How a work request (or a MAD the CM sent) ended: `enum ib_wc_status`.
        ///
        /// A status the kernel does not define (a driver's bug) is kept as
        /// [`WcStatus::Unknown`], so that nothing is lost in the conversion.
        ///
        /// # Examples
        ///
        /// ```
        /// use kernel::{bindings, rdma::verbs::WcStatus};
        ///
        /// let flush = WcStatus::from_raw(bindings::ib_wc_status_IB_WC_WR_FLUSH_ERR);
        /// assert_eq!(flush, WcStatus::WrFlushErr);
        /// assert_eq!(flush.name(), "WR_FLUSH_ERR");
        /// assert_eq!(WcStatus::from_raw(flush.to_raw()), flush);
        /// assert!(WcStatus::from_raw(0).is_success());
        /// assert_eq!(WcStatus::from_raw(1000), WcStatus::Unknown(1000));
        /// assert_eq!(WcStatus::Unknown(1000).to_raw(), 1000);
        /// ```
        #[derive(Clone, Copy, PartialEq, Eq, Debug)]
        pub enum WcStatus {
            $($(#[$doc])* $name,)*
            /// A value `enum ib_wc_status` does not have.
            Unknown(u32),
        }

        impl WcStatus {
            /// The status of a raw `enum ib_wc_status` value.
            pub fn from_raw(raw: u32) -> Self {
                $(if raw == bindings::$raw {
                    return Self::$name;
                })*
                Self::Unknown(raw)
            }

            /// The raw `enum ib_wc_status` value.
            pub fn to_raw(self) -> u32 {
                match self {
                    $(Self::$name => bindings::$raw,)*
                    Self::Unknown(raw) => raw,
                }
            }

            /// The name the kernel's sources use, without the `IB_WC_` prefix
            /// (`"UNKNOWN"` for a value they do not have).
            pub fn name(self) -> &'static str {
                match self {
                    $(Self::$name => &stringify!($raw)["ib_wc_status_IB_WC_".len()..],)*
                    Self::Unknown(_) => "UNKNOWN",
                }
            }
        }
    };
}

wc_status! {
    /// The work request completed.
    Success = ib_wc_status_IB_WC_SUCCESS,
    /// Local length error.
    LocLenErr = ib_wc_status_IB_WC_LOC_LEN_ERR,
    /// Local QP operation error.
    LocQpOpErr = ib_wc_status_IB_WC_LOC_QP_OP_ERR,
    /// Local EE context operation error.
    LocEecOpErr = ib_wc_status_IB_WC_LOC_EEC_OP_ERR,
    /// Local protection error.
    LocProtErr = ib_wc_status_IB_WC_LOC_PROT_ERR,
    /// Flushed: the QP is in the error state.
    WrFlushErr = ib_wc_status_IB_WC_WR_FLUSH_ERR,
    /// Memory window bind error.
    MwBindErr = ib_wc_status_IB_WC_MW_BIND_ERR,
    /// Bad response.
    BadRespErr = ib_wc_status_IB_WC_BAD_RESP_ERR,
    /// Local access error.
    LocAccessErr = ib_wc_status_IB_WC_LOC_ACCESS_ERR,
    /// Remote invalid request.
    RemInvReqErr = ib_wc_status_IB_WC_REM_INV_REQ_ERR,
    /// Remote access error.
    RemAccessErr = ib_wc_status_IB_WC_REM_ACCESS_ERR,
    /// Remote operation error.
    RemOpErr = ib_wc_status_IB_WC_REM_OP_ERR,
    /// Transport retries exceeded.
    RetryExcErr = ib_wc_status_IB_WC_RETRY_EXC_ERR,
    /// RNR retries exceeded.
    RnrRetryExcErr = ib_wc_status_IB_WC_RNR_RETRY_EXC_ERR,
    /// Local RDD violation.
    LocRddViolErr = ib_wc_status_IB_WC_LOC_RDD_VIOL_ERR,
    /// Remote invalid RD request.
    RemInvRdReqErr = ib_wc_status_IB_WC_REM_INV_RD_REQ_ERR,
    /// Remote abort.
    RemAbortErr = ib_wc_status_IB_WC_REM_ABORT_ERR,
    /// Invalid EE context number.
    InvEecnErr = ib_wc_status_IB_WC_INV_EECN_ERR,
    /// Invalid EE context state.
    InvEecStateErr = ib_wc_status_IB_WC_INV_EEC_STATE_ERR,
    /// Fatal error.
    FatalErr = ib_wc_status_IB_WC_FATAL_ERR,
    /// Response timeout: for a MAD, no answer after every retry.
    RespTimeoutErr = ib_wc_status_IB_WC_RESP_TIMEOUT_ERR,
    /// General error.
    GeneralErr = ib_wc_status_IB_WC_GENERAL_ERR,
}

impl WcStatus {
    /// Whether the work request completed successfully.
    pub fn is_success(self) -> bool {
        self == Self::Success
    }
}

/// The state of a QP: `enum ib_qp_state`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum QpState {
    /// Reset.
    Reset,
    /// Initialised: receives may be posted.
    Init,
    /// Ready to receive.
    Rtr,
    /// Ready to send.
    Rts,
    /// Send queue drained.
    Sqd,
    /// Send queue error.
    Sqe,
    /// Error: every work request is flushed.
    Err,
}

impl QpState {
    pub(crate) fn to_raw(self) -> bindings::ib_qp_state {
        match self {
            Self::Reset => bindings::ib_qp_state_IB_QPS_RESET,
            Self::Init => bindings::ib_qp_state_IB_QPS_INIT,
            Self::Rtr => bindings::ib_qp_state_IB_QPS_RTR,
            Self::Rts => bindings::ib_qp_state_IB_QPS_RTS,
            Self::Sqd => bindings::ib_qp_state_IB_QPS_SQD,
            Self::Sqe => bindings::ib_qp_state_IB_QPS_SQE,
            Self::Err => bindings::ib_qp_state_IB_QPS_ERR,
        }
    }
}

/// What the remote end (and local writes) may do to a QP's memory:
/// `enum ib_access_flags`, combined with `|`.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct Access(u32);

impl Access {
    /// Nothing beyond local reads.
    pub const NONE: Self = Self(0);
    /// The device may write local memory (receives, RDMA READ results).
    pub const LOCAL_WRITE: Self = Self(bindings::ib_access_flags_IB_ACCESS_LOCAL_WRITE);
    /// The peer may RDMA WRITE.
    pub const REMOTE_WRITE: Self = Self(bindings::ib_access_flags_IB_ACCESS_REMOTE_WRITE);
    /// The peer may RDMA READ.
    pub const REMOTE_READ: Self = Self(bindings::ib_access_flags_IB_ACCESS_REMOTE_READ);
    /// The peer may use atomics.
    pub const REMOTE_ATOMIC: Self = Self(bindings::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC);
}

impl core::ops::BitOr for Access {
    type Output = Self;

    fn bitor(self, rhs: Self) -> Self {
        Self(self.0 | rhs.0)
    }
}

/// The attributes of one QP transition and the mask of those set: what
/// `ib_modify_qp()` takes. Made by [`QpAttr::to_init`], [`QpAttr::to_error`]
/// or by the IB CM for a connection's next state
/// (`kernel::rdma::cm::CmIdRef::init_qp_attr`).
///
/// The CM's attributes for RTR (and RTS with an alternate path) carry its
/// address vectors, which point at the GID entries (`struct ib_gid_attr`)
/// the traffic leaves from; `ib_modify_qp` trusts those pointers
/// (`rdma_fill_sgid_attr` keeps a set one). The CM holds them only for as
/// long as the id lives (`cm_destroy_av`), so a value made from an id
/// holds them itself, until it is dropped: it may outlive the id (and the
/// entry's address may be deleted meanwhile), the entry stays valid.
///
/// # Invariants
///
/// If `holds`, each non-null `attr.ah_attr.grh.sgid_attr` and
/// `attr.alt_ah_attr.grh.sgid_attr` is a GID entry this value holds a
/// reference on (`rdma_hold_gid_attr()`), put in `drop`; neither pointer
/// changes while `holds`. If not `holds`, both are null.
///
/// # Examples
///
/// ```
/// use kernel::rdma::verbs::{Access, QpAttr, QpState};
///
/// let attr = QpAttr::to_init(1, 0, Access::REMOTE_READ | Access::REMOTE_WRITE);
/// assert_eq!(attr.state(), Some(QpState::Init));
/// assert_eq!(QpAttr::to_error().state(), Some(QpState::Err));
/// ```
pub struct QpAttr {
    attr: bindings::ib_qp_attr,
    mask: c_int,
    holds: bool,
}

impl QpAttr {
    /// The attributes in `attr` that `mask` names, made here: no address
    /// vector, so no GID entry.
    fn from_raw(mut attr: bindings::ib_qp_attr, mask: c_int) -> Self {
        attr.ah_attr.grh.sgid_attr = core::ptr::null();
        attr.alt_ah_attr.grh.sgid_attr = core::ptr::null();
        // INVARIANT: both GID entry pointers are null.
        Self {
            attr,
            mask,
            holds: false,
        }
    }

    /// The attributes in `attr` that `mask` names, as the RDMA core or the
    /// IB CM computed them, taking a reference on each GID entry their
    /// address vectors point at.
    ///
    /// # Safety
    ///
    /// Each non-null `ah_attr.grh.sgid_attr` and `alt_ah_attr.grh.sgid_attr`
    /// of `attr` must point at a GID entry that is held (by its producer,
    /// the CM's id) for the duration of the call.
    pub(crate) unsafe fn from_raw_held(attr: bindings::ib_qp_attr, mask: c_int) -> Self {
        for gid in [attr.ah_attr.grh.sgid_attr, attr.alt_ah_attr.grh.sgid_attr] {
            if !gid.is_null() {
                // SAFETY: The caller guarantees a held, so valid, entry.
                unsafe { bindings::rdma_hold_gid_attr(gid) };
            }
        }
        // INVARIANT: each non-null entry is held just above, put in `drop`.
        Self {
            attr,
            mask,
            holds: true,
        }
    }

    /// To INIT, on port `port` with P_Key index `pkey_index`, granting the
    /// peer `access`: an active end's first move (a passive end's comes
    /// from the CM).
    pub fn to_init(port: u32, pkey_index: u16, access: Access) -> Self {
        let attr = bindings::ib_qp_attr {
            qp_state: QpState::Init.to_raw(),
            pkey_index,
            port_num: port,
            qp_access_flags: access.0 as c_int,
            ..Default::default()
        };
        let mask = bindings::ib_qp_attr_mask_IB_QP_STATE
            | bindings::ib_qp_attr_mask_IB_QP_PKEY_INDEX
            | bindings::ib_qp_attr_mask_IB_QP_PORT
            | bindings::ib_qp_attr_mask_IB_QP_ACCESS_FLAGS;
        Self::from_raw(attr, mask as c_int)
    }

    /// To the error state: every posted work request is flushed.
    pub fn to_error() -> Self {
        let attr = bindings::ib_qp_attr {
            qp_state: QpState::Err.to_raw(),
            ..Default::default()
        };
        Self::from_raw(attr, bindings::ib_qp_attr_mask_IB_QP_STATE as c_int)
    }

    /// The state this moves the QP to, if the transition names one.
    pub fn state(&self) -> Option<QpState> {
        if self.mask & bindings::ib_qp_attr_mask_IB_QP_STATE as c_int == 0 {
            return None;
        }
        [
            QpState::Reset,
            QpState::Init,
            QpState::Rtr,
            QpState::Rts,
            QpState::Sqd,
            QpState::Sqe,
            QpState::Err,
        ]
        .into_iter()
        .find(|s| s.to_raw() == self.attr.qp_state)
    }

    /// Sets the PSN the QP expects first from its peer (`rq_psn`): for a
    /// passive end that moves to RTR before its REP tells the CM that PSN.
    pub fn set_rq_psn(&mut self, psn: u32) {
        self.attr.rq_psn = psn;
        self.mask |= bindings::ib_qp_attr_mask_IB_QP_RQ_PSN as c_int;
    }
}

impl Drop for QpAttr {
    fn drop(&mut self) {
        if !self.holds {
            return;
        }
        for gid in [
            self.attr.ah_attr.grh.sgid_attr,
            self.attr.alt_ah_attr.grh.sgid_attr,
        ] {
            if !gid.is_null() {
                // SAFETY: A reference this value holds (type invariant),
                // put once: this is its drop.
                unsafe { bindings::rdma_put_gid_attr(gid) };
            }
        }
    }
}

/// A kernel buffer DMA-mapped for a device, for one work request.
///
/// # Invariants
///
/// If `len > 0`, the first `len` bytes of `buf`'s allocation (kmalloc'd,
/// physically contiguous) are mapped on `dev` at `addr` in direction `dir`,
/// and are unmapped exactly once, in `drop`; `buf`'s allocation does not move
/// or shrink meanwhile (only `into_buf` takes it, and the unmap follows at
/// once). A `Mapping` with `len > 0` lives only in the tables of an
/// [`RcQp`] of `dev` (or on the stack of its methods), so `dev` outlives it:
/// the [`RcQp`] holds a reference on its device, put after it has freed its
/// mappings. With `len == 0`, `dev` is never used.
struct Mapping {
    buf: KVec<u8>,
    len: usize,
    addr: u64,
    dev: NonNull<bindings::ib_device>,
    dir: bindings::dma_data_direction,
}

impl Mapping {
    /// Maps `buf` (all of its `len()` bytes) on `dev` for `dir`; an empty
    /// buffer is not mapped.
    ///
    /// # Safety
    ///
    /// `dev` is a registered device that outlives the returned value.
    unsafe fn new(
        dev: NonNull<bindings::ib_device>,
        mut buf: KVec<u8>,
        dir: bindings::dma_data_direction,
    ) -> Result<Self> {
        let len = buf.len();
        let mut addr = 0;
        if len > 0 {
            // SAFETY: `dev` is registered (the caller's contract); `buf`'s
            // first `len` bytes are one kmalloc allocation, which stays where
            // it is while `Self` owns it.
            addr = unsafe {
                bindings::ib_dma_map_single(dev.as_ptr(), buf.as_mut_ptr().cast(), len, dir)
            };
            // SAFETY: `dev` is registered; `addr` is what it just returned.
            if unsafe { bindings::ib_dma_mapping_error(dev.as_ptr(), addr) } != 0 {
                return Err(ENOMEM);
            }
        }
        // INVARIANT: mapped above if `len > 0`.
        Ok(Self {
            buf,
            len,
            addr,
            dev,
            dir,
        })
    }

    /// No buffer: for requests that carry none (REG_MR, LOCAL_INV).
    fn none() -> Self {
        // INVARIANT: `len == 0`: nothing mapped.
        Self {
            buf: KVec::new(),
            len: 0,
            addr: 0,
            dev: NonNull::dangling(),
            dir: bindings::dma_data_direction_DMA_NONE,
        }
    }

    /// Unmaps the buffer and gives it back.
    fn into_buf(mut self) -> KVec<u8> {
        let buf = core::mem::take(&mut self.buf);
        // Unmapped here (`drop`), before the caller can read the buffer.
        drop(self);
        buf
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        if self.len > 0 {
            // SAFETY: By the type invariant the mapping exists and `dev` is
            // alive; this is its one unmap.
            unsafe {
                bindings::ib_dma_unmap_single(self.dev.as_ptr(), self.addr, self.len, self.dir)
            };
        }
    }
}

/// A work request on the QP, owning its buffer until its completion.
struct Posted {
    kind: WrKind,
    buf: Mapping,
    /// The MR slot a REG_MR or LOCAL_INV is about.
    mr: usize,
}

/// A QP borrowed from its owner: what a disconnect does to it.
///
/// # Invariants
///
/// The wrapped `struct ib_qp` is a live kernel QP for the lifetime of every
/// `&QpRef`.
#[repr(transparent)]
pub struct QpRef(Opaque<bindings::ib_qp>);

impl QpRef {
    /// # Safety
    ///
    /// `ptr` must be a live kernel QP that is not destroyed during `'a`.
    pub unsafe fn from_raw<'a>(ptr: *mut bindings::ib_qp) -> &'a Self {
        // SAFETY: `QpRef` is a transparent wrapper; the caller guarantees
        // validity for `'a`.
        unsafe { &*ptr.cast() }
    }

    /// Returns the raw `struct ib_qp` pointer.
    pub fn as_raw(&self) -> *mut bindings::ib_qp {
        self.0.get()
    }

    /// Modifies the QP (`ib_modify_qp`) as `attr` says.
    pub fn modify(&self, attr: &QpAttr) -> Result {
        // `ib_modify_qp` takes a mutable pointer but only reads the
        // attributes: a copy keeps `attr` the caller's.
        let mut raw = attr.attr;
        // SAFETY: By the type invariant the QP is live; `raw` is valid for
        // the call.
        to_result(unsafe { bindings::ib_modify_qp(self.0.get(), &mut raw, attr.mask) })
    }

    /// Moves the QP to the error state: every posted work request completes
    /// on its CQ with [`WcStatus::WrFlushErr`].
    pub fn to_error(&self) -> Result {
        self.modify(&QpAttr::to_error())
    }
}

/// What an [`RcQp`] is made with: its queue sizes and the user's choices,
/// all of them the caller's (there is no default).
///
/// # Examples
///
/// ```
/// use kernel::{c_str, rdma::verbs::QpSize};
///
/// let size = QpSize { send: 64, recv: 256, max_mrs: 2, caller: c_str!("rping") };
/// assert_eq!((size.send, size.recv, size.max_mrs), (64, 256, 2));
/// ```
#[derive(Clone, Copy)]
pub struct QpSize {
    /// Work requests the send queue holds (completions not yet polled
    /// included).
    pub send: u32,
    /// Work requests the receive queue holds.
    pub recv: u32,
    /// The most MRs the QP registers at once (`ENOSPC` beyond; 0: none).
    pub max_mrs: usize,
    /// The name the RDMA core records for the PD, CQ and QP (restrack, as
    /// `rdma resource` shows it): usually the module's.
    pub caller: &'static CStr,
}

/// The CQ's completion events, as a `struct completion` the CQ's handler
/// completes once per event: [`RcQp::drain`] sleeps on it.
///
/// # Invariants
///
/// The `completion` is initialised (as `init_completion()` does) and, boxed,
/// never moves.
struct CqEvents(Opaque<bindings::completion>);

impl CqEvents {
    fn new() -> Result<KBox<Self>> {
        let this = KBox::new(Self(Opaque::uninit()), GFP_KERNEL)?;
        let c = this.0.get();
        // SAFETY: `c` is valid for writes and stays where it is (boxed); this
        // is `init_completion()`: no events yet, an empty wait queue with a
        // lock class of its own.
        unsafe {
            (*c).done = 0;
            bindings::__init_swait_queue_head(
                core::ptr::addr_of_mut!((*c).wait),
                c_str!("rdma::verbs::RcQp::cq_events").as_char_ptr(),
                crate::static_lock_class!().as_ptr(),
            );
        }
        // INVARIANT: initialised above, in its box.
        Ok(this)
    }

    /// The CQ's `comp_handler`, called by the driver (any context, IRQs
    /// perhaps off) for an event requested with `ib_req_notify_cq()`.
    ///
    /// # Safety
    ///
    /// `ctx` is the `completion` of a live [`CqEvents`] (the CQ's context,
    /// which outlives the CQ).
    unsafe extern "C" fn handler(_cq: *mut bindings::ib_cq, ctx: *mut c_void) {
        // SAFETY: By the function's safety requirement; `complete()` may be
        // called from any context.
        unsafe { bindings::complete(ctx.cast()) };
    }
}

/// A protection domain, a CQ polled directly, an RC QP using both, and the
/// work requests posted on the QP with their buffers.
///
/// # Invariants
///
/// `pd`, `cq` and `qp` are live objects of `device`; `qp` was created on
/// `pd` with `cq` as its send and receive CQ. They are destroyed in the
/// order QP, CQ, PD, each exactly once, in `drop`. Every work request posted
/// on `qp` and not yet taken from `cq` is in `wrs`, at the index that is its
/// `wr_id`, with the buffer it was posted with (mapped for the device):
/// nothing else reaches those buffers until the request's completion is
/// polled or the QP is destroyed. `cq`'s completion handler is
/// [`CqEvents::handler`] with `events` as its context, which is freed
/// after the CQ. `device` (a reference) is released after them, and never
/// if the QP could not be destroyed (it is leaked with it).
pub struct RcQp {
    pd: NonNull<bindings::ib_pd>,
    cq: NonNull<bindings::ib_cq>,
    events: ManuallyDrop<KBox<CqEvents>>,
    qp: NonNull<bindings::ib_qp>,
    size: QpSize,
    wrs: KVec<Option<Posted>>,
    mrs: KVec<MrSlot>,
    // Released by `drop` after it has freed the objects and mappings above;
    // leaked with them if the QP could not be destroyed.
    device: ManuallyDrop<ARef<Device>>,
}

impl RcQp {
    /// Allocates a PD, a CQ and an RC QP on `device`. May sleep.
    pub fn new(device: &Device, size: QpSize) -> Result<Self> {
        // SAFETY: `device` is registered; `caller` is a static string. No
        // flags: no unsafe global rkey.
        let pd = from_err_ptr(unsafe {
            bindings::__ib_alloc_pd(device.as_raw(), 0, size.caller.as_char_ptr())
        })?;
        // Released on the error paths below, until the QP exists.
        let pd = ScopeGuard::new_with_data(NonNull::new(pd).ok_or(ENOMEM)?, |pd| {
            // SAFETY: A live PD with no users left (its QP was not created).
            unsafe { bindings::ib_dealloc_pd_user(pd.as_ptr(), core::ptr::null_mut()) };
        });

        let cqe = size.send.checked_add(size.recv).ok_or(EINVAL)?;
        c_int::try_from(cqe).map_err(|_| EINVAL)?;
        let events = CqEvents::new()?;
        let cq_attr = bindings::ib_cq_init_attr {
            cqe,
            comp_vector: 0,
            flags: 0,
        };
        // SAFETY: As above. Polled directly by `poll_one` (the consumer's
        // own polling, as `ib_create_cq()` leaves it); its events complete
        // `events`, which outlives the CQ (freed after it, here and in
        // `drop`); no asynchronous event handler.
        let cq = from_err_ptr(unsafe {
            bindings::__ib_create_cq(
                device.as_raw(),
                Some(CqEvents::handler),
                None,
                events.0.get().cast(),
                &cq_attr,
                size.caller.as_char_ptr(),
            )
        })?;
        // Declared after `events`, so dropped (on an error below) before it.
        let cq = ScopeGuard::new_with_data(NonNull::new(cq).ok_or(ENOMEM)?, |cq| {
            // SAFETY: A live CQ with no users left (its QP was not created).
            unsafe { bindings::ib_destroy_cq_user(cq.as_ptr(), core::ptr::null_mut()) };
        });

        let mut attr = bindings::ib_qp_init_attr {
            send_cq: cq.as_ptr(),
            recv_cq: cq.as_ptr(),
            cap: bindings::ib_qp_cap {
                max_send_wr: size.send,
                max_recv_wr: size.recv,
                max_send_sge: 1,
                max_recv_sge: 1,
                ..Default::default()
            },
            sq_sig_type: bindings::ib_sig_type_IB_SIGNAL_ALL_WR,
            qp_type: bindings::ib_qp_type_IB_QPT_RC,
            ..Default::default()
        };
        // SAFETY: `pd` and `cq` are live objects of `device`; `attr` is valid.
        let qp = from_err_ptr(unsafe {
            bindings::ib_create_qp_kernel(pd.as_ptr(), &mut attr, size.caller.as_char_ptr())
        })?;
        let qp = NonNull::new(qp).ok_or(ENOMEM)?;
        // INVARIANT: all three live, the QP on `pd` with `cq`, nothing posted;
        // ownership moves from the guards to `Self`.
        Ok(Self {
            device: ManuallyDrop::new(device.into()),
            pd: pd.dismiss(),
            cq: cq.dismiss(),
            events: ManuallyDrop::new(events),
            qp,
            size,
            wrs: KVec::new(),
            mrs: KVec::new(),
        })
    }

    /// The device the QP is on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The QP number, for the REQ or REP.
    pub fn qp_num(&self) -> u32 {
        // SAFETY: By the type invariant the QP is live; `qp_num` is fixed.
        unsafe { (*self.qp.as_ptr()).qp_num }
    }

    /// The QP, for what does not depend on owning it.
    pub fn qp(&self) -> &QpRef {
        // SAFETY: By the type invariant the QP is live as long as `self`.
        unsafe { QpRef::from_raw(self.qp.as_ptr()) }
    }

    /// Modifies the QP (`ib_modify_qp`) as `attr` says.
    pub fn modify(&self, attr: &QpAttr) -> Result {
        self.qp().modify(attr)
    }

    /// The QP's path MTU in bytes, once it has one (RTR or later);
    /// `ENOTCONN` before.
    pub fn path_mtu(&self) -> Result<u32> {
        let mut attr = bindings::ib_qp_attr::default();
        let mut init = bindings::ib_qp_init_attr::default();
        let mask = bindings::ib_qp_attr_mask_IB_QP_STATE | bindings::ib_qp_attr_mask_IB_QP_PATH_MTU;
        // SAFETY: By the type invariant the QP is live; `attr` and `init` are
        // valid for writes.
        to_result(unsafe {
            bindings::ib_query_qp(self.qp.as_ptr(), &mut attr, mask as c_int, &mut init)
        })?;
        if attr.qp_state == bindings::ib_qp_state_IB_QPS_RESET
            || attr.qp_state == bindings::ib_qp_state_IB_QPS_INIT
        {
            return Err(ENOTCONN);
        }
        // `ib_mtu_enum_to_int()`: IB_MTU_256 (1) .. IB_MTU_4096 (5).
        match attr.path_mtu {
            m @ 1..=5 => Ok(128 << m),
            _ => Err(EINVAL),
        }
    }

    /// Work requests of `kind` posted and not yet completed.
    pub fn outstanding(&self, kind: WrKind) -> u32 {
        self.wrs.iter().flatten().filter(|p| p.kind == kind).count() as u32
    }

    /// Requests posted and not yet completed, on both queues.
    pub fn outstanding_all(&self) -> u32 {
        self.wrs.iter().flatten().count() as u32
    }

    /// Buffers this QP holds mapped for its device now: those of its posted
    /// work requests and those its MRs expose. 0 once every request came
    /// back and every MR was invalidated.
    pub fn bufs_mapped(&self) -> usize {
        let posted = self.wrs.iter().flatten().filter(|p| p.buf.len > 0);
        let mrs = self.mrs.iter().filter(|m| m.buf.is_some());
        posted.count() + mrs.count()
    }

    /// MRs this QP has allocated (they are reused, and freed with the QP):
    /// at most [`QpSize::max_mrs`].
    pub fn mrs_allocated(&self) -> usize {
        self.mrs.len()
    }

    /// Room for `n` more work requests of `kind` (the QP's queue size).
    pub fn has_room(&self, kind: WrKind, n: u32) -> bool {
        let (cap, used) = if kind.on_send_queue() {
            let used = self.wrs.iter().flatten().filter(|p| p.kind.on_send_queue());
            (self.size.send, used.count() as u32)
        } else {
            (self.size.recv, self.outstanding(WrKind::Recv))
        };
        used.saturating_add(n) <= cap
    }

    /// A free index of the table, for a new work request's `wr_id`.
    fn free_slot(&mut self) -> Result<usize> {
        if let Some(i) = self.wrs.iter().position(|p| p.is_none()) {
            return Ok(i);
        }
        self.wrs.push(None, GFP_KERNEL)?;
        Ok(self.wrs.len() - 1)
    }

    /// Maps `buf` for `kind`, and gives its free slot and scatter entry.
    fn prepare(
        &mut self,
        kind: WrKind,
        buf: KVec<u8>,
    ) -> Result<(usize, Mapping, bindings::ib_sge)> {
        if !self.has_room(kind, 1) {
            return Err(ENOMEM);
        }
        let length = u32::try_from(buf.len()).map_err(|_| EINVAL)?;
        let slot = self.free_slot()?;
        // SAFETY: By the type invariant the PD is live; its device is fixed.
        let (dev, lkey) = unsafe {
            let pd = self.pd.as_ptr();
            ((*pd).device, (*pd).local_dma_lkey)
        };
        let dir = match kind {
            WrKind::Recv | WrKind::RdmaRead => bindings::dma_data_direction_DMA_FROM_DEVICE,
            _ => bindings::dma_data_direction_DMA_TO_DEVICE,
        };
        // SAFETY: The PD's device is registered; the mapping goes into our
        // table, freed before the device goes (see `Mapping`).
        let map = unsafe { Mapping::new(NonNull::new(dev).ok_or(EINVAL)?, buf, dir)? };
        let sge = bindings::ib_sge {
            addr: map.addr,
            length,
            lkey,
        };
        Ok((slot, map, sge))
    }

    /// Posts a receive work request into `buf` (all of its `len()` bytes; an
    /// empty one: no scatter entry). The buffer comes back with the
    /// request's completion (see [`RcQp::poll_one`]); on an error it is
    /// freed. `ENOMEM` if the receive queue is full.
    pub fn post_recv(&mut self, buf: KVec<u8>) -> Result {
        let (slot, map, mut sge) = self.prepare(WrKind::Recv, buf)?;
        let mut wr = bindings::ib_recv_wr::default();
        wr.__bindgen_anon_1.wr_id = slot as u64;
        if map.len > 0 {
            wr.sg_list = &mut sge;
            wr.num_sge = 1;
        }
        let mut bad: *const bindings::ib_recv_wr = core::ptr::null();
        // SAFETY: By the type invariant the QP is live; `wr` and `sge` are
        // only read during the call; the buffer `sge` names is mapped and,
        // from here, owned by the table until the completion is polled.
        to_result(unsafe { bindings::ib_post_recv(self.qp.as_ptr(), &wr, &mut bad) })?;
        // INVARIANT: the posted request is in the table at its `wr_id`.
        self.wrs[slot] = Some(Posted {
            kind: WrKind::Recv,
            buf: map,
            mr: 0,
        });
        Ok(())
    }

    /// Posts a signaled SEND of `buf` (all of its `len()` bytes; empty: a
    /// zero-length SEND). The buffer comes back with the completion; on an
    /// error it is freed. `ENOMEM` if the send queue is full.
    pub fn post_send(&mut self, buf: KVec<u8>) -> Result {
        let (slot, map, mut sge) = self.prepare(WrKind::Send, buf)?;
        let mut wr = bindings::ib_send_wr {
            opcode: bindings::ib_wr_opcode_IB_WR_SEND,
            send_flags: bindings::ib_send_flags_IB_SEND_SIGNALED as c_int,
            ..Default::default()
        };
        wr.__bindgen_anon_1.wr_id = slot as u64;
        if map.len > 0 {
            wr.sg_list = &mut sge;
            wr.num_sge = 1;
        }
        let mut bad: *const bindings::ib_send_wr = core::ptr::null();
        // SAFETY: As in `post_recv`; the device only reads the buffer.
        to_result(unsafe { bindings::ib_post_send(self.qp.as_ptr(), &wr, &mut bad) })?;
        // INVARIANT: as in `post_recv`.
        self.wrs[slot] = Some(Posted {
            kind: WrKind::Send,
            buf: map,
            mr: 0,
        });
        Ok(())
    }

    /// Posts a signaled RDMA READ (`kind` [`WrKind::RdmaRead`]: the peer's
    /// `len()` bytes at `remote_addr` into `buf`) or WRITE
    /// ([`WrKind::RdmaWrite`]: `buf` to there), with the peer's `rkey`. The
    /// buffer comes back with the completion (a READ's with what was read);
    /// on an error it is freed. `ENOMEM` if the send queue is full.
    pub fn post_rdma(
        &mut self,
        kind: WrKind,
        buf: KVec<u8>,
        remote_addr: u64,
        rkey: u32,
    ) -> Result {
        let opcode = match kind {
            WrKind::RdmaRead => bindings::ib_wr_opcode_IB_WR_RDMA_READ,
            WrKind::RdmaWrite => bindings::ib_wr_opcode_IB_WR_RDMA_WRITE,
            _ => return Err(EINVAL),
        };
        let (slot, map, mut sge) = self.prepare(kind, buf)?;
        let mut wr = bindings::ib_rdma_wr {
            wr: bindings::ib_send_wr {
                opcode,
                send_flags: bindings::ib_send_flags_IB_SEND_SIGNALED as c_int,
                ..Default::default()
            },
            remote_addr,
            rkey,
        };
        wr.wr.__bindgen_anon_1.wr_id = slot as u64;
        if map.len > 0 {
            wr.wr.sg_list = &mut sge;
            wr.wr.num_sge = 1;
        }
        let mut bad: *const bindings::ib_send_wr = core::ptr::null();
        // SAFETY: As in `post_send`; `wr.wr` is the first member of an
        // `ib_rdma_wr`, as the driver reads it for these opcodes. A READ's
        // buffer is mapped for the device to write.
        to_result(unsafe { bindings::ib_post_send(self.qp.as_ptr(), &wr.wr, &mut bad) })?;
        // INVARIANT: as in `post_recv`.
        self.wrs[slot] = Some(Posted {
            kind,
            buf: map,
            mr: 0,
        });
        Ok(())
    }

    /// Registers `buf` for the peer's RDMA READ and WRITE with a fast
    /// registration MR of the QP's PD (`ib_alloc_mr`, `ib_map_mr_sg`, an
    /// `IB_WR_REG_MR` on the send queue, a new key each time an MR is
    /// reused). Returns the MR's index; [`RcQp::mrs`] says when it is valid
    /// and what to tell the peer. The buffer belongs to the MR until
    /// [`RcQp::invalidate_mr`]'s LOCAL_INV completes (the completion hands it
    /// back) or the QP is freed. At most [`QpSize::max_mrs`] MRs (`ENOSPC`)
    /// and [`MAX_REG_BYTES`] bytes (`EMSGSIZE`).
    pub fn reg_mr(&mut self, buf: KVec<u8>) -> Result<usize> {
        if buf.is_empty() || buf.len() > MAX_REG_BYTES {
            return Err(EMSGSIZE);
        }
        if !self.has_room(WrKind::RegMr, 1) {
            return Err(ENOMEM);
        }
        let idx = match self.mrs.iter().position(|m| m.buf.is_none()) {
            Some(i) => i,
            None if self.mrs.len() < self.size.max_mrs => {
                // SAFETY: By the type invariant the PD is live. Two pages
                // hold any buffer of up to a page, wherever it starts.
                let mr = from_err_ptr(unsafe {
                    bindings::ib_alloc_mr(
                        self.pd.as_ptr(),
                        bindings::ib_mr_type_IB_MR_TYPE_MEM_REG,
                        2,
                    )
                })?;
                let mr = NonNull::new(mr).ok_or(ENOMEM)?;
                let slot = MrSlot {
                    mr,
                    buf: None,
                    state: MrState::Failed,
                    key: 0,
                };
                if let Err(e) = self.mrs.push(slot, GFP_KERNEL) {
                    // SAFETY: Just allocated, never used.
                    unsafe { bindings::ib_dereg_mr_user(mr.as_ptr(), core::ptr::null_mut()) };
                    return Err(e.into());
                }
                self.mrs.len() - 1
            }
            None => return Err(ENOSPC),
        };
        let slot = self.free_slot()?;
        let len = u32::try_from(buf.len()).map_err(|_| EINVAL)?;
        // SAFETY: By the type invariant the PD is live; its device is fixed.
        let dev = unsafe { (*self.pd.as_ptr()).device };
        // SAFETY: The PD's device is registered; the mapping is kept by the
        // MR slot, freed before the device goes (see `Mapping`).
        let map = unsafe {
            Mapping::new(
                NonNull::new(dev).ok_or(EINVAL)?,
                buf,
                bindings::dma_data_direction_DMA_BIDIRECTIONAL,
            )?
        };
        let m = &mut self.mrs[idx];
        let key = m.key.wrapping_add(1);
        // The one range already mapped, as a scatterlist of one entry (on
        // the stack: the driver copies the page addresses out of it).
        let mut sg = bindings::scatterlist::default();
        // SAFETY: `sg` is one entry, valid for writes.
        unsafe { bindings::sg_init_table(&mut sg, 1) };
        sg.dma_address = map.addr;
        #[cfg(CONFIG_NEED_SG_DMA_LENGTH)]
        {
            sg.dma_length = len;
        }
        #[cfg(not(CONFIG_NEED_SG_DMA_LENGTH))]
        {
            sg.length = len;
        }
        // SAFETY: The MR is ours and not registered (free slot): its key and
        // page list may change. `sg` names a mapping of `len` bytes.
        let n = unsafe {
            bindings::ib_update_fast_reg_key(m.mr.as_ptr(), key);
            bindings::ib_map_mr_sg(
                m.mr.as_ptr(),
                &mut sg,
                1,
                core::ptr::null_mut(),
                crate::page::PAGE_SIZE as u32,
            )
        };
        if n != 1 {
            return Err(if n < 0 { Error::from_errno(n) } else { EINVAL });
        }
        let access = bindings::ib_access_flags_IB_ACCESS_LOCAL_WRITE
            | bindings::ib_access_flags_IB_ACCESS_REMOTE_READ
            | bindings::ib_access_flags_IB_ACCESS_REMOTE_WRITE;
        let mut wr = bindings::ib_reg_wr {
            wr: bindings::ib_send_wr {
                opcode: bindings::ib_wr_opcode_IB_WR_REG_MR,
                send_flags: bindings::ib_send_flags_IB_SEND_SIGNALED as c_int,
                ..Default::default()
            },
            mr: m.mr.as_ptr(),
            // SAFETY: As above; `rkey` was just set.
            key: unsafe { (*m.mr.as_ptr()).rkey },
            access: access as c_int,
        };
        wr.wr.__bindgen_anon_1.wr_id = slot as u64;
        let mut bad: *const bindings::ib_send_wr = core::ptr::null();
        // SAFETY: By the type invariant the QP is live; `wr.wr` is the first
        // member of an `ib_reg_wr`, as the driver reads it for REG_MR. The
        // buffer the MR maps is owned by the slot from here until its
        // LOCAL_INV completes or the QP is destroyed.
        to_result(unsafe { bindings::ib_post_send(self.qp.as_ptr(), &wr.wr, &mut bad) })?;
        m.key = key;
        m.buf = Some(map);
        m.state = MrState::Registering;
        // INVARIANT: the posted request is in the table at its `wr_id`.
        self.wrs[slot] = Some(Posted {
            kind: WrKind::RegMr,
            buf: Mapping::none(),
            mr: idx,
        });
        Ok(idx)
    }

    /// Posts the LOCAL_INV of MR `idx` (`EINVAL` unless it is valid): the
    /// peer's rkey stops working, and the completion hands the MR's buffer
    /// back (with what the peer wrote into it) and frees the MR for reuse.
    pub fn invalidate_mr(&mut self, idx: usize) -> Result {
        let m = self.mrs.get(idx).ok_or(ENOENT)?;
        if m.state != MrState::Valid {
            return Err(EINVAL);
        }
        if !self.has_room(WrKind::LocalInv, 1) {
            return Err(ENOMEM);
        }
        let slot = self.free_slot()?;
        let m = &mut self.mrs[idx];
        let mut wr = bindings::ib_send_wr {
            opcode: bindings::ib_wr_opcode_IB_WR_LOCAL_INV,
            send_flags: bindings::ib_send_flags_IB_SEND_SIGNALED as c_int,
            ..Default::default()
        };
        wr.__bindgen_anon_1.wr_id = slot as u64;
        // SAFETY: By the type invariant the MR is live; `rkey` is its key.
        wr.ex.invalidate_rkey = unsafe { (*m.mr.as_ptr()).rkey };
        let mut bad: *const bindings::ib_send_wr = core::ptr::null();
        // SAFETY: By the type invariant the QP is live; `wr` is only read.
        to_result(unsafe { bindings::ib_post_send(self.qp.as_ptr(), &wr, &mut bad) })?;
        m.state = MrState::Invalidating;
        // INVARIANT: as in `reg_mr`.
        self.wrs[slot] = Some(Posted {
            kind: WrKind::LocalInv,
            buf: Mapping::none(),
            mr: idx,
        });
        Ok(())
    }

    /// The MRs holding a buffer, for the peer and for `conns`.
    pub fn mrs(&self) -> impl Iterator<Item = MrInfo> + '_ {
        self.mrs.iter().enumerate().filter_map(|(index, m)| {
            let b = m.buf.as_ref()?;
            // SAFETY: By the type invariant the MR is live; `rkey` is a plain
            // field, changed only under `&mut self`.
            let rkey = unsafe { (*m.mr.as_ptr()).rkey };
            Some(MrInfo {
                index,
                addr: b.addr,
                rkey,
                len: b.len,
                state: m.state,
            })
        })
    }

    /// Takes one completion from the CQ, if there is one, with its work
    /// request's buffer back.
    pub fn poll_one(&mut self) -> Result<Option<Completion>> {
        let mut wc = bindings::ib_wc::default();
        // SAFETY: By the type invariant the CQ is live and polled only here
        // (under `&mut self`); `wc` is valid for one entry.
        let got = unsafe { bindings::ib_poll_cq(self.cq.as_ptr(), 1, &mut wc) };
        if got < 0 {
            return Err(Error::from_errno(got));
        }
        if got == 0 {
            return Ok(None);
        }
        // SAFETY: Every work request on this QP is posted with a `wr_id`
        // (never a `wr_cqe`): both are a `u64`-sized union member.
        let wr_id = unsafe { wc.__bindgen_anon_1.wr_id };
        let posted = usize::try_from(wr_id)
            .ok()
            .and_then(|i| self.wrs.get_mut(i))
            .and_then(Option::take);
        // The request is over: its buffer is unmapped and handed back.
        let mut mr = None;
        let (kind, buf) = match posted {
            Some(p) => {
                if matches!(p.kind, WrKind::RegMr | WrKind::LocalInv) {
                    mr = Some(p.mr);
                }
                let mut buf = p.buf.into_buf();
                if let Some(m) = self.mrs.get_mut(p.mr) {
                    match (p.kind, WcStatus::from_raw(wc.status)) {
                        (WrKind::RegMr, WcStatus::Success) => m.state = MrState::Valid,
                        // Invalidated: the peer's rkey no longer reaches the
                        // buffer, which goes back with this completion.
                        (WrKind::LocalInv, WcStatus::Success) => {
                            buf = m.buf.take().map_or_else(KVec::new, Mapping::into_buf);
                        }
                        (WrKind::RegMr | WrKind::LocalInv, _) => m.state = MrState::Failed,
                        _ => {}
                    }
                }
                (Some(p.kind), buf)
            }
            None => (None, KVec::new()),
        };
        Ok(Some(Completion {
            status: WcStatus::from_raw(wc.status),
            kind,
            byte_len: wc.byte_len,
            buf,
            mr,
        }))
    }

    /// Ends every posted work request before the QP is freed, as
    /// `ib_drain_qp()` would (which a CQ the consumer polls cannot use):
    /// moves the QP to the error state if anything is posted, so that the
    /// device flushes it, and hands each completion to `f`, sleeping until
    /// the CQ reports the next one (`ib_req_notify_cq()`) for at most
    /// `wait_ms` in all. Returns how many requests did not come back (their
    /// buffers are freed with the QP, after it is destroyed). May sleep.
    pub fn drain(&mut self, wait_ms: u32, mut f: impl FnMut(Completion)) -> u32 {
        if self.outstanding_all() > 0 {
            // Failing, the QP is already in error or gone with the device:
            // what comes back is taken below, the rest is counted.
            let _ = self.qp().to_error();
        }
        let start = Ktime::ktime_get();
        loop {
            while let Ok(Some(c)) = self.poll_one() {
                f(c);
            }
            let left = self.outstanding_all();
            let waited = ktime_ms_delta(Ktime::ktime_get(), start);
            let rest = i64::from(wait_ms).saturating_sub(waited);
            if left == 0 || rest <= 0 {
                return left;
            }
            let flags = bindings::ib_cq_notify_flags_IB_CQ_NEXT_COMP
                | bindings::ib_cq_notify_flags_IB_CQ_REPORT_MISSED_EVENTS;
            // SAFETY: By the type invariant the CQ is live; `req_notify_cq`
            // is a mandatory operation of every kernel verbs driver.
            let armed = unsafe {
                let cq = self.cq.as_ptr();
                match (*(*cq).device).ops.req_notify_cq {
                    Some(notify) => notify(cq, flags),
                    None => -(bindings::EOPNOTSUPP as c_int),
                }
            };
            match armed {
                // Completions came in before the request: poll them.
                1.. => continue,
                // No events to wait for: what is out stays out.
                ..=-1 => return left,
                0 => {}
            }
            // SAFETY: `events` is live (type invariant). An event from before
            // (a count left over) only ends this wait early: the loop polls
            // and asks again.
            unsafe {
                bindings::wait_for_completion_timeout(
                    self.events.0.get(),
                    msecs_to_jiffies(u32::try_from(rest).unwrap_or(u32::MAX)),
                )
            };
        }
    }
}

impl Drop for RcQp {
    fn drop(&mut self) {
        // SAFETY: By the type invariant each object is live and destroyed only
        // here, users first: the QP, then its CQ, then their PD.
        let ret = unsafe { bindings::ib_destroy_qp_user(self.qp.as_ptr(), core::ptr::null_mut()) };
        if ret != 0 {
            // The QP still exists (a driver refused, as rxe does for a QP
            // with multicast attachments): the device may still write into
            // the buffers of its posted requests and complete on the CQ,
            // and the peer may still reach its MRs. Leaking them, the
            // buffers, the CQ and the PD is the only safe choice.
            pr_warn!(
                "QP {} not destroyed ({}): its MRs, buffers, CQ, PD and device reference are leaked\n",
                self.qp_num(),
                ret
            );
            // The device too: the leaked QP, CQ and PD are its objects,
            // which its unregistration would tear down under the driver
            // (its reference is never put, so it waits; a hang rather than
            // a use after free).
            core::mem::forget(core::mem::take(&mut self.mrs));
            core::mem::forget(core::mem::take(&mut self.wrs));
            // `events` too: the CQ's handler may still complete it.
            return;
        }
        // The QP is gone: the device no longer touches the buffers of the
        // requests still in the table, and the peer no longer reaches the
        // MRs (RC: only through this QP). Deregistered, unmapped and freed
        // here, while the device is still ours.
        for m in core::mem::take(&mut self.mrs).into_iter() {
            // SAFETY: The MR is live and ours; nothing uses it any more.
            unsafe { bindings::ib_dereg_mr_user(m.mr.as_ptr(), core::ptr::null_mut()) };
            drop(m.buf);
        }
        drop(core::mem::take(&mut self.wrs));
        // SAFETY: As above; the CQ's events go after it, nothing completes
        // them any more.
        unsafe {
            bindings::ib_destroy_cq_user(self.cq.as_ptr(), core::ptr::null_mut());
            ManuallyDrop::drop(&mut self.events);
            bindings::ib_dealloc_pd_user(self.pd.as_ptr(), core::ptr::null_mut());
        }
        // SAFETY: Released once, here, last: nothing of the device is used
        // after this.
        unsafe { ManuallyDrop::drop(&mut self.device) };
    }
}

// SAFETY: The verbs objects are used through the RDMA core, which locks them
// itself; kernel QPs may be posted to and modified from any thread. The
// table of posted requests (and the device pointer of each mapping) is only
// changed through `&mut self`.
unsafe impl Send for RcQp {}
// SAFETY: As for `Send`: every `&self` method goes through the core's own
// locking and only reads the table.
unsafe impl Sync for RcQp {}
