//! The log's modes as a user names them, parsed once into the types used
//! here.

use std::str::FromStr;

use crate::{HomeWrites, Mode};

impl FromStr for Mode {
    type Err = String;

    fn from_str(text: &str) -> Result<Mode, String> {
        match text {
            "log" => Ok(Mode::Log),
            "async" => Ok(Mode::Async),
            "sync" => Ok(Mode::Sync),
            other => Err(format!("--log: '{other}' is not a mode; use log, async or sync")),
        }
    }
}

impl FromStr for HomeWrites {
    type Err = String;

    fn from_str(text: &str) -> Result<HomeWrites, String> {
        match text {
            "checkpoint" => Ok(HomeWrites::AtCheckpoint),
            "commit" => Ok(HomeWrites::AfterCommit),
            other => Err(format!("--log-home: '{other}' is not a choice; use checkpoint or commit")),
        }
    }
}

impl std::fmt::Display for HomeWrites {
    /// As the user names it (`--log-home`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            HomeWrites::AtCheckpoint => "checkpoint",
            HomeWrites::AfterCommit => "commit",
        })
    }
}
