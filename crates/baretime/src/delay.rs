//! [`Delay`]: a busy-wait delay on a counter that waits *at least* the time asked for.

use core::hint::spin_loop;

use crate::counter::{Counter, Width};
use crate::frequency::Frequency;
use crate::scale::Scale;

/// Busy-waits on a [`Counter`] at a known rate.
///
/// Every delay lasts **at least** the requested time at the configured rate (within the
/// limits below):
///
/// - the tick count is rounded up ([`Scale::ns_to_ticks_ceil`]);
/// - counting starts at the counter's first change, a tick boundary, so a first reading
///   anywhere inside a tick — or inside a step of a counter that advances several ticks at
///   once (Armv8.6 allows a 1 GHz CNTVCT that steps by more than one) — cannot shorten it;
/// - a counter that steps back (a thread migrating to a CPU whose counter lags, a reset such
///   as a TSC after suspend to RAM, a faulty read) makes no progress by the step. What it
///   then counts from the lower value on is true time and counts, so a counter that never
///   comes back up (a reset) still ends the wait;
/// - progress is counted only past the readings the counter stepped back from: when it
///   comes back up to one or past it (a migration back, the end of a glitch), the time past
///   that reading and the time counted below it overlap, and the greater counts, not their
///   sum. The climb back is never progress;
/// - counters narrower than 64 bits are handled: each reading is compared with the one
///   before, so a reading up to half a wrap after it is told apart from a step back; the
///   wait tracks unwrapped positions (`i128`) and saturating tick counts, so no request up
///   to `u64::MAX` ns overflows or wraps.
///
/// What it cannot tell apart makes it wait longer, never less: a step forward that reaches
/// a reading the counter stepped back from counts as such a return would, even when it is a
/// lower value climbing past or a read that came late (that one step is then lost); and
/// beyond four step backs at once, two are merged, which may lengthen the wait by about the
/// distance between their readings plus what was counted since, if the counter comes back
/// between them or past them.
///
/// A jump *forward* is taken as time that passed. So a counter that runs ahead of true time,
/// a step back by more than half a wrap of a narrow counter (it reads as forward), and a
/// counter that comes back up to a value from before the wait began (a step back just
/// before it, or at its first change) can shorten the wait. So can a climb from one CPU's
/// counter to another's that is not a return to a reading the wait stepped back from, which
/// takes two steps back first: on three CPUs whose counters disagree, a climb from the lowest
/// line to the middle one (an adversarial review measured `wait_ticks(1000)` ending after 604
/// true ticks with lines 0, 500 and 100 ticks behind); on two, a reset seen on the lagging
/// CPU, then a migration to the leading one, whose line after the reset the wait never read
/// (another measured `wait_ticks(100_000)` at 1 GHz ending after 80 039 true ticks, the CPUs
/// 19 999 ticks apart). Each such climb counts as time by at most the CPUs' disagreement. Pin
/// the waiting thread, or wait on a synchronised counter, where the wait must hold to the
/// tick.
///
/// It may last longer (interrupts, preemption, the read itself). On a counter that never
/// changes it waits **forever**: a stuck counter gives no way to measure time (check a
/// counter with baretime-diag's `ReadStats` first if that can happen).
///
/// The rate is fixed when the delay is made: a `Delay` taken from a [`crate::Clock`] does
/// not follow the clock's later recalibrations.
///
/// With the `embedded-hal` feature it implements `embedded_hal::delay::DelayNs`.
///
/// ```
/// use baretime::{Delay, FnCounter, Frequency};
/// use core::cell::Cell;
///
/// // A fake 16-bit counter at 1 MHz that advances 7 ticks per read.
/// let now = Cell::new(0u64);
/// let counter = FnCounter::new(|| { now.set((now.get() + 7) & 0xffff); now.get() }, 16);
/// let delay = Delay::new(counter, Frequency::exact_hz(1_000_000).unwrap());
/// delay.wait_ns(100_000); // 100 µs: 100 ticks, across a wrap if need be
/// ```
#[derive(Clone, Copy, Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Delay<C: Counter> {
    counter: C,
    scale: Scale,
}

impl<C: Counter> Delay<C> {
    /// A delay on `counter` running at `frequency`.
    pub const fn new(counter: C, frequency: Frequency) -> Delay<C> {
        Delay {
            counter,
            scale: Scale::new(frequency),
        }
    }

    /// A delay on `counter` with precomputed constants.
    ///
    /// ```
    /// use baretime::{Delay, FnCounter, Frequency, Scale};
    /// use core::cell::Cell;
    ///
    /// let now = Cell::new(0u64);
    /// let counter = FnCounter::new(|| { now.set(now.get() + 1); now.get() }, 64);
    /// // One Scale, computed once (a few u128 divisions), shared by several delays.
    /// let scale = Scale::new(Frequency::exact_hz(1_000_000).unwrap());
    /// let delay = Delay::with_scale(&counter, scale);
    /// delay.wait_ticks(10); // at least 10 ticks after the counter's next change
    /// assert!(now.get() >= 11);
    /// assert_eq!(delay.scale().ns_to_ticks_ceil(1_500), 2); // 1.5 µs at 1 MHz, rounded up
    /// ```
    pub const fn with_scale(counter: C, scale: Scale) -> Delay<C> {
        Delay { counter, scale }
    }

    /// The scale this delay converts with.
    pub const fn scale(&self) -> &Scale {
        &self.scale
    }

    /// Waits at least `ns` nanoseconds.
    pub fn wait_ns(&self, ns: u64) {
        self.wait_ticks(self.scale.ns_to_ticks_ceil(ns));
    }

    /// Waits until at least `ticks` ticks have elapsed, counted from the counter's first
    /// change.
    pub fn wait_ticks(&self, ticks: u64) {
        if ticks == 0 {
            return;
        }
        let width = Width::of(&self.counter);
        // Each reading is compared with the one before: up to half a wrap forward is
        // progress, further is a step back (a 1-bit counter, whose half is 0, counts its one
        // step as progress). So a reading up to half a wrap late is still told apart.
        let forward = width.half().max(1);
        let first = width.value(self.counter.ticks());
        let mut last = first;
        let mut progress = Progress::new(ticks);
        // Wait for a tick boundary: counting starts at the first change.
        loop {
            let now = width.value(self.counter.ticks());
            let step = width.delta(last, now);
            if step != 0 {
                if step <= forward {
                    progress.skip(step);
                } else {
                    progress.back(width.backwards_by(last, now));
                }
                last = now;
                break;
            }
            spin_loop();
        }
        loop {
            let now = width.value(self.counter.ticks());
            let step = width.delta(last, now);
            if step == 0 {
                spin_loop();
                continue;
            }
            if step <= forward {
                progress.forward(step);
                if progress.proven >= ticks {
                    return;
                }
            } else {
                progress.back(width.backwards_by(last, now));
            }
            last = now;
        }
    }
}

/// How many step backs a wait follows apart; beyond that two are merged (see
/// [`Progress::push`]).
const STEP_BACKS: usize = 4;

/// A step back the counter may still undo, by coming back up to the reading before it or
/// past it (a thread migrating back to the CPU it left, the end of a glitch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct StepBack {
    /// The position of the reading before the step back.
    from: i128,
    /// The ticks proven when that reading was taken, minus `from`. Coming back at position
    /// `p ≥ from` shows only the `p − from` ticks since that reading, so `base + p` in all.
    base: i128,
    /// What is proven if the counter has not undone this step back (yet): it is then on a
    /// line below, where every step forward is true time.
    pending: u64,
    /// Stands for several merged step backs: undoing one may leave another pending.
    merged: bool,
}

/// What a wait has proven, in ticks of true time since the counter's first change.
///
/// Positions unwrap the readings: each one is the previous plus the step forward or minus
/// the step back (an `i128`, which no count of reads can take out of range). A step forward
/// is either true time on the line the counter is on, or the counter undoing a step back,
/// which shows only the time since the reading before that step back — which of the two
/// cannot be told. So every reading is taken each way and the least result kept, and for
/// each step back the result of the readings that would leave it pending (`pending`), since
/// only those can undo it later: a step back is undone once. What was counted on a lower
/// line and the time past the reading it stepped back from then overlap: their maximum
/// counts, not their sum, and the climb back counts as nothing.
#[derive(Debug)]
struct Progress {
    /// Ticks proven, capped at the request (a wait needs no more, and a step back whose
    /// `pending` reaches the cap can no longer matter).
    proven: u64,
    cap: u64,
    /// The last reading's position.
    pos: i128,
    /// The step backs that may still matter, oldest first, then `None`s.
    steps: [Option<StepBack>; STEP_BACKS],
}

/// `base + pos`, the ticks a return at `pos` proves, within `0..=cap`.
fn returned(base: i128, pos: i128, cap: u64) -> u64 {
    let cap_i = i128::from(cap);
    u64::try_from(base.saturating_add(pos).clamp(0, cap_i)).unwrap_or(cap)
}

/// The least of two bounds, either absent.
fn least(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

impl Progress {
    const fn new(cap: u64) -> Progress {
        Progress {
            proven: 0,
            cap,
            pos: 0,
            steps: [None; STEP_BACKS],
        }
    }

    /// The first change, forward: the tick boundary counting starts from.
    fn skip(&mut self, ticks: u64) {
        self.pos = self.pos.saturating_add(i128::from(ticks));
    }

    /// A step `ticks` forward.
    fn forward(&mut self, ticks: u64) {
        self.pos = self.pos.saturating_add(i128::from(ticks));
        if self.steps.first().map_or(true, Option::is_none) {
            // No step back to undo (they are kept without gaps): all of it is true time.
            self.proven = self.proven.saturating_add(ticks).min(self.cap);
            return;
        }
        let (pos, cap) = (self.pos, self.cap);
        // The least that undoing a newer step back than the one at hand would prove.
        let mut newer: Option<u64> = None;
        let mut dropped = false;
        for slot in self.steps.iter_mut().rev() {
            let Some(s) = slot.as_mut() else {
                continue;
            };
            let undone = (s.from <= pos).then(|| s.pending.max(returned(s.base, pos, cap)));
            // It stays pending if this step is true time on its line below, or undoes a
            // newer step back (or, merged, another of its own).
            let others = if s.merged {
                least(newer, undone)
            } else {
                newer
            };
            let below = s.pending.saturating_add(ticks).min(cap);
            s.pending = others.map_or(below, |r| below.min(s.pending.max(r)));
            newer = least(newer, undone);
            if s.pending >= cap {
                *slot = None;
                dropped = true;
            }
        }
        let same_line = self.proven.saturating_add(ticks).min(cap);
        self.proven = newer.map_or(same_line, |r| same_line.min(self.proven.max(r)));
        if dropped {
            self.compact();
        }
    }

    /// A step `ticks` back: no progress; the step back is remembered.
    fn back(&mut self, ticks: u64) {
        self.push(StepBack {
            from: self.pos,
            base: i128::from(self.proven).saturating_sub(self.pos),
            pending: self.proven,
            merged: false,
        });
        self.pos = self.pos.saturating_sub(i128::from(ticks));
    }

    /// Keeps the order of the step backs, without gaps.
    fn compact(&mut self) {
        let mut steps = [None; STEP_BACKS];
        for (to, from) in steps.iter_mut().zip(self.steps.iter().flatten()) {
            *to = Some(*from);
        }
        self.steps = steps;
    }

    /// Adds `new`, the newest step back. When all places are taken, two neighbours (in the
    /// order they happened) whose readings are closest become one that is at or below both
    /// in every field, so undoing it proves no more than undoing either would have: the wait
    /// can only last longer — about by the distance of the two readings plus what was
    /// counted since, and only if the counter comes back between or past them.
    fn push(&mut self, new: StepBack) {
        if let Some(slot) = self.steps.iter_mut().find(|s| s.is_none()) {
            *slot = Some(new);
            return;
        }
        let mut all = [new; STEP_BACKS + 1];
        for (to, from) in all.iter_mut().zip(self.steps.iter().flatten()) {
            *to = *from;
        }
        let mut closest: Option<(usize, u128)> = None;
        for (i, (a, b)) in all.iter().zip(all.iter().skip(1)).enumerate() {
            let distance = a
                .from
                .abs_diff(b.from)
                .saturating_add(a.base.abs_diff(b.base));
            if closest.map_or(true, |(_, d)| distance < d) {
                closest = Some((i, distance));
            }
        }
        let Some((at, _)) = closest else {
            return;
        };
        let mut steps = [None; STEP_BACKS];
        let mut to = steps.iter_mut();
        let mut pair: Option<StepBack> = None;
        for (i, s) in all.iter().enumerate() {
            if i == at {
                pair = Some(*s);
                continue;
            }
            let s = match pair.take() {
                Some(a) => StepBack {
                    from: a.from.min(s.from),
                    base: a.base.min(s.base),
                    pending: a.pending.min(s.pending),
                    merged: true,
                },
                None => *s,
            };
            if let Some(slot) = to.next() {
                *slot = Some(s);
            }
        }
        self.steps = steps;
    }
}

/// Drivers written against embedded-hal take a `Delay` as their delay provider (feature
/// `embedded-hal`; every method waits at least the time asked, as [`Delay::wait_ns`] does).
///
/// ```
/// # #[cfg(feature = "embedded-hal")] {
/// use baretime::{Delay, FnCounter, Frequency};
/// use embedded_hal::delay::DelayNs;
/// use core::cell::Cell;
///
/// /// A driver that needs a 50 µs reset pulse, generic over the delay provider.
/// fn reset_pulse(delay: &mut impl DelayNs) {
///     // drive the pin low ...
///     delay.delay_us(50);
///     // ... and high again
/// }
///
/// let now = Cell::new(0u64);
/// let counter = FnCounter::new(|| { now.set(now.get() + 3); now.get() }, 32);
/// let mut delay = Delay::new(counter, Frequency::exact_hz(48_000_000).unwrap());
/// reset_pulse(&mut delay);
/// assert!(now.get() >= 50 * 48); // 2400 ticks at 48 MHz, at least
/// # }
/// ```
#[cfg(feature = "embedded-hal")]
impl<C: Counter> embedded_hal::delay::DelayNs for Delay<C> {
    fn delay_ns(&mut self, ns: u32) {
        self.wait_ns(u64::from(ns));
    }

    fn delay_us(&mut self, us: u32) {
        self.wait_ns(u64::from(us).saturating_mul(1_000));
    }

    fn delay_ms(&mut self, ms: u32) {
        self.wait_ns(u64::from(ms).saturating_mul(1_000_000));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FnCounter;
    use core::cell::Cell;

    /// Runs `wait_ns(ns)` on a `bits`-bit counter at `hz` that starts at `start` and moves
    /// by `script(read_index)` ticks (wrapping) at each read; returns the true ticks that
    /// passed (the sum of forward moves) and the number of reads.
    fn run(bits: u32, hz: u64, start: u64, ns: u64, script: impl Fn(u64) -> i64) -> (u64, u64) {
        let width = Width::new(bits);
        let value = Cell::new(start);
        let reads = Cell::new(0u64);
        let forward = Cell::new(0u64);
        let counter = FnCounter::new(
            || {
                let v = value.get();
                let step = script(reads.get());
                reads.set(reads.get() + 1);
                if step >= 0 {
                    forward.set(forward.get() + step as u64);
                    value.set(width.add(v, step as u64));
                } else {
                    value.set(width.value(v.wrapping_sub(step.unsigned_abs())));
                }
                v
            },
            bits,
        );
        Delay::new(counter, Frequency::exact_hz(hz).unwrap()).wait_ns(ns);
        (forward.get(), reads.get())
    }

    #[test]
    fn waits_at_least_the_request() {
        // 1 MHz, 1 tick per read: 10 µs needs ≥ 10 ticks of counting.
        let (ticks, _) = run(64, 1_000_000, 0, 10_000, |_| 1);
        assert!(ticks >= 10, "{ticks}");
        assert!(ticks <= 14, "{ticks}");
    }

    #[test]
    fn zero_is_free() {
        assert_eq!(run(64, 1_000_000, 0, 0, |_| 1), (0, 0));
    }

    #[test]
    fn max_u32_ns_on_a_narrow_wrapping_counter() {
        // A 16-bit counter at 1 MHz wraps every 65 ms; 4.29 s must still be waited in full.
        // 1000 ticks per read keeps the test quick.
        let (ticks, _) = run(16, 1_000_000, 0xff00, u64::from(u32::MAX), |_| 1_000);
        let want = u64::from(u32::MAX) / 1_000;
        assert!(ticks >= want, "{ticks} < {want}");
        assert!(ticks <= want + 3_000, "{ticks}");
    }

    /// A counter that steps by 32 ticks (Armv8.6's 1 GHz CNTVCT may): the first reading can
    /// be just before a step, so the wait starts at the first change.
    #[test]
    fn coarse_steps_never_shorten_the_wait() {
        // Steps of 32 ticks every 32 reads: the first read is 1 read before a step.
        let (ticks, _) = run(
            64,
            1_000_000_000,
            0,
            100,
            |i| if i % 32 == 0 { 32 } else { 0 },
        );
        // The counter's own value moved ≥ 100 ticks after its first change.
        assert!(ticks >= 100 + 32, "{ticks}");
    }

    /// Hole 5: a counter one tick behind on the second read used to end the wait at once
    /// (the step back read as an elapsed ≈ the whole wrap).
    #[test]
    fn a_step_back_is_no_progress() {
        // 64-bit at 1 GHz: 1 000 000 then 999 999 then onwards; wait 10 µs = 10 000 ticks.
        let (ticks, reads) = run(64, 1_000_000_000, 1_000_000, 10_000, |i| match i {
            0 => -1,
            _ => 100,
        });
        assert!(ticks >= 10_000, "{ticks} ticks, {reads} reads");
        // 16-bit at 1 MHz, 1000 then 999: 40 ms needs 40 000 ticks.
        let (ticks, reads) = run(16, 1_000_000, 1000, 40_000_000, |i| match i {
            0 => -1,
            _ => 10,
        });
        assert!(ticks >= 40_000, "{ticks} ticks, {reads} reads");
        // Steps back every few reads never end it early either.
        let (ticks, _) = run(16, 1_000_000, 0, 30_000_000, |i| {
            if i % 3 == 2 {
                -5
            } else {
                20
            }
        });
        assert!(ticks >= 30_000, "{ticks}");
    }

    /// Runs `wait_ticks(ticks)` on a `bits`-bit counter whose reading is `true − offset`
    /// (wrapped), the true count starting at `start`: before each read, `script(read_index)`
    /// gives the true ticks that pass and the offset of the line the read lands on (a CPU
    /// whose counter lags, a counter after a reset). Returns the true ticks from the
    /// counter's first change to the last read, and the number of reads.
    fn run_lines(
        bits: u32,
        start: u64,
        ticks: u64,
        script: impl Fn(u64) -> (u64, u64),
    ) -> (u64, u64) {
        let width = Width::new(bits);
        let reads = Cell::new(0u64);
        let now = Cell::new(0u64); // true ticks so far
        let first = Cell::new(None::<u64>);
        let changed_at = Cell::new(None::<u64>);
        let counter = FnCounter::new(
            || {
                let (pass, offset) = script(reads.get());
                reads.set(reads.get() + 1);
                now.set(now.get() + pass);
                let v = width.value(start.wrapping_add(now.get()).wrapping_sub(offset));
                match first.get() {
                    None => first.set(Some(v)),
                    Some(f) if f != v && changed_at.get().is_none() => {
                        changed_at.set(Some(now.get()))
                    }
                    Some(_) => {}
                }
                v
            },
            bits,
        );
        let hz = Frequency::exact_hz(1_000_000_000).unwrap();
        Delay::new(counter, hz).wait_ticks(ticks);
        (now.get() - changed_at.get().unwrap(), reads.get())
    }

    /// Issue 14, case 5: a 1 ms wait (1 GHz) on a thread that migrates to a CPU whose counter
    /// is 2 ms behind, for 3 reads, and back. The old wait restarted from the low value and
    /// took the climb back as progress: it ended 5 true ticks after the first change.
    #[test]
    fn a_migration_there_and_back_is_not_progress() {
        let want = 1_000_000;
        let (elapsed, reads) = run_lines(64, 50_000_000, want, |i| {
            (1, if (3..=5).contains(&i) { 2_000_000 } else { 0 })
        });
        assert!(
            elapsed >= want,
            "ended after {elapsed} ticks of true time, asked {want} ({reads} reads)"
        );
        assert!(elapsed <= want + 2, "{elapsed} ticks for {want}");
    }

    /// Issue 14, case 5: one low read on a 16-bit counter (a glitch 30 000 ticks back, within
    /// half a wrap) during a 25 ms wait at 1 MHz. The old wait counted the climb back from
    /// the low read as 30 000 ticks of progress and ended at once.
    #[test]
    fn one_low_read_on_a_narrow_counter_is_not_progress() {
        let want = 25_000;
        let (elapsed, reads) = run_lines(16, 1_000, want, |i| (1, if i == 4 { 30_000 } else { 0 }));
        assert!(
            elapsed >= want,
            "ended after {elapsed} ticks of true time, asked {want} ({reads} reads)"
        );
        assert!(elapsed <= want + 2, "{elapsed} ticks for {want}");
    }

    /// A reset (a 64-bit counter at 2^40 read as 0 from the fourth read on, for good) does
    /// not hang the wait: what it counts after the reset is true time.
    #[test]
    fn a_reset_does_not_hang() {
        let want = 1_000_000;
        let (elapsed, _) = run_lines(64, 1 << 40, want, |i| (1, if i >= 3 { 1 << 40 } else { 0 }));
        assert!(
            (want..=want + 2).contains(&elapsed),
            "{elapsed} ticks for {want}"
        );
    }

    /// A thread that stays on a CPU 200 ticks behind for longer than that (its counter climbs
    /// past the reading it left) and then migrates back: the time below and the time past
    /// the reading left overlap, and the wait ends on time.
    #[test]
    fn a_long_stay_below_then_back() {
        let want = 5_000;
        let (elapsed, _) = run_lines(64, 1_000_000, want, |i| {
            (1, if (10..1_000).contains(&i) { 200 } else { 0 })
        });
        assert!(
            (want..=want + 2).contains(&elapsed),
            "{elapsed} ticks for {want}"
        );
        // Not back before the end: the lower CPU's time counts.
        let (elapsed, _) = run_lines(64, 1_000_000, want, |i| (1, if i >= 10 { 200 } else { 0 }));
        assert!(
            (want..=want + 3).contains(&elapsed),
            "{elapsed} ticks for {want}"
        );
    }

    /// A reset, then migrations between two CPUs 300 ticks apart in the new epoch, on a
    /// 32-bit counter: every return overlaps the time counted below it.
    #[test]
    fn migrations_after_a_reset() {
        let want = 20_000;
        let (elapsed, reads) = run_lines(32, 0x9000_0000, want, |i| {
            let reset = if i >= 5 { 0x5000_0000 } else { 0 };
            let lag = if i >= 5 && (i / 50) % 2 == 1 { 300 } else { 0 };
            (1, reset + lag)
        });
        assert!(
            (want..=want + 4).contains(&elapsed),
            "{elapsed} ticks for {want} ({reads} reads)"
        );
    }

    /// More step backs at once than are followed apart (a CPU 40 ticks further behind every
    /// 100 reads, never back): merged, they never end the wait early, and it ends about on
    /// time (a tick lost at each reading stepped back from that the counter climbs past).
    #[test]
    fn many_step_backs_at_once() {
        let want = 5_000;
        let (elapsed, reads) = run_lines(64, 1_000_000, want, |i| (1, 40 * (i / 100)));
        assert!(
            elapsed >= want,
            "{elapsed} ticks for {want} ({reads} reads)"
        );
        assert!(
            elapsed <= 2 * want,
            "{elapsed} ticks for {want} ({reads} reads)"
        );
    }

    /// Random lines: a script of forward steps, temporary step backs (to a line any distance
    /// below, undone later — one or more at once — by coming back to the line left, or to any
    /// line between it and the reading before the step back, possibly after more time), and
    /// permanent resets, on every width; after the script the counter keeps moving forward.
    /// The wait must last at least the ticks asked in true time, and end within a bounded
    /// number of reads.
    mod lines {
        use super::*;
        use proptest::prelude::*;
        use std::cell::RefCell;
        use std::vec::Vec;

        #[derive(Clone, Copy, Debug)]
        enum Op {
            Forward(u64),
            Back(u64),
            Return { levels: u64, below: u64, extra: u64 },
            Reset(u64),
        }

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![
                4 => any::<u64>().prop_map(Op::Forward),
                2 => any::<u64>().prop_map(Op::Back),
                2 => (any::<u64>(), any::<u64>(), any::<u64>())
                    .prop_map(|(levels, below, extra)| Op::Return { levels, below, extra }),
                1 => any::<u64>().prop_map(Op::Reset),
            ]
        }

        /// A size in `0..=max` from `raw`, spread over magnitudes (a random bit count).
        fn scaled(raw: u64, max: u64) -> u64 {
            if max == 0 {
                return 0;
            }
            let top = 64 - max.leading_zeros();
            let k = (raw >> 57) as u32 % (top + 1);
            let mask = if k >= 64 { u64::MAX } else { (1u64 << k) - 1 };
            (raw & mask).min(max)
        }

        struct Sim {
            reads: u64,
            /// True ticks so far.
            now: i128,
            /// The current line's offset below the true count.
            offset: i128,
            /// The lines stepped back from and not yet returned to: (offset, true ticks when
            /// left).
            left: Vec<(i128, i128)>,
            first: Option<u64>,
            changed_at: Option<i128>,
        }

        /// Runs one script. `deep`: any number of step backs (then more than
        /// [`STEP_BACKS`] are merged), each at most four times the ticks asked; otherwise at
        /// most [`STEP_BACKS`] step backs and resets, of any size.
        fn check(bits: u32, start: u64, ticks_raw: u64, post_raw: u64, script: &[Op], deep: bool) {
            let width = Width::new(bits);
            let forward = width.half().max(1);
            let back_max = width.mask() - forward; // a step back of 1..=back_max reads as one
            let ticks = 1 + scaled(ticks_raw, (1u64 << 50).min(forward.saturating_mul(2048)));
            let lag_max = if deep {
                back_max.min(ticks.saturating_mul(4))
            } else {
                back_max
            };
            let step_max = forward.min(ticks.saturating_mul(2));
            // Beyond the first STEP_BACKS step backs, a shallow script moves forward instead.
            let mut backs = 0;
            let script: Vec<Op> = script
                .iter()
                .map(|&op| match op {
                    Op::Back(r) | Op::Reset(r) if !deep && backs == STEP_BACKS => Op::Forward(r),
                    Op::Back(_) | Op::Reset(_) => {
                        backs += 1;
                        op
                    }
                    op => op,
                })
                .collect();
            // After the script the counter moves `post` ticks per read: in 1 024 reads or
            // fewer the ticks asked pass.
            let post =
                scaled(post_raw, (ticks / 4).min(forward)).max((ticks / 1024).clamp(1, forward));
            // How many reads it may take after the script. Shallow: what is left of the
            // request, plus a read lost at each step back undone and at each reading a step
            // back came from that the counter climbs past. Deep: each merge may add the
            // request and the distance of the readings merged, bounded by all the script's
            // moves.
            let after = if deep {
                let moves = (script.len() as u128) * u128::from(step_max.max(lag_max));
                (u128::from(ticks) + backs as u128 * (u128::from(ticks) + moves)) / u128::from(post)
                    + 2 * backs as u128
                    + 2
            } else {
                u128::from(ticks.div_ceil(post)) + 2 * backs as u128 + 2
            };
            let max_reads = script.len() as u128 + 1 + after;
            let wrap = i128::from(width.mask()) + 1;
            let sim = RefCell::new(Sim {
                reads: 0,
                now: 0,
                offset: 0,
                left: Vec::new(),
                first: None,
                changed_at: None,
            });
            let counter = FnCounter::new(
                || {
                    let mut s = sim.borrow_mut();
                    let i = s.reads;
                    s.reads += 1;
                    assert!(
                        u128::from(s.reads) <= max_reads,
                        "no end after {max_reads} reads: {ticks} ticks, post {post}, bits {bits}"
                    );
                    // The first read comes before the script: the wait starts on the top line.
                    let op = match i.checked_sub(1) {
                        None => Op::Forward(0),
                        Some(i) => match script.get(i as usize) {
                            Some(Op::Forward(r)) => Op::Forward(scaled(*r, step_max)),
                            Some(op) => *op,
                            None => Op::Forward(post),
                        },
                    };
                    match op {
                        Op::Forward(step) => s.now += i128::from(step),
                        Op::Back(r) if back_max > 0 => {
                            let here = (s.offset, s.now);
                            s.left.push(here);
                            s.offset += i128::from(1 + scaled(r, lag_max - 1));
                        }
                        Op::Reset(r) if back_max > 0 => {
                            s.offset += i128::from(1 + scaled(r, lag_max - 1));
                            s.left.clear();
                        }
                        Op::Return {
                            levels,
                            below,
                            extra,
                        } if !s.left.is_empty() => {
                            let n = s.left.len();
                            let to = n - 1 - (levels % n as u64) as usize;
                            let (line, left_at) = s.left[to];
                            // At or above the reading before the step back (`below` at most
                            // the time since), and above the reading now (`gap` ≥ 1).
                            let since = u64::try_from(s.now - left_at).unwrap();
                            let gap = s.offset - line;
                            let below = scaled(below, since)
                                .min(u64::try_from(gap - 1).unwrap_or(u64::MAX));
                            let mut extra = scaled(extra, step_max);
                            let jump = |extra: u64| gap - i128::from(below) + i128::from(extra);
                            if jump(extra) > i128::from(forward) {
                                extra = 0;
                            }
                            // A jump of more than half a wrap would read as a step back.
                            if jump(extra) <= i128::from(forward) {
                                s.now += i128::from(extra);
                                s.offset = line + i128::from(below);
                                s.left.truncate(to);
                            }
                        }
                        _ => {}
                    }
                    let v = (i128::from(start) + s.now - s.offset).rem_euclid(wrap) as u64;
                    match s.first {
                        None => s.first = Some(v),
                        Some(f) if f != v && s.changed_at.is_none() => s.changed_at = Some(s.now),
                        Some(_) => {}
                    }
                    v
                },
                bits,
            );
            let hz = Frequency::exact_hz(1_000_000_000).unwrap();
            Delay::new(counter, hz).wait_ticks(ticks);
            let s = sim.borrow();
            let elapsed = s.now - s.changed_at.unwrap();
            assert!(
                elapsed >= i128::from(ticks),
                "ended after {elapsed} ticks of true time, asked {ticks} ({} reads, bits {bits})",
                s.reads
            );
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(4096))]
            #[test]
            fn never_early_and_ends(
                bits in 1u32..=64,
                start in any::<u64>(),
                ticks in any::<u64>(),
                post in any::<u64>(),
                script in proptest::collection::vec(op(), 0..48),
            ) {
                check(bits, start, ticks, post, &script, false);
            }

            #[test]
            fn never_early_and_ends_with_merged_step_backs(
                bits in 1u32..=64,
                start in any::<u64>(),
                ticks in any::<u64>(),
                post in any::<u64>(),
                script in proptest::collection::vec(op(), 0..48),
            ) {
                check(bits, start, ticks, post, &script, true);
            }
        }
    }

    #[test]
    fn u64_max_request_does_not_overflow() {
        let s = Scale::new(Frequency::exact_hz(10_000_000_000).unwrap());
        assert_eq!(s.ns_to_ticks_ceil(u64::MAX), u64::MAX);
    }

    #[cfg(feature = "embedded-hal")]
    #[test]
    fn delay_ns_trait() {
        use embedded_hal::delay::DelayNs;
        let c = Cell::new(0u64);
        // 1000 ticks per read: the 4.3 s request takes 4.3 million reads, not 4.3 billion.
        let counter = FnCounter::new(
            || {
                c.set(c.get() + 1_000);
                c.get()
            },
            64,
        );
        let mut d = Delay::new(counter, Frequency::exact_hz(1_000_000_000).unwrap());
        d.delay_ns(u32::MAX);
        assert!(c.get() >= u64::from(u32::MAX));
    }
}
