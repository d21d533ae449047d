//! The engine in virtual time on simulated disks: the same job gives the
//! same figures, time is the model's, and the job's limits hold in it.

use std::sync::Arc;
use std::time::Duration;

use device::Device;
use sim::{SimDevice, SimSpec, VirtualClock};
use workloads::{run_job, Engine, JobResult, JobSpec, Progress, Rw};

fn disk(spec: &str) -> Arc<dyn Device> {
    SimDevice::new("sim", SimSpec::parse(spec).unwrap(), VirtualClock::new()).unwrap()
}

fn job(rw: Rw, runtime_s: u64) -> JobSpec {
    JobSpec {
        rw,
        read_pct: rw.default_read_pct(),
        engine: Engine::Virtual,
        runtime: Some(Duration::from_secs(runtime_s)),
        ..JobSpec::default()
    }
}

fn run(job: &JobSpec, spec: &str) -> JobResult {
    run_job(job, disk(spec), &Progress::default()).unwrap()
}

fn iops(r: &JobResult) -> f64 {
    r.read.iops + r.write.iops
}

#[test]
fn the_same_job_gives_the_same_figures() {
    let j = JobSpec {
        rw: Rw::RandRw,
        read_pct: 70,
        threads: 4,
        iodepth: 8,
        flush_every: 16,
        ..job(Rw::RandRw, 5)
    };
    let (a, b) = (run(&j, "hdd,data=discard"), run(&j, "hdd,data=discard"));
    assert_eq!((a.read, a.write, a.flushes, a.elapsed_s), (b.read, b.write, b.flushes, b.elapsed_s));
    assert_eq!(a.per_second, b.per_second);
    assert_eq!(a.latency, b.latency);
}

#[test]
fn the_runtime_is_virtual() {
    let r = run(&job(Rw::RandRead, 30), "hdd,data=discard");
    assert!(r.elapsed_s >= 30.0 && r.elapsed_s < 30.2, "{} s", r.elapsed_s);
    assert_eq!(r.per_second.len(), 31, "30 whole seconds and the partial last");
    assert!(r.modeled.as_deref().is_some_and(|m| m.starts_with("sim:hdd")));
}

#[test]
fn the_disk_queue_serves_deeper_depths_faster() {
    let shallow = run(&job(Rw::RandRead, 10), "hdd,data=discard");
    let deep = run(&JobSpec { iodepth: 32, ..job(Rw::RandRead, 10) }, "hdd,data=discard");
    assert!(iops(&deep) > 1.8 * iops(&shallow), "{:.0} against {:.0}", iops(&deep), iops(&shallow));
}

#[test]
fn threads_are_requests_in_flight_too() {
    let one = run(&job(Rw::RandRead, 10), "ssd,data=discard");
    let eight = run(&JobSpec { threads: 8, ..job(Rw::RandRead, 10) }, "ssd,data=discard");
    assert!(iops(&eight) > 4.0 * iops(&one), "{:.0} against {:.0}", iops(&eight), iops(&one));
}

#[test]
fn a_flush_after_each_write_costs_a_destage_on_an_honest_cache_only() {
    let j = JobSpec { flush_every: 1, ..job(Rw::RandWrite, 10) };
    let honest = run(&j, "hdd,data=discard");
    let lying = run(&j, "hdd,flush=ignore,data=discard");
    assert_eq!(honest.flushes, honest.write.ios);
    assert!(iops(&lying) > 4.0 * iops(&honest), "{:.0} against {:.0}", iops(&lying), iops(&honest));
}

#[test]
fn a_rate_limit_holds_in_virtual_time() {
    let r = run(&JobSpec { rate_iops: 50, ..job(Rw::RandRead, 20) }, "ssd,data=discard");
    assert!((r.read.ios as i64 - 1000).abs() <= 2, "{} reads in 20 s at 50 a second", r.read.ios);
}

#[test]
fn the_warm_up_is_virtual_and_not_measured() {
    let r = run(&JobSpec { ramp: Duration::from_secs(5), ..job(Rw::RandRead, 10) }, "ssd,data=discard");
    let total = disk_reads(&r);
    assert!(r.read.ios < total && r.read.ios > total / 2, "{} measured of {total}", r.read.ios);
    assert!(r.elapsed_s >= 10.0 && r.elapsed_s < 10.1, "{} s", r.elapsed_s);
}

fn disk_reads(r: &JobResult) -> u64 {
    r.device.reads
}

#[test]
fn an_io_limit_is_exact_across_threads() {
    let j = JobSpec { threads: 3, iodepth: 4, ios: Some(1000), runtime: None, ..job(Rw::RandWrite, 1) };
    let r = run(&j, "ssd,data=discard");
    assert_eq!(r.write.ios, 1000);
}

#[test]
fn data_written_is_read_back_when_kept() {
    let dev = disk("ssd,size=64m");
    let j =
        JobSpec { size_bytes: Some(65536), ios: Some(16), runtime: None, seek_pct: 0, ..job(Rw::Write, 1) };
    run_job(&j, dev.clone(), &Progress::default()).unwrap();
    let mut buf = vec![0u8; 4096];
    dev.read_at(&mut buf, 4096).unwrap();
    assert!(buf.iter().any(|&b| b != 0), "the job's data is on the disk");
}

#[test]
fn the_other_engines_are_refused_on_a_simulated_disk() {
    for engine in [Engine::Sync, Engine::Uring] {
        let err = run_job(
            &JobSpec { engine, ..job(Rw::RandRead, 1) },
            disk("ssd,data=discard"),
            &Progress::default(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("virtual"), "{err}");
    }
}

#[test]
fn virtual_time_is_refused_on_a_real_device() {
    let dev: Arc<dyn Device> = Arc::new(device::MemDevice::new(1 << 20).unwrap());
    let err = run_job(&job(Rw::RandRead, 1), dev, &Progress::default()).unwrap_err();
    assert!(err.to_string().contains("simulated disk"), "{err}");
}

/// `n` simulated disks of 1 GiB on one clock, one after another.
fn concat_of(n: usize, clock: &Arc<VirtualClock>) -> Arc<dyn Device> {
    let members: Vec<Arc<dyn Device>> = (0..n)
        .map(|_| {
            let d: Arc<dyn Device> =
                SimDevice::new("sim", SimSpec::parse("hdd,wce=off,size=1g").unwrap(), Arc::clone(clock))
                    .unwrap();
            d
        })
        .collect();
    Arc::new(device::Concat::new("concat", members).unwrap())
}

/// A job of `threads` sync threads through a layer over simulated disks,
/// in their virtual time.
fn through_a_layer(disks: usize, threads: u32) -> JobResult {
    let clock = VirtualClock::new();
    let job = JobSpec {
        engine: Engine::Sync,
        threads,
        clock: device::Clock::Virtual(Arc::clone(&clock)),
        ..job(Rw::RandRead, 10)
    };
    run_job(&job, concat_of(disks, &clock), &Progress::default()).unwrap()
}

#[test]
fn threads_through_a_layer_run_in_the_disks_virtual_time() {
    let r = through_a_layer(1, 1);
    assert!(r.elapsed_s >= 10.0 && r.elapsed_s < 10.2, "{} s modeled", r.elapsed_s);
    assert!(r.modeled.is_some());
    // A random 4 KiB read on the disk takes milliseconds: about 100 a second.
    assert!(iops(&r) > 50.0 && iops(&r) < 200.0, "{:.0} IOPS", iops(&r));
}

#[test]
fn threads_through_a_layer_over_four_disks_overlap() {
    let one = through_a_layer(1, 1);
    let four = through_a_layer(4, 8);
    assert!(iops(&four) > 3.0 * iops(&one), "{:.0} against {:.0}", iops(&four), iops(&one));
}

#[test]
fn a_second_run_on_the_same_disk_starts_where_the_first_ended() {
    let dev = disk("hdd,data=discard");
    let j = job(Rw::RandRead, 10);
    let first = run_job(&j, dev.clone(), &Progress::default()).unwrap();
    let second = run_job(&j, dev, &Progress::default()).unwrap();
    assert!(second.elapsed_s >= 10.0 && second.elapsed_s < 10.2, "{} s", second.elapsed_s);
    assert!(
        (iops(&second) - iops(&first)).abs() < 0.1 * iops(&first),
        "{:.0} then {:.0}",
        iops(&first),
        iops(&second)
    );
}
