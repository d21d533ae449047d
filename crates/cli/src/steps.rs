//! A bar over a command's steps (the cells of a sweep), with the step
//! under way, the share done and the time left: on a terminal only;
//! elsewhere each step is a line on standard error, as before.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

pub(crate) struct Steps {
    bar: Option<ProgressBar>,
}

impl Steps {
    /// Follows `total` steps, the bar's line starting with `prefix`.
    pub fn new(total: u64, prefix: &str) -> Steps {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(total);
            let template = "{prefix} {msg:30} [{elapsed_precise}] {bar:25} {pos}/{len} ETA {eta}";
            if let Ok(style) = ProgressStyle::with_template(template) {
                bar.set_style(style.progress_chars("=> "));
            }
            bar.set_prefix(prefix.to_string());
            bar.enable_steady_tick(std::time::Duration::from_millis(500));
            bar
        });
        Steps { bar }
    }

    /// Step `label` begins, `done` of them over.
    pub fn begin(&self, done: u64, label: &str) {
        match &self.bar {
            Some(bar) => {
                bar.set_position(done);
                // The prefix names the command already.
                bar.set_message(label.trim_start_matches("sweep: ").to_string());
            }
            None => eprintln!("iolab: {label}"),
        }
    }
}

impl Drop for Steps {
    fn drop(&mut self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
