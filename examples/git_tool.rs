//! A git companion CLI (shaped like git-branchless): `#[instrument]` functions, an
//! `EnvFilter` fmt layer, a tracing-chrome profiling layer, `tracing-error`'s `ErrorLayer`
//! with errors that carry a `SpanTrace`, `fn main() -> anyhow::Result<_>`, a dependency
//! that warns on its slow path, a rayon pool dropped as `main` returns, and git run as a
//! subprocess with a copy of the environment taken before anything else (`env_clear()`,
//! then the copy). Git runs the program again as a hook: installed as `pre-commit` and
//! `post-commit`, it commits in the next repository of a chain, so hook processes nest
//! several deep. The `real_git_tools` tests compile this file into their own binary.
//!
//! ```sh
//! GIT_TRACE2_EVENT=/tmp/tool.event cargo run -q --example git_tool -- status
//! cargo run -q -p trace2-cli -- summary /tmp/tool.event
//! ```
//!
//! | arguments | what it does | exit code |
//! |---|---|---|
//! | `status` | the dependency's slow path (warnings), then `git status` | 0 |
//! | `commit <repo>` | `git commit --allow-empty` in `<repo>` (which may run hooks) | 0, 1 if git fails |
//! | `hook <name> [<next repo>]` | as a hook: `commit <next repo>` if given | 0, 1 if git fails |
//! | `fail` | a configuration error returned from `main`, holding its spans | 1 |
//! | `code <n>` | ends with the code `n` the program computed (masked to 0..=255) | n & 255 |
//! | `pool [before [<µs>]]` | a rayon pool's workers trace; the pool is dropped as `main` returns (or just before the trace ends, µs before it) | 0 |
//!
//! Environment: `GIT_TOOL_LOG` is the fmt layer's filter (default `warn,noisy_dep=error`,
//! which silences the dependency); `GIT_TOOL_CHROME` is where tracing-chrome writes
//! (default: a file in the temporary directory).

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::Context;
use tracing::instrument;
use tracing_error::{ErrorLayer, InstrumentResult};
use tracing_subscriber::prelude::*;
use tracing_subscriber::{EnvFilter, Layer};
use tracing_trace2::{Trace2, Trace2CommandExt, api};

/// Stands for a library the tool depends on (its target is the crate's module path):
/// it warns on every cache miss, which the tool's users do not want to see.
mod noisy_dep {
    /// Looks `key` up; every other key takes the slow path, with a warning.
    pub fn lookup(key: usize) -> usize {
        if key % 2 == 1 {
            tracing::warn!(target: "noisy_dep::cache", key, "slow path: cache miss, reading from disk");
        }
        key * 2
    }
}

/// The environment as it was when the program started: every git runs with exactly
/// this (`env_clear()`, then the copy), as tools that must not leak their own changes do.
struct CopiedEnv(Vec<(OsString, OsString)>);

/// The variables that tie git to the repository of the git that ran this program as a
/// hook: left out when the tool works in another repository.
const REPOSITORY_VARS: [&str; 4] = ["GIT_DIR", "GIT_INDEX_FILE", "GIT_WORK_TREE", "GIT_PREFIX"];

impl CopiedEnv {
    /// A `git -C <repo>` with the copied environment (traced: `child_start`/`child_exit`).
    fn git(&self, repo: &Path) -> Command {
        let mut git = Command::new("git");
        git.env_clear()
            .envs(
                self.0
                    .iter()
                    .filter(|(k, _)| !REPOSITORY_VARS.iter().any(|v| k == v))
                    .map(|(k, v)| (k, v)),
            )
            .arg("-C")
            .arg(repo);
        git
    }
}

/// A configuration error (the kind `main` fails with).
#[derive(Debug)]
struct ConfigError {
    key: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bad value for {}", self.key)
    }
}

impl std::error::Error for ConfigError {}

#[instrument(skip(env))]
fn run_git(env: &CopiedEnv, repo: &Path, args: &[&str]) -> anyhow::Result<()> {
    let status = env
        .git(repo)
        .args(args)
        .trace2_status()
        .context("cannot run git")?;
    anyhow::ensure!(status.success(), "git {} failed: {status}", args.join(" "));
    Ok(())
}

#[instrument(skip(env))]
fn commit(env: &CopiedEnv, repo: &Path) -> anyhow::Result<()> {
    run_git(env, repo, &["commit", "-q", "--allow-empty", "-m", "tool"])
}

#[instrument(skip(env))]
fn status(env: &CopiedEnv) -> anyhow::Result<()> {
    let sum: usize = (0..200).map(noisy_dep::lookup).sum();
    tracing::info!(key = "lookups", value = sum);
    run_git(env, Path::new("."), &["status", "--short"])
}

#[instrument]
fn parse_setting(key: &str) -> Result<u32, ConfigError> {
    Err(ConfigError {
        key: key.to_owned(),
    })
}

#[instrument]
fn load_config() -> anyhow::Result<u32> {
    // The error keeps the spans it was made in (its `SpanTrace`): they are exited, not
    // closed, until the error is dropped.
    let value = parse_setting("branchless.core.mainBranch").in_current_span()?;
    Ok(value)
}

#[instrument]
fn configure() -> anyhow::Result<()> {
    let main_branch = load_config()?;
    tracing::info!(key = "main_branch", value = main_branch);
    Ok(())
}

/// A pool's workers each trace a little, then the pool is dropped without waiting for
/// its threads to end, as `main` returns.
#[instrument]
fn pool_work() -> anyhow::Result<rayon::ThreadPool> {
    use rayon::prelude::*;
    let pool = rayon::ThreadPoolBuilder::new().num_threads(12).build()?;
    // Every worker writes (it is announced), then the work is shared out.
    pool.broadcast(|ctx| tracing::info_span!("warm", worker = ctx.index()).in_scope(|| {}));
    let sum: u64 = pool.install(|| {
        (0..64u64)
            .into_par_iter()
            .map(|i| {
                let _span = tracing::info_span!("chunk", i).entered();
                i
            })
            .sum()
    });
    tracing::info!(key = "sum", value = sum);
    Ok(pool)
}

pub(crate) fn main() -> anyhow::Result<ExitCode> {
    // First of all, as the tool does: the environment its git children get.
    let env = CopiedEnv(std::env::vars_os().collect());
    let lifecycle = Trace2::from_env()
        .with_exe_version(env!("CARGO_PKG_VERSION"))
        .lifecycle();
    let chrome_file = std::env::var_os("GIT_TOOL_CHROME").map_or_else(
        || std::env::temp_dir().join(format!("git-tool-{}.json", std::process::id())),
        PathBuf::from,
    );
    let (chrome, _flush) = tracing_chrome::ChromeLayerBuilder::new()
        .file(chrome_file)
        .build();
    let log = std::env::var("GIT_TOOL_LOG").unwrap_or_else(|_| "warn,noisy_dep=error".to_owned());
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_filter(EnvFilter::new(log)),
        )
        .with(ErrorLayer::default())
        .with(chrome)
        .with(lifecycle.layer())
        .init();
    let trace2 = lifecycle.start();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let command = args.first().map_or("status", String::as_str);
    api::cmd_name(command);
    // Dropped when `main` returns, after the trace has ended: its workers are still
    // running then.
    let mut _pool = None;
    let result = match command {
        "status" => status(&env),
        "commit" => commit(&env, Path::new(args.get(1).map_or(".", String::as_str))),
        "hook" => match args.get(2) {
            Some(next) => commit(&env, Path::new(next)),
            None => Ok(()),
        },
        "fail" => configure(),
        "code" => {
            // The code as the program computed it, of the type `finish_code` takes.
            let code = args.get(1).map_or("2", String::as_str);
            let code = code.parse::<i32>().context("a numeric exit code")?;
            return Ok(trace2.finish_code(code));
        }
        // `pool before`: dropped just before the trace ends, its workers ending while
        // it does; `pool` (after): dropped as `main` returns.
        "pool" => pool_work().map(|pool| {
            if args.get(1).is_some_and(|a| a == "before") {
                drop(pool);
                // How long the trace takes to end after the drop (the workers end
                // meanwhile): the test sweeps it over the workers' exit.
                let micros = args.get(2).and_then(|m| m.parse().ok()).unwrap_or(0);
                let until = std::time::Instant::now() + std::time::Duration::from_micros(micros);
                while std::time::Instant::now() < until {
                    std::hint::spin_loop();
                }
            } else {
                _pool = Some(pool);
            }
        }),
        other => Err(anyhow::anyhow!("unknown command `{other}`")),
    };
    trace2.finish_result(result)?;
    Ok(ExitCode::SUCCESS)
}
