//! The monotonic against a simulated counter and a simulated compare timer, through
//! recalibrations (±100 ppm and large ratios), rebases and counter wraps at 16 to 64 bits, at
//! tick rates of 1 GHz, 1 MHz, 32 768 Hz and 1 kHz: no task ever sees `Mono::now()` (or the
//! clock) before the instant it waited for, nothing falls due while the alarm is armed later,
//! every waiter is woken, cancelled waits are never woken.
//!
//! The alarm "fires" when the test moves the counter to the armed tick, or past it (an
//! interrupt that comes late), or before it (an alarm that fires early must wake no one), and
//! sometimes twice. A tick already reached fires at once (the `Alarm` contract): the test runs
//! the interrupt until the alarm is armed ahead. Some tasks run *inside* the interrupt, when
//! woken (a task of higher priority than the alarm's interrupt, preempting it at the
//! dispatcher's pend), and queue their next wait from there; others run after it. After every
//! write of the clock the test calls `Mono::rearm()`, as the crate docs ask.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::task::{Context, Wake, Waker};

use baretime::{Clock, FnCounter, Frequency, Width};

type Fut = Pin<Box<dyn Future<Output = ()> + Send>>;
type Counter = FnCounter<fn() -> u64>;

/// The compare timer every world's alarm writes to: what was armed, and how often.
struct SimAlarm {
    armed: AtomicBool,
    tick: AtomicU64,
    arms: AtomicU64,
    /// The ticks armed, for the test that reads them (cleared by it).
    log: Mutex<Vec<u64>>,
}

impl SimAlarm {
    const fn new() -> Self {
        SimAlarm {
            armed: AtomicBool::new(false),
            tick: AtomicU64::new(0),
            arms: AtomicU64::new(0),
            log: Mutex::new(Vec::new()),
        }
    }
    fn arm(&self, ticks: u64) {
        if let Ok(mut log) = self.log.lock() {
            if log.len() < 64 {
                log.push(ticks);
            }
        }
        self.tick.store(ticks, SeqCst);
        self.armed.store(true, SeqCst);
        self.arms.fetch_add(1, SeqCst);
    }
    fn disarm(&self) {
        self.armed.store(false, SeqCst);
    }
}

/// One monotonic and its hardware, as functions: each world is a module of its own (the
/// macro declares `static`s).
#[derive(Clone, Copy)]
struct World {
    bits: u32,
    tick_hz: u64,
    clock: &'static Clock<Counter>,
    value: &'static AtomicU64,
    alarm: &'static SimAlarm,
    /// `Mono::now()` in ticks.
    now: fn() -> u64,
    /// `Mono::delay_until(t)`.
    delay_until: fn(u64) -> Fut,
    /// `Mono::delay(d)`.
    delay: fn(u64) -> Fut,
    /// `Mono::timeout_at(t, a future that never ends)`, checked to time out.
    timeout_at: fn(u64) -> Fut,
    start: fn(),
    interrupt: fn(),
    rearm: fn(),
}

macro_rules! world {
    (@hz) => { 1_000_000_000 };
    (@hz $tick:expr) => { $tick };
    ($m:ident, bits = $bits:expr $(, tick_hz = $tick:expr)?) => {
        mod $m {
            use super::*;
            use rtic_time::monotonic::TimerQueueBasedInstant;
            use rtic_time::Monotonic;

            pub static VALUE: AtomicU64 = AtomicU64::new(0);
            /// How far the counter moves at each read (0: only when the test moves it).
            pub static STEP: AtomicU64 = AtomicU64::new(0);
            /// Counter reads so far.
            pub static READS: AtomicU64 = AtomicU64::new(0);
            /// Code that runs at the n-th counter read from now: a task that preempts
            /// whatever is reading.
            #[allow(clippy::type_complexity)]
            pub static HOOK: Mutex<Option<(u64, Box<dyn FnOnce() + Send>)>> = Mutex::new(None);
            fn read() -> u64 {
                READS.fetch_add(1, SeqCst);
                let v = VALUE.fetch_add(STEP.load(SeqCst), SeqCst) & Width::new($bits).mask();
                let due = match HOOK.try_lock() {
                    Ok(mut hook) => match hook.as_mut() {
                        Some((n, _)) if *n > 1 => {
                            *n -= 1;
                            None
                        }
                        Some(_) => hook.take(),
                        None => None,
                    },
                    Err(_) => None,
                };
                if let Some((_, task)) = due {
                    task();
                }
                v
            }
            const TICK_HZ: u64 = world!(@hz $($tick)?);
            pub static CLOCK: Clock<Counter> =
                Clock::uninit(FnCounter::new(read as fn() -> u64, $bits));
            pub static ALARM: SimAlarm = SimAlarm::new();

            pub struct TheAlarm;
            impl baretime::Alarm for TheAlarm {
                fn arm(&self, ticks: u64) {
                    ALARM.arm(ticks)
                }
                fn disarm(&self) {
                    ALARM.disarm()
                }
            }

            baretime_rtic::monotonic!(Mono, &CLOCK, TheAlarm $(, $tick)?);

            type I = <Mono as Monotonic>::Instant;
            type D = <Mono as Monotonic>::Duration;

            pub fn world() -> World {
                World {
                    bits: $bits,
                    tick_hz: TICK_HZ,
                    clock: &CLOCK,
                    value: &VALUE,
                    alarm: &ALARM,
                    now: || Mono::now().ticks(),
                    delay_until: |t| Box::pin(Mono::delay_until(I::from_ticks(t))),
                    delay: |d| Box::pin(Mono::delay(D::from_ticks(d))),
                    timeout_at: |t| {
                        Box::pin(async move {
                            let r = Mono::timeout_at(I::from_ticks(t), core::future::pending::<()>())
                                .await;
                            assert!(r.is_err(), "a future that never ends ended");
                        })
                    },
                    start: || Mono::start(TheAlarm),
                    interrupt: Mono::on_interrupt,
                    rearm: Mono::rearm,
                }
            }
        }
    };
}

/// The first nanosecond of tick `t` at `tick_hz` (⌈t × 10⁹ / tick_hz⌉): the test's own
/// conversion, not the crate's.
fn tick_ns(t: u64, tick_hz: u64) -> u64 {
    let ns = (u128::from(t) * 1_000_000_000).div_ceil(u128::from(tick_hz));
    u64::try_from(ns).unwrap_or(u64::MAX)
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
        self.next() % n.max(1)
    }
}

/// One wait: the instant asked for, its future, whether it was woken, and how its task runs.
struct Waiter {
    /// The instant asked for, in ticks (`now + d` for a `delay(d)`).
    until: u64,
    /// When the queue wakes it: `until`, a tick later for a `delay(d)` with `d > 0`
    /// (rtic-time waits a tick more there, for the phase of the tick `delay` started in).
    due: u64,
    fut: Mutex<Option<Fut>>,
    /// Times its waker was called.
    wakes: AtomicU64,
    done: AtomicBool,
    cancelled: AtomicBool,
    /// Its task runs inside the alarm's interrupt when woken (a higher priority).
    preempts: bool,
}

/// What the tasks share: the world, the waits, and the counts.
struct Run {
    world: World,
    rng: Mutex<Rng>,
    waiters: Mutex<Vec<Arc<Waiter>>>,
    /// Tasks still to queue a wait after this one (each finished wait starts the next).
    budget: AtomicUsize,
    early_wakes: AtomicU64,
    completed: AtomicU64,
    preempted: AtomicU64,
}

struct WakeOf {
    run: Arc<Run>,
    waiter: Arc<Waiter>,
}

impl Wake for WakeOf {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref()
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.waiter.wakes.fetch_add(1, SeqCst);
        if self.waiter.preempts {
            // The task's priority is above the interrupt's: it runs now, inside it.
            self.run.preempted.fetch_add(1, SeqCst);
            poll(&self.run, &self.waiter);
        }
    }
}

/// Polls a wait; when it completes, checks it was not early and starts the task's next wait.
fn poll(run: &Arc<Run>, waiter: &Arc<Waiter>) {
    if waiter.done.load(SeqCst) || waiter.cancelled.load(SeqCst) {
        return;
    }
    let waker = Waker::from(Arc::new(WakeOf {
        run: run.clone(),
        waiter: waiter.clone(),
    }));
    let ready = {
        let Ok(mut slot) = waiter.fut.try_lock() else {
            return; // being polled further up this stack
        };
        let Some(fut) = slot.as_mut() else { return };
        let ready = fut
            .as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_ready();
        if ready {
            *slot = None;
        }
        ready
    };
    if !ready {
        return;
    }
    let w = run.world;
    let now = (w.now)();
    let now_ns = w.clock.now().as_nanos();
    if now < waiter.until || now_ns < tick_ns(waiter.until, w.tick_hz) {
        run.early_wakes.fetch_add(1, SeqCst);
        panic!(
            "woken early: asked for tick {} ({} ns), Mono::now() = {now}, clock {now_ns} ns",
            waiter.until,
            tick_ns(waiter.until, w.tick_hz)
        );
    }
    waiter.done.store(true, SeqCst);
    run.completed.fetch_add(1, SeqCst);
    if run
        .budget
        .fetch_update(SeqCst, SeqCst, |b| b.checked_sub(1))
        .is_ok()
    {
        spawn(run, waiter.preempts);
    }
}

/// A new wait, 0 to 100 ms ahead (in ticks), of a random kind; polled once.
fn spawn(run: &Arc<Run>, preempts: bool) {
    let w = run.world;
    let (kind, us) = {
        let mut rng = run.rng.lock().unwrap();
        let us = match rng.below(5) {
            0 => rng.below(10),
            1 => 10 + rng.below(90),
            2 => 100 + rng.below(900),
            3 => 1_000 + rng.below(9_000),
            _ => 10_000 + rng.below(90_000),
        };
        (rng.below(3), us)
    };
    let d = (u128::from(us) * u128::from(w.tick_hz) / 1_000_000) as u64;
    let now = (w.now)();
    let until = now + d;
    let fut = match kind {
        0 => (w.delay_until)(until),
        1 => (w.delay)(d),
        _ => (w.timeout_at)(until),
    };
    let due = if kind == 1 && d > 0 { until + 1 } else { until };
    let waiter = Arc::new(Waiter {
        until,
        due,
        fut: Mutex::new(Some(fut)),
        wakes: AtomicU64::new(0),
        done: AtomicBool::new(false),
        cancelled: AtomicBool::new(false),
        preempts,
    });
    run.waiters.lock().unwrap().push(waiter.clone());
    poll(run, &waiter);
}

#[derive(Default, Debug)]
struct Tally {
    waits: u64,
    interrupts: u64,
    early_interrupts: u64,
    late_interrupts: u64,
    twice: u64,
    preempted: u64,
    cancelled: u64,
    writes: u64,
    arms: u64,
}

/// Where the counter is from the armed tick: `Some(ticks to go)`, `Some(0)` when reached or
/// passed (less than half a wrap ago), `None` when disarmed.
fn to_armed(w: &World) -> Option<u64> {
    if !w.alarm.armed.load(SeqCst) {
        return None;
    }
    let width = Width::new(w.bits);
    let d = width.delta(
        w.value.load(SeqCst) & width.mask(),
        w.alarm.tick.load(SeqCst),
    );
    Some(if d > width.half() { 0 } else { d })
}

/// Runs the alarm's interrupt while its tick is reached (a pend, a tick already passed):
/// what the hardware does before anything else runs. Bounded: no storm.
fn quiesce(w: &World, tally: &mut Tally) {
    for _ in 0..64 {
        if to_armed(w) != Some(0) {
            return;
        }
        tally.interrupts += 1;
        (w.interrupt)();
    }
    panic!("the alarm keeps firing at once: an interrupt storm");
}

/// The tasks that run after the interrupt: every woken one not yet done.
fn run_woken(run: &Arc<Run>) {
    loop {
        let woken: Vec<_> = run
            .waiters
            .lock()
            .unwrap()
            .iter()
            .filter(|x| {
                !x.preempts
                    && !x.done.load(SeqCst)
                    && !x.cancelled.load(SeqCst)
                    && x.wakes.load(SeqCst) > 0
            })
            .cloned()
            .collect();
        if woken.is_empty() {
            return;
        }
        let before = run.completed.load(SeqCst);
        for x in &woken {
            poll(run, x);
        }
        if run.completed.load(SeqCst) == before {
            return; // woken, not yet due (a spurious wake): pending again
        }
    }
}

/// Nothing due is left unwoken once the interrupt has run for every tick reached.
fn check_nothing_overdue(run: &Run, step: u32) {
    let w = run.world;
    let now = (w.now)();
    for x in run.waiters.lock().unwrap().iter() {
        if x.done.load(SeqCst) || x.cancelled.load(SeqCst) {
            continue;
        }
        assert!(
            now < x.due || x.wakes.load(SeqCst) > 0,
            "step {step}: a wait for tick {} is overdue at {now} (alarm armed {:?} ticks ahead)",
            x.due,
            to_armed(&w)
        );
    }
}

/// One run on world `w` with `tasks` tasks and `steps` steps; leaves the queue empty.
fn run(w: World, hz: u64, seed: u64, tasks: usize, steps: u32) -> Tally {
    let width = Width::new(w.bits);
    let run = Arc::new(Run {
        world: w,
        rng: Mutex::new(Rng(seed | 1)),
        waiters: Mutex::new(Vec::new()),
        budget: AtomicUsize::new(usize::MAX),
        early_wakes: AtomicU64::new(0),
        completed: AtomicU64::new(0),
        preempted: AtomicU64::new(0),
    });
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut tally = Tally::default();
    let mut rate = hz;
    let narrow = w.bits < 64;
    let interval_ticks = {
        let ns = u64::try_from(w.clock.update_interval().as_nanos()).unwrap();
        u64::try_from(u128::from(ns) * u128::from(hz) / 1_000_000_000).unwrap()
    };
    let quarter = (interval_ticks / 4).clamp(1, hz / 5);
    let arms_before = w.alarm.arms.load(SeqCst);
    let advance = |n: u64| {
        let v = w.value.load(SeqCst);
        w.value.store(width.mask() & v.wrapping_add(n), SeqCst);
    };

    for i in 0..tasks {
        spawn(&run, i % 3 == 0);
    }
    quiesce(&w, &mut tally);
    for step in 0..steps {
        // A wait cancelled now and then: dropped while queued (or woken, not yet polled).
        if rng.below(8) == 0 {
            let victim = run
                .waiters
                .lock()
                .unwrap()
                .iter()
                .find(|x| !x.preempts && !x.done.load(SeqCst) && !x.cancelled.load(SeqCst))
                .cloned();
            if let Some(x) = victim {
                x.cancelled.store(true, SeqCst);
                let fut = x.fut.lock().unwrap().take();
                drop(fut);
                tally.cancelled += 1;
                spawn(&run, false);
            }
        }

        // A write, now and then, each followed by `Mono::rearm()` as the docs ask.
        let write = rng.below(40);
        let wrote = match write {
            0 | 1 => {
                rate = if write == 0 {
                    if rng.below(2) == 0 {
                        rate + rate / 10_000
                    } else {
                        rate - rate / 10_000
                    }
                } else if rate > hz {
                    hz * 3 / 4
                } else {
                    hz * 3 / 2
                };
                rate = rate.clamp(hz / 2, hz * 2);
                w.clock
                    .recalibrate(Frequency::exact_hz(rate).unwrap())
                    .is_ok()
            }
            2 => {
                // Forward by up to 50 ms: waits it passes are due at once.
                let at = w.clock.now() + core::time::Duration::from_micros(rng.below(50_000));
                w.clock
                    .rebase(at, Frequency::exact_hz(rate).unwrap())
                    .is_ok()
            }
            _ => false,
        };
        if write < 3 {
            tally.writes += u64::from(wrote);
            (w.rearm)();
        }
        quiesce(&w, &mut tally);
        run_woken(&run);
        quiesce(&w, &mut tally);
        check_nothing_overdue(&run, step);

        // Move time: to the armed tick (the alarm fires), short of it (no interrupt yet, or
        // an early one), past it (a late one), or to it with a second, spurious interrupt.
        let choice = rng.below(10);
        let armed = to_armed(&w);
        let (n, fires) = match armed {
            None => (rng.below(quarter) + 1, false),
            Some(d) if choice < 5 || d == 0 => (d.min(quarter), d <= quarter),
            Some(d) if choice < 7 => (rng.below(d).min(quarter), rng.below(3) == 0),
            Some(d) if choice < 9 => ((d + 1 + rng.below(50)).min(quarter), d < quarter),
            Some(d) => (d.min(quarter), d <= quarter),
        };
        advance(n);
        if fires {
            tally.interrupts += 1;
            tally.early_interrupts += u64::from(matches!(armed, Some(d) if d > n));
            tally.late_interrupts += u64::from(matches!(armed, Some(d) if d < n));
            (w.interrupt)();
            if choice == 9 {
                tally.twice += 1;
                tally.interrupts += 1;
                (w.interrupt)();
            }
        }
        quiesce(&w, &mut tally);
        run_woken(&run);
        quiesce(&w, &mut tally);
        // No write since the alarm was armed: a wait due now was woken.
        check_nothing_overdue(&run, step);

        // A narrow counter's cadence (the advance is at most a quarter interval), after the
        // check: `update` carries a fraction of a nanosecond, which can make the armed tick
        // one late until it is re-planned.
        if narrow {
            let _ = w.clock.update();
            (w.rearm)();
            quiesce(&w, &mut tally);
            run_woken(&run);
            quiesce(&w, &mut tally);
        }
    }

    // Drain: no new waits; fire the alarm until every wait is woken.
    run.budget.store(0, SeqCst);
    let mut rounds = 0u32;
    loop {
        let pending = run
            .waiters
            .lock()
            .unwrap()
            .iter()
            .filter(|x| !x.done.load(SeqCst) && !x.cancelled.load(SeqCst))
            .count();
        if pending == 0 {
            break;
        }
        rounds += 1;
        assert!(rounds < 1_000_000, "{pending} waits never woken");
        let d = to_armed(&w).expect("waits pending, the alarm disarmed");
        advance(d.clamp(1, quarter));
        if narrow {
            let _ = w.clock.update();
            (w.rearm)();
        }
        quiesce(&w, &mut tally);
        run_woken(&run);
        quiesce(&w, &mut tally);
        check_nothing_overdue(&run, u32::MAX);
    }
    quiesce(&w, &mut tally);
    assert!(
        !w.alarm.armed.load(SeqCst),
        "no wait left, the alarm is still armed"
    );
    // Cancelled waits were never woken after their cancellation... nor completed.
    for x in run.waiters.lock().unwrap().iter() {
        if x.cancelled.load(SeqCst) {
            assert!(!x.done.load(SeqCst));
        }
    }
    assert_eq!(run.early_wakes.load(SeqCst), 0);
    tally.waits = run.completed.load(SeqCst);
    tally.preempted = run.preempted.load(SeqCst);
    tally.arms = w.alarm.arms.load(SeqCst) - arms_before;
    tally
}

/// Starts world `w`'s clock at counter value `start`, then its monotonic, then runs seeds.
fn run_world(w: World, hz: u64, start: u64, seeds: u64) -> Tally {
    w.value.store(start & Width::new(w.bits).mask(), SeqCst);
    w.clock.start(Frequency::exact_hz(hz).unwrap()).unwrap();
    (w.start)();
    let mut total = Tally::default();
    quiesce(&w, &mut total);
    for seed in 0..seeds {
        let t = run(w, hz, seed * 7919 + u64::from(w.bits), 12, 2_500);
        total.waits += t.waits;
        total.interrupts += t.interrupts;
        total.early_interrupts += t.early_interrupts;
        total.late_interrupts += t.late_interrupts;
        total.twice += t.twice;
        total.preempted += t.preempted;
        total.cancelled += t.cancelled;
        total.writes += t.writes;
        total.arms += t.arms;
    }
    eprintln!(
        "{} bits, {hz} Hz, ticks at {} Hz: {total:?}",
        w.bits, w.tick_hz
    );
    // Every kind of event happened, and re-arming stays bounded: a few per wait, interrupt
    // and write, no storm.
    assert!(total.waits > 1_000, "{total:?}");
    assert!(
        total.early_interrupts > 10 && total.late_interrupts > 10,
        "{total:?}"
    );
    assert!(
        total.twice > 10 && total.preempted > 100 && total.cancelled > 100,
        "{total:?}"
    );
    assert!(total.writes > 50, "{total:?}");
    assert!(
        total.arms < 4 * (total.waits + total.writes + total.interrupts),
        "{total:?}"
    );
    total
}

world!(w16_ns, bits = 16);
world!(w16_us, bits = 16, tick_hz = 1_000_000);
world!(w24_ns, bits = 24);
world!(w32_us, bits = 32, tick_hz = 1_000_000);
world!(w32_32k, bits = 32, tick_hz = 32_768);
world!(w64_ns, bits = 64);
world!(w64_ms, bits = 64, tick_hz = 1_000);

#[test]
fn sixteen_bits_at_1_mhz_ticks_of_a_nanosecond() {
    run_world(w16_ns::world(), 1_000_000, 0xFF00, 3);
}

#[test]
fn sixteen_bits_at_32_khz_ticks_of_a_microsecond() {
    run_world(w16_us::world(), 32_768, 0, 3);
}

#[test]
fn twenty_four_bits_at_25_mhz() {
    run_world(w24_ns::world(), 25_000_000, 0xFF_F000, 3);
}

#[test]
fn thirty_two_bits_at_25_mhz_ticks_of_a_microsecond() {
    run_world(w32_us::world(), 25_000_000, 0xFFFF_0000, 3);
}

#[test]
fn thirty_two_bits_at_1_ghz_ticks_of_32_khz() {
    run_world(w32_32k::world(), 1_000_000_000, 7, 3);
}

#[test]
fn sixty_four_bits_at_2_6_ghz() {
    run_world(w64_ns::world(), 2_600_000_000, u64::MAX - 3_000_000_000, 3);
}

#[test]
fn sixty_four_bits_at_24_mhz_ticks_of_a_millisecond() {
    run_world(w64_ms::world(), 24_000_000, 1 << 40, 3);
}

// The cases one at a time, each on a world of its own.

world!(pend, bits = 64);

/// A task of higher priority than the alarm's interrupt preempts it between its last look at
/// the queue and its arming (while `set_compare` computes the deadline, outside any critical
/// section) and queues a wait earlier than the one being armed for: the task's pend (the
/// alarm armed at once) must survive that arming, or its wait comes late.
#[test]
fn a_pend_while_the_interrupt_plans_is_not_lost() {
    let w = pend::world();
    w.clock
        .start(Frequency::exact_hz(1_000_000_000).unwrap())
        .unwrap();
    (w.start)();
    let mut tally = Tally::default();
    quiesce(&w, &mut tally);
    let run = Arc::new(Run {
        world: w,
        rng: Mutex::new(Rng(1)),
        waiters: Mutex::new(Vec::new()),
        budget: AtomicUsize::new(0),
        early_wakes: AtomicU64::new(0),
        completed: AtomicU64::new(0),
        preempted: AtomicU64::new(0),
    });
    let waiter = |until: u64| {
        let x = Arc::new(Waiter {
            until,
            due: until,
            fut: Mutex::new(Some((w.delay_until)(until))),
            wakes: AtomicU64::new(0),
            done: AtomicBool::new(false),
            cancelled: AtomicBool::new(false),
            preempts: false,
        });
        run.waiters.lock().unwrap().push(x.clone());
        x
    };
    // Counter reads per `Mono::now()`: the queue reads it once per waiter it looks at.
    let reads = pend::READS.load(SeqCst);
    let _ = (w.now)();
    let per_now = pend::READS.load(SeqCst) - reads;

    // A due at 1 000 ns, B at 5 000 ns. At 1 000 the interrupt pops A, finds B not due, and
    // plans B: the task preempts at plan's first counter read and queues C for 1 500 ns.
    let (a, b) = (waiter(1_000), waiter(5_000));
    poll(&run, &a);
    poll(&run, &b);
    quiesce(&w, &mut tally);
    assert_eq!(w.alarm.tick.load(SeqCst), 1_000);
    let c = Arc::new(Mutex::new(None));
    let slot = c.clone();
    let task = run.clone();
    *pend::HOOK.lock().unwrap() = Some((
        2 * per_now + 1,
        Box::new(move || {
            let x = Arc::new(Waiter {
                until: 1_500,
                due: 1_500,
                fut: Mutex::new(Some((w.delay_until)(1_500))),
                wakes: AtomicU64::new(0),
                done: AtomicBool::new(false),
                cancelled: AtomicBool::new(false),
                preempts: false,
            });
            task.waiters.lock().unwrap().push(x.clone());
            poll(&task, &x); // the earliest now: pends
            *slot.lock().unwrap() = Some(x);
        }),
    ));
    w.value.store(1_000, SeqCst);
    w.alarm.log.lock().unwrap().clear();
    (w.interrupt)();
    let c = c
        .lock()
        .unwrap()
        .take()
        .expect("the task ran inside the interrupt");
    // The window was hit: the task's pend (at the counter, 1 000), then the interrupt's
    // arming for B (5 000)...
    let log = w.alarm.log.lock().unwrap().clone();
    assert_eq!(log.get(..2), Some(&[1_000, 5_000][..]), "arms: {log:?}");
    // ...after which the alarm must still fire at once.
    assert_eq!(
        to_armed(&w),
        Some(0),
        "the task's pend was undone: the alarm armed at {} at counter 1 000 (arms {log:?})",
        w.alarm.tick.load(SeqCst)
    );
    assert!(a.wakes.load(SeqCst) > 0);
    poll(&run, &a);
    quiesce(&w, &mut tally);
    assert_eq!(w.alarm.tick.load(SeqCst), 1_500, "C is the next wake");
    w.value.store(1_500, SeqCst);
    quiesce(&w, &mut tally);
    assert!(c.wakes.load(SeqCst) > 0, "C woken at its tick");
    assert_eq!(b.wakes.load(SeqCst), 0, "B not yet");
    poll(&run, &c);
    w.value.store(5_000, SeqCst);
    quiesce(&w, &mut tally);
    poll(&run, &b);
    assert!(a.done.load(SeqCst) && b.done.load(SeqCst) && c.done.load(SeqCst));
    assert!(!w.alarm.armed.load(SeqCst));
}

world!(early, bits = 32, tick_hz = 1_000_000);

/// An alarm that fires early, or twice, wakes no one; a cancelled wait is not woken and the
/// alarm moves on to the next.
#[test]
fn early_and_repeated_alarms_wake_no_one_and_a_cancelled_wait_is_skipped() {
    let w = early::world();
    w.clock
        .start(Frequency::exact_hz(1_000_000).unwrap())
        .unwrap(); // 1 tick = 1 µs
    (w.start)();
    let mut tally = Tally::default();
    quiesce(&w, &mut tally);
    let flag = |n: &Arc<AtomicU64>| {
        struct Count(Arc<AtomicU64>);
        impl Wake for Count {
            fn wake(self: Arc<Self>) {
                self.0.fetch_add(1, SeqCst);
            }
        }
        Waker::from(Arc::new(Count(n.clone())))
    };
    let (na, nb) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let mut a = (w.delay_until)(100);
    let mut b = (w.delay_until)(300);
    assert!(a
        .as_mut()
        .poll(&mut Context::from_waker(&flag(&na)))
        .is_pending());
    assert!(b
        .as_mut()
        .poll(&mut Context::from_waker(&flag(&nb)))
        .is_pending());
    quiesce(&w, &mut tally);
    assert_eq!(w.alarm.tick.load(SeqCst), 100);
    // Early: at 99 µs, twice.
    w.value.store(99, SeqCst);
    (w.interrupt)();
    (w.interrupt)();
    assert_eq!(na.load(SeqCst), 0, "woken by an early alarm");
    assert_eq!(w.alarm.tick.load(SeqCst), 100, "re-armed at its tick");
    // Cancel A: the alarm, when it comes, finds B next.
    drop(a);
    w.value.store(100, SeqCst);
    quiesce(&w, &mut tally);
    assert_eq!(na.load(SeqCst), 0, "a cancelled wait was woken");
    assert_eq!(w.alarm.tick.load(SeqCst), 300);
    // Late, and then again: B woken once, nothing left armed.
    w.value.store(350, SeqCst);
    (w.interrupt)();
    (w.interrupt)();
    assert_eq!(nb.load(SeqCst), 1);
    assert!(b
        .as_mut()
        .poll(&mut Context::from_waker(&flag(&nb)))
        .is_ready());
    assert!(!w.alarm.armed.load(SeqCst));
}

world!(before, bits = 64);

/// A monotonic started before its clock: waits queued then are armed once `Mono::rearm()`
/// follows the clock's start, and woken on time.
#[test]
fn a_monotonic_started_before_its_clock() {
    let w = before::world();
    (w.start)(); // the clock reads 0 and cannot plan: nothing armed
    let mut tally = Tally::default();
    quiesce(&w, &mut tally);
    let n = Arc::new(AtomicU64::new(0));
    struct Count(Arc<AtomicU64>);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, SeqCst);
        }
    }
    let waker = Waker::from(Arc::new(Count(n.clone())));
    let mut a = (w.delay_until)(2_000);
    assert!(a
        .as_mut()
        .poll(&mut Context::from_waker(&waker))
        .is_pending());
    quiesce(&w, &mut tally);
    assert!(
        !w.alarm.armed.load(SeqCst),
        "armed before the clock started"
    );
    w.value.store(500, SeqCst);
    w.clock
        .start(Frequency::exact_hz(1_000_000_000).unwrap())
        .unwrap();
    (w.rearm)();
    quiesce(&w, &mut tally);
    assert_eq!(
        w.alarm.tick.load(SeqCst),
        2_500,
        "epoch at 500: 2 000 ns later"
    );
    w.value.store(2_499, SeqCst);
    (w.interrupt)();
    assert_eq!(n.load(SeqCst), 0);
    w.value.store(2_500, SeqCst);
    quiesce(&w, &mut tally);
    assert_eq!(n.load(SeqCst), 1);
    assert!(a.as_mut().poll(&mut Context::from_waker(&waker)).is_ready());
    assert!((w.now)() >= 2_000);
}

world!(blocking, bits = 64, tick_hz = 1_000_000);

/// embedded-hal's blocking `DelayNs` on the monotonic waits at least the time asked, by the
/// clock (a counter that moves 7 ns a read).
#[test]
fn the_blocking_delay_waits_at_least_the_time_asked() {
    use rtic_time::embedded_hal::delay::DelayNs;
    let w = blocking::world();
    w.clock
        .start(Frequency::exact_hz(1_000_000_000).unwrap())
        .unwrap();
    blocking::STEP.store(7, SeqCst);
    for us in [0u32, 1, 3, 250] {
        let t0 = w.clock.now();
        blocking::Mono.delay_us(us);
        let took = w.clock.now() - t0;
        assert!(
            took >= core::time::Duration::from_micros(u64::from(us)),
            "{us} µs asked, {took:?}"
        );
    }
}
