//! The JSON each command prints, by shape, against golden files in
//! `crates/report/tests/it/golden/shape/`: every key at every level in
//! the order printed, each value's type, `null` apart from a value, and
//! the spelling of enum-like strings; numbers and free text are left out,
//! since they vary from run to run. A change to an internal type that
//! reached a document would show up here. Regenerate with
//! `IOLAB_BLESS=1 cargo test -p cli wire` and review the diff.

use std::fmt::Write as _;
use std::path::Path;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::cli::{stderr, stdout};

/// A JSON value as printed: object keys in their order (serde_json's own
/// `Value` sorts them), integers apart from floats.
enum Node {
    Null,
    Bool,
    Int,
    Float,
    Str(String),
    Array(Vec<Node>),
    Object(Vec<(String, Node)>),
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_unit<E>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }
    fn visit_bool<E>(self, _: bool) -> Result<Node, E> {
        Ok(Node::Bool)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Node, E> {
        Ok(Node::Int)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Node, E> {
        Ok(Node::Int)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Node, E> {
        Ok(Node::Float)
    }
    fn visit_str<E>(self, v: &str) -> Result<Node, E> {
        Ok(Node::Str(v.to_string()))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Node::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let mut fields = Vec::new();
        while let Some((key, value)) = map.next_entry()? {
            fields.push((key, value));
        }
        Ok(Node::Object(fields))
    }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Node, D::Error> {
        d.deserialize_any(NodeVisitor)
    }
}

/// Keys whose string values are spellings of an enum: the shape keeps the
/// value. (`cache` is left out: it depends on the file system under the
/// temporary directory.)
const ENUM_KEYS: [&str; 15] = [
    "schema",
    "stack",
    "engine",
    "rw",
    "checked_by",
    "class",
    "kind",
    "policy",
    "mode",
    "state",
    "outcome",
    "journal_mode",
    "arm",
    "org",
    "layout",
];

/// The `host` object's facts a machine may be unable to tell, with the
/// types they have when it can: `null` on one machine and a value on
/// another, so the shape names both and holds on every machine.
const HOST_FACTS: [(&str, &str); 6] = [
    ("started_at", "string | null"),
    ("hostname", "string | null"),
    ("kernel", "string | null"),
    ("cpu_model", "string | null"),
    ("cpus", "int | null"),
    ("memory_bytes", "int | null"),
];

/// One line per value: `path: type`; an array's elements merged, each
/// distinct line once, in the order first seen.
fn shape_lines(node: &Node, path: &str, key: &str, out: &mut Vec<String>) {
    let host_fact = (path.strip_suffix(key).is_some_and(|p| p.ends_with(".host.")))
        .then(|| HOST_FACTS.iter().find(|(k, _)| *k == key))
        .flatten()
        .filter(|_| matches!(node, Node::Null | Node::Str(_) | Node::Int));
    let line = match node {
        _ if host_fact.is_some() => host_fact.map(|(_, t)| t.to_string()).unwrap_or_default(),
        Node::Null => "null".to_string(),
        Node::Bool => "bool".to_string(),
        Node::Int => "int".to_string(),
        Node::Float => "float".to_string(),
        Node::Str(s) if ENUM_KEYS.contains(&key) => format!("{s:?}"),
        Node::Str(_) => "string".to_string(),
        Node::Array(items) if items.is_empty() => "[]".to_string(),
        Node::Array(_) => "[...]".to_string(),
        Node::Object(_) => "{...}".to_string(),
    };
    push_once(out, format!("{path}: {line}"));
    match node {
        Node::Array(items) => {
            for item in items {
                shape_lines(item, &format!("{path}[]"), key, out);
            }
        }
        Node::Object(fields) => {
            for (k, v) in fields {
                shape_lines(v, &format!("{path}.{k}"), k, out);
            }
        }
        _ => {}
    }
}

fn push_once(out: &mut Vec<String>, line: String) {
    if !out.contains(&line) {
        out.push(line);
    }
}

fn shape(json: &str) -> String {
    let node: Node = serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {json}"));
    let mut lines = Vec::new();
    shape_lines(&node, "", "", &mut lines);
    let mut text = String::new();
    for line in lines {
        let _ = writeln!(text, "{line}");
    }
    text
}

fn check_shape(name: &str, json: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../report/tests/it/golden/shape").join(name);
    let actual = shape(json);
    if std::env::var_os("IOLAB_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &actual).unwrap();
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(actual == expected, "{name}: the document's shape differs from its golden file:\n{actual}");
}

/// Runs iolab in `dir` and returns what it printed; `code` is the exit
/// status expected.
fn json_of(dir: &Path, args: &[&str], code: i32) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_iolab"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run iolab");
    assert_eq!(out.status.code(), Some(code), "{args:?}: {}", stderr(&out));
    stdout(&out)
}

#[test]
fn run_on_memory_with_repeats_and_validation() {
    let dir = tempfile::tempdir().unwrap();
    let args =
        ["run", "--target", "mem:16m", "--ios", "300", "--repeat", "2", "--validate", "--json", "-", "-q"];
    check_shape("run_mem.shape", &json_of(dir.path(), &args, 0));
}

#[test]
fn run_through_the_block_log() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "run",
        "--target",
        "t.img",
        "--size",
        "8m",
        "--log",
        "log",
        "--rw",
        "randwrite",
        "--flush-every",
        "10",
        "--ios",
        "200",
        "--engine",
        "sync",
        "--json",
        "-",
        "-q",
    ];
    check_shape("run_log.shape", &json_of(dir.path(), &args, 0));
}

#[test]
fn run_on_a_volume_and_its_listing() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("r5.conf"), crate::volume::RAID5).unwrap();
    json_of(dir.path(), &["volume", "create", "r5.conf", "--drive-size", "8m"], 0);
    let args = [
        "run",
        "--target",
        "r5.conf",
        "--rw",
        "randwrite",
        "--bs",
        "4k",
        "--ios",
        "100",
        "--json",
        "-",
        "-q",
    ];
    check_shape("run_volume.shape", &json_of(dir.path(), &args, 0));
    check_shape("volume_list.shape", &json_of(dir.path(), &["volume", "list", "--json", "r5.conf"], 0));
}

#[test]
fn journaled_run_and_validate_verdicts() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "run",
        "--target",
        "t.img",
        "--size",
        "1m",
        "--rw",
        "write",
        "--bs",
        "4k",
        "--validate",
        "--journal",
        "j",
        "--engine",
        "sync",
        "--json",
        "-",
        "-q",
    ];
    check_shape("run_journal.shape", &json_of(dir.path(), &args, 0));
    let validate = ["validate", "--target", "t.img", "--journal", "j", "--json", "-"];
    check_shape("validate_ok.shape", &json_of(dir.path(), &validate, 0));
    // A misdirected write: block 1 now holds block 0's stamp.
    let target = dir.path().join("t.img");
    let mut image = std::fs::read(&target).unwrap();
    image.copy_within(0..4096, 4096);
    std::fs::write(&target, &image).unwrap();
    check_shape("validate_bad.shape", &json_of(dir.path(), &validate, 1));
}

#[test]
fn journal_sweep() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "sweep",
        "journal",
        "--target",
        "t.img",
        "--journal-dir",
        "j",
        "--size",
        "4m",
        "--arms",
        "off,group",
        "--repeat",
        "2",
        "--runtime",
        "200ms",
        "--engine",
        "sync",
        "--iodepth",
        "2",
        "--json",
        "-",
    ];
    check_shape("sweep_journal.shape", &json_of(dir.path(), &args, 0));
}

#[test]
fn crash_with_and_without_a_violation() {
    let dir = tempfile::tempdir().unwrap();
    let log = ["crash", "--stack", "log", "--transactions", "20", "--states", "20", "--json", "-"];
    check_shape("crash_log.shape", &json_of(dir.path(), &log, 0));
    let async_ = ["crash", "--stack", "async", "--transactions", "40", "--states", "100", "--json", "-"];
    check_shape("crash_async.shape", &json_of(dir.path(), &async_, 1));
}

#[test]
fn bonnie_with_repeats() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["bonnie", "--target", "mem:8m", "--seeks", "64", "--repeat", "2", "--json", "-"];
    check_shape("bonnie.shape", &json_of(dir.path(), &args, 0));
}

#[test]
fn stripes_sweep_with_bonnie_and_the_fs_mix() {
    let dir = tempfile::tempdir().unwrap();
    let drives = ["--drives", "d1", "d2", "d3", "--drive-size", "8m", "--size", "1m", "--stripes", "8k"];
    let bonnie = [&["sweep", "stripes"][..], &drives, &["--seeks", "64", "--json", "bonnie.json"]].concat();
    json_of(dir.path(), &bonnie, 0);
    let text = std::fs::read_to_string(dir.path().join("bonnie.json")).unwrap();
    check_shape("sweep_stripes_bonnie.shape", &text);
    let fs = [
        &["sweep", "stripes"][..],
        &drives,
        &["--workload", "fs", "--runtime", "200ms", "--raid5", "none", "--force", "--json", "fs.json"],
    ]
    .concat();
    json_of(dir.path(), &fs, 0);
    let text = std::fs::read_to_string(dir.path().join("fs.json")).unwrap();
    check_shape("sweep_stripes_fs.shape", &text);
}
