//! The system's own tar and rm as a sweep's work: GNU tar extracts each
//! copy of the archive (decompressed beforehand into a memory file
//! system, as the seed read its archives) into its own directory, and
//! `rm -rf` removes them, on a kernel file system, on a user's directory,
//! or on iolab's file system mounted through FUSE.

use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc};

use anyhow::Context;
use ffs::Ffs;

use super::programs::run;
use super::watch::Watch;
use crate::fs::runner::{mounted, Done};
use crate::fs::Mount;

/// What GNU tar and rm are given.
pub struct Work {
    /// The archive, uncompressed, in a memory file system where there is
    /// one (removed with the sweep).
    archive: tempfile::NamedTempFile,
    pub copies: u32,
}

impl Work {
    /// Writes the uncompressed archive where GNU tar reads it without
    /// touching a disk: /dev/shm, else the temporary directory.
    pub fn new(tar: &[u8], copies: u32) -> anyhow::Result<Work> {
        let shm = Path::new("/dev/shm");
        let dir = if shm.is_dir() { shm.to_path_buf() } else { std::env::temp_dir() };
        let mut archive = tempfile::Builder::new()
            .prefix("iolab-policies-")
            .suffix(".tar")
            .tempfile_in(&dir)
            .with_context(|| format!("{}: cannot hold the archive for GNU tar", dir.display()))?;
        std::io::Write::write_all(&mut archive, tar)
            .with_context(|| format!("{}: cannot hold the archive for GNU tar", dir.display()))?;
        Ok(Work { archive, copies })
    }

    fn copy_dirs(&self, dir: &Path) -> Vec<PathBuf> {
        (1..=self.copies).map(|c| dir.join(format!("copy-{c}"))).collect()
    }
}

/// `tar xf ARCHIVE -C DIR/copy-N` for each copy, as root keeping owners
/// and modes as the archive has them.
pub fn extract_copies(work: &Work, dir: &Path, progress: &dyn Watch) -> anyhow::Result<()> {
    let archive = work.archive.path().display().to_string();
    for (n, copy) in (1..).zip(work.copy_dirs(dir)) {
        std::fs::create_dir(&copy).with_context(|| format!("{}: cannot make it", copy.display()))?;
        run("tar", &["xf", &archive, "-C", &copy.display().to_string()])?;
        progress.copy_done(n)?;
    }
    Ok(())
}

/// `rm -rf DIR/copy-N` for each copy, as `rm -rf DIR/copy-*` does them.
pub fn remove_copies(work: &Work, dir: &Path, progress: &dyn Watch) -> anyhow::Result<()> {
    for (n, copy) in (1..).zip(work.copy_dirs(dir)) {
        run("rm", &["-rf", &copy.display().to_string()])?;
        progress.copy_done(n)?;
    }
    Ok(())
}

/// One phase on iolab's file system mounted through FUSE at `mountpoint`
/// (served as `iolab fs mount` serves, its syncer beside it), timed from
/// the mount to the end of the unmount's write-back. Also says what
/// served the requests.
pub fn through_fuse(
    target: &str,
    mount: &Mount,
    mountpoint: &Path,
    phase: impl FnOnce(&Path) -> anyhow::Result<()>,
) -> anyhow::Result<(Done, fusefront::Served)> {
    let mut served = None;
    let done = mounted(target, mount, None, |fs: &Arc<Ffs>, image| {
        let serving = fusefront::Serving {
            threads: 2,
            writeback_cache: true,
            transport: fusefront::Transport::Auto,
            allow_other: false,
            direct_io_below_bytes: None,
        };
        std::thread::scope(|scope| {
            let (up, is_up) = mpsc::channel();
            let server = scope.spawn(move || {
                crate::fs::serve(fs, image, mountpoint, serving, move || {
                    let _ = up.send(());
                })
            });
            let worked = match is_up.recv() {
                Ok(()) => {
                    let worked = phase(mountpoint);
                    fusefront::unmount(mountpoint)
                        .with_context(|| format!("{}: cannot unmount", mountpoint.display()))
                        .and(worked)
                }
                Err(_) => Ok(()),
            };
            let result = server.join().map_err(|_| anyhow::anyhow!("the FUSE server panicked"))?;
            served =
                Some(result.with_context(|| format!("{}: the FUSE session failed", mountpoint.display()))?);
            worked
        })
    })?;
    let served = served.context("the FUSE session ended before it served")?;
    Ok((done, served))
}
