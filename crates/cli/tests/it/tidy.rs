//! The house rules ARCHITECTURE.md states, checked: the crate graph is the
//! documented one, only the cli prints or exits, and every device is
//! reached through the one checked front.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// `crate -> its normal dependencies inside the workspace`, as cargo sees them.
fn actual_graph() -> BTreeMap<String, BTreeSet<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .current_dir(workspace_root())
        .output()
        .expect("cargo metadata runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let packages = doc["packages"].as_array().unwrap();
    let names: BTreeSet<String> = packages.iter().map(|p| p["name"].as_str().unwrap().to_string()).collect();
    packages
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["kind"].is_null())
                .map(|d| d["name"].as_str().unwrap().to_string())
                .filter(|d| names.contains(d))
                .collect();
            (p["name"].as_str().unwrap().to_string(), deps)
        })
        .collect()
}

/// The list under "## Crate dependencies" in ARCHITECTURE.md.
fn documented_graph() -> BTreeMap<String, BTreeSet<String>> {
    let text = std::fs::read_to_string(workspace_root().join("ARCHITECTURE.md")).unwrap();
    let section = text.split("## Crate dependencies").nth(1).expect("ARCHITECTURE.md has the section");
    let section = section.split("\n## ").next().unwrap();
    section
        .lines()
        .filter_map(|line| line.strip_prefix("- `"))
        .map(|rest| {
            let (name, deps) = rest.split_once("`: ").expect("- `crate`: deps");
            let deps = match deps.trim() {
                "none" => BTreeSet::new(),
                list => list.split(", ").map(str::to_string).collect(),
            };
            (name.to_string(), deps)
        })
        .collect()
}

#[test]
fn the_crate_graph_is_the_documented_one() {
    assert_eq!(
        actual_graph(),
        documented_graph(),
        "update ARCHITECTURE.md's \"Crate dependencies\" with the change"
    );
}

#[test]
fn only_the_cli_prints_or_exits() {
    let forbidden = ["println!", "print!(", "eprintln!", "eprint!(", "dbg!(", "process::exit"];
    let mut found = Vec::new();
    for krate in std::fs::read_dir(workspace_root().join("crates")).unwrap() {
        let krate = krate.unwrap().path();
        if krate.file_name().unwrap() == "cli" {
            continue;
        }
        let mut dirs = vec![krate.join("src")];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                    continue;
                }
                let text = std::fs::read_to_string(&path).unwrap();
                for (n, line) in text.lines().enumerate() {
                    let code = line.split("//").next().unwrap();
                    if forbidden.iter().any(|f| code.contains(f)) {
                        found.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
                    }
                }
            }
        }
    }
    assert!(found.is_empty(), "library crates return what they have to say:\n{}", found.join("\n"));
}

/// Every `.rs` file under `crates/` (sources, tests, benches) but this one
/// (whose samples break the rules on purpose), with its text stripped of
/// `//` comments, so a comment naming a rule breaks none.
fn rust_sources() -> Vec<(PathBuf, String)> {
    let this = workspace_root().join("crates/cli/tests/it/tidy.rs");
    let mut found = Vec::new();
    let mut dirs = vec![workspace_root().join("crates")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") && path != this {
                let text = std::fs::read_to_string(&path).unwrap();
                let code: Vec<&str> = text.lines().map(|l| l.split("//").next().unwrap()).collect();
                found.push((path, code.join("\n")));
            }
        }
    }
    found
}

/// The last path segment of the trait each `impl TRAIT for TYPE` in `code`
/// implements (generic parameters and arguments left out).
fn implemented_traits(code: &str) -> Vec<String> {
    let flat = code.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut traits = Vec::new();
    for (at, _) in flat.match_indices("impl") {
        let boundary_before = flat[..at].chars().last().is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
        let rest = &flat[at + "impl".len()..];
        if !boundary_before || !rest.starts_with([' ', '<']) {
            continue;
        }
        let header = rest.split(['{', ';']).next().unwrap();
        let Some((before_for, _)) = header.split_once(" for ") else { continue };
        let mut path = before_for.trim();
        if path.starts_with('<') {
            // Skip the impl's generic parameters: `<B: Backend> Device`.
            let mut depth = 0;
            let end = path
                .char_indices()
                .find(|&(_, c)| {
                    depth += match c {
                        '<' => 1,
                        '>' => -1,
                        _ => 0,
                    };
                    depth == 0
                })
                .map_or(path.len(), |(i, _)| i + 1);
            path = path[end..].trim();
        }
        let path = path.split('<').next().unwrap();
        traits.push(path.rsplit("::").next().unwrap().trim().to_string());
    }
    traits
}

#[test]
fn the_tidy_impl_finder_finds_what_it_must() {
    let code =
        "impl<B: Backend> Device for B {}\nimpl device::Device\n for X {}\nimpl Backend for MemDevice {}\n\
                impl std::fmt::Debug for MemDevice {}\nimpl MemDevice { fn f() {} }";
    assert_eq!(implemented_traits(code), ["Device", "Device", "Backend", "Debug"]);
}

#[test]
fn only_the_front_implements_device() {
    let front = workspace_root().join("crates/device/src/front.rs");
    let mut found = Vec::new();
    for (path, code) in rust_sources() {
        let devices = implemented_traits(&code).iter().filter(|t| *t == "Device").count();
        if path != front && devices > 0 {
            found.push(path.display().to_string());
        }
    }
    assert!(
        found.is_empty(),
        "a device is a `device::Backend` (raw I/O only); the front in crates/device/src/front.rs \
         implements `Device` for it, so checks, counters and poisoning cannot be skipped:\n{}",
        found.join("\n")
    );
}

#[test]
fn only_the_front_and_the_io_uring_engine_check_requests() {
    let allowed = [
        "crates/device/src/front.rs",
        "crates/device/src/lib.rs",
        // The front's own tests, of what a direct submitter's check refuses.
        "crates/device/tests/it/front.rs",
        "crates/workloads/src/engine/uring.rs",
        "crates/workloads/src/engine/uring_validated.rs",
        "crates/workloads/src/engine/vtime.rs",
        "crates/workloads/src/engine/vtime_validated.rs",
    ]
    .map(|p| workspace_root().join(p));
    let found: Vec<String> = rust_sources()
        .into_iter()
        .filter(|(path, code)| code.contains("check_request") && !allowed.contains(path))
        .map(|(path, _)| path.display().to_string())
        .collect();
    assert!(
        found.is_empty(),
        "a backend is given checked requests only; the front checks them (the io_uring engine, \
         which submits around the front, is the one other caller):\n{}",
        found.join("\n")
    );
}

/// A function longer than this many lines (its signature to its closing
/// brace) is long, and must say why above it.
const LONG_FUNCTION_LINES: usize = 70;

/// The functions of every crate's `src` (tests and `#[cfg(test)]` code
/// aside) longer than [`LONG_FUNCTION_LINES`]: (file, line, name, lines,
/// whether the comment above says "Long on purpose").
fn long_functions() -> Vec<(PathBuf, usize, String, usize, bool)> {
    let mut found = Vec::new();
    let mut dirs = vec![workspace_root().join("crates")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() && path.file_name().is_some_and(|n| n != "tests" && n != "target") {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs")
                && path.components().any(|c| c.as_os_str() == "src")
            {
                let text = std::fs::read_to_string(&path).unwrap();
                found.extend(
                    long_functions_in(&text)
                        .into_iter()
                        .map(|(line, name, n, why)| (path.clone(), line, name, n, why)),
                );
            }
        }
    }
    found
}

/// [`long_functions`] in one file's text: a function ends at the first
/// line that is its indentation and `}`; code after `#[cfg(test)]` is
/// left out.
fn long_functions_in(text: &str) -> Vec<(usize, String, usize, bool)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if line.contains("#[cfg(test)]") {
            break;
        }
        let trimmed = line.trim_start();
        let indent = &line[..line.len() - trimmed.len()];
        let signature = ["fn ", "pub fn ", "pub(crate) fn ", "pub(super) fn ", "const fn ", "pub const fn "]
            .iter()
            .find_map(|p| trimmed.strip_prefix(p));
        let Some(rest) = signature else { continue };
        if line.trim_end().ends_with(';') {
            continue;
        }
        let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        let close = format!("{indent}}}");
        let Some(end) = lines[i..].iter().position(|l| *l == close) else { continue };
        let n = end + 1;
        if n > LONG_FUNCTION_LINES {
            let above = lines[..i]
                .iter()
                .rev()
                .take_while(|l| l.trim_start().starts_with("///") || l.trim_start().starts_with("#["));
            let why = above.into_iter().any(|l| l.contains("Long on purpose"));
            found.push((i + 1, name, n, why));
        }
    }
    found
}

#[test]
fn the_long_function_finder_measures_from_signature_to_brace() {
    let body = "    x();\n".repeat(LONG_FUNCTION_LINES);
    let text = format!("/// Long on purpose: a test.\nfn long() {{\n{body}}}\nfn short() {{\n}}\n");
    assert_eq!(long_functions_in(&text), vec![(2, "long".to_string(), LONG_FUNCTION_LINES + 2, true)]);
    let unsaid = text.replace("Long on purpose", "Long");
    assert!(!long_functions_in(&unsaid)[0].3);
}

/// At most five long functions, each saying why above it (issue 37: the
/// rest are split into functions a reader takes in at once).
#[test]
fn long_functions_are_few_and_say_why() {
    let long = long_functions();
    let shown: Vec<String> = long
        .iter()
        .map(|(p, line, name, n, why)| {
            format!(
                "{}:{line} {name} ({n} lines{})",
                p.display(),
                if *why { "" } else { ", no reason above it" }
            )
        })
        .collect();
    assert!(
        long.len() <= 5,
        "more than five functions over {LONG_FUNCTION_LINES} lines:\n{}",
        shown.join("\n")
    );
    assert!(
        long.iter().all(|f| f.4),
        "a long function says why above it (\"Long on purpose: ...\"):\n{}",
        shown.join("\n")
    );
}
