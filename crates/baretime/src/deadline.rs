//! [`Deadline`]: the counter value at which a [`Clock`] reads a given [`Instant`], for a
//! compare timer to fire at (x86's TSC deadline, aarch64's `CNTV_CVAL_EL0`, a Cortex-M
//! timer's compare register), and [`Wake`]: what the check run at the wake decides.
//!
//! # The tick
//!
//! [`Clock::deadline`] takes one version of the timeline and a counter reading made while it
//! was current (`Clock::snapshot`), and looks for the least number of ticks `k` after that
//! reading at which the version reads `at` or later, by the readers' own formula (the
//! timeline `base_ns + ⌊d × mult⌋`, and before its base the handover's copy of the previous
//! timeline). [`Scale::ns_to_ticks_ceil`] gives the guess; the answer is then found by
//! evaluating the formula itself (a few steps out from the guess, then a bisection), so
//! neither of [`Scale`]'s roundings — `mult` to the nearest 2^-64 ns, the inverse rounded up
//! — can make it a tick early or late. A reading at that tick, on that version, reads at
//! least `at` (the fast path returns the formula's value; a 64-bit reader may return more, from
//! the high-water mark, never less), and by the formula a reading a tick before it reads less:
//! the tick is the first one, not merely a late enough one. The tick is the reading plus `k`,
//! in the counter's own width.
//!
//! # Why the check at the wake is still needed
//!
//! The tick is exact for the version it was computed on. A write between arming and the wake
//! publishes another: from its close point `c` on, `F'(t) = F⁺(c) + ⌊(t − c) × mult'⌋`
//! (`F⁺(c)` the time at `c` with the fraction of a nanosecond the writer carries, at most 1 ns
//! above `F(c)`). With a faster rate (a smaller `mult'`) the armed tick reads less than `at`;
//! even at the same rate (an [`Clock::update`]) two floors can be a nanosecond below one —
//! or the carried fraction a nanosecond above, which makes the armed tick up to 1 ns and a
//! tick *late* unless it is computed again after the write; a rebase starts the timeline
//! afresh anywhere. A clock standing still (a writer stalled between closing a
//! timeline and publishing the next, a narrow counter updated late) reads less than the
//! formula too. So the tick alone guarantees nothing once the clock has
//! been written: [`Clock::check`] reads [`Clock::now`] at the wake and says
//! [`Wake::Fired`] only if it is at or past `at`; otherwise it computes the deadline afresh on
//! the timeline then in force ([`Wake::Rearm`]). 0 early wakes is the check's promise, not the
//! tick's.
//!
//! # How far ahead, and why it ends
//!
//! A tick is armed at most `H` ticks ahead of the reading: half of [`Clock::update_interval`]
//! in ticks (at least one). A narrow counter's compare value is then never ambiguous (`H` is
//! below a quarter of the wrap), and a wake handler that calls [`Clock::update`] keeps the
//! clock on time by itself, with half an interval to spare for interrupt latency. A deadline
//! further away is armed at `H` and re-arms. One beyond the end of the timeline in force (a
//! narrow counter whose next [`Clock::update`] is due before it) is armed where the rate in
//! force reaches it: an update on time continues at that rate, so the tick stays right.
//!
//! Each [`Wake::Rearm`] has one of four causes, and each is bounded:
//!
//! - a write since the deadline was computed (one re-arm per write at most: with no further
//!   write the next tick is exact);
//! - a deadline armed `H` ahead (the counter has moved `H` ticks: at most
//!   `⌈remaining / H⌉` of these);
//! - a clock that stands still while its timeline says `at` is reached (a writer stalled mid
//!   handover): re-armed a handover margin (20 µs) ahead, for as long as the stall lasts;
//! - a clock that stands still until the next write (a narrow counter updated late, a clock
//!   not started): re-armed `H` ahead, never in a storm, until [`Clock::update`] (or
//!   [`Clock::start`]) runs.
//!
//! `tests/deadline.rs` drives this through recalibrations by ±100 ppm and by large ratios,
//! rebases forward and back, counter resets and wraps at 16, 32 and 64 bits, firing each
//! deadline at exactly its tick: no early [`Wake::Fired`], and every deadline fires within the
//! bound above.

use crate::clock::{Clock, ClockError, Place, Snapshot};
use crate::counter::{Counter, Width};
use crate::instant::Instant;
use crate::scale::Scale;

/// A counter value to arm a compare timer with, so that the wake comes when a [`Clock`]'s
/// [`Clock::now`] is at or past an [`Instant`] — never early on the timeline in force when it
/// was computed — and the instant it stands for.
///
/// The tick is only as good as that timeline: a recalibration, rebase or update between arming
/// and the wake can make it early. **The wake handler must run [`Clock::check`]** and treat the
/// deadline as reached only on [`Wake::Fired`]; on [`Wake::Rearm`] it arms the tick it is given
/// and waits again.
///
/// ```
/// use baretime::{Clock, FnCounter, Frequency, Instant, Wake};
/// use core::cell::Cell;
///
/// // A 32-bit counter at 1 MHz (1 tick = 1 µs) that the example moves by hand.
/// let ticks = Cell::new(0u64);
/// let counter = FnCounter::new(|| ticks.get(), 32);
/// let clock = Clock::new(&counter, Frequency::exact_hz(1_000_000).unwrap());
///
/// let at = Instant::from_nanos(1_500_500); // 1500.5 µs after the epoch
/// let mut deadline = clock.deadline(at).unwrap();
/// assert_eq!(deadline.ticks(), 1501); // rounded up: never early
///
/// // Between arming and the wake, the counter is found to run at 1.25 MHz: by the new
/// // rate, tick 1501 comes early.
/// ticks.set(1000);
/// clock.recalibrate(Frequency::exact_hz(1_250_000).unwrap()).unwrap();
///
/// // The timer fires at tick 1501: the wake handler's check.
/// let fires = loop {
///     ticks.set(deadline.ticks());
///     match clock.check(deadline) {
///         Wake::Fired => break ticks.get(),
///         Wake::Rearm(next) => deadline = next, // early: arm `next.ticks()`, wait again
///     }
/// };
/// assert!(clock.now() >= at);
/// // 1020 µs at the old rate (the handover: the new rate takes over 20 µs after the write),
/// // then 480.5 µs at 1.25 ticks per µs, rounded up to whole ticks.
/// assert_eq!(fires, 1621);
/// ```
///
/// The tick is the counter's own value, within its width: a narrow counter's compare value. A
/// deadline further off than the counter can hold (more than half of
/// [`Clock::update_interval`] ahead) is armed at that point, and re-arms from there.
///
/// **Its width, on every target**, is the counter's [`Counter::bits`]: the tick is a counter
/// reading (as [`Counter::ticks`] returned it) plus the distance, modulo 2^bits — 64 bits for
/// a TSC or `CNTVCT_EL0`, 32 for a 32-bit timer, 55 for an [`ExtendedTimer`](crate::ExtendedTimer)
/// on a 24-bit SysTick (its wrap count included). Where the target lacks 64-bit atomics
/// (Cortex-M, 32-bit RISC-V) the clock computes with the low 32 bits of each reading, and
/// that changes only how far ahead a tick can be: half of its [`Clock::update_interval`],
/// under 2^30 ticks (43 s at 25 MHz) whatever the counter's width, against about 2^61 for a
/// 64-bit counter with 64-bit atomics. The tick is never reduced to 32 bits: an alarm on a
/// narrower timer takes the distance from its own reading of the same counter (a one-shot
/// down-counter loaded with `ticks − now`), or compares the bits it has. Where the
/// instant has already passed, the tick is the counter's value as it was read, already behind:
/// a timer that fires when the counter *reaches* its compare value (x86's TSC deadline,
/// aarch64's `CNTV_CVAL_EL0`) fires at once, but one that fires only when the two are *equal*
/// would wait a whole wrap — after arming such a timer, run [`Clock::check`] once: on
/// [`Wake::Fired`] the deadline is due.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[must_use]
pub struct Deadline {
    ticks: u64,
    at: Instant,
}

impl Deadline {
    /// The counter value to arm (in the counter's width, [`Counter::bits`], on every target:
    /// see [`Deadline`]): the first at which the clock
    /// reads [`Deadline::at`] or later on the timeline in force when it was computed, or the
    /// furthest point the counter can hold. Past the end of that timeline (a narrow counter
    /// whose next [`Clock::update`] is due first), the tick at which its rate reaches the
    /// instant.
    pub const fn ticks(&self) -> u64 {
        self.ticks
    }

    /// The instant this deadline stands for.
    pub const fn at(&self) -> Instant {
        self.at
    }
}

/// What [`Clock::check`] decides at a wake.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[must_use]
pub enum Wake {
    /// [`Clock::now`] is at or past the deadline's instant: it is reached.
    Fired,
    /// Not yet (a write since it was computed made the tick early, or it was armed as far as
    /// the counter can hold): arm this deadline's tick and wait again.
    Rearm(Deadline),
}

impl<C: Counter> Clock<C> {
    /// The counter value at which [`Clock::now`] reads `at` or later, on the timeline in force
    /// (rounded up: never early there), to arm a compare timer with: see [`Deadline`].
    /// [`ClockError::NotStarted`] before [`Clock::start`].
    ///
    /// Readers never wait and neither does this: one consistent read of the timeline, three
    /// counter reads (the tick's, a second that confirms it was not a glitch ahead, one for
    /// `now`), no lock.
    pub fn deadline(&self, at: Instant) -> Result<Deadline, ClockError> {
        // The common case in one pass (a narrow counter on the open timeline, the guess
        // exact): on a Cortex-M4 a tenth of the full search's instructions.
        if let Some(ticks) = self.quick_deadline(at.as_nanos()) {
            // The tick plus one (`quick_deadline`).
            let ticks = ticks.get().wrapping_sub(1);
            return Ok(Deadline { ticks, at });
        }
        self.deadline_searched(at)
    }

    /// [`Clock::deadline`] by the full search (out of line: its frame is large, and the one
    /// pass above is the common case).
    #[inline(never)]
    fn deadline_searched(&self, at: Instant) -> Result<Deadline, ClockError> {
        match self.plan(at) {
            (_, _, false) => Err(ClockError::NotStarted),
            (_, deadline, true) => Ok(deadline),
        }
    }

    /// The check to run when a [`Deadline`]'s timer fires: [`Wake::Fired`] if [`Clock::now`]
    /// is at or past its instant — never before — otherwise [`Wake::Rearm`] with the deadline
    /// computed afresh on the timeline in force (a recalibration, rebase or update since it was
    /// armed can make its tick early; a far deadline was armed at the furthest point).
    ///
    /// A wake handler treats the deadline as reached only on `Fired`. Run it also after your
    /// own [`Clock::recalibrate`] or [`Clock::rebase`], on the deadline armed then, and re-arm
    /// with what it returns: a write can make an armed tick late as well as early, and only
    /// the early side is caught at the wake. On a counter narrower than 64 bits, a wake
    /// handler is also a good place for [`Clock::update`]: a deadline is never armed more than
    /// half an update interval ahead.
    pub fn check(&self, deadline: Deadline) -> Wake {
        match self.plan(deadline.at) {
            (true, _, _) => Wake::Fired,
            (false, next, _) => Wake::Rearm(next),
        }
    }

    /// Whether `at` is reached (by a `now()` read after the snapshot), the deadline for it, and
    /// whether the clock has started (before, the deadline is the furthest point).
    pub(crate) fn plan(&self, at: Instant) -> (bool, Deadline, bool) {
        let width = Width::of(self.counter());
        let mut snapshot = self.snapshot();
        // One glitched counter read is not the time (Clock promise 7, for 64-bit counters: a
        // narrower one's reading far ahead is a wrap, judged by its timeline), and not the
        // tick either: a reading that the counter's next read finds behind it is taken again.
        // A glitch behind only makes the tick early, which the check at the wake catches.
        let retries = if width.mask() == u64::MAX { 2 } else { 0 };
        for _ in 0..retries {
            let again = self.counter().ticks();
            if width.delta(snapshot.raw, width.value(again)) <= width.half() {
                break;
            }
            snapshot = self.snapshot();
        }
        // After the snapshot: if the clock reads `at` now, the deadline is due; if not, it did
        // not at the snapshot's reading either (time never goes back).
        let due = self.now() >= at;
        let furthest = furthest(&snapshot);
        let ahead = if due {
            0
        } else {
            match first_tick(&snapshot, at.as_nanos()) {
                // The clock stands still where its timeline says `at` is reached (a writer
                // between closing a timeline and publishing the next): look again a handover
                // margin later, not at once.
                Some(0) => snapshot.margin,
                Some(k) => k,
                // A clock that stands still until the next write: the furthest point.
                None => furthest,
            }
            .min(furthest)
            .max(1)
        };
        let ticks = width.add(snapshot.raw, ahead);
        (due, Deadline { ticks, at }, snapshot.started())
    }
}

/// How far ahead of its reading a deadline is armed at most: half the update interval in
/// ticks (the timeline's end less a handover margin and a tick), at least one.
fn furthest(snapshot: &Snapshot) -> u64 {
    let interval = snapshot
        .end
        .saturating_sub(snapshot.margin)
        .saturating_sub(1);
    (interval >> 1).max(1)
}

/// The least number of ticks after the snapshot's reading at which its version reads
/// `target` ns or later, up to the timeline's end; beyond it, where the rate in force would
/// reach `target`; `None` where the clock stands still.
fn first_tick(snapshot: &Snapshot, target: u64) -> Option<u64> {
    // Where the reading is from the base, and how many ticks it is from the end.
    let (offset, max) = match snapshot.place {
        Place::On(d) => (Ok(d), snapshot.end.saturating_sub(d)),
        Place::Before(before) => (Err(before), before.saturating_add(snapshot.end)),
        Place::Still => return None,
    };
    let guess = guess(snapshot.scale(), snapshot.base_ns(), target, offset);
    match least(|k| snapshot.value(k), target, max, guess.min(max)) {
        Some(k) => Some(k),
        // Past the timeline's end (a narrow counter's next update is due first): the tick at
        // which the rate in force reaches `target`. An update on time continues the timeline
        // at that rate, so the tick stays right to within a nanosecond's floor (the check
        // re-arms a tick later if it comes short); a late update leaves the clock standing
        // still, which the check catches as early. Arming the furthest point instead would
        // make the wake late by up to half an update interval.
        None => {
            let hi = guess.max(max).saturating_add(2);
            let k = least(|k| snapshot.extrapolated(k), target, hi, guess.min(hi)).unwrap_or(hi);
            Some(k.max(1))
        }
    }
}

/// Where [`Scale::ns_to_ticks_ceil`] puts `target`, in ticks after a reading `offset` ticks
/// after the base (`Err`: that many before it): within a few ticks of the answer.
fn guess(scale: Scale, base_ns: u64, target: u64, offset: Result<u64, u64>) -> u64 {
    let from_base = scale.ns_to_ticks_ceil(target.saturating_sub(base_ns));
    match offset {
        Ok(d) => from_base.saturating_sub(d),
        Err(before) => before.saturating_add(from_base),
    }
}

/// The least `k` in `0..=max` with `value(k) >= target`, for a non-decreasing `value`; `None`
/// if `value(max)` is below it. Steps out from `guess` by doubling strides (one or two steps
/// when the guess is right to a tick), then bisects: at most about 128 evaluations in all.
fn least(value: impl Fn(u64) -> u64, target: u64, max: u64, guess: u64) -> Option<u64> {
    // The guess is usually exact: two evaluations prove it the least (`value` does not
    // decrease), which matters where each costs a 128-bit multiply in software (32-bit MCUs,
    // in the alarm's interrupt).
    let g = guess.clamp(1, max.max(1));
    if g <= max {
        if let Some(prev) = g.checked_sub(1) {
            if value(prev) < target && value(g) >= target {
                return Some(g);
            }
        }
    }
    if value(0) >= target {
        return Some(0);
    }
    if value(max) < target {
        return None;
    }
    // value(lo) < target <= value(hi), lo < hi.
    let (mut lo, mut hi) = (0u64, max);
    let g = guess.clamp(1, max.max(1));
    let mut stride = 1u64;
    if value(g) >= target {
        hi = g;
        while let Some(k) = hi.checked_sub(stride).filter(|&k| k > lo) {
            if value(k) >= target {
                hi = k;
                stride = stride.saturating_mul(2);
            } else {
                lo = k;
                break;
            }
        }
    } else {
        lo = g;
        loop {
            let k = lo.saturating_add(stride).min(hi);
            if k >= hi {
                break;
            }
            if value(k) >= target {
                hi = k;
                break;
            }
            lo = k;
            stride = stride.saturating_mul(2);
        }
    }
    while hi.wrapping_sub(lo) > 1 {
        let mid = lo.wrapping_add(hi.wrapping_sub(lo) >> 1);
        if value(mid) >= target {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(hi)
}

#[cfg(test)]
mod tests {
    use super::least;
    use proptest::prelude::*;

    proptest! {
        /// The search finds the least `k` whatever the guess, against a scan.
        #[test]
        fn least_is_the_least(
            mult in 1u64..5000,
            div in 1u64..5000,
            offset in 0u64..1000,
            target in 0u64..20_000,
            max in 0u64..20_000,
            guess in 0u64..30_000,
        ) {
            let value = |k: u64| offset + k * mult / div;
            let want = (0..=max).find(|&k| value(k) >= target);
            prop_assert_eq!(least(value, target, max, guess.min(max)), want);
        }

        /// Over the whole range of a 64-bit timeline (2^62 ticks), against the closed form
        /// `⌈7 × target / 3⌉` for `value(k) = ⌊3k / 7⌋`, from any guess.
        #[test]
        fn least_over_2_pow_62(target in 0u64..1 << 60, guess in 0u64..1 << 62) {
            let max = (1u64 << 62) - 1;
            let value = |k: u64| (u128::from(k) * 3 / 7) as u64;
            let want = (u128::from(target) * 7).div_ceil(3) as u64;
            prop_assert_eq!(least(value, target, max, guess), Some(want));
        }
    }

    #[test]
    fn least_edges() {
        let value = |k: u64| k;
        assert_eq!(least(value, 0, 0, 0), Some(0));
        assert_eq!(least(value, 1, 0, 0), None);
        assert_eq!(least(value, 5, 5, 0), Some(5));
        assert_eq!(least(value, 6, 5, 5), None);
        assert_eq!(least(value, u64::MAX, u64::MAX, u64::MAX), Some(u64::MAX));
        assert_eq!(least(|_| u64::MAX, u64::MAX, u64::MAX, 7), Some(0));
    }
}
