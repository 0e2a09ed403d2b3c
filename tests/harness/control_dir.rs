// SPDX-License-Identifier: GPL-2.0

//! [`ControlDir`]: a debugfs directory of files served by one object, by
//! file number, on `kernel::debugfs`'s [`Scope`] with callback files (the
//! series gives 6.12 the same API as 7.3's).

use core::{convert::Infallible, fmt};
use kernel::{debugfs::Scope, prelude::*, str::CStr, sync::Arc, uaccess::UserSliceReader};

/// A file of a [`ControlDir`]: its name, whether it is the one written
/// (`0200`) or one read (`0400`), and its number.
pub(crate) struct ControlFile {
    name: &'static CStr,
    writable: bool,
    id: u32,
}

impl ControlFile {
    pub(crate) const fn new(name: &'static CStr, writable: bool, id: u32) -> Self {
        Self { name, writable, id }
    }
}

/// The longest write a control file takes (`E2BIG` beyond, nothing done).
pub(crate) const MAX_WRITE: usize = 4096;

/// What the files of a [`ControlDir`] do.
pub(crate) trait Control: Send + Sync + Sized + 'static {
    /// Prints file `id` whole into `out` (again, from the start, when the
    /// reader's buffer was too small).
    fn show<W: fmt::Write>(&self, id: u32, out: &mut W) -> fmt::Result;

    /// Takes one write to file `id`, whole (at most [`MAX_WRITE`] bytes);
    /// on success the write returns its full length, else the error.
    fn write(this: &Arc<Self>, id: u32, input: &[u8]) -> Result;
}

/// What each file of a [`ControlDir`] points to: the object serving it and
/// the file's number.
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

/// `/sys/kernel/debug/<name>/` with its files, removed on drop, which waits
/// for the reads and writes in progress. The files' `file_operations` have
/// this module as `.owner` (the series' debugfs patch on both kernels): an
/// open file keeps the harness loaded, which `tests/t_debugfs.sh` checks.
pub(crate) struct ControlDir<C: Control> {
    _scope: Pin<KBox<Scope<KVec<FileData<C>>>>>,
}

impl<C: Control> ControlDir<C> {
    /// Fails only for memory: debugfs makes no file when it cannot (a file
    /// of that name exists, no debugfs), silently.
    pub(crate) fn new(
        name: &'static CStr,
        files: &'static [ControlFile],
        ctx: Arc<C>,
    ) -> Result<Self> {
        let mut data = KVec::with_capacity(files.len(), GFP_KERNEL)?;
        for f in files {
            let ctx = ctx.clone();
            data.push(FileData { ctx, id: f.id }, GFP_KERNEL)?;
        }
        let scope =
            Scope::dir::<crate::LocalModule, Infallible, _>(data, name, move |data, dir| {
                for (f, d) in files.iter().zip(data.iter()) {
                    if f.writable {
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
