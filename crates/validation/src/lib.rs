//! Data validation: every sector iolab writes under `--validate` carries a
//! stamp (magic, address, key, write sequence, time, run id, crc32c) and
//! data derived from them, so what is read back can be checked and every
//! difference classified: lost write, misdirected write, corruption, torn
//! write, unexpected zeros, and, after a crash, a write newer than the
//! journal knows of (ahead of it).
//!
//! This crate is pure computation on buffers: it never does I/O (the one
//! exception: a large key map may live in a mapped scratch file, see
//! `keys.rs`), never prints, and knows nothing of devices or workloads. The layout of a stamp
//! is specified in docs/formats.md ("Validation stamp").

mod check;
mod choice;
pub mod journal;
mod keys;
mod stamp;

pub use check::{check_block, check_block_in, BlockVerdict, Expect, Finding, FindingKind, RunContext};
pub use keys::{
    next_key, KeyBytes, KeyMap, KeyMapChoice, KeyMapError, KeyPlace, KEY_MAP_MEMORY_BYTES_MAX,
    KEY_NEVER_WRITTEN,
};
pub use stamp::{
    fill_block, fill_data, fill_data_baseline, fill_duplicate, read_stamp, seal_sectors_baseline, Duplicates,
    Stamp, StampError, DUPLICATE_SETS, STAMP_HEADER_BYTES, STAMP_MAGIC, STAMP_VERSION,
};
