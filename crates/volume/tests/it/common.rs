use std::collections::HashMap;
use std::sync::Arc;

use device::{Backend, Device, Front, Geometry, MemDevice, StatsSnapshot};
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

/// A memory drive that, like an O_DIRECT file, refuses buffers not aligned
/// to 4096 bytes (the front refuses them; the drive only says it must).
pub struct AlignedOnly {
    front: Front,
    inner: MemDevice,
}

impl AlignedOnly {
    pub fn new(inner: MemDevice) -> AlignedOnly {
        let geometry = Geometry { buffer_align: 4096, ..Geometry::of(&inner) };
        AlignedOnly { front: Front::new(inner.name(), geometry), inner }
    }
}

impl Backend for AlignedOnly {
    fn front(&self) -> &Front {
        &self.front
    }
    fn read_raw(&self, buf: &mut [u8], offset: u64, _: device::Checked) -> device::Result<()> {
        self.inner.read_at(buf, offset)
    }
    fn write_raw(&self, buf: &[u8], offset: u64, _: device::Checked) -> device::Result<()> {
        self.inner.write_at(buf, offset)
    }
    fn flush_raw(&self, _: device::Checked) -> device::Result<()> {
        self.inner.flush()
    }
}

pub fn aligned_drives(count: usize, size_bytes: u64) -> HashMap<String, Arc<dyn Device>> {
    (0..count)
        .map(|i| {
            let drive = AlignedOnly::new(MemDevice::with_sector(format!("d{i}"), size_bytes, 512).unwrap());
            let dev: Arc<dyn Device> = Arc::new(drive);
            (format!("d{i}"), dev)
        })
        .collect()
}

/// For `volume::create` on drives that read as zeros (new memory drives).
pub fn fresh(_drive: &str, _offset: u64, _len: u64) -> bool {
    true
}
