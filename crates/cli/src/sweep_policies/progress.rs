//! The sweep's progress through its long phases: on a terminal, a bar in
//! archive entries (each copy's entries once extracted and once removed,
//! over every column and repeat) with the phase, the copy, the rate and
//! the time left; elsewhere nothing but the line each run ends with. It
//! also carries Ctrl-C: an interrupted sweep stops at the end of the copy
//! it is on (GNU tar, in the same process group, stops at once) and
//! unwinds, unmounting and removing what it made. The sweep reaches it
//! as its [`Watch`].

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use indicatif::{ProgressBar, ProgressStyle};
use lab::sweep_policies::Watch;

pub(crate) struct Progress {
    bar: Option<ProgressBar>,
    /// Entries in one copy of the archive.
    entries: u64,
    copies: u32,
    /// "repeat R/N COLUMN PHASE", and the entries counted in this copy.
    at: Mutex<(String, u64)>,
    /// Set by SIGINT or SIGTERM.
    interrupted: Arc<AtomicBool>,
}

impl Progress {
    /// Follows `runs` runs; SIGINT and SIGTERM no longer end the process
    /// but the sweep (see [`Progress::go_on`]).
    pub fn new(entries: u64, copies: u32, runs: u64) -> std::io::Result<Progress> {
        let interrupted = Arc::new(AtomicBool::new(false));
        for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            signal_hook::flag::register(signal, Arc::clone(&interrupted))?;
        }
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(runs * 2 * u64::from(copies) * entries);
            let template = "{msg:40} [{elapsed_precise}] {bar:25} {rate:>14} ETA {eta}";
            if let Ok(style) = ProgressStyle::with_template(template) {
                let rate = |state: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                    let _ = write!(w, "{:.0} entries/s", state.per_sec());
                };
                bar.set_style(style.progress_chars("=> ").with_key("rate", rate));
            }
            bar
        });
        Ok(Progress { bar, entries, copies, at: Mutex::new((String::new(), 0)), interrupted })
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }

    /// A line for the user, above the bar where there is one.
    fn say(&self, line: &str) {
        match &self.bar {
            Some(bar) => bar.println(line),
            None => eprintln!("{line}"),
        }
    }
}

impl Watch for Progress {
    fn go_on(&self) -> anyhow::Result<()> {
        if self.interrupted.load(Ordering::Relaxed) {
            anyhow::bail!("interrupted; the sweep removes what it made and stops");
        }
        Ok(())
    }

    fn phase(&self, repeat: u32, repeats: u32, column: &str, phase: &str) {
        let mut at = self.at.lock().unwrap_or_else(|e| e.into_inner());
        *at = (format!("repeat {repeat}/{repeats} {column} {phase}"), 0);
        if let Some(bar) = &self.bar {
            bar.set_message(format!("{} copy 1/{}", at.0, self.copies));
        }
    }

    fn entry(&self) {
        if let Some(bar) = &self.bar {
            self.at.lock().unwrap_or_else(|e| e.into_inner()).1 += 1;
            bar.inc(1);
        }
    }

    fn copy_done(&self, copy: u32) -> anyhow::Result<()> {
        self.go_on()?;
        let Some(bar) = &self.bar else { return Ok(()) };
        let mut at = self.at.lock().unwrap_or_else(|e| e.into_inner());
        bar.inc(self.entries.saturating_sub(at.1));
        at.1 = 0;
        if copy < self.copies {
            bar.set_message(format!("{} copy {}/{}", at.0, copy + 1, self.copies));
        }
        Ok(())
    }

    fn ran(&self, repeat: u32, repeats: u32, column: &str, tar: &report::PhaseRun, rm: &report::PhaseRun) {
        self.say(&format!(
            "repeat {repeat}/{repeats} {column:<5} tar {}  rm {}",
            report::min_sec(tar.seconds),
            report::min_sec(rm.seconds)
        ));
    }
}
