//! Vdbench parameter files, translated into iolab's jobs: storage
//! definitions (`sd=`), workload definitions (`wd=`) and run definitions
//! (`rd=`), with their `default` entries, value lists in parentheses,
//! wildcards in names, and the `for` loops of a run (`forxfersize=`,
//! `forthreads=`, `forrdpct=`, `forseekpct=`), each combination a run of
//! its own, and `iorate=curve` (a run at the most it can do, then one at
//! each share of that rate `curve=` lists, 10, 50, 70, 80, 90 and 100% by
//! default). A run's workloads go at the same time, one iolab job for each
//! of a workload's storage definitions; runs go one after another. What
//! iolab does not do as Vdbench does is noted (or refused with
//! `--strict`); what it cannot do at all (file system definitions, hosts)
//! is refused.

use std::path::Path;

use super::fields::{JobFields, JobFile};
use super::fio::Translated;
use crate::UsageError;

/// Vdbench's defaults: an sd's threads, an rd's elapsed seconds, the
/// shares of the max rate an `iorate=curve` runs at.
const SD_THREADS: u32 = 8;
const ELAPSED_S: u64 = 30;
const CURVE: [f64; 6] = [10.0, 50.0, 70.0, 80.0, 90.0, 100.0];

/// One run of an rd: its name suffix (which loop values, which point of
/// a curve), its parameters, and for a point of a curve the suffix of the
/// curve's max run and the share of its rate.
struct Step {
    suffix: String,
    rd: Def,
    curve: Option<(String, f64)>,
}

/// One `sd=`, `wd=` or `rd=` line: its name and its other parameters.
#[derive(Clone, Debug)]
struct Def {
    name: String,
    params: Vec<(String, String)>,
}

impl Def {
    fn get(&self, key: &str) -> Option<&str> {
        self.params.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

/// The parsed file: general parameters, then each kind's definitions
/// (`default` entries already folded into those after them).
#[derive(Default)]
struct Parsed {
    general: Vec<(String, String)>,
    sds: Vec<Def>,
    wds: Vec<Def>,
    rds: Vec<Def>,
}

/// Whether `text` is a Vdbench parameter file: a storage definition and a
/// run definition among lines that are comments or `key=value` lists.
pub fn looks_like_vdbench(text: &str) -> bool {
    let lines: Vec<&str> = meaningful(text).collect();
    let starts = |kind: &str| lines.iter().any(|l| l.to_ascii_lowercase().starts_with(kind));
    starts("sd=") && starts("rd=") && !lines.iter().any(|l| l.starts_with('['))
}

/// Lines that are not blank or comments (`*`, `/`, `#`).
fn meaningful(text: &str) -> impl Iterator<Item = &str> {
    text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with(['*', '/', '#']))
}

/// Splits `line` at commas outside parentheses.
fn split_top(line: &str) -> Vec<String> {
    let (mut out, mut depth, mut cur) = (Vec::new(), 0i32, String::new());
    for c in line.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(std::mem::take(&mut cur).trim().to_string());
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

/// A value's items: `(a,b,c)` or `a`.
fn items(value: &str) -> Vec<String> {
    let inner = value.trim().trim_start_matches('(').trim_end_matches(')');
    inner.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect()
}

/// Logical lines: a line ending in a comma goes on with the next, as does
/// a line that starts with one.
fn logical_lines(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in meaningful(text) {
        match out.last_mut() {
            Some(last) if last.ends_with(',') || line.starts_with(',') => {
                last.push_str(line.trim_start_matches(','));
                if !last.ends_with(',') && line.ends_with(',') {
                    last.push(',');
                }
            }
            _ => out.push(line.to_string()),
        }
    }
    out.into_iter().map(|l| l.trim_end_matches(',').to_string()).collect()
}

fn parse(path: &Path, text: &str) -> Result<Parsed, UsageError> {
    let mut parsed = Parsed::default();
    let mut defaults: [Vec<(String, String)>; 3] = Default::default();
    for line in logical_lines(text) {
        let pairs: Vec<(String, String)> = split_top(&line)
            .into_iter()
            .map(|p| match p.split_once('=') {
                Some((k, v)) => Ok((k.trim().to_ascii_lowercase(), v.trim().to_string())),
                None => Err(UsageError(format!("{}: '{p}' in '{line}' is not key=value", path.display()))),
            })
            .collect::<Result<_, _>>()?;
        let Some((kind, name)) = pairs.first().cloned() else { continue };
        let slot = match kind.as_str() {
            "sd" => 0,
            "wd" => 1,
            "rd" => 2,
            "fsd" | "fwd" => {
                return Err(UsageError(format!(
                    "{}: {kind}= (Vdbench's file system workloads) is not supported; iolab's `fs tree`, \
                     `fs untar` and `bonnie` drive file systems instead",
                    path.display()
                )))
            }
            "hd" => {
                return Err(UsageError(format!(
                    "{}: hd= (hosts) is not supported: iolab runs on this host (several hosts: mpirun, \
                     docs/workloads.md)",
                    path.display()
                )))
            }
            _ => {
                parsed.general.extend(pairs);
                continue;
            }
        };
        let rest = pairs[1..].to_vec();
        if name == "default" {
            defaults[slot].extend(rest);
            continue;
        }
        let def = Def { name, params: defaults[slot].iter().cloned().chain(rest).collect() };
        [&mut parsed.sds, &mut parsed.wds, &mut parsed.rds][slot].push(def);
    }
    Ok(parsed)
}

/// The definitions `pattern` names: a name, a list of names, or names
/// ending in `*` (a prefix).
fn matching<'a>(defs: &'a [Def], pattern: &str) -> Vec<&'a Def> {
    let wanted = items(pattern);
    defs.iter()
        .filter(|d| {
            wanted.iter().any(|w| match w.strip_suffix('*') {
                Some(prefix) => d.name.starts_with(prefix),
                None => d.name == *w,
            })
        })
        .collect()
}

/// Translates the Vdbench parameter file at `path` (see the module).
pub fn translate(path: &Path, strict: bool) -> Result<Translated, UsageError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| UsageError(format!("{}: cannot read the parameter file: {e}", path.display())))?;
    let parsed = parse(path, &text)?;
    let mut notes = Vec::new();
    let general = general(&parsed.general, &mut notes)?;
    let mut jobs = Vec::new();
    for rd in &parsed.rds {
        for step in expand_loops(rd)? {
            let before = jobs.len();
            run_jobs(path, &parsed, &step, &general, &mut jobs, &mut notes)?;
            if let Some(first) = jobs.get_mut(before) {
                first.stonewall = Some(true);
            }
        }
    }
    if jobs.is_empty() {
        return Err(UsageError(format!(
            "{}: no run: each rd= needs a wd= naming an sd= (sd=, wd= and rd= lines)",
            path.display()
        )));
    }
    notes.sort();
    notes.dedup();
    if strict && !notes.is_empty() {
        return Err(UsageError(format!(
            "{}: --strict: parameters iolab would not run as Vdbench does:\n  {}",
            path.display(),
            notes.join("\n  ")
        )));
    }
    let file = JobFile { concurrent: true, log_dir: None, global: JobFields::default(), jobs };
    Ok(Translated { file, notes })
}

/// The general parameters iolab takes (data reduction, validation), as
/// fields every job gets; the rest noted.
fn general(params: &[(String, String)], notes: &mut Vec<String>) -> Result<JobFields, UsageError> {
    let mut f = JobFields::default();
    for (k, v) in params {
        let ratio = || v.parse::<f64>().map_err(|_| UsageError(format!("{k}={v}: not a number")));
        match k.as_str() {
            "dedupratio" => f.dedupe_ratio = Some(ratio()?),
            "dedupunit" => f.dedupe_unit = Some(v.clone()),
            "compratio" => f.compress_ratio = Some(ratio()?),
            "validate" => validate(v, &mut f, notes)?,
            _ => notes.push(format!("{k}={v}: ignored (no such setting in iolab)")),
        }
    }
    Ok(f)
}

/// Vdbench's `validate=`: `yes`, or one or more of `read_after_write`
/// (`-vr`: read each block back after writing it), `no_preread` (`-vw`:
/// no read before a rewrite) and `time` (`-vt`: keep each write's time,
/// which every stamp does anyway), in a list or alone; `no` for none.
fn validate(value: &str, f: &mut JobFields, notes: &mut Vec<String>) -> Result<(), UsageError> {
    if matches!(value, "no" | "n" | "false") {
        return Ok(());
    }
    for item in items(value) {
        match item.as_str() {
            "yes" | "y" | "true" => {}
            "read_after_write" => f.reread = Some(true),
            "no_preread" => f.no_preread = Some(true),
            "time" => notes.push("validate=time: every stamp holds its write's time already".into()),
            other => {
                return Err(UsageError(format!(
                    "validate={value}: {other} is not yes, read_after_write, no_preread or time"
                )))
            }
        }
    }
    f.validate = Some(true);
    Ok(())
}

/// An rd's `for` loops expanded: each combination of their values, with
/// a name suffix saying which (none without loops); under `iorate=curve`
/// each combination a max run and its curve's points.
fn expand_loops(rd: &Def) -> Result<Vec<Step>, UsageError> {
    let mut runs = vec![(String::new(), rd.clone())];
    for (key, value) in rd.params.iter().filter(|(k, _)| k.starts_with("for")) {
        let param = &key[3..];
        if !matches!(param, "xfersize" | "threads" | "rdpct" | "seekpct") {
            return Err(UsageError(format!(
                "rd={}: {key}= is not supported (forxfersize, forthreads, forrdpct and forseekpct are)",
                rd.name
            )));
        }
        runs = runs
            .into_iter()
            .flat_map(|(suffix, run)| {
                items(value).into_iter().map(move |v| {
                    let mut run = run.clone();
                    run.params.push((param.to_string(), v.clone()));
                    (format!("{suffix}.{param}={v}"), run)
                })
            })
            .collect();
    }
    // A list of rates (`iorate=(100,200,max)`) is a run at each, in turn.
    let rates = items(rd.get("iorate").unwrap_or("max"));
    if rates.len() > 1 {
        if rates.iter().any(|r| r == "curve") {
            return Err(UsageError(format!("rd={}: iorate=curve goes alone, not in a list", rd.name)));
        }
        runs = runs
            .into_iter()
            .flat_map(|(suffix, run)| {
                rates.iter().map(move |r| {
                    let mut run = run.clone();
                    run.params.push(("iorate".into(), r.clone()));
                    (format!("{suffix}.iorate={r}"), run)
                })
            })
            .collect();
    }
    if rd.get("iorate") != Some("curve") {
        if rd.get("curve").is_some() {
            return Err(UsageError(format!("rd={}: curve= applies only with iorate=curve", rd.name)));
        }
        return Ok(runs.into_iter().map(|(suffix, rd)| Step { suffix, rd, curve: None }).collect());
    }
    let points = curve_points(rd)?;
    let mut steps = Vec::with_capacity(runs.len() * (points.len() + 1));
    for (suffix, mut run) in runs {
        run.params.push(("iorate".into(), "max".into()));
        let max = format!("{suffix}.iorate=max");
        for &p in &points {
            let point = Step {
                suffix: format!("{suffix}.iorate={p}%"),
                rd: run.clone(),
                curve: Some((max.clone(), p)),
            };
            steps.push(point);
        }
        let at = steps.len() - points.len();
        steps.insert(at, Step { suffix: max, rd: run, curve: None });
    }
    Ok(steps)
}

/// The shares of the max rate an `iorate=curve` runs at: `curve=`'s, or
/// Vdbench's default.
fn curve_points(rd: &Def) -> Result<Vec<f64>, UsageError> {
    let Some(list) = rd.get("curve") else { return Ok(CURVE.to_vec()) };
    items(list)
        .iter()
        .map(|p| {
            p.parse::<f64>().ok().filter(|v| v.is_finite() && *v > 0.0 && *v <= 1000.0).ok_or_else(|| {
                UsageError(format!(
                    "rd={}: curve={list}: {p} is not a percentage above 0 (at most 1000)",
                    rd.name
                ))
            })
        })
        .collect()
}

/// The jobs of one run: for each of its workloads, one per storage
/// definition the workload names.
fn run_jobs(
    path: &Path,
    parsed: &Parsed,
    step: &Step,
    general: &JobFields,
    jobs: &mut Vec<JobFields>,
    notes: &mut Vec<String>,
) -> Result<(), UsageError> {
    let (rd, suffix) = (&step.rd, &step.suffix);
    let wds = matching(&parsed.wds, rd.get("wd").unwrap_or("*"));
    if wds.is_empty() {
        return Err(UsageError(format!("{}: rd={}: its wd= names no workload", path.display(), rd.name)));
    }
    let pairs: Vec<(&Def, &Def)> = wds
        .iter()
        .flat_map(|wd| {
            matching(&parsed.sds, wd.get("sd").unwrap_or("*")).into_iter().map(move |sd| (*wd, sd))
        })
        .collect();
    if let Some(wd) = wds.iter().find(|wd| !pairs.iter().any(|(w, _)| w.name == wd.name)) {
        return Err(UsageError(format!("{}: wd={}: its sd= names no storage", path.display(), wd.name)));
    }
    let rate = rate(rd)?.map(|r| r / pairs.len().max(1) as u64);
    for &(wd, sd) in &pairs {
        // An sd's threads are shared among the workloads on it.
        let sharing = pairs.iter().filter(|(_, s)| s.name == sd.name).count() as u32;
        let mut f = job(rd, wd, sd, sharing, notes)?;
        f.name = Some(format!("{}{suffix}.{}.{}", rd.name, wd.name, sd.name));
        f.rate_iops = rate.filter(|&r| r > 0);
        if let Some((max, share)) = &step.curve {
            // The same workload on the same storage in the curve's max run.
            f.rate_of = Some(format!("{}{max}.{}.{}:{share}%", rd.name, wd.name, sd.name));
        }
        let mut f = f.over(general);
        if matches!(f.rw, Some(workloads::Rw::Read | workloads::Rw::RandRead)) {
            // Duplicates are a property of what is written.
            (f.dedupe_ratio, f.dedupe_unit) = (None, None);
        }
        jobs.push(f);
    }
    Ok(())
}

/// An rd's `iorate`: `None` for max.
fn rate(rd: &Def) -> Result<Option<u64>, UsageError> {
    match rd.get("iorate").unwrap_or("max") {
        "max" => Ok(None),
        n => n
            .parse::<f64>()
            .map(|r| Some(r as u64))
            .map_err(|_| UsageError(format!("rd={}: iorate={n}: give max or a number", rd.name))),
    }
}

/// One job: workload `wd` on storage `sd` in run `rd`.
fn job(rd: &Def, wd: &Def, sd: &Def, sharing: u32, notes: &mut Vec<String>) -> Result<JobFields, UsageError> {
    let lun =
        sd.get("lun").ok_or_else(|| UsageError(format!("sd={}: no lun= (the device or file)", sd.name)))?;
    let mut f = JobFields {
        target: Some(lun.to_string()),
        size: sd.get("size").map(str::to_string),
        offset: sd.get("offset").map(str::to_string),
        direct: Some(sd.get("openflags").is_some_and(|o| o.contains("o_direct"))),
        ..JobFields::default()
    };
    let rdpct: u8 =
        rd.get("rdpct").or(wd.get("rdpct")).unwrap_or("100").parse().map_err(|_| bad(wd, "rdpct"))?;
    let seek = rd.get("seekpct").or(wd.get("seekpct")).unwrap_or("100");
    let seekpct: u8 = match seek {
        "seq" | "sequential" | "eof" => 0,
        "random" | "rand" => 100,
        n => n.parse().map_err(|_| bad(wd, "seekpct"))?,
    };
    if seek == "eof" {
        notes.push(format!(
            "wd={}: seekpct=eof: runs sequentially for the elapsed time, not to the end once",
            wd.name
        ));
    }
    f.rw = Some(rw(rdpct, seekpct > 0));
    f.rwmixread = (1..100).contains(&rdpct).then_some(rdpct);
    f.seekpct = Some(seekpct);
    f.bs = Some(xfersize(wd, rd.get("xfersize").or(wd.get("xfersize")).unwrap_or("4k"))?);
    let threads: u32 = match rd.get("threads").or(sd.get("threads")) {
        Some(t) => t.parse().map_err(|_| bad(sd, "threads"))?,
        None => SD_THREADS,
    };
    f.threads = Some((threads / sharing).max(1));
    let elapsed = rd.get("elapsed").map_or(Ok(ELAPSED_S), |e| e.parse().map_err(|_| bad(rd, "elapsed")))?;
    f.runtime = Some(format!("{elapsed}s"));
    if let Some(w) = rd.get("warmup") {
        f.ramp = Some(format!("{}s", w.parse::<u64>().map_err(|_| bad(rd, "warmup"))?));
    }
    note_unknown(rd, wd, sd, notes);
    Ok(f)
}

/// Notes each parameter of `rd`, `wd` and `sd` iolab has no setting for,
/// and those it takes otherwise than Vdbench does.
fn note_unknown(rd: &Def, wd: &Def, sd: &Def, notes: &mut Vec<String>) {
    for (kind, def, known) in [
        (
            "rd",
            rd,
            &[
                "wd", "iorate", "curve", "elapsed", "interval", "warmup", "threads", "xfersize", "rdpct",
                "seekpct",
            ][..],
        ),
        ("wd", wd, &["sd", "xfersize", "rdpct", "seekpct", "skew"][..]),
        ("sd", sd, &["lun", "size", "offset", "threads", "openflags"][..]),
    ] {
        for (k, v) in &def.params {
            if !known.contains(&k.as_str()) && !k.starts_with("for") {
                notes.push(format!("{kind}={}: {k}={v}: ignored (no such setting in iolab)", def.name));
            }
        }
    }
    if rd.get("interval").is_some_and(|i| i != "1") {
        notes.push(format!("rd={}: interval: iolab reports every second", rd.name));
    }
    if wd.get("skew").is_some() {
        notes.push(format!("wd={}: skew: the run's iorate is shared equally among its workloads", wd.name));
    }
}

/// iolab's pattern for Vdbench's `rdpct`, random or not (`seekpct` over 0).
fn rw(rdpct: u8, random: bool) -> workloads::Rw {
    match rdpct {
        100 if random => workloads::Rw::RandRead,
        100 => workloads::Rw::Read,
        0 if random => workloads::Rw::RandWrite,
        0 => workloads::Rw::Write,
        _ if random => workloads::Rw::RandRw,
        _ => workloads::Rw::Rw,
    }
}

fn bad(def: &Def, key: &str) -> UsageError {
    UsageError(format!("{}: {key}={}: not a number", def.name, def.get(key).unwrap_or("")))
}

/// `xfersize=4k`, or `xfersize=(4k,50,64k,50)` (sizes with the percentage
/// of requests of each), as iolab's transfer sizes.
fn xfersize(wd: &Def, value: &str) -> Result<workloads::BlockSizes, UsageError> {
    let list = items(value);
    let text = match list.len() {
        1 => list[0].clone(),
        n if n % 2 == 0 => list.chunks(2).map(|p| format!("{}/{}", p[0], p[1])).collect::<Vec<_>>().join(":"),
        _ => {
            return Err(UsageError(format!(
                "wd={}: xfersize={value}: give a size, or pairs of a size and its percentage",
                wd.name
            )))
        }
    };
    workloads::BlockSizes::parse(&text)
        .map_err(|e| UsageError(format!("wd={}: xfersize={value}: {e}", wd.name)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parameter_file_is_told_from_fio_and_toml() {
        assert!(looks_like_vdbench("* vdbench\nsd=sd1,lun=/tmp/x,size=1m\nwd=wd1,sd=sd1\nrd=rd1,wd=wd1\n"));
        assert!(!looks_like_vdbench("[global]\nrw=randread\n[job1]\nbs=4k\n"));
        assert!(!looks_like_vdbench("concurrent = true\n"));
    }

    #[test]
    fn lists_stay_whole_and_lines_go_on_after_a_comma() {
        assert_eq!(
            split_top("wd=w,xfersize=(4k,50,8k,50),rdpct=70"),
            ["wd=w", "xfersize=(4k,50,8k,50)", "rdpct=70"]
        );
        assert_eq!(logical_lines("sd=a,\n  lun=/x\nrd=r,wd=w"), ["sd=a,lun=/x", "rd=r,wd=w"]);
    }

    #[test]
    fn names_match_by_name_list_or_prefix() {
        let defs: Vec<Def> =
            ["sd1", "sd2", "log"].iter().map(|n| Def { name: n.to_string(), params: Vec::new() }).collect();
        let names = |p: &str| matching(&defs, p).iter().map(|d| d.name.clone()).collect::<Vec<_>>();
        assert_eq!(names("sd*"), ["sd1", "sd2"]);
        assert_eq!(names("(sd2,log)"), ["sd2", "log"]);
        assert_eq!(names("sd1"), ["sd1"]);
    }
}
