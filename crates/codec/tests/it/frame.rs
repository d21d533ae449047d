//! Checksummed records: the standard crc32c, the field zeroed or skipped,
//! a prefix, and a flipped bit anywhere caught.

use codec::{Frame, FrameError, OutOfBounds};

/// crc32c("123456789"), the algorithm's published check value.
const CHECK: u32 = 0xe306_9283;

#[test]
fn a_skipped_field_leaves_the_standard_checksum_of_the_rest() {
    let record = *b"1234\xff\xff\xff\xff56789";
    assert_eq!(Frame::skipped(4).checksum(&[], &record), Ok(CHECK));
}

#[test]
fn a_zeroed_field_counts_as_four_zero_bytes() {
    let record = *b"1234\xff\xff\xff\xff56789";
    assert_eq!(Frame::zeroed(4).checksum(&[], &record), Ok(crc32c::crc32c(b"1234\x00\x00\x00\x0056789")));
}

#[test]
fn a_prefix_is_checksummed_before_the_record() {
    let record = *b"5678\xff\xff\xff\xff9";
    assert_eq!(Frame::skipped(4).checksum(b"1234", &record), Ok(CHECK));
}

#[test]
fn a_sealed_record_verifies_and_stores_its_checksum_little_endian() {
    let mut record = *b"1234\x00\x00\x00\x0056789";
    Frame::skipped(4).seal(&[], &mut record);
    assert_eq!(record[4..8], CHECK.to_le_bytes());
    assert_eq!(Frame::skipped(4).verify(&[], &record), Ok(()));
}

#[test]
fn any_flipped_bit_fails_verification() {
    let frame = Frame::zeroed(8);
    let mut record = vec![0x5au8; 64];
    frame.seal(b"gen", &mut record);
    for bit in 0..record.len() * 8 {
        let mut bad = record.clone();
        bad[bit / 8] ^= 1 << (bit % 8);
        assert!(matches!(frame.verify(b"gen", &bad), Err(FrameError::Mismatch { .. })), "bit {bit}");
    }
    assert!(matches!(frame.verify(b"other", &record), Err(FrameError::Mismatch { .. })));
}

#[test]
fn a_record_too_short_for_its_field_is_an_error() {
    let short = [0u8; 10];
    let error = OutOfBounds { at: 8, len: 4, size: 10 };
    assert_eq!(Frame::zeroed(8).verify(&[], &short), Err(FrameError::OutOfBounds(error)));
    assert_eq!(Frame::skipped(8).checksum(&[], &short), Err(error));
}
