//! The `iolab` binary: turns the command line into calls on the library
//! crates and their results into text. Only this crate prints.

use std::process::ExitCode;

use clap::Parser;

mod bonnie;
mod cli;
mod crash;
mod errors;
mod exit;
mod fs;
mod interrupt;
mod logs;
mod output;
mod report_cmd;
mod run;
mod steps;
mod sweep;
mod sweep_journal;
mod sweep_policies;
mod usage_hints;
mod validate;
mod volume;

pub(crate) use errors::{is_usage_error, message, Interrupted, UsageError};
pub(crate) use output::{check_destinations, check_output, check_plot_dir, write_json, write_plots};

fn main() -> ExitCode {
    // The documents say when the work began and how it was asked for:
    // the time and the arguments, noted before anything else.
    lab::host::note_start(&std::env::args_os().collect::<Vec<_>>());
    // `iolab run | head` ends quietly when head stops reading, as other
    // command-line tools do, instead of panicking on the broken pipe.
    // SAFETY: restoring a signal's default disposition before any thread
    // starts.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    // What the library says on the way goes to stderr, as the binary's own
    // warnings do; nothing is installed before this, so this cannot fail.
    let _ = lab::say::install(|said| match said.kind {
        lab::say::Kind::Warning => eprintln!("iolab: warning: {}", said.text),
        lab::say::Kind::Info => eprintln!("iolab: {}", said.text),
    });
    let mut ranks = match lab::mpi::start() {
        Ok(ranks) => ranks,
        Err(e) => {
            eprintln!("iolab: error: {e}");
            return ExitCode::from(exit::USAGE);
        }
    };
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let argv = match &mut ranks {
        Some(ranks) => ranks.substitute_all(argv),
        None => argv,
    };
    let args = match cli::Cli::try_parse_from(argv) {
        Ok(args) => args,
        Err(e) => {
            // clap prints help and version to stdout (exit 0) and usage
            // errors to stderr (exit 2).
            let _ = e.print();
            if let Some(hint) = usage_hints::hint(&e) {
                eprintln!("{hint}");
            }
            return if e.use_stderr() { ExitCode::from(exit::USAGE) } else { ExitCode::SUCCESS };
        }
    };
    match cli::dispatch(args, ranks.as_ref()) {
        Ok(code) => code,
        Err(e) => {
            let code = exit::of_error(&e);
            if let Some(agreed) = e.downcast_ref::<lab::mpi::Agreed>() {
                // Every rank knows; rank 0 says it once for all.
                if agreed.report {
                    eprintln!("iolab: error: {}", agreed.text);
                }
                return ExitCode::from(code);
            }
            match &ranks {
                // The other ranks may be waiting for this one at a
                // barrier: end them all.
                Some(ranks) => {
                    eprintln!("iolab: rank {}: error: {}", ranks.rank, message(&e));
                    ranks.abort(i32::from(code));
                    ExitCode::from(code)
                }
                None => {
                    eprintln!("iolab: error: {}", message(&e));
                    ExitCode::from(code)
                }
            }
        }
    }
}
