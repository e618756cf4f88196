//! A stand-in for `baretime-embassy`'s `ClockDriver`, with the same API, until that crate
//! lands: an embassy-time driver over a `static` [`Clock`] and an [`Alarm`], its timer queue
//! (embassy-time-queue-utils') in a critical section.

use core::cell::RefCell;
use core::task::Waker;

use baretime::{Alarm, Clock, Counter, Instant};
use critical_section::Mutex;
use embassy_time_driver::{Driver, TICK_HZ};
use embassy_time_queue_utils::Queue;

const NS_PER_S: u128 = 1_000_000_000;

/// Embassy ticks at `ns`, rounded down (`now` never ahead of the clock).
fn ns_to_ticks(ns: u64) -> u64 {
    (u128::from(ns) * u128::from(TICK_HZ) / NS_PER_S) as u64
}

/// The nanosecond at which embassy tick `ticks` begins, rounded up (a wake never early).
fn ticks_to_ns_ceil(ticks: u64) -> u64 {
    let ns = (u128::from(ticks) * NS_PER_S).div_ceil(u128::from(TICK_HZ));
    u64::try_from(ns).unwrap_or(u64::MAX)
}

/// An embassy-time driver over `clock`, woken by `alarm`.
pub struct ClockDriver<C: Counter + 'static, A: Alarm> {
    clock: &'static Clock<C>,
    alarm: A,
    queue: Mutex<RefCell<Queue>>,
}

impl<C: Counter + 'static, A: Alarm> ClockDriver<C, A> {
    /// The driver; register it with `embassy_time_driver::time_driver_impl!`.
    pub const fn new(clock: &'static Clock<C>, alarm: A) -> Self {
        ClockDriver {
            clock,
            alarm,
            queue: Mutex::new(RefCell::new(Queue::new())),
        }
    }

    /// Call from the alarm's interrupt handler.
    pub fn on_alarm(&self) {
        critical_section::with(|cs| self.arm_next(&mut self.queue.borrow_ref_mut(cs)));
    }

    /// Wakes what is due, then arms the alarm for the next expiration (or disarms it).
    fn arm_next(&self, queue: &mut Queue) {
        let next = queue.next_expiration(ns_to_ticks(self.clock.now().as_nanos()));
        if next == u64::MAX {
            self.alarm.disarm();
            return;
        }
        match self
            .clock
            .deadline(Instant::from_nanos(ticks_to_ns_ceil(next)))
        {
            Ok(deadline) => self.alarm.arm(deadline.ticks()),
            Err(_) => self.alarm.disarm(),
        }
    }
}

impl<C, A> Driver for ClockDriver<C, A>
where
    C: Counter + Sync + 'static,
    A: Alarm + Send + Sync + 'static,
{
    fn now(&self) -> u64 {
        ns_to_ticks(self.clock.now().as_nanos())
    }

    fn schedule_wake(&self, at: u64, waker: &Waker) {
        critical_section::with(|cs| {
            let mut queue = self.queue.borrow_ref_mut(cs);
            if queue.schedule_wake(at, waker) {
                self.arm_next(&mut queue);
            }
        })
    }
}
