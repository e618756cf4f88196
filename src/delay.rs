//! [`Delay`]: a busy-wait delay on a counter that waits *at least* the time asked for.

use core::hint::spin_loop;

use crate::counter::{Counter, Width};
use crate::frequency::Frequency;
use crate::scale::Scale;

/// Busy-waits on a [`Counter`] at a known rate.
///
/// Every delay lasts **at least** the requested time at the configured rate:
///
/// - the tick count is rounded up ([`Scale::ns_to_ticks_ceil`]);
/// - counting starts at the counter's first change, a tick boundary, so a first reading
///   anywhere inside a tick — or inside a step of a counter that advances several ticks at
///   once (Armv8.6 allows a 1 GHz CNTVCT that steps by more than one) — cannot shorten it;
/// - a counter that steps back (a migration to a CPU whose counter lags, a faulty counter)
///   makes no progress: the wait continues from the lower value, the ticks already waited
///   are kept;
/// - counters narrower than 64 bits are handled: the wait is split into spans of a quarter of
///   the wrap period, so no request up to `u64::MAX` ns overflows or wraps.
///
/// It may last longer (interrupts, preemption, the read itself). On a counter that never
/// changes it waits **forever**: a stuck counter gives no way to measure time (check a
/// counter with [`crate::diag::ReadStats`] first if that can happen).
///
/// The rate is fixed when the delay is made: a `Delay` taken from a [`crate::Clock`] does
/// not follow the clock's later recalibrations.
///
/// With the `embedded-hal` feature it implements `embedded_hal::delay::DelayNs`.
///
/// ```
/// use baretime::{Delay, FnCounter, Frequency};
/// use core::cell::Cell;
///
/// // A fake 16-bit counter at 1 MHz that advances 7 ticks per read.
/// let now = Cell::new(0u64);
/// let counter = FnCounter::new(|| { now.set((now.get() + 7) & 0xffff); now.get() }, 16);
/// let delay = Delay::new(counter, Frequency::user_hz(1_000_000).unwrap());
/// delay.wait_ns(100_000); // 100 µs: 100 ticks, across a wrap if need be
/// ```
#[derive(Clone, Copy, Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Delay<C: Counter> {
    counter: C,
    scale: Scale,
}

impl<C: Counter> Delay<C> {
    /// A delay on `counter` running at `frequency`.
    pub const fn new(counter: C, frequency: Frequency) -> Delay<C> {
        Delay {
            counter,
            scale: Scale::new(frequency),
        }
    }

    /// A delay on `counter` with precomputed constants.
    ///
    /// ```
    /// use baretime::{Delay, FnCounter, Frequency, Scale};
    /// use core::cell::Cell;
    ///
    /// let now = Cell::new(0u64);
    /// let counter = FnCounter::new(|| { now.set(now.get() + 1); now.get() }, 64);
    /// // One Scale, computed once (a few u128 divisions), shared by several delays.
    /// let scale = Scale::new(Frequency::user_hz(1_000_000).unwrap());
    /// let delay = Delay::with_scale(&counter, scale);
    /// delay.wait_ticks(10); // at least 10 ticks after the counter's next change
    /// assert!(now.get() >= 11);
    /// assert_eq!(delay.scale().ns_to_ticks_ceil(1_500), 2); // 1.5 µs at 1 MHz, rounded up
    /// ```
    pub const fn with_scale(counter: C, scale: Scale) -> Delay<C> {
        Delay { counter, scale }
    }

    /// The scale this delay converts with.
    pub const fn scale(&self) -> &Scale {
        &self.scale
    }

    /// Waits at least `ns` nanoseconds.
    pub fn wait_ns(&self, ns: u64) {
        self.wait_ticks(self.scale.ns_to_ticks_ceil(ns));
    }

    /// Waits until at least `ticks` ticks have elapsed, counted from the counter's first
    /// change.
    pub fn wait_ticks(&self, ticks: u64) {
        if ticks == 0 {
            return;
        }
        let width = Width::of(&self.counter);
        // Spans of a quarter wrap: progress is taken as soon as a span is reached, so even a
        // reading that comes a further quarter wrap late is told apart from a step back
        // (more than half a wrap forward).
        let span = (width.half() >> 1).max(1);
        let first = width.value(self.counter.ticks());
        let mut start = first;
        // Wait for a tick boundary.
        while start == first {
            spin_loop();
            start = width.value(self.counter.ticks());
        }
        let mut remaining = ticks;
        loop {
            let now = width.value(self.counter.ticks());
            // More than half a wrap forward is a step back (a 1-bit counter, whose half is
            // 0, counts its one step as progress).
            let forward = width.delta(start, now);
            match (forward <= width.half().max(1)).then_some(forward) {
                // A step back: no progress; continue from the lower value.
                None => start = now,
                Some(elapsed) if elapsed >= remaining.min(span) => {
                    remaining = remaining.saturating_sub(elapsed);
                    if remaining == 0 {
                        return;
                    }
                    start = now;
                }
                Some(_) => spin_loop(),
            }
        }
    }
}

/// Drivers written against embedded-hal take a `Delay` as their delay provider (feature
/// `embedded-hal`; every method waits at least the time asked, as [`Delay::wait_ns`] does).
///
/// ```
/// # #[cfg(feature = "embedded-hal")] {
/// use baretime::{Delay, FnCounter, Frequency};
/// use embedded_hal::delay::DelayNs;
/// use core::cell::Cell;
///
/// /// A driver that needs a 50 µs reset pulse, generic over the delay provider.
/// fn reset_pulse(delay: &mut impl DelayNs) {
///     // drive the pin low ...
///     delay.delay_us(50);
///     // ... and high again
/// }
///
/// let now = Cell::new(0u64);
/// let counter = FnCounter::new(|| { now.set(now.get() + 3); now.get() }, 32);
/// let mut delay = Delay::new(counter, Frequency::user_hz(48_000_000).unwrap());
/// reset_pulse(&mut delay);
/// assert!(now.get() >= 50 * 48); // 2400 ticks at 48 MHz, at least
/// # }
/// ```
#[cfg(feature = "embedded-hal")]
impl<C: Counter> embedded_hal::delay::DelayNs for Delay<C> {
    fn delay_ns(&mut self, ns: u32) {
        self.wait_ns(u64::from(ns));
    }

    fn delay_us(&mut self, us: u32) {
        self.wait_ns(u64::from(us).saturating_mul(1_000));
    }

    fn delay_ms(&mut self, ms: u32) {
        self.wait_ns(u64::from(ms).saturating_mul(1_000_000));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counter::FnCounter;
    use core::cell::Cell;

    /// Runs `wait_ns(ns)` on a `bits`-bit counter at `hz` that starts at `start` and moves
    /// by `script(read_index)` ticks (wrapping) at each read; returns the true ticks that
    /// passed (the sum of forward moves) and the number of reads.
    fn run(bits: u32, hz: u64, start: u64, ns: u64, script: impl Fn(u64) -> i64) -> (u64, u64) {
        let width = Width::new(bits);
        let value = Cell::new(start);
        let reads = Cell::new(0u64);
        let forward = Cell::new(0u64);
        let counter = FnCounter::new(
            || {
                let v = value.get();
                let step = script(reads.get());
                reads.set(reads.get() + 1);
                if step >= 0 {
                    forward.set(forward.get() + step as u64);
                    value.set(width.add(v, step as u64));
                } else {
                    value.set(width.value(v.wrapping_sub(step.unsigned_abs())));
                }
                v
            },
            bits,
        );
        Delay::new(counter, Frequency::user_hz(hz).unwrap()).wait_ns(ns);
        (forward.get(), reads.get())
    }

    #[test]
    fn waits_at_least_the_request() {
        // 1 MHz, 1 tick per read: 10 µs needs ≥ 10 ticks of counting.
        let (ticks, _) = run(64, 1_000_000, 0, 10_000, |_| 1);
        assert!(ticks >= 10, "{ticks}");
        assert!(ticks <= 14, "{ticks}");
    }

    #[test]
    fn zero_is_free() {
        assert_eq!(run(64, 1_000_000, 0, 0, |_| 1), (0, 0));
    }

    #[test]
    fn max_u32_ns_on_a_narrow_wrapping_counter() {
        // A 16-bit counter at 1 MHz wraps every 65 ms; 4.29 s must still be waited in full.
        // 1000 ticks per read keeps the test quick.
        let (ticks, _) = run(16, 1_000_000, 0xff00, u64::from(u32::MAX), |_| 1_000);
        let want = u64::from(u32::MAX) / 1_000;
        assert!(ticks >= want, "{ticks} < {want}");
        assert!(ticks <= want + 3_000, "{ticks}");
    }

    /// A counter that steps by 32 ticks (Armv8.6's 1 GHz CNTVCT may): the first reading can
    /// be just before a step, so the wait starts at the first change.
    #[test]
    fn coarse_steps_never_shorten_the_wait() {
        // Steps of 32 ticks every 32 reads: the first read is 1 read before a step.
        let (ticks, _) = run(
            64,
            1_000_000_000,
            0,
            100,
            |i| if i % 32 == 0 { 32 } else { 0 },
        );
        // The counter's own value moved ≥ 100 ticks after its first change.
        assert!(ticks >= 100 + 32, "{ticks}");
    }

    /// Hole 5: a counter one tick behind on the second read used to end the wait at once
    /// (the step back read as an elapsed ≈ the whole wrap).
    #[test]
    fn a_step_back_is_no_progress() {
        // 64-bit at 1 GHz: 1 000 000 then 999 999 then onwards; wait 10 µs = 10 000 ticks.
        let (ticks, reads) = run(64, 1_000_000_000, 1_000_000, 10_000, |i| match i {
            0 => -1,
            _ => 100,
        });
        assert!(ticks >= 10_000, "{ticks} ticks, {reads} reads");
        // 16-bit at 1 MHz, 1000 then 999: 40 ms needs 40 000 ticks.
        let (ticks, reads) = run(16, 1_000_000, 1000, 40_000_000, |i| match i {
            0 => -1,
            _ => 10,
        });
        assert!(ticks >= 40_000, "{ticks} ticks, {reads} reads");
        // Steps back every few reads never end it early either.
        let (ticks, _) = run(16, 1_000_000, 0, 30_000_000, |i| {
            if i % 3 == 2 {
                -5
            } else {
                20
            }
        });
        assert!(ticks >= 30_000, "{ticks}");
    }

    #[test]
    fn u64_max_request_does_not_overflow() {
        let s = Scale::new(Frequency::user_hz(10_000_000_000).unwrap());
        assert_eq!(s.ns_to_ticks_ceil(u64::MAX), u64::MAX);
    }

    #[cfg(feature = "embedded-hal")]
    #[test]
    fn delay_ns_trait() {
        use embedded_hal::delay::DelayNs;
        let c = Cell::new(0u64);
        // 1000 ticks per read: the 4.3 s request takes 4.3 million reads, not 4.3 billion.
        let counter = FnCounter::new(
            || {
                c.set(c.get() + 1_000);
                c.get()
            },
            64,
        );
        let mut d = Delay::new(counter, Frequency::user_hz(1_000_000_000).unwrap());
        d.delay_ns(u32::MAX);
        assert!(c.get() >= u64::from(u32::MAX));
    }
}
