//! Every exit status iolab ends with, in one place (each command's
//! documentation says which it uses: docs/workloads.md, docs/fs.md,
//! docs/log.md, docs/sim.md):
//!
//! | status | meaning |
//! |---|---|
//! | 0 | done; every check passed |
//! | 1 | a failure: an error, bad blocks, a crash state that broke its promise; `fs fsck`: everything found repaired |
//! | 2 | a usage error (a bad flag, a target holding data refused); nothing was written |
//! | 3 | `validate`: no bad block, but blocks ahead of the journal |
//! | 4 | `validate`: the journal is damaged; `fs fsck`: damage left |
//! | 8 | `fs fsck` could not check (fsck(8)'s operational error) |
//! | 130 | interrupted (128 + SIGINT) after ending cleanly |

use std::process::ExitCode;

use crate::{is_usage_error, Interrupted};

pub const FAILURE: u8 = 1;
pub const USAGE: u8 = 2;
/// A verdict with no bad block but blocks ahead of the journal.
pub const JOURNAL_INCOMPLETE: u8 = 3;
/// A verdict with no bad block but a damaged journal.
pub const JOURNAL_DAMAGED: u8 = 4;
/// `fs fsck` repaired everything it found (e2fsck's 1).
pub const FSCK_REPAIRED: u8 = 1;
/// `fs fsck` left damage (e2fsck's 4).
pub const FSCK_DAMAGE_LEFT: u8 = 4;
/// `fs fsck` could not check at all: the image cannot be opened or read,
/// or holds no superblock fsck can use (e2fsck's status then).
pub const FSCK_OPERATIONAL_ERROR: u8 = 8;
/// A command stopped by an interrupt (128 + SIGINT).
pub const INTERRUPTED: u8 = 130;

/// Both validation statuses, for a verdict's last line.
pub const VERDICT_EXITS: report::VerdictExits =
    report::VerdictExits { journal_incomplete: JOURNAL_INCOMPLETE, journal_damaged: JOURNAL_DAMAGED };

/// 0 when a check found nothing, else 1.
pub fn found(anything: bool) -> ExitCode {
    if anything {
        ExitCode::from(FAILURE)
    } else {
        ExitCode::SUCCESS
    }
}

/// The status of an `fs fsck` that checked.
pub fn fsck(outcome: report::FsckOutcome) -> u8 {
    match outcome {
        report::FsckOutcome::Clean => 0,
        report::FsckOutcome::Repaired => FSCK_REPAIRED,
        report::FsckOutcome::DamageLeft => FSCK_DAMAGE_LEFT,
    }
}

/// The status that says what a validation verdict comes to.
pub fn verdict(outcome: report::Outcome) -> u8 {
    match outcome {
        report::Outcome::Ok => 0,
        report::Outcome::Bad | report::Outcome::NothingChecked => FAILURE,
        report::Outcome::JournalIncomplete => JOURNAL_INCOMPLETE,
        report::Outcome::JournalDamaged => JOURNAL_DAMAGED,
    }
}

/// The status of a command that ended in `e`: interrupted, a usage
/// error, or a failure; an error every MPI rank agreed on keeps the
/// status they agreed.
pub fn of_error(e: &anyhow::Error) -> u8 {
    let code = if e.chain().any(|c| c.is::<Interrupted>()) {
        INTERRUPTED
    } else if is_usage_error(e) {
        USAGE
    } else {
        FAILURE
    };
    match e.downcast_ref::<lab::mpi::Agreed>() {
        Some(agreed) if agreed.usage => USAGE,
        _ => code,
    }
}
