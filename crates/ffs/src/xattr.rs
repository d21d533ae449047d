//! Extended attributes: all of an inode's in one block of its own
//! (`format/xattr.rs`), which is metadata and never rewritten in place.
//! Every change writes the whole set to a new block, points the inode at
//! it, and frees the old block, in the policy's order: under `sync` the
//! new block is durable before the inode, and the inode before the old
//! block is freed; under `softdep` the inode's pointer reaches the disk
//! only once the new block is settled (until then the disk keeps the old
//! pointer) and the old block is held until no copy on the disk points to
//! it; under `log` all of it is one call's metadata, in one transaction;
//! under `async` the writes are delayed like any other.

use fsapi::xattr::{self, XattrName};
use fsapi::{Errno, FileType, XattrFlags};

use crate::core::{io_failed, Core};
use crate::format::{DiskInode, XattrBlock, BLOCK_UNITS};
use crate::softdep::{FreedFrom, Kind, Wait};

impl Core {
    /// The extended attributes of inode `ino` (`inode`): none without a
    /// block; EIO for a pointer outside the data area or a block that
    /// fails its checks (fsck's `bad_xattr_block`), which stop nothing
    /// else.
    pub fn xattrs_of(&mut self, ino: u32, inode: &DiskInode) -> Result<XattrBlock, Errno> {
        if inode.xattr == 0 {
            return Ok(XattrBlock::default());
        }
        if !self.sb.is_data(u64::from(inode.xattr)) {
            return Err(Errno::IO);
        }
        let bytes = match self.cache.read(&mut self.order, u64::from(inode.xattr)) {
            Ok(b) => b,
            Err(e) => return Err(io_failed(self, e)),
        };
        XattrBlock::decode(bytes, ino, inode.xattr, "").map_err(|_| Errno::IO)
    }

    /// Gives inode `ino` (`inode`, stored by this call) the attributes
    /// `attrs` in a new block (none: no block), then frees the block it
    /// had, in the policy's order (see the module's doc).
    pub fn put_xattrs(&mut self, ino: u32, inode: &mut DiskInode, attrs: &XattrBlock) -> Result<(), Errno> {
        debug_assert!(attrs.fits(), "refused with ENOSPC before");
        let old = inode.xattr;
        let new = if attrs.entries.is_empty() { 0 } else { self.new_xattr_block(ino, inode, attrs)? };
        inode.blocks_512 =
            inode.blocks_512.saturating_sub(inode.xattr_units()) + if new == 0 { 0 } else { BLOCK_UNITS };
        inode.xattr = new;
        let now = fsapi::Time::now();
        inode.times[2] = (now.secs, now.nanos);
        let block = self.put_inode(ino, inode)?;
        self.ordered(block)?;
        if old != 0 {
            // Under `softdep`, held until the inode on the disk no longer
            // points to it.
            self.free_blocks(vec![old], FreedFrom::Other, vec![Wait::Inode(ino)])?;
        }
        Ok(())
    }

    /// A new block holding `attrs` for inode `ino`, near its old one (or
    /// its group's data); under `sync` durable before anything points to
    /// it.
    fn new_xattr_block(&mut self, ino: u32, inode: &DiskInode, attrs: &XattrBlock) -> Result<u32, Errno> {
        let hint = if inode.xattr != 0 { u64::from(inode.xattr) } else { self.inode_group_data(ino) };
        let block = self.alloc_block(hint)?;
        self.order.set_kind(u64::from(block), Kind::Xattr);
        match self.cache.fresh(&mut self.order, u64::from(block)) {
            Ok(bytes) => attrs.encode(ino, bytes),
            Err(e) => return Err(io_failed(self, e)),
        }
        self.ordered(u64::from(block))?;
        Ok(block)
    }
}

/// getxattr(2) on inode `ino` (`inode`, of `kind`).
pub fn get(
    core: &mut Core,
    ino: u32,
    inode: &DiskInode,
    kind: FileType,
    name: &XattrName,
) -> Result<Vec<u8>, Errno> {
    xattr::check_read(kind, name)?;
    core.xattrs_of(ino, inode)?.entries.remove(name).ok_or(Errno::NODATA)
}

/// setxattr(2) on inode `ino` (`inode`, of `kind`): ENOSPC when every
/// attribute would not fit the one block, as ext4 answers.
pub fn set(
    core: &mut Core,
    ino: u32,
    inode: &mut DiskInode,
    kind: FileType,
    (name, value, flags): (XattrName, &[u8], XattrFlags),
) -> Result<(), Errno> {
    xattr::check_write(kind, &name)?;
    let mut attrs = core.xattrs_of(ino, inode)?;
    flags.allow(attrs.entries.contains_key(&name))?;
    attrs.entries.insert(name, value.to_vec());
    if !attrs.fits() {
        return Err(Errno::NOSPC);
    }
    core.put_xattrs(ino, inode, &attrs)
}

/// removexattr(2) on inode `ino` (`inode`, of `kind`).
pub fn remove(
    core: &mut Core,
    ino: u32,
    inode: &mut DiskInode,
    kind: FileType,
    name: &XattrName,
) -> Result<(), Errno> {
    xattr::check_write(kind, name)?;
    let mut attrs = core.xattrs_of(ino, inode)?;
    attrs.entries.remove(name).ok_or(Errno::NODATA)?;
    core.put_xattrs(ino, inode, &attrs)
}
