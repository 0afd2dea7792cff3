//! `trace2 export --format chrome`: the process model's output as Chrome trace event JSON, which
//! the Perfetto UI, chrome://tracing and speedscope open (binary-format.md §11).
//!
//! - a pid per process, a tid per Trace2 thread, named by `M` events;
//! - the process's lifetime, each thread's lifetime and every region as `X` slices, each written
//!   once it is closed (its bounds are final only then);
//! - children as async `b`/`e` slices, and a flow (`s` → `f`) from the parent to the child;
//! - counters and timers as `C` counter tracks, and instants (`i`) for data, errors, printf,
//!   parameters and the process's end.

mod json;

use std::io::{self, Write};

use serde_json::json;

use super::Exporter;
use super::sink::{Arg, Child, ExportSink, Flow, Instant, ProcessEnd, Scope, Slice, TrackId};
use super::track::Closed;
use json::ChromeJson;

/// The Chrome JSON export.
pub type ChromeExporter<W> = Exporter<ChromeSink<W>>;

impl<W: Write> Exporter<ChromeSink<W>> {
    /// Starts the document on `out` (give it a buffered writer).
    pub fn new(out: W) -> io::Result<Self> {
        Ok(Exporter::with_sink(ChromeSink {
            doc: ChromeJson::new(out)?,
        }))
    }
}

/// Writes Chrome trace event JSON.
pub struct ChromeSink<W: Write> {
    doc: ChromeJson<W>,
}

impl<W: Write> ChromeSink<W> {
    fn slice(&mut self, track: TrackId, closed: Closed<Slice>) -> io::Result<()> {
        let slice = closed.payload;
        let doc = self
            .doc
            .begin("X", &slice.name, track.pid, track.tid, closed.start)
            .int("dur", closed.end - closed.start);
        doc.str("cat", slice.category());
        doc.args();
        if let Some(region) = &slice.region {
            if let Some(msg) = &region.msg {
                doc.str("msg", msg);
            }
            if let Some(repo) = region.repo {
                doc.int("repo", repo);
            }
            doc.int("nesting", region.nesting);
            if let (Some(file), Some(line)) = (&region.file, region.line) {
                doc.str("file:line", &format!("{file}:{line}"));
            }
            if region.unmatched_leave {
                doc.value("unmatched_leave", &true);
            }
        }
        for (key, value) in &slice.args {
            doc.value(key, value);
        }
        if closed.incomplete {
            doc.value("incomplete", &true);
        }
        doc.end()
    }

    fn args(&mut self, args: &[(&str, Arg<'_>)]) {
        let doc = self.doc.args();
        for (key, arg) in args {
            match arg {
                Arg::Str(text) => doc.str(key, text),
                Arg::Int(n) => doc.int(key, *n),
                Arg::Bool(b) => doc.value(key, b),
                Arg::Json(text) => doc.raw(key, text),
                Arg::Words(words) => doc.value(key, words),
            };
        }
    }

    fn child(
        &mut self,
        ph: &str,
        track: TrackId,
        at: i64,
        child: &Child<'_>,
        args: &[(&str, Arg<'_>)],
    ) -> io::Result<()> {
        self.doc
            .begin(ph, child.name, track.pid, track.tid, at)
            .str("cat", "child")
            .str("id", &format!("{}:{}", track.pid, child.child_id));
        self.args(args);
        self.doc.end()
    }
}

impl<W: Write> ExportSink for ChromeSink<W> {
    type Output = W;

    fn process_track(&mut self, _pid: u32, _sid: &str) -> io::Result<()> {
        Ok(())
    }

    fn thread_track(
        &mut self,
        track: TrackId,
        name: &str,
        sort_index: Option<i64>,
    ) -> io::Result<()> {
        self.doc
            .begin("M", "thread_name", track.pid, track.tid, 0)
            .args()
            .str("name", name)
            .end()?;
        if let Some(sort_index) = sort_index {
            self.doc
                .begin("M", "thread_sort_index", track.pid, track.tid, 0)
                .args()
                .int("sort_index", sort_index)
                .end()?;
        }
        Ok(())
    }

    fn open_slice(&mut self, _track: TrackId, _at: i64, _slice: &Slice) -> io::Result<()> {
        Ok(())
    }

    fn close_slice(&mut self, track: TrackId, closed: Closed<Slice>) -> io::Result<()> {
        self.slice(track, closed)
    }

    fn leaf_slice(&mut self, track: TrackId, closed: Closed<Slice>) -> io::Result<()> {
        self.slice(track, closed)
    }

    fn instant(&mut self, track: TrackId, at: i64, instant: &Instant<'_>) -> io::Result<()> {
        let scope = match instant.scope {
            Scope::Thread => "t",
            Scope::Process => "p",
        };
        self.doc
            .begin("i", instant.name, track.pid, track.tid, at)
            .str("s", scope)
            .str("cat", instant.category);
        self.args(instant.args);
        self.doc.end()
    }

    fn counter(
        &mut self,
        pid: u32,
        at: i64,
        series: &str,
        key: &str,
        value: i64,
    ) -> io::Result<()> {
        self.doc
            .begin("C", series, pid, pid, at)
            .args()
            .int(key, value)
            .end()
    }

    fn child_begin(
        &mut self,
        track: TrackId,
        at: i64,
        child: &Child<'_>,
        args: &[(&str, Arg<'_>)],
    ) -> io::Result<()> {
        self.child("b", track, at, child, args)
    }

    fn child_end(
        &mut self,
        track: TrackId,
        at: i64,
        child: &Child<'_>,
        args: &[(&str, Arg<'_>)],
    ) -> io::Result<()> {
        self.child("e", track, at, child, args)
    }

    fn process_end(&mut self, process: ProcessEnd<'_>) -> io::Result<()> {
        let pid = process.pid;
        let slice = Slice {
            name: process.name.to_owned(),
            kind: "process",
            cat: None,
            region: None,
            args: process.args,
        };
        let closed = Closed {
            start: process.start_us,
            end: process.end_us,
            payload: slice,
            incomplete: process.incomplete,
        };
        self.slice(TrackId { pid, tid: pid }, closed)?;
        // The flow's end after the slice it binds to: a reader that keeps the file's order
        // among events of one time finds the slice open.
        if let Some(id) = process.flow_in {
            self.doc
                .begin("f", "child process", pid, pid, process.start_us)
                .str("cat", "child")
                .str("bp", "e")
                .int("id", id as i64)
                .end()?;
        }
        self.doc
            .begin("M", "process_name", pid, pid, 0)
            .args()
            .str("name", process.name)
            .end()?;
        self.doc
            .begin("M", "process_labels", pid, pid, 0)
            .args()
            .str("labels", process.sid)
            .end()?;
        self.doc
            .begin("M", "process_sort_index", pid, pid, 0)
            .args()
            .int("sort_index", process.sort_index as i64)
            .end()
    }

    fn flow(&mut self, flow: &Flow) -> io::Result<()> {
        let id = flow.id as i64;
        self.doc
            .begin(
                "s",
                "child process",
                flow.from.pid,
                flow.from.tid,
                flow.from_us,
            )
            .str("cat", "child")
            .int("id", id)
            .end()
    }

    fn events(&self) -> u64 {
        self.doc.events()
    }

    fn finish(self, root: Option<&str>, processes: usize) -> io::Result<W> {
        let other = json!({
            "format": "trace2",
            "sid": root,
            "processes": processes,
            "generator": concat!("trace2 ", env!("CARGO_PKG_VERSION")),
        });
        self.doc.finish(&other)
    }
}
