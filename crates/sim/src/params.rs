//! A simulated disk's parameters, from a target spec
//! (`sim:hdd,rpm=7200,wce=on` or `sim:ssd,channels=8`), with the defaults
//! docs/sim.md gives and sources: a 2009-era 7,200 rpm disk of 500 GB
//! (seek curve in Ruemmler and Wilkes' form, zones from 1,800 to 900
//! sectors a track, a 16 MiB cache), and a modern SSD (eight channels).

use std::fmt;

/// Nanoseconds.
pub const MS: f64 = 1_000_000.0;
pub const US: f64 = 1_000.0;

/// What the model does with data written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Data {
    /// Kept (sparse, in memory): reads see writes, crash images hold them.
    Keep,
    /// Dropped: timing only (reads return zeros); no memory grows.
    Discard,
}

/// A 7,200 rpm disk (or another rotation rate).
#[derive(Clone, Debug, PartialEq)]
pub struct HddParams {
    pub size_bytes: u64,
    pub rpm: f64,
    /// Data surfaces.
    pub heads: u32,
    /// Sectors a track on the outermost and innermost zones.
    pub spt_outer: u32,
    pub spt_inner: u32,
    pub zones: u32,
    /// Seeks of `d` cylinders: `a + b·sqrt(d)` up to `boundary`, `c + e·d`
    /// beyond (ms; Ruemmler and Wilkes' form), settle included.
    pub seek_a_ms: f64,
    pub seek_b_ms: f64,
    pub seek_c_ms: f64,
    pub seek_e_ms: f64,
    pub seek_boundary: u64,
    /// Controller overhead per command (ms).
    pub overhead_ms: f64,
    /// Host interface rate (MB/s): cache transfers.
    pub bus_mb_s: f64,
    /// The write cache: on (writes acknowledged once in it, destaged
    /// later) or off.
    pub wce: bool,
    /// A cache that acknowledges flushes without destaging (lies).
    pub flush_ignore: bool,
    pub cache_bytes: u64,
    /// Bytes read ahead after a read, while the head is free.
    pub readahead_bytes: u64,
    /// Commands the disk queues and orders itself (shortest positioning
    /// first, aged).
    pub qd: u32,
    /// How much waiting counts against positioning time in the queue's
    /// choice (0: pure shortest positioning first, which can starve a far
    /// request for seconds).
    pub age_weight: f64,
    pub data: Data,
}

/// An SSD: parallel channels with per-page service times.
#[derive(Clone, Debug, PartialEq)]
pub struct SsdParams {
    pub size_bytes: u64,
    pub channels: u32,
    pub read_us: f64,
    pub write_us: f64,
    pub overhead_us: f64,
    pub bus_mb_s: f64,
    /// Power-loss protection: a flush is free and acknowledged writes are
    /// durable; without it a flush waits for the channels to drain and
    /// only then are the writes before it durable.
    pub plp: bool,
    pub flush_us: f64,
    pub data: Data,
}

/// A simulated disk.
#[derive(Clone, Debug, PartialEq)]
pub enum SimSpec {
    Hdd(HddParams),
    Ssd(SsdParams),
}

impl Default for HddParams {
    fn default() -> HddParams {
        // Seek: 0.8 ms track to track, about 8.5 ms at a third of the
        // stroke, 17 ms full stroke over 375,000 cylinders: the long part
        // fitted through the last two, the short part meeting it at a
        // tenth of the stroke.
        HddParams {
            size_bytes: 500_107_862_016, // 976,773,168 sectors, as such disks hold
            rpm: 7200.0,
            heads: 2,
            spt_outer: 1800,
            spt_inner: 900,
            zones: 16,
            seek_a_ms: 0.7755,
            seek_b_ms: 0.024_53,
            seek_c_ms: 4.25,
            seek_e_ms: 0.000_034,
            seek_boundary: 37_500,
            overhead_ms: 0.1,
            bus_mb_s: 300.0,
            wce: true,
            flush_ignore: false,
            cache_bytes: 16 << 20,
            readahead_bytes: 512 << 10,
            qd: 32,
            age_weight: 0.01,
            data: Data::Keep,
        }
    }
}

impl Default for SsdParams {
    fn default() -> SsdParams {
        SsdParams {
            size_bytes: 256_060_514_304, // 500,118,192 sectors
            channels: 8,
            read_us: 80.0,
            write_us: 25.0,
            overhead_us: 10.0,
            bus_mb_s: 550.0,
            plp: false,
            flush_us: 500.0,
            data: Data::Keep,
        }
    }
}

fn size(text: &str) -> Result<u64, String> {
    let t = text.trim().to_ascii_lowercase();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (n, unit) = t.split_at(split);
    let n: u64 = n.parse().map_err(|_| format!("size={text}: not a size (e.g. 500g, 1t)"))?;
    let unit = match unit.trim_end_matches("ib").trim_end_matches('b') {
        "" => 1,
        "k" => 1 << 10,
        "m" => 1 << 20,
        "g" => 1 << 30,
        "t" => 1 << 40,
        _ => return Err(format!("size={text}: unknown unit")),
    };
    n.checked_mul(unit).ok_or_else(|| format!("size={text}: too large"))
}

fn text_f64(text: &str) -> Option<f64> {
    text.parse::<f64>().ok().filter(|v| v.is_finite())
}

fn number(key: &str, text: &str) -> Result<f64, String> {
    text_f64(text).filter(|v| *v > 0.0).ok_or_else(|| format!("{key}={text}: needs a positive number"))
}

fn switch(key: &str, text: &str, on: &str, off: &str) -> Result<bool, String> {
    match text {
        t if t == on => Ok(true),
        t if t == off => Ok(false),
        _ => Err(format!("{key}={text}: use {on} or {off}")),
    }
}

fn data(text: &str) -> Result<Data, String> {
    match text {
        "keep" => Ok(Data::Keep),
        "discard" => Ok(Data::Discard),
        _ => Err(format!("data={text}: use keep or discard")),
    }
}

impl SimSpec {
    /// Parses what follows `sim:`: `hdd` or `ssd`, then `key=value`
    /// pairs separated by commas.
    pub fn parse(text: &str) -> Result<SimSpec, String> {
        let mut parts = text.split(',').map(str::trim);
        let kind = parts.next().unwrap_or("");
        let pairs: Vec<(&str, &str)> = parts
            .filter(|p| !p.is_empty())
            .map(|p| p.split_once('=').ok_or_else(|| format!("'{p}': give key=value")))
            .collect::<Result<_, _>>()?;
        match kind {
            "hdd" => {
                let mut p = HddParams::default();
                for (k, v) in pairs {
                    match k {
                        "size" => p.size_bytes = size(v)?,
                        "rpm" => p.rpm = number(k, v)?,
                        "wce" => p.wce = switch(k, v, "on", "off")?,
                        "flush" => p.flush_ignore = switch(k, v, "ignore", "honor")?,
                        "qd" => p.qd = number(k, v)? as u32,
                        "age" => {
                            p.age_weight = text_f64(v).filter(|a| *a >= 0.0).ok_or_else(|| {
                                format!("age={v}: needs a number, 0 or more (0: no aging)")
                            })?
                        }
                        "cache" => p.cache_bytes = size(v)?,
                        "overhead_ms" => p.overhead_ms = number(k, v)?,
                        "data" => p.data = data(v)?,
                        _ => return Err(format!("{k}: not a sim:hdd parameter (size, rpm, wce, flush, qd, age, cache, overhead_ms, data)")),
                    }
                }
                Ok(SimSpec::Hdd(p))
            }
            "ssd" => {
                let mut p = SsdParams::default();
                for (k, v) in pairs {
                    match k {
                        "size" => p.size_bytes = size(v)?,
                        "channels" => p.channels = number(k, v)? as u32,
                        "read_us" => p.read_us = number(k, v)?,
                        "write_us" => p.write_us = number(k, v)?,
                        "plp" => p.plp = switch(k, v, "on", "off")?,
                        "data" => p.data = data(v)?,
                        _ => {
                            return Err(format!(
                                "{k}: not a sim:ssd parameter (size, channels, read_us, write_us, plp, data)"
                            ))
                        }
                    }
                }
                Ok(SimSpec::Ssd(p))
            }
            other => Err(format!("sim:{other}: name a model, sim:hdd or sim:ssd (docs/sim.md)")),
        }
    }

    pub fn size_bytes(&self) -> u64 {
        match self {
            SimSpec::Hdd(p) => p.size_bytes,
            SimSpec::Ssd(p) => p.size_bytes,
        }
    }

    pub fn data(&self) -> Data {
        match self {
            SimSpec::Hdd(p) => p.data,
            SimSpec::Ssd(p) => p.data,
        }
    }

    /// Keeps the written data or not (`data=`).
    pub fn set_data(&mut self, data: Data) {
        match self {
            SimSpec::Hdd(p) => p.data = data,
            SimSpec::Ssd(p) => p.data = data,
        }
    }
}

impl fmt::Display for SimSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let gb = |b: u64| b as f64 / 1e9;
        match self {
            SimSpec::Hdd(p) => write!(
                f,
                "sim:hdd {:.0} rpm, {:.0} GB, write cache {}{}, queue {}",
                p.rpm,
                gb(p.size_bytes),
                if p.wce { "on" } else { "off" },
                if p.wce && p.flush_ignore { " ignoring flushes" } else { "" },
                p.qd
            )?,
            SimSpec::Ssd(p) => write!(
                f,
                "sim:ssd {} channels, read {} us, write {} us, {:.0} GB, {}",
                p.channels,
                p.read_us,
                p.write_us,
                gb(p.size_bytes),
                if p.plp { "power-loss protected" } else { "no power-loss protection" }
            )?,
        }
        if self.data() == Data::Discard {
            f.write_str(", data discarded")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_sets_what_it_names_and_keeps_the_defaults() {
        let SimSpec::Hdd(p) = SimSpec::parse("hdd,rpm=5400,wce=off,size=1g").unwrap() else { panic!() };
        assert_eq!((p.rpm, p.wce, p.size_bytes, p.qd), (5400.0, false, 1 << 30, 32));
        let SimSpec::Ssd(s) = SimSpec::parse("ssd,channels=4,plp=on").unwrap() else { panic!() };
        assert_eq!((s.channels, s.plp), (4, true));
    }

    #[test]
    fn a_bad_spec_names_what_is_wrong() {
        assert!(SimSpec::parse("tape").unwrap_err().contains("sim:hdd or sim:ssd"));
        assert!(SimSpec::parse("hdd,rpm=fast").unwrap_err().contains("rpm=fast"));
        assert!(SimSpec::parse("hdd,wce=maybe").unwrap_err().contains("on or off"));
        assert!(SimSpec::parse("ssd,rpm=7200").unwrap_err().contains("not a sim:ssd parameter"));
    }
}
