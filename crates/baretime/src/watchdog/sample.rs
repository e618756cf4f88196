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
        // The reference's last value and the counter's read right after the first read of
        // it: the counter's ticks between two reads of one value of the reference are ticks
        // it stood still for (at least; from the first read's end to the last's start).
        let mut run: Option<(u64, u64)> = None;
        self.still_ticks = 0;
        for _ in 0..self.tries {
            let c0 = cw.value(counter.ticks());
            let r = rw.value(self.reference.read());
            let c1 = cw.value(counter.ticks());
            match run {
                Some((value, since)) if value == r => {
                    self.still_ticks = self.still_ticks.max(cw.elapsed(since, c0).unwrap_or(0));
                }
                _ => run = Some((r, c1)),
            }
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

impl<R: Reference> Watchdog<R> {
    /// Where a narrow count's wraps over an interval cannot be counted from the rate in
    /// force (`ambiguous`: its bound over the interval reaches a quarter or half wrap; or a
    /// change of up to 12.5 % since the last sample may have moved it by half a wrap: a
    /// PIT, 54.9 ms a wrap, checked every 0.5 s), the ticks of that count the
    /// interval made due, from a short measurement of the rate taken now (see *Widths* on
    /// [`Watchdog`]; `due`: what the interval made due at the rate in force).
    /// Returns `expected` where the rate in force can count them; the count between the
    /// rates at the interval's two ends where the measurement can; otherwise why not:
    /// [`Unjudged::WideBracket`] where the measurement was disturbed, [`Unjudged::TooLong`]
    /// where the wraps are ambiguous.
    pub(super) fn expected_narrow<C: Counter>(
        &mut self,
        counter: &C,
        narrow_is_reference: bool,
        ambiguous: bool,
        clock_millihz: u64,
        due: Due,
    ) -> Result<u128, Unjudged> {
        let Due {
            d_wide,
            dx,
            d_narrow,
            from,
            at,
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
            return Ok(expected);
        }
        // Where the rate in force can count the wraps (only a change since the last sample
        // could have moved the count by half a wrap) and the measurement cannot (a slow
        // counter under a PIT; a narrow counter of many wraps a period; a gap of minutes),
        // the rate in force counts them. At the hook's period (no longer than twice the
        // last judged interval per check, or none judged yet) the interval is then
        // `unmeasured`: it may be judged steady, but a deviation may be an alias, and is
        // not judged, since no later check would measure better (see *Widths*); over a gap
        // a change inside it is seen by the checks at the hook's period after it.
        let at_period = !self
            .prev
            .is_some_and(|p| dx > p.dx.checked_div(p.n).unwrap_or(p.dx).saturating_mul(2));
        // Where a change of up to 12.5 % may move the count by a whole wrap, it may even
        // look steady: at the hook's period such an interval is not judged at all.
        // Nothing then says the rate did not change: the bound covers any rate a change may
        // make (12.5 %), as where a deviation is refused.
        let whole_wrap = gross.saturating_sub(slack) >= wrap;
        let fallback = |w: &mut Self| {
            if ambiguous {
                Err(Unjudged::TooLong)
            } else if at_period && whole_wrap {
                w.bound_ppb = w.bound_ppb.max(GROSS_PPB);
                Err(Unjudged::TooLong)
            } else {
                w.unmeasured = at_period;
                Ok(expected)
            }
        };
        // Spin long enough that the measurement's range for the interval spans about an
        // eighth of a wrap, for at most `MAX_SPIN_US`, and, where the narrow count is the
        // counter, an eighth of its wrap: the clock over it needs its updates more often
        // than half a wrap, which a hook with interrupts off would hold up (where that is
        // too short, the measurement is too coarse to count the wraps, below).
        let narrow_millihz = if narrow_is_reference {
            self.reference.frequency().as_millihz()
        } else {
            clock_millihz
        };
        let longest = mul_div(
            u128::from(narrow_millihz),
            u128::from(MAX_SPIN_US),
            1_000_000_000,
        )
        .unwrap_or(u128::MAX)
        .min(if narrow_is_reference {
            u128::MAX
        } else {
            wrap / 8
        });
        let spin = mul_div_ceil(expected, slack.saturating_mul(16), wrap)
            .unwrap_or(u128::MAX)
            .max(slack.saturating_mul(4))
            .min(longest);
        // The interval's count from the whole spin, and from each half: a reference that
        // stood still or stepped, a read stalled, or the rate changing during the spin
        // moves one half's range off the other's: then none is trusted, and the check is
        // a disturbed one (the rate in force could alias a change: that is why it
        // measured), unless it is the fourth in a row: that one takes what all three
        // allow, as the fourth wide bracket is judged against the floor.
        let ranges = self
            .local_ratio(counter, narrow_is_reference, clock_millihz, spin)
            .and_then(|ms| {
                let mut ranges = [(0, 0); 3];
                for (range, m) in ranges.iter_mut().zip(ms) {
                    *range = due_range(m, narrow_is_reference, d_wide)?;
                }
                Some((ranges, ms[2]))
            });
        let Some((ranges, m)) = ranges else {
            // No measurement (a wide sample in it, a read missed): a disturbed check, but
            // the fourth in a row is counted at the rate in force, as if it could not
            // measure.
            self.disturbed = self.disturbed.saturating_add(1);
            if self.disturbed < WIDE_RUN {
                return Err(Unjudged::WideBracket);
            }
            self.disturbed = 0;
            return fallback(self);
        };
        let [first, second, whole] = ranges;
        let apart = |a: (u128, u128), b: (u128, u128)| a.0 > b.1 || b.0 > a.1;
        let end = if apart(first, second) || apart(first, whole) || apart(second, whole) {
            self.disturbed = self.disturbed.saturating_add(1);
            if self.disturbed < WIDE_RUN {
                return Err(Unjudged::WideBracket);
            }
            (
                first.0.min(second.0).min(whole.0),
                first.1.max(second.1).max(whole.1),
            )
        } else {
            whole
        };
        self.disturbed = 0;
        // Too coarse for the interval: see `fallback`.
        // A range of the interval's count fine enough to tell its wraps apart.
        let fine = |r: &(u128, u128)| {
            r.1.saturating_sub(r.0)
                .saturating_add(slack.saturating_mul(2))
                < wrap / 4
        };
        if !fine(&end) {
            return fallback(self);
        }
        // The rate at the interval's start: the measurement the check that took its first
        // sample made, else the rate in force within `bound_ppb`; where neither is fine
        // enough, the interval's count is the one nearest the rate now.
        let start = self
            .measured
            .iter()
            .flatten()
            .find(|(c, _)| *c == from)
            .and_then(|&(_, m)| due_range(m, narrow_is_reference, d_wide))
            .filter(fine)
            .or_else(|| {
                let off = mul_div_ceil(expected, u128::from(self.bound_ppb), u128::from(PPB))
                    .unwrap_or(u128::MAX);
                Some((expected.saturating_sub(off), expected.saturating_add(off))).filter(fine)
            })
            .unwrap_or(end);
        self.measured.rotate_right(1);
        self.measured[0] = Some((at, m));
        self.refused = false;
        // A rate that changed inside the interval puts its count between the counts at the
        // rates of its two ends: the one count the narrow count's reads allow there.
        let lo = start.0.min(end.0).saturating_sub(slack);
        let hi = start.1.max(end.1).saturating_add(slack);
        let d = u128::from(d_narrow);
        let first = if lo <= d {
            d
        } else {
            d.saturating_add(lo.saturating_sub(d).div_ceil(wrap).saturating_mul(wrap))
        };
        if first > hi {
            // None fits: the interval's rate lay outside both (a jump, a step of a count):
            // the count nearest the rate now, for the verdicts to judge.
            return Ok(end.0.saturating_add(end.1) / 2);
        }
        if first.saturating_add(wrap) <= hi {
            // Two or more fit: a change inside the interval larger than a wrap's worth.
            self.refused = true;
            return Err(Unjudged::TooLong);
        }
        Ok(first)
    }

    /// Three samples `A`, `M`, `C`, each about `spin / 2` ticks of the narrow count after
    /// the last, the narrow count read in between (its wraps carried from read to read, so
    /// the spin may span many): the counter's and the reference's moves from `A` to `M`,
    /// from `M` to `C` and from `A` to `C`, each with its uncertainties
    /// `(d_c, u_c, d_r, u_r)`; `None` where a sample was wide, a read went back, a spin did
    /// not end, or a pair's two moves disagree with the rate in force by more than the
    /// 12.5 % a rate change may be (a read was missed: the narrow count may have wrapped
    /// unseen).
    fn local_ratio<C: Counter>(
        &mut self,
        counter: &C,
        narrow_is_reference: bool,
        clock_millihz: u64,
        spin: u128,
    ) -> Option<[Measured; 3]> {
        let cw = Width::of(counter);
        let rw = Width::new(self.reference.bits());
        let nw = if narrow_is_reference { rw } else { cw };
        let half = u64::try_from(spin.div_ceil(2)).ok()?;
        let floor = self.min_width.saturating_mul(2).saturating_add(2);
        let ref_millihz = u128::from(self.reference.frequency().as_millihz().max(1));
        let clock_millihz = u128::from(clock_millihz.max(1));
        // The other count's move over `ticks` of it, in the narrow one's ticks at the rate
        // in force.
        let in_narrow = |ticks: u64| -> Option<u128> {
            if narrow_is_reference {
                mul_div(u128::from(ticks), ref_millihz, clock_millihz)
            } else {
                mul_div(u128::from(ticks), clock_millihz, ref_millihz)
            }
        };
        let narrow_of = |(c, r): (u64, u64)| if narrow_is_reference { r } else { c };
        // The samples, and the narrow count's ticks from `A` to each.
        let mut samples = [(0u64, 0u64, 0u64); 3];
        let mut progress = [0u64; 3];
        samples[0] = self.sample(counter);
        let (mut last_n, mut total) = (narrow_of((samples[0].0, samples[0].1)), 0u64);
        for k in 1usize..3 {
            let (ca, ra, _) = samples
                .get(k.saturating_sub(1))
                .copied()
                .unwrap_or_default();
            let start = total;
            let mut moved = 0;
            for i in 0..LOCAL_READS {
                let now = if narrow_is_reference {
                    rw.value(self.reference.read())
                } else {
                    cw.value(counter.ticks())
                };
                total = total.saturating_add(nw.elapsed(last_n, now)?);
                last_n = now;
                moved = total.saturating_sub(start);
                if moved >= half {
                    break;
                }
                // A narrow count that stands still (or one far slower than the rate in
                // force) ends the spin once the other has moved twice its length.
                if i % 16 == 15 {
                    let other = if narrow_is_reference {
                        cw.elapsed(ca, cw.value(counter.ticks()))?
                    } else {
                        rw.elapsed(ra, rw.value(self.reference.read()))?
                    };
                    if in_narrow(other)? > u128::from(half).saturating_mul(2) {
                        return None;
                    }
                }
            }
            if moved < half {
                return None;
            }
            let sample = self.sample(counter);
            let n = narrow_of((sample.0, sample.1));
            total = total.saturating_add(nw.elapsed(last_n, n)?);
            last_n = n;
            if let (Some(slot), Some(p)) = (samples.get_mut(k), progress.get_mut(k)) {
                *slot = sample;
                *p = total;
            }
        }
        if samples.iter().any(|&(_, _, w)| w > floor) {
            return None;
        }
        let u_r = step_or_one(self.ref_step).saturating_mul(2);
        let c_step = step_or_one(self.counter_step).saturating_mul(2);
        let measure = |i: usize, j: usize| {
            let ((c1, r1, w1), (c2, r2, w2)) = (*samples.get(i)?, *samples.get(j)?);
            let d_n = progress.get(j)?.checked_sub(*progress.get(i)?)?;
            let d_o = if narrow_is_reference {
                cw.elapsed(c1, c2)?
            } else {
                rw.elapsed(r1, r2)?
            };
            // The two moves agree with the rate in force within 12.5 % and the reads'
            // slack, or a read of the narrow count was missed.
            let due = in_narrow(d_o)?;
            let room = mul_div_ceil(due, u128::from(GROSS_PPB), u128::from(PPB))?
                .saturating_add(u128::from(w1.saturating_add(w2).saturating_add(c_step)))
                .saturating_add(u128::from(u_r));
            if u128::from(d_n).abs_diff(due) > room {
                return None;
            }
            let (d_c, d_r) = if narrow_is_reference {
                (d_o, d_n)
            } else {
                (d_n, d_o)
            };
            Some(Measured {
                d_c,
                u_c: w1.saturating_add(w2).saturating_add(c_step),
                d_r,
                u_r,
            })
        };
        Some([measure(0, 1)?, measure(1, 2)?, measure(0, 2)?])
    }
}

/// A measurement of the counter against the reference between two samples: each count's
/// move and its uncertainty (the two brackets and two steps; two steps), in its own ticks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Measured {
    d_c: u64,
    u_c: u64,
    d_r: u64,
    u_r: u64,
}

/// The range of the narrow count's ticks over `d_wide` ticks of the other, from one
/// measurement (see [`Watchdog::local_ratio`]).
fn due_range(m: Measured, narrow_is_reference: bool, d_wide: u64) -> Option<(u128, u128)> {
    let (d_n, u_n, d_o, u_o) = if narrow_is_reference {
        (m.d_r, m.u_r, m.d_c, m.u_c)
    } else {
        (m.d_c, m.u_c, m.d_r, m.u_r)
    };
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
}

/// What an interval made due of a narrow count, at the rate in force.
pub(super) struct Due {
    /// The other count's move over the interval.
    pub(super) d_wide: u64,
    /// The interval, in reference ticks.
    pub(super) dx: u64,
    /// The narrow count's move over the interval, modulo its wrap.
    pub(super) d_narrow: u64,
    /// The counter's raw read of the interval's first sample, and of its last.
    pub(super) from: u64,
    /// See `from`.
    pub(super) at: u64,
    /// The narrow count's ticks due at the rate in force.
    pub(super) expected: u128,
    /// Its ticks the rate in force cannot tell apart (brackets, steps).
    pub(super) slack: u128,
}

/// The longest a check spins to measure the rate for a narrow count's wraps, in µs of
/// that count's ticks (see *Widths*).
const MAX_SPIN_US: u64 = 8_000;

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
