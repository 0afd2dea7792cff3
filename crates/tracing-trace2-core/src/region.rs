//! Per-span region state, kept in the layer's span store (`span_store.rs`).
//!
//! When a span is created the core layer records its fields into a [`RegionState`]:
//! the category (`trace2.category` field, else the crate: the first `::` segment of the
//! span's target), the label (`trace2.label` field, else the span's name), the message
//! (`trace2.msg` field, followed by the other fields as `name=value`) and the repository
//! id (`trace2.repo` field). Only these `trace2.`-prefixed names take a Trace2 role: a
//! function argument recorded by `#[instrument]` can never be named so, so it never
//! takes one by accident.
//!
//! The message, category and label are bounded ([`FieldPolicy::limit`] bytes, cut with
//! `...`, see `bound.rs`), and a field's
//! `Debug` text is formatted only up to that bound: formatting stops as soon as the
//! message is full. When the span's fields are left out ([`FieldPolicy::others`] off,
//! or a region no target writes) they are not formatted at all. Entering the span then
//! opens a Trace2 region with these inputs on the current thread, and leaving it closes
//! the region.

use crate::bound::{Bounded, cut_at, floor_boundary, write_bounded};
use crate::text_slot::TextSlot;
use std::cell::RefCell;
use std::fmt::{self, Write};

use tracing_core::field::{Field, Visit};

use tracing_trace2_record::RegionInfo;

use crate::thread::Lane;

/// Field that names a datum's category (events only: a span takes [`SPAN_CATEGORY_FIELD`]).
pub const CATEGORY_FIELD: &str = "category";
/// Field that carries a repository id (events only: a span takes [`SPAN_REPO_FIELD`]).
pub const REPO_FIELD: &str = "repo";
/// Span field that names a region's category (also taken by events).
pub const SPAN_CATEGORY_FIELD: &str = "trace2.category";
/// Span field that carries a region's message, written before the other fields.
pub const SPAN_MSG_FIELD: &str = "trace2.msg";
/// Span field that carries a repository id (also taken by events).
pub const SPAN_REPO_FIELD: &str = "trace2.repo";
/// Span field that overrides the region's label (by default the span's name, which must
/// be a constant in `tracing`).
pub const SPAN_LABEL_FIELD: &str = "trace2.label";

/// The default bound of a region's message, and of every other text formatted from
/// the program's values (an event's message and fields), in bytes.
pub const DEFAULT_MESSAGE_LIMIT: usize = 256;

/// Which span fields become a region's message, and how long it may grow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldPolicy {
    /// Whether fields without a Trace2 role (a function's arguments) are written into
    /// the message as `name=value`.
    pub others: bool,
    /// The most bytes of a message, and of every other text formatted from the
    /// program's values (a region's category and label, an event's message and field
    /// values); a longer one is cut and ends with `...`.
    pub limit: usize,
}

impl Default for FieldPolicy {
    fn default() -> Self {
        FieldPolicy {
            others: true,
            limit: DEFAULT_MESSAGE_LIMIT,
        }
    }
}

/// The default category of a span's region and of a data event: the crate, the first
/// `::` segment of its target (a module path, unless the call site names a target).
/// A crate is a component, as git's categories are (`index`, `status`, `pack`): code of
/// two crates never shares a category, as the last segment would make it (`function`,
/// `init`, `write` are modules of many crates). Perf shows its first 12 bytes.
pub fn default_category(target: &'static str) -> &'static str {
    // A byte scan up to the first `::`, no substring searcher: this runs for every region
    // line without a `trace2.category`.
    let bytes = target.as_bytes();
    let mut at = 1;
    while at < bytes.len() {
        if bytes[at] == b':' && bytes[at - 1] == b':' {
            return &target[..at - 1];
        }
        at += 1;
    }
    target
}

/// States kept per thread for reuse, so that creating a span allocates no strings.
const POOL_SIZE: usize = 64;
/// A state whose strings grew beyond this many bytes is freed rather than pooled.
const POOL_MAX_BYTES: usize = 4096;

/// What a span contributes to its Trace2 region.
#[derive(Clone, Debug, Default)]
pub struct RegionState {
    /// The span's target: its crate (first segment) is the category when no
    /// `trace2.category` field is given.
    target: &'static str,
    /// The span's name: the label when no `trace2.label` field is given.
    name: &'static str,
    /// Every field given so far.
    fields: RegionFields,
    /// `msg` followed by the other fields, built once per change when there are both,
    /// or the message is cut (otherwise the message is `fields.msg` or `fields.others`
    /// itself, see `msg_from`).
    msg: String,
    /// Which text is the message.
    msg_from: MsgFrom,
    /// The nesting the region opens at: estimated along the span's parents when the
    /// span is created, exact once its region opens (it decides for the children whether
    /// a target writes their regions at all).
    pub(crate) nesting: u32,
}

impl RegionState {
    /// A region labelled `label` whose category defaults to `target`.
    pub fn new(label: &'static str, target: &'static str) -> RegionState {
        RegionState {
            target,
            name: label,
            ..RegionState::default()
        }
    }

    /// The inputs of this region's `region_enter`/`region_leave` lines. An empty
    /// category or label is left out of the lines, as git leaves out a null one.
    pub fn info(&self) -> RegionInfo<'_> {
        let present = |s: &&str| !s.is_empty();
        let msg = match self.msg_from {
            MsgFrom::Own => self.fields.msg.get(),
            MsgFrom::Others => Some(self.fields.others.as_str()),
            MsgFrom::Built => Some(self.msg.as_str()),
        };
        RegionInfo {
            repo: self.fields.repo,
            category: Some(
                self.fields
                    .category
                    .get()
                    // Lazily: the scan of the target costs more than the rest of `info`.
                    .unwrap_or_else(|| default_category(self.target)),
            )
            .filter(present),
            label: Some(self.fields.label.get().unwrap_or(self.name)).filter(present),
            msg,
        }
    }

    /// Copies this region's category (as [`Self::info`] gives it) into `slot`, if it
    /// has one: by reference when it is a literal, as it nearly always is.
    pub(crate) fn copy_category_into(&self, slot: &mut TextSlot) {
        match self.fields.category.get() {
            Some("") => {}
            Some(_) => slot.copy_from(&self.fields.category),
            None => {
                let category = default_category(self.target);
                if !category.is_empty() {
                    slot.set_static(category);
                }
            }
        }
    }

    /// Records span fields (at creation or through `Span::record`).
    pub fn record(&mut self, values: &RegionFields) {
        self.fields.category.copy_from(&values.category);
        self.fields.label.copy_from(&values.label);
        self.fields.msg.copy_from(&values.msg);
        if values.repo.is_some() {
            self.fields.repo = values.repo;
        }
        // A field recorded again replaces its value (as `Span::record` means), in place:
        // recording one field many times costs the length of the message each time, not
        // the number of times it was recorded before.
        self.fields.cut |= values.cut;
        for k in 0..values.starts.len() {
            let name = values.starts[k].0;
            let value = &values.others[values.value_range(k)];
            match self.fields.starts.iter().position(|&(n, _)| n == name) {
                Some(j) => self.fields.replace_value(j, value),
                None => self.fields.other_named(name).push_str(value),
            }
        }
        if values.starts.is_empty() && !values.others.is_empty() {
            // TextSlot without field boundaries (built by hand): appended as it is.
            if !self.fields.others.is_empty() {
                self.fields.others.push(' ');
            }
            self.fields.others.push_str(&values.others);
        }
        self.build_msg();
    }

    /// A state for a new span, recycled from this thread's pool when one is there.
    /// Record its fields with [`RegionState::fields_mut`], then call
    /// [`RegionState::build_msg`].
    ///
    /// Boxed, so that moving a state between the pool and the span store moves a
    /// pointer, not the whole state.
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub(crate) fn pooled(label: &'static str, target: &'static str) -> Box<RegionState> {
        let recycled = POOL
            .try_with(|pool| pool.try_borrow_mut().ok().and_then(|mut p| p.pop()))
            .ok()
            .flatten();
        match recycled {
            Some(mut state) => {
                state.target = target;
                state.name = label;
                state
            }
            None => Box::new(RegionState::new(label, target)),
        }
    }

    /// Hands a closed span's state back to this thread's pool.
    pub(crate) fn recycle(mut self: Box<Self>) {
        if self.capacity() > POOL_MAX_BYTES {
            return;
        }
        // What the next span rewrites before it reads it (`msg`, built by `build_msg`,
        // and `nesting`, set at creation) is left as it is.
        self.fields.clear();
        self.msg_from = MsgFrom::Own;
        let _ = POOL.try_with(|pool| {
            if let Ok(mut pool) = pool.try_borrow_mut()
                && pool.len() < POOL_SIZE
            {
                pool.push(self);
            }
        });
    }

    /// The fields, to record a new span's values into directly (no lock is held then).
    pub(crate) fn fields_mut(&mut self) -> &mut RegionFields {
        &mut self.fields
    }

    /// The policy the span's fields are recorded under (given with [`Self::fields_mut`]).
    pub(crate) fn policy(&self) -> FieldPolicy {
        self.fields.policy
    }

    /// Joins the message and the other fields, once per change of either, and cuts the
    /// result at the policy's bound.
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub(crate) fn build_msg(&mut self) {
        let limit = self.fields.policy.limit;
        let own = self.fields.msg.get();
        let others = &self.fields.others;
        // Only one of the two, within the bound: that text is the message, uncopied (a
        // request span's `method=GET uri=/item/7 version=HTTP/1.1` is written once).
        self.msg_from = match own {
            _ if self.fields.cut => MsgFrom::Built,
            // No message at all.
            None if others.is_empty() => MsgFrom::Own,
            None if others.len() <= limit => MsgFrom::Others,
            Some(m) if others.is_empty() && m.len() <= limit => MsgFrom::Own,
            _ => MsgFrom::Built,
        };
        if self.msg_from != MsgFrom::Built {
            return;
        }
        self.msg.clear();
        if let Some(msg) = own {
            self.msg.push_str(msg);
            if !self.fields.others.is_empty() {
                self.msg.push(' ');
            }
        }
        self.msg.push_str(&self.fields.others);
        if self.fields.cut || self.msg.len() > limit {
            cut_at(&mut self.msg, limit);
        }
    }

    fn capacity(&self) -> usize {
        self.fields.capacity() + self.msg.capacity()
    }
}

/// Which text of a [`RegionState`] is its region's message.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum MsgFrom {
    /// The `trace2.msg` field (or none at all, when it was not given).
    #[default]
    Own,
    /// The other fields, `name=value` (no `trace2.msg`).
    Others,
    /// `msg` joined from both, or cut at the bound.
    Built,
}

/// What the layer keeps for a span in its store: the span's boxed [`RegionState`], and
/// in the region-per-span mode the lane its region is open on (from its first entry to
/// its close).
///
/// When the span closes, `on_close` takes it out of the store and drops it, which hands
/// the state back to the closing thread's pool.
pub(crate) struct SpanRegion {
    state: Option<Box<RegionState>>,
    lane: Option<Lane>,
    /// Entered, but its region was left out (no task lane was free): so are those of
    /// the spans under it.
    left_out: bool,
    /// The id of the nearest ancestor that had a region state when this span was
    /// created (none can gain one later): at the first entry, when it is the span
    /// innermost entered on the thread, it is the parent region, found without a lookup.
    nearest: Option<u64>,
}

impl SpanRegion {
    pub(crate) fn new(state: Box<RegionState>, nearest: Option<u64>) -> SpanRegion {
        SpanRegion {
            state: Some(state),
            lane: None,
            left_out: false,
            nearest,
        }
    }

    /// The nearest ancestor with a region state when the span was created.
    pub(crate) fn nearest(&self) -> Option<u64> {
        self.nearest
    }

    pub(crate) fn state(&self) -> Option<&RegionState> {
        self.state.as_deref()
    }

    pub(crate) fn state_mut(&mut self) -> Option<&mut RegionState> {
        self.state.as_deref_mut()
    }

    /// The lane the span's region is open on (region-per-span mode), once entered.
    pub(crate) fn lane(&self) -> Option<&Lane> {
        self.lane.as_ref()
    }

    /// For an entry of a span whose region is already open: its lane and the nesting it
    /// opened at, as the thread's list of entered spans keeps them.
    pub(crate) fn entered_again(&self) -> Option<(Lane, Option<u32>)> {
        let lane = self.lane.clone()?;
        Some((lane, self.state().map(|state| state.nesting)))
    }

    pub(crate) fn set_lane(&mut self, lane: Lane) {
        self.lane = Some(lane);
    }

    /// Whether the span's region was left out (see [`Self::leave_out`]).
    pub(crate) fn is_left_out(&self) -> bool {
        self.left_out
    }

    /// Leaves the span's region out of the trace, and those of the spans under it.
    pub(crate) fn leave_out(&mut self) {
        self.left_out = true;
    }
}

impl Drop for SpanRegion {
    fn drop(&mut self) {
        if let Some(state) = self.state.take() {
            state.recycle();
        }
    }
}

thread_local! {
    // Boxed on purpose (clippy's `vec_box`): states move between the pool and the span
    // store, and a pointer is cheaper to move than the whole state.
    #[allow(clippy::vec_box)]
    static POOL: RefCell<Vec<Box<RegionState>>> = const { RefCell::new(Vec::new()) };
}

/// Span field values gathered before the span's store entry is locked (a field's
/// `Debug` impl may itself use `tracing`, so no lock may be held while it runs).
#[derive(Clone, Debug, Default)]
pub struct RegionFields {
    category: TextSlot,
    label: TextSlot,
    msg: TextSlot,
    repo: Option<i64>,
    others: String,
    /// Each field in `others`: its name and where that name starts.
    starts: Vec<(&'static str, usize)>,
    /// What is recorded, and up to how many bytes.
    policy: FieldPolicy,
    /// Whether a value was cut or left out at the bound.
    cut: bool,
}

impl RegionFields {
    /// Forgets every value, keeping the buffers (and the policy). A text slot's buffer
    /// keeps its old text: it is read only once given, and emptied then.
    pub(crate) fn clear(&mut self) {
        self.category.forget();
        self.label.forget();
        self.msg.forget();
        self.repo = None;
        self.others.clear();
        self.starts.clear();
        self.cut = false;
    }

    /// Sets what the next values are recorded under.
    pub(crate) fn set_policy(&mut self, policy: FieldPolicy) {
        self.policy = policy;
    }

    /// Starts `name=` in `others` and returns it to write the value into.
    fn other_named(&mut self, name: &'static str) -> &mut String {
        if !self.others.is_empty() {
            self.others.push(' ');
        }
        self.starts.push((name, self.others.len()));
        self.others.push_str(name);
        self.others.push('=');
        &mut self.others
    }

    /// Writes a field without a role as `name=value`, formatting no more of the value
    /// than the message's bound holds; nothing at all when such fields are left out.
    fn write_other(&mut self, name: &'static str, value: fmt::Arguments<'_>) {
        if !self.policy.others {
            return;
        }
        let limit = self.policy.limit;
        if self.others.len() >= limit {
            self.cut = true;
            return;
        }
        let out = self.other_named(name);
        let mut bounded = Bounded { out, limit };
        if bounded.write_fmt(value).is_err() {
            self.cut = true;
        }
    }

    /// Where the value of the `k`th field of `others` is.
    fn value_range(&self, k: usize) -> std::ops::Range<usize> {
        let (name, at) = self.starts[k];
        let end = self
            .starts
            .get(k + 1)
            .map_or(self.others.len(), |&(_, next)| next - 1);
        at + name.len() + 1..end
    }

    /// Replaces the value of the `k`th field of `others`.
    fn replace_value(&mut self, k: usize, value: &str) {
        let range = self.value_range(k);
        let (old_len, new_len) = (range.len(), value.len());
        self.others.replace_range(range, value);
        for entry in &mut self.starts[k + 1..] {
            entry.1 = entry.1 + new_len - old_len;
        }
    }

    fn capacity(&self) -> usize {
        self.category.capacity()
            + self.label.capacity()
            + self.msg.capacity()
            + self.others.capacity()
    }
}

/// A field's name without a raw-identifier prefix.
pub(crate) fn field_name(field: &Field) -> &'static str {
    let name = field.name();
    name.strip_prefix("r#").unwrap_or(name)
}

/// Room for the `Debug` text of a repository id, on the stack; longer text is not an id.
struct IdText {
    bytes: [u8; 24],
    len: usize,
}

impl Write for IdText {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len + s.len();
        let slot = self.bytes.get_mut(self.len..end).ok_or(fmt::Error)?;
        slot.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// The repository id in a value's `Debug` text, if it is one.
pub(crate) fn repo_id(value: &dyn fmt::Debug) -> Option<i64> {
    let mut text = IdText {
        bytes: [0; 24],
        len: 0,
    };
    write!(text, "{value:?}")
        .ok()
        .and_then(|()| std::str::from_utf8(&text.bytes[..text.len]).ok())
        .and_then(|t| t.parse().ok())
}

impl RegionFields {
    /// A string field that is not one of the three `trace2.*` names as spelled (a
    /// raw-identifier prefix, a field without a role): out of line, so that the usual
    /// visit saves no registers for it.
    #[cold]
    #[inline(never)]
    fn record_other_str(&mut self, field: &Field, value: &str) {
        match field_name(field) {
            SPAN_CATEGORY_FIELD => self.category.set_str_bounded(value, self.policy.limit),
            SPAN_LABEL_FIELD => self.label.set_str_bounded(value, self.policy.limit),
            SPAN_MSG_FIELD => self.set_msg(value),
            name => self.write_other(name, format_args!("{value}")),
        }
    }

    /// The message, cut at the bound (on a char boundary) when it is longer.
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn set_msg(&mut self, value: &str) {
        if value.len() <= self.policy.limit {
            self.msg.set_str(value);
        } else {
            self.set_cut_msg(value);
        }
    }

    #[cold]
    #[inline(never)]
    fn set_cut_msg(&mut self, value: &str) {
        let kept = floor_boundary(value, self.policy.limit);
        self.msg.set_str(&value[..kept]);
        self.cut |= kept < value.len();
    }
}

impl Visit for RegionFields {
    fn record_str(&mut self, field: &Field, value: &str) {
        // The name as the call site spells it: the three `trace2.*` names are matched
        // first, without looking for a raw-identifier prefix; anything else goes out of
        // line and is matched as before.
        match field.name() {
            SPAN_CATEGORY_FIELD => self.category.set_str_bounded(value, self.policy.limit),
            SPAN_LABEL_FIELD => self.label.set_str_bounded(value, self.policy.limit),
            SPAN_MSG_FIELD => self.set_msg(value),
            _ => self.record_other_str(field, value),
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        if field_name(field) == SPAN_REPO_FIELD {
            self.repo = Some(value);
        } else {
            self.record_debug(field, &value);
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        if field_name(field) == SPAN_REPO_FIELD {
            self.repo = Some(value.min(i64::MAX as u64) as i64);
        } else {
            self.record_debug(field, &value);
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        match field_name(field) {
            SPAN_CATEGORY_FIELD => {
                write_bounded(
                    self.category.start(),
                    self.policy.limit,
                    format_args!("{value:?}"),
                );
            }
            SPAN_LABEL_FIELD => {
                write_bounded(
                    self.label.start(),
                    self.policy.limit,
                    format_args!("{value:?}"),
                );
            }
            SPAN_MSG_FIELD => {
                let mut bounded = Bounded {
                    out: self.msg.start(),
                    limit: self.policy.limit,
                };
                self.cut |= write!(bounded, "{value:?}").is_err();
            }
            SPAN_REPO_FIELD => match repo_id(value) {
                Some(id) => self.repo = Some(id),
                None => self.write_other(SPAN_REPO_FIELD, format_args!("{value:?}")),
            },
            name => self.write_other(name, format_args!("{value:?}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A slot holding a copy of `value` (never by reference, even for a literal).
    fn text(value: &str) -> TextSlot {
        let mut slot = TextSlot::default();
        slot.start().push_str(value);
        slot
    }

    #[test]
    fn literal_values_are_kept_by_reference_and_others_copied() {
        let literal = "index";
        let mut fields = RegionFields::default();
        fields.category.set_str(literal);
        let owned = String::from("lookup");
        fields.label.set_str(&owned);
        #[cfg(target_os = "linux")]
        assert_eq!(
            fields.category.get().map(str::as_ptr),
            Some(literal.as_ptr())
        );
        assert_eq!(fields.category.get(), Some("index"));
        assert_ne!(fields.label.get().map(str::as_ptr), Some(owned.as_ptr()));
        assert_eq!(fields.label.get(), Some("lookup"));
        // A copied value replaces a literal one, and the other way round; clearing
        // forgets both.
        fields.category.set_str(&owned);
        assert_eq!(fields.category.get(), Some("lookup"));
        fields.label.set_str(literal);
        assert_eq!(fields.label.get(), Some("index"));
        let mut state = RegionState::new("name", "crate::module");
        state.record(&fields);
        assert_eq!(state.info().category, Some("lookup"));
        assert_eq!(state.info().label, Some("index"));
        fields.clear();
        assert_eq!(fields.category.get(), None);
        assert_eq!(fields.label.get(), None);
    }

    #[test]
    fn message_is_msg_then_other_fields() {
        let mut state = RegionState::new("read_index", "my_crate::index");
        assert_eq!(state.info().category, Some("my_crate"));
        assert_eq!(state.info().msg, None);
        let fields = RegionFields {
            msg: text(".git/index"),
            others: "entries=3".into(),
            ..RegionFields::default()
        };
        state.record(&fields);
        assert_eq!(state.info().msg, Some(".git/index entries=3"));
        let later = RegionFields {
            others: "bytes=10".into(),
            category: text("index"),
            repo: Some(1),
            ..RegionFields::default()
        };
        state.record(&later);
        let info = state.info();
        assert_eq!(info.msg, Some(".git/index entries=3 bytes=10"));
        assert_eq!(info.category, Some("index"));
        assert_eq!(info.repo, Some(1));
        assert_eq!(info.label, Some("read_index"));
    }

    /// A recycled state starts empty: nothing of the span it served before shows.
    #[test]
    fn recycled_state_forgets_the_old_span() {
        std::thread::spawn(|| {
            let mut first = RegionState::pooled("first", "crate::a");
            let fields = first.fields_mut();
            fields.msg.start().push_str("old message");
            fields.label.start().push_str("old label");
            fields.others.push_str("k=v");
            fields.repo = Some(4);
            first.build_msg();
            assert_eq!(first.info().msg, Some("old message k=v"));
            first.recycle();
            let mut second = RegionState::pooled("second", "other::b");
            second.build_msg();
            let info = second.info();
            assert_eq!(info.label, Some("second"));
            assert_eq!(info.category, Some("other"));
            assert_eq!(info.msg, None);
            assert_eq!(info.repo, None);
            // The recycled strings kept their room.
            assert!(second.capacity() > 0);
            // A value given again starts from an empty buffer.
            second.fields_mut().msg.start().push_str("new");
            second.build_msg();
            assert_eq!(second.info().msg, Some("new"));
        })
        .join()
        .unwrap();
    }

    /// A field recorded again replaces its value, in place, wherever it stands.
    #[test]
    fn recording_a_field_again_replaces_its_value() {
        let mut state = RegionState::new("r", "t");
        let mut first = RegionFields::default();
        first.msg.start().push('m');
        first.other_named("a").push('1');
        first.other_named("b").push_str("two");
        first.other_named("c").push('3');
        state.record(&first);
        assert_eq!(state.info().msg, Some("m a=1 b=two c=3"));
        for value in ["", "a much longer value", "x"] {
            let mut again = RegionFields::default();
            again.other_named("b").push_str(value);
            again.other_named("d").push_str("new");
            state.record(&again);
            assert_eq!(
                state.info().msg.unwrap(),
                format!("m a=1 b={value} c=3 d=new")
            );
        }
        for i in 0..10_000 {
            let mut again = RegionFields::default();
            let _ = write!(again.other_named("c"), "{i}");
            state.record(&again);
        }
        assert_eq!(state.info().msg, Some("m a=1 b=x c=9999 d=new"));
    }

    /// A state that grew large is freed, not kept by the pool.
    #[test]
    fn large_states_are_not_pooled() {
        std::thread::spawn(|| {
            let mut big = RegionState::pooled("big", "t");
            big.fields_mut()
                .others
                .push_str(&"x".repeat(POOL_MAX_BYTES + 1));
            big.recycle();
            assert_eq!(RegionState::pooled("next", "t").capacity(), 0);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn repo_ids_from_debug_values() {
        struct Id(&'static str);
        impl fmt::Debug for Id {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.0)
            }
        }
        #[derive(Default)]
        struct Capture(RegionFields);
        let callsite = tracing_core::identify_callsite!(&CALLSITE);
        static CALLSITE: tracing_core::callsite::DefaultCallsite =
            tracing_core::callsite::DefaultCallsite::new(&META);
        static META: tracing_core::Metadata<'static> = tracing_core::metadata! {
            name: "test",
            target: "test",
            level: tracing_core::Level::INFO,
            fields: &["trace2.repo", "repo", "msg", "category", "label", "big"],
            callsite: &CALLSITE,
            kind: tracing_core::metadata::Kind::SPAN,
        };
        let _ = callsite;
        let field = META.fields().field("trace2.repo").unwrap();
        let mut capture = Capture::default();
        capture.0.record_debug(&field, &Id("7"));
        assert_eq!(capture.0.repo, Some(7));
        // Not a number, or too long for an id: kept as an ordinary field.
        capture.0.record_debug(&field, &Id("x"));
        capture
            .0
            .record_debug(&field, &Id("123456789012345678901234567890"));
        assert_eq!(capture.0.repo, Some(7));
        assert_eq!(
            capture.0.others,
            "trace2.repo=x trace2.repo=123456789012345678901234567890"
        );
    }

    /// A test callsite whose fields are the names the tests need.
    fn test_field(name: &str) -> Field {
        static CALLSITE: tracing_core::callsite::DefaultCallsite =
            tracing_core::callsite::DefaultCallsite::new(&META);
        static META: tracing_core::Metadata<'static> = tracing_core::metadata! {
            name: "fields",
            target: "test",
            level: tracing_core::Level::INFO,
            fields: &[
                "msg",
                "category",
                "label",
                "repo",
                "message",
                "big",
                "self",
                "trace2.msg",
                "trace2.category",
                "trace2.label",
                "r#trace2.msg",
                "r#trace2.category",
                "r#trace2.label",
            ],
            callsite: &CALLSITE,
            kind: tracing_core::metadata::Kind::SPAN,
        };
        META.fields().field(name).unwrap()
    }

    /// Counts the `Debug` writes of a large value, as a derived `Debug` of a big struct
    /// does them: one piece at a time, stopping at the first failure.
    struct Huge<'a>(&'a std::cell::Cell<usize>);
    impl fmt::Debug for Huge<'_> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            for _ in 0..100_000 {
                self.0.set(self.0.get() + 1);
                f.write_str("0123456789")?;
            }
            Ok(())
        }
    }

    /// A function's arguments named like Trace2 roles stay ordinary fields.
    #[test]
    fn arguments_named_like_roles_take_no_role() {
        let mut fields = RegionFields::default();
        fields.record_debug(&test_field("msg"), &Some("hello"));
        fields.record_str(&test_field("category"), "c");
        fields.record_str(&test_field("label"), "l");
        fields.record_i64(&test_field("repo"), 3);
        let mut state = RegionState::new("ping", "mini_redis::clients::client");
        state.record(&fields);
        let info = state.info();
        assert_eq!(
            info.msg,
            Some("msg=Some(\"hello\") category=c label=l repo=3")
        );
        assert_eq!(info.category, Some("mini_redis"));
        assert_eq!(info.label, Some("ping"));
        assert_eq!(info.repo, None);
    }

    /// The message is bounded, and a huge `Debug` value is formatted no further than
    /// the bound.
    #[test]
    fn message_is_bounded_and_big_values_are_cut_early() {
        let writes = std::cell::Cell::new(0);
        let mut fields = RegionFields::default();
        fields.set_policy(FieldPolicy {
            others: true,
            limit: 100,
        });
        fields.record_debug(&test_field("self"), &Huge(&writes));
        fields.record_debug(&test_field("big"), &Huge(&writes));
        assert!(writes.get() <= 10, "{} writes", writes.get());
        let mut state = RegionState::new("reload", "jj_cli::config");
        state.fields_mut().set_policy(fields.policy);
        state.record(&fields);
        let msg = state.info().msg.unwrap();
        assert_eq!(msg.len(), 100);
        assert!(msg.starts_with("self=0123456789"), "{msg}");
        assert!(msg.ends_with("..."), "{msg}");
        // The explicit message is bounded too, on a character boundary.
        let mut fields = RegionFields::default();
        fields.set_policy(FieldPolicy {
            others: true,
            limit: 10,
        });
        fields.record_str(&test_field("trace2.msg"), "ééééééééé");
        let mut state = RegionState::new("r", "t");
        state.fields_mut().set_policy(fields.policy);
        state.record(&fields);
        assert_eq!(state.info().msg, Some("ééé..."));
        // A short message is kept whole.
        let mut state = RegionState::new("r", "t");
        let mut fields = RegionFields::default();
        fields.record_str(&test_field("trace2.msg"), ".git/index");
        state.record(&fields);
        assert_eq!(state.info().msg, Some(".git/index"));
    }

    /// The `trace2.*` string fields take their roles whether the call site spells them
    /// plainly (matched first) or with a raw-identifier prefix (matched out of line);
    /// other string fields are written into the message, and a long message is cut on
    /// either path.
    #[test]
    fn string_roles_are_found_with_or_without_a_raw_prefix() {
        for raw in ["", "r#"] {
            let mut fields = RegionFields::default();
            fields.set_policy(FieldPolicy {
                others: true,
                limit: 12,
            });
            fields.record_str(&test_field(&format!("{raw}trace2.category")), "index");
            fields.record_str(&test_field(&format!("{raw}trace2.label")), "lookup");
            fields.record_str(&test_field(&format!("{raw}trace2.msg")), "0123456789abcdef");
            fields.record_str(&test_field("label"), "l");
            assert!(fields.cut, "{raw}");
            let mut state = RegionState::new("r", "a::b");
            state.fields_mut().set_policy(fields.policy);
            state.record(&fields);
            let info = state.info();
            assert_eq!(info.category, Some("index"), "{raw}");
            assert_eq!(info.label, Some("lookup"), "{raw}");
            assert_eq!(info.msg, Some("012345678..."), "{raw}");
        }
    }

    /// With span fields left out, no value is formatted; the roles stay.
    #[test]
    fn fields_left_out_are_not_formatted() {
        let writes = std::cell::Cell::new(0);
        let mut fields = RegionFields::default();
        fields.set_policy(FieldPolicy {
            others: false,
            limit: DEFAULT_MESSAGE_LIMIT,
        });
        fields.record_debug(&test_field("self"), &Huge(&writes));
        fields.record_str(&test_field("trace2.msg"), "m");
        assert_eq!(writes.get(), 0);
        let mut state = RegionState::new("r", "t");
        state.record(&fields);
        assert_eq!(state.info().msg, Some("m"));
    }

    #[test]
    fn default_category_is_the_crate() {
        assert_eq!(default_category("mini_redis::server"), "mini_redis");
        assert_eq!(default_category("jj_lib::git::fetch"), "jj_lib");
        assert_eq!(default_category("index"), "index");
        assert_eq!(default_category(""), "");
        assert_eq!(default_category("a::"), "a");
        assert_eq!(default_category("::x"), "");
        assert_eq!(default_category(":x"), ":x");
        assert_eq!(default_category("a:b::c"), "a:b");
        assert_eq!(default_category("ü::ß"), "ü");
        // Two crates with a module of the same name: two categories.
        let walk = default_category("gix_dir::walk::function");
        let status = default_category("gix_status::index_as_worktree::function");
        assert_eq!((walk, status), ("gix_dir", "gix_status"));
    }
}
