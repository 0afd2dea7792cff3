//! `trace2`: reads Git Trace2 traces. `trace2 --help` lists the subcommands.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

/// Reads Git Trace2 traces (Event JSON: GIT_TRACE2_EVENT files or directories; binary
/// TRACING_TRACE2_BINARY files or directories, flight-recorder snapshots).
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
    /// Binary (t2b) traces to text: each thread's lines byte for byte what the process's text
    /// targets write, the lines of different threads merged by time.
    Decode {
        /// Text format.
        #[arg(long, value_enum)]
        format: TextKind,
        /// Brief mode (default: the writer's setting for that format).
        #[arg(long)]
        brief: bool,
        /// Event nesting limit (default: the writer's `GIT_TRACE2_EVENT_NESTING`).
        #[arg(long, value_name = "N")]
        nesting: Option<u32>,
        /// Write control characters as they are, also to a terminal (where they are shown as
        /// escapes by default; into a pipe or file the text is always byte-exact).
        #[arg(long)]
        raw: bool,
        /// Binary trace files or directories of them; `-` reads standard input.
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
    },
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
        format: ExportFormat,
        /// Output file; `-` writes to standard output.
        #[arg(short, long, value_name = "OUT")]
        output: PathBuf,
        /// Trace files or directories of per-process files; `-` reads standard input.
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
    },
    /// Statistics over many runs: per command, its regions, children, timers and counters
    /// (count, median, p10/p90, min/max of total and self time).
    Stats {
        /// Print the statistics as JSON (times in µs).
        #[arg(long)]
        json: bool,
        /// Trace files or directories of per-process files; `-` reads standard input.
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
    },
    /// What changed between two sets of runs: per group the shift with its confidence
    /// interval and a verdict (slower, faster, no change, too few runs).
    Compare {
        /// Print the comparison as JSON (times in µs).
        #[arg(long)]
        json: bool,
        /// Also write a self-contained HTML page with a picture per command.
        #[arg(long, value_name = "OUT")]
        html: Option<PathBuf>,
        /// Name commands without their program (`status`, not `git:status`): compares one
        /// program's runs of a command with another's.
        #[arg(long)]
        ignore_program: bool,
        /// Family-wise false-positive rate (intervals at 1 − ALPHA).
        #[arg(long, default_value_t = trace2_cli::stats::DEFAULT_ALPHA, value_name = "ALPHA",
              value_parser = parse_alpha)]
        alpha: f64,
        /// Base runs (instead of BASE NEW): files or directories.
        #[arg(long, num_args = 1.., value_name = "PATH", requires = "new",
              conflicts_with = "sides")]
        base: Vec<PathBuf>,
        /// New runs (instead of BASE NEW): files or directories.
        #[arg(long, num_args = 1.., value_name = "PATH", requires = "base")]
        new: Vec<PathBuf>,
        /// BASE NEW: a file or directory of each.
        #[arg(num_args = 2, value_names = ["BASE", "NEW"], required_unless_present = "base")]
        sides: Vec<PathBuf>,
    },
}

fn parse_alpha(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(alpha) if alpha > 0.0 && alpha < 0.5 => Ok(alpha),
        _ => Err("a rate between 0 and 0.5, such as 0.05".to_owned()),
    }
}

#[derive(Clone, Copy, ValueEnum)]
enum TextKind {
    /// `GIT_TRACE2`'s terse lines.
    Normal,
    /// `GIT_TRACE2_PERF`'s columns.
    Perf,
    /// `GIT_TRACE2_EVENT`'s JSON lines.
    Event,
}

#[derive(Clone, Copy, ValueEnum)]
enum ExportFormat {
    /// Chrome trace event JSON.
    Chrome,
    /// Perfetto's protobuf trace (smaller; the Perfetto UI and trace processor read it).
    Perfetto,
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Decode {
            format,
            brief,
            nesting,
            raw,
            files,
        } => {
            let format = match format {
                TextKind::Normal => tracing_trace2_binary::TextFormat::Normal,
                TextKind::Perf => tracing_trace2_binary::TextFormat::Perf,
                TextKind::Event => tracing_trace2_binary::TextFormat::Event,
            };
            let mut options = tracing_trace2_binary::TextOptions::new(format);
            if brief {
                options = options.with_brief(true);
            }
            if let Some(nesting) = nesting {
                options = options.with_event_nesting(nesting);
            }
            let visible = !raw && std::io::IsTerminal::is_terminal(&std::io::stdout());
            trace2_cli::run::decode(&files, &options, visible)
        }
        Command::Summary { json, top, files } => trace2_cli::run::summary(&files, json, top),
        Command::Export {
            format,
            output,
            files,
        } => match format {
            ExportFormat::Chrome => trace2_cli::run::export_chrome(&files, &output),
            ExportFormat::Perfetto => trace2_cli::run::export_perfetto(&files, &output),
        },
        Command::Stats { json, files } => trace2_cli::run::stats(&files, json),
        Command::Compare {
            json,
            html,
            ignore_program,
            alpha,
            base,
            new,
            sides,
        } => {
            let (base, new) = match sides.as_slice() {
                [base, new] => (vec![base.clone()], vec![new.clone()]),
                _ => (base, new),
            };
            trace2_cli::run::compare(&base, &new, json, html.as_deref(), alpha, ignore_program)
        }
    }
}
