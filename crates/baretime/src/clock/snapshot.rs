//! What a deadline is computed from: one version of the timeline and a counter reading.

use super::*;
use core::num::NonZeroU64;

/// Where a counter reading falls on the timeline in force, for a deadline
/// (`crate::deadline`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Place {
    /// On the timeline, this many ticks past its base (at most its deadline).
    On(u64),
    /// This many ticks (one or more) before the base: the handover (the counter has not
    /// reached the base of a version just published), or a 64-bit counter that lags or was
    /// reset.
    Before(u64),
    /// Where time stands still until the next write: the timeline latched, a narrow counter
    /// past its deadline, a clock not started.
    Still,
}

/// One version of the timeline and a counter reading made while it was the current one: what
/// a deadline is computed from (`crate::deadline`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Snapshot {
    /// The counter's value as it returned it (in the counter's own width).
    pub(crate) raw: u64,
    /// Where that reading falls.
    pub(crate) place: Place,
    /// The handover margin, in ticks at the rate in force.
    pub(crate) margin: u64,
    /// The timeline's deadline, as an offset from its base: past it time stands still until
    /// the next write.
    pub(crate) end: u64,
    /// The reading in the clock's width.
    t: u64,
    width: Width,
    tb: Timebase,
    /// Whether readings in the handover stand at the base (the previous version was latched:
    /// see `now_slow`).
    hand_at_base: bool,
}

impl Snapshot {
    /// The timeline's time at its base, in ns.
    pub(crate) fn base_ns(&self) -> u64 {
        self.tb.base_ns
    }

    /// The scale in force.
    pub(crate) fn scale(&self) -> Scale {
        self.tb.scale
    }

    /// Whether the clock had started.
    pub(crate) fn started(&self) -> bool {
        self.tb.scale.millihz() != 0
    }

    /// What a reading `k` ticks after this one reads on this version, as its readers compute
    /// it (a 64-bit reader may return more, from the high-water mark, never less): before the
    /// base, the handover's copy of the previous timeline; from the base, the timeline, which
    /// stands still past its end. Non-decreasing in `k`. Meaningful for `place` `On` or
    /// `Before`, for `k` up to where the reading reaches the end.
    pub(crate) fn value(&self, k: u64) -> u64 {
        let reading = self.width.add(self.t, k);
        match self.place {
            Place::Before(before) if k < before => {
                if self.hand_at_base {
                    self.tb.base_ns
                } else {
                    self.tb.before_base(self.width, reading)
                }
            }
            Place::Before(_) | Place::On(_) => {
                let d = self.width.delta(self.tb.base_ticks, reading);
                self.tb.at(d.min(self.end))
            }
            Place::Still => self.tb.base_ns,
        }
    }

    /// What the timeline would read `k` ticks after this reading if it ran on past its end
    /// at its rate, as an update on time continues it (to within a nanosecond's floor): for
    /// a deadline beyond the end. Non-decreasing in `k`.
    pub(crate) fn extrapolated(&self, k: u64) -> u64 {
        let d = match self.place {
            Place::On(d) => d.saturating_add(k),
            Place::Before(before) => k.saturating_sub(before),
            Place::Still => return self.tb.base_ns,
        };
        self.tb.at(d)
    }
}

impl<C: Counter> Clock<C> {
    /// The current version and a counter reading made while it was current (read again if a
    /// publication overtook it), for `crate::deadline`. Changes nothing.
    pub(crate) fn snapshot(&self) -> Snapshot {
        let width = self.width();
        let geometry = Geometry::of(width);
        self.timeline.read(|version, words| {
            let raw = self.counter.ticks();
            let t = width.value(raw);
            fence(Ordering::Acquire);
            let tb = Timebase::load(words);
            let started = tb.scale.millihz() != 0;
            let latched = self.gate(version.slot).latched.load(Ordering::Acquire)
                == version.number.wrapping_add(1);
            let hand_at_base = width != Width::FULL
                && self
                    .gate(version.slot.wrapping_add(1))
                    .latched
                    .load(Ordering::Acquire)
                    == version.number;
            let d = width.delta(tb.base_ticks, t);
            let before = width.delta(t, tb.base_ticks);
            let place = match geometry.zone(d) {
                _ if latched || !started => Place::Still,
                Zone::Valid => Place::On(d),
                Zone::Behind if width == Width::FULL || before <= tb.hand => Place::Before(before),
                _ => Place::Still,
            };
            let scale = if started { tb.scale } else { FASTEST };
            let snapshot = Snapshot {
                raw,
                place,
                margin: geometry.margin(&scale),
                end: geometry.deadline,
                t,
                width,
                tb,
                hand_at_base,
            };
            (snapshot, true)
        })
    }
}

impl<C: Counter> Clock<C> {
    /// [`Clock::deadline`]'s common case on a narrow counter, in one pass over the words in
    /// force, without a [`Snapshot`]: a reading on the open timeline (the fast path's own test,
    /// `d < lim`, after the counter read, and nothing published since), a target ahead of it,
    /// before the timeline's end and within half an update interval. The tick is guessed from
    /// the slot's ticks per nanosecond (`Clock::inverses`: two multiplies), and two
    /// evaluations of the readers' formula prove it the least — the tick `deadline`'s search
    /// would find there. `None` for everything else (the full search), and for 64-bit
    /// counters, whose reading a second read confirms.
    ///
    /// The tick comes back plus one (a narrow counter's tick is below 2^63: never zero, no
    /// overflow), so that the answer fits two registers on a 32-bit core: out of line, the
    /// call costs a few instructions, where inlined its frame weighed on the caller's.
    #[inline(never)]
    pub(crate) fn quick_deadline(&self, target: u64) -> Option<NonZeroU64> {
        let width = self.width();
        if width == Width::FULL {
            return None;
        }
        let geometry = Geometry::of(width);
        let (version, words, s1) = self.timeline.begin();
        let raw = self.counter.ticks();
        let t = width.value(raw);
        let [b, base_ns, int, frac, ..] = words;
        let lim = self.gate(version.slot).lim.load(Ordering::Relaxed);
        // Below 2^32 where the target lacks 64-bit atomics (`load_narrow`, `load_frac`).
        let (b, base_ns) = (b.load_narrow(), base_ns.load());
        let (int, frac) = (int.load_narrow(), frac.load_frac());
        let per_ns = of_slot(&self.inverses, version.slot).load();
        if !self.timeline.unchanged(s1) {
            return None;
        }
        let d = width.delta(b, t);
        // The time from the base to the target: below 2^32 ns for the guess's multiplies.
        let span = target.checked_sub(base_ns)?;
        if d >= lim || span >> 32 != 0 {
            return None;
        }
        // The readers' formula `d` ticks past the base, less `base_ns` (`advance`). Ends are
        // below 2^62: no sum overflows. On a 32-bit core distances, the tick length's
        // integer part and (`in_force`) its fraction fit 32 bits: `advance_narrow`.
        #[cfg(not(any(loom, target_has_atomic = "64")))]
        #[allow(clippy::cast_possible_truncation)] // below 2^32, as just said
        let since_base =
            |d: u64| super::read::advance_narrow(0, d as u32, int as u32, (frac >> 32) as u32);
        #[cfg(any(loom, target_has_atomic = "64"))]
        let since_base = |d: u64| advance(0, d, int, frac);
        // `⌈span × per_ns / 2^32⌉`, in two 32 × 32 → 64-bit products (`per_ns` is below
        // 2^39): the least tick past the base whose time reaches the span, or one less
        // (`timeline::per_ns`), proven below by the formula itself.
        #[allow(clippy::arithmetic_side_effects)] // span < 2^32: each product below 2^64
        let guess = {
            let low = span * (per_ns & 0xffff_ffff);
            (low >> 32) + span * (per_ns >> 32) + u64::from(low & 0xffff_ffff != 0)
        };
        // Half the update interval is at least this (the margin is at most 1/16 of the wrap):
        // `deadline`'s cap does not apply below it.
        let margin_max = (width.mask() >> 4).max(1);
        let cap = geometry
            .deadline
            .saturating_sub(margin_max)
            .saturating_sub(1)
            >> 1;
        // The least tick past the base whose time reaches the span: the guess, if the one
        // before it falls short, or the one after it, if the guess falls short itself.
        let at = if since_base(guess) >= span {
            if guess == 0 || since_base(guess.saturating_sub(1)) >= span {
                return None;
            }
            guess
        } else {
            let next = guess.saturating_add(1);
            if since_base(next) < span {
                return None;
            }
            next
        };
        let k = at.checked_sub(d)?;
        let proven = k != 0 && k <= cap && at <= geometry.deadline;
        proven
            .then(|| NonZeroU64::new(width.add(raw, k).wrapping_add(1)))
            .flatten()
    }
}

#[cfg(test)]
mod tests {
    use crate::frequency::{Accuracy, Source};
    use crate::{Clock, FnCounter, Frequency, Instant};
    use core::cell::Cell;
    use proptest::prelude::*;

    proptest! {
        /// Where the one-pass deadline answers, it answers what the full search does; and on
        /// an open timeline with a target ahead, it answers (the common case is the fast one).
        #[test]
        fn quick_deadline_is_the_search(
            bits in 12u32..=32,
            millihz in 1_000_000u64..=2_000_000_000_000,
            start in any::<u32>(),
            after in 0u64..1 << 20,
            ahead_ns in 1u64..1 << 31,
            writes in 0u32..3,
        ) {
            let ticks = Cell::new(u64::from(start));
            let counter = FnCounter::new(|| ticks.get(), bits);
            let f = Frequency::from_millihz(millihz, Source::User, Accuracy::Exact).unwrap();
            let clock = Clock::new(&counter, f);
            let mask = (1u64 << bits) - 1;
            for _ in 0..writes {
                ticks.set((ticks.get() + 100_000) & mask);
                let _ = clock.update();
            }
            let interval_ticks = clock.scale().ns_to_ticks_ceil(clock.update_interval().as_nanos() as u64);
            ticks.set((ticks.get() + after.min(interval_ticks / 4)) & mask);
            let target = clock.now().as_nanos() + ahead_ns;
            let quick = clock.quick_deadline(target);
            let (due, full, _) = clock.plan(Instant::from_nanos(target));
            if let Some(t) = quick {
                prop_assert!(!due);
                prop_assert_eq!(t.get() - 1, full.ticks());
            }
        }
    }

    /// A firmware's case (a 32-bit timer at 25 MHz updated every 100 µs, deadlines a few ms
    /// out) takes the one pass every time.
    #[test]
    fn quick_deadline_answers_the_common_case() {
        let ticks = Cell::new(5u64);
        let counter = FnCounter::new(|| ticks.get(), 32);
        let clock = Clock::new(&counter, Frequency::nominal_hz(25_000_000, 50_000).unwrap());
        for i in 0..1000u64 {
            ticks.set((ticks.get() + 2500) & 0xffff_ffff);
            clock.update().unwrap();
            // Past the update's handover (20 µs: 500 ticks), where a deadline reads the old
            // timeline's copy and takes the full search.
            ticks.set((ticks.get() + 600) & 0xffff_ffff);
            let target = clock.now().as_nanos() + 5_000_000 + i * 997;
            let quick = clock.quick_deadline(target);
            assert_eq!(
                quick.map(|t| t.get() - 1),
                Some(clock.plan(Instant::from_nanos(target)).1.ticks()),
                "{i}"
            );
        }
    }
}
