//! Commits: a leader takes every record queued so far (a `Batch`) and
//! writes it after the stream's partial unit, then, when the batch is
//! durable, flushes the target first if it needs it and the journal; the
//! others wait for it. Group commit's committer thread runs commits that
//! workers kick ahead of need.

use std::sync::atomic::Ordering;
use std::sync::MutexGuard;
use std::time::Instant;

use device::AlignedBuf;
use validation::journal::{append_after, append_before, append_mark, record_bytes, JournalMode};

use super::{
    device_error, Batch, JournalStats, JournalWriteError, JournalWriter, Rec, State, Tail,
    AFTERS_PER_TARGET_FLUSH, ASYNC_BATCH_RECORDS,
};

impl JournalWriter {
    /// Asks for the record behind `ticket` to be made durable soon, without
    /// waiting: a worker kicks the ticket of a request it will issue a few
    /// requests from now, so that the commit runs on the committer thread
    /// ([`JournalWriter::run_committer`]) while the worker goes on, and is
    /// done by the time the worker waits. Nothing happens without a
    /// committer thread (group mode only).
    pub fn kick(&self, ticket: u64) {
        if self.wanted_end.load(Ordering::Relaxed) > ticket {
            return;
        }
        let mut state = self.lock();
        if state.durable_commit > ticket || state.wanted_end > ticket {
            return;
        }
        state.wanted_end = ticket + 1;
        self.wanted_end.store(ticket + 1, Ordering::Relaxed);
        if !state.committing {
            self.kicked.notify_one();
        }
    }

    /// The committer thread's body (group mode): commits whenever a kicked
    /// ticket is not yet durable and no commit is running, until
    /// [`JournalWriter::stop_committer`] (after committing what was kicked)
    /// or an error (which poisons the journal, so the workers see it).
    pub fn run_committer(&self) {
        let mut state = self.lock();
        loop {
            if state.poisoned {
                return;
            }
            let wanted = state.wanted_end > state.durable_commit && !state.queued.is_empty();
            if state.stopping && !wanted {
                return;
            }
            if !state.committing && wanted {
                if self.commit(state, true, false).is_err() {
                    return;
                }
                state = self.lock();
                continue;
            }
            state = self.kicked.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Makes [`JournalWriter::run_committer`] return.
    pub fn stop_committer(&self) {
        self.lock().stopping = true;
        self.kicked.notify_all();
    }

    /// Async mode: the thread that fills a batch writes it, unless a
    /// write is already running (the next filler will) or the caller
    /// drives the commits.
    pub(super) fn maybe_write_async(&self, state: MutexGuard<'_, State>) -> Result<(), JournalWriteError> {
        if self.header.mode == JournalMode::Async
            && !self.driven.load(Ordering::Relaxed)
            && state.queued.len() >= ASYNC_BATCH_RECORDS
            && !state.committing
        {
            self.commit(state, false, false)?;
        }
        Ok(())
    }

    /// Returns once commit `ticket` is durable, committing as the leader
    /// when no commit is running.
    pub(super) fn durable(&self, ticket: u64, flush_target: bool) -> Result<(), JournalWriteError> {
        if !flush_target && self.durable_end.load(Ordering::Acquire) > ticket {
            return Ok(());
        }
        let mut state = self.lock();
        if state.durable_commit > ticket && !state.poisoned {
            return Ok(());
        }
        let began = Instant::now();
        let result = loop {
            if state.poisoned {
                break Err(self.poisoned());
            }
            if state.durable_commit > ticket {
                break Ok(());
            }
            if !state.committing {
                // The commit takes every record queued so far, this one too.
                let result = self.commit(state, true, flush_target);
                state = self.lock();
                break result;
            }
            state = self.committed.wait(state).unwrap_or_else(|e| e.into_inner());
        };
        if !self.driven.load(Ordering::Relaxed) {
            // (A caller that drives the commits counts its waits in its
            // own time: `count_wait`.)
            state.stats.waits += 1;
            state.stats.wait_us += began.elapsed().as_micros() as u64;
        }
        result
    }

    /// Takes what the next commit writes.
    pub(super) fn take_batch(&self, state: &mut State, durable: bool, flush_target: bool) -> Batch {
        let afters_bytes = record_bytes(0) * state.afters.len() as u64;
        let compacting = state.queued_bytes + afters_bytes > state.room;
        let flush_target = durable
            && (flush_target
                || state.target_flush_due
                || compacting
                || state.afters.len() >= AFTERS_PER_TARGET_FLUSH);
        let mut records = Vec::new();
        if flush_target {
            // Every after record and dirty block taken here belongs to a
            // write that completed before the target flush is issued.
            records = std::mem::take(&mut state.afters);
            state.dirty.clear();
            state.target_flush_due = false;
        }
        records.append(&mut state.queued);
        state.queued_bytes = 0;
        let batch = Batch { records, commit: state.open_commit, flush_target, durable };
        state.open_commit += 1;
        batch
    }

    /// As the leader: writes the batch and, when `durable`, flushes (the
    /// target first when the batch needs it, then the journal). Releases
    /// the lock for the I/O; other threads queue meanwhile.
    fn commit(
        &self,
        mut state: MutexGuard<'_, State>,
        durable: bool,
        flush_target: bool,
    ) -> Result<(), JournalWriteError> {
        debug_assert!(!state.committing && !state.poisoned);
        state.committing = true;
        let batch = self.take_batch(&mut state, durable, flush_target);
        drop(state);
        let commit = batch.commit;
        let counted = batch.counted();
        let result = self.write_batch(batch);
        self.end_commit(commit, durable, counted, result)
    }

    /// Ends the running commit: counts it and, when it made its records
    /// durable, says so to the waiters; a failure poisons the journal.
    pub(super) fn end_commit(
        &self,
        commit: u64,
        durable: bool,
        counted: JournalStats,
        result: Result<(bool, u64), JournalWriteError>,
    ) -> Result<(), JournalWriteError> {
        let mut state = self.lock();
        state.committing = false;
        match result {
            Ok((compacted, room)) => {
                state.room = room;
                let s = &mut state.stats;
                s.records += counted.records;
                s.writes += counted.writes;
                s.commits += counted.commits;
                s.ring_commits += counted.ring_commits;
                s.target_flushes += counted.target_flushes;
                s.compactions += u64::from(compacted);
                if durable {
                    state.durable_commit = commit + 1;
                    self.durable_end.store(commit + 1, Ordering::Release);
                }
            }
            Err(_) => state.poisoned = true,
        }
        self.committed.notify_all();
        self.kicked.notify_all();
        result.map(|_| ())
    }

    /// Writes a batch after the records in the live slot; when it does not
    /// fit, compacts instead. Says whether it compacted, and the room left.
    fn write_batch(&self, batch: Batch) -> Result<(bool, u64), JournalWriteError> {
        if batch.flush_target {
            // The target first: what the records about to become durable
            // say completed must be durable before they are.
            self.target.flush().map_err(device_error("cannot flush the target before a commit"))?;
        }
        let mut tail = self.tail.lock().unwrap_or_else(|e| e.into_inner());
        let bytes = self.apply(&mut tail, batch.records);
        if !self.fits(&tail, bytes.len()) {
            // The target was flushed above when the batch needs it.
            return self.compact_now(&mut tail, false);
        }
        if !bytes.is_empty() {
            let (at, buf) = self.stage(&mut tail, &bytes);
            self.device.write_at(&buf, at).map_err(device_error("cannot write"))?;
        }
        if batch.durable {
            self.device.flush().map_err(device_error("cannot flush"))?;
            tail.durable_end = tail.written_end;
        }
        Ok((false, self.room(&tail)))
    }

    /// Encodes records after the stream, and applies them to the mirror.
    pub(super) fn apply(&self, tail: &mut Tail, records: Vec<Rec>) -> Vec<u8> {
        let mut bytes = Vec::new();
        if tail.durable_end > tail.marked {
            append_mark(&mut bytes, tail.generation, tail.durable_end);
            tail.marked = tail.durable_end;
        }
        for rec in &records {
            match rec {
                Rec::Before(id, entries) => append_before(&mut bytes, tail.generation, *id, entries),
                Rec::After(id) => append_after(&mut bytes, tail.generation, *id),
            }
        }
        for rec in records {
            match rec {
                Rec::Before(id, entries) => {
                    // Ids are given as records are queued, and batches
                    // taken in queue order.
                    debug_assert!(id >= tail.write_ids_end, "write ids in record order");
                    tail.write_ids_end = id + 1;
                    tail.mirror.before(id, entries)
                }
                Rec::After(id) => _ = tail.mirror.after(id),
            }
        }
        bytes
    }

    /// Whether `len` more stream bytes fit in the live slot.
    pub(super) fn fits(&self, tail: &Tail, len: usize) -> bool {
        len as u64 <= self.room(tail)
    }

    /// Bytes left for records in the live slot.
    pub(super) fn room(&self, tail: &Tail) -> u64 {
        self.slot_bytes - self.records_at - tail.written_end
    }

    /// Appends `bytes` to the stream: returns where to write and what, in
    /// whole units from the last unit boundary (the partial unit's bytes
    /// first, zeros after the new ones).
    pub(super) fn stage(&self, tail: &mut Tail, bytes: &[u8]) -> (u64, AlignedBuf) {
        let unit = self.unit as usize;
        let kept = tail.partial.len();
        let end = kept + bytes.len();
        let mut buf = AlignedBuf::zeroed(end.next_multiple_of(unit), self.device.buffer_align().max(4096));
        buf[..kept].copy_from_slice(&tail.partial);
        buf[kept..end].copy_from_slice(bytes);
        let at = tail.slot * self.slot_bytes + self.records_at + tail.written_end - kept as u64;
        debug_assert_eq!(at % self.unit, 0);
        tail.written_end += bytes.len() as u64;
        tail.partial = buf[end - end % unit..end].to_vec();
        (at, buf)
    }
}
