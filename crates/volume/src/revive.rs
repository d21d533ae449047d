//! Reviving: bringing a stale or down subdisk or plex back into service
//! online, while reads and writes continue.
//!
//! A RAID-5 subdisk is rebuilt row by row from the other subdisks; a plex
//! of a mirror (and any subdisk of a concat or striped plex) is copied
//! from another plex. A revive pointer marks how far the copy has come:
//! writes below it already go to the object being revived, so it is
//! current when the pointer reaches the end. A revive never reads the
//! object it revives, and never runs without a good source.

use std::sync::atomic::Ordering::Relaxed;

use crate::error::VolumeError;
use crate::geometry::Raid5;
use crate::object::State;
use crate::plex::Plex;
use crate::volume::Volume;

/// Bytes copied per revive step; each step holds its range locked.
pub const REVIVE_STEP_BYTES: u64 = 256 * 1024;

/// Called after every revive step; an error stops the revive.
pub type OnStep<'a> = &'a mut dyn FnMut() -> Result<(), VolumeError>;

impl Volume {
    /// Brings the drive, plex or subdisk called `name` back into service,
    /// copying or reconstructing its contents first. Reviving a drive sets
    /// it up and revives every subdisk on it.
    pub fn revive(&self, name: &str) -> Result<(), VolumeError> {
        self.revive_with(name, &mut || Ok(()))
    }

    /// As [`Volume::revive`], calling `on_step` after every step (a stripe
    /// row or [`REVIVE_STEP_BYTES`]) so the caller can record progress
    /// ([`Volume::revive_progress`]); an error from it stops the revive.
    /// A revive resumes from the progress its object already has.
    pub fn revive_with(&self, name: &str, on_step: OnStep<'_>) -> Result<(), VolumeError> {
        if let Some(drive) = self.drives.iter().find(|d| d.name == name) {
            drive.state.set(State::Up);
            let names: Vec<String> = self
                .subdisks_on(name)
                .filter(|sd| sd.state.get() != State::Up)
                .map(|sd| sd.name.clone())
                .collect();
            return names.iter().try_for_each(|sd| self.revive_with(sd, on_step));
        }
        if let Some(index) = self.plexes.iter().position(|p| p.name == name) {
            return self.revive_plex(index, on_step);
        }
        for (index, plex) in self.plexes.iter().enumerate() {
            if let Some(disk) = plex.sds.iter().position(|sd| sd.name == name) {
                return self.revive_subdisk(index, disk, on_step);
            }
        }
        Err(VolumeError::UnknownObject { volume: self.name.clone(), name: name.to_string() })
    }

    /// Zeroes every subdisk of the plex called `name` (Vinum's `init`): a
    /// RAID-5 plex of zeros has consistent parity. The plex must not be in
    /// use by other requests while this runs.
    pub fn init_plex(&self, name: &str) -> Result<(), VolumeError> {
        let plex = self.plexes.iter().find(|p| p.name == name);
        let plex = plex.ok_or_else(|| VolumeError::UnknownObject {
            volume: self.name.clone(),
            name: name.to_string(),
        })?;
        let zeros = vec![0; REVIVE_STEP_BYTES as usize];
        for sd in &plex.sds {
            let mut offset = 0;
            while offset < sd.length_bytes {
                let len = REVIVE_STEP_BYTES.min(sd.length_bytes - offset);
                sd.write(&zeros[..len as usize], offset)?;
                offset += len;
            }
        }
        Ok(())
    }

    /// A RAID-5 subdisk whose plex is otherwise healthy is rebuilt from its
    /// plex; any other subdisk is brought back by copying its whole plex
    /// from another plex.
    fn revive_subdisk(&self, index: usize, disk: usize, on_step: OnStep<'_>) -> Result<(), VolumeError> {
        let plex = &self.plexes[index];
        let sd = &plex.sds[disk];
        if sd.state.get() == State::Up && plex.state.get() == State::Up {
            return Ok(());
        }
        let others_up =
            plex.sds.iter().enumerate().all(|(d, other)| d == disk || other.usable_at(0, other.length_bytes));
        match plex.raid5() {
            Some(geometry) if plex.state.get() == State::Up && others_up => {
                self.revive_raid5_subdisk(plex, &geometry, disk, on_step)
            }
            _ => {
                self.check_source(index)?;
                plex.state.set(State::Stale);
                self.revive_plex(index, on_step)
            }
        }
    }

    /// How far each object under revive has come: (name, bytes revived
    /// from its start). Saved with the configuration so a revive resumes.
    pub fn revive_progress(&self) -> Vec<(String, u64)> {
        let plexes = self.plexes.iter().map(|p| (p.name.clone(), p.revived_bytes.load(Relaxed)));
        let sds = self
            .plexes
            .iter()
            .flat_map(|p| &p.sds)
            .map(|sd| (sd.name.clone(), sd.revived_bytes.load(Relaxed)));
        plexes.chain(sds).filter(|(_, bytes)| *bytes > 0).collect()
    }

    /// Restores saved revive progress of a plex or subdisk that is not up.
    /// Returns false when this volume has no such object.
    pub(crate) fn restore_progress(&self, name: &str, bytes: u64) -> bool {
        if let Some(plex) = self.plexes.iter().find(|p| p.name == name && p.state.get() != State::Up) {
            plex.revived_bytes.store(bytes.min(plex.size_bytes), Relaxed);
            return true;
        }
        let sd =
            self.plexes.iter().flat_map(|p| &p.sds).find(|sd| sd.name == name && sd.state.get() != State::Up);
        sd.inspect(|sd| sd.revived_bytes.store(bytes.min(sd.length_bytes), Relaxed)).is_some()
    }

    fn check_source(&self, index: usize) -> Result<(), VolumeError> {
        let has_source =
            self.plexes.iter().enumerate().any(|(i, p)| i != index && p.state.get() == State::Up);
        if has_source {
            return Ok(());
        }
        let name = &self.plexes[index].name;
        Err(self.invalid(format!("plex {name} cannot be revived: no other plex is up to copy from")))
    }

    fn invalid(&self, problem: String) -> VolumeError {
        VolumeError::Invalid { volume: self.name.clone(), problem }
    }

    fn revive_raid5_subdisk(
        &self,
        plex: &Plex,
        geometry: &Raid5,
        disk: usize,
        on_step: OnStep<'_>,
    ) -> Result<(), VolumeError> {
        let sd = &plex.sds[disk];
        if sd.drive.state.get() != State::Up {
            return Err(self.invalid(format!(
                "subdisk {} cannot be revived: drive {} is not up",
                sd.name, sd.drive.name
            )));
        }
        if sd.state.get() == State::Up {
            return Ok(());
        }
        let rows = plex.size_bytes / geometry.row_data_bytes();
        let chunk = 0..geometry.stripe_bytes;
        let mut buf = vec![0; geometry.stripe_bytes as usize];
        let first_row = sd.revived_bytes.load(Relaxed) / geometry.stripe_bytes;
        for row in first_row..rows {
            {
                let _row = plex.rows.lock(row, row + 1);
                plex.rebuild_chunk(geometry, row, disk, &chunk, &mut buf)?;
                sd.write(&buf, row * geometry.stripe_bytes)?;
                sd.revived_bytes.store((row + 1) * geometry.stripe_bytes, Relaxed);
            }
            on_step()?;
        }
        sd.state.set(State::Up);
        sd.revived_bytes.store(0, Relaxed);
        Ok(())
    }

    fn revive_plex(&self, index: usize, on_step: OnStep<'_>) -> Result<(), VolumeError> {
        let target = &self.plexes[index];
        if target.state.get() == State::Up {
            return Ok(());
        }
        self.check_source(index)?;
        for sd in target.sds.iter().filter(|sd| sd.drive.state.get() == State::Up) {
            sd.state.set(State::Up);
        }
        let mut offset = target.revived_bytes.load(Relaxed).min(self.size_bytes);
        while offset < self.size_bytes {
            let len = REVIVE_STEP_BYTES.min(self.size_bytes - offset);
            self.copy_step(index, offset, len)?;
            offset += len;
            target.revived_bytes.store(offset, Relaxed);
            on_step()?;
        }
        if let Some(geometry) = target.raid5() {
            // Parity was garbage where the copy did read-modify-write.
            target.rebuild_parity(&geometry)?;
        }
        target.state.set(State::Up);
        target.revived_bytes.store(0, Relaxed);
        Ok(())
    }

    /// Copies `offset..offset+len` into plex `index` from the first other
    /// plex that reads it.
    fn copy_step(&self, index: usize, offset: u64, len: u64) -> Result<(), VolumeError> {
        let _range = self.writes.lock(offset, offset + len);
        let mut buf = vec![0; len as usize];
        let mut failure = None;
        for (i, plex) in self.plexes.iter().enumerate() {
            if i == index || plex.state.get() != State::Up {
                continue;
            }
            match plex.read(&mut buf, offset) {
                Ok(()) => {
                    let target = &self.plexes[index];
                    target.revived_bytes.store(offset + len, Relaxed);
                    return target.write(&buf, offset).map_err(VolumeError::from);
                }
                Err(err) => failure = Some(err),
            }
        }
        Err(failure.map_or_else(|| self.invalid("no plex to copy from".into()), VolumeError::from))
    }
}
