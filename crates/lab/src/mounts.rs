//! Which mount a path is on, as /proc/self/mountinfo says: the file
//! system's type, source, options and device, for reports on directories
//! of file systems iolab did not make.

use std::path::{Path, PathBuf};

/// A mount, as the kernel lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mount {
    pub point: PathBuf,
    pub fs_type: String,
    pub source: String,
    pub options: String,
    /// The device's major and minor numbers (0 for file systems without
    /// a block device).
    pub device: (u32, u32),
}

impl Mount {
    /// "ext4 (/dev/vda, rw,relatime)".
    pub fn describe(&self) -> String {
        format!("{} ({}, {})", self.fs_type, self.source, self.options)
    }
}

/// `path` made absolute, and the mount holding it (the deepest whose
/// mount point is above it).
pub fn mount_of(path: &Path) -> Result<(PathBuf, Mount), String> {
    let real = std::fs::canonicalize(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let info = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("cannot read /proc/self/mountinfo: {e}"))?;
    let mut best: Option<Mount> = None;
    for mount in info.lines().filter_map(parse_mountinfo) {
        let deeper =
            best.as_ref().is_none_or(|b| mount.point.components().count() >= b.point.components().count());
        if real.starts_with(&mount.point) && deeper {
            best = Some(mount);
        }
    }
    best.map(|m| (real, m)).ok_or_else(|| format!("{}: no mount holds it", path.display()))
}

/// `ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - TYPE SOURCE
/// SUPEROPTIONS`, with octal escapes in the paths.
fn parse_mountinfo(line: &str) -> Option<Mount> {
    let (left, right) = line.split_once(" - ")?;
    let left: Vec<&str> = left.split(' ').collect();
    let right: Vec<&str> = right.split(' ').collect();
    let (major, minor) = left.get(2)?.split_once(':')?;
    let unescape = |s: &str| {
        s.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")
    };
    Some(Mount {
        point: PathBuf::from(unescape(left.get(4)?)),
        fs_type: right.first()?.to_string(),
        source: unescape(right.get(1)?),
        options: left.get(5)?.to_string(),
        device: (major.parse().ok()?, minor.parse().ok()?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mountinfo_line_gives_the_mount_point_type_source_options_and_device() {
        let line = "36 35 254:0 / /srv/my\\040data rw,relatime shared:1 - ext4 /dev/vda rw,errors=remount-ro";
        let m = parse_mountinfo(line).unwrap();
        assert_eq!(m.point, PathBuf::from("/srv/my data"));
        assert_eq!(m.describe(), "ext4 (/dev/vda, rw,relatime)");
        assert_eq!(m.device, (254, 0));
    }

    #[test]
    fn the_root_directory_is_on_some_mount() {
        let (real, m) = mount_of(Path::new("/")).unwrap();
        assert_eq!((real, m.point), (PathBuf::from("/"), PathBuf::from("/")));
    }
}
