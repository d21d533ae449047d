//! An SSD in virtual time: pages of 4 KiB spread over parallel channels
//! (page `p` on channel `p % channels`), each channel serving its pages in
//! turn with a read or program time, a command overhead and the host
//! interface's transfer. With power-loss protection a write is durable
//! once acknowledged and a flush is free; without it a flush waits for the
//! channels to drain (and takes its own time), and only the writes before
//! it are then durable.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use device::{Nanos, VOp};

use crate::model::{Advance, Model};
use crate::params::{SsdParams, US};

const PAGE: u64 = 4096;

pub(crate) struct Ssd {
    p: SsdParams,
    channel_free: Vec<Nanos>,
    done: BinaryHeap<Reverse<(Nanos, u64)>>,
    /// Writes acknowledged: when, and where (durable at once with PLP).
    written: Vec<(Nanos, u64, u64)>,
    /// Writes not yet made durable by a flush (without PLP).
    unflushed: Vec<(u64, u64)>,
    /// Flushes: when they complete, and what they make durable.
    flushes: Vec<(Nanos, Vec<(u64, u64)>)>,
    next_id: u64,
}

impl Ssd {
    pub fn new(p: SsdParams) -> Ssd {
        let channels = p.channels.max(1) as usize;
        Ssd {
            p,
            channel_free: vec![0; channels],
            done: BinaryHeap::new(),
            written: Vec::new(),
            unflushed: Vec::new(),
            flushes: Vec::new(),
            next_id: 0,
        }
    }

    fn bus_ns(&self, len: u64) -> Nanos {
        (len as f64 / (self.p.bus_mb_s * 1e6) * 1e9) as Nanos
    }

    /// Serves the pages of `offset..+len` on their channels from `from`;
    /// when the last is done.
    fn pages(&mut self, from: Nanos, offset: u64, len: u64, each_ns: Nanos) -> Nanos {
        let channels = self.channel_free.len() as u64;
        let mut last = from;
        for page in offset / PAGE..(offset + len).div_ceil(PAGE) {
            let c = (page % channels) as usize;
            let start = self.channel_free[c].max(from);
            self.channel_free[c] = start + each_ns;
            last = last.max(start + each_ns);
        }
        last
    }
}

impl Model for Ssd {
    fn submit(&mut self, at: Nanos, op: VOp, offset: u64, len: u64) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        let overhead = (self.p.overhead_us * US) as Nanos;
        let done = match op {
            VOp::Read => {
                let each = (self.p.read_us * US) as Nanos;
                self.pages(at + overhead, offset, len, each) + self.bus_ns(len)
            }
            VOp::Write => {
                let each = (self.p.write_us * US) as Nanos;
                let done = self.pages(at + overhead + self.bus_ns(len), offset, len, each);
                self.written.push((done, offset, len));
                if !self.p.plp {
                    self.unflushed.push((offset, len));
                }
                done
            }
            VOp::Flush if self.p.plp => at + overhead,
            VOp::Flush => {
                let drained = self.channel_free.iter().copied().max().unwrap_or(0).max(at + overhead);
                let done = drained + (self.p.flush_us * US) as Nanos;
                self.flushes.push((done, std::mem::take(&mut self.unflushed)));
                done
            }
        };
        self.done.push(Reverse((done, id)));
        id
    }

    fn next_event(&self) -> Option<Nanos> {
        self.done.peek().map(|Reverse((t, _))| *t)
    }

    fn advance(&mut self, t: Nanos) -> Advance {
        let mut out = Advance::default();
        while let Some(Reverse((at, id))) = self.done.peek().copied() {
            if at > t {
                break;
            }
            self.done.pop();
            out.done.push((id, at));
        }
        if self.p.plp {
            self.written.retain(|&(at, offset, len)| {
                let durable = at <= t;
                if durable {
                    out.durable.push((offset, len));
                }
                !durable
            });
        } else {
            self.written.retain(|&(at, _, _)| at > t);
            self.flushes.retain_mut(|(at, ranges)| {
                let durable = *at <= t;
                if durable {
                    out.durable.append(ranges);
                }
                !durable
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_until(m: &mut Ssd, id: u64) -> Nanos {
        loop {
            let t = m.next_event().expect("it completes");
            if let Some((_, at)) = m.advance(t).done.into_iter().find(|(i, _)| *i == id) {
                return at;
            }
        }
    }

    #[test]
    fn a_read_takes_the_overhead_the_channel_and_the_transfer() {
        let mut m = Ssd::new(SsdParams::default());
        let id = m.submit(0, VOp::Read, 0, 4096);
        let us = run_until(&mut m, id) as f64 / US;
        assert!((us - (10.0 + 80.0 + 7.4)).abs() < 1.0, "{us}");
    }

    #[test]
    fn pages_on_different_channels_go_in_parallel() {
        let mut m = Ssd::new(SsdParams::default());
        let id = m.submit(0, VOp::Read, 0, 8 * 4096);
        let us = run_until(&mut m, id) as f64 / US;
        assert!(us < 10.0 + 2.0 * 80.0 + 60.0, "eight pages on eight channels: {us}");
    }

    #[test]
    fn without_plp_a_flush_drains_and_makes_the_writes_before_it_durable() {
        let mut m = Ssd::new(SsdParams::default());
        let w = m.submit(0, VOp::Write, 0, 4096);
        let f = m.submit(0, VOp::Flush, 0, 0);
        let mut durable = Vec::new();
        let mut finished = Vec::new();
        while let Some(t) = m.next_event() {
            let a = m.advance(t);
            durable.extend(a.durable);
            finished.extend(a.done);
        }
        assert_eq!(durable, vec![(0, 4096)]);
        let at = |id| finished.iter().find(|(i, _)| *i == id).unwrap().1;
        assert!(at(f) >= at(w) + (500.0 * US) as Nanos, "the flush waited and took its time");
    }

    #[test]
    fn with_plp_a_flush_is_free() {
        let mut m = Ssd::new(SsdParams { plp: true, ..SsdParams::default() });
        m.submit(0, VOp::Write, 0, 4096);
        let f = m.submit(0, VOp::Flush, 0, 0);
        assert!(run_until(&mut m, f) as f64 <= 10.0 * US);
    }
}
