//! Round-6 outside attack on [`Watchdog`] (issue 28, "time that stays right"), written from
//! the rustdoc of `Watchdog`, `Watch`, `Unjudged`, `WatchdogHealth`, `Clock`, `Reference`,
//! `Frequency` and `WallClock` and the README alone (not the function bodies). The simulated
//! world is the one of `tests/adversary_watchdog3.rs` (copied, extended): true time in
//! picoseconds; a counter and a reference as integrals of piecewise rates; every read costs
//! scripted time and latches at a scripted point; delayed reads, stalls of a reference read
//! (an SMI) and of the time after a counter read (an interrupt between the bracket's reads)
//! placed *inside* a check, where the *Widths* rule's short spin runs.
//!
//! Targets: the *Widths* section's new rule (a narrow count whose wraps a change of up to
//! 12.5 % could move by half a wrap is unwrapped from a rate the check measures itself with a
//! short spin, "1–7 ms against a PIT, a few hundred reads"), an acceptance grid of rate changes
//! under delayed reads, and a [`WallClock`] over a clock the watchdog recalibrates.
//!
//! What every family asserts, each from a sentence of the docs:
//! - **detection** — *Detection time*: a change `δ` above twice the sum of an interval's bound
//!   and the baseline's is reported "at most three periods `P` after the change when no check is
//!   disturbed", and "every disturbed check in between stretches an interval by one period"
//!   (here: the threshold taken as `2·(widest steady interval bound + bound_ppb before the
//!   change)`, widened by a quarter; the deadline 3 checks plus one per check after the change
//!   that was `WideBracket`, `ReferenceStill`, `ReferenceJumped`, `TooShort` or `TooLong`);
//! - **bound** — `WatchdogHealth::bound_ppb`: "From the detection on it does [hold]"; at
//!   constant rates a worst case at every check;
//! - **no false alarm** — *False alarms*: at constant rates "no check reports (c) or (d) —
//!   whatever the reads' delays, jitter and stalls"; "A one-off (a reference that steps once or
//!   stands still ...) is never (c)"; "Only the counter's own reads can blame it";
//! - **clock** — promises 1–2 of [`Clock`] across every check (never back; no more than the
//!   ticks the check took at the slower rate in force + `MARK_GRANULE_NS` + 20 µs);
//! - **spin** — *Widths*: the measurement takes "1–7 ms against a PIT" (a PIT read every 0.5 s);
//! - **wall** — [`WallClock`]: "A slew never moves the wall time back and never jumps it ... the
//!   wall time runs at the clock's rate ± `max_ppm`, and ends with exactly the offset asked
//!   absorbed", reached "exactly at `B + ⌈off × 10⁶ / ppm⌉`".
//!
//! Figures: `BARETIME_ADV_SEEDS=100 cargo test --release -p baretime --features std --test
//! adversary_watchdog6 -- --include-ignored --nocapture` on a 2-vCPU Intel Xeon KVM guest
//! (family 6 model 167); the default (8 seeds) runs in debug in seconds.
//!
//! | family | worlds / checks at 100 seeds | asserted | result at 100 seeds |
//! | --- | --- | --- | --- |
//! | A `narrow_counts_changes_of_every_size`: PIT, ACPI PM 24, HPET 32, RTC 32 kHz under 64-bit 24 MHz–5 GHz counters; 16–32-bit counters at 1 kHz–5 GHz (wrap ≥ 2 ms) under 64-bit HPET / 10 MHz; P 0.05–5 s log-uniform, hook jitter ≤ 5 %; one change of ±1 ppm–12.4 % (log-uniform) in an interval or 0–7 ms into the next check (the spin) | 600 worlds, 60 474 checks | detection, bound, no false alarm, clock, health's counts | held: 443 changes above the threshold, each reported within the docs' time (p50 1.16 s, max 9.91 s after the change at P up to 5 s); 0 (c)/(d) before the change; 0 counter faults after it; `bound_ppb` ≥ the error at every check from the report on; 0 `TooLong`; 0 steps back. Printed, not asserted: 4 `Changed` at a rate outside its own bound, each a PIT change placed inside a check (the spin finding below) |
//! | B `narrow_counts_disturbed_spin`: the same kinds of worlds at constant rates; in a third of the checks a reference read stalled 1–10 ms, or an interrupt of 1–10 ms right after a counter read (under a quarter wrap of a narrow counter), in the check's first reads or 0–7 ms in (the spin) | 400 worlds, 33 434 checks | no false alarm, bound at every check, clock | held: 0 (c)/(d), 0 checks beyond `bound_ppb`, 0 steps back |
//! | B's one-offs `narrow_counts_one_off_reference_faults` (ignored, finding; 2 of its 3 fixed since): as B, plus one reference stand-still (1–10 ms) or step (±1–10 ms of ticks, ≥ 3× the widest interval bound) 0–7 ms into one check | 400 worlds | no (c)/(d) | **broke** in 3 of 400: seed 74 (26-bit 2.07 GHz counter vs 10 MHz, P 0.142 s, 1.17 ms still inside the spin: `CounterJumped` by one wrap, 32.47 ms), seed 191 (PIT vs 1.16 GHz, P 57 ms, 8.09 ms still across a stalled check: `CounterJumped { by_ns: 8093753 }`, the stand-still itself), seed 266 (PIT vs 2.84 GHz, P 0.323 s, 8.7 ms still across a stalled check: `Changed`, the clock 2.5 % off). **Since** (the spin's halves must agree; a stand-still across a check's reads is `ReferenceStill`): 1 of 400, seed 191 |
//! | C `acceptance_grid_under_delayed_reads`: ±1, 10, 100, 1 000 ppm, 1, 5, 10, 12 % × HPET, ACPI PM, PIT, 1 kHz tick (64-bit), 32 kHz RTC; 1 GHz counter ±200 ppm; P 0.5 s, hook jitter ±2.5 %; 10 % of reference reads delayed ≤ 2 ms; 1–6 SMIs of 1–10 ms; the change midway through 100 checks, in an interval or inside a check | 4 000 worlds, 400 000 checks | detection, bound, no false alarm, clock (the PIT's ±10/12 % worlds: the two PIT rows below) | held: every change above the threshold reported in time (p50 0.76–1.01 s, max 1.32 s); 0 (c)/(d) in the 160 000 checks before the changes; `bound_ppb` ≥ the error from every report on. Below the threshold (no time promised): 1 ppm reported in 100 of 100 against HPET (p50 3.4 s, max 6.0 s), ACPI PM (4.0 s, 6.8 s), PIT (8.0 s, 17.0 s); 6 of 100 against the RTC and 0 of 100 against the 1 kHz tick within 30 s (10 ppm: 92 and 23; 100 ppm: 100 and 68; 1 000 ppm: 100 and 100) |
//! | `a_change_within_12_5_percent_against_a_pit_is_no_jump`: C's PIT ±10/12 % worlds, twice the seeds, jitter ±2.5 % | 400 worlds | no counter fault | held: 0. Not asserted (the cadence rule assumes jitter "well under" 12.5 %, no figure): `CounterJumped { by_ns: ±61–87 ms }` at the mixed interval in 4 of 400 at ±5 % and 25 of 400 at ±10 % |
//! | `a_large_pit_change_is_reported_within_the_stated_time` (found, fixed since): the same worlds at jitter ±1 % and ±2.5 % | 800 worlds | detection time | **broke** in 3 of 800: reported at the fourth check after the change (Unconfirmed, Unconfirmed, TooLong, Steady, Changed), one period late; seed 151 (+12 %, ±1 %): 2.01 s after the change. **Since** (a disturbed measurement is `WideBracket`, the interval's count between its two ends' rates): 0 of 800 |
//! | D `wall_clock_across_recalibrations`: HPET / ACPI PM / PIT vs 1 GHz, P 0.5 s, 5 % of reads delayed ≤ 1 ms; a slew of ±0.1–50 ms at 50–250 000 ppm started at check 10; a ±10 ppm–10 % change 0.1–3 s later, reported and steered; the wall read every 1–50 ms and around every check | 400 worlds, 48 000 checks; 147 slews across a reported change, 104 across a steer | wall never back; Δwall within Δclock·(1 ± ppm) + 1 ns; the slew's formula at every reading; exact end at `B + ⌈off·10⁶/ppm⌉`; `slew_remaining_ns`; the change reported | held: 0 failures |
//! | spin `the_spin_against_a_pit_takes_at_most_7_ms`: A's PIT worlds at P ≤ 0.5 s, checks without a stall, past the first two | 16 883 checks | ≤ 7 ms | held: p50 0.01 ms (no spin needed), max 2.09 ms, up to 797 reference reads; B's unstalled PIT checks: p50 0.01 ms, max 1.19 ms over 4 924; against the PIT at P 0.5 s (C) the checks read the reference 13–80 times |
//! | `a_change_inside_a_pit_checks_spin_sets_a_rate_inside_its_bound` (found, fixed since): PIT vs 1 GHz, P 0.5 s, no jitter or delays, −10 % 50 / 200 / 500 µs into a check's reads (the spin, 1.13 ms) | 1 500 worlds | (c)'s rate within its own bound | **broke** in 1 445 of 1 500: `Unconfirmed`, then `Changed` 7.2–115.8 ppm off under a bound of 7 ppm (seed 0 at 500 µs: 108 ppm), corrected by a second `Changed` two checks later; also 4 of A's 600 worlds (printed by A, not asserted there). **Since** (a rate measured after a change is not used for an interval before it): 0 of 1 500, 0 in A |
//! | `a_reference_standing_still_across_a_check_is_no_change` (found, fixed since) | 300 worlds | no (c)/(d) | **broke**: HPET vs 1 GHz, P 0.5 s, still 2 ms from 0.5 ms before a check: 100 of 100 (`Changed`, the clock 3 005 ppm off under `bound_ppb` 5 003 ppm, `Changed` back two checks later); 60 ms from 10 ms before: 100 of 100 (11.1 % off); P 57 ms, 8 ms from 4 ms before: 24 of 100. **Since** (`ReferenceStill` across the check's reads; the next interval holds the stand-still whole): 0 of 300 |
//! | `a_reference_standing_still_in_the_spin_blames_no_counter` (found, fixed since) | 100 worlds | no (c)/(d) | **broke**: 16-bit 1 MHz counter vs 10 MHz, P 1 s, still 1 ms from 0.5 ms into a check: 100 of 100 (`CounterJumped`, then `Changed` 1 000 ppm off, back two checks later). **Since** (the spin's halves must agree, else `WideBracket`): 0 of 100 |
//!
//! Run time: the default 8 seeds in debug (`cargo test -p baretime --features std --test
//! adversary_watchdog6`) in well under a second; 100 seeds in release, ignored tests included,
//! in about 5 s. To trace one world: `BARETIME_ADV_SEED=<seed> BARETIME_ADV_TRACE=1` (every
//! check's verdict, error, bound, reads and duration), and `trace_one_pit_world` for family
//! C's PIT worlds.

use std::cell::RefCell;
use std::rc::Rc;

use baretime::{
    Accuracy, Clock, Counter, Frequency, Instant, Reference, Source, Unjudged, WallClock, Watch,
    Watchdog, MARK_GRANULE_NS,
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
        let r = self.raw(t);
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
        self.refr.read(latch)
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
    /// Reference reads the check took.
    reads: u64,
    /// A stall or interrupt was scripted inside this check.
    stalled: bool,
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
            reads: reads1 - reads0,
            stalled,
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
    /// TooLong checks after the change.
    too_long: usize,
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
    // (Judged by the finding `a_change_inside_a_pit_checks_spin_sets_a_rate_inside_its_bound`,
    // not here.)
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
    let too_long = post
        .iter()
        .filter(|r| matches!(r.v, Watch::NoVerdict(Unjudged::TooLong)))
        .count();
    ChangeOutcome {
        bad,
        detect_s,
        above,
        too_long,
        fault,
        rate_off,
    }
}

/// Spin cost figures: (duration ms, reference reads) of PIT checks at P ≤ 0.5 s without a
/// stall, past the first two.
fn spin_costs(sim: &Sim, kind: Kind, period: u64) -> Vec<(f64, u64)> {
    if kind != Kind::Pit || period > 510 * MS {
        return Vec::new();
    }
    sim.recs
        .iter()
        .skip(2)
        .filter(|r| !r.stalled)
        .map(|r| ((r.t1 - r.t0) as f64 / MS as f64, r.reads))
        .collect()
}

/// A change size of family A: ±1 ppm to ±12.4 %, log-uniform.
fn size_a(s: &mut u64) -> i128 {
    let ppb = logu(s, 1_000.0, 124_000_000.0) as i128;
    if mix(s) & 1 == 0 {
        ppb
    } else {
        -ppb
    }
}

/// Runs family A's world `seed`.
fn run_a(seed: u64) -> (ChangeOutcome, String, Vec<(f64, u64)>, usize, Kind, i128) {
    let (w, start, period, kind, desc) = narrow_world(seed);
    let mut s = seed ^ 0x6a6a;
    let ppb = size_a(&mut s);
    let inside = mix(&mut s) & 1 == 0;
    let jit = period * unif(&mut s, 0, 5) / 100;
    let mut sim = Sim::new(w, start);
    let steady = checks_for(20 * SEC, period, 12, 60);
    let after = checks_for(40 * SEC, period, 16, 100);
    let out = change_run(
        &mut sim,
        (steady, after),
        (period, jit),
        ppb,
        inside,
        &mut s,
    );
    let desc = format!(
        "{desc}, {ppb:+} ppb {}",
        if inside {
            "inside a check"
        } else {
            "in an interval"
        }
    );
    let spin = spin_costs(&sim, kind, period);
    (out, desc, spin, sim.recs.len(), kind, ppb)
}

/// Family A (*Widths*, *Detection time*, `bound_ppb`): narrow counts under every change size
/// from 1 ppm to 12.4 %, periods 0.05–5 s, the change in an interval or inside the check's
/// reads (the spin). See the module docs.
#[test]
fn narrow_counts_changes_of_every_size() {
    let mut bad = Vec::new();
    let (mut worlds, mut checks, mut above, mut det_above, mut too_long) = (0, 0, 0, 0, 0);
    let mut det = Vec::new();
    let mut spin = Vec::new();
    let mut rate_off = Vec::new();
    for seed in seed_list(seeds() * 6) {
        let (mut out, desc, sp, n, _, _) = run_a(seed);
        out.bad.extend(out.fault.take());
        if let Some(r) = out.rate_off.take() {
            rate_off.push(format!("seed {seed} ({desc}): {r}"));
        }
        worlds += 1;
        checks += n;
        spin.extend(sp);
        too_long += out.too_long;
        if out.above {
            above += 1;
            if let Some(d) = out.detect_s {
                det_above += 1;
                det.push(d);
            }
        }
        for b in out.bad {
            bad.push(format!("seed {seed} ({desc}): {b}"));
        }
    }
    let mut ms: Vec<f64> = spin.iter().map(|x| x.0).collect();
    let mut rd: Vec<f64> = spin.iter().map(|x| x.1 as f64).collect();
    eprintln!(
        "A: {worlds} worlds, {checks} checks; {above} above the threshold, {det_above} reported \
         (p50 {:.2} s, max {:.2} s after the change); {too_long} TooLong after changes; \
         {} failures; not asserted here (a finding below): {} Changed at a rate outside its \
         own bound {rate_off:#?}",
        pct(&mut det.clone(), 0.5),
        pct(&mut det, 1.0),
        bad.len(),
        rate_off.len()
    );
    eprintln!(
        "spin (PIT, P <= 0.5 s, A): {} checks, duration p50 {:.2} ms max {:.2} ms; reference reads p50 {} max {}",
        ms.len(),
        pct(&mut ms.clone(), 0.5),
        pct(&mut ms, 1.0),
        pct(&mut rd.clone(), 0.5),
        pct(&mut rd, 1.0)
    );
    assert!(bad.is_empty(), "{} failures: {bad:#?}", bad.len());
}

/// The disturbance of family B inside one check.
#[derive(Clone, Copy, Debug)]
enum Disturb {
    /// The reference stands still for `.1` ps from `.0` ps into the check.
    StandStill(u64, u64),
    /// The reference steps by `.1` of its ticks `.0` ps into the check.
    Step(u64, i128),
}

/// Runs family B's world `seed`: constant counter rate, stalls and interrupts inside a third of
/// the checks, one reference stand-still or step inside one check.
fn run_b(seed: u64, one_offs: bool) -> (Vec<String>, String, Vec<(f64, u64)>, usize) {
    let (w, start, period, kind, desc) = narrow_world(seed ^ 0xb0b0_0000);
    let mut s = seed ^ 0xb6b6;
    let jit = period * unif(&mut s, 0, 5) / 100;
    let ref_hz = w.ref_mhz / 1000;
    // A clock over a narrow counter must be updated within half its wrap (`Clock`): an
    // interrupt inside a check is held under a quarter wrap there.
    let max_stall = if w.ctr.bits < 64 {
        let wrap = (1i128 << w.ctr.bits) * TICK / w.ctr.rate_at(0);
        (wrap as u64 / 4).min(10 * MS)
    } else {
        10 * MS
    };
    let mut sim = Sim::new(w, start);
    let n = checks_for(60 * SEC, period, 30, 120);
    let one_off_at = unif(&mut s, (n / 3) as u64, (2 * n / 3) as u64) as usize;
    let mut bad = Vec::new();
    let mut one_off = None;
    for i in 0..n {
        let p = {
            let mut w = sim.w.borrow_mut();
            unif(&mut w.seed, period.saturating_sub(jit), period + jit)
        };
        sim.advance(p);
        let t = sim.w.borrow().t;
        let mut stalled = false;
        if i >= 2 && mix(&mut s) % 3 == 0 {
            // Inside the check: its first reads, or its spin (where it spins).
            let at = if mix(&mut s) & 1 == 0 {
                unif(&mut s, 0, 10 * US)
            } else {
                unif(&mut s, 0, 7 * MS)
            };
            let d = unif(&mut s, MS.min(max_stall), max_stall);
            // A reference read stalled before its latch, or an interrupt right after a
            // counter read.
            let mut w = sim.w.borrow_mut();
            if mix(&mut s) & 1 == 0 {
                w.stalls.push((t + at, d));
            } else {
                w.c_stalls.push((t + at, d));
            }
            stalled = true;
        }
        if one_offs && i == one_off_at {
            let at = unif(&mut s, 0, 7 * MS);
            let x = if mix(&mut s) & 1 == 0 {
                Disturb::StandStill(at, unif(&mut s, MS, 10 * MS))
            } else {
                // 1–10 ms of ticks, and at least three times the widest steady interval bound
                // (above the threshold: not "one step of a count under an interval's
                // threshold", which the docs allow to be (c) now and then).
                let floor = 3 * i128::from(widest_steady(&sim.recs)) * i128::from(period) * ref_hz
                    / (PS * 1_000_000_000);
                let ticks = (i128::from(unif(&mut s, MS, 10 * MS)) * ref_hz / PS)
                    .max(floor)
                    .max(1);
                Disturb::Step(at, if mix(&mut s) & 1 == 0 { ticks } else { -ticks })
            };
            let mut w = sim.w.borrow_mut();
            let r = w.ref_mhz;
            match x {
                Disturb::StandStill(at, d) => {
                    w.refr.set(t + at, 0);
                    w.refr.set(t + at + d, r);
                }
                Disturb::Step(at, by) => w.refr.jumps.push((t + at, by)),
            }
            one_off = Some(x);
            stalled = true;
        }
        sim.check(stalled);
        // A stall the check did not reach is dropped: disturbances stay inside checks.
        let mut w = sim.w.borrow_mut();
        w.stalls.clear();
        w.c_stalls.clear();
    }
    let desc = if one_offs {
        format!("{desc}, one-off {one_off:?} at check {one_off_at}")
    } else {
        desc
    };
    let one_off_at = if one_offs { one_off_at } else { usize::MAX - 4 };
    if let Some(r) = sim.recs.iter().find(|r| is_alarm(&r.v)) {
        bad.push(format!("false alarm at a constant counter rate: {r:?}"));
    }
    // The bound at constant rates: every check but the one-off's and the three after it
    // (`bound_ppb`: "an excursion that came back unseen ... is left out of the bound once it
    // is three samples back").
    for (i, r) in sim.recs.iter().enumerate() {
        if (one_off_at..one_off_at + 4).contains(&i) {
            continue;
        }
        if r.err > r.bound as f64 {
            bad.push(format!(
                "check {i}: err {:.0} > bound {} ({})",
                r.err,
                r.bound,
                r.v.token()
            ));
            break;
        }
    }
    if sim.back_steps > 0 || sim.worst_jump_excess > 0 {
        bad.push(format!(
            "{} steps back, jump excess {} ns",
            sim.back_steps, sim.worst_jump_excess
        ));
    }
    if !sim.counts_agree() {
        bad.push(format!("health {:?} disagrees", sim.wd.health()));
    }
    let spin = spin_costs(&sim, kind, period);
    (bad, desc, spin, sim.recs.len())
}

/// Family B (*False alarms*, *Widths*): disturbed reads inside the checks of narrow counts at
/// constant rates (a reference read stalled 1–10 ms, an interrupt of 1–10 ms after a counter
/// read, in a third of the checks, in their first reads or 0–7 ms in, where the spin runs).
/// See the module docs.
#[test]
fn narrow_counts_disturbed_spin() {
    let mut bad = Vec::new();
    let (mut worlds, mut checks) = (0, 0);
    let mut spin = Vec::new();
    for seed in seed_list(seeds() * 4) {
        let (b, desc, sp, n) = run_b(seed, false);
        worlds += 1;
        checks += n;
        spin.extend(sp);
        for x in b {
            bad.push(format!("seed {seed} ({desc}): {x}"));
        }
    }
    let mut ms: Vec<f64> = spin.iter().map(|x| x.0).collect();
    eprintln!(
        "B: {worlds} worlds, {checks} checks, {} failures; spin (PIT, P <= 0.5 s, unstalled): {} checks, p50 {:.2} ms, max {:.2} ms",
        bad.len(),
        ms.len(),
        pct(&mut ms.clone(), 0.5),
        pct(&mut ms, 1.0)
    );
    assert!(bad.is_empty(), "{} failures: {bad:#?}", bad.len());
}

/// The spin's cost (*Widths*: "1–7 ms against a PIT, a few hundred reads"): checks of a
/// 64-bit counter against the PIT at P ≤ 0.5 s, without a stall scripted inside, past the
/// first two, in the worlds of families A and B.
#[test]
fn the_spin_against_a_pit_takes_at_most_7_ms() {
    let mut bad = Vec::new();
    let mut all = Vec::new();
    for seed in seed_list(seeds() * 6) {
        let (_, desc, sp, _, _, _) = run_a(seed);
        for (ms, reads) in sp {
            all.push(ms);
            if ms > 7.0 {
                bad.push(format!(
                    "seed {seed} ({desc}): a check took {ms:.2} ms, {reads} reference reads"
                ));
            }
        }
    }
    let n = all.len();
    eprintln!(
        "spin: {n} PIT checks, p50 {:.2} ms, max {:.2} ms, {} over 7 ms",
        pct(&mut all.clone(), 0.5),
        pct(&mut all, 1.0),
        bad.len()
    );
    assert!(bad.is_empty(), "{} failures: {bad:#?}", bad.len());
}

/// The references of family C: (name, Hz, bits, read cost ps).
const REFS_C: [(&str, u64, u32, u64); 5] = [
    ("hpet", 14_318_180, 64, 1_000_000),
    ("acpi_pm", 3_579_545, 24, 1_200_000),
    ("pit", 1_193_182, 16, 2_500_000),
    ("tick1k", 1_000, 64, 100_000),
    ("rtc32k", 32_768, 32, 1_500_000),
];

/// The change sizes of family C (ppb).
const SIZES_C: [i128; 8] = [
    1_000,
    10_000,
    100_000,
    1_000_000,
    10_000_000,
    50_000_000,
    100_000_000,
    120_000_000,
];

/// Family C: one world per (reference, size, sign) and seed; 1 GHz counter (±200 ppm off),
/// P 0.5 s ± `jit`, 10 % of reference reads delayed up to 2 ms, SMIs of 1–10 ms.
fn run_c(seed: u64, r: usize, size: i128, jit: u64) -> (ChangeOutcome, String, usize) {
    let (rname, rhz, rbits, rcost) = REFS_C[r];
    let mut s = seed
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .wrapping_add(r as u64 * 1009 + size.unsigned_abs() as u64);
    let ppb = if mix(&mut s) & 1 == 0 { size } else { -size };
    let c_off = unif(&mut s, 0, 400_000) as f64 - 200_000.0;
    let c_mhz = (1e12 * (1.0 + c_off * 1e-9)).round() as u128;
    let mut w = World::new(mix(&mut s), c_mhz, 64, rhz, rbits);
    w.r_cost = rcost;
    w.r_jit = rcost / 5;
    w.c_cost = unif(&mut s, 10_000, 40_000);
    w.c_jit = unif(&mut s, 0, 10_000);
    w.c_latch = unif(&mut s, 0, 1000);
    w.r_delay = (100_000, 2 * MS);
    for _ in 0..unif(&mut s, 1, 6) {
        let at = unif(&mut s, SEC, 50 * SEC);
        w.stalls.push((at, unif(&mut s, MS, 10 * MS)));
    }
    let bound = unif(&mut s, 20, 2_000);
    let off = unif(&mut s, 0, 2 * bound) as f64 - bound as f64;
    let start = start_rate(w.truth(), off, bound);
    if std::env::var("BARETIME_ADV_TRACE").is_ok() {
        eprintln!("== {rname} {ppb:+} ppb");
    }
    let mut sim = Sim::new(w, start);
    let period = 500 * MS;
    let inside = mix(&mut s) % 4 == 0;
    let out = change_run(&mut sim, (40, 60), (period, jit), ppb, inside, &mut s);
    (
        out,
        format!(
            "{rname}, {ppb:+} ppb{}",
            if inside { " inside a check" } else { "" }
        ),
        sim.recs.len(),
    )
}

/// The worlds the two PIT tests below judge instead of the grid: the PIT at ±10 and ±12 %.
fn pit_large(r: usize, size: i128) -> bool {
    REFS_C[r].0 == "pit" && size >= 100_000_000
}

/// (*Detection time*: "A change beyond 12.5 % reads as a jump at first" — not one within it;
/// (d) is "the counter stepped".) Family C's PIT worlds at ±10 and ±12 % (P 0.5 s, 10 % of
/// reference reads delayed up to 2 ms, SMIs), twice the seeds, with the hook's jitter at
/// ±2.5 %: no counter fault (asserted). With more jitter the mixed interval can be
/// `CounterJumped { by_ns: ±61–87 ms }` (a PIT wrap and the mixed interval's share of the
/// change), then `Changed` at the true rate: printed, not asserted, since the cadence rule
/// assumes "its jitter well under the jumps to be told, which are at least 12.5 % of a period"
/// and the docs give no figure for "well under". At `BARETIME_ADV_SEEDS=100` (400 worlds each):
/// 0 at ±0, ±1 and ±2.5 %, 4 at ±5 %, 25 at ±10 % (0 of 400 at ±10 % without the delayed
/// reads in a quiet world: 18 of 200 with ±10 % jitter alone, in a probe while writing this).
/// A figure for "well under" in the docs (±2.5 % holds here; ±5 % does not) would settle it.
#[test]
fn a_change_within_12_5_percent_against_a_pit_is_no_jump() {
    let pit = REFS_C.iter().position(|r| r.0 == "pit").unwrap();
    let mut bad = Vec::new();
    let (mut worlds, mut at5, mut at10) = (0, 0, 0);
    for size in [100_000_000, 120_000_000] {
        for seed in seed_list(seeds() * 2) {
            worlds += 1;
            let (out, desc, _) = run_c(seed, pit, size, 12_500 * US);
            if let Some(f) = out.fault {
                bad.push(format!("seed {seed} ({desc}): {f}"));
            }
            at5 += usize::from(run_c(seed, pit, size, 25 * MS).0.fault.is_some());
            at10 += usize::from(run_c(seed, pit, size, 50 * MS).0.fault.is_some());
        }
    }
    eprintln!(
        "PIT ±10/12 %: {} of {worlds} worlds with a counter fault at ±2.5 % jitter; not asserted: \
         {at5} at ±5 %, {at10} at ±10 %",
        bad.len()
    );
    assert!(bad.is_empty(), "{} of {worlds}: {bad:#?}", bad.len());
}

/// Finding (*Detection time*): family C's PIT worlds at ±10 and ±12 % (P 0.5 s, 10 % of
/// reference reads delayed up to 2 ms, SMIs), twice the seeds, hook jitter ±1 % and ±2.5 %.
/// In a few the change is reported at the fourth check after it: the mixed interval and the
/// first wholly after it both `Unconfirmed` (the second does not confirm the first), then
/// `TooLong` (the bound the deviation widened, over 5.5 %, needs the spin, which a delayed
/// read disturbed), then `Steady` (judged against the clock's rate and that widened
/// `bound_ppb`, 10.9 %, with the clock 10.7 % off), then `Changed` by the window against the
/// clock: one period past the docs' "second interval after it ... every disturbed check in
/// between stretches an interval by one period" (`TooLong` counted as disturbed). `bound_ppb`
/// covered the error throughout. At `BARETIME_ADV_SEEDS=100`: 1 of 400 at ±1 % (seed 151,
/// +12 % placed 0–7 ms after a check's start: reported 2.01 s after the change), 2 of 400
/// at ±2.5 % (seeds 39, −10 %, and 151); 0 of 400 without jitter.
#[test]
fn a_large_pit_change_is_reported_within_the_stated_time() {
    let pit = REFS_C.iter().position(|r| r.0 == "pit").unwrap();
    let mut bad = Vec::new();
    let mut worlds = 0;
    for jit in [5 * MS, 12_500 * US] {
        for size in [100_000_000, 120_000_000] {
            for seed in seed_list(seeds() * 2) {
                worlds += 1;
                let (out, desc, _) = run_c(seed, pit, size, jit);
                for b in out.bad {
                    bad.push(format!(
                        "seed {seed} ({desc}, jitter ±{} ms): {b}",
                        jit / MS
                    ));
                }
            }
        }
    }
    eprintln!(
        "PIT ±10/12 % detection: {} failures in {worlds} worlds",
        bad.len()
    );
    assert!(bad.is_empty(), "{} of {worlds}: {bad:#?}", bad.len());
}

/// Family C (*Detection time*, *False alarms*, `bound_ppb`): the acceptance grid under
/// delayed reads. See the module docs.
#[test]
fn acceptance_grid_under_delayed_reads() {
    let mut bad = Vec::new();
    let (mut worlds, mut checks) = (0, 0);
    let mut lines = Vec::new();
    for (r, refc) in REFS_C.iter().enumerate() {
        for size in SIZES_C {
            let (mut det, mut above, mut missed) = (Vec::new(), 0, 0);
            for seed in seed_list(seeds()) {
                // The hook's jitter ±2.5 %: "well under the jumps to be told, which are at
                // least 12.5 % of a period" (the cadence rule's assumption, (a)).
                let (mut out, desc, n) = run_c(seed, r, size, 12_500 * US);
                out.bad.extend(out.fault.take());
                if pit_large(r, size) {
                    // Judged by the two PIT tests above.
                    out.bad.clear();
                }
                worlds += 1;
                checks += n;
                if out.above {
                    above += 1;
                }
                match out.detect_s {
                    Some(d) => det.push(d),
                    None => missed += 1,
                }
                for b in out.bad {
                    bad.push(format!("seed {seed} ({desc}): {b}"));
                }
            }
            lines.push(format!(
                "{} ±{} ppb: {above} above threshold, reported {} (p50 {:.2} s, max {:.2} s), not reported {missed}",
                refc.0,
                size,
                det.len(),
                pct(&mut det.clone(), 0.5),
                pct(&mut det, 1.0)
            ));
        }
    }
    eprintln!(
        "C: {worlds} worlds, {checks} checks, {} failures",
        bad.len()
    );
    for l in lines {
        eprintln!("  {l}");
    }
    assert!(bad.is_empty(), "{} failures: {bad:#?}", bad.len());
}

/// Family D ([`WallClock`] over a recalibrated clock). One world: a 1 GHz counter against
/// HPET / ACPI PM / PIT at P 0.5 s; the wall time set; a slew of `off` ns at `ppm` started;
/// the counter's rate changed by `ppb` mid-slew; the watchdog reports and steers. The wall
/// time is read every 1–50 ms of true time (reads that cost nothing: the wall clock and the
/// clock see the same counter value) and around every check.
fn run_d(seed: u64) -> (Vec<String>, String, usize, [bool; 2]) {
    let mut s = seed.wrapping_mul(0xd1b5_4a32_d192_ed03) ^ 0xd0d0;
    let (rname, rhz, rbits, rcost) = REFS_C[(mix(&mut s) % 3) as usize];
    let mut w = World::new(mix(&mut s), 1_000_000_000_000, 64, rhz, rbits);
    w.r_cost = rcost;
    w.r_jit = rcost / 5;
    w.r_delay = (50_000, MS);
    let start = start_rate(w.truth(), 0.0, 500);
    let w = Rc::new(RefCell::new(w));
    let clock = Clock::new(SimCounter(w.clone()), start);
    let mut wd = Watchdog::new(SimRef(w.clone()), start);
    let wall = WallClock::new(&clock);
    let mut bad = Vec::new();
    let read = |w: &Rc<RefCell<World>>| {
        w.borrow_mut().free = true;
        let c = clock.now().as_nanos();
        let u = wall.unix_ns();
        let rem = wall.slew_remaining_ns();
        w.borrow_mut().free = false;
        (c, u, rem)
    };
    w.borrow_mut().free = true;
    let _ = wall.set(1_700_000_000_000_000_000, clock.now());
    w.borrow_mut().free = false;
    let off = logu(&mut s, 1e5, 5e7) as i64 * if mix(&mut s) & 1 == 0 { 1 } else { -1 };
    let ppm = logu(&mut s, 50.0, 250_000.0) as u32;
    let ppb =
        logu(&mut s, 10_000.0, 100_000_000.0) as i128 * if mix(&mut s) & 1 == 0 { 1 } else { -1 };
    let mut readings: Vec<(u64, u64)> = Vec::new();
    let mut reported = 0;
    let mut steers0 = 0;
    let mut slew_at = None;
    let mut n_checks = 0;
    // Clock times of the recalibrations (`true`: a reported change; `false`: a steer).
    let mut recals: Vec<(u64, bool)> = Vec::new();
    // Checks every 0.5 s; the slew at check 10; the change 1–3 s into the slew (before its end
    // where it is long enough).
    let slew_len_ns = (off.unsigned_abs() as u128 * 1_000_000).div_ceil(u128::from(ppm)) as u64;
    let change_after = unif(&mut s, 100, 3_000) * MS;
    let mut t_change = 0;
    let mut d0 = 0i128;
    for i in 0..120 {
        // Readings through the period.
        let mut left = 500 * MS;
        while left > 0 {
            let d = unif(&mut s, MS, 50 * MS).min(left);
            w.borrow_mut().t += d;
            left -= d;
            let (c, u, _) = read(&w);
            readings.push((c, u.unwrap_or(0)));
        }
        if i == 10 {
            let (c, u, _) = read(&w);
            d0 = i128::from(u.unwrap()) - i128::from(c);
            w.borrow_mut().free = true;
            if wall.slew(off, ppm).is_ok() {
                slew_at = Some(c);
            }
            w.borrow_mut().free = false;
            t_change = w.borrow().t + change_after;
            let mut ww = w.borrow_mut();
            let base = ww.ctr.rate_at(t_change);
            ww.ctr.set(t_change, base + base * ppb / 1_000_000_000);
        }
        if i == 9 {
            steers0 = wd.health().steers;
        }
        let (c, u, _) = read(&w);
        readings.push((c, u.unwrap_or(0)));
        let mhz0 = clock.scale().millihz();
        let v = wd.check(&clock);
        n_checks += 1;
        if matches!(v, Watch::Changed { .. }) && w.borrow().t > t_change && t_change > 0 {
            reported += 1;
        }
        let (c, u, _) = read(&w);
        readings.push((c, u.unwrap_or(0)));
        if clock.scale().millihz() != mhz0 {
            recals.push((c, matches!(v, Watch::Changed { .. })));
        }
    }
    let desc = format!(
        "{rname}, slew {off:+} ns at {ppm} ppm ({:.3} s), change {ppb:+} ppb {:.1} s into it",
        slew_len_ns as f64 / 1e9,
        change_after as f64 / SEC as f64
    );
    let Some(b) = slew_at.map(|c| c + 100_000) else {
        bad.push("the slew was refused".into());
        return (bad, desc, n_checks, [false; 2]);
    };
    // Never back; Δwall within Δclock·(1 ± ppm) + 1 ns (outside the slew: Δwall = Δclock).
    for p in readings.windows(2) {
        let ((c0, u0), (c1, u1)) = (p[0], p[1]);
        if u1 < u0 {
            bad.push(format!(
                "wall back by {} ns at clock {c1} (Δclock {})",
                u0 - u1,
                c1 as i128 - c0 as i128
            ));
            break;
        }
        let dc = c1.saturating_sub(c0) as u128;
        let du = u128::from(u1 - u0);
        let hi = dc + dc * u128::from(ppm) / 1_000_000 + 1;
        let lo = (dc - dc * u128::from(ppm) / 1_000_000).saturating_sub(1);
        if du > hi || du < lo {
            bad.push(format!(
                "wall moved {du} ns over {dc} ns of clock time at clock {c1} (slew {ppm} ppm)"
            ));
            break;
        }
    }
    // The end: exactly the offset absorbed, on time.
    let end = b + slew_len_ns;
    for &(c, u) in &readings {
        let d = i128::from(u) - i128::from(c) - d0;
        if c >= end && d != i128::from(off) {
            bad.push(format!(
                "at clock {c} (end {end}) the wall is {d} ns off its start, not {off}"
            ));
            break;
        }
        if c < b && c > slew_at.unwrap() && d != 0 {
            bad.push(format!("before the handover the wall moved {d} ns off"));
            break;
        }
        if c >= b && c < end {
            let expect = (i128::from(c - b) * i128::from(ppm) / 1_000_000)
                .min(i128::from(off.abs()))
                * i128::from(off.signum());
            if d != expect {
                bad.push(format!(
                    "mid-slew at clock {c}: {d} ns absorbed, the formula says {expect}"
                ));
                break;
            }
        }
    }
    // What is left at the end: 0 past the slew's end, else the formula's remainder.
    let (c, _, rem) = read(&w);
    let left = if c >= end {
        0
    } else {
        let done = (i128::from(c.saturating_sub(b)) * i128::from(ppm) / 1_000_000)
            .min(i128::from(off.abs()));
        (i128::from(off.abs()) - done) * i128::from(off.signum())
    };
    if i128::from(rem) != left {
        bad.push(format!(
            "slew_remaining_ns {rem} at clock {c} (end {end}), the formula leaves {left}"
        ));
    }
    if reported == 0 && ppb.unsigned_abs() > 50_000 {
        bad.push(format!(
            "the change was not reported (steers {} since)",
            wd.health().steers - steers0
        ));
    }
    let end_b = b + slew_len_ns;
    let spans = |changed: bool| {
        recals
            .iter()
            .any(|&(c, ch)| ch == changed && c >= b && c < end_b)
    };
    (bad, desc, n_checks, [spans(true), spans(false)])
}

/// Family D: [`WallClock`] over a clock the watchdog recalibrates. See the module docs.
#[test]
fn wall_clock_across_recalibrations() {
    let mut bad = Vec::new();
    let (mut worlds, mut checks, mut across_change, mut across_steer) = (0, 0, 0, 0);
    for seed in seed_list(seeds() * 4) {
        let (b, desc, n, spans) = run_d(seed);
        worlds += 1;
        checks += n;
        across_change += usize::from(spans[0]);
        across_steer += usize::from(spans[1]);
        for x in b {
            bad.push(format!("seed {seed} ({desc}): {x}"));
        }
    }
    eprintln!(
        "D: {worlds} worlds, {checks} checks, {} failures; slews across a reported change {across_change}, across a steer {across_steer}",
        bad.len()
    );
    assert!(bad.is_empty(), "{} failures: {bad:#?}", bad.len());
}

/// Family B's one-offs (the finding's figures): the worlds of `narrow_counts_disturbed_spin`
/// with one reference stand-still (1–10 ms) or step (±1–10 ms of ticks, at least three times
/// the widest steady interval bound) 0–7 ms into one check. At `BARETIME_ADV_SEEDS=100`, 3 of
/// 400 worlds alarmed (seeds 74, 191, 266: the module docs' table), each a stand-still that
/// overlapped a check's reads (a stalled read inside the check, or the spin), the kinds of the
/// two minimal findings below; 0 of the steps. At the default 8 seeds none shows.
#[test]
#[ignore = "finding: (d): \"Only the counter's own reads can blame it\": seed 191 (PIT vs 1.16 GHz, P 57 ms): the reference still 8.09 ms (14 % of the period) across a check whose read stalled: CounterJumped by the stand-still; 1 of 400 worlds at BARETIME_ADV_SEEDS=100 (3 of 400 before the spin's halves and ReferenceStill across a check's reads)"]
fn narrow_counts_one_off_reference_faults() {
    let mut bad = Vec::new();
    let mut worlds = 0;
    for seed in seed_list(seeds() * 4) {
        let (b, desc, _, _) = run_b(seed, true);
        worlds += 1;
        for x in b {
            bad.push(format!("seed {seed} ({desc}): {x}"));
        }
    }
    eprintln!("B one-offs: {worlds} worlds, {} failures", bad.len());
    assert!(bad.is_empty(), "{} failures: {bad:#?}", bad.len());
}

/// A quiet world for the findings' minimal inputs: a counter of `c_hz` (`c_bits`) against a
/// reference `(Hz, bits, read cost ps)`, steady reads, no delays, start bound 200 ppb.
fn quiet(seed: u64, c_hz: u64, c_bits: u32, r: (u64, u32, u64)) -> Sim {
    let mut s = seed ^ 0x9a1e7;
    let mut w = World::new(mix(&mut s), u128::from(c_hz) * 1000, c_bits, r.0, r.1);
    w.r_cost = r.2;
    w.r_jit = r.2 / 10;
    let start = start_rate(w.truth(), 100.0, 200);
    Sim::new(w, start)
}

/// Runs `sim` `before` checks at `period`, then calls `at_check` with the world and the true
/// time the next check starts, runs that check and `after` more: the records from that check
/// on.
fn scenario(
    sim: &mut Sim,
    period: u64,
    before: usize,
    after: usize,
    at_check: impl FnOnce(&mut World, u64),
) -> Vec<Rec> {
    sim.run(before, period, 0);
    sim.advance(period);
    let t = sim.w.borrow().t;
    at_check(&mut sim.w.borrow_mut(), t);
    sim.check(true);
    sim.run(after, period, 0);
    sim.recs[before..].to_vec()
}

/// The reference stands still for `d` ps from `from` ps on.
fn stand_still(w: &mut World, from: u64, d: u64) {
    let r = w.ref_mhz;
    w.refr.set(from, 0);
    w.refr.set(from + d, r);
}

/// One line per record: the verdicts, the clock's error and `bound_ppb`.
fn summary(recs: &[Rec]) -> String {
    recs.iter()
        .map(|r| format!("{} (err {:.0}, bound {})", r.v.token(), r.err, r.bound))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Finding (*False alarms*): a 64-bit reference (HPET, 14.318 MHz, read in 1 µs) that stands
/// still for 2 ms, 0.5 ms of it before a check's reads and 1.5 ms after, under a 1 GHz counter
/// at P = 0.5 s: the interval before the check is 1 000 ppm off (`Unconfirmed`), the next,
/// further off the same way, 3 000 ppm: [`Watch::Changed`] by the fast-ramp rule ("two
/// consecutive intervals off on the same side, the second further off"), the clock set
/// 3 005 ppm off (under a `bound_ppb` of 5 003 ppm that covers it), and a second `Changed`
/// back two checks later. At `BARETIME_ADV_SEEDS=100`: 100 of 100 seeds; 60 ms from 10 ms
/// before a check, 100 of 100 (the clock 11.1 % off for two periods); at P = 57 ms, 8 ms from
/// 4 ms before, 24 of 100. A stand-still split evenly around the check: about 6 of 20 seeds
/// (a probe while writing this). The counter ran at one rate throughout; the reference's
/// fault reads as a counter's fast ramp.
#[test]
fn a_reference_standing_still_across_a_check_is_no_change() {
    let mut bad = Vec::new();
    let mut worlds = 0;
    for (p_ms, d_us, before_us) in [
        (500u64, 2_000u64, 500u64),
        (500, 60_000, 10_000),
        (57, 8_000, 4_000),
    ] {
        for seed in seed_list(seeds()) {
            worlds += 1;
            let mut sim = quiet(seed, 1_000_000_000, 64, (14_318_180, 64, 1_000_000));
            let post = scenario(&mut sim, p_ms * MS, 30, 6, |w, t| {
                stand_still(w, t - before_us * US, d_us * US)
            });
            if post.iter().any(|r| is_alarm(&r.v)) {
                bad.push(format!(
                    "seed {seed}, P {p_ms} ms, still {d_us} µs from {before_us} µs before a check: {}",
                    summary(&post[..4])
                ));
            }
        }
    }
    eprintln!(
        "stand-still across a check: {} of {worlds} worlds alarmed",
        bad.len()
    );
    assert!(bad.is_empty(), "{} of {worlds}: {bad:#?}", bad.len());
}

/// Finding (*Widths*, (d)): a 16-bit counter at 1 MHz (65.5 ms a wrap) under a 64-bit 10 MHz
/// reference, P = 1 s: every check measures the rate with a short spin (a change of 12.5 %
/// could move the count by half a wrap). The reference stands still for 1 ms from 0.5 ms into
/// one check's reads (inside the spin, about 0.7 ms long): the spin's rate is wrong, the
/// wraps are miscounted, and the honest counter is [`Watch::CounterJumped`] — (d), "distrust
/// the counter" — then [`Watch::Changed`] to a wrong rate (1 000 ppm off, under a `bound_ppb` of 31 %)
/// and back two checks later: 100 of 100 seeds at `BARETIME_ADV_SEEDS=100`. Family B's one-offs (400 worlds at 100 seeds) showed it with a 26-bit counter at
/// 2.07 GHz (seed 74: by one wrap, 32.47 ms; a draft of the family whose stalls could land in
/// the next check also showed a 16-bit one at 478 kHz at P 4.46 s, by ten wraps, 1.37 s). The *Widths* section
/// says a disturbed measurement ("a count that stood still") leaves the wraps to the rate in
/// force; a reference that stood still for part of the spin is not caught.
#[test]
fn a_reference_standing_still_in_the_spin_blames_no_counter() {
    let mut bad = Vec::new();
    let mut worlds = 0;
    for seed in seed_list(seeds()) {
        worlds += 1;
        let mut sim = quiet(seed, 1_000_000, 16, (10_000_000, 64, 300_000));
        let post = scenario(&mut sim, SEC, 30, 6, |w, t| {
            stand_still(w, t + 500 * US, MS)
        });
        if post.iter().any(|r| is_alarm(&r.v)) {
            bad.push(format!(
                "seed {seed}: the check took {:.2} ms, {} reference reads: {}",
                (post[0].t1 - post[0].t0) as f64 / MS as f64,
                post[0].reads,
                summary(&post[..4])
            ));
        }
    }
    eprintln!(
        "stand-still in the spin: {} of {worlds} worlds alarmed",
        bad.len()
    );
    assert!(bad.is_empty(), "{} of {worlds}: {bad:#?}", bad.len());
}

/// Finding ((c)'s `rate`: "The new rate, measured over the confirming interval, with its
/// bound"; (c): "the report waits for an interval wholly after it"): the PIT (16 bits) under a
/// 1 GHz counter, P = 0.5 s, no jitter, no delayed reads: the counter's rate changes by −10 %
/// 50–500 µs into a check whose reads take 1.13 ms (429 reference reads: the spin). The check
/// is `Unconfirmed`, the next `Changed` — to a rate 8–108 ppm off the counter's under its own
/// bound of 7 ppm (0.5 ms of the old rate in a 0.5 s interval is 100 ppm), and the clock set
/// there until a second `Changed` two checks later (`bound_ppb`, 10 %, covered it). At
/// `BARETIME_ADV_SEEDS=100` (500 seeds per offset): 445 of 500 at 50 µs, 500 of 500 at 200 and
/// 500 µs, 7.2–115.8 ppm off. A probe at 40 seeds while writing this: 0 at 2, 10, 1 000 and
/// 2 000 µs, and 0 for +10 %, −6 % and −2 % at any of these offsets. In the families at `BARETIME_ADV_SEEDS=100`: 4 of
/// 600 of family A (all PIT, the change "inside a check", −35 to +12 %, up to 146 ppm off under
/// 2.7), 32 of the 800 worlds of `a_large_pit_change_is_reported_within_the_stated_time`.
#[test]
fn a_change_inside_a_pit_checks_spin_sets_a_rate_inside_its_bound() {
    let mut bad = Vec::new();
    let mut worlds = 0;
    for x_us in [50u64, 200, 500] {
        for seed in seed_list(seeds() * 5) {
            worlds += 1;
            let mut sim = quiet(seed, 1_000_000_000, 64, (1_193_182, 16, 2_500_000));
            let post = scenario(&mut sim, 500 * MS, 30, 5, |w, t| {
                let base = w.ctr.rate_at(t);
                w.ctr.set(t + x_us * US, base - base / 10);
            });
            for r in &post {
                if let Watch::Changed { rate, .. } = r.v {
                    let off = (rate.as_millihz() as f64 - r.truth).abs() / r.truth * 1e9;
                    if off > rate.accuracy().bound_ppb() as f64 + 2.0 {
                        bad.push(format!(
                            "seed {seed}, -10 % {x_us} µs into a check ({:.3} ms, {} reads): \
                             Changed {off:.0} ppb off under {}: {}",
                            (post[0].t1 - post[0].t0) as f64 / MS as f64,
                            post[0].reads,
                            rate.accuracy().bound_ppb(),
                            summary(&post[..4])
                        ));
                        break;
                    }
                }
            }
        }
    }
    eprintln!("change inside the spin: {} of {worlds} worlds", bad.len());
    assert!(bad.is_empty(), "{} of {worlds}: {bad:#?}", bad.len());
}
