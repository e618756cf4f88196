//! Refinement's window: its kept samples (knots), the range of rates of the lines through
//! them, and the bound's model of a rate that may still be moving (the pace carried, the
//! steady ramp's worst case; *Refinement* on [`Watchdog`], [`WatchdogHealth::bound_ppb`]).

use super::*;

impl<R: Reference> Watchdog<R> {
    /// While the rate moves (`drift_ppb` non-zero): how far it can have moved since the
    /// middle of the window. The lesser of the pace last seen (`drift_ppb` over
    /// `drift_span`) carried over half the window, at least `drift_ppb`, and what a steady
    /// ramp of any pace can have moved while one line still fits every sample of the
    /// window ([`ramp_ppb`]), as the baseline's bound (the window's, for detection).
    pub(super) fn drift(&self, ref_millihz: u64, c_step: u64, r_step: u64) -> u64 {
        self.drift_over(&self.anchor, ref_millihz, c_step, r_step)
    }

    /// [`Watchdog::drift`] with the ramp's worst case over the samples from `from` to the
    /// window's end.
    fn drift_over(&self, from: &Point, ref_millihz: u64, c_step: u64, r_step: u64) -> u64 {
        if self.drift_ppb == 0 {
            return 0;
        }
        let half = self.wend.x.saturating_sub(self.anchor.x) / 2;
        let moved = mul_div_ceil(
            u128::from(self.drift_ppb),
            u128::from(half),
            u128::from(self.drift_span.max(1)),
        )
        .unwrap_or(u128::MAX);
        let carried = saturate_u64(moved).max(self.drift_ppb);
        let widest = self.live().iter().map(|k| k.width).max().unwrap_or(0);
        let ramp = ramp_ppb(from, &self.wend, widest, ref_millihz, c_step, r_step);
        carried.min(ramp)
    }

    /// The rate moved by `ppb` over `span` reference ticks (`up`: faster): the window's
    /// drift; `worst`, the most it can have moved given the bounds of the two rates
    /// compared (their distance plus both bounds), is the pace the bound carries.
    pub(super) fn set_drift(&mut self, ppb: u64, worst: u64, span: u64, up: bool) {
        (self.drift_ppb, self.drift_span, self.drift_up) = (ppb, span, up);
        self.set_pace(worst, span);
    }

    /// A pace of `ppb` over `span` ticks seen: carried for the bound (a faster one still
    /// carried stays).
    pub(super) fn set_pace(&mut self, ppb: u64, span: u64) {
        let span = span.max(1);
        let faster = u128::from(self.pace_ppb).saturating_mul(u128::from(span))
            > u128::from(ppb).saturating_mul(u128::from(self.pace_span.max(1)));
        if !(self.pace_ppb != 0 && faster) {
            (self.pace_ppb, self.pace_span) = (ppb, span);
        }
    }

    /// A change reported from `from` to `to` (mHz) at the sample `at`, the hook's period
    /// `period` ticks: two changes the same way within eight periods are a rate that keeps
    /// moving (a ramp reported again and again), whose pace the bound carries.
    pub(super) fn note_change(&mut self, from: u64, to: u64, at: u64, period: u64) {
        let up = to > from;
        if let Some((m, x, was_up)) = self.last_change {
            let span = at.saturating_sub(x);
            if was_up == up && span != 0 && span <= period.saturating_mul(8) {
                self.set_pace(ppb_apart(to, m), span);
            }
        }
        self.last_change = Some((to, at, up));
    }

    /// The pace last seen, while it has not lapsed, as [`Watchdog::drift`] carries it
    /// over the window: for the bound only. A change reported (two intervals that agree,
    /// the window against the clock) restarts the window and its drift, but not the
    /// rate's moving: a ramp whose pace per period is under an interval's threshold is
    /// reported again and again, each time from a window too short to show the pace.
    pub(super) fn pace(&self, ref_millihz: u64, c_step: u64, r_step: u64) -> u64 {
        let window = self.wend.x.saturating_sub(self.anchor.x);
        if window >= self.pace_span.saturating_mul(8) {
            return 0;
        }
        let half = window / 2;
        let moved = mul_div_ceil(
            u128::from(self.pace_ppb),
            u128::from(half),
            u128::from(self.pace_span.max(1)),
        )
        .unwrap_or(u128::MAX);
        let carried = saturate_u64(moved).max(self.pace_ppb);
        let widest = self.live().iter().map(|k| k.width).max().unwrap_or(0);
        carried.min(ramp_ppb(
            self.live().first().unwrap_or(&self.anchor),
            &self.wend,
            widest,
            ref_millihz,
            c_step,
            r_step,
        ))
    }

    /// What the bound carries for a rate that may still be moving: the window's drift or
    /// the pace last seen, the wider.
    ///
    /// Here the ramp's worst case is taken over the newest samples one line fits (all of
    /// them, unless the rate was not one rate over the window): it holds only where one
    /// line fits.
    pub(super) fn moved_ppb(&self, ref_millihz: u64, c_step: u64, r_step: u64) -> u64 {
        let fitted = *self.live().first().unwrap_or(&self.anchor);
        let seen = self.seen_ppb(ref_millihz, c_step, r_step);
        if !self.may_ramp() {
            return seen;
        }
        // A rate seen moving lately may still move at a pace the window has not shown: a
        // steady ramp's worst case while one line fits the window's newest samples (none
        // where they are too few to span anything: the bound is then the last report's).
        let widest = self.live().iter().map(|k| k.width).max().unwrap_or(0);
        match ramp_ppb(&fitted, &self.wend, widest, ref_millihz, c_step, r_step) {
            u64::MAX => seen,
            ramp => seen.max(ramp),
        }
    }

    /// What [`Watchdog::moved_ppb`] carries for a move seen (the window's drift or the pace
    /// last seen), without a steady ramp's worst case.
    pub(super) fn seen_ppb(&self, ref_millihz: u64, c_step: u64, r_step: u64) -> u64 {
        let fitted = *self.live().first().unwrap_or(&self.anchor);
        self.drift_over(&fitted, ref_millihz, c_step, r_step)
            .max(self.pace(ref_millihz, c_step, r_step))
    }

    /// The rate was seen to move at the sample `at`, over `span` reference ticks: it may
    /// still be moving until eight times `span` has passed (a later end already noted stays).
    /// The last sample no line fit ([`Watchdog::kink`]) counts as a move from here on: a ramp
    /// bent the window's samples before the move seen now (a step against its pace) and may
    /// go on after it.
    pub(super) fn note_move(&mut self, at: u64, span: u64) {
        let end = |(at, span): (u64, u64)| at.saturating_add(span.saturating_mul(8));
        for (at, span) in [(at, span), self.kink] {
            if span != 0 && (self.moved.1 == 0 || end((at, span)) >= end(self.moved)) {
                self.moved = (at, span);
            }
        }
    }

    /// Whether the rate was seen to move lately ([`Watchdog::note_move`]): it may still be
    /// moving, at a steady pace (a ramp) or in steps each under an interval's threshold (a
    /// staircase), neither of which the samples since need show.
    pub(super) fn moving(&self) -> bool {
        self.moved.1 != 0
            && self.wend.x.saturating_sub(self.moved.0) < self.moved.1.saturating_mul(8)
    }

    /// Whether a steady ramp may be going on that the samples since have not shown: the rate
    /// seen moving lately ([`Watchdog::moving`]), or a ramp the window before a change
    /// confirmed by two intervals may have hidden ([`Watchdog::ramp_until`]).
    pub(super) fn may_ramp(&self) -> bool {
        self.moving() || self.wend.x < self.ramp_until
    }

    /// The window's kept samples, oldest first.
    pub(super) fn live(&self) -> &[Point] {
        self.knots.get(..self.n_knots).unwrap_or(&[])
    }

    /// Refinement's window starts again at `anchor`, up to `end`: afresh where they are the
    /// same sample, else keeping the window's samples from `anchor` on (`anchor` first).
    pub(super) fn anchor_at(&mut self, anchor: Point, end: Point) {
        (self.anchor, self.mid, self.wend) = (anchor, anchor, end);
        self.loose_start = false;
        let mut kept = [anchor; KNOTS];
        let mut n = 1usize;
        if anchor != end {
            for k in self.live().iter().filter(|k| k.x > anchor.x) {
                if let Some(slot) = kept.get_mut(n) {
                    *slot = *k;
                    n = n.saturating_add(1);
                }
            }
        }
        self.knots = kept;
        self.n_knots = n;
        self.range = None;
        self.dropped = None;
        if anchor != end {
            self.rerange();
        }
    }

    /// Recomputes the window's range from its kept samples only, from the newest back;
    /// where a sample leaves no line through all the newer ones' brackets (the rate was
    /// not one rate over them), the samples from it back are dropped: the newest samples
    /// that one rate fits remain.
    fn rerange(&mut self) {
        let (ref_millihz, c_step, r_step) = self.steps;
        let all = self.knots;
        let live = all.get(..self.n_knots).unwrap_or(&[]);
        let mut range: Option<(u64, u64)> = None;
        let mut start = live.len().saturating_sub(1);
        let mut dropped = false;
        'back: for (i, a) in live.iter().enumerate().rev().skip(1) {
            let mut r = range;
            for b in live.iter().skip(i.saturating_add(1)) {
                if let Some(pr) = pair_range(a, b, ref_millihz, c_step, r_step) {
                    match meet(r, pr) {
                        Some(m) => r = Some(m),
                        None => {
                            dropped = true;
                            break 'back;
                        }
                    }
                }
            }
            range = r;
            start = i;
        }
        if dropped {
            // The samples left out, on one line of their own or none: what the one-off rule
            // keeps of them.
            let gone = live.get(..start).unwrap_or(&[]);
            let mut r = Some((0, u64::MAX));
            for (i, a) in gone.iter().enumerate() {
                for b in gone.iter().skip(i.saturating_add(1)) {
                    if let (Some(have), Some(pr)) =
                        (r, pair_range(a, b, ref_millihz, c_step, r_step))
                    {
                        r = meet(Some(have), pr);
                    }
                }
            }
            let before = self.dropped.map_or(Some((0, u64::MAX)), |(_, d)| d);
            let r = before.zip(r).and_then(|(b, r)| meet(Some(b), r));
            if let Some(last) = gone.last() {
                self.dropped = Some((*last, r));
            }
            let mut kept = [self.wend; KNOTS];
            let mut n = 0usize;
            for (slot, k) in kept.iter_mut().zip(live.iter().skip(start)) {
                *slot = *k;
                n = n.saturating_add(1);
            }
            self.knots = kept;
            self.n_knots = n;
        }
        self.range = range;
    }

    /// Adds the window's newest sample `p` (now `wend`): every pair it makes with the kept
    /// samples narrows the window's range. Where none is left, the rate was not one rate
    /// over the window (an excursion that came back, a change it holds): only the newest
    /// samples that one rate fits are kept, and [`WatchdogHealth::bound_ppb`] is what they
    /// allow, however wider.
    pub(super) fn push_knot<C: Counter>(
        &mut self,
        clock: &Clock<C>,
        p: Point,
        ref_millihz: u64,
        c_step: u64,
        r_step: u64,
    ) {
        self.steps = (ref_millihz, c_step, r_step);
        let mut range = self.range;
        let mut kink = false;
        for a in self.live() {
            if let Some(pr) = pair_range(a, &p, ref_millihz, c_step, r_step) {
                match meet(range, pr) {
                    Some(m) => range = Some(m),
                    None => kink = true,
                }
            }
        }
        if self.n_knots >= KNOTS {
            // Every other older sample goes; the anchor and the newest stay.
            let old = self.knots;
            let mut kept = [p; KNOTS];
            let mut n = 0usize;
            for (slot, k) in kept.iter_mut().zip(old.iter().step_by(2).chain(old.last())) {
                *slot = *k;
                n = n.saturating_add(1);
            }
            self.knots = kept;
            self.n_knots = n;
        }
        if let Some(slot) = self.knots.get_mut(self.n_knots) {
            *slot = p;
            self.n_knots = self.n_knots.saturating_add(1);
        }
        if !kink {
            self.range = range;
            return;
        }
        self.rerange();
        if self.kinked() {
            // A sample no line fits with the older ones: the rate moved, over the span one
            // line still fits.
            let fitted = self.live().first().map_or(0, |k| p.x.saturating_sub(k.x));
            self.kink = (p.x, fitted);
            if self.may_ramp() {
                self.note_move(p.x, fitted);
            }
            let now = clock.scale().millihz().max(1);
            let bound =
                self.range_bound(now)
                    .saturating_add(self.moved_ppb(ref_millihz, c_step, r_step));
            self.bound_ppb = self.bound_ppb.max(bound);
        }
    }

    /// Whether one rate fits only the window's newest samples, not all since its anchor.
    pub(super) fn kinked(&self) -> bool {
        self.live().first().is_some_and(|k| *k != self.anchor)
    }

    /// The worst-case distance (ppb) of a clock at `millihz` from the counter's rate now,
    /// where the rate has been one rate since one of the newest window's first
    /// [`SUFFIXES`] samples: the widest of those spans' rates and bounds. One rate fitting
    /// every sample from the first on does not mean the rate was one rate since it: a sample
    /// or two from an excursion's end can still fit inside their brackets.
    pub(super) fn range_bound(&self, millihz: u64) -> u64 {
        let (ref_millihz, c_step, r_step) = self.steps;
        let mut worst = None;
        // Without a sample left out or a start after a deviation, the window's own span.
        let spans = if self.kinked() || self.loose_start {
            SUFFIXES
        } else {
            1
        };
        for first in self.live().iter().take(spans) {
            if let Some(w) = measure(first, &self.wend, ref_millihz, c_step, r_step) {
                let d = from_measured(ppb_apart(millihz, w.millihz), w.bound_ppb);
                worst = Some(worst.map_or(d, |v: u64| v.max(d)));
            }
        }
        worst
            .unwrap_or(u64::MAX)
            .saturating_add(rounding_ppb(millihz))
    }
}

/// The rates (mHz, floor and ceiling) of every line through both samples' brackets (see
/// [`measure`]); `None` where the span is within its own uncertainty (no constraint).
pub(super) fn pair_range(
    a: &Point,
    b: &Point,
    ref_millihz: u64,
    c_step: u64,
    r_step: u64,
) -> Option<(u64, u64)> {
    if r_step == u64::MAX {
        return None;
    }
    let dy = b.y.checked_sub(a.y)?;
    let dx = u128::from(b.x.checked_sub(a.x)?);
    let u_y = u128::from(a.width)
        .saturating_add(u128::from(b.width))
        .saturating_add(u128::from(c_step).saturating_mul(2));
    let u_x = u128::from(r_step);
    if dy <= u_y || dx <= u_x {
        return None;
    }
    let lo = mul_div(
        dy.saturating_sub(u_y),
        u128::from(ref_millihz),
        dx.saturating_add(u_x).saturating_mul(2),
    )?;
    let hi = mul_div_ceil(
        dy.saturating_add(u_y),
        u128::from(ref_millihz),
        dx.saturating_sub(u_x).saturating_mul(2),
    )?;
    Some((saturate_u64(lo), saturate_u64(hi)))
}

/// The overlap of two ranges (`None` for the first: everything); `None` where they do not
/// overlap.
pub(super) fn meet(a: Option<(u64, u64)>, b: (u64, u64)) -> Option<(u64, u64)> {
    let (lo, hi) = match a {
        Some(a) => (a.0.max(b.0), a.1.min(b.1)),
        None => b,
    };
    (lo <= hi).then_some((lo, hi))
}

/// How far (ppb) a rate ramping at a steady pace can have moved from `a` to `b`'s middle
/// to `b` while one line still fits every sample between (each bracket at most `widest`
/// wide): the ramp bends the samples off any line by `s·T²/8` (pace `s`, span `T`), which
/// must stay within the brackets' sum, so the move over `T/2`, `s·T/2`, is at most four
/// times the span's own bound with both brackets `widest` wide.
fn ramp_ppb(a: &Point, b: &Point, widest: u64, ref_millihz: u64, c_step: u64, r_step: u64) -> u64 {
    let wide = |p: &Point| Point {
        width: widest,
        ..*p
    };
    measure(&wide(a), &wide(b), ref_millihz, c_step, r_step)
        .map_or(u64::MAX, |w| w.bound_ppb.saturating_mul(5))
}
