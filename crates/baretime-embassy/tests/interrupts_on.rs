//! The driver keeps interrupts on while it reads the clock and computes the alarm's tick
//! (issue 26, item 3): the critical section guards the queue and the arming, nothing else.
//!
//! On the host the critical section is `critical-section`'s `std` implementation, one global
//! lock: a counter read made while the driver holds it is one made "with interrupts off".
//! The counter here checks every read from another thread, which must take the lock at
//! once. And since the arithmetic runs with interrupts on, an interrupt can come in the
//! middle of it: the counter runs one (a nested `schedule_wake` for an earlier timer, or a
//! nested `on_alarm`) from inside a read, and the alarm must end up armed for the earliest
//! timer, never for the interrupted computation's stale one.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::task::{Wake, Waker};
use std::time::Duration;

use baretime::{Alarm, Clock, FnCounter, Frequency};
use baretime_embassy::ClockDriver;
use embassy_time_driver::Driver;

type Read = Box<dyn Fn() -> u64 + Send + Sync>;
type TestClock = Clock<FnCounter<Read>>;

/// The compare timer: the last tick armed, or `None`.
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

/// Whether the calling thread could take the critical section from another thread: `false`
/// when this thread holds it (the other waits until the timeout).
fn section_free() -> bool {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        critical_section::with(|_| ());
        let _ = tx.send(());
    });
    rx.recv_timeout(Duration::from_secs(5)).is_ok()
}

/// A waker that counts its wakes.
#[derive(Default)]
struct Count(AtomicU64);

impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, SeqCst);
    }
}

struct World {
    ticks: &'static AtomicU64,
    /// Counter reads made while the critical section was held.
    held: &'static AtomicUsize,
    /// Counter reads checked.
    checked: &'static AtomicUsize,
    /// Set: the next counter read runs this "interrupt" once, from inside the read.
    interrupt: &'static Mutex<Option<Box<dyn FnOnce() + Send>>>,
    alarm: &'static Compare,
    driver: &'static ClockDriver<FnCounter<Read>, &'static Compare>,
}

/// The tests take turns: the `std` critical section is one lock for the whole process, and
/// `section_free` would see another test's section as this one's.
static SERIAL: Mutex<()> = Mutex::new(());

fn world() -> World {
    let ticks: &'static AtomicU64 = Box::leak(Box::new(AtomicU64::new(0)));
    let held: &'static AtomicUsize = Box::leak(Box::new(AtomicUsize::new(0)));
    let checked: &'static AtomicUsize = Box::leak(Box::new(AtomicUsize::new(0)));
    let interrupt: &'static Mutex<Option<Box<dyn FnOnce() + Send>>> =
        Box::leak(Box::new(Mutex::new(None)));
    let checking: &'static AtomicBool = Box::leak(Box::new(AtomicBool::new(true)));
    let read: Read = Box::new(move || {
        if checking.load(SeqCst) {
            checked.fetch_add(1, SeqCst);
            if !section_free() {
                held.fetch_add(1, SeqCst);
            }
        }
        let run = interrupt.lock().unwrap().take();
        if let Some(run) = run {
            run();
        }
        ticks.load(SeqCst)
    });
    // 1 GHz: a counter tick is a nanosecond, an embassy tick (1 MHz) a thousand of them.
    let clock: &'static TestClock = Box::leak(Box::new(Clock::new(
        FnCounter::new(read, 64),
        Frequency::exact_hz(1_000_000_000).unwrap(),
    )));
    ticks.store(1_000_000, SeqCst); // the clock reads 1 ms
    let alarm: &'static Compare = Box::leak(Box::default());
    let driver = Box::leak(Box::new(ClockDriver::new(clock, alarm)));
    World {
        ticks,
        held,
        checked,
        interrupt,
        alarm,
        driver,
    }
}

/// Every counter read of `schedule_wake` and `on_alarm` (the clock's reading, the alarm's
/// tick, the check after arming) is made with the critical section free.
#[test]
fn the_clock_is_never_read_inside_the_critical_section() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let w = world();
    let t1 = Arc::new(Count::default());
    let t2 = Arc::new(Count::default());
    // At 1 ms by the clock: timers at 1.5 ms and 1.2 ms (the second moves the arming).
    w.driver.schedule_wake(1_500, &Waker::from(t1.clone()));
    w.driver.schedule_wake(1_200, &Waker::from(t2.clone()));
    assert_eq!(*w.alarm.0.lock().unwrap(), Some(1_200_000));
    w.ticks.store(1_200_000, SeqCst);
    w.driver.on_alarm();
    assert_eq!(t2.0.load(SeqCst), 1);
    assert_eq!(*w.alarm.0.lock().unwrap(), Some(1_500_000));
    w.ticks.store(1_500_000, SeqCst);
    w.driver.on_alarm();
    assert_eq!(t1.0.load(SeqCst), 1);
    assert_eq!(*w.alarm.0.lock().unwrap(), None);
    assert!(w.checked.load(SeqCst) >= 6, "too few reads checked");
    assert_eq!(
        w.held.load(SeqCst),
        0,
        "{} of {} counter reads were made inside the critical section (interrupts off)",
        w.held.load(SeqCst),
        w.checked.load(SeqCst)
    );
}

/// An "interrupt" in the middle of `schedule_wake`'s computation registers an earlier timer:
/// the interrupted computation's tick (for the later timer) must not be armed over it.
#[test]
fn an_interrupt_during_the_computation_keeps_the_earliest_arming() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let w = world();
    let late = Arc::new(Count::default());
    let early = Arc::new(Count::default());
    let driver = w.driver;
    let early_waker = Waker::from(early.clone());
    *w.interrupt.lock().unwrap() = Some(Box::new(move || {
        driver.schedule_wake(1_100, &early_waker);
    }));
    w.driver.schedule_wake(1_900, &Waker::from(late.clone()));
    assert!(w.interrupt.lock().unwrap().is_none(), "the interrupt ran");
    assert_eq!(
        *w.alarm.0.lock().unwrap(),
        Some(1_100_000),
        "armed for the interrupted computation's timer, not the interrupt's earlier one"
    );
    w.ticks.store(1_100_000, SeqCst);
    w.driver.on_alarm();
    assert_eq!((early.0.load(SeqCst), late.0.load(SeqCst)), (1, 0));
    assert_eq!(*w.alarm.0.lock().unwrap(), Some(1_900_000));
    w.ticks.store(1_900_000, SeqCst);
    w.driver.on_alarm();
    assert_eq!(late.0.load(SeqCst), 1);
}

/// An alarm interrupt (a nested `on_alarm`) in the middle of another `on_alarm`'s
/// computation, after the counter passed a timer's tick: the timer is woken once, on time,
/// and the alarm is left armed for the next one.
#[test]
fn a_nested_on_alarm_during_the_computation() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let w = world();
    let a = Arc::new(Count::default());
    let b = Arc::new(Count::default());
    w.driver.schedule_wake(1_300, &Waker::from(a.clone()));
    w.driver.schedule_wake(2_000, &Waker::from(b.clone()));
    assert_eq!(*w.alarm.0.lock().unwrap(), Some(1_300_000));
    let driver = w.driver;
    let ticks = w.ticks;
    *w.interrupt.lock().unwrap() = Some(Box::new(move || {
        ticks.store(1_300_000, SeqCst); // the counter reaches the tick meanwhile
        driver.on_alarm();
    }));
    w.driver.on_alarm();
    assert_eq!((a.0.load(SeqCst), b.0.load(SeqCst)), (1, 0));
    assert_eq!(*w.alarm.0.lock().unwrap(), Some(2_000_000));
    assert!(w.driver.now() >= 1_300);
}
