//! An outside acceptance check of the documented promises (README "Guarantees", the numbered
//! promises on `Clock`'s docs, `Delay`, `MonotonicClock`, `CoarseClock`, `ExtendedTimer`),
//! written from the documentation and the public API alone, with no look at the
//! implementation or at the project's own interleaving model.
//!
//! Every environment here is one the docs allow: counters set by hand (a `Cell`), reset to
//! any value, glitched once far ahead, recalibrated by any ratio within `Frequency`'s range,
//! rebased anywhere; stalls are made by running other clock operations inside the counter's
//! `ticks()` (as an interrupt would). Each assertion uses the bound the docs state, no tighter.
//! Tests marked `#[ignore = "finding: ..."]` are promises found broken: each quotes the
//! promise and the values observed.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use baretime::{
    Accuracy, Clock, ClockError, CoarseClock, Counter, Delay, ExtendedTimer, FnCounter, Frequency,
    Instant, MonotonicClock, NarrowTimer, Source, LAG_NS, MARK_GRANULE_NS,
};
use proptest::prelude::*;

/// Units of the model's fixed point: 2^-32 ns.
const S: i128 = 1 << 32;
/// Promise 7's confirmation threshold: 1 ms.
const CONFIRM_NS: u64 = 1_000_000;
/// The handover margin the docs state: 20 µs.
const HANDOVER_NS: u64 = 20_000;

fn freq(mhz: u64) -> Frequency {
    Frequency::from_millihz(mhz, Source::User, Accuracy::Exact).expect("in range")
}

/// `ticks` at `mhz` in 2^-32 ns, rounded down.
fn units(ticks: u64, mhz: u64) -> i128 {
    let num = u128::from(ticks) * 1_000_000_000_000;
    let q = num / u128::from(mhz);
    let r = num % u128::from(mhz);
    ((q << 32) + (r << 32) / u128::from(mhz)) as i128
}

/// The fewest ticks at `mhz` that span at least `ns`.
fn ticks_for(ns: u64, mhz: u64) -> u64 {
    let num = u128::from(ns) * u128::from(mhz);
    let t = num.div_ceil(1_000_000_000_000);
    u64::try_from(t).unwrap_or(u64::MAX)
}

/// The handover margin in ticks at `mhz` (at least one tick): the low and high ends of
/// what rounding could make it.
fn margin_ticks(mhz: u64) -> (u64, u64) {
    let exact_floor = (u128::from(HANDOVER_NS) * u128::from(mhz) / 1_000_000_000_000) as u64;
    let ceil = ticks_for(HANDOVER_NS, mhz);
    (exact_floor.saturating_sub(1).max(1), ceil.max(1) + 1)
}

/// The length of one tick at `mhz`, in ns, rounded up.
fn tick_ns(mhz: u64) -> u64 {
    1_000_000_000_000u64.div_ceil(mhz)
}

/// A counter the test moves by hand: a value, an optional one-read glitch, a read count.
struct Hand {
    value: Cell<u64>,
    bits: u32,
    /// `(reads to skip, ahead)`: one read, after that many, returns the value this far ahead.
    glitch: Cell<Option<(u64, u64)>>,
    reads: Cell<u64>,
}

impl Hand {
    fn new(value: u64, bits: u32) -> Hand {
        Hand {
            value: Cell::new(value),
            bits,
            glitch: Cell::new(None),
            reads: Cell::new(0),
        }
    }
    fn mask(&self) -> u64 {
        if self.bits >= 64 {
            u64::MAX
        } else {
            (1u64 << self.bits) - 1
        }
    }
    fn add(&self, ticks: u64) {
        self.value
            .set(self.value.get().wrapping_add(ticks) & self.mask());
    }
}

impl Counter for Hand {
    fn ticks(&self) -> u64 {
        self.reads.set(self.reads.get() + 1);
        let v = self.value.get();
        match self.glitch.take() {
            Some((0, ahead)) => v.wrapping_add(ahead) & self.mask(),
            Some((k, ahead)) => {
                self.glitch.set(Some((k - 1, ahead)));
                v
            }
            None => v,
        }
    }
    fn bits(&self) -> u32 {
        self.bits
    }
}

// ---------------------------------------------------------------------------------------
// Promises 1, 2, 4, 6 and 7 on a 64-bit counter, one thread: a model of what the docs allow.
// ---------------------------------------------------------------------------------------

#[derive(Clone, Debug)]
enum Op {
    /// Let `ns` of true time pass (at the rate in force).
    Advance(u64),
    Read,
    Update,
    Recalibrate(u64),
    /// `rebase(at, f)`: `at` chosen by a selector and an amount.
    Rebase(u8, u64, u64),
    /// Reset the counter: a selector and an amount.
    Reset(u8, u64),
    /// The next counter read returns a value this much (ns of clock time beyond 2 ms past the
    /// latest time handed out) ahead.
    Glitch(u64),
}

fn rate() -> impl Strategy<Value = u64> {
    // Log-uniform over Frequency's whole range, 1 kHz..=100 GHz, in millihertz, with the ends.
    prop_oneof![
        1 => Just(1_000_000u64),
        1 => Just(100_000_000_000_000u64),
        8 => (6.0f64..14.0).prop_map(|e| 10f64.powf(e) as u64),
    ]
}

fn span_ns() -> impl Strategy<Value = u64> {
    prop_oneof![
        2 => 0u64..2_000,
        2 => 0u64..100_000,
        2 => 0u64..20_000_000,
        1 => 0u64..20_000_000_000,
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => span_ns().prop_map(Op::Advance),
        6 => Just(Op::Read),
        2 => Just(Op::Update),
        3 => rate().prop_map(Op::Recalibrate),
        2 => (0u8..5, span_ns(), rate()).prop_map(|(s, x, f)| Op::Rebase(s, x, f)),
        3 => (0u8..7, any::<u64>()).prop_map(|(s, x)| Op::Reset(s, x)),
        1 => (0u64..1u64 << 40).prop_map(Op::Glitch),
    ]
}

/// What the docs allow, tracked beside the clock.
struct Model {
    /// The rate in force (mHz).
    mhz: u64,
    /// The slowest rate used (mHz), for the "one tick where a tick is longer" margin, and the
    /// fastest.
    slowest: u64,
    fastest: u64,
    /// A point on the timeline in force: the counter value `a_t` reads between `a_lo` and
    /// `a_hi` (2^-32 ns), and past it time runs at `mhz`. Valid while `precise`.
    a_t: u64,
    a_lo: i128,
    a_hi: i128,
    precise: bool,
    /// The earliest the base of the timeline in force can be (ticks), and the most its
    /// handover can span (a margin at the faster of the rates around it, and two ticks).
    base_lo: u64,
    hand_hi: u64,
    /// The latest the base of the timeline in force can be (ticks): a write from a counter
    /// that has not reached it may close there (promise 2: "or the base itself where the
    /// counter had not reached it"), so its new rate may start that late.
    base_hi: u64,
    /// The most the counter's true time can be (2^-32 ns): ticks that passed at the rates in
    /// force, and what rebases asked for.
    e_hi: i128,
    /// The latest time handed out (ns), and that as of the latest reset back.
    h: u64,
    h_at_reset: u64,
    /// The counter stepped back since the last rebase.
    stepped_back: bool,
    ever_back: bool,
    /// The value the clock started at (ticks).
    start: u64,
    log: Vec<String>,
}

impl Model {
    fn f_lo(&self, t: u64) -> Option<i128> {
        // Time saturates at u64::MAX ns.
        (self.precise && t >= self.a_t)
            .then(|| (self.a_lo + units(t - self.a_t, self.mhz)).min(i128::from(u64::MAX) * S))
    }
    fn f_hi(&self, t: u64) -> Option<i128> {
        (self.precise && t >= self.a_t).then(|| self.a_hi + units(t - self.a_t, self.mhz) + 1)
    }
    /// Promise 2's allowance above the counter's time: a granule and a handover margin (20 µs,
    /// or one tick where a tick is longer).
    fn jump_allowance(&self) -> i128 {
        // Loosened by a tick (see `finding_rebase_jumps_past_stated_margin`): the margin is
        // 20 µs rounded up to whole ticks.
        i128::from(MARK_GRANULE_NS + HANDOVER_NS + tick_ns(self.slowest)) * S
    }
    /// A reading `t` clearly behind what was handed out (promise 6: by more than `LAG_NS`,
    /// and the granule the mark may trail by), or clearly before the timeline's base by more
    /// than its handover.
    fn clearly_behind(&self, t: u64) -> bool {
        // Loosened (see `finding_update_before_base_accepted`): the clock takes a reading up
        // to LAG_NS and two handovers before the base, at the fastest rate used, for a CPU that
        // lags; only a reading further back is asserted here.
        let lag = ticks_for(LAG_NS + 2 * HANDOVER_NS + 2_000, self.fastest);
        self.behind_handed_out(t)
            || (self.precise && t.saturating_add(self.hand_hi + lag) < self.base_lo)
    }
    /// How far a reading `t` may be short of the base of the timeline in force where it is in
    /// that base's handover (a write from it may close at the base, and a rebase from it may
    /// keep the base): 0 where it cannot be.
    fn to_base(&self, t: u64) -> u64 {
        let lag = ticks_for(LAG_NS + 2 * HANDOVER_NS + 2_000, self.fastest);
        match self.base_hi.checked_sub(t) {
            Some(d) if d <= self.hand_hi.saturating_add(lag) => d,
            _ => 0,
        }
    }
    /// A reading `t` on the timeline whose time is clearly below what was handed out.
    fn behind_handed_out(&self, t: u64) -> bool {
        self.f_hi(t).is_some_and(|hi| {
            hi + i128::from(LAG_NS + MARK_GRANULE_NS + 2) * S < i128::from(self.h) * S
        })
    }
}

/// `model_64bit`'s seed: `PROPTEST_RNG_SEED` where set (a survey of fresh seeds), else 101,
/// so that the default run is one anyone can repeat. What fresh seeds found is kept as
/// deterministic tests below (`a_rebase_*`).
fn model_seed() -> proptest::test_runner::RngSeed {
    use proptest::test_runner::RngSeed;
    match std::env::var("PROPTEST_RNG_SEED") {
        Ok(s) => s.parse().map(RngSeed::Fixed).unwrap_or(RngSeed::Random),
        Err(_) => RngSeed::Fixed(101),
    }
}

/// Promise 2's lower bound ("less than 2 ns below the counter's ticks at the rates in
/// force"), found by `model_64bit` in a 30 000-case exploration: 1 kHz, recalibrated to
/// 100 GHz, read (3 ms), updated; the counter reset to 0; `rebase(0)` at 100 GHz (from a
/// counter in the update's handover), then `recalibrate` to 1 kHz 2 000 001 ticks later; a
/// reading two ticks after returned 3 020 000 ns, which the model found 2 ns or more below the
/// counter's time. The model's: the recalibration found the counter short of the base, and
/// closed there, where promise 2 lets a write's rate start ("or the base itself where the
/// counter had not reached it"); the model started the new rate a margin after the write's
/// read. The model now knows the base's latest place (`Model::base_hi`).
#[test]
fn a_rebase_then_a_slowing_recalibration_short_of_the_base() {
    run_model(
        0,
        1_000_000,
        false,
        &[
            Op::Recalibrate(100_000_000_000_000),
            Op::Read,
            Op::Advance(0),
            Op::Update,
            Op::Reset(0, 0),
            Op::Rebase(0, 0, 100_000_000_000_000),
            Op::Recalibrate(1_000_000),
            Op::Advance(0),
            Op::Advance(1),
        ],
    );
}

/// Promises 2 and 6, found by `model_64bit` (seed 123) against a first version of the fix for
/// the race of rebases from the handover (issue 14), which continued the handover's copy to
/// the base: 1 kHz → 100 GHz → 2.1 MHz → `rebase(0)` at 1 kHz → 100 GHz, the counter reset 38
/// ticks back into that handover, `rebase(14 ms)` at 100 GHz: the 1 kHz copy ran its 37
/// ticks to the base (37 ms) while the counter ran at 100 GHz, 1 ms more than promise 2 allows.
/// A rebase from the handover runs its new rate from a margin (at the copy's rate too) after
/// its reading.
#[test]
fn a_rebase_from_the_handover_does_not_run_a_slow_copy_to_the_base() {
    run_model(
        0,
        1_000_000,
        false,
        &[
            Op::Recalibrate(100_000_000_000_000),
            Op::Advance(0),
            Op::Read,
            Op::Recalibrate(2_120_455_476),
            Op::Rebase(0, 0, 1_000_000),
            Op::Recalibrate(100_000_000_000_000),
            Op::Reset(4, 1_877_382_547_253_170_637),
            Op::Rebase(3, 11_044_848, 100_000_000_000_000),
            Op::Read,
        ],
    );
}

/// Promise 2/6, found by `model_64bit` (seed 2) against the same first version: 100 GHz,
/// updated, recalibrated to 1 kHz, the counter reset to 1 (in that handover, before its copy's
/// own start), `rebase(0)` at 1 kHz, the counter reset to 0: a reading returned 1.8 × 10^17 ns.
/// The rebase started its rate at a point before the copy's start, and the copy (which stands
/// still before its start) then ran from the far side of the wrap.
#[test]
fn a_rebase_from_before_the_handover_copy_starts_it_there() {
    run_model(
        0,
        100_000_000_000_000,
        false,
        &[
            Op::Update,
            Op::Recalibrate(1_000_000),
            Op::Reset(2, 1),
            Op::Rebase(0, 0, 1_000_000),
            Op::Reset(0, 0),
            Op::Read,
        ],
    );
}

fn run_model(start: u64, mhz0: u64, uninit: bool, ops: &[Op]) {
    let hand = Hand::new(start, 64);
    let clock = if uninit {
        let c = Clock::uninit(&hand);
        assert_eq!(c.now(), Instant::ZERO);
        assert_eq!(c.update(), Err(ClockError::NotStarted));
        c.start(freq(mhz0)).unwrap();
        c
    } else {
        Clock::new(&hand, freq(mhz0))
    };
    let mut m = Model {
        mhz: mhz0,
        slowest: mhz0,
        fastest: mhz0,
        a_t: start,
        a_lo: 0,
        a_hi: 0,
        precise: true,
        base_lo: start,
        base_hi: start,
        hand_hi: margin_ticks(mhz0).1 + 2,
        e_hi: 0,
        h: 0,
        h_at_reset: 0,
        stepped_back: false,
        ever_back: false,
        start,
        log: Vec::new(),
    };
    // Let the start's handover pass.
    let (_, mh) = margin_ticks(mhz0);
    hand.add(mh);
    m.e_hi += units(mh, mhz0) + 1;

    for op in ops {
        let t = hand.value.get();
        m.log.push(format!("{op:?} @t={t}"));
        match *op {
            Op::Advance(ns) => {
                let d = ticks_for(ns, m.mhz);
                hand.add(d);
                m.e_hi += units(d, m.mhz) + 1;
            }
            Op::Read => read(&clock, &hand, &mut m),
            Op::Update | Op::Recalibrate(_) => {
                let new = match *op {
                    Op::Recalibrate(f) => f,
                    _ => m.mhz,
                };
                let behind = m.stepped_back && m.clearly_behind(t);
                let r = match *op {
                    Op::Recalibrate(f) => clock.recalibrate(freq(f)),
                    _ => clock.update(),
                };
                m.log.push(format!("  -> {r:?}"));
                assert_ne!(
                    r,
                    Err(ClockError::Busy),
                    "promise 4: one writer refused\n{:#?}",
                    m.log
                );
                if !m.stepped_back {
                    assert_eq!(
                        r,
                        Ok(()),
                        "a 64-bit counter that never went back\n{:#?}",
                        m.log
                    );
                }
                if behind {
                    assert_eq!(r, Err(ClockError::Behind), "promise 6\n{:#?}", m.log);
                }
                if r == Ok(()) {
                    let (ml, _) = margin_ticks(m.mhz.min(new));
                    let (_, mh) = margin_ticks(m.mhz.min(new));
                    // A margin after the write's read, or the base if the counter had not
                    // reached it (this counter stands still during the write).
                    let k_max = mh.max(m.to_base(t));
                    let contrib = |k: u64| units(k, m.mhz) + units(k_max - k, new);
                    let lo = contrib(ml).min(contrib(mh)).min(contrib(k_max));
                    let hi = contrib(ml).max(contrib(mh)).max(contrib(k_max)) + 2;
                    match (m.f_lo(t), m.f_hi(t)) {
                        (Some(flo), Some(fhi)) => {
                            m.a_lo = flo + lo;
                            m.a_hi = fhi + hi;
                            m.a_t = t.saturating_add(k_max);
                        }
                        _ => m.precise = false,
                    }
                    m.base_lo = t + ml;
                    m.base_hi = t.saturating_add(k_max);
                    m.hand_hi = margin_ticks(m.mhz.max(new)).1 + 2;
                    let old = m.mhz;
                    m.mhz = new;
                    m.slowest = m.slowest.min(new);
                    m.fastest = m.fastest.max(new);
                    hand.add(k_max);
                    m.e_hi += units(k_max, old).max(units(k_max, new)) + 1;
                } else {
                    assert_eq!(r, Err(ClockError::Behind), "{:#?}", m.log);
                }
            }
            Op::Rebase(sel, x, f) => {
                let at = match sel {
                    0 => 0,
                    1 => m.h.saturating_sub(x),
                    2 => m.h,
                    3 => m.h.saturating_add(x),
                    _ => ((m.e_hi / S) as u64).saturating_add(x % 1000),
                };
                // Promise 6: from `at`, or the clock's own time if later — where the counter
                // stepped back a little since, the mark, up to a granule below the latest time
                // handed out (promise 1), and the timeline continues from there.
                let floor = if m.stepped_back {
                    m.h.saturating_sub(MARK_GRANULE_NS)
                } else {
                    m.h
                };
                let mut lo = at.max(floor);
                if !m.stepped_back {
                    if let Some(flo) = m.f_lo(t) {
                        lo = lo.max(((flo / S) as u64).saturating_sub(2));
                    }
                }
                let r = clock.rebase(Instant::from_nanos(at), freq(f));
                m.log.push(format!("  at={at} -> {r:?}"));
                assert_eq!(
                    r,
                    Ok(()),
                    "rebase: `Busy` only if another writer is active\n{:#?}",
                    m.log
                );
                let mut e = m.e_hi.max(i128::from(at) * S);
                if m.stepped_back {
                    e = e.max(i128::from(m.h + MARK_GRANULE_NS) * S);
                }
                m.e_hi = e;
                // The new rate runs from the close point, a handover margin after the
                // write's reading (promise 2), where the time is `lo` or later.
                let (_, mh) = margin_ticks(f.max(m.mhz));
                m.a_t = t + mh;
                m.a_lo = i128::from(lo) * S;
                m.a_hi = i128::MAX / 4;
                m.base_lo = t;
                // From the handover the rebase may keep the base.
                m.base_hi = t.saturating_add(mh.max(m.to_base(t)));
                m.hand_hi = mh + 2;
                m.precise = true;
                m.h = m.h.min(lo.max(floor));
                m.stepped_back = false;
                let old = m.mhz;
                m.mhz = f;
                m.slowest = m.slowest.min(f);
                m.fastest = m.fastest.max(f);
                hand.add(mh);
                m.e_hi += units(mh, f).max(units(mh, old)) + 1;
            }
            Op::Reset(sel, x) => {
                let v = match sel {
                    0 => 0,
                    1 => m.start.saturating_sub(1 + x % m.start.max(1)),
                    2 if t > m.start => m.start + x % (t - m.start),
                    3 if t > m.a_t => m.a_t + x % (t - m.a_t),
                    4 => t.saturating_sub(1 + x % 100),
                    5 => t + x % (1 << 30),
                    _ => x % t.max(1),
                };
                // A jump forward is time passing (the clock cannot tell): keep it within
                // a day so that times stay far from saturating.
                let v = if v > t {
                    t + (v - t).min(ticks_for(86_400_000_000_000, m.mhz))
                } else {
                    v
                };
                if v < t {
                    m.stepped_back = true;
                    m.ever_back = true;
                    m.h_at_reset = m.h;
                } else {
                    m.e_hi += units(v - t, m.mhz) + 1;
                }
                hand.value.set(v);
            }
            Op::Glitch(extra) => {
                // Only where the model knows the timeline: far enough ahead that its time is
                // more than 1 ms past anything handed out.
                if let Some(flo) = m.f_lo(t) {
                    let need = i128::from(m.h + 2 * CONFIRM_NS + extra) * S - flo;
                    if need > 0 {
                        let ns = u64::try_from(need / S + 1).unwrap_or(u64::MAX);
                        let g = ticks_for(ns, m.mhz) + 1;
                        if g < 1 << 50 {
                            hand.glitch.set(Some((0, g)));
                        }
                    }
                }
            }
        }
    }
    read(&clock, &hand, &mut m);
}

fn read(clock: &Clock<&Hand>, hand: &Hand, m: &mut Model) {
    let t = hand.value.get();
    let r = clock.now().as_nanos();
    m.log
        .push(format!("  now() = {r} (h={} e_hi={})", m.h, m.e_hi / S));
    let ri = i128::from(r) * S;
    if m.stepped_back {
        assert!(
            r.saturating_add(MARK_GRANULE_NS) >= m.h,
            "promise 1: back by more than a granule\n{:#?}",
            m.log
        );
    } else {
        assert!(r >= m.h, "promise 1: back\n{:#?}", m.log);
    }
    let up = m.e_hi + m.jump_allowance();
    if m.stepped_back {
        let still = i128::from(m.h_at_reset + MARK_GRANULE_NS) * S;
        assert!(ri <= up.max(still), "promise 2/6: ahead\n{:#?}", m.log);
        if m.behind_handed_out(t) {
            assert!(ri <= still, "promise 6: not standing still\n{:#?}", m.log);
        }
    } else {
        assert!(
            ri <= up,
            "promise 2: ahead of the counter's time\n{:#?}",
            m.log
        );
    }
    if let Some(flo) = m.f_lo(t) {
        if !m.stepped_back || flo - 2 * S > i128::from(m.h) * S {
            assert!(
                ri > flo - 2 * S - flo / (1 << 58),
                "promise 2: 2 ns or more below the counter's time\n{:#?}",
                m.log
            );
        }
    }
    if m.stepped_back && m.behind_handed_out(t) {
        assert!(
            clock.health().counter_behind,
            "promise 6: counter_behind\n{:#?}",
            m.log
        );
    }
    if !m.ever_back {
        assert!(
            !clock.health().counter_behind,
            "counter_behind without a step back\n{:#?}",
            m.log
        );
    }
    m.h = m.h.max(r);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, failure_persistence: None, rng_seed: model_seed(), ..ProptestConfig::default() })]

    /// Promises 1, 2, 4, 6 and 7 on one thread, 64-bit counter: random runs of reads,
    /// advances, updates, recalibrations by any ratio in Frequency's range, rebases to
    /// anywhere, counter resets to anywhere (below the start, into an earlier timeline, above
    /// the base, a tick back, forward) and single glitched reads far ahead.
    #[test]
    fn model_64bit(
        start in prop_oneof![Just(0u64), 0u64..1 << 20, 0u64..1 << 61],
        mhz0 in rate(),
        uninit in any::<bool>(),
        ops in prop::collection::vec(op(), 1..40),
    ) {
        run_model(start, mhz0, uninit, &ops);
    }
}

// ---------------------------------------------------------------------------------------
// Promise 7: one glitched read, at every read an operation makes, never becomes the time.
// ---------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug)]
enum Gop {
    Now,
    Update,
    Recalibrate(u64),
    Rebase(bool, u64),
    Start,
    Deadline,
}

/// Runs `op` on a fresh 64-bit clock at `mhz` with the `k`-th counter read of the operation
/// glitched `ahead` ticks; returns whether the glitch was reached (the operation read the
/// counter more than `k` times), after checking every promise on the readings that follow.
fn glitch_case(mhz: u64, op: Gop, k: u64, ahead: u64, behind_first: bool) -> bool {
    let t0 = 1u64 << 40;
    let hand = Hand::new(t0, 64);
    let clock = if matches!(op, Gop::Start) {
        Clock::uninit(&hand)
    } else {
        Clock::new(&hand, freq(mhz))
    };
    let second = ticks_for(1_000_000_000, mhz);
    let mut h = 0;
    if !matches!(op, Gop::Start) {
        hand.add(second); // 1 s
        h = clock.now().as_nanos();
        if behind_first {
            // The counter was reset back half a second (the reading stands still).
            hand.value.set(t0 + second / 2);
            let r = clock.now().as_nanos();
            assert!(r <= h + MARK_GRANULE_NS && r + MARK_GRANULE_NS >= h);
            h = h.max(r);
        }
    }
    let before = clock.now().as_nanos();
    hand.glitch.set(Some((k, ahead)));
    let reads0 = hand.reads.get();
    let mut new_rate = mhz;
    let what = match op {
        Gop::Now => {
            let r = clock.now().as_nanos();
            assert!(
                r <= before.max(h) + MARK_GRANULE_NS,
                "promise 7: glitched now() {r} after {before}"
            );
            Ok(())
        }
        Gop::Update => clock.update(),
        Gop::Recalibrate(f) => {
            new_rate = f;
            clock.recalibrate(freq(f))
        }
        Gop::Rebase(ahead_at, f) => {
            new_rate = f;
            let at = if ahead_at { before + 5_000_000 } else { 0 };
            h = h.max(at);
            clock.rebase(Instant::from_nanos(at), freq(f))
        }
        Gop::Start => clock.start(freq(mhz)),
        Gop::Deadline => clock
            .deadline(Instant::from_nanos(before + 1_000_000))
            .map(|_| ()),
    };
    let reached = hand.reads.get() - reads0 > k;
    hand.glitch.set(None);
    let fine = match op {
        Gop::Update | Gop::Recalibrate(_) if behind_first => what == Err(ClockError::Behind),
        _ => what.is_ok(),
    };
    assert!(
        fine,
        "{op:?} with read {k} glitched {ahead} ahead: {what:?}"
    );
    // A second later (at the new rate) time has moved by about a second, no more.
    let rate_after = if fine && !(behind_first && matches!(op, Gop::Update | Gop::Recalibrate(_))) {
        new_rate
    } else {
        mhz
    };
    let mut last = clock.now().as_nanos();
    for step in 1..=4u64 {
        hand.add(ticks_for(250_000_000, rate_after));
        let r = clock.now().as_nanos();
        let slack = if behind_first { MARK_GRANULE_NS } else { 0 };
        assert!(
            r + slack >= last,
            "promise 1 after a glitch in {op:?} (read {k}): {last} then {r}"
        );
        let allowed = h.max(before)
            + step * 250_000_000
            + 2 * (MARK_GRANULE_NS + HANDOVER_NS + tick_ns(mhz.min(new_rate)));
        assert!(
            r <= allowed,
            "promise 7: after {op:?} with read {k} glitched {ahead} ticks ahead, now() = {r} > {allowed} (before {before})"
        );
        last = r;
    }
    reached
}

#[test]
fn glitch_never_becomes_the_time() {
    let mut cases = 0;
    for mhz in [
        1_000_000u64,
        32_768_000,
        1_000_000_000_000,
        2_400_000_000_000,
        100_000_000_000_000,
    ] {
        // Ahead by 1.5 ms, 1 s, a day, and 2^61 ticks (under the 2^62-tick deadline).
        let aheads = [
            ticks_for(1_500_000, mhz) + 1,
            ticks_for(1_000_000_000, mhz),
            ticks_for(86_400_000_000_000, mhz),
            1u64 << 61,
        ];
        let ops = [
            Gop::Now,
            Gop::Update,
            Gop::Recalibrate(mhz / 2 + 1_000_000),
            Gop::Recalibrate((mhz * 2).min(100_000_000_000_000)),
            Gop::Rebase(false, mhz),
            Gop::Rebase(true, mhz),
            Gop::Start,
            Gop::Deadline,
        ];
        for op in ops {
            for behind in [false, true] {
                if behind && matches!(op, Gop::Start) {
                    continue;
                }
                for &ahead in &aheads {
                    if mhz == 1_000_000 && ahead == 1 << 61 {
                        continue; // 2^61 ms: past u64 ns, saturating
                    }
                    for k in 0.. {
                        cases += 1;
                        if !glitch_case(mhz, op, k, ahead, behind) {
                            break;
                        }
                    }
                }
            }
        }
    }
    assert!(cases > 300, "{cases}");
}

/// Promise 7's other side: a reading further ahead than the 2^62-tick deadline "reads as
/// behind, promise 6": time stands (at most a granule above what was handed out) for that
/// read, a write may be refused with `Behind`, and nothing has to be waited out: the next true
/// reading is the time again. And `MonotonicClock` (issue case 12) is not frozen by it.
#[test]
fn glitch_past_the_deadline_and_the_guard() {
    for mhz in [1_000_000_000_000u64, 100_000_000_000_000] {
        for ahead in [1u64 << 62, (1 << 62) + (1 << 61), 1 << 63, u64::MAX] {
            let hand = Hand::new(12_345, 64);
            let clock = Clock::new(&hand, freq(mhz));
            let guard = MonotonicClock::new(&clock);
            hand.add(ticks_for(1_000_000_000, mhz));
            let h = guard.now().as_nanos();
            hand.glitch.set(Some((0, ahead)));
            let g = guard.now().as_nanos();
            assert!(g <= h + MARK_GRANULE_NS, "glitch {ahead}: {g} after {h}");
            hand.glitch.set(Some((0, ahead)));
            let _ = clock.update();
            hand.add(ticks_for(1_000_000, mhz));
            let n = guard.now().as_nanos();
            assert!(
                n >= h + 1_000_000 - 2 && n <= h + 1_000_000 + MARK_GRANULE_NS + HANDOVER_NS,
                "glitch {ahead}: {n} after {h}"
            );
            assert_eq!(clock.update(), Ok(()));
        }
        // Within the deadline, through the guard: one glitched read an hour ahead.
        let hand = Hand::new(0, 64);
        let clock = Clock::new(&hand, freq(mhz));
        let guard = MonotonicClock::new(&clock);
        hand.add(ticks_for(1_000_000_000, mhz));
        let h = guard.now().as_nanos();
        hand.glitch
            .set(Some((0, ticks_for(3_600_000_000_000, mhz))));
        assert!(guard.now().as_nanos() <= h + MARK_GRANULE_NS);
        hand.add(ticks_for(1_000_000, mhz));
        let n = guard.now().as_nanos();
        assert!(
            n >= h + 1_000_000 - 2 && n <= h + 1_000_000 + MARK_GRANULE_NS,
            "{n} after {h}"
        );
        assert!(guard.high_water().as_nanos() <= n);
    }
}

// ---------------------------------------------------------------------------------------
// Promise 5: narrow counters updated exactly `update_interval()` apart are never late, and
// time follows the counter through them.
// ---------------------------------------------------------------------------------------

/// The whole ticks in `ns` at `mhz`, rounded down: an update spaced by this many ticks is
/// spaced by at most `ns`.
fn ticks_within(ns: u64, mhz: u64) -> u64 {
    (u128::from(ns) * u128::from(mhz) / 1_000_000_000_000) as u64
}

fn run_cadence(bits: u32, start: u64, mhz0: u64, first: u64, writes: &[Option<u64>]) {
    let hand = Hand::new(start, bits);
    let clock = Clock::new(&hand, freq(mhz0));
    let mut log = vec![format!(
        "bits {bits} start {start} mhz {mhz0} interval {:?}",
        clock.update_interval()
    )];
    // Unwrapped position, and the model: time at position `a_t` is in [a_lo, ..], rate `mhz`.
    let mut pos: u64 = 0;
    let (mut a_t, mut a_lo, mut mhz) = (0u64, 0i128, mhz0);
    let mut e_hi: i128 = 0;
    let mut slowest = mhz0;
    let mut h = 0u64;
    let mut interval = clock.update_interval();
    // The first update, `first` ticks after the start (within the interval).
    let first = first % (ticks_within(interval.as_nanos() as u64, mhz0) + 1);
    // Not inside the start's handover: an update there does nothing and the next write's
    // handover is cut short (see `finding_recalibrate_after_an_update_that_did_nothing`).
    let cap = ((1u64 << bits) / 16).max(1);
    let first = if first <= margin_ticks(mhz0).1.min(cap + 1) {
        0
    } else {
        first
    };
    let advance = |pos: &mut u64, d: u64, e_hi: &mut i128, mhz: u64| {
        *pos += d;
        hand.add(d);
        *e_hi += units(d, mhz) + 1;
    };
    advance(&mut pos, first, &mut e_hi, mhz);
    for (i, w) in writes.iter().enumerate() {
        if e_hi > (1i128 << 62) * S || pos > 1 << 62 {
            break; // time near saturation: nothing more to learn
        }
        // Read before the write: time follows the counter.
        let r = clock.now().as_nanos();
        log.push(format!("pos {pos}: now {r}"));
        let ri = i128::from(r) * S;
        assert!(r >= h, "promise 1: {r} after {h}\n{log:#?}");
        let allowance = i128::from(MARK_GRANULE_NS + HANDOVER_NS + tick_ns(slowest)) * S;
        assert!(ri <= e_hi + allowance, "promise 2: ahead\n{log:#?}");
        if pos >= a_t {
            let flo = a_lo + units(pos - a_t, mhz);
            // Less than 2 ns, and the conversion's own 3e-18 of the value (see
            // `finding_two_ns_bound_omits_the_scale_error`).
            assert!(
                ri > flo - 2 * S - flo / (1 << 58),
                "promise 2: {r} below the counter's time {}\n{log:#?}",
                flo / S
            );
        }
        h = r;
        let new = w.unwrap_or(mhz);
        let res = match w {
            Some(f) => clock.recalibrate(freq(*f)),
            None => clock.update(),
        };
        log.push(format!("write {i} {w:?} -> {res:?}"));
        assert_eq!(
            res,
            Ok(()),
            "promise 5: a write exactly update_interval() after the last\n{log:#?}"
        );
        assert_eq!(clock.health().late_updates, 0);
        // The model: the new rate from the close point, a margin after the reading.
        if pos >= a_t {
            // The margin is at most 1/16 of the wrap (the clock module's docs).
            let cap = ((1u64 << bits) / 16).max(1);
            let (ml, mh) = margin_ticks(mhz.min(new));
            let (ml, mh) = (ml.min(cap).saturating_sub(1).max(1), (mh).min(cap + 1));
            let contrib = |k: u64| units(k, mhz) + units(mh - k, new);
            a_lo = a_lo + units(pos - a_t, mhz) + contrib(ml).min(contrib(mh));
            a_t = pos + mh;
        }
        let old = mhz;
        mhz = new;
        slowest = slowest.min(new);
        interval = clock.update_interval();
        log.push(format!("interval {interval:?}"));
        // The next write exactly `interval` later (in whole ticks at the rate in force; the
        // handover's ticks at the old rate are no slower than... both bounded by the interval
        // at the faster of the two rates).
        let d = ticks_within(interval.as_nanos() as u64, mhz);
        // The handover's ticks may run at the old rate: count them at the slower one.
        let hand_ticks = d.min(margin_ticks(old.min(mhz)).1);
        advance(&mut pos, hand_ticks, &mut e_hi, old.min(mhz));
        advance(&mut pos, d - hand_ticks, &mut e_hi, mhz);
    }
    let r = clock.now().as_nanos();
    assert!(r >= h, "promise 1\n{log:#?}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, failure_persistence: None, ..ProptestConfig::default() })]

    /// Promise 5 on every width from 3 to 63 bits and every rate: updates (and recalibrations)
    /// each exactly `update_interval()` after the one before — the first anywhere in the
    /// first interval, even within the start's handover — are never late, and time follows the
    /// counter through them (promises 1 and 2).
    #[test]
    fn cadence_exact_interval(
        bits in 3u32..64,
        start in any::<u64>(),
        mhz0 in rate(),
        first in prop_oneof![Just(0u64), 0u64..4, any::<u64>()],
        writes in prop::collection::vec(prop_oneof![3 => Just(None), 1 => rate().prop_map(Some)], 1..12),
    ) {
        run_cadence(bits, start, mhz0, first, &writes);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, failure_persistence: None, ..ProptestConfig::default() })]

    /// Promise 5's other half: an update missed (the counter more than half a wrap, less than
    /// a whole one, past the last write) is detected. Time stands still from the deadline —
    /// no earlier than the time at `update_interval()`, no later than at half the wrap — the
    /// next write returns `Late`, `late_updates` counts it, and time runs on from there.
    #[test]
    fn late_update_detected(
        bits in 3u32..40,
        start in any::<u64>(),
        mhz in rate(),
        frac in 0.0f64..1.0,
        recal in proptest::option::of(rate()),
    ) {
        let hand = Hand::new(start, bits);
        let clock = Clock::new(&hand, freq(mhz));
        let half = 1u64 << (bits - 1);
        let iv = clock.update_interval().as_nanos() as u64;
        // Past the deadline (half a wrap) and short of a whole wrap less a handover (see
        // `finding_late_by_almost_a_wrap_undetected` for the rest).
        let wrap = half * 2;
        let margin = margin_ticks(mhz).1.min(wrap / 16).max(1);
        let hi = wrap.saturating_sub(2 * margin + 4);
        prop_assume!(hi > half + 1);
        let d = half + 1 + ((hi - half - 1) as f64 * frac) as u64;
        hand.add(d);
        let stood = clock.now().as_nanos();
        let at_iv = (units(ticks_within(iv, mhz), mhz) / S) as u64;
        let at_half = (units(half, mhz) / S) as u64;
        prop_assert!(stood + 2 >= at_iv.min(iv), "stood at {} before the interval's {}", stood, at_iv);
        prop_assert!(stood <= at_half + MARK_GRANULE_NS + HANDOVER_NS + tick_ns(mhz), "stood at {} past half a wrap's {}", stood, at_half);
        hand.add(1);
        prop_assert_eq!(clock.now().as_nanos(), stood, "time stands still while late");
        let r = match recal { Some(f) => clock.recalibrate(freq(f)), None => clock.update() };
        prop_assert_eq!(r, Err(ClockError::Late));
        prop_assert_eq!(clock.health().late_updates, 1);
        let after = clock.now().as_nanos();
        prop_assert!(after >= stood && after <= stood + MARK_GRANULE_NS + HANDOVER_NS + tick_ns(mhz.min(recal.unwrap_or(mhz))));
        // And it runs again: a quarter interval later, an update is on time.
        let f2 = recal.unwrap_or(mhz);
        let q = ticks_within(clock.update_interval().as_nanos() as u64 / 4, f2).max(1);
        hand.add(q);
        prop_assert_eq!(clock.update(), Ok(()));
        prop_assert!(clock.now().as_nanos() >= after);
    }
}

// ---------------------------------------------------------------------------------------
// Promises 1, 3 and 4 with stalls: other operations run inside the counter's `ticks()` and
// `bits()` (as interrupts do on one CPU), nested up to three deep.
// ---------------------------------------------------------------------------------------

/// A counter whose calls may run other clock operations (a stall) before or after sampling.
struct Nest {
    pos: Cell<u64>,
    bits: u32,
    sample_after: bool,
    hook: Cell<Option<&'static dyn Fn()>>,
}

impl Nest {
    fn value(&self) -> u64 {
        if self.bits >= 64 {
            self.pos.get()
        } else {
            self.pos.get() & ((1 << self.bits) - 1)
        }
    }
    fn stall(&self) {
        if let Some(h) = self.hook.get() {
            h();
        }
    }
}

impl Counter for Nest {
    fn ticks(&self) -> u64 {
        if self.sample_after {
            self.stall();
            self.value()
        } else {
            let v = self.value();
            self.stall();
            v
        }
    }
    fn bits(&self) -> u32 {
        self.stall();
        self.bits
    }
}

#[derive(Clone, Copy, Debug)]
enum Nop {
    Now,
    Update,
    /// Recalibrate to the same rate (time keeps its rate: the model stays exact).
    Recalibrate,
    /// `rebase(Instant::ZERO, same rate)`: continues the timeline (promise 2).
    RebaseZero,
    /// Loose mode only: recalibrate to any rate, rebase to any time, reset a 64-bit counter
    /// back by this many ticks (on a narrow counter: a read).
    RecalibrateTo(u64),
    RebaseAt(u64, u64),
    ResetBack(u64),
}

struct World {
    nest: &'static Nest,
    clock: &'static Clock<&'static Nest>,
    mhz: u64,
    /// At each stall: advance the counter this many ticks, then maybe run an operation.
    schedule: RefCell<Vec<(u64, Option<Nop>)>>,
    depth: Cell<u32>,
    /// Writes in progress, with the counter position each began at.
    writes: RefCell<Vec<(u64, u64)>>,
    next_id: Cell<u64>,
    /// The largest time returned by a finished `now()`.
    finished_max: Cell<u64>,
    /// A write returned `Late`: time may have been lost (promise 5), lower bounds are off.
    lost: Cell<bool>,
    log: RefCell<Vec<String>>,
    interval_ticks: u64,
    rebases: Cell<u64>,
    /// Loose mode: any rate, rebases, resets and long stalls; only promises 1 and 4 are
    /// asserted (with a granule's slack once a 64-bit counter stepped back).
    loose: bool,
    budget: Cell<u64>,
    stepped_back: Cell<bool>,
}

impl World {
    fn e(&self, pos: u64) -> i128 {
        units(pos, self.mhz)
    }
    /// A continuing rebase may drop up to a nanosecond (see
    /// `finding_repeated_rebase_loses_time`): that much per rebase is not asserted here.
    fn rebase_slack(&self) -> i128 {
        i128::from(self.rebases.get()) * S
    }
    fn fail(&self, msg: String) -> ! {
        panic!("{msg}\n{:#?}", self.log.borrow());
    }
    fn on_stall(&self) {
        if self.depth.get() >= 4 {
            return;
        }
        let next = self.schedule.borrow_mut().pop();
        if let Some((adv, op)) = next {
            let adv = if self.loose {
                adv.min(self.budget.get())
            } else {
                adv.min(self.interval_ticks / 64)
            };
            self.budget.set(self.budget.get() - adv);
            self.nest.pos.set(self.nest.pos.get() + adv);
            if let Some(op) = op {
                self.run(op);
            }
        }
    }
    fn run(&self, op: Nop) {
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        self.depth.set(self.depth.get() + 1);
        let begin_pos = self.nest.pos.get();
        let floor_before = self.finished_max.get();
        let oldest_write = self.writes.borrow().iter().map(|w| w.1).min();
        let other_writes = self.writes.borrow().len();
        self.log.borrow_mut().push(format!(
            "{:indent$}begin {id} {op:?} @{begin_pos}",
            "",
            indent = 2 * self.depth.get() as usize
        ));
        let op = match op {
            Nop::ResetBack(_) if self.nest.bits < 64 => Nop::Now,
            op => op,
        };
        let is_write = !matches!(op, Nop::Now | Nop::ResetBack(_));
        if is_write {
            self.writes.borrow_mut().push((id, begin_pos));
        }
        let f = freq(self.mhz);
        let result = match op {
            Nop::Now => Ok(self.clock.now().as_nanos()),
            Nop::Update => self.clock.update().map(|_| 0),
            Nop::Recalibrate => self.clock.recalibrate(f).map(|_| 0),
            Nop::RebaseZero => {
                self.rebases.set(self.rebases.get() + 1);
                self.clock.rebase(Instant::ZERO, f).map(|_| 0)
            }
            Nop::RecalibrateTo(r) => self.clock.recalibrate(freq(r)).map(|_| 0),
            Nop::RebaseAt(at, r) => self
                .clock
                .rebase(Instant::from_nanos(at), freq(r))
                .map(|_| 0),
            Nop::ResetBack(x) => {
                let pos = self.nest.pos.get();
                self.nest.pos.set(pos - x.min(pos));
                self.stepped_back.set(true);
                Ok(u64::MAX)
            }
        };
        if is_write {
            self.writes.borrow_mut().retain(|w| w.0 != id);
        }
        let end_pos = self.nest.pos.get();
        self.log.borrow_mut().push(format!(
            "{:indent$}end {id} {op:?} @{end_pos}: {result:?}",
            "",
            indent = 2 * self.depth.get() as usize
        ));
        self.depth.set(self.depth.get() - 1);
        match result {
            Err(ClockError::Busy) => {
                // Promise 4: `Busy` means only that another writer is active right now.
                let others = other_writes + self.writes.borrow().len();
                if others == 0 {
                    self.fail(format!(
                        "promise 4: write {id} got Busy with no other writer active"
                    ));
                }
            }
            Err(ClockError::Late) => self.lost.set(true),
            Err(ClockError::Behind) if self.stepped_back.get() => {}
            Err(e) => self.fail(format!("{op:?}: unexpected {e:?}")),
            Ok(v) if matches!(op, Nop::Now) && self.loose => {
                let slack = if self.stepped_back.get() {
                    MARK_GRANULE_NS
                } else {
                    0
                };
                if v.saturating_add(slack) < floor_before {
                    self.fail(format!("promise 1: now() {id} = {v} below {floor_before}, returned before it began"));
                }
                self.finished_max.set(self.finished_max.get().max(v));
            }
            Ok(v) if matches!(op, Nop::Now) => {
                if v < floor_before {
                    self.fail(format!("promise 1: now() {id} = {v} below {floor_before}, returned before it began"));
                }
                let up = self.e(end_pos)
                    + i128::from(MARK_GRANULE_NS + HANDOVER_NS + tick_ns(self.mhz)) * S;
                if i128::from(v) * S > up {
                    self.fail(format!(
                        "promise 2: now() {id} = {v} ahead of the counter's time {}",
                        up / S
                    ));
                }
                // Promise 3: a time read within its call; while a writer was stalled between
                // closing and publishing, no earlier than where that writer read the counter.
                let from = oldest_write.map_or(begin_pos, |w| w.min(begin_pos));
                if !self.lost.get()
                    && i128::from(v) * S <= self.e(from) - 2 * S - self.rebase_slack()
                {
                    self.fail(format!("promise 3: now() {id} = {v} below the counter's time {} when it (or a stalled writer) began", self.e(from) / S));
                }
                self.finished_max.set(self.finished_max.get().max(v));
            }
            Ok(_) => {}
        }
    }
}

fn run_nested(
    bits: u32,
    mhz: u64,
    sample_after: bool,
    tops: &[Nop],
    schedule: Vec<(u64, Option<Nop>)>,
    loose: bool,
) {
    let nest: &'static Nest = Box::leak(Box::new(Nest {
        pos: Cell::new(0),
        bits,
        sample_after,
        hook: Cell::new(None),
    }));
    let clock: &'static Clock<&'static Nest> = Box::leak(Box::new(Clock::new(nest, freq(mhz))));
    let interval_ticks = ticks_within(clock.update_interval().as_nanos() as u64, mhz);
    let world: &'static World = Box::leak(Box::new(World {
        nest,
        clock,
        mhz,
        schedule: RefCell::new(schedule),
        depth: Cell::new(0),
        writes: RefCell::new(Vec::new()),
        next_id: Cell::new(0),
        finished_max: Cell::new(0),
        lost: Cell::new(false),
        log: RefCell::new(vec![format!(
            "bits {bits} mhz {mhz} sample_after {sample_after} interval {interval_ticks} ticks"
        )]),
        interval_ticks,
        rebases: Cell::new(0),
        loose,
        budget: Cell::new(0),
        stepped_back: Cell::new(false),
    }));
    // Loose mode's stalls: on a narrow counter, at most 3/4 of a wrap less 8 ticks between
    // updates at rest (so that no reading lands in the zone of
    // `finding_late_by_almost_a_wrap_goes_back`).
    let budget = if bits >= 64 {
        1 << 44
    } else {
        (1u64 << bits) / 4 * 3 - 8
    };
    world.budget.set(budget);
    let hook: &'static dyn Fn() = Box::leak(Box::new(move || world.on_stall()));
    nest.hook.set(Some(hook));
    for &op in tops {
        world.run(op);
        // Between top-level operations nothing is stalled: time is the counter's (promise 2:
        // less than 2 ns below it), unless an update was late.
        nest.hook.set(None);
        let v = clock.now().as_nanos();
        nest.hook.set(Some(hook));
        let e = world.e(nest.pos.get());
        if !loose && !world.lost.get() && i128::from(v) * S <= e - 2 * S - world.rebase_slack() {
            world.fail(format!(
                "promise 2/3: at rest, now() = {v} is 2 ns or more below the counter's time {}",
                e / S
            ));
        }
        let slack = if world.stepped_back.get() {
            MARK_GRANULE_NS
        } else {
            0
        };
        if v.saturating_add(slack) < world.finished_max.get() {
            world.fail(format!(
                "promise 1: at rest, now() = {v} below {}",
                world.finished_max.get()
            ));
        }
        world.finished_max.set(v.max(world.finished_max.get()));
        world.budget.set(budget);
        // Keep a narrow counter's cadence: an update at rest once the counter has run a
        // quarter of the interval.
        nest.hook.set(None);
        let _ = clock.update();
        nest.hook.set(Some(hook));
    }
}

fn nop() -> impl Strategy<Value = Nop> {
    prop_oneof![3 => Just(Nop::Now), 2 => Just(Nop::Update), 1 => Just(Nop::Recalibrate), 1 => Just(Nop::RebaseZero)]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 600, failure_persistence: None, ..ProptestConfig::default() })]

    /// Stalls anywhere: at every counter call a schedule may advance the counter and run
    /// another operation (reads and writes, nested up to four deep). Promise 1 (a `now()` that
    /// finished before another began returns no more), promise 3 (a time read within its
    /// call, or where a stalled writer read the counter; at rest no time lost), promise 4
    /// (`Busy` only while another writer is active) and promise 2 (never ahead).
    #[test]
    fn nested_stalls(
        bits in prop_oneof![Just(64u32), 10u32..40],
        mhz in prop_oneof![Just(1_000_000_000u64), Just(1_000_000_000_000), Just(100_000_000_000_000), rate()],
        sample_after in any::<bool>(),
        tops in prop::collection::vec(nop(), 1..12),
        schedule in prop::collection::vec(
            (prop_oneof![Just(0u64), 0u64..4, 0u64..100_000, 0u64..10_000_000_000], proptest::option::of(nop())),
            0..60,
        ),
    ) {
        run_nested(bits, mhz, sample_after, &tops, schedule, false);
    }

    /// The same with everything the docs allow at once: recalibrations to any rate in
    /// Frequency's range, rebases to any time, 64-bit counter resets, and stalls long enough
    /// to make updates late (narrow counters, within 3/4 of a wrap). Promises 1 (a granule's
    /// slack once a 64-bit counter stepped back) and 4.
    #[test]
    fn nested_stalls_anything(
        bits in prop_oneof![Just(64u32), 8u32..40],
        mhz in rate(),
        sample_after in any::<bool>(),
        tops in prop::collection::vec(loose_nop(), 1..12),
        schedule in prop::collection::vec(
            (prop_oneof![Just(0u64), 0u64..4, 0u64..100_000, 0u64..1 << 40], proptest::option::of(loose_nop())),
            0..60,
        ),
    ) {
        run_nested(bits, mhz, sample_after, &tops, schedule, true);
    }
}

fn loose_nop() -> impl Strategy<Value = Nop> {
    prop_oneof![
        4 => Just(Nop::Now),
        2 => Just(Nop::Update),
        2 => rate().prop_map(Nop::RecalibrateTo),
        1 => (prop_oneof![Just(0u64), any::<u64>().prop_map(|x| x >> 8)], rate()).prop_map(|(a, r)| Nop::RebaseAt(a, r)),
        1 => prop_oneof![1u64..100, 1u64..1 << 30, any::<u64>()].prop_map(Nop::ResetBack),
    ]
}

// ---------------------------------------------------------------------------------------
// Threads: promise 1 across CPUs that share one counter, with a writer recalibrating by large
// ratios, updating and rebasing, and readers through `Clock`, `MonotonicClock` and
// `CoarseClock`.
// ---------------------------------------------------------------------------------------

/// A counter shared by every thread: one atomic that every read advances.
struct Shared {
    ticks: AtomicU64,
    bits: u32,
    step: u64,
}

impl Counter for Shared {
    fn ticks(&self) -> u64 {
        let v = self.ticks.fetch_add(self.step, Ordering::SeqCst) + self.step;
        if self.bits >= 64 {
            v
        } else {
            v & ((1 << self.bits) - 1)
        }
    }
    fn bits(&self) -> u32 {
        self.bits
    }
}

/// What a threaded run saw: reads, and `now()` calls that returned less than a time already
/// returned by one that finished before they began (promise 1), the largest such step back
/// and one example.
#[derive(Debug, Default)]
#[allow(dead_code)] // `max_back_ns` and `example` are read through `Debug`, in failure messages
struct Threaded {
    reads: u64,
    back: u64,
    max_back_ns: u64,
    example: Option<(u64, u64)>,
}

/// Two reader threads and one writer thread (writes chosen by `mode`: bit 0 `update`, bit 1
/// `recalibrate` through `rates`, bit 2 `rebase(Instant::ZERO, rate)`) on one shared counter that
/// every read advances by `step`, for `millis` ms.
fn threaded(bits: u32, step: u64, rates: &[u64], millis: u64, mode: u32) -> Threaded {
    let counter = Shared {
        ticks: AtomicU64::new(1 << 20),
        bits,
        step,
    };
    let clock = Clock::new(&counter, freq(rates[0]));
    let guard = MonotonicClock::new(&clock);
    let coarse = CoarseClock::new();
    let latest = AtomicU64::new(0);
    let guarded = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let reads = AtomicU64::new(0);
    let busy = AtomicU64::new(0);
    let back = AtomicU64::new(0);
    let max_back = AtomicU64::new(0);
    let example = std::sync::Mutex::new(None);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                let mut own_coarse = 0;
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    // Promise 1: every now() that finished before this one began.
                    let before = latest.load(Ordering::SeqCst);
                    let v = clock.now().as_nanos();
                    if v < before {
                        back.fetch_add(1, Ordering::Relaxed);
                        max_back.fetch_max(before - v, Ordering::Relaxed);
                        example.lock().unwrap().get_or_insert((before, v));
                    }
                    latest.fetch_max(v, Ordering::SeqCst);
                    let gb = guarded.load(Ordering::SeqCst);
                    let g = guard.now().as_nanos();
                    assert!(g >= gb, "MonotonicClock: {g} after {gb}");
                    guarded.fetch_max(g, Ordering::SeqCst);
                    let c = coarse.now().as_nanos();
                    assert!(c >= own_coarse, "CoarseClock promise 1");
                    own_coarse = c;
                    let after = clock.now().as_nanos();
                    // CoarseClock promise 2 (never ahead of the clock it is refreshed from),
                    // up to what the clock's own steps back allow.
                    assert!(
                        c <= after.max(latest.load(Ordering::SeqCst)),
                        "CoarseClock promise 2: {c} ahead of the clock's {after}"
                    );
                    n += 1;
                }
                reads.fetch_add(n, Ordering::Relaxed);
            });
        }
        s.spawn(|| {
            let mut i = 0usize;
            while !stop.load(Ordering::Relaxed) {
                // Per five turns: two updates, two recalibrations, a rebase (those `mode`
                // enables); the rate changes every five turns.
                let rate = freq(rates[(i / 5) % rates.len()]);
                let r = match i % 5 {
                    0 | 1 if mode & 1 != 0 => clock.update(),
                    2 | 3 if mode & 2 != 0 => clock.recalibrate(rate),
                    4 if mode & 4 != 0 => clock.rebase(Instant::ZERO, rate),
                    _ => Ok(()),
                };
                coarse.refresh(&clock);
                match r {
                    Ok(()) | Err(ClockError::Late) => {}
                    Err(ClockError::Busy) => {
                        busy.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => panic!("writer: {e:?}"),
                }
                i += 1;
            }
        });
        std::thread::sleep(std::time::Duration::from_millis(millis));
        stop.store(true, Ordering::Relaxed);
    });
    // Promise 4: one writer thread is never refused.
    assert_eq!(
        busy.load(Ordering::Relaxed),
        0,
        "promise 4: a single writer got Busy"
    );
    let example = *example.lock().unwrap();
    Threaded {
        reads: reads.load(Ordering::Relaxed),
        back: back.load(Ordering::Relaxed),
        max_back_ns: max_back.load(Ordering::Relaxed),
        example,
    }
}

const WIDE_RATES: [u64; 5] = [
    1_000_000_000_000,
    100_000_000_000_000,
    1_000_000,
    2_000_000_000_000,
    999_999_999_999,
];

/// 64-bit, a writer updating and recalibrating by ratios up to 10^8 (1 kHz..100 GHz).
#[test]
fn threads_64bit_update_recalibrate() {
    let r = threaded(64, 7, &WIDE_RATES, 600, 0b011);
    assert!(r.reads > 1000, "{r:?}");
    assert_eq!(r.back, 0, "promise 1 across threads: {r:?}");
}

/// 64-bit, a writer updating and rebasing (continuing the timeline).
#[test]
fn threads_64bit_update_rebase() {
    let r = threaded(64, 7, &WIDE_RATES, 600, 0b101);
    assert!(r.reads > 1000, "{r:?}");
    assert_eq!(r.back, 0, "promise 1 across threads: {r:?}");
}

/// 32-bit, a writer doing everything: the wrap (2^32 reads) is never reached.
#[test]
fn threads_32bit() {
    let rates = [1_000_000_000, 2_000_000_000, 1_000_000_000, 500_000_000];
    let r = threaded(32, 1, &rates, 600, 0b111);
    assert!(r.reads > 1000, "{r:?}");
    assert_eq!(r.back, 0, "promise 1 across threads: {r:?}");
}

/// Promise 1: "A [`Clock::now`] that finished before another began (on one CPU, or on CPUs
/// whose counters agree to within [`LAG_NS`]) never returns more than it — through
/// recalibrations, updates, rebases ... The one exception ... where a 64-bit counter itself
/// steps back". One 64-bit counter shared by all threads (a `fetch_add` per read: it never
/// steps back), two reader threads, one writer alternating `recalibrate` (rates 1 kHz..100 GHz)
/// and `rebase(Instant::ZERO)`: a `now()` returns 1 ns less than one that finished before it
/// began, within a few hundred ms on this 2-vCPU AMD EPYC KVM guest (e.g. 17 172 587 419 after
/// 17 172 587 420; with `update` and `recalibrate`, or `update` and `rebase`, none in the same
/// time). No single-threaded sequence or stall at a counter call reproduced it.
#[test]
fn finding_threads_64bit_recalibrate_rebase_back_1ns() {
    for _ in 0..10 {
        let r = threaded(64, 7, &WIDE_RATES, 500, 0b110);
        assert_eq!(r.back, 0, "promise 1 across threads: {r:?}");
    }
}

/// Promises 1 and 3 ("A reader stalled anywhere returns a time read within its call") and 5,
/// across threads: a 16-bit counter at 1 MHz shared by all threads (every read advances it a
/// tick), two reader threads, one writer calling only `update()` in a loop. When the writer
/// thread is descheduled for about a wrap (65 536 reads, a few ms on a loaded 2-vCPU guest),
/// a reader returns a time about half a wrap below one already returned: e.g. 15 227 673 000
/// ns after 15 259 971 000 (32.3 ms back). Probably
/// `finding_late_by_almost_a_wrap_goes_back`'s zone, reached by a reader that read the clock's
/// state before another reader latched the late timeline.
#[test]
fn finding_threads_16bit_back_half_a_wrap() {
    for _ in 0..10 {
        let r = threaded(16, 1, &[1_000_000_000], 500, 0b001);
        assert_eq!(r.back, 0, "promise 1 across threads: {r:?}");
    }
}

// ---------------------------------------------------------------------------------------
// Delay: never short, through what its docs allow — a thread that migrates between two CPUs
// whose counters disagree (once the wait has begun on the leading one), counter resets that
// never come back, narrow counters.
// ---------------------------------------------------------------------------------------

/// Runs `wait_ticks(n)` on a counter of `bits` bits whose true time advances by the
/// schedule's steps; each read is taken on the leading CPU or on one `lag` ticks behind (the
/// schedule's choice), except the first reads up to and including the first change, which are
/// on the leading one. Returns (true ticks from the first change to the end, reads).
fn delay_two_lines(bits: u32, n: u64, lag: u64, steps: &[(bool, u64)]) -> (u64, u64) {
    let mask = if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    let t = Cell::new(1_000_000u64);
    let reads = Cell::new(0u64);
    let first: Cell<Option<u64>> = Cell::new(None);
    let changed_at: Cell<Option<u64>> = Cell::new(None);
    let counter = FnCounter::new(
        || {
            let i = reads.get();
            reads.set(i + 1);
            assert!(i < 5_000_000, "the wait did not end");
            let (low, dt) = steps[(i as usize) % steps.len()];
            t.set(t.get() + dt);
            let lead = t.get() & mask;
            match changed_at.get() {
                None => {
                    // Up to the first change: the leading CPU.
                    match first.get() {
                        None => first.set(Some(lead)),
                        Some(f) if f != lead => changed_at.set(Some(t.get())),
                        Some(_) => {}
                    }
                    lead
                }
                Some(_) if low => t.get().wrapping_sub(lag) & mask,
                Some(_) => lead,
            }
        },
        bits,
    );
    let delay = Delay::new(&counter, freq(1_000_000_000_000));
    delay.wait_ticks(n);
    (t.get() - changed_at.get().unwrap_or(t.get()), reads.get())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, failure_persistence: None, ..ProptestConfig::default() })]

    /// A wait that migrates between two CPUs (one `lag` ticks behind) any number of times is
    /// never short: "progress is counted only past the readings the counter stepped back
    /// from ... The climb back is never progress" (issue case 5).
    #[test]
    fn delay_two_cpus_64(
        n in 1u64..5_000,
        lag in prop_oneof![1u64..10, 1u64..10_000, 1u64..1 << 40],
        steps in prop::collection::vec((any::<bool>(), prop_oneof![Just(0u64), 0u64..3, 0u64..100]), 1..40),
    ) {
        prop_assume!(steps.iter().any(|s| s.1 > 0));
        let (waited, _) = delay_two_lines(64, n, lag, &steps);
        prop_assert!(waited >= n, "waited {} true ticks for {}", waited, n);
    }

    /// The same on a 16-bit counter (the CPUs less than half a wrap apart, each step less
    /// than half a wrap).
    #[test]
    fn delay_two_cpus_16(
        n in 1u64..200_000,
        lag in 1u64..31_000,
        steps in prop::collection::vec((any::<bool>(), prop_oneof![Just(0u64), 0u64..3, 0u64..1000]), 1..40),
    ) {
        prop_assume!(steps.iter().any(|s| s.1 > 0));
        let (waited, _) = delay_two_lines(16, n, lag, &steps);
        prop_assert!(waited >= n, "waited {} true ticks for {}", waited, n);
    }

    /// Resets back that never come back up (each lands below everything read before): the
    /// wait still ends, and counts only true time.
    #[test]
    fn delay_resets(
        n in 1u64..5_000,
        resets in prop::collection::vec((1u64..200, 1u64..1_000_000), 0..6),
        step in 1u64..50,
    ) {
        let t = Cell::new(0u64); // true ticks since the first read
        let base = Cell::new(1u64 << 40); // where the counter reads true time 0
        let reads = Cell::new(0u64);
        let plan = RefCell::new(resets.clone());
        let changed = Cell::new(None);
        let first = Cell::new(None);
        let counter = FnCounter::new(|| {
            reads.set(reads.get() + 1);
            assert!(reads.get() < 1_000_000, "the wait did not end");
            t.set(t.get() + step);
            if changed.get().is_some() {
                let mut p = plan.borrow_mut();
                if let Some(&(at, back)) = p.first() {
                    if reads.get() % at == 0 {
                        p.remove(0);
                        // Below everything read so far.
                        base.set(base.get() - t.get() - back);
                    }
                }
            }
            let v = base.get() + t.get();
            match first.get() {
                None => first.set(Some(v)),
                Some(f) if f != v && changed.get().is_none() => changed.set(Some(t.get())),
                _ => {}
            }
            v
        }, 64);
        Delay::new(&counter, freq(1_000_000_000)).wait_ticks(n);
        let waited = t.get() - changed.get().unwrap();
        prop_assert!(waited >= n, "waited {} for {}", waited, n);
    }
}

/// Issue case 5 as it was reported, and `Clock::delay()` before `start()`: a wait before the
/// clock is started counts ticks at `Frequency::MAX_HZ`, so it is never short whatever the
/// counter's rate; and `update_interval()` then is the shortest (at the fastest rate).
#[test]
fn delay_cases_and_before_start() {
    // A 16-bit counter at 1 MHz: one read 2000 ticks low in a 25 ms wait.
    let t = Cell::new(0u64);
    let reads = Cell::new(0u64);
    let counter = FnCounter::new(
        || {
            reads.set(reads.get() + 1);
            t.set(t.get() + 1);
            if reads.get() == 5 {
                t.get().wrapping_sub(2000) & 0xffff
            } else {
                t.get() & 0xffff
            }
        },
        16,
    );
    Delay::new(&counter, freq(1_000_000_000)).wait_ns(25_000_000);
    assert!(
        t.get() >= 25_000,
        "a 25 ms wait ended after {} ticks",
        t.get()
    );

    // Before start.
    let ticks = Cell::new(0u64);
    let counter = FnCounter::new(
        || {
            ticks.set(ticks.get() + 1);
            ticks.get()
        },
        64,
    );
    let clock = Clock::uninit(&counter);
    clock.delay().wait_ns(1_000);
    // 1 µs at 100 GHz: 100 000 ticks at least (whatever the counter's real rate).
    assert!(ticks.get() >= 100_000, "{}", ticks.get());
    for bits in [8u32, 16, 24, 32, 48, 64] {
        let c = Clock::uninit(FnCounter::new(|| 0, bits));
        let before = c.update_interval();
        assert!(
            before > core::time::Duration::ZERO || bits < 12,
            "{bits}: {before:?}"
        );
        for mhz in [1_000_000u64, 1_000_000_000_000, 100_000_000_000_000] {
            let started = Clock::new(FnCounter::new(|| 0, bits), freq(mhz));
            assert!(
                before <= started.update_interval(),
                "{bits} bits: {before:?} before start, {:?} at {mhz} mHz",
                started.update_interval()
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// ExtendedTimer: a reader interrupted anywhere by the wrap interrupt (and by time passing)
// returns a count it read — the true count at some moment inside its call.
// ---------------------------------------------------------------------------------------

/// A narrow timer with a software-cleared wrap flag (a peripheral's status flag), whose
/// calls may be interrupted: time passes and the wrap interrupt runs, as the schedule says.
struct SimTimer {
    bits: u32,
    /// True time in ticks.
    t: Cell<u64>,
    flag: Cell<bool>,
    in_irq: Cell<bool>,
    hook: Cell<Option<&'static dyn Fn()>>,
}

impl SimTimer {
    fn stall(&self) {
        if !self.in_irq.get() {
            if let Some(h) = self.hook.get() {
                h();
            }
        }
    }
}

impl NarrowTimer for SimTimer {
    fn count(&self) -> u32 {
        self.stall();
        let v = (self.t.get() & ((1u64 << self.bits) - 1)) as u32;
        self.stall();
        v
    }
    fn bits(&self) -> u32 {
        self.bits
    }
    fn wrap_pending(&self) -> bool {
        self.stall();
        let f = self.flag.get();
        self.stall();
        f
    }
    fn clear_wrap(&self) {
        self.flag.set(false);
    }
}

struct TimerWorld {
    sim: &'static SimTimer,
    ext: &'static ExtendedTimer<&'static SimTimer>,
    schedule: RefCell<Vec<(u64, bool)>>,
}

impl TimerWorld {
    fn irq(&self) {
        if self.sim.flag.get() {
            self.sim.in_irq.set(true);
            self.ext.on_wrap();
            self.sim.in_irq.set(false);
        }
    }
    /// Time passes by `d` ticks; the wrap interrupt runs before a second wrap (the cadence
    /// rule), and the hardware sets the flag at each wrap.
    fn pass(&self, d: u64) {
        let wrap = 1u64 << self.sim.bits;
        let mut d = d.min(8 * wrap); // a few wraps at most (each with its interrupt)
        while d > 0 {
            let to_wrap = wrap - (self.sim.t.get() % wrap);
            if d < to_wrap {
                self.sim.t.set(self.sim.t.get() + d);
                return;
            }
            if self.sim.flag.get() {
                self.irq(); // the interrupt must finish before the timer wraps again
            }
            self.sim.t.set(self.sim.t.get() + to_wrap);
            self.sim.flag.set(true);
            d -= to_wrap;
        }
    }
    fn on_stall(&self) {
        let next = self.schedule.borrow_mut().pop();
        if let Some((d, run_irq)) = next {
            self.pass(d);
            if run_irq {
                self.irq();
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, failure_persistence: None, ..ProptestConfig::default() })]

    /// Every `ticks()` returns the true count at some moment inside its call, whatever
    /// interrupts it, and counts never go back ("Each case is exact ... a reader stalled for any
    /// time between its reads ... still returns a count it read, or starts over").
    #[test]
    fn extended_timer_exact(
        bits in 1u32..=32,
        start in any::<u32>(),
        schedule in prop::collection::vec((prop_oneof![Just(0u64), 0u64..3, 0u64..1 << 33], any::<bool>()), 0..200),
        reads in 1usize..30,
    ) {
        let sim: &'static SimTimer = Box::leak(Box::new(SimTimer {
            bits,
            t: Cell::new(u64::from(start) & ((1u64 << bits) - 1)),
            flag: Cell::new(false),
            in_irq: Cell::new(false),
            hook: Cell::new(None),
        }));
        let ext: &'static ExtendedTimer<&'static SimTimer> = Box::leak(Box::new(ExtendedTimer::new(sim)));
        let world: &'static TimerWorld = Box::leak(Box::new(TimerWorld { sim, ext, schedule: RefCell::new(schedule) }));
        let hook: &'static dyn Fn() = Box::leak(Box::new(move || world.on_stall()));
        sim.hook.set(Some(hook));
        let width = (bits + 31).min(64);
        let mask = if width >= 64 { u64::MAX } else { (1u64 << width) - 1 };
        let mut last = 0u64;
        for _ in 0..reads {
            let before = sim.t.get();
            let v = ext.ticks();
            let after = sim.t.get();
            prop_assert!(after <= mask);
            prop_assert!(before <= v && v <= after, "read {} outside [{}, {}] (bits {})", v, before, after, bits);
            prop_assert!(v >= last, "back: {} after {}", v, last);
            last = v;
            world.on_stall();
        }
        prop_assert_eq!(ext.bits(), width);
    }
}

// ---------------------------------------------------------------------------------------
// Findings: promises the crate does not keep, each shrunk to a deterministic case. Run with
// `cargo test -p baretime --features std --test adversary -- --ignored`.
// ---------------------------------------------------------------------------------------

/// What promise 5 says of a missed update nobody saw ("an update missed with nobody reading
/// past the deadline is not detected — a reading up to a wrap later is taken for one before
/// the deadline (or in the last write's handover), a whole wrap is lost for each one missed,
/// `update` returns `Ok`, and a reading may be below one handed out before by less than a wrap
/// period"), and the condition under which it is detected ("provided the clock is read at
/// least once per half `update_interval` ... while an update is overdue"), on `counter`:
/// updated at tick 1000, read `read_at` ticks later, then (the next update missed) read again
/// `short` ticks short of a whole wrap past that update — with no reading in between, and
/// with readings every quarter wrap.
///
/// This review first reported the unread case as a finding (a 16-bit counter at 1 MHz: 32 ms
/// back, `update` `Ok`; the README's 32-bit DWT at 400 MHz: 5.37 s back); no design can see a
/// wrap nobody read, and promise 5 now states the condition. These tests hold the clock to
/// what it states, both ways.
fn late_by_almost_a_wrap(bits: u32, millihz: u64, read_at: u64, short: u64) {
    let wrap = 1u64 << bits;
    let period_ns = u128::from(wrap) * 1_000_000_000_000 / u128::from(millihz);
    // Unread: the wrap is lost, undetected, by less than a wrap period back.
    let hand = Hand::new(0, bits);
    let clock = Clock::new(&hand, freq(millihz));
    hand.value.set(1_000);
    assert_eq!(clock.update(), Ok(()));
    hand.value.set(1_000 + read_at);
    let a = clock.now();
    hand.value.set((1_000 + wrap - short) & (wrap - 1));
    let b = clock.now();
    assert!(
        u128::from(a.as_nanos().saturating_sub(b.as_nanos())) < period_ns,
        "promise 5: back by less than a wrap period: {b:?} after {a:?}"
    );
    assert_eq!(
        clock.update(),
        Ok(()),
        "promise 5: undetected, `update` returns Ok"
    );
    assert_eq!(clock.health().late_updates, 0);
    // Read every quarter wrap meanwhile: detected, and never back.
    let hand = Hand::new(0, bits);
    let clock = Clock::new(&hand, freq(millihz));
    hand.value.set(1_000);
    assert_eq!(clock.update(), Ok(()));
    let mut last = clock.now();
    let mut t = 1_000u64;
    let end = 1_000 + wrap - short;
    while t < end {
        t = (t + wrap / 4).min(end);
        hand.value.set(t & (wrap - 1));
        let v = clock.now();
        assert!(
            v >= last,
            "promise 1: now() {v:?} after {last:?} (read every quarter wrap)"
        );
        last = v;
    }
    assert_eq!(
        clock.update(),
        Err(ClockError::Late),
        "promise 5: read every quarter wrap, the missed update is detected"
    );
    assert_eq!(clock.health().late_updates, 1);
    assert!(clock.now() >= last);
}

/// A 16-bit counter at 1 MHz: read at 33 ms, then 10 ticks short of a wrap past the update.
#[test]
fn late_by_almost_a_wrap_16bit() {
    late_by_almost_a_wrap(16, 1_000_000_000, 32_000, 10);
}

/// The README's quick-start counter, a 32-bit DWT at 400 MHz: read at 5.368 s, then 15 000
/// ticks (37.5 µs) short of a wrap past the update.
#[test]
fn late_by_almost_a_wrap_dwt() {
    late_by_almost_a_wrap(32, 400_000_000_000, (1 << 31) - 41_000, 15_000);
}

/// Promise 2: "Nor does time fall behind the counter: however many `update`s and
/// `recalibrate`s run ... a reading is less than 2 ns below the counter's ticks at the rates
/// in force (each rate from its write's close point, a handover margin after the write read
/// the counter)". Promise 5: updates spaced by exactly `update_interval()`, "from the start of
/// one call to the start of the next", are never late.
///
/// A 16-bit counter at 1 MHz: `update()` 10 µs after the start (inside the start's handover:
/// it returns `Ok` and does nothing), then `recalibrate(2 MHz)` exactly `update_interval()`
/// (32 745 ticks) later. It is not late, but the new rate takes over 13 ticks after the
/// write read the counter instead of a handover margin (20 µs): 1000 ticks later the clock
/// reads 33 261 000 ns where the counter's time at the rates in force is 33 265 000 ns —
/// **4 µs below**, for good (9 µs with the first update 20 µs after the start; up to a
/// handover margin for a large ratio).
#[test]
fn finding_recalibrate_after_an_update_that_did_nothing() {
    let hand = Hand::new(0, 16);
    let clock = Clock::new(&hand, freq(1_000_000_000)); // 1 MHz
    let interval = clock.update_interval().as_nanos() as u64 / 1_000; // in ticks
    assert_eq!(interval, 32_745);
    hand.value.set(10);
    assert_eq!(clock.update(), Ok(()));
    hand.value.set(10 + interval);
    assert_eq!(clock.recalibrate(freq(2_000_000_000)), Ok(()));
    hand.value.set(10 + interval + 1_000);
    let now = clock.now().as_nanos();
    // 32 755 ticks, 20 of them past the write's reading, at 1 MHz; then 980 at 2 MHz.
    let counter_time = (10 + interval + 20) * 1_000 + 980 * 500;
    assert_eq!(counter_time, 33_265_000);
    assert!(
        now + 2 > counter_time,
        "promise 2: now() {now} is {} ns below the counter's time {counter_time}",
        counter_time - now
    );
}

/// Promise 6, as stated since this finding (it said "by more than its handover" at no rate):
/// "The handover reaches back two handover margins in ticks of the faster of the timeline's
/// rate and the one before it ...: after a recalibration to a rate R times slower, a reset back
/// by less than that ... is judged only against what was handed out: where that is not above
/// its time, the counter reads on the previous timeline, at its rate, until it reaches the
/// base again (time moves that slowly meanwhile, never back, and is not flagged)."
///
/// A 64-bit clock at 100 GHz recalibrated to 1 kHz at 0.1 s; nobody reads it; the counter is
/// reset back by 3 000 000 ticks (30 µs at 100 GHz, inside the 4 000 000-tick reach): `update`
/// is `Ok`, time reads on the 100 GHz timeline (10 ns per 1000 ticks) and is not flagged.
/// Reset back by 5 000 000 ticks (past the reach): `update` returns `Behind` and the clock
/// says so. (Found as `finding_update_before_base_accepted`: the docs named no rate.)
#[test]
fn a_reset_within_a_slowed_handover_reads_on_the_previous_timeline() {
    for (back, within) in [(3_000_000u64, true), (5_000_000, false)] {
        let hand = Hand::new(0, 64);
        let clock = Clock::new(&hand, freq(100_000_000_000_000));
        let tw = 10_000_000_000u64; // 0.1 s at 100 GHz
        hand.value.set(tw);
        assert_eq!(clock.recalibrate(freq(1_000_000)), Ok(()));
        hand.value.set(tw + 10);
        hand.value.set(tw - back);
        let update = clock.update();
        let a = clock.now();
        hand.add(1_000); // a second at 1 kHz, 10 ns at 100 GHz
        let b = clock.now();
        let health = clock.health();
        assert!(b >= a, "{back}: time went back, {a:?} then {b:?}");
        if within {
            assert_eq!(update, Ok(()), "{back}: inside the handover's reach");
            assert!(!health.counter_behind, "{back}: flagged inside the reach");
            let moved = (b - a).as_nanos();
            assert!(
                (9..=11).contains(&moved),
                "{back}: 1000 ticks on the 100 GHz timeline moved time {moved} ns"
            );
            assert!(
                b.as_nanos() <= 100_000_000,
                "{back}: {b:?} is past the base's 0.1 s"
            );
        } else {
            assert_eq!(update, Err(ClockError::Behind), "{back}: past the reach");
            assert!(health.counter_behind, "{back}: not flagged past the reach");
        }
    }
}

/// Promise 2, as stated since this finding (it said "20 µs, or one tick where a tick is
/// longer"): nothing reads ahead of the counter's time by more than [`MARK_GRANULE_NS`] plus
/// "a handover margin (20 µs rounded up to whole ticks: less than 20 µs plus one tick)",
/// except where `rebase` asks for it. A rebase to 1 ns past the clock's time, at rates from
/// 1 kHz to 10 MHz (at 54.368599 kHz, a tick of 18.39 µs, the margin is two ticks, 36.8 µs:
/// found as `finding_rebase_jumps_past_stated_margin`, over the old bound of 24 096 ns).
#[test]
fn a_rebase_just_past_the_clock_lands_within_a_granule_and_a_tick_rounded_margin() {
    let mut mhz = 1_000_000u64;
    let mut rates = vec![54_368_599u64, 77_660_000];
    while mhz <= 10_000_000_000 {
        rates.push(mhz);
        mhz = mhz * 13 / 10 + 7;
    }
    for mhz in rates {
        let tick_ns = (1_000_000_000_000u64).div_ceil(mhz);
        for ticks in [3u64, 1_000, 123_457] {
            let hand = Hand::new(0, 64);
            let clock = Clock::new(&hand, freq(mhz));
            hand.value.set(ticks);
            let at = clock.now().as_nanos() + 1;
            assert_eq!(clock.rebase(Instant::from_nanos(at), freq(mhz)), Ok(()));
            let after = clock.now().as_nanos();
            assert!(after >= at, "{mhz} mHz: {after} below the rebase's {at}");
            assert!(
                after - at < MARK_GRANULE_NS + HANDOVER_NS + tick_ns,
                "promise 2 at {mhz} mHz: {after} is {} ns past the rebase's {at}",
                after - at
            );
        }
    }
}

/// Promise 6: a rebase continues from the clock's own time, which after a step back of the
/// counter by less than `LAG_NS` is the mark, up to a granule below the latest time handed
/// out (found by `model_64bit`: 100 GHz, 20 000 ns read, the counter reset to 0 — a reading
/// stands at the ceiling, 24 096 ns — then 300, 99 ticks past the base, where the timeline's
/// time is within `LAG_NS` of the mark: `rebase(0)` continues the timeline from 20 000 ns).
/// The docs said "or the latest time handed out, if later"; they now say the clock's time.
#[test]
fn a_rebase_after_a_small_step_back_continues_from_the_clock_time() {
    run_model(
        201,
        100_000_000_000_000,
        false,
        &[
            Op::Read,
            Op::Reset(0, 0),
            Op::Read,
            Op::Advance(3),
            Op::Rebase(0, 0, 100_000_000_000_000),
            Op::Advance(0),
        ],
    );
}

/// Promise 2: "A rebase to a time at or before the clock's continues the timeline (no jump,
/// however often it is repeated)" (and "no write loses the fraction of a nanosecond it closes
/// on"). Rebases that continue the timeline lose time when they come within a handover margin
/// of each other: `rebase(Instant::ZERO)` every 1000 ticks at 100 GHz, 300 times, on a counter
/// that moves only between them, leaves the clock 150 ns behind the counter (1500 ns after
/// 3000); with a counter that moves 1000 ticks per read, 31 ns after 3000. Updates and
/// recalibrations at the same spacing lose under 2 ns. (Whether the 2 ns bound covers
/// rebases is not said: the sentence lists `update`s and `recalibrate`s.)
#[test]
fn finding_repeated_rebase_loses_time() {
    let mhz = 100_000_000_000_000u64;
    let hand = Hand::new(0, 64);
    let clock = Clock::new(&hand, freq(mhz));
    for _ in 0..300 {
        hand.add(1_000);
        assert_eq!(clock.rebase(Instant::ZERO, freq(mhz)), Ok(()));
    }
    let now = clock.now().as_nanos();
    let counter_time = (units(hand.value.get(), mhz) / S) as u64;
    assert_eq!(counter_time, 3_000);
    assert!(
        now + 2 > counter_time,
        "now() {now} is {} ns below the counter's time {counter_time}",
        counter_time - now
    );
}

/// Promise 2: "a reading is less than 2 ns below the counter's ticks at the rates in force
/// (...; each tick length kept to 2^-64 ns, which adds at most 3 × 10⁻¹⁸ of the time ...)".
/// A 59-bit counter at 100 GHz updated every `update_interval()` (2^58 ticks less a margin):
/// after six updates the clock reads 17 293 822 568 982 700 ns where the counter's time is
/// 17 293 822 568 982 702.01 ns — 2.01 ns below, within 2 ns + 3 × 10⁻¹⁸ of the time (0.05
/// ns). Found as `finding_two_ns_bound_omits_the_scale_error`: the docs' bound left out the
/// rounding of the tick length.
#[test]
fn the_2_ns_bound_with_the_tick_lengths_rounding() {
    let mhz = 100_000_000_000_000u64;
    let hand = Hand::new(0, 59);
    let clock = Clock::new(&hand, freq(mhz));
    let interval = ticks_within(clock.update_interval().as_nanos() as u64, mhz);
    hand.add(1);
    let mut pos = 1u64;
    for _ in 0..6 {
        assert_eq!(clock.update(), Ok(()));
        hand.add(interval);
        pos += interval;
    }
    let now = i128::from(clock.now().as_nanos()) * S;
    let exact = units(pos, mhz);
    // 3 × 10⁻¹⁸ of the time, in 2^-32 ns units (exact / 2^32 ns × 3e-18 × 2^32).
    let rounding = exact * 3 / 1_000_000_000_000_000_000 + 1;
    assert!(
        now > exact - 2 * S - rounding,
        "now() is {} ns below the counter's time",
        (exact - now) as f64 / S as f64
    );
}

// ---------------------------------------------------------------------------------------
// Promises 1, 2 and 6 on two CPUs whose 64-bit counters agree to within LAG_NS: one thread
// that migrates between them (reads and writes on either), the lag changing over time.
// ---------------------------------------------------------------------------------------

#[derive(Clone, Debug)]
enum Lop {
    Advance(u64),
    Read(bool),
    Update(bool),
    /// Recalibrate on a CPU to a rate within 2x of the first one (per mille of it, 500..2000).
    Recalibrate(bool, u64),
    RebaseZero(bool),
    /// The lagging CPU's lag, in ns of the slowest rate used (below LAG_NS).
    Lag(u64),
}

fn lop() -> impl Strategy<Value = Lop> {
    prop_oneof![
        3 => prop_oneof![0u64..2_000, 0u64..100_000, 0u64..10_000_000].prop_map(Lop::Advance),
        5 => any::<bool>().prop_map(Lop::Read),
        2 => any::<bool>().prop_map(Lop::Update),
        2 => (any::<bool>(), 500u64..=2000).prop_map(|(b, r)| Lop::Recalibrate(b, r)),
        1 => any::<bool>().prop_map(Lop::RebaseZero),
        1 => (0u64..LAG_NS - 1_000).prop_map(Lop::Lag),
    ]
}

fn run_two_cpus(mhz0: u64, ops: &[Lop]) {
    let a = Cell::new(1u64 << 40); // the leading CPU's counter
    let lag = Cell::new(0u64); // the other's lag, ticks
    let on_b = Cell::new(false);
    let counter = FnCounter::new(
        || {
            if on_b.get() {
                a.get() - lag.get()
            } else {
                a.get()
            }
        },
        64,
    );
    let clock = Clock::new(&counter, freq(mhz0));
    let slowest = mhz0 / 2;
    let mut mhz = mhz0;
    // The leading counter's time at the rates in force: bounds, 2^-32 ns.
    let (mut e_lo, mut e_hi) = (0i128, 0i128);
    let mut h = 0u64;
    let mut rebases = 0i128;
    let mut last_write: Option<u64> = None;
    let mut log = vec![format!("mhz0 {mhz0}")];
    let settle = margin_ticks(mhz0 * 2).1 + 1; // a margin at the fastest rate allowed
    let adv = |d: u64, mhz: u64, e_lo: &mut i128, e_hi: &mut i128| {
        a.set(a.get() + d);
        *e_lo += units(d, mhz);
        *e_hi += units(d, mhz) + 1;
    };
    adv(settle, mhz, &mut e_lo, &mut e_hi);
    for op in ops {
        log.push(format!("{op:?} a={} lag={}", a.get(), lag.get()));
        match *op {
            Lop::Advance(ns) => adv(ticks_for(ns, mhz), mhz, &mut e_lo, &mut e_hi),
            Lop::Lag(ns) => lag.set(ticks_for(ns, slowest).saturating_sub(1)),
            Lop::Read(b) => {
                on_b.set(b);
                let r = clock.now().as_nanos();
                on_b.set(false);
                log.push(format!("  now() = {r}"));
                assert!(
                    r + MARK_GRANULE_NS >= h,
                    "promise 1: {r} after {h}\n{log:#?}"
                );
                let up = e_hi + i128::from(MARK_GRANULE_NS + HANDOVER_NS + tick_ns(slowest)) * S;
                assert!(
                    i128::from(r) * S <= up,
                    "promise 2: {r} ahead of the leading counter's time {}\n{log:#?}",
                    up / S
                );
                if !b {
                    assert!(
                        i128::from(r) * S > e_lo - 2 * S - rebases * S,
                        "promise 2: {r} below the leading counter's time {}\n{log:#?}",
                        e_lo / S
                    );
                }
                assert!(!clock.health().counter_behind, "promise 6: a CPU lagging by less than LAG_NS is not a counter behind\n{log:#?}");
                h = h.max(r);
            }
            Lop::Update(b) | Lop::Recalibrate(b, _) | Lop::RebaseZero(b) => {
                let new = match *op {
                    Lop::Recalibrate(_, pm) => mhz0 / 1000 * pm,
                    _ => mhz,
                };
                on_b.set(b);
                let r = match *op {
                    Lop::Update(_) => clock.update(),
                    Lop::Recalibrate(..) => clock.recalibrate(freq(new)),
                    _ => {
                        rebases += 1;
                        clock.rebase(Instant::ZERO, freq(new))
                    }
                };
                on_b.set(false);
                log.push(format!("  -> {r:?}"));
                assert_ne!(r, Err(ClockError::Busy), "promise 4\n{log:#?}");
                // A write from the lagging CPU may find the counter before the base of a
                // write made less than its lag and a handover ago (promise 6); otherwise Ok.
                let recent = last_write.is_some_and(|w| a.get() < w + lag.get() + 2 * settle);
                if r == Err(ClockError::Behind) {
                    assert!(
                        b && recent,
                        "a write on CPUs within LAG_NS refused\n{log:#?}"
                    );
                    continue;
                }
                assert_eq!(r, Ok(()), "{log:#?}");
                last_write = Some(a.get());
                // The new rate from a close point anywhere from the lagging reading to a
                // margin after the leading one; let it pass.
                let back = if b { lag.get() } else { 0 };
                let k = settle;
                let c_late = units(k, mhz) + units(0, new);
                let c_early = units(k, new) - units(back, mhz) + units(back, new);
                e_lo += c_late.min(c_early) - units(k, mhz) - 1;
                e_hi += c_late.max(c_early) - units(k, mhz) + 1;
                adv(k, mhz, &mut e_lo, &mut e_hi);
                mhz = new;
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    /// Two CPUs whose 64-bit counters agree to within LAG_NS (one thread migrating between
    /// them, reads and writes on either, recalibrations within 2x): promise 1 (at most a
    /// granule back), promise 2 (never ahead of the leading counter by more than a granule and
    /// a margin; on the leading CPU less than 2 ns below it), promise 6 (never a counter
    /// behind), promise 4 (never Busy).
    #[test]
    fn two_cpus_within_lag(
        mhz0 in prop_oneof![Just(1_000_000_000_000u64), Just(2_400_000_000_000), Just(100_000_000_000), 100_000_000_000u64..50_000_000_000_000],
        ops in prop::collection::vec(lop(), 1..40),
    ) {
        run_two_cpus(mhz0, &ops);
    }
}

/// Writes inside the previous write's handover (issue cases 4 and 8): a write that comes
/// within a handover margin of the last waits at most a margin of counter time, is never
/// refused, and `rebase(at = now())` then continues from `at` (promise 2: never more than a
/// granule and a margin past it). On a counter that moves one tick per read, at rates from
/// 1 kHz to 100 GHz and recalibrations by 1/16x to 16x.
#[test]
fn writes_inside_the_handover() {
    for mhz in [
        1_000_000u64,
        48_000_000,
        1_000_000_000,
        1_000_000_000_000,
        3_000_000_000_000,
        100_000_000_000_000,
    ] {
        for ratio in [1u64, 2, 16] {
            for slower in [false, true] {
                let new = if slower {
                    (mhz / ratio).max(1_000_000)
                } else {
                    (mhz * ratio).min(100_000_000_000_000)
                };
                let (_, mh) = margin_ticks(mhz.min(new));
                for k in [0u64, 1, 2, mh / 4, mh / 2, mh.saturating_sub(2), mh, mh + 2] {
                    for second in 0..3 {
                        let ticks = Cell::new(1u64 << 30);
                        let counter = FnCounter::new(
                            || {
                                ticks.set(ticks.get() + 1);
                                ticks.get()
                            },
                            64,
                        );
                        let clock = Clock::new(&counter, freq(mhz));
                        ticks.set(ticks.get() + ticks_for(1_000_000, mhz));
                        assert_eq!(clock.recalibrate(freq(new)), Ok(()));
                        ticks.set(ticks.get() + k);
                        let at = clock.now();
                        let before = ticks.get();
                        let r = match second {
                            0 => clock.rebase(at, freq(new)),
                            1 => clock.update(),
                            _ => clock.recalibrate(freq(mhz)),
                        };
                        let waited = ticks.get() - before;
                        assert_eq!(
                            r,
                            Ok(()),
                            "promise 4: {mhz} -> {new} mHz, write {second} {k} ticks after"
                        );
                        // Writers wait at most a handover margin of counter time (and the
                        // reads a write makes besides).
                        let margin = margin_ticks(mhz.max(new)).1;
                        assert!(
                            waited <= margin + 64,
                            "promise 4: waited {waited} ticks, margin {margin}"
                        );
                        let after = clock.now();
                        let allowed = MARK_GRANULE_NS
                            + HANDOVER_NS
                            + tick_ns(mhz.min(new))
                            + (units(waited + 2, mhz.min(new)) / S) as u64;
                        assert!(
                            after >= at && (after - at).as_nanos() as u64 <= allowed,
                            "promise 2: {mhz} -> {new} mHz, write {second} {k} ticks after: {at:?} then {after:?}"
                        );
                    }
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, failure_persistence: None, ..ProptestConfig::default() })]

    /// "No panics on bad input": any width (0 and past 64 are clamped), a counter returning
    /// anything (even values past its width, against the contract), any rate, any call in any
    /// order, `Instant` and `Delay` arithmetic at the extremes.
    #[test]
    fn never_panics(
        bits in 0u32..70,
        values in prop::collection::vec(any::<u64>(), 1..30),
        calls in prop::collection::vec((0u8..9, any::<u64>(), rate()), 1..40),
        uninit in any::<bool>(),
    ) {
        let i = Cell::new(0usize);
        let counter = FnCounter::new(|| { i.set(i.get() + 1); values[i.get() % values.len()] }, bits);
        let clock = if uninit { Clock::uninit(&counter) } else { Clock::new(&counter, freq(1_000_000_000_000)) };
        for &(c, x, f) in &calls {
            match c {
                0 => { let _ = clock.now(); }
                1 => { let _ = clock.update(); }
                2 => { let _ = clock.recalibrate(freq(f)); }
                3 => { let _ = clock.rebase(Instant::from_nanos(x), freq(f)); }
                4 => { let _ = clock.start(freq(f)); }
                5 => { let _ = clock.deadline(Instant::from_nanos(x)).map(|d| clock.check(d)); }
                6 => {
                    let a = clock.raw();
                    let b = clock.raw();
                    let _ = clock.delta(a, b);
                    let _ = clock.update_interval();
                    let _ = clock.health();
                }
                7 => {
                    let t = Instant::from_nanos(x);
                    let d = core::time::Duration::from_nanos(f);
                    let _ = (t + d, t - d, t - Instant::from_nanos(f), t.checked_add(d), t.checked_sub(d), t.to_string());
                }
                _ => {
                    let s = clock.scale();
                    let _ = (s.ns_to_ticks_ceil(x), s.ticks_to_ns(x), s.checked_ticks_to_ns(x));
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, failure_persistence: None, ..ProptestConfig::default() })]

    /// `Deadline` / `Clock::check`: "0 early wakes is the check's promise": a wake at the
    /// armed tick (or anywhere) says `Fired` only when `now()` is at or past the instant, and
    /// re-arming from what it returns reaches the instant, through recalibrations by any
    /// ratio, updates and rebases between arming and the wake, on 16-, 32- and 64-bit counters.
    #[test]
    fn deadline_never_early(
        bits in prop_oneof![Just(16u32), Just(32), Just(64)],
        mhz in rate(),
        ahead_ns in prop_oneof![0u64..1_000, 0u64..1_000_000, 0u64..10_000_000_000],
        writes in prop::collection::vec((0u8..3, rate(), any::<bool>()), 0..4),
        early in 0u64..3,
    ) {
        let hand = Hand::new(1 << 10, bits);
        let clock = Clock::new(&hand, freq(mhz));
        hand.add(ticks_for(1_000_000, mhz).min(1 << (bits - 2)));
        // At most 20 update intervals ahead: a re-arm per half interval ("at most
        // ⌈remaining / H⌉ of these") keeps the loop short.
        let iv = clock.update_interval().as_nanos() as u64;
        let ahead_ns = ahead_ns % iv.saturating_mul(20).saturating_add(1);
        let mut bound = 2 * ahead_ns / (iv / 2).max(1) + 100;
        let at = clock.now() + core::time::Duration::from_nanos(ahead_ns);
        let mut deadline = clock.deadline(at).unwrap();
        let mut rearms = 0;
        let mut writes = writes.into_iter();
        loop {
            // Something happens between arming and the wake.
            if let Some((w, f, back)) = writes.next() {
                let _ = match w {
                    0 => clock.update(),
                    1 => clock.recalibrate(freq(f)),
                    _ => clock.rebase(if back { Instant::ZERO } else { clock.now() }, freq(f)),
                };
                // The rate changed: so did the interval, and the re-arms the rest may take.
                let remaining = at.saturating_duration_since(clock.now()).as_nanos() as u64;
                let half = (clock.update_interval().as_nanos() as u64 / 2).max(1);
                bound = rearms + 2 * remaining / half + 100;
                deadline = match clock.check(deadline) {
                    baretime::Wake::Fired => {
                        prop_assert!(clock.now() >= at);
                        break;
                    }
                    baretime::Wake::Rearm(d) => d,
                };
            }
            // The timer fires at the armed tick, or a little early ("Early is allowed").
            // (Only forward: a narrow counter never steps back.)
            let target = deadline.ticks().wrapping_sub(early) & hand.mask();
            let fwd = target.wrapping_sub(hand.value.get()) & hand.mask();
            hand.add(if fwd > 0 && fwd <= hand.mask() / 2 { fwd } else { 1 });
            // The wake handler keeps a narrow counter's cadence ("a wake handler is also a
            // good place for `Clock::update`: a deadline is never armed more than half an
            // update interval ahead").
            if bits < 64 {
                let _ = clock.update();
            }
            match clock.check(deadline) {
                baretime::Wake::Fired => {
                    let now = clock.now();
                    prop_assert!(now >= at, "Fired at {:?} before {:?}", now, at);
                    break;
                }
                baretime::Wake::Rearm(d) => {
                    deadline = d;
                    rearms += 1;
                    prop_assert!(rearms < bound, "not fired after {} re-arms", rearms);
                }
            }
        }
    }
}
