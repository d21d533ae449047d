//! Names the build in `iolab --version`: the git commit and its date when
//! built from a checkout ("unknown" otherwise), and the enabled features.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let date = git(&["log", "-1", "--format=%cd", "--date=short"]).unwrap_or_else(|| "unknown".into());
    let dirty = git(&["status", "--porcelain", "--untracked-files=no"]).is_some();
    let features: Vec<String> = std::env::vars()
        .filter_map(|(k, _)| k.strip_prefix("CARGO_FEATURE_").map(|f| f.to_lowercase().replace('_', "-")))
        .collect();
    let features = if features.is_empty() { "none".to_string() } else { features.join(",") };
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    let dirty = if dirty { "+changes" } else { "" };
    println!(
        "cargo:rustc-env=IOLAB_LONG_VERSION={version} (commit {commit}{dirty}, {date}; features: {features})"
    );
    // Rebuild when HEAD moves, so the commit named is the one built.
    for path in ["../../.git/HEAD", "../../.git/index"] {
        if std::path::Path::new(path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    }
}
