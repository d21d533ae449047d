//! Fields at offsets: little-endian, round trips, and a read past the end
//! an error that says where.

use codec::{LeReader, LeWriter, OutOfBounds};
use proptest::prelude::*;

#[test]
fn fields_are_little_endian_at_their_offsets() {
    let mut buf = [0u8; 16];
    LeWriter::new(&mut buf)
        .put_u8(0, 0xaa)
        .put_u16(1, 0x0102)
        .put_u32(3, 0x0304_0506)
        .put_u64(7, 0x0708_090a_0b0c_0d0e);
    assert_eq!(
        buf,
        [0xaa, 0x02, 0x01, 0x06, 0x05, 0x04, 0x03, 0x0e, 0x0d, 0x0c, 0x0b, 0x0a, 0x09, 0x08, 0x07, 0]
    );
}

#[test]
fn a_read_past_the_end_is_an_error_naming_the_field() {
    let buf = [0u8; 12];
    let r = LeReader::new(&buf);
    assert_eq!(r.u64(8), Err(OutOfBounds { at: 8, len: 8, size: 12 }));
    assert_eq!(r.u32(8), Ok(0));
    assert_eq!(r.bytes(13, 0), Err(OutOfBounds { at: 13, len: 0, size: 12 }));
    assert_eq!(r.u8(usize::MAX), Err(OutOfBounds { at: usize::MAX, len: 1, size: 12 }));
    assert_eq!(r.bytes(usize::MAX, 2), Err(OutOfBounds { at: usize::MAX, len: 2, size: 12 }));
}

#[test]
#[should_panic(expected = "encoder bug: a 4-byte field at byte 10 runs past the end of 12 bytes")]
fn a_write_past_the_end_is_an_encoder_bug() {
    let mut buf = [0u8; 12];
    LeWriter::new(&mut buf).put_u32(10, 1);
}

proptest! {
    #[test]
    fn every_field_reads_back_what_was_written(at in 0usize..24, a: u8, b: u16, c: u32, d: u64, tail in proptest::collection::vec(any::<u8>(), 0..4)) {
        let mut buf = vec![0u8; at + 15];
        LeWriter::new(&mut buf).put_u8(at, a).put_u16(at + 1, b).put_u32(at + 3, c).put_u64(at + 7, d);
        buf.extend(&tail);
        let r = LeReader::new(&buf);
        prop_assert_eq!((r.u8(at), r.u16(at + 1), r.u32(at + 3), r.u64(at + 7)), (Ok(a), Ok(b), Ok(c), Ok(d)));
        prop_assert_eq!(r.bytes(at + 15, tail.len()), Ok(&tail[..]));
    }
}
