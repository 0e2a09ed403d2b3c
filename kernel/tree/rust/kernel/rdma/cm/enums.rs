// SPDX-License-Identifier: GPL-2.0

//! The CM's C enums as Rust enums: an id's [`State`], a REJ's
//! [`RejReason`].

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
    /// assert_eq!(State::from_raw(1000), State::Unknown(1000));
    /// assert_eq!(State::Unknown(1000).name(), "UNKNOWN");
    /// ```
    pub enum State: u32, "ib_cm_state_IB_CM_" {
        /// No connection: new, or after a REJ or a failed handshake.
        Idle = ib_cm_state_IB_CM_IDLE,
        Listen = ib_cm_state_IB_CM_LISTEN,
        ReqSent = ib_cm_state_IB_CM_REQ_SENT,
        /// A REQ received (a listener's new id).
        ReqRcvd = ib_cm_state_IB_CM_REQ_RCVD,
        MraReqSent = ib_cm_state_IB_CM_MRA_REQ_SENT,
        MraReqRcvd = ib_cm_state_IB_CM_MRA_REQ_RCVD,
        RepSent = ib_cm_state_IB_CM_REP_SENT,
        RepRcvd = ib_cm_state_IB_CM_REP_RCVD,
        MraRepSent = ib_cm_state_IB_CM_MRA_REP_SENT,
        MraRepRcvd = ib_cm_state_IB_CM_MRA_REP_RCVD,
        Established = ib_cm_state_IB_CM_ESTABLISHED,
        DreqSent = ib_cm_state_IB_CM_DREQ_SENT,
        DreqRcvd = ib_cm_state_IB_CM_DREQ_RCVD,
        /// Disconnected, waiting for stray packets to die out.
        Timewait = ib_cm_state_IB_CM_TIMEWAIT,
        SidrReqSent = ib_cm_state_IB_CM_SIDR_REQ_SENT,
        SidrReqRcvd = ib_cm_state_IB_CM_SIDR_REQ_RCVD,
    }
    Unknown
}

crate::rdma_raw_enum! {
    /// Why the peer rejected a REQ or REP (`enum ib_cm_rej_reason`), as its
    /// REJ says. The wire field is 16 bits: a value the kernel does not
    /// name is kept as [`RejReason::Unknown`].
    pub enum RejReason: u32, "ib_cm_rej_reason_IB_CM_REJ_" {
        NoQp = ib_cm_rej_reason_IB_CM_REJ_NO_QP,
        NoEec = ib_cm_rej_reason_IB_CM_REJ_NO_EEC,
        NoResources = ib_cm_rej_reason_IB_CM_REJ_NO_RESOURCES,
        /// The peer's CM gave up waiting (also a local REJ).
        Timeout = ib_cm_rej_reason_IB_CM_REJ_TIMEOUT,
        Unsupported = ib_cm_rej_reason_IB_CM_REJ_UNSUPPORTED,
        InvalidCommId = ib_cm_rej_reason_IB_CM_REJ_INVALID_COMM_ID,
        InvalidCommInstance = ib_cm_rej_reason_IB_CM_REJ_INVALID_COMM_INSTANCE,
        /// Nobody listens on the service id.
        InvalidServiceId = ib_cm_rej_reason_IB_CM_REJ_INVALID_SERVICE_ID,
        InvalidTransportType = ib_cm_rej_reason_IB_CM_REJ_INVALID_TRANSPORT_TYPE,
        StaleConn = ib_cm_rej_reason_IB_CM_REJ_STALE_CONN,
        RdcNotExist = ib_cm_rej_reason_IB_CM_REJ_RDC_NOT_EXIST,
        InvalidGid = ib_cm_rej_reason_IB_CM_REJ_INVALID_GID,
        InvalidLid = ib_cm_rej_reason_IB_CM_REJ_INVALID_LID,
        InvalidSl = ib_cm_rej_reason_IB_CM_REJ_INVALID_SL,
        InvalidTrafficClass = ib_cm_rej_reason_IB_CM_REJ_INVALID_TRAFFIC_CLASS,
        InvalidHopLimit = ib_cm_rej_reason_IB_CM_REJ_INVALID_HOP_LIMIT,
        InvalidPacketRate = ib_cm_rej_reason_IB_CM_REJ_INVALID_PACKET_RATE,
        InvalidAltGid = ib_cm_rej_reason_IB_CM_REJ_INVALID_ALT_GID,
        InvalidAltLid = ib_cm_rej_reason_IB_CM_REJ_INVALID_ALT_LID,
        InvalidAltSl = ib_cm_rej_reason_IB_CM_REJ_INVALID_ALT_SL,
        InvalidAltTrafficClass = ib_cm_rej_reason_IB_CM_REJ_INVALID_ALT_TRAFFIC_CLASS,
        InvalidAltHopLimit = ib_cm_rej_reason_IB_CM_REJ_INVALID_ALT_HOP_LIMIT,
        InvalidAltPacketRate = ib_cm_rej_reason_IB_CM_REJ_INVALID_ALT_PACKET_RATE,
        PortCmRedirect = ib_cm_rej_reason_IB_CM_REJ_PORT_CM_REDIRECT,
        PortRedirect = ib_cm_rej_reason_IB_CM_REJ_PORT_REDIRECT,
        InvalidMtu = ib_cm_rej_reason_IB_CM_REJ_INVALID_MTU,
        InsufficientRespResources = ib_cm_rej_reason_IB_CM_REJ_INSUFFICIENT_RESP_RESOURCES,
        /// The peer's consumer rejected it ([`CmIdRef::send_rej`](super::CmIdRef::send_rej)).
        ConsumerDefined = ib_cm_rej_reason_IB_CM_REJ_CONSUMER_DEFINED,
        InvalidRnrRetry = ib_cm_rej_reason_IB_CM_REJ_INVALID_RNR_RETRY,
        DuplicateLocalCommId = ib_cm_rej_reason_IB_CM_REJ_DUPLICATE_LOCAL_COMM_ID,
        InvalidClassVersion = ib_cm_rej_reason_IB_CM_REJ_INVALID_CLASS_VERSION,
        InvalidFlowLabel = ib_cm_rej_reason_IB_CM_REJ_INVALID_FLOW_LABEL,
        InvalidAltFlowLabel = ib_cm_rej_reason_IB_CM_REJ_INVALID_ALT_FLOW_LABEL,
        VendorOptionNotSupported = ib_cm_rej_reason_IB_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED,
    }
    Unknown
}
