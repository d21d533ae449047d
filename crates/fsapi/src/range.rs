//! The calls on a range of a file beyond read and write: fallocate(2)'s
//! modes, lseek(2)'s SEEK_DATA and SEEK_HOLE, and copy_file_range(2),
//! with the checks Linux makes before a file system sees them, so that
//! every backend refuses the same requests the same way.

use crate::{Attr, Errno, FileType, Result};

/// What [`crate::FileSystem::fallocate`] does to a range: the modes of
/// fallocate(2) iolab offers. Any other (`FALLOC_FL_COLLAPSE_RANGE`,
/// `FALLOC_FL_INSERT_RANGE`, `FALLOC_FL_UNSHARE_RANGE`,
/// `FALLOC_FL_WRITE_ZEROES`, a punch without `FALLOC_FL_KEEP_SIZE`, bits
/// no mode has) is `EOPNOTSUPP` ([`Fallocate::from_mode`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fallocate {
    /// Mode 0 (or `FALLOC_FL_KEEP_SIZE`): every block of the range
    /// allocated, those that were holes reading as zeros; the size grows
    /// to the range's end unless `keep_size`.
    Allocate { keep_size: bool },
    /// `FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE`: the blocks wholly
    /// inside the range freed, the range's bytes in the blocks at its
    /// edges zeroed; the size never changes.
    PunchHole,
    /// `FALLOC_FL_ZERO_RANGE` (with or without `FALLOC_FL_KEEP_SIZE`):
    /// the range reads as zeros and its blocks are allocated; the size
    /// grows to its end unless `keep_size`.
    ZeroRange { keep_size: bool },
}

impl Fallocate {
    /// Every mode, for tests and tables that go through them all.
    pub const ALL: [Fallocate; 5] = [
        Fallocate::Allocate { keep_size: false },
        Fallocate::Allocate { keep_size: true },
        Fallocate::PunchHole,
        Fallocate::ZeroRange { keep_size: false },
        Fallocate::ZeroRange { keep_size: true },
    ];

    /// The mode fallocate(2)'s `mode` bits ask for; `EOPNOTSUPP` for the
    /// ones not offered (see the type).
    pub fn from_mode(mode: i32) -> Result<Fallocate> {
        let keep_size = mode & libc::FALLOC_FL_KEEP_SIZE != 0;
        match mode & !libc::FALLOC_FL_KEEP_SIZE {
            0 => Ok(Fallocate::Allocate { keep_size }),
            libc::FALLOC_FL_PUNCH_HOLE if keep_size => Ok(Fallocate::PunchHole),
            libc::FALLOC_FL_ZERO_RANGE => Ok(Fallocate::ZeroRange { keep_size }),
            _ => Err(Errno::OPNOTSUPP),
        }
    }

    /// The `mode` bits fallocate(2) takes for it.
    pub fn mode(self) -> i32 {
        let keep = |k: bool| if k { libc::FALLOC_FL_KEEP_SIZE } else { 0 };
        match self {
            Fallocate::Allocate { keep_size } => keep(keep_size),
            Fallocate::PunchHole => libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            Fallocate::ZeroRange { keep_size } => libc::FALLOC_FL_ZERO_RANGE | keep(keep_size),
        }
    }

    /// Whether the size stays as it is whatever the range.
    pub fn keeps_size(self) -> bool {
        match self {
            Fallocate::Allocate { keep_size } | Fallocate::ZeroRange { keep_size } => keep_size,
            Fallocate::PunchHole => true,
        }
    }
}

/// Which way [`crate::FileSystem::lseek`] looks from an offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Whence {
    /// `SEEK_DATA`: the first byte at or after the offset in an allocated
    /// block.
    Data,
    /// `SEEK_HOLE`: the first byte at or after the offset in a hole (an
    /// unallocated block), or the end of the file, which counts as one.
    Hole,
}

impl Whence {
    /// lseek(2)'s `whence` for it; None for any other (`SEEK_SET`,
    /// `SEEK_CUR` and `SEEK_END` are the kernel's own business).
    pub fn from_raw(whence: i32) -> Option<Whence> {
        match whence {
            libc::SEEK_DATA => Some(Whence::Data),
            libc::SEEK_HOLE => Some(Whence::Hole),
            _ => None,
        }
    }

    pub fn raw(self) -> i32 {
        match self {
            Whence::Data => libc::SEEK_DATA,
            Whence::Hole => libc::SEEK_HOLE,
        }
    }
}

/// The largest offset a file may reach (loff_t's): offsets past it are
/// negative to the kernel.
const OFFSET_MAX: u64 = i64::MAX as u64;

/// A file's data calls refuse a directory (`EISDIR`) and anything else
/// not a regular file (`EINVAL`), as read and write do.
pub fn regular_only(kind: FileType) -> Result<()> {
    match kind {
        FileType::File => Ok(()),
        FileType::Dir => Err(Errno::ISDIR),
        _ => Err(Errno::INVAL),
    }
}

/// fallocate(2)'s checks of a range, as vfs_fallocate makes them: an
/// empty range or a negative offset is `EINVAL`, an end past the largest
/// offset `EFBIG`. Returns the range's end.
pub fn fallocate_end(offset: u64, len: u64) -> Result<u64> {
    if len == 0 || offset > OFFSET_MAX || len > OFFSET_MAX {
        return Err(Errno::INVAL);
    }
    offset.checked_add(len).filter(|&end| end <= OFFSET_MAX).ok_or(Errno::FBIG)
}

/// What copy_file_range(2) copies from `from` at `offset_in` to `to` at
/// `offset_out` when asked for `len` bytes, after the kernel's checks (its
/// generic_copy_file_checks): regular files only (`EISDIR`, `EINVAL`), no
/// offset past the largest (`EINVAL`) nor wrapping (`EOVERFLOW`), the
/// length cut at the source's end, and within one file no overlap of the
/// two ranges so cut (`EINVAL`). Both are on one file system (the
/// kernel refuses a copy across two with `EXDEV` before any asks).
pub fn copy_len(from: &Attr, offset_in: u64, to: &Attr, offset_out: u64, len: u64) -> Result<u64> {
    if from.kind == FileType::Dir || to.kind == FileType::Dir {
        return Err(Errno::ISDIR);
    }
    regular_only(from.kind)?;
    regular_only(to.kind)?;
    if offset_in > OFFSET_MAX || offset_out > OFFSET_MAX {
        return Err(Errno::INVAL);
    }
    let fits = |offset: u64| offset.checked_add(len).is_some_and(|end| end <= OFFSET_MAX);
    if !fits(offset_in) || !fits(offset_out) {
        return Err(Errno::OVERFLOW);
    }
    let count = len.min(from.size.saturating_sub(offset_in));
    if from.ino == to.ino && offset_out + count > offset_in && offset_out < offset_in + count {
        return Err(Errno::INVAL);
    }
    Ok(count)
}

/// SEEK_DATA or SEEK_HOLE from `offset` in a file of `size` bytes laid
/// out in blocks of `block_bytes`; `next(from, end, data)` gives the first
/// block in `from..end` that is allocated (`data`) or a hole (not
/// `data`), None if there is none. An offset at or past the end is
/// `ENXIO`; the end itself is a hole, so SEEK_HOLE always finds one, and
/// a block allocated past the end (fallocate's `keep_size`) is no data.
pub fn seek(
    size: u64,
    offset: u64,
    whence: Whence,
    block_bytes: u64,
    next: impl FnOnce(u64, u64, bool) -> Result<Option<u64>>,
) -> Result<u64> {
    if offset >= size {
        return Err(Errno::NXIO);
    }
    let (from, end) = (offset / block_bytes, size.div_ceil(block_bytes));
    let found = next(from, end, whence == Whence::Data)?.filter(|&b| b < end);
    match (whence, found) {
        (Whence::Data, Some(block)) => Ok(offset.max(block * block_bytes)),
        (Whence::Data, None) => Err(Errno::NXIO),
        (Whence::Hole, Some(block)) => Ok(offset.max(block * block_bytes).min(size)),
        (Whence::Hole, None) => Ok(size),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mode_offered_comes_back_from_its_bits() {
        for mode in Fallocate::ALL {
            assert_eq!(Fallocate::from_mode(mode.mode()), Ok(mode), "{mode:?}");
        }
    }

    #[test]
    fn collapse_insert_unshare_and_a_punch_that_grows_are_not_offered() {
        let collapse = 0x08;
        let insert = 0x20;
        let unshare = 0x40;
        for mode in [collapse, insert, unshare, libc::FALLOC_FL_PUNCH_HOLE, 0x1000] {
            assert_eq!(Fallocate::from_mode(mode), Err(Errno::OPNOTSUPP), "{mode:#x}");
        }
    }

    #[test]
    fn an_empty_range_is_einval_and_one_past_the_largest_offset_efbig() {
        assert_eq!(fallocate_end(5, 0), Err(Errno::INVAL));
        assert_eq!(fallocate_end(OFFSET_MAX, 1), Err(Errno::FBIG));
        assert_eq!(fallocate_end(4096, 8192), Ok(12288));
    }

    /// Holes at blocks 0 and 2 of a file of three and a half blocks.
    fn layout(from: u64, end: u64, data: bool) -> Result<Option<u64>> {
        Ok((from..end).find(|b| (b % 2 == 1) == data))
    }

    #[test]
    fn data_and_holes_are_found_block_by_block_and_the_end_is_a_hole() {
        let size = 3 * 4096 + 100;
        assert_eq!(seek(size, 10, Whence::Data, 4096, layout), Ok(4096));
        assert_eq!(seek(size, 5000, Whence::Data, 4096, layout), Ok(5000));
        assert_eq!(seek(size, 5000, Whence::Hole, 4096, layout), Ok(8192));
        assert_eq!(seek(size, 3 * 4096 + 1, Whence::Hole, 4096, layout), Ok(size));
        assert_eq!(seek(size, 8192, Whence::Data, 4096, layout), Ok(3 * 4096));
        assert_eq!(seek(size, size, Whence::Hole, 4096, layout), Err(Errno::NXIO));
    }

    #[test]
    fn a_file_that_is_all_data_has_its_only_hole_at_its_end() {
        let all =
            |from: u64, end: u64, data: bool| Ok(if data { Some(from) } else { None }.filter(|&b| b < end));
        assert_eq!(seek(10_000, 0, Whence::Hole, 4096, all), Ok(10_000));
        assert_eq!(seek(10_000, 9_999, Whence::Data, 4096, all), Ok(9_999));
    }

    fn file(ino: u64, size: u64) -> Attr {
        Attr {
            ino,
            kind: FileType::File,
            perm: 0o644,
            nlink: 1,
            uid: 0,
            gid: 0,
            size,
            blocks: 0,
            rdev: 0,
            atime: Default::default(),
            mtime: Default::default(),
            ctime: Default::default(),
        }
    }

    #[test]
    fn a_copy_is_cut_at_the_source_end() {
        assert_eq!(copy_len(&file(2, 100), 40, &file(3, 0), 0, 1000), Ok(60));
        assert_eq!(copy_len(&file(2, 100), 200, &file(3, 0), 0, 1000), Ok(0));
    }

    #[test]
    fn a_copy_within_one_file_may_not_overlap_once_cut() {
        let f = file(2, 100);
        assert_eq!(copy_len(&f, 0, &f, 50, 60), Err(Errno::INVAL));
        assert_eq!(copy_len(&f, 0, &f, 50, 50), Ok(50));
        // Cut at the end to 10 bytes, it no longer reaches offset 95.
        assert_eq!(copy_len(&f, 90, &f, 80, 1000), Ok(10));
    }

    #[test]
    fn a_copy_refuses_directories_other_kinds_and_wrapping_offsets() {
        let dir = Attr { kind: FileType::Dir, ..file(4, 4096) };
        let fifo = Attr { kind: FileType::Fifo, ..file(5, 0) };
        assert_eq!(copy_len(&dir, 0, &file(3, 0), 0, 1), Err(Errno::ISDIR));
        assert_eq!(copy_len(&file(2, 9), 0, &fifo, 0, 1), Err(Errno::INVAL));
        assert_eq!(copy_len(&file(2, 9), OFFSET_MAX - 1, &file(3, 0), 0, 5), Err(Errno::OVERFLOW));
    }
}
