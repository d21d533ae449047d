use std::alloc::{self, Layout};
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::sync::Mutex;

/// The size and alignment of the buffers kept for reuse: one page, a
/// file system block.
const PAGE: usize = 4096;
/// At most this many freed pages are kept (16 MiB).
const SPARE_PAGES_MAX: usize = 4096;

/// Single-page buffers dropped and kept for the next one made. A file
/// system's cache makes and drops 4 KiB blocks by the hundred thousand;
/// the C allocator's aligned path splits a larger chunk for each and
/// coalesces it again when freed, which costs more than the copy the
/// buffer is made for, and leaves a heap that keeps growing.
static SPARE: Mutex<Vec<Page>> = Mutex::new(Vec::new());

/// A kept page's address.
struct Page(NonNull<u8>);

// SAFETY: a kept page is owned by the list alone, like a Box<[u8]>.
unsafe impl Send for Page {}

fn page_layout() -> Layout {
    // Invariant: PAGE is a non-zero power of two.
    Layout::from_size_align(PAGE, PAGE).expect("page layout")
}

/// A kept page, if any (its contents are whatever its last owner left).
fn spare_page() -> Option<NonNull<u8>> {
    SPARE.lock().unwrap_or_else(|e| e.into_inner()).pop().map(|page| page.0)
}

/// A zero-initialised heap buffer whose address is aligned, as O_DIRECT
/// and io_uring registered buffers need.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
    layout: Layout,
}

// SAFETY: AlignedBuf owns its allocation exclusively, like a Box<[u8]>.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared access only hands out &[u8].
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// A buffer of `len` zero bytes aligned to `align` (rounded up to a
    /// power of two).
    pub fn zeroed(len: usize, align: usize) -> AlignedBuf {
        let align = align.max(1).next_power_of_two();
        let size = len.max(1).next_multiple_of(align);
        // Invariant: align is a non-zero power of two and size a non-zero
        // multiple of it, so the layout is valid for any sane len.
        let layout = Layout::from_size_align(size, align).expect("aligned buffer layout");
        if layout == page_layout() {
            if let Some(ptr) = spare_page() {
                // SAFETY: a kept page is PAGE bytes owned by nobody else.
                unsafe { ptr.as_ptr().write_bytes(0, PAGE) };
                return AlignedBuf { ptr, len, layout };
            }
        }
        // SAFETY: layout has a non-zero size.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(raw) else { alloc::handle_alloc_error(layout) };
        AlignedBuf { ptr, len, layout }
    }

    /// A buffer holding a copy of `bytes`, aligned to `align` (rounded
    /// up to a power of two); zeros past them to the aligned size.
    pub fn copy_of(bytes: &[u8], align: usize) -> AlignedBuf {
        let align = align.max(1).next_power_of_two();
        let size = bytes.len().max(1).next_multiple_of(align);
        let layout = Layout::from_size_align(size, align).expect("aligned buffer layout");
        let kept = if layout == page_layout() { spare_page() } else { None };
        let ptr = match kept {
            Some(ptr) => ptr,
            None => {
                // SAFETY: layout has a non-zero size.
                let raw = unsafe { alloc::alloc(layout) };
                let Some(ptr) = NonNull::new(raw) else { alloc::handle_alloc_error(layout) };
                ptr
            }
        };
        // SAFETY: ptr points to size writable bytes owned by nobody else,
        // and bytes (at most size long) is another allocation.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr.as_ptr(), bytes.len());
            ptr.as_ptr().add(bytes.len()).write_bytes(0, size - bytes.len());
        }
        AlignedBuf { ptr, len: bytes.len(), layout }
    }

    /// The alignment of the buffer's address.
    pub fn align(&self) -> usize {
        self.layout.align()
    }
}

impl Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: ptr points to at least len initialised bytes owned by self.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in deref, and &mut self gives exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if self.layout == page_layout() {
            let mut spare = SPARE.lock().unwrap_or_else(|e| e.into_inner());
            if spare.len() < SPARE_PAGES_MAX {
                spare.push(Page(self.ptr));
                return;
            }
        }
        // SAFETY: ptr was allocated with exactly this layout.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

impl PartialEq for AlignedBuf {
    fn eq(&self, other: &AlignedBuf) -> bool {
        self[..] == other[..]
    }
}

impl Eq for AlignedBuf {}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AlignedBuf({} bytes, align {})", self.len, self.align())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A page kept from a dropped buffer comes back zeroed.
    #[test]
    fn a_page_made_again_after_one_is_dropped_is_zeroed() {
        for _ in 0..3 {
            let mut buf = AlignedBuf::zeroed(PAGE, PAGE);
            assert!(buf.iter().all(|&b| b == 0), "a page buffer starts zeroed");
            assert_eq!(buf.as_ptr() as usize % PAGE, 0, "aligned to a page");
            buf.fill(0xa5);
        }
    }

    /// A copy holds the bytes it was made from, kept page or not.
    #[test]
    fn a_copy_holds_its_bytes_and_zeros_past_them() {
        let bytes: Vec<u8> = (0..PAGE).map(|i| (i % 251) as u8).collect();
        drop(AlignedBuf::zeroed(PAGE, PAGE));
        assert_eq!(&AlignedBuf::copy_of(&bytes, PAGE)[..], &bytes[..]);
        let short = AlignedBuf::copy_of(&bytes[..10], 512);
        assert_eq!(&short[..], &bytes[..10]);
        // SAFETY (test): the buffer's aligned size is 512 bytes.
        let tail = unsafe { std::slice::from_raw_parts(short.as_ptr().add(10), 502) };
        assert!(tail.iter().all(|&b| b == 0), "zeros past the copy");
    }

    /// Buffers of other sizes are not taken from the kept pages.
    #[test]
    fn a_buffer_of_another_size_keeps_its_own_length_and_alignment() {
        drop(AlignedBuf::zeroed(PAGE, PAGE));
        let buf = AlignedBuf::zeroed(100, 512);
        assert_eq!(buf.len(), 100);
        assert_eq!(buf.align(), 512);
        assert_eq!(buf.as_ptr() as usize % 512, 0);
        assert!(buf.iter().all(|&b| b == 0));
    }
}
