//! What is wrong with a field of the file system's own structures (the
//! superblock slots, the group headers, the extended attribute blocks):
//! the device, the structure,
//! the byte on the device, the field as docs/formats.md ("File system")
//! names it, the value found and the bound it breaks. Decoders return
//! these instead of panicking or trusting the value.

use std::fmt;

use codec::{Frame, FrameError, LeReader};

/// Which structure a field belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// Superblock slot 0 or 1 (blocks 0 and 1).
    SuperblockSlot(u8),
    /// The header of group `g` (the first block of the group).
    GroupHeader(u32),
    /// The extended attribute block `block` inode `ino` points at.
    XattrBlock { ino: u32, block: u32 },
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Place::SuperblockSlot(slot) => write!(f, "superblock slot {slot}"),
            Place::GroupHeader(g) => write!(f, "group {g}'s header"),
            Place::XattrBlock { ino, block } => write!(f, "inode {ino}'s extended attribute block {block}"),
        }
    }
}

/// What is wrong with the field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    /// Fewer bytes were given than the structure has.
    CutShort { have: usize, needed: usize },
    /// The magic is not the structure's (`found` the eight bytes read).
    Magic { found: [u8; 8], expected: &'static str },
    /// A format version this iolab does not read (the value is the
    /// version); it reads `oldest` to `newest`.
    Version { oldest: u32, newest: u32 },
    /// The checksum stored is not the one computed: torn, damaged or
    /// overwritten.
    Checksum { stored: u32, computed: u32 },
    /// The value is past its documented bound, which says what it must be.
    OutOfBounds { bound: String },
}

/// A field of an on-disk structure that fails its check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldFault {
    /// The device it was read from (its name).
    pub device: String,
    pub place: Place,
    /// Byte offset on the device of the field (of the offending byte, for
    /// reserved bytes that must be zero).
    pub offset: u64,
    /// The field's name in docs/formats.md.
    pub field: &'static str,
    /// The value found (little-endian, widened; for a magic, its bytes as
    /// a little-endian u64).
    pub value: u64,
    pub problem: Problem,
}

impl fmt::Display for FieldFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let FieldFault { device, place, offset, field, value, problem } = self;
        write!(f, "{device}: {place}, byte {offset} ({field}): ")?;
        match problem {
            Problem::CutShort { have, needed } => {
                write!(f, "cut short: {have} bytes where the structure needs {needed}")
            }
            Problem::Magic { found, expected } => {
                write!(f, "reads {}, not the magic {expected}", show_magic(found))
            }
            Problem::Version { oldest, newest } if oldest == newest => {
                write!(f, "version {value}; this iolab reads version {newest}")
            }
            Problem::Version { oldest, newest } => {
                write!(f, "version {value}; this iolab reads versions {oldest} to {newest}")
            }
            Problem::Checksum { stored, computed } => write!(
                f,
                "checksum mismatch (stored {stored:#010x}, computed {computed:#010x}): damaged, torn or overwritten"
            ),
            Problem::OutOfBounds { bound } => write!(f, "{value} is out of bounds: {bound}"),
        }
    }
}

impl std::error::Error for FieldFault {}

fn show_magic(found: &[u8; 8]) -> String {
    if found.iter().all(|&b| b == 0) {
        return "zeros".into();
    }
    format!("\"{}\"", found.escape_ascii())
}

/// Reads the fields of one structure by offset, each read checked, and
/// makes the faults that name them.
pub(crate) struct Fields<'a> {
    pub bytes: &'a [u8],
    pub device: &'a str,
    pub place: Place,
    /// Byte offset of the structure on the device.
    pub base: u64,
}

impl Fields<'_> {
    pub fn fault(&self, at: usize, field: &'static str, value: u64, problem: Problem) -> FieldFault {
        FieldFault {
            device: self.device.to_string(),
            place: self.place,
            offset: self.base + at as u64,
            field,
            value,
            problem,
        }
    }

    pub fn out_of_bounds(&self, at: usize, field: &'static str, value: u64, bound: String) -> FieldFault {
        self.fault(at, field, value, Problem::OutOfBounds { bound })
    }

    /// The little-endian field of `width` bytes (1, 2, 4 or 8) at `at`, widened.
    pub fn read(&self, at: usize, width: usize, field: &'static str) -> Result<u64, FieldFault> {
        let r = LeReader::new(self.bytes);
        let value = match width {
            1 => r.u8(at).map(u64::from),
            2 => r.u16(at).map(u64::from),
            4 => r.u32(at).map(u64::from),
            _ => r.u64(at),
        };
        let needed = at + width;
        value.map_err(|_| self.fault(at, field, 0, Problem::CutShort { have: self.bytes.len(), needed }))
    }

    /// The field at `at`, if `ok` holds for it; else a fault saying `bound`.
    pub fn within(
        &self,
        (at, width, field): (usize, usize, &'static str),
        ok: impl FnOnce(u64) -> bool,
        bound: impl FnOnce() -> String,
    ) -> Result<u64, FieldFault> {
        let value = self.read(at, width, field)?;
        if ok(value) {
            return Ok(value);
        }
        Err(self.out_of_bounds(at, field, value, bound()))
    }

    /// The structure is whole (`covered` bytes), carries `magic` and a
    /// version of `versions` (at byte 8), and its crc32c (at byte 12, over
    /// the `covered` bytes with the field zero) matches. Returns the
    /// version.
    pub fn whole(
        &self,
        magic: &'static [u8; 8],
        versions: std::ops::RangeInclusive<u32>,
        covered: usize,
    ) -> Result<u32, FieldFault> {
        self.whole_seeded(magic, versions, covered, &[])
    }

    /// [`Fields::whole`], with `seed` checksummed before the structure
    /// (an inode number, which a structure written for another inode, or
    /// to the wrong place, does not match).
    pub fn whole_seeded(
        &self,
        magic: &'static [u8; 8],
        versions: std::ops::RangeInclusive<u32>,
        covered: usize,
        seed: &[u8],
    ) -> Result<u32, FieldFault> {
        let name = |m: &'static [u8; 8]| std::str::from_utf8(m).unwrap_or("its magic");
        let Ok(record) = LeReader::new(self.bytes).bytes(0, covered) else {
            let problem = Problem::CutShort { have: self.bytes.len(), needed: covered };
            return Err(self.fault(0, "structure", 0, problem));
        };
        let found: [u8; 8] = LeReader::new(record).array(0).unwrap_or_default();
        if &found != magic {
            let problem = Problem::Magic { found, expected: name(magic) };
            return Err(self.fault(0, "magic", u64::from_le_bytes(found), problem));
        }
        let found = self.read(8, 4, "version")?;
        let Some(version) = u32::try_from(found).ok().filter(|v| versions.contains(v)) else {
            let problem = Problem::Version { oldest: *versions.start(), newest: *versions.end() };
            return Err(self.fault(8, "version", found, problem));
        };
        match FRAME.verify(seed, record) {
            Ok(()) => Ok(version),
            Err(FrameError::Mismatch { stored, computed }) => {
                Err(self.fault(12, "crc32c", u64::from(stored), Problem::Checksum { stored, computed }))
            }
            Err(FrameError::OutOfBounds(_)) => {
                Err(self.fault(12, "crc32c", 0, Problem::CutShort { have: record.len(), needed: 16 }))
            }
        }
    }

    /// Every byte of `at..at + len` is zero.
    pub fn zero(&self, at: usize, len: usize, field: &'static str) -> Result<(), FieldFault> {
        let bytes = LeReader::new(self.bytes).bytes(at, len).map_err(|_| {
            self.fault(at, field, 0, Problem::CutShort { have: self.bytes.len(), needed: at + len })
        })?;
        match bytes.iter().position(|&b| b != 0) {
            None => Ok(()),
            Some(i) => {
                let value = u64::from(bytes[i]);
                Err(self.out_of_bounds(at + i, field, value, "reserved, must be zero".into()))
            }
        }
    }
}

/// The checksum of the superblock and of a group header: at byte 12, over
/// the structure's 512 bytes with the field zero.
const FRAME: Frame = Frame::zeroed(12);
