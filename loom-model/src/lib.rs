//! The library's clock, compiled against loom's atomics for the model check in
//! `tests/loom_clock.rs` (`RUSTFLAGS="--cfg loom" cargo test --release -p loom-model --test
//! loom_clock`, run by `cargo xtask test`).
//!
//! The modules are baretime's own sources, included by path: `src/clock.rs` and what it
//! reaches through `crate::` (`counter`, `delay`, `frequency`, `instant`, `scale`, `sync`).
//! Under `--cfg loom`, `sync.rs` takes its atomics and `yield_now` from loom. Keeping this in
//! its own crate keeps loom out of baretime's manifest and so out of its users' lockfiles.
//! The library's lint attributes live in its `lib.rs`, which is not included here.
#![no_std]
// Crate-private items that the library uses only from modules not included here.
#![allow(dead_code, unused_imports)]
// Intra-doc links such as `crate::calibrate::Calibration` resolve only in the library.
#![allow(rustdoc::broken_intra_doc_links)]

#[path = "../../src/clock.rs"]
pub mod clock;
#[path = "../../src/counter.rs"]
pub mod counter;
#[path = "../../src/delay.rs"]
pub mod delay;
#[path = "../../src/frequency.rs"]
pub mod frequency;
#[path = "../../src/instant.rs"]
pub mod instant;
#[path = "../../src/scale.rs"]
pub mod scale;
#[path = "../../src/sync.rs"]
mod sync;

pub use clock::{Clock, ClockError, ClockHealth};
pub use counter::{Counter, FnCounter, Width};
pub use delay::Delay;
pub use frequency::{Accuracy, Frequency, Source};
pub use instant::{Instant, RawInstant};
pub use scale::Scale;
