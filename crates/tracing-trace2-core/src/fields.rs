//! The field visitor of user `tracing` events (data, printf, error).
//!
//! An event's fields are the program's own words (no function argument becomes an event
//! field), so the short role names stay: `message`, `category`, `key`, `value`, `json`,
//! `repo`; the span names `trace2.category` and `trace2.repo` are taken too.
//!
//! User event fields are written into buffers that live for the whole thread and are
//! cleared, not freed, between events, so a steady stream of events allocates nothing.

use std::fmt::{self, Write};

use tracing_core::field::{Field, Visit};

use crate::region::{
    CATEGORY_FIELD, REPO_FIELD, SPAN_CATEGORY_FIELD, SPAN_REPO_FIELD, field_name, repo_id,
};

/// Field naming a datum's key.
pub const KEY_FIELD: &str = "key";
/// Field holding a datum's value.
pub const VALUE_FIELD: &str = "value";
/// Field holding a datum's JSON value (with `key`: a `data_json` event).
pub const JSON_FIELD: &str = "json";
/// The field `tracing` uses for an event's message.
pub const MESSAGE_FIELD: &str = "message";

/// A text slot that remembers whether it was set.
#[derive(Debug, Default)]
pub(crate) struct Slot {
    pub text: String,
    pub set: bool,
}

impl Slot {
    fn start(&mut self) -> &mut String {
        self.set = true;
        self.text.clear();
        &mut self.text
    }

    pub fn get(&self) -> Option<&str> {
        self.set.then_some(self.text.as_str())
    }
}

/// The fields of one user event.
#[derive(Debug, Default)]
pub(crate) struct EventFields {
    pub message: Slot,
    pub category: Slot,
    pub key: Slot,
    pub value: Slot,
    pub json: Slot,
    pub repo: Option<i64>,
    data: Vec<(&'static str, String)>,
    data_len: usize,
}

impl EventFields {
    pub fn clear(&mut self) {
        self.message.set = false;
        self.category.set = false;
        self.key.set = false;
        self.value.set = false;
        self.json.set = false;
        self.repo = None;
        self.data_len = 0;
    }

    /// Data fields other than the reserved ones, in call-site order.
    pub fn data(&self) -> &[(&'static str, String)] {
        &self.data[..self.data_len]
    }

    fn slot(&mut self, field: &Field) -> &mut String {
        match field_name(field) {
            MESSAGE_FIELD => self.message.start(),
            CATEGORY_FIELD | SPAN_CATEGORY_FIELD => self.category.start(),
            KEY_FIELD => self.key.start(),
            VALUE_FIELD => self.value.start(),
            JSON_FIELD => self.json.start(),
            name => {
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
}

/// Whether `field` gives an event's repository column (`repo`, or `trace2.repo` as
/// spans name it).
fn is_repo(field: &Field) -> bool {
    matches!(field_name(field), REPO_FIELD | SPAN_REPO_FIELD)
}

impl Visit for EventFields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.slot(field).push_str(value);
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        if is_repo(field) {
            self.repo = Some(value);
        } else {
            self.slot(field).push_str(itoa::Buffer::new().format(value));
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        if is_repo(field) {
            self.repo = Some(value.min(i64::MAX as u64) as i64);
        } else {
            self.slot(field).push_str(itoa::Buffer::new().format(value));
        }
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.slot(field)
            .push_str(if value { "true" } else { "false" });
    }

    fn record_bytes(&mut self, field: &Field, value: &[u8]) {
        self.slot(field).push_str(&String::from_utf8_lossy(value));
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        let _ = write!(self.slot(field), "{value}");
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if is_repo(field)
            && let Some(id) = repo_id(value)
        {
            self.repo = Some(id);
            return;
        }
        let _ = write!(self.slot(field), "{value:?}");
    }
}
