//! Per-span region state, kept in the span's extensions.
//!
//! When a span is created the core layer records its fields into a [`RegionState`]:
//! the category (`category` field, else the span's target), the label (`label` field,
//! else the span's name),
//! the message (`msg` field, followed by the other fields as `name=value`) and the
//! repository id (`repo` field). Entering the span then opens a Trace2 region with these
//! inputs on the current thread, and leaving it closes the region.

use std::cell::RefCell;
use std::fmt::{self, Write};

use tracing_core::field::{Field, Visit};

use tracing_trace2_record::RegionInfo;

use crate::thread::Lane;

/// Field that names a region's or a datum's category.
pub const CATEGORY_FIELD: &str = "category";
/// Field that carries a region's message.
pub const MSG_FIELD: &str = "msg";
/// Field that carries a repository id.
pub const REPO_FIELD: &str = "repo";
/// Field that overrides the region's label (by default the span's name, which must be
/// a constant in `tracing`).
pub const LABEL_FIELD: &str = "label";

/// States kept per thread for reuse, so that creating a span allocates no strings.
const POOL_SIZE: usize = 64;
/// A state whose strings grew beyond this many bytes is freed rather than pooled.
const POOL_MAX_BYTES: usize = 4096;

/// A text field that remembers whether it was given. Cleared, never freed, so that a
/// recycled state reuses its capacity.
#[derive(Clone, Debug, Default)]
struct Text {
    text: String,
    set: bool,
}

impl Text {
    fn get(&self) -> Option<&str> {
        self.set.then_some(self.text.as_str())
    }

    /// Marks the field given and returns its emptied buffer.
    fn start(&mut self) -> &mut String {
        self.set = true;
        self.text.clear();
        &mut self.text
    }

    fn copy_from(&mut self, other: &Text) {
        if other.set {
            self.start().push_str(&other.text);
        }
    }

    fn reset(&mut self) {
        self.set = false;
        self.text.clear();
    }
}

/// What a span contributes to its Trace2 region.
#[derive(Clone, Debug, Default)]
pub struct RegionState {
    /// The span's target: the category when no `category` field is given.
    target: &'static str,
    /// The span's name: the label when no `label` field is given.
    name: &'static str,
    /// Every field given so far.
    fields: RegionFields,
    /// `msg` followed by the other fields, built once per change when there are other
    /// fields (otherwise the message is `fields.msg` itself).
    msg: String,
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
        let msg = if self.fields.others.is_empty() {
            self.fields.msg.get()
        } else {
            Some(self.msg.as_str())
        };
        RegionInfo {
            repo: self.fields.repo,
            category: Some(self.fields.category.get().unwrap_or(self.target)).filter(present),
            label: Some(self.fields.label.get().unwrap_or(self.name)).filter(present),
            msg,
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
        for k in 0..values.starts.len() {
            let name = values.starts[k].0;
            let value = &values.others[values.value_range(k)];
            match self.fields.starts.iter().position(|&(n, _)| n == name) {
                Some(j) => self.fields.replace_value(j, value),
                None => self.fields.other_named(name).push_str(value),
            }
        }
        if values.starts.is_empty() && !values.others.is_empty() {
            // Text without field boundaries (built by hand): appended as it is.
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
    /// Boxed, so that moving a state between the pool and the span's extensions moves a
    /// pointer, not the whole state.
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
        self.fields.clear();
        self.msg.clear();
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

    /// Joins the message and the other fields, once per change of either.
    pub(crate) fn build_msg(&mut self) {
        self.msg.clear();
        if self.fields.others.is_empty() {
            return;
        }
        if let Some(msg) = self.fields.msg.get() {
            self.msg.push_str(msg);
            self.msg.push(' ');
        }
        self.msg.push_str(&self.fields.others);
    }

    fn capacity(&self) -> usize {
        self.fields.capacity() + self.msg.capacity()
    }
}

/// What the layer keeps in a span's extensions: the span's boxed [`RegionState`], and in
/// the region-per-span mode the lane its region is open on (from its first entry to its
/// close).
///
/// When the span closes, the registry clears its extensions and this hands the state
/// back to the closing thread's pool, so recycling needs no `on_close`.
pub(crate) struct SpanRegion {
    state: Option<Box<RegionState>>,
    lane: Option<Lane>,
    /// Entered, but its region was left out (no task lane was free): so are those of
    /// the spans under it.
    left_out: bool,
}

impl SpanRegion {
    pub(crate) fn new(state: Box<RegionState>) -> SpanRegion {
        SpanRegion {
            state: Some(state),
            lane: None,
            left_out: false,
        }
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
    // Boxed on purpose (clippy's `vec_box`): states move between the pool and span
    // extensions, and a pointer is cheaper to move than the whole state.
    #[allow(clippy::vec_box)]
    static POOL: RefCell<Vec<Box<RegionState>>> = const { RefCell::new(Vec::new()) };
}

/// Span field values gathered before the span's extensions are locked (a field's
/// `Debug` impl may itself use `tracing`, so no lock may be held while it runs).
#[derive(Clone, Debug, Default)]
pub struct RegionFields {
    category: Text,
    label: Text,
    msg: Text,
    repo: Option<i64>,
    others: String,
    /// Each field in `others`: its name and where that name starts.
    starts: Vec<(&'static str, usize)>,
}

impl RegionFields {
    /// Forgets every value, keeping the buffers.
    pub(crate) fn clear(&mut self) {
        self.category.reset();
        self.label.reset();
        self.msg.reset();
        self.repo = None;
        self.others.clear();
        self.starts.clear();
    }

    fn other(&mut self, field: &Field) -> &mut String {
        self.other_named(field_name(field))
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
        self.category.text.capacity()
            + self.label.text.capacity()
            + self.msg.text.capacity()
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

impl Visit for RegionFields {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field_name(field) {
            CATEGORY_FIELD => self.category.start().push_str(value),
            LABEL_FIELD => self.label.start().push_str(value),
            MSG_FIELD => self.msg.start().push_str(value),
            _ => self.other(field).push_str(value),
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        if field_name(field) == REPO_FIELD {
            self.repo = Some(value);
        } else {
            self.record_debug(field, &value);
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        if field_name(field) == REPO_FIELD {
            self.repo = Some(value.min(i64::MAX as u64) as i64);
        } else {
            self.record_debug(field, &value);
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        match field_name(field) {
            CATEGORY_FIELD => {
                let _ = write!(self.category.start(), "{value:?}");
            }
            LABEL_FIELD => {
                let _ = write!(self.label.start(), "{value:?}");
            }
            MSG_FIELD | "message" => {
                let _ = write!(self.msg.start(), "{value:?}");
            }
            REPO_FIELD => {
                let mut text = IdText {
                    bytes: [0; 24],
                    len: 0,
                };
                let id = write!(text, "{value:?}")
                    .ok()
                    .and_then(|()| std::str::from_utf8(&text.bytes[..text.len]).ok())
                    .and_then(|t| t.parse().ok());
                match id {
                    Some(id) => self.repo = Some(id),
                    None => {
                        let _ = write!(self.other(field), "{value:?}");
                    }
                }
            }
            _ => {
                let _ = write!(self.other(field), "{value:?}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(value: &str) -> Text {
        Text {
            text: value.to_owned(),
            set: true,
        }
    }

    #[test]
    fn message_is_msg_then_other_fields() {
        let mut state = RegionState::new("read_index", "my_crate::index");
        assert_eq!(state.info().category, Some("my_crate::index"));
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
            let second = RegionState::pooled("second", "crate::b");
            let info = second.info();
            assert_eq!(info.label, Some("second"));
            assert_eq!(info.category, Some("crate::b"));
            assert_eq!(info.msg, None);
            assert_eq!(info.repo, None);
            // The recycled strings kept their room.
            assert!(second.capacity() > 0);
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
            fields: &["repo"],
            callsite: &CALLSITE,
            kind: tracing_core::metadata::Kind::SPAN,
        };
        let _ = callsite;
        let field = META.fields().field("repo").unwrap();
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
            "repo=x repo=123456789012345678901234567890"
        );
    }
}
