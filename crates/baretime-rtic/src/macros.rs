//! [`monotonic!`](crate::monotonic): declares a monotonic type, its `static` state and its
//! timer queue, the way rtic-monotonics' `systick_monotonic!` does.

/// Declares `pub struct $name`, an RTIC monotonic on a `&'static` [`baretime::Clock`] and an
/// [`baretime::Alarm`]: see the [crate docs](crate).
///
/// ```text
/// monotonic!(Mono, &CLOCK, MyAlarm);            // ticks of 1 ns
/// monotonic!(Mono, &CLOCK, MyAlarm, 1_000_000); // ticks of 1 µs (any rate from 1 Hz)
/// ```
///
/// - `$name`: the type to declare. It implements rtic-time's `TimerQueueBasedMonotonic` (so
///   `rtic_time::Monotonic`: `now`, `delay`, `delay_until`, `timeout_at`, `timeout_after`) with
///   `fugit::Instant<u64, 1, TICK_HZ>` and `fugit::Duration<u64, 1, TICK_HZ>`, and
///   embedded-hal 1's `DelayNs`, blocking and async.
/// - `$clock`: an expression of type `&'static Clock<C>` (a `static`'s address), read at each
///   call.
/// - `$alarm`: the alarm's type (`Alarm + Send`), given to `$name::start` at run time.
/// - `TICK_HZ` (optional, default 10⁹): ticks a second, `u32`. The default makes a tick a
///   nanosecond: `now()` is [`Clock::now`](baretime::Clock::now) with no conversion.
///
/// It adds three functions:
///
/// - `$name::start(alarm)`: gives the monotonic its alarm and initializes the timer queue.
///   Call it once the clock has started, before any task waits (rtic-time panics on a wait
///   before it): in RTIC's `init`.
/// - `$name::on_interrupt()`: the alarm's interrupt handler's part. Acknowledge the
///   interrupt, then call it; call it from nowhere else.
/// - `$name::rearm()`: makes the alarm's interrupt come at once, so that the armed wake is
///   planned again — after your own `Clock::recalibrate` or `Clock::rebase` (the armed tick
///   may now be late), and after `Clock::start` if `start` came first.
#[macro_export]
macro_rules! monotonic {
    ($name:ident, $clock:expr, $alarm:ty $(,)?) => {
        $crate::monotonic!($name, $clock, $alarm, 1_000_000_000);
    };
    ($name:ident, $clock:expr, $alarm:ty, $tick_hz:expr $(,)?) => {
        /// An RTIC monotonic on a baretime `Clock` and an `Alarm`, declared by
        /// `baretime_rtic::monotonic!`: `now()`, `delay()`, `delay_until()`, `timeout_at()`,
        /// `timeout_after()` through `rtic_time::Monotonic`.
        pub struct $name;

        const _: () = {
            use $crate::__private::rtic_time::timer_queue::{TimerQueue, TimerQueueBackend};
            use $crate::__private::{fugit, rtic_time, State};

            /// Ticks a second.
            const HZ: u32 = $tick_hz;
            const _: () = ::core::assert!(HZ > 0, "a monotonic's tick rate is at least 1 Hz");

            /// The timer-queue backend of the monotonic.
            pub struct ClockBackend;

            static STATE: State<$alarm, HZ> = State::new();
            static QUEUE: TimerQueue<ClockBackend> = TimerQueue::new();

            impl TimerQueueBackend for ClockBackend {
                type Ticks = u64;

                #[inline]
                fn now() -> u64 {
                    State::<$alarm, HZ>::now($clock)
                }

                fn set_compare(instant: u64) {
                    STATE.set_compare($clock, instant)
                }

                /// The user's handler acknowledges the interrupt before `on_interrupt`.
                fn clear_compare_flag() {}

                fn pend_interrupt() {
                    STATE.pend($clock)
                }

                fn on_interrupt() {
                    STATE.on_interrupt()
                }

                fn disable_timer() {
                    STATE.disarm($clock)
                }

                fn timer_queue() -> &'static TimerQueue<ClockBackend> {
                    &QUEUE
                }
            }

            impl rtic_time::monotonic::TimerQueueBasedMonotonic for $name {
                type Backend = ClockBackend;
                type Instant = fugit::Instant<u64, 1, HZ>;
                type Duration = fugit::Duration<u64, 1, HZ>;
            }

            impl $name {
                /// Gives the monotonic its alarm (replacing and disarming an earlier one) and
                /// initializes its timer queue; then its interrupt comes once, to arm for
                /// what is queued. Call it after the clock's `start`, before any task waits.
                pub fn start(alarm: $alarm) {
                    QUEUE.initialize(ClockBackend);
                    STATE.start($clock, alarm);
                }

                /// The alarm's interrupt handler's part: wakes every task whose instant the
                /// clock has reached and arms the alarm for the next (an early alarm wakes
                /// no one and re-arms). Acknowledge the interrupt first; call this from the
                /// alarm's interrupt only.
                pub fn on_interrupt() {
                    // SAFETY: rtic-time documents `on_monotonic_interrupt` as always safe to
                    // call (its queue takes a critical section for each change); "only from
                    // the monotonic's interrupt" is for correct operation, which this
                    // function's docs ask of its caller.
                    unsafe { QUEUE.on_monotonic_interrupt() }
                }

                /// Makes the alarm's interrupt come at once, which plans the armed wake
                /// again: after the clock's `recalibrate` or `rebase` (the armed tick was
                /// computed on the old timeline), or after its `start` if this monotonic's
                /// came first. Callable from anywhere.
                pub fn rearm() {
                    STATE.pend($clock)
                }
            }
        };

        $crate::__private::rtic_time::impl_embedded_hal_delay_fugit!($name);
        $crate::__private::rtic_time::impl_embedded_hal_async_delay_fugit!($name);
    };
}
