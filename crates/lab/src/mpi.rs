//! Running as one of MPI's ranks: `mpirun -np N iolab run ...` (IOR's and
//! mdtest's way of spanning hosts). The launcher is told from its
//! environment (Open MPI's, MPICH's and Intel MPI's, Slurm's); MPI itself
//! is reached only with the `mpi` feature (rsmpi over the system's MPI).
//! A binary that cannot join the launcher's ranks (built without the
//! feature, or against the other MPI family, which then reports one rank)
//! refuses to run: N copies each believing it is alone would report N
//! figures as one machine's.

#[cfg(feature = "mpi")]
use mpi::traits::*;

use crate::UsageError;

/// The ranks a launcher started, by its environment: how many, and who
/// said so.
pub fn launcher() -> Option<(usize, &'static str)> {
    const VARS: [(&str, &str); 4] = [
        ("OMPI_COMM_WORLD_SIZE", "Open MPI's mpirun"),
        ("PMI_SIZE", "an MPICH-family launcher (mpiexec.hydra)"),
        ("PMIX_SIZE", "a PMIx launcher"),
        ("SLURM_STEP_NUM_TASKS", "Slurm's srun"),
    ];
    VARS.iter().find_map(|(var, who)| {
        let n = std::env::var(var).ok()?.trim().parse::<usize>().ok()?;
        (var != &"SLURM_STEP_NUM_TASKS" || std::env::var_os("SLURM_PROCID").is_some()).then_some((n, *who))
    })
}

/// A step every rank agreed failed (on some rank): rank 0 says why, for
/// all of them; every rank ends without aborting the others.
#[derive(Debug, thiserror::Error)]
#[error("{text}")]
pub struct Agreed {
    pub text: String,
    /// This rank reports it (rank 0).
    pub report: bool,
    /// A refusal of the command line (exit status 2).
    pub usage: bool,
}

/// This process's place among the ranks.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub struct Ranks {
    pub rank: usize,
    pub size: usize,
    pub host: String,
    /// Every rank's host, in rank order.
    pub hosts: Vec<String>,
    /// `--mpi-reorder`: `{rank}` and `{host}` name the rank this one reads
    /// for (IOR's -C), not this one.
    pub reordered: Option<usize>,
    #[cfg(feature = "mpi")]
    world: mpi::topology::SimpleCommunicator,
    #[cfg(feature = "mpi")]
    _universe: mpi::environment::Universe,
}

/// Joins the launcher's ranks when it started more than one; `None` when
/// iolab runs alone (no launcher, or one rank).
pub fn start() -> Result<Option<Ranks>, UsageError> {
    match launcher() {
        Some((n, who)) if n > 1 => join(n, who).map(Some),
        _ => Ok(None),
    }
}

#[cfg(not(feature = "mpi"))]
fn join(n: usize, who: &str) -> Result<Ranks, UsageError> {
    Err(UsageError(format!(
        "{who} started this as one of {n} ranks, but this iolab was built without MPI, so every rank \
         would run alone and report as if it were the only one; build it with `cargo build --release \
         --features mpi` (needs libopenmpi-dev and libclang-dev), or run it without the launcher"
    )))
}

#[cfg(feature = "mpi")]
fn join(n: usize, who: &str) -> Result<Ranks, UsageError> {
    // Worker threads never call MPI: the main thread alone does.
    let Some((universe, _)) = mpi::initialize_with_threading(mpi::Threading::Funneled) else {
        return Err(UsageError("MPI was initialized already".into()));
    };
    let world = universe.world();
    let size = world.size() as usize;
    if size != n {
        return Err(UsageError(format!(
            "{who} started {n} ranks, but MPI reports {size}: this iolab was built against another MPI \
             family than the launcher's (Open MPI against MPICH, or the reverse); build it against the \
             launcher's MPI or launch it with the MPI it was built with"
        )));
    }
    let host = mpi::environment::processor_name().unwrap_or_else(|_| "unknown".into());
    let mut ranks = Ranks {
        rank: world.rank() as usize,
        size,
        host: host.clone(),
        hosts: Vec::new(),
        reordered: None,
        world,
        _universe: universe,
    };
    let all = ranks.gather(host).map(|h| h.join("\n"));
    ranks.hosts = ranks.broadcast(all.unwrap_or_default()).split('\n').map(str::to_string).collect();
    Ok(ranks)
}

#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
impl Ranks {
    /// `arg` with `{rank}`, `{size}` and `{host}` put in (under
    /// `--mpi-reorder`, the rank and host this one reads for).
    pub fn substitute(&self, arg: &str) -> String {
        let rank = self.reordered.unwrap_or(self.rank);
        let host = self.hosts.get(rank).map_or(self.host.as_str(), String::as_str);
        arg.replace("{rank}", &rank.to_string())
            .replace("{size}", &self.size.to_string())
            .replace("{host}", host)
    }

    /// The rank whose targets this one takes under `--mpi-reorder`: IOR's
    /// -C, shifted by the ranks on this host, so that with ranks placed
    /// host by host each reads what a rank on the next host wrote (its
    /// own client cache holds none of it); 1 on a single host.
    pub fn neighbour(&self) -> usize {
        let here = self.hosts.iter().filter(|h| **h == self.host).count();
        let shift = if here == self.size { 1 } else { here.max(1) };
        (self.rank + shift) % self.size
    }

    /// Every argument with the placeholders put in.
    pub fn substitute_all(&mut self, args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
        if args.iter().any(|a| a == "--mpi-reorder") {
            self.reordered = Some(self.neighbour());
        }
        args.into_iter().map(|a| a.to_str().map_or(a.clone(), |text| self.substitute(text).into())).collect()
    }

    /// Refuses, on every rank alike, paths two ranks on one host would
    /// share: each `(flag, path)` this rank will write, as it resolved
    /// them. Ranks on other hosts may name one path (each its own disk;
    /// on a shared file system, the user's to tell).
    pub fn own_paths(&self, paths: &[(&str, &std::path::Path)]) -> anyhow::Result<()> {
        let mine: Vec<String> = paths
            .iter()
            .map(|(flag, p)| {
                format!("{flag}\t{}", std::path::absolute(p).unwrap_or(p.to_path_buf()).display())
            })
            .collect();
        let verdict = self.gather(mine.join("\n")).map(|all| shared_path(&all, &self.hosts, self.size));
        match self.broadcast(verdict.unwrap_or_default()) {
            text if text.is_empty() => Ok(()),
            text => Err(Agreed { text, report: self.rank == 0, usage: true }.into()),
        }
    }

    /// Waits until every rank is here.
    pub fn barrier(&self) {
        #[cfg(feature = "mpi")]
        self.world.barrier();
    }

    /// Rank 0 gets every rank's text, in rank order (its own first); the
    /// others send theirs and get `None`.
    pub fn gather(&self, text: String) -> Option<Vec<String>> {
        #[cfg(feature = "mpi")]
        {
            let root = self.world.process_at_rank(0);
            if self.rank != 0 {
                root.send(text.as_bytes());
                return None;
            }
            let mut all = vec![text];
            for r in 1..self.size {
                let (bytes, _) = self.world.process_at_rank(r as i32).receive_vec::<u8>();
                all.push(String::from_utf8_lossy(&bytes).into_owned());
            }
            Some(all)
        }
        #[cfg(not(feature = "mpi"))]
        Some(vec![text])
    }

    /// [`Ranks::gather`] of a value sent as JSON: rank 0 gets every
    /// rank's (`what`, for the error when one does not arrive whole).
    pub fn gather_values<T: serde::Serialize + serde::de::DeserializeOwned>(
        &self,
        mine: &T,
        what: &str,
    ) -> anyhow::Result<Option<Vec<T>>> {
        let Some(texts) = self.gather(serde_json::to_string(mine)?) else { return Ok(None) };
        let all = texts.iter().map(|t| serde_json::from_str(t)).collect::<Result<_, _>>();
        Ok(Some(all.map_err(|e| anyhow::anyhow!("a rank's {what} did not arrive whole: {e}"))?))
    }

    /// Rank 0's `text`, on every rank.
    pub fn broadcast(&self, text: String) -> String {
        #[cfg(feature = "mpi")]
        {
            let mut bytes = text.into_bytes();
            let mut len = bytes.len() as u64;
            self.world.process_at_rank(0).broadcast_into(&mut len);
            if len == 0 {
                return String::new();
            }
            bytes.resize(len as usize, 0);
            self.world.process_at_rank(0).broadcast_into(&mut bytes[..]);
            String::from_utf8_lossy(&bytes).into_owned()
        }
        #[cfg(not(feature = "mpi"))]
        text
    }

    /// Rank 0's verdict, the same on every rank: `Ok` or every rank's
    /// copy of the error (so that none waits at a barrier for a rank that
    /// gave up).
    pub fn agree(&self, verdict: Result<(), String>) -> Result<(), String> {
        let texts = self.gather(verdict.clone().err().unwrap_or_default());
        if cfg!(not(feature = "mpi")) {
            return verdict;
        }
        let all = self.broadcast(texts.map(|all| failures(&all)).unwrap_or_default());
        if all.is_empty() {
            Ok(())
        } else {
            Err(all)
        }
    }

    /// Every rank's verdict on `step`, the same on all: on a failure
    /// anywhere, every rank returns [`Agreed`] (rank 0 reports it, once).
    pub fn agreed<T>(&self, step: anyhow::Result<T>) -> anyhow::Result<T> {
        let verdict = step.as_ref().map(|_| ()).map_err(crate::message);
        match (self.agree(verdict), step) {
            (Ok(()), Ok(value)) => Ok(value),
            (Err(all), Err(own)) => {
                Err(own.context(Agreed { text: all, report: self.rank == 0, usage: false }))
            }
            (Err(all), Ok(_)) => Err(Agreed { text: all, report: self.rank == 0, usage: false }.into()),
            (Ok(()), Err(own)) => Err(own),
        }
    }

    /// Ends every rank, this one with them: a rank that fails mid-run
    /// cannot leave the others waiting at a barrier. Returns only without
    /// the `mpi` feature, where no ranks are ever joined; the caller then
    /// ends as it would alone.
    pub fn abort(&self, code: i32) {
        #[cfg(feature = "mpi")]
        self.world.abort(code);
        #[cfg(not(feature = "mpi"))]
        let _ = code;
    }
}

/// Rank 0's look at every rank's paths (`flag\tpath` lines, in rank
/// order): the first one two ranks on one host share, said with its fix,
/// or nothing.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
fn shared_path(all: &[String], hosts: &[String], size: usize) -> String {
    let mut seen: std::collections::HashMap<(&str, &str), usize> = std::collections::HashMap::new();
    for (rank, lines) in all.iter().enumerate() {
        let host = hosts.get(rank).map_or("", String::as_str);
        for line in lines.lines() {
            let Some((flag, path)) = line.split_once('\t') else { continue };
            match seen.get(&(host, path)) {
                Some(&other) if other != rank => {
                    return format!(
                        "--{flag} {path}: ranks {other} and {rank} of the {size} would both use it; put {{rank}} or \
                         {{host}} in the path (e.g. /data/t{{rank}}.img)"
                    );
                }
                _ => {
                    seen.insert((host, path), rank);
                }
            }
        }
    }
    String::new()
}

/// The ranks' failures (an empty text for a rank that did well) as one
/// text: once when every rank failed alike, else each with its rank.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
fn failures(texts: &[String]) -> String {
    let failed: Vec<(usize, &String)> = texts.iter().enumerate().filter(|(_, t)| !t.is_empty()).collect();
    match failed.as_slice() {
        [] => String::new(),
        [(_, first), ..] if failed.len() == texts.len() && failed.iter().all(|(_, t)| t == first) => {
            format!("{first} (on every rank)")
        }
        _ => failed.iter().map(|(r, t)| format!("rank {r}: {t}")).collect::<Vec<_>>().join("; "),
    }
}

#[cfg(test)]
mod tests {
    use super::failures;

    #[test]
    fn the_same_failure_on_every_rank_is_said_once() {
        let all = vec!["no room".to_string(), "no room".to_string()];
        assert_eq!(failures(&all), "no room (on every rank)");
    }

    #[test]
    fn a_path_two_ranks_on_one_host_share_is_named() {
        let all = vec!["target\t/d/t.img".to_string(), "target\t/d/t.img".to_string()];
        let text = super::shared_path(&all, &["a".into(), "a".into()], 2);
        assert!(text.starts_with("--target /d/t.img: ranks 0 and 1 of the 2 would both use it"), "{text}");
    }

    #[test]
    fn one_path_on_two_hosts_or_two_paths_on_one_are_each_ranks_own() {
        let same = vec!["target\t/d/t.img".to_string(), "target\t/d/t.img".to_string()];
        assert_eq!(super::shared_path(&same, &["a".into(), "b".into()], 2), "");
        let own = vec!["target\t/d/t0.img".to_string(), "target\t/d/t1.img".to_string()];
        assert_eq!(super::shared_path(&own, &["a".into(), "a".into()], 2), "");
    }

    #[test]
    fn different_failures_name_their_ranks() {
        let all = vec![String::new(), "no room".to_string(), "gone".to_string()];
        assert_eq!(failures(&all), "rank 1: no room; rank 2: gone");
    }
}
