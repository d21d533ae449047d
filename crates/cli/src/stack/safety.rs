//! Refusing to write over data the user may not mean to lose.

use std::path::Path;

use anyhow::bail;

use super::Stack;

/// Refuses to write to a stack whose base holds a known signature or is a
/// mounted block device, unless forced.
pub fn check_writable(stack: &Stack, force: bool) -> anyhow::Result<()> {
    if force || stack.origin.created {
        return Ok(());
    }
    if let Some(path) = &stack.origin.path {
        if let Some(mount) = mounted_at(path) {
            bail!(
                "{}: is mounted at {mount}; writing to it would corrupt that file system. \
                 Unmount it, or pass --force if you really mean it",
                path.display()
            );
        }
    }
    if let Some(what) = device::signature::probe(stack.device().as_ref())? {
        bail!(
            "{}: holds data ({what}); this workload writes and would destroy it. \
             Use another target, or pass --force to overwrite it",
            stack.device().name()
        );
    }
    Ok(())
}

/// Where a block device is mounted, from /proc/self/mounts.
fn mounted_at(path: &Path) -> Option<String> {
    let real = std::fs::canonicalize(path).ok()?;
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    mounts.lines().find_map(|line| {
        let mut fields = line.split_whitespace();
        let source = fields.next()?;
        let point = fields.next()?;
        (source.starts_with('/') && std::fs::canonicalize(source).ok()? == real).then(|| point.to_string())
    })
}
