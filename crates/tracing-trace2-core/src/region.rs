//! Per-span region state, kept in the span's extensions.
//!
//! When a span is created the core layer records its fields into a [`RegionState`]:
//! the category (`category` field, else the span's target), the label (`label` field,
//! else the span's name),
//! the message (`msg` field, followed by the other fields as `name=value`) and the
//! repository id (`repo` field). Entering the span then opens a Trace2 region with these
//! inputs on the current thread, and leaving it closes the region.

use std::fmt::{self, Write};

use tracing_core::field::{Field, Visit};

use crate::record::RegionInfo;

/// Field that names a region's or a datum's category.
pub const CATEGORY_FIELD: &str = "category";
/// Field that carries a region's message.
pub const MSG_FIELD: &str = "msg";
/// Field that carries a repository id.
pub const REPO_FIELD: &str = "repo";
/// Field that overrides the region's label (by default the span's name, which must be
/// a constant in `tracing`).
pub const LABEL_FIELD: &str = "label";

/// What a span contributes to its Trace2 region.
#[derive(Clone, Debug, Default)]
pub struct RegionState {
    category: Option<String>,
    label: &'static str,
    label_field: Option<String>,
    msg_field: Option<String>,
    other_fields: String,
    msg: Option<String>,
    repo: Option<i64>,
}

impl RegionState {
    /// A region labelled `label` whose category defaults to `target`.
    pub fn new(label: &'static str, target: &str) -> RegionState {
        RegionState {
            category: Some(target.to_owned()),
            label,
            ..RegionState::default()
        }
    }

    /// The inputs of this region's `region_enter`/`region_leave` lines. An empty
    /// category or label is left out of the lines, as git leaves out a null one.
    pub fn info(&self) -> RegionInfo<'_> {
        let present = |s: &str| !s.is_empty();
        RegionInfo {
            repo: self.repo,
            category: self.category.as_deref().filter(|s| present(s)),
            label: Some(self.label_field.as_deref().unwrap_or(self.label)).filter(|s| present(s)),
            msg: self.msg.as_deref(),
        }
    }

    /// Records span fields (at creation or through `Span::record`).
    pub fn record(&mut self, values: &RegionFields) {
        if let Some(category) = &values.category {
            self.category = Some(category.clone());
        }
        if let Some(msg) = &values.msg {
            self.msg_field = Some(msg.clone());
        }
        if let Some(label) = &values.label {
            self.label_field = Some(label.clone());
        }
        if values.repo.is_some() {
            self.repo = values.repo;
        }
        if !values.others.is_empty() {
            if !self.other_fields.is_empty() {
                self.other_fields.push(' ');
            }
            self.other_fields.push_str(&values.others);
        }
        self.msg = match (&self.msg_field, self.other_fields.is_empty()) {
            (Some(msg), true) => Some(msg.clone()),
            (Some(msg), false) => Some(format!("{msg} {}", self.other_fields)),
            (None, false) => Some(self.other_fields.clone()),
            (None, true) => None,
        };
    }
}

/// Span field values gathered before the span's extensions are locked (a field's
/// `Debug` impl may itself use `tracing`, so no lock may be held while it runs).
#[derive(Debug, Default)]
pub struct RegionFields {
    category: Option<String>,
    label: Option<String>,
    msg: Option<String>,
    repo: Option<i64>,
    others: String,
}

impl RegionFields {
    fn other(&mut self, field: &Field) -> &mut String {
        if !self.others.is_empty() {
            self.others.push(' ');
        }
        self.others.push_str(field_name(field));
        self.others.push('=');
        &mut self.others
    }
}

/// A field's name without a raw-identifier prefix.
pub(crate) fn field_name(field: &Field) -> &'static str {
    let name = field.name();
    name.strip_prefix("r#").unwrap_or(name)
}

impl Visit for RegionFields {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field_name(field) {
            CATEGORY_FIELD => self.category = Some(value.to_owned()),
            LABEL_FIELD => self.label = Some(value.to_owned()),
            MSG_FIELD => self.msg = Some(value.to_owned()),
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
            CATEGORY_FIELD => self.category = Some(format!("{value:?}")),
            LABEL_FIELD => self.label = Some(format!("{value:?}")),
            MSG_FIELD | "message" => self.msg = Some(format!("{value:?}")),
            REPO_FIELD => {
                let text = format!("{value:?}");
                match text.parse() {
                    Ok(id) => self.repo = Some(id),
                    Err(_) => {
                        let _ = write!(self.other(field), "{text}");
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

    #[test]
    fn message_is_msg_then_other_fields() {
        let mut state = RegionState::new("read_index", "my_crate::index");
        assert_eq!(state.info().category, Some("my_crate::index"));
        assert_eq!(state.info().msg, None);
        let fields = RegionFields {
            msg: Some(".git/index".into()),
            others: "entries=3".into(),
            ..RegionFields::default()
        };
        state.record(&fields);
        assert_eq!(state.info().msg, Some(".git/index entries=3"));
        let later = RegionFields {
            others: "bytes=10".into(),
            category: Some("index".into()),
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
}
