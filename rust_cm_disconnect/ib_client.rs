// SPDX-License-Identifier: GPL-2.0

//! RDMA device clients: `struct ib_client`.
//!
//! A [`Client`] is told about every RDMA device as it is registered with the
//! RDMA core and as it goes away. Whatever [`Client::add`] returns is kept as
//! the device's client data and handed back to [`Client::remove`].
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use core::sync::atomic::{AtomicPtr, Ordering};
use kernel::{
    bindings,
    error::{code::*, from_result},
    ffi::c_void,
    prelude::*,
    str::CStr,
    sync::Arc,
    types::{ForeignOwnable, Opaque},
};

/// The RDMA device, in the kernel crate.
pub(crate) use kernel::rdma::device::Device;

/// What the RDMA core tells a client.
pub(crate) trait Client: Send + Sync + 'static {
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

/// The one registered client of this module and its context.
///
/// `struct ib_client`'s callbacks carry no context pointer, so the context of
/// the registered client lives here. Only one [`Registration`] can exist at a
/// time, which keeps the untyped pointer sound: the callbacks installed are
/// those of the type that stored it.
static CURRENT: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());
static CURRENT_CLIENT: AtomicPtr<bindings::ib_client> = AtomicPtr::new(core::ptr::null_mut());

/// A registered RDMA client; unregistered on drop.
///
/// # Invariants
///
/// `client` is registered with the RDMA core, `CURRENT` holds a reference of
/// the context `Arc<T>` taken with [`Arc::into_raw`] and `CURRENT_CLIENT`
/// points to `client`.
pub(crate) struct Registration<T: Client> {
    client: Pin<KBox<Opaque<bindings::ib_client>>>,
    _ctx: PhantomData<Arc<T>>,
}

struct Adapter<T: Client>(PhantomData<T>);

use core::marker::PhantomData;

impl<T: Client> Adapter<T> {
    /// # Safety
    ///
    /// Only called by the RDMA core while a `Registration<T>` exists.
    unsafe fn ctx<'a>() -> &'a T {
        // SAFETY: `CURRENT` holds an `Arc<T>` reference (`Registration<T>` invariant), released
        // only after unregistering the client, which waits for every callback to return.
        unsafe { &*CURRENT.load(Ordering::Acquire).cast::<T>() }
    }

    /// # Safety
    ///
    /// Called by the RDMA core with a registered device.
    unsafe extern "C" fn add_callback(device: *mut bindings::ib_device) -> kernel::ffi::c_int {
        from_result(|| {
            // SAFETY: The core passes a registered device, valid during the call.
            let dev = unsafe { Device::from_raw(device) };
            // SAFETY: We are called by the RDMA core for the registered client.
            let data = unsafe { Self::ctx() }.add(dev)?;
            // SAFETY: `device` is valid, `CURRENT_CLIENT` the client being added to it. `data` is
            // owned by the client data until `remove_callback` takes it back.
            unsafe {
                bindings::ib_set_client_data(
                    device,
                    CURRENT_CLIENT.load(Ordering::Acquire),
                    data.into_foreign() as *mut c_void,
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
    /// Fails with `EBUSY` if another registration exists.
    pub(crate) fn new(name: &'static CStr, ctx: Arc<T>) -> Result<Self> {
        let client = KBox::pin(
            Opaque::new(bindings::ib_client {
                name: name.as_char_ptr(),
                add: Some(Adapter::<T>::add_callback),
                remove: Some(Adapter::<T>::remove_callback),
                ..Default::default()
            }),
            GFP_KERNEL,
        )?;
        let raw = Arc::into_raw(ctx) as *mut c_void;
        if CURRENT
            .compare_exchange(
                core::ptr::null_mut(),
                raw,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_err()
        {
            // SAFETY: `raw` came from `Arc::into_raw` just above and was not
            // published.
            drop(unsafe { Arc::from_raw(raw as *const T) });
            return Err(EBUSY);
        }
        CURRENT_CLIENT.store(client.get(), Ordering::Release);
        // SAFETY: `client` is pinned and dropped only after `ib_unregister_client` (`drop`); its
        // callbacks find their context in `CURRENT`, set above.
        let ret = unsafe { bindings::ib_register_client(client.get()) };
        if ret != 0 {
            CURRENT_CLIENT.store(core::ptr::null_mut(), Ordering::Release);
            CURRENT.store(core::ptr::null_mut(), Ordering::Release);
            // SAFETY: Registration failed, no callback can use `raw` any more.
            drop(unsafe { Arc::from_raw(raw as *const T) });
            return Err(Error::from_errno(ret));
        }
        // INVARIANT: registered, `CURRENT` and `CURRENT_CLIENT` set above.
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
        CURRENT_CLIENT.store(core::ptr::null_mut(), Ordering::Release);
        let raw = CURRENT.swap(core::ptr::null_mut(), Ordering::AcqRel);
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

/// A counted reference on a registered device, looked up by name.
///
/// Hold it briefly: device unregistration waits for every reference.
///
/// # Invariants
///
/// Holds a reference taken by `ib_device_get_by_name`, put in `drop`.
pub(crate) struct DeviceHandle(core::ptr::NonNull<bindings::ib_device>);

impl DeviceHandle {
    /// The registered device called `name`, or `ENODEV`.
    pub(crate) fn get_by_name(name: &CStr) -> Result<Self> {
        // SAFETY: `name` is NUL-terminated; any driver matches.
        let ptr = unsafe {
            bindings::ib_device_get_by_name(
                name.as_char_ptr(),
                bindings::rdma_driver_id_RDMA_DRIVER_UNKNOWN,
            )
        };
        // INVARIANT: non-null means a reference was taken.
        core::ptr::NonNull::new(ptr).map(Self).ok_or(ENODEV)
    }
}

impl core::ops::Deref for DeviceHandle {
    type Target = Device;

    fn deref(&self) -> &Device {
        // SAFETY: The reference we hold keeps the device registered.
        unsafe { Device::from_raw(self.0.as_ptr()) }
    }
}

impl Drop for DeviceHandle {
    fn drop(&mut self) {
        // SAFETY: The reference taken in `get_by_name` (type invariant).
        unsafe { bindings::ib_device_put(self.0.as_ptr()) };
    }
}
