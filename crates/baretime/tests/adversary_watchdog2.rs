//! Second outside attack on `Watchdog` (`Watch`, `Unjudged`, `WatchdogHealth`), written from
//! its rustdoc and the README section "Keeping the rate right after boot: the watchdog" alone,
//! after the first (`adversary_watchdog.rs`, whose world-building helpers are copied here).
//!
//! What is new here: transients of every length and size, a change and back within the
//! detection time, ramps of both signs and several paces, a reference read whose latch
//! slides inside its bracket (a delay that ramps), coarse references against the window's
//! split over long runs, disturbances in step with the hook, a reference off its stated
//! rate, thousands of checks with narrow counts near their wraps, jittered hooks under a
//! gross change. Every case is a fixed, deterministic world. A test marked
//! `#[ignore = "finding: ..."]` is a promise found broken, with its minimal input.

use std::cell::RefCell;
use std::rc::Rc;

use baretime::{Accuracy, Clock, FnCounter, Frequency, Reference, Source, Watch, Watchdog};
const E15: u128 = 1_000_000_000_000_000;
const PS_PER_S: u128 = 1_000_000_000_000;

#[allow(dead_code)] // copied whole from adversary_watchdog.rs
#[derive(Clone, Copy, Debug)]
enum Ev {
    /// The counter's rate becomes this (mHz).
    CRate(u128),
    /// The counter stops (or runs again).
    CStop(bool),
    /// The counter steps by this many ticks.
    CJump(i64),
    /// The reference steps by this many ticks.
    RJump(i64),
    /// The reference's rate becomes this (mHz; 0: it stands still).
    RRate(u128),
}

struct Line {
    acc: u128,
    rate_mhz: u128,
    off: u64,
    bits: u32,
    stopped: bool,
}

impl Line {
    fn new(rate_mhz: u128, bits: u32, start: u64) -> Line {
        Line {
            acc: 0,
            rate_mhz,
            off: start,
            bits,
            stopped: false,
        }
    }
    fn adv(&mut self, dt: u128) {
        if !self.stopped {
            self.acc += dt * self.rate_mhz;
        }
    }
    fn value(&self) -> u64 {
        let v = ((self.acc / E15) as u64).wrapping_add(self.off);
        if self.bits >= 64 {
            v
        } else {
            v & ((1u64 << self.bits) - 1)
        }
    }
}

struct World {
    t: u128,
    c: Line,
    r: Line,
    c_cost: u128,
    r_cost: u128,
    rng: u64,
    /// A reference read is delayed one time in this many (0: never) by up to `delay_max`.
    delay_one_in: u64,
    delay_max: u128,
    events: Vec<(u128, Ev)>,
    /// Declared reference rate (mHz), for the truth "as the reference counts it".
    r_declared: u128,
    /// Every reference read is delayed by this (a stretch of disturbed checks).
    fixed_delay: u128,
    /// Reads made: (counter, reference).
    reads: (u64, u64),
}

impl World {
    fn rand(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        x
    }
    fn apply(&mut self, ev: Ev) {
        match ev {
            Ev::CRate(r) => self.c.rate_mhz = r,
            Ev::CStop(s) => self.c.stopped = s,
            Ev::CJump(j) => self.c.off = self.c.off.wrapping_add(j as u64),
            Ev::RJump(j) => self.r.off = self.r.off.wrapping_add(j as u64),
            Ev::RRate(r) => self.r.rate_mhz = r,
        }
    }
    fn advance(&mut self, dt: u128) {
        let end = self.t + dt;
        while !self.events.is_empty() && self.events[0].0 <= end {
            let (te, ev) = self.events.remove(0);
            let d = te.saturating_sub(self.t);
            self.c.adv(d);
            self.r.adv(d);
            self.t = self.t.max(te);
            self.apply(ev);
        }
        let d = end - self.t;
        self.c.adv(d);
        self.r.adv(d);
        self.t = end;
    }
    fn read_counter(&mut self) -> u64 {
        self.reads.0 += 1;
        self.advance(self.c_cost);
        self.c.value()
    }
    fn read_reference(&mut self) -> u64 {
        self.reads.1 += 1;
        let mut pre = 0;
        let mut post = 0;
        if self.delay_one_in != 0 && self.rand() % self.delay_one_in == 0 && self.delay_max > 0 {
            let d = (self.rand() as u128) % self.delay_max;
            pre = (self.rand() as u128) % (d + 1);
            post = d - pre;
        }
        self.advance(pre + self.fixed_delay + self.r_cost / 2);
        let v = self.r.value();
        self.advance(self.r_cost - self.r_cost / 2 + post);
        v
    }
    /// The counter's rate as the reference counts it, in mHz.
    fn truth_mhz(&self) -> u128 {
        self.c.rate_mhz * self.r_declared / self.r.rate_mhz.max(1)
    }
}

type W = Rc<RefCell<World>>;
type Ctr = FnCounter<Box<dyn Fn() -> u64>>;

struct SimRef {
    w: W,
    bits: u32,
    freq: Frequency,
}

impl Reference for SimRef {
    fn read(&mut self) -> u64 {
        self.w.borrow_mut().read_reference()
    }
    fn bits(&self) -> u32 {
        self.bits
    }
    fn frequency(&self) -> Frequency {
        self.freq
    }
    fn name(&self) -> &'static str {
        "sim"
    }
}

/// The reference kinds the brief names: (rate in mHz, bits).
const REFS: [(u128, u32); 6] = [
    (1_000_000, 64),      // a 1 kHz tick
    (32_768_000, 32),     // a 32 kHz RTC
    (3_579_545_000, 24),  // ACPI PM
    (14_318_180_000, 32), // HPET, 32-bit
    (10_000_000_000, 64), // a 10 MHz reference
    (1_193_182_000, 64),  // a PIT-rate counter, unwrapped
];

#[derive(Clone, Debug)]
struct Cfg {
    c_mhz: u128,
    c_bits: u32,
    c_start: u64,
    r_kind: usize,
    r_start: u64,
    /// The reference's true rate off its declared one, ppb (within `r_tol`).
    r_err_ppb: i64,
    r_tol: u64,
    /// The given rate's error against the truth, ppb (within `given_bound`).
    given_err_ppb: i64,
    given_bound: u64,
    c_cost_ns: u64,
    r_cost_ns: u64,
    delay_one_in: u64,
    delay_max_us: u64,
    seed: u64,
    tries: u32,
    slew: u64,
    /// The given rate is off the counter's *true* rate (not the reference's view of it).
    given_true: bool,
}

struct Rig {
    w: W,
    clock: Clock<Ctr>,
    wd: Watchdog<SimRef>,
    verdicts: Vec<Watch>,
}

fn mhz_off(base: u128, ppb: i64) -> u128 {
    (base as i128 + base as i128 * ppb as i128 / 1_000_000_000) as u128
}

fn rig(cfg: &Cfg) -> Rig {
    let (r_decl, r_bits) = REFS[cfg.r_kind];
    let r_true = mhz_off(r_decl, cfg.r_err_ppb);
    let world = World {
        t: 0,
        c: Line::new(cfg.c_mhz, cfg.c_bits, cfg.c_start),
        r: Line::new(r_true, r_bits, cfg.r_start),
        c_cost: cfg.c_cost_ns as u128 * 1000,
        r_cost: cfg.r_cost_ns as u128 * 1000,
        rng: cfg.seed | 1,
        delay_one_in: cfg.delay_one_in,
        delay_max: cfg.delay_max_us as u128 * 1_000_000,
        events: Vec::new(),
        r_declared: r_decl,
        fixed_delay: 0,
        reads: (0, 0),
    };
    let w = Rc::new(RefCell::new(world));
    let truth = w.borrow().truth_mhz();
    let base = if cfg.given_true { cfg.c_mhz } else { truth };
    let given = mhz_off(base, cfg.given_err_ppb) as u64;
    let rate = Frequency::from_millihz(
        given,
        Source::Calibrated,
        Accuracy::Measured {
            uncertainty_ppb: cfg.given_bound,
        },
    )
    .expect("rate in range");
    let wc = w.clone();
    let ctr: Ctr = FnCounter::new(Box::new(move || wc.borrow_mut().read_counter()), cfg.c_bits);
    let clock = Clock::new(ctr, rate);
    let rf = SimRef {
        w: w.clone(),
        bits: r_bits,
        freq: Frequency::from_millihz(
            r_decl as u64,
            Source::User,
            Accuracy::Nominal {
                tolerance_ppb: cfg.r_tol,
            },
        )
        .expect("ref rate"),
    };
    let wd = Watchdog::new(rf, rate)
        .with_tries(cfg.tries)
        .with_slew_ppb(cfg.slew);
    Rig {
        w,
        clock,
        wd,
        verdicts: Vec::new(),
    }
}

fn ppb_between(a: u128, b: u128) -> u128 {
    a.abs_diff(b) * 1_000_000_000 / b.max(1)
}

impl Rig {
    fn schedule(&self, at_ps: u128, ev: Ev) {
        let mut w = self.w.borrow_mut();
        w.events.push((at_ps, ev));
        w.events.sort_by_key(|e| e.0);
    }
    fn now_ps(&self) -> u128 {
        self.w.borrow().t
    }
    /// Advances `period` true time, then one check; asserts the clock's promises 1–2 across it
    /// (no step back; no jump beyond the true time the check took, at a rate within 12.5 %).
    fn hook(&mut self, period_ps: u128) -> Watch {
        self.w.borrow_mut().advance(period_ps);
        // The kernel's periodic update, as a narrow counter's clock needs (promise 5); not a
        // rate write.
        let _ = self.clock.update();
        let t0 = self.now_ps();
        let before = self.clock.now().as_nanos();
        let v = self.wd.check(&self.clock);
        let after = self.clock.now().as_nanos();
        let took_ns = (self.now_ps() - t0) / 1000;
        assert!(
            after >= before,
            "clock went back across a check: {before} -> {after} ({v})"
        );
        assert!(
            ((after - before) as u128) <= took_ns * 2 + 1_000,
            "clock jumped across a check: {} ns over {took_ns} ns ({v})",
            after - before
        );
        self.verdicts.push(v);
        v
    }
    fn clock_mhz(&self) -> u128 {
        self.clock.scale().millihz() as u128
    }
    fn counts_agree(&self) {
        let h = self.wd.health();
        let mut nv = 0;
        let mut st = 0;
        let mut ch = 0;
        let mut cf = 0;
        for v in &self.verdicts {
            // The documented tokens, one per variant.
            let token = match v {
                Watch::NoVerdict(_) => {
                    nv += 1;
                    "no_verdict"
                }
                Watch::Steady { .. } => {
                    st += 1;
                    "steady"
                }
                Watch::Changed { .. } => {
                    ch += 1;
                    "changed"
                }
                Watch::CounterStopped => {
                    cf += 1;
                    "counter_stopped"
                }
                Watch::CounterJumped { .. } => {
                    cf += 1;
                    "counter_jumped"
                }
                _ => "?",
            };
            assert_eq!(v.token(), token, "{v:?}");
        }
        assert_eq!(h.checks, self.verdicts.len() as u64, "{h:?}");
        assert_eq!(
            (h.no_verdict, h.steady, h.changed, h.counter_faults),
            (nv, st, ch, cf),
            "{h:?}"
        );
    }
}

fn alarm(v: &Watch) -> bool {
    matches!(
        v,
        Watch::Changed { .. } | Watch::CounterStopped | Watch::CounterJumped { .. }
    )
}

/// A quiet world for detection: no delays, a 64-bit counter, a fixed period.
fn quiet(c_mhz: u128, r_kind: usize, c_start: u64, seed: u64) -> Cfg {
    Cfg {
        c_mhz,
        c_bits: 64,
        c_start,
        r_kind,
        r_start: seed >> 7,
        r_err_ppb: 0,
        r_tol: 0,
        given_err_ppb: 0,
        given_bound: 1_000,
        c_cost_ns: 20,
        r_cost_ns: 500,
        delay_one_in: 0,
        delay_max_us: 0,
        seed,
        tries: 4,
        slew: 1_000,
        given_true: false,
    }
}

fn settled(cfg: &Cfg, checks: usize, p: u128) -> Rig {
    let mut rig = rig(cfg);
    for _ in 0..checks {
        let v = rig.hook(p);
        assert!(!alarm(&v), "{v} before any fault");
    }
    rig
}

fn tokens(v: &[Watch]) -> String {
    v.iter()
        .map(|v| match v {
            Watch::NoVerdict(u) => format!("nv:{u:?}"),
            v => v.token().to_string(),
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The clock's error against the truth and `bound_ppb`, now.
fn err_bound(rig: &Rig) -> (u128, u64) {
    let truth = rig.w.borrow().truth_mhz();
    (
        ppb_between(rig.clock_mhz(), truth),
        rig.wd.health().bound_ppb,
    )
}

const P: u128 = PS_PER_S / 2;

/// The detection time the docs give the change *back* (itself a change): three periods above
/// an interval's threshold, "seconds" below it (1 ppm within 5.3 s measured): 10 s.
const GRACE: u128 = 10 * PS_PER_S;

/// A rate excursion of `ppb` from `start` ps into an interval for `dur` ps, after 20 steady
/// checks, then `after` checks. `bound_ppb` is judged at every check whose interval began after
/// the excursion ended (the counter's rate has been constant since: the window's bound covers
/// the old rate "until the window since proves the new one" if the excursion was confirmed).
/// Returns the first violation, described.
fn excursion(
    c_mhz: u128,
    r_kind: usize,
    ppb: i64,
    start: u128,
    dur: u128,
    after: usize,
    grace: u128,
) -> Option<String> {
    let cfg = quiet(c_mhz, r_kind, 0, 5);
    let mut rig = settled(&cfg, 20, P);
    let t0 = rig.now_ps() + start;
    rig.schedule(t0, Ev::CRate(mhz_off(c_mhz, ppb)));
    rig.schedule(t0 + dur, Ev::CRate(c_mhz));
    let end = t0 + dur + grace;
    for i in 0..after {
        let began = rig.now_ps();
        rig.hook(P);
        if began >= end {
            let (e, b) = err_bound(&rig);
            if e > b as u128 + 1 {
                return Some(format!(
                    "c={c_mhz}mHz ref#{r_kind} ppb={ppb} start={start}ps dur={dur}ps: check {i} after, clock {e} ppb off, bound_ppb {b}; verdicts {}",
                    tokens(&rig.verdicts[20..])
                ));
            }
        }
    }
    None
}

/// Promise (bound_ppb a worst case while the rate has been constant since the window's
/// anchor; a one-off never (c), or if two intervals confirm it, bound_ppb "keeps covering the old
/// rate"): a transient shorter than an interval, of any size under 12.5 % and at any place,
/// never leaves the clock off beyond `bound_ppb` once it is over.
#[test]
fn transients_shorter_than_an_interval() {
    let found = transient_sweep(&[-20_000, 200_000, -5_000_000, 50_000_000, 120_000_000]);
    assert!(
        found.is_empty(),
        "{} cases:\n{}",
        found.len(),
        found.join("\n")
    );
}

/// The same at 2 ppm (under the interval threshold): 1 case of 36 leaves the clock beyond
/// bound_ppb (`a_sub_period_transient_leaves_bound_ppb_short`, minimal).
#[test]
fn small_transients_shorter_than_an_interval() {
    let found = transient_sweep(&[2_000]);
    assert!(
        found.is_empty(),
        "{} cases:\n{}",
        found.len(),
        found.join("\n")
    );
}

/// Minimal: 1 GHz counter, ACPI PM reference (3.579545 MHz, 24 bits), reads 20 ns / 500 ns,
/// P = 0.5 s, 20 steady checks, then +2 ppm from 0.25 s into the next interval for 0.495 s
/// (under one period, straddling a check): every check Steady (never reported); two checks
/// after it the clock is 93 ppb off while bound_ppb says 79 (the counter's rate has been back at
/// its old value since; the clock is off by the transient's share of the window).
#[test]
fn a_sub_period_transient_leaves_bound_ppb_short() {
    let f = excursion(1_000_000_000_000, 2, 2_000, P / 2, P * 990 / 1000, 40, 0);
    assert!(f.is_none(), "{}", f.unwrap_or_default());
}

fn transient_sweep(sizes: &[i64]) -> Vec<String> {
    let mut found = Vec::new();
    for &(c, r) in &[
        (1_000_000_000_000u128, 4usize),
        (50_000_000_000, 0),
        (1_000_000_000_000, 2),
    ] {
        for &ppb in sizes {
            for &dur in &[50u128, 300, 600, 990] {
                for &start in &[10u128, 500, 900] {
                    if let Some(f) = excursion(c, r, ppb, P * start / 1000, P * dur / 1000, 40, 0) {
                        found.push(f);
                    }
                }
            }
        }
    }
    found
}

fn change_and_back_sweep(sizes: &[i64]) -> Vec<String> {
    let mut found = Vec::new();
    for &(c, r) in &[(1_000_000_000_000u128, 4usize), (1_000_000_000_000, 2)] {
        for &ppb in sizes {
            for &dur in &[1_000u128, 1_500, 2_000, 3_000, 5_000, 10_000, 20_000] {
                for &start in &[100u128, 700] {
                    if let Some(f) =
                        excursion(c, r, ppb, P * start / 1000, P * dur / 1000, 120, GRACE)
                    {
                        found.push(f);
                    }
                }
            }
        }
    }
    found
}

/// Promise: as above, for a change that comes back within (or just after) the detection time:
/// 1 to 10 periods, sizes above the interval threshold (100 ppm, 1 %). Judged from the detection
/// time the docs give the change back (`GRACE`) after it, for 60 s.
#[test]
fn a_change_and_back_within_the_detection_time() {
    let found = change_and_back_sweep(&[-100_000, 10_000_000]);
    assert!(
        found.is_empty(),
        "{} cases:\n{}",
        found.len(),
        found.join("\n")
    );
}

/// The same for sizes at and under the interval threshold (1, 3, 10 ppm; the threshold here is
/// about 4.2 ppm): 12 of 56 cases leave the clock off beyond bound_ppb long after the change
/// back (see `a_small_excursion_leaves_bound_ppb_short` for the minimal one).
#[test]
fn a_small_change_and_back_within_the_detection_time() {
    let found = change_and_back_sweep(&[1_000, -3_000, 10_000]);
    assert!(
        found.is_empty(),
        "{} cases:\n{}",
        found.len(),
        found.join("\n")
    );
}

/// Promise: bound_ppb is "how far the clock's rate can be from the counter's rate", a worst case
/// "while the rate is constant since the window's start"; "between a change and its detection
/// (seconds below an interval's threshold) it does not hold" — so a kernel reads it as a worst
/// case again seconds after any change. A change that comes back before it is seen is never
/// reported at all, and leaves the window's rate (and the clock steered to it) off by the
/// excursion's share of the window, while the window's bound shrinks at the same 1/T pace: the
/// bound stays under the true error for over a minute, every check Steady.
///
/// Minimal: 1 GHz counter, 10 MHz 64-bit reference, reads 20 ns / 500 ns, P = 0.5 s, 20 steady
/// checks, then the counter +1 ppm from 0.05 s into the next interval for 1.5 s, then back: every
/// check Steady; from 13 s on (judged after the docs' 10 s of grace) the clock is 86 ppb off
/// while bound_ppb says 63, and it stays beyond for 137 checks (until ~81 s after).
/// (`probe_small_excursion_long_after` prints the spans: -3 ppm for 0.5 s, reported Changed by the
/// window split, leaves it short from 40 s to 122 s after: 36 ppb off, bound 28.)
#[test]
fn a_small_excursion_leaves_bound_ppb_short() {
    let f = excursion(1_000_000_000_000, 4, 1_000, P / 10, 3 * P, 120, GRACE);
    assert!(f.is_none(), "{}", f.unwrap_or_default());
}

/// A ramp of `ppb_per_s` from 60 s of steady checks on, for `secs`: (first Changed, in s into
/// the ramp; the first violation of bound_ppb judged from `judge_from` s into the ramp).
fn ramp(
    r_kind: usize,
    ppb_per_s: i64,
    secs: u128,
    judge_from: u128,
) -> (Option<f64>, Option<String>) {
    let c = 1_000_000_000_000u128;
    let cfg = quiet(c, r_kind, 0, 9);
    let mut rig = settled(&cfg, 120, P);
    let t_start = rig.now_ps();
    let mut first = None;
    let mut viol = None;
    let n = (secs * PS_PER_S / P) as usize;
    for i in 0..n {
        // The rate moves at mid-interval by the ramp's pace over one period (a staircase of
        // half-second steps: within 1/2 period of a steady ramp).
        let t = rig.now_ps() + P / 2;
        let s_into = (t - t_start) as i128;
        let off = ppb_per_s as i128 * s_into / PS_PER_S as i128;
        rig.schedule(t, Ev::CRate(mhz_off(c, off as i64)));
        let v = rig.hook(P);
        let at = (rig.now_ps() - t_start) as f64 / PS_PER_S as f64;
        if matches!(v, Watch::Changed { .. }) && first.is_none() {
            first = Some(at);
        }
        let (e, b) = err_bound(&rig);
        // The staircase's own step is pace·P; allow it.
        let slack = (ppb_per_s.unsigned_abs() as u128) / 2 + 1;
        if at >= judge_from as f64 && e > b as u128 + slack && viol.is_none() {
            viol = Some(format!(
                "ref#{r_kind} {ppb_per_s} ppb/s: check {i} ({at:.1} s into the ramp), clock {e} ppb off, bound_ppb {b}"
            ));
        }
    }
    (first, viol)
}

/// Promise: a ramp is seen "when s·T/2 exceeds the parts' bounds", and bound_ppb "carries the
/// pace last seen: exact for a steady ramp". Both signs, paces 10 ppb/s to 1 ppm/s, 10 MHz
/// reference and ACPI PM; bound_ppb judged from 60 s into the ramp.
#[test]
fn ramps_of_both_signs_and_several_paces() {
    let mut found = Vec::new();
    let mut seen = Vec::new();
    for &r in &[4usize, 2] {
        for &s in &[10i64, -10, 100, -100, 1_000, -1_000] {
            let (first, viol) = ramp(r, s, 120, 60);
            if std::env::var("ATK_VERBOSE").is_ok() {
                println!("{viol:?}");
            }
            seen.push(format!("ref#{r} {s} ppb/s: first Changed {first:?} s"));
            if let Some(v) = viol {
                found.push(v);
            }
        }
    }
    println!("{}", seen.join("\n"));
    assert!(
        found.is_empty(),
        "{} cases:\n{}\n{}",
        found.len(),
        found.join("\n"),
        seen.join("\n")
    );
}

/// A long run at constant rates under `cfg`, the hook's period jittered by up to ±`jit`
/// permille around `p`, with `delay` applied to every `every`-th check's reference reads
/// (a disturbance in step with the hook; 0: none), and the latch sliding inside its bracket
/// by up to `slide` ps (a delay that ramps up and down, slowly). Every check: no (c) or (d),
/// clock within bound_ppb; at the end, health's counts match.
fn long_run(
    cfg: &Cfg,
    n: usize,
    p: u128,
    jit: u128,
    every: usize,
    delay: u128,
    slide: u128,
) -> Option<String> {
    let mut rig = rig(cfg);
    let mut x = cfg.seed | 1;
    for i in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let period = if jit == 0 {
            p
        } else {
            p * (1000 - jit + (x as u128 % (2 * jit + 1))) / 1000
        };
        {
            let mut w = rig.w.borrow_mut();
            let slid = if slide == 0 {
                0
            } else {
                // A triangle over 400 checks.
                let k = (i % 400) as u128;
                slide * if k < 200 { k } else { 400 - k } / 200
            };
            w.fixed_delay = slid
                + if every != 0 && i % every == 0 {
                    delay
                } else {
                    0
                };
        }
        let v = rig.hook(period);
        let (e, b) = err_bound(&rig);
        if alarm(&v) || (i > 0 && e > b as u128 + 1) {
            let lo = rig.verdicts.len().saturating_sub(8);
            return Some(format!(
                "{cfg:?} p={p} jit={jit} every={every} delay={delay} slide={slide}: check {i}: {v}, clock {e} ppb off, bound_ppb {b}; last verdicts {}",
                tokens(&rig.verdicts[lo..])
            ));
        }
    }
    rig.counts_agree();
    None
}

fn base(c_mhz: u128, c_bits: u32, c_start: u64, r_kind: usize, r_start: u64) -> Cfg {
    Cfg {
        c_bits,
        r_start,
        ..quiet(c_mhz, r_kind, c_start, 77)
    }
}

/// Promise (no false alarm at constant rates "whatever the reads' delays, jitter and stalls";
/// bound_ppb a worst case): thousands of checks; narrow counters and references started just
/// before their wraps; coarse references (1 kHz tick, 32 kHz RTC) against periods that are
/// not multiples of their step (the window's split meeting the quantization); jittered hooks;
/// random delays that reject checks.
#[test]
fn long_runs_at_constant_rates() {
    let mut found = Vec::new();
    let near = |bits: u32, back: u64| {
        if bits >= 64 {
            u64::MAX - back
        } else {
            (1u64 << bits) - back
        }
    };
    let cases: Vec<(Cfg, u128, u128)> = vec![
        // 32-bit 1 GHz counter (4.3 s wrap) against ACPI PM (24 bits, 4.7 s), both near wraps.
        (
            base(1_000_000_000_000, 32, near(32, 1000), 2, near(24, 10)),
            P,
            100,
        ),
        // 64-bit counter about to wrap, 1 kHz tick, period 0.3701 s.
        (
            base(50_000_000_000, 64, near(64, 5_000_000), 0, 7),
            PS_PER_S * 3701 / 10_000,
            0,
        ),
        // 24 MHz 32-bit counter (179 s wrap), 32 kHz RTC (32 bits) near its wrap, 0.7003 s.
        (
            base(24_000_000_000, 32, 3, 1, near(32, 20_000)),
            PS_PER_S * 7003 / 10_000,
            200,
        ),
        // 2.5 GHz counter, 32-bit HPET near its wrap (300 s), jitter ±40 %.
        (base(2_500_000_000_000, 64, 0, 3, near(32, 100_000)), P, 400),
        // A PIT-rate counter as reference, 1 GHz 32-bit counter.
        (base(1_000_000_000_000, 32, near(32, 1), 5, 0), P, 50),
    ];
    for (mut cfg, p, jit) in cases.clone() {
        // Random delays: one read in three delayed up to 200 µs (checks rejected or wide).
        cfg.delay_one_in = 3;
        cfg.delay_max_us = 200;
        cfg.r_tol = 50_000;
        cfg.r_err_ppb = -37_000;
        if let Some(f) = long_run(&cfg, 3000, p, jit, 0, 0, 0) {
            found.push(f);
        }
    }
    for (cfg, p, jit) in cases {
        // Quiet reads but thousands of checks.
        if let Some(f) = long_run(&cfg, 3000, p, jit, 0, 0, 0) {
            found.push(f);
        }
    }
    assert!(
        found.is_empty(),
        "{} cases:\n{}",
        found.len(),
        found.join("\n")
    );
}

/// Promise: a read delayed by `D` "only widens its bracket": a delay in step with the hook
/// (every 2nd or 3rd check, accepted-wide or rejected), and a latch that slides slowly inside
/// its bracket (a delay ramping up and down: a drift of the latch point that could read as a
/// rate), at constant rates: no (c) or (d), bound_ppb honest.
#[test]
fn disturbances_in_step_and_sliding_latches() {
    let mut found = Vec::new();
    for &r in &[4usize, 2, 0, 1] {
        let c = if r == 0 || r == 1 {
            50_000_000_000
        } else {
            1_000_000_000_000
        };
        let cfg = quiet(c, r, 11, 3);
        for &(every, delay, slide) in &[
            (2usize, 400_000u128, 0u128), // 400 ns: accepted, wider
            (3, 300_000_000, 0),          // 300 µs: rejected
            (2, 2_000_000_000, 0),        // 2 ms
            (0, 0, 500_000),              // latch slides 0..500 ns
            (0, 0, 1_000_000),            // 0..1 µs (some rejected)
            (4, 450_000, 450_000),
        ] {
            if let Some(f) = long_run(&cfg, 1200, P, 0, every, delay, slide) {
                found.push(f);
            }
        }
    }
    assert!(
        found.is_empty(),
        "{} cases:\n{}",
        found.len(),
        found.join("\n")
    );
}

/// Promise ("the cadence rule needs the hook to run at a steady period, its jitter well under
/// the jumps to be told"; "a counter that persistently runs at a new rate, whatever the size"
/// is (c)): a gross change under a hook jittered by ±5 % is Changed within a few checks, and
/// the clock is within bound_ppb 20 checks later.
#[test]
fn gross_change_under_a_jittered_hook() {
    let mut found = Vec::new();
    for &r in &[4usize, 2, 3] {
        for &ppb in &[130_000_000i64, 500_000_000, -300_000_000, -126_000_000] {
            let c = 1_000_000_000_000u128;
            let cfg = quiet(c, r, 0, 21);
            let mut rig = settled(&cfg, 20, P);
            rig.schedule(rig.now_ps() + P / 3, Ev::CRate(mhz_off(c, ppb)));
            let mut x = 0x9E37_79B9u64;
            let mut changed_at = None;
            for i in 0..40 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let period = P * (950 + (x as u128 % 101)) / 1000;
                let v = rig.hook(period);
                if matches!(v, Watch::Changed { .. }) && changed_at.is_none() {
                    changed_at = Some(i);
                }
            }
            let (e, b) = err_bound(&rig);
            if changed_at.is_none_or(|i| i > 8) || e > b as u128 + 1 {
                found.push(format!(
                    "ref#{r} {ppb} ppb: Changed at check {changed_at:?}, clock {e} ppb off, bound {b}; {}",
                    tokens(&rig.verdicts[20..])
                ));
            }
        }
    }
    assert!(
        found.is_empty(),
        "{} cases:\n{}",
        found.len(),
        found.join("\n")
    );
}

/// Probe (docs): a reference that persistently runs off its declared rate, within and beyond its
/// stated tolerance, with the clock started at the counter's *true* rate (from elsewhere):
/// within tolerance, no (c) or (d) (the first baseline's bound includes the tolerance); beyond
/// it, what the verdicts are. Within tolerance is asserted; beyond is printed for the report.
#[test]
fn a_reference_off_its_declared_rate() {
    let mut out = Vec::new();
    for &(err, tol) in &[
        (50_000i64, 100_000u64),
        (-99_000, 100_000),
        (500_000, 100_000),
        (-2_000_000, 100_000),
    ] {
        let mut cfg = quiet(1_000_000_000_000, 4, 0, 31);
        cfg.r_err_ppb = err;
        cfg.r_tol = tol;
        cfg.given_true = true;
        let mut rig = rig(&cfg);
        for _ in 0..60 {
            rig.hook(P);
        }
        let (e, b) = err_bound(&rig);
        let line = format!(
            "ref off {err} ppb (tol {tol}): {}; clock {e} ppb off the reference's view, bound_ppb {b}; {:?}",
            tokens(&rig.verdicts[..12]),
            rig.wd.health()
        );
        if err.unsigned_abs() <= tol {
            assert!(!rig.verdicts.iter().any(alarm), "{line}");
            assert!(e <= b as u128 + 1, "{line}");
        }
        out.push(line);
    }
    println!("{}", out.join("\n"));
}

/// Probe (docs): a counter whose rate alternates in step with the hook (fast for one period,
/// slow for the next: a mean rate that is constant over every two periods), which the docs'
/// assumptions do not cover. Printed for the report: verdicts, and the clock against the mean.
#[test]
fn probe_rate_alternating_in_step_with_the_hook() {
    for &amp in &[2_000i64, 50_000, 1_000_000] {
        let c = 1_000_000_000_000u128;
        let cfg = quiet(c, 4, 0, 41);
        let mut rig = settled(&cfg, 20, P);
        for i in 0..200 {
            let t = rig.now_ps() + P / 2;
            let s = if i % 2 == 0 { amp } else { -amp };
            rig.schedule(t, Ev::CRate(mhz_off(c, s)));
            rig.hook(P);
        }
        let e = ppb_between(rig.clock_mhz(), c);
        let h = rig.wd.health();
        let changed = rig
            .verdicts
            .iter()
            .filter(|v| matches!(v, Watch::Changed { .. }))
            .count();
        println!(
            "±{amp} ppb alternating: {changed} Changed; clock {e} ppb off the mean, bound_ppb {}; {h:?}",
            h.bound_ppb
        );
    }
}

/// Probe: the ramp's pace at which detection stops, with the verdicts.
#[test]
fn probe_fast_ramps() {
    for &s in &[9_000i64, 10_000, 20_000, 100_000, -10_000] {
        let c = 1_000_000_000_000u128;
        let cfg = quiet(c, 4, 0, 9);
        let mut rig = settled(&cfg, 120, P);
        let t_start = rig.now_ps();
        for _ in 0..60 {
            let t = rig.now_ps() + P / 2;
            let off = s as i128 * (t - t_start) as i128 / PS_PER_S as i128;
            rig.schedule(t, Ev::CRate(mhz_off(c, off as i64)));
            rig.hook(P);
        }
        let (e, b) = err_bound(&rig);
        println!(
            "{s} ppb/s: 30 s: clock {e} ppb off, bound {b}; {}",
            tokens(&rig.verdicts[120..])
        );
    }
}

/// Probe: how long a sub-threshold excursion's mark on bound_ppb lasts.
#[test]
fn probe_small_excursion_long_after() {
    for &(r, ppb, dur, st) in &[
        (4usize, 1_000i64, 3_000u128, 100u128),
        (4, 1_000, 3_000, 700),
        (4, -3_000, 1_000, 700),
        (4, -3_000, 3_000, 100),
        (2, 1_000, 2_000, 100),
        (2, -3_000, 1_500, 100),
        (2, 10_000, 1_500, 700),
        (2, 2_000, 990, 500),
    ] {
        let c = 1_000_000_000_000u128;
        let cfg = quiet(c, r, 0, 5);
        let mut rig = settled(&cfg, 20, P);
        let t0 = rig.now_ps() + P * st / 1000;
        rig.schedule(t0, Ev::CRate(mhz_off(c, ppb)));
        rig.schedule(t0 + P * dur / 1000, Ev::CRate(c));
        let mut bad = 0;
        let mut first_bad = None;
        let mut worst = (0, 0, 0);
        let mut last_bad = 0;
        for i in 0..1200 {
            rig.hook(P);
            let (e, b) = err_bound(&rig);
            if i > 20 && e > b as u128 + 1 {
                bad += 1;
                last_bad = i;
                first_bad.get_or_insert(i);
                if e - b as u128 > worst.1 - worst.2 {
                    worst = (i, e, b as u128);
                }
            }
            if i == 100 || i == 600 || i == 1199 {
                println!("ref#{r} {ppb} ppb for {dur} mP: check {i}: clock {e} off, bound {b}");
            }
        }
        println!("ref#{r} {ppb} ppb for {dur} mP: {bad} checks of 1179 after 10.5 s violate, first {first_bad:?} last {last_bad}, worst (check, err, bound) {worst:?}; {}", tokens(&rig.verdicts[20..30]));
    }
}

/// Promise: "a ramp of slope s is seen when s·T/2 exceeds the parts' bounds: about T = 2·√(b₁/s)"
/// (no upper limit on s is stated), and bound_ppb carries the pace seen; a long run of
/// NoVerdict "says the reference is unusable". A ramp fast enough that consecutive intervals
/// differ by more than their bounds (s·P above about the interval threshold) is never seen:
/// every interval is off the baseline and disagrees with the one before, so each is
/// `Unjudged::Unconfirmed`, no interval is steady, the window never grows to compare its parts,
/// and bound_ppb stays at its last steady figure while the clock drifts off without limit. The
/// kernel, told to read a long run of NoVerdict as an unusable reference, blames the reference.
///
/// Minimal: 1 GHz counter, 10 MHz 64-bit reference, reads 20 ns / 500 ns, P = 0.5 s, 120 steady
/// checks, then the counter's rate ramps +10 ppm/s (a half-second staircase): Steady once, then
/// NoVerdict(Unconfirmed) at every check; 30 s in, the clock is 297 412 ppb off, bound_ppb 21. At
/// 8 ppm/s it is followed (Changed every 3-4 checks, the clock within bound_ppb); from 9 ppm/s
/// on, never (20 ppm/s, 100 ppm/s, and -10 ppm/s alike; `probe_fast_ramps`).
///
/// Found (fixed since: two consecutive intervals off the baseline on the same side, the second
/// further off, are a rate that keeps moving, followed to the latest interval's rate, Changed).
#[test]

fn a_fast_ramp_is_seen() {
    let (first, viol) = ramp(4, 10_000, 30, 10);
    assert!(
        first.is_some() && viol.is_none(),
        "first Changed {first:?}; {viol:?}"
    );
}

/// Promise: a step under an interval's threshold is seen by the window's split "once the parts'
/// bounds fall under δ times the share of the recent part after the step: seconds for ppm",
/// wherever the step lands against the split (which moves on when the recent part reaches half
/// the window): the step after 8 to 40 steady checks, 2 ppm and -2.5 ppm (threshold ~4.2 ppm).
/// Judged: reported (Changed) within 20 s, and bound_ppb honest from 20 s after the step on,
/// for 60 s.
///
/// Found: 2 of 66 cases leave bound_ppb under the clock's error well after the step was
/// reported; minimal in `a_small_step_seen_by_the_split_leaves_bound_ppb_short`.
///
/// Found (fixed since: an interval that agrees both with the baseline and with a pending
/// deviation is extended to the next check, not taken for the deviation's refutation): -2.5
/// ppm after 10 (or 13) steady checks was never reported: at the interval threshold, the first
/// full interval off, the second just inside (2205 vs 2292 ppb), so the one-off rule restarted
/// the window after the first and refinement followed the step silently (3 steers of 1 ppm;
/// bound_ppb honest throughout). Now the slowest case is reported 1.9 s after the step.
#[test]
fn a_small_step_wherever_it_meets_the_split() {
    let mut found = Vec::new();
    let mut worst = 0.0f64;
    for &ppb in &[2_000i64, -2_500] {
        for n in 8..=40 {
            let c = 1_000_000_000_000u128;
            let cfg = quiet(c, 4, 0, 50 + n as u64);
            let mut rig = settled(&cfg, n, P);
            let t0 = rig.now_ps() + P * 3 / 10;
            rig.schedule(t0, Ev::CRate(mhz_off(c, ppb)));
            let mut seen = None;
            for i in 0..160 {
                let v = rig.hook(P);
                let at = (rig.now_ps() - t0) as f64 / PS_PER_S as f64;
                if matches!(v, Watch::Changed { .. }) && seen.is_none() {
                    seen = Some(at);
                }
                let (e, b) = err_bound(&rig);
                if at >= 20.0 && e > b as u128 + 1 {
                    found.push(format!("{ppb} ppb after {n} checks: check {i} ({at:.1} s): clock {e} off, bound {b}; {}", tokens(&rig.verdicts[n..])));
                    break;
                }
            }
            match seen {
                Some(t) if t <= 20.0 => worst = worst.max(t),
                _ => found.push(format!(
                    "{ppb} ppb after {n} checks: first Changed {seen:?} s"
                )),
            }
        }
    }
    println!("slowest detection: {worst:.1} s");
    assert!(
        found.is_empty(),
        "{} cases:\n{}",
        found.len(),
        found.join("\n")
    );
}

/// Promise: after (c), bound_ppb "covers the old rate too, until the window proves the new one";
/// a worst case while the rate has been constant since the window's anchor — and here the rate is
/// constant from the step on, reported at once.
///
/// Minimal: 1 GHz counter, 10 MHz 64-bit reference, reads 20 ns / 500 ns, P = 0.5 s, 9 steady
/// checks, then +2 ppm (for good) from 0.15 s into the next interval: Steady, Changed (the
/// window's parts, 1 s after the step), Steady after; 20.4 s after the step the clock is 62 ppb
/// off while bound_ppb says 54. (The window kept its recent part, which began before the step:
/// a mixed window whose bound says nothing of the mix.)
#[test]
fn a_small_step_seen_by_the_split_leaves_bound_ppb_short() {
    let c = 1_000_000_000_000u128;
    let cfg = quiet(c, 4, 0, 59);
    let mut rig = settled(&cfg, 9, P);
    let t0 = rig.now_ps() + P * 3 / 10;
    rig.schedule(t0, Ev::CRate(mhz_off(c, 2_000)));
    for i in 0..120 {
        rig.hook(P);
        let at = (rig.now_ps() - t0) as f64 / PS_PER_S as f64;
        let (e, b) = err_bound(&rig);
        assert!(
            at < 20.0 || e <= b as u128 + 1,
            "check {i} ({at:.1} s after the step): clock {e} ppb off, bound_ppb {b}; {}",
            tokens(&rig.verdicts[9..])
        );
    }
}

/// Promise: bound_ppb under a steady ramp "carries the pace last seen: exact for a steady ramp".
/// At 5 ppm/s (seen: Changed from 1.5 s on, every 3-4 checks), judged from 60 s into the ramp
/// with the staircase's own step (pace·P/2... pace·P) allowed on top.
///
/// Minimal: 1 GHz counter, 10 MHz 64-bit reference, reads 20 ns / 500 ns, P = 0.5 s, 120 steady
/// checks, then +5 ppm/s (a half-second staircase): 61 s in, the clock is 6 627 ppb off while
/// bound_ppb says 2 633 (ACPI PM: 6 577 vs 2 254; -5 ppm/s alike).
///
/// Found (fixed since: an unconfirmed interval widens bound_ppb to at least its own distance
/// from the clock's rate).
#[test]

fn bound_ppb_under_a_5_ppm_per_s_ramp() {
    let (first, viol) = ramp(4, 5_000, 62, 60);
    assert!(viol.is_none(), "first Changed {first:?}; {viol:?}");
}

/// Promise ("Widths": the longer-wrapping count unwrapped by the half-range rule from sample to
/// sample, rejected samples included; the other against the rate in force, "which holds while
/// the rate's change over an interval is less than half of that one's wrap"): stretches of 1 to
/// 12 consecutive rejected checks (reads delayed 2 ms) with narrow counts started just before
/// their wraps, at constant rates: no (c) or (d), bound_ppb honest.
#[test]
fn rejected_stretches_across_wraps() {
    let mut found = Vec::new();
    let cases = [
        // 32-bit 1 GHz counter (4.3 s) against ACPI PM (24 bits, 4.7 s).
        (
            1_000_000_000_000u128,
            32u32,
            (1u64 << 32) - 3_000_000,
            2usize,
            (1u64 << 24) - 1000,
        ),
        // 32-bit 1 GHz counter against a 64-bit 10 MHz reference: the counter against the rate.
        (1_000_000_000_000, 32, (1u64 << 32) - 1, 4, 5),
        // 64-bit counter against ACPI PM: the reference against the rate, stretches past its wrap.
        (
            2_000_000_000_000,
            64,
            u64::MAX - 10_000_000,
            2,
            (1u64 << 24) - 1,
        ),
    ];
    for (c, bits, c0, r, r0) in cases {
        for stretch in 1..=12usize {
            let cfg = base(c, bits, c0, r, r0);
            let mut rig = rig(&cfg);
            for i in 0..60usize {
                // Checks 20.. (20 + stretch) are all rejected.
                rig.w.borrow_mut().fixed_delay = if (20..20 + stretch).contains(&i) {
                    2_000_000_000
                } else {
                    0
                };
                let v = rig.hook(P);
                let (e, b) = err_bound(&rig);
                if alarm(&v) || (i > 0 && e > b as u128 + 1) {
                    found.push(format!(
                        "c={c} bits={bits} ref#{r} stretch={stretch}: check {i}: {v}, clock {e} off, bound {b}; {}",
                        tokens(&rig.verdicts)
                    ));
                    break;
                }
            }
            rig.counts_agree();
        }
    }
    assert!(
        found.is_empty(),
        "{} cases:\n{}",
        found.len(),
        found.join("\n")
    );
}

fn long_haul(p: u128, n: usize) -> Option<String> {
    let cfg = quiet(5_000_000_000_000, 4, u64::MAX - 1_000_000_000, 1);
    let mut rig = rig(&cfg);
    for i in 0..n {
        let v = rig.hook(p);
        let (e, b) = err_bound(&rig);
        if alarm(&v) || (i > 0 && e > b as u128 + 1) {
            let yrs = rig.now_ps() as f64 / (PS_PER_S as f64 * 86_400.0 * 365.25);
            return Some(format!(
                "check {i} ({yrs:.2} years): {v}, clock {e} off, bound {b}; {:?}",
                rig.wd.health()
            ));
        }
    }
    rig.counts_agree();
    None
}

/// Promise ("a 64-bit counter: any period"; "everything is integer arithmetic, saturating or
/// checked"; no false alarm at constant rates): a 5 GHz 64-bit counter started just before its
/// wrap, a hook every 10 days for 2 000 checks (55 years).
#[test]
fn decades_of_checks() {
    let f = long_haul(10 * 86_400 * PS_PER_S, 2_000);
    assert!(f.is_none(), "{}", f.unwrap_or_default());
}

/// As `decades_of_checks`, past 2^63 counter ticks since the first sample.
///
/// Found (fixed since: the unwrapped midpoints are 128-bit): at constant rates, the check at which the counter has moved 2^63 ticks since the
/// watchdog's first sample reports `CounterJumped { by_ns: 60 }` (and the window restarts): a
/// false alarm. Minimal: 5 GHz 64-bit counter, 10 MHz 64-bit reference, a hook every 30 days:
/// check 712 (58.5 years; at 1 GHz it would be 292 years). Unwrapped counts kept as twice the
/// midpoint since the first sample overflow where the docs promise "any period" and no false
/// alarm; harmless in practice (decades of uptime), but a stated promise.
#[test]

fn centuries_of_checks() {
    let f = long_haul(30 * 86_400 * PS_PER_S, 2_500);
    assert!(f.is_none(), "{}", f.unwrap_or_default());
}

/// Reads per check: (counter, reference), for `n` checks of `rig` at period `P`.
fn costs(rig: &mut Rig, n: usize) -> Vec<(u64, u64, Watch)> {
    let mut out = Vec::new();
    for _ in 0..n {
        rig.w.borrow_mut().advance(P);
        let before = rig.w.borrow().reads;
        let v = rig.wd.check(&rig.clock);
        let after = rig.w.borrow().reads;
        out.push((after.0 - before.0, after.1 - before.1, v));
    }
    out
}

/// Promise (*The bound*: until the reference's step is known "at most 16 384 reference reads
/// and twice as many counter reads per check"; "a reference that never moves costs every check
/// the full 16 384"): a reference that never moves.
///
/// Found (fixed since: the step search stops so that the check's reads, the tries' included,
/// stay within 16 384): the first check reads the reference 16 389 times and the counter 32 777 times (the
/// docs: at most 16 384 and 32 768); minimal: 1 GHz counter, a 10 MHz 64-bit reference that never
/// moves, the first check. (A kernel sizing the first check's worst case from the docs is 5
/// reads short: harmless, but the figure is stated as a maximum.)
#[test]

fn a_still_reference_costs_at_most_16384_reads() {
    let cfg = quiet(1_000_000_000_000, 4, 0, 3);
    let mut still = rig(&cfg);
    still.w.borrow_mut().r.rate_mhz = 0;
    for (i, (c, r, v)) in costs(&mut still, 5).into_iter().enumerate() {
        assert!(!alarm(&v), "{v}");
        assert!(
            r <= 16_384 && c <= 2 * 16_384,
            "still reference, check {i}: {c} counter, {r} reference reads ({v})"
        );
    }
}

/// Promise: once the reference's step is learnt, a check costs "a few brackets" (tries = 4: 4
/// reference reads, 8 counter reads, a clock read or two); the first check against coarse
/// references (1 kHz tick, 32 kHz RTC) stays within the stated 16 384.
#[test]
fn what_a_check_costs() {
    // Coarse references once their step is known: a few brackets (tries = 4).
    for r_kind in 0..REFS.len() {
        let c = if r_kind <= 1 {
            50_000_000_000
        } else {
            1_000_000_000_000
        };
        let cfg = quiet(c, r_kind, 0, 3);
        let mut rig = rig(&cfg);
        let mut first = (0, 0);
        for i in 0..10 {
            rig.w.borrow_mut().advance(P);
            let before = rig.w.borrow().reads;
            rig.wd.check(&rig.clock);
            let after = rig.w.borrow().reads;
            let (cr, rr) = (after.0 - before.0, after.1 - before.1);
            if i == 0 {
                first = (cr, rr);
                assert!(
                    rr <= 16_384 && cr <= 2 * 16_384 + 2,
                    "ref#{r_kind} first check: {cr}/{rr}"
                );
            } else {
                assert!(
                    rr <= 4 && cr <= 8 + 2,
                    "ref#{r_kind} check {i}: {cr} counter, {rr} reference reads (first {first:?})"
                );
            }
        }
    }
}

/// Promise (as `a_small_step_wherever_it_meets_the_split`, where the reference's quantization
/// dominates): against a 1 kHz tick (an interval's threshold at P = 0.5 s is about 4 000 ppm) and
/// a 32 kHz RTC, steps of 100 and 1 000 ppm landing after 10 to 30 steady checks are reported
/// (Changed) within 60 s, and bound_ppb is honest from 60 s after the step on, for 60 s.
///
/// Found (fixed since: the window is judged against the clock after each steady interval, so a
/// tight starting bound no longer vetoes it): 14 of 24 cases fail; with the 1 kHz tick a +100 ppm step is never reported and
/// bound_ppb stays at the given 1 ppm (`a_step_under_a_tick_is_never_seen`, minimal), and a
/// -1 000 ppm step is reported at 2.2 s but the clock is then 336 ppm off with bound_ppb 309 ppm
/// until a second Changed at 250 s (`probe_step_under_a_tick`).
#[test]

fn steps_under_a_coarse_reference() {
    let mut found = Vec::new();
    let mut slowest = 0.0f64;
    for &r in &[0usize, 1] {
        for &ppb in &[100_000i64, -1_000_000] {
            for n in (10..=30).step_by(4) {
                let c = 50_000_000_000u128;
                let cfg = quiet(c, r, 0, 70 + n as u64);
                let mut rig = settled(&cfg, n, P);
                let t0 = rig.now_ps() + P * 6 / 10;
                rig.schedule(t0, Ev::CRate(mhz_off(c, ppb)));
                let mut seen = None;
                for i in 0..240 {
                    let v = rig.hook(P);
                    let at = (rig.now_ps() - t0) as f64 / PS_PER_S as f64;
                    if matches!(v, Watch::Changed { .. }) && seen.is_none() {
                        seen = Some(at);
                    }
                    let (e, b) = err_bound(&rig);
                    if at >= 60.0 && e > b as u128 + 1 {
                        found.push(format!(
                            "ref#{r} {ppb} ppb after {n} checks: check {i} ({at:.1} s): clock {e} off, bound {b}"
                        ));
                        break;
                    }
                }
                match seen {
                    Some(t) if t <= 60.0 => slowest = slowest.max(t),
                    _ => found.push(format!(
                        "ref#{r} {ppb} ppb after {n} checks: first Changed {seen:?} s"
                    )),
                }
            }
        }
    }
    println!("slowest detection: {slowest:.1} s");
    assert!(
        found.is_empty(),
        "{} cases:\n{}",
        found.len(),
        found.join("\n")
    );
}

/// Probe: a step under a 1 kHz tick, followed for 10 minutes.
#[test]
fn probe_step_under_a_tick() {
    for &(ppb, gb) in &[
        (100_000i64, 1_000u64),
        (300_000, 1_000),
        (-1_000_000, 1_000),
        (100_000, 100_000),
        (100_000, 2_000_000),
        (1_000_000, 2_000_000),
    ] {
        let c = 50_000_000_000u128;
        let mut cfg = quiet(c, 0, 0, 80);
        cfg.given_bound = gb;
        let mut rig = settled(&cfg, 10, P);
        let t0 = rig.now_ps() + P * 6 / 10;
        rig.schedule(t0, Ev::CRate(mhz_off(c, ppb)));
        let mut seen = Vec::new();
        let mut last_bad = None;
        for i in 0..1200 {
            let v = rig.hook(P);
            let at = (rig.now_ps() - t0) as f64 / PS_PER_S as f64;
            if matches!(v, Watch::Changed { .. }) {
                seen.push(at);
            }
            let (e, b) = err_bound(&rig);
            if e > b as u128 + 1 {
                last_bad = Some((i, at, e, b));
            }
            if i % 240 == 239 {
                println!("{ppb} (given bound {gb}): {at:.0} s: clock {e} off, bound {b}");
            }
        }
        println!(
            "{ppb}: Changed at {seen:?}; last violation {last_bad:?}; {:?}",
            rig.wd.health()
        );
    }
}

/// Promise (*Detection time*: a step under an interval's threshold "is seen once the parts' bounds
/// fall under δ times the share of the recent part after the step"; bound_ppb a worst case
/// outside "between a change and its detection"). The given rate is exact, its bound 1 ppm (a
/// calibration against a better reference, say); the watchdog's reference is a 1 kHz tick, whose
/// parts' bounds after 10 minutes are a few ppm (one tick over each part's minutes) — far under the
/// step's 300 ppm times any share.
///
/// Minimal: 50 MHz counter, 1 kHz 64-bit tick reference, reads 20 ns / 500 ns, P = 0.5 s, given
/// rate exact with bound 1 000 ppb, 10 steady checks, then the counter +300 ppm (for good) from
/// 0.3 s into the next interval: 1 200 checks (10 minutes), every one Steady, no steer; the clock
/// is 299 910 ppb off while bound_ppb says 1 000. (+100 ppm alike; with a given bound of 2 000 ppm
/// instead of 1 ppm, the same step is followed within 2 minutes: the baseline, "whichever bound
/// is the tighter", stays the given rate while the window's bound is looser than the given one,
/// and nothing judges the window meanwhile.)
///
/// Found (fixed since: the window is judged against the clock after each steady interval).
#[test]

fn a_step_under_a_tick_is_never_seen() {
    let c = 50_000_000_000u128;
    let cfg = quiet(c, 0, 0, 80);
    let mut rig = settled(&cfg, 10, P);
    rig.schedule(rig.now_ps() + P * 6 / 10, Ev::CRate(mhz_off(c, 300_000)));
    for _ in 0..1200 {
        rig.hook(P);
    }
    let (e, b) = err_bound(&rig);
    assert!(
        rig.verdicts
            .iter()
            .any(|v| matches!(v, Watch::Changed { .. }))
            && e <= b as u128 + 1,
        "clock {e} ppb off, bound_ppb {b}; {:?}",
        rig.wd.health()
    );
}

/// Probe: `a_step_under_a_tick_is_never_seen` generalised: a given bound tighter than the
/// window's for a while (a 10 MHz reference, a 5 ppb calibration), a 2 ppm step after 10 checks.
#[test]
fn probe_step_under_a_tight_calibration() {
    for &(r, gb, ppb) in &[
        (4usize, 5u64, 2_000i64),
        (4, 5, 20_000),
        (2, 20, 3_000),
        (1, 1_000, 50_000),
    ] {
        let c = if r == 1 {
            50_000_000_000u128
        } else {
            1_000_000_000_000
        };
        let mut cfg = quiet(c, r, 0, 90);
        cfg.given_bound = gb;
        let mut rig = settled(&cfg, 10, P);
        let t0 = rig.now_ps() + P * 6 / 10;
        rig.schedule(t0, Ev::CRate(mhz_off(c, ppb)));
        let mut seen = Vec::new();
        let mut last_bad = None;
        for i in 0..600 {
            let v = rig.hook(P);
            let at = (rig.now_ps() - t0) as f64 / PS_PER_S as f64;
            if matches!(v, Watch::Changed { .. }) {
                seen.push(at);
            }
            let (e, b) = err_bound(&rig);
            if e > b as u128 + 1 {
                last_bad = Some((i, at, e, b));
            }
        }
        println!(
            "ref#{r} given bound {gb} step {ppb}: Changed at {seen:?}; last violation {last_bad:?}"
        );
    }
}

/// As `a_step_under_a_tick_is_never_seen`, with a fine reference: the given rate's bound (a
/// long calibration's) tighter than the window's when the step comes.
///
/// Minimal: 1 GHz counter, 10 MHz 64-bit reference, reads 20 ns / 500 ns, P = 0.5 s, given rate
/// exact with bound 5 ppb, 10 steady checks, then the counter +2 ppm (for good) from 0.3 s into
/// the next interval (under the interval threshold, ~4.2 ppm): 600 checks (5 minutes), never
/// Changed (370 Steady, 240 Unconfirmed: each odd interval followed by one that agrees with the
/// baseline restarts the window, which health shows half a second long at the end, so its parts
/// never grow to be compared); the clock is 1 999 ppb off while bound_ppb says 5. (A +20 ppm
/// step, above the threshold, is reported at 1.2 s.)
///
/// Found (fixed since: intervals off on the same side, the second further, are followed, and
/// the window is judged against the clock after each steady interval).
#[test]

fn a_small_step_after_a_tight_calibration_is_never_seen() {
    let c = 1_000_000_000_000u128;
    let mut cfg = quiet(c, 4, 0, 90);
    cfg.given_bound = 5;
    let mut rig = settled(&cfg, 10, P);
    rig.schedule(rig.now_ps() + P * 6 / 10, Ev::CRate(mhz_off(c, 2_000)));
    for _ in 0..600 {
        rig.hook(P);
    }
    let (e, b) = err_bound(&rig);
    assert!(
        rig.verdicts
            .iter()
            .any(|v| matches!(v, Watch::Changed { .. }))
            && e <= b as u128 + 1,
        "clock {e} ppb off, bound_ppb {b}; {:?}",
        rig.wd.health()
    );
}

/// Issue 28, item 2: a +0.1 % step that straddles a check reads as a ramp (two intervals off
/// on the same side, the second further off). bound_ppb must stay honest and, once the window
/// since shows one rate, narrow: within 20 ppm 4 s after the change (it carried the ramp's
/// pace, over 3 000 ppm, before), and honest at every check from the report on.
#[test]
fn a_straddling_step_leaves_a_narrow_bound() {
    let c = 1_000_000_000_000u128;
    for &(r_kind, at) in &[(4usize, 3u128), (4, 7), (2, 3), (3, 5)] {
        let cfg = quiet(c, r_kind, 0, 21);
        let mut rig = settled(&cfg, 20, P);
        let t0 = rig.now_ps() + P * at / 10;
        rig.schedule(t0, Ev::CRate(mhz_off(c, 1_000_000)));
        let mut seen = None;
        for i in 0..40 {
            let v = rig.hook(P);
            let since = (rig.now_ps() - t0) as f64 / PS_PER_S as f64;
            if matches!(v, Watch::Changed { .. }) && seen.is_none() {
                seen = Some(since);
            }
            let (e, b) = err_bound(&rig);
            if seen.is_some() {
                assert!(
                    e <= b as u128 + 1,
                    "ref#{r_kind} at {at}/10: check {i} ({since:.1} s): clock {e} ppb off, bound_ppb {b}; {}",
                    tokens(&rig.verdicts[20..])
                );
            }
            if (4.0..4.5).contains(&since) {
                println!(
                    "ref#{r_kind} at {at}/10: {since:.1} s after: clock {e} ppb off, bound_ppb {b}"
                );
                assert!(
                    b <= 20_000,
                    "ref#{r_kind} at {at}/10: {since:.1} s after: bound_ppb {b} (clock {e} off); {}",
                    tokens(&rig.verdicts[20..])
                );
            }
        }
        assert!(seen.is_some_and(|t| t <= 1.5), "first Changed {seen:?}");
    }
}

/// Issue 28: checks rejected during a change (most reads delayed; one x86_64-watchdog-acpipm
/// run under host load had 12 of 28 checks rejected and the +0.1 % change went unreported,
/// the clock 899 ppm off under a bound of 390 ppb). Here 3 checks in 4 have their reference
/// reads delayed 2 ms (rejected: WideBracket) from 2 s before a +0.1 % change to 10 s after:
/// the change is reported, and bound_ppb is honest at every check from the report on.
#[test]
fn a_change_under_mostly_rejected_checks() {
    let c = 1_000_000_000_000u128;
    for &(r_kind, at) in &[(4usize, 3u128), (2, 3), (2, 8), (3, 5)] {
        let cfg = quiet(c, r_kind, 0, 33);
        let mut rig = settled(&cfg, 20, P);
        let t0 = rig.now_ps() + 4 * P + P * at / 10;
        rig.schedule(t0, Ev::CRate(mhz_off(c, 1_000_000)));
        let mut seen = None;
        let mut rejected = 0;
        for i in 0..60 {
            rig.w.borrow_mut().fixed_delay = if i < 24 && i % 4 != 3 {
                2_000_000_000
            } else {
                0
            };
            let v = rig.hook(P);
            if matches!(v, Watch::NoVerdict(baretime::Unjudged::WideBracket)) {
                rejected += 1;
            }
            let since = rig.now_ps() as f64 / PS_PER_S as f64 - t0 as f64 / PS_PER_S as f64;
            if matches!(v, Watch::Changed { .. }) && seen.is_none() && since > 0.0 {
                seen = Some(since);
            }
            let (e, b) = err_bound(&rig);
            if seen.is_some() {
                assert!(
                    e <= b as u128 + 1,
                    "ref#{r_kind} at {at}/10: check {i} ({since:.1} s): clock {e} ppb off, bound_ppb {b}; {}",
                    tokens(&rig.verdicts[20..])
                );
            }
        }
        println!(
            "ref#{r_kind} at {at}/10: {rejected} of 60 rejected; first Changed {seen:?} s after"
        );
        assert!(rejected >= 12, "{rejected} rejected");
        assert!(
            seen.is_some(),
            "never reported: {}",
            tokens(&rig.verdicts[20..])
        );
        let (e, b) = err_bound(&rig);
        assert!(
            e <= b as u128 + 1,
            "at the end: clock {e} ppb off, bound_ppb {b}"
        );
    }
}

/// Issue 28 (the loaded ACPI PM run): a +0.1 % change, a reference step (0.14–280 ms) in
/// the next accepted interval, and one check in three rejected. The step can make the two
/// intervals after the change agree on a wrong rate (`Changed` to +0.07 %, say): the window
/// since then disagrees with the rate set beyond both bounds, and the next check corrects it.
/// Before, the clock stayed 100–240 ppm off for the whole minute, refinement steering it back
/// 1 ppm per check (its bound honest, wide). Judged: bound_ppb honest from the fifth check
/// on, and the clock within 1 ppm of the truth by the end.
#[test]
fn a_change_confirmed_through_a_reference_step_is_corrected() {
    let c = 1_000_000_000_000u128;
    for &(r_kind, rj) in &[(2usize, 1_000i64), (4, 1_000_000), (2, -500)] {
        let cfg = quiet(c, r_kind, 0, 41);
        let mut rig = settled(&cfg, 20, P);
        let t0 = rig.now_ps() + P * 3 / 10;
        rig.schedule(t0, Ev::CRate(mhz_off(c, 1_000_000)));
        rig.schedule(t0 + P * 3 / 2, Ev::RJump(rj));
        let mut worst = None;
        for i in 0..60 {
            rig.w.borrow_mut().fixed_delay = if i % 3 == 1 { 2_000_000_000 } else { 0 };
            rig.hook(P);
            let (e, b) = err_bound(&rig);
            if i >= 5 && e > b as u128 + 1 && worst.is_none() {
                worst = Some(format!("check {i}: clock {e} ppb off, bound {b}"));
            }
        }
        let (e, b) = err_bound(&rig);
        let verdicts = tokens(&rig.verdicts[20..]);
        println!("ref#{r_kind} rj={rj}: end clock {e} off bound {b}; {verdicts}");
        assert!(
            worst.is_none(),
            "ref#{r_kind} rj={rj}: {worst:?}; {verdicts}"
        );
        assert!(
            e <= 1_000,
            "ref#{r_kind} rj={rj}: end clock {e} ppb off; {verdicts}"
        );
    }
}
