//! Reports: turns measured results into text a person reads (tables in
//! fio's and the seeds' layouts) and the versioned JSON document programs
//! read (schema in docs/json.md). Pure formatting: never measures, never
//! prints; the cli crate writes what this returns.

mod bonnie;
mod run;
mod spread;
mod target;
mod volumes;

pub use bonnie::{bonnie_csv, bonnie_csv_103, bonnie_spread, bonnie_table};
pub use run::{
    job_heading, log_line, repeat_table, run_table, validation_summary, JobReport, LogReport, UNWRITTEN_MARK,
    VALIDATION_ERRORS_SHOWN,
};
pub use spread::{summarize, OpSpread, RepeatSummary, Spread};
pub use target::{target_lines, CacheState, LayoutPolicy, LayoutState, TargetReport};
pub use volumes::{volume_list, volume_list_verbose};

use serde::Serialize;

/// Version of the JSON document written by `iolab run --json`.
pub const RUN_SCHEMA_VERSION: u32 = 2;

/// The whole JSON document of `iolab run --json`.
#[derive(Clone, Debug, Serialize)]
pub struct RunDocument {
    pub schema: &'static str,
    pub version: u32,
    pub iolab_version: String,
    pub jobs: Vec<JobReport>,
}

impl RunDocument {
    pub fn new(iolab_version: &str, jobs: Vec<JobReport>) -> RunDocument {
        RunDocument {
            schema: "iolab-run",
            version: RUN_SCHEMA_VERSION,
            iolab_version: iolab_version.into(),
            jobs,
        }
    }

    pub fn to_json(&self) -> String {
        // Invariant: the document holds only numbers, strings and arrays,
        // which serde_json always serialises (non-finite floats become null).
        serde_json::to_string_pretty(self).expect("serialisable document")
    }
}
