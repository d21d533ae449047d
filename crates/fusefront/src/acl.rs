//! POSIX ACLs, which the kernel enforces once INIT agrees to
//! `FUSE_POSIX_ACL` but leaves the server to keep in step with the mode
//! (fs/fuse/acl.c: "Fuse userspace is responsible for updating access
//! permissions in the inode"), as a local file system does through the
//! VFS's helpers: an access ACL set changes the mode's bits (and, when the
//! mode says it all, is not kept: only the mode), a chmod changes the
//! ACL's owner, mask (or group) and other entries, and a new inode in a
//! directory with a default ACL takes it (both transports).
//!
//! An ACL travels as the kernel's `system.posix_acl_*` value: a
//! little-endian `u32` version (2), then entries of a `u16` tag, a `u16`
//! permission (rwx, 3 bits) and a `u32` id (a user or group; unused
//! otherwise), sorted by tag, then id.

use std::ffi::OsStr;

use fsapi::xattr::Namespace;
use fsapi::{Attr, Errno, FileSystem, FileType, Ino, SetAttr, XattrFlags};

/// The value's version (`POSIX_ACL_XATTR_VERSION`).
const VERSION: u32 = 2;
const HEADER_BYTES: usize = 4;
const ENTRY_BYTES: usize = 8;

// Tags (linux/posix_acl.h), in the order an ACL sorts them.
const USER_OBJ: u16 = 0x01;
const USER: u16 = 0x02;
const GROUP_OBJ: u16 = 0x04;
const GROUP: u16 = 0x08;
const MASK: u16 = 0x10;
const OTHER: u16 = 0x20;

/// One entry: whom it is for and what it grants (rwx).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub tag: u16,
    pub perm: u16,
    pub id: u32,
}

/// An ACL as the kernel encodes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Acl {
    pub entries: Vec<Entry>,
}

impl Acl {
    /// The ACL a `system.posix_acl_*` value holds: `EINVAL` for a value
    /// of another version, a length that is not whole entries, or an
    /// unknown tag (the kernel validates what it sends; a value set
    /// without the kernel's ACL support is checked here).
    pub fn parse(value: &[u8]) -> Result<Acl, Errno> {
        let version = value.get(..HEADER_BYTES).map(|v| u32::from_le_bytes([v[0], v[1], v[2], v[3]]));
        if version != Some(VERSION) || (value.len() - HEADER_BYTES) % ENTRY_BYTES != 0 {
            return Err(Errno::INVAL);
        }
        let entries: Vec<Entry> = value[HEADER_BYTES..]
            .chunks_exact(ENTRY_BYTES)
            .map(|e| Entry {
                tag: u16::from_le_bytes([e[0], e[1]]),
                perm: u16::from_le_bytes([e[2], e[3]]),
                id: u32::from_le_bytes([e[4], e[5], e[6], e[7]]),
            })
            .collect();
        let known = [USER_OBJ, USER, GROUP_OBJ, GROUP, MASK, OTHER];
        if entries.iter().any(|e| !known.contains(&e.tag) || e.perm & !0o7 != 0) {
            return Err(Errno::INVAL);
        }
        Ok(Acl { entries })
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = VERSION.to_le_bytes().to_vec();
        for e in &self.entries {
            out.extend_from_slice(&e.tag.to_le_bytes());
            out.extend_from_slice(&e.perm.to_le_bytes());
            out.extend_from_slice(&e.id.to_le_bytes());
        }
        out
    }

    fn has_mask(&self) -> bool {
        self.entries.iter().any(|e| e.tag == MASK)
    }

    /// The permission bits this ACL gives the mode, and whether the mode
    /// says all of it (no named user or group, no mask), as the VFS's
    /// `posix_acl_equiv_mode`: owner from its entry, group from the mask
    /// if there is one (else the group's entry), other from its entry.
    pub fn mode(&self, perm: u16) -> (u16, bool) {
        let of = |tag: u16| self.entries.iter().find(|e| e.tag == tag).map_or(0, |e| e.perm);
        let group = if self.has_mask() { of(MASK) } else { of(GROUP_OBJ) };
        let bits = (of(USER_OBJ) << 6) | (group << 3) | of(OTHER);
        let equivalent = self.entries.iter().all(|e| matches!(e.tag, USER_OBJ | GROUP_OBJ | OTHER));
        ((perm & !0o777) | bits, equivalent)
    }

    /// This ACL after a chmod to `perm` (the VFS's `posix_acl_chmod`):
    /// the owner's and other's entries take their bits, and the mask (or,
    /// without one, the group's entry) the group's.
    pub fn chmod(&mut self, perm: u16) {
        let has_mask = self.has_mask();
        for e in &mut self.entries {
            match e.tag {
                USER_OBJ => e.perm = (perm >> 6) & 0o7,
                OTHER => e.perm = perm & 0o7,
                MASK => e.perm = (perm >> 3) & 0o7,
                GROUP_OBJ if !has_mask => e.perm = (perm >> 3) & 0o7,
                _ => {}
            }
        }
    }

    /// A new inode's access ACL from its directory's default one, and its
    /// permission bits (`perm`, as asked, before any umask), as the VFS's
    /// `posix_acl_create` masks them: each of owner, group (the mask, if
    /// any) and other keeps only what both the ACL and `perm` grant.
    /// None for the ACL when the mode says it all.
    pub fn create(&self, perm: u16) -> (Option<Acl>, u16) {
        let mut acl = self.clone();
        let mut bits = perm & 0o777;
        let has_mask = acl.has_mask();
        let mut equivalent = true;
        for e in &mut acl.entries {
            let (shift, limits) = match e.tag {
                USER_OBJ => (6, true),
                OTHER => (0, true),
                MASK => (3, true),
                GROUP_OBJ => (3, !has_mask),
                _ => (0, false),
            };
            if e.tag == MASK || e.tag == USER || e.tag == GROUP {
                equivalent = false;
            }
            if limits {
                e.perm &= (bits >> shift) & 0o7;
                bits &= !(0o7 << shift) | (e.perm << shift);
            }
        }
        let perm = (perm & !0o777) | bits;
        (if equivalent { None } else { Some(acl) }, perm)
    }
}

/// The two ACL names.
fn name(namespace: Namespace) -> &'static OsStr {
    use std::os::unix::ffi::OsStrExt;
    OsStr::from_bytes(namespace.prefix())
}

/// setxattr(2) of `system.posix_acl_access` = `value` on `ino`, as a local
/// file system takes it: the mode's bits from the ACL, and the ACL kept
/// only when the mode cannot say it all (else removed, if there was one).
/// `kill_sgid`: the kernel's `FUSE_SETXATTR_ACL_KILL_SGID` (the caller is
/// not in the file's group).
pub(crate) fn set_access(
    fs: &dyn FileSystem,
    ino: Ino,
    value: &[u8],
    flags: XattrFlags,
    kill_sgid: bool,
) -> fsapi::Result<()> {
    let acl = Acl::parse(value)?;
    let attr = fs.getattr(ino)?;
    let (mut perm, equivalent) = acl.mode(attr.perm);
    if kill_sgid {
        perm &= !0o2000;
    }
    let access = name(Namespace::PosixAclAccess);
    if equivalent {
        // The flags still hold: XATTR_CREATE over an ACL there is EEXIST.
        match fs.getxattr(ino, access) {
            Ok(_) => flags.allow(true)?,
            Err(Errno::NODATA) => flags.allow(false)?,
            Err(e) => return Err(e),
        }
    } else {
        fs.setxattr(ino, access, &acl.encode(), flags)?;
    }
    if perm != attr.perm {
        fs.setattr(ino, &SetAttr { perm: Some(perm), ..SetAttr::default() })?;
    }
    if equivalent {
        match fs.removexattr(ino, access) {
            Ok(()) | Err(Errno::NODATA) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// After a chmod of `ino` to `perm`: its access ACL, if it has one, in
/// step with the new bits.
pub(crate) fn on_chmod(fs: &dyn FileSystem, ino: Ino, perm: u16) -> fsapi::Result<()> {
    let access = name(Namespace::PosixAclAccess);
    let value = match fs.getxattr(ino, access) {
        Ok(v) => v,
        Err(Errno::NODATA | Errno::NOTSUP) => return Ok(()),
        Err(e) => return Err(e),
    };
    let Ok(mut acl) = Acl::parse(&value) else { return Ok(()) };
    acl.chmod(perm);
    fs.setxattr(ino, access, &acl.encode(), XattrFlags::REPLACE)
}

/// A new inode `made` in directory `parent`, asked for with permission
/// bits `perm` (before the umask): if `parent` has a default ACL, the
/// inode takes it (its mode masked by it, an access ACL when the mode
/// cannot say it all, and a directory the default ACL too), as the VFS's
/// `posix_acl_create` gives it; the umask then plays no part. Returns
/// the inode's attributes as they end.
pub(crate) fn inherit(fs: &dyn FileSystem, parent: Ino, made: Attr, perm: u16) -> fsapi::Result<Attr> {
    if made.kind == FileType::Symlink {
        return Ok(made);
    }
    let default = name(Namespace::PosixAclDefault);
    let value = match fs.getxattr(parent, default) {
        Ok(v) => v,
        Err(Errno::NODATA | Errno::NOTSUP) => return Ok(made),
        Err(e) => return Err(e),
    };
    let Ok(acl) = Acl::parse(&value) else { return Ok(made) };
    if made.kind == FileType::Dir {
        fs.setxattr(made.ino, default, &value, XattrFlags::ANY)?;
    }
    let (access, perm) = acl.create((made.perm & 0o7000) | (perm & 0o777));
    if let Some(access) = access {
        fs.setxattr(made.ino, name(Namespace::PosixAclAccess), &access.encode(), XattrFlags::ANY)?;
    }
    if perm == made.perm {
        return Ok(made);
    }
    fs.setattr(made.ino, &SetAttr { perm: Some(perm), ..SetAttr::default() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(entries: &[(u16, u16, u32)]) -> Acl {
        Acl { entries: entries.iter().map(|&(tag, perm, id)| Entry { tag, perm, id }).collect() }
    }

    /// `setfacl -m u:nobody:rw` on a 0644 file: owner rw, nobody rw, group
    /// r, mask rw, other r.
    fn with_nobody() -> Acl {
        acl(&[(USER_OBJ, 6, 0), (USER, 6, 65534), (GROUP_OBJ, 4, 0), (MASK, 6, 0), (OTHER, 4, 0)])
    }

    #[test]
    fn a_value_round_trips_and_a_bad_one_is_einval() {
        let a = with_nobody();
        assert_eq!(Acl::parse(&a.encode()), Ok(a.clone()));
        let mut bad = a.encode();
        bad.pop();
        assert_eq!(Acl::parse(&bad), Err(Errno::INVAL));
        assert_eq!(Acl::parse(&[1, 0, 0, 0]), Err(Errno::INVAL), "version 1");
    }

    #[test]
    fn an_acl_with_a_named_user_shows_its_mask_as_the_group_bits() {
        assert_eq!(with_nobody().mode(0o100644), (0o100664, false));
    }

    #[test]
    fn an_acl_of_the_three_base_entries_is_the_mode_alone() {
        let base = acl(&[(USER_OBJ, 7, 0), (GROUP_OBJ, 5, 0), (OTHER, 0, 0)]);
        assert_eq!(base.mode(0o644), (0o750, true));
    }

    #[test]
    fn a_chmod_sets_the_mask_not_the_group_entry() {
        let mut a = with_nobody();
        a.chmod(0o600);
        let perms: Vec<u16> = a.entries.iter().map(|e| e.perm).collect();
        assert_eq!(perms, [6, 6, 4, 0, 0], "owner rw, nobody rw, group r kept, mask none, other none");
    }

    #[test]
    fn a_default_acl_masks_a_new_inodes_bits() {
        let default =
            acl(&[(USER_OBJ, 7, 0), (USER, 7, 1000), (GROUP_OBJ, 5, 0), (MASK, 7, 0), (OTHER, 0, 0)]);
        let (access, perm) = default.create(0o666);
        assert_eq!(perm, 0o660, "other none from the ACL; group rw from the mask and the request");
        let mask = access.unwrap().entries.iter().find(|e| e.tag == MASK).unwrap().perm;
        assert_eq!(mask, 6);
    }
}
