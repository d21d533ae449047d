//! From what the user gave (flags over a job file's sections) to checked
//! job specs: every value parsed once into its type (see `jobfile.rs`),
//! every rule that ties several flags together checked here, before any
//! target is opened.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use workloads::journal::JournalMode;
use workloads::spec::{parse_bytes, parse_duration};
use workloads::{BlockSizes, Committer, JobSpec, Pattern, Rw, Skew};

use super::fields::{JobFields, JobFile};
use crate::UsageError;

/// The default job's length, when iolab makes its own target.
const DEFAULT_RUNTIME: Duration = Duration::from_secs(10);

/// The jobs of a run, checked on their own and against each other.
pub struct Plan {
    pub jobs: Vec<(JobFields, JobSpec)>,
    /// Groups of jobs run one after another, the jobs of a group at the
    /// same time: every job alone, or (a job file's `concurrent = true`)
    /// all together, split where a job has `stonewall`.
    pub groups: Vec<Range<usize>>,
    /// No target and no job file: the built-in job on a temporary file.
    pub default_job: bool,
    /// Per job: the size to create its target file with, if missing.
    pub create_bytes: Vec<Option<u64>>,
    /// Under `mpirun ... --mpi-layout shared`: the other processes on the
    /// targets are this run's other ranks, each on its own part.
    pub shared_with_ranks: bool,
    /// The job file's directory for fio's interval logs (`log-dir`).
    pub log_dir: Option<PathBuf>,
    /// Per job: the rate it takes from an earlier job's (`rate-of`).
    pub rate_of: Vec<Option<RateOf>>,
}

/// A job's rate as a share of what an earlier group's job did in the same
/// repeat (`rate-of = "JOB:PCT%"`, Vdbench's `iorate=curve`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateOf {
    /// The job's index in the plan.
    pub job: usize,
    pub pct: f64,
}

impl RateOf {
    /// The rate for a job whose reference did `iops` requests a second
    /// (reads, writes and discards): at least 1.
    pub fn rate(&self, iops: f64) -> u64 {
        (iops * self.pct / 100.0).round().max(1.0) as u64
    }
}

/// The jobs of a run: `flags` over the sections of `jobfile` (each over
/// its `[global]`), or `flags` alone; `strict` refuses a fio job file with
/// an option iolab would ignore.
pub fn plan(jobfile: Option<&Path>, flags: &JobFields, strict: bool) -> anyhow::Result<Plan> {
    let (fields, concurrent, log_dir) = match jobfile {
        Some(path) => {
            let file = load(path, strict)?;
            let jobs = file.jobs.iter().map(|job| flags.over(&job.over(&file.global))).collect();
            (jobs, file.concurrent, file.log_dir)
        }
        None => (vec![flags.clone()], false, None),
    };
    let groups = groups(&fields, concurrent);
    let default_job = jobfile.is_none() && flags.target.is_none();
    let specs = (fields.iter().enumerate())
        .map(|(index, f)| job_from_fields(f, index, default_job))
        .collect::<Result<Vec<_>, _>>()?;
    for group in groups.iter().filter(|g| g.len() > 1) {
        check_validated_regions(&fields[group.clone()], &specs[group.clone()])?;
    }
    check_iologs(&fields, &specs)?;
    let rate_of = rates_of(&fields, &specs, &groups)?;
    let create_bytes = create_sizes(&fields, &specs);
    Ok(Plan {
        jobs: fields.into_iter().zip(specs).collect(),
        groups,
        default_job,
        create_bytes,
        shared_with_ranks: false,
        log_dir,
        rate_of,
    })
}

/// Each job's `rate-of` resolved: the latest job of that name in an
/// earlier group, and the share of its rate.
fn rates_of(
    fields: &[JobFields],
    specs: &[JobSpec],
    groups: &[Range<usize>],
) -> Result<Vec<Option<RateOf>>, UsageError> {
    let group_of = |job: usize| groups.iter().position(|g| g.contains(&job));
    let mut out = Vec::with_capacity(fields.len());
    for (i, f) in fields.iter().enumerate() {
        let Some(text) = &f.rate_of else {
            out.push(None);
            continue;
        };
        let name = &specs[i].name;
        let bad = |why: &str| UsageError(format!("job {name}: rate-of = {text:?}: {why}"));
        if f.rate_iops.is_some() {
            return Err(bad("give rate-iops or rate-of, not both"));
        }
        let (of, pct) = text.rsplit_once(':').ok_or_else(|| bad("give JOB:PCT%, as \"max.run:50%\""))?;
        let pct: f64 = pct
            .trim_end_matches('%')
            .parse()
            .ok()
            .filter(|p: &f64| p.is_finite() && *p > 0.0 && *p <= 1000.0)
            .ok_or_else(|| bad("the share is not a percentage above 0 (at most 1000)"))?;
        let job = (0..i)
            .rev()
            .find(|&k| specs[k].name == of)
            .filter(|&k| group_of(k) < group_of(i))
            .ok_or_else(|| bad("names no job that runs before this one (in an earlier group)"))?;
        out.push(Some(RateOf { job, pct }));
    }
    Ok(out)
}

/// A job file: iolab's TOML, or fio's or a Vdbench parameter file
/// (recognised by their content, whatever the name), translated; what the translation ignored is said
/// through [`crate::say`], or with `strict` refused.
pub fn load(path: &Path, strict: bool) -> anyhow::Result<JobFile> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| UsageError(format!("{}: cannot read the job file: {e}", path.display())))?;
    let translated = if super::vdbench::looks_like_vdbench(&text) {
        super::vdbench::translate(path, strict)?
    } else if super::fio::looks_like_fio(&text) {
        super::fio::translate(path, strict)?
    } else {
        return JobFile::load(path);
    };
    for note in &translated.notes {
        crate::say::info(format!("{}: {note}", path.display()));
    }
    Ok(translated.file)
}

/// The groups of `fields`: one job each, or (concurrent) runs of jobs
/// split before each job with `stonewall`.
fn groups(fields: &[JobFields], concurrent: bool) -> Vec<Range<usize>> {
    if !concurrent {
        return (0..fields.len()).map(|i| i..i + 1).collect();
    }
    let mut groups = Vec::new();
    let mut start = 0;
    for (i, f) in fields.iter().enumerate() {
        if i > start && f.stonewall == Some(true) {
            groups.push(start..i);
            start = i;
        }
    }
    groups.push(start..fields.len());
    groups
}

/// The flags that mean something only beside another: given alone, each
/// is a usage error naming the one it needs.
fn check_combinations(f: &JobFields, rw: Rw) -> Result<(), UsageError> {
    let validate = f.validate.unwrap_or(false);
    let journal = f.journal.is_some();
    let group = f.journal_mode.is_none_or(|m| m == JournalMode::Group);
    let rules: [(&str, bool, &str); 13] = [
        ("rwmixread", f.rwmixread.is_none() || rw.is_mixed(), "only applies to rw and randrw"),
        ("no-preread", f.no_preread.is_none() || validate, "only applies with --validate"),
        ("reread", f.reread.is_none() || validate, "only applies with --validate"),
        ("no-verify", f.no_verify.is_none() || validate, "only applies with --validate"),
        ("max-errors", f.max_errors.is_none() || validate, "only applies with --validate"),
        ("key-map", f.key_map.is_none() || validate, "only applies with --validate"),
        ("key-map-dir", f.key_map_dir.is_none() || validate, "only applies with --validate"),
        ("journal", !journal || validate, "only applies with --validate"),
        ("max-errors", f.max_errors != Some(0), "must be at least 1"),
        ("journal-mode", f.journal_mode.is_none() || journal, "only applies with --journal DIR"),
        (
            "journal-commit",
            f.journal_commit.is_none() || journal && group,
            "only applies with --journal DIR in group mode",
        ),
        (
            "log-size, --log-device and --log-home",
            f.log.is_some() || f.log_size.is_none() && f.log_device.is_none() && f.log_home.is_none(),
            "only apply with --log MODE",
        ),
        (
            "sector-size",
            f.sector_size.is_none_or(|s| s == 512 || s == 4096),
            "is not supported; use 512 or 4096",
        ),
    ];
    match rules.iter().find(|(_, ok, _)| !ok) {
        Some((flag, _, why)) if *flag == "rwmixread" => Err(UsageError(format!("--{flag}: {why}, not {rw}"))),
        Some((flag, _, why)) if *flag == "sector-size" => {
            Err(UsageError(format!("--{flag}: {} {why}", f.sector_size.unwrap_or(0))))
        }
        Some((flag, _, why)) => Err(UsageError(format!("--{flag}: {why}"))),
        None => Ok(()),
    }
}

fn job_from_fields(f: &JobFields, index: usize, default_job: bool) -> Result<JobSpec, UsageError> {
    if let Some(path) = &f.replay {
        return replay_job(f, index, path);
    }
    if f.replay_speed.is_some() {
        return Err(UsageError("--replay-speed: only applies with --replay FILE".into()));
    }
    let rw = f.rw.unwrap_or(Rw::RandRw);
    check_combinations(f, rw)?;
    let bs = match &f.bs {
        Some(bs) => bs.clone(),
        None if default_job => BlockSizes::parse("fs")?,
        None => BlockSizes::Fixed(4096),
    };
    let read_pct = if rw.is_mixed() { f.rwmixread.unwrap_or(70) } else { rw.default_read_pct() };
    let bytes = |flag, v: &Option<String>| v.as_deref().map(|t| parse_bytes(flag, t)).transpose();
    let time = |flag, v: &Option<String>| v.as_deref().map(|t| parse_duration(flag, t)).transpose();
    let mut runtime = time("runtime", &f.runtime)?;
    if default_job && runtime.is_none() && f.ios.is_none() && f.io_size.is_none() {
        runtime = Some(DEFAULT_RUNTIME);
    }
    let name = match &f.name {
        Some(name) => name.clone(),
        None if default_job => "default".into(),
        None => format!("job{}", index + 1),
    };
    let size_bytes = bytes("size", &f.size)?;
    if size_bytes == Some(0) {
        // Said before any target is opened: a missing file would be made
        // empty, and then refused as too small for a sector.
        return Err(UsageError(
            "--size: 0 is an empty region; give a positive size, or leave --size out to use the whole target"
                .into(),
        ));
    }
    let dedupe = dedupe(f, &bs)?;
    Ok(JobSpec {
        name,
        offset_bytes: bytes("offset", &f.offset)?.unwrap_or(0),
        size_bytes,
        rw,
        read_pct,
        seek_pct: f.seekpct.unwrap_or(rw.default_seek_pct()),
        skip_bytes: skip(f)?,
        skew: f.skew.clone().unwrap_or(Skew::Uniform),
        bs,
        align_bytes: bytes("bsalign", &f.bsalign)?,
        threads: f.threads.unwrap_or(1),
        iodepth: f.iodepth.unwrap_or(1),
        submit_batch: f.iodepth_batch.unwrap_or(1),
        // Chosen against the target when it is open (prepare.rs).
        engine: workloads::Engine::Sync,
        flush_every: f.flush_every.unwrap_or(0),
        end_flush: f.end_flush.unwrap_or(false),
        runtime,
        io_bytes: bytes("io-size", &f.io_size)?,
        ios: f.ios,
        ramp: time("ramp", &f.ramp)?.unwrap_or(Duration::ZERO),
        rate_iops: f.rate_iops.unwrap_or(0),
        pattern: pattern(f)?,
        dedupe,
        seed: f.seed.unwrap_or(1),
        validate: validate_spec(f)?,
        clock: device::Clock::Wall,
        replay: None,
        write_iolog: f.write_iolog.as_deref().map(iolog_path).transpose()?,
    })
}

/// `--skip`: a size, negative to walk backwards.
fn skip(f: &JobFields) -> Result<i64, UsageError> {
    let Some(text) = f.skip.as_deref() else { return Ok(0) };
    let (sign, size) = text.strip_prefix('-').map_or((1, text), |rest| (-1, rest));
    let bytes = parse_bytes("skip", size)?;
    i64::try_from(bytes)
        .map(|b| sign * b)
        .map_err(|_| UsageError(format!("--skip: {text} is too large; give a size under 8 EiB")))
}

/// What zlib (level 6) adds to a 4 KiB block of compress:PCT beyond its
/// random part: its header, the random part's stored-block framing and the
/// run of zeros (measured: 65 to 72 bytes for PCT from 25 to 50).
const ZLIB_BLOCK_OVERHEAD: f64 = 68.0;

/// The data pattern: `--pattern`, or `--compress-ratio R` as the
/// compress:PCT pattern zlib (level 6) shrinks about R:1, 4 KiB at a time.
fn pattern(f: &JobFields) -> Result<Pattern, UsageError> {
    if f.validate == Some(true) {
        // A validated write's data is its stamps: the pattern is not used.
        let asked = match (f.pattern, f.compress_ratio) {
            (_, Some(r)) if r > 1.0 => Some(format!("--compress-ratio {r}")),
            (Some(p), _) if p != Pattern::Random => Some(format!("--pattern {p}")),
            _ => None,
        };
        if let Some(asked) = asked {
            return Err(UsageError(format!(
                "{asked} cannot apply with --validate: every validated sector holds its stamp and data \
                 derived from it (random, incompressible); leave one of them out"
            )));
        }
    }
    match (f.pattern, f.compress_ratio) {
        (Some(p), Some(_)) => Err(UsageError(format!(
            "--compress-ratio with --pattern {p}: each chooses the data; give one of them"
        ))),
        // Past 10:1 a whole percent of random bytes is too coarse a step
        // to keep the ratio within a few percent.
        (_, Some(r)) if !(r.is_finite() && (1.0..=10.0).contains(&r)) => {
            Err(UsageError(format!("--compress-ratio {r}: give a ratio from 1 (incompressible) to 10")))
        }
        (_, Some(r)) if r <= 1.0 => Ok(Pattern::Random),
        (_, Some(r)) => {
            // zlib stores a 4 KiB block of compress:PCT in its random part
            // and about ZLIB_BLOCK_OVERHEAD bytes more (measured).
            let random = 4096.0 / r - ZLIB_BLOCK_OVERHEAD;
            Ok(Pattern::Compressible { pct: (100.0 * random / 4096.0).round().clamp(1.0, 100.0) as u8 })
        }
        (p, None) => Ok(p.unwrap_or(Pattern::Random)),
    }
}

/// `--dedupe-ratio` and `--dedupe-unit` checked against the job.
fn dedupe(f: &JobFields, bs: &workloads::BlockSizes) -> Result<Option<workloads::Dedupe>, UsageError> {
    let Some(ratio) = f.dedupe_ratio else {
        return match f.dedupe_unit {
            Some(_) => Err(UsageError("--dedupe-unit only applies with --dedupe-ratio".into())),
            None => Ok(None),
        };
    };
    if !(ratio.is_finite() && ratio >= 1.0) {
        return Err(UsageError(format!("--dedupe-ratio {ratio}: give a ratio of 1 or more (2 stores half)")));
    }
    let reads_only = matches!(f.rw, Some(workloads::Rw::Read | workloads::Rw::RandRead));
    let why = if reads_only {
        Some("the job writes nothing (its --rw reads only)")
    } else if f.pattern == Some(Pattern::Zeros) {
        Some("zeros are all duplicates already")
    } else if f.target.as_deref().is_some_and(|t| t.starts_with("sim:")) {
        Some("a simulated disk keeps no data to deduplicate")
    } else {
        None
    };
    if let Some(why) = why {
        return Err(UsageError(format!("--dedupe-ratio cannot apply here: {why}; leave it out")));
    }
    let unit = match &f.dedupe_unit {
        Some(text) => parse_bytes("dedupe-unit", text)?,
        None => 4096,
    };
    let sizes = bs.each_size();
    if unit == 0 || unit % 512 != 0 || sizes.iter().any(|&s| s % unit != 0) {
        return Err(UsageError(format!(
            "--dedupe-unit {unit}: give a multiple of 512 bytes that divides every transfer size ({})",
            sizes.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(", ")
        )));
    }
    Ok(Some(workloads::Dedupe { ratio, unit_bytes: unit as usize }))
}

/// A job replaying the trace at `path`: the trace gives the requests, so
/// the flags that shape generated requests are refused.
fn replay_job(f: &JobFields, index: usize, path: &Path) -> Result<JobSpec, UsageError> {
    let shaping = [
        ("rw", f.rw.is_some()),
        ("rwmixread", f.rwmixread.is_some()),
        ("seekpct", f.seekpct.is_some()),
        ("skip", f.skip.is_some()),
        ("skew", f.skew.is_some()),
        ("bs", f.bs.is_some()),
        ("bsalign", f.bsalign.is_some()),
        ("threads", f.threads.is_some_and(|t| t != 1)),
        ("rate-iops", f.rate_iops.is_some()),
        ("ramp", f.ramp.is_some()),
        ("flush-every", f.flush_every.is_some()),
        ("nrfiles", f.nrfiles.is_some()),
    ];
    if let Some((flag, _)) = shaping.iter().find(|(_, given)| *given) {
        return Err(UsageError(format!(
            "--{flag}: does not apply with --replay, whose trace gives every request (its kind, offset and \
             size, one thread); leave --{flag} out"
        )));
    }
    let bytes = std::fs::read(path)
        .map_err(|e| UsageError(format!("--replay: cannot read {}: {e}", path.display())))?;
    let trace = workloads::replay::Trace::read(&bytes)
        .map_err(|e| UsageError(format!("--replay: {}: {e}", path.display())))?;
    let speed = match f.replay_speed.as_deref() {
        None => Some(1.0),
        Some("max") => None,
        Some(n) => Some(n.parse::<f64>().ok().filter(|v| v.is_finite() && *v > 0.0).ok_or_else(|| {
            UsageError(format!(
                "--replay-speed: '{n}' is not a positive number or max; give e.g. 1, 2 or max"
            ))
        })?),
    };
    let align = trace.alignment();
    let reach = trace.extent().next_multiple_of(align);
    let size_bytes = match f.size.as_deref().map(|t| parse_bytes("size", t)).transpose()? {
        Some(size) if size < reach => {
            return Err(UsageError(format!(
                "--size: {size} bytes, but the trace reaches {reach}; give at least that, or leave --size out"
            )))
        }
        Some(size) => size,
        None => reach,
    };
    let mut spec =
        job_from_fields(&JobFields { replay: None, replay_speed: None, ..f.clone() }, index, false)?;
    spec.rw = Rw::RandRw;
    spec.read_pct = trace.read_pct();
    spec.bs = BlockSizes::Fixed(trace.largest());
    spec.align_bytes = Some(align);
    spec.size_bytes = Some(size_bytes);
    if f.name.is_none() {
        spec.name = format!("replay{}", index + 1);
    }
    spec.replay =
        Some(workloads::ReplaySpec { source: path.display().to_string(), trace: trace.into(), speed });
    Ok(spec)
}

/// `--write-iolog`'s file, refused before the run when its directory is
/// missing.
fn iolog_path(path: &Path) -> Result<PathBuf, UsageError> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if !dir.is_dir() {
        return Err(UsageError(format!(
            "--write-iolog: {} is not a directory; make it, or name a file in a directory that exists",
            dir.display()
        )));
    }
    if path.is_dir() {
        return Err(UsageError(format!("--write-iolog: {} is a directory; name a file", path.display())));
    }
    Ok(path.to_path_buf())
}

fn validate_spec(f: &JobFields) -> Result<Option<workloads::ValidateSpec>, UsageError> {
    let key_map = key_map_spec(f.key_map.unwrap_or_default(), f.key_map_dir.as_deref())?;
    if !f.validate.unwrap_or(false) {
        return Ok(None);
    }
    let journal = f
        .journal
        .clone()
        .map(|dir| {
            let shown = dir.display().to_string();
            let place = if shown.starts_with("sim:") {
                workloads::journal::JournalPlace::Device(crate::stack::open_sim_keeping(&shown, "journal")?)
            } else {
                workloads::journal::JournalPlace::Dir(dir)
            };
            Ok::<_, UsageError>(workloads::journal::JournalSpec {
                mode: f.journal_mode.unwrap_or(JournalMode::Group),
                place,
                ring: f.journal_commit == Some(Committer::Ring),
            })
        })
        .transpose()?;
    Ok(Some(workloads::ValidateSpec {
        preread: !f.no_preread.unwrap_or(false),
        reread: f.reread.unwrap_or(false),
        verify: !f.no_verify.unwrap_or(false),
        max_errors: f.max_errors.unwrap_or(50),
        run_id: codec::fresh_id(),
        journal,
        key_map,
    }))
}

/// Where key maps live, from `--key-map` and `--key-map-dir`. A directory
/// given is tried at once (a scratch file created, mapped and dropped), so
/// a bad one is a usage error before anything runs.
pub fn key_map_spec(
    choice: validation::KeyMapChoice,
    dir: Option<&Path>,
) -> Result<workloads::KeyMapSpec, UsageError> {
    use validation::{KeyBytes, KeyMapChoice, KeyPlace};
    if let Some(dir) = dir {
        if choice == KeyMapChoice::Memory {
            return Err(UsageError("--key-map-dir: only applies with --key-map auto or file".into()));
        }
        KeyBytes::zeroed(4096, &KeyPlace::File(dir.to_path_buf())).map_err(|e| {
            UsageError(format!(
                "--key-map-dir: {}: cannot {} a scratch file there ({}); give an existing directory \
                 you can write to, or use --key-map memory",
                dir.display(),
                e.what,
                e.source
            ))
        })?;
    }
    Ok(workloads::KeyMapSpec { choice, dir: dir.map(|d| d.to_path_buf()) })
}

/// Jobs run at the same time must not write where another validates: a
/// validated job's key map reports any write it did not make as damage
/// (another run's stamps, or data that is no stamp). Checked before any
/// target is opened or created; targets are compared by their canonical
/// paths (a file still to be created, by its directory's).
fn check_validated_regions(fields: &[JobFields], specs: &[JobSpec]) -> Result<(), UsageError> {
    let place = |f: &JobFields, spec: &JobSpec| {
        let path = job_target_identity(f)?;
        let end = spec.size_bytes.map_or(u64::MAX, |len| spec.offset_bytes.saturating_add(len));
        Some((path, spec.offset_bytes, end))
    };
    let jobs: Vec<_> = fields.iter().zip(specs).map(|(f, spec)| (spec, place(f, spec))).collect();
    for (i, (a, a_place)) in jobs.iter().enumerate() {
        for (b, b_place) in &jobs[i + 1..] {
            let (checker, writer) = match (&a.validate, &b.validate) {
                (Some(_), _) if b.read_pct < 100 => (a, b),
                (_, Some(_)) if a.read_pct < 100 => (b, a),
                _ => continue,
            };
            let (Some((path, a_start, a_end)), Some((other, b_start, b_end))) = (a_place, b_place) else {
                continue;
            };
            if path == other && a_start < b_end && b_start < a_end {
                return Err(UsageError(format!(
                    "jobs '{}' and '{}' run at the same time on the same bytes of {}, and '{}' validates \
                     them: it would report '{}''s writes as damage; give the jobs disjoint regions \
                     (offset, size) or run them one after the other (concurrent = false)",
                    a.name,
                    b.name,
                    path.display(),
                    checker.name,
                    writer.name
                )));
            }
        }
    }
    Ok(())
}

/// `--write-iolog` files: never a job's target (the trace would
/// overwrite its data) nor another job's trace file.
fn check_iologs(fields: &[JobFields], specs: &[JobSpec]) -> Result<(), UsageError> {
    let targets: Vec<_> = fields.iter().map(job_target_identity).collect();
    let mut seen: Vec<(PathBuf, &str)> = Vec::new();
    for spec in specs {
        let Some(log) = spec.write_iolog.as_deref().and_then(|p| target_identity(&p.to_string_lossy()))
        else {
            continue;
        };
        if let Some(i) = targets.iter().position(|t| t.as_ref() == Some(&log)) {
            return Err(UsageError(format!(
                "--write-iolog: {} is the target of job '{}'; the trace would overwrite its data, name another file",
                log.display(),
                specs[i].name
            )));
        }
        if let Some((_, other)) = seen.iter().find(|(path, _)| *path == log) {
            return Err(UsageError(format!(
                "--write-iolog: jobs '{other}' and '{}' would both write their trace to {}; give each job its own \
                 write-iolog file",
                spec.name,
                log.display()
            )));
        }
        seen.push((log, &spec.name));
    }
    Ok(())
}

/// The canonical path of a target (a file, a device or a volume
/// configuration), or of the file it would create; None for `mem:` and
/// `null:` targets, each its own.
/// What a job runs on, as [`target_identity`] gives it; for a directory
/// target, the job's own files in it (each job has its own, as in fio).
fn job_target_identity(f: &JobFields) -> Option<PathBuf> {
    let id = target_identity(f.target.as_deref()?)?;
    Some(if id.is_dir() { id.join(format!("{}.0", f.dir_file_prefix())) } else { id })
}

fn target_identity(target: &str) -> Option<PathBuf> {
    let path = Path::new(target);
    if let Ok(path) = std::fs::canonicalize(path) {
        return Some(path);
    }
    if target.contains(':') {
        return None;
    }
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    Some(std::fs::canonicalize(dir).ok()?.join(path.file_name()?))
}

/// The size a job's target file is created with when missing: the end of
/// the furthest region any job gives that file, so that the first job to
/// open it makes room for the others.
fn create_sizes(fields: &[JobFields], specs: &[JobSpec]) -> Vec<Option<u64>> {
    let ids: Vec<_> = fields.iter().map(job_target_identity).collect();
    let end = |spec: &JobSpec| spec.size_bytes.map(|len| len.saturating_add(spec.offset_bytes));
    (ids.iter().zip(specs))
        .map(|(id, spec)| match id {
            Some(id) => (ids.iter().zip(specs))
                .filter(|(other, _)| other.as_ref() == Some(id))
                .filter_map(|(_, s)| end(s))
                .max(),
            None => end(spec),
        })
        .collect()
}
