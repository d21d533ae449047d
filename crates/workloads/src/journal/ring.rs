//! Commits the caller sends itself: through a worker's own io_uring
//! (`--journal-commit ring`: the journal file opened a second time with
//! O_DIRECT and O_DSYNC, each commit sent by the worker beside its data
//! requests), or by the engine in virtual time, as requests to the
//! simulated journal disk in its model ([`JournalWriter::drive_commits`]).
//! A commit is begun here and ended with what the requests returned.

use std::os::fd::RawFd;
use std::path::Path;
use std::sync::atomic::Ordering;

use device::{AlignedBuf, Device, FileDevice, FileOptions};
use validation::journal::JournalMode;

use super::{JournalStats, JournalWriteError, JournalWriter, ASYNC_BATCH_RECORDS};

/// A commit the caller sends ([`JournalWriter::begin_ring_commit`],
/// [`JournalWriter::begin_driven_commit`]): write `buf` at `offset` of the
/// journal, after a flush of the target when `flush_target` (the write
/// waits for it), then, when `durable`, flush the journal (the ring file's
/// O_DSYNC does it with the write).
pub struct RingCommit {
    pub flush_target: bool,
    pub offset: u64,
    pub buf: AlignedBuf,
    pub durable: bool,
    commit: u64,
    counted: JournalStats,
    room: u64,
    /// The generation written and where the stream ends after this
    /// write: durable once it completes, when `durable`.
    generation: u64,
    stream_end: u64,
}

impl JournalWriter {
    /// The descriptor of the journal file opened for commits through a
    /// worker's ring ([`JournalWriter::open_ring_file`]), if it is.
    pub fn ring_fd(&self) -> Option<RawFd> {
        self.ring_file.as_ref().and_then(|f| f.raw_fd())
    }

    /// Opens the journal file at `path` a second time, with O_DIRECT and
    /// O_DSYNC, so that workers can commit through their rings. Returns
    /// whether they can: not when the file system refuses O_DIRECT, or
    /// needs an alignment (over 4 KiB) the journal's layout does not keep.
    /// Called before any record is written.
    pub fn open_ring_file(&mut self, path: &Path) -> bool {
        let tail = self.tail.get_mut().unwrap_or_else(|e| e.into_inner());
        assert!(tail.written_end == 0 && tail.generation == 0, "the ring file is opened before any record");
        let options = FileOptions { direct: true, dsync: true, ..FileOptions::default() };
        let Ok(file) = FileDevice::open(path, &options) else { return false };
        let unit = u64::from(file.sector_bytes()).max(self.unit);
        if unit > 4096
            || self.records_at % unit != 0
            || self.slot_bytes % unit != 0
            || file.buffer_align() > 4096
        {
            return false;
        }
        self.unit = unit;
        self.ring_file = Some(file);
        true
    }

    /// Starts a commit through the caller's ring, when no commit is
    /// running and a `before` record waits: takes the batch, and returns
    /// the write to make (after a linked fdatasync of the target when
    /// [`RingCommit::flush_target`]). The records are durable once it
    /// completes; the caller must then hand the outcome to
    /// [`JournalWriter::end_ring_commit`] (no other commit starts until it
    /// does). A batch that does not fit in the slot is compacted here, at
    /// once, and `None` returned: its records are durable already.
    pub fn begin_ring_commit(&self) -> Result<Option<RingCommit>, JournalWriteError> {
        debug_assert!(self.ring_file.is_some(), "ring commits need the ring file");
        self.begin_sent_commit(true)
    }

    /// Makes the caller (the engine in virtual time) send every commit
    /// itself, through [`JournalWriter::begin_driven_commit`]: from now
    /// on no call writes the journal on its own, not even an async batch.
    pub fn drive_commits(&self) {
        self.driven.store(true, Ordering::Relaxed);
    }

    /// For a caller that drives the commits: the commit to send now, if
    /// one is due and none is running: in sync and group modes whenever a
    /// record waits (made durable: the caller flushes the journal after
    /// the write); in async mode once [`ASYNC_BATCH_RECORDS`] wait
    /// (written, not flushed). Ended with [`JournalWriter::end_ring_commit`].
    /// A batch that does not fit is compacted here, at once, through the
    /// journal device's own calls, and `None` returned.
    pub fn begin_driven_commit(&self) -> Result<Option<RingCommit>, JournalWriteError> {
        let durable = self.header.mode != JournalMode::Async;
        if !durable && self.lock().queued.len() < ASYNC_BATCH_RECORDS {
            return Ok(None);
        }
        self.begin_sent_commit(durable)
    }

    /// Takes the batch of a commit the caller sends, when no commit is
    /// running and a record waits.
    fn begin_sent_commit(&self, durable: bool) -> Result<Option<RingCommit>, JournalWriteError> {
        let mut state = self.lock();
        if state.poisoned {
            return Err(self.poisoned());
        }
        if state.committing || state.queued.is_empty() {
            return Ok(None);
        }
        state.committing = true;
        let batch = self.take_batch(&mut state, durable, false);
        drop(state);
        let (commit, flush_target) = (batch.commit, batch.flush_target);
        let mut counted = batch.counted();
        let mut tail = self.tail.lock().unwrap_or_else(|e| e.into_inner());
        let bytes = self.apply(&mut tail, batch.records);
        if !self.fits(&tail, bytes.len()) {
            let result = self.compact_now(&mut tail, flush_target);
            drop(tail);
            self.end_commit(commit, true, counted, result)?;
            return Ok(None);
        }
        let (offset, buf) = self.stage(&mut tail, &bytes);
        counted.ring_commits = u64::from(self.ring_file.is_some());
        let room = self.room(&tail);
        let (generation, stream_end) = (tail.generation, tail.written_end);
        Ok(Some(RingCommit {
            commit,
            flush_target,
            offset,
            buf,
            durable,
            counted,
            room,
            generation,
            stream_end,
        }))
    }

    /// Ends a commit begun by [`JournalWriter::begin_ring_commit`] with
    /// what the ring said: the target flush's and the write's outcome
    /// (`what` failed and why). A failure poisons the journal.
    pub fn end_ring_commit(
        &self,
        commit: RingCommit,
        outcome: Result<(), (&'static str, std::io::Error)>,
    ) -> Result<(), JournalWriteError> {
        if outcome.is_ok() && commit.durable {
            // No other commit ran since this one began: the tail is the
            // one it wrote to.
            let mut tail = self.tail.lock().unwrap_or_else(|e| e.into_inner());
            if tail.generation == commit.generation {
                tail.durable_end = tail.durable_end.max(commit.stream_end);
            }
        }
        let result = outcome.map(|()| (false, commit.room)).map_err(|(what, source)| {
            JournalWriteError::Ring { device: self.device.name().to_string(), what, source }
        });
        self.end_commit(commit.commit, commit.durable, commit.counted, result)
    }

    /// Ends a ring commit as failed without freeing its buffer, which the
    /// kernel may still read (the ring broke with the write in it).
    pub fn end_ring_commit_leaking(
        &self,
        commit: RingCommit,
        (what, source): (&'static str, std::io::Error),
    ) -> Result<(), JournalWriteError> {
        let RingCommit { commit, counted, buf, durable, .. } = commit;
        std::mem::forget(buf);
        let device = self.device.name().to_string();
        self.end_commit(commit, durable, counted, Err(JournalWriteError::Ring { device, what, source }))
    }
}
