//! What the journal tests share: a header of a small region.

use validation::journal::{JournalHeader, JournalMode};

/// The header of a group journal over `blocks` key blocks of 4 KiB on a
/// 512-byte-sector target, at generation 0.
pub fn header(blocks: u64) -> JournalHeader {
    JournalHeader {
        run_id: 7,
        region_start: 0,
        key_block_bytes: 4096,
        blocks,
        sector_bytes: 512,
        target: "t.img".into(),
        mode: JournalMode::Group,
        generation: 0,
        write_ids_end: 0,
        created_ns: 0,
        duplicates: None,
    }
}
