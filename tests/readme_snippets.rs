//! Every Rust snippet of the README (and of docs/*.md, and of a crate README that rustdoc
//! does not already test) compiles as written, in a new cargo project that has only the
//! dependencies the docs name.
//!
//! What it does, so that a snippet added tomorrow is checked without editing this file:
//!
//! * Each ```` ```rust ```` block (`rust`, `rust,no_run`, `rust,should_panic`) becomes one
//!   binary (`src/bin/<file>_<line>.rs`) of one generated package, so the dependencies
//!   are built once for all of them.
//! * A block is compiled as rustdoc compiles a doc test: lines starting with `# ` (or a
//!   lone `#`) are code that a reader need not see; a block without `fn main` is the body
//!   of one. Unlike rustdoc, that `main` returns `Result<(), Box<dyn Error>>`, so a
//!   fragment may use `?` without a hidden line (hidden lines show on GitHub and
//!   crates.io, which know nothing of rustdoc's convention).
//! * A snippet that calls `Trace2::from_env()` also calls `with_exe_version` (without it
//!   the trace says `version 0.0.0`).
//! * A `rust,ignore` block is not compiled, and must say why on the line before its
//!   fence, as an HTML comment that readers do not see: `<!-- ignore: <reason> -->`.
//! * The dependencies are what the ```` ```toml ```` blocks of the checked files name
//!   (lines `name = "version"` or `name = { … }`, under a `[dependencies]` header or not;
//!   features merged), for all snippets at once since one package builds them; a crate of
//!   this workspace is taken by path, the others from the workspace's `Cargo.lock`, copied
//!   in, with `cargo --offline`: the test needs no network, only the crates the
//!   workspace's own build already fetched. The README must name `tracing-trace2`.
//! * A crate README that its crate includes as doc tests (`include_str!("../README.md")`
//!   in `src/lib.rs`) is left to rustdoc.
//!
//! The generated package builds in `target/readme-snippets`, kept between runs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// One fenced block of a markdown file.
#[derive(Debug)]
struct Block {
    /// The fence's line number (1-based).
    line: usize,
    /// The info string split at commas (`["rust", "ignore"]`).
    info: Vec<String>,
    /// The line before the fence.
    before: String,
    code: String,
}

/// The fenced blocks of `text` (fences of three or more backticks at the start of a line).
fn blocks(text: &str) -> Vec<Block> {
    let mut found = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let Some(info) = lines[i].strip_prefix("```") else {
            i += 1;
            continue;
        };
        let start = i;
        let mut code = String::new();
        i += 1;
        while i < lines.len() && !lines[i].starts_with("```") {
            code.push_str(lines[i]);
            code.push('\n');
            i += 1;
        }
        found.push(Block {
            line: start + 1,
            info: info
                .split(',')
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
                .collect(),
            before: if start > 0 {
                lines[start - 1].to_owned()
            } else {
                String::new()
            },
            code,
        });
        i += 1;
    }
    found
}

/// What to do with a `rust` block: its source to compile, or why it is not compiled.
fn rust_source(block: &Block) -> Result<Option<String>, String> {
    let attrs = &block.info[1..];
    if attrs.iter().any(|a| a == "ignore") {
        let reason = block
            .before
            .trim()
            .strip_prefix("<!-- ignore:")
            .and_then(|r| r.strip_suffix("-->"))
            .map(str::trim)
            .unwrap_or("");
        return if reason.is_empty() {
            Err("marked `ignore` without `<!-- ignore: <reason> -->` on the line before".into())
        } else {
            Ok(None)
        };
    }
    if let Some(other) = attrs
        .iter()
        .find(|a| !matches!(a.as_str(), "no_run" | "should_panic") && !a.starts_with("edition"))
    {
        return Err(format!("`{other}`: not an attribute this check knows"));
    }
    Ok(Some(wrap(&block.code)))
}

/// rustdoc's hidden lines shown, and a `main` around a block that has none.
fn wrap(code: &str) -> String {
    let code: String = code
        .lines()
        .map(|l| {
            let l = if l == "#" {
                ""
            } else {
                l.strip_prefix("# ").unwrap_or(l)
            };
            format!("{l}\n")
        })
        .collect();
    if code.contains("fn main(") {
        return code;
    }
    if code
        .trim_end()
        .lines()
        .last()
        .is_some_and(|l| l.trim_start().starts_with("Ok::<"))
    {
        // rustdoc's form for a block that ends in its own `Ok::<(), E>(())`.
        return format!(
            "fn main() {{\n    fn _inner() -> Result<(), impl core::fmt::Debug> {{\n{code}    }}\n    _inner().unwrap()\n}}\n"
        );
    }
    format!(
        "fn main() -> Result<(), Box<dyn std::error::Error>> {{\n{code}    #[allow(unreachable_code)]\n    Ok(())\n}}\n"
    )
}

/// One dependency as the docs name it: its `name = …` value, features merged.
#[derive(Default, Debug)]
struct Dep {
    version: Option<String>,
    features: Vec<String>,
    no_default_features: bool,
}

/// The `name = value` lines of the `toml` blocks of `text`, merged into `deps`.
fn named_dependencies(text: &str, deps: &mut BTreeMap<String, Dep>) {
    for block in blocks(text) {
        if block.info.first().map(String::as_str) != Some("toml") {
            continue;
        }
        for line in block.code.lines() {
            let line = line.split(" #").next().unwrap().trim();
            if line.is_empty() || line.starts_with('[') || line.starts_with('#') {
                continue;
            }
            let Some((name, value)) = line.split_once('=') else {
                continue;
            };
            let dep = deps.entry(name.trim().to_owned()).or_default();
            let value = value.trim();
            let quoted = |s: &str| s.trim().trim_matches('"').to_owned();
            if value.starts_with('"') {
                dep.version = Some(quoted(value));
                continue;
            }
            if let Some(v) = field(value, "version") {
                dep.version = Some(quoted(v.split(',').next().unwrap()));
            }
            if let Some(list) = field(value, "features") {
                let list = list.trim_start().trim_start_matches('[');
                let list = list.split(']').next().unwrap();
                for feature in list.split(',').map(quoted).filter(|f| !f.is_empty()) {
                    if !dep.features.contains(&feature) {
                        dep.features.push(feature);
                    }
                }
            }
            if field(value, "default-features").is_some_and(|v| v.trim().starts_with("false")) {
                dep.no_default_features = true;
            }
        }
    }
}

/// The text after `key =` in an inline table.
fn field<'a>(table: &'a str, key: &str) -> Option<&'a str> {
    let at = table.find(&format!("{key} ="))?;
    Some(&table[at + key.len() + 2..])
}

/// The `[dependencies]` table of the generated package: workspace crates by path.
fn manifest_dependencies(deps: &BTreeMap<String, Dep>) -> String {
    let mut out = String::new();
    for (name, dep) in deps {
        let local = workspace().join("crates").join(name);
        let mut parts = Vec::new();
        if local.join("Cargo.toml").is_file() {
            parts.push(format!("path = {:?}", local.display().to_string()));
        } else {
            let version = dep.version.as_deref().unwrap_or("*");
            parts.push(format!("version = {version:?}"));
        }
        if !dep.features.is_empty() {
            parts.push(format!("features = {:?}", dep.features));
        }
        if dep.no_default_features {
            parts.push("default-features = false".into());
        }
        out.push_str(&format!("{name} = {{ {} }}\n", parts.join(", ")));
    }
    out
}

/// The markdown files whose snippets this test compiles.
fn documents() -> Vec<PathBuf> {
    let root = workspace();
    let mut files = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    let mut crates: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    crates.sort();
    for krate in crates {
        let readme = krate.join("README.md");
        let lib = std::fs::read_to_string(krate.join("src/lib.rs")).unwrap_or_default();
        if readme.is_file() && !lib.contains("include_str!(\"../README.md\")") {
            files.push(readme);
        }
    }
    files
}

/// A binary's name for a block: `readme_md_16`, `docs_cli_md_30`, …
fn bin_name(file: &Path, line: usize) -> String {
    let rel = file.strip_prefix(workspace()).unwrap().to_string_lossy();
    let slug: String = rel
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    format!("{slug}_{line}")
}

#[test]
fn every_rust_snippet_of_the_docs_compiles_as_written() {
    let root = workspace();
    let readme_text = std::fs::read_to_string(root.join("README.md")).unwrap();
    let mut problems = Vec::new();
    let mut sources = BTreeMap::new();
    let mut deps = BTreeMap::new();
    named_dependencies(&readme_text, &mut deps);
    let mut readme_snippets = 0;
    for file in documents() {
        let text = std::fs::read_to_string(&file).unwrap();
        named_dependencies(&text, &mut deps);
        let rel = file.strip_prefix(&root).unwrap().display().to_string();
        for block in blocks(&text) {
            if block.info.first().map(String::as_str) != Some("rust") {
                continue;
            }
            if rel == "README.md" {
                readme_snippets += 1;
            }
            // Without it the trace names version 0.0.0 (the default a library cannot know).
            if block.code.contains("Trace2::from_env()") && !block.code.contains("with_exe_version")
            {
                problems.push(format!(
                    "{rel}:{}: Trace2::from_env() without .with_exe_version(env!(\"CARGO_PKG_VERSION\"))",
                    block.line
                ));
            }
            match rust_source(&block) {
                Ok(Some(source)) => {
                    let header = format!("// {rel}:{}\n", block.line);
                    sources.insert(bin_name(&file, block.line), header + &source);
                }
                Ok(None) => {}
                Err(e) => problems.push(format!("{rel}:{}: {e}", block.line)),
            }
        }
    }
    assert!(readme_snippets > 0, "README.md has no ```rust snippet");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(
        deps.contains_key("tracing-trace2"),
        "README.md names no dependency on tracing-trace2 in a ```toml block"
    );

    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("src/bin");
    std::fs::create_dir_all(&bin).unwrap();
    let manifest = format!(
        "[package]\nname = \"readme-snippets\"\nversion = \"0.0.0\"\nedition = \"2024\"\npublish = false\n\n\
         [dependencies]\n{}\n[workspace]\n",
        manifest_dependencies(&deps)
    );
    std::fs::write(dir.path().join("Cargo.toml"), &manifest).unwrap();
    // The workspace's lock: the same versions, all of them already fetched.
    std::fs::copy(root.join("Cargo.lock"), dir.path().join("Cargo.lock")).unwrap();
    for (name, source) in &sources {
        std::fs::write(bin.join(format!("{name}.rs")), source).unwrap();
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "check",
            "--offline",
            "--bins",
            "--quiet",
            "--message-format=short",
        ])
        .current_dir(dir.path())
        .env("CARGO_TARGET_DIR", root.join("target/readme-snippets"))
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_BUILD_RUSTFLAGS")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "a snippet does not compile (each src/bin/<file>_<line>.rs names its place)\n\
         Cargo.toml:\n{manifest}\n{stderr}"
    );
}

/// The extraction itself: blocks, hidden lines, the wrap, and the `ignore` rule.
#[test]
fn snippets_are_extracted_and_an_ignore_needs_a_reason() {
    let text = "text\n```rust\nlet x = 1;\n# let y = x;\n```\n\
                <!-- ignore: needs a database -->\n```rust,ignore\nnope\n```\n\
                ```rust,ignore\nnope\n```\n```toml\n[dependencies]\ntokio = { version = \"1\", features = [\"rt\", \"net\"] }\n```\n";
    let found = blocks(text);
    assert_eq!(found.len(), 4);
    let first = rust_source(&found[0]).unwrap().unwrap();
    assert!(first.starts_with("fn main() -> Result<"), "{first}");
    assert!(first.contains("let y = x;\n"), "{first}");
    assert_eq!(rust_source(&found[1]).unwrap(), None);
    assert!(rust_source(&found[2]).is_err());
    let mut deps = BTreeMap::new();
    named_dependencies(text, &mut deps);
    assert_eq!(deps["tokio"].version.as_deref(), Some("1"));
    assert_eq!(deps["tokio"].features, ["rt", "net"]);
    let ends_ok = wrap("let n: u8 = \"1\".parse()?;\nOk::<(), std::num::ParseIntError>(())\n");
    assert!(ends_ok.contains("fn _inner()"), "{ends_ok}");
}
