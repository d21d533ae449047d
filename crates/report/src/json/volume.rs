//! A volume's objects, states and counters, as `iolab run`'s document
//! carries them; and `iolab volume list --json`: schema
//! `iolab-volume-list`, version 1, a list of them.

use serde::Serialize;

pub const SCHEMA: &str = "iolab-volume-list";
pub const VERSION: u32 = 1;

/// `iolab volume list --json`: every volume of the set, with the counters
/// accumulated since creation or the last `resetstats`.
#[derive(Clone, Debug, Serialize)]
pub struct VolumeListDocument {
    pub schema: &'static str,
    pub version: u32,
    pub iolab_version: String,
    /// The machine and command line behind the document.
    pub host: super::Host,
    pub volumes: Vec<Volume>,
}

impl VolumeListDocument {
    pub fn new(
        iolab_version: &str,
        host: super::Host,
        volumes: &[volume::VolumeReport],
    ) -> VolumeListDocument {
        VolumeListDocument {
            schema: SCHEMA,
            version: VERSION,
            iolab_version: iolab_version.into(),
            host,
            volumes: volumes.iter().map(Volume::from).collect(),
        }
    }

    pub fn to_json(&self) -> String {
        super::pretty(self)
    }
}

/// A device's counters (a run's target, a volume, a subdisk, a drive).
#[derive(Clone, Debug, Serialize)]
pub struct DeviceCounters {
    pub reads: u64,
    pub writes: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub flushes: u64,
    pub errors: u64,
}

impl From<&device::StatsSnapshot> for DeviceCounters {
    fn from(s: &device::StatsSnapshot) -> DeviceCounters {
        DeviceCounters {
            reads: s.reads,
            writes: s.writes,
            bytes_read: s.bytes_read,
            bytes_written: s.bytes_written,
            flushes: s.flushes,
            errors: s.errors,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Volume {
    pub name: String,
    pub size_bytes: u64,
    pub stats: DeviceCounters,
    pub recovered_reads: u64,
    pub plexes: Vec<Plex>,
    pub drives: Vec<Drive>,
}

impl From<&volume::VolumeReport> for Volume {
    fn from(v: &volume::VolumeReport) -> Volume {
        Volume {
            name: v.name.clone(),
            size_bytes: v.size_bytes,
            stats: DeviceCounters::from(&v.stats),
            recovered_reads: v.recovered_reads,
            plexes: v.plexes.iter().map(Plex::from).collect(),
            drives: v.drives.iter().map(Drive::from).collect(),
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Plex {
    pub name: String,
    pub org: Org,
    pub state: State,
    pub size_bytes: u64,
    pub revived_bytes: u64,
    pub counters: PlexCounters,
    pub subdisks: Vec<Subdisk>,
}

impl From<&volume::PlexReport> for Plex {
    fn from(p: &volume::PlexReport) -> Plex {
        Plex {
            name: p.name.clone(),
            org: p.org.into(),
            state: p.state.into(),
            size_bytes: p.size_bytes,
            revived_bytes: p.revived_bytes,
            counters: PlexCounters::from(&p.counters),
            subdisks: p.subdisks.iter().map(Subdisk::from).collect(),
        }
    }
}

/// A plex organisation: `"Concat"`, `{"Striped": {...}}` or
/// `{"Raid5": {...}}` (serde's external tagging, as version 1 of the run
/// document first printed it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Org {
    Concat,
    Striped { stripe_bytes: u64 },
    Raid5 { stripe_bytes: u64, layout: ParityLayout },
}

impl From<volume::Org> for Org {
    fn from(o: volume::Org) -> Org {
        match o {
            volume::Org::Concat => Org::Concat,
            volume::Org::Striped { stripe_bytes } => Org::Striped { stripe_bytes },
            volume::Org::Raid5 { stripe_bytes, layout } => Org::Raid5 { stripe_bytes, layout: layout.into() },
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum ParityLayout {
    LeftAsymmetric,
    LeftSymmetric,
}

impl From<volume::ParityLayout> for ParityLayout {
    fn from(l: volume::ParityLayout) -> ParityLayout {
        match l {
            volume::ParityLayout::LeftAsymmetric => ParityLayout::LeftAsymmetric,
            volume::ParityLayout::LeftSymmetric => ParityLayout::LeftSymmetric,
        }
    }
}

/// An object's state, capitalised as first printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum State {
    Up,
    Down,
    Stale,
    Initializing,
}

impl From<volume::State> for State {
    fn from(s: volume::State) -> State {
        match s {
            volume::State::Up => State::Up,
            volume::State::Down => State::Down,
            volume::State::Stale => State::Stale,
            volume::State::Initializing => State::Initializing,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct PlexCounters {
    pub reads: u64,
    pub writes: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub multiblock: u64,
    pub multistripe: u64,
    pub recovered_reads: u64,
    pub degraded_writes: u64,
    pub parityless_writes: u64,
}

impl From<&volume::PlexCountersSnapshot> for PlexCounters {
    fn from(c: &volume::PlexCountersSnapshot) -> PlexCounters {
        PlexCounters {
            reads: c.reads,
            writes: c.writes,
            bytes_read: c.bytes_read,
            bytes_written: c.bytes_written,
            multiblock: c.multiblock,
            multistripe: c.multistripe,
            recovered_reads: c.recovered_reads,
            degraded_writes: c.degraded_writes,
            parityless_writes: c.parityless_writes,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Subdisk {
    pub name: String,
    pub drive: String,
    pub state: State,
    pub drive_offset_bytes: u64,
    pub plex_offset_bytes: u64,
    pub length_bytes: u64,
    pub revived_bytes: u64,
    pub stats: DeviceCounters,
}

impl From<&volume::SubdiskReport> for Subdisk {
    fn from(s: &volume::SubdiskReport) -> Subdisk {
        Subdisk {
            name: s.name.clone(),
            drive: s.drive.clone(),
            state: s.state.into(),
            drive_offset_bytes: s.drive_offset_bytes,
            plex_offset_bytes: s.plex_offset_bytes,
            length_bytes: s.length_bytes,
            revived_bytes: s.revived_bytes,
            stats: DeviceCounters::from(&s.stats),
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Drive {
    pub name: String,
    pub device: String,
    pub state: State,
    /// Its device was not there at assembly.
    pub missing: bool,
    pub stats: DeviceCounters,
}

impl From<&volume::ObjectReport> for Drive {
    fn from(d: &volume::ObjectReport) -> Drive {
        Drive {
            name: d.name.clone(),
            device: d.device.clone(),
            state: d.state.into(),
            missing: d.missing,
            stats: DeviceCounters::from(&d.stats),
        }
    }
}
