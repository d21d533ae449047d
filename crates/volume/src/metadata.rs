//! On-disk metadata of a volume set (docs/formats.md, "Volume metadata"):
//! a header at byte 0 of every drive, two checksummed, generation-
//! numbered copies of the configuration, two checksummed, sequence-
//! numbered statistics records, data after [`DATA_START_BYTES`].
//!
//! [`create`] writes it, [`assemble`] rebuilds the volumes from the drives
//! present (a drive that is missing is bound down), [`VolumeSet::save`]
//! records state changes, [`VolumeSet::save_stats`] the counters. A copy
//! whose checksum fails is ignored, never trusted; drives of different
//! sets are refused. This module writes only the metadata area of the
//! drives it is given.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use codec::{Frame, LeReader, LeWriter, OutOfBounds};
use device::signature::IOLAB_VOLUME_MAGIC;
use device::Device;

use crate::config::{parse, Config};
use crate::counters::{decode_stats, encode_stats, StatsRecord, STATS_SLOT_BYTES};
use crate::error::VolumeError;
use crate::object::{read_aligned, write_aligned, AbsentDevice, ObjectKind, State};
use crate::resolve::{resolve, Layout, DATA_START_BYTES};
use crate::volume::{bind, Volume, VolumeReport};

/// Version of the header and configuration copy layouts (2: the
/// configuration slots shrank to make room for the statistics slots).
pub const METADATA_VERSION: u32 = 2;
/// Magic of a configuration copy.
pub const CONFIG_MAGIC: &[u8; 8] = b"IOLABCFG";
/// Bytes of the drive header (one 4Kn sector).
pub const HEADER_BYTES: u64 = 4096;
/// Bytes of one configuration copy.
pub const CONFIG_COPY_BYTES: u64 = 49_152;
/// Byte offset of the first of the two statistics slots.
pub const STATS_AREA_BYTES_AT: u64 = HEADER_BYTES + 2 * CONFIG_COPY_BYTES;
/// Bytes of the fixed part of a configuration copy before its text.
pub const CONFIG_PREFIX_BYTES: usize = 48;
/// A revive through [`VolumeSet::revive`] records its progress on the
/// drives after this many steps, so an interrupted revive resumes there.
pub const REVIVE_SAVE_EVERY_STEPS: u64 = 16;

/// Longest drive name a header holds.
pub const DRIVE_NAME_BYTES_MAX: usize = 63;

const NAME_AT: usize = 32;
const _: () = assert!(
    STATS_AREA_BYTES_AT + 2 * STATS_SLOT_BYTES == DATA_START_BYTES,
    "metadata fills the reserved area"
);
const NAME_FIELD_BYTES: usize = 64;
/// The checksum of a header and of a configuration copy: at byte 12, over
/// the structure with the field zero.
const FRAME: Frame = Frame::zeroed(12);

/// A bound, assembled set of volumes and the metadata that describes it.
pub struct VolumeSet {
    pub set_id: [u8; 16],
    pub volumes: Vec<Arc<Volume>>,
    layout: Layout,
    devices: HashMap<String, Arc<dyn Device>>,
    generation: Mutex<u64>,
    stats: Mutex<StoredStats>,
    /// Drives of the configuration whose device was not given.
    missing: Vec<String>,
    /// What assembly found wrong but could live with (a damaged copy, a
    /// missing drive), for the caller to show.
    warnings: Vec<String>,
}

/// A drive and the bytes of its metadata area before creation wrote it.
type MetadataArea = (Arc<dyn Device>, Vec<u8>);

/// The counters as last read from or written to the drives: the base the
/// live counters of this process add to.
#[derive(Debug, Default)]
struct StoredStats {
    base: StatsRecord,
    sequence: u64,
}

impl std::fmt::Debug for VolumeSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "VolumeSet({} volumes, {} drives)", self.volumes.len(), self.devices.len())
    }
}

/// A new set id: two fresh ids.
fn new_set_id() -> [u8; 16] {
    let mut id = [0; 16];
    LeWriter::new(&mut id).put_u64(0, codec::fresh_id()).put_u64(8, codec::fresh_id());
    id
}

fn bad(drive: &str, problem: impl Into<String>) -> VolumeError {
    VolumeError::BadDrive { drive: drive.to_string(), problem: problem.into() }
}

fn encode_header(set_id: &[u8; 16], drive: &str, drive_bytes: u64) -> Vec<u8> {
    let mut block = vec![0u8; HEADER_BYTES as usize];
    LeWriter::new(&mut block)
        .put_bytes(0, IOLAB_VOLUME_MAGIC)
        .put_u32(8, METADATA_VERSION)
        .put_bytes(16, set_id)
        .put_bytes(NAME_AT, drive.as_bytes())
        .put_u64(96, drive_bytes)
        .put_u64(104, DATA_START_BYTES)
        .put_u64(112, CONFIG_COPY_BYTES)
        .put_u64(120, STATS_SLOT_BYTES)
        .put_u64(128, STATS_AREA_BYTES_AT);
    FRAME.seal(&[], &mut block);
    block
}

/// A checked header: set id and drive name.
fn decode_header(device: &str, block: &[u8]) -> Result<([u8; 16], String), VolumeError> {
    if block.get(0..8) != Some(IOLAB_VOLUME_MAGIC) {
        return Err(bad(device, "no iolab volume header (magic IOLABVOL) at byte 0"));
    }
    let r = LeReader::new(block);
    let cut_short = |e: OutOfBounds| bad(device, format!("header cut short: {e}"));
    let version = r.u32(8).map_err(cut_short)?;
    if version != METADATA_VERSION {
        return Err(bad(
            device,
            format!(
                "header version {version}; this iolab reads version {METADATA_VERSION} (version 1 had no \
                 statistics area: re-create the set with `iolab volume create --force`)"
            ),
        ));
    }
    if FRAME.verify(&[], block).is_err() {
        return Err(bad(device, "header checksum mismatch: the header is damaged"));
    }
    let layout = [r.u64(104), r.u64(112), r.u64(120), r.u64(128)];
    let layout = layout.into_iter().collect::<Result<Vec<u64>, _>>().map_err(cut_short)?;
    if layout != [DATA_START_BYTES, CONFIG_COPY_BYTES, STATS_SLOT_BYTES, STATS_AREA_BYTES_AT] {
        return Err(bad(
            device,
            format!("header describes a metadata layout {layout:?} this iolab does not use"),
        ));
    }
    let name_field = r.bytes(NAME_AT, NAME_FIELD_BYTES).map_err(cut_short)?;
    let name_len = name_field.iter().position(|&b| b == 0).unwrap_or(NAME_FIELD_BYTES);
    let name = String::from_utf8_lossy(&name_field[..name_len]).into_owned();
    Ok((r.array(16).map_err(cut_short)?, name))
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
    LeWriter::new(&mut copy)
        .put_bytes(0, CONFIG_MAGIC)
        .put_u32(8, METADATA_VERSION)
        .put_bytes(16, set_id)
        .put_u64(32, generation)
        .put_u32(40, text.len() as u32)
        .put_bytes(CONFIG_PREFIX_BYTES, text.as_bytes());
    FRAME.seal(&[], &mut copy[..CONFIG_PREFIX_BYTES + text.len()]);
    Ok(copy)
}

/// A configuration copy that passes every check: (generation, text).
fn decode_config(set_id: &[u8; 16], copy: &[u8]) -> Option<(u64, String)> {
    let r = LeReader::new(copy);
    let ours = r.bytes(0, 8).ok()? == CONFIG_MAGIC
        && r.u32(8).ok()? == METADATA_VERSION
        && r.bytes(16, 16).ok()? == set_id;
    let text_len = r.u32(40).ok()? as usize;
    let checked = copy.get(..CONFIG_PREFIX_BYTES + text_len).filter(|_| ours)?;
    FRAME.verify(&[], checked).ok()?;
    let text = String::from_utf8(checked[CONFIG_PREFIX_BYTES..].to_vec()).ok()?;
    Some((r.u64(32).ok()?, text))
}

/// Byte offset of the configuration slot that generation `generation`
/// goes to: generations alternate between the two slots, so a torn write
/// leaves the previous generation intact in the other.
fn slot_offset(generation: u64) -> u64 {
    HEADER_BYTES + (generation % 2) * CONFIG_COPY_BYTES
}

/// Byte offset of the statistics slot that sequence `sequence` goes to:
/// the same alternation as the configuration, in an area of its own.
fn stats_slot_offset(sequence: u64) -> u64 {
    let at = STATS_AREA_BYTES_AT + (sequence % 2) * STATS_SLOT_BYTES;
    debug_assert!(at >= slot_offset(1) + CONFIG_COPY_BYTES, "statistics never overlap a configuration slot");
    debug_assert!(at + STATS_SLOT_BYTES <= DATA_START_BYTES, "statistics stay in the metadata area");
    at
}

/// Checks everything about creating `config` on drives of `drive_bytes`
/// (keyed by drive name) that can be checked without writing: that it
/// defines drives and volumes, drive names, the layout, and that the
/// configuration fits its metadata slot. [`create`] runs it first; a caller
/// that must make drive files runs it before making any.
pub fn check_create(config: &Config, drive_bytes: &HashMap<String, u64>) -> Result<Layout, VolumeError> {
    if config.drives.is_empty() || config.volumes.is_empty() {
        return Err(VolumeError::Metadata(
            "the configuration defines no drive or no volume (is it empty, or only comments?): nothing to \
             create; see `iolab volume create --help` for the syntax"
                .into(),
        ));
    }
    for drive in &config.drives {
        if drive.name.len() > DRIVE_NAME_BYTES_MAX {
            return Err(bad(&drive.name, format!("drive names are at most {DRIVE_NAME_BYTES_MAX} bytes")));
        }
        if !drive_bytes.contains_key(&drive.name) {
            return Err(VolumeError::MissingDrive { drive: drive.name.clone() });
        }
    }
    let layout = resolve(config, drive_bytes)?;
    // Generous: every object initializing and under revive.
    let mut objects: Vec<(String, State)> = Vec::new();
    for volume in &layout.volumes {
        for plex in &volume.plexes {
            objects.push((plex.name.clone(), State::Initializing));
            objects.extend(plex.subdisks.iter().map(|sd| (sd.name.clone(), State::Initializing)));
        }
    }
    objects.extend(layout.drives.iter().map(|d| (d.name.clone(), State::Initializing)));
    let progress: Vec<(String, u64)> = objects.iter().map(|(name, _)| (name.clone(), u64::MAX)).collect();
    encode_config(&[0; 16], u64::MAX, &layout.to_config_text(&objects, &progress))?;
    Ok(layout)
}

/// Lays `config` out on `devices` (keyed by drive name), writes a header,
/// generation 1 and 2 of the configuration and two empty statistics
/// records to every drive, and binds the volumes. Overwrites the metadata
/// area of every drive: the caller checks signatures first.
///
/// `reads_zero(drive, offset, len)` tells whether those bytes of a drive
/// read as zeros (a file create just made, a sparse file with no data
/// there); a RAID-5 plex whose subdisks all do has right parity and starts
/// up, any other starts [`State::Initializing`]. Nothing is written before
/// every check passed; if a write fails, the metadata areas are put back
/// as they were (best effort) and the first error returned.
pub fn create(
    config: &Config,
    devices: &HashMap<String, Arc<dyn Device>>,
    reads_zero: &dyn Fn(&str, u64, u64) -> bool,
) -> Result<VolumeSet, VolumeError> {
    let sizes = devices.iter().map(|(name, dev)| (name.clone(), dev.size_bytes())).collect();
    let mut layout = check_create(config, &sizes)?;
    for plex in layout.volumes.iter().flat_map(|v| &v.plexes) {
        let zeroed = plex
            .subdisks
            .iter()
            .all(|sd| reads_zero(&layout.drives[sd.drive].name, sd.drive_offset_bytes, sd.length_bytes));
        if matches!(plex.org, crate::Org::Raid5 { .. }) && !zeroed {
            layout.states.push((plex.name.clone(), State::Initializing));
        }
    }
    let set_id = new_set_id();
    let set = VolumeSet::new(set_id, layout, devices.clone(), 0)?;
    let before = set.read_metadata_areas()?;
    let written = set.write_new_metadata();
    if let Err(err) = written {
        set.restore_metadata_areas(&before);
        return Err(err);
    }
    Ok(set)
}

/// What the drives given to [`assemble`] hold.
#[derive(Default)]
struct Found {
    set_id: Option<([u8; 16], String)>,
    by_name: HashMap<String, Arc<dyn Device>>,
    config: Option<(u64, String)>,
    stats: Option<(u64, StatsRecord)>,
    warnings: Vec<String>,
}

impl Found {
    /// Reads one drive's metadata area and keeps what is newest.
    fn read_drive(&mut self, dev: &Arc<dyn Device>) -> Result<(), VolumeError> {
        let mut head = vec![0; DATA_START_BYTES as usize];
        read_aligned(dev.as_ref(), &mut head, 0)?;
        let (id, name) = decode_header(dev.name(), &head[..HEADER_BYTES as usize])?;
        match &self.set_id {
            Some((first, first_dev)) if *first != id => {
                return Err(bad(dev.name(), format!("belongs to a different volume set than {first_dev}")));
            }
            Some(_) => {}
            None => self.set_id = Some((id, dev.name().to_string())),
        }
        for slot in 0..2 {
            let copy = &head[slot_offset(slot) as usize..][..CONFIG_COPY_BYTES as usize];
            if let Some(found) = decode_config(&id, copy) {
                if self.config.as_ref().is_none_or(|b| found.0 > b.0) {
                    self.config = Some(found);
                }
            }
            let record = &head[stats_slot_offset(slot) as usize..][..STATS_SLOT_BYTES as usize];
            match decode_stats(&id, record) {
                Ok(found) if self.stats.as_ref().is_none_or(|b| found.0 > b.0) => self.stats = Some(found),
                Ok(_) => {}
                Err(err) => self
                    .warnings
                    .push(format!("drive '{name}' ({}): statistics slot {slot}: {err}; ignored", dev.name())),
            }
        }
        if self.by_name.insert(name.clone(), Arc::clone(dev)).is_some() {
            return Err(bad(dev.name(), format!("a second drive claims the name '{name}'")));
        }
        Ok(())
    }
}

/// Rebuilds a volume set from its drives alone: checks every header,
/// refuses drives of different sets, takes the valid configuration copy
/// and statistics record with the highest generation and sequence found
/// on any drive. A drive the configuration names but `devices` lacks is
/// bound down, its subdisks stale (see [`VolumeSet::missing_drives`]).
pub fn assemble(devices: &[Arc<dyn Device>]) -> Result<VolumeSet, VolumeError> {
    let mut found = Found::default();
    for dev in devices {
        found.read_drive(dev)?;
    }
    let (set_id, _) =
        found.set_id.ok_or_else(|| VolumeError::Metadata("no drives given to assemble".into()))?;
    let (generation, text) = found.config.ok_or_else(|| {
        VolumeError::Metadata(
            "no drive holds a valid configuration copy (both copies damaged on every drive)".into(),
        )
    })?;
    let config = parse(&text)?;
    let mut devices = found.by_name;
    let sector_bytes = devices.values().map(|d| d.sector_bytes()).max().unwrap_or(512);
    let mut missing = Vec::new();
    for drive in &config.drives {
        if !devices.contains_key(&drive.name) {
            let size_bytes = extent_end_bytes(&config, &drive.name);
            let absent = AbsentDevice::new(&drive.name, &drive.device, size_bytes, sector_bytes);
            devices.insert(drive.name.clone(), Arc::new(absent));
            missing.push(drive.name.clone());
        }
    }
    let sizes = devices.iter().map(|(name, dev)| (name.clone(), dev.size_bytes())).collect();
    let layout = resolve(&config, &sizes)?;
    let mut set = VolumeSet::new(set_id, layout, devices, generation)?;
    let (sequence, base) = found.stats.unwrap_or_default();
    if sequence == 0 {
        found.warnings.push("no drive holds a valid statistics record: the counters start from zero".into());
    }
    set.stats = Mutex::new(StoredStats { base, sequence });
    set.warnings = found.warnings;
    set.bind_missing(missing);
    Ok(set)
}

/// Where the last subdisk on `drive` ends: the size a missing drive is
/// bound with (a saved configuration gives every offset and length).
fn extent_end_bytes(config: &Config, drive: &str) -> u64 {
    let sds = config.volumes.iter().flat_map(|v| &v.plexes).flat_map(|p| &p.subdisks);
    sds.filter(|sd| sd.drive == drive)
        .map(|sd| sd.drive_offset_bytes.unwrap_or(DATA_START_BYTES).saturating_add(sd.length_bytes))
        .max()
        .unwrap_or(DATA_START_BYTES)
}

impl VolumeSet {
    /// The metadata area of every drive, to put back if creation fails.
    fn read_metadata_areas(&self) -> Result<Vec<MetadataArea>, VolumeError> {
        let mut areas = Vec::with_capacity(self.layout.drives.len());
        for drive in &self.layout.drives {
            let dev = &self.devices[&drive.name];
            let mut area = vec![0; DATA_START_BYTES as usize];
            read_aligned(dev.as_ref(), &mut area, 0)?;
            areas.push((Arc::clone(dev), area));
        }
        Ok(areas)
    }

    /// Best effort: the first error is the one the caller reports.
    fn restore_metadata_areas(&self, areas: &[MetadataArea]) {
        for (dev, area) in areas {
            let _ = write_aligned(dev.as_ref(), area, 0).and_then(|()| dev.flush());
        }
    }

    /// A new set's headers, configuration generations 1 and 2 and two
    /// empty statistics records.
    fn write_new_metadata(&self) -> Result<(), VolumeError> {
        for drive in &self.layout.drives {
            let dev = &self.devices[&drive.name];
            write_aligned(dev.as_ref(), &encode_header(&self.set_id, &drive.name, dev.size_bytes()), 0)?;
        }
        self.save()?;
        self.save()?;
        self.save_stats()?;
        self.save_stats()
    }

    fn new(
        set_id: [u8; 16],
        layout: Layout,
        devices: HashMap<String, Arc<dyn Device>>,
        generation: u64,
    ) -> Result<VolumeSet, VolumeError> {
        let volumes = bind(&layout, &devices)?;
        Ok(VolumeSet {
            set_id,
            volumes,
            layout,
            devices,
            generation: Mutex::new(generation),
            stats: Mutex::new(StoredStats::default()),
            missing: Vec::new(),
            warnings: Vec::new(),
        })
    }

    /// Takes missing drives down (their subdisks go stale) and a RAID-5
    /// plex that has lost more than one subdisk down, saying so.
    fn bind_missing(&mut self, missing: Vec<String>) {
        for drive in &missing {
            for volume in &self.volumes {
                // Only the volumes holding the drive know it.
                volume.mark_missing(drive);
            }
            self.warnings.push(format!(
                "drive '{drive}' is missing (its device was not given or could not be read): it is down \
                 and its subdisks are stale"
            ));
        }
        for volume in &self.volumes {
            self.warnings.extend(volume.down_unrecoverable_plexes());
        }
        self.missing = missing;
    }

    /// Drives of the configuration that had no device at assembly.
    pub fn missing_drives(&self) -> &[String] {
        &self.missing
    }

    /// What assembly found wrong but could live with: damaged statistics
    /// slots, missing drives, plexes that went down because of them.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
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

    fn refuse_missing(&self, name: &str) -> Result<(), VolumeError> {
        if self.missing.iter().any(|m| m == name) {
            return Err(bad(name, "is missing: give its device to bring it back"));
        }
        Ok(())
    }

    /// Sets an object's state and records it on every drive.
    pub fn set_state(&self, name: &str, state: State) -> Result<(), VolumeError> {
        if state == State::Up {
            self.refuse_missing(name)?;
        }
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
        self.revive_with(name, &mut |_, _| {})
    }

    /// As [`VolumeSet::revive`], calling `on_progress` with the bytes done
    /// and in all of the object under revive after every step; the
    /// progress is recorded on the drives every
    /// [`REVIVE_SAVE_EVERY_STEPS`] steps, so an interrupted revive resumes.
    pub fn revive_with(&self, name: &str, on_progress: &mut dyn FnMut(u64, u64)) -> Result<(), VolumeError> {
        self.refuse_missing(name)?;
        let holders: Vec<&Arc<Volume>> = self.volumes.iter().filter(|v| v.state(name).is_some()).collect();
        if holders.is_empty() {
            return Err(VolumeError::UnknownObject {
                volume: "any volume of the set".into(),
                name: name.into(),
            });
        }
        let mut steps = 0u64;
        let mut on_step = |done, total| {
            on_progress(done, total);
            steps += 1;
            if steps % REVIVE_SAVE_EVERY_STEPS == 0 {
                self.save_progress()?;
            }
            Ok(())
        };
        for volume in holders {
            volume.revive_with(name, &mut on_step)?;
        }
        self.save_progress()
    }

    /// Initialises a plex, or every plex of a volume (see [`Volume::init`]),
    /// calling `on_progress` with the bytes done and in all after every
    /// step, and records the states on every drive: every
    /// [`REVIVE_SAVE_EVERY_STEPS`] steps (the parity build of an
    /// initializing plex resumes there), at the end, and when it fails.
    pub fn init(&self, name: &str, on_progress: &mut dyn FnMut(u64, u64)) -> Result<(), VolumeError> {
        let holder = self.volumes.iter().find(|v| v.name() == name || v.has_plex(name));
        let Some(holder) = holder else {
            return Err(match self.volumes.iter().find(|v| v.state(name).is_some()) {
                Some(v) => VolumeError::Invalid {
                    volume: v.name().to_string(),
                    problem: format!("init takes a plex or a volume; '{name}' is a subdisk or a drive"),
                },
                None => {
                    VolumeError::UnknownObject { volume: "any volume of the set".into(), name: name.into() }
                }
            });
        };
        let mut steps = 0u64;
        let mut on_step = |done, total| {
            on_progress(done, total);
            steps += 1;
            if steps % REVIVE_SAVE_EVERY_STEPS == 0 {
                self.save_progress()?;
            }
            Ok(())
        };
        let result = holder.init_with(name, &mut on_step);
        let saved = self.save_progress();
        result.and(saved)
    }

    /// Records how far a revive or init has come, or that it ended. Every
    /// drive is flushed first: the saved pointer (or state up) vouches for
    /// the data below it, so that
    /// data must be durable on every drive before any drive holds the
    /// pointer (save flushes drive by drive, and one drive's new
    /// generation outvotes the others at assembly).
    fn save_progress(&self) -> Result<(), VolumeError> {
        for dev in self.writable_drives() {
            dev.flush()?;
        }
        self.save()
    }

    /// Drives metadata goes to: present and up.
    fn writable_drives(&self) -> Vec<&Arc<dyn Device>> {
        let down: Vec<String> = self.volumes.iter().flat_map(|v| v.states_not_up()).map(|(n, _)| n).collect();
        self.layout
            .drives
            .iter()
            .filter(|d| !down.contains(&d.name) && !self.missing.contains(&d.name))
            .map(|d| &self.devices[&d.name])
            .collect()
    }

    /// Writes the next generation of the configuration to every drive that
    /// is present and up, and flushes it.
    pub fn save(&self) -> Result<(), VolumeError> {
        let mut generation = self.generation.lock().unwrap_or_else(|e| e.into_inner());
        let next = *generation + 1;
        let copy = encode_config(&self.set_id, next, &self.config_text())?;
        for dev in self.writable_drives() {
            write_aligned(dev.as_ref(), &copy, slot_offset(next))?;
            dev.flush()?;
        }
        *generation = next;
        Ok(())
    }

    /// The counters of every volume and the objects below it, accumulated
    /// since creation or the last reset: the stored record plus what this
    /// process counted.
    pub fn accumulated_reports(&self) -> Vec<VolumeReport> {
        let stats = self.stats.lock().unwrap_or_else(|e| e.into_inner());
        self.volumes
            .iter()
            .map(|v| {
                let mut report = v.report();
                stats.base.add_to_report(&mut report);
                report
            })
            .collect()
    }

    /// Writes the accumulated counters (see [`Self::accumulated_reports`])
    /// as the next statistics record to every drive that is present and
    /// up, and flushes it. Leaves the configuration alone; calling it again
    /// writes the same totals plus what was counted since, never twice.
    pub fn save_stats(&self) -> Result<(), VolumeError> {
        let mut stats = self.stats.lock().unwrap_or_else(|e| e.into_inner());
        let live: Vec<VolumeReport> = self.volumes.iter().map(|v| v.report()).collect();
        let total = stats.base.plus(&StatsRecord::from_reports(&live));
        let next = stats.sequence + 1;
        let slot = encode_stats(&self.set_id, next, &total).map_err(VolumeError::Metadata)?;
        for dev in self.writable_drives() {
            write_aligned(dev.as_ref(), &slot, stats_slot_offset(next))?;
            dev.flush()?;
        }
        stats.sequence = next;
        Ok(())
    }

    /// Zeroes the counters of `object` (with `recursive`, and of the
    /// objects below it), or of every object when `object` is `None`, and
    /// records that on the drives.
    pub fn reset_stats(&self, object: Option<&str>, recursive: bool) -> Result<(), VolumeError> {
        {
            let mut stats = self.stats.lock().unwrap_or_else(|e| e.into_inner());
            let Some(name) = object else {
                stats.base = StatsRecord::default();
                self.volumes.iter().for_each(|v| v.reset_stats());
                drop(stats);
                return self.save_stats();
            };
            let mut cleared: Vec<(ObjectKind, String)> = Vec::new();
            for volume in &self.volumes {
                cleared.extend(volume.reset_object_stats(name, recursive));
            }
            if cleared.is_empty() {
                return Err(VolumeError::UnknownObject {
                    volume: "any volume of the set".into(),
                    name: name.into(),
                });
            }
            for key in cleared {
                stats.base.objects.remove(&key);
            }
        }
        self.save_stats()
    }
}

#[cfg(test)]
mod tests {
    //! The bytes of a drive header and a configuration copy, field by
    //! field, as docs/formats.md ("Volume metadata") gives them, taken from
    //! the encoders before their little-endian and checksum code moved to
    //! the codec crate.

    use super::*;
    use codec::golden::assert_layout;

    const SET: &str = "07070707070707070707070707070707";

    #[test]
    fn a_drive_header_is_byte_for_byte_the_documented_one() {
        let block = encode_header(&[7; 16], "d0", 1 << 30);
        assert_layout(
            &block,
            &[
                (0, "494f4c4142564f4c"),   // magic "IOLABVOL"
                (8, "02000000"),           // version 2
                (12, "0542df29"),          // crc32c of the header with this field zero
                (16, SET),                 // set id
                (32, "6430"),              // drive name "d0"
                (96, "0000004000000000"),  // drive bytes
                (104, "0010020000000000"), // data start
                (112, "00c0000000000000"), // configuration copy bytes
                (120, "0040000000000000"), // statistics slot bytes
                (128, "0090010000000000"), // statistics area offset
            ],
        );
        assert_eq!(decode_header("d0", &block).unwrap(), ([7; 16], "d0".to_string()));
    }

    #[test]
    fn a_configuration_copy_is_byte_for_byte_the_documented_one() {
        let copy = encode_config(&[7; 16], 5, "drive d0\n").unwrap();
        assert_eq!(copy.len() as u64, CONFIG_COPY_BYTES);
        assert_layout(
            &copy,
            &[
                (0, "494f4c4142434647"),    // magic "IOLABCFG"
                (8, "02000000"),            // version 2
                (12, "fb90be89"),           // crc32c of the prefix and text with this field zero
                (16, SET),                  // set id
                (32, "0500000000000000"),   // generation
                (40, "09000000"),           // text bytes
                (48, "64726976652064300a"), // "drive d0\n"
            ],
        );
        assert_eq!(decode_config(&[7; 16], &copy), Some((5, "drive d0\n".to_string())));
    }
}
