//! The key map: one byte per key block (the smallest transfer size) saying
//! which version of the block the target should hold. 0 = never written;
//! every rewrite moves the key on (1..=255, wrapping to 1), so a lost write
//! reads back with the previous key.
//!
//! The bytes live in a [`KeyBytes`] store: memory, or, for a target whose
//! map would be large (over [`KEY_MAP_MEMORY_BYTES_MAX`] under `auto`), a
//! shared mapping of a sparse scratch file, so that the kernel can write
//! cold pages out and drop them instead of the process holding them all.
//! The scratch file is unlinked as soon as it is mapped: nothing is left
//! behind, whatever ends the process. It is not a format: nothing reads
//! it but the mapping. A mapping is advised random access (no read-ahead
//! into the resident set), and passes over a whole map (writing or reading
//! a journal start, recovery's scan) evict what they are done with
//! ([`KeyBytes::evict`]), so the process keeps resident only keys in use.

use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

pub const KEY_NEVER_WRITTEN: u8 = 0;

/// Under [`KeyMapChoice::Auto`], a map of more key blocks than this goes to
/// a file (256 MiB: a target over 1 TiB with 4 KiB key blocks).
pub const KEY_MAP_MEMORY_BYTES_MAX: u64 = 256 << 20;

/// The key after `key` (never 0).
pub fn next_key(key: u8) -> u8 {
    if key == u8::MAX {
        1
    } else {
        key + 1
    }
}

/// The key before `key` (1..=255) in the order rewrites give them.
pub(crate) fn previous_key(key: u8) -> u8 {
    if key <= 1 {
        u8::MAX
    } else {
        key - 1
    }
}

/// Where the user asked key maps to live.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KeyMapChoice {
    /// Memory up to [`KEY_MAP_MEMORY_BYTES_MAX`], a file above.
    #[default]
    Auto,
    Memory,
    File,
}

impl KeyMapChoice {
    /// Where a map of `blocks` keys goes: memory, or a file in `dir`.
    pub fn place(self, blocks: u64, dir: &Path) -> KeyPlace {
        match self {
            KeyMapChoice::Memory => KeyPlace::Memory,
            KeyMapChoice::Auto if blocks <= KEY_MAP_MEMORY_BYTES_MAX => KeyPlace::Memory,
            KeyMapChoice::Auto | KeyMapChoice::File => KeyPlace::File(dir.to_path_buf()),
        }
    }
}

/// Where one key store lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyPlace {
    Memory,
    /// A scratch file in this directory, mapped and unlinked at once.
    File(PathBuf),
}

#[derive(Debug, thiserror::Error)]
#[error("{}: cannot {what} the key map's scratch file: {source}", dir.display())]
pub struct KeyMapError {
    pub dir: PathBuf,
    pub what: &'static str,
    #[source]
    pub source: std::io::Error,
}

/// Key bytes, one per block, in memory or in a mapped scratch file.
/// Dereferences to the bytes.
pub struct KeyBytes {
    store: Store,
}

enum Store {
    Memory(Vec<u8>),
    File(memmap2::MmapMut),
}

impl KeyBytes {
    /// `len` zero bytes at `place`. A file is created sparse (`set_len`),
    /// so untouched keys cost neither memory nor disk.
    pub fn zeroed(len: u64, place: &KeyPlace) -> Result<KeyBytes, KeyMapError> {
        let dir = match place {
            KeyPlace::File(dir) if len > 0 => dir,
            // Invariant: iolab runs on 64-bit hosts, where a u64 of keys fits usize.
            _ => return Ok(KeyBytes::from(vec![0; usize::try_from(len).expect("keys fit in memory")])),
        };
        let len_usize = usize::try_from(len).map_err(|_| KeyMapError {
            dir: dir.clone(),
            what: "map",
            source: std::io::Error::other(format!("{len} keys do not fit in this address space")),
        })?;
        let err = |what| move |source| KeyMapError { dir: dir.clone(), what, source };
        let file = create_scratch(dir).map_err(err("create"))?;
        file.set_len(len).map_err(err("size"))?;
        // SAFETY (of mapping a file): the file was unlinked before this
        // point, so no other process can open it, change or truncate it.
        let map = unsafe { memmap2::MmapOptions::new().len(len_usize).map_mut(&file) }.map_err(err("map"))?;
        // Keys are touched at random: no read-ahead, no faulting in of
        // neighbouring pages, which would only swell the resident set.
        map.advise(memmap2::Advice::Random).map_err(err("advise"))?;
        debug_assert_eq!(map.len(), len_usize);
        Ok(KeyBytes { store: Store::File(map) })
    }

    /// Lets the kernel drop the pages of `range` from this process's
    /// resident memory (a mapped file's only; their contents stay in the
    /// file and come back on the next access): for a pass over the whole
    /// map, such as writing or reading a journal start, which would
    /// otherwise leave all of it resident. Advice: a failure changes
    /// nothing, so it is ignored.
    pub fn evict(&self, range: std::ops::Range<usize>) {
        if let Store::File(map) = &self.store {
            // SAFETY: the mapping is shared (MAP_SHARED over a file), for
            // which MADV_DONTNEED keeps the contents: the next access reads
            // them back from the page cache or the file, unchanged, so no
            // reference into the range sees a different value.
            let advised = unsafe {
                map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, range.start, range.len())
            };
            debug_assert!(advised.is_ok(), "madvise(DONTNEED) on a mapped key file: {advised:?}");
        }
    }

    /// Whether the bytes are a mapped file.
    pub fn is_file(&self) -> bool {
        matches!(self.store, Store::File(_))
    }
}

/// Creates a new file in `dir` and unlinks it, so that it disappears with
/// its last descriptor and mapping, however the process ends.
fn create_scratch(dir: &Path) -> std::io::Result<std::fs::File> {
    static SERIAL: AtomicU64 = AtomicU64::new(0);
    loop {
        let serial = SERIAL.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!(".iolab-keys-{}-{serial}", std::process::id()));
        match std::fs::OpenOptions::new().read(true).write(true).create_new(true).open(&path) {
            Ok(file) => {
                std::fs::remove_file(&path)?;
                return Ok(file);
            }
            // Left by a process of the same id that died between the two
            // calls above: take the next name.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}

impl From<Vec<u8>> for KeyBytes {
    fn from(keys: Vec<u8>) -> KeyBytes {
        KeyBytes { store: Store::Memory(keys) }
    }
}

impl Default for KeyBytes {
    fn default() -> KeyBytes {
        KeyBytes::from(Vec::new())
    }
}

impl Deref for KeyBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.store {
            Store::Memory(v) => v,
            Store::File(m) => m,
        }
    }
}

impl DerefMut for KeyBytes {
    fn deref_mut(&mut self) -> &mut [u8] {
        match &mut self.store {
            Store::Memory(v) => v,
            Store::File(m) => m,
        }
    }
}

impl std::fmt::Debug for KeyBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let place = if self.is_file() { "file" } else { "memory" };
        write!(f, "KeyBytes {{ {} keys in {place} }}", self.len())
    }
}

/// Keys of every block of a region, shared by the worker threads.
pub struct KeyMap {
    block_bytes: u64,
    /// The first of `blocks` keys, inside `_bytes`.
    keys: NonNull<AtomicU8>,
    blocks: usize,
    /// Owns the keys; never dereferenced while the map lives (every access
    /// goes through `keys`), only dropped with it.
    _bytes: KeyBytes,
}

// SAFETY: the map owns its bytes as a `Box<[AtomicU8]>` would (a heap
// buffer or a mapping, neither moved by moving `KeyBytes`), and shares
// them only as atomics.
unsafe impl Send for KeyMap {}
unsafe impl Sync for KeyMap {}

impl KeyMap {
    /// A map of `blocks` key blocks of `block_bytes`, all never written,
    /// in memory.
    pub fn new(blocks: u64, block_bytes: u64) -> KeyMap {
        KeyMap::with_bytes(KeyBytes::from(vec![KEY_NEVER_WRITTEN; blocks as usize]), block_bytes)
    }

    /// A map over `bytes` (one key per block) of blocks of `block_bytes`.
    pub fn with_bytes(mut bytes: KeyBytes, block_bytes: u64) -> KeyMap {
        let blocks = bytes.len();
        // Taken through `&mut` once, while nothing else can see the bytes.
        let keys = NonNull::from(&mut *bytes).cast::<AtomicU8>();
        KeyMap { block_bytes, keys, blocks, _bytes: bytes }
    }

    fn keys(&self) -> &[AtomicU8] {
        // SAFETY: `AtomicU8` has the size and alignment of `u8`; `keys` and
        // `blocks` describe the bytes `_bytes` owns for as long as `self`
        // lives, and no `&[u8]` or `&mut [u8]` to them is made after
        // `with_bytes`, so every access is atomic.
        unsafe { std::slice::from_raw_parts(self.keys.as_ptr(), self.blocks) }
    }

    pub fn block_bytes(&self) -> u64 {
        self.block_bytes
    }

    pub fn blocks(&self) -> u64 {
        self.blocks as u64
    }

    pub fn get(&self, block: u64) -> u8 {
        self.keys()[block as usize].load(Ordering::Acquire)
    }

    pub fn set(&self, block: u64, key: u8) {
        self.keys()[block as usize].store(key, Ordering::Release);
    }
}
