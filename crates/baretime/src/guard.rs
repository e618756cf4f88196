//! An opt-in guard that makes a [`Clock`] monotonic across CPUs whose counters disagree.
//!
//! A [`Clock`] never goes back on one CPU, and across CPUs it is as monotonic as the counter
//! is synchronised: with counters that warp (a CPU whose TSC is 100 µs behind the others,
//! quanta#111's CPU 0 1.6 s off), a time read on one CPU can be earlier than a time already
//! returned on another. [`MonotonicClock`] wraps a `Clock` and keeps one shared high-water
//! mark: each [`MonotonicClock::now`] returns the later of the clock's time and the latest
//! time any CPU has been given, and raises the mark to it.
//!
//! # The guarantee
//!
//! The mark is a single atomic `u64` that only grows, updated by compare-and-swap. All
//! read-modify-writes of one atomic are in one total order, each reading the value the one
//! before it wrote; so if a `now()` finished before another began (its update is earlier in
//! that order, whichever CPUs they ran on), the second reads a mark at least the first's
//! result and returns at least that. That holds with relaxed ordering: it needs only the
//! coherence of one location, not ordering against other memory.
//!
//! What it does not do: it hides a warp, it does not remove it. A CPU that is behind sees
//! time stand still (returns the mark) until its own counter catches up; durations measured
//! on it across that stretch are short by up to the warp. Fix the counters where that is
//! possible (TSC_ADJUST on x86: baretime-x86's `TscAdjust`), find the warp with
//! baretime-diag's `WarpCheck`, and use the guard where neither is an option.

use core::time::Duration;

use crate::sync::target::AtomicU64;
use crate::sync::Ordering;
use crate::{Clock, Counter, Instant};

/// A [`Clock`] that never returns a time earlier than one it has already returned on any CPU,
/// for counters that warp between CPUs. A separate type, so that the plain [`Clock::now`]
/// pays nothing for it.
///
/// # When to use it
///
/// When timestamps from different CPUs must be ordered (a log merged across CPUs, a
/// deadline set on one CPU and checked on another, a time handed out to threads that
/// migrate) and the counter is not known to be synchronised: the warp check
/// (baretime-diag's `WarpReport::verdict`) says `warp` or `inconclusive`, or the platform
/// has no invariant, synchronised TSC. Where the warp check says `consistent` the plain
/// clock is enough, to within the handover time the check resolves.
///
/// # What it costs
///
/// One load of the shared mark per read, and a compare-and-swap when the time read is past
/// it, which is nearly every read since time moves on: the cache line holding the mark then
/// moves to the reading CPU. On one CPU that is an uncontended atomic (a few ns); with
/// several CPUs reading at once each read may wait for the line to come back from another
/// CPU, and the cost grows with the readers. Measured with `cargo bench --bench guard_cost`
/// (ordered TSC reads, this crate's `Clock::now`, every thread reading in a tight loop) on a
/// 2-vCPU KVM guest of an AMD EPYC (family 25 model 1, Zen 3):
///
/// | threads reading | `Clock::now` | `MonotonicClock::now` | ratio |
/// | --- | --- | --- | --- |
/// | 1 | 27–30 ns | 27–31 ns | 1.0–1.08× |
/// | 2 (all CPUs), both in a tight loop | 27–30 ns | 71–121 ns | 2.5–4.2× |
///
/// (Medians over chunks of 20 000 calls; with two threads only chunks during which both
/// threads ran count. Six runs on two days: three with other jobs keeping the machine at a
/// load of about 5 gave 2.5–3.1×, three on a quiet machine 3.8–4.2× (likely because the two
/// threads then run side by side more of the time and contend for the mark's line more).
/// The fastest chunks of the guard took 44–80 ns per call, 1.7–3.1×. The plain clock's
/// reads share nothing that is written often, so they do not slow each other down.)
///
/// A tight loop on every CPU is the worst case; readers that do work between reads contend
/// less.
///
/// ```
/// use baretime::{Clock, Counter, Frequency, MonotonicClock};
/// # use core::sync::atomic::{AtomicU64, Ordering};
/// # static REGISTER: AtomicU64 = AtomicU64::new(0);
///
/// /// Each CPU's 64-bit counter (baretime-x86's `Tsc`, say), which may disagree across CPUs.
/// struct Cycles;
/// impl Counter for Cycles {
///     fn ticks(&self) -> u64 {
///         REGISTER.fetch_add(100, Ordering::Relaxed) // read this CPU's counter here
///     }
///     fn bits(&self) -> u32 {
///         64
///     }
/// }
///
/// static CLOCK: Clock<Cycles> = Clock::uninit(Cycles);
/// static GUARDED: MonotonicClock<'static, Cycles> = MonotonicClock::new(&CLOCK);
///
/// CLOCK.start(Frequency::nominal_hz(2_400_000_000, 100_000).unwrap()).unwrap();
/// let a = GUARDED.now();
/// // On any CPU, a read that starts after this one finished returns no less.
/// assert!(GUARDED.now() >= a);
/// ```
pub struct MonotonicClock<'a, C: Counter> {
    clock: &'a Clock<C>,
    /// The latest time returned, ns since the clock's epoch.
    high_water_ns: AtomicU64,
}

impl<'a, C: Counter> MonotonicClock<'a, C> {
    /// A guard on `clock` (`const`: usable in a `static` next to a `static` clock).
    pub const fn new(clock: &'a Clock<C>) -> MonotonicClock<'a, C> {
        MonotonicClock {
            clock,
            high_water_ns: AtomicU64::new(0),
        }
    }

    /// The clock's time, or the latest time returned on any CPU if that is later. Lock-free:
    /// it retries only when another CPU raised the mark in between, and then only while
    /// that CPU's time is still below its own.
    #[inline]
    pub fn now(&self) -> Instant {
        let t = self.clock.now().as_nanos();
        let mut mark = self.high_water_ns.load(Ordering::Relaxed);
        loop {
            if t <= mark {
                return Instant::from_nanos(mark);
            }
            match self.high_water_ns.compare_exchange_weak(
                mark,
                t,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Instant::from_nanos(t),
                Err(now) => mark = now,
            }
        }
    }

    /// Time since `earlier` (zero if `earlier` is later).
    pub fn elapsed(&self, earlier: Instant) -> Duration {
        self.now().saturating_duration_since(earlier)
    }

    /// The latest time returned so far (the epoch before the first read).
    pub fn high_water(&self) -> Instant {
        Instant::from_nanos(self.high_water_ns.load(Ordering::Relaxed))
    }

    /// The clock underneath (its `now()` is not guarded).
    pub const fn clock(&self) -> &'a Clock<C> {
        self.clock
    }
}

impl<C: Counter + core::fmt::Debug> core::fmt::Debug for MonotonicClock<'_, C> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("MonotonicClock")
            .field("clock", self.clock)
            .field("high_water_ns", &self.high_water_ns.load(Ordering::Relaxed))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Accuracy, FnCounter, Frequency, Source};
    use core::cell::Cell;
    use core::sync::atomic::{AtomicU32, AtomicU64 as StdU64, Ordering};

    std::thread_local! {
        /// This thread's counter offset, in ticks behind the shared time.
        static BEHIND: Cell<u64> = const { Cell::new(0) };
    }

    /// 100 µs at 1 GHz.
    const WARP_TICKS: u64 = 100_000;
    const READS: u32 = 20_000;

    /// Two threads read `now` — one on a "CPU" whose counter is [`WARP_TICKS`] behind — and
    /// check cross-thread order through a shared atomic: a read that began after another
    /// finished must not return less. Each keeps reading until both have made [`READS`], so
    /// their reads overlap whatever the scheduler does. Returns the inversions seen.
    fn inversions(now: &(dyn Fn() -> u64 + Sync)) -> u32 {
        let floor = StdU64::new(0);
        let inversions = AtomicU32::new(0);
        let done = AtomicU32::new(0);
        std::thread::scope(|s| {
            for behind in [0, WARP_TICKS] {
                let (floor, inversions, done) = (&floor, &inversions, &done);
                s.spawn(move || {
                    BEHIND.with(|b| b.set(behind));
                    let mut n = 0u32;
                    while n < READS || done.load(Ordering::Acquire) < 2 {
                        // The latest time any read that has finished returned.
                        let before = floor.load(Ordering::Acquire);
                        let t = now();
                        if t < before {
                            inversions.fetch_add(1, Ordering::Relaxed);
                        }
                        floor.fetch_max(t, Ordering::AcqRel);
                        n += 1;
                        if n == READS {
                            done.fetch_add(1, Ordering::AcqRel);
                        }
                        if n % 64 == 0 {
                            std::thread::yield_now();
                        }
                    }
                });
            }
        });
        inversions.load(Ordering::Relaxed)
    }

    /// A clock at 1 GHz on a shared time that moves one tick per read, minus the reading
    /// thread's offset; its epoch is well before both threads' readings.
    fn warped_clock(time: &StdU64) -> Clock<FnCounter<impl Fn() -> u64 + Sync + '_>> {
        let counter = FnCounter::new(
            move || time.fetch_add(1, Ordering::Relaxed) - BEHIND.with(Cell::get),
            64,
        );
        let ghz = Frequency::from_hz(1_000_000_000, Source::User, Accuracy::Exact).unwrap();
        let clock = Clock::new(counter, ghz);
        time.fetch_add(1_000_000_000, Ordering::Relaxed); // one second on
        clock
    }

    #[test]
    fn without_the_guard_a_warped_cpu_goes_back() {
        let time = StdU64::new(1 << 40);
        let clock = warped_clock(&time);
        let n = inversions(&|| clock.now().as_nanos());
        assert!(n > 0, "the warp must show without the guard");
    }

    #[test]
    fn with_the_guard_no_read_goes_back() {
        let time = StdU64::new(1 << 40);
        let clock = warped_clock(&time);
        let guarded = MonotonicClock::new(&clock);
        assert_eq!(inversions(&|| guarded.now().as_nanos()), 0);
        // A read on the CPU behind returns the mark, no earlier than its own clock's time
        // (which itself stands at the clock's own high-water mark, as the CPU lags by more
        // than `LAG_NS`): time stands still there rather than going back.
        BEHIND.with(|b| b.set(WARP_TICKS));
        let plain = clock.now();
        let g = guarded.now();
        assert!(g >= plain, "{g:?} {plain:?}");
        assert_eq!(g, guarded.high_water());
    }

    #[test]
    fn on_a_synchronised_counter_it_changes_nothing() {
        let time = StdU64::new(1 << 40);
        let counter = FnCounter::new(|| time.fetch_add(10, Ordering::Relaxed), 64);
        let ghz = Frequency::from_hz(1_000_000_000, Source::User, Accuracy::Exact).unwrap();
        let clock = Clock::new(counter, ghz);
        let guarded = MonotonicClock::new(&clock);
        assert_eq!(guarded.high_water(), Instant::ZERO);
        let mut last = Instant::ZERO;
        for _ in 0..1000 {
            let t = guarded.now();
            assert!(t > last); // the counter moves 10 ns per read: strictly later each time
            last = t;
        }
        assert_eq!(guarded.high_water(), last);
        assert_eq!(guarded.clock().now().as_nanos(), last.as_nanos() + 10);
    }
}
