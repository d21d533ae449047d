//! A volume: one plex, or several plexes holding the same data (a
//! mirror), presented as a [`Device`]. Binding turns a [`Layout`] and open
//! drives into volumes.
//!
//! Reads go to one plex (round-robin or preferred) and move on to the
//! next when it fails; where no one plex is up for the whole request (each
//! has a subdisk out of service in it), the request is split at subdisk
//! boundaries and each piece read from a plex that is up for it. Writes go
//! to every plex that is up and are acknowledged only when every byte is
//! held by a plex that is up for it; a subdisk that misses a write is out
//! of service (stale or down) until revived, so it is never read. A flush
//! reaches every drive; a drive whose flush fails goes down, and a volume
//! left without a copy of some byte is poisoned. The volume never returns
//! data it is not sure of.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use device::{Backend, Checked, Device, DeviceError, Front, Geometry, Op, Result, Stats, StatsSnapshot};

use crate::config::ReadPolicySpec;
use crate::error::VolumeError;
use crate::geometry::Org;
use crate::lock::RangeLock;
use crate::object::{
    Drive, ObjectKind, ObjectReport, PlexCounters, PlexCountersSnapshot, State, StateCell, Subdisk,
};
use crate::plex::{io_error, Plex};
use crate::raid5::ParityReport;
use crate::resolve::{Layout, PlexLayout, VolumeLayout};

/// How a mirrored volume picks the plex a read goes to first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadPolicy {
    RoundRobin,
    /// Index of the preferred plex.
    Prefer(usize),
}

pub struct Volume {
    /// Name, geometry, counters and the poison latch: a volume is poisoned
    /// when a flush failed on a drive whose data no other plex holds (see
    /// `flush_drives`).
    front: Front,
    pub(crate) name: String,
    pub(crate) size_bytes: u64,
    pub(crate) plexes: Vec<Plex>,
    pub(crate) drives: Vec<Arc<Drive>>,
    read_policy: ReadPolicy,
    next_plex: AtomicUsize,
    recovered_reads: AtomicU64,
    /// Byte ranges under write, so mirrored plexes see writes in one order.
    pub(crate) writes: RangeLock,
    /// What the volume did on its own (a drive taken down after a failed
    /// flush), for the caller to report; at most [`EVENTS_MAX`] kept.
    events: Mutex<Vec<String>>,
}

/// At most this many events are kept between two [`Volume::take_events`].
pub const EVENTS_MAX: usize = 32;

/// Counters and states of a volume and everything below it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VolumeReport {
    pub name: String,
    pub size_bytes: u64,
    pub stats: StatsSnapshot,
    /// Reads that failed on one plex and were served by another.
    pub recovered_reads: u64,
    pub plexes: Vec<PlexReport>,
    pub drives: Vec<ObjectReport>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlexReport {
    pub name: String,
    pub org: Org,
    pub state: State,
    pub size_bytes: u64,
    /// While a revive runs: plex bytes from the start already current.
    pub revived_bytes: u64,
    pub counters: PlexCountersSnapshot,
    pub subdisks: Vec<SubdiskReport>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubdiskReport {
    pub name: String,
    pub drive: String,
    pub state: State,
    pub drive_offset_bytes: u64,
    /// Where the subdisk's first byte lies in the plex (for striped and
    /// RAID-5 plexes, the start of its first stripe unit, as Vinum shows).
    pub plex_offset_bytes: u64,
    pub length_bytes: u64,
    /// While a revive runs: subdisk bytes from the start already current.
    pub revived_bytes: u64,
    pub stats: StatsSnapshot,
}

/// Binds every volume of `layout` to open drives (keyed by drive name).
/// Drives shared by several volumes are shared objects: a drive set down
/// through one volume is down for all.
pub fn bind(
    layout: &Layout,
    devices: &HashMap<String, Arc<dyn Device>>,
) -> Result<Vec<Arc<Volume>>, VolumeError> {
    let mut drives = Vec::with_capacity(layout.drives.len());
    for spec in &layout.drives {
        let dev =
            devices.get(&spec.name).ok_or_else(|| VolumeError::MissingDrive { drive: spec.name.clone() })?;
        drives.push(Arc::new(Drive::new(spec.name.clone(), Arc::clone(dev))));
    }
    let volumes: Vec<Arc<Volume>> =
        layout.volumes.iter().map(|v| Volume::bind(v, &drives).map(Arc::new)).collect::<Result<_, _>>()?;
    for (name, state) in &layout.states {
        // An object belongs to one volume (a drive possibly to several);
        // it is an error only when no volume holds it.
        let held = volumes.iter().filter(|v| v.set_state(name, *state).is_ok()).count();
        if held == 0 {
            let volume = layout.volumes.first().map(|v| v.name.clone()).unwrap_or_default();
            return Err(VolumeError::UnknownObject { volume, name: name.clone() });
        }
    }
    // After the states: progress belongs to objects that are not up.
    for (name, bytes) in &layout.progress {
        if !volumes.iter().any(|v| v.restore_progress(name, *bytes)) {
            let volume = layout.volumes.first().map(|v| v.name.clone()).unwrap_or_default();
            return Err(VolumeError::UnknownObject { volume, name: name.clone() });
        }
    }
    Ok(volumes)
}

/// Parses nothing and opens nothing: lays `config` out on the given open
/// drives (their sizes decide `length 0` and default offsets) and binds it.
pub fn build(
    config: &crate::Config,
    devices: &HashMap<String, Arc<dyn Device>>,
) -> Result<Vec<Arc<Volume>>, VolumeError> {
    for drive in &config.drives {
        if !devices.contains_key(&drive.name) {
            return Err(VolumeError::MissingDrive { drive: drive.name.clone() });
        }
    }
    let sizes = devices.iter().map(|(name, dev)| (name.clone(), dev.size_bytes())).collect();
    bind(&crate::resolve(config, &sizes)?, devices)
}

fn bind_plex(
    volume: &str,
    spec: &PlexLayout,
    drives: &[Arc<Drive>],
    sector_bytes: u64,
) -> Result<Plex, VolumeError> {
    let invalid = |problem: String| VolumeError::Invalid { volume: volume.to_string(), problem };
    // A layout may come from outside the parser (deserialized): check the
    // rules the geometry relies on.
    if spec.subdisks.len() < spec.org.subdisks_min() {
        return Err(invalid(format!(
            "plex {}: a {} plex needs at least {} subdisks, it has {}",
            spec.name,
            spec.org.kind(),
            spec.org.subdisks_min(),
            spec.subdisks.len()
        )));
    }
    if let Some(stripe_bytes) = spec.org.stripe_bytes() {
        if stripe_bytes == 0 || stripe_bytes % sector_bytes != 0 {
            return Err(invalid(format!(
                "plex {}: stripe of {stripe_bytes} bytes is not a multiple of the {sector_bytes}-byte sectors",
                spec.name
            )));
        }
    }
    let sds = (spec.subdisks.iter())
        .map(|sd| bind_subdisk(volume, sd, drives, sector_bytes))
        .collect::<Result<Vec<_>, _>>()?;
    let lengths: Vec<u64> = sds.iter().map(|sd| sd.length_bytes).collect();
    let size_bytes = spec.org.plex_bytes(&lengths);
    Ok(Plex {
        name: spec.name.clone(),
        org: spec.org,
        sds,
        size_bytes,
        state: StateCell::new(State::Up),
        counters: PlexCounters::default(),
        rows: RangeLock::default(),
        revived_bytes: AtomicU64::new(0),
        wal: std::sync::OnceLock::new(),
        log_drive: match spec.log_drive {
            Some(d) => Some(Arc::clone(
                drives.get(d).ok_or_else(|| invalid(format!("plex {} has no log drive", spec.name)))?,
            )),
            None => None,
        },
    })
}

/// A subdisk bound to its drive, which must hold it on whole sectors.
fn bind_subdisk(
    volume: &str,
    sd: &crate::resolve::SdLayout,
    drives: &[Arc<Drive>],
    sector_bytes: u64,
) -> Result<Subdisk, VolumeError> {
    let drive = drives.get(sd.drive).ok_or_else(|| VolumeError::Invalid {
        volume: volume.to_string(),
        problem: format!("subdisk {} has no drive", sd.name),
    })?;
    let end = sd.drive_offset_bytes.saturating_add(sd.length_bytes);
    if end > drive.dev.size_bytes()
        || sd.drive_offset_bytes % sector_bytes != 0
        || sd.length_bytes % sector_bytes != 0
    {
        return Err(VolumeError::BadDrive {
            drive: drive.name.clone(),
            problem: format!(
                "subdisk {} (bytes {}..{end}) must lie inside the drive ({} bytes) on {sector_bytes}-byte sectors",
                sd.name,
                sd.drive_offset_bytes,
                drive.dev.size_bytes()
            ),
        });
    }
    Ok(Subdisk {
        name: sd.name.clone(),
        drive: Arc::clone(drive),
        drive_offset_bytes: sd.drive_offset_bytes,
        length_bytes: sd.length_bytes,
        state: StateCell::new(State::Up),
        stats: Stats::default(),
        revived_bytes: AtomicU64::new(0),
    })
}

impl Volume {
    fn bind(spec: &VolumeLayout, all_drives: &[Arc<Drive>]) -> Result<Volume, VolumeError> {
        let invalid = |problem: String| VolumeError::Invalid { volume: spec.name.clone(), problem };
        let mut drives: Vec<Arc<Drive>> = Vec::new();
        for sd in spec.plexes.iter().flat_map(|p| &p.subdisks) {
            let drive = all_drives
                .get(sd.drive)
                .ok_or_else(|| invalid(format!("subdisk {} has no drive", sd.name)))?;
            if !drives.iter().any(|d| Arc::ptr_eq(d, drive)) {
                drives.push(Arc::clone(drive));
            }
        }
        let sector_bytes = drives.iter().map(|d| d.dev.sector_bytes()).max().unwrap_or(512);
        let buffer_align = drives.iter().map(|d| d.dev.buffer_align()).max().unwrap_or(1);
        // A RAID-5 plex's log drive is one of the volume's drives too (set
        // down, missing, revived, listed), though it holds no subdisk and
        // no data request reaches it.
        for index in spec.plexes.iter().filter_map(|p| p.log_drive) {
            let drive =
                all_drives.get(index).ok_or_else(|| invalid(format!("log drive #{index} is not defined")))?;
            if !drives.iter().any(|d| Arc::ptr_eq(d, drive)) {
                drives.push(Arc::clone(drive));
            }
        }
        let plexes = spec
            .plexes
            .iter()
            .map(|p| bind_plex(&spec.name, p, all_drives, u64::from(sector_bytes)))
            .collect::<Result<Vec<_>, _>>()?;
        let size_bytes = plexes.iter().map(|p| p.size_bytes).min().unwrap_or(0);
        if size_bytes == 0 {
            return Err(invalid("the volume has no plex with usable space".into()));
        }
        let read_policy = match &spec.read_policy {
            ReadPolicySpec::RoundRobin => ReadPolicy::RoundRobin,
            ReadPolicySpec::Prefer(name) => ReadPolicy::Prefer(
                plexes
                    .iter()
                    .position(|p| &p.name == name)
                    .ok_or_else(|| invalid(format!("no plex named {name}")))?,
            ),
        };
        let geometry = Geometry { size_bytes, sector_bytes, buffer_align };
        Ok(Volume {
            front: Front::new(spec.name.clone(), geometry),
            name: spec.name.clone(),
            size_bytes,
            plexes,
            drives,
            read_policy,
            next_plex: AtomicUsize::new(0),
            recovered_reads: AtomicU64::new(0),
            writes: RangeLock::default(),
            events: Mutex::new(Vec::new()),
        })
    }

    /// Sets the state of the drive, plex or subdisk called `name`, as
    /// Vinum's `setstate`: forced, no data is copied (use [`Volume::revive`]
    /// to bring an object back with current data). A drive that goes down
    /// or stale takes its subdisks stale, since they miss writes.
    pub fn set_state(&self, name: &str, state: State) -> Result<(), VolumeError> {
        if let Some(drive) = self.drives.iter().find(|d| d.name == name) {
            drive.state.set(state);
            if state != State::Up {
                // Its subdisks will miss writes: they stay out of service
                // after the drive returns, until revived from the start.
                self.subdisks_on(&drive.name).for_each(|sd| {
                    sd.state.set(State::Stale);
                    sd.revived_bytes.store(0, Relaxed);
                });
            }
        } else if let Some(plex) = self.plexes.iter().find(|p| p.name == name) {
            plex.state.set(state);
            plex.revived_bytes.store(0, Relaxed);
        } else if let Some(sd) = self.plexes.iter().flat_map(|p| &p.sds).find(|sd| sd.name == name) {
            sd.state.set(state);
            sd.revived_bytes.store(0, Relaxed);
        } else {
            return Err(VolumeError::UnknownObject { volume: self.name.clone(), name: name.to_string() });
        }
        Ok(())
    }

    /// Marks the drive called `name` missing and down (its subdisks stale);
    /// false when this volume has no such drive.
    pub(crate) fn mark_missing(&self, name: &str) -> bool {
        let Some(drive) = self.drives.iter().find(|d| d.name == name) else { return false };
        drive.missing.store(true, Relaxed);
        self.set_state(name, State::Down).is_ok()
    }

    pub(crate) fn subdisks_on<'a>(&'a self, drive: &'a str) -> impl Iterator<Item = &'a Subdisk> + 'a {
        self.plexes.iter().flat_map(|p| &p.sds).filter(move |sd| sd.drive.name == drive)
    }

    /// The state of the drive, plex or subdisk called `name`.
    pub fn state(&self, name: &str) -> Option<State> {
        let drive = self.drives.iter().find(|d| d.name == name).map(|d| d.state.get());
        let plex = || self.plexes.iter().find(|p| p.name == name).map(|p| p.state.get());
        let sd =
            || self.plexes.iter().flat_map(|p| &p.sds).find(|sd| sd.name == name).map(|sd| sd.state.get());
        drive.or_else(plex).or_else(sd)
    }

    /// Names and states of every drive, plex and subdisk that is not up.
    pub fn states_not_up(&self) -> Vec<(String, State)> {
        let drives = self.drives.iter().map(|d| (d.name.clone(), d.state.get()));
        let plexes = self.plexes.iter().map(|p| (p.name.clone(), p.state.get()));
        let sds = self.plexes.iter().flat_map(|p| &p.sds).map(|sd| (sd.name.clone(), sd.state.get()));
        drives.chain(plexes).chain(sds).filter(|(_, state)| *state != State::Up).collect()
    }

    /// Takes down every RAID-5 plex with more than one subdisk out of
    /// service (RAID-5 survives one), so its I/O fails with a clear error
    /// instead of touching rows it cannot rebuild. Returns what it did.
    pub(crate) fn down_unrecoverable_plexes(&self) -> Vec<String> {
        let mut said = Vec::new();
        for plex in self.plexes.iter().filter(|p| p.raid5().is_some() && p.state.get() == State::Up) {
            let lost: Vec<&str> = plex
                .sds
                .iter()
                .filter(|sd| !sd.usable_at(0, sd.length_bytes))
                .map(|sd| sd.name.as_str())
                .collect();
            if lost.len() > 1 {
                plex.state.set(State::Down);
                said.push(format!(
                    "plex '{}' is down: subdisks {} are unavailable and RAID-5 survives the loss of one",
                    plex.name,
                    lost.join(", ")
                ));
            }
        }
        said
    }

    /// Checks the parity of every RAID-5 plex (every subdisk must be up).
    pub fn check_parity(&self) -> Result<Vec<ParityReport>> {
        self.plexes.iter().filter_map(|p| p.raid5().map(|g| p.check_parity(&g))).collect()
    }

    /// Recomputes the parity of every RAID-5 plex from its data.
    pub fn rebuild_parity(&self) -> Result<()> {
        self.plexes.iter().filter_map(|p| p.raid5().map(|g| p.rebuild_parity(&g))).collect()
    }

    /// The drives of the volume's RAID-5 plex, in subdisk order: the home
    /// devices of its write-ahead log. `None` when it has no RAID-5 plex or
    /// more than one.
    pub fn raid5_homes(&self) -> Option<Vec<Arc<dyn Device>>> {
        self.raid5_plex().map(|plex| plex.sds.iter().map(|sd| Arc::clone(&sd.drive.dev)).collect())
    }

    /// Indexes (in subdisk order, as in [`Volume::raid5_homes`]) of the
    /// RAID-5 plex's subdisks whose drive is not up (missing, damaged,
    /// down): homes a write-ahead log must not replay into, since what
    /// they hold is rebuilt from the others when they are revived.
    pub fn raid5_homes_down(&self) -> Vec<usize> {
        let Some(plex) = self.raid5_plex() else { return Vec::new() };
        (0..plex.sds.len()).filter(|&i| plex.sds[i].drive.state.get() != State::Up).collect()
    }

    /// The drive the configuration names as the RAID-5 plex's log drive
    /// (`plex org raid5 SIZE log DRIVE`), and whether it is in service
    /// (present and up): the stripe log lives on it after the metadata
    /// area.
    pub fn raid5_log_drive(&self) -> Option<(String, Arc<dyn Device>, bool)> {
        let drive = self.raid5_plex()?.log_drive.as_ref()?;
        let missing = drive.missing.load(std::sync::atomic::Ordering::Relaxed);
        Some((drive.name.clone(), Arc::clone(&drive.dev), !missing && drive.state.get() == State::Up))
    }

    /// Sends every row update of the RAID-5 plex through `wal` (made with
    /// [`Volume::raid5_homes`] as its homes) before it is written in place,
    /// so a crash between data and parity writes cannot leave a row whose
    /// parity lies. Replay the log before calling this.
    pub fn set_write_ahead_log(&self, wal: Arc<dyn device::WriteAheadLog>) -> Result<(), VolumeError> {
        let invalid =
            |problem: &str| VolumeError::Invalid { volume: self.name.clone(), problem: problem.to_string() };
        let plex =
            self.raid5_plex().ok_or_else(|| invalid("a write-ahead log needs exactly one RAID-5 plex"))?;
        plex.wal.set(wal).map_err(|_| invalid("its RAID-5 plex already has a write-ahead log"))
    }

    /// At a clean stop: the RAID-5 plex's write-ahead log, if any, flushes
    /// the drives and frees its records, leaving nothing to replay.
    pub fn checkpoint_write_ahead_log(&self) -> Result<(), device::DeviceError> {
        match self.raid5_plex().and_then(|p| p.wal.get()) {
            Some(wal) => wal.checkpoint(),
            None => Ok(()),
        }
    }

    fn raid5_plex(&self) -> Option<&Plex> {
        let mut raid5 = self.plexes.iter().filter(|p| p.raid5().is_some());
        match (raid5.next(), raid5.next()) {
            (Some(plex), None) => Some(plex),
            _ => None,
        }
    }

    pub fn report(&self) -> VolumeReport {
        VolumeReport {
            name: self.name.clone(),
            size_bytes: self.size_bytes,
            stats: self.stats().snapshot(),
            recovered_reads: self.recovered_reads.load(Relaxed),
            plexes: self.plexes.iter().map(plex_report).collect(),
            drives: self
                .drives
                .iter()
                .map(|d| ObjectReport {
                    name: d.name.clone(),
                    device: d.dev.name().to_string(),
                    state: d.state.get(),
                    missing: d.missing.load(Relaxed),
                    stats: d.stats.snapshot(),
                })
                .collect(),
        }
    }

    /// Zeroes every counter of the volume and the objects below it.
    pub fn reset_stats(&self) {
        self.stats().reset();
        self.recovered_reads.store(0, Relaxed);
        for plex in &self.plexes {
            plex.counters.reset();
            plex.sds.iter().for_each(|sd| sd.stats.reset());
        }
        self.drives.iter().for_each(|d| d.stats.reset());
    }

    /// Zeroes the counters of the object called `name` (with `recursive`,
    /// also of the plexes and subdisks below it) and returns the objects
    /// cleared; none when this volume has no such object.
    pub fn reset_object_stats(&self, name: &str, recursive: bool) -> Vec<(ObjectKind, String)> {
        let mut cleared = Vec::new();
        let reset_plex = |plex: &Plex, cleared: &mut Vec<(ObjectKind, String)>, below: bool| {
            plex.counters.reset();
            cleared.push((ObjectKind::Plex, plex.name.clone()));
            for sd in plex.sds.iter().filter(|_| below) {
                sd.stats.reset();
                cleared.push((ObjectKind::Subdisk, sd.name.clone()));
            }
        };
        if name == self.name {
            self.stats().reset();
            self.recovered_reads.store(0, Relaxed);
            cleared.push((ObjectKind::Volume, self.name.clone()));
            for plex in self.plexes.iter().filter(|_| recursive) {
                reset_plex(plex, &mut cleared, true);
            }
        } else if let Some(plex) = self.plexes.iter().find(|p| p.name == name) {
            reset_plex(plex, &mut cleared, recursive);
        } else if let Some(sd) = self.plexes.iter().flat_map(|p| &p.sds).find(|sd| sd.name == name) {
            sd.stats.reset();
            cleared.push((ObjectKind::Subdisk, sd.name.clone()));
        } else if let Some(drive) = self.drives.iter().find(|d| d.name == name) {
            drive.stats.reset();
            cleared.push((ObjectKind::Drive, drive.name.clone()));
        }
        cleared
    }

    /// Plex indexes in the order the read policy tries them.
    fn plex_order(&self) -> impl Iterator<Item = usize> {
        let count = self.plexes.len();
        let first = match self.read_policy {
            ReadPolicy::RoundRobin => self.next_plex.fetch_add(1, Relaxed) % count,
            ReadPolicy::Prefer(index) => index,
        };
        (0..count).map(move |k| (first + k) % count)
    }

    /// A read goes whole to the first plex (in the policy's order) that can
    /// serve all of it; when none can (each mirror has a subdisk out of
    /// service somewhere in the range) or those that could failed, it is
    /// split at subdisk and stripe-unit boundaries and each piece served
    /// by a plex that is up for it.
    fn read_plexes(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let len = buf.len() as u64;
        let mut failure = None;
        for index in self.plex_order() {
            let plex = &self.plexes[index];
            if !plex.readable(offset, len) {
                continue;
            }
            match plex.read(buf, offset) {
                Ok(()) if failure.is_some() => {
                    self.recovered_reads.fetch_add(1, Relaxed);
                    return Ok(());
                }
                Ok(()) => return Ok(()),
                Err(err) => failure = Some(err),
            }
        }
        if self.plexes.len() == 1 {
            return Err(failure.unwrap_or_else(|| self.no_plex(Op::Read, offset, len)));
        }
        self.read_pieces(buf, offset, None)?;
        if failure.is_some() {
            self.recovered_reads.fetch_add(1, Relaxed);
        }
        Ok(())
    }

    /// Reads `buf` at `offset` piece by piece, each piece the longest run
    /// one plex (never `skip`) can serve from there; a piece whose read
    /// fails goes to the next plex that can serve it. Pieces end on
    /// subdisk or stripe-unit boundaries, so there are at most as many as
    /// the request crosses.
    pub(crate) fn read_pieces(&self, buf: &mut [u8], offset: u64, skip: Option<usize>) -> Result<()> {
        let len = buf.len() as u64;
        let mut done = 0;
        while done < len {
            let at = offset + done;
            let mut runs: Vec<(usize, u64)> = self
                .plex_order()
                .filter(|&i| Some(i) != skip)
                .map(|i| (i, self.plexes[i].readable_run(at, len - done)))
                .filter(|&(_, run)| run > 0)
                .collect();
            // Stable: among equal runs the read policy's order stands.
            runs.sort_by_key(|&(_, run)| std::cmp::Reverse(run));
            let mut failure = None;
            let mut served = 0;
            for (index, run) in runs {
                match self.plexes[index].read(&mut buf[done as usize..][..run as usize], at) {
                    Ok(()) => {
                        served = run;
                        break;
                    }
                    Err(err) => failure = Some(err),
                }
            }
            if served == 0 {
                return Err(failure.unwrap_or_else(|| self.no_plex(Op::Read, at, len - done)));
            }
            done += served;
        }
        Ok(())
    }

    /// True when every byte of `offset..offset+len` has a plex (other than
    /// those in `skip`) that is up for it: what a write must leave behind
    /// to be acknowledged, and what a volume needs after a drive fails to
    /// still hold all its data.
    pub(crate) fn covered(&self, offset: u64, len: u64, skip: &[usize]) -> bool {
        let end = offset + len;
        let mut at = offset;
        while at < end {
            let runs = self.plexes.iter().enumerate().filter(|(i, _)| !skip.contains(i));
            let run = runs.map(|(_, p)| p.readable_run(at, end - at)).max().unwrap_or(0);
            if run == 0 {
                return false;
            }
            at += run;
        }
        true
    }

    /// A write goes to every plex that takes it; it is acknowledged when
    /// every byte of it is held by a plex that is up for that byte. A
    /// concat or striped plex that misses a piece has that piece's subdisk
    /// out of service already (skipped because it was, or taken down by
    /// the failed write), so it never serves the piece. A RAID-5 plex can
    /// fail without a subdisk going down (its stripe log failed), so it
    /// never counts as holding a write it failed, and in a mirror it goes
    /// stale.
    fn write_plexes(&self, buf: &[u8], offset: u64) -> Result<()> {
        let len = buf.len() as u64;
        let _range = (self.plexes.len() > 1).then(|| self.writes.lock(offset, offset + len));
        let mut failure = None;
        let mut failed_raid5 = Vec::new();
        for (index, plex) in self.plexes.iter().enumerate().filter(|(_, p)| p.writable(offset)) {
            if let Err(err) = plex.write(buf, offset) {
                if plex.raid5().is_some() {
                    failed_raid5.push(index);
                }
                failure.get_or_insert(err);
            }
        }
        let held = self.covered(offset, len, &failed_raid5);
        if held && self.plexes.len() > 1 {
            // The others hold the data this plex missed.
            failed_raid5.iter().for_each(|&i| self.plexes[i].state.set(State::Stale));
        }
        if held {
            return Ok(());
        }
        Err(failure.unwrap_or_else(|| self.no_plex(Op::Write, offset, len)))
    }

    /// Records something the volume did on its own for [`Volume::take_events`].
    fn event(&self, what: String) {
        let mut events = self.events.lock().unwrap_or_else(|e| e.into_inner());
        if events.len() < EVENTS_MAX {
            events.push(what);
        }
    }

    /// What the volume did on its own since the last call (a drive taken
    /// down after a failed flush, the volume poisoned), oldest first: the
    /// caller shows it and records the states with [`crate::VolumeSet::save`].
    pub fn take_events(&self) -> Vec<String> {
        std::mem::take(&mut *self.events.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Flushes every drive that is up, even after one fails. A drive whose
    /// flush failed may have lost writes it acknowledged, so it goes down
    /// (its subdisks stale, RAID-5 plexes degraded, or down past one). If
    /// the other plexes still hold every byte, the flush succeeds: they
    /// were flushed too. If not, the volume is poisoned and the flush fails.
    fn flush_drives(&self) -> Result<()> {
        let mut failure = None;
        for drive in self.drives.iter().filter(|d| d.state.get() == State::Up) {
            if let Err(err) = drive.stats.track(drive.dev.flush()) {
                self.set_state(&drive.name, State::Down).expect("the drive is one of this volume's");
                self.event(format!("drive '{}' is down: its flush failed ({err})", drive.name));
                failure.get_or_insert(err);
            }
        }
        let Some(err) = failure else { return Ok(()) };
        for said in self.down_unrecoverable_plexes() {
            self.event(said);
        }
        if self.covered(0, self.size_bytes, &[]) {
            return Ok(());
        }
        let cause = format!("{err}; no other plex holds all the data");
        self.event(format!("volume '{}' refuses writes: {cause}", self.name));
        // The front would poison with `err` alone; the volume says why no
        // plex can stand in.
        self.front.poison(cause);
        Err(err)
    }

    fn no_plex(&self, op: Op, offset: u64, len: u64) -> DeviceError {
        let states: Vec<String> =
            self.plexes.iter().map(|p| format!("{} {}", p.name, p.state.get())).collect();
        let initializing: Vec<&str> = self
            .plexes
            .iter()
            .filter(|p| p.state.get() == State::Initializing)
            .map(|p| p.name.as_str())
            .collect();
        let why = if initializing.is_empty() {
            format!(
                "no plex can serve it ({}): each is down or stale, or a subdisk it needs for this range is \
                 not up",
                states.join(", ")
            )
        } else {
            format!(
                "no plex can serve it ({}): {} is initializing, its RAID-5 parity not yet built from the \
                 data its drives held before; build it with `iolab volume init {} DRIVES...` (or `iolab \
                 volume init {} DRIVES...` for every plex of the volume)",
                states.join(", "),
                initializing.join(", "),
                initializing[0],
                self.name
            )
        };
        io_error(&self.name, op, offset, len, why)
    }
}

fn plex_report(plex: &Plex) -> PlexReport {
    PlexReport {
        name: plex.name.clone(),
        org: plex.org,
        state: plex.state.get(),
        size_bytes: plex.size_bytes,
        revived_bytes: plex.revived_bytes.load(Relaxed),
        counters: plex.counters.snapshot(),
        subdisks: plex
            .sds
            .iter()
            .enumerate()
            .scan(0u64, |concat_at, (index, sd)| {
                let plex_offset_bytes = match plex.org.stripe_bytes() {
                    Some(stripe_bytes) => index as u64 * stripe_bytes,
                    None => std::mem::replace(concat_at, *concat_at + sd.length_bytes),
                };
                Some(SubdiskReport {
                    name: sd.name.clone(),
                    drive: sd.drive.name.clone(),
                    state: sd.state.get(),
                    drive_offset_bytes: sd.drive_offset_bytes,
                    plex_offset_bytes,
                    length_bytes: sd.length_bytes,
                    revived_bytes: sd.revived_bytes.load(Relaxed),
                    stats: sd.stats.snapshot(),
                })
            })
            .collect(),
    }
}

impl Backend for Volume {
    fn front(&self) -> &Front {
        &self.front
    }

    fn read_raw(&self, buf: &mut [u8], offset: u64, _: Checked) -> Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        self.read_plexes(buf, offset)
    }

    fn write_raw(&self, buf: &[u8], offset: u64, _: Checked) -> Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        self.write_plexes(buf, offset)
    }

    /// Every error poisons the volume: `flush_drives` fails only when no
    /// plex holds every byte any more.
    fn flush_raw(&self, _: Checked) -> Result<()> {
        self.flush_drives()
    }

    fn unwritten_raw(&self, start: u64, end: u64, _: Checked) -> Result<Option<Vec<std::ops::Range<u64>>>> {
        self.holes(start, end)
    }

    /// Every drive's media, once each (a drive may hold several subdisks).
    fn media_raw(&self) -> Vec<device::Medium> {
        let mut media: Vec<device::Medium> = Vec::new();
        for drive in &self.drives {
            for m in drive.dev.media() {
                if !media.iter().any(|seen| seen.name == m.name) {
                    media.push(m);
                }
            }
        }
        media
    }

    fn drop_cache_raw(&self) -> Result<()> {
        for drive in self.drives.iter().filter(|d| d.state.get() == State::Up) {
            drive.dev.drop_cache()?;
        }
        Ok(())
    }
}

impl std::fmt::Debug for Volume {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Volume({}, {} bytes, {} plexes)", self.name, self.size_bytes, self.plexes.len())
    }
}
