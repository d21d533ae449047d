//! `iolab validate --json`: schema `iolab-validate`, version 2. The
//! verdict's counts at the top level, beside what was checked.

use std::path::Path;

use serde::Serialize;
use workloads::recover::{BadBlock, Verdict};

use super::validation::Finding;

pub const SCHEMA: &str = "iolab-validate";
/// 2 added the `ahead` class, `outcome` and the sector numbers.
pub const VERSION: u32 = 2;

#[derive(Clone, Debug, Serialize)]
pub struct ValidateDocument {
    pub schema: &'static str,
    pub version: u32,
    pub iolab_version: String,
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
}

impl ValidateDocument {
    /// The verdict on `target` against the journal in `journal`, both as
    /// given on the command line.
    pub fn new(iolab_version: &str, target: &str, journal: &Path, v: &Verdict) -> ValidateDocument {
        ValidateDocument {
            schema: SCHEMA,
            version: VERSION,
            iolab_version: iolab_version.into(),
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
    Bad,
}

impl From<crate::Outcome> for Outcome {
    fn from(o: crate::Outcome) -> Outcome {
        match o {
            crate::Outcome::Ok => Outcome::Ok,
            crate::Outcome::JournalIncomplete => Outcome::JournalIncomplete,
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
