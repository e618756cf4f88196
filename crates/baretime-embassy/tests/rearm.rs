//! The driver re-arms after a write that moves its deadline, without the user calling
//! `on_alarm` (issue 26, item 5): the 43 s case.
//!
//! A Cortex-M reads its clock's counter modulo 2^32 (modelled here by a 32-bit counter at
//! 25 MHz). The counter reads a whole 2^24 wrap back once after the start (SysTick read as
//! `0xff_ffff − VAL` at VAL = 0, before its first reload): the clock stands at its deadline
//! (85.9 s) until SysTick's wrap interrupt updates it, 0.67 s later — an update that finds the
//! deadline missed (`Late`) and starts the clock again. A timer scheduled meanwhile, 10 ms
//! ahead by the standing clock, has nothing to be armed against but the furthest point: half
//! an update interval, 2^30 ticks (43 s). The README recipe's SysTick handler calls
//! `CLOCK.update()` and nothing else, so nothing re-arms: the timer wakes 43 s late instead of
//! 10 ms after the update.
//!
//! The fix is a notification from the clock's writer: `Clock::on_write(self, hook: fn())` (a
//! `const` builder for the `static`), whose hook the clock calls after each write that can move
//! a deadline — `start`, `recalibrate`, `rebase`, and an `update` that returns `Late` (an
//! update on time moves an armed tick by at most a tick, and stays cheap). The application
//! wires it once, next to the driver: `Clock::uninit(counter).on_write(rearm)`.
//! `as_the_readme_recipe_wires_it` runs it so (it fails without the hook: the timer wakes 43 s
//! late); `the_driver_re_arms_from_a_write_hook` calls the hook by hand, the driver's half.

use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Wake, Waker};

use baretime::{Alarm, Clock, ClockError, Counter, FnCounter, Frequency};
use baretime_embassy::ClockDriver;
use embassy_time_driver::Driver;

const HZ: u64 = 25_000_000;
const WRAP: u64 = 1 << 24; // SysTick's period

type Read = Box<dyn Fn() -> u64 + Send + Sync>;
type TestClock = Clock<FnCounter<Read>>;
type TestDriver = ClockDriver<FnCounter<Read>, &'static Compare>;

/// `clock` with `hook` called after its writes (`Clock::on_write`).
fn with_write_hook<C: Counter>(clock: Clock<C>, hook: fn()) -> Clock<C> {
    clock.on_write(hook)
}

/// The compare timer: the last tick armed.
#[derive(Default)]
struct Compare(Mutex<Option<u64>>);

impl Alarm for Compare {
    fn arm(&self, ticks: u64) {
        *self.0.lock().unwrap() = Some(ticks);
    }
    fn disarm(&self) {
        *self.0.lock().unwrap() = None;
    }
}

/// A waker that keeps the counter's value when it was woken.
struct Woken {
    counter: &'static AtomicU64,
    at: Mutex<Option<u64>>,
}

impl Wake for Woken {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref()
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.at
            .lock()
            .unwrap()
            .get_or_insert(self.counter.load(SeqCst));
    }
}

/// One world per test (the hook is a plain `fn()`: it finds the driver here).
struct World {
    counter: &'static AtomicU64,
    clock: &'static TestClock,
    alarm: &'static Compare,
    driver: &'static TestDriver,
}

fn world(cell: &'static OnceLock<&'static TestDriver>, hook: fn()) -> World {
    let counter: &'static AtomicU64 = Box::leak(Box::new(AtomicU64::new(0)));
    let read: Read = Box::new(move || counter.load(SeqCst) & u64::from(u32::MAX));
    let clock: &'static TestClock = Box::leak(Box::new(with_write_hook(
        Clock::uninit(FnCounter::new(read, 32)),
        hook,
    )));
    let alarm: &'static Compare = Box::leak(Box::default());
    let driver: &'static TestDriver = Box::leak(Box::new(ClockDriver::new(clock, alarm)));
    let _ = cell.set(driver);
    World {
        counter,
        clock,
        alarm,
        driver,
    }
}

/// The scenario: start at 0xff_ffff, a reading a wrap back, a timer 10 ms ahead of the
/// standing clock, then SysTick's wrap interrupts (`handler`, every 2^24 ticks) and the alarm
/// (`on_alarm` when the counter reaches its tick). The counter value at which the timer was
/// woken, and when it was due: 10 ms after the update that started the clock again (to
/// within the standing clock's fraction of a microsecond, which the timer's tick dropped).
fn scenario(w: &World, handler: &dyn Fn(&World)) -> (Option<u64>, u64) {
    w.counter.store(WRAP - 1, SeqCst); // VAL = 0: the old mapping's 0xff_ffff
    w.clock.start(Frequency::exact_hz(HZ).unwrap()).unwrap();
    w.driver.on_alarm(); // as the docs ask after the start
    w.counter.store(0, SeqCst); // the first reload: a wrap back, no flag
    let standing = w.driver.now();
    assert!(
        standing > 85_000_000,
        "the clock stands at its deadline: {standing} µs"
    );
    let timer = Arc::new(Woken {
        counter: w.counter,
        at: Mutex::new(None),
    });
    w.driver
        .schedule_wake(standing + 10_000, &Waker::from(timer.clone()));
    // Time passes: SysTick wraps every 2^24 ticks; the alarm fires at its tick.
    let mut next_wrap = WRAP;
    while timer.at.lock().unwrap().is_none() && w.counter.load(SeqCst) < 60 * HZ {
        let now = w.counter.load(SeqCst);
        let armed = w
            .alarm
            .0
            .lock()
            .unwrap()
            .map(|t| now + (t.wrapping_sub(now) & u64::from(u32::MAX)));
        match armed {
            Some(at) if at < next_wrap => {
                w.counter.store(at, SeqCst);
                w.driver.on_alarm();
            }
            _ => {
                w.counter.store(next_wrap, SeqCst);
                handler(w);
                next_wrap += WRAP;
            }
        }
    }
    let woken = *timer.at.lock().unwrap();
    (woken, WRAP + HZ / 100)
}

fn assert_on_time(woken: Option<u64>, due: u64) {
    let woken = woken.expect("never woken within 60 s");
    assert!(
        woken.abs_diff(due) < HZ / 1000,
        "woken at counter {woken} ({:.3} s), due at {due} ({:.3} s)",
        woken as f64 / HZ as f64,
        due as f64 / HZ as f64
    );
}

/// The README recipe's handler: `update()` and nothing else; the clock calls the hook.
#[test]
fn as_the_readme_recipe_wires_it() {
    static DRIVER: OnceLock<&'static TestDriver> = OnceLock::new();
    fn hook() {
        if let Some(d) = DRIVER.get() {
            d.on_alarm();
        }
    }
    let w = world(&DRIVER, hook);
    let (woken, due) = scenario(&w, &|w| {
        let _ = w.clock.update();
    });
    assert_on_time(woken, due);
}

/// The driver's half: the hook called where the proposed `Clock::on_write` would call it
/// (after an update that did not return `Ok`), from inside the wrap interrupt.
#[test]
fn the_driver_re_arms_from_a_write_hook() {
    static DRIVER: OnceLock<&'static TestDriver> = OnceLock::new();
    fn hook() {
        if let Some(d) = DRIVER.get() {
            d.on_alarm();
        }
    }
    let w = world(&DRIVER, hook);
    let (woken, due) = scenario(&w, &|w| {
        let result = w.clock.update();
        assert_ne!(result, Err(ClockError::Busy));
        if result.is_err() {
            hook(); // what the clock's writer would do
        }
    });
    assert_on_time(woken, due);
}
