//! fio's job files (`iolab run job.fio`, whatever the name): sections,
//! `[global]` applying to the jobs after it, `include`, `;` and `#`
//! comments, bare keys, `${VAR}`, `$ncpus`, `$mb_memory` and `$pagesize`,
//! fio's units (`kb_base`), and the options iolab can run, each turned into
//! the job-file key that does the same (`jobfile.rs`). fio runs a file's
//! jobs at once, a `stonewall` job waiting for those before it; so does
//! iolab here. Every other option is named in a note as ignored, or
//! refused under `--strict`. Parsing only: the caller prints the notes.
//!
//! Source of the semantics: fio's HOWTO (options), `init.c` and
//! `parse.c` (sections, `include`, variables, units).

use std::path::{Path, PathBuf};

use super::fields::{JobFields, JobFile};
use crate::UsageError;

/// Includes nested deeper than this are refused (a file including itself).
const INCLUDE_DEPTH_MAX: u32 = 16;

/// A fio job file turned into iolab's.
#[derive(Debug)]
pub struct Translated {
    pub file: JobFile,
    /// One line per option ignored or changed in meaning, naming the job.
    pub notes: Vec<String>,
}

/// Whether `text` is a fio job file rather than iolab's TOML: INI
/// sections and `key=value` lines, no `[[job]]` array.
pub fn looks_like_fio(text: &str) -> bool {
    let lines = text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with(['#', ';']));
    let mut section = false;
    for line in lines {
        if line.starts_with("[[") {
            return false;
        }
        if line.starts_with('[') && line.ends_with(']') {
            section = true;
        } else if let Some((_, value)) = line.split_once('=') {
            // TOML quotes its strings; fio never needs to.
            let v = value.trim();
            if v.starts_with('"') || v.starts_with('\'') {
                return false;
            }
        }
    }
    section
}

/// One `[section]` as read: its name and its options in order.
#[derive(Clone, Debug, Default)]
struct Section {
    name: String,
    options: Vec<(String, Option<String>)>,
}

/// Reads `path` (and what it includes) into sections.
fn read_sections(path: &Path, depth: u32, into: &mut Vec<Section>) -> Result<(), UsageError> {
    if depth > INCLUDE_DEPTH_MAX {
        return Err(UsageError(format!(
            "{}: includes nested more than {INCLUDE_DEPTH_MAX} deep",
            path.display()
        )));
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| UsageError(format!("{}: cannot read the fio job file: {e}", path.display())))?;
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    for (n, raw) in text.lines().enumerate() {
        // As fio's strip_blank_end: a `;` or `#` anywhere starts a comment
        // (`numjobs=4 ; four threads` is numjobs=4).
        let line = raw.find([';', '#']).map_or(raw, |at| &raw[..at]).trim();
        let at = || format!("{}:{}", path.display(), n + 1);
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix("include ") {
            let included = PathBuf::from(rest.trim());
            let included = if included.is_absolute() { included } else { dir.join(included) };
            read_sections(&included, depth + 1, into)?;
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            into.push(Section { name: name.trim().to_string(), options: Vec::new() });
            continue;
        }
        let Some(section) = into.last_mut() else {
            return Err(UsageError(format!("{}: '{line}' comes before any [section]", at())));
        };
        let (key, value) = match line.split_once('=') {
            Some((k, v)) => (k.trim(), Some(expand(v.trim(), &at())?)),
            None => (line, None),
        };
        section.options.push((key.to_string(), value));
    }
    Ok(())
}

/// `${VAR}` from the environment, and fio's `$ncpus`, `$mb_memory` and
/// `$pagesize`.
fn expand(value: &str, at: &str) -> Result<String, UsageError> {
    let mut out = value.to_string();
    while let Some(start) = out.find("${") {
        let Some(len) = out[start..].find('}') else {
            return Err(UsageError(format!("{at}: '{value}' opens ${{ without closing it")));
        };
        let name = &out[start + 2..start + len];
        let found = std::env::var(name).map_err(|_| {
            UsageError(format!("{at}: ${{{name}}} is not set in the environment; set it or write the value"))
        })?;
        out.replace_range(start..start + len + 1, &found);
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let memory_mb = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines().find(|l| l.starts_with("MemTotal:"))?.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .map_or(0, |kib| kib / 1024);
    Ok(out
        .replace("$ncpus", &cpus.to_string())
        .replace("$mb_memory", &memory_mb.to_string())
        .replace("$pagesize", "4096"))
}

/// fio's size units: k, m, g, t, p with or without `i` and `b`; with
/// `kb_base=1000`, `k` is 1000 and `KiB` 1024; a bare number is bytes.
fn fio_bytes(text: &str, kb_base: u64) -> Option<u64> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let n: u64 = number.parse().ok()?;
    let unit = unit.to_ascii_lowercase();
    let binary = unit.contains('i');
    let base = if binary { 1024 } else { kb_base };
    let power = match unit.trim_end_matches(['b', 'i']).trim_end_matches('i') {
        "" => 0,
        "k" => 1,
        "m" => 2,
        "g" => 3,
        "t" => 4,
        "p" => 5,
        _ => return None,
    };
    n.checked_mul(base.checked_pow(power)?)
}

/// `n` bytes with the largest unit that divides it (`64m`, `4k`, `1000`).
fn exact_size(n: u64) -> String {
    for (unit, name) in [(1u64 << 40, "t"), (1 << 30, "g"), (1 << 20, "m"), (1 << 10, "k")] {
        if n >= unit && n % unit == 0 {
            return format!("{}{name}", n / unit);
        }
    }
    n.to_string()
}

/// A job being built: its fields, and what it noted.
struct Job {
    name: String,
    fields: JobFields,
    stonewall: bool,
    numjobs: u32,
    group_reporting: bool,
    time_based: bool,
    filesize: Option<u64>,
    /// fio's `verify` (other than none), `do_verify` (default on) and
    /// `verify_only`: resolved once every job is read ([`resolve_verify`]).
    verify: Option<String>,
    do_verify: bool,
    verify_only: bool,
    /// fio's `percentage_random` for reads and for writes (one value
    /// gives both): resolved against the pattern once the job is read.
    percentage_random: Option<(u8, u8)>,
    /// fio's `loops`: the job's pass over its region, this many times.
    loops: u64,
    /// `ioengine=null`: a `null:` target of the job's size.
    null_engine: bool,
    /// fio's `rate` (bytes a second, reads and writes together): a cap
    /// on requests a second once the transfer size is known.
    rate_bytes: Option<u64>,
    /// fio's `write_bw_log=PREFIX` (or iops, lat): the prefix of the
    /// first such option, the job's name when given bare.
    log_prefix: Option<(String, String)>,
}

impl Job {
    /// Whether the job writes (fio's default pattern is `read`).
    fn writes(&self) -> bool {
        self.fields.rw.is_some_and(|rw| rw.default_read_pct() < 100)
    }
}

/// fio's verification, as iolab does it: a job that writes with `verify`
/// is validated (every block stamped) and, with `do_verify` (fio's
/// default), reads back what it wrote when it ends (the verify phase). A
/// job that only reads with `verify` checks what an earlier job wrote:
/// that writer's verify phase does it, the reads here are measured.
/// `verify_only`, and a reader with no writer before it in the file,
/// would check what an earlier fio run wrote: refused, naming `iolab
/// validate`, which does that for an earlier iolab run.
fn resolve_verify(jobs: &mut [Job], notes: &mut Vec<String>) -> Result<(), UsageError> {
    let earlier_run =
        "checks data an earlier run wrote; iolab checks an earlier run's data with `iolab validate \
                       --target T --journal DIR` (write it with --validate --journal DIR)";
    // Readers first: each makes its writer read back what it wrote.
    for i in 0..jobs.len() {
        if jobs[i].verify_only {
            return Err(UsageError(format!("[{}] verify_only: {earlier_run}", jobs[i].name)));
        }
        if jobs[i].verify.is_none() || jobs[i].writes() {
            continue;
        }
        let (before, rest) = jobs.split_at_mut(i);
        let reader = &rest[0];
        let writer = before.iter_mut().rev().find(|w| w.writes() && w.fields.target == reader.fields.target);
        let Some(writer) = writer.filter(|w| w.verify.is_some()) else {
            return Err(UsageError(format!(
                "[{}] verify on a job that only reads {earlier_run}; or give the job that writes its data in \
                 this file verify= too",
                reader.name
            )));
        };
        writer.do_verify = true;
        notes.push(format!(
            "{}: verify={}: what {} wrote is checked by its verify phase, which reads it all back when it ends; \
             the reads here are measured, not checked",
            reader.name,
            reader.verify.as_deref().unwrap_or(""),
            writer.name
        ));
    }
    for job in jobs.iter_mut().filter(|j| j.verify.is_some() && j.writes()) {
        job.fields.validate = Some(true);
        let read_back = if job.do_verify {
            "and what it wrote read back when it ends"
        } else {
            job.fields.no_verify = Some(true);
            "not read back at its end (do_verify=0)"
        };
        notes.push(format!(
            "{}: verify={}: checked with iolab's stamps (every sector written, every read), {read_back}; not \
             fio's verify pattern",
            job.name,
            job.verify.as_deref().unwrap_or("")
        ));
    }
    Ok(())
}

/// Turns `path`, a fio job file, into iolab's jobs; `strict` refuses a
/// file with any option iolab would ignore.
pub fn translate(path: &Path, strict: bool) -> Result<Translated, UsageError> {
    let mut sections = Vec::new();
    read_sections(path, 0, &mut sections)?;
    let mut global: Vec<(String, Option<String>)> = Vec::new();
    let mut jobs = Vec::new();
    let mut notes = Vec::new();
    for section in sections {
        if section.name == "global" {
            global.extend(section.options);
            continue;
        }
        let options: Vec<(String, Option<String>)> = global.iter().cloned().chain(section.options).collect();
        jobs.push(job(&section.name, &options, &mut notes)?);
    }
    resolve_verify(&mut jobs, &mut notes)?;
    if jobs.is_empty() {
        return Err(UsageError(format!("{}: holds no job section (only [global])", path.display())));
    }
    let log_dir = log_dir(&jobs, &mut notes);
    // Finished before --strict looks: finishing notes things too (numjobs).
    let names: Vec<String> = jobs.iter().map(|j| j.name.clone()).collect();
    let jobs = jobs.into_iter().map(|j| finish(j, &mut notes)).collect();
    let notes = once_per_file(notes, &names);
    if strict && !notes.is_empty() {
        return Err(UsageError(format!(
            "{}: --strict: options iolab would not run as fio does:\n  {}",
            path.display(),
            notes.join("\n  ")
        )));
    }
    let file = JobFile { concurrent: true, log_dir, global: JobFields::default(), jobs };
    Ok(Translated { file, notes })
}

/// fio's `write_bw_log=PREFIX` (and `write_iops_log`, `write_lat_log`):
/// iolab writes all three logs of every job, into the directory of the
/// first job's PREFIX (as `--log-dir`), named after the job rather than
/// the prefix; said once.
fn log_dir(jobs: &[Job], notes: &mut Vec<String>) -> Option<PathBuf> {
    let (key, prefix) = jobs.iter().find_map(|j| j.log_prefix.clone())?;
    let dir = Path::new(&prefix).parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    notes.push(format!(
        "{key}={prefix}: fio's bw, iops and lat logs of every job written into {} as --log-dir does, named \
         JOB_bw.N.log, JOB_iops.N.log, JOB_lat.N.log (N the run; fio: PREFIX_bw.N.log, N the job)",
        dir.display()
    ));
    Some(dir.to_path_buf())
}

/// Each note once: what several jobs share (an option of `[global]`)
/// names them together, or "every job" when it is all of them.
fn once_per_file(notes: Vec<String>, names: &[String]) -> Vec<String> {
    let mut shared: Vec<(String, Vec<String>)> = Vec::new();
    for note in notes {
        let (job, what) = match note.split_once(": ") {
            Some((job, what)) if names.iter().any(|n| n == job) => (job.to_string(), what.to_string()),
            _ => (String::new(), note),
        };
        match shared.iter_mut().find(|(w, _)| *w == what) {
            Some((_, jobs)) if !jobs.contains(&job) => jobs.push(job),
            Some(_) => {}
            None => shared.push((what, vec![job])),
        }
    }
    let all = |jobs: &[String]| names.len() > 1 && names.iter().all(|n| jobs.contains(n));
    let named = |(what, jobs): (String, Vec<String>)| match jobs.as_slice() {
        [none] if none.is_empty() => what,
        jobs if all(jobs) => format!("every job: {what}"),
        jobs => format!("{}: {what}", jobs.join(", ")),
    };
    shared.into_iter().map(named).collect()
}

/// The last touches once a job's options are all read.
fn finish(mut j: Job, notes: &mut Vec<String>) -> JobFields {
    if j.numjobs > 1 {
        j.fields.threads = Some(j.fields.threads.unwrap_or(1) * j.numjobs);
        if !j.group_reporting {
            notes.push(format!(
                "{}: numjobs={} runs as {} threads of one job on one target, reported together (fio's \
                 group_reporting=1; without it fio reports each clone)",
                j.name, j.numjobs, j.numjobs
            ));
        }
    }
    if let (Some(per_file), None) = (j.filesize, &j.fields.size) {
        let files = u64::from(j.fields.nrfiles.unwrap_or(1));
        j.fields.size = Some(exact_size(per_file * files));
    }
    let bounded = j.fields.io_size.is_some() || j.fields.ios.is_some();
    if !j.time_based && !bounded && (j.fields.runtime.is_some() || j.loops > 1) {
        // Without time_based fio stops at the runtime or after its passes
        // over the region (`loops`, one by default), whichever comes
        // first. (A job with no end at all makes one pass in iolab too.)
        let region = j.fields.size.as_deref().and_then(|s| fio_bytes(s, 1024));
        let region = region.or_else(|| j.fields.target.as_deref().and_then(|t| target_bytes(Path::new(t))));
        match region {
            Some(bytes) => j.fields.io_size = Some(exact_size(bytes * j.loops)),
            None => notes.push(format!(
                "{}: loops={}: ignored, the region's size is not known before the run (give size=)",
                j.name, j.loops
            )),
        }
    }
    if j.stonewall {
        j.fields.stonewall = Some(true);
    }
    j.fields.name = Some(j.fields.name.clone().unwrap_or(j.name));
    j.fields
}

/// One option line of a job as read: the job's name, the key, the value
/// (none for a bare key) and the job's `kb_base`.
struct Line<'a> {
    job: &'a str,
    key: &'a str,
    v: Option<&'a str>,
    kb_base: u64,
}

/// fio drops a job whose option has an empty value ("failed parsing");
/// so does iolab, saying which.
const EMPTY: &str = "no value (fio refuses it too); give one or leave the line out";

impl Line<'_> {
    fn bad(&self, why: &str) -> UsageError {
        UsageError(format!("[{}] {}={}: {why}", self.job, self.key, self.v.unwrap_or("")))
    }

    /// `v` as a size in bytes (fio's suffixes, `kb_base`).
    fn bytes(&self, v: Option<&str>) -> Result<u64, UsageError> {
        if v == Some("") {
            return Err(self.bad(EMPTY));
        }
        v.and_then(|v| fio_bytes(v, self.kb_base)).ok_or_else(|| self.bad("not a size"))
    }

    /// The value parsed, else "not a `what`".
    fn number<T: std::str::FromStr>(&self, what: &str) -> Result<T, UsageError> {
        self.v.and_then(|v| v.parse().ok()).ok_or_else(|| self.bad(&format!("not a {what}")))
    }

    /// The value, else "needs `what`".
    fn text(&self, what: &str) -> Result<&str, UsageError> {
        self.v.ok_or_else(|| self.bad(&format!("needs {what}")))
    }

    /// A boolean option: on when bare or anything but 0 or false.
    fn flag(&self) -> bool {
        self.v.is_none_or(|v| !matches!(v, "0" | "false"))
    }

    /// Notes the line as not (wholly) honoured, and why.
    fn ignore(&self, notes: &mut Vec<String>, why: &str) {
        let value = self.v.map(|v| format!("={v}")).unwrap_or_default();
        notes.push(format!("{}: {}{value}: {why}", self.job, self.key));
    }

    /// A value of a type iolab parses itself (a pattern, sizes, a skew).
    fn parsed<T: std::str::FromStr>(&self, text: &str) -> Result<T, UsageError>
    where
        T::Err: std::fmt::Display,
    {
        text.parse().map_err(|e| self.bad(&format!("{e}")))
    }
}

fn job(name: &str, options: &[(String, Option<String>)], notes: &mut Vec<String>) -> Result<Job, UsageError> {
    let mut j = Job {
        name: name.to_string(),
        fields: JobFields::default(),
        stonewall: false,
        numjobs: 1,
        group_reporting: false,
        time_based: false,
        filesize: None,
        verify: None,
        do_verify: true,
        verify_only: false,
        percentage_random: None,
        loops: 1,
        null_engine: false,
        rate_bytes: None,
        log_prefix: None,
    };
    let kb_base = options
        .iter()
        .rev()
        .find(|(k, _)| k == "kb_base")
        .and_then(|(_, v)| v.as_deref()?.parse::<u64>().ok())
        .unwrap_or(1024);
    for (key, value) in options {
        let line = Line { job: name, key, v: value.as_deref(), kb_base };
        let known = place(&mut j, &line)?
            || pattern(&mut j, &line, notes)?
            || sizes(&mut j, &line, notes)?
            || engine(&mut j, &line, notes)?
            || amount(&mut j, &line, notes)?
            || checks(&mut j, &line, notes)?;
        if !known {
            line.ignore(notes, "ignored: iolab has no equivalent");
        }
    }
    percentage_random(&mut j, notes);
    null_engine(&mut j, notes).map_err(|why| UsageError(format!("[{name}] ioengine=null: {why}")))?;
    rate(&mut j, notes).map_err(|why| UsageError(format!("[{name}] rate: {why}")))?;
    Ok(j)
}

/// Where the job runs: its file, directory or files, its region. False
/// for another option.
fn place(j: &mut Job, line: &Line<'_>) -> Result<bool, UsageError> {
    let v = line.v;
    match line.key {
        "filename" => {
            let v = line.text("a file name")?;
            if v.is_empty() {
                return Err(line.bad(
                    "no file named (fio refuses it too); name the file or device to run on, as in \
                     filename=/tmp/job.img, or use directory= for files in a directory",
                ));
            }
            if v.contains(':') {
                return Err(
                    line.bad("several files in one filename are not supported; use directory= and nrfiles=")
                );
            }
            j.fields.target = Some(v.to_string());
        }
        "directory" => {
            let dir = line.text("a directory")?;
            if dir.is_empty() {
                return Err(line.bad(EMPTY));
            }
            j.fields.target = Some(dir.to_string());
        }
        "nrfiles" => j.fields.nrfiles = Some(line.number("count")?),
        "read_iolog" => j.fields.replay = Some(PathBuf::from(line.text("a trace file")?)),
        "write_iolog" => j.fields.write_iolog = Some(PathBuf::from(line.text("a trace file")?)),
        "replay_no_stall" if line.flag() => j.fields.replay_speed = Some("max".into()),
        // Every request of the trace to this device: iolab's one target
        // (a trace of several files is laid end to end on it).
        "replay_redirect" => j.fields.target = Some(line.text("a device or file")?.to_string()),
        "filesize" => j.filesize = Some(line.bytes(v)?),
        "name" => j.fields.name = v.map(str::to_string),
        "size" | "offset" => {
            let text = line.text("a value")?;
            let resolved = match text.strip_suffix('%') {
                Some(pct) => percent_of_target(&j.fields, pct).map_err(|why| line.bad(&why))?,
                None => line.bytes(Some(text))?,
            };
            if line.key == "size" && resolved == 0 {
                return Err(line.bad(
                    "an empty region; fio reads size=0 as no size (the whole file, which must exist): leave \
                     size= out to run on the whole file or device, or give a size, as in size=1g",
                ));
            }
            let slot = if line.key == "size" { &mut j.fields.size } else { &mut j.fields.offset };
            *slot = Some(exact_size(resolved));
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// The access pattern: direction, mix, spread, randomness. False for
/// another option.
fn pattern(j: &mut Job, line: &Line<'_>, notes: &mut Vec<String>) -> Result<bool, UsageError> {
    match line.key {
        "rw" | "readwrite" => {
            let text = line.text("a pattern")?;
            let (pattern, suffix) = text.split_once(':').map_or((text, None), |(p, s)| (p, Some(s)));
            if pattern == "randtrimwrite" {
                return Err(line.bad("iolab trims then writes in order only; use trimwrite, or randtrim"));
            }
            let rw: workloads::Rw = line.parsed(pattern)?;
            j.fields.rw = Some(rw);
            if let Some(suffix) = suffix {
                rw_suffix(j, line, rw, suffix, notes)?;
            }
        }
        "rwmixread" => j.fields.rwmixread = Some(line.number("percentage")?),
        "rwmixwrite" => {
            let w: u8 = line.number("percentage")?;
            if w > 100 {
                return Err(line.bad("not a percentage"));
            }
            j.fields.rwmixread = Some(100 - w);
        }
        "random_distribution" => {
            let text = line.text("a distribution")?;
            let first = text.split(',').next().unwrap_or(text);
            if first != text {
                line.ignore(notes, "reads and writes both use the first distribution");
            }
            let skew = match first.split_once(':') {
                None if first == "random" => "uniform".to_string(),
                Some(("zipf", theta)) => format!("zipf:{theta}"),
                Some(("zoned", zones)) => format!("zoned:{zones}"),
                _ => return Err(line.bad(
                    "iolab has uniform (random), zipf:THETA and zoned:IO/REGION:...; zoned_abs, pareto and \
                         normal have no equivalent",
                )),
            };
            j.fields.skew = Some(line.parsed(&skew)?);
        }
        "percentage_random" => {
            let text = line.text("a percentage")?;
            let pcts: Option<Vec<u8>> =
                text.split(',').map(|p| p.trim().parse().ok().filter(|p: &u8| *p <= 100)).collect();
            let pcts = pcts
                .filter(|p| (1..=3).contains(&p.len()))
                .ok_or_else(|| line.bad("not a percentage 0-100 (or READS,WRITES[,TRIMS])"))?;
            j.percentage_random = Some((pcts[0], pcts.get(1).copied().unwrap_or(pcts[0])));
        }
        "zero_buffers" => j.fields.pattern = Some(line.parsed("zeros")?),
        "dedupe_percentage" => {
            let pct: u8 = line.number("percentage")?;
            if pct >= 100 {
                return Err(line.bad("100% identical buffers has no ratio; give less than 100"));
            }
            // fio's percentage of identical buffers, as Vdbench's ratio.
            j.fields.dedupe_ratio = (pct > 0).then(|| 100.0 / f64::from(100 - pct));
        }
        "buffer_compress_percentage" => {
            let pct: u8 = line.number("percentage")?;
            j.fields.pattern = Some(line.parsed(&format!("compress:{}", 100u8.saturating_sub(pct).max(1)))?);
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// Transfer sizes and their alignment. False for another option.
fn sizes(j: &mut Job, line: &Line<'_>, notes: &mut Vec<String>) -> Result<bool, UsageError> {
    match line.key {
        "bs" | "blocksize" => {
            let text = line.text("a size")?;
            let mut sizes = text.split(',').filter(|s| !s.is_empty());
            let first = line.bytes(sizes.next())?;
            if sizes.any(|s| fio_bytes(s, line.kb_base) != Some(first)) {
                line.ignore(notes, "both reads and writes use the first size");
            }
            j.fields.bs = Some(line.parsed(&first.to_string())?);
        }
        "bsrange" | "blocksize_range" => {
            let text = line.text("MIN-MAX")?;
            let first = text.split(',').next().unwrap_or(text);
            let (lo, hi) = first.split_once('-').ok_or_else(|| line.bad("needs MIN-MAX"))?;
            let range = format!("{}-{}", line.bytes(Some(lo))?, line.bytes(Some(hi))?);
            j.fields.bs = Some(line.parsed(&range)?);
        }
        "bssplit" => j.fields.bs = Some(bssplit(line, notes)?),
        "blockalign" | "ba" => j.fields.bsalign = Some(exact_size(line.bytes(line.v)?)),
        _ => return Ok(false),
    }
    Ok(true)
}

/// fio's `bssplit=SIZE/PCT:...` (reads' split, then writes'): the first
/// split for both; sizes without a percentage share what the others leave.
fn bssplit(line: &Line<'_>, notes: &mut Vec<String>) -> Result<workloads::BlockSizes, UsageError> {
    let text = line.text("SIZE/PCT:...")?;
    let mut splits = text.split(',').filter(|s| !s.is_empty());
    let first = splits.next().unwrap_or(text);
    if splits.any(|s| s != first) {
        line.ignore(notes, "reads and writes both use the first split");
    }
    let mut parts = Vec::new();
    for part in first.split(':').filter(|p| !p.is_empty()) {
        let (size, pct) = part.split_once('/').unwrap_or((part, ""));
        let pct = match pct {
            "" => None,
            pct => Some(pct.parse::<u32>().map_err(|_| line.bad(&format!("'{pct}' is not a percentage")))?),
        };
        parts.push((line.bytes(Some(size))?, pct));
    }
    let (split, uneven) = fill_percentages(&parts).map_err(|why| line.bad(&why))?;
    let bs: workloads::BlockSizes = line.parsed(&split)?;
    if uneven {
        line.ignore(
            notes,
            &format!(
                "the sizes without a percentage share what the others leave, the first taking what cannot be \
                 shared evenly: {bs} (fio leaves that to one size of its choosing)"
            ),
        );
    }
    Ok(bs)
}

/// How requests are issued: the engine, depth, clones, the page cache.
/// False for another option.
fn engine(j: &mut Job, line: &Line<'_>, notes: &mut Vec<String>) -> Result<bool, UsageError> {
    match line.key {
        "iodepth" => j.fields.iodepth = Some(line.number("depth")?),
        "iodepth_batch" | "iodepth_batch_submit" => j.fields.iodepth_batch = Some(line.number("count")?),
        "ioengine" if line.v == Some("null") => j.null_engine = true,
        "ioengine" => {
            let engine = match line.v.unwrap_or("") {
                "io_uring" | "libaio" | "posixaio" => "uring",
                "psync" | "sync" | "pvsync" | "pvsync2" | "vsync" => "sync",
                other => {
                    return Err(line.bad(&format!(
                        "the {other} engine has no equivalent; iolab runs io_uring (libaio) or sync (psync)"
                    )))
                }
            };
            if !matches!(line.v, Some("io_uring") | Some("psync")) {
                line.ignore(notes, &format!("runs on iolab's {engine} engine"));
            }
            j.fields.engine = Some(line.parsed(engine)?);
        }
        "direct" => j.fields.direct = Some(line.flag()),
        "buffered" => j.fields.direct = Some(!line.flag()),
        "invalidate" => j.fields.keep_cache = Some(!line.flag()),
        "numjobs" => {
            j.numjobs =
                line.number::<u32>("count").ok().filter(|n| *n > 0).ok_or_else(|| line.bad("not a count"))?
        }
        "group_reporting" => j.group_reporting = line.flag(),
        "new_group" => line.ignore(notes, "ignored: a reporting group only, and iolab reports each job"),
        "stonewall" | "wait_for_previous" => j.stonewall = line.flag(),
        "kb_base" | "description" | "thread" | "refill_buffers" | "randrepeat" => {}
        "randseed" | "rand_seed" => j.fields.seed = Some(line.number("seed")?),
        _ => return Ok(false),
    }
    Ok(true)
}

/// How much the job does: its time, its requests or bytes, its passes,
/// its rate. False for another option.
fn amount(j: &mut Job, line: &Line<'_>, notes: &mut Vec<String>) -> Result<bool, UsageError> {
    let v = line.v;
    match line.key {
        "time_based" => j.time_based = line.flag(),
        "runtime" | "timeout" => {
            j.fields.runtime = Some(duration(v).ok_or_else(|| line.bad("not a duration"))?)
        }
        "ramp_time" => j.fields.ramp = Some(duration(v).ok_or_else(|| line.bad("not a duration"))?),
        "io_size" | "io_limit" => j.fields.io_size = Some(exact_size(line.bytes(v)?)),
        "number_ios" => j.fields.ios = Some(line.number("count")?),
        "loops" => {
            j.loops =
                line.number::<u64>("count").ok().filter(|n| *n > 0).ok_or_else(|| line.bad("not a count"))?
        }
        "rate" | "rate_iops" => {
            let text = line.text("a rate")?;
            let first = text.split(',').next().unwrap_or(text);
            if text.contains(',') {
                line.ignore(notes, "the first rate caps reads and writes together");
            }
            if line.key == "rate" {
                j.rate_bytes = Some(line.bytes(Some(first))?).filter(|r| *r > 0);
            } else {
                j.fields.rate_iops = Some(first.parse().map_err(|_| line.bad("not a rate"))?);
            }
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// Verification and flushes. False for another option.
fn checks(j: &mut Job, line: &Line<'_>, notes: &mut Vec<String>) -> Result<bool, UsageError> {
    match line.key {
        "verify" => match line.v {
            Some("0") | Some("none") => j.verify = None,
            v => j.verify = Some(v.unwrap_or("1").to_string()),
        },
        "do_verify" => j.do_verify = line.flag(),
        "verify_only" => j.verify_only = line.flag(),
        "verify_fatal" if line.flag() => j.fields.max_errors = Some(1),
        "verify_fatal" => {}
        "verify_backlog" => {
            line.ignore(notes, "what a job wrote is read back when it ends, not every N writes")
        }
        "verify_interval" | "verify_pattern" | "verify_offset" => {
            line.ignore(notes, "iolab stamps every sector with its own header")
        }
        "write_bw_log" | "write_iops_log" | "write_lat_log" => {
            let prefix = line.v.filter(|v| !v.is_empty()).unwrap_or(&j.name);
            j.log_prefix.get_or_insert_with(|| (line.key.to_string(), prefix.to_string()));
        }
        "log_avg_msec" if line.v == Some("1000") => {}
        "log_avg_msec" => line.ignore(notes, "iolab's interval logs average each second (log_avg_msec=1000)"),
        "fsync" | "fdatasync" => j.fields.flush_every = Some(line.number("count")?),
        "end_fsync" => j.fields.end_flush = Some(line.flag()),
        _ => return Ok(false),
    }
    Ok(true)
}

/// fio's null engine, which moves no data, is iolab's `null:SIZE`
/// target: the job's size (or its files' sizes) names the region.
fn null_engine(j: &mut Job, notes: &mut Vec<String>) -> Result<(), String> {
    if !j.null_engine {
        return Ok(());
    }
    let files = u64::from(j.fields.nrfiles.unwrap_or(1));
    let size = match (&j.fields.size, j.filesize) {
        (Some(size), _) => size.clone(),
        (None, Some(per_file)) => exact_size(per_file * files),
        (None, None) => return Err("needs size= (the null engine has no file to take it from)".into()),
    };
    if let Some(file) = j.fields.target.replace(format!("null:{size}")) {
        notes.push(format!("{}: filename={file}: not opened, as fio's null engine opens nothing", j.name));
    }
    j.fields.nrfiles = None;
    Ok(())
}

/// fio's `rate` (bytes a second) as a cap on requests a second, which
/// needs one transfer size.
fn rate(j: &mut Job, notes: &mut Vec<String>) -> Result<(), String> {
    let Some(rate) = j.rate_bytes else { return Ok(()) };
    if j.fields.rate_iops.is_some() {
        return Err("give rate= or rate_iops=, not both".into());
    }
    let bs = match &j.fields.bs {
        None => 4096,
        Some(workloads::BlockSizes::Fixed(bs)) => *bs,
        Some(_) => return Err("needs one transfer size (bs=); give rate_iops= for a mix of sizes".into()),
    };
    let iops = (rate / bs).max(1);
    j.fields.rate_iops = Some(iops);
    notes.push(format!(
        "{}: rate={rate}: capped at {iops} requests a second ({rate} bytes a second in {bs}-byte requests)",
        j.name
    ));
    Ok(())
}

/// fio's `rw=PATTERN:N`. Sequential: N bytes skipped after each request,
/// negative to walk backwards (`--skip`). Random: a new random offset
/// every N requests, the others following on, which iolab's `--seekpct`
/// gives on average (100/N percent placed at random).
fn rw_suffix(
    j: &mut Job,
    line: &Line<'_>,
    rw: workloads::Rw,
    suffix: &str,
    notes: &mut Vec<String>,
) -> Result<(), UsageError> {
    if rw.default_seek_pct() < 100 {
        let (sign, size) = suffix.strip_prefix('-').map_or(("", suffix), |rest| ("-", rest));
        j.fields.skip = Some(format!("{sign}{}", line.bytes(Some(size))?));
        return Ok(());
    }
    let every: u32 = suffix.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
        line.bad(&format!(
            "'{suffix}' after a random pattern is a count of requests per random offset, as in :8"
        ))
    })?;
    let pct = ((100 + every / 2) / every).max(1) as u8;
    j.fields.seekpct = Some(pct);
    line.ignore(
        notes,
        &format!(
            "runs as --seekpct {pct}: a new random offset every {every} requests on average (fio: exactly \
             every {every})"
        ),
    );
    Ok(())
}

/// fio's `percentage_random=N` is Vdbench's seekpct: N% of the requests
/// of a random pattern placed at random, the others following on from
/// the one before. fio applies it to random patterns only, and keeps a
/// value per direction; iolab's `--seekpct` is one value for both.
fn percentage_random(j: &mut Job, notes: &mut Vec<String>) {
    let Some((reads, writes)) = j.percentage_random else { return };
    let name = &j.name;
    let rw = j.fields.rw.unwrap_or(workloads::Rw::Read);
    let given = if reads == writes { format!("{reads}") } else { format!("{reads},{writes}") };
    if rw.default_seek_pct() < 100 {
        notes.push(format!(
            "{name}: percentage_random={given}: ignored, as fio ignores it: rw={rw} is sequential (--seekpct \
             places some of a sequential job's requests at random)"
        ));
        return;
    }
    let pct = if rw == workloads::Rw::RandWrite { writes } else { reads };
    if rw.is_mixed() && reads != writes {
        notes.push(format!(
            "{name}: percentage_random={given}: runs as --seekpct {reads}, for reads and writes alike (fio \
             places {reads}% of reads and {writes}% of writes at random)"
        ));
    }
    j.fields.seekpct = Some(pct);
}

/// A bssplit's sizes and percentages as iolab's `--bs` mix, the sizes
/// fio gives no percentage sharing what the others leave evenly (the
/// first of them taking what an even share cannot split, so the mix
/// adds up to 100; then the second value is true). The sum is checked
/// by `--bs`'s own parsing.
fn fill_percentages(parts: &[(u64, Option<u32>)]) -> Result<(String, bool), String> {
    let given: u32 = parts.iter().filter_map(|(_, pct)| *pct).sum();
    let blank = parts.iter().filter(|(_, pct)| pct.is_none()).count() as u32;
    if blank > 0 && given > 100 {
        return Err(format!(
            "the percentages given add up to {given}, leaving nothing for the sizes without one"
        ));
    }
    let left = 100u32.saturating_sub(given);
    let mut rest = left % blank.max(1);
    let uneven = rest > 0;
    let filled: Vec<String> = parts
        .iter()
        .map(|&(size, pct)| {
            let pct = pct.unwrap_or_else(|| {
                let extra = u32::from(rest > 0);
                rest -= extra;
                left / blank + extra
            });
            format!("{}/{pct}", workloads::spec::human_bytes(size))
        })
        .collect();
    Ok((filled.join(":"), uneven))
}

/// `PCT` percent of the job's target so far (its file or device).
fn percent_of_target(fields: &JobFields, pct: &str) -> Result<u64, String> {
    let pct: f64 = pct.parse().map_err(|_| "not a percentage".to_string())?;
    let target =
        fields.target.as_deref().ok_or("a percentage needs filename= first, naming an existing target")?;
    let len = target_bytes(Path::new(target))
        .ok_or_else(|| format!("a percentage of {target} needs it to exist"))?;
    Ok(((len as f64 * pct / 100.0) as u64) / 4096 * 4096)
}

fn target_bytes(path: &Path) -> Option<u64> {
    use std::io::{Seek, SeekFrom};
    let meta = std::fs::metadata(path).ok()?;
    if meta.is_file() {
        return Some(meta.len());
    }
    // A block device's size is where its end is.
    std::fs::File::open(path).ok()?.seek(SeekFrom::End(0)).ok()
}

/// fio's times: a number of seconds, or with a unit (us, ms, s, m, h, d).
fn duration(v: Option<&str>) -> Option<String> {
    let t = v?.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (n, unit) = t.split_at(split);
    let n: u64 = n.parse().ok()?;
    Some(match unit {
        "" | "s" | "sec" => format!("{n}s"),
        "ms" | "msec" => format!("{n}ms"),
        "m" | "min" => format!("{n}m"),
        "h" => format!("{n}h"),
        "d" => format!("{}h", n * 24),
        "us" | "usec" => format!("{}ms", n / 1000),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fio_units_follow_kb_base() {
        assert_eq!(fio_bytes("4k", 1024), Some(4096));
        assert_eq!(fio_bytes("4k", 1000), Some(4000));
        assert_eq!(fio_bytes("4KiB", 1000), Some(4096));
        assert_eq!(fio_bytes("1m", 1024), Some(1 << 20));
        assert_eq!(fio_bytes("512", 1024), Some(512));
        assert_eq!(fio_bytes("4x", 1024), None);
    }

    #[test]
    fn toml_is_not_taken_for_fio_nor_fio_for_toml() {
        assert!(looks_like_fio("; fio\n[global]\nrw=randread\n[job1]\nbs=4k\n"));
        assert!(!looks_like_fio("[global]\nrw = \"randread\"\n[[job]]\nname = \"a\"\n"));
        assert!(!looks_like_fio("concurrent = true\n"));
    }

    #[test]
    fn durations_take_fios_units() {
        assert_eq!(duration(Some("30")).as_deref(), Some("30s"));
        assert_eq!(duration(Some("2m")).as_deref(), Some("2m"));
        assert_eq!(duration(Some("1d")).as_deref(), Some("24h"));
        assert_eq!(duration(Some("x")), None);
    }
}
