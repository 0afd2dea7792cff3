//! The flight recorder in real processes: the lifecycle example program (compiled into
//! this test binary, as in `tests/lifecycle.rs`) runs with `TRACING_TRACE2_FLIGHT`
//! beside the three text targets and ends in each way. A run that ends well leaves no
//! snapshot; a failed one leaves one that decodes, byte for byte, to what the text
//! targets wrote (its window holds the whole short run); a panic, `SIGUSR2` and an
//! unusable directory do what `docs/flight-recorder.md` says.
//!
//! The binary has its own `main` (no libtest harness) because it doubles as the program.

#[path = "support/mod.rs"]
mod support;

#[path = "program/mod.rs"]
mod program;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use program::{ensure, ours, tempdir};
use support::process::{run, trace_file};
use tracing_trace2_binary::{TextFormat, TextOptions, decode_to_text};

fn main() -> ExitCode {
    program::main(
        "flight",
        &[
            ("a_good_end_writes_nothing", a_good_end_writes_nothing),
            (
                "a_failed_exit_decodes_to_the_text_targets",
                a_failed_exit_decodes_to_the_text_targets,
            ),
            (
                "std_process_exit_keeps_its_code",
                std_process_exit_keeps_its_code,
            ),
            ("a_panic_writes_a_snapshot", a_panic_writes_a_snapshot),
            (
                "a_panics_two_snapshots_are_one_process",
                a_panics_two_snapshots_are_one_process,
            ),
            (
                "an_aborting_panic_writes_a_snapshot",
                an_aborting_panic_writes_a_snapshot,
            ),
            (
                "sigusr2_writes_a_window_on_demand",
                sigusr2_writes_a_window_on_demand,
            ),
            (
                "an_unusable_directory_warns_and_changes_nothing",
                an_unusable_directory_warns_and_changes_nothing,
            ),
        ],
    )
}

/// The program with `args`, its flight directory `<dir>/flight` (made).
fn flown(dir: &Path, args: &[&str]) -> (Command, PathBuf) {
    let flight = dir.join("flight");
    std::fs::create_dir_all(&flight).expect("create the flight directory");
    let mut cmd = ours(dir, args);
    cmd.env("TRACING_TRACE2_FLIGHT", &flight);
    (cmd, flight)
}

fn snapshots(flight: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(flight)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.sort();
    files
}

fn decoded(file: &Path, format: TextFormat) -> Result<String, String> {
    let bytes = std::fs::read(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let mut out = Vec::new();
    let report = decode_to_text(&bytes[..], &mut out, &TextOptions::new(format))
        .map_err(|e| e.to_string())?;
    ensure(report.is_complete(), || format!("{report}"))?;
    String::from_utf8(out).map_err(|e| e.to_string())
}

fn text_target(dir: &Path, ext: &str) -> String {
    String::from_utf8_lossy(&std::fs::read(trace_file(dir, "trace", ext)).unwrap_or_default())
        .into_owned()
}

/// Runs `cmd` and checks its exit code.
fn ends_with_code(cmd: Command, code: i32) -> Result<(), String> {
    let out = run(cmd);
    ensure(out.status.code() == Some(code), || {
        format!(
            "exit status {:?}, expected {code}; stderr: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn a_good_end_writes_nothing() -> Result<(), String> {
    let dir = tempdir("flight-good");
    for args in [&["return"][..], &["exit-code", "0"]] {
        let (cmd, flight) = flown(&dir, args);
        ends_with_code(cmd, 0)?;
        let files = snapshots(&flight);
        ensure(files.is_empty(), || format!("{args:?} wrote {files:?}"))?;
    }
    Ok(())
}

/// The one snapshot of a run that failed with `code`, which must decode to the three
/// text targets' bytes.
fn failed_run_matches(name: &str, args: &[&str], code: i32) -> Result<(), String> {
    let dir = tempdir(name);
    let (cmd, flight) = flown(&dir, args);
    ends_with_code(cmd, code)?;
    let files = snapshots(&flight);
    ensure(files.len() == 1, || format!("snapshots: {files:?}"))?;
    let name = files[0].file_name().unwrap_or_default().to_string_lossy();
    ensure(name.ends_with("-000-exit.t2b"), || {
        format!("file name {name}")
    })?;
    for (format, ext) in [
        (TextFormat::Normal, "normal"),
        (TextFormat::Perf, "perf"),
        (TextFormat::Event, "event"),
    ] {
        let got = decoded(&files[0], format)?;
        let want = text_target(&dir, ext);
        ensure(got == want, || {
            format!("{ext} differs:\n--- snapshot\n{got}\n--- target\n{want}")
        })?;
    }
    let event = text_target(&dir, "event");
    let last = event.lines().last().unwrap_or_default();
    ensure(
        last.contains("\"event\":\"atexit\"") && last.contains(&format!("\"code\":{code}")),
        || format!("last line {last}"),
    )?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn a_failed_exit_decodes_to_the_text_targets() -> Result<(), String> {
    failed_run_matches("flight-exit", &["exit-code", "3"], 3)
}

fn std_process_exit_keeps_its_code() -> Result<(), String> {
    failed_run_matches("flight-process-exit", &["process-exit", "7"], 7)
}

fn a_panic_writes_a_snapshot() -> Result<(), String> {
    let dir = tempdir("flight-panic");
    let (cmd, flight) = flown(&dir, &["panic", "the bug message"]);
    ends_with_code(cmd, 101)?;
    let files = snapshots(&flight);
    let names: Vec<String> = files
        .iter()
        .map(|f| {
            f.file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    // The panic's own (its window ends at the `error` line), then the exit's.
    ensure(
        names.len() == 2
            && names[0].ends_with("-000-panic.t2b")
            && names[1].ends_with("-001-exit.t2b"),
        || format!("snapshots: {names:?}"),
    )?;
    let event = decoded(&files[0], TextFormat::Event)?;
    let lines: Vec<&str> = event.lines().collect();
    ensure(
        lines.len() >= 2
            && lines[lines.len() - 2].contains("\"event\":\"error\"")
            && lines[lines.len() - 2].contains("the bug message")
            && lines[lines.len() - 1].contains("\"value\":\"panic\""),
        || format!("panic snapshot:\n{event}"),
    )?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// `trace2 summary`'s reading of `paths` (files or directories).
fn summary_of(paths: &[PathBuf]) -> Result<trace2_cli::summary::Summary, String> {
    use trace2_cli::{input, progress::Progress, summary::Summariser};
    let specs = input::expand(paths);
    let mut report = input::Report::default();
    let mut summariser = Summariser::new();
    input::for_each_event(&specs, &Progress::hidden(), &mut report, |event| {
        summariser.event(event)
    });
    ensure(report.clean(), || format!("{:?}", report.messages()))?;
    Ok(summariser.finish())
}

/// `trace2 export --format chrome`'s count of trace events for `paths`.
fn chrome_events_of(paths: &[PathBuf]) -> Result<u64, String> {
    use trace2_cli::{export::ChromeExporter, input, progress::Progress};
    let specs = input::expand(paths);
    let mut report = input::Report::default();
    let mut exporter = ChromeExporter::new(std::io::sink()).map_err(|e| e.to_string())?;
    let mut failed = None;
    input::for_each_event(&specs, &Progress::hidden(), &mut report, |event| {
        if let Err(e) = exporter.event(event) {
            failed = Some(e.to_string());
        }
    });
    if let Some(e) = failed {
        return Err(e);
    }
    ensure(report.clean(), || format!("{:?}", report.messages()))?;
    let (_, stats) = exporter.finish().map_err(|e| e.to_string())?;
    Ok(stats.events)
}

/// A panic writes two snapshots of one process, the panic's window and the exit's, which
/// overlap: read together they are the one process the Event target wrote, with its one
/// error and its one child, not each twice; exported, the same events.
fn a_panics_two_snapshots_are_one_process() -> Result<(), String> {
    let dir = tempdir("flight-panic-summary");
    let (cmd, flight) = flown(&dir, &["run-panic", "true"]);
    ends_with_code(cmd, 101)?;
    let files = snapshots(&flight);
    ensure(files.len() == 2, || format!("snapshots: {files:?}"))?;
    let from_snapshots = summary_of(std::slice::from_ref(&flight))?;
    let from_text = summary_of(&[trace_file(&dir, "trace", "event")])?;
    let [ours] = from_snapshots.processes.as_slice() else {
        return Err(format!("{} processes", from_snapshots.processes.len()));
    };
    let [text] = from_text.processes.as_slice() else {
        return Err(format!("text: {} processes", from_text.processes.len()));
    };
    ensure(
        ours.errors == 1 && ours.children.len() == 1 && ours.exit_code == Some(101),
        || {
            format!(
                "{} errors, {} children, code {:?}",
                ours.errors,
                ours.children.len(),
                ours.exit_code
            )
        },
    )?;
    // What the text target says of the process; the snapshots add only the panic's marker.
    let fields = |p: &trace2_cli::summary::ProcessSummary| {
        let mut json = serde_json::to_value(p).unwrap_or_default();
        if let Some(fields) = json.as_object_mut() {
            fields.remove("events");
        }
        json
    };
    ensure(fields(ours) == fields(text), || {
        format!("snapshots: {:#}\ntext: {:#}", fields(ours), fields(text))
    })?;
    ensure(ours.events == text.events + 1, || {
        format!("{} events, the text target {}", ours.events, text.events)
    })?;
    let exported = chrome_events_of(std::slice::from_ref(&flight))?;
    let exported_text = chrome_events_of(&[trace_file(&dir, "trace", "event")])?;
    ensure(exported == exported_text + 1, || {
        format!("exported {exported} trace events, from the text target {exported_text}")
    })?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn an_aborting_panic_writes_a_snapshot() -> Result<(), String> {
    let dir = tempdir("flight-abort");
    let (cmd, flight) = flown(&dir, &["panic-abort", "the bug message"]);
    let out = run(cmd);
    ensure(out.status.code().is_none(), || {
        format!("status {:?}", out.status)
    })?;
    // No exit, no atexit: the panic hook's `error` is the last chance, and it is taken.
    let files = snapshots(&flight);
    ensure(
        !files.is_empty()
            && files
                .iter()
                .all(|f| f.to_string_lossy().ends_with("-panic.t2b")),
        || format!("snapshots: {files:?}"),
    )?;
    let event = decoded(&files[0], TextFormat::Event)?;
    ensure(event.contains("the bug message"), || event.clone())?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn sigusr2_writes_a_window_on_demand() -> Result<(), String> {
    let dir = tempdir("flight-signal");
    let (mut cmd, flight) = flown(&dir, &["run", "sleep", "2"]);
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| e.to_string())?;
    // Once the child is running, the parent is waiting for it.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !text_target(&dir, "event").contains("\"event\":\"child_start\"") {
        ensure(Instant::now() < deadline, || "no child_start".to_owned())?;
        std::thread::sleep(Duration::from_millis(10));
    }
    let pid = libc::pid_t::try_from(child.id()).map_err(|e| e.to_string())?;
    // SAFETY: sends a signal to the child this test started (and has not reaped).
    let sent = unsafe { libc::kill(pid, libc::SIGUSR2) };
    ensure(sent == 0, || "kill failed".to_owned())?;
    let status = child.wait().map_err(|e| e.to_string())?;
    ensure(status.code() == Some(0), || format!("status {status:?}"))?;
    let files = snapshots(&flight);
    ensure(
        files.len() == 1 && files[0].to_string_lossy().ends_with("-000-signal.t2b"),
        || format!("snapshots: {files:?}"),
    )?;
    let perf = decoded(&files[0], TextFormat::Perf)?;
    let lines: Vec<&str> = perf.lines().collect();
    ensure(
        lines.len() >= 3
            && lines[0].contains("| version ")
            && lines.iter().any(|l| l.contains("| child_start "))
            && lines[lines.len() - 1].contains("trigger:signal"),
        || format!("signal snapshot:\n{perf}"),
    )?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn an_unusable_directory_warns_and_changes_nothing() -> Result<(), String> {
    let dir = tempdir("flight-unusable");
    for (value, debug, warning) in [
        (
            dir.join("missing").to_string_lossy().into_owned(),
            true,
            "warning: trace2: could not open '",
        ),
        (
            "relative/dir".to_owned(),
            false,
            "warning: trace2: unknown value for 'TRACING_TRACE2_FLIGHT': 'relative/dir'",
        ),
    ] {
        let mut cmd = ours(&dir, &["exit-code", "3"]);
        cmd.env("TRACING_TRACE2_FLIGHT", &value);
        if debug {
            cmd.env("GIT_TRACE2_DST_DEBUG", "1");
        }
        let out = run(cmd);
        let stderr = String::from_utf8_lossy(&out.stderr);
        ensure(out.status.code() == Some(3), || {
            format!("{value}: {:?}", out.status)
        })?;
        ensure(stderr.contains(warning), || {
            format!("{value}: stderr {stderr}")
        })?;
        // The text targets are unaffected.
        let event = text_target(&dir, "event");
        ensure(event.contains("\"event\":\"atexit\""), || event.clone())?;
        let _ = std::fs::remove_file(trace_file(&dir, "trace", "event"));
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
