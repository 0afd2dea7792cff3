//! The layer's own home for per-span state: a table from span id to [`SpanEntry`] (the
//! span's [`SpanRegion`] and its metadata), beside the Registry rather than in its
//! extensions.
//!
//! The Registry keeps a layer's values in a type map per span, each value boxed: a
//! `malloc` and `free` per span, and a lookup, a lock and a type-map probe per access.
//! Here the entry is kept by value in one of [`SHARDS`] shards, each a `Mutex` over a
//! small hash map; the shard is chosen by a multiplicative hash of the id (the
//! Registry's ids are dense in their low bits and differ per thread in middle bits).
//! The span's metadata is kept too, so that a first entry and a close need no Registry
//! lookup at all.
//!
//! Locking rules: a shard is held for one operation; the layer never holds two shards
//! at once and never takes a shard while it holds a lane (order: shard, then lane, then
//! the lane book). Nothing of the program runs under a shard lock but a sink's write of
//! the very first line (`version`, written once when the first line is formatted); if
//! that (or anything else) closes a span while this thread holds the span's shard, the
//! removal is deferred and done just before the shard is released, instead of locking
//! it again (which would deadlock).
//!
//! An entry goes when its span closes ([`SpanStore::remove`], from `on_close` whether or
//! not the layer writes then), so a reused id never finds a stale one; spans leaked with
//! `mem::forget` keep theirs, as they keep their Registry slot.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Mutex, MutexGuard, PoisonError};

use tracing_core::Metadata;

use crate::region::SpanRegion;

/// The bit of [`HELD`] that says removals wait for the held shard's release (a shard's
/// address, aligned on 64 bytes, never has it).
const PENDING: usize = 1;
/// The number of shards (a power of two).
const SHARDS: usize = 64;
/// Spans each shard has room for before it first grows (a few spans open at once per
/// shard is the usual case).
const SHARD_ROOM: usize = 8;
/// Multiplier of the shard hash (2^64 / golden ratio): spreads the id's low and middle
/// bits into the top bits, which pick the shard.
const SHARD_MIX: u64 = 0x9E37_79B9_7F4A_7C15;
/// Multiplier of the hash inside a shard, different from [`SHARD_MIX`], so that the map's
/// own tag bits (the top ones) still differ between the ids of one shard.
const MAP_MIX: u64 = 0xD6E8_FEB8_6659_FD93;

/// What the layer keeps for a span it records.
pub(crate) struct SpanEntry {
    /// The region's state, lane and ancestry.
    pub region: SpanRegion,
    /// The span's metadata (its call site, for the region lines).
    pub meta: &'static Metadata<'static>,
}

/// Hashes a span id (one `u64` written once) by one multiplication.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Never used for `u64` keys; kept correct for any other.
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(MAP_MIX);
        }
    }

    fn write_u64(&mut self, id: u64) {
        self.0 = id.wrapping_mul(MAP_MIX);
    }
}

type Map = HashMap<u64, SpanEntry, BuildHasherDefault<IdHasher>>;

/// One shard, on a cache line of its own so that threads working on different shards
/// do not share one.
#[repr(align(64))]
struct Shard(Mutex<Map>);

impl Shard {
    /// What identifies this shard in [`HELD`].
    #[inline]
    fn address(&self) -> usize {
        std::ptr::from_ref(self) as usize
    }
}

/// The table of span entries.
pub(crate) struct SpanStore {
    shards: Box<[Shard]>,
}

impl Default for SpanStore {
    fn default() -> Self {
        SpanStore::new()
    }
}

impl std::fmt::Debug for SpanStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpanStore").finish_non_exhaustive()
    }
}

thread_local! {
    /// The address of the shard this thread holds (0: none), with [`PENDING`] set when
    /// removals wait for its release: the address is unique across stores, so that a
    /// removal from another layer's store is never taken for one of this shard. (One
    /// cell, read and written once per lock and release.)
    static HELD: Cell<usize> = const { Cell::new(0) };
    /// Removals asked for while this thread held the shard they belong to: the shard's
    /// address and the span id.
    static DEFERRED: RefCell<Vec<(usize, u64)>> = const { RefCell::new(Vec::new()) };
}

/// The shard of span `id`.
#[inline]
pub(crate) fn shard_of(id: u64) -> usize {
    (id.wrapping_mul(SHARD_MIX) >> (64 - SHARDS.trailing_zeros())) as usize
}

impl SpanStore {
    /// An empty store.
    pub(crate) fn new() -> SpanStore {
        SpanStore {
            // Each shard has room from the start, so that the first span to land on it
            // allocates nothing (ids move over all shards as the Registry reuses slots).
            shards: (0..SHARDS)
                .map(|_| {
                    Shard(Mutex::new(Map::with_capacity_and_hasher(
                        SHARD_ROOM,
                        Default::default(),
                    )))
                })
                .collect(),
        }
    }

    /// Locks the shard of span `id` for one operation (see the module documentation).
    #[inline]
    pub(crate) fn lock(&self, id: u64) -> ShardGuard<'_> {
        let index = shard_of(id);
        let shard = &self.shards[index];
        let map = shard.0.lock().unwrap_or_else(PoisonError::into_inner);
        let address = shard.address();
        let outer = HELD.try_with(|held| held.replace(address)).unwrap_or(0);
        ShardGuard {
            map,
            index,
            address,
            outer,
        }
    }

    /// Keeps `entry` for span `id`, and hands back an entry the id had (a span closed
    /// while the layer did not see it close, never in practice), to be dropped by the
    /// caller after the shard is released.
    #[inline]
    pub(crate) fn insert(&self, id: u64, entry: SpanEntry) -> Option<SpanEntry> {
        self.lock(id).map.insert(id, entry)
    }

    /// Takes span `id`'s entry out (its span closed). `None` when it has none, or when
    /// this thread holds that shard already (a span closed from inside the layer's own
    /// work): the removal is then done before that shard is released.
    #[inline]
    pub(crate) fn remove(&self, id: u64) -> Option<SpanEntry> {
        let held = HELD.try_with(Cell::get).unwrap_or(0);
        let address = self.shards[shard_of(id)].address();
        if held & !PENDING == address {
            let _ = DEFERRED.try_with(|deferred| deferred.borrow_mut().push((address, id)));
            let _ = HELD.try_with(|held| held.set(address | PENDING));
            return None;
        }
        self.lock(id).map.remove(&id)
    }

    /// Runs `f` on span `id`'s entry, if it has one, with its shard held.
    #[inline]
    pub(crate) fn with<R>(&self, id: u64, f: impl FnOnce(&mut SpanEntry) -> R) -> Option<R> {
        self.lock(id).get_mut(id).map(f)
    }

    /// How many entries the store holds.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| shard.0.lock().unwrap_or_else(PoisonError::into_inner).len())
            .sum()
    }
}

/// A shard locked by this thread; released (after the removals deferred on it) when
/// dropped.
pub(crate) struct ShardGuard<'a> {
    map: MutexGuard<'a, Map>,
    index: usize,
    /// The shard's address (see [`HELD`]).
    address: usize,
    /// What [`HELD`] said before this guard: the shard this thread held around it (only
    /// when a span closed while it held one), 0 otherwise.
    outer: usize,
}

impl ShardGuard<'_> {
    /// The entry of span `id` (which must belong to this shard).
    #[inline]
    pub(crate) fn get_mut(&mut self, id: u64) -> Option<&mut SpanEntry> {
        debug_assert_eq!(shard_of(id), self.index);
        self.map.get_mut(&id)
    }
}

impl Drop for ShardGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        let held = HELD.try_with(|held| held.replace(self.outer)).unwrap_or(0);
        if held & PENDING != 0 {
            self.remove_deferred();
        }
    }
}

impl ShardGuard<'_> {
    /// The removals deferred while this shard was held, done before it is released (so
    /// that no other thread can insert a reused id in between).
    #[cold]
    #[inline(never)]
    fn remove_deferred(&mut self) {
        let mine = DEFERRED
            .try_with(|deferred| {
                let mut deferred = deferred.borrow_mut();
                let mine: Vec<u64> = deferred
                    .iter()
                    .filter(|&&(address, _)| address == self.address)
                    .map(|&(_, id)| id)
                    .collect();
                deferred.retain(|&(address, _)| address != self.address);
                mine
            })
            .unwrap_or_default();
        for id in mine {
            // Dropping an entry runs only the layer's own code (its state goes back to
            // this thread's pool, its lane's count down).
            drop(self.map.remove(&id));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::region::RegionState;
    use tracing_core::{Level, Metadata, callsite::Identifier, field::FieldSet, metadata::Kind};

    struct Site;
    impl tracing_core::Callsite for Site {
        fn set_interest(&self, _: tracing_core::Interest) {}
        fn metadata(&self) -> &Metadata<'_> {
            &META
        }
    }
    static SITE: Site = Site;
    static META: Metadata<'static> = Metadata::new(
        "span",
        "store",
        Level::INFO,
        None,
        None,
        None,
        FieldSet::new(&[], Identifier(&SITE)),
        Kind::SPAN,
    );

    fn entry() -> SpanEntry {
        SpanEntry {
            region: SpanRegion::new(RegionState::pooled("span", "store"), None),
            meta: &META,
        }
    }

    /// Two ids of the same shard, and one of another.
    fn ids() -> (u64, u64, u64) {
        let first = 1;
        let same = (2..).find(|&id| shard_of(id) == shard_of(first)).unwrap();
        let other = (2..).find(|&id| shard_of(id) != shard_of(first)).unwrap();
        (first, same, other)
    }

    #[test]
    fn an_entry_is_found_until_removed() {
        let store = SpanStore::new();
        assert!(store.insert(7, entry()).is_none());
        assert_eq!(store.with(7, |e| e.meta.name()), Some("span"));
        assert!(store.with(8, |_| ()).is_none());
        assert!(store.remove(7).is_some());
        assert!(store.with(7, |_| ()).is_none());
        assert_eq!(store.len(), 0);
    }

    #[test]
    fn an_insert_replaces_a_stale_entry() {
        let store = SpanStore::new();
        store.insert(3, entry());
        assert!(store.insert(3, entry()).is_some());
        assert_eq!(store.len(), 1);
    }

    #[test]
    fn ids_spread_over_the_shards() {
        // Registry-like ids: dense low bits, a thread's bits in the middle.
        let mut used = [0usize; SHARDS];
        for thread in 0..4u64 {
            for slot in 1..=256u64 {
                used[shard_of((thread << 22) | slot)] += 1;
            }
        }
        assert!(used.iter().all(|&n| n > 0), "{used:?}");
        assert!(used.iter().all(|&n| n < 4 * 256 / SHARDS * 3), "{used:?}");
    }

    /// A span closed while this thread holds its shard (a sink that closes a span while
    /// the first line is written) is removed when the shard is released, without
    /// locking it twice (which would deadlock or panic).
    #[test]
    fn a_removal_under_the_held_shard_is_deferred_not_deadlocked() {
        let store = SpanStore::new();
        let (first, same, other) = ids();
        store.insert(first, entry());
        store.insert(same, entry());
        store.insert(other, entry());
        {
            let mut guard = store.lock(first);
            assert!(guard.get_mut(first).is_some());
            // Same shard: deferred.
            assert!(store.remove(same).is_none());
            // Another shard: removed at once.
            assert!(store.remove(other).is_some());
            assert!(guard.get_mut(same).is_some(), "not removed while held");
        }
        assert!(store.with(same, |_| ()).is_none(), "removed on release");
        assert!(store.with(first, |_| ()).is_some());
        assert_eq!(store.len(), 1);
        // The mark is gone: a removal now is direct.
        assert!(store.remove(first).is_some());
        assert_eq!(store.len(), 0);
    }
}
