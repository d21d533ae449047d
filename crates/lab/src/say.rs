//! What the lab has to say while it works (a drive left out of a set, a
//! block log replayed, a temporary target removed), handed to the one sink
//! the binary installs: only the binary prints. Without a sink, what is
//! said is kept for [`take`], so a test can see it.

use std::sync::{Mutex, OnceLock};

/// How a thing said is meant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Something the user should know went otherwise than asked (a drive
    /// assembled without, a lock another process holds).
    Warning,
    /// What the lab did on its own that the user may want to know (a log
    /// replayed, a temporary target removed).
    Info,
}

/// One thing said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Said {
    pub kind: Kind,
    pub text: String,
}

type Sink = Box<dyn Fn(&Said) + Send + Sync>;

static SINK: OnceLock<Sink> = OnceLock::new();
static KEPT: Mutex<Vec<Said>> = Mutex::new(Vec::new());

/// Sends everything said from now on to `sink` (once per process; a
/// second sink is refused and returned).
pub fn install(sink: impl Fn(&Said) + Send + Sync + 'static) -> Result<(), Sink> {
    SINK.set(Box::new(sink))
}

/// Says a warning.
pub fn warning(text: impl Into<String>) {
    say(Said { kind: Kind::Warning, text: text.into() });
}

/// Says what the lab did.
pub fn info(text: impl Into<String>) {
    say(Said { kind: Kind::Info, text: text.into() });
}

fn say(said: Said) {
    match SINK.get() {
        Some(sink) => sink(&said),
        None => KEPT.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push(said),
    }
}

/// What was said with no sink installed, oldest first; emptied.
pub fn take() -> Vec<Said> {
    std::mem::take(&mut *KEPT.lock().unwrap_or_else(|poisoned| poisoned.into_inner()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_said_without_a_sink_is_kept_in_order() {
        warning("first");
        info("second");
        let kept = take();
        let mine: Vec<_> = kept.iter().filter(|s| s.text == "first" || s.text == "second").collect();
        assert_eq!(mine.len(), 2);
        assert_eq!((mine[0].kind, mine[1].kind), (Kind::Warning, Kind::Info));
    }
}
