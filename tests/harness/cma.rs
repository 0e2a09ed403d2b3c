// SPDX-License-Identifier: GPL-2.0

//! rdma_cm's wire conventions, so that the module talks to peers that use
//! rdma_cm (librdmacm in user space: cmtime, ucmatose, ...).
//!
//! - A connection to an rdma_cm listener on TCP port `P` is a REQ to service
//!   id `(RDMA_PS_TCP << 16) + P`; UD "connections" on UDP port `P` resolve
//!   service id `(RDMA_PS_UDP << 16) + P` with a SIDR REQ
//!   ([`PortSpace`]).
//! - Its timing on RoCE is [`TIMING`].
//! - Its private data starts with a `struct cma_hdr` (cma.c): version 0, the
//!   IP version in bits 7:4 of the second byte, the source port, then the
//!   source and destination addresses (16 bytes each; IPv4 in the last 4).

use kernel::{bindings, prelude::*, rdma::path::Timing};

/// rdma_cm's timing for RoCE (`CMA_IBOE_PACKET_LIFETIME`,
/// `CMA_CM_RESPONSE_TIMEOUT`, `CMA_MAX_CM_RETRIES`).
pub(crate) const TIMING: Timing = Timing {
    packet_life_time: 16,
    cm_response_timeout: 20,
    max_cm_retries: 15,
};

/// An rdma_cm port space (`enum rdma_ucm_port_space`): rdma_cm listens on
/// and connects to the service id `(port space << 16) + port`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum PortSpace {
    /// `RDMA_PS_TCP`: RC connections.
    Tcp,
    /// `RDMA_PS_UDP`: UD, resolved with SIDR REQ/REP (rdma_cm rejects an RC
    /// REQ there).
    Udp,
}

impl PortSpace {
    fn to_raw(self) -> u32 {
        match self {
            Self::Tcp => bindings::rdma_ucm_port_space_RDMA_PS_TCP,
            Self::Udp => bindings::rdma_ucm_port_space_RDMA_PS_UDP,
        }
    }

    /// rdma_cm's service id for `port` in this port space (host order).
    pub(crate) fn service_id(self, port: u16) -> u64 {
        (u64::from(self.to_raw()) << 16) + u64::from(port)
    }

    /// The port space `service_id` (host order) is in, if one of these.
    pub(crate) fn of(service_id: u64) -> Option<Self> {
        [Self::Tcp, Self::Udp]
            .into_iter()
            .find(|ps| service_id >> 16 == u64::from(ps.to_raw()))
    }
}

/// Bytes of `struct cma_hdr`.
pub(crate) const HDR_SIZE: usize = 36;
const CMA_VERSION: u8 = 0;

/// A `cma_hdr` for an IPv4 connection from `src:port` to `dst`.
pub(crate) fn hdr(src: [u8; 4], port: u16, dst: [u8; 4]) -> [u8; HDR_SIZE] {
    let mut h = [0u8; HDR_SIZE];
    h[0] = CMA_VERSION;
    h[1] = 4 << 4;
    h[2..4].copy_from_slice(&port.to_be_bytes());
    h[16..20].copy_from_slice(&src);
    h[32..36].copy_from_slice(&dst);
    h
}

/// The source address, port and destination address of a REQ's `cma_hdr`,
/// or `EPROTO` if it does not start with a valid IPv4 one.
pub(crate) fn parse(pd: &[u8]) -> Result<([u8; 4], u16, [u8; 4])> {
    let h = pd.get(..HDR_SIZE).ok_or(EINVAL)?;
    let bad = EPROTO;
    if h[0] != CMA_VERSION || h[1] >> 4 != 4 {
        return Err(bad);
    }
    let mut src = [0u8; 4];
    let mut dst = [0u8; 4];
    src.copy_from_slice(&h[16..20]);
    dst.copy_from_slice(&h[32..36]);
    // The IPv4 form leaves the first 12 bytes of each address zero.
    let padding_zero = h[4..16].iter().all(|&b| b == 0) && h[20..32].iter().all(|&b| b == 0);
    // As rdma_cm's `validate_ipv4_net_dev`: no unspecified, loopback,
    // multicast or broadcast address on either side (nor the reserved
    // 240/4).
    let unusable = |a: [u8; 4]| a[0] == 0 || a[0] == 127 || a[0] >= 224;
    if !padding_zero || unusable(src) || unusable(dst) {
        return Err(bad);
    }
    Ok((src, u16::from_be_bytes([h[2], h[3]]), dst))
}
