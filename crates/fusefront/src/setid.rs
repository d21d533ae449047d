//! Clearing set-user-ID and set-group-ID bits, which the kernel leaves to
//! the server once INIT agrees to `FUSE_HANDLE_KILLPRIV_V2` (both
//! transports ask for it): otherwise it asks for the file's attributes
//! before every chown (a GETATTR round trip per file GNU tar extracts) to
//! work the new mode out itself.
//!
//! Linux's rules (`should_remove_suid`): a chown of anything but a
//! directory, and a write or truncation by a caller without CAP_FSETID,
//! clear S_ISUID, and S_ISGID when the group may execute (S_ISGID
//! without group execute marks mandatory locking and stays).

use fsapi::{FileSystem, FileType, Ino, SetAttr};

/// Why the bits may have to go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kill {
    /// The kernel said so (`FATTR_KILL_SUIDGID`, `FUSE_WRITE_KILL_SUIDGID`).
    Told,
    /// The `fuser` front's setattr carries no kill flag: it applies the
    /// rules itself, from the change and who asks (root, uid 0, is taken
    /// to hold CAP_FSETID; anyone else not).
    ByRule { caller_uid: u32 },
}

/// The set-ID bits of `perm` that a kill clears.
fn killed(perm: u16) -> u16 {
    let group_exec = perm & 0o010 != 0;
    let bits = if group_exec { 0o6000 } else { 0o4000 };
    perm & bits
}

/// Adds to `changes` the mode without the set-ID bits, when `kill` calls
/// for it and `ino` has any; a change that sets the mode itself is left
/// alone (chmod after chown restores what tar asks for).
pub(crate) fn on_setattr(
    fs: &dyn FileSystem,
    ino: Ino,
    changes: &mut SetAttr,
    kill: Option<Kill>,
) -> fsapi::Result<()> {
    if changes.perm.is_some() {
        return Ok(());
    }
    let Some(kill) = kill else {
        return Ok(());
    };
    let attr = fs.getattr(ino)?;
    let applies = match kill {
        Kill::Told => true,
        Kill::ByRule { caller_uid } => {
            let chown = (changes.uid.is_some() || changes.gid.is_some()) && attr.kind != FileType::Dir;
            chown || (changes.size.is_some() && caller_uid != 0)
        }
    };
    if applies && killed(attr.perm) != 0 {
        changes.perm = Some(attr.perm & !killed(attr.perm));
    }
    Ok(())
}

/// Clears the set-ID bits of `ino` before a write the kernel marked.
pub(crate) fn on_write(fs: &dyn FileSystem, ino: Ino) -> fsapi::Result<()> {
    let attr = fs.getattr(ino)?;
    if killed(attr.perm) != 0 {
        fs.setattr(ino, &SetAttr { perm: Some(attr.perm & !killed(attr.perm)), ..SetAttr::default() })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use fsapi::{ModelFs, Owner, ROOT};
    use std::ffi::OsStr;

    fn file(fs: &ModelFs, perm: u16) -> Ino {
        fs.create(ROOT, OsStr::new("f"), Owner { perm, uid: 0, gid: 0 }).unwrap().ino
    }

    /// The mode `changes` asks for once the kill is applied.
    fn mode_after(fs: &ModelFs, ino: Ino, mut changes: SetAttr, kill: Kill) -> Option<u16> {
        on_setattr(fs, ino, &mut changes, Some(kill)).unwrap();
        changes.perm
    }

    #[test]
    fn a_chown_by_rule_clears_setuid_and_setgid_with_group_execute() {
        let fs = ModelFs::new();
        let ino = file(&fs, 0o6755);
        let chown = SetAttr { uid: Some(5), ..SetAttr::default() };
        assert_eq!(mode_after(&fs, ino, chown, Kill::ByRule { caller_uid: 0 }), Some(0o0755));
    }

    #[test]
    fn setgid_without_group_execute_stays() {
        let fs = ModelFs::new();
        let ino = file(&fs, 0o6744);
        let chown = SetAttr { gid: Some(5), ..SetAttr::default() };
        assert_eq!(mode_after(&fs, ino, chown, Kill::Told), Some(0o2744));
    }

    #[test]
    fn a_chown_of_a_directory_by_rule_keeps_its_bits() {
        let fs = ModelFs::new();
        let ino = fs.mkdir(ROOT, OsStr::new("d"), Owner { perm: 0o2775, uid: 0, gid: 0 }).unwrap().ino;
        let chown = SetAttr { gid: Some(5), ..SetAttr::default() };
        assert_eq!(mode_after(&fs, ino, chown, Kill::ByRule { caller_uid: 0 }), None);
    }

    #[test]
    fn a_change_that_sets_the_mode_is_left_as_asked() {
        let fs = ModelFs::new();
        let ino = file(&fs, 0o4755);
        let chmod_too = SetAttr { uid: Some(5), perm: Some(0o4711), ..SetAttr::default() };
        assert_eq!(mode_after(&fs, ino, chmod_too, Kill::Told), Some(0o4711));
    }

    #[test]
    fn a_truncation_by_rule_clears_setuid_for_a_user_and_not_for_root() {
        let fs = ModelFs::new();
        let ino = file(&fs, 0o4755);
        let truncate = SetAttr { size: Some(0), ..SetAttr::default() };
        assert_eq!(mode_after(&fs, ino, truncate, Kill::ByRule { caller_uid: 0 }), None);
        assert_eq!(mode_after(&fs, ino, truncate, Kill::ByRule { caller_uid: 65534 }), Some(0o0755));
    }

    #[test]
    fn a_marked_write_clears_setuid() {
        let fs = ModelFs::new();
        let ino = file(&fs, 0o4755);
        on_write(&fs, ino).unwrap();
        assert_eq!(fs.getattr(ino).unwrap().perm, 0o0755);
    }
}
