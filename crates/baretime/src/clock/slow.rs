//! [`Clock::now`] past its fast path: the handover, a closing, closed or latched timeline,
//! a late or behind counter, the high-water mark.

use super::*;

impl<C: Counter> Clock<C> {
    /// `now()` past its fast path.
    #[cold]
    #[inline(never)]
    pub(super) fn now_cold(&self, width: Width, mark: u64, fast: Option<u64>) -> u64 {
        let reading = match fast {
            Some(ns) => Some(ns),
            None => self.read_slow(width, mark),
        };
        if width == Width::FULL {
            self.settle(width, mark, reading, true)
        } else {
            // Narrow counters are never behind (a reading before the base is late).
            reading.unwrap_or(0)
        }
    }

    /// One reading past the fast path, read again as often as publications overtake it:
    /// its time, or `None` for a 64-bit reading behind the base.
    pub(super) fn read_slow(&self, width: Width, mark: u64) -> Option<u64> {
        self.timeline.read(
            |version, words| match self.read_fast(width, version, words) {
                Some(ns) => (Some(ns), false),
                // Past the fast path the answer depends on the timeline's end, which only holds
                // for the version that is current.
                None => (self.now_slow(width, mark, version, words), true),
            },
        )
    }

    /// One whole reading, fast path or not (for a second, confirming read).
    pub(super) fn read_once(&self, width: Width, mark: u64) -> Option<u64> {
        match self
            .timeline
            .try_read(|version, words| self.read_fast(width, version, words))
        {
            Some(ns) => Some(ns),
            None => self.read_slow(width, mark),
        }
    }

    /// Judges a 64-bit reading against the high-water mark `mark`, loaded before the
    /// reading was made (promises 1, 6 and 7): a time past the mark's granule raises the
    /// mark (a far one only once a second reading confirms it, and then the smaller of the
    /// two); a time behind the mark by less than [`LAG_NS`] (another CPU's counter lagging
    /// a little) stands at the mark; one further behind, or a reading behind the base
    /// (`None`), is a counter that went back: time stands at the mark's ceiling. Neither
    /// raises the mark.
    pub(super) fn settle(
        &self,
        width: Width,
        mark: u64,
        reading: Option<u64>,
        confirm: bool,
    ) -> u64 {
        match reading {
            Some(ns) if ns >= mark.saturating_add(MARK_GRANULE_NS) => {
                // `u64::MAX`: a reading that saturated is as far as the mark's bound can say,
                // and may be the glitch too (the bound saturates with it near the top).
                if confirm && (ns > mark.saturating_add(CONFIRM_NS) || ns == u64::MAX) {
                    hook(Point::ReadConfirm);
                    // A reading this far ahead may be one glitched read: read again, and take
                    // the smaller (both are readings made within this call).
                    match self.read_once(width, mark) {
                        Some(again) if again < ns => {
                            // The smaller may still be the glitch: the first a true reading
                            // from before the counter was reset back. Still far past the mark,
                            // it is confirmed once more (a third read, the smaller kept).
                            let again = if again > mark.saturating_add(CONFIRM_NS) {
                                hook(Point::ReadConfirm);
                                match self.read_once(width, mark) {
                                    Some(third) if third < again => third,
                                    None => return self.settle(width, mark, None, false),
                                    Some(_) => again,
                                }
                            } else {
                                again
                            };
                            return self.settle(width, mark, Some(again), false);
                        }
                        None => return self.settle(width, mark, None, false),
                        Some(_) => {}
                    }
                }
                self.raise_mark(ns);
                ns
            }
            Some(ns) if ns >= mark => ns,
            Some(ns) if ns.saturating_add(LAG_NS) >= mark => mark,
            _ => {
                if !self.behind.load(Ordering::Relaxed) {
                    self.behind.store(true, Ordering::Relaxed);
                }
                self.ceiling()
            }
        }
    }

    /// Raises the high-water mark to `ns`, or to [`MARK_GRANULE_NS`] short of `u64::MAX` where
    /// time saturates: the fast path's window `[mark, mark + MARK_GRANULE_NS)` (a wrapping
    /// subtraction and a compare) then never wraps round to small times, and the ceiling is
    /// still no earlier than any time handed out (it saturates at `u64::MAX`).
    pub(super) fn raise_mark(&self, ns: u64) {
        self.mark
            .raise(ns.min(u64::MAX.saturating_sub(MARK_GRANULE_NS)));
    }

    /// A time no earlier than any `now()` has returned (64-bit counters), and at most
    /// [`MARK_GRANULE_NS`] past the latest.
    pub(super) fn ceiling(&self) -> u64 {
        self.mark.load().saturating_add(MARK_GRANULE_NS)
    }

    /// Past the fast path: the handover, a closing or closed timeline, a late or behind
    /// counter. `None`: a 64-bit reading behind the base (judged against the mark by
    /// `settle`).
    #[cold]
    #[inline(never)]
    pub(super) fn now_slow(
        &self,
        width: Width,
        mark: u64,
        version: Version,
        words: &Words<WORDS>,
    ) -> Option<u64> {
        let t = width.value(self.counter.ticks());
        hook(Point::ReadCounter);
        // Pairs with the release stores of `lim` (a close, a latch): what they published
        // before it is visible below.
        fence(Ordering::Acquire);
        let tb = Timebase::load(words);
        if tb.scale.millihz() == 0 {
            // Not started (`uninit`): the epoch.
            return Some(0);
        }
        // Confirmed as a helper's is (promise 7): past a close point a reading stands at the
        // end, a time within a margin of the mark that `settle` does not confirm, so one
        // glitched read would take time to the close point before the counter reaches it.
        let t = self.confirm(width, &tb, t, mark);
        let geometry = Geometry::of(width);
        let gate = self.gate(version.slot);
        let wide = width == Width::FULL;
        loop {
            // The latch before the end, both `SeqCst`: a latched timeline's end is returned
            // only as it stood after the latch was seen, so that a close announced after this
            // load sees the latch too (`close`) and proposes the deadline — loaded the other
            // way round, an open end (the deadline) read before a writer stalled since it
            // judged its reading announced its close, and a latch seen after it, returned the
            // deadline's time, and that writer's close read a wrap later closed the timeline
            // below it (half a wrap back, 16-bit counter, threads).
            let latched = self.is_latched(version);
            let end = gate.end.load(Ordering::SeqCst);
            let d = width.delta(tb.base_ticks, t);
            let zone = geometry.zone(d);
            if end & CLOSING == 0 && latched {
                return Some(tb.at(end));
            }
            if wide && end == REBASING {
                // A rebase from a counter behind is replacing this timeline: stand at the
                // mark's ceiling (`None`), where the fresh timeline starts or later. Not at the
                // base: its time was measured on whichever CPU the last write ran on, and the
                // fresh timeline counts on from the rebasing CPU's counter (which may lag it).
                return None;
            }
            if zone == Zone::Behind {
                if wide {
                    // Before the base: the previous timeline, as its own readers computed it
                    // (the handover, or a CPU whose counter lags), unless that is behind what
                    // was handed out (a reset: `None`, the mark's ceiling).
                    if tb.is_behind(t, mark) {
                        return None;
                    }
                    return Some(self.in_handover(&geometry, version, &tb, t));
                }
                // Not where this version is latched: a reading past its deadline was seen, so
                // this one came round a wrap later (it stands at the end, below; with a close
                // announced after the latch, it helps it to the deadline first). A writer
                // stalled between judging its reading and closing let a reader here read the
                // handover while the end was closing (the interleaving test, 8 bits: 37 µs
                // back).
                if width.delta(t, tb.base_ticks) <= tb.hand && !latched {
                    // The previous version was latched past its deadline: the counter has
                    // passed this version's base (which is at or before that deadline), so
                    // this is a narrow counter come round a wrap later, not a reading from
                    // just before the base: stand still at the base.
                    let prev_gate = self.gate(version.slot.wrapping_add(1));
                    if prev_gate.latched.load(Ordering::Acquire) == version.number {
                        return Some(tb.base_ns);
                    }
                    // The handover: the previous timeline, exactly as its own readers
                    // compute it.
                    return Some(self.in_handover(&geometry, version, &tb, t));
                }
                // A narrow counter this far round is more likely late by more than a
                // quarter wrap than behind: treated as late below.
            }
            if end & CLOSING != 0 {
                if end != closing(version) {
                    // A close of a later version in this slot: this read will be rejected.
                    return Some(tb.base_ns);
                }
                // Help decide the close point, with a counter read made after seeing it.
                hook(Point::ReadHelp);
                fence(Ordering::SeqCst);
                let t2 = width.value(self.counter.ticks());
                let t2 = self.confirm(width, &tb, t2, mark);
                let margin = helper_margin(gate, &geometry, &tb);
                // A latch made before the close was announced (seen after it, as `close` does):
                // its readers stood at the deadline.
                let proposal = if self.is_latched(version) {
                    geometry.deadline
                } else {
                    self.propose(&geometry, &tb, t2, margin, mark)
                };
                let _ =
                    gate.end
                        .compare_exchange(end, proposal, Ordering::SeqCst, Ordering::SeqCst);
                if geometry.is_late(geometry.zone(width.delta(tb.base_ticks, t2)))
                    && width.delta(t2, tb.base_ticks) > tb.hand
                {
                    // What this helper saw is past the deadline: say so before anyone can
                    // read the counter a wrap later.
                    self.latch(version);
                }
                continue;
            }
            if zone == Zone::Valid {
                if end == 0 {
                    // Closed at the base (the counter had not reached it): where a rebase stopped
                    // the handover before the base, its readers stand at the stop past the base
                    // too (none can have read past the base before the stop was announced: the
                    // stop is a margin after a counter read made since, which was before the
                    // base).
                    if let Some(before) = self.stopped(&geometry, version, &tb) {
                        let at = width.value(tb.base_ticks.wrapping_sub(before));
                        return Some(tb.before_base(width, at));
                    }
                }
                // Up to the end, or past a close point while the writer publishes: stand
                // still there.
                return Some(tb.at(d.min(end)));
            }
            // Past the deadline: latch so that a counter coming round again cannot take time
            // back, then stand still at the end as it stands after the latch (looked at again:
            // a close announced meanwhile may not have seen the latch, and decides it).
            hook(Point::ReadLatch);
            self.latch(version);
            if !self.is_latched(version) {
                // The slot holds a later version (latched at its own number): this read is
                // rejected (read again), and must not wait here for a latch of its own.
                return Some(tb.base_ns);
            }
        }
    }

    /// Whether `version`'s timeline is latched at its end (by `latch`).
    pub(super) fn is_latched(&self, version: Version) -> bool {
        self.gate(version.slot).latched.load(Ordering::SeqCst) == version.number.wrapping_add(1)
    }

    /// A reading `t` before `tb`'s base, in its handover: the previous timeline's copy, up to
    /// where a rebase stopped it (`stop_handover`), standing still there.
    pub(super) fn in_handover(
        &self,
        geometry: &Geometry,
        version: Version,
        tb: &Timebase,
        t: u64,
    ) -> u64 {
        let width = geometry.width;
        match self.stopped(geometry, version, tb) {
            Some(before) if width.delta(t, tb.base_ticks) < before => {
                tb.before_base(width, width.value(tb.base_ticks.wrapping_sub(before)))
            }
            _ => tb.before_base(width, t),
        }
    }

    /// Where a rebase stopped `tb`'s handover (`stop_handover`): how many ticks before the base
    /// (`None`: not stopped, or at the base). A stop being decided is helped first, with a
    /// counter read made after seeing it. `None` when loaded after a counter read means that
    /// read came before any stop was announced: whoever decides one reads the counter after
    /// announcing it, and stops a margin after that.
    pub(super) fn stopped(
        &self,
        geometry: &Geometry,
        version: Version,
        tb: &Timebase,
    ) -> Option<u64> {
        let (gate, word) = (self.gate(version.slot), self.stop_word(version.slot));
        loop {
            let stop = word.load(Ordering::SeqCst);
            if stop & STOPPING == 0 {
                return Some(stop & !STOPPED).filter(|&before| before != 0);
            }
            hook(Point::ReadHelp);
            fence(Ordering::SeqCst);
            let t = geometry.width.value(self.counter.ticks());
            let margin = helper_margin(gate, geometry, tb);
            let _ = word.compare_exchange(
                STOPPING,
                stop_at(geometry.width, tb, t, margin),
                Ordering::SeqCst,
                Ordering::SeqCst,
            );
        }
    }

    /// Stops the readings in the handover of `version`'s timeline (a counter still short of
    /// its base): from a margin after a counter read made once that is announced, its readers
    /// stand still at the copy's time there instead of reading on (a rebase then starts its new
    /// rate from that point, where no reader has passed it). Returns how many ticks before the
    /// base the stop is (0: at the base, the counter a margin or less from it, or not in the
    /// handover), and this writer's counter reading.
    pub(super) fn stop_handover(
        &self,
        version: Version,
        tb: &Timebase,
        geometry: &Geometry,
        margin: u64,
    ) -> (u64, u64) {
        let word = self.stop_word(version.slot);
        word.store(STOPPING, Ordering::SeqCst);
        hook(Point::WriteClosing);
        let t = self.read_after_fence(geometry);
        let proposal = stop_at(geometry.width, tb, t, margin);
        let stop =
            match word.compare_exchange(STOPPING, proposal, Ordering::SeqCst, Ordering::SeqCst) {
                Ok(_) => proposal,
                // A helper decided first; only this writer stores `STOPPING`.
                Err(stop) => stop,
            };
        (stop & !STOPPED, t)
    }

    /// Latches `version`'s timeline at its end: from now on its readers stand still there.
    pub(super) fn latch(&self, version: Version) {
        let gate = self.gate(version.slot);
        gate.latched
            .fetch_max(version.number.wrapping_add(1), Ordering::SeqCst);
        gate.lim.store(0, Ordering::Release);
    }
}
