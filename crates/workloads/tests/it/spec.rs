//! Parsing and checking job parameters: each bad value is an error naming
//! its flag and what it accepts.

use std::time::Duration;

use workloads::spec::{parse_bytes, parse_duration};
use workloads::{BlockSizes, Engine, JobSpec, Pattern, Rw, Skew};

#[test]
fn sizes_take_binary_suffixes_and_sectors() {
    let cases =
        [("512", 512), ("4k", 4096), ("64KiB", 65536), ("1m", 1 << 20), ("2G", 2 << 30), ("8s", 4096)];
    for (text, bytes) in cases {
        assert_eq!(parse_bytes("bs", text), Ok(bytes), "{text}");
    }
}

#[test]
fn unknown_unit_names_the_flag_and_the_accepted_forms() {
    let err = parse_bytes("size", "4q").unwrap_err();
    assert_eq!(err.flag, "size");
    assert!(err.to_string().starts_with("--size: '4q' is not a size"), "{err}");
}

#[test]
fn negative_size_is_refused() {
    assert!(parse_bytes("size", "-4k").is_err());
}

#[test]
fn durations_take_units() {
    assert_eq!(parse_duration("runtime", "500ms"), Ok(Duration::from_millis(500)));
    assert_eq!(parse_duration("runtime", "2m"), Ok(Duration::from_secs(120)));
    assert!(parse_duration("runtime", "-1").is_err());
}

#[test]
fn bssplit_parses_sizes_and_weights() {
    let bs = BlockSizes::parse("4k/10:64k/50:32k/40").unwrap();
    assert_eq!(bs, BlockSizes::Split { name: None, sizes: vec![(4096, 10), (65536, 50), (32768, 40)] });
}

#[test]
fn bssplit_weights_are_percentages_that_add_up_to_100() {
    let err = BlockSizes::parse("4k/150:8k/20").unwrap_err();
    assert_eq!(err.flag, "bs");
    assert!(err.message.contains("add up to 170"), "{err}");
    assert!(err.message.contains("must add up to 100, as in 4k/88:8k/12"), "{err}");
    let err = BlockSizes::parse("4k/1:64k/3").unwrap_err();
    assert!(err.message.contains("add up to 4") && err.message.contains("4k/25:64k/75"), "{err}");
    let err = BlockSizes::parse("4k/0:8k/0").unwrap_err();
    assert!(err.message.contains("add up to 0; "), "{err}");
    let zero_left_out = BlockSizes::parse("4k/0:8k/100").unwrap();
    assert_eq!(zero_left_out, BlockSizes::Split { name: None, sizes: vec![(8192, 100)] });
    assert_eq!(BlockSizes::parse(&zero_left_out.to_string()).unwrap(), zero_left_out, "its text reads back");
    let fs: u32 = workloads::spec::FS_MIX.iter().map(|&(_, w)| w).sum();
    assert_eq!(fs, 100, "the fs mix is in percent too");
}

#[test]
fn bssplit_without_weights_is_refused() {
    let err = BlockSizes::parse("4k:64k").unwrap_err();
    assert!(err.to_string().contains("needs SIZE/PERCENT"), "{err}");
}

#[test]
fn zero_transfer_size_is_refused() {
    assert!(BlockSizes::parse("0").is_err());
}

#[test]
fn access_patterns_parse_and_unknown_ones_list_the_choices() {
    assert_eq!(Rw::parse("randrw"), Ok(Rw::RandRw));
    let err = Rw::parse("random").unwrap_err();
    assert!(err.to_string().contains("use read, write, randread, randwrite, rw, randrw, trim,"), "{err}");
}

#[test]
fn skews_parse() {
    assert_eq!(Skew::parse("zipf:1.2"), Ok(Skew::Zipf { theta: 1.2 }));
    assert_eq!(Skew::parse("hot:90/10"), Ok(Skew::Hot { io_pct: 90, region_pct: 10 }));
    assert!(Skew::parse("hot:190/10").is_err());
    assert!(Skew::parse("zipf:0").is_err());
    let zoned = Skew::parse("zoned:50/5:30/15:20/").unwrap();
    assert_eq!(zoned, Skew::Zoned { zones: vec![(50, 5), (30, 15), (20, 80)] });
    assert_eq!(zoned.to_string(), "zoned:50/5:30/15:20/80");
    assert!(Skew::parse("zoned:50/5:30/15").is_err(), "I/O shares must add up to 100");
    assert!(Skew::parse("zoned:50/60:50/60").is_err(), "region shares past 100");
    assert!(Skew::parse("zoned:50/:50/10").is_err(), "only the last zone may leave its region out");
}

#[test]
fn patterns_parse() {
    assert_eq!(Pattern::parse("compress:50"), Ok(Pattern::Compressible { pct: 50 }));
    assert!(Pattern::parse("compress:0").is_err());
}

#[test]
fn percentage_over_100_names_its_flag() {
    let job = JobSpec { read_pct: 101, ..JobSpec::default() };
    assert_eq!(job.check().unwrap_err().flag, "rwmixread");
}

#[test]
fn zero_depth_is_refused() {
    let job = JobSpec { iodepth: 0, ..JobSpec::default() };
    assert_eq!(job.check().unwrap_err().flag, "iodepth");
}

#[test]
fn depth_above_one_needs_the_uring_engine() {
    let job = JobSpec { iodepth: 8, engine: Engine::Sync, ..JobSpec::default() };
    assert!(job.check().unwrap_err().to_string().contains("needs --engine uring"));
}

#[test]
fn region_past_the_end_of_the_target_is_refused_with_the_limit() {
    let job = JobSpec { offset_bytes: 1 << 20, size_bytes: Some(2 << 20), ..JobSpec::default() };
    let err = job.region(2 << 20, 512).unwrap_err();
    assert_eq!(err.flag, "size");
    assert!(err.to_string().contains("use at most 1048576"), "{err}");
}

#[test]
fn transfer_not_whole_sectors_of_the_target_is_refused() {
    let job = JobSpec { bs: BlockSizes::Fixed(512), ..JobSpec::default() };
    assert_eq!(job.region(1 << 20, 4096).unwrap_err().flag, "bs");
}

#[test]
fn a_transfer_larger_than_the_region_blames_bs_and_names_both_fixes() {
    let job = JobSpec { size_bytes: Some(4096), bs: BlockSizes::Fixed(65536), ..JobSpec::default() };
    let err = job.region(1 << 20, 512).unwrap_err();
    assert_eq!(err.flag, "bs");
    assert!(err.message.contains("use a smaller --bs, or a larger --size"), "{err}");
    let whole_target =
        JobSpec { bs: BlockSizes::Range { min: 4096, max: 131072, step: 512 }, ..JobSpec::default() };
    let err = whole_target.region(65536, 512).unwrap_err();
    assert_eq!(err.flag, "bs", "{err}");
    assert!(err.message.contains("larger than the target, 65536 bytes"), "no --size was given: {err}");
}

#[test]
fn an_alignment_that_leaves_too_little_of_the_region_blames_bsalign() {
    let job = JobSpec { size_bytes: Some(65536), align_bytes: Some(131072), ..JobSpec::default() };
    let err = job.region(1 << 20, 512).unwrap_err();
    assert_eq!(err.flag, "bsalign", "{err}");
    assert!(err.message.contains("use a smaller --bsalign, or leave it out"), "{err}");
    let job = JobSpec {
        size_bytes: Some(96 << 10),
        bs: BlockSizes::Fixed(64 << 10),
        align_bytes: Some(48 << 10),
        ..JobSpec::default()
    };
    assert_eq!(job.region(1 << 20, 512).unwrap().len, 96 << 10, "two 48 KiB units hold a 64 KiB transfer");
    let job = JobSpec {
        size_bytes: Some(80 << 10),
        bs: BlockSizes::Fixed(64 << 10),
        align_bytes: Some(48 << 10),
        ..JobSpec::default()
    };
    assert_eq!(job.region(1 << 20, 512).unwrap_err().flag, "bsalign", "one 48 KiB unit does not");
}

#[test]
fn fixed_size_aligns_offsets_to_itself() {
    let job = JobSpec { bs: BlockSizes::Fixed(8192), ..JobSpec::default() };
    assert_eq!(job.region(1 << 20, 512).unwrap().align, 8192);
}

#[test]
fn submit_batch_above_the_depth_is_refused() {
    let job = JobSpec { iodepth: 4, submit_batch: 8, engine: Engine::Uring, ..JobSpec::default() };
    assert_eq!(job.check().unwrap_err().flag, "iodepth-batch");
}
