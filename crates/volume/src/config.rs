//! Parser for Vinum's configuration file syntax.
//!
//! Produces a [`Config`]: a description of drives, volumes, plexes and
//! subdisks with the line each came from. It checks everything that can be
//! checked without the drives (syntax, names, stripe sizes, subdisk counts,
//! unknown drives); placing subdisks on drives is [`crate::resolve`]'s job.
//! This module never opens a file or a device.

use std::collections::HashMap;

use crate::error::ConfigError;
use crate::geometry::{Org, ParityLayout};
use crate::object::State;

/// Addressing unit of configuration sizes (`s` suffix) and the alignment
/// every size and offset must have.
pub const CONFIG_SECTOR_BYTES: u64 = 512;

/// A parsed configuration file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Config {
    pub drives: Vec<DriveSpec>,
    pub volumes: Vec<VolumeSpec>,
    /// `state OBJECT up|down|stale|initializing` lines (iolab's addition, written in
    /// saved configurations).
    pub states: Vec<StateSpec>,
    /// `revived OBJECT SIZE` lines: how far a revive of a plex or subdisk
    /// had come when the configuration was saved.
    pub progress: Vec<ProgressSpec>,
}

/// `revived OBJECT SIZE`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProgressSpec {
    pub name: String,
    pub revived_bytes: u64,
    pub line: usize,
}

/// `state OBJECT up|down|stale|initializing`: the saved state of a drive,
/// plex or subdisk (only a plex is ever initializing).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateSpec {
    pub name: String,
    pub state: State,
    pub line: usize,
}

/// `drive NAME device PATH`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DriveSpec {
    pub name: String,
    pub device: String,
    pub line: usize,
}

/// How a mirrored volume picks the plex to read from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadPolicySpec {
    RoundRobin,
    Prefer(String),
}

/// `volume NAME [readpol round|prefer PLEX] [setupstate]` and its plexes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VolumeSpec {
    pub name: String,
    pub read_policy: ReadPolicySpec,
    pub plexes: Vec<PlexSpec>,
    pub line: usize,
}

/// `plex [name N] org ORG [SIZE] [layout L] [volume V]` and its subdisks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlexSpec {
    pub name: String,
    pub org: Org,
    pub subdisks: Vec<SdSpec>,
    /// RAID-5: the drive holding the plex's write-ahead (stripe) log.
    pub log_drive: Option<String>,
    pub line: usize,
}

/// `sd [name N] length SIZE drive D [driveoffset X] [plexoffset Y] [plex P]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SdSpec {
    pub name: String,
    /// 0 means "the largest free area of the drive".
    pub length_bytes: u64,
    pub drive: String,
    pub drive_offset_bytes: Option<u64>,
    pub plex_offset_bytes: Option<u64>,
    pub line: usize,
}

/// Parses a size with an optional suffix: `s` (512-byte sectors), `b`,
/// `k`, `m`, `g` (powers of 1024); no suffix means bytes.
pub fn parse_size(text: &str) -> Option<u64> {
    let lower = text.to_ascii_lowercase();
    let (digits, unit) = match lower.char_indices().last()? {
        (i, 's') => (&lower[..i], CONFIG_SECTOR_BYTES),
        (i, 'b') => (&lower[..i], 1),
        (i, 'k') => (&lower[..i], 1 << 10),
        (i, 'm') => (&lower[..i], 1 << 20),
        (i, 'g') => (&lower[..i], 1 << 30),
        _ => (lower.as_str(), 1),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<u64>().ok()?.checked_mul(unit)
}

/// Parses a whole configuration file.
pub fn parse(text: &str) -> Result<Config, ConfigError> {
    let mut parser = Parser::default();
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        let content = raw.split('#').next().unwrap_or("");
        let words: Vec<&str> = content.split_whitespace().collect();
        if let Some((&keyword, args)) = words.split_first() {
            parser.line = line;
            match keyword {
                "drive" => parser.drive(args)?,
                "volume" => parser.volume(args)?,
                "plex" => parser.plex(args)?,
                "sd" | "subdisk" => parser.sd(args)?,
                "state" => parser.state(args)?,
                "revived" => parser.revived(args)?,
                other => return Err(parser.syntax(format!("unknown keyword '{other}'"))),
            }
        }
    }
    parser.finish()
}

#[derive(Default)]
struct Parser {
    config: Config,
    line: usize,
    /// Every object name and the line that defined it (one namespace, as
    /// in Vinum).
    names: HashMap<String, (usize, &'static str)>,
    /// (volume index, plex index) of the last plex defined.
    last_plex: Option<(usize, usize)>,
}

/// Splits `args` into an optional leading name and `keyword value` pairs.
fn pairs<'a>(parser: &Parser, args: &[&'a str]) -> Result<Vec<(&'a str, Vec<&'a str>)>, ConfigError> {
    let mut out: Vec<(&str, Vec<&str>)> = Vec::new();
    for &word in args {
        match out.last_mut() {
            Some((key, values)) if takes_more(key, values, word) => values.push(word),
            _ if is_keyword(word) => out.push((word, Vec::new())),
            _ => return Err(parser.syntax(format!("unexpected word '{word}'"))),
        }
    }
    Ok(out)
}

fn is_keyword(word: &str) -> bool {
    matches!(
        word,
        "name"
            | "device"
            | "readpol"
            | "setupstate"
            | "state"
            | "vol"
            | "org"
            | "layout"
            | "volume"
            | "length"
            | "len"
            | "drive"
            | "driveoffset"
            | "plexoffset"
            | "plex"
            | "log"
    )
}

/// How many values each keyword takes: `org` takes one or two, `readpol`
/// one or two, `setupstate` none, the rest one.
fn takes_more(key: &str, values: &[&str], word: &str) -> bool {
    match key {
        "setupstate" => false,
        "org" => values.is_empty() || (values.len() == 1 && values[0] != "concat" && !is_keyword(word)),
        "readpol" => values.is_empty() || (values.len() == 1 && values[0] == "prefer"),
        _ => values.is_empty(),
    }
}

impl Parser {
    fn syntax(&self, problem: String) -> ConfigError {
        ConfigError::Syntax { line: self.line, problem }
    }

    fn claim(&mut self, kind: &'static str, name: &str) -> Result<(), ConfigError> {
        if let Some(&(first_line, _)) = self.names.get(name) {
            return Err(ConfigError::Duplicate { line: self.line, kind, name: name.to_string(), first_line });
        }
        self.names.insert(name.to_string(), (self.line, kind));
        Ok(())
    }

    fn size(&self, key: &str, values: &[&str]) -> Result<u64, ConfigError> {
        let text = one(self, key, values)?;
        let bytes = parse_size(text).ok_or_else(|| {
            self.syntax(format!("{key} '{text}' is not a size (a number with suffix s, k, m or g)"))
        })?;
        if bytes % CONFIG_SECTOR_BYTES != 0 {
            return Err(self.syntax(format!("{key} {text} is not a multiple of {CONFIG_SECTOR_BYTES} bytes")));
        }
        Ok(bytes)
    }

    fn drive(&mut self, args: &[&str]) -> Result<(), ConfigError> {
        let (name, rest) = split_name(self, args)?;
        let (mut device, mut state) = (None, None);
        for (key, values) in pairs(self, rest)? {
            match key {
                "device" => device = Some(one(self, key, &values)?.to_string()),
                "state" => state = Some(self.state_word(one(self, key, &values)?)?),
                _ => return Err(self.syntax(format!("'{key}' is not a drive option"))),
            }
        }
        let device = device.ok_or_else(|| self.syntax(format!("drive '{name}' needs 'device PATH'")))?;
        self.claim("drive", &name)?;
        self.inline_state("drive", &name, state);
        self.config.drives.push(DriveSpec { name, device, line: self.line });
        Ok(())
    }

    fn volume(&mut self, args: &[&str]) -> Result<(), ConfigError> {
        let (name, rest) = split_name(self, args)?;
        let mut read_policy = ReadPolicySpec::RoundRobin;
        for (key, values) in pairs(self, rest)? {
            read_policy = match (key, values.as_slice()) {
                ("readpol", ["round"]) => ReadPolicySpec::RoundRobin,
                ("readpol", ["prefer", plex]) => ReadPolicySpec::Prefer(plex.to_string()),
                ("readpol", _) => return Err(self.syntax("readpol takes 'round' or 'prefer PLEX'".into())),
                ("setupstate", _) | ("state", [_]) => read_policy,
                _ => return Err(self.syntax(format!("'{key}' is not a volume option"))),
            };
        }
        self.claim("volume", &name)?;
        self.config.volumes.push(VolumeSpec { name, read_policy, plexes: Vec::new(), line: self.line });
        self.last_plex = None;
        Ok(())
    }

    fn plex(&mut self, args: &[&str]) -> Result<(), ConfigError> {
        let (mut name, mut org, mut layout, mut state) = (None, None, ParityLayout::LeftAsymmetric, None);
        let mut log_drive = None;
        let mut volume = self.config.volumes.len().checked_sub(1);
        for (key, values) in pairs(self, args)? {
            match key {
                "name" => name = Some(one(self, key, &values)?.to_string()),
                "org" => org = Some(self.org(&values)?),
                "layout" => layout = self.layout(one(self, key, &values)?)?,
                "volume" | "vol" => volume = Some(self.volume_index(one(self, key, &values)?)?),
                "state" => state = Some(self.state_word(one(self, key, &values)?)?),
                "log" => log_drive = Some(one(self, key, &values)?.to_string()),
                _ => return Err(self.syntax(format!("'{key}' is not a plex option"))),
            }
        }
        let volume = volume.ok_or_else(|| self.syntax("plex comes before any volume".into()))?;
        let mut org =
            org.ok_or_else(|| self.syntax("plex needs 'org concat|striped SIZE|raid5 SIZE'".into()))?;
        if let Org::Raid5 { layout: l, .. } = &mut org {
            *l = layout;
        }
        let plexes = &self.config.volumes[volume].plexes;
        let name = name.unwrap_or_else(|| format!("{}.p{}", self.config.volumes[volume].name, plexes.len()));
        self.claim("plex", &name)?;
        check_stripe(self.line, &name, &org)?;
        if log_drive.is_some() && !matches!(org, Org::Raid5 { .. }) {
            return Err(self.syntax(format!("plex {name}: only a RAID-5 plex takes a log drive")));
        }
        self.inline_state("plex", &name, state);
        let plexes = &mut self.config.volumes[volume].plexes;
        plexes.push(PlexSpec { name, org, subdisks: Vec::new(), log_drive, line: self.line });
        self.last_plex = Some((volume, plexes.len() - 1));
        Ok(())
    }

    fn org(&self, values: &[&str]) -> Result<Org, ConfigError> {
        let stripe = |values: &[&str]| {
            let text = one(self, "stripe size", &values[1..])?;
            parse_size(text).ok_or_else(|| self.syntax(format!("stripe size '{text}' is not a size")))
        };
        match values.first().copied() {
            Some("concat") => Ok(Org::Concat),
            Some("striped") => Ok(Org::Striped { stripe_bytes: stripe(values)? }),
            Some("raid5") => {
                Ok(Org::Raid5 { stripe_bytes: stripe(values)?, layout: ParityLayout::LeftAsymmetric })
            }
            other => Err(self.syntax(format!(
                "org '{}' is not one of concat, striped SIZE, raid5 SIZE",
                other.unwrap_or("")
            ))),
        }
    }

    fn layout(&self, text: &str) -> Result<ParityLayout, ConfigError> {
        match text {
            "la" | "left-asymmetric" => Ok(ParityLayout::LeftAsymmetric),
            "ls" | "left-symmetric" => Ok(ParityLayout::LeftSymmetric),
            _ => {
                Err(self
                    .syntax(format!("layout '{text}' is not left-asymmetric (la) or left-symmetric (ls)")))
            }
        }
    }

    fn volume_index(&self, name: &str) -> Result<usize, ConfigError> {
        self.config.volumes.iter().position(|v| v.name == name).ok_or_else(|| ConfigError::UnknownObject {
            line: self.line,
            what: "volume",
            name: name.to_string(),
        })
    }

    fn plex_index(&self, name: &str) -> Result<(usize, usize), ConfigError> {
        for (v, volume) in self.config.volumes.iter().enumerate() {
            if let Some(p) = volume.plexes.iter().position(|p| p.name == name) {
                return Ok((v, p));
            }
        }
        Err(ConfigError::UnknownObject { line: self.line, what: "plex", name: name.to_string() })
    }

    fn sd(&mut self, args: &[&str]) -> Result<(), ConfigError> {
        let (mut name, mut length, mut drive) = (None, None, None);
        let (mut drive_offset, mut plex_offset, mut plex, mut state) = (None, None, self.last_plex, None);
        for (key, values) in pairs(self, args)? {
            match key {
                "name" => name = Some(one(self, key, &values)?.to_string()),
                "length" | "len" => length = Some(self.size("length", &values)?),
                "drive" => drive = Some(one(self, key, &values)?.to_string()),
                "driveoffset" => drive_offset = Some(self.size(key, &values)?),
                "plexoffset" => plex_offset = Some(self.size(key, &values)?),
                "plex" => plex = Some(self.plex_index(one(self, key, &values)?)?),
                "state" => state = Some(self.state_word(one(self, key, &values)?)?),
                _ => return Err(self.syntax(format!("'{key}' is not a subdisk option"))),
            }
        }
        let (v, p) = plex.ok_or_else(|| self.syntax("sd comes before any plex".into()))?;
        let length_bytes =
            length.ok_or_else(|| self.syntax("sd needs 'length SIZE' (0 = largest free area)".into()))?;
        let drive = drive.ok_or_else(|| self.syntax("sd needs 'drive NAME'".into()))?;
        let plex_spec = &self.config.volumes[v].plexes[p];
        let name = name.unwrap_or_else(|| format!("{}.s{}", plex_spec.name, plex_spec.subdisks.len()));
        if !self.config.drives.iter().any(|d| d.name == drive) {
            return Err(ConfigError::UnknownDrive { line: self.line, sd: name, drive });
        }
        self.claim("subdisk", &name)?;
        self.inline_state("subdisk", &name, state);
        let sd = SdSpec {
            name,
            length_bytes,
            drive,
            drive_offset_bytes: drive_offset,
            plex_offset_bytes: plex_offset,
            line: self.line,
        };
        self.config.volumes[v].plexes[p].subdisks.push(sd);
        Ok(())
    }

    /// Vinum's object states, mapped onto iolab's four: objects Vinum
    /// calls degraded, flaky or corrupt are up (their subdisks' states tell
    /// what is usable); crashed, faulty or obsolete ones are down; empty
    /// or reviving ones are stale until revived; initializing is kept
    /// (see [`Parser::state_of`] for what it means below a plex).
    fn state_word(&self, word: &str) -> Result<State, ConfigError> {
        match word {
            "up" | "degraded" | "flaky" | "corrupt" => Ok(State::Up),
            "down" | "crashed" | "faulty" | "obsolete" => Ok(State::Down),
            "stale" | "empty" | "reviving" => Ok(State::Stale),
            "initializing" => Ok(State::Initializing),
            other => Err(self.syntax(format!("state '{other}' is not up, down, stale or initializing"))),
        }
    }

    /// The state an object of `kind` takes for `state`: only a plex is
    /// initializing (its parity not yet built); a drive or subdisk Vinum
    /// calls initializing is being zeroed, so it is stale until revived.
    fn state_of(kind: &str, state: State) -> State {
        match (kind, state) {
            ("plex", State::Initializing) => State::Initializing,
            (_, State::Initializing) => State::Stale,
            (_, state) => state,
        }
    }

    /// Records an inline `state S` option of the object `name`.
    fn inline_state(&mut self, kind: &str, name: &str, state: Option<State>) {
        if let Some(state) = state {
            let state = Self::state_of(kind, state);
            self.config.states.push(StateSpec { name: name.to_string(), state, line: self.line });
        }
    }

    fn revived(&mut self, args: &[&str]) -> Result<(), ConfigError> {
        let [name, size] = args else {
            return Err(self.syntax("revived takes a plex or subdisk name and a size".into()));
        };
        let revived_bytes = self.size("revived", &[size])?;
        match self.names.get(*name) {
            Some((_, "plex" | "subdisk")) => {
                self.config.progress.push(ProgressSpec {
                    name: name.to_string(),
                    revived_bytes,
                    line: self.line,
                });
                Ok(())
            }
            _ => Err(ConfigError::UnknownObject {
                line: self.line,
                what: "plex or subdisk",
                name: name.to_string(),
            }),
        }
    }

    fn state(&mut self, args: &[&str]) -> Result<(), ConfigError> {
        let [name, word] = args else {
            return Err(self.syntax("state takes an object name and up, down, stale or initializing".into()));
        };
        let state = self.state_word(word)?;
        match self.names.get(*name) {
            Some((_, "volume")) | None => Err(ConfigError::UnknownObject {
                line: self.line,
                what: "drive, plex or subdisk",
                name: name.to_string(),
            }),
            Some(&(_, kind)) => {
                let state = Self::state_of(kind, state);
                self.config.states.push(StateSpec { name: name.to_string(), state, line: self.line });
                Ok(())
            }
        }
    }

    fn finish(self) -> Result<Config, ConfigError> {
        for volume in &self.config.volumes {
            if let ReadPolicySpec::Prefer(plex) = &volume.read_policy {
                if !volume.plexes.iter().any(|p| &p.name == plex) {
                    return Err(ConfigError::UnknownObject {
                        line: volume.line,
                        what: "plex",
                        name: plex.clone(),
                    });
                }
            }
            for plex in &volume.plexes {
                check_count(plex)?;
            }
        }
        Ok(self.config)
    }
}

fn split_name<'a>(parser: &Parser, args: &'a [&'a str]) -> Result<(String, &'a [&'a str]), ConfigError> {
    match args {
        ["name", name, rest @ ..] => Ok((name.to_string(), rest)),
        [name, rest @ ..] if !is_keyword(name) => Ok((name.to_string(), rest)),
        [keyword, ..] => Err(parser.syntax(format!(
            "missing object name ('{keyword}' is a keyword; to use it as a name write: name {keyword})"
        ))),
        [] => Err(parser.syntax("missing object name".into())),
    }
}

fn one<'a>(parser: &Parser, key: &str, values: &[&'a str]) -> Result<&'a str, ConfigError> {
    match values {
        [value] => Ok(value),
        _ => Err(parser.syntax(format!("'{key}' takes one value"))),
    }
}

fn check_stripe(line: usize, plex: &str, org: &Org) -> Result<(), ConfigError> {
    match org.stripe_bytes() {
        Some(stripe_bytes) if stripe_bytes == 0 || stripe_bytes % CONFIG_SECTOR_BYTES != 0 => {
            Err(ConfigError::BadStripe {
                line,
                plex: plex.to_string(),
                stripe_bytes,
                sector_bytes: CONFIG_SECTOR_BYTES,
            })
        }
        _ => Ok(()),
    }
}

fn check_count(plex: &PlexSpec) -> Result<(), ConfigError> {
    let needed = plex.org.subdisks_min();
    if plex.subdisks.len() < needed {
        return Err(ConfigError::TooFewSubdisks {
            line: plex.line,
            plex: plex.name.clone(),
            org: plex.org.kind(),
            found: plex.subdisks.len(),
            needed,
        });
    }
    Ok(())
}
