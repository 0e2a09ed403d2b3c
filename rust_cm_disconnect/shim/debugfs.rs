// SPDX-License-Identifier: GPL-2.0

//! A debugfs directory whose files are served by a Rust [`Ops`] object.
//!
//! 6.12 has no Rust debugfs abstraction; the C part of this module
//! (`rust_cm_disconnect_exports.c`) creates the directory and its files and
//! calls back into the function table built here. At most one [`Dir`] exists
//! at a time.

use core::{fmt, marker::PhantomData};
use kernel::{
    bindings,
    error::from_result,
    ffi::{c_char, c_int, c_uint, c_void},
    prelude::*,
    str::CStr,
    sync::{Arc, ArcBorrow},
};

/// Mirrors `struct rcd_debugfs_file` in `rust_cm_disconnect_shim.h`.
#[repr(C)]
pub(crate) struct File {
    name: *const c_char,
    mode: bindings::umode_t,
    id: c_uint,
}

impl File {
    /// A file called `name` with permissions `mode`, identified by `id` in
    /// the [`Ops`] callbacks.
    pub(crate) const fn new(name: &'static CStr, mode: u16, id: u32) -> Self {
        Self {
            name: name.as_char_ptr(),
            mode,
            id,
        }
    }
}

// SAFETY: `File` only holds a pointer to a `'static` string.
unsafe impl Sync for File {}

#[repr(C)]
struct OpsTable {
    show: unsafe extern "C" fn(*mut c_void, c_uint, *mut c_void) -> c_int,
    write: unsafe extern "C" fn(*mut c_void, c_uint, *const c_char, usize) -> c_int,
}

extern "C" {
    fn rcd_debugfs_create(
        name: *const c_char,
        files: *const File,
        nr_files: usize,
        ops: *const OpsTable,
        ctx: *mut c_void,
    ) -> c_int;
    fn rcd_debugfs_remove();
    fn rcd_seq_write(m: *mut c_void, buf: *const c_void, len: usize);
}

/// What the files of a [`Dir`] do.
pub(crate) trait Ops: Send + Sync + 'static {
    /// Prints file `id` (called on each read from its start).
    fn show(this: ArcBorrow<'_, Self>, id: u32, out: &mut Output<'_>) -> Result;
    /// Takes one write to file `id`.
    fn write(this: ArcBorrow<'_, Self>, id: u32, input: &[u8]) -> Result;
}

/// The text of a file being read; implements [`fmt::Write`].
///
/// # Invariants
///
/// `m` is the `struct seq_file` of a read in progress for the lifetime `'a`.
pub(crate) struct Output<'a> {
    m: *mut c_void,
    _p: PhantomData<&'a mut ()>,
}

impl fmt::Write for Output<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        // SAFETY: `m` is a live seq_file (type invariant), `s` valid for `s.len()` bytes;
        // seq_file records an overflow and retries the show with a bigger buffer.
        unsafe { rcd_seq_write(self.m, s.as_ptr().cast(), s.len()) };
        Ok(())
    }
}

struct Adapter<T: Ops>(PhantomData<T>);

impl<T: Ops> Adapter<T> {
    const TABLE: OpsTable = OpsTable {
        show: Self::show,
        write: Self::write,
    };

    /// # Safety
    ///
    /// `ctx` is the context of a live `Dir<T>`; `m` a seq_file being read.
    unsafe extern "C" fn show(ctx: *mut c_void, id: c_uint, m: *mut c_void) -> c_int {
        // SAFETY: `ctx` is from `Arc::into_raw` in `Dir::new`; `Dir<T>` keeps it until the
        // directory is removed, which waits for running file operations.
        let ctx = unsafe { ArcBorrow::from_raw(ctx.cast::<T>()) };
        // INVARIANT: `m` is live during this call, and so is `out`.
        let mut out = Output { m, _p: PhantomData };
        from_result(|| T::show(ctx, id, &mut out).map(|()| 0))
    }

    /// # Safety
    ///
    /// `ctx` is the context of a live `Dir<T>`; `buf` holds `len` bytes.
    unsafe extern "C" fn write(
        ctx: *mut c_void,
        id: c_uint,
        buf: *const c_char,
        len: usize,
    ) -> c_int {
        // SAFETY: As in `show`.
        let ctx = unsafe { ArcBorrow::from_raw(ctx.cast::<T>()) };
        // SAFETY: The C part passes a kernel copy of the user's `len` bytes.
        let input = unsafe { core::slice::from_raw_parts(buf.cast::<u8>(), len) };
        from_result(|| T::write(ctx, id, input).map(|()| 0))
    }
}

/// A debugfs directory, removed on drop.
///
/// # Invariants
///
/// The directory exists, and its files use a reference of `ctx` taken with
/// [`Arc::into_raw`], released in `drop` after the directory is gone.
pub(crate) struct Dir<T: Ops> {
    ctx: *const T,
}

impl<T: Ops> Dir<T> {
    /// Creates `/sys/kernel/debug/<name>/` with `files`, served by `ctx`.
    pub(crate) fn new(name: &'static CStr, files: &'static [File], ctx: Arc<T>) -> Result<Self> {
        let raw = Arc::into_raw(ctx);
        // SAFETY: `name` and `files` are `'static`; the table is a constant;
        // `raw` stays valid until `drop` removes the directory.
        let ret = unsafe {
            rcd_debugfs_create(
                name.as_char_ptr(),
                files.as_ptr(),
                files.len(),
                &Adapter::<T>::TABLE,
                raw as *mut c_void,
            )
        };
        if ret != 0 {
            // SAFETY: Not published: the creation failed.
            drop(unsafe { Arc::from_raw(raw) });
            return Err(Error::from_errno(ret));
        }
        Ok(Self { ctx: raw })
    }
}

impl<T: Ops> Drop for Dir<T> {
    fn drop(&mut self) {
        // SAFETY: By the type invariant the directory exists. Removal waits for
        // file operations in progress; none starts afterwards.
        unsafe { rcd_debugfs_remove() };
        // SAFETY: The reference taken in `new`, no longer used by any file.
        drop(unsafe { Arc::from_raw(self.ctx) });
    }
}

// SAFETY: `Dir` owns a reference of an `Arc<T>` with `T: Send + Sync`.
unsafe impl<T: Ops> Send for Dir<T> {}
// SAFETY: `&Dir` gives access to nothing.
unsafe impl<T: Ops> Sync for Dir<T> {}
