//! The checkable claims of docs/architecture.md, checked: no module of any crate imports
//! a module that imports it back (through `use crate::…`, `crate::…` paths and
//! `super::…`), and the `trace2` tool's dependency set holds no `tracing`,
//! `tracing-subscriber`, `socket2` or `sha1_smol`; and no struct, enum, trait or union
//! name is declared twice in the crates' non-test code (names that each mean one thing),
//! but for a short list of reviewed exceptions.
//!
//! A folder module is also taken whole, as the sum of its files: a file's use is its
//! folder's use (at every depth), so a cycle through a submodule is seen even when the
//! module that closes it reaches the folder through its re-exports.
//!
//! Modules are read from the source: a file is a module (`lib.rs`/`main.rs` the crate
//! root, `a.rs` or `a/mod.rs` module `a`, `a/b.rs` module `a::b`); test code is left out
//! (modules declared under `#[cfg(test)]`, and everything from a `#[cfg(test)]` line on,
//! where the crate keeps its tests at the end of a file). A path names the deepest
//! module it reaches. A module's use of its ancestors (the crate root's re-exports, a
//! parent's types) and of its own submodules is how Rust modules nest, not a cycle, and
//! is not counted; a use through the crate root's re-exports is therefore not seen as a
//! use of the module behind it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Cycles the architecture document lists as known, per crate (each as its sorted
/// module names). There are none: every crate's modules form floors, each using only
/// the floors below it. A cycle listed here fails too once it is gone (then remove it
/// here and in docs/architecture.md).
const KNOWN_CYCLES: &[(&str, &[&str])] = &[];

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The `.rs` files under `dir`, recursively.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a file under `src` (`""` for the crate root).
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts.join("::")
}

/// The code of a file without comments and without its tests.
fn code_of(text: &str) -> String {
    let mut code = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        // An inline test module (`#[cfg(test)] mod tests { … }`) ends the file's code.
        if is_test_cfg(trimmed)
            && lines
                .peek()
                .is_some_and(|next| next.trim_start().starts_with("mod ") && next.ends_with('{'))
        {
            break;
        }
        if trimmed.starts_with("//") {
            continue;
        }
        code.push_str(line);
        code.push('\n');
    }
    code
}

/// Whether an attribute line compiles what follows for tests only: `#[cfg(test)]`,
/// `#[cfg(doctest)]`, or `test` in an `all(…)` (`#[cfg(all(test, unix))]`).
fn is_test_cfg(line: &str) -> bool {
    let line = line.trim_start();
    line.starts_with("#[cfg(test)]")
        || line.starts_with("#[cfg(doctest)]")
        || (line.starts_with("#[cfg(all(")
            && !line.contains("not(")
            && line["#[cfg(all(".len()..]
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .any(|word| word == "test"))
}

/// Submodules declared under `#[cfg(test)]` (or `#[cfg(doctest)]`), whose files are
/// test code.
fn test_modules(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut test_attribute = false;
    for line in text.lines().map(str::trim) {
        if is_test_cfg(line) {
            test_attribute = true;
            continue;
        }
        if test_attribute
            && let Some(rest) = line
                .strip_prefix("mod ")
                .or_else(|| line.strip_prefix("pub mod "))
                .or_else(|| line.strip_prefix("pub(crate) mod "))
            && let Some(name) = rest.strip_suffix(';')
        {
            names.push(name.to_owned());
        }
        if !line.starts_with("#[") {
            test_attribute = false;
        }
    }
    names
}

/// Every `crate::a::b…` and `super::…` path of `code`, resolved from `module`, as the
/// list of its segments. Grouped imports (`use crate::{a, b::c}`) give each member.
fn paths_in(code: &str, module: &str) -> Vec<Vec<String>> {
    let here: Vec<String> = if module.is_empty() {
        Vec::new()
    } else {
        module.split("::").map(str::to_owned).collect()
    };
    let bytes = code.as_bytes();
    let mut found = Vec::new();
    let mut at = 0;
    while at < code.len() {
        let rest = &code[at..];
        let (base, skip): (Vec<String>, usize) =
            if rest.starts_with("crate::") && (at == 0 || !is_ident(bytes[at - 1])) {
                (Vec::new(), "crate::".len())
            } else if rest.starts_with("super::") && (at == 0 || !is_ident(bytes[at - 1])) {
                let mut base = here.clone();
                let mut skip = 0;
                while code[at + skip..].starts_with("super::") {
                    base.pop();
                    skip += "super::".len();
                }
                (base, skip)
            } else {
                at += rest.chars().next().map_or(1, char::len_utf8);
                continue;
            };
        at += skip;
        let (paths, used) = read_tree(&code[at..]);
        for path in paths {
            let mut full = base.clone();
            full.extend(path);
            found.push(full);
        }
        at += used.max(1);
    }
    found
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Reads `a::b::{c, d::e}` at the start of `text`: the paths it names and the bytes read.
fn read_tree(text: &str) -> (Vec<Vec<String>>, usize) {
    let bytes = text.as_bytes();
    let mut segments = Vec::new();
    let mut at = 0;
    loop {
        let start = at;
        while at < bytes.len() && is_ident(bytes[at]) {
            at += 1;
        }
        if at > start {
            segments.push(text[start..at].to_owned());
        }
        let group = if text[at..].starts_with("::{") {
            Some(3)
        } else if at == 0 && text.starts_with('{') {
            Some(1)
        } else {
            None
        };
        if let Some(open) = group {
            at += open;
            let mut paths = Vec::new();
            loop {
                while at < bytes.len() && matches!(bytes[at], b' ' | b'\n' | b',' | b'\t') {
                    at += 1;
                }
                if at >= bytes.len() || bytes[at] == b'}' {
                    at += 1;
                    break;
                }
                let (inner, used) = read_tree(&text[at..]);
                for p in inner {
                    let mut full = segments.clone();
                    full.extend(p);
                    paths.push(full);
                }
                at += used.max(1);
            }
            return (paths, at);
        }
        if text[at..].starts_with("::") {
            at += 2;
            continue;
        }
        return (vec![segments], at);
    }
}

/// The module dependency graph of the crate whose sources are in `src`.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let texts: BTreeMap<String, String> = files
        .iter()
        .map(|f| (module_of(src, f), std::fs::read_to_string(f).unwrap()))
        .collect();
    // Test-only modules, and everything below them.
    let mut test_only: BTreeSet<String> = BTreeSet::new();
    for (module, text) in &texts {
        for name in test_modules(text) {
            let child = if module.is_empty() {
                name
            } else {
                format!("{module}::{name}")
            };
            test_only.insert(child);
        }
    }
    let is_test = |m: &str| {
        test_only
            .iter()
            .any(|t| m == t || m.starts_with(&format!("{t}::")))
    };
    let modules: BTreeSet<&String> = texts.keys().filter(|m| !is_test(m)).collect();
    let within = |m: &str, ancestor: &str| {
        ancestor.is_empty() || m == ancestor || m.starts_with(&format!("{ancestor}::"))
    };
    let mut graph = BTreeMap::new();
    for module in &modules {
        let mut targets = BTreeSet::new();
        for path in paths_in(&code_of(&texts[module.as_str()]), module) {
            // The deepest module the path reaches.
            let mut target = String::new();
            for depth in (1..=path.len()).rev() {
                let candidate = path[..depth].join("::");
                if modules.contains(&candidate) {
                    target = candidate;
                    break;
                }
            }
            let ancestor_or_self = within(module, &target);
            let descendant = within(&target, module);
            if !ancestor_or_self && !descendant {
                targets.insert(target);
            }
        }
        graph.insert(module.to_string(), targets);
    }
    graph
}

/// The module graph seen from `depth` segments down: every module is taken as its
/// ancestor `depth` segments deep (`a::b::c` as `a::b` at depth 2), so a folder module
/// is the sum of its files, and a use its submodule makes is its own use. A cycle that
/// runs through a submodule (`a::s` uses `b`, which uses `a`) is a cycle of `a` and `b`
/// at depth 1, whatever re-export `b` reached `a` through.
fn at_depth(
    graph: &BTreeMap<String, BTreeSet<String>>,
    depth: usize,
) -> BTreeMap<String, BTreeSet<String>> {
    let cut = |m: &str| m.split("::").take(depth).collect::<Vec<_>>().join("::");
    let mut seen: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, targets) in graph {
        let from = cut(module);
        let entry = seen.entry(from.clone()).or_default();
        for target in targets {
            let to = cut(target);
            let nested = from.is_empty()
                || to.is_empty()
                || from == to
                || from.starts_with(&format!("{to}::"))
                || to.starts_with(&format!("{from}::"));
            if !nested {
                entry.insert(to);
            }
        }
    }
    seen
}

/// The module cycles of a crate's graph at every depth (see [`at_depth`]), each once,
/// its deepest form first.
fn all_cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let deepest = graph
        .keys()
        .map(|m| m.split("::").count())
        .max()
        .unwrap_or(1);
    let mut found: Vec<Vec<String>> = Vec::new();
    for depth in (1..=deepest).rev() {
        for cycle in cycles(&at_depth(graph, depth)) {
            if !found.contains(&cycle) {
                found.push(cycle);
            }
        }
    }
    found
}

/// The strongly connected components with more than one module (Tarjan's algorithm).
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'g> {
        graph: &'g BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        found: Vec<Vec<String>>,
    }
    fn visit<'g>(s: &mut State<'g>, v: &'g str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.graph.get(v).into_iter().flatten() {
            if !s.index.contains_key(w.as_str()) {
                visit(s, w);
                let low = s.low[v].min(s.low[w.as_str()]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w.as_str()) {
                let low = s.low[v].min(s.index[w.as_str()]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.to_owned());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.found.push(component);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.found
}

#[test]
fn no_crate_has_a_module_cycle() {
    let mut all = BTreeMap::new();
    for entry in std::fs::read_dir(workspace().join("crates")).unwrap() {
        let dir = entry.unwrap().path();
        let src = dir.join("src");
        if !src.is_dir() {
            continue;
        }
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let found = all_cycles(&module_graph(&src));
        if !found.is_empty() {
            all.insert(name, found);
        }
    }
    let known: BTreeMap<String, Vec<Vec<String>>> = KNOWN_CYCLES
        .iter()
        .map(|(krate, modules)| {
            (
                krate.to_string(),
                vec![modules.iter().map(|m| m.to_string()).collect()],
            )
        })
        .collect();
    assert_eq!(all, known, "module cycles (crate: modules in one cycle)");
}

/// The checker itself finds a cycle, resolves `super::` and grouped imports, and
/// leaves out uses of ancestors and of test modules.
#[test]
fn the_cycle_checker_sees_cycles() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir(src.join("a")).unwrap();
    std::fs::write(
        src.join("lib.rs"),
        "mod a;\nmod b;\n#[cfg(test)]\nmod t;\npub struct Root;\n",
    )
    .unwrap();
    std::fs::write(src.join("a/mod.rs"), "mod inner;\nuse crate::Root;\n").unwrap();
    std::fs::write(src.join("a/inner.rs"), "use super::super::b::B;\n").unwrap();
    std::fs::write(
        src.join("b.rs"),
        "pub struct B;\n// use crate::a::X;\nuse crate::{Root, a::inner::Y};\n",
    )
    .unwrap();
    std::fs::write(src.join("t.rs"), "use crate::a::Z;\n").unwrap();
    let graph = module_graph(src);
    assert_eq!(graph["a::inner"], BTreeSet::from(["b".to_owned()]));
    assert_eq!(graph["b"], BTreeSet::from(["a::inner".to_owned()]));
    assert!(graph["a"].is_empty(), "{graph:?}");
    assert!(!graph.contains_key("t"));
    assert_eq!(
        cycles(&graph),
        vec![vec!["a::inner".to_owned(), "b".to_owned()]]
    );
}

/// A cycle through a folder module's file is seen as a cycle of the folder module,
/// though no single file imports one that imports it back; test modules behind
/// `#[cfg(all(test, …))]` are left out.
#[test]
fn the_cycle_checker_sees_cycles_through_submodules() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir(src.join("a")).unwrap();
    std::fs::write(
        src.join("lib.rs"),
        "mod a;\nmod b;\n#[cfg(all(test, unix))]\nmod t;\n",
    )
    .unwrap();
    std::fs::write(src.join("a/mod.rs"), "mod s;\npub struct A;\n").unwrap();
    std::fs::write(src.join("a/s.rs"), "fn f() { crate::b::g(); }\n").unwrap();
    std::fs::write(src.join("b.rs"), "pub fn g() {}\nuse crate::a::A;\n").unwrap();
    std::fs::write(src.join("t.rs"), "use crate::a::s;\n").unwrap();
    let graph = module_graph(src);
    assert!(!graph.contains_key("t"), "{graph:?}");
    assert!(cycles(&graph).is_empty(), "{graph:?}");
    assert_eq!(
        all_cycles(&graph),
        vec![vec!["a".to_owned(), "b".to_owned()]]
    );
}

/// The `trace2` tool reads traces: it compiles no `tracing` and none of the layer's
/// I/O dependencies (`cargo tree`, as a build of the tool alone resolves features).
#[test]
fn the_trace2_tool_compiles_no_layer() {
    let output = Command::new(env!("CARGO"))
        .current_dir(workspace())
        .args([
            "tree",
            "--offline",
            "-p",
            "trace2-cli",
            "-e",
            "normal",
            "--prefix",
            "none",
        ])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let tree = String::from_utf8(output.stdout).unwrap();
    let packages: BTreeSet<&str> = tree
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .collect();
    assert!(packages.contains("tracing-trace2-binary"), "{packages:?}");
    for unwanted in [
        "tracing",
        "tracing-subscriber",
        "tracing-core",
        "tracing-trace2-core",
        "socket2",
        "sha1_smol",
    ] {
        assert!(
            !packages.contains(unwanted),
            "trace2-cli compiles {unwanted}"
        );
    }
}

/// Type names that two declarations share on purpose, each with the reason. Every
/// other struct, enum, trait or union of the crates' non-test code has a name of its
/// own (docs/architecture.md's glossary): a name that means two things misleads every
/// reader who finds one of them.
const SHARED_TYPE_NAMES: &[(&str, &str)] = &[
    (
        "Kind",
        "the record catalogue's kinds, and the `trace2` tool's own reading of Event \
         lines, which goes when the tool reads by the catalogue (issue 23)",
    ),
    (
        "KindSpec",
        "the catalogue's row, and the binary format's table row until the binary \
         encoder is driven by the catalogue (issue 23)",
    ),
    (
        "TracedChild",
        "one thing for two runtimes: `command::TracedChild` (std) and \
         `command::tokio::TracedChild`",
    ),
];

/// The name a line declares, if it declares a struct, enum, trait or union.
fn declared_type(line: &str) -> Option<&str> {
    let mut rest = line.trim_start();
    if let Some(after) = rest.strip_prefix("pub") {
        rest = match after.strip_prefix('(') {
            Some(scope) => &scope[scope.find(')')? + 1..],
            None => after,
        };
        if !rest.starts_with(char::is_whitespace) {
            return None;
        }
        rest = rest.trim_start();
    }
    let rest = ["unsafe trait ", "struct ", "enum ", "trait ", "union "]
        .iter()
        .find_map(|keyword| rest.strip_prefix(keyword))?;
    let end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    (end > 0).then(|| &rest[..end])
}

/// Every struct, enum, trait and union declared in the non-test code of the crates
/// under `crates` (each `crates/<name>/src`), by name, with the files declaring it.
/// Test code is left out as the module graph leaves it out, and so is an item under
/// `#[cfg(test)]` or `#[cfg(doctest)]`.
fn type_declarations(crates: &Path) -> BTreeMap<String, Vec<String>> {
    let mut found: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for entry in std::fs::read_dir(crates).unwrap() {
        let src = entry.unwrap().path().join("src");
        if !src.is_dir() {
            continue;
        }
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        let texts: BTreeMap<String, (PathBuf, String)> = files
            .into_iter()
            .map(|f| {
                let text = std::fs::read_to_string(&f).unwrap();
                (module_of(&src, &f), (f, text))
            })
            .collect();
        let mut test_only = Vec::new();
        for (module, (_, text)) in &texts {
            for name in test_modules(text) {
                test_only.push(if module.is_empty() {
                    name
                } else {
                    format!("{module}::{name}")
                });
            }
        }
        for (module, (file, text)) in &texts {
            if test_only
                .iter()
                .any(|t| module == t || module.starts_with(&format!("{t}::")))
            {
                continue;
            }
            let shown = file
                .strip_prefix(crates)
                .unwrap_or(file)
                .display()
                .to_string();
            let mut under_test_cfg = false;
            for line in code_of(text).lines() {
                let trimmed = line.trim_start();
                if is_test_cfg(trimmed) {
                    under_test_cfg = true;
                    continue;
                }
                if trimmed.starts_with("#[") {
                    continue;
                }
                if let Some(name) = declared_type(line)
                    && !under_test_cfg
                {
                    found
                        .entry(name.to_owned())
                        .or_default()
                        .push(shown.clone());
                }
                under_test_cfg = false;
            }
        }
    }
    for files in found.values_mut() {
        files.sort();
    }
    found
}

#[test]
fn no_type_name_is_declared_twice() {
    let declared = type_declarations(&workspace().join("crates"));
    let twice: BTreeMap<&String, &Vec<String>> = declared
        .iter()
        .filter(|(name, files)| {
            files.len() > 1 && !SHARED_TYPE_NAMES.iter().any(|(shared, _)| shared == name)
        })
        .collect();
    assert!(
        twice.is_empty(),
        "type names declared more than once; name each type for what it holds \
         (docs/architecture.md, Glossary): {twice:#?}"
    );
    for (name, _) in SHARED_TYPE_NAMES {
        assert!(
            declared.get(*name).is_some_and(|files| files.len() > 1),
            "{name} is declared once now: remove it from SHARED_TYPE_NAMES"
        );
    }
}

/// The checker finds a name declared in two crates, whatever the visibility, and leaves
/// out test modules, test-only items and doc comments.
#[test]
fn the_type_name_checker_sees_twice_declared_names() {
    let dir = tempfile::tempdir().unwrap();
    let write = |path: &str, text: &str| {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        "a/src/lib.rs",
        "//! struct Documented;\npub mod slots;\n#[cfg(test)]\nmod tests;\n\
         #[cfg(doctest)]\n#[doc = \"\"]\nstruct ReadmeDoctests;\n",
    );
    write(
        "a/src/slots.rs",
        "pub(crate) struct Slot {\n    used: bool,\n}\n",
    );
    write("a/src/tests.rs", "struct Slot;\nstruct OnlyInTests;\n");
    write(
        "b/src/lib.rs",
        "mod fields;\n#[cfg(doctest)]\nstruct ReadmeDoctests;\npub unsafe trait Marker {}\n",
    );
    write(
        "b/src/fields.rs",
        "#[derive(Default)]\nstruct Slot<'a>(&'a str);\nfn f() { let s = Slot(\"\"); }\n\
         #[cfg(test)]\nmod tests {\n    struct Slot;\n}\n",
    );
    let declared = type_declarations(dir.path());
    let names: Vec<&str> = declared.keys().map(String::as_str).collect();
    assert_eq!(names, ["Marker", "Slot"]);
    assert_eq!(
        declared["Slot"],
        [
            Path::new("a/src/slots.rs").display().to_string(),
            Path::new("b/src/fields.rs").display().to_string(),
        ]
    );
}

/// How many times the word `unsafe` appears in the code of a Rust source (comments left
/// out): blocks, `unsafe fn`, `unsafe impl`, `unsafe extern` and `#[unsafe(…)]` alike;
/// `unsafe_code` and other lint names are not the word.
fn unsafe_count(text: &str) -> usize {
    text.lines()
        .map(|line| {
            let code = line.split("//").next().unwrap_or("");
            code.match_indices("unsafe")
                .filter(|&(at, _)| {
                    let before = code[..at].bytes().next_back();
                    let after = code[at + "unsafe".len()..].bytes().next();
                    !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
                })
                .count()
        })
        .sum()
}

/// The files docs/unsafe.md lists, with the count its heading gives each
/// (`### `path` (n)`).
fn listed_unsafe(doc: &str) -> BTreeMap<String, usize> {
    doc.lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("### `")?;
            let (path, rest) = rest.split_once("` (")?;
            let count = rest.strip_suffix(')')?.parse().ok()?;
            Some((path.to_owned(), count))
        })
        .collect()
}

/// docs/unsafe.md lists every source file of the crates that holds `unsafe`, with as
/// many as the file holds: a new `unsafe` is listed there, with the check that runs it.
#[test]
fn every_unsafe_is_listed() {
    let root = workspace();
    let mut found = BTreeMap::new();
    for entry in std::fs::read_dir(root.join("crates")).unwrap() {
        let src = entry.unwrap().path().join("src");
        if !src.is_dir() {
            continue;
        }
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        for file in files {
            let count = unsafe_count(&std::fs::read_to_string(&file).unwrap());
            if count > 0 {
                let shown = file.strip_prefix(&root).unwrap();
                let shown = shown.to_string_lossy().replace('\\', "/");
                found.insert(shown, count);
            }
        }
    }
    let listed = listed_unsafe(&std::fs::read_to_string(root.join("docs/unsafe.md")).unwrap());
    assert!(found.len() > 20, "{found:?}");
    assert_eq!(
        listed, found,
        "docs/unsafe.md's headings (left) against the sources' `unsafe` counts (right)"
    );
}

/// The counter counts the keyword only, in code only; the reader reads the headings.
#[test]
fn the_unsafe_counter_counts_the_keyword() {
    let text = "// unsafe in a comment\n#![deny(unsafe_op_in_unsafe_fn)]\n\
                unsafe impl Send for X {}\nlet y = unsafe { f() }; // unsafe\n\
                #[unsafe(no_mangle)]\nfn not_unsafe_named() {}\n";
    assert_eq!(unsafe_count(text), 3);
    let doc = "# t\n### `crates/a/src/b.rs` (4)\n| x |\n### `crates/c/src/d.rs` (1)\n";
    assert_eq!(
        listed_unsafe(doc),
        BTreeMap::from([
            ("crates/a/src/b.rs".to_owned(), 4),
            ("crates/c/src/d.rs".to_owned(), 1)
        ])
    );
}
