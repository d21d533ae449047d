//! Request generation: a deterministic stream of (op, offset, length) per
//! thread, following the job's mix, skew and alignment. The same seed and
//! thread index always give the same stream.

use rand::distr::weighted::WeightedIndex;
use rand::distr::Distribution;
use rand::{Rng, SeedableRng};
use rand_distr::Zipf;
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::spec::{BlockSizes, JobSpec, Region, Skew, Trimming};

pub use crate::kind::IoKind;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    pub kind: IoKind,
    pub offset: u64,
    pub len: u64,
    /// A replayed trace syncs after this request: flush once it completes.
    pub flush_after: bool,
}

enum SizeGen {
    Fixed(u64),
    Split { sizes: Vec<u64>, index: WeightedIndex<u32> },
    Range { min_steps: u64, max_steps: u64, step: u64 },
}

enum PlaceGen {
    Uniform,
    Zipf(Zipf<f64>),
    Hot {
        io_pct: u8,
        region_pct: u8,
    },
    /// fio's zones: (I/O share, region share), in percent.
    Zoned(Vec<(u8, u8)>),
}

/// A large prime, coprime with any slot count below it, used to scatter
/// zipf ranks over the region so the hot blocks are not all at its start.
const SCATTER_PRIME: u128 = (1 << 61) - 1;

/// One thread's request stream.
pub struct RequestGen {
    rng: Xoshiro256PlusPlus,
    region: Region,
    /// The part of the region this thread walks sequentially.
    seq_start: u64,
    seq_len: u64,
    /// Where the thread's last request ended (aligned up); `None` before
    /// the first.
    last_end: Option<u64>,
    skip: i64,
    trimming: Trimming,
    /// Under `trimwrite`: the block just discarded, written next.
    write_next: Option<(u64, u64)>,
    read_pct: u8,
    seek_pct: u8,
    sizes: SizeGen,
    place: PlaceGen,
}

impl RequestGen {
    /// The stream of thread `thread` of `threads` for `job` on `region`.
    /// Sequential streams split the region into one slice per thread.
    pub fn new(job: &JobSpec, region: Region, thread: u32, threads: u32) -> RequestGen {
        debug_assert!(region.len >= job.bs.max_bytes() && region.len % region.align == 0);
        let seed = job.seed ^ u64::from(thread).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let slots = region.len / region.align;
        let slice_slots = (slots / u64::from(threads)).max(1);
        let mut seq_start = region.start + u64::from(thread) * slice_slots * region.align;
        let mut seq_len = slice_slots * region.align;
        if seq_len < job.bs.max_bytes() || seq_start + seq_len > region.start + region.len {
            // Too many threads for the region: everyone walks all of it.
            seq_start = region.start;
            seq_len = region.len;
        }
        let sizes = match &job.bs {
            BlockSizes::Fixed(n) => SizeGen::Fixed(*n),
            BlockSizes::Split { sizes, .. } => SizeGen::Split {
                sizes: sizes.iter().map(|s| s.0).collect(),
                // Invariant: parse() keeps only positive weights and at least one.
                index: WeightedIndex::new(sizes.iter().map(|s| s.1)).expect("positive weights"),
            },
            BlockSizes::Range { min, max, step } => {
                SizeGen::Range { min_steps: min / step, max_steps: max / step, step: *step }
            }
        };
        let place = match job.skew.clone() {
            Skew::Uniform => PlaceGen::Uniform,
            // Invariant: theta was checked to be in (0, 10] and slots >= 1.
            Skew::Zipf { theta } => PlaceGen::Zipf(Zipf::new(slots as f64, theta).expect("valid zipf")),
            Skew::Hot { io_pct, region_pct } => PlaceGen::Hot { io_pct, region_pct },
            Skew::Zoned { zones } => PlaceGen::Zoned(zones),
        };
        RequestGen {
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            region,
            seq_start,
            seq_len,
            last_end: None,
            skip: job.skip_bytes,
            trimming: job.rw.trimming(),
            write_next: None,
            read_pct: job.read_pct,
            seek_pct: job.seek_pct,
            sizes,
            place,
        }
    }

    /// Where the thread's region starts: a replayed trace's offsets count
    /// from here.
    pub fn region_start(&self) -> u64 {
        self.region.start
    }

    pub fn next_request(&mut self) -> Request {
        if let Some((offset, len)) = self.write_next.take() {
            return Request { kind: IoKind::Write, offset, len, flush_after: false };
        }
        let kind = match self.read_pct {
            100 => IoKind::Read,
            0 => IoKind::Write,
            pct => {
                if self.rng.random_range(0..100) < pct {
                    IoKind::Read
                } else {
                    IoKind::Write
                }
            }
        };
        let len = self.next_len();
        let seek = match self.seek_pct {
            100 => true,
            0 => false,
            pct => self.rng.random_range(0..100) < pct,
        };
        let offset = if seek { self.random_offset(len) } else { self.sequential_offset(len) };
        debug_assert!(offset >= self.region.start && offset + len <= self.region.start + self.region.len);
        let kind = match self.trimming {
            Trimming::None => kind,
            Trimming::All => IoKind::Trim,
            Trimming::ThenWrite => {
                self.write_next = Some((offset, len));
                IoKind::Trim
            }
        };
        Request { kind, offset, len, flush_after: false }
    }

    fn next_len(&mut self) -> u64 {
        match &self.sizes {
            SizeGen::Fixed(n) => *n,
            SizeGen::Split { sizes, index } => sizes[index.sample(&mut self.rng)],
            SizeGen::Range { min_steps, max_steps, step } => {
                self.rng.random_range(*min_steps..=*max_steps) * step
            }
        }
    }

    /// The request after the last one, `skip` bytes past its end (fio's
    /// `rw=read:N`): forward from the slice's start, wrapping to it past
    /// the end; with a negative skip backward from the slice's end,
    /// wrapping to it past the start (as fio).
    fn sequential_offset(&mut self, len: u64) -> u64 {
        let (start, end) = (self.seq_start, self.seq_start + self.seq_len);
        let next = match self.last_end {
            None if self.skip < 0 => end.checked_add_signed(self.skip),
            None => Some(start),
            Some(last) => last.checked_add_signed(self.skip),
        };
        let offset = match next {
            Some(o) if o >= start && o + len <= end => o,
            // Invariant (JobSpec::check_skip): a negative skip is at least
            // the largest transfer and smaller than the region.
            _ if self.skip < 0 => end.saturating_add_signed(self.skip).max(start),
            _ => start,
        };
        self.last_end = Some(offset + len.next_multiple_of(self.region.align));
        offset
    }

    fn random_offset(&mut self, len: u64) -> u64 {
        let align = self.region.align;
        // Slots where a transfer of `len` fits entirely inside the region.
        let slots = (self.region.len - len) / align + 1;
        let slot = match &self.place {
            PlaceGen::Uniform => self.rng.random_range(0..slots),
            PlaceGen::Zipf(zipf) => {
                let rank = (zipf.sample(&mut self.rng) as u64).saturating_sub(1);
                ((u128::from(rank) * SCATTER_PRIME) % u128::from(slots)) as u64
            }
            PlaceGen::Hot { io_pct, region_pct } => {
                let hot_slots = (slots * u64::from(*region_pct) / 100).clamp(1, slots);
                if self.rng.random_range(0..100) < *io_pct || hot_slots == slots {
                    self.rng.random_range(0..hot_slots)
                } else {
                    self.rng.random_range(hot_slots..slots)
                }
            }
            PlaceGen::Zoned(zones) => {
                let pick = self.rng.random_range(0..100u32);
                let within = zone_slots(zones, pick, slots);
                self.rng.random_range(within)
            }
        };
        let offset = self.region.start + slot * align;
        // Random placement continues sequentially from here when seekpct < 100.
        self.last_end = Some((offset + len.next_multiple_of(align)).min(self.seq_start + self.seq_len));
        offset
    }
}

/// The slots of the zone whose cumulative I/O share passes `pick`
/// (0..100), laid from the region's start: at least one slot, inside the
/// `slots` a request of this size has.
fn zone_slots(zones: &[(u8, u8)], pick: u32, slots: u64) -> std::ops::Range<u64> {
    let (mut io, mut region) = (0u32, 0u64);
    for &(share, size) in zones {
        let start = slots * region / 100;
        io += u32::from(share);
        region += u64::from(size);
        if pick < io {
            let start = start.min(slots - 1);
            return start..(slots * region / 100).clamp(start + 1, slots);
        }
    }
    // Unreachable for a parsed skew (the shares add up to 100).
    0..slots
}
