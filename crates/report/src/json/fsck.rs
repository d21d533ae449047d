//! `iolab fs fsck --json`: schema `iolab-fsck`, version 1.

use ffs::fsck::Report;
use serde::Serialize;

pub const SCHEMA: &str = "iolab-fsck";
pub const VERSION: u32 = 1;

#[derive(Clone, Debug, Serialize)]
pub struct FsckDocument {
    pub schema: &'static str,
    pub version: u32,
    pub iolab_version: String,
    /// The machine and command line behind the document.
    pub host: super::Host,
    pub target: String,
    pub inodes_checked: u64,
    pub directories: u64,
    pub blocks_claimed: u64,
    /// Nothing found.
    pub clean: bool,
    /// Something found and not repaired.
    pub damage_left: bool,
    pub findings: Vec<Finding>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Finding {
    /// One of the classes docs/json.md lists (`leaked_block`, ...).
    pub class: &'static str,
    pub detail: String,
    pub repaired: bool,
}

impl FsckDocument {
    pub fn new(iolab_version: &str, host: super::Host, target: &str, r: &Report) -> FsckDocument {
        FsckDocument {
            schema: SCHEMA,
            version: VERSION,
            iolab_version: iolab_version.into(),
            host,
            target: target.into(),
            inodes_checked: r.inodes_checked,
            directories: r.directories,
            blocks_claimed: r.blocks_claimed,
            clean: r.clean(),
            damage_left: r.damage_left(),
            findings: (r.findings.iter())
                .map(|f| Finding { class: f.class.name(), detail: f.detail.clone(), repaired: f.repaired })
                .collect(),
        }
    }

    pub fn to_json(&self) -> String {
        super::pretty(self)
    }
}
