//! The data a run writes, measured on what it wrote: duplicates
//! (`--dedupe-ratio`) and compressibility (`--compress-ratio`), as a
//! deduplicating or compressing array would see them.

use std::io::Write;

use crate::cli::{iolab, stderr};

/// Writes the whole of a new 16 MiB file sequentially with `extra`;
/// returns its bytes and the run's JSON.
fn write_all(extra: &[&str]) -> (Vec<u8>, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let (file, json) = (dir.path().join("t.img"), dir.path().join("r.json"));
    let mut args = vec!["run", "--target", file.to_str().unwrap(), "--size", "16m", "--rw", "write"];
    args.extend(["--bs", "64k", "--io-size", "16m", "--layout", "never", "-q"]);
    args.extend(["--json", json.to_str().unwrap()]);
    args.extend(extra);
    let out = iolab(&args);
    assert_eq!(out.status.code(), Some(0), "{extra:?}: {}", stderr(&out));
    let doc = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    (std::fs::read(&file).unwrap(), doc)
}

/// Bytes over their zlib (level 6) size, 4 KiB at a time, as an array
/// compressing each block would store them.
fn zlib_ratio(data: &[u8]) -> f64 {
    let packed: usize = data
        .chunks(4096)
        .map(|block| {
            let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(6));
            z.write_all(block).unwrap();
            z.finish().unwrap().len()
        })
        .sum();
    data.len() as f64 / packed as f64
}

#[test]
fn a_compress_ratio_is_what_zlib_measures_on_the_bytes_written() {
    for ratio in [1.5, 2.0, 4.0, 8.0] {
        let (data, doc) = write_all(&["--compress-ratio", &ratio.to_string()]);
        let got = zlib_ratio(&data);
        assert!((got / ratio - 1.0).abs() < 0.04, "asked {ratio}:1, zlib finds {got:.2}:1");
        let pattern = doc["jobs"][0]["runs"][0]["pattern"].as_str().unwrap();
        assert!(pattern.starts_with("compress:"), "{pattern}");
    }
}

#[test]
fn a_dedupe_ratio_is_what_the_units_written_show() {
    let (data, doc) = write_all(&["--dedupe-ratio", "3"]);
    let units = data.len() / 4096;
    let distinct = data.chunks(4096).collect::<std::collections::HashSet<_>>().len();
    let got = units as f64 / distinct as f64;
    assert!((got / 3.0 - 1.0).abs() < 0.05, "asked 3:1, wrote {got:.3}:1");
    let run = &doc["jobs"][0]["runs"][0];
    assert_eq!(run["dedupe"], serde_json::json!({ "ratio": 3.0, "unit_bytes": 4096 }), "{run}");
    assert_eq!(run["pattern"], "random");
}

#[test]
fn a_validated_dedupe_ratio_is_what_the_units_written_show_and_checks_clean() {
    let (data, doc) = write_all(&["--dedupe-ratio", "3", "--validate"]);
    let units = data.len() / 4096;
    let distinct = data.chunks(4096).collect::<std::collections::HashSet<_>>().len();
    let got = units as f64 / distinct as f64;
    assert!((got / 3.0 - 1.0).abs() < 0.10, "asked 3:1, wrote {got:.3}:1");
    let validation = &doc["jobs"][0]["runs"][0]["validation"];
    assert_eq!(validation["errors"], 0, "{validation}");
    assert_eq!(validation["blocks_verified"], 4096, "{validation}");
}

#[test]
fn without_a_dedupe_ratio_every_unit_is_its_own() {
    let (data, doc) = write_all(&[]);
    let distinct = data.chunks(4096).collect::<std::collections::HashSet<_>>().len();
    assert_eq!(distinct, data.len() / 4096);
    assert!(doc["jobs"][0]["runs"][0]["dedupe"].is_null());
}

#[test]
fn data_options_that_cannot_apply_are_refused() {
    for (args, says) in [
        (&["--dedupe-ratio", "2", "--pattern", "zeros"][..], "zeros are all duplicates"),
        (&["--dedupe-ratio", "0.5"][..], "a ratio of 1 or more"),
        (&["--dedupe-ratio", "2", "--dedupe-unit", "3k"][..], "divides every transfer size"),
        (&["--dedupe-unit", "8k"][..], "only applies with --dedupe-ratio"),
        (&["--dedupe-ratio", "2", "--rw", "randread"][..], "the job writes nothing"),
        (&["--compress-ratio", "2", "--pattern", "random"][..], "give one of them"),
        (&["--compress-ratio", "0.5"][..], "from 1 (incompressible) to 10"),
        (&["--compress-ratio", "2", "--validate"][..], "--compress-ratio 2 cannot apply with --validate"),
        (&["--pattern", "zeros", "--validate"][..], "--pattern zeros cannot apply with --validate"),
    ] {
        let out = iolab(&[&["run", "--target", "mem:16m", "--ios", "10", "-q"][..], args].concat());
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    }
}
