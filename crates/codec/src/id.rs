//! Ids that tell one run, log or volume set from another, so that a stamp,
//! a record or a drive left by another is never taken for one of ours.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::time::{SystemTime, UNIX_EPOCH};

/// A new id, different at every call: the time (ns) and the process id,
/// mixed by a hasher whose keys the standard library draws at random per
/// process and steps per call. Not for secrets; for telling things apart.
pub fn fresh_id() -> u64 {
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u128(SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
    hasher.write_u32(std::process::id());
    hasher.finish()
}
