//! `iolab run --replay`: fio's I/O logs replayed, one written by fio itself
//! (`--write_iolog`; CI installs fio), and the refusals.

use std::path::Path;
use std::process::Command;

use crate::cli::{iolab, stderr};

/// A trace fio writes of a short random mixed job with an fsync every 5
/// writes, on a file in `dir`; its path.
fn fio_trace(dir: &Path) -> std::path::PathBuf {
    let file = format!("--filename={}", dir.join("fio.img").display());
    fio_writes_trace(dir, "trace.log", &["--size=1m", "--rw=randrw", "--number_ios=300", "--fsync=5", &file])
}

/// The trace `name` in `dir` fio writes of a 4 KiB job with `args`.
fn fio_writes_trace(dir: &Path, name: &str, args: &[&str]) -> std::path::PathBuf {
    let trace = dir.join(name);
    let status = Command::new("fio")
        .args(["--name=t", "--bs=4k"])
        .args(args)
        .arg(format!("--write_iolog={}", trace.display()))
        .stdout(std::process::Stdio::null())
        .status()
        .expect("fio is installed (apt-get install fio)");
    assert!(status.success());
    trace
}

/// (reads, writes, syncs, bytes read, bytes written) in a trace's lines.
fn counted(trace: &Path) -> (u64, u64, u64, u64, u64) {
    let text = std::fs::read_to_string(trace).unwrap();
    let mut c = (0, 0, 0, 0, 0);
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        match f.get(2).copied() {
            Some("read") => (c.0, c.3) = (c.0 + 1, c.3 + f[4].parse::<u64>().unwrap()),
            Some("write") => (c.1, c.4) = (c.1 + 1, c.4 + f[4].parse::<u64>().unwrap()),
            Some("sync" | "datasync") => c.2 += 1,
            _ => {}
        }
    }
    c
}

/// `iolab run --replay TRACE --target TARGET EXTRA...`.
fn replay(trace: &Path, target: &str, extra: &[&str]) -> std::process::Output {
    iolab(&[&["run", "--replay", trace.to_str().unwrap(), "--target", target][..], extra].concat())
}

/// A trace file of `text` in `dir`.
fn trace_file(dir: &Path, text: &str) -> std::path::PathBuf {
    let trace = dir.join("t.log");
    std::fs::write(&trace, text).unwrap();
    trace
}

fn json_run(out: &std::process::Output) -> serde_json::Value {
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    doc["jobs"][0]["runs"][0].clone()
}

#[test]
fn a_trace_fio_wrote_replays_with_its_requests_sizes_and_syncs() {
    let dir = tempfile::tempdir().unwrap();
    let trace = fio_trace(dir.path());
    let (reads, writes, syncs, read_bytes, write_bytes) = counted(&trace);
    assert!(reads > 0 && writes > 0 && syncs > 0, "fio's trace: {reads} {writes} {syncs}");
    let target = dir.path().join("replayed.img");
    let out = replay(&trace, target.to_str().unwrap(), &["--replay-speed", "max", "--json", "-", "-q"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let run = json_run(&out);
    assert_eq!(run["read"]["ios"], reads);
    assert_eq!(run["write"]["ios"], writes);
    assert_eq!(run["read"]["bytes"], read_bytes);
    assert_eq!(run["write"]["bytes"], write_bytes);
    assert_eq!(run["flushes"], syncs);
    assert_eq!(run["replay"]["requests"], reads + writes);
}

#[test]
fn a_fio_job_file_with_read_iolog_replays_the_trace() {
    let dir = tempfile::tempdir().unwrap();
    let trace = fio_trace(dir.path());
    let (reads, writes, ..) = counted(&trace);
    let job = dir.path().join("replay.fio");
    let target = dir.path().join("replayed.img");
    std::fs::write(
        &job,
        format!(
            "[replay]\nread_iolog={}\nfilename={}\nreplay_no_stall=1\n",
            trace.display(),
            target.display()
        ),
    )
    .unwrap();
    let out = iolab(&["run", job.to_str().unwrap(), "--json", "-", "-q"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let run = json_run(&out);
    assert_eq!(run["replay"]["requests"], reads + writes);
    assert!(run["replay"]["speed"].is_null(), "replay_no_stall: {run}");
}

#[test]
fn a_fio_job_files_replay_redirect_is_the_target() {
    let dir = tempfile::tempdir().unwrap();
    let trace = trace_file(dir.path(), "fio version 3 iolog\n1 /dev/sdz write 0 4096\n");
    let job = dir.path().join("replay.fio");
    let target = dir.path().join("redirected.img");
    let text = format!("[r]\nread_iolog={}\nreplay_redirect={}\n", trace.display(), target.display());
    std::fs::write(&job, text).unwrap();
    let out = iolab(&["run", job.to_str().unwrap(), "--json", "-", "-q"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(json_run(&out)["write"]["ios"], 1);
    assert_eq!(std::fs::metadata(&target).unwrap().len(), 4096);
}

#[test]
fn a_flag_that_shapes_requests_is_refused_beside_a_replay() {
    let dir = tempfile::tempdir().unwrap();
    let trace = trace_file(dir.path(), "fio version 2 iolog\nf write 0 4096\n");
    let out = replay(&trace, "mem:1m", &["--rw", "randread"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--rw: does not apply with --replay"), "{}", stderr(&out));
}

#[test]
fn a_size_short_of_the_traces_reach_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let trace = trace_file(dir.path(), "fio version 2 iolog\nf write 1048576 4096\n");
    let target = dir.path().join("t.img");
    let out = replay(&trace, target.to_str().unwrap(), &["--size", "1m"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("the trace reaches 1052672"), "{}", stderr(&out));
    assert!(!target.exists(), "nothing is made when the run is refused");
}

#[test]
fn a_file_that_is_not_an_iolog_is_refused_naming_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let trace = trace_file(dir.path(), "fio version 3 iolog\n10 f write 0 4096\n20 f write zero 4096\n");
    let out = replay(&trace, "mem:1m", &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("line 3: 'zero' is not an offset"), "{}", stderr(&out));
}

#[test]
fn replay_speed_without_a_replay_is_refused() {
    let out = iolab(&["run", "--target", "mem:1m", "--replay-speed", "2"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--replay-speed: only applies with --replay"), "{}", stderr(&out));
}

#[test]
fn the_heading_names_the_trace_its_requests_and_its_pace() {
    let dir = tempfile::tempdir().unwrap();
    let trace =
        trace_file(dir.path(), "fio version 3 iolog\n5 f write 0 4096\n6 f sync 0 0\n9 f read 0 4096\n");
    let out = replay(&trace, "mem:1m", &["--replay-speed", "4", "-q"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = crate::cli::stdout(&out);
    assert!(
        text.contains("replay of")
            && text.contains("(fio iolog v3: 2 requests, 1 sync) at 4x the traced pace"),
        "{text}"
    );
}

/// A trace fio writes of a job over two files (`nrfiles=2`), each 1 MiB.
fn fio_two_file_trace(dir: &Path) -> std::path::PathBuf {
    let directory = format!("--directory={}", dir.display());
    fio_writes_trace(
        dir,
        "two.log",
        &["--size=2m", "--nrfiles=2", "--rw=randwrite", "--number_ios=200", &directory],
    )
}

#[test]
fn the_files_of_a_trace_fio_wrote_are_laid_end_to_end_on_the_target() {
    let dir = tempfile::tempdir().unwrap();
    let trace = fio_two_file_trace(dir.path());
    let target = dir.path().join("replayed.img");
    let out = replay(&trace, target.to_str().unwrap(), &["--replay-speed", "max", "--json", "-", "-q"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let files = json_run(&out)["replay"]["files"].clone();
    let offsets: Vec<u64> =
        files.as_array().unwrap().iter().map(|f| f["offset_bytes"].as_u64().unwrap()).collect();
    assert_eq!(offsets, [0, 1 << 20], "{files}");
    assert!(files[1]["name"].as_str().unwrap().ends_with("t.0.1"), "{files}");
    // The second file's writes landed in the second MiB, not on the first's.
    let image = std::fs::read(&target).unwrap();
    assert_eq!(image.len(), 2 << 20);
    assert!(image[1 << 20..].chunks(4096).any(|b| b.iter().any(|&x| x != 0)), "nothing in the second MiB");
}

#[test]
fn two_files_in_an_iolog_never_land_on_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let text = "fio version 3 iolog\n1 a write 0 4096\n2 b write 0 4096\n3 a write 1572864 4096\n";
    let trace = trace_file(dir.path(), text);
    let target = dir.path().join("t.img");
    let recorded = dir.path().join("again.log");
    let out = replay(
        &trace,
        target.to_str().unwrap(),
        &["--replay-speed", "max", "--write-iolog", recorded.to_str().unwrap(), "-q"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let offsets: Vec<String> = std::fs::read_to_string(&recorded)
        .unwrap()
        .lines()
        .filter(|l| l.contains(" write "))
        .map(|l| l.split_whitespace().nth(3).unwrap().to_string())
        .collect();
    // a reaches 1.5 MiB, so b begins at 2 MiB.
    assert_eq!(offsets, ["0", "2097152", "1572864"]);
    let heading =
        iolab(&["run", "--replay", trace.to_str().unwrap(), "--target", "mem:4m", "--replay-speed", "max"]);
    assert!(
        crate::cli::stdout(&heading).contains("2 files laid end to end"),
        "{}",
        crate::cli::stdout(&heading)
    );
}

/// (reads, writes, flushes, bytes read, bytes written) of a run's JSON.
fn figures(run: &serde_json::Value) -> [u64; 5] {
    let n = |v: &serde_json::Value| v.as_u64().unwrap();
    [
        n(&run["read"]["ios"]),
        n(&run["write"]["ios"]),
        n(&run["flushes"]),
        n(&run["read"]["bytes"]),
        n(&run["write"]["bytes"]),
    ]
}

#[test]
fn a_run_written_as_an_iolog_replays_as_the_same_requests() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("run.iolog");
    let run = ["run", "--target", "mem:8m", "--bs", "4k/50:16k/50", "--ios", "600", "--flush-every", "7"];
    let out = iolab(&[&run[..], &["--write-iolog", log.to_str().unwrap(), "--json", "-", "-q"]].concat());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let first = figures(&json_run(&out));
    let again = ["run", "--replay", log.to_str().unwrap(), "--target", "mem:8m", "--replay-speed", "max"];
    let out = iolab(&[&again[..], &["--json", "-", "-q"]].concat());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(figures(&json_run(&out)), first);
}

#[test]
fn fio_replays_the_iolog_a_run_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("run.iolog");
    let run = ["run", "--target", "mem:8m", "--ios", "400", "--flush-every", "10", "--json", "-", "-q"];
    let out = iolab(&[&run[..], &["--write-iolog", log.to_str().unwrap()]].concat());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let [reads, writes, flushes, ..] = figures(&json_run(&out));
    let file = dir.path().join("fio.img");
    std::fs::File::create(&file).unwrap().set_len(8 << 20).unwrap();
    let fio = Command::new("fio")
        .args(["--name=r", "--output-format=json", "--replay_no_stall=1"])
        .arg(format!("--read_iolog={}", log.display()))
        .arg(format!("--replay_redirect={}", file.display()))
        .output()
        .expect("fio is installed (apt-get install fio)");
    assert!(fio.status.success(), "{}", String::from_utf8_lossy(&fio.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&fio.stdout).unwrap();
    let job = &doc["jobs"][0];
    assert_eq!(job["read"]["total_ios"], reads, "{job}");
    assert_eq!(job["write"]["total_ios"], writes);
    assert_eq!(job["sync"]["total_ios"], flushes);
}

#[test]
fn an_iolog_in_a_missing_directory_is_refused_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("no/such/run.iolog");
    let out = iolab(&["run", "--target", "mem:1m", "--ios", "10", "--write-iolog", log.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--write-iolog:"), "{}", stderr(&out));
}

#[test]
fn each_thread_writes_an_iolog_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("run.iolog");
    let out = iolab(&[
        "run",
        "--target",
        "mem:8m",
        "--ios",
        "100",
        "--threads",
        "2",
        "-q",
        "--write-iolog",
        log.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let requests = |n: u32| {
        let text = std::fs::read_to_string(dir.path().join(format!("run.iolog.{n}"))).unwrap();
        text.lines().filter(|l| l.contains(" read ") || l.contains(" write ")).count()
    };
    assert_eq!(requests(0) + requests(1), 100);
    assert!(!log.exists());
}

#[test]
fn an_iolog_named_as_the_target_is_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("data.img");
    std::fs::write(&target, vec![7u8; 1 << 20]).unwrap();
    let out = iolab(&[
        "run",
        "--target",
        target.to_str().unwrap(),
        "--ios",
        "10",
        "--write-iolog",
        target.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("is the target of job"), "{}", stderr(&out));
    assert_eq!(std::fs::read(&target).unwrap(), vec![7u8; 1 << 20]);
}

#[test]
fn two_jobs_writing_one_iolog_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("two.toml");
    let log = dir.path().join("t.log");
    std::fs::write(
        &job,
        format!(
            "[global]\ntarget = \"mem:8m\"\nios = 10\nwrite-iolog = {:?}\n\n[[job]]\nname = \"a\"\n\n[[job]]\nname = \"b\"\n",
            log.to_str().unwrap()
        ),
    )
    .unwrap();
    let out = iolab(&["run", job.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("jobs 'a' and 'b' would both write their trace"), "{}", stderr(&out));
}

/// What blkparse (blktrace's own reader; CI installs blktrace) finds
/// queued in a capture: (reads, writes, flushes, bytes read, bytes
/// written), a flush counted after each request a preflush follows or a
/// FUA write ends, as a replay issues them.
fn blkparse_counts(capture: &Path) -> (u64, u64, u64, u64, u64) {
    let out = Command::new("blkparse")
        .args(["-q", "-i", "-", "-f", "%a %d %N\n"])
        .stdin(std::fs::File::open(capture).unwrap())
        .output()
        .expect("blkparse is installed (apt-get install blktrace)");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (mut c, mut flush_pending, mut any) = ((0, 0, 0, 0, 0), false, false);
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let [action, rwbs, bytes] = f[..] else { continue };
        if action != "Q" {
            continue;
        }
        // RWBS: F first is a preflush, F after the direction is FUA.
        let (preflush, rest) = rwbs.strip_prefix('F').map_or((false, rwbs), |r| (true, r));
        if preflush && any {
            flush_pending = true;
        }
        let bytes: u64 = bytes.parse().unwrap();
        let (dir, fua) = (rest.chars().next(), rest.get(1..2) == Some("F"));
        if bytes == 0 || !matches!(dir, Some('R' | 'W')) {
            continue;
        }
        c.2 += u64::from(std::mem::take(&mut flush_pending));
        match dir {
            Some('R') => (c.0, c.3) = (c.0 + 1, c.3 + bytes),
            _ => (c.1, c.4) = (c.1 + 1, c.4 + bytes),
        }
        flush_pending = fua;
        any = true;
    }
    c.2 += u64::from(flush_pending);
    c
}

/// Replays `capture` on a file in `dir` as fast as it goes: its JSON run.
fn replayed(capture: &Path, dir: &Path) -> serde_json::Value {
    let target = dir.join("replayed.img");
    let out = replay(capture, target.to_str().unwrap(), &["--replay-speed", "max", "--json", "-", "-q"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    json_run(&out)
}

#[test]
fn a_blktrace_capture_of_ext4_on_a_loop_device_replays_as_blkparse_reads_it() {
    // examples/ext4.blktrace: the kernel's blk tracer on a loop device
    // while ext4 was mounted on it, fio's docs copied in, a file written
    // and fsync'd and read back, and unmounted (bench/blkcapture.py).
    let capture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/ext4.blktrace");
    let (reads, writes, flushes, read_bytes, write_bytes) = blkparse_counts(&capture);
    assert!(reads > 0 && writes > 0 && flushes > 0, "blkparse: {reads} {writes} {flushes}");
    let dir = tempfile::tempdir().unwrap();
    let run = replayed(&capture, dir.path());
    assert_eq!(figures(&run), [reads, writes, flushes, read_bytes, write_bytes], "{run}");
    assert_eq!(
        (run["replay"]["format"].as_str(), run["replay"]["version"].as_u64()),
        (Some("blktrace"), Some(7))
    );
}

#[test]
fn a_fio_job_file_may_name_a_blktrace_capture_as_its_read_iolog() {
    let capture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/ext4.blktrace");
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("replay.fio");
    let target = dir.path().join("replayed.img");
    let text =
        format!("[r]\nread_iolog={}\nfilename={}\nreplay_no_stall=1\n", capture.display(), target.display());
    std::fs::write(&job, text).unwrap();
    let out = iolab(&["run", job.to_str().unwrap(), "--json", "-", "-q"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (reads, writes, ..) = blkparse_counts(&capture);
    assert_eq!(json_run(&out)["replay"]["requests"], reads + writes);
}

#[test]
fn a_damaged_blktrace_capture_is_refused_naming_the_record() {
    let capture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/ext4.blktrace");
    let mut bytes = std::fs::read(&capture).unwrap();
    // The second record's magic: after the first's 48 bytes and payload.
    let second = 48 + usize::from(u16::from_le_bytes([bytes[46], bytes[47]]));
    bytes[second + 1] ^= 0xff;
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("bad.blktrace");
    std::fs::write(&trace, bytes).unwrap();
    let out = replay(&trace, "mem:16m", &[]);
    assert_eq!(out.status.code(), Some(2));
    let text = stderr(&out);
    assert!(text.contains(&format!("record 2 (byte {second}): no blk_io_trace magic")), "{text}");
}

/// The kernel's `blk` tracer on a loop device, set up as
/// bench/blkcapture.py does and undone on drop (a panic included).
struct BlkTracer {
    loop_dev: String,
    pipe: std::fs::File,
    /// tracefs's tracer and buffer are the machine's: one capture at a time.
    _only: std::sync::MutexGuard<'static, ()>,
}

const TRACEFS: &str = "/sys/kernel/tracing";

static TRACING: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl BlkTracer {
    /// Traces a new loop device over `image`; `None` (a skip said on
    /// standard error) where there is no root, losetup or tracefs, unless
    /// IOLAB_REQUIRE_BLKTRACE is set (CI), where that fails the test.
    fn start(image: &Path) -> Option<BlkTracer> {
        use std::os::unix::fs::OpenOptionsExt;
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        if root && !Path::new(TRACEFS).join("trace_pipe").exists() {
            let _ = Command::new("mount").args(["-t", "tracefs", "nodev", TRACEFS]).status();
        }
        let tracer = Path::new(TRACEFS).join("available_tracers");
        let usable = root && std::fs::read_to_string(tracer).is_ok_and(|t| t.contains("blk"));
        if !usable {
            assert!(
                std::env::var_os("IOLAB_REQUIRE_BLKTRACE").is_none(),
                "IOLAB_REQUIRE_BLKTRACE is set but the blk tracer cannot be used here (root, tracefs)"
            );
            eprintln!("skipped: capturing a loop device needs root and the kernel's blk tracer in tracefs");
            return None;
        }
        let only = TRACING.lock().unwrap_or_else(|e| e.into_inner());
        let out = Command::new("losetup")
            .args(["-f", "--show", "--direct-io=on"])
            .arg(image)
            .output()
            .expect("losetup is installed");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let loop_dev = String::from_utf8(out.stdout).unwrap().trim().to_string();
        let name = loop_dev.trim_start_matches("/dev/");
        let set =
            |file: &str, value: &str| std::fs::write(file, value).unwrap_or_else(|e| panic!("{file}: {e}"));
        set(&format!("{TRACEFS}/tracing_on"), "0");
        set(&format!("{TRACEFS}/current_tracer"), "blk");
        set(&format!("/sys/block/{name}/trace/enable"), "1");
        set(&format!("{TRACEFS}/trace_options"), "bin");
        set(&format!("{TRACEFS}/trace_options"), "nocontext-info");
        set(&format!("{TRACEFS}/trace"), "");
        let pipe = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(format!("{TRACEFS}/trace_pipe"))
            .unwrap();
        set(&format!("{TRACEFS}/tracing_on"), "1");
        Some(BlkTracer { loop_dev, pipe, _only: only })
    }

    /// Stops tracing: every record the buffer holds.
    fn records(&mut self) -> Vec<u8> {
        use std::io::Read;
        let _ = std::fs::write(format!("{TRACEFS}/tracing_on"), "0");
        let mut out = Vec::new();
        let mut chunk = vec![0u8; 1 << 16];
        loop {
            match self.pipe.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => out.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("trace_pipe: {e}"),
            }
        }
        out
    }
}

impl Drop for BlkTracer {
    fn drop(&mut self) {
        let name = self.loop_dev.trim_start_matches("/dev/");
        let _ = std::fs::write(format!("{TRACEFS}/tracing_on"), "0");
        let _ = std::fs::write(format!("/sys/block/{name}/trace/enable"), "0");
        let _ = std::fs::write(format!("{TRACEFS}/trace_options"), "nobin");
        let _ = std::fs::write(format!("{TRACEFS}/trace_options"), "context-info");
        let _ = std::fs::write(format!("{TRACEFS}/current_tracer"), "nop");
        let _ = Command::new("losetup").args(["-d", &self.loop_dev]).status();
    }
}

#[test]
fn a_capture_of_a_loop_device_made_now_replays_as_blkparse_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("loop.img");
    std::fs::File::create(&image).unwrap().set_len(16 << 20).unwrap();
    let Some(mut tracer) = BlkTracer::start(&image) else { return };
    let run =
        ["run", "--target", &tracer.loop_dev, "--bs", "4k/50:64k/50", "--ios", "300", "--flush-every", "10"];
    let out = iolab(&[&run[..], &["--direct", "--json", "-", "-q"]].concat());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let [reads, writes, ..] = figures(&json_run(&out));
    let capture = dir.path().join("capture.blktrace");
    std::fs::write(&capture, tracer.records()).unwrap();
    drop(tracer);
    let traced = blkparse_counts(&capture);
    // What the run issued is there (the kernel may add its own reads:
    // udev probing a new loop device).
    assert!(traced.0 >= reads && traced.1 >= writes && traced.2 >= 1, "{traced:?} for {reads} {writes}");
    let replayed = figures(&replayed(&capture, dir.path()));
    assert_eq!(replayed, [traced.0, traced.1, traced.2, traced.3, traced.4]);
}

#[test]
fn a_validated_replay_through_io_uring_checks_its_blocks_and_flushes_once_for_each_sync() {
    let capture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/ext4.blktrace");
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("replayed.img");
    let flags =
        ["--replay-speed", "max", "--validate", "--engine", "uring", "--iodepth", "8", "--json", "-", "-q"];
    let out = replay(&capture, target.to_str().unwrap(), &flags);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let run = json_run(&out);
    let (reads, writes, flushes, read_bytes, write_bytes) = blkparse_counts(&capture);
    assert_eq!(figures(&run), [reads, writes, flushes, read_bytes, write_bytes], "{run}");
    let validation = &run["validation"];
    assert_eq!(validation["errors"], 0, "{validation}");
    assert!(validation["blocks_checked"].as_u64().unwrap() > 0, "{validation}");
}

/// fio 3.33 skips an iolog's trim lines when it replays one (its writes
/// replay, its trims do not), so only iolab's replay is checked here.
#[test]
fn trims_a_run_recorded_replay_as_trims() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("run.iolog");
    let run = ["run", "--target", "mem:8m", "--rw", "trimwrite", "--bs", "64k", "--ios", "40"];
    let out = iolab(&[&run[..], &["--write-iolog", log.to_str().unwrap(), "-q"]].concat());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let file = dir.path().join("replayed.img");
    std::fs::File::create(&file).unwrap().set_len(8 << 20).unwrap();
    let out = replay(&log, file.to_str().unwrap(), &["--replay-speed", "max", "--json", "-", "-q"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let run = json_run(&out);
    assert_eq!((run["trim"]["ios"].as_u64(), run["write"]["ios"].as_u64()), (Some(20), Some(20)), "{run}");
}

#[test]
fn discards_sent_to_a_loop_device_are_captured_and_replayed_as_trims() {
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("loop.img");
    let made = Command::new("fallocate").args(["-l", "16m"]).arg(&image).status().unwrap();
    assert!(made.success());
    let Some(mut tracer) = BlkTracer::start(&image) else { return };
    let run = ["run", "--target", &tracer.loop_dev, "--rw", "randtrim", "--bs", "64k", "--ios", "20", "-q"];
    let out = iolab(&run);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let capture = dir.path().join("capture.blktrace");
    std::fs::write(&capture, tracer.records()).unwrap();
    drop(tracer);
    // blkparse's RWBS starts with D for a discard.
    let parsed = Command::new("blkparse")
        .args(["-q", "-i", "-", "-f", "%a %d %N\n"])
        .stdin(std::fs::File::open(&capture).unwrap())
        .output()
        .expect("blkparse is installed (apt-get install blktrace)");
    let discards = String::from_utf8(parsed.stdout)
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("Q D") && !l.ends_with(" 0"))
        .count() as u64;
    assert_eq!(discards, 20, "the kernel saw the run's 20 discards");
    assert_eq!(replayed(&capture, dir.path())["trim"]["ios"].as_u64(), Some(discards));
}

#[test]
fn a_target_smaller_than_the_traces_reach_is_refused_naming_the_trace() {
    let dir = tempfile::tempdir().unwrap();
    let trace = trace_file(dir.path(), "fio version 2 iolog\nf write 1048576 4096\n");
    let target = dir.path().join("small.img");
    std::fs::File::create(&target).unwrap().set_len(1 << 20).unwrap();
    let out = replay(&trace, target.to_str().unwrap(), &[]);
    assert_eq!(out.status.code(), Some(2));
    let text = stderr(&out);
    assert!(text.contains("the trace reaches 1052672 bytes into the target, which has 1048576"), "{text}");
}

#[test]
fn a_sync_traced_after_a_trim_is_a_flush_on_every_engine() {
    let dir = tempfile::tempdir().unwrap();
    let text = "fio version 2 iolog\nf write 0 4096\nf trim 4096 4096\nf sync 0 0\nf write 8192 4096\n";
    let trace = trace_file(dir.path(), text);
    for engine in [&["--engine", "sync"][..], &["--engine", "uring", "--iodepth", "2"]] {
        let target = dir.path().join(format!("{}.img", engine[1]));
        let flags = [&["--replay-speed", "max", "--json", "-", "-q"][..], engine].concat();
        let out = replay(&trace, target.to_str().unwrap(), &flags);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(json_run(&out)["flushes"], 1, "{engine:?}");
    }
}
