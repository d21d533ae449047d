//! The validation choices a user names (journal mode, where key maps
//! live), parsed once from their text into the types used here.

use std::fmt;
use std::str::FromStr;

use crate::journal::JournalMode;
use crate::keys::KeyMapChoice;

impl FromStr for JournalMode {
    type Err = String;

    fn from_str(text: &str) -> Result<JournalMode, String> {
        match text {
            "group" => Ok(JournalMode::Group),
            "sync" => Ok(JournalMode::Sync),
            "async" => Ok(JournalMode::Async),
            other => Err(format!("--journal-mode: '{other}' is not a mode; use group, sync or async")),
        }
    }
}

impl FromStr for KeyMapChoice {
    type Err = String;

    fn from_str(text: &str) -> Result<KeyMapChoice, String> {
        match text {
            "auto" => Ok(KeyMapChoice::Auto),
            "memory" => Ok(KeyMapChoice::Memory),
            "file" => Ok(KeyMapChoice::File),
            other => Err(format!("--key-map: '{other}' is not a choice; use auto, memory or file")),
        }
    }
}

/// Written as `--journal-mode` takes it.
impl fmt::Display for JournalMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            JournalMode::Group => "group",
            JournalMode::Sync => "sync",
            JournalMode::Async => "async",
        })
    }
}

/// Written as `--key-map` takes it.
impl fmt::Display for KeyMapChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KeyMapChoice::Auto => "auto",
            KeyMapChoice::Memory => "memory",
            KeyMapChoice::File => "file",
        })
    }
}
