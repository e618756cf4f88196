//! [`ClockDriver`]: `embassy_time_driver::Driver` over a [`Clock`] and an [`Alarm`].

use core::cell::RefCell;
#[cfg(target_has_atomic = "64")]
use core::sync::atomic::{AtomicU64, Ordering};
use core::task::Waker;

use baretime::{Alarm, Clock, Counter};
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
    state: Mutex<RefCell<State<A>>>,
    /// Timers registered from inside the driver (a waker that polls its task at once, while
    /// the queue is being serviced), queued as soon as the service ends.
    deferred: Mutex<RefCell<Deferred>>,
    /// The latest `now()` handed out: embassy's clock never goes back, even where the
    /// counter lags between CPUs by up to `baretime::LAG_NS` (which `Clock::now` allows).
    #[cfg(target_has_atomic = "64")]
    latest: AtomicU64,
}

/// How many registrations from inside the driver wait for the queue at once; past that a
/// task is woken to register again (a spurious wake, which futures allow).
const DEFERRED: usize = 4;

/// Registrations from inside the driver: (embassy tick, waker).
type Deferred = [Option<(u64, Waker)>; DEFERRED];

/// What the critical section guards: the timers, and the alarm once there is one.
struct State<A> {
    queue: Queue,
    alarm: Option<A>,
}

impl<C: Counter + 'static, A: Alarm> ClockDriver<C, A> {
    /// A driver that reads `clock` and wakes through `alarm`. `const`, for the `static` that
    /// [`embassy_time_driver::time_driver_impl!`] declares.
    pub const fn new(clock: &'static Clock<C>, alarm: A) -> Self {
        ClockDriver {
            clock,
            state: Mutex::new(RefCell::new(State {
                queue: Queue::new(),
                alarm: Some(alarm),
            })),
            deferred: Mutex::new(RefCell::new([const { None }; DEFERRED])),
            #[cfg(target_has_atomic = "64")]
            latest: AtomicU64::new(0),
        }
    }

    /// A driver whose alarm is set up at run time ([`ClockDriver::set_alarm`]): for a timer
    /// that only exists after probing the hardware (baretime-x86's `ApicTimer`, say), in the
    /// `static` that [`embassy_time_driver::time_driver_impl!`] declares. Timers scheduled
    /// before the alarm is set wait for it.
    pub const fn without_alarm(clock: &'static Clock<C>) -> Self {
        ClockDriver {
            clock,
            state: Mutex::new(RefCell::new(State {
                queue: Queue::new(),
                alarm: None,
            })),
            deferred: Mutex::new(RefCell::new([const { None }; DEFERRED])),
            #[cfg(target_has_atomic = "64")]
            latest: AtomicU64::new(0),
        }
    }

    /// Sets (or replaces) the alarm and arms it for the timers already scheduled. The
    /// alarm it replaces is disarmed first. Called from inside the driver (from an
    /// [`Alarm`]'s `arm` or a waker), it does nothing: set the alarm from outside them.
    pub fn set_alarm(&self, alarm: A) {
        critical_section::with(|cs| {
            // Busy only when called from inside the driver (an `Alarm` or a waker calling
            // back): the alarm is then dropped, as if set and replaced at once.
            let Ok(mut state) = self.state.borrow(cs).try_borrow_mut() else {
                return;
            };
            if let Some(old) = state.alarm.replace(alarm) {
                old.disarm();
            }
            self.service(&mut state);
            self.drain(cs, &mut state);
        });
    }

    /// The alarm's interrupt handler's part: wakes every timer whose tick the clock has
    /// reached, and arms the alarm for the next one (or disarms it). An alarm that fired
    /// early wakes nobody and is re-armed. Call it once after [`Clock::start`] too, for timers
    /// scheduled before the start. Safe to call at any time, from any context; it takes the
    /// critical section.
    pub fn on_alarm(&self) {
        critical_section::with(|cs| {
            // Busy only when called from inside the driver (an `Alarm` whose `arm` runs the
            // handler itself): the service loop running below re-reads the clock after
            // arming, so there is nothing left to do.
            if let Ok(mut state) = self.state.borrow(cs).try_borrow_mut() {
                self.service(&mut state);
                self.drain(cs, &mut state);
            }
        });
    }

    /// The clock this driver reads.
    pub fn clock(&self) -> &'static Clock<C> {
        self.clock
    }

    /// Keeps a registration made while the queue is being serviced. With no room left (more
    /// than `DEFERRED` at once), the task is woken to register again: a spurious wake, not an
    /// early one — embassy's `Timer` checks the time when polled.
    fn defer(&self, cs: critical_section::CriticalSection<'_>, at: u64, waker: &Waker) {
        let slot = self
            .deferred
            .borrow(cs)
            .try_borrow_mut()
            .ok()
            .and_then(|mut slots| {
                let slot = slots.iter_mut().find(|s| match s {
                    Some((_, w)) => w.will_wake(waker),
                    None => true,
                })?;
                let at = match slot {
                    Some((earlier, _)) => at.min(*earlier),
                    None => at,
                };
                *slot = Some((at, waker.clone()));
                Some(())
            });
        if slot.is_none() {
            waker.wake_by_ref();
        }
    }

    /// Queues the registrations kept by `defer`, servicing the queue after each that changes
    /// it, until none is left.
    fn drain(&self, cs: critical_section::CriticalSection<'_>, state: &mut State<A>) {
        loop {
            let next = self
                .deferred
                .borrow(cs)
                .try_borrow_mut()
                .ok()
                .and_then(|mut slots| slots.iter_mut().find_map(Option::take));
            let Some((at, waker)) = next else {
                return;
            };
            if state.queue.schedule_wake(at, &waker) {
                self.service(state);
            }
        }
    }

    /// Wakes what is due and arms the alarm for the rest, in the critical section.
    fn service(&self, state: &mut State<A>) {
        let State { queue, alarm } = state;
        let Some(alarm) = alarm.as_ref() else {
            return; // `set_alarm` services the queue
        };
        loop {
            let next = queue.next_expiration(ticks_floor(self.clock.now().as_nanos()));
            let at = instant_ceil(next);
            // `u64::MAX` is embassy's "never"; a tick past the clock's last nanosecond
            // (584 years) is never reached either: nothing to arm for.
            if next == u64::MAX || ticks_floor(at.as_nanos()) < next {
                alarm.disarm();
                return;
            }
            let Ok(deadline) = self.clock.deadline(at) else {
                // Not started: nothing to arm against. `on_alarm` after the start arms it.
                alarm.disarm();
                return;
            };
            alarm.arm(deadline.ticks());
            // The tick may have passed while it was armed (or already when it was computed):
            // then the queue is serviced again rather than left to an alarm that fires only
            // on equality. Otherwise the armed tick stands until the alarm or a write (after
            // which the writer calls `on_alarm`): an early alarm finds nothing due above and
            // re-arms here, at a tick computed afresh on the timeline then in force. One
            // `deadline` per arming, no `check`: the service runs with interrupts off.
            if self.clock.now() < at {
                return;
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
        let now = ticks_floor(self.clock.now().as_nanos());
        // A load first: a read-modify-write only when the tick has moved on.
        #[cfg(target_has_atomic = "64")]
        let now = match self.latest.load(Ordering::Relaxed) {
            latest if now <= latest => latest,
            _ => now.max(self.latest.fetch_max(now, Ordering::Relaxed)),
        };
        now
    }

    fn schedule_wake(&self, at: u64, waker: &Waker) {
        critical_section::with(|cs| {
            let Ok(mut state) = self.state.borrow(cs).try_borrow_mut() else {
                // Called back from inside the driver (a waker that polls its task at once):
                // kept for when the service running below ends, never woken early.
                self.defer(cs, at, waker);
                return;
            };
            if state.queue.schedule_wake(at, waker) {
                self.service(&mut state);
            }
            self.drain(cs, &mut state);
        });
    }
}
