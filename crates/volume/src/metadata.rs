//! On-disk metadata of a volume set (docs/formats.md, "Volume metadata"):
//! a header at byte 0 of every drive and two checksummed, generation-
//! numbered copies of the configuration, data after [`DATA_START_BYTES`].
//!
//! [`create`] writes it, [`assemble`] rebuilds the volumes from the drives
//! alone, [`VolumeSet::save`] records state changes. A copy whose checksum
//! fails is ignored, never trusted; drives of different sets are refused.
//! This module writes only the metadata area of the drives it is given.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::{Arc, Mutex};

use device::signature::IOLAB_VOLUME_MAGIC;
use device::Device;

use crate::config::{parse, Config};
use crate::error::VolumeError;
use crate::object::{read_aligned, write_aligned, State};
use crate::resolve::{resolve, Layout, DATA_START_BYTES};
use crate::volume::{bind, Volume};

/// Version of the header and configuration copy layouts.
pub const METADATA_VERSION: u32 = 1;
/// Magic of a configuration copy.
pub const CONFIG_MAGIC: &[u8; 8] = b"IOLABCFG";
/// Bytes of the drive header (one 4Kn sector).
pub const HEADER_BYTES: u64 = 4096;
/// Bytes of one configuration copy.
pub const CONFIG_COPY_BYTES: u64 = 65_536;
/// Bytes of the fixed part of a configuration copy before its text.
pub const CONFIG_PREFIX_BYTES: usize = 48;
/// A revive through [`VolumeSet::revive`] records its progress on the
/// drives after this many steps, so an interrupted revive resumes there.
pub const REVIVE_SAVE_EVERY_STEPS: u64 = 16;

/// Longest drive name a header holds.
pub const DRIVE_NAME_BYTES_MAX: usize = 63;

const NAME_AT: usize = 32;
const _: () =
    assert!(HEADER_BYTES + 2 * CONFIG_COPY_BYTES == DATA_START_BYTES, "metadata fills the reserved area");
const NAME_FIELD_BYTES: usize = 64;

/// A bound, assembled set of volumes and the metadata that describes it.
pub struct VolumeSet {
    pub set_id: [u8; 16],
    pub volumes: Vec<Arc<Volume>>,
    layout: Layout,
    devices: HashMap<String, Arc<dyn Device>>,
    generation: Mutex<u64>,
}

impl std::fmt::Debug for VolumeSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "VolumeSet({} volumes, {} drives)", self.volumes.len(), self.devices.len())
    }
}

/// A random set id from the process's randomly seeded hasher state.
fn new_set_id() -> [u8; 16] {
    let mut id = [0; 16];
    for half in id.chunks_mut(8) {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u128(
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()),
        );
        hasher.write_u32(std::process::id());
        half.copy_from_slice(&hasher.finish().to_le_bytes());
    }
    id
}

fn bad(drive: &str, problem: impl Into<String>) -> VolumeError {
    VolumeError::BadDrive { drive: drive.to_string(), problem: problem.into() }
}

fn encode_header(set_id: &[u8; 16], drive: &str, drive_bytes: u64) -> Vec<u8> {
    let mut block = vec![0u8; HEADER_BYTES as usize];
    block[0..8].copy_from_slice(IOLAB_VOLUME_MAGIC);
    block[8..12].copy_from_slice(&METADATA_VERSION.to_le_bytes());
    block[16..32].copy_from_slice(set_id);
    block[NAME_AT..NAME_AT + drive.len()].copy_from_slice(drive.as_bytes());
    block[96..104].copy_from_slice(&drive_bytes.to_le_bytes());
    block[104..112].copy_from_slice(&DATA_START_BYTES.to_le_bytes());
    block[112..120].copy_from_slice(&CONFIG_COPY_BYTES.to_le_bytes());
    let crc = crc32c::crc32c(&block);
    block[12..16].copy_from_slice(&crc.to_le_bytes());
    block
}

/// A checked header: set id and drive name.
fn decode_header(device: &str, block: &[u8]) -> Result<([u8; 16], String), VolumeError> {
    if &block[0..8] != IOLAB_VOLUME_MAGIC {
        return Err(bad(device, "no iolab volume header (magic IOLABVOL) at byte 0"));
    }
    let version = u32_at(block, 8);
    if version != METADATA_VERSION {
        return Err(bad(
            device,
            format!("header version {version}; this iolab reads version {METADATA_VERSION}"),
        ));
    }
    let mut copy = block.to_vec();
    copy[12..16].fill(0);
    if crc32c::crc32c(&copy) != u32_at(block, 12) {
        return Err(bad(device, "header checksum mismatch: the header is damaged"));
    }
    let name_field = &block[NAME_AT..NAME_AT + NAME_FIELD_BYTES];
    let name_len = name_field.iter().position(|&b| b == 0).unwrap_or(NAME_FIELD_BYTES);
    let name = String::from_utf8_lossy(&name_field[..name_len]).into_owned();
    let mut set_id = [0; 16];
    set_id.copy_from_slice(&block[16..32]);
    Ok((set_id, name))
}

fn encode_config(set_id: &[u8; 16], generation: u64, text: &str) -> Result<Vec<u8>, VolumeError> {
    let text_max = CONFIG_COPY_BYTES as usize - CONFIG_PREFIX_BYTES;
    if text.len() > text_max {
        return Err(VolumeError::Metadata(format!(
            "configuration is {} bytes; the metadata holds at most {text_max}",
            text.len()
        )));
    }
    let mut copy = vec![0u8; CONFIG_COPY_BYTES as usize];
    copy[0..8].copy_from_slice(CONFIG_MAGIC);
    copy[8..12].copy_from_slice(&METADATA_VERSION.to_le_bytes());
    copy[16..32].copy_from_slice(set_id);
    copy[32..40].copy_from_slice(&generation.to_le_bytes());
    copy[40..44].copy_from_slice(&(text.len() as u32).to_le_bytes());
    copy[CONFIG_PREFIX_BYTES..CONFIG_PREFIX_BYTES + text.len()].copy_from_slice(text.as_bytes());
    let crc = crc32c::crc32c(&copy[..CONFIG_PREFIX_BYTES + text.len()]);
    copy[12..16].copy_from_slice(&crc.to_le_bytes());
    Ok(copy)
}

/// A configuration copy that passes every check: (generation, text).
fn decode_config(set_id: &[u8; 16], copy: &[u8]) -> Option<(u64, String)> {
    let text_len = u32_at(copy, 40) as usize;
    let valid = &copy[0..8] == CONFIG_MAGIC
        && u32_at(copy, 8) == METADATA_VERSION
        && &copy[16..32] == set_id
        && text_len <= copy.len() - CONFIG_PREFIX_BYTES;
    if !valid {
        return None;
    }
    let mut checked = copy[..CONFIG_PREFIX_BYTES + text_len].to_vec();
    checked[12..16].fill(0);
    if crc32c::crc32c(&checked) != u32_at(copy, 12) {
        return None;
    }
    let text = String::from_utf8(copy[CONFIG_PREFIX_BYTES..][..text_len].to_vec()).ok()?;
    Some((u64_at(copy, 32), text))
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("a 4-byte slice converts to [u8; 4]"))
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("an 8-byte slice converts to [u8; 8]"))
}

/// Byte offset of the configuration slot that generation `generation`
/// goes to: generations alternate between the two slots, so a torn write
/// leaves the previous generation intact in the other.
fn slot_offset(generation: u64) -> u64 {
    HEADER_BYTES + (generation % 2) * CONFIG_COPY_BYTES
}

/// Lays `config` out on `devices` (keyed by drive name), writes a header
/// and generation 1 of the configuration (in both slots) to every drive,
/// and binds the volumes. Overwrites the metadata area of every drive:
/// the caller checks signatures first.
pub fn create(config: &Config, devices: &HashMap<String, Arc<dyn Device>>) -> Result<VolumeSet, VolumeError> {
    for drive in &config.drives {
        if drive.name.len() > DRIVE_NAME_BYTES_MAX {
            return Err(bad(&drive.name, format!("drive names are at most {DRIVE_NAME_BYTES_MAX} bytes")));
        }
        if !devices.contains_key(&drive.name) {
            return Err(VolumeError::MissingDrive { drive: drive.name.clone() });
        }
    }
    let sizes = devices.iter().map(|(name, dev)| (name.clone(), dev.size_bytes())).collect();
    let layout = resolve(config, &sizes)?;
    let set_id = new_set_id();
    for drive in &layout.drives {
        let dev = &devices[&drive.name];
        write_aligned(dev.as_ref(), &encode_header(&set_id, &drive.name, dev.size_bytes()), 0)?;
    }
    let set = VolumeSet::new(set_id, layout, devices.clone(), 0)?;
    set.save()?;
    set.save()?;
    Ok(set)
}

/// Rebuilds a volume set from its drives alone: checks every header,
/// refuses drives of different sets, takes the valid configuration copy
/// with the highest generation found on any drive.
pub fn assemble(devices: &[Arc<dyn Device>]) -> Result<VolumeSet, VolumeError> {
    let mut set_id: Option<([u8; 16], String)> = None;
    let mut by_name = HashMap::new();
    let mut best: Option<(u64, String)> = None;
    for dev in devices {
        let mut head = vec![0; (HEADER_BYTES + 2 * CONFIG_COPY_BYTES) as usize];
        read_aligned(dev.as_ref(), &mut head, 0)?;
        let (id, name) = decode_header(dev.name(), &head[..HEADER_BYTES as usize])?;
        match &set_id {
            Some((first, first_dev)) if *first != id => {
                return Err(bad(dev.name(), format!("belongs to a different volume set than {first_dev}")));
            }
            Some(_) => {}
            None => set_id = Some((id, dev.name().to_string())),
        }
        for slot in 0..2 {
            let copy = &head[slot_offset(slot) as usize..][..CONFIG_COPY_BYTES as usize];
            if let Some(found) = decode_config(&id, copy) {
                if best.as_ref().is_none_or(|b| found.0 > b.0) {
                    best = Some(found);
                }
            }
        }
        if by_name.insert(name.clone(), Arc::clone(dev)).is_some() {
            return Err(bad(dev.name(), format!("a second drive claims the name '{name}'")));
        }
    }
    let (set_id, _) = set_id.ok_or_else(|| VolumeError::Metadata("no drives given to assemble".into()))?;
    let (generation, text) = best.ok_or_else(|| {
        VolumeError::Metadata(
            "no drive holds a valid configuration copy (both copies damaged on every drive)".into(),
        )
    })?;
    let config = parse(&text)?;
    for drive in &config.drives {
        if !by_name.contains_key(&drive.name) {
            return Err(VolumeError::MissingDrive { drive: drive.name.clone() });
        }
    }
    let sizes = by_name.iter().map(|(name, dev)| (name.clone(), dev.size_bytes())).collect();
    let layout = resolve(&config, &sizes)?;
    VolumeSet::new(set_id, layout, by_name, generation)
}

impl VolumeSet {
    fn new(
        set_id: [u8; 16],
        layout: Layout,
        devices: HashMap<String, Arc<dyn Device>>,
        generation: u64,
    ) -> Result<VolumeSet, VolumeError> {
        let volumes = bind(&layout, &devices)?;
        Ok(VolumeSet { set_id, volumes, layout, devices, generation: Mutex::new(generation) })
    }

    /// The volume called `name`.
    pub fn volume(&self, name: &str) -> Option<Arc<Volume>> {
        self.volumes.iter().find(|v| v.name() == name).cloned()
    }

    /// The generation of the configuration last written.
    pub fn generation(&self) -> u64 {
        *self.generation.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The current configuration, states included, in file syntax.
    pub fn config_text(&self) -> String {
        let mut states: Vec<(String, State)> = Vec::new();
        for (name, state) in self.volumes.iter().flat_map(|v| v.states_not_up()) {
            if !states.iter().any(|(n, _)| *n == name) {
                states.push((name, state));
            }
        }
        let progress: Vec<(String, u64)> = self.volumes.iter().flat_map(|v| v.revive_progress()).collect();
        self.layout.to_config_text(&states, &progress)
    }

    /// Sets an object's state and records it on every drive.
    pub fn set_state(&self, name: &str, state: State) -> Result<(), VolumeError> {
        let held = self.volumes.iter().filter(|v| v.set_state(name, state).is_ok()).count();
        if held == 0 {
            return Err(VolumeError::UnknownObject {
                volume: "any volume of the set".into(),
                name: name.into(),
            });
        }
        self.save()
    }

    /// Revives an object (see [`Volume::revive`]) in every volume that holds
    /// it and records the new states on every drive.
    pub fn revive(&self, name: &str) -> Result<(), VolumeError> {
        let holders: Vec<&Arc<Volume>> = self.volumes.iter().filter(|v| v.state(name).is_some()).collect();
        if holders.is_empty() {
            return Err(VolumeError::UnknownObject {
                volume: "any volume of the set".into(),
                name: name.into(),
            });
        }
        let mut steps = 0u64;
        let mut on_step = || {
            steps += 1;
            if steps % REVIVE_SAVE_EVERY_STEPS == 0 {
                self.save()?;
            }
            Ok(())
        };
        for volume in holders {
            volume.revive_with(name, &mut on_step)?;
        }
        self.save()
    }

    /// Writes the next generation of the configuration to every drive that
    /// is up and flushes it.
    pub fn save(&self) -> Result<(), VolumeError> {
        let mut generation = self.generation.lock().unwrap_or_else(|e| e.into_inner());
        let next = *generation + 1;
        let copy = encode_config(&self.set_id, next, &self.config_text())?;
        let down: Vec<String> = self.volumes.iter().flat_map(|v| v.states_not_up()).map(|(n, _)| n).collect();
        for drive in self.layout.drives.iter().filter(|d| !down.contains(&d.name)) {
            let dev = &self.devices[&drive.name];
            write_aligned(dev.as_ref(), &copy, slot_offset(next))?;
            dev.flush()?;
        }
        *generation = next;
        Ok(())
    }
}
