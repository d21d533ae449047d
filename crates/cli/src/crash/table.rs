//! `iolab crash --kernel ext4,xfs --stack fs-log,fs-softdep,fs-sync`: the
//! same mix under the kernel's file systems and iolab's stacks, every
//! crash state of each checked against its promise, in one table.

use std::process::ExitCode;
use std::time::Instant;

use report::CrashTableRow;
use workloads::fscrash::FsCrashReport;

use super::args::{fs_spec, kernel_crash, CrashArgs, Stack};
use crate::UsageError;

pub fn run(args: &CrashArgs) -> anyhow::Result<ExitCode> {
    check(args)?;
    // Every flag checked (each kernel's name too) before the first run.
    let kernels = args.kernels.iter().map(|k| kernel_crash(args, k)).collect::<anyhow::Result<Vec<_>>>()?;
    let stacks =
        args.stacks.iter().map(|&s| Ok((s, fs_spec(args, s)?))).collect::<anyhow::Result<Vec<_>>>()?;
    let mut rows = Vec::new();
    for crash in &kernels {
        let bar = super::bar::StatesBar::new(crash.fs.name());
        let (report, run) = lab::kernel_crash::crash_kernel(crash, &|done, total| bar.show(done, total))?;
        bar.done();
        let per_state = run.check_seconds / report.states_checked.max(1) as f64;
        rows.push(row(crash.fs.name(), true, &report, per_state, kernel_promise(crash.fs.name())));
    }
    for (stack, spec) in &stacks {
        let start = Instant::now();
        let report = workloads::fscrash::enumerate(spec).map_err(lab::crash::usage)?;
        let per_state = start.elapsed().as_secs_f64() / report.states_checked.max(1) as f64;
        rows.push(row(stack.name(), false, &report, per_state, stack_promise(*stack)));
    }
    let to_stdout = args.json.as_deref().is_none_or(|p| p.as_os_str() != "-");
    if to_stdout {
        print!(
            "{}",
            report::crash_table_text(args.transactions, args.sync_every, args.seed, args.states, &rows)
        );
    }
    if let Some(path) = &args.json {
        let run = (args.transactions, args.sync_every, args.seed, args.states);
        crate::write_json(
            path,
            &report::json::CrashTableDocument::new(lab::host::wire(), run, &rows).to_json(),
        )?;
    }
    Ok(crate::exit::found(rows.iter().any(|r| r.violations > 0)))
}

/// A table compares file systems under one mix: block stacks, archives,
/// several writers and single states have no place in it.
fn check(args: &CrashArgs) -> Result<(), UsageError> {
    if let Some(block) = args.stacks.iter().find(|s| !s.is_fs()) {
        return Err(UsageError(format!(
            "--stack {}: a table compares file systems under one mix; give fs-sync, fs-softdep, fs-log or \
             fs-async (a block stack runs alone)",
            block.name()
        )));
    }
    let refused = [
        (args.archive.is_some(), "--archive"),
        (args.writers.is_some(), "--writers"),
        (args.state.is_some(), "--state"),
        (args.keep_images.is_some(), "--keep-images"),
    ];
    if let Some((_, flag)) = refused.iter().find(|(given, _)| *given) {
        return Err(UsageError(format!(
            "{flag} does not apply to a table of several stacks; run the stack on its own with it"
        )));
    }
    if args.size.is_some() {
        return Err(UsageError(
            "--size with several stacks: each takes its own default (fs-*: 8m; ext4: 32m, xfs: 300m, btrfs: \
             128m); run one stack alone to choose its size"
                .into(),
        ));
    }
    Ok(())
}

fn row(stack: &str, kernel: bool, r: &FsCrashReport, per_state: f64, promise: &'static str) -> CrashTableRow {
    CrashTableRow {
        stack: stack.to_string(),
        kernel,
        states_checked: r.states_checked,
        violations: r.violations,
        needed_repair: r.needed_repair,
        seconds_per_state: per_state,
        promise,
        first_violation: r.first_violation.as_ref().map(|v| {
            format!("state {} ({} seed {}): {}: {}", v.state, v.policy, v.seed, v.class.name(), v.detail)
        }),
    }
}

fn kernel_promise(fs: &str) -> &'static str {
    match fs {
        "ext4-nojournal" => "e2fsck -p repairs all, fsync'd files kept",
        "xfs" => "the mount's log replay leaves xfs_repair -n nothing, fsync'd files kept",
        "btrfs" => "mounts, btrfs check finds nothing, fsync'd files kept",
        _ => "the mount's journal replay leaves e2fsck -fn nothing, fsync'd files kept",
    }
}

fn stack_promise(stack: Stack) -> &'static str {
    match stack {
        Stack::FsLog => "the log's replay leaves fsck -n nothing, fsync'd files kept, a tree a commit made",
        Stack::FsSoftdep => "fsck -n finds leaks only, fsck -B repairs them, fsync'd files kept",
        Stack::FsSync => "fsck -p repairs all, fsync'd files kept",
        _ => "nothing promised: the damage a crash leaves",
    }
}
