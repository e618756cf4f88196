//! The driver against a simulated counter and a simulated compare timer, through
//! recalibrations (±100 ppm and large ratios), rebases and counter wraps at 16, 32 and 64 bits:
//! no timer is ever woken before the clock reads its instant, none is left overdue past the
//! alarm's tick, and every timer is woken.
//!
//! The alarm "fires" when the test moves the counter to the armed tick (or past it, as an
//! interrupt that comes late), and sometimes early (an alarm that fires early must wake no
//! one). After every write the test calls `on_alarm`, as the crate docs ask.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::task::{Wake, Waker};

use baretime::{Alarm, Clock, FnCounter, Frequency, Instant, Width};
use baretime_embassy::ClockDriver;
use embassy_time_driver::{Driver, TICK_HZ};

/// The compare timer: what was armed, and how often.
#[derive(Default)]
struct SimAlarm {
    armed: AtomicBool,
    tick: AtomicU64,
    arms: AtomicU64,
}

impl Alarm for SimAlarm {
    fn arm(&self, ticks: u64) {
        self.tick.store(ticks, SeqCst);
        self.armed.store(true, SeqCst);
        self.arms.fetch_add(1, SeqCst);
    }
    fn disarm(&self) {
        self.armed.store(false, SeqCst);
    }
}

/// One timer: its embassy tick, and the clock's reading when it was woken.
struct Timer {
    at: u64,
    woken_ns: Mutex<Option<u64>>,
    now: Box<dyn Fn() -> u64 + Send + Sync>,
}

impl Wake for Timer {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref()
    }
    fn wake_by_ref(self: &Arc<Self>) {
        let mut w = self.woken_ns.lock().unwrap();
        if w.is_none() {
            *w = Some((self.now)());
        }
    }
}

/// The first nanosecond at which embassy's clock reads tick `t`, at this build's TICK_HZ.
fn due_ns(t: u64) -> u64 {
    let q = (u128::from(t) * 1_000_000_000).div_ceil(u128::from(TICK_HZ));
    u64::try_from(q).unwrap_or(u64::MAX)
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

type Read = Box<dyn Fn() -> u64 + Send + Sync>;

#[derive(Default, Debug)]
struct Tally {
    timers: u64,
    alarms: u64,
    early_alarms: u64,
    writes: u64,
    arms: u64,
}

/// One run: a `bits`-wide counter at `hz` starting at `start`, `steps` steps.
fn run(seed: u64, bits: u32, hz: u64, start: u64, steps: u32) -> Tally {
    let width = Width::new(bits);
    let mut rng = Rng(seed | 1);
    let value = Arc::new(AtomicU64::new(start & width.mask()));
    let read: Read = {
        let value = value.clone();
        Box::new(move || value.load(SeqCst))
    };
    let counter = FnCounter::new(read, bits);
    let clock: &'static Clock<FnCounter<Read>> = Box::leak(Box::new(Clock::new(
        counter,
        Frequency::exact_hz(hz).unwrap(),
    )));
    let alarm: &'static SimAlarm = Box::leak(Box::default());
    let driver = ClockDriver::new(clock, alarm);
    let now_ns = move || clock.now().as_nanos();
    let narrow = bits < 64;
    let interval_ticks = {
        let ns = u64::try_from(clock.update_interval().as_nanos()).unwrap();
        u64::try_from(u128::from(ns) * u128::from(hz) / 1_000_000_000).unwrap()
    };

    let mut pending: Vec<Arc<Timer>> = Vec::new();
    let mut tally = Tally::default();
    let mut rate = hz;

    // Moves the counter `n` ticks forward (wrapping in its width), keeping a narrow clock's
    // update cadence (n is at most a quarter of the interval).
    let advance = |n: u64| {
        let v = value.load(SeqCst);
        value.store(width.mask() & v.wrapping_add(n), SeqCst);
    };

    for step in 0..steps {
        // New timers, 10 µs to 100 ms ahead (in embassy ticks), some already due.
        if pending.len() < 12 || rng.below(4) == 0 {
            let now_t = driver.now();
            let us = match rng.below(5) {
                0 => rng.below(10),
                1 => 10 + rng.below(90),
                2 => 100 + rng.below(900),
                3 => 1_000 + rng.below(9_000),
                _ => 10_000 + rng.below(90_000),
            };
            let at = now_t.saturating_add(us * TICK_HZ / 1_000_000);
            let timer = Arc::new(Timer {
                at,
                woken_ns: Mutex::new(None),
                now: Box::new(now_ns),
            });
            driver.schedule_wake(at, &Waker::from(timer.clone()));
            pending.push(timer);
            tally.timers += 1;
        }

        // A write, now and then: each followed by on_alarm, as the docs ask.
        let write = rng.below(40);
        if write == 0 {
            let ppm_up = rng.below(2) == 0;
            rate = if ppm_up {
                rate + rate / 10_000
            } else {
                rate - rate / 10_000
            };
            rate = rate.clamp(hz / 2, hz * 2);
            if clock
                .recalibrate(Frequency::exact_hz(rate).unwrap())
                .is_ok()
            {
                tally.writes += 1;
            }
            driver.on_alarm();
        } else if write == 1 {
            // A large ratio, within the 2x band the test keeps the counter's rate in.
            rate = if rate > hz { hz * 3 / 4 } else { hz * 3 / 2 };
            if clock
                .recalibrate(Frequency::exact_hz(rate).unwrap())
                .is_ok()
            {
                tally.writes += 1;
            }
            driver.on_alarm();
        } else if write == 2 {
            // A rebase forward by up to 50 ms: timers it passes are due at once.
            let at = clock.now() + core::time::Duration::from_micros(rng.below(50_000));
            if clock.rebase(at, Frequency::exact_hz(rate).unwrap()).is_ok() {
                tally.writes += 1;
            }
            driver.on_alarm();
        }

        // Nothing is overdue between events.
        let now = clock.now().as_nanos();
        for t in &pending {
            assert!(
                t.woken_ns.lock().unwrap().is_some() || now < due_ns(t.at),
                "step {step}: a timer for tick {} is overdue at {now} ns (due {})",
                t.at,
                due_ns(t.at)
            );
        }

        // Move time: to the armed tick (the alarm fires), short of it (no interrupt yet, or
        // an early one), or past it (a late interrupt). Never more than a quarter interval.
        let quarter = (interval_ticks / 4).clamp(1, hz / 5);
        let reading = value.load(SeqCst);
        let armed = alarm.armed.load(SeqCst);
        let to_armed = width.delta(reading, alarm.tick.load(SeqCst));
        let to_armed = if to_armed > width.half() { 0 } else { to_armed };
        let choice = rng.below(8);
        let (n, fires) = if !armed {
            (rng.below(quarter) + 1, false)
        } else if choice < 5 || to_armed == 0 {
            (to_armed.min(quarter), to_armed <= quarter)
        } else if choice < 7 {
            (rng.below(to_armed).min(quarter), rng.below(3) == 0) // maybe an early interrupt
        } else {
            (
                (to_armed + 1 + rng.below(50)).min(quarter),
                to_armed < quarter,
            )
        };
        advance(n);
        if narrow {
            let _ = clock.update();
            tally.writes += 1;
            driver.on_alarm();
        }
        if !fires {
            // No interrupt: nothing may have become overdue short of the armed tick.
            let now = clock.now().as_nanos();
            let reading = value.load(SeqCst);
            let before_armed = !armed || {
                let d = width.delta(reading, alarm.tick.load(SeqCst));
                d > 0 && d <= width.half()
            };
            if before_armed {
                for t in &pending {
                    assert!(
                        t.woken_ns.lock().unwrap().is_some() || now < due_ns(t.at),
                        "step {step}: tick {} fell due at {now} ns before the armed tick",
                        t.at
                    );
                }
            }
        } else {
            let early = width.delta(value.load(SeqCst), alarm.tick.load(SeqCst));
            if early > 0 && early <= width.half() {
                tally.early_alarms += 1;
            }
            tally.alarms += 1;
            driver.on_alarm();
        }

        // Never early: every wake read the clock at or past its tick's instant.
        pending.retain(|t| match *t.woken_ns.lock().unwrap() {
            Some(ns) => {
                assert!(ns >= due_ns(t.at), "woken early: tick {} at {ns} ns", t.at);
                false
            }
            None => true,
        });
    }

    // Drain: fire the alarm until every timer is woken, at most one step per 1/4 interval.
    let mut rounds = 0u32;
    while !pending.is_empty() {
        rounds += 1;
        assert!(rounds < 1_000_000, "{} timers never woken", pending.len());
        let reading = value.load(SeqCst);
        let d = width.delta(reading, alarm.tick.load(SeqCst));
        let quarter = (interval_ticks / 4).clamp(1, hz / 5);
        assert!(alarm.armed.load(SeqCst), "timers pending, alarm disarmed");
        advance(if d > width.half() {
            1
        } else {
            d.clamp(1, quarter)
        });
        if narrow {
            let _ = clock.update();
        }
        driver.on_alarm();
        pending.retain(|t| match *t.woken_ns.lock().unwrap() {
            Some(ns) => {
                assert!(ns >= due_ns(t.at), "woken early: tick {} at {ns} ns", t.at);
                false
            }
            None => true,
        });
    }
    assert!(
        !alarm.armed.load(SeqCst),
        "no timer left, the alarm is still armed"
    );
    tally.arms = alarm.arms.load(SeqCst);
    tally
}

#[test]
fn never_early_never_overdue_through_writes_and_wraps() {
    let mut total = Tally::default();
    for (i, &(bits, hz, start)) in [
        (16u32, 1_000_000u64, 0xFF00u64),
        (16, 32_768, 0),
        (24, 25_000_000, 0xFF_F000),
        (32, 25_000_000, 0xFFFF_0000),
        (32, 1_000_000_000, 7),
        (64, 2_600_000_000, u64::MAX - 3_000_000_000),
        (64, 1_000_000_000, 1 << 40),
        (64, 24_000_000, 0),
    ]
    .iter()
    .enumerate()
    {
        for seed in 0..6u64 {
            let t = run(seed * 1000 + i as u64 + 1, bits, hz, start, 3_000);
            total.timers += t.timers;
            total.alarms += t.alarms;
            total.early_alarms += t.early_alarms;
            total.writes += t.writes;
            total.arms += t.arms;
        }
    }
    eprintln!("{total:?}");
    // Re-arms stay bounded: a few per timer and per write, no storm.
    assert!(
        total.arms < 4 * (total.timers + total.writes + total.alarms),
        "{total:?}"
    );
    assert!(total.timers > 10_000 && total.alarms > 10_000 && total.early_alarms > 100);
}

/// A clock that reads its last nanosecond (saturated) and a timer beyond it: the timer can
/// never be reached, and servicing the queue must neither spin nor wake it.
#[test]
fn a_timer_beyond_the_clocks_range_is_never_woken_and_never_spins() {
    let value = Arc::new(AtomicU64::new(0));
    let read: Read = {
        let value = value.clone();
        Box::new(move || value.load(SeqCst))
    };
    let clock: &'static Clock<FnCounter<Read>> = Box::leak(Box::new(Clock::new(
        FnCounter::new(read, 64),
        Frequency::exact_hz(1_000_000_000).unwrap(),
    )));
    let alarm: &'static SimAlarm = Box::leak(Box::default());
    let driver = ClockDriver::new(clock, alarm);
    clock
        .rebase(
            Instant::from_nanos(u64::MAX - 5),
            Frequency::exact_hz(1_000_000_000).unwrap(),
        )
        .unwrap();
    value.store(1_000, SeqCst);
    assert_eq!(clock.now().as_nanos(), u64::MAX);
    let now_ns = move || clock.now().as_nanos();
    let near = Arc::new(Timer {
        at: driver.now(),
        woken_ns: Mutex::new(None),
        now: Box::new(now_ns),
    });
    let far = Arc::new(Timer {
        at: u64::MAX - 1,
        woken_ns: Mutex::new(None),
        now: Box::new(now_ns),
    });
    driver.schedule_wake(far.at, &Waker::from(far.clone()));
    driver.schedule_wake(near.at, &Waker::from(near.clone()));
    driver.on_alarm();
    assert!(near.woken_ns.lock().unwrap().is_some());
    assert!(far.woken_ns.lock().unwrap().is_none());
}

/// An alarm set up at run time: timers scheduled before it wait, and are armed when it comes.
/// And an alarm that runs the handler itself from `arm` (a timer that can only fire by being
/// pended by hand, done synchronously): no panic, no lost timer.
#[test]
fn an_alarm_set_at_run_time_and_one_that_calls_back() {
    let value = Arc::new(AtomicU64::new(0));
    let read: Read = {
        let value = value.clone();
        Box::new(move || value.load(SeqCst))
    };
    let clock: &'static Clock<FnCounter<Read>> = Box::leak(Box::new(Clock::new(
        FnCounter::new(read, 64),
        Frequency::exact_hz(1_000_000_000).unwrap(),
    )));

    struct CallsBack {
        inner: &'static SimAlarm,
        driver: std::sync::OnceLock<&'static ClockDriver<FnCounter<Read>, CallsBack>>,
    }
    impl Alarm for CallsBack {
        fn arm(&self, ticks: u64) {
            self.inner.arm(ticks);
            if let Some(d) = self.driver.get() {
                d.on_alarm(); // re-entrant: must neither panic nor lose anything
            }
        }
        fn disarm(&self) {
            self.inner.disarm()
        }
    }

    let driver: &'static ClockDriver<FnCounter<Read>, CallsBack> =
        Box::leak(Box::new(ClockDriver::without_alarm(clock)));
    let now_ns = move || clock.now().as_nanos();
    let timer = Arc::new(Timer {
        at: 500,
        woken_ns: Mutex::new(None),
        now: Box::new(now_ns),
    });
    driver.schedule_wake(timer.at, &Waker::from(timer.clone()));
    driver.on_alarm(); // no alarm yet: nothing to arm, nothing lost
    let inner: &'static SimAlarm = Box::leak(Box::default());
    let alarm = CallsBack {
        inner,
        driver: std::sync::OnceLock::new(),
    };
    let _ = alarm.driver.set(driver);
    driver.set_alarm(alarm);
    assert!(
        inner.armed.load(SeqCst),
        "set_alarm arms for the timer already scheduled"
    );
    assert_eq!(inner.tick.load(SeqCst), 500_000); // 500 µs at 1 GHz
    value.store(499_999, SeqCst);
    driver.on_alarm();
    assert!(timer.woken_ns.lock().unwrap().is_none(), "woken early");
    value.store(500_000, SeqCst);
    driver.on_alarm();
    assert_eq!(*timer.woken_ns.lock().unwrap(), Some(500_000));
    assert!(!inner.armed.load(SeqCst));
}
