//! Which user spans and events become Trace2 output: a level for spans (regions, the
//! structure of a trace) and one for events (its chatter), and what a WARN event becomes.
//! The same choice is the layer's own check and its per-layer filter ([`Trace2Filter`]),
//! decided per call site, so that what the layer does not want costs nothing at the call
//! site once no other layer wants it either. Where ours is the subscriber's only layer
//! (`Trace2::init`), the same filter is installed as the subscriber's global filter.

use std::sync::Arc;

use tracing_core::{Level, LevelFilter, Metadata, subscriber::Interest};
use tracing_subscriber::layer::{Context, Filter};

/// What a `warn!` event becomes.
///
/// Git traces its errors (`error()`, `die()`, `usage()`), never its warnings, and
/// Trace2 readers (the `trace2` tool, the OpenTelemetry trace2receiver, dashboards)
/// count every `error` line as one, so a warning is not an `error` by default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Warnings {
    /// Nothing: the layer does not want WARN events at all, so a dependency's warnings
    /// cost nothing where no other layer wants them either. The default.
    #[default]
    Off,
    /// A `printf` line (the message followed by the other fields as `name=value`),
    /// which readers do not count as an error.
    Printf,
    /// An `error` line, as `error!` (`msg` = message and fields, `fmt` = the message).
    Error,
}

impl Warnings {
    /// Reads `off`, `printf` or `error` (any case; `false`/`no`/`0` read as `off`).
    pub fn parse(value: &str) -> Option<Warnings> {
        match value.trim().to_ascii_lowercase().as_str() {
            "off" | "false" | "no" | "0" | "none" => Some(Warnings::Off),
            "printf" => Some(Warnings::Printf),
            "error" => Some(Warnings::Error),
            _ => None,
        }
    }
}

/// The levels of user spans and events the layer records, and what WARN becomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Levels {
    /// The most verbose spans that become regions.
    pub spans: LevelFilter,
    /// The most verbose events that become `data`, `printf` or `error` lines.
    pub events: LevelFilter,
    /// What a WARN event becomes.
    pub warnings: Warnings,
}

impl Default for Levels {
    /// Spans from DEBUG (libraries put their request and detail spans there), events
    /// from INFO, WARN events nothing (see `docs/decisions.md`, "Default levels").
    fn default() -> Self {
        Levels {
            spans: LevelFilter::DEBUG,
            events: LevelFilter::INFO,
            warnings: Warnings::Off,
        }
    }
}

impl Levels {
    /// Whether a user span or event of this kind and level becomes output.
    #[inline]
    pub fn wants(&self, meta: &Metadata<'_>) -> bool {
        if meta.is_span() {
            self.wants_span(meta.level())
        } else {
            self.wants_event(meta.level())
        }
    }

    /// Whether a span at `level` becomes a region.
    #[inline]
    pub fn wants_span(&self, level: &Level) -> bool {
        *level <= self.spans
    }

    /// Whether an event at `level` becomes output.
    #[inline]
    pub fn wants_event(&self, level: &Level) -> bool {
        *level <= self.events && (*level != Level::WARN || self.warnings != Warnings::Off)
    }

    /// The most verbose level either kind records (`tracing`'s level hint).
    pub fn max(&self) -> LevelFilter {
        self.spans.max(self.events)
    }
}

/// The Trace2 layer's per-layer filter: [`Levels`], and optionally the crates whose
/// spans and events it records, decided once per call site.
///
/// A layer without a filter of its own tells `tracing` nothing, so beside a filtered
/// layer `tracing` would build and dispatch every span and event of the program. With
/// this filter the layer's wishes join the other layers' in `tracing`'s callsite
/// interest: a call site no layer wants stays a disabled branch (a dependency's warnings
/// that the program's fmt filter silences, every `debug!` event), and the filter hides
/// nothing from the other layers. One filter decides it all: a second per-layer filter
/// around this one would make `tracing` ask both at every call of a call site one of them
/// wants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trace2Filter {
    levels: Levels,
    /// The crates (first segments of the targets) recorded; `None`: every crate.
    crates: Option<Arc<[String]>>,
}

impl Trace2Filter {
    /// A filter that lets through what `levels` wants.
    pub fn new(levels: Levels) -> Trace2Filter {
        Trace2Filter {
            levels,
            crates: None,
        }
    }

    /// Lets through only the spans and events of these crates: those whose target's
    /// first `::` segment is one of them (`env!("CARGO_CRATE_NAME")` names the program's
    /// own). `None` lets every crate through.
    pub fn with_only_crates(mut self, crates: Option<Arc<[String]>>) -> Trace2Filter {
        self.crates = crates;
        self
    }

    /// The levels it lets through.
    pub fn levels(&self) -> Levels {
        self.levels
    }

    /// Whether a span or event with this metadata passes.
    fn wants(&self, meta: &Metadata<'_>) -> bool {
        self.levels.wants(meta)
            && self.crates.as_ref().is_none_or(|crates| {
                let krate = meta.target().split("::").next().unwrap_or("");
                crates.iter().any(|c| c == krate)
            })
    }
}

impl<S> Filter<S> for Trace2Filter {
    fn enabled(&self, meta: &Metadata<'_>, _cx: &Context<'_, S>) -> bool {
        self.wants(meta)
    }

    fn callsite_enabled(&self, meta: &'static Metadata<'static>) -> Interest {
        // Kind, level and target are fixed per call site: the answer is cached there.
        if self.wants(meta) {
            Interest::always()
        } else {
            Interest::never()
        }
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(self.levels.max())
    }
}

/// The same choice as the subscriber's global filter, for a subscriber whose only layer
/// is ours (`Trace2::init`): what the per-layer filter decides, without `Filtered`'s
/// per-span work. `Filtered` asks the Registry at every `enter`, `exit` and `close`
/// whether its filter enabled the span (about 150 instructions per region line, see
/// docs/performance.md, "Round 4"), although this filter's answer is the same for every
/// span of a call site; [`crate::FilteredLayer`] skips those look-ups, but still keeps
/// the filter's bit for every new span and event. Beside other layers it must not be used: a global filter hides
/// what it rejects from every layer (see docs/decisions.md, "The level as a per-layer
/// filter").
impl<S: tracing_core::Subscriber> tracing_subscriber::Layer<S> for Trace2Filter {
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        <Self as Filter<S>>::callsite_enabled(self, meta)
    }

    fn enabled(&self, meta: &Metadata<'_>, _cx: Context<'_, S>) -> bool {
        self.wants(meta)
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(self.levels.max())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_and_events_apart() {
        let levels = Levels::default();
        assert!(levels.wants_span(&Level::DEBUG));
        assert!(!levels.wants_span(&Level::TRACE));
        assert!(!levels.wants_event(&Level::DEBUG));
        assert!(levels.wants_event(&Level::INFO));
        assert!(levels.wants_event(&Level::ERROR));
        // Warnings are off by default, wanted when they become something.
        assert!(!levels.wants_event(&Level::WARN));
        let printf = Levels {
            warnings: Warnings::Printf,
            ..levels
        };
        assert!(printf.wants_event(&Level::WARN));
        // A level below WARN keeps them out whatever they would become.
        let quiet = Levels {
            events: LevelFilter::ERROR,
            warnings: Warnings::Error,
            ..levels
        };
        assert!(!quiet.wants_event(&Level::WARN));
        assert_eq!(levels.max(), LevelFilter::DEBUG);
    }

    #[test]
    fn only_crates_by_first_segment() {
        use tracing_core::callsite::{Callsite, Identifier};
        use tracing_core::field::FieldSet;
        use tracing_core::metadata::Kind;
        struct Site;
        impl Callsite for Site {
            fn set_interest(&self, _: Interest) {}
            fn metadata(&self) -> &Metadata<'_> {
                unreachable!()
            }
        }
        static SITE: Site = Site;
        let meta = |target: &'static str| {
            Metadata::new(
                "e",
                target,
                Level::INFO,
                None,
                None,
                None,
                FieldSet::new(&[], Identifier(&SITE)),
                Kind::EVENT,
            )
        };
        let all = Trace2Filter::new(Levels::default());
        assert!(all.wants(&meta("noisy_dep::graph")));
        let own = all.with_only_crates(Some(vec!["mytool".to_owned()].into()));
        assert!(own.wants(&meta("mytool")));
        assert!(own.wants(&meta("mytool::index::read")));
        assert!(!own.wants(&meta("noisy_dep::graph")));
        assert!(!own.wants(&meta("mytool_extra::x")));
    }

    /// As the global filter of a subscriber, it keeps out what it does not want for the
    /// layers above it (a TRACE span and a DEBUG event with the default levels) and lets
    /// the rest through.
    #[test]
    fn as_a_global_filter() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use tracing_subscriber::layer::SubscriberExt;
        #[derive(Default)]
        struct Seen {
            spans: AtomicUsize,
            events: AtomicUsize,
        }
        struct Count(Arc<Seen>);
        impl<S: tracing_core::Subscriber> tracing_subscriber::Layer<S> for Count {
            fn on_new_span(
                &self,
                _: &tracing_core::span::Attributes<'_>,
                _: &tracing_core::span::Id,
                _: Context<'_, S>,
            ) {
                self.0.spans.fetch_add(1, Ordering::Relaxed);
            }
            fn on_event(&self, _: &tracing_core::Event<'_>, _: Context<'_, S>) {
                self.0.events.fetch_add(1, Ordering::Relaxed);
            }
        }
        let seen = Arc::new(Seen::default());
        let subscriber = tracing_subscriber::registry()
            .with(Trace2Filter::new(Levels::default()))
            .with(Count(seen.clone()));
        tracing::subscriber::with_default(subscriber, || {
            let _debug = tracing::debug_span!("wanted").entered();
            let _trace = tracing::trace_span!("not wanted").entered();
            tracing::info!("wanted");
            tracing::debug!("not wanted");
            tracing::warn!("not wanted either: warnings are off");
        });
        assert_eq!(seen.spans.load(Ordering::Relaxed), 1);
        assert_eq!(seen.events.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn warnings_parse() {
        assert_eq!(Warnings::parse("Error"), Some(Warnings::Error));
        assert_eq!(Warnings::parse(" printf "), Some(Warnings::Printf));
        assert_eq!(Warnings::parse("off"), Some(Warnings::Off));
        assert_eq!(Warnings::parse("false"), Some(Warnings::Off));
        assert_eq!(Warnings::parse("loud"), None);
    }
}
