//! The machine and command behind a run, for the `host` object of every
//! JSON document (docs/json.md): when the command started, the host's
//! name, kernel, CPU and memory, and iolab's command line.
//!
//! Only this module asks the operating system for these facts: it reads
//! `/proc` (and `gethostname` when `/proc` cannot tell), so the report
//! crate stays free of the machine. The time and the arguments are taken
//! once, at the start of the binary's `main`, so a document says when its work began,
//! not when it was written; the rest is read when a document is built. A
//! fact that cannot be read is `None`, never a made-up value.

use std::ffi::OsString;
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

/// What `main` noted as the command began.
struct Start {
    at: SystemTime,
    argv: Vec<OsString>,
}

static START: OnceLock<Start> = OnceLock::new();

/// Notes the time and the arguments as given: called once, first thing in
/// `main`, before MPI starts or the arguments are parsed.
pub fn note_start(argv: &[OsString]) {
    let _ = START.set(Start { at: SystemTime::now(), argv: argv.to_vec() });
}

/// The `host` object for a document about to be written. Without
/// `note_start` (a unit test) the start and the command line are unknown.
pub fn wire() -> report::json::Host {
    let start = START.get();
    report::json::Host {
        started_at: start.and_then(|s| rfc3339(s.at)),
        hostname: read("/proc/sys/kernel/hostname").as_deref().and_then(one_line).or_else(gethostname),
        kernel: read("/proc/sys/kernel/osrelease").as_deref().and_then(one_line),
        cpu_model: read("/proc/cpuinfo").as_deref().and_then(cpu_model),
        cpus: std::thread::available_parallelism().ok().map(|n| n.get() as u64),
        memory_bytes: read("/proc/meminfo").as_deref().and_then(mem_total_bytes),
        command_line: start
            .map(|s| s.argv.iter().map(|a| a.to_string_lossy().into_owned()).collect())
            .unwrap_or_default(),
    }
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// A one-line `/proc` file (`hostname`, `osrelease`) without its newline;
/// `None` when empty.
fn one_line(text: &str) -> Option<String> {
    Some(text.trim()).filter(|t| !t.is_empty()).map(str::to_string)
}

/// The host's name from gethostname(2), for when `/proc` is not mounted.
fn gethostname() -> Option<String> {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is writable for its whole length; the name is
    // cut at the first NUL below (or at the end, if the kernel wrote none).
    if unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } != 0 {
        return None;
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    one_line(&String::from_utf8_lossy(&buf[..end]))
}

/// The first `model name` of `/proc/cpuinfo`; `None` where the kernel
/// names none (some ARM machines).
fn cpu_model(cpuinfo: &str) -> Option<String> {
    cpuinfo.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        (key.trim() == "model name").then(|| one_line(value)).flatten()
    })
}

/// `MemTotal` of `/proc/meminfo`, which the kernel gives in KiB, in bytes.
fn mem_total_bytes(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find_map(|l| l.strip_prefix("MemTotal:"))?;
    let mut words = line.split_whitespace();
    let kib: u64 = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") | None => kib.checked_mul(1024),
        Some(_) => None,
    }
}

/// `at` in RFC 3339, UTC, to the second: "2026-11-27T16:20:05Z". `None`
/// before 1970 (a clock that wrong is not worth printing).
fn rfc3339(at: SystemTime) -> Option<String> {
    let secs = at.duration_since(UNIX_EPOCH).ok()?.as_secs();
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(i64::try_from(days).ok()?);
    Some(format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rest / 3600, rest / 60 % 60, rest % 60))
}

/// The proleptic Gregorian date `days` after 1970-01-01: Howard Hinnant's
/// `civil_from_days`, which counts in 400-year eras of 146097 days
/// starting on March 1st, so the leap day falls at the end of a year.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // day of era, 0..=146096
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // year of era, 0..=399
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // day of year from March 1st, 0..=365
    let mp = (5 * doy + 2) / 153; // month from March, 0..=11
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn rfc3339_formats_the_epoch() {
        assert_eq!(rfc3339(at(0)).as_deref(), Some("1970-01-01T00:00:00Z"));
    }

    #[test]
    fn rfc3339_formats_a_leap_day() {
        // 2000-02-29 12:34:56 UTC: 11016 days after the epoch.
        assert_eq!(rfc3339(at(11_016 * 86_400 + 45_296)).as_deref(), Some("2000-02-29T12:34:56Z"));
    }

    #[test]
    fn rfc3339_formats_a_recent_date() {
        // 2026-11-27 16:20:05 UTC, as `date -u -d @1795796405` prints it.
        assert_eq!(rfc3339(at(1_795_796_405)).as_deref(), Some("2026-11-27T16:20:05Z"));
    }

    #[test]
    fn civil_from_days_rolls_over_the_year_and_the_century() {
        assert_eq!(civil_from_days(10_956), (1999, 12, 31));
        assert_eq!(civil_from_days(10_957), (2000, 1, 1));
        assert_eq!(civil_from_days(11_017), (2000, 3, 1));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
    }

    #[test]
    fn rfc3339_refuses_a_time_before_the_epoch() {
        assert_eq!(rfc3339(UNIX_EPOCH - Duration::from_secs(1)), None);
    }

    #[test]
    fn one_line_trims_the_newline_and_refuses_an_empty_file() {
        assert_eq!(one_line("6.8.0-49-generic\n").as_deref(), Some("6.8.0-49-generic"));
        assert_eq!(one_line("\n"), None);
    }

    #[test]
    fn cpu_model_is_the_first_model_name() {
        let cpuinfo = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel\t\t: 85\n\
                       model name\t: Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz\nstepping\t: 4\n\n\
                       processor\t: 1\nmodel name\t: Other\n";
        assert_eq!(cpu_model(cpuinfo).as_deref(), Some("Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz"));
    }

    #[test]
    fn cpu_model_is_none_without_a_model_name() {
        let cpuinfo = "processor\t: 0\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\nCPU part\t: 0xd0c\n";
        assert_eq!(cpu_model(cpuinfo), None);
    }

    #[test]
    fn mem_total_is_in_bytes() {
        let meminfo = "MemTotal:       16318412 kB\nMemFree:         1021312 kB\n";
        assert_eq!(mem_total_bytes(meminfo), Some(16_318_412 * 1024));
    }

    #[test]
    fn mem_total_is_none_when_missing_or_garbled() {
        assert_eq!(mem_total_bytes("MemFree: 1 kB\n"), None);
        assert_eq!(mem_total_bytes("MemTotal: lots kB\n"), None);
    }
}
