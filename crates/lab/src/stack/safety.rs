//! Refusing to write over data the user may not mean to lose. A refusal
//! is a usage error (exit status 2), as every refusal of what the user
//! asked for: it comes before anything is written, and `--force` is the
//! way on.

use std::path::Path;
use std::sync::Arc;

use device::Device;

use super::Stack;
use crate::UsageError;

/// Refuses to write to a stack whose base holds a known signature or is a
/// mounted block device, unless forced.
pub fn check_writable(stack: &Stack, force: bool) -> anyhow::Result<()> {
    if force || stack.origin.created {
        return Ok(());
    }
    check_unmounted(stack)?;
    if let Some(what) = device::signature::probe(stack.device().as_ref())? {
        return Err(UsageError(format!(
            "{}: holds data ({what}); this workload writes and would destroy it. \
             Use another target, or pass --force to overwrite it",
            stack.device().name()
        ))
        .into());
    }
    Ok(())
}

/// [`check_writable`] for a job behind the block log a plan decided on
/// (`LogPlan::reused_inside`). A target whose own log is used again (a
/// `--log` run made it) starts with that log's signature, iolab's own:
/// what the log protects, from byte `reused_inside`, is probed instead, so
/// a file system or a volume behind the log is still refused.
pub fn check_writable_behind(stack: &Stack, reused_inside: Option<u64>, force: bool) -> anyhow::Result<()> {
    let Some(data_offset) = reused_inside else {
        return check_writable(stack, force);
    };
    if force || stack.origin.created {
        return Ok(());
    }
    check_unmounted(stack)?;
    let base = stack.device();
    let protected = base.size_bytes().saturating_sub(data_offset);
    let data: Arc<dyn Device> = Arc::new(device::Slice::new(Arc::clone(base), data_offset, protected)?);
    if let Some(what) = device::signature::probe(data.as_ref())? {
        return Err(UsageError(format!(
            "{}: its block log protects data that holds {what} (from byte {data_offset}); this workload writes \
             and would destroy it. Use another target, or pass --force to overwrite it",
            base.name()
        ))
        .into());
    }
    Ok(())
}

/// Refuses a target that is a mounted block device.
fn check_unmounted(stack: &Stack) -> anyhow::Result<()> {
    if let Some(path) = &stack.origin.path {
        if let Some(mount) = mounted_at(path) {
            return Err(UsageError(format!(
                "{}: is mounted at {mount}; writing to it would corrupt that file system. \
                 Unmount it, or pass --force if you really mean it",
                path.display()
            ))
            .into());
        }
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
