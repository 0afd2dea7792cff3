//! `trace2`: reads Git Trace2 traces. `trace2 --help` lists the subcommands.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

/// Reads Git Trace2 traces (Event JSON: GIT_TRACE2_EVENT files or directories).
///
/// Exit status: 0 when every input was read whole, 1 when an input was damaged, foreign or
/// unreadable (what was intact is still used) or the output could not be written, 2 for usage
/// errors.
#[derive(Parser)]
#[command(name = "trace2", version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Per process: command, exit code, elapsed time, top regions, children, timers, counters.
    Summary {
        /// Print the summary as JSON (all regions, times in µs).
        #[arg(long)]
        json: bool,
        /// Rows per region table.
        #[arg(long, default_value_t = 5, value_name = "N")]
        top: usize,
        /// Trace files or directories of per-process files; `-` reads standard input.
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
    },
    /// Converts traces for a trace viewer (Perfetto UI, chrome://tracing, speedscope).
    Export {
        /// Output format.
        #[arg(long, value_enum)]
        format: Format,
        /// Output file; `-` writes to standard output.
        #[arg(short, long, value_name = "OUT")]
        output: PathBuf,
        /// Trace files or directories of per-process files; `-` reads standard input.
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    /// Chrome trace event JSON.
    Chrome,
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Summary { json, top, files } => trace2_cli::run::summary(&files, json, top),
        Command::Export {
            format: Format::Chrome,
            output,
            files,
        } => trace2_cli::run::export_chrome(&files, &output),
    }
}
