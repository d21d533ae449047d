//! `iolab volume list`: objects, states and Vinum's counters.

use std::fmt::Write as _;

use volume::{Org, VolumeReport};

fn mib(bytes: u64) -> String {
    format!("{:.0} MiB", bytes as f64 / (1u64 << 20) as f64)
}

fn org_name(org: &Org) -> String {
    match org {
        Org::Concat => "concat".into(),
        Org::Striped { stripe_bytes } => format!("striped {}", workloads::spec::human_bytes(*stripe_bytes)),
        Org::Raid5 { stripe_bytes, layout } => {
            format!("raid5 {} {layout:?}", workloads::spec::human_bytes(*stripe_bytes)).to_lowercase()
        }
    }
}

/// Percentage of `part` in `whole`, 0 when there were no requests.
fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

/// One line per volume, plex and subdisk (Vinum's `list`), with `-s` the
/// counters: requests, bytes, and for plexes multiblock and multistripe
/// transfers with their share of the plex's requests.
pub fn volume_list(reports: &[VolumeReport], stats: bool) -> String {
    let mut out = String::new();
    for v in reports {
        let _ = writeln!(out, "V {:<24} size {:>10}  plexes {}", v.name, mib(v.size_bytes), v.plexes.len());
        for p in &v.plexes {
            let _ = writeln!(
                out,
                "P {:<24} {:<5} size {:>10}  subdisks {}  {}",
                p.name,
                p.state.to_string(),
                mib(p.size_bytes),
                p.subdisks.len(),
                org_name(&p.org)
            );
            for s in &p.subdisks {
                let _ = writeln!(
                    out,
                    "S {:<24} {:<5} size {:>10}  drive {} at offset {}",
                    s.name,
                    s.state.to_string(),
                    mib(s.length_bytes),
                    s.drive,
                    s.drive_offset_bytes
                );
            }
        }
        for d in &v.drives {
            let _ = writeln!(out, "D {:<24} {:<5}", d.name, d.state.to_string());
        }
        if stats {
            out.push_str(&stats_table(v));
        }
    }
    out
}

fn stats_table(v: &VolumeReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "  {:<24} {:>10} {:>12} {:>10} {:>12} {:>9} {:>6} {:>9} {:>6} {:>8} {:>8} {:>8}",
        "object",
        "reads",
        "bytes read",
        "writes",
        "bytes wrtn",
        "mblock",
        "%",
        "mstripe",
        "%",
        "recover",
        "degr.w",
        "nopar.w"
    );
    let s = &v.stats;
    let _ = writeln!(
        out,
        "  {:<24} {:>10} {:>12} {:>10} {:>12} {:>9} {:>6} {:>9} {:>6} {:>8} {:>8} {:>8}",
        v.name, s.reads, s.bytes_read, s.writes, s.bytes_written, "", "", "", "", v.recovered_reads, "", ""
    );
    for p in &v.plexes {
        let c = &p.counters;
        let requests = c.reads + c.writes;
        let _ = writeln!(
            out,
            "  {:<24} {:>10} {:>12} {:>10} {:>12} {:>9} {:>6.1} {:>9} {:>6.1} {:>8} {:>8} {:>8}",
            p.name,
            c.reads,
            c.bytes_read,
            c.writes,
            c.bytes_written,
            c.multiblock,
            pct(c.multiblock, requests),
            c.multistripe,
            pct(c.multistripe, requests),
            c.recovered_reads,
            c.degraded_writes,
            c.parityless_writes
        );
        for sd in &p.subdisks {
            let t = &sd.stats;
            let _ = writeln!(
                out,
                "  {:<24} {:>10} {:>12} {:>10} {:>12}",
                sd.name, t.reads, t.bytes_read, t.writes, t.bytes_written
            );
        }
    }
    out
}
