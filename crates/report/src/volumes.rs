//! `iolab volume list`: objects, states and Vinum's counters; `-v`, the
//! verbose listing of every volume, plex, subdisk and drive; what
//! `checkparity` found.

use std::fmt::Write as _;

use crate::units;
use volume::{Org, ParityReport, PlexReport, State, VolumeReport};

fn org_name(org: &Org) -> String {
    match org {
        Org::Concat => "concat".into(),
        Org::Striped { stripe_bytes } => format!("striped {}", workloads::spec::human_bytes(*stripe_bytes)),
        Org::Raid5 { stripe_bytes, layout } => {
            format!("raid5 {} {layout:?}", workloads::spec::human_bytes(*stripe_bytes)).to_lowercase()
        }
    }
}

/// A plex's state as Vinum shows it: a plex that is up with a subdisk out
/// of service is `degraded` (a RAID-5 plex serves every request by
/// reconstruction; a concat or striped plex serves the regions on its
/// other subdisks, and a mirror the rest); otherwise the state itself.
fn plex_state(p: &PlexReport) -> String {
    let out_of_service = p.subdisks.iter().any(|s| s.state != State::Up);
    if p.state == State::Up && out_of_service {
        return "degraded".into();
    }
    p.state.to_string()
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
        let _ = writeln!(
            out,
            "V {:<24} size {:>10}  plexes {}",
            v.name,
            units::size(v.size_bytes),
            v.plexes.len()
        );
        for p in &v.plexes {
            let _ = writeln!(
                out,
                "P {:<24} {:<8} size {:>10}  subdisks {}  {}",
                p.name,
                plex_state(p),
                units::size(p.size_bytes),
                p.subdisks.len(),
                org_name(&p.org)
            );
            for s in &p.subdisks {
                let _ = writeln!(
                    out,
                    "S {:<24} {:<8} size {:>10}  drive {} at offset {}",
                    s.name,
                    s.state.to_string(),
                    units::size(s.length_bytes),
                    s.drive,
                    s.drive_offset_bytes
                );
            }
        }
        for d in &v.drives {
            let missing =
                if d.missing { "  missing: its device was not given or could not be read" } else { "" };
            let line = format!("D {:<24} {:<8}{missing}", d.name, d.state.to_string());
            let _ = writeln!(out, "{}", line.trim_end());
        }
        if stats {
            out.push_str(&stats_table(v));
        }
    }
    out
}

/// A count and its share of `whole`, as Vinum prints them: `12 (3.4%)`.
fn count_pct(part: u64, whole: u64) -> String {
    format!("{part} ({:.1}%)", pct(part, whole))
}

/// Counters of every object: requests and bytes; for the volume, recovered
/// reads as a share of its reads; for plexes, multiblock and multistripe
/// as a share of the plex's requests, recovered reads of its reads,
/// degraded and parityless writes of its writes.
fn stats_table(v: &VolumeReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "  {:<24} {:>10} {:>12} {:>10} {:>12} {:>14} {:>14} {:>14} {:>14} {:>14}",
        "object",
        "reads",
        "bytes read",
        "writes",
        "bytes wrtn",
        "mblock",
        "mstripe",
        "recovered",
        "degr.w",
        "nopar.w"
    );
    let s = &v.stats;
    let _ = writeln!(
        out,
        "  {:<24} {:>10} {:>12} {:>10} {:>12} {:>14} {:>14} {:>14}",
        v.name,
        s.reads,
        units::size(s.bytes_read),
        s.writes,
        units::size(s.bytes_written),
        "",
        "",
        count_pct(v.recovered_reads, s.reads)
    );
    for p in &v.plexes {
        let c = &p.counters;
        let requests = c.reads + c.writes;
        let _ = writeln!(
            out,
            "  {:<24} {:>10} {:>12} {:>10} {:>12} {:>14} {:>14} {:>14} {:>14} {:>14}",
            p.name,
            c.reads,
            units::size(c.bytes_read),
            c.writes,
            units::size(c.bytes_written),
            count_pct(c.multiblock, requests),
            count_pct(c.multistripe, requests),
            count_pct(c.recovered_reads, c.reads),
            count_pct(c.degraded_writes, c.writes),
            count_pct(c.parityless_writes, c.writes)
        );
        for sd in &p.subdisks {
            let t = &sd.stats;
            let _ = writeln!(
                out,
                "  {:<24} {:>10} {:>12} {:>10} {:>12}",
                sd.name,
                t.reads,
                units::size(t.bytes_read),
                t.writes,
                units::size(t.bytes_written)
            );
        }
    }
    out
}

/// `135168 bytes (132KiB)`: the exact count, as Vinum prints it, and the
/// size that reads at a glance.
fn bytes_and_mib(bytes: u64) -> String {
    format!("{bytes} bytes ({})", units::size(bytes))
}

/// Revive progress of an object that is not up, when a revive has begun.
fn revive_line(out: &mut String, revived_bytes: u64, size_bytes: u64) {
    if revived_bytes > 0 {
        let _ = writeln!(
            out,
            "\t\tRevive pointer:\t{} ({:.1}%)",
            bytes_and_mib(revived_bytes),
            pct(revived_bytes, size_bytes)
        );
    }
}

/// Vinum's `list -v`: for every volume, plex, subdisk and drive its size,
/// state, organisation and stripe size, where each subdisk lies on its
/// drive and in its plex, drive names and devices, revive progress; with
/// `stats`, the counters after each volume.
pub fn volume_list_verbose(reports: &[VolumeReport], stats: bool) -> String {
    let mut out = String::new();
    for v in reports {
        let _ = writeln!(out, "Volume {}:\tSize: {}", v.name, bytes_and_mib(v.size_bytes));
        let _ = writeln!(out, "\t\tPlexes: {}", v.plexes.len());
        for p in &v.plexes {
            let _ = writeln!(out, "Plex {}:\tSize: {}", p.name, bytes_and_mib(p.size_bytes));
            let _ = writeln!(out, "\t\tSubdisks: {}\n\t\tState: {}", p.subdisks.len(), plex_state(p));
            let organisation = match &p.org {
                Org::Raid5 { layout, .. } => {
                    format!("{} {}", p.org.kind(), format!("{layout:?}").to_lowercase())
                }
                other => other.kind().to_string(),
            };
            let stripe = p.org.stripe_bytes().map(|b| format!("\tStripe size: {}", bytes_and_mib(b)));
            let _ = writeln!(out, "\t\tOrganization: {organisation}{}", stripe.unwrap_or_default());
            let _ = writeln!(out, "\t\tPart of volume {}", v.name);
            revive_line(&mut out, p.revived_bytes, p.size_bytes);
            for s in &p.subdisks {
                let device = v.drives.iter().find(|d| d.name == s.drive).map_or("?", |d| d.device.as_str());
                let _ = writeln!(out, "Subdisk {}:", s.name);
                let _ = writeln!(out, "\t\tSize: {}\n\t\tState: {}", bytes_and_mib(s.length_bytes), s.state);
                let _ = writeln!(out, "\t\tPlex {} at offset {}", p.name, bytes_and_mib(s.plex_offset_bytes));
                let _ = writeln!(
                    out,
                    "\t\tDrive {} ({device}) at offset {}",
                    s.drive,
                    bytes_and_mib(s.drive_offset_bytes)
                );
                revive_line(&mut out, s.revived_bytes, s.length_bytes);
            }
        }
        for d in &v.drives {
            let missing = if d.missing { " (missing)" } else { "" };
            let _ = writeln!(out, "Drive {}:\tDevice {}{missing}\n\t\tState: {}", d.name, d.device, d.state);
        }
        if stats {
            out.push_str(&stats_table(v));
        }
    }
    out
}

/// `iolab volume checkparity`: a line per RAID-5 plex, and its first
/// mismatching rows when there are any.
pub fn parity_lines(reports: &[ParityReport]) -> String {
    let mut out = String::new();
    for r in reports {
        let _ = writeln!(
            out,
            "{}: {} rows checked, {} with wrong parity",
            r.plex, r.rows_checked, r.rows_mismatched
        );
        if !r.mismatched_rows.is_empty() {
            let _ = writeln!(out, "  first wrong rows: {:?}", r.mismatched_rows);
        }
    }
    out
}
