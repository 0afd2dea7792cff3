//! The docs are for the people who use the crates: nothing in them names the machine they
//! were written on, and every reference resolves inside the repository. Checked over
//! README.md, docs/*.md and the crates' READMEs (a new file there is checked too):
//!
//! * no absolute path of a machine: `/home/`, `/root/`, `/work/`, `/Users/` (a placeholder
//!   such as `/home/<user>/` is fine), nor the process names a sample run picked up from
//!   the machine it ran on (`memfd:…`, `process_api`);
//! * a `/tmp/…` path is one the same file's commands create: a single name after
//!   `=`, `>`, `-o ` or `LISTEN:` (a trace, an output file or a socket the command
//!   writes), a folder by `mkdir` (output lines of a `console` block are what a
//!   command printed, not checked here);
//! * no "issue N": the project's issue tracker is not where a reader of the crates is;
//! * a relative link names a file that exists, and its `#anchor` a heading of that file;
//! * `§N` (or `§N.M`) names a numbered section of the file named just before it, or else
//!   of the file it is in;
//! * a file name ending in `.md` that the text mentions exists (beside the file, or from
//!   the repository's root).
//!
//! The span-field rule of the README (roles are `trace2.`-prefixed) is checked on the
//! examples: a span there gives a role with `trace2.category`/`trace2.label`, never with
//! a plain `category`/`label` field (which would become part of the message).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The checked files, relative to the workspace.
fn documents() -> Vec<PathBuf> {
    let root = workspace();
    let mut files = vec![PathBuf::from("README.md")];
    let mut more = Vec::new();
    for entry in std::fs::read_dir(root.join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            more.push(path.strip_prefix(&root).unwrap().to_owned());
        }
    }
    for entry in std::fs::read_dir(root.join("crates")).unwrap() {
        let readme = entry.unwrap().path().join("README.md");
        if readme.is_file() {
            more.push(readme.strip_prefix(&root).unwrap().to_owned());
        }
    }
    more.sort();
    files.extend(more);
    assert!(files.len() > 5, "only {files:?}");
    files
}

/// A line of a document, with what kind of text it is.
struct Line<'a> {
    number: usize,
    text: &'a str,
    /// Inside a fenced block, and its info string.
    fence: Option<&'a str>,
}

fn lines(text: &str) -> Vec<Line<'_>> {
    let mut out = Vec::new();
    let mut fence: Option<&str> = None;
    for (i, text) in text.lines().enumerate() {
        if let Some(info) = text.strip_prefix("```") {
            fence = match fence {
                Some(_) => None,
                None => Some(info.trim()),
            };
            continue;
        }
        out.push(Line {
            number: i + 1,
            text,
            fence,
        });
    }
    out
}

const MACHINE_PATHS: &[&str] = &["/home/", "/root/", "/work/", "/Users/"];
/// What a sample run showed of the machine it ran on (its process ancestry).
const MACHINE_NAMES: &[&str] = &["memfd:", "process_api"];

/// The problems of one document.
fn check(rel: &Path, text: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let root = workspace();
    let dir = rel.parent().unwrap_or(Path::new(""));
    let all = lines(text);
    let created = created_tmp_paths(&all);
    for line in &all {
        let at = |what: String| format!("{}:{}: {what}", rel.display(), line.number);
        let t = line.text;
        for path in MACHINE_PATHS {
            for (pos, _) in t.match_indices(path) {
                if starts_a_path(t, pos) && !t[pos + path.len()..].starts_with('<') {
                    problems.push(at(format!("a machine's path ({path}…)")));
                }
            }
        }
        for name in MACHINE_NAMES {
            if t.contains(name) {
                problems.push(at(format!("a process name of the machine ({name})")));
            }
        }
        let output_line = line.fence == Some("console") && !t.starts_with("$ ");
        if !output_line {
            for path in tmp_paths(t) {
                let top = tmp_top(&path);
                if !created.contains(&top) {
                    problems.push(at(format!("{path}: no command of this file creates {top}")));
                }
            }
        }
        if let Some(n) = issue_reference(t) {
            problems.push(at(format!("\"{n}\": an issue of the project's tracker")));
        }
        if line.fence.is_none() {
            for target in links(t) {
                if let Err(e) = resolve_link(&root, dir, text, &target) {
                    problems.push(at(e));
                }
            }
            for (file, section) in section_references(t) {
                let target = match &file {
                    Some(name) => find_md(&root, dir, name),
                    None => Some(root.join(rel)),
                };
                let Some(target) = target else {
                    problems.push(at(format!("§{section}: {} not found", file.unwrap())));
                    continue;
                };
                let body = std::fs::read_to_string(&target).unwrap();
                if !numbered_sections(&body).contains(&section) {
                    problems.push(at(format!(
                        "§{section}: {} has no such section",
                        target.strip_prefix(&root).unwrap().display()
                    )));
                }
            }
            for name in md_names(t) {
                if find_md(&root, dir, &name).is_none() {
                    problems.push(at(format!("{name}: not in the repository")));
                }
            }
        }
    }
    problems
}

/// `/tmp/…` paths in a line (up to a character that cannot be in one).
fn tmp_paths(line: &str) -> Vec<String> {
    line.match_indices("/tmp/")
        .filter(|(pos, _)| starts_a_path(line, *pos))
        .map(|(pos, _)| {
            line[pos..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || "/._-*".contains(*c))
                .collect()
        })
        .collect()
}

/// Whether the `/` at `pos` starts an absolute path, rather than continuing another one
/// (`/var/tmp/`, `target/tmp/`, `/tmp/demo/work/`); `file:///tmp/…` is one.
fn starts_a_path(line: &str, pos: usize) -> bool {
    let before = &line[..pos];
    match before.chars().next_back() {
        None => true,
        Some('/') => before.ends_with("//"),
        Some(c) => !(c.is_alphanumeric() || c == '_' || c == '.' || c == '-'),
    }
}

/// `/tmp/a` of `/tmp/a/b/c`.
fn tmp_top(path: &str) -> String {
    let rest = &path["/tmp/".len()..];
    format!("/tmp/{}", rest.split('/').next().unwrap())
}

/// The `/tmp/<name>` entries this file's commands create.
fn created_tmp_paths(all: &[Line]) -> BTreeSet<String> {
    let mut created = BTreeSet::new();
    for line in all {
        let t = line.text;
        let mkdir = t.find("mkdir ");
        for (pos, _) in t.match_indices("/tmp/") {
            let path: String = tmp_paths(&t[pos..]).into_iter().next().unwrap_or_default();
            if path.is_empty() {
                continue;
            }
            let top = tmp_top(&path);
            let before = t[..pos].trim_end_matches(['\'', '"']);
            let single = path.trim_end_matches('/') == top;
            let writes = before.ends_with('=')
                || before.ends_with('>')
                || before.ends_with("-o ")
                || before.ends_with("> ")
                || before.ends_with("LISTEN:");
            if mkdir.is_some_and(|m| m < pos) || (single && writes) {
                created.insert(top);
            }
        }
    }
    created
}

/// "issue 12", "Issue #3", "issues 16 and 21".
fn issue_reference(line: &str) -> Option<String> {
    let lower = line.to_lowercase();
    for (pos, _) in lower.match_indices("issue") {
        if pos > 0 && lower[..pos].chars().next_back().unwrap().is_alphanumeric() {
            continue;
        }
        let rest = lower[pos + 5..]
            .strip_prefix('s')
            .unwrap_or(&lower[pos + 5..]);
        let rest = rest.strip_prefix(' ').unwrap_or(rest);
        let rest = rest.strip_prefix('#').unwrap_or(rest);
        if rest.starts_with(|c: char| c.is_ascii_digit()) {
            let end = pos + 5 + (lower[pos + 5..].len() - rest.len());
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            return Some(format!("{}{digits}", &line[pos..end]));
        }
    }
    None
}

/// The targets of the markdown links `[text](target)` of a line, but for web links.
fn links(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (pos, _) in line.match_indices("](") {
        let rest = &line[pos + 2..];
        let Some(end) = rest.find(')') else { continue };
        let target = rest[..end].split_whitespace().next().unwrap_or("");
        if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        out.push(target.to_owned());
    }
    out
}

/// A link's file exists (relative to the document's folder), and its anchor is a heading
/// there (an anchor alone: a heading of `text`, the document itself).
fn resolve_link(root: &Path, dir: &Path, text: &str, target: &str) -> Result<(), String> {
    let (path, anchor) = match target.split_once('#') {
        Some((p, a)) => (p, Some(a)),
        None => (target, None),
    };
    let file = root.join(dir).join(path);
    if !path.is_empty() && !file.exists() {
        return Err(format!("link to {target}: no such file"));
    }
    if let Some(anchor) = anchor {
        let body = if path.is_empty() {
            text.to_owned()
        } else {
            std::fs::read_to_string(&file).map_err(|e| format!("{target}: {e}"))?
        };
        if !anchors(&body).contains(anchor) {
            return Err(format!("link to {target}: no heading with that anchor"));
        }
    }
    Ok(())
}

/// The anchors GitHub gives a file's headings: lower case, punctuation but `-` and `_`
/// dropped, spaces made `-`.
fn anchors(body: &str) -> BTreeSet<String> {
    lines(body)
        .iter()
        .filter(|l| l.fence.is_none() && l.text.starts_with('#'))
        .map(|l| {
            l.text
                .trim_start_matches('#')
                .trim()
                .to_lowercase()
                .chars()
                .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
                .map(|c| if c == ' ' { '-' } else { c })
                .collect()
        })
        .collect()
}

/// The `§N` / `§N.M` references of a line, each with the `.md` file named just before
/// it on the line (within a few words), if any.
fn section_references(line: &str) -> Vec<(Option<String>, String)> {
    let mut out = Vec::new();
    for (pos, _) in line.match_indices('§') {
        let number: String = line[pos + '§'.len_utf8()..]
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        let number = number.trim_end_matches('.').to_owned();
        if number.is_empty() {
            continue;
        }
        let before = &line[..pos];
        let window: Vec<&str> = before.split_whitespace().rev().take(2).collect();
        let file = window.iter().find_map(|w| {
            let w = w.trim_matches(|c: char| "`[]()*,".contains(c));
            w.ends_with(".md").then(|| w.to_owned())
        });
        out.push((file, number));
    }
    out
}

/// The numbers of a file's numbered headings (`## 3. Batches` → "3", `### 7.1 …` → "7.1").
fn numbered_sections(body: &str) -> BTreeSet<String> {
    lines(body)
        .iter()
        .filter(|l| l.fence.is_none() && l.text.starts_with('#'))
        .filter_map(|l| {
            let title = l.text.trim_start_matches('#').trim();
            let number: String = title
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            let number = number.trim_end_matches('.');
            (!number.is_empty()).then(|| number.to_owned())
        })
        .collect()
}

/// Names of `.md` files a line mentions outside links (`binary-format.md`,
/// `docs/cli.md`).
fn md_names(line: &str) -> Vec<String> {
    // Link targets are checked as links.
    let mut text = line.to_owned();
    while let Some(start) = text.find("](") {
        let end = text[start..]
            .find(')')
            .map_or(text.len(), |e| start + e + 1);
        text.replace_range(start..end, " ");
    }
    text.split(|c: char| c.is_whitespace() || "`()[],;:*\"'".contains(c))
        .filter(|w| w.ends_with(".md") && w.len() > 3 && !w.contains("://"))
        .map(|w| w.trim_start_matches("./").to_owned())
        .collect()
}

/// A mentioned `.md` file: beside the document, from the root, or in docs/.
fn find_md(root: &Path, dir: &Path, name: &str) -> Option<PathBuf> {
    [
        root.join(dir).join(name),
        root.join(name),
        root.join("docs").join(name),
    ]
    .into_iter()
    .find(|p| p.is_file())
}

#[test]
fn the_docs_name_no_machine_and_every_reference_resolves() {
    let root = workspace();
    let mut problems = Vec::new();
    for rel in documents() {
        let text = std::fs::read_to_string(root.join(&rel)).unwrap();
        problems.extend(check(&rel, &text));
    }
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// The checks themselves, on text made to break each rule once.
#[test]
fn each_rule_finds_what_it_is_for() {
    let text = "start /work/main/target/debug/x\n\
                cmd_ancestry bash <- memfd:sealed-91\n\
                As issue 23 asked.\n\
                See [the guide](no-such-file.md) and [here](#nowhere).\n\
                The `binary-format.md` §11 table.\n\
                Points to `shared/spec/consumers.md`.\n\
                ```sh\n\
                git clone file:///tmp/demo/origin work\n\
                GIT_TRACE2=/tmp/ok.normal cargo run\n\
                ```\n\
                `/home/<user>/.cargo` is a placeholder; `binary-format.md` §3 exists.\n";
    let problems = check(Path::new("docs/x.md"), text);
    let expect = [
        ":1: a machine's path",
        ":2: a process name",
        ":3: \"issue 23\"",
        ":4: link to no-such-file.md",
        ":4: link to #nowhere: no heading",
        ":5: §11",
        ":6: shared/spec/consumers.md",
        ":8: /tmp/demo/origin",
    ];
    for e in expect {
        assert!(
            problems.iter().any(|p| p.contains(e)),
            "{e} not in {problems:#?}"
        );
    }
    assert_eq!(problems.len(), expect.len(), "{problems:#?}");
}

/// Spans in the examples take their Trace2 roles from `trace2.`-prefixed fields.
#[test]
fn example_spans_use_trace2_role_fields() {
    let mut problems = Vec::new();
    let mut files = 0;
    for entry in std::fs::read_dir(workspace().join("examples")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        files += 1;
        let text = std::fs::read_to_string(&path).unwrap();
        for (i, line) in text.lines().enumerate() {
            let Some(at) = line.find("span!(") else {
                continue;
            };
            let args = &line[at..];
            for role in ["category", "label"] {
                for (pos, _) in args.match_indices(&format!("{role} =")) {
                    if !args[..pos].ends_with("trace2.") {
                        problems.push(format!("{}:{}: {line}", path.display(), i + 1));
                    }
                }
            }
        }
    }
    assert!(files > 0, "no example found");
    assert!(
        problems.is_empty(),
        "plain role fields:\n{}",
        problems.join("\n")
    );
}
