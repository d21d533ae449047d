//! The `iolab` binary: turns the command line into calls on the library
//! crates and their results into text. Only this crate prints.

use std::process::ExitCode;

use clap::Parser;

mod bonnie;
mod cli;
mod crash;
mod fio;
mod fs;
mod host;
mod interrupt;
mod jobfile;
mod logs;
mod mounts;
mod mpi;
mod report_cmd;
mod run;
mod stack;
mod sweep;
mod sweep_journal;
mod sweep_policies;
mod usage_hints;
mod validate;
mod volume;

/// A bad flag value or combination, or a target refused because it holds
/// data (`--force` is the way on): reported with exit status 2, as clap
/// reports the errors it finds itself. Nothing was written.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// A command stopped by Ctrl-C or SIGTERM, after ending as cleanly as it
/// would have at its end: reported with exit status 130 (128 + SIGINT).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Interrupted(pub String);

/// Checks before the run that a result file can be written: its directory
/// exists and it is not a directory itself. `-` is standard output.
pub(crate) fn check_output(flag: &str, path: &std::path::Path, stdout_ok: bool) -> Result<(), UsageError> {
    if stdout_ok && path.as_os_str() == "-" {
        return Ok(());
    }
    if path.is_dir() {
        return Err(UsageError(format!("--{flag}: {} is a directory; give a file name", path.display())));
    }
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
    if !dir.is_dir() {
        return Err(UsageError(format!(
            "--{flag}: {}: the directory {} does not exist; create it or give another path",
            path.display(),
            dir.display()
        )));
    }
    let (place, what) = if path.exists() { (path, "the file") } else { (dir, "its directory") };
    if !writable(place) {
        return Err(UsageError(format!(
            "--{flag}: {}: {what} cannot be written by this user; give another path",
            path.display()
        )));
    }
    Ok(())
}

/// Whether this process may write `path` (access(2) with W_OK).
fn writable(path: &std::path::Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else { return false };
    // SAFETY: access with a NUL-terminated path.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

/// `--json FILE` and `--plot DIR`, checked before any work is done, so a
/// long run never ends with results it cannot write.
pub(crate) fn check_destinations(
    json: Option<&std::path::Path>,
    plot: Option<&std::path::Path>,
) -> Result<(), UsageError> {
    if let Some(path) = json {
        check_output("json", path, true)?;
    }
    if let Some(dir) = plot {
        check_plot_dir(dir)?;
    }
    Ok(())
}

/// Writes a JSON document to `path`, or to standard output when it is "-".
/// `--plot DIR`: the charts of a result document (its JSON text) as SVG
/// files in DIR (made if missing), named as `report::charts` names them.
pub(crate) fn write_plots(dir: &std::path::Path, doc: &str) -> anyhow::Result<()> {
    use anyhow::Context;
    let value: serde_json::Value = serde_json::from_str(doc).context("the result document is not JSON")?;
    let charts = report::charts(&value).map_err(anyhow::Error::msg)?;
    std::fs::create_dir_all(dir)
        .with_context(|| format!("{}: cannot make the plot directory", dir.display()))?;
    for chart in charts {
        let path = dir.join(format!("{}.svg", chart.name));
        std::fs::write(&path, chart.svg).with_context(|| format!("{}: cannot write it", path.display()))?;
    }
    Ok(())
}

/// `--plot DIR` checked before a command runs: a directory, or a path
/// that can become one.
pub(crate) fn check_plot_dir(dir: &std::path::Path) -> Result<(), UsageError> {
    if dir.exists() && !dir.is_dir() {
        return Err(UsageError(format!(
            "--plot: {} is a file; give a directory (made if missing)",
            dir.display()
        )));
    }
    // The directory, or the nearest one above it that exists, where it
    // would be made.
    let existing = dir.ancestors().find(|a| a.as_os_str().is_empty() || a.is_dir());
    let existing = existing.filter(|a| !a.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
    if !writable(existing) {
        return Err(UsageError(format!(
            "--plot: {}: {} cannot be written by this user; give another directory",
            dir.display(),
            existing.display()
        )));
    }
    Ok(())
}

pub(crate) fn write_json(path: &std::path::Path, doc: &str) -> anyhow::Result<()> {
    use anyhow::Context;
    if path.as_os_str() == "-" {
        println!("{doc}");
        return Ok(());
    }
    std::fs::write(path, format!("{doc}\n"))
        .with_context(|| format!("{}: cannot write the JSON", path.display()))
}

/// A run identifier that differs between runs (codec's one recipe).
pub(crate) fn run_id() -> u64 {
    codec::fresh_id()
}

impl From<workloads::SpecError> for UsageError {
    fn from(e: workloads::SpecError) -> UsageError {
        UsageError(e.to_string())
    }
}

pub(crate) fn is_usage_error(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause.is::<UsageError>()
            || cause.is::<workloads::SpecError>()
            || matches!(
                cause.downcast_ref::<workloads::WorkloadError>(),
                Some(workloads::WorkloadError::Spec(_))
            )
    })
}

/// The error and its causes, each cause once: library errors often repeat
/// their source in their own message already.
pub(crate) fn message(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if !out.contains(&text) {
            if !out.is_empty() {
                out.push_str(": ");
            }
            out.push_str(&text);
        }
    }
    out
}

fn main() -> ExitCode {
    // The documents say when the work began and how it was asked for:
    // the time and the arguments, noted before anything else.
    host::note_start(&std::env::args_os().collect::<Vec<_>>());
    // `iolab run | head` ends quietly when head stops reading, as other
    // command-line tools do, instead of panicking on the broken pipe.
    // SAFETY: restoring a signal's default disposition before any thread
    // starts.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let mut ranks = match mpi::start() {
        Ok(ranks) => ranks,
        Err(e) => {
            eprintln!("iolab: error: {e}");
            return ExitCode::from(2);
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
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    match cli::dispatch(args, ranks.as_ref()) {
        Ok(code) => code,
        Err(e) => {
            let code = if e.chain().any(|c| c.is::<Interrupted>()) {
                interrupt::EXIT_INTERRUPTED
            } else if is_usage_error(&e) {
                2
            } else {
                1
            };
            if let Some(agreed) = e.downcast_ref::<mpi::Agreed>() {
                // Every rank knows; rank 0 says it once for all.
                if agreed.report {
                    eprintln!("iolab: error: {}", agreed.text);
                }
                return ExitCode::from(if agreed.usage { 2 } else { code });
            }
            match &ranks {
                // The other ranks may be waiting for this one at a
                // barrier: end them all.
                Some(ranks) => {
                    eprintln!("iolab: rank {}: error: {}", ranks.rank, message(&e));
                    ranks.abort(i32::from(code))
                }
                None => {
                    eprintln!("iolab: error: {}", message(&e));
                    ExitCode::from(code)
                }
            }
        }
    }
}
