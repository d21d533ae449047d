//! The file system's reports: fsck's findings and verdict, the lines
//! `iolab fs ls` and `stat` print, and what an in-process extraction or
//! removal did and how it was timed, and the line `iolab fs mount`
//! ends with.

use std::fmt::Write as _;

use device::Medium;
use ffs::fsck::Report;
use ffs::{Policy, Unmounted};
use fsapi::Attr;
use fusefront::Served;
use workloads::tree::{Extracted, LoadedArchive, MdtestPhase, MdtestSpec, Removed};

use crate::target::{medium_kind, memory_warnings};
use crate::units::human;

/// What a check comes to (the binary's exit status says it, as e2fsck's:
/// 0 clean, 1 repaired, 4 damage left).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FsckOutcome {
    Clean,
    Repaired,
    DamageLeft,
}

impl FsckOutcome {
    pub fn of(report: &Report) -> FsckOutcome {
        if report.clean() {
            FsckOutcome::Clean
        } else if report.damage_left() {
            FsckOutcome::DamageLeft
        } else {
            FsckOutcome::Repaired
        }
    }
}

/// A finding a line, then the verdict. `reported_only`: the check was `-n`.
pub fn fsck_text(target: &str, report: &Report, reported_only: bool) -> String {
    let mut out = String::new();
    if report.replayed_commits > 0 {
        let into = if reported_only { " (into memory: -n changes nothing)" } else { "" };
        let _ =
            writeln!(out, "replayed the file system's log first: {} commits{into}", report.replayed_commits);
    }
    for f in &report.findings {
        let fixed = if f.repaired { " [repaired]" } else { "" };
        let _ = writeln!(out, "{}: {}{fixed}", f.class.name(), f.detail);
    }
    let left = report.findings.iter().filter(|f| !f.repaired).count();
    let verdict = match FsckOutcome::of(report) {
        FsckOutcome::Clean => "clean".to_string(),
        FsckOutcome::Repaired => {
            format!("{}, all repaired", crate::counted(report.findings.len() as u64, "problem", "problems"))
        }
        FsckOutcome::DamageLeft => format!(
            "{}, {left} left{}",
            crate::counted(report.findings.len() as u64, "problem", "problems"),
            if reported_only { " (run with -p or -y to repair)" } else { "" }
        ),
    };
    let _ = writeln!(
        out,
        "{target}: {} inodes, {} directories, {} blocks claimed: {verdict}",
        report.inodes_checked, report.directories, report.blocks_claimed
    );
    out
}

/// One line of `iolab fs ls`: the kind as `ls -l`'s first letter, and
/// for a device node its major and minor where the size would be.
pub fn ls_line(name: &str, attr: &Attr) -> String {
    let kind = match attr.kind {
        fsapi::FileType::File => '-',
        fsapi::FileType::Dir => 'd',
        fsapi::FileType::Symlink => 'l',
        fsapi::FileType::Fifo => 'p',
        fsapi::FileType::CharDevice => 'c',
        fsapi::FileType::BlockDevice => 'b',
        fsapi::FileType::Socket => 's',
    };
    let size = if attr.kind.is_device() {
        format!("{}, {}", fsapi::major(attr.rdev), fsapi::minor(attr.rdev))
    } else {
        attr.size.to_string()
    };
    format!("{kind} {:04o} {:>3} {:>5} {:>5} {size:>12} {name}", attr.perm, attr.nlink, attr.uid, attr.gid)
}

/// What `iolab fs stat` prints (a device node's number after its kind).
pub fn stat_text(path: &str, a: &Attr) -> String {
    let kind = if a.kind.is_device() {
        format!("{:?} {}:{}", a.kind, fsapi::major(a.rdev), fsapi::minor(a.rdev))
    } else {
        format!("{:?}", a.kind)
    };
    format!(
        "{path}: inode {}, {kind}, mode {:04o}, {} links, uid {}, gid {}, {} bytes, {} blocks of 512 bytes, \
         mtime {}.{:09}, ctime {}.{:09}\n",
        a.ino,
        a.perm,
        a.nlink,
        a.uid,
        a.gid,
        a.size,
        a.blocks,
        a.mtime.secs,
        a.mtime.nanos,
        a.ctime.secs,
        a.ctime.nanos
    )
}

/// An in-process tree workload on iolab's file system: where it ran and
/// how long from the first call to the end of the unmount.
pub struct TreeRun<'a> {
    pub target: &'a str,
    pub media: &'a [Medium],
    pub policy: Policy,
    /// The cache size as the user gave it.
    pub cache: &'a str,
    pub seconds: f64,
    pub unmounted: &'a Unmounted,
}

impl TreeRun<'_> {
    /// The target's lines: each medium, how the time was taken, warnings.
    fn heading(&self) -> String {
        let mut out = String::new();
        for m in self.media {
            let _ = writeln!(
                out,
                "target {}: {}; its page cache dropped before the mount, the unmount's write-back and flush \
                 inside the time",
                m.name,
                medium_kind(m)
            );
        }
        for w in memory_warnings(self.target, self.media) {
            let _ = writeln!(out, "warning: {w}");
        }
        out
    }

    /// The device traffic the policy caused, and the time.
    fn footer(&self, out: &mut String) {
        let c = &self.unmounted.cache;
        let _ = writeln!(
            out,
            "device: {} blocks of 4 KiB written in {} requests, {} synchronous writes, {} flushes; \
             cache hits {}, misses {}",
            c.blocks_written, c.write_requests, c.sync_writes, c.flushes, c.hits, c.misses
        );
        if let Some(log) = &self.unmounted.log {
            let _ = writeln!(
                out,
                "log: {} commits ({} forced by a full transaction), {} of metadata written to the log, {} checkpoints",
                log.commits,
                log.forced_commits,
                human(log.log_bytes_written),
                log.checkpoints
            );
        }
        if let Some(sd) = &self.unmounted.softdep {
            let _ = writeln!(
                out,
                "softdep: {} metadata writes with an update rolled back; {} blocks and {} inodes freed once \
                 the disk no longer named them",
                sd.rollbacks, sd.released_blocks, sd.released_inodes
            );
            if sd.file_fsyncs + sd.whole_fsyncs > 0 {
                let _ = writeln!(
                    out,
                    "softdep fsyncs: {} wrote their file's share, {} the whole cache (its dependencies \
                     did not settle in the passes a file's takes)",
                    sd.file_fsyncs, sd.whole_fsyncs
                );
            }
        }
        let sb = &self.unmounted.superblock;
        let state = match sb.damage {
            ffs::format::Damage::None => "unmounted clean".to_string(),
            _ => {
                format!("unmounted, still marked unclean until `iolab fs fsck -p {}` repairs it", self.target)
            }
        };
        let _ = writeln!(
            out,
            "{state}: {} of {} blocks free, {} of {} inodes free",
            sb.free_blocks,
            sb.blocks,
            sb.free_inodes,
            sb.total_inodes()
        );
    }
}

/// What `iolab fs untar` prints.
pub fn untar_text(
    run: &TreeRun,
    archive_path: &str,
    archive: &LoadedArchive,
    copies: u32,
    made: &Extracted,
) -> String {
    let mut out = run.heading();
    let _ = writeln!(
        out,
        "archive {archive_path}: {}, {} as stored, {} in memory (read and decompressed before the clock starts)",
        archive.compression.name(),
        human(archive.file_bytes),
        human(archive.tar.len() as u64)
    );
    let copies_text = if copies == 1 { "1 copy".to_string() } else { format!("{copies} copies") };
    let _ = writeln!(
        out,
        "extracted {copies_text} in-process (policy {}, cache {}): {} entries ({} files, {} directories, {} symlinks, \
         {} hard links, {} FIFOs and devices; {} of data) in {:.2} s with the unmount, {:.0} entries/s",
        run.policy.name(),
        run.cache,
        made.entries,
        made.files,
        made.dirs,
        made.symlinks,
        made.hard_links,
        made.specials,
        human(made.data_bytes),
        run.seconds,
        made.entries as f64 / run.seconds.max(1e-9)
    );
    if let Some((first, why)) = made.skipped.first() {
        let _ = writeln!(out, "skipped {} members; the first, {first}: {why}", made.skipped.len());
    }
    run.footer(&mut out);
    out
}

/// What `iolab fs rm` prints.
pub fn rm_text(run: &TreeRun, paths: &[String], removed: &Removed) -> String {
    let mut out = run.heading();
    let _ = writeln!(
        out,
        "removed {} in-process (policy {}, cache {}): {} names unlinked, {} directories removed in {:.2} s \
         with the unmount, {:.0} removals/s",
        paths.join(" "),
        run.policy.name(),
        run.cache,
        removed.unlinked,
        removed.dirs,
        run.seconds,
        (removed.unlinked + removed.dirs) as f64 / run.seconds.max(1e-9)
    );
    run.footer(&mut out);
    out
}

/// Where `iolab fs tree` ran.
pub enum TreeOn<'a> {
    /// iolab's file system, mounted in-process.
    Iolab(&'a TreeRun<'a>),
    /// A directory of a kernel file system: its path and its mount.
    Dir { path: &'a str, mount: &'a str },
}

/// What `iolab fs tree` prints: where it ran, the tree's shape, then
/// mdtest's summary (each phase's calls, time, rate and latency).
pub fn mdtest_text(on: &TreeOn, spec: &MdtestSpec, phases: &[MdtestPhase]) -> String {
    let mut out = match on {
        TreeOn::Iolab(run) => {
            let mut out = run.heading();
            let _ = writeln!(
                out,
                "iolab's file system in-process (fsapi calls, no kernel), policy {}, cache {}",
                run.policy.name(),
                run.cache
            );
            out
        }
        TreeOn::Dir { path, mount } => format!(
            "directory {path} on {mount}: system calls through fsapi's HostFs (a descriptor per inode, as \
             virtiofsd's passthrough); the kernel's caches warm from phase to phase, as under mdtest\n"
        ),
    };
    let _ = writeln!(
        out,
        "tree: depth {}, fanout {} ({} directories), {} items in each: {} directories and {} files; {} written to \
         each file, {} read",
        spec.depth,
        spec.fanout,
        spec.tree_dirs(),
        spec.items,
        spec.items_total(),
        spec.items_total(),
        human(u64::from(spec.write_bytes)),
        human(u64::from(spec.read_bytes))
    );
    let _ = writeln!(
        out,
        "{:<20} {:>10} {:>9} {:>12} {:>9} {:>9} {:>10}",
        "phase", "calls", "seconds", "calls/s", "p50 us", "p99 us", "max us"
    );
    for p in phases {
        let us = |q: f64| p.latency_ns.value_at_quantile(q) as f64 / 1000.0;
        let _ = writeln!(
            out,
            "{:<20} {:>10} {:>9.3} {:>12.1} {:>9.1} {:>9.1} {:>10.1}",
            p.name,
            p.items,
            p.seconds,
            p.rate(),
            us(0.5),
            us(0.99),
            p.latency_ns.max() as f64 / 1000.0
        );
    }
    if let TreeOn::Iolab(run) = on {
        let _ = writeln!(out, "with the mount and the unmount's write-back: {:.3} s in all", run.seconds);
        run.footer(&mut out);
    }
    out
}

/// The unmount's line: the state written back, the free space, the
/// writes, the log's commits and fsyncs, and how the requests were served.
pub fn unmounted_line(target: &str, unmounted: &Unmounted, served: &Served) -> String {
    let (sb, stats) = (&unmounted.superblock, &unmounted.cache);
    let mut log = unmounted
        .log
        .map(|l| {
            format!(
                ", {} writing {} to the log, {}",
                crate::counted(l.commits, "log commit", "log commits"),
                crate::units::size(l.log_bytes_written),
                crate::counted(l.checkpoints, "checkpoint", "checkpoints")
            )
        })
        .unwrap_or_default();
    if let Some(sd) = unmounted.softdep.filter(|sd| sd.file_fsyncs + sd.whole_fsyncs > 0) {
        log += &format!(
            ", {} fsyncs of the file's share and {} of the whole cache",
            sd.file_fsyncs, sd.whole_fsyncs
        );
    }
    let state = match sb.damage {
        ffs::format::Damage::None => "clean".to_string(),
        _ => format!("still marked unclean until `iolab fs fsck -p {target}` repairs it"),
    };
    format!(
        "iolab: unmounted; written back and {state} ({} of {} blocks free; {} blocks written ({} of file data) in {} requests, {} synchronous writes, {}{log}); {}",
        sb.free_blocks,
        sb.blocks,
        stats.blocks_written,
        stats.data_blocks_written,
        stats.write_requests,
        stats.sync_writes,
        crate::counted(stats.flushes, "flush", "flushes"),
        served_through(served)
    )
}

/// How the requests were served, for the unmount's line: the transport,
/// then the requests by operation, busiest first.
fn served_through(served: &Served) -> String {
    let total: u64 = served.requests.iter().map(|&(_, n)| n).sum();
    let ops: Vec<String> = served.requests.iter().map(|(name, n)| format!("{name} {n}")).collect();
    let direct = match served.direct_io {
        Some(d) => {
            format!("; {} opens for writing went direct (below {} free)", d.opens, human(d.below_bytes))
        }
        None => String::new(),
    };
    format!("{}{direct}; {total} requests: {}", transport_used(served), ops.join(", "))
}

fn transport_used(served: &Served) -> String {
    match &served.ring {
        None => "served through /dev/fuse".into(),
        Some(ring) => match &ring.refused {
            None if ring.queues == 0 => {
                "served through /dev/fuse (the kernel offered no io_uring at INIT)".into()
            }
            None => format!(
                "served over io_uring ({} queues, {} requests through them)",
                ring.queues, ring.requests
            ),
            Some(why) => {
                format!("served through /dev/fuse ({why}; {} requests over io_uring)", ring.requests)
            }
        },
    }
}

/// What `attr`, not a regular file, is: for `cat`'s refusal (`link`: a
/// symlink's target).
pub fn not_a_file(attr: &Attr, link: Option<&[u8]>) -> String {
    use fsapi::FileType;
    let device = |what: &str| {
        format!(
            "a {what} device node ({}:{}; its bytes are the device's)",
            fsapi::major(attr.rdev),
            fsapi::minor(attr.rdev)
        )
    };
    match attr.kind {
        FileType::Symlink => format!("a symlink to {}", String::from_utf8_lossy(link.unwrap_or_default())),
        FileType::Dir => "a directory".to_string(),
        FileType::Fifo => "a FIFO (the kernel passes its bytes; none are stored)".to_string(),
        FileType::Socket => "a socket (the kernel passes its bytes; none are stored)".to_string(),
        FileType::CharDevice => device("character"),
        FileType::BlockDevice => device("block"),
        FileType::File => "a file".to_string(),
    }
}
