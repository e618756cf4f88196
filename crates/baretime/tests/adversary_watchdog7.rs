//! Round-7 outside attack on [`Watchdog`] (issue 28), written from the rustdoc of `Watchdog`,
//! `Watch`, `Unjudged`, `WatchdogHealth`, `Clock`, `Reference`, `CounterReference`,
//! `FnCounter` and `Frequency` and the README alone (not the function bodies). The simulated
//! world is `tests/adversary_watchdog6.rs`'s (copied): true time in picoseconds, a counter and
//! a reference as integrals of piecewise rates, scripted read costs and latches, delayed
//! reads, stalls; new here, a reference that *publishes* its count in bursts ([`RMode`]:
//! updated at regular or irregular times, in steps of k ticks) or through a cache.
//!
//! Targets, the rules added last:
//! 1. `Unjudged::ReferenceStill` across a check's own reads ("two reads of one value more than
//!    twice its step apart"): can honest references that update in bursts make it fire
//!    falsely, and forever?
//! 2. The narrow count's measurement (*Widths*: "three samples a short spin apart ... the two
//!    halves and the whole of which must agree", "the one count between the rates at the
//!    interval's two ends", disturbed → `WideBracket`, two counts fit → `TooLong`): two changes
//!    in one interval, right before / inside / right after a check; a staircase every period;
//!    a disturbance in every check (does "The fourth wide check in a row is judged" hold for
//!    disturbed measurements?).
//! 3. `bound_ppb` from each report on, in those worlds.
//!
//! Asserted, each from a sentence of the docs: **no false alarm** ("no check reports (c) or
//! (d)" at constant rates); **no endless NoVerdict** (no run of more than [`ENDLESS`] = 8, the
//! longest documented run, at constant rates; some check judged); **detection** (a change
//! above twice the sum of an interval's bound and the baseline's reported within three checks
//! plus one per disturbed check, the threshold taken as in round 6); **bound** (`bound_ppb` ≥
//! the clock's error from the report on; at every check at constant rates); **(c)'s rate**
//! within its own bound (family R); **no counter fault** while every rate is within 12 % of
//! every other; **clock** never back (promises 1–2 of [`Clock`]); health's counts; `TooLong`
//! not twice in a row unless the second's interval holds a change ("the next check at the
//! hook's period is judged"); no run of more than three `WideBracket`s (the findings' tests).
//!
//! Figures: `BARETIME_ADV_SEEDS=100 cargo test --release -p baretime --features std --test
//! adversary_watchdog7 -- --include-ignored --nocapture` (the ignored ones one at a time with
//! `--test-threads=1` for the counts) on a 2-vCPU Intel Xeon KVM guest (family 6 model 167),
//! 16 s in all; the default 8 seeds run in debug in a few seconds.
//!
//! | family | worlds / checks at 100 seeds | asserted | result at 100 seeds |
//! | --- | --- | --- | --- |
//! | R `honest_bursty_references_are_judged`: 64-bit counters 24 MHz–5 GHz, P 0.05–5 s (log-uniform), under a reference updated regularly in steps of exactly the ticks between updates: a 1 GHz pvclock every 1–100 µs (reads 30–100 ns), a paravirtual HPET every 1–100 µs, a 1–100 MHz count in steps of 2–64, a 32 kHz RTC behind a 20–300 µs bus (plain, or in steps of 1–4 ticks every 15–120 µs); 20 s steady, then ±0.1–10 % in an interval or inside a check | 502 worlds, 52 106 checks | no false alarm, no endless NoVerdict, detection, bound, (c)'s rate, no fault, clock | **held**: 0 `ReferenceStill` in 52 106 checks, longest NoVerdict run at constant rates 0; 476 of 476 changes above the threshold reported in time (p50 0.76–1.26 s by kind, max 9.96 s at P up to 5 s); 0 beyond the bound, 0 (c) outside its bound |
//! | R' `irregular_bursty_references_raise_no_false_alarm` (ignored; outside the docs' assumption): the same, updated at irregular times (one update per slot at a random offset: gaps 0–2× the slot), so one step can hold several learnt steps | 410 worlds, 42 679 checks | as R | **broke** in 178 of 410: 101 false (c)/(d) at constant rates, 107 (c) at a rate outside its own bound, 20 beyond `bound_ppb` at constant rates, 29 runs of 9–30 NoVerdicts (mostly `Unconfirmed`; 1 194 `ReferenceStill` in all), 12 beyond the bound after the report; 383 of 383 changes above the threshold still reported in time. Seed 46: a 5.12 MHz count in steps of 53 ticks at irregular times vs 29.5 MHz, P 0.29 s: `Changed` 64 450 ppb off at constant rates |
//! | R'' `cached_reference_reads_raise_no_false_alarm` (ignored; outside the assumption "latched inside its bracket"): HPET / 10 MHz, 5–50 % of reads return the last true read if it latched 10 µs–2 ms ago | 98 worlds, 10 767 checks | as R | **broke** in 35 of 98: 7 false (c), 9 (c) outside its bound, 13 beyond the bound at constant rates, 8 runs of 9–14 NoVerdicts (`ReferenceStill` on 1 501 checks, 14 %); 98 of 98 changes reported in time (max 13.5 s) |
//! | W1 `two_changes_in_one_interval_under_a_narrow_count`: round 6's narrow worlds (PIT, ACPI PM 24, HPET 32, RTC 32 kHz under 64-bit counters; 16–32-bit counters under HPET / 10 MHz), P 0.05–5 s; two changes of ±1–6 % in one interval, each right before (0–2 ms), inside (0–7 ms) or right after (8–20 ms) a check, or anywhere | 600 worlds, 62 828 checks | no false alarm, detection of the net change from the second, bound, no fault, clock, `TooLong` | **held** outside the narrow-counter finding: 598 of 598 nets above the threshold reported in time (p50 0.75 s, max 19.3 s); 50 `TooLong`, never twice at a constant rate. Seed 513 (18-bit 20 MHz counter, P 4.4 s, −1.9 % then −3.7 %): (c) 5.9 % off under a bound of 0.22 % (the finding below) |
//! | W2 `a_staircase_every_period_under_a_narrow_count`: the same worlds, from check 12 the rate moves every period (steps ±2–12 %, within ±6 % of the start), placed as W1's; then 30 s at the last rate | 400 worlds, 45 012 checks | no fault, clock, `TooLong`, no endless NoVerdict after, the bound 16+ periods after | **held** outside the findings: 0 counter faults, 0 steps back, 399 `TooLong` never twice where the second's interval held no change. Broke: 7 worlds of narrow counters left beyond the bound for good (seeds 10, 79, 139, 169, 206, 231, 371: the clock 0.4–5 % off under 23–724 ppb), seed 195 (PIT, P 3.5 s) 4 `WideBracket`s in a row |
//! | W3 `a_disturbance_in_every_check_under_a_narrow_count`: the same worlds at constant rates, a reference stall (1–10 ms) or an interrupt after a counter read (under a quarter wrap) in *every* check from the third, in its first reads or 0–7 ms in; again with the stall always 20 µs–2 ms in (the spin); again with a ±2–12 % change midway | 3 × 400 worlds, 3 × 33 536 checks | no false alarm, bound at every check, no endless NoVerdict, detection, bound after, clock | **held** outside the findings: 0 (c)/(d), 0 checks beyond `bound_ppb` at constant rates, every change above the threshold reported in time but for the narrow-counter finding (seeds 37, 53, 297, 305: 53 never reported in 15 checks). `WideBracket` on 0.75–1 % of checks |
//! | `finding_disturbed_measurements_keep_checks_wide` (found, fixed since): W3's runs of `WideBracket`s | W3, W2 | no run of more than three ("The fourth wide check in a row is judged") | **broke**: 8 of 400 worlds with the stall in the spin (runs of 4–12; seed 168, 25-bit 1.85 GHz counter vs HPET, P 0.527 s: 12 in a row, 64 of 113 checks wide), 3 of 400 with it half the time, W2 seed 195. Not endless: detection held (the docs count each as a disturbed check) **Since** (a disturbed measurement counts toward the run of wide checks; the fourth is counted at the rate in force or from what the measurement's parts allow): 0 |
//! | `finding_a_narrow_counter_of_many_wraps_a_period_is_aliased` (found, fixed since): 20–24-bit counters at 100 MHz–749 MHz under a 64-bit 10 MHz reference, P 0.5 / 1 / 4.265 s, ±1 / 3.2 / 4.1 / 10 % at 8 places in an interval, no jitter or delays; plus W1–W3's narrow-counter worlds | 384 worlds | the bound 20 checks after the change | **broke** in 176 of 384 (every world where the change moves the count by over about a wrap a period and the period holds ~90+ wraps; a 64-bit counter: 0): minimal, 20-bit 100 MHz counter (10.5 ms a wrap), P 4.265 s, +0.3 % at an interval's start, seed 0: `NoVerdict`, `Changed`, then `Steady` for good with the clock 2 450 291 ppb off under `bound_ppb` 15 **Since** (a narrow count the check cannot measure: a deviation at the hook's period is `TooLong` with `bound_ppb` at 12.5 %; where 12.5 % of the period is a whole wrap, every check is, the count cannot be watched; the narrow reference's spin carries its wraps, up to 8 ms): 0, the clock within `bound_ppb` wherever a verdict or refusal is given |
//!
//! To trace one world: `BARETIME_ADV_SEED=<seed> BARETIME_ADV_TRACE=1` (every check's verdict,
//! error, bound, reads and duration); `BARETIME_ADV_STEPS=n` keeps only W2's first n steps.

use std::cell::RefCell;
use std::rc::Rc;

use baretime::{
    Accuracy, Clock, Counter, Frequency, Instant, Reference, Source, Unjudged, Watch, Watchdog,
    MARK_GRANULE_NS,
};

const PS: i128 = 1_000_000_000_000;
/// `mHz × ps` per tick.
const TICK: i128 = 1_000 * PS;
const MS: u64 = 1_000_000_000;
const US: u64 = 1_000_000;
const SEC: u64 = 1_000_000_000_000;

fn seeds() -> u64 {
    std::env::var("BARETIME_ADV_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(8)
}

/// Seeds `0..n`, or only `BARETIME_ADV_SEED` where it is set (to trace one world with
/// `BARETIME_ADV_TRACE=1`).
fn seed_list(n: u64) -> Vec<u64> {
    match std::env::var("BARETIME_ADV_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        Some(one) => vec![one],
        None => (0..n).collect(),
    }
}

/// splitmix64.
fn mix(s: &mut u64) -> u64 {
    *s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *s;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn unif(s: &mut u64, lo: u64, hi: u64) -> u64 {
    if hi <= lo {
        return lo;
    }
    lo + mix(s) % (hi - lo + 1)
}

/// Log-uniform in [lo, hi].
fn logu(s: &mut u64, lo: f64, hi: f64) -> f64 {
    let u = (mix(s) >> 11) as f64 / (1u64 << 53) as f64;
    (lo.ln() + u * (hi.ln() - lo.ln())).exp()
}

/// One segment of a count's rate: from `at` ps, `rate` mHz.
#[derive(Clone, Copy, Debug)]
struct Seg {
    at: u64,
    rate: i128,
}

/// A count derived from true time: piecewise rates, steps, a phase and a width.
#[derive(Clone, Debug)]
struct Track {
    segs: Vec<Seg>,
    jumps: Vec<(u64, i128)>,
    phase: i128,
    start: i128,
    bits: u32,
}

impl Track {
    fn new(rate_mhz: u128, bits: u32, seed: &mut u64) -> Track {
        Track {
            segs: vec![Seg {
                at: 0,
                rate: rate_mhz as i128,
            }],
            jumps: Vec::new(),
            phase: i128::from(mix(seed) % (TICK as u64)),
            start: i128::from(mix(seed) >> 4),
            bits,
        }
    }

    /// From `at` on, `rate` mHz.
    fn set(&mut self, at: u64, rate: i128) {
        self.segs.retain(|s| s.at < at);
        self.segs.push(Seg { at, rate });
    }

    fn rate_at(&self, t: u64) -> i128 {
        self.segs.iter().rev().find(|s| s.at <= t).unwrap().rate
    }

    fn acc(&self, t: u64) -> i128 {
        let mut acc = self.phase;
        for (i, s) in self.segs.iter().enumerate() {
            if t <= s.at {
                break;
            }
            let end = self.segs.get(i + 1).map_or(t, |n| n.at.min(t));
            acc += s.rate * i128::from(end - s.at);
        }
        acc
    }

    /// Unwrapped count at `t`.
    fn raw(&self, t: u64) -> i128 {
        let jumps: i128 = self.jumps.iter().filter(|j| j.0 <= t).map(|j| j.1).sum();
        self.start + self.acc(t).div_euclid(TICK) + jumps
    }

    fn read(&self, t: u64) -> u64 {
        self.wrap(self.raw(t))
    }

    fn wrap(&self, r: i128) -> u64 {
        if self.bits >= 64 {
            r as u64
        } else {
            r.rem_euclid(1i128 << self.bits) as u64
        }
    }
}

/// A scripted world: true time in ps; every read costs time; counts latched inside reads.
struct World {
    t: u64,
    seed: u64,
    ctr: Track,
    refr: Track,
    ref_stated: Frequency,
    /// The reference's own rate outside its stand-stills (mHz).
    ref_mhz: i128,
    c_cost: u64,
    c_jit: u64,
    c_latch: u64,
    r_cost: u64,
    r_jit: u64,
    /// A delayed reference read: probability (ppm) and the longest delay (ps).
    r_delay: (u64, u64),
    /// One-off stalls of a reference read starting at or after `.0`, for `.1` ps (before its
    /// latch: an SMI).
    stalls: Vec<(u64, u64)>,
    /// One-off interrupts right after a counter read's latch, at or after `.0`, for `.1` ps.
    c_stalls: Vec<(u64, u64)>,
    /// Reads cost nothing (the wall family's readings, so that the wall clock and the clock
    /// read the same counter value).
    free: bool,
    n_ref_reads: u64,
    /// Stalls and interrupts consumed so far.
    n_stalls: u64,
    /// How the reference publishes its count (round 7: bursts, caches).
    rmode: RMode,
    /// The cache of [`RMode::Cached`]: the last true read's latch time and value.
    cache: Option<(u64, u64)>,
}

/// How the reference publishes its count.
#[derive(Clone, Copy, Debug)]
enum RMode {
    /// Its count at the latch.
    Plain,
    /// Updated at irregular times (one update in each slot of `gap` ps, at a hashed offset:
    /// gaps between 0 and `2·gap`), to its count then floored to a multiple of `k` ticks.
    /// `regular`: every `gap` ps exactly (each step the same number of ticks, ±1).
    Bursty { gap: u64, k: i128, regular: bool },
    /// With probability `ppm`, the value of the last true read if that read latched less than
    /// `age` ps ago (a cache in front of the reference).
    Cached { ppm: u64, age: u64 },
}

/// The update instant of [`RMode::Bursty`] in force at `t`.
fn last_update(t: u64, gap: u64, salt: u64) -> u64 {
    let off = |slot: u64| {
        let mut h = slot ^ salt;
        mix(&mut h) % gap
    };
    let slot = t / gap;
    let s0 = slot * gap + off(slot);
    if s0 <= t {
        s0
    } else {
        (slot - 1) * gap + off(slot - 1)
    }
}

impl World {
    fn new(seed: u64, c_mhz: u128, c_bits: u32, r_hz: u64, r_bits: u32) -> World {
        let mut s = seed;
        let ctr = Track::new(c_mhz, c_bits, &mut s);
        let refr = Track::new(u128::from(r_hz) * 1000, r_bits, &mut s);
        World {
            t: SEC,
            seed: s,
            ctr,
            refr,
            ref_stated: Frequency::exact_hz(r_hz).unwrap(),
            ref_mhz: i128::from(r_hz) * 1000,
            c_cost: 20_000,
            c_jit: 10_000,
            c_latch: 500,
            r_cost: 1_000_000,
            r_jit: 100_000,
            r_delay: (0, 0),
            stalls: Vec::new(),
            c_stalls: Vec::new(),
            free: false,
            n_ref_reads: 0,
            n_stalls: 0,
            rmode: RMode::Plain,
            cache: None,
        }
    }

    fn read_counter(&mut self) -> u64 {
        if self.free {
            return self.ctr.read(self.t);
        }
        let cost = unif(&mut self.seed, self.c_cost, self.c_cost + self.c_jit);
        let latch = self.t + cost * self.c_latch / 1000;
        let mut after = 0;
        if let Some(i) = self.c_stalls.iter().position(|s| s.0 <= self.t) {
            after = self.c_stalls.remove(i).1;
            self.n_stalls += 1;
        }
        self.t += cost + after;
        self.ctr.read(latch)
    }

    fn read_reference(&mut self) -> u64 {
        self.n_ref_reads += 1;
        let (mut before, mut after) = (0, 0);
        if self.r_delay.0 > 0 && unif(&mut self.seed, 0, 999_999) < self.r_delay.0 {
            let d = unif(&mut self.seed, 0, self.r_delay.1);
            if mix(&mut self.seed) & 1 == 0 {
                before = d;
            } else {
                after = d;
            }
        }
        if let Some(i) = self.stalls.iter().position(|s| s.0 <= self.t) {
            before += self.stalls.remove(i).1;
            self.n_stalls += 1;
        }
        let cost = unif(&mut self.seed, self.r_cost, self.r_cost + self.r_jit);
        let permille = unif(&mut self.seed, 0, 1000);
        let latch = self.t + before + cost * permille / 1000;
        self.t += before + cost + after;
        match self.rmode {
            RMode::Plain => self.refr.read(latch),
            RMode::Bursty { gap, k, regular } => {
                let u = if regular {
                    latch / gap * gap
                } else {
                    last_update(latch, gap, self.refr.start as u64)
                };
                let raw = self.refr.raw(u).div_euclid(k) * k;
                self.refr.wrap(raw)
            }
            RMode::Cached { ppm, age } => {
                if let Some((at, v)) = self.cache {
                    if latch.saturating_sub(at) < age && unif(&mut self.seed, 0, 999_999) < ppm {
                        return v;
                    }
                }
                let v = self.refr.read(latch);
                self.cache = Some((latch, v));
                v
            }
        }
    }

    /// The counter's rate as the reference counts it, mHz.
    fn truth(&self) -> f64 {
        let c = self.ctr.rate_at(self.t) as f64;
        c * self.ref_stated.as_millihz() as f64 / self.ref_mhz as f64
    }
}

struct SimCounter(Rc<RefCell<World>>);
impl Counter for SimCounter {
    fn ticks(&self) -> u64 {
        self.0.borrow_mut().read_counter()
    }
    fn bits(&self) -> u32 {
        self.0.borrow().ctr.bits
    }
}

struct SimRef(Rc<RefCell<World>>);
impl Reference for SimRef {
    fn read(&mut self) -> u64 {
        self.0.borrow_mut().read_reference()
    }
    fn bits(&self) -> u32 {
        self.0.borrow().refr.bits
    }
    fn frequency(&self) -> Frequency {
        self.0.borrow().ref_stated
    }
    fn name(&self) -> &'static str {
        "sim"
    }
}

/// One check's record.
#[derive(Clone, Copy, Debug)]
struct Rec {
    /// True time at the check's start and end (ps).
    t0: u64,
    t1: u64,
    v: Watch,
    /// |clock's rate − the counter's rate as the reference counts it| (ppb) after the check.
    err: f64,
    bound: u64,
    /// The counter's rate as the reference counts it at the check's end (mHz).
    truth: f64,
}

struct Sim {
    w: Rc<RefCell<World>>,
    clock: Clock<SimCounter>,
    wd: Watchdog<SimRef>,
    last: Instant,
    recs: Vec<Rec>,
    /// `clock.update()` at least this often (narrow counters), ps; 0: never.
    update_every: u64,
    worst_jump_excess: i128,
    back_steps: u64,
}

impl Sim {
    fn new(world: World, start: Frequency) -> Sim {
        let narrow = world.ctr.bits < 64;
        let w = Rc::new(RefCell::new(world));
        let clock = Clock::new(SimCounter(w.clone()), start);
        let wd = Watchdog::new(SimRef(w.clone()), start);
        let update_every = if narrow {
            (clock.update_interval().as_nanos() as u64).saturating_mul(1000) / 2
        } else {
            0
        };
        let last = clock.now();
        Sim {
            w,
            clock,
            wd,
            last,
            recs: Vec::new(),
            update_every: update_every.max(if narrow { 10 * US } else { 0 }),
            worst_jump_excess: i128::MIN,
            back_steps: 0,
        }
    }

    fn now(&mut self) -> Instant {
        let n = self.clock.now();
        if n < self.last {
            self.back_steps += 1;
        }
        self.last = self.last.max(n);
        n
    }

    fn advance(&mut self, ps: u64) {
        if self.update_every == 0 {
            self.w.borrow_mut().t += ps;
            return;
        }
        let mut left = ps;
        while left > 0 {
            let d = left.min(self.update_every);
            self.w.borrow_mut().t += d;
            left -= d;
            let _ = self.clock.update();
            self.now();
        }
    }

    fn check(&mut self, stalled: bool) -> Watch {
        let mhz0 = self.clock.scale().millihz();
        let (tb, stalls0) = {
            let w = self.w.borrow();
            (w.t, w.n_stalls)
        };
        let before = self.now();
        let (t0, reads0) = {
            let w = self.w.borrow();
            (w.t, w.n_ref_reads)
        };
        let v = self.wd.check(&self.clock);
        let (t1, reads1) = {
            let w = self.w.borrow();
            (w.t, w.n_ref_reads)
        };
        let after = self.now();
        let ta = self.w.borrow().t;
        let stalled = stalled || self.w.borrow().n_stalls != stalls0;
        let mhz1 = self.clock.scale().millihz();
        {
            let w = self.w.borrow();
            let ticks = w.ctr.raw(ta) - w.ctr.raw(tb);
            let slow = i128::from(mhz0.min(mhz1));
            let allowed =
                ticks * PS / slow + i128::from(MARK_GRANULE_NS) + 20_000 + 2 * PS / slow + 2;
            let moved = i128::from((after - before).as_nanos() as u64);
            self.worst_jump_excess = self.worst_jump_excess.max(moved - allowed);
        }
        let truth = self.w.borrow().truth();
        let err = (mhz1 as f64 - truth).abs() / truth * 1e9;
        if std::env::var("BARETIME_ADV_TRACE").is_ok() {
            eprintln!(
                "  #{} t {:.6} s: {v:?} err {err:.0} bound {} reads {} took {:.3} ms{}",
                self.recs.len(),
                t1 as f64 / SEC as f64,
                self.wd.health().bound_ppb,
                reads1 - reads0,
                (t1 - t0) as f64 / MS as f64,
                if stalled { " (disturbed)" } else { "" }
            );
        }
        self.recs.push(Rec {
            t0,
            t1,
            v,
            err,
            bound: self.wd.health().bound_ppb,
            truth,
        });
        v
    }

    /// `n` checks every `period` ps (± `jit` ps).
    fn run(&mut self, n: usize, period: u64, jit: u64) {
        for _ in 0..n {
            let p = {
                let mut w = self.w.borrow_mut();
                unif(&mut w.seed, period.saturating_sub(jit), period + jit)
            };
            self.advance(p);
            self.check(false);
        }
    }

    /// Health's counts add up to the checks and match the verdicts seen.
    fn counts_agree(&self) -> bool {
        let h = self.wd.health();
        let count = |f: fn(&Watch) -> bool| self.recs.iter().filter(|r| f(&r.v)).count() as u64;
        h.checks == self.recs.len() as u64
            && h.no_verdict == count(|v| matches!(v, Watch::NoVerdict(_)))
            && h.steady == count(|v| matches!(v, Watch::Steady { .. }))
            && h.changed == count(|v| matches!(v, Watch::Changed { .. }))
            && h.counter_faults
                == count(|v| matches!(v, Watch::CounterStopped | Watch::CounterJumped { .. }))
    }
}

/// A start rate about `ppb_off` from `true_mhz`, stated with bound `bound` ppb (Measured),
/// widened to cover the rounding to millihertz (an honest start).
fn start_rate(true_mhz: f64, ppb_off: f64, bound: u64) -> Frequency {
    let mhz = ((true_mhz * (1.0 + ppb_off * 1e-9)).round() as u64).max(1_000_000);
    let actual = ((mhz as f64 - true_mhz).abs() / true_mhz * 1e9).ceil() as u64 + 1;
    Frequency::from_millihz(
        mhz,
        Source::Calibrated,
        Accuracy::Measured {
            uncertainty_ppb: bound.max(actual),
        },
    )
    .unwrap()
}

fn is_alarm(v: &Watch) -> bool {
    matches!(
        v,
        Watch::Changed { .. } | Watch::CounterStopped | Watch::CounterJumped { .. }
    )
}

fn is_fault(v: &Watch) -> bool {
    matches!(v, Watch::CounterStopped | Watch::CounterJumped { .. })
}

/// A check the docs count as disturbed (it stretches an interval by a period). `TooLong`
/// too: after a deviation widened `bound_ppb`, a check whose spin was disturbed cannot count
/// a PIT's wraps (*Widths*) and starts measuring again from its sample.
fn is_disturbed(v: &Watch) -> bool {
    matches!(
        v,
        Watch::NoVerdict(
            Unjudged::WideBracket
                | Unjudged::ReferenceStill
                | Unjudged::ReferenceJumped
                | Unjudged::TooShort
                | Unjudged::TooLong
        )
    )
}

/// The widest interval bound (ppb) of the Steady verdicts in `recs`.
fn widest_steady(recs: &[Rec]) -> u64 {
    recs.iter()
        .filter_map(|r| match r.v {
            Watch::Steady { rate } => Some(rate.accuracy().bound_ppb()),
            _ => None,
        })
        .max()
        .unwrap_or(0)
}

/// Percentile of `v` (sorted in place).
fn pct(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * p).round() as usize]
}

/// The narrow worlds of families A and B.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Pit,
    AcpiPm,
    Hpet32,
    Rtc,
    NarrowCounter,
}

/// A world of families A and B: a narrow reference under a 64-bit counter, or a narrow counter
/// under a 64-bit reference; the period; a description.
fn narrow_world(seed: u64) -> (World, Frequency, u64, Kind, String) {
    let mut s = seed.wrapping_mul(0x2545_f491_4f6c_dd1d) ^ 0xa7a6;
    let kind = match mix(&mut s) % 6 {
        0 | 1 => Kind::Pit,
        2 => Kind::AcpiPm,
        3 => Kind::Hpet32,
        4 => Kind::Rtc,
        _ => Kind::NarrowCounter,
    };
    let period = (logu(&mut s, 0.05, 5.0) * SEC as f64) as u64;
    let (mut w, desc) = if kind == Kind::NarrowCounter {
        // 16–32 bits at 1 kHz–5 GHz, a wrap of at least 2 ms (reads must bracket it).
        let (bits, hz) = loop {
            let bits = unif(&mut s, 16, 32) as u32;
            let hz = logu(&mut s, 1e3, 5e9) as u64;
            if (1u64 << bits) as f64 / hz as f64 >= 2e-3 {
                break (bits, hz);
            }
        };
        let (rname, rhz, rcost) = if mix(&mut s) & 1 == 0 {
            ("hpet", 14_318_180, 1_000_000)
        } else {
            ("10mhz", 10_000_000, 300_000)
        };
        let mut w = World::new(mix(&mut s), u128::from(hz) * 1000, bits, rhz, 64);
        w.r_cost = rcost;
        w.r_jit = rcost / 10;
        (w, format!("{bits}-bit {hz} Hz counter vs {rname}"))
    } else {
        let (rname, rhz, rbits, rcost) = match kind {
            Kind::Pit => ("pit", 1_193_182, 16, 2_500_000),
            Kind::AcpiPm => ("acpi_pm", 3_579_545, 24, 1_200_000),
            Kind::Hpet32 => ("hpet32", 14_318_180, 32, 800_000),
            _ => ("rtc32k", 32_768, 32, 1_500_000),
        };
        let hz = logu(&mut s, 24e6, 5e9) as u64;
        let mut w = World::new(mix(&mut s), u128::from(hz) * 1000, 64, rhz, rbits);
        w.r_cost = rcost;
        w.r_jit = rcost / 10;
        (w, format!("{rname} vs {hz} Hz counter"))
    };
    w.c_cost = unif(&mut s, 10_000, 50_000);
    w.c_jit = unif(&mut s, 0, 10_000);
    w.c_latch = unif(&mut s, 0, 1000);
    let bound = unif(&mut s, 20, 2_000);
    let off = unif(&mut s, 0, 2 * bound) as f64 - bound as f64;
    let start = start_rate(w.truth(), off, bound);
    let desc = format!("{desc}, P {:.3} s", period as f64 / SEC as f64);
    (w, start, period, kind, desc)
}

/// Checks in a run of `span` ps at `period`, at least `lo`.
fn checks_for(span: u64, period: u64, lo: usize, hi: usize) -> usize {
    ((span / period.max(1)) as usize).clamp(lo, hi)
}

/// What a change run found.
struct ChangeOutcome {
    /// Problems (empty: held).
    bad: Vec<String>,
    /// Seconds from the change to its report (None: not reported).
    detect_s: Option<f64>,
    /// Above the docs' threshold.
    above: bool,
    /// The first counter fault after a change within 12.5 %.
    fault: Option<String>,
    /// The first `Changed` whose rate lies outside its own bound.
    rate_off: Option<String>,
}

/// Runs `sim` steady for `steady` checks at the hook's `period` (± `jit`), changes the
/// counter's rate by `ppb` (signed), placed inside the next check's reads (`inside`: 0–7 ms
/// after its start, where the spin runs) or anywhere in the interval, and runs `after` checks. Judges detection, the bound from the
/// report on, no false alarm before, no counter fault, promises 1–2.
fn change_run(
    sim: &mut Sim,
    (steady, after): (usize, usize),
    (period, jit): (u64, u64),
    ppb: i128,
    inside: bool,
    s: &mut u64,
) -> ChangeOutcome {
    let mut bad = Vec::new();
    sim.run(steady, period, jit);
    let pre = &sim.recs[..];
    if let Some(r) = pre.iter().find(|r| is_alarm(&r.v)) {
        bad.push(format!("false alarm at constant rates: {r:?}"));
    }
    if let Some(r) = pre.iter().find(|r| r.err > r.bound as f64) {
        bad.push(format!(
            "err {:.0} > bound {} at constant rates ({r:?})",
            r.err, r.bound
        ));
    }
    let widest = widest_steady(pre);
    let b0 = pre.last().map_or(0, |r| r.bound);
    let threshold = 2.5 * (widest + b0) as f64 + 10.0;
    let above = (ppb.unsigned_abs() as f64) > threshold && widest > 0;
    // Place the change.
    let p = {
        let mut w = sim.w.borrow_mut();
        unif(&mut w.seed, period.saturating_sub(jit), period + jit)
    };
    let t_now = sim.w.borrow().t;
    let t_change = if inside {
        t_now + p + unif(s, 0, 7 * MS)
    } else {
        t_now + unif(s, 0, p)
    };
    {
        let mut w = sim.w.borrow_mut();
        let base = w.ctr.rate_at(t_now);
        w.ctr.set(t_change, base + base * ppb / 1_000_000_000);
    }
    sim.advance(p);
    sim.check(false);
    sim.run(after - 1, period, jit);
    // From the first check that ends after the change (one placed "inside" a check may fall
    // after its reads: then it is in the next interval).
    let first = sim.recs[steady..]
        .iter()
        .position(|r| r.t1 > t_change)
        .map_or(sim.recs.len(), |k| steady + k);
    let post = &sim.recs[first..];
    let reported = post
        .iter()
        .position(|r| matches!(r.v, Watch::Changed { .. }));
    let detect_s = reported.map(|k| (post[k].t1 - t_change) as f64 / SEC as f64);
    if above {
        let ok = reported
            .is_some_and(|k| k <= 2 + post[..k].iter().filter(|r| is_disturbed(&r.v)).count());
        if !ok {
            bad.push(format!(
                "{ppb:+} ppb above the threshold {threshold:.0} (widest steady {widest}, bound {b0}): \
                 reported at check {reported:?} after it, verdicts {:?}",
                post.iter().take(6).map(|r| r.v.token()).collect::<Vec<_>>()
            ));
        }
    }
    let fault = post
        .iter()
        .find(|r| is_fault(&r.v))
        .map(|r| format!("counter fault after a {ppb:+} ppb change: {r:?}"));
    if let Some(k) = reported {
        if let Some((i, r)) = post[k..]
            .iter()
            .enumerate()
            .find(|(_, r)| r.err > r.bound as f64)
        {
            bad.push(format!(
                "{ppb:+} ppb reported at check {k}; {i} checks later err {:.0} > bound {} ({:?})",
                r.err,
                r.bound,
                r.v.token()
            ));
        }
    }
    // (c)'s `rate`: "The new rate, measured over the confirming interval, with its bound" (the
    // report waits for an interval wholly after the change: the rate is the new one there).
    let rate_off = post.iter().find_map(|r| match r.v {
        Watch::Changed { rate, .. } => {
            let off = (rate.as_millihz() as f64 - r.truth).abs() / r.truth * 1e9;
            (off > rate.accuracy().bound_ppb() as f64 + 1e9 / r.truth + 1.0).then(|| {
                format!(
                    "{ppb:+} ppb: Changed to a rate {off:.0} ppb off the counter's, its bound {}",
                    rate.accuracy().bound_ppb()
                )
            })
        }
        _ => None,
    });
    if sim.back_steps > 0 || sim.worst_jump_excess > 0 {
        bad.push(format!(
            "{} steps back, jump excess {} ns",
            sim.back_steps, sim.worst_jump_excess
        ));
    }
    if !sim.counts_agree() {
        bad.push(format!("health {:?} disagrees", sim.wd.health()));
    }
    ChangeOutcome {
        bad,
        detect_s,
        above,
        fault,
        rate_off,
    }
}

/// The longest run of consecutive `NoVerdict`s in `recs` (the first check's `First` left out),
/// and the longest run of consecutive `WideBracket`s.
/// *Widths* (since this attack): where 12.5 % of the hook's period is a whole wrap of the
/// narrow count or more, a change may look steady, and a check that cannot measure the rate
/// itself is `TooLong` at the hook's period with `bound_ppb` at 12.5 %: such a count cannot be
/// watched. The worlds where that may be (the median interval against the narrow wrap).
fn whole_wrap(sim: &Sim) -> bool {
    let w = sim.w.borrow();
    let mut gaps: Vec<u64> = sim
        .recs
        .windows(2)
        .map(|p| p[1].t0.saturating_sub(p[0].t0))
        .collect();
    gaps.sort_unstable();
    let Some(&period) = gaps.get(gaps.len() / 2) else {
        return false;
    };
    let wrap_ps = |bits: u32, mhz: i128| {
        if bits >= 64 || mhz <= 0 {
            f64::INFINITY
        } else {
            2f64.powi(bits as i32) / (mhz as f64 / 1000.0) * 1e12
        }
    };
    let narrow = wrap_ps(w.ctr.bits, w.ctr.segs[0].rate).min(wrap_ps(w.refr.bits, w.ref_mhz));
    0.125 * period as f64 >= 0.9 * narrow
}

/// *Widths* (since this attack): a narrow count's deviation that neither the rate in force
/// nor the check's own measurement can tell from an alias is `TooLong`, and `bound_ppb`
/// covers any rate a change may make (12.5 %): an honest refusal, a verdict of its own.
fn refused(r: &Rec) -> bool {
    r.v == Watch::NoVerdict(Unjudged::TooLong) && r.bound >= 125_000_000 && r.err <= r.bound as f64
}

fn longest_runs(recs: &[Rec]) -> (usize, usize) {
    let (mut nv, mut wb, mut cur_nv, mut cur_wb) = (0, 0, 0, 0);
    for r in recs {
        match r.v {
            Watch::NoVerdict(Unjudged::First) => {}
            _ if refused(r) => {
                cur_nv = 0;
                cur_wb = 0;
            }
            Watch::NoVerdict(u) => {
                cur_nv += 1;
                cur_wb = if u == Unjudged::WideBracket {
                    cur_wb + 1
                } else {
                    0
                };
            }
            _ => {
                cur_nv = 0;
                cur_wb = 0;
            }
        }
        nv = nv.max(cur_nv);
        wb = wb.max(cur_wb);
    }
    (nv, wb)
}

/// Verdict tokens of `recs`, NoVerdicts by reason, as counts.
fn tally(recs: &[Rec]) -> std::collections::BTreeMap<String, usize> {
    let mut m = std::collections::BTreeMap::new();
    for r in recs {
        let k = match r.v {
            Watch::NoVerdict(u) => format!("{u:?}"),
            v => v.token().to_string(),
        };
        *m.entry(k).or_insert(0) += 1;
    }
    m
}

fn add_tally(
    into: &mut std::collections::BTreeMap<String, usize>,
    from: &std::collections::BTreeMap<String, usize>,
) {
    for (k, v) in from {
        *into.entry(k.clone()).or_insert(0) += v;
    }
}

/// The kinds of family R's references.
const R_KINDS: [&str; 6] = [
    "pvclock 1 GHz updated every 0-200 us",
    "k-tick steps at irregular times",
    "rtc32k behind a slow bus",
    "rtc32k bursty behind a slow bus",
    "cached reads",
    "paravirtual HPET updated every 0-200 us",
];

/// A world of family R: a 64-bit counter at 24 MHz–5 GHz under a reference that publishes
/// its count in bursts, behind a slow bus, or through a cache; the period 0.05–5 s.
fn bursty_world(seed: u64, regular: bool) -> (World, Frequency, u64, usize, String) {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x7e7e;
    let kind = (mix(&mut s) % R_KINDS.len() as u64) as usize;
    let period = (logu(&mut s, 0.05, 5.0) * SEC as f64) as u64;
    let hz = logu(&mut s, 24e6, 5e9) as u64;
    let (rhz, rbits) = match kind {
        0 => (1_000_000_000, 64),
        1 => (logu(&mut s, 1e6, 1e8) as u64, 64),
        2 | 3 => (32_768, 32),
        4 => (
            if mix(&mut s) & 1 == 0 {
                10_000_000
            } else {
                14_318_180
            },
            64,
        ),
        _ => (14_318_180, 64),
    };
    let mut w = World::new(mix(&mut s), u128::from(hz) * 1000, 64, rhz, rbits);
    let desc = match kind {
        0 => {
            let gap = (logu(&mut s, 1.0, 100.0) * US as f64) as u64;
            w.rmode = bursts(gap, rhz, regular);
            w.r_cost = unif(&mut s, 30_000, 100_000);
            format!(
                "pvclock, updates every {}{:.1} us",
                if regular { "" } else { "~" },
                gap as f64 / US as f64
            )
        }
        1 => {
            let k = unif(&mut s, 2, 64) as i128;
            // Regular: updated at every tick (the value floored to k: steps of exactly k).
            let gap = if regular {
                PS as u64 / rhz
            } else {
                (k as f64 * PS as f64 / rhz as f64 * logu(&mut s, 0.3, 3.0)) as u64
            };
            w.rmode = RMode::Bursty {
                gap: gap.max(1),
                k,
                regular,
            };
            w.r_cost = unif(&mut s, 50_000, 1_000_000);
            format!(
                "{rhz} Hz in steps of {k} at irregular times (slots {:.2} us)",
                gap as f64 / US as f64
            )
        }
        2 => {
            w.r_cost = (logu(&mut s, 20.0, 300.0) * US as f64) as u64;
            format!("rtc32k, reads {:.0} us", w.r_cost as f64 / US as f64)
        }
        3 => {
            let gap = (30.5 * logu(&mut s, 0.5, 4.0) * US as f64) as u64;
            w.rmode = bursts(gap, rhz, regular);
            w.r_cost = (logu(&mut s, 20.0, 300.0) * US as f64) as u64;
            format!(
                "rtc32k updated every {}{:.0} us, reads {:.0} us",
                if regular { "" } else { "~" },
                gap as f64 / US as f64,
                w.r_cost as f64 / US as f64
            )
        }
        4 => {
            let ppm = unif(&mut s, 50_000, 500_000);
            let age = (logu(&mut s, 10.0, 2000.0) * US as f64) as u64;
            w.rmode = RMode::Cached { ppm, age };
            w.r_cost = unif(&mut s, 300_000, 1_000_000);
            format!(
                "{rhz} Hz, {} % of reads cached up to {:.0} us",
                ppm / 10_000,
                age as f64 / US as f64
            )
        }
        _ => {
            let gap = (logu(&mut s, 1.0, 100.0) * US as f64) as u64;
            w.rmode = bursts(gap, rhz, regular);
            w.r_cost = 1_000_000;
            format!(
                "pv-hpet, updates every {}{:.1} us",
                if regular { "" } else { "~" },
                gap as f64 / US as f64
            )
        }
    };
    w.r_jit = w.r_cost / 10;
    w.c_cost = unif(&mut s, 10_000, 50_000);
    w.c_jit = unif(&mut s, 0, 10_000);
    w.c_latch = unif(&mut s, 0, 1000);
    let bound = unif(&mut s, 20, 2_000);
    let off = unif(&mut s, 0, 2 * bound) as f64 - bound as f64;
    let start = start_rate(w.truth(), off, bound);
    let desc = format!(
        "{desc} vs {hz} Hz counter, P {:.3} s",
        period as f64 / SEC as f64
    );
    (w, start, period, kind, desc)
}

/// A reference updated every `gap` ps: at irregular times (gaps 0–2·`gap`), to its count then;
/// or (`regular`) in steps of exactly the ticks `gap` holds, every that many ticks (the count
/// floored to them: steps never more than learnt, the docs' assumption).
fn bursts(gap: u64, rhz: u64, regular: bool) -> RMode {
    if regular {
        let k = (i128::from(gap) * i128::from(rhz) / PS).max(1);
        RMode::Bursty {
            gap: (PS as u64 / rhz).max(1),
            k,
            regular,
        }
    } else {
        RMode::Bursty { gap, k: 1, regular }
    }
}

/// What family R found in one world.
struct ROutcome {
    bad: Vec<String>,
    desc: String,
    kind: usize,
    checks: usize,
    tally: std::collections::BTreeMap<String, usize>,
    longest_nv: usize,
    detect_s: Option<f64>,
    above: bool,
}

/// The longest run of NoVerdicts family R and W accept at constant rates: the docs name no
/// figure; the longest documented run is an interval extended over eight checks
/// (`Unconfirmed`, "up to eight checks long"), and three wide checks before the fourth is
/// judged.
const ENDLESS: usize = 8;

fn run_r(seed: u64, regular: bool) -> ROutcome {
    let (w, start, period, kind, desc) = bursty_world(seed, regular);
    let mut s = seed ^ 0x5151;
    let ppb = {
        let p = logu(&mut s, 1e6, 1e8) as i128;
        if mix(&mut s) & 1 == 0 {
            p
        } else {
            -p
        }
    };
    let inside = mix(&mut s) & 1 == 0;
    let jit = period * unif(&mut s, 0, 2) / 100;
    let mut sim = Sim::new(w, start);
    let steady = checks_for(20 * SEC, period, 16, 60);
    let after = checks_for(40 * SEC, period, 16, 100);
    let mut out = change_run(
        &mut sim,
        (steady, after),
        (period, jit),
        ppb,
        inside,
        &mut s,
    );
    out.bad.extend(out.fault.take());
    out.bad.extend(out.rate_off.take());
    let (longest_nv, _) = longest_runs(&sim.recs[..steady]);
    if longest_nv > ENDLESS && !whole_wrap(&sim) {
        out.bad.push(format!(
            "a run of {longest_nv} NoVerdicts at constant rates: {:?}",
            tally(&sim.recs[..steady])
        ));
    }
    if !sim.recs[..steady]
        .iter()
        .any(|r| matches!(r.v, Watch::Steady { .. }))
    {
        out.bad.push(format!(
            "no check judged in {steady} at constant rates: {:?}",
            tally(&sim.recs[..steady])
        ));
    }
    ROutcome {
        bad: out.bad,
        desc: format!(
            "{desc}, {ppb:+} ppb {}",
            if inside { "inside" } else { "in an interval" }
        ),
        kind,
        checks: sim.recs.len(),
        tally: tally(&sim.recs),
        longest_nv,
        detect_s: out.detect_s,
        above: out.above,
    }
}

/// Family R (`Unjudged::ReferenceStill` across a check's reads, "two reads of one value more
/// than twice its step apart"): honest references that publish in bursts, at irregular
/// times, in steps of k ticks, behind a slow bus or a cache; constant rates for 20 s, then a
/// change of ±0.1–10 %. Asserts: no (c)/(d) before the change, no run of more than
/// [`ENDLESS`] NoVerdicts and some check judged at constant rates, the change above the
/// threshold reported within the docs' time, `bound_ppb` from the report on, no counter
/// fault after a change within 12.5 %, the clock never back.
fn family_r(kinds: &[usize], regular: bool) -> Vec<String> {
    let mut bad = Vec::new();
    let mut per_kind: Vec<(usize, usize, usize, usize, Vec<f64>)> =
        vec![(0, 0, 0, 0, Vec::new()); R_KINDS.len()];
    let mut all = std::collections::BTreeMap::new();
    for seed in seed_list(seeds() * 6) {
        let o = run_r(seed, regular);
        if !kinds.contains(&o.kind) {
            continue;
        }
        let k = &mut per_kind[o.kind];
        k.0 += 1;
        k.1 += o.checks;
        k.2 = k.2.max(o.longest_nv);
        if o.above {
            k.3 += 1;
        }
        k.4.extend(o.detect_s.filter(|_| o.above));
        add_tally(&mut all, &o.tally);
        for b in o.bad {
            bad.push(format!("seed {seed} ({}): {b}", o.desc));
        }
    }
    for (i, k) in per_kind.iter_mut().enumerate() {
        if k.0 > 0 {
            eprintln!(
                "R [{}]: {} worlds, {} checks, longest NoVerdict run {}, {} above the threshold, \
                 {} reported (p50 {:.2} s, max {:.2} s)",
                R_KINDS[i],
                k.0,
                k.1,
                k.2,
                k.3,
                k.4.len(),
                pct(&mut k.4.clone(), 0.5),
                pct(&mut k.4, 1.0)
            );
        }
    }
    eprintln!(
        "R ({}): verdicts {all:?}; {} failures",
        if regular { "regular" } else { "irregular" },
        bad.len()
    );
    bad
}

#[test]
#[ignore = "finding (outside the stated assumption \"the reference is latched inside its bracket\", which a cached read breaks): false (c) at constant rates in 7 of 98 worlds at BARETIME_ADV_SEEDS=100, runs of up to 14 NoVerdicts (ReferenceStill on 14 % of checks); every change above the threshold still reported (max 13.5 s); seed 1 (HPET, 5 % of reads cached up to 160 us, P 0.587 s): Changed to a rate 954 ppb off under its bound of 784"]
fn cached_reference_reads_raise_no_false_alarm() {
    let bad = family_r(&[4], true);
    assert!(bad.is_empty(), "{} failures: {bad:#?}", bad.len());
}

#[test]
fn honest_bursty_references_are_judged() {
    let bad = family_r(&[0, 1, 2, 3, 5], true);
    assert!(bad.is_empty(), "{} failures: {bad:#?}", bad.len());
}

#[test]
#[ignore = "finding (outside the stated assumption \"the counts step by no more than learnt\", which a reference updated at irregular times breaks while its learnt step, \"the smallest non-zero move between two consecutive reads\", says nothing of it): false (c) at constant rates and runs of 10-30 NoVerdicts; seed 46 (a 5.12 MHz reference in steps of 53 ticks at irregular times, slots 30.9 us, vs a 29.5 MHz counter, P 0.29 s): Changed 64 450 ppb off at constant rates; seed 7 (a paravirtual HPET updated every ~32 us): Changed; see the header for the count at 100 seeds"]
fn irregular_bursty_references_raise_no_false_alarm() {
    let bad = family_r(&[0, 1, 3, 5], false);
    assert!(bad.is_empty(), "{} failures: {bad:#?}", bad.len());
}

/// A change's instant near the check that starts at `tc`: right before it (0–2 ms), inside
/// its reads or spin (0–7 ms in), right after it (8–20 ms), or anywhere in the interval that
/// ends at `tc` and began at `t0`.
fn place(s: &mut u64, t0: u64, tc: u64) -> (u64, &'static str) {
    match mix(s) % 4 {
        0 => (
            tc - unif(s, 0, 2 * MS).min(tc - t0 - 1),
            "right before a check",
        ),
        1 => (tc + unif(s, 0, 7 * MS), "inside a check"),
        2 => (tc + unif(s, 8 * MS, 20 * MS), "right after a check"),
        _ => (unif(s, t0 + 1, tc), "in an interval"),
    }
}

/// Problems common to every run: the clock back, health's counts, `TooLong` twice in a row
/// at the hook's period ("the next check at the hook's period is judged"), a counter fault
/// while every rate stays within 12.5 % of every other.
fn common(sim: &Sim, faults_ok: bool) -> Vec<String> {
    let mut bad = Vec::new();
    if sim.back_steps > 0 || sim.worst_jump_excess > 0 {
        bad.push(format!(
            "{} steps back, jump excess {} ns",
            sim.back_steps, sim.worst_jump_excess
        ));
    }
    if !sim.counts_agree() {
        bad.push(format!("health {:?} disagrees", sim.wd.health()));
    }
    // The second's interval (from the first's reads to its own) holds no change of rate: a
    // change of more than a wrap's worth inside it may make it `TooLong` again ("two counts fit").
    let changes: Vec<u64> = sim.w.borrow().ctr.segs.iter().map(|g| g.at).collect();
    if let Some(i) = sim.recs.windows(2).position(|w| {
        matches!(w[0].v, Watch::NoVerdict(Unjudged::TooLong))
            && matches!(w[1].v, Watch::NoVerdict(Unjudged::TooLong))
            && !changes.iter().any(|&c| c > w[0].t0 && c <= w[1].t1)
            && !refused(&w[1])
            && !whole_wrap(sim)
    }) {
        bad.push(format!("TooLong twice in a row at checks {i}, {}", i + 1));
    }
    if !faults_ok {
        if let Some(r) = sim.recs.iter().find(|r| is_fault(&r.v)) {
            bad.push(format!("counter fault with every rate within 12 %: {r:?}"));
        }
    }
    bad
}

/// A change size for the widths family: ±1–6 % (two of them stay within 12.5 %).
fn size_w(s: &mut u64) -> i128 {
    let ppb = logu(s, 1e7, 6e7) as i128;
    if mix(s) & 1 == 0 {
        ppb
    } else {
        -ppb
    }
}

/// Family W1 (*Widths*): a narrow count (PIT, ACPI PM, HPET 32, RTC, 16–32-bit counters),
/// P 0.05–5 s; two changes of ±1–6 % in one interval, each right before, inside or right
/// after a check or anywhere in the interval. Asserts: no (c)/(d) before, no counter fault,
/// the net change above the threshold reported within three checks plus one per disturbed
/// check after the second change, `bound_ppb` from that report on, the clock never back,
/// `TooLong` never twice in a row.
fn run_w1(seed: u64) -> (Vec<String>, String, usize, Option<f64>, bool, usize) {
    let (w, start, period, _kind, desc) = narrow_world(seed ^ 0x7711);
    let mut s = seed ^ 0x7a7a;
    let mut sim = Sim::new(w, start);
    let steady = checks_for(20 * SEC, period, 12, 60);
    let after = checks_for(40 * SEC, period, 16, 100);
    sim.run(steady, period, 0);
    let mut bad = Vec::new();
    if let Some(r) = sim.recs.iter().find(|r| is_alarm(&r.v)) {
        bad.push(format!("false alarm at constant rates: {r:?}"));
    }
    let widest = widest_steady(&sim.recs);
    let b0 = sim.recs.last().map_or(0, |r| r.bound);
    let (a, b) = (size_w(&mut s), size_w(&mut s));
    let t0 = sim.w.borrow().t;
    let tc = t0 + period;
    let (mut c1, w1) = place(&mut s, t0, tc);
    let (mut c2, w2) = place(&mut s, t0, tc);
    if c2 < c1 {
        std::mem::swap(&mut c1, &mut c2);
    }
    c2 = c2.max(c1 + 1);
    let net = (1e9 * ((1.0 + a as f64 * 1e-9) * (1.0 + b as f64 * 1e-9) - 1.0)) as i128;
    {
        let mut w = sim.w.borrow_mut();
        let base = w.ctr.rate_at(t0);
        let r1 = base + base * a / 1_000_000_000;
        w.ctr.set(c1, r1);
        w.ctr.set(c2, r1 + r1 * b / 1_000_000_000);
    }
    sim.advance(period);
    sim.check(false);
    sim.run(after - 1, period, 0);
    let threshold = 2.5 * (widest + b0) as f64 + 10.0;
    let above = (net.unsigned_abs() as f64) > threshold && widest > 0;
    let first = sim.recs[steady..]
        .iter()
        .position(|r| r.t1 > c2)
        .map_or(sim.recs.len(), |k| steady + k);
    let post = &sim.recs[first..];
    let reported = post
        .iter()
        .position(|r| matches!(r.v, Watch::Changed { .. }));
    let detect = reported.map(|k| (post[k].t1 - c2) as f64 / SEC as f64);
    if above {
        let ok = reported
            .is_some_and(|k| k <= 2 + post[..k].iter().filter(|r| is_disturbed(&r.v)).count());
        if !ok {
            bad.push(format!(
                "net {net:+} ppb above the threshold {threshold:.0}: reported at check \
                 {reported:?} after the second change, verdicts {:?}",
                post.iter().take(8).map(|r| r.v.token()).collect::<Vec<_>>()
            ));
        }
    }
    if let Some(k) = reported {
        if let Some((i, r)) = post[k..]
            .iter()
            .enumerate()
            .find(|(_, r)| r.err > r.bound as f64)
        {
            bad.push(format!(
                "reported at check {k}; {i} checks later err {:.0} > bound {} ({:?})",
                r.err,
                r.bound,
                r.v.token()
            ));
        }
    }
    bad.extend(common(&sim, false));
    let too_long = sim.recs[steady..]
        .iter()
        .filter(|r| matches!(r.v, Watch::NoVerdict(Unjudged::TooLong)))
        .count();
    let desc = format!(
        "{desc}, {a:+} ppb {w1} then {b:+} ppb {w2}, {:.2} ms apart (net {net:+})",
        (c2 - c1) as f64 / MS as f64
    );
    (bad, desc, sim.recs.len(), detect, above, too_long)
}

/// Which finding a failure of the widths families belongs to: 1, a run of more than three
/// `WideBracket`s (`finding_disturbed_measurements_keep_checks_wide`); 2, the clock beyond
/// `bound_ppb` (or a change not reported in time) in a world of a narrow counter under a
/// 64-bit reference (`finding_a_narrow_counter_of_many_wraps_a_period_is_aliased`); 0,
/// anything else (asserted by the family's own test).
fn bucket(desc: &str, failure: &str) -> usize {
    if failure.contains("WideBrackets") {
        1
    } else if desc.contains("counter vs")
        && (failure.contains("err") || failure.contains("reported at check"))
    {
        2
    } else {
        0
    }
}

/// The failures of bucket `b` only.
fn only(bad: &[(usize, String)], b: usize) -> Vec<String> {
    bad.iter()
        .filter(|x| x.0 == b)
        .map(|x| x.1.clone())
        .collect()
}

fn family_w1() -> Vec<(usize, String)> {
    let mut bad = Vec::new();
    let (mut worlds, mut checks, mut above, mut tl) = (0, 0, 0, 0);
    let mut det = Vec::new();
    for seed in seed_list(seeds() * 6) {
        let (b, desc, n, d, ab, too_long) = run_w1(seed);
        worlds += 1;
        checks += n;
        tl += too_long;
        if ab {
            above += 1;
            det.extend(d);
        }
        bad.extend(
            b.into_iter()
                .map(|b| (bucket(&desc, &b), format!("seed {seed} ({desc}): {b}"))),
        );
    }
    eprintln!(
        "W1: {worlds} worlds, {checks} checks, {above} nets above the threshold, {} reported \
         (p50 {:.2} s, max {:.2} s after the second change); {tl} TooLong; {} failures",
        det.len(),
        pct(&mut det.clone(), 0.5),
        pct(&mut det, 1.0),
        bad.len()
    );
    bad
}

#[test]
fn two_changes_in_one_interval_under_a_narrow_count() {
    let bad = only(&family_w1(), 0);
    assert!(bad.is_empty(), "{} failures: {bad:#?}", bad.len());
}

/// Family W2: a staircase under a narrow count: from check 12 on, the counter's rate moves
/// every period to base·(1 + x), |x| ≤ 6 % and each step ±1–12 %, placed right before,
/// inside or right after a check or in the interval. No time or bound is promised while the
/// rate moves every period; asserted: no counter fault (every rate within 12 % of every
/// other), the clock never back, `TooLong` never twice in a row, no run of more than three
/// `WideBracket`s; then 30 s steady at the last rate: reported or steady, `bound_ppb` holding
/// from the first judged check two periods after the staircase on, and no endless NoVerdict.
fn run_w2(
    seed: u64,
) -> (
    Vec<String>,
    String,
    std::collections::BTreeMap<String, usize>,
) {
    let (w, start, period, _kind, desc) = narrow_world(seed ^ 0x2222);
    let mut s = seed ^ 0x2b2b;
    let mut sim = Sim::new(w, start);
    sim.run(12, period, 0);
    let base = sim.w.borrow().ctr.rate_at(0);
    let steps = checks_for(20 * SEC, period, 10, 60);
    // `BARETIME_ADV_STEPS=n`: only the first n steps (to shrink a world); the rest held.
    let keep = std::env::var("BARETIME_ADV_STEPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(usize::MAX);
    let mut x: i128 = 0;
    for i in 0..steps {
        let t0 = sim.w.borrow().t;
        let (at, _) = place(&mut s, t0, t0 + period);
        let nx = loop {
            let d = size_w(&mut s) * 2;
            let n = x + d;
            if n.abs() <= 60_000_000 {
                break n;
            }
        };
        if i >= keep {
            sim.advance(period);
            sim.check(false);
            continue;
        }
        x = nx;
        sim.w
            .borrow_mut()
            .ctr
            .set(at, base + base * x / 1_000_000_000);
        sim.advance(period);
        sim.check(false);
    }
    let calm_from = sim.recs.len() + 2;
    let tail = checks_for(30 * SEC, period, 16, 100);
    sim.run(tail, period, 0);
    let mut bad = common(&sim, false);
    let (_, wb) = longest_runs(&sim.recs);
    if wb > 3 {
        bad.push(format!("a run of {wb} WideBrackets"));
    }
    let (nv, _) = longest_runs(&sim.recs[calm_from..]);
    if nv > ENDLESS && !whole_wrap(&sim) {
        bad.push(format!(
            "a run of {nv} NoVerdicts at a constant rate after the staircase"
        ));
    }
    let judged = sim.recs[calm_from..]
        .iter()
        .position(|r| matches!(r.v, Watch::Steady { .. } | Watch::Changed { .. }));
    if let Some(j) = judged {
        // From the detection on: the first judged check wholly after the last step.
        let from = calm_from + j;
        let first_report = sim.recs[from..]
            .iter()
            .position(|r| matches!(r.v, Watch::Changed { .. }))
            .map(|k| from + k);
        if let Some(fr) = first_report {
            if let Some(r) = sim.recs[fr..].iter().find(|r| r.err > r.bound as f64) {
                bad.push(format!(
                    "after the staircase's report: err {:.0} > bound {} ({:?})",
                    r.err,
                    r.bound,
                    r.v.token()
                ));
            }
        }
    } else if !whole_wrap(&sim) {
        bad.push("nothing judged after the staircase".to_string());
    }
    // At least 16 periods at one rate: the last change is long detected, and the bound holds.
    if let Some(r) = sim.recs.last().filter(|r| r.err > r.bound as f64) {
        bad.push(format!(
            "{tail} checks after the staircase: err {:.0} > bound {} ({:?})",
            r.err,
            r.bound,
            r.v.token()
        ));
    }
    let desc = format!("{desc}, {steps} steps, last at {x:+} ppb");
    (bad, desc, tally(&sim.recs))
}

fn family_w2() -> Vec<(usize, String)> {
    let mut bad = Vec::new();
    let mut all = std::collections::BTreeMap::new();
    let mut worlds = 0;
    for seed in seed_list(seeds() * 4) {
        let (b, desc, t) = run_w2(seed);
        worlds += 1;
        add_tally(&mut all, &t);
        bad.extend(
            b.into_iter()
                .map(|b| (bucket(&desc, &b), format!("seed {seed} ({desc}): {b}"))),
        );
    }
    eprintln!(
        "W2: {worlds} worlds, verdicts {all:?}; {} failures",
        bad.len()
    );
    bad
}

#[test]
fn a_staircase_every_period_under_a_narrow_count() {
    let bad = only(&family_w2(), 0);
    assert!(bad.is_empty(), "{} failures: {bad:#?}", bad.len());
}

/// Family W3: a disturbance in every check from the third on (a reference read stalled
/// 1–10 ms before its latch, or an interrupt right after a counter read, under a quarter
/// wrap of a narrow counter), in the check's first reads or 0–7 ms in (the spin), at
/// constant rates, then (`change`) a change of ±1–12 % at the middle. Asserted: no (c)/(d) at
/// constant rates, `bound_ppb` at every check there, no run of more than three
/// `WideBracket`s ("The fourth wide check in a row is judged"), no run of more than
/// [`ENDLESS`] NoVerdicts, the clock never back.
fn run_w3(
    seed: u64,
    change: bool,
    spin_only: bool,
) -> (
    Vec<String>,
    String,
    std::collections::BTreeMap<String, usize>,
) {
    let (w, start, period, _kind, desc) = narrow_world(seed ^ 0x3333);
    let mut s = seed ^ 0x3c3c;
    let max_stall = if w.ctr.bits < 64 {
        let wrap = (1i128 << w.ctr.bits) * TICK / w.ctr.rate_at(0);
        (wrap as u64 / 4).min(10 * MS)
    } else {
        10 * MS
    };
    let mut sim = Sim::new(w, start);
    let n = checks_for(60 * SEC, period, 30, 120);
    let mid = n / 2;
    let ppb = if change { size_w(&mut s) * 2 } else { 0 };
    let mut t_change = u64::MAX;
    for i in 0..n {
        sim.advance(period);
        let t = sim.w.borrow().t;
        if i == mid && change {
            t_change = t - unif(&mut s, 0, period / 2);
            let mut w = sim.w.borrow_mut();
            let base = w.ctr.rate_at(0);
            w.ctr.set(t_change, base + base * ppb / 1_000_000_000);
        }
        if i >= 2 {
            let at = if spin_only {
                unif(&mut s, 20 * US, 2 * MS)
            } else if mix(&mut s) & 1 == 0 {
                unif(&mut s, 0, 10 * US)
            } else {
                unif(&mut s, 0, 7 * MS)
            };
            let d = unif(&mut s, MS.min(max_stall), max_stall);
            let mut w = sim.w.borrow_mut();
            if mix(&mut s) & 1 == 0 {
                w.stalls.push((t + at, d));
            } else {
                w.c_stalls.push((t + at, d));
            }
        }
        sim.check(true);
    }
    let mut bad = common(&sim, false);
    let pre: Vec<Rec> = sim
        .recs
        .iter()
        .copied()
        .filter(|r| r.t1 < t_change)
        .collect();
    if let Some(r) = pre.iter().find(|r| is_alarm(&r.v)) {
        bad.push(format!("false alarm at constant rates: {r:?}"));
    }
    if let Some(r) = pre.iter().find(|r| r.err > r.bound as f64) {
        bad.push(format!(
            "err {:.0} > bound {} at constant rates",
            r.err, r.bound
        ));
    }
    let (nv, wb) = longest_runs(&pre);
    if wb > 3 {
        bad.push(format!("a run of {wb} WideBrackets at constant rates"));
    }
    if nv > ENDLESS && nv > wb && !whole_wrap(&sim) {
        bad.push(format!(
            "a run of {nv} NoVerdicts at constant rates: {:?}",
            tally(&pre)
        ));
    }
    if change {
        // *Detection time*: within three checks, "Every disturbed check in between stretches an
        // interval by one period"; `bound_ppb` from the report on.
        let widest = widest_steady(&pre);
        let b0 = pre.last().map_or(0, |r| r.bound);
        let threshold = 2.5 * (widest + b0) as f64 + 10.0;
        let post: Vec<Rec> = sim
            .recs
            .iter()
            .copied()
            .filter(|r| r.t1 > t_change)
            .collect();
        let reported = post
            .iter()
            .position(|r| matches!(r.v, Watch::Changed { .. }));
        if (ppb.unsigned_abs() as f64) > threshold && widest > 0 {
            let ok = reported
                .is_some_and(|k| k <= 2 + post[..k].iter().filter(|r| is_disturbed(&r.v)).count());
            if !ok {
                bad.push(format!(
                    "{ppb:+} ppb above the threshold {threshold:.0}: reported at check {reported:?}, \
                     verdicts {:?}",
                    post.iter().take(8).map(|r| r.v.token()).collect::<Vec<_>>()
                ));
            }
        }
        if let Some(k) = reported {
            if let Some(r) = post[k..].iter().find(|r| r.err > r.bound as f64) {
                bad.push(format!(
                    "reported at check {k}; later err {:.0} > bound {} ({:?})",
                    r.err,
                    r.bound,
                    r.v.token()
                ));
            }
        }
    }
    let desc = format!(
        "{desc}{}",
        if change {
            format!(", {ppb:+} ppb at check {mid}")
        } else {
            String::new()
        }
    );
    (bad, desc, tally(&sim.recs))
}

fn family_w3(change: bool, spin_only: bool) -> Vec<(usize, String)> {
    let mut bad = Vec::new();
    let mut all = std::collections::BTreeMap::new();
    let mut worlds = 0;
    for seed in seed_list(seeds() * 4) {
        let (b, desc, t) = run_w3(seed, change, spin_only);
        worlds += 1;
        add_tally(&mut all, &t);
        bad.extend(
            b.into_iter()
                .map(|b| (bucket(&desc, &b), format!("seed {seed} ({desc}): {b}"))),
        );
    }
    eprintln!(
        "W3 (change {change}, spin only {spin_only}): {worlds} worlds, verdicts {all:?}; {} failures",
        bad.len()
    );
    bad
}

#[test]
fn a_disturbance_in_every_check_under_a_narrow_count() {
    let mut all = family_w3(false, false);
    all.extend(family_w3(true, false));
    all.extend(family_w3(false, true));
    let bad = only(&all, 0);
    assert!(bad.is_empty(), "{} failures: {bad:#?}", bad.len());
}

/// One world of the minimal finding: a `bits`-bit counter at `c_hz` under a 64-bit 10 MHz
/// reference (reads 0.3 µs), checked every `period` ps without jitter; `ppb` at `frac` ‰ of
/// the 13th interval; 20 checks after it. Returns (final error, final bound, verdicts after
/// the change).
fn many_wraps(
    seed: u64,
    c_hz: u64,
    bits: u32,
    period: u64,
    ppb: i128,
    frac: u64,
) -> (f64, u64, Vec<&'static str>) {
    let mut w = World::new(seed, u128::from(c_hz) * 1000, bits, 10_000_000, 64);
    w.r_cost = 300_000;
    w.r_jit = 30_000;
    let start = start_rate(w.truth(), 0.0, 100);
    let mut sim = Sim::new(w, start);
    sim.run(12, period, 0);
    {
        let mut w = sim.w.borrow_mut();
        let at = w.t + period * frac / 1000;
        let base = w.ctr.rate_at(0);
        w.ctr.set(at, base + base * ppb / 1_000_000_000);
    }
    sim.run(20, period, 0);
    let last = sim.recs.last().unwrap();
    (
        last.err,
        last.bound,
        sim.recs[12..18].iter().map(|r| r.v.token()).collect(),
    )
}

#[test]
fn finding_a_narrow_counter_of_many_wraps_a_period_is_aliased() {
    let minimal = many_wraps(0, 100_000_000, 20, 4_265 * MS, 3_000_000, 0);
    eprintln!(
        "minimal (20-bit 100 MHz, P 4.265 s, +0.3 %): err {:.0} bound {} {:?}",
        minimal.0, minimal.1, minimal.2
    );
    let mut w = only(&family_w1(), 2);
    w.extend(only(&family_w2(), 2));
    w.extend(only(&family_w3(true, false), 2));
    eprintln!("W1/W2 worlds of narrow counters beyond the bound: {w:#?}");
    let mut bad = Vec::new();
    let mut n = 0;
    for &(c_hz, bits) in &[
        (748_876_635, 22),
        (160_191_379, 20),
        (1_000_000_000, 24),
        (100_000_000, 20),
    ] {
        for &p_ms in &[500u64, 1_000, 4_265] {
            for &ppb in &[10_000_000i128, 32_335_456, -41_083_468, 100_000_000] {
                for seed in 0..seeds().min(8) {
                    n += 1;
                    let frac = seed * 997 % 1000;
                    let (err, bound, v) = many_wraps(seed, c_hz, bits, p_ms * MS, ppb, frac);
                    if err > bound as f64 {
                        bad.push(format!(
                            "{bits}-bit {c_hz} Hz, P {p_ms} ms, {ppb:+} ppb at {frac} permille, seed {seed}: \
                             20 checks later err {err:.0} > bound {bound}; {v:?}"
                        ));
                    }
                }
            }
        }
    }
    eprintln!("many wraps: {n} worlds, {} failures", bad.len());
    assert!(minimal.0 <= minimal.1 as f64, "minimal: {minimal:?}");
    assert!(w.is_empty(), "{} in W1/W2: {w:#?}", w.len());
    assert!(bad.is_empty(), "{} of {n}: {bad:#?}", bad.len());
}

#[test]
fn finding_disturbed_measurements_keep_checks_wide() {
    let mut bad = only(&family_w3(false, true), 1);
    bad.extend(only(&family_w3(false, false), 1));
    bad.extend(only(&family_w3(true, false), 1));
    bad.extend(only(&family_w2(), 1));
    assert!(bad.is_empty(), "{} failures: {bad:#?}", bad.len());
}
