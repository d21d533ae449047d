//! The validation choices a user names (journal mode, where key maps
//! live), parsed once from their text into the types used here.

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
