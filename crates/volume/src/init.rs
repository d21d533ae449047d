//! Initialising: making a plex consistent before it is trusted with data.
//!
//! A RAID-5 plex created on drives that held data has parity that does not
//! match its data; it is created `initializing` and takes no I/O until
//! initialised, since a write acknowledged on it would be rebuilt from
//! wrong parity after a drive failure. Initialising builds the parity from
//! the data as md's initial resync does, rather than zeroing every
//! subdisk as Vinum's `init` does: it writes one chunk per stripe row
//! instead of all of them, it can resume from a row pointer saved with the
//! configuration, and run on a plex that already holds data it loses
//! nothing. A plex of a mirror whose other plex is up is copied from it
//! instead (a revive), so the mirror agrees; a concat or striped plex with
//! nothing to copy from is zeroed, as Vinum does.

use std::sync::atomic::Ordering::Relaxed;

use crate::error::VolumeError;
use crate::geometry::Raid5;
use crate::object::State;
use crate::plex::Plex;
use crate::revive::{OnStep, REVIVE_STEP_BYTES};
use crate::volume::Volume;

impl Volume {
    /// Initialises the plex called `name`, or every plex of the volume in
    /// turn when `name` is the volume's, and brings it up (see the module
    /// docs for what that does to each kind of plex).
    pub fn init(&self, name: &str) -> Result<(), VolumeError> {
        self.init_with(name, &mut |_, _| Ok(()))
    }

    /// As [`Volume::init`], calling `on_step` after every step (about
    /// [`REVIVE_STEP_BYTES`] of the plex) with the bytes done and in all;
    /// an error from it stops the init where it is. The parity build of an
    /// initializing RAID-5 plex resumes from its saved row pointer.
    pub fn init_with(&self, name: &str, on_step: OnStep<'_>) -> Result<(), VolumeError> {
        if name == self.name {
            return (0..self.plexes.len()).try_for_each(|index| self.init_plex(index, on_step));
        }
        match self.plexes.iter().position(|p| p.name == name) {
            Some(index) => self.init_plex(index, on_step),
            None if self.state(name).is_some() => Err(VolumeError::Invalid {
                volume: self.name.clone(),
                problem: format!("init takes a plex or a volume; '{name}' is a subdisk or a drive"),
            }),
            None => Err(VolumeError::UnknownObject { volume: self.name.clone(), name: name.to_string() }),
        }
    }

    /// True when the volume has a plex called `name`.
    pub fn has_plex(&self, name: &str) -> bool {
        self.plexes.iter().any(|p| p.name == name)
    }

    fn init_plex(&self, index: usize, on_step: OnStep<'_>) -> Result<(), VolumeError> {
        let plex = &self.plexes[index];
        let source = self.plexes.iter().enumerate().any(|(i, p)| i != index && p.state.get() == State::Up);
        if source {
            if plex.state.get() != State::Stale {
                // An initializing plex's pointer counts rows of parity
                // built, not bytes copied: the copy starts afresh.
                plex.state.set(State::Stale);
                plex.revived_bytes.store(0, Relaxed);
            }
            return self.revive_plex(index, on_step);
        }
        if let Some(sd) = plex.sds.iter().find(|sd| sd.drive.state.get() != State::Up) {
            return Err(self.invalid_init(
                plex,
                format!("drive {} of subdisk {} is not up; init needs every drive", sd.drive.name, sd.name),
            ));
        }
        match plex.raid5() {
            Some(geometry) => self.build_parity(plex, &geometry, on_step),
            None => self.zero(plex, on_step),
        }
    }

    fn invalid_init(&self, plex: &Plex, why: String) -> VolumeError {
        VolumeError::Invalid {
            volume: self.name.clone(),
            problem: format!("cannot init plex {}: {why}", plex.name),
        }
    }

    /// md's resync: every row's parity computed from its data and written,
    /// a step of rows at a time; the row pointer is kept (and saved by
    /// [`crate::VolumeSet::init`]) while the plex is initializing.
    fn build_parity(&self, plex: &Plex, geometry: &Raid5, on_step: OnStep<'_>) -> Result<(), VolumeError> {
        let initializing = match plex.state.get() {
            State::Initializing => true,
            State::Up => false,
            state => {
                return Err(self.invalid_init(
                    plex,
                    format!(
                        "it is {state}: it missed writes and no other plex is up to copy them from \
                         (`iolab volume setstate up {}` takes it as it is)",
                        plex.name
                    ),
                ))
            }
        };
        if let Some(sd) = plex.sds.iter().find(|sd| !sd.up()) {
            return Err(self
                .invalid_init(plex, format!("subdisk {} is {}; revive it first", sd.name, sd.state.get())));
        }
        let row_bytes = geometry.row_data_bytes();
        let rows = plex.size_bytes / row_bytes;
        let rows_per_step = REVIVE_STEP_BYTES.div_ceil(row_bytes).max(1);
        let mut row = if initializing { plex.revived_bytes.load(Relaxed) / row_bytes } else { 0 };
        while row < rows {
            let end = (row + rows_per_step).min(rows);
            (row..end).try_for_each(|r| plex.rebuild_parity_row(geometry, r))?;
            row = end;
            if initializing {
                plex.revived_bytes.store(row * row_bytes, Relaxed);
            }
            on_step(row * row_bytes, rows * row_bytes)?;
        }
        plex.state.set(State::Up);
        plex.revived_bytes.store(0, Relaxed);
        Ok(())
    }

    /// Vinum's init: every subdisk written with zeros, then up.
    fn zero(&self, plex: &Plex, on_step: OnStep<'_>) -> Result<(), VolumeError> {
        let zeros = vec![0; REVIVE_STEP_BYTES as usize];
        let total: u64 = plex.sds.iter().map(|sd| sd.length_bytes).sum();
        let mut done = 0;
        for sd in &plex.sds {
            let mut offset = 0;
            while offset < sd.length_bytes {
                let len = REVIVE_STEP_BYTES.min(sd.length_bytes - offset);
                sd.write(&zeros[..len as usize], offset)?;
                offset += len;
                done += len;
                on_step(done, total)?;
            }
        }
        for sd in &plex.sds {
            sd.state.set(State::Up);
            sd.revived_bytes.store(0, Relaxed);
        }
        plex.state.set(State::Up);
        plex.revived_bytes.store(0, Relaxed);
        Ok(())
    }
}
