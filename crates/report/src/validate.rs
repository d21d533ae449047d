//! `iolab validate`'s verdict in words: what the journal held, the blocks
//! by class, the bad blocks and those ahead of the journal, and the last
//! line that says what it all comes to.

use std::fmt::Write as _;

use workloads::journal::JournalMode;
use workloads::recover::{DamageKind, Verdict, BAD_LISTED_MAX};

/// What a verdict comes to (the cli gives each its exit status).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every block checked holds what the journal says.
    Ok,
    /// No bad block, but blocks hold writes the journal never recorded.
    JournalIncomplete,
    /// No bad block, but parts of the journal that were durable are
    /// damaged: what it recorded there cannot be checked.
    JournalDamaged,
    /// The journal records writes, yet no block was checked: a check that
    /// checked nothing is no pass.
    NothingChecked,
    /// Bad blocks: lost, damaged, misplaced or torn data.
    Bad,
}

impl Outcome {
    /// Bad blocks outweigh a damaged journal, which outweighs an
    /// incomplete one: a block older than the journal promises is a loss
    /// whatever else is found, and a journal that lost durable records
    /// says less than one cut short.
    pub fn of(v: &Verdict) -> Outcome {
        if v.errors() > 0 {
            Outcome::Bad
        } else if v.records > 0 && v.checked() == 0 {
            Outcome::NothingChecked
        } else if v.journal_damaged() {
            Outcome::JournalDamaged
        } else if v.journal_incomplete() {
            Outcome::JournalIncomplete
        } else {
            Outcome::Ok
        }
    }
}

/// `n` and the noun, plural unless `n` is 1.
fn counted(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// Blocks ahead of the journal listed in the text (the JSON lists more).
const AHEAD_SHOWN: usize = 10;

/// The exit statuses the verdict's last line names (the cli's to choose).
#[derive(Clone, Copy, Debug)]
pub struct VerdictExits {
    pub journal_incomplete: u8,
    pub journal_damaged: u8,
}

/// The verdict's lines; `exits` are the exit statuses the last line names.
pub fn verdict_text(v: &Verdict, exits: VerdictExits) -> String {
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
    out.push_str(&damage_lines(v));
    let _ = writeln!(
        out,
        "blocks: {} verified, {} pending-old, {} pending-new, {} torn{}, {} lost, {} misdirected, {} corrupt, {} zeroed, {} from another run, {} ahead of the journal{}",
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
        v.ahead,
        if v.journal_damaged() { format!(", {} unverifiable", v.unverifiable) } else { String::new() }
    );
    out.push_str(&block_lines(v));
    let _ = writeln!(out, "verdict: {}", verdict_line(v, exits));
    out
}

/// Where the journal is damaged, what replay could not know for it, and
/// what was read to make up for it.
fn damage_lines(v: &Verdict) -> String {
    let mut out = String::new();
    for d in &v.journal_damage {
        let (what, then) = match d.kind {
            DamageKind::Records => ("records it had made durable", "replay went on past it"),
            DamageKind::Snapshot => {
                ("its key-map snapshot or the records carried with it", "replay went on with its records")
            }
            DamageKind::NewerStart => (
                "the header of a newer start",
                "its records could not be replayed: every write after the older start's is unknown",
            ),
        };
        let _ = writeln!(out, "journal: damaged at byte {} ({} bytes of {what}); {then}", d.at, d.bytes);
    }
    let listed = v.journal_damage.len() as u64;
    if v.journal_damaged_ranges > listed {
        let _ = writeln!(out, "journal: ... and {} more damaged ranges", v.journal_damaged_ranges - listed);
    }
    if v.journal_snapshot_damaged {
        let _ = writeln!(
            out,
            "journal: the snapshot's key of a block no later record names is suspect: such a block holding \
             another key, zeros or another run's stamp is unverifiable, not bad"
        );
    }
    match v.lost_write_ids {
        Some((from, u64::MAX)) => {
            let _ = writeln!(
                out,
                "journal: the damage may have taken the records of any write from id {from} on; a write among \
                 them that the target lost cannot be detected"
            );
        }
        Some((from, to)) => {
            let ids = if to - from == 1 { format!("id {from}") } else { format!("ids {from} to {}", to - 1) };
            let _ = writeln!(
                out,
                "journal: the damage took the records of {} ({ids}); were one of them lost on the target, it \
                 would not show",
                counted(to - from, "write")
            );
        }
        None if v.journal_damaged() && !v.journal_snapshot_damaged => {
            let _ = writeln!(out, "journal: the damage took no write's `before` record, only completions");
        }
        None => {}
    }
    if v.journal_damaged() && v.every_block {
        let _ =
            writeln!(out, "journal: every block of the region was read: the damage may concern any of them");
    }
    out
}

/// Every bad block listed, then the first unverifiable blocks and the
/// first blocks ahead of the journal.
fn block_lines(v: &Verdict) -> String {
    let mut out = String::new();
    for bad in &v.bad {
        let _ = writeln!(out, "  block at byte {}: {bad}", bad.offset);
    }
    for block in v.unverifiable_blocks.iter().take(AHEAD_SHOWN) {
        let _ = writeln!(out, "  block at byte {}: {block}", block.offset);
    }
    if v.unverifiable > AHEAD_SHOWN as u64 {
        let _ = writeln!(
            out,
            "  ... and {} more unverifiable blocks (--json lists the first {BAD_LISTED_MAX})",
            v.unverifiable - AHEAD_SHOWN as u64
        );
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
pub fn verdict_line(v: &Verdict, exits: VerdictExits) -> String {
    let incomplete = format!(
        "the journal is incomplete: {} blocks are ahead of it (written after its last durable record: the \
         journal was cut short, or written async and caught by a crash)",
        v.ahead
    );
    let damaged = format!(
        "the journal is damaged ({} it had made durable no longer {}): {} unverifiable, and a write it \
         recorded there that the target lost would not show",
        counted(v.journal_damaged_ranges, "part"),
        if v.journal_damaged_ranges == 1 { "reads" } else { "read" },
        counted(v.unverifiable, "block")
    );
    match Outcome::of(v) {
        Outcome::Ok => {
            format!("ok: every block checked holds what the journal says ({} checked)", v.checked())
        }
        Outcome::JournalIncomplete => format!(
            "{incomplete}; no block is older than the journal promises, none is damaged (exit status {})",
            exits.journal_incomplete
        ),
        Outcome::JournalDamaged => format!(
            "{damaged}; of the {} blocks checked, none is bad (exit status {})",
            v.checked(),
            exits.journal_damaged
        ),
        Outcome::NothingChecked => format!(
            "failed: the journal holds {} records, yet no block was checked (a check that checked nothing is \
             no pass)",
            v.records
        ),
        Outcome::Bad => {
            let mut line = format!("{} bad blocks", v.errors());
            if v.journal_damaged() {
                line += &format!("; also, {damaged}");
            }
            if v.journal_incomplete() {
                line += &format!("; also, {incomplete}");
            }
            line
        }
    }
}
