//! `iolab bonnie --json`: schema `iolab-bonnie`, version 2. Every run,
//! each phase with the requests it sent to the device, bonnie++'s file
//! tests where they ran, and with repeats the spread.

use serde::Serialize;
use workloads::bonnie::{BonnieResult, PhaseResult};
use workloads::tree::{FilePhase as FilePhaseResult, FileTests as FileTestsResult};

pub const SCHEMA: &str = "iolab-bonnie";
pub const VERSION: u32 = 2;

#[derive(Clone, Debug, Serialize)]
pub struct BonnieDocument {
    pub schema: &'static str,
    pub version: u32,
    pub iolab_version: String,
    /// The machine and command line behind the document.
    pub host: super::Host,
    pub runs: Vec<BonnieRun>,
    /// With repeats: three results, min, median and max, whose phases
    /// hold the spread of each figure; `null` for one run.
    pub spread: Option<Vec<BonnieRun>>,
}

impl BonnieDocument {
    pub fn new(
        iolab_version: &str,
        host: super::Host,
        runs: &[BonnieResult],
        spread: Option<&[BonnieResult; 3]>,
    ) -> BonnieDocument {
        BonnieDocument {
            schema: SCHEMA,
            version: VERSION,
            iolab_version: iolab_version.into(),
            host,
            runs: runs.iter().map(BonnieRun::from).collect(),
            spread: spread.map(|s| s.iter().map(BonnieRun::from).collect()),
        }
    }

    pub fn to_json(&self) -> String {
        super::pretty(self)
    }
}

/// One bonnie run (also a row of the stripes sweep).
#[derive(Clone, Debug, Serialize)]
pub struct BonnieRun {
    pub target: String,
    pub spec: BonnieSpec,
    pub phases: Vec<Phase>,
    /// Only where the file tests ran (so a stripes sweep's rows, which
    /// never run them, are as before).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file_tests: Option<FileTests>,
}

/// bonnie++'s file tests (`-n`).
#[derive(Clone, Debug, Serialize)]
pub struct FileTests {
    pub files: u64,
    pub max_bytes: u32,
    pub min_bytes: u32,
    pub dirs: u32,
    pub seed: u64,
    pub phases: Vec<FilePhase>,
}

#[derive(Clone, Debug, Serialize)]
pub struct FilePhase {
    /// seq_create, seq_stat, seq_del, ran_create, ran_stat or ran_del.
    pub name: String,
    pub files: u64,
    pub elapsed_s: f64,
    pub cpu_s: f64,
    /// Files a second.
    pub rate: f64,
    pub cpu_pct: f64,
    pub too_short: bool,
    pub latency_max_us: f64,
}

impl From<&FileTestsResult> for FileTests {
    fn from(t: &FileTestsResult) -> FileTests {
        let s = &t.spec;
        FileTests {
            files: s.files,
            max_bytes: s.max_bytes,
            min_bytes: s.min_bytes,
            dirs: s.dirs,
            seed: s.seed,
            phases: t.phases.iter().map(FilePhase::from).collect(),
        }
    }
}

impl From<&FilePhaseResult> for FilePhase {
    fn from(p: &FilePhaseResult) -> FilePhase {
        FilePhase {
            name: p.name.to_string(),
            files: p.files,
            elapsed_s: p.elapsed_s,
            cpu_s: p.cpu_s,
            rate: p.rate,
            cpu_pct: p.cpu_pct,
            too_short: p.too_short,
            latency_max_us: p.latency_max_us,
        }
    }
}

impl From<&BonnieResult> for BonnieRun {
    fn from(r: &BonnieResult) -> BonnieRun {
        let s = &r.spec;
        BonnieRun {
            target: r.target.clone(),
            spec: BonnieSpec {
                size_bytes: s.size_bytes,
                chunk_bytes: s.chunk_bytes,
                seeks: s.seeks,
                seekers: s.seekers,
                seed: s.seed,
            },
            phases: r.phases.iter().map(Phase::from).collect(),
            file_tests: r.files.as_ref().map(FileTests::from),
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct BonnieSpec {
    pub size_bytes: u64,
    pub chunk_bytes: u64,
    pub seeks: u64,
    pub seekers: u32,
    pub seed: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Phase {
    /// putc, put_block, rewrite, getc, get_block or seeks.
    pub name: String,
    /// Bytes moved (for seeks: seeks done).
    pub amount: u64,
    pub elapsed_s: f64,
    pub cpu_s: f64,
    /// KiB/s, or seeks/s.
    pub rate: f64,
    pub cpu_pct: f64,
    /// Shorter than bonnie can measure: the table prints `+++`.
    pub too_short: bool,
    pub latency_max_us: f64,
    pub device_reads: u64,
    pub device_writes: u64,
}

impl From<&PhaseResult> for Phase {
    fn from(p: &PhaseResult) -> Phase {
        Phase {
            name: p.name.to_string(),
            amount: p.amount,
            elapsed_s: p.elapsed_s,
            cpu_s: p.cpu_s,
            rate: p.rate,
            cpu_pct: p.cpu_pct,
            too_short: p.too_short,
            latency_max_us: p.latency_max_us,
            device_reads: p.device_reads,
            device_writes: p.device_writes,
        }
    }
}
