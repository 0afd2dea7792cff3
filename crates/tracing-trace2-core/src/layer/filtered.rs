//! [`FilteredLayer`]: the layer behind its per-layer filter ([`Trace2Filter`]), without
//! the filter's look-up of the span at every enter, exit and close.
//!
//! tracing-subscriber's `Filtered` asks the Registry, at every `enter`, `exit`, `close`
//! and `record` of every span, whether its filter enabled that span (a `Registry::get`
//! and a bit test, about 100 instructions). A request span of a web service is entered
//! and exited on every poll, so that is 18 look-ups per request for a span and its
//! handler's. The answer is already in the layer's own store: the layer keeps an entry
//! for exactly the spans its filter let through (it sees them only through `Filtered`'s
//! `on_new_span`), and its `on_enter`, `on_exit`, `on_close` and `on_record` look that
//! entry up anyway and do nothing without one. So those four callbacks go to the layer
//! directly (and `on_follows_from` and `on_id_change`, which it ignores); everything that decides what the program's other layers see (the callsite
//! interest, `enabled`, the level hint, the filter's id and bit for each new span and
//! event) still goes through a real `Filtered`, unchanged, which also answers
//! tracing-subscriber's private "has a per-layer filter" question for `Layered`.

use std::any::TypeId;
use std::fmt;

use tracing_core::span::{Attributes, Id, Record};
use tracing_core::{Event, Interest, LevelFilter, Metadata, Subscriber};
use tracing_subscriber::filter::Filtered;
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

use super::Trace2Layer;
use crate::filter::Trace2Filter;

/// A [`Trace2Layer`] behind its per-layer filter ([`Trace2Layer::filtered`]): the
/// program's other layers see exactly what they see beside a `Filtered` layer, and
/// `tracing` skips at the call site what no layer wants; the span callbacks skip the
/// `Filtered` look-up (see the module documentation). Filter it further with
/// `.with_filter(..)` like any layer.
pub struct FilteredLayer<S> {
    gate: Filtered<Trace2Layer, Trace2Filter, S>,
}

impl<S> FilteredLayer<S> {
    pub(super) fn new(layer: Trace2Layer, filter: Trace2Filter) -> FilteredLayer<S> {
        FilteredLayer {
            gate: Filtered::new(layer, filter),
        }
    }
}

impl<S> FilteredLayer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a> + 'static,
{
    /// The layer itself.
    #[inline]
    pub fn inner(&self) -> &Trace2Layer {
        self.part::<Trace2Layer>()
    }

    /// Its filter.
    pub fn filter(&self) -> &Trace2Filter {
        self.part::<Trace2Filter>()
    }

    /// The layer or the filter inside the `Filtered`, found through its type query
    /// (`Filtered::inner` and `Filtered::filter` are newer than the oldest
    /// tracing-subscriber these crates build with, 0.3.0; the query is as old as
    /// `Filtered`). The type ids are constants, so the query folds to a field address.
    #[inline]
    fn part<T: 'static>(&self) -> &T {
        // SAFETY: `Filtered::downcast_raw` answers the `TypeId` of its layer type with the
        // address of its layer and that of its filter type with the address of its
        // filter (tracing-subscriber's contract for `downcast_raw`: a pointer to a `T`
        // for `TypeId::of::<T>()`); both live inside `self.gate`, so for as long as
        // `&self`.
        let found = unsafe { self.gate.downcast_raw(TypeId::of::<T>()) };
        let found = found.expect("a Filtered answers for its own layer and filter types");
        // SAFETY: as above: `found` points to a `T` that lives as long as `self`.
        unsafe { &*found.cast::<T>() }
    }
}

impl<S> fmt::Debug for FilteredLayer<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FilteredLayer")
            .field("gate", &self.gate)
            .finish()
    }
}

impl<S> Layer<S> for FilteredLayer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a> + 'static,
{
    fn on_layer(&mut self, subscriber: &mut S) {
        self.gate.on_layer(subscriber);
    }

    fn register_callsite(&self, metadata: &'static Metadata<'static>) -> Interest {
        self.gate.register_callsite(metadata)
    }

    fn enabled(&self, metadata: &Metadata<'_>, ctx: Context<'_, S>) -> bool {
        self.gate.enabled(metadata, ctx)
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        self.gate.max_level_hint()
    }

    // Through the filter: it consumes the filter's bit for the span or event, and hands
    // the layer a context that sees only the spans the filter let through.
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        self.gate.on_new_span(attrs, id, ctx);
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        self.gate.on_event(event, ctx);
    }

    // Straight to the layer: a span its filter did not let through has no entry in the
    // layer's store, which these callbacks look up first and stop at (they read nothing
    // from the context); the layer does nothing on `follows_from` and `id_change`.
    fn on_follows_from(&self, span: &Id, follows: &Id, ctx: Context<'_, S>) {
        self.inner().on_follows_from(span, follows, ctx);
    }

    fn on_id_change(&self, old: &Id, new: &Id, ctx: Context<'_, S>) {
        self.inner().on_id_change(old, new, ctx);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        self.inner().on_record(id, values, ctx);
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        self.inner().on_enter(id, ctx);
    }

    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        self.inner().on_exit(id, ctx);
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        self.inner().on_close(id, ctx);
    }

    #[doc(hidden)]
    unsafe fn downcast_raw(&self, id: TypeId) -> Option<*const ()> {
        if id == TypeId::of::<Self>() {
            return Some(self as *const Self as *const ());
        }
        // SAFETY: forwarded as `Layer`s forward it to the layer they wrap: the `Filtered`'s
        // answer for the same `TypeId` (the layer, the filter, or the per-layer filter
        // marker), a pointer into `self.gate`, which lives as long as `self`.
        unsafe { self.gate.downcast_raw(id) }
    }
}
