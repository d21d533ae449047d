//! Little-endian fields at fixed offsets of a byte slice, as every iolab
//! format lays them out ("little-endian for every multi-byte integer;
//! offsets are given explicitly").

/// A field that does not fit in the bytes it was read from or written to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("a {len}-byte field at byte {at} runs past the end of {size} bytes")]
pub struct OutOfBounds {
    pub at: usize,
    pub len: usize,
    pub size: usize,
}

/// Reads little-endian fields of `bytes` by offset; every read is checked
/// against the end, so a short or damaged structure is an error, never a
/// panic.
#[derive(Clone, Copy, Debug)]
pub struct LeReader<'a> {
    bytes: &'a [u8],
}

impl<'a> LeReader<'a> {
    pub fn new(bytes: &'a [u8]) -> LeReader<'a> {
        LeReader { bytes }
    }

    /// The `len` bytes at `at`.
    #[inline]
    pub fn bytes(&self, at: usize, len: usize) -> Result<&'a [u8], OutOfBounds> {
        let end = at.checked_add(len).filter(|&end| end <= self.bytes.len());
        let end = end.ok_or(OutOfBounds { at, len, size: self.bytes.len() })?;
        Ok(&self.bytes[at..end])
    }

    /// The `N` bytes at `at`, as an array.
    #[inline]
    pub fn array<const N: usize>(&self, at: usize) -> Result<[u8; N], OutOfBounds> {
        let mut out = [0; N];
        out.copy_from_slice(self.bytes(at, N)?);
        Ok(out)
    }

    #[inline]
    pub fn u8(&self, at: usize) -> Result<u8, OutOfBounds> {
        Ok(self.array::<1>(at)?[0])
    }

    #[inline]
    pub fn u16(&self, at: usize) -> Result<u16, OutOfBounds> {
        self.array(at).map(u16::from_le_bytes)
    }

    #[inline]
    pub fn u32(&self, at: usize) -> Result<u32, OutOfBounds> {
        self.array(at).map(u32::from_le_bytes)
    }

    #[inline]
    pub fn u64(&self, at: usize) -> Result<u64, OutOfBounds> {
        self.array(at).map(u64::from_le_bytes)
    }
}

/// Writes little-endian fields into `bytes` by offset.
///
/// # Panics
///
/// When a field runs past the end. An encoder lays its fields out in a
/// buffer it sized from the same layout, so that is a bug in the encoder
/// (its golden test fails), never a consequence of input.
#[derive(Debug)]
pub struct LeWriter<'a> {
    bytes: &'a mut [u8],
}

impl<'a> LeWriter<'a> {
    pub fn new(bytes: &'a mut [u8]) -> LeWriter<'a> {
        LeWriter { bytes }
    }

    /// Copies `value` to `at`.
    #[inline]
    pub fn put_bytes(&mut self, at: usize, value: &[u8]) -> &mut Self {
        let size = self.bytes.len();
        let field = at.checked_add(value.len()).and_then(|end| self.bytes.get_mut(at..end));
        let Some(field) = field else {
            panic!("encoder bug: {}", OutOfBounds { at, len: value.len(), size });
        };
        field.copy_from_slice(value);
        self
    }

    #[inline]
    pub fn put_u8(&mut self, at: usize, value: u8) -> &mut Self {
        self.put_bytes(at, &[value])
    }

    #[inline]
    pub fn put_u16(&mut self, at: usize, value: u16) -> &mut Self {
        self.put_bytes(at, &value.to_le_bytes())
    }

    #[inline]
    pub fn put_u32(&mut self, at: usize, value: u32) -> &mut Self {
        self.put_bytes(at, &value.to_le_bytes())
    }

    #[inline]
    pub fn put_u64(&mut self, at: usize, value: u64) -> &mut Self {
        self.put_bytes(at, &value.to_le_bytes())
    }
}
