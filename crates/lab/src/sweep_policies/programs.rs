//! Finding and running the programs a sweep drives (GNU tar and rm, the
//! kernel file systems' mkfs, losetup, mount).

use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, Context};

/// Where a program is: PATH, then the sbin directories a non-login
/// shell's PATH may lack.
pub fn find_program(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

/// Runs `program` with `args`; an error carries what it said.
pub fn run(program: &str, args: &[&str]) -> anyhow::Result<()> {
    let path = find_program(program).unwrap_or_else(|| PathBuf::from(program));
    let out = Command::new(&path).args(args).output().with_context(|| format!("cannot run {program}"))?;
    if !out.status.success() {
        bail!(
            "{program} {} failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}
