//! [`Delay`]: a busy-wait delay on a counter that waits *at least* the time asked for.

use core::hint::spin_loop;

use crate::counter::Counter;
use crate::frequency::Frequency;
use crate::scale::Scale;

/// Busy-waits on a [`Counter`] at a known rate.
///
/// Every delay lasts **at least** the requested time at the configured rate: the tick count is
/// rounded up ([`Scale::ns_to_ticks_ceil`]), and one more tick is waited because the first
/// reading may fall anywhere inside a tick. It may last longer (interrupts, preemption, the
/// read itself). Counters narrower than 64 bits are handled: a long wait is split into spans
/// shorter than half the wrap period, so no request up to `u64::MAX` ns overflows or wraps.
///
/// With the `embedded-hal` feature it implements `embedded_hal::delay::DelayNs`.
#[derive(Clone, Copy, Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Delay<C: Counter> {
    counter: C,
    scale: Scale,
}

impl<C: Counter> Delay<C> {
    /// A delay on `counter` running at `frequency`.
    pub const fn new(counter: C, frequency: &Frequency) -> Delay<C> {
        Delay {
            counter,
            scale: Scale::new(frequency),
        }
    }

    /// A delay on `counter` with precomputed constants.
    pub const fn with_scale(counter: C, scale: Scale) -> Delay<C> {
        Delay { counter, scale }
    }

    /// The scale this delay converts with.
    pub const fn scale(&self) -> &Scale {
        &self.scale
    }

    /// Waits at least `ns` nanoseconds.
    pub fn wait_ns(&self, ns: u64) {
        // ⌈ns⌉ in ticks, plus one for the partial first tick.
        self.wait_ticks(self.scale.ns_to_ticks_ceil(ns).saturating_add(1));
    }

    /// Waits until at least `ticks` ticks have elapsed.
    pub fn wait_ticks(&self, ticks: u64) {
        let mask = self.counter.mask();
        // Longest span we can measure without ambiguity on a wrapping counter.
        let span = (mask >> 1).max(1);
        let mut remaining = ticks;
        let mut start = self.counter.ticks() & mask;
        while remaining > 0 {
            let now = self.counter.ticks() & mask;
            let elapsed = now.wrapping_sub(start) & mask;
            if elapsed >= remaining.min(span) {
                remaining = remaining.saturating_sub(elapsed);
                start = now;
            } else {
                spin_loop();
            }
        }
    }
}

#[cfg(feature = "embedded-hal")]
impl<C: Counter> embedded_hal::delay::DelayNs for Delay<C> {
    fn delay_ns(&mut self, ns: u32) {
        self.wait_ns(u64::from(ns));
    }

    fn delay_us(&mut self, us: u32) {
        self.wait_ns(u64::from(us) * 1_000);
    }

    fn delay_ms(&mut self, ms: u32) {
        self.wait_ns(u64::from(ms) * 1_000_000);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counter::FnCounter;
    use core::cell::Cell;

    /// A counter that advances `step` ticks per read and wraps at `bits`.
    fn stepping(step: u64, bits: u32, start: u64) -> (Cell<u64>, u64, u32) {
        (Cell::new(start), step, bits)
    }

    fn run_delay(step: u64, bits: u32, hz: u64, start: u64, ns: u64) -> u64 {
        let (c, step, bits) = stepping(step, bits, start);
        let total = Cell::new(0u64);
        let mask = crate::counter::mask_for_bits(bits);
        let counter = FnCounter::with_bits(
            || {
                let v = c.get();
                c.set(v.wrapping_add(step) & mask);
                total.set(total.get() + step);
                v
            },
            bits,
        );
        let d = Delay::new(counter, &Frequency::user_hz(hz).unwrap());
        d.wait_ns(ns);
        total.get()
    }

    #[test]
    fn waits_at_least_the_request() {
        // 1 MHz, 1 tick per read: 10 µs needs ≥ 10 ticks of counting.
        let ticks = run_delay(1, 64, 1_000_000, 0, 10_000);
        assert!(ticks >= 10, "{ticks}");
        assert!(ticks <= 14, "{ticks}");
    }

    #[test]
    fn zero_is_nearly_free() {
        assert!(run_delay(1, 64, 1_000_000, 0, 0) <= 3);
    }

    #[test]
    fn max_u32_ns_on_a_narrow_wrapping_counter() {
        // A 16-bit counter at 1 MHz wraps every 65 ms; 4.29 s must still be waited in full.
        // 1000 ticks per read keeps the test quick.
        let ticks = run_delay(1_000, 16, 1_000_000, 0xff00, u64::from(u32::MAX));
        let want = u64::from(u32::MAX) / 1_000;
        assert!(ticks >= want, "{ticks} < {want}");
        assert!(ticks <= want + 3_000, "{ticks}");
    }

    #[test]
    fn u64_max_request_does_not_overflow() {
        let s = Scale::new(&Frequency::user_hz(10_000_000_000).unwrap());
        assert_eq!(s.ns_to_ticks_ceil(u64::MAX), u64::MAX);
        // u64::MAX ticks + 1 saturates rather than wrapping to 0.
        assert_eq!(s.ns_to_ticks_ceil(u64::MAX).saturating_add(1), u64::MAX);
    }

    #[cfg(feature = "embedded-hal")]
    #[test]
    fn delay_ns_trait() {
        use embedded_hal::delay::DelayNs;
        let c = Cell::new(0u64);
        // 1000 ticks per read: the 4.3 s request takes 4.3 million reads, not 4.3 billion.
        let counter = FnCounter::new(|| {
            c.set(c.get() + 1_000);
            c.get()
        });
        let mut d = Delay::new(counter, &Frequency::user_hz(1_000_000_000).unwrap());
        d.delay_ns(u32::MAX);
        assert!(c.get() >= u64::from(u32::MAX));
    }
}
