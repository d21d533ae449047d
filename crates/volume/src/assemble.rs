//! Assembly: a volume set rebuilt from the drives given (docs/formats.md,
//! "Volume metadata"). Every header and copy is checked (`ondisk.rs`);
//! a drive whose header cannot be read or fails a check is down, as a
//! missing drive is, and left as it is until revived; drives of another
//! set, two drives with one name and devices that hold no volume metadata
//! at all are refused. This module reads the drives and writes nothing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use device::Device;

use crate::counters::{decode_stats, StatsRecord};
use crate::error::{FaultKind, MetadataArea, MetadataFault, VolumeError};
use crate::metadata::{StoredStats, VolumeSet};
use crate::object::{read_aligned, AbsentDevice};
use crate::ondisk::{
    check_config_text, config_slot_at, decode_config_copy, decode_drive_header, loose_drive_name,
    stats_slot_at, volume_remnants, DriveHeader, PresentDrive, TextCheck, CONFIG_COPY_BYTES,
    STATS_SLOT_BYTES,
};
use crate::quorum::{elect, Verdict, Vote};
use crate::resolve::{Layout, DATA_START_BYTES};

/// A device given to [`assemble_given`], and the drive the caller expects
/// it to hold (a configuration file's `drive` line names it): used only
/// to place a device whose header cannot be read.
pub struct GivenDrive {
    pub device: Arc<dyn Device>,
    pub expected: Option<String>,
}

/// A drive whose header passed its checks, and its metadata area.
struct Readable {
    header: DriveHeader,
    dev: Arc<dyn Device>,
    area: Vec<u8>,
}

/// A device whose header cannot be read or failed a check, but that holds
/// what is left of a volume drive's metadata (or nothing: blank), and the
/// drive it may have been.
struct Damaged {
    dev: Arc<dyn Device>,
    fault: MetadataFault,
    drive: Option<String>,
}

/// What the drives given hold.
#[derive(Default)]
struct Found {
    drives: Vec<Readable>,
    damaged: Vec<Damaged>,
    votes: Vec<Vote>,
    stats: Option<(u64, StatsRecord)>,
    warnings: Vec<String>,
}

fn bad(device: &str, problem: String) -> VolumeError {
    VolumeError::BadDrive { drive: device.to_string(), problem }
}

impl Found {
    /// Reads one device's metadata area and sorts it: a drive whose header
    /// passes, a damaged one, or a refusal (another set, a second drive
    /// with one name, no volume metadata at all).
    fn read_drive(&mut self, given: &GivenDrive) -> Result<(), VolumeError> {
        let dev = &given.device;
        let mut area = vec![0; DATA_START_BYTES as usize];
        if let Err(err) = read_aligned(dev.as_ref(), &mut area, 0) {
            let fault = MetadataFault {
                device: dev.name().to_string(),
                drive: None,
                area: MetadataArea::Header,
                offset: 0,
                field: "metadata area",
                problem: FaultKind::Unreadable(err.to_string()),
            };
            self.damaged.push(Damaged { dev: Arc::clone(dev), fault, drive: given.expected.clone() });
            return Ok(());
        }
        let header = match decode_drive_header(dev.name(), dev.size_bytes(), &area) {
            Ok(header) => header,
            Err(fault) if volume_remnants(&area) => {
                let drive = given.expected.clone().or_else(|| loose_drive_name(&area));
                self.damaged.push(Damaged { dev: Arc::clone(dev), fault, drive });
                return Ok(());
            }
            Err(_) => return Err(VolumeError::NotADrive { device: dev.name().to_string() }),
        };
        if let Some(first) = self.drives.first() {
            if first.header.set_id != header.set_id {
                let other = first.dev.name();
                return Err(bad(dev.name(), format!("belongs to a different volume set than {other}")));
            }
        }
        if self.drives.iter().any(|d| d.header.drive == header.drive) {
            return Err(bad(dev.name(), format!("a second drive claims the name '{}'", header.drive)));
        }
        self.drives.push(Readable { header, dev: Arc::clone(dev), area });
        Ok(())
    }
}

impl Found {
    /// The drives whose headers passed, as the checks of a copy's text
    /// see them.
    fn present(&self) -> HashMap<String, PresentDrive> {
        let present = |d: &Readable| PresentDrive {
            size_bytes: d.dev.size_bytes(),
            sector_bytes: d.dev.sector_bytes(),
        };
        self.drives.iter().map(|d| (d.header.drive.clone(), present(d))).collect()
    }

    /// Checks both configuration copies of every drive: the newest that
    /// passes is the drive's vote; a copy that fails is a warning.
    fn read_copies(&mut self) {
        let present = self.present();
        for drive in &self.drives {
            let (name, device) = (&drive.header.drive, drive.dev.name());
            let mut vote: Option<Vote> = None;
            for slot in 0..2u8 {
                let check = TextCheck { device, slot, drive: name, present: &present };
                let copy = &drive.area[config_slot_at(slot) as usize..][..CONFIG_COPY_BYTES as usize];
                let checked = decode_config_copy(device, slot, &drive.header.set_id, copy)
                    .map_err(|fault| MetadataFault { drive: Some(name.clone()), ..fault })
                    .and_then(|copy| Ok((check_config_text(&check, &copy)?, copy)));
                match checked {
                    Ok((layout, copy)) if vote.as_ref().is_none_or(|v| copy.generation > v.generation) => {
                        let (drive, device) = (name.clone(), device.to_string());
                        vote = Some(Vote { drive, device, generation: copy.generation, layout });
                    }
                    Ok(_) => {}
                    Err(fault) => self.warnings.push(format!("{fault}; this copy is ignored")),
                }
            }
            self.votes.extend(vote);
        }
    }

    /// The statistics record with the highest sequence on the drives not
    /// taken down; a slot that fails its checks is a warning and passed
    /// over (the other slot, or another drive's, is used; with none, the
    /// counters start from zero), never a reason to stop the set.
    fn read_stats(&mut self, down: &[(String, String)]) {
        for drive in self.drives.iter().filter(|d| !down.iter().any(|(n, _)| *n == d.header.drive)) {
            let (name, device) = (&drive.header.drive, drive.dev.name());
            for slot in 0..2u8 {
                let record = &drive.area[stats_slot_at(slot) as usize..][..STATS_SLOT_BYTES as usize];
                match decode_stats(device, slot, &drive.header.set_id, record) {
                    Ok(found) if self.stats.as_ref().is_none_or(|b| found.0 > b.0) => {
                        self.stats = Some(found)
                    }
                    Ok(_) => {}
                    Err(fault) => {
                        let fault = MetadataFault { drive: Some(name.clone()), ..fault };
                        self.warnings.push(format!("{fault}; this statistics record is ignored"));
                    }
                }
            }
        }
    }

    /// Binds each damaged device to the drive it was, down, when the
    /// layout names that drive, no readable device holds it and the device
    /// is large enough for its subdisks on sectors no larger than the
    /// set's; leaves any other out. Returns the drives bound so and why.
    fn place_damaged(
        &mut self,
        layout: &Layout,
        devices: &mut HashMap<String, Arc<dyn Device>>,
    ) -> Vec<(String, String)> {
        let sector_max = self.drives.iter().map(|d| d.dev.sector_bytes()).max().unwrap_or(512);
        let mut placed = Vec::new();
        for damaged in std::mem::take(&mut self.damaged) {
            let index = damaged.drive.as_ref().and_then(|n| layout.drives.iter().position(|d| &d.name == n));
            let fits = |i: usize| {
                damaged.dev.size_bytes() >= layout.extent_end_bytes(i)
                    && damaged.dev.sector_bytes() <= sector_max
            };
            match index {
                Some(i) if !devices.contains_key(&layout.drives[i].name) && fits(i) => {
                    let drive = layout.drives[i].name.clone();
                    let why = format!(
                        "drive '{drive}' is down: {}; it is treated as a missing drive (its subdisks stale) and \
                         left as it is until you revive it with `iolab volume start {drive} ...`, which rewrites \
                         its metadata",
                        damaged.fault
                    );
                    devices.insert(drive.clone(), damaged.dev);
                    placed.push((drive, why));
                }
                _ => self.warnings.push(format!(
                    "{}; it could not be matched to a drive of the set that lacks a device: left out",
                    damaged.fault
                )),
            }
        }
        placed
    }
}

/// Rebuilds a volume set from its drives alone (see [`assemble_given`]),
/// with no expectation of which drive each device is.
pub fn assemble(devices: &[Arc<dyn Device>]) -> Result<VolumeSet, VolumeError> {
    let given: Vec<GivenDrive> =
        devices.iter().map(|d| GivenDrive { device: Arc::clone(d), expected: None }).collect();
    assemble_given(&given)
}

/// Rebuilds a volume set from the devices given: checks every header and
/// copy (`ondisk.rs`), refuses drives of different sets, two drives with
/// one name and a device that holds no volume metadata, takes the copy
/// the drives' votes elect (`quorum.rs`: a drive whose copy disagrees
/// with the majority is down) and the statistics record with the highest
/// sequence. A drive the configuration names but no device holds
/// is bound missing, down, its subdisks stale (see
/// [`VolumeSet::missing_drives`]); a device whose header cannot be read or
/// fails a check is bound to the drive it was, down, and nothing is
/// written to it until it is revived (see
/// [`VolumeSet::drives_down_at_assembly`]).
pub fn assemble_given(given: &[GivenDrive]) -> Result<VolumeSet, VolumeError> {
    let mut found = Found::default();
    for drive in given {
        found.read_drive(drive)?;
    }
    let Some(first) = found.drives.first() else {
        let faults: Vec<String> = found.damaged.iter().map(|d| d.fault.to_string()).collect();
        return Err(VolumeError::Metadata(format!(
            "no drive given has a header that can be used:\n  {}",
            if faults.is_empty() { "(no drives given)".to_string() } else { faults.join("\n  ") }
        )));
    };
    let set_id = first.header.set_id;
    found.read_copies();
    let verdict = elect(&found.votes).map_err(VolumeError::Metadata)?;
    let Some(Verdict { generation, layout, dissenters, warning }) = verdict else {
        return Err(VolumeError::Metadata(format!(
            "no drive holds a usable configuration copy:\n  {}",
            found.warnings.join("\n  ")
        )));
    };
    found.warnings.extend(warning);
    let mut devices: HashMap<String, Arc<dyn Device>> =
        found.drives.iter().map(|d| (d.header.drive.clone(), Arc::clone(&d.dev))).collect();
    let mut down = dissenters;
    down.extend(found.place_damaged(&layout, &mut devices));
    found.read_stats(&down);
    let missing = bind_absent(&layout, &mut devices);
    let mut set = VolumeSet::new(set_id, layout, devices, generation)?;
    let (sequence, base) = found.stats.unwrap_or_default();
    if sequence == 0 {
        found.warnings.push("no drive holds a valid statistics record: the counters start from zero".into());
    }
    set.stats = Mutex::new(StoredStats { base, sequence });
    set.warnings = found.warnings;
    set.bind_missing(missing, down);
    Ok(set)
}

/// Binds every drive of `layout` that no device holds to an absent
/// device as long as its last subdisk; returns their names.
fn bind_absent(layout: &Layout, devices: &mut HashMap<String, Arc<dyn Device>>) -> Vec<String> {
    let sector_bytes = devices.values().map(|d| d.sector_bytes()).max().unwrap_or(512);
    let mut missing = Vec::new();
    for (index, drive) in layout.drives.iter().enumerate() {
        if !devices.contains_key(&drive.name) {
            let size_bytes = layout.extent_end_bytes(index);
            let absent = AbsentDevice::new(&drive.name, &drive.device, size_bytes, sector_bytes);
            devices.insert(drive.name.clone(), Arc::new(absent));
            missing.push(drive.name.clone());
        }
    }
    missing
}
