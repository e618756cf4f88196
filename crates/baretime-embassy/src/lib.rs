//! An [embassy-time](https://docs.rs/embassy-time) driver on any [`baretime::Clock`] and any
//! compare timer ([`baretime::Alarm`]): `embassy_time::Timer::after(..).await`,
//! `embassy_time::Instant::now()` and `embassy_time::Delay` (with embedded-hal-async's
//! `DelayNs`) on the CPU's own counter, with the clock's honesty.
//!
//! [`ClockDriver`] is the whole API. Give it a `static` [`Clock`] and an alarm (baretime-x86's
//! local APIC timer, baretime-aarch64's EL1 virtual timer, or your own timer behind
//! [`Alarm`]), register it with [`embassy_time_driver::time_driver_impl!`], and call
//! [`ClockDriver::on_alarm`] from the alarm's interrupt handler (an alarm that only exists
//! after probing the hardware goes in later: [`ClockDriver::without_alarm`], then
//! [`ClockDriver::set_alarm`]):
//!
//! ```no_run
//! use baretime::{Alarm, Clock, FnCounter, Frequency};
//! use baretime_embassy::ClockDriver;
//!
//! // The counter and the compare timer: here stand-ins for the hardware's.
//! fn read_counter() -> u64 { 0 }
//! struct MyAlarm;
//! impl Alarm for MyAlarm {
//!     fn arm(&self, _ticks: u64) { /* write the compare register, unmask its interrupt */ }
//!     fn disarm(&self) { /* mask it */ }
//! }
//!
//! type Counter = FnCounter<fn() -> u64>;
//! // The driver re-arms after every write that moves its deadlines, whoever writes.
//! static CLOCK: Clock<Counter> =
//!     Clock::uninit(FnCounter::new(read_counter as fn() -> u64, 64)).on_write(rearm);
//! fn rearm() {
//!     DRIVER.on_alarm();
//! }
//!
//! embassy_time_driver::time_driver_impl!(
//!     static DRIVER: ClockDriver<Counter, MyAlarm> = ClockDriver::new(&CLOCK, MyAlarm)
//! );
//!
//! // The alarm's interrupt handler:
//! fn alarm_interrupt() {
//!     // (clear the timer's interrupt flag first)
//!     DRIVER.on_alarm();
//! }
//!
//! // At boot, before the executor runs:
//! CLOCK.start(Frequency::exact_hz(1_000_000_000).unwrap()).unwrap();
//! DRIVER.on_alarm(); // arms for any timer scheduled before the start
//! ```
//!
//! # What it promises
//!
//! - **Never early** (with a queue large enough: see below). embassy's `Instant::now()` is the clock's [`Clock::now`] in embassy
//!   ticks ([`embassy_time_driver::TICK_HZ`], rounded down), and a timer for tick `t` is woken
//!   only once the clock reads at or past `t` (`t` in nanoseconds, rounded up). The alarm's
//!   word is never taken: each interrupt reads the clock, so an alarm that fires early —
//!   armed before a recalibration that made its tick come sooner, a rebase, a one-shot timer's
//!   rounding — wakes no one and re-arms at the tick computed afresh ([`Clock::deadline`], as
//!   [`Clock::check`] would).
//! - **Not late by more than the hardware.** The alarm is armed at the first counter tick at
//!   which the clock reads the earliest deadline ([`Clock::deadline`]); on a write between
//!   arming and the wake the check re-arms at the new timeline's tick. A deadline further off
//!   than half of [`Clock::update_interval`] is armed at that point and re-armed from there.
//! - **embassy's clock never goes back.** `Instant::now()` is [`Clock::now`] in ticks, and
//!   where the target has 64-bit atomics the driver also keeps the latest tick it handed out
//!   (one load, and a `fetch_max` when the tick has moved on): `Clock::now` may read up to
//!   [`baretime::LAG_NS`] earlier on a CPU whose counter lags another's, and embassy's
//!   `Instant::now()` must not. Targets without 64-bit atomics (Cortex-M, 32-bit RISC-V) are
//!   single-core: no counter lags there.
//! - **Readers take no lock.** `Instant::now()` is lock-free, callable from any interrupt.
//! - **Interrupts stay on for the arithmetic.** The timer queue is guarded by the program's
//!   [critical-section](https://docs.rs/critical-section) implementation (on one core,
//!   interrupts off), and only the queue is: [`Clock::now`], [`Clock::deadline`] and every
//!   tick↔nanosecond conversion run outside it. `schedule_wake` (a task registering a timer)
//!   takes it once to queue the timer — no walk of the queue, no clock read — and, only for a
//!   timer earlier than every other, once more to arm the alarm with the tick computed in
//!   between. [`ClockDriver::on_alarm`] takes it once to wake the due timers (the queue's walk)
//!   and once to arm. A computation overtaken meanwhile (an interrupt that registered an
//!   earlier timer, or serviced the queue) is dropped, not armed: the newest one is armed by
//!   whoever made it. What a section holds, in instructions on the Cortex-M4 of
//!   `cargo xtask qemu` (MPS2-AN386): the driver's own share — its bookkeeping and the
//!   alarm's `arm` — is what `cost-m4` measures with 5 timers queued, at most 200 in an
//!   `on_alarm` and 120 in a `schedule_wake` (in steps of 40); embassy's queue adds 19 per
//!   queued timer to an `on_alarm` that walks it (its `next_expiration` looks at every timer,
//!   due or not) and about 45 per timer it wakes (embassy-executor's wake), so with 14 timers
//!   queued (`timers-m4`) the longest section is 396 instructions, 12.7 µs at 32 ns each (it
//!   was 6 600 with the clock arithmetic inside). `schedule_wake` never walks. On several cores the
//!   critical section is the usual spin lock with interrupts off: an alarm interrupt on one
//!   core may wait, briefly, for another core's queue bookkeeping, never for code it
//!   interrupted.
//!
//! # Where a wake's time goes
//!
//! From a timer's instant to its task running again, on that Cortex-M4 at 32 ns an
//! instruction (`timers-m4`, 14 timers queued, the median wake: 31.7 µs): about 1 µs until
//! the alarm's handler starts (the board's timer and the interrupt's entry), 25.8 µs in
//! [`ClockDriver::on_alarm`], 5 µs for the rest of the handler, its exit and
//! embassy-executor's poll of the task. `on_alarm` is a clock read (1.3 µs with its conversion to embassy ticks), embassy's
//! walk of its queue that wakes the task (10.6 µs: the part that grows with the number of
//! timers), and the next arming (about 10 µs, mostly [`Clock::deadline`]), with two short
//! critical sections between. The task waits for the whole handler, the next arming
//! included: its poll runs in thread mode, after every interrupt.
//!
//! # What stays yours
//!
//! - **Starting the clock.** Until [`Clock::start`], `now()` reads 0 and nothing is armed:
//!   call [`ClockDriver::on_alarm`] once after the start to arm for timers scheduled before it.
//! - **A narrow counter's cadence.** A counter narrower than 64 bits needs [`Clock::update`]
//!   at least once per [`Clock::update_interval`], as without the driver; the driver does not
//!   write the clock. An update keeps the armed tick right to within a nanosecond: it carries
//!   the fraction of a nanosecond the old timeline's readers dropped, so the instant can come
//!   up to 1 ns sooner and the wake that much (and a tick) late. Call
//!   [`ClockDriver::on_alarm`] after `update` too where that matters.
//! - **Re-arming after a write.** Give the clock [`Clock::on_write`] with a function that
//!   calls [`ClockDriver::on_alarm`] (above): it runs after every write that can move a
//!   deadline, whoever writes. Without it, after [`Clock::recalibrate`] or [`Clock::rebase`],
//!   call [`ClockDriver::on_alarm`]: the armed tick was computed on the old timeline, and
//!   while an early tick is caught at the wake, a late one (the new rate slower) would wake
//!   the timers late by what the write changed.
//! - **The interrupt**: its vector, its controller, its priority, acknowledging it.
//!
//! # The queue
//!
//! Timers live in [embassy-time-queue-utils](https://docs.rs/embassy-time-queue-utils)'s
//! queue: embassy-executor's integrated queue by default, or a fixed-capacity generic one when
//! the program enables a `generic-queue-*` feature of that crate (needed when timers are
//! awaited outside embassy-executor). A full generic queue makes room by waking a timer at
//! once: embassy's `Timer` checks the time when polled and registers again, so its task does
//! not return early, but a waker of your own sees the wake before its tick. Size the queue
//! for every timer that can be pending at once.
//!
//! Wakers run inside the critical section, as the queue calls them. One that registers a
//! timer from inside `wake()` (polling its task at once) is kept aside and queued when the
//! service ends — up to four at a time; past that its task is woken to register again (a
//! spurious wake, which embassy's `Timer` absorbs). embassy-executor's wakers only mark the
//! task ready, and never do either.
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

mod driver;
mod ticks;

#[cfg(doc)]
use baretime::{Alarm, Clock};

pub use driver::ClockDriver;
