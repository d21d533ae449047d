//! Checksummed records: a byte range whose crc32c (Castagnoli) is stored,
//! little-endian, in a 4-byte field of its own. A record whose checksum
//! does not match is treated as absent or torn, never trusted.

use crate::le::{LeReader, LeWriter, OutOfBounds};

/// How a record's checksum field takes part in its own checksum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrcField {
    /// Counted as four zero bytes: the convention of docs/formats.md (the
    /// validation stamp and journal, the volume metadata).
    Zeroed,
    /// Left out: the bytes before it, then the bytes after it (the block
    /// log's commit header and record headers).
    Skipped,
}

/// Why a record's checksum does not hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The record is too short to hold its checksum field.
    #[error(transparent)]
    OutOfBounds(#[from] OutOfBounds),
    /// The checksum stored is not the one computed.
    #[error("checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    Mismatch { stored: u32, computed: u32 },
}

/// Where a record keeps its crc32c and how the field is covered.
///
/// `prefix` bytes, when a format has them, are checksummed before the
/// record without being stored in it (the validation journal seeds a
/// record's checksum with its generation, so a record of an older
/// generation left in a reused slot never passes); most formats pass `&[]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    crc_at: usize,
    field: CrcField,
}

impl Frame {
    /// The checksum at `crc_at`, covering the record with the field zero.
    pub const fn zeroed(crc_at: usize) -> Frame {
        Frame { crc_at, field: CrcField::Zeroed }
    }

    /// The checksum at `crc_at`, covering the record without the field.
    pub const fn skipped(crc_at: usize) -> Frame {
        Frame { crc_at, field: CrcField::Skipped }
    }

    /// The crc32c of `prefix` then `record`, its checksum field covered as
    /// this frame says.
    pub fn checksum(&self, prefix: &[u8], record: &[u8]) -> Result<u32, OutOfBounds> {
        // The field lies inside the record: checked here, once.
        LeReader::new(record).bytes(self.crc_at, 4)?;
        let (before, after) = (&record[..self.crc_at], &record[self.crc_at + 4..]);
        let head = crc32c::crc32c_append(crc32c::crc32c(prefix), before);
        let head = match self.field {
            CrcField::Zeroed => crc32c::crc32c_append(head, &[0; 4]),
            CrcField::Skipped => head,
        };
        Ok(crc32c::crc32c_append(head, after))
    }

    /// Computes the checksum of `record` and stores it in its field.
    ///
    /// # Panics
    ///
    /// When `record` cannot hold the field: a bug in the encoder that
    /// sized it (see [`LeWriter`]).
    pub fn seal(&self, prefix: &[u8], record: &mut [u8]) {
        let crc = self.checksum(prefix, record).unwrap_or_else(|e| panic!("encoder bug: {e}"));
        LeWriter::new(record).put_u32(self.crc_at, crc);
    }

    /// Checks the checksum stored in `record`.
    pub fn verify(&self, prefix: &[u8], record: &[u8]) -> Result<(), FrameError> {
        let stored = LeReader::new(record).u32(self.crc_at)?;
        let computed = self.checksum(prefix, record)?;
        if stored != computed {
            return Err(FrameError::Mismatch { stored, computed });
        }
        Ok(())
    }
}
