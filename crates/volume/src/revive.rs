//! Reviving: bringing a stale or down subdisk or plex back into service
//! online, while reads and writes continue.
//!
//! A RAID-5 subdisk is rebuilt row by row from the other subdisks; a
//! subdisk of a concat or striped plex has its own region of the plex
//! copied from the other plexes (a stripe unit at a time), and a whole plex
//! of a mirror is copied from the others. A revive pointer marks how far
//! the copy has come:
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

/// Called after every step of a revive or an init with the bytes of the
/// object done and in all; an error stops the work where it is.
pub type OnStep<'a> = &'a mut dyn FnMut(u64, u64) -> Result<(), VolumeError>;

impl Volume {
    /// Brings the drive, plex or subdisk called `name` back into service,
    /// copying or reconstructing its contents first. Reviving a drive sets
    /// it up and revives every subdisk on it.
    pub fn revive(&self, name: &str) -> Result<(), VolumeError> {
        self.revive_with(name, &mut |_, _| Ok(()))
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

    /// A RAID-5 subdisk whose plex is otherwise healthy is rebuilt from its
    /// plex; a subdisk of a concat or striped plex that is up has its own
    /// region copied from the other plexes; any other subdisk is brought
    /// back by copying its whole plex from another plex.
    fn revive_subdisk(&self, index: usize, disk: usize, on_step: OnStep<'_>) -> Result<(), VolumeError> {
        let plex = &self.plexes[index];
        let sd = &plex.sds[disk];
        if sd.state.get() == State::Up && plex.state.get() == State::Up {
            return Ok(());
        }
        self.refuse_initializing(plex)?;
        let others_up =
            plex.sds.iter().enumerate().all(|(d, other)| d == disk || other.usable_at(0, other.length_bytes));
        match plex.raid5() {
            Some(geometry) if plex.state.get() == State::Up && others_up => {
                self.revive_raid5_subdisk(plex, &geometry, disk, on_step)
            }
            None if plex.state.get() == State::Up => self.revive_region(index, disk, on_step),
            _ => {
                self.check_source(index)?;
                plex.state.set(State::Stale);
                self.revive_plex(index, on_step)
            }
        }
    }

    /// An initializing plex is brought up by `init`, which knows whether
    /// to build its parity or copy it from another plex.
    pub(crate) fn refuse_initializing(&self, plex: &Plex) -> Result<(), VolumeError> {
        if plex.state.get() != State::Initializing {
            return Ok(());
        }
        Err(self.invalid(format!(
            "plex {0} is initializing: bring it up with `iolab volume init {0} DRIVES...` \
             (Volume::init), not a revive",
            plex.name
        )))
    }

    /// Copies the part of the plex that subdisk `disk` (of a concat or
    /// striped plex that is up) holds from the other plexes, piece by
    /// piece (a stripe unit, or [`REVIVE_STEP_BYTES`]), each piece under
    /// the volume's write lock for its range. The subdisk's revive pointer
    /// counts its own bytes: writes below it reach the subdisk meanwhile.
    fn revive_region(&self, index: usize, disk: usize, on_step: OnStep<'_>) -> Result<(), VolumeError> {
        let plex = &self.plexes[index];
        let sd = &plex.sds[disk];
        if sd.drive.state.get() != State::Up {
            return Err(self.invalid(format!(
                "subdisk {} cannot be revived: drive {} is not up",
                sd.name, sd.drive.name
            )));
        }
        self.check_source(index)?;
        let used = plex.sd_used_bytes(disk);
        let mut at = sd.revived_bytes.load(Relaxed).min(used);
        let mut buf = vec![0; REVIVE_STEP_BYTES as usize];
        while at < used {
            let (plex_offset, piece) = plex.sd_to_plex(disk, at, REVIVE_STEP_BYTES.min(used - at));
            // Plex bytes past the volume's end (a shorter mirror) are never addressed.
            let len = piece.min(self.size_bytes.saturating_sub(plex_offset));
            if len > 0 {
                let _range = self.writes.lock(plex_offset, plex_offset + len);
                let buf = &mut buf[..len as usize];
                self.read_pieces(buf, plex_offset, Some(index))?;
                sd.write(buf, at)?;
                // Moved while the range is held: a write to it waits, then reaches the subdisk.
                sd.revived_bytes.store(at + piece, Relaxed);
            }
            at += piece;
            sd.revived_bytes.store(at, Relaxed);
            on_step(at, used)?;
        }
        sd.state.set(State::Up);
        sd.revived_bytes.store(0, Relaxed);
        Ok(())
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
            on_step((row + 1) * geometry.stripe_bytes, rows * geometry.stripe_bytes)?;
        }
        sd.state.set(State::Up);
        sd.revived_bytes.store(0, Relaxed);
        Ok(())
    }

    pub(crate) fn revive_plex(&self, index: usize, on_step: OnStep<'_>) -> Result<(), VolumeError> {
        let target = &self.plexes[index];
        if target.state.get() == State::Up {
            return Ok(());
        }
        self.refuse_initializing(target)?;
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
            on_step(offset, self.size_bytes)?;
        }
        if let Some(geometry) = target.raid5() {
            // Parity was garbage where the copy did read-modify-write.
            target.rebuild_parity(&geometry)?;
        }
        target.state.set(State::Up);
        target.revived_bytes.store(0, Relaxed);
        Ok(())
    }

    /// Copies `offset..offset+len` into plex `index` from the other plexes
    /// (piece by piece where no one of them holds it all).
    fn copy_step(&self, index: usize, offset: u64, len: u64) -> Result<(), VolumeError> {
        let _range = self.writes.lock(offset, offset + len);
        let mut buf = vec![0; len as usize];
        self.read_pieces(&mut buf, offset, Some(index))?;
        let target = &self.plexes[index];
        target.revived_bytes.store(offset + len, Relaxed);
        target.write(&buf, offset)?;
        Ok(())
    }
}
