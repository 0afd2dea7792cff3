//! The subcommands, from parsed arguments to an exit code: read the inputs once, feed each event
//! to the summariser or the exporter, then report what was skipped.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::binary_report::assess;
use crate::export::{ChromeExporter, ExportSink, Exporter, PerfettoExporter};
use crate::input::{self, InputSpec, Report};
use crate::progress::Progress;
use crate::summary::{Summariser, render_text};
use crate::visible::{VisibleLines, visible};

/// Exit code when an input was damaged, foreign or unreadable (what was intact is still used).
pub const EXIT_DAMAGED: u8 = 1;
/// Exit code when the output could not be written.
pub const EXIT_FAILED: u8 = 1;

/// `trace2 decode`: each binary input to text on standard output, in the order given; a
/// directory stands for its binary traces, in name order (for the binary target's and the flight
/// recorder's file names, the order the processes started or the snapshots were taken). A
/// damaged or foreign input gets one line on stderr naming it and what was skipped; what was
/// intact is still written. With `visible` (standard output is a terminal and `--raw` was not
/// given) control characters are written as escapes, as the other commands show them;
/// otherwise the text is byte for byte what the formatters write.
pub fn decode(
    paths: &[PathBuf],
    options: &tracing_trace2_binary::TextOptions,
    visible: bool,
) -> ExitCode {
    let stdout = io::stdout();
    let sink: Box<dyn Write> = if visible {
        Box::new(VisibleLines::new(stdout.lock()))
    } else {
        Box::new(stdout.lock())
    };
    let mut out = BufWriter::with_capacity(1 << 20, sink);
    let mut damaged = false;
    for path in decode_inputs(paths, &mut damaged) {
        let name = path.display().to_string();
        let reader: Box<dyn io::Read> = if path.as_os_str() == "-" {
            Box::new(io::stdin().lock())
        } else {
            match File::open(&path) {
                Ok(file) => Box::new(file),
                Err(e) => {
                    warn(&format!("{name}: {e}"));
                    damaged = true;
                    continue;
                }
            }
        };
        let mut reader = io::BufReader::with_capacity(256 << 10, reader);
        let head = io::BufRead::fill_buf(&mut reader).map(|h| h.to_vec());
        match head {
            Ok(head) if !head.starts_with(&input::BINARY_MAGIC) => {
                let what = if head.is_empty() {
                    "empty"
                } else {
                    "not a binary trace"
                };
                warn(&format!("{name}: {what}; skipped"));
                damaged = true;
                continue;
            }
            Err(e) => {
                warn(&format!("{name}: {e}"));
                damaged = true;
                continue;
            }
            Ok(_) => {}
        }
        match tracing_trace2_binary::decode_to_text(reader, &mut out, options) {
            Ok(report) => {
                let assessment = assess(&report);
                for note in &assessment.unfinished {
                    warn(&format!("{name}: {note}"));
                }
                if let Some(damage) = &assessment.damage {
                    warn(&format!("{name}: damaged, intact events written: {damage}"));
                    damaged = true;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => return ExitCode::SUCCESS,
            Err(e) => {
                warn(&format!("{name}: {e}"));
                return ExitCode::from(EXIT_FAILED);
            }
        }
    }
    match out.flush() {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => return ExitCode::SUCCESS,
        Err(e) => {
            warn(&format!("standard output: {e}"));
            return ExitCode::from(EXIT_FAILED);
        }
    }
    if damaged {
        ExitCode::from(EXIT_DAMAGED)
    } else {
        ExitCode::SUCCESS
    }
}

/// The command line's paths as files to decode (`-` for standard input): a directory's binary
/// traces in name order. A directory that cannot be read or holds no binary trace is reported here (and sets `damaged`).
fn decode_inputs(paths: &[PathBuf], damaged: &mut bool) -> Vec<PathBuf> {
    let mut inputs = Vec::new();
    for path in paths {
        if path.as_os_str() == "-" || !path.is_dir() {
            inputs.push(path.clone());
            continue;
        }
        let name = path.display();
        let files = match input::list_dir(path) {
            Ok(files) => files,
            Err(e) => {
                warn(&format!("{name}: {e}"));
                *damaged = true;
                continue;
            }
        };
        let before = inputs.len();
        // A directory may hold other files (another target's, a sentinel): those are passed
        // over, but a file named like a binary trace (`….t2b`, `….t2b.N`) that is not one
        // (empty, damaged at its start) is reported when it is decoded.
        for file in files.into_iter().filter_map(|spec| spec.path) {
            let named_binary = file
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with(".t2b") || n.contains(".t2b."));
            if named_binary || starts_binary(&file) {
                inputs.push(file);
            }
        }
        if inputs.len() == before {
            warn(&format!("{name}: directory holds no binary trace"));
            *damaged = true;
        }
    }
    inputs
}

/// True when `path` starts like a binary trace (read again when it is decoded).
fn starts_binary(path: &Path) -> bool {
    let mut head = [0u8; 4];
    File::open(path)
        .and_then(|mut f| io::Read::read_exact(&mut f, &mut head))
        .is_ok_and(|()| head == input::BINARY_MAGIC)
}

/// `trace2 summary`.
pub fn summary(paths: &[PathBuf], as_json: bool, top: usize) -> ExitCode {
    let mut report = Report::default();
    let specs = input::expand(paths);
    let progress = progress_for(&specs);
    let mut summariser = Summariser::new();
    input::for_each_event(&specs, &progress, &mut report, |event| {
        summariser.event(event)
    });
    progress.finish();
    let summary = summariser.finish();
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let written = if as_json {
        serde_json::to_writer_pretty(&mut out, &summary)
            .map_err(io::Error::from)
            .and_then(|()| writeln!(out))
    } else {
        out.write_all(render_text(&summary, top).as_bytes())
    }
    .and_then(|()| out.flush());
    finish(&report, written, "standard output")
}

/// `trace2 export --format chrome`.
pub fn export_chrome(paths: &[PathBuf], output: &Path) -> ExitCode {
    export(paths, output, ChromeExporter::new)
}

/// `trace2 export --format perfetto`.
pub fn export_perfetto(paths: &[PathBuf], output: &Path) -> ExitCode {
    export(paths, output, PerfettoExporter::new)
}

/// Reads every input into the exporter that `start` makes on the output file.
fn export<S: ExportSink>(
    paths: &[PathBuf],
    output: &Path,
    start: impl FnOnce(BufWriter<Box<dyn Write>>) -> io::Result<Exporter<S>>,
) -> ExitCode {
    let mut report = Report::default();
    let specs = input::expand(paths);
    let sink: Box<dyn Write> = if output.as_os_str() == "-" {
        Box::new(io::stdout().lock())
    } else {
        match File::create(output) {
            Ok(file) => Box::new(file),
            Err(e) => {
                warn(&format!("{}: {e}", output.display()));
                return ExitCode::from(EXIT_FAILED);
            }
        }
    };
    let progress = progress_for(&specs);
    let written = (|| {
        let mut exporter = start(BufWriter::with_capacity(1 << 20, sink))?;
        let mut failure = None;
        input::for_each_event(&specs, &progress, &mut report, |event| {
            if failure.is_none()
                && let Err(e) = exporter.event(event)
            {
                failure = Some(e);
            }
        });
        if let Some(e) = failure {
            return Err(e);
        }
        exporter.finish().map(|_| ())
    })();
    progress.finish();
    finish(&report, written, &output.display().to_string())
}

fn progress_for(specs: &[InputSpec]) -> Progress {
    let total = specs.iter().map(|s| s.size).sum::<Option<u64>>();
    Progress::for_stderr(total)
}

fn finish(report: &Report, written: io::Result<()>, output: &str) -> ExitCode {
    for message in report.messages() {
        eprintln!("{message}");
    }
    if let Err(e) = written {
        // A reader that went away (`| head`) is not an error of ours.
        if e.kind() != io::ErrorKind::BrokenPipe {
            warn(&format!("{output}: {e}"));
            return ExitCode::from(EXIT_FAILED);
        }
    }
    if report.clean() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_DAMAGED)
    }
}

/// One line on stderr, `trace2: ` first, with control characters made visible: file names and
/// messages can come from the trace.
fn warn(message: &str) {
    eprintln!("trace2: {}", visible(message));
}

/// Reads `paths` (files or directories) into the samples of `trace2 stats`/`compare`,
/// recording in `report` what was skipped.
pub fn collect(paths: &[PathBuf], report: &mut Report) -> crate::stats::SampleSet {
    collect_with(paths, report, crate::stats::Collector::new())
}

/// [`collect`] into `collector` (made with the options the command line asked for).
pub fn collect_with(
    paths: &[PathBuf],
    report: &mut Report,
    mut collector: crate::stats::Collector,
) -> crate::stats::SampleSet {
    let specs = input::expand(paths);
    let progress = progress_for(&specs);
    input::for_each_event(&specs, &progress, report, |event| collector.event(event));
    progress.finish();
    collector.finish()
}

/// `trace2 stats`.
pub fn stats(paths: &[PathBuf], as_json: bool) -> ExitCode {
    let mut report = Report::default();
    let set = collect(paths, &mut report);
    let stats = crate::stats::stats(&set);
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let written = if as_json {
        serde_json::to_writer_pretty(&mut out, &stats)
            .map_err(io::Error::from)
            .and_then(|()| writeln!(out))
    } else {
        out.write_all(crate::stats::text::render_stats(&stats).as_bytes())
    }
    .and_then(|()| out.flush());
    finish(&report, written, "standard output")
}

/// `trace2 compare`: `base` against `new`, the table (or JSON) on standard output and, when
/// asked, the page in `html`. `without_program`: commands named without their program, so
/// that one program's runs are compared with another's.
pub fn compare(
    base: &[PathBuf],
    new: &[PathBuf],
    as_json: bool,
    html: Option<&Path>,
    alpha: f64,
    without_program: bool,
) -> ExitCode {
    let mut report = Report::default();
    let collector = || {
        let collector = crate::stats::Collector::new();
        if without_program {
            collector.without_program()
        } else {
            collector
        }
    };
    let base = collect_with(base, &mut report, collector());
    let new = collect_with(new, &mut report, collector());
    let comparison = crate::stats::compare(&base, &new, alpha);
    if let Some(html) = html {
        let page = crate::stats::html::render(&comparison);
        if let Err(e) = std::fs::write(html, page) {
            warn(&format!("{}: {e}", html.display()));
            return ExitCode::from(EXIT_FAILED);
        }
    }
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let written = if as_json {
        serde_json::to_writer_pretty(&mut out, &comparison)
            .map_err(io::Error::from)
            .and_then(|()| writeln!(out))
    } else {
        out.write_all(crate::stats::text::render_comparison(&comparison).as_bytes())
    }
    .and_then(|()| out.flush());
    finish(&report, written, "standard output")
}
