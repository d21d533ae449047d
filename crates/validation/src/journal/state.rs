//! Replay's state: the keys of completed writes and the writes in flight,
//! advanced record by record. The journal writer keeps one too, from which
//! it writes a compacted start.

use std::collections::BTreeMap;

use crate::keys::KeyBytes;

/// A write that was in flight when the journal ends: its blocks may hold
/// the old key or the new.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingWrite {
    pub write_id: u64,
    /// (block, old key, new key)
    pub blocks: Vec<(u64, u8, u8)>,
}

#[derive(Debug, Default)]
pub struct KeyState {
    pub(super) keys: KeyBytes,
    /// In flight: write id -> its entries.
    inflight: BTreeMap<u64, Vec<(u64, u8)>>,
}

impl KeyState {
    /// Starts from a snapshot: one key per block.
    pub fn new(keys: KeyBytes) -> KeyState {
        KeyState { keys, inflight: BTreeMap::new() }
    }

    /// The keys of completed writes (pending writes keep their old keys).
    pub fn keys(&self) -> &KeyBytes {
        &self.keys
    }

    /// Applies a `before` record. An earlier write still in flight on one
    /// of its blocks stays in flight: without its `after` record nothing
    /// says it reached stable storage, so the block may hold any key of
    /// the chain (see [`KeyState::pending`]).
    pub fn before(&mut self, write_id: u64, entries: Vec<(u64, u8)>) {
        self.inflight.insert(write_id, entries);
    }

    /// Applies an `after` record. Writes to one block complete in order, so
    /// the block's key becomes this write's. Returns the write's entries
    /// (none when its `before` record is unknown).
    pub fn after(&mut self, write_id: u64) -> Vec<(u64, u8)> {
        let entries = self.inflight.remove(&write_id).unwrap_or_default();
        for &(block, key) in &entries {
            self.keys[block as usize] = key;
        }
        entries
    }

    /// Forgets that write `write_id` is in flight on `block`: a later
    /// write to the block completed, so this one did before it (its
    /// `after` record was lost to damage).
    pub(super) fn forget(&mut self, write_id: u64, block: u64) {
        if let Some(entries) = self.inflight.get_mut(&write_id) {
            entries.retain(|&(b, _)| b != block);
            if entries.is_empty() {
                self.inflight.remove(&write_id);
            }
        }
    }

    /// The writes in flight, by write id, with their entries.
    pub fn inflight(&self) -> impl Iterator<Item = (u64, &[(u64, u8)])> {
        self.inflight.iter().map(|(id, e)| (*id, e.as_slice()))
    }

    /// The writes in flight, by write id, each block with its old key (of
    /// its last completed write) and new key. A block several writes in
    /// flight name forms a chain: it may hold the old key or any key up
    /// to the newest write's (`Expect::OldOrNew` of the last one).
    pub fn pending(&self) -> Vec<PendingWrite> {
        self.inflight
            .iter()
            .map(|(write_id, entries)| PendingWrite {
                write_id: *write_id,
                blocks: entries.iter().map(|(b, new)| (*b, self.keys[*b as usize], *new)).collect(),
            })
            .collect()
    }
}
