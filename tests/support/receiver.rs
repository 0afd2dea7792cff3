//! A stand-in for the OpenTelemetry trace2receiver in tests: an `af_unix` stream
//! listener that keeps each connection's bytes, and a checker that applies the
//! receiver's rules to one connection (one process), as `shared/spec/consumers.md`
//! §2–3 and its §7 checklist state them, stricter where the checklist is.
//!
//! The checker reports every line the receiver would reject (which makes it drop the
//! whole process) and every event it would silently ignore (a region or data event it
//! cannot place, an unmatched child or exec event), plus the checklist's own demands:
//! a final newline, valid UTF-8, no blank lines, `version` first and `atexit` last,
//! one session id per connection.

use std::io::Read;
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

/// An `af_unix` stream listener that reads every connection to its end on a thread of
/// its own, as the receiver does.
pub struct Listener {
    connections: Arc<Mutex<Vec<Vec<u8>>>>,
    open: Arc<Mutex<usize>>,
    accepter: Option<JoinHandle<()>>,
    stop: Arc<Mutex<bool>>,
}

impl Listener {
    /// Binds `path` and starts accepting.
    pub fn bind(path: &Path) -> std::io::Result<Listener> {
        let listener = UnixListener::bind(path)?;
        listener.set_nonblocking(true)?;
        let connections = Arc::new(Mutex::new(Vec::new()));
        let open = Arc::new(Mutex::new(0usize));
        let stop = Arc::new(Mutex::new(false));
        let (conns, opened, stopped) = (connections.clone(), open.clone(), stop.clone());
        let accepter = std::thread::spawn(move || {
            let mut readers = Vec::new();
            loop {
                match listener.accept() {
                    Ok((mut stream, _)) => {
                        stream.set_nonblocking(false).unwrap();
                        *opened.lock().unwrap() += 1;
                        let (conns, opened) = (conns.clone(), opened.clone());
                        readers.push(std::thread::spawn(move || {
                            let mut bytes = Vec::new();
                            let _ = stream.read_to_end(&mut bytes);
                            conns.lock().unwrap().push(bytes);
                            *opened.lock().unwrap() -= 1;
                        }));
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        if *stopped.lock().unwrap() {
                            break;
                        }
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    Err(e) => panic!("accept: {e}"),
                }
            }
            for reader in readers {
                reader.join().unwrap();
            }
        });
        Ok(Listener {
            connections,
            open,
            accepter: Some(accepter),
            stop,
        })
    }

    /// Waits (up to 10 s) until no connection is open, then stops accepting and
    /// returns every connection's bytes, in the order they ended.
    pub fn finish(mut self) -> Vec<Vec<u8>> {
        let deadline = Instant::now() + Duration::from_secs(10);
        // A connection still in the backlog is picked up by the accepter's next round.
        std::thread::sleep(Duration::from_millis(50));
        while *self.open.lock().unwrap() > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        *self.stop.lock().unwrap() = true;
        self.accepter.take().unwrap().join().unwrap();
        std::mem::take(&mut *self.connections.lock().unwrap())
    }
}

/// What the receiver would build from one accepted connection.
#[derive(Debug)]
pub struct Process {
    /// The session id of the `version` event.
    pub sid: String,
    /// `version.exe`.
    pub exe: String,
    /// `start.argv`.
    pub argv: Vec<String>,
    /// `cmd_name.name` and `.hierarchy`, when sent.
    pub cmd_name: Option<(String, String)>,
    /// The `def_param` set collapsed by scope priority, as the receiver keeps it.
    pub params: Vec<(String, String)>,
    /// Every line, parsed.
    pub events: Vec<Value>,
}

/// A JSON type a key must have.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Str,
    Int,
    Num,
    Bool,
    StrArray,
    Array,
    StrOrNum,
    Any,
}

/// Required keys of each event the receiver reads (consumers.md §2), with the
/// checklist's additions (`def_param.scope`, integer-only counters and ids).
fn required(event: &str) -> &'static [(&'static str, Kind)] {
    use Kind::*;
    match event {
        "version" => &[("evt", Str), ("exe", Str)],
        "start" => &[("argv", StrArray)],
        "exit" | "atexit" => &[("code", Int)],
        "signal" => &[("signo", Int)],
        "error" => &[("msg", Str), ("fmt", Str)],
        "printf" => &[("msg", Str)],
        "cmd_path" => &[("path", Str)],
        "cmd_ancestry" => &[("ancestry", Array)],
        "cmd_name" => &[("name", Str), ("hierarchy", Str)],
        "cmd_mode" => &[("name", Str)],
        "alias" => &[("alias", Str), ("argv", StrArray)],
        "child_start" => &[
            ("child_id", Int),
            ("child_class", Str),
            ("use_shell", Bool),
            ("argv", StrArray),
        ],
        "child_exit" => &[("child_id", Int), ("pid", Int), ("code", Int)],
        "child_ready" => &[("child_id", Int), ("pid", Int), ("ready", Str)],
        "exec" => &[("exec_id", Int), ("argv", StrArray)],
        "exec_result" => &[("exec_id", Int), ("code", Int)],
        "def_param" => &[("param", Str), ("value", Str), ("scope", Str)],
        "def_repo" => &[("repo", Int), ("worktree", Str)],
        "region_enter" | "region_leave" => &[("nesting", Int)],
        "data" => &[
            ("nesting", Int),
            ("category", Str),
            ("key", Str),
            ("value", StrOrNum),
        ],
        "data_json" => &[
            ("nesting", Int),
            ("category", Str),
            ("key", Str),
            ("value", Any),
        ],
        "timer" | "th_timer" => &[
            ("category", Str),
            ("name", Str),
            ("intervals", Int),
            ("t_total", Num),
            ("t_min", Num),
            ("t_max", Num),
        ],
        "counter" | "th_counter" => &[("category", Str), ("name", Str), ("count", Int)],
        _ => &[],
    }
}

fn has_kind(value: &Value, kind: Kind) -> bool {
    match kind {
        Kind::Str => value.is_string(),
        Kind::Int => value.is_i64() || value.is_u64(),
        Kind::Num => value.is_number(),
        Kind::Bool => value.is_boolean(),
        Kind::Array => value.is_array(),
        Kind::StrArray => value
            .as_array()
            .is_some_and(|a| a.iter().all(Value::is_string)),
        Kind::StrOrNum => value.is_string() || value.is_number(),
        Kind::Any => true,
    }
}

/// The receiver's `time` forms: `YYYY-MM-DDTHH:MM:SS`, optional fraction, then `Z` or
/// a `±hh:mm` offset.
fn valid_time(t: &str) -> bool {
    let b = t.as_bytes();
    let digits = |range: std::ops::Range<usize>| {
        b.get(range)
            .is_some_and(|s| s.iter().all(u8::is_ascii_digit))
    };
    if b.len() < 20
        || !digits(0..4)
        || b[4] != b'-'
        || !digits(5..7)
        || b[7] != b'-'
        || !digits(8..10)
        || b[10] != b'T'
        || !digits(11..13)
        || b[13] != b':'
        || !digits(14..16)
        || b[16] != b':'
        || !digits(17..19)
    {
        return false;
    }
    let mut i = 19;
    if b[i] == b'.' {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return false;
        }
    }
    match &b[i..] {
        b"Z" => true,
        [sign, h1, h2, b':', m1, m2] => {
            matches!(sign, b'+' | b'-') && [h1, h2, m1, m2].iter().all(|c| c.is_ascii_digit())
        }
        _ => false,
    }
}

/// Scope priorities the receiver uses to collapse `def_param` (higher wins, first
/// wins among equals).
fn scope_priority(scope: Option<&str>) -> u32 {
    match scope {
        Some("system") => 1,
        Some("global") => 2,
        Some("local") => 3,
        Some("worktree") => 4,
        Some("command") => 5,
        Some("submodule") => 6,
        Some("unknown") => 7,
        Some(_) => 99,
        None => 100,
    }
}

/// Per-thread state of the region simulation.
#[derive(Default)]
struct ThreadState {
    /// Nesting of each open region, outermost first.
    regions: Vec<i64>,
}

/// Checks one connection's bytes. `Ok` is what the receiver would export; `Err` lists
/// every rule broken, each naming its line.
pub fn check_connection(bytes: &[u8]) -> Result<Process, Vec<String>> {
    let mut problems = Vec::new();
    let text = match std::str::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => return Err(vec![format!("not UTF-8: {e}")]),
    };
    if text.is_empty() {
        return Err(vec!["no lines".into()]);
    }
    if !text.ends_with('\n') {
        problems.push("last line has no newline (the receiver drops it)".into());
    }
    let mut events = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if line.trim().is_empty() {
            problems.push(format!("line {n}: blank line"));
            continue;
        }
        if !line.starts_with('{') {
            problems.push(format!("line {n}: not a JSON object: {line}"));
            continue;
        }
        let value: Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(e) => {
                problems.push(format!("line {n}: bad JSON ({e}): {line}"));
                continue;
            }
        };
        let Some(obj) = value.as_object() else {
            problems.push(format!("line {n}: not an object"));
            continue;
        };
        check_keys(n, obj, &mut problems);
        events.push(value);
    }
    let process = check_stream(&events, &mut problems);
    match process {
        Some(p) if problems.is_empty() => Ok(p),
        _ => Err(problems),
    }
}

/// The common keys and the event's own required keys, with their types.
fn check_keys(n: usize, obj: &Map<String, Value>, problems: &mut Vec<String>) {
    let event = obj.get("event").and_then(Value::as_str).unwrap_or("");
    for key in ["event", "sid", "thread"] {
        if !obj.get(key).is_some_and(Value::is_string) {
            problems.push(format!(
                "line {n} ({event}): '{key}' missing or not a string"
            ));
        }
    }
    match obj.get("time").and_then(Value::as_str) {
        Some(t) if valid_time(t) => {}
        Some(t) => problems.push(format!("line {n} ({event}): bad time '{t}'")),
        None => problems.push(format!("line {n} ({event}): no 'time'")),
    }
    if let Some(repo) = obj.get("repo")
        && !has_kind(repo, Kind::Int)
    {
        problems.push(format!("line {n} ({event}): 'repo' is not an integer"));
    }
    for &(key, kind) in required(event) {
        match obj.get(key) {
            Some(v) if has_kind(v, kind) => {}
            Some(v) => problems.push(format!("line {n} ({event}): '{key}' is not {kind:?}: {v}")),
            None => problems.push(format!("line {n} ({event}): '{key}' missing")),
        }
    }
    if event == "child_start"
        && obj.get("child_class").and_then(Value::as_str) == Some("hook")
        && !obj.get("hook_name").is_some_and(Value::is_string)
    {
        problems.push(format!("line {n}: hook child without 'hook_name'"));
    }
    for key in ["category", "label", "msg"] {
        if matches!(event, "region_enter" | "region_leave")
            && obj.get(key).is_some_and(|v| !v.is_string())
        {
            problems.push(format!("line {n} ({event}): '{key}' is not a string"));
        }
    }
}

/// Stream rules: order, one process, threads, region nesting, children and execs.
fn check_stream(events: &[Value], problems: &mut Vec<String>) -> Option<Process> {
    let name = |v: &Value| v["event"].as_str().unwrap_or("").to_owned();
    let first = events.first()?;
    if name(first) != "version" {
        problems.push(format!("first event is '{}', not 'version'", name(first)));
    }
    if events.last().map(name).as_deref() != Some("atexit") {
        problems.push("last event is not 'atexit'".into());
    }
    let sid = first["sid"].as_str().unwrap_or("").to_owned();
    let mut argv = None;
    let mut cmd_name = None;
    let mut params: Vec<(String, String, u32)> = Vec::new();
    let mut threads: std::collections::HashMap<String, ThreadState> = Default::default();
    threads.insert("main".into(), ThreadState::default());
    let mut children = std::collections::HashMap::new();
    let mut execs = std::collections::HashSet::new();
    for (i, ev) in events.iter().enumerate() {
        let n = i + 1;
        let event = name(ev);
        if i > 0 && event == "version" {
            problems.push(format!(
                "event {n}: a second 'version' (two processes on one connection)"
            ));
        }
        if ev["sid"].as_str() != Some(sid.as_str()) {
            problems.push(format!(
                "event {n} ({event}): another session id on this connection"
            ));
        }
        let thread = ev["thread"].as_str().unwrap_or("").to_owned();
        if event == "thread_start" {
            if threads
                .insert(thread.clone(), ThreadState::default())
                .is_some()
            {
                problems.push(format!("event {n}: thread '{thread}' started twice"));
            }
            continue;
        }
        let Some(state) = threads.get_mut(&thread) else {
            problems.push(format!(
                "event {n} ({event}): thread '{thread}' has no thread_start (ignored)"
            ));
            continue;
        };
        let nesting = ev["nesting"].as_i64().unwrap_or(0);
        match event.as_str() {
            "start" => {
                let a: Vec<String> = ev["argv"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|s| s.as_str().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default();
                if a.is_empty() {
                    problems.push(format!(
                        "event {n}: start with an empty argv (not exported)"
                    ));
                }
                argv = Some(a);
            }
            "cmd_name" => {
                let field = |k: &str| ev[k].as_str().unwrap_or("").to_owned();
                if field("name") == "fsmonitor--daemon" {
                    problems.push("cmd_name fsmonitor--daemon is rejected".into());
                }
                cmd_name = Some((field("name"), field("hierarchy")));
            }
            "def_param" => {
                let param = ev["param"].as_str().unwrap_or("").to_owned();
                let value = ev["value"].as_str().unwrap_or("").to_owned();
                let priority = scope_priority(ev["scope"].as_str());
                match params.iter_mut().find(|(p, _, _)| *p == param) {
                    Some(kept) if priority > kept.2 => *kept = (param, value, priority),
                    Some(_) => {}
                    None => params.push((param, value, priority)),
                }
            }
            "region_enter" => {
                if nesting == state.regions.len() as i64 + 1 {
                    state.regions.push(nesting);
                } else {
                    problems.push(format!(
                        "event {n}: region_enter nesting {nesting} at depth {} (ignored)",
                        state.regions.len()
                    ));
                }
            }
            "region_leave" => {
                if state.regions.last() == Some(&nesting) {
                    state.regions.pop();
                } else {
                    problems.push(format!(
                        "event {n}: region_leave nesting {nesting} does not close the top region (ignored)"
                    ));
                }
            }
            "data" | "data_json" if nesting > 1 => {
                let idx = (nesting - 2) as usize;
                if state.regions.get(idx) != Some(&(nesting - 1)) {
                    problems.push(format!(
                        "event {n}: {event} nesting {nesting} has no region to attach to (ignored)"
                    ));
                }
            }
            "thread_exit" if !state.regions.is_empty() => {
                problems.push(format!(
                    "event {n}: thread '{thread}' exits with regions open"
                ));
            }
            "child_start" => {
                let id = ev["child_id"].as_i64().unwrap_or(-1);
                if children.insert(id, true).is_some() {
                    problems.push(format!("event {n}: child_id {id} used twice"));
                }
            }
            "child_exit" | "child_ready" => {
                let id = ev["child_id"].as_i64().unwrap_or(-1);
                match children.get_mut(&id) {
                    Some(open @ true) => *open = false,
                    _ => problems.push(format!("event {n}: {event} for no open child {id}")),
                }
            }
            "exec" if !execs.insert(ev["exec_id"].as_i64().unwrap_or(-1)) => {
                problems.push(format!("event {n}: exec_id used twice"));
            }
            "exec_result" if !execs.contains(&ev["exec_id"].as_i64().unwrap_or(-1)) => {
                problems.push(format!("event {n}: exec_result without exec"));
            }
            _ => {}
        }
    }
    for (thread, state) in &threads {
        if !state.regions.is_empty() {
            problems.push(format!(
                "thread '{thread}' ends with {} regions open",
                state.regions.len()
            ));
        }
    }
    for (id, open) in &children {
        if *open {
            problems.push(format!("child {id} never ended"));
        }
    }
    let Some(argv) = argv else {
        problems.push("no 'start' event (not exported)".into());
        return None;
    };
    Some(Process {
        sid,
        exe: first["exe"].as_str().unwrap_or("").to_owned(),
        argv,
        cmd_name,
        params: params.into_iter().map(|(p, v, _)| (p, v)).collect(),
        events: events.to_vec(),
    })
}
