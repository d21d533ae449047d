//! `iolab volume create`: the set made by `lab::volume_create`, and what
//! it holds said.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use device::Device;

use crate::UsageError;

pub fn create(args: CreateArgs) -> anyhow::Result<ExitCode> {
    let create_bytes = args
        .drive_size
        .as_deref()
        .map(|s| workloads::spec::parse_bytes("drive-size", s))
        .transpose()
        .map_err(UsageError::from)?;
    let set = lab::volume_create::create(&args.config, create_bytes, args.force)?;
    for v in &set.volumes {
        println!("created volume {} ({} bytes)", v.name(), v.size_bytes());
        if let Some((drive, _, _)) = v.raid5_log_drive() {
            println!("  its RAID-5 row updates go through the stripe log on drive {drive}");
        }
        for (plex, state) in v.states_not_up() {
            if state == volume::State::Initializing {
                println!(
                    "  plex {plex} is initializing: its drives held data, so its RAID-5 parity is not right \
                     yet; it takes no I/O until `iolab volume init {plex} {}` builds it",
                    args.config.display()
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Debug, Args)]
pub struct CreateArgs {
    /// The configuration file (Vinum syntax: drive/volume/plex/sd lines).
    pub config: PathBuf,
    /// Create missing drive files, sparse, of this size (drive files that
    /// exist are used at their size).
    #[arg(long, value_name = "SIZE")]
    pub drive_size: Option<String>,
    /// Overwrite drives that hold a file system, a partition table or
    /// another iolab volume.
    #[arg(long)]
    pub force: bool,
}
