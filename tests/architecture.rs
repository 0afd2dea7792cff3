//! The checkable claims of docs/architecture.md, checked: no module of any crate imports
//! a module that imports it back (through `use crate::…`, `crate::…` paths and
//! `super::…`), and the `trace2` tool's dependency set holds no `tracing`,
//! `tracing-subscriber`, `socket2` or `sha1_smol`.
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
        if trimmed.starts_with("#[cfg(test)]")
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

/// Submodules declared under `#[cfg(test)]` (or `#[cfg(doctest)]`), whose files are
/// test code.
fn test_modules(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut test_attribute = false;
    for line in text.lines().map(str::trim) {
        if line.starts_with("#[cfg(test)]") || line.starts_with("#[cfg(doctest)]") {
            test_attribute = true;
            continue;
        }
        if test_attribute
            && let Some(rest) = line
                .strip_prefix("mod ")
                .or_else(|| line.strip_prefix("pub mod "))
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
        let found = cycles(&module_graph(&src));
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
