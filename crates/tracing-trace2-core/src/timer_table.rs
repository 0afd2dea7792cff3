//! The timer tables: the values of the stopwatch timers and counters of [`crate::timers`],
//! per thread and as process totals, and the lines they make (`th_timer`, `th_counter`,
//! `timer`, `counter`) as values. Nothing here writes: [`crate::timers`] writes the
//! lines through [`crate::api`], and the layer writes those of the threads it ends.
//! This module sits on the lowest floor with the thread state, which keeps a handle on
//! each thread's table ([`ThreadValues`]).
//!
//! Values are kept per thread and cost no allocation once a thread has used a given
//! timer or counter: each static gets an index the first time any thread uses it (a
//! process-wide lock, taken once per static), and each thread keeps its values in a
//! table of its own at that index, behind a lock that only that thread takes, except
//! once at the process end (so it is never contended while the program runs). Taking a
//! thread's lines ([`take_thread_totals`], [`take_totals_of`]) adds its values to the
//! process totals ([`take_process_totals`]) and clears them.
//!
//! The table order Git uses for its compiled-in table is here the order in which the
//! statics were first used (or [`Timer::register`]ed / [`Counter::register`]ed).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

/// Whether a timer or counter also wants one line per thread (`th_timer`/`th_counter`)
/// at each thread's exit, besides the process total.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PerThread {
    /// Only the process total is written.
    No,
    /// Each thread writes its own values at its exit, too.
    Yes,
}

/// What both kinds of statics carry: their name and the index they get on first use.
#[derive(Debug)]
struct Declared {
    category: &'static str,
    name: &'static str,
    per_thread: bool,
    /// 0 until registered, then the table index + 1.
    slot: AtomicUsize,
}

impl Declared {
    const fn new(category: &'static str, name: &'static str, per_thread: PerThread) -> Declared {
        Declared {
            category,
            name,
            per_thread: matches!(per_thread, PerThread::Yes),
            slot: AtomicUsize::new(0),
        }
    }

    fn per_thread(&self) -> PerThread {
        if self.per_thread {
            PerThread::Yes
        } else {
            PerThread::No
        }
    }

    fn meta(&self) -> Meta {
        Meta {
            category: self.category,
            name: self.name,
            per_thread: self.per_thread,
        }
    }

    /// The table index, if some thread already used this static.
    #[inline]
    fn index(&self) -> Option<usize> {
        self.slot.load(Ordering::Acquire).checked_sub(1)
    }

    /// The table index, registering the static in `table` on its first use.
    #[inline]
    fn index_or_register(&self, kind: MeasureKind) -> usize {
        match self.index() {
            Some(index) => index,
            None => self.register_slow(kind),
        }
    }

    #[cold]
    fn register_slow(&self, kind: MeasureKind) -> usize {
        let mut registry = registry();
        // Another thread may have won the race while this one waited for the lock.
        if let Some(index) = self.index() {
            return index;
        }
        let index = match kind {
            MeasureKind::Timer => {
                registry.timers.push((self.meta(), TimerData::default()));
                registry.timers.len() - 1
            }
            MeasureKind::Counter => {
                registry.counters.push((self.meta(), 0));
                registry.counters.len() - 1
            }
        };
        self.slot.store(index + 1, Ordering::Release);
        index
    }
}

#[derive(Clone, Copy)]
enum MeasureKind {
    Timer,
    Counter,
}

/// A stopwatch timer: the time spent between [`start`](Timer::start) and
/// [`stop`](Timer::stop) on each thread, as interval count, total, shortest and
/// longest interval.
///
/// Starts and stops are per thread. A start while the same timer already runs on the
/// same thread only deepens it: the interval is the outermost start/stop pair. A stop
/// with no matching start on this thread is ignored. A timer still running when its
/// thread's totals are written does not count its open interval.
///
/// Timers must be statics (the methods take `&'static self`), so that each one is
/// registered once.
#[derive(Debug)]
pub struct Timer(Declared);

impl Timer {
    /// A timer in `category` named `name`; `per_thread` asks for `th_timer` lines.
    pub const fn new(category: &'static str, name: &'static str, per_thread: PerThread) -> Timer {
        Timer(Declared::new(category, name, per_thread))
    }

    /// The timer's category.
    pub fn category(&self) -> &'static str {
        self.0.category
    }

    /// The timer's name.
    pub fn name(&self) -> &'static str {
        self.0.name
    }

    /// Whether the timer writes `th_timer` lines.
    pub fn per_thread(&self) -> PerThread {
        self.0.per_thread()
    }

    /// Gives the timer its place in the output order now rather than at its first use.
    /// Registering again does nothing.
    pub fn register(&'static self) {
        self.0.index_or_register(MeasureKind::Timer);
    }

    /// Starts an interval on this thread (or deepens a running one).
    #[inline]
    pub fn start(&'static self) {
        let index = self.0.index_or_register(MeasureKind::Timer);
        with_local(|local| {
            let slot = local.timer(index);
            slot.depth = slot.depth.saturating_add(1);
            if slot.depth == 1 {
                // Read last, so the bookkeeping above is not timed.
                slot.started = Some(Instant::now());
            }
        });
    }

    /// Ends the outermost interval on this thread (or undoes one nested start).
    #[inline]
    pub fn stop(&'static self) {
        // Read first, so the bookkeeping below is not timed.
        let now = Instant::now();
        let Some(index) = self.0.index() else {
            return;
        };
        with_local(|local| {
            if let Some(slot) = local.timers.get_mut(index) {
                slot.stop(now);
            }
        });
    }

    /// Starts an interval that ends when the returned guard is dropped.
    #[inline]
    #[must_use = "the interval ends when the guard is dropped"]
    pub fn scope(&'static self) -> TimerGuard {
        self.start();
        TimerGuard { timer: self }
    }

    /// Runs `f` inside one interval of this timer.
    #[inline]
    pub fn time<R>(&'static self, f: impl FnOnce() -> R) -> R {
        let _running = self.scope();
        f()
    }
}

/// Stops its timer when dropped (see [`Timer::scope`]).
#[derive(Debug)]
pub struct TimerGuard {
    timer: &'static Timer,
}

impl Drop for TimerGuard {
    fn drop(&mut self) {
        self.timer.stop();
    }
}

/// A counter: an unsigned 64-bit sum kept per thread (additions wrap around, as Git's
/// do).
///
/// Counters must be statics (the methods take `&'static self`), so that each one is
/// registered once.
#[derive(Debug)]
pub struct Counter(Declared);

impl Counter {
    /// A counter in `category` named `name`; `per_thread` asks for `th_counter` lines.
    pub const fn new(category: &'static str, name: &'static str, per_thread: PerThread) -> Counter {
        Counter(Declared::new(category, name, per_thread))
    }

    /// The counter's category.
    pub fn category(&self) -> &'static str {
        self.0.category
    }

    /// The counter's name.
    pub fn name(&self) -> &'static str {
        self.0.name
    }

    /// Whether the counter writes `th_counter` lines.
    pub fn per_thread(&self) -> PerThread {
        self.0.per_thread()
    }

    /// Gives the counter its place in the output order now rather than at its first
    /// use. Registering again does nothing.
    pub fn register(&'static self) {
        self.0.index_or_register(MeasureKind::Counter);
    }

    /// Adds `value` to this thread's sum.
    #[inline]
    pub fn add(&'static self, value: u64) {
        let index = self.0.index_or_register(MeasureKind::Counter);
        with_local(|local| {
            let sum = local.counter(index);
            *sum = sum.wrapping_add(value);
        });
    }
}

/// A timer's accumulated values (nanoseconds).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct TimerData {
    intervals: u64,
    total_ns: u64,
    min_ns: u64,
    max_ns: u64,
}

impl TimerData {
    fn add_interval(&mut self, ns: u64) {
        self.total_ns = self.total_ns.wrapping_add(ns);
        if self.intervals == 0 {
            self.min_ns = ns;
            self.max_ns = ns;
        } else {
            self.min_ns = self.min_ns.min(ns);
            self.max_ns = self.max_ns.max(ns);
        }
        self.intervals += 1;
    }

    fn merge(&mut self, other: &TimerData) {
        if other.intervals == 0 {
            return;
        }
        if self.intervals == 0 {
            self.min_ns = other.min_ns;
            self.max_ns = other.max_ns;
        } else {
            self.min_ns = self.min_ns.min(other.min_ns);
            self.max_ns = self.max_ns.max(other.max_ns);
        }
        self.total_ns = self.total_ns.wrapping_add(other.total_ns);
        self.intervals += other.intervals;
    }
}

/// One timer on one thread.
#[derive(Clone, Copy, Debug, Default)]
struct LocalTimer {
    data: TimerData,
    /// Starts not yet stopped (nested starts deepen, only the outermost pair counts).
    depth: u32,
    /// Start of the outermost running interval.
    started: Option<Instant>,
}

impl LocalTimer {
    fn stop(&mut self, now: Instant) {
        if self.depth == 0 {
            return;
        }
        self.depth -= 1;
        if self.depth > 0 {
            return;
        }
        if let Some(started) = self.started.take() {
            let ns = now.saturating_duration_since(started).as_nanos();
            self.data
                .add_interval(u64::try_from(ns).unwrap_or(u64::MAX));
        }
    }
}

/// This thread's values, indexed like the registry.
struct Local {
    timers: Vec<LocalTimer>,
    counters: Vec<u64>,
}

impl Local {
    #[inline]
    fn timer(&mut self, index: usize) -> &mut LocalTimer {
        if index >= self.timers.len() {
            self.timers.resize(index + 1, LocalTimer::default());
        }
        &mut self.timers[index]
    }

    #[inline]
    fn counter(&mut self, index: usize) -> &mut u64 {
        if index >= self.counters.len() {
            self.counters.resize(index + 1, 0);
        }
        &mut self.counters[index]
    }

    /// Takes the finished values, leaving running intervals running.
    fn take(&mut self) -> (Vec<TimerData>, Vec<u64>) {
        let timers = self
            .timers
            .iter_mut()
            .map(|t| std::mem::take(&mut t.data))
            .collect();
        let counters = self.counters.iter_mut().map(std::mem::take).collect();
        (timers, counters)
    }
}

/// One thread's values, reachable from the thread that ends it at the process end.
pub(crate) struct ThreadValues(Mutex<Local>);

impl ThreadValues {
    fn lock(&self) -> MutexGuard<'_, Local> {
        // Each update is a few plain stores: a panic cannot leave the table half done.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl std::fmt::Debug for ThreadValues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadValues").finish_non_exhaustive()
    }
}

thread_local! {
    static LOCAL: Arc<ThreadValues> = Arc::new(ThreadValues(Mutex::new(Local {
        timers: Vec::new(),
        counters: Vec::new(),
    })));
}

/// Runs `f` on this thread's values; does nothing while the thread is being torn down.
#[inline]
fn with_local(f: impl FnOnce(&mut Local)) {
    let _ = LOCAL.try_with(|values| f(&mut values.lock()));
}

/// The calling thread's values, for its lane to keep (`None` while the thread is being
/// torn down).
pub(crate) fn this_thread_values() -> Option<Arc<ThreadValues>> {
    LOCAL.try_with(Arc::clone).ok()
}

/// A timer's or counter's declaration, as the registry keeps it.
#[derive(Clone, Copy, Debug)]
struct Meta {
    category: &'static str,
    name: &'static str,
    per_thread: bool,
}

/// Every registered timer and counter, in registration order, with its process total.
struct Registry {
    timers: Vec<(Meta, TimerData)>,
    counters: Vec<(Meta, u64)>,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    timers: Vec::new(),
    counters: Vec::new(),
});

held_across_forks! {
    /// Installs, once, the `fork` handlers that hold [`REGISTRY`] in the forking thread
    /// across the `fork`: without them, a child forked while another thread of its
    /// parent held it (a timer's first use, a thread's totals taken) would hang on its
    /// first new timer or counter and on taking any totals (a thread's end, the exit).
    fn hold_registry_across_forks for REGISTRY: Registry
}

fn registry() -> MutexGuard<'static, Registry> {
    hold_registry_across_forks();
    // The registry stays consistent whatever panicked while holding it: each update is
    // a single push or addition.
    REGISTRY.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Lines a thread handed over with [`hand_over_thread_totals`], not written yet.
static HANDED_OVER: Mutex<Vec<TotalLine>> = Mutex::new(Vec::new());

held_across_forks! {
    /// Installs, once, the `fork` handlers that hold [`HANDED_OVER`] in the forking
    /// thread across the `fork`: without them, a child forked while another thread of
    /// its parent held it would hang handing over its totals, or writing them at exit.
    fn hold_handed_over_across_forks for HANDED_OVER: Vec<TotalLine>
}

/// Locks [`HANDED_OVER`], once the `fork` handlers that keep it usable in a child are
/// installed.
fn handed_over() -> MutexGuard<'static, Vec<TotalLine>> {
    hold_handed_over_across_forks();
    HANDED_OVER.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Takes the calling thread's `th_timer`/`th_counter` lines (adding its values to the
/// process totals, as [`crate::timers::emit_thread_totals`] does) and keeps them for
/// [`crate::timers::emit_handed_over_totals`], which another thread calls later.
///
/// The process lifecycle calls this on the main thread when its guard is dropped and
/// the exit lines are left to the exit handler: that handler runs after the main
/// thread's thread-locals are gone, on a helper thread of its own.
pub fn hand_over_thread_totals() {
    let lines = take_thread_totals();
    if !lines.is_empty() {
        handed_over().extend(lines);
    }
}

/// The lines kept by [`hand_over_thread_totals`], forgotten here (the caller writes
/// them, for the thread that handed them over).
pub(crate) fn take_handed_over_totals() -> Vec<TotalLine> {
    std::mem::take(&mut *handed_over())
}

/// The values of one `timer`/`th_timer` or `counter`/`th_counter` line (a process's or
/// a thread's: the caller knows which).
#[derive(Clone, Copy, Debug)]
pub(crate) enum TotalLine {
    Timer(TimerTotal),
    Counter(CounterTotal),
}

/// A timer's values on one thread or in the process.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TimerTotal {
    pub category: &'static str,
    pub name: &'static str,
    pub intervals: u64,
    pub total_ns: u64,
    pub min_ns: u64,
    pub max_ns: u64,
}

/// A counter's value on one thread or in the process.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CounterTotal {
    pub category: &'static str,
    pub name: &'static str,
    pub value: u64,
}

/// The calling thread's `th_timer` then `th_counter` lines (see
/// [`crate::timers::emit_thread_totals`]); its values are added to the process totals and cleared.
/// Empty when the thread's values are gone (its thread-locals are being destroyed).
pub(crate) fn take_thread_totals() -> Vec<TotalLine> {
    LOCAL
        .try_with(|values| take_totals_of(values))
        .unwrap_or_default()
}

/// The `th_timer` then `th_counter` lines of the thread whose values are `values` (it
/// may be another thread than the caller); its values are added to the process totals
/// and cleared, as [`take_thread_totals`] does for the calling thread.
pub(crate) fn take_totals_of(values: &ThreadValues) -> Vec<TotalLine> {
    let (timers, counters) = values.lock().take();
    if timers.iter().all(|t| t.intervals == 0) && counters.iter().all(|&c| c == 0) {
        return Vec::new();
    }
    let mut lines = Vec::new();
    let mut registry = registry();
    for ((meta, total), data) in registry.timers.iter_mut().zip(&timers) {
        if meta.per_thread && data.intervals > 0 {
            lines.push(TotalLine::Timer(TimerTotal {
                category: meta.category,
                name: meta.name,
                intervals: data.intervals,
                total_ns: data.total_ns,
                min_ns: data.min_ns,
                max_ns: data.max_ns,
            }));
        }
        total.merge(data);
    }
    for ((meta, total), &value) in registry.counters.iter_mut().zip(&counters) {
        if meta.per_thread && value != 0 {
            lines.push(TotalLine::Counter(CounterTotal {
                category: meta.category,
                name: meta.name,
                value,
            }));
        }
        *total = total.wrapping_add(value);
    }
    lines
}

/// The process totals as lines: `timer` for every timer with at least one interval,
/// then `counter` for every non-zero counter, in table order. Totals hold the values
/// of the threads whose lines were taken (ended threads). They are cleared as they are
/// taken, so a second call returns only what was added since.
pub(crate) fn take_process_totals() -> Vec<TotalLine> {
    let mut registry = registry();
    let mut lines = Vec::new();
    for (meta, data) in registry.timers.iter_mut().filter(|(_, t)| t.intervals > 0) {
        let data = std::mem::take(data);
        lines.push(TotalLine::Timer(TimerTotal {
            category: meta.category,
            name: meta.name,
            intervals: data.intervals,
            total_ns: data.total_ns,
            min_ns: data.min_ns,
            max_ns: data.max_ns,
        }));
    }
    for (meta, value) in registry.counters.iter_mut().filter(|(_, c)| *c != 0) {
        lines.push(TotalLine::Counter(CounterTotal {
            category: meta.category,
            name: meta.name,
            value: std::mem::take(value),
        }));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timers::{emit_handed_over_totals, emit_process_totals, emit_thread_totals};
    use crate::{Format, MemorySink, Record, Target, Trace2Event, Trace2Layer};
    use std::time::Duration;
    use tracing_subscriber::prelude::*;

    /// This thread's finished values of `timer`, without taking them.
    fn local_timer(timer: &'static Timer) -> TimerData {
        let index = timer.0.index().expect("registered");
        let mut out = TimerData::default();
        with_local(|l| out = l.timers.get(index).map(|t| t.data).unwrap_or_default());
        out
    }

    fn local_counter(counter: &'static Counter) -> u64 {
        let index = counter.0.index().expect("registered");
        let mut out = 0;
        with_local(|l| out = l.counters.get(index).copied().unwrap_or_default());
        out
    }

    fn total_timer(timer: &'static Timer) -> TimerData {
        registry().timers[timer.0.index().expect("registered")].1
    }

    fn total_counter(counter: &'static Counter) -> u64 {
        registry().counters[counter.0.index().expect("registered")].1
    }

    /// Held by the tests that read or write process totals, which all tests share.
    static TOTALS: Mutex<()> = Mutex::new(());

    fn totals_lock() -> MutexGuard<'static, ()> {
        TOTALS.lock().unwrap_or_else(PoisonError::into_inner)
    }

    #[test]
    fn nested_starts_count_the_outermost_pair() {
        static T: Timer = Timer::new("test", "nested", PerThread::No);
        std::thread::spawn(|| {
            T.start();
            T.start();
            std::thread::sleep(Duration::from_millis(2));
            T.stop();
            // Still running: the inner stop closed nothing.
            assert_eq!(local_timer(&T).intervals, 0);
            std::thread::sleep(Duration::from_millis(2));
            T.stop();
            let data = local_timer(&T);
            assert_eq!(data.intervals, 1);
            assert!(data.total_ns >= 4_000_000, "{data:?}");
            assert_eq!(data.min_ns, data.total_ns);
            assert_eq!(data.max_ns, data.total_ns);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn stop_without_start_is_ignored() {
        static NEVER: Timer = Timer::new("test", "never-started", PerThread::No);
        static ONCE: Timer = Timer::new("test", "stopped-twice", PerThread::No);
        std::thread::spawn(|| {
            NEVER.stop();
            assert_eq!(NEVER.0.index(), None, "a stop alone registers nothing");
            ONCE.start();
            ONCE.stop();
            ONCE.stop();
            assert_eq!(local_timer(&ONCE).intervals, 1);
            ONCE.start();
            ONCE.stop();
            assert_eq!(local_timer(&ONCE).intervals, 2);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn min_max_and_total() {
        let mut data = TimerData::default();
        for ns in [30, 10, 50, 20] {
            data.add_interval(ns);
        }
        assert_eq!(
            data,
            TimerData {
                intervals: 4,
                total_ns: 110,
                min_ns: 10,
                max_ns: 50
            }
        );
        let mut merged = TimerData::default();
        merged.merge(&TimerData::default());
        assert_eq!(
            merged,
            TimerData::default(),
            "an unused timer merges nothing"
        );
        merged.merge(&data);
        assert_eq!(
            merged, data,
            "the first merge takes min and max as they are"
        );
        let mut other = TimerData::default();
        other.add_interval(5);
        other.add_interval(7);
        merged.merge(&other);
        assert_eq!(
            merged,
            TimerData {
                intervals: 6,
                total_ns: 122,
                min_ns: 5,
                max_ns: 50
            }
        );
    }

    #[test]
    fn per_thread_values_are_added_only_at_emit() {
        static T: Timer = Timer::new("test", "merge", PerThread::Yes);
        static C: Counter = Counter::new("test", "merge", PerThread::Yes);
        let _totals = totals_lock();
        let spawn = |n: u64, emit: bool| {
            std::thread::spawn(move || {
                for _ in 0..n {
                    T.time(|| std::thread::sleep(Duration::from_micros(100)));
                    C.add(n);
                }
                let mine = (local_timer(&T), local_counter(&C));
                if emit {
                    emit_thread_totals();
                    assert_eq!(local_timer(&T), TimerData::default(), "cleared");
                    assert_eq!(local_counter(&C), 0, "cleared");
                }
                mine
            })
        };
        let (t2, c2) = spawn(2, true).join().unwrap();
        let (t3, c3) = spawn(3, true).join().unwrap();
        let (t4, c4) = spawn(4, false).join().unwrap();
        assert_eq!((t2.intervals, c2), (2, 4));
        assert_eq!((t3.intervals, c3), (3, 9));
        assert_eq!((t4.intervals, c4), (4, 16));
        let total = total_timer(&T);
        assert_eq!(
            total.intervals, 5,
            "the thread that never emitted is not added"
        );
        assert_eq!(total.total_ns, t2.total_ns + t3.total_ns);
        assert_eq!(total.min_ns, t2.min_ns.min(t3.min_ns));
        assert_eq!(total.max_ns, t2.max_ns.max(t3.max_ns));
        assert_eq!(total_counter(&C), 13);
    }

    #[test]
    fn handed_over_values_are_written_once_by_another_thread() {
        static T: Timer = Timer::new("test", "handed-over", PerThread::Yes);
        static C: Counter = Counter::new("test", "handed-over", PerThread::Yes);
        let _totals = totals_lock();
        let before = (total_timer_if_any(&T), total_counter_if_any(&C));
        std::thread::spawn(|| {
            T.time(|| std::thread::sleep(Duration::from_micros(100)));
            C.add(5);
            hand_over_thread_totals();
            assert_eq!(local_timer(&T), TimerData::default(), "taken");
            assert_eq!(local_counter(&C), 0, "taken");
        })
        .join()
        .unwrap();
        // Added to the process totals at hand-over, as at a thread's own emit.
        assert_eq!(total_timer(&T).intervals, before.0 + 1);
        assert_eq!(total_counter(&C), before.1 + 5);
        let handed: Vec<_> = HANDED_OVER.lock().unwrap().clone();
        let ours = |t: &&TotalLine| match t {
            TotalLine::Timer(t) => t.name == "handed-over",
            TotalLine::Counter(c) => c.name == "handed-over" && c.value == 5,
        };
        assert_eq!(handed.iter().filter(ours).count(), 2, "{handed:?}");
        // Without a subscriber the lines go nowhere, but they are taken once.
        std::thread::spawn(emit_handed_over_totals).join().unwrap();
        assert!(HANDED_OVER.lock().unwrap().iter().all(|t| !ours(&t)));
    }

    fn total_timer_if_any(timer: &'static Timer) -> u64 {
        timer
            .0
            .index()
            .map_or(0, |i| registry().timers[i].1.intervals)
    }

    fn total_counter_if_any(counter: &'static Counter) -> u64 {
        counter.0.index().map_or(0, |i| registry().counters[i].1)
    }

    #[test]
    fn counters_are_u64_and_wrap() {
        static BIG: Counter = Counter::new("test", "big", PerThread::No);
        std::thread::spawn(|| {
            BIG.add(u64::MAX - 1);
            assert_eq!(local_counter(&BIG), u64::MAX - 1);
            BIG.add(3);
            assert_eq!(local_counter(&BIG), 1, "wraps as Git's uint64_t does");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn registration_is_once_and_in_first_use_order() {
        static A: Counter = Counter::new("test", "order-a", PerThread::No);
        static B: Counter = Counter::new("test", "order-b", PerThread::No);
        B.register();
        A.add(1);
        B.register();
        let (a, b) = (A.0.index().unwrap(), B.0.index().unwrap());
        assert!(b < a);
        let registry = registry();
        assert_eq!(registry.counters[a].0.name, "order-a");
        assert_eq!(registry.counters[b].0.name, "order-b");
        assert_eq!(
            registry
                .counters
                .iter()
                .filter(|(m, _)| m.name == "order-b")
                .count(),
            1
        );
    }

    #[test]
    fn accessors() {
        static T: Timer = Timer::new("cat", "t", PerThread::Yes);
        static C: Counter = Counter::new("cat", "c", PerThread::No);
        assert_eq!(
            (T.category(), T.name(), T.per_thread()),
            ("cat", "t", PerThread::Yes)
        );
        assert_eq!(
            (C.category(), C.name(), C.per_thread()),
            ("cat", "c", PerThread::No)
        );
    }

    /// Renders timer and counter records as `<event> <category>/<name> <values>`.
    struct Lines;
    impl Format for Lines {
        fn format(&self, record: &Record<'_>, out: &mut Vec<u8>) {
            let line = match &record.event {
                Trace2Event::Timer { timer, .. } => format!(
                    "{} {}/{} {}\n",
                    record.event.name(),
                    timer.category,
                    timer.name,
                    timer.intervals
                ),
                Trace2Event::Counter {
                    category,
                    name,
                    value,
                    ..
                } => format!("{} {category}/{name} {value}\n", record.event.name()),
                _ => return,
            };
            out.extend_from_slice(line.as_bytes());
        }
    }

    /// Both emit functions write what spec 10.2 lists, in that order, and nothing twice.
    #[test]
    fn emission_order_and_once_only() {
        static T1: Timer = Timer::new("emit", "t1", PerThread::No);
        static T2: Timer = Timer::new("emit", "t2", PerThread::Yes);
        static C1: Counter = Counter::new("emit", "c1", PerThread::Yes);
        static C2: Counter = Counter::new("emit", "c2", PerThread::No);
        static UNUSED: Counter = Counter::new("emit", "zero", PerThread::Yes);
        T1.register();
        T2.register();
        C1.register();
        C2.register();
        UNUSED.register();
        let _totals = totals_lock();
        let sink = MemorySink::new();
        let layer = Trace2Layer::builder()
            .with_target(Target::new("GIT_TRACE2_EVENT", Lines, sink.clone()))
            .build();
        let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
        tracing::dispatcher::with_default(&dispatch, || {
            std::thread::scope(|s| {
                s.spawn(|| {
                    tracing::dispatcher::with_default(&dispatch, || {
                        // Used out of table order: the lines still follow the table.
                        C2.add(5);
                        C1.add(2);
                        UNUSED.add(0);
                        T2.time(|| ());
                        T1.time(|| ());
                        T1.time(|| ());
                        emit_thread_totals();
                        emit_thread_totals();
                    })
                });
            });
            emit_process_totals();
            emit_process_totals();
        });
        let text = sink.to_string_lossy();
        let ours: Vec<&str> = text.lines().filter(|l| l.contains(" emit/")).collect();
        assert_eq!(
            ours,
            [
                "th_timer emit/t2 1",
                "th_counter emit/c1 2",
                "timer emit/t1 2",
                "timer emit/t2 1",
                "counter emit/c1 2",
                "counter emit/c2 5",
            ]
        );
    }

    /// A child forked while another thread of its parent holds the table of timers (a
    /// timer's first use, a thread's totals taken) uses a new timer and counter and takes
    /// its thread's and the process's totals.
    #[cfg(unix)]
    #[test]
    fn a_child_forked_while_the_registry_is_held_registers_and_takes_totals() {
        static T: Timer = Timer::new("test", "forked-first-use", PerThread::Yes);
        static C: Counter = Counter::new("test", "forked-first-use", PerThread::No);
        crate::fork_lock::tests::forked_while_held(
            || drop(registry()),
            || REGISTRY.lock().unwrap_or_else(PoisonError::into_inner),
            || {
                T.time(|| ());
                C.add(7);
                let thread = take_thread_totals();
                let process = take_process_totals();
                let timer = |l: &TotalLine| matches!(l, TotalLine::Timer(t) if t.name == "forked-first-use" && t.intervals == 1);
                let counter = |l: &TotalLine| matches!(l, TotalLine::Counter(c) if c.name == "forked-first-use" && c.value == 7);
                thread.iter().any(timer) && process.iter().any(timer) && process.iter().any(counter)
            },
        );
    }

    /// A child forked while another thread of its parent holds the handed-over lines
    /// hands its own over and takes them, as the exit handler does.
    #[cfg(unix)]
    #[test]
    fn a_child_forked_while_the_handed_over_lines_are_held_hands_over() {
        static C: Counter = Counter::new("test", "forked-hand-over", PerThread::Yes);
        crate::fork_lock::tests::forked_while_held(
            || {
                drop(registry());
                drop(handed_over());
            },
            || HANDED_OVER.lock().unwrap_or_else(PoisonError::into_inner),
            || {
                C.add(3);
                hand_over_thread_totals();
                take_handed_over_totals().iter().any(
                    |l| matches!(l, TotalLine::Counter(c) if c.name == "forked-hand-over" && c.value == 3),
                )
            },
        );
    }
}
