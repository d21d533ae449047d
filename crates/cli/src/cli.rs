use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// iolab: build storage stacks, drive workloads through them, validate
/// every byte, crash them on purpose, and report honestly.
#[derive(Debug, Parser)]
#[command(name = "iolab", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {}

pub fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {}
}
