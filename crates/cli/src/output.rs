//! Where a command's results go (`--json`, `--plot`, `--output`):
//! checked before the work, written after it.

use crate::errors::UsageError;

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

/// Writes a JSON document to `path`, or to standard output when it is "-".
pub(crate) fn write_json(path: &std::path::Path, doc: &str) -> anyhow::Result<()> {
    use anyhow::Context;
    if path.as_os_str() == "-" {
        println!("{doc}");
        return Ok(());
    }
    std::fs::write(path, format!("{doc}\n"))
        .with_context(|| format!("{}: cannot write the JSON", path.display()))
}
