//! Error types of the volume crate. Every variant names the object or the
//! configuration line it is about.

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
    Device(#[from] device::DeviceError),
}
