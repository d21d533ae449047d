//! What a workload is: the parameters of one job (how it validates too),
//! their parsing from the strings users type (`4k`, `4k/10:64k/90`,
//! `zipf:1.2`), and their checking against a target. Every error names the
//! parameter and what it accepts.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use validation::{KeyMapChoice, KeyPlace};

use crate::journal::JournalSpec;
use crate::replay::ReplaySpec;

/// A workload parameter that cannot be used, with the flag it came from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--{flag}: {message}")]
pub struct SpecError {
    pub flag: &'static str,
    pub message: String,
}

pub fn spec_error(flag: &'static str, message: impl Into<String>) -> SpecError {
    SpecError { flag, message: message.into() }
}

/// Parses a byte count: a number with an optional binary suffix
/// (`512`, `4k`, `64KiB`, `1m`, `2g`, `1t`; `s` = 512-byte sectors).
pub fn parse_bytes(flag: &'static str, text: &str) -> Result<u64, SpecError> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, suffix) = t.split_at(split);
    let bad = || {
        spec_error(flag, format!("'{text}' is not a size; use a whole number with an optional unit: 512, 4k, 64KiB, 1m, 2g, 8s (sectors)"))
    };
    if digits.is_empty() {
        return Err(bad());
    }
    let n: u64 = digits.parse().map_err(|_| bad())?;
    let unit: u64 = match suffix.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "s" => 512,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        _ => return Err(bad()),
    };
    n.checked_mul(unit).ok_or_else(|| spec_error(flag, format!("'{text}' is too large")))
}

/// Parses a duration: seconds, or a number with `ms`, `s`, `m`, `h`.
pub fn parse_duration(flag: &'static str, text: &str) -> Result<Duration, SpecError> {
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (number, suffix) = t.split_at(split);
    let bad = || spec_error(flag, format!("'{text}' is not a duration; use e.g. 10, 10s, 500ms, 2m, 1h"));
    let n: f64 = number.parse().map_err(|_| bad())?;
    let seconds = match suffix {
        "" | "s" => n,
        "ms" => n / 1000.0,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(bad()),
    };
    if !seconds.is_finite() || !(0.0..=1e9).contains(&seconds) {
        return Err(bad());
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// The access pattern, named as fio's `rw`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rw {
    Read,
    Write,
    RandRead,
    RandWrite,
    Rw,
    RandRw,
    /// Every request a discard, in order (fio's `trim`).
    Trim,
    /// Every request a discard at random (fio's `randtrim`).
    RandTrim,
    /// Each block discarded, then written (fio's `trimwrite`), in order.
    TrimWrite,
}

/// What a pattern discards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trimming {
    None,
    /// Every request.
    All,
    /// Each block just before it is written.
    ThenWrite,
}

impl Rw {
    pub fn parse(text: &str) -> Result<Rw, SpecError> {
        Ok(match text {
            "read" => Rw::Read,
            "write" => Rw::Write,
            "randread" => Rw::RandRead,
            "randwrite" => Rw::RandWrite,
            "rw" | "readwrite" => Rw::Rw,
            "randrw" => Rw::RandRw,
            "trim" => Rw::Trim,
            "randtrim" => Rw::RandTrim,
            "trimwrite" => Rw::TrimWrite,
            _ => {
                return Err(spec_error(
                    "rw",
                    format!(
                    "'{text}' is not an access pattern; use read, write, randread, randwrite, rw, randrw, trim, \
                     randtrim or trimwrite"
                ),
                ))
            }
        })
    }

    /// Percentage of requests that seek (are placed at random).
    pub fn default_seek_pct(self) -> u8 {
        match self {
            Rw::Read | Rw::Write | Rw::Rw | Rw::Trim | Rw::TrimWrite => 0,
            Rw::RandRead | Rw::RandWrite | Rw::RandRw | Rw::RandTrim => 100,
        }
    }

    /// Percentage of requests that read, unless the mix is given.
    pub fn default_read_pct(self) -> u8 {
        match self {
            Rw::Read | Rw::RandRead => 100,
            Rw::Write | Rw::RandWrite | Rw::Trim | Rw::RandTrim | Rw::TrimWrite => 0,
            Rw::Rw | Rw::RandRw => 50,
        }
    }

    /// What the pattern discards.
    pub fn trimming(self) -> Trimming {
        match self {
            Rw::Trim | Rw::RandTrim => Trimming::All,
            Rw::TrimWrite => Trimming::ThenWrite,
            _ => Trimming::None,
        }
    }

    pub fn is_mixed(self) -> bool {
        matches!(self, Rw::Rw | Rw::RandRw)
    }
}

impl fmt::Display for Rw {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Rw::Read => "read",
            Rw::Write => "write",
            Rw::RandRead => "randread",
            Rw::RandWrite => "randwrite",
            Rw::Rw => "rw",
            Rw::RandRw => "randrw",
            Rw::Trim => "trim",
            Rw::RandTrim => "randtrim",
            Rw::TrimWrite => "trimwrite",
        })
    }
}

/// The `fs` transfer mix: file-system transfers of 1 to 120 sectors,
/// about 8 KiB on average (weights in percent, adding up to 100; see
/// docs/workloads.md).
pub const FS_MIX: &[(u64, u32)] = &[
    (512, 6),
    (1024, 8),
    (2048, 10),
    (3072, 4),
    (4096, 28),
    (6144, 4),
    (8192, 20),
    (12288, 4),
    (16384, 8),
    (32768, 5),
    (49152, 2),
    (61440, 1),
];

/// Transfer sizes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BlockSizes {
    /// One size.
    Fixed(u64),
    /// Sizes with weights (fio's bssplit); `name` is set for named mixes.
    Split { name: Option<String>, sizes: Vec<(u64, u32)> },
    /// Uniform over multiples of `step` from `min` to `max`.
    Range { min: u64, max: u64, step: u64 },
}

impl BlockSizes {
    /// `4k`, `fs`, `4k/10:64k/50:32k/40`, or `512-64k` (a range in steps of
    /// 512 bytes; `512-64k/4k` for another step).
    pub fn parse(text: &str) -> Result<BlockSizes, SpecError> {
        let text = text.trim();
        if text == "fs" {
            return Ok(BlockSizes::Split { name: Some("fs".into()), sizes: FS_MIX.to_vec() });
        }
        if text.contains(':') || text.contains('/') && !text.contains('-') {
            return parse_split(text);
        }
        if let Some((min, rest)) = text.split_once('-') {
            let (max, step) = match rest.split_once('/') {
                Some((max, step)) => (max, parse_bytes("bs", step)?),
                None => (rest, 512),
            };
            let (min, max) = (parse_bytes("bs", min)?, parse_bytes("bs", max)?);
            if min == 0 || step == 0 || min > max || min % step != 0 || max % step != 0 {
                return Err(spec_error(
                    "bs",
                    format!("range '{text}' needs 0 < min <= max, both multiples of the step ({step} bytes)"),
                ));
            }
            return Ok(BlockSizes::Range { min, max, step });
        }
        let size = parse_bytes("bs", text)?;
        if size == 0 {
            return Err(spec_error("bs", "a transfer size must be at least one sector (512 bytes)"));
        }
        Ok(BlockSizes::Fixed(size))
    }

    pub fn min_bytes(&self) -> u64 {
        match self {
            BlockSizes::Fixed(n) => *n,
            BlockSizes::Split { sizes, .. } => sizes.iter().map(|s| s.0).min().unwrap_or(0),
            BlockSizes::Range { min, .. } => *min,
        }
    }

    pub fn max_bytes(&self) -> u64 {
        match self {
            BlockSizes::Fixed(n) => *n,
            BlockSizes::Split { sizes, .. } => sizes.iter().map(|s| s.0).max().unwrap_or(0),
            BlockSizes::Range { max, .. } => *max,
        }
    }

    /// Every size a request may have (ranges give their step instead).
    pub fn each_size(&self) -> Vec<u64> {
        match self {
            BlockSizes::Fixed(n) => vec![*n],
            BlockSizes::Split { sizes, .. } => sizes.iter().map(|s| s.0).collect(),
            BlockSizes::Range { min, max, step } => vec![*min, *max, *step],
        }
    }

    /// The mean transfer size in bytes.
    pub fn mean_bytes(&self) -> f64 {
        match self {
            BlockSizes::Fixed(n) => *n as f64,
            BlockSizes::Split { sizes, .. } => {
                let total: u64 = sizes.iter().map(|s| u64::from(s.1)).sum();
                sizes.iter().map(|(b, w)| *b as f64 * f64::from(*w)).sum::<f64>() / total as f64
            }
            BlockSizes::Range { min, max, .. } => (*min + *max) as f64 / 2.0,
        }
    }
}

impl fmt::Display for BlockSizes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BlockSizes::Fixed(n) => write!(f, "{}", human_bytes(*n)),
            BlockSizes::Split { name: Some(name), .. } => f.write_str(name),
            BlockSizes::Split { name: None, sizes } => f.write_str(&format_split(sizes)),
            BlockSizes::Range { min, max, step } => {
                write!(f, "{}-{}/{}", human_bytes(*min), human_bytes(*max), human_bytes(*step))
            }
        }
    }
}

/// A mix: sizes with the percentage of requests of each, adding up to
/// 100, as fio's bssplit and Vdbench's xfersize distributions. Weights
/// read as relative would let `4k/10:64k/50` mean 1:5 here and 10:90 in
/// fio (whose last size takes what the others leave), so the sum is
/// checked instead of guessed at.
fn parse_split(text: &str) -> Result<BlockSizes, SpecError> {
    let mut sizes = Vec::new();
    let mut weights = Vec::new();
    for part in text.split(':') {
        let (size, weight) = part.split_once('/').ok_or_else(|| {
            spec_error("bs", format!("'{part}' in '{text}' needs SIZE/PERCENT, as in 4k/10:64k/50:32k/40"))
        })?;
        let size = parse_bytes("bs", size)?;
        let weight: u32 = weight.parse().map_err(|_| {
            spec_error("bs", format!("percentage '{weight}' in '{text}' is not a whole number"))
        })?;
        if size == 0 {
            return Err(spec_error("bs", format!("size 0 in '{text}': transfers need at least one sector")));
        }
        weights.push((size, weight));
        if weight > 0 {
            sizes.push((size, weight));
        }
    }
    let sum: u64 = weights.iter().map(|&(_, w)| u64::from(w)).sum();
    if sum != 100 {
        let example = match percentages(&weights) {
            Some(scaled) => format!(", as in {}", format_split(&scaled)),
            None => String::new(),
        };
        return Err(spec_error(
            "bs",
            format!(
                "the weights in '{text}' add up to {sum}; they are the percentages of requests of each size (as \
                 fio's bssplit and Vdbench's xfersize) and must add up to 100{example}"
            ),
        ));
    }
    Ok(BlockSizes::Split { name: None, sizes })
}

/// `weights` scaled to percentages adding up to exactly 100 (largest
/// remainders rounded up), for an error's example; None when all are 0.
fn percentages(weights: &[(u64, u32)]) -> Option<Vec<(u64, u32)>> {
    let sum: u64 = weights.iter().map(|&(_, w)| u64::from(w)).sum();
    if sum == 0 {
        return None;
    }
    let mut scaled: Vec<(u64, u32)> =
        weights.iter().map(|&(b, w)| (b, (u64::from(w) * 100 / sum) as u32)).collect();
    let mut by_remainder: Vec<usize> = (0..weights.len()).collect();
    by_remainder.sort_by_key(|&i| std::cmp::Reverse(u64::from(weights[i].1) * 100 % sum));
    let short = 100 - scaled.iter().map(|&(_, p)| p).sum::<u32>();
    for &i in by_remainder.iter().take(short as usize) {
        scaled[i].1 += 1;
    }
    Some(scaled)
}

fn format_split(sizes: &[(u64, u32)]) -> String {
    let parts: Vec<String> = sizes.iter().map(|(b, w)| format!("{}/{w}", human_bytes(*b))).collect();
    parts.join(":")
}

/// Writes `n` bytes in the largest binary unit that divides it.
pub fn human_bytes(n: u64) -> String {
    for (unit, name) in [(1u64 << 40, "t"), (1 << 30, "g"), (1 << 20, "m"), (1 << 10, "k")] {
        if n >= unit && n % unit == 0 {
            return format!("{}{name}", n / unit);
        }
    }
    format!("{n}")
}

/// How random offsets are spread over the region.
#[derive(Clone, Debug, PartialEq)]
pub enum Skew {
    Uniform,
    /// Zipf over the block slots with exponent `theta` (> 0), hot slots
    /// scattered over the region.
    Zipf {
        theta: f64,
    },
    /// `io_pct` percent of requests go to the first `region_pct` percent of
    /// the region (Vdbench's hot band), the rest uniformly elsewhere.
    Hot {
        io_pct: u8,
        region_pct: u8,
    },
    /// fio's `zoned`: the region cut into consecutive zones from its
    /// start, each (`io_pct`, `region_pct`) taking that percentage of the
    /// requests, uniformly within it. The I/O shares add up to 100, the
    /// region shares to at most 100 (what is left is not touched).
    Zoned {
        zones: Vec<(u8, u8)>,
    },
}

impl Skew {
    /// `uniform`, `zipf:1.2`, or `hot:90/10`.
    pub fn parse(text: &str) -> Result<Skew, SpecError> {
        let bad = || {
            spec_error("skew", format!("'{text}' is not a skew; use uniform, zipf:THETA (e.g. zipf:1.2), hot:IO%/REGION% (e.g. hot:90/10) or zoned:IO/REGION:... (e.g. zoned:60/10:30/20:10/70)"))
        };
        if text == "uniform" {
            return Ok(Skew::Uniform);
        }
        if let Some(theta) = text.strip_prefix("zipf:") {
            let theta: f64 = theta.parse().map_err(|_| bad())?;
            if !(theta.is_finite() && theta > 0.0 && theta <= 10.0) {
                return Err(spec_error("skew", format!("zipf exponent {theta} must be in (0, 10]")));
            }
            return Ok(Skew::Zipf { theta });
        }
        if let Some(rest) = text.strip_prefix("zoned:") {
            return Skew::zoned(rest);
        }
        if let Some(rest) = text.strip_prefix("hot:") {
            let (io, region) = rest.split_once('/').ok_or_else(bad)?;
            let io: u8 = io.trim_end_matches('%').parse().map_err(|_| bad())?;
            let region: u8 = region.trim_end_matches('%').parse().map_err(|_| bad())?;
            if io > 100 || region == 0 || region >= 100 {
                return Err(spec_error(
                    "skew",
                    format!("hot:{io}/{region}: I/O share must be 0..=100 and region share 1..=99 percent"),
                ));
            }
            return Ok(Skew::Hot { io_pct: io, region_pct: region });
        }
        Err(bad())
    }
}

impl Skew {
    /// `IO/REGION:IO/REGION:...` (fio's `zoned:50/5:30/15:20/`): a last
    /// zone with no region share takes the rest of the region.
    fn zoned(text: &str) -> Result<Skew, SpecError> {
        let bad = |why: String| spec_error("skew", format!("zoned:{text}: {why}"));
        let parts: Vec<&str> = text.split(':').filter(|p| !p.is_empty()).collect();
        if parts.is_empty() || parts.len() > 64 {
            return Err(bad("give 1 to 64 zones as IO%/REGION%, e.g. zoned:60/10:30/20:10/70".into()));
        }
        let mut zones = Vec::new();
        for (i, part) in parts.iter().enumerate() {
            let (io, region) =
                part.split_once('/').ok_or_else(|| bad(format!("'{part}' is not IO%/REGION%")))?;
            let io: u8 = io
                .parse()
                .ok()
                .filter(|p| *p <= 100)
                .ok_or_else(|| bad(format!("'{io}' is not a percentage")))?;
            let used: u32 = zones.iter().map(|&(_, r): &(u8, u8)| u32::from(r)).sum();
            let region: u8 = match region {
                "" if i + 1 == parts.len() => (100 - used.min(100)) as u8,
                r => r.parse().ok().filter(|p| (1..=100).contains(p)).ok_or_else(|| {
                    bad(format!(
                        "'{r}' is not a region percentage 1-100 (only the last zone may leave it out)"
                    ))
                })?,
            };
            zones.push((io, region));
        }
        let io: u32 = zones.iter().map(|&(io, _)| u32::from(io)).sum();
        let region: u32 = zones.iter().map(|&(_, r)| u32::from(r)).sum();
        if io != 100 {
            return Err(bad(format!("the I/O shares add up to {io}, not 100")));
        }
        if region > 100 || zones.iter().any(|&(_, r)| r == 0) {
            return Err(bad(format!("the region shares add up to {region}; at most 100, none empty")));
        }
        Ok(Skew::Zoned { zones })
    }
}

impl fmt::Display for Skew {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Skew::Uniform => f.write_str("uniform"),
            Skew::Zipf { theta } => write!(f, "zipf:{theta}"),
            Skew::Hot { io_pct, region_pct } => write!(f, "hot:{io_pct}/{region_pct}"),
            Skew::Zoned { zones } => {
                let zones: Vec<String> = zones.iter().map(|(io, region)| format!("{io}/{region}")).collect();
                write!(f, "zoned:{}", zones.join(":"))
            }
        }
    }
}

/// What the data written looks like.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pattern {
    Random,
    Zeros,
    /// Random data that compresses to about `pct` percent of its size.
    Compressible {
        pct: u8,
    },
}

impl Pattern {
    /// `random`, `zeros`, or `compress:50` (compresses to about 50%).
    pub fn parse(text: &str) -> Result<Pattern, SpecError> {
        match text {
            "random" => Ok(Pattern::Random),
            "zeros" => Ok(Pattern::Zeros),
            _ => {
                let pct =
                    text.strip_prefix("compress:").and_then(|p| p.trim_end_matches('%').parse::<u8>().ok());
                match pct {
                    Some(pct) if (1..=100).contains(&pct) => Ok(Pattern::Compressible { pct }),
                    _ => Err(spec_error(
                        "pattern",
                        format!("'{text}' is not a data pattern; use random, zeros or compress:PCT (1-100, the size after compression)"),
                    )),
                }
            }
        }
    }
}

/// How requests are submitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// One positional call at a time per thread.
    Sync,
    /// io_uring, `iodepth` requests in flight per thread, registered
    /// buffers and file.
    Uring,
    /// A simulated disk's virtual time: `iodepth` requests in the model
    /// per thread, every time modeled (`sim:` targets only).
    Virtual,
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Engine::Sync => "sync",
            Engine::Uring => "uring",
            Engine::Virtual => "virtual",
        })
    }
}

/// One job: everything the engine needs except the target itself.
#[derive(Clone, Debug)]
pub struct JobSpec {
    pub name: String,
    /// Start of the region used, in bytes.
    pub offset_bytes: u64,
    /// Length of the region; `None` = from the offset to the end of the target.
    pub size_bytes: Option<u64>,
    pub rw: Rw,
    /// Percent of requests that read.
    pub read_pct: u8,
    /// Percent of requests placed at random (Vdbench's seekpct); the rest
    /// continue where the thread's previous request ended.
    pub seek_pct: u8,
    /// Bytes skipped after each sequential request (fio's `rw=read:8k`):
    /// the next starts this far past the end of the one before; negative
    /// walks backwards, the next starting this far before the previous
    /// one's end (fio's `rw=read:-8k`). 0: one after another.
    pub skip_bytes: i64,
    pub skew: Skew,
    pub bs: BlockSizes,
    /// Offsets are multiples of this (fio's blockalign); `None` = the fixed
    /// transfer size, or the sector size for mixed sizes.
    pub align_bytes: Option<u64>,
    pub threads: u32,
    pub iodepth: u32,
    /// Requests queued before they are handed to the kernel together
    /// (uring engine; fio's iodepth_batch_submit). 1..=iodepth.
    pub submit_batch: u32,
    pub engine: Engine,
    /// Flush after every this many writes (per thread); 0 = never.
    pub flush_every: u64,
    /// Flush once at the end (included in the measurement, as fio's end_fsync).
    pub end_flush: bool,
    pub runtime: Option<Duration>,
    /// Stop after this many bytes in all (across threads).
    pub io_bytes: Option<u64>,
    /// Stop after exactly this many requests in all (across threads).
    pub ios: Option<u64>,
    /// Run this long before measuring.
    pub ramp: Duration,
    /// Total requests per second across threads; 0 = unlimited.
    pub rate_iops: u64,
    pub pattern: Pattern,
    /// Duplicate units among the writes (Vdbench's dedupratio and
    /// dedupunit); `None`: every sector written is its own.
    pub dedupe: Option<Dedupe>,
    pub seed: u64,
    /// Stamp every write and check every read (see `validate.rs`).
    pub validate: Option<ValidateSpec>,
    /// The time the job runs in: the wall's, or the virtual time of the
    /// simulated disks under its target (several threads through layers;
    /// `device::VirtualClock`'s world). Not part of a job's description.
    pub clock: device::Clock,
    /// Replay a trace's requests instead of generating them.
    pub replay: Option<ReplaySpec>,
    /// Write every request issued (and every flush) to this file as a
    /// version 3 iolog (fio's write_iolog); with several threads, one file
    /// each (`replay::thread_iolog_path`).
    pub write_iolog: Option<std::path::PathBuf>,
}

/// How a job validates.
#[derive(Clone, Debug)]
pub struct ValidateSpec {
    /// Check a block's old contents before rewriting it (Vdbench's default).
    pub preread: bool,
    /// Read a block back right after writing it.
    pub reread: bool,
    /// After the run, read back every block it wrote and check it (fio's
    /// `do_verify`): the verify phase, outside the measured run.
    pub verify: bool,
    /// Stop the job after this many errors.
    pub max_errors: u64,
    /// Identifies this run in every stamp.
    pub run_id: u64,
    /// Keep the key map in a crash-safe journal.
    pub journal: Option<JournalSpec>,
    /// Where the key map lives.
    pub key_map: KeyMapSpec,
}

/// Where key maps live: memory or a mapped scratch file (the cli's
/// `--key-map` and `--key-map-dir`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeyMapSpec {
    pub choice: KeyMapChoice,
    /// The directory of scratch files. Default: the journal directory when
    /// the journal is in one, else the system's temporary directory.
    pub dir: Option<PathBuf>,
}

impl KeyMapSpec {
    /// Memory or a file by size, in the default directory.
    pub const AUTO: KeyMapSpec = KeyMapSpec { choice: KeyMapChoice::Auto, dir: None };

    /// Where a map of `blocks` keys goes, `default_dir` standing in for an
    /// unset directory.
    pub fn place(&self, blocks: u64, default_dir: Option<&Path>) -> KeyPlace {
        let dir = match (&self.dir, default_dir) {
            (Some(dir), _) => dir.clone(),
            (None, Some(dir)) => dir.to_path_buf(),
            (None, None) => std::env::temp_dir(),
        };
        self.choice.place(blocks, &dir)
    }
}

/// Upper bounds that keep a job from exhausting the machine.
pub const MAX_THREADS: u32 = 1024;
pub const MAX_IODEPTH: u32 = 4096;
pub const MAX_TRANSFER_BYTES: u64 = 64 << 20;

impl Default for JobSpec {
    fn default() -> JobSpec {
        JobSpec {
            name: "job".into(),
            offset_bytes: 0,
            size_bytes: None,
            rw: Rw::RandRw,
            read_pct: 70,
            seek_pct: 100,
            skip_bytes: 0,
            skew: Skew::Uniform,
            bs: BlockSizes::Fixed(4096),
            align_bytes: None,
            threads: 1,
            iodepth: 1,
            submit_batch: 1,
            engine: Engine::Sync,
            flush_every: 0,
            end_flush: false,
            runtime: None,
            io_bytes: None,
            ios: None,
            ramp: Duration::ZERO,
            rate_iops: 0,
            pattern: Pattern::Random,
            dedupe: None,
            seed: 1,
            validate: None,
            clock: device::Clock::Wall,
            replay: None,
            write_iolog: None,
        }
    }
}

/// Duplicate data among a job's writes, as Vdbench's `dedupratio` and
/// `dedupunit` make it: of the units written, one in `ratio` is its own
/// (stamped with where it lands and the thread's write count), the rest
/// are copies of a few shared units ([`DEDUPE_SETS`]), the same in every
/// thread, so a deduplicating device stores about one unit in `ratio`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Dedupe {
    /// Units written for each distinct one (R:1), at least 1.
    pub ratio: f64,
    /// The unit duplicates are whole in: a multiple of 512 bytes that
    /// divides every transfer size.
    pub unit_bytes: usize,
}

/// How many distinct units the duplicates are copies of.
pub const DEDUPE_SETS: usize = 16;

impl std::fmt::Display for Dedupe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:1 in {}-byte units", self.ratio, self.unit_bytes)
    }
}

/// The region a job works in, resolved against a target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    pub start: u64,
    pub len: u64,
    pub align: u64,
}

impl JobSpec {
    /// Whether the job discards: a trim pattern, or a trace with trims.
    pub fn trims(&self) -> bool {
        self.rw.trimming() != Trimming::None || self.replay.as_ref().is_some_and(|r| r.trace.trims())
    }

    /// Checks the job's parameters on their own.
    pub fn check(&self) -> Result<(), SpecError> {
        if self.read_pct > 100 {
            return Err(spec_error(
                "rwmixread",
                format!("{} is over 100; give a percentage 0-100", self.read_pct),
            ));
        }
        if self.seek_pct > 100 {
            return Err(spec_error(
                "seekpct",
                format!("{} is over 100; give a percentage 0-100", self.seek_pct),
            ));
        }
        if self.threads == 0 || self.threads > MAX_THREADS {
            return Err(spec_error(
                "threads",
                format!("{} is out of range; use 1-{MAX_THREADS}", self.threads),
            ));
        }
        if self.iodepth == 0 || self.iodepth > MAX_IODEPTH {
            return Err(spec_error(
                "iodepth",
                format!("{} is out of range; use 1-{MAX_IODEPTH}", self.iodepth),
            ));
        }
        if self.submit_batch == 0 || self.submit_batch > self.iodepth {
            return Err(spec_error(
                "iodepth-batch",
                format!("{} is out of range; use 1 up to the depth ({})", self.submit_batch, self.iodepth),
            ));
        }
        if self.engine == Engine::Sync && self.iodepth > 1 {
            return Err(spec_error(
                "iodepth",
                format!("{} needs --engine uring; the sync engine has one request in flight per thread (use --threads for more)", self.iodepth),
            ));
        }
        if self.bs.max_bytes() > MAX_TRANSFER_BYTES {
            return Err(spec_error(
                "bs",
                format!("transfers over {} are not supported", human_bytes(MAX_TRANSFER_BYTES)),
            ));
        }
        if self.size_bytes == Some(0) {
            return Err(spec_error(
                "size",
                "the region must not be empty; give a positive size or leave it out",
            ));
        }
        if self.io_bytes == Some(0) || self.ios == Some(0) {
            let flag = if self.ios == Some(0) { "ios" } else { "io-size" };
            return Err(spec_error(flag, "must be positive"));
        }
        if self.runtime == Some(Duration::ZERO) {
            return Err(spec_error("runtime", "must be positive"));
        }
        if self.align_bytes == Some(0) {
            return Err(spec_error("bsalign", "must be positive"));
        }
        self.check_trims()?;
        let ring = self.validate.as_ref().and_then(|v| v.journal.as_ref()).is_some_and(|j| j.ring);
        if ring && self.engine == Engine::Sync {
            return Err(spec_error(
                "journal-commit",
                "the sync engine has no ring (--journal-commit ring commits through the uring engine's); use --engine uring or auto on a file or device",
            ));
        }
        Ok(())
    }

    /// Resolves the region on a target of `target_bytes` with `sector`-byte
    /// sectors, checking that every transfer fits and is whole sectors.
    pub fn region(&self, target_bytes: u64, sector: u64) -> Result<Region, SpecError> {
        self.check()?;
        if self.offset_bytes % sector != 0 {
            return Err(spec_error(
                "offset",
                format!("{} is not a multiple of the target's {sector}-byte sector", self.offset_bytes),
            ));
        }
        if self.offset_bytes >= target_bytes {
            return Err(spec_error(
                "offset",
                format!("{} is at or past the end of the target ({target_bytes} bytes)", self.offset_bytes),
            ));
        }
        let len = self.size_bytes.unwrap_or(target_bytes - self.offset_bytes);
        if let (Some(replay), Some(end)) = (&self.replay, self.offset_bytes.checked_add(len)) {
            if end > target_bytes {
                return Err(spec_error(
                    "replay",
                    format!(
                        "{}: the trace reaches {end} bytes into the target, which has {target_bytes}; replay onto \
                         a larger target, or name a missing file (it is made as large as the trace reaches)",
                        replay.source
                    ),
                ));
            }
        }
        if self.offset_bytes.checked_add(len).is_none_or(|end| end > target_bytes) {
            return Err(spec_error(
                "size",
                format!("offset {} + size {len} runs past the end of the target ({target_bytes} bytes); use at most {}", self.offset_bytes, target_bytes - self.offset_bytes),
            ));
        }
        for size in self.bs.each_size() {
            if size % sector != 0 {
                return Err(spec_error(
                    "bs",
                    format!("{size} bytes is not a whole number of the target's {sector}-byte sectors"),
                ));
            }
        }
        let align = match (self.align_bytes, &self.bs) {
            (Some(a), _) => a,
            (None, BlockSizes::Fixed(n)) => *n,
            (None, _) => sector,
        };
        if align % sector != 0 {
            return Err(spec_error(
                "bsalign",
                format!("{align} is not a multiple of the target's {sector}-byte sector"),
            ));
        }
        self.check_fit(len, align, sector)?;
        self.check_skip(len - len % align, align)?;
        Ok(Region { start: self.offset_bytes, len: len - len % align, align })
    }

    /// Discards are neither validated nor modeled.
    fn check_trims(&self) -> Result<(), SpecError> {
        if self.trims() && self.validate.is_some() {
            return Err(spec_error(
                "validate",
                "the job discards (trims), and a discarded block's contents are the device's to choose, so no \
                 stamp can be checked there; validate a read or write pattern (or a trace without trims)",
            ));
        }
        if self.trims() && self.engine == Engine::Virtual {
            return Err(spec_error("rw", "the job discards (trims), which simulated disks do not model"));
        }
        Ok(())
    }

    /// A skip keeps offsets aligned, walks backwards only by at least a
    /// transfer (less would go forward over overlapping ranges), fits in
    /// the region, and has sequential requests to apply to.
    fn check_skip(&self, len: u64, align: u64) -> Result<(), SpecError> {
        let skip = self.skip_bytes;
        if skip == 0 {
            return Ok(());
        }
        if self.seek_pct == 100 {
            return Err(spec_error(
                "skip",
                "applies to sequential requests, and every request of this job is placed at random; use a \
                 sequential pattern (read, write, rw) or --seekpct below 100",
            ));
        }
        if skip.unsigned_abs() % align != 0 {
            return Err(spec_error(
                "skip",
                format!("{skip} is not a multiple of the {align}-byte alignment (--bsalign, or the transfer size)"),
            ));
        }
        let max = self.bs.max_bytes();
        if skip < 0 && skip.unsigned_abs() < max {
            return Err(spec_error(
                "skip",
                format!(
                    "{skip} walks back less than a {max}-byte transfer, so requests would overlap going \
                     forward; give -{max} or more to read backwards"
                ),
            ));
        }
        if skip.unsigned_abs() >= len {
            return Err(spec_error(
                "skip",
                format!("{skip} bytes is as large as the region ({len} bytes); give a smaller skip or a larger --size"),
            ));
        }
        Ok(())
    }

    /// The largest transfer fits the region of `len` bytes, and still does
    /// once it is cut to whole `align` units. Each refusal names the flag
    /// at fault: `--bs` for a transfer larger than the region, `--bsalign`
    /// for an alignment that leaves it too little.
    fn check_fit(&self, len: u64, align: u64, sector: u64) -> Result<(), SpecError> {
        let max = self.bs.max_bytes();
        if len < max {
            let (region, larger) = match self.size_bytes {
                Some(_) => ("the region (--size)".to_string(), "a larger --size"),
                None if self.offset_bytes > 0 => {
                    (format!("the target after --offset {}", self.offset_bytes), "a smaller --offset")
                }
                None => ("the target".to_string(), "a larger target"),
            };
            return Err(spec_error(
                "bs",
                format!("the largest transfer ({max} bytes) is larger than {region}, {len} bytes; use a smaller --bs, or {larger}"),
            ));
        }
        let aligned = len - len % align;
        if aligned < max {
            let default = match &self.bs {
                BlockSizes::Fixed(n) => *n,
                _ => sector,
            };
            return Err(spec_error(
                "bsalign",
                format!("{align} bytes leaves {aligned} bytes of the {len}-byte region in whole units, less than the largest transfer ({max} bytes); use a smaller --bsalign, or leave it out (offsets then align to {default} bytes)"),
            ));
        }
        Ok(())
    }
}
