//! An axum web service behind tower-http's `TraceLayer` (a span per request and its
//! events, all at DEBUG), on a `#[tokio::main]` multi-thread runtime, traced with Trace2
//! as the README tells a new user. It listens on 127.0.0.1, answers `GET /item/{id}`
//! through an `#[instrument]` handler, and ends once it has answered the given number of
//! requests (0: on Ctrl-C), shutting down gracefully. `tests/real_web.rs` runs it under
//! load from plain HTTP/1.1 keep-alive clients and checks the stream.
//!
//! ```sh
//! GIT_TRACE2_EVENT=/tmp/web.event cargo run --example web -- serve 200 # prints "listening on 127.0.0.1:<port>"
//! cargo run --example web -- client <port> 4 50                        # 4 connections, 50 requests each
//! cargo run -q -p trace2-cli -- summary /tmp/web.event
//! ```

use std::io::{BufRead, BufReader, Write};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, State};
use axum::routing::get;
use tokio::sync::Notify;
use tower_http::trace::TraceLayer;
use tracing::instrument;
use tracing_trace2::{Counter, PerThread, Trace2, api};

/// Worker threads of the service's runtime.
pub const WORKERS: usize = 2;

/// Requests answered, per worker and in all.
pub static ANSWERED: Counter = Counter::new("web", "answered", PerThread::Yes);

/// Requests answered so far, and the signal to stop once enough were.
struct Served {
    answered: AtomicU64,
    limit: u64,
    enough: Notify,
}

/// `GET /item/{id}`: a lookup that suspends once, as a database call would.
#[instrument(skip(served))]
async fn item(Path(id): Path<u64>, State(served): State<Arc<Served>>) -> String {
    tokio::task::yield_now().await;
    ANSWERED.add(1);
    let answered = served.answered.fetch_add(1, Ordering::AcqRel) + 1;
    if served.limit > 0 && answered >= served.limit {
        served.enough.notify_one();
    }
    format!("item {id}\n")
}

/// The service: answers `limit` requests (0: until Ctrl-C), then shuts down gracefully.
#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn serve(limit: u64) -> ExitCode {
    let trace2 = Trace2::from_env()
        .with_exe_version(env!("CARGO_PKG_VERSION"))
        .init();
    api::cmd_name("web");
    let served = Arc::new(Served {
        answered: AtomicU64::new(0),
        limit,
        enough: Notify::new(),
    });
    let app = Router::new()
        .route("/item/{id}", get(item))
        .layer(TraceLayer::new_for_http())
        .with_state(served.clone());
    let listener = match tokio::net::TcpListener::bind(("127.0.0.1", 0)).await {
        Ok(listener) => listener,
        Err(e) => return trace2.finish(Err::<(), _>(e)),
    };
    match listener.local_addr() {
        Ok(addr) => println!("listening on {addr}"),
        Err(e) => return trace2.finish(Err::<(), _>(e)),
    }
    let _ = std::io::stdout().flush();
    let stop = async move {
        tokio::select! {
            () = served.enough.notified() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    };
    let result = axum::serve(listener, app)
        .with_graceful_shutdown(stop)
        .await;
    trace2.finish(result)
}

/// The client: `connections` keep-alive connections to `port` side by side, each sending
/// `requests` requests one after the other (plain threads and blocking sockets, untraced).
pub fn client(port: u16, connections: usize, requests: usize) -> std::io::Result<()> {
    let workers: Vec<_> = (0..connections)
        .map(|c| std::thread::spawn(move || one_connection(port, c, requests)))
        .collect();
    for worker in workers {
        worker
            .join()
            .map_err(|_| std::io::Error::other("client thread panicked"))??;
    }
    Ok(())
}

fn one_connection(port: u16, connection: usize, requests: usize) -> std::io::Result<()> {
    let stream = std::net::TcpStream::connect(("127.0.0.1", port))?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    for n in 0..requests {
        let id = connection * requests + n;
        // One write per request (several small ones would wait on delayed ACKs).
        let request =
            format!("GET /item/{id} HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: web-client\r\n\r\n");
        writer.write_all(request.as_bytes())?;
        let body = read_response(&mut reader)?;
        if body != format!("item {id}\n") {
            return Err(std::io::Error::other(format!("unexpected body {body:?}")));
        }
    }
    Ok(())
}

/// One HTTP/1.1 response with a `content-length`: its body, if the status is 200.
fn read_response(reader: &mut impl BufRead) -> std::io::Result<String> {
    let mut line = String::new();
    reader.read_line(&mut line)?;
    if !line.starts_with("HTTP/1.1 200") {
        return Err(std::io::Error::other(format!("status line {line:?}")));
    }
    let mut length = None;
    loop {
        line.clear();
        reader.read_line(&mut line)?;
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse::<usize>().ok();
        }
    }
    let length = length.ok_or_else(|| std::io::Error::other("no content-length"))?;
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    String::from_utf8(body).map_err(std::io::Error::other)
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
                eprintln!("usage: web client <port> [connections] [requests]");
                return ExitCode::from(2);
            };
            match client(port, number(2, 4) as usize, number(3, 50) as usize) {
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
