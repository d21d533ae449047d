//! `mpirun -np N iolab run --json FILE`: schema `iolab-mpi-run`, version 1
//! (docs/json.md): the ranks' hosts, the aggregates, and every rank with
//! its windows and its own `iolab-run` document, as rank 0 gathered it.

use serde::Serialize;

use crate::mpi::{aggregate, Aggregate, RankRun};

#[derive(Clone, Debug, Serialize)]
pub struct MpiRunDocument<'a> {
    pub schema: &'static str,
    pub version: u32,
    pub iolab_version: String,
    /// The machine and command line behind the document.
    pub host: super::Host,
    pub size: usize,
    /// Each host once, sorted.
    pub hosts: Vec<&'a str>,
    pub layout: &'a str,
    pub stonewall: Option<&'a str>,
    /// `--mpi-reorder`: each rank ran on another rank's targets.
    pub reordered: bool,
    pub aggregate: Vec<Aggregate>,
    pub ranks: &'a [RankRun],
}

impl<'a> MpiRunDocument<'a> {
    pub fn new(
        iolab_version: &str,
        host: super::Host,
        ranks: &'a [RankRun],
        layout: &'a str,
        stonewall: Option<&'a str>,
        reordered: bool,
    ) -> Self {
        let hosts: std::collections::BTreeSet<&str> = ranks.iter().map(|r| r.host.as_str()).collect();
        MpiRunDocument {
            schema: "iolab-mpi-run",
            version: 1,
            iolab_version: iolab_version.to_string(),
            host,
            size: ranks.len(),
            hosts: hosts.into_iter().collect(),
            layout,
            stonewall,
            reordered,
            aggregate: aggregate(ranks),
            ranks,
        }
    }

    pub fn to_json(&self) -> String {
        super::pretty(self)
    }
}
