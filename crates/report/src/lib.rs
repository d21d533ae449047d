//! Reports: turns measured results into text a person reads (tables in
//! fio's and the seeds' layouts, verdicts, the crash report) and the
//! versioned JSON documents programs read ([`json`], schemas in
//! docs/json.md), whose wire types are kept apart from the internal ones.
//! Pure formatting: never measures, never prints; the cli crate writes
//! what this returns.

#![forbid(unsafe_code)]

mod bonnie;
mod charts;
mod crash;
mod fs;
mod html;
pub mod json;
mod mpi;
pub mod plot;
mod policies;
mod run;
mod series;
mod spread;
mod sweep;
mod target;
pub mod units;
mod validate;
mod volumes;

pub use bonnie::{bonnie_csv, bonnie_csv_103, bonnie_spread, bonnie_table};
pub use charts::{charts, Chart};
pub use crash::{
    crash_table_text, crash_text, fs_crash_text, kernel_crash_text, CrashRun, CrashTableRow, FsCrashRun,
    KernelCrashRun,
};
pub use fs::{
    fsck_text, ls_line, mdtest_text, not_a_file, rm_text, stat_text, unmounted_line, untar_text, FsckOutcome,
    TreeOn, TreeRun,
};
pub use html::html_report;
pub use mpi::{
    aggregate as mpi_aggregate, mpi_phases_table, mpi_table, Aggregate as MpiAggregate, RankPhases, RankRun,
};
pub use policies::{min_sec, policies_table, ColumnRuns, Phase, PhaseRun, PoliciesSweep};
pub use run::{
    job_heading, log_line, nothing_checked, repeat_table, run_table, validation_summary, JobReport,
    LogReport, UNWRITTEN_MARK, VALIDATION_ERRORS_SHOWN,
};
pub use series::{fio_logs, run_csv_line, seconds, SecondFigures, SecondOpFigures, RUN_CSV_HEADER};
pub use spread::{summarize, OpSpread, RepeatSummary, Spread};
pub use sweep::{
    journal_sweep_table, journal_sweeps_side_by_side, stripes_bonnie_table, stripes_fs_table, sweep_arms,
    ArmRuns, JournalSweep, StripesRow, SweepArm, SweepArmRun, SweepPowerCut,
};
pub use target::{
    medium_kind, memory_warnings, target_lines, CacheState, LayoutPolicy, LayoutState, TargetReport,
};
pub use units::human as human_bytes;
pub use validate::{verdict_line, verdict_text, Outcome, VerdictExits};
pub use volumes::{parity_lines, volume_list, volume_list_verbose};

/// `n` and the noun in its number: "1 thread", "4 threads".
pub fn counted(n: impl Into<u64>, one: &str, many: &str) -> String {
    let n = n.into();
    format!("{n} {}", if n == 1 { one } else { many })
}
