//! A Vinum-style volume manager: drives, subdisks, plexes (concat,
//! striped, RAID-5) and volumes (one plex, or several as a mirror).
//!
//! Flow: [`parse`] a configuration file into a [`Config`]; then either
//! [`create`] a volume set on open drives (lays it out with [`resolve`],
//! writes the on-disk metadata, binds) or [`build`] it without metadata;
//! later [`assemble`] it from the drives alone. A bound [`Volume`] is a
//! [`device::Backend`] behind the device crate's checked front, so it is
//! a [`device::Device`] every layer and workload above runs on unchanged,
//! and it never checks, counts or refuses a request itself (it only adds
//! a cause to poison it: a flush that left no plex holding every byte). States ([`Volume::set_state`], [`Volume::revive`],
//! [`Volume::init`]), counters ([`Volume::report`]) and parity
//! ([`Volume::check_parity`], [`Volume::rebuild_parity`]) are managed per
//! volume, or through the [`VolumeSet`] so that state changes are recorded
//! on every drive. A RAID-5 plex created on drives that held data starts
//! [`State::Initializing`] and takes no I/O until initialised.
//!
//! This crate never prints, never opens files by itself (the caller opens
//! drives and checks their signatures), never returns data it cannot vouch
//! for, never panics on input, and knows nothing about the layers above it
//! (logs, file systems, validation, workloads).

#![forbid(unsafe_code)]

mod assemble;
mod config;
mod counters;
mod error;
mod geometry;
mod holes;
mod init;
mod lock;
mod metadata;
mod object;
mod ondisk;
mod plex;
mod quorum;
mod raid5;
mod resolve;
mod revive;
mod volume;

pub use assemble::{assemble, assemble_given, GivenDrive};
pub use config::{
    parse, parse_size, Config, DriveSpec, PlexSpec, ReadPolicySpec, SdSpec, VolumeSpec, CONFIG_SECTOR_BYTES,
};
pub use counters::{
    decode_stats, encode_stats, Counters, StatsRecord, COUNTERS_PER_ENTRY, STATS_BODY_BYTES_MAX,
    STATS_ENTRY_BYTES_MIN, STATS_MAGIC, STATS_PREFIX_BYTES, STATS_SEQUENCE_MAX, STATS_VERSION,
};
pub use error::{ConfigError, FaultKind, MetadataArea, MetadataFault, VolumeError};
pub use geometry::{map_concat, map_striped, Extent, Org, ParityLayout, Raid5, RowSpan};
pub use metadata::{check_create, create, VolumeSet, REVIVE_SAVE_EVERY_STEPS};
pub use object::{ObjectKind, ObjectReport, PlexCountersSnapshot, State};
pub use ondisk::{
    check_config_text, config_slot_at, decode_config_copy, decode_drive_header, encode_config_copy,
    encode_drive_header, stats_slot_at, ConfigCopy, DriveHeader, PresentDrive, TextCheck, CONFIG_COPY_BYTES,
    CONFIG_MAGIC, CONFIG_PREFIX_BYTES, CONFIG_TEXT_BYTES_MAX, DRIVE_NAME_BYTES_MAX, GENERATION_MAX,
    HEADER_BYTES, METADATA_VERSION, STATS_AREA_BYTES_AT, STATS_SLOT_BYTES,
};
pub use raid5::{ParityReport, PARITY_MISMATCHES_LISTED_MAX};
pub use resolve::{
    resolve, DriveLayout, Layout, PlexLayout, SdLayout, VolumeLayout, DATA_START_BYTES, SUBDISK_END_BYTES_MAX,
};
pub use revive::{OnStep, REVIVE_STEP_BYTES};
pub use volume::{bind, build, PlexReport, ReadPolicy, SubdiskReport, Volume, VolumeReport, EVENTS_MAX};

impl std::str::FromStr for State {
    type Err = String;

    /// The states a user may set (`setstate`): up, down or stale.
    fn from_str(text: &str) -> Result<State, String> {
        match text {
            "up" => Ok(State::Up),
            "down" => Ok(State::Down),
            "stale" => Ok(State::Stale),
            other => Err(format!("'{other}' is not a state you can set; use up, down or stale")),
        }
    }
}
