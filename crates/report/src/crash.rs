//! `iolab crash`'s report: the history recorded, the crash states checked
//! and the first violation, with the command that checks it again.

use workloads::crash::CrashReport;

/// How the crash run was set up, as the heading says it.
#[derive(Clone, Debug)]
pub struct CrashRun<'a> {
    /// The stack's name (`log`, `raid5-log`, ...).
    pub stack: &'a str,
    /// The block size as given (`4k`).
    pub block_size: &'a str,
    pub max_blocks: u32,
    pub sync_every: u64,
    pub seed: u64,
    /// The command line that checks the first violation's state alone;
    /// the cli knows its flags, so it writes it.
    pub recheck: Option<String>,
    /// The simulated disks' model when the states are power cuts in it.
    pub disk: Option<&'a str>,
}

/// The report's lines.
pub fn crash_text(run: &CrashRun<'_>, r: &CrashReport) -> String {
    let on = run.disk.map_or(String::new(), |d| format!(" on simulated disks {d}"));
    let mut out = format!(
        "iolab crash: stack {}{on}, {} transactions of 1-{} blocks of {}, a flush every {}, seed {}\n",
        run.stack, r.transactions, run.max_blocks, run.block_size, run.sync_every, run.seed
    );
    match run.disk {
        None => {
            out += &format!("history: {} events ({} writes, {} flushes)\n", r.events, r.writes, r.flushes);
            out += &format!(
                "states checked: {} ({} after flushes, {} sampled between them)\n",
                r.states_checked, r.flush_states, r.sampled_states
            );
        }
        Some(_) => {
            out += &format!(
                "requests to the simulated disks: {} ({} writes, {} flushes; modeled)\n",
                r.events, r.writes, r.flushes
            );
            out += &format!(
                "power cuts in the model checked: {} ({} after a flush, {} after a transaction's writes)\n",
                r.states_checked, r.flush_states, r.sampled_states
            );
        }
    }
    out += &format!(
        "violations: {} (torn transactions {}, torn writes {}, lost {}, corrupt {}, reopen failed {})\n",
        r.violations, r.torn_transactions, r.torn_writes, r.lost, r.corrupt, r.open_failed
    );
    if let Some(v) = &r.first_violation {
        let when = match run.disk {
            None => {
                format!("crash after event {} of {}, {} seed {}", v.after_events, r.events, v.policy, v.seed)
            }
            Some(_) => format!("power cut after request {} of {}", v.after_events, r.events),
        };
        out += &format!("first violation: state {} ({when}): {:?}: {}\n", v.state, v.class, v.detail);
        if let Some(command) = &run.recheck {
            out += &format!("check it again: {command}\n");
        }
    }
    out
}

/// How a file-system crash run was set up.
#[derive(Clone, Debug)]
pub struct FsCrashRun<'a> {
    pub stack: &'a str,
    pub sync_every: u64,
    pub seed: u64,
    /// The archive extracted instead of the mix of operations.
    pub archive: Option<&'a str>,
    /// Threads that ran the workload at once (1: the one writer).
    pub writers: u32,
    /// The command that checks the first violation again (one writer
    /// only: several interleave differently each run).
    pub recheck: Option<String>,
}

/// The first line of a file-system crash report: the stack and its workload.
fn fs_crash_heading(run: &FsCrashRun<'_>, r: &workloads::fscrash::FsCrashReport) -> String {
    match (run.archive, run.writers > 1) {
        (Some(archive), false) => {
            format!("iolab crash: stack {}, {archive} extracted as GNU tar does, then sync\n", run.stack)
        }
        (Some(archive), true) => format!(
            "iolab crash: stack {}, {} writers at once each extracting {archive} into a directory of its \
             own as GNU tar does, then sync\n",
            run.stack, run.writers
        ),
        (None, false) => format!(
            "iolab crash: stack {}, {} file operations with an fsync every {} ({} fsyncs), seed {}\n",
            run.stack, r.operations, run.sync_every, r.fsyncs, run.seed
        ),
        (None, true) => format!(
            "iolab crash: stack {}, {} writers at once in one tree, {} file operations between them with \
             an fsync every {} ({} fsyncs), seed {}\n",
            run.stack, run.writers, r.operations, run.sync_every, r.fsyncs, run.seed
        ),
    }
}

/// `iolab crash --stack fs-*`'s report: the history, the states checked,
/// the fsck classes found before repair, the violations.
pub fn fs_crash_text(run: &FsCrashRun<'_>, r: &workloads::fscrash::FsCrashReport) -> String {
    let several = run.writers > 1;
    let mut out = fs_crash_heading(run, r);
    out += &format!("history: {} events ({} writes, {} flushes)\n", r.events, r.writes, r.flushes);
    let each = match run.stack {
        "fs-log" if several => {
            "the log replayed, fsck -n, the fsync'd files read (not the tree against the commits: no \
             tree can be taken while several writers run)"
        }
        "fs-log" => "the log replayed, fsck -n, the fsync'd files read, the tree against the commits",
        "fs-softdep" => "fsck -n (leaks only), fsck -B, fsck -n, the fsync'd files read",
        _ => "fsck -p, fsck -n, the fsync'd files read",
    };
    out += &format!(
        "states checked: {} ({} after flushes, {} sampled between them); each: {each}\n",
        r.states_checked, r.flush_states, r.sampled_states
    );
    if run.stack == "fs-softdep" {
        out += &format!(
            "states whose superblock said a directory was moving between directories (mounts refuse \
             them; held to preen's promise, fsck -p then fsck -n): {}\n",
            r.marked_for_check
        );
    }
    if r.damage_found.is_empty() {
        out += "fsck found: nothing in any state\n";
    } else {
        let found: Vec<String> = r.damage_found.iter().map(|(c, n)| format!("{c} in {n}")).collect();
        out += &format!("fsck found (states): {}\n", found.join(", "));
    }
    // A check that did not run is said so, not counted as 0.
    let not_committed = if several && run.stack == "fs-log" {
        "not checked".to_string()
    } else {
        r.not_committed.to_string()
    };
    let old_data = match run.stack {
        "fs-softdep" | "fs-log" => r.old_data.to_string(),
        _ => "not checked".to_string(),
    };
    out += &format!(
        "violations: {} (damage preen leaves {}, fsync'd files lost {}, unreadable {}, \
         found after the log's replay {}, a tree no commit made {not_committed}, more than leaks {}, \
         old data in a file {old_data})\n",
        r.violations, r.damage_left, r.fsync_lost, r.unreadable, r.not_clean, r.beyond_leaks
    );
    if let Some(v) = &r.first_violation {
        out += &first_fs_violation(v, r.events);
        if let Some(command) = &run.recheck {
            out += &format!("check it again: {command}\n");
        } else if several {
            out += "check it again: not state by state (several writers interleave differently each run); \
                    run again with the same flags\n";
        }
    }
    out
}

/// How a kernel file system's crash run was set up and how long it took.
#[derive(Clone, Debug)]
pub struct KernelCrashRun<'a> {
    /// The file system as `--kernel` names it (ext4, xfs, ...).
    pub fs: &'a str,
    /// mkfs's command line, the image for its device.
    pub mkfs: &'a str,
    pub mount_options: &'a str,
    /// The loop device reached the served image with direct I/O.
    pub direct_io: bool,
    pub sector_bytes: u32,
    /// The recorder answered fsync without flushing (the checker's proof).
    pub drop_flushes: bool,
    pub sync_every: u64,
    pub seed: u64,
    /// The archive extracted instead of the mix.
    pub archive: Option<&'a str>,
    pub record_seconds: f64,
    pub check_seconds: f64,
    /// Where the first violating state's image is, or how to keep it.
    pub recheck: Option<String>,
}

/// `iolab crash --kernel FS`'s report: how the history was recorded, the
/// states checked and how, the violations.
pub fn kernel_crash_text(run: &KernelCrashRun<'_>, r: &workloads::fscrash::FsCrashReport) -> String {
    let mut out = match run.archive {
        Some(archive) => {
            format!("iolab crash: kernel {}, {archive} extracted as GNU tar does, then syncfs\n", run.fs)
        }
        None => format!(
            "iolab crash: kernel {}, {} file operations with an fsync every {} ({} fsyncs), seed {}\n",
            run.fs, r.operations, run.sync_every, r.fsyncs, run.seed
        ),
    };
    let loop_io = if run.direct_io { "direct I/O" } else { "buffered, write-through" };
    out += &format!(
        "made: {}; mounted {}; recorded through a loop device ({loop_io}, {}-byte sectors) on iolab's FUSE \
         image{}\n",
        run.mkfs,
        run.mount_options,
        run.sector_bytes,
        if run.drop_flushes { ", every flush DROPPED by the recorder (violations expected)" } else { "" }
    );
    out += &format!("history: {} events ({} writes, {} flushes)\n", r.events, r.writes, r.flushes);
    let each = if run.fs == "ext4-nojournal" {
        "e2fsck -p, e2fsck -fn, mounted, the fsync'd files read"
    } else {
        match run.fs {
            "xfs" => "mounted (the log replayed), the fsync'd files read, unmounted, xfs_repair -n",
            "btrfs" => "mounted, the fsync'd files read, unmounted, btrfs check --readonly",
            _ => "mounted (the journal replayed), the fsync'd files read, unmounted, e2fsck -fn",
        }
    };
    let each = match run.archive {
        Some(_) => each.replace("the fsync'd files read", "the tree the archive made read back"),
        None => each.to_string(),
    };
    out += &format!(
        "states checked: {} ({} after flushes, {} sampled between them); each: {each}\n",
        r.states_checked, r.flush_states, r.sampled_states
    );
    if run.fs == "ext4-nojournal" {
        out += &format!("states e2fsck -p repaired: {}\n", r.needed_repair);
    }
    let per_state = if r.states_checked > 0 { run.check_seconds / r.states_checked as f64 } else { 0.0 };
    out += &format!(
        "time: recording {:.1} s, checking {:.1} s ({:.0} ms a state, {:.1} states a second)\n",
        run.record_seconds,
        run.check_seconds,
        per_state * 1e3,
        if per_state > 0.0 { 1.0 / per_state } else { 0.0 }
    );
    out += &format!(
        "violations: {} (won't mount {}, fsync'd files lost {}, found by the checker after the replay {}, \
         left by e2fsck -p {})\n",
        r.violations, r.unreadable, r.fsync_lost, r.not_clean, r.damage_left
    );
    if let Some(v) = &r.first_violation {
        out += &first_fs_violation(v, r.events);
        if let Some(kept) = &run.recheck {
            out += &format!("{kept}\n");
        }
    }
    out
}

/// A file-system crash report's line for its first violation.
fn first_fs_violation(v: &workloads::fscrash::FsViolation, events: usize) -> String {
    format!(
        "first violation: state {} (crash after event {} of {events}, {} seed {}): {}: {}\n",
        v.state,
        v.after_events,
        v.policy,
        v.seed,
        v.class.name(),
        v.detail
    )
}

/// One row of `iolab crash`'s comparison table: a kernel file system or
/// one of iolab's fs-* stacks, run on the same mix (in JSON as it is).
#[derive(Clone, Debug, serde::Serialize)]
pub struct CrashTableRow {
    /// `ext4`, `xfs`, ... or `fs-log`, `fs-softdep`, ...
    pub stack: String,
    /// The kernel's file system (else iolab's, in-process).
    pub kernel: bool,
    pub states_checked: u64,
    pub violations: u64,
    /// States whose first check found anything to repair beyond the
    /// mount's replay (violation or not).
    pub needed_repair: u64,
    pub seconds_per_state: f64,
    /// What each state is held to.
    pub promise: &'static str,
    /// The first violation, told in one line.
    pub first_violation: Option<String>,
}

/// The comparison table: the same mix under each stack, every crash state
/// checked; the seed's closing argument across the kernel's file systems
/// and iolab's.
pub fn crash_table_text(
    operations: u64,
    sync_every: u64,
    seed: u64,
    sampled: u64,
    rows: &[CrashTableRow],
) -> String {
    let mut out = format!(
        "iolab crash: the same mix in each: {operations} file operations with an fsync every {sync_every}, seed \
         {seed}; a crash state after every flush and {sampled} sampled between them\n"
    );
    let width = rows.iter().map(|r| r.stack.len() + 9).max().unwrap_or(5).max(5);
    out += &format!(
        "{:<width$}  {:>7}  {:>10}  {:>15}  {:>10}  each state\n",
        "stack", "states", "violations", "needed a repair", "ms a state"
    );
    for r in rows {
        let name = format!("{}{}", r.stack, if r.kernel { " (kernel)" } else { "" });
        out += &format!(
            "{name:<width$}  {:>7}  {:>10}  {:>15}  {:>10.1}  {}\n",
            r.states_checked,
            r.violations,
            r.needed_repair,
            r.seconds_per_state * 1e3,
            r.promise
        );
    }
    out += "needed a repair: states whose first check found anything to repair beyond the mount's replay; \
            ms a state: kernel rows mount, read back, unmount and run their checker on an image in /dev/shm, \
            iolab's rows check in-process\n";
    for r in rows.iter().filter(|r| r.first_violation.is_some()) {
        out +=
            &format!("first violation, {}: {}\n", r.stack, r.first_violation.as_deref().unwrap_or_default());
    }
    out
}
