//! The targets and the lifecycle on every platform: run natively on Linux and, in CI,
//! under wine as a Windows program (`x86_64-pc-windows-gnu`). Each check starts this
//! binary again as a small traced program and reads what its targets received: a file
//! (appended to by several processes at once), a directory (one file per process), a
//! named pipe in both of Git for Windows' spellings (Windows only), stderr, and the
//! warnings for values the platform's git refuses. The program ends in each way a
//! process can end (return, `Err` or an exit code returned with the guard dropped, an
//! exit code, `std::process::exit`, a panic) and runs named threads.
//!
//! The binary has its own `main` (no libtest harness) because it doubles as the program.

use std::path::PathBuf;
use std::process::{Command, ExitCode, Output};

use serde_json::Value;

/// Set in the environment of a process that must act as the traced program.
const PROGRAM_ENV: &str = "TRACE2_PORTABLE_PROGRAM";

type Check = fn() -> Result<(), String>;

/// A `Result` so that the program can return `Err` as a fallible `main` does (Rust prints
/// it and exits with 1).
fn main() -> Result<ExitCode, String> {
    if let Some(mode) = std::env::var_os(PROGRAM_ENV) {
        return program::main(&mode.to_string_lossy());
    }
    let mut checks: Vec<(&str, Check)> = vec![
        ("return_from_main", return_from_main),
        (
            "return_err_with_the_guard_dropped",
            return_err_guard_dropped,
        ),
        (
            "return_err_with_the_guard_dropped_and_a_background_writer",
            return_err_guard_dropped_in_background,
        ),
        (
            "return_an_exit_code_with_the_guard_dropped",
            return_code_guard_dropped,
        ),
        (
            "return_err_with_the_guard_dropped_on_another_thread",
            return_err_guard_dropped_on_a_thread,
        ),
        ("finish_with_an_exit_code", finish_with_an_exit_code),
        ("std_process_exit", std_process_exit),
        ("finish_then_std_process_exit", finish_then_std_process_exit),
        (
            "std_process_exit_with_a_background_writer",
            std_process_exit_in_background,
        ),
        ("panic_out_of_main", panic_out_of_main),
        ("named_threads", named_threads),
        ("normal_to_stderr", normal_to_stderr),
        ("directory_target", directory_target),
        ("appending_processes_never_interleave", appending_processes),
        ("refused_values_warn_as_git_does", refused_values_warn),
        (
            "repository_config_in_def_param",
            repository_config_in_def_param,
        ),
    ];
    if cfg!(windows) {
        checks.push(("named_pipe_target", named_pipe_target));
        checks.push(("debugger_present_at_startup", debugger_present_at_startup));
    }
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let mut failed = 0;
    for (name, check) in checks {
        if !filter.is_empty() && !filter.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        match check() {
            Ok(()) => println!("test {name} ... ok"),
            Err(message) => {
                failed += 1;
                println!("test {name} ... FAILED\n{message}");
            }
        }
    }
    if failed > 0 {
        println!("portable: {failed} failed");
        return Ok(ExitCode::FAILURE);
    }
    println!("portable: all passed");
    Ok(ExitCode::SUCCESS)
}

/// The traced program, one mode per way out.
mod program {
    use std::process::ExitCode;

    use tracing_subscriber::prelude::*;
    use tracing_trace2::api;
    use tracing_trace2::core::timers::{Counter, PerThread};

    /// A per-thread counter the `return-err` mode adds to on the main thread: its
    /// `th_counter` and `counter` lines come between `exit` and `atexit`.
    static MAIN_COUNTER: Counter = Counter::new("portable", "main", PerThread::Yes);

    /// `data` lines the `*-many` modes trace right before they end: more than a
    /// background writer's worker takes in one batch while lines keep coming.
    pub(super) const MANY: usize = 2000;

    pub(super) fn main(mode: &str) -> Result<ExitCode, String> {
        if mode == "thread-start-return-err" {
            // The lifecycle starts, and its guard is dropped, on a thread that ends
            // before `main` returns `Err` on another one.
            let mode = mode.to_owned();
            std::thread::spawn(move || drop(start(&mode)))
                .join()
                .map_err(|_| "the thread panicked".to_owned())?;
            return Err("the program fails".to_owned());
        }
        let trace2 = start(mode);
        // In the `return-*` modes the guard is only dropped as `main` returns, before Rust
        // reports the value: only the exit hooks learn the code.
        Ok(match mode {
            "return-err" => {
                MAIN_COUNTER.add(3);
                return Err("the program fails".to_owned());
            }
            "background-return-err-many" => return Err("the program fails".to_owned()),
            "return-code" => ExitCode::from(4),
            "exit-code" => trace2.finish(ExitCode::from(3)),
            "process-exit" | "background-process-exit" => std::process::exit(7),
            "finish-then-process-exit" => {
                let _ = trace2.finish_code(5);
                std::process::exit(5)
            }
            "panic" => panic!("the program panics"),
            "threads" => {
                let workers: Vec<_> = ["alpha", "beta"]
                    .into_iter()
                    .map(|name| {
                        tracing_trace2::thread::spawn(name, move || {
                            tracing::info_span!("chunk", category = "portable").in_scope(|| {
                                tracing::info!(category = "portable", key = name, value = 1)
                            });
                        })
                        .expect("a thread starts")
                    })
                    .collect();
                for worker in workers {
                    worker.join().expect("the thread ends");
                }
                ExitCode::SUCCESS
            }
            _ => ExitCode::SUCCESS,
        })
    }

    /// Installs the layer (with a background writer in the `background*` modes), starts
    /// the lifecycle, and traces a region with a `data` line in it (and [`MANY`] `data`
    /// lines after it in the `*-many` modes).
    fn start(mode: &str) -> tracing_trace2::Trace2Guard {
        let mut trace2 = tracing_trace2::Trace2::from_env().with_exe_version("0.1.0");
        if mode.starts_with("background") {
            trace2 = trace2.with_background_writer(tracing_trace2::BackgroundOptions::new());
        }
        let lifecycle = trace2.lifecycle();
        tracing_subscriber::registry()
            .with(lifecycle.layer())
            .init();
        let trace2 = lifecycle.start();
        api::cmd_name("portable");
        tracing::info_span!("work", category = "portable").in_scope(|| {
            tracing::info!(category = "portable", key = "mode", value = mode);
        });
        if mode.ends_with("-many") {
            for n in 0..MANY {
                tracing::info!(category = "portable", key = "line", value = n);
            }
        }
        trace2
    }
}

/// A fresh, empty directory for one check.
fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("trace2-portable-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    dir
}

/// This binary as the traced program in `mode`, with no inherited `GIT_*` variables.
fn program(mode: &str) -> Command {
    let mut cmd = Command::new(std::env::current_exe().expect("the test binary's path"));
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("GIT_") {
            cmd.env_remove(key);
        }
    }
    cmd.env(PROGRAM_ENV, mode).env("RUST_BACKTRACE", "0");
    cmd
}

fn run(mut cmd: Command) -> Output {
    cmd.output().expect("the program runs")
}

fn ensure(condition: bool, message: impl FnOnce() -> String) -> Result<(), String> {
    if condition { Ok(()) } else { Err(message()) }
}

/// The Event lines of `text`, parsed.
fn events(text: &str) -> Result<Vec<Value>, String> {
    text.lines()
        .map(|line| serde_json::from_str(line).map_err(|e| format!("not JSON ({e}): {line:?}")))
        .collect()
}

fn event_names(lines: &[Value]) -> Vec<&str> {
    lines
        .iter()
        .map(|e| e["event"].as_str().unwrap_or("?"))
        .collect()
}

/// Runs `mode` with the Event target on a file; checks the exit status and returns the
/// events.
fn event_run(mode: &str, code: i32) -> Result<Vec<Value>, String> {
    event_run_of(program(mode), mode, code)
}

/// [`event_run`] of a prepared command (its `GIT_TRACE2_EVENT` is set here).
fn event_run_of(mut cmd: Command, mode: &str, code: i32) -> Result<Vec<Value>, String> {
    let dir = fresh_dir(mode);
    let file = dir.join("trace.event");
    cmd.env("GIT_TRACE2_EVENT", &file);
    let out = run(cmd);
    ensure(out.status.code() == Some(code), || {
        format!(
            "exit status {:?}, expected {code}; stderr: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
    })?;
    let text = std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
    let _ = std::fs::remove_dir_all(&dir);
    let lines = events(&text)?;
    windows_memory_before_exit(&text, &lines)?;
    Ok(lines)
}

/// Git for Windows writes `data_json` `windows/memory` (category `process`) right before
/// `exit`: an object of three counters, in git's key order, naming git's `the_repository`
/// (id 0 here: no repository defined); elsewhere git has no such line.
/// (Wine counts no page faults: `PageFaultCount` is 0 there.)
fn windows_memory_before_exit(text: &str, lines: &[Value]) -> Result<(), String> {
    const KEYS: [&str; 3] = ["PageFaultCount", "PeakWorkingSetSize", "PeakPagefileUsage"];
    let is_memory = |e: &Value| e["event"] == "data_json" && e["key"] == "windows/memory";
    let found: Vec<usize> = (0..lines.len()).filter(|&i| is_memory(&lines[i])).collect();
    if !cfg!(windows) {
        return ensure(found.is_empty(), || {
            "windows/memory written off Windows".to_owned()
        });
    }
    let exit = lines.iter().position(|e| e["event"] == "exit");
    let Some((&at, exit)) = found.first().zip(exit) else {
        return ensure(exit.is_none(), || {
            format!("no windows/memory before exit: {lines:?}")
        });
    };
    let memory = &lines[at];
    let value = memory["value"].as_object();
    let counters_ok = value.is_some_and(|v| {
        v.len() == KEYS.len() && KEYS.iter().all(|k| v.get(*k).is_some_and(Value::is_u64))
    }) && memory["value"]["PeakWorkingSetSize"].as_u64() > Some(0);
    // The key order is only in the text (a parsed object sorts its keys).
    let raw = text.lines().nth(at).unwrap_or("");
    let order: Vec<Option<usize>> = KEYS.iter().map(|k| raw.find(&format!("\"{k}\""))).collect();
    ensure(
        found.len() == 1
            && at + 1 == exit
            && memory["category"] == "process"
            && memory["repo"] == 0
            && counters_ok
            && order.windows(2).all(|w| w[0].is_some() && w[0] < w[1]),
        || format!("windows/memory lines {found:?}, exit at {exit}: {raw}"),
    )
}

/// `version`, `start` first, `exit` with `code`, then `atexit` last, once each.
fn ends_like_git(lines: &[Value], code: i64) -> Result<(), String> {
    let names = event_names(lines);
    ensure(
        names.first() == Some(&"version") && names.get(1) == Some(&"start"),
        || format!("does not begin with version, start: {names:?}"),
    )?;
    for once in ["version", "start", "exit", "atexit"] {
        let count = names.iter().filter(|n| **n == once).count();
        ensure(count == 1, || format!("{once} {count} times: {names:?}"))?;
    }
    ensure(names.last() == Some(&"atexit"), || {
        format!("atexit is not last: {names:?}")
    })?;
    let exit = lines
        .iter()
        .find(|e| e["event"] == "exit")
        .expect("counted above");
    ensure(exit["code"] == code, || {
        format!("exit line {exit}, expected code {code}")
    })?;
    let atexit = lines.last().expect("atexit is last");
    ensure(atexit["code"] == code, || {
        format!("atexit line {atexit}, expected code {code}")
    })?;
    let sid = lines[0]["sid"].as_str().unwrap_or("");
    ensure(is_sid(sid), || format!("not a session id: {sid:?}"))?;
    ensure(lines.iter().all(|e| e["sid"] == sid), || {
        "one session id".to_owned()
    })
}

/// `YYYYMMDDTHHMMSS.ffffffZ-H<8 hex>-P<8 hex>`, as git makes one.
fn is_sid(sid: &str) -> bool {
    let b = sid.as_bytes();
    b.len() == 43
        && b[8] == b'T'
        && b[15] == b'.'
        && &b[22..25] == b"Z-H"
        && &b[33..35] == b"-P"
        && b[25..33].iter().chain(&b[35..]).all(u8::is_ascii_hexdigit)
}

fn return_from_main() -> Result<(), String> {
    let lines = event_run("return", 0)?;
    ends_like_git(&lines, 0)?;
    let names = event_names(&lines);
    ensure(
        names.contains(&"region_enter") && names.contains(&"data"),
        || format!("no region or data: {names:?}"),
    )?;
    // The parent is this test binary: Linux's short name (`comm`), Windows' file name.
    if cfg!(any(target_os = "linux", windows)) {
        let ancestry = lines.iter().find(|e| e["event"] == "cmd_ancestry");
        let parent = ancestry
            .and_then(|e| e["ancestry"][0].as_str())
            .unwrap_or("");
        ensure(parent.starts_with("portable"), || {
            format!("cmd_ancestry: {ancestry:?}")
        })?;
    }
    // Git for Windows' `windows/debugger_present` only when a debugger is attached.
    ensure(
        !lines.iter().any(|e| e["key"] == "windows/debugger_present"),
        || "windows/debugger_present without a debugger".to_owned(),
    )?;
    // Git for Windows writes the same names as `data_json` `windows/ancestry` (category
    // `process`) just before `cmd_ancestry`; elsewhere git has no such line.
    let at = |pred: &dyn Fn(&Value) -> bool| lines.iter().position(pred);
    let windows_ancestry = at(&|e| e["event"] == "data_json" && e["key"] == "windows/ancestry");
    if cfg!(windows) {
        let cmd_ancestry = at(&|e| e["event"] == "cmd_ancestry");
        let found = windows_ancestry.zip(cmd_ancestry);
        ensure(
            found.is_some_and(|(data, cmd)| {
                data + 1 == cmd
                    && lines[data]["category"] == "process"
                    && lines[data]["value"] == lines[cmd]["ancestry"]
            }),
            || {
                format!(
                    "windows/ancestry {windows_ancestry:?} before cmd_ancestry {cmd_ancestry:?}: {lines:?}"
                )
            },
        )?;
    } else {
        ensure(windows_ancestry.is_none(), || {
            "windows/ancestry written off Windows".to_owned()
        })?;
    }
    // Git's Event timestamps: `YYYY-MM-DDTHH:MM:SS.ffffffZ`.
    let time = lines[0]["time"].as_str().unwrap_or("");
    ensure(
        time.len() == 27 && time.ends_with('Z') && time.as_bytes()[10] == b'T',
        || format!("time {time:?}"),
    )
}

/// The code a dropped guard's trace carries for a `main` that returns `code` (`Err`: 1):
/// the exit hooks learn it on Linux with glibc (`on_exit`) and on Windows
/// (`ExitProcess`'s callbacks); elsewhere the guard writes 0 when it is dropped.
fn traced_code_of_dropped_guard(code: i64) -> i64 {
    if cfg!(any(all(target_os = "linux", target_env = "gnu"), windows)) {
        code
    } else {
        0
    }
}

/// `fn main() -> Result<..>` returning `Err` with the guard only dropped (no `finish`):
/// Rust prints the error and exits with 1, and the trace says 1.
fn return_err_guard_dropped() -> Result<(), String> {
    let lines = event_run("return-err", 1)?;
    ends_like_git(&lines, traced_code_of_dropped_guard(1))?;
    // The main thread's counter, once per thread and once for the process, between
    // `exit` and `atexit` (the guard hands the thread's values over when it is dropped).
    let names = event_names(&lines);
    let exit = names.iter().position(|n| *n == "exit").expect("checked");
    let totals: Vec<(&str, &str, i64)> = lines[exit + 1..]
        .iter()
        .filter(|e| e["category"] == "portable")
        .map(|e| {
            let event = e["event"].as_str().unwrap_or("?");
            (
                event,
                e["thread"].as_str().unwrap_or("?"),
                e["count"].as_i64().unwrap_or(-1),
            )
        })
        .collect();
    ensure(
        totals == [("th_counter", "main", 3), ("counter", "main", 3)],
        || format!("totals after exit: {totals:?}"),
    )
}

/// The same with a background writer, and many lines traced just before the return:
/// every one of them is written, before `exit` (`ExitProcess` on Windows ends the
/// worker, so it must have written them all by then).
fn return_err_guard_dropped_in_background() -> Result<(), String> {
    let lines = event_run("background-return-err-many", 1)?;
    ends_like_git(&lines, traced_code_of_dropped_guard(1))?;
    let exit = lines
        .iter()
        .position(|e| e["event"] == "exit")
        .expect("checked above");
    let numbers: Vec<u64> = lines[..exit]
        .iter()
        .filter(|e| e["event"] == "data" && e["key"] == "line")
        .filter_map(|e| e["value"].as_str().and_then(|v| v.parse().ok()))
        .collect();
    let expected: Vec<u64> = (0..program::MANY as u64).collect();
    ensure(numbers == expected, || {
        let first_wrong = (0..).zip(&numbers).find(|(n, got)| *n != **got);
        format!(
            "{} of {} data lines before exit; first out of place: {first_wrong:?}",
            numbers.len(),
            program::MANY,
        )
    })
}

/// `main` returning an `ExitCode` with the guard dropped: the trace carries that code.
fn return_code_guard_dropped() -> Result<(), String> {
    let lines = event_run("return-code", 4)?;
    ends_like_git(&lines, traced_code_of_dropped_guard(4))
}

/// The lifecycle started, and its guard dropped, on a thread that ends before `main`
/// returns `Err`: on Windows the process then ends on a thread whose end
/// `ExitProcess`'s callbacks may not see (Wine runs only the starting thread's), so the
/// exit hook writes code 0 at once rather than risk losing the lines; glibc's `on_exit`
/// knows the code on any thread.
fn return_err_guard_dropped_on_a_thread() -> Result<(), String> {
    let lines = event_run("thread-start-return-err", 1)?;
    let expected = if cfg!(all(target_os = "linux", target_env = "gnu")) {
        1
    } else {
        0
    };
    // The starting thread's `thread_start` comes between `version` and `start`.
    let names = event_names(&lines);
    ensure(
        names.starts_with(&["version", "thread_start", "start"]),
        || format!("does not begin with version, thread_start, start: {names:?}"),
    )?;
    let rest: Vec<Value> = (lines.iter().enumerate())
        .filter(|(i, _)| *i != 1)
        .map(|(_, e)| e.clone())
        .collect();
    ends_like_git(&rest, expected)
}

fn finish_with_an_exit_code() -> Result<(), String> {
    ends_like_git(&event_run("exit-code", 3)?, 3)
}

/// `std::process::exit` without the guard: Linux with glibc learns the code from its
/// exit handler; other Unix systems write `exit` with code 0 from `atexit` (see the
/// lifecycle's documentation). On Windows it calls `ExitProcess`, which runs no `atexit`
/// handler: the lifecycle's `ExitProcess` callbacks write `exit` and `atexit` with the
/// code, as git writes them for `exit(7)`.
fn std_process_exit() -> Result<(), String> {
    let lines = event_run("process-exit", 7)?;
    let expected = if cfg!(any(all(target_os = "linux", target_env = "gnu"), windows)) {
        7
    } else {
        0
    };
    ends_like_git(&lines, expected)
}

/// `exit` and `atexit` written by the guard, then `std::process::exit`: the exit hooks
/// (Windows' `ExitProcess` callbacks among them) write nothing more.
fn finish_then_std_process_exit() -> Result<(), String> {
    ends_like_git(&event_run("finish-then-process-exit", 5)?, 5)
}

/// `std::process::exit` with the lines written by a background worker: on Windows
/// `ExitProcess` ends the worker before the callbacks run; the lines it had not taken
/// yet and `exit`/`atexit` are written on the exiting thread (no hang waiting for it).
fn std_process_exit_in_background() -> Result<(), String> {
    let lines = event_run("background-process-exit", 7)?;
    let expected = if cfg!(any(all(target_os = "linux", target_env = "gnu"), windows)) {
        7
    } else {
        0
    };
    ends_like_git(&lines, expected)
}

/// A panic that unwinds out of `main`: `error` with the message, then `exit` code 101.
fn panic_out_of_main() -> Result<(), String> {
    let lines = event_run("panic", 101)?;
    ends_like_git(&lines, 101)?;
    let error = lines.iter().find(|e| e["event"] == "error");
    ensure(
        error.is_some_and(|e| {
            e["msg"]
                .as_str()
                .is_some_and(|m| m.contains("the program panics"))
        }),
        || format!("no error line: {:?}", event_names(&lines)),
    )
}

/// Two named threads: `thread_start`/`thread_exit` under git's `th<NN>:<name>` names.
fn named_threads() -> Result<(), String> {
    let lines = event_run("threads", 0)?;
    ends_like_git(&lines, 0)?;
    let threads: Vec<&str> = lines
        .iter()
        .filter(|e| e["event"] == "thread_start")
        .filter_map(|e| e["thread"].as_str())
        .collect();
    let mut names: Vec<&str> = threads
        .iter()
        .filter_map(|t| t.split_once(':'))
        .map(|(_, n)| n)
        .collect();
    names.sort_unstable();
    ensure(names == ["alpha", "beta"], || {
        format!("thread_start lines: {threads:?}")
    })?;
    ensure(threads.iter().all(|t| t.starts_with("th")), || {
        format!("{threads:?}")
    })?;
    let exits = lines.iter().filter(|e| e["event"] == "thread_exit").count();
    ensure(exits == 2, || format!("{exits} thread_exit lines"))
}

/// `GIT_TRACE2=1`: the Normal stream on stderr, nothing else there.
fn normal_to_stderr() -> Result<(), String> {
    let mut cmd = program("return");
    cmd.env("GIT_TRACE2", "1");
    let out = run(cmd);
    let text = String::from_utf8_lossy(&out.stderr);
    ensure(out.status.success(), || format!("{:?}: {text}", out.status))?;
    let firsts: Vec<&str> = text
        .lines()
        .map(|l| l.split_whitespace().nth(2).unwrap_or(""))
        .collect();
    ensure(
        firsts.first() == Some(&"version") && firsts.last() == Some(&"atexit"),
        || format!("stderr: {text}"),
    )?;
    ensure(!text.contains('\r'), || {
        "CR in the Normal stream".to_owned()
    })
}

/// A directory: one new file per process, named by its session id.
fn directory_target() -> Result<(), String> {
    let dir = fresh_dir("directory");
    for _ in 0..2 {
        let mut cmd = program("return");
        cmd.env("GIT_TRACE2_EVENT", &dir);
        ensure(run(cmd).status.success(), || {
            "the program failed".to_owned()
        })?;
    }
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .map_err(|e| e.to_string())?
        .map(|e| {
            e.expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    ensure(names.len() == 2 && names.iter().all(|n| is_sid(n)), || {
        format!("files: {names:?}")
    })?;
    for name in &names {
        let lines = events(&std::fs::read_to_string(dir.join(name)).map_err(|e| e.to_string())?)?;
        ensure(lines[0]["sid"] == name.as_str(), || {
            format!("{name}: {}", lines[0])
        })?;
        ends_like_git(&lines, 0)?;
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// Four processes appending to one file at once: every line whole.
///
/// Under wine the processes run one after another: wine 8 does not make an append from
/// one process atomic against another's (under load, a line was seen written over the
/// start of another, which a real append never does), so running them at once there
/// would test wine. Real Windows appends a `FILE_APPEND_DATA` write whole.
fn appending_processes() -> Result<(), String> {
    let dir = fresh_dir("append");
    let file = dir.join("shared.event");
    let at_once = !under_wine();
    let start = || {
        let mut cmd = program("threads");
        cmd.env("GIT_TRACE2_EVENT", &file)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        cmd.spawn().expect("the program starts")
    };
    let wait = |mut child: std::process::Child| {
        ensure(child.wait().is_ok_and(|s| s.success()), || {
            "a program failed".to_owned()
        })
    };
    if at_once {
        let children: Vec<_> = (0..4).map(|_| start()).collect();
        for child in children {
            wait(child)?;
        }
    } else {
        for _ in 0..4 {
            wait(start())?;
        }
    }
    let lines = events(&std::fs::read_to_string(&file).map_err(|e| e.to_string())?)?;
    let mut sids: Vec<&str> = lines.iter().filter_map(|e| e["sid"].as_str()).collect();
    sids.sort_unstable();
    sids.dedup();
    ensure(sids.len() == 4, || format!("{} sessions", sids.len()))?;
    for sid in sids {
        let own: Vec<Value> = lines.iter().filter(|e| e["sid"] == sid).cloned().collect();
        ends_like_git(&own, 0)?;
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// Whether this Windows program runs under wine (its ntdll exports `wine_get_version`).
#[cfg(windows)]
fn under_wine() -> bool {
    use std::ffi::c_void;
    #[link(name = "kernel32")]
    unsafe extern "system" {
        fn GetModuleHandleA(name: *const u8) -> *mut c_void;
        fn GetProcAddress(module: *mut c_void, name: *const u8) -> *mut c_void;
    }
    // SAFETY: both names are NUL-terminated; ntdll is loaded in every Windows process
    // and the module handle is only passed back to `GetProcAddress`.
    unsafe {
        let ntdll = GetModuleHandleA(c"ntdll.dll".as_ptr().cast());
        !ntdll.is_null() && !GetProcAddress(ntdll, c"wine_get_version".as_ptr().cast()).is_null()
    }
}

/// Not Windows, so not wine.
#[cfg(not(windows))]
fn under_wine() -> bool {
    false
}

/// `def_param` lists the config of the repository around the current directory (scope
/// `local`), found by walking up from a subdirectory as git does; a `GIT_CEILING_DIRECTORIES`
/// entry (`;`-separated on Windows, `:` elsewhere) at the repository stops the walk.
fn repository_config_in_def_param() -> Result<(), String> {
    let repo = fresh_dir("repo-config");
    let git_dir = repo.join(".git");
    for dir in ["objects", "refs"] {
        std::fs::create_dir_all(git_dir.join(dir)).map_err(|e| e.to_string())?;
    }
    std::fs::write(git_dir.join("HEAD"), "ref: refs/heads/main\n").map_err(|e| e.to_string())?;
    std::fs::write(
        git_dir.join("config"),
        "[core]\n\trepositoryformatversion = 0\n[portable]\n\tkey = from-the-repository\n",
    )
    .map_err(|e| e.to_string())?;
    let sub = repo.join("a").join("b");
    std::fs::create_dir_all(&sub).map_err(|e| e.to_string())?;
    let separator = if cfg!(windows) { ";" } else { ":" };
    for ceiling in [None, Some(repo.clone())] {
        let mut cmd = program("return");
        cmd.current_dir(&sub)
            .env("GIT_TRACE2_CONFIG_PARAMS", "portable.*")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", repo.join("no-such-global"));
        if let Some(ceiling) = &ceiling {
            // A list as users write it: an entry that matches nothing, then the repository.
            let list = format!(
                "{}{separator}{}",
                std::env::temp_dir().join("elsewhere").display(),
                ceiling.display()
            );
            cmd.env("GIT_CEILING_DIRECTORIES", list);
        }
        let lines = event_run_of(cmd, "repo-config-run", 0)?;
        let params: Vec<&Value> = lines.iter().filter(|e| e["event"] == "def_param").collect();
        let found = params.iter().any(|e| {
            e["scope"] == "local"
                && e["param"] == "portable.key"
                && e["value"] == "from-the-repository"
        });
        ensure(found == ceiling.is_none(), || {
            format!("ceiling {ceiling:?}: def_param lines {params:?}")
        })?;
    }
    let _ = std::fs::remove_dir_all(&repo);
    Ok(())
}

/// Values the platform's git refuses: the warning git prints, and the program runs on.
/// Git for Windows is built without Unix sockets, so `af_unix:` is an unknown value there.
fn refused_values_warn() -> Result<(), String> {
    let mut values = vec!["on", "rel/path"];
    if cfg!(windows) {
        values.push("af_unix:/tmp/collector.sock");
        values.push("af_unix:stream:/tmp/collector.sock");
    }
    for value in values {
        let mut cmd = program("return");
        cmd.env("GIT_TRACE2_EVENT", value);
        let out = run(cmd);
        let expected =
            format!("warning: trace2: unknown value for 'GIT_TRACE2_EVENT': '{value}'\n");
        ensure(
            out.status.success() && String::from_utf8_lossy(&out.stderr) == expected,
            || {
                format!(
                    "{value}: {:?} {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr)
                )
            },
        )?;
    }
    Ok(())
}

/// A named pipe, as trace2receiver listens on one: both spellings Git for Windows takes.
#[cfg(windows)]
fn named_pipe_target() -> Result<(), String> {
    for spelling in [r"\\.\pipe\{name}", "//./pipe/{name}"] {
        let name = format!("trace2-portable-{}-{}", std::process::id(), spelling.len());
        let server = pipe::Server::create(&name)?;
        let mut cmd = program("threads");
        cmd.env("GIT_TRACE2_EVENT", spelling.replace("{name}", &name))
            .env("GIT_TRACE2_DST_DEBUG", "1")
            .stderr(std::process::Stdio::piped());
        let child = cmd.spawn().map_err(|e| e.to_string())?;
        let received = server.read_all()?;
        let out = child.wait_with_output().map_err(|e| e.to_string())?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        ensure(out.status.success() && stderr.is_empty(), || {
            format!("{spelling}: {:?} {stderr}", out.status)
        })?;
        let lines = events(&String::from_utf8_lossy(&received))?;
        ends_like_git(&lines, 0).map_err(|e| format!("{spelling}: {e}"))?;
    }
    Ok(())
}

#[cfg(not(windows))]
fn named_pipe_target() -> Result<(), String> {
    Ok(())
}

/// Started under a debugger (this test, with the Windows debugging API), the program
/// writes Git for Windows' `data` `windows/debugger_present` (category `process`, value
/// `1`) right after `start`, and ends as usual.
#[cfg(windows)]
fn debugger_present_at_startup() -> Result<(), String> {
    let dir = fresh_dir("debugger");
    let file = dir.join("trace.event");
    let mut cmd = program("return");
    cmd.env("GIT_TRACE2_EVENT", &file)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let status = debugger::run_debugged(cmd)?;
    ensure(status.success(), || format!("exit status {status:?}"))?;
    let text = std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
    let _ = std::fs::remove_dir_all(&dir);
    let lines = events(&text)?;
    ends_like_git(&lines, 0)?;
    let found: Vec<&Value> = lines
        .iter()
        .filter(|e| e["key"] == "windows/debugger_present")
        .collect();
    ensure(
        found.len() == 1
            && lines[2]["key"] == "windows/debugger_present"
            && lines[2]["event"] == "data"
            && lines[2]["category"] == "process"
            && lines[2]["repo"] == 0
            && lines[2]["value"] == "1",
        || format!("{found:?} in {:?}", event_names(&lines)),
    )
}

#[cfg(not(windows))]
fn debugger_present_at_startup() -> Result<(), String> {
    Ok(())
}

/// A minimal debugger: starts a program under the Windows debugging API and lets it
/// run to its end.
#[cfg(windows)]
mod debugger {
    use std::ffi::c_void;
    use std::os::windows::process::CommandExt;
    use std::process::{Command, ExitStatus};

    const DEBUG_ONLY_THIS_PROCESS: u32 = 0x2;
    const EXCEPTION_DEBUG_EVENT: u32 = 1;
    const CREATE_PROCESS_DEBUG_EVENT: u32 = 3;
    const EXIT_PROCESS_DEBUG_EVENT: u32 = 5;
    const LOAD_DLL_DEBUG_EVENT: u32 = 6;
    const EXCEPTION_BREAKPOINT: u32 = 0x8000_0003;
    const DBG_CONTINUE: u32 = 0x0001_0002;
    const DBG_EXCEPTION_NOT_HANDLED: u32 = 0x8001_0001;
    const TIMEOUT_MS: u32 = 60_000;

    /// `DEBUG_EVENT` on 64-bit Windows: three u32, then an 8-aligned union of 160 bytes
    /// whose first field is a file handle (process, DLL) or an exception code.
    #[repr(C)]
    struct DebugEvent {
        code: u32,
        process_id: u32,
        thread_id: u32,
        info: [u64; 20],
    }

    #[link(name = "kernel32")]
    unsafe extern "system" {
        fn WaitForDebugEvent(event: *mut DebugEvent, millis: u32) -> i32;
        fn ContinueDebugEvent(process_id: u32, thread_id: u32, status: u32) -> i32;
        fn CloseHandle(handle: *mut c_void) -> i32;
    }

    /// Runs `cmd` as a debuggee of this thread until it exits.
    pub(super) fn run_debugged(mut cmd: Command) -> Result<ExitStatus, String> {
        // The thread that starts the process is its debugger.
        let mut child = cmd
            .creation_flags(DEBUG_ONLY_THIS_PROCESS)
            .spawn()
            .map_err(|e| e.to_string())?;
        loop {
            let mut event = DebugEvent {
                code: 0,
                process_id: 0,
                thread_id: 0,
                info: [0; 20],
            };
            // SAFETY: `event` is a writable `DEBUG_EVENT`.
            if unsafe { WaitForDebugEvent(&mut event, TIMEOUT_MS) } == 0 {
                let _ = child.kill();
                return Err("no debug event within a minute".to_owned());
            }
            let mut status = DBG_CONTINUE;
            match event.code {
                CREATE_PROCESS_DEBUG_EVENT | LOAD_DLL_DEBUG_EVENT if event.info[0] != 0 => {
                    // SAFETY: the event hands this debugger an open file handle to close.
                    unsafe { CloseHandle(event.info[0] as *mut c_void) };
                }
                // The loader's first breakpoint is the debugger's to take; every other
                // exception goes back to the program.
                EXCEPTION_DEBUG_EVENT if event.info[0] as u32 != EXCEPTION_BREAKPOINT => {
                    status = DBG_EXCEPTION_NOT_HANDLED;
                }
                _ => {}
            }
            // SAFETY: continues the thread that reported the event.
            unsafe { ContinueDebugEvent(event.process_id, event.thread_id, status) };
            if event.code == EXIT_PROCESS_DEBUG_EVENT {
                break;
            }
        }
        child.wait().map_err(|e| e.to_string())
    }
}

/// The listening end of a named pipe, made with the Windows API.
#[cfg(windows)]
mod pipe {
    use std::ffi::c_void;
    use std::fs::File;
    use std::io::Read;
    use std::os::windows::io::FromRawHandle;

    const PIPE_ACCESS_INBOUND: u32 = 0x1;
    const PIPE_TYPE_BYTE: u32 = 0;
    const INVALID_HANDLE_VALUE: isize = -1;
    const ERROR_PIPE_CONNECTED: i32 = 535;

    #[link(name = "kernel32")]
    unsafe extern "system" {
        fn CreateNamedPipeW(
            name: *const u16,
            open_mode: u32,
            pipe_mode: u32,
            max_instances: u32,
            out_buffer: u32,
            in_buffer: u32,
            default_timeout: u32,
            security: *mut c_void,
        ) -> *mut c_void;
        fn ConnectNamedPipe(pipe: *mut c_void, overlapped: *mut c_void) -> i32;
    }

    pub(super) struct Server {
        pipe: File,
    }

    impl Server {
        pub(super) fn create(name: &str) -> Result<Server, String> {
            let wide: Vec<u16> = format!(r"\\.\pipe\{name}")
                .encode_utf16()
                .chain([0])
                .collect();
            // SAFETY: `wide` is a NUL-terminated name; the other arguments are plain values.
            let handle = unsafe {
                CreateNamedPipeW(
                    wide.as_ptr(),
                    PIPE_ACCESS_INBOUND,
                    PIPE_TYPE_BYTE,
                    1,
                    65536,
                    65536,
                    0,
                    std::ptr::null_mut(),
                )
            };
            if handle as isize == INVALID_HANDLE_VALUE {
                return Err(format!(
                    "CreateNamedPipeW: {}",
                    std::io::Error::last_os_error()
                ));
            }
            // SAFETY: a fresh handle that nothing else owns.
            Ok(Server {
                pipe: unsafe { File::from_raw_handle(handle) },
            })
        }

        /// Waits for the client, then reads until it closes its end.
        pub(super) fn read_all(mut self) -> Result<Vec<u8>, String> {
            use std::os::windows::io::AsRawHandle;
            // SAFETY: a valid pipe handle, no overlapped I/O.
            let connected =
                unsafe { ConnectNamedPipe(self.pipe.as_raw_handle(), std::ptr::null_mut()) };
            if connected == 0 {
                let err = std::io::Error::last_os_error();
                if err.raw_os_error() != Some(ERROR_PIPE_CONNECTED) {
                    return Err(format!("ConnectNamedPipe: {err}"));
                }
            }
            let mut bytes = Vec::new();
            match self.pipe.read_to_end(&mut bytes) {
                Ok(_) => Ok(bytes),
                // The client closing its end reads as a broken pipe.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(bytes),
                Err(e) => Err(format!("reading the pipe: {e}")),
            }
        }
    }
}
