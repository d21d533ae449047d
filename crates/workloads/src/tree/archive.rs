//! An archive read whole into memory and decompressed there first, as the
//! first seed read its archives from a memory file system: extraction
//! then measures the file system, not the disk the archive sits on or the
//! decompressor.

use std::io::Read;
use std::path::Path;

use super::TreeError;

/// How the archive file was compressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Xz,
}

impl Compression {
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "tar",
            Compression::Gzip => "tar.gz",
            Compression::Xz => "tar.xz",
        }
    }

    /// Known by the first bytes, whatever the file is called.
    fn sniff(head: &[u8]) -> Compression {
        if head.starts_with(&[0x1f, 0x8b]) {
            Compression::Gzip
        } else if head.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
            Compression::Xz
        } else {
            Compression::None
        }
    }
}

/// A tar archive in memory, decompressed.
pub struct LoadedArchive {
    pub tar: Vec<u8>,
    pub compression: Compression,
    /// Bytes of the file as stored.
    pub file_bytes: u64,
}

/// Reads `path` and decompresses it (gzip or xz, told by its first bytes).
/// Refuses a file that is not a tar archive, naming what it found.
pub fn load_archive(path: &Path) -> Result<LoadedArchive, TreeError> {
    let fail = |reason: String| TreeError::Archive { path: path.display().to_string(), reason };
    let raw = std::fs::read(path).map_err(|e| fail(format!("cannot read the archive: {e}")))?;
    let compression = Compression::sniff(&raw);
    let tar = match compression {
        Compression::None => raw.clone(),
        Compression::Gzip => {
            let mut out = Vec::with_capacity(raw.len() * 4);
            flate2::read::MultiGzDecoder::new(&raw[..])
                .read_to_end(&mut out)
                .map_err(|e| fail(format!("not a readable gzip file: {e}")))?;
            out
        }
        Compression::Xz => {
            let mut out = Vec::with_capacity(raw.len() * 6);
            xz2::read::XzDecoder::new_multi_decoder(&raw[..])
                .read_to_end(&mut out)
                .map_err(|e| fail(format!("not a readable xz file: {e}")))?;
            out
        }
    };
    if !looks_like_tar(&tar) {
        return Err(fail(format!(
            "not a tar archive (read as {}); give a .tar, .tar.gz or .tar.xz file",
            compression.name()
        )));
    }
    Ok(LoadedArchive { tar, compression, file_bytes: raw.len() as u64 })
}

/// The members of an archive in memory and the bytes of its files.
pub fn archive_size(tar: &[u8]) -> Result<(u64, u64), TreeError> {
    let bad = |e: std::io::Error| TreeError::Archive { path: "the archive".into(), reason: e.to_string() };
    let mut archive = ::tar::Archive::new(tar);
    let (mut entries, mut bytes) = (0, 0);
    for entry in archive.entries().map_err(bad)? {
        entries += 1;
        bytes += entry.map_err(bad)?.size();
    }
    Ok((entries, bytes))
}

/// A first header whose checksum adds up (POSIX ustar, GNU and v7 alike).
fn looks_like_tar(tar: &[u8]) -> bool {
    let Some(header) = tar.get(..512) else { return false };
    let field = &header[148..156];
    let text: String = field.iter().take_while(|&&b| b != 0 && b != b' ').map(|&b| b as char).collect();
    let Ok(stored) = u32::from_str_radix(text.trim(), 8) else { return false };
    let sum: u32 =
        header.iter().enumerate().map(|(i, &b)| if (148..156).contains(&i) { 32 } else { b as u32 }).sum();
    sum == stored
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one_file_tar() -> Vec<u8> {
        let mut b = ::tar::Builder::new(Vec::new());
        let mut h = ::tar::Header::new_gnu();
        h.set_size(5);
        h.set_mode(0o644);
        h.set_cksum();
        b.append_data(&mut h, "a.txt", &b"hello"[..]).unwrap();
        b.into_inner().unwrap()
    }

    #[test]
    fn gzip_and_xz_are_known_by_their_first_bytes() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let tar = one_file_tar();
        let gz = {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(&tar).unwrap();
            e.finish().unwrap()
        };
        let xz = {
            let mut e = xz2::write::XzEncoder::new(Vec::new(), 1);
            e.write_all(&tar).unwrap();
            e.finish().unwrap()
        };
        for (name, bytes, kind) in [
            ("a.tar", &tar, Compression::None),
            ("a.tgz", &gz, Compression::Gzip),
            ("a.txz", &xz, Compression::Xz),
        ] {
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).unwrap();
            let loaded = load_archive(&path).unwrap();
            assert_eq!((loaded.compression, &loaded.tar), (kind, &tar), "{name}");
        }
    }

    #[test]
    fn a_file_that_is_not_an_archive_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notes.txt");
        std::fs::write(&path, vec![b'x'; 2048]).unwrap();
        let err = load_archive(&path).err().expect("refused").to_string();
        assert!(err.contains("notes.txt") && err.contains("not a tar archive"), "{err}");
    }
}
