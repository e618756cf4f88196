//! [`ClockDriver`]: `embassy_time_driver::Driver` over a [`Clock`] and an [`Alarm`].
//!
//! # Interrupts stay on for the arithmetic
//!
//! The queue is guarded by a critical section (interrupts off, on one core), and nothing else
//! is: every [`Clock`] call — the reading that decides which timers are due, the
//! [`Clock::deadline`] that turns the next expiry into a counter tick — runs outside it. A
//! service is three steps:
//!
//! 1. read the clock (interrupts on);
//! 2. in the critical section, wake the timers due by that reading, note the next expiry and
//!    open a *plan* for it (a number, bumped by every plan);
//! 3. compute the plan's tick (interrupts on), then in the critical section arm the alarm
//!    with it — only if the plan is still the newest one.
//!
//! Whoever changes the next expiry afterwards (a `schedule_wake` for an earlier tick, an
//! alarm interrupt, a nested `on_alarm`) opens a newer plan and arms it itself: a plan
//! overtaken while its tick was being computed is dropped, never armed over a newer one. So
//! the newest plan is always armed by the context that opened it — on one core, the one that
//! interrupted the others, which finishes first.
//!
//! A reading taken before the critical section only makes the wake later, never early (time
//! does not go back): a timer it finds not due stays queued, the plan arms for it, and the
//! check after arming (the tick may already have passed) services the queue again.

use core::cell::{Cell, RefCell};
#[cfg(target_has_atomic = "64")]
use core::sync::atomic::{AtomicU64, Ordering};
use core::task::Waker;

use baretime::{Alarm, Clock, Counter, Width};
use critical_section::{CriticalSection, Mutex};
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
    /// Whether `deferred` may hold a registration: the services' two looks at it cost a
    /// load while it is empty, as it nearly always is.
    kept: Mutex<Cell<bool>>,
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

/// What the critical section guards: the timers, the alarm once there is one, and the plan.
struct State<A> {
    queue: Queue,
    alarm: Option<A>,
    /// The earliest expiry in the queue (embassy ticks; `u64::MAX`: none), never later than
    /// the queue's own: set by each walk of the queue, lowered by each earlier registration.
    next: u64,
    /// The newest plan's number: only that plan may arm the alarm.
    plan: u32,
}

impl<A> State<A> {
    const fn new(alarm: Option<A>) -> Self {
        State {
            queue: Queue::new(),
            alarm,
            next: u64::MAX,
            plan: 0,
        }
    }

    /// Opens a plan for the next expiry, overtaking every plan still being computed.
    fn open_plan(&mut self) -> Plan {
        self.plan = self.plan.wrapping_add(1);
        Plan {
            next: self.next,
            id: self.plan,
        }
    }

    /// Lowers the next expiry to `at`; whether it moved.
    fn lower_next(&mut self, at: u64) -> bool {
        let lower = at < self.next;
        if lower {
            self.next = at;
        }
        lower
    }
}

/// An arming to compute outside the critical section: the expiry it is for, and its number.
#[derive(Clone, Copy)]
struct Plan {
    next: u64,
    id: u32,
}

/// What the critical section decided about a computed arming.
enum Arming {
    /// Armed (or disarmed): check whether its tick already passed.
    Done,
    /// Overtaken by a newer plan, or called back from inside the driver: its owner arms.
    Dropped,
    /// A registration kept while arming lowered the next expiry: compute again.
    Again(Plan),
}

impl<C: Counter + 'static, A: Alarm> ClockDriver<C, A> {
    /// A driver that reads `clock` and wakes through `alarm`. `const`, for the `static` that
    /// [`embassy_time_driver::time_driver_impl!`] declares.
    pub const fn new(clock: &'static Clock<C>, alarm: A) -> Self {
        ClockDriver {
            clock,
            state: Mutex::new(RefCell::new(State::new(Some(alarm)))),
            deferred: Mutex::new(RefCell::new([const { None }; DEFERRED])),
            kept: Mutex::new(Cell::new(false)),
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
            state: Mutex::new(RefCell::new(State::new(None))),
            deferred: Mutex::new(RefCell::new([const { None }; DEFERRED])),
            kept: Mutex::new(Cell::new(false)),
            #[cfg(target_has_atomic = "64")]
            latest: AtomicU64::new(0),
        }
    }

    /// Sets (or replaces) the alarm and arms it for the timers already scheduled. The
    /// alarm it replaces is disarmed first. Called from inside the driver (from an
    /// [`Alarm`]'s `arm` or a waker), it does nothing: set the alarm from outside them.
    pub fn set_alarm(&self, alarm: A) {
        let set = critical_section::with(|cs| {
            // Busy only when called from inside the driver (an `Alarm` or a waker calling
            // back): the alarm is then dropped, as if set and replaced at once.
            let Ok(mut state) = self.state.borrow(cs).try_borrow_mut() else {
                return false;
            };
            if let Some(old) = state.alarm.replace(alarm) {
                old.disarm();
            }
            // A plan being computed was for the old alarm: the service below arms the new.
            let _ = state.open_plan();
            true
        });
        if set {
            self.service();
        }
    }

    /// The alarm's interrupt handler's part: wakes every timer whose tick the clock has
    /// reached, and arms the alarm for the next one (or disarms it). An alarm that fired
    /// early wakes nobody and is re-armed. Call it once after [`Clock::start`] too, for timers
    /// scheduled before the start, and after your own writes to the clock (see the crate
    /// docs). Safe to call at any time, from any context, any number of times: interrupts
    /// are off only while it walks the queue and while it arms the alarm, never while it
    /// reads the clock or computes the alarm's tick.
    pub fn on_alarm(&self) {
        self.service();
    }

    /// The clock this driver reads.
    pub fn clock(&self) -> &'static Clock<C> {
        self.clock
    }

    /// Wakes what is due and arms the alarm for the rest, until the armed tick is ahead of
    /// the clock (or a newer plan took over).
    fn service(&self) {
        self.service_after(None);
    }

    /// [`ClockDriver::service`]; with `armed`, only while that plan is still the newest (it was
    /// armed, and its tick found passed): a newer plan's owner has walked the queue since, or
    /// armed a tick no later than this one's and walks when the alarm fires.
    fn service_after(&self, mut armed: Option<u32>) {
        loop {
            let now = ticks_floor(self.clock.now().as_nanos());
            let plan = critical_section::with(|cs| {
                // Busy only when called from inside the driver (an `Alarm` or a waker calling
                // back): the service running below re-reads the clock after arming.
                let mut state = self.state.borrow(cs).try_borrow_mut().ok()?;
                // No alarm yet: `set_alarm` services the queue.
                state.alarm.as_ref()?;
                if armed.is_some_and(|id| id != state.plan) {
                    return None;
                }
                // Nothing is due before the next expiry (never later than the queue's own):
                // an early alarm, or a re-plan after a write, needs no walk of the queue —
                // which is what costs here (embassy's queue looks at every timer).
                if now >= state.next {
                    state.next = state.queue.next_expiration(now);
                }
                self.drain(cs, &mut state);
                Some(state.open_plan())
            });
            let Some(plan) = plan else {
                return;
            };
            let mut plan = plan;
            if self.arm(&mut plan) {
                return;
            }
            armed = Some(plan.id);
        }
    }

    /// Computes `plan`'s tick with interrupts on and arms it if no newer plan overtook it.
    /// `false` when the armed tick had already passed: the queue needs servicing again, unless
    /// a newer plan (the one `plan` ends as) took over meanwhile.
    fn arm(&self, plan: &mut Plan) -> bool {
        loop {
            let at = instant_ceil(plan.next);
            // `u64::MAX` is embassy's "never"; a tick past the clock's last nanosecond
            // (584 years: `instant_ceil` saturates there) is never reached either: nothing to
            // arm for. Before the start there is nothing to arm against: `on_alarm` after the
            // start arms.
            let ticks = if plan.next == u64::MAX || at.as_nanos() == u64::MAX {
                None
            } else {
                self.clock.deadline(at).ok().map(|d| d.ticks())
            };
            // Reached already (a sleep shorter than the computation, or one interrupted): no
            // arming, which would only raise the interrupt at once; the queue is walked again.
            if ticks.is_some_and(|t| self.reached(t)) {
                return false;
            }
            let armed = critical_section::with(|cs| {
                let Ok(mut state) = self.state.borrow(cs).try_borrow_mut() else {
                    return Arming::Dropped;
                };
                if state.plan != plan.id {
                    return Arming::Dropped;
                }
                let Some(alarm) = state.alarm.as_ref() else {
                    return Arming::Dropped;
                };
                match ticks {
                    Some(ticks) => alarm.arm(ticks),
                    None => alarm.disarm(),
                }
                // An `Alarm` that registered a timer from `arm` (kept aside meanwhile).
                if self.drain(cs, &mut state) {
                    return Arming::Again(state.open_plan());
                }
                Arming::Done
            });
            match armed {
                Arming::Dropped => return true,
                Arming::Again(newer) => *plan = newer,
                // The tick may have passed while it was armed: then the queue is serviced
                // again rather than left to an alarm that fires only on equality. Otherwise
                // the armed tick stands until the alarm or a write (after which `on_alarm`
                // computes it afresh): an early alarm finds nothing due and re-arms at a tick
                // computed on the timeline then in force. One `deadline` per arming, no
                // `check`, and counter reads (not `now()`) to see whether the tick passed.
                Arming::Done => return !ticks.is_some_and(|t| self.reached(t)),
            }
        }
    }

    /// Whether the counter has reached `tick` (the Alarm contract's rule: less than half a
    /// wrap past it). One counter read: what the alarm itself would compare.
    fn reached(&self, tick: u64) -> bool {
        let counter = self.clock.counter();
        let width = Width::of(counter);
        width.delta(tick, width.value(counter.ticks())) < width.half()
    }

    /// Keeps a registration made while the queue is being serviced. With no room left (more
    /// than `DEFERRED` at once), the task is woken to register again: a spurious wake, not an
    /// early one — embassy's `Timer` checks the time when polled.
    fn defer(&self, cs: CriticalSection<'_>, at: u64, waker: &Waker) {
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
                self.kept.borrow(cs).set(true);
                Some(())
            });
        if slot.is_none() {
            waker.wake_by_ref();
        }
    }

    /// Queues the registrations kept by `defer`; whether the next expiry moved earlier.
    fn drain(&self, cs: CriticalSection<'_>, state: &mut State<A>) -> bool {
        let mut lowered = false;
        if !self.kept.borrow(cs).replace(false) {
            return lowered;
        }
        loop {
            let Ok(mut slots) = self.deferred.borrow(cs).try_borrow_mut() else {
                // Never here (no borrow outlives `defer`): kept for the next look.
                self.kept.borrow(cs).set(true);
                return lowered;
            };
            let next = slots.iter_mut().find_map(Option::take);
            drop(slots);
            let Some((at, waker)) = next else {
                return lowered;
            };
            if state.queue.schedule_wake(at, &waker) {
                lowered |= state.lower_next(at);
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
        let plan = critical_section::with(|cs| {
            let Ok(mut state) = self.state.borrow(cs).try_borrow_mut() else {
                // Called back from inside the driver (a waker that polls its task at once):
                // kept for when the service running below ends, never woken early.
                self.defer(cs, at, waker);
                return None;
            };
            // A timer at or after the next expiry needs no new arming: the alarm planned for
            // that expiry comes first, and its service finds this one. No walk of the queue
            // here, and no clock read: only an earlier timer opens a plan.
            let mut lowered = state.queue.schedule_wake(at, waker) && state.lower_next(at);
            lowered |= self.drain(cs, &mut state);
            (lowered && state.alarm.is_some()).then(|| state.open_plan())
        });
        if let Some(mut plan) = plan {
            if !self.arm(&mut plan) {
                self.service_after(Some(plan.id));
            }
        }
    }
}
