//! fsx through a real mount: a seeded stream of writes, reads, truncations,
//! fallocates (allocate, keep size, punch, zero), copy_file_range from a
//! second file, writes through a shared mapping, fsyncs and reopens runs
//! on one file of an `iolab fs mount`, and every read, and the whole file
//! at the end, must match a model kept in memory (as xfstests' fsx does).
//! The kernel's page cache, both FUSE transports and the file system all
//! sit between the calls and the bytes.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::cli::{iolab, stderr, stdout};
use crate::fs::{fuse_usable, Mounted};

/// The file's largest size in the stream: past the direct blocks and
/// into the single indirect block.
const SPAN: u64 = 300 << 10;
const OPS: usize = 4000;

/// A small xorshift: the stream is the seed's, whatever the platform.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }

    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.below(256) as u8).collect()
    }
}

/// The model's bytes from `offset` (zeros past what it holds).
fn model_write(model: &mut Vec<u8>, offset: u64, data: &[u8]) {
    let end = offset as usize + data.len();
    if model.len() < end {
        model.resize(end, 0);
    }
    model[offset as usize..end].copy_from_slice(data);
}

fn zero(model: &mut [u8], offset: u64, len: u64) {
    let end = ((offset + len) as usize).min(model.len());
    if (offset as usize) < end {
        model[offset as usize..end].fill(0);
    }
}

fn check(ok: bool, what: impl FnOnce() -> String) {
    assert!(ok, "{}", what());
}

/// One op of the stream on `file` (and `src`, copied from) and the model;
/// `log` says what ran, for the failure message.
fn step(
    rng: &mut Rng,
    path: &Path,
    file: &mut File,
    src: &(File, Vec<u8>),
    model: &mut Vec<u8>,
    log: &mut Vec<String>,
) {
    let fd = file.as_raw_fd();
    let size = model.len() as u64;
    let (offset, len) = (rng.below(SPAN), 1 + rng.below(64 << 10));
    let len = len.min(SPAN - offset).max(1);
    match rng.below(12) {
        0..=2 => {
            let data = rng.bytes(len as usize);
            file.write_all_at(&data, offset).unwrap();
            model_write(model, offset, &data);
            log.push(format!("write {offset} {len}"));
        }
        3..=4 => {
            let mut buf = vec![0u8; len as usize];
            let n = file.read_at(&mut buf, offset).unwrap();
            let want = model.get(offset as usize..).map_or(&[][..], |m| &m[..m.len().min(len as usize)]);
            log.push(format!("read {offset} {len}"));
            check(buf[..n] == *want, || format!("read {offset}+{len} differs from the model after {log:#?}"));
        }
        5 => {
            let to = rng.below(SPAN);
            file.set_len(to).unwrap();
            model.resize(to as usize, 0);
            log.push(format!("truncate {to}"));
        }
        6 => {
            let (mode, name) = match rng.below(4) {
                0 => (0, "allocate"),
                1 => (libc::FALLOC_FL_KEEP_SIZE, "keep size"),
                2 => (libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE, "punch"),
                _ => (libc::FALLOC_FL_ZERO_RANGE, "zero range"),
            };
            // SAFETY: fallocate on an open descriptor.
            let r = unsafe { libc::fallocate(fd, mode, offset as i64, len as i64) };
            check(r == 0, || format!("fallocate {name} {offset} {len}: {}", std::io::Error::last_os_error()));
            if mode & libc::FALLOC_FL_PUNCH_HOLE != 0 {
                zero(model, offset, len);
            } else if mode & libc::FALLOC_FL_ZERO_RANGE != 0 {
                zero(model, offset, len);
                model.resize(model.len().max((offset + len) as usize), 0);
            } else if mode & libc::FALLOC_FL_KEEP_SIZE == 0 {
                model.resize(model.len().max((offset + len) as usize), 0);
            }
            log.push(format!("fallocate {name} {offset} {len}"));
        }
        7 => {
            let (src_file, src_bytes) = src;
            let from = rng.below(src_bytes.len() as u64);
            let (mut off_in, mut off_out) = (from as i64, offset as i64);
            // SAFETY: copy_file_range between two open descriptors.
            let n = unsafe {
                libc::copy_file_range(src_file.as_raw_fd(), &mut off_in, fd, &mut off_out, len as usize, 0)
            };
            check(n >= 0, || format!("copy_file_range: {}", std::io::Error::last_os_error()));
            let n = n as usize;
            model_write(model, offset, &src_bytes[from as usize..from as usize + n]);
            log.push(format!("copy {from} -> {offset} {n}"));
        }
        8 if size > 0 => {
            // A write through a shared mapping of the whole file.
            let (at, n) = (rng.below(size), 1 + rng.below(8192));
            let n = n.min(size - at) as usize;
            let data = rng.bytes(n);
            // SAFETY: a shared mapping of `size` bytes of an open file,
            // written inside its length and unmapped before the file
            // changes size again.
            unsafe {
                let map = libc::mmap(
                    std::ptr::null_mut(),
                    size as usize,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    fd,
                    0,
                );
                assert_ne!(map, libc::MAP_FAILED, "mmap: {}", std::io::Error::last_os_error());
                std::ptr::copy_nonoverlapping(data.as_ptr(), (map as *mut u8).add(at as usize), n);
                assert_eq!(libc::msync(map, size as usize, libc::MS_SYNC), 0);
                libc::munmap(map, size as usize);
            }
            model_write(model, at, &data);
            log.push(format!("mapped write {at} {n}"));
        }
        9 => {
            file.sync_all().unwrap();
            log.push("fsync".into());
        }
        10 => {
            *file = OpenOptions::new().read(true).write(true).open(path).unwrap();
            log.push("reopen".into());
        }
        _ => {
            let got = file.metadata().unwrap().len();
            log.push("stat".into());
            check(got == model.len() as u64, || {
                format!("size {got}, the model's {} after {log:#?}", model.len())
            });
        }
    }
    if log.len() > 40 {
        log.remove(0);
    }
}

fn fsx(policy: &str, transport: &str, seed: u64) {
    if !fuse_usable() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (image, mnt) = (dir.path().join("fs.img"), dir.path().join("mnt"));
    std::fs::create_dir(&mnt).unwrap();
    let out = iolab(&["fs", "mkfs", image.to_str().unwrap(), "--size", "64m"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let mounted = Mounted::start(&image, &mnt, policy, &["--transport", transport]);
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let src_bytes = rng.bytes(200 << 10);
    std::fs::write(mnt.join("src"), &src_bytes).unwrap();
    let src = (File::open(mnt.join("src")).unwrap(), src_bytes);
    let path = mnt.join("fsx");
    let mut file = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path).unwrap();
    let (mut model, mut log) = (Vec::new(), Vec::new());
    for _ in 0..OPS {
        step(&mut rng, &path, &mut file, &src, &mut model, &mut log);
    }
    let whole = std::fs::read(&path).unwrap();
    assert!(
        whole == model,
        "the file ({} bytes) differs from the model ({}) after {log:#?}",
        whole.len(),
        model.len()
    );
    drop((file, src));
    mounted.unmount();
    let out = iolab(&["fs", "fsck", image.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
}

#[test]
fn fsx_through_a_mount_matches_the_model_under_log() {
    fsx("log", "dev", 1);
}

#[test]
fn fsx_through_a_mount_matches_the_model_under_softdep() {
    fsx("softdep", "auto", 2);
}

#[test]
fn fsx_through_a_mount_matches_the_model_under_sync() {
    fsx("sync", "auto", 3);
}
