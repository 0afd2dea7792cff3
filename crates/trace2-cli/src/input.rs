//! Where events come from: files, directories of per-process files and standard input, read one
//! line at a time with bounded memory, and what was skipped in each.
//!
//! Every input is opened as a [`TraceSource`]. Event JSON is split into lines here, each read
//! into a record by the event crate's reader; a binary `.t2b` trace (it starts with
//! `89 54 32 01`) is decoded by `tracing-trace2-binary` into records. Module `record_event`
//! turns the records of both into one event type for the summary and the exports.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use tracing_trace2_binary::DecodeOptions;

use crate::progress::Progress;
use crate::record_event::{LineNote, with_line};
use crate::repeats::Repeats;
use crate::trace_event::{LineError, TraceEvent};
use crate::visible::visible;

/// First bytes of a binary (`t2b`) trace: frame marker `89 'T' '2'`, then a STREAM frame.
pub const BINARY_MAGIC: [u8; 4] = [0x89, b'T', b'2', 0x01];

/// Longest line read whole. Git's lines are far shorter; a longer one is damage or not a trace,
/// and is skipped without being held in memory.
pub const MAX_LINE: usize = 16 << 20;

/// One input named on the command line (a directory contributes one per file in it).
#[derive(Debug, Clone)]
pub struct InputSpec {
    /// The file, or `None` for standard input (`-`).
    pub path: Option<PathBuf>,
    /// Its size when known, for the progress bar.
    pub size: Option<u64>,
    /// Why it cannot be read, when that is known before opening it.
    pub problem: Option<String>,
}

impl InputSpec {
    /// The name used in messages.
    pub fn name(&self) -> String {
        match &self.path {
            Some(path) => path.display().to_string(),
            None => "<stdin>".to_owned(),
        }
    }
}

/// An opened input, by what its first bytes say it holds.
pub enum TraceSource {
    /// Event-format JSON lines (git's `GIT_TRACE2_EVENT` output, ours, or a concatenation).
    EventJson(Box<dyn BufRead>),
    /// A binary `t2b` trace: decoded to records, each handed on as its Event line's event.
    Binary(Box<dyn BufRead>),
}

impl TraceSource {
    /// Opens `spec` and looks at its first bytes.
    pub fn open(spec: &InputSpec) -> io::Result<TraceSource> {
        let reader: Box<dyn Read> = match &spec.path {
            Some(path) => Box::new(File::open(path)?),
            None => Box::new(io::stdin().lock()),
        };
        let mut reader: Box<dyn BufRead> = Box::new(BufReader::with_capacity(256 << 10, reader));
        let head = reader.fill_buf()?;
        if head.starts_with(&BINARY_MAGIC) {
            Ok(TraceSource::Binary(reader))
        } else {
            Ok(TraceSource::EventJson(reader))
        }
    }
}

/// Expands the command line's paths: a directory stands for the regular files in it (sorted by
/// name, which for git's directory target is the order the processes started), `-` for standard
/// input. Paths that cannot be read are kept, with the reason, to be reported in their turn. A
/// file named twice (itself again, through a link, or inside a directory also named) is read once:
/// counted twice, each of its processes would be two.
pub fn expand(paths: &[PathBuf]) -> Vec<InputSpec> {
    let mut specs = expand_all(paths);
    let mut seen = std::collections::HashSet::new();
    specs.retain(|spec| match &spec.path {
        Some(path) if spec.problem.is_none() => {
            file_identity(path).is_none_or(|id| seen.insert(id))
        }
        _ => true,
    });
    specs
}

/// What makes two paths one file: device and inode where there are such, else the canonical path.
fn file_identity(path: &Path) -> Option<(u64, u64, PathBuf)> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(path).ok()?;
        Some((meta.dev(), meta.ino(), PathBuf::new()))
    }
    #[cfg(not(unix))]
    {
        Some((0, 0, std::fs::canonicalize(path).ok()?))
    }
}

fn expand_all(paths: &[PathBuf]) -> Vec<InputSpec> {
    let mut specs = Vec::new();
    for path in paths {
        if path.as_os_str() == "-" {
            specs.push(InputSpec {
                path: None,
                size: None,
                problem: None,
            });
            continue;
        }
        let unreadable = |why: String| InputSpec {
            path: Some(path.clone()),
            size: None,
            problem: Some(why),
        };
        match std::fs::metadata(path) {
            Ok(meta) if meta.is_dir() => match list_dir(path) {
                Ok(files) if files.is_empty() => {
                    specs.push(unreadable("directory holds no files".to_owned()))
                }
                Ok(files) => specs.extend(files),
                Err(e) => specs.push(unreadable(e.to_string())),
            },
            Ok(meta) => specs.push(InputSpec {
                path: Some(path.clone()),
                size: Some(meta.len()),
                problem: None,
            }),
            Err(e) => specs.push(unreadable(e.to_string())),
        }
    }
    specs
}

/// The regular files of `dir` (symlinks followed), sorted by name.
pub fn list_dir(dir: &Path) -> io::Result<Vec<InputSpec>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        // Follows symlinks, as git's readers would.
        if let Ok(meta) = std::fs::metadata(&path)
            && meta.is_file()
        {
            files.push(InputSpec {
                path: Some(path),
                size: Some(meta.len()),
                problem: None,
            });
        }
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

/// Reads every input in turn and hands each event to `on_event`, recording in `report` what was
/// skipped. Never stops early: a bad line, a bad file, an unreadable file are each reported and
/// passed over. An event of a binary stream already read from an earlier input (two flight
/// snapshots of one process, module `repeats`) is passed over too, and counted as repeated.
pub fn for_each_event(
    specs: &[InputSpec],
    progress: &Progress,
    report: &mut Report,
    mut on_event: impl FnMut(&TraceEvent<'_>),
) {
    let mut repeats = Repeats::new();
    for spec in specs {
        let name = spec.name();
        if let Some(why) = &spec.problem {
            report.problem(&name, why);
            continue;
        }
        let source = match TraceSource::open(spec) {
            Ok(source) => source,
            Err(e) => {
                report.problem(&name, &e.to_string());
                continue;
            }
        };
        match source {
            TraceSource::EventJson(reader) => {
                let file = read_event_lines(reader, progress, &mut on_event);
                report.file(&name, file);
            }
            TraceSource::Binary(reader) => {
                let (file, damage) = read_binary(reader, &mut repeats, &mut on_event);
                progress.advance(spec.size.unwrap_or(0));
                match damage {
                    // One line per file: what the decoder skipped, and what was still used.
                    Some(why) => {
                        report.problem(&name, &format!("{why}; {} events used", file.events))
                    }
                    None => report.file(&name, file),
                }
            }
        }
    }
}

/// Decodes one binary (`t2b`) input and hands each record on as the event its Event line would
/// be (module `record_event`: no JSON text in between). The second value says what the
/// decoder skipped, when it skipped anything.
fn read_binary(
    reader: Box<dyn BufRead>,
    repeats: &mut Repeats,
    on_event: &mut impl FnMut(&TraceEvent<'_>),
) -> (FileReport, Option<String>) {
    let mut file = FileReport::default();
    let decoded =
        tracing_trace2_binary::decode(reader, &DecodeOptions::default(), |stream, record| {
            file.lines += 1;
            if repeats.repeated(stream.header.stream_id, record) {
                file.repeated += 1;
                return;
            }
            file.events += 1;
            crate::record_event::with_event(record, |event| on_event(event));
        });
    repeats.end_file();
    let damage = match decoded {
        // A stream that stops without its END frame lost nothing: its process shows as
        // unfinished in the summary, as the same process's Event text does.
        Ok(report) => crate::binary_report::assess(&report)
            .damage
            .map(|damage| format!("binary trace damaged: {damage}")),
        Err(e) => Some(format!("binary trace unreadable: {e}")),
    };
    (file, damage)
}

/// Parses the Event lines of one input.
fn read_event_lines(
    reader: Box<dyn BufRead>,
    progress: &Progress,
    on_event: &mut impl FnMut(&TraceEvent<'_>),
) -> FileReport {
    let mut lines = LineReader::new(reader);
    let mut file = FileReport::default();
    let mut unreported = 0u64;
    // Where the line starts in the input.
    let mut offset = 0u64;
    loop {
        let line = match lines.next_line() {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(e) => {
                file.read_error = Some(e.to_string());
                break;
            }
        };
        file.lines += 1;
        let start = offset;
        offset += line.consumed;
        unreported += line.consumed;
        if unreported >= 1 << 20 {
            progress.advance(unreported);
            unreported = 0;
        }
        if line.too_long {
            file.skip(file.lines, SkipReason::TooLong);
            continue;
        }
        let mut text = line.bytes;
        if let [rest @ .., b'\r'] = text {
            text = rest;
        }
        if text.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let error = match event_line(text, on_event) {
            Ok(note) => {
                file.events += 1;
                if let Some(note) = note {
                    file.note(file.lines, note);
                }
                continue;
            }
            Err(error) => error,
        };
        if matches!(error, LineError::CutShort) && !line.newline {
            file.cut_short = Some(file.lines);
            continue;
        }
        // A line that a kill cut where a page of the file ends, with the next line of
        // another process appended right after it.
        if let Some(at) = page_end_split(text, start)
            && let Ok(note) = event_line(&text[at..], on_event)
        {
            file.events += 1;
            file.cut_inside.get_or_insert(file.lines);
            if let Some(note) = note {
                file.note(file.lines, note);
            }
            continue;
        }
        file.skip(file.lines, SkipReason::Line(error));
    }
    progress.advance(unreported);
    file
}

/// Reads one Event line (without its newline) and hands its event to `on_event`.
fn event_line(
    text: &[u8],
    on_event: &mut impl FnMut(&TraceEvent<'_>),
) -> Result<Option<LineNote>, LineError> {
    // Git writes invalid UTF-8 through unchanged (trace2-format.md §5.4): keep the line,
    // with U+FFFD in place of the bad bytes.
    let owned;
    let text = match std::str::from_utf8(text) {
        Ok(text) => text,
        Err(_) => {
            owned = String::from_utf8_lossy(text).into_owned();
            owned.as_str()
        }
    };
    with_line(text, |event| on_event(event)).map(|((), note)| note)
}

/// The file page size a kill can stop a buffered `write` at (the kernel gives up such a
/// write only between two pages of the file).
const PAGE: u64 = 4096;

/// Where, in `text` (a line that starts `start` bytes into the input and is not an
/// event), a line cut at a page end of the file ends and another line begins: the first
/// page boundary inside it after which a JSON object starts and before which the text
/// is a cut-short event. A process killed in the middle of a `write` leaves such a cut
/// line, and another process appending to the same file writes its next line right
/// after it.
fn page_end_split(text: &[u8], start: u64) -> Option<usize> {
    let first = (start / PAGE + 1) * PAGE;
    (first..start + text.len() as u64)
        .step_by(PAGE as usize)
        .map(|boundary| (boundary - start) as usize)
        .find(|&at| {
            text[at] == b'{'
                && std::str::from_utf8(&text[..at])
                    .is_ok_and(|head| matches!(with_line(head, |_| ()), Err(LineError::CutShort)))
        })
}

/// One line of input, without its newline.
struct Line<'b> {
    bytes: &'b [u8],
    /// Bytes the line took in the input, newline included.
    consumed: u64,
    /// False for a last line that does not end in a newline.
    newline: bool,
    /// Longer than [`MAX_LINE`]: `bytes` is empty.
    too_long: bool,
}

/// Splits a reader into lines, holding at most [`MAX_LINE`] bytes of one line.
struct LineReader<R> {
    inner: R,
    buf: Vec<u8>,
}

impl<R: BufRead> LineReader<R> {
    fn new(inner: R) -> Self {
        LineReader {
            inner,
            buf: Vec::with_capacity(64 << 10),
        }
    }

    fn next_line(&mut self) -> io::Result<Option<Line<'_>>> {
        self.buf.clear();
        let mut consumed = 0u64;
        let mut too_long = false;
        loop {
            let available = match self.inner.fill_buf() {
                Ok(available) => available,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if available.is_empty() {
                if consumed == 0 {
                    return Ok(None);
                }
                return Ok(Some(Line {
                    bytes: &self.buf,
                    consumed,
                    newline: false,
                    too_long,
                }));
            }
            let (take, done) = match memchr::memchr(b'\n', available) {
                Some(at) => (at, true),
                None => (available.len(), false),
            };
            if !too_long {
                if self.buf.len() + take > MAX_LINE {
                    too_long = true;
                    self.buf = Vec::new();
                } else {
                    self.buf.extend_from_slice(&available[..take]);
                }
            }
            let used = take + usize::from(done);
            self.inner.consume(used);
            consumed += used as u64;
            if done {
                if too_long {
                    self.buf = Vec::with_capacity(64 << 10);
                }
                return Ok(Some(Line {
                    bytes: &self.buf,
                    consumed,
                    newline: true,
                    too_long,
                }));
            }
        }
    }
}

/// Why a line was skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkipReason {
    /// The line could not be turned into an event.
    Line(LineError),
    /// Longer than [`MAX_LINE`].
    TooLong,
}

impl std::fmt::Display for SkipReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SkipReason::Line(error) => error.fmt(f),
            SkipReason::TooLong => write!(f, "longer than {} MiB", MAX_LINE >> 20),
        }
    }
}

/// What happened to one input.
#[derive(Debug, Default, Clone)]
pub struct FileReport {
    /// Lines read.
    pub lines: u64,
    /// Events taken from them.
    pub events: u64,
    /// Events passed over because an earlier input held them (another snapshot of the same
    /// process): not damage.
    pub repeated: u64,
    /// Lines skipped (a cut-short last line not included).
    pub skipped: u64,
    /// The first few skipped lines: line number and why.
    pub first_skips: Vec<(u64, SkipReason)>,
    /// Number of the last line, when it was cut short (no newline, incomplete JSON):
    /// where a process killed while writing stopped, so the end of the trace, not damage.
    pub cut_short: Option<u64>,
    /// Number of the first line that held a line cut short at a page end of the file
    /// (where a process killed while writing stopped) and, right after it, a whole line
    /// another process appended: the whole line is used, and this is not damage.
    pub cut_inside: Option<u64>,
    /// Reading stopped early on an I/O error.
    pub read_error: Option<String>,
    /// Lines used but of a kind this tool does not know (passed along as they are).
    pub unknown_kinds: u64,
    /// Lines used but with keys their kind does not have (the keys are not read).
    pub unknown_keys: u64,
    /// The first few of those: line number and what was not known.
    pub first_notes: Vec<(u64, LineNote)>,
}

impl FileReport {
    const EXAMPLES: usize = 2;

    fn skip(&mut self, line: u64, reason: SkipReason) {
        self.skipped += 1;
        if self.first_skips.len() < Self::EXAMPLES {
            self.first_skips.push((line, reason));
        }
    }

    fn note(&mut self, line: u64, note: LineNote) {
        match note {
            LineNote::UnknownKind(_) => self.unknown_kinds += 1,
            LineNote::UnknownKey { .. } => self.unknown_keys += 1,
        }
        if self.first_notes.len() < Self::EXAMPLES {
            self.first_notes.push((line, note));
        }
    }

    /// True when the input had lines or keys the tool does not know (it used them as far
    /// as it knows them; this is not damage).
    pub fn has_notes(&self) -> bool {
        !self.first_notes.is_empty()
    }

    /// True when something in the input was not used (a last line cut short aside: a
    /// process killed while it wrote a line leaves one, and that is where its trace
    /// ends).
    pub fn damaged(&self) -> bool {
        self.skipped > 0 || self.read_error.is_some() || (self.events == 0 && self.repeated == 0)
    }

    /// The one-line account of a damaged input (without the file name).
    pub fn message(&self) -> String {
        let mut parts = Vec::new();
        if self.lines == 0 {
            parts.push("empty file, no Trace2 events".to_owned());
        } else if self.events == 0
            && self.skipped == 0
            && self.cut_short.is_none()
            && self.cut_inside.is_none()
        {
            parts.push("no Trace2 events".to_owned());
        }
        if self.skipped > 0 {
            let examples: Vec<String> = self
                .first_skips
                .iter()
                .map(|(line, why)| format!("line {line}: {why}"))
                .collect();
            let more = if self.skipped > self.first_skips.len() as u64 {
                ", …"
            } else {
                ""
            };
            parts.push(format!(
                "skipped {} of {} lines ({}{more})",
                self.skipped,
                self.lines,
                examples.join("; ")
            ));
        }
        if let Some(line) = self.cut_inside {
            parts.push(format!(
                "line {line} starts with a line cut short at a page end (where a killed process stopped writing), skipped, and goes on with another process's line, used"
            ));
        }
        if let Some(line) = self.cut_short {
            parts.push(format!(
                "last line {line} is cut short, skipped (where a killed process stopped writing)"
            ));
        }
        if let Some(error) = &self.read_error {
            parts.push(format!("read error after line {}: {error}", self.lines));
        }
        if self.has_notes() {
            let examples: Vec<String> = self
                .first_notes
                .iter()
                .map(|(line, note)| format!("line {line}: {note}"))
                .collect();
            let more = if self.unknown_kinds + self.unknown_keys > self.first_notes.len() as u64 {
                ", …"
            } else {
                ""
            };
            let lines = |n: u64| {
                if n == 1 {
                    "1 line".to_owned()
                } else {
                    format!("{n} lines")
                }
            };
            let mut counts = Vec::new();
            if self.unknown_kinds > 0 {
                counts.push(format!(
                    "{} of a kind this tool does not know, passed along",
                    lines(self.unknown_kinds)
                ));
            }
            if self.unknown_keys > 0 {
                counts.push(format!(
                    "{} with keys it does not read",
                    lines(self.unknown_keys)
                ));
            }
            parts.push(format!(
                "{} ({}{more})",
                counts.join(", "),
                examples.join("; ")
            ));
        }
        if self.events > 0 && self.damaged() {
            parts.push(format!("{} events used", self.events));
        }
        parts.join("; ")
    }
}

/// What happened to every input, in order, for the messages and the exit code.
#[derive(Debug, Default)]
pub struct Report {
    /// Each input by name, in the order read.
    pub inputs: Vec<(String, InputReport)>,
}

/// What happened to one input.
#[derive(Debug, Clone)]
pub enum InputReport {
    /// It was read; here is how it went.
    Read(FileReport),
    /// It could not be read at all, for this reason.
    Unread(String),
}

impl Report {
    fn file(&mut self, name: &str, file: FileReport) {
        self.inputs.push((name.to_owned(), InputReport::Read(file)));
    }

    fn problem(&mut self, name: &str, why: &str) {
        self.inputs
            .push((name.to_owned(), InputReport::Unread(why.to_owned())));
    }

    /// One line per damaged, foreign or unreadable input, per input with lines or keys
    /// the tool does not know, and per input whose last line is cut short, in input
    /// order.
    pub fn messages(&self) -> Vec<String> {
        self.inputs
            .iter()
            .filter_map(|(name, input)| match input {
                InputReport::Read(file)
                    if file.damaged()
                        || file.has_notes()
                        || file.cut_short.is_some()
                        || file.cut_inside.is_some() =>
                {
                    Some(format!(
                        "trace2: {}: {}",
                        visible(name),
                        visible(&file.message())
                    ))
                }
                InputReport::Read(_) => None,
                InputReport::Unread(why) => {
                    Some(format!("trace2: {}: {}", visible(name), visible(why)))
                }
            })
            .collect()
    }

    /// True when every input was read whole.
    pub fn clean(&self) -> bool {
        self.inputs.iter().all(|(_, input)| match input {
            InputReport::Read(file) => !file.damaged(),
            InputReport::Unread(_) => false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines_of(input: &[u8]) -> Vec<(Vec<u8>, bool, bool)> {
        let mut reader = LineReader::new(BufReader::with_capacity(7, input));
        let mut out = Vec::new();
        while let Some(line) = reader.next_line().unwrap() {
            out.push((line.bytes.to_vec(), line.newline, line.too_long));
        }
        out
    }

    #[test]
    fn splits_lines_across_buffer_refills() {
        assert_eq!(
            lines_of(b"first line\n\nthird, longer than the buffer\nlast"),
            vec![
                (b"first line".to_vec(), true, false),
                (b"".to_vec(), true, false),
                (b"third, longer than the buffer".to_vec(), true, false),
                (b"last".to_vec(), false, false),
            ]
        );
        assert!(lines_of(b"").is_empty());
    }

    #[test]
    fn overlong_lines_are_dropped_not_held() {
        let mut input = vec![b'x'; MAX_LINE + 10];
        input.extend_from_slice(b"\nnext\n");
        let lines = lines_of(&input);
        assert_eq!(lines.len(), 2);
        assert!(lines[0].2 && lines[0].0.is_empty());
        assert_eq!(lines[1], (b"next".to_vec(), true, false));
    }

    fn read(input: &'static [u8]) -> (FileReport, Vec<String>) {
        let mut names = Vec::new();
        let report = read_event_lines(Box::new(input), &Progress::hidden(), &mut |ev| {
            names.push(ev.name().to_owned())
        });
        (report, names)
    }

    #[test]
    fn damaged_lines_are_counted_and_the_rest_used() {
        let (report, names) = read(
            b"{\"event\":\"version\",\"sid\":\"s\",\"thread\":\"main\",\"evt\":\"4\",\"exe\":\"2.47.3\"}\n\
              not json\n\
              {\"level\":\"info\"}\n\
              \n\
              {\"event\":\"exit\",\"sid\":\"s\",\"thread\":\"main\",\"t_abs\":0.5,\"code\":0}\n\
              {\"event\":\"atexit\",\"sid\":\"s\",\"thr",
        );
        assert_eq!(names, ["version", "exit"]);
        assert_eq!(report.lines, 6);
        assert_eq!(report.skipped, 2);
        assert_eq!(report.cut_short, Some(6));
        let message = report.message();
        assert!(
            message.contains("skipped 2 of 6 lines (line 2: not JSON"),
            "{message}"
        );
        assert!(
            message.contains("line 3: not a Trace2 event (missing field `event`)"),
            "{message}"
        );
        assert!(message.contains("last line 6 is cut short"), "{message}");
        assert!(report.damaged());
    }

    #[test]
    fn a_last_line_cut_short_is_the_end_of_the_trace_not_damage() {
        let (report, names) = read(
            b"{\"event\":\"version\",\"sid\":\"s\",\"thread\":\"main\",\"evt\":\"4\",\"exe\":\"2.47.3\"}\n\
              {\"event\":\"printf\",\"sid\":\"s\",\"thr",
        );
        assert_eq!(names, ["version"]);
        assert_eq!(report.cut_short, Some(2));
        assert!(!report.damaged());
        assert_eq!(
            report.message(),
            "last line 2 is cut short, skipped (where a killed process stopped writing)"
        );
        let mut inputs = Report::default();
        inputs.file("killed.event", report);
        assert!(inputs.clean());
        assert_eq!(inputs.messages().len(), 1);
    }

    /// A process killed in the middle of a `write` leaves a line cut at a page end of the
    /// file; another process appends its next line right after it.
    #[test]
    fn a_line_cut_at_a_page_end_then_another_processs_line() {
        let version = "{\"event\":\"version\",\"sid\":\"s\",\"thread\":\"main\",\"evt\":\"4\",\"exe\":\"2.47.3\"}\n";
        let printf = |msg: &str| {
            format!(
                "{{\"event\":\"printf\",\"sid\":\"s\",\"thread\":\"main\",\"msg\":\"{msg}\"}}\n"
            )
        };
        let exit =
            "{\"event\":\"exit\",\"sid\":\"s\",\"thread\":\"main\",\"t_abs\":0.5,\"code\":0}\n";
        // Lines up to a page end, the last one cut there; then the other process's line.
        let mut input = version.to_owned();
        while input.len() + 200 < 4096 {
            input.push_str(&printf("a"));
        }
        let cut = printf(&"x".repeat(300));
        input.push_str(&cut[..4096 - input.len()]);
        assert_eq!(input.len(), 4096);
        input.push_str(exit);
        let input: &'static [u8] = Box::leak(input.into_bytes().into_boxed_slice());
        let (report, names) = read(input);
        assert_eq!(names.last().map(String::as_str), Some("exit"));
        assert_eq!(report.skipped, 0);
        let cut_line = report.lines;
        assert_eq!(report.cut_inside, Some(cut_line));
        assert!(!report.damaged());
        assert!(
            report
                .message()
                .contains("starts with a line cut short at a page end")
        );

        // Not at a page end: damage, as before.
        let moved: &'static [u8] = Box::leak([b"  ", input].concat().into_boxed_slice());
        let (report, names) = read(moved);
        assert_ne!(names.last().map(String::as_str), Some("exit"));
        assert_eq!(report.cut_inside, None);
        assert!(report.damaged());
    }

    #[test]
    fn a_file_named_twice_is_read_once() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.event");
        std::fs::write(&file, "{}\n").unwrap();
        let other = dir.path().join("b.event");
        std::fs::write(&other, "{}\n").unwrap();
        let named = [
            file.clone(),
            dir.path().to_owned(),
            file.clone(),
            PathBuf::from("-"),
        ];
        let specs = expand(&named);
        let paths: Vec<_> = specs.iter().map(|s| s.path.clone()).collect();
        assert_eq!(paths, [Some(file), Some(other), None]);
    }

    #[test]
    fn invalid_utf8_is_kept() {
        let (report, names) =
            read(b"{\"event\":\"error\",\"sid\":\"s\",\"thread\":\"main\",\"msg\":\"bad \xff\"}\n");
        assert_eq!(names, ["error"]);
        assert!(!report.damaged());
    }

    #[test]
    fn an_empty_input_is_reported() {
        let (report, _) = read(b"");
        assert!(report.damaged());
        assert_eq!(report.message(), "empty file, no Trace2 events");
    }
}
