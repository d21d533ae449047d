//! An inode's extended attribute block (docs/formats.md, "Extended
//! attributes"): every attribute of one inode in one block, sorted by
//! namespace and name, behind a header with its own magic, version and a
//! checksum seeded with the owner's inode number. Written whole to a new
//! block at every change (never rewritten in place); the decoder checks
//! every field against its bound before it uses it.

use std::collections::BTreeMap;

use codec::{Frame, LeWriter};
use fsapi::xattr::{Namespace, XattrName};

use super::BLOCK_BYTES;
use crate::fault::{FieldFault, Fields, Place, Problem};

pub const XATTR_MAGIC: &[u8; 8] = b"IOLABXAT";
/// The block's own format version.
pub const XATTR_VERSION: u32 = 1;
/// Bytes before the first entry.
pub const XATTR_HEADER_BYTES: usize = 32;
/// An entry's bytes before its name: namespace, name length, value length.
const ENTRY_HEAD_BYTES: usize = 4;
/// The most entries a block holds: each takes at least its head.
pub const XATTR_ENTRIES_MAX: usize = (BLOCK_BYTES - XATTR_HEADER_BYTES) / ENTRY_HEAD_BYTES;

// The model keeps the room this block gives (fsapi::xattr), so that both
// answer ENOSPC at the same attribute.
const _: () = assert!(fsapi::xattr::ROOM_BYTES == BLOCK_BYTES - XATTR_HEADER_BYTES);
const _: () = assert!(fsapi::xattr::ENTRY_OVERHEAD_BYTES == ENTRY_HEAD_BYTES);

/// The checksum: at byte 12, over the block with the field zero, seeded
/// with the owner's inode number.
const FRAME: Frame = Frame::zeroed(12);

/// A namespace's code on the disk.
fn code(namespace: Namespace) -> u8 {
    match namespace {
        Namespace::User => 1,
        Namespace::Trusted => 2,
        Namespace::Security => 3,
        Namespace::PosixAclAccess => 4,
        Namespace::PosixAclDefault => 5,
    }
}

fn namespace_of(code: u64) -> Option<Namespace> {
    Namespace::ALL.into_iter().find(|&n| u64::from(self::code(n)) == code)
}

/// An inode's extended attributes, as its block holds them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct XattrBlock {
    pub entries: BTreeMap<XattrName, Vec<u8>>,
}

impl XattrBlock {
    /// Bytes the block's header and entries take.
    pub fn bytes(&self) -> usize {
        XATTR_HEADER_BYTES + self.entries.iter().map(|(n, v)| n.stored_bytes(v.len())).sum::<usize>()
    }

    /// Whether every entry fits the one block.
    pub fn fits(&self) -> bool {
        self.bytes() <= BLOCK_BYTES
    }

    /// The block of inode `ino` holding these attributes (at least one,
    /// and they fit: a caller with none frees the block instead, and one
    /// that does not fit is refused with ENOSPC before).
    pub fn encode(&self, ino: u32, out: &mut [u8]) {
        debug_assert!(self.fits() && !self.entries.is_empty(), "an encodable set");
        debug_assert_eq!(out.len(), BLOCK_BYTES);
        out.fill(0);
        let mut at = XATTR_HEADER_BYTES;
        let mut w = LeWriter::new(out);
        w.put_bytes(0, XATTR_MAGIC).put_u32(8, XATTR_VERSION);
        for (name, value) in &self.entries {
            w.put_u8(at, code(name.namespace))
                .put_u8(at + 1, name.suffix.len() as u8)
                .put_u16(at + 2, value.len() as u16)
                .put_bytes(at + ENTRY_HEAD_BYTES, &name.suffix)
                .put_bytes(at + ENTRY_HEAD_BYTES + name.suffix.len(), value);
            at += name.stored_bytes(value.len());
        }
        w.put_u16(16, self.entries.len() as u16).put_u16(18, at as u16);
        FRAME.seal(&ino.to_le_bytes(), out);
    }

    /// Block `block` of `device`, inode `ino`'s attributes, if it passes
    /// every check of docs/formats.md ("Extended attributes"): magic,
    /// version, checksum (seeded with `ino`); the count and the bytes
    /// used; the reserved bytes; each entry's namespace, name length,
    /// value length and name, in order (names sorted, none twice); the
    /// entries ending where `used` says, and zeros after.
    pub fn decode(b: &[u8], ino: u32, block: u32, device: &str) -> Result<XattrBlock, FieldFault> {
        let base = u64::from(block) * BLOCK_BYTES as u64;
        let f = Fields { bytes: b, device, place: Place::XattrBlock { ino, block }, base };
        f.whole_seeded(XATTR_MAGIC, XATTR_VERSION..=XATTR_VERSION, BLOCK_BYTES, &ino.to_le_bytes())?;
        let count = f.within(
            (16, 2, "count"),
            |n| (1..=XATTR_ENTRIES_MAX as u64).contains(&n),
            || format!("1 to {XATTR_ENTRIES_MAX} (a block is never written empty)"),
        )?;
        let least = XATTR_HEADER_BYTES as u64 + ENTRY_HEAD_BYTES as u64 * count;
        let used = f.within(
            (18, 2, "used"),
            |n| (least..=BLOCK_BYTES as u64).contains(&n),
            || format!("{least} (the header and {count} entry heads) to {BLOCK_BYTES}"),
        )? as usize;
        f.zero(20, XATTR_HEADER_BYTES - 20, "reserved")?;
        let mut entries = BTreeMap::new();
        let mut at = XATTR_HEADER_BYTES;
        let mut last: Option<XattrName> = None;
        for _ in 0..count {
            let (name, value, end) = entry(&f, at, used)?;
            if last.as_ref().is_some_and(|l| *l >= name) {
                let bound = "after the name before it (sorted by namespace and name, none twice)".into();
                return Err(f.out_of_bounds(at + ENTRY_HEAD_BYTES, "name", name.suffix.len() as u64, bound));
            }
            last = Some(name.clone());
            entries.insert(name, value);
            at = end;
        }
        if at != used {
            let bound = format!("exactly {at}, where the last of its {count} entries ends");
            return Err(f.out_of_bounds(18, "used", used as u64, bound));
        }
        f.zero(used, BLOCK_BYTES - used, "unused")?;
        Ok(XattrBlock { entries })
    }
}

/// The entry at byte `at` of a block whose entries end by `used`: its
/// name, its value and where the next begins.
fn entry(f: &Fields, at: usize, used: usize) -> Result<(XattrName, Vec<u8>, usize), FieldFault> {
    let namespace = f.within(
        (at, 1, "namespace"),
        |c| namespace_of(c).is_some(),
        || "1 user, 2 trusted, 3 security, 4 system.posix_acl_access, 5 system.posix_acl_default".into(),
    )?;
    let namespace = namespace_of(namespace).expect("checked just above");
    let room = used.saturating_sub(at + ENTRY_HEAD_BYTES);
    let longest = namespace.suffix_bytes_max().min(room);
    let least = usize::from(!namespace.is_acl());
    let name_len = f.within(
        (at + 1, 1, "name_length"),
        |n| (least as u64..=longest as u64).contains(&n),
        || format!("{least} to {longest} (the namespace's names, and the bytes used left)"),
    )? as usize;
    let name_at = at + ENTRY_HEAD_BYTES;
    let left = room - name_len;
    let value_len = f.within(
        (at + 2, 2, "value_length"),
        |n| n <= left as u64,
        || format!("at most {left}, the bytes used left"),
    )? as usize;
    // Inside the block: `used` is, and each length is within it.
    let suffix = &f.bytes[name_at..name_at + name_len];
    let Some(name) = XattrName::new(namespace, suffix) else {
        let nul = suffix.iter().position(|&c| c == 0).unwrap_or(0);
        let problem = Problem::OutOfBounds { bound: "no NUL in a name".into() };
        return Err(f.fault(name_at + nul, "name", 0, problem));
    };
    let value_at = name_at + name_len;
    let value = f.bytes[value_at..value_at + value_len].to_vec();
    Ok((name, value, value_at + value_len))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(n: &str) -> XattrName {
        XattrName::parse(n.as_bytes()).unwrap()
    }

    #[test]
    fn a_block_decodes_to_the_attributes_it_was_encoded_from() {
        let mut block = XattrBlock::default();
        block.entries.insert(named("user.b"), b"two".to_vec());
        block.entries.insert(named("user.a"), b"one".to_vec());
        block.entries.insert(named("system.posix_acl_access"), vec![2, 0, 0, 0]);
        let mut bytes = vec![0u8; BLOCK_BYTES];
        block.encode(7, &mut bytes);
        assert_eq!(XattrBlock::decode(&bytes, 7, 100, "d"), Ok(block));
    }

    #[test]
    fn a_block_read_for_another_inode_fails_its_checksum() {
        let mut block = XattrBlock::default();
        block.entries.insert(named("user.a"), b"one".to_vec());
        let mut bytes = vec![0u8; BLOCK_BYTES];
        block.encode(7, &mut bytes);
        let fault = XattrBlock::decode(&bytes, 8, 100, "d").unwrap_err();
        assert!(matches!(fault.problem, Problem::Checksum { .. }), "{fault}");
        assert_eq!(fault.offset, 100 * 4096 + 12);
    }
}
