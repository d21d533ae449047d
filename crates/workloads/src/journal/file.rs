//! Creating a journal: its file in the journal directory (never over an
//! earlier run's), and its first start, zero-filled after.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Condvar, Mutex};

use device::{AlignedBuf, Device, FileDevice, FileOptions};
use validation::journal::{slot_bytes, start_bytes, JournalHeader, KeyState};
use validation::KeyBytes;

use super::compact::write_start;
use super::{device_error, JournalWriteError, JournalWriter, State, Tail, JOURNAL_FILE};

/// Zeros are written in chunks of this size when a journal is created.
const ZERO_CHUNK_BYTES: usize = 1 << 20;

/// Creates `dir/iolab.journal` (never overwriting one) with two slots, each
/// with room for the start of a journal over `blocks` key blocks and
/// `record_bytes` of records, and opens it as a device. Its contents are written by
/// [`JournalWriter::create`], which zero-fills it.
pub fn create_file(dir: &Path, blocks: u64, record_bytes: u64) -> Result<FileDevice, JournalWriteError> {
    let path = dir.join(JOURNAL_FILE);
    let io = |what| {
        let path = path.clone();
        move |source| JournalWriteError::Io { path, what, source }
    };
    create_dir(dir)?;
    match OpenOptions::new().write(true).create_new(true).open(&path) {
        Ok(file) => {
            // Two slots, each a start and room for records (compaction
            // switches between them).
            file.set_len(2 * (start_bytes(blocks) + record_bytes)).map_err(io("cannot size"))?;
            file.sync_all().map_err(io("cannot flush"))?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Err(existing(path)),
        Err(e) => return Err(io("cannot create")(e)),
    }
    std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(io("cannot flush the directory"))?;
    let journal = FileDevice::open(&path, &FileOptions::default())
        .map_err(|source| JournalWriteError::Device { what: "cannot open", source })?;
    // Held while the run lasts: `iolab validate` takes a shared lock and so
    // never checks a target against a journal still being written.
    journal
        .lock(device::LockKind::Exclusive)
        .map_err(|source| JournalWriteError::Device { what: "cannot lock", source })?;
    Ok(journal)
}

/// Checks, writing nothing, that a journal can be started in `dir`: it is
/// a directory or can be made one, and holds no journal. Callers check
/// before they write anything else; [`create_file`] checks again.
pub fn check_dir(dir: &Path) -> Result<(), JournalWriteError> {
    if dir.exists() && !dir.is_dir() {
        let source = std::io::Error::from(std::io::ErrorKind::NotADirectory);
        let what = "is not a directory: a journal goes in a directory (--journal DIR)";
        return Err(JournalWriteError::Io { path: dir.to_path_buf(), what, source });
    }
    let path = dir.join(JOURNAL_FILE);
    if path.exists() {
        return Err(existing(path));
    }
    Ok(())
}

/// The error for a journal file already at `path`: in use by a running
/// process (not "from an earlier run"), or left by an earlier run.
fn existing(path: PathBuf) -> JournalWriteError {
    let options = FileOptions { read_only: true, ..FileOptions::default() };
    if let Ok(journal) = FileDevice::open(&path, &options) {
        if let Err(source) = journal.lock(device::LockKind::Shared) {
            return JournalWriteError::Device { what: "cannot start a journal", source };
        }
    }
    JournalWriteError::Exists { path }
}

/// Creates the journal directory `dir` if it does not exist.
pub(crate) fn create_dir(dir: &Path) -> Result<(), JournalWriteError> {
    let what = if dir.exists() && !dir.is_dir() {
        "is not a directory: a journal goes in a directory (--journal DIR)"
    } else {
        "cannot create the journal directory"
    };
    std::fs::create_dir_all(dir).map_err(|source| JournalWriteError::Io {
        path: dir.to_path_buf(),
        what,
        source,
    })
}

impl JournalWriter {
    /// Writes the header and the key map (one key per block) at the start
    /// of `device`'s first slot, zeros over the rest (so the first bytes
    /// past the last record are zeros, and later flushes change no file
    /// metadata), and makes it durable. The writer keeps `keys` as its
    /// copy of the map, from which it writes compacted starts.
    pub fn create(
        device: Arc<dyn Device>,
        target: Arc<dyn Device>,
        header: &JournalHeader,
        keys: KeyBytes,
    ) -> Result<JournalWriter, JournalWriteError> {
        let header = JournalHeader { generation: 0, write_ids_end: 0, ..header.clone() };
        assert_eq!(keys.len() as u64, header.blocks, "one key per block");
        let records_at = start_bytes(header.blocks);
        let sector = u64::from(device.sector_bytes());
        let slot_bytes = slot_bytes(device.size_bytes());
        if slot_bytes < records_at + sector || records_at % sector != 0 {
            return Err(JournalWriteError::Full {
                device: device.name().to_string(),
                slot_bytes,
                why: "a slot must hold the header, the key map and a sector of records",
            });
        }
        write_start(device.as_ref(), 0, &header, &keys, &[])?;
        zero_fill(device.as_ref(), records_at)?;
        device.flush().map_err(device_error("cannot flush"))?;
        let state = State::new(slot_bytes - records_at);
        let mirror = KeyState::new(keys);
        let tail = Tail {
            slot: 0,
            generation: 0,
            written_end: 0,
            durable_end: 0,
            marked: 0,
            mirror,
            write_ids_end: 0,
            partial: Vec::new(),
        };
        Ok(JournalWriter {
            device,
            target,
            header,
            slot_bytes,
            records_at,
            unit: sector,
            ring_file: None,
            state: Mutex::new(state),
            committed: Condvar::new(),
            kicked: Condvar::new(),
            durable_end: AtomicU64::new(0),
            wanted_end: AtomicU64::new(0),
            driven: AtomicBool::new(false),
            tail: Mutex::new(tail),
        })
    }
}

/// Zeros over `device` from `from` to its end, a chunk at a time.
fn zero_fill(device: &dyn Device, from: u64) -> Result<(), JournalWriteError> {
    let align = device.buffer_align().max(4096);
    let zeros = AlignedBuf::zeroed(ZERO_CHUNK_BYTES, align);
    let mut at = from;
    while at < device.size_bytes() {
        let len = (device.size_bytes() - at).min(ZERO_CHUNK_BYTES as u64) as usize;
        device.write_at(&zeros[..len], at).map_err(device_error("cannot zero-fill"))?;
        at += len as u64;
    }
    Ok(())
}
