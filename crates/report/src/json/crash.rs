//! `iolab crash --json`: schema `iolab-crash`, version 1.
//!
//! Every object's keys are in alphabetical order: version 1 was first
//! written through `serde_json::Value`, whose maps sort their keys, and
//! the order is kept so that the bytes stay what they were.

use serde::Serialize;
use workloads::crash::{CrashReport, ViolationClass as InternalClass};

pub const SCHEMA: &str = "iolab-crash";
pub const VERSION: u32 = 1;

#[derive(Clone, Debug, Serialize)]
pub struct CrashDocument {
    /// The simulated disks' model when the states were power cuts in it
    /// (`--disk`); `null` for a recorded history's states.
    pub disk: Option<String>,
    /// The machine and command line behind the document.
    pub host: super::Host,
    pub report: Report,
    pub schema: &'static str,
    /// The seed of the transactions and the sampled states.
    pub seed: u64,
    /// The stack's name, as `--stack` takes it.
    pub stack: String,
    pub version: u32,
}

impl CrashDocument {
    pub fn new(
        host: super::Host,
        stack: &str,
        seed: u64,
        disk: Option<&str>,
        r: &CrashReport,
    ) -> CrashDocument {
        CrashDocument {
            disk: disk.map(str::to_string),
            host,
            report: Report::from(r),
            schema: SCHEMA,
            seed,
            stack: stack.into(),
            version: VERSION,
        }
    }

    pub fn to_json(&self) -> String {
        super::pretty(self)
    }
}

/// What the enumeration checked and found.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub corrupt: u64,
    pub events: u64,
    pub first_violation: Option<Violation>,
    pub flush_states: u64,
    pub flushes: u64,
    pub lost: u64,
    pub open_failed: u64,
    pub sampled_states: u64,
    pub states_checked: u64,
    pub torn_transactions: u64,
    pub torn_writes: u64,
    pub transactions: u64,
    pub violations: u64,
    pub writes: u64,
}

impl From<&CrashReport> for Report {
    fn from(r: &CrashReport) -> Report {
        Report {
            corrupt: r.corrupt,
            events: r.events as u64,
            first_violation: r.first_violation.as_ref().map(Violation::from),
            flush_states: r.flush_states,
            flushes: r.flushes as u64,
            lost: r.lost,
            open_failed: r.open_failed,
            sampled_states: r.sampled_states,
            states_checked: r.states_checked,
            torn_transactions: r.torn_transactions,
            torn_writes: r.torn_writes,
            transactions: r.transactions,
            violations: r.violations,
            writes: r.writes as u64,
        }
    }
}

/// The first state that broke the promise, with what rechecks it.
#[derive(Clone, Debug, Serialize)]
pub struct Violation {
    pub after_events: u64,
    pub class: ViolationClass,
    pub detail: String,
    pub policy: String,
    pub seed: u64,
    pub state: u64,
}

impl From<&workloads::crash::Violation> for Violation {
    fn from(v: &workloads::crash::Violation) -> Violation {
        Violation {
            after_events: v.after_events as u64,
            class: v.class.into(),
            detail: v.detail.clone(),
            policy: v.policy.clone(),
            seed: v.seed,
            state: v.state,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ViolationClass {
    OpenFailed,
    Corrupt,
    Lost,
    TornWrite,
    TornTransaction,
}

impl From<InternalClass> for ViolationClass {
    fn from(c: InternalClass) -> ViolationClass {
        match c {
            InternalClass::OpenFailed => ViolationClass::OpenFailed,
            InternalClass::Corrupt => ViolationClass::Corrupt,
            InternalClass::Lost => ViolationClass::Lost,
            InternalClass::TornWrite => ViolationClass::TornWrite,
            InternalClass::TornTransaction => ViolationClass::TornTransaction,
        }
    }
}

/// `iolab crash --stack fs-sync|fs-softdep|fs-log|fs-async --json`:
/// schema `iolab-crash-fs`, version 3 (version 1 had no `not_clean` or
/// `not_committed`, version 2 no `beyond_leaks`).
#[derive(Clone, Debug, Serialize)]
pub struct FsCrashDocument {
    pub schema: &'static str,
    pub version: u32,
    /// The machine and command line behind the document.
    pub host: super::Host,
    pub stack: String,
    pub seed: u64,
    /// Threads that ran the workload at once (added within version 3).
    pub writers: u32,
    pub operations: u64,
    pub fsyncs: u64,
    pub events: usize,
    pub writes: usize,
    pub flushes: usize,
    pub states_checked: u64,
    pub flush_states: u64,
    pub sampled_states: u64,
    pub violations: u64,
    pub damage_left: u64,
    pub fsync_lost: u64,
    pub unreadable: u64,
    /// Under `log`: states fsck found anything in, and states whose tree
    /// no commit made.
    pub not_clean: u64,
    pub not_committed: u64,
    /// Under `softdep`: states fsck found more than leaks in.
    pub beyond_leaks: u64,
    /// Under `softdep` and `log`: states where a file showed what its
    /// blocks held before it (added within version 3; 0 and not checked
    /// under `sync` and `async`).
    pub old_data: u64,
    /// Under `softdep`: states whose superblock said a directory was
    /// moving between directories, held to preen's promise (added within
    /// version 3).
    pub marked_for_check: u64,
    /// fsck classes found before repair: class -> states.
    pub damage_found: std::collections::BTreeMap<String, u64>,
    /// States the first fsck found anything in, before any repair
    /// (added within version 3).
    pub needed_repair: u64,
    pub first_violation: Option<FsViolation>,
}

#[derive(Clone, Debug, Serialize)]
pub struct FsViolation {
    pub state: u64,
    pub after_events: usize,
    pub policy: String,
    pub seed: u64,
    /// `unreadable`, `damage_left`, `fsync_lost`, `not_clean`,
    /// `not_committed`, `beyond_leaks` or `old_data`.
    pub class: &'static str,
    pub detail: String,
}

impl From<&workloads::fscrash::FsViolation> for FsViolation {
    fn from(v: &workloads::fscrash::FsViolation) -> FsViolation {
        FsViolation {
            state: v.state,
            after_events: v.after_events,
            policy: v.policy.clone(),
            seed: v.seed,
            class: v.class.name(),
            detail: v.detail.clone(),
        }
    }
}

impl FsCrashDocument {
    pub fn new(
        host: super::Host,
        stack: &str,
        seed: u64,
        r: &workloads::fscrash::FsCrashReport,
    ) -> FsCrashDocument {
        FsCrashDocument {
            schema: "iolab-crash-fs",
            version: 3,
            host,
            stack: stack.into(),
            seed,
            writers: r.writers,
            operations: r.operations,
            fsyncs: r.fsyncs,
            events: r.events,
            writes: r.writes,
            flushes: r.flushes,
            states_checked: r.states_checked,
            flush_states: r.flush_states,
            sampled_states: r.sampled_states,
            violations: r.violations,
            damage_left: r.damage_left,
            fsync_lost: r.fsync_lost,
            unreadable: r.unreadable,
            not_clean: r.not_clean,
            not_committed: r.not_committed,
            beyond_leaks: r.beyond_leaks,
            old_data: r.old_data,
            marked_for_check: r.marked_for_check,
            damage_found: r.damage_found.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            needed_repair: r.needed_repair,
            first_violation: r.first_violation.as_ref().map(FsViolation::from),
        }
    }

    pub fn to_json(&self) -> String {
        super::pretty(self)
    }
}

/// `iolab crash --kernel FS --json`: schema `iolab-crash-kernel`, version
/// 1. The counts have the names the other crash documents give them.
#[derive(Clone, Debug, Serialize)]
pub struct KernelCrashDocument {
    pub schema: &'static str,
    pub version: u32,
    pub host: super::Host,
    /// As `--kernel` names it: ext4, ext4-nojournal, xfs, btrfs, ...
    pub file_system: String,
    /// mkfs's command line (DEVICE for the loop device).
    pub mkfs: String,
    pub mount_options: String,
    /// The loop device reached the served image with direct I/O (else
    /// buffered, write-through).
    pub direct_io: bool,
    pub sector_bytes: u32,
    /// The recorder dropped every flush (the checker's proof: violations
    /// expected).
    pub drop_flushes: bool,
    pub seed: u64,
    pub operations: u64,
    pub fsyncs: u64,
    pub events: usize,
    pub writes: usize,
    pub flushes: usize,
    pub states_checked: u64,
    pub flush_states: u64,
    pub sampled_states: u64,
    pub violations: u64,
    /// States that would not mount.
    pub unreadable: u64,
    pub fsync_lost: u64,
    /// States the file system's checker found anything in after the
    /// mount's replay.
    pub not_clean: u64,
    /// ext4-nojournal: states e2fsck -p left damage in.
    pub damage_left: u64,
    /// ext4-nojournal: states e2fsck -p repaired (no violation).
    pub repaired_by_preen: u64,
    pub record_seconds: f64,
    pub check_seconds: f64,
    pub first_violation: Option<FsViolation>,
}

impl KernelCrashDocument {
    pub fn new(
        host: super::Host,
        run: &crate::KernelCrashRun<'_>,
        r: &workloads::fscrash::FsCrashReport,
    ) -> KernelCrashDocument {
        KernelCrashDocument {
            schema: "iolab-crash-kernel",
            version: 1,
            host,
            file_system: run.fs.into(),
            mkfs: run.mkfs.into(),
            mount_options: run.mount_options.into(),
            direct_io: run.direct_io,
            sector_bytes: run.sector_bytes,
            drop_flushes: run.drop_flushes,
            seed: run.seed,
            operations: r.operations,
            fsyncs: r.fsyncs,
            events: r.events,
            writes: r.writes,
            flushes: r.flushes,
            states_checked: r.states_checked,
            flush_states: r.flush_states,
            sampled_states: r.sampled_states,
            violations: r.violations,
            unreadable: r.unreadable,
            fsync_lost: r.fsync_lost,
            not_clean: r.not_clean,
            damage_left: r.damage_left,
            repaired_by_preen: r.needed_repair,
            record_seconds: run.record_seconds,
            check_seconds: run.check_seconds,
            first_violation: r.first_violation.as_ref().map(FsViolation::from),
        }
    }

    pub fn to_json(&self) -> String {
        super::pretty(self)
    }
}

/// `iolab crash --kernel FS,... --stack fs-...,... --json`: schema
/// `iolab-crash-table`, version 1: the comparison table.
#[derive(Clone, Debug, Serialize)]
pub struct CrashTableDocument {
    pub schema: &'static str,
    pub version: u32,
    pub host: super::Host,
    pub operations: u64,
    pub sync_every: u64,
    pub seed: u64,
    pub sampled_states: u64,
    pub rows: Vec<crate::CrashTableRow>,
}

impl CrashTableDocument {
    pub fn new(
        host: super::Host,
        (operations, sync_every, seed, sampled_states): (u64, u64, u64, u64),
        rows: &[crate::CrashTableRow],
    ) -> CrashTableDocument {
        CrashTableDocument {
            schema: "iolab-crash-table",
            version: 1,
            host,
            operations,
            sync_every,
            seed,
            sampled_states,
            rows: rows.to_vec(),
        }
    }

    pub fn to_json(&self) -> String {
        super::pretty(self)
    }
}
