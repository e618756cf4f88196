//! [`ClockDriver`]: `embassy_time_driver::Driver` over a [`Clock`] and an [`Alarm`].

use core::cell::RefCell;
use core::task::Waker;

use baretime::{Alarm, Clock, Counter, Wake};
use critical_section::Mutex;
use embassy_time_driver::Driver;
use embassy_time_queue_utils::Queue;

use crate::ticks::{instant_ceil, ticks_floor};

/// embassy-time's driver on a [`Clock`] and an [`Alarm`]: see the [crate docs](crate).
///
/// Register one per program with [`embassy_time_driver::time_driver_impl!`], and call
/// [`ClockDriver::on_alarm`] from the alarm's interrupt handler.
pub struct ClockDriver<C: Counter + 'static, A: Alarm> {
    clock: &'static Clock<C>,
    alarm: A,
    queue: Mutex<RefCell<Queue>>,
}

impl<C: Counter + 'static, A: Alarm> ClockDriver<C, A> {
    /// A driver that reads `clock` and wakes through `alarm`. `const`, for the `static` that
    /// [`embassy_time_driver::time_driver_impl!`] declares.
    pub const fn new(clock: &'static Clock<C>, alarm: A) -> Self {
        ClockDriver {
            clock,
            alarm,
            queue: Mutex::new(RefCell::new(Queue::new())),
        }
    }

    /// The alarm's interrupt handler's part: wakes every timer whose tick the clock has
    /// reached, and arms the alarm for the next one (or disarms it). An alarm that fired
    /// early wakes nobody and is re-armed. Call it once after [`Clock::start`] too, for timers
    /// scheduled before the start. Safe to call at any time, from any context; it takes the
    /// critical section.
    pub fn on_alarm(&self) {
        critical_section::with(|cs| {
            let mut queue = self.queue.borrow_ref_mut(cs);
            self.service(&mut queue);
        });
    }

    /// The clock this driver reads.
    pub fn clock(&self) -> &'static Clock<C> {
        self.clock
    }

    /// Wakes what is due and arms the alarm for the rest, in the critical section.
    fn service(&self, queue: &mut Queue) {
        loop {
            let next = queue.next_expiration(ticks_floor(self.clock.now().as_nanos()));
            let at = instant_ceil(next);
            // `u64::MAX` is embassy's "never"; a tick past the clock's last nanosecond
            // (584 years) is never reached either: nothing to arm for.
            if next == u64::MAX || ticks_floor(at.as_nanos()) < next {
                self.alarm.disarm();
                return;
            }
            let Ok(deadline) = self.clock.deadline(at) else {
                // Not started: nothing to arm against. `on_alarm` after the start arms it.
                self.alarm.disarm();
                return;
            };
            self.alarm.arm(deadline.ticks());
            // The tick may have passed while it was armed (or already at computing it): the
            // check says so, and the queue is serviced again rather than waiting on an alarm
            // that a timer firing only on equality would never raise.
            match self.clock.check(deadline) {
                Wake::Fired => continue,
                Wake::Rearm(again) => {
                    if again.ticks() != deadline.ticks() {
                        self.alarm.arm(again.ticks());
                    }
                    return;
                }
            }
        }
    }
}

impl<C, A> Driver for ClockDriver<C, A>
where
    C: Counter + Send + Sync + 'static,
    A: Alarm + Send + Sync + 'static,
{
    #[inline]
    fn now(&self) -> u64 {
        ticks_floor(self.clock.now().as_nanos())
    }

    fn schedule_wake(&self, at: u64, waker: &Waker) {
        critical_section::with(|cs| {
            let mut queue = self.queue.borrow_ref_mut(cs);
            if queue.schedule_wake(at, waker) {
                self.service(&mut queue);
            }
        });
    }
}
