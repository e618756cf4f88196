//! Round-4 outside attack on `Clock`, written from its docs and public API alone (promises 1–7
//! on `Clock`, `Clock::on_write`, `Clock::deadline` / `Clock::check`, `Deadline`, `Scale`),
//! aimed at what changed: the fast path of `now`, the writers' cached handover margin, the
//! one-pass `deadline` for narrow counters on an open timeline, and the `on_write` hook.
//!
//! Every check uses a bound the docs state. A test marked `#[ignore = "finding: ..."]` is a
//! promise found broken, with the promise quoted and a minimal reproduction.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::SeqCst};
use std::sync::{mpsc, Arc};

use baretime::{
    Accuracy, Clock, ClockError, FnCounter, Frequency, Instant, Source, Wake, Width,
    MARK_GRANULE_NS,
};
use proptest::prelude::*;

const HANDOVER_NS: u64 = 20_000;
const MIN_MHZ: u64 = 1_000_000;
const MAX_MHZ: u64 = 100_000_000_000_000;

fn freq(mhz: u64) -> Frequency {
    Frequency::from_millihz(mhz.clamp(MIN_MHZ, MAX_MHZ), Source::User, Accuracy::Exact)
        .expect("in range")
}

/// A rate drawn log-uniformly over 1 kHz..=100 GHz: `10^a × m / 1000` mHz.
fn rate() -> impl Strategy<Value = u64> {
    (6u32..=13, 1000u64..10_000)
        .prop_map(|(a, m)| (10u64.pow(a) / 1000 * m).clamp(MIN_MHZ, MAX_MHZ))
}

type Ctr = FnCounter<Box<dyn Fn() -> u64>>;

/// A narrow counter only the test moves, with the clock on it.
struct Sim {
    v: Rc<Cell<u64>>,
    /// Unwrapped position, for the reference model.
    abs: u128,
    mask: u64,
    bits: u32,
    clock: Clock<Ctr>,
}

impl Sim {
    fn new(bits: u32, start: u64, mhz: u64) -> Sim {
        let mask = Width::new(bits).mask();
        let v = Rc::new(Cell::new(start & mask));
        let r = v.clone();
        let counter: Ctr = FnCounter::new(Box::new(move || r.get()), bits);
        let clock = Clock::new(counter, freq(mhz));
        Sim {
            v,
            abs: u128::from(start & mask),
            mask,
            bits,
            clock,
        }
    }
    fn adv(&mut self, k: u64) {
        self.abs += u128::from(k);
        self.v.set(self.v.get().wrapping_add(k) & self.mask);
    }
    fn now(&self) -> u64 {
        self.clock.now().as_nanos()
    }
    fn raw(&self) -> u64 {
        self.v.get()
    }
    /// The update interval in ticks, rounded down (never more than the clock's own).
    fn interval_ticks(&self) -> u64 {
        let ns = self.clock.update_interval().as_nanos() as u64;
        self.clock.scale().ns_to_ticks_ceil(ns).saturating_sub(1)
    }
    /// The handover margin the docs state, at the rate in force: 20 µs rounded up to whole
    /// ticks, at most 1/16 of the wrap, at least one tick.
    fn margin(&self) -> u64 {
        let m = self.clock.scale().ns_to_ticks_ceil(HANDOVER_NS);
        m.min(self.mask >> 4).max(1)
    }
    fn delta(&self, to: u64) -> u64 {
        Width::new(self.bits).delta(self.raw(), to)
    }
}

// ---------------------------------------------------------------------------------------
// Deadlines on narrow counters against brute force.
// ---------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug)]
enum Op {
    Advance(u32),
    Update,
    Recal(i32),
    RebaseFwd(u32),
    RebaseBack(u32),
    Arm { kind: u8, sel: u64 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => (0u32..=1000).prop_map(Op::Advance),
        1 => Just(Op::Update),
        1 => (-4000i32..=4000).prop_map(Op::Recal),
        1 => (0u32..=1000).prop_map(Op::RebaseFwd),
        1 => (0u32..=1000).prop_map(Op::RebaseBack),
        5 => (0u8..4, any::<u64>()).prop_map(|(kind, sel)| Op::Arm { kind, sel }),
    ]
}

/// Counts of what the deadline runs checked (printed by the report).
static EXACT_CHECKED: AtomicU64 = AtomicU64::new(0);
static STEPPED_CHECKED: AtomicU64 = AtomicU64::new(0);
static ACROSS_UPDATES: AtomicU64 = AtomicU64::new(0);
static CLAMPED: AtomicU64 = AtomicU64::new(0);

struct Run {
    sim: Sim,
    /// Ticks since the last write that re-based (its counter reading).
    since: u64,
    /// Margin of the timeline in force when that write ran (for "in the handover").
    margin: u64,
    last_now: u64,
}

impl Run {
    fn new(bits: u32, start: u64, mhz: u64) -> Run {
        let sim = Sim::new(bits, start, mhz);
        let margin = sim.margin();
        let last_now = sim.now();
        Run {
            sim,
            since: 0,
            margin,
            last_now,
        }
    }

    /// A write: re-bases the interval count only if it ran past the last write's handover
    /// (inside it, it closes at the base: the deadline stays).
    fn wrote(&mut self, r: Result<(), ClockError>, what: &str) -> Result<(), TestCaseError> {
        prop_assert!(
            r.is_ok(),
            "{} returned {:?} with since={} (interval {})",
            what,
            r,
            self.since,
            self.sim.interval_ticks()
        );
        if self.since > self.margin + 1 {
            self.since = 0;
            self.margin = self.sim.margin();
        }
        Ok(())
    }

    fn update_on_time(&mut self) -> Result<(), TestCaseError> {
        let r = self.sim.clock.update();
        self.wrote(r, "update on time")
    }

    /// Advance `k` ticks, updating whenever the interval since the last write is used up
    /// (updates spaced by exactly the interval: never late, promise 5). Whether it wrote.
    fn advance(&mut self, mut k: u64) -> Result<bool, TestCaseError> {
        let mut wrote = false;
        while k > 0 {
            let it = self.sim.interval_ticks();
            let room = it.saturating_sub(self.since);
            if room == 0 {
                self.update_on_time()?;
                wrote = true;
                if self.since != 0 {
                    // Interval smaller than a handover: step one tick.
                    self.sim.adv(1);
                    self.since += 1;
                    k -= 1;
                }
                continue;
            }
            let step = room.min(k);
            self.sim.adv(step);
            self.since += step;
            k -= step;
            let n = self.sim.now();
            prop_assert!(
                n >= self.last_now,
                "time went back {} -> {}",
                self.last_now,
                n
            );
            self.last_now = n;
        }
        Ok(wrote)
    }

    fn arm(&mut self, kind: u8, sel: u64) -> Result<(), TestCaseError> {
        let it = self.sim.interval_ticks().max(1);
        let scale = self.sim.clock.scale();
        let now0 = self.sim.now();
        let at = match kind {
            0 => now0.saturating_add(scale.ticks_to_ns(sel % 64) + sel % 3),
            1 => now0.saturating_add(
                scale
                    .ticks_to_ns(sel % (it / 2 + 1))
                    .saturating_add(sel % 3),
            ),
            2 => now0.saturating_add(
                scale
                    .ticks_to_ns(sel % it.saturating_mul(2).saturating_add(1))
                    .saturating_add(sel % 3),
            ),
            _ => now0.saturating_sub(sel % 1_000_000),
        };
        let at = Instant::from_nanos(at);
        let d = self
            .sim
            .clock
            .deadline(at)
            .map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
        prop_assert_eq!(d.at(), at);
        let raw0 = self.sim.raw();
        let due = self.sim.clock.now() >= at;
        // `check` on the same reading decides the same: the one-pass deadline and the full
        // plan agree on "the first tick".
        match self.sim.clock.check(d) {
            Wake::Fired => prop_assert!(due, "check fired before the instant"),
            Wake::Rearm(d2) => {
                prop_assert!(!due, "check re-armed a due deadline");
                prop_assert_eq!(
                    d2.ticks(),
                    d.ticks(),
                    "deadline and check disagree (raw {})",
                    raw0
                );
            }
        }
        let dist = self.sim.delta(d.ticks());
        if due {
            prop_assert_eq!(dist, 0, "an instant passed is armed at the reading");
            return Ok(());
        }
        prop_assert!(dist >= 1, "an instant not reached is armed ahead");
        if self.since + dist <= it {
            // No write needed before the tick: exact on the timeline in force.
            let stepped = dist <= 4096;
            if stepped {
                for _ in 1..dist {
                    self.sim.adv(1);
                    self.since += 1;
                    let n = self.sim.clock.now();
                    prop_assert!(
                        n < at,
                        "now() reached the instant {} ticks before the deadline's tick",
                        self.sim.delta(d.ticks())
                    );
                }
            } else {
                self.sim.adv(dist - 1);
                self.since += dist - 1;
                prop_assert!(
                    self.sim.clock.now() < at,
                    "deadline not the first tick: now() at tick-1 is {:?} >= {:?}",
                    self.sim.clock.now(),
                    at
                );
            }
            self.sim.adv(1);
            self.since += 1;
            let n = self.sim.clock.now();
            if n >= at {
                EXACT_CHECKED.fetch_add(1, SeqCst);
                if stepped {
                    STEPPED_CHECKED.fetch_add(1, SeqCst);
                }
                prop_assert_eq!(self.sim.clock.check(d), Wake::Fired);
            } else {
                // Armed at the furthest point: half the update interval ahead.
                CLAMPED.fetch_add(1, SeqCst);
                prop_assert!(
                    u128::from(dist) * 2 + 4 >= u128::from(it),
                    "early tick not at the furthest point: dist {} interval {} now {:?} at {:?}",
                    dist,
                    it,
                    n,
                    at
                );
                prop_assert!(matches!(self.sim.clock.check(d), Wake::Rearm(_)));
            }
            self.last_now = n.as_nanos();
        } else {
            // Updates (on time) come before the tick: the check at the wake decides, and an
            // on-time update moves the tick by at most a tick (`on_write`'s docs) unless it
            // was clamped at the furthest point.
            let clamped = u128::from(dist) * 2 + 4 >= u128::from(it);
            self.advance(dist)?;
            ACROSS_UPDATES.fetch_add(1, SeqCst);
            let mut d = d;
            for round in 0..64 {
                match self.sim.clock.check(d) {
                    Wake::Fired => {
                        prop_assert!(self.sim.clock.now() >= at, "fired early");
                        return Ok(());
                    }
                    Wake::Rearm(next) => {
                        prop_assert!(self.sim.clock.now() < at);
                        let more = self.sim.delta(next.ticks());
                        if round == 0 && !clamped {
                            let ns1 = self.sim.clock.scale().ns_to_ticks_ceil(1);
                            prop_assert!(
                                more <= ns1.max(1),
                                "an on-time update moved the armed tick by {} ticks",
                                more
                            );
                        }
                        self.advance(more.max(1))?;
                        d = next;
                    }
                }
            }
            prop_assert!(false, "never fired");
        }
        Ok(())
    }

    fn step(&mut self, op: Op) -> Result<(), TestCaseError> {
        let it = self.sim.interval_ticks();
        match op {
            Op::Advance(p) => {
                let k = (u128::from(it) * u128::from(p) / 1000) as u64;
                self.advance(k)?;
            }
            Op::Update => {
                let r = self.sim.clock.update();
                self.wrote(r, "update")?;
            }
            Op::Recal(ppm) => {
                let mhz = self.sim.clock.scale().millihz();
                let new = if ppm.abs() > 3000 {
                    // A large ratio: ×/÷ 3.
                    if ppm > 0 {
                        mhz.saturating_mul(3)
                    } else {
                        mhz / 3
                    }
                } else {
                    (i128::from(mhz) + i128::from(mhz) * i128::from(ppm) / 1_000_000) as u64
                };
                let r = self.sim.clock.recalibrate(freq(new));
                self.wrote(r, "recalibrate")?;
            }
            Op::RebaseFwd(p) | Op::RebaseBack(p) => {
                let now = self.sim.now();
                let span =
                    (self.sim.clock.scale().ticks_to_ns(it) / 1000).min(1 << 40) * u64::from(p);
                let at = if matches!(op, Op::RebaseFwd(_)) {
                    now.saturating_add(span)
                } else {
                    now.saturating_sub(span)
                };
                let mhz = self.sim.clock.scale().millihz();
                let r = self.sim.clock.rebase(Instant::from_nanos(at), freq(mhz));
                self.wrote(r, "rebase")?;
            }
            Op::Arm { kind, sel } => self.arm(kind, sel)?,
        }
        let n = self.sim.now();
        prop_assert!(
            n >= self.last_now,
            "time went back {} -> {} after {:?}",
            self.last_now,
            n,
            op
        );
        self.last_now = n;
        Ok(())
    }
}

fn start_value(bits: u32, sel: u64, near_wrap: bool) -> u64 {
    let mask = Width::new(bits).mask();
    if near_wrap {
        mask.wrapping_sub(sel % 64)
    } else {
        sel & mask
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 100, failure_persistence: None, ..ProptestConfig::default() })]

    /// Every width 3..=63, every rate: deadlines exact against stepping the counter, never
    /// early, `check` agreeing with `deadline`, across updates/recalibrations/rebases, wraps.
    #[test]
    fn deadlines_narrow_brute_force(
        bits in 8u32..=63,
        mhz in rate(),
        sel in any::<u64>(),
        near_wrap in any::<bool>(),
        ops in prop::collection::vec(op(), 1..40),
    ) {
        let mut run = Run::new(bits, start_value(bits, sel, near_wrap), mhz);
        for op in ops {
            run.step(op)?;
        }
    }
}

/// Deadlines right after each kind of write (the handover, stopped counter), every width
/// (every `SWEEP_STRIDE`th where that is set: `cargo xtask test` sets 4 for the suite's second
/// run, under qemu-user, where this brute force took 146 s).
#[test]
fn deadlines_in_the_handover_every_width() {
    let stride: usize = std::env::var("SWEEP_STRIDE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1usize)
        .max(1);
    let mut n = 0;
    for bits in (3..=63u32).step_by(stride) {
        for &mhz in &[
            MIN_MHZ,
            32_768_000,
            1_000_000_000_000,
            2_300_000_000_000,
            MAX_MHZ,
        ] {
            for write in 0..3 {
                let mut sim = Sim::new(bits, start_value(bits, 7, bits % 2 == 0), mhz);
                let it = sim.interval_ticks();
                sim.adv(it / 3 + 2);
                let r = match write {
                    0 => sim.clock.update(),
                    1 => sim.clock.recalibrate(freq(mhz / 2)),
                    _ => sim
                        .clock
                        .rebase(Instant::from_nanos(sim.now() + 1_000), freq(mhz)),
                };
                assert!(r.is_ok(), "bits {bits} mhz {mhz} write {write}: {r:?}");
                let now0 = sim.now();
                let margin = sim.margin();
                for extra in [1u64, 2, 3, 100, 1_000, 20_000, 20_001, 40_000] {
                    let at = Instant::from_nanos(now0 + extra);
                    let d = sim.clock.deadline(at).unwrap();
                    let dist = sim.delta(d.ticks());
                    assert!(dist >= 1);
                    if dist > 4 * margin + 64 || 2 * dist + 4 >= it {
                        continue;
                    }
                    // Step a copy of the counter forward: the first tick at which now() >= at.
                    let raw = sim.raw();
                    let mut first = None;
                    for k in 1..=dist {
                        sim.v.set(raw.wrapping_add(k) & sim.mask);
                        if sim.clock.now() >= at {
                            first = Some(k);
                            break;
                        }
                    }
                    // Going back to `raw` is a step back; only read again after.
                    sim.v.set(raw);
                    assert_eq!(first, Some(dist), "bits {bits} mhz {mhz} write {write} extra {extra}: deadline dist {dist}, first tick {first:?}");
                    n += 1;
                }
            }
        }
    }
    assert!(n > 1000 / stride, "{n}");
}

// ---------------------------------------------------------------------------------------
// Promise 2 against an exact model (narrow counters, many writes).
// ---------------------------------------------------------------------------------------

/// The tick length `10^12 / mhz` ns in 2^-64 ns, rounded down and up.
fn mults(mhz: u64) -> (u128, u128) {
    let num = 1_000_000_000_000u128 << 64;
    let q = num / u128::from(mhz);
    (q, if num % u128::from(mhz) == 0 { q } else { q + 1 })
}

/// A segment of the reference timeline: from `start` (absolute tick), at `mhz`.
#[derive(Clone, Copy, Debug)]
struct Seg {
    start: u128,
    mhz: u64,
}

/// The counter's time at absolute tick `t`, floored, with tick lengths rounded down / up.
fn reference(segs: &[Seg], t: u128) -> (u128, u128) {
    let mut out = [0u128; 2];
    for (j, o) in out.iter_mut().enumerate() {
        let (mut whole, mut frac) = (0u128, 0u128);
        for (i, s) in segs.iter().enumerate() {
            if t <= s.start {
                break;
            }
            let end = segs.get(i + 1).map_or(t, |n| n.start.min(t));
            let ticks = end - s.start;
            let (lo, hi) = mults(s.mhz);
            let m = if j == 0 { lo } else { hi };
            let (mi, mf) = (m >> 64, m & u128::from(u64::MAX));
            whole += ticks * mi;
            let p = ticks * mf; // < 2^127
            whole += p >> 64;
            frac += p & u128::from(u64::MAX);
            whole += frac >> 64;
            frac &= u128::from(u64::MAX);
        }
        *o = whole;
    }
    (out[0], out[1])
}

#[derive(Clone, Copy, Debug)]
enum P2 {
    Advance(u32),
    Step(u8),
    Update,
    Recal(u64),
}

fn p2op() -> impl Strategy<Value = P2> {
    prop_oneof![
        2 => (0u32..=1000).prop_map(P2::Advance),
        2 => (1u8..=8).prop_map(P2::Step),
        2 => Just(P2::Update),
        2 => rate().prop_map(P2::Recal),
    ]
}

static MOVED_MORE_THAN_ONE: AtomicU64 = AtomicU64::new(0);
static P2_READS: AtomicU64 = AtomicU64::new(0);

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, failure_persistence: None, ..ProptestConfig::default() })]

    /// Promise 2: a reading is less than 2 ns below the counter's ticks at the rates in force
    /// (each from its write's close point: a margin after the writer's reading, or the base
    /// where the counter had not reached it), and — the stated bound — never ahead by more
    /// than `MARK_GRANULE_NS` plus a margin. Writes come as often as every tick.
    #[test]
    fn promise2_narrow_exact_model(
        bits in 3u32..=63,
        mhz in rate(),
        sel in any::<u64>(),
        near_wrap in any::<bool>(),
        ops in prop::collection::vec(p2op(), 1..60),
    ) {
        let mut sim = Sim::new(bits, start_value(bits, sel, near_wrap), mhz);
        let mut segs = vec![Seg { start: sim.abs, mhz: sim.clock.scale().millihz() }];
        // The current timeline's base (absolute), its margin, and the last re-basing write's
        // reading.
        let mut base = sim.abs;
        let mut last_write = sim.abs;
        let mut margin = sim.margin();
        let mut last = sim.now();
        for op in ops {
            let it = sim.interval_ticks();
            let room = it.saturating_sub((sim.abs - last_write) as u64);
            match op {
                P2::Advance(p) => sim.adv((u128::from(room) * u128::from(p) / 1000) as u64),
                P2::Step(k) => sim.adv(u64::from(k).min(room)),
                P2::Update | P2::Recal(_) => {
                    if sim.abs == base {
                        continue; // "reached" vs "passed": not modelled.
                    }
                    let old_rate = sim.clock.scale().millihz();
                    let new_rate = match op { P2::Recal(r) => r, _ => old_rate };
                    let r = match op {
                        P2::Recal(r) => sim.clock.recalibrate(freq(r)),
                        _ => sim.clock.update(),
                    };
                    prop_assert!(r.is_ok(), "{:?}: {:?} (since {} interval {})", op, r, sim.abs - last_write, it);
                    let new_mhz = sim.clock.scale().millihz();
                    prop_assert_eq!(new_mhz, new_rate);
                    if sim.abs < base {
                        // Before the base: closes at the base (an update does nothing).
                        if matches!(op, P2::Recal(_)) {
                            let l = segs.len() - 1;
                            segs[l].mhz = new_mhz; // The new rate from the same base.
                            margin = sim.margin(); // The timeline in force is at it.
                        }
                    } else {
                        // The handover margin of a rate change is the smaller of the two
                        // rates' (the module docs of `clock`: found while explaining a
                        // mismatch; promise 2's text says only "a handover margin").
                        let c = sim.abs + u128::from(margin.min(sim.margin()));
                        segs.push(Seg { start: c, mhz: new_mhz });
                        base = c;
                        last_write = sim.abs;
                        margin = sim.margin();
                    }
                }
            }
            let n = sim.now();
            prop_assert!(n >= last, "time went back: {} -> {}", last, n);
            last = n;
            let (lo, hi) = reference(&segs, sim.abs);
            if hi >= u128::from(u64::MAX) { return Ok(()); } // Past 584 years: saturates.
            P2_READS.fetch_add(1, SeqCst);
            prop_assert!(u128::from(n) + 1 >= lo,
                "promise 2: reading {} is 2 ns or more below the counter's time {} (segs {:?}, abs {})", n, lo, segs, sim.abs);
            let ahead_ns = MARK_GRANULE_NS + HANDOVER_NS + sim.clock.scale().ticks_to_ns(1) + 1;
            prop_assert!(u128::from(n) <= hi + u128::from(ahead_ns),
                "promise 2: reading {} ahead of the counter's time {} by more than granule + margin", n, hi);
        }
    }
}

// ---------------------------------------------------------------------------------------
// `on_write`: when the hook runs.
// ---------------------------------------------------------------------------------------

mod hook_calls {
    use super::*;
    pub static TICKS: AtomicU64 = AtomicU64::new(0);
    pub static CALLS: AtomicU32 = AtomicU32::new(0);
    pub static SEEN_MHZ: AtomicU64 = AtomicU64::new(0);
    fn read() -> u64 {
        TICKS.load(SeqCst) & 0xffff_ffff
    }
    fn hook() {
        CALLS.fetch_add(1, SeqCst);
        SEEN_MHZ.store(CLOCK.scale().millihz(), SeqCst);
    }
    pub static CLOCK: Clock<FnCounter<fn() -> u64>> =
        Clock::uninit(FnCounter::new(read as fn() -> u64, 32)).on_write(hook);
}

#[test]
fn on_write_runs_exactly_when_documented() {
    use hook_calls::*;
    let c = || CALLS.load(SeqCst);
    let hz = |h| Frequency::exact_hz(h).unwrap();
    assert_eq!(CLOCK.update(), Err(ClockError::NotStarted));
    assert_eq!(
        CLOCK.recalibrate(hz(1_000_000)),
        Err(ClockError::NotStarted)
    );
    assert_eq!(c(), 0, "not after NotStarted");
    TICKS.store(5, SeqCst);
    CLOCK.start(hz(1_000_000)).unwrap();
    assert_eq!(c(), 1, "after start");
    assert_eq!(
        SEEN_MHZ.load(SeqCst),
        1_000_000_000,
        "the hook sees the started clock"
    );
    assert_eq!(CLOCK.start(hz(2_000_000)), Err(ClockError::Started));
    assert_eq!(c(), 1, "not after Started");
    TICKS.fetch_add(1_000, SeqCst);
    CLOCK.update().unwrap();
    assert_eq!(c(), 1, "not after an on-time update");
    TICKS.fetch_add(1_000, SeqCst);
    CLOCK.recalibrate(hz(1_000_100)).unwrap();
    assert_eq!(c(), 2, "after recalibrate");
    assert_eq!(
        SEEN_MHZ.load(SeqCst),
        1_000_100_000,
        "the hook runs after the write is published"
    );
    TICKS.fetch_add(1_000, SeqCst);
    CLOCK
        .rebase(
            CLOCK.now() + core::time::Duration::from_secs(1),
            hz(1_000_100),
        )
        .unwrap();
    assert_eq!(c(), 3, "after rebase forward");
    TICKS.fetch_add(1_000, SeqCst);
    CLOCK.rebase(Instant::ZERO, hz(1_000_000)).unwrap();
    assert_eq!(c(), 4, "after rebase that continues");
    // Late: past the deadline (half a wrap), well before the handover a wrap later.
    TICKS.fetch_add((1 << 31) + (1 << 28), SeqCst);
    let _ = CLOCK.now(); // read in the late zone (promise 5)
    assert_eq!(CLOCK.update(), Err(ClockError::Late));
    assert_eq!(c(), 5, "after an update that returns Late");
    TICKS.fetch_add(1_000, SeqCst);
    CLOCK.update().unwrap();
    assert_eq!(c(), 5);
    TICKS.fetch_add((1 << 31) + (1 << 28), SeqCst);
    let _ = CLOCK.now();
    assert_eq!(CLOCK.recalibrate(hz(1_000_000)), Err(ClockError::Late));
    assert_eq!(c(), 6, "after a recalibrate that returns Late");
    assert_eq!(SEEN_MHZ.load(SeqCst), 1_000_000_000);
}

mod hook_behind {
    use super::*;
    pub static TICKS: AtomicU64 = AtomicU64::new(0);
    pub static CALLS: AtomicU32 = AtomicU32::new(0);
    fn read() -> u64 {
        TICKS.load(SeqCst)
    }
    fn hook() {
        CALLS.fetch_add(1, SeqCst);
    }
    pub static CLOCK: Clock<FnCounter<fn() -> u64>> =
        Clock::uninit(FnCounter::new(read as fn() -> u64, 64)).on_write(hook);
}

#[test]
fn on_write_not_after_behind() {
    use hook_behind::*;
    let hz = |h| Frequency::exact_hz(h).unwrap();
    TICKS.store(1 << 40, SeqCst);
    CLOCK.start(hz(1_000_000_000)).unwrap();
    TICKS.fetch_add(1 << 30, SeqCst);
    let t = CLOCK.now();
    TICKS.store(17, SeqCst); // reset back
    assert!(CLOCK.now() >= t);
    assert_eq!(CLOCK.update(), Err(ClockError::Behind));
    assert_eq!(
        CLOCK.recalibrate(hz(1_000_000_001)),
        Err(ClockError::Behind)
    );
    assert_eq!(
        CALLS.load(SeqCst),
        1,
        "only start: Behind publishes nothing"
    );
    CLOCK.rebase(t, hz(1_000_000_000)).unwrap();
    assert_eq!(CALLS.load(SeqCst), 2);
}

mod hook_busy {
    use super::*;
    pub static TICKS: AtomicU64 = AtomicU64::new(0);
    pub static CALLS: AtomicU32 = AtomicU32::new(0);
    /// Fire a nested write on this counter read (0: none).
    pub static FIRE_AT: AtomicU32 = AtomicU32::new(0);
    pub static READS: AtomicU32 = AtomicU32::new(0);
    pub static BUSY: AtomicU32 = AtomicU32::new(0);
    pub static NESTED_OK: AtomicU32 = AtomicU32::new(0);
    fn read() -> u64 {
        let n = READS.fetch_add(1, SeqCst) + 1;
        if FIRE_AT.load(SeqCst) == n {
            FIRE_AT.store(0, SeqCst);
            // An interrupt handler that writes, inside the outer writer's counter read.
            match CLOCK.recalibrate(Frequency::exact_hz(1_000_003).unwrap()) {
                Err(ClockError::Busy) => BUSY.fetch_add(1, SeqCst),
                Ok(()) => NESTED_OK.fetch_add(1, SeqCst),
                Err(e) => panic!("nested write: {e:?}"),
            };
        }
        TICKS.fetch_add(1, SeqCst) & 0xffff_ffff
    }
    fn hook() {
        CALLS.fetch_add(1, SeqCst);
    }
    pub static CLOCK: Clock<FnCounter<fn() -> u64>> =
        Clock::uninit(FnCounter::new(read as fn() -> u64, 32)).on_write(hook);
}

#[test]
fn on_write_not_after_busy() {
    use hook_busy::*;
    CLOCK
        .start(Frequency::exact_hz(1_000_000).unwrap())
        .unwrap();
    let mut outer_ok = 1u32;
    for n in 1..=6u32 {
        TICKS.fetch_add(100_000, SeqCst);
        READS.store(0, SeqCst);
        FIRE_AT.store(n, SeqCst);
        let r = CLOCK.recalibrate(Frequency::exact_hz(1_000_000 + u64::from(n)).unwrap());
        FIRE_AT.store(0, SeqCst);
        assert!(r.is_ok(), "{r:?}");
        outer_ok += 1;
        assert_eq!(
            CALLS.load(SeqCst),
            outer_ok + NESTED_OK.load(SeqCst),
            "hook after each write that published, never after Busy"
        );
    }
    assert!(
        BUSY.load(SeqCst) > 0,
        "no nested write landed inside a writer"
    );
}

mod hook_writes {
    use super::*;
    pub static TICKS: AtomicU64 = AtomicU64::new(0);
    pub static STEP: AtomicU64 = AtomicU64::new(1);
    pub static CALLS: AtomicU32 = AtomicU32::new(0);
    pub static DEPTH: AtomicBool = AtomicBool::new(false);
    pub static NESTED: AtomicU32 = AtomicU32::new(0);
    pub static NESTED_ERR: AtomicU32 = AtomicU32::new(0);
    fn read() -> u64 {
        TICKS.fetch_add(STEP.load(SeqCst), SeqCst) & 0xff_ffff
    }
    /// A hook that itself recalibrates (once: it runs again after its own write).
    fn hook() {
        CALLS.fetch_add(1, SeqCst);
        if !DEPTH.swap(true, SeqCst) {
            let r = CLOCK.recalibrate(Frequency::exact_hz(10_000_000).unwrap());
            if r.is_ok() {
                NESTED.fetch_add(1, SeqCst);
            } else {
                NESTED_ERR.fetch_add(1, SeqCst);
            }
            let _ = CLOCK.update();
            let _ = CLOCK.deadline(CLOCK.now() + core::time::Duration::from_micros(5));
            DEPTH.store(false, SeqCst);
        }
    }
    pub static CLOCK: Clock<FnCounter<fn() -> u64>> =
        Clock::uninit(FnCounter::new(read as fn() -> u64, 24)).on_write(hook);
}

#[test]
fn on_write_hook_may_write_the_clock() {
    use hook_writes::*;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        CLOCK
            .start(Frequency::exact_hz(10_000_000).unwrap())
            .unwrap();
        for i in 0..20u64 {
            // Moving counter, then one that stands still (the writer's bounded wait).
            STEP.store(if i % 2 == 0 { 1 } else { 0 }, SeqCst);
            TICKS.fetch_add(50_000, SeqCst);
            CLOCK
                .recalibrate(Frequency::exact_hz(10_000_000 + i).unwrap())
                .unwrap();
        }
        tx.send(()).unwrap();
    });
    rx.recv_timeout(std::time::Duration::from_secs(120))
        .expect("deadlock: a hook that writes the clock never returned");
    assert_eq!(
        NESTED_ERR.load(SeqCst),
        0,
        "the hook's own write was refused (Busy from the original write?)"
    );
    assert_eq!(NESTED.load(SeqCst), 21);
    // 21 outer writes, each with a nested recalibrate whose hook runs (and does not recurse).
    assert_eq!(CALLS.load(SeqCst), 42);
}

// ---------------------------------------------------------------------------------------
// An on-time update moves an armed tick by less than 2 ns of ticks, plus one (`on_write`'s docs).
// ---------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, failure_persistence: None, ..ProptestConfig::default() })]

    /// The documented bound: less than 2 ns of ticks, plus one (both timelines read less than
    /// 2 ns below the counter's time). A nanosecond's worth, the attack's first guess, is
    /// exceeded: 96 ticks at 93.37 GHz, 12-bit counter (CI, stop 29).
    #[test]
    fn on_time_update_moves_tick_less_than_2ns_of_ticks_and_one(
        bits in 12u32..=64,
        mhz in rate(),
        sel in any::<u64>(),
        far in 0u64..1000,
        part in 0u64..1000,
        pre in 0u64..1000,
    ) {
        let mut sim = Sim::new(bits, start_value(bits, sel, sel % 2 == 0), mhz);
        let it = sim.interval_ticks();
        if it < 8 { return Ok(()); }
        // Leave the start's handover, then arm.
        sim.adv(sim.margin() + 1 + (u128::from(pre) * u128::from(it / 4) / 1000) as u64);
        let far_ticks = 1 + (u128::from(far) * u128::from(it / 4) / 1000) as u64;
        let at = Instant::from_nanos(sim.now().saturating_add(sim.clock.scale().ticks_to_ns(far_ticks)).saturating_add(sel % 7));
        let d = sim.clock.deadline(at).unwrap();
        let dist = sim.delta(d.ticks());
        if dist <= 1 { return Ok(()); }
        // Part of the way there, past nothing, then an on-time update.
        sim.adv(1 + (u128::from(part) * u128::from(dist - 1) / 1000) as u64);
        prop_assume!(sim.delta(d.ticks()) >= 1 && sim.delta(d.ticks()) < dist);
        prop_assert_eq!(sim.clock.update(), Ok(()));
        let d2 = sim.clock.deadline(at).unwrap();
        let (a, b) = (d.ticks(), d2.ticks());
        let moved = Width::new(bits).delta(a.min(b), a.max(b)).min(Width::new(bits).delta(a.max(b), a.min(b)));
        // Less than 2 ns of ticks plus one: at most the ceiling of 2 ns of ticks, and one.
        let bound = sim.clock.scale().ns_to_ticks_ceil(2).max(1);
        prop_assert!(moved <= bound, "bits {} mhz {}: an on-time update moved the tick {} -> {} ({} ticks)", bits, mhz, a, b, moved);
        if moved > 1 { MOVED_MORE_THAN_ONE.fetch_add(1, SeqCst); }
    }
}

// ---------------------------------------------------------------------------------------
// Threads: `now` monotonic with a busy writer, narrow widths.
// ---------------------------------------------------------------------------------------

fn threads_monotonic(bits: u32, step: u64, hz: u64) {
    let mask = Width::new(bits).mask();
    let ticks = Arc::new(AtomicU64::new(mask - 1000));
    let t = ticks.clone();
    let counter = FnCounter::new(
        move || t.fetch_add(step, SeqCst).wrapping_add(step) & mask,
        bits,
    );
    let clock = Arc::new(Clock::new(counter, Frequency::exact_hz(hz).unwrap()));
    let finished = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writes_done = Arc::new(AtomicU64::new(0));
    let writer = {
        let (clock, stop, wd) = (clock.clone(), stop.clone(), writes_done.clone());
        std::thread::spawn(move || {
            let mut i = 0u64;
            let mut writes = 0u64;
            let mut bad = Vec::new();
            while !stop.load(SeqCst) {
                let r = match i % 4 {
                    0 | 1 => clock.update(),
                    2 => clock.recalibrate(Frequency::exact_hz(hz - (i % 7) * hz / 1000).unwrap()),
                    _ => clock.rebase(
                        clock
                            .now()
                            .saturating_sub(core::time::Duration::from_nanos(i % 50)),
                        Frequency::exact_hz(hz).unwrap(),
                    ),
                };
                if matches!(r, Err(ClockError::Busy) | Err(ClockError::Behind)) {
                    bad.push((i, r));
                    if bad.len() > 10 {
                        break;
                    }
                }
                i += 1;
                writes += 1;
                wd.store(writes, SeqCst);
            }
            wd.store(u64::MAX, SeqCst);
            (writes, bad)
        })
    };
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (clock, finished, wd) = (clock.clone(), finished.clone(), writes_done.clone());
            std::thread::spawn(move || {
                let mut last = 0u64;
                let mut k = 0u64;
                while k < 200_000 || wd.load(SeqCst) < 100 {
                    k += 1;
                    let before = finished.load(SeqCst);
                    let n = clock.now().as_nanos();
                    assert!(
                        n >= last,
                        "bits {bits}: now() went back on one thread: {last} -> {n}"
                    );
                    assert!(
                        n >= before,
                        "bits {bits}: now() below one finished before it began: {before} -> {n}"
                    );
                    finished.fetch_max(n, SeqCst);
                    last = n;
                }
            })
        })
        .collect();
    for r in readers {
        r.join().unwrap();
    }
    stop.store(true, SeqCst);
    let (writes, bad) = writer.join().unwrap();
    assert!(
        bad.is_empty(),
        "bits {bits} hz {hz}: a single writer got {bad:?}"
    );
    assert!(writes >= 100);
}

#[test]
fn now_monotonic_threads_narrow() {
    for (bits, step, hz) in [
        (16, 3, 100_000_000),
        (24, 7, 1_000_000_000),
        (32, 1000, 100_000_000_000),
    ] {
        threads_monotonic(bits, step, hz);
    }
}

#[test]
fn report_counts() {
    // Not an assertion of the clock: makes the counts visible with --nocapture.
    eprintln!(
        "exact {} (stepped {}), clamped {}, across updates {}, p2 reads {}, moved>1 {}",
        EXACT_CHECKED.load(SeqCst),
        STEPPED_CHECKED.load(SeqCst),
        CLAMPED.load(SeqCst),
        ACROSS_UPDATES.load(SeqCst),
        P2_READS.load(SeqCst),
        MOVED_MORE_THAN_ONE.load(SeqCst)
    );
}

/// `Clock::on_write`'s docs: "an update on time moves an armed tick by at most a tick, which
/// the wake's `Clock::check` corrects". At 4.881 GHz (30-bit counter) an on-time update moved
/// the tick for the same instant by 5 ticks (a nanosecond: the new version's base folds in the
/// carry the fast path leaves out, so its floored time differs by up to 1 ns). Where the tick
/// moves later, `check` re-arms (corrected); where it would move earlier, the old tick wakes
/// up to ~1 ns late and nothing calls the hook.
///
/// The docs said "at most a tick"; they now say what promise 2 gives (less than 2 ns of ticks,
/// plus one), and this checks that, at the rate where the old wording broke.
#[test]
fn on_time_update_moves_tick_less_than_2ns_and_a_tick() {
    let mhz = 4_881_000_000_000;
    let mut worst = 0u64;
    for start in 0..200u64 {
        let mut sim = Sim::new(30, start * 7919, mhz);
        sim.adv(sim.margin() + 1 + start * 1_000);
        let at = Instant::from_nanos(sim.now() + 71_234 + start % 7);
        let d = sim.clock.deadline(at).unwrap();
        sim.adv(1 + sim.delta(d.ticks()) / 4);
        sim.clock.update().unwrap();
        let d2 = sim.clock.deadline(at).unwrap();
        let (a, b) = (d.ticks(), d2.ticks());
        worst = worst.max(a.max(b) - a.min(b));
    }
    // 2 ns at 4.881 GHz: 9.762 ticks.
    assert!(
        worst <= 10 + 1,
        "an on-time update moved an armed tick by {worst} ticks at 4.881 GHz"
    );
    assert!(
        worst > 1,
        "the old wording's case: more than one tick ({worst})"
    );
}
