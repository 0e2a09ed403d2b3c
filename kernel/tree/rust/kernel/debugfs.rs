// SPDX-License-Identifier: GPL-2.0

//! Debugfs directories whose files are served by a Rust object.
//!
//! A [`Dir`] is one directory at the root of debugfs with a fixed set of
//! [`File`]s. Every file of a directory is served by the same object, an
//! [`Arc`] of a type that implements [`Ops`]: a read of a file prints the
//! whole file with [`Ops::show`] (the `seq_file` `single_open()` interface),
//! a write hands the bytes written to [`Ops::write`]. Dropping the [`Dir`]
//! removes the directory and waits for the file operations in progress.
//!
//! C header: [`include/linux/debugfs.h`](srctree/include/linux/debugfs.h).

use crate::{
    bindings,
    error::{code::*, from_err_ptr, from_result},
    ffi::{c_char, c_int, c_void},
    prelude::*,
    str::CStr,
    sync::{Arc, ArcBorrow},
    uaccess::UserSlice,
    ThisModule,
};
use core::{fmt, marker::PhantomData};

/// The longest write a file takes: [`Ops::write`] gets each write whole, so
/// a longer one fails with `E2BIG` before anything is copied.
pub const MAX_WRITE: usize = 4096;

/// A file of a [`Dir`]: its name, its permissions and the number that
/// tells the [`Ops`] callbacks which file they serve.
pub struct File {
    name: &'static CStr,
    mode: u16,
    id: u32,
}

impl File {
    /// A file called `name` with permissions `mode` (such as `0o444`),
    /// identified by `id` in the [`Ops`] callbacks.
    pub const fn new(name: &'static CStr, mode: u16, id: u32) -> Self {
        Self { name, mode, id }
    }
}

/// What the files of a [`Dir`] do.
///
/// # Examples
///
/// ```
/// use core::fmt::Write;
/// use kernel::debugfs::{Dir, File, Ops, Output};
/// use kernel::sync::{Arc, ArcBorrow};
/// use kernel::{c_str, prelude::*};
///
/// # // A doctest is built-in code, whose `THIS_MODULE` is NULL.
/// # // SAFETY: NULL is the right `THIS_MODULE` for built-in code.
/// # static THIS_MODULE: ThisModule = unsafe { ThisModule::from_ptr(core::ptr::null_mut()) };
/// struct Hello;
///
/// impl Ops for Hello {
///     const OWNER: &'static ThisModule = &THIS_MODULE;
///
///     fn show(_this: ArcBorrow<'_, Self>, id: u32, out: &mut Output<'_>) -> Result {
///         writeln!(out, "hello from file {id}").map_err(|_| EINVAL)
///     }
///
///     fn write(_this: ArcBorrow<'_, Self>, _id: u32, input: &[u8]) -> Result {
///         pr_info!("{} bytes written\n", input.len());
///         Ok(())
///     }
/// }
///
/// static FILES: [File; 2] = [
///     File::new(c_str!("greeting"), 0o444, 0),
///     File::new(c_str!("sink"), 0o200, 1),
/// ];
///
/// let dir = Dir::new(c_str!("rust_debugfs_doctest"), &FILES, Arc::new(Hello, GFP_KERNEL)?)?;
/// // `/sys/kernel/debug/rust_debugfs_doctest/` exists until `dir` is dropped.
/// drop(dir);
/// # Ok::<(), Error>(())
/// ```
pub trait Ops: Send + Sync + 'static {
    /// The module whose code serves the files, `&THIS_MODULE`: an open file
    /// holds a reference on it, so the module stays loaded until every file
    /// is closed.
    const OWNER: &'static ThisModule;

    /// Prints file `id` into `out`; called for each read from the file's
    /// start (again with a larger buffer if `out` overflowed).
    fn show(this: ArcBorrow<'_, Self>, id: u32, out: &mut Output<'_>) -> Result;

    /// Takes one write to file `id`: the bytes written, at most
    /// [`MAX_WRITE`]. On success the write returns its whole length.
    fn write(this: ArcBorrow<'_, Self>, id: u32, input: &[u8]) -> Result;
}

/// The text of a file being read; implements [`fmt::Write`].
///
/// # Invariants
///
/// `m` is the `struct seq_file` of a read in progress for the lifetime `'a`.
pub struct Output<'a> {
    m: *mut bindings::seq_file,
    _p: PhantomData<&'a mut bindings::seq_file>,
}

impl fmt::Write for Output<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        // SAFETY: `m` is a live seq_file (type invariant) and `s` is valid for
        // `s.len()` bytes. On overflow seq_file records it, and the read calls
        // `show` again with a larger buffer.
        unsafe { bindings::seq_write(self.m, s.as_ptr().cast(), s.len()) };
        Ok(())
    }
}

/// What a file's inode points to (its `i_private`): the object serving the
/// file and the file's number.
struct FileData<T: Ops> {
    ctx: Arc<T>,
    id: u32,
}

/// A debugfs directory whose files are served by an [`Ops`] object; it is
/// removed on drop.
///
/// # Invariants
///
/// `dentry` is the directory, created by [`Dir::new`] and not yet removed.
/// Each of its files has as `i_private` a pointer to an element of `_files`,
/// whose buffer is neither reallocated nor freed until the directory is
/// removed.
pub struct Dir<T: Ops> {
    dentry: *mut bindings::dentry,
    _files: KVec<FileData<T>>,
}

impl<T: Ops> Dir<T> {
    /// Creates `/sys/kernel/debug/<name>/` with `files`, served by `ctx`.
    ///
    /// Fails with the error of `debugfs_create_dir()` (`EEXIST` if a file or
    /// directory of that name exists, `ENODEV` or `EPERM` if debugfs is not
    /// available). As for any debugfs user, the creation of a file is not
    /// checked: a file that could not be created is missing.
    pub fn new(name: &CStr, files: &[File], ctx: Arc<T>) -> Result<Self> {
        let mut data = KVec::with_capacity(files.len(), GFP_KERNEL)?;
        for f in files {
            data.push(
                FileData {
                    ctx: ctx.clone(),
                    id: f.id,
                },
                GFP_KERNEL,
            )?;
        }
        // SAFETY: `name` is a NUL-terminated string; a NULL parent is the
        // root of debugfs.
        let dentry =
            unsafe { bindings::debugfs_create_dir(name.as_char_ptr(), core::ptr::null_mut()) };
        let dentry = from_err_ptr(dentry)?;
        for (f, d) in files.iter().zip(data.iter()) {
            // SAFETY: `f.name` is a NUL-terminated string and `dentry` the
            // directory just created. `d` is an element of `data`, which the
            // `Dir` keeps without reallocating it until the directory is
            // removed, so the `i_private` given here outlives the file; the
            // file operations are a `'static` table.
            unsafe {
                bindings::debugfs_create_file(
                    f.name.as_char_ptr(),
                    f.mode,
                    dentry,
                    (d as *const FileData<T>).cast_mut().cast(),
                    Adapter::<T>::fops(),
                )
            };
        }
        // INVARIANT: `dentry` was created above; each file's `i_private` is
        // an element of `data`.
        Ok(Self {
            dentry,
            _files: data,
        })
    }
}

impl<T: Ops> Drop for Dir<T> {
    fn drop(&mut self) {
        // SAFETY: By the type invariant `dentry` is the directory, not yet
        // removed. `debugfs_remove` removes it with its files and waits for
        // the file operations in progress; debugfs starts none afterwards, so
        // `_files`, dropped after this, is no longer used.
        unsafe { bindings::debugfs_remove(self.dentry) };
    }
}

// SAFETY: `Dir` owns the directory, which may be removed from any thread in
// process context, and `Arc<T>`s of a `T: Send + Sync`.
unsafe impl<T: Ops> Send for Dir<T> {}

// SAFETY: `&Dir` gives access to nothing.
unsafe impl<T: Ops> Sync for Dir<T> {}

/// The `file_operations` of the files of a `Dir<T>`.
struct Adapter<T: Ops>(PhantomData<T>);

impl<T: Ops> Adapter<T> {
    const FOPS: bindings::file_operations = bindings::file_operations {
        owner: T::OWNER.as_ptr(),
        open: Some(Self::open),
        read: Some(bindings::seq_read),
        llseek: Some(bindings::seq_lseek),
        write: Some(Self::write),
        release: Some(bindings::single_release),
        // SAFETY: All zeroes is a valid `file_operations`: no other
        // operation, no flags.
        ..unsafe { core::mem::zeroed() }
    };

    /// The table, in static memory: an open file uses it until it is closed,
    /// which may be after its `Dir` is dropped (its module stays loaded,
    /// through `owner`, until then).
    fn fops() -> &'static bindings::file_operations {
        &Self::FOPS
    }

    /// `open`: a `single_open()` seq_file whose `private` is the file's
    /// `FileData<T>`.
    ///
    /// # Safety
    ///
    /// `inode` is a file of a `Dir<T>` and `file` is being opened on it
    /// (the VFS's contract for `open`, with debugfs keeping the file from
    /// being removed during the call).
    unsafe extern "C" fn open(inode: *mut bindings::inode, file: *mut bindings::file) -> c_int {
        // SAFETY: `inode` is valid during `open`.
        let data = unsafe { (*inode).i_private };
        // SAFETY: `file` is being opened. `show` gets `data`, the file's
        // `FileData<T>`, as the seq_file's `private`.
        unsafe { bindings::single_open(file, Some(Self::show), data) }
    }

    /// `show` of the seq_file: [`Ops::show`].
    ///
    /// # Safety
    ///
    /// `m` is a seq_file being read, made by `open`, during a read that
    /// debugfs lets run (the directory is not removed before it ends).
    unsafe extern "C" fn show(m: *mut bindings::seq_file, _v: *mut c_void) -> c_int {
        // SAFETY: `m` is valid; its `private` is the file's `FileData<T>`
        // (`open`), which the `Dir` keeps until the directory is removed, and
        // removal waits for this read.
        let data = unsafe { &*(*m).private.cast::<FileData<T>>() };
        // INVARIANT: `m` is being read during this call, and `out` lives
        // only during it.
        let mut out = Output { m, _p: PhantomData };
        from_result(|| T::show(data.ctx.as_arc_borrow(), data.id, &mut out).map(|()| 0))
    }

    /// `write`: [`Ops::write`] with a copy of the user's bytes.
    ///
    /// # Safety
    ///
    /// `file` is a file opened by `open`, during a write that debugfs lets
    /// run; `buf` is a user-space pointer.
    unsafe extern "C" fn write(
        file: *mut bindings::file,
        buf: *const c_char,
        len: usize,
        _ppos: *mut bindings::loff_t,
    ) -> isize {
        from_result(|| {
            if len > MAX_WRITE {
                return Err(E2BIG);
            }
            // SAFETY: `file` is open; its `private_data` is the seq_file
            // that `single_open()` made.
            let m = unsafe { (*file).private_data.cast::<bindings::seq_file>() };
            // SAFETY: As in `show`: `private` is the file's `FileData<T>`,
            // kept until the directory is removed, which waits for this write.
            let data = unsafe { &*(*m).private.cast::<FileData<T>>() };
            let mut input = KVec::new();
            UserSlice::new(buf as usize, len).read_all(&mut input, GFP_KERNEL)?;
            T::write(data.ctx.as_arc_borrow(), data.id, &input)?;
            // `len <= MAX_WRITE`: no wrap.
            Ok(len as isize)
        })
    }
}
