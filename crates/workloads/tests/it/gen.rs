//! Request streams follow the requested mix, stay in their region and are
//! reproducible from the seed.

use proptest::prelude::*;
use workloads::gen::{IoKind, RequestGen};
use workloads::{BlockSizes, JobSpec, Rw, Skew};

const DRAWS: usize = 4000;

fn job(rw: Rw, bs: &str) -> JobSpec {
    JobSpec {
        rw,
        read_pct: rw.default_read_pct(),
        seek_pct: rw.default_seek_pct(),
        bs: BlockSizes::parse(bs).unwrap(),
        ..JobSpec::default()
    }
}

fn draws(job: &JobSpec, target_bytes: u64) -> Vec<workloads::gen::Request> {
    let region = job.region(target_bytes, 512).unwrap();
    let mut gen = RequestGen::new(job, region, 0, 1);
    (0..DRAWS).map(|_| gen.next_request()).collect()
}

#[test]
fn read_percentage_is_followed() {
    let mut j = job(Rw::RandRw, "4k");
    j.read_pct = 70;
    let reads = draws(&j, 1 << 30).iter().filter(|r| r.kind == IoKind::Read).count();
    // 70% of 4000 = 2800; binomial sd ~29, bounds are > 5 sd.
    assert!((2650..=2950).contains(&reads), "{reads} reads of {DRAWS}");
}

#[test]
fn bssplit_weights_are_followed() {
    let j = job(Rw::RandRead, "4k/10:64k/50:32k/40");
    let reqs = draws(&j, 1 << 30);
    let share = |size| reqs.iter().filter(|r| r.len == size).count();
    assert!((300..=500).contains(&share(4096)), "4k: {}", share(4096));
    assert!((1850..=2150).contains(&share(65536)), "64k: {}", share(65536));
    assert!((1450..=1750).contains(&share(32768)), "32k: {}", share(32768));
}

#[test]
fn fs_mix_averages_about_8k_within_1_to_120_sectors() {
    let j = job(Rw::RandRead, "fs");
    let reqs = draws(&j, 1 << 30);
    assert!(reqs.iter().all(|r| (512..=120 * 512).contains(&r.len)));
    let mean = reqs.iter().map(|r| r.len).sum::<u64>() as f64 / DRAWS as f64;
    assert!((7000.0..=10000.0).contains(&mean), "mean {mean}");
}

#[test]
fn range_sizes_are_multiples_of_the_step_within_bounds() {
    let j = job(Rw::RandRead, "4k-64k/4k");
    let reqs = draws(&j, 1 << 30);
    assert!(reqs.iter().all(|r| r.len % 4096 == 0 && (4096..=65536).contains(&r.len)));
    assert!(reqs.iter().any(|r| r.len == 4096) && reqs.iter().any(|r| r.len == 65536));
}

#[test]
fn sequential_stream_walks_the_region_in_order_and_wraps() {
    let j = job(Rw::Read, "64k");
    let reqs = draws(&j, 1 << 20); // 16 transfers per pass
    let offsets: Vec<u64> = reqs.iter().take(18).map(|r| r.offset).collect();
    let expected: Vec<u64> = (0..18).map(|i| (i % 16) * 65536).collect();
    assert_eq!(offsets, expected);
}

#[test]
fn sequential_threads_take_disjoint_slices() {
    let j = JobSpec { threads: 4, ..job(Rw::Write, "4k") };
    let region = j.region(1 << 20, 512).unwrap();
    let firsts: Vec<u64> = (0..4).map(|t| RequestGen::new(&j, region, t, 4).next_request().offset).collect();
    assert_eq!(firsts, [0, 256 << 10, 512 << 10, 768 << 10]);
}

#[test]
fn zipf_skew_concentrates_requests() {
    let mut j = job(Rw::RandRead, "4k");
    j.skew = Skew::Zipf { theta: 1.2 };
    let reqs = draws(&j, 1 << 30);
    let mut counts = std::collections::HashMap::new();
    for r in &reqs {
        *counts.entry(r.offset).or_insert(0usize) += 1;
    }
    let hottest = counts.values().max().copied().unwrap_or(0);
    // Uniform over 262144 slots would almost never repeat an offset.
    assert!(hottest > 100, "hottest offset drawn {hottest} times");
}

#[test]
fn hot_band_sends_its_share_to_the_band() {
    let mut j = job(Rw::RandRead, "4k");
    j.skew = Skew::Hot { io_pct: 90, region_pct: 10 };
    let reqs = draws(&j, 1 << 30);
    let in_band = reqs.iter().filter(|r| r.offset < (1 << 30) / 10).count();
    assert!((3500..=3700).contains(&in_band), "{in_band} in the hot band");
}

/// fio's `zoned:50/5:30/15:20/`: half the requests in the first 5% of
/// the region, 30% in the next 15%, the rest in the remaining 80%.
#[test]
fn zoned_skew_gives_each_zone_its_share() {
    let mut j = job(Rw::RandRead, "4k");
    j.skew = Skew::parse("zoned:50/5:30/15:20/").unwrap();
    let reqs = draws(&j, 1 << 30);
    let zone = |r: &workloads::gen::Request| match r.offset * 100 / (1 << 30) {
        0..=4 => 0,
        5..=19 => 1,
        _ => 2,
    };
    let mut counts = [0usize; 3];
    for r in &reqs {
        counts[zone(r)] += 1;
    }
    // Seeded draws; each share within 3 points of what was asked (the
    // standard deviation of a 50% share over these draws is under 1).
    let shares = counts.map(|n| (n * 100 / reqs.len()) as i64);
    assert!(shares.iter().zip([50, 30, 20]).all(|(got, want)| (got - want).abs() <= 3), "{shares:?}");
}

#[test]
fn seekpct_zero_on_a_random_pattern_is_sequential() {
    let mut j = job(Rw::RandRead, "4k");
    j.seek_pct = 0;
    let reqs = draws(&j, 1 << 20);
    assert_eq!(reqs[1].offset, reqs[0].offset + 4096);
}

/// The first `n` offsets of one thread's stream, in KiB.
fn offsets_kib(j: &JobSpec, target_bytes: u64, n: usize) -> Vec<u64> {
    let region = j.region(target_bytes, 512).unwrap();
    let mut gen = RequestGen::new(j, region, 0, 1);
    (0..n).map(|_| gen.next_request().offset / 1024).collect()
}

#[test]
fn a_skip_leaves_a_gap_after_each_sequential_request_and_wraps_at_the_end() {
    let j = JobSpec { skip_bytes: 112 << 10, ..job(Rw::Write, "16k") };
    assert_eq!(offsets_kib(&j, 1 << 20, 10), [0, 128, 256, 384, 512, 640, 768, 896, 0, 128]);
}

#[test]
fn a_negative_skip_walks_back_from_the_end_and_wraps_to_it() {
    // fio's rw=read:-8k with bs=4k: each request starts 8k before the
    // previous one ended.
    let j = JobSpec { skip_bytes: -(8 << 10), size_bytes: Some(32 << 10), ..job(Rw::Read, "4k") };
    assert_eq!(offsets_kib(&j, 1 << 20, 9), [24, 20, 16, 12, 8, 4, 0, 24, 20]);
}

#[test]
fn a_skip_applies_after_a_random_request_too() {
    let j = JobSpec { skip_bytes: -(8 << 10), seek_pct: 50, ..job(Rw::Read, "4k") };
    let region = j.region(1 << 20, 512).unwrap();
    let mut gen = RequestGen::new(&j, region, 0, 1);
    let reqs: Vec<_> = (0..200).map(|_| gen.next_request()).collect();
    // Whenever a request lies 4k below the one before, it followed on.
    let followed = reqs.windows(2).filter(|w| w[1].offset + 4096 == w[0].offset).count();
    assert!(followed > 50, "{followed} of 199 followed on backwards");
}

#[test]
fn a_skip_that_cannot_apply_is_refused_naming_why() {
    let refused = |j: JobSpec| j.region(1 << 20, 512).unwrap_err().to_string();
    let random = JobSpec { skip_bytes: 4096, ..job(Rw::RandRead, "4k") };
    assert!(refused(random).contains("every request of this job is placed at random"));
    let misaligned = JobSpec { skip_bytes: 1024, ..job(Rw::Read, "4k") };
    assert!(refused(misaligned).contains("not a multiple of the 4096-byte alignment"));
    let overlapping = JobSpec { skip_bytes: -4096, align_bytes: Some(4096), ..job(Rw::Read, "8k") };
    assert!(refused(overlapping).contains("walks back less than a 8192-byte transfer"));
    let too_large = JobSpec { skip_bytes: 1 << 20, ..job(Rw::Read, "4k") };
    assert!(refused(too_large).contains("as large as the region"));
}

#[test]
fn same_seed_gives_the_same_stream_and_another_seed_does_not() {
    let j = job(Rw::RandRw, "fs");
    let a = draws(&j, 1 << 30);
    assert_eq!(a, draws(&j, 1 << 30));
    let other = JobSpec { seed: 2, ..j };
    assert_ne!(a, draws(&other, 1 << 30));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn every_request_is_inside_its_region_and_aligned(
        offset_sectors in 0u64..2048,
        len_sectors in 256u64..4096,
        bs in prop::sample::select(vec!["512", "4k", "fs", "4k/10:64k/50:32k/40", "1k-96k/1k", "12k"]),
        rw in prop::sample::select(vec![Rw::Read, Rw::Write, Rw::RandRw, Rw::RandRead]),
        seek_pct in 0u8..=100,
        skip_blocks in -8i64..8,
        threads in 1u32..5,
        skew in prop::sample::select(vec![Skew::Uniform, Skew::Zipf { theta: 0.8 }, Skew::Hot { io_pct: 80, region_pct: 20 }, Skew::Zoned { zones: vec![(60, 1), (40, 99)] }]),
        seed: u64,
    ) {
        let bs = BlockSizes::parse(bs).unwrap();
        // A skip of whole 96 KiB units: a multiple of every alignment here,
        // and backwards at least the largest transfer.
        let skip_bytes = if seek_pct < 100 { skip_blocks * (96 << 10) } else { 0 };
        let j = JobSpec {
            offset_bytes: offset_sectors * 512,
            size_bytes: Some(len_sectors * 512),
            rw,
            seek_pct,
            skip_bytes,
            skew,
            threads,
            bs,
            seed,
            ..JobSpec::default()
        };
        let region = match j.region(8 << 20, 512) {
            Ok(region) => region,
            // Only a skip as large as the region is refused here.
            Err(e) => {
                prop_assert!(e.to_string().contains("as large as the region"), "{}", e);
                return Ok(());
            }
        };
        for t in 0..threads {
            let mut gen = RequestGen::new(&j, region, t, threads);
            for _ in 0..300 {
                let r = gen.next_request();
                prop_assert!(r.offset >= region.start && r.offset + r.len <= region.start + region.len, "{:?} outside {:?}", r, region);
                prop_assert_eq!((r.offset - region.start) % region.align, 0, "{:?} misaligned", r);
                prop_assert_eq!(r.len % 512, 0);
            }
        }
    }
}

#[test]
fn a_trim_pattern_discards_every_request_and_trimwrite_writes_each_block_after_discarding_it() {
    let kinds = |rw: Rw, n: usize| {
        let j = job(rw, "4k");
        let region = j.region(1 << 20, 512).unwrap();
        let mut gen = RequestGen::new(&j, region, 0, 1);
        (0..n).map(|_| gen.next_request()).map(|r| (r.kind, r.offset / 4096)).collect::<Vec<_>>()
    };
    assert!(kinds(Rw::RandTrim, 50).iter().all(|(k, _)| *k == IoKind::Trim));
    assert_eq!(kinds(Rw::Trim, 3), [(IoKind::Trim, 0), (IoKind::Trim, 1), (IoKind::Trim, 2)]);
    assert_eq!(
        kinds(Rw::TrimWrite, 4),
        [(IoKind::Trim, 0), (IoKind::Write, 0), (IoKind::Trim, 1), (IoKind::Write, 1)]
    );
}
