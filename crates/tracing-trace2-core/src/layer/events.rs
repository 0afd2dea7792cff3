//! User events (`info!`, `error!` and the like) into lines. ERROR becomes `error` (and
//! WARN, if asked). Git's `fmt` is the printf format string; `tracing` keeps no template
//! once a message is formatted, so `fmt` holds the message alone and `msg` the message
//! followed by the other fields as `name=value`. A message-only event becomes `printf`;
//! `key` + `value` (or `key` + `json`) become one `data` (or `data_json`); every other
//! field becomes one `data` named after the field (a message next to data fields is
//! written as a `printf` first). A `category` field names the datum's category (default:
//! the enclosing span's region category, else the crate of the event's target,
//! [`crate::default_category`]); `repo` gives the repository column.
//!
//! A floor above `emit`; it uses no other sibling.

use std::cell::RefCell;

use crate::filter::Warnings;
use tracing_core::{Event as TracingEvent, Level, Metadata, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

use crate::bound::write_bounded;
use crate::busy;
use crate::callsite;
use crate::clock;
use crate::fields::EventFields;
use crate::output::CallbackOutput;
use crate::region::default_category;
use crate::span_store::SpanEntry;
use crate::text_slot::TextSlot;
use crate::thread::{self, ThreadState};
use tracing_trace2_record::{Callsite, Timestamp, Trace2Event};

use super::Trace2Layer;
use super::emit::with_pending;

thread_local! {
    static EVENT_FIELDS: RefCell<EventFields> = RefCell::new(EventFields::default());
}

impl Trace2Layer {
    pub(super) fn on_user_event<S>(&self, event: &TracingEvent<'_>, ctx: &Context<'_, S>)
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        let meta = event.metadata();
        let now = clock::now();
        let callsite = callsite::of(meta);
        let _ = EVENT_FIELDS.try_with(|cell| {
            let Ok(mut fields) = cell.try_borrow_mut() else {
                return;
            };
            fields.clear();
            fields.limit = self.inner.fields.limit;
            busy::visiting(|| event.record(&mut *fields));
            // The enclosing span's region, for its category (copied: a literal by
            // reference, else into the event's own slot, which keeps its room).
            if fields.category.get().is_none() {
                self.inherit_category(event, ctx, &mut fields.category);
            }
            thread::with_current_lane(now.t_abs_us, |lane, _| {
                with_pending(|lines| {
                    let mut t = thread::lock(lane);
                    // As in git, a line is as deep as the regions open on its Trace2
                    // thread, whether or not the thread is inside them now (a span
                    // exited but not closed keeps its region open).
                    let depth = t.depth();
                    let category = fields
                        .category
                        .get()
                        .unwrap_or_else(|| default_category(meta.target()));
                    self.user_event_records(
                        &mut t, &fields, meta, category, depth, now, callsite, lines,
                    );
                    self.write_lines(&t, lines);
                });
            });
        });
    }

    /// Gives an event without a category of its own that of the region enclosing it:
    /// that of the nearest span in the event's span's scope that the layer records (as
    /// `tracing`'s `event_span` and `scope` find it), if it has one. The usual case, an
    /// event inside a span the layer records, takes the Registry's current span (or the
    /// explicit parent) and one store lookup; else the Registry's scope is walked.
    #[inline(never)]
    fn inherit_category<S>(
        &self,
        event: &TracingEvent<'_>,
        ctx: &Context<'_, S>,
        category: &mut TextSlot,
    ) where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        let span = if event.is_root() {
            return;
        } else if event.is_contextual() {
            // Unfiltered: the Registry's own current span.
            match ctx.current_span().id() {
                Some(id) => id.into_u64(),
                None => return,
            }
        } else {
            match event.parent() {
                Some(id) => id.into_u64(),
                None => return,
            }
        };
        // In the store: a span this layer saw (so one its filter lets through, which is
        // the one `event_span` finds), with a region state.
        let mut copied = |entry: &mut SpanEntry| {
            entry.region.state()?.copy_category_into(category);
            Some(())
        };
        if self.inner.spans.with(span, &mut copied).flatten().is_some() {
            return;
        }
        let Some(enclosing) = ctx.event_span(event) else {
            return;
        };
        for span in enclosing.scope() {
            if self
                .inner
                .spans
                .with(span.id().into_u64(), &mut copied)
                .flatten()
                .is_some()
            {
                return;
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn user_event_records(
        &self,
        t: &mut ThreadState,
        fields: &EventFields,
        meta: &'static Metadata<'static>,
        category: &str,
        open: u32,
        now: Timestamp,
        callsite: Callsite<'_>,
        lines: &mut CallbackOutput,
    ) {
        let message = fields.message.get();
        let warnings = match *meta.level() {
            Level::WARN => Some(self.inner.levels.warnings),
            _ => None,
        };
        if *meta.level() == Level::ERROR || warnings.is_some() {
            // Errors carry the other fields after the message; `fmt` is the message alone,
            // which is what stands closest to git's format string. Both are bounded. A
            // warning is an error only if asked, else a `printf` of the same text, or nothing.
            if warnings == Some(Warnings::Off) {
                return;
            }
            let limit = fields.limit;
            let mut msg = String::from(message.unwrap_or(""));
            for (name, value) in fields.data() {
                let sep = if msg.is_empty() { "" } else { " " };
                if write_bounded(&mut msg, limit, format_args!("{sep}{name}={value}")) {
                    break;
                }
            }
            let present = |s: &str| (!s.is_empty()).then(|| s.to_owned());
            if warnings == Some(Warnings::Printf) {
                let event = Trace2Event::Printf {
                    msg: (!msg.is_empty()).then_some(msg.as_str()),
                };
                self.emit(t, event, now, callsite, open, lines);
                return;
            }
            let (msg, fmt) = (present(&msg), message.and_then(present).or(present(&msg)));
            let event = Trace2Event::Error {
                msg: msg.as_deref(),
                fmt: fmt.as_deref(),
            };
            self.emit(t, event, now, callsite, open, lines);
            return;
        }
        let nesting = open + 1;
        let t_rel_us = t.since_region(open, now.t_abs_us);
        let mut wrote = false;
        if let Some(msg) = message {
            self.emit(
                t,
                Trace2Event::Printf { msg: Some(msg) },
                now,
                callsite,
                open,
                lines,
            );
            wrote = true;
        }
        let datum = |t: &mut ThreadState,
                     lines: &mut CallbackOutput,
                     key: &str,
                     value: &str,
                     json: bool| {
            let event = if json {
                Trace2Event::DataJson {
                    repo: fields.repo,
                    category,
                    key,
                    json: value,
                    nesting,
                    t_rel_us,
                }
            } else {
                Trace2Event::Data {
                    repo: fields.repo,
                    category,
                    key,
                    value,
                    nesting,
                    t_rel_us,
                }
            };
            self.emit(t, event, now, callsite, open, lines);
        };
        if let Some(key) = fields.key.get() {
            if let Some(json) = fields.json.get() {
                // JSON cut at the bound is no JSON: its text goes out as a plain datum.
                let compact = (!fields.json_cut)
                    .then(|| tracing_trace2_record::text::compact_json(json))
                    .flatten();
                match compact {
                    Some(compact) => datum(t, lines, key, &compact, true),
                    None => datum(t, lines, key, json, false),
                }
            } else if let Some(value) = fields.value.get() {
                // The usual datum (`key` and `value`): its line emitted inline.
                let event = Trace2Event::Data {
                    repo: fields.repo,
                    category,
                    key,
                    value,
                    nesting,
                    t_rel_us,
                };
                self.emit_inline(t, event, now, callsite, open, lines);
            } else {
                datum(t, lines, "key", key, false);
            }
            wrote = true;
        } else {
            for (name, slot) in [("value", &fields.value), ("json", &fields.json)] {
                if let Some(value) = slot.get() {
                    datum(t, lines, name, value, false);
                    wrote = true;
                }
            }
        }
        for (name, value) in fields.data() {
            datum(t, lines, name, value, false);
            wrote = true;
        }
        if !wrote {
            self.emit(
                t,
                Trace2Event::Printf { msg: None },
                now,
                callsite,
                open,
                lines,
            );
        }
    }
}
