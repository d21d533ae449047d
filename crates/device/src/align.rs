use std::alloc::{self, Layout};
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::sync::Mutex;

/// The size and alignment of the buffers kept for reuse: one page, a
/// file system block.
const PAGE: usize = 4096;
/// Single-page buffers are carved from slabs of this many bytes, each
/// asked of the kernel as one transparent huge page where it allows that.
const SLAB: usize = 2 << 20;

/// Single-page buffers not in use, each carved from a slab and never
/// given back to the allocator. A file system's cache and its soft
/// updates' shadows make and drop 4 KiB blocks by the hundred thousand:
/// from the C allocator, each costs a split chunk of about twice its size
/// and, the first time its memory is touched, a page fault (about 6 us in
/// a virtual machine, more than the copy the buffer is made for). From a
/// slab, a page costs its own 4 KiB, and a huge page one fault per 512.
/// What the pool holds is at most what was once in use at the same time.
static SPARE: Mutex<Vec<Page>> = Mutex::new(Vec::new());

/// A kept page's address.
struct Page(NonNull<u8>);

// SAFETY: a kept page is owned by the list alone, like a Box<[u8]>.
unsafe impl Send for Page {}

fn page_layout() -> Layout {
    // Invariant: PAGE is a non-zero power of two.
    Layout::from_size_align(PAGE, PAGE).expect("page layout")
}

/// A new slab: SLAB bytes of zeros at an address aligned to SLAB, mapped
/// from the kernel directly (the allocator would touch it all to zero it
/// before the advice below could apply) and never unmapped.
fn map_slab() -> NonNull<u8> {
    let len = 2 * SLAB;
    // SAFETY: an anonymous private mapping, no address asked for.
    let raw = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if raw == libc::MAP_FAILED {
        // As the allocator does when memory runs out.
        alloc::handle_alloc_error(Layout::from_size_align(SLAB, SLAB).expect("slab layout"));
    }
    let start = raw as usize;
    let aligned = start.next_multiple_of(SLAB);
    // SAFETY: both pieces cut off are within the mapping just made and
    // nothing points into them; the aligned slab between them stays.
    unsafe {
        if aligned > start {
            libc::munmap(raw, aligned - start);
        }
        let end = aligned + SLAB;
        if start + len > end {
            libc::munmap(end as *mut libc::c_void, start + len - end);
        }
        // Advice only: a kernel without transparent huge pages says no,
        // and the slab is used in 4 KiB pages as any other memory.
        libc::madvise(aligned as *mut libc::c_void, SLAB, libc::MADV_HUGEPAGE);
    }
    NonNull::new(aligned as *mut u8).expect("a mapping is not at address 0")
}

/// A page for a buffer, and whether it is known to hold zeros (a slab's
/// fresh page); a kept one holds whatever its last owner left.
fn take_page() -> (NonNull<u8>, bool) {
    let mut spare = SPARE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(page) = spare.pop() {
        return (page.0, false);
    }
    let slab = map_slab();
    spare.extend((1..SLAB / PAGE).rev().map(|k| {
        // SAFETY: k * PAGE is within the slab.
        Page(unsafe { slab.add(k * PAGE) })
    }));
    (slab, true)
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
            let (ptr, zeros) = take_page();
            if !zeros {
                // SAFETY: a kept page is PAGE bytes owned by nobody else.
                unsafe { ptr.as_ptr().write_bytes(0, PAGE) };
            }
            return AlignedBuf { ptr, len, layout };
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
        let ptr = match layout == page_layout() {
            true => take_page().0,
            false => {
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
            // Part of a slab: back to the pool.
            SPARE.lock().unwrap_or_else(|e| e.into_inner()).push(Page(self.ptr));
            return;
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

    /// Page buffers alive at once, more than one slab holds, are each a
    /// page of their own: aligned, zeroed, and not sharing a byte.
    #[test]
    fn page_buffers_alive_at_once_do_not_overlap() {
        let count = SLAB / PAGE + 10;
        let mut bufs: Vec<AlignedBuf> = (0..count).map(|_| AlignedBuf::zeroed(PAGE, PAGE)).collect();
        for (k, buf) in bufs.iter_mut().enumerate() {
            assert_eq!(buf.as_ptr() as usize % PAGE, 0, "aligned to a page");
            assert!(buf.iter().all(|&b| b == 0), "a page buffer starts zeroed");
            buf.fill(k as u8);
        }
        let mut starts: Vec<usize> = bufs.iter().map(|b| b.as_ptr() as usize).collect();
        starts.sort_unstable();
        assert!(starts.windows(2).all(|w| w[1] - w[0] >= PAGE), "no two pages overlap");
        for (k, buf) in bufs.iter().enumerate() {
            assert!(buf.iter().all(|&b| b == k as u8), "each holds what was written to it");
        }
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
