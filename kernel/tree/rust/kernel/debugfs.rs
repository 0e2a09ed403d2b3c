// SPDX-License-Identifier: GPL-2.0

//! Debugfs directories of files served by callbacks on data the directory
//! owns.
//!
//! This is the part of later kernels' `kernel::debugfs` that a [`Scope`]
//! with callback files is, with the same names and signatures: a [`Scope`]
//! owns some data and a directory at the root of debugfs, whose files, made
//! through a [`ScopedDir`] when the scope is created, read that data with a
//! callback. Dropping the [`Scope`] removes the directory, which waits for
//! the file operations in progress, and then drops the data.
//!
//! The files' `file_operations` have as `.owner` the module `M` that makes
//! them: an open file keeps that module loaded.
//!
//! C header: [`include/linux/debugfs.h`](srctree/include/linux/debugfs.h).

use crate::{
    bindings,
    error::from_result,
    ffi::{c_char, c_int, c_void},
    prelude::*,
    str::CStr,
    uaccess::{UserSlice, UserSliceReader},
    ModuleMetadata,
};
use core::{
    fmt,
    marker::{PhantomData, PhantomPinned},
    ptr::NonNull,
};

/// Data `T` and the debugfs directory whose files read it; see
/// [`Scope::dir`].
///
/// The directory is removed (its field dropped) before `data` is dropped:
/// fields drop in declaration order.
#[pin_data]
pub struct Scope<T> {
    dir: DirGuard,
    #[pin]
    data: T,
    #[pin]
    _pin: PhantomPinned,
}

/// A debugfs directory, removed with its files on drop.
///
/// # Invariants
///
/// The pointer is NULL (no directory yet), an error pointer (no directory:
/// it could not be made) or a directory, not yet removed, whose files'
/// `i_private` point to data that lives until this is dropped.
struct DirGuard(*mut bindings::dentry);

impl Drop for DirGuard {
    fn drop(&mut self) {
        // SAFETY: By the type invariant the pointer is a directory not yet
        // removed, or NULL or an error pointer, which `debugfs_remove`
        // ignores. `debugfs_remove` removes the directory with its files and
        // waits for the file operations in progress; debugfs starts none
        // afterwards, so the files' data, dropped after this, is no longer
        // used.
        unsafe { bindings::debugfs_remove(self.0) };
    }
}

// SAFETY: A `Scope` owns `T` and a directory, which may be removed from any
// thread in process context.
unsafe impl<T: Send> Send for Scope<T> {}

// SAFETY: `&Scope<T>` gives access to `&T` only.
unsafe impl<T: Sync> Sync for Scope<T> {}

impl<'a, T: 'a> Scope<T> {
    /// Creates a scope: `data` and the directory `/sys/kernel/debug/<name>/`,
    /// which `init` fills with files that read `data`.
    ///
    /// `M` is the module that creates the files: `Scope::dir::<LocalModule,
    /// _, _>`. As for any debugfs user, the creation of a directory or file
    /// is not checked: one that could not be made (the name exists, no
    /// debugfs) is missing.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::{
    ///     convert::Infallible,
    ///     fmt,
    ///     sync::atomic::{AtomicUsize, Ordering},
    /// };
    /// use kernel::{c_str, debugfs::Scope, prelude::*, uaccess::UserSliceReader};
    /// use kernel::{str::CStr, ModuleMetadata, ThisModule};
    ///
    /// # // A doctest is built-in code, whose `THIS_MODULE` is NULL.
    /// # struct LocalModule;
    /// # // SAFETY: NULL is the right `THIS_MODULE` for built-in code.
    /// # const BUILT_IN: ThisModule = unsafe { ThisModule::from_ptr(core::ptr::null_mut()) };
    /// # impl ModuleMetadata for LocalModule {
    /// #     const NAME: &'static CStr = c_str!("doctest");
    /// #     const THIS_MODULE: ThisModule = BUILT_IN;
    /// # }
    /// fn show(n: &AtomicUsize, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    ///     writeln!(f, "{} bytes written", n.load(Ordering::Relaxed))
    /// }
    ///
    /// fn count(n: &AtomicUsize, input: &mut UserSliceReader) -> Result {
    ///     n.fetch_add(input.len(), Ordering::Relaxed);
    ///     Ok(())
    /// }
    ///
    /// let name = c_str!("rust_debugfs_doctest");
    /// let scope = Scope::dir::<LocalModule, Infallible, _>(AtomicUsize::new(0), name, |n, dir| {
    ///     dir.read_callback_file(c_str!("written"), n, &show);
    ///     dir.write_only_callback_file(c_str!("sink"), n, &count);
    /// });
    /// let scope = KBox::pin_init(scope, GFP_KERNEL)?;
    /// assert_eq!(scope.load(Ordering::Relaxed), 0);
    /// // `/sys/kernel/debug/rust_debugfs_doctest/` exists until `scope` is dropped.
    /// drop(scope);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn dir<M: ModuleMetadata, E: 'a, F>(
        data: impl PinInit<T, E> + 'a,
        name: &'a CStr,
        init: F,
    ) -> impl PinInit<Self, E> + 'a
    where
        F: for<'data, 'dir> FnOnce(&'data T, &'dir ScopedDir<'data, 'dir, M>) + 'a,
    {
        try_pin_init!(Self {
            dir: DirGuard(core::ptr::null_mut()),
            data <- data,
            _pin: PhantomPinned,
        }? E)
        .pin_chain(move |scope| {
            // SAFETY: `name` is a NUL-terminated string; a NULL parent is
            // the root of debugfs.
            let dentry =
                unsafe { bindings::debugfs_create_dir(name.as_char_ptr(), core::ptr::null_mut()) };
            // SAFETY: Only `dir`, which is not structurally pinned, is
            // written, before any file exists; nothing is moved.
            let scope = unsafe { Pin::get_unchecked_mut(scope) };
            // INVARIANT: The directory's files are made below, with
            // `&scope.data` (`'data`), which is pinned and dropped after
            // `dir`.
            scope.dir = DirGuard(dentry);
            let data = &scope.data;
            init(
                data,
                &ScopedDir {
                    dentry,
                    _phantom: PhantomData,
                    _owner: PhantomData,
                },
            );
            Ok(())
        })
    }
}

impl<T> core::ops::Deref for Scope<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.data
    }
}

/// The directory of a [`Scope`] while [`Scope::dir`]'s `init` fills it: its
/// files read data that lives at least `'data`, and the handle lives at most
/// `'dir`. `M` is the module that makes the files.
///
/// # Invariants
///
/// `dentry` is the scope's directory or an error pointer, and the scope
/// removes it before the end of `'data`.
pub struct ScopedDir<'data, 'dir, M> {
    dentry: *mut bindings::dentry,
    _phantom: PhantomData<fn(&'data ()) -> &'dir ()>,
    _owner: PhantomData<fn() -> M>,
}

impl<'data, 'dir, M: ModuleMetadata> ScopedDir<'data, 'dir, M> {
    /// Makes a file whose `i_private` is `data`.
    ///
    /// # Safety
    ///
    /// `fops` are file operations that take `i_private` as a `&T`.
    unsafe fn create_file<T>(
        &self,
        name: &CStr,
        mode: u16,
        data: &'data T,
        fops: &'static bindings::file_operations,
    ) {
        // SAFETY: `name` is a NUL-terminated string and `dentry` the scope's
        // directory (an error pointer makes debugfs create nothing). The
        // file goes with the directory, removed before the end of `'data`
        // (type invariant), so the `i_private` given here outlives the file,
        // and `fops` read it as what it is (the caller's contract).
        unsafe {
            bindings::debugfs_create_file(
                name.as_char_ptr(),
                mode,
                self.dentry,
                core::ptr::from_ref(data).cast_mut().cast(),
                fops,
            )
        };
    }

    /// Creates a read-only file (mode `0400`), whose contents are produced
    /// by calling `f` with `data`, again from the start for each read from
    /// offset 0.
    ///
    /// `f` must be a function item or a non-capturing closure; this is
    /// checked at build time.
    pub fn read_callback_file<T, F>(&self, name: &CStr, data: &'data T, _f: &'static F)
    where
        T: Send + Sync + 'static,
        F: Fn(&T, &mut fmt::Formatter<'_>) -> fmt::Result + Send + Sync,
    {
        // SAFETY: `ReadOps::<T, F, M>` takes `i_private` as a `&T`.
        unsafe { self.create_file(name, 0o400, data, &ReadOps::<T, F, M>::FOPS) }
    }

    /// Creates a write-only file (mode `0200`), each write to which calls
    /// `w` with `data` and a reader of the bytes written. A successful call
    /// makes the write return its whole length.
    ///
    /// `w` must be a function item or a non-capturing closure; this is
    /// checked at build time.
    pub fn write_only_callback_file<T, W>(&self, name: &CStr, data: &'data T, _w: &'static W)
    where
        T: Send + Sync + 'static,
        W: Fn(&T, &mut UserSliceReader) -> Result + Send + Sync,
    {
        // SAFETY: `WriteOps::<T, W, M>` takes `i_private` as a `&T`.
        unsafe { self.create_file(name, 0o200, data, &WriteOps::<T, W, M>::FOPS) }
    }
}

/// Returns the callback `F`, a zero-sized type.
///
/// # Safety
///
/// A reference to an `F` existed: the value is inhabited.
unsafe fn callback<'a, F>() -> &'a F {
    const { assert!(core::mem::size_of::<F>() == 0) };
    // SAFETY: `F` is zero-sized, so a dangling, aligned pointer is valid for
    // it, and a value of it exists (the caller's contract).
    unsafe { NonNull::<F>::dangling().as_ref() }
}

/// `seq_file` output, for `write!`.
///
/// # Invariants
///
/// The pointer is a seq_file being shown, for as long as this exists.
struct SeqFile(*mut bindings::seq_file);

impl fmt::Write for SeqFile {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        // SAFETY: `self.0` is the seq_file being shown (type invariant) and
        // `s` is valid for
        // `s.len()` bytes. On overflow seq_file records it and shows the file
        // again with a larger buffer.
        unsafe { bindings::seq_write(self.0, s.as_ptr().cast(), s.len()) };
        Ok(())
    }
}

/// The `file_operations` of a file of [`ScopedDir::read_callback_file`].
struct ReadOps<T, F, M>(PhantomData<fn(&T, &F) -> M>);

impl<T: Sync, F, M> ReadOps<T, F, M>
where
    F: Fn(&T, &mut fmt::Formatter<'_>) -> fmt::Result,
    M: ModuleMetadata,
{
    const FOPS: bindings::file_operations = bindings::file_operations {
        owner: M::THIS_MODULE.as_ptr(),
        open: Some(Self::open),
        read: Some(bindings::seq_read),
        llseek: Some(bindings::seq_lseek),
        release: Some(bindings::single_release),
        // SAFETY: All zeroes is a valid `file_operations`: no other
        // operation, no flags.
        ..unsafe { core::mem::zeroed() }
    };

    /// # Safety
    ///
    /// `inode` is a file made by `read_callback_file::<T, F>` and `file` is
    /// being opened on it.
    unsafe extern "C" fn open(inode: *mut bindings::inode, file: *mut bindings::file) -> c_int {
        // SAFETY: `inode` is valid during `open`; `file` is being opened.
        // `show` gets the file's `&T` as the seq_file's `private`.
        unsafe { bindings::single_open(file, Some(Self::show), (*inode).i_private) }
    }

    /// # Safety
    ///
    /// `m` is the seq_file of `open`, being read while debugfs keeps the
    /// file from being removed.
    unsafe extern "C" fn show(m: *mut bindings::seq_file, _v: *mut c_void) -> c_int {
        struct Show<'a, T, F>(&'a T, &'a F);

        impl<T, F: Fn(&T, &mut fmt::Formatter<'_>) -> fmt::Result> fmt::Display for Show<'_, T, F> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                (self.1)(self.0, f)
            }
        }

        // SAFETY: `private` is the file's `&'data T` (`open`); its scope
        // removes the file, which waits for this read, before dropping it.
        let data = unsafe { &*(*m).private.cast::<T>() };
        // SAFETY: `read_callback_file` took a `&'static F`.
        let f = unsafe { callback::<F>() };
        use fmt::Write as _;

        // As later kernels do: the file shows what the callback printed, up
        // to its error if it returns one.
        // INVARIANT: `m` is being shown during this call.
        let _ = write!(SeqFile(m), "{}", Show(data, f));
        0
    }
}

/// The `file_operations` of a file of
/// [`ScopedDir::write_only_callback_file`].
struct WriteOps<T, W, M>(PhantomData<fn(&T, &W) -> M>);

impl<T: Sync, W, M> WriteOps<T, W, M>
where
    W: Fn(&T, &mut UserSliceReader) -> Result,
    M: ModuleMetadata,
{
    const FOPS: bindings::file_operations = bindings::file_operations {
        owner: M::THIS_MODULE.as_ptr(),
        open: Some(bindings::simple_open),
        write: Some(Self::write),
        llseek: Some(bindings::noop_llseek),
        // SAFETY: All zeroes is a valid `file_operations`: no other
        // operation, no flags.
        ..unsafe { core::mem::zeroed() }
    };

    /// # Safety
    ///
    /// `file` was opened by `simple_open` on a file made by
    /// `write_only_callback_file::<T, W>`, and debugfs keeps it from being
    /// removed during the call; `buf` is a user-space pointer.
    unsafe extern "C" fn write(
        file: *mut bindings::file,
        buf: *const c_char,
        len: usize,
        _ppos: *mut bindings::loff_t,
    ) -> isize {
        // SAFETY: `simple_open` made `private_data` the inode's `i_private`,
        // the file's `&'data T`; its scope removes the file, which waits for
        // this write, before dropping it.
        let data = unsafe { &*(*file).private_data.cast::<T>() };
        // SAFETY: `write_only_callback_file` took a `&'static W`.
        let w = unsafe { callback::<W>() };
        from_result(|| {
            w(data, &mut UserSlice::new(buf as usize, len).reader())?;
            // A write's length fits in `isize`.
            Ok(len as isize)
        })
    }
}
