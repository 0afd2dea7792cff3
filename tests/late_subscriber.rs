//! A program whose `main` starts the Trace2 lifecycle first and installs its own layers
//! later, only for some commands (`examples/late_subscriber.rs`, compiled into this test
//! binary and run as a real process): the trace has the whole lifecycle and the
//! command's region and data whether or not the layers were installed, and the layers put
//! in the slot later do receive the program's spans and events.
//!
//! The binary has its own `main` (no libtest harness) because it doubles as the program.

#[path = "support/mod.rs"]
mod support;

#[path = "../examples/late_subscriber.rs"]
mod example;

use std::process::ExitCode;

use support::process::{clean_command, fresh_dir, home_in, run, trace_file, trace_to};

/// Set in the environment of a process that must act as the example program.
const PROGRAM_ENV: &str = "TRACE2_LATE_SUBSCRIBER_PROGRAM";

fn main() -> ExitCode {
    if std::env::var_os(PROGRAM_ENV).is_some() {
        return example::main();
    }
    support::runner::run_checks(
        "late_subscriber",
        &[
            ("a_command_without_layers", a_command_without_layers),
            (
                "a_command_that_installs_layers",
                a_command_that_installs_layers,
            ),
        ],
    )
}

/// Runs the program with `command`; returns its Event lines' `event` names (with the
/// `data` key and region label after them) and its stderr.
fn run_command(command: &str) -> Result<(Vec<String>, String), String> {
    let dir = fresh_dir(&format!("late-{command}")).map_err(|e| e.to_string())?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut cmd = clean_command(exe);
    home_in(&mut cmd, &dir);
    trace_to(&mut cmd, &dir, "trace");
    cmd.env(PROGRAM_ENV, "1").arg(command);
    let out = run(cmd);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if !out.status.success() {
        return Err(format!("{command}: {:?}, stderr: {stderr}", out.status));
    }
    let text = std::fs::read_to_string(trace_file(&dir, "trace", "event"))
        .map_err(|e| format!("no event trace: {e}"))?;
    let _ = std::fs::remove_dir_all(&dir);
    let lines = support::json_lines(text.lines())
        .iter()
        .map(|e| {
            let name = e["event"].as_str().unwrap_or("?").to_owned();
            match name.as_str() {
                "cmd_name" => format!("cmd_name {}", e["name"].as_str().unwrap_or("")),
                "region_enter" | "region_leave" => {
                    format!("{name} {}", e["label"].as_str().unwrap_or(""))
                }
                "data" => format!("data {}={}", e["key"], e["value"]),
                _ => name,
            }
        })
        .collect();
    Ok((lines, stderr))
}

/// The lines every run has, with the command's name.
fn expected(command: &str) -> Vec<String> {
    [
        "version",
        "start",
        "cmd_ancestry",
        &format!("cmd_name {command}"),
        "region_enter run",
        &format!("data \"command\"=\"{command}\""),
        "region_leave run",
        "exit",
        "atexit",
    ]
    .map(str::to_owned)
    .to_vec()
}

fn a_command_without_layers() -> Result<(), String> {
    let (lines, stderr) = run_command("status")?;
    if lines != expected("status") {
        return Err(format!("trace: {lines:#?}"));
    }
    if !stderr.is_empty() {
        return Err(format!("stderr without layers: {stderr}"));
    }
    Ok(())
}

fn a_command_that_installs_layers() -> Result<(), String> {
    let (lines, stderr) = run_command("log")?;
    if lines != expected("log") {
        return Err(format!("trace: {lines:#?}"));
    }
    // The fmt layer installed in the slot saw the command's span and event.
    if !(stderr.contains("run{command=\"log\"") && stderr.contains("key=\"command\"")) {
        return Err(format!("stderr of the late layer: {stderr:?}"));
    }
    Ok(())
}
