//! `iolab bonnie`: the six bonnie phases on a file, a device or a volume;
//! on a directory, as bonnie++ -d DIR runs them, the six phases on a test
//! file in it and then bonnie++'s file tests (`-n`) in a directory of
//! their own there.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use std::io::IsTerminal;

use clap::Args;
use lab::bonnie::{Plan, Watch};
use workloads::bonnie::{BonnieResult, PHASES};
use workloads::spec::parse_bytes;
use workloads::tree::FileTestSpec;

use crate::UsageError;

#[derive(Clone, Debug, Args)]
pub struct BonnieArgs {
    /// A file or block device path, mem:SIZE, a volume configuration file or
    /// volume:NAME:DRIVES. A missing file is created sparse with --size. A
    /// directory runs as bonnie++ -d does: a test file of --size in it,
    /// then the file tests (-n).
    #[arg(long, short = 't', value_name = "TARGET")]
    pub target: String,
    /// Bytes of the target to use (bonnie's file size); default: all of it.
    /// On a directory: the test file's size (needed; 0 runs the file
    /// tests alone, as bonnie++ -s 0).
    #[arg(long, value_name = "SIZE")]
    pub size: Option<String>,
    /// bonnie++'s file tests on a directory target: NUM[:MAX[:MIN[:DIRS]]],
    /// NUM files in units of 1024 created, read back and deleted in name
    /// order and in random order, each of MIN to MAX bytes, over DIRS
    /// directories (default 16: 16,384 empty files in one; 0 skips them).
    #[arg(short = 'n', long = "files", value_name = "SPEC")]
    pub files: Option<String>,
    /// Transfer size of the block phases and the seeks.
    #[arg(long, value_name = "SIZE", default_value = "8k")]
    pub chunk: String,
    /// Random seeks in all.
    #[arg(long, value_name = "N", default_value_t = 8192)]
    pub seeks: u64,
    /// Concurrent seekers.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub seekers: u32,
    /// Use the page cache on files and devices (default: O_DIRECT, so the
    /// figures are the device's, not the cache's).
    #[arg(long)]
    pub buffered: bool,
    /// Machine name in the table and the CSV line.
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Print bonnie++ 2.00's CSV line on standard output (bon_csv2txt and
    /// bon_csv2html read it: `iolab bonnie --csv | bon_csv2txt`); the
    /// table then goes to standard error.
    #[arg(long)]
    pub csv: bool,
    /// Print bonnie++ 1.03's CSV line (the table to standard error).
    #[arg(long)]
    pub csv_103: bool,
    /// Write the results as JSON to FILE ("-" for standard output).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Draw the results' charts as SVG files into DIR (made if missing).
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// Run N times and add min / median / max rows.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub repeat: u32,
    /// Seed of the seek positions.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub seed: u64,
    /// Write to a target that holds a file system, a partition table or an
    /// iolab volume.
    #[arg(long)]
    pub force: bool,
}

pub fn run(args: BonnieArgs) -> anyhow::Result<ExitCode> {
    crate::check_destinations(args.json.as_deref(), args.plot.as_deref())?;
    let size = args.size.as_deref().map(|s| parse_bytes("size", s)).transpose().map_err(UsageError::from)?;
    let chunk = parse_bytes("chunk", &args.chunk).map_err(UsageError::from)?;
    if args.repeat == 0 {
        return Err(UsageError("--repeat: must be at least 1".into()).into());
    }
    let target = Path::new(&args.target);
    if !target.is_dir() && args.files.as_deref().is_some_and(|f| f != "0") {
        return Err(UsageError(format!(
            "-n: the file tests need a file system: give --target a directory (bonnie++ -d DIR); {} is not one",
            args.target
        ))
        .into());
    }
    let files = match args.files.as_deref().unwrap_or("16") {
        "0" => None,
        text => Some(FileTestSpec::parse(text, args.seed).map_err(UsageError)?),
    };
    let plan = Plan {
        size,
        chunk,
        seeks: args.seeks,
        seekers: args.seekers,
        seed: args.seed,
        repeat: args.repeat,
        buffered: args.buffered,
        force: args.force,
        files,
    };
    let results = lab::bonnie::run(&plan, target, &PhaseLine::default())?;
    report(&args, &results)
}

/// The progress line of a bonnie run on a terminal: which of the six
/// phases runs, how far through the file it is and the time it has left
/// (the seeks: for how long they run); nothing when stderr is not a
/// terminal.
#[derive(Default)]
struct PhaseLine(std::sync::Mutex<Option<indicatif::ProgressBar>>);

impl Watch for PhaseLine {
    fn round(&self, round: u32, rounds: u32) {
        if !std::io::stderr().is_terminal() {
            return;
        }
        let bar = indicatif::ProgressBar::new(1);
        bar.set_prefix(if rounds > 1 { format!("bonnie {}/{rounds}", round + 1) } else { "bonnie".into() });
        bar.enable_steady_tick(std::time::Duration::from_millis(250));
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(bar);
    }

    fn phase(&self, k: usize) {
        if let Some(bar) = &*self.0.lock().unwrap_or_else(|e| e.into_inner()) {
            // The seeks are told only as they begin: no bar to fill.
            let template = match PHASES[k] {
                "seeks" => "{prefix} [{elapsed_precise}] {msg}",
                _ => "{prefix} [{elapsed_precise}] {msg:28} {bar:25} {percent:>3}% ETA {eta}",
            };
            if let Ok(style) = indicatif::ProgressStyle::with_template(template) {
                bar.set_style(style.progress_chars("=> "));
            }
            bar.reset();
            bar.set_message(format!("phase {} of {}: {}", k + 1, PHASES.len(), PHASES[k]));
        }
    }

    fn advanced(&self, done: u64, total: u64) {
        if let Some(bar) = &*self.0.lock().unwrap_or_else(|e| e.into_inner()) {
            bar.set_length(total.max(1));
            bar.set_position(done);
        }
    }

    fn round_done(&self) {
        if let Some(bar) = self.0.lock().unwrap_or_else(|e| e.into_inner()).take() {
            bar.finish_and_clear();
        }
    }
}

fn report(args: &BonnieArgs, results: &[BonnieResult]) -> anyhow::Result<ExitCode> {
    let name = args.name.clone().unwrap_or_else(|| "iolab".into());
    let to_stdout = args.json.as_deref().is_none_or(|p| p.as_os_str() != "-");
    let spread = if results.len() > 1 { report::bonnie_spread(results) } else { None };
    if to_stdout {
        let mut rows: Vec<(String, &BonnieResult, Vec<u64>)> =
            results.iter().map(|r| (name.clone(), r, Vec::new())).collect();
        if let Some(spread) = &spread {
            rows.extend(
                ["min", "median", "max"]
                    .iter()
                    .zip(spread.iter())
                    .map(|(n, r)| (n.to_string(), r, Vec::new())),
            );
        }
        // With a CSV line asked for, standard output carries the CSV alone,
        // so `iolab bonnie --csv | bon_csv2txt` works; the table goes to
        // standard error.
        let table = report::bonnie_table(&rows, &[]);
        if args.csv || args.csv_103 {
            eprint!("{table}");
        } else {
            print!("{table}");
        }
        for r in results {
            if args.csv {
                println!("{}", report::bonnie_csv(&name, r));
            }
            if args.csv_103 {
                println!("{}", report::bonnie_csv_103(&name, r));
            }
        }
    }
    let doc = report::json::BonnieDocument::new(
        env!("CARGO_PKG_VERSION"),
        lab::host::wire(),
        results,
        spread.as_ref(),
    );
    if let Some(path) = &args.json {
        crate::write_json(path, &doc.to_json())?;
    }
    if let Some(dir) = &args.plot {
        crate::write_plots(dir, &doc.to_json())?;
    }
    Ok(ExitCode::SUCCESS)
}
