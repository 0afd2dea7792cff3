//! The record: everything a formatter needs to render one Trace2 event.
//!
//! A [`Record`] is built once per Trace2 call by the core layer and handed to every
//! enabled target in turn (normal, perf, event). It carries one clock reading, the
//! calling thread, the callsite and the event's own inputs. Formatters turn it into
//! bytes and do nothing else: no I/O, no globals, no clock reads.

/// One clock reading, taken once per Trace2 call and shared by all targets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Timestamp {
    /// Wall-clock time in microseconds since the Unix epoch (UTC).
    pub wall_us: i64,
    /// Microseconds since the process start (`t_abs`).
    pub t_abs_us: u64,
}

/// Where the call came from. `file` is `None` when the location is unknown.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Callsite<'a> {
    /// Source file as the compiler names it (for example `src/main.rs`).
    pub file: Option<&'a str>,
    /// Source line; meaningful only when `file` is set.
    pub line: u32,
}

/// The per-thread and per-process context of a record.
#[derive(Clone, Copy, Debug)]
pub struct Record<'a> {
    /// What happened.
    pub event: Trace2Event<'a>,
    /// The clock reading of this call.
    pub time: Timestamp,
    /// The full session id (`parent/.../own`).
    pub sid: &'a str,
    /// The process depth in the session tree (`dN` in Perf): 0 without a parent.
    pub depth: u32,
    /// The Trace2 thread name: `main`, `thNN:name` or `task-lane-NN` (at most 24 bytes).
    pub thread: &'a str,
    /// The callsite of the call.
    pub callsite: Callsite<'a>,
    /// Regions open on the calling thread at the time the line is written; Perf draws
    /// two dots for each. For `region_enter` it is counted before the push, for
    /// `region_leave` after the pop, and it is 0 for events written after the stack
    /// has been unwound (`atexit`, process `timer`/`counter`, `thread_exit`, `th_*`).
    pub open_regions: u32,
}

/// The inputs of a region line (`region_enter` / `region_leave`).
#[derive(Clone, Copy, Debug, Default)]
pub struct RegionInfo<'a> {
    /// Repository id, when the region names a repository.
    pub repo: Option<i64>,
    /// Category, when one was given.
    pub category: Option<&'a str>,
    /// Label, when one was given.
    pub label: Option<&'a str>,
    /// Message, when one was given (may be empty: an empty message is still present).
    pub msg: Option<&'a str>,
}

/// How a `child_start` names its child.
#[derive(Clone, Copy, Debug, Default)]
pub struct ChildInfo<'a> {
    /// Child id: 0, 1, 2, … per process.
    pub child_id: u64,
    /// Class: `?` when unclassified, `hook`, `dashed`, `pager`, …
    pub class: &'a str,
    /// Hook name, for class `hook`.
    pub hook_name: Option<&'a str>,
    /// Working directory of the child, when set.
    pub cd: Option<&'a str>,
    /// Whether the child runs through a shell.
    pub use_shell: bool,
    /// Whether the child is a git sub-command (`git` is then shown before `argv`).
    pub is_git: bool,
    /// The child's arguments (already redacted).
    pub argv: &'a [&'a str],
}

/// A stopwatch timer total (`timer` / `th_timer`).
#[derive(Clone, Copy, Debug, Default)]
pub struct TimerInfo<'a> {
    /// Category of the timer.
    pub category: &'a str,
    /// Name of the timer.
    pub name: &'a str,
    /// Number of completed intervals.
    pub intervals: u64,
    /// Total time, in nanoseconds.
    pub total_ns: u64,
    /// Shortest interval, in nanoseconds.
    pub min_ns: u64,
    /// Longest interval, in nanoseconds.
    pub max_ns: u64,
}

/// The Trace2 event catalogue with each event's own inputs.
///
/// Elapsed values that belong to the event (region or child durations) are carried in
/// the variant; `t_abs` comes from [`Record::time`].
#[derive(Clone, Copy, Debug)]
pub enum Trace2Event<'a> {
    /// First line of a process: the program version.
    Version {
        /// The version string written as `exe`.
        exe: &'a str,
    },
    /// Written by the Event target after `version` when it writes into the sentinel file.
    TooManyFiles,
    /// The program's arguments (already redacted).
    Start {
        /// argv, `argv[0]` included.
        argv: &'a [&'a str],
    },
    /// The names of the parent processes, nearest first.
    CmdAncestry {
        /// Process names.
        ancestry: &'a [&'a str],
    },
    /// The resolved executable path.
    CmdPath {
        /// The path.
        path: &'a str,
    },
    /// The command verb and its hierarchy.
    CmdName {
        /// The verb.
        name: &'a str,
        /// `<parent hierarchy>/<name>`, or just the name; may be empty.
        hierarchy: &'a str,
    },
    /// A command sub-mode.
    CmdMode {
        /// The mode.
        name: &'a str,
    },
    /// An alias expansion.
    Alias {
        /// The alias.
        alias: &'a str,
        /// What it expands to.
        argv: &'a [&'a str],
    },
    /// An interesting setting.
    DefParam {
        /// `system`, `global`, `local`, `worktree`, `command`, `submodule`, `unknown`.
        scope: &'a str,
        /// The key or variable name.
        param: &'a str,
        /// The value (already redacted); `None` for a valueless config entry.
        value: Option<&'a str>,
    },
    /// A repository got its id.
    DefRepo {
        /// The id.
        repo: i64,
        /// The worktree path.
        worktree: &'a str,
    },
    /// A region begins.
    RegionEnter {
        /// The region.
        region: RegionInfo<'a>,
        /// 1 + regions open on this thread before the push.
        nesting: u32,
    },
    /// A region ends.
    RegionLeave {
        /// The region.
        region: RegionInfo<'a>,
        /// 1 + regions open on this thread after the pop.
        nesting: u32,
        /// The region's duration, µs.
        t_rel_us: u64,
    },
    /// A string datum.
    Data {
        /// Repository id, when given.
        repo: Option<i64>,
        /// Category.
        category: &'a str,
        /// Key.
        key: &'a str,
        /// Value, as text.
        value: &'a str,
        /// 1 + regions open on this thread.
        nesting: u32,
        /// Time since the innermost open region (or the thread) started, µs.
        t_rel_us: u64,
    },
    /// A JSON datum.
    DataJson {
        /// Repository id, when given.
        repo: Option<i64>,
        /// Category.
        category: &'a str,
        /// Key.
        key: &'a str,
        /// Compact JSON text, embedded verbatim.
        json: &'a str,
        /// 1 + regions open on this thread.
        nesting: u32,
        /// Time since the innermost open region (or the thread) started, µs.
        t_rel_us: u64,
    },
    /// A free-form message; `None` when no message was given.
    Printf {
        /// The message.
        msg: Option<&'a str>,
    },
    /// An error or warning message.
    Error {
        /// The message; `None` when empty.
        msg: Option<&'a str>,
        /// What stands in for git's format string (see the crate docs).
        fmt: Option<&'a str>,
    },
    /// A child process is about to start.
    ChildStart(ChildInfo<'a>),
    /// A child was reaped (or could not start: pid and code -1).
    ChildExit {
        /// Child id.
        child_id: u64,
        /// Process id, -1 if it never started.
        pid: i64,
        /// Exit code (128+signal when killed), -1 if it never started.
        code: i64,
        /// Time since its `child_start`, µs.
        elapsed_us: u64,
    },
    /// A background child was released.
    ChildReady {
        /// Child id.
        child_id: u64,
        /// Process id.
        pid: i64,
        /// `ready`, `timeout` or `error`.
        ready: &'a str,
        /// Time since its `child_start`, µs.
        elapsed_us: u64,
    },
    /// The program is about to replace itself.
    Exec {
        /// Exec id: 0, 1, … per process.
        exec_id: u64,
        /// The executable, when given separately.
        exe: Option<&'a str>,
        /// Its arguments (already redacted).
        argv: &'a [&'a str],
    },
    /// The exec failed.
    ExecResult {
        /// Exec id.
        exec_id: u64,
        /// errno of the failure.
        code: i64,
        /// Text of that errno (`No such file or directory`), when `code > 0`.
        err: Option<&'a str>,
    },
    /// A thread starts.
    ThreadStart,
    /// A thread ends.
    ThreadExit {
        /// The thread's lifetime, µs.
        elapsed_us: u64,
    },
    /// A stopwatch timer total: per thread (`th_timer`) or for the process (`timer`).
    Timer {
        /// `true` for `th_timer`.
        per_thread: bool,
        /// The values.
        timer: TimerInfo<'a>,
    },
    /// A counter total: per thread (`th_counter`) or for the process (`counter`).
    Counter {
        /// `true` for `th_counter`.
        per_thread: bool,
        /// Category of the counter.
        category: &'a str,
        /// Name of the counter.
        name: &'a str,
        /// The value.
        value: u64,
    },
    /// The program exits with `code`.
    Exit {
        /// Exit code, 0..=255.
        code: i32,
    },
    /// The last line of a process.
    Atexit {
        /// Exit code recorded by the last `exit` (0 if none).
        code: i32,
    },
    /// The process is being killed by a signal.
    Signal {
        /// Signal number.
        signo: i32,
    },
}

impl Trace2Event<'_> {
    /// The region nesting of the events the Event target filters by nesting
    /// (`region_enter`, `region_leave`, `data`, `data_json`); `None` for the others.
    pub fn nesting(&self) -> Option<u32> {
        match self {
            Trace2Event::RegionEnter { nesting, .. }
            | Trace2Event::RegionLeave { nesting, .. }
            | Trace2Event::Data { nesting, .. }
            | Trace2Event::DataJson { nesting, .. } => Some(*nesting),
            _ => None,
        }
    }
}

/// Turns a record into the bytes of one line.
///
/// Implementations append exactly one line (ending in LF) to `out`, or nothing when
/// their target does not write this event. They must be pure: everything they need is
/// in the record or in the formatter's own settings, fixed when it was built.
pub trait Format: Send + Sync + 'static {
    /// Appends the line for `record` to `out`.
    fn format(&self, record: &Record<'_>, out: &mut Vec<u8>);

    /// Whether [`Format::format`] may write anything for `record`. The deferred writer
    /// asks before it encodes a record, so that records no target shows (regions for a
    /// Normal target alone, regions nested too deep for the Event target) cost the
    /// traced thread nothing more. `true` is always safe; `false` must mean that
    /// `format` writes nothing.
    fn writes(&self, record: &Record<'_>) -> bool {
        let _ = record;
        true
    }
}

impl<F: Format + ?Sized> Format for Box<F> {
    fn format(&self, record: &Record<'_>, out: &mut Vec<u8>) {
        (**self).format(record, out)
    }

    fn writes(&self, record: &Record<'_>) -> bool {
        (**self).writes(record)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A format that writes only the records of one kind, and says so.
    struct OnlyPrintf;
    impl Format for OnlyPrintf {
        fn format(&self, record: &Record<'_>, out: &mut Vec<u8>) {
            if matches!(record.event, Trace2Event::Printf { .. }) {
                out.extend_from_slice(b"printf\n");
            }
        }
        fn writes(&self, record: &Record<'_>) -> bool {
            matches!(record.event, Trace2Event::Printf { .. })
        }
    }

    /// A format that leaves `writes` to the trait.
    struct Everything;
    impl Format for Everything {
        fn format(&self, _record: &Record<'_>, out: &mut Vec<u8>) {
            out.extend_from_slice(b"line\n");
        }
    }

    fn record(event: Trace2Event<'_>) -> Record<'_> {
        Record {
            event,
            time: Timestamp::default(),
            sid: "sid",
            depth: 0,
            thread: "main",
            callsite: Callsite::default(),
            open_regions: 0,
        }
    }

    /// `writes` is `true` unless a format says otherwise (the safe answer: the
    /// deferred writer then encodes every record for it), and a boxed format answers
    /// as the format inside.
    #[test]
    fn writes_defaults_to_true_and_boxes_forward_it() {
        let printf = record(Trace2Event::Printf { msg: Some("m") });
        let exit = record(Trace2Event::Exit { code: 0 });
        assert!(Everything.writes(&printf) && Everything.writes(&exit));
        let boxed: Box<dyn Format> = Box::new(OnlyPrintf);
        assert!(boxed.writes(&printf));
        assert!(!boxed.writes(&exit));
        let mut out = Vec::new();
        boxed.format(&printf, &mut out);
        boxed.format(&exit, &mut out);
        assert_eq!(out, b"printf\n");
    }
}
