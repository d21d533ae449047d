//! An image that is not clean, at mount (docs/fs.md, "An unclean
//! image"): what its superblock says, once its log is replayed, decides
//! whether a mount may write to it. A mount that wrote to an image a
//! crash left unchecked would allocate from stale bitmaps and cross-link
//! files, and its unmount would then mark the damage clean, so the check
//! lives here, in the mount, where no caller can forget it.

use crate::format::{Damage, Policy, Superblock};

/// What a mount does with an image whose superblock says it may hold
/// damage ([`Superblock::damage_possible`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Unclean {
    /// Refuse one that may hold more than leaks ([`crate::FsError::Unclean`]);
    /// mount one that may hold leaks only (soft updates' crash), saying
    /// that `fsck -B` should follow. The default.
    #[default]
    Refuse,
    /// Mount whatever it holds (the user's `--force`): the damage is
    /// recorded in the superblock, so the image stays refused until a
    /// check repairs it, whatever the unmount says.
    Force,
    /// The caller's device keeps nothing the mount writes (a scratch view:
    /// `ls`, `stat`, `cat`): mount, to look at the image as it is.
    ReadOnly,
}

/// An image mounted, or refused, while not clean: what its superblock
/// says (after its log's replay) and what it may therefore hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UncleanImage {
    /// The device's name (a file's path as opened).
    pub device: String,
    /// The policy of its last mount.
    pub policy: Policy,
    /// Whether that mount was unmounted.
    pub clean: bool,
    /// Damage recorded by an earlier mount forced over it, or a check that
    /// left some.
    pub recorded: Damage,
    /// What it may hold: the larger of what a crash under `policy` leaves
    /// and `recorded`.
    pub damage: Damage,
    /// What this mount did with it.
    pub mounted: Mounted,
}

/// What a mount did with an unclean image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mounted {
    /// Refused it ([`crate::FsError::Unclean`]).
    Refused,
    /// Mounted over what may be leaks only.
    OverLeaks,
    /// Mounted over anything, as told ([`Unclean::Force`]).
    Forced,
    /// Mounted on a view that keeps no write ([`Unclean::ReadOnly`]).
    ReadOnly,
}

impl UncleanImage {
    /// What the superblock says, in words.
    pub fn state(&self) -> String {
        let crash = (!self.clean).then(|| {
            format!(
                "its last mount (policy {}) was never unmounted, and a crash under {} leaves {}",
                self.policy.name(),
                self.policy.name(),
                match Damage::of_crash_under(self.policy) {
                    Damage::None => "nothing once its log is replayed",
                    Damage::Leaks => "leaks only",
                    Damage::Unknown => "what only fsck can find",
                }
            )
        });
        let recorded = match self.recorded {
            Damage::None => None,
            Damage::Leaks => {
                Some("a mount after a crash under softdep left leaks no check has reclaimed since")
            }
            // A crashed softdep mount that recorded more than leaks was
            // moving a directory between directories (`Core::mark_moving`),
            // or was forced over damage.
            Damage::Unknown if !self.clean && self.policy.marks_moves() => Some(
                "its superblock says more than leaks: a directory was moving between directories (a crash \
                 inside the move may leave it named from both parents, or its `..` naming the old one), or \
                 the mount was forced over damage no check has repaired",
            ),
            Damage::Unknown => {
                Some("a mount was forced over damage (or a check left some) that no check has repaired since")
            }
        };
        match (crash, recorded) {
            (Some(crash), Some(recorded))
                if self.policy.marks_moves() && self.recorded == Damage::Unknown =>
            {
                format!("{crash}; but {recorded}")
            }
            (Some(crash), Some(recorded)) => format!("{crash}; and before that, {recorded}"),
            (Some(crash), None) => crash,
            (None, Some(recorded)) => format!("it was unmounted, but {recorded}"),
            (None, None) => "clean".into(),
        }
    }

    /// The command that makes it clean again, for `target` as the user
    /// named it.
    pub fn fix(&self, target: &str) -> String {
        match self.damage {
            Damage::Leaks => format!("iolab fs fsck -B {target}"),
            _ => format!("iolab fs fsck -p {target}"),
        }
    }

    /// The refusal, for `target` as the user named it.
    pub fn refusal(&self, target: &str) -> String {
        format!(
            "{target} is not clean: {}. A mount that writes to it could allocate from stale bitmaps and \
             cross-link files; check and repair it first with `{}` (then mount it again), or pass --force to \
             mount it as it is (it then stays marked unclean until a check repairs it)",
            self.state(),
            self.fix(target)
        )
    }

    /// What a caller that mounted it tells the user, for `target` as the
    /// user named it.
    pub fn warning(&self, target: &str) -> String {
        match self.mounted {
            Mounted::ReadOnly => format!(
                "{target} is not clean ({}): it is shown as the crash left it, which may be inconsistent; \
                 `iolab fs fsck -n {target}` checks it",
                self.state()
            ),
            Mounted::Forced => format!(
                "{target} is not clean ({}); mounted anyway (--force): writing to it may damage it further, and \
                 it stays marked unclean, refused by every later mount, until `{}` repairs it",
                self.state(),
                self.fix(target)
            ),
            Mounted::Refused => self.refusal(target),
            Mounted::OverLeaks => format!(
                "{target} was not unmounted cleanly, under soft updates ({}): it may hold leaks only (blocks \
                 and inodes marked in use that nothing uses, link counts too high), which a mount can live \
                 with; run `{}` after unmounting to reclaim them",
                self.state(),
                self.fix(target)
            ),
        }
    }
}

impl std::fmt::Display for UncleanImage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.refusal(&self.device))
    }
}

/// Whether a mount may go on with the image whose superblock (its log
/// replayed) is `sb`: `Ok(None)` when it is clean, `Ok(Some(..))` when it
/// mounts over what it may hold (said by the caller), and the refusal.
pub(crate) fn judge(
    device: &str,
    sb: &Superblock,
    unclean: Unclean,
) -> Result<Option<UncleanImage>, Box<UncleanImage>> {
    let damage = sb.damage_possible();
    if damage == Damage::None {
        return Ok(None);
    }
    let mounted = match (unclean, damage) {
        (Unclean::ReadOnly, _) => Mounted::ReadOnly,
        (_, Damage::Leaks) => Mounted::OverLeaks,
        (Unclean::Force, _) => Mounted::Forced,
        (Unclean::Refuse, _) => Mounted::Refused,
    };
    let image = UncleanImage {
        device: device.to_string(),
        policy: sb.policy,
        clean: sb.clean,
        recorded: sb.damage,
        damage,
        mounted,
    };
    match mounted {
        Mounted::Refused => Err(Box::new(image)),
        _ => Ok(Some(image)),
    }
}
