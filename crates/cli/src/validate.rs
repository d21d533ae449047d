//! `iolab validate`: after a crash (or any time), replay a run's journal
//! and check every block it says was written. Reads only: the journal and
//! a file or block device target are opened read-only, under a shared
//! lock, so a run holding either exclusively is waited for by no one and
//! refused here. With `--log` the block log's replay writes the target,
//! which is then opened for writing under an exclusive lock.
//!
//! Exit status: 0 every block holds what the journal says; 1 bad blocks
//! (lost, damaged, misplaced, torn), a failure, or nothing checked where
//! the journal records writes; 2 a usage error; 3 no bad block, but
//! blocks ahead of the journal: it is incomplete; 4 no bad block, but
//! the journal is damaged: records it had made durable no longer read.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use clap::Args;
use device::FileDevice;
use lab::validate::{journal_sector_bytes, open_journal, open_target, same_target};
use workloads::journal::JOURNAL_FILE;
use workloads::recover::{recover_watched_with, RecoverProgress, Verdict};

use lab::stack::Stack;

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// The target the run wrote (as given to `iolab run`).
    #[arg(long, short = 't', value_name = "TARGET")]
    pub target: String,
    /// The run's journal directory.
    #[arg(long, value_name = "DIR")]
    pub journal: PathBuf,
    /// Accept blocks whose in-flight write was torn (some sectors old, the
    /// rest new), for devices without atomic multi-sector writes.
    #[arg(long)]
    pub torn_ok: bool,
    /// Read every block of the journal's region, not only those it
    /// recorded: finds writes whose every record the crash lost (a journal
    /// disk whose cache lied, an async journal), at the cost of reading
    /// the whole region.
    #[arg(long)]
    pub every_block: bool,
    /// Read the target with O_DIRECT.
    #[arg(long)]
    pub direct: bool,
    /// Write the verdict as JSON to FILE ("-" for standard output).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// The run went through iolab's block log (`iolab run --log`): replay
    /// the log first (this writes the target, as any reopening does) and
    /// check the data through it.
    #[arg(long)]
    pub log: bool,
    /// With --log: the log is on this file or device, not inside the target.
    #[arg(long, value_name = "PATH")]
    pub log_device: Option<PathBuf>,
    /// Where the replayed key map lives: auto (default: memory up to 256 MiB
    /// of keys, a file above), memory, or file (a sparse scratch file in
    /// --key-map-dir, mapped and unlinked at once).
    #[arg(long, value_name = "WHERE")]
    pub key_map: Option<validation::KeyMapChoice>,
    /// The directory of the key map's scratch file (default: the journal
    /// directory).
    #[arg(long, value_name = "DIR")]
    pub key_map_dir: Option<PathBuf>,
}

impl ValidateArgs {
    /// The target as the flags name it.
    fn plan(&self) -> lab::validate::Target {
        lab::validate::Target {
            target: self.target.clone(),
            log: self.log,
            log_device: self.log_device.clone(),
            direct: self.direct,
        }
    }
}

pub fn run(args: ValidateArgs, ranks: Option<&lab::mpi::Ranks>) -> anyhow::Result<ExitCode> {
    crate::check_destinations(args.json.as_deref(), None)?;
    if let Some(ranks) = ranks {
        let json = args.json.iter().filter(|p| p.as_os_str() != "-");
        ranks.own_paths(&json.map(|p| ("json", p.as_path())).collect::<Vec<_>>())?;
    }
    let mut key_map = lab::job::key_map_spec(args.key_map.unwrap_or_default(), args.key_map_dir.as_deref())?;
    key_map.dir.get_or_insert_with(|| args.journal.clone());
    let journal = open_journal(&args.journal)?;
    // A regular file's sector size is what the run gave it (--sector-size):
    // the journal says which.
    let sector_bytes = journal_sector_bytes(&args.journal.join(JOURNAL_FILE));
    let target = open_target(&args.plan(), sector_bytes)?;
    let dev = target.device().as_ref();
    let verdict = check(dev, &journal, &args, &key_map, ranks.is_none())?;
    if !same_target(dev.name(), &verdict.journal_target) {
        eprintln!(
            "iolab validate: note: the journal was written for {}, checking {}",
            verdict.journal_target,
            dev.name()
        );
    }
    let status = crate::exit::verdict(report::Outcome::of(&verdict));
    let Some(ranks) = ranks else {
        print_verdict(&verdict, &args)?;
        target.record()?;
        return Ok(ExitCode::from(status));
    };
    each_rank(&args, ranks, &verdict, status, target)
}

/// Every block the journal names checked against it (with a progress
/// line on a terminal when the rank is `alone`).
fn check(
    dev: &dyn device::Device,
    journal: &FileDevice,
    args: &ValidateArgs,
    key_map: &workloads::KeyMapSpec,
    alone: bool,
) -> anyhow::Result<Verdict> {
    let progress = RecoverProgress::default();
    let done = AtomicBool::new(false);
    let verdict = std::thread::scope(|scope| {
        let (watched, finished) = (&progress, &done);
        let display = scope.spawn(move || {
            if alone {
                show_progress(watched, finished)
            }
        });
        let verdict = recover_watched_with(dev, journal, args.torn_ok, key_map, &progress, args.every_block);
        done.store(true, Ordering::Relaxed);
        display.thread().unpark();
        verdict
    })?;
    Ok(verdict)
}

/// Under mpirun: each rank checks its own target against its own
/// journal; rank 0 prints every verdict and a summary.
fn each_rank(
    args: &ValidateArgs,
    ranks: &lab::mpi::Ranks,
    verdict: &Verdict,
    status: u8,
    target: Stack,
) -> anyhow::Result<ExitCode> {
    if let Some(path) = &args.json {
        let doc = report::json::ValidateDocument::new(
            env!("CARGO_PKG_VERSION"),
            lab::host::wire(),
            &args.target,
            &args.journal,
            verdict,
        );
        crate::write_json(path, &doc.to_json())?;
    }
    target.record()?;
    let mine = format!(
        "{status}\t{}\t{}\t{}",
        ranks.host,
        args.target,
        report::verdict_text(verdict, crate::exit::VERDICT_EXITS)
    );
    let Some(all) = ranks.gather(mine) else { return Ok(ExitCode::from(status)) };
    let mut worst = 0u8;
    let mut bad = 0;
    for (rank, text) in all.iter().enumerate() {
        let mut parts = text.splitn(4, '\t');
        let code: u8 = parts.next().and_then(|c| c.parse().ok()).unwrap_or(1);
        let (host, target, verdict) =
            (parts.next().unwrap_or(""), parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        println!("rank {rank} on {host}, {target}:");
        print!("{verdict}");
        worst = worst.max(code);
        bad += usize::from(code != 0);
    }
    println!(
        "{} ranks: {} ok, {bad} not (exit status {worst}, the worst of theirs)",
        all.len(),
        all.len() - bad
    );
    Ok(ExitCode::from(worst))
}

/// A bar on standard error while recovery runs (hidden when that is not a
/// terminal): the journal's replay, then the key blocks checked through.
fn show_progress(progress: &RecoverProgress, done: &AtomicBool) {
    use indicatif::{ProgressBar, ProgressStyle};
    let bar = ProgressBar::new_spinner();
    bar.set_message("replaying the journal");
    let mut counting = false;
    while !done.load(Ordering::Relaxed) {
        std::thread::park_timeout(Duration::from_millis(250));
        let blocks = progress.blocks.load(Ordering::Relaxed);
        if blocks > 0 && !counting {
            counting = true;
            let template = "validate [{elapsed_precise}] {bar:30} {pos}/{len} key blocks, ETA {eta}";
            if let Ok(style) = ProgressStyle::with_template(template) {
                bar.set_style(style);
            }
            bar.set_length(blocks);
        }
        if counting {
            bar.set_position(progress.checked.load(Ordering::Relaxed));
        } else {
            bar.tick();
        }
    }
    bar.finish_and_clear();
}

/// The verdict as JSON (only that, when it goes to standard output),
/// else in words.
fn print_verdict(v: &Verdict, args: &ValidateArgs) -> anyhow::Result<()> {
    if let Some(path) = &args.json {
        let doc = report::json::ValidateDocument::new(
            env!("CARGO_PKG_VERSION"),
            lab::host::wire(),
            &args.target,
            &args.journal,
            v,
        );
        crate::write_json(path, &doc.to_json())?;
        if path.as_os_str() == "-" {
            return Ok(());
        }
    }
    print!("{}", report::verdict_text(v, crate::exit::VERDICT_EXITS));
    Ok(())
}
