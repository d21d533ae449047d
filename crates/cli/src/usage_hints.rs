//! What a usage error clap reports says next, for the habits people bring:
//! fio's options that iolab spells otherwise or does without, and a
//! subcommand typed wrong.

use clap::error::{ContextKind, ContextValue, ErrorKind};

/// fio's command-line options that have no iolab flag, with what to do
/// instead. (Those iolab shares are aliases of its own flags:
/// `--filename`, `--numjobs`, `--ioengine`, `--ramp_time`, ...)
const FIO_OPTIONS: [(&str, &str); 9] = [
    ("time_based", "iolab runs for all of --runtime already (fio's time_based); leave it out"),
    ("group_reporting", "iolab reports a job's threads together already; leave it out"),
    ("readwrite", "iolab's is --rw (read, write, randread, randwrite, rw, randrw)"),
    ("blocksize", "iolab's is --bs"),
    ("directory", "give the directory as --target DIR, with --nrfiles N"),
    ("rwmixwrite", "give the reads' share instead: --rwmixread (100 minus the writes')"),
    ("invalidate", "iolab drops the target's cached pages before each buffered run; --keep-cache keeps them"),
    ("verify", "iolab's is --validate (every block stamped and checked), with a verify phase at the end"),
    ("output", "iolab prints to standard output; redirect it, or give --json FILE"),
];

/// A line to print after `e`, if one helps.
pub fn hint(e: &clap::Error) -> Option<String> {
    let offending = match e.get(ContextKind::InvalidArg).or_else(|| e.get(ContextKind::InvalidSubcommand)) {
        Some(ContextValue::String(s)) => s.clone(),
        _ => return None,
    };
    match e.kind() {
        ErrorKind::UnknownArgument => {
            let name = offending.trim_start_matches('-');
            let name = name.split_once('=').map_or(name, |(n, _)| n);
            let (_, why) = FIO_OPTIONS.iter().find(|(fio, _)| *fio == name)?;
            Some(format!("  fio's --{name}: {why}"))
        }
        ErrorKind::InvalidSubcommand => {
            let suggested = e.get(ContextKind::SuggestedSubcommand).is_some();
            let nearest = nearest(&offending, crate::cli::subcommand_names())?;
            (!suggested)
                .then(|| format!("  tip: did you mean '{nearest}'? (iolab --help lists the commands)"))
        }
        _ => None,
    }
}

/// The name within two edits of `typed` (letters added, dropped,
/// changed or swapped), the closest first.
fn nearest(typed: &str, names: Vec<String>) -> Option<String> {
    let scored = names.into_iter().map(|n| (edits(typed, &n), n));
    scored.filter(|(d, _)| *d <= 2).min_by_key(|(d, _)| *d).map(|(_, n)| n)
}

/// The optimal string alignment distance between `a` and `b`.
fn edits(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            d[i][j] = (d[i - 1][j] + 1).min(d[i][j - 1] + 1).min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d[i][j] = d[i][j].min(d[i - 2][j - 2] + 1);
            }
        }
    }
    d[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_letter_and_a_swap_are_one_edit_each() {
        assert_eq!(edits("rn", "run"), 1);
        assert_eq!(edits("rnu", "run"), 1);
        assert_eq!(edits("volume", "volume"), 0);
    }

    #[test]
    fn nothing_is_suggested_for_a_word_far_from_every_name() {
        let names = vec!["run".to_string(), "validate".to_string()];
        assert_eq!(nearest("rn", names.clone()), Some("run".into()));
        assert_eq!(nearest("mkfs", names), None);
    }
}
