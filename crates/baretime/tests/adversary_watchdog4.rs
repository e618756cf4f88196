//! Round-4 outside attack on [`Watchdog`] (issue 28), written from its rustdoc, the README's
//! watchdog section and the public API alone (not its function bodies nor the other tests'
//! code), aimed at the rules added last: a report that waits for an interval wholly after
//! the change, a move against the pace as a new change, the pace `bound_ppb` carries across
//! reports (lapsing after eight spans, capped at four times the newest fit's bound), the
//! floor after four `WideBracket` checks, `Unjudged::TooLong`, refinement's slew limit.
//!
//! Every world is scripted here: true time in picoseconds; a counter and a reference whose
//! counts are integrals of piecewise rates (steps, ramps, stops, reversals, resumptions,
//! excursions inside one interval), floored and masked to their widths; every read costs
//! scripted time (with jitter), the reference's latching uniformly inside its read, some
//! delayed before or after the latch; reference read paths that slow down and speed up again;
//! hooks at a steady period or drawn from 0.1–10× it. After every check `run` judges what the
//! docs state: health's counts against the verdicts; promise 1 (never back) and 2 (no jump
//! beyond the ticks the check took at the slower rate in force + `MARK_GRANULE_NS` + 20 µs +
//! a tick); the clock's rate moved only by (c) or by a steady check's steer within the slew
//! (each counted in `steers`, none at slew 0); `WideBracket` and `TooLong` leaving the rate
//! and `bound_ppb` as they were; `TooLong` where `bound_ppb` over the interval reaches half a
//! wrap of the narrow count, never where it stays under a quarter (*Widths*); no (c) or (d) at
//! constant rates; `|clock − counter rate as the reference counts it| ≤ bound_ppb` at every
//! check where every change has been seen (a `Changed` at a check whose interval is wholly
//! after it; an excursion that came back, three accepted samples on with no `Changed`); and
//! a `Changed`'s rate within its own bound where the truth was constant over its interval.
//! The families add detection times (within three checks above twice an interval's bound —
//! the docs' threshold, computed here from the widest bracket the world makes — four at
//! 1.02–2×, plus one per `WideBracket` check).
//!
//! Seeds: `BARETIME_ADV_SEEDS` (default 8: the default run takes under 0.1 s in a debug build);
//! the figures below are from `BARETIME_ADV_SEEDS=100` (and 300 where said), release, on a
//! 2-vCPU Intel Xeon KVM guest (family 6 model 167): `BARETIME_ADV_SEEDS=100 cargo test
//! --release -p baretime --features std --test adversary_watchdog4 -- --include-ignored
//! --nocapture` (about 1 s of tests). `ATK4_TRACE=<seed>` prints a world's checks.
//!
//! Held (every world; families × worlds at 100 seeds):
//!
//! | family | worlds (checks) | what held |
//! | --- | --- | --- |
//! | `near_threshold_steps`: steps 0.8–4× the threshold, 32 kHz–5 GHz (and 24/32-bit counters at P 0.25 s) vs HPET, HPET32, ACPI PM, 10 MHz, pvclock, and vs 32 kHz RTC, PIT, 1 kHz tick at P 1–4 s | 900 (36 000) | every change reported (p50 1.58 s, max 12.4 s), within 3 checks at ≥ 2×, 4 at 1.02–2× the threshold of the *learnt* steps (the docs' *Detection time*, from the verdicts: twice the widest bound a steady verdict carried in the ten checks before the change, the baseline's bound left out, stricter than the docs; the worlds are drawn against a one-tick threshold, and 667 of 900 are held to a limit, 1 988 of 2 700 at 300); each report at a check whose interval is wholly after the change; its rate within its own bound; `bound_ppb` from it on; promises, slew, counts (at 300: 0 of 2 700 late; 1 before the limit followed the learnt steps, seed 2762: a change under the threshold they give, below) |
//! | `two_changes_within_one_period`: two steps 0.5–20× the threshold, either sign, in one interval | 800 (32 000) | the net change reported within 3 checks where ≥ 2×, at a check wholly after both; its rate and `bound_ppb` from it on |
//! | `a_change_during_the_wait`: 0.3–0.9× the threshold (seen by the split, whose report waits), then 0.3–10× more 1–40 periods later | 800 (112 000) | `bound_ppb` and each report's own bound; the second reported within 3 checks where it and the net are ≥ 2× (p50 0.84 s, max 2.27 s; 2.86 s before the fixes below) (at 300: 2 400 worlds, 0 break, p50 0.83 s, max 2.70 s; 8 broke before) |
//! | `a_step_against_the_pace`: a ramp of ±30–1 000 ppb/s, then a step of 2.5–10× the threshold against it, after the ramp stopped or while it goes on | 800 (144 120) | a step after the stop reported within 3 checks; `bound_ppb` from each report on while the rate stands; promises, slew, counts. Counted apart: 0 worlds beyond the bound while the first ramp moved (the open steady-ramp finding), 0 right after a stop (1 before 61b14e0/ee33eb2; 0 of 2 400 at 300), 0 of 395 after a step the ramp went on from (7 before the hidden ramp's term, each a ramp whose bend never showed before the step; 30 before 6f45abf, 149 before 61b14e0/ee33eb2, 27 before the one-off rule; at 300: 0 of 1 214, 29, 93, 474 and 79; below; with `ATK4_SLOW_RAMPS=1`, ramps of ±5–20 ppb/s, too slow to show in a window as long as the one before the step: 58 of 395, up to 3.4×, 144, up to 2.7×, before; at 300, 179 of 1 214, 469 before: ramps not yet seen, as `bound_ppb` now says), and 33 of 395 such steps reported after more than 3 checks (33 before 6f45abf) (34 before the one-off rule; as seed 17004: a step 0.14 s after a report of the ramp, 9 checks: the mechanism of `a_change_right_after_a_report_...`) |
//! | `a_change_where_the_window_has_no_span`: +0.1 % in the first 0–6 intervals, +0.1 % more 3 checks later | 400 | both reported within 3 checks, every judgement |
//! | `ramps_that_stop_or_reverse`: ±2–5 000 ppb/s for 3–41 s, then a stop (steady for the rest of 240 s: far past eight spans of the pace carried), a reversal (then a stop), or a stop and the same pace 20–100 s later | 600 (216 000) | `bound_ppb` at every check while the rate stands after a report, and after a reversal's report; promises, slew, counts (a move too small to be reported in 240 s leaves the bound unjudged after it). While a ramp moves: 0 of 200 single ramps beyond the bound, 1 of 200 reversed (first ramp, 1.11×: `tests/adversary_watchdog3.rs`'s open steady-ramp finding), 0 of 200 resumed (2 before 61b14e0/ee33eb2; at 300: 0, 1 and 0 of 600, the resumed 17 before). Detection p50 4.76 s, max 198 s (4.61 s before the one-off rule: a ramp's first move is reported a little later) |
//! | `wide_runs_with_changes_inside`: reads 20–200 µs for 3, 4, 5, 6 or 12 checks, then 0.05–1 µs again; a step of 2.5× the slow threshold or 0.1 % before or inside the run, or none | 800 (40 000) | the first three slow checks `WideBracket` and no change to the rate or bound; the fourth judged against the floor (as the docs now say); no alarm at constant rates; the change reported within 3 checks + one per `WideBracket` (p50 2.23 s, max 9.95 s); `bound_ppb` from the report on (2 400 `WideBracket`: three per run) |
//! | `irregular_hooks_at_constant_rates`: hooks 0.1–10× P (0.1–1 s), 1 kHz–5 GHz counters, every reference kind (HPET 64/32, ACPI PM 24/32, PIT, 32 kHz RTC, 10 MHz, 1 kHz tick, pvclock), references ±50 ppm off under a stated 100 ppm, starts ≤ 2 ppm off under 3 ppm, 0, 5 or 20 % of reads delayed ≤ 20 µs or 1 ms | 800 (48 000) | no (c) or (d), `bound_ppb` at every check (worst 0.97 of it), promises, counts (2 116 `TooShort`, 24 `WideBracket`) |
//! | `irregular_hooks_with_a_change`: the same hooks, ±0.01–1 % | 800 (48 000) | reported in every world within 3 accepted intervals + the short ones (p50 1.26 s, max 7.4 s); the bound from the report on |
//! | `long_gaps_against_narrow_references`: PIT, ACPI PM 24/32, HPET32; rate known to 0.1–10 ppm; one gap 0.5–3× the docs' quarter-wrap limit (≤ 60 days); a ±2 ppm–0.1 % change in a third of the gaps | 800 (29 616) | `TooLong` exactly where the *Widths* conditions say (123), never under a quarter wrap; each leaves the rate and `bound_ppb`; the next check judged; a judged gap (up to 60 days under a 24-bit ACPI PM timer) aliases nothing: `bound_ppb` and no alarm; a change beyond twice the threshold in a gap reported within 4 checks, in a `TooLong` one too (`ATK4_GAP_DETECT=1`: 142 such changes, 17 in a `TooLong` gap, all late before, below; at 300: 437 and 48) |
//! | `wild_gaps_against_narrow_references`: hooks 0.1–10 P apart, one in eight up to 10⁵ P (14 h), PIT / ACPI PM 24/32 / HPET32, 24 MHz–3 GHz, rate known to 0.1–10 ppm, constant rates | 800 (48 000) | `TooLong` exactly where *Widths* says (14), no alarm, `bound_ppb` at every check (worst 0.999), promises, counts (at 300: 2 400 worlds, 54 `TooLong`, the same) |
//! | `a_pit_start_bound_around_2_7_percent` | 4 | start bound 2 % / 2.6 %: judged; 2.9 % / 4 %: `TooLong` at every check (the docs' 2.7 %) |
//! | `slew_limits_from_far_off`: starts 0.1–100 ppm off under 1–4× that, slews 0, 1, 7, 100, 1 000, 50 000, `u64::MAX` ppb, every reference kind, P 0.25–2 s | 800 (64 000) | every steer within the slew, none at 0, `steers` counts them; `bound_ppb` at every check; no (c). With `ATK4_OFFS=200000`, `1000000`, `5000000` (starts up to 0.5 % off): 0 of 800 each (51, 218 and 298 before: false (c) from about 110 ppm slow, and at 0.4 % fast `bound_ppb` 157 ppb short; `a_clock_started_far_off_...`, fixed since) |
//! | `a_step_of_the_count_is_never_a_change` (found, fixed since): a step of the counter's count 0.2–3× an interval's bound, rate unchanged, after 20–80 steady checks | 2 500 (250 000) | no (c) (60 before: 0.5×: 3, 0.8×: 28, 1.2×: 29; at 300: 0 of 7 500, 142 before); `bound_ppb` below the error three samples on in 1 (seed 18744, 47 ppb off under 43; 4 of 7 500 at 300, 5 before): below |
//! | `a_small_count_step_is_never_a_change` (found, fixed since): a rate excursion inside one interval moving the count 0.2–3× an interval's bound | 2 500 (250 000) | no (c) (44 before; at 300: 0 of 7 500, 129 before); `bound_ppb` (counted apart) at every check three samples on (1 before, 1.09×; at 300: 5 of 7 500 up to 1.15×, 6 up to 1.18× before: below) |
//! | `a_clock_started_far_off_under_an_honest_bound_is_no_change` (found, fixed since) | 12 | starts ±100–300 ppm off under twice that, slew 0 and 1 ppm: no (c) (−300 ppm: check 41 / 53 before) |
//! | `the_fourth_slow_check_is_judged_against_the_floor` (found in the docs, which were wrong) | 3 | reads 0.6 → 20/50/200 µs: three `WideBracket`, the fourth judged against the floor |
//! | `a_ramp_that_resumes_stays_within_the_bound`, `a_ramp_that_stops_stays_within_the_bound` (found, fixed since 61b14e0/ee33eb2) | 18 | the 17 resumed ramps that broke at 300 (up to 1.57×) within the bound, at most 0.60×; seed 17739's stop (1.44×) within it |
//!
//! Broke (each an `#[ignore = "finding: ..."]` test below, with the sentence it breaks):
//!
//! | test | world | figures |
//! | --- | --- | --- |
//! | `a_small_count_step_leaves_bound_ppb_above_the_error` | a rate excursion inside one interval whose count step the window's samples still fit with one line (a steer toward the tilted window's rate) | seed 15964 (3 GHz vs HPET, P 0.5 s, −3 085 ppb for 213 ms): 59 ppb off under 57 and 54 three and four samples on; 5 of 7 500 at 300 (up to 1.15×), 0 of 2 500 at 100 ("one whose offset still fits ... is covered", now qualified in the docs) |
//!
//! Fixed since (each test un-ignored, asserting what the docs now say; before → after, at
//! `BARETIME_ADV_SEEDS=100` unless said):
//!
//! | test | world | before → after |
//! | --- | --- | --- |
//! | `a_change_right_after_a_report_is_reported_within_three_checks` | half the threshold (reported by the split), then 3–10× it 10–400 ms after the report's check; 1 GHz vs pvclock, P 1 s | 10 of 12 late (10 checks, 8 `Unconfirmed`, for ±3× at 10 ms; one never) → 10 of 12 at the second check; the two others (±3× at 400 ms: fifth check, and followed by refinement with the bound held) are under the threshold once it counts the baseline's bound (`bound_ppb` right after a report: 401 ppb, threshold 1 250, ±3× = 774 ppb: the docs fixed); `wait_world` seeds 3933, 3999, 5127: 10 checks → 2 |
//! | `a_change_inside_a_too_long_gap_is_reported_within_three_checks` | the same mechanism after `TooLong`: PIT, 1 GHz, 1 ppm, 41 200 s gap with +0.1 % | the 11th check after the gap (8 `Unconfirmed`) → the 3rd; in `long_gaps` 17 of 17 `TooLong` gaps late → 0 (48 of 48 in time at 300) |
//! | `a_changed_rate_is_within_its_bound_when_a_second_change_falls_in_an_extended_interval` | seed 4719: 24 MHz vs ACPI PM, P 1 s, +974 ppb, +3 225 more 4.2 s later | `Changed` to a rate 2 135 ppb off under its own bound 478 → `Unconfirmed`, then `Changed` a check later 511 ppb off, within its bound; 1 of 2 400 at 300 → 0 |
//! | `a_change_beyond_the_threshold_after_a_small_one_is_reported_within_three_checks` | seed 4960: 3 GHz vs pvclock, P 0.25 s, −706 ppb then +3 064 0.7 s later (threshold 1 021); 4370, 4480, 5153 | 4960 never (c) (already reported at the third check at this round's merge); 4370, 4480, 5153 at the fourth check → the second; 4 of 2 400 at 300 → 0 |
//! | `a_change_at_the_threshold_is_reported_a_period_late_at_most` (docs) | seed 2762: 5 GHz vs pvclock, P 1 s, +260 ppb ("1.02×" a threshold of one-tick steps) | the fifth check, unchanged: the learnt steps (a read's 107 ticks and 80 ns) make the intervals' bounds 207–222 ppb, so +260 is 0.59× the threshold, a change the split reports; the docs now say what a learnt step is on fast counters (`near_threshold_steps` now holds a world to a detection limit by the threshold of the learnt steps, as the docs say: at 300 this world is under it, 0 of 2 700 late; it counted it late against its one-tick threshold before) |
//! | `a_ramp_seen_before_a_step_against_it_stays_within_the_bound` | a slow steady ramp whose bend showed before a step against its pace (a sample no line fit with the window's older ones), going on after it; seeds 17533, 17489, 17633, 17647 | 2.50×, 2.20×, 2.18×, 2.16× (the bound falling from the ramp's term to the window's once the step's eight spans lapse) → 0.35×, 0.29×, 0.37×, 0.36×: such a sample is a move seen from the next move on (6f45abf); `a_step_against_the_pace`: 30 of 395 → 7 (93 of 1 214 → 29 at 300), 0 since the hidden ramp's term (the row above) |
//! | `a_ramp_that_goes_on_after_a_step_against_it_stays_within_the_bound` | a slow steady ramp whose bend never showed before a step against its pace, and that goes on after it: once the eight spans the step's report carries lapsed, nothing seen said it moves; seeds 17107, 17423, 17161, 17351, 17366 | seed 17107 (100 MHz vs ACPI PM, P 1 s, −30 ppb/s from 12.5 s, +15 394 ppb at 20.21 s): the bound fell to 124–130 ppb at 39–42 s, 292 ppb off under 130 (2.25×); the five 2.25×, 2.17×, 2.15×, 1.88×, 1.87× → 0.43×, 0.47×, 0.45×, 0.45×, 0.29×: a change two intervals confirmed keeps a steady ramp's worst case until the window since is as long as the one they were judged against (a ramp that window hid may go on hidden for as long again), and a sample no line fits meanwhile is a move; `a_step_against_the_pace`: 7 of 395 → 0 (29 of 1 214, up to 2.53×, → 0 at 300; 93 and 30 before 6f45abf); the price, the bound after a step's report at constant rates: p50 126 → 350 ppb in `irregular_hooks_with_a_change` at 300 (the clock's error unchanged: the suite's `end_error_ppb_max` the same) |
//!
//! Not attacked: calls from several threads, statistical (dishonest) start bounds, latch
//! points that drift inside brackets, accelerating ramps (the docs exclude them), staircases
//! (`tests/adversary_watchdog3.rs`).

use baretime::{
    Accuracy, Clock, Counter, Frequency, Reference, Source, Unjudged, Watch, Watchdog,
    WatchdogHealth, MARK_GRANULE_NS,
};
use std::cell::Cell;

const NS: u64 = 1_000;
const US: u64 = 1_000_000;
const MS: u64 = 1_000_000_000;
const S: u64 = 1_000_000_000_000;
/// Femto-ticks (mHz·ps) per tick.
const FT: i128 = 1_000_000_000_000_000;

// ---------------------------------------------------------------------------------------
// The scripted world.

/// splitmix64.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }
    fn sign(&mut self) -> f64 {
        if self.next() & 1 == 0 {
            1.0
        } else {
            -1.0
        }
    }
}

/// A rate over true time: piecewise, each piece a start rate (mHz) and a slope (mHz/s).
#[derive(Clone, Copy, Debug)]
struct Piece {
    t0: u64,
    base: i128,
    r0: i128,
    slope: f64,
}

#[derive(Clone, Debug)]
struct Rate {
    pieces: Vec<Piece>,
}

impl Rate {
    fn new(mhz: u64, phase_ticks: u64) -> Rate {
        Rate {
            pieces: vec![Piece {
                t0: 0,
                base: phase_ticks as i128 * FT,
                r0: mhz as i128,
                slope: 0.0,
            }],
        }
    }
    fn piece(&self, t: u64) -> &Piece {
        let i = self.pieces.partition_point(|p| p.t0 <= t);
        &self.pieces[i.saturating_sub(1)]
    }
    /// Position in femto-ticks.
    fn pos(&self, t: u64) -> i128 {
        let p = self.piece(t);
        let dt = (t - p.t0) as i128;
        let dts = dt as f64 / 1e12;
        p.base + p.r0 * dt + (p.slope * dts * dts / 2.0 * 1e12) as i128
    }
    fn ticks(&self, t: u64) -> u64 {
        self.pos(t).div_euclid(FT) as u64
    }
    fn mhz(&self, t: u64) -> f64 {
        let p = self.piece(t);
        p.r0 as f64 + p.slope * ((t - p.t0) as f64 / 1e12)
    }
    /// At `t` the count steps forward by `ticks` (negative: back); the rate goes on.
    fn jump(&mut self, t: u64, ticks: i64) {
        let p = *self.piece(t);
        let base = self.pos(t) + ticks as i128 * FT;
        let r = self.mhz(t);
        self.pieces.push(Piece {
            t0: t,
            base,
            r0: r.round() as i128,
            slope: p.slope,
        });
    }
    /// From `t` on: rate `mhz` (None: keep the rate reached), slope `slope` mHz/s.
    fn set(&mut self, t: u64, mhz: Option<f64>, slope: f64) {
        let base = self.pos(t);
        let r = mhz.unwrap_or_else(|| self.mhz(t));
        self.pieces.push(Piece {
            t0: t,
            base,
            r0: r.round() as i128,
            slope,
        });
    }
}

struct World {
    t: Cell<u64>,
    rng: Cell<u64>,
    ctr: Rate,
    ctr_bits: u32,
    ctr_cost: u64,
    ctr_jit: u64,
    refr: Rate,
    ref_bits: u32,
    ref_freq: Frequency,
    ref_cost: Cell<u64>,
    ref_jit: u64,
    /// Per-mille of reference reads delayed, and the delay's maximum.
    delay_pm: Cell<u64>,
    delay_max: u64,
}

impl World {
    fn rand(&self) -> u64 {
        let mut r = Rng(self.rng.get());
        let v = r.next();
        self.rng.set(r.0);
        v
    }
    fn adv(&self, ps: u64) {
        self.t.set(self.t.get() + ps);
    }
    fn mask(bits: u32, v: u64) -> u64 {
        if bits >= 64 {
            v
        } else {
            v & ((1u64 << bits) - 1)
        }
    }
    fn read_ctr(&self) -> u64 {
        let c = self.ctr_cost + self.rand() % (self.ctr_jit + 1);
        self.adv(c / 2);
        let v = self.ctr.ticks(self.t.get());
        self.adv(c - c / 2);
        Self::mask(self.ctr_bits, v)
    }
    fn read_ref(&self) -> u64 {
        let c = self.ref_cost.get() + self.rand() % (self.ref_jit + 1);
        let latch = self.rand() % (c + 1);
        let delayed = self.rand() % 1000 < self.delay_pm.get();
        let d = if delayed {
            self.rand() % (self.delay_max + 1)
        } else {
            0
        };
        let before = delayed && self.rand() & 1 == 0;
        if before {
            self.adv(d);
        }
        self.adv(latch);
        let v = self.refr.ticks(self.t.get());
        self.adv(c - latch);
        if !before {
            self.adv(d);
        }
        Self::mask(self.ref_bits, v)
    }
    /// The counter's rate as the reference counts it (mHz): what the clock should run at.
    fn target(&self, t: u64) -> f64 {
        self.ctr.mhz(t) * self.ref_freq.as_millihz() as f64 / self.refr.mhz(t)
    }
}

#[derive(Clone, Copy)]
struct Ctr<'a>(&'a World);
impl Counter for Ctr<'_> {
    fn ticks(&self) -> u64 {
        self.0.read_ctr()
    }
    fn bits(&self) -> u32 {
        self.0.ctr_bits
    }
}

struct Ref<'a>(&'a World);
impl Reference for Ref<'_> {
    fn read(&mut self) -> u64 {
        self.0.read_ref()
    }
    fn bits(&self) -> u32 {
        self.0.ref_bits
    }
    fn frequency(&self) -> Frequency {
        self.0.ref_freq
    }
    fn name(&self) -> &'static str {
        "scripted"
    }
}

/// Every reference kind the docs name: (name, stated Hz, bits, read cost ps).
#[derive(Clone, Copy, Debug)]
struct RefKind {
    name: &'static str,
    hz: u64,
    bits: u32,
    cost: u64,
}
const HPET: RefKind = RefKind {
    name: "hpet",
    hz: 14_318_180,
    bits: 64,
    cost: 600 * NS,
};
const HPET32: RefKind = RefKind {
    name: "hpet32",
    hz: 14_318_180,
    bits: 32,
    cost: 600 * NS,
};
const ACPI_PM: RefKind = RefKind {
    name: "acpi_pm",
    hz: 3_579_545,
    bits: 24,
    cost: 1_000 * NS,
};
const ACPI_PM32: RefKind = RefKind {
    name: "acpi_pm32",
    hz: 3_579_545,
    bits: 32,
    cost: 1_000 * NS,
};
const PIT: RefKind = RefKind {
    name: "pit",
    hz: 1_193_182,
    bits: 16,
    cost: 2_000 * NS,
};
const RTC: RefKind = RefKind {
    name: "rtc32k",
    hz: 32_768,
    bits: 32,
    cost: 500 * NS,
};
const TEN_MHZ: RefKind = RefKind {
    name: "10mhz",
    hz: 10_000_000,
    bits: 64,
    cost: 50 * NS,
};
const TICK_1K: RefKind = RefKind {
    name: "tick1k",
    hz: 1_000,
    bits: 64,
    cost: 50 * NS,
};
const PVCLOCK: RefKind = RefKind {
    name: "pvclock",
    hz: 1_000_000_000,
    bits: 64,
    cost: 80 * NS,
};
const ALL_REFS: [RefKind; 9] = [
    HPET, HPET32, ACPI_PM, ACPI_PM32, PIT, RTC, TEN_MHZ, TICK_1K, PVCLOCK,
];
/// The references fine enough for intervals of a period to judge ppm-size changes.
const FINE_REFS: [RefKind; 5] = [HPET, HPET32, ACPI_PM, TEN_MHZ, PVCLOCK];

/// A change of the counter's rate the watchdog is to see (`excursion`: the truth is back
/// at the rate before the group that starts at `group`).
#[derive(Clone, Copy, Debug)]
struct Event {
    t: u64,
    /// Set for the last event of an excursion that ends where it began.
    excursion_from: Option<u64>,
}

struct Scenario {
    seed: u64,
    label: String,
    ctr_hz: u64,
    ctr_bits: u32,
    ctr_cost: u64,
    ctr_jit: u64,
    refk: RefKind,
    ref_off_ppb: f64,
    ref_tol_ppb: u64,
    ref_jit: u64,
    /// The clock's start error (ppb, against the target) and the bound given.
    start_err_ppb: f64,
    start_bound_ppb: u64,
    tries: Option<u32>,
    slew: Option<u64>,
    /// Check start times (ps).
    hooks: Vec<u64>,
    /// The counter's rate schedule: (t, rate factor against its start rate or None, slope ppb/s).
    sched: Vec<(u64, Option<f64>, f64)>,
    /// Events the bound waits for (see `Event`).
    events: Vec<Event>,
    /// Steps of the counter's count: (t, ticks).
    jumps: Vec<(u64, i64)>,
    /// Per check: the reference's read cost (None: the kind's).
    slow: Vec<(usize, usize, u64)>,
    delay_pm: u64,
    delay_max: u64,
    /// A constant-rate world: no (c), no (d).
    constant: bool,
}

impl Scenario {
    fn new(seed: u64, label: &str, ctr_hz: u64, refk: RefKind, period: u64, checks: usize) -> Self {
        let mut r = Rng(seed ^ 0x5EED);
        let hooks = (0..checks)
            .map(|k| S + k as u64 * period + r.below(period / 1000 + 1))
            .collect();
        Scenario {
            seed,
            label: label.to_string(),
            ctr_hz,
            ctr_bits: 64,
            ctr_cost: 20 * NS,
            ctr_jit: 10 * NS,
            refk,
            ref_off_ppb: 0.0,
            ref_tol_ppb: 0,
            ref_jit: refk.cost / 5,
            start_err_ppb: 0.0,
            start_bound_ppb: 100,
            tries: None,
            slew: None,
            hooks,
            sched: Vec::new(),
            events: Vec::new(),
            jumps: Vec::new(),
            slow: Vec::new(),
            delay_pm: 0,
            delay_max: 0,
            constant: true,
        }
    }
    /// The docs' threshold for a change seen by two intervals: `2·(w_a + w_b + 2·q_c)/(2·P·f)
    /// + 2·q_x/(P·f_r)` (ppb), with the widest bracket this world makes.
    fn threshold_ppb(&self, period: u64) -> f64 {
        let w_ps = (self.ctr_cost + self.ctr_jit) as f64 + (self.refk.cost + self.ref_jit) as f64;
        let f = self.ctr_hz as f64;
        let w = (w_ps / 1e12 * f).ceil() + 1.0;
        let p = period as f64 / 1e12;
        (2.0 * (2.0 * w + 2.0) / (2.0 * p * f) + 2.0 / (p * self.refk.hz as f64)) * 1e9
    }
}

#[derive(Clone, Copy, Debug)]
struct Rec {
    t: u64,
    t_end: u64,
    verdict: Watch,
    health: WatchdogHealth,
    /// Whether every event before this check has been seen (the bound is judged).
    judged: bool,
    err_ppb: f64,
}

struct Run {
    recs: Vec<Rec>,
    /// (check, what broke).
    fails: Vec<(usize, String)>,
}

impl Run {
    fn changed_after(&self, t: u64) -> Option<usize> {
        self.recs
            .iter()
            .enumerate()
            .filter(|(_, r)| r.t > t)
            .position(|(_, r)| matches!(r.verdict, Watch::Changed { .. }))
    }
    fn wide_after(&self, t: u64, upto: usize) -> usize {
        self.recs
            .iter()
            .filter(|r| r.t > t)
            .take(upto)
            .filter(|r| matches!(r.verdict, Watch::NoVerdict(Unjudged::WideBracket)))
            .count()
    }
}

fn is_accepted(v: &Watch) -> bool {
    !matches!(
        v,
        Watch::NoVerdict(Unjudged::WideBracket | Unjudged::TooShort | Unjudged::First)
    )
}

fn freq_mhz(mhz: u64, bound: u64) -> Frequency {
    Frequency::from_millihz(
        mhz,
        Source::Calibrated,
        Accuracy::Measured {
            uncertainty_ppb: bound,
        },
    )
    .unwrap()
}

/// Runs a scenario and judges every promise the docs state at every check.
fn run(sc: &Scenario) -> Run {
    let mut rng = Rng(sc.seed);
    let ref_true_mhz = (sc.refk.hz as f64 * 1000.0 * (1.0 + sc.ref_off_ppb / 1e9)).round() as u64;
    let ref_freq = if sc.ref_tol_ppb > 0 {
        Frequency::nominal_hz(sc.refk.hz, sc.ref_tol_ppb).unwrap()
    } else {
        Frequency::exact_hz(sc.refk.hz).unwrap()
    };
    let ctr_mhz = sc.ctr_hz * 1000 + rng.below(1000);
    let mut ctr = Rate::new(ctr_mhz, rng.next() >> 8);
    for &(t, f, slope_ppb) in &sc.sched {
        ctr.set(
            t,
            f.map(|f| ctr_mhz as f64 * f),
            ctr_mhz as f64 * slope_ppb / 1e9,
        );
    }
    for &(t, ticks) in &sc.jumps {
        ctr.jump(t, ticks);
    }
    let refr = Rate::new(ref_true_mhz, rng.next() >> 8);
    let w = World {
        t: Cell::new(0),
        rng: Cell::new(rng.next()),
        ctr,
        ctr_bits: sc.ctr_bits,
        ctr_cost: sc.ctr_cost,
        ctr_jit: sc.ctr_jit,
        refr,
        ref_bits: sc.refk.bits,
        ref_freq,
        ref_cost: Cell::new(sc.refk.cost),
        ref_jit: sc.ref_jit,
        delay_pm: Cell::new(sc.delay_pm),
        delay_max: sc.delay_max,
    };
    let t0 = sc.hooks[0].saturating_sub(MS);
    w.t.set(t0);
    let target0 = w.target(t0);
    let start_mhz = (target0 * (1.0 + sc.start_err_ppb / 1e9)).round() as u64;
    let start = freq_mhz(start_mhz, sc.start_bound_ppb);
    let clock = Clock::new(Ctr(&w), start);
    let mut wd = Watchdog::new(Ref(&w), start);
    if let Some(n) = sc.tries {
        wd = wd.with_tries(n);
    }
    let slew = sc.slew.unwrap_or(1_000);
    if let Some(s) = sc.slew {
        wd = wd.with_slew_ppb(s);
    }
    let narrow = sc.ctr_bits < 64;
    let mut fails: Vec<(usize, String)> = Vec::new();
    let mut recs: Vec<Rec> = Vec::new();
    let mut last_now = clock.now();
    let mut tally = WatchdogHealth::default();
    // Per event: whether seen.
    let mut seen = vec![false; sc.events.len()];
    let mut last_accepted_t: Option<u64> = None;
    let mut changed_since: Vec<bool> = vec![false; sc.events.len()];
    let mut accepted_after: Vec<u32> = vec![0; sc.events.len()];
    let tag = |k: usize| format!("{} seed {} check {}", sc.label, sc.seed, k);
    for (k, &t) in sc.hooks.iter().enumerate() {
        if w.t.get() < t {
            w.t.set(t);
        }
        let cost = sc
            .slow
            .iter()
            .find(|&&(a, b, _)| k >= a && k < b)
            .map(|&(_, _, c)| c)
            .unwrap_or(sc.refk.cost);
        w.ref_cost.set(cost);
        if narrow {
            let _ = clock.update();
        }
        let h0 = wd.health();
        let rate_before = clock.scale().millihz();
        let now0 = clock.now();
        let p0 = w.ctr.pos(w.t.get());
        let t_start = w.t.get();
        let verdict = wd.check(&clock);
        let p1 = w.ctr.pos(w.t.get());
        let now1 = clock.now();
        let t_end = w.t.get();
        let h = wd.health();
        let rate_after = clock.scale().millihz();
        let target = w.target(t_end);
        let err_ppb = (rate_after as f64 - target).abs() / target * 1e9;

        // Health counts against the verdicts.
        tally.checks += 1;
        match verdict {
            Watch::NoVerdict(_) => tally.no_verdict += 1,
            Watch::Steady { .. } => tally.steady += 1,
            Watch::Changed { .. } => tally.changed += 1,
            Watch::CounterStopped | Watch::CounterJumped { .. } => tally.counter_faults += 1,
            _ => fails.push((
                k,
                format!("{}: a verdict the docs do not name: {verdict}", tag(k)),
            )),
        }
        if (
            h.checks,
            h.no_verdict,
            h.steady,
            h.changed,
            h.counter_faults,
        ) != (
            tally.checks,
            tally.no_verdict,
            tally.steady,
            tally.changed,
            tally.counter_faults,
        ) {
            fails.push((
                k,
                format!("{}: health {:?} against tally {:?}", tag(k), h, tally),
            ));
            tally = h;
        }
        // Promise 1 (order) and 2 (no jump) across the check.
        if !narrow || k == 0 || t - sc.hooks[k - 1] < 100 * MS {
            if now0 < last_now || now1 < now0 {
                fails.push((
                    k,
                    format!(
                        "{}: time went back: {} then {} then {}",
                        tag(k),
                        last_now.as_nanos(),
                        now0.as_nanos(),
                        now1.as_nanos()
                    ),
                ));
            }
            let ticks = ((p1 - p0) as f64 / FT as f64).max(0.0);
            let slow_rate = rate_before.min(rate_after) as f64 / 1000.0;
            let fast_rate = rate_before.max(rate_after) as f64 / 1000.0;
            let most_ns = ticks / slow_rate * 1e9;
            let least_ns = ticks / fast_rate * 1e9;
            let tick_ns = 1e9 / slow_rate;
            let moved = now1.as_nanos().saturating_sub(now0.as_nanos()) as f64;
            let margin = MARK_GRANULE_NS as f64 + 20_000.0 + tick_ns + 2.0;
            if moved > most_ns + margin || moved + margin < least_ns {
                fails.push((
                    k,
                    format!(
                        "{}: time moved {moved:.0} ns across a check of {:.0}..{:.0} ns",
                        tag(k),
                        least_ns,
                        most_ns
                    ),
                ));
            }
        }
        last_now = now1;
        // Slew and steers.
        let steers = h.steers - h0.steers;
        let moved_ppb = (rate_after as f64 - rate_before as f64).abs() / rate_before as f64 * 1e9;
        match verdict {
            Watch::Changed { .. } => {
                if steers != 0 {
                    fails.push((k, format!("{}: Changed counted as a steer", tag(k))));
                }
            }
            Watch::Steady { .. } => {
                let limit = slew as f64 + 1e12 / rate_before as f64 + 1.0;
                if moved_ppb > limit {
                    fails.push((
                        k,
                        format!("{}: steered {moved_ppb:.0} ppb, slew {slew}", tag(k)),
                    ));
                }
                if rate_after != rate_before && steers != 1 {
                    fails.push((k, format!("{}: rate moved, steers +{steers}", tag(k))));
                }
                if steers > 1 || (steers == 1 && slew == 0) {
                    fails.push((k, format!("{}: steers +{steers} at slew {slew}", tag(k))));
                }
            }
            _ => {
                if rate_after != rate_before || steers != 0 {
                    fails.push((k, format!(
                        "{}: {verdict} moved the rate {rate_before} -> {rate_after} mHz (steers +{steers})",
                        tag(k)
                    )));
                }
            }
        }
        // WideBracket and TooLong leave the bound as it was (since: but a `TooLong` that
        // refuses a narrow count the check cannot measure, where a change may move it a
        // whole wrap, sets it to 12.5 %: *Widths*).
        if matches!(
            verdict,
            Watch::NoVerdict(Unjudged::WideBracket | Unjudged::TooLong)
        ) && h.bound_ppb != h0.bound_ppb
            && !(verdict == Watch::NoVerdict(Unjudged::TooLong) && h.bound_ppb >= 125_000_000)
        {
            fails.push((
                k,
                format!(
                    "{}: {verdict} changed bound_ppb {} -> {}",
                    tag(k),
                    h0.bound_ppb,
                    h.bound_ppb
                ),
            ));
        }
        // *Widths*: the count with the shorter wrap, if narrow, is unwrapped against the rate:
        // `TooLong` where `bound_ppb` over the interval reaches half a wrap (the first check
        // after a `TooLong` one excepted), never where it stays under a quarter.
        if let Some(prev) = recs.last() {
            let ref_wrap = 2f64.powi(sc.refk.bits.min(64) as i32) / sc.refk.hz as f64;
            let ctr_wrap = 2f64.powi(sc.ctr_bits.min(64) as i32) / sc.ctr_hz as f64;
            let (bits, wrap) = if ref_wrap <= ctr_wrap {
                (sc.refk.bits, ref_wrap)
            } else {
                (sc.ctr_bits, ctr_wrap)
            };
            if bits < 64 && is_accepted(&prev.verdict) {
                let gap = (t_start - prev.t) as f64 / 1e12;
                let slack = 2.0 * (cost + sc.refk.cost) as f64 / 1e12 + 2.0 / sc.refk.hz as f64;
                let reach = h0.bound_ppb as f64 / 1e9 * gap + slack;
                let too_long = verdict == Watch::NoVerdict(Unjudged::TooLong);
                let after_too_long = prev.verdict == Watch::NoVerdict(Unjudged::TooLong);
                // Since: where 12.5 % of the interval is a whole wrap, a change may look
                // steady, and a check that cannot measure the rate itself (a counter too
                // coarse to, over 8 ms) is `TooLong` at the hook's period.
                let whole_wrap = 0.125 * gap >= 0.9 * wrap;
                if too_long && !whole_wrap && reach < 0.95 * wrap / 4.0 {
                    fails.push((
                        k,
                        format!(
                        "{}: TooLong where bound_ppb {} over {gap:.3} s reaches {:.3} of a wrap",
                        tag(k),
                        h0.bound_ppb,
                        reach / wrap
                    ),
                    ));
                }
                // Since, such a check measures the rate itself: a disturbed measurement is
                // `WideBracket` (*Widths*).
                let disturbed = verdict == Watch::NoVerdict(Unjudged::WideBracket);
                if !too_long && !after_too_long && !disturbed && reach > 1.05 * wrap / 2.0 {
                    fails.push((
                        k,
                        format!(
                        "{}: {verdict} where bound_ppb {} over {gap:.3} s reaches {:.3} of a wrap",
                        tag(k),
                        h0.bound_ppb,
                        reach / wrap
                    ),
                    ));
                }
            }
        }
        // No (c) or (d) at constant rates.
        if sc.constant
            && matches!(
                verdict,
                Watch::Changed { .. } | Watch::CounterStopped | Watch::CounterJumped { .. }
            )
        {
            fails.push((
                k,
                format!("{}: false alarm {verdict} at constant rates", tag(k)),
            ));
        }
        // Which events are seen: a Changed whose last interval is wholly after them; an
        // excursion that came back, three accepted samples after its end with no Changed.
        let is_changed = matches!(verdict, Watch::Changed { .. });
        let accepted = is_accepted(&verdict);
        for (i, e) in sc.events.iter().enumerate() {
            if seen[i] || e.t >= t_start {
                continue;
            }
            if is_changed && last_accepted_t.is_some_and(|a| a >= e.t) {
                seen[i] = true;
            }
            if let Some(from) = e.excursion_from {
                if is_changed || changed_since[i] {
                    changed_since[i] = true;
                } else if accepted {
                    accepted_after[i] += 1;
                    if accepted_after[i] >= 3
                        && !recs
                            .iter()
                            .any(|r| r.t > from && matches!(r.verdict, Watch::Changed { .. }))
                    {
                        seen[i] = true;
                    }
                }
            }
        }
        // The earlier events of an excursion are seen with its end.
        for (i, e) in sc.events.iter().enumerate() {
            if let (Some(from), true) = (e.excursion_from, seen[i]) {
                for (j, f) in sc.events.iter().enumerate() {
                    if f.t >= from && f.t < e.t {
                        seen[j] = true;
                    }
                }
            }
        }
        let judged = sc.events.iter().zip(&seen).all(|(e, &s)| s || e.t >= t_end);
        // A change inside this check's own reads is a change not yet seen.
        let inside = sc.events.iter().any(|e| e.t >= t_start && e.t < t_end);
        let judged = judged && !inside;
        if judged && err_ppb > h.bound_ppb as f64 + 1.5 + 1e12 / target {
            fails.push((
                k,
                format!(
                    "{}: error {err_ppb:.0} ppb > bound_ppb {} ({verdict})",
                    tag(k),
                    h.bound_ppb
                ),
            ));
        }
        // The rate a Changed reports, within its own bound, where the truth was constant over
        // its interval.
        if let Watch::Changed { rate, .. } = verdict {
            if judged {
                let a = last_accepted_t.unwrap_or(t_start);
                let flat =
                    w.ctr.piece(a).t0 == w.ctr.piece(t_end).t0 && w.ctr.piece(t_end).slope == 0.0;
                let own = rate.accuracy().bound_ppb() as f64;
                let off = (rate.as_millihz() as f64 - target).abs() / target * 1e9;
                if flat && off > own + 1.5 + 1e12 / target {
                    fails.push((
                        k,
                        format!(
                            "{}: Changed to a rate {off:.0} ppb off under its own bound {own}",
                            tag(k)
                        ),
                    ));
                }
            }
        }
        if accepted {
            last_accepted_t = Some(t_start);
        }
        if std::env::var("ATK4_TRACE").is_ok_and(|v| v == sc.seed.to_string()) {
            println!(
                "{k:3} t {:10.4} s {verdict:<48} rate {rate_before}->{rate_after} target {target:.0} err {err_ppb:7.0} bound {:7} steers {} judged {judged}",
                t_start as f64 / 1e12,
                h.bound_ppb,
                h.steers
            );
        }
        recs.push(Rec {
            t: t_start,
            t_end,
            verdict,
            health: h,
            judged,
            err_ppb,
        });
    }
    Run { recs, fails }
}

fn seeds() -> u64 {
    std::env::var("BARETIME_ADV_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(8)
}

/// Collects figures and failures over a family's seeds; prints a summary.
struct Tally {
    family: &'static str,
    worlds: u64,
    checks: u64,
    fails: Vec<String>,
    failing_seeds: Vec<u64>,
    detect: Vec<f64>,
    worst_ratio: f64,
    kinds: std::collections::BTreeMap<String, u64>,
}

impl Tally {
    fn new(family: &'static str) -> Self {
        Tally {
            family,
            worlds: 0,
            checks: 0,
            fails: Vec::new(),
            failing_seeds: Vec::new(),
            detect: Vec::new(),
            worst_ratio: 0.0,
            kinds: Default::default(),
        }
    }
    fn add(&mut self, sc: &Scenario, run: &Run, extra: Vec<String>) {
        self.worlds += 1;
        self.checks += run.recs.len() as u64;
        for r in &run.recs {
            let kind = match r.verdict {
                Watch::NoVerdict(u) => format!("{u:?}"),
                v => v.token().to_string(),
            };
            *self.kinds.entry(kind).or_default() += 1;
            if r.judged && r.health.bound_ppb > 0 {
                self.worst_ratio = self.worst_ratio.max(r.err_ppb / r.health.bound_ppb as f64);
            }
        }
        let mut f: Vec<String> = run.fails.iter().map(|(_, f)| f.clone()).collect();
        f.extend(extra);
        if !f.is_empty() {
            self.failing_seeds.push(sc.seed);
            self.fails.extend(f);
        }
    }
    fn finish(self) {
        let mut d = self.detect.clone();
        d.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let q = |p: f64| {
            if d.is_empty() {
                f64::NAN
            } else {
                d[((d.len() - 1) as f64 * p) as usize]
            }
        };
        println!(
            "{}: {} worlds, {} checks, {} failing ({:?}), detection p50 {:.2} s max {:.2} s, worst error/bound {:.3}",
            self.family,
            self.worlds,
            self.checks,
            self.failing_seeds.len(),
            &self.failing_seeds[..self.failing_seeds.len().min(12)],
            q(0.5),
            q(1.0),
            self.worst_ratio
        );
        let show = std::env::var("ATK4_SHOW")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(12);
        println!("  verdicts: {:?}", self.kinds);
        for f in self.fails.iter().take(show) {
            println!("  {f}");
        }
        assert!(
            self.fails.is_empty(),
            "{}: {} failures in {} worlds, first: {}",
            self.family,
            self.fails.len(),
            self.failing_seeds.len(),
            self.fails[0]
        );
    }
}

// ---------------------------------------------------------------------------------------
// Families.

const COUNTERS: [u64; 4] = [24_000_000, 100_000_000, 1_000_000_000, 3_000_000_000];
const PERIODS: [u64; 3] = [500 * MS, 1_000 * MS, 2_000 * MS];

/// A step of `ppb` at `t`.
fn step(sc: &mut Scenario, t: u64, factor: f64) {
    sc.sched.push((t, Some(factor), 0.0));
    sc.events.push(Event {
        t,
        excursion_from: None,
    });
    sc.constant = false;
}

/// Checks after `t` until the first Changed (1: the first check after `t`).
fn detected_in(run: &Run, t: u64) -> Option<usize> {
    run.changed_after(t).map(|i| i + 1)
}

fn near_world(seed: u64, factor: f64) -> (Scenario, u64, f64) {
    let mut r = Rng(seed);
    let (refk, f, bits, p) = match r.below(4) {
        // Coarse references, long periods.
        0 => (
            r.pick(&[RTC, PIT, TICK_1K]),
            r.pick(&COUNTERS),
            64,
            r.pick(&[1_000 * MS, 2_000 * MS, 4_000 * MS]),
        ),
        // Narrow counters checked well inside half their wrap.
        1 => {
            let (f, bits) = r.pick(&[(24_000_000, 24), (1_000_000_000, 32), (3_000_000_000, 32)]);
            (r.pick(&FINE_REFS), f, bits, 250 * MS)
        }
        2 => (
            r.pick(&FINE_REFS),
            r.pick(&[32_768, 1_000_000, 5_000_000_000]),
            64,
            r.pick(&PERIODS),
        ),
        _ => (r.pick(&FINE_REFS), r.pick(&COUNTERS), 64, r.pick(&PERIODS)),
    };
    let mut sc = Scenario::new(seed, "near_threshold", f, refk, p, 40);
    sc.ctr_bits = bits;
    let thr = sc.threshold_ppb(p);
    let j = r.range(8, 20) as usize;
    let t = sc.hooks[j] + 10 * US + r.below(p - 20 * US);
    let d = r.sign() * factor * thr;
    step(&mut sc, t, 1.0 + d / 1e9);
    sc.label = format!(
        "near_threshold ({f} Hz/{bits} bits vs {}, P {} ms, {d:.0} ppb = {factor}× {thr:.0} at {:.4} s)",
        refk.name,
        p / MS,
        t as f64 / 1e12
    );
    (sc, t, d)
}

/// (1) A change near the threshold: reported once an interval wholly after it bounds the new
/// rate; from the report on, `bound_ppb` and the verdict's rate hold. Detection: within three
/// periods above twice an interval's bound, a period later at about the threshold — the
/// bound of the *learnt* steps (*Detection time*: on a counter or a reference faster than
/// its reads, a read's ticks), taken from the steady verdicts before the change; the world's
/// nominal factor is against one-tick steps (before, the limits followed it, and seed 2762,
/// "1.02×" but 0.59× the learnt threshold, was late at 300 seeds).
#[test]
fn near_threshold_steps() {
    let mut tally = Tally::new("near_threshold_steps");
    let factors = [0.8, 0.95, 1.02, 1.1, 1.3, 1.5, 2.0, 2.5, 4.0];
    // Worlds whose change is at least 1.02 times the learnt threshold, by nominal factor.
    let mut judged_by: std::collections::BTreeMap<String, u64> = Default::default();
    for s in 0..seeds() {
        for (i, &factor) in factors.iter().enumerate() {
            let seed = 1_000 + s * 16 + i as u64;
            let (sc, t, d) = near_world(seed, factor);
            let run = run(&sc);
            let mut extra = Vec::new();
            let n = detected_in(&run, t);
            if let Some(n) = n {
                let k = run.recs.iter().position(|r| r.t > t).unwrap() + n - 1;
                tally.detect.push((run.recs[k].t_end - t) as f64 / 1e12);
                // The report waits for an interval wholly after the change.
                if !run.recs[k].judged {
                    extra.push(format!(
                        "{} seed {seed}: reported at check {k} with an interval that holds the change",
                        sc.label
                    ));
                }
            }
            // The docs' threshold (*Detection time*) is twice the sum of an interval's bound
            // and the baseline's, from the *learnt* steps (on a counter or a reference faster
            // than its reads, a read's ticks): taken from the verdicts, as twice the widest
            // bound a steady verdict carried in the ten checks before the change (less the
            // reference's stated tolerance), the baseline's bound left out (stricter than the
            // docs). The nominal `factor` is against the one-tick threshold the world was
            // drawn with.
            let k0 = run
                .recs
                .iter()
                .position(|r| r.t > t)
                .unwrap_or(run.recs.len());
            let before = &run.recs[k0.saturating_sub(10)..k0];
            let b_i = before
                .iter()
                .filter_map(|r| match r.verdict {
                    Watch::Steady { rate } => {
                        Some(rate.accuracy().bound_ppb().saturating_sub(sc.ref_tol_ppb))
                    }
                    _ => None,
                })
                .max();
            let learnt = b_i.map(|b_i| d.abs() / (2.0 * b_i as f64));
            let limit = match learnt {
                Some(x) if x >= 2.0 => Some(3),
                Some(x) if x >= 1.02 => Some(4),
                _ => None,
            };
            if let Some(l) = limit {
                if n.map_or(true, |n| n > l) {
                    extra.push(format!(
                        "{} seed {seed}: {d:.0} ppb ({factor}× the one-tick threshold, {:.2}× the learnt one, {} ref) reported at check {n:?} after it, limit {l}",
                        sc.label,
                        learnt.unwrap_or(0.0),
                        sc.refk.name
                    ));
                }
            }
            if limit.is_some() {
                *judged_by.entry(format!("{factor}")).or_default() += 1;
            }
            tally.add(&sc, &run, extra);
        }
    }
    println!("near_threshold_steps: worlds held to a detection limit (at least 1.02× the learnt threshold), by nominal factor: {judged_by:?}");
    tally.finish();
}

/// Two changes within one period: the net change is reported, the bound holds from the report
/// on; a change and back inside one interval is a one-off, never (c).
#[test]
fn two_changes_within_one_period() {
    let mut tally = Tally::new("two_changes_within_one_period");
    let sizes = [0.5, 1.0, 3.0, 20.0];
    for s in 0..seeds() * 8 {
        let seed = 2_000 + s;
        let mut r = Rng(seed);
        let refk = r.pick(&FINE_REFS);
        let f = r.pick(&COUNTERS);
        let p = r.pick(&PERIODS);
        let mut sc = Scenario::new(seed, "two_changes", f, refk, p, 40);
        let thr = sc.threshold_ppb(p);
        let j = r.range(8, 20) as usize;
        let a = sc.hooks[j] + 20 * US + r.below(p / 2);
        let b = a + 10 * US + r.below(sc.hooks[j + 1] - a - 30 * US);
        let d1 = r.sign() * r.pick(&sizes) * thr;
        let back = false;
        let d2 = if back {
            -d1
        } else {
            r.sign() * r.pick(&sizes) * thr
        };
        step(&mut sc, a, 1.0 + d1 / 1e9);
        sc.sched.push((b, Some(1.0 + (d1 + d2) / 1e9), 0.0));
        sc.events.push(Event {
            t: b,
            excursion_from: if back { Some(a) } else { None },
        });
        sc.label = format!(
            "two_changes ({f} Hz vs {}, P {} ms, threshold {thr:.0} ppb, {d1:.0} ppb at {:.4} s, {d2:.0} at {:.4} s)",
            refk.name,
            p / MS,
            a as f64 / 1e12,
            b as f64 / 1e12
        );
        let run = run(&sc);
        let mut extra = Vec::new();
        let n = detected_in(&run, b);
        if back {
            if let Some(n) = n {
                extra.push(format!(
                    "two_changes seed {seed}: {d1:.0} ppb and back within one interval reported Changed {n} checks after"
                ));
            }
        } else {
            if let Some(n) = n {
                let k = run.recs.iter().position(|r| r.t > b).unwrap() + n - 1;
                tally.detect.push((run.recs[k].t_end - b) as f64 / 1e12);
                if !run.recs[k].judged {
                    extra.push(format!(
                        "{} seed {seed}: reported at check {k} with an interval that holds a change",
                        sc.label
                    ));
                }
            }
            if (d1 + d2).abs() >= 2.0 * thr && n.map_or(true, |n| n > 3) {
                extra.push(format!(
                    "two_changes seed {seed}: {d1:.0} then {d2:.0} ppb ({:.0} ppb threshold) reported at check {n:?} after",
                    thr
                ));
            }
        }
        tally.add(&sc, &run, extra);
    }
    tally.finish();
}

/// A change under an interval's threshold (seen by the window's split, whose report waits a
/// period), then a second at a time drawn over the periods the split takes to see the first.
/// Returns the scenario, its run, and what broke beyond `run`'s own judgements (the second
/// change, when both it and the net change are beyond twice the threshold, reported within
/// three checks), with the time from the second change to its report.
fn wait_world(seed: u64) -> (Scenario, Run, Vec<String>, Option<f64>) {
    let mut r = Rng(seed);
    let refk = r.pick(&FINE_REFS);
    let f = r.pick(&COUNTERS);
    let p = r.pick(&[250 * MS, 500 * MS, 1_000 * MS]);
    let mut sc = Scenario::new(seed, "change_during_wait", f, refk, p, 140);
    let thr = sc.threshold_ppb(p);
    let j = r.range(30, 60) as usize;
    let a = sc.hooks[j] + r.below(p);
    let d1 = r.sign() * (0.3 + 0.6 * r.unit()) * thr;
    step(&mut sc, a, 1.0 + d1 / 1e9);
    let b = a + r.range(1, 40) * p + r.below(p);
    let d2 = r.sign() * r.pick(&[0.3, 1.0, 3.0, 10.0]) * thr;
    step(&mut sc, b, 1.0 + (d1 + d2) / 1e9);
    sc.label = format!(
        "change_during_wait ({f} Hz vs {}, P {} ms, threshold {thr:.0} ppb, {d1:.0} ppb at {:.4} s, {d2:.0} more at {:.4} s)",
        refk.name,
        p / MS,
        a as f64 / 1e12,
        b as f64 / 1e12
    );
    let run = run(&sc);
    let mut extra = Vec::new();
    let mut took = None;
    let n = detected_in(&run, b);
    if d2.abs() >= 2.0 * thr && (d1 + d2).abs() >= 2.0 * thr {
        if let Some(n) = n {
            let k = run.recs.iter().position(|r| r.t > b).unwrap() + n - 1;
            took = Some((run.recs[k].t_end - b) as f64 / 1e12);
        }
        if n.map_or(true, |n| n > 3) {
            extra.push(format!(
                "{} seed {seed}: the second reported at check {n:?} after it",
                sc.label
            ));
        }
    }
    (sc, run, extra, took)
}

/// (1) A change under an interval's threshold, then a second one during its wait or soon
/// after: the bound from each report on, the reported rate within its own bound, the second
/// reported within three checks where it and the net change are beyond twice the threshold.
#[test]
fn a_change_during_the_wait() {
    let mut tally = Tally::new("a_change_during_the_wait");
    for s in 0..seeds() * 8 {
        let (sc, run, extra, took) = wait_world(3_000 + s);
        if let Some(t) = took {
            tally.detect.push(t);
        }
        tally.add(&sc, &run, extra);
    }
    tally.finish();
}

/// Runs `wait_world` on the seeds given and fails with what broke.
fn wait_findings(seeds: &[u64]) {
    let mut bad = Vec::new();
    for &seed in seeds {
        let (_, run, extra, _) = wait_world(seed);
        for f in run.fails.iter().map(|(_, f)| f).chain(&extra) {
            println!("{f}");
            bad.push(f.clone());
        }
    }
    assert!(bad.is_empty(), "{} broken, first: {}", bad.len(), bad[0]);
}

/// Found (fixed since): a change in the first interval after a report was reported only
/// after eight `Unconfirmed` checks (the window restarts; the mixed interval, off the
/// clock's rate, widened `bound_ppb` to its own distance, and the next, wholly at the new
/// rate, agreed with that widened baseline and with it, and was extended), not within three
/// periods (*Detection time*: "at most three periods P after the change when no check is
/// disturbed"). The same as after a `TooLong` gap
/// (`a_change_inside_a_too_long_gap_is_reported_within_three_checks`). Minimal: 1 GHz vs
/// pvclock, P 1 s, half the threshold at 20.2 s (reported by the window's split at check
/// `k`), then `g` times the threshold at `hooks[k] + x`. Before: 10 of 12 late (10 checks,
/// 8 `Unconfirmed`, for ±3× at 10 ms; one never in 34 checks), and `wait_world` seeds 3933,
/// 3999, 5127 at 10 checks. Fixed in the code: the baseline's bound is `bound_ppb` from
/// before a deviation that waits widened it; after: 10 of 12 at the second check, 3933,
/// 3999, 5127 within three. Fixed in the docs: the two others (±3× at 400 ms: the fifth
/// check, and never — followed by refinement, `bound_ppb` held) are under the threshold
/// once it counts the baseline's bound, which right after a report is `bound_ppb` (401 ppb
/// here, against an interval's 184): the threshold is `2·(b_i + b₀)`, 1 170 ppb, and ±3× is
/// 774. Asserted now: every world over that threshold reported within three checks, every
/// judgement of `run` in every world, and the `wait_world` seeds.
#[test]
fn a_change_right_after_a_report_is_reported_within_three_checks() {
    let mut bad = Vec::new();
    let (mut n_all, mut n_over, mut n_in3) = (0, 0, 0);
    for g in [-3.0, 3.0, -10.0, 10.0] {
        for x in [10 * MS, 100 * MS, 400 * MS] {
            let world = |second: Option<(u64, f64)>| {
                let mut sc = Scenario::new(
                    16_000,
                    "after_report",
                    1_000_000_000,
                    PVCLOCK,
                    1_000 * MS,
                    60,
                );
                let thr = sc.threshold_ppb(1_000 * MS);
                step(&mut sc, 20 * S + 200 * MS, 1.0 + 0.5 * thr / 1e9);
                if let Some((t, g)) = second {
                    step(&mut sc, t, 1.0 + (0.5 + g) * thr / 1e9);
                }
                (sc, thr)
            };
            let (sc, thr) = world(None);
            let first = run(&sc);
            let k = first
                .recs
                .iter()
                .position(|r| matches!(r.verdict, Watch::Changed { .. }))
                .unwrap();
            // The docs' threshold right after the report: twice an interval's bound (the
            // widest a steady verdict before the report carried: the reference is exact here,
            // so its bound is the interval's) plus the baseline's, `bound_ppb` at the report.
            let b_i = first.recs[..k]
                .iter()
                .filter_map(|r| match r.verdict {
                    Watch::Steady { rate } => Some(rate.accuracy().bound_ppb()),
                    _ => None,
                })
                .max()
                .unwrap();
            let b_0 = first.recs[k].health.bound_ppb;
            let thr_docs = 2.0 * (b_i + b_0) as f64;
            let t2 = sc.hooks[k] + x;
            let (sc, _) = world(Some((t2, g)));
            let second = run(&sc);
            let n = detected_in(&second, t2);
            let over = g.abs() * thr > thr_docs;
            n_all += 1;
            n_over += usize::from(over);
            n_in3 += usize::from(n.is_some_and(|n| n <= 3));
            println!(
                "half the threshold reported at check {k} (b_i {b_i}, bound_ppb {b_0}: the docs' threshold {thr_docs:.0} ppb); then {g}x the threshold ({:.0} ppb) {} ms after that check: reported at check {n:?} after it",
                g * thr,
                x / MS
            );
            if over && n.map_or(true, |n| n > 3) {
                bad.push((g, x / MS, n));
            }
            if let Some((_, f)) = second.fails.first() {
                bad.push((g, x / MS, None));
                println!("  broke: {f}");
            }
        }
    }
    println!(
        "{n_in3} of {n_all} within three checks; {} of the {n_over} over the docs' threshold late; seeds of wait_world that broke the same way:",
        bad.len()
    );
    let r = std::panic::catch_unwind(|| wait_findings(&[3933, 3999, 5127]));
    assert!(bad.is_empty() && r.is_ok(), "{bad:?}");
}

/// Found (fixed since): a second change inside an interval extended over `Unconfirmed`
/// checks was reported (c) with the extended interval's mixed rate, outside its own bound
/// ("The new rate, measured over the confirming interval, with its bound"; README: "the
/// rate reported and the bound hold from the report on"). Seed 4719 (24 MHz vs ACPI PM, P
/// 1 s, +974 ppb at 31.77 s, +3 225 more at 35.99 s): before, `Changed` at 37.0 s to a rate
/// 2 135 ppb off under its own bound 478; after (an extended interval is one rate only where
/// its newest part agrees with it; else that part is the deviation that waits), `Unconfirmed`
/// at 37.0 s and `Changed` at 38.0 s to a rate 511 ppb off under its own bound (an interval
/// wholly after the second change); 0 of 2 400 `wait_world` seeds at
/// `BARETIME_ADV_SEEDS=300` (1 before).
#[test]
fn a_changed_rate_is_within_its_bound_when_a_second_change_falls_in_an_extended_interval() {
    wait_findings(&[4719]);
}

/// Found (fixed since): a change beyond twice the threshold soon after one under it was
/// followed by refinement and never reported (seed 4960; `bound_ppb` held throughout: it
/// held already at this round's merge, before the fix below), or reported a check late
/// (4370, 4480, 5153: the fourth check). The mechanism of
/// `a_change_right_after_a_report_is_reported_within_three_checks`: the first interval off
/// the clock's rate widened the baseline's bound; after (the baseline keeps the bound from
/// before a deviation that waits), 4370, 4480 and 5153 are reported at the second check
/// after the change, 4960 at the third; 0 of 2 400 `wait_world` seeds late at
/// `BARETIME_ADV_SEEDS=300` (8 before, with 3933, 3999, 5127 and 4719).
#[test]
fn a_change_beyond_the_threshold_after_a_small_one_is_reported_within_three_checks() {
    wait_findings(&[4960, 4370, 4480, 5153]);
}

/// A ramp world: `variant` 0 stops after `d`, 1 reverses after `d` (then stops), 2 stops and
/// resumes at the same pace 20–100 s later. Returns the scenario, its run, the ramp's start
/// and the phases during which the rate moves.
fn ramp_world(seed: u64, variant: u64) -> (Scenario, Run, u64, Vec<(u64, u64)>) {
    let mut r = Rng(seed);
    let refk = r.pick(&FINE_REFS);
    let f = r.pick(&COUNTERS);
    let p = r.pick(&[500 * MS, 1_000 * MS]);
    let checks = (240 * S / p) as usize;
    let mut sc = Scenario::new(seed, "ramps", f, refk, p, checks);
    sc.constant = false;
    let slope = r.sign() * r.pick(&[2.0, 10.0, 30.0, 100.0, 300.0, 1_000.0, 5_000.0]);
    let t0 = 10 * S + r.below(10 * S);
    let d = r.pick(&[3, 5, 10, 20, 40]) * S + r.below(S);
    sc.sched.push((t0, None, slope));
    sc.events.push(Event {
        t: t0,
        excursion_from: None,
    });
    let mut phases = vec![(t0, t0 + d)];
    match variant {
        0 => sc.sched.push((t0 + d, None, 0.0)),
        1 => {
            // Reverse (a move against the pace: a new change), then stop.
            sc.sched.push((t0 + d, None, -slope));
            sc.events.push(Event {
                t: t0 + d,
                excursion_from: None,
            });
            sc.sched.push((t0 + d + d / 2, None, 0.0));
            phases.push((t0 + d, t0 + d + d / 2));
        }
        _ => {
            // Stop, then the same pace again much later (a new change).
            sc.sched.push((t0 + d, None, 0.0));
            let t2 = t0 + d + r.range(20, 100) * S;
            sc.sched.push((t2, None, slope));
            sc.events.push(Event {
                t: t2,
                excursion_from: None,
            });
            sc.sched.push((t2 + d, None, 0.0));
            phases.push((t2, t2 + d));
        }
    }
    sc.label = format!(
        "ramps ({f} Hz vs {}, P {} ms, {slope} ppb/s from {:.1} s for {:.1} s, then {:?})",
        refk.name,
        p / MS,
        t0 as f64 / 1e12,
        d as f64 / 1e12,
        sc.sched[1..]
            .iter()
            .map(|&(t, _, s)| (t as f64 / 1e12, s))
            .collect::<Vec<_>>()
    );
    let run = run(&sc);
    (sc, run, t0, phases)
}

/// (3) Ramps that stop, reverse, or stop and resume: `bound_ppb` from each report on while the
/// rate stands (after a stop, for as long as the run lasts: past eight spans of the pace
/// carried, where it lapses), and from a reversal's report on. Misses while a ramp is still
/// moving are counted apart (`tests/adversary_watchdog3.rs`'s open
/// `a_steady_ramp_stays_within_the_bound_after_its_report`; the resumed ramp's are
/// `a_ramp_that_resumes_stays_within_the_bound`, below).
#[test]
fn ramps_that_stop_or_reverse() {
    let mut tally = Tally::new("ramps_that_stop_or_reverse");
    let mut moving = [(0u64, 0u64, 0f64); 3];
    let mut moving_seeds: [Vec<u64>; 3] = Default::default();
    for s in 0..seeds() * 6 {
        let seed = 4_000 + s;
        let variant = s % 3;
        let (sc, mut run, t0, phases) = ramp_world(seed, variant);
        if let Some(n) = detected_in(&run, t0) {
            let k = run.recs.iter().position(|r| r.t > t0).unwrap() + n - 1;
            tally.detect.push((run.recs[k].t_end - t0) as f64 / 1e12);
        }
        let before = run.fails.len();
        let recs = &run.recs;
        run.fails.retain(|(k, _)| {
            let t = recs[*k].t;
            !phases.iter().any(|&(a, b)| t >= a && t < b)
        });
        let v = variant as usize;
        moving[v].0 += 1;
        if run.fails.len() < before {
            moving[v].1 += 1;
            moving_seeds[v].push(seed);
            for (a, b) in &phases {
                for r in recs.iter().filter(|r| r.t >= *a && r.t < *b && r.judged) {
                    moving[v].2 = moving[v]
                        .2
                        .max(r.err_ppb / r.health.bound_ppb.max(1) as f64);
                }
            }
        }
        tally.add(&sc, &run, Vec::new());
    }
    for (v, (n, bad, worst)) in moving.iter().enumerate() {
        println!(
            "ramps variant {v} (0 stop, 1 reverse, 2 resume): {bad} of {n} worlds beyond bound_ppb while the ramp moved (worst {worst:.2}×): seeds {:?}",
            moving_seeds[v]
        );
    }
    tally.finish();
}

/// Found (fixed since 61b14e0/ee33eb2: the "moving" state carrying a steady ramp's worst
/// case): a ramp that resumes at its old pace after a pause (or reverses), once reported,
/// left the clock beyond `bound_ppb` while it moved ("`bound_ppb` ... While the rate keeps
/// moving (a ramp), it adds ... a worst case for a steady ramp"; "From the detection on it
/// does"). The seeds are those `ramps_that_stop_or_reverse` found at
/// `BARETIME_ADV_SEEDS=300` with a miss in the resumed ramp: 17 of 600 worlds, up to 1.57×
/// (seed 4914, 100 MHz vs 32-bit HPET, P 0.5 s, +300 ppb/s for 40.6 s from 14.9 s, again
/// from 155.5 s: 746 ppb off under 476 at 163.5 s); now 0 of 600 (0 of 200 at 100), the 17
/// at most 0.60× (4914: 1 420 ppb off under 2 379). The first ramp's misses (0 of 600 that
/// stop, 1 of 600 that reverse, 1.11×) are `tests/adversary_watchdog3.rs`'s open
/// steady-ramp finding.
#[test]
fn a_ramp_that_resumes_stays_within_the_bound() {
    let mut bad = Vec::new();
    let resumed = [
        4083u64, 4179, 4671, 4761, 4830, 4869, 4914, 5007, 5193, 5289, 5496, 5508, 5583, 5610,
        5652, 5655, 5739,
    ];
    for seed in resumed {
        let variant = 2;
        let (sc, run, _, phases) = ramp_world(seed, variant);
        if seed == 4914 {
            println!("{}", sc.label);
        }
        let mut worst = (0.0, 0, 0.0, 0);
        for &(a, b) in &phases[1..] {
            for r in run.recs.iter().filter(|r| r.t >= a && r.t < b && r.judged) {
                let ratio = r.err_ppb / r.health.bound_ppb.max(1) as f64;
                if ratio > worst.0 {
                    worst = (ratio, r.t / MS, r.err_ppb, r.health.bound_ppb);
                }
            }
        }
        println!(
            "seed {seed} variant {variant}: worst {:.2}x at {} ms: {:.0} ppb off under {}",
            worst.0, worst.1, worst.2, worst.3
        );
        if worst.0 > 1.0 {
            bad.push(seed);
        }
        for (k, f) in &run.fails {
            let t = run.recs[*k].t;
            if phases[1..].iter().any(|&(a, b)| t >= a && t < b) {
                bad.push(seed);
                println!("  {f}");
                break;
            }
        }
    }
    assert!(bad.is_empty(), "beyond the bound: seeds {bad:?}");
}

/// (4) Reads that slow down for 3, 4, 5, 6 or 12 checks, then speed up again, with a change
/// before or inside the run, or none: the first three slow checks are `WideBracket` and change
/// nothing, the fourth is judged against the floor; no alarm at constant rates; the change is
/// reported within the three checks the docs give plus one per disturbed check.
#[test]
fn wide_runs_with_changes_inside() {
    let mut tally = Tally::new("wide_runs_with_changes_inside");
    for s in 0..seeds() * 8 {
        let seed = 5_000 + s;
        let mut r = Rng(seed);
        let refk = r.pick(&[HPET, ACPI_PM, TEN_MHZ, PVCLOCK]);
        let f = r.pick(&COUNTERS);
        let p = r.pick(&PERIODS);
        let mut sc = Scenario::new(seed, "wide_runs", f, refk, p, 50);
        let n = r.pick(&[3usize, 4, 5, 6, 12]);
        let j = r.range(10, 25) as usize;
        let slow = r.pick(&[20 * US, 50 * US, 200 * US]);
        sc.slow.push((j, j + n, slow));
        let mut slow_sc = Scenario::new(seed, "", f, refk, p, 2);
        slow_sc.refk.cost = slow;
        slow_sc.ref_jit = refk.cost / 5;
        let thr_slow = slow_sc.threshold_ppb(p);
        let kind = r.below(3);
        let mut tc = None;
        if kind > 0 {
            let t = sc.hooks[j - 1] + r.below((n as u64 + 1) * p);
            let d = r.sign()
                * if kind == 1 {
                    2.5 * thr_slow
                } else {
                    1e6_f64.max(2.5 * thr_slow)
                };
            if d.abs() < 1e8 {
                step(&mut sc, t, 1.0 + d / 1e9);
                tc = Some((t, d));
            }
        }
        let run = run(&sc);
        let mut extra = Vec::new();
        for i in 0..n.min(3) {
            let v = run.recs[j + i].verdict;
            if v != Watch::NoVerdict(Unjudged::WideBracket)
                && !matches!(v, Watch::Changed { .. } | Watch::CounterJumped { .. })
            {
                extra.push(format!(
                    "wide_runs seed {seed}: slow check {} of {n} ({} µs) was {v}",
                    i + 1,
                    slow / US
                ));
            }
        }
        if n >= 4 {
            let v = run.recs[j + 3].verdict;
            if v == Watch::NoVerdict(Unjudged::WideBracket) {
                extra.push(format!(
                    "wide_runs seed {seed}: the fourth slow check ({} µs) still WideBracket",
                    slow / US
                ));
            }
        }
        if let Some((t, d)) = tc {
            let dn = detected_in(&run, t);
            let wide = run.wide_after(t, 20);
            if let Some(dn) = dn {
                let k = run.recs.iter().position(|r| r.t > t).unwrap() + dn - 1;
                tally.detect.push((run.recs[k].t_end - t) as f64 / 1e12);
            }
            if dn.map_or(true, |dn| dn > 3 + wide) {
                extra.push(format!(
                    "wide_runs seed {seed}: {d:.0} ppb ({thr_slow:.0} ppb slow threshold) around a run of {n} slow checks ({} µs) reported at check {dn:?} after, {wide} wide",
                    slow / US
                ));
            }
        }
        tally.add(&sc, &run, extra);
    }
    tally.finish();
}

/// The hook called irregularly (0.1×–10× its period), every counter rate and reference kind,
/// delayed reference reads: no (c) or (d) at constant rates, the bound at every check.
#[test]
fn irregular_hooks_at_constant_rates() {
    let mut tally = Tally::new("irregular_hooks_at_constant_rates");
    for s in 0..seeds() * 8 {
        let seed = 6_000 + s;
        let mut r = Rng(seed);
        let refk = r.pick(&ALL_REFS);
        let f = r.pick(&[
            1_001,
            32_768,
            1_000_000,
            24_000_000,
            1_000_000_000,
            3_000_000_000,
            5_000_000_000,
        ]);
        let p = r.pick(&[100 * MS, 500 * MS, 1_000 * MS]);
        let mut sc = Scenario::new(seed, "irregular_constant", f, refk, p, 2);
        let mut t = S;
        sc.hooks.clear();
        for _ in 0..60 {
            sc.hooks.push(t);
            let x = 10f64.powf(-1.0 + 2.0 * r.unit());
            t += (p as f64 * x) as u64 + 1;
        }
        sc.ref_off_ppb = r.sign() * r.unit() * 50_000.0;
        sc.ref_tol_ppb = 100_000;
        sc.start_err_ppb = r.sign() * r.unit() * 2_000.0;
        sc.start_bound_ppb = 3_000;
        sc.delay_pm = r.pick(&[0, 50, 200]);
        sc.delay_max = r.pick(&[20 * US, MS]);
        let run = run(&sc);
        tally.add(&sc, &run, Vec::new());
    }
    tally.finish();
}

/// The hook called irregularly with a change of 0.1 % (the docs: reported at the end of the
/// second interval after it, a check that follows the last closely merged into the next).
#[test]
fn irregular_hooks_with_a_change() {
    let mut tally = Tally::new("irregular_hooks_with_a_change");
    for s in 0..seeds() * 8 {
        let seed = 7_000 + s;
        let mut r = Rng(seed);
        let refk = r.pick(&FINE_REFS);
        let f = r.pick(&COUNTERS);
        let p = 500 * MS;
        let mut sc = Scenario::new(seed, "irregular_change", f, refk, p, 2);
        let mut t = S;
        sc.hooks.clear();
        for _ in 0..60 {
            sc.hooks.push(t);
            let x = 10f64.powf(-1.0 + 2.0 * r.unit());
            t += (p as f64 * x) as u64 + 1;
        }
        let j = r.range(15, 30) as usize;
        let tc = sc.hooks[j] + r.below(sc.hooks[j + 1] - sc.hooks[j]);
        let d = r.sign() * r.pick(&[1e5, 1e6, 1e7]);
        step(&mut sc, tc, 1.0 + d / 1e9);
        let run = run(&sc);
        let mut extra = Vec::new();
        let n = detected_in(&run, tc);
        if let Some(n) = n {
            let k = run.recs.iter().position(|r| r.t > tc).unwrap() + n - 1;
            tally.detect.push((run.recs[k].t_end - tc) as f64 / 1e12);
            // Intervals: accepted checks after the change up to the report.
            let acc = run
                .recs
                .iter()
                .filter(|r| r.t > tc)
                .take(n)
                .filter(|r| is_accepted(&r.verdict))
                .count();
            let short = run
                .recs
                .iter()
                .filter(|r| r.t > tc)
                .take(n)
                .filter(|r| {
                    matches!(
                        r.verdict,
                        Watch::NoVerdict(Unjudged::TooShort | Unjudged::Unconfirmed)
                    )
                })
                .count();
            if acc > 3 + short {
                extra.push(format!("irregular_change seed {seed}: {d:.0} ppb reported after {acc} accepted intervals ({short} short/unconfirmed)"));
            }
        } else {
            extra.push(format!(
                "irregular_change seed {seed}: {d:.0} ppb never reported"
            ));
        }
        tally.add(&sc, &run, extra);
    }
    tally.finish();
}

/// (5) Long gaps against narrow references (PIT, 24- and 32-bit ACPI PM, 32-bit HPET), the rate
/// known to 1 ppm or 100 ppb: `TooLong` exactly where the docs' conditions say (judged in
/// `run`), the rate and bound left alone, the next check at the period judged; a change
/// inside the gap reported by the checks after it.
#[test]
fn long_gaps_against_narrow_references() {
    let mut tally = Tally::new("long_gaps_against_narrow_references");
    let (mut big_changes, mut big_too_long) = (0, 0);
    for s in 0..seeds() * 8 {
        let seed = 8_000 + s;
        let mut r = Rng(seed);
        let refk = r.pick(&[PIT, ACPI_PM, HPET32, ACPI_PM32]);
        let f = r.pick(&[100_000_000, 1_000_000_000, 3_000_000_000]);
        let p = 500 * MS;
        let mut sc = Scenario::new(seed, "long_gaps", f, refk, p, 2);
        let bound = r.pick(&[100u64, 1_000, 10_000]);
        sc.start_bound_ppb = bound;
        sc.start_err_ppb = r.sign() * r.unit() * 0.9 * bound as f64;
        let quarter = 2f64.powi(refk.bits as i32) / refk.hz as f64 / 4.0;
        let limit = quarter / (bound as f64 / 1e9);
        let factor = r.pick(&[0.5, 0.9, 0.97, 1.03, 1.1, 1.9, 2.1, 3.0]);
        let pre = r.range(2, 12);
        sc.hooks.clear();
        let mut t = S;
        for _ in 0..pre {
            sc.hooks.push(t);
            t += p;
        }
        // At most 60 days (true time is kept in ps).
        let gap = ((limit * factor).min(60.0 * 86_400.0) * 1e12) as u64;
        let tg = t - p;
        t = tg + gap;
        for _ in 0..30 {
            sc.hooks.push(t);
            t += p + r.below(p / 100);
        }
        let mut extra = Vec::new();
        let change = r.below(3) == 0;
        let mut tc = 0;
        let mut big = false;
        if change {
            tc = tg + r.below(gap);
            let d = r.sign() * r.pick(&[2e3, 2e4, 1e6]);
            big = d.abs() >= 2.0 * sc.threshold_ppb(p);
            step(&mut sc, tc, 1.0 + d / 1e9);
        }
        let run = run(&sc);
        let kg = pre as usize;
        let vg = run.recs[kg].verdict;
        if vg == Watch::NoVerdict(Unjudged::TooLong) {
            let v = run.recs[kg + 1].verdict;
            if v == Watch::NoVerdict(Unjudged::TooLong) {
                extra.push(format!("long_gaps seed {seed}: the check at the period after a TooLong one is TooLong too"));
            }
        }
        if change && big {
            big_changes += 1;
            if run.recs[kg].verdict == Watch::NoVerdict(Unjudged::TooLong) {
                big_too_long += 1;
            }
        }
        if change && std::env::var("ATK4_GAP_DETECT").is_ok() {
            match detected_in(&run, tc) {
                _ if !big => {}
                Some(n) if n <= 4 => {}
                n => extra.push(format!(
                    "long_gaps seed {seed}: a change inside a {:.0} s gap ({}, {f} Hz, start bound {bound}, gap {factor}× the limit) reported at check {n:?} after",
                    gap as f64 / 1e12,
                    refk.name
                )),
            }
        }
        tally.add(&sc, &run, extra);
    }
    println!("long gaps: {big_changes} worlds with a change beyond twice the threshold in the gap, {big_too_long} of them TooLong");
    tally.finish();
}

/// The start bound against a PIT checked every 0.5 s: judged under 2.7 %, `TooLong` for good
/// over it (the docs' figure, when this attack was written). Since the watchdog counts such
/// a count's wraps from a short measurement of the rate where the rate in force cannot
/// (*Widths*), every start bound is judged: no check `TooLong`, every promise kept.
#[test]
fn a_pit_start_bound_around_2_7_percent() {
    let mut extra = Vec::new();
    for bound in [
        20_000_000u64,
        26_000_000,
        29_000_000,
        40_000_000,
        100_000_000,
    ] {
        let mut sc = Scenario::new(9_000 + bound, "pit_start", 1_000_000_000, PIT, 500 * MS, 12);
        sc.start_bound_ppb = bound;
        sc.start_err_ppb = 0.5 * bound as f64;
        let run = run(&sc);
        let n = run
            .recs
            .iter()
            .filter(|r| r.verdict == Watch::NoVerdict(Unjudged::TooLong))
            .count();
        if n > 0 {
            extra.push(format!(
                "pit_start: start bound {bound} ppb: {n} of 11 checks TooLong"
            ));
        }
        assert!(run.fails.is_empty(), "{:?}", run.fails);
    }
    println!("a_pit_start_bound_around_2_7_percent: {extra:?}");
    assert!(extra.is_empty(), "{extra:?}");
}

/// (6) Refinement's slew limit: the clock started off by 0.2–500 ppm under an honest bound,
/// slews from 0 to u64::MAX, every reference kind: every steer within the slew, none at 0,
/// `steers` counting them, the bound at every check, no alarm.
#[test]
fn slew_limits_from_far_off() {
    let mut tally = Tally::new("slew_limits_from_far_off");
    for s in 0..seeds() * 8 {
        let seed = 10_000 + s;
        let mut r = Rng(seed);
        let refk = r.pick(&ALL_REFS);
        let f = r.pick(&[32_768, 1_000_000, 24_000_000, 1_000_000_000, 5_000_000_000]);
        let p = r.pick(&[250 * MS, 500 * MS, 1_000 * MS, 2_000 * MS]);
        let mut sc = Scenario::new(seed, "slew", f, refk, p, 80);
        let offs: Vec<f64> = std::env::var("ATK4_OFFS")
            .ok()
            .map(|v| v.split(',').map(|x| x.parse().unwrap()).collect())
            .unwrap_or(vec![200.0, 2_000.0, 20_000.0, 100_000.0]);
        let off = r.pick(&offs);
        sc.start_err_ppb = r.sign() * off * (0.5 + 0.5 * r.unit());
        sc.start_bound_ppb = (off * r.pick(&[1.0, 1.5, 4.0])) as u64 + 50;
        sc.slew = Some(r.pick(&[0, 1, 7, 100, 1_000, 50_000, u64::MAX]));
        if r.below(2) == 0 {
            sc.ref_off_ppb = r.sign() * r.unit() * 20_000.0;
            sc.ref_tol_ppb = 20_000;
        }
        sc.label = format!(
            "slew ({} Hz vs {}, P {} ms, start {:.0} ppb off under {}, slew {:?})",
            f,
            refk.name,
            p / MS,
            sc.start_err_ppb,
            sc.start_bound_ppb,
            sc.slew.unwrap()
        );
        let run = run(&sc);
        tally.add(&sc, &run, Vec::new());
    }
    tally.finish();
}

/// A 0.1 % change in the first interval, or in the first after a reported change (the window
/// has no span then): reported within three checks, like any other.
#[test]
fn a_change_where_the_window_has_no_span() {
    let mut bad = Vec::new();
    for s in 0..seeds() * 4 {
        let seed = 11_000 + s;
        let mut r = Rng(seed);
        let refk = r.pick(&FINE_REFS);
        let j = r.below(6) as usize;
        let mut sc = Scenario::new(seed, "no_span", r.pick(&COUNTERS), refk, 500 * MS, 30);
        let t = sc.hooks[j] + r.below(500 * MS);
        step(&mut sc, t, 1.001);
        let t2 = sc.hooks[j + 3] + r.below(500 * MS);
        step(&mut sc, t2, 1.002);
        let run = run(&sc);
        let (a, b) = (detected_in(&run, t), detected_in(&run, t2));
        if a.map_or(true, |n| n > 3) || b.map_or(true, |n| n > 3) || !run.fails.is_empty() {
            bad.push(format!("seed {seed}: {a:?} {b:?} {:?}", run.fails.first()));
        }
    }
    println!(
        "a_change_where_the_window_has_no_span: {} worlds, {} failing",
        seeds() * 4,
        bad.len()
    );
    assert!(bad.is_empty(), "{bad:?}");
}

/// An excursion inside one interval, of `g` times an interval's threshold in count (a small
/// step of the counter's count): never (c), `bound_ppb` three samples after it.
fn count_step_world(seed: u64) -> (Scenario, u64, u64, f64) {
    let mut r = Rng(seed);
    let refk = r.pick(&FINE_REFS);
    let f = r.pick(&COUNTERS);
    let p = r.pick(&PERIODS);
    let mut sc = Scenario::new(seed, "count_step", f, refk, p, 100);
    let thr = sc.threshold_ppb(p);
    let j = r.range(20, 80) as usize;
    let a = sc.hooks[j] + 20 * US + r.below(p / 2);
    let u = MS + r.below(sc.hooks[j + 1] - a - 30 * US - MS);
    let g = r.pick(&[0.2, 0.5, 0.8, 1.2, 3.0]);
    // The count moves by δ·u: g times an interval's bound (half the threshold) over P.
    let d = r.sign() * (g * thr / 2.0 * p as f64 / u as f64).min(5e7);
    sc.sched.push((a, Some(1.0 + d / 1e9), 0.0));
    sc.sched.push((a + u, Some(1.0), 0.0));
    sc.events.push(Event {
        t: a,
        excursion_from: None,
    });
    sc.events.push(Event {
        t: a + u,
        excursion_from: Some(a),
    });
    sc.constant = false;
    sc.label = format!(
        "count_step ({f} Hz vs {}, P {} ms, threshold {thr:.0} ppb, {d:.0} ppb for {:.1} ms at {:.4} s: {g}× an interval's bound in count)",
        refk.name,
        p / MS,
        u as f64 / 1e9,
        a as f64 / 1e12
    );
    (sc, a, a + u, g)
}

/// Found (fixed since): a small step of the counter's count (a rate excursion that ends
/// inside the interval it began in) under an interval's threshold was reported as (c): 44 of
/// 2 500 worlds at `BARETIME_ADV_SEEDS=100` (0.5×: 2, 0.8×: 17, 1.2×: 25), 129 of 7 500 at
/// 300 (seed 12005: 3 GHz vs HPET, P 1 s, −1 878 ppb for 524 ms: `Changed` 3 checks after,
/// the clock moved from 4 to 49 ppb off). A move of the window's parts is now reported only
/// where no one-off step between two of the window's samples, at a rate the older part
/// allows on both sides, fits them: 0 of 2 500, 0 of 7 500 at 300. `bound_ppb` below the
/// error three samples on is counted apart here (a separate promise, still open:
/// `a_small_count_step_leaves_bound_ppb_above_the_error`): 1 of 2 500 before (1.09×), 0
/// after; at 300, 6 of 7 500 (1.18×) before, 5 (1.15×) after.
#[test]
fn a_small_count_step_is_never_a_change() {
    let mut tally = Tally::new("a_small_count_step_is_never_a_change");
    let mut changed = 0;
    let mut missed = 0;
    let mut worst_miss = 0.0f64;
    let mut by_g: std::collections::BTreeMap<String, (u64, u64)> = Default::default();
    for s in 0..seeds() * 25 {
        let seed = 12_000 + s;
        let (sc, a, _, g) = count_step_world(seed);
        let mut run = run(&sc);
        // `bound_ppb` below the error: the open finding below, counted apart.
        let before = run.fails.len();
        run.fails.retain(|(_, f)| !f.contains("> bound_ppb"));
        if run.fails.len() < before {
            missed += 1;
            worst_miss = run
                .recs
                .iter()
                .filter(|r| r.judged && r.health.bound_ppb > 0)
                .map(|r| r.err_ppb / r.health.bound_ppb as f64)
                .fold(worst_miss, f64::max);
        }
        let mut extra = Vec::new();
        let e = by_g.entry(format!("{g}")).or_default();
        e.0 += 1;
        if let Some(n) = detected_in(&run, a) {
            e.1 += 1;
            changed += 1;
            extra.push(format!(
                "{} seed {seed}: Changed {n} checks after",
                sc.label
            ));
        }
        tally.add(&sc, &run, extra);
    }
    println!("count steps: {changed} reported as (c), {missed} with a judged check beyond bound_ppb (counted apart, worst {worst_miss:.3}x); by g (worlds, (c)): {by_g:?}");
    tally.finish();
}

/// Finding: after a small count step (a rate excursion inside one interval) that the
/// window's samples still fit with one line, refinement steers toward the window's rate,
/// which the step tilts, and `bound_ppb` (the window's distance and bound) falls below the
/// clock's error from three samples on ("one whose offset still fits changes no sample by
/// more than its bracket, and is covered"). Seeds of `a_small_count_step_is_never_a_change`
/// at `BARETIME_ADV_SEEDS=300` (seed 15964: 3 GHz vs HPET, P 0.5 s, −3 085 ppb for 213 ms at
/// 16.69 s: a steer in the check right after it moves the clock from 0 to 59 ppb off under
/// 57, then 54).
#[test]
#[ignore = "finding: bound_ppb covers a one-off whose offset still fits one line, broken: seed 15964, 3 GHz vs HPET, P 0.5 s, -3 085 ppb for 213 ms: a steer right after it leaves the clock 59 ppb off under 57 and 54 (1.09x) three samples on; 5 of 7 500 at BARETIME_ADV_SEEDS=300 (up to 1.15x), 0 of 2 500 at 100"]
fn a_small_count_step_leaves_bound_ppb_above_the_error() {
    let mut bad = Vec::new();
    for seed in [15_964u64, 16_079, 16_487, 17_130, 18_483] {
        let (sc, ..) = count_step_world(seed);
        let run = run(&sc);
        if let Some((_, f)) = run.fails.iter().find(|(_, f)| f.contains("> bound_ppb")) {
            bad.push(f.clone());
        }
    }
    assert!(bad.is_empty(), "{bad:?}");
}

/// Found (fixed since): a change inside a gap that was `TooLong` was reported only after
/// eight `Unconfirmed` checks: the measuring restarts, the first interval after widened
/// `bound_ppb` to its own distance, so the next agreed with both it and the baseline and was
/// extended ("a change not yet detected, seen by the checks at the hook's period after it";
/// *Detection time*: "at most three periods P after the change when no check is disturbed").
/// Before: PIT, 1 GHz, rate known to 1 ppm, a 41 200 s gap holding +0.1 %: reported at the
/// 11th check after the gap (8 `Unconfirmed`); 17 of 17 `TooLong` gaps with a change beyond
/// twice the threshold in `long_gaps` at `BARETIME_ADV_SEEDS=100`. After (the baseline keeps
/// the bound from before a deviation that waits): the third check in all three worlds here
/// (the gap's, `Unconfirmed`, `Changed`), and every change beyond twice the threshold in
/// `long_gaps` within four checks (`ATK4_GAP_DETECT=1`: 142 at 100 seeds, 17 of them in a
/// `TooLong` gap; 437 and 48 at 300).
#[test]
fn a_change_inside_a_too_long_gap_is_reported_within_three_checks() {
    let mut bad = Vec::new();
    for (refk, bound, gap_s) in [
        (PIT, 1_000u64, 41_200u64),
        (ACPI_PM, 1_000, 1_300_000),
        (PIT, 100, 300_000),
    ] {
        let mut sc = Scenario::new(
            13_000 + bound,
            "gap_change",
            1_000_000_000,
            refk,
            500 * MS,
            12,
        );
        sc.start_bound_ppb = bound;
        let tg = *sc.hooks.last().unwrap();
        for k in 0..12 {
            sc.hooks.push(tg + gap_s * S + k * 500 * MS);
        }
        step(&mut sc, tg + gap_s * S / 2, 1.001);
        let run = run(&sc);
        let vg = run.recs[12].verdict;
        let n = detected_in(&run, tg + gap_s * S / 2);
        println!(
            "{} {} s gap, rate known to {bound} ppb: the gap's check {vg}, +0.1 % reported at check {n:?} after it",
            refk.name, gap_s
        );
        if n.map_or(true, |n| n > 4) {
            bad.push((refk.name, gap_s, n));
        }
    }
    assert!(bad.is_empty(), "{bad:?}");
}

/// Found (fixed since, in the docs): after three slow checks the fourth was judged, not
/// rejected, where the docs said "after four checks in a row rejected, `w_min` becomes the
/// narrowest of their brackets" and "costs four checks, not every one" (this test was
/// `four_slow_checks_are_rejected_before_the_floor`: 1 GHz vs HPET, reads slowed from 0.6 µs
/// to 20/50/200 µs at check 10: `WideBracket` at 10–12, `Steady` at 13; 3 `WideBracket` in
/// every run of 3–12 slow checks, 2 400 in 800 worlds at `BARETIME_ADV_SEEDS=100`). The code
/// is right (the fourth wide bracket is as honest a sample as any: its width is its
/// worst-case uncertainty, and the floor carries it; rejecting it too would only cost a
/// period), the docs were wrong: they now say the fourth wide check in a row is judged
/// against the narrowest of the four brackets, three rejected. Judged here: three
/// `WideBracket`, then the fourth judged.
#[test]
fn the_fourth_slow_check_is_judged_against_the_floor() {
    let mut bad = Vec::new();
    for (i, slow) in [20 * US, 50 * US, 200 * US].into_iter().enumerate() {
        let mut sc = Scenario::new(
            14_000 + i as u64,
            "floor",
            1_000_000_000,
            HPET,
            500 * MS,
            30,
        );
        sc.slow.push((10, 16, slow));
        let run = run(&sc);
        let v: Vec<String> = run.recs[10..16]
            .iter()
            .map(|r| r.verdict.to_string())
            .collect();
        println!("{} µs reads from check 10 to 15: {v:?}", slow / US);
        if run.recs[10..13]
            .iter()
            .any(|r| r.verdict != Watch::NoVerdict(Unjudged::WideBracket))
            || run.recs[13].verdict == Watch::NoVerdict(Unjudged::WideBracket)
        {
            bad.push(slow / US);
        }
    }
    assert!(
        bad.is_empty(),
        "not three WideBracket then the fourth judged at {bad:?} µs"
    );
}

/// Found (fixed since): a clock started more than about 100 ppm slow under an honest bound, at constant
/// rates, is reported (c) once the window's bound has shrunk ("False alarms: none";
/// "where they disagree beyond both bounds, the clock's rate is wrong (the counter's rate
/// changed, or the starting bound did not hold)": it held). Observed, not read: at the
/// report `bound_ppb` was 300 025 ppb while the clock was 300 000 ppb off in ppb of the
/// counter's rate, 300 090 in ppb of the clock's own (−300 ppm: the two differ by the error
/// squared, 90 ppb), and only slow starts break: the comparison seems to take the clock's
/// distance in ppb of the clock's rate against a bound made in ppb of the counter's. In that
/// convention `bound_ppb` itself misses by 3 ppb in `slew_limits_from_far_off` (seed 10669,
/// 97 ppm slow, 96 728 > 96 725); every judgement in this file takes ppb of the counter's
/// rate as the reference counts it. Confirmed in the code: the window was compared with the
/// clock by `|w − clock|` in ppb of the clock's rate against a claim made in ppb of the
/// window's. Before: `Changed` at check 41 (slew 0) / 53 (1 ppm);
/// `ATK4_OFFS=200000 BARETIME_ADV_SEEDS=100` `slew_limits_from_far_off`: 51 of 800 worlds
/// (218 at `ATK4_OFFS=1000000`, 298 at 5 000 000). Every distance of the clock's rate from a
/// measured one is now in ppb of the measured rate (the counter's, `bound_ppb`'s
/// convention), and a bound built from one is widened by `1/(1 − its bound)` (the counter's
/// rate may be that much slower): no `Changed` here; 0 of 800 at each of those offsets.
#[test]
fn a_clock_started_far_off_under_an_honest_bound_is_no_change() {
    let mut bad = Vec::new();
    for (i, err) in [
        -300_000.0, -150_000.0, -120_000.0, -100_000.0, 150_000.0, 300_000.0,
    ]
    .into_iter()
    .enumerate()
    {
        for slew in [0u64, 1_000] {
            let mut sc = Scenario::new(
                15_000 + i as u64,
                "far_off",
                1_000_000_000,
                HPET,
                500 * MS,
                120,
            );
            sc.start_err_ppb = err;
            sc.start_bound_ppb = 2 * err.abs() as u64;
            sc.slew = Some(slew);
            let run = run(&sc);
            let c = run
                .recs
                .iter()
                .position(|r| matches!(r.verdict, Watch::Changed { .. }));
            println!(
                "start {err} ppb off under {}, slew {slew}: first Changed at check {c:?}",
                sc.start_bound_ppb
            );
            if c.is_some() {
                bad.push((err, slew, c));
            }
        }
    }
    assert!(bad.is_empty(), "{bad:?}");
}

/// Found (the docs made plain since, not the code): a change at "1.02 times the threshold"
/// reported at the fifth check after it, where the docs give a period more than three ("the
/// two are then judged as one interval twice as long (half the threshold), and the change
/// reported a period later"). Seed 2762: 5 GHz vs pvclock, P 1 s, +260 ppb at 9.77 s:
/// Steady, Steady, Unconfirmed, Unconfirmed, Changed, before and after. The threshold here
/// (`threshold_ppb`) assumes steps of one tick; the watchdog's bound, and so its threshold,
/// uses the *learnt* steps ("The bound, and so the detection threshold below, uses the
/// learnt steps"), and a 5 GHz counter read in about 20 ns and a pvclock read in about 80
/// learn steps of about 107 ticks and 80 ns: the intervals' bounds before the change are
/// 207–222 ppb, and +260 ppb is 0.59 of twice the widest, a change under the threshold,
/// which the window's split reports (here at the fifth check): no promise broken, but the
/// docs did not say what a learnt step is where reads are slower than a tick. They now say
/// what the learnt steps are on fast counters and references, with this world's figures,
/// and count the baseline's bound in the threshold. Asserted: where the change is at least
/// 1.02 times the threshold the intervals' own bounds give (twice the widest a steady
/// verdict carried in the ten checks before it; the reference is exact, so that is the
/// interval's), reported within four checks; and every judgement of `run`.
#[test]
fn a_change_at_the_threshold_is_reported_a_period_late_at_most() {
    let (sc, t, d) = near_world(2762, 1.02);
    let run = run(&sc);
    let n = detected_in(&run, t);
    let k0 = run.recs.iter().position(|r| r.t > t).unwrap();
    let v: Vec<String> = run.recs[k0..k0 + 6]
        .iter()
        .map(|r| r.verdict.to_string())
        .collect();
    let b_i = run.recs[k0.saturating_sub(10)..k0]
        .iter()
        .filter_map(|r| match r.verdict {
            Watch::Steady { rate } => Some(rate.accuracy().bound_ppb()),
            _ => None,
        })
        .max()
        .unwrap();
    let ratio = d.abs() / (2.0 * b_i as f64);
    println!(
        "{}: {d:.0} ppb, {ratio:.2} of twice the intervals' bound before it ({b_i} ppb); checks after it: {v:?}",
        sc.label
    );
    assert!(run.fails.is_empty(), "{:?}", run.fails.first());
    assert!(
        ratio < 1.02 || n.is_some_and(|n| n <= 4),
        "reported at check {n:?} after it"
    );
}

/// A ramp with a step against its pace 2.5–10× the threshold, during the ramp or after it
/// stopped: (scenario, run, ramp start, ramp length, step time, whether the ramp stopped, P).
fn against_world(seed: u64) -> (Scenario, Run, u64, u64, u64, bool, u64) {
    let mut r = Rng(seed);
    let refk = r.pick(&FINE_REFS);
    let f = r.pick(&COUNTERS);
    let p = r.pick(&[500 * MS, 1_000 * MS]);
    let mut sc = Scenario::new(seed, "against_pace", f, refk, p, (120 * S / p) as usize);
    let thr = sc.threshold_ppb(p);
    // `ATK4_SLOW_RAMPS`: ramps slower than the window before the step can show (a probe of
    // what `bound_ppb` leaves uncovered: ramps not yet seen).
    let slopes: &[f64] = if std::env::var("ATK4_SLOW_RAMPS").is_ok() {
        &[5.0, 10.0, 15.0, 20.0]
    } else {
        &[30.0, 100.0, 300.0, 1_000.0]
    };
    let slope = r.sign() * r.pick(slopes);
    let t0 = 10 * S + r.below(5 * S);
    let d = r.range(10, 30) * S;
    sc.sched.push((t0, None, slope));
    sc.events.push(Event {
        t: t0,
        excursion_from: None,
    });
    let stops = r.below(2) == 0;
    if stops {
        sc.sched.push((t0 + d, None, 0.0));
    }
    let ts = t0 + d / 2 + if stops { d } else { 0 } + r.below(p);
    let g = r.pick(&[2.5, 5.0, 10.0]);
    // The rate at `ts`, in ppb of the start, then the step against the pace.
    let at = slope * ((ts.min(if stops { t0 + d } else { ts }) - t0) as f64 / 1e12);
    let step_ppb = -slope.signum() * g * thr;
    sc.sched.push((
        ts,
        Some(1.0 + (at + step_ppb) / 1e9),
        if stops { 0.0 } else { slope },
    ));
    sc.events.push(Event {
        t: ts,
        excursion_from: None,
    });
    sc.constant = false;
    sc.label = format!(
        "against_pace ({f} Hz vs {}, P {} ms, threshold {thr:.0} ppb, {slope} ppb/s from {:.1} s{}, {step_ppb:.0} ppb at {:.3} s)",
        refk.name,
        p / MS,
        t0 as f64 / 1e12,
        if stops { format!(" for {:.1} s", d as f64 / 1e12) } else { String::new() },
        ts as f64 / 1e12
    );
    let run = run(&sc);
    (sc, run, t0, d, ts, stops, p)
}

/// (2) A step against a ramp's pace (during the ramp, or after it stopped), 2.5–10× the
/// threshold: a move the other way is a new change, reported within three checks; the bound
/// from the report on while the rate stands.
#[test]
fn a_step_against_the_pace() {
    let mut tally = Tally::new("a_step_against_the_pace");
    let mut moving_misses = 0;
    let mut continuing = 0u64;
    let mut first_ramp_misses = 0u64;
    let mut stop_misses = Vec::new();
    let mut late_moving = Vec::new();
    for s in 0..seeds() * 8 {
        let seed = 17_000 + s;
        let (sc, mut run, t0, d, ts, stops, p) = against_world(seed);
        let mut extra = Vec::new();
        let n = detected_in(&run, ts);
        if let Some(n) = n {
            let k = run.recs.iter().position(|r| r.t > ts).unwrap() + n - 1;
            tally.detect.push((run.recs[k].t_end - ts) as f64 / 1e12);
        }
        if n.map_or(true, |n| n > 3) {
            let m = format!(
                "{} seed {seed}: the step reported at check {n:?} after it",
                sc.label
            );
            if stops {
                extra.push(m);
            } else {
                late_moving.push(m);
            }
        }
        continuing += u64::from(!stops);
        // Misses while the ramp moves before the step are `tests/adversary_watchdog3.rs`'s
        // open steady-ramp finding; after the step (the ramp going on) they are
        // `a_ramp_that_goes_on_after_a_step_against_it_stays_within_the_bound`: both counted
        // apart.
        let ramp_end = if stops { t0 + d } else { ts };
        {
            let before = run.fails.len();
            let recs = &run.recs;
            run.fails.retain(|(k, f)| {
                !(recs[*k].t >= t0 && recs[*k].t < ramp_end && f.contains("> bound_ppb"))
            });
            first_ramp_misses += u64::from(run.fails.len() < before);
        }
        // Right after a stop (four periods): `a_ramp_that_stops_stays_within_the_bound`.
        if stops {
            let before = run.fails.len();
            let recs = &run.recs;
            run.fails.retain(|(k, f)| {
                !(recs[*k].t >= ramp_end
                    && recs[*k].t < ramp_end + 4 * p
                    && f.contains("> bound_ppb"))
            });
            if run.fails.len() < before {
                stop_misses.push(seed);
            }
        }
        if !stops {
            let before = run.fails.len();
            let recs = &run.recs;
            run.fails
                .retain(|(k, f)| !(recs[*k].t >= ts && f.contains("> bound_ppb")));
            if run.fails.len() < before {
                moving_misses += 1;
                if std::env::var("ATK4_MOVING").is_ok() {
                    let worst = run
                        .recs
                        .iter()
                        .filter(|r| r.judged && r.t >= ts)
                        .map(|r| (r.err_ppb / r.health.bound_ppb.max(1) as f64, r.t / MS))
                        .fold((0.0, 0), |a, b| if b.0 > a.0 { b } else { a });
                    let before_step = run
                        .recs
                        .iter()
                        .filter(|r| r.judged && r.t >= t0 && r.t < ts)
                        .map(|r| r.err_ppb / r.health.bound_ppb.max(1) as f64)
                        .fold(0.0, f64::max);
                    println!(
                        "MOVING {} seed {seed}: worst after the step {:.2}x at {} ms; before it {before_step:.2}x",
                        sc.label, worst.0, worst.1
                    );
                }
            }
        }
        tally.add(&sc, &run, extra);
    }
    println!(
        "a_step_against_the_pace: {} worlds beyond bound_ppb while the ramp moved before the step, {stop_misses:?} within four periods after it stopped; of {continuing} worlds whose ramp goes on after the step, {moving_misses} beyond bound_ppb after it, {} reported late: {:?}",
        first_ramp_misses,
        late_moving.len(),
        late_moving.iter().take(4).collect::<Vec<_>>()
    );
    tally.finish();
}

/// The worst check after the step `ts` of each world: (error / bound, ms, error, bound).
fn worst_after_step(seeds: &[u64]) -> Vec<u64> {
    let mut bad = Vec::new();
    for &seed in seeds {
        let (sc, run, _, _, ts, stops, _) = against_world(seed);
        assert!(!stops);
        let worst = run
            .recs
            .iter()
            .filter(|r| r.judged && r.t >= ts)
            .map(|r| {
                (
                    r.err_ppb / r.health.bound_ppb.max(1) as f64,
                    r.t / MS,
                    r.err_ppb,
                    r.health.bound_ppb,
                )
            })
            .fold((0.0, 0, 0.0, 0), |a, b| if b.0 > a.0 { b } else { a });
        println!(
            "{} seed {seed}: worst {:.2}x at {} ms: {:.0} ppb off under {}",
            sc.label, worst.0, worst.1, worst.2, worst.3
        );
        if worst.0 > 1.0 {
            bad.push(seed);
        }
    }
    bad
}

/// Found (fixed since 6f45abf): a slow ramp whose bend showed before a step against its pace
/// (a sample no line fit with the window's older ones) and that goes on after it: once the
/// eight spans the step's report carries lapsed, the bound fell from the ramp's term to the
/// window's, below the clock's error, until the ramp was reported again ("a ramp is covered
/// from its report on"; "a rate seen moving may go on moving at a pace ... that nothing since
/// has shown"). Seed 17533 (24 MHz vs ACPI PM, P 1 s, +30 ppb/s from 15.0 s, −32 254 ppb at
/// 25.99 s, reported at 28.0 s): at 44.0 s the bound fell from 2 302 to 108 ppb, the clock
/// 271 ppb off under 108 (2.50×) at 45.0 s; 17489, 17633, 17647: 2.20×, 2.18×, 2.16×. The
/// ramp's bend had shown before the step (here at 23.0 s) but counted as a move only while
/// one was already seen. Such a sample is now a move seen from the next move on (the step's
/// report), over the span one line still fitted then: 0.35×, 0.29×, 0.37×, 0.36× at worst.
/// In `a_step_against_the_pace`, 30 of 395 worlds beyond the bound after the step → 7 (93
/// of 1 214 → 29 at `BARETIME_ADV_SEEDS=300`, worst 2.95× → 2.53×): each a ramp whose bend
/// never showed before the step (the finding below).
#[test]
fn a_ramp_seen_before_a_step_against_it_stays_within_the_bound() {
    let bad = worst_after_step(&[17533, 17489, 17633, 17647]);
    assert!(bad.is_empty(), "beyond bound_ppb: seeds {bad:?}");
}

/// Found (fixed since): a slow ramp whose bend never showed before a step against its pace,
/// and that goes on after it: the step's report carried a ramp's worst case for eight times
/// the span it was seen over (two periods: "A single step is not told from the start of a
/// ramp ... after one, the bound carries both for those eight spans"); after that nothing
/// seen said the rate moves, the bound fell to the window's, and the clock fell beyond it
/// until the ramp's bend showed (a sample no line fits, one check later in seed 17107, then
/// its report). The seeds are the worst of `a_step_against_the_pace` at
/// `BARETIME_ADV_SEEDS=100` after 6f45abf: seed 17107 (100 MHz vs ACPI PM, P 1 s, −30 ppb/s
/// from 12.5 s, +15 394 ppb at 20.21 s, reported at 22.0 s): 292 ppb off under 130 (2.25×)
/// at 42.0 s; 17423, 17161, 17351, 17366: 2.17×, 2.15×, 1.88×, 1.87×. 7 of 395 at 100 and
/// 29 of 1 214 at 300 (up to 2.53×), every one at ±30 ppb/s against an ACPI PM timer or a
/// 32-bit HPET. Partly fixed twice before: 61b14e0/ee33eb2 (the "moving" state; 149 → 27 of
/// 395) and 6f45abf (a ramp seen before the step:
/// `a_ramp_seen_before_a_step_against_it_stays_within_the_bound`; 30 → 7). Now a change two
/// intervals confirmed keeps a steady ramp's worst case in the bound until the window since
/// is as long as the window they were judged against (a ramp that window hid may go on
/// hidden for as long again; a sample no line fits meanwhile is a move): 0.43×, 0.47×,
/// 0.45×, 0.45×, 0.29× at worst; 0 of 395, 0 of 1 214 at 300. Slower ramps (±5–20 ppb/s,
/// `ATK4_SLOW_RAMPS=1` in `a_step_against_the_pace`) can stay hidden longer than that, and
/// are then ramps not yet seen, as `bound_ppb` says: 58 of 395 beyond the bound (144 before).
#[test]
fn a_ramp_that_goes_on_after_a_step_against_it_stays_within_the_bound() {
    let bad = worst_after_step(&[17107, 17423, 17161, 17351, 17366]);
    assert!(bad.is_empty(), "beyond bound_ppb: seeds {bad:?}");
}

/// Found (fixed since 61b14e0/ee33eb2): right after a followed ramp stopped, `bound_ppb` fell
/// below the clock's error until the next report (seed 17739: 100 MHz vs 32-bit HPET, P 0.5
/// s, +100 ppb/s from 13.2 s to 31.2 s: 391 ppb off under 369 at 32.0 s and 271, 1.44×, at
/// 32.5 s; 1 of 405 stopped ramps at `BARETIME_ADV_SEEDS=100`, 1 of 1 186 at 300). Now no
/// check of it beyond the bound, and `a_step_against_the_pace` counts 0 stopped ramps beyond
/// it within four periods of the stop at 100 and at 300.
#[test]
fn a_ramp_that_stops_stays_within_the_bound() {
    let (sc, run, _, _, _, stops, _) = against_world(17739);
    assert!(stops);
    for (_, f) in &run.fails {
        println!("{f}");
    }
    let _ = sc;
    assert!(run.fails.is_empty(), "{} checks broken", run.fails.len());
}

/// A step of the counter's count (its rate unchanged), 0.2–3 times an interval's bound in
/// count, after 20–80 steady checks: a one-off, never (c) ("a small step of either count").
///
/// Found (fixed since): seed 18041 (1 GHz vs HPET, P 0.5 s, constant rates, the count 657
/// ticks ahead at 15.85 s) was `Changed` at 17.0 s to +330 ppb (the window's parts apart
/// by the step spread over the recent part), the clock from 5 to 329 ppb off; 60 of 2 500
/// worlds at `BARETIME_ADV_SEEDS=100` (0.5×: 3 of 523, 0.8×: 28 of 510, 1.2×: 29 of 501,
/// none at 0.2× or 3×), 142 of 7 500 at 300. A move of the window's parts that a one-off
/// step between two samples fits (the samples on each side on lines of one rate the older
/// part allows) is no longer reported: 0 of 2 500, 0 of 7 500 at 300. `bound_ppb` below the
/// error three samples on (another promise, printed, not asserted here; see
/// `a_small_count_step_leaves_bound_ppb_above_the_error`): 1 world at 100 before and after
/// (seed 18744, 47 ppb off under 44, now 43), 5 → 4 at 300.
#[test]
fn a_step_of_the_count_is_never_a_change() {
    let mut by_g: std::collections::BTreeMap<String, (u64, u64)> = Default::default();
    let mut first = Vec::new();
    let mut other = Vec::new();
    for s in 0..seeds() * 25 {
        let seed = 18_000 + s;
        let mut r = Rng(seed);
        let refk = r.pick(&FINE_REFS);
        let f = r.pick(&COUNTERS);
        let p = r.pick(&PERIODS);
        let mut sc = Scenario::new(seed, "count_jump", f, refk, p, 100);
        let thr = sc.threshold_ppb(p);
        let j = r.range(20, 80) as usize;
        let t = sc.hooks[j] + 20 * US + r.below(p - 40 * US);
        let g = r.pick(&[0.2, 0.5, 0.8, 1.2, 3.0]);
        let ticks = (r.sign() * g * thr / 2.0 / 1e9 * (p as f64 / 1e12) * f as f64).round() as i64;
        sc.jumps.push((t, ticks));
        sc.events.push(Event {
            t,
            excursion_from: Some(t),
        });
        sc.constant = false;
        sc.label = format!(
            "count_jump ({f} Hz vs {}, P {} ms, threshold {thr:.0} ppb, {ticks} ticks at {:.4} s: {g}x an interval's bound)",
            refk.name,
            p / MS,
            t as f64 / 1e12
        );
        let run = run(&sc);
        if !run.fails.is_empty() {
            other.push(run.fails[0].1.clone());
        }
        let e = by_g.entry(format!("{g}")).or_default();
        e.0 += 1;
        if let Some(n) = detected_in(&run, t) {
            e.1 += 1;
            if first.len() < 4 {
                first.push(format!(
                    "{} seed {seed}: Changed {n} checks after",
                    sc.label
                ));
            }
        }
    }
    println!(
        "count jumps by g (worlds, (c)): {by_g:?}; {} worlds broke another judgement: {:?}",
        other.len(),
        other.iter().take(3).collect::<Vec<_>>()
    );
    for f in &first {
        println!("  {f}");
    }
    assert!(first.is_empty(), "{first:?}");
}

/// (5) Hooks from 0.1× their period to hours apart against narrow references (PIT, ACPI PM
/// 24/32, HPET32), the rate known to 0.1–10 ppm, constant rates: `TooLong` exactly where
/// *Widths* says (judged in `run`), every other gap judged without aliasing: no alarm,
/// `bound_ppb` at every check.
#[test]
fn wild_gaps_against_narrow_references() {
    let mut tally = Tally::new("wild_gaps_against_narrow_references");
    for s in 0..seeds() * 8 {
        let seed = 19_000 + s;
        let mut r = Rng(seed);
        let refk = r.pick(&[PIT, ACPI_PM, ACPI_PM32, HPET32]);
        let f = r.pick(&[24_000_000, 1_000_000_000, 3_000_000_000]);
        let p = 500 * MS;
        let mut sc = Scenario::new(seed, "wild_gaps", f, refk, p, 2);
        sc.start_bound_ppb = r.pick(&[100, 1_000, 10_000]);
        sc.start_err_ppb = r.sign() * r.unit() * 0.9 * sc.start_bound_ppb as f64;
        let mut t = S;
        sc.hooks.clear();
        for _ in 0..60 {
            sc.hooks.push(t);
            // Mostly 0.1–10 periods; one in eight up to 10^5 periods (14 h).
            let x = if r.below(8) == 0 {
                10f64.powf(5.0 * r.unit())
            } else {
                10f64.powf(-1.0 + 2.0 * r.unit())
            };
            t += (p as f64 * x) as u64 + 1;
        }
        sc.label = format!(
            "wild_gaps ({f} Hz vs {}, rate known to {} ppb)",
            refk.name, sc.start_bound_ppb
        );
        let run = run(&sc);
        tally.add(&sc, &run, Vec::new());
    }
    tally.finish();
}
