//! Lays a parsed [`Config`] out on drives of known sizes: fills in default
//! drive offsets (first free area that fits), `length 0` (the largest free
//! area), plex offsets, and checks overlaps, equal subdisks and drive
//! sizes. The result, a [`Layout`], holds only concrete numbers.
//!
//! This module does no I/O; the caller supplies drive sizes.

use std::collections::HashMap;

use crate::config::{Config, ReadPolicySpec, SdSpec};
use crate::error::ConfigError;
use crate::geometry::Org;
use crate::object::State;

/// Bytes reserved at the start of every drive for iolab's volume metadata
/// (header and two configuration copies); subdisks start at or after it.
pub const DATA_START_BYTES: u64 = 135_168;

/// Subdisks lie within the first PiB of a drive: the bound keeps every
/// sum of subdisk sizes a plex or volume makes (a configuration copy holds
/// fewer than 2^12 subdisks) far from overflowing a `u64`.
pub const SUBDISK_END_BYTES_MAX: u64 = 1 << 50;

/// A configuration with every size and offset decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    pub drives: Vec<DriveLayout>,
    pub volumes: Vec<VolumeLayout>,
    /// Objects whose state is not up, as configured or saved.
    pub states: Vec<(String, State)>,
    /// Revive progress of plexes and subdisks: (name, bytes revived).
    pub progress: Vec<(String, u64)>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DriveLayout {
    pub name: String,
    /// The device path as written in the configuration.
    pub device: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VolumeLayout {
    pub name: String,
    pub read_policy: ReadPolicySpec,
    pub plexes: Vec<PlexLayout>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlexLayout {
    pub name: String,
    pub org: Org,
    /// Subdisks in plex order (by plex offset for concat plexes).
    pub subdisks: Vec<SdLayout>,
    /// RAID-5: index into [`Layout::drives`] of the drive holding the
    /// plex's stripe log (all of it after the metadata area).
    pub log_drive: Option<usize>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SdLayout {
    pub name: String,
    /// Index into [`Layout::drives`].
    pub drive: usize,
    pub drive_offset_bytes: u64,
    pub length_bytes: u64,
}

/// A placed subdisk, remembered to detect overlaps.
struct Placed {
    start: u64,
    end: u64,
    name: String,
    line: usize,
}

/// Lays `config` out on drives whose sizes in bytes are `drive_bytes`
/// (keyed by drive name; a missing drive counts as size 0).
pub fn resolve(config: &Config, drive_bytes: &HashMap<String, u64>) -> Result<Layout, ConfigError> {
    let drives: Vec<DriveLayout> = config
        .drives
        .iter()
        .map(|d| DriveLayout { name: d.name.clone(), device: d.device.clone() })
        .collect();
    let mut placed: HashMap<String, Vec<Placed>> = HashMap::new();
    let mut volumes = Vec::new();
    for volume in &config.volumes {
        let mut plexes = Vec::new();
        for plex in &volume.plexes {
            let mut sds = Vec::new();
            for sd in &plex.subdisks {
                let size = drive_bytes.get(&sd.drive).copied().unwrap_or(0);
                let on_drive = placed.entry(sd.drive.clone()).or_default();
                let (start, length) = place(sd, size, on_drive)?;
                let drive = drives.iter().position(|d| d.name == sd.drive).ok_or_else(|| {
                    ConfigError::UnknownDrive { line: sd.line, sd: sd.name.clone(), drive: sd.drive.clone() }
                })?;
                sds.push((
                    sd,
                    SdLayout {
                        name: sd.name.clone(),
                        drive,
                        drive_offset_bytes: start,
                        length_bytes: length,
                    },
                ));
            }
            let subdisks = order_subdisks(&plex.name, plex.line, &plex.org, sds)?;
            let log_drive = match &plex.log_drive {
                Some(name) => Some(log_drive(config, &drives, plex.line, &plex.name, name)?),
                None => None,
            };
            plexes.push(PlexLayout { name: plex.name.clone(), org: plex.org, subdisks, log_drive });
        }
        volumes.push(VolumeLayout {
            name: volume.name.clone(),
            read_policy: volume.read_policy.clone(),
            plexes,
        });
    }
    let states = config.states.iter().map(|s| (s.name.clone(), s.state)).collect();
    let progress = config.progress.iter().map(|p| (p.name.clone(), p.revived_bytes)).collect();
    Ok(Layout { drives, volumes, states, progress })
}

/// The index of a plex's log drive, which must exist and hold no subdisk.
fn log_drive(
    config: &Config,
    drives: &[DriveLayout],
    line: usize,
    plex: &str,
    name: &str,
) -> Result<usize, ConfigError> {
    let syntax = |problem: String| ConfigError::Syntax { line, problem };
    let index = drives
        .iter()
        .position(|d| d.name == name)
        .ok_or_else(|| syntax(format!("plex {plex}: log drive '{name}' is not defined by a drive line")))?;
    let used =
        config.volumes.iter().flat_map(|v| &v.plexes).flat_map(|p| &p.subdisks).find(|sd| sd.drive == name);
    if let Some(sd) = used {
        return Err(syntax(format!(
            "plex {plex}: log drive '{name}' also holds subdisk {}; a log needs a drive of its own",
            sd.name
        )));
    }
    Ok(index)
}

/// Decides where `sd` goes on its drive and how long it is.
fn place(sd: &SdSpec, drive_size: u64, on_drive: &mut Vec<Placed>) -> Result<(u64, u64), ConfigError> {
    let too_small = |problem: String| ConfigError::DriveTooSmall {
        line: sd.line,
        sd: sd.name.clone(),
        drive: sd.drive.clone(),
        problem,
    };
    on_drive.sort_by_key(|p| p.start);
    let free = free_areas(on_drive, drive_size);
    let (start, length) = match (sd.drive_offset_bytes, sd.length_bytes) {
        (Some(offset), _) if offset < DATA_START_BYTES => {
            return Err(too_small(format!(
                "driveoffset {offset} lies in the metadata area (data starts at byte {DATA_START_BYTES})"
            )))
        }
        (Some(offset), 0) => {
            let area = free.iter().find(|a| a.0 <= offset && offset < a.1);
            let end = area.map(|a| a.1).ok_or_else(|| too_small(format!("byte {offset} is not free")))?;
            (offset, end - offset)
        }
        (Some(offset), length) => (offset, length),
        (None, 0) => {
            let largest = free.iter().max_by_key(|a| a.1 - a.0).filter(|a| a.1 > a.0);
            let area = largest.ok_or_else(|| too_small("the drive has no free space left".into()))?;
            (area.0, area.1 - area.0)
        }
        (None, length) => {
            let area = free.iter().find(|a| a.1 - a.0 >= length);
            let largest = free.iter().map(|a| a.1 - a.0).max().unwrap_or(0);
            let area = area.ok_or_else(|| {
                too_small(format!("needs {length} bytes, the largest free area is {largest} bytes"))
            })?;
            (area.0, length)
        }
    };
    let end = start.saturating_add(length);
    if end > SUBDISK_END_BYTES_MAX {
        return Err(too_small(format!(
            "it would end at byte {end}; iolab places subdisks within the first {SUBDISK_END_BYTES_MAX} bytes \
             (1 PiB) of a drive"
        )));
    }
    if end > drive_size {
        return Err(too_small(format!("it ends at byte {end}, the drive has {drive_size} bytes")));
    }
    if let Some(other) = on_drive.iter().find(|p| p.start < end && start < p.end) {
        return Err(ConfigError::Overlap {
            line: sd.line,
            sd: sd.name.clone(),
            drive: sd.drive.clone(),
            start,
            end,
            other: other.name.clone(),
            other_line: other.line,
        });
    }
    on_drive.push(Placed { start, end, name: sd.name.clone(), line: sd.line });
    Ok((start, length))
}

/// Free byte ranges of a drive, given its placed subdisks sorted by start.
fn free_areas(placed: &[Placed], drive_size: u64) -> Vec<(u64, u64)> {
    let mut areas = Vec::new();
    let mut cursor = DATA_START_BYTES;
    for p in placed {
        if p.start > cursor {
            areas.push((cursor, p.start));
        }
        cursor = cursor.max(p.end);
    }
    if drive_size > cursor {
        areas.push((cursor, drive_size));
    }
    areas
}

/// Puts a plex's subdisks in plex order and checks the plex's rules.
fn order_subdisks(
    plex: &str,
    line: usize,
    org: &Org,
    mut sds: Vec<(&SdSpec, SdLayout)>,
) -> Result<Vec<SdLayout>, ConfigError> {
    let bad = |problem: String| ConfigError::BadPlex { line, plex: plex.to_string(), problem };
    match org {
        Org::Concat => {
            let mut next = 0;
            let mut with_offsets = Vec::new();
            for (spec, sd) in sds {
                let offset = spec.plex_offset_bytes.unwrap_or(next);
                next = offset.saturating_add(sd.length_bytes);
                with_offsets.push((offset, spec, sd));
            }
            with_offsets.sort_by_key(|(offset, _, _)| *offset);
            let mut expected = 0;
            for (offset, spec, sd) in &with_offsets {
                if *offset != expected {
                    return Err(bad(format!(
                        "subdisk '{}' (line {}) starts at plex offset {offset}, expected {expected}: \
                         concat plexes may have no holes or overlaps",
                        sd.name, spec.line
                    )));
                }
                expected = expected.saturating_add(sd.length_bytes);
            }
            Ok(with_offsets.into_iter().map(|(_, _, sd)| sd).collect())
        }
        Org::Striped { stripe_bytes } | Org::Raid5 { stripe_bytes, .. } => {
            check_equal(org, &sds)?;
            for (index, (spec, sd)) in sds.iter().enumerate() {
                let expected = index as u64 * stripe_bytes;
                if spec.plex_offset_bytes.is_some_and(|o| o != expected) {
                    return Err(bad(format!(
                        "subdisk '{}' (line {}) has plexoffset {:?}; in a {} plex subdisk {index} must be at {expected}",
                        sd.name,
                        spec.line,
                        spec.plex_offset_bytes,
                        org.kind()
                    )));
                }
                if sd.length_bytes < *stripe_bytes {
                    return Err(bad(format!(
                        "subdisk '{}' is shorter than one stripe ({stripe_bytes} bytes)",
                        sd.name
                    )));
                }
            }
            Ok(sds.drain(..).map(|(_, sd)| sd).collect())
        }
    }
}

fn check_equal(org: &Org, sds: &[(&SdSpec, SdLayout)]) -> Result<(), ConfigError> {
    let Some((first_spec, first)) = sds.first() else { return Ok(()) };
    match sds.iter().find(|(_, sd)| sd.length_bytes != first.length_bytes) {
        Some((spec, sd)) => Err(ConfigError::UnequalSubdisks {
            line: spec.line,
            sd: sd.name.clone(),
            length_bytes: sd.length_bytes,
            first: first.name.clone(),
            first_line: first_spec.line,
            first_length_bytes: first.length_bytes,
            org: org.kind(),
        }),
        None => Ok(()),
    }
}

impl Layout {
    /// Where the last subdisk on drive `drive` (an index into
    /// [`Layout::drives`]) ends; the metadata area's end when it holds
    /// none: the size a drive that is not present is bound with.
    pub fn extent_end_bytes(&self, drive: usize) -> u64 {
        let sds = self.volumes.iter().flat_map(|v| &v.plexes).flat_map(|p| &p.subdisks);
        sds.filter(|sd| sd.drive == drive)
            .map(|sd| sd.drive_offset_bytes.saturating_add(sd.length_bytes))
            .max()
            .unwrap_or(DATA_START_BYTES)
    }

    /// The layout in configuration file syntax, every size and offset
    /// explicit (in 512-byte sectors) and `states` appended, so that
    /// parsing and resolving it gives this layout back.
    pub fn to_config_text(&self, states: &[(String, State)], progress: &[(String, u64)]) -> String {
        let mut text = String::new();
        for drive in &self.drives {
            text += &format!("drive {} device {}\n", drive.name, drive.device);
        }
        for volume in &self.volumes {
            text += &format!("volume {}", volume.name);
            if let ReadPolicySpec::Prefer(plex) = &volume.read_policy {
                text += &format!(" readpol prefer {plex}");
            }
            text += "\n";
            for plex in &volume.plexes {
                text += &format!("plex name {} org {}", plex.name, org_text(&plex.org));
                if let Some(d) = plex.log_drive {
                    text += &format!(" log {}", self.drives[d].name);
                }
                text += "\n";
                for sd in &plex.subdisks {
                    text += &format!(
                        "sd name {} drive {} length {}s driveoffset {}s\n",
                        sd.name,
                        self.drives[sd.drive].name,
                        sd.length_bytes / 512,
                        sd.drive_offset_bytes / 512
                    );
                }
            }
        }
        for (name, state) in states {
            text += &format!("state {name} {state}\n");
        }
        for (name, bytes) in progress {
            text += &format!("revived {name} {}s\n", bytes / 512);
        }
        text
    }
}

fn org_text(org: &Org) -> String {
    match org {
        Org::Concat => "concat".into(),
        Org::Striped { stripe_bytes } => format!("striped {}s", stripe_bytes / 512),
        Org::Raid5 { stripe_bytes, layout } => {
            let layout = match layout {
                crate::geometry::ParityLayout::LeftAsymmetric => "la",
                crate::geometry::ParityLayout::LeftSymmetric => "ls",
            };
            format!("raid5 {}s layout {layout}", stripe_bytes / 512)
        }
    }
}
