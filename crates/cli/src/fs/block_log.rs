//! The flags that put a file system behind iolab's block log.

use std::path::PathBuf;

use clap::Args;

/// The file system behind iolab's block log, as `iolab run --log` puts a
/// target behind it.
#[derive(Debug, Default, Args)]
pub struct BlockLogArgs {
    /// Put the file system behind iolab's block log in this mode (log:
    /// writes committed through the log at each flush; async; sync). mkfs
    /// formats the log; every other command replays it first (a command
    /// that only reads replays it into memory, leaving the target as it is).
    #[arg(long, value_name = "MODE")]
    pub block_log: Option<blocklog::Mode>,
    /// With --block-log: the log is on this file or device, not inside the target.
    #[arg(long, value_name = "PATH", requires = "block_log")]
    pub block_log_device: Option<PathBuf>,
}

impl BlockLogArgs {
    /// The block log these flags ask for.
    pub fn plan(&self) -> lab::fs::BlockLog {
        lab::fs::BlockLog { mode: self.block_log, device: self.block_log_device.clone() }
    }
}
