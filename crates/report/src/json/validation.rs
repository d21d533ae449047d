//! What validation found, as `iolab run`'s document carries it (and the
//! error log, `iolab validate` and the journal sweep reuse): the errors
//! with their sector findings, and the journal's counters.

use serde::Serialize;
use workloads::validate::CheckedBy as InternalCheckedBy;

/// What validation saw in a run.
#[derive(Clone, Debug, Serialize)]
pub struct Validation {
    pub key_block_bytes: u64,
    pub blocks_written: u64,
    pub blocks_checked: u64,
    /// Of those, the blocks the verify phase read back after the run
    /// (`null`: no verify phase ran).
    pub blocks_verified: Option<u64>,
    pub errors: u64,
    /// The first errors (workloads keeps at most 1000).
    pub error_list: Vec<ValidationError>,
    /// `null` without a journal.
    pub journal: Option<Journal>,
}

impl From<&workloads::ValidationSummary> for Validation {
    fn from(v: &workloads::ValidationSummary) -> Validation {
        Validation {
            key_block_bytes: v.key_block_bytes,
            blocks_written: v.blocks_written,
            blocks_checked: v.blocks_checked,
            blocks_verified: v.blocks_verified,
            errors: v.errors,
            error_list: v.error_list.iter().map(ValidationError::from).collect(),
            journal: v.journal.as_ref().map(Journal::from),
        }
    }
}

/// One block that did not hold what it should.
#[derive(Clone, Debug, Serialize)]
pub struct ValidationError {
    pub block_offset: u64,
    pub block_bytes: u64,
    pub expected_key: u8,
    pub checked_by: CheckedBy,
    /// lost_write, misdirected, foreign_run, corrupt, unexpected_zeros or torn.
    pub class: String,
    pub findings: Vec<Finding>,
}

impl From<&workloads::ValidationError> for ValidationError {
    fn from(e: &workloads::ValidationError) -> ValidationError {
        ValidationError {
            block_offset: e.block_offset,
            block_bytes: e.block_bytes,
            expected_key: e.expected_key,
            checked_by: e.checked_by.into(),
            class: e.class.to_string(),
            findings: e.findings.iter().map(Finding::from).collect(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CheckedBy {
    Read,
    Preread,
    Reread,
    Verify,
}

impl From<InternalCheckedBy> for CheckedBy {
    fn from(c: InternalCheckedBy) -> CheckedBy {
        match c {
            InternalCheckedBy::Read => CheckedBy::Read,
            InternalCheckedBy::Preread => CheckedBy::Preread,
            InternalCheckedBy::Reread => CheckedBy::Reread,
            InternalCheckedBy::Verify => CheckedBy::Verify,
        }
    }
}

/// One sector's problem: its byte address, `kind` and the kind's fields
/// beside them in one object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub address: u64,
    #[serde(flatten)]
    pub kind: FindingKind,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FindingKind {
    LostWrite {
        expected_key: u8,
        found_key: u8,
        /// Only when the block is an older run's.
        #[serde(skip_serializing_if = "Option::is_none")]
        found_run_id: Option<u64>,
    },
    Ahead {
        expected_key: u8,
        found_key: u8,
    },
    Misdirected {
        found_address: u64,
    },
    ForeignRun {
        found_run_id: u64,
    },
    Corrupt {
        reason: String,
    },
    UnexpectedZeros,
    /// A write the damaged part of the journal may have recorded, or a
    /// shared unit's copy behind an async journal (`found_key` 0: no
    /// stamp of this run, under a damaged snapshot).
    Unverifiable {
        expected_key: u8,
        found_key: u8,
    },
}

impl From<&validation::Finding> for Finding {
    fn from(f: &validation::Finding) -> Finding {
        use validation::FindingKind as K;
        let kind = match f.kind {
            K::LostWrite { expected_key, found_key, found_run_id } => {
                FindingKind::LostWrite { expected_key, found_key, found_run_id }
            }
            K::Ahead { expected_key, found_key } => FindingKind::Ahead { expected_key, found_key },
            K::Misdirected { found_address } => FindingKind::Misdirected { found_address },
            K::ForeignRun { found_run_id } => FindingKind::ForeignRun { found_run_id },
            K::Corrupt { reason } => FindingKind::Corrupt { reason: reason.to_string() },
            K::UnexpectedZeros => FindingKind::UnexpectedZeros,
            K::Unverifiable { expected_key, found_key } => {
                FindingKind::Unverifiable { expected_key, found_key }
            }
        };
        Finding { address: f.address, kind }
    }
}

/// What a journal writer did in a run.
#[derive(Clone, Debug, Serialize)]
pub struct Journal {
    pub records: u64,
    pub writes: u64,
    pub commits: u64,
    pub ring_commits: u64,
    pub target_flushes: u64,
    pub compactions: u64,
    pub waits: u64,
    pub wait_us: u64,
}

impl From<&workloads::journal::JournalStats> for Journal {
    fn from(j: &workloads::journal::JournalStats) -> Journal {
        Journal {
            records: j.records,
            writes: j.writes,
            commits: j.commits,
            ring_commits: j.ring_commits,
            target_flushes: j.target_flushes,
            compactions: j.compactions,
            waits: j.waits,
            wait_us: j.wait_us,
        }
    }
}
