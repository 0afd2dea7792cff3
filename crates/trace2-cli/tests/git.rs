//! Real git writes the traces: commit (with a hook that runs git), status, a clone and a fetch
//! over `file://` (upload-pack children), and gc, all appended to one Event file, and the same
//! run into a directory of per-process files. `trace2 summary` must name each process and give
//! region totals equal to the `region_leave` lines; `trace2 export` must nest per track.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use common::{assert_chrome_nests, run_git, run_trace2, stderr, stdout};
use serde_json::Value;

/// Runs the git session with its Event trace going to `target` (a file or a directory).
fn git_session(root: &Path, target: &Path) {
    let home = root.join("home");
    let origin = root.join("origin");
    fs::create_dir_all(&home).unwrap();
    fs::create_dir_all(&origin).unwrap();
    let quiet = None;
    run_git(&origin, &home, quiet, &["init", "-q", "-b", "main"]);
    for i in 0..20 {
        fs::write(
            origin.join(format!("file{i}.txt")),
            format!("line {i}\n").repeat(50),
        )
        .unwrap();
    }
    let hook = origin.join(".git/hooks/pre-commit");
    fs::write(&hook, "#!/bin/sh\nexec git status --short >/dev/null\n").unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&hook, fs::Permissions::from_mode(0o755)).unwrap();
    }
    let t = Some(target);
    run_git(&origin, &home, t, &["add", "."]);
    run_git(&origin, &home, t, &["commit", "-q", "-m", "first"]);
    fs::write(origin.join("file0.txt"), "changed\n").unwrap();
    run_git(&origin, &home, t, &["status", "--short"]);
    let url = format!("file://{}", origin.display());
    run_git(root, &home, t, &["clone", "-q", &url, "clone"]);
    run_git(
        &origin,
        &home,
        quiet,
        &["commit", "-q", "-a", "--no-verify", "-m", "second"],
    );
    let clone = root.join("clone");
    run_git(&clone, &home, t, &["fetch", "-q"]);
    run_git(&clone, &home, t, &["gc", "-q"]);
}

/// Per SID, from the lines themselves: (count, total µs) of region_leave per (category, label),
/// the last atexit's t_abs, and the cmd_name.
#[derive(Default, Debug)]
struct Expected {
    regions: BTreeMap<(String, String), (u64, i64)>,
    atexit_us: Option<i64>,
    cmd_name: Option<String>,
}

fn expected_from_lines(files: &[PathBuf]) -> BTreeMap<String, Expected> {
    let mut by_sid: BTreeMap<String, Expected> = BTreeMap::new();
    for file in files {
        for line in fs::read_to_string(file).unwrap().lines() {
            let v: Value = serde_json::from_str(line).unwrap();
            let sid = v["sid"].as_str().unwrap().to_owned();
            let entry = by_sid.entry(sid).or_default();
            let micros = |key: &str| (v[key].as_f64().unwrap() * 1e6).round() as i64;
            match v["event"].as_str().unwrap() {
                "region_leave" => {
                    let text = |key: &str| v[key].as_str().unwrap_or("").to_owned();
                    let r = entry
                        .regions
                        .entry((text("category"), text("label")))
                        .or_default();
                    r.0 += 1;
                    r.1 += micros("t_rel");
                }
                "atexit" => {
                    entry.atexit_us = Some(entry.atexit_us.unwrap_or(0).max(micros("t_abs")));
                }
                "cmd_name" => entry.cmd_name = Some(v["name"].as_str().unwrap().to_owned()),
                _ => {}
            }
        }
    }
    by_sid
}

fn check_summary(json: &Value, expected: &BTreeMap<String, Expected>) -> BTreeSet<String> {
    let processes = json["processes"].as_array().unwrap();
    assert_eq!(processes.len(), expected.len(), "one entry per SID");
    let mut cmd_names = BTreeSet::new();
    for p in processes {
        let sid = p["sid"].as_str().unwrap();
        let want = &expected[sid];
        assert_eq!(p["cmd_name"].as_str(), want.cmd_name.as_deref(), "{sid}");
        if let Some(name) = &want.cmd_name {
            cmd_names.insert(name.clone());
            assert!(
                p["name"].as_str().unwrap().ends_with(&format!(":{name}")),
                "{p}"
            );
        }
        assert_eq!(p["exit_code"], 0, "{sid}");
        assert_eq!(p["elapsed_us"].as_i64(), want.atexit_us, "{sid}");
        let got: BTreeMap<(String, String), (u64, i64)> = p["regions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                assert!(r["self_us"].as_i64() <= r["total_us"].as_i64());
                (
                    (
                        r["category"].as_str().unwrap().to_owned(),
                        r["label"].as_str().unwrap().to_owned(),
                    ),
                    (
                        r["count"].as_u64().unwrap(),
                        r["total_us"].as_i64().unwrap(),
                    ),
                )
            })
            .collect();
        assert_eq!(got, want.regions, "{sid}");
    }
    cmd_names
}

fn process_by_cmd<'v>(json: &'v Value, cmd: &str) -> Vec<&'v Value> {
    json["processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["cmd_name"] == cmd)
        .collect()
}

#[test]
fn summary_and_export_of_a_real_git_session_in_one_file() {
    let root = tempfile::tempdir().unwrap();
    let trace = root.path().join("git.event");
    git_session(root.path(), &trace);

    let out = run_trace2(&["summary", "--json", trace.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(out.stderr.is_empty(), "{}", stderr(&out));
    let json: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let expected = expected_from_lines(std::slice::from_ref(&trace));
    let names = check_summary(&json, &expected);
    for cmd in [
        "add",
        "commit",
        "status",
        "clone",
        "upload-pack",
        "fetch",
        "gc",
        "repack",
        "pack-objects",
    ] {
        assert!(names.contains(cmd), "{cmd} missing from {names:?}");
    }
    // Real regions, with the totals checked above.
    let status = process_by_cmd(&json, "status");
    assert!(
        status.iter().any(|p| p["regions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["label"] == "do_read_index")),
        "{status:?}"
    );
    // The clone's upload-pack hangs under the clone, started by one of its child_starts.
    let clone = process_by_cmd(&json, "clone")[0];
    let upload_pack = process_by_cmd(&json, "upload-pack")
        .into_iter()
        .find(|p| p["parent_sid"] == clone["sid"])
        .expect("the clone's upload-pack");
    assert_eq!(upload_pack["depth"], 1);
    let launched: Vec<&Value> = clone["children"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| {
            c["processes"]
                .as_array()
                .unwrap()
                .contains(&upload_pack["sid"])
        })
        .collect();
    assert_eq!(launched.len(), 1, "{clone}");
    assert_eq!(launched[0]["code"], 0);
    // The hook's git status is a grandchild-by-hook of the commit.
    let commit = process_by_cmd(&json, "commit")[0];
    let hook = &commit["children"][0];
    assert_eq!(hook["class"], "hook");
    assert_eq!(hook["processes"].as_array().unwrap().len(), 1, "{commit}");

    // The text form names every command and shows the region tables.
    let out = run_trace2(&["summary", trace.to_str().unwrap()]);
    assert!(out.status.success());
    let text = stdout(&out);
    for cmd in &names {
        // `git:status`, or `git-upload-pack:upload-pack` for a dashed program.
        assert!(
            text.contains(&format!(":{cmd} ")),
            ":{cmd} missing:\n{text}"
        );
    }
    assert!(
        text.contains("regions (top 5 by total and by self time)"),
        "{text}"
    );

    // The export: nested per track, a named process per SID, a flow into each child process.
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
    let doc: Value = serde_json::from_slice(&fs::read(&chrome).unwrap()).unwrap();
    let slices = assert_chrome_nests(&doc);
    let region_leaves: u64 = expected
        .values()
        .flat_map(|e| e.regions.values())
        .map(|r| r.0)
        .sum();
    assert!(
        slices as u64 >= region_leaves + expected.len() as u64,
        "a slice per region and process"
    );
    let events = doc["traceEvents"].as_array().unwrap();
    let labels: BTreeSet<&str> = events
        .iter()
        .filter(|e| e["name"] == "process_labels")
        .map(|e| e["args"]["labels"].as_str().unwrap())
        .collect();
    assert_eq!(labels, expected.keys().map(String::as_str).collect());
    let children = json["processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| !p["parent_sid"].is_null())
        .count();
    let flows = events.iter().filter(|e| e["ph"] == "f").count();
    assert_eq!(
        flows, children,
        "every child process is linked to its parent"
    );
}

#[test]
fn a_directory_of_per_process_files_reads_like_one_file() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("traces");
    fs::create_dir(&dir).unwrap();
    git_session(root.path(), &dir);
    let files: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(files.len() > 10, "one file per process: {files:?}");

    let out = run_trace2(&["summary", "--json", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let expected = expected_from_lines(&files);
    check_summary(&json, &expected);
    let roots = json["processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["depth"] == 0)
        .count();
    assert_eq!(roots, 6, "add, commit, status, clone, fetch, gc");

    let chrome = root.path().join("dir.json");
    let out = run_trace2(&[
        "export",
        "--format",
        "chrome",
        "-o",
        chrome.to_str().unwrap(),
        dir.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_chrome_nests(&serde_json::from_slice(&fs::read(&chrome).unwrap()).unwrap());
}
