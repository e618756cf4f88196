//! The report lives in `examples/report.rs`: `cargo run --release --example report`.
#![no_std]
