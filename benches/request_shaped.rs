//! The cost of tracing per request of a web service: the CPU time of the whole process
//! per request (`getrusage(RUSAGE_SELF)`: every thread, the runtime's workers and our
//! background writer or flusher alike), untraced and traced, beside the floor of any layer
//! filtered as ours is and the fastest published layers.
//!
//! The service is an axum `Router` behind tower-http's `TraceLayer`, as in
//! `examples/web.rs`: per request a `request` span at DEBUG with `method`, `uri` and
//! `version` fields, the `#[instrument]` handler's `item` span inside it, and tower-http's
//! two DEBUG events (`started processing request`, `finished processing request`). The
//! handler suspends once (as a database call would) and renders its answer, hashing it
//! [`RENDER_PASSES`] times: about 36 µs of CPU per request untraced, close to what the real
//! service of `examples/web.rs` costs per request (34 µs, parsing and sockets included).
//!
//! The requests are served in process on a two-worker multi-thread tokio runtime, without
//! sockets: [`CONNECTIONS`] tasks, each sending its share of the requests one after the
//! other through the router (as hyper drives a keep-alive connection) and reading the
//! whole body. Sockets would add the same kernel work to every configuration and a client
//! to the process's CPU time, noise for a ratio of a few per cent; without them, callgrind
//! counts the requests exactly. With many connections on two workers, a request's span is
//! often open while a worker polls another one, and the spans move between workers, as in
//! the real service.
//!
//! Every configuration runs in a process of its own (this bench binary started again with
//! `--child <configuration> <requests>`) whose global subscriber is the program's own (the
//! registry and an fmt layer showing warnings, writing nowhere) plus, when traced, one of:
//!
//! - `registry`: a layer that does nothing behind tracing-subscriber's `Filtered` with our
//!   filter (DEBUG spans, INFO events). The spans now exist, so the Registry makes,
//!   enters, exits and closes them, and both per-layer filters (the program's and this
//!   one) look each span up in the Registry at every enter, exit and close. The floor of
//!   any layer installed with `.with_filter(..)`, as the peers below are.
//! - `floor`: the same do-nothing layer filtered as ours is (`FilteredLayer`, see
//!   `support/floor.rs`): the same filter decides what it sees, but enter, exit and close
//!   go to the layer without `Filtered`'s look-up (18 per request). Our layer's floor:
//!   what is left is the Registry's spans, `Layered`'s dispatch, the program's own fmt
//!   `Filtered` and our filter's decisions.
//! - `binary` (the t2b target), `flight` (the flight recorder), `event-bg` (the Event
//!   target through the background writer), `event` (the Event target written directly).
//! - `fmt`: tracing-subscriber's fmt layer at DEBUG writing to a file.
//! - `perfetto`: tracing-perfetto-file (Perfetto's protobuf from per-thread buffers, the
//!   fastest published layer in `peers`) with fields and call sites, as `peers` builds it,
//!   writing to a file; the flush writes its buffers out.
//! - `chrome`: tracing-chrome with its fields (its writer thread formats the JSON),
//!   writing to a file; the flush waits until its writer has written everything queued.
//!
//! `perfetto` and `chrome` sit behind our filter (`Trace2Filter`, DEBUG spans and INFO
//! events), so they see exactly the spans and events our layer sees: the two spans per
//! request (tower-http's two events are DEBUG, below the events' level). Each child
//! serves [`WARM_UP`] requests, then measures [`REQUESTS`] requests and the flush that
//! writes them out; the children of one round run one after the other and rounds
//! alternate, so that a change of the machine's load hits every configuration alike.
//!
//! `cargo bench --bench request_shaped` (about a minute) prints a Markdown table: the
//! median CPU µs per request (and its system part), its ratio to `untraced` (median of
//! per-round ratios) and the bytes written per request. For instruction counts, run the
//! bench binary under callgrind as `<bench> --child <configuration> <requests>`: the
//! difference between two request counts is the cost of the requests alone.

#[path = "support/floor.rs"]
mod floor;
#[path = "support/program.rs"]
mod program;

use std::cell::Cell;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, mpsc};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path as UrlPath, State};
use axum::http::{Request, Version};
use axum::routing::get;
use program::program_layer;
use tower_http::trace::TraceLayer;
use tower_service::Service;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::Identity;
use tracing_subscriber::prelude::*;
use tracing_subscriber::{Layer, Registry};
use tracing_trace2::{BackgroundOptions, Levels, Settings, Trace2, Trace2Filter, Trace2Layer};

/// Keep-alive connections served side by side.
const CONNECTIONS: usize = 32;
/// Requests each child serves before it measures.
const WARM_UP: usize = 2_000;
/// Requests each child measures.
const REQUESTS: usize = 8_000;
/// Interleaved rounds (one child per configuration each).
const ROUNDS: usize = 9;
/// Passes over the rendered answer: the handler's work (see the module documentation).
const RENDER_PASSES: u32 = 200;

/// The configurations, and the goal of each as a ratio to `untraced`.
const CONFIGS: [(&str, Option<f64>); 10] = [
    ("untraced", None),
    ("registry", None),
    ("floor", None),
    ("binary", Some(1.05)),
    ("flight", Some(1.05)),
    ("event-bg", Some(1.05)),
    ("event", Some(1.10)),
    ("fmt", None),
    ("perfetto", None),
    ("chrome", None),
];

/// The items the service answers about.
struct Catalog {
    names: Vec<String>,
}

/// FNV-1a: the stand-in for real work on bytes.
fn hash(bytes: &[u8], mut h: u64) -> u64 {
    for &b in bytes {
        h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
    }
    h
}

/// `GET /item/{id}`: a lookup that suspends once, then renders the item.
#[tracing::instrument(skip(catalog))]
async fn item(UrlPath(id): UrlPath<u64>, State(catalog): State<Arc<Catalog>>) -> String {
    tokio::task::yield_now().await;
    let name = &catalog.names[id as usize % catalog.names.len()];
    let body = format!("item {id}: {name}\n");
    let h = (0..RENDER_PASSES).fold(0xcbf2_9ce4_8422_2325, |h, _| {
        hash(std::hint::black_box(body.as_bytes()), h)
    });
    std::hint::black_box(h);
    body
}

fn router() -> Router {
    let catalog = Arc::new(Catalog {
        names: (0..64)
            .map(|i| format!("{} widget number {i}", "a long product name, ".repeat(6)))
            .collect(),
    });
    Router::new()
        .route("/item/{id}", get(item))
        .layer(TraceLayer::new_for_http())
        .with_state(catalog)
}

/// One connection: `requests` requests one after the other, each answer read whole.
async fn connection(mut router: Router, first: usize, requests: usize) {
    for id in first..first + requests {
        let request = Request::builder()
            .method("GET")
            .uri(format!("/item/{id}"))
            .version(Version::HTTP_11)
            .header("host", "127.0.0.1")
            .header("user-agent", "request-shaped")
            .body(Body::empty())
            .expect("a valid request");
        let response = router.call(request).await.expect("infallible");
        assert!(response.status().is_success());
        let body = axum::body::to_bytes(response.into_body(), 1 << 16)
            .await
            .expect("the whole body");
        assert!(body.starts_with(format!("item {id}:").as_bytes()));
    }
}

/// Serves `requests` requests on [`CONNECTIONS`] connections.
async fn serve(router: &Router, first: usize, requests: usize) {
    let per = requests.div_ceil(CONNECTIONS);
    let tasks: Vec<_> = (0..CONNECTIONS)
        .map(|c| {
            let from = first + c * per;
            let n = per.min((first + requests).saturating_sub(from));
            tokio::spawn(connection(router.clone(), from, n))
        })
        .collect();
    for task in tasks {
        task.await.expect("a connection task");
    }
}

/// CPU time of the whole process so far (user, system; every thread), in ns.
fn process_cpu_ns() -> (u128, u128) {
    // SAFETY: `getrusage` fills the zeroed struct it is given and reads nothing else.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let ns = |t: libc::timeval| t.tv_sec as u128 * 1_000_000_000 + t.tv_usec as u128 * 1_000;
    (ns(usage.ru_utime), ns(usage.ru_stime))
}

/// Installs `config`'s global subscriber writing to `file`; returns what flushes it.
fn install(config: &str, file: &Path) -> Box<dyn Fn()> {
    let path = file.display().to_string();
    let mut settings = Settings::default();
    let mut trace2 = None;
    match config {
        "untraced" => Registry::default().with(program_layer()).init(),
        // A layer that does nothing behind tracing-subscriber's `Filtered` with our
        // filter (DEBUG spans, INFO events). The spans now exist, so the Registry makes,
        // enters, exits and closes them and both per-layer filters look them up at
        // every enter, exit and close.
        "registry" => Registry::default()
            .with(program_layer())
            .with(Identity::new().with_filter(Trace2Filter::new(Levels::default())))
            .init(),
        // The floor of a layer filtered as ours is (`FilteredLayer`): the same filter,
        // without `Filtered`'s look-ups at enter, exit and close (support/floor.rs).
        "floor" => Registry::default()
            .with(program_layer())
            .with(floor::floor())
            .init(),
        "perfetto" => {
            // As `peers` builds it: fields and call sites recorded, as our binary target
            // records them; its per-thread buffers written out by the flush.
            let out = File::create(file).expect("the perfetto file");
            let (layer, guard) = tracing_perfetto_file::PerfettoLayer::builder(out)
                .with_debug_annotations()
                .with_source_locations()
                .build();
            Registry::default()
                .with(program_layer())
                .with(layer.with_filter(Trace2Filter::new(Levels::default())))
                .init();
            return Box::new(move || {
                guard.flush().expect("the perfetto flush");
            });
        }
        "chrome" => {
            // Its writer thread writes the warm-up into a file of its own; each flush
            // moves it on to the next file once everything queued before is written.
            let (layer, guard) = tracing_chrome::ChromeLayerBuilder::new()
                .file(file.with_extension("warm"))
                .include_args(true)
                .build();
            Registry::default()
                .with(program_layer())
                .with(layer.with_filter(Trace2Filter::new(Levels::default())))
                .init();
            let files = [file.to_path_buf(), file.with_extension("next")];
            let turn = Cell::new(0);
            return Box::new(move || {
                drain_chrome(&guard, &files[turn.get() % 2]);
                turn.set(turn.get() + 1);
            });
        }
        "fmt" => {
            // Each line one `write` to the shared file, as fmt writes to a `File`.
            let out = Arc::new(File::create(file).expect("the fmt file"));
            Registry::default()
                .with(program_layer())
                .with(
                    tracing_subscriber::fmt::layer()
                        .with_ansi(false)
                        .with_writer(out)
                        .with_filter(LevelFilter::DEBUG),
                )
                .init();
        }
        "binary" => trace2 = Some(Trace2::with_settings(settings).with_binary_target(path)),
        "flight" => {
            let dir = file.with_extension("flight");
            std::fs::create_dir_all(&dir).expect("the flight directory");
            trace2 = Some(
                Trace2::with_settings(settings).with_flight_recorder(dir.display().to_string()),
            );
        }
        "event-bg" => {
            settings.event_destination = Some(path);
            trace2 = Some(
                Trace2::with_settings(settings).with_background_writer(BackgroundOptions::new()),
            );
        }
        "event" => {
            settings.event_destination = Some(path);
            trace2 = Some(Trace2::with_settings(settings));
        }
        _ => panic!("unknown configuration {config}"),
    }
    let Some(trace2) = trace2 else {
        return Box::new(|| {});
    };
    let (layer, guard) = trace2
        .with_exe_version("bench")
        .unfiltered_layer_with_guard();
    let layer: Trace2Layer = layer.expect("a target is enabled");
    Registry::default()
        .with(program_layer())
        .with(layer.clone().filtered())
        .init();
    // The writers run until the process exits.
    std::mem::forget(guard);
    Box::new(move || layer.flush())
}

/// Waits until tracing-chrome's writer thread has written everything queued so far
/// (finishing its current file), and moves it on to `next`.
fn drain_chrome(guard: &tracing_chrome::FlushGuard, next: &Path) {
    /// A file that reports its first write: the writer makes it once it has finished
    /// the file before.
    struct Reporting {
        file: File,
        tx: Option<mpsc::Sender<()>>,
    }
    impl Write for Reporting {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let n = self.file.write(buf)?;
            if let Some(tx) = self.tx.take() {
                let _ = tx.send(());
            }
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            self.file.flush()
        }
    }
    let (tx, rx) = mpsc::channel();
    let file = File::create(next).expect("the next chrome file");
    guard.start_new(Some(Box::new(Reporting { file, tx: Some(tx) })));
    guard.flush();
    rx.recv_timeout(Duration::from_secs(120))
        .expect("tracing-chrome's writer");
}

/// The child: serves [`WARM_UP`] requests, then `requests` measured ones; prints the
/// CPU ns they and the flush took, the system part of it, and the bytes written.
fn child(config: &str, requests: usize, file: &Path) {
    let flush = install(config, file);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let router = router();
    runtime.block_on(serve(&router, 0, WARM_UP));
    flush();
    let size_before = std::fs::metadata(file).map_or(0, |m| m.len());
    let start = process_cpu_ns();
    runtime.block_on(serve(&router, WARM_UP, requests));
    flush();
    let end = process_cpu_ns();
    let size = std::fs::metadata(file).map_or(0, |m| m.len()) - size_before;
    println!(
        "{} {} {size}",
        end.0 + end.1 - start.0 - start.1,
        end.1 - start.1
    );
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("request_shaped");
    if let Some(pos) = args.iter().position(|a| a == "--child") {
        let config = args.get(pos + 1).expect("a configuration");
        let requests = args
            .get(pos + 2)
            .and_then(|n| n.parse().ok())
            .unwrap_or(REQUESTS);
        std::fs::create_dir_all(&dir).expect("the bench directory");
        child(config, requests, &dir.join(config));
        return;
    }
    // `cargo test --benches` runs bench targets with `--bench` absent: do nothing then.
    if !args.iter().any(|a| a == "--bench") {
        return;
    }
    let exe = std::env::current_exe().expect("own path");
    let mut cpu: Vec<Vec<f64>> = vec![Vec::new(); CONFIGS.len()];
    let mut sys: Vec<Vec<f64>> = vec![Vec::new(); CONFIGS.len()];
    let mut bytes = vec![0.0; CONFIGS.len()];
    for _ in 0..ROUNDS {
        for (i, (config, _)) in CONFIGS.iter().enumerate() {
            let out = Command::new(&exe)
                .args(["--child", config, &REQUESTS.to_string()])
                .env_clear()
                .env("PATH", std::env::var_os("PATH").unwrap_or_default())
                .output()
                .expect("the child");
            assert!(out.status.success(), "{config}: {out:?}");
            let text = String::from_utf8_lossy(&out.stdout);
            let mut words = text
                .split_whitespace()
                .map(|w| w.parse::<f64>().expect("a number"));
            cpu[i].push(words.next().expect("CPU ns") / REQUESTS as f64);
            sys[i].push(words.next().expect("system ns") / REQUESTS as f64);
            bytes[i] = words.next().expect("bytes") / REQUESTS as f64;
        }
    }
    println!(
        "\n## Request-shaped: whole-process CPU µs per request (median of {ROUNDS} interleaved rounds, {REQUESTS} requests each)\n"
    );
    println!(
        "| configuration | CPU µs per request | of which system | ÷ untraced | goal | bytes per request |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    let fmt = CONFIGS.iter().position(|(c, _)| *c == "fmt");
    let ratio = |i: usize| {
        let ratios: Vec<f64> = cpu[i].iter().zip(&cpu[0]).map(|(r, b)| r / b).collect();
        median(&ratios)
    };
    for (i, (config, goal)) in CONFIGS.iter().enumerate() {
        let r = ratio(i);
        let goal = match goal {
            Some(g) => format!(
                "≤ {g:.2}{}",
                if r <= *g && fmt.is_none_or(|f| r < ratio(f)) {
                    " met"
                } else {
                    " **missed**"
                }
            ),
            None => "-".into(),
        };
        println!(
            "| {config} | {:.1} | {:.1} | {r:.3} | {goal} | {:.0} |",
            median(&cpu[i]) / 1000.0,
            median(&sys[i]) / 1000.0,
            bytes[i],
        );
    }
}
