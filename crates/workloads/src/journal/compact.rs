//! Compaction: when the live slot has no room for a commit's records, a
//! new start (the key map and the writes in flight) goes into the other
//! slot, written a chunk at a time from the writer's copy of the map.

use device::{AlignedBuf, Device};
use validation::journal::{append_before, JournalHeader, StartStream, JOURNAL_HEADER_BYTES};
use validation::KeyBytes;

use super::{device_error, JournalWriteError, JournalWriter, Tail};

/// A start (the key-map snapshot) is written in chunks of this size, so
/// that no copy of the whole map is ever made.
const START_CHUNK_BYTES: usize = 1 << 20;

/// Writes a start at `at`, the first byte of a slot, a chunk at a time:
/// the body (snapshot and carried records, zero-padded to whole sectors)
/// first, then the header that holds its checksum. Not durable until the
/// caller flushes; until then a torn start fails its checksums.
pub(super) fn write_start(
    device: &dyn Device,
    at: u64,
    header: &JournalHeader,
    keys: &KeyBytes,
    carried: &[u8],
) -> Result<(), JournalWriteError> {
    let sector = device.sector_bytes() as usize;
    let align = device.buffer_align().max(4096);
    debug_assert_eq!(START_CHUNK_BYTES % sector, 0);
    let mut stream = StartStream::new(header, keys, carried);
    let mut buf = AlignedBuf::zeroed(START_CHUNK_BYTES, align);
    let mut offset = at + JOURNAL_HEADER_BYTES as u64;
    loop {
        let filled = stream.fill(&mut buf);
        if filled == 0 {
            break;
        }
        // Only the last chunk is short: padded, it ends the start.
        let len = filled.next_multiple_of(sector);
        buf[filled..len].fill(0);
        device.write_at(&buf[..len], offset).map_err(device_error("cannot write a start"))?;
        // The keys written are not needed resident (when they are a file).
        let body_done = (offset - at) as usize - JOURNAL_HEADER_BYTES;
        keys.evict(body_done.min(keys.len())..(body_done + filled).min(keys.len()));
        offset += len as u64;
    }
    let mut head = AlignedBuf::zeroed(JOURNAL_HEADER_BYTES, align);
    head.copy_from_slice(&stream.header());
    device.write_at(&head, at).map_err(device_error("cannot write a start's header"))
}

impl JournalWriter {
    /// A commit's compaction, the target flushed first when the batch
    /// needs it (as [`JournalWriter::write_batch`] does).
    pub(super) fn compact_now(
        &self,
        tail: &mut Tail,
        flush_target: bool,
    ) -> Result<(bool, u64), JournalWriteError> {
        if flush_target {
            self.target.flush().map_err(device_error("cannot flush the target before a commit"))?;
        }
        self.compact(tail)?;
        Ok((true, self.room(tail)))
    }

    /// Writes a new start, of the next generation, in the other slot: the
    /// key map and the `before` records of the writes still in flight,
    /// equivalent to the live slot plus the batch just applied to the
    /// mirror. The live slot stays whole until the flush makes the new one
    /// durable, so at every instant one of them is complete.
    fn compact(&self, tail: &mut Tail) -> Result<(), JournalWriteError> {
        let generation = tail.generation + 1;
        let mut carried = Vec::new();
        for (id, entries) in tail.mirror.inflight() {
            append_before(&mut carried, generation, id, entries);
        }
        let header = JournalHeader { generation, write_ids_end: tail.write_ids_end, ..self.header.clone() };
        let sector = u64::from(self.device.sector_bytes());
        let len = (self.records_at + carried.len() as u64).next_multiple_of(sector);
        if len > self.slot_bytes {
            return Err(JournalWriteError::Full {
                device: self.device.name().to_string(),
                slot_bytes: self.slot_bytes,
                why: "the key map and the writes in flight do not fit in a slot (use fewer threads or \
                      smaller transfers)",
            });
        }
        let slot = 1 - tail.slot;
        write_start(self.device.as_ref(), slot * self.slot_bytes, &header, tail.mirror.keys(), &carried)?;
        self.device.flush().map_err(device_error("cannot flush"))?;
        let whole = carried.len() - carried.len() % self.unit as usize;
        *tail = Tail {
            slot,
            generation,
            written_end: carried.len() as u64,
            // The flush above made the carried records durable.
            durable_end: carried.len() as u64,
            marked: 0,
            mirror: std::mem::take(&mut tail.mirror),
            write_ids_end: tail.write_ids_end,
            partial: carried[whole..].to_vec(),
        };
        Ok(())
    }
}
