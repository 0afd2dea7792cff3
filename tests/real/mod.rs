//! Reading what real programs leave in one Event file that they and their children (git,
//! hooks) all append to: the lines of each session, the process tree by session id, the
//! receiver's rules per process, and `trace2 summary`'s reading of the file.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::support::receiver;

/// Every line of an Event file, and each session's lines in order.
pub struct Trace {
    /// The file's lines, parsed, in file order.
    pub events: Vec<Value>,
    /// Each session's raw lines (with their newline), in file order.
    pub sessions: BTreeMap<String, Vec<u8>>,
}

impl Trace {
    /// Reads `path` (missing or empty: no lines).
    pub fn read(path: &Path) -> Result<Trace, String> {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let mut events = Vec::new();
        let mut sessions: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        for line in text.lines() {
            let value: Value =
                serde_json::from_str(line).map_err(|e| format!("not JSON ({e}): {line}"))?;
            let sid = value["sid"].as_str().unwrap_or_default().to_owned();
            let bytes = sessions.entry(sid).or_default();
            bytes.extend_from_slice(line.as_bytes());
            bytes.push(b'\n');
            events.push(value);
        }
        Ok(Trace { events, sessions })
    }

    /// The lines of session `sid`.
    pub fn of<'a>(&'a self, sid: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        self.events.iter().filter(move |e| e["sid"] == sid)
    }

    /// The lines of session `sid` of event `name`.
    pub fn named<'a>(
        &'a self,
        sid: &'a str,
        name: &'a str,
    ) -> impl Iterator<Item = &'a Value> + 'a {
        self.of(sid).filter(move |e| e["event"] == name)
    }

    /// The sessions whose `version` names `exe` (ours: the crate's version).
    pub fn sessions_of(&self, exe: &str) -> Vec<String> {
        self.events
            .iter()
            .filter(|e| e["event"] == "version" && e["exe"] == exe)
            .filter_map(|e| e["sid"].as_str().map(str::to_owned))
            .collect()
    }

    /// Session `sid`'s `start.argv`.
    pub fn argv(&self, sid: &str) -> Vec<String> {
        self.named(sid, "start")
            .next()
            .and_then(|e| e["argv"].as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Session `sid`'s `cmd_name.name`.
    pub fn cmd_name(&self, sid: &str) -> Option<String> {
        self.named(sid, "cmd_name")
            .next()
            .and_then(|e| e["name"].as_str().map(str::to_owned))
    }

    /// Checks that session `sid` ends with `exit` and `atexit` of `code`, `atexit` last.
    pub fn ends_with(&self, sid: &str, code: i64) -> Result<(), String> {
        for name in ["exit", "atexit"] {
            let codes: Vec<&Value> = self.named(sid, name).map(|e| &e["code"]).collect();
            ensure(codes == [&Value::from(code)], || {
                format!("session {sid}: `{name}` codes {codes:?}, expected [{code}]")
            })?;
        }
        let last = self.of(sid).last().map(|e| e["event"].clone());
        ensure(last == Some(Value::from("atexit")), || {
            format!("session {sid}: last line is {last:?}, not atexit")
        })
    }

    /// The receiver's rules applied to session `sid`'s lines (one connection each).
    pub fn receiver_problems(&self, sid: &str) -> Vec<String> {
        match self.sessions.get(sid) {
            Some(bytes) => receiver::check_connection(bytes).err().unwrap_or_default(),
            None => vec![format!("no lines of session {sid}")],
        }
    }

    /// Every session passes the receiver's rules.
    pub fn receiver_accepts_all(&self) -> Result<(), String> {
        for sid in self.sessions.keys() {
            let problems = self.receiver_problems(sid);
            ensure(problems.is_empty(), || {
                format!(
                    "session {sid} ({:?}):\n{}",
                    self.argv(sid),
                    problems.join("\n")
                )
            })?;
        }
        Ok(())
    }
}

/// The session that ran `sid` (its id without the last `/` part), if any.
pub fn parent_sid(sid: &str) -> Option<&str> {
    sid.rsplit_once('/').map(|(parent, _)| parent)
}

/// `trace2 summary`'s reading of `path` (the library the CLI runs); fails if the input
/// reader reported anything.
pub fn summary(path: &Path) -> Result<trace2_cli::summary::Summary, String> {
    use trace2_cli::{input, progress::Progress, summary::Summariser};
    let specs = input::expand(&[path.to_path_buf()]);
    let mut report = input::Report::default();
    let mut summariser = Summariser::new();
    input::for_each_event(&specs, &Progress::hidden(), &mut report, |event| {
        summariser.event(event)
    });
    ensure(report.clean(), || format!("{:?}", report.messages()))?;
    Ok(summariser.finish())
}

/// The number of `..` pairs before the payload of a Perf line (its last column).
pub fn perf_dots(line: &str) -> usize {
    let payload = line.rsplit(" | ").next().unwrap_or_default();
    (payload.len() - payload.trim_start_matches('.').len()) / 2
}

/// The columns of a Perf line: thread and event.
pub fn perf_thread_event(line: &str) -> Option<(&str, &str)> {
    let cols: Vec<&str> = line.split(" | ").map(str::trim).collect();
    Some((cols.get(2)?, cols.get(3)?)).map(|(t, e)| (*t, *e))
}

pub fn ensure(ok: bool, why: impl FnOnce() -> String) -> Result<(), String> {
    if ok { Ok(()) } else { Err(why()) }
}
