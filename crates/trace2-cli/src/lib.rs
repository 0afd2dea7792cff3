//! `trace2`, the command-line tool that reads Git Trace2 traces: a summary a person reads in ten
//! seconds (`trace2 summary`), Chrome trace event JSON for the Perfetto UI, chrome://tracing
//! and speedscope (`trace2 export --format chrome`) and Perfetto's own protobuf trace
//! (`trace2 export --format perfetto`).
//!
//! Its input is Event-format JSON, as git writes it for `GIT_TRACE2_EVENT` (and as
//! `tracing-trace2` writes it): one file with one or many processes appended, or a directory of
//! per-process files; or binary (`t2b`) traces. Both become records (Event lines through the
//! Event reader of `tracing-trace2-event`), and each record the [`trace_event::TraceEvent`] the
//! summary and the exports work on (module [`record_event`]). Everything streams: memory grows
//! with the number of processes, not lines.
//!
//! The library behind the binary can be used directly:
//!
//! ```
//! use trace2_cli::record_event::with_line;
//! use trace2_cli::summary::Summariser;
//!
//! let trace = r#"{"event":"version","sid":"20260101T000000.000000Z-H0a7c9cdf-P00000010","thread":"main","time":"2026-01-01T00:00:00.000010Z","evt":"4","exe":"2.47.3"}
//! {"event":"start","sid":"20260101T000000.000000Z-H0a7c9cdf-P00000010","thread":"main","time":"2026-01-01T00:00:00.000020Z","t_abs":0.000020,"argv":["git","status"]}
//! {"event":"cmd_name","sid":"20260101T000000.000000Z-H0a7c9cdf-P00000010","thread":"main","time":"2026-01-01T00:00:00.000030Z","name":"status","hierarchy":"status"}
//! {"event":"region_enter","sid":"20260101T000000.000000Z-H0a7c9cdf-P00000010","thread":"main","time":"2026-01-01T00:00:00.000100Z","nesting":1,"category":"index","label":"do_read_index"}
//! {"event":"region_leave","sid":"20260101T000000.000000Z-H0a7c9cdf-P00000010","thread":"main","time":"2026-01-01T00:00:00.000600Z","t_rel":0.000500,"nesting":1,"category":"index","label":"do_read_index"}
//! {"event":"atexit","sid":"20260101T000000.000000Z-H0a7c9cdf-P00000010","thread":"main","time":"2026-01-01T00:00:00.001000Z","t_abs":0.001000,"code":0}"#;
//!
//! let mut summariser = Summariser::new();
//! for line in trace.lines() {
//!     with_line(line, |event| summariser.event(event)).unwrap();
//! }
//! let summary = summariser.finish();
//! let status = &summary.processes[0];
//! assert_eq!(status.name, "git:status");
//! assert_eq!(status.elapsed_us, 1000);
//! assert_eq!(status.regions[0].label, "do_read_index");
//! assert_eq!(status.regions[0].total_us, 500);
//! print!("{}", trace2_cli::summary::render_text(&summary, 10));
//! ```

pub mod binary_report;
pub mod export;
pub mod input;
pub mod process;
pub mod progress;
pub mod record_event;
pub mod repeats;
pub mod run;
pub mod stats;
pub mod summary;
pub mod time;
pub mod trace_event;
pub mod visible;
