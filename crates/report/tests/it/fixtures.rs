//! Internal values with every variant the JSON documents carry: each enum
//! spelling, `null` beside a value, a field left out beside one written.
//! Fixed numbers, so a document built from them is the same bytes each
//! time and its golden file shows any change.

use blocklog::{LogStats, Mode};
use device::{Medium, MediumKind, StatsSnapshot};
use validation::{Finding, FindingKind};
use volume::{
    ObjectReport, Org, ParityLayout, PlexCountersSnapshot, PlexReport, State, SubdiskReport, VolumeReport,
};
use workloads::bonnie::{BonnieResult, BonnieSpec, PhaseResult, PHASES};
use workloads::crash::{CrashReport, Violation, ViolationClass};
use workloads::journal::{JournalMode, JournalStats};
use workloads::layout::{LayoutPolicy, LayoutReport};
use workloads::recover::{BadBlock, Verdict};
use workloads::validate::CheckedBy;
use workloads::{CpuUsage, Engine, JobResult, Latency, OpSummary, Rw, SecondSample, ValidationError};

/// A fixed machine and command line for the `host` object, so documents
/// built in tests are the same bytes on every machine.
pub fn host() -> report::json::Host {
    report::json::Host {
        started_at: Some("2026-11-27T16:20:05Z".into()),
        hostname: Some("lab1".into()),
        kernel: Some("6.8.0-49-generic".into()),
        cpu_model: Some("Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz".into()),
        cpus: Some(8),
        memory_bytes: Some(16_710_053_888),
        command_line: ["iolab", "run", "--target", "mem:16m", "--json", "r.json"].map(String::from).to_vec(),
    }
}

pub fn stats(seed: u64) -> StatsSnapshot {
    StatsSnapshot {
        reads: seed,
        writes: seed + 1,
        bytes_read: seed * 4096,
        bytes_written: (seed + 1) * 4096,
        flushes: seed % 3,
        errors: seed % 2,
    }
}

fn op(ios: u64) -> OpSummary {
    if ios == 0 {
        return OpSummary::default();
    }
    let us = ios as f64 / 8.0;
    OpSummary {
        ios,
        bytes: ios * 4096,
        iops: ios as f64 * 2.5,
        mib_per_s: ios as f64 / 100.0,
        latency: Latency {
            min_us: us,
            mean_us: us * 2.0,
            p50_us: us * 1.5,
            p90_us: us * 3.0,
            p99_us: us * 5.0,
            p999_us: us * 9.0,
            max_us: us * 20.0,
        },
    }
}

/// Every kind of finding, a lost write with and without an older run's id.
pub fn findings(address: u64) -> Vec<Finding> {
    let kinds = [
        FindingKind::LostWrite { expected_key: 3, found_key: 2, found_run_id: None },
        FindingKind::LostWrite { expected_key: 3, found_key: 9, found_run_id: Some(77) },
        FindingKind::Ahead { expected_key: 4, found_key: 5 },
        FindingKind::Misdirected { found_address: 8192 },
        FindingKind::ForeignRun { found_run_id: 1234 },
        FindingKind::Corrupt { reason: "checksum mismatch" },
        FindingKind::UnexpectedZeros,
    ];
    kinds
        .into_iter()
        .enumerate()
        .map(|(i, kind)| Finding { address: address + 512 * i as u64, kind })
        .collect()
}

fn error(checked_by: CheckedBy, class: &'static str, offset: u64, findings: Vec<Finding>) -> ValidationError {
    ValidationError { block_offset: offset, block_bytes: 4096, expected_key: 3, checked_by, class, findings }
}

/// Errors found by each kind of read; `journal` as given.
pub fn validation(journal: Option<JournalStats>) -> workloads::ValidationSummary {
    workloads::ValidationSummary {
        key_block_bytes: 4096,
        blocks_written: 250,
        blocks_checked: 240,
        blocks_verified: Some(200),
        errors: 4,
        error_list: vec![
            error(CheckedBy::Read, "lost_write", 0, findings(0)),
            error(CheckedBy::Preread, "misdirected", 4096, findings(4096)[3..4].to_vec()),
            error(CheckedBy::Reread, "torn", 8192, Vec::new()),
            error(CheckedBy::Verify, "unexpected_zeros", 12288, Vec::new()),
        ],
        journal,
    }
}

pub fn journal_stats(seed: u64) -> JournalStats {
    JournalStats {
        records: seed * 2,
        writes: seed,
        commits: seed - 1,
        ring_commits: seed / 2,
        target_flushes: seed / 3,
        compactions: 1,
        waits: seed / 4,
        wait_us: seed * 10,
    }
}

fn histogram() -> hdrhistogram::Histogram<u64> {
    hdrhistogram::Histogram::new_with_bounds(1, 3_600_000_000_000, 3).unwrap()
}

/// One run of `rw` on `engine`: numbers derived from `ios`.
pub fn job_result(
    rw: Rw,
    engine: Engine,
    ios: u64,
    validation: Option<workloads::ValidationSummary>,
) -> JobResult {
    let read_pct = rw.default_read_pct();
    let reads = ios * u64::from(read_pct) / 100;
    // Latencies 100 us, 200 us, ... for reads; twice that for writes.
    let mut latency = [histogram(), histogram()];
    let mut second: [workloads::LatBuckets; 3] = Default::default();
    for (dir, n) in [(0usize, reads), (1, ios - reads)] {
        for i in 0..n {
            let ns = (i % 10 + 1) * 100_000 * (dir as u64 + 1);
            latency[dir].record(ns).unwrap();
            second[dir].record(ns);
        }
    }
    JobResult {
        name: format!("{rw}-job"),
        target: "target.img".into(),
        engine,
        threads: 2,
        iodepth: 4,
        rw,
        read_pct,
        bs: "4k/10:64k/90".into(),
        skip_bytes: 0,
        rate_iops: 0,
        region_offset_bytes: 1 << 20,
        region_bytes: 16 << 20,
        seed: 42,
        pattern: "random".into(),
        dedupe: None,
        elapsed_s: 1.25,
        read: op(reads),
        write: op(ios - reads),
        trim: op(0),
        flushes: 3,
        cpu: CpuUsage { user_s: 0.5, system_s: 0.25, pct: 60.0 },
        per_second: vec![
            SecondSample {
                read_ios: reads,
                write_ios: ios - reads,
                read_bytes: reads * 4096,
                write_bytes: 0,
                ..SecondSample::default()
            },
            SecondSample::default(),
        ],
        per_second_latency: vec![second, Default::default()],
        latency,
        trim_latency: histogram(),
        device: stats(ios),
        validation,
        reads_from_unwritten: rw == Rw::RandRead,
        modeled: None,
        replay: None,
    }
}

/// A medium of each kind.
pub fn media() -> Vec<Medium> {
    let medium = |name: &str, kind, direct, filesystem: Option<&str>, cached_bytes| Medium {
        name: name.into(),
        kind,
        direct,
        filesystem: filesystem.map(str::to_string),
        memory_backed: kind == MediumKind::Memory || filesystem == Some("tmpfs"),
        cached_bytes,
    };
    vec![
        medium("/data/a.img", MediumKind::File, true, Some("ext4"), None),
        medium("/tmp/b.img", MediumKind::File, false, Some("tmpfs"), Some(8192)),
        medium("/dev/sdz", MediumKind::BlockDevice, false, None, Some(0)),
        medium("mem:16m", MediumKind::Memory, false, None, None),
        medium("null:1g", MediumKind::Null, false, None, None),
    ]
}

pub fn layout_report(unwritten_bytes: u64, laid_out_bytes: u64) -> LayoutReport {
    LayoutReport { known: true, unwritten_bytes, laid_out_bytes, seconds: 0.5 }
}

pub fn layout_state(policy: LayoutPolicy, report: LayoutReport) -> report::LayoutState {
    report::LayoutState { policy, wanted: policy != LayoutPolicy::Never, zeros: true, reads: true, report }
}

fn subdisk(name: &str, drive: &str, state: State, seed: u64) -> SubdiskReport {
    SubdiskReport {
        name: name.into(),
        drive: drive.into(),
        state,
        drive_offset_bytes: 135_168,
        plex_offset_bytes: seed << 20,
        length_bytes: 1 << 20,
        revived_bytes: if state == State::Up { 0 } else { 4096 },
        stats: stats(seed),
    }
}

fn plex(name: &str, org: Org, state: State, sd_states: [State; 2]) -> PlexReport {
    PlexReport {
        name: name.into(),
        org,
        state,
        size_bytes: 2 << 20,
        revived_bytes: 512,
        counters: PlexCountersSnapshot {
            reads: 1,
            writes: 2,
            bytes_read: 3,
            bytes_written: 4,
            multiblock: 5,
            multistripe: 6,
            recovered_reads: 7,
            degraded_writes: 8,
            parityless_writes: 9,
        },
        subdisks: vec![
            subdisk(&format!("{name}.s0"), "a", sd_states[0], 1),
            subdisk(&format!("{name}.s1"), "b", sd_states[1], 2),
        ],
    }
}

/// A volume with a plex of each organisation, objects in each state and
/// a missing drive.
pub fn volume_report() -> VolumeReport {
    let drive = |name: &str, state, missing| ObjectReport {
        name: name.into(),
        device: format!("/dev/{name}"),
        state,
        missing,
        stats: stats(5),
    };
    VolumeReport {
        name: "vol".into(),
        size_bytes: 2 << 20,
        stats: stats(9),
        recovered_reads: 2,
        plexes: vec![
            plex("vol.p0", Org::Concat, State::Up, [State::Up, State::Up]),
            plex("vol.p1", Org::Striped { stripe_bytes: 65536 }, State::Down, [State::Up, State::Stale]),
            plex(
                "vol.p2",
                Org::Raid5 { stripe_bytes: 524_288, layout: ParityLayout::LeftAsymmetric },
                State::Initializing,
                [State::Down, State::Up],
            ),
            plex(
                "vol.p3",
                Org::Raid5 { stripe_bytes: 16384, layout: ParityLayout::LeftSymmetric },
                State::Stale,
                [State::Initializing, State::Up],
            ),
        ],
        drives: vec![drive("a", State::Up, false), drive("b", State::Down, true)],
    }
}

pub fn log_stats() -> LogStats {
    LogStats {
        transactions: 200,
        commits: 20,
        forced_commits: 1,
        sectors_logged: 1600,
        log_bytes_written: 851_968,
        checkpoints: 2,
        revocations: 3,
        replays: 1,
        sectors_replayed: 16,
    }
}

fn target(
    media: Vec<Medium>,
    cache: report::CacheState,
    layout: report::LayoutState,
) -> report::TargetReport {
    report::TargetReport {
        name: media[0].name.clone(),
        media,
        cache,
        layout,
        warnings: vec!["a warning".into(), "another".into()],
    }
}

/// Jobs covering every field: a volume job with its log, validation with
/// and without a journal, each access pattern and engine, each cache
/// state, layout policy and log mode, a job without runs.
pub fn job_reports() -> Vec<report::JobReport> {
    use report::CacheState;
    let all_media = media();
    let volume_runs = vec![
        job_result(Rw::Read, Engine::Sync, 100, Some(validation(Some(journal_stats(40))))),
        job_result(Rw::Write, Engine::Uring, 80, None),
        job_result(Rw::RandRead, Engine::Sync, 60, None),
    ];
    let mem_runs = vec![
        job_result(Rw::RandWrite, Engine::Uring, 50, Some(validation(None))),
        job_result(Rw::Rw, Engine::Sync, 40, None),
        job_result(Rw::RandRw, Engine::Sync, 30, None),
    ];
    let log = |mode| Some(report::LogReport { mode, counters: log_stats() });
    vec![
        report::JobReport {
            name: "volume".into(),
            target: target(
                all_media[..3].to_vec(),
                CacheState::Dropped,
                layout_state(LayoutPolicy::Auto, layout_report(1 << 20, 1 << 20)),
            ),
            summary: report::summarize(&volume_runs),
            runs: volume_runs,
            volume: Some(volume_report()),
            log: log(Mode::Log),
        },
        report::JobReport {
            name: "mem".into(),
            target: target(
                all_media[3..].to_vec(),
                CacheState::None,
                layout_state(LayoutPolicy::Never, layout_report(4096, 0)),
            ),
            summary: report::summarize(&mem_runs),
            runs: mem_runs,
            volume: None,
            log: None,
        },
        report::JobReport {
            name: "direct".into(),
            target: target(
                all_media[..1].to_vec(),
                CacheState::Direct,
                layout_state(LayoutPolicy::Always, LayoutReport::default()),
            ),
            summary: None,
            runs: Vec::new(),
            volume: None,
            log: log(Mode::Async),
        },
        report::JobReport {
            name: "kept".into(),
            target: target(
                all_media[1..2].to_vec(),
                CacheState::Kept,
                layout_state(LayoutPolicy::Auto, layout_report(0, 0)),
            ),
            summary: None,
            runs: Vec::new(),
            volume: None,
            log: log(Mode::Sync),
        },
    ]
}

fn bad_block(offset: u64, finding: Finding) -> BadBlock {
    let class = match finding.kind {
        FindingKind::LostWrite { .. } => "lost_write",
        FindingKind::Ahead { .. } => "ahead",
        FindingKind::Misdirected { .. } => "misdirected",
        FindingKind::ForeignRun { .. } => "foreign_run",
        FindingKind::Corrupt { .. } => "corrupt",
        FindingKind::UnexpectedZeros => "unexpected_zeros",
        FindingKind::Unverifiable { .. } => "unverifiable",
    };
    BadBlock {
        offset,
        class,
        new_sectors: None,
        old_sectors: None,
        first_sector: Some(finding.address / 512),
        first: Some(finding),
        bad_sectors: Some(3),
    }
}

/// A verdict with a torn block, a bad block of each class and blocks
/// ahead of the journal, in `mode`; `clean` leaves the lists empty.
pub fn verdict(mode: Option<JournalMode>, clean: bool, ahead: u64) -> Verdict {
    let torn = BadBlock {
        offset: 0,
        class: "torn",
        new_sectors: Some(3),
        old_sectors: Some(5),
        first: None,
        first_sector: None,
        bad_sectors: None,
    };
    let mut bad = vec![torn];
    bad.extend(
        findings(4096)
            .into_iter()
            .filter(|f| !matches!(f.kind, FindingKind::Ahead { .. }))
            .enumerate()
            .map(|(i, f)| bad_block(4096 * (i as u64 + 1), f)),
    );
    let ahead_blocks: Vec<BadBlock> =
        (0..ahead.min(2)).map(|i| bad_block(65536 + 4096 * i, findings(65536 + 4096 * i)[2])).collect();
    let bad = if clean { Vec::new() } else { bad };
    Verdict {
        verified: 1000,
        pending_old: 2,
        pending_new: 3,
        torn: u64::from(!clean),
        torn_ok: clean,
        lost: 2 * u64::from(!clean),
        misdirected: u64::from(!clean),
        corrupt: u64::from(!clean),
        zeros: u64::from(!clean),
        foreign: u64::from(!clean),
        ahead,
        bad,
        ahead_blocks,
        sector_bytes: 512,
        records: 4000,
        journal_torn_at: (mode == Some(JournalMode::Async)).then_some(123_456),
        journal_mode: mode,
        journal_target: "/data/t.img".into(),
        journal_generation: 2,
        ..Verdict::default()
    }
}

/// A clean verdict on a journal damaged in two places (records, then the
/// header of a newer start), with unverifiable blocks.
pub fn damaged_verdict() -> Verdict {
    use workloads::recover::{Damage, DamageKind};
    let unverifiable =
        Finding { address: 8192, kind: FindingKind::Unverifiable { expected_key: 3, found_key: 4 } };
    Verdict {
        unverifiable: 12,
        unverifiable_blocks: vec![bad_block(8192, unverifiable)],
        journal_damage: vec![
            Damage { at: 120_467, bytes: 33, kind: DamageKind::Records },
            Damage { at: 4_194_304, bytes: 4096, kind: DamageKind::NewerStart },
        ],
        journal_damaged_ranges: 2,
        lost_write_ids: Some((3705, 3707)),
        every_block: true,
        ..verdict(Some(JournalMode::Group), true, 0)
    }
}

/// A crash report whose first violation is of `class`, or none.
pub fn crash_report(class: Option<ViolationClass>) -> CrashReport {
    CrashReport {
        transactions: 200,
        events: 900,
        writes: 700,
        flushes: 51,
        states_checked: 2051,
        flush_states: 51,
        sampled_states: 2000,
        violations: u64::from(class.is_some()) * 7,
        open_failed: 1,
        corrupt: 2,
        lost: 3,
        torn_writes: 4,
        torn_transactions: 5,
        first_violation: class.map(|class| Violation {
            state: 17,
            after_events: 120,
            policy: "prefix-12".into(),
            seed: u64::MAX,
            class,
            detail: "block 3 holds transaction 9's data, view: drive d1 failed after the crash".into(),
        }),
    }
}

/// A bonnie run whose figures derive from `seed`; the first phase too
/// short to measure.
pub fn bonnie_result(seed: u64) -> BonnieResult {
    let phases = PHASES
        .iter()
        .enumerate()
        .map(|(i, &name)| PhaseResult {
            name,
            amount: 8 << 20,
            elapsed_s: 0.25 * (i + 1) as f64,
            cpu_s: 0.125,
            rate: (seed * 1000 + i as u64) as f64 + 0.5,
            cpu_pct: 12.5 + seed as f64,
            too_short: i == 0,
            latency_max_us: 250.0 * (i + 1) as f64,
            device_reads: seed + i as u64,
            device_writes: seed * 2 + i as u64,
        })
        .collect();
    BonnieResult {
        target: "mem:8m".into(),
        spec: BonnieSpec { size_bytes: 8 << 20, seeks: 64, ..BonnieSpec::default() },
        phases,
        files: None,
    }
}

/// bonnie++'s file tests whose figures derive from `seed`; the stat
/// phases too short to measure.
pub fn file_tests(seed: u64) -> workloads::tree::FileTests {
    let spec = workloads::tree::FileTestSpec { files: 2048, max_bytes: 4096, min_bytes: 512, dirs: 4, seed };
    let phases = workloads::tree::FILE_PHASES
        .iter()
        .enumerate()
        .map(|(i, &name)| workloads::tree::FilePhase {
            name,
            files: 2048,
            elapsed_s: 0.75 + i as f64,
            cpu_s: 0.5,
            rate: (seed * 2000 + i as u64) as f64,
            cpu_pct: 50.0 + seed as f64,
            too_short: name.ends_with("stat"),
            latency_max_us: 100.0 * (i + 1) as f64,
        })
        .collect();
    workloads::tree::FileTests { spec, phases }
}

fn phase(seconds: f64, sync_writes: Option<u64>, log_bytes: Option<u64>) -> report::PhaseRun {
    report::PhaseRun {
        seconds,
        blocks_written: 4700,
        write_requests: 150,
        sync_writes,
        flushes: 3,
        log_bytes,
    }
}

/// A policies sweep: three of iolab's policies and a kernel column.
pub fn policies_sweep() -> report::PoliciesSweep {
    let runs = |name: &str, tar: f64, rm: f64, sync_writes: Option<u64>, log_bytes: Option<u64>| {
        report::ColumnRuns {
            name: name.into(),
            how: format!("how {name} ran"),
            tar: vec![phase(tar, sync_writes, log_bytes), phase(tar * 1.1, sync_writes, log_bytes)],
            rm: vec![phase(rm, sync_writes, log_bytes)],
        }
    };
    report::PoliciesSweep {
        archive: "glibc-2.36.tar.xz".into(),
        entries: 21116,
        data_bytes: 235_600_000,
        copies: 10,
        repeats: 2,
        target: "fs.img (file on ext4, buffered), a new file system of 8.0 GiB per run".into(),
        modeled: None,
        columns: vec![
            runs("sync", 80.0, 60.0, Some(439_450), Some(0)),
            runs("log", 9.5, 3.2, Some(0), Some(17_900_000)),
            runs("async", 8.0, 3.0, Some(0), Some(0)),
            runs("ext4-nojournal", 9.0, 2.5, None, None),
        ],
    }
}
