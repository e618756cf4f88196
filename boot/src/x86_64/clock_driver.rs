//! A minimal stand-in for `baretime-embassy`'s `ClockDriver` (same API: `new`, `on_alarm`, the
//! `embassy_time_driver::Driver` impl), used until that crate lands on main.

use core::cell::RefCell;
use core::task::Waker;

use baretime::{Alarm, Clock, Counter, Deadline, Instant, Wake};
use critical_section::Mutex;
use embassy_time_queue_utils::Queue;

/// embassy-time's tick rate (the `tick-hz-*` feature).
const TICK_HZ: u64 = embassy_time_driver::TICK_HZ;

/// An embassy-time driver over a `Clock` and an `Alarm`.
pub struct ClockDriver<C: Counter + 'static, A: Alarm> {
    clock: &'static Clock<C>,
    alarm: A,
    state: Mutex<RefCell<State>>,
}

struct State {
    queue: Queue,
    armed: Option<Deadline>,
}

/// `ns` in embassy ticks, rounded down (a tick is reached once its whole time has passed).
fn ns_to_ticks(ns: u64) -> u64 {
    (u128::from(ns) * u128::from(TICK_HZ) / 1_000_000_000) as u64
}

/// The first nanosecond of embassy tick `ticks`, rounded up.
pub fn ticks_to_ns(ticks: u64) -> u64 {
    let ns = (u128::from(ticks) * 1_000_000_000).div_ceil(u128::from(TICK_HZ));
    u64::try_from(ns).unwrap_or(u64::MAX)
}

impl<C: Counter + 'static, A: Alarm> ClockDriver<C, A> {
    pub const fn new(clock: &'static Clock<C>, alarm: A) -> Self {
        ClockDriver {
            clock,
            alarm,
            state: Mutex::new(RefCell::new(State {
                queue: Queue::new(),
                armed: None,
            })),
        }
    }

    /// Call from the alarm's interrupt handler (and after a recalibration).
    pub fn on_alarm(&self) {
        critical_section::with(|cs| {
            let mut state = self.state.borrow_ref_mut(cs);
            let Some(deadline) = state.armed else {
                return;
            };
            match self.clock.check(deadline) {
                Wake::Fired => self.rearm(&mut state),
                Wake::Rearm(next) => {
                    state.armed = Some(next);
                    self.alarm.arm(next.ticks());
                }
            }
        });
    }

    fn rearm(&self, state: &mut State) {
        let now = ns_to_ticks(self.clock.now().as_nanos());
        let next = state.queue.next_expiration(now);
        if next == u64::MAX {
            state.armed = None;
            self.alarm.disarm();
            return;
        }
        match self.clock.deadline(Instant::from_nanos(ticks_to_ns(next))) {
            Ok(d) => {
                state.armed = Some(d);
                self.alarm.arm(d.ticks());
            }
            Err(_) => {
                state.armed = None;
                self.alarm.disarm();
            }
        }
    }
}

impl<C: Counter + Sync + 'static, A: Alarm + Send + Sync + 'static> embassy_time_driver::Driver
    for ClockDriver<C, A>
{
    fn now(&self) -> u64 {
        ns_to_ticks(self.clock.now().as_nanos())
    }

    fn schedule_wake(&self, at: u64, waker: &Waker) {
        critical_section::with(|cs| {
            let mut state = self.state.borrow_ref_mut(cs);
            if state.queue.schedule_wake(at, waker) {
                self.rearm(&mut state);
            }
        });
    }
}
