//! The Chrome export opened in a real viewer: speedscope (npm package, served from 127.0.0.1) in
//! headless Chromium, driven by playwright-core (`tests/viewer/check.mjs`). The trace comes from
//! real git (a commit whose hook runs git, then status). The viewer must list every process and
//! show, in its Sandwich table, every region of the summary with the same total and self time.
//!
//! Needs `node`, Chromium (`/usr/bin/chromium`, or `$CHROMIUM`) and `npm ci` in `tests/viewer`;
//! `.ci/run` installs them. Without them the test fails under CI (`CI=true`) and is skipped with a
//! message elsewhere.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{run_git, run_trace2, stderr, stdout};
use serde_json::Value;

fn viewer_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/viewer")
}

/// What is missing to run the viewer, if anything.
fn missing_tools() -> Option<String> {
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".to_owned());
    if !Path::new(&chromium).exists() {
        return Some(format!("Chromium ({chromium})"));
    }
    if Command::new("node").arg("--version").output().is_err() {
        return Some("node".to_owned());
    }
    for package in ["playwright-core", "speedscope"] {
        if !viewer_dir().join("node_modules").join(package).exists() {
            return Some(format!(
                "npm package {package} (npm ci in {})",
                viewer_dir().display()
            ));
        }
    }
    None
}

/// `3.38ms (37%)`, `376.00µs (4.1%)`, `1.20s` → µs.
fn micros(text: &str) -> f64 {
    let value = text.split_whitespace().next().unwrap();
    for (unit, scale) in [("µs", 1.0), ("ms", 1e3), ("s", 1e6)] {
        if let Some(number) = value.strip_suffix(unit) {
            return number.parse::<f64>().unwrap() * scale;
        }
    }
    panic!("no unit in {text:?}")
}

#[test]
fn speedscope_shows_every_process_and_region_of_a_real_git_trace() {
    if let Some(missing) = missing_tools() {
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("viewer test needs {missing}: .ci/run installs it");
        }
        println!("SKIPPED viewer test: {missing} not found (CI=true makes this a failure)");
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let (home, repo) = (root.path().join("home"), root.path().join("repo"));
    fs::create_dir_all(&home).unwrap();
    fs::create_dir_all(&repo).unwrap();
    let trace = root.path().join("git.event");
    run_git(&repo, &home, None, &["init", "-q", "-b", "main"]);
    for i in 0..30 {
        fs::write(repo.join(format!("f{i}.txt")), format!("{i}\n")).unwrap();
    }
    let hook = repo.join(".git/hooks/pre-commit");
    fs::write(&hook, "#!/bin/sh\nexec git status --short >/dev/null\n").unwrap();
    // Git for Windows runs a hook without an executable bit.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&hook, fs::Permissions::from_mode(0o755)).unwrap();
    }
    run_git(&repo, &home, None, &["add", "."]);
    run_git(&repo, &home, Some(&trace), &["commit", "-q", "-m", "one"]);
    fs::write(repo.join("f1.txt"), "changed\n").unwrap();
    run_git(&repo, &home, Some(&trace), &["status", "--short"]);

    let out = run_trace2(&["summary", "--json", trace.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let summary: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let chrome = root.path().join("git.json");
    let out = run_trace2(&[
        "export",
        "--format",
        "chrome",
        "-o",
        chrome.to_str().unwrap(),
        trace.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));

    let screenshot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("trace2-speedscope.png");
    let out = Command::new("node")
        .arg(viewer_dir().join("check.mjs"))
        .arg(&chrome)
        .arg(&screenshot)
        .env("MAX_PROFILES", "8")
        .output()
        .expect("node runs");
    assert!(
        out.status.success(),
        "check.mjs failed:\n{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    let shown: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(
        shown["errors"],
        serde_json::json!([]),
        "the page reported errors"
    );
    let png = fs::read(&screenshot).unwrap();
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "screenshot {}",
        screenshot.display()
    );
    println!("screenshot: {}", screenshot.display());

    // One profile per process (each has only its main thread here), named as the export named it.
    let profiles: Vec<&str> = shown["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    let processes = summary["processes"].as_array().unwrap();
    assert_eq!(profiles.len(), processes.len(), "{profiles:?}");
    for process in processes {
        let profile = format!(
            "{} (pid {}), main (tid {})",
            process["name"].as_str().unwrap(),
            process["pid"],
            process["pid"]
        );
        assert!(
            profiles.contains(&profile.as_str()),
            "{profile} not in {profiles:?}"
        );
        let rows = shown["sandwich"][&profile]
            .as_array()
            .unwrap_or_else(|| panic!("no sandwich for {profile}"));
        // The process slice heads the table.
        assert!(rows.iter().any(|r| {
            r[0].as_str()
                .unwrap()
                .starts_with(process["name"].as_str().unwrap())
        }));
        // Every region, with speedscope's own total and self time (rows of one name summed: the
        // viewer keys frames by name and args).
        for region in process["regions"].as_array().unwrap() {
            let name = format!(
                "{}:{}",
                region["category"].as_str().unwrap(),
                region["label"].as_str().unwrap()
            );
            let matching: Vec<&Value> = rows
                .iter()
                .filter(|r| {
                    let symbol = r[0].as_str().unwrap();
                    symbol == name || symbol.starts_with(&format!("{name} {{"))
                })
                .collect();
            assert!(!matching.is_empty(), "{name} not shown for {profile}");
            let total: f64 = matching
                .iter()
                .map(|r| micros(r[1].as_str().unwrap()))
                .sum();
            let self_time: f64 = matching
                .iter()
                .map(|r| micros(r[2].as_str().unwrap()))
                .sum();
            let want_total = region["total_us"].as_f64().unwrap();
            let want_self = region["self_us"].as_f64().unwrap();
            // speedscope prints 3 significant digits and the export moves bounds by a few µs.
            let close = |got: f64, want: f64| (got - want).abs() <= (want * 0.01).max(12.0);
            assert!(
                close(total, want_total),
                "{profile} {name}: total {total} shown, {want_total} summarised"
            );
            assert!(
                close(self_time, want_self),
                "{profile} {name}: self {self_time} shown, {want_self} summarised"
            );
        }
    }
}
