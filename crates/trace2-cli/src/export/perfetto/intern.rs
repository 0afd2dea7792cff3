//! Interned strings of a Perfetto sequence: event names, categories and debug annotation names
//! are sent once, in the `interned_data` of the packet that first uses them, and then referred
//! to by `iid`. The tables are bounded: when they are nearly full the sink clears them together
//! with the sequence's incremental state, and names are sent again as they come.

use std::collections::HashMap;

use super::proto;

/// Entries kept over all tables before they are cleared.
const MAX_ENTRIES: usize = 10_000;
/// Room left for the strings one packet may intern (a name, a category, its annotations).
const ROOM_PER_PACKET: usize = 256;

/// Which table of `InternedData`.
#[derive(Clone, Copy)]
pub enum Table {
    /// `event_categories`.
    Category = 0,
    /// `event_names`.
    EventName = 1,
    /// `debug_annotation_names`.
    AnnotationName = 2,
}

impl Table {
    /// Field number of the table in `InternedData`.
    fn field(self) -> u32 {
        match self {
            Table::Category => 1,
            Table::EventName => 2,
            Table::AnnotationName => 3,
        }
    }
}

/// The strings interned since the sequence's incremental state was last cleared.
#[derive(Default)]
pub struct Interner {
    tables: [HashMap<String, u64>; 3],
    entries: usize,
}

impl Interner {
    /// The `iid` of `text` in `table`; a string not sent yet gets the next one, and its entry is
    /// appended to `interned` (the packet's `InternedData`).
    pub fn iid(&mut self, table: Table, text: &str, interned: &mut Vec<u8>) -> u64 {
        let map = &mut self.tables[table as usize];
        if let Some(&iid) = map.get(text) {
            return iid;
        }
        // iids start at 1 in every table: 0 means "none" to readers.
        let iid = map.len() as u64 + 1;
        map.insert(text.to_owned(), iid);
        self.entries += 1;
        proto::message(interned, table.field(), |entry| {
            proto::uint(entry, 1, iid);
            proto::string(entry, 2, text);
        });
        iid
    }

    /// True when the next packet should clear the tables first.
    pub fn nearly_full(&self) -> bool {
        self.entries + ROOM_PER_PACKET > MAX_ENTRIES
    }

    /// Forgets every string (the sequence's incremental state is cleared with the next packet).
    pub fn clear(&mut self) {
        for table in &mut self.tables {
            *table = HashMap::new();
        }
        self.entries = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_sent_once_and_tables_are_bounded() {
        let mut interner = Interner::default();
        let mut interned = Vec::new();
        assert_eq!(interner.iid(Table::EventName, "a", &mut interned), 1);
        assert_eq!(interner.iid(Table::Category, "a", &mut interned), 1);
        assert_eq!(interner.iid(Table::EventName, "b", &mut interned), 2);
        let sent = interned.len();
        assert_eq!(interner.iid(Table::EventName, "a", &mut interned), 1);
        assert_eq!(
            interned.len(),
            sent,
            "a string already sent is not sent again"
        );
        // event_names entry {iid 1, name "a"}: field 2, length 5.
        assert_eq!(interned[..7], [0x12, 0x05, 0x08, 0x01, 0x12, 0x01, b'a']);
        for n in 0..MAX_ENTRIES {
            interner.iid(Table::AnnotationName, &n.to_string(), &mut Vec::new());
        }
        assert!(interner.nearly_full());
        interner.clear();
        assert!(!interner.nearly_full());
        assert_eq!(interner.iid(Table::EventName, "b", &mut interned), 1);
    }
}
