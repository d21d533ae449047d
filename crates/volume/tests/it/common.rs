use std::collections::HashMap;
use std::sync::Arc;

use device::{Device, MemDevice, StatsSnapshot};
use volume::{build, parse, Volume};

pub const KIB: u64 = 1024;
pub const MIB: u64 = 1 << 20;

/// Memory drives called `names`, each `size_bytes` long.
pub fn mem_drives(names: &[&str], size_bytes: u64) -> HashMap<String, Arc<dyn Device>> {
    names
        .iter()
        .map(|n| {
            let dev: Arc<dyn Device> = Arc::new(MemDevice::with_sector(*n, size_bytes, 512).unwrap());
            (n.to_string(), dev)
        })
        .collect()
}

/// The first volume of `text` bound to `drives`.
pub fn open(text: &str, drives: &HashMap<String, Arc<dyn Device>>) -> Arc<Volume> {
    build(&parse(text).unwrap(), drives).unwrap().remove(0)
}

/// `count` drives d0.. and one plex of `org` with one `length` subdisk on each.
pub fn single_plex(org: &str, count: usize, length: &str) -> String {
    let mut text = String::new();
    for i in 0..count {
        text += &format!("drive d{i} device mem{i}\n");
    }
    text += &format!("volume v\nplex org {org}\n");
    for i in 0..count {
        text += &format!("sd length {length} drive d{i}\n");
    }
    text
}

pub fn drive_names(count: usize) -> Vec<String> {
    (0..count).map(|i| format!("d{i}")).collect()
}

pub fn drives_for(count: usize, size_bytes: u64) -> HashMap<String, Arc<dyn Device>> {
    let names = drive_names(count);
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    mem_drives(&refs, size_bytes)
}

/// Reads and writes summed over every drive of the volume.
pub fn drive_totals(volume: &Volume) -> StatsSnapshot {
    let mut total = StatsSnapshot::default();
    for drive in volume.report().drives {
        total.reads += drive.stats.reads;
        total.writes += drive.stats.writes;
        total.bytes_read += drive.stats.bytes_read;
        total.bytes_written += drive.stats.bytes_written;
    }
    total
}

/// A recognisable buffer: byte i is `(seed + i * 7) % 251`.
pub fn pattern(len: usize, seed: u64) -> Vec<u8> {
    (0..len).map(|i| ((seed as usize + i * 7) % 251) as u8).collect()
}
