//! For tests: a structure's bytes checked against its layout, field by
//! field, as docs/formats.md tables give them (feature `golden`).

/// `bytes` as lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Asserts that `bytes` holds each field's bytes, given as (offset, hex),
/// and zeros everywhere else; on failure, shows both as hex.
///
/// # Panics
///
/// When the bytes differ, or a field is not hex or runs past the end.
pub fn assert_layout(bytes: &[u8], fields: &[(usize, &str)]) {
    let mut expected = vec![0u8; bytes.len()];
    for &(at, field) in fields {
        let field: Vec<u8> = (0..field.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&field[i..i + 2], 16).expect("a field is given in hex"))
            .collect();
        expected[at..at + field.len()].copy_from_slice(&field);
    }
    assert_eq!(hex(bytes), hex(&expected));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_laid_out_as_given_pass() {
        assert_layout(&[0, 0xab, 0xcd, 0, 1], &[(1, "abcd"), (4, "01")]);
    }

    #[test]
    #[should_panic(expected = "00abcd0001")]
    fn a_byte_out_of_place_fails_showing_both() {
        assert_layout(&[0, 0xab, 0xcd, 0, 1], &[(1, "abcd")]);
    }
}
