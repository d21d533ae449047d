//! `iolab sweep stripes --json FILE`: schema `iolab-sweep-stripes`,
//! version 2. Every run of every layout.

use serde::Serialize;

use super::bonnie::BonnieRun;
use super::run::Run;
use super::volume::PlexCounters;
use crate::StripesRow;

pub const SCHEMA: &str = "iolab-sweep-stripes";
/// 2: each `fs` run as iolab-run version 3 has it (the distribution,
/// per-second rates and latencies).
pub const VERSION: u32 = 2;

#[derive(Clone, Debug, Serialize)]
pub struct SweepStripesDocument {
    pub schema: &'static str,
    pub version: u32,
    pub iolab_version: String,
    /// The machine and command line behind the document.
    pub host: super::Host,
    pub rows: Vec<Row>,
}

impl SweepStripesDocument {
    pub fn new(iolab_version: &str, host: super::Host, rows: &[StripesRow]) -> SweepStripesDocument {
        SweepStripesDocument {
            schema: SCHEMA,
            version: VERSION,
            iolab_version: iolab_version.into(),
            host,
            rows: rows.iter().map(Row::from).collect(),
        }
    }

    pub fn to_json(&self) -> String {
        super::pretty(self)
    }
}

/// One layout: its bonnie runs or its fs-mix runs (the other list empty),
/// and the plex counters over its last run (`null` for the plain drive).
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub layout: String,
    pub bonnie: Vec<BonnieRun>,
    pub fs: Vec<Run>,
    pub plex: Option<PlexCounters>,
}

impl From<&StripesRow> for Row {
    fn from(r: &StripesRow) -> Row {
        Row {
            layout: r.layout.clone(),
            bonnie: r.bonnie.iter().map(BonnieRun::from).collect(),
            fs: r.fs.iter().map(|run| Run::new(run, &super::run::DEFAULT_PERCENTILES)).collect(),
            plex: r.plex.as_ref().map(PlexCounters::from),
        }
    }
}
