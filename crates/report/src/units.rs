//! Numbers that read at a glance, as fio prints them: IOPS with k/M/G,
//! bandwidth and sizes in binary units, latency in the unit that fits.
//! Every figure keeps three significant figures, so a column of them
//! compares by eye without counting digits. Only the text reports use
//! these: CSV and JSON keep raw numbers in their documented units.
//!
//! Units are spelled without spaces and in ASCII: `k`, `M`, `G` for
//! counts; `B`, `KiB`, `MiB`, `GiB`, `TiB`, `PiB`, `EiB` for bytes
//! (`/s` after them for bandwidth); `ns`, `us`, `ms`, `s` for time, the
//! spelling the run table's headers and bonnie++'s latencies already
//! use.

/// A value with three significant figures: no decimals from 100 up, one
/// from 10, two below. Values of 1000 and more (a unit's last step before
/// the next when the step is 1024) print whole.
fn three_figures(value: f64) -> String {
    if value >= 100.0 || value == 0.0 {
        format!("{value:.0}")
    } else if value >= 10.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.2}")
    }
}

/// `value` in the largest unit of `units` (each `step` times the one
/// before) where it is at least one, with three significant figures.
/// Moves up a unit when rounding reaches the step (999.6 prints `1.00k`,
/// not `1000`).
fn scaled(value: f64, step: f64, units: &[&str]) -> String {
    if !value.is_finite() {
        return format!("{value}");
    }
    let mut v = value.max(0.0);
    let mut unit = 0;
    while unit + 1 < units.len() && v >= step {
        v /= step;
        unit += 1;
    }
    let mut text = three_figures(v);
    // Rounding may reach the step: 999.6 rounds to "1000", 1023.7 KiB to "1024".
    let limit = if step == 1000.0 { 1000.0 } else { step };
    if unit + 1 < units.len() && text.parse::<f64>().is_ok_and(|r| r >= limit) {
        v /= step;
        unit += 1;
        text = three_figures(v);
    }
    format!("{text}{}", units[unit])
}

/// Requests per second with k, M or G, three significant figures: `950`,
/// `39.8k`, `9.18M`.
pub fn iops(per_s: f64) -> String {
    scaled(per_s, 1000.0, &["", "k", "M", "G", "T"])
}

/// Bytes per second in binary units, three significant figures:
/// `812KiB/s`, `156MiB/s`, `1.21GiB/s`.
pub fn bandwidth(bytes_per_s: f64) -> String {
    format!("{}/s", scaled(bytes_per_s, 1024.0, &BYTE_UNITS))
}

/// Mebibytes per second (the unit the results hold) as [`bandwidth`].
pub fn bandwidth_mib(mib_per_s: f64) -> String {
    bandwidth(mib_per_s * 1048576.0)
}

const BYTE_UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];

/// A size in binary units: the largest unit the size reaches, with no
/// decimals when the size is a whole number of it (`4KiB`, `1GiB`) and
/// otherwise three significant figures without trailing zeros (`1.5MiB`,
/// `225MiB`).
pub fn size(bytes: u64) -> String {
    let mut unit = 0;
    let mut whole = 1u64;
    while unit + 1 < BYTE_UNITS.len() && bytes >= whole << 10 {
        whole <<= 10;
        unit += 1;
    }
    if bytes % whole == 0 {
        return format!("{}{}", bytes / whole, BYTE_UNITS[unit]);
    }
    let text = scaled(bytes as f64, 1024.0, &BYTE_UNITS);
    let split = text.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number =
        if number.contains('.') { number.trim_end_matches('0').trim_end_matches('.') } else { number };
    format!("{number}{unit}")
}

/// A size in a sentence: "8.0 MiB of holes", one decimal and a space, the
/// form the prose lines and the vinum-style listing have always printed
/// (tests and docs quote them). Table cells use [`size`].
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["bytes", "KiB", "MiB", "GiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} bytes")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// A latency given in nanoseconds, in the unit that fits (`ns`, `us`,
/// `ms`, then `s`), three significant figures: `850ns`, `85.2us`, `171ms`.
pub fn latency_ns(ns: f64) -> String {
    scaled(ns, 1000.0, &["ns", "us", "ms", "s"])
}

/// A latency given in microseconds (the unit the results hold) as
/// [`latency_ns`].
pub fn latency_us(us: f64) -> String {
    latency_ns(us * 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iops_steps_at_a_thousand_with_three_figures() {
        assert_eq!(iops(0.0), "0");
        assert_eq!(iops(7.0), "7.00");
        assert_eq!(iops(12.34), "12.3");
        assert_eq!(iops(950.0), "950");
        assert_eq!(iops(999.0), "999");
        assert_eq!(iops(999.6), "1.00k");
        assert_eq!(iops(1000.0), "1.00k");
        assert_eq!(iops(39_800.0), "39.8k");
        assert_eq!(iops(999_499.0), "999k");
        assert_eq!(iops(999_500.0), "1.00M");
        assert_eq!(iops(9_177_625.1), "9.18M");
        assert_eq!(iops(2.5e9), "2.50G");
        assert_eq!(iops(4.2e15), "4200T");
    }

    #[test]
    fn bandwidth_is_binary_per_second() {
        assert_eq!(bandwidth(0.0), "0B/s");
        assert_eq!(bandwidth(1023.0), "1023B/s");
        assert_eq!(bandwidth(1024.0), "1.00KiB/s");
        assert_eq!(bandwidth(812.0 * 1024.0), "812KiB/s");
        assert_eq!(bandwidth(1023.8 * 1024.0), "1.00MiB/s");
        assert_eq!(bandwidth_mib(156.0), "156MiB/s");
        assert_eq!(bandwidth_mib(1.21 * 1024.0), "1.21GiB/s");
        assert_eq!(bandwidth_mib(0.7), "717KiB/s");
        assert_eq!(bandwidth(1e19), "8.67EiB/s");
        assert_eq!(bandwidth(1e22), "8674EiB/s");
    }

    #[test]
    fn sizes_keep_no_decimals_when_whole() {
        assert_eq!(size(0), "0B");
        assert_eq!(size(1023), "1023B");
        assert_eq!(size(1024), "1KiB");
        assert_eq!(size(4096), "4KiB");
        assert_eq!(size(1536 * 1024), "1.5MiB");
        assert_eq!(size(1 << 30), "1GiB");
        assert_eq!(size(1_073_741_823), "1GiB");
        assert_eq!(size(1025), "1KiB");
        assert_eq!(size(235_614_208), "225MiB");
        assert_eq!(size(1000 << 20), "1000MiB");
        assert_eq!(size(u64::MAX), "16EiB");
    }

    #[test]
    fn latency_picks_the_unit_that_fits() {
        assert_eq!(latency_ns(0.0), "0ns");
        assert_eq!(latency_ns(999.0), "999ns");
        assert_eq!(latency_ns(1000.0), "1.00us");
        assert_eq!(latency_us(1.0), "1.00us");
        assert_eq!(latency_us(85.24), "85.2us");
        assert_eq!(latency_us(999.9), "1.00ms");
        assert_eq!(latency_us(171_457.6), "171ms");
        assert_eq!(latency_us(2_500_000.0), "2.50s");
        assert_eq!(latency_us(3.6e9), "3600s");
    }
}
