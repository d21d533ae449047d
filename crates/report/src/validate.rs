//! `iolab validate`'s verdict in words: what the journal held, the blocks
//! by class, the bad blocks and those ahead of the journal, and the last
//! line that says what it all comes to.

use std::fmt::Write as _;

use workloads::journal::JournalMode;
use workloads::recover::{Verdict, BAD_LISTED_MAX};

/// What a verdict comes to (the cli gives each its exit status).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every block checked holds what the journal says.
    Ok,
    /// No bad block, but blocks hold writes the journal never recorded.
    JournalIncomplete,
    /// Bad blocks: lost, damaged, misplaced or torn data.
    Bad,
}

impl Outcome {
    /// Bad blocks outweigh an incomplete journal: a block older than the
    /// journal promises is a loss whatever else is found.
    pub fn of(v: &Verdict) -> Outcome {
        if v.errors() > 0 {
            Outcome::Bad
        } else if v.journal_incomplete() {
            Outcome::JournalIncomplete
        } else {
            Outcome::Ok
        }
    }
}

/// Blocks ahead of the journal listed in the text (the JSON lists more).
const AHEAD_SHOWN: usize = 10;

/// The verdict's lines; `exit_journal_incomplete` is the exit status the
/// last line names for a journal found incomplete (the cli's to choose).
pub fn verdict_text(v: &Verdict, exit_journal_incomplete: u8) -> String {
    let mut out = String::new();
    if v.journal_mode == Some(JournalMode::Async) {
        out.push_str(
            "journal: written in async mode, which does not survive a host crash and loses its last records \
             to a killed process: its history may be short (blocks it never names are not checked; blocks \
             written after its last durable record are counted ahead of it, not lost)\n",
        );
    }
    let compactions = match v.journal_generation {
        0 => String::new(),
        n => format!(" after {n} compactions"),
    };
    let _ = writeln!(out, "journal: {} records replayed{compactions}", v.records);
    if let Some(at) = v.journal_torn_at {
        let _ = writeln!(
            out,
            "journal: ends with a damaged or truncated record at byte {at} of the journal file (not durable; ignored)"
        );
    }
    let _ = writeln!(
        out,
        "blocks: {} verified, {} pending-old, {} pending-new, {} torn{}, {} lost, {} misdirected, {} corrupt, {} zeroed, {} from another run, {} ahead of the journal",
        v.verified,
        v.pending_old,
        v.pending_new,
        v.torn,
        if v.torn_ok { " (accepted)" } else { "" },
        v.lost,
        v.misdirected,
        v.corrupt,
        v.zeros,
        v.foreign,
        v.ahead
    );
    out.push_str(&block_lines(v));
    let _ = writeln!(out, "verdict: {}", verdict_line(v, exit_journal_incomplete));
    out
}

/// Every bad block listed, and the first blocks ahead of the journal.
fn block_lines(v: &Verdict) -> String {
    let mut out = String::new();
    for bad in &v.bad {
        let _ = writeln!(out, "  block at byte {}: {bad}", bad.offset);
    }
    for ahead in v.ahead_blocks.iter().take(AHEAD_SHOWN) {
        let _ = writeln!(out, "  block at byte {}: {ahead}", ahead.offset);
    }
    if v.ahead > AHEAD_SHOWN as u64 {
        let _ = writeln!(
            out,
            "  ... and {} more blocks ahead of the journal (--json lists the first {BAD_LISTED_MAX})",
            v.ahead - AHEAD_SHOWN as u64
        );
    }
    out
}

/// The last line: what the verdict comes to, in words.
pub fn verdict_line(v: &Verdict, exit_journal_incomplete: u8) -> String {
    let incomplete = format!(
        "the journal is incomplete: {} blocks are ahead of it (written after its last durable record: the \
         journal was cut short, or written async and caught by a crash)",
        v.ahead
    );
    match Outcome::of(v) {
        Outcome::Ok => "ok: every block checked holds what the journal says".to_string(),
        Outcome::JournalIncomplete => format!(
            "{incomplete}; no block is older than the journal promises, none is damaged (exit status \
             {exit_journal_incomplete})"
        ),
        Outcome::Bad if v.journal_incomplete() => format!("{} bad blocks; also, {incomplete}", v.errors()),
        Outcome::Bad => format!("{} bad blocks", v.errors()),
    }
}
