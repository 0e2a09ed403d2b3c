// SPDX-License-Identifier: GPL-2.0

//! The kernel crate as the harness needs it, on either kernel it builds for.
//!
//! The harness builds against Linux 6.12 with the project's series (its own
//! `kernel::debugfs`, `time::msleep`) and against Linux 7.3, whose crate
//! has these things upstream under other names and shapes
//! (`kernel::debugfs::{Dir, Scope}` with callback files,
//! `time::delay::fsleep`). What 6.12 has under 7.3's spelling through the
//! series' backport patch (`module!`'s `authors`, `sync::aref::ARef`,
//! `time::Monotonic`, `sync::global_lock!`) is used as it is everywhere. Every spelling that
//! still differs is here, and only here: the rest of the harness reads the
//! same on both. `Kbuild` passes `--cfg rcd_kernel_7_3` when the kernel's
//! `VERSION.PATCHLEVEL` is 7.3 or later.
//!
//! - [`fmt!`](fmt), the macro that makes `Arguments` for the crate's
//!   `CString::try_from_fmt`; [`sleep_ms`], a sleep.
//! - [`Control`], [`ControlFile`], [`ControlDir`]: a debugfs directory of
//!   files served by one object, by file number.

// The same names from either half, listed: what the rest of the crate uses.
pub(crate) use imp::{fmt, sleep_ms, ControlDir};

/// What a debugfs file of a [`ControlDir`] is: its name, whether it is the
/// one written (`0o200`) or one read (`0o444`), and its number.
pub(crate) struct ControlFile {
    pub(crate) name: &'static kernel::str::CStr,
    pub(crate) mode: u16,
    pub(crate) id: u32,
}

impl ControlFile {
    pub(crate) const fn new(name: &'static kernel::str::CStr, mode: u16, id: u32) -> Self {
        Self { name, mode, id }
    }

    /// Whether the file takes writes (and is not read).
    #[cfg_attr(not(rcd_kernel_7_3), allow(dead_code))]
    fn writable(&self) -> bool {
        self.mode & 0o222 != 0
    }
}

/// The longest write a control file takes (`E2BIG` beyond, nothing done):
/// checked here on 7.3, by the series' debugfs (its `MAX_WRITE`) on 6.12.
#[cfg_attr(not(rcd_kernel_7_3), allow(dead_code))]
pub(crate) const MAX_WRITE: usize = 4096;

/// What the files of a [`ControlDir`] do.
pub(crate) trait Control: Send + Sync + Sized + 'static {
    /// Prints file `id` whole into `out` (again, from the start, when the
    /// reader's buffer was too small).
    fn show<W: core::fmt::Write>(&self, id: u32, out: &mut W) -> core::fmt::Result;

    /// Takes one write to file `id`, whole (at most [`MAX_WRITE`] bytes);
    /// on success the write returns its full length, else the error.
    fn write(this: &kernel::sync::Arc<Self>, id: u32, input: &[u8]) -> kernel::error::Result;
}

/// Linux 6.12 with the project's series.
#[cfg(not(rcd_kernel_7_3))]
mod imp {
    use super::{Control, ControlFile};
    use kernel::{
        debugfs::{self, File, Ops, Output},
        prelude::*,
        str::CStr,
        sync::{Arc, ArcBorrow},
        time::msleep,
    };

    pub(crate) use kernel::fmt;

    /// Sleeps at least `ms` milliseconds.
    pub(crate) fn sleep_ms(ms: u32) {
        msleep(ms);
    }

    /// The series' `Ops` object of a [`ControlDir`]: the one that serves.
    struct Served<C: Control>(Arc<C>);

    impl<C: Control> Ops for Served<C> {
        const OWNER: &'static ThisModule = &crate::THIS_MODULE;

        fn show(this: ArcBorrow<'_, Self>, id: u32, out: &mut Output<'_>) -> Result {
            this.0.show(id, out).map_err(|_| ENOMEM)
        }

        fn write(this: ArcBorrow<'_, Self>, id: u32, input: &[u8]) -> Result {
            C::write(&this.0, id, input)
        }
    }

    /// `/sys/kernel/debug/<name>/` with its files, removed on drop (which
    /// waits for the reads and writes in progress). An open file keeps the
    /// module loaded (the series' debugfs sets `.owner`).
    pub(crate) struct ControlDir<C: Control> {
        _dir: debugfs::Dir<Served<C>>,
    }

    impl<C: Control> ControlDir<C> {
        /// Fails with `EEXIST` (a file of that name exists) or debugfs's
        /// error.
        pub(crate) fn new(
            name: &'static CStr,
            files: &'static [ControlFile],
            ctx: Arc<C>,
        ) -> Result<Self> {
            let mut specs = KVec::with_capacity(files.len(), GFP_KERNEL)?;
            for f in files {
                specs.push(File::new(f.name, f.mode, f.id), GFP_KERNEL)?;
            }
            let served = Arc::new(Served(ctx), GFP_KERNEL)?;
            Ok(Self {
                _dir: debugfs::Dir::new(name, &specs, served)?,
            })
        }
    }
}

/// Linux 7.3: the upstream kernel crate.
#[cfg(rcd_kernel_7_3)]
mod imp {
    use super::{Control, ControlFile, MAX_WRITE};
    use kernel::{
        debugfs::Scope,
        fmt,
        prelude::*,
        str::CStr,
        sync::Arc,
        time::{delay::fsleep, Delta},
        uaccess::UserSliceReader,
    };

    pub(crate) use kernel::prelude::fmt;

    /// Sleeps at least `ms` milliseconds.
    pub(crate) fn sleep_ms(ms: u32) {
        fsleep(Delta::from_millis(i64::from(ms)));
    }

    /// What each file of a [`ControlDir`] points to: the object serving it
    /// and the file's number.
    struct FileData<C> {
        ctx: Arc<C>,
        id: u32,
    }

    fn show_file<C: Control>(d: &FileData<C>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        d.ctx.show(d.id, f)
    }

    fn write_file<C: Control>(d: &FileData<C>, reader: &mut UserSliceReader) -> Result {
        let len = reader.len();
        if len > MAX_WRITE {
            return Err(E2BIG);
        }
        let mut input = KVec::new();
        input.extend_with(len, 0u8, GFP_KERNEL)?;
        reader.read_slice(&mut input)?;
        C::write(&d.ctx, d.id, &input)
    }

    /// `/sys/kernel/debug/<name>/` with its files (upstream's callback
    /// files in one [`Scope`]), removed on drop, which waits for the reads
    /// and writes in progress. Read files are `0400`, the written one
    /// `0200` (upstream's modes).
    ///
    /// The files' `file_operations` (made for each `T`, in this module)
    /// have this module as `.owner` (the series' patch
    /// 0000-rust-debugfs-keep-the-module-loaded...: upstream 7.3 sets
    /// none, so `rmmod` went through under an open file, whose close then
    /// read the unloaded module's table): an open file keeps the harness
    /// loaded. `tests/t_debugfs.sh` checks it.
    pub(crate) struct ControlDir<C: Control> {
        _scope: Pin<KBox<Scope<KVec<FileData<C>>>>>,
    }

    impl<C: Control> ControlDir<C> {
        /// Fails only for memory: upstream's debugfs makes no file when it
        /// cannot (a file of that name exists, no debugfs), silently.
        pub(crate) fn new(
            name: &'static CStr,
            files: &'static [ControlFile],
            ctx: Arc<C>,
        ) -> Result<Self> {
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
            let scope = Scope::dir::<crate::LocalModule, _, _>(data, name, move |data, dir| {
                for (f, d) in files.iter().zip(data.iter()) {
                    if f.writable() {
                        dir.write_only_callback_file(f.name, d, &write_file::<C>);
                    } else {
                        dir.read_callback_file(f.name, d, &show_file::<C>);
                    }
                }
            });
            Ok(Self {
                _scope: KBox::pin_init(scope, GFP_KERNEL)?,
            })
        }
    }
}
