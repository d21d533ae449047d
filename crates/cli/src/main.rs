//! The `iolab` binary: turns the command line into calls on the library
//! crates and their results into text. Only this crate prints.

use std::process::ExitCode;

use clap::Parser;

mod cli;

fn main() -> ExitCode {
    let args = match cli::Cli::try_parse() {
        Ok(args) => args,
        Err(e) => {
            // clap prints help and version to stdout (exit 0) and usage
            // errors to stderr (exit 2).
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    match cli::dispatch(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("iolab: error: {e:#}");
            ExitCode::from(1)
        }
    }
}
