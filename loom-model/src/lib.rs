//! The library's clock, compiled against loom's atomics for the model check in
//! `tests/loom_clock.rs` (`RUSTFLAGS="--cfg loom" cargo test --release -p loom-model --test
//! loom_clock`, run by `cargo xtask test`).
//!
//! The modules are baretime's own sources, included by path: `crates/baretime/src/clock.rs`,
//! `coarse.rs` (its 32-bit form under loom, for `tests/loom_coarse.rs`), `wall.rs` (for
//! `tests/loom_wall.rs`: its end decided in 32-bit halves) and what they
//! reach through `crate::` (`counter`, `delay`, `frequency`, `instant`, `scale`, `sync`).
//! Under `--cfg loom`, `sync.rs` takes its atomics and `yield_now` from loom. Keeping this in
//! its own crate keeps loom out of baretime's manifest and so out of its users' lockfiles.
//! The library's lint attributes live in its `lib.rs`, which is not included here.
#![no_std]
// Crate-private items that the library uses only from modules not included here.
#![allow(dead_code, unused_imports)]
// Intra-doc links such as `crate::calibrate::Calibration` resolve only in the library.
#![allow(rustdoc::broken_intra_doc_links)]

#[path = "../../crates/baretime/src/clock/mod.rs"]
pub mod clock;
#[path = "../../crates/baretime/src/coarse.rs"]
pub mod coarse;
#[path = "../../crates/baretime/src/counter.rs"]
pub mod counter;
#[path = "../../crates/baretime/src/delay.rs"]
pub mod delay;
#[path = "../../crates/baretime/src/frequency.rs"]
pub mod frequency;
#[path = "../../crates/baretime/src/instant.rs"]
pub mod instant;
#[path = "../../crates/baretime/src/scale.rs"]
pub mod scale;
#[path = "../../crates/baretime/src/sync.rs"]
mod sync;
#[path = "../../crates/baretime/src/wall.rs"]
pub mod wall;

pub use clock::{Clock, ClockError, ClockHealth};
pub use coarse::CoarseClock;
pub use counter::{Counter, FnCounter, Width};
pub use delay::Delay;
pub use frequency::{Accuracy, Frequency, Source};
pub use instant::{Instant, RawInstant};
pub use scale::Scale;
pub use wall::{WallClock, MAX_SLEW_PPM};
