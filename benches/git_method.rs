//! Git's own cost per Trace2 line against ours, measured the same way for both: the
//! wall time of a whole process run traced minus the same run untraced, divided by the
//! lines the traced run wrote.
//!
//! * git: `git ls-files --recurse-submodules` in a superproject with [`SUBMODULES`]
//!   submodules (built once under `target/tmp/git_method`), with `GIT_TRACE2_EVENT`
//!   (nesting raised to 10) or `GIT_TRACE2_PERF` pointing at an append-mode file.
//!   Git writes about seven lines per submodule: two region pairs, two `data`, one
//!   `def_repo`.
//! * ours: this bench binary started again as a child (`--child <lines>`), which
//!   installs the facade's layer from the same environment (`Trace2::from_env()`, as a
//!   program would) and writes the same number of lines: one span holding two data
//!   events per step. Untraced, the facade installs nothing.
//!
//! Runs alternate between the variants; each figure is the median of [`RUNS`] runs.
//! `cargo bench --bench git_method` takes about half a minute; it needs `git` on PATH
//! and prints a Markdown table.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// Submodules in the superproject: enough for git to write about two thousand lines.
const SUBMODULES: usize = 300;
/// Timed runs per variant.
const RUNS: usize = 21;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(pos) = args.iter().position(|a| a == "--child") {
        let lines = args.get(pos + 1).and_then(|n| n.parse().ok()).unwrap_or(0);
        child(lines);
        return;
    }
    // `cargo test --benches` runs bench targets with `--bench` absent: do nothing then.
    if !args.iter().any(|a| a == "--bench") {
        return;
    }
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("git_method");
    let superproject = match build_superproject(&dir) {
        Ok(path) => path,
        Err(err) => {
            eprintln!("git_method: cannot build the superproject ({err}); is git installed?");
            return;
        }
    };
    let trace = dir.join("trace.txt");
    let git = |env: Option<(&str, &Path)>| {
        let mut cmd = Command::new("git");
        cmd.args(["ls-files", "--recurse-submodules"])
            .current_dir(&superproject);
        base_env(&mut cmd, &dir, env);
        cmd
    };
    let exe = std::env::current_exe().expect("own path");

    println!("\n## Cost per Trace2 line, whole process, traced minus untraced\n");
    println!("| writer | target | lines | untraced ms | traced ms | µs per line | ours / git |");
    println!("|---|---|---:|---:|---:|---:|---:|");
    for target in ["GIT_TRACE2_EVENT", "GIT_TRACE2_PERF"] {
        let git_cost = measure(&trace, || git(None), || git(Some((target, &trace))));
        let ours_cmd = |env: Option<(&str, &Path)>| {
            let mut cmd = Command::new(&exe);
            cmd.args(["--child", &git_cost.lines.to_string()]);
            base_env(&mut cmd, &dir, env);
            cmd
        };
        let ours = measure(
            &trace,
            || ours_cmd(None),
            || ours_cmd(Some((target, &trace))),
        );
        for (who, cost) in [("git 2.47", &git_cost), ("tracing-trace2", &ours)] {
            let ratio = if who == "git 2.47" {
                String::from("-")
            } else {
                format!("{:.2}", ours.per_line_us() / git_cost.per_line_us())
            };
            println!(
                "| {who} | {target} | {} | {:.2} | {:.2} | {:.2} | {ratio} |",
                cost.lines,
                ms(cost.untraced),
                ms(cost.traced),
                cost.per_line_us(),
            );
        }
    }
}

/// The child: the facade's layer from the environment, then `lines` Trace2 lines.
fn child(lines: u64) {
    let layer = tracing_trace2::Trace2::from_env()
        .with_exe_version("bench")
        .layer();
    tracing_subscriber::registry().with(layer).init();
    // One step is a region holding two data events: four lines, close to git's mix.
    for i in 0..lines / 4 {
        let span = tracing::info_span!(
            "submodule",
            trace2.category = "submodule",
            trace2.label = "step"
        );
        let _entered = span.enter();
        tracing::info!(category = "submodule", key = "path", value = "sub/path");
        tracing::info!(category = "submodule", key = "index", value = i);
    }
}

/// The environment of every run: no inherited Trace2 or git settings, a private HOME,
/// and the one variable that enables the traced variant.
fn base_env(cmd: &mut Command, dir: &Path, env: Option<(&str, &Path)>) {
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy().into_owned();
        if key.starts_with("GIT_") {
            cmd.env_remove(key);
        }
    }
    cmd.env("HOME", dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_TRACE2_EVENT_NESTING", "10")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    if let Some((key, path)) = env {
        cmd.env(key, path);
    }
}

struct Cost {
    lines: u64,
    untraced: Duration,
    traced: Duration,
}

impl Cost {
    fn per_line_us(&self) -> f64 {
        let extra = self.traced.as_secs_f64() - self.untraced.as_secs_f64();
        extra * 1e6 / self.lines.max(1) as f64
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Alternates untraced and traced runs; returns the medians and the traced line count.
fn measure(trace: &Path, untraced: impl Fn() -> Command, traced: impl Fn() -> Command) -> Cost {
    let run = |mut cmd: Command| {
        let start = Instant::now();
        let status = cmd.status().expect("run");
        let took = start.elapsed();
        assert!(status.success(), "{cmd:?} failed");
        took
    };
    let _ = std::fs::remove_file(trace);
    run(traced());
    let lines = std::fs::read(trace)
        .map(|t| t.iter().filter(|&&b| b == b'\n').count() as u64)
        .unwrap_or(0);
    let (mut plain, mut with) = (Vec::new(), Vec::new());
    for _ in 0..RUNS {
        plain.push(run(untraced()));
        let _ = std::fs::remove_file(trace);
        with.push(run(traced()));
    }
    plain.sort();
    with.sort();
    Cost {
        lines,
        untraced: plain[RUNS / 2],
        traced: with[RUNS / 2],
    }
}

/// Builds (once) a superproject whose submodules are copies of one small repository.
fn build_superproject(dir: &Path) -> std::io::Result<PathBuf> {
    let superproject = dir.join("super");
    let done = dir.join("built");
    if done.exists() {
        return Ok(superproject);
    }
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir)?;
    let git = |cwd: &Path, args: &[&str]| -> std::io::Result<()> {
        let mut cmd = Command::new("git");
        cmd.args([
            "-c",
            "user.name=bench",
            "-c",
            "user.email=bench@example.invalid",
        ])
        .args([
            "-c",
            "init.defaultBranch=main",
            "-c",
            "advice.addEmbeddedRepo=false",
        ])
        .args(args)
        .current_dir(cwd);
        base_env(&mut cmd, dir, None);
        let status = cmd.stderr(Stdio::null()).status()?;
        if status.success() {
            Ok(())
        } else {
            Err(std::io::Error::other(format!("git {args:?} failed")))
        }
    };
    let sub = dir.join("sub");
    std::fs::create_dir_all(&sub)?;
    git(&sub, &["init", "-q", "."])?;
    for i in 0..3 {
        std::fs::write(sub.join(format!("f{i}")), format!("{i}\n"))?;
    }
    git(&sub, &["add", "."])?;
    git(&sub, &["commit", "-qm", "sub"])?;
    std::fs::create_dir_all(&superproject)?;
    git(&superproject, &["init", "-q", "."])?;
    let mut modules = String::new();
    for i in 0..SUBMODULES {
        let path = superproject.join(format!("s{i}"));
        copy_dir(&sub, &path)?;
        modules.push_str(&format!(
            "[submodule \"s{i}\"]\n\tpath = s{i}\n\turl = ../sub\n"
        ));
    }
    std::fs::write(superproject.join(".gitmodules"), modules)?;
    git(&superproject, &["add", "."])?;
    git(&superproject, &["commit", "-qm", "super"])?;
    git(&superproject, &["config", "submodule.active", "."])?;
    std::fs::write(done, "")?;
    Ok(superproject)
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}
