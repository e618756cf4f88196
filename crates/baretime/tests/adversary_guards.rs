//! Outside attack, round 3 (issue 14): the promises the first two attacks did not aim at —
//! `Delay` from `Clock::delay()`, the `MonotonicClock` guard, `ExtendedTimer` /
//! `NarrowTimer`, narrow-counter cadence, and promise 6's "a rebase's time counts as handed
//! out" after a continuing rebase.
//!
//! Written from the README ("Guarantees", "Narrow hardware timers"), the public items' docs
//! and issue 14 only. Each environment is drawn from what the docs allow (resets to any
//! value, lags up to `LAG_NS`, rates of any ratio within `Frequency`'s range, a nested call
//! from inside every counter read, every width), each check is the bound the doc states.
//!
//! Random cases come from a fixed-seed generator (`Rng`), so every failure reproduces.
//!
//! Default run: about 10 s on the AMD EPYC family 26 model 2, 2-vCPU KVM guest. Longer
//! sweeps by environment: `ATK3_DELAY_CASES` (default 20 000), `ATK3_EXT_CASES` (6000),
//! `ATK3_GUARD_CASES` (400; with `ATK3_GUARD_ORDER_ONLY` only the guard's own never-back
//! promise is checked, see that test), `ATK3_REBASE_CASES` (120). 30 000 delays and 6000
//! timers took 3 s there; 50 000 guard clocks (order only) and 1200 rebase sets 4.4 s.

use std::cell::Cell;
use std::time::Duration;

use baretime::{
    Clock, ClockError, Counter, Delay, ExtendedTimer, FnCounter, Frequency, Instant,
    MonotonicClock, NarrowTimer, LAG_NS, MARK_GRANULE_NS,
};

/// The handover margin (promise 2: "20 µs rounded up to whole ticks"). `LAG_NS` equals it.
const HANDOVER_NS: u64 = 20_000;
/// Promise 7's threshold: a reading this far past the latest time handed out is confirmed.
const GLITCH_NS: u64 = 1_000_000;

/// splitmix64: a fixed-seed source of cases.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (`n > 0`).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    /// In `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }
    /// Spread over magnitudes: a random bit count, then a value below it, within `lo..=hi`.
    fn log(&mut self, lo: u64, hi: u64) -> u64 {
        let bits = self.below(65) as u32;
        let raw = if bits == 0 {
            0
        } else {
            self.next() >> (64 - bits)
        };
        raw.clamp(lo, hi)
    }
    fn chance(&mut self, per_1000: u64) -> bool {
        self.below(1000) < per_1000
    }
    /// A rate anywhere in `Frequency`'s range, spread over magnitudes (whole hertz).
    fn rate(&mut self) -> u64 {
        match self.below(4) {
            0 => Frequency::MIN_HZ,
            1 => Frequency::MAX_HZ,
            _ => {
                let decade = self.range(3, 10) as u32;
                (10u64.pow(decade) + self.below(9 * 10u64.pow(decade)))
                    .clamp(Frequency::MIN_HZ, Frequency::MAX_HZ)
            }
        }
    }
}

fn hz(hz: u64) -> Frequency {
    Frequency::exact_hz(hz).unwrap()
}

/// `ticks` at `hz` in ns, rounded up.
fn ticks_ns_ceil(ticks: u64, hz: u64) -> u128 {
    (u128::from(ticks) * 1_000_000_000).div_ceil(u128::from(hz))
}

/// `ns` at `hz` in ticks, rounded down.
fn ns_ticks(ns: u64, hz: u64) -> u64 {
    (u128::from(ns) * u128::from(hz) / 1_000_000_000).min(u128::from(u64::MAX)) as u64
}

fn mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

// ─────────────────────────────────────────────────────────────────────────────────────────────
// 1. Delay / `clock.delay()`
// ─────────────────────────────────────────────────────────────────────────────────────────────

/// The world a waiting thread reads its counter in: true ticks, the CPU it is on (CPU B's
/// counter lags A's), resets (the epoch moved back), one-read glitches below the line, and an
/// "interrupt" that runs clock calls from inside a counter read.
struct DelayEnv {
    bits: u32,
    rate: u64,
    /// Nested reads leave time where it is (the clock's last reading).
    frozen: Cell<bool>,
    /// True ticks.
    t: Cell<u64>,
    /// What the counter lost to resets (both CPUs alike).
    reset: Cell<u64>,
    /// CPU B's lag behind A, ticks; whether the thread is on B.
    lag: u64,
    on_b: Cell<bool>,
    /// The last top-level read was a glitch: the next one is on the line, no event (a
    /// migration right after a glitch would make a third line, outside the docs' promise).
    glitch: Cell<u64>,
    /// Nested depth: 0 = the Delay's own read.
    depth: Cell<u32>,
    /// Reads by the Delay, and the cap past which the wait counts as never ending.
    reads: Cell<u64>,
    cap: Cell<u64>,
    /// The Delay's first two readings' true ticks (to find the first change).
    first_true: Cell<Option<u64>>,
    first_value: Cell<Option<u64>>,
    change_true: Cell<Option<u64>>,
    /// True ticks at the latest top-level read.
    last_true: Cell<u64>,
    /// Steps: `script` reads with events, then fixed steps of `max_step`.
    max_step: u64,
    script: u64,
    rng: Cell<u64>,
    /// Event rates (per 1000 top-level reads).
    p_migrate: u64,
    p_reset: u64,
    p_glitch: u64,
    p_nested: u64,
    /// The clock to call from the "interrupt".
    clock: Cell<Option<&'static Clock<DelaySim>>>,
    /// Nested-call log: a start() made mid-wait, recalibrations, rebases.
    nested_calls: Cell<u64>,
    /// Whether nested writes may change the rate (off for the by-the-clock check).
    nested_recal: bool,
    /// A nested call at every read (an update, unless another call is drawn): the cadence a
    /// narrow counter needs for the by-the-clock check.
    always_update: bool,
    /// Line changes so far (migrations, resets, glitches).
    events_used: Cell<u32>,
}

struct DelaySim(&'static DelayEnv);

impl DelayEnv {
    fn rnd(&self) -> Rng {
        Rng(self.rng.get())
    }
    fn value(&self) -> u64 {
        let line = self.t.get().wrapping_sub(self.reset.get());
        let line = if self.on_b.get() {
            line.wrapping_sub(self.lag)
        } else {
            line
        };
        line & mask(self.bits)
    }
    fn read(&'static self) -> u64 {
        let depth = self.depth.get();
        let mut rng = self.rnd();
        if depth > 0 {
            // A nested call's read: time moves about a read's time (20 ns), no events.
            // (Below a tick per read at slow rates: then none, so that a write finishes
            // within a handover margin of its start, as promise 5 assumes.)
            let wrap_part = if self.bits >= 64 {
                u64::MAX
            } else {
                (1u64 << self.bits) / 128
            };
            let per_read = ns_ticks(20, self.rate).min(self.max_step).min(wrap_part);
            if !self.frozen.get() {
                self.t.set(self.t.get() + rng.range(0, per_read));
            }
            self.rng.set(rng.0);
            return self.value();
        }
        let n = self.reads.get() + 1;
        self.reads.set(n);
        assert!(
            n <= self.cap.get(),
            "the wait did not end: {n} reads (bits {}, lag {}, max_step {})",
            self.bits,
            self.lag,
            self.max_step
        );
        if n == 1 {
            // First reading, on CPU A, no event.
            self.first_true.set(Some(self.t.get()));
            let v = self.value();
            self.first_value.set(Some(v));
            self.last_true.set(self.t.get());
            self.rng.set(rng.0);
            return v;
        }
        // At most four step backs per wait: beyond that the docs let merged ones lengthen the
        // wait by the distance between their readings (a reset's size), not a hang to find.
        let events =
            n > 2 && n <= self.script && self.glitch.get() == 0 && self.events_used.get() < 4;
        let before = (self.on_b.get(), self.reset.get());
        let step = if n <= self.script {
            rng.range(1, self.max_step)
        } else {
            self.max_step
        };
        self.t.set(self.t.get() + step);
        let mut glitch = 0;
        if events {
            if rng.chance(self.p_migrate) {
                self.on_b.set(!self.on_b.get());
            } else if !self.on_b.get() && rng.chance(self.p_reset) {
                // A reset to any lower value (narrow: less than half a wrap back, the
                // Delay docs' limit; 64-bit: anywhere down to 0).
                let line = self.t.get() - self.reset.get();
                let max_back = if self.bits >= 64 {
                    line
                } else {
                    (mask(self.bits) / 8).min(line)
                };
                let back = rng.log(1, max_back.max(1));
                self.reset.set(self.reset.get() + back.min(line));
            } else if rng.chance(self.p_glitch) {
                let line = (self.t.get() - self.reset.get()).saturating_sub(if self.on_b.get() {
                    self.lag
                } else {
                    0
                });
                let max_back = if self.bits >= 64 {
                    line
                } else {
                    (mask(self.bits) / 8).min(line)
                };
                glitch = rng.log(1, max_back.max(1)).min(line);
            }
        }
        if (self.on_b.get(), self.reset.get()) != before || glitch != 0 {
            self.events_used.set(self.events_used.get() + 1);
        }
        let nested = (events || self.always_update) && rng.chance(self.p_nested);
        let nested_kind = rng.below(6);
        let nested_rate = rng.rate();
        let nested_before = rng.chance(500);
        self.rng.set(rng.0);
        if self.always_update {
            self.nested(1, nested_rate);
        }
        if nested && nested_before {
            self.nested(nested_kind, nested_rate);
        }
        let v = self.value().wrapping_sub(glitch) & mask(self.bits);
        self.glitch.set(glitch);
        if nested && !nested_before {
            self.nested(nested_kind, nested_rate);
        }
        if self.change_true.get().is_none() && Some(v) != self.first_value.get() {
            // The first change: counting starts at a tick boundary after the first reading.
            self.change_true
                .set(Some(self.first_true.get().unwrap() + 1));
        }
        self.last_true.set(self.t.get());
        if std::env::var("ATK3_TRACE").is_ok() {
            eprintln!(
                "read {n}: t {} value {v} on_b {} reset {} glitch {glitch} nested {nested}/{nested_kind}",
                self.t.get(),
                self.on_b.get(),
                self.reset.get()
            );
        }
        v
    }
    /// The "interrupt": a clock call from inside the counter read (a stall at this call).
    fn nested(&'static self, kind: u64, rate: u64) {
        let Some(clock) = self.clock.get() else {
            return;
        };
        self.depth.set(self.depth.get() + 1);
        self.nested_calls.set(self.nested_calls.get() + 1);
        match kind {
            0 => {
                let _ = clock.now();
            }
            1 => {
                let _ = clock.update();
            }
            2 if self.nested_recal => {
                let _ = clock.recalibrate(hz(rate));
            }
            3 => {
                let now = clock.now();
                let f = if self.nested_recal {
                    hz(rate)
                } else {
                    clock.scale().frequency_or(rate)
                };
                let _ = clock.rebase(now, f);
            }
            4 => {
                // A start() mid-wait (the clock may be uninit: the delay keeps its scale).
                let f = if self.nested_recal {
                    hz(rate)
                } else {
                    clock.scale().frequency_or(rate)
                };
                let _ = clock.start(f);
            }
            _ => {
                let _ = clock.delay().scale().ns_to_ticks_ceil(1);
            }
        }
        self.depth.set(self.depth.get() - 1);
    }
}

/// The clock's own rate as a `Frequency` (for writes that must not change it).
trait FrequencyOr {
    fn frequency_or(&self, fallback: u64) -> Frequency;
}
impl FrequencyOr for baretime::Scale {
    fn frequency_or(&self, fallback: u64) -> Frequency {
        Frequency::from_millihz(
            self.millihz(),
            baretime::Source::User,
            baretime::Accuracy::Exact,
        )
        .unwrap_or_else(|| hz(fallback))
    }
}

impl Counter for DelaySim {
    fn ticks(&self) -> u64 {
        self.0.read()
    }
    fn bits(&self) -> u32 {
        self.0.bits
    }
}

/// One drawn delay case.
struct DelayCase {
    bits: u32,
    rate: u64,
    started: bool,
    lag: u64,
    max_step: u64,
    script: u64,
    p: [u64; 4],
    nested_recal: bool,
    /// Wait in ns (`wait_ns`) or ticks (`wait_ticks`).
    ns: Option<u64>,
    ticks: u64,
    start: u64,
    seed: u64,
}

/// What a case showed: true ticks from the first change to the last read, the ticks asked,
/// reads, nested calls; and the clock's times around the wait.
struct DelayRun {
    elapsed: u64,
    asked: u64,
    reads: u64,
    nested: u64,
    clock_before: Instant,
    clock_after: Instant,
    late: u64,
    behind: bool,
    /// True ticks from the clock's creation to its last reading.
    clock_true: u64,
}

fn draw_delay_case(rng: &mut Rng, quiet: bool) -> DelayCase {
    let bits = if rng.chance(300) {
        64
    } else {
        rng.range(3, 64) as u32
    };
    let rate = rng.rate();
    let half = if bits >= 64 {
        1u64 << 62
    } else {
        1u64 << (bits - 1)
    };
    // A lag up to LAG_NS at the clock's rate, and well inside half a wrap.
    let lag_max = ns_ticks(LAG_NS, rate).min(half / 8);
    let lag = if quiet { 0 } else { rng.range(0, lag_max) };
    // Quiet runs keep promise 5's cadence: an update at most every few reads.
    let max_step = rng
        .log(1, (half / if quiet { 16 } else { 4 }).clamp(1, 1 << 24))
        .max(1);
    let script = rng.range(3, 300);
    let p = if quiet {
        [0, 0, 0, 200]
    } else {
        [
            rng.below(300),
            rng.below(100),
            rng.below(200),
            rng.below(400),
        ]
    };
    let want_ticks = max_step.saturating_mul(rng.range(1, 400));
    let started = quiet || rng.chance(800);
    // An unstarted clock's delay counts at 100 GHz: ask for what that many ticks take there.
    let counted_at = if started { rate } else { Frequency::MAX_HZ };
    let (ns, ticks) = if rng.chance(500) {
        let ns = (ticks_ns_ceil(want_ticks, counted_at).min(u128::from(u64::MAX / 4))) as u64;
        (Some(ns), 0)
    } else {
        (None, want_ticks)
    };
    DelayCase {
        bits,
        rate,
        started,
        lag,
        max_step,
        script,
        p,
        nested_recal: !quiet,
        ns,
        ticks,
        start: rng.next() & mask(bits) & mask(62),
        seed: rng.next(),
    }
}

fn run_delay_case(c: &DelayCase) -> DelayRun {
    let env: &'static DelayEnv = Box::leak(Box::new(DelayEnv {
        bits: c.bits,
        rate: c.rate,
        frozen: Cell::new(false),
        t: Cell::new(c.start),
        reset: Cell::new(0),
        lag: c.lag,
        on_b: Cell::new(false),
        glitch: Cell::new(0),
        depth: Cell::new(1), // the clock's own reads before the wait are nested ones
        reads: Cell::new(0),
        cap: Cell::new(u64::MAX),
        first_true: Cell::new(None),
        first_value: Cell::new(None),
        change_true: Cell::new(None),
        last_true: Cell::new(0),
        max_step: c.max_step,
        script: c.script,
        rng: Cell::new(c.seed),
        p_migrate: c.p[0],
        p_reset: c.p[1],
        p_glitch: c.p[2],
        p_nested: c.p[3],
        clock: Cell::new(None),
        nested_calls: Cell::new(0),
        nested_recal: c.nested_recal,
        always_update: !c.nested_recal,
        events_used: Cell::new(0),
    }));
    let clock: &'static Clock<DelaySim> = Box::leak(Box::new(if c.started {
        Clock::new(DelaySim(env), hz(c.rate))
    } else {
        Clock::uninit(DelaySim(env))
    }));
    env.clock.set(Some(clock));
    let true0 = env.t.get();
    let clock_before = clock.now();
    let delay: Delay<&DelaySim> = clock.delay();
    let asked = match c.ns {
        Some(ns) => delay.scale().ns_to_ticks_ceil(ns),
        None => c.ticks,
    };
    // The wait ends at most a script, plus what the steps after it need, plus the losses a
    // step back or merge may cost (each bounded by what was counted: at most `asked`).
    let after = asked / c.max_step + 2;
    env.cap.set((c.script + after) * 64 + 1000);
    env.depth.set(0);
    match c.ns {
        Some(ns) => delay.wait_ns(ns),
        None => delay.wait_ticks(c.ticks),
    }
    env.depth.set(1);
    env.t.set(env.last_true.get()); // the clock reads at the delay's end
    env.frozen.set(true); // the clock's last reading is the wait's last
    let clock_after = clock.now();
    let elapsed = match env.change_true.get() {
        Some(from) => env.last_true.get().saturating_sub(from),
        None => 0,
    };
    DelayRun {
        elapsed,
        asked,
        reads: env.reads.get(),
        nested: env.nested_calls.get(),
        clock_before,
        clock_after,
        late: clock.health().late_updates.into(),
        behind: clock.health().counter_behind,
        clock_true: env.t.get() - true0,
    }
}

/// Promise (Delay docs, `src/delay.rs`): "Every delay lasts **at least** the requested time at
/// the configured rate", through step backs (migrations to a lagging CPU and back, resets, a
/// faulty read), on every width, "no request up to `u64::MAX` ns overflows or wraps"; and
/// `Clock::delay`: "Before `Clock::start` ... it waits at least what it is asked". The
/// environment stays inside the exceptions the docs name: the wait begins on the leading CPU
/// with a forward first change, two CPUs only (lag up to `LAG_NS` at the clock's rate),
/// resets only while on the leading CPU, narrow step backs under half a wrap. Clock calls
/// (`now`, `update`, `recalibrate` by any ratio, `rebase`, `start` of an unstarted clock) run
/// nested inside the counter read, before or after the value is taken. Also checks that the
/// wait ends (a read cap).
#[test]
fn delay_never_ends_early_through_lines_resets_glitches_and_nested_writes() {
    let mut rng = Rng(0x00de_1a7e);
    let (mut cases, mut reads, mut nested) = (0u64, 0u64, 0u64);
    for _ in 0..env_count("ATK3_DELAY_CASES", 20_000) {
        let c = draw_delay_case(&mut rng, false);
        if std::env::var("ATK3_DEBUG").is_ok() {
            eprintln!(
                "case {cases}: bits {} rate {} started {} lag {} step {} script {} p {:?} ns {:?} \
                 ticks {}",
                c.bits, c.rate, c.started, c.lag, c.max_step, c.script, c.p, c.ns, c.ticks
            );
        }
        let r = run_delay_case(&c);
        assert!(
            r.elapsed >= r.asked,
            "early: {} true ticks of {} asked (bits {}, rate {}, lag {}, max_step {}, seed {:#x})",
            r.elapsed,
            r.asked,
            c.bits,
            c.rate,
            c.lag,
            c.max_step,
            c.seed
        );
        cases += 1;
        reads += r.reads;
        nested += r.nested;
    }
    eprintln!("delay: {cases} waits, {reads} reads, {nested} nested clock calls: none early");
}

/// Promise (`Clock::delay` docs): "Before `Clock::start` ... the delay then counts ticks as
/// if the counter ran at `Frequency::MAX_HZ`, so it waits at least what it is asked"; and
/// `Clock::update_interval`: "Before `Clock::start`, the interval at the fastest rate the
/// crate accepts (`Frequency::MAX_HZ`), which is the shortest." Every width 3..=64.
#[test]
fn delay_and_update_interval_before_start_every_width() {
    let mut rng = Rng(0x5eed_0006);
    for bits in 3..=64u32 {
        let counter = FnCounter::new(|| 0, bits);
        let uninit = Clock::uninit(&counter);
        let at_max = Clock::new(&counter, hz(Frequency::MAX_HZ));
        assert_eq!(
            uninit.update_interval(),
            at_max.update_interval(),
            "bits {bits}"
        );
        for _ in 0..20 {
            let f = rng.rate();
            let other = Clock::new(&counter, hz(f));
            assert!(
                uninit.update_interval() <= other.update_interval(),
                "bits {bits}: before start {:?} > at {f} Hz {:?}",
                uninit.update_interval(),
                other.update_interval()
            );
        }
        for ns in [1u64, 3, 999, 50_000] {
            let t = Cell::new(rng.next() & mask(bits));
            let half = if bits >= 64 {
                1u64 << 62
            } else {
                1u64 << (bits - 1)
            };
            let step = rng.log(1, (half / 2).min(1 << 16)).max(1);
            let reads = Cell::new(0u64);
            let c = FnCounter::new(
                || {
                    reads.set(reads.get() + 1);
                    assert!(reads.get() < 20_000_000, "never ended");
                    t.set(t.get().wrapping_add(step) & mask(bits));
                    t.get()
                },
                bits,
            );
            let clock = Clock::uninit(&c);
            clock.delay().wait_ns(ns);
            // Reads 1 and 2 find the first change; the rest count.
            let counted = (reads.get() - 1) * step;
            let need = ns * (Frequency::MAX_HZ / 1_000_000_000);
            assert!(
                counted >= need,
                "bits {bits} ns {ns}: {counted} ticks < {need}"
            );
        }
    }
}

/// Promise (Delay docs): at least the requested time, read here by the clock itself: with no
/// step back and no change of rate (updates and continuing rebases nested in every read), the
/// clock's own difference across the wait is at least the request less promise 2's 2 ns.
#[test]
fn delay_by_the_clock_with_nested_updates_and_continuing_rebases() {
    let mut rng = Rng(0xc10c_4000);
    let mut n = 0;
    for _ in 0..1500 {
        let c = draw_delay_case(&mut rng, true);
        let r = run_delay_case(&c);
        assert!(
            r.elapsed >= r.asked,
            "early by true time: {} < {}",
            r.elapsed,
            r.asked
        );
        assert_eq!(
            (r.late, r.behind),
            (0, false),
            "cadence (bits {}, rate {}, step {})",
            c.bits,
            c.rate,
            c.max_step
        );
        // Promise 2 first: the clock less than 2 ns behind the counter's ticks.
        let truth = ticks_ns_ceil(r.clock_true, c.rate);
        let clock_ns = u128::from(r.clock_after.as_nanos());
        assert!(
            clock_ns + 2 + ticks_ns_ceil(1, c.rate) >= truth,
            "clock {clock_ns} ns, counter's time {truth} ns (bits {}, rate {}, step {})",
            c.bits,
            c.rate,
            c.max_step
        );
        let asked_ns = ticks_ns_ceil(r.asked, c.rate).saturating_sub(1);
        let by_clock = u128::from((r.clock_after - r.clock_before).as_nanos() as u64);
        // A narrow counter whose step or lag reaches past a quarter wrap is past promise 5.
        assert!(
            by_clock + 2 >= asked_ns,
            "by the clock {by_clock} ns < {asked_ns} ns asked (bits {}, rate {}, step {})",
            c.bits,
            c.rate,
            c.max_step
        );
        n += 1;
    }
    eprintln!("delay by the clock: {n} waits");
}

// ─────────────────────────────────────────────────────────────────────────────────────────────
// 2. MonotonicClock
// ─────────────────────────────────────────────────────────────────────────────────────────────

/// A 64-bit counter: true ticks minus what resets took, with glitched reads far ahead queued
/// for a given read index.
struct GuardEnv {
    t: Cell<u64>,
    back: Cell<u64>,
    reads: Cell<u64>,
    /// Reads with index in `glitch_from..glitch_from + glitch_n` are `glitch` ticks ahead.
    glitch_from: Cell<u64>,
    glitch_n: Cell<u64>,
    glitch: Cell<u64>,
}
struct GuardSim(&'static GuardEnv);
impl Counter for GuardSim {
    fn ticks(&self) -> u64 {
        let e = self.0;
        let i = e.reads.get();
        e.reads.set(i + 1);
        let v = e.t.get() - e.back.get();
        if i >= e.glitch_from.get() && i < e.glitch_from.get() + e.glitch_n.get() {
            v.wrapping_add(e.glitch.get())
        } else {
            v
        }
    }
    fn bits(&self) -> u32 {
        64
    }
}

/// Promise (`MonotonicClock` docs, `src/guard.rs`): "never returns a time earlier than one it
/// has already returned", each `now()` "returns the later of the clock's time and the latest
/// time any CPU has been given"; with `Clock` promise 7 ("one glitched read ... never becomes
/// the time, and nothing has to be waited out"; two in a row or one within 1 ms do, then time
/// stands still until the counter catches up) and promise 2 (no reading ahead of the
/// counter's time by more than `MARK_GRANULE_NS` plus a handover margin; less than 2 ns
/// behind it, except where time stands still). Environment: single and double glitches of
/// every size up to 2^61 ticks at every read position of the next call (`now`, `update`,
/// `recalibrate`, `rebase`), resets to any lower value followed (or not) by a rebase,
/// recalibrations by any ratio within 1 kHz..100 GHz. Bounds used: ahead ≤ reference +
/// granule + 2 handover margins + 2 ticks at the slowest rate (the rate applies from a close
/// point a margin after the write's reading: up to one more margin either way); behind ≥
/// reference − 2 margins − 2 ticks − 2 ns, only while no reset is pending.
#[test]
fn monotonic_clock_glitches_resets_recalibrations() {
    let mut rng = Rng(0x6a2d_0012);
    let (mut cases, mut reads, mut glitches) = (0u64, 0u64, 0u64);
    // Long sweeps (`ATK3_GUARD_ORDER_ONLY`) check the guard's own promise only: this
    // reference switches rates at the write's reading, not at its close point, and its
    // margin-sized errors add up over many writes past the fixed slack.
    let order_only = std::env::var("ATK3_GUARD_ORDER_ONLY").is_ok();
    for _ in 0..env_count("ATK3_GUARD_CASES", 400) {
        let env: &'static GuardEnv = Box::leak(Box::new(GuardEnv {
            t: Cell::new(rng.log(0, 1 << 50)),
            back: Cell::new(0),
            reads: Cell::new(0),
            glitch_from: Cell::new(u64::MAX),
            glitch_n: Cell::new(0),
            glitch: Cell::new(0),
        }));
        let mut f = rng.rate();
        let clock: &'static Clock<GuardSim> = Box::leak(Box::new(Clock::new(GuardSim(env), hz(f))));
        let guard = MonotonicClock::new(clock);
        // Reference: the counter's time at the rates in force, in ps, and where it started.
        let mut ref_ps: u128 = 0;
        let mut slowest_tick_ns = ticks_ns_ceil(1, f) as u64;
        let mut last = Instant::ZERO;
        // A floor on what the guard may return above the reference (glitches allowed by
        // promise 7), in ns; and whether a reset is pending (no lower bound then).
        let mut allowed_ns: u128 = 0;
        let mut behind = false;
        let mut log: Vec<String> = Vec::new();
        for _step in 0..60 {
            let op = rng.below(10);
            let mut accepted_glitch_ns: u128 = 0;
            if op >= 7 {
                // Before a write, the counter passes the last write's handover (a margin at
                // the rate in force): a write from a counter short of the base starts its
                // rate at the base (promise 2's words), which this reference does not model.
                let dt = ns_ticks(HANDOVER_NS, f) + 1;
                env.t.set(env.t.get() + dt);
                ref_ps += u128::from(dt) * 1_000_000_000_000_000 / u128::from(f * 1000);
            }
            match op {
                0..=3 => {
                    let dt = rng.log(1, ns_ticks(10_000_000_000, f).max(1));
                    env.t.set(env.t.get() + dt);
                    ref_ps += u128::from(dt) * 1_000_000_000_000_000 / u128::from(f * 1000);
                }
                4 | 5 => {
                    // One or two glitched reads, at read position 0..4 of the next call.
                    // Up to 2^61 ticks, and below 2^60 ns (time saturates at 584 years).
                    let g = rng.log(1, (1u64 << 61).min(ns_ticks(1 << 60, f)));
                    let n = 1 + rng.below(2);
                    env.glitch_from.set(env.reads.get() + rng.below(4));
                    env.glitch_n.set(n);
                    env.glitch.set(g);
                    let g_ns = ticks_ns_ceil(g, f);
                    accepted_glitch_ns = if n == 1 {
                        g_ns.min(u128::from(GLITCH_NS) + 1)
                    } else {
                        g_ns
                    };
                    glitches += 1;
                }
                6 => {
                    // A reset to any lower value.
                    let v = env.t.get() - env.back.get();
                    let to = rng.log(0, v);
                    env.back.set(env.t.get() - to);
                    if to < v {
                        behind = true;
                    }
                }
                7 => {
                    let nf = rng.rate();
                    match clock.recalibrate(hz(nf)) {
                        Ok(()) | Err(ClockError::Late) => {
                            f = nf;
                            slowest_tick_ns = slowest_tick_ns.max(ticks_ns_ceil(1, f) as u64);
                        }
                        Err(ClockError::Behind) => {}
                        Err(e) => panic!("recalibrate: {e:?}"),
                    }
                }
                _ => {
                    // A rebase from what the guard handed out plus a sleep.
                    let sleep = rng.log(0, 10_000_000_000);
                    let at = guard.high_water() + Duration::from_nanos(sleep);
                    let nf = if rng.chance(500) { f } else { rng.rate() };
                    clock.rebase(at, hz(nf)).unwrap();
                    f = nf;
                    slowest_tick_ns = slowest_tick_ns.max(ticks_ns_ceil(1, f) as u64);
                    // Promise 6: from `at`, or the clock's own time if later (≤ a granule
                    // above what was handed out).
                    ref_ps = u128::from(at.as_nanos()) * 1000;
                    allowed_ns = allowed_ns.max(u128::from(last.as_nanos().max(at.as_nanos())));
                    behind = false;
                }
            }
            let now = guard.now();
            reads += 1;
            log.push(format!(
                "op {op} f {f} t {} back {} glitch {}x{}@{} now {} ref {} hw {:?}",
                env.t.get(),
                env.back.get(),
                env.glitch_n.get(),
                env.glitch.get(),
                env.glitch_from.get(),
                now.as_nanos(),
                ref_ps / 1000,
                clock.health()
            ));
            env.glitch_n.set(0);
            assert!(now >= last, "guard went back: {now:?} after {last:?}");
            let slack = u128::from(MARK_GRANULE_NS + 2 * HANDOVER_NS + 2 * slowest_tick_ns + 2);
            let ref_ns = ref_ps / 1000;
            if accepted_glitch_ns > 0 {
                allowed_ns = allowed_ns.max(ref_ns + accepted_glitch_ns);
            }
            let hi = ref_ns.max(allowed_ns) + slack;
            if order_only {
                last = now;
                continue;
            }
            assert!(
                u128::from(now.as_nanos()) <= hi,
                "guard ahead: {} ns > {hi} ns (reference {ref_ns} ns, op {op}, rate {f} Hz)\n{}",
                now.as_nanos(),
                log.join("\n")
            );
            if !behind {
                assert!(
                    u128::from(now.as_nanos()) + slack >= ref_ns,
                    "guard stuck behind: {} ns, reference {ref_ns} ns (op {op}, rate {f} Hz)\n{}",
                    now.as_nanos(),
                    log.join("\n")
                );
            }
            last = now;
        }
        cases += 1;
    }
    eprintln!("guard: {cases} clocks, {reads} guarded reads, {glitches} glitch events");
}

/// Issue 14 case 12 exactly, through the guard: a 64-bit counter at 1 GHz returns one value
/// an hour ahead. Promise 7: "one glitched read ... never becomes the time, and nothing has to
/// be waited out" — the guard is not frozen: the next reads move with the counter. Every read
/// position of `now`, `update`, `recalibrate` (±50 %, ×1000, ÷1000) and `rebase`.
#[test]
fn monotonic_clock_one_read_an_hour_ahead_at_every_position() {
    let hour = 3_600_000_000_000u64;
    let mut n = 0;
    for position in 0..8u64 {
        for op in 0..6 {
            let env: &'static GuardEnv = Box::leak(Box::new(GuardEnv {
                t: Cell::new(5_000_000_000),
                back: Cell::new(0),
                reads: Cell::new(0),
                glitch_from: Cell::new(u64::MAX),
                glitch_n: Cell::new(0),
                glitch: Cell::new(0),
            }));
            let clock: &'static Clock<GuardSim> =
                Box::leak(Box::new(Clock::new(GuardSim(env), hz(1_000_000_000))));
            let guard = MonotonicClock::new(clock);
            env.t.set(env.t.get() + 1_000_000_000);
            let before = guard.now();
            env.glitch_from.set(env.reads.get() + position);
            env.glitch_n.set(1);
            env.glitch.set(hour);
            let _ = match op {
                0 => Ok(()),
                1 => clock.update(),
                2 => clock.recalibrate(hz(1_500_000_000)),
                3 => clock.recalibrate(hz(1_000_000)),
                4 => clock.recalibrate(hz(100_000_000_000)),
                _ => clock.rebase(before, hz(1_000_000_000)),
            };
            let a = guard.now();
            env.glitch_n.set(0);
            env.t.set(env.t.get() + 1_000_000); // 1 ms at 1 GHz, less at other rates
            let b = guard.now();
            assert!(
                a - before < Duration::from_millis(2),
                "position {position} op {op}: the hour became the time ({:?})",
                a - before
            );
            assert!(
                b > a,
                "position {position} op {op}: the guard stands still ({a:?})"
            );
            n += 1;
        }
    }
    eprintln!("guard, one read an hour ahead: {n} positions");
}

// ─────────────────────────────────────────────────────────────────────────────────────────────
// 3. ExtendedTimer / NarrowTimer
// ─────────────────────────────────────────────────────────────────────────────────────────────

/// A narrow up-counting timer with a wrap flag, whose wrap interrupt runs from inside the
/// hardware accesses of whatever code it preempts (before or after the access).
struct HwEnv {
    bits: u32,
    /// Time stands still (while the clock starts: its epoch is then exactly `t0`).
    frozen: Cell<bool>,
    /// True ticks since the timer started (the extended count's truth).
    t: Cell<u64>,
    flag: Cell<bool>,
    /// Wraps that happened and whose `on_wrap` has not finished yet.
    unhandled: Cell<u64>,
    /// Hardware clears the flag on interrupt entry (SysTick) or the handler does (`clear_wrap`).
    hw_clears: bool,
    in_handler: Cell<bool>,
    rng: Cell<u64>,
    max_step: u64,
    /// Probability (per 1000 hardware accesses) that a pending interrupt is taken there.
    p_irq: u64,
    /// Skip `on_wrap` for wrap number `skip` (a missed wrap), if any.
    skip: Option<u64>,
    wraps_seen: Cell<u64>,
    timer: Cell<Option<&'static ExtendedTimer<HwSim>>>,
    clock: Cell<Option<&'static Clock<&'static ExtendedTimer<HwSim>>>>,
    /// Checks: every `ticks()` between the truth at its start and at its end; every
    /// `now()` not below what a call finished before it began returned.
    ticks_calls: Cell<u64>,
    now_calls: Cell<u64>,
    max_finished_now: Cell<u64>,
    late: Cell<u64>,
    rate: u64,
    /// True ticks at the clock's start.
    t0: Cell<u64>,
    /// Worst clock error seen (ns): ahead of, and behind, the truth.
    worst_ahead: Cell<i128>,
    worst_behind: Cell<i128>,
    /// A higher-priority reader inside `clear_wrap` (software flag only).
    nested_in_clear: bool,
}
struct HwSim(&'static HwEnv);

impl HwEnv {
    fn wrap_len(&self) -> u64 {
        1u64 << self.bits
    }
    /// Time passes by up to `max_step`, never into a second wrap while one is unhandled
    /// (the cadence rule: `on_wrap` finishes before the timer wraps again).
    fn tick(&self, rng: &mut Rng) {
        if self.frozen.get() {
            return;
        }
        // On average at most 1/256 of a wrap per access: the wrap handler (a few dozen
        // accesses) then takes far less than a period, as on hardware.
        let mut step = if (1u64 << self.bits) >= 256 {
            rng.range(0, self.max_step)
        } else {
            u64::from(rng.below(256) < (1u64 << self.bits))
        };
        if self.unhandled.get() > 0 {
            let next_wrap = (self.t.get() / self.wrap_len() + 1) * self.wrap_len();
            step = step.min(next_wrap - 1 - self.t.get());
        }
        let before = self.t.get() / self.wrap_len();
        self.t.set(self.t.get() + step);
        let after = self.t.get() / self.wrap_len();
        if after > before {
            assert_eq!(after - before, 1);
            self.flag.set(true);
            self.unhandled.set(self.unhandled.get() + 1);
        }
    }
    /// A hardware access: the interrupt may be taken just before it.
    fn access(&'static self) {
        let mut rng = Rng(self.rng.get());
        self.tick(&mut rng);
        let take = !self.in_handler.get() && self.unhandled.get() > 0 && rng.chance(self.p_irq);
        self.rng.set(rng.0);
        if take {
            self.interrupt();
        }
    }
    fn interrupt(&'static self) {
        let timer = self.timer.get().unwrap();
        self.in_handler.set(true);
        if self.hw_clears {
            self.flag.set(false); // PENDSTSET cleared on entry
        } else if self.nested_in_clear {
            // A higher-priority reader in the gap before `on_wrap` (allowed for a flag the
            // handler clears itself).
            self.check_ticks(timer);
        }
        let n = self.wraps_seen.get();
        self.wraps_seen.set(n + 1);
        if self.skip != Some(n) {
            timer.on_wrap();
        } else if !self.hw_clears {
            self.flag.set(false);
        }
        self.unhandled.set(self.unhandled.get() - 1);
        if let Some(clock) = self.clock.get() {
            match clock.update() {
                Ok(()) => {}
                Err(ClockError::Late) => self.late.set(self.late.get() + 1),
                Err(e) => panic!("update from the wrap interrupt: {e:?}"),
            }
            self.check_now(clock);
        }
        self.check_ticks(timer);
        self.in_handler.set(false);
    }
    fn check_ticks(&'static self, timer: &ExtendedTimer<HwSim>) {
        let lo = self.t.get();
        let v = timer.ticks();
        let hi = self.t.get();
        self.ticks_calls.set(self.ticks_calls.get() + 1);
        if self.skip.is_none() {
            assert!(
                lo <= v && v <= hi,
                "ticks() {v:#x} outside [{lo:#x}, {hi:#x}] (bits {}, hw_clears {})",
                self.bits,
                self.hw_clears
            );
        }
    }
    fn check_now(&'static self, clock: &Clock<&ExtendedTimer<HwSim>>) {
        let floor = self.max_finished_now.get();
        let lo = self.t.get();
        let now = clock.now().as_nanos();
        let hi = self.t.get();
        self.now_calls.set(self.now_calls.get() + 1);
        assert!(
            now >= floor,
            "clock went back: {now} after {floor} (bits {})",
            self.bits
        );
        self.max_finished_now.set(floor.max(now));
        let t0 = self.t0.get();
        let lo_ns = ticks_ns_ceil(lo - t0, self.rate) as i128;
        let hi_ns = ticks_ns_ceil(hi - t0, self.rate) as i128;
        let now = i128::from(now);
        self.worst_ahead
            .set(self.worst_ahead.get().max(now - hi_ns));
        self.worst_behind
            .set(self.worst_behind.get().max(lo_ns - now));
        if std::env::var("ATK3_DEBUG").is_ok() && lo_ns - now > 1_000_000 {
            panic!(
                "behind: now {now} lo_ns {lo_ns} lo {lo:#x} t0 {t0:#x} bits {} rate {} health {:?} \
                 wraps {} in_handler {}",
                self.bits,
                self.rate,
                clock.health(),
                self.wraps_seen.get(),
                self.in_handler.get()
            );
        }
    }
}

impl NarrowTimer for HwSim {
    fn count(&self) -> u32 {
        self.0.access();
        let v = (self.0.t.get() & (self.0.wrap_len() - 1)) as u32;
        // ... or just after it.
        self.0.access();
        v
    }
    fn bits(&self) -> u32 {
        self.0.bits
    }
    fn wrap_pending(&self) -> bool {
        self.0.access();
        let f = self.0.flag.get();
        self.0.access();
        f
    }
    fn clear_wrap(&self) {
        let e = self.0;
        if e.nested_in_clear && !e.hw_clears {
            e.check_ticks(e.timer.get().unwrap());
        }
        if !e.hw_clears {
            e.flag.set(false);
        }
        if e.nested_in_clear && !e.hw_clears {
            e.check_ticks(e.timer.get().unwrap());
        }
    }
}

fn hw_env(rng: &mut Rng, bits: u32, hw_clears: bool, skip: Option<u64>) -> &'static HwEnv {
    let wrap = 1u64 << bits;
    // A period of 100 µs or more: a wrap interrupt (and the clock's update in it, whose
    // handover margin is 20 µs) can keep the cadence rule only if the timer is that slow.
    let rate = rng
        .rate()
        .min(wrap.saturating_mul(10_000))
        .max(Frequency::MIN_HZ);
    let env: &'static HwEnv = Box::leak(Box::new(HwEnv {
        bits,
        frozen: Cell::new(false),
        t: Cell::new(rng.below(wrap)),
        flag: Cell::new(false),
        unhandled: Cell::new(0),
        hw_clears,
        in_handler: Cell::new(false),
        rng: Cell::new(rng.next()),
        max_step: rng.log(1, (wrap / 128).max(1)).max(1),
        p_irq: rng.range(5, 1000),
        skip,
        wraps_seen: Cell::new(0),
        timer: Cell::new(None),
        clock: Cell::new(None),
        ticks_calls: Cell::new(0),
        now_calls: Cell::new(0),
        max_finished_now: Cell::new(0),
        late: Cell::new(0),
        rate,
        t0: Cell::new(0),
        worst_ahead: Cell::new(i128::MIN),
        worst_behind: Cell::new(i128::MIN),
        nested_in_clear: rng.chance(500),
    }));
    let timer: &'static ExtendedTimer<HwSim> = Box::leak(Box::new(ExtendedTimer::new(HwSim(env))));
    env.timer.set(Some(timer));
    env
}

/// Promise (`ExtendedTimer` docs, `src/extend.rs`): "Each case is exact ... a reader stalled
/// for any time between its reads (by handlers above it) still returns a count it read, or
/// starts over"; "Who reads: any context ... when the wrap flag is one the interrupt clears
/// itself"; for SysTick's hardware-cleared flag, readers at the wrap interrupt's priority or
/// below. And README "Narrow hardware timers": "The clock runs on the extended count,
/// `update()` right after `on_wrap()`" — never `Late`; promise 1 (never back) and promise 2
/// (ahead by at most a granule plus a margin, behind by less than 2 ns) on every `now()`.
///
/// The interrupt runs from inside every hardware access (`count`, `wrap_pending`), before or
/// after it, at any time while a wrap is unhandled; a higher-priority reader runs inside
/// `clear_wrap` and before `on_wrap` (software-cleared flag only); time moves in every access,
/// at most 1/128 of a wrap per access (the wrap handler takes far less than a period, as on hardware), never into a second wrap before `on_wrap` (the cadence rule). Widths
/// 3..=32, rates 1 kHz..100 GHz.
#[test]
fn extended_timer_exact_with_the_interrupt_at_every_access() {
    let mut rng = Rng(0xe7e4_0004);
    let (mut cases, mut ticks_calls, mut now_calls, mut wraps) = (0u64, 0u64, 0u64, 0u64);
    let (mut worst_ahead, mut worst_behind) = (i128::MIN, i128::MIN);
    for _ in 0..ext_cases() {
        let bits = rng.range(3, 32) as u32;
        let hw_clears = rng.chance(500);
        let env = hw_env(&mut rng, bits, hw_clears, None);
        let timer = env.timer.get().unwrap();
        if std::env::var("ATK3_DEBUG").is_ok() {
            eprintln!(
                "timer {cases}: bits {bits} rate {} hw_clears {hw_clears} step {} p_irq {} nested {}",
                env.rate, env.max_step, env.p_irq, env.nested_in_clear
            );
        }
        let clock: &'static Clock<&'static ExtendedTimer<HwSim>> =
            Box::leak(Box::new(Clock::uninit(timer)));
        // The epoch is exactly `t0`: time stands still while the clock starts.
        env.frozen.set(true);
        env.t0.set(env.t.get());
        clock.start(hz(env.rate)).unwrap();
        env.frozen.set(false);
        env.clock.set(Some(clock));
        for _ in 0..2000 {
            env.check_ticks(timer);
            env.check_now(clock);
        }
        // Deliver any wrap still pending, then compare the counts.
        while env.unhandled.get() > 0 {
            env.interrupt();
        }
        assert_eq!(
            env.late.get(),
            0,
            "update from the wrap interrupt was late (bits {bits})"
        );
        assert_eq!(clock.health().late_updates, 0);
        cases += 1;
        ticks_calls += env.ticks_calls.get();
        now_calls += env.now_calls.get();
        wraps += env.wraps_seen.get();
        worst_ahead = worst_ahead.max(env.worst_ahead.get());
        worst_behind = worst_behind.max(env.worst_behind.get());
        let slowest = ticks_ns_ceil(1, env.rate) as i128;
        assert!(
            env.worst_ahead.get() <= i128::from(MARK_GRANULE_NS + HANDOVER_NS) + 2 * slowest,
            "clock ahead of the extended count by {} ns (bits {bits}, rate {})",
            env.worst_ahead.get(),
            env.rate
        );
        assert!(
            env.worst_behind.get() <= 2 + slowest,
            "clock behind the extended count by {} ns (bits {bits}, rate {})",
            env.worst_behind.get(),
            env.rate
        );
    }
    eprintln!(
        "extended timer: {cases} timers, {ticks_calls} ticks(), {now_calls} now(), {wraps} \
         wraps; clock vs truth: ahead ≤ {worst_ahead} ns, behind ≤ {worst_behind} ns"
    );
}

/// Promise (`ExtendedTimer` docs, Rules, Cadence): "A missed wrap is lost for good: the count
/// is a wrap behind from then on." Checked as stated: skip `on_wrap` for one wrap; afterwards
/// `ticks()` is exactly one wrap behind the truth (no worse, no recovery, no panic). (No clock
/// on it: to a narrow clock the missed wrap is a step back, which promise 1 excludes.)
#[test]
fn extended_timer_a_missed_wrap_is_one_wrap_behind() {
    let mut rng = Rng(0x0155_ed00);
    let mut n = 0;
    for _ in 0..200 {
        let bits = rng.range(3, 32) as u32;
        let hw_clears = rng.chance(500);
        let skip = rng.below(3);
        let env = hw_env(&mut rng, bits, hw_clears, Some(skip));
        let timer = env.timer.get().unwrap();
        for _ in 0..200 {
            env.check_ticks(timer);
        }
        while env.unhandled.get() > 0 {
            env.interrupt();
        }
        if env.wraps_seen.get() > env.skip.unwrap() {
            let lo = env.t.get();
            let v = timer.ticks();
            let truth = env.t.get();
            assert!(
                lo - (1u64 << bits) <= v && v <= truth - (1u64 << bits),
                "not exactly one wrap behind: {v:#x} outside [{lo:#x}, {truth:#x}] less a wrap \
                 (bits {bits}, wraps {}, skipped {skip}, hw_clears {hw_clears})",
                env.wraps_seen.get()
            );
            n += 1;
        }
    }
    assert!(n > 50, "too few cases reached the missed wrap: {n}");
}

/// README "Guarantees" / promise 5: "updates spaced by exactly that [`update_interval`] are
/// never late" (issue 14 case 7), for every width 3..=63 and rates across the range, with the
/// first update right after `start` and reads at random points between; and the time stays on
/// the counter (promise 2: less than 2 ns behind, at most a granule and a margin ahead).
#[test]
fn narrow_updates_spaced_by_exactly_the_interval_are_never_late() {
    let mut rng = Rng(0x0007_0007);
    let mut updates = 0u64;
    for bits in 3..=63u32 {
        for _ in 0..6 {
            let f = rng.rate();
            let t = Cell::new(rng.next() & mask(bits));
            let moved = Cell::new(0u128); // true ticks since start
            let c = FnCounter::new(|| t.get() & mask(bits), bits);
            let clock = Clock::new(&c, hz(f));
            let interval = clock.update_interval();
            let gap = ns_ticks(interval.as_nanos() as u64, f);
            if gap == 0 || interval.as_nanos() > u128::from(u64::MAX / 16) {
                continue; // no interval at this rate, or 12 intervals past 584 years
            }
            let mut last = clock.now();
            for k in 0..12u64 {
                // The next update starts exactly an interval after this one's start; reads
                // between at random points.
                let first = if k == 0 { rng.below(3) } else { 0 };
                t.set(t.get().wrapping_add(first));
                moved.set(moved.get() + u128::from(first));
                let r = clock.update();
                assert_eq!(
                    r,
                    Ok(()),
                    "bits {bits} rate {f} update {k} (gap {gap} ticks)"
                );
                updates += 1;
                let mut left = gap - first.min(gap);
                while left > 0 {
                    let s = rng.range(1, left);
                    t.set(t.get().wrapping_add(s));
                    moved.set(moved.get() + u128::from(s));
                    left -= s;
                    let now = clock.now();
                    assert!(now >= last, "bits {bits}: back");
                    let truth = (moved.get() * 1_000_000_000).div_ceil(u128::from(f));
                    let slowest = ticks_ns_ceil(1, f);
                    let ahead_max = u128::from(MARK_GRANULE_NS + HANDOVER_NS) + slowest;
                    assert!(
                        u128::from(now.as_nanos()) <= truth + ahead_max,
                        "bits {bits} rate {f}: ahead"
                    );
                    assert!(
                        u128::from(now.as_nanos()) + 2 + slowest >= truth,
                        "bits {bits} rate {f}: {} ns behind the counter's {truth} ns",
                        now.as_nanos()
                    );
                    last = now;
                }
            }
            assert_eq!(clock.health().late_updates, 0, "bits {bits} rate {f}");
        }
    }
    eprintln!("cadence: {updates} updates spaced by exactly update_interval, none late");
}

// ─────────────────────────────────────────────────────────────────────────────────────────────
// 4. Promise 6: a continuing rebase's time counts as handed out
// ─────────────────────────────────────────────────────────────────────────────────────────────

/// What one rebase scenario returned.
struct RebaseRun {
    /// Latest time handed out before the rebase.
    handed: u64,
    at: u64,
    /// The reading after the step back.
    after: u64,
    /// The counter's time at the rebase (continuing timeline), ns.
    counter_ns: u64,
}

/// Start at `f`, read, move `delta` ticks without reading, `rebase(at, f2)`, move `eps` ticks,
/// step the counter back by `s`, read once.
fn rebase_then_step_back(f: u64, delta: u64, at_rel: i64, f2: u64, eps: u64, s: u64) -> RebaseRun {
    let t = Cell::new(1u64 << 40);
    let c = FnCounter::new(|| t.get(), 64);
    let clock = Clock::new(&c, hz(f));
    t.set(t.get() + ns_ticks(1_000_000_000, f).max(1)); // one second in
    let handed = clock.now().as_nanos();
    t.set(t.get() + delta);
    let counter_ns = handed + ticks_ns_ceil(delta, f) as u64;
    let at = if at_rel >= 0 {
        handed.saturating_add(at_rel as u64)
    } else {
        handed.saturating_sub(at_rel.unsigned_abs())
    };
    clock.rebase(Instant::from_nanos(at), hz(f2)).unwrap();
    t.set(t.get() + eps);
    t.set(t.get().saturating_sub(s));
    let after = clock.now().as_nanos();
    RebaseRun {
        handed,
        at,
        after,
        counter_ns,
    }
}

/// Promise 6 (`Clock` docs, `src/clock.rs`): "`Clock::rebase` continues from a time the
/// caller gives (or the clock's own time, if later: the latest time handed out, or ...),
/// which then counts as handed out"; promise 1: "a time may read up to `MARK_GRANULE_NS`
/// below one already handed out, never more"; "further below, time stands still at most
/// `MARK_GRANULE_NS` above the latest time handed out".
///
/// After a rebase — continuing (`at` at or before the clock's time) or jumping ahead — and a
/// counter step back of every size (each power of two and its neighbours, the lag and granule
/// in ticks and their neighbours, what moved since), the one reading after it must be at
/// least `max(at, latest handed out) − MARK_GRANULE_NS` (the words' time, not the tighter
/// "counter's time at the rebase"), and at most the counter's time plus promise 2's bound.
#[test]
fn rebase_time_counts_as_handed_out_then_steps_back_of_every_size() {
    let mut rng = Rng(0x00e6_0006);
    let (mut n, mut worst_below) = (0u64, 0i128);
    for _ in 0..env_count("ATK3_REBASE_CASES", 120) {
        let f = rng.rate();
        let f2 = if rng.chance(400) { f } else { rng.rate() };
        let delta = rng.log(0, ns_ticks(100_000_000, f).max(1));
        let at_rel: i64 = match rng.below(5) {
            0 => -(rng.log(0, 1 << 40) as i64),
            1 => 0,
            2 => (ticks_ns_ceil(delta, f) as i64).saturating_sub(rng.below(3) as i64),
            3 => rng.log(0, 1 << 36) as i64,
            _ => rng.range(0, 2 * LAG_NS) as i64,
        };
        let eps = if rng.chance(500) {
            0
        } else {
            rng.log(0, ns_ticks(LAG_NS, f2) * 4)
        };
        let mut sizes = vec![0u64, delta, delta + eps, eps];
        for b in 0..63 {
            sizes.push(1 << b);
            sizes.push((1 << b) + 1);
            sizes.push((1u64 << b) - 1);
        }
        for x in [
            ns_ticks(LAG_NS, f2),
            ns_ticks(MARK_GRANULE_NS, f2),
            ns_ticks(GLITCH_NS, f2),
        ] {
            for d in [0, 1, 2] {
                sizes.push(x + d);
                sizes.push(x.saturating_sub(d));
                sizes.push(x + eps + d);
            }
        }
        for s in sizes {
            let r = rebase_then_step_back(f, delta, at_rel, f2, eps, s);
            let words = r.at.max(r.handed);
            let below = i128::from(words) - i128::from(r.after);
            worst_below = worst_below.max(below);
            assert!(
                r.after + MARK_GRANULE_NS >= words,
                "after rebase(at {} ns) from handed {} ns (counter {} ns), step back {s} ticks: \
                 {} ns, {below} ns below what counts as handed out (f {f}, f2 {f2}, delta \
                 {delta}, eps {eps})",
                r.at,
                r.handed,
                r.counter_ns,
                r.after
            );
            let top = words.max(r.counter_ns) + ticks_ns_ceil(eps, f2) as u64;
            let slack = MARK_GRANULE_NS + 2 * HANDOVER_NS + 2 * ticks_ns_ceil(1, f.min(f2)) as u64;
            assert!(
                r.after <= top + slack,
                "after rebase(at {}) step back {s}: {} ns > {} ns (f {f}, f2 {f2})",
                r.at,
                r.after,
                top + slack
            );
            n += 1;
        }
    }
    eprintln!("rebase then step back: {n} cases; worst below the words' time {worst_below} ns");
}

/// Promise 6, last sentence: "each reset back followed by such a rebase may move time on by
/// that much" (`MARK_GRANULE_NS` and the CPUs' lag: 0 here, one CPU) — and promise 1 (never
/// more than a granule back). Many cycles of: counter reset back by any amount, `now()`,
/// `rebase(at = now or earlier)`, a few reads. Over `k` cycles with no true time passing
/// the clock may move on by at most `k` granules (plus promise 2's margin once).
#[test]
fn repeated_reset_and_continuing_rebase_moves_time_by_at_most_a_granule_each() {
    let mut rng = Rng(0x0e6e_a7ed);
    let mut cycles_total = 0u64;
    for _ in 0..100 {
        let f = rng.rate();
        let t = Cell::new(1u64 << 50);
        let c = FnCounter::new(|| t.get(), 64);
        let clock = Clock::new(&c, hz(f));
        t.set(t.get() + ns_ticks(1_000_000_000, f).max(1));
        let start = clock.now().as_nanos();
        let mut last = start;
        let cycles = 40u64;
        for _ in 0..cycles {
            let back = rng.log(0, t.get());
            t.set(t.get() - back);
            let a = clock.now().as_nanos();
            assert!(a + MARK_GRANULE_NS >= last, "back by {} ns", last - a);
            let at = a.saturating_sub(rng.log(0, 1 << 30) * rng.below(2));
            clock.rebase(Instant::from_nanos(at), hz(f)).unwrap();
            let b = clock.now().as_nanos();
            assert!(
                b + MARK_GRANULE_NS >= a.max(last),
                "back after rebase: {b} < {a}"
            );
            last = last.max(a).max(b);
        }
        let moved = last - start;
        let bound = cycles * MARK_GRANULE_NS + HANDOVER_NS + 2 * ticks_ns_ceil(1, f) as u64;
        assert!(
            moved <= bound,
            "rate {f}: time moved {moved} ns in {cycles} cycles (> {bound})"
        );
        cycles_total += cycles;
    }
    eprintln!("reset + continuing rebase: {cycles_total} cycles, each within a granule");
}

/// How many timers the ExtendedTimer sweep runs (`ATK3_EXT_CASES`, default 6000).
fn ext_cases() -> u64 {
    env_count("ATK3_EXT_CASES", 6000)
}

/// A case count from the environment (longer sweeps), or the default run's.
fn env_count(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A hand-moved 3-bit timer for the wrap-count rollover.
struct Tiny {
    count: Cell<u32>,
    flag: Cell<bool>,
}
impl NarrowTimer for Tiny {
    fn count(&self) -> u32 {
        self.count.get()
    }
    fn bits(&self) -> u32 {
        3
    }
    fn wrap_pending(&self) -> bool {
        self.flag.get()
    }
    fn clear_wrap(&self) {
        self.flag.set(false);
    }
}

/// Promise (`ExtendedTimer::wraps`: "The wraps counted so far, modulo 2^31"; the type is "a
/// `Counter` of the timer's width plus 31 bits"; README: "The clock runs on the extended
/// count, `update()` right after `on_wrap()`"): across the wrap count's own rollover (2^31
/// wraps of a 3-bit timer, a 34-bit count), `ticks()` stays the true count modulo 2^34 and a
/// clock on it, updated after every 2^20th `on_wrap`, never goes back nor falls behind (promise
/// 1 and 2). 2^31 + 2^21 `on_wrap` calls.
/// (1.8 s on the AMD EPYC family 26 model 2 2-vCPU KVM guest.)
#[test]
fn extended_timer_wrap_count_rollover() {
    let timer = ExtendedTimer::new(Tiny {
        count: Cell::new(0),
        flag: Cell::new(false),
    });
    let f = 1_000_000u64; // 8 µs per wrap
    let clock = Clock::new(&timer, hz(f));
    let mut last = clock.now();
    let total: u64 = (1 << 31) + (1 << 21);
    for w in 1..=total {
        // The timer runs to its end and wraps; the interrupt counts it.
        timer.timer().count.set(7);
        timer.timer().count.set(0);
        timer.timer().flag.set(true);
        timer.on_wrap();
        let near = w > (1 << 31) - 64 && w < (1 << 31) + 64;
        if w % (1 << 20) == 0 || near {
            assert_eq!(timer.ticks(), (w << 3) & mask(34), "wraps {w}");
            assert_eq!(clock.update(), Ok(()), "wraps {w}");
            let now = clock.now();
            assert!(now >= last, "wraps {w}: back from {last:?} to {now:?}");
            let truth = u128::from(w) * 8 * 1_000;
            assert!(
                u128::from(now.as_nanos()) + 2 >= truth,
                "wraps {w}: clock {} ns, counter's time {truth} ns",
                now.as_nanos()
            );
            last = now;
        }
    }
    eprintln!("rollover: {total} wraps, last {last:?}");
}

/// Promise (`Delay` docs, `src/delay.rs`): "Every delay lasts **at least** the requested
/// time" within its limits, one of which is "a climb from one CPU's counter to another's that
/// is not a return to a reading the wait stepped back from ... on two, a reset seen on the
/// lagging CPU, then a migration to the leading one ... Each such climb counts as time by at
/// most the CPUs' disagreement."
///
/// Two CPUs, B `lag` ticks behind A (up to just under `LAG_NS` at 1 GHz): the thread starts
/// the wait on A, migrates to B, both counters are reset 2^30 ticks back while it is on B,
/// and it migrates back to A. The climb from B's new line to A's new line is neither time nor
/// a return to a reading it stepped back from, and counts as time: found as a finding against
/// the docs before they named it (`wait_ticks(100_000)` ended after 80 039 true ticks with
/// `lag` = 19 999). Checked: never shorter than the request less the lag; and the same wait
/// pinned to either CPU (the reset alone) is never short.
#[test]
fn delay_after_a_reset_seen_on_the_lagging_cpu_is_short_by_at_most_the_lag() {
    for lag in [1u64, 7, 500, 19_999] {
        for pinned in [None, Some(false), Some(true)] {
            let t = Cell::new(1u64 << 40); // true ticks
            let reset = Cell::new(0u64);
            let on_b = Cell::new(pinned.unwrap_or(false));
            let n = Cell::new(0u64);
            let first_true = Cell::new(0u64);
            let c = FnCounter::new(
                || {
                    let i = n.get();
                    n.set(i + 1);
                    t.set(t.get() + 10);
                    match (i, pinned) {
                        (0, _) => first_true.set(t.get()),
                        (3, None) => on_b.set(true), // migrate to the lagging CPU
                        (5, _) => reset.set(1 << 30), // suspend/resume: both counters reset back
                        (7, None) => on_b.set(false), // migrate back
                        _ => {}
                    }
                    t.get() - reset.get() - if on_b.get() { lag } else { 0 }
                },
                64,
            );
            let d = Delay::new(&c, hz(1_000_000_000));
            d.wait_ticks(100_000);
            // The first change is a tick after the first reading.
            let elapsed = t.get() - first_true.get() - 1;
            let allowed = if pinned.is_some() { 0 } else { lag };
            assert!(
                elapsed + allowed >= 100_000,
                "lag {lag}, pinned {pinned:?}: ended after {elapsed} true ticks of 100 000 asked ({} reads)",
                n.get()
            );
        }
    }
}
