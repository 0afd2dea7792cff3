//! What the summary and the export both know about a process: its place in the tree (from its
//! SID), its clock, its name, and which of its parent's `child_start`s (or `exec`s) started it.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use crate::trace_event::{Kind, TraceEvent};

/// The SID of the parent process: everything before the last `/`. A process whose parent did not
/// trace (or traced elsewhere) still has one; it is a root of the tree when that SID is not in the
/// input.
pub fn parent_sid(sid: &str) -> Option<&str> {
    sid.rfind('/').map(|at| &sid[..at])
}

/// The last component of a SID: the process's own part.
pub fn own_sid(sid: &str) -> &str {
    sid.rfind('/').map_or(sid, |at| &sid[at + 1..])
}

/// The pid git puts in its own SID component (`…-P00002cdd` → 11485).
pub fn pid_from_sid(sid: &str) -> Option<u32> {
    let own = own_sid(sid);
    let at = own.rfind("-P")?;
    let hex = &own[at + 2..];
    if hex.is_empty() || hex.len() > 8 {
        return None;
    }
    u32::from_str_radix(hex, 16).ok()
}

/// A process's wall clock, pieced together from the lines that carry `time` and `t_abs`, so that
/// lines with neither (brief mode) still get a time no earlier than what came before.
#[derive(Debug, Default, Clone, Copy)]
pub struct Clock {
    /// Wall time of `t_abs` zero, once a line has shown both.
    pub zero_us: Option<i64>,
    /// The latest time seen.
    pub last_us: Option<i64>,
}

impl Clock {
    /// Best wall time (Unix µs) of `event`; also moves the clock on.
    pub fn at(&mut self, event: &TraceEvent<'_>) -> i64 {
        if self.zero_us.is_none()
            && let (Some(time), Some(t_abs)) = (event.time_us, event.t_abs_us)
        {
            self.zero_us = Some(time - t_abs);
        }
        let at = event
            .time_us
            .or_else(|| Some(self.zero_us? + event.t_abs_us?))
            .or(self.last_us)
            .unwrap_or(0);
        self.last_us = Some(self.last_us.map_or(at, |last| last.max(at)));
        at
    }
}

/// `git` for `/usr/local/libexec/git-core/git`, `git` for `git.exe`.
pub fn program_name(argv0: &str) -> &str {
    let base = argv0.rsplit(['/', '\\']).next().unwrap_or(argv0);
    base.strip_suffix(".exe").unwrap_or(base)
}

/// `<exe>[:<verb>][#<mode>]`, the name the OpenTelemetry receiver gives a process, from its argv,
/// `cmd_name` and `cmd_mode`. `_run_dashed_` is replaced by the dashed command it tried.
pub fn qualified_name(argv: &[String], verb: Option<&str>, mode: Option<&str>) -> String {
    let mut name = argv
        .first()
        .map_or("?", |argv0| program_name(argv0))
        .to_owned();
    if let Some(verb) = verb {
        name.push(':');
        match (verb, argv.get(1)) {
            ("_run_dashed_", Some(dashed)) => name.push_str(dashed),
            _ => name.push_str(verb),
        }
    }
    if let Some(mode) = mode {
        name.push('#');
        name.push_str(mode);
    }
    name
}

/// A command line for people: words joined by spaces, quoted when they hold spaces or quotes,
/// shortened to `max` characters.
pub fn command_line(argv: &[String], max: usize) -> String {
    // A shell command comes as one word: show it as it is.
    if let [command] = argv {
        return shorten(command, max);
    }
    let mut line = String::new();
    for (i, word) in argv.iter().enumerate() {
        if i > 0 {
            line.push(' ');
        }
        let plain = !word.is_empty()
            && word
                .chars()
                .all(|c| c.is_alphanumeric() || "-_./:=@,+%^~".contains(c));
        if plain {
            line.push_str(word);
        } else {
            line.push('\'');
            line.push_str(&word.replace('\'', "'\\''"));
            line.push('\'');
        }
    }
    shorten(&line, max)
}

/// `text` cut to at most `max` characters, with `…` at the cut.
pub fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// Stable 64-bit hash of a string (flow ids, argv comparison).
pub fn hash_str(text: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    text.hash(&mut hasher);
    hasher.finish()
}

/// Hash of a command line without its program name: `git rev-parse` and
/// `/usr/libexec/git-core/git rev-parse` are the same command.
pub fn argv_tail_hash<S: AsRef<str>>(argv: &[S]) -> u64 {
    let mut hasher = DefaultHasher::new();
    for word in argv.iter().skip(1) {
        word.as_ref().hash(&mut hasher);
    }
    hasher.finish()
}

/// One way a process started another: a `child_start` (until its `child_exit`/`child_ready`) or
/// an `exec`.
#[derive(Debug, Clone)]
pub struct Launch {
    /// Wall time of the `child_start`/`exec`.
    pub start_us: i64,
    /// Wall time of the `child_exit`/`child_ready`, when seen.
    pub end_us: Option<i64>,
    /// [`argv_tail_hash`] of its argv.
    pub argv_tail: u64,
}

/// Which of `launches` started a process that began at `start_us` with `argv`: one whose time
/// window holds the start, with the same arguments if any does (a hook that runs git has other
/// arguments than its git), else the latest such. The child's stream does not know its
/// `child_id`, so time and arguments are all there is.
pub fn match_launch(launches: &[Launch], start_us: i64, argv_tail: u64) -> Option<usize> {
    let mut best: Option<(bool, i64, usize)> = None;
    for (index, launch) in launches.iter().enumerate() {
        let inside = launch.start_us <= start_us && launch.end_us.is_none_or(|end| end >= start_us);
        if !inside {
            continue;
        }
        let key = (launch.argv_tail == argv_tail, launch.start_us, index);
        if best.is_none_or(|b| (key.0, key.1) > (b.0, b.1)) {
            best = Some(key);
        }
    }
    best.map(|(_, _, index)| index)
}

/// The argv of a `start` or `exec` event, owned.
pub fn argv_of(event: &TraceEvent<'_>) -> Option<Vec<String>> {
    match &event.kind {
        Kind::Start { argv } | Kind::Exec { argv, .. } | Kind::ChildStart { argv, .. } => {
            Some(argv.iter().map(|word| word.to_string()).collect())
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sid_parts() {
        let sid = "20261121T232200.038465Z-H0a7c9cdf-P00002cdd/20261121T232200.042534Z-H0a7c9cdf-P00002cdf";
        assert_eq!(
            parent_sid(sid),
            Some("20261121T232200.038465Z-H0a7c9cdf-P00002cdd")
        );
        assert_eq!(own_sid(sid), "20261121T232200.042534Z-H0a7c9cdf-P00002cdf");
        assert_eq!(pid_from_sid(sid), Some(0x2cdf));
        assert_eq!(parent_sid("root"), None);
        assert_eq!(pid_from_sid("external-tool-123"), None);
        assert_eq!(pid_from_sid("x-Pzz"), None);
    }

    #[test]
    fn names() {
        let argv: Vec<String> = ["/usr/local/libexec/git-core/git", "checkout", "-q"]
            .map(String::from)
            .into();
        assert_eq!(
            qualified_name(&argv, Some("checkout"), Some("branch")),
            "git:checkout#branch"
        );
        let dashed: Vec<String> = ["git", "foo"].map(String::from).into();
        assert_eq!(
            qualified_name(&dashed, Some("_run_dashed_"), None),
            "git:foo"
        );
        assert_eq!(qualified_name(&[], None, None), "?");
        let words: Vec<String> = ["git", "commit", "-m", "it's done"]
            .map(String::from)
            .into();
        assert_eq!(command_line(&words, 80), "git commit -m 'it'\\''s done'");
        assert_eq!(command_line(&words, 10), "git commi…");
    }

    #[test]
    fn launches_match_by_window_then_arguments() {
        let git = |args: &[&str]| argv_tail_hash(args);
        let launches = [
            Launch {
                start_us: 100,
                end_us: Some(500),
                argv_tail: git(&[".git/hooks/pre-commit"]),
            },
            Launch {
                start_us: 600,
                end_us: None,
                argv_tail: git(&["git", "maintenance", "run"]),
            },
            Launch {
                start_us: 650,
                end_us: Some(900),
                argv_tail: git(&["git", "gc"]),
            },
        ];
        // The git run by the hook: only the hook's window holds it.
        assert_eq!(
            match_launch(&launches, 200, git(&["git", "rev-parse"])),
            Some(0)
        );
        // Both later windows hold 700: the arguments decide.
        assert_eq!(
            match_launch(
                &launches,
                700,
                git(&["/usr/libexec/git", "maintenance", "run"])
            ),
            Some(1)
        );
        assert_eq!(
            match_launch(&launches, 700, git(&["git", "other"])),
            Some(2)
        );
        assert_eq!(match_launch(&launches, 50, git(&["git"])), None);
    }
}
