//! A long-running tokio server traced with Trace2, shaped like tokio's mini-redis: a
//! `#[tokio::main]` multi-thread runtime, a TCP listener on 127.0.0.1, long-lived
//! connections, an `#[instrument] async fn` per connection and per request, and the
//! Trace2 lifecycle started as the README tells a new user (no runtime hooks).
//!
//! ```sh
//! GIT_TRACE2_EVENT=/tmp/server.event GIT_TRACE2_PERF=/tmp/server.perf \
//!     cargo run --example server -- serve 120      # prints "listening on 127.0.0.1:<port>"
//! cargo run --example server -- client <port> 30 4  # 30 connections, 4 requests each
//! ```
//!
//! The protocol is one line per request: `PING <n>` is answered `PONG <n>`. The server
//! stops once it has answered the given number of requests (0: no limit) or on Ctrl-C
//! (SIGINT), then returns from `main`, dropping the lifecycle's guard while the
//! runtime's workers are still alive: every worker and task lane still gets its
//! `thread_exit` before `atexit`. The client opens its connections in waves (a few at
//! a time, each kept open a while), so that connections overlap on the workers and
//! their regions need task lanes; their number stays bounded however many connections
//! come over time. `tests/server.rs` runs both and checks the stream.

use std::io::{BufRead, BufReader, Write};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader as AsyncBufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tracing::{info, instrument};
use tracing_trace2::{Counter, PerThread, Trace2, api};

/// Connections the client keeps open at once.
pub const WAVE: usize = 5;
/// How long the client keeps each connection open between its requests.
pub const PAUSE: Duration = Duration::from_millis(4);
/// Worker threads of the server's runtime.
pub const WORKERS: usize = 2;

/// Requests answered, per worker thread (`th_counter` when each worker ends) and in all
/// (`counter` before `atexit`).
pub static ANSWERED: Counter = Counter::new("server", "answered", PerThread::Yes);

/// What the server shares between its connections: requests answered, and the
/// signal to stop once enough were.
struct Served {
    answered: AtomicU64,
    limit: u64,
    enough: Notify,
    /// Connections open now (their regions closed or not yet).
    open: AtomicU64,
}

/// Counts a connection open from its acceptance until its task and span are gone.
struct Open(Arc<Served>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::AcqRel);
    }
}

/// How long the server waits, once stopping, for the open connections to end.
const DRAIN: Duration = Duration::from_secs(5);

/// One request: reads nothing more than its line, answers it.
#[instrument(skip(writer))]
async fn request(writer: &mut tokio::net::tcp::OwnedWriteHalf, line: &str) -> std::io::Result<()> {
    let answer = match line.strip_prefix("PING ") {
        Some(n) => format!("PONG {n}\n"),
        None => "ERR unknown request\n".to_owned(),
    };
    // A little work that suspends the request, as a real one would (a lookup).
    tokio::task::yield_now().await;
    writer.write_all(answer.as_bytes()).await?;
    ANSWERED.add(1);
    Ok(())
}

/// One connection, for as long as the client keeps it open.
#[instrument(skip(stream, served))]
async fn connection(stream: TcpStream, id: u64, served: Arc<Served>) {
    let (reader, mut writer) = stream.into_split();
    let mut lines = AsyncBufReader::new(reader).lines();
    let mut requests = 0u64;
    while let Ok(Some(line)) = lines.next_line().await {
        if request(&mut writer, &line).await.is_err() {
            break;
        }
        requests += 1;
        let answered = served.answered.fetch_add(1, Ordering::Relaxed) + 1;
        if served.limit > 0 && answered >= served.limit {
            served.enough.notify_one();
        }
    }
    info!(key = "requests", value = requests);
}

/// Accepts connections until enough requests were answered or SIGINT comes, then lets
/// the open connections end (for at most [`DRAIN`]), as a server that shuts down
/// gracefully does.
#[instrument(skip(listener, served))]
async fn accept_loop(listener: TcpListener, served: Arc<Served>) -> std::io::Result<()> {
    let mut next_id = 0u64;
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, _) = accepted?;
                next_id += 1;
                served.open.fetch_add(1, Ordering::AcqRel);
                let open = Open(served.clone());
                let handler = connection(stream, next_id, served.clone());
                // The counter drops after the instrumented future, so the connection's
                // span has closed when the server sees it gone.
                tokio::spawn(async move {
                    handler.await;
                    drop(open);
                });
            }
            () = served.enough.notified() => break,
            _ = tokio::signal::ctrl_c() => break,
        }
    }
    info!(key = "connections", value = next_id);
    let draining = tokio::time::Instant::now();
    while served.open.load(Ordering::Acquire) > 0 && draining.elapsed() < DRAIN {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    Ok(())
}

/// The server: answers `limit` requests (0: until SIGINT), then returns.
#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn serve(limit: u64) -> ExitCode {
    let trace2 = Trace2::from_env()
        .with_exe_version(env!("CARGO_PKG_VERSION"))
        .init();
    api::cmd_name("server");
    let listener = match TcpListener::bind(("127.0.0.1", 0)).await {
        Ok(listener) => listener,
        Err(e) => return trace2.finish(Err::<(), _>(e)),
    };
    match listener.local_addr() {
        Ok(addr) => println!("listening on {addr}"),
        Err(e) => return trace2.finish(Err::<(), _>(e)),
    }
    let _ = std::io::stdout().flush();
    let served = Arc::new(Served {
        answered: AtomicU64::new(0),
        limit,
        enough: Notify::new(),
        open: AtomicU64::new(0),
    });
    let result = accept_loop(listener, served).await;
    // The guard ends the trace here, with the runtime's workers still running.
    trace2.finish(result)
}

/// The client: `connections` connections to `port`, [`WAVE`] at a time, each sending
/// `requests` requests with a pause between them (plain threads and blocking sockets,
/// untraced).
pub fn client(port: u16, connections: usize, requests: usize) -> std::io::Result<()> {
    for wave in 0..connections.div_ceil(WAVE) {
        let size = WAVE.min(connections - wave * WAVE);
        let workers: Vec<_> = (0..size)
            .map(|_| std::thread::spawn(move || one_connection(port, requests)))
            .collect();
        for worker in workers {
            worker
                .join()
                .map_err(|_| std::io::Error::other("client thread panicked"))??;
        }
    }
    Ok(())
}

fn one_connection(port: u16, requests: usize) -> std::io::Result<()> {
    let stream = std::net::TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    let mut answer = String::new();
    for n in 0..requests {
        writeln!(writer, "PING {n}")?;
        answer.clear();
        reader.read_line(&mut answer)?;
        if answer.trim_end() != format!("PONG {n}") {
            return Err(std::io::Error::other(format!(
                "unexpected answer {answer:?}"
            )));
        }
        std::thread::sleep(PAUSE);
    }
    Ok(())
}

/// `serve [limit]` (the default) or `client <port> [connections] [requests]`.
pub fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let number = |i: usize, default: u64| {
        args.get(i)
            .map_or(Some(default), |a| a.parse().ok())
            .unwrap_or(default)
    };
    match args.first().map(String::as_str) {
        Some("client") => {
            let Some(port) = args.get(1).and_then(|p| p.parse().ok()) else {
                eprintln!("usage: server client <port> [connections] [requests]");
                return ExitCode::from(2);
            };
            match client(port, number(2, 30) as usize, number(3, 4) as usize) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("client: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        _ => serve(number(1, 0)),
    }
}
