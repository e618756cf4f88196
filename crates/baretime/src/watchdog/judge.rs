//! The check's decision: the interval since the last accepted sample measured, unwrapped
//! and judged against the baseline (*The verdicts* on [`Watchdog`]).

use super::*;

impl<R: Reference> Watchdog<R> {
    pub(super) fn judge<C: Counter>(&mut self, clock: &Clock<C>) -> Watch {
        let counter = clock.counter();
        if self.last.is_some() {
            self.since = self.since.saturating_add(1);
        }
        let (c0, r, width) = self.sample(counter);
        if width == u64::MAX {
            return Watch::NoVerdict(Unjudged::WideBracket);
        }
        self.min_width = self.min_width.min(width);
        let Some(last) = self.last else {
            let first = Point {
                c0_raw: c0,
                r_raw: r,
                y: u128::from(width),
                x: 0,
                width,
            };
            self.set_last(first);
            self.anchor_at(first, first);
            return Watch::NoVerdict(Unjudged::First);
        };
        let cw = Width::of(counter);
        let rw = Width::new(self.reference.bits());
        let wide = |floor: u64| width > floor.saturating_mul(2).saturating_add(2);
        if wide(self.min_width) {
            // A run of wide checks is a read path that became slower for good: its
            // narrowest bracket is the floor from then on (a bracket's width is the sample's
            // worst-case uncertainty, and the bound carries it).
            self.wide = (self.wide.0.saturating_add(1), self.wide.1.min(width));
            if self.wide.0 >= WIDE_RUN {
                self.min_width = self.wide.1;
            }
        }
        if wide(self.min_width) {
            // Rejected, but its reads are good reads of both counts: carry them forward,
            // so the gap between accepted samples never aliases a narrow count.
            let _ = carry(&mut self.seen_c, cw, c0);
            let _ = carry(&mut self.seen_r, rw, r);
            return Watch::NoVerdict(Unjudged::WideBracket);
        }
        self.wide = (0, u64::MAX);
        let ref_millihz = self.reference.frequency().as_millihz().max(1);
        let clock_millihz = clock.scale().millihz().max(1);
        let c_step = step_or_one(self.counter_step);
        // The reference stood still across the check's own reads (two reads of one value
        // more than twice its step apart, at the rate in force, besides the counter's
        // steps): it stands still now (an emulated timer stalled with its vCPU, a bus
        // held), and a sample taken inside its stand-still would split it into two steps of
        // its count in consecutive intervals, which two intervals cannot tell from a
        // change. The interval goes on to the next check, which sees the stand-still whole,
        // as one step.
        if self.ref_step != u64::MAX {
            let step_c = mul_div(
                u128::from(self.ref_step),
                u128::from(clock_millihz),
                u128::from(ref_millihz),
            )
            .unwrap_or(u128::MAX);
            let still = step_c
                .saturating_mul(2)
                .saturating_add(u128::from(c_step).saturating_mul(2));
            if u128::from(self.still_ticks) > still {
                let _ = carry(&mut self.seen_c, cw, c0);
                let _ = carry(&mut self.seen_r, rw, r);
                return Watch::NoVerdict(Unjudged::ReferenceStill);
            }
        }

        self.unmeasured = false;
        // Unwrap: the side with the longer wrap period by the half-range rule (from sample
        // to sample, rejected ones included), the other against the rate in force.
        let wrap_ns = |mask: u64, millihz: u64| {
            mul_div(u128::from(mask), 1_000_000_000_000, u128::from(millihz)).unwrap_or(u128::MAX)
        };
        let counter_first = wrap_ns(cw.mask(), clock_millihz) >= wrap_ns(rw.mask(), ref_millihz);
        let (d_c, d_x) = if counter_first {
            let Some(d_c) = carry(&mut self.seen_c, cw, c0) else {
                // The step: where the counter is against where it was due, the reference's
                // move since the last sample (modulo its wrap) at the rate in force.
                let moved = match cw.elapsed(last.c0_raw, c0) {
                    Some(f) => i128::from(f),
                    None => i128::from(cw.delta(c0, last.c0_raw)).saturating_neg(),
                };
                let due = mul_div(
                    u128::from(rw.delta(last.r_raw, r)),
                    u128::from(clock_millihz),
                    u128::from(ref_millihz),
                )
                .unwrap_or(u128::MAX);
                self.restart_at(c0, r, width, last);
                return self.jumped(step_ns(moved, due, clock_millihz));
            };
            let expected = mul_div(
                u128::from(d_c),
                u128::from(ref_millihz),
                u128::from(clock_millihz),
            )
            .unwrap_or(u128::MAX);
            // What the clock's rate cannot tell apart, in reference ticks: the brackets and
            // both counts' steps.
            let slack = mul_div_ceil(
                u128::from(last.width.saturating_add(width))
                    .saturating_add(u128::from(c_step).saturating_mul(2)),
                u128::from(ref_millihz),
                u128::from(clock_millihz),
            )
            .unwrap_or(u128::MAX)
            .saturating_add(u128::from(step_or_one(self.ref_step)).saturating_mul(2));
            // Wraps the rate in force cannot count are counted from a short measurement
            // of the rate, taken now, where it can.
            let ambiguous = self.wraps_ambiguous(rw, expected, slack, saturate_u64(expected));
            let expected = match self.expected_narrow(
                counter,
                true,
                ambiguous,
                clock_millihz,
                Due {
                    d_wide: d_c,
                    dx: saturate_u64(expected),
                    d_narrow: rw.delta(last.r_raw, r),
                    from: last.c0_raw,
                    at: c0,
                    expected,
                    slack,
                },
            ) {
                Ok(expected) => expected,
                Err(why) => return self.unmeasured_verdict(why, (cw, rw), (c0, r, width), last),
            };
            match by_rate(rw, last.r_raw, r, expected) {
                Unwrapped::Forward(d_x) => (d_c, d_x),
                Unwrapped::Back | Unwrapped::TooFar => {
                    self.restart_at(c0, r, width, last);
                    return Watch::NoVerdict(Unjudged::ReferenceJumped);
                }
            }
        } else {
            let Some(d_x) = carry(&mut self.seen_r, rw, r) else {
                self.restart_at(c0, r, width, last);
                return Watch::NoVerdict(Unjudged::ReferenceJumped);
            };
            let expected = mul_div(
                u128::from(d_x),
                u128::from(clock_millihz),
                u128::from(ref_millihz),
            )
            .unwrap_or(u128::MAX);
            // What the clock's rate cannot tell apart, in counter ticks.
            let slack = mul_div_ceil(
                u128::from(step_or_one(self.ref_step)).saturating_mul(2),
                u128::from(clock_millihz),
                u128::from(ref_millihz),
            )
            .unwrap_or(u128::MAX)
            .saturating_add(u128::from(last.width.saturating_add(width)))
            .saturating_add(u128::from(c_step).saturating_mul(2));
            // Wraps the rate in force cannot count are counted from a short measurement
            // of the rate, taken now, where it can.
            let ambiguous = self.wraps_ambiguous(cw, expected, slack, d_x);
            let expected = match self.expected_narrow(
                counter,
                false,
                ambiguous,
                clock_millihz,
                Due {
                    d_wide: d_x,
                    dx: d_x,
                    d_narrow: cw.delta(last.c0_raw, c0),
                    from: last.c0_raw,
                    at: c0,
                    expected,
                    slack,
                },
            ) {
                Ok(expected) => expected,
                Err(why) => return self.unmeasured_verdict(why, (cw, rw), (c0, r, width), last),
            };
            match by_rate(cw, last.c0_raw, c0, expected) {
                Unwrapped::Forward(d_c) => (d_c, d_x),
                // A 64-bit counter behind its last read went back (its own evidence; a
                // narrow one's wraps are counted from the reference's ΔX, which then cannot
                // tell its step back from the reference's step), by its move back plus
                // the ticks the reference's ΔX made due.
                Unwrapped::Back if cw.mask() == u64::MAX => {
                    let back = cw.delta(c0, last.c0_raw);
                    self.restart_at(c0, r, width, last);
                    return self.jumped(step_ns(
                        i128::from(back).saturating_neg(),
                        expected,
                        clock_millihz,
                    ));
                }
                // The reference's ΔX makes due more ticks than a 64-bit count holds (a
                // garbage read), or a narrow counter reads behind: not the counter's
                // evidence.
                Unwrapped::Back | Unwrapped::TooFar => {
                    self.restart_at(c0, r, width, last);
                    return Watch::NoVerdict(Unjudged::ReferenceJumped);
                }
            }
        };
        // Twice the midpoints' distance: 2·Δc0 + w_new − w_last.
        let dy = d_c
            .saturating_mul(2)
            .saturating_add(width)
            .saturating_sub(last.width);
        let here = Point {
            c0_raw: c0,
            r_raw: r,
            y: last.y.saturating_add(u128::from(dy)),
            x: last.x.saturating_add(d_x),
            width,
        };
        let u_y = last
            .width
            .saturating_add(width)
            .saturating_add(c_step.saturating_mul(2));
        let r_step = self.ref_step;
        // The counter stood still while the reference moved 16 steps (or 16 ticks, its
        // step unknown), over a span in which, at the rate in force, it must have moved
        // `STOP_SPAN` times its reads' uncertainty: a check soon after the last on a slow
        // counter (a 1 kHz tick 1 ms on) is too short to tell a stop from the
        // quantization, and is merged into the next interval (it falls to `TooShort`).
        let expected_y = mul_div(
            u128::from(d_x).saturating_mul(2),
            u128::from(clock_millihz),
            u128::from(ref_millihz),
        )
        .unwrap_or(u128::MAX);
        if dy <= u_y
            && d_x >= step_or_one(r_step).saturating_mul(16)
            && expected_y > u128::from(u_y).saturating_mul(STOP_SPAN)
        {
            self.restart_at(c0, r, width, here);
            return Watch::CounterStopped;
        }
        if d_x == 0 {
            let expected_x = mul_div(
                u128::from(dy / 2),
                u128::from(ref_millihz),
                u128::from(clock_millihz),
            )
            .unwrap_or(u128::MAX);
            if expected_x > u128::from(step_or_one(r_step)).saturating_mul(4) {
                return Watch::NoVerdict(Unjudged::ReferenceStill);
            }
            return Watch::NoVerdict(Unjudged::TooShort);
        }
        let Some(span) = measure(&last, &here, ref_millihz, c_step, r_step)
            .filter(|s| s.bound_ppb <= MAX_JUDGED_PPB)
        else {
            return Watch::NoVerdict(Unjudged::TooShort);
        };
        let span = Span {
            n: self.since.max(1),
            ..span
        };
        let tolerance = self.reference.frequency().accuracy().bound_ppb();
        // The first interval judged after a jump: the jump split the history.
        let fresh = core::mem::take(&mut self.after_jump);

        // The baseline: the window's rate, or the clock's, whichever is known better. Its
        // bound is the one from before a pending deviation widened it: the deviation is
        // what the interval tests, not what it is tested against.
        let clock_base = (clock_millihz, self.unwidened.unwrap_or(self.bound_ppb));
        let base = match measure(&self.anchor, &self.wend, ref_millihz, c_step, r_step) {
            Some(w)
                if w.bound_ppb
                    .saturating_add(self.drift(ref_millihz, c_step, r_step))
                    < clock_base.1 =>
            {
                (
                    w.millihz,
                    w.bound_ppb
                        .saturating_add(self.drift(ref_millihz, c_step, r_step)),
                )
            }
            _ => clock_base,
        };
        // The baseline's distance from the interval, in ppb of the interval's rate (the
        // nearest measure of the counter's, the convention of every bound here), against
        // both bounds widened by `1/(1 − the baseline's bound)`: a baseline's bound is in
        // ppb of the counter's rate (the clock's) or of its own (the window's), either of
        // which may be that much slower. Taken in ppb of the baseline's rate, a clock
        // started slow by `off` under an honest bound below `off/(1 − off)` was off the
        // baseline at once, and (c) at the second check (`tests/adversary_watchdog5.rs`).
        if ppb_apart(base.0, span.millihz) <= from_measured(span.bound_ppb, base.1) {
            // Steady, but within reach of a pending deviation too (an interval at the
            // threshold, a check right after another): it tells neither apart, so it is
            // extended to the next check rather than judged the deviation a one-off.
            if self.pending.is_some_and(|p| {
                ppb_apart(span.millihz, p.millihz) <= span.bound_ppb.saturating_add(p.bound_ppb)
            }) && span.n < EXTEND_CHECKS
            {
                self.ext_mark = Some((here, span.n));
                return Watch::NoVerdict(Unjudged::Unconfirmed);
            }
            // (b) Steady. A pending deviation was a one-off: the window starts after it.
            self.unwidened = None;
            if self.pending.take().is_some() {
                self.anchor_at(last, last);
                self.loose_start = true;
            }
            let before = self.wend;
            self.wend = here;
            self.set_last(here);
            self.prev = Some(span);
            self.push_knot(clock, here, ref_millihz, c_step, r_step);
            // A move seen only with this interval may have begun inside it: its rate, and
            // so the bound on where the rate is now, is the change's only in part.
            let seen_before = core::mem::take(&mut self.deferred);
            let steps = (ref_millihz, c_step, r_step);
            if let Some(changed) =
                self.compare_parts(clock, &span, before, seen_before, steps, tolerance)
            {
                return changed;
            }
            if let Some(changed) =
                self.window_against_clock(clock, &span, base, before, seen_before, steps, tolerance)
            {
                return changed;
            }
            // A move waiting for its report is not steered toward: a steer would hide it
            // (the clock's rate and its claim would follow it part of the way).
            if !self.deferred {
                self.refine(clock, ref_millihz, c_step, r_step, tolerance);
            }
            // While the rate may still be moving, it may move in steps each under an
            // interval's threshold (a staircase): a step inside the interval before this one
            // bends no line through the window's samples beyond their brackets, and only this
            // interval, wholly after it, bounds the rate now. The bound covers its rate and
            // its bound.
            if self.moving() {
                let now = clock.scale().millihz().max(1);
                self.bound_ppb = self.bound_ppb.max(
                    from_measured(ppb_apart(now, span.millihz), span.bound_ppb)
                        .saturating_add(rounding_ppb(now)),
                );
            }
            return Watch::Steady {
                rate: measured(span.millihz, span.bound_ppb.saturating_add(tolerance)),
            };
        }
        // Off the baseline where the narrow count's wraps were counted at the rate in force,
        // which the check could not measure, at the hook's period (see *Widths*): the
        // deviation may be an alias of a change by a whole number of wraps a period, and is
        // not judged.
        if self.unmeasured {
            // The rate may be anything a change may make it (12.5 %): the bound says so
            // until intervals at the rate in force are steady again.
            self.bound_ppb = self.bound_ppb.max(GROSS_PPB.saturating_add(span.bound_ppb));
            self.restart_at(c0, r, width, here);
            return Watch::NoVerdict(Unjudged::TooLong);
        }
        // Off the baseline: confirmed by the one before? Two consecutive intervals that
        // agree are a counter running at a new rate, whatever its size.
        // Beyond 12.5 %, only where the counter broke the hook's cadence (as the reference
        // counts it) both times: a reference that stood still across a check makes two
        // intervals agree too, with the counter on its cadence.
        let counter_broke = self.prev.is_some_and(|p| counter_broke_cadence(&span, &p));
        // Right after a jump, an interval off the clock within 12.5 % is the counter running
        // on at a new rate: nothing before the jump can confirm or refute it.
        // The 12.5 % rules take the distance in ppb of the baseline's rate, as documented.
        let dev = ppb_apart(span.millihz, base.0);
        let confirmed = (fresh && dev <= GROSS_PPB)
            || (self.pending.is_some_and(|p| {
                ppb_apart(span.millihz, p.millihz) <= span.bound_ppb.saturating_add(p.bound_ppb)
            }) && (dev <= GROSS_PPB || counter_broke));
        if dev > GROSS_PPB && !confirmed {
            // A jump of one count or the other: the cadence says which.
            let verdict = match self.prev {
                Some(_) if counter_broke => {
                    // What the counter gained beyond the reference's ΔX at the baseline.
                    let expected =
                        mul_div(u128::from(d_x), u128::from(base.0), u128::from(ref_millihz))
                            .unwrap_or(u128::MAX);
                    let got = u128::from(dy / 2);
                    let by_ns = if got >= expected {
                        i64::try_from(ticks_ns(got.saturating_sub(expected), clock_millihz))
                            .unwrap_or(i64::MAX)
                    } else {
                        neg_ns(saturate_u64(expected.saturating_sub(got)), clock_millihz)
                    };
                    Watch::CounterJumped { by_ns }
                }
                _ => Watch::NoVerdict(Unjudged::ReferenceJumped),
            };
            self.restart_at(c0, r, width, here);
            // A counter that jumped may run on at a new rate: the next interval is judged
            // afresh (within 12.5 %), or confirms it if it agrees with this one (beyond).
            if matches!(verdict, Watch::CounterJumped { .. }) {
                self.pending = Some(span);
                self.after_jump = true;
            }
            return verdict;
        }
        // An interval extended over `Unconfirmed` checks is one rate only where its newest
        // part (since the last check it was extended at) agrees with it: where they disagree,
        // the rate moved inside it (a second change), its rate is a mix, and its newest part,
        // the nearest to wholly after the move, is the deviation that now waits for the next
        // interval to confirm it.
        // Where they agree, the extended interval may still be a mix (its newest part's
        // bound is wide: an excursion that came back inside it): only its newest part is
        // wholly after any move inside it, so a report sets that part's rate and bound,
        // never the mix's (`tests/adversary_watchdog5.rs`, seed 6477: a rate 4 155 ppb off
        // under its own bound of 2 457, before).
        let mut newest = None;
        if let Some((mark, n_mark)) = self.ext_mark {
            if let Some(tail) = measure(&mark, &here, ref_millihz, c_step, r_step) {
                let tail = Span {
                    n: span.n.saturating_sub(n_mark).max(1),
                    ..tail
                };
                if ppb_apart(tail.millihz, span.millihz)
                    > tail.bound_ppb.saturating_add(span.bound_ppb)
                {
                    self.set_last(here);
                    return self.unconfirmed(tail, clock_millihz, (ref_millihz, c_step, r_step));
                }
                newest = Some(tail);
            }
        }
        self.set_last(here);
        // Two consecutive intervals off the baseline on the same side, the second further
        // off, that disagree with each other: a rate that keeps moving (a ramp, or a step
        // inside the first), not a one-off (a read wrong inside its bracket moves the two
        // intervals it bounds to opposite sides; a count's one-off step leaves the second on
        // the baseline). Follow it to the latest interval's rate rather than wait for two
        // intervals that agree, which a ramp never gives.
        let moving = self.pending.filter(|p| {
            let side = |m: u64| m > base.0;
            !confirmed
                && side(p.millihz) == side(span.millihz)
                && p.millihz.abs_diff(base.0) < span.millihz.abs_diff(base.0)
        });
        if !confirmed && moving.is_none() {
            return self.unconfirmed(span, clock_millihz, (ref_millihz, c_step, r_step));
        }
        // (c) Changed: recalibrate to the confirming interval's rate.
        let agreed = self.pending.take().filter(|_| confirmed);
        self.unwidened = None;
        self.deferred = false;
        self.prev = Some(span);
        // The window starts after the confirming intervals: a rate excursion that straddled
        // a check can make two intervals agree, and must not stay in the window.
        let seen_from = self.anchor.x;
        self.anchor_at(here, here);
        self.loose_start = true;
        self.drift_ppb = 0;
        self.note_move(
            here.x,
            span.dx
                .saturating_add(agreed.or(moving).map_or(0, |p| p.dx)),
        );
        // A steady ramp that the window these intervals were judged against hid (one line
        // still fitting its samples) may go on after the change, hidden from the window since
        // for as long again: until then the bound keeps a steady ramp's worst case.
        self.ramp_until = self
            .ramp_until
            .max(here.x.saturating_add(here.x.saturating_sub(seen_from)));
        if let Some(p) = agreed {
            // Two intervals that agree within their bounds still allow a ramp of up to
            // their distance plus both bounds between their middles: until the window
            // shows the rate holds still, the bound carries that pace.
            self.set_pace(
                ppb_apart(span.millihz, p.millihz)
                    .saturating_add(span.bound_ppb)
                    .saturating_add(p.bound_ppb),
                span.dx.saturating_add(p.dx) / 2,
            );
        }
        // The rate set: the interval's, or its newest part's where it was extended.
        let set = newest.unwrap_or(span);
        self.note_change(
            clock_millihz,
            set.millihz,
            here.x,
            span.dx.checked_div(span.n).unwrap_or(span.dx),
        );
        let rate = measured(set.millihz, set.bound_ppb.saturating_add(tolerance));
        let recalibrated = clock.recalibrate(rate);
        if matches!(recalibrated, Ok(()) | Err(ClockError::Late)) {
            // Two intervals cannot tell a new rate from an excursion that straddled a check
            // and is over: until the window since proves which, the clock's rate may still
            // be as far from the truth as the baseline was from the new rate.
            self.bound_ppb = set.bound_ppb.max(
                from_measured(ppb_apart(set.millihz, base.0), base.1)
                    .saturating_add(rounding_ppb(set.millihz)),
            );
            self.claim_ppb = set.bound_ppb.saturating_add(rounding_ppb(set.millihz));
        }
        if let Some(p) = moving {
            // Still moving: the bound carries the pace seen between the two intervals'
            // middles, as a move seen by the window's parts does.
            let apart = ppb_apart(span.millihz, p.millihz);
            self.set_drift(
                apart,
                apart
                    .saturating_add(span.bound_ppb)
                    .saturating_add(p.bound_ppb),
                span.dx.saturating_add(p.dx) / 2,
                span.millihz > p.millihz,
            );
            self.bound_ppb = self.bound_ppb.saturating_add(self.drift_ppb);
        } else {
            // Two intervals that agree do not say the rate stopped moving (a ramp slower
            // than an interval's threshold a period): a pace seen lately is carried on.
            self.bound_ppb = self
                .bound_ppb
                .saturating_add(self.pace(ref_millihz, c_step, r_step));
        }
        Watch::Changed { rate, recalibrated }
    }

    /// The interval `span`, off the baseline, waits for the next to confirm it
    /// ([`Unjudged::Unconfirmed`]).
    fn unconfirmed(
        &mut self,
        span: Span,
        clock_millihz: u64,
        (ref_millihz, c_step, r_step): (u64, u64, u64),
    ) -> Watch {
        self.pending = Some(span);
        self.unwidened.get_or_insert(self.bound_ppb);
        // Unconfirmed, but a worst case on this interval's rate: the clock's rate is at
        // least that far from it, so its bound must not claim less (the rate may still
        // be moving: a ramp between its reports).
        let off = from_measured(ppb_apart(clock_millihz, span.millihz), span.bound_ppb)
            .saturating_add(self.drift_ppb.max(self.pace(ref_millihz, c_step, r_step)));
        self.bound_ppb = self.bound_ppb.max(off);
        Watch::NoVerdict(Unjudged::Unconfirmed)
    }

    /// [`Watch::CounterJumped`] by `by_ns`: the next judged interval is judged afresh.
    /// The verdict of a check whose narrow count's wraps it could not count: a disturbed
    /// measurement is a disturbed check, measured again from the last sample at the next;
    /// otherwise the interval is dropped (see *Widths*).
    fn unmeasured_verdict(
        &mut self,
        why: Unjudged,
        (cw, rw): (Width, Width),
        (c0, r, width): (u64, u64, u64),
        last: Point,
    ) -> Watch {
        if why == Unjudged::WideBracket {
            let _ = carry(&mut self.seen_c, cw, c0);
            let _ = carry(&mut self.seen_r, rw, r);
        } else {
            self.restart_at(c0, r, width, last);
        }
        Watch::NoVerdict(why)
    }

    fn jumped(&mut self, by_ns: i64) -> Watch {
        self.after_jump = true;
        Watch::CounterJumped { by_ns }
    }

    /// Starts measuring afresh from the sample `(c0, r, width)`, which follows `at`'s
    /// position (the window and any pending deviation are dropped).
    fn restart_at(&mut self, c0: u64, r: u64, width: u64, at: Point) {
        let p = Point {
            c0_raw: c0,
            r_raw: r,
            width,
            ..at
        };
        self.set_last(p);
        self.anchor_at(p, p);
        self.pending = None;
        self.unwidened = None;
    }

    /// The next interval starts at `p`, this check's sample.
    fn set_last(&mut self, p: Point) {
        self.last = Some(p);
        self.since = 0;
        self.ext_mark = None;
        self.seen_c = (p.c0_raw, 0);
        self.seen_r = (p.r_raw, 0);
    }
}

/// Whether the counter's `dy` moved from the previous interval's more than twice as far
/// (relatively) as the reference's `dx` did: the hook's period held, as the reference
/// counts it, and the counter's did not.
fn counter_broke_cadence(now: &Span, prev: &Span) -> bool {
    // Per check: an interval that spans `n` checks (some rejected, or the reference still)
    // is `n` hook periods long.
    let rel = |a: u64, b: u64| {
        ppb_apart(
            a.saturating_mul(prev.n.max(1)),
            b.saturating_mul(now.n.max(1)),
        )
    };
    rel(now.dy, prev.dy) > rel(now.dx, prev.dx).saturating_mul(2)
}

fn ticks_ns(ticks: u128, millihz: u64) -> u128 {
    mul_div(ticks, 1_000_000_000_000, u128::from(millihz.max(1))).unwrap_or(u128::MAX)
}

fn neg_ns(ticks: u64, millihz: u64) -> i64 {
    i64::try_from(ticks_ns(u128::from(ticks), millihz))
        .map(|v| v.saturating_neg())
        .unwrap_or(i64::MIN)
}

/// A step of the counter in ns at `millihz`: it moved `moved` ticks (negative: back) where
/// `due` were due (saturated).
fn step_ns(moved: i128, due: u128, millihz: u64) -> i64 {
    let by = moved.saturating_sub(i128::try_from(due).unwrap_or(i128::MAX));
    let ns = i64::try_from(ticks_ns(by.unsigned_abs(), millihz)).unwrap_or(i64::MAX);
    if by < 0 {
        ns.saturating_neg()
    } else {
        ns
    }
}
