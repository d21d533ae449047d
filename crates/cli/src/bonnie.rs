//! `iolab bonnie`: the six bonnie phases on a file, a device or a volume.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use workloads::bonnie::{run_bonnie, BonnieSpec};
use workloads::spec::parse_bytes;

use crate::stack::{self, Stack};
use crate::UsageError;

#[derive(Debug, Args)]
pub struct BonnieArgs {
    /// A file or block device path, mem:SIZE, a volume configuration file or
    /// volume:NAME:DRIVES. A missing file is created sparse with --size.
    #[arg(long, short = 't', value_name = "TARGET")]
    pub target: String,
    /// Bytes of the target to use (bonnie's file size); default: all of it.
    #[arg(long, value_name = "SIZE")]
    pub size: Option<String>,
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
    /// Also print bonnie++ 2.00's CSV line (bon_csv2txt and bon_csv2html read it).
    #[arg(long)]
    pub csv: bool,
    /// Also print bonnie++ 1.03's CSV line.
    #[arg(long)]
    pub csv_103: bool,
    /// Write the results as JSON to FILE ("-" for standard output).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
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
    let size = args.size.as_deref().map(|s| parse_bytes("size", s)).transpose().map_err(UsageError::from)?;
    let chunk = parse_bytes("chunk", &args.chunk).map_err(UsageError::from)?;
    let options = stack::OpenOptions {
        direct: !args.buffered,
        read_only: false,
        sector_bytes: None,
        create_bytes: size,
        lock: stack::Lock::Warn(device::LockKind::Exclusive),
    };
    let target = Stack::open(&args.target, &options)?;
    stack::check_writable(&target, args.force)?;
    let dev = target.device().as_ref();
    let size_bytes = size.unwrap_or(dev.size_bytes() - dev.size_bytes() % chunk.max(1));
    let spec = BonnieSpec {
        size_bytes,
        chunk_bytes: chunk,
        seeks: args.seeks,
        seekers: args.seekers,
        seed: args.seed,
    };
    spec.check(dev).map_err(UsageError::from)?;
    let cache = match (&target.origin.path, args.buffered) {
        (None, _) => "in memory or a volume",
        (Some(_), false) => "O_DIRECT: the page cache is bypassed",
        (Some(_), true) => "buffered: figures include the page cache unless the size is well over RAM",
    };
    eprintln!("iolab bonnie: {} bytes of {} ({cache})", size_bytes, dev.name());
    if args.repeat == 0 {
        return Err(UsageError("--repeat: must be at least 1".into()).into());
    }
    let mut results = Vec::with_capacity(args.repeat as usize);
    for _ in 0..args.repeat {
        results.push(run_bonnie(dev, &spec)?);
    }
    let name = args.name.clone().unwrap_or_else(|| "iolab".into());
    let to_stdout = args.json.as_deref().is_none_or(|p| p.as_os_str() != "-");
    let spread = if results.len() > 1 { report::bonnie_spread(&results) } else { None };
    if to_stdout {
        let mut rows: Vec<(String, &workloads::bonnie::BonnieResult, Vec<u64>)> =
            results.iter().map(|r| (name.clone(), r, Vec::new())).collect();
        if let Some(spread) = &spread {
            rows.extend(
                ["min", "median", "max"]
                    .iter()
                    .zip(spread.iter())
                    .map(|(n, r)| (n.to_string(), r, Vec::new())),
            );
        }
        print!("{}", report::bonnie_table(&rows, &[]));
        for r in &results {
            if args.csv {
                println!("{}", report::bonnie_csv(&name, r));
            }
            if args.csv_103 {
                println!("{}", report::bonnie_csv_103(&name, r));
            }
        }
    }
    if let Some(path) = &args.json {
        let doc = report::json::BonnieDocument::new(env!("CARGO_PKG_VERSION"), &results, spread.as_ref());
        crate::write_json(path, &doc.to_json())?;
    }
    target.close()?;
    Ok(ExitCode::SUCCESS)
}
