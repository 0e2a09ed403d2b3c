// SPDX-License-Identifier: GPL-2.0

//! Work completions: how a work request ended ([`WcStatus`], also what
//! the IB CM reports for its MADs), what it was ([`WrKind`]), and the
//! [`Completion`] that hands its buffer back. Also `rdma_raw_enum!`, the one
//! macro that mirrors a C enum of the RDMA headers as a Rust enum (here
//! and in [`crate::rdma::cm`]).

use crate::prelude::*;

/// Declares a Rust enum for a C enum of the RDMA headers: one variant per
/// named value (documented with its binding's name, after its own words if
/// any), and `$unknown(raw)` for a value the kernel's enum does not have (a
/// driver's bug, or a peer's field), so that the conversion loses nothing;
/// with `from_raw`, `to_raw` and `name` (the C name without `$prefix`).
///
/// Exported (hidden) so that every file of `kernel::rdma` reaches it by its
/// path (`crate::rdma_raw_enum!`), whichever of them a kernel has.
#[doc(hidden)]
#[macro_export]
macro_rules! rdma_raw_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $ty:ident: $raw_ty:ty, $prefix:literal {
            $($(#[$doc:meta])* $name:ident = $raw:ident,)*
        }
        $unknown:ident
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, PartialEq, Eq, Debug)]
        $vis enum $ty {
            $(
                $(#[$doc])*
                #[doc = concat!("\n\n`bindings::", stringify!($raw), "`")]
                $name,
            )*
            /// A value the kernel's enum does not have.
            $unknown($raw_ty),
        }

        // A private enum may not use every conversion (as `bitfield!` does).
        #[allow(dead_code)]
        impl $ty {
            /// The value of a raw C enum value.
            $vis fn from_raw(raw: $raw_ty) -> Self {
                $(if raw == $crate::bindings::$raw {
                    return Self::$name;
                })*
                Self::$unknown(raw)
            }

            /// The raw C enum value.
            $vis fn to_raw(self) -> $raw_ty {
                match self {
                    $(Self::$name => $crate::bindings::$raw,)*
                    Self::$unknown(raw) => raw,
                }
            }

            /// The name the kernel's sources use, without their prefix
            /// (`"UNKNOWN"` for a value they do not have).
            $vis fn name(self) -> &'static str {
                match self {
                    $(Self::$name => &stringify!($raw)[$prefix.len()..],)*
                    Self::$unknown(_) => "UNKNOWN",
                }
            }
        }
    };
}

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
    /// The fast registration of an [`Mr`](super::Mr) (`IB_WR_REG_MR`).
    RegMr,
    /// The local invalidation of an [`Mr`](super::Mr) (`IB_WR_LOCAL_INV`):
    /// its completion hands the MR's buffer back.
    LocalInv,
}

impl WrKind {
    /// A request of the send queue (all but receives).
    pub(super) fn on_send_queue(self) -> bool {
        self != Self::Recv
    }
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
    /// The request's other buffers, in order (see
    /// [`RcQp::post_recv_sg`](super::RcQp::post_recv_sg)).
    pub more: KVec<KVec<u8>>,
    /// The MR a REG_MR or LOCAL_INV was about, the caller's again.
    pub mr: Option<super::Mr>,
}

crate::rdma_raw_enum! {
    /// How a work request (or a MAD the CM sent) ended: `enum ib_wc_status`.
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
    pub enum WcStatus: u32, "ib_wc_status_IB_WC_" {
        /// The work request completed.
        Success = ib_wc_status_IB_WC_SUCCESS,
        LocLenErr = ib_wc_status_IB_WC_LOC_LEN_ERR,
        LocQpOpErr = ib_wc_status_IB_WC_LOC_QP_OP_ERR,
        LocEecOpErr = ib_wc_status_IB_WC_LOC_EEC_OP_ERR,
        LocProtErr = ib_wc_status_IB_WC_LOC_PROT_ERR,
        /// Flushed: the QP is in the error state.
        WrFlushErr = ib_wc_status_IB_WC_WR_FLUSH_ERR,
        MwBindErr = ib_wc_status_IB_WC_MW_BIND_ERR,
        BadRespErr = ib_wc_status_IB_WC_BAD_RESP_ERR,
        LocAccessErr = ib_wc_status_IB_WC_LOC_ACCESS_ERR,
        RemInvReqErr = ib_wc_status_IB_WC_REM_INV_REQ_ERR,
        RemAccessErr = ib_wc_status_IB_WC_REM_ACCESS_ERR,
        RemOpErr = ib_wc_status_IB_WC_REM_OP_ERR,
        RetryExcErr = ib_wc_status_IB_WC_RETRY_EXC_ERR,
        RnrRetryExcErr = ib_wc_status_IB_WC_RNR_RETRY_EXC_ERR,
        LocRddViolErr = ib_wc_status_IB_WC_LOC_RDD_VIOL_ERR,
        RemInvRdReqErr = ib_wc_status_IB_WC_REM_INV_RD_REQ_ERR,
        RemAbortErr = ib_wc_status_IB_WC_REM_ABORT_ERR,
        InvEecnErr = ib_wc_status_IB_WC_INV_EECN_ERR,
        InvEecStateErr = ib_wc_status_IB_WC_INV_EEC_STATE_ERR,
        FatalErr = ib_wc_status_IB_WC_FATAL_ERR,
        /// Response timeout: for a MAD, no answer after every retry.
        RespTimeoutErr = ib_wc_status_IB_WC_RESP_TIMEOUT_ERR,
        GeneralErr = ib_wc_status_IB_WC_GENERAL_ERR,
    }
    Unknown
}

impl WcStatus {
    /// Whether the work request completed successfully.
    pub fn is_success(self) -> bool {
        self == Self::Success
    }
}
