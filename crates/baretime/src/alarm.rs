//! [`Alarm`]: a compare timer that interrupts when a [`Counter`](crate::Counter) reaches a
//! value — the hardware half of a [`Deadline`](crate::Deadline), as [`Counter`](crate::Counter)
//! is the hardware half of a [`Clock`](crate::Clock).

/// A compare timer that raises an interrupt when the clock's counter reaches a value: what a
/// [`Deadline::ticks`](crate::Deadline::ticks) is armed on.
///
/// The crate's platform crates implement it for the CPU's own timers (baretime-x86's local
/// APIC timer, baretime-aarch64's EL1 virtual timer); implement it yourself for any other
/// compare-capable timer (a Cortex-M timer, SysTick, an RTC's compare channel), as you
/// implement [`Counter`](crate::Counter) for a counter. The interrupt itself — its vector, its
/// controller, its handler — stays yours: the handler runs [`Clock::check`](crate::Clock::check)
/// (or the embassy driver's `on_alarm`), which decides whether the deadline is reached.
///
/// # The contract
///
/// - **Not late.** After [`Alarm::arm`]`(t)`, the interrupt is raised no later than when the
///   counter first reads `t` or later (in the counter's width: a value less than half a wrap
///   past `t` counts as past it), plus the hardware's own latency and resolution (a one-shot
///   down-counter's period, the error of the rate it was converted at). This includes a `t` the
///   counter has *already* passed when `arm` is called: the alarm fires at once (or as soon as
///   interrupts allow). A timer that fires only when its count *equals* the compare value
///   must check this itself after arming, and raise the interrupt (or pend it) by hand.
/// - **Early is allowed.** The alarm may fire before `t` (a one-shot timer whose count is
///   rounded, a compare value clamped to what the hardware holds). A wake is never taken on
///   the alarm's word: [`Clock::check`](crate::Clock::check) reads the clock and says
///   [`Wake::Rearm`](crate::Wake::Rearm) when it is early. An alarm that fires early often
///   only costs interrupts.
/// - **One arming at a time.** Each `arm` replaces the previous one; [`Alarm::disarm`] cancels
///   it. No interrupt from an arming is raised after `disarm` or after a later `arm` returns
///   (an interrupt already pending may still be delivered once: the handler's check makes it
///   harmless).
/// - **Callable from the interrupt.** `arm` and `disarm` take `&self` and must be safe to call
///   from the alarm's own interrupt handler and from thread mode; they must not wait for
///   anything an interrupt could hold (the embassy driver calls them inside a critical
///   section).
pub trait Alarm {
    /// Arms the alarm for counter value `ticks` (within the counter's width), replacing any
    /// earlier arming: see the contract above.
    fn arm(&self, ticks: u64);

    /// Cancels the arming, if any: no further interrupt from it.
    fn disarm(&self);
}

impl<A: Alarm + ?Sized> Alarm for &A {
    #[inline]
    fn arm(&self, ticks: u64) {
        (**self).arm(ticks)
    }
    #[inline]
    fn disarm(&self) {
        (**self).disarm()
    }
}
