//! The typed Trace2 calls of [`crate::api`]: they come straight from the api functions
//! (as `wire.rs` values), not through `tracing`: no filter drops them and no other layer
//! sees them. Most become one line; regions, `thread_start`/`thread_exit`,
//! `end_threads` and `atexit` act on the lanes as git does.
//!
//! A floor above `emit` and `thread_end` (the process end ends the other lanes); it uses
//! no other sibling.

use crate::busy;
use crate::clock;
use crate::output::CallbackOutput;
use crate::thread::{self, ThreadState};
use crate::wire::{ApiCall, ApiRegion, Origin};
use tracing_trace2_record::{Callsite, ChildInfo, RegionInfo, TimerInfo, Timestamp, Trace2Event};

use super::Trace2Layer;
use super::emit::with_pending;

/// Stack marker of a region opened by `api::region_enter` (span ids are never 0 or
/// `u64::MAX`).
const API_REGION: u64 = u64::MAX;
/// Stack marker of the region git writes for `thread_start` on the main thread.
const THREAD_ON_MAIN: u64 = 0;

impl Trace2Layer {
    /// A typed call of [`crate::api`], handed over by `api` as a `wire::ApiCall` value.
    pub(crate) fn on_api_call(&self, call: &ApiCall<'_>, callsite: Callsite<'_>) {
        let Some(_busy) = self.busy() else { return };
        let now = clock::now();
        if matches!(call, ApiCall::EndThreads) {
            // From here on only this thread writes: the other threads' lanes end now,
            // and nothing may come on them before `atexit`.
            busy::close(self.key(), &self.inner.closed, true);
            if let Some((lane, _)) = thread::current_lane(now.t_abs_us) {
                self.end_other_lanes(&lane, false, now, callsite);
            }
            return;
        }
        if matches!(call, ApiCall::Atexit { .. }) {
            // `atexit` is the last line: no other thread may write after it, so close
            // first (waiting for threads still inside), end the lanes still announced
            // (when `end_threads` did not); then flush, so that a background writer's
            // report of dropped lines (written by its worker) comes before it.
            self.close();
            if let Some((lane, _)) = thread::current_lane(now.t_abs_us) {
                self.end_other_lanes(&lane, true, now, callsite);
            }
            self.flush();
        }
        let lane = match *call {
            ApiCall::ThreadStart { name } => {
                thread::base_lane(Some(name), now.t_abs_us).map(|lane| (lane, None))
            }
            ApiCall::ThreadExit => thread::base_lane(None, now.t_abs_us).map(|lane| (lane, None)),
            _ => thread::current_lane(now.t_abs_us),
        };
        let Some((lane, _)) = lane else {
            return;
        };
        let mut reset = false;
        with_pending(|lines| {
            let mut t = thread::lock(&lane);
            // The regions open on the line's Trace2 thread (see `on_user_event`).
            let depth = t.depth();
            reset = matches!(call, ApiCall::ThreadExit) && !t.is_main;
            self.api_records(&mut t, call, depth, now, callsite, lines);
            self.write_lines(&t, lines);
        });
        if reset {
            thread::reset();
        }
    }

    fn api_records(
        &self,
        t: &mut ThreadState,
        call: &ApiCall<'_>,
        open: u32,
        now: Timestamp,
        callsite: Callsite<'_>,
        lines: &mut CallbackOutput,
    ) {
        match *call {
            ApiCall::Version { exe } => {
                let record = self.record(t, Trace2Event::Printf { msg: None }, now, callsite, open);
                self.ensure_version(&record, Some(exe));
            }
            ApiCall::RegionEnter(ref region) => {
                self.enter_region(t, API_REGION, region_info(region), now, callsite, lines);
            }
            ApiCall::RegionLeave(ref region) => {
                // As in git, a leave closes the innermost region opened this way.
                self.leave_region(t, API_REGION, region_info(region), now, callsite, lines);
            }
            ApiCall::ThreadStart { name } if t.is_main => {
                // Git turns a thread_start on the main thread into a region.
                let msg = format!("thread-proc on main: {name}");
                let region = RegionInfo {
                    msg: Some(&msg),
                    ..RegionInfo::default()
                };
                self.enter_region(t, THREAD_ON_MAIN, region, now, callsite, lines);
            }
            ApiCall::ThreadStart { name } => {
                // A thread that wrote lines before naming itself ends under its old name.
                if t.announced && self.inner.announce {
                    self.exit_lane(t, now, callsite, lines);
                }
                t.register(name, now.t_abs_us);
                t.announced = true;
                self.inner.lanes.announced(&t.me);
                t.set_start_site(callsite.file, callsite.line);
                let record = self.record(t, Trace2Event::ThreadStart, now, callsite, 0);
                self.format_all(&record, lines);
                if self.inner.announce {
                    t.set_owner(&self.inner);
                }
            }
            ApiCall::ThreadExit if t.is_main => {
                let region = RegionInfo {
                    msg: Some("thread-proc on main"),
                    ..RegionInfo::default()
                };
                self.leave_region(t, THREAD_ON_MAIN, region, now, callsite, lines);
            }
            // A thread that wrote nothing (an idle pool worker whose start hook ran before
            // the subscriber was installed) was never seen: nothing to end.
            ApiCall::ThreadExit if !t.announced && self.inner.announce => {}
            ApiCall::ThreadExit => self.exit_lane(t, now, callsite, lines),
            ApiCall::Atexit { code } => {
                t.stack.clear();
                self.emit(t, Trace2Event::Atexit { code }, now, callsite, 0, lines);
                if !t.is_main {
                    // As in git, `atexit` is the last line of the thread that writes it:
                    // no `thread_exit` for it. Its lane is ended without a line, so
                    // that its OS thread's end writes nothing more and a later layer on
                    // this thread announces it again.
                    self.end_lane_silently(t);
                }
            }
            _ => {
                let Some(event) = plain_event(call, t, open, now) else {
                    return;
                };
                let open = match event {
                    Trace2Event::Timer { .. } | Trace2Event::Counter { .. } => 0,
                    _ => open,
                };
                self.emit(t, event, now, callsite, open, lines);
            }
        }
    }
}

/// The region of an API region call: empty strings are left out of the lines.
fn region_info<'a>(region: &ApiRegion<'a>) -> RegionInfo<'a> {
    RegionInfo {
        repo: region.repo,
        category: Some(region.category).filter(|s| !s.is_empty()),
        label: Some(region.label).filter(|s| !s.is_empty()),
        msg: region.msg,
    }
}

/// The record event of a typed Trace2 call that needs no special handling; `open` is
/// the depth data belongs to.
fn plain_event<'a>(
    call: &ApiCall<'a>,
    t: &ThreadState,
    open: u32,
    now: Timestamp,
) -> Option<Trace2Event<'a>> {
    let optional = |s: &'a str| Some(s).filter(|s| !s.is_empty());
    Some(match *call {
        ApiCall::Start { argv } => Trace2Event::Start { argv },
        ApiCall::CmdName { name, hierarchy } => Trace2Event::CmdName { name, hierarchy },
        ApiCall::DefParam {
            scope,
            param,
            value,
        } => Trace2Event::DefParam {
            scope,
            param,
            value,
        },
        ApiCall::Printf { msg } => Trace2Event::Printf { msg: optional(msg) },
        ApiCall::Error { msg, fmt } => Trace2Event::Error {
            msg: optional(fmt).map(|_| msg),
            fmt: optional(fmt),
        },
        ApiCall::Data {
            category,
            key,
            value,
            repo,
        } => Trace2Event::Data {
            repo,
            category,
            key,
            value,
            nesting: open + 1,
            t_rel_us: t.since_region(open, now.t_abs_us),
        },
        ApiCall::DataJson {
            category,
            key,
            json,
            repo,
        } => Trace2Event::DataJson {
            repo,
            category,
            key,
            json,
            nesting: open + 1,
            t_rel_us: t.since_region(open, now.t_abs_us),
        },
        ApiCall::ChildStart(ref c) => Trace2Event::ChildStart(ChildInfo {
            child_id: c.child_id,
            class: c.class,
            hook_name: optional(c.hook_name),
            cd: optional(c.cd),
            use_shell: c.use_shell,
            is_git: c.is_git,
            argv: c.argv,
        }),
        ApiCall::ChildExit {
            child_id,
            pid,
            code,
            elapsed_us,
        } => Trace2Event::ChildExit {
            child_id,
            pid,
            code,
            elapsed_us,
        },
        ApiCall::ChildReady {
            child_id,
            pid,
            ready,
            elapsed_us,
        } => Trace2Event::ChildReady {
            child_id,
            pid,
            ready,
            elapsed_us,
        },
        ApiCall::Exec { exec_id, exe, argv } => Trace2Event::Exec { exec_id, exe, argv },
        ApiCall::ExecResult { exec_id, code, err } => Trace2Event::ExecResult {
            exec_id,
            code,
            err: optional(err),
        },
        ApiCall::Timer(ref timer) => Trace2Event::Timer {
            per_thread: timer.per_thread,
            timer: TimerInfo {
                category: timer.category,
                name: timer.name,
                intervals: timer.intervals,
                total_ns: timer.total_ns,
                min_ns: timer.min_ns,
                max_ns: timer.max_ns,
            },
        },
        ApiCall::Counter {
            per_thread,
            category,
            name,
            value,
        } => Trace2Event::Counter {
            per_thread,
            category,
            name,
            value,
        },
        ApiCall::Exit { code } => Trace2Event::Exit { code },
        ApiCall::Signal { signo } => Trace2Event::Signal { signo },
        ApiCall::Plain(event) => event,
        ApiCall::Version { .. }
        | ApiCall::RegionEnter(_)
        | ApiCall::RegionLeave(_)
        | ApiCall::ThreadStart { .. }
        | ApiCall::ThreadExit
        | ApiCall::EndThreads
        | ApiCall::Atexit { .. } => return None,
    })
}

/// Hands an API call to the Trace2 layer of the calling thread's current dispatcher
/// (nothing happens when it has none): what `api`'s calls do, and how the background
/// sinks report their failures ([`crate::background::report_failure`], set at `build`).
pub(crate) fn send(call: &ApiCall<'_>, from: Origin<'_>) {
    tracing::dispatcher::get_default(|dispatch| {
        if let Some(layer) = dispatch.downcast_ref::<Trace2Layer>() {
            layer.on_api_call(call, from.callsite());
        }
    });
}

/// A background sink's failure report: an `error` call from where the sink reports it.
pub(super) fn report_sink_failure(
    msg: &str,
    fmt: &str,
    at: &'static std::panic::Location<'static>,
) {
    send(&ApiCall::Error { msg, fmt }, Origin::Caller(at));
}
