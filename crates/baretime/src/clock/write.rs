//! The writers: one at a time, closing the timeline in force and publishing the next
//! (the handover, argued in the module docs).

use super::*;

/// A counter value, distance or margin in a steady update (`Clock::update_steady`): `u32`
/// where the target lacks 64-bit atomics — the clock reads counters modulo 2^32 there, so
/// every such value is below 2^32, and its arithmetic is then 32-bit — `u64` elsewhere. The
/// same source either way: no sum or product below comes near 2^32 where it is `u32` (ends
/// below 2^31, margins below 2^28).
#[cfg(not(any(loom, target_has_atomic = "64")))]
type Tick = u32;
#[cfg(any(loom, target_has_atomic = "64"))]
type Tick = u64;

/// `v` as a [`Tick`]: its low 32 bits where that is `u32` (where `v` is below 2^32).
#[inline(always)]
fn tick(v: u64) -> Tick {
    #[cfg(not(any(loom, target_has_atomic = "64")))]
    #[allow(clippy::cast_possible_truncation)] // below 2^32 there, as just said
    return v as u32;
    #[cfg(any(loom, target_has_atomic = "64"))]
    return v;
}

/// A [`Tick`] as a `u64`.
#[inline(always)]
#[allow(clippy::useless_conversion)] // u64 -> u64 where `Tick` is `u64`
fn wide(v: Tick) -> u64 {
    u64::from(v)
}

/// What a steady update changes (`Clock::update_steady`): the next version's words that are
/// not the rate's (`Timebase::continued` at the same rate).
struct Step {
    base_ticks: Tick,
    base_ns: u64,
    base_frac: u64,
    prev_ticks: Tick,
    prev_ns: u64,
    prev_carry: u64,
    hand: Tick,
}

impl<C: Counter> Clock<C> {
    /// Runs one write as the one writer, or returns `Busy` without waiting: `update` on a
    /// narrow counter in its steady case ([`Clock::update_steady`], in a frame of its own),
    /// every other write on the general path ([`Clock::write_locked`]).
    pub(super) fn write(&self, what: Write) -> Result<(), ClockError> {
        if self
            .writer
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return Err(ClockError::Busy);
        }
        hook(Point::WriteLocked);
        let result = match what {
            Write::Update if self.width() != Width::FULL => match self.update_steady() {
                Some(result) => result,
                None => self.write_locked(what),
            },
            _ => self.write_locked(what),
        };
        self.writer.store(false, Ordering::Release);
        if let Some(hook) = self.on_write {
            let moved = match (what, result) {
                (Write::Update, r) => r == Err(ClockError::Late),
                (_, r) => matches!(r, Ok(()) | Err(ClockError::Late)),
            };
            if moved {
                hook();
            }
        }
        result
    }

    /// `update` on a narrow counter in the common case — a periodic tick: the first reading
    /// past the base (the last write's handover over) and on the timeline, which is open —
    /// exactly as [`Clock::write_locked`]'s general path runs it, without its other cases,
    /// and from the few words an update on time reads and changes (`Step`) rather than a
    /// whole [`Timebase`]. `None`, having changed nothing (a counter read only), for anything
    /// else — a clock not started too: the general path then starts over.
    #[inline(never)]
    fn update_steady(&self) -> Option<Result<(), ClockError>> {
        // The counter's width is usually a constant: so is all of the geometry here.
        let geometry = &Geometry::of(self.width());
        let (mask, deadline) = (tick(geometry.width.mask()), tick(geometry.deadline));
        let (version, words) = self.timeline.current();
        // The rate stays: the margin the last write stored (0 before `start`).
        let margin = of_slot(&self.margins, version.slot).load(Ordering::Relaxed);
        let [b, base_ns, int, frac, _, _, _, _, hand, _, _, _, _, base_frac, _] = words;
        // Below 2^32 where the target lacks 64-bit atomics: `load_narrow`.
        let (b, hand) = (tick(b.load_narrow()), tick(hand.load_narrow()));
        let t = tick(self.counter.ticks()) & mask;
        hook(Point::WriteRead);
        let d = t.wrapping_sub(b) & mask;
        // The general path's `Zone::Valid` with a first reading that passed the base: it
        // neither waits for the handover (`read_past_handover`) nor does nothing.
        let steady = margin != 0
            && d != 0
            && d <= deadline
            && b.wrapping_sub(t) & mask > hand
            && !self.is_latched(version);
        if !steady {
            return None;
        }
        let reach = tick(margin).saturating_mul(2);
        hook(Point::WriteJudged);
        let (c, late) = self.close(
            version,
            wide(b),
            wide(hand),
            geometry,
            margin,
            |t| t,
            |t| {
                // `Geometry::proposal`'s first case; the others from the whole timeline.
                let d = tick(t).wrapping_sub(b) & mask;
                if d <= deadline {
                    wide(d.saturating_add(tick(margin)).min(deadline))
                } else {
                    self.propose_cold(words, t, margin)
                }
            },
        );
        if late || c == 0 {
            return Some(self.update_unsteady(words, c, late, margin));
        }
        // An end, at most the deadline.
        let c = tick(c);
        // `Timebase::continued` at the same rate, `c` past the base, in the words it changes.
        let base_ns = base_ns.load();
        let base_frac = base_frac.load();
        let (ns, carry) = carried(
            base_ns,
            base_frac,
            wide(c),
            int.load_narrow(),
            frac.load_frac(),
        );
        let step = Step {
            base_ticks: b.wrapping_add(c) & mask,
            base_ns: ns,
            base_frac: carry,
            prev_ticks: b,
            prev_ns: base_ns,
            prev_carry: base_frac,
            hand: if c < reach {
                c.saturating_add(hand).min(reach.saturating_add(reach >> 1))
            } else {
                reach
            },
        };
        self.publish_step(geometry, version, words, &step, margin);
        Some(Ok(()))
    }

    /// [`Clock::propose`] from the whole timeline, for a steady update's close reading that
    /// is not on the timeline (out of line: it is rare, and its frame is large).
    #[cold]
    #[inline(never)]
    fn propose_cold(&self, words: &Words<WORDS>, t: u64, margin: u64) -> u64 {
        let geometry = Geometry::of(self.width());
        self.propose(
            &geometry,
            &Timebase::load(words),
            t,
            margin,
            self.mark.load(),
        )
    }

    /// The end of a steady update that closed late (the writer stalled past the deadline) or
    /// at the base (a counter that came round a wrap into the handover): from the whole
    /// timeline, as the general path ends it.
    #[cold]
    #[inline(never)]
    fn update_unsteady(
        &self,
        words: &Words<WORDS>,
        c: u64,
        late: bool,
        margin: u64,
    ) -> Result<(), ClockError> {
        let geometry = &Geometry::of(self.width());
        let tb = Timebase::load(words);
        let reach = margin.saturating_mul(2);
        if late {
            self.restart_after_late(geometry, &tb, tb.at(c), tb.scale, reach, margin);
            return Err(ClockError::Late);
        }
        let mut next = tb.continued(geometry.width, c, tb.carried_at(c), tb.scale, reach);
        next.slow = next.slowest_with(&tb);
        self.publish(geometry, &next, margin);
        Ok(())
    }

    /// Publishes a steady update's next version ([`Clock::publish`] for a `Step`): its
    /// changed words, and the rest — the rate's, the previous rate's (this one), the slowest
    /// rate's — only where the slot it writes does not hold them already (`Clock::settled`).
    fn publish_step(
        &self,
        geometry: &Geometry,
        version: Version,
        words: &Words<WORDS>,
        step: &Step,
        margin: u64,
    ) {
        let (mask, deadline) = (tick(geometry.width.mask()), tick(geometry.deadline));
        // Where a reading falls for the next version (`publish`'s `place`: a narrow reading
        // past the deadline is late).
        let place = |t: u64| {
            let t = tick(t);
            let d = t.wrapping_sub(step.base_ticks) & mask;
            let past = step.base_ticks.wrapping_sub(t) & mask > step.hand && d >= tick(margin);
            (past, past && d > deadline)
        };
        let settled = self.settled.load(Ordering::Relaxed) == version.number.wrapping_add(1);
        let mut fixed = settled;
        let next = self.timeline.publish(|v, slot| {
            let gate = self.gate(v.slot);
            gate.open(
                geometry.deadline,
                WIDE_ATOMICS || step.base_ns <= u64::MAX - (1 << 52),
            );
            self.stop_word(v.slot).store(0, Ordering::Relaxed);
            of_slot(&self.margins, v.slot).store(margin, Ordering::Relaxed);
            let (past, late) = place(self.read_after_fence(geometry));
            if past && late {
                gate.latched
                    .store(v.number.wrapping_add(1), Ordering::Relaxed);
                gate.lim.store(0, Ordering::Relaxed);
            }
            let [b, base_ns, int, frac, prev_ticks, prev_ns, prev_int, prev_frac, hand, inv, millihz, slow_int, slow_frac, base_frac, prev_carry] =
                slot;
            b.store(wide(step.base_ticks));
            base_ns.store(step.base_ns);
            prev_ticks.store(wide(step.prev_ticks));
            prev_ns.store(step.prev_ns);
            hand.store(if past { 0 } else { wide(step.hand) });
            base_frac.store(step.base_frac);
            prev_carry.store(step.prev_carry);
            if !settled {
                // `Timebase::store` of `Timebase::continued`'s rate words, copied from the
                // version in force: its rate, which is also the previous one, and the slowest
                // of its slowest and its own.
                let [_, _, c_int, c_frac, _, _, c_prev_int, c_prev_frac, _, c_inv, c_millihz, c_slow_int, c_slow_frac, _, _] =
                    words;
                let rate = (c_int.load(), c_frac.load());
                let slow = (c_slow_int.load(), c_slow_frac.load());
                let slowest = slow.max(rate);
                int.store(rate.0);
                frac.store(rate.1);
                prev_int.store(rate.0);
                prev_frac.store(rate.1);
                inv.store(c_inv.load());
                millihz.store(c_millihz.load());
                slow_int.store(slowest.0);
                slow_frac.store(slowest.1);
                of_slot(&self.inverses, v.slot)
                    .store(of_slot(&self.inverses, version.slot).load());
                // Those words are the version in force's own where it already ran at its
                // rate after its rate (an update after an update) with no slower one before.
                fixed = (c_prev_int.load(), c_prev_frac.load()) == rate && slowest == slow;
            }
        });
        self.settled.store(
            if fixed {
                next.number.wrapping_add(1)
            } else {
                0
            },
            Ordering::Relaxed,
        );
        // `publish`'s second look, now that the version is visible.
        if place(self.read_after_fence(geometry)).1 {
            self.latch(next);
        }
    }

    /// A write stalled past the deadline after its first read (readers latched the timeline,
    /// or the close point came out at the deadline): counted late, and a fresh timeline at
    /// `scale` from `at` and a counter reading made now, as a late write starts.
    fn restart_after_late(
        &self,
        geometry: &Geometry,
        tb: &Timebase,
        at: u64,
        scale: Scale,
        reach: u64,
        margin: u64,
    ) {
        self.count_late();
        let t = self.confirm_fresh(geometry.width, self.read_after_fence(geometry));
        let fresh = Timebase::fresh(t, at, scale, reach);
        let fresh = Timebase {
            slow: fresh.slow.max(tb.slow).max(mult(&tb.scale)),
            ..fresh
        };
        self.publish(geometry, &fresh, margin);
    }

    #[inline(never)]
    pub(super) fn write_locked(&self, what: Write) -> Result<(), ClockError> {
        let geometry = Geometry::of(self.width());
        let width = geometry.width;
        let (version, words) = self.timeline.current();
        let tb = Timebase::load(words);
        let started = tb.scale.millihz() != 0;
        match (what, started) {
            (Write::Start(scale), false) => {
                // The epoch's reading, confirmed (promise 7): a glitched read here would be
                // the base, every true reading behind it until the counter caught up.
                let t = self.confirm_fresh(width, width.value(self.counter.ticks()));
                // The ticks just before the base read as the epoch: a CPU whose counter lags the
                // one that started the clock by up to the handover stands still at 0.
                let hand = geometry.margin(&scale).saturating_mul(2);
                self.publish(
                    &geometry,
                    &Timebase::fresh(t, 0, scale, hand),
                    geometry.margin(&scale),
                );
                return Ok(());
            }
            (Write::Start(_), true) => return Err(ClockError::Started),
            (_, false) => return Err(ClockError::NotStarted),
            _ => {}
        }
        let gate = self.gate(version.slot);
        // `geometry.margin(&tb.scale)`, as the write that published this version stored it.
        let margin = of_slot(&self.margins, version.slot).load(Ordering::Relaxed);
        // The mark before the reading (as readers load it): what was handed out before.
        let mark = self.mark.load();
        let (t, stuck, passed) = self.read_past_handover(&tb, width, mark);
        let d = width.delta(tb.base_ticks, t);
        let before = width.delta(t, tb.base_ticks);
        let in_handover = before <= tb.hand;
        let latched = self.is_latched(version);
        let wide = width == Width::FULL;
        let zone = match geometry.zone(d) {
            _ if latched => Zone::Late,
            // Still in the handover after waiting (a counter that does not move, or hardly),
            // or a 64-bit reading before the base (a CPU whose counter lags, unless the mark
            // finds it behind, below): write from the base. The close point is decided by the
            // protocol, from a reading made after the close is announced.
            Zone::Behind if in_handover || wide => Zone::Valid,
            // A narrow counter this far round is late rather than behind (as readers judge).
            Zone::Behind => Zone::Late,
            zone => zone,
        };
        let d = if before != 0 && (in_handover || wide) && geometry.zone(d) == Zone::Behind {
            0
        } else {
            d
        };
        // 64-bit counters: judge the reading against what the clock has handed out (promise
        // 6), not against the base.
        // A reading behind what was handed out (promise 6): a rebase starts afresh from it;
        // an update or a recalibration changes nothing and says `Behind`, so that a counter
        // that was reset is judged at the rate it was judged by until the caller rebases
        // (a new rate would let a reset counter run on towards the time handed out).
        // So is one before the base by more than the handover reaches, even where what was
        // handed out is not above its time (nobody read the clock since the counter passed
        // it: a reset back to a time not yet read again). The close point cannot be before
        // the base, so a write from there would make the time jump to the base's, which
        // nobody read, for counter values that read far less a moment before (promise 2);
        // refused, the counter runs on towards the base on the timeline's handover.
        let before_hand =
            wide && !in_handover && geometry.zone(width.delta(tb.base_ticks, t)) == Zone::Behind;
        let behind = wide && (before_hand || tb.is_behind(t, mark));
        if behind && !self.behind.load(Ordering::Relaxed) {
            self.behind.store(true, Ordering::Relaxed);
        }
        let zone = match what {
            Write::Rebase(..) if behind => Zone::Behind,
            _ => zone,
        };
        if behind && !matches!(what, Write::Rebase(..)) {
            return Err(ClockError::Behind);
        }
        if let (Write::Update, Zone::Valid) = (what, zone) {
            if d < margin && !passed {
                // Nothing to do: the last write's handover was not over when this call began
                // (its first reading had not passed the base), so the base is no earlier than
                // this call's start, and the next update is due an interval from there.
                // (One whose first reading had passed the base writes, however recent the
                // base: doing nothing left the base up to a margin before this call, and the
                // next update an interval after it found the deadline a margin nearer — its
                // close clamped short of a margin after its read, and a write that took a few
                // ticks between its reads was late, promises 2 and 5.)
                return Ok(());
            }
        }
        let scale = match what {
            Write::Update => tb.scale,
            Write::Recalibrate(s) | Write::Rebase(_, s) | Write::Start(s) => s,
        };
        // The handover is computed with the old rate's formula and judged by the new one:
        // its margin is the smaller of the two rates' (ticks), so that a recalibration by a
        // large ratio neither stretches the old rate over a long handover nor jumps by many
        // old ticks.
        // The handover's reach back (readings before the new base still read the old
        // timeline) is sized by the larger, so that a CPU lagging by up to a margin at either
        // rate is never taken for late.
        let new_margin = if scale == tb.scale {
            margin
        } else {
            geometry.margin(&scale)
        };
        let reach = margin.max(new_margin).saturating_mul(2);
        let margin = margin.min(new_margin);
        // A fresh timeline starts from a counter reading made now (confirmed, promise 7).
        let fresh_reading = || self.confirm_fresh(width, self.read_after_fence(&geometry));
        // The time a rebase that continues a timeline (or starts from the handover) counts as
        // handed out (promise 6).
        let mut rebased_to = None;
        let mut next = match zone {
            Zone::Late => {
                // Hold every reader at the deadline, then start again from there.
                self.latch(version);
                let frozen = tb.at(geometry.deadline);
                self.count_late();
                let at = match what {
                    Write::Rebase(at, _) => at.max(frozen),
                    _ => frozen,
                };
                Timebase::fresh(fresh_reading(), at, scale, reach)
            }
            Zone::Behind => {
                // Only a rebase gets here (64-bit counters only: a narrow one is never
                // behind): hold the old timeline's readers at the mark's ceiling, whatever
                // their counter reads (`REBASING`), and start the fresh timeline there or
                // later. Not at the old base's time: that was measured on the CPU the last
                // write ran on, plus a margin, and the fresh timeline counts on from this
                // CPU's counter — on a CPU that lags, the lag would count twice (promise 2).
                gate.end.store(REBASING, Ordering::SeqCst);
                gate.lim.store(0, Ordering::SeqCst);
                let at = match what {
                    Write::Rebase(at, _) if wide => at.max(self.ceiling()),
                    Write::Rebase(at, _) => at.max(tb.base_ns),
                    _ => tb.base_ns,
                };
                Timebase::fresh(fresh_reading(), at, scale, reach)
            }
            Zone::Valid => {
                hook(Point::WriteJudged);
                let (c, late) = self.close(
                    version,
                    tb.base_ticks,
                    tb.hand,
                    &geometry,
                    margin,
                    |t| self.confirm(width, &tb, t, self.mark.load()),
                    |t| self.close_point(&geometry, &tb, t, margin, stuck),
                );
                let end_ns = tb.at(c);
                // A 64-bit close point more than a margin before this write's own reading:
                // the close read was behind (the counter was reset back during the write) and
                // proposed where the timeline reaches the mark's ceiling. Continuing from
                // there at the new rate would run the ticks between `c` and this write's
                // reading — which passed before the write, at the old rate — at the new one
                // (a forward jump before the reset, read again later: ahead by the ratio,
                // promise 2: "each rate from its write's close point: a handover margin after
                // a counter read made during the write"). The write is from a counter behind
                // (promise 6): an update or a recalibration keeps the old rate and says `Behind`; a
                // rebase starts afresh from a reading made now, at the mark's ceiling or
                // later.
                // (Beyond `reach` and a margin: a helper on a CPU whose counter lags proposes
                // at most a lag before this write's reading, plus its margin.)
                let went_back = wide && c.saturating_add(reach).saturating_add(margin) < d;
                if went_back && !self.behind.load(Ordering::Relaxed) {
                    self.behind.store(true, Ordering::Relaxed);
                }
                if went_back && !late {
                    let next = match what {
                        Write::Rebase(at, _) => Timebase::fresh(
                            fresh_reading(),
                            at.max(end_ns).max(self.ceiling()),
                            scale,
                            reach,
                        ),
                        // Changes nothing (promise 6): the same timeline, base and rate,
                        // published again (the close point only ended the old version).
                        _ => tb,
                    };
                    let next = Timebase {
                        slow: next.slowest_with(&tb),
                        ..next
                    };
                    self.publish(&geometry, &next, geometry.margin(&next.scale));
                    return match what {
                        Write::Rebase(..) => {
                            self.raise_mark(next.base_ns);
                            Ok(())
                        }
                        _ => Err(ClockError::Behind),
                    };
                }
                // The next timeline starts from the counter's time at `c` with the carry, at
                // most 1 ns past `end_ns`, which the old version's readers stand at from `c`:
                // no step back, and no fraction of a nanosecond lost per write.
                let carried = tb.carried_at(c);
                if late {
                    let at = match what {
                        Write::Rebase(at, _) => at.max(end_ns),
                        _ => end_ns,
                    };
                    self.restart_after_late(&geometry, &tb, at, scale, reach, new_margin);
                    return match what {
                        Write::Rebase(..) => Ok(()),
                        _ => Err(ClockError::Late),
                    };
                }
                // The old timeline continued at the new rate from the close point: the same
                // timeline, its handover unchanged, where it closed at its base (the counter had
                // not reached it, and no reader had); otherwise a new base at the close point,
                // with the old timeline before it (readings before the old base, a handover not
                // over when this write closed, stand at the old base: the new handover reaches
                // back over the old one).
                let continued = tb.continued(width, c, carried, scale, reach);
                match what {
                    // A rebase to a time ahead of the clock's time now starts afresh there, or
                    // at the close point if that is later (the jump it asks for); one to a
                    // time at or before now continues the timeline as a recalibration does
                    // (no jump, and no fraction of a nanosecond lost: promise 2).
                    Write::Rebase(at, _) if at > tb.at(d) => {
                        Timebase::fresh(fresh_reading(), at.max(end_ns), scale, reach)
                    }
                    // A counter still in the last write's handover after the wait (one that
                    // hardly moves, or one reset back into the handover, which the rebase is to
                    // cure): the new rate from a margin after a counter reading made now, at the
                    // old timeline's time there with its carry (its handover's copy), at the
                    // high-water mark if later, at `at` if later still (promise 6) — not from
                    // the base, where continuing would run the copy's rate up to it.
                    //
                    // The old version's readers read the copy (they do not stop at the close,
                    // which is at or after the base) and may read the counter past any reading
                    // the rebase makes before it publishes: so it first stops them
                    // (`stop_handover`, announced then decided as a close point is, helpers
                    // included), and its new rate starts at that stop, where they stand still
                    // until the publication. A fresh timeline from an unannounced reading
                    // instead read less than such a reader had, just past it: by the carry
                    // (1 ns: its fast path does not add it) where the new tick is longer, and
                    // by the rates' difference over the ticks the old reader read past it too
                    // where it is shorter.
                    //
                    // A stop at the base (the counter within a margin of it, or no longer in
                    // the handover): the continuation any write makes (the new rate from the
                    // close point: the base itself where the counter had not reached it,
                    // promise 2), moved up as a whole, its copy too, by what `at` or the mark
                    // asks beyond its time at a reading made now, so that the rebase lands
                    // there (promise 6). Its readers read at or above the old version's
                    // everywhere. A close point past the base (a reader passed it) gets the
                    // same.
                    Write::Rebase(at, _) if before != 0 && in_handover => {
                        let (stop, t) = if c == 0 {
                            self.stop_handover(version, &tb, &geometry, margin)
                        } else {
                            (0, 0)
                        };
                        let at_stop = width.value(tb.base_ticks.wrapping_sub(stop));
                        let (now, carry) = tb.before_base_carried(width, at_stop);
                        let ahead = width.delta(t, tb.base_ticks);
                        let still = c == 0
                            && ahead != 0
                            && ahead <= tb.hand
                            && (now, carry) == tb.before_base_carried(width, t);
                        if still || stop != 0 {
                            let mark = self.mark.load();
                            if still {
                                // The copy stands still from the reading to the stop, or to
                                // the base (a fresh timeline's, or before the copy's own
                                // start): no reader of either version can read past its time
                                // there, and the new rate runs from the reading itself, as a
                                // fresh timeline. (Continued from the base instead, a reading
                                // between the two was before a base at the new rate, and a tick
                                // of a slow one is further back than a lag: behind.)
                                let start = at.max(now).max(mark);
                                rebased_to = Some(start);
                                Timebase {
                                    base_frac: if start == now { carry } else { 0 },
                                    ..Timebase::fresh(t, start, scale, reach)
                                }
                            } else {
                                // The new version keeps the copy up to the stop, moved up as a
                                // whole by what `at` or the mark asks beyond its time at this
                                // writer's reading (so that the rebase lands there, promise 6,
                                // and time runs on from it to the stop at the copy's rate).
                                let (here, _) = tb.before_base_carried(width, t);
                                let next = |target: u64| {
                                    let up = target.saturating_sub(here);
                                    Timebase {
                                        base_ticks: at_stop,
                                        base_ns: now.saturating_add(up),
                                        base_frac: carry,
                                        scale,
                                        prev_ns: tb.prev_ns.saturating_add(up),
                                        hand: tb.hand.saturating_sub(stop),
                                        ..tb
                                    }
                                };
                                let target = at.max(here).max(mark);
                                // Should the new version judge this reading behind (promise 6:
                                // before the copy's own start, run back at another rate), it
                                // stands at the ceiling: the timeline starts there.
                                let target = if next(target).is_behind(t, mark) {
                                    target.max(self.ceiling())
                                } else {
                                    target
                                };
                                rebased_to = Some(target);
                                next(target)
                            }
                        } else {
                            let t = fresh_reading();
                            match continued.carried_value(&geometry, t) {
                                Some((now, _)) => {
                                    let start = at.max(now).max(self.mark.load());
                                    let up = start.saturating_sub(now);
                                    rebased_to = Some(start);
                                    Timebase {
                                        base_ns: continued.base_ns.saturating_add(up),
                                        prev_ns: continued.prev_ns.saturating_add(up),
                                        ..continued
                                    }
                                }
                                // The counter went back further during the write (a reset): a
                                // fresh timeline from the reading, at the close point's time
                                // with its carry, or later.
                                None => {
                                    let start = at.max(carried.0).max(self.mark.load());
                                    let carry = if start == carried.0 { carried.1 } else { 0 };
                                    rebased_to = Some(start);
                                    Timebase {
                                        base_frac: carry,
                                        ..Timebase::fresh(t, start, scale, reach)
                                    }
                                }
                            }
                        }
                    }
                    // A rebase to a time at or before the clock's continues from the clock's
                    // time at its reading (at least `at`), which counts as handed out (promise
                    // 6), as a fresh timeline's start does. (Counted from the reading, not the
                    // close point: the close point is a margin later, a time nobody has read;
                    // a counter reset back after the reading is promise 1's "where a 64-bit
                    // counter itself steps back", as it is after any reading.)
                    Write::Rebase(at, _) => {
                        let here = tb.carried_value(&geometry, t).map_or(0, |(ns, _)| ns);
                        rebased_to = Some(at.max(here));
                        continued
                    }
                    _ => continued,
                }
            }
        };
        // In place: a timeline returned by value is a 120-byte copy on a 32-bit core.
        next.slow = next.slowest_with(&tb);
        // Every timeline built above runs at `scale`.
        self.publish(&geometry, &next, new_margin);
        if let (true, Some(ns)) = (wide, rebased_to) {
            // A rebase that continues a timeline: its time counts as handed out, as a fresh
            // timeline's start does (below).
            self.raise_mark(ns);
        }
        if let (Write::Rebase(..), true) = (what, wide && next.prev_int == 0 && next.prev_frac == 0)
        {
            // A fresh timeline from a rebase starts at the time the caller gave (promise 6):
            // it counts as handed out. Without this a counter that goes behind before anyone
            // read the new timeline stands at the ceiling of the old mark — below the target,
            // then jumping past it once a reader of the new timeline raises the mark.
            // (After the publication: a reader that loads this mark finds the new timeline.)
            self.raise_mark(next.base_ns);
        }
        match what {
            Write::Rebase(..) => Ok(()),
            _ if zone == Zone::Late => Err(ClockError::Late),
            _ if behind => Err(ClockError::Behind),
            _ => Ok(()),
        }
    }

    /// The writer's counter reading, made once the previous handover is over: while the
    /// counter is still before the newest timeline's base (at most a margin: the last write
    /// was just now), it waits — writers may wait, readers never — so that one writer
    /// calling twice in a row is never refused. A counter that does not move within
    /// [`HANDOVER_WAIT_READS`] reads is taken as it is.
    ///
    /// With the reading, whether the wait ran out (the counter stuck before the base), and
    /// whether the first reading had passed the base (not at it, not in the handover before
    /// it).
    pub(super) fn read_past_handover(
        &self,
        tb: &Timebase,
        width: Width,
        mark: u64,
    ) -> (u64, bool, bool) {
        let mut t = width.value(self.counter.ticks());
        hook(Point::WriteRead);
        t = self.confirm(width, tb, t, mark);
        let passed = width.delta(t, tb.base_ticks) > tb.hand;
        let mut reads = 0u32;
        loop {
            let before = width.delta(t, tb.base_ticks);
            if before == 0 || before > tb.hand {
                return (t, false, passed);
            }
            if reads >= HANDOVER_WAIT_READS {
                return (t, true, passed);
            }
            spin_loop();
            reads = reads.saturating_add(1);
            // Confirmed as the first (promise 7): a glitched read here ends the wait and
            // becomes the reading a write is judged by (a rebase's target against it).
            t = self.confirm(width, tb, width.value(self.counter.ticks()), mark);
        }
    }

    /// Publishes `next` as the next version, its gate open.
    ///
    /// A writer stalled after closing may publish a version whose base the counter passed
    /// long ago. Its readers then cannot be before its base, and on a narrow counter a
    /// reading a wrap later would look like one in the handover: so when the counter is a
    /// margin or more past the base as the version is published, the handover is dropped,
    /// and a version already past its deadline is published latched (time stands still at
    /// its end until the next write, which finds it late).
    pub(super) fn publish(&self, geometry: &Geometry, next: &Timebase, margin: u64) {
        // Where a reading `t` falls for `next`: past its base by a margin or more (its
        // handover can go), and past its deadline as well (it must be latched).
        let place = |t: u64| {
            let d = geometry.width.delta(next.base_ticks, t);
            let past = geometry.width.delta(t, next.base_ticks) > next.hand && d >= margin;
            (past, past && geometry.is_late(geometry.zone(d)))
        };
        self.timeline.publish(|v, slot| {
            let gate = self.gate(v.slot);
            // The 32-bit fast path adds to `base_ns` without saturating (`advance_narrow`): it
            // is open only where the time at the deadline cannot saturate. There the deadline is
            // below 2^31 ticks and a tick below 2^20 ns (1 kHz: 10^6 ns), so its time is below
            // `base_ns + 2^51`: a clock rebased to within 2^52 ns of `u64::MAX` (143 years)
            // reads through the slow path.
            gate.open(
                geometry.deadline,
                WIDE_ATOMICS || next.base_ns <= u64::MAX - (1 << 52),
            );
            self.stop_word(v.slot).store(0, Ordering::Relaxed);
            of_slot(&self.margins, v.slot).store(margin, Ordering::Relaxed);
            of_slot(&self.inverses, v.slot).store(per_ns(&next.scale));
            // Confirmed (promise 7): a glitched read here would drop the handover of a
            // counter that has not reached the base.
            let (past, late) =
                place(self.confirm_fresh(geometry.width, self.read_after_fence(geometry)));
            if past && late {
                gate.latched
                    .store(v.number.wrapping_add(1), Ordering::Relaxed);
                gate.lim.store(0, Ordering::Relaxed);
            }
            // Past the base by a margin: no handover.
            next.store(slot, if past { 0 } else { next.hand });
        });
        self.settled.store(0, Ordering::Relaxed);
        // A writer stalled after that read (before the version became visible) may publish a
        // narrow timeline whose deadline the counter has passed meanwhile, unseen: readers
        // read the previous version all along. Look once more, now that it is visible, and
        // latch it if so (a reading a wrap later would otherwise look like one on it).
        if geometry.width != Width::FULL {
            let (version, _) = self.timeline.current();
            if place(self.read_after_fence(geometry)).1 {
                self.latch(version);
            }
        }
    }

    /// One more late write (under the writer lock: no other writer counts).
    pub(super) fn count_late(&self) {
        let n = self.late_updates.load(Ordering::Relaxed).saturating_add(1);
        self.late_updates.store(n, Ordering::Relaxed);
    }

    /// Closes the current timeline (step 1 of the module docs), based at `base` with `hand`
    /// ticks of handover, and returns its end, and whether the timeline turned out to be
    /// past its deadline by then (the writer was stalled after its first read). `confirm`
    /// judges the close reading ([`Clock::confirm`]: narrow readings as they are); `propose`
    /// gives the close point a reading proposes when the timeline was not latched (the
    /// general write's [`Clock::close_point`], or a steady update's one sum).
    #[allow(clippy::too_many_arguments)] // the close's inputs, none of them a timeline
    pub(super) fn close(
        &self,
        version: Version,
        base: u64,
        hand: u64,
        geometry: &Geometry,
        margin: u64,
        confirm: impl FnOnce(u64) -> u64,
        propose: impl FnOnce(u64) -> u64,
    ) -> (u64, bool) {
        let gate = self.gate(version.slot);
        let closing = closing(version);
        gate.margin.store(margin, Ordering::SeqCst);
        gate.end.store(closing, Ordering::SeqCst);
        gate.lim.store(0, Ordering::SeqCst);
        hook(Point::WriteClosing);
        let t = self.read_after_fence(geometry);
        let t = confirm(t);
        // Loaded after the close was announced (`SeqCst`, as the latch and a latching reader's
        // second look at the end): a reader that latched the timeline before it and returned
        // its end (open: the deadline) is seen here, however long this writer was stalled
        // since it judged its reading; the close point is then the deadline, where those
        // readers stood, never a reading a wrap later.
        let latched = self.is_latched(version);
        let proposal = if latched {
            geometry.deadline
        } else {
            propose(t)
        };
        let end =
            match gate
                .end
                .compare_exchange(closing, proposal, Ordering::SeqCst, Ordering::SeqCst)
            {
                // As the word holds it (the same value: ends are below 2^32 where gate words
                // are 32-bit, which the compiler then knows).
                Ok(_) => GateWord::held(proposal),
                // A helper decided first; only this writer stores `CLOSING`, so this is an end.
                Err(end) => end,
            };
        let late = latched
            || (geometry.is_late(geometry.zone(geometry.width.delta(base, t)))
                && geometry.width.delta(t, base) > hand)
            || self.is_latched(version);
        if late {
            self.latch(version);
        }
        hook(Point::WriteClosed);
        (end, late)
    }

    /// The close point the general write proposes from its close reading `t`: `tb`'s base
    /// where the counter did not reach it while the writer waited (`stuck`) and still has
    /// not — no reader has passed the base (their readings came before this one), so the
    /// timeline closes there and continues at the new rate, its handover unchanged —
    /// otherwise [`Clock::propose`]'s.
    pub(super) fn close_point(
        &self,
        geometry: &Geometry,
        tb: &Timebase,
        t: u64,
        margin: u64,
        stuck: bool,
    ) -> u64 {
        let before = geometry.width.delta(t, tb.base_ticks);
        let still_stuck = stuck
            && before != 0
            && before <= tb.hand
            && (geometry.width != Width::FULL || !tb.is_behind(t, self.mark.load()));
        if still_stuck {
            0
        } else {
            self.propose(geometry, tb, t, margin, self.mark.load())
        }
    }

    /// The close point a reading `t` proposes for `tb` (step 1 of the module docs), judged
    /// against the mark `mark` (64-bit): a reading on the timeline whose time is behind what
    /// was handed out (a reset back during the write, not past the base) proposes where the
    /// timeline reaches the mark's ceiling, plus the margin, as one before the base does — its
    /// own time plus a margin would close the timeline below times already handed out, and the
    /// next would run on from there (promise 6).
    #[inline]
    pub(super) fn propose(
        &self,
        geometry: &Geometry,
        tb: &Timebase,
        t: u64,
        margin: u64,
        mark: u64,
    ) -> u64 {
        let width = geometry.width;
        if width == Width::FULL
            && geometry.zone(width.delta(tb.base_ticks, t)) == Zone::Valid
            && tb.is_behind(t, mark)
        {
            return self.ceiling_offset(tb, margin).min(geometry.deadline);
        }
        geometry.proposal(tb, t, margin, || self.behind_proposal(tb, t, margin))
    }

    /// The close point a 64-bit reading `t` before `tb`'s base proposes. In the handover
    /// and not behind the mark: the reading plus the margin, no earlier than the base — never
    /// the base itself for a reading clearly before it, as a narrow one proposes
    /// (`from_base`): a 64-bit counter may be read on a CPU that lags another by up to
    /// [`LAG_NS`], and that CPU's readers may have passed the base (a fresh timeline's base
    /// is a reading, with no margin after it) and handed out times there that the mark,
    /// raised once per granule, does not hold; a close at the base stood them still below
    /// those times, back by up to a granule on one CPU (promise 1). Otherwise where the
    /// timeline reaches the high-water mark's ceiling, plus the margin: a close point no
    /// reader has passed, not even one that stood at the ceiling.
    pub(super) fn behind_proposal(&self, tb: &Timebase, t: u64, margin: u64) -> u64 {
        let before = Width::FULL.delta(t, tb.base_ticks);
        if before <= tb.hand && !tb.is_behind(t, self.mark.load()) {
            margin.saturating_sub(before)
        } else {
            self.ceiling_offset(tb, margin)
        }
    }

    /// Where `tb`'s timeline reaches the high-water mark's ceiling, plus `margin`: a close
    /// point that no reader has passed, not even one that stood at the ceiling.
    pub(super) fn ceiling_offset(&self, tb: &Timebase, margin: u64) -> u64 {
        tb.scale
            .ns_to_ticks_ceil(self.ceiling().saturating_sub(tb.base_ns))
            .saturating_add(margin)
    }

    /// A 64-bit reading `t` whose time on `tb` is more than 1 ms past `mark` (loaded before
    /// it), confirmed by a second read, the nearer of the two kept (promise 7): one glitched
    /// read becomes neither a time, nor a close point, nor a timeline's base. Narrow
    /// readings, and readings not that far ahead, as they are.
    pub(super) fn confirm(&self, width: Width, tb: &Timebase, t: u64, mark: u64) -> u64 {
        if width != Width::FULL {
            return t;
        }
        let d = width.delta(tb.base_ticks, t);
        let ns = tb.at(d);
        // Where time saturates (at `u64::MAX` ns) every reading's time is the same and says
        // nothing of how far ahead it is: confirm it all the same, or a glitched close read
        // there becomes a close point and a base ahead of the counter (the next write then
        // finds the counter before that base: `Behind`, with no step back).
        if d >= OFFSET_LIMIT || (ns != u64::MAX && ns <= mark.saturating_add(CONFIRM_NS)) {
            return t;
        }
        hook(Point::ReadConfirm);
        let again = width.value(self.counter.ticks());
        let d_again = width.delta(tb.base_ticks, again);
        if d_again < d || d_again >= OFFSET_LIMIT {
            again
        } else {
            t
        }
    }

    /// A 64-bit reading `t` that becomes a fresh timeline's base (`start`, a rebase, a late
    /// write) or decides a publication's handover, always confirmed by a second read, the earlier of the two kept (promise 7).
    /// `confirm` judges a reading by its time on the old timeline, which says nothing here:
    /// there is none before a start, and a rebase from a counter that was reset reads
    /// behind the old base, where `confirm` takes any reading as it is. A glitched base
    /// would put every true reading behind it (time standing at the mark's ceiling, writes
    /// refused with `Behind`) until the counter caught up with the glitch — up to 2^62
    /// ticks. Writes are rare: the second read costs nothing that matters.
    pub(super) fn confirm_fresh(&self, width: Width, t: u64) -> u64 {
        if width != Width::FULL {
            return t;
        }
        hook(Point::ReadConfirm);
        let again = width.value(self.counter.ticks());
        // `again` before `t` (modulo 2^64, as the clock tells ahead from behind): `t` was
        // the glitch. Otherwise `t` (a glitch on `again` is ignored).
        if width.delta(t, again) >= OFFSET_LIMIT {
            again
        } else {
            t
        }
    }

    /// A counter reading made after the writer's stores are visible.
    pub(super) fn read_after_fence(&self, geometry: &Geometry) -> u64 {
        fence(Ordering::SeqCst);
        geometry.width.value(self.counter.ticks())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frequency::{Accuracy, Source};
    use crate::FnCounter;
    use core::cell::Cell;
    use proptest::prelude::*;

    proptest! {
        /// Whatever mix of updates and recalibrations (the rate words change) runs, every
        /// version holds the rate words a whole `Timebase::store` of `Timebase::continued`
        /// would have written — the steady update's shortcut (`Clock::settled`) included —
        /// and its slot's ticks per nanosecond.
        #[test]
        fn steady_updates_keep_the_rate_words(
            bits in 16u32..=32,
            writes in proptest::collection::vec((0u64..1 << 11, any::<bool>(), 1u64..4), 1..24),
        ) {
            let ticks = Cell::new(7u64);
            let counter = FnCounter::new(|| ticks.get(), bits);
            let hz = |millihz: u64| {
                Frequency::from_millihz(millihz, Source::User, Accuracy::Exact).unwrap()
            };
            let clock = Clock::new(&counter, hz(25_000_000_000));
            let mask = (1u64 << bits) - 1;
            for (gap, recalibrate, rate) in writes {
                // Past the handover (20 µs: at most 600 ticks at 30 MHz), well before the
                // deadline (half the wrap: 32 767 ticks or more).
                ticks.set((ticks.get() + 1000 + gap) & mask);
                let (before, words) = clock.timeline.current();
                let old = Timebase::load(words);
                if recalibrate {
                    clock.recalibrate(hz(rate * 10_000_000_000)).unwrap();
                } else {
                    clock.update().unwrap();
                }
                let (version, words) = clock.timeline.current();
                prop_assert_eq!(version.number, before.number + 1);
                let new = Timebase::load(words);
                if !recalibrate {
                    prop_assert_eq!(new.scale, old.scale);
                }
                prop_assert_eq!((new.prev_int, new.prev_frac), mult(&old.scale));
                prop_assert_eq!(new.slow, old.slow.max(mult(&old.scale)).max(mult(&new.scale)));
                prop_assert_eq!(
                    of_slot(&clock.inverses, version.slot).load(),
                    per_ns(&new.scale)
                );
            }
        }
    }
}
