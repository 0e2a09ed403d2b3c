// SPDX-License-Identifier: GPL-2.0

//! A QP's state and transitions: [`QpState`], [`Access`], the attributes
//! of one `ib_modify_qp()` ([`QpAttr`]), and [`QpRef`], a QP borrowed from
//! its owner.

use crate::{
    bindings,
    error::{from_err_ptr, to_result},
    ffi::c_int,
    prelude::*,
    rdma::device::Device,
    types::Opaque,
};

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
/// `ib_modify_qp()` takes. Made by [`QpAttr::to_init`], [`QpAttr::to_error`],
/// [`QpAttr::to_reset`] or by the IB CM for a connection's next state
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
/// assert_eq!(QpAttr::to_reset().state(), Some(QpState::Reset));
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

    /// The attributes in `attr` that `mask` names, as the IB CM computed them
    /// (`ib_cm_init_qp_attr()`), holding each GID entry their address vectors
    /// point at: taken again from `device`'s GID table by port and index
    /// (`rdma_get_gid_attr()`, which returns it held) and kept only if it is
    /// the entry the CM's copy points at. `EAGAIN` if one is not (the CM
    /// replaced the vector, and may have put its entry, since it copied it:
    /// ask the CM again); the table's error if the entry is gone from it
    /// (its address deleted).
    ///
    /// The CM's pointers are only compared, never followed: its copy was made
    /// under the id's lock, which it released before this runs.
    pub fn from_cm(device: &Device, attr: bindings::ib_qp_attr, mask: c_int) -> Result<Self> {
        let mut taken: [*const bindings::ib_gid_attr; 2] = [core::ptr::null(); 2];
        for (i, ah) in [&attr.ah_attr, &attr.alt_ah_attr].into_iter().enumerate() {
            let want = ah.grh.sgid_attr;
            if want.is_null() {
                continue;
            }
            // SAFETY: The device is valid (`Device`'s invariant); the core checks
            // the port and the index and returns a held entry or an error.
            let got = unsafe {
                bindings::rdma_get_gid_attr(device.as_raw(), ah.port_num, ah.grh.sgid_index.into())
            };
            let res = from_err_ptr(got.cast_mut());
            if matches!(res, Ok(p) if p.cast_const() == want) {
                taken[i] = got;
                continue;
            }
            let held = res.as_ref().ok().map(|p| p.cast_const());
            for gid in Iterator::chain(taken.into_iter(), held) {
                if !gid.is_null() {
                    // SAFETY: A reference taken above, put once.
                    unsafe { bindings::rdma_put_gid_attr(gid) };
                }
            }
            return Err(res.err().unwrap_or(EAGAIN));
        }
        // INVARIANT: each non-null entry is the one taken (held) above, put
        // in `drop`.
        Ok(Self {
            attr,
            mask,
            holds: true,
        })
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

    /// To RESET: the QP forgets its connection and every posted work
    /// request, without completions; from there it may start again at
    /// INIT. Only its owner may, and only once nothing is posted
    /// ([`RcQp::modify`](super::RcQp::modify)).
    pub fn to_reset() -> Self {
        let attr = bindings::ib_qp_attr {
            qp_state: QpState::Reset.to_raw(),
            ..Default::default()
        };
        Self::from_raw(attr, bindings::ib_qp_attr_mask_IB_QP_STATE as c_int)
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

    /// Modifies the QP (`ib_modify_qp`) as `attr` says, but neither its
    /// address vectors nor to RESET (`EINVAL`): the core swaps the QP's GID
    /// entry references for those without a lock, and RESET drops the
    /// posted work requests without completions; only the QP's owner can
    /// exclude the first and account for the second
    /// ([`RcQp::modify`](super::RcQp::modify)).
    pub fn modify(&self, attr: &QpAttr) -> Result {
        let av = bindings::ib_qp_attr_mask_IB_QP_AV | bindings::ib_qp_attr_mask_IB_QP_ALT_PATH;
        if attr.mask & av as c_int != 0 || attr.state() == Some(QpState::Reset) {
            return Err(EINVAL);
        }
        // SAFETY: No address vector.
        unsafe { self.modify_any(attr) }
    }

    /// Modifies the QP as `attr` says. `EINVAL` for a port (or alternate
    /// path's port) the QP's device does not have: the RDMA core reads the
    /// device's port array at that index before any driver checks it.
    ///
    /// # Safety
    ///
    /// If `attr` names an address vector, no other modify of the QP that
    /// names one runs meanwhile (`_ib_modify_qp()` puts the QP's old GID
    /// entries without a lock: two would put the same one twice).
    pub(super) unsafe fn modify_any(&self, attr: &QpAttr) -> Result {
        // SAFETY: By the type invariant the QP is live, and so is its device
        // (a device is unregistered only once its clients freed their QPs).
        let ports = unsafe { Device::from_raw((*self.0.get()).device) }.ports();
        let names = |bit: u32| attr.mask & bit as c_int != 0;
        if (names(bindings::ib_qp_attr_mask_IB_QP_PORT) && !ports.contains(&attr.attr.port_num))
            || (names(bindings::ib_qp_attr_mask_IB_QP_ALT_PATH)
                && !ports.contains(&attr.attr.alt_port_num))
        {
            return Err(EINVAL);
        }
        // `ib_modify_qp` takes a mutable pointer but only reads the
        // attributes: a copy keeps `attr` the caller's.
        let mut raw = attr.attr;
        // SAFETY: By the type invariant the QP is live; `raw` is valid for
        // the call; the caller excludes a concurrent address vector change.
        to_result(unsafe { bindings::ib_modify_qp(self.0.get(), &mut raw, attr.mask) })
    }

    /// Moves the QP to the error state: every posted work request completes
    /// on its CQ with [`WcStatus::WrFlushErr`](super::WcStatus::WrFlushErr).
    pub fn to_error(&self) -> Result {
        self.modify(&QpAttr::to_error())
    }
}
