//! The bonnie phases move exactly the bytes bonnie's do.

use device::{Device, MemDevice};
use workloads::bonnie::{run_bonnie, BonnieSpec, PHASES};

fn spec() -> BonnieSpec {
    BonnieSpec { size_bytes: 1 << 20, chunk_bytes: 8192, seeks: 400, seekers: 3, seed: 9 }
}

fn run() -> workloads::bonnie::BonnieResult {
    let dev = MemDevice::new(2 << 20).unwrap();
    run_bonnie(&dev, &spec()).unwrap()
}

#[test]
fn phases_come_in_bonnies_order() {
    let names: Vec<&str> = run().phases.iter().map(|p| p.name).collect();
    assert_eq!(names, PHASES);
}

#[test]
fn each_phase_sends_the_exact_requests() {
    let chunks = (1u64 << 20) / 8192;
    let io: Vec<(u64, u64)> = run().phases.iter().map(|p| (p.device_reads, p.device_writes)).collect();
    assert_eq!(io[..5], [(0, chunks), (0, chunks), (chunks, chunks), (chunks, 0), (chunks, 0)]);
}

#[test]
fn seeks_read_once_each_and_write_back_about_a_tenth() {
    let seeks = &run().phases[5];
    assert_eq!(seeks.device_reads, 400);
    assert!((10..=80).contains(&seeks.device_writes), "{} write-backs", seeks.device_writes);
}

#[test]
fn rates_count_bytes_per_phase() {
    let r = run();
    assert!(r.phases[..5].iter().all(|p| p.amount == 1 << 20));
    assert_eq!(r.phases[5].amount, 400);
}

#[test]
fn size_larger_than_the_target_is_refused() {
    let dev = MemDevice::new(1 << 20).unwrap();
    let err = run_bonnie(&dev, &BonnieSpec { size_bytes: 2 << 20, ..spec() }).unwrap_err();
    assert!(err.to_string().starts_with("--size:"), "{err}");
    assert_eq!(dev.stats().snapshot().writes, 0);
}

#[test]
fn each_phase_is_told_as_it_begins_in_order() {
    let dev = MemDevice::new(1 << 20).unwrap();
    let told = std::sync::Mutex::new(Vec::new());
    let tell = |k, done, _| {
        if done == 0 {
            told.lock().unwrap().push(k)
        }
    };
    let result = workloads::bonnie::run_bonnie_telling(&dev, &spec(), &tell).unwrap();
    assert_eq!(*told.lock().unwrap(), (0..PHASES.len()).collect::<Vec<_>>());
    assert_eq!(result.phases.len(), PHASES.len());
}

/// Within each phase through the file, what is told grows toward the
/// chunks of the file and never passes them.
#[test]
fn each_phase_tells_how_far_it_got() {
    let dev = MemDevice::new(16 << 20).unwrap();
    let told = std::sync::Mutex::new(Vec::new());
    let spec = BonnieSpec { size_bytes: 16 << 20, ..spec() };
    workloads::bonnie::run_bonnie_telling(&dev, &spec, &|k, done, total| {
        told.lock().unwrap().push((k, done, total))
    })
    .unwrap();
    let told = told.into_inner().unwrap();
    let chunks = spec.size_bytes / spec.chunk_bytes;
    for k in 0..5 {
        let done: Vec<u64> = told.iter().filter(|t| t.0 == k).map(|t| t.1).collect();
        assert!(done.len() > 1, "phase {k}: {done:?}");
        assert!(done.windows(2).all(|w| w[0] < w[1]), "phase {k}: {done:?}");
        assert!(told.iter().filter(|t| t.0 == k).all(|t| t.1 <= chunks && t.2 == chunks), "phase {k}");
    }
}
