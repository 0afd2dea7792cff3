//! Writes the Chrome trace event JSON object one event at a time: `{"traceEvents":[` … `]` and
//! the trailing keys, each event on its own line so that the file streams and diffs well.

use std::io::{self, Write};

/// The document being written. Events go out as soon as they are complete; nothing is buffered
/// beyond the writer's own buffer.
pub struct ChromeJson<W: Write> {
    out: W,
    line: Vec<u8>,
    events: u64,
    /// Inside the `args` object of the current event.
    in_args: bool,
    /// No key written yet in the current object (event or args).
    first_key: bool,
}

impl<W: Write> ChromeJson<W> {
    /// Starts the document.
    pub fn new(mut out: W) -> io::Result<Self> {
        out.write_all(b"{\"traceEvents\":[\n")?;
        Ok(ChromeJson {
            out,
            line: Vec::with_capacity(512),
            events: 0,
            in_args: false,
            first_key: true,
        })
    }

    /// Events written so far.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Starts an event with its phase, name, pid, tid and timestamp (µs).
    pub fn begin(&mut self, ph: &str, name: &str, pid: u32, tid: u32, ts: i64) -> &mut Self {
        self.line.clear();
        if self.events > 0 {
            self.line.extend_from_slice(b",\n");
        }
        self.line.extend_from_slice(b"{\"ph\":");
        string(&mut self.line, ph);
        self.line.extend_from_slice(b",\"name\":");
        string(&mut self.line, name);
        self.first_key = false;
        self.in_args = false;
        self.int("pid", i64::from(pid));
        self.int("tid", i64::from(tid));
        self.int("ts", ts)
    }

    fn key(&mut self, key: &str) {
        if !self.first_key {
            self.line.push(b',');
        }
        self.first_key = false;
        string(&mut self.line, key);
        self.line.push(b':');
    }

    /// An integer key.
    pub fn int(&mut self, key: &str, value: i64) -> &mut Self {
        self.key(key);
        self.line
            .extend_from_slice(itoa::Buffer::new().format(value).as_bytes());
        self
    }

    /// A string key.
    pub fn str(&mut self, key: &str, value: &str) -> &mut Self {
        self.key(key);
        string(&mut self.line, value);
        self
    }

    /// A key whose value is JSON text already (a `data_json` value, an array).
    pub fn raw(&mut self, key: &str, json: &str) -> &mut Self {
        self.key(key);
        self.line.extend_from_slice(json.as_bytes());
        self
    }

    /// A key whose value is serialised here.
    pub fn value<T: serde::Serialize + ?Sized>(&mut self, key: &str, value: &T) -> &mut Self {
        self.key(key);
        // Serialising plain data into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut self.line, value);
        self
    }

    /// Opens `args`; the keys that follow go inside it.
    pub fn args(&mut self) -> &mut Self {
        self.key("args");
        self.line.push(b'{');
        self.first_key = true;
        self.in_args = true;
        self
    }

    /// Ends the event and writes it out.
    pub fn end(&mut self) -> io::Result<()> {
        if self.in_args {
            self.line.push(b'}');
            self.in_args = false;
        }
        self.line.push(b'}');
        self.events += 1;
        self.out.write_all(&self.line)
    }

    /// Ends the array and the document with `displayTimeUnit` and `otherData`.
    pub fn finish(mut self, other_data: &serde_json::Value) -> io::Result<W> {
        self.out
            .write_all(b"\n],\"displayTimeUnit\":\"ms\",\"otherData\":")?;
        serde_json::to_writer(&mut self.out, other_data)?;
        self.out.write_all(b"}\n")?;
        self.out.flush()?;
        Ok(self.out)
    }
}

fn string(buf: &mut Vec<u8>, text: &str) {
    // Strings are valid UTF-8 already (lines were made valid when read); serde escapes them.
    let _ = serde_json::to_writer(&mut *buf, text);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_a_document() {
        let mut doc = ChromeJson::new(Vec::new()).unwrap();
        doc.begin("X", "a \"b\"", 7, 7, 100)
            .int("dur", 5)
            .str("cat", "index")
            .args()
            .str("msg", "m\n")
            .raw("v", "[1,2]")
            .end()
            .unwrap();
        doc.begin("M", "process_name", 7, 7, 0)
            .args()
            .str("name", "git:status")
            .end()
            .unwrap();
        assert_eq!(doc.events(), 2);
        let bytes = doc
            .finish(&serde_json::json!({"format": "trace2"}))
            .unwrap();
        let text = String::from_utf8(bytes).unwrap();
        let parsed: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(parsed["traceEvents"][0]["name"], "a \"b\"");
        assert_eq!(parsed["traceEvents"][0]["args"]["v"][1], 2);
        assert_eq!(parsed["traceEvents"][1]["args"]["name"], "git:status");
        assert_eq!(parsed["otherData"]["format"], "trace2");
        assert_eq!(parsed["displayTimeUnit"], "ms");
    }
}
