//! What `iolab validate` checks, opened: a run's journal (read-only,
//! under a shared lock: a run still writing it holds it exclusively) and
//! its target (read-only, or through its block log, whose replay writes
//! it).

use std::path::{Path, PathBuf};

use anyhow::Context;
use device::{FileDevice, FileOptions, LockKind};
use workloads::journal::JOURNAL_FILE;

use crate::stack::{self, Stack};
use crate::UsageError;

/// The target a validation checks, as the flags name it.
pub struct Target {
    pub target: String,
    /// Replay the block log in front of it first (`--log`).
    pub log: bool,
    /// The block log is on this file or device (`--log-device`).
    pub log_device: Option<PathBuf>,
    pub direct: bool,
}

/// The run's journal, opened read-only under a shared lock (a run still
/// writing it holds it exclusively: its records are not all there yet).
pub fn open_journal(journal_dir: &Path) -> anyhow::Result<FileDevice> {
    let path = journal_dir.join(JOURNAL_FILE);
    match std::fs::metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(UsageError(format!(
                "--journal: {} holds no {JOURNAL_FILE}; give the --journal DIR of an `iolab run --validate`",
                journal_dir.display()
            ))
            .into())
        }
        Ok(m) if m.is_file() && m.len() < 512 => {
            anyhow::bail!("{}: {} bytes, too short to be a journal (truncated?)", path.display(), m.len())
        }
        _ => {}
    }
    let journal = FileDevice::open(&path, &FileOptions { read_only: true, ..FileOptions::default() })
        .with_context(|| format!("{}: cannot open the journal", path.display()))?;
    // A run writing the journal holds it exclusively: its records are not
    // all there yet.
    journal.lock(LockKind::Shared)?;
    Ok(journal)
}

/// The target as the run left it: through its block log with `--log`
/// (replayed first); a target holding a log is refused without it. The
/// sector size is the one the journal's run saw (`journal_sector_bytes`).
pub fn open_target(t: &Target, sector_bytes: Option<u32>) -> anyhow::Result<Stack> {
    let mut target = Stack::open(&t.target, &target_options(t, sector_bytes))?;
    if t.log {
        let log = stack::LogOptions {
            mode: blocklog::Mode::Async,
            log_bytes: None,
            log_device: t.log_device.clone(),
            home_writes: blocklog::HomeWrites::AtCheckpoint,
            direct: t.direct,
            force: false,
            must_exist: true,
            read_only: false,
        };
        let plan = target.plan_log(&log)?;
        target = target.push_log(plan, &log)?;
    } else if t.log_device.is_some() {
        return Err(UsageError("--log-device: only applies with --log".into()).into());
    } else if let Some(what) = device::signature::probe(target.device().as_ref())? {
        if what == "iolab block log" {
            return Err(UsageError(format!(
                "{}: holds an iolab block log; pass --log to replay it and check the data through it",
                t.target
            ))
            .into());
        }
    }
    Ok(target)
}

/// How validate opens its target: read-only under a shared lock, unless
/// the block log must be replayed (`--log`), which writes the target.
fn target_options(t: &Target, sector_bytes: Option<u32>) -> stack::OpenOptions {
    stack::OpenOptions {
        direct: t.direct,
        sector_bytes,
        create_bytes: None,
        read_only: !t.log,
        lock: stack::Lock::Require(if t.log { LockKind::Exclusive } else { LockKind::Shared }),
    }
}

/// Whether the device checked is the one the journal was written for:
/// the same name, the block log's mode aside (`log-logged(t.img)` was
/// written, `async-logged(t.img)` is what validate opens to replay it).
pub fn same_target(checked: &str, written: &str) -> bool {
    let layer = |name: &str| -> String {
        match name.split_once("-logged(") {
            Some((_, rest)) => format!("logged({rest}"),
            None => name.to_string(),
        }
    };
    layer(checked) == layer(written)
}

/// The sector size the journal's run saw its target with, from the header
/// of either slot; None when neither reads (replay then says why).
pub fn journal_sector_bytes(path: &std::path::Path) -> Option<u32> {
    use std::os::unix::fs::FileExt;
    use validation::journal::{read_header, slot_bytes, JOURNAL_HEADER_BYTES};
    let file = std::fs::File::open(path).ok()?;
    let len = file.metadata().ok()?.len();
    let mut buf = vec![0u8; JOURNAL_HEADER_BYTES];
    [0, slot_bytes(len)].into_iter().find_map(|at| {
        file.read_exact_at(&mut buf, at).ok()?;
        read_header(&buf).ok().map(|h| h.sector_bytes)
    })
}

#[cfg(test)]
mod tests {
    use device::LockKind;

    use super::*;

    fn target(log: bool) -> Target {
        Target { target: "t.img".into(), log, log_device: None, direct: false }
    }

    #[test]
    fn a_logged_target_is_the_one_its_journal_names_whatever_the_log_s_mode() {
        assert!(same_target("async-logged(t.img)", "log-logged(t.img)"));
        assert!(!same_target("async-logged(u.img)", "log-logged(t.img)"));
        assert!(!same_target("t.img", "log-logged(t.img)"));
    }

    /// Without a file that refuses writes to prove it (root writes through
    /// permission bits), the options themselves.
    #[test]
    fn the_target_is_opened_read_only_and_shared_unless_the_log_must_be_replayed() {
        let check = target_options(&target(false), None);
        assert_eq!((check.read_only, check.lock), (true, stack::Lock::Require(LockKind::Shared)));
        let replay = target_options(&target(true), None);
        assert_eq!((replay.read_only, replay.lock), (false, stack::Lock::Require(LockKind::Exclusive)));
    }
}
