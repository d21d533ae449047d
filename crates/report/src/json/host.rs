//! The `host` object every document carries (docs/json.md, "The `host`
//! object"): when the command began, on what machine, and with which
//! command line, so a saved result says where it came from.
//!
//! The cli gathers these facts from the operating system and fills this
//! wire type field by field; the report crate never looks at the machine
//! itself. Every field is optional on reading, so documents written
//! before `host` existed, or by a machine that could not tell a fact,
//! still read.

use serde::{Deserialize, Serialize};

/// The machine and command behind a document. A fact iolab could not
/// read is `None` (`null`), never a guess.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Host {
    /// When the command started, RFC 3339 in UTC to the second
    /// ("2026-11-27T16:20:05Z").
    pub started_at: Option<String>,
    pub hostname: Option<String>,
    /// The kernel's release, as `uname -r` prints it.
    pub kernel: Option<String>,
    /// The first CPU's model name.
    pub cpu_model: Option<String>,
    /// The CPUs this process may run on.
    pub cpus: Option<u64>,
    /// The machine's memory, as the kernel counts it.
    pub memory_bytes: Option<u64>,
    /// iolab's arguments as given, its own path first.
    pub command_line: Vec<String>,
}
