//! The progress of a kernel crash run's states.

/// A bar on standard error while crash states are checked (hidden when
/// that is not a terminal): states checked of all, and the time left.
pub(super) struct StatesBar(indicatif::ProgressBar);

impl StatesBar {
    pub(super) fn new(what: &str) -> StatesBar {
        let bar = indicatif::ProgressBar::hidden();
        bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
        let template = format!("{what} [{{elapsed_precise}}] {{bar:30}} {{pos}}/{{len}} states, ETA {{eta}}");
        if let Ok(style) = indicatif::ProgressStyle::with_template(&template) {
            bar.set_style(style);
        }
        StatesBar(bar)
    }

    pub(super) fn show(&self, done: u64, total: u64) {
        self.0.set_length(total);
        self.0.set_position(done);
    }

    pub(super) fn done(&self) {
        self.0.finish_and_clear();
    }
}
