//! The superblock's decoder under fuzzing: random bytes, bit flips (with
//! the checksum left wrong, and made right again), truncation, and each
//! field at and past its bounds (docs/formats.md, "Superblock"). Each must
//! give a typed fault or a superblock within every bound; never a panic,
//! never a hang (each case runs on a thread of its own and must return
//! within `HANG_BUDGET`, a bound on hanging, not a speed figure: a decode
//! takes microseconds). Then whole images whose superblock was fuzzed
//! behind a right checksum are checked (fsck -n) and mounted: they return.
//! Inodes of random bytes behind a right checksum are garbage or keep the
//! inode's bounds.
//! The bounds are restated here from the documentation, apart from the
//! decoder's code, as the oracle.

use std::ffi::OsStr;
use std::sync::{mpsc, Arc, OnceLock};
use std::time::Duration;

use codec::Frame;
use device::{Device, MemDevice};
use ffs::format::{SlotSource, Superblock};
use ffs::fsck::{fsck, Repair};
use ffs::{FieldFault, FsError, MountOptions, Place, Policy, Problem};
use fsapi::{FileSystem, Owner, ROOT};
use proptest::prelude::*;

const HANG_BUDGET: Duration = Duration::from_secs(20);
const FRAME: Frame = Frame::zeroed(12);
const HEADER: usize = 512;
/// The decoder's cases: a 320 MiB device, three groups.
const DEVICE_BYTES: u64 = 320 << 20;
const DEVICE_BLOCKS: u64 = DEVICE_BYTES / 4096;

/// Runs `work` on a thread of its own: a panic or a hang fails the case.
pub(crate) fn bounded<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let worker = std::thread::spawn(move || {
        let _ = tx.send(work());
    });
    match rx.recv_timeout(HANG_BUDGET) {
        Ok(value) => value,
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("did not return within {HANG_BUDGET:?}"),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            let why = worker.join().err().map(|e| format!("{e:?}")).unwrap_or_default();
            panic!("panicked: {why}")
        }
    }
}

/// The superblock mkfs lays out on 320 MiB, one generation on (slot 1),
/// with counts well inside their bounds.
fn base() -> Superblock {
    let options = ffs::MkfsOptions { log_bytes: Some(1 << 20), ..Default::default() };
    let sb = ffs::geometry(DEVICE_BYTES, 512, &options).unwrap();
    assert_eq!((sb.groups, sb.blocks_per_group, sb.inodes_per_group, sb.log_blocks), (3, 32768, 6832, 256));
    Superblock {
        generation: 5,
        free_blocks: 1000,
        free_inodes: 40,
        dirs: 2,
        fs_id: 0x5eed,
        created_ns: 7,
        ..sb
    }
}

fn decode(bytes: Vec<u8>, slot: u8) -> Result<Superblock, FieldFault> {
    bounded(move || {
        Superblock::decode(&bytes, &SlotSource { device: "fs.img", device_bytes: DEVICE_BYTES, slot })
    })
}

fn reseal(bytes: &mut [u8]) {
    FRAME.seal(&[], &mut bytes[..HEADER]);
}

/// Every bound a decoded superblock holds, restated from the docs.
fn holds_its_bounds(sb: &Superblock, slot: u8) -> bool {
    let (blocks, bpg, ipg) = (sb.blocks, u64::from(sb.blocks_per_group), u64::from(sb.inodes_per_group));
    let overhead = 3 + ipg / 16;
    let fixed = sb.generation <= 1 << 56
        && sb.generation % 2 == u64::from(slot)
        && sb.sector_bytes.is_power_of_two()
        && (512..=4096).contains(&sb.sector_bytes)
        && blocks <= DEVICE_BLOCKS
        && blocks <= 1 << 32
        && sb.log_start_block == 2
        && sb.log_blocks >= 1
        && sb.first_group_block == 2 + sb.log_blocks
        && sb.first_group_block < blocks;
    if !fixed
        || !(1..=32768).contains(&bpg)
        || !(16..=32768).contains(&ipg)
        || ipg % 16 != 0
        || overhead >= bpg
    {
        return false;
    }
    let span = blocks - sb.first_group_block;
    let groups = u64::from(sb.groups);
    let inodes = groups * ipg;
    groups == span.div_ceil(bpg)
        && span - (groups - 1) * bpg > overhead
        && inodes <= u64::from(u32::MAX)
        && sb.free_blocks <= span - groups * overhead
        && sb.free_inodes <= inodes
        && sb.dirs <= inodes
        && u64::from(sb.orphans) <= inodes
}

/// A slot that decodes is the one its bytes encode (every byte was
/// checked, none ignored) and holds every bound; a fault names a byte of
/// the slot read.
fn assert_sound(bytes: &[u8], slot: u8, decoded: &Result<Superblock, FieldFault>) {
    match decoded {
        Ok(sb) => {
            assert!(holds_its_bounds(sb, slot), "{sb:?}");
            assert_eq!(sb.encode(), bytes[..HEADER], "a decoded slot re-encodes");
        }
        Err(fault) => {
            let start = u64::from(slot) * 4096;
            assert!((start..start + HEADER as u64).contains(&fault.offset), "{fault}");
            assert_eq!(fault.place, Place::SuperblockSlot(slot));
        }
    }
}

/// What a field's value should give, by the documented bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Expect {
    /// Within its bound, and the others hold: the slot decodes.
    Reads,
    /// Within its own bound, but another field's bound depends on it: a
    /// fault may name that other field, never this one.
    Coupled,
    /// Past its bound: the fault names this field and its byte.
    Past,
}

use Expect::{Coupled, Past, Reads};

pub(crate) fn within(ok: bool) -> Expect {
    if ok {
        Reads
    } else {
        Past
    }
}

/// One field: its name in faults, its byte and width, what a value should
/// give in [`base`], and values at and past its bounds.
pub(crate) struct Field {
    pub name: &'static str,
    pub at: usize,
    pub width: usize,
    pub expect: fn(u64) -> Expect,
    pub edges: &'static [u64],
}

/// Base: 81920 blocks, log blocks 2..258, groups of 32768 from 258 (the
/// last 16126 long), 6832 inodes a group (427 table blocks, overhead 430).
const FIELDS: &[Field] = &[
    Field {
        name: "generation",
        at: 16,
        width: 8,
        expect: |v| within(v <= 1 << 56 && v % 2 == 1),
        edges: &[0, 1, 2, 5, (1 << 56) - 1, 1 << 56, (1 << 56) + 1, u64::MAX],
    },
    Field {
        name: "block_bytes",
        at: 24,
        width: 4,
        expect: |v| within(v == 4096),
        edges: &[0, 512, 4095, 4096, 4097, 8192, u32::MAX as u64],
    },
    Field {
        name: "sector_bytes",
        at: 28,
        width: 4,
        expect: |v| within(v.is_power_of_two() && (512..=4096).contains(&v)),
        edges: &[0, 1, 256, 511, 512, 513, 1024, 4096, 4097, 8192, u32::MAX as u64],
    },
    Field {
        name: "blocks",
        at: 32,
        width: 8,
        // Fewer blocks than three groups need: `groups` (or the log) is
        // named; a last group no longer than its overhead: this field.
        expect: |v| match v {
            _ if v > DEVICE_BLOCKS => Past,
            66_225.. => Reads,
            65_795.. => Past,
            _ => Coupled,
        },
        edges: &[0, 258, 259, 65_794, 65_795, 66_224, 66_225, 81_919, 81_920, 81_921, 1 << 32, u64::MAX],
    },
    Field {
        name: "log_start_block",
        at: 40,
        width: 8,
        expect: |v| within(v == 2),
        edges: &[0, 1, 2, 3, u64::MAX],
    },
    Field {
        name: "log_blocks",
        at: 48,
        width: 8,
        // Any other length moves the groups: first_group_block is named.
        expect: |v| match v {
            256 => Reads,
            1..=81_917 => Coupled,
            _ => Past,
        },
        edges: &[0, 1, 255, 256, 257, 81_917, 81_918, 1 << 32, u64::MAX - 1, u64::MAX],
    },
    Field {
        name: "groups",
        at: 56,
        width: 4,
        expect: |v| within(v == 3),
        edges: &[0, 1, 2, 3, 4, 131_072, u32::MAX as u64],
    },
    Field {
        name: "blocks_per_group",
        at: 60,
        width: 4,
        // Three groups of it cover the 81662 blocks after the log region;
        // too small for the inode table, inodes_per_group is named.
        expect: |v| match v {
            0 => Past,
            _ if v > 32_768 => Past,
            _ if v.saturating_mul(3) >= 81_662 && (v * 2) < 81_662 => Reads,
            _ => Coupled,
        },
        edges: &[0, 1, 430, 431, 27_220, 27_221, 32_767, 32_768, 32_769, u32::MAX as u64],
    },
    Field {
        name: "inodes_per_group",
        at: 64,
        width: 4,
        expect: |v| within(v % 16 == 0 && (16..=32_768).contains(&v)),
        edges: &[0, 1, 15, 16, 17, 6832, 6833, 32_752, 32_768, 32_784, u32::MAX as u64],
    },
    Field {
        name: "inode_bytes",
        at: 68,
        width: 4,
        expect: |v| within(v == 256),
        edges: &[0, 128, 255, 256, 257, 512, u32::MAX as u64],
    },
    Field {
        name: "first_group_block",
        at: 72,
        width: 8,
        expect: |v| within(v == 258),
        edges: &[0, 2, 257, 258, 259, 81_920, u64::MAX],
    },
    Field {
        name: "free_blocks",
        at: 80,
        width: 8,
        // 81662 blocks less three groups' 430 of overhead.
        expect: |v| within(v <= 80_372),
        edges: &[0, 80_371, 80_372, 80_373, 81_920, u64::MAX],
    },
    Field {
        name: "free_inodes",
        at: 88,
        width: 8,
        expect: |v| within(v <= 20_496),
        edges: &[0, 20_495, 20_496, 20_497, u32::MAX as u64, u64::MAX],
    },
    Field {
        name: "dirs",
        at: 96,
        width: 8,
        expect: |v| within(v <= 20_496),
        edges: &[0, 1, 20_496, 20_497, u64::MAX],
    },
    Field { name: "policy", at: 104, width: 1, expect: |v| within(v <= 3), edges: &[0, 3, 4, 255] },
    Field { name: "clean", at: 105, width: 1, expect: |v| within(v <= 1), edges: &[0, 1, 2, 255] },
    Field { name: "damage", at: 106, width: 1, expect: |v| within(v <= 2), edges: &[0, 1, 2, 3, 255] },
    Field { name: "reserved", at: 107, width: 1, expect: |v| within(v == 0), edges: &[0, 1, 255] },
    Field {
        name: "mounts",
        at: 108,
        width: 4,
        expect: |_| Reads,
        edges: &[0, 1, u32::MAX as u64 - 1, u32::MAX as u64],
    },
    Field { name: "fs_id", at: 112, width: 8, expect: |_| Reads, edges: &[0, u64::MAX] },
    Field { name: "created_ns", at: 120, width: 8, expect: |_| Reads, edges: &[0, u64::MAX] },
    Field { name: "mounted_ns", at: 128, width: 8, expect: |_| Reads, edges: &[0, u64::MAX] },
    Field {
        name: "root_inode",
        at: 136,
        width: 4,
        expect: |v| within(v == 1),
        edges: &[0, 1, 2, u32::MAX as u64],
    },
    Field {
        name: "lost_found_inode",
        at: 140,
        width: 4,
        expect: |v| within(v == 2),
        edges: &[0, 1, 2, 3, u32::MAX as u64],
    },
    Field {
        name: "orphans",
        at: 144,
        width: 4,
        expect: |v| within(v <= 20_496),
        edges: &[0, 1, 20_496, 20_497, u32::MAX as u64],
    },
    Field { name: "reserved", at: 148, width: 8, expect: |v| within(v == 0), edges: &[0, 1, u64::MAX] },
    Field { name: "reserved", at: 504, width: 8, expect: |v| within(v == 0), edges: &[0, 1 << 63, u64::MAX] },
];

/// The base slot with `field` set to `value` (its width's low bytes),
/// resealed: the field's own check decides.
fn with_field(field: &Field, value: u64) -> Vec<u8> {
    let mut bytes = base().encode();
    bytes[field.at..field.at + field.width].copy_from_slice(&value.to_le_bytes()[..field.width]);
    reseal(&mut bytes);
    bytes
}

fn field_value() -> impl Strategy<Value = (usize, u64)> {
    (0..FIELDS.len()).prop_flat_map(|i| {
        let field = &FIELDS[i];
        let max = if field.width == 8 { u64::MAX } else { (1u64 << (8 * field.width)) - 1 };
        (Just(i), prop_oneof![prop::sample::select(field.edges.to_vec()), 0..=max])
    })
}

fn flip(bytes: &mut [u8], bits: &[usize]) {
    for &bit in bits {
        bytes[bit / 8 % HEADER] ^= 1 << (bit % 8);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_are_a_fault_or_within_bounds(
        len in 0usize..700,
        seed in prop::collection::vec(any::<u8>(), 64),
        magic in any::<bool>(),
        sealed in any::<bool>(),
        slot in 0u8..2,
    ) {
        let mut bytes: Vec<u8> = (0..len).map(|i| seed[i % 64] ^ (i as u8).wrapping_mul(151)).collect();
        // Half of them pass the magic, version and checksum, so the bounds are reached.
        if magic && len >= HEADER {
            bytes[..8].copy_from_slice(b"IOLABFS1");
            bytes[8..12].copy_from_slice(&1u32.to_le_bytes());
            if sealed {
                reseal(&mut bytes);
            }
        }
        let decoded = decode(bytes.clone(), slot);
        assert_sound(&bytes, slot, &decoded);
    }

    #[test]
    fn bit_flips_fail_the_checksum(bits in prop::collection::vec(0usize..HEADER * 8, 1..6)) {
        let mut bytes = base().encode();
        flip(&mut bytes, &bits);
        let decoded = decode(bytes.clone(), 1);
        assert_sound(&bytes, 1, &decoded);
        prop_assert!(decoded.is_err() || bytes == base().encode(), "a flip got through");
    }

    #[test]
    fn bit_flips_behind_a_right_checksum_are_a_fault_or_within_bounds(
        bits in prop::collection::vec(0usize..HEADER * 8, 1..6),
    ) {
        let mut bytes = base().encode();
        flip(&mut bytes, &bits);
        reseal(&mut bytes);
        let decoded = decode(bytes.clone(), 1);
        assert_sound(&bytes, 1, &decoded);
    }

    #[test]
    fn a_slot_cut_short_is_refused_and_a_whole_block_reads(len in 0usize..4096) {
        let mut block = base().encode();
        block.resize(4096, 0);
        let decoded = decode(block[..len].to_vec(), 1);
        if len < HEADER {
            let fault = decoded.unwrap_err();
            prop_assert!(matches!(fault.problem, Problem::CutShort { .. }), "{}", fault);
        } else {
            prop_assert_eq!(decoded, Ok(base()));
        }
    }

    /// Each field at, inside and past its bounds: within them the slot
    /// reads, past them the fault names the field and its byte.
    #[test]
    fn each_field_is_checked_against_its_bounds((i, value) in field_value()) {
        let field = &FIELDS[i];
        let bytes = with_field(field, value);
        let decoded = decode(bytes.clone(), 1);
        assert_sound(&bytes, 1, &decoded);
        match ((field.expect)(value), decoded) {
            (Reads, Ok(_)) => {}
            (Coupled, Err(fault)) => prop_assert_ne!(fault.field, field.name, "{}={}: {}", field.name, value, fault),
            (Past, Err(fault)) => {
                prop_assert_eq!(fault.field, field.name, "{}={}: {}", field.name, value, fault);
                let within_field = 4096 + field.at as u64..4096 + (field.at + field.width) as u64;
                prop_assert!(within_field.contains(&fault.offset), "{}", fault);
            }
            (expect, other) => prop_assert!(false, "{}={value} ({expect:?}) gave {other:?}", field.name),
        }
    }
}

// ---- inodes ----

/// An inode slot: `bytes` with the checksum of inode `ino` made right.
fn sealed_inode(ino: u32, mut bytes: Vec<u8>) -> Vec<u8> {
    Frame::zeroed(84).seal(&ino.to_le_bytes(), &mut bytes);
    bytes
}

/// A decoded inode keeps the bounds docs/formats.md ("Inode") gives.
fn inode_holds_its_bounds(inode: &ffs::format::DiskInode) -> bool {
    let size = match inode.kind_bits() {
        ffs::format::S_IFREG => inode.size <= ffs::format::FILE_BYTES_MAX,
        ffs::format::S_IFDIR => inode.size <= ffs::format::FILE_BYTES_MAX && inode.size % 4096 == 0,
        ffs::format::S_IFLNK => inode.size < 4096,
        _ => false,
    };
    size && inode.blocks_512 <= ffs::format::FILE_UNITS_MAX && inode.inline_target.len() <= 100
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, failure_persistence: None, ..ProptestConfig::default() })]

    /// Random inodes behind a right checksum, a kind iolab makes half the
    /// time: garbage, or an inode within its bounds.
    #[test]
    fn random_inodes_are_garbage_or_within_bounds(
        seed in prop::collection::vec(any::<u8>(), 256),
        kind in prop::sample::select(vec![0u16, 0o100000, 0o040000, 0o120000]),
        size in prop_oneof![0u64..8192, Just(ffs::format::FILE_BYTES_MAX), any::<u64>()],
        ino in 1u32..1000,
    ) {
        let mut bytes = seed;
        if kind != 0 {
            bytes[0..2].copy_from_slice(&(kind | 0o644).to_le_bytes());
            bytes[16..24].copy_from_slice(&size.to_le_bytes());
        }
        let bytes = sealed_inode(ino, bytes);
        let decoded = bounded(move || ffs::format::DiskInode::decode(ino, &bytes));
        if let ffs::format::InodeSlot::Used(inode) = decoded {
            prop_assert!(inode_holds_its_bounds(&inode), "{inode:?}");
        }
    }
}

// ---- whole images ----

/// A small image (2 MiB: one group of 254 blocks, 128 inodes), made once,
/// with a file in it; its bytes.
fn image() -> &'static [u8] {
    static IMAGE: OnceLock<Vec<u8>> = OnceLock::new();
    IMAGE.get_or_init(|| {
        let dev = crate::common::fresh(2 << 20);
        let fs = crate::common::mount(&dev, Policy::Async);
        let f = fs.create(ROOT, OsStr::new("f"), Owner::root(0o644)).unwrap();
        fs.write(f.ino, 0, &[7u8; 10_000]).unwrap();
        fs.unmount().unwrap();
        let mut bytes = vec![0u8; 2 << 20];
        dev.read_at(&mut bytes, 0).unwrap();
        bytes
    })
}

/// A device holding `bytes`.
fn device(bytes: &[u8]) -> Arc<dyn Device> {
    let dev = MemDevice::new(bytes.len() as u64).unwrap();
    dev.write_at(bytes, 0).unwrap();
    Arc::new(dev)
}

/// What is done to the image's newest superblock slot, behind a right
/// checksum.
#[derive(Clone, Debug)]
enum Edit {
    Flips(Vec<usize>),
    Field { at: usize, width: usize, value: u64 },
}

fn edit() -> impl Strategy<Value = Edit> {
    let value = prop_oneof![
        prop::sample::select(vec![0u64, 1, 2, 3, 15, 16, 127, 128, 254, 255, 256, 258, 511, 512, 513, 4096]),
        prop::sample::select(vec![(1u64 << 32) - 1, 1 << 32, 1 << 56, u64::MAX]),
        any::<u64>(),
    ];
    prop_oneof![
        prop::collection::vec(0usize..HEADER * 8, 1..4).prop_map(Edit::Flips),
        ((16usize..148).prop_map(|at| at / 4 * 4), prop::sample::select(vec![1usize, 4, 8]), value)
            .prop_map(|(at, width, value)| Edit::Field { at, width, value }),
    ]
}

/// The image with its newest slot edited and resealed; with `alone`, the
/// other slot zeroed, so that the edited one is all there is.
fn fuzzed(edit: &Edit, alone: bool) -> Vec<u8> {
    let mut bytes = image().to_vec();
    let slot = newest_slot(&bytes);
    let at = slot * 4096;
    match edit {
        Edit::Flips(bits) => flip(&mut bytes[at..at + HEADER], bits),
        Edit::Field { at: field, width, value } => {
            bytes[at + field..at + field + width].copy_from_slice(&value.to_le_bytes()[..*width]);
        }
    }
    reseal(&mut bytes[at..at + HEADER]);
    if alone {
        let other = (1 - slot) * 4096;
        bytes[other..other + 4096].fill(0);
    }
    bytes
}

/// The slot the reader takes on an unedited image.
fn newest_slot(bytes: &[u8]) -> usize {
    let generation =
        |slot: usize| u64::from_le_bytes(bytes[slot * 4096 + 16..slot * 4096 + 24].try_into().unwrap());
    usize::from(generation(1) > generation(0))
}

/// fsck -n, then a mount that looks, writes and unmounts, then fsck -n
/// again: each returns, whatever it returns.
fn check_and_mount(bytes: Vec<u8>, policy: Policy) -> Vec<String> {
    let mut said = Vec::new();
    let dev = device(&bytes);
    said.push(format!("{:?}", fsck(&dev, Repair::No).map(|r| r.findings.len())));
    let options = MountOptions { policy, cache_bytes: 1 << 20, ..Default::default() };
    match ffs::Ffs::mount(Arc::clone(&dev), &options) {
        Ok(fs) => {
            said.push(format!("{:?}", fs.lookup(ROOT, OsStr::new("f")).map(|a| a.size)));
            if let Ok(a) = fs.create(ROOT, OsStr::new("g"), Owner::root(0o644)) {
                said.push(format!("{:?}", fs.write(a.ino, 0, &[1u8; 5000])));
            }
            said.push(format!("{:?}", fs.unmount().map(|u| u.superblock.generation)));
            said.push(format!("{:?}", fsck(&dev, Repair::No).map(|r| r.findings.len())));
        }
        Err(e) => said.push(e.to_string()),
    }
    said
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 250, failure_persistence: None, ..ProptestConfig::default() })]

    /// An image whose superblock was fuzzed behind a right checksum: fsck
    /// and a mount return (with an error or not), never panic or hang.
    #[test]
    fn an_image_with_a_fuzzed_superblock_is_checked_and_mounted_without_a_panic(
        edit in edit(),
        alone in any::<bool>(),
        log in any::<bool>(),
    ) {
        let bytes = fuzzed(&edit, alone);
        let policy = if log { Policy::Log } else { Policy::Async };
        bounded(move || check_and_mount(bytes, policy));
    }
}

/// The fuzzed images reach both outcomes: some are refused, some mount.
#[test]
fn the_image_fuzzer_reaches_refusals_and_mounts() {
    let refused = fuzzed(&Edit::Field { at: 56, width: 4, value: u32::MAX as u64 }, true);
    let err = ffs::Ffs::mount(device(&refused), &MountOptions::default()).err().unwrap();
    assert!(matches!(err, FsError::Superblock { .. }), "{err}");
    let mounts = fuzzed(&Edit::Field { at: 108, width: 4, value: u32::MAX as u64 }, true);
    let fs = ffs::Ffs::mount(device(&mounts), &MountOptions::default()).unwrap();
    assert_eq!(fs.superblock().mounts, u32::MAX, "a count at its end stays there");
}
