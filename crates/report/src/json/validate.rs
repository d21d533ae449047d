//! `iolab validate --json`: schema `iolab-validate`, version 3. The
//! verdict's counts at the top level, beside what was checked.

use std::path::Path;

use serde::Serialize;
use workloads::recover::{BadBlock, Damage, DamageKind, Verdict};

use super::validation::Finding;

pub const SCHEMA: &str = "iolab-validate";
/// 2 added the `ahead` class, `outcome` and the sector numbers; 3 the
/// damaged journal (`journal_damaged` and `nothing_checked` outcomes, the
/// `unverifiable` class, `journal_damage`, `lost_write_ids`), `checked`
/// and `every_block`.
pub const VERSION: u32 = 3;

#[derive(Clone, Debug, Serialize)]
pub struct ValidateDocument {
    pub schema: &'static str,
    pub version: u32,
    pub iolab_version: String,
    /// The machine and command line behind the document.
    pub host: super::Host,
    /// As given on the command line.
    pub target: String,
    pub journal: String,
    /// Bad blocks in all.
    pub errors: u64,
    pub outcome: Outcome,
    pub verified: u64,
    pub pending_old: u64,
    pub pending_new: u64,
    pub torn: u64,
    pub torn_ok: bool,
    pub lost: u64,
    pub misdirected: u64,
    pub corrupt: u64,
    pub zeros: u64,
    pub foreign: u64,
    pub ahead: u64,
    pub bad: Vec<Block>,
    pub ahead_blocks: Vec<Block>,
    pub sector_bytes: u32,
    pub records: u64,
    pub journal_torn_at: Option<u64>,
    pub journal_mode: Option<JournalMode>,
    pub journal_target: String,
    pub journal_generation: u64,
    /// Blocks read and judged, in every class.
    pub checked: u64,
    pub unverifiable: u64,
    pub unverifiable_blocks: Vec<Block>,
    pub journal_damage: Vec<JournalDamage>,
    pub journal_damaged_ranges: u64,
    pub lost_write_ids: Option<LostIds>,
    pub journal_snapshot_damaged: bool,
    pub every_block: bool,
}

/// A part of the journal that was durable and no longer reads.
#[derive(Clone, Debug, Serialize)]
pub struct JournalDamage {
    /// Byte of the journal file, and how many.
    pub at: u64,
    pub bytes: u64,
    /// `records`, `snapshot` or `newer_start`.
    pub kind: &'static str,
}

impl From<&Damage> for JournalDamage {
    fn from(d: &Damage) -> JournalDamage {
        let kind = match d.kind {
            DamageKind::Records => "records",
            DamageKind::Snapshot => "snapshot",
            DamageKind::NewerStart => "newer_start",
        };
        JournalDamage { at: d.at, bytes: d.bytes, kind }
    }
}

/// Write ids whose records the damage may have taken: `from` up to `to`
/// (exclusive); `to` is null when any later id may be one.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct LostIds {
    pub from: u64,
    pub to: Option<u64>,
}

impl ValidateDocument {
    /// The verdict on `target` against the journal in `journal`, both as
    /// given on the command line.
    pub fn new(
        iolab_version: &str,
        host: super::Host,
        target: &str,
        journal: &Path,
        v: &Verdict,
    ) -> ValidateDocument {
        ValidateDocument {
            schema: SCHEMA,
            version: VERSION,
            iolab_version: iolab_version.into(),
            host,
            target: target.into(),
            journal: journal.display().to_string(),
            errors: v.errors(),
            outcome: crate::Outcome::of(v).into(),
            verified: v.verified,
            pending_old: v.pending_old,
            pending_new: v.pending_new,
            torn: v.torn,
            torn_ok: v.torn_ok,
            lost: v.lost,
            misdirected: v.misdirected,
            corrupt: v.corrupt,
            zeros: v.zeros,
            foreign: v.foreign,
            ahead: v.ahead,
            bad: v.bad.iter().map(Block::from).collect(),
            ahead_blocks: v.ahead_blocks.iter().map(Block::from).collect(),
            sector_bytes: v.sector_bytes,
            records: v.records,
            journal_torn_at: v.journal_torn_at,
            journal_mode: v.journal_mode.map(JournalMode::from),
            journal_target: v.journal_target.clone(),
            journal_generation: v.journal_generation,
            checked: v.checked(),
            unverifiable: v.unverifiable,
            unverifiable_blocks: v.unverifiable_blocks.iter().map(Block::from).collect(),
            journal_damage: v.journal_damage.iter().map(JournalDamage::from).collect(),
            journal_damaged_ranges: v.journal_damaged_ranges,
            lost_write_ids: v
                .lost_write_ids
                .map(|(from, to)| LostIds { from, to: (to != u64::MAX).then_some(to) }),
            journal_snapshot_damaged: v.journal_snapshot_damaged,
            every_block: v.every_block,
        }
    }

    pub fn to_json(&self) -> String {
        super::pretty(self)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Ok,
    JournalIncomplete,
    JournalDamaged,
    NothingChecked,
    Bad,
}

impl From<crate::Outcome> for Outcome {
    fn from(o: crate::Outcome) -> Outcome {
        match o {
            crate::Outcome::Ok => Outcome::Ok,
            crate::Outcome::JournalIncomplete => Outcome::JournalIncomplete,
            crate::Outcome::JournalDamaged => Outcome::JournalDamaged,
            crate::Outcome::NothingChecked => Outcome::NothingChecked,
            crate::Outcome::Bad => Outcome::Bad,
        }
    }
}

/// A bad block, or one ahead of the journal: torn ones carry the sector
/// counts, the others the finding that names their class; the fields a
/// block lacks are left out, not `null`.
#[derive(Clone, Debug, Serialize)]
pub struct Block {
    pub offset: u64,
    pub class: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new_sectors: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old_sectors: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first: Option<Finding>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_sector: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bad_sectors: Option<u32>,
}

impl From<&BadBlock> for Block {
    fn from(b: &BadBlock) -> Block {
        Block {
            offset: b.offset,
            class: b.class.to_string(),
            new_sectors: b.new_sectors,
            old_sectors: b.old_sectors,
            first: b.first.as_ref().map(Finding::from),
            first_sector: b.first_sector,
            bad_sectors: b.bad_sectors,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum JournalMode {
    Sync,
    Async,
    Group,
}

impl From<workloads::journal::JournalMode> for JournalMode {
    fn from(m: workloads::journal::JournalMode) -> JournalMode {
        use workloads::journal::JournalMode as M;
        match m {
            M::Sync => JournalMode::Sync,
            M::Async => JournalMode::Async,
            M::Group => JournalMode::Group,
        }
    }
}
