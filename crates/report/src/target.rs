//! What a job ran on and how it was measured: the media under the target
//! (direct or buffered, the file system beneath, memory-backed), the page
//! cache policy, and what the layout found and did. A figure that cannot
//! say how it was taken cannot be trusted, so these lines head every job.

use std::fmt::Write as _;

use device::{Medium, MediumKind};
pub use workloads::layout::LayoutPolicy;
use workloads::layout::LayoutReport;

use crate::units::human;

/// What was done about the page cache before each run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheState {
    /// Every medium opened with O_DIRECT: the cache is bypassed.
    Direct,
    /// Buffered: the target's pages dropped before each run and repeat.
    Dropped,
    /// Buffered, `--keep-cache`: pages left from earlier runs may answer.
    Kept,
    /// The target is memory (or null): there is no cache to speak of.
    None,
}

/// The layout's policy and outcome.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LayoutState {
    pub policy: LayoutPolicy,
    /// Whether holes were filled: the job reads (auto) or always.
    pub wanted: bool,
    /// Existing files get zeros (their contents unchanged), new ones the
    /// job's pattern.
    pub zeros: bool,
    /// Whether the job reads at all: holes left in a region it only
    /// writes are never read, so nothing is warned of or marked.
    pub reads: bool,
    pub report: LayoutReport,
}

impl LayoutState {
    /// The job's reads may hit holes left as they were.
    fn reads_holes(&self) -> bool {
        self.reads && self.report.reads_unwritten()
    }
}

/// The target of a job, for the heading lines and the JSON.
#[derive(Clone, Debug)]
pub struct TargetReport {
    pub name: String,
    pub media: Vec<Medium>,
    pub cache: CacheState,
    pub layout: LayoutState,
    /// The same warnings the text shows ("this measures memory").
    pub warnings: Vec<String>,
}

impl TargetReport {
    /// Builds the report and its warnings from what was found.
    pub fn new(name: String, media: Vec<Medium>, keep_cache: bool, layout: LayoutState) -> TargetReport {
        let cache = if media
            .iter()
            .all(|m| matches!(m.kind, MediumKind::Memory | MediumKind::Null | MediumKind::Simulated))
        {
            CacheState::None
        } else if media
            .iter()
            .all(|m| m.direct || !matches!(m.kind, MediumKind::File | MediumKind::BlockDevice))
        {
            CacheState::Direct
        } else if keep_cache {
            CacheState::Kept
        } else {
            CacheState::Dropped
        };
        let mut warnings = memory_warnings(&name, &media);
        if cache == CacheState::Kept {
            let cached: u64 = media.iter().filter_map(|m| m.cached_bytes).sum();
            if cached > 0 {
                warnings.push(format!(
                    "--keep-cache: {} of the target was in the page cache at the start; reads of it measure memory",
                    human(cached)
                ));
            }
        }
        if layout.reads_holes() {
            warnings.push(format!(
                "{} of the region was never written and was not laid out (--layout never): reads of it are \
                 marked, they measure the file system's holes, not the medium",
                human(layout.report.unwritten_bytes - layout.report.laid_out_bytes)
            ));
        }
        TargetReport { name, media, cache, layout, warnings }
    }

    /// Reads of the job may have hit never-written blocks.
    pub fn reads_from_unwritten(&self) -> bool {
        self.layout.reads_holes()
    }
}

/// Warnings for media that are memory (a `mem:` target, a file on tmpfs):
/// what is measured there is not a disk.
pub fn memory_warnings(name: &str, media: &[Medium]) -> Vec<String> {
    let mut warnings = Vec::new();
    for m in media {
        if m.kind == MediumKind::File && m.memory_backed {
            let fs = m.filesystem.as_deref().unwrap_or("memory");
            warnings.push(format!("{} lives on {fs}: this measures memory, not a disk", m.name));
        }
    }
    if media.iter().any(|m| m.kind == MediumKind::Memory) {
        warnings.push(format!("{name} is memory: this measures memory and iolab, not a disk"));
    }
    warnings
}

/// A medium as a file-system command measured it: O_DIRECT or buffered,
/// and what lies beneath.
pub fn medium_kind(m: &Medium) -> String {
    medium_text(m, if m.direct { "O_DIRECT" } else { "buffered" })
}

/// What a medium is, with `io` (how it was read and written) where it
/// applies.
fn medium_text(m: &Medium, io: &str) -> String {
    match m.kind {
        MediumKind::File => {
            format!("file on {}, {io}", m.filesystem.as_deref().unwrap_or("an unknown file system"))
        }
        MediumKind::BlockDevice => format!("block device, {io}"),
        MediumKind::Memory => "memory (mem:)".to_string(),
        MediumKind::Null => "null (discards writes; reads return nothing)".to_string(),
        MediumKind::Simulated => "a simulated disk: every time modeled, in virtual time".to_string(),
    }
}

/// The lines heading a job: each medium, the cache, the layout, warnings.
pub fn target_lines(t: &TargetReport) -> String {
    let mut out = String::new();
    for m in &t.media {
        let _ = writeln!(out, "target {}: {}", m.name, describe(m, t.cache));
    }
    let _ = writeln!(out, "layout: {}", layout_line(&t.layout));
    for w in &t.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    out
}

fn describe(m: &Medium, cache: CacheState) -> String {
    let io = if m.direct {
        "O_DIRECT (page cache bypassed)"
    } else {
        match cache {
            CacheState::Kept => "buffered, page cache kept between runs (--keep-cache)",
            _ => "buffered, page cache dropped before each run",
        }
    };
    medium_text(m, io)
}

fn layout_line(l: &LayoutState) -> String {
    let r = &l.report;
    if !r.known {
        return "not checked: the target cannot tell which blocks were never written".into();
    }
    if r.unwritten_bytes == 0 {
        return "the region holds no holes; nothing to lay out".into();
    }
    if r.laid_out_bytes > 0 {
        let with =
            if l.zeros { "zeros (an existing file: its contents unchanged)" } else { "the job's pattern" };
        return format!(
            "laid out {} of holes with {with} in {:.1} s, before the clock",
            human(r.laid_out_bytes),
            r.seconds
        );
    }
    match l.policy {
        LayoutPolicy::Never => {
            format!("{} of holes left as they are (--layout never)", human(r.unwritten_bytes))
        }
        _ => format!(
            "{} of holes left as they are (the job does not read; --layout always fills them)",
            human(r.unwritten_bytes)
        ),
    }
}
