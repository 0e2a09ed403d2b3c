// SPDX-License-Identifier: GPL-2.0

//! RDMA device clients: `struct ib_client`.
//!
//! A [`Client`] is told about every RDMA device as it is registered with the
//! RDMA core and as it goes away. Whatever [`Client::add`] returns is kept as
//! the device's client data and handed back to [`Client::remove`].
//!
//! `struct ib_client`'s callbacks carry no context pointer, so each client
//! type has a [`Slot`] of its own (declared with [`crate::rdma_client_slot`])
//! where its [`Registration`] keeps the context: one registration per type
//! at a time, any number of client types.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use super::device::Device;
use crate::{
    bindings,
    error::from_result,
    ffi::{c_int, c_void},
    prelude::*,
    str::CStr,
    sync::Arc,
    types::{ForeignOwnable, Opaque},
};
use core::{
    marker::PhantomData,
    ptr::null_mut,
    sync::atomic::{AtomicPtr, Ordering},
};

/// What the RDMA core tells a client.
pub trait Client: HasSlot + Send + Sync + 'static {
    /// The per-device state kept between `add` and `remove`.
    type DeviceData: ForeignOwnable + Send + Sync;

    /// A device was registered (or was already there when the client was).
    ///
    /// Returning an error (`EOPNOTSUPP` for "not mine") means the client is
    /// not told about this device again, not even on its removal.
    fn add(&self, device: &Device) -> Result<Self::DeviceData>;

    /// The device is going away: everything using it must be gone when this
    /// returns.
    fn remove(&self, device: &Device, data: Self::DeviceData);
}

/// Where the [`Registration`] of one client type keeps its context and its
/// `struct ib_client`, for the callbacks.
pub struct Slot {
    ctx: AtomicPtr<c_void>,
    client: AtomicPtr<bindings::ib_client>,
}

impl Slot {
    /// An empty slot.
    pub const fn new() -> Self {
        Self {
            ctx: AtomicPtr::new(null_mut()),
            client: AtomicPtr::new(null_mut()),
        }
    }
}

impl Default for Slot {
    fn default() -> Self {
        Self::new()
    }
}

/// A client type's own [`Slot`]; implement it with
/// [`crate::rdma_client_slot`].
///
/// # Safety
///
/// `slot` returns the same `&'static Slot` on every call, and no other type's
/// `slot` returns it.
pub unsafe trait HasSlot {
    /// The type's slot.
    fn slot() -> &'static Slot;
}

/// Gives a client type its own [`Slot`] (a `static` in the caller's crate).
///
/// # Examples
///
/// ```
/// use kernel::rdma::{client::Client, device::Device};
/// use kernel::prelude::*;
///
/// struct MyClient;
/// kernel::rdma_client_slot!(MyClient);
///
/// impl Client for MyClient {
///     type DeviceData = KBox<u32>;
///     fn add(&self, device: &Device) -> Result<KBox<u32>> {
///         Ok(KBox::new(device.index(), GFP_KERNEL)?)
///     }
///     fn remove(&self, _device: &Device, _data: KBox<u32>) {}
/// }
/// ```
#[macro_export]
macro_rules! rdma_client_slot {
    ($t:ty) => {
        // SAFETY: One `static`, returned by this `slot` alone.
        unsafe impl $crate::rdma::client::HasSlot for $t {
            fn slot() -> &'static $crate::rdma::client::Slot {
                static SLOT: $crate::rdma::client::Slot = $crate::rdma::client::Slot::new();
                &SLOT
            }
        }
    };
}

/// A registered RDMA client; unregistered on drop.
///
/// # Examples
///
/// ```
/// use kernel::rdma::{client::{Client, Registration}, device::Device};
/// use kernel::{c_str, prelude::*, sync::Arc};
///
/// struct Indexes;
/// kernel::rdma_client_slot!(Indexes);
///
/// impl Client for Indexes {
///     type DeviceData = KBox<u32>;
///     fn add(&self, device: &Device) -> Result<KBox<u32>> {
///         Ok(KBox::new(device.index(), GFP_KERNEL)?)
///     }
///     fn remove(&self, _device: &Device, _data: KBox<u32>) {}
/// }
///
/// let reg = Registration::new(c_str!("doctest"), Arc::new(Indexes, GFP_KERNEL)?)?;
/// // One registration per client type at a time: its slot is taken.
/// let again = Registration::new(c_str!("doctest"), Arc::new(Indexes, GFP_KERNEL)?);
/// assert_eq!(again.err(), Some(EBUSY));
/// // Dropping the registration unregistered the client and emptied the slot.
/// drop(reg);
/// let _reg = Registration::new(c_str!("doctest"), Arc::new(Indexes, GFP_KERNEL)?)?;
/// # Ok::<(), Error>(())
/// ```
///
/// # Invariants
///
/// `client` is registered with the RDMA core, `T::slot()`'s `ctx` holds a
/// reference of the context `Arc<T>` taken with [`Arc::into_raw`] and its
/// `client` points to `client`.
pub struct Registration<T: Client> {
    client: Pin<KBox<Opaque<bindings::ib_client>>>,
    _ctx: PhantomData<Arc<T>>,
}

struct Adapter<T: Client>(PhantomData<T>);

impl<T: Client> Adapter<T> {
    /// # Safety
    ///
    /// Only called by the RDMA core while a `Registration<T>` exists.
    unsafe fn ctx<'a>() -> &'a T {
        // SAFETY: The slot holds an `Arc<T>` reference (`Registration<T>`
        // invariant; `HasSlot`: no other type uses it), released only after
        // unregistering the client, which waits for every callback to return.
        unsafe { &*T::slot().ctx.load(Ordering::Acquire).cast::<T>() }
    }

    /// # Safety
    ///
    /// Called by the RDMA core with a registered device.
    unsafe extern "C" fn add_callback(device: *mut bindings::ib_device) -> c_int {
        from_result(|| {
            // SAFETY: The core passes a registered device, valid during the call.
            let dev = unsafe { Device::from_raw(device) };
            // SAFETY: We are called by the RDMA core for the registered client.
            let data = unsafe { Self::ctx() }.add(dev)?;
            // SAFETY: `device` is valid, the slot's client the one being added
            // to it. `data` is owned by the client data until
            // `remove_callback` takes it back.
            unsafe {
                bindings::ib_set_client_data(
                    device,
                    T::slot().client.load(Ordering::Acquire),
                    data.into_foreign(),
                )
            };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called by the RDMA core for a device whose `add_callback` succeeded.
    unsafe extern "C" fn remove_callback(device: *mut bindings::ib_device, data: *mut c_void) {
        // SAFETY: The core passes the device being removed, still valid.
        let dev = unsafe { Device::from_raw(device) };
        // SAFETY: `data` is what `add_callback` stored with `into_foreign`; the
        // core hands it back exactly once, here.
        let data = unsafe { T::DeviceData::from_foreign(data) };
        // SAFETY: We are called by the RDMA core for the registered client.
        unsafe { Self::ctx() }.remove(dev, data);
    }
}

impl<T: Client> Registration<T> {
    /// Registers `ctx` as an RDMA client called `name`.
    ///
    /// `add` runs for every device already present before this returns.
    /// Fails with `EBUSY` if a registration of `T` exists.
    pub fn new(name: &'static CStr, ctx: Arc<T>) -> Result<Self> {
        let client = KBox::pin(
            Opaque::new(bindings::ib_client {
                name: name.as_char_ptr(),
                add: Some(Adapter::<T>::add_callback),
                remove: Some(Adapter::<T>::remove_callback),
                ..Default::default()
            }),
            GFP_KERNEL,
        )?;
        let slot = T::slot();
        let raw = Arc::into_raw(ctx) as *mut c_void;
        if slot
            .ctx
            .compare_exchange(null_mut(), raw, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            // SAFETY: `raw` came from `Arc::into_raw` just above and was not
            // published.
            drop(unsafe { Arc::from_raw(raw as *const T) });
            return Err(EBUSY);
        }
        slot.client.store(client.get(), Ordering::Release);
        // SAFETY: `client` is pinned and dropped only after `ib_unregister_client` (`drop`); its
        // callbacks find their context in the slot, set above.
        let ret = unsafe { bindings::ib_register_client(client.get()) };
        if ret != 0 {
            slot.client.store(null_mut(), Ordering::Release);
            slot.ctx.store(null_mut(), Ordering::Release);
            // SAFETY: Registration failed, no callback can use `raw` any more.
            drop(unsafe { Arc::from_raw(raw as *const T) });
            return Err(Error::from_errno(ret));
        }
        // INVARIANT: registered, the slot set above.
        Ok(Self {
            client,
            _ctx: PhantomData,
        })
    }
}

impl<T: Client> Drop for Registration<T> {
    fn drop(&mut self) {
        // SAFETY: By the type invariant `client` is registered. This calls
        // `remove` for every device and waits for all callbacks to finish.
        unsafe { bindings::ib_unregister_client(self.client.get()) };
        let slot = T::slot();
        slot.client.store(null_mut(), Ordering::Release);
        let raw = slot.ctx.swap(null_mut(), Ordering::AcqRel);
        // SAFETY: `raw` is the reference taken in `new`; no callback runs any
        // more, so nothing borrows it.
        drop(unsafe { Arc::from_raw(raw as *const T) });
    }
}

// SAFETY: The registration only holds a pinned C object that the RDMA core
// accesses under its own locks, and an `Arc<T>` with `T: Send + Sync`.
unsafe impl<T: Client> Send for Registration<T> {}
// SAFETY: `&Registration` gives access to nothing but `&Arc<T>`.
unsafe impl<T: Client> Sync for Registration<T> {}
