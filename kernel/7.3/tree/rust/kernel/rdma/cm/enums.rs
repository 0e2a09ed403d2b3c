// SPDX-License-Identifier: GPL-2.0

//! The CM's C enums as Rust enums: an id's [`State`], a REJ's
//! [`RejReason`], a SIDR REP's [`SidrStatus`].

crate::rdma_raw_enum! {
    /// The state of an id, as the CM keeps it (`enum ib_cm_state`).
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::{bindings, rdma::cm::State};
    ///
    /// let s = State::from_raw(bindings::ib_cm_state_IB_CM_DREQ_SENT);
    /// assert_eq!(s, State::DreqSent);
    /// assert_eq!(s.name(), "DREQ_SENT");
    /// assert_eq!(State::from_raw(s.to_raw()), s);
    /// assert_eq!(State::from_raw(bindings::ib_cm_state_IB_CM_IDLE), State::Idle);
    /// assert_eq!(State::from_raw(1000), State::Unknown(1000));
    /// assert_eq!(State::Unknown(1000).name(), "UNKNOWN");
    /// ```
    pub enum State: u32, "ib_cm_state_IB_CM_" {
        /// No connection: new, or after a REJ or a failed handshake.
        Idle = ib_cm_state_IB_CM_IDLE,
        /// Listening for REQs.
        Listen = ib_cm_state_IB_CM_LISTEN,
        /// A REQ sent, no answer yet.
        ReqSent = ib_cm_state_IB_CM_REQ_SENT,
        /// A REQ received (a listener's new id).
        ReqRcvd = ib_cm_state_IB_CM_REQ_RCVD,
        /// An MRA sent for the REQ received.
        MraReqSent = ib_cm_state_IB_CM_MRA_REQ_SENT,
        /// An MRA received for the REQ sent.
        MraReqRcvd = ib_cm_state_IB_CM_MRA_REQ_RCVD,
        /// A REP sent, waiting for the RTU.
        RepSent = ib_cm_state_IB_CM_REP_SENT,
        /// A REP received, the RTU not sent yet.
        RepRcvd = ib_cm_state_IB_CM_REP_RCVD,
        /// An MRA sent for the REP received.
        MraRepSent = ib_cm_state_IB_CM_MRA_REP_SENT,
        /// An MRA received for the REP sent.
        MraRepRcvd = ib_cm_state_IB_CM_MRA_REP_RCVD,
        /// Connected.
        Established = ib_cm_state_IB_CM_ESTABLISHED,
        /// A DREQ sent, waiting for the DREP.
        DreqSent = ib_cm_state_IB_CM_DREQ_SENT,
        /// A DREQ received, not answered yet.
        DreqRcvd = ib_cm_state_IB_CM_DREQ_RCVD,
        /// Disconnected, waiting for stray packets to die out.
        Timewait = ib_cm_state_IB_CM_TIMEWAIT,
        /// A SIDR REQ sent.
        SidrReqSent = ib_cm_state_IB_CM_SIDR_REQ_SENT,
        /// A SIDR REQ received.
        SidrReqRcvd = ib_cm_state_IB_CM_SIDR_REQ_RCVD,
    }
    Unknown
}

crate::rdma_raw_enum! {
    /// Why the peer rejected a REQ or REP (`enum ib_cm_rej_reason`), as its
    /// REJ says. The wire field is 16 bits: a value the kernel does not
    /// name is kept as [`RejReason::Unknown`].
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::rdma::cm::RejReason;
    ///
    /// let r = RejReason::from_raw(28);
    /// assert_eq!(r, RejReason::ConsumerDefined);
    /// assert_eq!(r.name(), "CONSUMER_DEFINED");
    /// assert_eq!(RejReason::InvalidServiceId.to_raw(), 8);
    /// assert_eq!(RejReason::from_raw(34), RejReason::Unknown(34));
    /// assert_eq!(RejReason::from_raw(RejReason::Unknown(34).to_raw()), RejReason::Unknown(34));
    /// ```
    pub enum RejReason: u32, "ib_cm_rej_reason_IB_CM_REJ_" {
        /// No QP available.
        NoQp = ib_cm_rej_reason_IB_CM_REJ_NO_QP,
        /// No EE context available.
        NoEec = ib_cm_rej_reason_IB_CM_REJ_NO_EEC,
        /// No resources available.
        NoResources = ib_cm_rej_reason_IB_CM_REJ_NO_RESOURCES,
        /// A timeout: the peer's CM gave up waiting (also a local REJ).
        Timeout = ib_cm_rej_reason_IB_CM_REJ_TIMEOUT,
        /// Unsupported request.
        Unsupported = ib_cm_rej_reason_IB_CM_REJ_UNSUPPORTED,
        /// Invalid communication id.
        InvalidCommId = ib_cm_rej_reason_IB_CM_REJ_INVALID_COMM_ID,
        /// Invalid communication instance.
        InvalidCommInstance = ib_cm_rej_reason_IB_CM_REJ_INVALID_COMM_INSTANCE,
        /// Nobody listens on the service id.
        InvalidServiceId = ib_cm_rej_reason_IB_CM_REJ_INVALID_SERVICE_ID,
        /// Invalid transport type.
        InvalidTransportType = ib_cm_rej_reason_IB_CM_REJ_INVALID_TRANSPORT_TYPE,
        /// Stale connection.
        StaleConn = ib_cm_rej_reason_IB_CM_REJ_STALE_CONN,
        /// The RD channel does not exist.
        RdcNotExist = ib_cm_rej_reason_IB_CM_REJ_RDC_NOT_EXIST,
        /// Invalid GID.
        InvalidGid = ib_cm_rej_reason_IB_CM_REJ_INVALID_GID,
        /// Invalid LID.
        InvalidLid = ib_cm_rej_reason_IB_CM_REJ_INVALID_LID,
        /// Invalid SL.
        InvalidSl = ib_cm_rej_reason_IB_CM_REJ_INVALID_SL,
        /// Invalid traffic class.
        InvalidTrafficClass = ib_cm_rej_reason_IB_CM_REJ_INVALID_TRAFFIC_CLASS,
        /// Invalid hop limit.
        InvalidHopLimit = ib_cm_rej_reason_IB_CM_REJ_INVALID_HOP_LIMIT,
        /// Invalid packet rate.
        InvalidPacketRate = ib_cm_rej_reason_IB_CM_REJ_INVALID_PACKET_RATE,
        /// Invalid alternate GID.
        InvalidAltGid = ib_cm_rej_reason_IB_CM_REJ_INVALID_ALT_GID,
        /// Invalid alternate LID.
        InvalidAltLid = ib_cm_rej_reason_IB_CM_REJ_INVALID_ALT_LID,
        /// Invalid alternate SL.
        InvalidAltSl = ib_cm_rej_reason_IB_CM_REJ_INVALID_ALT_SL,
        /// Invalid alternate traffic class.
        InvalidAltTrafficClass = ib_cm_rej_reason_IB_CM_REJ_INVALID_ALT_TRAFFIC_CLASS,
        /// Invalid alternate hop limit.
        InvalidAltHopLimit = ib_cm_rej_reason_IB_CM_REJ_INVALID_ALT_HOP_LIMIT,
        /// Invalid alternate packet rate.
        InvalidAltPacketRate = ib_cm_rej_reason_IB_CM_REJ_INVALID_ALT_PACKET_RATE,
        /// Port CM redirect.
        PortCmRedirect = ib_cm_rej_reason_IB_CM_REJ_PORT_CM_REDIRECT,
        /// Port redirect.
        PortRedirect = ib_cm_rej_reason_IB_CM_REJ_PORT_REDIRECT,
        /// Invalid MTU.
        InvalidMtu = ib_cm_rej_reason_IB_CM_REJ_INVALID_MTU,
        /// Insufficient responder resources.
        InsufficientRespResources = ib_cm_rej_reason_IB_CM_REJ_INSUFFICIENT_RESP_RESOURCES,
        /// The peer's consumer rejected it ([`CmIdRef::send_rej`](super::CmIdRef::send_rej)).
        ConsumerDefined = ib_cm_rej_reason_IB_CM_REJ_CONSUMER_DEFINED,
        /// Invalid RNR retry count.
        InvalidRnrRetry = ib_cm_rej_reason_IB_CM_REJ_INVALID_RNR_RETRY,
        /// Duplicate local communication id.
        DuplicateLocalCommId = ib_cm_rej_reason_IB_CM_REJ_DUPLICATE_LOCAL_COMM_ID,
        /// Invalid class version.
        InvalidClassVersion = ib_cm_rej_reason_IB_CM_REJ_INVALID_CLASS_VERSION,
        /// Invalid flow label.
        InvalidFlowLabel = ib_cm_rej_reason_IB_CM_REJ_INVALID_FLOW_LABEL,
        /// Invalid alternate flow label.
        InvalidAltFlowLabel = ib_cm_rej_reason_IB_CM_REJ_INVALID_ALT_FLOW_LABEL,
        /// Vendor option not supported.
        VendorOptionNotSupported = ib_cm_rej_reason_IB_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED,
    }
    Unknown
}

crate::rdma_raw_enum! {
    /// The status a SIDR REP carries (`enum ib_cm_sidr_status`).
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::rdma::cm::SidrStatus;
    ///
    /// assert_eq!(SidrStatus::Reject.to_raw(), 2);
    /// assert_eq!(SidrStatus::from_raw(0), SidrStatus::Success);
    /// assert_eq!(SidrStatus::NoQp.name(), "NO_QP");
    /// ```
    pub enum SidrStatus: u32, "ib_cm_sidr_status_IB_SIDR_" {
        /// Served: the REP names the QP and its Q_Key.
        Success = ib_cm_sidr_status_IB_SIDR_SUCCESS,
        /// Nobody serves the service id.
        Unsupported = ib_cm_sidr_status_IB_SIDR_UNSUPPORTED,
        /// Refused.
        Reject = ib_cm_sidr_status_IB_SIDR_REJECT,
        /// No QP for it.
        NoQp = ib_cm_sidr_status_IB_SIDR_NO_QP,
        /// Served elsewhere (the REP's additional information says where).
        Redirect = ib_cm_sidr_status_IB_SIDR_REDIRECT,
        /// The class version is not supported.
        UnsupportedVersion = ib_cm_sidr_status_IB_SIDR_UNSUPPORTED_VERSION,
    }
    Unknown
}
