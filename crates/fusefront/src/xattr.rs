//! Extended attributes through FUSE, for both transports: GETXATTR and
//! LISTXATTR answer a size probe (size 0) with the size and a buffer too
//! small with ERANGE, as getxattr(2) and listxattr(2) do (the file
//! system only gives the value or the list); SETXATTR's flags are
//! setxattr(2)'s, and an access ACL set or a chmod keeps the ACL and the
//! mode in step (`acl.rs`).
//!
//! The kernel sends `struct fuse_setxattr_in` as protocol 7.32 and later
//! lay it out (size, flags, setxattr_flags, padding: 16 bytes) only when
//! INIT agreed to `FUSE_SETXATTR_EXT`; neither transport asks for it
//! (`fuser` reads the 8-byte form: size, flags), so both get the older
//! form, and a chmod's set-group-ID rule for an ACL
//! (`FUSE_SETXATTR_ACL_KILL_SGID`) is not sent.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use fsapi::xattr::Namespace;
use fsapi::{Attr, Errno, FileSystem, Ino, XattrFlags};

use crate::acl;

/// What a GETXATTR or LISTXATTR sends back.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Sized {
    /// The size a size probe (size 0) asked for.
    Size(u32),
    /// The bytes, which fit the caller's buffer.
    Data(Vec<u8>),
}

/// `bytes` for a caller whose buffer holds `size` bytes (0: a probe).
pub(crate) fn sized(bytes: Vec<u8>, size: u32) -> Result<Sized, Errno> {
    let len = u32::try_from(bytes.len()).map_err(|_| Errno::RANGE)?;
    match size {
        0 => Ok(Sized::Size(len)),
        _ if len > size => Err(Errno::RANGE),
        _ => Ok(Sized::Data(bytes)),
    }
}

/// The names LISTXATTR gives a caller of `caller_uid`: `trusted.` names
/// only to root (taken to hold CAP_SYS_ADMIN, as setid.rs takes it to
/// hold CAP_FSETID), as ext4 lists them; the kernel leaves the filtering
/// to a FUSE server.
pub(crate) fn listed(list: Vec<u8>, caller_uid: u32) -> Vec<u8> {
    if caller_uid == 0 {
        return list;
    }
    let trusted = Namespace::Trusted.prefix();
    let mut out = Vec::with_capacity(list.len());
    for name in list.split_inclusive(|&b| b == 0).filter(|n| !n.starts_with(trusted)) {
        out.extend_from_slice(name);
    }
    out
}

/// SETXATTR of `name` = `value` on `ino` with setxattr(2)'s `flags`.
pub(crate) fn set(
    fs: &dyn FileSystem,
    ino: Ino,
    name: &OsStr,
    value: &[u8],
    flags: u32,
) -> fsapi::Result<()> {
    let flags = XattrFlags::from_bits(flags)?;
    if name.as_bytes() == Namespace::PosixAclAccess.prefix() {
        return acl::set_access(fs, ino, value, flags, false);
    }
    fs.setxattr(ino, name, value, flags)
}

/// After a SETATTR that set the mode to `perm`: an ACL kept in step.
pub(crate) fn after_setattr(fs: &dyn FileSystem, attr: Attr, perm: Option<u16>) -> fsapi::Result<Attr> {
    if perm.is_none() {
        return Ok(attr);
    }
    acl::on_chmod(fs, attr.ino, attr.perm)?;
    Ok(attr)
}

/// After a new inode `made` in `parent`, asked for with mode bits `mode`
/// (before the umask): with POSIX ACLs on (`acl`), what the directory's
/// default ACL gives it.
pub(crate) fn after_create(
    fs: &dyn FileSystem,
    acl: bool,
    parent: Ino,
    made: Attr,
    mode: u32,
) -> fsapi::Result<Attr> {
    if !acl {
        return Ok(made);
    }
    acl::inherit(fs, parent, made, (mode & 0o7777) as u16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use fsapi::{ModelFs, Owner, ROOT};

    #[test]
    fn a_probe_gets_the_size_and_a_small_buffer_erange() {
        assert_eq!(sized(b"hello".to_vec(), 0), Ok(Sized::Size(5)));
        assert_eq!(sized(b"hello".to_vec(), 4), Err(Errno::RANGE));
        assert_eq!(sized(b"hello".to_vec(), 5), Ok(Sized::Data(b"hello".to_vec())));
    }

    #[test]
    fn trusted_names_are_listed_to_root_only() {
        let list = b"user.a\0trusted.t\0security.s\0".to_vec();
        assert_eq!(listed(list.clone(), 0), list);
        assert_eq!(listed(list, 65534), b"user.a\0security.s\0");
    }

    #[test]
    fn an_access_acl_set_gives_the_mode_its_mask() {
        let fs = ModelFs::new();
        let f = fs.create(ROOT, OsStr::new("f"), Owner::root(0o644)).unwrap();
        // user::rw-, user:65534:rw-, group::r--, mask::rw-, other::r--
        let value: Vec<u8> = [2u32.to_le_bytes().to_vec()]
            .into_iter()
            .chain([(1u16, 6u16, 0u32), (2, 6, 65534), (4, 4, 0), (0x10, 6, 0), (0x20, 4, 0)].map(
                |(t, p, i)| {
                    [t.to_le_bytes().to_vec(), p.to_le_bytes().to_vec(), i.to_le_bytes().to_vec()].concat()
                },
            ))
            .flatten()
            .collect();
        set(&fs, f.ino, OsStr::new("system.posix_acl_access"), &value, 0).unwrap();
        assert_eq!(fs.getattr(f.ino).unwrap().perm, 0o664);
        assert_eq!(fs.getxattr(f.ino, OsStr::new("system.posix_acl_access")).unwrap(), value);
    }

    #[test]
    fn an_access_acl_the_mode_says_all_of_is_not_kept() {
        let fs = ModelFs::new();
        let f = fs.create(ROOT, OsStr::new("f"), Owner::root(0o644)).unwrap();
        let value: Vec<u8> =
            [2u32.to_le_bytes(), [1, 0, 7, 0], [0, 0, 0, 0], [4, 0, 5, 0], [0; 4], [0x20, 0, 0, 0], [0; 4]]
                .concat();
        set(&fs, f.ino, OsStr::new("system.posix_acl_access"), &value, 0).unwrap();
        assert_eq!(fs.getattr(f.ino).unwrap().perm, 0o750);
        assert_eq!(fs.getxattr(f.ino, OsStr::new("system.posix_acl_access")), Err(Errno::NODATA));
    }
}
