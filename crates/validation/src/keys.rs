//! The key map: one byte per key block (the smallest transfer size) saying
//! which version of the block the target should hold. 0 = never written;
//! every rewrite moves the key on (1..=255, wrapping to 1), so a lost write
//! reads back with the previous key.

use std::sync::atomic::{AtomicU8, Ordering};

pub const KEY_NEVER_WRITTEN: u8 = 0;

/// The key after `key` (never 0).
pub fn next_key(key: u8) -> u8 {
    if key == u8::MAX {
        1
    } else {
        key + 1
    }
}

/// Keys of every block of a region, shared by the worker threads.
pub struct KeyMap {
    block_bytes: u64,
    keys: Vec<AtomicU8>,
}

impl KeyMap {
    /// A map of `blocks` key blocks of `block_bytes`, all never written.
    pub fn new(blocks: u64, block_bytes: u64) -> KeyMap {
        KeyMap { block_bytes, keys: (0..blocks).map(|_| AtomicU8::new(KEY_NEVER_WRITTEN)).collect() }
    }

    pub fn block_bytes(&self) -> u64 {
        self.block_bytes
    }

    pub fn blocks(&self) -> u64 {
        self.keys.len() as u64
    }

    pub fn get(&self, block: u64) -> u8 {
        self.keys[block as usize].load(Ordering::Acquire)
    }

    pub fn set(&self, block: u64, key: u8) {
        self.keys[block as usize].store(key, Ordering::Release);
    }
}
