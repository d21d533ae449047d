use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// iolab: build storage stacks, drive workloads through them, validate
/// every byte, crash them on purpose, and report honestly.
#[derive(Debug, Parser)]
#[command(
    name = "iolab",
    version = env!("IOLAB_LONG_VERSION"),
    about = "iolab measures storage you can trust: it builds stacks (volumes, a block log, a file system) from \
             files or devices, drives fio-like workloads through them or through any file, device or directory, \
             checks every byte, crashes them on purpose, and reports how each figure was taken.",
    long_about = None,
    propagate_version = true,
    after_help = "Exit status: 0 success; 1 a failure (an I/O error, bad blocks found, a crash check's \
        violations, a check that checked nothing); 2 a usage error: a bad flag, value or input file, or a \
        target refused because it holds data (--force overwrites it), and nothing was written; 130 \
        interrupted (Ctrl-C; a run prints its results up to then). `validate` (and `run --power-cut`) adds \
        3, the journal is incomplete, and 4, the journal is damaged; `fs fsck` exits 1 when it repaired \
        everything, 4 when damage is left: see their --help."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands' names, as a user types them.
pub fn subcommand_names() -> Vec<String> {
    use clap::CommandFactory;
    Cli::command().get_subcommands().map(|c| c.get_name().to_string()).collect()
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run block workloads (fio/Vdbench kind) on a file, a block device or
    /// memory. With no target and no job file: a ~10 s random mixed run on a
    /// temporary 1 GiB file.
    Run(Box<crate::run::RunArgs>),
    /// Check a target against a validated run's journal (after a crash, or
    /// any time): every block must hold what the journal says was written;
    /// writes in flight at the crash may hold the old or the new data.
    #[command(after_help = "Exit status: 0 every block checked holds what the journal says; \
        1 bad blocks (lost: older than a durable record promises, including an older run's block; \
        misdirected, corrupt, zeroed, torn, from another run) or a failure; 2 a usage error; \
        3 no bad block, but blocks ahead of the journal (written after its last durable record): \
        the journal is incomplete, cut short or written async and caught by a crash; 4 no bad block, \
        but the journal is damaged (records it had made durable no longer read: blocks whose writes \
        it recorded there are unverifiable, and replay went on past the damage). Nothing checked \
        where the journal records writes is a failure (1).\n\n\
        The journal and the target are opened read-only under a shared lock (refused while a run \
        holds either); with --log the target is opened for writing under an exclusive lock, since \
        the log's replay writes it.")]
    Validate(crate::validate::ValidateArgs),
    /// The six bonnie phases (per-character and block output, rewrite,
    /// per-character and block input, random seeks) in bonnie's table.
    Bonnie(crate::bonnie::BonnieArgs),
    /// Comparison tables: stripe sizes, journal modes, metadata policies.
    #[command(subcommand)]
    Sweep(crate::sweep::SweepCommand),
    /// Build and manage Vinum-style volumes (concat, striped, RAID-5,
    /// mirrors) on files or block devices.
    ///
    /// A command that writes a set (create, start, stop, setstate, init,
    /// rebuildparity, resetstats, a run on a volume target) locks every
    /// drive for itself: while it runs, another gets an error naming it.
    #[command(subcommand)]
    Volume(crate::volume::VolumeCommand),
    /// Crash a stack on purpose: run transactions on it over recording
    /// devices, rebuild the images a power cut could leave at every flush
    /// and between flushes, reopen the stack on each and check that every
    /// acknowledged transaction is whole and none is partly present.
    Crash(crate::crash::CrashArgs),
    /// iolab's FFS-style file system: mkfs, mount (FUSE), fsck, and ls,
    /// stat and cat inside an unmounted image.
    #[command(subcommand)]
    Fs(crate::fs::FsCommand),
    /// The block log itself: repair a log whose replay stopped at damage
    /// (it refuses to serve until then).
    #[command(subcommand)]
    Log(crate::logs::LogCommand),
    /// One self-contained HTML page (inline charts, nothing fetched) from
    /// saved result documents (--json of run, bonnie and the sweeps):
    /// each run's target, parameters, figures, spread and charts; several
    /// files side by side.
    Report(crate::report_cmd::ReportArgs),
    /// Print a completion script for a shell (bash, zsh, fish, elvish,
    /// powershell): `iolab completions bash > /etc/bash_completion.d/iolab`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print iolab's manual page (roff): `iolab man | man -l -`; with
    /// --dir, write a page for every command into DIR instead.
    Man {
        /// Write iolab.1 and a page for each subcommand at every level
        /// (iolab-run.1, iolab-fs-mount.1, ...) into DIR, made if missing;
        /// `man -M`'s layout wants DIR to be .../man1.
        #[arg(long, value_name = "DIR")]
        dir: Option<std::path::PathBuf>,
    },
}

pub fn dispatch(cli: Cli, ranks: Option<&lab::mpi::Ranks>) -> anyhow::Result<ExitCode> {
    let under_mpi = matches!(
        cli.command,
        Command::Run(_)
            | Command::Validate(_)
            | Command::Fs(
                crate::fs::FsCommand::Tree(_) | crate::fs::FsCommand::Untar(_) | crate::fs::FsCommand::Rm(_)
            )
    );
    if let (Some(ranks), false) = (ranks, under_mpi) {
        return Err(crate::UsageError(format!(
            "started as one of {} MPI ranks: only `iolab run`, `iolab validate` and `iolab fs tree`, `untar` and `rm` run under mpirun (each rank its own job, check or tree, rank 0 reports them all)",
            ranks.size
        ))
        .into());
    }
    match cli.command {
        Command::Run(args) => crate::run::run(*args, ranks),
        Command::Volume(command) => crate::volume::run(command),
        Command::Crash(args) => crate::crash::run(args),
        Command::Bonnie(args) => crate::bonnie::run(args),
        Command::Validate(args) => crate::validate::run(args, ranks),
        Command::Sweep(command) => crate::sweep::run(command),
        Command::Fs(command) => crate::fs::run(command, ranks),
        Command::Log(command) => crate::logs::run(command),
        Command::Report(args) => crate::report_cmd::run(args),
        Command::Completions { shell } => {
            use clap::CommandFactory;
            clap_complete::generate(shell, &mut Cli::command(), "iolab", &mut std::io::stdout());
            Ok(ExitCode::SUCCESS)
        }
        Command::Man { dir: None } => {
            use clap::CommandFactory;
            clap_mangen::Man::new(Cli::command()).render(&mut std::io::stdout())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Man { dir: Some(dir) } => {
            use clap::CommandFactory;
            std::fs::create_dir_all(&dir).map_err(|e| {
                crate::UsageError(format!(
                    "--dir: cannot make {}: {e}; name a directory you may write",
                    dir.display()
                ))
            })?;
            clap_mangen::generate_to(Cli::command(), &dir)
                .map_err(|e| anyhow::anyhow!("writing the manual pages into {}: {e}", dir.display()))?;
            let pages = std::fs::read_dir(&dir)?.filter_map(|e| e.ok()).filter(|e| {
                e.file_name().to_str().is_some_and(|n| n.starts_with("iolab") && n.ends_with(".1"))
            });
            println!(
                "iolab: {} manual pages in {}; read one with `man -l {}/iolab-run.1`",
                pages.count(),
                dir.display(),
                dir.display()
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}
