//! Examples, cross-crate tests and benchmarks of tracing-trace2.
