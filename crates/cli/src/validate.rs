//! `iolab validate`: after a crash (or any time), replay a run's journal
//! and check every block it says was written. Reads only.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use device::AlignedBuf;
use serde::Serialize;
use validation::journal::replay;
use validation::{check_block, BlockVerdict, Expect, FindingKind};
use workloads::journal::JOURNAL_FILE;

use crate::target;

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
    /// Read the target with O_DIRECT.
    #[arg(long)]
    pub direct: bool,
    /// Write the verdict as JSON to FILE ("-" for standard output).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

/// Blocks by verdict.
#[derive(Debug, Default, Serialize)]
pub struct Verdict {
    pub verified: u64,
    pub pending_old: u64,
    pub pending_new: u64,
    pub torn: u64,
    pub lost: u64,
    pub misdirected: u64,
    pub corrupt: u64,
    pub zeros: u64,
    pub foreign: u64,
    /// The first bad blocks: (offset, what).
    pub bad: Vec<(u64, String)>,
    /// Where the journal ended early, if it did.
    pub journal_torn_at: Option<u64>,
}

/// Bad blocks listed in the report; the counts go on.
const BAD_LISTED_MAX: usize = 50;

pub fn run(args: ValidateArgs) -> anyhow::Result<ExitCode> {
    let path = args.journal.join(JOURNAL_FILE);
    let bytes =
        std::fs::read(&path).with_context(|| format!("{}: cannot read the journal", path.display()))?;
    let replayed = replay(&bytes).with_context(|| format!("{}", path.display()))?;
    let h = &replayed.header;
    let options = target::OpenOptions { direct: args.direct, sector_bytes: None, create_bytes: None };
    let target = target::open(&args.target, &options)?;
    let dev = target.device.as_ref();
    if dev.name() != h.target {
        eprintln!("iolab validate: note: the journal was written for {}, checking {}", h.target, dev.name());
    }
    let end = h.region_start + h.blocks * h.key_block_bytes;
    if end > dev.size_bytes() || u64::from(dev.sector_bytes()) != u64::from(h.sector_bytes) {
        anyhow::bail!(
            "{}: does not match the journal (region ends at {end}, sector {} bytes; the target has {} bytes, sector {})",
            dev.name(),
            h.sector_bytes,
            dev.size_bytes(),
            dev.sector_bytes()
        );
    }
    let mut expect: Vec<Option<Expect>> =
        replayed.keys.iter().map(|&k| (k != 0).then_some(Expect::Key(k))).collect();
    for p in &replayed.pending {
        for (block, old, new) in &p.blocks {
            expect[*block as usize] = Some(Expect::OldOrNew { old: *old, new: *new });
        }
    }
    let mut verdict = Verdict { journal_torn_at: replayed.torn_tail.map(|t| t.0), ..Verdict::default() };
    let mut buf = AlignedBuf::zeroed(h.key_block_bytes as usize, dev.buffer_align().max(4096));
    for (block, e) in expect.iter().enumerate() {
        let Some(e) = e else { continue };
        let offset = h.region_start + block as u64 * h.key_block_bytes;
        dev.read_at(&mut buf, offset)?;
        tally(
            &mut verdict,
            offset,
            check_block(&buf, h.sector_bytes as usize, offset, *e, h.run_id),
            args.torn_ok,
        );
    }
    let clean = verdict.torn * u64::from(!args.torn_ok)
        + verdict.lost
        + verdict.misdirected
        + verdict.corrupt
        + verdict.zeros
        + verdict.foreign
        == 0;
    print_verdict(&verdict, &args)?;
    target::finish(&target)?;
    Ok(if clean { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

fn tally(v: &mut Verdict, offset: u64, verdict: BlockVerdict, torn_ok: bool) {
    let what = match verdict {
        BlockVerdict::Ok => {
            v.verified += 1;
            return;
        }
        BlockVerdict::PendingOld => {
            v.pending_old += 1;
            return;
        }
        BlockVerdict::PendingNew => {
            v.pending_new += 1;
            return;
        }
        BlockVerdict::Torn { new_sectors, old_sectors } => {
            v.torn += 1;
            if torn_ok {
                return;
            }
            format!("torn: {new_sectors} sectors new, {old_sectors} old")
        }
        BlockVerdict::Bad { findings } => {
            let first = findings[0];
            let counter = match first.kind {
                FindingKind::LostWrite { .. } => &mut v.lost,
                FindingKind::Misdirected { .. } => &mut v.misdirected,
                FindingKind::ForeignRun { .. } => &mut v.foreign,
                FindingKind::UnexpectedZeros => &mut v.zeros,
                FindingKind::Corrupt { .. } => &mut v.corrupt,
            };
            *counter += 1;
            format!("sector {}: {:?} ({} bad sectors)", first.address, first.kind, findings.len())
        }
    };
    if v.bad.len() < BAD_LISTED_MAX {
        v.bad.push((offset, what));
    }
}

fn print_verdict(v: &Verdict, args: &ValidateArgs) -> anyhow::Result<()> {
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(v)?;
        if path.as_os_str() == "-" {
            println!("{text}");
            return Ok(());
        }
        std::fs::write(path, text + "\n")
            .with_context(|| format!("{}: cannot write the JSON", path.display()))?;
    }
    if let Some(at) = v.journal_torn_at {
        println!("journal: ends with a damaged or truncated record at byte {at} (not durable; ignored)");
    }
    println!(
        "blocks: {} verified, {} pending-old, {} pending-new, {} torn{}, {} lost, {} misdirected, {} corrupt, {} zeroed, {} from another run",
        v.verified,
        v.pending_old,
        v.pending_new,
        v.torn,
        if args.torn_ok { " (accepted)" } else { "" },
        v.lost,
        v.misdirected,
        v.corrupt,
        v.zeros,
        v.foreign
    );
    for (offset, what) in &v.bad {
        println!("  block at {offset}: {what}");
    }
    Ok(())
}
