//! The file system's reports: fsck's findings and verdict, and the lines
//! `iolab fs ls` and `stat` print.

use std::fmt::Write as _;

use ffs::fsck::Report;
use fsapi::Attr;

/// What a check comes to, and the exit status that says it (as e2fsck's:
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

    pub fn exit_status(self) -> u8 {
        match self {
            FsckOutcome::Clean => 0,
            FsckOutcome::Repaired => 1,
            FsckOutcome::DamageLeft => 4,
        }
    }
}

/// A finding a line, then the verdict. `reported_only`: the check was `-n`.
pub fn fsck_text(target: &str, report: &Report, reported_only: bool) -> String {
    let mut out = String::new();
    for f in &report.findings {
        let fixed = if f.repaired { " [repaired]" } else { "" };
        let _ = writeln!(out, "{}: {}{fixed}", f.class.name(), f.detail);
    }
    let left = report.findings.iter().filter(|f| !f.repaired).count();
    let verdict = match FsckOutcome::of(report) {
        FsckOutcome::Clean => "clean".to_string(),
        FsckOutcome::Repaired => format!("{} problems, all repaired", report.findings.len()),
        FsckOutcome::DamageLeft => format!(
            "{} problems, {left} left{}",
            report.findings.len(),
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

/// One line of `iolab fs ls`.
pub fn ls_line(name: &str, attr: &Attr) -> String {
    let kind = match attr.kind {
        fsapi::FileType::File => '-',
        fsapi::FileType::Dir => 'd',
        fsapi::FileType::Symlink => 'l',
    };
    format!(
        "{kind} {:04o} {:>3} {:>5} {:>5} {:>12} {name}",
        attr.perm, attr.nlink, attr.uid, attr.gid, attr.size
    )
}

/// What `iolab fs stat` prints.
pub fn stat_text(path: &str, a: &Attr) -> String {
    format!(
        "{path}: inode {}, {:?}, mode {:04o}, {} links, uid {}, gid {}, {} bytes, {} blocks of 512 bytes, \
         mtime {}.{:09}, ctime {}.{:09}\n",
        a.ino,
        a.kind,
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
