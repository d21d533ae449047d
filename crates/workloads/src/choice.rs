//! A job's mode-like values, parsed once from their text (a flag or a job
//! file key) into the types the engine uses; the rules that tie several
//! values together are in [`crate::JobSpec::check`].

use std::fmt;
use std::str::FromStr;

use crate::layout::LayoutPolicy;
use crate::spec::{spec_error, BlockSizes, Engine, Pattern, Rw, Skew, SpecError};

impl FromStr for Rw {
    type Err = SpecError;
    fn from_str(text: &str) -> Result<Rw, SpecError> {
        Rw::parse(text)
    }
}

impl FromStr for BlockSizes {
    type Err = SpecError;
    fn from_str(text: &str) -> Result<BlockSizes, SpecError> {
        BlockSizes::parse(text)
    }
}

impl FromStr for Skew {
    type Err = SpecError;
    fn from_str(text: &str) -> Result<Skew, SpecError> {
        Skew::parse(text)
    }
}

impl FromStr for Pattern {
    type Err = SpecError;
    fn from_str(text: &str) -> Result<Pattern, SpecError> {
        Pattern::parse(text)
    }
}

/// `--engine`: an engine, or `auto` to let the target decide.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EngineChoice {
    #[default]
    Auto,
    Sync,
    Uring,
    Virtual,
}

impl EngineChoice {
    /// `auto`: io_uring where requests can go to a descriptor (`raw_fd`)
    /// and the kernel allows it, except under a `sync` validation journal,
    /// where each write waits for two journal flushes and the sync
    /// engine's threads wait in parallel (docs/PERFORMANCE.md), and at
    /// depth 1, where a ring only adds its own cost to each call (fio's
    /// default, psync, is the same); on a simulated disk (`virtual_disk`),
    /// virtual time.
    pub fn resolve(self, raw_fd: bool, virtual_disk: bool, sync_journal: bool, iodepth: u32) -> Engine {
        match self {
            EngineChoice::Sync => Engine::Sync,
            EngineChoice::Uring => Engine::Uring,
            EngineChoice::Virtual => Engine::Virtual,
            EngineChoice::Auto if virtual_disk => Engine::Virtual,
            EngineChoice::Auto if sync_journal || iodepth <= 1 => Engine::Sync,
            EngineChoice::Auto if raw_fd && crate::uring_available() => Engine::Uring,
            EngineChoice::Auto => Engine::Sync,
        }
    }
}

impl FromStr for EngineChoice {
    type Err = SpecError;
    fn from_str(text: &str) -> Result<EngineChoice, SpecError> {
        match text {
            "auto" => Ok(EngineChoice::Auto),
            // fio's names for the same mechanisms: pread/pwrite, io_uring.
            "sync" | "psync" | "pvsync" | "pvsync2" => Ok(EngineChoice::Sync),
            "uring" | "io_uring" => Ok(EngineChoice::Uring),
            "virtual" => Ok(EngineChoice::Virtual),
            "libaio" | "posixaio" => Err(spec_error(
                "engine",
                format!("iolab has no {text} engine; uring (fio's io_uring) submits asynchronously as {text} does"),
            )),
            other => Err(spec_error(
                "engine",
                format!("'{other}' is not an engine; use auto, sync, uring or virtual (sim: targets)"),
            )),
        }
    }
}

/// `--journal-commit`: who makes a group journal's commits durable.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Committer {
    /// A committer thread beside the workers.
    #[default]
    Thread,
    /// Each uring worker, through its own ring.
    Ring,
}

impl FromStr for Committer {
    type Err = SpecError;
    fn from_str(text: &str) -> Result<Committer, SpecError> {
        match text {
            "thread" => Ok(Committer::Thread),
            "ring" => Ok(Committer::Ring),
            other => Err(spec_error(
                "journal-commit",
                format!("'{other}' is not a way to commit; use thread or ring"),
            )),
        }
    }
}

impl FromStr for LayoutPolicy {
    type Err = SpecError;
    fn from_str(text: &str) -> Result<LayoutPolicy, SpecError> {
        match text {
            "auto" => Ok(LayoutPolicy::Auto),
            "always" => Ok(LayoutPolicy::Always),
            "never" => Ok(LayoutPolicy::Never),
            other => {
                Err(spec_error("layout", format!("'{other}' is not a choice; use auto, always or never")))
            }
        }
    }
}

/// Each choice written as its flag takes it, so a job printed back as a
/// job file (`iolab run --print-job`) reads the same.
impl fmt::Display for EngineChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EngineChoice::Auto => "auto",
            EngineChoice::Sync => "sync",
            EngineChoice::Uring => "uring",
            EngineChoice::Virtual => "virtual",
        })
    }
}

impl fmt::Display for Committer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Committer::Thread => "thread",
            Committer::Ring => "ring",
        })
    }
}

impl fmt::Display for LayoutPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LayoutPolicy::Auto => "auto",
            LayoutPolicy::Always => "always",
            LayoutPolicy::Never => "never",
        })
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pattern::Random => f.write_str("random"),
            Pattern::Zeros => f.write_str("zeros"),
            Pattern::Compressible { pct } => write!(f, "compress:{pct}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_choice_reads_back_as_it_prints() {
        for text in ["auto", "sync", "uring"] {
            assert_eq!(text.parse::<EngineChoice>().unwrap().to_string(), text);
        }
        for text in ["thread", "ring"] {
            assert_eq!(text.parse::<Committer>().unwrap().to_string(), text);
        }
        for text in ["auto", "always", "never"] {
            assert_eq!(text.parse::<LayoutPolicy>().unwrap().to_string(), text);
        }
        for text in ["random", "zeros", "compress:40"] {
            assert_eq!(text.parse::<Pattern>().unwrap().to_string(), text);
        }
    }
}
