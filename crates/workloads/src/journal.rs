//! Writing the validation journal (format and replay: `validation::journal`)
//! beside a validated run, in one of three modes:
//!
//! - `sync`: every record is written and made durable before the run goes
//!   on (Vdbench's `-j`: two synchronous journal writes per data write);
//! - `async`: records are buffered and made durable at the end (Vdbench's
//!   `-jn`): fast, but a host crash loses the map's recent history;
//! - `group`: a writer waits until its `before` record is durable, but the
//!   flush is shared: whoever finds no flush running writes and flushes
//!   every record queued so far, the others wait for it (group commit).
//!   `after` records ride along with the next flush.
//!
//! A failed flush poisons the journal: every later call fails.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex};

use serde::Serialize;
use validation::journal::{encode_after, encode_before, encode_start, JournalHeader};
use validation::KeyMap;

/// The journal's file name inside the journal directory.
pub const JOURNAL_FILE: &str = "iolab.journal";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum JournalMode {
    Sync,
    Async,
    Group,
}

#[derive(Debug, thiserror::Error)]
pub enum JournalWriteError {
    #[error("{}: {what}: {source}", path.display())]
    Io {
        path: PathBuf,
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: holds a journal from an earlier run; check the target with `iolab validate`, then remove it", path.display())]
    Exists { path: PathBuf },
    #[error("{}: an earlier journal write or flush failed; the journal is no longer trustworthy", path.display())]
    Poisoned { path: PathBuf },
}

struct State {
    /// Records not yet handed to the file.
    queued: Vec<u8>,
    /// Bytes ever queued, and bytes known durable.
    queued_end: u64,
    durable_end: u64,
    flushing: bool,
    poisoned: bool,
}

pub struct JournalWriter {
    path: PathBuf,
    file: File,
    mode: JournalMode,
    state: Mutex<State>,
    flushed: Condvar,
}

impl JournalWriter {
    /// Creates `dir/iolab.journal` with the header and the key map, durably.
    pub fn create(
        dir: &Path,
        mode: JournalMode,
        header: &JournalHeader,
        keys: &KeyMap,
    ) -> Result<JournalWriter, JournalWriteError> {
        let path = dir.join(JOURNAL_FILE);
        let io = |what| {
            let path = path.clone();
            move |source| JournalWriteError::Io { path, what, source }
        };
        std::fs::create_dir_all(dir).map_err(io("cannot create the journal directory"))?;
        let mut file = match OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(JournalWriteError::Exists { path })
            }
            Err(e) => return Err(io("cannot create")(e)),
        };
        let start = encode_start(header, keys);
        file.write_all(&start).map_err(io("cannot write"))?;
        file.sync_all().map_err(io("cannot flush"))?;
        File::open(dir).and_then(|d| d.sync_all()).map_err(io("cannot flush the directory"))?;
        let state =
            State { queued: Vec::new(), queued_end: 0, durable_end: 0, flushing: false, poisoned: false };
        Ok(JournalWriter { path, file, mode, state: Mutex::new(state), flushed: Condvar::new() })
    }

    pub fn mode(&self) -> JournalMode {
        self.mode
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues a record; returns the position its durability is measured by.
    fn queue(&self, record: &[u8]) -> Result<u64, JournalWriteError> {
        let mut state = self.lock();
        if state.poisoned {
            return Err(JournalWriteError::Poisoned { path: self.path.clone() });
        }
        state.queued.extend_from_slice(record);
        state.queued_end += record.len() as u64;
        Ok(state.queued_end)
    }

    /// Records that write `write_id` is about to give these blocks these
    /// keys; returns once that is durable (sync and group modes).
    pub fn before(&self, write_id: u64, entries: &[(u64, u8)]) -> Result<(), JournalWriteError> {
        let ticket = self.queue(&encode_before(write_id, entries))?;
        match self.mode {
            JournalMode::Async => Ok(()),
            JournalMode::Sync | JournalMode::Group => self.durable(ticket),
        }
    }

    /// Records that write `write_id` completed (durable at once in sync mode,
    /// with the next flush otherwise).
    pub fn after(&self, write_id: u64) -> Result<(), JournalWriteError> {
        let ticket = self.queue(&encode_after(write_id))?;
        match self.mode {
            JournalMode::Sync => self.durable(ticket),
            JournalMode::Async | JournalMode::Group => Ok(()),
        }
    }

    /// Makes everything queued durable (at the end of a run).
    pub fn finish(&self) -> Result<(), JournalWriteError> {
        let ticket = self.lock().queued_end;
        self.durable(ticket)
    }

    /// Returns once every byte up to `ticket` is durable, flushing as the
    /// leader when no flush is running.
    fn durable(&self, ticket: u64) -> Result<(), JournalWriteError> {
        let mut state = self.lock();
        loop {
            if state.poisoned {
                return Err(JournalWriteError::Poisoned { path: self.path.clone() });
            }
            if state.durable_end >= ticket {
                return Ok(());
            }
            if !state.flushing {
                break;
            }
            state = self.flushed.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        state.flushing = true;
        let batch = std::mem::take(&mut state.queued);
        let end = state.queued_end;
        drop(state);
        let result = (&self.file).write_all(&batch).and_then(|_| self.file.sync_data());
        let mut state = self.lock();
        state.flushing = false;
        match result {
            Ok(()) => state.durable_end = end,
            Err(_) => state.poisoned = true,
        }
        self.flushed.notify_all();
        drop(state);
        result.map_err(|source| JournalWriteError::Io {
            path: self.path.clone(),
            what: "cannot write or flush",
            source,
        })
    }
}
