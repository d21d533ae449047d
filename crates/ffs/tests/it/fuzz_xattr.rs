//! The extended attribute block's decoder under fuzzing: random bytes,
//! bit flips (with the checksum left wrong, and made right again),
//! truncation, and each field at and past its bounds (docs/formats.md,
//! "Extended attributes"). Each must give a typed fault naming a byte of
//! the block, or attributes that encode back to exactly the bytes read;
//! never a panic, never a hang (each case on a thread of its own, as in
//! `fuzz.rs`). Then images whose attribute block was fuzzed behind a
//! right checksum are checked (fsck -n and -y) and read through a mount.
//! The bounds are restated here from the documentation as the oracle.

use std::ffi::OsStr;
use std::sync::Arc;

use codec::Frame;
use device::Device;
use ffs::format::XattrBlock;
use ffs::fsck::{fsck, Repair};
use ffs::{FieldFault, Place, Policy, Problem};
use fsapi::{FileSystem, Owner, XattrFlags, ROOT};
use proptest::prelude::*;

use crate::common::{fresh, mount};
use crate::fuzz::Expect::{Coupled, Past, Reads};
use crate::fuzz::{bounded, within, Field};

const INO: u32 = 12;
const BLOCK: u32 = 900;
const BASE: u64 = BLOCK as u64 * 4096;

/// Three entries: `user.a` = "one" (bytes 32-39), `trusted.tt` = ""
/// (40-45), `system.posix_acl_access` = 2,0,0,0 (46-53); 54 bytes used.
fn base() -> Vec<u8> {
    let mut block = XattrBlock::default();
    for (name, value) in
        [("user.a", &b"one"[..]), ("trusted.tt", b""), ("system.posix_acl_access", &[2, 0, 0, 0])]
    {
        block.entries.insert(fsapi::XattrName::parse(name.as_bytes()).unwrap(), value.to_vec());
    }
    let mut bytes = vec![0u8; 4096];
    block.encode(INO, &mut bytes);
    assert_eq!((bytes[16], bytes[18]), (3, 54), "the layout the cases below assume");
    bytes
}

fn reseal(bytes: &mut [u8]) {
    Frame::zeroed(12).seal(&INO.to_le_bytes(), bytes);
}

fn decode(bytes: Vec<u8>) -> Result<XattrBlock, FieldFault> {
    bounded(move || XattrBlock::decode(&bytes, INO, BLOCK, "fs.img"))
}

/// Every bound a decoded block holds, restated from the docs.
fn holds_its_bounds(block: &XattrBlock) -> bool {
    let entries = block.entries.len();
    (1..=1016).contains(&entries)
        && block.bytes() <= 4096
        && block.entries.keys().all(|n| n.full().len() <= 255)
}

/// A block that decodes encodes back to the bytes read (every byte was
/// checked) and holds every bound; a fault names a byte of the block.
fn assert_sound(bytes: &[u8], decoded: &Result<XattrBlock, FieldFault>) {
    match decoded {
        Ok(block) => {
            assert!(holds_its_bounds(block), "{block:?}");
            let mut again = vec![0u8; 4096];
            block.encode(INO, &mut again);
            assert_eq!(again, bytes, "a decoded block re-encodes");
        }
        Err(fault) => {
            assert!((BASE..BASE + 4096).contains(&fault.offset), "{fault}");
            assert_eq!(fault.place, Place::XattrBlock { ino: INO, block: BLOCK });
        }
    }
}

const FIELDS: &[Field] = &[
    Field {
        name: "count",
        at: 16,
        width: 2,
        expect: |v| match v {
            3 => Reads,
            1..=1016 => Coupled,
            _ => Past,
        },
        edges: &[0, 1, 2, 3, 4, 1016, 1017, 65535],
    },
    Field {
        name: "used",
        at: 18,
        width: 2,
        // The header and three heads at least (44); the entries end at 54.
        expect: |v| match v {
            54 => Reads,
            44..=53 => Coupled,
            _ => Past,
        },
        edges: &[0, 43, 44, 53, 54, 55, 4096, 4097, 65535],
    },
    Field { name: "reserved", at: 20, width: 1, expect: |v| within(v == 0), edges: &[0, 1, 255] },
    Field { name: "reserved", at: 31, width: 1, expect: |v| within(v == 0), edges: &[0, 128] },
    Field {
        name: "namespace",
        at: 32,
        width: 1,
        // trusted.a sorts before trusted.tt; security.a after it does not.
        expect: |v| match v {
            1 | 2 => Reads,
            3..=5 => Coupled,
            _ => Past,
        },
        edges: &[0, 1, 2, 3, 4, 5, 6, 255],
    },
    Field {
        name: "name_length",
        at: 33,
        width: 1,
        // 1 to 250 for `user.`, and at most the 18 bytes used left.
        expect: |v| match v {
            1 => Reads,
            2..=18 => Coupled,
            _ => Past,
        },
        edges: &[0, 1, 2, 18, 19, 250, 251, 255],
    },
    Field {
        name: "value_length",
        at: 34,
        width: 2,
        // At most the 17 bytes used left after the one-byte name.
        expect: |v| match v {
            3 => Reads,
            0..=17 => Coupled,
            _ => Past,
        },
        edges: &[0, 2, 3, 4, 17, 18, 4096, 65535],
    },
    Field { name: "name", at: 36, width: 1, expect: |v| within(v != 0), edges: &[0, b'a' as u64] },
    Field { name: "unused", at: 54, width: 1, expect: |v| within(v == 0), edges: &[0, 1, 255] },
    Field { name: "unused", at: 4095, width: 1, expect: |v| within(v == 0), edges: &[0, 7] },
];

/// The base block with `field` set to `value`, resealed.
fn with_field(field: &Field, value: u64) -> Vec<u8> {
    let mut bytes = base();
    bytes[field.at..field.at + field.width].copy_from_slice(&value.to_le_bytes()[..field.width]);
    reseal(&mut bytes);
    bytes
}

fn check_field(field: &Field, value: u64) {
    let bytes = with_field(field, value);
    let decoded = decode(bytes.clone());
    assert_sound(&bytes, &decoded);
    // Past its bound, the fault names the field at its own byte; within
    // it, a value that moves what follows is caught elsewhere.
    let own = (field.name, BASE + field.at as u64);
    match ((field.expect)(value), &decoded) {
        (Reads, Ok(_)) => {}
        (Coupled, Err(f)) => assert_ne!((f.field, f.offset), own, "{} = {value}: {f}", field.name),
        (Past, Err(f)) => assert_eq!((f.field, f.offset), own, "{} = {value}: {f}", field.name),
        (want, got) => panic!("{} = {value}: expected {want:?}, got {got:?}", field.name),
    }
}

#[test]
fn each_field_at_and_past_its_bounds_reads_or_is_named() {
    for field in FIELDS {
        for &value in field.edges {
            check_field(field, value);
        }
    }
}

#[test]
fn a_block_cut_short_is_a_fault() {
    for len in [0, 1, 16, 4095] {
        let decoded = decode(base()[..len].to_vec());
        let Err(fault) = decoded else { panic!("{len} bytes read") };
        assert_eq!(fault.problem, Problem::CutShort { have: len, needed: 4096 });
    }
}

fn flip(bytes: &mut [u8], bits: &[usize]) {
    for &bit in bits {
        bytes[bit / 8 % 4096] ^= 1 << (bit % 8);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_are_a_fault_or_decode_to_what_they_encode(
        seed in prop::collection::vec(any::<u8>(), 64),
        sealed in any::<bool>(),
        used in 32usize..4200,
    ) {
        let mut bytes: Vec<u8> = (0..4096).map(|i| seed[i % 64] ^ (i as u8).wrapping_mul(151)).collect();
        // Half of them pass the magic, version and checksum, so the
        // entries' bounds are reached; zeros past `used` as written.
        if sealed {
            bytes[..12].copy_from_slice(&[b"IOLABXAT".as_slice(), &1u32.to_le_bytes()].concat());
            bytes[20..32].fill(0);
            bytes[used.min(4096)..].fill(0);
            reseal(&mut bytes);
        }
        let decoded = decode(bytes.clone());
        assert_sound(&bytes, &decoded);
    }

    #[test]
    fn bit_flips_fail_the_checksum(bits in prop::collection::vec(0usize..4096 * 8, 1..6)) {
        let mut bytes = base();
        flip(&mut bytes, &bits);
        let decoded = decode(bytes.clone());
        assert_sound(&bytes, &decoded);
        prop_assert!(decoded.is_err() || bytes == base(), "a flip got through");
    }

    #[test]
    fn bit_flips_behind_a_right_checksum_are_a_fault_or_read_whole(
        bits in prop::collection::vec(0usize..64 * 8, 1..6),
    ) {
        let mut bytes = base();
        flip(&mut bytes, &bits);
        reseal(&mut bytes);
        let decoded = decode(bytes.clone());
        assert_sound(&bytes, &decoded);
    }

    #[test]
    fn truncation_is_a_fault(len in 0usize..4096) {
        let bytes = base()[..len].to_vec();
        prop_assert!(decode(bytes).is_err());
    }

    /// An image whose file's attribute block was fuzzed behind a right
    /// checksum: fsck and a mount's reads return, never panic or hang.
    #[test]
    fn an_image_with_a_fuzzed_attribute_block_is_checked_and_read_without_a_panic(
        bits in prop::collection::vec(0usize..64 * 8, 1..6),
    ) {
        bounded(move || fuzzed_image(&bits));
    }
}

/// A file with attributes whose block has `bits` flipped and is resealed:
/// checked, repaired, mounted and read.
fn fuzzed_image(bits: &[usize]) {
    let dev = fresh(16 << 20);
    let fs = mount(&dev, Policy::Async);
    let f = fs.create(ROOT, OsStr::new("f"), Owner::root(0o644)).unwrap().ino;
    fs.setxattr(f, OsStr::new("user.a"), b"one", XattrFlags::ANY).unwrap();
    fs.setxattr(f, OsStr::new("trusted.tt"), b"", XattrFlags::ANY).unwrap();
    fs.unmount().unwrap();
    let block = crate::common::stored(&dev, f).xattr;
    let mut bytes = vec![0u8; 4096];
    dev.read_at(&mut bytes, u64::from(block) * 4096).unwrap();
    flip(&mut bytes, bits);
    Frame::zeroed(12).seal(&(f as u32).to_le_bytes(), &mut bytes);
    dev.write_at(&bytes, u64::from(block) * 4096).unwrap();
    let _ = fsck(&dev, Repair::No).unwrap();
    read_everything(&dev, f);
    let _ = fsck(&dev, Repair::Yes).unwrap();
    let after = fsck(&dev, Repair::No).unwrap();
    assert!(after.clean(), "{:?}", after.findings);
    read_everything(&dev, f);
}

fn read_everything(dev: &Arc<dyn Device>, f: u64) {
    let fs = mount(dev, Policy::Async);
    if let Ok(list) = fs.listxattr(f) {
        for name in list.split(|&b| b == 0).filter(|n| !n.is_empty()) {
            let _ = fs.getxattr(f, std::os::unix::ffi::OsStrExt::from_bytes(name));
        }
    }
    let _ = fs.setxattr(f, OsStr::new("user.new"), b"v", XattrFlags::ANY);
    fs.unmount().unwrap();
}
