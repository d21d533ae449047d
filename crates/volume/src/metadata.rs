//! On-disk metadata of a volume set (docs/formats.md, "Volume metadata"):
//! a header at byte 0 of every drive, two checksummed, generation-
//! numbered copies of the configuration, two checksummed, sequence-
//! numbered statistics records, data after [`DATA_START_BYTES`].
//!
//! [`create`] writes it, `assemble.rs` rebuilds the volumes from the
//! drives present (a drive that is missing or damaged is bound down),
//! [`VolumeSet::save`] records state changes, [`VolumeSet::save_stats`]
//! the counters. This module writes only the metadata area of the drives
//! it is given, and a drive's only once it is present and up.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use codec::LeWriter;
use device::Device;

use crate::config::Config;
use crate::counters::{encode_stats, StatsRecord};
use crate::error::VolumeError;
use crate::object::{read_aligned, write_aligned, ObjectKind, State};
use crate::ondisk::{
    config_slot_at, encode_config_copy, encode_drive_header, slot_of, stats_slot_at, DriveHeader,
    CONFIG_COPY_BYTES, DRIVE_NAME_BYTES_MAX, GENERATION_MAX, STATS_AREA_BYTES_AT, STATS_SLOT_BYTES,
};
use crate::resolve::{resolve, Layout, DATA_START_BYTES};
use crate::volume::{bind, Volume, VolumeReport};

/// A revive through [`VolumeSet::revive`] records its progress on the
/// drives after this many steps, so an interrupted revive resumes there.
pub const REVIVE_SAVE_EVERY_STEPS: u64 = 16;

const _: () = assert!(
    STATS_AREA_BYTES_AT + 2 * STATS_SLOT_BYTES == DATA_START_BYTES,
    "metadata fills the reserved area"
);

/// A bound, assembled set of volumes and the metadata that describes it.
pub struct VolumeSet {
    pub set_id: [u8; 16],
    pub volumes: Vec<Arc<Volume>>,
    layout: Layout,
    devices: HashMap<String, Arc<dyn Device>>,
    generation: Mutex<u64>,
    pub(crate) stats: Mutex<StoredStats>,
    /// Drives of the configuration whose device was not given.
    missing: Vec<String>,
    /// Drives present but taken down at assembly (a damaged header, a
    /// configuration copy that disagrees with the others').
    down_at_assembly: Vec<String>,
    /// Drives taken down at assembly whose metadata is rewritten whole by
    /// the first save after they are up again (revived or set up): their
    /// header, and both configuration slots, so that nothing their damaged
    /// area held can outvote the set later.
    rewrite: Mutex<Vec<String>>,
    /// What assembly found wrong but could live with (a damaged copy, a
    /// missing drive), for the caller to show.
    pub(crate) warnings: Vec<String>,
}

/// A drive and the bytes of its metadata area before creation wrote it.
type MetadataArea = (Arc<dyn Device>, Vec<u8>);

/// The counters as last read from or written to the drives: the base the
/// live counters of this process add to.
#[derive(Debug, Default)]
pub(crate) struct StoredStats {
    pub(crate) base: StatsRecord,
    pub(crate) sequence: u64,
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

/// Byte offset of the statistics slot that sequence `sequence` goes to:
/// the same alternation as the configuration, in an area of its own.
pub(crate) fn stats_slot_offset(sequence: u64) -> u64 {
    let at = stats_slot_at((sequence % 2) as u8);
    debug_assert!(
        at >= config_slot_at(1) + CONFIG_COPY_BYTES,
        "statistics never overlap a configuration slot"
    );
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
    encode_config_copy(&[0; 16], GENERATION_MAX, &layout.to_config_text(&objects, &progress))?;
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
            let header =
                DriveHeader { set_id: self.set_id, drive: drive.name.clone(), drive_bytes: dev.size_bytes() };
            write_aligned(dev.as_ref(), &encode_drive_header(&header), 0)?;
        }
        self.save()?;
        self.save()?;
        self.save_stats()?;
        self.save_stats()
    }

    pub(crate) fn new(
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
            down_at_assembly: Vec::new(),
            rewrite: Mutex::new(Vec::new()),
            warnings: Vec::new(),
        })
    }

    /// Takes missing drives down (their subdisks go stale), and drives
    /// present but damaged (`down`: each with what to tell the user), and
    /// then a RAID-5 plex that has lost more than one subdisk, saying so.
    pub(crate) fn bind_missing(&mut self, missing: Vec<String>, down: Vec<(String, String)>) {
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
        for (drive, why) in &down {
            for volume in &self.volumes {
                // An error only says this volume does not hold the drive.
                let _ = volume.set_state(drive, State::Down);
            }
            self.warnings.push(why.clone());
        }
        for volume in &self.volumes {
            self.warnings.extend(volume.down_unrecoverable_plexes());
        }
        self.missing = missing;
        self.down_at_assembly = down.into_iter().map(|(drive, _)| drive).collect();
        *self.rewrite.lock().unwrap_or_else(|e| e.into_inner()) = self.down_at_assembly.clone();
    }

    /// Drives of the configuration that had no device at assembly.
    pub fn missing_drives(&self) -> &[String] {
        &self.missing
    }

    /// Drives whose device was there but that assembly took down: a
    /// header that could not be read or failed a check, or a configuration
    /// copy that disagrees with the majority's. Nothing is written
    /// to them until they are revived, which rewrites their metadata.
    pub fn drives_down_at_assembly(&self) -> &[String] {
        &self.down_at_assembly
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
        for (_, dev) in self.writable_drives() {
            dev.flush()?;
        }
        self.save()
    }

    /// Drives metadata goes to: present and up.
    fn writable_drives(&self) -> Vec<(&str, &Arc<dyn Device>)> {
        let down: Vec<String> = self.volumes.iter().flat_map(|v| v.states_not_up()).map(|(n, _)| n).collect();
        self.layout
            .drives
            .iter()
            .filter(|d| !down.contains(&d.name) && !self.missing.contains(&d.name))
            .map(|d| (d.name.as_str(), &self.devices[&d.name]))
            .collect()
    }

    /// Writes the next generation of the configuration to every drive that
    /// is present and up, and flushes it. A drive taken down at assembly
    /// that is up again first gets a new header, and then both slots (two
    /// generations) and both statistics slots.
    pub fn save(&self) -> Result<(), VolumeError> {
        let rewritten = self.rewrite_returned_headers()?;
        self.save_generation()?;
        if rewritten {
            self.save_generation()?;
            self.save_stats()?;
            self.save_stats()?;
        }
        Ok(())
    }

    fn save_generation(&self) -> Result<(), VolumeError> {
        let mut generation = self.generation.lock().unwrap_or_else(|e| e.into_inner());
        let next = *generation + 1;
        let copy = encode_config_copy(&self.set_id, next, &self.config_text())?;
        for (_, dev) in self.writable_drives() {
            write_aligned(dev.as_ref(), &copy, config_slot_at(slot_of(next)))?;
            dev.flush()?;
        }
        *generation = next;
        Ok(())
    }

    /// Writes a new header to each drive taken down at assembly that is
    /// up again; whether there was one.
    fn rewrite_returned_headers(&self) -> Result<bool, VolumeError> {
        let mut rewrite = self.rewrite.lock().unwrap_or_else(|e| e.into_inner());
        let back: Vec<(&str, &Arc<dyn Device>)> = self
            .writable_drives()
            .into_iter()
            .filter(|(name, _)| rewrite.iter().any(|r| r == name))
            .collect();
        for (name, dev) in &back {
            let header =
                DriveHeader { set_id: self.set_id, drive: name.to_string(), drive_bytes: dev.size_bytes() };
            write_aligned(dev.as_ref(), &encode_drive_header(&header), 0)?;
            dev.flush()?;
            rewrite.retain(|r| r != name);
        }
        Ok(!back.is_empty())
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
        for (_, dev) in self.writable_drives() {
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
