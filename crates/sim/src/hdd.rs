//! A rotating disk in virtual time, after Ruemmler and Wilkes ("An
//! introduction to disk drive modeling", 1994): seeks from the seek
//! distance (a square-root curve for short seeks, linear beyond), the
//! platter's angle from the virtual time, zones (more sectors a track
//! outside), a command overhead, a queue ordered shortest positioning time
//! first, read-ahead into the buffer while the head is free, and a write
//! cache: with it on a write is acknowledged once transferred and destaged
//! when the head is free (a flush waits for the destage, unless the cache
//! ignores flushes); with it off a write is acknowledged once on the
//! medium.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};

use device::{Nanos, VOp};

use crate::model::{Advance, Model};
use crate::params::{HddParams, MS};

const SECTOR: u64 = 512;

/// The most one destage writes: contiguous dirty extents up to 1 MiB.
const DESTAGE_SECTORS_MAX: u64 = 2048;

/// A zone: cylinders with the same sectors a track.
#[derive(Clone, Copy, Debug)]
struct Zone {
    first_lba: u64,
    first_cyl: u64,
    spt: u64,
}

/// Where a request's first sector is.
#[derive(Clone, Copy, Debug)]
struct Place {
    cyl: u64,
    /// Fraction of a revolution.
    angle: f64,
    /// Nanoseconds a sector passes under the head there.
    sector_ns: f64,
}

/// A request waiting for the head.
#[derive(Clone, Copy, Debug)]
struct HostOp {
    id: u64,
    lba: u64,
    sectors: u64,
    write: bool,
    place: Place,
    /// When it arrived (its age weighs in the queue's choice).
    arrived: Nanos,
}

/// Written data in the cache, not yet on the medium.
#[derive(Clone, Copy, Debug)]
struct Dirty {
    sectors: u64,
    seq: u64,
    place: Place,
}

/// What the head is doing, until `end`.
#[derive(Clone, Copy, Debug)]
enum Work {
    Host(HostOp),
    Destage { lba: u64, sectors: u64, seq: u64 },
}

/// Sectors read ahead into the buffer after a read, while the head stays.
#[derive(Clone, Copy, Debug)]
struct ReadAhead {
    start: u64,
    limit: u64,
    t0: Nanos,
    sector_ns: f64,
    /// When the head left to do something else.
    stop: Option<Nanos>,
}

impl ReadAhead {
    /// When `lba..end` is in the buffer, if it ever will be.
    fn ready(&self, lba: u64, end: u64) -> Option<Nanos> {
        if lba < self.start || end > self.limit {
            return None;
        }
        let at = self.t0 + ((end - self.start) as f64 * self.sector_ns) as Nanos;
        self.stop.is_none_or(|stop| at <= stop).then_some(at)
    }
}

pub(crate) struct Hdd {
    p: HddParams,
    rev_ns: f64,
    zones: Vec<Zone>,
    sectors: u64,
    now: Nanos,
    head_cyl: u64,
    /// Where the head's last transfer ended.
    head_lba: u64,
    media: Option<(Nanos, Work)>,
    queue: Vec<HostOp>,
    overflow: VecDeque<HostOp>,
    dirty: BTreeMap<u64, Dirty>,
    dirty_bytes: u64,
    /// Writes waiting for room in the cache: id, lba, sectors.
    blocked: VecDeque<(u64, u64, u64)>,
    /// Flushes waiting for the destage of writes up to a sequence number.
    flushes: Vec<(u64, u64)>,
    seq: u64,
    done: BinaryHeap<Reverse<(Nanos, u64)>>,
    durable: Vec<(u64, u64)>,
    ra: Option<ReadAhead>,
    next_id: u64,
}

impl Hdd {
    pub fn new(p: HddParams) -> Hdd {
        let rev_ns = 60_000.0 / p.rpm * MS;
        let sectors = p.size_bytes / SECTOR;
        let zones_n = u64::from(p.zones.max(1));
        let spt = |z: u64| {
            let (o, i) = (u64::from(p.spt_outer), u64::from(p.spt_inner));
            if zones_n == 1 {
                o
            } else {
                o - (o - i) * z / (zones_n - 1)
            }
        };
        let avg: u64 = (0..zones_n).map(spt).sum::<u64>() / zones_n;
        let cylinders = sectors.div_ceil(avg * u64::from(p.heads)).max(zones_n);
        let per_zone = cylinders / zones_n;
        let mut zones = Vec::new();
        let (mut lba, mut cyl) = (0u64, 0u64);
        for z in 0..zones_n {
            zones.push(Zone { first_lba: lba, first_cyl: cyl, spt: spt(z) });
            lba += per_zone * spt(z) * u64::from(p.heads);
            cyl += per_zone;
        }
        Hdd {
            p,
            rev_ns,
            zones,
            sectors,
            now: 0,
            head_cyl: 0,
            head_lba: 0,
            media: None,
            queue: Vec::new(),
            overflow: VecDeque::new(),
            dirty: BTreeMap::new(),
            dirty_bytes: 0,
            blocked: VecDeque::new(),
            flushes: Vec::new(),
            seq: 0,
            done: BinaryHeap::new(),
            durable: Vec::new(),
            ra: None,
            next_id: 0,
        }
    }

    fn place(&self, lba: u64) -> Place {
        let z = self.zones.partition_point(|z| z.first_lba <= lba).saturating_sub(1);
        let zone = self.zones[z];
        let per_cyl = zone.spt * u64::from(self.p.heads);
        let within = lba - zone.first_lba;
        Place {
            cyl: zone.first_cyl + within / per_cyl,
            angle: (within % zone.spt) as f64 / zone.spt as f64,
            sector_ns: self.rev_ns / zone.spt as f64,
        }
    }

    fn seek_ns(&self, d: u64) -> f64 {
        let p = &self.p;
        let ms = match d {
            0 => 0.0,
            d if d <= p.seek_boundary => p.seek_a_ms + p.seek_b_ms * (d as f64).sqrt(),
            d => p.seek_c_ms + p.seek_e_ms * d as f64,
        };
        ms * MS
    }

    fn overhead_ns(&self) -> f64 {
        self.p.overhead_ms * MS
    }

    fn bus_ns(&self, sectors: u64) -> Nanos {
        ((sectors * SECTOR) as f64 / (self.p.bus_mb_s * 1e6) * 1e9) as Nanos
    }

    /// Time from `at` with the head on `from` until `place` passes under
    /// it: overhead, seek, rotational wait.
    fn positioning(&self, at: Nanos, from: u64, place: Place) -> f64 {
        let arrive = at as f64 + self.overhead_ns() + self.seek_ns(from.abs_diff(place.cyl));
        let angle = (arrive / self.rev_ns).fract();
        let wait = (place.angle - angle).rem_euclid(1.0) * self.rev_ns;
        arrive - at as f64 + wait
    }

    fn finish(&mut self, id: u64, at: Nanos) {
        self.done.push(Reverse((at, id)));
    }

    /// The head is free at `now`: a queued request (shortest positioning
    /// first), else a destage, else nothing; a destage first when writes
    /// wait for room in the cache or a flush waits for it.
    fn start_next(&mut self) {
        while self.queue.len() < self.p.qd.max(1) as usize {
            let Some(op) = self.overflow.pop_front() else { break };
            self.queue.push(op);
        }
        if let Some(ra) = self.ra.as_mut().filter(|ra| ra.stop.is_none()) {
            if !self.queue.is_empty() || !self.dirty.is_empty() {
                ra.stop = Some(self.now);
            }
        }
        let from = self.head_cyl;
        // Writes waiting for room in the cache, or a flush waiting for
        // the destage, go before the reads queued (the cache would
        // otherwise fill for good behind them).
        let destage_first = !self.dirty.is_empty() && (!self.blocked.is_empty() || !self.flushes.is_empty());
        if !self.queue.is_empty() && !destage_first {
            self.start_host(from);
        } else if !self.dirty.is_empty() {
            self.start_destage(from);
        }
    }

    /// Starts the queued request with the shortest aged positioning time
    /// from cylinder `from`.
    fn start_host(&mut self, from: u64) {
        // Aged shortest positioning time first (Jacobson and Wilkes):
        // each nanosecond waited takes `age_weight` off a request's
        // positioning time, so none starves behind nearer ones.
        let now = self.now;
        let (best, _) = self
            .queue
            .iter()
            .enumerate()
            .map(|(i, op)| {
                let waited = now.saturating_sub(op.arrived) as f64;
                (i, self.positioning(now, from, op.place) - self.p.age_weight * waited)
            })
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .expect("the queue is not empty");
        let op = self.queue.swap_remove(best);
        self.head_lba = op.lba + op.sectors;
        let end = self.now as f64
            + self.positioning(self.now, from, op.place)
            + op.sectors as f64 * op.place.sector_ns;
        self.head_cyl = op.place.cyl;
        self.media = Some((end as Nanos, Work::Host(op)));
    }

    /// Starts destaging what is nearest the head among the dirty extents.
    fn start_destage(&mut self, from: u64) {
        // Destage what is nearest among the dirty extents around the head,
        // with the extents that follow it on the disk (as a cache writes a
        // segment back in one go).
        let head_lba = self.head_lba;
        let after = self.dirty.range(head_lba..).take(16);
        let before = self.dirty.range(..head_lba).rev().take(16);
        let (lba, d) = after
            .chain(before)
            .map(|(lba, d)| (*lba, *d))
            .min_by(|a, b| {
                self.positioning(self.now, from, a.1.place)
                    .total_cmp(&self.positioning(self.now, from, b.1.place))
            })
            .expect("some extent is dirty");
        self.dirty.remove(&lba);
        let (mut sectors, mut seq) = (d.sectors, d.seq);
        while sectors < DESTAGE_SECTORS_MAX {
            let Some(next) = self.dirty.get(&(lba + sectors)).copied() else { break };
            self.dirty.remove(&(lba + sectors));
            sectors += next.sectors;
            seq = seq.max(next.seq);
        }
        let d = Dirty { sectors, seq, place: d.place };
        let end = self.now as f64
            + self.positioning(self.now, from, d.place)
            + d.sectors as f64 * d.place.sector_ns;
        self.head_lba = lba + sectors;
        self.head_cyl = d.place.cyl;
        self.media = Some((end as Nanos, Work::Destage { lba, sectors: d.sectors, seq: d.seq }));
    }

    /// The head finished its work at `now`.
    fn complete_media(&mut self, work: Work) {
        match work {
            Work::Host(op) if op.write => {
                self.durable.push((op.lba, op.sectors));
                self.finish(op.id, self.now);
            }
            Work::Host(op) => {
                let limit = (op.lba + op.sectors + self.p.readahead_bytes / SECTOR).min(self.sectors);
                self.ra = Some(ReadAhead {
                    start: op.lba + op.sectors,
                    limit,
                    t0: self.now,
                    sector_ns: op.place.sector_ns,
                    stop: None,
                });
                let at = self.now + self.bus_ns(op.sectors);
                self.finish(op.id, at);
            }
            Work::Destage { lba, sectors, .. } => {
                self.durable.push((lba, sectors));
                self.dirty_bytes -= sectors * SECTOR;
                self.admit_blocked();
                self.settle_flushes();
            }
        }
    }

    fn admit_blocked(&mut self) {
        while let Some(&(id, lba, sectors)) = self.blocked.front() {
            if self.dirty_bytes + sectors * SECTOR > self.p.cache_bytes && self.dirty_bytes > 0 {
                break;
            }
            self.blocked.pop_front();
            self.cache_write(lba, sectors);
            let at = self.now + (self.overhead_ns() as Nanos) + self.bus_ns(sectors);
            self.finish(id, at);
        }
    }

    fn cache_write(&mut self, lba: u64, sectors: u64) {
        self.seq += 1;
        let place = self.place(lba);
        if let Some(old) = self.dirty.insert(lba, Dirty { sectors, seq: self.seq, place }) {
            self.dirty_bytes -= old.sectors * SECTOR;
        }
        self.dirty_bytes += sectors * SECTOR;
    }

    /// The sequence number of the oldest write still only in the cache
    /// (waiting, or being destaged now).
    fn oldest_unstable(&self) -> Option<u64> {
        let destaging = match self.media {
            Some((_, Work::Destage { seq, .. })) => Some(seq),
            _ => None,
        };
        self.dirty.values().map(|d| d.seq).chain(destaging).min()
    }

    /// Flushes whose writes are all destaged complete now.
    fn settle_flushes(&mut self) {
        let oldest = self.oldest_unstable().unwrap_or(u64::MAX);
        let blocked = !self.blocked.is_empty();
        let now = self.now;
        let mut settled = Vec::new();
        self.flushes.retain(|&(id, seq)| {
            let waiting = oldest <= seq || blocked;
            if !waiting {
                settled.push(id);
            }
            waiting
        });
        for id in settled {
            self.finish(id, now);
        }
    }
}

impl Model for Hdd {
    fn submit(&mut self, at: Nanos, op: VOp, offset: u64, len: u64) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        if at > self.now && self.media.is_none() {
            self.now = at;
        }
        let (lba, sectors) = (offset / SECTOR, len / SECTOR);
        let overhead = self.overhead_ns() as Nanos;
        match op {
            VOp::Read => {
                let cached = self.dirty.get(&lba).is_some_and(|d| d.sectors >= sectors);
                if cached {
                    let done = at + overhead + self.bus_ns(sectors);
                    self.finish(id, done);
                } else if let Some(ready) = self.ra.and_then(|ra| ra.ready(lba, lba + sectors)) {
                    // A hit while the head still reads ahead: it reads on.
                    if let Some(ra) = self.ra.as_mut().filter(|ra| ra.stop.is_none()) {
                        ra.limit =
                            ra.limit.max((lba + sectors + self.p.readahead_bytes / SECTOR).min(self.sectors));
                    }
                    let done = (at + overhead).max(ready) + self.bus_ns(sectors);
                    self.finish(id, done);
                } else {
                    self.overflow.push_back(HostOp {
                        arrived: at,
                        id,
                        lba,
                        sectors,
                        write: false,
                        place: self.place(lba),
                    });
                }
            }
            VOp::Write => {
                if self.ra.is_some_and(|ra| lba < ra.limit && lba + sectors > ra.start) {
                    self.ra = None;
                }
                if !self.p.wce {
                    self.overflow.push_back(HostOp {
                        arrived: at,
                        id,
                        lba,
                        sectors,
                        write: true,
                        place: self.place(lba),
                    });
                } else if self.blocked.is_empty()
                    && (self.dirty_bytes + len <= self.p.cache_bytes || self.dirty_bytes == 0)
                {
                    self.cache_write(lba, sectors);
                    let done = at + overhead + self.bus_ns(sectors);
                    self.finish(id, done);
                } else {
                    self.blocked.push_back((id, lba, sectors));
                }
            }
            VOp::Flush => {
                if !self.p.wce
                    || self.p.flush_ignore
                    || (self.oldest_unstable().is_none() && self.blocked.is_empty())
                {
                    self.finish(id, at + overhead);
                } else {
                    self.flushes.push((id, self.seq));
                }
            }
        }
        id
    }

    fn next_event(&self) -> Option<Nanos> {
        let media = match self.media {
            Some((end, _)) => Some(end),
            None if !self.overflow.is_empty() || !self.queue.is_empty() || !self.dirty.is_empty() => {
                Some(self.now)
            }
            None => None,
        };
        let done = self.done.peek().map(|Reverse((t, _))| *t);
        media.into_iter().chain(done).min()
    }

    fn advance(&mut self, t: Nanos) -> Advance {
        loop {
            match self.media {
                Some((end, work)) if end <= t => {
                    self.now = self.now.max(end);
                    self.media = None;
                    self.complete_media(work);
                }
                Some(_) => break,
                None => {
                    let idle_work =
                        !self.overflow.is_empty() || !self.queue.is_empty() || !self.dirty.is_empty();
                    if !idle_work || self.now > t {
                        break;
                    }
                    self.start_next();
                    if self.media.is_none() {
                        break;
                    }
                }
            }
        }
        if self.media.is_none() {
            self.now = self.now.max(t);
        }
        let mut done = Vec::new();
        while let Some(Reverse((at, id))) = self.done.peek().copied() {
            if at > t {
                break;
            }
            self.done.pop();
            done.push((id, at));
        }
        Advance {
            done,
            durable: std::mem::take(&mut self.durable)
                .into_iter()
                .map(|(l, s)| (l * SECTOR, s * SECTOR))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hdd(f: impl FnOnce(&mut HddParams)) -> Hdd {
        let mut p = HddParams::default();
        f(&mut p);
        Hdd::new(p)
    }

    /// Runs the model until request `id` completes; its completion time.
    fn run_until(m: &mut Hdd, id: u64) -> Nanos {
        loop {
            let t = m.next_event().expect("the request completes");
            if let Some((_, at)) = m.advance(t).done.into_iter().find(|(i, _)| *i == id) {
                return at;
            }
        }
    }

    #[test]
    fn the_seek_curve_meets_at_its_boundary_and_grows() {
        let m = hdd(|_| {});
        let b = m.p.seek_boundary;
        assert!((m.seek_ns(b) - m.seek_ns(b + 1)).abs() < 0.01 * MS);
        assert!(m.seek_ns(1) < m.seek_ns(100) && m.seek_ns(100) < m.seek_ns(200_000));
        assert!((m.seek_ns(375_000) / MS - 17.0).abs() < 0.5, "full stroke {}", m.seek_ns(375_000) / MS);
    }

    #[test]
    fn a_sequential_read_runs_at_the_zones_rate() {
        let mut m = hdd(|p| p.wce = false);
        // 64 MiB in 128 KiB reads from the outer zone.
        let (mut t, chunk) = (0, 128 << 10);
        for i in 0..512u64 {
            let id = m.submit(t, VOp::Read, i * chunk, chunk);
            t = run_until(&mut m, id);
        }
        let mb_s = 64.0 * 1048576.0 / (t as f64 / 1e9) / 1e6;
        let outer = 1800.0 * 512.0 / (60.0 / 7200.0) / 1e6;
        assert!(mb_s > 0.85 * outer && mb_s < 1.05 * outer, "{mb_s:.1} MB/s against the zone's {outer:.1}");
    }

    #[test]
    fn a_lone_random_read_costs_about_a_seek_and_half_a_revolution() {
        let mut m = hdd(|p| p.wce = false);
        let (mut total, n, mut t) = (0.0, 400u64, 0);
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let offset = (x % (m.sectors / 8)) * 4096;
            let id = m.submit(t, VOp::Read, offset, 4096);
            let done = run_until(&mut m, id);
            total += (done - t) as f64;
            t = done + 10 * MS as Nanos; // idle between: no read-ahead helps
        }
        let mean_ms = total / n as f64 / MS;
        // An average seek (a third of the stroke, about 8.5 ms) plus half a
        // revolution (4.2 ms) plus overhead and transfer.
        assert!(mean_ms > 11.0 && mean_ms < 15.5, "{mean_ms:.2} ms");
    }

    #[test]
    fn with_the_cache_off_a_flush_is_free() {
        let mut m = hdd(|p| p.wce = false);
        let w = m.submit(0, VOp::Write, 0, 4096);
        let t = run_until(&mut m, w);
        let f = m.submit(t, VOp::Flush, 0, 0);
        let done = run_until(&mut m, f);
        assert!((done - t) as f64 <= 0.11 * MS, "{}", done - t);
    }

    #[test]
    fn with_the_cache_on_a_write_is_fast_and_a_flush_waits_for_the_destage() {
        let mut m = hdd(|_| {});
        let w = m.submit(0, VOp::Write, 200_000_000_000, 4096);
        let acked = run_until(&mut m, w);
        assert!((acked as f64) < 0.2 * MS, "acknowledged from the cache: {acked}");
        let f = m.submit(acked, VOp::Flush, 0, 0);
        let flushed = run_until(&mut m, f);
        assert!((flushed - acked) as f64 > 1.0 * MS, "the flush waited for the destage: {}", flushed - acked);
    }

    #[test]
    fn a_cache_that_ignores_flushes_answers_at_once() {
        let mut m = hdd(|p| p.flush_ignore = true);
        let w = m.submit(0, VOp::Write, 200_000_000_000, 4096);
        let acked = run_until(&mut m, w);
        let f = m.submit(acked, VOp::Flush, 0, 0);
        let flushed = run_until(&mut m, f);
        assert!(((flushed - acked) as f64) < 0.2 * MS, "{}", flushed - acked);
    }

    #[test]
    fn deeper_queues_serve_random_reads_faster() {
        let iops = |depth: u64| {
            let mut m = hdd(|p| p.wce = false);
            let mut x = 12345u64;
            let mut next = || {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x % (m.sectors / 8)) * 4096
            };
            let mut t = 0;
            let mut offsets: Vec<u64> = (0..2000).map(|_| next()).collect();
            for _ in 0..depth {
                let o = offsets.pop().unwrap();
                m.submit(0, VOp::Read, o, 4096);
            }
            let mut done = 0;
            while done < 1500 {
                t = m.next_event().unwrap();
                for _ in m.advance(t).done {
                    done += 1;
                    let o = offsets.pop().unwrap();
                    m.submit(t, VOp::Read, o, 4096);
                }
            }
            done as f64 / (t as f64 / 1e9)
        };
        let (one, thirty_two) = (iops(1), iops(32));
        assert!(thirty_two > 1.8 * one, "depth 1: {one:.0} IOPS, depth 32: {thirty_two:.0}");
    }

    #[test]
    fn aging_keeps_a_far_request_from_starving() {
        let worst = |age: f64| {
            let mut m = hdd(|p| {
                p.wce = false;
                p.age_weight = age;
            });
            let (mut x, span) = (777u64, m.sectors / 8);
            let mut next = || {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x % span) * 4096
            };
            let mut arrived = std::collections::HashMap::new();
            for _ in 0..32 {
                let o = next();
                arrived.insert(m.submit(0, VOp::Read, o, 4096), 0);
            }
            let (mut done, mut worst) = (0, 0);
            while done < 3000 {
                let t = m.next_event().unwrap();
                for (id, at) in m.advance(t).done {
                    done += 1;
                    worst = worst.max(at - arrived.remove(&id).unwrap());
                    let o = next();
                    arrived.insert(m.submit(t, VOp::Read, o, 4096), t);
                }
            }
            worst
        };
        let (pure, aged) = (worst(0.0), worst(HddParams::default().age_weight));
        assert!((aged as f64) < 0.7 * pure as f64, "worst wait {aged} ns aged, {pure} ns without");
    }

    #[test]
    fn a_destage_writes_contiguous_extents_in_one_go() {
        let mut m = hdd(|_| {});
        let mut t = 0;
        // 8 MiB in 4 KiB writes, one after another, into the cache.
        for i in 0..2048u64 {
            let id = m.submit(t, VOp::Write, i * 4096, 4096);
            t = run_until(&mut m, id);
        }
        let f = m.submit(t, VOp::Flush, 0, 0);
        let flushed = run_until(&mut m, f);
        // At the outer zone's 110 MB/s, 8 MiB takes under 0.1 s; a
        // revolution per 4 KiB would take 17 s.
        assert!(((flushed - t) as f64) < 0.5e9, "{} ms to destage", (flushed - t) / 1_000_000);
    }
}
