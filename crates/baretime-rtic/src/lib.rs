//! An [RTIC 2](https://rtic.rs) monotonic on any [`baretime::Clock`] and any compare timer
//! ([`baretime::Alarm`]): `Mono::now()`, `Mono::delay(..).await`, `Mono::delay_until`,
//! `Mono::timeout_after` on the CPU's own counter, with the clock's honesty.
//!
//! [`monotonic!`] is the whole API, as rtic-monotonics' `systick_monotonic!` is for SysTick:
//! it declares the type `Mono`, its `static` state and its
//! [rtic-time](https://docs.rs/rtic-time/2) timer queue, whose backend
//! (`rtic_time::timer_queue::TimerQueueBackend`) reads the clock and arms the alarm. Start the
//! clock, then `Mono::start(alarm)`; acknowledge the alarm's interrupt and call
//! `Mono::on_interrupt()` from its handler.
//!
//! # Use
//!
//! `Cargo.toml` — rtic-time 2 for the `Monotonic` trait (`Mono::delay` is its method) and
//! fugit 0.3 for durations (`100.millis()`), the versions this crate implements them for:
//!
//! ```toml
//! [dependencies]
//! baretime = "0.1"
//! baretime-rtic = "0.1"
//! rtic = { version = "2", features = ["thumbv7-backend"] }
//! rtic-time = "2"
//! fugit = "0.3"
//! ```
//!
//! The monotonic, with stand-ins for the hardware (a counter read and a compare timer):
//!
//! ```no_run
//! use baretime::{Alarm, Clock, FnCounter, Frequency};
//! use fugit::ExtU64; // `100.millis()`
//! use rtic_time::Monotonic; // `Mono::now()`, `Mono::delay()`
//!
//! fn read_counter() -> u64 { 0 }
//! struct MyAlarm;
//! impl Alarm for MyAlarm {
//!     fn arm(&self, _ticks: u64) { /* write the compare register, unmask its interrupt */ }
//!     fn disarm(&self) { /* mask it */ }
//! }
//!
//! type Counter = FnCounter<fn() -> u64>;
//! static CLOCK: Clock<Counter> = Clock::uninit(FnCounter::new(read_counter as fn() -> u64, 64));
//!
//! // `Mono`, on `CLOCK` and a `MyAlarm`, in ticks of 1 ns (a fourth argument sets the rate).
//! baretime_rtic::monotonic!(Mono, &CLOCK, MyAlarm);
//!
//! // In `init`: start the clock, then the monotonic.
//! fn init() {
//!     CLOCK.start(Frequency::exact_hz(1_000_000_000).unwrap()).unwrap();
//!     Mono::start(MyAlarm);
//! }
//!
//! // The alarm's interrupt (an RTIC hardware task bound to it, or a plain handler):
//! fn alarm_interrupt() {
//!     // (acknowledge the timer's interrupt first)
//!     Mono::on_interrupt();
//! }
//!
//! // Any task:
//! async fn blink() {
//!     let start = Mono::now();
//!     Mono::delay(100.millis()).await;
//!     assert!(Mono::now() - start >= 100u64.millis::<1, 1_000_000_000>());
//! }
//! ```
//!
//! And the app (the `rtic-m4` scenario in the repository's `firmware/src/rtic_app.rs` runs
//! this shape under QEMU on an MPS2 AN386, a CMSDK timer as the alarm):
//!
//! ```ignore
//! baretime_rtic::monotonic!(Mono, &CLOCK, Timer0Alarm);
//!
//! #[rtic::app(device = crate::pac, peripherals = false, dispatchers = [I2S])]
//! mod app {
//!     use super::*;
//!
//!     #[shared] struct Shared {}
//!     #[local] struct Local {}
//!
//!     #[init]
//!     fn init(_cx: init::Context) -> (Shared, Local) {
//!         board::start_timers_counter(); // the clock's counter
//!         CLOCK.start(Frequency::exact_hz(25_000_000).unwrap()).unwrap();
//!         Mono::start(Timer0Alarm);
//!         sleeper::spawn().ok();
//!         (Shared {}, Local {})
//!     }
//!
//!     // The alarm's interrupt, at a priority above the tasks that wait.
//!     #[task(binds = TIMER0, priority = 2)]
//!     fn alarm(_cx: alarm::Context) {
//!         Timer0Alarm::clear();
//!         Mono::on_interrupt();
//!     }
//!
//!     #[task(priority = 1)]
//!     async fn sleeper(_cx: sleeper::Context) {
//!         loop {
//!             let until = Mono::now() + 10.millis();
//!             Mono::delay_until(until).await;
//!             assert!(Mono::now() >= until);
//!         }
//!     }
//! }
//! ```
//!
//! # What it promises
//!
//! - **Never early.** `Mono::now()` is [`Clock::now`] in ticks, rounded down, and rtic-time's
//!   queue wakes a task only once `Mono::now()` has reached its instant: after
//!   `Mono::delay_until(t).await`, `Mono::now() >= t`. The alarm's word is never taken: an
//!   alarm that fires early — armed before a recalibration that made its tick come sooner,
//!   a rebase, a one-shot timer's rounding — wakes no one, and the queue arms it again at
//!   the tick computed afresh.
//! - **Not late by more than the hardware.** The alarm is armed at the first counter tick at
//!   which the clock reads the earliest waiter's instant (rounded up to a nanosecond,
//!   [`Clock::deadline`]); a deadline further off than half of [`Clock::update_interval`] is
//!   armed at that point and re-armed from there.
//! - **No clock arithmetic with interrupts off.** The tick to arm is computed before the
//!   critical section in which the alarm is armed; interrupts are off only for the queue's
//!   bookkeeping (rtic-time's: it reads `Mono::now()` for each waiter it pops) and the alarm's
//!   own register writes.
//! - **No lost wake.** A task that queues an earlier instant arms the alarm at the counter's
//!   current value (its interrupt comes at once), and an arming by the interrupt in progress
//!   cannot undo that (the backend notes the pend and repeats it).
//!
//! # What stays yours
//!
//! - **Starting the clock**, before `Mono::start` (or call `Mono::rearm()` after the start).
//!   A wait before `Mono::start` panics in rtic-time.
//! - **A narrow counter's cadence.** A counter narrower than 64 bits needs [`Clock::update`]
//!   at least once per [`Clock::update_interval`], as without RTIC.
//! - **Re-arming after your own write.** After [`Clock::recalibrate`] or [`Clock::rebase`],
//!   call `Mono::rearm()`: an early tick is caught at the wake, but a late one (the new rate
//!   slower) would wake the tasks late by what the write changed.
//! - **The interrupt**: its vector, priority and acknowledgement. Give it a priority above
//!   the tasks that wait (RTIC's hardware tasks make that easy); the timer queue's wakers
//!   pend the tasks' dispatchers.
//!
//! The alarm is any [`Alarm`]: one that fires at once for a tick already passed (its
//! contract), which this crate relies on to pend the interrupt. RTIC runs on one core, and so
//! does this monotonic: `Mono::now()` keeps no high-water mark across CPUs.
//!
//! # Tick rates
//!
//! The default tick is a nanosecond: `Instant` is `fugit::Instant<u64, 1, 1_000_000_000>`,
//! 584 years before it wraps, and `now()` needs no conversion. A fourth argument sets another
//! rate, `u32` ticks a second (`1_000_000` for code written for microsecond monotonics); the
//! conversions round so that a tick is never reached early (`now` down, deadlines up). rtic-time
//! compares instants modulo 2⁶⁴ (half the range ahead counts as passed): at any rate, waits of
//! centuries are not a use case.
#![no_std]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]
#![cfg_attr(
    not(test),
    deny(
        clippy::arithmetic_side_effects,
        clippy::indexing_slicing,
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::float_arithmetic
    )
)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod backend;
mod macros;
mod ticks;

#[cfg(doc)]
use baretime::{Alarm, Clock};

/// What [`monotonic!`] expands to uses; not part of the API.
#[doc(hidden)]
pub mod __private {
    pub use crate::backend::State;
    pub use fugit;
    pub use rtic_time;
}
