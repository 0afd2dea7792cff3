//! The field visitor of user `tracing` events (data, printf, error).
//!
//! An event's fields are the program's own words (no function argument becomes an event
//! field), so the short role names stay: `message`, `category`, `key`, `value`, `json`,
//! `repo`; the span names `trace2.category` and `trace2.repo` are taken too.
//!
//! User event fields are written into buffers that live for the whole thread and are
//! cleared, not freed, between events, so a steady stream of events allocates nothing.
//! Every text value is bounded ([`EventFields::limit`] bytes, see `bound.rs`): a value's
//! `Debug` or `Display` text is formatted no further than the bound, so a huge value
//! neither makes a huge line nor allocates its size. Numbers and booleans (at most 20
//! bytes) are written whole.

use crate::bound::{push_bounded, write_bounded};
use crate::text_slot::TextSlot;
use std::fmt;

use tracing_core::field::{Field, Visit};

use crate::region::{
    CATEGORY_FIELD, DEFAULT_MESSAGE_LIMIT, REPO_FIELD, SPAN_CATEGORY_FIELD, SPAN_REPO_FIELD,
    field_name, repo_id,
};

/// Field naming a datum's key.
pub const KEY_FIELD: &str = "key";
/// Field holding a datum's value.
pub const VALUE_FIELD: &str = "value";
/// Field holding a datum's JSON value (with `key`: a `data_json` event).
pub const JSON_FIELD: &str = "json";
/// The field `tracing` uses for an event's message.
pub const MESSAGE_FIELD: &str = "message";

/// What a field of a user event is for, by its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Message,
    Category,
    Key,
    Value,
    Json,
    Repo,
    /// Any other name: a `data` line named after the field.
    Data,
}

impl Role {
    fn of(name: &str) -> Role {
        match name.strip_prefix("r#").unwrap_or(name) {
            MESSAGE_FIELD => Role::Message,
            CATEGORY_FIELD | SPAN_CATEGORY_FIELD => Role::Category,
            KEY_FIELD => Role::Key,
            VALUE_FIELD => Role::Value,
            JSON_FIELD => Role::Json,
            REPO_FIELD | SPAN_REPO_FIELD => Role::Repo,
            _ => Role::Data,
        }
    }
}

/// Slots of [`RoleCache`].
const CACHED_NAMES: usize = 32;

/// The roles of the field names seen lately, by the name's address and length: a role
/// depends on the name alone, and the same `&'static str` address and length is the same
/// text, so a hit compares no text (matching a name cost about 45 instructions a field).
/// A miss, or two names sharing a slot, only costs the comparison. Two ways per slot
/// pair and a multiplying hash: with one way, two names of a program's hot event whose
/// addresses happened to share a slot evicted each other on every event (measured: 48
/// instructions an event in one build, none in the next, as the linker placed them).
#[derive(Debug)]
struct RoleCache {
    slots: [(usize, usize, Role); CACHED_NAMES],
}

impl Default for RoleCache {
    fn default() -> Self {
        // Address 0 is no name's: every slot starts empty.
        RoleCache {
            slots: [(0, 0, Role::Data); CACHED_NAMES],
        }
    }
}

impl RoleCache {
    /// The role of `name`: a hit is looked up inline, a miss matched out of line.
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn role(&mut self, name: &'static str) -> Role {
        let addr = name.as_ptr() as usize;
        // The top bits of a Fibonacci hash pick the pair; its two slots are the ways.
        let first = ((addr as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
            >> (64 - CACHED_NAMES.trailing_zeros())) as usize
            & !1;
        for way in [first, first + 1] {
            let slot = self.slots[way];
            if slot.0 == addr && slot.1 == name.len() {
                return slot.2;
            }
        }
        self.role_missed(name, first)
    }

    /// [`Self::role`] for a name in neither way of its pair: matched, and kept.
    #[inline(never)]
    fn role_missed(&mut self, name: &'static str, first: usize) -> Role {
        let addr = name.as_ptr() as usize;
        let role = Role::of(name);
        // The newest name takes the first way; the one it held moves to the second.
        self.slots[first + 1] = self.slots[first];
        self.slots[first] = (addr, name.len(), role);
        role
    }
}

/// The fields of one user event.
#[derive(Debug)]
pub(crate) struct EventFields {
    pub message: TextSlot,
    pub category: TextSlot,
    pub key: TextSlot,
    pub value: TextSlot,
    pub json: TextSlot,
    pub repo: Option<i64>,
    /// The JSON text was longer than the bound: what is kept is no JSON any more.
    pub json_cut: bool,
    /// The most bytes of each text value (the layer's message bound).
    pub limit: usize,
    data: Vec<(&'static str, String)>,
    data_len: usize,
    roles: RoleCache,
}

impl Default for EventFields {
    fn default() -> Self {
        EventFields {
            message: TextSlot::default(),
            category: TextSlot::default(),
            key: TextSlot::default(),
            value: TextSlot::default(),
            json: TextSlot::default(),
            repo: None,
            json_cut: false,
            limit: DEFAULT_MESSAGE_LIMIT,
            data: Vec::new(),
            data_len: 0,
            roles: RoleCache::default(),
        }
    }
}

impl EventFields {
    pub fn clear(&mut self) {
        self.message.forget();
        self.category.forget();
        self.key.forget();
        self.value.forget();
        self.json.forget();
        self.repo = None;
        self.json_cut = false;
        self.data_len = 0;
    }

    /// Data fields other than the reserved ones, in call-site order.
    pub fn data(&self) -> &[(&'static str, String)] {
        &self.data[..self.data_len]
    }

    /// The role of `field`, by its name.
    #[inline]
    fn role(&mut self, field: &Field) -> Role {
        self.roles.role(field.name())
    }

    /// The buffer a field of role `role` is written into (a `repo` that is no
    /// repository id becomes a datum, as any other name).
    fn slot(&mut self, role: Role, field: &Field) -> &mut String {
        match role {
            Role::Message => self.message.start(),
            Role::Category => self.category.start(),
            Role::Key => self.key.start(),
            Role::Value => self.value.start(),
            Role::Json => self.json.start(),
            Role::Repo | Role::Data => {
                let name = field_name(field);
                if self.data_len == self.data.len() {
                    self.data.push((name, String::new()));
                }
                let entry = &mut self.data[self.data_len];
                self.data_len += 1;
                entry.0 = name;
                entry.1.clear();
                &mut entry.1
            }
        }
    }

    /// [`EventFields::slot`] for a number (of any role but `repo`): the usual roles
    /// are matched here, inline, rather than in a call (a data event's value is often a
    /// count).
    #[inline(always)]
    fn number_slot(&mut self, role: Role, field: &Field) -> &mut String {
        match role {
            Role::Value => self.value.start(),
            Role::Key => self.key.start(),
            Role::Category => self.category.start(),
            role => self.slot(role, field),
        }
    }

    /// The buffer of a field whose value is text.
    fn text_slot(&mut self, field: &Field) -> &mut String {
        let role = self.role(field);
        self.slot(role, field)
    }
}

impl Visit for EventFields {
    fn record_str(&mut self, field: &Field, value: &str) {
        let role = self.role(field);
        let text = match role {
            Role::Message => &mut self.message,
            Role::Category => &mut self.category,
            Role::Key => &mut self.key,
            Role::Value => &mut self.value,
            Role::Json => &mut self.json,
            Role::Repo | Role::Data => {
                let limit = self.limit;
                push_bounded(self.slot(role, field), limit, value);
                return;
            }
        };
        if value.len() <= self.limit {
            text.set_str(value);
        } else {
            push_bounded(text.start(), self.limit, value);
            self.json_cut |= role == Role::Json;
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        match self.role(field) {
            Role::Repo => self.repo = Some(value),
            role => self
                .number_slot(role, field)
                .push_str(itoa::Buffer::new().format(value)),
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        match self.role(field) {
            Role::Repo => self.repo = Some(value.min(i64::MAX as u64) as i64),
            role => self
                .number_slot(role, field)
                .push_str(itoa::Buffer::new().format(value)),
        }
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.text_slot(field)
            .push_str(if value { "true" } else { "false" });
    }

    fn record_bytes(&mut self, field: &Field, value: &[u8]) {
        // No more bytes than the bound can hold are decoded: one character more, so
        // that a longer value is still cut (a decoded text is never shorter than its
        // bytes).
        let shown = &value[..value.len().min(self.limit.saturating_add(4))];
        let text = String::from_utf8_lossy(shown);
        let role = self.role(field);
        let limit = self.limit;
        let cut = push_bounded(self.slot(role, field), limit, &text);
        self.json_cut |= cut && role == Role::Json;
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.record_bounded(field, format_args!("{value}"));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let role = self.role(field);
        if role == Role::Repo
            && let Some(id) = repo_id(value)
        {
            self.repo = Some(id);
            return;
        }
        self.record_bounded_as(role, field, format_args!("{value:?}"));
    }
}

impl EventFields {
    /// Writes a formatted value into the field's buffer, no further than the bound.
    fn record_bounded(&mut self, field: &Field, value: fmt::Arguments<'_>) {
        let role = self.role(field);
        self.record_bounded_as(role, field, value);
    }

    fn record_bounded_as(&mut self, role: Role, field: &Field, value: fmt::Arguments<'_>) {
        let limit = self.limit;
        let cut = write_bounded(self.slot(role, field), limit, value);
        self.json_cut |= cut && role == Role::Json;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_come_from_the_name_alone() {
        let mut cache = RoleCache::default();
        for _ in 0..2 {
            assert_eq!(cache.role("message"), Role::Message);
            assert_eq!(cache.role("category"), Role::Category);
            assert_eq!(cache.role("trace2.category"), Role::Category);
            assert_eq!(cache.role("r#key"), Role::Key);
            assert_eq!(cache.role("value"), Role::Value);
            assert_eq!(cache.role("json"), Role::Json);
            assert_eq!(cache.role("trace2.repo"), Role::Repo);
            assert_eq!(cache.role("count"), Role::Data);
        }
    }

    /// A literal value is kept by reference (its address is the literal's), any other
    /// text is copied, and clearing forgets both.
    #[test]
    fn literal_values_are_kept_by_reference() {
        let mut fields = EventFields::default();
        let literal = "index";
        fields.category.set_str(literal);
        #[cfg(target_os = "linux")]
        assert_eq!(
            fields.category.get().map(str::as_ptr),
            Some(literal.as_ptr())
        );
        assert_eq!(fields.category.get(), Some("index"));
        let owned = String::from("lookup");
        fields.category.set_str(&owned);
        assert_ne!(fields.category.get().map(str::as_ptr), Some(owned.as_ptr()));
        assert_eq!(fields.category.get(), Some("lookup"));
        fields.category.set_str(literal);
        fields.key.set_str(&owned);
        fields.clear();
        assert_eq!(fields.category.get(), None);
        assert_eq!(fields.key.get(), None);
        // Written after a literal, a value built in place is the value.
        fields.key.set_str(literal);
        fields.key.start().push_str("built");
        assert_eq!(fields.key.get(), Some("built"));
    }

    #[test]
    fn names_sharing_a_slot_keep_their_roles() {
        // More names than slots, half of them reserved: some share a slot, and a name
        // found in a slot another name took must be matched again, not given its role.
        // Names made at run time (each its own address), kept in a static so that they
        // stay reachable (LeakSanitizer runs these tests).
        static NAMES: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
        let names = NAMES.get_or_init(|| {
            (0..4 * CACHED_NAMES)
                .map(|i| {
                    let text = if i % 2 == 0 {
                        "value".to_owned()
                    } else {
                        format!("d{i}")
                    };
                    &*Box::leak(text.into_boxed_str())
                })
                .collect()
        });
        let mut cache = RoleCache::default();
        for _ in 0..3 {
            for (i, name) in names.iter().enumerate() {
                let want = if i % 2 == 0 { Role::Value } else { Role::Data };
                assert_eq!(cache.role(name), want, "{name}");
            }
        }
        // The prefix of a cached name at the same address is another name.
        let long: &'static str = "valueX";
        assert_eq!(cache.role(long), Role::Data);
        assert_eq!(cache.role(&long[..5]), Role::Value);
    }
}
