//! The layer a program adds whether or not a Trace2 target is enabled: the Trace2 layer
//! when one is, else a layer that changes no decision of the program's other layers.
//!
//! tracing-subscriber's own `Option<Layer>` is not that: its `None` answers
//! `Interest::always()` as a layer without a per-layer filter, and a `Layered` that
//! finds a per-layer filter below it (the program's `fmt::layer().with_filter(..)`) then
//! turns that filter's `never` into `sometimes`: a call site the program hid is asked
//! again (its filters run) at every call. The disabled form here is seen by
//! tracing-subscriber as a per-layer-filtered layer that registers no filter and adds no
//! interest, so each `Layered` above it takes the interest and the level hint of the
//! layers below it, as if it were not there.

use std::any::TypeId;
use std::fmt;

use tracing_core::span::{Attributes, Id, Record};
use tracing_core::{Event, Interest, LevelFilter, Metadata, Subscriber};
use tracing_subscriber::filter::Filtered;
use tracing_subscriber::layer::{Context, Filter, Identity, Layer};
use tracing_subscriber::registry::LookupSpan;

/// A layer that is the Trace2 layer when a target is enabled ([`Trace2::layer`],
/// [`Lifecycle::layer`]), and otherwise costs nothing: with no target enabled, every call
/// site keeps the interest and `tracing`'s global level stays what the program's other
/// layers make them. Add it last (`.with(lifecycle.layer())`), filter it further with
/// [`OptionalLayer::with_filter`], or box it (`.boxed()`). Below a global filter layer
/// that has another layer above it (`registry().with(trace2).with(EnvFilter).with(fmt)`)
/// it is a per-layer-filtered layer under a global filter, which tracing-subscriber
/// combines at a cost whether or not a target is enabled: add it last there.
///
/// Disabled, it writes nothing and holds no Trace2 layer: the [`api`](crate::api) calls
/// find none through the dispatcher and return at once.
///
/// [`Trace2::layer`]: crate::Trace2::layer
/// [`Lifecycle::layer`]: crate::Lifecycle::layer
pub struct OptionalLayer<L, S> {
    state: State<L, S>,
}

enum State<L, S> {
    On(L),
    /// A per-layer-filtered layer that is never installed: its `Filtered` answers
    /// tracing-subscriber's private "has a per-layer filter" downcast for us (the only
    /// question it is asked), without registering a filter.
    Off(Filtered<Identity, LevelFilter, S>),
}

impl<L, S: Subscriber> OptionalLayer<L, S> {
    /// The enabled form around `layer`.
    pub fn enabled(layer: L) -> OptionalLayer<L, S> {
        OptionalLayer {
            state: State::On(layer),
        }
    }

    /// The disabled form, neutral to the layers beside it.
    pub fn disabled() -> OptionalLayer<L, S> {
        OptionalLayer {
            state: State::Off(Identity::new().with_filter(LevelFilter::OFF)),
        }
    }

    /// `layer`'s enabled form, or the disabled one for `None`.
    pub fn from_option(layer: Option<L>) -> OptionalLayer<L, S> {
        layer.map_or_else(Self::disabled, Self::enabled)
    }
}

impl<L, S> OptionalLayer<L, S> {
    /// Whether it holds a layer (a target is enabled).
    pub fn is_enabled(&self) -> bool {
        matches!(self.state, State::On(_))
    }

    /// The layer, if a target is enabled.
    pub fn as_inner(&self) -> Option<&L> {
        match &self.state {
            State::On(layer) => Some(layer),
            State::Off(_) => None,
        }
    }

    /// The layer, if a target is enabled.
    pub fn into_inner(self) -> Option<L> {
        match self.state {
            State::On(layer) => Some(layer),
            State::Off(_) => None,
        }
    }

    /// The layer behind a further per-layer filter, when enabled; still the neutral
    /// disabled layer otherwise (a `Filtered` around the disabled layer would register
    /// its filter and add that filter's interest to every call site). This inherent
    /// method is what `.with_filter(..)` calls, in place of [`Layer::with_filter`].
    pub fn with_filter<F>(self, filter: F) -> OptionalLayer<Filtered<L, F, S>, S>
    where
        L: Layer<S>,
        F: Filter<S>,
        S: Subscriber,
    {
        OptionalLayer {
            state: match self.state {
                State::On(layer) => State::On(Layer::with_filter(layer, filter)),
                State::Off(off) => State::Off(off),
            },
        }
    }
}

impl<L, S> Layer<S> for OptionalLayer<L, S>
where
    L: Layer<S>,
    S: Subscriber + for<'a> LookupSpan<'a> + 'static,
{
    // Not forwarded: `on_register_dispatch` and `event_enabled`, which tracing-subscriber
    // has only since 0.3.12-0.3.19 (this crate builds with 0.3.0). Their defaults are
    // what the Trace2 layer and its filter answer anyway (neither overrides them).

    fn on_layer(&mut self, subscriber: &mut S) {
        // Disabled: no `on_layer` for the inner `Filtered`, so no filter id is taken
        // and the registry's per-layer filter bookkeeping does not grow.
        if let State::On(layer) = &mut self.state {
            layer.on_layer(subscriber);
        }
    }

    fn register_callsite(&self, metadata: &'static Metadata<'static>) -> Interest {
        match &self.state {
            State::On(layer) => layer.register_callsite(metadata),
            // A `Layered` above a per-layer-filtered layer ignores this answer and takes
            // the layers' below; in a `Vec` of layers, which keeps the highest
            // interest, `never` leaves the others' as it is.
            State::Off(_) => Interest::never(),
        }
    }

    fn enabled(&self, metadata: &Metadata<'_>, ctx: Context<'_, S>) -> bool {
        match &self.state {
            State::On(layer) => layer.enabled(metadata, ctx),
            // Leaves the decision to the other layers (`false` would disable the call
            // site for all of them).
            State::Off(_) => true,
        }
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        match &self.state {
            State::On(layer) => layer.max_level_hint(),
            // Combined with the hints below by `max`: theirs stands.
            State::Off(_) => Some(LevelFilter::OFF),
        }
    }

    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if let State::On(layer) = &self.state {
            layer.on_new_span(attrs, id, ctx);
        }
    }

    fn on_record(&self, span: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let State::On(layer) = &self.state {
            layer.on_record(span, values, ctx);
        }
    }

    fn on_follows_from(&self, span: &Id, follows: &Id, ctx: Context<'_, S>) {
        if let State::On(layer) = &self.state {
            layer.on_follows_from(span, follows, ctx);
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        if let State::On(layer) = &self.state {
            layer.on_event(event, ctx);
        }
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        if let State::On(layer) = &self.state {
            layer.on_enter(id, ctx);
        }
    }

    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        if let State::On(layer) = &self.state {
            layer.on_exit(id, ctx);
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        if let State::On(layer) = &self.state {
            layer.on_close(id, ctx);
        }
    }

    fn on_id_change(&self, old: &Id, new: &Id, ctx: Context<'_, S>) {
        if let State::On(layer) = &self.state {
            layer.on_id_change(old, new, ctx);
        }
    }

    #[doc(hidden)]
    unsafe fn downcast_raw(&self, id: TypeId) -> Option<*const ()> {
        if id == TypeId::of::<Self>() {
            return Some(self as *const Self as *const ());
        }
        match &self.state {
            // SAFETY: forwarded as `Layer`s forward it to the layer they wrap; the
            // pointer returned is the inner layer's answer for the same `TypeId`.
            State::On(layer) => unsafe { layer.downcast_raw(id) },
            // The placeholder's own types are no layer of the program's: only the
            // per-layer filter marker (a private type, hence asked by elimination) is
            // answered.
            State::Off(_)
                if id == TypeId::of::<Identity>()
                    || id == TypeId::of::<LevelFilter>()
                    || id == TypeId::of::<Filtered<Identity, LevelFilter, S>>() =>
            {
                None
            }
            // SAFETY: as above, the `Filtered`'s answer for `id`: for the marker, a
            // pointer into `off`, which lives as long as `self`; tracing-subscriber
            // only tests it for presence.
            State::Off(off) => unsafe { off.downcast_raw(id) },
        }
    }
}

impl<L: fmt::Debug, S> fmt::Debug for OptionalLayer<L, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.state {
            State::On(layer) => f
                .debug_tuple("OptionalLayer::enabled")
                .field(layer)
                .finish(),
            State::Off(_) => f.write_str("OptionalLayer::disabled"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::Registry;
    use tracing_subscriber::prelude::*;
    use tracing_trace2_core::{MemorySink, Target, Trace2Layer};
    use tracing_trace2_event::EventFormat;

    type Off = OptionalLayer<Trace2Layer, Registry>;

    /// The downcasts the `api` calls and the lifecycle make through the dispatcher: a
    /// disabled layer gives them no Trace2 layer, and none of its placeholder's types.
    #[test]
    fn a_disabled_layer_holds_no_layer() {
        let dispatch = tracing::Dispatch::new(Registry::default().with(Off::disabled()));
        assert!(dispatch.downcast_ref::<Trace2Layer>().is_none());
        assert!(dispatch.downcast_ref::<LevelFilter>().is_none());
        assert!(dispatch.downcast_ref::<Identity>().is_none());
        assert!(
            dispatch
                .downcast_ref::<Filtered<Identity, LevelFilter, Registry>>()
                .is_none()
        );
        assert!(dispatch.downcast_ref::<Off>().is_some());

        // Enabled, the downcast is the held layer's.
        let on = OptionalLayer::<_, Registry>::enabled(Identity::new());
        let dispatch = tracing::Dispatch::new(Registry::default().with(on));
        assert!(dispatch.downcast_ref::<Identity>().is_some());
    }

    /// The `api` calls find the Trace2 layer an enabled one holds.
    #[test]
    #[cfg_attr(miri, ignore = "the session reads the host name")]
    fn an_enabled_layer_is_found() {
        let layer = Trace2Layer::builder()
            .with_target(Target::new(
                "GIT_TRACE2_EVENT",
                EventFormat::new(),
                MemorySink::new(),
            ))
            .build();
        let on = OptionalLayer::<_, Registry>::enabled(layer);
        assert!(on.is_enabled());
        let dispatch = tracing::Dispatch::new(Registry::default().with(on));
        assert!(dispatch.downcast_ref::<Trace2Layer>().is_some());
    }

    /// Disabled, it is a layer that wants nothing and has nothing to say: the layers
    /// around it decide, and a further filter leaves it disabled.
    #[test]
    fn disabled_answers_are_neutral() {
        let off = Off::disabled().with_filter(LevelFilter::TRACE);
        assert!(!off.is_enabled());
        assert!(off.into_inner().is_none());
        let off = Off::disabled();
        assert_eq!(
            Layer::<Registry>::max_level_hint(&off),
            Some(LevelFilter::OFF)
        );
        assert_eq!(format!("{off:?}"), "OptionalLayer::disabled");
    }
}
