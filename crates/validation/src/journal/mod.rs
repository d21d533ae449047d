//! The validation journal: the key map survives a crash of the host or the
//! process. A file starts with a header and a snapshot of the key map;
//! records follow. Before a data write, a `before` record names the key
//! blocks and their new keys; after it, an `after` record marks it done.
//! Replay rebuilds the map and lists the writes that were in flight, whose
//! blocks may hold the old or the new contents.
//!
//! Layout (little-endian; docs/formats.md "Validation journal"): the
//! device is cut into two slots of half its size (rounded down to 4096);
//! the slot with the newer valid start holds the journal. Each slot:
//! ```text
//! header, 4096 bytes:
//!   0 magic "IOLABJNL"   8 version u32 = 5   12 crc32c u32 (of the header with this field 0)
//!  16 run_id u64        24 region_start u64  32 key_block_bytes u64
//!  40 blocks u64        48 sector_bytes u32  52 target name length u16
//!  54 target name (up to 256 bytes)          310 mode u8 (1 sync, 2 async, 3 group)
//! 312 generation u64   320 carried_bytes u32  324 start_crc u32 (snapshot and carried records)
//! 328 write_ids_end u64 (1 + the highest write id of a `before` record written before this start)
//! 336 created_ns u64 (when the run's journal was created, ns since the Unix epoch; 0 unknown)
//! 344 duplicate_ratio u64 (version 6: the bits of the run's --dedupe-ratio as an f64; 0 none)
//! snapshot: `blocks` bytes of keys, padded with zeros to a multiple of 4096
//! records (the first `carried_bytes` of them written with the start), each:
//!   0 magic "JREC" (u32 0x4345524a)  4 length u32 (whole record)
//!   8 crc32c u32 (of the generation, u64, then the record with this field 0)
//!  12 kind u8 (1 before, 2 after, 3 mark)  13 reserved [u8; 3]
//!  16 write_id u64 (a mark: the durable end of the slot's records)
//!  24 entries: (block u64, key u8) × n, 9 bytes each (before records only)
//! ```
//! A record that is truncated or fails its checksum ends the journal when
//! nothing says it was durable: it and everything after it were not. A
//! mark further on that says it was durable makes it damage instead,
//! which replay notes and goes past (`replay.rs`). The journal lives on a
//! preallocated, zero-filled device, so zeros after the last record are
//! its clean end; so are the bytes an older generation left in a slot a
//! compaction reused.
//!
//! Write ids are given in the order `before` records are written (version
//! 4), so the records replayed, and `write_ids_end` for what a compaction
//! folded into the snapshot, say which writes the journal knows of: a
//! stamp of the run whose write id (its sequence number) is at or past
//! [`Replay::ahead_from`] was written after the journal's last durable
//! record, and a stamp of an earlier id that is not what replay expects is
//! older than what a durable record promises.
//!
//! A start is produced ([`StartStream`]) and read back ([`replay_from`])
//! piece by piece, its checksum computed as the pieces go, and replay's
//! keys go into a [`KeyBytes`](crate::KeyBytes) store the caller chooses:
//! a key map of a very large target is never copied whole into one buffer.
//!
//! Here: the facade. `format.rs` encodes and decodes (every header field
//! checked against its bounds), `state.rs` is replay's state of keys and
//! writes in flight (the writer keeps one too), `replay.rs` reads a
//! journal back.

mod format;
mod replay;
mod state;

pub use format::{
    append_after, append_before, append_mark, encode_after, encode_before, encode_start,
    encode_start_carrying, read_header, record_bytes, slot_bytes, start_bytes, JournalError, JournalHeader,
    JournalMode, StartStream, JOURNAL_HEADER_BYTES, JOURNAL_MAGIC, JOURNAL_VERSION, JOURNAL_VERSION_MIN,
    KEY_BLOCK_BYTES_MAX, SECTOR_BYTES_MAX, SECTOR_BYTES_MIN, TARGET_NAME_BYTES_MAX,
};
pub use replay::{
    replay, replay_from, Damage, DamageKind, JournalSource, Replay, DAMAGE_LISTED_MAX, RECORDS_WINDOW_BYTES,
    SNAPSHOT_CHUNK_BYTES,
};
pub use state::{KeyState, PendingWrite};
