//! The stamp at the start of every validated sector, and the data after it.
//!
//! Layout (little-endian, docs/formats.md "Validation stamp"):
//! ```text
//!  0  magic     [u8; 8]  "IOLABSTP"
//!  8  version   u32      1
//! 12  crc32c    u32      over the whole sector with this field zero
//! 16  address   u64      byte offset of this sector on the target
//! 24  sequence  u64      write sequence number within the run
//! 32  time_ns   u64      write time, ns since the Unix epoch
//! 40  run_id    u64      identifies the validation run (and the target)
//! 48  key       u8       1..=255, the block's key at this write
//! 49  set       u8       version 2: 0 own, else the shared unit copied
//! 50  reserved  [u8; 14] zero
//! 64  data      words derived from (address, key, run_id, set)
//! ```
//!
//! A sector of a duplicate unit (`--dedupe-ratio` under validation) is a
//! copy of one of [`DUPLICATE_SETS`] shared units, the same wherever it
//! lands, so its fields cannot say where or when it was written: its
//! `address` is its offset inside the unit, `sequence` and `time_ns` are
//! zero, and `key` is the unit's version (1 + the block's key mod 3),
//! enough to tell a rewrite from the write before it.

use codec::{Frame, FrameError, LeReader, LeWriter, OutOfBounds};

pub const STAMP_MAGIC: &[u8; 8] = b"IOLABSTP";
/// The version a stamp with a `set` is written with; a sector's own
/// stamp (set 0) is written as version 1, byte for byte as before.
pub const STAMP_VERSION: u32 = 2;
pub const STAMP_HEADER_BYTES: usize = 64;
/// A sector's checksum: at byte 12, over the whole sector with the field
/// zero.
const STAMP_FRAME: Frame = Frame::zeroed(12);

/// The header fields of one stamped sector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    pub address: u64,
    pub sequence: u64,
    pub time_ns: u64,
    pub run_id: u64,
    pub key: u8,
    /// 0: the sector's own stamp; 1..=[`DUPLICATE_SETS`]: a sector of a
    /// duplicate unit, a copy of shared unit `set` (version 2).
    pub set: u8,
}

/// Why a sector does not hold a valid stamp.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StampError {
    /// Every byte is zero.
    Zeros,
    /// No iolab stamp magic (foreign or garbage data).
    NoMagic,
    /// A stamp of a format version this iolab does not know.
    Version(u32),
    /// The magic is there but the checksum does not match: the sector was
    /// changed after it was written (or torn inside the sector).
    Checksum { stored: u32, computed: u32 },
    /// The checksum holds but a field is out of its bounds (key 0, an
    /// address off a 512-byte boundary): no iolab writer makes such a
    /// stamp.
    Field { field: &'static str, value: u64 },
}

/// splitmix64: a fast bijective mixer, enough to make every sector's data
/// differ per address, key and run.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn data_seed(address: u64, key: u8, run_id: u64, set: u8) -> u64 {
    mix(address ^ mix(run_id ^ u64::from(key).rotate_left(56) ^ u64::from(set).rotate_left(48)))
}

/// The data words after a sector's header: word `i` is `mix(seed + i)`.
#[inline(always)]
fn fill_words(words: &mut [u8], seed: u64) {
    for (i, word) in words.chunks_exact_mut(8).enumerate() {
        word.copy_from_slice(&mix(seed.wrapping_add(i as u64)).to_le_bytes());
    }
}

/// [`fill_words`] compiled for AVX2, four words at a time: half the time
/// of the baseline x86-64 build, the same bytes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn fill_words_avx2(words: &mut [u8], seed: u64) {
    fill_words(words, seed)
}

/// [`fill_words`], on AVX2 when the CPU has it.
pub fn fill_data(words: &mut [u8], seed: u64) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU was just found to support AVX2.
        return unsafe { fill_words_avx2(words, seed) };
    }
    fill_words(words, seed)
}

/// [`fill_data`] without AVX2, for tests that compare the two.
#[doc(hidden)]
pub fn fill_data_baseline(words: &mut [u8], seed: u64) {
    fill_words(words, seed)
}

/// Writes one stamped sector into `sector` (whose length is the sector size).
fn fill_sector(sector: &mut [u8], stamp: &Stamp) {
    debug_assert!(sector.len() >= STAMP_HEADER_BYTES && sector.len() % 8 == 0);
    let seed = data_seed(stamp.address, stamp.key, stamp.run_id, stamp.set);
    fill_data(&mut sector[STAMP_HEADER_BYTES..], seed);
    let version = if stamp.set == 0 { 1 } else { STAMP_VERSION };
    LeWriter::new(sector)
        .put_bytes(0, STAMP_MAGIC)
        .put_u32(8, version)
        .put_u32(12, 0)
        .put_u64(16, stamp.address)
        .put_u64(24, stamp.sequence)
        .put_u64(32, stamp.time_ns)
        .put_u64(40, stamp.run_id)
        .put_u8(48, stamp.key)
        .put_u8(49, stamp.set)
        .put_bytes(50, &[0; 14]);
}

/// Sets each sector's checksum (computed with the field zero, as
/// [`fill_sector`] leaves it).
fn seal_sectors(buf: &mut [u8], sector_bytes: usize) {
    let triples = buf.len() / sector_bytes / 3 * 3;
    let mut sectors = buf.chunks_exact_mut(sector_bytes);
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("sse4.2") {
        let mut three = sectors.by_ref().take(triples);
        while let (Some(a), Some(b), Some(c)) = (three.next(), three.next(), three.next()) {
            // SAFETY: the CPU was just found to support SSE 4.2.
            let crcs = unsafe { crc32c_three(a, b, c) };
            for (sector, crc) in [a, b, c].into_iter().zip(crcs) {
                LeWriter::new(sector).put_u32(12, crc);
            }
        }
    }
    for sector in sectors {
        STAMP_FRAME.seal(&[], sector);
    }
}

/// CRC-32C of three buffers of one length (a multiple of 8), computed
/// side by side: the instruction's latency is three cycles, so three
/// independent streams run in the time of one. A sector is too short for
/// the crc32c crate's own three-way split.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
fn crc32c_three(a: &[u8], b: &[u8], c: &[u8]) -> [u32; 3] {
    use std::arch::x86_64::_mm_crc32_u64;
    debug_assert!(a.len() == b.len() && b.len() == c.len() && a.len() % 8 == 0);
    let word = |s: &[u8], i: usize| u64::from_le_bytes(s[i..i + 8].try_into().expect("8 bytes"));
    let (mut x, mut y, mut z) = (u64::from(u32::MAX), u64::from(u32::MAX), u64::from(u32::MAX));
    for i in (0..a.len()).step_by(8) {
        x = _mm_crc32_u64(x, word(a, i));
        y = _mm_crc32_u64(y, word(b, i));
        z = _mm_crc32_u64(z, word(c, i));
    }
    [!(x as u32), !(y as u32), !(z as u32)]
}

/// The checksums [`fill_block`] gives `buf`'s sectors, one at a time with
/// the crc32c crate, for tests that compare the two.
#[doc(hidden)]
pub fn seal_sectors_baseline(buf: &mut [u8], sector_bytes: usize) {
    for sector in buf.chunks_exact_mut(sector_bytes) {
        sector[12..16].fill(0);
        let crc = crc32c::crc32c(sector);
        sector[12..16].copy_from_slice(&crc.to_le_bytes());
    }
}

/// Fills `buf` (a whole number of sectors, written at byte `offset`) with
/// stamped sectors of `key`, all carrying the same sequence number.
pub fn fill_block(
    buf: &mut [u8],
    sector_bytes: usize,
    offset: u64,
    key: u8,
    sequence: u64,
    time_ns: u64,
    run_id: u64,
) {
    debug_assert!(buf.len() % sector_bytes == 0 && key != 0);
    for (i, sector) in buf.chunks_exact_mut(sector_bytes).enumerate() {
        let address = offset + (i * sector_bytes) as u64;
        fill_sector(sector, &Stamp { address, sequence, time_ns, run_id, key, set: 0 });
    }
    seal_sectors(buf, sector_bytes);
}

/// Fills `buf` (one whole duplicate unit) with the sectors of shared unit
/// `set` at the version of `key` (see [`Duplicates`]): the same bytes
/// wherever the unit lands.
pub fn fill_duplicate(buf: &mut [u8], sector_bytes: usize, set: u8, key: u8, run_id: u64) {
    debug_assert!(buf.len() % sector_bytes == 0 && key != 0 && (1..=DUPLICATE_SETS).contains(&set));
    let version = Duplicates::version(key);
    for (i, sector) in buf.chunks_exact_mut(sector_bytes).enumerate() {
        let address = (i * sector_bytes) as u64;
        fill_sector(sector, &Stamp { address, sequence: 0, time_ns: 0, run_id, key: version, set });
    }
    seal_sectors(buf, sector_bytes);
}

/// How many shared units the duplicates of a validated run copy.
pub const DUPLICATE_SETS: u8 = 16;

/// Which key blocks of a validated run with `--dedupe-ratio` are copies
/// of a shared unit rather than their own, decided from where the block
/// is, its key and the run, so that a check knows without being told:
/// one block in `ratio` is its own on average, the others each a copy of
/// one of [`DUPLICATE_SETS`] units (docs/formats.md, "Validation stamp").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Duplicates {
    /// A block is its own when the top 53 bits of its hash are below this.
    own_below: u64,
    /// The ratio's bits (f64), as given.
    ratio_bits: u64,
}

impl Duplicates {
    /// Duplicates at `ratio`:1 (at least 1; None otherwise).
    pub fn new(ratio: f64) -> Option<Duplicates> {
        let own_below = ((1u64 << 53) as f64 / ratio) as u64;
        (ratio.is_finite() && ratio >= 1.0).then_some(Duplicates { own_below, ratio_bits: ratio.to_bits() })
    }

    pub fn ratio(&self) -> f64 {
        f64::from_bits(self.ratio_bits)
    }

    /// The shared unit (1..=[`DUPLICATE_SETS`]) the key block at byte
    /// `address` holds a copy of at `key`, or None when it holds its own
    /// stamps: `h = splitmix64(address ^ splitmix64(run_id ^ key << 56 ^
    /// DUPLICATE_SALT))`; its own when the top 53 bits of `h` are below
    /// floor(2^53 / ratio); else set 1 + splitmix64(h) mod 16.
    pub fn set_of(&self, address: u64, key: u8, run_id: u64) -> Option<u8> {
        let h = mix(address ^ mix(run_id ^ u64::from(key).rotate_left(56) ^ DUPLICATE_SALT));
        if h >> 11 < self.own_below {
            return None;
        }
        Some(1 + (mix(h) % u64::from(DUPLICATE_SETS)) as u8)
    }

    /// The version a duplicate unit written at `key` carries in its
    /// stamps' key field: 1 + key mod 3. Keys go 1, 2, …, 255, 1, and 255
    /// is a multiple of 3, so a block's version changes at every rewrite.
    pub fn version(key: u8) -> u8 {
        1 + key % 3
    }
}

/// Mixed into the choice of duplicates so it does not follow the data's
/// own seeds.
const DUPLICATE_SALT: u64 = 0xd0b1_e5e7_5a17_0001;

/// Reads and checks the stamp of one sector.
pub fn read_stamp(sector: &[u8]) -> Result<Stamp, StampError> {
    if sector.len() < STAMP_HEADER_BYTES || &sector[..8] != STAMP_MAGIC {
        if sector.iter().all(|&b| b == 0) {
            return Err(StampError::Zeros);
        }
        return Err(StampError::NoMagic);
    }
    // Every field lies inside the header just checked: no read fails.
    let Ok((version, stamp)) = stamp_fields(LeReader::new(sector)) else { return Err(StampError::NoMagic) };
    if !(1..=STAMP_VERSION).contains(&version) {
        return Err(StampError::Version(version));
    }
    match STAMP_FRAME.verify(&[], sector) {
        Ok(()) if stamp.key == 0 => Err(StampError::Field { field: "key", value: 0 }),
        // Version 1 had the byte reserved, zero; a duplicate is version 2
        // and its version is 1..=3.
        Ok(()) if stamp.set > DUPLICATE_SETS || (stamp.set != 0 && version == 1) => {
            Err(StampError::Field { field: "set", value: u64::from(stamp.set) })
        }
        Ok(()) if stamp.set != 0 && stamp.key > 3 => {
            Err(StampError::Field { field: "key", value: u64::from(stamp.key) })
        }
        Ok(()) if stamp.address % STAMP_ADDRESS_ALIGN != 0 => {
            Err(StampError::Field { field: "address", value: stamp.address })
        }
        Ok(()) => Ok(stamp),
        Err(FrameError::Mismatch { stored, computed }) => Err(StampError::Checksum { stored, computed }),
        Err(FrameError::OutOfBounds(_)) => Err(StampError::NoMagic),
    }
}

/// Every stamp's address is a multiple of this (the smallest sector).
const STAMP_ADDRESS_ALIGN: u64 = 512;

/// A stamp's version and fields.
fn stamp_fields(r: LeReader<'_>) -> Result<(u32, Stamp), OutOfBounds> {
    let stamp = Stamp {
        address: r.u64(16)?,
        sequence: r.u64(24)?,
        time_ns: r.u64(32)?,
        run_id: r.u64(40)?,
        key: r.u8(48)?,
        set: r.u8(49)?,
    };
    Ok((r.u32(8)?, stamp))
}
