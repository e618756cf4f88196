//! baretime's cross-crate tests, benchmarks and host examples live in `tests/`, `benches/` and
//! `examples/`; this library only carries the workspace README's code examples as doc tests.
#![doc = include_str!("../../README.md")]
