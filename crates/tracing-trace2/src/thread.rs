//! Threads as Trace2 sees them: `thread_start` when a thread begins, then at its end
//! the thread's `th_timer`/`th_counter` lines and `thread_exit`.
//!
//! Git names each thread it announces `thNN:<name>` (a process-wide number, the whole
//! cut to 24 bytes) and adds the thread's timer and counter values to the process
//! totals when it exits. Three ways to get the same for a Rust thread:
//!
//! * [`spawn`] / [`Builder`]: like `std::thread::spawn`, with a name; the Trace2 lines
//!   are written around the closure, also when it panics (the panic then goes on to
//!   the `JoinHandle` as usual).
//! * [`ThreadGuard`]: for threads the program creates itself; `thread_start` now,
//!   totals and `thread_exit` when the guard drops.
//! * [`start_handler`] / [`exit_handler`] / [`stop_handler`] (or [`announce`] /
//!   [`finish`]): for thread pools that call hooks on their worker threads, such as
//!   rayon (below) or tokio (`on_thread_stop(tracing_trace2::thread::stop_handler())`):
//!
//! ```
//! let pool = rayon::ThreadPoolBuilder::new()
//!     .num_threads(4)
//!     .start_handler(tracing_trace2::thread::start_handler("rayon"))
//!     .exit_handler(tracing_trace2::thread::exit_handler())
//!     .build()?;
//! pool.install(|| tracing::info!(category = "pool", key = "ran", value = true));
//! # Ok::<(), rayon::ThreadPoolBuildError>(())
//! ```
//!
//! A thread that writes Trace2 lines without any of these is named `thNN:unknown` (or
//! after its Rust name) when it first writes. Its `thread_exit` (after its
//! `th_timer`/`th_counter` lines) comes from a thread-local destructor when it ends, and
//! names the call site of its `thread_start` (the line that first traced on it), as
//! nothing in the program called for it.
//!
//! A thread still running when the process ends, such as a worker of the runtime that
//! `#[tokio::main]` shuts down only after `main` returns, is ended by the process
//! lifecycle before the totals and `atexit`: its `th_timer`/`th_counter` lines (its
//! values join the process totals) and `thread_exit`, naming where the process ended
//! (see [`tracing_trace2_core::api::end_threads`]). So every announced thread ends
//! before `atexit`, with or without these helpers.
//!
//! On the main thread Git turns `thread_start`/`thread_exit` into a region
//! (`thread-proc on main`) and leaves the main thread's totals to the process exit;
//! so do these helpers.

use std::io;
use std::marker::PhantomData;
use std::panic::Location;
use std::thread::{JoinHandle, Scope, ScopedJoinHandle};

use tracing_trace2_core::{api, timers};

/// Spawns a thread named `name` that announces itself to Trace2 and, when `f` returns
/// or panics, writes its timer and counter lines and `thread_exit`.
///
/// The Rust thread gets `name` as its name; Trace2 calls it `thNN:name`. Fails only
/// when the operating system cannot create the thread.
///
/// ```
/// let worker = tracing_trace2::thread::spawn("preload", || 6 * 7)?;
/// assert_eq!(worker.join().ok(), Some(42));
/// # Ok::<(), std::io::Error>(())
/// ```
#[track_caller]
pub fn spawn<F, T>(name: &str, f: F) -> io::Result<JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    Builder::new(name).spawn(f)
}

/// A thread factory like `std::thread::Builder`, whose threads announce themselves to
/// Trace2 as [`spawn`]'s do.
#[derive(Debug)]
pub struct Builder {
    name: String,
    stack_size: Option<usize>,
}

impl Builder {
    /// A builder for threads named `name`.
    pub fn new(name: impl Into<String>) -> Builder {
        Builder {
            name: name.into(),
            stack_size: None,
        }
    }

    /// The stack size of the new thread, in bytes.
    pub fn stack_size(mut self, size: usize) -> Builder {
        self.stack_size = Some(size);
        self
    }

    fn std_builder(&self) -> std::thread::Builder {
        let builder = std::thread::Builder::new().name(self.name.clone());
        match self.stack_size {
            Some(size) => builder.stack_size(size),
            None => builder,
        }
    }

    /// Spawns the thread (see [`spawn`]). Its `thread_start` and `thread_exit` lines
    /// name the caller's location.
    #[track_caller]
    pub fn spawn<F, T>(self, f: F) -> io::Result<JoinHandle<T>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let builder = self.std_builder();
        let name = self.name;
        let at = Location::caller();
        builder.spawn(move || run(&name, at, f))
    }

    /// Spawns a scoped thread (see `std::thread::scope`), which may borrow from the
    /// caller's stack.
    ///
    /// ```
    /// let data = [1, 2, 3];
    /// let sum = std::thread::scope(|s| {
    ///     let worker = tracing_trace2::thread::Builder::new("sum").spawn_scoped(s, || data.iter().sum::<i32>())?;
    ///     Ok::<_, std::io::Error>(worker.join().unwrap_or_default())
    /// })?;
    /// assert_eq!(sum, 6);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    #[track_caller]
    pub fn spawn_scoped<'scope, 'env, F, T>(
        self,
        scope: &'scope Scope<'scope, 'env>,
        f: F,
    ) -> io::Result<ScopedJoinHandle<'scope, T>>
    where
        F: FnOnce() -> T + Send + 'scope,
        T: Send + 'scope,
    {
        let builder = self.std_builder();
        let name = self.name;
        let at = Location::caller();
        builder.spawn_scoped(scope, move || run(&name, at, f))
    }
}

/// The body of every helper-spawned thread: the guard's drop also runs while a panic
/// unwinds, so the lines are written before the panic reaches the `JoinHandle`.
fn run<T>(name: &str, at: &'static Location<'static>, f: impl FnOnce() -> T) -> T {
    let _trace2 = ThreadGuard::start_at(name, at);
    f()
}

/// Announces the calling thread to Trace2 for as long as it lives: `thread_start` now,
/// and when dropped the thread's `th_timer`/`th_counter` lines (its values then join
/// the process totals) and `thread_exit`.
///
/// For threads the program creates itself:
///
/// ```
/// std::thread::spawn(|| {
///     let _trace2 = tracing_trace2::thread::ThreadGuard::start("loader");
///     // … work …
/// })
/// .join()
/// .ok();
/// ```
///
/// The guard belongs to its thread (it is not `Send`).
#[derive(Debug)]
#[must_use = "the thread ends for Trace2 when the guard is dropped"]
pub struct ThreadGuard {
    /// Where the guard was made: the location of both lines.
    at: &'static Location<'static>,
    _thread_bound: PhantomData<*const ()>,
}

impl ThreadGuard {
    /// Writes `thread_start` for the calling thread, which Trace2 names `thNN:name`.
    #[track_caller]
    pub fn start(name: &str) -> ThreadGuard {
        ThreadGuard::start_at(name, Location::caller())
    }

    fn start_at(name: &str, at: &'static Location<'static>) -> ThreadGuard {
        api::thread_start_at(at, name);
        ThreadGuard {
            at,
            _thread_bound: PhantomData,
        }
    }
}

impl Drop for ThreadGuard {
    fn drop(&mut self) {
        finish_at(self.at);
    }
}

/// Writes `thread_start` for the calling thread, which Trace2 names `thNN:name`; to be
/// paired with [`finish`] on the same thread.
#[track_caller]
pub fn announce(name: &str) {
    api::thread_start(name);
}

/// Ends the calling thread for Trace2: its `th_timer`/`th_counter` lines (its values
/// then join the process totals), then `thread_exit`. On the main thread only the
/// `thread_exit` (a region leave there) is written: the main thread's totals belong to
/// the process exit.
#[track_caller]
pub fn finish() {
    finish_at(Location::caller());
}

fn finish_at(at: &'static Location<'static>) {
    if !is_main_thread() {
        timers::emit_thread_totals();
    }
    api::thread_exit_at(at);
}

/// A hook for a pool's worker start (such as rayon's `ThreadPoolBuilder::start_handler`):
/// each worker announces itself as `thNN:name`, at the location where the hook was
/// made. The worker index is not used.
#[track_caller]
pub fn start_handler(name: impl Into<String>) -> impl Fn(usize) + Send + Sync + 'static {
    let name = name.into();
    let at = Location::caller();
    move |_index| api::thread_start_at(at, &name)
}

/// A hook for a pool's worker exit (such as rayon's `ThreadPoolBuilder::exit_handler`):
/// each worker writes its totals and `thread_exit` (see [`finish`]).
#[track_caller]
pub fn exit_handler() -> impl Fn(usize) + Send + Sync + 'static {
    let at = Location::caller();
    move |_index| finish_at(at)
}

/// A hook for a pool's worker stop that takes no argument (tokio's
/// `runtime::Builder::on_thread_stop`): each worker writes its totals and `thread_exit`
/// (see [`finish`]), at the location where the hook was made. Passing [`finish`] itself
/// works too, but its lines then name the standard library's code that calls the hook.
#[track_caller]
pub fn stop_handler() -> impl Fn() + Send + Sync + 'static {
    let at = Location::caller();
    move || finish_at(at)
}

/// The same test the core layer uses to call a thread `main`.
fn is_main_thread() -> bool {
    std::thread::current().name() == Some("main")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use tracing_subscriber::prelude::*;
    use tracing_trace2_core::timers::{Counter, PerThread};
    use tracing_trace2_core::{Format, MemorySink, Record, Target, Trace2Event, Trace2Layer};

    /// Renders records as `<thread> <event>[ <counter value>]`.
    struct Names;
    impl Format for Names {
        fn format(&self, record: &Record<'_>, out: &mut Vec<u8>) {
            let value = match &record.event {
                Trace2Event::Counter { value, .. } => format!(" {value}"),
                _ => String::new(),
            };
            let line = format!("{} {}{value}\n", record.thread, record.event.name());
            out.extend_from_slice(line.as_bytes());
        }
    }

    /// Runs `f` with a layer writing [`Names`] lines, on every thread `f` starts through
    /// `spawn_with`, and returns the lines.
    fn traced(f: impl FnOnce(&tracing::Dispatch)) -> Vec<String> {
        let sink = MemorySink::new();
        let layer = Trace2Layer::builder()
            .with_target(Target::new("GIT_TRACE2_EVENT", Names, sink.clone()))
            .build();
        let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
        tracing::dispatcher::with_default(&dispatch, || f(&dispatch));
        sink.to_string_lossy()
            .lines()
            .filter(|l| !l.contains(" version"))
            .map(str::to_owned)
            .collect()
    }

    /// `(thread name, rest)` of each line of a thread other than `first`.
    fn named(lines: &[String]) -> Vec<(String, String)> {
        lines
            .iter()
            .map(|l| {
                let (t, rest) = l.split_once(' ').unwrap();
                (t.to_owned(), rest.to_owned())
            })
            .collect()
    }

    #[test]
    fn spawn_writes_start_totals_and_exit() {
        static WORK: Counter = Counter::new("thread-test", "spawn", PerThread::Yes);
        let lines = traced(|d| {
            let d = d.clone();
            let handle = spawn("worker-with-a-rather-long-name", move || {
                // The default must outlive the closure: the helper writes the thread's
                // last lines after it returns.
                std::mem::forget(tracing::dispatcher::set_default(&d));
                WORK.add(3);
                // The Rust thread carries the plain name.
                std::thread::current().name().map(str::to_owned)
            })
            .unwrap();
            assert_eq!(
                handle.join().unwrap().as_deref(),
                Some("worker-with-a-rather-long-name")
            );
        });
        // thread_start ran before the closure set the dispatcher, so it went nowhere;
        // the thread is announced before its first line all the same, under the name
        // the helper gave.
        let lines = named(&lines);
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert_eq!(lines[0].1, "thread_start");
        assert_eq!(lines[1].1, "th_counter 3");
        assert_eq!(lines[2].1, "thread_exit");
        assert_eq!(lines[0].0, lines[1].0);
        assert_eq!(lines[1].0, lines[2].0);
        assert_eq!(lines[0].0.len(), 24, "cut to 24 bytes: {}", lines[0].0);
        assert!(lines[0].0.starts_with("th"));
        assert!(lines[0].0.contains(":worker-with-a"));
    }

    #[test]
    fn a_panicking_thread_still_ends() {
        static WORK: Counter = Counter::new("thread-test", "panic", PerThread::Yes);
        let lines = traced(|d| {
            let d = d.clone();
            let result = std::thread::spawn(move || {
                tracing::dispatcher::with_default(&d, || {
                    run("doomed", Location::caller(), || {
                        WORK.add(1);
                        panic!("worker failed");
                    })
                })
            })
            .join();
            let payload = result.expect_err("the panic reaches the JoinHandle");
            assert_eq!(payload.downcast_ref::<&str>(), Some(&"worker failed"));
        });
        let events: Vec<String> = named(&lines).into_iter().map(|(_, e)| e).collect();
        assert_eq!(events, ["thread_start", "th_counter 1", "thread_exit"]);
        assert!(lines[0].contains(":doomed "), "{lines:?}");
    }

    #[test]
    fn guard_and_pool_hooks() {
        static WORK: Counter = Counter::new("thread-test", "hooks", PerThread::Yes);
        let lines = traced(|d| {
            let (start, exit) = (start_handler("pool"), exit_handler());
            let d2 = d.clone();
            std::thread::spawn(move || {
                tracing::dispatcher::with_default(&d2, || {
                    start(7);
                    WORK.add(2);
                    exit(7);
                })
            })
            .join()
            .unwrap();
            let d3 = d.clone();
            std::thread::spawn(move || {
                tracing::dispatcher::with_default(&d3, || {
                    let _guard = ThreadGuard::start("guarded");
                    WORK.add(5);
                })
            })
            .join()
            .unwrap();
        });
        let lines = named(&lines);
        let events: Vec<&str> = lines.iter().map(|(_, e)| e.as_str()).collect();
        assert_eq!(
            events,
            [
                "thread_start",
                "th_counter 2",
                "thread_exit",
                "thread_start",
                "th_counter 5",
                "thread_exit"
            ]
        );
        assert!(lines[0].0.ends_with(":pool"), "{lines:?}");
        assert!(lines[3].0.ends_with(":guarded"), "{lines:?}");
    }

    #[test]
    fn scoped_threads_borrow() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let lines = traced(|d| {
            std::thread::scope(|s| {
                Builder::new("scoped")
                    .stack_size(256 * 1024)
                    .spawn_scoped(s, || {
                        std::mem::forget(tracing::dispatcher::set_default(d));
                        seen.lock()
                            .unwrap()
                            .push(std::thread::current().name().map(str::to_owned));
                    })
                    .unwrap();
            });
        });
        assert_eq!(*seen.lock().unwrap(), [Some("scoped".to_owned())]);
        // The helper's thread_start went nowhere (no dispatcher yet) and the thread wrote
        // nothing else: a thread that was never seen is not ended either.
        let events: Vec<String> = named(&lines).into_iter().map(|(_, e)| e).collect();
        assert!(events.is_empty(), "{events:?}");
    }

    /// A thread still running when the process ends (a `#[tokio::main]` worker): the
    /// end of the process (`end_threads`, the lifecycle's first step there) writes its
    /// `th_counter` and `thread_exit` from the ending thread, its value joins the process
    /// total written after, and nothing it does later is written.
    #[test]
    fn a_thread_still_running_is_ended_before_atexit() {
        static WORK: Counter = Counter::new("thread-test", "running", PerThread::Yes);
        let lines = traced(|d| {
            let (ready_tx, ready) = std::sync::mpsc::channel();
            let (done, done_rx) = std::sync::mpsc::channel::<()>();
            let on_worker = d.clone();
            let worker = std::thread::spawn(move || {
                tracing::dispatcher::with_default(&on_worker, || {
                    WORK.add(4);
                    tracing::info!(category = "t", key = "k", value = 1);
                    ready_tx.send(()).unwrap();
                    done_rx.recv().ok();
                    WORK.add(100);
                    tracing::info!(category = "t", key = "late", value = 2);
                })
            });
            ready.recv().unwrap();
            api::end_threads();
            timers::emit_process_totals();
            api::atexit();
            done.send(()).unwrap();
            worker.join().unwrap();
        });
        let lines = named(&lines);
        let worker = &lines[0].0;
        let on_worker: Vec<&str> = lines
            .iter()
            .filter(|(t, _)| t == worker)
            .map(|(_, e)| e.as_str())
            .collect();
        assert_eq!(
            on_worker,
            ["thread_start", "data", "th_counter 4", "thread_exit"],
            "{lines:?}"
        );
        let exit = lines
            .iter()
            .position(|(t, e)| t == worker && e == "thread_exit");
        let total = lines.iter().position(|(_, e)| e == "counter 4");
        let atexit = lines.iter().position(|(_, e)| e == "atexit");
        assert!(exit < total && total < atexit, "{lines:?}");
        assert_eq!(atexit, Some(lines.len() - 1), "{lines:?}");
    }

    /// Runs `f` on a new thread under a layer writing the Perf stream, keeping the layer
    /// alive after the thread ended (its thread-local destructor writes through it);
    /// returns what `f` returned and the `(file:line, event)` columns of each line.
    fn perf_thread<T: Send + 'static>(
        f: impl FnOnce() -> T + Send + 'static,
    ) -> (T, Vec<(String, String)>) {
        let sink = MemorySink::new();
        let layer = Trace2Layer::builder()
            .with_target(crate::targets::perf(
                tracing_trace2_perf::PerfFormat::new(),
                sink.clone(),
            ))
            .build();
        let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
        let on_thread = dispatch.clone();
        let out = std::thread::spawn(move || tracing::dispatcher::with_default(&on_thread, f))
            .join()
            .unwrap();
        drop(dispatch);
        let columns = sink
            .to_string_lossy()
            .lines()
            .map(|l| {
                let cols: Vec<&str> = l.split('|').map(str::trim).collect();
                let file_line = cols[0].split_once(' ').map_or("", |(_, f)| f);
                (file_line.to_owned(), cols[3].to_owned())
            })
            .collect();
        (out, columns)
    }

    /// A thread the program started itself, ended by the thread-local destructor: its
    /// `thread_exit` names where the thread first traced (its `thread_start`'s call
    /// site), in the Perf stream's file:line column.
    #[test]
    fn an_unannounced_thread_ends_at_its_first_call_site() {
        let (first, columns) = perf_thread(|| {
            let first = line!() + 1;
            tracing::info!(category = "t", key = "first", value = 1);
            tracing::info!(category = "t", key = "second", value = 2);
            first
        });
        let events: Vec<&str> = columns.iter().map(|(_, e)| e.as_str()).collect();
        assert_eq!(
            events,
            ["version", "thread_start", "data", "data", "thread_exit"],
            "{columns:?}"
        );
        let site = format!("thread.rs:{first}");
        for i in [1, 2, 4] {
            assert!(columns[i].0.ends_with(&site), "{site} in {columns:?}");
        }
    }

    /// A thread that announced itself and ended without `finish`: its `thread_exit`
    /// names the announcement.
    #[test]
    fn an_announced_thread_ends_at_its_announcement() {
        let (at, columns) = perf_thread(|| {
            let (_, at) = (announce("named"), line!());
            tracing::info!(category = "t", key = "k", value = 1);
            at
        });
        let events: Vec<&str> = columns.iter().map(|(_, e)| e.as_str()).collect();
        assert_eq!(events, ["version", "thread_start", "data", "thread_exit"]);
        assert!(
            columns[3].0.ends_with(&format!("thread.rs:{at}")),
            "{columns:?}"
        );
    }

    /// `stop_handler`'s lines name where the hook was made (`finish` passed as a function
    /// would name the standard library's caller).
    #[test]
    fn a_stop_handler_names_where_it_was_made() {
        let (stop, made) = (stop_handler(), line!());
        let ((), columns) = perf_thread(move || {
            tracing::info!(category = "t", key = "k", value = 1);
            stop();
        });
        let events: Vec<&str> = columns.iter().map(|(_, e)| e.as_str()).collect();
        assert_eq!(events, ["version", "thread_start", "data", "thread_exit"]);
        assert!(
            columns[3].0.ends_with(&format!("thread.rs:{made}")),
            "{columns:?}"
        );
    }
}
