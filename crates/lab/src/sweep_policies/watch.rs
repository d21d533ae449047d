//! Following a sweep as it runs: the caller's [`Watch`] hears each phase
//! begin, each entry and copy done and each run's times, and says whether
//! to go on (an interrupted sweep stops at the end of the copy it is on
//! and unwinds, unmounting and removing what it made).

/// What a sweep tells the one following it.
pub trait Watch: Sync {
    /// An error once the sweep should stop (it was interrupted).
    fn go_on(&self) -> anyhow::Result<()>;
    /// Run `repeat` of `repeats` of `column` begins its `phase` ("tar",
    /// "rm"), at copy 1.
    fn phase(&self, repeat: u32, repeats: u32, column: &str, phase: &str);
    /// One entry done (where the work can say so).
    fn entry(&self);
    /// Copy `copy` of the phase is done; an error if the sweep should stop.
    fn copy_done(&self, copy: u32) -> anyhow::Result<()>;
    /// A run of `column` ended with these phases.
    fn ran(&self, repeat: u32, repeats: u32, column: &str, tar: &report::PhaseRun, rm: &report::PhaseRun);
}

/// One run of one column, whose phases a [`Watch`] follows.
pub struct Run<'a> {
    pub watch: &'a dyn Watch,
    pub repeat: u32,
    pub repeats: u32,
    pub column: &'a str,
}

impl<'a> Run<'a> {
    /// The run's `phase` ("tar", "rm") begins.
    pub fn phase(&self, phase: &str) -> &'a dyn Watch {
        self.watch.phase(self.repeat, self.repeats, self.column, phase);
        self.watch
    }
}
