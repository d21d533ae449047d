//! Extended attributes as Linux names and bounds them: a name is a
//! namespace's prefix and a name within it (`user.mime_type`), or one of
//! the two POSIX ACL names (`system.posix_acl_access`,
//! `system.posix_acl_default`); every other name is `EOPNOTSUPP`. The
//! checks the kernel's VFS makes before a file system sees a call
//! (`fs/xattr.c`: the name's length, the value's size, `user.` only on
//! files and directories) are here, so that every backend, and a call
//! made in-process without a kernel, answers as a syscall would.

use crate::{Errno, FileType, Result};

/// The longest name, prefix included (Linux's `XATTR_NAME_MAX`): longer,
/// or empty, is `ERANGE`.
pub const NAME_BYTES_MAX: usize = 255;

/// The largest value (Linux's `XATTR_SIZE_MAX`): larger is `E2BIG`.
pub const VALUE_BYTES_MAX: usize = 65536;

/// The room iolab's file system gives an inode's attributes, which the
/// model keeps too so that the two answer `ENOSPC` alike: one 4 KiB block
/// less its 32-byte header (docs/formats.md, "Extended attributes").
pub const ROOM_BYTES: usize = 4096 - 32;

/// What each attribute takes of [`ROOM_BYTES`] besides its name within
/// its namespace and its value: its namespace, name length and value
/// length.
pub const ENTRY_OVERHEAD_BYTES: usize = 4;

/// Where a name lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Namespace {
    /// `user.`: any process that may write the file (files and
    /// directories only).
    User,
    /// `trusted.`: root's (the kernel checks CAP_SYS_ADMIN).
    Trusted,
    /// `security.`: security modules' (SELinux labels, capabilities).
    Security,
    /// `system.posix_acl_access`: a POSIX access ACL, as the kernel
    /// encodes it.
    PosixAclAccess,
    /// `system.posix_acl_default`: a directory's default ACL.
    PosixAclDefault,
}

impl Namespace {
    /// Every namespace, in the order names sort by.
    pub const ALL: [Namespace; 5] = [
        Namespace::User,
        Namespace::Trusted,
        Namespace::Security,
        Namespace::PosixAclAccess,
        Namespace::PosixAclDefault,
    ];

    /// The prefix of its names; an ACL's is the whole name.
    pub fn prefix(self) -> &'static [u8] {
        match self {
            Namespace::User => b"user.",
            Namespace::Trusted => b"trusted.",
            Namespace::Security => b"security.",
            Namespace::PosixAclAccess => b"system.posix_acl_access",
            Namespace::PosixAclDefault => b"system.posix_acl_default",
        }
    }

    /// One of the two ACL names, which carry no name of their own.
    pub fn is_acl(self) -> bool {
        matches!(self, Namespace::PosixAclAccess | Namespace::PosixAclDefault)
    }

    /// The longest name within it (the whole name at most
    /// [`NAME_BYTES_MAX`]); 0 for an ACL.
    pub fn suffix_bytes_max(self) -> usize {
        if self.is_acl() {
            0
        } else {
            NAME_BYTES_MAX - self.prefix().len()
        }
    }
}

/// A name an attribute may have: its namespace and its name within it.
/// Ordered by namespace, then name: the order listings give.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct XattrName {
    pub namespace: Namespace,
    /// After the prefix: 1 to `namespace.suffix_bytes_max()` bytes, no
    /// NUL; empty for an ACL.
    pub suffix: Vec<u8>,
}

impl XattrName {
    /// `name` as the kernel resolves it: `ERANGE` when empty or past
    /// [`NAME_BYTES_MAX`], `EINVAL` for a prefix with nothing after it
    /// (or a NUL inside), `EOPNOTSUPP` for a namespace iolab does not
    /// keep (`system.` other than the ACLs, `os2.`, anything else).
    pub fn parse(name: &[u8]) -> Result<XattrName> {
        if name.is_empty() || name.len() > NAME_BYTES_MAX {
            return Err(Errno::RANGE);
        }
        if name.contains(&0) {
            return Err(Errno::INVAL);
        }
        for namespace in Namespace::ALL {
            let prefix = namespace.prefix();
            if namespace.is_acl() {
                if name == prefix {
                    return Ok(XattrName { namespace, suffix: Vec::new() });
                }
                continue;
            }
            if let Some(suffix) = name.strip_prefix(prefix) {
                if suffix.is_empty() {
                    return Err(Errno::INVAL);
                }
                return Ok(XattrName { namespace, suffix: suffix.to_vec() });
            }
        }
        Err(Errno::NOTSUP)
    }

    /// A name from its parts, if they keep the bounds [`XattrName::parse`]
    /// holds a name to (what a decoder of a stored name checks).
    pub fn new(namespace: Namespace, suffix: &[u8]) -> Option<XattrName> {
        let fits = if namespace.is_acl() {
            suffix.is_empty()
        } else {
            !suffix.is_empty() && suffix.len() <= namespace.suffix_bytes_max() && !suffix.contains(&0)
        };
        fits.then(|| XattrName { namespace, suffix: suffix.to_vec() })
    }

    /// The whole name, prefix and all.
    pub fn full(&self) -> Vec<u8> {
        [self.namespace.prefix(), &self.suffix].concat()
    }

    /// What it takes of [`ROOM_BYTES`] with a value of `value_bytes`.
    pub fn stored_bytes(&self, value_bytes: usize) -> usize {
        ENTRY_OVERHEAD_BYTES + self.suffix.len() + value_bytes
    }
}

/// setxattr(2)'s flags.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XattrFlags {
    /// `XATTR_CREATE`: `EEXIST` if the name is there.
    pub create: bool,
    /// `XATTR_REPLACE`: `ENODATA` if the name is not there.
    pub replace: bool,
}

impl XattrFlags {
    /// Create the name, or replace its value.
    pub const ANY: XattrFlags = XattrFlags { create: false, replace: false };
    pub const CREATE: XattrFlags = XattrFlags { create: true, replace: false };
    pub const REPLACE: XattrFlags = XattrFlags { create: false, replace: true };

    /// setxattr(2)'s `flags`: `EINVAL` for bits other than the two.
    pub fn from_bits(bits: u32) -> Result<XattrFlags> {
        let known = (libc::XATTR_CREATE | libc::XATTR_REPLACE) as u32;
        if bits & !known != 0 {
            return Err(Errno::INVAL);
        }
        Ok(XattrFlags {
            create: bits & libc::XATTR_CREATE as u32 != 0,
            replace: bits & libc::XATTR_REPLACE as u32 != 0,
        })
    }

    pub fn bits(self) -> u32 {
        let create = if self.create { libc::XATTR_CREATE } else { 0 };
        let replace = if self.replace { libc::XATTR_REPLACE } else { 0 };
        (create | replace) as u32
    }

    /// Whether the call may go on, the name being there or not (as ext4:
    /// both flags set fail either way).
    pub fn allow(self, exists: bool) -> Result<()> {
        match (exists, self) {
            (true, XattrFlags { create: true, .. }) => Err(Errno::EXIST),
            (false, XattrFlags { replace: true, .. }) => Err(Errno::NODATA),
            _ => Ok(()),
        }
    }
}

/// The VFS's checks of a setxattr(2) or removexattr(2) of `name` on an
/// inode of `kind` (`xattr_permission`, less the caller's credentials):
/// `user.` only on files and directories (`EPERM`).
pub fn check_write(kind: FileType, name: &XattrName) -> Result<()> {
    if name.namespace == Namespace::User && !matches!(kind, FileType::File | FileType::Dir) {
        return Err(Errno::PERM);
    }
    Ok(())
}

/// The VFS's checks of a getxattr(2) of `name` on an inode of `kind`:
/// `user.` names of other kinds are never there (`ENODATA`).
pub fn check_read(kind: FileType, name: &XattrName) -> Result<()> {
    if name.namespace == Namespace::User && !matches!(kind, FileType::File | FileType::Dir) {
        return Err(Errno::NODATA);
    }
    Ok(())
}

/// A value setxattr(2) takes: `E2BIG` past [`VALUE_BYTES_MAX`].
pub fn check_value(value: &[u8]) -> Result<()> {
    if value.len() > VALUE_BYTES_MAX {
        return Err(Errno::TOOBIG);
    }
    Ok(())
}

/// Names as listxattr(2) returns them: each whole, NUL-terminated.
pub fn list_bytes<'a>(names: impl IntoIterator<Item = &'a XattrName>) -> Vec<u8> {
    let mut out = Vec::new();
    for name in names {
        out.extend_from_slice(&name.full());
        out.push(0);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_resolves_to_its_namespace_and_what_follows_the_prefix() {
        let got = XattrName::parse(b"user.mime").unwrap();
        assert_eq!(got, XattrName { namespace: Namespace::User, suffix: b"mime".to_vec() });
        assert_eq!(got.full(), b"user.mime");
        let acl = XattrName::parse(b"system.posix_acl_default").unwrap();
        assert_eq!((acl.namespace, acl.suffix.len()), (Namespace::PosixAclDefault, 0));
    }

    #[test]
    fn names_the_kernel_refuses_are_refused_with_its_errno() {
        let long = [b"user.".as_slice(), &[b'a'; 251]].concat();
        for (name, errno) in [
            (&b""[..], Errno::RANGE),
            (&long, Errno::RANGE),
            (b"user.", Errno::INVAL),
            (b"os2.x", Errno::NOTSUP),
            (b"system.posix_acl_accessx", Errno::NOTSUP),
            (b"system.other", Errno::NOTSUP),
            (b"user", Errno::NOTSUP),
        ] {
            assert_eq!(XattrName::parse(name), Err(errno), "{:?}", String::from_utf8_lossy(name));
        }
        assert!(XattrName::parse(&long[..255]).is_ok(), "255 bytes in all is the longest");
    }

    #[test]
    fn the_flags_refuse_a_name_there_or_missing_as_asked() {
        assert_eq!(XattrFlags::CREATE.allow(true), Err(Errno::EXIST));
        assert_eq!(XattrFlags::REPLACE.allow(false), Err(Errno::NODATA));
        assert_eq!(XattrFlags::ANY.allow(true), Ok(()));
        assert_eq!(XattrFlags::from_bits(4), Err(Errno::INVAL));
        assert_eq!(XattrFlags::from_bits(XattrFlags::REPLACE.bits()), Ok(XattrFlags::REPLACE));
    }
}
