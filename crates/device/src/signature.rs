//! Recognising targets that hold data: file systems, partition tables,
//! RAID and LVM members, iolab's own volumes. A workload refuses to write to
//! such a target unless the user says `--force`.

use crate::{AlignedBuf, Device, Result};

/// Bytes read from the start of a device to look for signatures: enough to
/// reach btrfs's superblock at 64 KiB and the ISO 9660 descriptor at 32 KiB.
pub const PROBE_BYTES: usize = 72 * 1024;

/// Magic bytes at the start of every iolab volume drive (see docs/formats.md).
pub const IOLAB_VOLUME_MAGIC: &[u8; 8] = b"IOLABVOL";
/// Magic bytes at the start of an iolab file system (see docs/formats.md).
pub const IOLAB_FS_MAGIC: &[u8; 8] = b"IOLABFS1";
/// Magic bytes of an iolab block log's commit headers, in two slots at 0
/// and 4096 (see docs/formats.md, "Block log").
pub const IOLAB_LOG_MAGIC: &[u8; 8] = b"IOLABLOG";

struct Known {
    name: &'static str,
    offset: usize,
    magic: &'static [u8],
}

const KNOWN: &[Known] = &[
    Known { name: "iolab volume", offset: 0, magic: IOLAB_VOLUME_MAGIC },
    Known { name: "iolab file system", offset: 0, magic: IOLAB_FS_MAGIC },
    Known { name: "iolab block log", offset: 0, magic: IOLAB_LOG_MAGIC },
    Known { name: "iolab block log", offset: 4096, magic: IOLAB_LOG_MAGIC },
    Known { name: "ext2/ext3/ext4 file system", offset: 1080, magic: &[0x53, 0xef] },
    Known { name: "XFS file system", offset: 0, magic: b"XFSB" },
    Known { name: "btrfs file system", offset: 0x10040, magic: b"_BHRfS_M" },
    Known { name: "GPT partition table", offset: 512, magic: b"EFI PART" },
    Known { name: "GPT partition table (4Kn)", offset: 4096, magic: b"EFI PART" },
    Known { name: "LVM physical volume", offset: 512 + 24, magic: b"LVM2 001" },
    Known { name: "Linux md RAID member (1.1)", offset: 0, magic: &[0xfc, 0x4e, 0x2b, 0xa9] },
    Known { name: "Linux md RAID member (1.2)", offset: 4096, magic: &[0xfc, 0x4e, 0x2b, 0xa9] },
    Known { name: "Linux swap", offset: 4086, magic: b"SWAPSPACE2" },
    Known { name: "NTFS file system", offset: 3, magic: b"NTFS    " },
    Known { name: "FAT32 file system", offset: 82, magic: b"FAT32   " },
    Known { name: "FAT file system", offset: 54, magic: b"FAT1" },
    Known { name: "ISO 9660 image", offset: 32769, magic: b"CD001" },
    Known { name: "UFS/FFS file system", offset: 8192 + 1372, magic: &[0x54, 0x19, 0x01, 0x00] },
    Known { name: "UFS2/FFS2 file system", offset: 65536 + 1372, magic: &[0x19, 0x01, 0x54, 0x19] },
    Known { name: "LUKS encrypted volume", offset: 0, magic: b"LUKS\xba\xbe" },
    Known { name: "DOS/MBR partition table", offset: 510, magic: &[0x55, 0xaa] },
];

/// Looks for a known signature in `head`, the first bytes of a device.
pub fn identify(head: &[u8]) -> Option<&'static str> {
    KNOWN.iter().find(|k| head.get(k.offset..k.offset + k.magic.len()) == Some(k.magic)).map(|k| k.name)
}

/// Reads the start of `dev` and names what it holds, if anything known.
pub fn probe(dev: &dyn Device) -> Result<Option<&'static str>> {
    let len = (PROBE_BYTES as u64).min(dev.size_bytes()) as usize;
    let len = len - len % dev.sector_bytes() as usize;
    if len == 0 {
        return Ok(None);
    }
    let mut buf = AlignedBuf::zeroed(len, dev.buffer_align().max(4096));
    dev.read_at(&mut buf, 0)?;
    Ok(identify(&buf))
}
