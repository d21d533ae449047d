//! `mpirun -np N iolab run ...` and `iolab validate` under MPI. The
//! refusals of a binary that cannot join the launcher's ranks run in every
//! build; the multi-rank tests need the `mpi` feature and Open MPI's
//! mpirun (`.ci/run` installs both), over shared memory only.

use std::process::{Command, Output};

use crate::cli::{stderr, stdout};

/// iolab as a launcher would start one of `size` ranks, without MPI
/// behind it.
fn as_rank_of(size: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_iolab"))
        .args(args)
        .env("OMPI_COMM_WORLD_SIZE", size)
        .output()
        .expect("run iolab")
}

#[cfg(not(feature = "mpi"))]
#[test]
fn a_build_without_mpi_refuses_to_be_one_of_several_ranks() {
    let out = as_rank_of("2", &["run", "--target", "mem:1m", "--ios", "10"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("built without MPI"), "{}", stderr(&out));
    assert!(stdout(&out).is_empty(), "it ran anyway: {}", stdout(&out));
}

#[cfg(feature = "mpi")]
#[test]
fn a_launcher_that_says_two_ranks_where_mpi_sees_one_is_refused() {
    // No mpirun: MPI starts as a singleton, the other family's way.
    let out = as_rank_of("2", &["run", "--target", "mem:1m", "--ios", "10"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("but MPI reports 1"), "{}", stderr(&out));
}

#[test]
fn one_rank_runs_as_iolab_alone() {
    let out = as_rank_of("1", &["run", "--target", "mem:1m", "--ios", "10", "-q"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("lat mean"), "{}", stdout(&out));
}

#[test]
fn mpi_layout_without_mpirun_is_refused() {
    let out = crate::cli::iolab(&["run", "--target", "mem:1m", "--mpi-layout", "shared"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--mpi-layout: applies under mpirun only"), "{}", stderr(&out));
}

#[cfg(feature = "mpi")]
mod ranks {
    use std::process::{Command, Output};

    use serde_json::Value;

    use crate::cli::{stderr, stdout};

    /// `mpirun -np N iolab ARGS` over shared memory, as root if need be.
    fn mpirun(n: usize, args: &[&str]) -> Output {
        Command::new("mpirun")
            .args(["--allow-run-as-root", "--oversubscribe", "--mca", "btl", "self,vader", "-np"])
            .arg(n.to_string())
            .arg(env!("CARGO_BIN_EXE_iolab"))
            .args(args)
            .output()
            .expect("run mpirun (apt-get install openmpi-bin)")
    }

    fn json(path: &std::path::Path) -> Value {
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    /// `mpirun -np N iolab run --target DIR/TARGET ARGS --json ...`, which
    /// must succeed: the gathered document, and the directory.
    fn run_json(n: usize, target: &str, args: &[&str]) -> (Value, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let (target, out_path) = (dir.path().join(target), dir.path().join("mpi.json"));
        let mut all = vec!["run", "--target", target.to_str().unwrap()];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--json", out_path.to_str().unwrap()]);
        let out = mpirun(n, &all);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        (json(&out_path), dir)
    }

    fn write_ios(doc: &Value) -> u64 {
        doc["jobs"][0]["runs"][0]["write"]["ios"].as_u64().unwrap()
    }

    #[test]
    fn the_aggregate_is_the_sum_of_every_ranks_requests() {
        for n in [2usize, 3] {
            let dir = tempfile::tempdir().unwrap();
            let out_path = dir.path().join("mpi.json");
            let out = mpirun(
                n,
                &[
                    "run",
                    "--target",
                    "mem:8m",
                    "--rw",
                    "randwrite",
                    "--ios",
                    "700",
                    "--json",
                    out_path.to_str().unwrap(),
                ],
            );
            assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
            let doc = json(&out_path);
            assert_eq!(doc["size"], n);
            let ranks = doc["ranks"].as_array().unwrap();
            assert_eq!(ranks.len(), n);
            let sum: u64 = ranks.iter().map(|r| write_ios(&r["document"])).sum();
            assert_eq!(sum, 700 * n as u64);
            assert_eq!(doc["aggregate"][0]["write_ios"].as_u64(), Some(sum));
            assert_eq!(doc["aggregate"][0]["ranks"].as_u64(), Some(n as u64));
        }
    }

    #[test]
    fn rank_0_prints_a_row_per_rank_and_the_aggregate() {
        let out = mpirun(2, &["run", "--target", "mem:8m", "--ios", "200"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let text = stdout(&out);
        assert!(text.contains("MPI: 2 ranks on 1 host ("), "{text}");
        assert!(text.contains("all  2 ranks"), "{text}");
        assert_eq!(text.matches("MPI: 2 ranks").count(), 1, "only rank 0 prints: {text}");
    }

    #[test]
    fn per_rank_targets_are_distinct_files() {
        let (doc, dir) = run_json(2, "t{rank}.img", &["--size", "4m", "--ios", "100"]);
        assert!(dir.path().join("t0.img").is_file() && dir.path().join("t1.img").is_file());
        let names: Vec<&str> = (0..2)
            .map(|r| doc["ranks"][r]["document"]["jobs"][0]["runs"][0]["target"].as_str().unwrap())
            .collect();
        assert_ne!(names[0], names[1]);
    }

    #[test]
    fn one_path_for_every_rank_is_refused_once() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("t.img");
        let out = mpirun(2, &["run", "--target", target.to_str().unwrap(), "--size", "4m", "--ios", "10"]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert_eq!(
            stderr(&out).matches("ranks 0 and 1 of the 2 would both use it").count(),
            1,
            "{}",
            stderr(&out)
        );
        assert!(!target.exists(), "nothing is made when the ranks refuse");
    }

    #[test]
    fn a_placeholder_elsewhere_does_not_make_one_target_each_ranks_own() {
        let dir = tempfile::tempdir().unwrap();
        let (target, json) = (dir.path().join("t.img"), dir.path().join("out{rank}.json"));
        let args = ["--size", "4m", "--ios", "10", "--json", json.to_str().unwrap()];
        let out = mpirun(2, &[&["run", "--target", target.to_str().unwrap()][..], &args].concat());
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(stderr(&out).contains("--target"), "{}", stderr(&out));
        assert!(!target.exists(), "nothing is made when the ranks refuse");
    }

    #[test]
    fn a_shared_target_is_split_into_one_region_per_rank() {
        let args = ["--size", "12m", "--ios", "100", "--mpi-layout", "shared"];
        let (doc, _dir) = run_json(3, "shared.img", &args);
        let regions: Vec<(u64, u64)> = (0..3)
            .map(|r| {
                let run = &doc["ranks"][r]["document"]["jobs"][0]["runs"][0];
                (run["region_offset_bytes"].as_u64().unwrap(), run["region_bytes"].as_u64().unwrap())
            })
            .collect();
        assert_eq!(regions, vec![(0, 4 << 20), (4 << 20, 4 << 20), (8 << 20, 4 << 20)]);
    }

    /// The ranks sharing one file lock it each: the others' locks are
    /// theirs, not another run's, so no rank warns of them.
    #[test]
    fn ranks_sharing_a_target_do_not_warn_of_each_others_locks() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("shared.img");
        let args = ["run", "--target", target.to_str().unwrap(), "--size", "12m", "--ios", "2000"];
        let out = mpirun(3, &[&args[..], &["--mpi-layout", "shared"]].concat());
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert!(!stderr(&out).contains("in use by"), "{}", stderr(&out));
    }

    #[test]
    fn validation_runs_per_rank_and_a_bad_rank_is_caught() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("t{rank}.img");
        let journal = dir.path().join("j{rank}");
        let (target, journal) = (target.to_str().unwrap(), journal.to_str().unwrap());
        let out = mpirun(
            2,
            &["run", "--target", target, "--size", "4m", "--ios", "2000", "--validate", "--journal", journal],
        );
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let check = || mpirun(2, &["validate", "--target", target, "--journal", journal]);
        let ok = check();
        assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
        assert!(stdout(&ok).contains("2 ranks: 2 ok, 0 not"), "{}", stdout(&ok));
        // Rank 1's target loses its every block's contents.
        std::fs::write(dir.path().join("t1.img"), vec![0x5au8; 4 << 20]).unwrap();
        let bad = check();
        assert_ne!(bad.status.code(), Some(0), "{}", stdout(&bad));
        assert!(stdout(&bad).contains("2 ranks: 1 ok, 1 not"), "{}", stdout(&bad));
    }

    #[test]
    fn the_stonewall_stops_every_rank_before_its_requests_are_done() {
        let args = ["--ios", "1000000000", "--stonewall", "300ms"];
        let (doc, _dir) = run_json(2, "t{rank}.img", &[&["--size", "4m"][..], &args].concat());
        assert_eq!(doc["stonewall"], "300ms");
        for r in 0..2 {
            let done = write_ios(&doc["ranks"][r]["document"])
                + doc["ranks"][r]["document"]["jobs"][0]["runs"][0]["read"]["ios"].as_u64().unwrap();
            assert!(done > 0 && done < 1_000_000_000, "rank {r} ran {done} requests");
        }
    }

    #[test]
    fn mdtest_phases_run_in_a_directory_per_rank_and_add_up() {
        let dir = tempfile::tempdir().unwrap();
        let args =
            ["fs", "tree", dir.path().to_str().unwrap(), "--depth", "1", "--fanout", "2", "--items", "5"];
        let out = mpirun(2, &args);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let text = stdout(&out);
        let row = text.lines().find(|l| l.starts_with("Directory creation")).expect(&text);
        // 3 directories of 5 items each, on each of the 2 ranks.
        assert_eq!(row.split_whitespace().nth(2), Some("30"), "{text}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "every rank's tree was removed");
    }

    #[test]
    fn reordered_each_rank_reads_what_its_neighbour_wrote() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("t{rank}.img");
        let target = target.to_str().unwrap();
        let wrote = mpirun(2, &["run", "--target", target, "--size", "4m", "--rw", "write", "--bs", "1m"]);
        assert_eq!(wrote.status.code(), Some(0), "{}", stderr(&wrote));
        let out_path = dir.path().join("read.json");
        let args = ["run", "--target", target, "--size", "4m", "--rw", "read", "--bs", "1m", "--mpi-reorder"];
        let read = mpirun(2, &[&args[..], &["--json", out_path.to_str().unwrap()]].concat());
        assert_eq!(read.status.code(), Some(0), "{}", stderr(&read));
        let doc = json(&out_path);
        assert_eq!(doc["reordered"], true);
        for (rank, other) in [(0, "t1.img"), (1, "t0.img")] {
            let name = doc["ranks"][rank]["document"]["jobs"][0]["runs"][0]["target"].as_str().unwrap();
            assert!(name.ends_with(other), "rank {rank} read {name}");
        }
    }

    #[test]
    fn tar_and_rm_run_on_an_image_per_rank_and_add_up() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        std::fs::create_dir_all(src.join("d")).unwrap();
        for i in 0..4 {
            std::fs::write(src.join("d").join(format!("f{i}")), vec![i as u8; 5000]).unwrap();
        }
        let archive = dir.path().join("a.tar");
        let tarred =
            Command::new("tar").arg("cf").arg(&archive).arg("-C").arg(&src).arg("d").status().unwrap();
        assert!(tarred.success());
        for r in 0..2 {
            let image = dir.path().join(format!("fs{r}.img"));
            let made = crate::cli::iolab(&["fs", "mkfs", image.to_str().unwrap(), "--size", "64m"]);
            assert_eq!(made.status.code(), Some(0), "{}", stderr(&made));
        }
        let image = dir.path().join("fs{rank}.img");
        let image = image.to_str().unwrap();
        let untar = mpirun(2, &["fs", "untar", image, archive.to_str().unwrap(), "--policy", "log"]);
        assert_eq!(untar.status.code(), Some(0), "{}", stderr(&untar));
        // The directory and its four files, on each of the two ranks.
        let row = |out: &Output, phase: &str| {
            let text = stdout(out);
            let line =
                text.lines().find(|l| l.starts_with(phase)).unwrap_or_else(|| panic!("{text}")).to_string();
            line.split_whitespace().nth(2).map(str::to_string)
        };
        assert_eq!(row(&untar, "tar (entries)"), Some("10".to_string()));
        let rm = mpirun(2, &["fs", "rm", image, "d", "--policy", "softdep"]);
        assert_eq!(rm.status.code(), Some(0), "{}", stderr(&rm));
        assert_eq!(row(&rm, "rm (entries)"), Some("10".to_string()));
    }

    #[test]
    fn discards_are_refused_under_mpirun() {
        let out = mpirun(2, &["run", "--target", "mem:4m", "--rw", "randtrim", "--ios", "10"]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(stderr(&out).contains("counts reads and writes only"), "{}", stderr(&out));
    }

    #[test]
    fn other_commands_are_refused_under_mpirun() {
        let out = mpirun(2, &["fs", "ls", "no-such.img"]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(
            stderr(&out)
                .contains("only `iolab run`, `iolab validate` and `iolab fs tree`, `untar` and `rm` run"),
            "{}",
            stderr(&out)
        );
    }
}
