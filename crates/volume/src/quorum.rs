//! Which configuration copy a set is assembled from (docs/formats.md,
//! "Which copy wins"). Every drive votes with its newest copy that passed
//! every check. Copies are compared by the layout they describe (drives,
//! volumes, plexes, subdisks: what no command changes after creation), not
//! by their `state` and `revived` lines, which differ between generations
//! by design. The layout held by the most drives wins; between layouts
//! held by as many drives, the one with the highest generation wins (md's
//! event count), and a tie of both is refused. The set is assembled from
//! the newest copy of the winning layout, so a save torn between drives
//! still moves forward. A drive whose vote describes another layout is
//! reported and taken down: its copy is never used, and the drive is stale
//! until revived.

use crate::geometry::Org;
use crate::resolve::Layout;

/// A drive's vote: its newest copy that passed every check.
pub(crate) struct Vote {
    pub(crate) drive: String,
    pub(crate) device: String,
    pub(crate) generation: u64,
    pub(crate) layout: Layout,
}

/// What the vote decided.
pub(crate) struct Verdict {
    pub(crate) generation: u64,
    pub(crate) layout: Layout,
    /// Drives whose copies describe another layout, each with what to
    /// tell the user.
    pub(crate) dissenters: Vec<(String, String)>,
    /// Said when no layout had a majority.
    pub(crate) warning: Option<String>,
}

/// The layout alone: states and revive progress left out.
fn shape(layout: &Layout) -> Layout {
    Layout { states: Vec::new(), progress: Vec::new(), ..layout.clone() }
}

/// Votes for one layout.
struct Group {
    shape: Layout,
    votes: Vec<usize>,
    generation_max: u64,
}

/// Decides between the votes (see the module's doc). `Err` when two
/// layouts are held by as many drives at the same newest generation:
/// nothing tells which is right, and writing with the wrong one would
/// destroy data.
pub(crate) fn elect(votes: &[Vote]) -> Result<Option<Verdict>, String> {
    let mut groups: Vec<Group> = Vec::new();
    for (index, vote) in votes.iter().enumerate() {
        let key = shape(&vote.layout);
        match groups.iter_mut().find(|g| g.shape == key) {
            Some(group) => {
                group.votes.push(index);
                group.generation_max = group.generation_max.max(vote.generation);
            }
            None => groups.push(Group { shape: key, votes: vec![index], generation_max: vote.generation }),
        }
    }
    groups.sort_by_key(|g| std::cmp::Reverse((g.votes.len(), g.generation_max)));
    let Some(winner) = groups.first() else { return Ok(None) };
    let runner_up = groups.get(1);
    if runner_up
        .is_some_and(|r| (r.votes.len(), r.generation_max) == (winner.votes.len(), winner.generation_max))
    {
        return Err(format!(
            "the drives' configuration copies describe different layouts and nothing decides between them ({}): \
             check the drives given, or give the one whose copy is right with the others",
            describe_groups(votes, &groups)
        ));
    }
    let warning = runner_up.filter(|r| r.votes.len() == winner.votes.len()).map(|_| {
        format!(
            "no layout is held by a majority of the drives ({}): the one with the newest generation is used",
            describe_groups(votes, &groups)
        )
    });
    let newest =
        winner.votes.iter().map(|&i| &votes[i]).max_by_key(|v| v.generation).expect("a group has a vote");
    let dissenters = groups[1..]
        .iter()
        .flat_map(|g| &g.votes)
        .map(|&i| (votes[i].drive.clone(), dissent(&votes[i], newest, winner.votes.len(), votes.len())))
        .collect();
    Ok(Some(Verdict { generation: newest.generation, layout: newest.layout.clone(), dissenters, warning }))
}

fn describe_groups(votes: &[Vote], groups: &[Group]) -> String {
    let each = groups.iter().map(|g| {
        let drives: Vec<&str> = g.votes.iter().map(|&i| votes[i].drive.as_str()).collect();
        format!("{} up to generation {}", drives.join(", "), g.generation_max)
    });
    each.collect::<Vec<_>>().join("; ")
}

/// What to tell the user about a drive whose copy disagrees.
fn dissent(vote: &Vote, chosen: &Vote, agreeing: usize, voting: usize) -> String {
    format!(
        "drive '{drive}' is down: its configuration copy on {device} (generation {generation}) disagrees with \
         the {agreeing} of {voting} drives whose copies agree (generation {chosen_generation}): {difference}; \
         the copy is ignored and the drive is treated as stale, left as it is until you revive it with \
         `iolab volume start {drive} ...`, which rewrites its metadata",
        drive = vote.drive,
        device = vote.device,
        generation = vote.generation,
        chosen_generation = chosen.generation,
        difference = difference(&vote.layout, &chosen.layout),
    )
}

/// The first thing two layouts differ in, in words.
fn difference(theirs: &Layout, ours: &Layout) -> String {
    let drives = |l: &Layout| l.drives.iter().map(|d| format!("{} {}", d.name, d.device)).collect::<Vec<_>>();
    if drives(theirs) != drives(ours) {
        return format!("it lists drives {:?} where the others list {:?}", drives(theirs), drives(ours));
    }
    let plexes = |l: &Layout| {
        let all = l.volumes.iter().flat_map(|v| v.plexes.iter().map(move |p| (v, p)));
        all.map(|(v, p)| format!("volume {} plex {} {}", v.name, p.name, org_words(&p.org, p.log_drive)))
            .collect::<Vec<_>>()
    };
    if let Some((a, b)) = plexes(theirs).iter().zip(plexes(ours).iter()).find(|(a, b)| a != b) {
        return format!("it has {a} where the others have {b}");
    }
    let subdisks = |l: &Layout| {
        let all = l.volumes.iter().flat_map(|v| &v.plexes).flat_map(|p| &p.subdisks);
        all.map(|s| {
            format!(
                "subdisk {} on drive {} at {} for {} bytes",
                s.name, s.drive, s.drive_offset_bytes, s.length_bytes
            )
        })
        .collect::<Vec<_>>()
    };
    if let Some((a, b)) = subdisks(theirs).iter().zip(subdisks(ours).iter()).find(|(a, b)| a != b) {
        return format!("it has {a} where the others have {b}");
    }
    "it describes other volumes, plexes or subdisks than the others".into()
}

fn org_words(org: &Org, log_drive: Option<usize>) -> String {
    let log = log_drive.map(|d| format!(" logged on drive #{d}")).unwrap_or_default();
    match org.stripe_bytes() {
        Some(stripe_bytes) => format!("{} with {stripe_bytes}-byte stripes{log}", org.kind()),
        None => format!("{}{log}", org.kind()),
    }
}
