//! One workload written to Normal, Perf and Event at once: the three streams tell the
//! same story — the same events in the same order on each thread, with the same elapsed
//! values (one clock reading per call, shared by all targets).

#[path = "support/mod.rs"]
mod support;

use std::collections::HashMap;

use serde_json::Value;
use tracing::{info, warn};
use tracing_subscriber::prelude::*;
use tracing_trace2::{Settings, Trace2, api};

/// Per thread name: each line's event name, `t_abs` and `t_rel` (as six-decimal text).
type PerThread = HashMap<String, Vec<(String, Option<String>, Option<String>)>>;

/// `sec6` of a JSON float, as text with six decimals.
fn secs(v: &Value) -> Option<String> {
    v.as_f64().map(|f| format!("{f:.6}"))
}

#[test]
fn three_streams_agree() {
    let dir = support::process::fresh_dir("consistency").unwrap();
    let path = |ext: &str| dir.join(format!("t.{ext}"));
    let mut settings = Settings::default();
    settings.normal_destination = Some(path("normal").display().to_string());
    settings.perf_destination = Some(path("perf").display().to_string());
    settings.event_destination = Some(path("event").display().to_string());
    settings.event_nesting = 9;
    tracing_subscriber::registry()
        .with(Trace2::with_settings(settings).layer())
        .init();

    api::start(&["prog", "arg"]);
    api::cmd_name("prog");
    let workers: Vec<_> = (0..3)
        .map(|t| {
            std::thread::spawn(move || {
                api::thread_start(&format!("worker{t}"));
                for i in 0..20 {
                    let span =
                        tracing::info_span!("step", trace2.category = "work", trace2.msg = "m");
                    let _e = span.enter();
                    let inner = tracing::info_span!("inner", trace2.category = "work");
                    inner.in_scope(|| info!(category = "work", key = "i", value = i));
                    info!("progress {t} {i}");
                }
                warn!("worker {t} done");
                api::thread_exit();
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    api::exit(3);
    api::atexit();

    let event = support::json_lines(std::fs::read_to_string(path("event")).unwrap().lines());
    let perf = std::fs::read_to_string(path("perf")).unwrap();
    let perf: Vec<Vec<String>> = perf
        .lines()
        .map(|l| l.split(" | ").map(|c| c.trim().to_owned()).collect())
        .collect();
    let normal = std::fs::read_to_string(path("normal")).unwrap();
    let normal: Vec<&str> = normal.lines().map(|l| &l[50..]).collect();

    // Perf writes every event; Event (nesting 9) too: same sequence per thread.
    assert_eq!(event.len(), perf.len());
    let mut per_thread_e: PerThread = HashMap::new();
    let mut per_thread_p: PerThread = HashMap::new();
    for v in &event {
        let name = v["event"].as_str().unwrap().to_owned();
        // Event leaves t_abs out of region lines; compare what both carry.
        let t_abs = if name.starts_with("region") {
            None
        } else {
            secs(&v["t_abs"])
        };
        per_thread_e
            .entry(v["thread"].as_str().unwrap().to_owned())
            .or_default()
            .push((name, t_abs, secs(&v["t_rel"])));
    }
    for cols in &perf {
        let opt = |s: &String| (!s.is_empty()).then(|| s.clone());
        let name = cols[3].clone();
        let t_abs = if name.starts_with("region") {
            None
        } else {
            opt(&cols[5])
        };
        per_thread_p
            .entry(cols[2].clone())
            .or_default()
            .push((name, t_abs, opt(&cols[6])));
    }
    for (thread, events) in &per_thread_e {
        let perfs = &per_thread_p[thread];
        assert_eq!(events.len(), perfs.len(), "{thread}");
        for (e, p) in events.iter().zip(perfs) {
            assert_eq!(e.0, p.0, "{thread}");
            assert_eq!(e.2, p.2, "t_rel of {} on {thread}", e.0);
            // Events whose t_abs Event writes: the same value in Perf.
            if e.1.is_some() {
                assert_eq!(e.1, p.1, "t_abs of {} on {thread}", e.0);
            }
        }
    }
    assert_eq!(per_thread_e.len(), 4);

    // Normal: only the summary events, in the same order per thread as Event.
    let summary: Vec<&Value> = event
        .iter()
        .filter(|v| {
            !matches!(
                v["event"].as_str().unwrap(),
                "region_enter"
                    | "region_leave"
                    | "data"
                    | "data_json"
                    | "thread_start"
                    | "thread_exit"
            )
        })
        .collect();
    assert_eq!(summary.len(), normal.len());
    // Normal names no thread, and nothing orders one line's Normal and Event writes
    // across threads: the order is compared per thread, found from the line's text
    // (the workers' messages name their worker; every other line is the main thread's).
    let lane = |text: &str| -> String {
        let mut words = text.split(' ');
        match (words.next(), words.next()) {
            (Some("progress" | "worker"), Some(t)) => t.to_owned(),
            _ => "main".to_owned(),
        }
    };
    let mut lanes: HashMap<String, (Vec<&Value>, Vec<&str>)> = HashMap::new();
    for v in &summary {
        let text = v["msg"].as_str().unwrap_or(v["event"].as_str().unwrap());
        lanes.entry(lane(text)).or_default().0.push(v);
    }
    for n in &normal {
        lanes.entry(lane(n)).or_default().1.push(n);
    }
    assert_eq!(lanes.len(), 4, "main and three workers");
    let pairs = lanes.values().flat_map(|(events, normals)| {
        assert_eq!(events.len(), normals.len());
        events.iter().zip(normals)
    });
    for (v, n) in pairs {
        let name = v["event"].as_str().unwrap();
        match name {
            "printf" => assert_eq!(*n, v["msg"].as_str().unwrap()),
            "exit" | "atexit" => {
                assert_eq!(
                    *n,
                    format!("{name} elapsed:{} code:3", secs(&v["t_abs"]).unwrap())
                );
            }
            _ => assert!(n.starts_with(name), "{n} vs {name}"),
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
