//! The house rules ARCHITECTURE.md states, checked: the crate graph is the
//! documented one, and only the cli prints or exits.

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
