//! Errors as POSIX errno values: what a FUSE reply carries and what a
//! kernel file system returns, so every backend fails the same way.

use std::fmt;

/// A POSIX error number.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Errno(pub i32);

impl Errno {
    pub const PERM: Errno = Errno(libc::EPERM);
    pub const NOENT: Errno = Errno(libc::ENOENT);
    pub const IO: Errno = Errno(libc::EIO);
    pub const NXIO: Errno = Errno(libc::ENXIO);
    pub const INTR: Errno = Errno(libc::EINTR);
    pub const BADF: Errno = Errno(libc::EBADF);
    pub const ACCES: Errno = Errno(libc::EACCES);
    pub const EXIST: Errno = Errno(libc::EEXIST);
    pub const XDEV: Errno = Errno(libc::EXDEV);
    pub const NOTDIR: Errno = Errno(libc::ENOTDIR);
    pub const ISDIR: Errno = Errno(libc::EISDIR);
    pub const INVAL: Errno = Errno(libc::EINVAL);
    pub const FBIG: Errno = Errno(libc::EFBIG);
    pub const NOSPC: Errno = Errno(libc::ENOSPC);
    pub const ROFS: Errno = Errno(libc::EROFS);
    pub const MLINK: Errno = Errno(libc::EMLINK);
    pub const NAMETOOLONG: Errno = Errno(libc::ENAMETOOLONG);
    pub const NOTEMPTY: Errno = Errno(libc::ENOTEMPTY);
    pub const LOOP: Errno = Errno(libc::ELOOP);
    pub const NOSYS: Errno = Errno(libc::ENOSYS);
    pub const STALE: Errno = Errno(libc::ESTALE);
    pub const OVERFLOW: Errno = Errno(libc::EOVERFLOW);
    /// EOPNOTSUPP (Linux's ENOTSUP too): an operation or mode not offered.
    pub const OPNOTSUPP: Errno = Errno(libc::EOPNOTSUPP);
    /// No extended attribute by that name (`ENOATTR` on the BSDs).
    pub const NODATA: Errno = Errno(libc::ENODATA);
    /// A buffer too small for the value or list asked for; a name too long.
    pub const RANGE: Errno = Errno(libc::ERANGE);
    /// An extended attribute value larger than any (`E2BIG`).
    pub const TOOBIG: Errno = Errno(libc::E2BIG);
    /// `EOPNOTSUPP` (Linux's `ENOTSUP` is the same number): a namespace
    /// or call the file system does not offer.
    pub const NOTSUP: Errno = Errno(libc::EOPNOTSUPP);

    /// The errno of an I/O error from the host, EIO when it carries none.
    pub fn from_io(e: &std::io::Error) -> Errno {
        Errno(e.raw_os_error().unwrap_or(libc::EIO))
    }

    /// The symbolic name, e.g. "ENOENT".
    pub fn name(self) -> &'static str {
        match self.0 {
            libc::EPERM => "EPERM",
            libc::ENOENT => "ENOENT",
            libc::EIO => "EIO",
            libc::ENXIO => "ENXIO",
            libc::EBADF => "EBADF",
            libc::EACCES => "EACCES",
            libc::EEXIST => "EEXIST",
            libc::EXDEV => "EXDEV",
            libc::ENOTDIR => "ENOTDIR",
            libc::EISDIR => "EISDIR",
            libc::EINVAL => "EINVAL",
            libc::EFBIG => "EFBIG",
            libc::ENOSPC => "ENOSPC",
            libc::EROFS => "EROFS",
            libc::EMLINK => "EMLINK",
            libc::ENAMETOOLONG => "ENAMETOOLONG",
            libc::ENOTEMPTY => "ENOTEMPTY",
            libc::ELOOP => "ELOOP",
            libc::ENOSYS => "ENOSYS",
            libc::ESTALE => "ESTALE",
            libc::EOVERFLOW => "EOVERFLOW",
            libc::ENODATA => "ENODATA",
            libc::ERANGE => "ERANGE",
            libc::E2BIG => "E2BIG",
            libc::EOPNOTSUPP => "EOPNOTSUPP",
            _ => "E?",
        }
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = std::io::Error::from_raw_os_error(self.0).to_string();
        // "No such file or directory (os error 2)" -> "No such file or directory"
        let text = text.split(" (os error").next().unwrap_or(&text);
        write!(f, "{} ({})", text, self.name())
    }
}

impl fmt::Debug for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::error::Error for Errno {}

impl From<std::io::Error> for Errno {
    fn from(e: std::io::Error) -> Errno {
        Errno::from_io(&e)
    }
}
