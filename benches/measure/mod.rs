//! The measuring loop the benches share: criterion runs each configuration once (its
//! report, and a calibration of the time per iteration), then the configurations run
//! in interleaved rounds, so that a change of the machine's load hits all of them alike
//! and ratios can be taken within a round. Kept apart from `support` (workloads and
//! files), which an example outside the benches also includes and which must not
//! depend on criterion.

use std::sync::Mutex;
use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion};

use super::support::median;

/// Samples per benchmark: criterion's minimum, so that a whole run stays short.
pub const SAMPLES: usize = 10;
/// Rounds of the interleaved pass that the tables are made of.
pub const ROUNDS: usize = 15;
/// Time each configuration runs per round.
pub const SLICE: Duration = Duration::from_millis(12);

/// Criterion as both benches configure it (short warm-up and measurement).
pub fn criterion() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(200))
        .measurement_time(Duration::from_millis(600))
        .sample_size(SAMPLES)
        .configure_from_args()
}

/// Runs `sample(iters)` (the time `iters` iterations took) as criterion's benchmark
/// `name`, and returns the median ns per iteration of its measured samples.
pub fn calibrate(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    sample: impl Fn(u64) -> Duration,
) -> Option<f64> {
    let samples = Mutex::new(Vec::new());
    group.bench_function(name, |b| {
        b.iter_custom(|iters| {
            let took = sample(iters);
            samples
                .lock()
                .expect("samples")
                .push(took.as_nanos() as f64 / iters as f64);
            took
        })
    });
    let samples = samples.into_inner().expect("samples");
    // The last SAMPLES calls are the measurement; earlier ones were warm-up.
    median(&samples[samples.len().saturating_sub(SAMPLES)..])
}

/// The interleaved pass over `ran` (name, configuration, calibrated ns per iteration):
/// ROUNDS rounds, each running every configuration for about SLICE. Hands `record` the
/// ns per line of each configuration in each round, in order.
pub fn interleave<T>(
    ran: &[(String, T, f64)],
    lines_per_iter: u64,
    sample: impl Fn(&T, u64) -> Duration,
    mut record: impl FnMut(&str, f64),
) {
    for _ in 0..ROUNDS {
        for (name, config, per_iter) in ran {
            let iters = ((SLICE.as_nanos() as f64 / per_iter.max(1.0)) as u64).max(1);
            let took = sample(config, iters);
            record(
                name,
                took.as_nanos() as f64 / (iters * lines_per_iter) as f64,
            );
        }
    }
}
