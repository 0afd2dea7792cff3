//! A command-line program shaped like jj (a VCS that runs git): it owns an elaborate
//! subscriber setup (a reloadable `EnvFilter` on a fmt layer, a tracing-chrome layer that
//! starts its writer thread when built, and the Trace2 layer), keeps it in a cloneable
//! handle, names its command after start, runs the real `git` through plain
//! `std::process::Command`, and has `fn main() -> Result<_, E>`. The `real_cli` tests
//! compile this file into their own binary and check how git's children nest and which
//! exit codes are traced.
//!
//! ```sh
//! GIT_TRACE2_EVENT=/tmp/vcs.event cargo run -q --example vcs -- fetch /path/to/repo
//! cargo run -q -p trace2-cli -- summary /tmp/vcs.event
//! ```
//!
//! | arguments | what it does | exit code |
//! |---|---|---|
//! | `fetch <repo>` | `git init` in a fresh directory, then `git fetch <repo>` there | 0 |
//! | `fail <repo>` | the same, then `main` returns `Err` (with the handle held) | 1 |
//! | `code <n>` | ends through the handle with the code the program computed | n |
//! | `panic` | a panic in an instrumented function unwinds out of `main` | 101 |
//!
//! Options (before the command): `--debug` reloads the fmt layer's filter to `debug`, as
//! jj does once it has parsed its arguments. Environment: `VCS_LAYER_ORDER=trace2-first`
//! builds the Trace2 layer before tracing-chrome (default: chrome first, as jj);
//! `VCS_CHROME_FILE` is where tracing-chrome writes (default: a file in the temporary
//! directory); `VCS_NO_ENV_EXPORT` turns the session's export into the environment off;
//! `VCS_LOG` is the fmt layer's filter (default `warn`); `VCS_SCOPED_SUBSCRIBER` installs
//! the subscriber as the main thread's default (`set_default`) instead of the global one;
//! `VCS_RUNTIME_FIRST` starts a multi-threaded tokio runtime first, as `#[tokio::main]`.

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::rc::Rc;

use tracing::instrument;
use tracing_subscriber::prelude::*;
use tracing_subscriber::{EnvFilter, Layer, Registry, reload};
use tracing_trace2::{PerThread, Timer, Trace2, Trace2Guard, api};

/// The program's error: `main` returns it, Rust prints `Error: …` and exits with 1.
pub(crate) struct VcsError(String);

impl fmt::Debug for VcsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The program's tracing setup, as a CLI like jj keeps it: cloned into every part of the
/// program that needs it, with the filter reloadable after the arguments are parsed and
/// the exit code computed by the program.
#[derive(Clone)]
struct TracingHandle {
    trace2: Trace2Guard,
    filter: reload::Handle<EnvFilter, Registry>,
    /// Flushes tracing-chrome's file when the last clone goes.
    _chrome: Rc<tracing_chrome::FlushGuard>,
    /// With `VCS_SCOPED_SUBSCRIBER`: the subscriber is this thread's default only.
    _scoped: Option<Rc<tracing::subscriber::DefaultGuard>>,
}

/// One layer of the program's subscriber.
type BoxedLayer = Box<dyn Layer<Registry> + Send + Sync>;

impl TracingHandle {
    /// Builds the layers in the order the environment asks for, installs them as the
    /// global default subscriber and starts the Trace2 lifecycle.
    fn init() -> TracingHandle {
        let trace2_first = std::env::var("VCS_LAYER_ORDER").is_ok_and(|v| v == "trace2-first");
        let chrome_file = std::env::var_os("VCS_CHROME_FILE").map_or_else(
            || std::env::temp_dir().join(format!("vcs-{}.chrome.json", std::process::id())),
            PathBuf::from,
        );
        let trace2 = || {
            Trace2::from_env()
                .with_exe_version(env!("CARGO_PKG_VERSION"))
                .with_env_export(std::env::var_os("VCS_NO_ENV_EXPORT").is_none())
                .lifecycle()
        };
        // tracing-chrome starts its writer thread in `build`.
        let chrome = || {
            tracing_chrome::ChromeLayerBuilder::new()
                .file(chrome_file.clone())
                .include_args(true)
                .build()
        };
        let (lifecycle, (chrome_layer, chrome_guard)) = if trace2_first {
            let lifecycle = trace2();
            (lifecycle, chrome())
        } else {
            let chrome = chrome();
            (trace2(), chrome)
        };
        let log = std::env::var("VCS_LOG").unwrap_or_else(|_| "warn".to_owned());
        let (filter, filter_handle) = reload::Layer::new(EnvFilter::new(log));
        let layers: Vec<BoxedLayer> = vec![
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_filter(filter)
                .boxed(),
            chrome_layer.boxed(),
            lifecycle.layer().boxed(),
        ];
        let subscriber = tracing_subscriber::registry().with(layers);
        let scoped = if std::env::var_os("VCS_SCOPED_SUBSCRIBER").is_some() {
            Some(Rc::new(tracing::subscriber::set_default(subscriber)))
        } else {
            subscriber.init();
            None
        };
        TracingHandle {
            trace2: lifecycle.start(),
            filter: filter_handle,
            _chrome: Rc::new(chrome_guard),
            _scoped: scoped,
        }
    }

    /// Makes the fmt layer more verbose (the Trace2 layer is not affected).
    fn set_filter(&self, directives: &str) {
        let _ = self.filter.reload(EnvFilter::new(directives));
    }

    /// Ends the program with the code it computed. `#[track_caller]`: the `exit` line
    /// names the caller of this helper, the program's `main`.
    #[track_caller]
    fn finish(&self, code: u8) -> ExitCode {
        self.trace2.clone().finish_code(code)
    }
}

/// The time spent waiting for git, per thread and in total (`th_timer`, `timer`).
static GIT_WAIT: Timer = Timer::new("vcs", "git", PerThread::Yes);

/// A repository as the program sees it: large enough that its `Debug` is long.
#[derive(Debug)]
struct Workspace {
    root: PathBuf,
    settings: Vec<(String, String)>,
}

impl Workspace {
    fn new(root: PathBuf) -> Workspace {
        let settings = (0..8)
            .map(|i| (format!("vcs.setting{i}"), "value".repeat(i + 1)))
            .collect();
        Workspace { root, settings }
    }

    #[instrument]
    fn git(&self, args: &[&str]) -> Result<(), VcsError> {
        // Plain std Command, as jj runs git: only the environment carries the session.
        let mut git = Command::new("git");
        git.arg("-C").arg(&self.root);
        for (key, value) in &self.settings {
            git.arg("-c").arg(format!("{key}={value}"));
        }
        let status = GIT_WAIT
            .time(|| git.args(args).status())
            .map_err(|e| VcsError(format!("cannot run git: {e}")))?;
        if status.success() {
            Ok(())
        } else {
            Err(VcsError(format!("git {} failed: {status}", args.join(" "))))
        }
    }

    #[instrument(skip(self))]
    fn fetch(&self, remote: &Path) -> Result<(), VcsError> {
        std::fs::create_dir_all(&self.root)
            .map_err(|e| VcsError(format!("cannot create {}: {e}", self.root.display())))?;
        self.git(&["init", "-q"])?;
        let remote = remote.to_string_lossy();
        self.git(&[
            "fetch",
            "-q",
            &remote,
            "+refs/heads/*:refs/remotes/origin/*",
        ])
    }
}

#[instrument]
fn check_invariants(workspace: &Workspace) {
    panic!("invariant broken in {}", workspace.root.display());
}

pub(crate) fn main() -> Result<ExitCode, VcsError> {
    // As `#[tokio::main]` does, a runtime (and its worker threads) before anything else.
    let _runtime = std::env::var_os("VCS_RUNTIME_FIRST").map(|_| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .expect("a tokio runtime")
    });
    let tracing = TracingHandle::init();
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().is_some_and(|a| a == "--debug") {
        args.remove(0);
        tracing.set_filter("debug");
    }
    let command = args.first().map_or("status", String::as_str);
    // As jj: the command's name is known once the arguments are parsed.
    api::cmd_name(&format!("git {command}"));
    let workspace = || {
        let root = std::env::temp_dir().join(format!("vcs-{}-{}", std::process::id(), command));
        Workspace::new(root)
    };
    match command {
        "fetch" | "fail" => {
            let remote = PathBuf::from(args.get(1).map_or(".", String::as_str));
            let workspace = workspace();
            let fetched = workspace.fetch(&remote);
            let _ = std::fs::remove_dir_all(&workspace.root);
            fetched?;
            if command == "fail" {
                return Err(VcsError(
                    "the fetched history is not what was expected".into(),
                ));
            }
            Ok(ExitCode::SUCCESS)
        }
        "code" => {
            let code = args.get(1).and_then(|n| n.parse::<u8>().ok()).unwrap_or(2);
            let handle = tracing.clone();
            drop(tracing);
            Ok(handle.finish(code)) // exit site
        }
        "panic" => {
            check_invariants(&workspace());
            Ok(ExitCode::SUCCESS)
        }
        other => Err(VcsError(format!("unknown command `{other}`"))),
    }
}
