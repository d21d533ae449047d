//! FUSE's wire format, for the io_uring transport (`ring.rs`), which
//! receives the kernel's requests in its own buffers instead of through
//! `fuser`: the request header, the fixed argument of each operation, the
//! names and data after it, and every reply this front sends, laid out as
//! Linux's `include/uapi/linux/fuse.h` (protocol 7.42) says, in the host's
//! byte order. Decoding never trusts a length: a short or malformed
//! request is answered `EINVAL`, never a panic.
//!
//! The answers mirror the `fuser` front's (lib.rs) call for call, so a
//! mount behaves the same whichever transport serves it.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use std::sync::atomic::{AtomicU64, Ordering};

use fsapi::{
    Attr, DirEntry, Errno, Fallocate, FileSystem, FileType, Owner, RenameMode, SetAttr, StatFs, Time, Whence,
};

use crate::direct::Direct;
use crate::setid::{self, Kill};
use crate::xattr::{self, Sized};

/// How long the kernel may keep names and attributes (as the `fuser`
/// front: only this process changes the file system).
const TTL_SECS: u64 = 1;

/// The operations this transport answers (FUSE's opcodes).
pub(crate) mod op {
    pub const LOOKUP: u32 = 1;
    pub const FORGET: u32 = 2;
    pub const GETATTR: u32 = 3;
    pub const SETATTR: u32 = 4;
    pub const READLINK: u32 = 5;
    pub const SYMLINK: u32 = 6;
    pub const MKNOD: u32 = 8;
    pub const MKDIR: u32 = 9;
    pub const UNLINK: u32 = 10;
    pub const RMDIR: u32 = 11;
    pub const RENAME: u32 = 12;
    pub const LINK: u32 = 13;
    pub const OPEN: u32 = 14;
    pub const READ: u32 = 15;
    pub const WRITE: u32 = 16;
    pub const STATFS: u32 = 17;
    pub const RELEASE: u32 = 18;
    pub const FSYNC: u32 = 20;
    pub const SETXATTR: u32 = 21;
    pub const GETXATTR: u32 = 22;
    pub const LISTXATTR: u32 = 23;
    pub const REMOVEXATTR: u32 = 24;
    pub const FLUSH: u32 = 25;
    pub const OPENDIR: u32 = 27;
    pub const READDIR: u32 = 28;
    pub const RELEASEDIR: u32 = 29;
    pub const FSYNCDIR: u32 = 30;
    pub const CREATE: u32 = 35;
    pub const FALLOCATE: u32 = 43;
    pub const RENAME2: u32 = 45;
    pub const LSEEK: u32 = 46;
    pub const COPY_FILE_RANGE: u32 = 47;

    /// The names reports give each operation, by opcode.
    pub const NAMES: &[(u32, &str)] = &[
        (LOOKUP, "lookup"),
        (FORGET, "forget"),
        (GETATTR, "getattr"),
        (SETATTR, "setattr"),
        (READLINK, "readlink"),
        (SYMLINK, "symlink"),
        (MKNOD, "mknod"),
        (MKDIR, "mkdir"),
        (UNLINK, "unlink"),
        (RMDIR, "rmdir"),
        (RENAME, "rename"),
        (LINK, "link"),
        (OPEN, "open"),
        (READ, "read"),
        (WRITE, "write"),
        (STATFS, "statfs"),
        (RELEASE, "release"),
        (FSYNC, "fsync"),
        (SETXATTR, "setxattr"),
        (GETXATTR, "getxattr"),
        (LISTXATTR, "listxattr"),
        (REMOVEXATTR, "removexattr"),
        (FLUSH, "flush"),
        (OPENDIR, "opendir"),
        (READDIR, "readdir"),
        (RELEASEDIR, "releasedir"),
        (FSYNCDIR, "fsyncdir"),
        (CREATE, "create"),
        (FALLOCATE, "fallocate"),
        (RENAME2, "rename"),
        (LSEEK, "lseek"),
        (COPY_FILE_RANGE, "copy_file_range"),
    ];
}

/// Requests served, by operation (both transports count here).
#[derive(Debug)]
pub(crate) struct OpCounts {
    /// By index into `op::NAMES`, then one for every other opcode.
    counts: Vec<AtomicU64>,
}

impl OpCounts {
    pub fn new() -> OpCounts {
        OpCounts { counts: (0..=op::NAMES.len()).map(|_| AtomicU64::new(0)).collect() }
    }

    pub fn add(&self, opcode: u32) {
        let at = op::NAMES.iter().position(|&(code, _)| code == opcode).unwrap_or(op::NAMES.len());
        self.counts[at].fetch_add(1, Ordering::Relaxed);
    }

    /// Each operation's name and count, busiest first, none left out
    /// but those never asked for; `rename` and `rename2` add up.
    pub fn by_name(&self) -> Vec<(&'static str, u64)> {
        let mut named: Vec<(&'static str, u64)> = Vec::new();
        let names = op::NAMES.iter().map(|&(_, name)| name).chain(["other"]);
        for (name, count) in names.zip(&self.counts) {
            let count = count.load(Ordering::Relaxed);
            match named.iter_mut().find(|(n, _)| *n == name) {
                Some((_, total)) => *total += count,
                None => named.push((name, count)),
            }
        }
        named.retain(|&(_, count)| count > 0);
        named.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        named
    }
}

/// `setattr`'s valid bits.
const FATTR_MODE: u32 = 1 << 0;
const FATTR_UID: u32 = 1 << 1;
const FATTR_GID: u32 = 1 << 2;
const FATTR_SIZE: u32 = 1 << 3;
const FATTR_ATIME: u32 = 1 << 4;
const FATTR_MTIME: u32 = 1 << 5;
const FATTR_ATIME_NOW: u32 = 1 << 7;
const FATTR_MTIME_NOW: u32 = 1 << 8;
const FATTR_KILL_SUIDGID: u32 = 1 << 11;

/// `write_flags`: clear the set-ID bits first (see setid.rs).
const WRITE_KILL_SUIDGID: u32 = 1 << 2;

/// `fsync_flags`: data only (fdatasync).
const FSYNC_FDATASYNC: u32 = 1 << 0;

/// Bytes of `struct fuse_in_header` and `struct fuse_out_header`.
pub(crate) const IN_HEADER_BYTES: usize = 40;
pub(crate) const OUT_HEADER_BYTES: usize = 16;

/// A request's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct InHeader {
    pub opcode: u32,
    pub unique: u64,
    pub nodeid: u64,
    pub uid: u32,
    pub gid: u32,
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

impl InHeader {
    pub fn parse(b: &[u8]) -> Option<InHeader> {
        // len (0), opcode (4), unique (8), nodeid (16), uid (24), gid (28),
        // pid (32), total_extlen (36), padding (38).
        let _extensions = u16_at(b, 36)?;
        Some(InHeader {
            opcode: u32_at(b, 4)?,
            unique: u64_at(b, 8)?,
            nodeid: u64_at(b, 16)?,
            uid: u32_at(b, 24)?,
            gid: u32_at(b, 28)?,
        })
    }
}

/// `struct fuse_out_header` for a reply of `payload` bytes, or an error.
pub(crate) fn out_header(unique: u64, result: Result<usize, Errno>) -> [u8; OUT_HEADER_BYTES] {
    let (len, error) = match result {
        Ok(payload) => (OUT_HEADER_BYTES + payload, 0),
        Err(e) => (OUT_HEADER_BYTES, -e.0),
    };
    let mut h = [0u8; OUT_HEADER_BYTES];
    h[0..4].copy_from_slice(&(len as u32).to_ne_bytes());
    h[4..8].copy_from_slice(&error.to_ne_bytes());
    h[8..16].copy_from_slice(&unique.to_ne_bytes());
    h
}

/// The first NUL-terminated name in `b` and what follows it.
fn name(b: &[u8]) -> Result<(&OsStr, &[u8]), Errno> {
    let end = b.iter().position(|&c| c == 0).ok_or(Errno::INVAL)?;
    Ok((OsStr::from_bytes(&b[..end]), &b[end + 1..]))
}

fn field32(b: &[u8], at: usize) -> Result<u32, Errno> {
    u32_at(b, at).ok_or(Errno::INVAL)
}

fn field64(b: &[u8], at: usize) -> Result<u64, Errno> {
    u64_at(b, at).ok_or(Errno::INVAL)
}

/// `struct fuse_attr` (88 bytes).
fn put_attr(out: &mut Vec<u8>, a: &Attr) {
    for v in [a.ino, a.size, a.blocks, a.atime.secs as u64, a.mtime.secs as u64, a.ctime.secs as u64] {
        out.extend_from_slice(&v.to_ne_bytes());
    }
    let mode = a.kind.mode_bits() | u32::from(a.perm);
    // atimensec, mtimensec, ctimensec, mode, nlink, uid, gid, rdev,
    // blksize, flags.
    for v in [a.atime.nanos, a.mtime.nanos, a.ctime.nanos, mode, a.nlink, a.uid, a.gid, a.rdev, 4096, 0] {
        out.extend_from_slice(&v.to_ne_bytes());
    }
}

/// The answer to a LOOKUP of a name that is not there: node 0 with the
/// entry's time to live, which the kernel keeps as a negative dentry
/// (ENOENT itself is kept for no time at all, so every stat(2) of a
/// missing name would ask again). The kernel forgets it when it makes the
/// name itself, and on this mount every name is made through the kernel.
pub(crate) const NO_ENTRY: Attr = Attr {
    ino: 0,
    kind: FileType::File,
    perm: 0,
    nlink: 0,
    uid: 0,
    gid: 0,
    size: 0,
    blocks: 0,
    rdev: 0,
    atime: Time { secs: 0, nanos: 0 },
    mtime: Time { secs: 0, nanos: 0 },
    ctime: Time { secs: 0, nanos: 0 },
};

/// `struct fuse_entry_out` (128 bytes).
fn put_entry(out: &mut Vec<u8>, a: &Attr) {
    // nodeid, generation, entry_valid, attr_valid, their nanoseconds.
    for v in [a.ino, 0, TTL_SECS, TTL_SECS] {
        out.extend_from_slice(&v.to_ne_bytes());
    }
    out.extend_from_slice(&[0u8; 8]);
    put_attr(out, a);
}

/// `struct fuse_attr_out` (104 bytes).
fn put_attr_out(out: &mut Vec<u8>, a: &Attr) {
    out.extend_from_slice(&TTL_SECS.to_ne_bytes());
    out.extend_from_slice(&[0u8; 8]);
    put_attr(out, a);
}

/// `struct fuse_open_out` (16 bytes): no handle, `FOPEN_*` flags `bits`.
fn put_open(out: &mut Vec<u8>, bits: u32) {
    out.extend_from_slice(&[0u8; 8]);
    out.extend_from_slice(&bits.to_ne_bytes());
    out.extend_from_slice(&[0u8; 4]);
}

/// OPEN of `ino` with open(2) `flags`, as both transports answer it: the
/// file marked open, and the `FOPEN_*` bits of the reply.
pub(crate) fn open(fs: &dyn FileSystem, direct: &Direct, ino: u64, flags: i32) -> Result<u32, Errno> {
    fs.open(ino)?;
    if !direct.may_go_direct(flags) {
        return Ok(0);
    }
    match fs.getattr(ino) {
        Ok(attr) => Ok(direct.open_flags(fs, &attr, flags)),
        Err(e) => {
            fs.release(ino);
            Err(e)
        }
    }
}

/// CREATE, as both transports answer it: the new file, open, and the
/// `FOPEN_*` bits of the reply.
/// Who a created file belongs to, the mode the caller asked for, and
/// whether the mount keeps POSIX ACLs (a new file then takes its
/// directory's default ACL).
pub(crate) struct Made {
    pub owner: Owner,
    pub mode: u32,
    pub acl: bool,
}

pub(crate) fn create(
    fs: &dyn FileSystem,
    direct: &Direct,
    parent: u64,
    name: &OsStr,
    made: Made,
    flags: i32,
) -> Result<(Attr, u32), Errno> {
    let attr = fs.create(parent, name, made.owner)?;
    let attr = xattr::after_create(fs, made.acl, parent, attr, made.mode)?;
    fs.open(attr.ino)?;
    Ok((attr, direct.open_flags(fs, &attr, flags)))
}

/// `struct fuse_kstatfs` (80 bytes).
fn put_statfs(out: &mut Vec<u8>, s: &StatFs) {
    for v in [s.blocks, s.blocks_free, s.blocks_avail, s.files, s.files_free] {
        out.extend_from_slice(&v.to_ne_bytes());
    }
    for v in [s.block_bytes, s.name_bytes_max, s.block_bytes, 0, 0, 0, 0, 0, 0, 0] {
        out.extend_from_slice(&v.to_ne_bytes());
    }
}

/// Appends `struct fuse_dirent` for `e`, padded to 8 bytes, if it fits in
/// `limit` bytes; says whether it did.
fn put_dirent(out: &mut Vec<u8>, e: &DirEntry, limit: usize) -> bool {
    let unpadded = 24 + e.name.len();
    let bytes = unpadded.next_multiple_of(8);
    if out.len() + bytes > limit {
        return false;
    }
    out.extend_from_slice(&e.ino.to_ne_bytes());
    out.extend_from_slice(&e.next.to_ne_bytes());
    out.extend_from_slice(&(e.name.len() as u32).to_ne_bytes());
    // The entry's type is DT_*, which Linux defines as S_IFMT >> 12.
    out.extend_from_slice(&(e.kind.mode_bits() >> 12).to_ne_bytes());
    out.extend_from_slice(&e.name);
    out.resize(out.len() + bytes - unpadded, 0);
    true
}

fn owner(h: &InHeader, mode: u32, umask: u32) -> Owner {
    Owner { perm: (mode & !umask & 0o7777) as u16, uid: h.uid, gid: h.gid }
}

fn time(secs: u64, nanos: u32) -> Time {
    Time { secs: secs as i64, nanos }
}

/// `struct fuse_setattr_in` as the changes it asks for.
fn setattr_changes(a: &[u8]) -> Result<SetAttr, Errno> {
    // valid (0), padding, fh (8), size (16), lock_owner (24), atime (32),
    // mtime (40), ctime (48), atimensec (56), mtimensec (60), ctimensec
    // (64), mode (68), unused4, uid (76), gid (80), unused5.
    let valid = field32(a, 0)?;
    let stamp = |set: u32, now: u32, secs: usize, nanos: usize| -> Result<Option<Time>, Errno> {
        Ok(if valid & now != 0 {
            Some(Time::now())
        } else if valid & set != 0 {
            Some(time(field64(a, secs)?, field32(a, nanos)?))
        } else {
            None
        })
    };
    Ok(SetAttr {
        perm: if valid & FATTR_MODE != 0 { Some((field32(a, 68)? & 0o7777) as u16) } else { None },
        uid: if valid & FATTR_UID != 0 { Some(field32(a, 76)?) } else { None },
        gid: if valid & FATTR_GID != 0 { Some(field32(a, 80)?) } else { None },
        size: if valid & FATTR_SIZE != 0 { Some(field64(a, 16)?) } else { None },
        atime: stamp(FATTR_ATIME, FATTR_ATIME_NOW, 32, 56)?,
        mtime: stamp(FATTR_MTIME, FATTR_MTIME_NOW, 40, 60)?,
    })
}

/// The bytes one COPY_FILE_RANGE copies at most: its reply counts them
/// in 32 bits (the caller asks again for the rest), in whole pages.
const COPY_BYTES_MAX: u64 = (u32::MAX as u64) & !4095;

/// FALLOCATE, as both transports answer it: `mode` is fallocate(2)'s
/// (the kernel passes only keep-size, punch and zero-range through, and
/// answers the others `EOPNOTSUPP` itself).
pub(crate) fn fallocate(
    fs: &dyn FileSystem,
    ino: u64,
    offset: u64,
    len: u64,
    mode: i32,
) -> Result<(), Errno> {
    fs.fallocate(ino, Fallocate::from_mode(mode)?, offset, len)
}

/// LSEEK, as both transports answer it: only SEEK_DATA and SEEK_HOLE come
/// (the kernel keeps the others); a negative offset finds nothing
/// (`ENXIO`, as ext4's answer).
pub(crate) fn lseek(fs: &dyn FileSystem, ino: u64, offset: i64, whence: i32) -> Result<u64, Errno> {
    let whence = Whence::from_raw(whence).ok_or(Errno::INVAL)?;
    let offset = u64::try_from(offset).map_err(|_| Errno::NXIO)?;
    fs.lseek(ino, offset, whence)
}

/// COPY_FILE_RANGE, as both transports answer it: from `ino` to `to`
/// (the kernel checked both are on this mount and `flags` is 0), at most
/// [`COPY_BYTES_MAX`]; the bytes copied.
pub(crate) fn copy_file_range(
    fs: &dyn FileSystem,
    (ino, offset_in): (u64, u64),
    (to, offset_out): (u64, u64),
    len: u64,
    flags: u64,
) -> Result<u32, Errno> {
    if flags != 0 {
        return Err(Errno::INVAL);
    }
    let copied = fs.copy_file_range(ino, offset_in, to, offset_out, len.min(COPY_BYTES_MAX))?;
    // At most what was asked, itself at most COPY_BYTES_MAX.
    Ok(copied.min(COPY_BYTES_MAX) as u32)
}

/// What INIT agreed to that changes answers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Agreed {
    /// `FUSE_POSIX_ACL` (with `FUSE_DONT_MASK`): the kernel enforces ACLs,
    /// and a new inode takes its directory's default ACL from the server.
    pub acl: bool,
}

/// [`answer_with`] for a mount that agreed to nothing of [`Agreed`].
#[cfg(test)]
pub(crate) fn answer(
    fs: &dyn FileSystem,
    direct: &Direct,
    h: &InHeader,
    arg: &[u8],
    payload: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), Errno> {
    answer_with(fs, direct, h, arg, payload, out, Agreed::default())
}

/// `struct fuse_getxattr_out` (8 bytes: size, padding) for a probe, or
/// the bytes themselves.
fn put_sized(out: &mut Vec<u8>, sized: Sized) {
    match sized {
        Sized::Size(n) => {
            out.extend_from_slice(&n.to_ne_bytes());
            out.extend_from_slice(&[0u8; 4]);
        }
        Sized::Data(bytes) => out.extend_from_slice(&bytes),
    }
}

/// Answers one request: `arg` is the operation's fixed argument (the ring
/// entry's `op_in`), `payload` what follows it (names, written data).
/// The reply's bytes go to `out` (emptied first); an error is the errno
/// to send instead. Operations this file system does not offer are
/// `ENOSYS`, which tells the kernel not to ask again, as `fuser`'s
/// defaults do.
pub(crate) fn answer_with(
    fs: &dyn FileSystem,
    direct: &Direct,
    h: &InHeader,
    arg: &[u8],
    payload: &[u8],
    out: &mut Vec<u8>,
    agreed: Agreed,
) -> Result<(), Errno> {
    out.clear();
    let ino = h.nodeid;
    match h.opcode {
        op::LOOKUP => match fs.lookup(ino, name(payload)?.0) {
            Err(Errno::NOENT) => put_entry(out, &NO_ENTRY),
            found => put_entry(out, &found?),
        },
        op::GETATTR => put_attr_out(out, &fs.getattr(ino)?),
        op::SETATTR => {
            let mut changes = setattr_changes(arg)?;
            let kill = (field32(arg, 0)? & FATTR_KILL_SUIDGID != 0).then_some(Kill::Told);
            setid::on_setattr(fs, ino, &mut changes, kill)?;
            put_attr_out(out, &xattr::after_setattr(fs, fs.setattr(ino, &changes)?, changes.perm)?);
        }
        op::READLINK => out.extend_from_slice(&fs.readlink(ino)?),
        op::SYMLINK => {
            let (link, rest) = name(payload)?;
            let (target, _) = name(rest)?;
            let owner = Owner { perm: 0o777, uid: h.uid, gid: h.gid };
            put_entry(out, &fs.symlink(ino, link, target, owner)?);
        }
        op::MKNOD => {
            // mode (0), rdev (4), umask (8); as the fuser front.
            let (mode, rdev, umask) = (field32(arg, 0)?, field32(arg, 4)?, field32(arg, 8)?);
            let kind = FileType::from_mode(mode).ok_or(Errno::INVAL)?;
            let made = fs.mknod(ino, name(payload)?.0, kind, rdev, owner(h, mode, umask))?;
            put_entry(out, &xattr::after_create(fs, agreed.acl, ino, made, mode)?);
        }
        op::MKDIR => {
            let (mode, umask) = (field32(arg, 0)?, field32(arg, 4)?);
            let made = fs.mkdir(ino, name(payload)?.0, owner(h, mode, umask))?;
            put_entry(out, &xattr::after_create(fs, agreed.acl, ino, made, mode)?);
        }
        op::UNLINK => fs.unlink(ino, name(payload)?.0)?,
        op::RMDIR => fs.rmdir(ino, name(payload)?.0)?,
        op::RENAME | op::RENAME2 => {
            // newdir (0); RENAME2 adds flags (8), RENAME_WHITEOUT EINVAL (as
            // the fuser front).
            let flags = if h.opcode == op::RENAME2 { field32(arg, 8)? } else { 0 };
            let mode = RenameMode::from_flags(flags)?;
            let (from, rest) = name(payload)?;
            let (to, _) = name(rest)?;
            fs.rename2(ino, from, field64(arg, 0)?, to, mode)?;
        }
        op::LINK => put_entry(out, &fs.link(field64(arg, 0)?, ino, name(payload)?.0)?),
        op::OPEN => {
            // flags (0), open_flags (4).
            let bits = open(fs, direct, ino, field32(arg, 0)? as i32)?;
            put_open(out, bits);
        }
        op::READ => {
            // fh (0), offset (8), size (16).
            let (offset, size) = (field64(arg, 8)?, field32(arg, 16)? as usize);
            out.resize(size, 0);
            let n = fs.read(ino, offset, out)?;
            out.truncate(n);
        }
        op::WRITE => {
            let (offset, size) = (field64(arg, 8)?, field32(arg, 16)? as usize);
            let data = payload.get(..size).ok_or(Errno::INVAL)?;
            // write_flags (20).
            if field32(arg, 20)? & WRITE_KILL_SUIDGID != 0 {
                setid::on_write(fs, ino)?;
            }
            let n = fs.write(ino, offset, data)?;
            out.extend_from_slice(&(n as u32).to_ne_bytes());
            out.extend_from_slice(&[0u8; 4]);
        }
        op::STATFS => put_statfs(out, &fs.statfs()?),
        op::RELEASE => fs.release(ino),
        op::FSYNC | op::FSYNCDIR => fs.fsync(ino, field32(arg, 8)? & FSYNC_FDATASYNC != 0)?,
        // No OPENDIR (see `opendir` in lib.rs): the kernel stops asking.
        op::OPENDIR => return Err(Errno::NOSYS),
        op::RELEASEDIR => {}
        op::READDIR => {
            let (offset, limit) = (field64(arg, 8)?, field32(arg, 16)? as usize);
            fs.readdir(ino, offset, &mut |e| put_dirent(out, &e, limit))?;
        }
        op::CREATE => {
            // flags (0), mode (4), umask (8), open_flags (12).
            let (flags, mode, umask) = (field32(arg, 0)? as i32, field32(arg, 4)?, field32(arg, 8)?);
            let made = Made { owner: owner(h, mode, umask), mode, acl: agreed.acl };
            let (attr, bits) = create(fs, direct, ino, name(payload)?.0, made, flags)?;
            put_entry(out, &attr);
            put_open(out, bits);
        }
        op::FALLOCATE => {
            // fh (0), offset (8), length (16), mode (24).
            let mode = field32(arg, 24)? as i32;
            fallocate(fs, ino, field64(arg, 8)?, field64(arg, 16)?, mode)?;
        }
        op::LSEEK => {
            // fh (0), offset (8), whence (16); the reply: offset.
            let at = lseek(fs, ino, field64(arg, 8)? as i64, field32(arg, 16)? as i32)?;
            out.extend_from_slice(&at.to_ne_bytes());
        }
        op::COPY_FILE_RANGE => {
            // fh_in (0), off_in (8), nodeid_out (16), fh_out (24), off_out
            // (32), len (40), flags (48); the reply: fuse_write_out.
            let (from, to) = ((ino, field64(arg, 8)?), (field64(arg, 16)?, field64(arg, 32)?));
            let n = copy_file_range(fs, from, to, field64(arg, 40)?, field64(arg, 48)?)?;
            out.extend_from_slice(&n.to_ne_bytes());
            out.extend_from_slice(&[0u8; 4]);
        }
        op::GETXATTR => {
            // size (0), padding; the name.
            let value = fs.getxattr(ino, name(payload)?.0)?;
            put_sized(out, xattr::sized(value, field32(arg, 0)?)?);
        }
        op::LISTXATTR => {
            let names = xattr::listed(fs.listxattr(ino)?, h.uid);
            put_sized(out, xattr::sized(names, field32(arg, 0)?)?);
        }
        op::SETXATTR => {
            // size (0), flags (4): the 8 bytes sent without
            // FUSE_SETXATTR_EXT (xattr.rs); the name, then the value.
            let (size, flags) = (field32(arg, 0)? as usize, field32(arg, 4)?);
            let (name, rest) = name(payload)?;
            let value = rest.get(..size).ok_or(Errno::INVAL)?;
            xattr::set(fs, ino, name, value, flags)?;
        }
        op::REMOVEXATTR => fs.removexattr(ino, name(payload)?.0)?,
        // FLUSH: nothing is buffered per open file (see the fuser front).
        op::FLUSH => return Err(Errno::NOSYS),
        _ => return Err(Errno::NOSYS),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use fsapi::ModelFs;

    fn header(opcode: u32, nodeid: u64) -> InHeader {
        InHeader { opcode, unique: 7, nodeid, uid: 0, gid: 0 }
    }

    fn mkdir_arg(mode: u32, umask: u32) -> Vec<u8> {
        [mode.to_ne_bytes(), umask.to_ne_bytes()].concat()
    }

    #[test]
    fn a_request_header_is_read_field_by_field() {
        let mut b = vec![0u8; IN_HEADER_BYTES];
        b[4..8].copy_from_slice(&9u32.to_ne_bytes());
        b[8..16].copy_from_slice(&77u64.to_ne_bytes());
        b[16..24].copy_from_slice(&5u64.to_ne_bytes());
        b[24..28].copy_from_slice(&1000u32.to_ne_bytes());
        b[28..32].copy_from_slice(&100u32.to_ne_bytes());
        let h = InHeader::parse(&b).unwrap();
        assert_eq!(h, InHeader { opcode: 9, unique: 77, nodeid: 5, uid: 1000, gid: 100 });
        assert_eq!(InHeader::parse(&b[..30]), None);
    }

    #[test]
    fn an_error_reply_is_the_negated_errno_with_no_payload() {
        let h = out_header(42, Err(Errno::NOENT));
        assert_eq!(u32::from_ne_bytes(h[0..4].try_into().unwrap()), 16);
        assert_eq!(i32::from_ne_bytes(h[4..8].try_into().unwrap()), -libc::ENOENT);
        assert_eq!(u64::from_ne_bytes(h[8..16].try_into().unwrap()), 42);
    }

    #[test]
    fn mkdir_then_lookup_answers_an_entry_naming_the_new_directory() {
        let fs = ModelFs::new();
        let mut out = Vec::new();
        answer(
            &fs,
            &Direct::default(),
            &header(op::MKDIR, fsapi::ROOT),
            &mkdir_arg(0o40755, 0o022),
            b"d\0",
            &mut out,
        )
        .unwrap();
        assert_eq!(out.len(), 128);
        let made = u64::from_ne_bytes(out[0..8].try_into().unwrap());
        answer(&fs, &Direct::default(), &header(op::LOOKUP, fsapi::ROOT), &[], b"d\0", &mut out).unwrap();
        assert_eq!(u64::from_ne_bytes(out[0..8].try_into().unwrap()), made);
        let mode = u32::from_ne_bytes(out[40 + 60..40 + 64].try_into().unwrap());
        assert_eq!(mode, libc::S_IFDIR | 0o755);
    }

    #[test]
    fn a_lookup_of_a_missing_name_answers_node_0_to_keep_for_the_entry_time() {
        let fs = ModelFs::new();
        let mut out = Vec::new();
        answer(&fs, &Direct::default(), &header(op::LOOKUP, fsapi::ROOT), &[], b"none\0", &mut out).unwrap();
        // fuse_entry_out: nodeid (0), generation (8), entry_valid (16).
        assert_eq!(out.len(), 128);
        assert_eq!(u64::from_ne_bytes(out[0..8].try_into().unwrap()), 0);
        assert_eq!(u64::from_ne_bytes(out[16..24].try_into().unwrap()), TTL_SECS);
    }

    #[test]
    fn a_lookup_failing_otherwise_is_that_error() {
        let fs = ModelFs::new();
        let mut out = Vec::new();
        let long = [vec![b'n'; 300], vec![0]].concat();
        let got = answer(&fs, &Direct::default(), &header(op::LOOKUP, fsapi::ROOT), &[], &long, &mut out);
        assert_eq!(got, Err(Errno::NAMETOOLONG));
    }

    #[test]
    fn opendir_is_enosys_so_the_kernel_stops_asking_and_caches_listings() {
        let fs = ModelFs::new();
        let mut out = Vec::new();
        let got =
            answer(&fs, &Direct::default(), &header(op::OPENDIR, fsapi::ROOT), &[0u8; 8], &[], &mut out);
        assert_eq!(got, Err(Errno::NOSYS));
    }

    /// `struct fuse_mknod_in`: mode, rdev, umask, padding.
    fn mknod_arg(mode: u32, rdev: u32) -> Vec<u8> {
        [mode, rdev, 0o022, 0].map(u32::to_ne_bytes).concat()
    }

    #[test]
    fn mknod_makes_each_kind_and_its_entry_carries_the_kind_and_number() {
        let fs = ModelFs::new();
        let mut out = Vec::new();
        let rdev = fsapi::makedev(1, 3);
        for (name, mode, kept) in [
            (&b"p\0"[..], libc::S_IFIFO, 0),
            (b"c\0", libc::S_IFCHR, rdev),
            (b"b\0", libc::S_IFBLK, rdev),
            (b"s\0", libc::S_IFSOCK, 0),
            (b"f\0", libc::S_IFREG, 0),
        ] {
            answer(
                &fs,
                &Direct::default(),
                &header(op::MKNOD, fsapi::ROOT),
                &mknod_arg(mode | 0o666, rdev),
                name,
                &mut out,
            )
            .unwrap();
            // fuse_entry_out: 40 bytes, then fuse_attr: mode at 60, rdev at 76.
            let at = |o: usize| u32::from_ne_bytes(out[40 + o..40 + o + 4].try_into().unwrap());
            assert_eq!((at(60), at(76)), (mode | 0o644, kept), "{:?}", &name[..1]);
        }
    }

    #[test]
    fn mknod_of_bits_no_kind_has_is_einval() {
        let fs = ModelFs::new();
        let mut out = Vec::new();
        let got = answer(
            &fs,
            &Direct::default(),
            &header(op::MKNOD, fsapi::ROOT),
            &mknod_arg(0o170644, 0),
            b"x\0",
            &mut out,
        );
        assert_eq!(got, Err(Errno::INVAL));
    }

    #[test]
    fn readdir_gives_a_fifo_and_a_socket_their_entry_types() {
        let fs = ModelFs::new();
        let mut out = Vec::new();
        for (name, mode) in [(&b"p\0"[..], libc::S_IFIFO), (b"s\0", libc::S_IFSOCK)] {
            answer(
                &fs,
                &Direct::default(),
                &header(op::MKNOD, fsapi::ROOT),
                &mknod_arg(mode | 0o644, 0),
                name,
                &mut out,
            )
            .unwrap();
        }
        let mut arg = vec![0u8; 40];
        arg[16..20].copy_from_slice(&4096u32.to_ne_bytes());
        answer(&fs, &Direct::default(), &header(op::READDIR, fsapi::ROOT), &arg, &[], &mut out).unwrap();
        // fuse_dirent: ino, off, namelen, type (at 20); 32 bytes each here.
        let types: Vec<u32> =
            (0..2).map(|i| u32::from_ne_bytes(out[32 * i + 20..32 * i + 24].try_into().unwrap())).collect();
        assert_eq!(types, [u32::from(libc::DT_FIFO), u32::from(libc::DT_SOCK)]);
    }

    #[test]
    fn a_name_without_its_nul_is_einval() {
        let fs = ModelFs::new();
        let mut out = Vec::new();
        let got = answer(&fs, &Direct::default(), &header(op::LOOKUP, fsapi::ROOT), &[], b"d", &mut out);
        assert_eq!(got, Err(Errno::INVAL));
    }

    #[test]
    fn a_fixed_argument_cut_short_is_einval() {
        let fs = ModelFs::new();
        let mut out = Vec::new();
        let got =
            answer(&fs, &Direct::default(), &header(op::MKDIR, fsapi::ROOT), &[0u8; 6], b"d\0", &mut out);
        assert_eq!(got, Err(Errno::INVAL));
    }

    #[test]
    fn write_then_read_round_trips_the_data() {
        let fs = ModelFs::new();
        let mut out = Vec::new();
        let create = [0u32, 0o100644, 0o022, 0].map(u32::to_ne_bytes).concat();
        answer(&fs, &Direct::default(), &header(op::CREATE, fsapi::ROOT), &create, b"f\0", &mut out).unwrap();
        let ino = u64::from_ne_bytes(out[0..8].try_into().unwrap());
        let mut io = vec![0u8; 40];
        io[8..16].copy_from_slice(&3u64.to_ne_bytes());
        io[16..20].copy_from_slice(&5u32.to_ne_bytes());
        answer(&fs, &Direct::default(), &header(op::WRITE, ino), &io, b"hello", &mut out).unwrap();
        assert_eq!(u32::from_ne_bytes(out[0..4].try_into().unwrap()), 5);
        io[8..16].copy_from_slice(&0u64.to_ne_bytes());
        io[16..20].copy_from_slice(&100u32.to_ne_bytes());
        answer(&fs, &Direct::default(), &header(op::READ, ino), &io, &[], &mut out).unwrap();
        assert_eq!(out, b"\0\0\0hello");
    }

    /// Below the free-space threshold an open for writing, and a create,
    /// is answered with `FOPEN_DIRECT_IO` (direct.rs); an open for
    /// reading is not.
    #[test]
    fn opens_for_writing_below_the_threshold_answer_direct_io() {
        let fs = ModelFs::new();
        let direct = Direct::default();
        direct.set_below(u64::MAX);
        let mut out = Vec::new();
        let create = [libc::O_WRONLY as u32, 0o100644, 0o022, 0].map(u32::to_ne_bytes).concat();
        answer(&fs, &direct, &header(op::CREATE, fsapi::ROOT), &create, b"f\0", &mut out).unwrap();
        let ino = u64::from_ne_bytes(out[0..8].try_into().unwrap());
        // fuse_entry_out (128 bytes), then fuse_open_out: fh, open_flags.
        assert_eq!(u32::from_ne_bytes(out[136..140].try_into().unwrap()), 1);
        let flags_of = |access: i32, out: &mut Vec<u8>| {
            let arg = [access as u32, 0].map(u32::to_ne_bytes).concat();
            answer(&fs, &direct, &header(op::OPEN, ino), &arg, &[], out).unwrap();
            u32::from_ne_bytes(out[8..12].try_into().unwrap())
        };
        assert_eq!(flags_of(libc::O_RDWR, &mut out), 1);
        assert_eq!(flags_of(libc::O_RDONLY, &mut out), 0);
    }

    #[test]
    fn readdir_stops_before_an_entry_that_would_not_fit() {
        let fs = ModelFs::new();
        let mut out = Vec::new();
        for n in [b"a\0", b"b\0", b"c\0"] {
            answer(
                &fs,
                &Direct::default(),
                &header(op::MKDIR, fsapi::ROOT),
                &mkdir_arg(0o755, 0),
                n,
                &mut out,
            )
            .unwrap();
        }
        let mut arg = vec![0u8; 40];
        // Room for two 32-byte entries (24 bytes and a one-byte name, padded).
        arg[16..20].copy_from_slice(&70u32.to_ne_bytes());
        answer(&fs, &Direct::default(), &header(op::READDIR, fsapi::ROOT), &arg, &[], &mut out).unwrap();
        assert_eq!(out.len(), 64);
        let next = u64::from_ne_bytes(out[40..48].try_into().unwrap());
        arg[8..16].copy_from_slice(&next.to_ne_bytes());
        answer(&fs, &Direct::default(), &header(op::READDIR, fsapi::ROOT), &arg, &[], &mut out).unwrap();
        assert_eq!(out.len(), 32, "the third entry comes from the second entry's offset");
    }

    /// `struct fuse_rename2_in`: newdir, flags, padding.
    fn rename2_arg(flags: u32) -> Vec<u8> {
        [fsapi::ROOT.to_ne_bytes().to_vec(), flags.to_ne_bytes().to_vec(), vec![0u8; 4]].concat()
    }

    #[test]
    fn rename2_exchanges_two_entries() {
        let fs = ModelFs::new();
        let mut out = Vec::new();
        let direct = Direct::default();
        answer(&fs, &direct, &header(op::MKDIR, fsapi::ROOT), &mkdir_arg(0o755, 0), b"a\0", &mut out)
            .unwrap();
        let create = [0u32, 0o100644, 0, 0].map(u32::to_ne_bytes).concat();
        answer(&fs, &direct, &header(op::CREATE, fsapi::ROOT), &create, b"b\0", &mut out).unwrap();
        let exchange = rename2_arg(libc::RENAME_EXCHANGE);
        answer(&fs, &direct, &header(op::RENAME2, fsapi::ROOT), &exchange, b"a\0b\0", &mut out).unwrap();
        let kind_of = |n: &str| fs.lookup(fsapi::ROOT, OsStr::new(n)).unwrap().kind;
        assert_eq!((kind_of("a"), kind_of("b")), (FileType::File, FileType::Dir));
    }

    #[test]
    fn rename2_without_replacing_an_existing_name_is_eexist() {
        let fs = ModelFs::new();
        let mut out = Vec::new();
        let direct = Direct::default();
        for n in [b"a\0", b"b\0"] {
            answer(&fs, &direct, &header(op::MKDIR, fsapi::ROOT), &mkdir_arg(0o755, 0), n, &mut out).unwrap();
        }
        let noreplace = rename2_arg(libc::RENAME_NOREPLACE);
        let got = answer(&fs, &direct, &header(op::RENAME2, fsapi::ROOT), &noreplace, b"a\0b\0", &mut out);
        assert_eq!(got, Err(Errno::EXIST));
    }

    #[test]
    fn rename2_with_whiteout_is_einval_and_moves_nothing() {
        let fs = ModelFs::new();
        let mut out = Vec::new();
        let direct = Direct::default();
        answer(&fs, &direct, &header(op::MKDIR, fsapi::ROOT), &mkdir_arg(0o755, 0), b"a\0", &mut out)
            .unwrap();
        let whiteout = rename2_arg(libc::RENAME_WHITEOUT);
        let got = answer(&fs, &direct, &header(op::RENAME2, fsapi::ROOT), &whiteout, b"a\0b\0", &mut out);
        assert_eq!(got, Err(Errno::INVAL));
        assert!(fs.lookup(fsapi::ROOT, OsStr::new("a")).is_ok());
    }

    #[test]
    fn a_setattr_the_kernel_marks_clears_setuid_before_the_chown() {
        let fs = ModelFs::new();
        let mut out = Vec::new();
        let create = [0u32, 0o104755, 0, 0].map(u32::to_ne_bytes).concat();
        answer(&fs, &Direct::default(), &header(op::CREATE, fsapi::ROOT), &create, b"f\0", &mut out).unwrap();
        let ino = u64::from_ne_bytes(out[0..8].try_into().unwrap());
        let mut arg = vec![0u8; 88];
        arg[0..4].copy_from_slice(&(FATTR_UID | FATTR_KILL_SUIDGID).to_ne_bytes());
        arg[76..80].copy_from_slice(&7u32.to_ne_bytes());
        answer(&fs, &Direct::default(), &header(op::SETATTR, ino), &arg, &[], &mut out).unwrap();
        let attr = fs.getattr(ino).unwrap();
        assert_eq!((attr.uid, attr.perm), (7, 0o755));
    }

    #[test]
    fn counts_add_rename2_to_rename_and_leave_out_what_never_came() {
        let counts = OpCounts::new();
        for code in [op::RENAME, op::RENAME2, op::LOOKUP, 9999] {
            counts.add(code);
        }
        assert_eq!(counts.by_name(), vec![("rename", 2), ("lookup", 1), ("other", 1)]);
    }

    /// A file `f` in the model's root holding `bytes`; its inode.
    fn file_holding(fs: &ModelFs, bytes: &[u8]) -> u64 {
        let f = fs.create(fsapi::ROOT, OsStr::new("f"), Owner::root(0o644)).unwrap();
        fs.write(f.ino, 0, bytes).unwrap();
        f.ino
    }

    /// `struct fuse_fallocate_in`: fh, offset, length, mode, padding.
    fn fallocate_arg(offset: u64, length: u64, mode: i32) -> Vec<u8> {
        [[0, offset, length].map(u64::to_ne_bytes).concat(), [mode as u32, 0].map(u32::to_ne_bytes).concat()]
            .concat()
    }

    #[test]
    fn fallocate_punches_the_range_its_argument_names() {
        let fs = ModelFs::new();
        let f = file_holding(&fs, &[9u8; 3 * 4096]);
        let punch = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
        answer(
            &fs,
            &Direct::default(),
            &header(op::FALLOCATE, f),
            &fallocate_arg(4096, 4096, punch),
            &[],
            &mut Vec::new(),
        )
        .unwrap();
        assert_eq!(fs.lseek(f, 0, fsapi::Whence::Hole), Ok(4096));
        assert_eq!(fs.getattr(f).unwrap().size, 3 * 4096);
    }

    #[test]
    fn fallocate_of_a_mode_not_offered_is_eopnotsupp() {
        let fs = ModelFs::new();
        let f = file_holding(&fs, b"x");
        let collapse = 0x08;
        let got = answer(
            &fs,
            &Direct::default(),
            &header(op::FALLOCATE, f),
            &fallocate_arg(0, 4096, collapse),
            &[],
            &mut Vec::new(),
        );
        assert_eq!(got, Err(Errno::OPNOTSUPP));
    }

    #[test]
    fn lseek_answers_the_offset_of_the_next_hole() {
        let fs = ModelFs::new();
        let f = file_holding(&fs, b"");
        fs.write(f, 8192, b"data").unwrap();
        // fh, offset, whence, padding.
        let arg = [
            [0, 8192].map(u64::to_ne_bytes).concat(),
            [libc::SEEK_HOLE as u32, 0].map(u32::to_ne_bytes).concat(),
        ]
        .concat();
        let mut out = Vec::new();
        answer(&fs, &Direct::default(), &header(op::LSEEK, f), &arg, &[], &mut out).unwrap();
        assert_eq!(out, 8196u64.to_ne_bytes());
    }

    /// `struct fuse_copy_file_range_in` from the request's node to `to`.
    fn copy_arg(off_in: u64, to: u64, off_out: u64, len: u64, flags: u64) -> Vec<u8> {
        [0, off_in, to, 0, off_out, len, flags].map(u64::to_ne_bytes).concat()
    }

    #[test]
    fn copy_file_range_answers_the_bytes_copied_cut_at_the_source_end() {
        let fs = ModelFs::new();
        let f = file_holding(&fs, b"0123456789");
        let g = fs.create(fsapi::ROOT, OsStr::new("g"), Owner::root(0o644)).unwrap().ino;
        let mut out = Vec::new();
        answer(
            &fs,
            &Direct::default(),
            &header(op::COPY_FILE_RANGE, f),
            &copy_arg(4, g, 0, 100, 0),
            &[],
            &mut out,
        )
        .unwrap();
        assert_eq!(out, [6u32.to_ne_bytes(), [0; 4]].concat());
        let mut buf = [0u8; 6];
        fs.read(g, 0, &mut buf).unwrap();
        assert_eq!(&buf, b"456789");
    }

    #[test]
    fn copy_file_range_with_flags_is_einval() {
        let fs = ModelFs::new();
        let f = file_holding(&fs, b"0123456789");
        let got = answer(
            &fs,
            &Direct::default(),
            &header(op::COPY_FILE_RANGE, f),
            &copy_arg(0, f, 20, 5, 1),
            &[],
            &mut Vec::new(),
        );
        assert_eq!(got, Err(Errno::INVAL));
    }

    /// A file `f` in the root with `user.a` = "hello", set through
    /// SETXATTR (`struct fuse_setxattr_in` without FUSE_SETXATTR_EXT:
    /// size, flags; then the name and the value): its inode.
    fn with_attribute(fs: &ModelFs) -> u64 {
        let mut out = Vec::new();
        let create = [0u32, 0o100644, 0o022, 0].map(u32::to_ne_bytes).concat();
        answer(fs, &Direct::default(), &header(op::CREATE, fsapi::ROOT), &create, b"f\0", &mut out).unwrap();
        let ino = u64::from_ne_bytes(out[0..8].try_into().unwrap());
        let arg = [5u32, 0].map(u32::to_ne_bytes).concat();
        answer(fs, &Direct::default(), &header(op::SETXATTR, ino), &arg, b"user.a\0hello", &mut out).unwrap();
        ino
    }

    #[test]
    fn getxattr_answers_a_probe_with_the_size_and_a_buffer_with_the_value() {
        let fs = ModelFs::new();
        let ino = with_attribute(&fs);
        let mut out = Vec::new();
        answer(&fs, &Direct::default(), &header(op::GETXATTR, ino), &[0u8; 8], b"user.a\0", &mut out)
            .unwrap();
        assert_eq!(out, [5u32.to_ne_bytes(), [0; 4]].concat(), "fuse_getxattr_out: size, padding");
        let size = [64u32, 0].map(u32::to_ne_bytes).concat();
        answer(&fs, &Direct::default(), &header(op::GETXATTR, ino), &size, b"user.a\0", &mut out).unwrap();
        assert_eq!(out, b"hello");
    }

    #[test]
    fn getxattr_and_listxattr_into_a_buffer_too_small_are_erange() {
        let fs = ModelFs::new();
        let ino = with_attribute(&fs);
        let mut out = Vec::new();
        let small = [4u32, 0].map(u32::to_ne_bytes).concat();
        assert_eq!(
            answer(&fs, &Direct::default(), &header(op::GETXATTR, ino), &small, b"user.a\0", &mut out),
            Err(Errno::RANGE)
        );
        assert_eq!(
            answer(&fs, &Direct::default(), &header(op::LISTXATTR, ino), &small, &[], &mut out),
            Err(Errno::RANGE)
        );
    }

    #[test]
    fn listxattr_gives_each_name_nul_terminated() {
        let fs = ModelFs::new();
        let ino = with_attribute(&fs);
        let mut out = Vec::new();
        let size = [64u32, 0].map(u32::to_ne_bytes).concat();
        answer(&fs, &Direct::default(), &header(op::LISTXATTR, ino), &size, &[], &mut out).unwrap();
        assert_eq!(out, b"user.a\0");
    }

    #[test]
    fn setxattr_with_xattr_create_over_a_name_there_is_eexist() {
        let fs = ModelFs::new();
        let ino = with_attribute(&fs);
        let mut out = Vec::new();
        let arg = [1u32, libc::XATTR_CREATE as u32].map(u32::to_ne_bytes).concat();
        let got = answer(&fs, &Direct::default(), &header(op::SETXATTR, ino), &arg, b"user.a\0x", &mut out);
        assert_eq!(got, Err(Errno::EXIST));
    }

    #[test]
    fn removexattr_removes_the_name_and_again_is_enodata() {
        let fs = ModelFs::new();
        let ino = with_attribute(&fs);
        let mut out = Vec::new();
        answer(&fs, &Direct::default(), &header(op::REMOVEXATTR, ino), &[], b"user.a\0", &mut out).unwrap();
        let again =
            answer(&fs, &Direct::default(), &header(op::REMOVEXATTR, ino), &[], b"user.a\0", &mut out);
        assert_eq!(again, Err(Errno::NODATA));
    }

    #[test]
    fn a_setxattr_value_shorter_than_its_size_is_einval() {
        let fs = ModelFs::new();
        let ino = with_attribute(&fs);
        let mut out = Vec::new();
        let arg = [9u32, 0].map(u32::to_ne_bytes).concat();
        let got =
            answer(&fs, &Direct::default(), &header(op::SETXATTR, ino), &arg, b"user.b\0short", &mut out);
        assert_eq!(got, Err(Errno::INVAL));
    }

    /// `struct posix_acl_xattr`: version 2, then (tag, perm, id) entries.
    fn acl_value(entries: &[(u16, u16, u32)]) -> Vec<u8> {
        let mut out = 2u32.to_le_bytes().to_vec();
        for &(tag, perm, id) in entries {
            out.extend([tag.to_le_bytes().as_slice(), &perm.to_le_bytes(), &id.to_le_bytes()].concat());
        }
        out
    }

    #[test]
    fn with_acls_agreed_a_new_file_takes_its_directorys_default_acl() {
        let fs = ModelFs::new();
        let mut out = Vec::new();
        let agreed = Agreed { acl: true };
        answer_with(
            &fs,
            &Direct::default(),
            &header(op::MKDIR, fsapi::ROOT),
            &mkdir_arg(0o755, 0o022),
            b"d\0",
            &mut out,
            agreed,
        )
        .unwrap();
        let d = u64::from_ne_bytes(out[0..8].try_into().unwrap());
        // user::rwx, user:1000:rwx, group::r-x, mask::rwx, other::---
        let default = acl_value(&[(1, 7, 0), (2, 7, 1000), (4, 5, 0), (0x10, 7, 0), (0x20, 0, 0)]);
        fs.setxattr(d, OsStr::new("system.posix_acl_default"), &default, fsapi::XattrFlags::ANY).unwrap();
        let create = [0u32, 0o100666, 0o022, 0].map(u32::to_ne_bytes).concat();
        answer_with(&fs, &Direct::default(), &header(op::CREATE, d), &create, b"f\0", &mut out, agreed)
            .unwrap();
        let f = u64::from_ne_bytes(out[0..8].try_into().unwrap());
        assert_eq!(fs.getattr(f).unwrap().perm, 0o660, "the ACL's bits, not the umask's");
        let access = fs.getxattr(f, OsStr::new("system.posix_acl_access")).unwrap();
        assert_eq!(access, acl_value(&[(1, 6, 0), (2, 7, 1000), (4, 5, 0), (0x10, 6, 0), (0x20, 0, 0)]));
    }

    #[test]
    fn without_acls_agreed_a_default_acl_is_not_given() {
        let fs = ModelFs::new();
        let mut out = Vec::new();
        let default = acl_value(&[(1, 7, 0), (2, 7, 1000), (4, 5, 0), (0x10, 7, 0), (0x20, 0, 0)]);
        fs.setxattr(fsapi::ROOT, OsStr::new("system.posix_acl_default"), &default, fsapi::XattrFlags::ANY)
            .unwrap();
        let create = [0u32, 0o100666, 0o022, 0].map(u32::to_ne_bytes).concat();
        answer(&fs, &Direct::default(), &header(op::CREATE, fsapi::ROOT), &create, b"f\0", &mut out).unwrap();
        let f = u64::from_ne_bytes(out[0..8].try_into().unwrap());
        assert_eq!(fs.getattr(f).unwrap().perm, 0o644);
    }

    #[test]
    fn a_chmod_of_a_file_with_an_acl_sets_its_mask() {
        let fs = ModelFs::new();
        let ino = with_attribute(&fs);
        let access = acl_value(&[(1, 6, 0), (2, 6, 65534), (4, 4, 0), (0x10, 6, 0), (0x20, 4, 0)]);
        fs.setxattr(ino, OsStr::new("system.posix_acl_access"), &access, fsapi::XattrFlags::ANY).unwrap();
        let mut arg = vec![0u8; 88];
        arg[0..4].copy_from_slice(&FATTR_MODE.to_ne_bytes());
        arg[68..72].copy_from_slice(&0o100640u32.to_ne_bytes());
        let mut out = Vec::new();
        answer(&fs, &Direct::default(), &header(op::SETATTR, ino), &arg, &[], &mut out).unwrap();
        let now = fs.getxattr(ino, OsStr::new("system.posix_acl_access")).unwrap();
        assert_eq!(now, acl_value(&[(1, 6, 0), (2, 6, 65534), (4, 4, 0), (0x10, 4, 0), (0x20, 0, 0)]));
    }

    #[test]
    fn an_unknown_operation_is_enosys() {
        let fs = ModelFs::new();
        let mut out = Vec::new();
        assert_eq!(answer(&fs, &Direct::default(), &header(9999, 1), &[], &[], &mut out), Err(Errno::NOSYS));
    }
}
