//! The floor of a layer filtered as ours is, shared by the benches shaped like real
//! programs: a layer that does nothing, behind the same per-layer filter as
//! [`tracing_trace2::FilteredLayer`] and passed the same callbacks through it.
//!
//! `FilteredLayer` sends what decides what every layer sees (callsite interest,
//! `enabled`, the level hint, the filter's bit of each new span and event) through a real
//! tracing-subscriber `Filtered` with our [`Trace2Filter`], and the span callbacks
//! (enter, exit, close, record) straight to the layer, without `Filtered`'s look-up of
//! the span in the Registry. [`Floor`] does the same around a layer that does nothing:
//! what is left is what any layer filtered this way pays, and cannot avoid, beside the
//! program's own layers: the Registry creating, entering, exiting and closing the spans
//! the filter lets through, `Layered`'s dispatch, the other layers' per-layer filters
//! looking those spans up, and our filter's own decisions. The span callbacks do nothing
//! here; ours look the span up in the layer's store first, which is ours to pay.

use std::any::TypeId;

use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Metadata, Subscriber};
use tracing_subscriber::filter::{Filtered, LevelFilter};
use tracing_subscriber::layer::{Context, Identity, Layer};
use tracing_subscriber::registry::LookupSpan;
use tracing_trace2::{Levels, Trace2Filter};

/// A layer that does nothing, filtered as [`tracing_trace2::FilteredLayer`] filters ours
/// (see the module documentation).
pub struct Floor<S> {
    gate: Filtered<Identity, Trace2Filter, S>,
}

impl<S> Floor<S> {
    /// At `levels`, the levels our layer takes.
    pub fn new(levels: Levels) -> Floor<S> {
        Floor {
            gate: Filtered::new(Identity::new(), Trace2Filter::new(levels)),
        }
    }
}

impl<S> Layer<S> for Floor<S>
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

    // Through the filter, as `FilteredLayer` sends them: it takes the filter's bit.
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        self.gate.on_new_span(attrs, id, ctx);
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        self.gate.on_event(event, ctx);
    }

    // `FilteredLayer` sends these to the layer without the filter; the layer here does
    // nothing with them.
    fn on_record(&self, _: &Id, _: &Record<'_>, _: Context<'_, S>) {}

    fn on_enter(&self, _: &Id, _: Context<'_, S>) {}

    fn on_exit(&self, _: &Id, _: Context<'_, S>) {}

    fn on_close(&self, _: Id, _: Context<'_, S>) {}

    #[doc(hidden)]
    unsafe fn downcast_raw(&self, id: TypeId) -> Option<*const ()> {
        if id == TypeId::of::<Self>() {
            return Some(self as *const Self as *const ());
        }
        // SAFETY: as `FilteredLayer` forwards it: the `Filtered`'s answer for the same
        // `TypeId` (its layer, its filter, or tracing-subscriber's per-layer filter
        // marker, which tells `Layered` that a per-layer filter is inside), a pointer
        // into `self.gate`, which lives as long as `self`.
        unsafe { self.gate.downcast_raw(id) }
    }
}

/// The floor at our layer's default levels (DEBUG spans, INFO events, no WARN).
pub fn floor<S>() -> Floor<S> {
    Floor::new(Levels::default())
}
