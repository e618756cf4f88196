//! [`Watchdog`]: the counter measured against the reference after boot, with the
//! calibration's bracketing and a worst-case bound; a delayed reference read is not a
//! changed counter, and a changed rate is recalibrated lock-free, never abandoned. The same
//! samples, kept over a growing window, refine the clock's rate (slew-limited).
//!
//! The method, the verdicts, the false-alarm rate and the detection time are on
//! [`Watchdog`]'s docs (this module is private; they render there).

use core::fmt;

use crate::calibrate::wide::{mul_div, mul_div_ceil, mul_div_round};
use crate::calibrate::Reference;
use crate::clock::{Clock, ClockError};
use crate::counter::{Counter, Width};
use crate::frequency::{Accuracy, Frequency, Source};
use crate::scale::saturate_u64;

mod arith;
mod judge;
mod refine;
mod sample;
mod window;

use arith::*;
use sample::*;
use window::*;

/// ppb in one.
const PPB: u64 = 1_000_000_000;
/// An interval whose own bound is wider than this (1 %) is too short to judge: it is
/// extended to the next check instead.
const MAX_JUDGED_PPB: u64 = 10_000_000;
/// A deviation beyond this (12.5 %) is not a rate change: a jump of one count or the other.
const GROSS_PPB: u64 = PPB / 8;
/// Samples of refinement's window kept for its rate's range (every pair of them bounds
/// the rate; when full, every other older one is dropped, the anchor and the newest kept).
const KNOTS: usize = 32;
/// The bound on the clock's rate holds where the rate was one rate since any of the
/// window's newest fitting span's first this many samples (see [`Watchdog`]).
const SUFFIXES: usize = 3;
/// Consecutive checks whose every bracket is wide at which the narrowest of them becomes the
/// floor: the last of them (the fourth) and the next ones are judged against it, so a read
/// path that became slower for good (a migrated VM that traps the counter's reads, a
/// reference behind a slower bus) costs three rejected checks and widens the bound from then
/// on instead of voiding every check.
const WIDE_RUN: u32 = 4;
/// Checks an interval may be extended over while it agrees both with the baseline and with a
/// pending deviation (too short to tell them apart): then the one-off rule decides.
const EXTEND_CHECKS: u64 = 8;
/// A counter is judged stopped only over a span in which, at the rate in force, it must
/// have moved this many times its reads' uncertainty (both brackets and two steps).
const STOP_SPAN: u128 = 4;
/// Reads spent, per check until it is found, on the reference's step (a 1 kHz tick read in
/// 1 µs moves within 1 000 reads).
const STEP_READS: u32 = 1 << 14;

/// The watchdog's verdict on one check (see [`Watchdog`] for how each is decided).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Watch {
    /// (a) No verdict this time, and why: nothing about the counter is concluded from it.
    NoVerdict(Unjudged),
    /// (b) The counter's rate over the interval since the last judged check agrees with the
    /// rate measured before, within both bounds.
    Steady {
        /// The interval's rate against the reference's stated rate, with its worst-case
        /// bound ([`Accuracy::Measured`]: the brackets', the quantization's and the
        /// reference's stated tolerance).
        rate: Frequency,
    },
    /// (c) The rate changed: beyond the bounds, confirmed by two consecutive intervals that
    /// agree (beyond 12.5 %, with the counter off the hook's cadence both times), or by two
    /// consecutive intervals off on the same side, the second further off (a rate that
    /// keeps moving: a fast ramp, followed to the second's rate), or below
    /// an interval's threshold, seen as refinement's window's two parts disagreeing (a
    /// small change, a ramp). The clock was recalibrated to `rate` (lock-free: time neither
    /// jumps nor goes back, promises 1–2 of [`Clock`]). The kernel need do nothing; it may
    /// log it (a migrated VM, a throttled counter) and read [`Watchdog::health`].
    Changed {
        /// The new rate, measured over the confirming interval, with its bound.
        rate: Frequency,
        /// What [`Clock::recalibrate`] returned ([`ClockError::Late`] still applies the
        /// rate; `Busy` and `Behind` do not, and the next check tries again).
        recalibrated: Result<(), ClockError>,
    },
    /// (d) The counter did not move while the reference did. The clock stands still: the
    /// kernel should move to another clock source.
    CounterStopped,
    /// (d) The counter stepped against the reference while the reference kept its cadence
    /// (or the counter went back): by this many nanoseconds (negative: back, or time lost).
    /// The clock kept its promises across it (it never goes back), but time read across the
    /// step is off by `by_ns`: the kernel should distrust the counter (Linux marks such a
    /// TSC unstable) and, if it keeps the clock, [`Clock::rebase`] it. A counter that runs
    /// on at a new rate after a step is [`Watch::Changed`] at the next check (the next
    /// judged one: the jump splits the history, and the first interval after it is judged
    /// afresh against the clock's rate), where the new rate is within 12.5 % of the old;
    /// beyond, the next is a jump too, and (c) follows when two intervals agree.
    CounterJumped {
        /// The step, in nanoseconds at the rate in force (saturated).
        by_ns: i64,
    },
}

/// Why a check gave no verdict ([`Watch::NoVerdict`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Unjudged {
    /// The first check: it only takes the first sample.
    First,
    /// Every try's bracket was wide (more than twice the narrowest seen, plus two ticks): a
    /// delayed reference read, an interrupt, an SMI, a vCPU preemption. The next check
    /// measures from the last good sample. The fourth wide check in a row is judged, against
    /// the narrowest of the four brackets (and so are the next ones): a read path that became
    /// slower for good (a migrated VM, a trapped counter read) costs three checks, not every
    /// one. Also a check whose own measurement of the rate, for a narrow count's wraps, was
    /// disturbed (its halves disagree, or a sample of it was wide: see *Widths* on
    /// [`Watchdog`]); the fourth such in a row is counted all the same.
    WideBracket,
    /// The reference did not move although the counter did: over the interval, or across
    /// the check's own reads (two reads of one value more than twice its step apart): it
    /// stands still now, and the interval goes on to the next check, which sees the
    /// stand-still whole, as one step of its count (a sample inside it would split it into
    /// two steps in consecutive intervals, which two intervals cannot tell from a change).
    ReferenceStill,
    /// The reference stepped, went back or stood still part of the interval while the
    /// counter kept its cadence (per check: an interval that spans checks without a
    /// verdict is that many hook periods), or the two disagreed by more than 12.5 % and
    /// neither kept it, or the reference's move cannot be squared with the counter's (more
    /// ticks due than a 64-bit count holds; a narrow counter read behind where its wraps are
    /// counted from the reference): the interval is dropped and measuring starts again from
    /// this sample.
    ReferenceJumped,
    /// Too little elapsed since the last judged check for a bound under 1 %.
    TooShort,
    /// Too much elapsed since the last accepted sample to count a narrow count's wraps from
    /// the clock's rate: its rate's bound over the interval reaches a quarter wrap (a check
    /// a day after the last against a 16-bit PIT, 55 ms a wrap, with the rate known to
    /// 1 ppm: up to 86 ms; see *Widths* on [`Watchdog`]), and a short measurement of the
    /// rate at the check cannot count them either; or, at the hook's period, a narrow count
    /// the check cannot measure deviates, or may move by a whole wrap (then
    /// [`WatchdogHealth::bound_ppb`] covers 12.5 %: *Widths*). The interval is dropped, the
    /// clock's rate and [`WatchdogHealth::bound_ppb`] are left as they were, and measuring
    /// starts again from this sample: the next check at the hook's period is judged.
    TooLong,
    /// The rate moved beyond the bounds in this interval: a change is reported only when
    /// the next interval agrees, or is further off on the same side ([`Watch::Changed`]); a
    /// one-off (a reference read that was wrong inside a narrow bracket, a small step of
    /// either count) never is. A run of them is intervals off the baseline that alternate
    /// sides or fall back toward it without agreeing: a rate (of the counter or of the
    /// reference) moving back and forth faster than the hook, or reads wrong inside their
    /// brackets — not a rate that keeps moving one way (that is followed). Also the interval
    /// after such a deviation where it agrees with both the deviation and the baseline (too
    /// short, or at the threshold, to tell them apart): it is extended to the next check, up
    /// to eight checks long; and an extended interval off the baseline whose newest part
    /// (since the last check it was extended at) disagrees with it: the rate moved inside
    /// it, and that part is the deviation that now waits.
    Unconfirmed,
}

impl Watch {
    /// A stable snake_case name for `key=value` output and logs: `steady`, `changed`,
    /// `counter_stopped`, `counter_jumped`, or `no_verdict`.
    pub const fn token(&self) -> &'static str {
        match self {
            Watch::NoVerdict(_) => "no_verdict",
            Watch::Steady { .. } => "steady",
            Watch::Changed { .. } => "changed",
            Watch::CounterStopped => "counter_stopped",
            Watch::CounterJumped { .. } => "counter_jumped",
        }
    }
}

impl fmt::Display for Watch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Watch::NoVerdict(why) => write!(f, "no verdict ({why:?})"),
            Watch::Steady { rate } => write!(f, "steady at {} mHz", rate.as_millihz()),
            Watch::Changed { rate, .. } => {
                write!(f, "rate changed to {} mHz", rate.as_millihz())
            }
            Watch::CounterStopped => f.write_str("counter stopped"),
            Watch::CounterJumped { by_ns } => write!(f, "counter jumped by {by_ns} ns"),
        }
    }
}

/// What a [`Watchdog`] has seen: counts of each verdict, and how well the clock's rate is
/// known.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct WatchdogHealth {
    /// Checks made.
    pub checks: u64,
    /// [`Watch::NoVerdict`]s (the first check included).
    pub no_verdict: u64,
    /// [`Watch::Steady`]s.
    pub steady: u64,
    /// [`Watch::Changed`]s.
    pub changed: u64,
    /// [`Watch::CounterStopped`]s and [`Watch::CounterJumped`]s.
    pub counter_faults: u64,
    /// Refinement's recalibrations (slew-limited steps, not counting [`Watch::Changed`]).
    pub steers: u64,
    /// How far the clock's rate can be from the counter's rate *as the reference counts
    /// it*, in ppb of that rate (every distance of the clock's rate from a measured one is
    /// taken so, and widened by `1/(1 − the measurement's bound)`: the counter's rate may be
    /// that much slower), the reference's own tolerance not included (add
    /// [`Reference::frequency`]'s bound for the rate in true time). It starts at the
    /// bound given to [`Watchdog::new`] plus that tolerance, and shrinks as refinement's
    /// window grows. A worst case while the counter's rate has been one rate since the
    /// first sample of the window's newest part that one rate fits (since any of its first
    /// three, where samples were left out or the window started right after an interval
    /// off the rate; see *Refinement* on [`Watchdog`]): an excursion that came back unseen, whose offset no
    /// longer fits one line with the samples before it, is left out of the bound once it
    /// is three samples back; one whose offset still fits one line with them is covered
    /// only as far as those lines' rates are, and a steer toward the window's rate, which
    /// such a step of a count tilts, can leave the bound a little under the clock's error
    /// (`a_small_count_step_leaves_bound_ppb_above_the_error` in
    /// `tests/adversary_watchdog4.rs`: 5 of 7 500 seeds, up to 1.15×, an open finding;
    /// after 2–4 steps periods apart, up to 1.49×, 8 of 205 worlds in
    /// `tests/adversary_watchdog5.rs`, open too).
    /// After [`Watch::Changed`] it covers the old rate too,
    /// until the window since proves the new one. Between a change and its detection
    /// (within three periods above an interval's threshold; seconds below it: see
    /// [`Watchdog`]) it does not hold; a change inside the last interval is a change not
    /// yet seen (so is a staircase's step there). From the detection on it does: the
    /// report waits for an interval wholly after the change (see (c)). A rate seen moving
    /// may go on moving at a pace, or in steps, that nothing since has shown: for eight
    /// times the span over which a move was last seen (a change reported, the window's
    /// parts apart; a sample no line fits with the window's older ones extends it while
    /// that lasts, and is a move from the next move seen on: a ramp whose bend showed
    /// before a step it goes on after, `a_ramp_seen_before_a_step_against_it_stays_within_the_bound`
    /// in `tests/adversary_watchdog4.rs`, 93 of 1 214 seeds beyond the bound after the
    /// step, up to 2.95×, before), the bound adds at least four times the bound of the window's newest
    /// samples that one line fits (what a steady ramp of any pace can have moved while one
    /// line still fits them: a worst case for a steady ramp, not for an accelerating one),
    /// and is at least the last interval's distance from the clock's rate plus that
    /// interval's bound (a staircase: a step under an interval's threshold inside the
    /// interval before bends no line through the window's samples beyond their brackets,
    /// and only the last interval, wholly after it, bounds the rate now). So a ramp is
    /// covered from its report on, and each step of a staircase from the check after the
    /// interval that holds it (`tests/adversary_watchdog3.rs`: ±2–300 ppb/s, steady or in
    /// steps every five periods, 0 of 900 seeds beyond the bound after the report, where
    /// 2 and 6 of 900 were, up to 1.65× and 2.06×); the price is a bound at an interval's
    /// level while the rate moves (there, p50 2 430 ppb after the report, 699 before; the
    /// clock's error p50 217), and for eight times the span after a change. While a pace is
    /// known the bound adds the lesser of it carried over half the window (an
    /// extrapolation) and that ramp term. The pace carried is the fastest the last move
    /// seen allows (the move plus both bounds of the rates compared, over the distance of
    /// their middles; two intervals that confirmed a change, or two changes reported the
    /// same way within eight periods, count as a move), kept across the reports that
    /// restart the window (a ramp under an interval's threshold a period is reported again
    /// and again, each time from a window too short to show its pace) until the window has
    /// grown to eight times that distance without moving again. A single step is not told
    /// from the start of a ramp or a staircase: after one, the bound carries both for
    /// those eight spans. A change two intervals confirmed (a step) is seen over two
    /// periods only, but the window they were judged against fitted one line, and a steady
    /// ramp it hid may go on after the change hidden from the window since for as long
    /// again: until the window since the report is as long as that window was, the bound
    /// keeps that steady ramp's worst case (the four times above; not the last interval's
    /// term), a sample no line fits is a move at once, and the clock is steered as at a
    /// steady rate (`a_ramp_that_goes_on_after_a_step_against_it_stays_within_the_bound` in
    /// `tests/adversary_watchdog4.rs`: ramps of ±30 ppb/s whose bend never showed before a
    /// step against them, going on after it, fell beyond the bound once the step's eight
    /// spans lapsed, 29 of 1 214 seeds, up to 2.53×, before; none since; the price, the
    /// bound after a step's report at constant rates, p50 126 → 350 ppb in
    /// `irregular_hooks_with_a_change` there, the clock's error unchanged). A ramp too slow
    /// to show in a window as long is, once that lapses, a ramp not yet seen, as any before
    /// its report (there, at ±5–20 ppb/s, 58 of 395 worlds beyond the bound after the step,
    /// up to 3.4×; 144, up to 2.7×, before). An unconfirmed interval widens it to at least its own
    /// distance from the clock's rate (a ramp between reports). Checks rejected (wide
    /// brackets) add no evidence and change nothing: the bound is the one after the last
    /// accepted check, and a rate change in between is a change not yet detected (after
    /// three checks in a row rejected, the fourth wide one is judged against the narrowest
    /// of the four brackets, the floor from then on: a read path that became slower for good
    /// costs three checks, not every one).
    pub bound_ppb: u64,
    /// The refinement window's span, in reference ticks.
    pub window_ticks: u64,
}

/// One accepted sample: where the counter and the reference were, unwrapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Point {
    /// The counter's first read of the bracket, raw.
    c0_raw: u64,
    /// The reference read, raw.
    r_raw: u64,
    /// Twice the bracket's midpoint, unwrapped, in counter ticks since the first sample
    /// (128 bits: twice a 64-bit count's ticks since the first sample need 65).
    y: u128,
    /// The reference, unwrapped, in its ticks since the first sample.
    x: u64,
    /// The bracket's width, in counter ticks.
    width: u64,
}

/// A measured span between two points.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Span {
    dy: u64,
    dx: u64,
    /// Checks the span covers (hook periods, as the cadence rule counts them).
    n: u64,
    millihz: u64,
    bound_ppb: u64,
}

/// Watches a [`Clock`]'s counter against a [`Reference`] from a periodic hook, tells a
/// delayed reference from a changed counter, recalibrates the clock when the counter's
/// rate changes, and refines its rate as the samples accumulate.
///
/// ```
/// use baretime::{Clock, CounterReference, FnCounter, Frequency, Watch, Watchdog};
/// use core::cell::Cell;
///
/// // A toy world: true time in ns; a 1 GHz counter; a 10 MHz reference.
/// let t = Cell::new(0u64);
/// let tick = || { t.set(t.get() + 50); t.get() };
/// let counter = FnCounter::new(tick, 64);
/// let reference = CounterReference::new(
///     FnCounter::new(|| { t.set(t.get() + 50); t.get() / 100 }, 64),
///     Frequency::exact_hz(10_000_000).unwrap(),
/// );
/// let rate = Frequency::exact_hz(1_000_000_000).unwrap();
/// let clock = Clock::new(&counter, rate);
/// let mut watchdog = Watchdog::new(reference, rate);
/// for _ in 0..4 {
///     t.set(t.get() + 500_000_000); // the hook runs every 0.5 s
///     let verdict = watchdog.check(&clock);
///     assert!(matches!(verdict, Watch::NoVerdict(_) | Watch::Steady { .. }), "{verdict}");
/// }
/// assert_eq!(watchdog.health().steady, 3);
/// assert_eq!(watchdog.health().changed, 0);
/// ```
///
/// # One check
///
/// [`Watchdog::check`] takes a few bracketed samples (the calibration's: a counter read, a
/// reference read, a counter read; 4 by default, [`Watchdog::with_tries`]) and keeps the
/// narrowest, but not one narrower than half the narrowest accepted so far where another try
/// is not (a step back of the counter inside a try narrows its bracket below where the reference
/// was latched: `tests/adversary_watchdog5.rs`, seed 11917, a −1.26 µs step left a bracket of 16
/// ticks where the reads take ~1 030, and a false (c) 2.5 s later, before). Its bracket is rejected if wider than `2·w_min + 2` counter ticks, `w_min` the
/// narrowest seen ([`Unjudged::WideBracket`]), except that at the fourth wide check in a
/// row `w_min` becomes the narrowest of the four brackets, and that check is judged against
/// it (three rejected, the fourth judged): a read path that became
/// slower for good (a VM migrated to a host that traps the counter's reads, a reference
/// behind a slower bus) widens the bound from then on, by the bracket's width, which is the
/// sample's worst-case uncertainty, instead of voiding every later check
/// (`tests/watchdog_load.rs`); a narrower bracket lowers it again. Otherwise the interval
/// since the last accepted sample is measured: the counter's ticks between the two midpoints `ΔC`, the
/// reference's `ΔX`, and the rate `ΔC/ΔX` times the reference's stated rate.
///
/// # The bound: worst case, not statistical
///
/// The reference was latched somewhere inside each bracket, and each count is floored to
/// its step, so the true `ΔC` is within `u_c = (w_a + w_b)/2 + q_c` of the measured one
/// (`w` the two brackets' widths, `q_c` the counter's step) and the true `ΔX` within
/// `u_x = q_x` (the reference's step). The interval's ratio is then off by at most
/// `(ΔX·u_c + ΔC·u_x) / (ΔC·(ΔX − u_x))`, exactly, plus the rounding to millihertz. The
/// steps are learnt as the smallest non-zero move between two consecutive reads (an
/// overestimate where reads are slower than a step: a looser bound, never a false one;
/// a counter whose reads never differ within a check is taken to step by one). The
/// bound, and so the detection threshold below, uses the *learnt* steps. Until the
/// reference has moved between two reads, each check reads it back to back (each read
/// between two counter reads) until it moves between two reads bracketed as narrowly as
/// any two seen in that check — a move across a delayed read spans several steps — and
/// nothing is judged: at most 16 384 reference reads (the check's tries included) and twice
/// as many counter reads per check (a 1 kHz tick read in 1 µs moves within 1 000: about 1 ms on the first check;
/// a reference that never moves costs every check the full 16 384). Once learnt, the step
/// only ever shrinks.
///
/// # The verdicts
///
/// Each interval is compared with the *baseline*: the rate over refinement's window (from
/// its anchor to the last steady sample) with its bound, or, before the window has a span,
/// the clock's rate in force with [`WatchdogHealth::bound_ppb`], whichever bound is the
/// tighter — `bound_ppb` as it was before a deviation that waits for confirmation widened
/// it (below): the interval that tests a deviation is not judged against a bound the
/// deviation itself widened (right after a report or an [`Unjudged::TooLong`] check, with
/// no window yet, the interval wholly at a new rate then agreed with that bound and with the
/// deviation, and was extended for eight checks: `tests/adversary_watchdog4.rs`). So the baseline depends on the starting bound given to [`Watchdog::new`] (a
/// statistical figure): while it is tighter than the window's (a 5 ppb calibration under a
/// 10 MHz reference; 1 ppm under a 1 kHz tick, for minutes), the clock's rate is the
/// baseline, and a change under an interval's threshold plus that bound leaves every
/// interval steady. The window is therefore also judged against the clock after every
/// steady interval: where they disagree beyond both bounds, the clock's rate is wrong
/// (the counter's rate changed, or the starting bound did not hold), and the clock is
/// recalibrated to the window's rate ([`Watch::Changed`]). After a change, "the clock's
/// bound" here is the one the new rate was set with (the confirming interval's, a worst
/// case), not [`WatchdogHealth::bound_ppb`], which also covers the old rate: two intervals
/// that agreed on a wrong rate (a reference step inside the second) are corrected at the
/// next steady check (`tests/adversary_watchdog2.rs`,
/// `a_change_confirmed_through_a_reference_step_is_corrected`: 100–240 ppm off for a
/// minute before).
///
/// - **(b) [`Watch::Steady`]**: the two agree within the sum of their bounds: the
///   baseline's distance from the interval's rate, in ppb of the interval's rate (the nearest
///   measure of the counter's), at most both bounds widened by `1/(1 − the baseline's
///   bound)` (a baseline's bound is in ppb of the counter's rate, or of its own; either may
///   be that much slower). Taken in ppb of the baseline's rate, a clock started slow by
///   `off` under an honest bound below `off/(1 − off)` was a false (c) at the second check
///   (`a_clock_started_far_slow_under_an_honest_bound_is_no_change` in
///   `tests/adversary_watchdog5.rs`: −5 % under 5.2 %, before). The 12.5 % rules below take
///   the distance in ppb of the baseline's rate.
/// - **(c) [`Watch::Changed`]**: the interval is off by more than that, and so was the
///   one before, and either the second is further off on the same side (a rate that keeps
///   moving, faster than an interval's threshold per period: a fast ramp; the clock is
///   recalibrated to the second's rate and [`WatchdogHealth::bound_ppb`] carries the move
///   between the two) or the two agree with each other within their bounds (beyond 12.5 %,
///   only where the counter broke the hook's cadence in both, as below: a counter that
///   persistently runs at a new rate, whatever the size). The clock is recalibrated to the
///   second's rate ([`Clock::recalibrate`]: no jump, no step back), and the window starts
///   again after the second. Two intervals cannot tell a new rate from an excursion that
///   straddled a check and is over, so [`WatchdogHealth::bound_ppb`] keeps covering the
///   old rate until the window since proves the new one. The one exception to two
///   intervals: the first judged after [`Watch::CounterJumped`], off the clock's rate by
///   less than 12.5 %, is (c) at once (the jump split the history: nothing before it can
///   confirm or refute the rate after). A first interval off the baseline
///   is [`Unjudged::Unconfirmed`]; if the next agrees with the baseline, the window starts
///   again after the odd interval (a step of one count or the other leaves the window's
///   rate wrong otherwise). If the next agrees with both the baseline and the odd interval
///   (a check soon after the last, or a change at an interval's threshold), it refutes
///   nothing: it is extended to the next check (also [`Unjudged::Unconfirmed`], up to
///   eight checks long), which then decides. At constant rates the extended interval's
///   worst-case bound and the baseline's contain the same rate, so it never confirms. An
///   extended interval that ends off the baseline is one rate only where its newest part
///   (since the last check it was extended at) agrees with it within both bounds; where it
///   does not, the rate moved inside it (a second change), its rate is a mix of two, and
///   that part, the nearest to wholly after the move, is the deviation that waits for the
///   next interval instead ([`Unjudged::Unconfirmed`]): a report never sets the extended
///   interval's mixed rate (`tests/adversary_watchdog4.rs`, seed 4719: a rate 2 135 ppb off
///   under its own bound of 478, before). Where they agree, the newest part's bound is wide
///   (a period) and the whole may still be a mix (an excursion that came back inside it), so
///   a report after an extended interval sets its newest part's rate and bound, not the
///   whole's (`a_report_after_an_extended_interval_sets_no_mixed_rate` in
///   `tests/adversary_watchdog5.rs`, seed 6477: a rate 4 155 ppb off under its own bound of
///   2 457, before). (c) is also reported when the window's two parts
///   disagree (see *Detection time*; not where the window's samples fit a one-off step of a
///   count), or the window and the clock's rate do (see above); where
///   either shows only with the check's own interval, which may straddle the change (its
///   rate is the new one only in part, and so would be the rate set and its bound), the
///   report waits one period for an interval wholly after it, and the clock is not
///   steered meanwhile (`a_change_near_the_threshold_is_reported_with_a_rate_inside_its_bound`
///   in `tests/adversary_watchdog3.rs`: a change at 1.02–1.5× the threshold recalibrated to
///   a rate outside its own bound in 5 of 400 seeds, and one at 4.7× 59 335 ppb off under a
///   bound of 10 676, before; none since). Everything is measured against the reference: a reference
///   that runs off its declared rate (beyond its stated tolerance, or changing its rate)
///   is not told from a counter that does, and the clock is recalibrated to the counter's
///   rate as that reference counts it.
/// - **(d) [`Watch::CounterStopped`]**: the counter moved less than its bound while the
///   reference moved 16 steps, over a span in which, at the rate in force, the counter must
///   have moved four times that bound (both brackets and two steps): a check soon after the
///   last on a slow counter (a 1 kHz or 32 kHz tick read 0–1 ms on) cannot tell a stop from
///   the quantization, and is merged into the next interval ([`Unjudged::TooShort`]).
///   **[`Watch::CounterJumped`]**: a 64-bit counter went back (by its move back plus the
///   ticks the interval made due at the rate in force: the step, not the net move), or the
///   interval is off by more than 12.5 % and the counter's `ΔC` moved from the last judged
///   interval's more than twice as far (relatively) as the reference's `ΔX` did: the hook's
///   period held, as the reference counts it, and the counter's did not. Only the
///   counter's own reads can blame it: a reference read that makes due more ticks than a
///   64-bit count holds (a garbage value), or a narrow counter that reads behind where its
///   wraps are counted from the reference's `ΔX`, is [`Unjudged::ReferenceJumped`]. Both
///   are taken per check: an interval that spans `n` checks (rejected brackets, a
///   reference that stood still) is `n` periods long.
/// - **(a) [`Watch::NoVerdict`]**: a wide bracket; a reference that did not move; a
///   deviation beyond 12.5 % where the counter kept its cadence and the reference did not
///   (or neither did) ([`Unjudged::ReferenceJumped`]); an interval too short to judge; an
///   unconfirmed deviation. The cadence rule needs the hook to run at a steady period (its
///   jitter well under the jumps to be told, which are at least 12.5 % of a period): a
///   timer interrupt, not the counter's own deadline (a counter that jumped would fire it
///   early, and look like a reference that fell behind).
///
/// What a kernel does with each: (a) nothing (a long run of them says the reference is
/// unusable: [`Watchdog::health`]'s `no_verdict` against `checks`); (b) nothing; (c)
/// nothing, the clock is already recalibrated (log it); (d) distrust the counter: switch
/// clock source, or [`Clock::rebase`] from a trusted time (see each variant).
///
/// # False alarms: none, under these assumptions
///
/// The bound is a worst case, not a coverage figure: if the counter and the reference both
/// run at constant rates, the reference is latched inside its bracket (it always is: the
/// two counter reads surround the read, unless it returns a value it cached earlier), and
/// the counts step by no more than learnt (a reference that publishes its count in bursts
/// at irregular times steps by more than the smallest move it shows; either broken, false
/// (c) and (d) follow: 7 of 98 worlds with 5–50 % of reads cached, 101 of 410 with bursts at
/// irregular times, `tests/adversary_watchdog7.rs`), then
/// every interval's bound and the window's bound contain the same true ratio, so they
/// agree and no check reports (c) or (d) — whatever the reads' delays, jitter and stalls.
/// A reference read delayed by `D` only widens its bracket to about `D`: rejected, or
/// accepted with a bound `D/(P·f)` wider. The one exception is the start: until its window
/// has a span (the second check), the baseline is the rate given to [`Watchdog::new`], whose
/// bound (a calibration's, ≥ 99 % coverage; plus the reference's stated tolerance, since
/// the rate may come from elsewhere) is statistical. The window's two parts carry the same
/// worst-case bounds, so at constant rates they agree too (the clock's distance from the
/// window's rate is taken in ppb of the window's, the convention of the clock's bound: a
/// clock started 300 ppm slow under an honest 600 ppm was a false (c) when it was taken in
/// ppb of the clock's own rate, the two apart by the error squared, 90 ppb). A one-off (a
/// reference that steps once or stands still, a read wrong inside a narrow bracket) is
/// never (c): it is not confirmed by the next interval (a stand-still across a check's
/// sample is seen by the check's own reads, [`Unjudged::ReferenceStill`], and the next
/// interval holds it whole: reported as a change and back before, 224 of 300 worlds of
/// `tests/adversary_watchdog6.rs`, the clock up to 11 % off meanwhile under its bound; one of
/// 400 worlds there still is (d), a stand-still of 14 % of a 57 ms period across a check
/// whose read stalled: an open finding); nor is, as a rule, one step of a count
/// under an interval's threshold, which moves the window's parts apart: see *Detection time*. Not
/// every such step, and not several: two steps can mimic a change (an open finding of
/// `tests/adversary_watchdog5.rs` at `BARETIME_ADV_SEEDS=100`, 300 in braces; steps of 0.3–1.8× the
/// widest quiet interval bound, under the threshold `2·(b + b₀)`, at constant rates). Two steps the
/// same way in consecutive intervals are (c), by the two-interval rule where both intervals are off
/// the baseline, else by the window's parts: 100 of 201 worlds {283 of 599}, the clock up to 7 436
/// ppb off after; 4 of 59 where every step was at most the narrowest interval bound seen. 2–4 steps
/// periods apart, the same way or alternating, fit no one-off step in the window and are (c) by its
/// parts: 25 of 205 {84 of 611}, up to 2 374 ppb off; 2 of 36 with every step at most the narrowest
/// interval bound. Of 8 004 single steps of 0.6–1.4× an interval's bound, 12 were (c) 1–40 s later
/// {24 of 24 004} (20 {59} before issue 28's count-step fix, when a step inside the window's older
/// part was taken against that part's rate, which the step had moved: seed 10093, +1.9 µs, the clock
/// from 47 to −84 ppb off, is no change since): a step the samples either side of it do not show
/// beyond their brackets (about one bracket's width), at an older part's end, and two (seeds 10558
/// and 13577) where the window against the clock's rate, not its parts, moved (see *Detection
/// time*). A step back of the counter inside one of a check's reads narrows that read's bracket
/// below its latch: such a bracket is not taken (see *One check*). `bound_ppb` held in these worlds,
/// except three samples after the last of 2–4 steps periods apart: up to 1.49× (8 of 205 {31 of
/// 611} beyond it, 5 {15} beyond 1.15×). At
/// constant rates every window sample lies on one
/// line within its bracket, so the samples' fit (see *Refinement*) never widens the bound
/// nor changes a verdict. `tests/watchdog.rs` in the suite runs delayed reads, SMI stalls, jitter
/// and reference steps over many seeds and counts 0 false alarms.
///
/// # Detection time
///
/// A change of the counter's rate by `δ` (in ppb) at some point of an interval is reported
/// at the end of the second interval after it at the latest (at most three periods `P`
/// after the change when no check is disturbed: the mixed interval, and two that agree;
/// two when the change falls on a check), provided `δ` exceeds twice the sum of an
/// interval's bound and the baseline's:
/// `δ > 2·(w_a + w_b + 2·q_c)/(2·P·f) + 2·q_x/(P·f_r) + 2·b₀` plus twice the rounding,
/// `q_c` and `q_x` the *learnt* steps (see *The bound*: on a counter or a reference faster
/// than its reads, the ticks one read takes — a 5 GHz counter read in about 20 ns learns a
/// step of about 107 ticks, a 1 GHz pvclock one of about 80 ns, which make an interval's
/// bound between them 212 ppb at `P` = 1 s where steps of one tick would give 109:
/// `a_change_at_the_threshold_is_reported_a_period_late_at_most` in
/// `tests/adversary_watchdog4.rs`), `b₀` the baseline's bound: the window's, which
/// shrinks as it grows (under a tenth of an interval's after ten periods), or, right after a
/// report or an [`Unjudged::TooLong`] check and until the window has a span, the clock's
/// [`WatchdogHealth::bound_ppb`], which covers the old rate and a pace that may go on
/// (after a report of half an interval's threshold by the window's split, 1 GHz against a
/// pvclock, `P` = 1 s: 401 ppb against an interval's 184: a change of 774 ppb 0.4 s after
/// that report was followed by refinement, not reported, in
/// `a_change_right_after_a_report_is_reported_within_three_checks`). Below that a change
/// may be absorbed by the window as the baseline, and followed by refinement (steered
/// toward, within `bound_ppb`) or reported by the window's split (see below). Every
/// disturbed check in between stretches an interval by one period; a read path that stays
/// slow stretches one by three (its fourth check is judged, its brackets the floor, see *One
/// check*), and a
/// check that follows the last closely (a hook catching up after a stall) is merged into
/// the next interval where it cannot tell the change from the baseline. A change `δ` at
/// about the threshold can leave the first full interval off and the next just inside:
/// the two are then judged as one interval twice as long (half the threshold), and the
/// change reported a period later (`tests/adversary_watchdog2.rs`,
/// `a_small_step_wherever_it_meets_the_split`: 2 and −2.5 ppm against a threshold of
/// about 4.2 ppm, the step after 8 to 40 steady checks, each reported within 1.9 s).
/// Examples: `P` = 0.5 s,
/// brackets of 1 µs on a 1 GHz counter and a 14.3 MHz HPET: 4 ppm + 0.3 ppm, so 100 ppm is
/// seen within 1.5 s; with a 3.58 MHz ACPI PM timer (24 bits, a 4.7 s wrap, unwrapped
/// against the rate) the reference's term is 1.1 ppm. A change beyond 12.5 % reads as a
/// jump at first ([`Watch::CounterJumped`], once or twice: the mixed interval, and the
/// first full one against the old cadence), then (c) when two intervals at the new rate
/// agree. Measured (`suite/tests/watchdog.rs`, 40 seeds, simulated HPET and ACPI PM with
/// delayed reads and SMIs): changes of 10 ppm to 10 % reported in every seed within
/// 1.29 s of a change at 10.25 s (three accepted intervals). Under QEMU (`cargo xtask qemu
/// watchdog`, TCG): on `pc` under `-icount` (exact truth; TSC against the HPET and against
/// the ACPI PM timer), +100 ppm and +0.1 % each reported 1 000 ms after the change, none of
/// the 28 checks disturbed; on `virt` (the generic timer through a scaling wrapper, no
/// `-icount`: timed by the host), 0.5–1.0 s (two runs: 1 006 and 505 ms, 1 001 and 1 001).
///
/// A change smaller than that leaves each interval steady; refinement's window sees it.
/// The window is split in two parts, the older between half and all of it; after each
/// steady interval their rates are compared, each with its worst-case bound, which
/// shrinks as the window grows. Where they disagree beyond the sum, the rate moved inside
/// the window, or a count stepped once (a step of the counter's count, a rate excursion
/// that ended between two checks: spread over the recent part, it reads as a rate). The
/// two are told apart by the window's kept samples (see *Refinement*): a step of a count
/// leaves the samples before it and those after it on two parallel lines, of a rate the
/// older part allows; a moved rate puts the samples after the move on a line of the new
/// rate, which rules out every such step once they span enough to exclude the older
/// part's rate. So a move is taken only where no one-off step between two of the samples
/// (nor none) fits them with one rate inside the older part's bound on both sides
/// (`a_step_of_the_count_is_never_a_change` in `tests/adversary_watchdog4.rs`: steps of
/// 0.5–1.2 times an interval's bound in count were (c) in 60 of 2 500 seeds, none since;
/// the cost is the span a change's samples need to rule the old rate out: the suite's 1 ppm
/// detection times below are unchanged, and a ramp's first report comes a little later,
/// `ramps_that_stop_or_reverse` there p50 4.56 → 4.76 s at 300 seeds), or, for a step inside
/// the older part (whose rate the step moved, not the counter), inside the recent part's bound,
/// where two samples before the step (kept, or left out of the window as no line fit them with
/// the newer ones: their lines' rates are kept) bound the rate and the two samples either side of
/// the step show it (their pair allows none of those rates: a ramp bends the samples gradually,
/// and a step in the window's first interval fits any rate, as a change at its anchor does).
/// `one_count_step_is_no_change` in `tests/adversary_watchdog5.rs`: 20 of 8 004 single steps
/// (c) → 12 (59 → 24 of 24 004 at 300 seeds); detection unchanged: the suite's figures below,
/// `tests/adversary_watchdog3.rs`'s slow ramps and staircases p50 15.6 and 17.5 → 17.6 s, max
/// 72.1 and 89.3 s at 100 seeds (taking the recent part's bound without the last two conditions
/// left no step (c) but made those 16.8 and 19.5 s, max 98.4 and 123.3 s). Then the first move
/// after a quiet window is (c), the clock recalibrated to the recent part's rate, its bound
/// also covering the way to the last interval's rate and that interval's bound (the recent
/// part can hold the old rate too: under brackets of
/// 50 µs, a +100 ppm step is under an interval's threshold and seen by the split at once,
/// 14 ppm of the way), and the window starts afresh after it (its recent part may hold
/// the rate from before a ramp began). Where the parts disagree only with the check's own
/// interval, the report waits one period (see (c)): this costs a period in the detection
/// of a change under an interval's threshold. Further moves the same way while the rate
/// keeps moving are followed by refinement (the window keeps its recent part),
/// [`WatchdogHealth::bound_ppb`] carrying the pace seen (at most what a steady ramp can
/// move while one line fits the window's samples, and at least the last interval's rate and
/// bound: a staircase's next step: a change that straddled a check and read as a ramp leaves
/// a bound of ppm, not the change's size: 2.1 ppm 4 s after +0.1 % in
/// `a_straddling_step_leaves_a_narrow_bound`, 1 050 ppm before issue 28's first fix, 1.6 ppm
/// before the pace was kept across reports, 1.9 before the staircase's term; under QEMU
/// (`cargo xtask qemu watchdog`, each scenario ending 3 s after a +0.1 % step)
/// `end_bound_ppb` 11 485 on `pc` against the HPET, 14 145 against the ACPI PM timer and
/// 1 758 on `virt` (11 416, 14 224 and 1 599 on the same host without the staircase's term;
/// 2 665, 3 243 and 2 247 before the pace was kept): the price of covering a ramp or a
/// staircase that may go on after a change); a move the other way is a new change, (c)
/// again (`alternating_changes_seed_444_is_reported` in `tests/adversary_watchdog3.rs`:
/// ±7.1 ppm toggles, one followed at 1 ppm a check and never reported, before). A step `δ` is seen once the parts' bounds fall under `δ` times the share of
/// the recent part after the step: seconds for ppm. A ramp of slope `s` (ppb per second)
/// is seen when `s·T/2` exceeds the parts' bounds for a window `T` long: about
/// `T = 2·√(b₁/s)` for a one-second bound `b₁` (in ppb·s). A ramp fast enough that
/// consecutive intervals disagree beyond their bounds (`s·P` above about an interval's
/// threshold) is followed interval by interval instead (see (c): two intervals off on the
/// same side, the second further; `tests/adversary_watchdog2.rs`, `a_fast_ramp_is_seen`:
/// 10 ppm/s, 1 GHz counter, 10 MHz reference, `P` = 0.5 s). Measured: 1 ppm at 10.25 s
/// reported in every seed within 4.3 s (HPET) and 5.8 s (ACPI PM) (same suite; 3.8 and
/// 5.3 s before the report waited for an interval wholly after the change); in the
/// crate's `tests/adversary_watchdog.rs` (1 GHz counter, 10 MHz reference, `P` = 0.5 s) a
/// ramp of 100 ppb/s is reported 6 s after it starts, and +1 ppm after a minute steady
/// leaves the clock within `bound_ppb` over the third minute (where the test judges it).
///
/// # Refinement
///
/// After each steady interval the window's rate (from its anchor, the first sample after
/// the last change or step, to now) is measured with the same worst-case bound, which
/// shrinks as `(w_a + w_b + 2·q_c)/(2·T·f) + q_x/(T·f_r)` with the window's length `T`.
/// The clock is steered toward it by at most [`Watchdog::with_slew_ppb`] per step (1 ppm
/// by default) — a recalibration only when it tightens [`WatchdogHealth::bound_ppb`], the
/// clock's rate's distance from the window's rate plus the window's bound (while the rate
/// moves, that plus the pace carried, and at every check). Its pace is therefore set by
/// the window's bound, not only the slew limit: a step is taken only once the window's
/// bound has shrunk enough for it to tighten the bound, so with a coarse reference it
/// steers on a fraction of the checks (`tests/adversary_watchdog.rs`'s
/// `probe_refinement_pace`: a 50 MHz counter against a 32 kHz RTC, 4.4 ppm off at the
/// start, slew 1 ppm: 6 steers in the first 40 checks, 73 in 400, the error 1550 ppb after
/// 20 s and 129 ppb after 200 s; against a 10 MHz reference, slew 0.1 ppm: 0 ppb by 40 s). So the clock's
/// rate converges to the counter's rate as the reference counts it, within about `w/T`
/// for brackets `w` wide (and the reference's step over `T`): with brackets of 1 µs,
/// 0.02 ppm after a minute. Measured under QEMU's `virt` (`cargo xtask qemu refine-60`,
/// whose truth is exact): bound 95–106 ppb after 10 s, 15–18 ppb after 60 s, the true error
/// within it each time. The clock is not steered while it lies within half the window's
/// bound of the window's rate: a good calibration is left alone. What it converges to is the
/// *reference's* view: the reference's own accuracy is the floor (an HPET's crystal,
/// ±50–500 ppm nominal; a pvclock's or semihosting's host clock, whatever NTP made of it),
/// which the bound does not include. A reference stepping in the window's first or last
/// sample is caught by the next interval (it re-anchors).
///
/// The bound and the samples' lines: every sample of the window is a bracket (the
/// counter's count within its bracket, the reference's within its step), and a counter at
/// one rate puts all of them on one line. Up to 32 of the window's samples are kept (when
/// full, every other older one goes; the anchor and the newest stay: about 1.5 KiB of the
/// watchdog, and up to 32 pair bounds per steady check; up to 1 025 at a check whose
/// window's parts move, to tell a step of a count from a move: see *Detection time*, and up
/// to 465 more at a sample no line fits, for the rates of the samples left out), and
/// each new one's
/// pairs with them narrow the range of rates of the lines through them all. Where the
/// range empties, the rate was not one rate over the window — an excursion that came back
/// below every threshold (a ±1–3 ppm change for a second or two), the tail of a change —
/// and the newest samples that one rate still fits become the bound's span:
/// [`WatchdogHealth::bound_ppb`] is the clock's distance from their rate plus their bound
/// (the widest of the spans from their first three samples: a sample from an excursion's
/// end may still fit; the same where the window was anchored right after an interval off
/// the rate, a change or a one-off), however wider than before, while the window itself (steering, the
/// split, the baseline) is left as it was. So the bound is honest after an excursion that
/// was never reported (`tests/adversary_watchdog2.rs`: +1 ppm for 1.5 s, +2 ppm for half a
/// period, −3 ppm and back, a +2 ppm step seen by the split: each left the clock 54–93 ppb
/// off under a bound of 40–79 ppb for up to a minute before issue 28's fix); a counter at
/// one rate always fits, so this never widens the bound, nor changes a verdict, at
/// constant rates.
///
/// # Widths
///
/// Of the counter and the reference, the one whose wrap period is the longer is unwrapped
/// by the half-range rule ([`Width`]) from sample to sample, rejected samples included (a
/// read inside a wide bracket is still a good read of its count): check more often than
/// half its wrap period (a 64-bit counter: any period; a narrow counter: wrap it in
/// [`crate::ExtendedTimer`], or keep the period well under half the wrap). The other (a
/// narrow reference under a 64-bit counter; a narrow counter under a reference that wraps
/// less often) is unwrapped against the rate in force: its wraps over the interval are
/// counted from the other's ticks at the clock's rate. That holds only while the rate's
/// uncertainty over the interval stays well inside half a wrap, so a count narrower than 64
/// bits is unwrapped only where, over the interval,
///
/// - the bound the clock's rate was set with (at the start, the one given to
///   [`Watchdog::new`] plus the reference's tolerance; then by [`Watch::Changed`] or
///   refinement: [`WatchdogHealth::bound_ppb`] less what a pending deviation or the old rate
///   after a change adds) times the interval, plus both brackets and both steps, is under a
///   *quarter* wrap: the other quarter is room for a change to be seen unaliased; and
/// - [`WatchdogHealth::bound_ppb`] times the interval, plus the same, is under *half* a wrap:
///   every rate still thought possible counts the same wraps.
///
/// Where either fails, or where a change of the rate since the last sample by up to the
/// 12.5 % a rate change may be could move the count by half a wrap (a PIT, 54.9 ms a wrap,
/// checked every 0.5 s: any change beyond 5.5 %), the check measures the rate itself: three
/// of its samples a short spin apart (long enough that the measurement, carried over the
/// interval, spans about an eighth of a wrap; at most an eighth of a wrap and 8 ms in all:
/// against a PIT read every 0.5 s up to 2.1 ms and 800 reads, `tests/adversary_watchdog6.rs`),
/// the two halves and the whole of which must agree, and counts the interval's wraps from
/// it: the one count between the rates at the interval's two ends (this measurement, and
/// the one the check that took the interval's first sample made, else the rate in force
/// within `bound_ppb`), where a rate that changed inside the interval put it. A change of
/// the PIT's wraps per period was otherwise counted one wrap off, the alias (a −6 % change
/// read as +5 %, reported as (c) and followed: under QEMU's exact truth the clock 12.3 % off
/// under a bound of 14 ppm, for good; `a_change_beyond_half_a_pit_wrap_is_not_aliased` in
/// `tests/adversary_watchdog3.rs`: every change of ±5.6–12.4 % reported within three checks
/// at its true rate since, the clock within `bound_ppb` from then on;
/// `tests/adversary_watchdog6.rs`: changes of 1 ppm–12.4 % against the PIT, 16–32-bit
/// counters and narrow references, periods 0.05–5 s, each above the threshold reported in
/// time). The spin reads the narrow count throughout and carries its wraps, so against a
/// narrow reference it may span many (at most 8 ms); on a narrow counter it spans at most an
/// eighth of the counter's wrap, since the clock over that counter needs its updates more
/// often than half a wrap and a hook with interrupts off would hold them up. Halves that
/// disagree (a reference that stood still or stepped during the spin, a read stalled, the
/// rate changing in it), or a sample of it wide, make the check a disturbed one,
/// [`Unjudged::WideBracket`], measured again from the last sample at the next; the fourth
/// in a row takes what the measurement's parts allow together, or the rate in force as
/// below, as the fourth wide bracket is judged against the floor (a reference still for
/// 1 ms inside the spin of a 16-bit counter's check was taken for the counter's jump, 100
/// of 100 seeds; a −10 % change inside a PIT check's spin set a rate outside its own bound,
/// 1 445 of 1 500; a stall in every spin kept 8 of 400 worlds wide 4–12 checks in a row,
/// `tests/adversary_watchdog7.rs`: none since). A measurement too coarse for the interval
/// (a counter too slow to measure a narrow reference in 8 ms; a narrow counter of hundreds
/// of wraps a period; a gap of minutes under a PIT) leaves the wraps to the rate in force
/// where its bound can count them; at the hook's period (an interval no longer than twice
/// the last judged one per check, or none judged yet) such an interval may then be steady,
/// but a deviation may be an alias of a change by whole wraps, and is not judged: it is
/// [`Unjudged::TooLong`] and [`WatchdogHealth::bound_ppb`] covers any rate a change may
/// make (12.5 %). Where 12.5 % of the period is a whole wrap or more, a change may even
/// alias to steady, and every such check at the hook's period is `TooLong` with that bound:
/// the count cannot be watched at that period (a 1 kHz counter under a PIT read every 0.5
/// s; an 18-bit counter at 82 MHz checked every second): wrap a narrow counter in
/// [`crate::ExtendedTimer`], or check more often. (A 20-bit counter at 100 MHz checked every
/// 4.3 s was reported at an alias and kept 2.45 % off under a `bound_ppb` of 15 ppb, 176 of
/// 384 such worlds, `tests/adversary_watchdog7.rs`; none since.) Over a gap, a change inside
/// it is seen by the checks at the hook's period after it. Where two counts fit between the
/// two ends' rates (a change inside the interval of more than a wrap's worth), or neither
/// the rate in force nor the measurement can count them, the number of wraps is ambiguous
/// and the check does not pretend to know: it is
/// [`Unjudged::TooLong`], the clock's rate and `bound_ppb` are left as they were, and
/// measuring starts again from its sample, the window too. The next check at the hook's
/// period is judged against the clock's rate and `bound_ppb`: the check right after a
/// `TooLong` one is judged as before this rule where its interval is no longer than twice
/// the last judged interval per check, since a bound left wide at the hook's period (after
/// a large change or a fast ramp under a PIT: over 5.5 % at a 0.5 s period) would otherwise
/// refuse every check and never shrink (`a_large_change_under_a_pit_is_not_refused_for_good`
/// in `tests/adversary_watchdog3.rs`). Before any interval is judged there is no such
/// period, but the measurement counts the wraps there: a start bound of 2–10 % against a
/// PIT checked every 0.5 s is judged from the second check (it was `TooLong` for good over
/// 2.7 %, `a_pit_start_bound_around_2_7_percent` in `tests/adversary_watchdog4.rs`).
///
/// Wraps, and the longest interval judged with the rate known to 1 ppm (to 100 ppb): a
/// 16-bit PIT (1.193 MHz) wraps every 54.9 ms: 3.8 h (38 h); a 24-bit ACPI PM timer
/// (3.58 MHz) every 4.69 s: 13.6 days (136 days); a 32-bit HPET (14.3 MHz) every 300 s:
/// 2.4 years; a 32-bit ACPI PM timer every 1 200 s, a 32-bit 32 kHz RTC every 131 072 s:
/// longer. Over such a long interval, a change of the rate inside it that moves the count
/// by more than the half wrap left over aliases: judged an hour after the last with the
/// rate known to 100 ppb, any beyond 7.5 ppm (a change not yet detected, seen by the checks
/// at the hook's period after it, which measure the rate themselves).
/// `tests/adversary_watchdog3.rs`: a 1 GHz counter under the PIT, constant rates, one check
/// a week or 30 days after the last left the clock 35–227 ppb beyond `bound_ppb` in 80 of
/// 400 seeds, and a day's gap a false [`Watch::Changed`] 636 or 1 271 ppb off (a wrap or two
/// a day), before this rule; none since (the gap is `TooLong`).
///
/// Everything is integer arithmetic, saturating or checked: no input makes it panic.
///
/// One watchdog per clock, called from one place (`check` takes `&mut self`), and after
/// [`Clock::start`] the clock's only rate writer: it reads the rate in force, but its bound
/// on that rate assumes it set it.
pub struct Watchdog<R: Reference> {
    reference: R,
    tries: u32,
    slew_ppb: u64,
    /// The clock's rate's worst-case distance from the counter's rate as the reference
    /// counts it, in ppb.
    bound_ppb: u64,
    /// The bound the clock's rate was last set with (or refined to): `bound_ppb` without
    /// what honesty added since (the old rate after a change, an unconfirmed interval, a
    /// window that one rate does not fit). Where the window disagrees with the clock beyond
    /// it and the window's own bound, the rate set was wrong ([`Watch::Changed`]).
    claim_ppb: u64,
    /// The counter's and the reference's steps (`u64::MAX`: not seen yet).
    counter_step: u64,
    ref_step: u64,
    min_width: u64,
    /// The current run of consecutive wide checks: how many, and the narrowest bracket in
    /// it (the floor adopted once the run reaches [`WIDE_RUN`]).
    wide: (u32, u64),
    /// The last accepted sample: the next interval starts here.
    last: Option<Point>,
    /// Refinement's window: from `anchor` to `wend` (the last steady sample).
    anchor: Point,
    wend: Point,
    /// The window's split: its older part `anchor..mid` (between half and all of it) is
    /// compared with its recent part `mid..wend`.
    mid: Point,
    /// How far the rate moved between the window's parts when they last disagreed (ppb),
    /// over `drift_span` reference ticks (the distance of the parts' middles): while the
    /// rate may still be moving at that pace, the window's bound carries the move over
    /// half its span ([`Watchdog::drift`]); dropped once the window has grown to eight
    /// times `drift_span` without moving again.
    drift_ppb: u64,
    drift_span: u64,
    /// The way the rate moved then: up (faster) or down. A move the other way is a new
    /// change, reported, not followed.
    drift_up: bool,
    /// The fastest pace the rate may have kept since a move was last seen (`pace_ppb` over
    /// `pace_span` reference ticks: the move seen plus both bounds), kept for the bound
    /// only, across the verdicts that restart the window (a ramp reported again and again),
    /// until the window has grown to eight times `pace_span` without moving again.
    pace_ppb: u64,
    pace_span: u64,
    /// The sample (reference ticks since the first) at which the rate was last seen to move
    /// (a change reported, a move of the window's parts, a sample no line fits with the
    /// window's older ones while a move lasts or a ramp may be hidden
    /// ([`Watchdog::may_ramp`]), or from the next move on, [`Watchdog::kink`]),
    /// and the span it was seen over: until eight times that span has
    /// passed, the rate may still be moving, at a pace or in steps nothing since has shown
    /// ([`Watchdog::moving`]). Span 0: none.
    moved: (u64, u64),
    /// The sample (reference ticks since the first) at which a sample no line fit with the
    /// window's older ones was last seen, and the span one line still fitted then (0:
    /// none): a move too, from the next move seen on ([`Watchdog::note_move`]). Not at once:
    /// a step of one count (an excursion that came back) bends the samples so too, and is
    /// no move; a ramp whose bend showed before a step it goes on after is one.
    kink: (u64, u64),
    /// The sample (reference ticks since the first) until which a steady ramp that the window
    /// before a change confirmed by two intervals hid may still be hidden: its span again
    /// after the report (0: none). Until then the bound keeps a steady ramp's worst case
    /// ([`Watchdog::moved_ppb`]), and a sample no line fits is a move at once.
    ramp_until: u64,
    /// The last change reported: the rate it set (mHz), its sample (reference ticks since
    /// the first) and its way (up: faster). Two changes the same way within eight periods
    /// are a pace.
    last_change: Option<(u64, u64, bool)>,
    /// The window's samples (`knots[..n_knots]`, oldest first: the anchor, then the
    /// steady samples up to `wend`, decimated) and the range of rates (mHz, floor and
    /// ceiling) that every pair of samples seen in the window allows: the rates of the
    /// lines through all their brackets. `None`: no pair measured yet.
    knots: [Point; KNOTS],
    n_knots: usize,
    range: Option<(u64, u64)>,
    /// The window's samples left out since its anchor (where no line fit them with the newer
    /// ones): `None` where none was; else the last one left out and the range of rates (mHz)
    /// of the lines through each batch left out, met (`None`: none; a rate-only summary, up
    /// to 465 pair ranges at a sample no line fits). A one-off step of a count before the
    /// samples kept leaves them on a line of the counter's rate: evidence the one-off rule
    /// still weighs.
    dropped: Option<(Point, Option<(u64, u64)>)>,
    /// The reference's rate (mHz) and the steps the last window sample was measured with.
    steps: (u64, u64, u64),
    /// The window was anchored right after an interval off the rate (a change, a one-off):
    /// its first samples may still hold an excursion's end, so the bound is taken over the
    /// spans from its first [`SUFFIXES`] samples, as after a sample left out.
    loose_start: bool,
    /// The last sample was taken by an [`Unjudged::TooLong`] check (see
    /// [`Watchdog::wraps_ambiguous`]).
    refused: bool,
    /// This check's narrow count was unwrapped at the rate in force where its own
    /// measurement could not count the wraps: a deviation may be an alias (see *Widths*).
    unmeasured: bool,
    /// Checks in a row whose measurement for a narrow count's wraps was disturbed (see
    /// *Widths*): the fourth takes what all its parts allow.
    disturbed: u32,
    /// Over the last sample's tries: the most counter ticks between two reads of the
    /// reference that read the same value (from the end of the first's bracket to the
    /// start of the other's).
    still_ticks: u64,
    /// The last few measurements of the rate a check took for a narrow count's wraps, each
    /// with the counter's raw read of the sample it followed (see *Widths*).
    measured: [Option<(u64, Measured)>; 4],
    /// An interval off the baseline, waiting for the next to confirm it.
    pending: Option<Span>,
    /// The sample of the last check an interval was extended at ([`EXTEND_CHECKS`]), with
    /// the checks from `last` to it: where the extended interval turns out off the baseline,
    /// its newest part (from here) must agree with it for its rate to be one rate.
    ext_mark: Option<(Point, u64)>,
    /// `bound_ppb` before the pending deviation (or a run of them) widened it: what the
    /// baseline's bound is while it waits. A deviation is evidence under test, and must not
    /// widen the bound that the interval testing it is judged against (the next interval,
    /// wholly at a new rate, would otherwise agree with both and be extended).
    unwidened: Option<u64>,
    /// The last steady check saw the window move (its parts, or the window against the
    /// clock) only with its own interval, which may straddle the change: the report waits
    /// for the next interval, wholly after it, to bound the new rate.
    deferred: bool,
    /// The last verdict was [`Watch::CounterJumped`]: the jump split the history, and the
    /// next judged interval is judged afresh against the clock (off it within 12.5 %: the
    /// counter runs on at a new rate, [`Watch::Changed`] at once).
    after_jump: bool,
    /// The last judged interval (for the cadence rules).
    prev: Option<Span>,
    /// Checks since `last` was taken (each one hook period).
    since: u64,
    /// Both counts tracked through every sample read since `last`, rejected ones
    /// included (a read inside a wide bracket is still a good read of its count): the
    /// raw value at the latest sample and the ticks from `last` to it. The half-range
    /// rule then applies to the hook's period, not to the gap between accepted samples.
    seen_c: (u64, u64),
    seen_r: (u64, u64),
    health: WatchdogHealth,
}

impl<R: Reference> Watchdog<R> {
    /// A watchdog on `reference` for a clock started at `rate` (its accuracy bound is the
    /// first baseline's: a calibration's [`crate::Calibration::frequency`], say).
    pub fn new(reference: R, rate: Frequency) -> Watchdog<R> {
        let tolerance = reference.frequency().accuracy().bound_ppb();
        let zero = Point {
            c0_raw: 0,
            r_raw: 0,
            y: 0,
            x: 0,
            width: 0,
        };
        Watchdog {
            reference,
            tries: 4,
            slew_ppb: 1_000,
            bound_ppb: rate.accuracy().bound_ppb().saturating_add(tolerance),
            claim_ppb: rate.accuracy().bound_ppb().saturating_add(tolerance),
            counter_step: u64::MAX,
            ref_step: u64::MAX,
            min_width: u64::MAX,
            wide: (0, u64::MAX),
            last: None,
            anchor: zero,
            wend: zero,
            mid: zero,
            drift_ppb: 0,
            drift_span: 0,
            drift_up: false,
            pace_ppb: 0,
            pace_span: 0,
            moved: (0, 0),
            kink: (0, 0),
            ramp_until: 0,
            last_change: None,
            knots: [zero; KNOTS],
            steps: (1, 1, u64::MAX),
            loose_start: false,
            n_knots: 0,
            range: None,
            dropped: None,
            refused: false,
            still_ticks: 0,
            disturbed: 0,
            unmeasured: false,
            measured: [None; 4],
            pending: None,
            unwidened: None,
            ext_mark: None,
            deferred: false,
            after_jump: false,
            prev: None,
            since: 0,
            seen_c: (0, 0),
            seen_r: (0, 0),
            health: WatchdogHealth {
                bound_ppb: rate.accuracy().bound_ppb().saturating_add(tolerance),
                ..WatchdogHealth::default()
            },
        }
    }

    /// Samples per check (1 to 64; default 4): the narrowest bracket is kept.
    pub fn with_tries(mut self, tries: u32) -> Self {
        self.tries = tries.clamp(1, 64);
        self
    }

    /// Refinement's slew limit: a steering recalibration moves the rate by at most this
    /// many ppb (default 1 000: 1 ppm per check). 0 turns steering off; a confirmed change
    /// ([`Watch::Changed`]) is applied whatever this says.
    pub fn with_slew_ppb(mut self, ppb: u64) -> Self {
        self.slew_ppb = ppb;
        self
    }

    /// What it has seen so far.
    pub fn health(&self) -> WatchdogHealth {
        WatchdogHealth {
            bound_ppb: self.bound_ppb,
            window_ticks: self.wend.x.saturating_sub(self.anchor.x),
            ..self.health
        }
    }

    /// One check: call it from a periodic hook (every 0.5 s, say, as Linux's clocksource
    /// watchdog does). Samples `clock`'s counter against the reference, judges the
    /// interval since the last accepted sample, recalibrates the clock on a confirmed
    /// change and steers it by refinement (see [`Watchdog`]). Never blocks beyond its
    /// reads and one clock write: a few brackets once the reference's step is known; until
    /// then, up to 16 384 reference reads (see *The bound*). Never panics.
    pub fn check<C: Counter>(&mut self, clock: &Clock<C>) -> Watch {
        self.health.checks = self.health.checks.saturating_add(1);
        let verdict = self.judge(clock);
        let count = match verdict {
            Watch::NoVerdict(_) => &mut self.health.no_verdict,
            Watch::Steady { .. } => &mut self.health.steady,
            Watch::Changed { .. } => &mut self.health.changed,
            Watch::CounterStopped | Watch::CounterJumped { .. } => &mut self.health.counter_faults,
        };
        *count = count.saturating_add(1);
        verdict
    }
}

impl<R: Reference> fmt::Debug for Watchdog<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Watchdog")
            .field("reference", &self.reference.name())
            .field("health", &self.health())
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::calibrate::CounterReference;
    use crate::counter::FnCounter;
    use core::cell::Cell;

    fn xorshift(s: &Cell<u64>) -> u64 {
        let mut x = s.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.set(x);
        x
    }

    /// Any counts, any widths, any rates: verdicts, never a panic, and the clock never
    /// steps back.
    #[test]
    fn arbitrary_inputs_never_panic() {
        for seed in 1..200u64 {
            let s = Cell::new(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
            let cbits = 1 + (xorshift(&s) % 64) as u32;
            let rbits = 1 + (xorshift(&s) % 64) as u32;
            let mode = xorshift(&s) % 3;
            let c = Cell::new(xorshift(&s));
            let counter = FnCounter::new(
                || match mode {
                    0 => xorshift(&s),
                    1 => {
                        c.set(c.get().wrapping_add(xorshift(&s) % 1000));
                        c.get()
                    }
                    _ => c.get(),
                },
                cbits,
            );
            let hz = Frequency::MIN_HZ + xorshift(&s) % Frequency::MAX_HZ;
            let rate = Frequency::exact_hz(hz.min(Frequency::MAX_HZ)).unwrap();
            let reference = CounterReference::new(
                FnCounter::new(|| xorshift(&s), rbits),
                Frequency::exact_hz(1_000 + xorshift(&s) % 1_000_000_000).unwrap(),
            );
            let clock = Clock::new(&counter, rate);
            let mut wd = Watchdog::new(reference, rate)
                .with_tries((xorshift(&s) % 70) as u32)
                .with_slew_ppb(xorshift(&s) % 10_000_000);
            for _ in 0..50 {
                let _ = wd.check(&clock);
                let _ = clock.update();
            }
            assert_eq!(wd.health().checks, 50);
        }
    }

    /// A 64-bit counter that steps back by more than a period is told by the step, not by
    /// its net move (the step less the period), whichever side is unwrapped by the rate: a
    /// 1 MHz counter against a 10 MHz reference (the counter's wrap the longer) and a 1 GHz
    /// one (the reference's).
    #[test]
    fn a_step_back_is_told_by_its_size() {
        for counter_hz in [1_000_000u64, 1_000_000_000] {
            // True time in ns; the counter's step (ticks, applied from `t_step` on).
            let t = Cell::new(1_000_000_000u64);
            let back = Cell::new(0u64);
            let counter = FnCounter::new(
                || {
                    t.set(t.get() + 100);
                    (t.get() as u128 * counter_hz as u128 / 1_000_000_000) as u64 + (1 << 40)
                        - back.get()
                },
                64,
            );
            let reference = CounterReference::new(
                FnCounter::new(
                    || {
                        t.set(t.get() + 100);
                        t.get() / 100
                    },
                    64,
                ),
                Frequency::exact_hz(10_000_000).unwrap(),
            );
            let rate = Frequency::exact_hz(counter_hz).unwrap();
            let clock = Clock::new(&counter, rate);
            let mut wd = Watchdog::new(reference, rate);
            for _ in 0..6 {
                t.set(t.get() + 500_000_000);
                assert!(!matches!(wd.check(&clock), Watch::CounterJumped { .. }));
            }
            // 2 s back, a quarter into the next 0.5 s period.
            t.set(t.get() + 125_000_000);
            back.set(2 * counter_hz);
            t.set(t.get() + 375_000_000);
            let v = wd.check(&clock);
            let Watch::CounterJumped { by_ns } = v else {
                panic!("{counter_hz} Hz: {v}");
            };
            assert!(
                by_ns.abs_diff(-2_000_000_000) < 1_000_000,
                "{counter_hz} Hz: {v}"
            );
        }
    }

    /// A narrow counter (20 bits at 10 MHz: 105 ms a wrap) under a 64-bit reference,
    /// checked every 0.5 s, is unwrapped against the rate; a change of 11–12.4 % moves it by
    /// more than half a wrap per period, and its wraps are counted from the check's own
    /// measurement of the rate: reported within three checks at the true rate, which the
    /// clock then keeps within `bound_ppb` (without the measurement: the alias, 9–10 % the
    /// other way).
    #[test]
    fn a_narrow_counter_changed_beyond_half_a_wrap_is_not_aliased() {
        for ppm in [110_000i64, -110_000, 124_000, -124_000] {
            // True time in ns; the counter's ticks at 10 MHz, times (1 + ppm) from `at`.
            let t = Cell::new(1_000_000_000u64);
            let at = Cell::new(u64::MAX);
            let ticks = |t: u64| -> u64 {
                let base = t / 100;
                if t <= at.get() {
                    return base;
                }
                let since = (t - at.get()) as i128 / 100;
                (base as i128 + since * i128::from(ppm) / 1_000_000) as u64
            };
            let counter = FnCounter::new(
                || {
                    t.set(t.get() + 100);
                    ticks(t.get())
                },
                20,
            );
            let reference = CounterReference::new(
                FnCounter::new(
                    || {
                        t.set(t.get() + 100);
                        t.get() / 100
                    },
                    64,
                ),
                Frequency::exact_hz(10_000_000).unwrap(),
            );
            let rate = Frequency::exact_hz(10_000_000).unwrap();
            let clock = Clock::new(&counter, rate);
            let mut wd = Watchdog::new(reference, rate);
            for _ in 0..6 {
                t.set(t.get() + 500_000_000);
                assert!(matches!(
                    wd.check(&clock),
                    Watch::NoVerdict(_) | Watch::Steady { .. }
                ));
            }
            t.set(t.get() + 125_000_000);
            at.set(t.get());
            t.set(t.get() + 375_000_000);
            let truth = 10_000_000_000i128 * (1_000_000 + i128::from(ppm)) / 1_000_000;
            let mut reported = None;
            for k in 0..8 {
                let v = wd.check(&clock);
                if reported.is_none() && matches!(v, Watch::Changed { .. }) {
                    reported = Some(k);
                }
                if reported.is_some() {
                    let off = (i128::from(clock.scale().millihz()) - truth).abs();
                    let bound = i128::from(wd.health().bound_ppb) * truth / 1_000_000_000;
                    assert!(
                        off <= bound,
                        "{ppm} ppm, check {k}: {v}, {off} mHz off, bound {bound}"
                    );
                }
                t.set(t.get() + 500_000_000);
            }
            assert!(
                reported.is_some_and(|k| k < 3),
                "{ppm} ppm: reported at {reported:?}"
            );
        }
    }

    #[test]
    fn the_bound_is_the_exact_worst_case() {
        let p = |y, x, width| Point {
            c0_raw: 0,
            r_raw: 0,
            y,
            x,
            width,
        };
        // 10^6 counter ticks (2·10^6 y units) against 10^3 reference ticks of a 1 kHz
        // reference: 1 MHz. Brackets of 10 and 20 ticks, steps of 1: u_y = 32 y units.
        let s = measure(&p(0, 0, 10), &p(2_000_000, 1_000, 20), 1_000_000, 1, 1).unwrap();
        assert_eq!(s.millihz, 1_000_000_000);
        // (X·u_y + Y·u_x) / (Y·(X − u_x)) = (1000·32 + 2·10^6) / (2·10^6 · 999): 1 017 017
        // ppb exactly; computed as b1 + b2 + b1·b2 (16 000 + 1 001 002 + 17, each rounded
        // up), plus 1 ppb of rounding to mHz.
        assert_eq!(s.bound_ppb, 16_000 + 1_001_002 + 17 + 1);
        assert!(s.bound_ppb >= 1_017_017);
        assert!(measure(&p(0, 0, 10), &p(30, 1_000, 20), 1_000_000, 1, 1).is_none());
        assert!(measure(&p(0, 0, 10), &p(2_000_000, 1, 20), 1_000_000, 1, 1).is_none());
    }
}
