//! A second outside attack on `WallClock` (the time of day), after the first attack's
//! findings were fixed by versions of up to four pieces. Written from the documentation alone
//! (the rustdoc of `WallClock`, `WallError`, `WallHealth`, `SecondsEdge`, `MAX_SLEW_PPM`, the
//! module docs of `wall.rs`, the README's "The time of day"), never the function bodies.
//!
//! The promises attacked here, as they now stand (Q-numbers used below):
//!
//! - Q1 a write (set or slew) at clock reading `t_w` takes over at `e = t_w + 100 µs` (a
//!   reading made during the write; on a clock that stands still during the write, exactly);
//!   "every reading a reader can have" is kept: readings at clock times before `e` are the
//!   old version's, so a reading right after a write, at the same clock time, equals the one
//!   right before it — for a set as well as a slew, accepted or refused.
//! - Q2 readings never go back (per thread, and across threads: a shared floor), except
//!   across a set's handover (a step, reported); "the wall time never goes back (and never
//!   jumps) across a write, whatever the clock's time does".
//! - Q3 a slew's end is exact: each slew absorbs its offset less what the next write reports
//!   left at its handover; once every slew is over, `W(t) = t + (unix − at of the last
//!   set) + Σ absorbed`, exactly; `slew_remaining_ns()` is 0 then, and counts an accepted slew
//!   whole right after the call.
//! - Q4 `Busy` (sequential writes): a write short of the handovers of *both* of the two
//!   accepted writes before it, with the clock moved between them (rustdoc, README); module
//!   docs: more than one distinct piece base in `(t_w, t_w + 100 µs)`; writes while the clock
//!   stands still exactly never refuse. A refused write changes nothing (readings, health,
//!   remaining slew, and every later reading: checked against a twin that never made it).
//! - Q5 one writer at a time: a second (inside the first's counter reads) gets `Busy`,
//!   nothing changed; a stalled writer makes the wall time stand still, then catch up (no
//!   step back), and the offsets stay exact.
//! - Q6 `health()`: `steps` = sets after the first, `last_step_ns` the latest step returned,
//!   `slews` = accepted slews with a non-zero offset; refused writes count nothing.
//! - Q7 saturation at `u64::MAX`, no panic.
//!
//! A test marked `#[ignore = "finding: ..."]` is a promise found broken, with its minimal
//! input.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use baretime::MAX_SLEW_PPM;
use baretime::{Accuracy, Clock, FnCounter, Frequency, Instant, Source, WallClock, WallError};

/// The handover the docs state: 100 µs after the write's clock reading.
const H: u64 = 100_000;
const U: u64 = 1_000_000_000_000_000_000;

type Hook = Box<dyn FnMut(u64) + Send>;

/// A counter the test moves (copied from tests/adversary_wall.rs): `ticks`, an optional
/// automatic step per read, and an optional hook run inside each read.
struct Sim {
    ticks: AtomicU64,
    auto: AtomicU64,
    reads: AtomicU64,
    hooked: AtomicBool,
    hook: Mutex<Option<Hook>>,
    /// If non-zero: the counter also moves a tick every this many reads.
    per: AtomicU64,
}

impl Sim {
    fn read(&self) -> u64 {
        let n = self.reads.fetch_add(1, Ordering::SeqCst);
        if self.hooked.load(Ordering::SeqCst) {
            if let Ok(mut g) = self.hook.try_lock() {
                if let Some(h) = g.as_mut() {
                    h(n);
                }
            }
        }
        let per = self.per.load(Ordering::Relaxed);
        if per != 0 && n % per == 0 {
            self.ticks.fetch_add(1, Ordering::SeqCst);
        }
        let step = self.auto.load(Ordering::Relaxed);
        if step == 0 {
            self.ticks.load(Ordering::SeqCst)
        } else {
            self.ticks.fetch_add(step, Ordering::SeqCst)
        }
    }
    fn advance(&self, n: u64) {
        self.ticks.fetch_add(n, Ordering::SeqCst);
    }
}

type Ctr = FnCounter<Box<dyn Fn() -> u64 + Send + Sync>>;
type Wall = WallClock<'static, Ctr>;

fn freq(mhz: u64) -> Frequency {
    Frequency::from_millihz(mhz, Source::User, Accuracy::Exact).expect("in range")
}

/// A 64-bit counter at `mhz` millihertz, started at `start` ticks, and a wall clock on it.
fn rig(mhz: u64, start: u64) -> (&'static Sim, &'static Clock<Ctr>, &'static Wall) {
    let sim: &'static Sim = Box::leak(Box::new(Sim {
        ticks: AtomicU64::new(start),
        auto: AtomicU64::new(0),
        reads: AtomicU64::new(0),
        hooked: AtomicBool::new(false),
        hook: Mutex::new(None),
        per: AtomicU64::new(0),
    }));
    let read: Box<dyn Fn() -> u64 + Send + Sync> = Box::new(move || sim.read());
    let clock: &'static Clock<Ctr> =
        Box::leak(Box::new(Clock::new(FnCounter::new(read, 64), freq(mhz))));
    let wall: &'static Wall = Box::leak(Box::new(WallClock::new(clock)));
    (sim, clock, wall)
}

fn now(clock: &Clock<Ctr>) -> u64 {
    clock.now().as_nanos()
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }
}

/// What a write asks.
#[derive(Clone, Copy, Debug)]
enum W {
    /// set(W_now + rel, now − back)
    Set(i64, u64),
    Slew(i64, u32),
}

/// How the clock moves before the next step.
#[derive(Clone, Copy, Debug)]
enum M {
    Stand,
    /// This many ticks.
    Ticks(u64),
    /// To the `k`-th newest accepted write's handover (0: the newest) plus `d` ns.
    ToHandover(usize, i64),
    /// This much clock time.
    Ns(u64),
    Recalibrate(i64),
    Rebase(u64),
    Update,
    /// The 64-bit counter reset to half its value (resume from suspend before the rebase):
    /// the Clock stands still.
    Reset,
}

#[derive(Clone, Copy, Debug)]
enum Step {
    Move(M),
    Write(W),
}

/// The piece model of the module docs ("A write", step 4; "Writes before the previous
/// handover"): the bases of the live version, in order.
#[derive(Clone, Debug, Default)]
struct Pieces(Vec<u64>);
impl Pieces {
    /// Busy by the module docs: more than one distinct base in (t_w, t_w + H).
    fn busy(&self, tw: u64) -> bool {
        let mut v: Vec<u64> = self
            .0
            .iter()
            .copied()
            .filter(|&b| b > tw && b < tw + H)
            .collect();
        v.dedup();
        v.len() > 1
    }
    fn write(&mut self, tw: u64, e: u64) {
        let in_force = self.0.iter().rposition(|&b| b <= tw).unwrap_or(0);
        let mut kept: Vec<u64> = Vec::new();
        for (i, &b) in self.0.iter().enumerate() {
            if i == in_force || (i > in_force && b > tw && b < e) {
                kept.push(b);
            }
        }
        kept.push(e);
        let mut out: Vec<u64> = Vec::new();
        for (i, &b) in kept.iter().enumerate() {
            let next_equal = kept.get(i + 1) == Some(&b);
            if !next_equal || i == 0 {
                out.push(b);
            }
        }
        assert!(out.len() <= 4, "model: more than PIECES pieces: {out:?}");
        self.0 = out;
    }
}

/// The driver: runs steps on a rig, checks Q1–Q4 and Q6 as it goes, Q3 at the end.
struct Drv {
    sim: &'static Sim,
    clock: &'static Clock<Ctr>,
    wall: &'static Wall,
    mhz: u64,
    /// Exact oracles (the counter stands still during a write).
    exact: bool,
    /// Accepted writes: (clock reading, handover upper bound).
    writes: Vec<(u64, u64)>,
    /// Sets' handover ranges (lo, hi): monotonicity is not promised across them.
    sets: Vec<(u64, u64)>,
    pieces: Pieces,
    last: Option<(u64, u64, u64)>,
    offset: i128,
    pending: i64,
    n_sets: u32,
    n_slews: u32,
    last_step: i64,
    log: Vec<String>,
    /// The first mismatch against the public (rustdoc/README) Busy rule, if any.
    public_busy_mismatch: Option<String>,
    /// Statistics: Busy refusals, writes before the newest handover, most model pieces.
    busy: u32,
    early: u32,
    max_pieces: usize,
    /// Writes refused that the rustdoc's rule accepts.
    refused_but_public_accepts: u32,
    /// Readings at the moves, and whether each write step was accepted.
    trace: Vec<(u64, u64)>,
    accepted: Vec<bool>,
}

impl Drv {
    fn new(mhz: u64, auto: u64) -> Drv {
        let (sim, clock, wall) = rig(mhz, 1_000_000);
        // auto ≥ 1000: a slow counter moving a tick every `auto` reads.
        if auto >= 1000 {
            sim.per.store(auto, Ordering::SeqCst);
        } else {
            sim.auto.store(auto, Ordering::SeqCst);
        }
        Drv {
            sim,
            clock,
            wall,
            mhz,
            exact: auto == 0,
            writes: Vec::new(),
            sets: Vec::new(),
            pieces: Pieces::default(),
            last: None,
            offset: 0,
            pending: 0,
            n_sets: 0,
            n_slews: 0,
            last_step: 0,
            log: Vec::new(),
            public_busy_mismatch: None,
            busy: 0,
            early: 0,
            max_pieces: 0,
            refused_but_public_accepts: 0,
            trace: Vec::new(),
            accepted: Vec::new(),
        }
    }

    fn fail(&self, what: String) -> ! {
        panic!("{what}\nsteps:\n{}", self.log.join("\n"));
    }

    /// A reading, checked against the previous one (Q2), returned with its clock bracket.
    fn read(&mut self) -> (u64, u64, u64) {
        let t0 = now(self.clock);
        let w = self.wall.unix_ns().unwrap_or(0);
        let t1 = now(self.clock);
        if let Some((p0, p1, pw)) = self.last {
            assert!(
                p1.saturating_sub(t0) <= baretime::MARK_GRANULE_NS,
                "the Clock went back more than its granule"
            );
            let exempt = self.sets.iter().any(|&(lo, hi)| hi > p0 && lo <= t1);
            // Across a counter reset the Clock itself may read up to MARK_GRANULE_NS back
            // (its promise 1): the wall time follows it, by at most 1.5× that.
            let clock_back = p1.saturating_sub(t0);
            if !exempt
                && u128::from(w) + u128::from(clock_back) * 3 / 2 + 4 * u128::from(clock_back > 0)
                    < u128::from(pw)
            {
                self.fail(format!("Q2: back from {pw} to {w} (clock {p0} -> {t0})"));
            }
            // No jump: at most 1.5 × the clock time + a few ns (a slew at MAX_SLEW_PPM).
            if !exempt && w > pw && u128::from(w - pw) > u128::from(t1 - p0) * 3 / 2 + 4 {
                self.fail(format!("Q2: jump {pw} -> {w} over clock {p0} -> {t1}"));
            }
        }
        self.last = Some((t0, t1, w));
        (t0, t1, w)
    }

    fn advance_ns(&mut self, ns: u64) {
        let target = now(self.clock).saturating_add(ns);
        self.move_to(target);
    }

    fn move_to(&mut self, target: u64) {
        for _ in 0..64 {
            let t = now(self.clock);
            if t >= target {
                return;
            }
            let ticks = (u128::from(target - t) * u128::from(self.mhz) / 1_000_000_000_000) as u64;
            self.sim.advance(ticks.max(1));
        }
    }

    fn step(&mut self, s: Step) {
        self.log
            .push(format!("  {s:?} @ clock {}", now(self.clock)));
        match s {
            Step::Move(m) => {
                match m {
                    M::Stand => {}
                    M::Ticks(n) => self.sim.advance(n),
                    M::Ns(n) => self.advance_ns(n),
                    M::ToHandover(k, d) => {
                        if let Some(&(_, e)) = self.writes.iter().rev().nth(k) {
                            self.move_to((e as i64 + d) as u64);
                        }
                    }
                    M::Recalibrate(ppm) => {
                        let f =
                            (self.mhz as i128 + self.mhz as i128 * ppm as i128 / 1_000_000) as u64;
                        let fr = Frequency::from_millihz(f, Source::User, Accuracy::Exact);
                        if fr.is_some_and(|fr| self.clock.recalibrate(fr).is_ok()) {
                            self.mhz = f;
                        }
                    }
                    M::Rebase(jump) => {
                        let at = Instant::from_nanos(now(self.clock) + jump);
                        let _ = self.clock.rebase(at, freq(self.mhz));
                    }
                    M::Update => {
                        let _ = self.clock.update();
                    }
                    M::Reset => {
                        let t = self.sim.ticks.load(Ordering::SeqCst);
                        self.sim.ticks.store(t / 2, Ordering::SeqCst);
                    }
                }
                let (t, _, w) = self.read();
                self.trace.push((t, w));
            }
            Step::Write(w) => self.write(w),
        }
    }

    fn write(&mut self, w: W) {
        let (_, tb, before) = self.read();
        let h0 = self.wall.health();
        let rem0 = self.wall.slew_remaining_ns();
        let set_before = self.n_sets > 0;
        let r: Result<Option<i128>, WallError> = match w {
            W::Set(rel, back) => {
                let unix = if set_before {
                    (i128::from(before) + i128::from(rel)).clamp(0, i128::from(u64::MAX)) as u64
                } else {
                    U
                };
                let at = tb.saturating_sub(back);
                let r = self.wall.set(unix, Instant::from_nanos(at));
                if r.is_ok() {
                    self.offset = i128::from(unix) - i128::from(at);
                    self.pending = 0;
                }
                r
            }
            W::Slew(off, ppm) => {
                let r = self.wall.slew(off, ppm).map(|l| Some(i128::from(l)));
                if let Ok(Some(left)) = r {
                    self.offset += i128::from(self.pending) - left;
                    self.pending = off;
                }
                r
            }
        };
        let ta = now(self.clock);
        self.log.push(format!("    -> {r:?} (clock {tb}..{ta})"));
        // Q4 by the docs: public rule and module rule (exact clocks only).
        if self.exact && set_before {
            let n = self.writes.len();
            let public = n >= 2 && {
                let (ta_, ea) = self.writes[n - 2];
                let (tb_, _eb) = self.writes[n - 1];
                ta_ < tb_ && tb < ea
            };
            let module = self.pieces.busy(tb);
            let busy = r == Err(WallError::Busy);
            self.busy += u32::from(busy);
            self.early += u32::from(self.writes.last().is_some_and(|&(_, e)| tb < e));
            if busy != module {
                self.fail(format!(
                    "Q4 (module docs): busy {busy}, the piece rule says {module}; bases {:?}",
                    self.pieces.0
                ));
            }
            if busy && !public {
                self.refused_but_public_accepts += 1;
            }
            if busy != public && self.public_busy_mismatch.is_none() {
                self.public_busy_mismatch = Some(format!(
                    "busy {busy}, rustdoc's rule says {public}\nsteps:\n{}",
                    self.log.join("\n")
                ));
            }
        }
        self.accepted.push(r.is_ok());
        match r {
            Ok(ret) => {
                self.writes.push((tb, ta + H));
                if self.exact {
                    self.pieces.write(tb, tb + H);
                    self.max_pieces = self.max_pieces.max(self.pieces.0.len());
                }
                match w {
                    W::Set(..) => {
                        self.sets.push((tb + H, ta + H));
                        if set_before != ret.is_some() {
                            self.fail(format!("Q2: set returned {ret:?} (first: {})", !set_before));
                        }
                        if let Some(s) = ret {
                            self.last_step =
                                s.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64;
                        }
                        self.n_sets += 1;
                    }
                    W::Slew(off, _) => {
                        if off != 0 {
                            self.n_slews += 1;
                        }
                        let rem = self.wall.slew_remaining_ns();
                        if self.exact && rem != off {
                            self.fail(format!(
                                "Q3: slew_remaining_ns {rem} right after slew({off})"
                            ));
                        }
                    }
                }
            }
            Err(e) => {
                let ok_err = matches!((w, e), (W::Slew(..), WallError::NotSet) if !set_before)
                    || e == WallError::Busy;
                if !ok_err {
                    self.fail(format!("unexpected {e:?}"));
                }
                if self.wall.health() != h0 || (self.exact && self.wall.slew_remaining_ns() != rem0)
                {
                    self.fail("Q4: a refused write changed health/remaining".into());
                }
            }
        }
        if w_is_first_set(w, set_before) {
            self.last = None;
        }
        let (_, _, after) = self.read();
        if self.exact && after != before && !(w_is_first_set(w, set_before)) {
            self.fail(format!(
                "Q1: reading at one clock time {before} -> {after} across the write"
            ));
        }
        let h = self.wall.health();
        let steps = self.n_sets.saturating_sub(1);
        if h.steps != steps
            || h.slews != self.n_slews
            || (steps > 0 && h.last_step_ns != self.last_step)
        {
            self.fail(format!(
                "Q6: health {h:?}, expected steps {steps} last {} slews {}",
                self.last_step, self.n_slews
            ));
        }
    }

    /// Q3 at the end: let every slew end; the offsets add up exactly.
    fn finish(&mut self) {
        if self.n_sets == 0 {
            return;
        }
        // A counter reset leaves the clock standing until the kernel's rebase.
        self.step(Step::Move(M::Rebase(0)));
        self.advance_ns(2_000_000_000);
        self.step(Step::Move(M::Ns(3_000_000_000)));
        self.sim.auto.store(0, Ordering::SeqCst);
        self.sim.per.store(0, Ordering::SeqCst);
        let t = now(self.clock);
        let w = self.wall.unix_ns().unwrap();
        let want = i128::from(t) + self.offset + i128::from(self.pending);
        if i128::from(w) != want {
            self.fail(format!(
                "Q3: at clock {t} wall {w}, the offsets say {want} (diff {})",
                i128::from(w) - want
            ));
        }
        let rem = self.wall.slew_remaining_ns();
        if rem != 0 {
            self.fail(format!("Q3: remaining {rem} after every slew's end"));
        }
    }
}

fn w_is_first_set(w: W, set_before: bool) -> bool {
    matches!(w, W::Set(..)) && !set_before
}

/// A random burst program: a first set, then bursts of 2..10 writes (sets and slews mixed) at
/// spacings just before / at / just after the previous handovers, standing, creeping, and
/// with Clock recalibrations, rebases and updates between them.
fn program(rng: &mut Rng, slow: bool) -> Vec<Step> {
    let mut v = vec![Step::Write(W::Set(0, 0)), Step::Move(M::Ns(3 * H))];
    let bursts = 1 + rng.below(4);
    for _ in 0..bursts {
        let n = 2 + rng.below(9);
        for _ in 0..n {
            let m = match rng.below(12) {
                0 | 1 => M::Stand,
                2 => M::Ticks(1),
                3 if slow => M::Ticks(1 + rng.below(4)),
                3 => M::Ticks(2),
                4 => M::ToHandover(0, -1),
                5 => M::ToHandover(0, 0),
                6 => M::ToHandover(0, 1),
                7 => M::ToHandover(1, rng.pick(&[-1, 0, 1])),
                8 => M::ToHandover(rng.below(3) as usize, rng.pick(&[-2, 2, -(H as i64) / 2])),
                9 => rng.pick(&[
                    M::Recalibrate(100),
                    M::Recalibrate(-37),
                    M::Rebase(0),
                    M::Rebase(1),
                    M::Rebase(H - 1),
                    M::Update,
                    M::Reset,
                    M::Reset,
                ]),
                10 => M::Ns(rng.below(3 * H)),
                _ => M::Stand,
            };
            v.push(Step::Move(m));
            let w = if rng.below(4) == 0 {
                W::Set(
                    rng.pick(&[-1_000_000, -1, 0, 1, 500_000_000, -(H as i64)]),
                    rng.pick(&[0, 1000, 2 * H]),
                )
            } else {
                W::Slew(
                    rng.pick(&[0, 1, -1, 999, -999, 1_000_000, -1_000_000, 77_777]),
                    rng.pick(&[1000, 250_000, MAX_SLEW_PPM, 1_000_000 / 3]),
                )
            };
            v.push(Step::Write(w));
        }
        v.push(Step::Move(M::Ns(rng.pick(&[0, H, 10 * H, 2_000_000]))));
    }
    v
}

fn run(mhz: u64, auto: u64, steps: &[Step]) -> Drv {
    let mut d = Drv::new(mhz, auto);
    for &s in steps {
        d.step(s);
    }
    d.finish();
    d
}

/// The clocks: 1 GHz, 3 GHz, 1 kHz, 32.768 kHz counters that stand still during a write, and
/// a 1 GHz one that moves 3 ticks a read (fast), and slow ones that move a tick every 600
/// (32.768 kHz) or 12 000 (1 kHz) reads.
const CLOCKS: [(u64, u64, bool); 8] = [
    (32_768_000, 600, true),
    (1_000_000_000_000, 1, false),
    (1_000_000, 12_000, true),
    (1_000_000_000_000, 0, false),
    (3_000_000_000_000, 0, false),
    (1_000_000, 0, true),
    (32_768_000, 0, true),
    (1_000_000_000_000, 3, false),
];

#[test]
fn bursts_at_every_spacing() {
    let mut mismatch = None;
    let (mut busy, mut early, mut four, mut refused_public) = (0, 0, 0, 0);
    for (i, &(mhz, auto, slow)) in CLOCKS.iter().enumerate() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (i as u64 + 1));
        for _ in 0..120 {
            let p = program(&mut rng, slow);
            let d = run(mhz, auto, &p);
            busy += d.busy;
            refused_public += d.refused_but_public_accepts;
            if auto == 0 && d.busy > 0 {
                twin(mhz, &p, &d);
            }
            early += d.early;
            four += u32::from(d.max_pieces >= 3);
            if mismatch.is_none() {
                mismatch = d.public_busy_mismatch;
            }
        }
    }
    println!("refused where the rustdoc's rule accepts: {refused_public}");
    println!(
        "busy {busy}, writes before the newest handover {early}, runs reaching 3 pieces {four}"
    );
    if let Some(m) = mismatch {
        println!("first mismatch with the rustdoc's Busy rule:\n{m}");
    }
    assert!(
        busy > 20 && early > 200 && four > 5,
        "the bursts reach the cases"
    );
}

/// Q4: the same program without its refused writes gives the same readings at every move and
/// the same outcome for every other write (a refused write changed nothing, ever).
fn twin(mhz: u64, p: &[Step], d: &Drv) {
    let mut writes = d.accepted.iter();
    let q: Vec<Step> = p
        .iter()
        .copied()
        .filter(|s| !matches!(s, Step::Write(_)) || *writes.next().unwrap())
        .collect();
    let e = run(mhz, 0, &q);
    let kept: Vec<bool> = d.accepted.iter().copied().filter(|&a| a).collect();
    if e.trace != d.trace || e.accepted != kept {
        let i = e.trace.iter().zip(&d.trace).position(|(a, b)| a != b);
        panic!(
            "Q4: a refused write changed what came after: first differing reading {i:?}: {:?} vs {:?}\nsteps:\n{}",
            i.map(|i| d.trace[i]),
            i.map(|i| e.trace[i]),
            d.log.join("\n")
        );
    }
}

/// set @0, then slews at clock times `ts` (1 GHz, 1 tick = 1 ns; the counter stands still
/// during each write): the results.
fn slews_at(ts: &[u64]) -> Vec<Result<i64, WallError>> {
    let (sim, clock, wall) = rig(1_000_000_000_000, 0);
    wall.set(U, Instant::ZERO).unwrap();
    let mut out = Vec::new();
    for &t in ts {
        let c = sim.ticks.load(Ordering::SeqCst);
        if t > c {
            sim.advance(t - c);
        }
        assert_eq!(now(clock), t);
        out.push(wall.slew(7, MAX_SLEW_PPM));
    }
    out
}

/// Q4, the rustdoc's own examples of its rule: three writes within 100 µs on a creeping clock
/// refuse the third; at (or after) the first one's handover it goes through; at one clock time
/// writes never refuse.
#[test]
fn busy_rule_at_its_edges() {
    use WallError::Busy;
    let r = slews_at(&[3 * H, 3 * H + 1, 3 * H + 2]);
    assert_eq!(r[2], Err(Busy), "{r:?}");
    let r = slews_at(&[3 * H, 3 * H + 1, 4 * H - 1]);
    assert_eq!(r[2], Err(Busy), "{r:?}");
    let r = slews_at(&[3 * H, 3 * H + 1, 4 * H]);
    assert!(r[2].is_ok(), "at the first handover: {r:?}");
    let r = slews_at(&[3 * H, 3 * H + 1, 4 * H + 1]);
    assert!(r[2].is_ok(), "{r:?}");
    let r = slews_at(&[
        3 * H,
        3 * H,
        3 * H,
        3 * H,
        3 * H,
        3 * H,
        3 * H,
        3 * H,
        3 * H,
        3 * H,
    ]);
    assert!(r.iter().all(|r| r.is_ok()), "standing: {r:?}");
    // A retry after Busy: refused until the older write's handover, taken there.
    let r = slews_at(&[3 * H, 3 * H + 1, 3 * H + 2, 3 * H + 3, 4 * H - 1, 4 * H]);
    assert_eq!(&r[2..5], &[Err(Busy), Err(Busy), Err(Busy)], "{r:?}");
    assert!(r[5].is_ok(), "{r:?}");
    let r = slews_at(&[3 * H, 3 * H + 1, 3 * H + 1, 3 * H + 2, 4 * H - 1, 4 * H]);
    assert_eq!(&r[3..5], &[Err(Busy), Err(Busy)], "{r:?}");
    assert!(r[5].is_ok(), "{r:?}");
    // Two at one time, then a creep: the two before it did not move apart: accepted.
    let r = slews_at(&[3 * H, 3 * H, 3 * H + 1]);
    assert!(r[2].is_ok(), "{r:?}");
}

/// Doc finding (docs fixed since): the rustdoc's old rule said the third write here is Busy;
/// the library takes it, as the rule now stated says (one distinct handover, 3H+1+H, is
/// less than 100 µs ahead; the other is exactly 100 µs ahead): slews at 3H, 3H+1, 3H+1.
#[test]
fn doc_rustdoc_rule_predicts_busy_for_a_write_at_the_previous_ones_time() {
    let r = slews_at(&[3 * H, 3 * H + 1, 3 * H + 1]);
    assert!(r[2].is_ok(), "{r:?}");
}

/// Found (docs fixed since): the rustdoc and README said a write is `Busy` when "short of the
/// handovers of both of the two writes before it, with the clock moved between them", and this
/// write was refused although the two before it were at one clock time: set(1e18, 0) @0;
/// slews @300000, @300001, @300001 (all Ok), then @300002 -> Err(Busy). The rustdoc now states
/// the rule the library keeps: two or more distinct handovers still less than 100 µs ahead
/// (400000 and 400001 here) — Busy, and a retry is taken once the clock passes the older one.
#[test]
fn busy_after_two_writes_at_one_time_as_documented() {
    let r = slews_at(&[3 * H, 3 * H + 1, 3 * H + 1, 3 * H + 2]);
    assert!(r[..3].iter().all(|r| r.is_ok()), "{r:?}");
    assert_eq!(
        r[3],
        Err(WallError::Busy),
        "two distinct handovers ahead: {r:?}"
    );
    // Past the older pending handover (3H + H), one is left ahead: accepted.
    let r = slews_at(&[3 * H, 3 * H + 1, 3 * H + 1, 4 * H]);
    assert!(r.iter().all(|r| r.is_ok()), "{r:?}");
}

/// What a stalled-writer run did: the outer and nested results, the readings (clock, wall)
/// in order (before, inside the hook, after), and the final offset check's difference.
#[derive(Debug, PartialEq)]
struct Stalled {
    outer: Result<i128, WallError>,
    nested: Option<Result<i128, WallError>>,
    readings: Vec<(u64, u64)>,
    diff: i128,
}

/// set @0; +3H; `pre` slews at the clock times 3H + pre[i]; then an outer write (`outer_set`:
/// a set one second ahead, else a slew of −5000 at MAX_SLEW_PPM) whose counter read number `at`
/// (from the call's first) runs: +`stall` ns; a nested write (0 none, 1 a slew of +3000 at
/// 1000 ppm, 2 a set 1 s back; 3 a Clock rebase forward by `stall` instead, 4 a Clock
/// recalibration by +100 ppm then `stall`); +`after` ns; a reading. Then a reading, and the offsets checked
/// once every slew is over.
fn stalled(pre: &[u64], outer_set: bool, at: u64, stall: u64, nested: u8, after: u64) -> Stalled {
    let (sim, clock, wall) = rig(1_000_000_000_000, 0);
    wall.set(U, Instant::ZERO).unwrap();
    let mut offset: i128 = i128::from(U);
    let mut pending: i64 = 0;
    sim.advance(3 * H);
    for &p in pre {
        let c = sim.ticks.load(Ordering::SeqCst);
        if 3 * H + p > c {
            sim.advance(3 * H + p - c);
        }
        let left = wall.slew(11, 1000).unwrap();
        offset += i128::from(pending) - i128::from(left);
        pending = 11;
    }
    let mut readings = vec![(now(clock), wall.unix_ns().unwrap())];
    let (t_set, w_set) = readings[0];
    let inner = std::sync::Arc::new(Mutex::new((None, Vec::new())));
    let i2 = inner.clone();
    let base = sim.reads.load(Ordering::SeqCst);
    *sim.hook.lock().unwrap() = Some(Box::new(move |n| {
        if n == base + at {
            match nested {
                // The Clock's own writers inside the wall writer: a rebase forward by
                // `stall`, or a recalibration then `stall` ns.
                3 => {
                    let t = clock.now().as_nanos();
                    let _ = clock.rebase(Instant::from_nanos(t + stall), freq(1_000_000_000_000));
                }
                4 => {
                    let _ = clock.recalibrate(freq(1_000_100_000_000));
                    sim.advance(stall);
                }
                _ => sim.advance(stall),
            }
            let r = match nested {
                1 => Some(wall.slew(3000, 1000).map(i128::from)),
                2 => Some(wall.set(U, Instant::ZERO).map(|x| x.unwrap_or(0))),
                _ => None,
            };
            sim.advance(after);
            let t = clock.now().as_nanos();
            let w = wall.unix_ns().unwrap();
            let mut g = i2.lock().unwrap();
            g.0 = r;
            g.1.push((t, w));
        }
    }));
    sim.hooked.store(true, Ordering::SeqCst);
    let outer = if outer_set {
        let r = wall.set(w_set + 1_000_000_000, Instant::from_nanos(t_set));
        (
            r.map(|x| x.unwrap_or(0)),
            Some(i128::from(w_set + 1_000_000_000) - i128::from(t_set)),
        )
    } else {
        (wall.slew(-5000, MAX_SLEW_PPM).map(i128::from), None)
    };
    sim.hooked.store(false, Ordering::SeqCst);
    let (nested_r, hook_readings) = {
        let g = inner.lock().unwrap();
        (g.0, g.1.clone())
    };
    readings.extend(hook_readings);
    readings.push((now(clock), wall.unix_ns().unwrap()));
    // The accounting: a nested write that went through came first, then the outer one.
    if let Some(Ok(x)) = nested_r {
        if nested == 1 {
            offset += i128::from(pending) - x;
            pending = 3000;
        } else {
            offset = i128::from(U);
            pending = 0;
        }
    }
    match outer {
        (Ok(x), None) => {
            offset += i128::from(pending) - x;
            pending = -5000;
        }
        (Ok(_), Some(o)) => {
            offset = o;
            pending = 0;
        }
        _ => {}
    }
    sim.advance(10_000_000_000);
    let t = now(clock);
    let w = wall.unix_ns().unwrap();
    Stalled {
        outer: outer.0,
        nested: nested_r,
        readings,
        diff: i128::from(w) - (i128::from(t) + offset + i128::from(pending)),
    }
}

/// Q5: a writer stalled at each of its counter reads (the first few, and around the end of
/// its wait of 16 384 reads on a clock short of the previous handover), for stalls short of,
/// at and past the handover, with or without a second writer inside: the second is Busy and
/// changes nothing (a twin without it reads the same), readings never go back (no set), and
/// the offsets add up exactly.
#[test]
fn stalled_writers_at_every_read() {
    let pres: [&[u64]; 4] = [&[], &[0], &[0, H], &[0, 0]];
    let ats = [
        0u64, 1, 2, 3, 4, 5, 6, 8, 16_382, 16_383, 16_384, 16_385, 16_386, 16_388,
    ];
    let stalls = [0u64, 1, H - 1, H, H + 1, 3 * H];
    let (mut fired, mut nested_ok) = (0, Vec::new());
    for pre in pres {
        for outer_set in [false, true] {
            for &at in &ats {
                for &stall in &stalls {
                    for nested in 0..5u8 {
                        for after in [0u64, 50_000] {
                            let s = stalled(pre, outer_set, at, stall, nested, after);
                            let ctx = format!(
                                "pre {pre:?} outer_set {outer_set} at {at} stall {stall} nested {nested} after {after}: {s:?}"
                            );
                            // One writer at a time: the outer may be Busy only if the nested one
                            // went through (before the outer claimed the writer's place).
                            assert!(s.outer.is_ok() || matches!(s.nested, Some(Ok(_))), "{ctx}");
                            assert_eq!(s.diff, 0, "Q3/Q5: offsets {ctx}");
                            if s.readings.len() == 3 {
                                fired += 1;
                            }
                            if !outer_set && !matches!(s.nested, Some(Ok(_)) if nested == 2) {
                                for w in s.readings.windows(2) {
                                    assert!(w[1].1 >= w[0].1, "Q2/Q5: back {ctx}");
                                }
                                // The catch-up is at most the clock time past the earliest
                                // handover the outer write can have, at up to 1.5× its rate.
                                if s.readings.len() == 3 {
                                    let (t0, _) = s.readings[0];
                                    let (th, wh) = s.readings[1];
                                    let (ta, wa) = s.readings[2];
                                    let from = th.min(t0 + H);
                                    assert!(
                                        u128::from(wa - wh) <= u128::from(ta - from) * 3 / 2 + 4,
                                        "Q5: catch-up beyond the stall past the handover: {ctx}"
                                    );
                                }
                            }
                            match s.nested {
                                Some(Ok(_)) => {
                                    // Only before the outer writer's first read is done.
                                    assert_eq!(at, 0, "Q5: a second writer inside a write: {ctx}");
                                    nested_ok.push(ctx)
                                }
                                Some(Err(e)) => {
                                    assert_eq!(e, WallError::Busy, "{ctx}");
                                    let t = stalled(pre, outer_set, at, stall, 0, after);
                                    assert_eq!(
                                        (t.outer, &t.readings, t.diff),
                                        (s.outer, &s.readings, s.diff),
                                        "Q4/Q5: the refused nested write changed something: {ctx}"
                                    );
                                }
                                None => {}
                            }
                        }
                    }
                }
            }
        }
    }
    println!(
        "hooks fired {fired}; nested writes that went through: {}",
        nested_ok.len()
    );
    for c in nested_ok.iter().take(3) {
        println!("  {c}");
    }
    assert!(fired > 500);
}

/// Q7 with bursts: near `u64::MAX` the wall time saturates, never goes back (between sets),
/// never panics; a set whose handover value is past `u64::MAX` is `OutOfRange` and changes
/// nothing; the step is reported whole (i128) and `last_step_ns` saturates to i64.
#[test]
fn bursts_near_saturation() {
    let mut rng = Rng(0x5a7u64 << 20 | 7);
    for case in 0..200 {
        let (sim, clock, wall) = rig(1_000_000_000_000, 0);
        sim.advance(1 + rng.below(10 * H));
        let t0 = now(clock);
        let start = u64::MAX - H - rng.pick(&[0, 1, 2, 1_000, 3_000_000, 2_000_000_000]);
        let first = wall.set(start, Instant::from_nanos(t0));
        assert_eq!(first, Ok(None), "case {case}");
        let mut prev = wall.unix_ns().unwrap();
        let mut steps = 0u32;
        for _ in 0..(2 + rng.below(9)) {
            match rng.below(4) {
                0 => {}
                1 => sim.advance(1),
                2 => sim.advance(H),
                _ => sim.advance(rng.below(3 * H)),
            }
            let w = wall.unix_ns().unwrap();
            assert!(w >= prev, "case {case}: back {prev} -> {w}");
            prev = w;
            let h0 = wall.health();
            if rng.below(3) == 0 {
                let t = now(clock);
                let to = rng.pick(&[u64::MAX, u64::MAX - H, u64::MAX - H - 1, 0, 1 << 62]);
                let r = wall.set(to, Instant::from_nanos(t));
                let at_handover = u128::from(to) + u128::from(H);
                match r {
                    Err(WallError::OutOfRange) => {
                        assert!(at_handover > u128::from(u64::MAX), "case {case}: {to}");
                        assert_eq!(wall.health(), h0, "case {case}");
                        assert_eq!(wall.unix_ns().unwrap(), w, "case {case}");
                    }
                    Ok(Some(s)) => {
                        assert!(at_handover <= u128::from(u64::MAX), "case {case}: {to}");
                        steps += 1;
                        let h = wall.health();
                        assert_eq!(h.steps, steps);
                        assert_eq!(
                            h.last_step_ns,
                            s.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
                        );
                        // Readings before the handover are kept.
                        assert_eq!(wall.unix_ns().unwrap(), w, "case {case}");
                        sim.advance(H);
                        let after = wall.unix_ns().unwrap();
                        let t2 = now(clock);
                        assert_eq!(
                            u128::from(after),
                            (u128::from(to) + u128::from(t2 - t)).min(u128::from(u64::MAX)),
                            "case {case}"
                        );
                        prev = after;
                    }
                    Err(WallError::Busy) => {
                        assert_eq!(wall.health(), h0, "case {case}");
                        assert_eq!(wall.unix_ns().unwrap(), w, "case {case}");
                    }
                    r => panic!("case {case}: {r:?}"),
                }
            } else {
                let off = rng.pick(&[i64::MAX, i64::MIN, 1, -1, 1_000_000, -1_000_000]);
                let ppm = rng.pick(&[1, 1000, MAX_SLEW_PPM]);
                let r = wall.slew(off, ppm);
                assert!(r.is_ok() || r == Err(WallError::Busy), "case {case}: {r:?}");
                assert_eq!(
                    wall.unix_ns().unwrap(),
                    w,
                    "case {case}: kept at one clock time"
                );
            }
        }
        // A long way on: still saturated or running, never back.
        for _ in 0..5 {
            sim.advance(1_000_000_000_000);
            let w = wall.unix_ns().unwrap();
            assert!(w >= prev, "case {case}: back {prev} -> {w}");
            prev = w;
        }
    }
}

/// Q2/Q3 across threads: one writer bursts slews (2..10 in a row, back to back or a handover
/// apart) on a counter that moves a tick at every read, while a Clock writer recalibrates and
/// two readers check their own order and a shared floor; at the end the offsets add up.
#[test]
fn threads_bursts_and_a_shared_floor() {
    threads_bursts(1, false);
}

/// The same on a counter only the writer moves (0 or 1 tick, or to just before / at / after
/// the newest handover, between writes): versions of three pieces under the readers.
#[test]
fn threads_bursts_on_a_creeping_counter() {
    threads_bursts(0, true);
}

fn threads_bursts(auto: u64, writer_moves: bool) {
    use std::sync::Arc;
    let (sim, clock, wall) = rig(1_000_000_000_000, 0);
    sim.auto.store(auto, Ordering::SeqCst);
    wall.set(U, Instant::ZERO).unwrap();
    let floor = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut readers = Vec::new();
    for _ in 0..2 {
        let floor = floor.clone();
        let stop = stop.clone();
        readers.push(std::thread::spawn(move || {
            let mut mine = 0u64;
            let mut n = 0u64;
            while !stop.load(Ordering::SeqCst) || n < 1000 {
                let f = floor.load(Ordering::SeqCst);
                let w = wall.unix_ns().unwrap();
                assert!(w >= mine, "per thread: back from {mine} to {w}");
                assert!(w >= f, "shared floor: back from {f} to {w}");
                mine = w;
                floor.fetch_max(w, Ordering::SeqCst);
                n += 1;
            }
            n
        }));
    }
    let stop2 = stop.clone();
    let recal = std::thread::spawn(move || {
        let mut i = 0u64;
        while !stop2.load(Ordering::SeqCst) && !writer_moves {
            let f = if i % 2 == 0 {
                1_000_100_000_000
            } else {
                999_950_000_000
            };
            let _ = clock.recalibrate(freq(f));
            let _ = clock.update();
            i += 1;
            std::thread::yield_now();
        }
    });
    let mut rng = Rng(0xfeed_beef);
    let (mut offset, mut pending, mut ok, mut busy) = (i128::from(U), 0i64, 0, 0);
    for _ in 0..60 {
        for _ in 0..(2 + rng.below(9)) {
            if writer_moves {
                sim.advance(rng.pick(&[0, 0, 1, 1, H - 1, H, H + 1, 2]));
            } else if rng.below(3) == 0 {
                let t = now(clock);
                while now(clock) < t + H {
                    std::hint::spin_loop();
                }
            }
            let off = rng.pick(&[1, -1, 999, -999, 100_000, -100_000]);
            match wall.slew(off, rng.pick(&[250_000, MAX_SLEW_PPM])) {
                Ok(left) => {
                    offset += i128::from(pending) - i128::from(left);
                    pending = off;
                    ok += 1;
                }
                Err(WallError::Busy) => busy += 1,
                Err(e) => panic!("{e:?}"),
            }
        }
    }
    stop.store(true, Ordering::SeqCst);
    let reads: Vec<u64> = readers.into_iter().map(|r| r.join().unwrap()).collect();
    recal.join().unwrap();
    sim.auto.store(0, Ordering::SeqCst);
    sim.advance(2_000_000_000);
    let t = now(clock);
    let w = wall.unix_ns().unwrap();
    println!("slews ok {ok} busy {busy}, reads {reads:?}");
    assert_eq!(wall.slew_remaining_ns(), 0);
    assert_eq!(
        i128::from(w),
        i128::from(t) + offset + i128::from(pending),
        "Q3 offsets"
    );
    assert_eq!(wall.health().slews, ok);
}

/// Q6 and the step's definition in a burst at one clock time: a set cancels the slew at once
/// (remaining 0 from the call), each set reports its move against the version before it (the
/// intermediate values no reader ever saw), and the steps add up to the move readers see.
#[test]
fn steps_in_a_burst_add_up() {
    let (sim, _clock, wall) = rig(1_000_000_000_000, 0);
    wall.set(U, Instant::ZERO).unwrap();
    sim.advance(3 * H);
    assert_eq!(wall.slew(1_000_000, 1000), Ok(0));
    sim.advance(2 * H);
    let w = wall.unix_ns().unwrap();
    let mut sum = 0i128;
    for to in [1_000_000_000u64, 3_000_000_000, 2_000_000_000] {
        sum += wall
            .set(w + to, Instant::from_nanos(5 * H))
            .unwrap()
            .unwrap();
        assert_eq!(wall.slew_remaining_ns(), 0);
        assert_eq!(wall.unix_ns().unwrap(), w, "kept before the handover");
    }
    // The old slew ran on until the handover: 100 µs at 1000 ppm = 100 ns more absorbed.
    sim.advance(H);
    let after = wall.unix_ns().unwrap();
    // The old version at the handover: w + H + 100; the step readers see is the sum.
    assert_eq!(i128::from(after) - i128::from(w + H + 100), sum);
    assert_eq!(sum, 2_000_000_000 - 100);
    assert_eq!(wall.health().steps, 3);
}
