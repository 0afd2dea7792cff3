//! A parser for git's config file syntax and for config key names.
//!
//! Written to accept and reject exactly what git 2.47.3 does for the inputs Trace2
//! settings come from; the behaviour below (legacy `[a.B]` sections are lower-cased,
//! blanks inside unquoted values are kept but trailing ones dropped, `name # comment` without `=` is an error, a
//! key before any section is accepted as a bare name) was checked against that binary.

/// One `name = value` line of a config file, in file order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RawEntry {
    /// The key as git normalises it: section and name lower-case, subsection as written.
    pub key: String,
    /// `None` for a valueless key (`[core] bare`), which git treats as boolean true.
    pub value: Option<String>,
}

/// Why a config text was rejected: the 1-based line git would name in
/// `bad config line <n>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ParseError {
    /// Line of the offending character (for an unterminated value, the line it started on).
    pub line: usize,
}

/// Git's "key character": what section and variable names may contain.
fn is_key_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'-'
}

/// Git's `isspace`: no vertical tab or form feed.
fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r')
}

/// A byte reader that folds CRLF into LF and reports end of input as a final LF,
/// like git's reader does, so every construct ends at a `\n`.
struct ConfigReader<'a> {
    bytes: &'a [u8],
    pos: usize,
    line: usize,
    eof: bool,
}

impl ConfigReader<'_> {
    fn next(&mut self) -> u8 {
        let Some(&c) = self.bytes.get(self.pos) else {
            self.eof = true;
            return b'\n';
        };
        self.pos += 1;
        if c == b'\r' && self.bytes.get(self.pos) == Some(&b'\n') {
            self.pos += 1;
            self.line += 1;
            return b'\n';
        }
        if c == b'\n' {
            self.line += 1;
        }
        c
    }

    /// Line number of the character just read (a read `\n` belongs to the line it ends).
    fn current_line(&self, last: u8) -> usize {
        if last == b'\n' && !self.eof {
            self.line - 1
        } else {
            self.line
        }
    }
}

/// Parses a whole config text into its entries, in order.
pub(crate) fn parse_config(text: &[u8]) -> Result<Vec<RawEntry>, ParseError> {
    let text = text.strip_prefix(b"\xef\xbb\xbf").unwrap_or(text);
    let mut r = ConfigReader {
        bytes: text,
        pos: 0,
        line: 1,
        eof: false,
    };
    let mut entries = Vec::new();
    // Section prefix including its trailing dot ("" before the first header).
    let mut section: Vec<u8> = Vec::new();
    let mut in_comment = false;
    loop {
        let c = r.next();
        if c == b'\n' {
            if r.eof {
                return Ok(entries);
            }
            in_comment = false;
            continue;
        }
        if in_comment || is_space(c) {
            continue;
        }
        if c == b'#' || c == b';' {
            in_comment = true;
            continue;
        }
        if c == b'[' {
            section = parse_section_header(&mut r).map_err(|line| ParseError { line })?;
            section.push(b'.');
            continue;
        }
        if !c.is_ascii_alphabetic() {
            return Err(ParseError {
                line: r.current_line(c),
            });
        }
        let mut key = section.clone();
        key.push(c.to_ascii_lowercase());
        let value = parse_entry_rest(&mut r, &mut key)?;
        entries.push(RawEntry {
            key: String::from_utf8_lossy(&key).into_owned(),
            value,
        });
    }
}

/// Reads a section header after its `[`; returns the section name ("sec" or
/// "sec.Sub") or the line of the error.
fn parse_section_header(r: &mut ConfigReader<'_>) -> Result<Vec<u8>, usize> {
    let mut name = Vec::new();
    loop {
        let c = r.next();
        if r.eof {
            // Git counts the end of input as one more line here.
            return Err(r.line + 1);
        }
        if c == b']' {
            if name.is_empty() {
                return Err(r.line);
            }
            return Ok(name);
        }
        if is_space(c) {
            if c == b'\n' {
                return Err(r.current_line(c));
            }
            return parse_subsection(r, name);
        }
        if !is_key_char(c) && c != b'.' {
            return Err(r.line);
        }
        name.push(c.to_ascii_lowercase());
    }
}

/// Reads ` "subsection"]` after a section name and a blank.
fn parse_subsection(r: &mut ConfigReader<'_>, mut name: Vec<u8>) -> Result<Vec<u8>, usize> {
    let mut c = r.next();
    while c != b'\n' && is_space(c) {
        c = r.next();
    }
    if c != b'"' {
        return Err(r.current_line(c));
    }
    name.push(b'.');
    loop {
        let mut c = r.next();
        if c == b'\n' {
            return Err(r.current_line(c));
        }
        if c == b'"' {
            break;
        }
        if c == b'\\' {
            c = r.next();
            if c == b'\n' {
                return Err(r.current_line(c));
            }
        }
        name.push(c);
    }
    // Here git does not step back over a consumed newline.
    if r.next() != b']' {
        return Err(r.line);
    }
    // Git's subsection rule: a header like `[a ""]` gives the key prefix "a.".
    Ok(name)
}

/// Reads the rest of a variable name and its optional `= value`.
fn parse_entry_rest(
    r: &mut ConfigReader<'_>,
    key: &mut Vec<u8>,
) -> Result<Option<String>, ParseError> {
    let mut c;
    loop {
        c = r.next();
        if r.eof || !is_key_char(c) {
            break;
        }
        key.push(c.to_ascii_lowercase());
    }
    while c == b' ' || c == b'\t' {
        c = r.next();
    }
    if c == b'\n' {
        return Ok(None);
    }
    if c != b'=' {
        return Err(ParseError {
            line: r.current_line(c),
        });
    }
    parse_value(r).map(Some)
}

/// Reads a value after `=` up to the end of its (possibly continued) line.
fn parse_value(r: &mut ConfigReader<'_>) -> Result<String, ParseError> {
    let mut value: Vec<u8> = Vec::new();
    let mut quoted = false;
    let mut in_comment = false;
    // Unquoted blanks are held back so trailing ones can be dropped; they are kept as
    // written once something follows them (leading ones never count).
    let mut pending: Vec<u8> = Vec::new();
    loop {
        let c = r.next();
        if c == b'\n' {
            if quoted {
                return Err(ParseError {
                    line: r.current_line(c),
                });
            }
            return Ok(String::from_utf8_lossy(&value).into_owned());
        }
        if in_comment {
            continue;
        }
        if is_space(c) && !quoted {
            if !value.is_empty() {
                pending.push(c);
            }
            continue;
        }
        if !quoted && (c == b';' || c == b'#') {
            in_comment = true;
            continue;
        }
        value.append(&mut pending);
        match c {
            b'\\' => {
                let escaped = match r.next() {
                    b'\n' => continue,
                    b't' => b'\t',
                    b'b' => 0x08,
                    b'n' => b'\n',
                    e @ (b'\\' | b'"') => e,
                    other => {
                        return Err(ParseError {
                            line: r.current_line(other),
                        });
                    }
                };
                value.push(escaped);
            }
            b'"' => quoted = !quoted,
            _ => value.push(c),
        }
    }
}

/// Why a key given on the command line (`GIT_CONFIG_PARAMETERS`, `GIT_CONFIG_KEY_<n>`)
/// was rejected; the text is git's error message.
pub(crate) fn canonical_key(key: &str) -> Result<String, String> {
    let bytes = key.as_bytes();
    let Some(last_dot) = bytes.iter().rposition(|&c| c == b'.').filter(|&i| i > 0) else {
        return Err(format!("key does not contain a section: {key}"));
    };
    if last_dot + 1 == bytes.len() {
        return Err(format!("key does not contain variable name: {key}"));
    }
    let first_dot = bytes.iter().position(|&c| c == b'.').unwrap_or(last_dot);
    let mut out = Vec::with_capacity(bytes.len());
    for (i, &c) in bytes.iter().enumerate() {
        let in_section = i < first_dot;
        let in_name = i > last_dot;
        if in_section || in_name {
            if !is_key_char(c) || (i == last_dot + 1 && !c.is_ascii_alphabetic()) {
                return Err(format!("invalid key: {key}"));
            }
            out.push(c.to_ascii_lowercase());
        } else {
            if c == b'\n' {
                return Err(format!("invalid key (newline): {key}"));
            }
            out.push(c);
        }
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// Splits a normalised key into (section, subsection, name); the subsection is `None`
/// for two-level keys.
pub(crate) fn split_key(key: &str) -> Option<(&str, Option<&str>, &str)> {
    let first = key.find('.')?;
    let last = key.rfind('.')?;
    let section = &key[..first];
    let name = &key[last + 1..];
    let sub = (first != last).then(|| &key[first + 1..last]);
    Some((section, sub, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(text: &str) -> Vec<(String, Option<String>)> {
        parse_config(text.as_bytes())
            .unwrap()
            .into_iter()
            .map(|e| (e.key, e.value))
            .collect()
    }

    fn one(key: &str, value: Option<&str>) -> Vec<(String, Option<String>)> {
        vec![(key.to_string(), value.map(str::to_string))]
    }

    fn err_line(text: &str) -> usize {
        parse_config(text.as_bytes()).unwrap_err().line
    }

    #[test]
    fn sections_and_subsections() {
        assert_eq!(
            entries("[Core]\n\tBare = true\n"),
            one("core.bare", Some("true"))
        );
        assert_eq!(
            entries("[Remote \"Origin\"]\nURL = x\n"),
            one("remote.Origin.url", Some("x"))
        );
        assert_eq!(
            entries("[Remote.Origin]\nURL = x\n"),
            one("remote.origin.url", Some("x"))
        );
        assert_eq!(
            entries("[a \"q\\\"x\\\\y\\z\"]\nk=v\n"),
            one("a.q\"x\\yz.k", Some("v"))
        );
        assert_eq!(entries("[a  \t\"b c\"]k=v"), one("a.b c.k", Some("v")));
        assert_eq!(entries("[a]x=1\n[b]\ny=2\n").len(), 2);
        assert_eq!(entries("top = 1\n"), one("top", Some("1")));
        assert_eq!(entries("[a \"\"]\nk=v\n"), one("a..k", Some("v")));
    }

    #[test]
    fn values_comments_and_escapes() {
        assert_eq!(entries("[a]\nk =   v  w  \n"), one("a.k", Some("v  w")));
        assert_eq!(entries("[a]\nk = v\tw\n"), one("a.k", Some("v\tw")));
        assert_eq!(entries("[a]\nk = v ; c\n"), one("a.k", Some("v")));
        assert_eq!(entries("[a]\nk = v#c\n"), one("a.k", Some("v")));
        assert_eq!(
            entries("[a]\nk = \" v ; #\t\"\n"),
            one("a.k", Some(" v ; #\t"))
        );
        assert_eq!(
            entries("[a]\nk = a\\\"b\\\\c\\nd\\te\\bf\n"),
            one("a.k", Some("a\"b\\c\nd\te\x08f"))
        );
        assert_eq!(
            entries("[a]\nk = one \\\n  two\n"),
            one("a.k", Some("one   two"))
        );
        assert_eq!(entries("[a]\nk = x\"y\"z\n"), one("a.k", Some("xyz")));
        assert_eq!(entries("[a]\nk =\n"), one("a.k", Some("")));
        assert_eq!(entries("[a]\nk = \"\" v\n"), one("a.k", Some("v")));
        assert_eq!(entries("[a]\r\nk = v\r\n"), one("a.k", Some("v")));
        assert_eq!(entries("\u{feff}[a]\nk = v"), one("a.k", Some("v")));
        assert_eq!(
            entries("# c\n; c\n  [a] ; c\n\tk = v\n"),
            one("a.k", Some("v"))
        );
    }

    #[test]
    fn valueless_and_repeated_keys() {
        assert_eq!(entries("[a]\n\tflag\n"), one("a.flag", None));
        assert_eq!(entries("[a]\n\tflag"), one("a.flag", None));
        assert_eq!(entries("[a]\n\tflag  \n"), one("a.flag", None));
        assert_eq!(
            entries("[a]\nk=1\nK=2\n"),
            vec![
                ("a.k".into(), Some("1".into())),
                ("a.k".into(), Some("2".into()))
            ]
        );
    }

    #[test]
    fn errors_name_the_line() {
        // `bad config line 2` for this input was checked with git 2.47.3.
        assert_eq!(err_line("[a]\nname # c\n"), 2);
        assert_eq!(err_line("[a]\n1x = 2\n"), 2);
        assert_eq!(err_line("[a\nk=v\n"), 1);
        assert_eq!(err_line("[a"), 2);
        assert_eq!(err_line("[]\n"), 1);
        assert_eq!(err_line("[a_b]\n"), 1);
        assert_eq!(err_line("[a \"x]\n"), 1);
        assert_eq!(err_line("[a x]\n"), 1);
        assert_eq!(err_line("[a \"x\"\n"), 2);
        assert_eq!(err_line("[a]\nk = \"open\n"), 2);
        assert_eq!(err_line("[a]\nk = bad\\q\n"), 2);
        assert_eq!(err_line("[a]\nk.x = 1\n"), 2);
        assert_eq!(err_line("[a]\n\n\nk = \"x"), 4);
        assert_eq!(err_line("[a]\n k = \"x\n y\"\n"), 2);
    }

    /// Config texts whose parse is compared with `git config -z -l -f`.
    const CORPUS: &[&str] = &[
        "[a]\nk = one \\\n  two\n\tv\n[b \"x y\"]\nz = \"a\"  b  \n",
        "[Core]\n\tBare = true\n[Remote \"Origin\"]\nURL = x\n[Remote.Origin]\nURL = y\n",
        "[a \"q\\\"x\\\\y\\z\"]\nk=v\n[a  \t\"b c\"]k=v",
        "[a]\nk =   v  w  \nk2 = v\tw\nk3 = v ; c\nk4 = v#c\nk5 = \" v ; #\t\"\n",
        "[a]\nk = a\\\"b\\\\c\\nd\\te\\bf\nk2 = x\"y\"z\nk3 =\nk4 = \"\" v\n",
        "[a]\r\nk = v\r\n\tflag\r\nother  \n",
        "\u{feff}# c\n; c\n  [a] ; c\n\tk = v\n[b] x = 1 [c] y = 2\n",
        "[a]\nk=1\nK=2\n[A]\nk=3\n[a \"\"]\nk=v\n",
        "top = 1\n[a]\nk = \"x\" y \"z \" \t\nk2 = x \\\n\nk3 = end\\",
        "[a.B.c]\nx = 1\n[a \"B.c\"]\nx = 2\n[-a-]\n\tx-y = \\\"\n",
        // Further tricky shapes, also used for the gix-config comparison in
        // docs/decisions.md.
        "[a]\n\tk = v \\\n",
        "[a]\nk = \"quoted ; # \" trailing  \n",
        "[a]\nk=\\t\\n\\b\n",
        "[sec.Sub.Deep]\nk=1\n",
        "[a]\nkey\n\n[b]\nx\n",
        "[a]\nk = 'single'\n",
        "[a]\nk = a\\\n\tb\n",
        "[a] k = 1\n",
        "[a]k=1;comment\n",
        "#only comment\n",
        "[a]\n\tk = \"multi\\\nline\"\n",
        "[a]\r\nk = x\\\r\n y\r\n",
        "[a]\nk = v\t \n",
        "[a \"x\"]\n[A \"x\"]\nk=1\n",
        "[a \"ünï\"]\nk=ü\n",
        "[a]\nk = \"a\"\"b\"\n",
        "[a]\n k = \"x\\\"y\" z\n",
        "[a]\nk=   \n",
        "[a.b]\nC=1\n[a \"b\"]\nC=2\n",
        "[a]\nk = x\\\n",
        "[include]\npath = x\n[a]\n\tk\t=\tv\n",
        "[a]\nk = v\\\n\n[b]\n",
    ];

    #[test]
    #[cfg_attr(
        windows,
        ignore = "needs the real git, which Windows runs here do not have"
    )]
    fn parse_matches_git_config_list() {
        let s = crate::config::test_git::Scratch::new();
        for text in CORPUS {
            let file = s.write("c", "");
            std::fs::write(&file, text).unwrap();
            let out = std::process::Command::new(crate::config::test_git::git_binary())
                .args(["config", "-z", "-l", "-f", &file])
                .env_clear()
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{text:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let stdout = String::from_utf8(out.stdout).unwrap();
            let want: Vec<(String, Option<String>)> = stdout
                .split_terminator('\0')
                .map(|item| match item.split_once('\n') {
                    Some((k, v)) => (k.to_string(), Some(v.to_string())),
                    None => (item.to_string(), None),
                })
                .collect();
            assert_eq!(entries(text), want, "{text:?}");
        }
    }

    #[test]
    fn canonical_keys() {
        assert_eq!(canonical_key("A.X").unwrap(), "a.x");
        assert_eq!(canonical_key("b.Sub.Y").unwrap(), "b.Sub.y");
        assert_eq!(canonical_key("a.B C.d").unwrap(), "a.B C.d");
        assert_eq!(canonical_key("a..b").unwrap(), "a..b");
        assert_eq!(
            canonical_key("ab").unwrap_err(),
            "key does not contain a section: ab"
        );
        assert_eq!(
            canonical_key(".ab").unwrap_err(),
            "key does not contain a section: .ab"
        );
        assert_eq!(
            canonical_key("a.").unwrap_err(),
            "key does not contain variable name: a."
        );
        assert_eq!(canonical_key("a.1x").unwrap_err(), "invalid key: a.1x");
        assert_eq!(canonical_key("a.b_c").unwrap_err(), "invalid key: a.b_c");
        assert_eq!(canonical_key("a_b.c").unwrap_err(), "invalid key: a_b.c");
        assert!(canonical_key("a.x\ny.c").is_err());
    }

    #[test]
    fn key_splitting() {
        assert_eq!(split_key("a.b"), Some(("a", None, "b")));
        assert_eq!(
            split_key("remote.x.y.url"),
            Some(("remote", Some("x.y"), "url"))
        );
        assert_eq!(split_key("top"), None);
    }
}
