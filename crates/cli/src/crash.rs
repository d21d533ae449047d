//! `iolab crash`: build a stack on recording devices, run transactions on
//! it, and check its promise on every crash state (workloads::crash).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use blocklog::{LoggedDevice, Mode, Placement};
use clap::{Args, ValueEnum};
use device::Device;
use workloads::crash::{enumerate, BuildStack, CrashReport, CrashSpec};
use workloads::spec::parse_bytes;

use crate::UsageError;

/// The stacks `iolab crash` can build.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Stack {
    /// A device behind the block log in log mode (transactions committed at each flush).
    Log,
    /// The same device written in place, durable at each flush (no log).
    Async,
    /// The same device written in place, each write durable at once (no log).
    Sync,
}

#[derive(Debug, Args)]
pub struct CrashArgs {
    /// The stack to crash.
    #[arg(long, value_enum, default_value = "log")]
    pub stack: Stack,
    /// Bytes of the stack's data area the transactions write.
    #[arg(long, value_name = "SIZE", default_value = "1m")]
    pub size: String,
    /// Size of the block log (log stacks).
    #[arg(long, value_name = "SIZE", default_value = "512k")]
    pub log_size: String,
    /// Transactions to run.
    #[arg(long, value_name = "N", default_value_t = 200)]
    pub transactions: u64,
    /// Blocks per transaction: 1 to N, chosen at random.
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub max_blocks: u32,
    /// Block size (a metadata block).
    #[arg(long, value_name = "SIZE", default_value = "4k")]
    pub block_size: String,
    /// Flush after every N transactions.
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub sync_every: u64,
    /// Crash states sampled between flushes (with dropped, reordered and
    /// torn writes), besides one after every flush.
    #[arg(long, value_name = "N", default_value_t = 2000)]
    pub states: u64,
    /// Seed of the transactions and of the sampled states.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub seed: u64,
    /// Check only this state (as named in an earlier report).
    #[arg(long, value_name = "N")]
    pub state: Option<u64>,
    /// Write the report as JSON to FILE ("-" for standard output).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

pub fn run(args: CrashArgs) -> anyhow::Result<ExitCode> {
    let data_bytes = parse_bytes("size", &args.size).map_err(UsageError::from)?;
    let log_bytes = parse_bytes("log-size", &args.log_size).map_err(UsageError::from)?;
    let block_bytes = parse_bytes("block-size", &args.block_size).map_err(UsageError::from)?;
    if block_bytes == 0 || block_bytes % 512 != 0 || block_bytes > data_bytes {
        return Err(UsageError(format!(
            "--block-size: {block_bytes} must be a multiple of 512 and at most --size"
        ))
        .into());
    }
    let spec = CrashSpec {
        transactions: args.transactions,
        max_blocks: args.max_blocks,
        block_bytes,
        region_blocks: data_bytes / block_bytes,
        sync_every: args.sync_every,
        sampled_states: args.states,
        seed: args.seed,
        only_state: args.state,
    };
    let mode = match args.stack {
        Stack::Log => Mode::Log,
        Stack::Async => Mode::Async,
        Stack::Sync => Mode::Sync,
    };
    let build = move |raw: Vec<Arc<dyn Device>>| -> Result<Arc<dyn Device>, String> {
        let dev = LoggedDevice::format(Arc::clone(&raw[0]), Placement::Inside { log_bytes }, mode)
            .map_err(|e| e.to_string())?;
        Ok(Arc::new(dev))
    };
    let reopen = move |images: Vec<Arc<dyn Device>>| -> Result<Arc<dyn Device>, String> {
        let dev = LoggedDevice::open(Arc::clone(&images[0]), None, mode).map_err(|e| e.to_string())?;
        match &dev.replay_report().stopped {
            Some(stop) => Err(format!("log replay stopped at LSN {}: {}", stop.lsn, stop.reason)),
            None => Ok(Arc::new(dev)),
        }
    };
    let build: &BuildStack<'_> = &build;
    let reopen: &BuildStack<'_> = &reopen;
    let report = enumerate(&spec, &[log_bytes + data_bytes], build, reopen).map_err(|e| match e {
        workloads::crash::CrashError::Spec(what) => anyhow::Error::from(UsageError(what)),
        other => anyhow::Error::from(other),
    })?;
    let to_stdout = args.json.as_deref().is_none_or(|p| p.as_os_str() != "-");
    if to_stdout {
        print!("{}", text(&args, &report));
    }
    if let Some(path) = &args.json {
        let doc = serde_json::json!({
            "schema": "iolab-crash",
            "version": 1,
            "stack": format!("{:?}", args.stack).to_lowercase(),
            "seed": args.seed,
            "report": report,
        });
        let doc = serde_json::to_string_pretty(&doc)?;
        if path.as_os_str() == "-" {
            println!("{doc}");
        } else {
            std::fs::write(path, doc + "\n")
                .with_context(|| format!("{}: cannot write the JSON", path.display()))?;
        }
    }
    Ok(if report.violations == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

fn text(args: &CrashArgs, r: &CrashReport) -> String {
    let stack = format!("{:?}", args.stack).to_lowercase();
    let mut out = format!(
        "iolab crash: stack {stack}, {} transactions of 1-{} blocks of {}, a flush every {}, seed {}\n",
        r.transactions, args.max_blocks, args.block_size, args.sync_every, args.seed
    );
    out += &format!("history: {} events ({} writes, {} flushes)\n", r.events, r.writes, r.flushes);
    out += &format!(
        "states checked: {} ({} after flushes, {} sampled between them)\n",
        r.states_checked, r.flush_states, r.sampled_states
    );
    out += &format!(
        "violations: {} (torn transactions {}, torn writes {}, lost {}, corrupt {}, reopen failed {})\n",
        r.violations, r.torn_transactions, r.torn_writes, r.lost, r.corrupt, r.open_failed
    );
    if let Some(v) = &r.first_violation {
        out += &format!(
            "first violation: state {} (crash after event {} of {}, {} seed {}): {:?}: {}\n",
            v.state, v.after_events, r.events, v.policy, v.seed, v.class, v.detail
        );
        out += &format!(
            "check it again: iolab crash --stack {stack} --size {} --log-size {} --transactions {} --max-blocks {} \
             --block-size {} --sync-every {} --states {} --seed {} --state {}\n",
            args.size,
            args.log_size,
            args.transactions,
            args.max_blocks,
            args.block_size,
            args.sync_every,
            args.states,
            args.seed,
            v.state
        );
    }
    out
}
