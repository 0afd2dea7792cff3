//! A large Event trace made up for memory and speed measurements: processes that each run
//! nested regions with data inside, short-lived threads with their own regions and counters, and
//! children; the lines look like git's (same keys, `time`, `file`, `line`).

use std::io::{self, Write};

/// Writes about `lines` Event lines in `processes` processes (appended one after the other).
pub fn write_trace(out: &mut impl Write, lines: usize, processes: usize) -> io::Result<()> {
    let per_process = lines / processes.max(1);
    for p in 0..processes {
        let sid = format!("20260101T000000.{p:06}Z-H0a7c9cdf-P{:08x}", 1000 + p);
        let mut clock = Clock {
            us: 1_000_000 * p as u64,
            start: 1_000_000 * p as u64,
        };
        let mut w = Lines {
            out: &mut *out,
            sid: &sid,
            written: 0,
        };
        w.line(&clock, "main", r#""version","evt":"4","exe":"2.47.3""#)?;
        clock.tick(5);
        w.line(
            &clock,
            "main",
            &format!(
                r#""start","t_abs":{},"argv":["git","synthetic","--run={p}"]"#,
                clock.t_abs()
            ),
        )?;
        w.line(
            &clock,
            "main",
            r#""cmd_name","name":"synthetic","hierarchy":"synthetic""#,
        )?;
        let mut i = 0;
        let mut threads = 0;
        while w.written < per_process.saturating_sub(3) {
            let label = format!("step{:02}", i % 16);
            w.line(&clock, "main", &format!(r#""region_enter","repo":1,"nesting":1,"category":"work","label":"{label}","msg":"item {i}""#))?;
            let outer = clock.us;
            clock.tick(3);
            w.line(
                &clock,
                "main",
                r#""region_enter","repo":1,"nesting":2,"category":"work","label":"inner""#,
            )?;
            let inner = clock.us;
            clock.tick(7);
            w.line(&clock, "main", &format!(r#""data","repo":1,"t_abs":{},"t_rel":{},"nesting":3,"category":"work","key":"size","value":"{}""#, clock.t_abs(), secs(clock.us - inner), i * 7))?;
            clock.tick(2);
            w.line(&clock, "main", &format!(r#""region_leave","repo":1,"t_rel":{},"nesting":2,"category":"work","label":"inner""#, secs(clock.us - inner)))?;
            clock.tick(4);
            w.line(&clock, "main", &format!(r#""region_leave","repo":1,"t_rel":{},"nesting":1,"category":"work","label":"{label}","msg":"item {i}""#, secs(clock.us - outer)))?;
            if i % 50 == 49 {
                threads += 1;
                let name = format!("th{threads:02}:worker");
                let started = clock.us;
                w.line(&clock, &name, r#""thread_start""#)?;
                clock.tick(2);
                w.line(
                    &clock,
                    &name,
                    r#""region_enter","nesting":1,"category":"pool","label":"task""#,
                )?;
                let task = clock.us;
                clock.tick(20);
                w.line(
                    &clock,
                    &name,
                    &format!(
                        r#""region_leave","t_rel":{},"nesting":1,"category":"pool","label":"task""#,
                        secs(clock.us - task)
                    ),
                )?;
                w.line(
                    &clock,
                    &name,
                    r#""th_counter","category":"pool","name":"tasks","count":1"#,
                )?;
                clock.tick(1);
                w.line(
                    &clock,
                    &name,
                    &format!(r#""thread_exit","t_rel":{}"#, secs(clock.us - started)),
                )?;
            }
            if i % 200 == 199 {
                let child = i / 200;
                w.line(&clock, "main", &format!(r#""child_start","child_id":{child},"child_class":"?","use_shell":false,"argv":["git","helper","{child}"]"#))?;
                let started = clock.us;
                clock.tick(30);
                w.line(
                    &clock,
                    "main",
                    &format!(
                        r#""child_exit","child_id":{child},"pid":{},"code":0,"t_rel":{}"#,
                        50_000 + child,
                        secs(clock.us - started)
                    ),
                )?;
            }
            clock.tick(1);
            i += 1;
        }
        w.line(
            &clock,
            "main",
            &format!(r#""exit","t_abs":{},"code":0"#, clock.t_abs()),
        )?;
        w.line(
            &clock,
            "main",
            &format!(r#""counter","category":"pool","name":"tasks","count":{threads}"#),
        )?;
        clock.tick(1);
        w.line(
            &clock,
            "main",
            &format!(r#""atexit","t_abs":{},"code":0"#, clock.t_abs()),
        )?;
    }
    Ok(())
}

struct Lines<'a, W> {
    out: &'a mut W,
    sid: &'a str,
    written: usize,
}

impl<W: Write> Lines<'_, W> {
    /// `body` is the event name (quoted) followed by its own keys.
    fn line(&mut self, clock: &Clock, thread: &str, body: &str) -> io::Result<()> {
        self.written += 1;
        let (event, rest) = body.split_at(body.find(',').unwrap_or(body.len()));
        writeln!(
            self.out,
            r#"{{"event":{event},"sid":"{}","thread":"{thread}","time":"{}","file":"synthetic.c","line":{}{rest}}}"#,
            self.sid,
            clock.time(),
            100 + self.written % 900,
        )
    }
}

struct Clock {
    us: u64,
    start: u64,
}

impl Clock {
    fn tick(&mut self, us: u64) {
        self.us += us;
    }

    fn time(&self) -> String {
        let s = self.us / 1_000_000;
        format!(
            "2026-01-01T{:02}:{:02}:{:02}.{:06}Z",
            s / 3600 % 24,
            s / 60 % 60,
            s % 60,
            self.us % 1_000_000
        )
    }

    fn t_abs(&self) -> String {
        secs(self.us - self.start)
    }
}

fn secs(us: u64) -> String {
    format!("{}.{:06}", us / 1_000_000, us % 1_000_000)
}
