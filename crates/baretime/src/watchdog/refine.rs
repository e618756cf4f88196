//! What the window concludes after a steady interval: its parts against each other, a
//! one-off step of a count told from a move, the window against the clock, and the steer
//! toward the window's rate (*Detection time* and *Refinement* on [`Watchdog`]).

use super::*;

impl<R: Reference> Watchdog<R> {
    /// The window's parts against each other: where they disagree beyond their bounds, the
    /// rate moved inside the window (a change under an interval's threshold, a ramp): the
    /// window keeps its recent part and its bound carries the move until the window has
    /// grown eight times as long without moving again. The first move after a quiet window
    /// recalibrates the clock to the recent part's rate ([`Watch::Changed`]); further moves
    /// while it still moves are followed by refinement. Moves the split on when the recent
    /// part reaches half the window. The bound reported also covers the way from the recent
    /// part's rate to the last interval's, and that interval's bound: a step early in the
    /// recent part (or a large one under wide intervals) leaves its rate short of the new one.
    pub(super) fn compare_parts<C: Counter>(
        &mut self,
        clock: &Clock<C>,
        last: &Span,
        before: Point,
        seen_before: bool,
        (ref_millihz, c_step, r_step): (u64, u64, u64),
        tolerance: u64,
    ) -> Option<Watch> {
        let span = |a: &Point, b: &Point| b.x.saturating_sub(a.x);
        let split =
            |end: &Point| {
                let parts = measure(&self.anchor, &self.mid, ref_millihz, c_step, r_step)
                    .zip(measure(&self.mid, end, ref_millihz, c_step, r_step));
                parts.and_then(|(older, recent)| {
                    let apart = ppb_apart(recent.millihz, older.millihz);
                    (apart > older.bound_ppb.saturating_add(recent.bound_ppb)).then_some((
                        older,
                        recent,
                        apart,
                        recent.millihz > older.millihz,
                    ))
                })
            };
        let moved = split(&self.wend);
        // Still moving the way it moved: followed. A move back is a new change.
        let moving = self.drift_ppb != 0 && moved.is_some_and(|(_, _, _, up)| up == self.drift_up);
        // A move the window's samples still explain as a one-off (a step of one count or
        // the other between two samples, one rate on both sides, inside the bound of the part
        // the step is not in) is not a change: it is reported once the samples rule out every
        // such step.
        if let Some((older, recent, ..)) = moved.filter(|_| !moving) {
            if self.one_off_fits(rate_range(&older), rate_range(&recent)) {
                return None;
            }
        }
        // The first move after a quiet window is reported once an interval wholly after it
        // bounds the new rate: at once where the parts disagree without this interval (or
        // did at the last check), else at the next check.
        if moved.is_some()
            && !moving
            && !seen_before
            && (before == self.mid || split(&before).is_none())
        {
            self.deferred = true;
            return None;
        }
        let Some((older, recent, apart, up)) = moved else {
            if self.drift_ppb != 0
                && span(&self.anchor, &self.wend) >= self.drift_span.saturating_mul(8)
            {
                self.drift_ppb = 0;
            }
            if span(&self.anchor, &self.wend) >= self.pace_span.saturating_mul(8) {
                self.pace_ppb = 0;
            }
            if span(&self.anchor, &self.mid).saturating_mul(2) < span(&self.anchor, &self.wend) {
                self.mid = self.wend;
            }
            return None;
        };
        self.set_drift(
            apart,
            apart
                .saturating_add(older.bound_ppb)
                .saturating_add(recent.bound_ppb),
            span(&self.anchor, &self.wend) / 2,
            up,
        );
        self.note_move(self.wend.x, span(&self.anchor, &self.wend));
        if moving {
            self.anchor_at(self.mid, self.wend);
            self.loose_start = true;
            self.mid = self.wend;
            // Still moving: refinement follows it (slew-limited), its bound carrying the
            // move; only the first move after a quiet window is reported.
            return None;
        }
        // Reported: the window starts afresh after it. Its recent part holds the rate from
        // before the move too (a ramp that began inside it): a window kept from there would
        // bound the rate now by an average over both.
        self.anchor_at(self.wend, self.wend);
        self.loose_start = true;
        self.note_change(
            clock.scale().millihz(),
            recent.millihz,
            self.wend.x,
            last.dx.checked_div(last.n).unwrap_or(last.dx),
        );
        let pace = self.pace(ref_millihz, c_step, r_step);
        let bound = recent
            .bound_ppb
            .saturating_add(self.moved_ppb(ref_millihz, c_step, r_step))
            .max(
                ppb_apart(last.millihz, recent.millihz)
                    .saturating_add(last.bound_ppb)
                    .saturating_add(pace),
            );
        let rate = measured(recent.millihz, bound.saturating_add(tolerance));
        let recalibrated = clock.recalibrate(rate);
        if matches!(recalibrated, Ok(()) | Err(ClockError::Late)) {
            self.bound_ppb = bound.saturating_add(rounding_ppb(recent.millihz));
            self.claim_ppb = self.bound_ppb;
        }
        Some(Watch::Changed { rate, recalibrated })
    }

    /// Whether the window's kept samples fit a one-off: a step of one count or the other
    /// between two consecutive samples (or none), the samples before it on one line and those
    /// after it on a parallel one, of one rate: the counter's on both sides, which the part
    /// of the window the step is not in measures within its bound. For a step inside the
    /// recent part (or none), `older`'s range (mHz, floor and ceiling), as before issue 28's
    /// count-step fix. For a step inside the older part, `recent`'s (the older part's rate
    /// is the step's as much as the counter's: one step of 1.2× an interval's bound was (c)
    /// 38 s later while `older`'s range was taken for every step,
    /// `one_count_step_is_no_change` in `tests/adversary_watchdog5.rs`), where two samples
    /// before it bound the rate (a step in the window's first interval fits any rate, as a
    /// change at its anchor does) and the step shows: the two samples it lies between allow
    /// no such rate (a ramp bends the samples off one line gradually, each two neighbours
    /// near the rate between them; without this, a slow ramp's first report came later,
    /// `tests/adversary_watchdog3.rs` p50 15.6 → 16.8 s). Samples the window left out
    /// ([`Watchdog::push_knot`]) count before every kept one with their lines' rates. A
    /// counter's rate that moved makes the samples after the move lie on a line of the new
    /// rate, which rules out every such step once they span enough to exclude the old rate;
    /// a step of a count (or a rate excursion that ended between two samples) never does.
    /// Up to 33 × 32 pair ranges per call.
    fn one_off_fits(&self, older: (u64, u64), recent: (u64, u64)) -> bool {
        let (ref_millihz, c_step, r_step) = self.steps;
        let live = self.live();
        let n = live.len();
        let mid = self.mid.x;
        let everything = (0, u64::MAX);
        // The range of the lines through every pair of `live[from..to]` (`None`: no line fits).
        let mut before = [None; KNOTS + 1];
        let mut after = [None; KNOTS + 1];
        let pair = |a: &Point, b: &Point| pair_range(a, b, ref_millihz, c_step, r_step);
        let pair_at =
            |a: usize, b: usize| live.get(a).zip(live.get(b)).and_then(|(a, b)| pair(a, b));
        // before[k]: samples 0..k; after[k]: samples k..n.
        let mut r = Some(everything);
        for k in 0..=n {
            if let Some(slot) = before.get_mut(k) {
                *slot = r;
            }
            for j in 0..k {
                if let (Some(have), Some(pr)) = (r, pair_at(j, k)) {
                    r = meet(Some(have), pr);
                }
            }
        }
        let mut r = Some(everything);
        for k in (0..=n).rev() {
            for j in k.saturating_add(1)..n {
                if let (Some(have), Some(pr)) = (r, pair_at(k, j)) {
                    r = meet(Some(have), pr);
                }
            }
            if let Some(slot) = after.get_mut(k) {
                *slot = r;
            }
        }
        (0..=n).any(|k| {
            let seen = before.get(k).copied().flatten();
            let later = after.get(k).copied().flatten();
            let through =
                |first: Option<(u64, u64)>| first.zip(later).and_then(|(b, a)| meet(Some(b), a));
            // The step lies between `a` (sample k − 1, or the last left out) and `b`
            // (sample k); none at either end.
            let a = match k.checked_sub(1) {
                Some(i) => live.get(i).copied(),
                None => self.dropped.map(|(p, _)| p),
            };
            let b = live.get(k);
            let older_step = || {
                // The samples left out lie before it too: their lines' rates count.
                let seen = match self.dropped {
                    Some((_, d)) => d.zip(seen).and_then(|(d, s)| meet(Some(d), s)),
                    None => seen,
                };
                let Some(rates) = through(seen).and_then(|r| meet(Some(r), recent)) else {
                    return false;
                };
                let bounded = seen != Some(everything);
                let shows = match a.zip(b).and_then(|(a, b)| pair(&a, b)) {
                    Some(p) => rates.0 < p.0 || rates.1 > p.1,
                    None => true,
                };
                bounded && shows
            };
            // The older part's rate, as for a step inside the recent part (or none), holds
            // for every step as it did before; one inside the older part may also take the
            // recent part's.
            let older_rate = through(seen).is_some_and(|r| meet(Some(r), older).is_some());
            match (a, b) {
                (Some(a), Some(_)) if a.x < mid => older_rate || older_step(),
                _ => older_rate,
            }
        })
    }

    /// The window (a worst case) against the clock's rate and [`WatchdogHealth::bound_ppb`]
    /// (the start's, a statistical figure, or one a change left): where they disagree beyond
    /// both, the clock's rate is wrong — the counter's rate changed under an interval's
    /// threshold while the clock's bound was tighter than the window's, so the window was
    /// not the baseline — and the clock is recalibrated to the window's rate
    /// ([`Watch::Changed`]). The last interval, steady against the baseline, bounds where the
    /// rate is now: the bound covers the way from the window's rate to it.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn window_against_clock<C: Counter>(
        &mut self,
        clock: &Clock<C>,
        span: &Span,
        base: (u64, u64),
        before: Point,
        seen_before: bool,
        (ref_millihz, c_step, r_step): (u64, u64, u64),
        tolerance: u64,
    ) -> Option<Watch> {
        let now = clock.scale().millihz().max(1);
        let claim = self.claim_ppb.min(self.bound_ppb);
        let drift = self.drift(ref_millihz, c_step, r_step);
        let off = |end: &Point| {
            measure(&self.anchor, end, ref_millihz, c_step, r_step).filter(|w| {
                ppb_apart(now, w.millihz) > w.bound_ppb.saturating_add(drift).saturating_add(claim)
            })
        };
        let w = off(&self.wend)?;
        // As for the window's parts: reported once an interval wholly after the move bounds
        // the rate now.
        if !seen_before && (before == self.anchor || off(&before).is_none()) {
            self.deferred = true;
            return None;
        }
        self.note_change(
            now,
            w.millihz,
            self.wend.x,
            span.dx.checked_div(span.n).unwrap_or(span.dx),
        );
        let w_bound = w
            .bound_ppb
            .saturating_add(self.moved_ppb(ref_millihz, c_step, r_step));
        // |now − w| + |interval − baseline| + the interval's own bound, and the window's
        // (and the pace a rate that keeps moving carries).
        let bound = ppb_apart(w.millihz, base.0)
            .saturating_add(base.1)
            .saturating_add(span.bound_ppb.saturating_mul(2))
            .saturating_add(self.pace(ref_millihz, c_step, r_step))
            .max(w_bound)
            .saturating_add(rounding_ppb(w.millihz));
        let rate = measured(w.millihz, bound.saturating_add(tolerance));
        let recalibrated = clock.recalibrate(rate);
        if matches!(recalibrated, Ok(()) | Err(ClockError::Late)) {
            self.bound_ppb = bound;
            self.claim_ppb = bound;
            self.note_move(self.wend.x, self.wend.x.saturating_sub(self.anchor.x));
            self.anchor_at(self.wend, self.wend);
            self.loose_start = true;
            self.drift_ppb = 0;
        }
        Some(Watch::Changed { rate, recalibrated })
    }

    /// Refinement: steers the clock toward the window's rate, slew-limited, where that
    /// tightens the bound on the clock's rate. The bound also covers the range of the
    /// window's newest samples that one rate fits (all of them, unless the rate was not
    /// one rate over the window: an excursion that came back unseen).
    pub(super) fn refine<C: Counter>(
        &mut self,
        clock: &Clock<C>,
        ref_millihz: u64,
        c_step: u64,
        r_step: u64,
        tolerance: u64,
    ) {
        let Some(w) = measure(&self.anchor, &self.wend, ref_millihz, c_step, r_step) else {
            return;
        };
        let drift = self.moved_ppb(ref_millihz, c_step, r_step);
        // A ramp only thought hidden (the rate not seen moving lately) widens the bound, not
        // the band the clock is left alone in: it is steered as at a steady rate.
        let near = w.bound_ppb.saturating_add(if self.moving() {
            drift
        } else {
            self.seen_ppb(ref_millihz, c_step, r_step)
        });
        let w = Span {
            bound_ppb: w.bound_ppb.saturating_add(drift),
            ..w
        };
        let bound_at = |this: &Self, millihz: u64| {
            from_measured(ppb_apart(millihz, w.millihz), w.bound_ppb)
                .max(this.range_bound(millihz).saturating_add(drift))
        };
        let now = clock.scale().millihz().max(1);
        let stay = bound_at(self, now);
        // While the rate moves, an older bound goes stale: the window's is the one that
        // holds now, even if wider.
        if stay < self.bound_ppb || drift != 0 || self.kinked() {
            self.bound_ppb = stay;
        }
        self.claim_ppb = self.claim_ppb.min(stay);
        // Within half the window's bound: close enough, no write.
        if self.slew_ppb == 0 || ppb_apart(now, w.millihz) <= near / 2 {
            return;
        }
        let slew = saturate_u64(
            mul_div_ceil(u128::from(now), u128::from(self.slew_ppb), u128::from(PPB))
                .unwrap_or(u128::MAX),
        )
        .max(1);
        let target = w
            .millihz
            .clamp(now.saturating_sub(slew), now.saturating_add(slew));
        let bound = bound_at(self, target).saturating_add(rounding_ppb(target));
        if target == now || bound >= self.bound_ppb {
            return;
        }
        let rate = measured(target, bound.saturating_add(tolerance));
        if matches!(clock.recalibrate(rate), Ok(()) | Err(ClockError::Late)) {
            self.bound_ppb = bound;
            self.claim_ppb = bound;
            self.health.steers = self.health.steers.saturating_add(1);
        }
    }
}
