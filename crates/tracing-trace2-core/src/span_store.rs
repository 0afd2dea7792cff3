//! The layer's own home for per-span state: a table from span id to [`SpanEntry`] (the
//! span's [`SpanRegion`] and its metadata), beside the Registry rather than in its
//! extensions.
//!
//! The Registry keeps a layer's values in a type map per span, each value boxed: a
//! `malloc` and `free` per span, and a lookup, a lock and a type-map probe per access.
//! Here the entry is kept by value in one of [`SHARDS`] shards, each a `Mutex` over a
//! small hash map. The shard is chosen by the thread that made the span and a
//! multiplicative hash of the id: the Registry's ids carry the number of the slab shard
//! of the thread that made the span, so a thread working on its own spans keeps to its
//! own few shards and their cache lines stay with it.
//! The span's metadata is kept too, so that a first entry and a close need no Registry
//! lookup at all.
//!
//! Locking rules: a shard is held for one operation; the layer never holds two shards
//! at once and never takes a shard while it holds a lane (order: shard, then lane, then
//! the lane book). Every callback that takes a shard runs with the layer's re-entrancy
//! flag set, so a span closed from inside the layer's own work (a sink that drops a
//! span while it writes a line, with a lane or even a shard held) is known to be
//! re-entrant: its removal never waits for a shard ([`SpanStore::remove_reentrant`]).
//! If the shard is taken (by this thread, or by another that may be waiting for the lane
//! this one holds), the id is left on the shard's list of closed ids, and whoever locks
//! that shard next removes it first, before any lookup or insertion: a reused id never
//! finds the old entry.
//!
//! An entry goes when its span closes (from `on_close` whether or not the layer writes
//! then), so a reused id never finds a stale one; spans leaked with `mem::forget` keep
//! theirs, as they keep their Registry slot.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError, TryLockError};

use tracing_core::Metadata;

use crate::region::SpanRegion;

/// The number of shards (a power of two).
const SHARDS: usize = 64;
/// Spans each shard has room for from its first span on (a few spans open at once per
/// shard is the usual case).
const SHARD_ROOM: usize = 8;
/// Shards per thread: the id's hash picks one of them.
const THREAD_SHARDS: usize = 8;
/// Where the number of the thread that made a span starts in `id - 1` (the slab key of
/// tracing-subscriber's Registry: sharded-slab's default layout, 38 bits of page
/// address and then the thread's shard). Were the layout to change, these bits would
/// be other bits of the id: the shards would be spread differently, never wrongly.
const SLAB_TID_SHIFT: u32 = 38;
/// Multiplier of the shard hash (2^64 / golden ratio): spreads the id's low and middle
/// bits into the top bits, which pick the shard among the thread's.
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

/// One shard, on cache lines of its own so that threads working on different shards
/// do not share one.
#[repr(align(64))]
struct Shard {
    map: Mutex<Map>,
    /// Whether `closed` holds ids (read after every lock of `map`).
    has_closed: AtomicBool,
    /// Ids of spans closed while `map` could not be taken without waiting: removed by
    /// the next thread that locks `map`. A leaf lock, held only to push or take.
    closed: Mutex<Vec<u64>>,
}

/// The table of span entries.
pub(crate) struct SpanStore {
    /// A fixed array: the shard's index needs no bounds check. Made by the store's first
    /// use: a process that never opens a span does not pay for its 8 KiB (built, and
    /// first touched, when the layer was made: four page faults of a short process).
    shards: OnceLock<Box<[Shard; SHARDS]>>,
    /// Which groups of a thread's shards have their room, one bit per group (set by the
    /// group's first insertion).
    roomy: AtomicU8,
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

/// The shard of span `id`.
#[inline]
pub(crate) fn shard_of(id: u64) -> usize {
    // The thread's number read from `id` itself, not `id - 1`: the two differ there
    // only for a page address of 2^38 - 1, which no slab reaches. Shifted straight to
    // its place, the first shard of the thread's.
    let first = (id >> (SLAB_TID_SHIFT - THREAD_SHARDS.trailing_zeros())) as usize
        & (SHARDS - THREAD_SHARDS);
    let within = (id.wrapping_mul(SHARD_MIX) >> (64 - THREAD_SHARDS.trailing_zeros())) as usize;
    first | within
}

impl SpanStore {
    /// An empty store.
    pub(crate) fn new() -> SpanStore {
        SpanStore {
            shards: OnceLock::new(),
            roomy: AtomicU8::new(0),
        }
    }

    /// The shards, made with the first call.
    #[inline]
    fn shards(&self) -> &[Shard; SHARDS] {
        self.shards.get_or_init(Self::make_shards)
    }

    /// The shards, empty: a thread's group of shards takes its room with the first span
    /// that lands there (`make_room`), so that a process whose spans all stay below the
    /// layer's levels does not pay for 64 tables (16 page faults of a short process),
    /// nor a single-threaded one for the 56 its thread never uses (about 17). A whole
    /// group at once rather than each shard with its own first span: the Registry's ids
    /// carry a generation that changes each time a slot is reused, so a span created
    /// over and over lands on each of its thread's shards in turn, and each would
    /// allocate then; the thread's bits of the id never change.
    #[cold]
    #[inline(never)]
    fn make_shards() -> Box<[Shard; SHARDS]> {
        Box::new(std::array::from_fn(|_| Shard {
            map: Mutex::new(Map::default()),
            has_closed: AtomicBool::new(false),
            closed: Mutex::new(Vec::new()),
        }))
    }

    /// Locks the shard of span `id` for one operation (see the module documentation).
    #[inline]
    pub(crate) fn lock(&self, id: u64) -> ShardGuard<'_> {
        let index = shard_of(id);
        let shard = &self.shards()[index];
        let map = shard.map.lock().unwrap_or_else(PoisonError::into_inner);
        Self::guard(shard, map, index)
    }

    /// The guard of a shard just locked, after the removals left for it.
    #[inline]
    #[cfg_attr(not(debug_assertions), allow(unused_variables))]
    fn guard<'a>(shard: &'a Shard, map: MutexGuard<'a, Map>, index: usize) -> ShardGuard<'a> {
        let mut guard = ShardGuard {
            map,
            #[cfg(debug_assertions)]
            index,
        };
        // Relaxed is enough: a span's close happens before its id is reused (the
        // Registry's slot is released after `on_close` and taken again with acquiring
        // atomics), so whoever may look up a reused id sees the flag set.
        if shard.has_closed.load(Ordering::Relaxed) {
            guard.remove_closed(shard);
        }
        guard
    }

    /// Keeps `entry` for span `id`, and hands back an entry the id had (a span closed
    /// while the layer did not see it close, never in practice), to be dropped by the
    /// caller after the shard is released.
    #[inline]
    pub(crate) fn insert(&self, id: u64, entry: SpanEntry) -> Option<SpanEntry> {
        // Relaxed is enough: a thread that sees it unset takes each shard's lock to
        // check that shard's room.
        let group = shard_of(id) / THREAD_SHARDS;
        if self.roomy.load(Ordering::Relaxed) & (1 << group) == 0 {
            self.make_room(group);
        }
        self.lock(id).map_mut().insert(id, entry)
    }

    /// Gives every shard of `group` its room, one shard locked at a time (the locking
    /// rules hold: no other shard is held). Once per group; the room is never given
    /// back, as removals keep a map's capacity.
    #[cold]
    #[inline(never)]
    fn make_room(&self, group: usize) {
        let shards = &self.shards()[group * THREAD_SHARDS..][..THREAD_SHARDS];
        for shard in shards {
            let mut map = shard.map.lock().unwrap_or_else(PoisonError::into_inner);
            if map.capacity() < SHARD_ROOM {
                let more = SHARD_ROOM - map.len();
                map.reserve(more);
            }
        }
        self.roomy.fetch_or(1 << group, Ordering::Relaxed);
    }

    /// Takes span `id`'s entry out (its span closed), to be dropped by the caller after
    /// the shard is released.
    #[inline]
    pub(crate) fn remove(&self, id: u64) -> Option<SpanEntry> {
        self.lock(id).map_mut().remove(&id)
    }

    /// Removes span `id`'s entry, its span closed from inside the layer's own work: at
    /// once if its shard is free, else (the shard is taken, perhaps by this thread, or by
    /// one waiting for a lane this thread holds) by the next thread to lock the shard.
    /// Never waits for the shard.
    #[cold]
    #[inline(never)]
    pub(crate) fn remove_reentrant(&self, id: u64) {
        let index = shard_of(id);
        let shard = &self.shards()[index];
        let map = match shard.map.try_lock() {
            Ok(map) => map,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => {
                let mut closed = shard.closed.lock().unwrap_or_else(PoisonError::into_inner);
                closed.push(id);
                shard.has_closed.store(true, Ordering::Relaxed);
                return;
            }
        };
        let removed = Self::guard(shard, map, index).map_mut().remove(&id);
        // Dropped with the shard released.
        drop(removed);
    }

    /// Runs `f` on span `id`'s entry, if it has one, with its shard held.
    #[inline]
    pub(crate) fn with<R>(&self, id: u64, f: impl FnOnce(&mut SpanEntry) -> R) -> Option<R> {
        self.lock(id).get_mut(id).map(f)
    }

    /// How many entries the store holds (after the removals left for later).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        (0..SHARDS)
            .map(|index| {
                let shard = &self.shards()[index];
                let map = shard.map.lock().unwrap_or_else(PoisonError::into_inner);
                Self::guard(shard, map, index).map.len()
            })
            .sum()
    }
}

/// A shard locked by this thread; released when dropped.
pub(crate) struct ShardGuard<'a> {
    map: MutexGuard<'a, Map>,
    /// The shard's index, for the check that an id looked up belongs to it.
    #[cfg(debug_assertions)]
    index: usize,
}

impl ShardGuard<'_> {
    /// The entry of span `id` (which must belong to this shard).
    #[inline]
    pub(crate) fn get_mut(&mut self, id: u64) -> Option<&mut SpanEntry> {
        #[cfg(debug_assertions)]
        assert_eq!(shard_of(id), self.index);
        self.map.get_mut(&id)
    }

    /// The map, to change it.
    #[inline]
    fn map_mut(&mut self) -> &mut Map {
        &mut self.map
    }

    /// The removals left for this shard by re-entrant closes.
    #[cold]
    #[inline(never)]
    fn remove_closed(&mut self, shard: &Shard) {
        let ids = {
            let mut closed = shard.closed.lock().unwrap_or_else(PoisonError::into_inner);
            shard.has_closed.store(false, Ordering::Relaxed);
            std::mem::take(&mut *closed)
        };
        for id in ids {
            // Dropping an entry runs only the layer's own code (its state goes back to
            // this thread's pool, its lane's count down).
            drop(self.map_mut().remove(&id));
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
    fn a_guard_finds_each_entry_of_its_shard_until_removed() {
        let store = SpanStore::new();
        let (first, same, _) = ids();
        store.insert(first, entry());
        store.insert(same, entry());
        let mut guard = store.lock(first);
        let found = guard.get_mut(first).map(|e| e as *mut SpanEntry);
        assert!(found.is_some());
        assert_eq!(guard.get_mut(first).map(|e| e as *mut SpanEntry), found);
        assert!(guard.get_mut(same).is_some(), "another id of the shard");
        assert_eq!(guard.get_mut(first).map(|e| e as *mut SpanEntry), found);
        // Written through what it handed out, then found again: the same entry.
        if let Some(entry) = guard.get_mut(first) {
            entry.region.leave_out();
        }
        assert!(guard.get_mut(first).is_some_and(|e| e.region.is_left_out()));
        // Removed through the guard: found no more.
        assert!(guard.map_mut().remove(&first).is_some());
        assert!(guard.get_mut(first).is_none());
        assert!(guard.get_mut(same).is_some());
        assert!(guard.map_mut().remove(&same).is_some());
        assert!(guard.get_mut(same).is_none());
    }

    /// The shards are not made until the store is first used, take no room until the
    /// first span of their thread's group, then the whole group's at once, and keep it
    /// when their spans go.
    #[test]
    fn a_threads_shards_take_their_room_with_its_first_span() {
        let store = SpanStore::new();
        assert!(store.shards.get().is_none(), "made with the layer");
        let rooms = |store: &SpanStore| -> Vec<usize> {
            (0..SHARDS)
                .map(|index| store.shards()[index].map.lock().unwrap().capacity())
                .collect()
        };
        assert!(rooms(&store).iter().all(|&room| room == 0));
        let roomy = |rooms: &[usize], group: usize| {
            rooms[group * THREAD_SHARDS..][..THREAD_SHARDS]
                .iter()
                .all(|&room| room >= SHARD_ROOM)
        };
        let empty = |rooms: &[usize], group: usize| {
            rooms[group * THREAD_SHARDS..][..THREAD_SHARDS]
                .iter()
                .all(|&room| room == 0)
        };
        // Thread 0's span: its group only.
        store.insert(5, entry());
        let now = rooms(&store);
        assert!(roomy(&now, 0));
        assert!((1..SHARDS / THREAD_SHARDS).all(|group| empty(&now, group)));
        // Thread 3's spans, with their generations: its group, whichever shard of it.
        let thread_3 = 3u64 << SLAB_TID_SHIFT;
        for generation in 0..4u64 {
            store.insert((generation << 51) | thread_3 | 7, entry());
        }
        let now = rooms(&store);
        assert!(roomy(&now, 0) && roomy(&now, 3));
        assert!(empty(&now, 1) && empty(&now, 2));
        drop(store.remove(5));
        assert!(roomy(&rooms(&store), 0));
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
        // Registry-like ids: slab key + 1, the key's page address dense in its low bits,
        // the making thread's number above it, a generation at the top.
        let threads = (SHARDS / THREAD_SHARDS) as u64;
        let mut used = [0usize; SHARDS];
        for thread in 0..threads {
            let mut own = [false; SHARDS];
            for generation in 0..4u64 {
                for slot in 0..64u64 {
                    let id = ((generation << 51) | (thread << SLAB_TID_SHIFT) | slot) + 1;
                    used[shard_of(id)] += 1;
                    own[shard_of(id)] = true;
                }
            }
            // A thread's spans keep to its own shards, all of them used.
            assert_eq!(own.iter().filter(|&&o| o).count(), THREAD_SHARDS, "{own:?}");
        }
        let per_shard = 256 * threads as usize / SHARDS;
        assert!(used.iter().all(|&n| n > per_shard / 3), "{used:?}");
        assert!(used.iter().all(|&n| n < per_shard * 3), "{used:?}");
    }

    /// The ids tracing-subscriber's Registry gives spans made on two threads carry the
    /// threads apart where [`shard_of`] reads them: each thread's spans keep to shards of
    /// their own.
    #[test]
    fn registry_ids_of_two_threads_keep_to_their_own_shards() {
        use std::collections::BTreeSet;
        use tracing_subscriber::registry::Registry;
        let dispatch = tracing::Dispatch::new(Registry::default());
        let shards = || {
            tracing::dispatcher::with_default(&dispatch, || {
                let spans: Vec<tracing::Span> = (0..32).map(|_| tracing::info_span!("s")).collect();
                let ids: Vec<u64> = spans.iter().map(|s| s.id().unwrap().into_u64()).collect();
                let groups: BTreeSet<usize> =
                    ids.iter().map(|&id| shard_of(id) / THREAD_SHARDS).collect();
                let threads: BTreeSet<u64> =
                    ids.iter().map(|&id| (id - 1) >> SLAB_TID_SHIFT).collect();
                (groups, threads)
            })
        };
        let here = shards();
        let there = std::thread::scope(|scope| scope.spawn(shards).join().unwrap());
        for (groups, threads) in [&here, &there] {
            assert_eq!(groups.len(), 1, "{groups:?}");
            assert_eq!(threads.len(), 1, "{threads:?}");
        }
        // Two threads alive at once: their numbers differ (and so, but for threads 8
        // apart, their shards).
        assert_ne!(here.1, there.1);
    }

    /// A span closed from inside the layer's work while this thread holds its shard
    /// (a sink that drops a span while it writes the first line): its entry is removed
    /// by the next lock of the shard, without locking it twice (which would deadlock or
    /// panic); one of a free shard is removed at once.
    #[test]
    fn a_reentrant_removal_under_the_held_shard_is_left_for_the_next_lock() {
        let store = SpanStore::new();
        let (first, same, other) = ids();
        store.insert(first, entry());
        store.insert(same, entry());
        store.insert(other, entry());
        {
            let mut guard = store.lock(first);
            assert!(guard.get_mut(first).is_some());
            store.remove_reentrant(same);
            store.remove_reentrant(other);
            assert!(guard.get_mut(same).is_some(), "not removed while held");
        }
        assert!(store.with(other, |_| ()).is_none(), "removed at once");
        assert!(
            store.with(same, |_| ()).is_none(),
            "removed by the next lock"
        );
        assert!(store.with(first, |_| ()).is_some());
        assert_eq!(store.len(), 1);
    }

    /// A re-entrant removal never waits for a shard another thread holds (that thread
    /// may be waiting for the lane the closing thread holds while its sink writes).
    #[test]
    fn a_reentrant_removal_does_not_wait_for_another_thread() {
        let store = SpanStore::new();
        let (first, same, _) = ids();
        store.insert(first, entry());
        store.insert(same, entry());
        let (locked, release) = (std::sync::Barrier::new(2), std::sync::Barrier::new(2));
        std::thread::scope(|scope| {
            scope.spawn(|| {
                let _guard = store.lock(first);
                locked.wait();
                release.wait();
            });
            locked.wait();
            // Would wait forever for the other thread if it blocked (the other thread
            // is released only after it returns).
            store.remove_reentrant(same);
            release.wait();
        });
        assert!(store.with(same, |_| ()).is_none());
        assert_eq!(store.len(), 1);
    }
}
