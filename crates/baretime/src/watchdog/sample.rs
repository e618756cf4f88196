//! One check's sample: the narrowest of a few brackets, the counts' steps learnt on the
//! way, and the counts unwrapped from sample to sample (*One check*, *The bound* and
//! *Widths* on [`Watchdog`]).

use super::*;

impl<R: Reference> Watchdog<R> {
    /// The narrowest of `tries` brackets: `(c0, r, width)`; learns the steps on the way.
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
        }
        best
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

impl<R: Reference> Watchdog<R> {
    /// Where a narrow count's wraps over an interval cannot be counted from the rate in
    /// force (`ambiguous`: its bound over the interval reaches a quarter or half wrap; or a
    /// change of up to 12.5 % since the last sample may have moved it by half a wrap: a
    /// PIT, 54.9 ms a wrap, checked every 0.5 s), the ticks of that count the
    /// interval made due, from a short measurement of the rate taken now (see *Widths* on
    /// [`Watchdog`]; `due`: what the interval made due at the rate in force).
    /// Returns `expected` where the rate in force can count them; `None` where the
    /// measurement cannot either (disturbed, or too coarse): the interval's wraps are
    /// ambiguous ([`Unjudged::TooLong`]).
    pub(super) fn expected_narrow<C: Counter>(
        &mut self,
        counter: &C,
        narrow_is_reference: bool,
        ambiguous: bool,
        clock_millihz: u64,
        due: Due,
    ) -> Option<u128> {
        let Due {
            d_wide,
            expected,
            slack,
        } = due;
        let cw = Width::of(counter);
        let rw = Width::new(self.reference.bits());
        let nw = if narrow_is_reference { rw } else { cw };
        let wrap = u128::from(nw.mask()).saturating_add(1);
        let gross = mul_div_ceil(expected, u128::from(GROSS_PPB), u128::from(PPB))
            .unwrap_or(u128::MAX)
            .saturating_add(slack);
        if nw.mask() == u64::MAX || (!ambiguous && gross < wrap / 2) {
            return Some(expected);
        }
        // Where the rate in force can count the wraps (only a change since the last sample
        // could have moved the count by half a wrap), it does so where the measurement
        // cannot: an interval so long that a measurement of an eighth of a wrap is coarser
        // than the rate in force (a gap of minutes under a PIT) is counted as before, a
        // change inside it seen by the checks at the hook's period after it.
        let fallback = if ambiguous { None } else { Some(expected) };
        // Spin long enough that the measurement's uncertainty, carried over the interval,
        // stays within a sixteenth of a wrap (at most an eighth of a wrap).
        let spin = mul_div_ceil(expected, slack.saturating_mul(16), wrap)
            .unwrap_or(u128::MAX)
            .max(slack.saturating_mul(4))
            .min(wrap / 8);
        let Some((d_c, u_c, d_r, u_r)) =
            self.local_ratio(counter, narrow_is_reference, clock_millihz, spin)
        else {
            return fallback;
        };
        // The narrow count's ticks per tick of the other, and the interval's range.
        let (d_n, u_n, d_o, u_o) = if narrow_is_reference {
            (d_r, u_r, d_c, u_c)
        } else {
            (d_c, u_c, d_r, u_r)
        };
        let range = (|| {
            let lo = mul_div(
                u128::from(d_wide),
                u128::from(d_n.checked_sub(u_n)?),
                u128::from(d_o).checked_add(u128::from(u_o))?,
            )?;
            let hi = mul_div_ceil(
                u128::from(d_wide),
                u128::from(d_n).checked_add(u128::from(u_n))?,
                u128::from(d_o.checked_sub(u_o).filter(|&d| d != 0)?),
            )?;
            Some((lo, hi))
        })();
        let Some((lo, hi)) = range.filter(|&(lo, hi)| {
            hi.saturating_sub(lo)
                .saturating_add(slack.saturating_mul(2))
                < wrap / 4
        }) else {
            return fallback;
        };
        self.refused = false;
        Some(lo.saturating_add(hi) / 2)
    }

    /// Two samples about `spin` ticks of the narrow count apart, the narrow count read in
    /// between: the counter's and the reference's moves and their uncertainties
    /// `(d_c, u_c, d_r, u_r)`; `None` where a sample was wide, a read went back, or the
    /// narrow count may have wrapped unseen (it moved more than a quarter wrap, as the
    /// other count tells at the rate in force, or the spin did not end).
    fn local_ratio<C: Counter>(
        &mut self,
        counter: &C,
        narrow_is_reference: bool,
        clock_millihz: u64,
        spin: u128,
    ) -> Option<(u64, u64, u64, u64)> {
        let cw = Width::of(counter);
        let rw = Width::new(self.reference.bits());
        let nw = if narrow_is_reference { rw } else { cw };
        let spin = u64::try_from(spin).ok()?;
        let floor = self.min_width.saturating_mul(2).saturating_add(2);
        let (ca, ra, wa) = self.sample(counter);
        let from = if narrow_is_reference { ra } else { ca };
        let ref_millihz = u128::from(self.reference.frequency().as_millihz().max(1));
        let clock_millihz = u128::from(clock_millihz.max(1));
        // The other count's move, in the narrow one's ticks at the rate in force.
        let other_in_narrow = |c: u64, r: u64| -> Option<u128> {
            if narrow_is_reference {
                mul_div(u128::from(cw.elapsed(ca, c)?), ref_millihz, clock_millihz)
            } else {
                mul_div(u128::from(rw.elapsed(ra, r)?), clock_millihz, ref_millihz)
            }
        };
        let mut moved = 0;
        for i in 0..LOCAL_READS {
            let now = if narrow_is_reference {
                rw.value(self.reference.read())
            } else {
                cw.value(counter.ticks())
            };
            moved = nw.elapsed(from, now)?;
            if moved >= spin {
                break;
            }
            // A narrow count that stands still (or one far slower than the rate in force)
            // ends the spin once the other has moved twice its length.
            if i % 16 == 15 {
                let (c, r) = if narrow_is_reference {
                    (cw.value(counter.ticks()), ra)
                } else {
                    (ca, rw.value(self.reference.read()))
                };
                if other_in_narrow(c, r)? > u128::from(spin).saturating_mul(2) {
                    return None;
                }
            }
        }
        let (cb, rb, wb) = self.sample(counter);
        if moved < spin || wa > floor || wb > floor {
            return None;
        }
        let d_c = cw.elapsed(ca, cb)?;
        let d_r = rw.elapsed(ra, rb)?;
        if other_in_narrow(cb, rb)? >= u128::from(nw.mask()) / 4 {
            return None;
        }
        let u_c = wa
            .saturating_add(wb)
            .saturating_add(step_or_one(self.counter_step).saturating_mul(2));
        let u_r = step_or_one(self.ref_step).saturating_mul(2);
        Some((d_c, u_c, d_r, u_r))
    }
}

/// What an interval made due of a narrow count, at the rate in force.
pub(super) struct Due {
    /// The other count's move over the interval.
    pub(super) d_wide: u64,
    /// The narrow count's ticks due at the rate in force.
    pub(super) expected: u128,
    /// Its ticks the rate in force cannot tell apart (brackets, steps).
    pub(super) slack: u128,
}

/// Reads of the narrow count a local measurement spins for at most.
const LOCAL_READS: u32 = 1 << 20;

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
