//! Error types of the volume crate. Every variant names the object or the
//! configuration line it is about; a fault in a drive's metadata names
//! the device, the byte on it and the field (docs/formats.md, "Volume
//! metadata").

/// A configuration that cannot be parsed or laid out on its drives. Every
/// variant carries the 1-based line of the configuration it is about.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("line {line}: {problem}")]
    Syntax { line: usize, problem: String },
    #[error("line {line}: {kind} name '{name}' is already used on line {first_line}")]
    Duplicate { line: usize, kind: &'static str, name: String, first_line: usize },
    #[error("line {line}: subdisk '{sd}' names drive '{drive}', which no drive line defines")]
    UnknownDrive { line: usize, sd: String, drive: String },
    #[error("line {line}: {what} '{name}' is not defined")]
    UnknownObject { line: usize, what: &'static str, name: String },
    #[error(
        "line {line}: stripe size of plex '{plex}' is {stripe_bytes} bytes, not a non-zero multiple of \
         {sector_bytes} bytes (use e.g. 512k or 986s)"
    )]
    BadStripe { line: usize, plex: String, stripe_bytes: u64, sector_bytes: u64 },
    #[error("line {line}: {org} plex '{plex}' has {found} subdisks; it needs at least {needed}")]
    TooFewSubdisks { line: usize, plex: String, org: &'static str, found: usize, needed: usize },
    #[error(
        "line {line}: subdisk '{sd}' is {length_bytes} bytes but '{first}' (line {first_line}) is \
         {first_length_bytes} bytes; the subdisks of a {org} plex must be equal"
    )]
    UnequalSubdisks {
        line: usize,
        sd: String,
        length_bytes: u64,
        first: String,
        first_line: usize,
        first_length_bytes: u64,
        org: &'static str,
    },
    #[error(
        "line {line}: subdisk '{sd}' (bytes {start}..{end} of drive '{drive}') overlaps subdisk '{other}' \
         defined on line {other_line}"
    )]
    Overlap { line: usize, sd: String, drive: String, start: u64, end: u64, other: String, other_line: usize },
    #[error("line {line}: subdisk '{sd}' does not fit on drive '{drive}': {problem}")]
    DriveTooSmall { line: usize, sd: String, drive: String, problem: String },
    #[error("line {line}: plex '{plex}': {problem}")]
    BadPlex { line: usize, plex: String, problem: String },
}

impl ConfigError {
    /// The 1-based line of the configuration the error is about.
    pub fn line(&self) -> usize {
        match self {
            ConfigError::Syntax { line, .. }
            | ConfigError::Duplicate { line, .. }
            | ConfigError::UnknownDrive { line, .. }
            | ConfigError::UnknownObject { line, .. }
            | ConfigError::BadStripe { line, .. }
            | ConfigError::TooFewSubdisks { line, .. }
            | ConfigError::UnequalSubdisks { line, .. }
            | ConfigError::Overlap { line, .. }
            | ConfigError::DriveTooSmall { line, .. }
            | ConfigError::BadPlex { line, .. } => *line,
        }
    }
}

/// A failure to bind a configuration to drives or to change a volume's
/// objects.
#[derive(Debug, thiserror::Error)]
pub enum VolumeError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("drive '{drive}' was not given a device to bind to")]
    MissingDrive { drive: String },
    #[error("drive '{drive}': {problem}")]
    BadDrive { drive: String, problem: String },
    #[error("no object named '{name}' in volume '{volume}'")]
    UnknownObject { volume: String, name: String },
    #[error("volume '{volume}': {problem}")]
    Invalid { volume: String, problem: String },
    #[error("volume metadata: {0}")]
    Metadata(String),
    #[error(transparent)]
    Fault(Box<MetadataFault>),
    #[error(
        "{device}: holds no iolab volume metadata (no magic IOLABVOL at byte 0, no configuration copy \
         behind it, and not blank): is it one of the set's drives?"
    )]
    NotADrive { device: String },
    #[error(transparent)]
    Device(#[from] device::DeviceError),
}

impl From<MetadataFault> for VolumeError {
    fn from(fault: MetadataFault) -> VolumeError {
        VolumeError::Fault(Box::new(fault))
    }
}

/// Where a fault in a drive's metadata lies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetadataArea {
    /// The drive header (bytes 0..4096).
    Header,
    /// Configuration slot 0 or 1.
    ConfigSlot(u8),
    /// Statistics slot 0 or 1.
    StatsSlot(u8),
}

impl std::fmt::Display for MetadataArea {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MetadataArea::Header => f.write_str("drive header"),
            MetadataArea::ConfigSlot(slot) => write!(f, "configuration slot {slot}"),
            MetadataArea::StatsSlot(slot) => write!(f, "statistics slot {slot}"),
        }
    }
}

/// A drive header, configuration copy or statistics record that fails a
/// check of docs/formats.md ("Volume metadata"): the device it was read from (and
/// the drive, when known), the byte on the device where the field starts,
/// the field, and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}{device}: {area}, byte {offset} ({field}): {problem}", drive_prefix(.drive))]
pub struct MetadataFault {
    pub device: String,
    /// The drive the device holds, when known (a readable header, or the
    /// caller's configuration file).
    pub drive: Option<String>,
    pub area: MetadataArea,
    /// Byte offset on the device of the field.
    pub offset: u64,
    /// The field's name in docs/formats.md.
    pub field: &'static str,
    pub problem: FaultKind,
}

fn drive_prefix(drive: &Option<String>) -> String {
    drive.as_ref().map(|d| format!("drive '{d}', ")).unwrap_or_default()
}

/// What is wrong with a field of a drive's metadata.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FaultKind {
    #[error("cannot be read: {0}")]
    Unreadable(String),
    #[error("cut short: {have} bytes where the structure needs {needed}")]
    CutShort { have: usize, needed: usize },
    #[error("reads {}, not the magic {expected}", show_magic(.found))]
    Magic { found: [u8; 8], expected: &'static str },
    #[error("version {found}; this iolab reads version {supported}{}", version_hint(*.found))]
    Version { found: u32, supported: u32 },
    #[error(
        "checksum mismatch (stored {stored:#010x}, computed {computed:#010x}): damaged, torn or overwritten"
    )]
    Checksum { stored: u32, computed: u32 },
    #[error("{found}, where this version has exactly {expected}")]
    Fixed { found: u64, expected: u64 },
    #[error("{found} is out of bounds: {bounds}")]
    OutOfBounds { found: u64, bounds: String },
    #[error("holds a set id other than the header's: a copy of another volume set")]
    OtherSet,
    #[error("{0}")]
    Malformed(String),
    #[error("the configuration text on disk, {0}")]
    Text(Box<ConfigError>),
}

fn show_magic(found: &[u8; 8]) -> String {
    if found.iter().all(|&b| b == 0) {
        return "zeros".into();
    }
    format!("\"{}\"", found.escape_ascii())
}

fn version_hint(found: u32) -> &'static str {
    if found == 1 {
        " (version 1 had no statistics area: re-create the set with `iolab volume create --force`)"
    } else {
        ""
    }
}
