//! A replayed trace reaches the device as traced: every read and write at
//! its offset and size, in order, and a flush after each request the
//! trace syncs after; the engines stop when the trace ends.

use std::sync::Arc;

use device::{Device, Event, FileDevice, FileOptions, MemDevice, Recording, RecordingDevice};
use workloads::replay::Trace;
use workloads::{run_job, BlockSizes, Engine, JobSpec, Progress, ReplaySpec};

const TRACE: &str = "fio version 3 iolog\n0 t add\n1 t open\n10 t write 8192 4096\n20 t write 0 8192\n\
                     21 t sync 0 0\n30 t read 4096 512\n40 t write 65536 4096\n41 t datasync 0 0\n\
                     50 t read 0 4096\n60 t close\n";

fn replay_job(engine: Engine, iodepth: u32) -> JobSpec {
    let trace = Trace::parse(TRACE).unwrap();
    JobSpec {
        name: "replay".into(),
        size_bytes: Some(trace.extent()),
        bs: BlockSizes::Fixed(trace.largest()),
        align_bytes: Some(trace.alignment()),
        engine,
        iodepth,
        replay: Some(ReplaySpec { source: "t".into(), trace: Arc::new(trace), speed: None }),
        ..JobSpec::default()
    }
}

/// The writes and flushes the device saw, in order ("w OFFSET LEN", "f").
fn recorded(engine: Engine, iodepth: u32) -> (Vec<String>, workloads::JobResult) {
    let recording = Recording::new();
    let mem: Arc<dyn Device> = Arc::new(MemDevice::new(1 << 20).unwrap());
    let dev: Arc<dyn Device> = Arc::new(RecordingDevice::new(mem, 0, Arc::clone(&recording)));
    let result = run_job(&replay_job(engine, iodepth), Arc::clone(&dev), &Progress::default()).unwrap();
    let seen = recording
        .events()
        .iter()
        .filter_map(|e| match e {
            Event::Write { offset, data, .. } => Some(format!("w {offset} {}", data.len())),
            Event::Flush { .. } => Some("f".into()),
            Event::Mark(_) => None,
        })
        .collect();
    (seen, result)
}

#[test]
fn a_replay_writes_and_flushes_as_the_trace_says_in_its_order() {
    let (seen, _) = recorded(Engine::Sync, 1);
    assert_eq!(seen, ["w 8192 4096", "w 0 8192", "f", "w 65536 4096", "f"]);
}

#[test]
fn a_replay_counts_the_traces_reads_writes_and_syncs() {
    let (_, result) = recorded(Engine::Sync, 1);
    assert_eq!((result.read.ios, result.write.ios, result.flushes), (2, 3, 2));
    assert_eq!((result.read.bytes, result.write.bytes), (512 + 4096, 4096 + 8192 + 4096));
}

#[test]
fn a_replay_through_io_uring_issues_every_request_and_sync() {
    if !workloads::uring_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let options = FileOptions { create_bytes: Some(1 << 20), ..Default::default() };
    let dev: Arc<dyn Device> = Arc::new(FileDevice::open(dir.path().join("t"), &options).unwrap());
    let result = run_job(&replay_job(Engine::Uring, 4), Arc::clone(&dev), &Progress::default()).unwrap();
    assert_eq!((result.read.ios, result.write.ios, result.flushes), (2, 3, 2));
    let s = dev.stats().snapshot();
    assert_eq!((s.reads, s.writes), (2, 3));
}

#[test]
fn a_validated_replay_checks_the_traces_reads_and_finds_a_lost_write() {
    let validate = workloads::ValidateSpec {
        preread: true,
        reread: false,
        verify: true,
        max_errors: 10,
        run_id: 7,
        journal: None,
        key_map: workloads::KeyMapSpec::AUTO,
    };
    let job = JobSpec { validate: Some(validate), ..replay_job(Engine::Sync, 1) };
    let clean: Arc<dyn Device> = Arc::new(MemDevice::new(1 << 20).unwrap());
    let summary = run_job(&job, clean, &Progress::default()).unwrap().validation.unwrap();
    assert_eq!(summary.errors, 0, "{:?}", summary.error_list);
    assert!(summary.blocks_checked > 0);
    // The trace's second write (0, 8192) never lands: its read of 4096
    // finds the block as it was.
    let mem: Arc<dyn Device> = Arc::new(MemDevice::new(1 << 20).unwrap());
    let lossy: Arc<dyn Device> =
        Arc::new(device::FaultyDevice::new(mem, vec![device::Fault::LoseWrite { n: 2 }]));
    let summary = run_job(&job, lossy, &Progress::default()).unwrap().validation.unwrap();
    assert!(summary.errors > 0, "the lost write went unseen: {summary:?}");
}
