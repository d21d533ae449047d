//! Ctrl-C (SIGINT) and SIGTERM for a command that must end cleanly: the
//! first sets a flag the work polls (it stops at its next call and the
//! command writes back what it must, as at its end) and says so; a second
//! one, while that goes on, says what stopping now loses and ends the
//! process at once with exit status 130.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Once;

static INTERRUPTED: AtomicBool = AtomicBool::new(false);
static INSTALLED: Once = Once::new();
/// The messages the handlers write (set once, before they are installed).
static MESSAGES: std::sync::OnceLock<(&'static [u8], &'static [u8])> = std::sync::OnceLock::new();

/// Installs the handlers (once a process) and returns the flag. `first`
/// is written at the first interrupt (what happens now), `second` at the
/// second (what stopping at once loses), each on a line of its own.
pub fn catch(first: &'static str, second: &'static str) -> std::io::Result<&'static AtomicBool> {
    let mut result = Ok(());
    INSTALLED.call_once(|| {
        let _ = MESSAGES.set((first.as_bytes(), second.as_bytes()));
        for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            // SAFETY: the handler only loads and swaps an atomic, writes
            // to standard error with write(2) and calls _exit(2), all
            // async-signal-safe; it allocates and locks nothing.
            let installed = unsafe { signal_hook::low_level::register(signal, on_interrupt) };
            if let Err(e) = installed {
                result = Err(e);
            }
        }
    });
    result.map(|()| &INTERRUPTED)
}

fn on_interrupt() {
    let (first, second) = MESSAGES.get().copied().unwrap_or((b"", b""));
    let again = INTERRUPTED.swap(true, Ordering::SeqCst);
    let text = if again { second } else { first };
    for part in [&b"\niolab: "[..], text, b"\n"] {
        // SAFETY: writing a static buffer to descriptor 2.
        unsafe { libc::write(2, part.as_ptr().cast(), part.len()) };
    }
    if again {
        signal_hook::low_level::exit(i32::from(crate::exit::INTERRUPTED));
    }
}
