//! Trace2 settings, read from the environment and git's config files as git does.
//!
//! Git takes its `trace2.*` settings from the system and global config files only
//! (repository and command-line config are ignored for them), then lets each
//! environment variable override its key when the variable is set and non-empty. The
//! override happens on the raw string, before parsing, so `GIT_TRACE2_BRIEF=maybe`
//! replaces a configured `true` and then falls back to the default. [`Settings::load`]
//! reproduces that, including `[include]` and `[includeIf "hasconfig:remote.*.url:…"]`
//! (for the settings, git reads no repository, so `gitdir:`, `gitdir/i:` and
//! `onbranch:` conditions never hold there).
//!
//! The `def_param` listing (`trace2.configParams`) reads more, as git's early config
//! does: the system and global files, then the config of the repository found from the
//! current directory (scope `local`; found as git finds it, with `GIT_DIR`,
//! `GIT_CEILING_DIRECTORIES` and the `safe.directory` ownership rule), then the
//! command-line config. There `gitdir:` conditions are matched against that
//! repository; `onbranch:` never holds (early config reads no branch), and a worktree's
//! `config.worktree` is not listed, as in git 2.47.3. A program that has read its git
//! config already can hand it over with [`Settings::from_entries`] instead.
//!
//! Where git would die (a config file it cannot parse, a valueless `trace2.*` key, a
//! malformed `GIT_CONFIG_PARAMETERS`), the broken piece is skipped instead and git's
//! message is kept in [`Settings::warnings`] for the caller to print or ignore.
//!
//! The system file is `$GIT_CONFIG_SYSTEM` or `/etc/gitconfig` (the path of a git built
//! with the usual `/usr` prefix; a git built for another prefix reads another file).

mod condition;
mod discover;
mod home;
mod parse;
mod sources;
#[cfg(test)]
pub(crate) mod test_git;
pub(crate) mod wildmatch;

use std::path::{Path, PathBuf};
use tracing_core::LevelFilter;
use tracing_trace2_core::Warnings;

use discover::GitDirTexts;
use sources::{RemoteUrls, SourceReader, command_entries, config_files, is_remote_url};

/// Environment lookup used while loading: returns a variable's value if it is set.
pub type EnvFn<'a> = &'a dyn Fn(&str) -> Option<String>;

/// Which config source an entry came from; the names are the `scope:` of `def_param`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConfigScope {
    /// The system file (`/etc/gitconfig` or `$GIT_CONFIG_SYSTEM`) and its includes.
    System,
    /// The user's files (XDG and `~/.gitconfig`, or `$GIT_CONFIG_GLOBAL`) and their includes.
    Global,
    /// The repository's own `config` file (in its common git directory) and its includes.
    Local,
    /// A worktree's `config.worktree`. Git's own listing never reports it (see
    /// [`Settings::load`]); entries a program hands over with this scope are listed.
    Worktree,
    /// Command-line config passed down through `GIT_CONFIG_COUNT` / `GIT_CONFIG_PARAMETERS`.
    Command,
    /// A submodule's `.gitmodules`, for entries a program hands over.
    Submodule,
    /// A value the program itself sets, outside any file.
    Unknown,
}

impl ConfigScope {
    /// The scope name git prints (`system`, `global`, `local`, `worktree`, `command`,
    /// `submodule`, `unknown`).
    pub fn as_str(self) -> &'static str {
        match self {
            ConfigScope::System => "system",
            ConfigScope::Global => "global",
            ConfigScope::Local => "local",
            ConfigScope::Worktree => "worktree",
            ConfigScope::Command => "command",
            ConfigScope::Submodule => "submodule",
            ConfigScope::Unknown => "unknown",
        }
    }
}

/// One config entry as git's config machinery reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigEntry {
    /// Where the entry was read.
    pub scope: ConfigScope,
    /// Key normalised as git does: section and name lower-case, subsection as written.
    pub key: String,
    /// The value; `None` for a valueless key (`[core] bare`).
    pub value: Option<String>,
}

/// Every Trace2 setting of a process, resolved from config and environment.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Settings {
    /// Normal target (`GIT_TRACE2` / `trace2.normalTarget`), raw; `None` when unset or empty.
    pub normal_destination: Option<String>,
    /// `GIT_TRACE2_BRIEF` / `trace2.normalBrief`.
    pub normal_brief: bool,
    /// Perf target (`GIT_TRACE2_PERF` / `trace2.perfTarget`), raw; `None` when unset or empty.
    pub perf_destination: Option<String>,
    /// `GIT_TRACE2_PERF_BRIEF` / `trace2.perfBrief`.
    pub perf_brief: bool,
    /// Event target (`GIT_TRACE2_EVENT` / `trace2.eventTarget`), raw; `None` when unset or empty.
    pub event_destination: Option<String>,
    /// `GIT_TRACE2_EVENT_BRIEF` / `trace2.eventBrief`.
    pub event_brief: bool,
    /// `GIT_TRACE2_EVENT_NESTING` / `trace2.eventNesting`; 2 unless a value above 0 is given.
    pub event_nesting: u32,
    /// Patterns of `GIT_TRACE2_CONFIG_PARAMS` / `trace2.configParams`, trimmed, in order.
    pub config_params: Vec<String>,
    /// Names of `GIT_TRACE2_ENV_VARS` / `trace2.envVars`, trimmed, in order.
    pub env_vars: Vec<String>,
    /// `GIT_TRACE2_DST_DEBUG` / `trace2.destinationDebug`: report destination failures.
    pub dst_debug: bool,
    /// `GIT_TRACE2_MAX_FILES` / `trace2.maxFiles`; 0 means no limit.
    pub max_files: u32,
    /// `GIT_TRACE2_REDACT` (environment only). `Err` holds git's fatal message for a
    /// value that is not a boolean; git stops the process there.
    pub redact: Result<bool, String>,
    /// The flight recorder's settings (`TRACING_TRACE2_FLIGHT*` / `trace2.flight*`).
    pub flight: FlightSettings,
    /// The config entries `def_param` reports on, in git's read order (system, global,
    /// local, command). Read only when [`Settings::config_params`] is not empty.
    pub config_entries: Vec<ConfigEntry>,
    /// Values of the [`Settings::env_vars`] that were set and non-empty at load time.
    pub env_var_values: Vec<(String, String)>,
    /// Git's message for each broken config piece that was skipped (git would have died).
    pub warnings: Vec<String>,
    /// `TRACING_TRACE2_MAX_LEVEL` / `trace2.maxLevel` (`off`, `error`, `warn`, `info`,
    /// `debug`, `trace`): the most verbose level of the program's spans and events that
    /// become output, both at once. `None` when unset (the program's choice stands:
    /// spans from DEBUG, events from INFO by default).
    pub max_level: Option<LevelFilter>,
    /// `TRACING_TRACE2_SPAN_LEVEL` / `trace2.spanLevel`: the most verbose level of the
    /// spans that become regions; over `max_level` when both are set.
    pub span_level: Option<LevelFilter>,
    /// `TRACING_TRACE2_EVENT_LEVEL` / `trace2.eventLevel`: the most verbose level of the
    /// events that become output; over `max_level` when both are set.
    pub event_level: Option<LevelFilter>,
    /// `TRACING_TRACE2_WARNINGS` / `trace2.warnings` (`off`, `printf`, `error`): what a
    /// `warn!` event becomes. `None` when unset (the program's choice stands, nothing by
    /// default).
    pub warn_as: Option<Warnings>,
    /// `TRACING_TRACE2_SPAN_FIELDS` / `trace2.spanFields` (a git boolean): whether a
    /// span's fields without a Trace2 role are written into its region's message. `None`
    /// when unset (the program's choice stands, yes by default).
    pub span_fields: Option<bool>,
    /// `TRACING_TRACE2_BINARY_NESTING` / `trace2.binaryNesting`: the deepest region
    /// nesting the binary target records; `None` when unset (then the Event nesting).
    pub binary_nesting: Option<u32>,
}

impl Default for Settings {
    /// Everything off, as with no config and an empty environment.
    fn default() -> Self {
        Settings {
            normal_destination: None,
            normal_brief: false,
            perf_destination: None,
            perf_brief: false,
            event_destination: None,
            event_brief: false,
            event_nesting: 2,
            config_params: Vec::new(),
            env_vars: Vec::new(),
            dst_debug: false,
            max_files: 0,
            redact: Ok(true),
            flight: FlightSettings::default(),
            config_entries: Vec::new(),
            env_var_values: Vec::new(),
            warnings: Vec::new(),
            max_level: None,
            span_level: None,
            event_level: None,
            warn_as: None,
            span_fields: None,
            binary_nesting: None,
        }
    }
}

/// The configurable settings: config key (lower-case, as git compares it) and variable.
const KEYS: [(&str, &str); 17] = [
    ("trace2.normaltarget", "GIT_TRACE2"),
    ("trace2.normalbrief", "GIT_TRACE2_BRIEF"),
    ("trace2.perftarget", "GIT_TRACE2_PERF"),
    ("trace2.perfbrief", "GIT_TRACE2_PERF_BRIEF"),
    ("trace2.eventtarget", "GIT_TRACE2_EVENT"),
    ("trace2.eventbrief", "GIT_TRACE2_EVENT_BRIEF"),
    ("trace2.eventnesting", "GIT_TRACE2_EVENT_NESTING"),
    ("trace2.configparams", "GIT_TRACE2_CONFIG_PARAMS"),
    ("trace2.envvars", "GIT_TRACE2_ENV_VARS"),
    ("trace2.destinationdebug", "GIT_TRACE2_DST_DEBUG"),
    ("trace2.maxfiles", "GIT_TRACE2_MAX_FILES"),
    // This library's own settings, in git's style (git ignores them).
    ("trace2.maxlevel", "TRACING_TRACE2_MAX_LEVEL"),
    ("trace2.spanfields", "TRACING_TRACE2_SPAN_FIELDS"),
    ("trace2.binarynesting", "TRACING_TRACE2_BINARY_NESTING"),
    ("trace2.spanlevel", "TRACING_TRACE2_SPAN_LEVEL"),
    ("trace2.eventlevel", "TRACING_TRACE2_EVENT_LEVEL"),
    ("trace2.warnings", "TRACING_TRACE2_WARNINGS"),
];

impl Settings {
    /// Loads the settings of this process from its environment and git's config files.
    pub fn from_env() -> Settings {
        Settings::load(&|name| std::env::var_os(name).map(|v| v.to_string_lossy().into_owned()))
    }

    /// Loads the settings with `env` as the environment (for tests and embedders); the
    /// repository config listed by `def_param` is found from the current directory.
    pub fn load(env: EnvFn<'_>) -> Settings {
        let cwd = std::env::current_dir().ok();
        load_settings(env, cwd.as_deref())
    }

    /// [`Settings::load`] as if the program ran in `cwd` (an absolute path): the
    /// repository whose config `def_param` lists is looked for from there.
    pub fn load_in(env: EnvFn<'_>, cwd: &Path) -> Settings {
        load_settings(env, Some(cwd))
    }

    /// Settings from config a program has already read itself (with gitoxide's
    /// `gix-config`, for example), instead of git's files. The environment overrides
    /// them as it overrides git's config.
    ///
    /// Each item is `(scope, key, value)`; `value` is `None` for a key written without
    /// `=` (`[core] bare`). As in git, the `trace2.*` settings are taken from the
    /// system and global entries only. The `def_param` listing reports every entry
    /// whose key matches `trace2.configParams`, in the order given, so pass the entries
    /// in git's read order (system, global, local, worktree, command) for the listing
    /// to read like git's. No config file and no `GIT_CONFIG_PARAMETERS` /
    /// `GIT_CONFIG_COUNT` entries are read here: the entries are the whole config. A
    /// key that is not a valid config key is skipped with a warning.
    ///
    /// ```
    /// use tracing_trace2::config::{ConfigScope, Settings};
    ///
    /// let entries = vec![
    ///     (ConfigScope::Global, "trace2.eventTarget", Some("/tmp/trace2.event")),
    ///     (ConfigScope::Global, "trace2.configParams", Some("core.*,remote.*.url")),
    ///     (ConfigScope::Local, "core.bare", Some("false")),
    ///     (ConfigScope::Local, "Remote.origin.URL", Some("https://example.com/r.git")),
    ///     (ConfigScope::Local, "trace2.normalTarget", Some("/ignored")), // not system/global
    ///     (ConfigScope::Command, "core.sparseCheckout", None),
    /// ];
    /// let mut settings = Settings::from_entries_with_env(entries, &|_| None);
    /// assert_eq!(settings.event_destination.as_deref(), Some("/tmp/trace2.event"));
    /// assert_eq!(settings.normal_destination, None);
    ///
    /// // A program then builds its layer from them. Here: a brief Normal stream into a
    /// // file instead of the Event target, to see the `def_param` listing that follows
    /// // the first `cmd_name`.
    /// let path = std::env::temp_dir().join(format!("from-entries-{}.normal", std::process::id()));
    /// settings.event_destination = None;
    /// settings.normal_destination = Some(path.display().to_string());
    /// settings.normal_brief = true;
    /// let layer = tracing_trace2::Trace2::with_settings(settings).layer();
    /// # use tracing_subscriber::prelude::*;
    /// let subscriber = tracing_subscriber::registry().with(layer);
    /// tracing::subscriber::with_default(subscriber, || tracing_trace2::api::cmd_name("mytool"));
    /// let normal = std::fs::read_to_string(&path)?;
    /// let listed: Vec<&str> = normal.lines().filter(|l| l.starts_with("def_param")).collect();
    /// assert_eq!(
    ///     listed,
    ///     [
    ///         "def_param scope:local core.bare=false",
    ///         "def_param scope:local remote.origin.url=https://example.com/r.git",
    ///         "def_param scope:command core.sparsecheckout",
    ///     ]
    /// );
    /// # std::fs::remove_file(&path)?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn from_entries<I, K, V>(entries: I) -> Settings
    where
        I: IntoIterator<Item = (ConfigScope, K, Option<V>)>,
        K: AsRef<str>,
        V: Into<String>,
    {
        Settings::from_entries_with_env(entries, &|name| {
            std::env::var_os(name).map(|v| v.to_string_lossy().into_owned())
        })
    }

    /// [`Settings::from_entries`] with `env` as the environment.
    pub fn from_entries_with_env<I, K, V>(entries: I, env: EnvFn<'_>) -> Settings
    where
        I: IntoIterator<Item = (ConfigScope, K, Option<V>)>,
        K: AsRef<str>,
        V: Into<String>,
    {
        let mut warnings = Vec::new();
        let mut all = Vec::new();
        for (scope, key, value) in entries {
            match parse::canonical_key(key.as_ref()) {
                Ok(key) => all.push(ConfigEntry {
                    scope,
                    key,
                    value: value.map(Into::into),
                }),
                Err(message) => add_new(&mut warnings, vec![message]),
            }
        }
        let settings_entries: Vec<&ConfigEntry> = all
            .iter()
            .filter(|e| matches!(e.scope, ConfigScope::System | ConfigScope::Global))
            .collect();
        let settings_entries: Vec<ConfigEntry> = settings_entries.into_iter().cloned().collect();
        resolve(env, &settings_entries, warnings, |_| all)
    }
}

/// Settings from git's files and the environment, with `cwd` the directory where the
/// repository (for the `def_param` listing) is looked for.
fn load_settings(env: EnvFn<'_>, cwd: Option<&Path>) -> Settings {
    let mut warnings = Vec::new();
    let files = config_files(env, &mut warnings);

    // Settings come from the files only; `hasconfig:` includes see the files' URLs.
    let file_entries = read_sources(env, &files, None, None, &mut warnings);
    resolve(env, &file_entries, warnings, |warnings| {
        listed_entries(env, cwd, &files, warnings)
    })
}

/// Resolves every setting from the `trace2.*` keys of `settings_entries` (system and
/// global config) and the environment; `listing` gives the entries `def_param` reports
/// on, asked for only when patterns are configured.
fn resolve(
    env: EnvFn<'_>,
    settings_entries: &[ConfigEntry],
    mut warnings: Vec<String>,
    listing: impl FnOnce(&mut Vec<String>) -> Vec<ConfigEntry>,
) -> Settings {
    let mut raw: [Option<String>; KEYS.len()] = Default::default();
    for entry in settings_entries {
        let Some(i) = KEYS.iter().position(|(key, _)| *key == entry.key) else {
            continue;
        };
        match &entry.value {
            Some(v) => raw[i] = Some(v.clone()),
            None => warnings.push(format!("missing value for '{}'", entry.key)),
        }
    }
    for (i, (_, var)) in KEYS.iter().enumerate() {
        if let Some(v) = env(var).filter(|v| !v.is_empty()) {
            raw[i] = Some(v);
        }
    }
    let [
        normal,
        normal_brief,
        perf,
        perf_brief,
        event,
        event_brief,
        nesting,
        params,
        vars,
        dst_debug,
        max_files,
        max_level,
        span_fields,
        binary_nesting,
        span_level,
        event_level,
        warn_as,
    ] = raw;
    let mut level = |value: Option<String>, key: &str| {
        value.and_then(|v| {
            let level = v.trim().parse::<LevelFilter>().ok();
            if level.is_none() {
                warnings.push(format!(
                    "ignoring '{v}' for {key}: not off, error, warn, info, debug or trace"
                ));
            }
            level
        })
    };
    let max_level = level(max_level, "trace2.maxLevel");
    let span_level = level(span_level, "trace2.spanLevel");
    let event_level = level(event_level, "trace2.eventLevel");
    let warn_as = warn_as.and_then(|v| {
        let parsed = Warnings::parse(&v);
        if parsed.is_none() {
            warnings.push(format!(
                "ignoring '{v}' for trace2.warnings: not off, printf or error"
            ));
        }
        parsed
    });
    let span_fields = span_fields.and_then(|v| {
        let include = parse_git_bool(&v);
        if include.is_none() {
            warnings.push(format!(
                "ignoring '{v}' for trace2.spanFields: not a boolean"
            ));
        }
        include
    });

    let config_params = split_list(params.as_deref());
    let env_vars = split_list(vars.as_deref());
    let env_var_values = env_vars
        .iter()
        .filter_map(|name| {
            env(name)
                .filter(|v| !v.is_empty())
                .map(|v| (name.clone(), v))
        })
        .collect();
    let config_entries = if config_params.is_empty() {
        Vec::new()
    } else {
        listing(&mut warnings)
    };

    Settings {
        normal_destination: normal.filter(|v| !v.is_empty()),
        normal_brief: brief(normal_brief.as_deref()),
        perf_destination: perf.filter(|v| !v.is_empty()),
        perf_brief: brief(perf_brief.as_deref()),
        event_destination: event.filter(|v| !v.is_empty()),
        event_brief: brief(event_brief.as_deref()),
        event_nesting: nesting
            .as_deref()
            .map(atoi)
            .filter(|&n| n > 0)
            .map_or(2, |n| n.unsigned_abs()),
        config_params,
        env_vars,
        dst_debug: dst_debug.as_deref().is_some_and(|v| atoi(v) > 0),
        max_files: max_files
            .as_deref()
            .map(atoi)
            .filter(|&n| n >= 0)
            .map_or(0, |n| n.unsigned_abs()),
        redact: redact_setting(env("GIT_TRACE2_REDACT")),
        flight: resolve_flight(env, settings_entries),
        config_entries,
        env_var_values,
        warnings,
        max_level,
        span_level,
        event_level,
        warn_as,
        span_fields,
        binary_nesting: binary_nesting
            .as_deref()
            .map(atoi)
            .filter(|&n| n > 0)
            .map(i32::unsigned_abs),
    }
}

/// A key normalised as git does for keys given by a program (`None` if invalid).
pub(crate) fn normalise_key(key: &str) -> Option<String> {
    parse::canonical_key(key).ok()
}

/// Appends the warnings not already present (sources read twice report only once).
fn add_new(warnings: &mut Vec<String>, new: Vec<String>) {
    for w in new {
        if !warnings.contains(&w) {
            warnings.push(w);
        }
    }
}

/// The entries git lists for `def_param`, as its early config reads them: the system
/// and global files, the repository's config when one is found from `cwd`, then the
/// command line. (Git 2.47.3 never lists `config.worktree`: early config reads it only
/// for a repository already set up, and the listing passes none.)
fn listed_entries(
    env: EnvFn<'_>,
    cwd: Option<&Path>,
    files: &[(PathBuf, ConfigScope)],
    warnings: &mut Vec<String>,
) -> Vec<ConfigEntry> {
    let (command, command_error) = command_entries(env);
    // System, global and command-line config: where `safe.directory` and
    // `safe.bareRepository` count, and the whole listing outside a repository.
    let protected = read_sources(env, files, None, Some(&command), warnings);
    let repository = cwd.and_then(|cwd| discover::discover(env, cwd, &protected, warnings));
    let entries = match repository {
        None => protected,
        Some(repository) => {
            let texts = repository.gitdir_texts(env);
            let mut sources = files.to_vec();
            sources.push((repository.config_file(), ConfigScope::Local));
            read_sources(env, &sources, Some(&texts), Some(&command), warnings)
        }
    };
    if let Some(e) = command_error {
        add_new(warnings, vec![e]);
    }
    entries
}

/// The entries of `files` then `command`, includes followed, with `hasconfig:`
/// decided by the remote URLs of all of them and `gitdir:` by `git_dir`.
///
/// Git gathers those URLs by a first read that follows every `hasconfig:` include,
/// then reads again deciding them. The second read can differ from the first only
/// where a `hasconfig:` include was met, so without one (the usual case) the first
/// read is the answer and every file is read once.
fn read_sources(
    env: EnvFn<'_>,
    files: &[(PathBuf, ConfigScope)],
    git_dir: Option<&GitDirTexts>,
    command: Option<&[parse::RawEntry]>,
    warnings: &mut Vec<String>,
) -> Vec<ConfigEntry> {
    let read = |urls: RemoteUrls<'_>| {
        let mut reader = SourceReader {
            env,
            urls,
            git_dir,
            warnings: Vec::new(),
            by_url_seen: false,
        };
        let mut entries = Vec::new();
        for (path, scope) in files {
            reader.read_file(path, *scope, 0, &mut entries);
        }
        if let Some(raw) = command {
            reader.push_entries(raw.to_vec(), ConfigScope::Command, None, 0, &mut entries);
        }
        (entries, reader.warnings, reader.by_url_seen)
    };
    let (gathered, first_warnings, by_url_seen) = read(RemoteUrls::Collecting);
    if !by_url_seen {
        add_new(warnings, first_warnings);
        return gathered;
    }
    let urls: Vec<String> = gathered
        .into_iter()
        .filter(|e| is_remote_url(&e.key))
        .filter_map(|e| e.value)
        .collect();
    let (entries, second_warnings, _) = read(RemoteUrls::Known(&urls));
    add_new(warnings, second_warnings);
    entries
}

/// Splits a comma list as git does for patterns and variable names; empty items are
/// dropped (git keeps them, but they can match nothing).
fn split_list(raw: Option<&str>) -> Vec<String> {
    raw.map(|s| {
        s.split(',')
            .map(|item| {
                item.trim_matches(|c: char| c.is_ascii_whitespace())
                    .to_string()
            })
            .filter(|item| !item.is_empty())
            .collect()
    })
    .unwrap_or_default()
}

/// The flight recorder's settings: the binary target kept in memory and written to a
/// directory only when a trigger fires (`docs/flight-recorder.md`). Each comes from the
/// `trace2.*` key of the system or global config, and the environment overrides it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FlightSettings {
    /// `TRACING_TRACE2_FLIGHT` / `trace2.flightTarget`: the absolute directory the
    /// snapshots go to; `None` (or `0`/`false`) when unset or empty: no recorder.
    pub directory: Option<String>,
    /// `TRACING_TRACE2_FLIGHT_MAX_BYTES` / `trace2.flightMaxBytes`: the ring's cap in
    /// bytes (git's integer syntax, `k`/`m`/`g` allowed); `None`: the default.
    pub max_bytes: Option<u64>,
    /// `TRACING_TRACE2_FLIGHT_MIN_AGE` / `trace2.flightMinAge`: the window's minimum age
    /// in seconds; `None`: the default.
    pub min_age_secs: Option<u64>,
    /// `TRACING_TRACE2_FLIGHT_ON_ERROR` / `trace2.flightOnError`: also snapshot on an
    /// `error` event (a git boolean; default false).
    pub on_error: bool,
    /// `TRACING_TRACE2_FLIGHT_SLOW_REGION_MS` / `trace2.flightSlowRegionMs`: also
    /// snapshot when a region lasts longer than this many milliseconds.
    pub slow_region_ms: Option<u64>,
}

/// The flight recorder's settings: config key (lower-case) and variable, in the order
/// of [`resolve_flight`]'s fields.
const FLIGHT_KEYS: [(&str, &str); 5] = [
    ("trace2.flighttarget", "TRACING_TRACE2_FLIGHT"),
    ("trace2.flightmaxbytes", "TRACING_TRACE2_FLIGHT_MAX_BYTES"),
    ("trace2.flightminage", "TRACING_TRACE2_FLIGHT_MIN_AGE"),
    ("trace2.flightonerror", "TRACING_TRACE2_FLIGHT_ON_ERROR"),
    (
        "trace2.flightslowregionms",
        "TRACING_TRACE2_FLIGHT_SLOW_REGION_MS",
    ),
];

/// The flight recorder's settings from the `trace2.flight*` keys of `settings_entries`
/// (system and global config; the last one wins), each overridden by its variable.
fn resolve_flight(env: EnvFn<'_>, settings_entries: &[ConfigEntry]) -> FlightSettings {
    let raw = FLIGHT_KEYS.map(|(key, var)| {
        env(var).filter(|v| !v.is_empty()).or_else(|| {
            settings_entries
                .iter()
                .rev()
                .filter(|e| e.key == key)
                .find_map(|e| e.value.clone())
        })
    });
    let [directory, max_bytes, min_age, on_error, slow_region_ms] = raw;
    FlightSettings {
        directory: directory.filter(|v| !v.is_empty()),
        max_bytes: non_negative(max_bytes.as_deref()),
        min_age_secs: non_negative(min_age.as_deref()),
        on_error: brief(on_error.as_deref()),
        slow_region_ms: non_negative(slow_region_ms.as_deref()),
    }
}

/// A count in git's integer syntax (`k`/`m`/`g` allowed); `None` when unset, not a
/// number or negative, so that the default applies.
fn non_negative(raw: Option<&str>) -> Option<u64> {
    raw.and_then(parse_git_int)
        .and_then(|n| u64::try_from(n).ok())
}

/// A brief flag: an unparsable value leaves the default (false).
fn brief(raw: Option<&str>) -> bool {
    raw.and_then(parse_git_bool).unwrap_or(false)
}

/// `GIT_TRACE2_REDACT` by git's environment-boolean rule: unset means true, empty false.
fn redact_setting(raw: Option<String>) -> Result<bool, String> {
    match raw {
        None => Ok(true),
        Some(v) => parse_git_bool(&v)
            .ok_or_else(|| format!("bad boolean environment value '{v}' for 'GIT_TRACE2_REDACT'")),
    }
}

/// Parses a boolean the way git does: `true`/`yes`/`on` and `false`/`no`/`off`/empty
/// (any case), or an integer (C syntax: decimal, `0x` hex, `0` octal, optional sign and
/// `k`/`m`/`g` unit suffix) that fits an `int`, true when non-zero. `None` otherwise.
pub fn parse_git_bool(value: &str) -> Option<bool> {
    const TRUE: [&str; 3] = ["true", "yes", "on"];
    const FALSE: [&str; 4] = ["false", "no", "off", ""];
    if TRUE.iter().any(|t| value.eq_ignore_ascii_case(t)) {
        return Some(true);
    }
    if FALSE.iter().any(|f| value.eq_ignore_ascii_case(f)) {
        return Some(false);
    }
    parse_git_int(value).map(|n| n != 0)
}

/// Git's `int` config parsing (strtoimax with base 0, then a unit suffix, then a range
/// check against `int`).
pub(crate) fn parse_git_int(value: &str) -> Option<i64> {
    let b = value.as_bytes();
    let mut i = 0;
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
        i += 1;
    }
    let negative = match b.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let (radix, digits_start) = if b.get(i) == Some(&b'0')
        && matches!(b.get(i + 1), Some(b'x' | b'X'))
        && b.get(i + 2).is_some_and(u8::is_ascii_hexdigit)
    {
        (16, i + 2)
    } else if b.get(i) == Some(&b'0') {
        (8, i)
    } else {
        (10, i)
    };
    let mut end = digits_start;
    let mut magnitude: u128 = 0;
    while let Some(d) = b.get(end).and_then(|&c| (c as char).to_digit(radix)) {
        magnitude = magnitude
            .saturating_mul(u128::from(radix))
            .saturating_add(u128::from(d));
        end += 1;
    }
    if end == digits_start {
        return None;
    }
    // strtoimax reports overflow beyond the 64-bit range; git then rejects the value.
    let limit = if negative {
        1u128 << 63
    } else {
        (1u128 << 63) - 1
    };
    if magnitude > limit {
        return None;
    }
    let factor: u128 = match &value[end..] {
        "" => 1,
        "k" | "K" => 1 << 10,
        "m" | "M" => 1 << 20,
        "g" | "G" => 1 << 30,
        _ => return None,
    };
    let int_limit = if negative {
        1u128 << 31
    } else {
        (1u128 << 31) - 1
    };
    if magnitude > int_limit / factor {
        return None;
    }
    let total = (magnitude * factor) as i64;
    Some(if negative { -total } else { total })
}

/// C's `atoi` as glibc implements it: blanks, sign, decimal digits, stop at anything
/// else (0 if no digits); out-of-range values are clamped to 64 bits and then truncated
/// to `int`.
fn atoi(value: &str) -> i32 {
    let b = value.as_bytes();
    let mut i = 0;
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
        i += 1;
    }
    let negative = b.get(i) == Some(&b'-');
    if matches!(b.get(i), Some(b'-' | b'+')) {
        i += 1;
    }
    let mut n: i128 = 0;
    while let Some(d) = b.get(i).filter(|c| c.is_ascii_digit()) {
        n = (n * 10 + i128::from(d - b'0')).min(i128::from(i64::MAX) + 1);
        i += 1;
    }
    let n = if negative { -n } else { n };
    let clamped = n.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64;
    clamped as i32
}

// Compared with the real git, with Unix links and owners: Unix only.
#[cfg(all(test, unix))]
mod repo_tests;
#[cfg(test)]
mod tests;
