//! Round-5 outside attack on [`Watchdog`] (issue 28), written from its rustdoc (the `//!` and
//! `///` comments and the public signatures of `src/watchdog.rs`, not its function bodies), the
//! README's watchdog section and the public API alone; of the other tests only the header
//! tables of `tests/adversary_watchdog3.rs` and `tests/adversary_watchdog4.rs` were read, to
//! aim elsewhere: at the rules the last stop added (CHANGELOG, `[Unreleased]`): the moving
//! state after a move seen (eight spans; the steady ramp's worst case; a steady check's bound
//! at least the clock's distance from the last interval's rate plus that interval's bound); a
//! waiting deviation that does not widen its baseline, and an extended interval that is one
//! rate only where its newest part agrees; the one-off rule (a move of the window's parts
//! only where no one-off step between two kept samples fits them: count steps are no change);
//! distances in ppb of the counter's rate, widened by `1/(1 − bound)`; the detection threshold
//! `2·(interval's bound + b₀)` with the learnt steps.
//!
//! Every world is scripted here: true time in picoseconds; a counter and a reference whose
//! counts are integrals of piecewise rates (steps, short ramps) plus steps of either count,
//! floored and masked to their widths; every read costs scripted time with jitter, the
//! reference latching uniformly inside its read, 2 % of reference reads delayed up to 30 µs
//! before or after the latch (none in the count-step worlds); hooks at a period of 0.25, 0.5 or
//! 1 s (±1 % jitter, or none). Five pairs: 1 GHz vs HPET (14.318 MHz, reads 1 µs), 3 GHz vs
//! 10 MHz (0.2 µs), 24 MHz vs a 24-bit ACPI PM timer (1 µs), 1 GHz vs a 1 GHz pvclock (80 ns:
//! the learnt step is a read's ticks), 2.4 GHz vs a 32-bit HPET (0.6 µs). Starts 0–0.4× an
//! honest 100–400 ppb bound off (far-off worlds: below). After every check `run` judges:
//! health's counts against the verdicts; promise 1 (`now()` never back across a check); the
//! clock's rate moved only by (c) or by a steer within the slew, each counted in `steers`;
//! `WideBracket` and `TooLong` leaving the rate and `bound_ppb` alone. The families add:
//!
//! - *bound*: `|clock − counter's rate as the reference counts it| ≤ bound_ppb` (+2 ppb and
//!   the mHz rounding) at every check of a world without changes, and from a `Changed` after
//!   the last change on, where no ramp is under way; in count-step worlds before the first
//!   step and from three accepted samples after the last (*an excursion ... left out of the
//!   bound once it is three samples back*);
//! - *own rate*: a `Changed`'s rate within its own bound where the truth was one rate over
//!   its interval;
//! - *moving floor*: at the `Steady` checks among the seven after a `Changed`, `bound_ppb` ≥
//!   the clock's distance from that interval's rate (ppb of it, widened by `1/(1 − b)`) plus
//!   its bound `b` (a move reported by two intervals is seen over a period at least: moving
//!   lasts eight);
//! - *detection*: against the docs' own formula, from observed figures only: `δ` beyond 1.1 ×
//!   `2·(widest Steady interval bound before the change + b₀) + 4` ppb, `b₀` ≤ `bound_ppb`
//!   at the last check before the change that was no `Unconfirmed` (and at the mixed check
//!   where it was `Steady`), reported by the end of the second interval after the mixed one,
//!   one check later below 2× the threshold (*a change at about the threshold ... a period
//!   later*), one more per check not accepted.
//!
//! Seeds: `BARETIME_ADV_SEEDS` (default 4: the default run takes well under a second in a debug
//! build); the figures below are from `BARETIME_ADV_SEEDS=100` (and 300 where said), release,
//! on a 2-vCPU Intel Xeon KVM guest (family 6 model 167): `BARETIME_ADV_SEEDS=100 cargo test
//! --release -p baretime --features std --test adversary_watchdog5 -- --include-ignored
//! --nocapture` (about 2 s of tests). `ATK5_TRACE=<seed>` prints a world's checks;
//! `ATK5_FLOOR_SPAN=<n>` judges the moving floor over `n` checks after a report (default 7).
//!
//! Held (every world; families × worlds at 100 seeds, at 300 in brackets):
//!
//! | test (family) | worlds (checks) | what held |
//! | --- | --- | --- |
//! | `a_change_right_after_a_report_is_reported_within_the_docs_threshold`: a first change under the threshold (reported by the split), beyond it (two intervals), or a count step beyond it (a deviation that waits); then a second step of ±0.5–8× the threshold 0.05–4 periods after the first's report (or right after the count step's `Unconfirmed`) | 400 (28 000) [1 200] | counts, promises, slew; *bound* (worst 0.80); *own rate*; *moving floor* at 3 326 checks [9 902] (worst 1.000: `bound_ppb` is that floor exactly); *detection* of 265 second changes beyond the docs' threshold [813], 0 late (p50 0.83 s, max 2.27 s); no fault |
//! | `a_second_change_while_the_first_waits_is_reported`: a step of 0.4–1.3× the threshold (it waits, or extends an interval), then ±0.5–6× more 0.2–3 periods later | 400 (24 000) [1 200] | the same: *detection* of 221 [665] where both the second and the net are beyond the threshold, 0 late (p50 0.53 s, max 2.39 s); *moving floor* at 2 880 [8 640]; *own rate* (seed 5389 broke it before the fix below) |
//! | `real_changes_a_one_off_could_mimic_are_reported`: a step of 0.15–0.9× (about; the estimate runs high) the threshold at a random time, or inside a check's reads, or a ramp to it over 0.5–3 periods; 200 checks | 400 (80 000) [1 200] | every change reported (p50 1.10 s, max 5.75 s; [1.09 s, 7.84 s]), never before it; *bound* from the report on (worst 0.76 [0.84]); *own rate*; *moving floor* at 2 803 [8 412]; no fault |
//! | `an_excursion_across_a_check_keeps_the_bound`: a step of ±1–3× the threshold, back to a net ±0.05–0.5× it 0.3–1.2 periods later (across a check) | 400 (24 000) [1 200] | counts, promises, slew; *bound* from a report wholly after on (worst 0.78); *moving floor* at 1 907 [5 627]; no (c) before the excursion, no fault; *own rate* (3 seeds at 300 broke it before the fix below) |
//! | `far_off_starts_keep_the_bound_and_the_slew`: starts ±0.1–8 % off under an honest 1.02–1.5× that bound, slew 0, 1 000, 100 000 ppb or `u64::MAX`, constant rates, 120 checks | 400 (48 000) [1 200] | every steer within its slew and counted, none at 0; *bound* at every check (worst 1.000); at slew `u64::MAX` the error at the end under 4·(w + 2q)/T (*converges ... within about w/T*); no (c) (10 [21] slow starts before the fix below) |
//! | `count_steps_keep_the_promises`: one count step (counter or reference) 0.3–1.8× the quiet interval bound inside a check's reads; two the same way in consecutive intervals; 2–4 steps 2–10 periods apart, the same way or alternating | 600 (66 000) [1 800] | counts, promises, slew, no fault, the moving floor after the (c) below; *bound* three samples on after one step: 1 of 194 at 1.06× → 0 (worst 0.85×) [2 of 591, up to 1.06× → 1, 1.02×] (within `tests/adversary_watchdog4.rs`'s open finding, up to 1.15×) |
//! | `seconds_edges_bracket_the_edge` (`SecondsEdge::measure`, time left): a 1 GHz clock at its exact rate; an RTC whose second changes at a random phase, polled at 5–30 µs a read (latched uniformly inside), 0, 1 or 20 % of polls delayed up to 50 µs before or after the latch; the wait begun 0–1 s before an edge, or on a stuck RTC; `max_polls` 1, 7, 1 000, 100 000 or `u32::MAX` | 1 000 waits [3 000] (311 `Some`, 79 `None` at 1.2 s, 610 at `max_polls`) | the edge's clock time within `[before, after]` (± `MARK_GRANULE_NS`), `unix_seconds` the value it changed to, `width_ns` = `after − before`; never more than `max_polls` polls; `None` only at `max_polls` or past 1.2 s of clock time, overshooting by at most a poll, never where the value changed inside the wait |
//! | `a_clock_started_far_slow_under_an_honest_bound_is_no_change` (fixed since: below) and its controls | 14 | −0.5 % under 0.502 % and 0.503 %, −1 % under 1.0005 % and 1.015 %, −5 % under 5.2 %, +0.5 % under 0.502 %, +5 % under 5.2 %: no (c) (before: (c) at the second check in the first three, and in 10 [21] `far_off` worlds, now 0 [0]) |
//! | `a_report_after_an_extended_interval_sets_no_mixed_rate` (fixed since: below) | 4 | seeds 5389, 6432, 6477, 6569: every `Changed` within its own bound (before: 1 087 under 967, 234 under 182, 4 155 under 2 457, 1 597 under 1 209); *own rate* in `a_second_change_...` and `an_excursion_...` now 0 of 1 200 each at 300 seeds |
//!
//! Broke (each an `#[ignore = "finding: ..."]` test below, with the sentence it breaks; the
//! first four are open findings, stated since with these figures in the docs' *False alarms*
//! section and under `WatchdogHealth::bound_ppb`; `one_count_step_is_no_change` partly fixed
//! since, below; figures after the fix as `before → after`, commands as above):
//!
//! | test | world | figures |
//! | --- | --- | --- |
//! | `two_count_steps_in_consecutive_intervals_are_no_change` | two steps of a count the same way, each 0.3–1.8× an interval's bound (under the docs' threshold `2·(b + b₀)`), in consecutive intervals, rate unchanged: two intervals off the same side, which is (c) by the two-interval rule, though the docs say a count step under the threshold is no change | (c) in 100 of 201 worlds [285 of 598 → 283 of 599]; the clock recalibrated up to 7 436 ppb off (seed 2014: 2.4 GHz vs HPET32, P 0.25 s, reference steps +1.14× and +1.49× of 4 897 ppb; `bound_ppb` 16 373 held); seed 2002: 1 GHz vs HPET, P 1 s, counter +0.99× and +1.22× of 1 752 ppb (1.7 and 2.1 µs) at 27.24 and 28.78 s: `Changed` at 29 s, 2 351 ppb off under its own 1 240. With every step at most the narrowest interval bound seen (half of any interval's threshold): 4 of 59 such worlds (of 600 drawn at 100 seeds), as seed 2161: 1 GHz vs HPET, P 0.25 s, counter −1.31 and −1.02 µs at 9.454 and 9.733 s (narrowest bound 5 394 ppb): (c) at check 39, 1 313 ppb off. `bound_ppb` held in every such world |
//! | `count_steps_periods_apart_are_no_change` | 2–4 such steps 2–10 periods apart, the same way or alternating (netting near zero) | (c) in 27 → 25 of 205 [91 → 84 of 611], up to 2 374 ppb off after (seed 2077: 24 MHz vs ACPI PM, P 0.5 s, four steps of −0.9 to −1.1× 4 529 ppb); seed 2034 alternating on the reference; with every step at most the narrowest interval bound: 2 of 36 (seed 2114: 3 GHz vs 10 MHz, P 1 s, three counter steps of +0.56–0.73× 464 ppb 6–8 s apart, (c) at 55 s) |
//! | `one_count_step_is_no_change` | one step of the counter's or the reference's count, 0.6–1.4× an interval's bound, at a random time or inside a check's reads | (c) 1–40 s later: 11 of 4 000 worlds anywhere, 6 of 4 000 inside the reads (seeds 10 000–13 999; 20 of 8 004 with seeds 2935, 3216, 10093) [59 of 24 004]; seed 10093: 1 GHz vs HPET, P 0.5 s, counter +1.9 µs at 10.567 s: `Changed` at 49 s, the clock from 47 to −84 ppb off (`bound_ppb` held). By size (one step anywhere, seeds 2 000–2 599): 0 of 176 at most the narrowest interval bound seen, 2 of 184 at 1–1.5× it (under 0.75× any interval's threshold), 0 of 240 beyond. `tests/adversary_watchdog4.rs` counted 0 of 7 500 in its worlds. After the fix (a step inside the window's older part taken against the recent part's rate; the rates of samples the window left out kept; a try's bracket narrower than half the floor not taken): 20 → 12 of 8 004 (7 anywhere, 5 inside the reads) [59 → 24 of 24 004: 14 and 10]; seed 10093 no change since, nor the steps back inside a check's reads that left a bracket of 11–16 ticks that lied (seeds 11917, 14244). Left: steps at about one bracket's width that the samples either side do not show (seeds 2935, 10007, 10365: the clock 24–226 ppb off after), and two where the window against the clock's rate moved, not its parts (seeds 10558, 13577, the step 0.1–0.4 s before the window's end) |
//! | `count_steps_periods_apart_leave_bound_ppb_above_the_error` | 2–4 count steps periods apart, judged three samples after the last | the docs qualify one step ("a little under", up to 1.15×): 8 of 205 beyond the bound [30 → 31 of 611], 5 [14 → 15] beyond 1.15×, up to 1.49× (seed 2027: 3 GHz vs 10 MHz, P 0.25 s, four counter steps +0.8–1.6×: 349 ppb off under 232) [1.59×] |
//!
//! Not attacked: `WallClock` itself (`tests/adversary_wall.rs`, `adversary_wall2.rs`), an RTC
//! poll that returns `None` across the edge (an update in progress after the second began);
//! calls from several threads; statistical
//! (dishonest) start bounds; latch points that drift inside brackets; accelerating ramps (the
//! docs exclude them); long staircases (a staircase's step is covered by the moving floor,
//! judged above, for the seven checks after a report); `TooLong` gaps
//! (`tests/adversary_watchdog4.rs`).

use baretime::{
    Accuracy, Clock, Counter, Frequency, Reference, Source, Unjudged, Watch, Watchdog,
    WatchdogHealth,
};
use std::cell::RefCell;
use std::rc::Rc;

/// Picoseconds in a second.
const PS: u64 = 1_000_000_000_000;

fn seeds() -> u64 {
    std::env::var("BARETIME_ADV_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4)
}

// ---------------------------------------------------------------------------------------
// The scripted world.

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn sign(&mut self) -> f64 {
        if self.next() & 1 == 0 {
            1.0
        } else {
            -1.0
        }
    }
}

/// A piece of a count's rate: from `at` (ps), `hz` plus `slope` Hz per second.
#[derive(Clone, Copy, Debug)]
struct Piece {
    at: u64,
    hz: f64,
    slope: f64,
}

/// A count: the integral of piecewise rates, plus steps of the count.
#[derive(Clone, Debug)]
struct Track {
    pieces: Vec<Piece>,
    steps: Vec<(u64, f64)>,
}

impl Track {
    fn constant(hz: f64) -> Track {
        Track {
            pieces: vec![Piece {
                at: 0,
                hz,
                slope: 0.0,
            }],
            steps: Vec::new(),
        }
    }
    fn count(&self, t: u64) -> f64 {
        let mut acc = 0.0;
        for (i, p) in self.pieces.iter().enumerate() {
            if p.at >= t {
                break;
            }
            let end = self.pieces.get(i + 1).map_or(t, |q| q.at.min(t));
            let dt = (end - p.at) as f64 / PS as f64;
            acc += p.hz * dt + 0.5 * p.slope * dt * dt;
        }
        for &(at, d) in &self.steps {
            if at <= t {
                acc += d;
            }
        }
        acc
    }
    fn rate(&self, t: u64) -> f64 {
        let p = self
            .pieces
            .iter()
            .rev()
            .find(|p| p.at <= t)
            .unwrap_or(&self.pieces[0]);
        p.hz + p.slope * (t.saturating_sub(p.at)) as f64 / PS as f64
    }
    /// A step of the rate by `rel` at `at` (after every piece so far).
    fn rate_step(&mut self, at: u64, rel: f64) {
        let hz = self.rate(at) * (1.0 + rel);
        self.pieces.push(Piece { at, hz, slope: 0.0 });
    }
    /// A ramp by `rel` of the rate over `dur` ps from `at`, then constant.
    fn ramp(&mut self, at: u64, dur: u64, rel: f64) {
        let hz = self.rate(at);
        let slope = hz * rel / (dur as f64 / PS as f64);
        self.pieces.push(Piece { at, hz, slope });
        self.pieces.push(Piece {
            at: at + dur,
            hz: hz * (1.0 + rel),
            slope: 0.0,
        });
    }
}

struct World {
    t: u64,
    rng: Rng,
    ctr: Track,
    c_bits: u32,
    /// A counter read's cost (ps), jitter up to `c_jit`.
    c_cost: u64,
    c_jit: u64,
    rf: Track,
    r_bits: u32,
    r_cost: u64,
    r_jit: u64,
    /// Share of reference reads delayed by up to `delay_max` ps (before or after the latch).
    delay_p: f64,
    delay_max: u64,
    /// Times at which the counter's rate changed (steps; ramps' starts and ends).
    changes: Vec<u64>,
    /// Times at which a count stepped (counter or reference).
    count_steps: Vec<u64>,
}

impl World {
    fn mask(v: f64, bits: u32) -> u64 {
        let v = v.max(0.0).floor() as u64;
        if bits >= 64 {
            v
        } else {
            v & ((1u64 << bits) - 1)
        }
    }
    fn read_counter(&mut self) -> u64 {
        let cost = self.c_cost + self.rng.below(self.c_jit + 1);
        let latch = self.t + cost / 2;
        self.t += cost;
        Self::mask(self.ctr.count(latch), self.c_bits)
    }
    fn read_reference(&mut self) -> u64 {
        let cost = self.r_cost + self.rng.below(self.r_jit + 1);
        let mut before = self.rng.below(cost + 1);
        let mut after = cost - before;
        if self.rng.unit() < self.delay_p {
            let d = self.rng.below(self.delay_max + 1);
            if self.rng.next() & 1 == 0 {
                before += d;
            } else {
                after += d;
            }
        }
        self.t += before;
        let v = Self::mask(self.rf.count(self.t), self.r_bits);
        self.t += after;
        v
    }
    /// The counter's rate as the reference counts it, in mHz of the reference's stated rate.
    fn truth_mhz(&self, t: u64, stated_hz: f64) -> f64 {
        self.ctr.rate(t) * stated_hz / self.rf.rate(t) * 1000.0
    }
    fn rate_step(&mut self, at: u64, rel: f64) {
        self.ctr.rate_step(at, rel);
        self.changes.push(at);
    }
    fn ramp(&mut self, at: u64, dur: u64, rel: f64) {
        self.ctr.ramp(at, dur, rel);
        self.changes.push(at);
        self.changes.push(at + dur);
    }
    fn counter_step(&mut self, at: u64, ticks: f64) {
        self.ctr.steps.push((at, ticks));
        self.count_steps.push(at);
    }
    fn reference_step(&mut self, at: u64, ticks: f64) {
        self.rf.steps.push((at, ticks));
        self.count_steps.push(at);
    }
}

type Shared = Rc<RefCell<World>>;

struct Ctr(Shared, u32);

impl Counter for Ctr {
    fn ticks(&self) -> u64 {
        self.0.borrow_mut().read_counter()
    }
    fn bits(&self) -> u32 {
        self.1
    }
}

struct Refr(Shared, u32, Frequency);

impl Reference for Refr {
    fn read(&mut self) -> u64 {
        self.0.borrow_mut().read_reference()
    }
    fn bits(&self) -> u32 {
        self.1
    }
    fn frequency(&self) -> Frequency {
        self.2
    }
    fn name(&self) -> &'static str {
        "scripted"
    }
}

/// A pair of a counter and a reference, as a kernel meets them.
#[derive(Clone, Copy, Debug)]
struct Kind {
    name: &'static str,
    c_hz: f64,
    c_bits: u32,
    c_cost: u64,
    r_hz: u64,
    r_bits: u32,
    r_cost: u64,
}

const KINDS: [Kind; 5] = [
    Kind {
        name: "1GHz/HPET",
        c_hz: 1.0e9,
        c_bits: 64,
        c_cost: 20_000,
        r_hz: 14_318_180,
        r_bits: 64,
        r_cost: 1_000_000,
    },
    Kind {
        name: "3GHz/10MHz",
        c_hz: 3.0e9,
        c_bits: 64,
        c_cost: 25_000,
        r_hz: 10_000_000,
        r_bits: 64,
        r_cost: 200_000,
    },
    Kind {
        name: "24MHz/ACPI24",
        c_hz: 24.0e6,
        c_bits: 64,
        c_cost: 40_000,
        r_hz: 3_579_545,
        r_bits: 24,
        r_cost: 1_000_000,
    },
    Kind {
        name: "1GHz/pvclock",
        c_hz: 1.0e9,
        c_bits: 64,
        c_cost: 20_000,
        r_hz: 1_000_000_000,
        r_bits: 64,
        r_cost: 80_000,
    },
    Kind {
        name: "2.4GHz/HPET32",
        c_hz: 2.4e9,
        c_bits: 64,
        c_cost: 20_000,
        r_hz: 14_318_180,
        r_bits: 32,
        r_cost: 600_000,
    },
];

impl Kind {
    /// About an interval's bound (ppb) at period `p` s: brackets, the learnt steps.
    fn interval_ppb(&self, p: f64) -> f64 {
        let w = (2 * self.c_cost + self.r_cost) as f64 / PS as f64;
        let qc = (1.0 / self.c_hz).max(self.c_cost as f64 / PS as f64);
        let qx = (1.0 / self.r_hz as f64).max(self.r_cost as f64 / PS as f64);
        (w + 2.0 * qc + 2.0 * qx) / p * 1e9
    }
}

struct Setup {
    kind: Kind,
    period: u64,
    checks: usize,
    /// The clock's start: off the truth by this (ppb), stated with this bound.
    start_off_ppb: f64,
    start_bound_ppb: u64,
    slew: Option<u64>,
    delay_p: f64,
    delay_max: u64,
    /// Hook jitter, as a share of the period.
    jitter: f64,
}

fn world(seed: u64, s: &Setup) -> Shared {
    let k = s.kind;
    Rc::new(RefCell::new(World {
        t: 0,
        rng: Rng(seed.wrapping_mul(0x2545_f491_4f6c_dd1d) ^ 0x5eed),
        ctr: Track::constant(k.c_hz),
        c_bits: k.c_bits,
        c_cost: k.c_cost,
        c_jit: k.c_cost / 2,
        rf: Track::constant(k.r_hz as f64),
        r_bits: k.r_bits,
        r_cost: k.r_cost,
        r_jit: k.r_cost / 4,
        delay_p: s.delay_p,
        delay_max: s.delay_max,
        changes: Vec::new(),
        count_steps: Vec::new(),
    }))
}

/// One check, as seen from outside.
#[derive(Clone, Copy, Debug)]
struct Rec {
    /// True time when the check began and ended (ps).
    t0: u64,
    t1: u64,
    v: Watch,
    h: WatchdogHealth,
    clock_mhz: u64,
    truth_mhz: f64,
    /// The clock's error (ppb of the truth).
    err: f64,
}

impl Rec {
    fn accepted(&self) -> bool {
        !matches!(
            self.v,
            Watch::NoVerdict(Unjudged::WideBracket)
                | Watch::NoVerdict(Unjudged::TooShort)
                | Watch::NoVerdict(Unjudged::ReferenceStill)
        )
    }
    fn changed(&self) -> bool {
        matches!(self.v, Watch::Changed { .. })
    }
}

struct Outcome {
    recs: Vec<Rec>,
    /// Broken invariants (promises, counts, slew, rejected checks).
    inv: Vec<String>,
}

/// Runs `s` in `w`; `on_check` may add events after each check (at or after the world's time).
fn run(s: &Setup, w: &Shared, mut on_check: impl FnMut(&[Rec], &mut World)) -> Outcome {
    let k = s.kind;
    let stated = Frequency::exact_hz(k.r_hz).unwrap();
    let stated_hz = k.r_hz as f64;
    let truth0 = w.borrow().truth_mhz(0, stated_hz);
    let start = Frequency::from_millihz(
        (truth0 * (1.0 + s.start_off_ppb * 1e-9)).round() as u64,
        Source::Calibrated,
        Accuracy::Measured {
            uncertainty_ppb: s.start_bound_ppb,
        },
    )
    .unwrap();
    let clock = Clock::new(Ctr(w.clone(), k.c_bits), start);
    let mut wd = Watchdog::new(Refr(w.clone(), k.r_bits, stated), start);
    if let Some(sl) = s.slew {
        wd = wd.with_slew_ppb(sl);
    }
    let mut recs: Vec<Rec> = Vec::with_capacity(s.checks);
    let mut inv = Vec::new();
    let mut prev_h = wd.health();
    let mut jr = Rng(s.period ^ 0x77);
    for i in 0..s.checks {
        let hook = (i as u64 + 1) * s.period;
        let jit = (jr.range(-s.jitter, s.jitter) * s.period as f64) as i64;
        let hook = hook.saturating_add_signed(jit);
        {
            let mut g = w.borrow_mut();
            if g.t < hook {
                g.t = hook;
            }
        }
        let before = clock.scale().millihz();
        let n0 = clock.now();
        let t0 = w.borrow().t;
        let v = wd.check(&clock);
        let t1 = w.borrow().t;
        let n1 = clock.now();
        let h = wd.health();
        let after = clock.scale().millihz();
        let truth = w.borrow().truth_mhz(t1, stated_hz);
        let err = (after as f64 - truth) / truth * 1e9;
        if n1 < n0 {
            inv.push(format!("check {i}: now() went back"));
        }
        // Counts.
        let d = |a: u64, b: u64| a.wrapping_sub(b);
        let exp = match v {
            Watch::NoVerdict(_) => (1, 0, 0, 0),
            Watch::Steady { .. } => (0, 1, 0, 0),
            Watch::Changed { .. } => (0, 0, 1, 0),
            _ => (0, 0, 0, 1),
        };
        let got = (
            d(h.no_verdict, prev_h.no_verdict),
            d(h.steady, prev_h.steady),
            d(h.changed, prev_h.changed),
            d(h.counter_faults, prev_h.counter_faults),
        );
        if h.checks != i as u64 + 1 || got != exp {
            inv.push(format!("check {i}: counts {got:?} for {v}"));
        }
        // The rate moves only by (c) or by a steer within the slew, counted.
        let steers = d(h.steers, prev_h.steers);
        if !matches!(v, Watch::Changed { .. }) {
            if after != before {
                let moved = (after as f64 - before as f64).abs() / before as f64 * 1e9;
                let slew = s.slew.unwrap_or(1_000) as f64;
                if steers != 1 || moved > slew + 2e12 / before as f64 + 1.0 {
                    inv.push(format!(
                        "check {i}: rate moved {moved:.1} ppb at {v}, steers +{steers}"
                    ));
                }
            } else if steers != 0 {
                inv.push(format!("check {i}: steers +{steers} with no move ({v})"));
            }
        } else if steers != 0 {
            inv.push(format!("check {i}: steers +{steers} at a (c)"));
        }
        if matches!(
            v,
            Watch::NoVerdict(Unjudged::WideBracket) | Watch::NoVerdict(Unjudged::TooLong)
        ) && (after != before || h.bound_ppb != prev_h.bound_ppb)
        {
            inv.push(format!("check {i}: {v} moved the rate or the bound"));
        }
        prev_h = h;
        recs.push(Rec {
            t0,
            t1,
            v,
            h,
            clock_mhz: after,
            truth_mhz: truth,
            err,
        });
        on_check(&recs, &mut w.borrow_mut());
    }
    Outcome { recs, inv }
}

// ---------------------------------------------------------------------------------------
// Judgements, from the docs' sentences.

/// Slack for the rounding to millihertz (ppb), plus 2 ppb.
fn slack(mhz: f64) -> f64 {
    2.0 + 2.0e12 / mhz
}

/// The distance (ppb of `rate`) of `clock` from a measured `rate` with bound `b`, widened by
/// `1/(1 − b)`: *the clock's distance from a measured rate ... widened by 1/(1 − its bound)*.
fn distance(clock_mhz: u64, rate: &Frequency) -> (f64, f64) {
    let r = rate.as_millihz() as f64;
    let b = rate.accuracy().bound_ppb() as f64;
    let d = (clock_mhz as f64 - r).abs() / r * 1e9 / (1.0 - b * 1e-9);
    (d, b)
}

/// The sample time (ps) where the interval judged at `j` starts: the last accepted check
/// before it.
fn interval_start(recs: &[Rec], j: usize) -> Option<u64> {
    (0..j)
        .rev()
        .find(|&i| recs[i].accepted())
        .map(|i| recs[i].t0)
}

/// `bound_ppb` at every check where every change has been seen: no change at all yet, or a
/// `Changed` at a check whose interval starts after the last change (and the truth has not
/// moved since, no ramp under way). Returns (judged, worst ratio, first break).
fn judge_bound(o: &Outcome, w: &World) -> (u64, f64, Option<(usize, f64, u64)>) {
    let mut judged = 0;
    let mut worst: f64 = 0.0;
    let mut first = None;
    for (k, r) in o.recs.iter().enumerate() {
        let last_change = w.changes.iter().copied().filter(|&c| c <= r.t1).max();
        let ok = match last_change {
            None => true,
            Some(tc) => {
                // No ramp under way: the rate now equals the rate just after tc.
                let still = (w.ctr.rate(r.t1) - w.ctr.rate(tc + 1)).abs() < 1e-12 * w.ctr.rate(tc);
                still
                    && (0..=k).any(|j| {
                        o.recs[j].changed()
                            && o.recs[j].t0 > tc
                            && interval_start(&o.recs, j).is_some_and(|s| s > tc)
                    })
            }
        };
        // Count steps: judged only before the first and three accepted samples after the last.
        let steps_ok = match w.count_steps.iter().copied().filter(|&c| c <= r.t1).max() {
            None => true,
            Some(ts) => {
                o.recs[..=k]
                    .iter()
                    .filter(|q| q.t0 > ts && q.accepted())
                    .count()
                    >= 3
            }
        };
        if !(ok && steps_ok) {
            continue;
        }
        judged += 1;
        let ratio = r.err.abs() / (r.h.bound_ppb as f64 + slack(r.truth_mhz));
        worst = worst.max(ratio);
        if ratio > 1.0 && first.is_none() {
            first = Some((k, r.err, r.h.bound_ppb));
        }
    }
    (judged, worst, first)
}

/// A `Changed`'s rate within its own bound where the truth was one rate over its interval.
fn judge_changed_rates(o: &Outcome, w: &World) -> Vec<String> {
    let mut bad = Vec::new();
    for (j, r) in o.recs.iter().enumerate() {
        if let Watch::Changed { rate, .. } = r.v {
            let Some(s) = interval_start(&o.recs, j) else {
                continue;
            };
            let moved = (w.ctr.rate(s) - w.ctr.rate(r.t1)).abs() > 1e-12 * w.ctr.rate(s);
            if moved || w.changes.iter().any(|&c| c >= s && c <= r.t1) {
                continue;
            }
            let truth = r.truth_mhz;
            let b = rate.accuracy().bound_ppb() as f64;
            let off = (rate.as_millihz() as f64 - truth).abs() / truth * 1e9;
            if off > b / (1.0 - b * 1e-9) + slack(truth) {
                bad.push(format!(
                    "check {j}: Changed to a rate {off:.0} ppb off under its own {b:.0}"
                ));
            }
        }
    }
    bad
}

/// *For eight times the span over which a move was last seen (a change reported ...) the
/// bound ... is at least the last interval's distance from the clock's rate plus that
/// interval's bound*: judged at the `Steady` checks among the first [`floor_span`] after each
/// `Changed`, up to the first that is not `Steady`. Returns (judged, worst ratio, first).
fn judge_moving_floor(o: &Outcome) -> (u64, f64, Option<String>) {
    let mut judged = 0;
    let mut worst: f64 = 0.0;
    let mut first = None;
    for (j, r) in o.recs.iter().enumerate() {
        if !r.changed() {
            continue;
        }
        for k in j + 1..(j + 1 + floor_span()).min(o.recs.len()) {
            let q = &o.recs[k];
            let Watch::Steady { rate } = q.v else { break };
            let (d, b) = distance(q.clock_mhz, &rate);
            let floor = d + b;
            judged += 1;
            let ratio = floor / (q.h.bound_ppb as f64 + slack(q.truth_mhz));
            worst = worst.max(ratio);
            if ratio > 1.0 && first.is_none() {
                first = Some(format!(
                    "check {k} ({} after the report at {j}): bound {} under distance {d:.0} + interval bound {b:.0}",
                    k - j,
                    q.h.bound_ppb
                ));
            }
        }
    }
    (judged, worst, first)
}

/// Pure Steady verdicts' interval bounds, the widest.
fn widest_interval(recs: &[Rec]) -> f64 {
    recs.iter()
        .filter_map(|r| match r.v {
            Watch::Steady { rate } => Some(rate.accuracy().bound_ppb() as f64),
            _ => None,
        })
        .fold(0.0, f64::max)
}

/// The docs' detection rule for a step `delta` (ppb) at `tc`: *reported at the end of the
/// second interval after it at the latest ... provided δ exceeds twice the sum of an
/// interval's bound and the baseline's*, `b₀` ≤ `bound_ppb` before the change. Returns
/// `None` when the change is under the docs' threshold (×`margin`), else `Some(late by)`
/// (0: in time) and the threshold.
fn judge_detection(o: &Outcome, tc: u64, delta: f64, margin: f64) -> Option<(i64, f64, usize)> {
    let kc = o.recs.iter().position(|r| r.t1 > tc)?;
    if kc == 0 {
        return None;
    }
    // The baseline's bound: `bound_ppb` before any deviation that waits widened it.
    let pi = (0..kc)
        .rev()
        .find(|&i| !matches!(o.recs[i].v, Watch::NoVerdict(Unjudged::Unconfirmed)))?;
    let prev = &o.recs[pi];
    if !prev.accepted() {
        return None;
    }
    let mut b0 = prev.h.bound_ppb as f64;
    if matches!(o.recs[kc].v, Watch::Steady { .. }) {
        b0 = b0.max(o.recs[kc].h.bound_ppb as f64);
    }
    let widest = widest_interval(&o.recs[..kc.min(o.recs.len())]);
    if widest == 0.0 {
        return None;
    }
    let thr = 2.0 * (widest + b0) + 4.0;
    if delta.abs() <= margin * thr {
        return None;
    }
    // Deadline: two intervals after the mixed one, one more per disturbed check.
    let mut deadline = kc + 2;
    let mut k = kc;
    while k <= deadline && k < o.recs.len() {
        if !o.recs[k].accepted() {
            deadline += 1;
        }
        k += 1;
    }
    let rep = (kc..o.recs.len()).find(|&k| o.recs[k].changed());
    let late = match rep {
        Some(k) => k as i64 - deadline as i64,
        None => i64::MAX,
    };
    Some((late, thr, kc))
}

fn pct(v: &mut [f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((v.len() as f64 - 1.0) * q).round() as usize]
}

fn period_of(r: &mut Rng) -> u64 {
    [PS / 4, PS / 2, PS][r.below(3) as usize]
}

fn base_setup(r: &mut Rng, checks: usize) -> Setup {
    let kind = KINDS[r.below(KINDS.len() as u64) as usize];
    let b = r.range(100.0, 400.0);
    Setup {
        kind,
        period: period_of(r),
        checks,
        start_off_ppb: r.range(-0.4, 0.4) * b,
        start_bound_ppb: b as u64,
        slew: None,
        delay_p: 0.02,
        delay_max: 30_000_000,
        jitter: 0.01,
    }
}

/// What a family found, per world.
#[derive(Default)]
struct Tally {
    worlds: u64,
    checks: u64,
    inv: Vec<(u64, String)>,
    bound_judged: u64,
    bound_worst: f64,
    bound_breaks: Vec<(u64, String)>,
    own_rate: Vec<(u64, String)>,
    floor_judged: u64,
    floor_worst: f64,
    floor_breaks: Vec<(u64, String)>,
    det_judged: u64,
    det_late: Vec<(u64, String)>,
    det_s: Vec<f64>,
    false_c: Vec<(u64, String)>,
    faults: Vec<(u64, String)>,
    note: Vec<(u64, String)>,
}

impl Tally {
    fn common(&mut self, seed: u64, o: &Outcome, w: &World) {
        self.worlds += 1;
        self.checks += o.recs.len() as u64;
        for s in &o.inv {
            self.inv.push((seed, s.clone()));
        }
        let (j, worst, first) = judge_bound(o, w);
        self.bound_judged += j;
        self.bound_worst = self.bound_worst.max(worst);
        if let Some((k, e, b)) = first {
            self.bound_breaks.push((
                seed,
                format!("check {k}: error {e:.0} ppb over bound_ppb {b} ({worst:.2}x)"),
            ));
        }
        for s in judge_changed_rates(o, w) {
            self.own_rate.push((seed, s));
        }
        let (j, worst, first) = judge_moving_floor(o);
        self.floor_judged += j;
        self.floor_worst = self.floor_worst.max(worst);
        if let Some(s) = first {
            self.floor_breaks.push((seed, format!("{s} ({worst:.3}x)")));
        }
        for (k, r) in o.recs.iter().enumerate() {
            if matches!(r.v, Watch::CounterJumped { .. } | Watch::CounterStopped) {
                self.faults.push((seed, format!("check {k}: {}", r.v)));
                break;
            }
        }
    }
    fn print(&self, name: &str) {
        let show = |v: &Vec<(u64, String)>| -> String {
            v.iter()
                .take(4)
                .map(|(s, m)| format!("[seed {s}] {m}"))
                .collect::<Vec<_>>()
                .join("; ")
        };
        let mut det = self.det_s.clone();
        println!(
            "{name}: {} worlds, {} checks; invariants broken {} {}; bound judged {} (worst {:.3}) broken in {} {}; own rate broken {} {}; moving floor judged {} (worst {:.3}) broken in {} {}; detection judged {} late {} {} (p50 {:.2} s, max {:.2} s); false (c) {} {}; faults {} {}; notes {} {}",
            self.worlds,
            self.checks,
            self.inv.len(),
            show(&self.inv),
            self.bound_judged,
            self.bound_worst,
            self.bound_breaks.len(),
            show(&self.bound_breaks),
            self.own_rate.len(),
            show(&self.own_rate),
            self.floor_judged,
            self.floor_worst,
            self.floor_breaks.len(),
            show(&self.floor_breaks),
            self.det_judged,
            self.det_late.len(),
            show(&self.det_late),
            pct(&mut det, 0.5),
            pct(&mut det, 1.0),
            self.false_c.len(),
            show(&self.false_c),
            self.faults.len(),
            show(&self.faults),
            self.note.len(),
            show(&self.note),
        );
    }
}

// ---------------------------------------------------------------------------------------
// Family 1: a change right after a report, judged against the docs' own threshold.

/// How the first event of a `after_a_report` world is made.
#[derive(Clone, Copy, Debug, PartialEq)]
enum First {
    /// A change under the threshold: reported by the window's split.
    Small,
    /// A change beyond it: two intervals that agree.
    Large,
    /// A step of the counter's count beyond the threshold (a one-off that waits).
    CountStep,
}

/// Returns the world's outcome and the second change (time, ppb), if made.
fn after_a_report_world(seed: u64) -> (Setup, Shared, Outcome, First, Option<(u64, f64)>) {
    let mut r = Rng(seed ^ 0xa5a5);
    let s = base_setup(&mut r, 70);
    let w = world(seed, &s);
    let thr = 2.0 * s.kind.interval_ppb(s.period as f64 / PS as f64);
    let first = [First::Small, First::Large, First::CountStep][r.below(3) as usize];
    let at = (10 + r.below(10)) * s.period + (r.unit() * s.period as f64) as u64;
    let sign = r.sign();
    match first {
        First::Small => w
            .borrow_mut()
            .rate_step(at, sign * r.range(0.3, 0.8) * thr * 1e-9),
        First::Large => w
            .borrow_mut()
            .rate_step(at, sign * r.range(2.0, 6.0) * thr * 1e-9),
        First::CountStep => {
            let ticks =
                sign * r.range(1.0, 3.0) * thr * 1e-9 * s.period as f64 / PS as f64 * s.kind.c_hz;
            w.borrow_mut().counter_step(at, ticks);
        }
    }
    let gap = r.range(0.05, 4.0);
    let size = r.sign() * r.range(0.5, 8.0) * thr;
    let mut second: Option<(u64, f64)> = None;
    let period = s.period;
    let o = run(&s, &w, |recs, g| {
        if second.is_some() {
            return;
        }
        let last = recs.last().unwrap();
        let trigger = match first {
            First::CountStep => {
                last.t0 > at && recs.len() > 1 && {
                    // Right after the one-off's interval: the deviation waits now.
                    matches!(last.v, Watch::NoVerdict(Unjudged::Unconfirmed))
                }
            }
            _ => last.t0 > at && last.changed(),
        };
        if trigger {
            let tc = g.t + (gap * period as f64) as u64;
            g.rate_step(tc, size * 1e-9);
            second = Some((tc, size));
        }
    });
    (s, w, o, first, second)
}

fn after_a_report(n: u64, base: u64) -> Tally {
    let mut t = Tally::default();
    for seed in base..base + n {
        let (s, w, o, first, second) = after_a_report_world(seed);
        let g = w.borrow();
        t.common(seed, &o, &g);
        if let Some((tc, d)) = second {
            if let Some((late, thr, kc)) = judge_detection(&o, tc, d, 1.1) {
                t.det_judged += 1;
                // "About the threshold" (up to 2x): a period later allowed, as the docs say.
                let allow = if d.abs() < 2.0 * thr { 1 } else { 0 };
                if late > allow {
                    t.det_late.push((
                        seed,
                        format!(
                            "{} {:?} P {} ms: second change {d:.0} ppb ({:.2}x the docs' threshold {thr:.0}) at check {kc}: {}",
                            s.kind.name,
                            first,
                            s.period / 1_000_000_000,
                            d.abs() / thr,
                            if late == i64::MAX { "never reported".to_string() } else { format!("{} checks late", late) }
                        ),
                    ));
                } else if let Some(k) = (kc..o.recs.len()).find(|&k| o.recs[k].changed()) {
                    t.det_s.push((o.recs[k].t1 - tc) as f64 / PS as f64);
                }
            }
        }
    }
    t
}

// ---------------------------------------------------------------------------------------
// Family 2: sequences of count steps, each under an interval's threshold.

/// How the steps of a `count_steps` world fall.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Steps {
    /// One step, during a check's reads (at a sample).
    OneAtASample,
    /// Two steps the same way in consecutive intervals.
    TwoConsecutive,
    /// Two to four steps, 2–10 periods apart, the same way or alternating.
    Spaced,
    /// One step anywhere in an interval (never drawn: for the finding).
    OneAnywhere,
}

/// The widest `Steady` interval bound of the world `seed` with `s`, run without events for
/// `checks` checks: the interval bound its steps are sized against.
fn quiet_interval_bound(seed: u64, s: &Setup, checks: usize) -> f64 {
    let quiet = Setup { checks, ..*s };
    let w = world(seed, &quiet);
    widest_interval(&run(&quiet, &w, |_, _| {}).recs)
}

fn count_steps_world(seed: u64, only: Option<Steps>) -> (Setup, Shared, Outcome, Steps, String) {
    let mut r = Rng(seed ^ 0x5151);
    let mut s = base_setup(&mut r, 110);
    s.jitter = 0.0;
    s.delay_p = 0.0;
    let p = s.period as f64 / PS as f64;
    let drawn = [Steps::OneAtASample, Steps::TwoConsecutive, Steps::Spaced][r.below(3) as usize];
    let kind = only.unwrap_or(drawn);
    let on_ref = r.below(3) == 0;
    let sign = r.sign();
    let mut at_check = 20 + r.below(30);
    let bound = quiet_interval_bound(seed, &s, at_check as usize);
    let w = world(seed, &s);
    let reads = 4 * (2 * s.kind.c_cost + s.kind.r_cost);
    let (n, same) = match kind {
        Steps::OneAtASample | Steps::OneAnywhere => (1, true),
        Steps::TwoConsecutive => (2, true),
        Steps::Spaced => (2 + r.below(3), r.below(2) == 0),
    };
    let mut desc = format!(
        "{} P {} ms, {:?} {}x {} on the {}:",
        s.kind.name,
        s.period / 1_000_000_000,
        kind,
        n,
        if same { "same-sign" } else { "alternating" },
        if on_ref { "reference" } else { "counter" }
    );
    for i in 0..n {
        let sg = if same || i % 2 == 0 { sign } else { -sign };
        let size = r.range(0.3, 1.8);
        let hook = (at_check + 1) * s.period;
        let at = if kind == Steps::OneAtASample {
            hook + r.below(reads)
        } else {
            hook + (r.unit() * s.period as f64) as u64
        };
        let rel = sg * size * bound * 1e-9 * p;
        if on_ref {
            w.borrow_mut().reference_step(at, rel * s.kind.r_hz as f64);
        } else {
            w.borrow_mut().counter_step(at, rel * s.kind.c_hz);
        }
        desc += &format!(" {:+.2}x at {:.6} s", sg * size, at as f64 / PS as f64);
        at_check += match kind {
            Steps::Spaced => 2 + r.below(9),
            _ => 1,
        };
    }
    let desc = format!("{desc} (x the quiet widest interval bound {bound:.0} ppb)");
    let o = run(&s, &w, |_, _| {});
    trace(seed, &o);
    (s, w, o, kind, desc)
}

fn count_steps(n: u64, base: u64, only: Option<Steps>) -> [Tally; 3] {
    let mut t: [Tally; 3] = Default::default();
    for seed in base..base + n {
        let (_s, w, o, kind, desc) = count_steps_world(seed, only);
        let t = &mut t[kind as usize];
        let g = w.borrow();
        t.common(seed, &o, &g);
        if let Some(k) = o.recs.iter().position(|r| r.changed()) {
            let r = &o.recs[k];
            t.false_c.push((
                seed,
                format!(
                    "{desc}: {} at check {k} ({:.3} s), clock {:.0} ppb off after (bound_ppb {})",
                    r.v,
                    r.t1 as f64 / PS as f64,
                    r.err,
                    r.h.bound_ppb
                ),
            ));
        }
    }
    t
}

// ---------------------------------------------------------------------------------------
// Family 3: real changes under the threshold that a one-off could mimic.

fn slow_change_world(seed: u64) -> (Setup, Shared, Outcome, u64, f64, String) {
    let mut r = Rng(seed ^ 0x3c3c);
    let mut s = base_setup(&mut r, 200);
    s.jitter = 0.0;
    let w = world(seed, &s);
    let p = s.period as f64 / PS as f64;
    let thr = 2.0 * s.kind.interval_ppb(p);
    let d = r.sign() * r.range(0.15, 0.9) * thr;
    let at_check = 20 + r.below(30);
    let hook = (at_check + 1) * s.period;
    let reads = 4 * (2 * s.kind.c_cost + s.kind.r_cost);
    let how = r.below(3);
    let desc;
    let tc;
    if how == 0 {
        tc = hook + r.below(reads);
        w.borrow_mut().rate_step(tc, d * 1e-9);
        desc = format!(
            "step {d:.0} ppb at a sample ({:.6} s)",
            tc as f64 / PS as f64
        );
    } else if how == 1 {
        tc = hook + (r.unit() * s.period as f64) as u64;
        w.borrow_mut().rate_step(tc, d * 1e-9);
        desc = format!("step {d:.0} ppb at {:.6} s", tc as f64 / PS as f64);
    } else {
        tc = hook + (r.unit() * s.period as f64) as u64;
        let dur = (r.range(0.5, 3.0) * s.period as f64) as u64;
        w.borrow_mut().ramp(tc, dur, d * 1e-9);
        desc = format!(
            "ramp to {d:.0} ppb over {:.2} s from {:.6} s",
            dur as f64 / PS as f64,
            tc as f64 / PS as f64
        );
    }
    let desc = format!(
        "{} P {} ms, threshold ~{thr:.0}: {desc}",
        s.kind.name,
        s.period / 1_000_000_000
    );
    let o = run(&s, &w, |_, _| {});
    trace(seed, &o);
    (s, w, o, tc, d, desc)
}

fn slow_changes(n: u64, base: u64) -> Tally {
    let mut t = Tally::default();
    for seed in base..base + n {
        let (_s, w, o, tc, _d, desc) = slow_change_world(seed);
        let g = w.borrow();
        t.common(seed, &o, &g);
        match o.recs.iter().position(|r| r.changed() && r.t1 > tc) {
            Some(k) => t.det_s.push((o.recs[k].t1 - tc) as f64 / PS as f64),
            None => t.note.push((seed, format!("{desc}: never reported"))),
        }
        if let Some(k) = o.recs.iter().position(|r| r.changed() && r.t1 <= tc) {
            t.false_c.push((
                seed,
                format!("{desc}: {} at check {k} before it", o.recs[k].v),
            ));
        }
    }
    t
}

// ---------------------------------------------------------------------------------------
// Family 4: starts far off under an honest bound; refinement's slew.

fn far_off_world(seed: u64) -> (Setup, Shared, Outcome) {
    let mut r = Rng(seed ^ 0x9e9e);
    let mut s = base_setup(&mut r, 120);
    let off = r.sign() * [2e6, 1e7, 3e7, 8e7][r.below(4) as usize] * r.range(0.5, 1.0);
    s.start_off_ppb = off;
    s.start_bound_ppb = (off.abs() * r.range(1.02, 1.5)) as u64;
    s.slew = Some([0, 1_000, 100_000, u64::MAX][r.below(4) as usize]);
    let w = world(seed, &s);
    let o = run(&s, &w, |_, _| {});
    trace(seed, &o);
    (s, w, o)
}

fn far_off(n: u64, base: u64) -> Tally {
    let mut t = Tally::default();
    for seed in base..base + n {
        let (s, w, o) = far_off_world(seed);
        let g = w.borrow();
        t.common(seed, &o, &g);
        if let Some(k) = o.recs.iter().position(|r| r.changed()) {
            t.false_c.push((
                seed,
                format!(
                    "{} start {:.0} ppb off under {}: {} at check {k}",
                    s.kind.name, s.start_off_ppb, s.start_bound_ppb, o.recs[k].v
                ),
            ));
        }
        if s.slew == Some(u64::MAX) {
            // Refinement converges within about w/T (and the steps over T).
            let last = o.recs.last().unwrap();
            let tt = last.t1 as f64 / PS as f64;
            let w_s = (2 * s.kind.c_cost + s.kind.r_cost) as f64 / PS as f64;
            let q = (1.0 / s.kind.c_hz).max(s.kind.c_cost as f64 / PS as f64)
                + (1.0 / s.kind.r_hz as f64).max(s.kind.r_cost as f64 / PS as f64);
            let lim = 4.0 * (w_s + 2.0 * q) / tt * 1e9 + slack(last.truth_mhz);
            if last.err.abs() > lim {
                t.note.push((
                    seed,
                    format!(
                        "{} slew MAX: error {:.0} ppb after {tt:.0} s, over 4 (w + 2q)/T = {lim:.0}",
                        s.kind.name, last.err
                    ),
                ));
            }
        }
    }
    t
}

fn assert_held(t: &Tally, parts: &[&str]) {
    for p in parts {
        let v = match *p {
            "inv" => &t.inv,
            "bound" => &t.bound_breaks,
            "own" => &t.own_rate,
            "floor" => &t.floor_breaks,
            "det" => &t.det_late,
            "false" => &t.false_c,
            "faults" => &t.faults,
            "note" => &t.note,
            _ => unreachable!(),
        };
        assert!(
            v.is_empty(),
            "{p}: {} broke, first {:?}",
            v.len(),
            v.first()
        );
    }
}

#[test]
fn a_change_right_after_a_report_is_reported_within_the_docs_threshold() {
    let t = after_a_report(seeds() * 4, 1_000);
    t.print("after_a_report");
    assert_held(
        &t,
        &["inv", "bound", "own", "floor", "det", "false", "faults"],
    );
}

#[test]
fn count_steps_keep_the_promises() {
    // What held there: promises, counts, slew, no counter fault, the moving floor. The (c)
    // and the bound are findings (below).
    let t = count_steps(seeds() * 6, 2_000, None);
    for (t, name) in t
        .iter()
        .zip(["one step at a sample", "two consecutive", "spaced"])
    {
        t.print(name);
        assert_held(t, &["inv", "floor", "faults"]);
    }
}

#[test]
fn real_changes_a_one_off_could_mimic_are_reported() {
    let t = slow_changes(seeds() * 4, 3_000);
    t.print("slow_changes");
    assert_held(
        &t,
        &["inv", "bound", "own", "floor", "false", "faults", "note"],
    );
}

#[test]
fn far_off_starts_keep_the_bound_and_the_slew() {
    let t = far_off(seeds() * 4, 4_000);
    t.print("far_off");
    assert_held(&t, &["inv", "bound", "own", "floor", "faults", "note"]);
    // (c) only where the finding below says: slow, under a bound below off/(1 - off).
    for &(seed, _) in &t.false_c {
        let (s, _w, _o) = far_off_world(seed);
        let off = -s.start_off_ppb * 1e-9;
        assert!(
            off > 0.0 && (s.start_bound_ppb as f64) < off / (1.0 - off) * 1e9,
            "seed {seed}: a false (c) outside the finding"
        );
    }
}

// ---------------------------------------------------------------------------------------
// Family 5: a second change while the first waits or extends an interval.

/// A change of 0.4–1.3× the threshold (`2·` the quiet widest interval bound), then a second
/// of ±0.5–6× it 0.2–3 periods later. Returns the second (time, ppb) and the net (ppb).
fn extended_world(seed: u64) -> (Setup, Shared, Outcome, (u64, f64), f64, String) {
    let mut r = Rng(seed ^ 0xe7e7);
    let mut s = base_setup(&mut r, 60);
    s.delay_p = 0.0;
    let at_check = 15 + r.below(15);
    let thr = 2.0 * quiet_interval_bound(seed, &s, at_check as usize);
    let w = world(seed, &s);
    let t1 = (at_check + 1) * s.period + (r.unit() * s.period as f64) as u64;
    let d1 = r.sign() * r.range(0.4, 1.3) * thr;
    let t2 = t1 + (r.range(0.2, 3.0) * s.period as f64) as u64;
    let d2 = r.sign() * r.range(0.5, 6.0) * thr;
    w.borrow_mut().rate_step(t1, d1 * 1e-9);
    w.borrow_mut().rate_step(t2, d2 * 1e-9);
    let desc = format!(
        "{} P {} ms, threshold {thr:.0}: {d1:+.0} ppb at {:.6} s, {d2:+.0} more at {:.6} s",
        s.kind.name,
        s.period / 1_000_000_000,
        t1 as f64 / PS as f64,
        t2 as f64 / PS as f64
    );
    let o = run(&s, &w, |_, _| {});
    trace(seed, &o);
    let net = ((1.0 + d1 * 1e-9) * (1.0 + d2 * 1e-9) - 1.0) * 1e9;
    (s, w, o, (t2, d2), net, desc)
}

fn extended(n: u64, base: u64) -> Tally {
    let mut t = Tally::default();
    for seed in base..base + n {
        let (_s, w, o, (t2, d2), net, desc) = extended_world(seed);
        let g = w.borrow();
        t.common(seed, &o, &g);
        let a = judge_detection(&o, t2, d2, 1.1);
        let b = judge_detection(&o, t2, net, 1.1);
        if let (Some((late, thr, kc)), Some(_)) = (a, b) {
            t.det_judged += 1;
            let allow = if d2.abs().min(net.abs()) < 2.0 * thr {
                1
            } else {
                0
            };
            if late > allow {
                t.det_late.push((
                    seed,
                    format!(
                        "{desc}: the second ({:.2}x the docs' threshold {thr:.0}, net {net:.0}) from check {kc}: {}",
                        d2.abs() / thr,
                        if late == i64::MAX { "never reported".to_string() } else { format!("{late} checks late") }
                    ),
                ));
            } else if let Some(k) = (kc..o.recs.len()).find(|&k| o.recs[k].changed()) {
                t.det_s.push((o.recs[k].t1 - t2) as f64 / PS as f64);
            }
        }
    }
    t
}

#[test]
fn a_second_change_while_the_first_waits_is_reported() {
    let t = extended(seeds() * 4, 5_000);
    t.print("extended");
    assert_held(&t, &["inv", "bound", "floor", "det", "false", "faults"]);
    // Its rate within its own bound: seed 5389 is the finding below.
    assert!(
        t.own_rate.iter().all(|(seed, _)| *seed == 5389),
        "{:?}",
        t.own_rate
    );
}

// ---------------------------------------------------------------------------------------
// Findings.

/// The worlds of `count_steps` drawn with `kind` among the first `n` seeds from `base`.
fn count_step_seeds(kind: Steps, n: u64, base: u64) -> Vec<u64> {
    (base..base + n)
        .filter(|&seed| {
            let mut r = Rng(seed ^ 0x5151);
            let _ = base_setup(&mut r, 110);
            [Steps::OneAtASample, Steps::TwoConsecutive, Steps::Spaced][r.below(3) as usize] == kind
        })
        .collect()
}

fn false_changes(kind: Steps, seeds: &[u64]) -> Vec<String> {
    let mut bad = Vec::new();
    for &seed in seeds {
        let (_s, _w, o, _k, desc) = count_steps_world(seed, Some(kind));
        if let Some(k) = o.recs.iter().position(|r| r.changed()) {
            let r = &o.recs[k];
            bad.push(format!(
                "seed {seed}: {desc}: {} at check {k}, clock {:.0} ppb off after (bound_ppb {})",
                r.v, r.err, r.h.bound_ppb
            ));
        }
    }
    bad
}

#[test]
#[ignore = "finding: \"nor is a step of a count under an interval's threshold [(c)]\": two such steps in consecutive intervals are (c) at constant rates; seed 2161 (1 GHz vs HPET, P 0.25 s, counter -1.31 and -1.02 us at 9.454 and 9.733 s, each under the narrowest interval bound, 5 394 ppb): (c) 1 313 ppb off; up to 7 436 ppb off (seed 2014); 100 of 201 worlds at 100 seeds, 285 of 598 at 300"]
fn two_count_steps_in_consecutive_intervals_are_no_change() {
    // Seed 2002: 1 GHz vs HPET, P 1 s, counter steps of +0.99x and +1.22x an interval's
    // bound (1 752 ppb: 1.7 and 2.1 us) at 27.24 s and 28.78 s: Changed at 29 s, 2 351 ppb off.
    let mut list = vec![2002, 2014, 2161];
    list.extend(count_step_seeds(Steps::TwoConsecutive, 6 * seeds(), 2_000));
    list.sort_unstable();
    list.dedup();
    let bad = false_changes(Steps::TwoConsecutive, &list);
    assert!(
        bad.is_empty(),
        "{} of {}: {:#?}",
        bad.len(),
        list.len(),
        &bad[..bad.len().min(4)]
    );
}

#[test]
#[ignore = "finding: \"nor is a step of a count under an interval's threshold [(c)]\": 2-4 such steps 2-10 periods apart, the same way or alternating, are (c) (seed 2077: 2 374 ppb off at constant rates); 27 of 205 worlds at 100 seeds, 91 of 611 at 300"]
fn count_steps_periods_apart_are_no_change() {
    let mut list = vec![2077, 2034];
    list.extend(count_step_seeds(Steps::Spaced, 6 * seeds(), 2_000));
    list.sort_unstable();
    list.dedup();
    let bad = false_changes(Steps::Spaced, &list);
    assert!(
        bad.is_empty(),
        "{} of {}: {:#?}",
        bad.len(),
        list.len(),
        &bad[..bad.len().min(4)]
    );
}

#[test]
#[ignore = "finding: \"nor is, as a rule, a step of a count under an interval's threshold [(c)]\": one step of the counter's or the reference's count, 0.6-1.4x an interval's bound, is (c) 1-40 s later at constant rates; 12 of 8 004 worlds at 100 seeds (24 of 24 004 at 300; 20 and 59 before the older-part rule): seed 2935 (24 MHz vs ACPI PM, P 0.25 s, counter -0.75x at 6.463 s: Changed at check 101, 104 ppb off), a step about a bracket wide the samples either side do not show; seeds 10558 and 13577 by the window against the clock's rate"]
fn one_count_step_is_no_change() {
    let mut bad = Vec::new();
    let mut worlds = 0;
    for kind in [Steps::OneAnywhere, Steps::OneAtASample] {
        let mut list = vec![10_093, 2_935, 3_216];
        list.extend(10_000..10_000 + 40 * seeds());
        list.sort_unstable();
        list.dedup();
        worlds += list.len();
        bad.extend(false_changes(kind, &list));
    }
    assert!(
        bad.is_empty(),
        "{} of {worlds}: {:#?}",
        bad.len(),
        &bad[..bad.len().min(4)]
    );
}

#[test]
#[ignore = "finding: \"one whose offset still fits one line ... can leave the bound a little under the clock's error\" (up to 1.15x): after 2-4 count steps periods apart, three samples on, up to 1.49x (seed 2027: 349 ppb off under 232); beyond 1.15x in 5 of 205 worlds at 100 seeds, 14 of 611 at 300 (up to 1.59x)"]
fn count_steps_periods_apart_leave_bound_ppb_above_the_error() {
    let mut list = vec![2027, 2300];
    list.extend(count_step_seeds(Steps::Spaced, 6 * seeds(), 2_000));
    list.sort_unstable();
    list.dedup();
    let mut bad = Vec::new();
    for &seed in &list {
        let (_s, w, o, _k, desc) = count_steps_world(seed, Some(Steps::Spaced));
        let (_j, worst, first) = judge_bound(&o, &w.borrow());
        if worst > 1.15 {
            bad.push(format!("seed {seed}: {desc}: {first:?} ({worst:.2}x)"));
        }
    }
    assert!(
        bad.is_empty(),
        "{} of {}: {:#?}",
        bad.len(),
        list.len(),
        &bad[..bad.len().min(4)]
    );
}

/// A clock started `off` (ppb; negative: slow) under `bound` ppb: the checks' verdicts.
fn started_off(kind: Kind, off: f64, bound: u64, checks: usize) -> Outcome {
    let s = Setup {
        kind,
        period: PS / 2,
        checks,
        start_off_ppb: off,
        start_bound_ppb: bound,
        slew: None,
        delay_p: 0.0,
        delay_max: 0,
        jitter: 0.0,
    };
    let w = world(7, &s);
    run(&s, &w, |_, _| {})
}

#[test]
/// Found (fixed since): "every distance of the clock's rate from a measured one is taken so
/// [in ppb of the counter's rate]": a clock started slow by `off` under an honest bound below
/// `off/(1 − off)` was `Unconfirmed` at the first check and (c) at the second (the first
/// interval's distance from the start's baseline was taken in ppb of the clock's rate):
/// −0.5 % under 0.502 %, −1 % under 1.0005 %, −5 % under 5.2 %; 21 of 1 200 `far_off` worlds
/// at 300 seeds (10 of 400 at 100), all slow, 4.4–7.6 % under 1.02–1.05×. Since, the
/// interval's distance from the baseline is taken in ppb of the interval's rate against both
/// bounds widened by `1/(1 − the baseline's bound)`: no (c) in these worlds, 0 of 1 200 in
/// `far_off` (`BARETIME_ADV_SEEDS=300 cargo test --release -p baretime --features std --test
/// adversary_watchdog5 -- --nocapture`).
fn a_clock_started_far_slow_under_an_honest_bound_is_no_change() {
    let mut bad = Vec::new();
    for kind in [KINDS[0], KINDS[3]] {
        // Slow by `off` under `bound`: off/(1 - off) is 0.50251 % and 1.001001 %.
        for (off, bound) in [
            (-5_000_000.0, 5_020_000u64),
            (-10_000_000.0, 10_005_000),
            (-50_000_000.0, 52_000_000),
        ] {
            let o = started_off(kind, off, bound, 12);
            let rep: Vec<String> = o
                .recs
                .iter()
                .enumerate()
                .filter(|(_, r)| {
                    r.changed() || matches!(r.v, Watch::NoVerdict(Unjudged::Unconfirmed))
                })
                .map(|(k, r)| format!("check {k}: {}", r.v))
                .collect();
            if o.recs.iter().any(|r| r.changed()) {
                bad.push(format!(
                    "{} start {off:+.0} ppb under {bound}: {rep:?}",
                    kind.name
                ));
            }
        }
        // Controls, printed: the same offsets under bounds above off/(1 - off), and fast.
        for (off, bound) in [
            (-5_000_000.0, 5_030_000u64),
            (-10_000_000.0, 10_150_000),
            (5_000_000.0, 5_020_000),
            (50_000_000.0, 52_000_000),
        ] {
            let o = started_off(kind, off, bound, 12);
            let c = o.recs.iter().filter(|r| r.changed()).count();
            println!(
                "control {} start {off:+.0} ppb under {bound}: {c} (c)",
                kind.name
            );
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

#[test]
/// Found (fixed since): "a report never sets the extended interval's mixed rate": an
/// interval extended over an excursion's tail was reported at its mixed rate, outside its own
/// bound, the truth one rate over its newest part (which agreed with the mix within its own
/// wide bound): seed 6477 (1 GHz vs HPET, P 0.25 s, −23 008 ppb for 168 ms across a check,
/// net −692): `Changed` 4 155 ppb off under its own 2 457; seeds 6432 (234 under 182), 6569
/// (1 597 under 1 209) and 5389 of `a_second_change_...` (1 087 under 967). Since, a report
/// after an extended interval sets its newest part's rate and bound (the part wholly after
/// any move inside it): own rate broken in 0 of 1 200 in both families at 300 seeds.
fn a_report_after_an_extended_interval_sets_no_mixed_rate() {
    let mut bad = Vec::new();
    let (_s, w, o, _second, _net, desc) = extended_world(5389);
    for b in judge_changed_rates(&o, &w.borrow()) {
        bad.push(format!("seed 5389: {desc}: {b}"));
    }
    for seed in [6432, 6477, 6569] {
        let (_s, w, o, desc) = straddle_world(seed);
        for b in judge_changed_rates(&o, &w.borrow()) {
            bad.push(format!("seed {seed}: {desc}: {b}"));
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

/// `ATK5_TRACE=<seed>` prints a world's checks.
fn trace(seed: u64, o: &Outcome) {
    if std::env::var("ATK5_TRACE")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        != Some(seed)
    {
        return;
    }
    for (k, r) in o.recs.iter().enumerate() {
        println!(
            "{k:4} {:10.6} s {:<40} bound {:7} err {:9.1} window {}",
            r.t1 as f64 / PS as f64,
            format!("{}", r.v),
            r.h.bound_ppb,
            r.err,
            r.h.window_ticks
        );
    }
}

/// Checks after a report at which the moving floor is judged (`ATK5_FLOOR_SPAN`, default 7:
/// a move reported by two intervals is seen over a period at least, and lasts eight).
fn floor_span() -> usize {
    std::env::var("ATK5_FLOOR_SPAN")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(7)
}

// ---------------------------------------------------------------------------------------
// Family 6: an excursion that straddles a check and leaves a small net change.

/// A step of ±1–3× the threshold, then back to within ±0.05–0.5× it 0.3–1.2 periods later.
fn straddle_world(seed: u64) -> (Setup, Shared, Outcome, String) {
    let mut r = Rng(seed ^ 0x0d0d);
    let mut s = base_setup(&mut r, 60);
    s.delay_p = 0.0;
    let at_check = 15 + r.below(15);
    let thr = 2.0 * quiet_interval_bound(seed, &s, at_check as usize);
    let w = world(seed, &s);
    let t1 = (at_check + 1) * s.period + (r.unit() * s.period as f64) as u64;
    let d1 = r.sign() * r.range(1.0, 3.0) * thr;
    let net = r.sign() * r.range(0.05, 0.5) * thr;
    let t2 = t1 + (r.range(0.3, 1.2) * s.period as f64) as u64;
    let d2 = ((1.0 + net * 1e-9) / (1.0 + d1 * 1e-9) - 1.0) * 1e9;
    w.borrow_mut().rate_step(t1, d1 * 1e-9);
    w.borrow_mut().rate_step(t2, d2 * 1e-9);
    let desc = format!(
        "{} P {} ms, threshold {thr:.0}: {d1:+.0} ppb at {:.6} s, back to {net:+.0} at {:.6} s",
        s.kind.name,
        s.period / 1_000_000_000,
        t1 as f64 / PS as f64,
        t2 as f64 / PS as f64
    );
    let o = run(&s, &w, |_, _| {});
    trace(seed, &o);
    (s, w, o, desc)
}

fn straddles(n: u64, base: u64) -> Tally {
    let mut t = Tally::default();
    for seed in base..base + n {
        let (_s, w, o, desc) = straddle_world(seed);
        let g = w.borrow();
        t.common(seed, &o, &g);
        if let Some(i) = t.own_rate.iter().position(|(s, _)| *s == seed) {
            t.own_rate[i].1 = format!("{desc}: {}", t.own_rate[i].1);
        }
    }
    t
}

#[test]
fn an_excursion_across_a_check_keeps_the_bound() {
    let t = straddles(seeds() * 4, 6_000);
    t.print("straddles");
    assert_held(&t, &["inv", "bound", "floor", "false", "faults"]);
    // Its rate within its own bound: seeds 6432, 6477, 6569 are the finding below.
    assert!(
        t.own_rate
            .iter()
            .all(|(seed, _)| [6432, 6477, 6569].contains(seed)),
        "{:?}",
        t.own_rate
    );
}

// ---------------------------------------------------------------------------------------
// Family 8 (time left): `SecondsEdge::measure` against a scripted RTC.

/// One `measure` against an RTC whose seconds change at `phase` + k s (true time), polled
/// at `r_cost` ps a read (latched uniformly inside), a share `irq` of polls delayed up to
/// 50 µs before or after the latch; the clock on a 1 GHz counter (5 ns reads) at its exact
/// rate. Returns the breaks of the docs' sentences.
fn edge_world(seed: u64, kinds: &mut [u64; 3]) -> Vec<String> {
    use baretime::{FnCounter, SecondsEdge, MARK_GRANULE_NS};
    use std::cell::Cell;
    let mut r = Rng(seed ^ 0xed9e);
    let t = Cell::new(r.below(1_000) * PS / 1_000);
    let rng = RefCell::new(Rng(seed ^ 0x1234));
    let counter = FnCounter::new(
        || {
            let l = t.get();
            t.set(l + 5_000);
            l / 1_000
        },
        64,
    );
    let clock = Clock::new(&counter, Frequency::exact_hz(1_000_000_000).unwrap());
    // The clock's time at true time `x`: its reading at a known latch, plus the ticks since.
    let t_latch = t.get();
    let n0 = clock.now().as_nanos() as i128;
    let clock_at = |x: u64| n0 + (x / 1_000) as i128 - (t_latch / 1_000) as i128;
    let phase = r.below(PS);
    let base = 1_700_000_000 + r.below(1_000_000);
    let r_cost = 5_000_000 + r.below(25_000_000);
    let irq = [0.0, 0.01, 0.2][r.below(3) as usize];
    let max_polls = [1u32, 7, 1_000, 100_000, u32::MAX][r.below(5) as usize];
    // Start the wait 0–1 s before an edge; a quarter of the RTCs are stuck (no edge).
    let lead = r.below(PS);
    let stuck = r.below(4) == 0;
    let now = t.get();
    let next_edge = |x: u64| {
        let k = (x.saturating_sub(phase)) / PS + u64::from(x >= phase);
        phase + k * PS
    };
    let start = next_edge(now + lead + PS) - lead;
    t.set(start);
    let polls = Cell::new(0u64);
    let last_poll_cost = Cell::new(0u64);
    let read = || {
        polls.set(polls.get() + 1);
        let mut g = rng.borrow_mut();
        let mut before = g.below(r_cost + 1);
        let mut after = r_cost - before;
        if g.unit() < irq {
            let d = g.below(50_000_000);
            if g.next() & 1 == 0 {
                before += d;
            } else {
                after += d;
            }
        }
        last_poll_cost.set(before + after);
        let l = t.get() + before;
        t.set(l + after);
        let secs = if l >= phase { (l - phase) / PS + 1 } else { 0 };
        Some(if stuck { base } else { base + secs })
    };
    let call_t = t.get();
    let call_clock = clock_at(call_t);
    let first_value = base
        + if call_t >= phase {
            (call_t - phase) / PS + 1
        } else {
            0
        };
    let e = SecondsEdge::measure(&clock, max_polls, read);
    let end_t = t.get();
    let edge_t = next_edge(call_t);
    let slack = MARK_GRANULE_NS as i128 + 2;
    let mut bad = Vec::new();
    let desc = format!(
        "seed {seed}: edge {:.6} s after the call (stuck {stuck}), polls of {:.1} us, irq {irq}, max_polls {max_polls}",
        (edge_t - call_t) as f64 / PS as f64,
        r_cost as f64 / 1e6
    );
    if polls.get() > u64::from(max_polls) {
        bad.push(format!("{desc}: {} polls", polls.get()));
    }
    let by_polls = polls.get() >= u64::from(max_polls);
    kinds[match (e.is_some(), by_polls) {
        (true, _) => 0,
        (false, false) => 1,
        (false, true) => 2,
    }] += 1;
    match e {
        Some(e) => {
            let at = clock_at(edge_t);
            // The first new value read may be a later second only if a poll took a second.
            if e.unix_seconds != first_value + 1 {
                bad.push(format!(
                    "{desc}: unix_seconds {} for {}",
                    e.unix_seconds,
                    first_value + 1
                ));
            }
            if (e.before.as_nanos() as i128) > at + slack
                || (e.after.as_nanos() as i128) < at - slack
            {
                bad.push(format!(
                    "{desc}: edge at clock {at} ns outside [{}, {}]",
                    e.before.as_nanos(),
                    e.after.as_nanos()
                ));
            }
            if e.width_ns() != e.after.as_nanos() - e.before.as_nanos() {
                bad.push(format!("{desc}: width_ns {}", e.width_ns()));
            }
        }
        None => {
            // None only after max_polls polls, or at the first poll past 1.2 s of clock time.
            let waited = clock_at(end_t) - call_clock;
            let by_polls = polls.get() >= u64::from(max_polls);
            if !by_polls && waited < 1_200_000_000 {
                bad.push(format!(
                    "{desc}: None after {waited} ns and {} polls",
                    polls.get()
                ));
            }
            if !by_polls
                && waited > 1_200_000_000 + 2 * (last_poll_cost.get() / 1_000 + 50_000) as i128
            {
                bad.push(format!(
                    "{desc}: None after {waited} ns, past 1.2 s by more than a poll"
                ));
            }
            // The value changed inside the wait (the poll after the edge came before 1.2 s).
            if !by_polls && !stuck && clock_at(edge_t) + 100_000 < call_clock + 1_200_000_000 {
                bad.push(format!("{desc}: None though the value changed"));
            }
        }
    }
    bad
}

#[test]
fn seconds_edges_bracket_the_edge() {
    let mut bad = Vec::new();
    let n = seeds() * 10;
    let mut kinds = [0u64; 3];
    for seed in 0..n {
        bad.extend(edge_world(seed, &mut kinds));
    }
    println!(
        "seconds_edges: {n} waits ({} Some, {} None at 1.2 s, {} None at max_polls), {} broken: {:?}",
        kinds[0],
        kinds[1],
        kinds[2],
        bad.len(),
        bad.first()
    );
    assert!(
        bad.is_empty(),
        "{} of {n}: {:#?}",
        bad.len(),
        &bad[..bad.len().min(4)]
    );
}
