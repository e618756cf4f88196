//! Round-3 outside attack on [`Watchdog`] (issue 28), written from its rustdoc, the README's
//! watchdog section and the public API alone (not its function bodies nor the other tests).
//! Every world is scripted here, so the truth is exact: true time in picoseconds; a counter
//! and a reference derived from it by piecewise rates (steps, ramps, stops, steps of the
//! count, narrow widths, phases); every read costs scripted time and latches at a scripted
//! point (the reference's uniformly inside its read); delayed reads before or after the latch,
//! SMI stalls, hostile reference values. After every check the test compares the clock's
//! rate (`Clock::scale().millihz()`) with the counter's rate as the reference counts it
//! (`bound_ppb`'s own definition), reads `now()` before and after (promise 1; promise 2 as
//! "no more than the ticks the check took at the slower rate in force + `MARK_GRANULE_NS` +
//! 20 µs"), and tallies health's counts against the verdicts.
//!
//! Seeds: `BARETIME_ADV_SEEDS` (default 12: the file runs in well under a second in release);
//! the figures below are from `BARETIME_ADV_SEEDS=100` on this host (x86_64, deterministic per
//! seed), those "at 300" from `BARETIME_ADV_SEEDS=300`. Run: `BARETIME_ADV_SEEDS=100 cargo test
//! --release -p baretime --test adversary_watchdog3 -- --include-ignored --nocapture` (the
//! findings are the `#[ignore]`d tests: `-- --ignored`).
//!
//! Held (every seed; families × seeds at 100):
//!
//! | family | seeds | what held |
//! | --- | --- | --- |
//! | constant rates: 1 kHz–5 GHz × HPET, HPET32, ACPI PM, PIT, 32 kHz RTC, 10 MHz; refs off their rate within a stated tolerance; delayed reads ≤ 5 ms; SMIs ≤ 200 ms; P 0.1–4 s, hook jitter ≤ 20 % | 400 (37 839 checks) | 0 (c)/(d), error ≤ `bound_ppb` at every check, 0 steps back, 0 jumps, counts |
//! | change 3–50× twice the widest steady interval bound (≤ 10 %), in an interval / inside a check's brackets | 400 + 400 | reported ≤ 3 checks after (p50 1.0 s, max 4.2 s at P ≤ 2 s), `bound_ppb` from the check after the report on, no counter fault (also the verdict's rate within its bound; seed 1155 broke that, below, fixed) |
//! | change 1.02–1.5× the threshold | 400 | reported ≤ 3 checks after; the verdict's rate within its bound and `bound_ppb` from the report on (since issue 28's fix, below) |
//! | counter stops; forward steps 0.2 P – 1 day | 400 | CounterStopped / CounterJumped ≤ 2 checks, `by_ns` within 1 % + 1 ms, no Changed before |
//! | references stuck, paused 1–20 s, stepping ±, running back, flapping | 3 000 | no counter fault, no Changed after a one-off, no panic, promises 1–2 |
//! | narrow counters (32-bit 3–5 GHz, 24-bit 24 MHz, 16-bit 1 MHz) vs HPET / ACPI PM / PIT | 300 | no alarm, bound holds, the change reported ≤ 3 checks |
//! | periods 0 s, 1 µs, 1 ms, 1 h, 1 d, 30 d mixed, 24 MHz–5 GHz vs 64-bit references | 300 (18 000 checks) | no alarm, bound holds, counts |
//! | rejected checks under 10–40 % delayed reads | 400 (174 WideBracket) | each leaves the rate and `bound_ppb` as they were |
//! | refinement: start 0.2–4 ppm off, slew 0 / 0.1 / 1 / 2 ppm | 400 | every steer ≤ slew, none at 0, `steers` ≥ moves, bound at 60 s ≤ 3 × (w/T + step/T) (p50 25 ppb), error within it |
//! | slow ramps / staircases ±2–300 ppb/s | 300 + 300 | reported (p50 14.2 s / 16.8 s, max 72 s / 88 s; 12.8 s / 15.8 s, max 70 s before the fixes below); both within `bound_ppb` from the report on (the staircase's checks whose interval holds a step not judged; since the fixes below), 0 of 900 each at `BARETIME_ADV_SEEDS=300`; the bound after the report p50 2 473 / 2 507 ppb, p90 6 356 / 6 368 (665 / 666, p90 2 052 / 2 125 before the second fix below), the clock's error p50 208 / 189 |
//! | alternating changes 3–20× threshold every 4–10 P, 12 toggles | 300 | each reported ≤ 3 checks, bound until the next toggle (0 of 900 at `BARETIME_ADV_SEEDS=300` since seed 444's fix, below) |
//! | `with_tries(0 / u32::MAX / 65)`, `with_slew_ppb(u64::MAX)`, start at MIN_HZ / MAX_HZ, bound u64::MAX | 500 | no panic, no step back, counts |
//!
//! Broke (each an `#[ignore = "finding: ..."]` test below, with the sentence it breaks):
//!
//! | test | world | figures |
//! | --- | --- | --- |
//! | `a_step_with_a_new_rate_is_changed_at_the_next_check` | 1 GHz vs HPET/10 MHz, forward step 1–100 s and ±0.1 % at once | CounterJumped, then 8 × Unconfirmed, Changed at the 9th check: 200 of 200 seeds ("Changed at the next check") |
//! | `a_change_near_the_threshold_is_reported_with_a_rate_inside_its_bound` (fixed, now run) | δ 1.02–1.5× threshold; and seed 1155 at 4.7× | Changed at the first (mixed) check with a rate outside its own bound, `bound_ppb` below the error: 5 of 400 (16 of 1 200 at 300 seeds; 8 951 ppb off under 6 409); seed 1155: −59.8 ppm, the clock moved −408 ppb, 59 335 ppb off under 10 676 (now 0 of 400, 0 of 1 200 at 300, seed 1155 held: the report waits for an interval wholly after the change) |
//! | `alternating_changes_seed_444_is_reported` (fixed, now run) | ACPI PM vs 24 MHz, P 2 s, ±7.1 ppm toggles every 4 P | one toggle steady at 4 checks, followed by refinement at 1 ppm/check, never Changed (1 of 900 at 300 seeds; now reported, 0 of 900: a move back against the pace is a new change) |
//! | `a_steady_ramp_stays_within_the_bound_after_its_report` (fixed, now run) | linear ramp ±2–300 ppb/s | error > `bound_ppb` after the report: 45 of 300, up to 2.96× (then 0 of 300, but at 300 seeds 2 of 900, up to 1.65×: seeds 710, 865; now 0 of 900: a move seen keeps a steady ramp's worst case in the bound for eight times its span) |
//! | `a_staircase_stays_within_the_bound_after_its_report` (fixed, now run) | same pace in steps every 5 P | 94 of 300, up to 13.3× (then, checks whose interval holds a step not judged, as the docs state: 3 of 300, up to 1.15×; 6 of 900 at 300 seeds, up to 2.06×: seeds 13, 156, 203, 557, 685, 710; now 0 of 300, 0 of 900: while the rate may be moving the bound covers the last interval's rate and bound) |
//! | `a_catch_up_check_on_a_slow_counter_is_not_a_stop` | 1 kHz / 32 kHz vs HPET, one check 0–1 ms after the last | CounterStopped at constant rates: 1 kHz 123 of 133, 32 kHz 62 of 67 (0 s / 1 µs) |
//! | `extreme_periods_with_slow_counters_never_alarm` | 1 kHz–1 MHz, mixed periods 0 s – 30 d | CounterStopped at constant rates: 207 of 300 |
//! | `a_garbage_reference_never_faults_an_honest_counter` | random reference values, honest counter | CounterJumped { by_ns: i64::MIN }: 245 of 500 |
//! | `a_step_back_is_told_by_its_size` | 64-bit counter steps back | `by_ns` = step + one period: 68 of 200 beyond 1 % + 1 ms |
//! | `a_long_gap_against_a_narrow_reference_is_no_change` (outside the unwrap condition, silent; fixed: *Widths*, [`Unjudged::TooLong`], now run) | 1 GHz vs PIT, one check a week / 30 d later | error > `bound_ppb` by 35–227 ppb, no verdict: 80 of 400 (now 0; 146 gaps `TooLong`) |
//! | `extreme_periods_against_narrow_references` (same; the narrow references' part fixed, now run from 1 MHz up) | PIT / ACPI PM / RTC, mixed periods to 30 d | 129 of 300; PIT: Changed after a day, clock 636 / 1 271 ppb off under 5–51 (now 66 of 300: only the 1 kHz / 32 kHz counters' CounterStopped on 0–1 ms gaps, as in `extreme_periods_with_slow_counters_never_alarm`) |
//!
//! Not attacked: calls from several threads (`check` takes `&mut self`; the scripted world is
//! single-threaded), the false-alarm rate of the start's statistical bound (every start here is
//! honestly bounded), and adversarial latch drift inside brackets.

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
        .unwrap_or(12)
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

/// One segment of a count's rate: from `at` ps, `rate` mHz, changing by `slope` mHz per
/// second.
#[derive(Clone, Copy, Debug)]
struct Seg {
    at: u64,
    rate: i128,
    slope: i128,
}

/// A count derived from true time: piecewise rates (ramps allowed), steps, a phase, a
/// width and a quantization (counts that move by `quant` at a time).
#[derive(Clone, Debug)]
struct Track {
    segs: Vec<Seg>,
    jumps: Vec<(u64, i128)>,
    phase: i128,
    start: i128,
    bits: u32,
    quant: i128,
}

impl Track {
    fn new(rate_mhz: u128, bits: u32, seed: &mut u64) -> Track {
        Track {
            segs: vec![Seg {
                at: 0,
                rate: rate_mhz as i128,
                slope: 0,
            }],
            jumps: Vec::new(),
            phase: i128::from(mix(seed) % (TICK as u64)),
            start: i128::from(mix(seed) >> 4),
            bits,
            quant: 1,
        }
    }

    /// From `at` on, `rate` mHz (ramping by `slope` mHz/s).
    fn set(&mut self, at: u64, rate: i128, slope: i128) {
        self.segs.retain(|s| s.at < at);
        self.segs.push(Seg { at, rate, slope });
    }

    /// The rate at `at` (mHz).
    fn rate_at(&self, t: u64) -> i128 {
        let s = self.segs.iter().rev().find(|s| s.at <= t).unwrap();
        s.rate + s.slope * i128::from(t - s.at) / PS
    }

    fn acc(&self, t: u64) -> i128 {
        let mut acc = self.phase;
        for (i, s) in self.segs.iter().enumerate() {
            if t <= s.at {
                break;
            }
            let end = self.segs.get(i + 1).map_or(t, |n| n.at.min(t));
            let dt = i128::from(end - s.at);
            acc += s.rate * dt;
            if s.slope != 0 {
                acc += s.slope * dt / PS * dt / 2;
            }
        }
        acc
    }

    /// Unwrapped count at `t`.
    fn raw(&self, t: u64) -> i128 {
        let jumps: i128 = self.jumps.iter().filter(|j| j.0 <= t).map(|j| j.1).sum();
        self.start + self.acc(t).div_euclid(TICK) + jumps
    }

    fn read(&self, t: u64) -> u64 {
        let r = self.raw(t).div_euclid(self.quant) * self.quant;
        if self.bits >= 64 {
            r as u64
        } else {
            r.rem_euclid(1i128 << self.bits) as u64
        }
    }
}

/// What a hostile reference returns instead of its count, from a true time on.
#[derive(Clone, Copy, Debug)]
enum Hostile {
    None,
    /// Random values from `from` on.
    Garbage {
        from: u64,
    },
    /// Every other read is the count minus `by` (a torn read, a flapping latch) from `from`.
    Flap {
        from: u64,
        by: u64,
    },
}

/// A scripted world: true time in ps; every read costs time; counts latched inside reads.
struct World {
    t: u64,
    seed: u64,
    ctr: Track,
    refr: Track,
    ref_stated: Frequency,
    /// Counter read cost and jitter (ps), latch point (permille of the read).
    c_cost: u64,
    c_jit: u64,
    c_latch: u64,
    /// Reference read cost and jitter (ps).
    r_cost: u64,
    r_jit: u64,
    /// Latch point schedule: from true time `.0`, permille `.1` (`None`: uniform per read).
    r_latch: Vec<(u64, Option<u64>)>,
    /// A delayed reference read: probability (ppm) and the longest delay (ps), before the
    /// latch or after it (chosen per read).
    r_delay: (u64, u64),
    /// One-off stalls of a reference read starting at or after `.0`, for `.1` ps.
    stalls: Vec<(u64, u64)>,
    hostile: Hostile,
    n_ref_reads: u64,
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
            c_cost: 20_000,
            c_jit: 10_000,
            c_latch: 500,
            r_cost: 1_000_000,
            r_jit: 100_000,
            r_latch: vec![(0, None)],
            r_delay: (0, 0),
            stalls: Vec::new(),
            hostile: Hostile::None,
            n_ref_reads: 0,
        }
    }

    fn read_counter(&mut self) -> u64 {
        let cost = unif(&mut self.seed, self.c_cost, self.c_cost + self.c_jit);
        let latch = self.t + cost * self.c_latch / 1000;
        self.t += cost;
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
        }
        let cost = unif(&mut self.seed, self.r_cost, self.r_cost + self.r_jit);
        let permille = match self.r_latch.iter().rev().find(|l| l.0 <= self.t).unwrap().1 {
            Some(p) => p,
            None => unif(&mut self.seed, 0, 1000),
        };
        let latch = self.t + before + cost * permille / 1000;
        self.t += before + cost + after;
        let honest = self.refr.read(latch);
        match self.hostile {
            Hostile::Garbage { from } if latch >= from => {
                mix(&mut self.seed) & mask(self.refr.bits)
            }
            Hostile::Flap { from, by } if latch >= from && self.n_ref_reads % 2 == 0 => {
                honest.wrapping_sub(by) & mask(self.refr.bits)
            }
            _ => honest,
        }
    }

    /// The counter's rate as the reference counts it, mHz (f64).
    fn truth(&self) -> f64 {
        let c = self.ctr.rate_at(self.t) as f64;
        let r = self.refr.rate_at(self.t) as f64;
        c * self.ref_stated.as_millihz() as f64 / r
    }
}

fn mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
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
    /// True time at the check's end (ps).
    t1: u64,
    v: Watch,
    /// |clock's rate − the counter's rate as the reference counts it| (ppb) after the check.
    err: f64,
    bound: u64,
    clock_mhz: u64,
    /// The rate's change by this check (ppb of the old rate).
    moved: f64,
}

struct Sim {
    w: Rc<RefCell<World>>,
    clock: Clock<SimCounter>,
    wd: Watchdog<SimRef>,
    last: Instant,
    recs: Vec<Rec>,
    /// Whether to judge promise 2 across each check (not where the counter itself jumps).
    judge_jumps: bool,
    /// `clock.update()` at least this often (narrow counters), ps; 0: never.
    update_every: u64,
    /// Worst excess over promise 2's allowance across a check (ns).
    worst_jump_excess: i128,
    back_steps: u64,
}

impl Sim {
    fn new(world: World, start: Frequency) -> Sim {
        Sim::with(world, start, |w| w)
    }

    fn with(
        world: World,
        start: Frequency,
        f: impl FnOnce(Watchdog<SimRef>) -> Watchdog<SimRef>,
    ) -> Sim {
        let w = Rc::new(RefCell::new(world));
        let clock = Clock::new(SimCounter(w.clone()), start);
        let wd = f(Watchdog::new(SimRef(w.clone()), start));
        let last = clock.now();
        Sim {
            w,
            clock,
            wd,
            last,
            recs: Vec::new(),
            judge_jumps: true,
            update_every: 0,
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

    fn check(&mut self) -> Watch {
        let mhz0 = self.clock.scale().millihz();
        let tb = self.w.borrow().t;
        let before = self.now();
        let v = self.wd.check(&self.clock);
        let t1 = self.w.borrow().t;
        let after = self.now();
        let ta = self.w.borrow().t;
        let mhz1 = self.clock.scale().millihz();
        if self.judge_jumps {
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
        let h = self.wd.health();
        self.recs.push(Rec {
            t1,
            v,
            err,
            bound: h.bound_ppb,
            clock_mhz: mhz1,
            moved: (mhz1 as f64 - mhz0 as f64) / mhz0 as f64 * 1e9,
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
            self.check();
        }
    }

    /// Health's counts add up to the checks, and match the verdicts seen.
    fn counts_agree(&self) -> Result<(), String> {
        let h = self.wd.health();
        let count = |f: fn(&Watch) -> bool| self.recs.iter().filter(|r| f(&r.v)).count() as u64;
        let seen = (
            count(|v| matches!(v, Watch::NoVerdict(_))),
            count(|v| matches!(v, Watch::Steady { .. })),
            count(|v| matches!(v, Watch::Changed { .. })),
            count(|v| matches!(v, Watch::CounterStopped | Watch::CounterJumped { .. })),
        );
        let got = (h.no_verdict, h.steady, h.changed, h.counter_faults);
        if h.checks != self.recs.len() as u64 || seen != got {
            return Err(format!(
                "health {h:?} against {} checks, verdicts seen {seen:?}",
                self.recs.len()
            ));
        }
        Ok(())
    }
}

/// A start rate about `ppb_off` from `true_mhz`, stated with bound `bound` ppb (Measured)
/// widened to cover the rounding to millihertz (an honest start).
fn start_rate(true_mhz: f64, ppb_off: f64, bound: u64) -> Frequency {
    let mhz = ((true_mhz * (1.0 + ppb_off * 1e-9)).round() as u64).max(1_000_000);
    let actual = ((mhz as f64 - true_mhz).abs() / true_mhz * 1e9).ceil() as u64 + 1;
    let bound = bound.max(actual);
    Frequency::from_millihz(
        mhz,
        Source::Calibrated,
        Accuracy::Measured {
            uncertainty_ppb: bound,
        },
    )
    .unwrap()
}

/// The references of the attack: (name, Hz, bits, read cost ps).
const REFS: [(&str, u64, u32, u64); 6] = [
    ("hpet", 14_318_180, 64, 1_000_000),
    ("hpet32", 14_318_180, 32, 800_000),
    ("acpi_pm", 3_579_545, 24, 1_200_000),
    ("pit", 1_193_182, 16, 2_500_000),
    ("rtc32k", 32_768, 32, 1_500_000),
    ("10mhz", 10_000_000, 64, 300_000),
];

/// Counter rates of the attack (Hz): 1 kHz to 5 GHz.
const COUNTERS: [u64; 8] = [
    1_000,
    32_768,
    1_000_000,
    24_000_000,
    100_000_000,
    1_000_000_000,
    3_000_000_000,
    5_000_000_000,
];

fn is_alarm(v: &Watch) -> bool {
    matches!(
        v,
        Watch::Changed { .. } | Watch::CounterStopped | Watch::CounterJumped { .. }
    )
}

/// The worst `err − bound` (ppb) over `recs`, with the record.
fn worst_excess(recs: &[Rec]) -> Option<(f64, Rec)> {
    recs.iter()
        .map(|r| (r.err - r.bound as f64, *r))
        .max_by(|a, b| a.0.total_cmp(&b.0))
}

/// A world at constant rates with delays, stalls and jitter of its reads, from `seed`.
/// Returns the world, the start rate, the period and the hook's jitter.
fn constant_world(seed: u64) -> (World, Frequency, u64, u64, String) {
    let mut s = seed.wrapping_mul(0x1234_5678_9abc_def1) ^ 0x5eed;
    let (rname, rhz, rbits, rcost) = REFS[(mix(&mut s) % REFS.len() as u64) as usize];
    let chz = COUNTERS[(mix(&mut s) % COUNTERS.len() as u64) as usize];
    // The counter off its nominal rate by up to ±200 ppm (the truth is what it is).
    // (A 1 kHz counter only above: the crate's floor.)
    let lo = if chz == 1_000 { 250_000 } else { 0 };
    let ppb = unif(&mut s, lo, 400_000) as f64 - 200_000.0;
    let c_mhz = (chz as f64 * 1000.0 * (1.0 + ppb * 1e-9)).round() as u128;
    let mut w = World::new(mix(&mut s), c_mhz, 64, rhz, rbits);
    w.r_cost = rcost;
    w.r_jit = unif(&mut s, 0, rcost / 2);
    w.c_cost = unif(&mut s, 5_000, 60_000);
    w.c_jit = unif(&mut s, 0, 20_000);
    w.c_latch = unif(&mut s, 0, 1000);
    // A reference off its stated rate within a stated tolerance (half the seeds).
    let mut desc = format!("{rname} vs {chz} Hz");
    if mix(&mut s) & 1 == 0 {
        let tol = unif(&mut s, 1_000, 100_000);
        let off = unif(&mut s, 0, 2 * tol) as i128 - tol as i128;
        w.ref_stated = Frequency::nominal_hz(rhz, tol).unwrap();
        let true_r = (i128::from(rhz) * 1000 * (1_000_000_000 + off)) / 1_000_000_000;
        w.refr.set(0, true_r, 0);
        desc += &format!(", ref {off:+} ppb off within ±{tol}");
    }
    // Delayed reads: up to 5 % of them, by up to 0.1–5 ms; SMIs.
    w.r_delay = (unif(&mut s, 0, 50_000), unif(&mut s, 100 * US, 5 * MS));
    for _ in 0..unif(&mut s, 0, 6) {
        let at = unif(&mut s, SEC, 60 * SEC);
        w.stalls.push((at, unif(&mut s, 50 * US, 200 * MS)));
    }
    // Period: 0.1–4 s, but under half the narrow reference's wrap where it is the longer.
    // (The 64-bit counter is the longer wrap: a narrow reference is unwrapped against the
    // rate, however many times it wraps in a period.)
    let period = unif(&mut s, 100 * MS, 4 * SEC);
    let jit = unif(&mut s, 0, period / 5);
    // The start rate: the counter's rate as the reference counts it, or its true rate,
    // within an honest bound.
    let bound = unif(&mut s, 20, 5_000);
    let off = unif(&mut s, 0, 2 * bound) as f64 - bound as f64;
    let base = if mix(&mut s) & 1 == 0 {
        w.truth()
    } else {
        c_mhz as f64
    };
    (w, start_rate(base, off, bound), period, jit, desc)
}

/// Promise (Watchdog, "False alarms: none, under these assumptions"): "if the counter and the
/// reference both run at constant rates, the reference is latched inside its bracket ..., and
/// the counts step by no more than learnt, then ... no check reports (c) or (d) — whatever
/// the reads' delays, jitter and stalls." And `bound_ppb`: a worst case at constant rates.
/// Counters 1 kHz–5 GHz, every reference kind (PIT 16-bit and ACPI PM 24-bit wrapping many
/// times per period: unwrapped against the rate), references off their stated rate within
/// their stated tolerance, delayed reads before or after the latch, SMI stalls up to 200 ms,
/// periods 0.1–4 s with hook jitter up to 20 %. Also: promise 1–2 across every check and
/// health's counts.
#[test]
fn constant_rates_never_alarm_and_the_bound_holds() {
    let mut failures = Vec::new();
    let mut checks = 0;
    for seed in 0..seeds() * 4 {
        let (w, start, period, jit, desc) = constant_world(seed);
        let mut sim = Sim::new(w, start);
        let n = (120 * SEC / period).clamp(40, 300) as usize;
        sim.run(n, period, jit);
        checks += sim.recs.len();
        let alarms: Vec<_> = sim.recs.iter().filter(|r| is_alarm(&r.v)).collect();
        if let Some(a) = alarms.first() {
            failures.push(format!(
                "seed {seed} ({desc}): {} alarms, first {a:?}",
                alarms.len()
            ));
        }
        if let Some((x, r)) = worst_excess(&sim.recs) {
            if x > 0.0 {
                failures.push(format!(
                    "seed {seed} ({desc}): err {:.1} > bound {} ({r:?})",
                    r.err, r.bound
                ));
            }
        }
        if sim.back_steps > 0 || sim.worst_jump_excess > 0 {
            failures.push(format!(
                "seed {seed} ({desc}): {} steps back, jump excess {} ns",
                sim.back_steps, sim.worst_jump_excess
            ));
        }
        if let Err(e) = sim.counts_agree() {
            failures.push(format!("seed {seed}: {e}"));
        }
    }
    eprintln!(
        "constant rates: {} seeds, {checks} checks, {} failures",
        seeds() * 4,
        failures.len()
    );
    assert!(failures.is_empty(), "{failures:#?}");
}

/// An undisturbed world for detection: constant read costs (small jitter), no delayed reads,
/// no stalls, a regular hook. Returns the world, the start rate and the period.
fn quiet_world(seed: u64, refs: &[usize], counters: &[u64]) -> (World, Frequency, u64, String) {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0xc0ffee;
    let (rname, rhz, rbits, rcost) = REFS[refs[(mix(&mut s) % refs.len() as u64) as usize]];
    let chz = counters[(mix(&mut s) % counters.len() as u64) as usize];
    let mut w = World::new(mix(&mut s), u128::from(chz) * 1000, 64, rhz, rbits);
    w.r_cost = rcost;
    w.r_jit = rcost / 10;
    let period = [250 * MS, 500 * MS, SEC, 2 * SEC][(mix(&mut s) % 4) as usize];
    let bound = unif(&mut s, 20, 2_000);
    let off = unif(&mut s, 0, 2 * bound) as f64 - bound as f64;
    let start = start_rate(w.truth(), off, bound);
    (
        w,
        start,
        period,
        format!("{rname} vs {chz} Hz, P {} ms", period / MS),
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

/// How a change is placed.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Place {
    /// Anywhere in the interval before the check.
    Interval,
    /// Inside the check's reads (its brackets): within 6 µs of its start.
    Bracket,
}

/// Runs `quiet_world(seed)` steady for `steady` checks, then changes the counter's rate by
/// `factor × 2 × (the widest steady interval bound)` ppb (signed by `sign`), placed per
/// `place`, and runs `after` more checks. Returns the sim, the index of the first check
/// after the change, the change (ppb) and its true time.
fn change_run(
    seed: u64,
    steady: usize,
    factor: f64,
    place: Place,
    after: usize,
) -> (Sim, usize, f64, u64, String) {
    let (w, start, period, desc) = quiet_world(
        seed,
        &[0, 2, 5],
        &[24_000_000, 1_000_000_000, 3_000_000_000],
    );
    let mut sim = Sim::new(w, start);
    let mut s = seed ^ 0xdead_beef;
    sim.run(steady, period, period / 100);
    let b = widest_steady(&sim.recs) as f64;
    let delta = (factor * 2.0 * b + 2.0).min(100_000_000.0);
    let delta = if mix(&mut s) & 1 == 0 { delta } else { -delta };
    let p = unif(&mut s, period - period / 100, period + period / 100);
    let (t_prev, t_now) = {
        let w = sim.w.borrow();
        (w.t, w.t + p)
    };
    let at = match place {
        Place::Interval => unif(&mut s, t_prev + 1, t_now),
        Place::Bracket => t_now + unif(&mut s, 0, 6 * US),
    };
    {
        let mut w = sim.w.borrow_mut();
        let r = w.ctr.rate_at(at);
        let new = r + (r as f64 * delta * 1e-9) as i128;
        w.ctr.set(at, new, 0);
    }
    let first = sim.recs.len();
    sim.advance(p);
    sim.check();
    sim.run(after - 1, period, period / 100);
    (sim, first, delta, at, desc)
}

/// Promise (Watchdog, "Detection time"): "A change of the counter's rate by `δ` (in ppb) at
/// some point of an interval is reported at the end of the second interval after it at the
/// latest (at most three periods `P` after the change when no check is disturbed ...),
/// provided `δ` exceeds twice an interval's bound"; with (c)'s "The clock was recalibrated to
/// `rate`", the new rate's bound, `bound_ppb` after detection, and promises 1–2 across the
/// recalibration. Here δ is 3–50× twice the widest steady interval bound seen before
/// (up to 10 %), at a random point of an interval, after 4–60 steady checks, undisturbed.
#[test]
fn a_change_well_beyond_the_threshold_is_reported_within_three_periods() {
    detection_family(
        0..seeds() * 4,
        3.0,
        50.0,
        Place::Interval,
        "interval",
        false,
    );
}

/// The same with the change inside the check's brackets (between its counter and
/// reference reads): the worst moment for the check that straddles it.
#[test]
fn a_change_inside_a_checks_bracket_is_reported_within_three_periods() {
    detection_family(0..seeds() * 4, 3.0, 50.0, Place::Bracket, "bracket", false);
}

/// `at_detection`: also judge the Changed verdict's rate against its bound and `bound_ppb`
/// at the detecting check (else from the check after it).
fn detection_family(
    range: std::ops::Range<u64>,
    lo: f64,
    hi: f64,
    place: Place,
    name: &str,
    at_detection: bool,
) {
    let mut failures = Vec::new();
    let mut delays = Vec::new();
    let n = range.end - range.start;
    for seed in range {
        let mut s = seed ^ 0x5151;
        let steady = unif(&mut s, 4, 60) as usize;
        let factor = logu(&mut s, lo, hi);
        let (sim, first, delta, at, desc) = change_run(seed, steady, factor, place, 40);
        let recs = &sim.recs[first..];
        let found = recs
            .iter()
            .position(|r| matches!(r.v, Watch::Changed { .. }));
        let tag = format!("seed {seed} ({desc}, δ {delta:+.0} ppb, {steady} steady)");
        match found {
            Some(k) if k <= 2 => delays.push((recs[k].t1 - at) as f64 / 1e9),
            Some(k) => failures.push(format!(
                "{tag}: reported at check {} after it, {:?}",
                k + 1,
                &recs[..=k].iter().map(|r| r.v).collect::<Vec<_>>()
            )),
            None => failures.push(format!(
                "{tag}: never reported: {:?}",
                recs.iter().take(6).map(|r| r.v).collect::<Vec<_>>()
            )),
        }
        if recs
            .iter()
            .any(|r| matches!(r.v, Watch::CounterJumped { .. } | Watch::CounterStopped))
        {
            failures.push(format!("{tag}: a counter fault for a change under 12.5 %"));
        }
        if let Some(k) = found {
            if let Watch::Changed { rate, recalibrated } = recs[k].v {
                let truth = sim.w.borrow().truth();
                let e = (rate.as_millihz() as f64 - truth).abs() / truth * 1e9;
                if at_detection && e > rate.accuracy().bound_ppb() as f64 + 1e9 / truth {
                    failures.push(format!(
                        "{tag}: Changed rate {e:.0} ppb off, bound {}",
                        rate.accuracy().bound_ppb()
                    ));
                }
                if recalibrated.is_err() {
                    failures.push(format!("{tag}: not recalibrated: {recalibrated:?}"));
                }
            }
            let from = if at_detection { k } else { k + 1 };
            if let Some((x, r)) = worst_excess(&recs[from..]) {
                if x > 0.0 {
                    failures.push(format!(
                        "{tag}: after detection err {:.0} > bound {} ({r:?})",
                        r.err, r.bound
                    ));
                }
            }
        }
        if sim.back_steps > 0 || sim.worst_jump_excess > 0 {
            failures.push(format!(
                "{tag}: {} steps back, jump excess {} ns",
                sim.back_steps, sim.worst_jump_excess
            ));
        }
        if let Err(e) = sim.counts_agree() {
            failures.push(format!("{tag}: {e}"));
        }
    }
    delays.sort_by(f64::total_cmp);
    eprintln!(
        "detection ({name}, {lo}–{hi}× threshold): {n} seeds, {} failures, delay ms p50 {:.0} max {:.0}",
        failures.len(),
        delays.get(delays.len() / 2).copied().unwrap_or(0.0),
        delays.last().copied().unwrap_or(0.0)
    );
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The same promise at its edge: δ 1.02–1.5× twice the widest steady interval bound. Held:
/// reported within three periods, no counter fault, `bound_ppb` from the check after the
/// detection on, promises 1–2 (the verdict's own rate: see the next test).
#[test]
fn a_change_just_beyond_the_threshold_is_reported_within_three_periods() {
    detection_family(0..seeds() * 4, 1.02, 1.5, Place::Interval, "edge", false);
}

/// FINDING (fixed). [`Watch::Changed`]'s `rate`: "The new rate, measured over the confirming
/// interval, with its bound", and `bound_ppb`: "Between a change and its detection ... it
/// does not hold" (so from the detection on, it does; "After [`Watch::Changed`] it covers the
/// old rate too"). A change at 1.02–1.5× the threshold was reported at the first check after
/// it (the window's parts, or the window against the clock), and the clock recalibrated to a
/// rate part of the way there: the verdict's rate outside its own bound of the counter's
/// new rate, and `bound_ppb` right after below the clock's error (5 of 400 seeds). Now such a
/// report waits for an interval wholly after the change: 0 of 400 (0 of 1 200 at
/// `BARETIME_ADV_SEEDS=300`), seed 1155 too.
#[test]
fn a_change_near_the_threshold_is_reported_with_a_rate_inside_its_bound() {
    detection_family(
        0..seeds() * 4,
        1.02,
        1.5,
        Place::Interval,
        "edge, at detection",
        true,
    );
    // Far beyond the threshold too (found at BARETIME_ADV_SEEDS=300): ACPI PM vs 1 GHz,
    // P 250 ms, δ −59.8 ppm (4.7× the threshold) 11 % into an interval: Changed at that
    // check, the clock moved −408 ppb, its rate 59 335 ppb off under a bound of 10 676.
    detection_family(
        1155..1156,
        3.0,
        50.0,
        Place::Interval,
        "far, seed 1155",
        true,
    );
}

/// A quiet 64-bit world steady for 8–30 checks; returns the sim, the period and the true time
/// of the next check's start (after `advance`) with a seed.
fn quiet_sim(seed: u64, refs: &[usize], counters: &[u64]) -> (Sim, u64, String, u64) {
    let (w, start, period, desc) = quiet_world(seed, refs, counters);
    let mut sim = Sim::new(w, start);
    let mut s = seed ^ 0xabcdef;
    let steady = unif(&mut s, 8, 30) as usize;
    sim.run(steady, period, period / 100);
    (sim, period, desc, s)
}

/// Promise ((d)): "[`Watch::CounterStopped`]: the counter moved less than its bound while the
/// reference moved 16 steps"; "[`Watch::CounterJumped`]: a 64-bit counter went back, or the
/// interval is off by more than 12.5 % and the counter's `ΔC` moved ... more than twice as
/// far ... as the reference's `ΔX`", `by_ns` "by this many nanoseconds (negative: back)".
/// Stops, forward steps of 0.2 P to a day, steps back, at a random point of an interval:
/// the fault within two checks, never [`Watch::Changed`] before it, `by_ns` within 1 % + 1 ms
/// of the step; the clock never goes back.
#[test]
fn stops_and_forward_steps_of_the_counter_are_told() {
    stops_and_steps(&[0, 1], 1.0);
}

/// Steps back (64-bit counter): [`Watch::CounterJumped`] within two checks, never
/// [`Watch::Changed`] before it (held) — but `by_ns` ("by this many nanoseconds (negative:
/// back, or time lost)") is the counter's net move over the interval, the step plus the
/// period, not the step.
/// Before the fix (by_ns for a step back adds the ticks the interval made due to the
/// counter's move back), it failed: "a step back of 0.98 s at P 500 ms reads by_ns −0.478
/// s; of 5.85 s at P 1 s, −4.85 s: off by one period (BARETIME_ADV_SEEDS=100: 68 of 200
/// seeds beyond 1 % + 1 ms; the rest are steps ≫ 100 P)".
#[test]
fn a_step_back_is_told_by_its_size() {
    stops_and_steps(&[2], 1.0);
}

fn stops_and_steps(kinds: &[u64], _unused: f64) {
    let mut failures = Vec::new();
    for seed in 0..seeds() * 2 * kinds.len() as u64 {
        let (mut sim, period, desc, mut s) = quiet_sim(seed, &[0, 5], &[24_000_000, 1_000_000_000]);
        sim.judge_jumps = false;
        let kind = kinds[(seed % kinds.len() as u64) as usize];
        let (t_prev, p) = (sim.w.borrow().t, period);
        let at = unif(&mut s, t_prev + 1, t_prev + p);
        let f_hz = sim.w.borrow().ctr.rate_at(at) as f64 / 1000.0;
        let mut step_ns = 0f64;
        {
            let mut w = sim.w.borrow_mut();
            match kind {
                0 => w.ctr.set(at, 0, 0),
                _ => {
                    let ns = logu(&mut s, 0.2 * period as f64 / 1e3, 86_400e9);
                    step_ns = if kind == 2 { -ns } else { ns };
                    w.ctr.jumps.push((at, (step_ns * f_hz / 1e9) as i128));
                }
            }
        }
        let first = sim.recs.len();
        sim.advance(p);
        sim.check();
        sim.run(5, period, period / 100);
        let recs = &sim.recs[first..];
        let tag = format!("seed {seed} ({desc}, kind {kind}, step {step_ns:.0} ns)");
        let fault = recs.iter().position(|r| match (kind, r.v) {
            (0, Watch::CounterStopped) => true,
            (1 | 2, Watch::CounterJumped { by_ns }) => {
                let e = (by_ns as f64 - step_ns).abs();
                if e > step_ns.abs() / 100.0 + 1e6 {
                    failures.push(format!("{tag}: by_ns {by_ns} against {step_ns:.0}"));
                }
                true
            }
            _ => false,
        });
        match fault {
            Some(k) if k <= 1 => {
                if recs[..k]
                    .iter()
                    .any(|r| matches!(r.v, Watch::Changed { .. }))
                {
                    failures.push(format!("{tag}: Changed before the fault"));
                }
            }
            _ => failures.push(format!(
                "{tag}: {:?}",
                recs.iter().map(|r| r.v).collect::<Vec<_>>()
            )),
        }
        if sim.back_steps > 0 {
            failures.push(format!("{tag}: {} steps back", sim.back_steps));
        }
    }
    eprintln!(
        "stops and steps {kinds:?}: {} seeds, {} failures",
        seeds() * 2 * kinds.len() as u64,
        failures.len()
    );
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Promise ([`Watch::CounterJumped`]): "A counter that runs on at a new rate after a step is
/// [`Watch::Changed`] at the next check." A forward step of 1–100 s with the rate changed by
/// +0.1 % or −0.1 % at the same instant.
///
/// FINDING: in every seed the step is [`Watch::CounterJumped`] at the first check, then
/// eight checks [`Unjudged::Unconfirmed`], and [`Watch::Changed`] only at the ninth check
/// after the jump (2.25–18 s at `P` 0.25–2 s), the clock 1 000 ppm off meanwhile; the
/// detection time's "at most three periods" is missed too.
/// Before the fix (the first interval judged after a jump is judged afresh against the
/// clock, not carried as an unconfirmed deviation of the jump's own interval), it failed:
/// "1 GHz vs HPET/10 MHz, step 1–100 s with ±0.1 %: CounterJumped, 8 × Unconfirmed, Changed
/// at the 9th check after, in 200 of 200 seeds (BARETIME_ADV_SEEDS=100)".
#[test]
fn a_step_with_a_new_rate_is_changed_at_the_next_check() {
    let mut failures = Vec::new();
    let mut late = Vec::new();
    for seed in 0..seeds() * 2 {
        let (mut sim, period, desc, mut s) = quiet_sim(seed, &[0, 5], &[1_000_000_000]);
        sim.judge_jumps = false;
        let t_prev = sim.w.borrow().t;
        let at = unif(&mut s, t_prev + 1, t_prev + period);
        let sign = if mix(&mut s) & 1 == 0 { 1 } else { -1 };
        {
            let mut w = sim.w.borrow_mut();
            let r = w.ctr.rate_at(at);
            w.ctr.set(at, r + sign * r / 1000, 0);
            let secs = unif(&mut s, 1, 100) as i128;
            w.ctr.jumps.push((at, secs * r / 1000));
        }
        let first = sim.recs.len();
        sim.advance(period);
        sim.check();
        sim.run(60, period, period / 100);
        let vs: Vec<_> = sim.recs[first..].iter().map(|r| r.v).collect();
        let j = vs
            .iter()
            .position(|v| matches!(v, Watch::CounterJumped { .. }));
        let c = vs.iter().position(|v| matches!(v, Watch::Changed { .. }));
        match (j, c) {
            (Some(j), Some(c)) if c == j + 1 => {}
            (Some(j), Some(c)) if c > j => late.push(c - j),
            _ => failures.push(format!("seed {seed} ({desc}): {vs:?}")),
        }
    }
    eprintln!("step + new rate: {} seeds, Changed later than the next check in {} ({late:?}), {} failures", seeds() * 2, late.len(), failures.len());
    assert!(
        failures.is_empty() && late.is_empty(),
        "{failures:#?} late {late:?}"
    );
}

/// FINDING (the garbage kind of the family below, alone): a reference that returns random
/// values is read as the honest counter's fault: [`Watch::CounterJumped`] with `by_ns`
/// `i64::MIN`, where (d) says "a 64-bit counter went back, or the interval is off by more
/// than 12.5 % and the counter's `ΔC` moved from the last judged interval's more than twice
/// as far (relatively) as the reference's `ΔX` did" — neither happened (the counter and the
/// hook kept their cadence).
/// Before the fix (a reference whose ΔX makes due more ticks than a 64-bit count holds is
/// the reference's fault, not read as the counter going back), it failed: "garbage
/// reference, honest 64-bit counter at 24 MHz/1 GHz, steady hook: CounterJumped { by_ns:
/// i64::MIN } within 60 checks in 245 of 500 seeds (BARETIME_ADV_SEEDS=100)".
#[test]
fn a_garbage_reference_never_faults_an_honest_counter() {
    hostile_family(&[6]);
}

/// Hostile references with an honest counter and a steady hook: the reference stuck for
/// good, paused 1–20 s then resuming (time lost), stepping forward or back once, running
/// backwards for a while, flapping (every other read short by 1–1000 ticks) (garbage: the
/// finding above).
/// Promises: "Everything is integer arithmetic, saturating or checked: no input makes it
/// panic"; (d) needs the counter to break the hook's cadence, so an honest counter is never
/// [`Watch::CounterStopped`] nor [`Watch::CounterJumped`]; "A one-off (a reference that
/// steps once or stands still ...) is never (c)"; the clock never goes back nor jumps.
#[test]
fn hostile_references_never_fault_an_honest_counter() {
    hostile_family(&[0, 1, 2, 3, 4, 5]);
}

fn hostile_family(kinds: &[usize]) {
    let mut failures = Vec::new();
    let mut counts = [0u64; 7];
    for seed in 0..seeds() * 5 * kinds.len() as u64 {
        let (mut sim, period, desc, mut s) =
            quiet_sim(seed, &[0, 2, 4, 5], &[24_000_000, 1_000_000_000]);
        let kind = kinds[(seed % kinds.len() as u64) as usize];
        counts[kind] += 1;
        let t_prev = sim.w.borrow().t;
        let at = unif(&mut s, t_prev + 1, t_prev + period);
        let one_off = matches!(kind, 1..=3);
        {
            let mut w = sim.w.borrow_mut();
            let r = w.refr.rate_at(at);
            let hz = r / 1000;
            match kind {
                0 => w.refr.set(at, 0, 0),
                1 => {
                    let len = unif(&mut s, SEC, 20 * SEC);
                    w.refr.set(at, 0, 0);
                    w.refr.set(at + len, r, 0);
                }
                2 => w
                    .refr
                    .jumps
                    .push((at, hz * unif(&mut s, 1, 100_000) as i128 / 1000)),
                3 => w
                    .refr
                    .jumps
                    .push((at, -(hz * unif(&mut s, 1, 100_000) as i128 / 1000))),
                4 => {
                    let len = unif(&mut s, SEC, 10 * SEC);
                    w.refr.set(at, -r, 0);
                    w.refr.set(at + len, r, 0);
                }
                5 => {
                    w.hostile = Hostile::Flap {
                        from: at,
                        by: unif(&mut s, 1, 1000),
                    }
                }
                _ => w.hostile = Hostile::Garbage { from: at },
            }
        }
        let first = sim.recs.len();
        sim.run(60, period, period / 100);
        let recs = &sim.recs[first..];
        let tag = format!("seed {seed} ({desc}, kind {kind})");
        if let Some(r) = recs
            .iter()
            .find(|r| matches!(r.v, Watch::CounterStopped | Watch::CounterJumped { .. }))
        {
            failures.push(format!("{tag}: counter fault {:?}", r.v));
        }
        if one_off && recs.iter().any(|r| matches!(r.v, Watch::Changed { .. })) {
            failures.push(format!(
                "{tag}: Changed after a one-off: {:?}",
                recs.iter().map(|r| r.v).take(12).collect::<Vec<_>>()
            ));
        }
        if sim.back_steps > 0 || sim.worst_jump_excess > 0 {
            failures.push(format!(
                "{tag}: {} steps back, jump excess {} ns",
                sim.back_steps, sim.worst_jump_excess
            ));
        }
        if let Err(e) = sim.counts_agree() {
            failures.push(format!("{tag}: {e}"));
        }
    }
    eprintln!(
        "hostile references: {counts:?} seeds per kind, {} failures",
        failures.len()
    );
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Narrow counts (promise: *Widths*): "the one whose wrap period is the longer is unwrapped by
/// the half-range rule ... The other is unwrapped against the rate in force". A 32-bit
/// 3–5 GHz counter (wrapping every 0.9–1.4 s) against a 64-bit HPET checked every 0.5–5 s; a
/// 24-bit 24 MHz counter (0.7 s) against the 24-bit ACPI PM timer (4.7 s) every 0.3–2 s; a
/// 16-bit 1 MHz counter (65 ms) against the 16-bit PIT (55 ms) every 10–25 ms. The clock is
/// updated as promise 5 asks. No alarm, the bound holds, then +100 ppm (or 6× the widest
/// steady interval bound, where that is more) is reported within three checks.
#[test]
fn narrow_counts_wrap_without_alarms_and_changes_are_still_seen() {
    let mut failures = Vec::new();
    for seed in 0..seeds() * 3 {
        let mut s = seed ^ 0x77;
        let (chz, cbits, ri, plo, phi) = match seed % 3 {
            0 => (
                unif(&mut s, 3_000_000_000, 5_000_000_000),
                32,
                0,
                500 * MS,
                5 * SEC,
            ),
            1 => (24_000_000, 24, 2, 300 * MS, 2 * SEC),
            _ => (1_000_000, 16, 3, 10 * MS, 25 * MS),
        };
        let (_, rhz, rbits, rcost) = REFS[ri];
        let mut w = World::new(mix(&mut s), u128::from(chz) * 1000, cbits, rhz, rbits);
        w.r_cost = rcost;
        w.r_jit = rcost / 10;
        let start = start_rate(w.truth(), unif(&mut s, 0, 400) as f64 - 200.0, 200);
        let mut sim = Sim::new(w, start);
        let wrap_ps = ((1u128 << cbits) * PS as u128 * 1000 / (u128::from(chz) * 1000)) as u64;
        sim.update_every = wrap_ps / 8;
        let period = unif(&mut s, plo, phi);
        sim.run(40, period, period / 100);
        let tag = format!(
            "seed {seed} ({chz} Hz {cbits}-bit vs ref {ri}, P {} ms)",
            period / MS
        );
        if let Some(r) = sim.recs.iter().find(|r| is_alarm(&r.v)) {
            failures.push(format!("{tag}: alarm at constant rates {:?}", r.v));
        }
        if let Some((x, r)) = worst_excess(&sim.recs) {
            if x > 0.0 {
                failures.push(format!("{tag}: err {:.0} > bound {}", r.err, r.bound));
            }
        }
        // +100 ppm, or 6× the widest steady interval bound where that is more (the PIT's).
        let ppb = (6 * widest_steady(&sim.recs)).max(100_000) as i128;
        let t = sim.w.borrow().t + period / 3;
        {
            let mut w = sim.w.borrow_mut();
            let r = w.ctr.rate_at(t);
            w.ctr.set(t, r + r * ppb / 1_000_000_000, 0);
        }
        let first = sim.recs.len();
        sim.run(6, period, period / 100);
        let vs: Vec<_> = sim.recs[first..].iter().map(|r| r.v).collect();
        if !vs[..3].iter().any(|v| matches!(v, Watch::Changed { .. })) {
            failures.push(format!(
                "{tag}: +{ppb} ppb not reported in three checks: {vs:?}"
            ));
        }
        if sim.back_steps > 0 || sim.worst_jump_excess > 0 {
            failures.push(format!(
                "{tag}: {} steps back, jump excess {} ns",
                sim.back_steps, sim.worst_jump_excess
            ));
        }
    }
    eprintln!(
        "narrow counts: {} seeds, {} failures",
        seeds() * 3,
        failures.len()
    );
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Calling patterns the docs allow on 64-bit counts: checks back to back (no time between),
/// 1 µs and 1 ms apart (too short: [`Unjudged::TooShort`]), then an hour, a day and 30 days
/// apart, mixed at random, counters 24 MHz–5 GHz against the HPET and a 10 MHz reference.
/// Promises: no panic, "no check reports (c) or (d)" at constant rates, `bound_ppb` holds,
/// health's counts, the clock never goes back nor jumps.
#[test]
fn extreme_and_irregular_periods_at_constant_rates() {
    extreme_family(&[0, 5], &COUNTERS[3..], "64-bit references");
}

/// FINDING: the same with 1 kHz, 32.768 kHz and 1 MHz counters: a check that follows the last
/// closely (0–1 ms; "a hook catching up after a stall", which the docs say "is merged into
/// the next interval") is [`Watch::CounterStopped`] at constant rates, against "no check
/// reports (c) or (d) — whatever the reads' delays, jitter and stalls" (the counter moves
/// less than a tick in 1 ms while the reference moves thousands of steps).
/// Before the fix (a stop judged only where the counter must have moved four times its
/// reads' uncertainty; and the world's u64-picosecond time kept under its 213-day end), it
/// failed: "1 kHz / 32.768 kHz / 1 MHz counter vs HPET or 10 MHz, some checks 0 s / 1 µs /
/// 1 ms after the last among 0.1 s – 30 d ones: CounterStopped at constant rates in 207 of
/// 300 seeds (BARETIME_ADV_SEEDS=100)".
#[test]
fn extreme_periods_with_slow_counters_never_alarm() {
    extreme_family(&[0, 5], &COUNTERS[..3], "slow counters");
}

/// FINDING (outside the stated condition, but silent): narrow references, unwrapped against
/// the rate in force (*Widths*: "which holds while the rate's change over an interval is
/// less than half of that one's wrap"). At constant rates, a 16-bit PIT (55 ms wrap) read a
/// day or more after the last check, while the clock's rate is still the start's (up to
/// 2 ppm off: 170 ms a day), is unwrapped a wrap off: [`Watch::Changed`], the clock
/// recalibrated 636 ppb (one wrap a day) or 1 271 ppb off, then `bound_ppb` of 5–51 below the
/// error. The docs' condition, read as "the rate in force's error × the interval", is not
/// met; but the watchdog knows its bound and the gap, and neither refuses the interval nor
/// widens the bound. Also the slow counters' CounterStopped above.
///
/// Fixed: the narrow references' part by *Widths* (such a gap is [`Unjudged::TooLong`]; see
/// the test below, from 1 MHz up), the slow counters' `CounterStopped` on a check 0 s, 1 µs
/// or 1 ms after the last by the stop rule's span (a stop is judged only where the counter
/// must have moved 4 × its read uncertainty). Before both: 129 of 300 seeds failed
/// (BARETIME_ADV_SEEDS=100), with the PIT's false `Changed` after a 1 d gap (clock 636 or
/// 1 271 ppb off under bound_ppb 5–51); after the first alone, 66 of 300.
#[test]
fn extreme_periods_against_narrow_references() {
    extreme_family(&[2, 3, 4], &COUNTERS, "narrow references");
}

/// The narrow references' part of the finding above, 1 MHz to 5 GHz counters: no alarm, and
/// `bound_ppb` holds, whatever the gaps (0 s – 30 d).
///
/// Failed before the *Widths* rule (a gap whose wraps the clock's bound cannot count is
/// [`Unjudged::TooLong`]): "PIT: Changed after a 1 d gap, clock 636 or 1 271 ppb off (1 or 2
/// wraps a day) under bound_ppb 5–51".
#[test]
fn extreme_periods_against_narrow_references_from_1_mhz() {
    extreme_family(&[2, 3, 4], &COUNTERS[2..], "narrow references, 1 MHz up");
}

fn extreme_family(refs: &[usize], counters: &[u64], name: &str) {
    let mut failures = Vec::new();
    let mut n_checks = 0;
    for seed in 0..seeds() * 3 {
        let (w, start, _, desc) = quiet_world(seed, refs, counters);
        let mut sim = Sim::new(w, start);
        let mut s = seed ^ 0xe7;
        for _ in 0..60 {
            let p = match mix(&mut s) % 8 {
                0 => 0,
                1 => US,
                2 => MS,
                3 => 3_600 * SEC,
                4 => 86_400 * SEC,
                5 if mix(&mut s) % 4 == 0 => 30 * 86_400 * SEC,
                _ => unif(&mut s, 100 * MS, 5 * SEC),
            };
            // The world's true time is u64 picoseconds (213 days): a gap that would carry it
            // within a day of the end is a second instead (past it the world's counts would
            // run back, a real step back that (d) rightly reports).
            let p = if sim.w.borrow().t.saturating_add(p) > u64::MAX - 86_400 * SEC {
                SEC
            } else {
                p
            };
            sim.advance(p);
            sim.check();
        }
        n_checks += sim.recs.len();
        let tag = format!("seed {seed} ({desc})");
        if let Some(r) = sim.recs.iter().find(|r| is_alarm(&r.v)) {
            failures.push(format!(
                "{tag}: alarm {:?} at {:.0} s",
                r.v,
                r.t1 as f64 / 1e12
            ));
        }
        if let Some((x, r)) = worst_excess(&sim.recs) {
            if x > 0.0 {
                failures.push(format!(
                    "{tag}: err {:.0} > bound {} ({:?})",
                    r.err, r.bound, r.v
                ));
            }
        }
        if sim.back_steps > 0 || sim.worst_jump_excess > 0 {
            failures.push(format!(
                "{tag}: {} steps back, jump excess {} ns",
                sim.back_steps, sim.worst_jump_excess
            ));
        }
        if let Err(e) = sim.counts_agree() {
            failures.push(format!("{tag}: {e}"));
        }
    }
    eprintln!(
        "extreme periods ({name}): {} seeds, {n_checks} checks, {} failures",
        seeds() * 3,
        failures.len()
    );
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Promise (`bound_ppb`): "Checks rejected (wide brackets) add no evidence and change nothing:
/// the bound is the one after the last accepted check". Heavy delays (10–40 % of reference
/// reads, by up to 5 ms): every [`Unjudged::WideBracket`] leaves the clock's rate and
/// `bound_ppb` as they were.
#[test]
fn a_rejected_check_changes_nothing() {
    let mut failures = Vec::new();
    let mut wide = 0;
    for seed in 0..seeds() * 4 {
        let (mut w, start, period, jit, desc) = constant_world(seed);
        let mut s = seed ^ 0x1d;
        w.r_delay = (
            unif(&mut s, 100_000, 400_000),
            unif(&mut s, 50 * US, 5 * MS),
        );
        let mut sim = Sim::new(w, start);
        sim.run(80, period, jit);
        for pair in sim.recs.windows(2) {
            if let Watch::NoVerdict(Unjudged::WideBracket) = pair[1].v {
                wide += 1;
                if pair[1].clock_mhz != pair[0].clock_mhz || pair[1].bound != pair[0].bound {
                    failures.push(format!(
                        "seed {seed} ({desc}): {:?} then {:?}",
                        pair[0], pair[1]
                    ));
                }
            }
        }
        if sim.recs.iter().any(|r| is_alarm(&r.v)) {
            failures.push(format!("seed {seed} ({desc}): an alarm at constant rates"));
        }
    }
    eprintln!(
        "rejected checks: {} seeds, {wide} wide checks, {} failures",
        seeds() * 4,
        failures.len()
    );
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Refinement (promise: *Refinement*): "The clock is steered toward it by at most
/// [`Watchdog::with_slew_ppb`] per step"; "0 turns steering off"; `steers` counts them; "the
/// clock's rate converges to the counter's rate as the reference counts it, within about
/// `w/T` for brackets `w` wide (and the reference's step over `T`): with brackets of 1 µs,
/// 0.02 ppm after a minute". 1 GHz / 3 GHz counters against the HPET (1 µs reads) and a
/// 10 MHz reference (0.3 µs), the start 0.2–4 ppm off (honestly bounded), slew 0–2 ppm,
/// 2 minutes at P 0.25–2 s: every steer within the slew (plus a millihertz), none at slew 0,
/// `steers` at least the rate moves seen, and after 60 s the bound within 3 × (w/T + the
/// reference's learnt step over T), the error within the bound.
#[test]
fn refinement_is_slew_limited_and_converges() {
    let mut failures = Vec::new();
    let mut figures = Vec::new();
    for seed in 0..seeds() * 4 {
        let (mut w, _, period, desc) = quiet_world(seed, &[0, 5], &[1_000_000_000, 3_000_000_000]);
        let mut s = seed ^ 0x51e;
        let off = logu(&mut s, 200.0, 4_000.0) * if mix(&mut s) & 1 == 0 { 1.0 } else { -1.0 };
        let start = start_rate(w.truth(), off, (off.abs() * 1.5) as u64);
        w.c_jit = 5_000;
        let slew = [0, 100, 1_000, 2_000][(mix(&mut s) % 4) as usize];
        let mut sim = Sim::with(w, start, |wd| wd.with_slew_ppb(slew));
        let n = (120 * SEC / period) as usize;
        sim.run(n, period, period / 100);
        let tag = format!("seed {seed} ({desc}, start {off:+.0} ppb, slew {slew})");
        let f = sim.recs[0].clock_mhz as f64;
        let mut moves = 0;
        for r in &sim.recs {
            if matches!(r.v, Watch::Changed { .. }) || r.moved == 0.0 {
                continue;
            }
            moves += 1;
            if r.moved.abs() > slew as f64 + 1e9 / f + 1.0 {
                failures.push(format!("{tag}: steered by {:.1} ppb ({:?})", r.moved, r.v));
            }
        }
        let h = sim.wd.health();
        if h.steers < moves || (slew == 0 && h.steers > 0) {
            failures.push(format!("{tag}: {moves} moves, steers {}", h.steers));
        }
        let w = sim.w.borrow();
        let bracket_s = (w.r_cost + w.r_cost / 10 + 2 * (w.c_cost + w.c_jit)) as f64 / 1e12;
        let r_step = (w.r_cost as f64 / 1e12 * w.ref_stated.as_hz() as f64)
            .ceil()
            .max(1.0);
        drop(w);
        let at60 = sim.recs.iter().find(|r| r.t1 >= 61 * SEC).unwrap();
        let expect = 3.0 * (bracket_s / 60.0 + r_step / (60.0 * 1e4)) * 1e9;
        figures.push((at60.bound, at60.err));
        if slew > 0
            && at60.bound as f64
                > expect + (off.abs() - 60.0 * slew as f64 / (period as f64 / 1e12)).max(0.0)
        {
            failures.push(format!("{tag}: bound at 60 s {} > {expect:.0}", at60.bound));
        }
        if let Some((x, r)) = worst_excess(&sim.recs) {
            if x > 0.0 {
                failures.push(format!("{tag}: err {:.0} > bound {}", r.err, r.bound));
            }
        }
    }
    figures.sort_by_key(|f| f.0);
    eprintln!(
        "refinement: {} seeds, bound at 60 s p50 {:?} max {:?}, {} failures",
        seeds() * 4,
        figures.get(figures.len() / 2),
        figures.last(),
        failures.len()
    );
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Steady at `P` 0.5 s for 20 checks, one check `gap` ps after the last, then 10 more at
/// `P`: the verdicts after the gap, the worst `err − bound` after it.
fn one_gap(seed: u64, refs: &[usize], counter: u64, gap: u64) -> (Vec<Watch>, f64, String) {
    let (w, start, _, desc) = quiet_world(seed, refs, &[counter]);
    let mut sim = Sim::new(w, start);
    sim.run(20, 500 * MS, 5 * MS);
    let first = sim.recs.len();
    let before = sim.recs[first - 1];
    let desc = format!(
        "{desc}; before the gap: err {:.1} ppb, bound {}",
        before.err, before.bound
    );
    sim.advance(gap);
    sim.check();
    sim.run(10, 500 * MS, 5 * MS);
    let x = worst_excess(&sim.recs[first..]).map_or(0.0, |x| x.0);
    (sim.recs[first..].iter().map(|r| r.v).collect(), x, desc)
}

/// Minimal form of the slow counters' finding: a 32.768 kHz, 1 kHz or 1 MHz counter against the
/// HPET, checked every 0.5 s, one check 0 s, 1 µs, 0.1 ms or 1 ms after the last (a hook
/// catching up): [`Watch::CounterStopped`] at constant rates.
/// Before the fix (a stop judged only where the counter must have moved four times its
/// reads' uncertainty), it failed: "vs HPET, P 0.5 s, one check soon after the last:
/// CounterStopped at constant rates; 1 kHz at 0 s–1 ms: 123 of 133 seeds; 32.768 kHz at 0
/// s/1 µs: 62 of 67 (none at 0.1/1 ms); 1 MHz: 0 of 133 (BARETIME_ADV_SEEDS=100)".
#[test]
fn a_catch_up_check_on_a_slow_counter_is_not_a_stop() {
    let mut bad = Vec::new();
    for seed in 0..seeds() * 4 {
        let counter = [32_768, 1_000, 1_000_000][(seed % 3) as usize];
        let gap = [0, US, 100 * US, MS][((seed / 3) % 4) as usize];
        let (vs, _, desc) = one_gap(seed, &[0], counter, gap);
        if vs.iter().any(is_alarm) {
            bad.push(format!(
                "seed {seed} ({desc}, gap {} µs): {:?}",
                gap / US,
                &vs[..2]
            ));
        }
    }
    eprintln!(
        "catch-up check on a slow counter: {} of {} seeds alarm",
        bad.len(),
        seeds() * 4
    );
    assert!(bad.is_empty(), "{bad:#?}");
}

/// Minimal form of the narrow references' finding: 1 GHz against the 16-bit PIT or the
/// 24-bit ACPI PM timer, steady at 0.5 s for 20 checks, one check an hour, a day, a week or
/// 30 days after the last. Hour and day gaps hold; a week or 30 days against the PIT, with
/// the clock 41–242 ppb off (`bound_ppb` ~400: the gap × the error passes half the 55 ms
/// wrap), aliases silently: no verdict, and `bound_ppb` below the error afterwards.
///
/// Failed before the *Widths* rule (a gap whose wraps the clock's bound cannot count is
/// [`Unjudged::TooLong`]): "1 GHz vs PIT, constant rates, clock 41–242 ppb off (bound ~400),
/// one check a week or 30 days later: err > bound_ppb by 35–227 ppb afterwards, no verdict
/// says so; 80 of 400 seeds (1 h: 0, 1 d: 0, 1 w: 34, 30 d: 46; ACPI PM: 0)
/// (BARETIME_ADV_SEEDS=100)".
#[test]
fn a_long_gap_against_a_narrow_reference_is_no_change() {
    let mut bad = Vec::new();
    let mut refused = 0;
    for seed in 0..seeds() * 4 {
        let r = [3, 2][(seed % 2) as usize];
        let gap = [
            3_600 * SEC,
            86_400 * SEC,
            7 * 86_400 * SEC,
            30 * 86_400 * SEC,
        ][((seed / 2) % 4) as usize];
        let (vs, x, desc) = one_gap(seed, &[r], 1_000_000_000, gap);
        let too_long = |v: &Watch| matches!(v, Watch::NoVerdict(Unjudged::TooLong));
        refused += usize::from(too_long(&vs[0]));
        // The checks at 0.5 s after the gap are judged again (from a fresh baseline).
        let judged_after = vs[1..].iter().any(|v| matches!(v, Watch::Steady { .. }));
        if vs.iter().any(is_alarm) || x > 0.0 || vs[1..].iter().any(too_long) || !judged_after {
            bad.push(format!(
                "seed {seed} ({desc}, gap {} s): err − bound {x:.0} ppb, {:?}",
                gap / SEC,
                vs
            ));
        }
    }
    eprintln!("long gap vs a narrow reference: {refused} gaps refused (TooLong)");
    let by_gap: Vec<usize> = ["3600 s", "86400 s", "604800 s", "2592000 s"]
        .iter()
        .map(|g| {
            bad.iter()
                .filter(|b| b.contains(&format!("gap {g}")))
                .count()
        })
        .collect();
    eprintln!("long gap vs a narrow reference: {} of {} seeds fail (by gap 1 h, 1 d, 1 w, 30 d: {by_gap:?})", bad.len(), seeds() * 4);
    assert!(bad.is_empty(), "{bad:#?}");
}

/// Slow ramps (promise: *Detection time*): "A ramp of slope `s` (ppb per second) is seen when
/// `s·T/2` exceeds the parts' bounds". A steady ramp of ±2–300 ppb/s (below an interval's
/// threshold per period) starting after 20 steady checks, for 300 s, or the same taken as a
/// staircase (steps every 5 periods, the same average pace): reported ([`Watch::Changed`])
/// in every seed, never a counter fault, promises 1–2 kept.
#[test]
fn a_slow_ramp_or_staircase_is_seen() {
    ramp_family(false, false);
    ramp_family(true, false);
}

/// FINDING (fixed). `bound_ppb`: "While the rate keeps moving (a
/// ramp), it adds the lesser of the pace last seen carried over half the window ... and four
/// times the window's own bound (what a steady ramp of any pace can have moved while one
/// line still fits the window's samples: a worst case for a steady ramp ...)". Under a steady
/// linear ramp, after its report, the clock's error exceeded `bound_ppb` at some check: 45 of
/// 300 seeds, up to 2.96× (the pace was dropped at each report of a ramp under an interval's
/// threshold a period, and the four times were taken over samples one line no longer fit).
/// Then 0 of 300; at `BARETIME_ADV_SEEDS=300` 2 of 900 remained (seeds 710 and 865: 10 MHz,
/// P 250 ms, −162 ppb/s, 480 ppb under 294, reported by the window against the clock, which
/// carried no pace; HPET, P 2 s, −16 ppb/s, 292 under 177, the pace lapsed while the ramp
/// went on and the window's samples no longer fit one line). Now 0 of 900: a move seen keeps
/// the ramp's worst case in the bound for eight times the span it was seen over (the
/// rustdoc's "A rate seen moving may go on moving").
#[test]
fn a_steady_ramp_stays_within_the_bound_after_its_report() {
    ramp_family(false, true);
}

/// The same for the staircase (steps of a fifth of a period's threshold or less, every 5
/// periods). Not a steady ramp, so outside the "worst case for a steady ramp" clause, but
/// each step is a rate "one rate since" a few samples back: reported as a gap in what
/// `bound_ppb` promises for a rate that moves in small steps (94 of 300 seeds, up to 13.3×).
/// A check whose interval holds a step is not judged: the step is a change not yet seen
/// there, where `bound_ppb` documents that it does not hold (its rustdoc says so of a
/// staircase's step inside the last interval); every other check after the first report is.
/// So judged: 3 of 300, up to 1.15× (6 of 900 at `BARETIME_ADV_SEEDS=300`, up to 2.06×: a
/// step in the interval before a check, under an interval's threshold, bends no line through
/// the window's samples beyond their brackets). Fixed: while the rate may still be moving the
/// bound covers the last interval's rate and bound (0 of 300, 0 of 900).
#[test]
fn a_staircase_stays_within_the_bound_after_its_report() {
    ramp_family(true, true);
}

fn ramp_family(stairs: bool, judge_bound: bool) {
    let mut failures = Vec::new();
    let mut seen = Vec::new();
    let mut worst = 0f64;
    // Every judged check's bound and true error after the report (ppb), for the cost.
    let mut bounds = Vec::new();
    let mut errs = Vec::new();
    for seed in 0..seeds() * 3 {
        let (w, start, period, desc) = quiet_world(seed, &[0, 5], &[1_000_000_000, 3_000_000_000]);
        let mut sim = Sim::new(w, start);
        let mut s = seed ^ 0x4a3;
        sim.run(20, period, period / 100);
        let slope_ppb = logu(&mut s, 2.0, 300.0) * if mix(&mut s) & 1 == 0 { 1.0 } else { -1.0 };
        let t0 = sim.w.borrow().t + unif(&mut s, 1, period);
        {
            let mut w = sim.w.borrow_mut();
            let r = w.ctr.rate_at(t0);
            if stairs {
                let step_ps = 5 * period;
                for i in 0..(300 * SEC / step_ps) {
                    let at = t0 + i * step_ps;
                    let dt_s = (i * step_ps) as f64 / 1e12;
                    w.ctr
                        .set(at, r + (r as f64 * slope_ppb * 1e-9 * dt_s) as i128, 0);
                }
            } else {
                w.ctr.set(t0, r, (r as f64 * slope_ppb * 1e-9) as i128);
            }
        }
        let first = sim.recs.len();
        sim.run((300 * SEC / period) as usize, period, period / 100);
        let recs = &sim.recs[first..];
        let tag = format!("seed {seed} ({desc}, {slope_ppb:+.1} ppb/s)");
        match recs
            .iter()
            .position(|r| matches!(r.v, Watch::Changed { .. }))
        {
            None => failures.push(format!(
                "{tag}: never reported in 300 s, err at the end {:.0} bound {}",
                recs.last().unwrap().err,
                recs.last().unwrap().bound
            )),
            Some(k) => {
                seen.push((recs[k].t1 - t0) as f64 / 1e12);
                // A staircase's step inside a check's interval is a change not yet seen at
                // that check (`bound_ppb`: "Between a change and its detection ... it does
                // not hold"): such checks are not judged; every other one is.
                let step_ps = 5 * period;
                let judged: Vec<Rec> = (k..recs.len())
                    .filter(|&j| {
                        let from = if j == 0 { t0 } else { recs[j - 1].t1 };
                        let to = recs[j].t1;
                        !stairs || (from.max(t0) - t0) / step_ps == (to.max(t0) - t0) / step_ps
                    })
                    .map(|j| recs[j])
                    .collect();
                bounds.extend(judged.iter().map(|r| r.bound));
                errs.extend(judged.iter().map(|r| r.err));
                if let Some((x, r)) = worst_excess(&judged).filter(|_| judge_bound) {
                    if x > 0.0 {
                        worst = worst.max(r.err / r.bound as f64);
                        failures.push(format!("{tag}: after detection at {:.1} s, err {:.0} > bound {} at {:.1} s ({})", (recs[k].t1 - t0) as f64 / 1e12, r.err, r.bound, (r.t1 - t0) as f64 / 1e12, r.v));
                    }
                }
            }
        }
        if recs
            .iter()
            .any(|r| matches!(r.v, Watch::CounterJumped { .. } | Watch::CounterStopped))
        {
            failures.push(format!("{tag}: a counter fault"));
        }
        if sim.back_steps > 0 || sim.worst_jump_excess > 0 {
            failures.push(format!(
                "{tag}: {} steps back, jump excess {} ns",
                sim.back_steps, sim.worst_jump_excess
            ));
        }
    }
    seen.sort_by(f64::total_cmp);
    bounds.sort_unstable();
    errs.sort_by(f64::total_cmp);
    eprintln!("{}: {} seeds, reported after p50 {:.1} s max {:.1} s, {} failures, worst err/bound {worst:.2}; after the report, bound_ppb p50 {} p90 {} max {}, error p50 {:.0} p90 {:.0} ({} checks)", if stairs { "staircase" } else { "ramp" }, seeds() * 3, seen.get(seen.len() / 2).copied().unwrap_or(0.0), seen.last().copied().unwrap_or(0.0), failures.len(), bounds.get(bounds.len() / 2).copied().unwrap_or(0), bounds.get(bounds.len() * 9 / 10).copied().unwrap_or(0), bounds.last().copied().unwrap_or(0), errs.get(errs.len() / 2).copied().unwrap_or(0.0), errs.get(errs.len() * 9 / 10).copied().unwrap_or(0.0), bounds.len());
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Alternating changes (promise: *Detection time*, (c)): the rate toggles by δ = 3–20× twice
/// the widest steady interval bound, and back, every 4–10 periods, 12 times: each toggle
/// reported within three checks, never a counter fault, and the clock's error within
/// `bound_ppb` from each report until the next toggle.
#[test]
fn alternating_changes_are_each_reported() {
    alternating(0..seeds() * 3);
}

/// FINDING (fixed; found at BARETIME_ADV_SEEDS=300, 1 of 900 seeds): *Detection time*,
/// "reported at the end of the second interval after it at the latest". ACPI PM vs 24 MHz,
/// P 2 s, toggles of 7.1 ppm every 4 periods: the 8th toggle (back, −7.1 ppm) was steady at
/// all four checks after it, never [`Watch::Changed`]: the toggle before had read as a ramp
/// (it straddled a check), and refinement followed this one as that ramp's next move at the
/// slew limit (−1 ppm a check). A move the other way is now a new change, reported.
#[test]
fn alternating_changes_seed_444_is_reported() {
    alternating(444..445);
}

fn alternating(range: std::ops::Range<u64>) {
    let mut failures = Vec::new();
    let n = range.end - range.start;
    for seed in range {
        let (w, start, period, desc) = quiet_world(seed, &[0, 2, 5], &[24_000_000, 1_000_000_000]);
        let mut sim = Sim::new(w, start);
        let mut s = seed ^ 0xa17;
        sim.run(20, period, period / 100);
        let b = widest_steady(&sim.recs) as f64;
        let delta = logu(&mut s, 3.0, 20.0) * 2.0 * b;
        let k = unif(&mut s, 4, 10) as usize;
        let base = sim.w.borrow().ctr.rate_at(sim.w.borrow().t);
        let tag = format!("seed {seed} ({desc}, δ {delta:.0} ppb every {k} periods)");
        for i in 0..12 {
            let at = sim.w.borrow().t + unif(&mut s, 1, period);
            let rate = if i % 2 == 0 {
                base + (base as f64 * delta * 1e-9) as i128
            } else {
                base
            };
            sim.w.borrow_mut().ctr.set(at, rate, 0);
            let first = sim.recs.len();
            sim.run(k, period, period / 100);
            let recs = &sim.recs[first..];
            match recs
                .iter()
                .position(|r| matches!(r.v, Watch::Changed { .. }))
            {
                Some(j) if j <= 2 => {
                    if let Some((x, r)) = worst_excess(&recs[j + 1..]) {
                        if x > 0.0 {
                            failures.push(format!(
                                "{tag}: toggle {i}: err {:.0} > bound {} ({})",
                                r.err, r.bound, r.v
                            ));
                        }
                    }
                }
                _ => failures.push(format!(
                    "{tag}: toggle {i}: {:?}",
                    recs.iter().map(|r| r.v.token()).collect::<Vec<_>>()
                )),
            }
        }
        if sim
            .recs
            .iter()
            .any(|r| matches!(r.v, Watch::CounterJumped { .. } | Watch::CounterStopped))
        {
            failures.push(format!("{tag}: a counter fault"));
        }
        if sim.back_steps > 0 || sim.worst_jump_excess > 0 {
            failures.push(format!(
                "{tag}: {} steps back, jump excess {} ns",
                sim.back_steps, sim.worst_jump_excess
            ));
        }
    }
    eprintln!("alternating: {n} seeds, {} failures", failures.len());
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Hostile arguments: `with_tries` 0 and `u32::MAX` ("1 to 64"), `with_slew_ppb(u64::MAX)`,
/// a start rate at [`Frequency::MIN_HZ`] for a 5 GHz counter and at [`Frequency::MAX_HZ`]
/// for a 1 kHz one, a start bound of `u64::MAX`: "no input makes it panic"; the clock never
/// goes back.
#[test]
fn hostile_arguments_never_panic() {
    for seed in 0..seeds() {
        for case in 0..5u32 {
            let mut s = seed ^ u64::from(case);
            let (chz, f): (u64, Frequency) = match case {
                0 => (
                    5_000_000_000,
                    Frequency::exact_hz(Frequency::MIN_HZ).unwrap(),
                ),
                1 => (1_000, Frequency::exact_hz(Frequency::MAX_HZ).unwrap()),
                2 => (
                    1_000_000_000,
                    Frequency::from_hz(
                        1_000_000_000,
                        Source::User,
                        Accuracy::Measured {
                            uncertainty_ppb: u64::MAX,
                        },
                    )
                    .unwrap(),
                ),
                _ => (1_000_000_000, Frequency::exact_hz(1_000_000_000).unwrap()),
            };
            let mut w = World::new(mix(&mut s), u128::from(chz) * 1000, 64, 14_318_180, 64);
            w.r_delay = (100_000, MS);
            let tries = [0, u32::MAX, 1, 64, 65][case as usize];
            let mut sim = Sim::with(w, f, |wd| wd.with_tries(tries).with_slew_ppb(u64::MAX));
            sim.judge_jumps = false;
            sim.run(30, 500 * MS, 100 * MS);
            assert_eq!(sim.back_steps, 0, "seed {seed} case {case}");
            sim.counts_agree().unwrap();
        }
    }
}

/// A change beyond half the PIT's wrap per period (5.5 % at 0.5 s, up to the 12.5 % a
/// rate change may be) moves the count by more wraps than the rate in force can count: each
/// such interval was counted one wrap off, the alias (a −6 % change read as +5 %), reported
/// as (c) and followed: the clock 12.3 % off under a `bound_ppb` of 14 ppm, for good
/// (`cargo xtask qemu watchdog-pit` with `BARETIME_WATCH_CHANGES=-20,-60000`, under QEMU's
/// exact `-icount` truth). Since, the wraps are counted from a short measurement of the
/// rate at the check (*Widths*): each change reported within three checks at its true rate,
/// the clock within `bound_ppb` from then on.
#[test]
fn a_change_beyond_half_a_pit_wrap_is_not_aliased() {
    let mut bad = Vec::new();
    for seed in 0..seeds() * 2 {
        let (w, start, _, _) = quiet_world(seed, &[3], &[1_000_000_000]);
        let mut sim = Sim::new(w, start);
        sim.run(20, 500 * MS, 5 * MS);
        let mut s = seed ^ 0xa11a5;
        let sign = if mix(&mut s) & 1 == 0 { 1 } else { -1 };
        let ppb = unif(&mut s, 56_000_000, 124_000_000) as i128;
        let base = sim.w.borrow().ctr.rate_at(0);
        let t = sim.w.borrow().t + unif(&mut s, 0, 499) * MS;
        sim.w
            .borrow_mut()
            .ctr
            .set(t, base + base * sign * ppb / 1_000_000_000, 0);
        let from = sim.recs.len();
        sim.run(30, 500 * MS, 5 * MS);
        let after = &sim.recs[from..];
        let reported = after
            .iter()
            .position(|r| matches!(r.v, Watch::Changed { .. }));
        let faults = after
            .iter()
            .filter(|r| matches!(r.v, Watch::CounterStopped | Watch::CounterJumped { .. }))
            .count();
        let misses = reported.map_or(0, |k| {
            after[k..].iter().filter(|r| r.err > r.bound as f64).count()
        });
        let last = after[after.len() - 1];
        if !reported.is_some_and(|k| k < 3) || faults > 0 || misses > 0 {
            bad.push(format!(
                "seed {seed} (1 GHz vs PIT, P 500 ms, {:+} ppm): reported at check {reported:?}, \
                 {faults} counter faults, {misses} checks beyond bound_ppb, err {:.0} bound {} at the end",
                sign * ppb / 1000,
                last.err,
                last.bound
            ));
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

/// The *Widths* rule's other side: a large change or a fast ramp under the 16-bit PIT at
/// 0.5 s (two moves of the same sign, the second to 3.5–5.4 % in all, within half a wrap per
/// period) leaves `bound_ppb` over 5.5 %, so the next check is [`Unjudged::TooLong`]; the one
/// after is judged at the hook's period, the bound shrinks, and the checks go on being
/// judged. Before the check after a refusal was judged at the hook's period, every check
/// from then on was `TooLong` and the bound never shrank (a trace while building the rule).
#[test]
fn a_large_change_under_a_pit_is_not_refused_for_good() {
    let mut bad = Vec::new();
    for seed in 0..seeds() * 2 {
        // The world's own period is not used: 0.5 s throughout.
        let (w, start, _, _) = quiet_world(seed, &[3], &[1_000_000_000]);
        let mut sim = Sim::new(w, start);
        sim.run(20, 500 * MS, 5 * MS);
        let mut s = seed ^ 0x51de;
        let sign = if mix(&mut s) & 1 == 0 { 1 } else { -1 };
        let first = unif(&mut s, 15_000_000, 30_000_000) as i128;
        let second = unif(&mut s, 35_000_000, 54_000_000) as i128;
        let base = sim.w.borrow().ctr.rate_at(0);
        for ppb in [first, second] {
            let t = sim.w.borrow().t + unif(&mut s, 0, 400) * MS;
            sim.w
                .borrow_mut()
                .ctr
                .set(t, base + base * sign * ppb / 1_000_000_000, 0);
            sim.run(1, 500 * MS, 5 * MS);
        }
        sim.run(40, 500 * MS, 5 * MS);
        let tail = &sim.recs[sim.recs.len() - 20..];
        let refused = tail
            .iter()
            .filter(|r| matches!(r.v, Watch::NoVerdict(Unjudged::TooLong)))
            .count();
        let last = tail[tail.len() - 1];
        let faults = sim
            .recs
            .iter()
            .filter(|r| matches!(r.v, Watch::CounterStopped | Watch::CounterJumped { .. }))
            .count();
        if refused > 0 || last.err > last.bound as f64 || faults > 0 {
            bad.push(format!(
                "seed {seed} (1 GHz vs PIT, P 500 ms, {:+} then {:+} ppm): {refused} TooLong in the last 20, \
                 {faults} counter faults, err {:.0} bound {} at the end",
                sign * first / 1000,
                sign * second / 1000,
                last.err,
                last.bound
            ));
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}
