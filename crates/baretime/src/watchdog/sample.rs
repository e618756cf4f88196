//! One check's sample: the narrowest of a few brackets, the counts' steps learnt on the
//! way, and the counts unwrapped from sample to sample (*One check*, *The bound* and
//! *Widths* on [`Watchdog`]).

use super::*;

impl<R: Reference> Watchdog<R> {
    /// The narrowest of `tries` brackets: `(c0, r, width)`; learns the steps on the way.
    /// A bracket narrower than half the narrowest accepted so far is taken only where every
    /// try's is: a step back of the counter inside a try narrows its bracket below where the
    /// reference was latched (a bracket that lies), and the other tries, each on one side of
    /// the step, are good samples (`tests/adversary_watchdog5.rs`, seed 11917: a step of
    /// −1.26 µs inside a try left a bracket of 16 ticks where the reads take ~1 030, and a
    /// false (c) 2.5 s later, before). A read path that became faster narrows every try.
    pub(super) fn sample<C: Counter>(&mut self, counter: &C) -> (u64, u64, u64) {
        let cw = Width::of(counter);
        let rw = Width::new(self.reference.bits());
        if self.ref_step == u64::MAX {
            // Until the reference's step is known (nothing is judged before), read it back
            // to back until it moves: a coarse reference (a 1 kHz tick, a 32 kHz RTC) does
            // not move within a check's few tries.
            // A move between two reads one of which was delayed spans several steps: the
            // reads go on until the reference moves between two reads that the counter
            // brackets (from before the first to after the second) as narrowly as any two
            // seen here.
            let mut before = cw.value(counter.ticks());
            let mut prev = rw.value(self.reference.read());
            let mut min_gap = u64::MAX;
            // The check's reads in all, the first pair and the tries' included: at most
            // STEP_READS of the reference and twice as many of the counter.
            for _ in 0..STEP_READS.saturating_sub(self.tries.saturating_add(1)) {
                let c = cw.value(counter.ticks());
                let r = rw.value(self.reference.read());
                let after = cw.value(counter.ticks());
                let gap = cw.elapsed(before, after).unwrap_or(u64::MAX);
                min_gap = min_gap.min(gap);
                learn(&mut self.ref_step, rw, prev, r);
                if r != prev && gap <= min_gap.saturating_mul(2).saturating_add(2) {
                    break;
                }
                (prev, before) = (r, c);
            }
        }
        let mut best = (0, 0, u64::MAX);
        // The narrowest of the tries at least half the floor wide.
        let mut kept = (0, 0, u64::MAX);
        let mut prev: Option<(u64, u64)> = None;
        for _ in 0..self.tries {
            let c0 = cw.value(counter.ticks());
            let r = rw.value(self.reference.read());
            let c1 = cw.value(counter.ticks());
            let width = cw.elapsed(c0, c1).unwrap_or(u64::MAX);
            learn(&mut self.counter_step, cw, c0, c1);
            if let Some((pc, pr)) = prev {
                learn(&mut self.counter_step, cw, pc, c0);
                learn(&mut self.ref_step, rw, pr, r);
            }
            prev = Some((c1, r));
            if width < best.2 {
                best = (c0, r, width);
            }
            if width < kept.2 && width.saturating_mul(2) >= self.min_width {
                kept = (c0, r, width);
            }
        }
        if kept.2 == u64::MAX {
            best
        } else {
            kept
        }
    }

    /// Whether the wraps of a count of width `w` (narrower than 64 bits), unwrapped against
    /// the clock's rate, are ambiguous over an interval of `dx` reference ticks where that
    /// rate predicts `expected` of its ticks, `slack` of them unknowable (brackets, steps):
    /// where the clock's rate's claimed error (the bound it was set with) over the interval,
    /// plus `slack`, reaches a quarter wrap (the other quarter is the room left for a change
    /// to be seen unaliased), or [`WatchdogHealth::bound_ppb`]'s (which also covers a pending
    /// deviation and the old rate after a change) reaches half a wrap (see *Widths* on
    /// [`Watchdog`]). The check right after such a one is judged as before, without either
    /// condition, where its interval is no longer than twice the last judged one's per check
    /// (the hook's period): a bound still too wide at that period (a large change or a fast
    /// ramp under a PIT) must not leave every check unjudged, and so never shrink.
    pub(super) fn wraps_ambiguous(
        &mut self,
        w: Width,
        expected: u128,
        slack: u128,
        dx: u64,
    ) -> bool {
        if w.mask() == u64::MAX {
            return false;
        }
        let at_period = self.refused
            && self
                .prev
                .is_some_and(|p| dx <= p.dx.checked_div(p.n).unwrap_or(p.dx).saturating_mul(2));
        let wrap = u128::from(w.mask()).saturating_add(1);
        let off = |ppb: u64| {
            mul_div_ceil(expected, u128::from(ppb), u128::from(PPB))
                .unwrap_or(u128::MAX)
                .saturating_add(slack)
        };
        let ambiguous =
            !at_period && (off(self.claim_ppb) >= wrap / 4 || off(self.bound_ppb) >= wrap / 2);
        self.refused = ambiguous;
        ambiguous
    }
}

/// Lowers `step` to the forward move from `a` to `b` if it is a smaller non-zero one.
fn learn(step: &mut u64, w: Width, a: u64, b: u64) {
    if let Some(d) = w.elapsed(a, b).filter(|&d| d != 0) {
        *step = (*step).min(d);
    }
}

pub(super) fn step_or_one(step: u64) -> u64 {
    if step == u64::MAX {
        1
    } else {
        step
    }
}

/// How a count moved between two reads, unwrapped against the distance expected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Unwrapped {
    /// Forward by this many ticks.
    Forward(u64),
    /// Back: a step back explains the reads better than any whole number of wraps.
    Back,
    /// Forward by more than 64 bits hold (the expected distance is beyond them).
    TooFar,
}

/// The forward distance from `from` to `to` on a count of width `w`, with the whole wraps
/// that best match `expected`; [`Unwrapped::Back`] where a step back explains it better.
pub(super) fn by_rate(w: Width, from: u64, to: u64, expected: u128) -> Unwrapped {
    let d = u128::from(w.delta(from, to));
    let wrap = u128::from(w.mask()).saturating_add(1);
    let wraps = expected
        .saturating_sub(d)
        .saturating_add(wrap / 2)
        .checked_div(wrap)
        .unwrap_or(0);
    let forward = d.saturating_add(wraps.saturating_mul(wrap));
    let back_miss = wrap.saturating_sub(d).saturating_add(expected);
    if d != 0 && back_miss < forward.abs_diff(expected) {
        return Unwrapped::Back;
    }
    u64::try_from(forward).map_or(Unwrapped::TooFar, Unwrapped::Forward)
}

/// Carries `seen` (a raw value and the ticks since `last`) forward to `raw` by the
/// half-range rule: the ticks from `last` to `raw`, or `None` where `raw` is behind.
pub(super) fn carry(seen: &mut (u64, u64), w: Width, raw: u64) -> Option<u64> {
    let d = w.elapsed(seen.0, raw)?;
    *seen = (raw, seen.1.saturating_add(d));
    Some(seen.1)
}
