//! [`State`]: what a monotonic that [`monotonic!`](crate::monotonic) declares keeps in its
//! `static` — the alarm and whether its interrupt was asked for — and the work behind each
//! function of its `rtic_time::timer_queue::TimerQueueBackend`.
//!
//! # Who calls what
//!
//! rtic-time's `TimerQueue` calls the backend from two places:
//!
//! - a task's `Delay` (at the task's priority): `now()` when polled, and `pend_interrupt()`
//!   when its instant became the queue's earliest;
//! - `on_monotonic_interrupt` (the alarm's interrupt, through `Mono::on_interrupt`):
//!   `on_interrupt()` first, then `now()` for each waiter it pops (inside its own critical
//!   section), then `set_compare(earliest)` — or `disable_timer()` when the queue is empty.
//!
//! # No Clock arithmetic with interrupts off
//!
//! `set_compare` computes the tick to arm ([`Clock::deadline`]: a timeline snapshot, a search
//! in `u128`, three counter reads) *before* it takes the critical section; inside it only arms
//! the alarm (a few register writes) and reads one flag. `pend` reads the counter before its
//! critical section too. What rtic-time itself does with interrupts off is its own: it reads
//! `now()` (one [`Clock::now`], and at the default rate no conversion) for each waiter it
//! pops.
//!
//! # A pend is never lost
//!
//! There is one alarm, and two kinds of arming race for it: `set_compare`'s (in the alarm's
//! interrupt) and `pend`'s (in a task, possibly of higher priority, that arms the alarm at the
//! counter's current value so that its interrupt comes at once). A pend that lands between the
//! interrupt's start and its own arming would be undone by that arming — and the new earliest
//! waiter left to the later tick. So `pend` raises a flag, inside the same critical section as
//! its arming; the interrupt lowers it when it starts ([`State::on_interrupt`]); and
//! `set_compare` and `disarm`, after arming in their critical section, pend again if the flag
//! is up. Either the task's pend came before the interrupt started (its waiter is in the queue
//! the interrupt reads), or it came after and the interrupt runs once more: a spurious
//! interrupt at worst, never a lost one.

use core::cell::RefCell;
use core::sync::atomic::{AtomicBool, Ordering::SeqCst};

use baretime::{Alarm, Clock, Counter};
use critical_section::Mutex;

use crate::ticks::{instant_ceil, ticks_floor};

/// A monotonic's state, with `HZ` ticks a second (see `backend.rs` for the protocol). The `static`
/// that [`monotonic!`](crate::monotonic) declares; not for direct use.
pub struct State<A, const HZ: u32> {
    /// The alarm, once `Mono::start` has given it.
    alarm: Mutex<RefCell<Option<A>>>,
    /// A task pended the alarm's interrupt since the interrupt last started.
    pended: AtomicBool,
}

impl<A: Alarm, const HZ: u32> State<A, HZ> {
    /// A monotonic with no alarm yet. `const`, for the `static`.
    #[allow(clippy::new_without_default)]
    pub const fn new() -> Self {
        State {
            alarm: Mutex::new(RefCell::new(None)),
            pended: AtomicBool::new(false),
        }
    }

    /// `Mono::start`: sets (or replaces, disarming the old one) the alarm, then pends its
    /// interrupt, which arms it for whatever is queued.
    pub fn start<C: Counter>(&self, clock: &Clock<C>, alarm: A) {
        critical_section::with(|cs| {
            // Busy only when called from inside an `Alarm` method: the alarm is then dropped,
            // as if set and replaced at once.
            if let Ok(mut slot) = self.alarm.borrow(cs).try_borrow_mut() {
                if let Some(old) = slot.replace(alarm) {
                    old.disarm();
                }
            }
        });
        self.pend(clock);
    }

    /// The backend's `now()`: the clock's time in ticks, rounded down (never ahead of it).
    #[inline]
    pub fn now<C: Counter>(clock: &Clock<C>) -> u64 {
        ticks_floor::<HZ>(clock.now().as_nanos())
    }

    /// The backend's `set_compare(instant)`: arms the alarm at the first counter tick at
    /// which the clock reads the tick's instant (rounded up), or as far as the clock can
    /// plan ([`Clock::deadline`]); before [`Clock::start`], disarms it (`Mono::rearm` after the
    /// start arms it). The queue checks the time again after this returns, and at the
    /// interrupt: an early alarm wakes no one and comes back here.
    pub fn set_compare<C: Counter>(&self, clock: &Clock<C>, instant: u64) {
        // Outside the critical section: the clock's arithmetic never runs with interrupts off.
        let tick = clock
            .deadline(instant_ceil::<HZ>(instant))
            .ok()
            .map(|deadline| deadline.ticks());
        self.with_alarm(clock, |alarm| match tick {
            Some(tick) => alarm.arm(tick),
            None => alarm.disarm(),
        });
    }

    /// The backend's `disable_timer()` (the queue is empty): disarms the alarm, so that a
    /// level-triggered compare (aarch64's, say) does not keep interrupting.
    pub fn disarm<C: Counter>(&self, clock: &Clock<C>) {
        self.with_alarm(clock, |alarm| alarm.disarm());
    }

    /// The backend's `pend_interrupt()`, and `Mono::rearm`: arms the alarm at the counter's
    /// value now — already reached, so it fires at once ([`Alarm`]'s contract) — and notes
    /// it for an interrupt already running.
    pub fn pend<C: Counter>(&self, clock: &Clock<C>) {
        let now = clock.counter().ticks();
        critical_section::with(|cs| {
            self.pended.store(true, SeqCst);
            if let Ok(alarm) = self.alarm.borrow(cs).try_borrow() {
                if let Some(alarm) = alarm.as_ref() {
                    alarm.arm(now);
                }
            }
        });
    }

    /// The backend's `on_interrupt()`, run as the alarm's interrupt starts, before it reads
    /// the queue: a pend from before now is served by this run.
    #[inline]
    pub fn on_interrupt(&self) {
        self.pended.store(false, SeqCst);
    }

    /// Runs `f` on the alarm in a critical section, then pends again if a task pended since
    /// the interrupt started (`f` may have undone that arming).
    fn with_alarm<C: Counter>(&self, clock: &Clock<C>, f: impl FnOnce(&A)) {
        critical_section::with(|cs| {
            // Busy only when called from inside an `Alarm` method.
            let Ok(alarm) = self.alarm.borrow(cs).try_borrow() else {
                return;
            };
            let Some(alarm) = alarm.as_ref() else {
                return; // not started: `Mono::start` pends once it has the alarm
            };
            f(alarm);
            if self.pended.load(SeqCst) {
                alarm.arm(clock.counter().ticks());
            }
        });
    }
}
