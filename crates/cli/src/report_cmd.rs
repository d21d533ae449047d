//! `iolab report RESULTS.json... -o report.html`: saved result documents
//! made into one self-contained HTML page (report::html_report).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

use crate::UsageError;

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Result documents: the --json files of iolab run, bonnie and the
    /// sweeps.
    #[arg(required = true, value_name = "RESULTS.json")]
    pub files: Vec<PathBuf>,
    /// Where the page goes.
    #[arg(long, short = 'o', value_name = "FILE", default_value = "report.html")]
    pub output: PathBuf,
}

pub fn run(args: ReportArgs) -> anyhow::Result<ExitCode> {
    crate::check_output("output", &args.output, false)?;
    let mut docs = Vec::with_capacity(args.files.len());
    for file in &args.files {
        let text = std::fs::read_to_string(file)
            .map_err(|e| UsageError(format!("{}: cannot read it: {e}", file.display())))?;
        let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
            UsageError(format!("{}: not a JSON document ({e}); give files written by --json", file.display()))
        })?;
        docs.push((file.display().to_string(), value));
    }
    let page = report::html_report(env!("IOLAB_LONG_VERSION"), &docs).map_err(UsageError)?;
    std::fs::write(&args.output, page)
        .with_context(|| format!("{}: cannot write the page", args.output.display()))?;
    let files = report::counted(docs.len() as u64, "result file", "result files");
    eprintln!("iolab: wrote {} ({files})", args.output.display());
    Ok(ExitCode::SUCCESS)
}
