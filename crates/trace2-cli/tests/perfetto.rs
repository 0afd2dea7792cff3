//! `trace2 export --format perfetto` checked against Perfetto's own schema: `tests/perfetto/
//! check.py` parses every packet with the `perfetto_trace_pb2` module of the `perfetto` PyPI
//! package (installed by .ci/run) and checks tracks, nesting, flows and interning. The Perfetto
//! UI cannot be loaded here: this check stands for the viewer.
//!
//! Without python3 or the package the tests say so and pass, except under CI=true, where they
//! fail with that message.

mod common;
#[path = "common/synthetic.rs"]
mod synthetic;

use std::fs;
use std::io::BufWriter;
use std::path::Path;
use std::process::Command;

use common::{run_git, run_trace2, stderr};
use serde_json::Value;

const CHECK: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/perfetto/check.py");

/// Runs the checker on `trace` (with `--break WHAT` first when given): its counts, or `None`
/// when python3 or the perfetto package is missing outside CI.
fn check(trace: &Path, broken: Option<&str>) -> Option<Result<Value, String>> {
    let mut python = Command::new("python3");
    python.arg(CHECK);
    if let Some(what) = broken {
        python.args(["--break", what]);
    }
    let missing = |why: String| {
        let why = format!(
            "the Perfetto check needs python3 and `pip install perfetto` (see .ci/run): {why}"
        );
        if std::env::var("CI").is_ok_and(|ci| ci == "true") {
            panic!("{why}");
        }
        eprintln!("skipped: {why}");
        None
    };
    let out = match python.arg(trace).output() {
        Ok(out) => out,
        Err(e) => return missing(format!("python3: {e}")),
    };
    match out.status.code() {
        Some(0) => Some(Ok(serde_json::from_slice(&out.stdout).expect("JSON counts"))),
        Some(3) => missing(stderr(&out)),
        _ => Some(Err(stderr(&out))),
    }
}

fn export(format: &str, input: &Path, output: &Path) {
    let out = run_trace2(&[
        "export",
        "--format",
        format,
        "-o",
        output.to_str().unwrap(),
        input.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

fn names(counts: &Value, key: &str) -> Vec<String> {
    counts[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect()
}

/// Processes in a summary, and how many have their parent in the input.
fn processes_and_children(trace: &Path) -> (usize, usize) {
    let out = run_trace2(&["summary", "--json", trace.to_str().unwrap()]);
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    let processes = summary["processes"].as_array().unwrap();
    let children = processes
        .iter()
        .filter(|p| !p["parent_sid"].is_null())
        .count();
    (processes.len(), children)
}

#[test]
fn a_real_git_trace_exports_tracks_slices_and_flows() {
    let dir = tempfile::tempdir().unwrap();
    let (home, repo) = (dir.path().join("home"), dir.path().join("repo"));
    fs::create_dir_all(&home).unwrap();
    fs::create_dir_all(&repo).unwrap();
    let trace = dir.path().join("trace.event");
    let t = Some(trace.as_path());
    run_git(&repo, &home, None, &["init", "-q", "-b", "main"]);
    for i in 0..20 {
        fs::write(repo.join(format!("f{i}")), format!("{i}\n").repeat(40)).unwrap();
    }
    run_git(&repo, &home, t, &["add", "."]);
    run_git(&repo, &home, t, &["commit", "-q", "-m", "one"]);
    let url = format!("file://{}", repo.display());
    run_git(dir.path(), &home, t, &["clone", "-q", &url, "clone"]);
    run_git(&dir.path().join("clone"), &home, t, &["gc", "-q"]);

    let pftrace = dir.path().join("trace.pftrace");
    export("perfetto", &trace, &pftrace);
    let Some(counts) = check(&pftrace, None) else {
        return;
    };
    let counts = counts.unwrap_or_else(|why| panic!("{why}"));
    let (processes, children) = processes_and_children(&trace);
    assert!(children >= 3, "clone and gc start git children");
    assert_eq!(counts["processes"], processes);
    assert_eq!(counts["flows"], children, "{counts}");
    let process_names = names(&counts, "process_names");
    for name in ["git:clone", "git:gc", "git:commit", "git:pack-objects"] {
        assert!(process_names.iter().any(|n| n == name), "{process_names:?}");
    }
    let slices = names(&counts, "slice_names");
    assert!(
        slices.iter().any(|n| n == "index:do_write_index"),
        "{slices:?}"
    );
    assert!(counts["max_depth"].as_u64().unwrap() >= 2, "{counts}");
    assert_eq!(counts["clears"], 1);

    // Each damage the check looks for makes it fail.
    for what in ["interning", "nesting", "flow"] {
        let broken = check(&pftrace, Some(what)).unwrap();
        assert!(broken.is_err(), "--break {what} passed: {broken:?}");
    }

    let json = dir.path().join("trace.json");
    export("chrome", &trace, &json);
    let (protobuf, chrome) = (size(&pftrace), size(&json));
    eprintln!("git session: perfetto {protobuf} bytes, chrome {chrome} bytes");
    assert!(protobuf < chrome);
}

fn size(path: &Path) -> u64 {
    fs::metadata(path).unwrap().len()
}

/// A tool that runs git with a plain `Command` (no `child_start`), threads with counters and
/// timers, data, nested regions, and a region never left.
fn tool_trace() -> String {
    const TOOL: &str = "20260101T000000.000000Z-H0a7c9cdf-P00000010";
    let git = format!("{TOOL}/20260101T000000.002000Z-H0a7c9cdf-P00000020");
    let line = |sid: &str, thread: &str, us: u32, rest: &str| {
        format!(
            r#"{{"event":{rest},"sid":"{sid}","thread":"{thread}","time":"2026-01-01T00:00:00.{us:06}Z"}}"#
        )
    };
    let region =
        |sid: &str, thread: &str, us: u32, leave: Option<f64>, nesting: u32, label: &str| {
            let kind = match leave {
                Some(t_rel) => format!(r#""region_leave","t_rel":{t_rel}"#),
                None => r#""region_enter""#.to_owned(),
            };
            line(
                sid,
                thread,
                us,
                &format!(r#"{kind},"nesting":{nesting},"category":"tool","label":"{label}""#),
            )
        };
    [
        line(TOOL, "main", 10, r#""version","evt":"4","exe":"0.30""#),
        line(TOOL, "main", 20, r#""start","t_abs":0.00002,"argv":["jj","log"]"#),
        line(TOOL, "main", 30, r#""cmd_name","name":"log","hierarchy":"log""#),
        region(TOOL, "main", 100, None, 1, "outer"),
        region(TOOL, "main", 200, None, 2, "inner"),
        line(
            TOOL,
            "main",
            250,
            r#""data_json","nesting":2,"category":"tool","key":"stats","value":{"revs":[1,2],"ok":true}"#,
        ),
        line(&git, "main", 2_010, r#""version","evt":"4","exe":"2.47.3""#),
        line(&git, "main", 2_020, r#""start","t_abs":0.00001,"argv":["git","rev-parse"]"#),
        line(&git, "main", 2_030, r#""cmd_name","name":"rev-parse","hierarchy":"rev-parse""#),
        line(&git, "main", 2_500, r#""atexit","t_abs":0.0005,"code":0"#),
        region(TOOL, "main", 3_000, Some(0.0028), 2, "inner"),
        line(TOOL, "th01:worker", 3_100, r#""thread_start""#),
        region(TOOL, "th01:worker", 3_200, None, 1, "work"),
        region(TOOL, "th01:worker", 3_900, Some(0.0007), 1, "work"),
        line(
            TOOL,
            "th01:worker",
            3_950,
            r#""th_counter","category":"tool","name":"items","count":7"#,
        ),
        line(TOOL, "th01:worker", 4_000, r#""thread_exit","t_rel":0.0009"#),
        region(TOOL, "main", 5_000, Some(0.0049), 1, "outer"),
        region(TOOL, "main", 5_100, None, 1, "never left"),
        line(
            TOOL,
            "main",
            6_000,
            r#""timer","category":"tool","name":"load","intervals":2,"t_total":0.0004,"t_min":0.0001,"t_max":0.0003"#,
        ),
        line(
            TOOL,
            "main",
            6_100,
            r#""counter","category":"tool","name":"revs","count":2"#,
        ),
        line(TOOL, "main", 6_200, r#""printf","t_abs":0.0062,"msg":"stopped""#),
    ]
    .join("\n")
        + "\n"
}

#[test]
fn a_tool_that_runs_git_without_child_start_is_connected_by_sid() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("tool.event");
    fs::write(&trace, tool_trace()).unwrap();
    let pftrace = dir.path().join("tool.pftrace");
    export("perfetto", &trace, &pftrace);
    let Some(counts) = check(&pftrace, None) else {
        return;
    };
    let counts = counts.unwrap_or_else(|why| panic!("{why}"));
    assert_eq!(counts["processes"], 2);
    assert_eq!(counts["flows"], 1, "{counts}");
    assert_eq!(names(&counts, "process_names"), ["git:rev-parse", "jj:log"]);
    assert_eq!(
        names(&counts, "thread_names"),
        ["main", "main", "th01:worker"]
    );
    // items (th01:worker), load timer, revs.
    assert_eq!(counts["counter_tracks"], 3, "{counts}");
    assert_eq!(counts["max_depth"], 2, "{counts}");
    let slices = names(&counts, "slice_names");
    for name in [
        "tool:outer",
        "tool:inner",
        "tool:work",
        "tool:never left",
        "th01:worker",
    ] {
        assert!(slices.iter().any(|n| n == name), "{slices:?}");
    }
}

#[test]
fn interned_tables_stay_bounded_on_a_large_trace() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("large.event");
    {
        let mut out = BufWriter::new(fs::File::create(&trace).unwrap());
        synthetic::write_trace(&mut out, 60_000, 4).unwrap();
        // Distinct messages: more names than the interning tables hold at once.
        let sid = "20260101T000000.999999Z-H0a7c9cdf-P0000ffff";
        use std::io::Write;
        for i in 0..12_000 {
            writeln!(
                out,
                r#"{{"event":"printf","sid":"{sid}","thread":"main","time":"2026-01-01T00:10:00.{i:06}Z","t_abs":0.1,"msg":"message {i}"}}"#
            )
            .unwrap();
        }
    }
    let pftrace = dir.path().join("large.pftrace");
    export("perfetto", &trace, &pftrace);
    let Some(counts) = check(&pftrace, None) else {
        return;
    };
    let counts = counts.unwrap_or_else(|why| panic!("{why}"));
    assert!(counts["clears"].as_u64().unwrap() >= 2, "{counts}");
    assert_eq!(counts["processes"], 5);
    let json = dir.path().join("large.json");
    export("chrome", &trace, &json);
    eprintln!(
        "synthetic trace ({} bytes): perfetto {} bytes, chrome {} bytes",
        size(&trace),
        size(&pftrace),
        size(&json)
    );
}

/// Wall time now as Trace2 writes it: `2026-01-01T00:00:00.000000Z`.
fn trace2_time_now() -> String {
    let now = time::OffsetDateTime::now_utc();
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z",
        now.year(),
        u8::from(now.month()),
        now.day(),
        now.hour(),
        now.minute(),
        now.second(),
        now.microsecond()
    )
}

/// A parent shaped like the `vcs` example (jj): it names its command after `start`, runs the
/// real `git init` and `git fetch` through a plain `Command` (no `child_start`; each git names
/// it in its SID through `GIT_TRACE2_PARENT_SID`) and exits 1. Returns the trace.
fn vcs_like_trace(dir: &Path) -> std::path::PathBuf {
    use std::io::Write;
    const PARENT: &str = "20260101T000000.000000Z-H0a7c9cdf-P00000010";
    let home = dir.join("home");
    let (origin, work) = (dir.join("origin"), dir.join("work"));
    for path in [&home, &origin, &work] {
        fs::create_dir_all(path).unwrap();
    }
    run_git(&origin, &home, None, &["init", "-q"]);
    run_git(
        &origin,
        &home,
        None,
        &["commit", "-q", "--allow-empty", "-m", "one"],
    );
    let trace = dir.join("vcs.event");
    let started = std::time::Instant::now();
    // Each line in one `write` to the file opened for appending, as a Trace2 writer does:
    // `writeln!` would write the newline by a second call, and a git process still
    // appending to the same file in between would join its line to this one.
    let parent = |rest: &str| {
        let mut line = format!(
            r#"{{"event":{rest},"sid":"{PARENT}","thread":"main","time":"{}"}}"#,
            trace2_time_now()
        );
        line.push('\n');
        let mut file = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&trace)
            .unwrap();
        file.write_all(line.as_bytes()).unwrap();
    };
    let t_abs = || started.elapsed().as_secs_f64();
    let git = |args: &[&str]| {
        // The automatic maintenance after a fetch in the foreground: by default it goes on
        // in a detached process that writes its last lines to the trace after `git fetch`
        // has returned, while this parent writes its own and the test reads the file.
        let out = common::git(&work, &home, Some(&trace))
            .env("GIT_TRACE2_PARENT_SID", PARENT)
            .args(["-c", "maintenance.autoDetach=false"])
            .args(args)
            .output()
            .expect("git runs");
        assert!(out.status.success(), "git {args:?}: {}", stderr(&out));
    };
    parent(r#""version","evt":"4","exe":"0.1.0""#);
    parent(&format!(
        r#""start","t_abs":{:.6},"argv":["vcs","fail","origin"]"#,
        t_abs()
    ));
    parent(r#""cmd_name","name":"git fail","hierarchy":"git fail""#);
    parent(r#""region_enter","nesting":1,"category":"vcs","label":"fetch""#);
    let origin = origin.to_str().unwrap();
    for args in [
        &["init", "-q"][..],
        &["fetch", "-q", origin, "+refs/heads/*:refs/remotes/origin/*"],
    ] {
        let entered = std::time::Instant::now();
        parent(r#""region_enter","nesting":2,"category":"vcs","label":"git""#);
        git(args);
        parent(&format!(
            r#""region_leave","t_rel":{:.6},"nesting":2,"category":"vcs","label":"git""#,
            entered.elapsed().as_secs_f64()
        ));
    }
    parent(&format!(
        r#""region_leave","t_rel":{:.6},"nesting":1,"category":"vcs","label":"fetch""#,
        t_abs()
    ));
    parent(&format!(r#""exit","t_abs":{:.6},"code":1"#, t_abs()));
    parent(&format!(r#""atexit","t_abs":{:.6},"code":1"#, t_abs()));
    trace
}

/// The `vcs` example's shape on real git: the flows by SID must leave the parent no later than
/// they arrive at the child's process slice, which starts at git's clock zero (`time - t_abs`),
/// before git's first line. In both formats.
#[test]
fn flows_to_git_run_by_plain_command_never_end_before_they_start() {
    let dir = tempfile::tempdir().unwrap();
    let trace = vcs_like_trace(dir.path());
    let (processes, children) = processes_and_children(&trace);
    assert!(children >= 3, "init, fetch and fetch's children");

    let pftrace = dir.path().join("vcs.pftrace");
    export("perfetto", &trace, &pftrace);
    if let Some(counts) = check(&pftrace, None) {
        let counts = counts.unwrap_or_else(|why| panic!("{why}"));
        assert_eq!(counts["processes"], processes);
        assert_eq!(counts["flows"], children, "{counts}");
        let process_names = names(&counts, "process_names");
        for name in ["vcs:git fail", "git:init", "git:fetch"] {
            assert!(process_names.iter().any(|n| n == name), "{process_names:?}");
        }
    }

    let json = dir.path().join("vcs.json");
    export("chrome", &trace, &json);
    let doc: Value = serde_json::from_slice(&fs::read(&json).unwrap()).unwrap();
    let events = doc["traceEvents"].as_array().unwrap();
    let ts = |e: &Value| e["ts"].as_i64().unwrap();
    let mut flows = 0;
    for (at, end) in events.iter().enumerate().filter(|(_, e)| e["ph"] == "f") {
        let start = events
            .iter()
            .find(|e| e["ph"] == "s" && e["id"] == end["id"])
            .unwrap_or_else(|| panic!("no start for {end}"));
        assert!(ts(start) <= ts(end), "{start} after {end}");
        // It lands on the child's process slice, written before it.
        let slice = events[..at]
            .iter()
            .find(|e| e["ph"] == "X" && e["cat"] == "process" && e["pid"] == end["pid"])
            .unwrap_or_else(|| panic!("no process slice before {end}"));
        let (from, dur) = (ts(slice), slice["dur"].as_i64().unwrap());
        assert!(
            from <= ts(end) && ts(end) <= from + dur,
            "{end} outside {slice}"
        );
        flows += 1;
    }
    assert_eq!(flows, children);
}
