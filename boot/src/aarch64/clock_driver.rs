//! STAND-IN until `baretime-embassy` lands on main: the smallest `embassy_time_driver::Driver`
//! over a `Clock` and an `Alarm`, with the API the lead's crate is expected to have
//! (`ClockDriver::new(&CLOCK, alarm)`, `on_alarm()`). Replaced by the real crate.

use core::cell::RefCell;
use core::task::Waker;

use baretime::{Alarm, Clock, Counter, Instant};
use critical_section::Mutex;
use embassy_time_driver::{Driver, TICK_HZ};
use embassy_time_queue_utils::Queue;

/// An embassy-time driver on `clock`, waking through `alarm`.
pub struct ClockDriver<C: Counter + 'static, A: Alarm> {
    clock: &'static Clock<C>,
    alarm: A,
    queue: Mutex<RefCell<Queue>>,
}

/// Embassy ticks to nanoseconds, rounded up (a wake at the result is never early).
pub fn ticks_to_ns_ceil(ticks: u64) -> u64 {
    let ns = (u128::from(ticks) * 1_000_000_000).div_ceil(u128::from(TICK_HZ));
    u64::try_from(ns).unwrap_or(u64::MAX)
}

impl<C: Counter + 'static, A: Alarm> ClockDriver<C, A> {
    /// The driver; `const`, for `time_driver_impl!`'s `static`.
    pub const fn new(clock: &'static Clock<C>, alarm: A) -> Self {
        ClockDriver {
            clock,
            alarm,
            queue: Mutex::new(RefCell::new(Queue::new())),
        }
    }

    /// From the alarm's interrupt handler: wakes what is due, arms the next.
    pub fn on_alarm(&self) {
        critical_section::with(|cs| self.rearm(&mut self.queue.borrow_ref_mut(cs)));
    }

    fn ticks(&self) -> u64 {
        let ns = u128::from(self.clock.now().as_nanos());
        u64::try_from(ns * u128::from(TICK_HZ) / 1_000_000_000).unwrap_or(u64::MAX)
    }

    fn rearm(&self, q: &mut Queue) {
        let next = q.next_expiration(self.ticks());
        if next == u64::MAX {
            self.alarm.disarm();
            return;
        }
        match self
            .clock
            .deadline(Instant::from_nanos(ticks_to_ns_ceil(next)))
        {
            // A deadline already passed is behind the counter: the alarm fires at once.
            Ok(d) => self.alarm.arm(d.ticks()),
            Err(_) => self.alarm.disarm(),
        }
    }
}

impl<C: Counter + Sync + 'static, A: Alarm + Send + Sync + 'static> Driver for ClockDriver<C, A> {
    fn now(&self) -> u64 {
        self.ticks()
    }

    fn schedule_wake(&self, at: u64, waker: &Waker) {
        critical_section::with(|cs| {
            let mut q = self.queue.borrow_ref_mut(cs);
            if q.schedule_wake(at, waker) {
                self.rearm(&mut q);
            }
        })
    }
}
