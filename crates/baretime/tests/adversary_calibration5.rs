//! Round-5 outside attack on `calibrate`'s bound, written from its docs and public API alone,
//! aimed at what just changed: slow counters (1–100 kHz) fitted at their edges, whose edge
//! variance is now floored by "the one reference-read gap before the sample where the count
//! changed, uniform within it", plus a lockstep term.
//!
//! The promise under attack (`calibrate`'s docs, "The uncertainty"): the bound is "meant to
//! contain the true error at least 99 % of the time" for a world that keeps `Reference`'s
//! contract. Every world here is scripted in this file, so the truth is known exactly: true
//! time in picoseconds, each read costing scripted time, the counter and the reference
//! latched at scripted points of their reads, both exact (the reference states its true rate,
//! `Accuracy::Exact`, so the whole bound is the measurement's).
//!
//! Seeds: `BARETIME_ADV_SEEDS` (default 24, for CI under qemu-user); the report's figures
//! came from `BARETIME_ADV_SEEDS=200`. A family passes when its misses are within what a
//! 99 % coverage allows at that count (the binomial tail above it is under 0.5 %). A test
//! marked `#[ignore = "finding: ..."]` would be a family where the promise fails, with its
//! world; none is left (the `exploration` ones are tools, not findings).
//!
//! Broke (the findings; figures from this host, an x86_64 KVM guest, deterministic per
//! seed), all fixed in issue 27 (now: `cargo test --release -p baretime --test
//! adversary_calibration5 -- --include-ignored --skip explor`):
//!
//! | world | outside the bound | \|error\|/bound p50 | p90 | p99 | max | fixed: outside | p50 | p90 | p99 | max |
//! | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |
//! | 1–100 kHz at k × 1 kHz, slipping 0.1–1.5 ticks per 100 ms, vs a 1 kHz tick | 77/300 | 0.413 | 2.468 | 6.779 | 10.30 | 0/300 | 0.164 | 0.401 | 0.593 | 0.729 |
//! | 32.768 kHz ± 200 ppm vs a 1.024 kHz tick | 80/300 | 0.591 | 1.469 | 2.362 | 3.13 | 0/300 | 0.177 | 0.448 | 0.749 | 0.815 |
//! | 1–100 kHz at p/q × 32 768 Hz (q ≤ 4), slipping 0.1–1.5 ticks, vs a 32 kHz RTC | 60/300 | 0.088 | 3.498 | 8.539 | 9.78 | 0/300 | 0.056 | 0.163 | 0.342 | 0.411 |
//! | 1.4–3 kHz, ticks alternating long/short by 5–45 %, vs HPET | 19/500 | 0.229 | 0.677 | 1.130 | 1.40 | 0/500 | 0.187 | 0.388 | 0.577 | 0.707 |
//!
//! and one 11 ms preemption between the reference's latch and the closing counter read ended
//! a 1–50 kHz counter's calibration with `CounterStuck` (noise, not a stuck counter; fixed:
//! `preempted_after_reference_latch_is_not_stuck`, `random_stalls_are_not_stuck`).
//!
//! The first three: against a reference read several times a step, the loop dropped the
//! samples where the reference had moved and a slower counter had not, which are the start
//! of every reference count up to the counter's next tick, a share that follows the two
//! quantizations' phase; nearly in step, that phase drifts slowly and the line took it for a
//! rate. They are fitted now, and the bins close where the reference steps. The fourth: the
//! odd counts' edges lie off the even ones' line, which bins of an even number of edges
//! average out of the scatter; the fit now bounds the bias that offset puts on the slope.
//! Minimal worlds: 10 005 Hz vs a 1 kHz tick, ratio 3.43 → 0.116 (−10 595 ppb under
//! ±91 551 ppb); 32 761.447 Hz vs a 1 024 Hz tick, 1.54 → 0.105 (+9 584 ppb under
//! ±91 610 ppb); 2 221.631 Hz skewed −5.2 %, +4 951 ppb under 3 534 → under 7 008. With
//! the fix, over the other families here at `BARETIME_ADV_SEEDS=200`: "2–100 kHz vs 1 kHz
//! tick" 1/200 (max 2.90) → 0/200 (p99 0.551, max 0.606); "1–100 kHz vs 32 kHz RTC" 1/200
//! (p99 0.402, max 1.21) → 0/200 (p99 0.244, max 0.396); every other family within ±0.02
//! of its p99.
//!
//! Where it is loose (p99 under 0.3): "1–100 kHz vs 32 kHz RTC", at its slow end, where a
//! counter tick spans several bins (1–8 kHz: median bound 90 ppm over a median error of
//! 5 ppm, from 467 ppm over 8.5 ppm before the fix, its bounds and errors both smaller): each
//! bin's mean is off by where the bin's ends cut the counter's ticks, which the bin means'
//! scatter counts as noise independent from bin to bin, while that pattern's effect on the
//! line is smaller; "10–100 kHz duty skew" (p99 0.265, as before the fix: the parity term
//! adds under 0.1 % there).
//!
//! Held at `BARETIME_ADV_SEEDS=200` (every family 0 or 1 miss in 200, no error): slow
//! counters against HPET, ACPI PM (24 bits), a 32 kHz RTC and a 1 kHz tick at random rates;
//! constant read costs; counter reads of 1–5 ns against constant µs reference reads; a
//! cadence in step with the counter; read costs that depend on the counter's phase; counter
//! reads of 1–5 µs latched at start, middle or end; heavy-tailed reference reads; every Nth
//! reference read slower; reference reads slower for ms at a time; 20 ms windows; the same
//! in-step beat with counters of 100 kHz–10 MHz; duty skew at 10–100 kHz; dead references
//! end within `max_duration + 3 × stuck_after`; a reference 1000× slower than declared is
//! `ImplausibleRate` early.

use std::cell::Cell;

use baretime::{calibrate, CalibrationError, Config, Counter, Frequency, Reference};
use core::time::Duration;

const PS_PER_S: u128 = 1_000_000_000_000;
/// `mHz × ps` per tick.
const TICK: u128 = 1_000 * PS_PER_S;

fn seeds() -> u64 {
    std::env::var("BARETIME_ADV_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(24)
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

/// Uniform in [0, 1).
fn unit(s: &mut u64) -> f64 {
    (mix(s) >> 11) as f64 / (1u64 << 53) as f64
}

/// A scripted world. Costs in picoseconds; latch points in permille of the read.
#[derive(Clone, Copy, Debug)]
struct World {
    /// The counter's true rate, mHz.
    f_mhz: u128,
    /// Duty skew: within each pair of ticks the first lasts `(1 + duty) ×` a mean tick, the
    /// second `(1 − duty) ×` (permille of a tick, signed).
    duty_permille: i64,
    ref_hz: u64,
    ref_bits: u32,
    c_cost: u64,
    c_jit: u64,
    c_latch: u64,
    r_cost: u64,
    r_jit: u64,
    r_latch: u64,
    /// Heavy tail on a reference read: with probability `ppm`/1e6, extra `u^-a` scaled by
    /// `scale` ps (Pareto, `a` in tenths), capped at `cap`.
    tail: Option<(u64, u64, u64, u64)>,
    /// Every `n`-th reference read is slower by `extra` ps.
    nth: Option<(u64, u64)>,
    /// Reference reads switch between normal and slower by `extra` ps in blocks of random
    /// length (mean `len` ps).
    blocks: Option<(u64, u64)>,
    /// Whether the reference's extra time (tail, nth, blocks) comes before its latch.
    extra_before_latch: bool,
    /// One reference read, the first at or after `at` ps of true time from the start, takes
    /// `len` ps longer (a VM preemption, a long SMI).
    stall_at: Option<(u64, u64)>,
    /// The stall falls in a counter read instead, after its latch.
    stall_in_counter: bool,
    /// A counter read that starts within `permille` of a tick after an edge costs `extra`.
    phase: Option<(u64, u64)>,
}

impl World {
    fn base(f_mhz: u128, ref_hz: u64) -> World {
        World {
            f_mhz,
            duty_permille: 0,
            ref_hz,
            ref_bits: 64,
            c_cost: 30_000,
            c_jit: 20_000,
            c_latch: 500,
            r_cost: 500_000,
            r_jit: 50_000,
            r_latch: 500,
            tail: None,
            nth: None,
            blocks: None,
            extra_before_latch: true,
            stall_at: None,
            stall_in_counter: false,
            phase: None,
        }
    }

    /// The counter's count at true time `t` ps.
    fn count(&self, t: u64) -> u64 {
        let x = u128::from(t) * self.f_mhz;
        if self.duty_permille == 0 {
            return (x / TICK) as u64;
        }
        let pair = 2 * TICK;
        let thr = (TICK as i128 + TICK as i128 * i128::from(self.duty_permille) / 1000) as u128;
        (2 * (x / pair) + u128::from(x % pair >= thr)) as u64
    }

    /// How far into its tick the counter is at `t`, permille (even ticks only).
    fn phase_permille(&self, t: u64) -> u64 {
        let x = u128::from(t) * self.f_mhz;
        ((x % TICK) * 1000 / TICK) as u64
    }
}

struct Sim {
    w: World,
    t: Cell<u64>,
    rng: Cell<u64>,
    nref: Cell<u64>,
    slow_block: Cell<bool>,
    block_end: Cell<u64>,
    start: u64,
    stalled: Cell<bool>,
}

impl Sim {
    fn new(w: World, seed: u64) -> Sim {
        let mut s = seed ^ 0x5eed;
        let start = unif(&mut s, 1_000_000, 1_000_000_000_000);
        Sim {
            w,
            t: Cell::new(start),
            rng: Cell::new(s),
            nref: Cell::new(0),
            slow_block: Cell::new(false),
            block_end: Cell::new(0),
            start,
            stalled: Cell::new(false),
        }
    }
    fn r(&self, lo: u64, hi: u64) -> u64 {
        let mut s = self.rng.get();
        let v = unif(&mut s, lo, hi);
        self.rng.set(s);
        v
    }
    fn u(&self) -> f64 {
        let mut s = self.rng.get();
        let v = unit(&mut s);
        self.rng.set(s);
        v
    }
}

struct Ctr<'a>(&'a Sim);
impl Counter for Ctr<'_> {
    fn ticks(&self) -> u64 {
        let s = self.0;
        let t = s.t.get();
        let mut cost = s.w.c_cost + s.r(0, s.w.c_jit);
        if let Some((permille, extra)) = s.w.phase {
            if s.w.phase_permille(t) < permille {
                cost += extra;
            }
        }
        let latch = t + cost * s.w.c_latch / 1000;
        if let (Some((at, len)), true) = (s.w.stall_at, s.w.stall_in_counter) {
            if !s.stalled.get() && t >= s.start + at {
                s.stalled.set(true);
                cost += len;
            }
        }
        s.t.set(t + cost);
        s.w.count(latch)
    }
    fn bits(&self) -> u32 {
        64
    }
}

struct Refr<'a>(&'a Sim);
impl Reference for Refr<'_> {
    fn read(&mut self) -> u64 {
        let s = self.0;
        let w = &s.w;
        let t = s.t.get();
        let n = s.nref.get() + 1;
        s.nref.set(n);
        let base = w.r_cost + s.r(0, w.r_jit);
        let mut extra = 0;
        if let Some((ppm, a10, scale, cap)) = w.tail {
            if s.r(0, 999_999) < ppm {
                let u = s.u().max(1e-12);
                let x = scale as f64 * u.powf(-10.0 / a10 as f64);
                extra += (x as u64).min(cap);
            }
        }
        if let Some((every, more)) = w.nth {
            if n % every == 0 {
                extra += more;
            }
        }
        if let Some((more, len)) = w.blocks {
            if t >= s.block_end.get() {
                s.slow_block.set(!s.slow_block.get());
                s.block_end.set(t + s.r(len / 4, len * 7 / 4));
            }
            if s.slow_block.get() {
                extra += more;
            }
        }
        if let (Some((at, len)), false) = (w.stall_at, w.stall_in_counter) {
            if !s.stalled.get() && t >= s.start + at {
                s.stalled.set(true);
                extra += len;
            }
        }
        let latch = if w.extra_before_latch {
            t + extra + base * w.r_latch / 1000
        } else {
            t + base * w.r_latch / 1000
        };
        s.t.set(t + base + extra);
        let v = (u128::from(latch) * u128::from(w.ref_hz) / PS_PER_S) as u64;
        if w.ref_bits >= 64 {
            v
        } else {
            v & ((1u64 << w.ref_bits) - 1)
        }
    }
    fn bits(&self) -> u32 {
        self.0.w.ref_bits
    }
    fn frequency(&self) -> Frequency {
        Frequency::exact_hz(self.0.w.ref_hz).expect("in range")
    }
    fn name(&self) -> &'static str {
        "scripted"
    }
}

enum Out {
    Ok {
        ratio: f64,
        err_ppb: f64,
        bound: u64,
    },
    Err(CalibrationError),
}

fn run(w: World, seed: u64, config: Config) -> Out {
    let sim = Sim::new(w, seed);
    match calibrate(Ctr(&sim), Refr(&sim), config) {
        Ok(cal) => {
            let got = cal.frequency.as_millihz() as f64;
            let truth = w.f_mhz as f64;
            let err_ppb = (got - truth) / truth * 1e9;
            let bound = cal.frequency.accuracy().bound_ppb();
            Out::Ok {
                ratio: err_ppb.abs() / (bound.max(1) as f64),
                err_ppb,
                bound,
            }
        }
        Err(e) => Out::Err(e),
    }
}

/// A counter rate drawn log-uniformly over `lo..=hi` Hz, with a ±200 ppm error (never below
/// 1 kHz, where the crate reports the edge with a widened bound).
fn rate(s: &mut u64, lo: u64, hi: u64) -> u128 {
    let l = (lo as f64).ln();
    let h = (hi as f64).ln();
    let hz = (l + (h - l) * unit(s)).exp();
    let ppm = unit(s) * 400.0 - 200.0;
    let mhz = (hz * 1000.0 * (1.0 + ppm * 1e-6)) as u128;
    mhz.max(1_000_000 + 1_000 * u128::from(unif(s, 0, 200)))
}

/// A counter in step with a coarse reference: its rate `ref × p/q` (`q ≤ max_q`, the
/// counter 1–100 kHz), off by a slip of 0.1–1.5 counter ticks over the `ms` window, so the
/// two quantizations beat once or less in the window.
fn beat(s: &mut u64, refs: &[u64], max_q: u64, ms: u64) -> World {
    let ref_hz = refs[unif(s, 0, refs.len() as u64 - 1) as usize];
    let (hz_num, q) = loop {
        let q = unif(s, 1, max_q);
        let p = unif(s, 1, 100 * q * 1000 / ref_hz + 1);
        let num = ref_hz * p; // counter Hz = num / q
        if num >= 1_001 * q && num <= 100_000 * q {
            break (num, q);
        }
    };
    let slip = (0.1 + 1.4 * unit(s)) * if unif(s, 0, 1) == 0 { 1.0 } else { -1.0 };
    let mhz = hz_num as f64 * 1000.0 / q as f64 + slip * 1e6 / ms as f64;
    let mut w = jittered(s, 1_000, 1_000, ref_hz);
    w.f_mhz = mhz as u128;
    w
}

const HPET: u64 = 14_318_180;
const ACPI_PM: u64 = 3_579_545;
const RTC: u64 = 32_768;
const TICK_1K: u64 = 1_000;

struct Family {
    n: u64,
    misses: u64,
    errors: Vec<(u64, String)>,
    ratios: Vec<f64>,
    worst: Option<(u64, f64, f64, u64)>,
}

fn family(name: &str, config: Config, make: impl Fn(&mut u64) -> World) -> Family {
    family_n(name, config, seeds(), make)
}

/// A finding's family: at least `n` seeds, so that it fails whatever `BARETIME_ADV_SEEDS`.
fn family_n(name: &str, config: Config, n: u64, make: impl Fn(&mut u64) -> World) -> Family {
    let n = n.max(seeds());
    let mut f = Family {
        n,
        misses: 0,
        errors: Vec::new(),
        ratios: Vec::new(),
        worst: None,
    };
    for seed in 0..n {
        let mut s = seed.wrapping_mul(0x1234_5678_9abc_def1) ^ 0xca1;
        let w = make(&mut s);
        match run(w, seed, config) {
            Out::Ok {
                ratio,
                err_ppb,
                bound,
            } => {
                if ratio > 1.0 {
                    f.misses += 1;
                    if std::env::var_os("VERBOSE").is_some() {
                        eprintln!("  miss seed {seed}: ratio {ratio:.3} err {err_ppb:.0} ppb bound {bound} ppb, counter {:.3} Hz, {w:?}", w.f_mhz as f64 / 1000.0);
                    }
                }
                if f.worst.map_or(true, |(_, r, _, _)| ratio > r) {
                    f.worst = Some((seed, ratio, err_ppb, bound));
                }
                f.ratios.push(ratio);
            }
            Out::Err(e) => f.errors.push((seed, e.token().to_string())),
        }
    }
    f.ratios.sort_by(|a, b| a.partial_cmp(b).expect("finite"));
    let q = |p: f64| -> f64 {
        if f.ratios.is_empty() {
            return f64::NAN;
        }
        let i = ((f.ratios.len() as f64 - 1.0) * p).round() as usize;
        f.ratios[i]
    };
    eprintln!(
        "{name}: misses {}/{} (ok {}), errors {} {:?}, |err|/bound p50 {:.3} p90 {:.3} p99 {:.3} max {:.3}, worst (seed, ratio, err ppb, bound ppb) {:?}",
        f.misses,
        f.n,
        f.ratios.len(),
        f.errors.len(),
        f.errors.iter().take(4).collect::<Vec<_>>(),
        q(0.5),
        q(0.9),
        q(0.99),
        q(1.0),
        f.worst,
    );
    f
}

/// The most misses a 99 % coverage allows in `n` runs: the smallest `k` with
/// `P(X > k) < 0.5 %` for `X ~ Binomial(n, 0.01)`.
fn allowed(n: u64) -> u64 {
    let p: f64 = 0.01;
    let mut cdf = 0.0;
    let mut pmf = (1.0 - p).powi(n as i32);
    for k in 0..=n {
        cdf += pmf;
        if 1.0 - cdf < 0.005 {
            return k;
        }
        pmf *= (n - k) as f64 / (k + 1) as f64 * p / (1.0 - p);
    }
    n
}

fn holds(f: &Family) {
    let bad: Vec<_> = f
        .errors
        .iter()
        .filter(|(_, t)| t != "too_few_samples")
        .collect();
    assert!(
        bad.is_empty(),
        "errors other than too_few_samples from noise alone: {bad:?}"
    );
    assert!(
        f.misses <= allowed(f.n),
        "{} misses in {} runs (99 % allows {})",
        f.misses,
        f.n,
        allowed(f.n)
    );
}

fn cfg() -> Config {
    Config::new()
}

/// Realistic jittered reads: counter 10–60 ns, HPET read 0.3–1 µs, latches mid-read.
fn jittered(s: &mut u64, lo: u64, hi: u64, ref_hz: u64) -> World {
    let mut w = World::base(rate(s, lo, hi), ref_hz);
    w.c_cost = unif(s, 10_000, 60_000);
    w.c_jit = unif(s, 0, 20_000);
    w.r_cost = unif(s, 300_000, 1_000_000);
    w.r_jit = unif(s, 0, 100_000);
    w.c_latch = unif(s, 0, 1000);
    w.r_latch = unif(s, 0, 1000);
    w
}

#[test]
fn slow_counters_against_hpet() {
    holds(&family("1-100 kHz vs HPET, jittered", cfg(), |s| {
        jittered(s, 1_000, 100_000, HPET)
    }));
}

#[test]
fn slow_counters_against_acpi_pm() {
    holds(&family(
        "1-100 kHz vs ACPI PM (24 bits), 1 µs reads",
        cfg(),
        |s| {
            let mut w = jittered(s, 1_000, 100_000, ACPI_PM);
            w.ref_bits = 24;
            w.r_cost = unif(s, 700_000, 1_500_000);
            w
        },
    ));
}

#[test]
fn slow_counters_against_rtc() {
    holds(&family("1-100 kHz vs 32 kHz RTC", cfg(), |s| {
        jittered(s, 1_000, 100_000, RTC)
    }));
}

#[test]
fn slow_counters_against_1khz_tick() {
    holds(&family("2-100 kHz vs 1 kHz tick", cfg(), |s| {
        jittered(s, 2_000, 100_000, TICK_1K)
    }));
}

/// Every read costs exactly the same (an emulator, a microcontroller).
#[test]
fn constant_read_costs() {
    holds(&family("1-100 kHz vs HPET, constant costs", cfg(), |s| {
        let mut w = jittered(s, 1_000, 100_000, HPET);
        w.c_jit = 0;
        w.r_jit = 0;
        w
    }));
}

/// Counter reads a few ns (an on-chip low-power timer), the reference's port I/O a µs, both
/// exactly the same every time: the pause, counted in counter reads, moves each sample by
/// only a few ns, so the samples' phases against the slow counter's ticks random-walk within
/// the reference gap instead of spreading over it.
fn cheap_constant(s: &mut u64, ref_hz: u64) -> World {
    let mut w = World::base(rate(s, 1_000, 10_000), ref_hz);
    w.c_cost = unif(s, 1_000, 5_000);
    w.c_jit = 0;
    w.r_cost = unif(s, 500_000, 1_500_000);
    w.r_jit = 0;
    w.c_latch = unif(s, 0, 1000);
    w.r_latch = unif(s, 0, 1000);
    w
}

/// Held: 0/200, p99 0.34, max 0.42.
#[test]
fn cheap_counter_reads_constant_reference() {
    holds(&family(
        "1-10 kHz, counter reads 1-5 ns, reference reads 0.5-1.5 µs, all constant, vs HPET",
        cfg(),
        |s| cheap_constant(s, HPET),
    ));
}

#[test]
fn cheap_counter_reads_jittered_reference() {
    holds(&family(
        "1-10 kHz, counter reads 1-5 ns, reference reads 0.5-1.5 µs ±50 ns, vs HPET",
        cfg(),
        |s| {
            let mut w = cheap_constant(s, HPET);
            w.r_jit = 50_000;
            w
        },
    ));
}

/// A cadence in step: the sample period `2c + r` set to within ±100 ppm of `P / j`.
#[test]
fn cadence_in_step_with_slow_counter() {
    holds(&family(
        "1-10 kHz, sample period ≈ P/j ±100 ppm, constant",
        cfg(),
        |s| {
            let mut w = World::base(rate(s, 1_000, 10_000), HPET);
            let p_ps = TICK / w.f_mhz;
            w.c_cost = unif(s, 10_000, 50_000);
            w.c_jit = 0;
            w.r_jit = 0;
            let target = unif(s, 600_000, 2_000_000) as u128;
            let j = (p_ps / target).max(1);
            let eps = unit(s) * 2e-4 - 1e-4;
            let period = (p_ps as f64 / j as f64 * (1.0 + eps)) as u64;
            w.r_cost = period.saturating_sub(2 * w.c_cost).max(100_000);
            w.c_latch = unif(s, 0, 1000);
            w.r_latch = unif(s, 0, 1000);
            w
        },
    ));
}

/// Counter reads whose cost depends on the counter's phase: a read in the first part of a
/// tick (a synchronizer after the prescaler's edge) stalls.
#[test]
fn counter_read_cost_depends_on_phase() {
    holds(&family(
        "1-100 kHz, read in first 1-5 % of a tick +0.2-2 µs",
        cfg(),
        |s| {
            let mut w = jittered(s, 1_000, 100_000, HPET);
            w.phase = Some((unif(s, 10, 50), unif(s, 200_000, 2_000_000)));
            w
        },
    ));
}

/// A slow counter behind a bus (an RTC-style prescaled timer): each read 1–5 µs, latched at
/// its start, middle or end.
#[test]
fn slow_counter_reads_latched_anywhere() {
    holds(&family(
        "1-100 kHz, counter reads 1-5 µs, latch 0/500/1000",
        cfg(),
        |s| {
            let mut w = jittered(s, 1_000, 100_000, HPET);
            w.c_cost = unif(s, 1_000_000, 5_000_000);
            w.c_jit = unif(s, 0, 200_000);
            w.c_latch = [0, 500, 1000][unif(s, 0, 2) as usize];
            w
        },
    ));
}

/// Heavy-tailed reference reads (Pareto α = 1.2, 1 % of reads, up to 2 ms).
#[test]
fn heavy_tailed_reference_reads() {
    holds(&family(
        "1-100 kHz, Pareto tail on 1% of reference reads",
        cfg(),
        |s| {
            let mut w = jittered(s, 1_000, 100_000, HPET);
            w.tail = Some((10_000, 12, 200_000, 2_000_000_000));
            w.extra_before_latch = unif(s, 0, 1) == 0;
            w
        },
    ));
}

/// Ticks of alternating length (a prescaler's duty skew, 5–45 % of a tick each way), the
/// counter 1.4–3 kHz, where the misses gather (over 1–10 kHz: 9/400, all at 1.4–2.7 kHz).
/// The same worlds without the skew: 0/500, p99 0.52 (`duty_control_without_skew`).
#[test]
///
/// Was a finding: 19/500 outside (99 % allows 12), p99 1.13, max 1.40 (seed 224: 2 221.631
/// Hz, skew −5.2 %). Fixed (issue 27, the fit's parity term): 0/500, p99 0.577, max 0.707.
fn duty_cycle_skew() {
    holds(&family_n(
        "1.4-3 kHz, alternating tick lengths ±5-45 %",
        cfg(),
        500,
        |s| by_kind("duty_mid", s),
    ));
}

/// The family's worst run alone.
#[test]
///
/// Was a finding: error +4 951 ppb, bound 3 534 ppb. Fixed (issue 27): the same error under
/// a bound of 7 008 ppb (ratio 0.707).
fn duty_cycle_skew_minimal() {
    let mut s = 224u64.wrapping_mul(0x1234_5678_9abc_def1) ^ 0xca1;
    let w = by_kind("duty_mid", &mut s);
    if let Out::Ok {
        ratio,
        err_ppb,
        bound,
    } = run(w, 224, cfg())
    {
        eprintln!("error {err_ppb:.0} ppb, bound {bound} ppb, ratio {ratio:.3}");
        assert!(
            ratio <= 1.0,
            "{w:?}: error {err_ppb:.0} ppb, bound {bound} ppb"
        );
    }
}

#[test]
fn duty_control_without_skew() {
    holds(&family("1.4-3 kHz, no skew", cfg(), |s| {
        by_kind("duty_mid_none", s)
    }));
}

/// Duty skew over faster counters (10–100 kHz) holds.
#[test]
fn duty_cycle_skew_faster_counters() {
    holds(&family(
        "10-100 kHz, alternating tick lengths ±5-45 %",
        cfg(),
        |s| {
            let mut w = jittered(s, 10_000, 100_000, HPET);
            let d = unif(s, 50, 450) as i64;
            w.duty_permille = if unif(s, 0, 1) == 0 { d } else { -d };
            w
        },
    ));
}

/// Every Nth reference read is slower (a cache line, a bus arbiter), N in 2..=16, by 1–5 µs.
#[test]
fn every_nth_reference_read_slower() {
    holds(&family(
        "1-100 kHz, every 2-16th reference read +1-5 µs",
        cfg(),
        |s| {
            let mut w = jittered(s, 1_000, 100_000, HPET);
            w.nth = Some((unif(s, 2, 16), unif(s, 1_000_000, 5_000_000)));
            w.extra_before_latch = unif(s, 0, 1) == 0;
            w
        },
    ));
}

/// The contract's own case: a read whose slow part falls before (or after) the latch, for
/// milliseconds at a time (`Reference`: "latch points that move with the read's duration ...
/// for milliseconds at a time ... are measured too, through the bracket widths"). A slow
/// counter's brackets are 0 or 1 tick wide whatever the read costs. Held: 0/500, p99 0.65.
#[test]
fn reference_read_duration_in_blocks() {
    holds(&family(
        "1-10 kHz, reference reads +1-4 µs in blocks of 2-20 ms",
        cfg(),
        |s| {
            let mut w = jittered(s, 1_000, 10_000, HPET);
            w.blocks = Some((
                unif(s, 1_000_000, 4_000_000),
                unif(s, 2_000_000_000, 20_000_000_000),
            ));
            w.extra_before_latch = unif(s, 0, 1) == 0;
            w
        },
    ));
}

/// Shorter windows: fewer edges (20 ms of a 1 kHz counter is 20 of them).
#[test]
fn short_windows() {
    let c = Config::new().with_max_duration(Duration::from_millis(20));
    holds(&family("1-100 kHz vs HPET, 20 ms", c, |s| {
        jittered(s, 1_000, 100_000, HPET)
    }));
}

// ---- a slow counter in step with a coarse reference ----

/// One world: `hz_mhz` against `ref_hz`, jittered reads (counter 30 ± 20 ns, reference
/// 500 ± 50 ns, both latched mid-read), the default config (100 ms).
fn one(f_mhz: u128, ref_hz: u64, seed: u64) -> (f64, f64, u64) {
    let w = World::base(f_mhz, ref_hz);
    match run(w, seed, cfg()) {
        Out::Ok {
            ratio,
            err_ppb,
            bound,
        } => (ratio, err_ppb, bound),
        Out::Err(e) => panic!("{e:?}"),
    }
}

/// A 32.768 kHz counter (an RTC prescaler, an LPTIM on the LSE crystal) against a 1.024 kHz
/// tick from another crystal, the two ±200 ppm apart: the counter's ticks and the
/// reference's steps are 32:1 in step, and slip by at most 0.65 of a counter tick over the
/// 100 ms window, so both roundings drift together and the line takes the drift for rate.
#[test]
///
/// Was a finding: 80/300 outside, p99 |error|/bound 2.36, max 3.13. Fixed (issue 27: the
/// samples where only the reference moved are fitted, the bins close at its steps): 0/300,
/// p99 0.749, max 0.815.
fn in_step_32k_counter_against_1024hz_tick() {
    holds(&family_n(
        "32.768 kHz ±200 ppm vs 1.024 kHz tick",
        cfg(),
        300,
        |s| by_kind("beat_1024_32k", s),
    ));
}

/// Minimal input: 32 768 Hz − 200 ppm (32 761.447 Hz) against a 1 024 Hz tick. (Across
/// −200..+200 ppm the ratio grows with the offset: 0.0–0.3 at ±20 ppm, 0.5–0.9 at
/// ±100–150, 1.0–1.5 at ±200 in most seeds.)
#[test]
///
/// Was a finding: error +109 885 ppb, bound 71 275 ppb (ratio 1.54, seed 4). Fixed (issue
/// 27): 0.105 (+9 584 ppb under ±91 610 ppb).
fn in_step_32k_minimal() {
    let (ratio, err, bound) = one(32_761_447, 1_024, 4);
    eprintln!("error {err:.0} ppb, bound {bound} ppb, ratio {ratio:.3}");
    assert!(ratio <= 1.0, "error {err:.0} ppb, bound {bound} ppb");
}

/// Integer multiples of a 1 kHz tick, 2–100 kHz, slipping 0.1–1.5 counter ticks over the
/// window.
#[test]
///
/// Was a finding: 77/300 outside, p99 6.8, max 10.3. Fixed (issue 27): 0/300, p99 0.593, max
/// 0.729.
fn in_step_with_1khz_tick() {
    holds(&family_n(
        "k × 1 kHz + slip vs 1 kHz tick",
        cfg(),
        300,
        |s| by_kind("beat_tick", s),
    ));
}

/// Minimal input: a 10 kHz counter 500 ppm fast (10 005 Hz: half a tick of slip over the
/// 100 ms window) against a 1 kHz tick.
#[test]
///
/// Was a finding: error −248 176 ppb, bound 72 248 ppb (ratio 3.43, seed 1). Fixed (issue
/// 27): 0.116 (−10 595 ppb under ±91 551 ppb).
fn in_step_10khz_minimal() {
    let (ratio, err, bound) = one(10_005_000, 1_000, 1);
    eprintln!("error {err:.0} ppb, bound {bound} ppb, ratio {ratio:.3}");
    assert!(ratio <= 1.0, "error {err:.0} ppb, bound {bound} ppb");
}

/// Rates `p/q × 32 768 Hz` (q ≤ 4), 1–100 kHz, slipping 0.1–1.5 ticks, against a 32 kHz
/// RTC.
#[test]
///
/// Was a finding: 60/300 outside, p99 8.5, max 9.8. Fixed (issue 27): 0/300, p99 0.342, max
/// 0.411.
fn in_step_with_rtc() {
    holds(&family_n(
        "p/q × 32 768 Hz + slip vs 32 kHz RTC",
        cfg(),
        300,
        |s| by_kind("beat_rtc", s),
    ));
}

/// What holds: the same beat with counters of 100 kHz–10 MHz (k × 1 kHz + 0.1–1.5 ticks).
#[test]
fn in_step_fast_counters_hold() {
    holds(&family(
        "100 kHz-10 MHz, k × 1 kHz + slip vs 1 kHz tick",
        cfg(),
        |s| by_kind("beat_fast", s),
    ));
}

// ---- the typed-error promises ----

/// One reference read that lasts `len_ms` (a VM preemption) 30 ms into the calibration, the
/// stall before or after the latch, counter `hz`: the result's token, or `ok`.
fn one_stall(hz: u64, len_ms: u64, before: bool, seed: u64) -> String {
    one_stall_in(hz, len_ms, before, false, seed)
}

fn one_stall_in(hz: u64, len_ms: u64, before: bool, in_counter: bool, seed: u64) -> String {
    let mut w = World::base(u128::from(hz) * 1000 + 123, HPET);
    w.stall_in_counter = in_counter;
    w.stall_at = Some((30_000_000_000, len_ms * 1_000_000_000));
    w.extra_before_latch = before;
    let sim = Sim::new(w, seed);
    match calibrate(Ctr(&sim), Refr(&sim), cfg()) {
        Ok(cal) => {
            let err = (cal.frequency.as_millihz() as f64 - w.f_mhz as f64) / w.f_mhz as f64 * 1e9;
            assert!(
                err.abs() <= cal.frequency.accuracy().bound_ppb() as f64,
                "{hz} Hz, {len_ms} ms stall: error {err:.0} ppb outside {cal}"
            );
            "ok".into()
        }
        Err(e) => e.token().into(),
    }
}

/// "Every `CalibrationError` variant but the config-dependent ones can come from faulty
/// hardware; none comes from noise alone except `TooFewSamples`." One preemption of 11 ms
/// (over `stuck_after`, 10 ms) that lands between the reference's latch and the closing
/// counter read ended a 1–50 kHz counter's calibration with `CounterStuck`, though the
/// counter moved 11–550 ticks during it: the stuck check's span started at the reference
/// read before the stall, not after it (a 5 kHz counter: 55 ticks in the stalled bracket,
/// then 157 510 HPET ticks between that sample's reference read and the next, over
/// `stuck_after`'s 143 181). Before the fix: `counter_stuck` at 1, 2, 5, 10 and 50 kHz for
/// stalls of 11–60 ms (9 ms was fine; 1 MHz was fine); now `ok` (`explore_stall`).
#[test]
fn preempted_after_reference_latch_is_not_stuck() {
    assert_eq!(one_stall(5_000, 11, false, 1), "ok");
}

/// What holds: the same stalls, 2–60 ms, before the reference's latch or in a counter read,
/// at any rate; and every stall at 1 MHz and 100 MHz.
#[test]
fn stalls_elsewhere_cost_nothing() {
    for hz in [1_000u64, 5_000, 50_000, 1_000_000, 100_000_000] {
        for ms in [2u64, 11, 30, 60] {
            assert_eq!(
                one_stall(hz, ms, true, 1),
                "ok",
                "{hz} Hz, {ms} ms before the latch"
            );
            assert_eq!(
                one_stall_in(hz, ms, false, true, 1),
                "ok",
                "{hz} Hz, {ms} ms in a counter read"
            );
        }
        if hz >= 1_000_000 {
            assert_eq!(
                one_stall(hz, 30, false, 1),
                "ok",
                "{hz} Hz, after the latch"
            );
        }
    }
}

/// Random preemptions: 1–20 ms (Pareto α = 3 from 1 ms, capped) on 0.1 % of reference reads,
/// before or after the latch, counters of 1–100 kHz against HPET. Before the fix 7/300 runs
/// ended `CounterStuck` (seeds 0, 2, 10, 87, …: three of the default 24); now 0/300, no
/// error, p99 |error|/bound 0.42.
#[test]
fn random_stalls_are_not_stuck() {
    holds(&family(
        "1-100 kHz vs HPET, 1-20 ms stalls on 0.1 % of reference reads",
        cfg(),
        |s| by_kind("stall", s),
    ));
}

/// What must still fail: a counter (1 kHz–1 GHz) that stops 0–80 ms into the calibration
/// ends with `CounterStuck` within `stuck_after` of true time after the stop, plus a few
/// samples (a sample costs at most a few µs here: the check's span starts at the first
/// reference read after the counter's last change). In half the runs the reference jumps
/// forward by up to 50 ms at the same moment: then `CounterStuck`, or `Discontinuity` where
/// the jump is too large for the last samples' brackets to explain (both faulty), as soon.
#[test]
fn stopped_counter_is_stuck_in_time() {
    struct Stops<'a>(Ctr<'a>, u64);
    impl Counter for Stops<'_> {
        fn ticks(&self) -> u64 {
            let v = self.0.ticks();
            v.min(self.0 .0.w.count(self.1))
        }
        fn bits(&self) -> u32 {
            64
        }
    }
    struct Jumps<'a>(Refr<'a>, u64, u64);
    impl Reference for Jumps<'_> {
        fn read(&mut self) -> u64 {
            let after = self.0 .0.t.get() >= self.1;
            let v = self.0.read();
            if after {
                v + self.2
            } else {
                v
            }
        }
        fn bits(&self) -> u32 {
            64
        }
        fn frequency(&self) -> Frequency {
            self.0.frequency()
        }
        fn name(&self) -> &'static str {
            "jumps"
        }
    }
    let (mut worst_over, mut stuck) = (Duration::ZERO, 0);
    for seed in 0..seeds().min(40) {
        let mut s = seed ^ 0x570;
        let w = jittered(&mut s, 1_000, 1_000_000_000, HPET);
        let stop_ps = unif(&mut s, 0, 80_000_000_000);
        let jump = if seed % 2 == 0 {
            0
        } else {
            unif(&mut s, 1, HPET / 20)
        };
        let sim = Sim::new(w, seed);
        let start = sim.t.get();
        // No target: the calibration runs its 100 ms, past the stop.
        let c = Config::new().with_target_ppb(0);
        let r = calibrate(
            Stops(Ctr(&sim), start + stop_ps),
            Jumps(Refr(&sim), start + stop_ps, jump),
            c,
        );
        let after_stop = Duration::from_nanos((sim.t.get() - start - stop_ps) / 1000);
        assert!(
            matches!(r, Err(CalibrationError::CounterStuck))
                || (jump != 0 && matches!(r, Err(CalibrationError::Discontinuity))),
            "seed {seed}: {} Hz stopped at {} µs, jump {jump}: {r:?}",
            w.f_mhz / 1000,
            stop_ps / 1_000_000
        );
        stuck += u32::from(r == Err(CalibrationError::CounterStuck));
        worst_over = worst_over.max(after_stop.saturating_sub(c.stuck_after()));
        assert!(
            after_stop <= c.stuck_after() + Duration::from_micros(100),
            "seed {seed}: {after_stop:?} after the stop ({r:?})"
        );
    }
    eprintln!(
        "stopped counters: {stuck} CounterStuck, the rest Discontinuity, at most {worst_over:?} past stuck_after"
    );
}

#[test]
#[ignore = "exploration: one long stall, by counter rate and length"]
fn explore_stall() {
    for hz in [
        1_000u64,
        2_000,
        5_000,
        10_000,
        50_000,
        1_000_000,
        100_000_000,
    ] {
        for before in [true, false] {
            let r: Vec<String> = [2u64, 5, 9, 11, 15, 30, 60]
                .iter()
                .map(|&ms| format!("{ms}ms:{}", one_stall(hz, ms, before, 1)))
                .collect();
            eprintln!("{hz} Hz, stall before latch {before}: {r:?}");
        }
        let r: Vec<String> = [2u64, 5, 9, 11, 15, 30, 60]
            .iter()
            .map(|&ms| format!("{ms}ms:{}", one_stall_in(hz, ms, false, true, 1)))
            .collect();
        eprintln!("{hz} Hz, stall in a counter read: {r:?}");
    }
}

/// A reference that dies part-way, with a right rate hint: `ReferenceStuck` within
/// `max_duration + 3 × stuck_after` of true time.
#[test]
fn dead_reference_with_hint_ends_in_time() {
    for seed in 0..seeds().min(40) {
        let mut s = seed ^ 0xdead;
        let w = jittered(&mut s, 1_000, 100_000, HPET);
        let die_ps = unif(&mut s, 0, 120_000_000_000);
        let sim = Sim::new(w, seed);
        let start = sim.t.get();
        struct Dies<'a>(Refr<'a>, u64, Option<u64>);
        impl Reference for Dies<'_> {
            fn read(&mut self) -> u64 {
                let v = self.0.read();
                if self.0 .0.t.get() > self.1 {
                    return *self.2.get_or_insert(v);
                }
                v
            }
            fn bits(&self) -> u32 {
                64
            }
            fn frequency(&self) -> Frequency {
                self.0.frequency()
            }
            fn name(&self) -> &'static str {
                "dies"
            }
        }
        let hz = (w.f_mhz / 1000) as u64;
        let hint = Frequency::nominal_hz(hz, 20_000_000).expect("in range");
        let c = Config::new().with_rate_hint(hint);
        let r = calibrate(Ctr(&sim), Dies(Refr(&sim), start + die_ps, None), c);
        let took = Duration::from_nanos((sim.t.get() - start) / 1000);
        let limit = c.max_duration() + 3 * c.stuck_after();
        if die_ps < 100_000_000_000 {
            assert!(
                matches!(r, Err(CalibrationError::ReferenceStuck)),
                "seed {seed}: {r:?}"
            );
        }
        assert!(
            took <= limit,
            "seed {seed}: took {took:?} > {limit:?} ({r:?})"
        );
    }
}

/// A coarse reference (a 1 kHz tick) that dies after 5–120 ms, no rate hint: once it has
/// made four steps, `ReferenceStuck` within `max_duration + 3 × stuck_after` of true time.
#[test]
fn dead_coarse_reference_without_hint_ends_in_time() {
    for seed in 0..seeds().min(40) {
        let mut s = seed ^ 0xd1e;
        let w = jittered(&mut s, 1_000, 100_000, TICK_1K);
        let die_ps = unif(&mut s, 5_000_000_000, 120_000_000_000);
        let sim = Sim::new(w, seed);
        let start = sim.t.get();
        let frozen = Cell::new(None);
        let dies = baretime::CounterReference::new(
            baretime::FnCounter::new(
                || {
                    let v = Refr(&sim).read();
                    if sim.t.get() > start + die_ps {
                        let f = frozen.get().unwrap_or(v);
                        frozen.set(Some(f));
                        return f;
                    }
                    v
                },
                64,
            ),
            Frequency::exact_hz(TICK_1K).expect("in range"),
        );
        let c = Config::new();
        let r = calibrate(Ctr(&sim), dies, c);
        let took = Duration::from_nanos((sim.t.get() - start) / 1000);
        let limit = c.max_duration() + 3 * c.stuck_after();
        if die_ps < 100_000_000_000 {
            assert!(
                matches!(r, Err(CalibrationError::ReferenceStuck)),
                "seed {seed}: {r:?}"
            );
        }
        assert!(
            took <= limit,
            "seed {seed}: took {took:?} > {limit:?} ({r:?})"
        );
    }
}

/// A reference 1000 times slower than it declares: `ImplausibleRate` by its second step
/// after the first sample (an HPET: 140 µs of true time, documented).
#[test]
fn slow_reference_told_early() {
    for seed in 0..seeds().min(40) {
        let mut s = seed ^ 0x510;
        let mut w = jittered(&mut s, 1_000_000_000, 5_000_000_000, HPET);
        w.f_mhz = u128::from(unif(&mut s, 1_000_000_000, 4_000_000_000)) * 1000;
        w.ref_hz = HPET / 1000; // runs at 1/1000 of what it states
        struct Declares<'a>(Refr<'a>);
        impl Reference for Declares<'_> {
            fn read(&mut self) -> u64 {
                self.0.read()
            }
            fn bits(&self) -> u32 {
                64
            }
            fn frequency(&self) -> Frequency {
                Frequency::exact_hz(HPET).expect("in range")
            }
            fn name(&self) -> &'static str {
                "slow"
            }
        }
        let sim = Sim::new(w, seed);
        let start = sim.t.get();
        let r = calibrate(Ctr(&sim), Declares(Refr(&sim)), Config::new());
        let took_us = (sim.t.get() - start) / 1_000_000;
        assert!(
            matches!(r, Err(CalibrationError::ImplausibleRate { .. })),
            "seed {seed}: {r:?}"
        );
        // Warm-up plus two slow steps (2 × 69.8 µs): the doc's 140 µs, with a warm-up's
        // margin of 32 steps.
        assert!(took_us < 40 * 70, "seed {seed}: {took_us} µs");
    }
}

fn by_kind(kind: &str, s: &mut u64) -> World {
    match kind {
        "tick" => jittered(s, 2_000, 100_000, TICK_1K),
        "tick_lo" => jittered(s, 2_000, 30_000, TICK_1K),
        "tick_const" => {
            let mut w = jittered(s, 2_000, 30_000, TICK_1K);
            w.c_jit = 0;
            w.r_jit = 0;
            w
        }
        "rtc" => jittered(s, 1_000, 100_000, RTC),
        "rtc_lo" => jittered(s, 1_000, 10_000, RTC),
        "rtc_hi" => jittered(s, 10_000, 100_000, RTC),
        "duty" => {
            let mut w = jittered(s, 1_000, 10_000, HPET);
            let d = unif(s, 50, 450) as i64;
            w.duty_permille = if unif(s, 0, 1) == 0 { d } else { -d };
            w
        }
        "duty_mid" => {
            let mut w = jittered(s, 1_400, 3_000, HPET);
            let d = unif(s, 50, 450) as i64;
            w.duty_permille = if unif(s, 0, 1) == 0 { d } else { -d };
            w
        }
        "duty_mid_const" => {
            let mut w = jittered(s, 1_400, 3_000, HPET);
            w.c_jit = 0;
            w.r_jit = 0;
            let d = unif(s, 50, 450) as i64;
            w.duty_permille = if unif(s, 0, 1) == 0 { d } else { -d };
            w
        }
        "below_min" => {
            // 1 kHz less 0–60 ppm: below Frequency::MIN_HZ, "reported at that edge, its bound
            // widened by the distance".
            let mut w = jittered(s, 1_000, 1_000, HPET);
            w.f_mhz = 1_000_000 - u128::from(unif(s, 0, 60));
            w
        }
        "stall" => {
            let mut w = jittered(s, 1_000, 100_000, HPET);
            w.tail = Some((1_000, 30, 1_000_000_000, 20_000_000_000));
            w.extra_before_latch = unif(s, 0, 1) == 0;
            w
        }
        "nth" => {
            let mut w = jittered(s, 1_000, 10_000, HPET);
            w.nth = Some((unif(s, 2, 16), unif(s, 1_000_000, 5_000_000)));
            w.extra_before_latch = unif(s, 0, 1) == 0;
            w
        }
        "blocks" => {
            let mut w = jittered(s, 1_000, 10_000, HPET);
            w.blocks = Some((
                unif(s, 1_000_000, 4_000_000),
                unif(s, 2_000_000_000, 20_000_000_000),
            ));
            w.extra_before_latch = unif(s, 0, 1) == 0;
            w
        }
        "duty_mid_none" => jittered(s, 1_400, 3_000, HPET),
        "phase" => {
            let mut w = jittered(s, 1_000, 100_000, HPET);
            w.phase = Some((unif(s, 10, 50), unif(s, 200_000, 2_000_000)));
            w
        }
        "phase_lo" => {
            let mut w = jittered(s, 1_000, 10_000, HPET);
            w.phase = Some((unif(s, 1, 20), unif(s, 500_000, 5_000_000)));
            w
        }
        "hpet" => jittered(s, 1_000, 100_000, HPET),
        "beat" => beat(s, &[TICK_1K, 1_024, RTC], 4, 100),
        "beat_fast" => {
            // 100 kHz – 10 MHz, an integer multiple of a 1 kHz tick, slipping 0.1–1.5 ticks.
            let mut w = jittered(s, 1_000, 1_000, TICK_1K);
            let k = unif(s, 100, 10_000);
            let slip = (0.1 + 1.4 * unit(s)) * if unif(s, 0, 1) == 0 { 1.0 } else { -1.0 };
            w.f_mhz = (k as f64 * 1e6 + slip * 1e4) as u128;
            w
        }
        "beat_fast_rtc" => {
            // 0.1-10 MHz at p/q × 32 768 Hz (q ≤ 4), slipping 0.1–1.5 ticks, vs a 32 kHz RTC.
            let mut w = jittered(s, 1_000, 1_000, RTC);
            let q = unif(s, 1, 4);
            let p = unif(s, 4 * q, 300 * q);
            let slip = (0.1 + 1.4 * unit(s)) * if unif(s, 0, 1) == 0 { 1.0 } else { -1.0 };
            w.f_mhz = (32_768_000.0 * p as f64 / q as f64 + slip * 1e4) as u128;
            w
        }
        "beat_slip" => {
            // 1-100 kHz, an integer multiple of 1 kHz, slip SLIP ticks over 100 ms.
            let slip: f64 = std::env::var("SLIP").unwrap().parse().unwrap();
            let mut w = jittered(s, 1_000, 1_000, TICK_1K);
            let k = unif(s, 2, 100);
            w.f_mhz = (k as f64 * 1e6 + slip * 1e4) as u128;
            w
        }
        "beat_tick" => beat(s, &[TICK_1K], 1, 100),
        "beat_rtc" => beat(s, &[RTC], 4, 100),
        "beat_1024_32k" => {
            // A 32.768 kHz counter against a 1.024 kHz tick (e.g. another board's RTC
            // prescaler): ±200 ppm between the two crystals.
            let mut w = jittered(s, 1_000, 1_000, 1_024);
            let ppm = unit(s) * 400.0 - 200.0;
            w.f_mhz = (32_768_000.0 * (1.0 + ppm * 1e-6)) as u128;
            w
        }
        _ => unreachable!("{kind}"),
    }
}

#[test]
#[ignore = "exploration: KIND=<family> BARETIME_ADV_SEEDS=n"]
fn explore_family() {
    let Ok(kind) = std::env::var("KIND") else {
        return;
    };
    let ms: u64 = std::env::var("MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let c = Config::new().with_max_duration(Duration::from_millis(ms));
    family(&kind, c, |s| by_kind(&kind, s));
}

#[test]
#[ignore = "exploration: KIND=<family> SEED=n"]
fn explore_seed() {
    let Some(seed) = std::env::var("SEED")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    else {
        return;
    };
    let kind = std::env::var("KIND").unwrap();
    let mut s = seed.wrapping_mul(0x1234_5678_9abc_def1) ^ 0xca1;
    let w = by_kind(&kind, &mut s);
    eprintln!("{w:?} hz {}", w.f_mhz as f64 / 1000.0);
    let sim = Sim::new(w, seed);
    let r = calibrate(Ctr(&sim), Refr(&sim), cfg());
    eprintln!("{r:?}");
    if let Ok(c) = r {
        eprintln!("{c}");
    }
}

#[test]
#[ignore = "exploration: scan a 32.768 kHz counter's offset against a 1.024 kHz tick"]
fn explore_32k_scan() {
    for ppm in [-200i64, -150, -100, -50, -20, 20, 50, 100, 150, 200] {
        let f = (32_768_000 + 32_768 * ppm / 1000) as u128;
        let r: Vec<String> = (1..=5)
            .map(|seed| format!("{:.2}", one(f, 1_024, seed).0))
            .collect();
        eprintln!("{ppm} ppm ({f} mHz): ratios {r:?}");
    }
}

#[test]
#[ignore = "exploration: KIND=<family> BARETIME_ADV_SEEDS=n, every run's result"]
fn explore_each() {
    let Ok(kind) = std::env::var("KIND") else {
        return;
    };
    for seed in 0..seeds() {
        let mut s = seed.wrapping_mul(0x1234_5678_9abc_def1) ^ 0xca1;
        let w = by_kind(&kind, &mut s);
        let sim = Sim::new(w, seed);
        let start = sim.t.get();
        let r = calibrate(Ctr(&sim), Refr(&sim), cfg());
        let took_ms = (sim.t.get() - start) as f64 / 1e9;
        let res = match r {
            Ok(c) => format!(
                "ok {} mHz bound {} ppb",
                c.frequency.as_millihz(),
                c.frequency.accuracy().bound_ppb()
            ),
            Err(e) => format!("{e:?}"),
        };
        eprintln!("seed {seed} f {} mHz took {took_ms:.3} ms: {res}", w.f_mhz);
    }
}
