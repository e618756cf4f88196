//! [`ExtendedTimer`]: a narrow hardware timer whose only interrupt is its own wrap (SysTick, a
//! 16-bit timer), extended in software to a count that wraps only after 2^31 of its wraps.
//!
//! The protocol, the cadence rule and who may read: see [`ExtendedTimer`].

use core::sync::atomic::{compiler_fence, AtomicU32, Ordering};

use crate::Counter;

/// A narrow hardware timer that counts up and wraps from `2^bits − 1` to 0, and raises a
/// flag when it wraps: the hardware access an [`ExtendedTimer`] needs.
///
/// A down-counting timer (SysTick, a CMSDK timer) with a reload of `2^bits − 1` reports
/// `(2^bits − value) mod 2^bits` — `value.wrapping_neg() & mask` — not `reload − value`.
/// Such a timer raises its wrap flag when the value goes from 1 to 0 and reloads a tick
/// later, so its count must wrap to 0 on the tick the value reaches 0. `reload − value` wraps
/// a tick late (a reader in that tick sees the flag with the count not yet wrapped: a whole
/// wrap ahead); worse, SysTick reads 0 after `clear_current()` until its first reload, which
/// `reload − value` makes the last count of a wrap, followed by 0 with no wrap flag: a clock
/// started then reads its next reading a whole wrap back (on a 32-bit target, it jumps
/// `Clock::update_interval` ahead). With `value.wrapping_neg() & mask`, 0 reads as 0 and the
/// reload as 1: the clock may start at any time after the timer is enabled.
pub trait NarrowTimer {
    /// The current count, below `2^bits`, counting up.
    fn count(&self) -> u32;

    /// The timer's width in bits, 1..=32 (clamped): it wraps every `2^bits` ticks.
    fn bits(&self) -> u32;

    /// Whether the timer has wrapped since the flag was last cleared: the interrupt's
    /// pending flag (SysTick: `ICSR.PENDSTSET`) or the peripheral's wrap status. Reading it
    /// must not clear it (SysTick's `COUNTFLAG` does: not that one).
    fn wrap_pending(&self) -> bool;

    /// Clears the wrap flag; [`ExtendedTimer::on_wrap`] calls it between its two stores.
    /// Empty for a flag the hardware clears on interrupt entry (SysTick's pending bit; see
    /// [`ExtendedTimer`] for who may read such a timer).
    fn clear_wrap(&self);
}

impl<T: NarrowTimer + ?Sized> NarrowTimer for &T {
    #[inline(always)]
    fn count(&self) -> u32 {
        (**self).count()
    }
    #[inline(always)]
    fn bits(&self) -> u32 {
        (**self).bits()
    }
    #[inline(always)]
    fn wrap_pending(&self) -> bool {
        (**self).wrap_pending()
    }
    #[inline(always)]
    fn clear_wrap(&self) {
        (**self).clear_wrap()
    }
}

/// A [`NarrowTimer`] extended with a wrap count kept by its wrap interrupt: a [`Counter`] of
/// the timer's width plus 31 bits.
///
/// # Why
///
/// A [`crate::Clock`] on a counter of `bits` bits needs [`crate::Clock::update`] at least once
/// per half wrap ([`crate::Clock::update_interval`]). A timer whose one interrupt is
/// its own wrap fires once per *whole* wrap: the obvious design — the 24-bit SysTick count as
/// the counter, `update()` from SysTick's interrupt — misses every deadline, every update is
/// [`crate::ClockError::Late`] and the clock runs at about half speed. Count the wraps in that
/// interrupt instead and give the clock the wide count.
///
/// # The protocol
///
/// The wrap interrupt is the only writer of one `AtomicU32`, the *state*, and uses plain
/// loads and stores (no compare-and-swap: thumbv6m has none). The state is twice the
/// number of wraps counted, plus one while the interrupt is between counting a wrap and
/// clearing the timer's wrap flag. [`ExtendedTimer::on_wrap`] stores `state + 1` (the wrap
/// is counted; the flag is stale), clears the flag ([`NarrowTimer::clear_wrap`]), and stores
/// `state + 2`.
///
/// A reader loads the state, reads the count, reads the flag, reads the count again only if
/// the flag is set, and loads the state again; it starts over if the state changed (the
/// wrap interrupt ran in between), so it never waits for anyone. With `w` wraps counted:
///
/// - state odd: the interrupt has counted the wrap and not finished: `w + 1` wraps, the first
///   count, and the flag is ignored (it is the wrap just counted);
/// - state even, flag clear: every wrap before the flag read is counted, and the first count
///   was read before the flag: `w` wraps and the first count;
/// - state even, flag set: one wrap happened that is not counted yet; the second count was
///   read after the flag, so after that wrap: `w + 1` wraps and the second count.
///
/// Each case is exact: no "count in the low half" guess, so a reader stalled for any time
/// between its reads (by handlers above it) still returns a count it read, or starts over.
///
/// # Rules
///
/// - **Cadence**: the wrap interrupt must have finished `on_wrap` for a wrap before the timer
///   wraps again (one whole period; with interrupts masked or handlers above it running, the
///   time they take counts). A missed wrap is lost for good: the count is a wrap behind from
///   then on.
/// - **Who reads**: any context, any priority, thread mode or interrupt, when the wrap flag
///   is one the interrupt clears itself (a peripheral's status flag: a CMSDK timer's
///   `INTSTATUS`, an nRF timer's `EVENTS_COMPARE` / `EVENTS_OVRFLW`, an STM32 timer's `UIF`),
///   called from [`NarrowTimer::clear_wrap`]. When the hardware clears the flag itself on
///   interrupt entry — SysTick's `ICSR.PENDSTSET`, or any NVIC pending bit — there is a gap
///   between the entry and the interrupt's first store in which nothing says a wrap
///   happened: a reader at a **higher** priority than the wrap interrupt that runs in that
///   gap reads a whole wrap back. Read such a timer at the wrap interrupt's priority or
///   below (thread mode, equal or lower handlers): give the wrap interrupt — a few
///   instructions — the highest priority of all handlers that read the time. The same gap
///   opens if the interrupt clears a software-cleared flag *before* calling `on_wrap`: let
///   `on_wrap` clear it.
/// - One wrap interrupt, one core counting: `on_wrap` is not re-entrant and must not be
///   called from two contexts.
///
/// # The Clock on top
///
/// [`ExtendedTimer`] is a [`Counter`] of `bits + 31` bits (capped at 64). A clock on it needs
/// [`crate::Clock::update`] at least once per [`crate::Clock::update_interval`], and what
/// that is depends on the target:
///
/// - **With 64-bit atomics** the clock reads the whole count: a 24-bit SysTick at 25 MHz
///   extended to 55 bits needs an update every 22 years.
/// - **Without** (Cortex-M, 32-bit RISC-V) the clock reads the low 32 bits of the count, and
///   needs an update once per 2^31 ticks less a margin: 85.9 s at 25 MHz. `update()` from the
///   wrap interrupt, right after `on_wrap`, keeps that for any timer **narrower than 32
///   bits**: a 24-bit SysTick at 25 MHz wraps every 0.67 s (128 wraps per interval), a 16-bit
///   timer at 1 MHz every 65.5 ms; every n-th wrap does as long as n wraps fit in the interval.
/// - **A 32-bit timer** wraps every 2^32 ticks — twice the interval on such a target (171 s
///   at 25 MHz): from its wrap interrupt every update would be late. There the extension buys
///   nothing (the clock reads 32 bits of it): make the 32-bit timer itself the clock's
///   [`Counter`] and call `update()` from a periodic interrupt at least once per
///   [`crate::Clock::update_interval`] — a compare channel at every half wrap, or the tick
///   you already have. With 64-bit atomics a 32-bit timer extends as any other.
///
/// # Example
///
/// ```
/// use baretime::{Clock, Counter, ExtendedTimer, Frequency, Instant, NarrowTimer};
/// use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};
///
/// /// Stands in for SysTick at 25 MHz with a reload of 2^24 − 1: VAL counts down, is 0 after
/// /// `clear_current()` until its first reload, and ICSR.PENDSTSET is set when VAL goes from
/// /// 1 to 0 and cleared by the hardware on interrupt entry.
/// struct SysTick;
/// static VAL: AtomicU32 = AtomicU32::new(0);
/// static PENDSTSET: AtomicBool = AtomicBool::new(false);
/// impl NarrowTimer for SysTick {
///    fn count(&self) -> u32 {
///        // (2^24 − VAL) mod 2^24: counting up, 0 while VAL is 0 (not 0xff_ffff − VAL)
///        VAL.load(Ordering::Relaxed).wrapping_neg() & 0xff_ffff
///    }
///    fn bits(&self) -> u32 {
///        24
///    }
///    fn wrap_pending(&self) -> bool {
///        PENDSTSET.load(Ordering::Relaxed)
///    }
///    fn clear_wrap(&self) {} // the hardware cleared it on entry
/// }
///
/// static TIMER: ExtendedTimer<SysTick> = ExtendedTimer::new(SysTick);
/// static CLOCK: Clock<&ExtendedTimer<SysTick>> = Clock::uninit(&TIMER);
///
/// /// The SysTick handler: count the wrap first, then keep the clock's deadline.
/// fn systick_handler() {
///    TIMER.on_wrap();
///    let _ = CLOCK.update();
/// }
///
/// // Started before SysTick's first reload (VAL still 0), then the reload: one tick later.
/// CLOCK.start(Frequency::nominal_hz(25_000_000, 50_000).unwrap()).unwrap(); // 25 MHz ±50 ppm
/// VAL.store(0xff_ffff, Ordering::Relaxed);
/// assert_eq!(CLOCK.now(), Instant::from_nanos(40));
/// assert!(!CLOCK.health().counter_behind);
/// assert_eq!(TIMER.bits(), 55);
/// for _ in 0..3 {
///    VAL.store(0x10, Ordering::Relaxed); // near the end of the period
///    let before = CLOCK.now();
///    VAL.store(0xff_fff0, Ordering::Relaxed); // wrapped: 32 ticks later
///    PENDSTSET.store(true, Ordering::Relaxed);
///    assert_eq!(TIMER.ticks() & 0xff_ffff, 16); // a wrap pending, counted already
///    PENDSTSET.store(false, Ordering::Relaxed); // the interrupt is entered
///    systick_handler();
///    assert!(CLOCK.now() - before >= core::time::Duration::from_nanos(32 * 40));
/// }
/// assert_eq!(TIMER.wraps(), 3);
/// ```
#[derive(Debug)]
pub struct ExtendedTimer<T: NarrowTimer> {
    timer: T,
    /// Twice the wraps counted, plus one between counting a wrap and clearing its flag.
    state: AtomicU32,
}

impl<T: NarrowTimer> ExtendedTimer<T> {
    /// `timer` with no wrap counted yet: `const`, for a `static`. Start the timer and enable
    /// its wrap interrupt afterwards (or clear a stale wrap flag first).
    pub const fn new(timer: T) -> ExtendedTimer<T> {
        ExtendedTimer {
            timer,
            state: AtomicU32::new(0),
        }
    }

    /// The timer.
    pub fn timer(&self) -> &T {
        &self.timer
    }

    /// The wraps counted so far, modulo 2^31.
    pub fn wraps(&self) -> u32 {
        let state = self.state.load(Ordering::Acquire);
        (state >> 1).wrapping_add(state & 1) & WRAP_MASK
    }

    /// Counts one wrap and clears the timer's wrap flag: call it from the wrap interrupt,
    /// once per wrap, before the timer wraps again. Only that interrupt may call it.
    pub fn on_wrap(&self) {
        // The only writer: a load and two stores, no compare-and-swap.
        let state = self.state.load(Ordering::Relaxed) | 1;
        self.state.store(state, Ordering::Release); // odd: counted, flag stale
        compiler_fence(Ordering::SeqCst);
        self.timer.clear_wrap();
        compiler_fence(Ordering::SeqCst);
        self.state.store(state.wrapping_add(1), Ordering::Release); // even: settled
    }

    /// The timer's width, clamped to 1..=32.
    #[inline(always)]
    fn timer_bits(&self) -> u32 {
        self.timer.bits().clamp(1, 32)
    }
}

/// The wrap count's bits: the state holds two steps per wrap.
const WRAP_MASK: u32 = (1 << 31) - 1;

impl<T: NarrowTimer> Counter for ExtendedTimer<T> {
    /// The wraps counted (modulo 2^31) above the timer's count; see [`ExtendedTimer`] for
    /// why each case is exact. Starts over only when the wrap interrupt ran during the read.
    fn ticks(&self) -> u64 {
        let bits = self.timer_bits();
        let mask = u32::MAX >> 32u32.wrapping_sub(bits);
        loop {
            let before = self.state.load(Ordering::Acquire);
            compiler_fence(Ordering::SeqCst);
            let first = self.timer.count();
            let (carry, count) = if before & 1 == 1 {
                // The interrupt counted the wrap and has not cleared the flag: ignore it.
                (1, first)
            } else {
                compiler_fence(Ordering::SeqCst);
                if self.timer.wrap_pending() {
                    compiler_fence(Ordering::SeqCst);
                    (1, self.timer.count()) // read after the wrap the flag reports
                } else {
                    (0, first)
                }
            };
            compiler_fence(Ordering::SeqCst);
            if self.state.load(Ordering::Acquire) == before {
                let wraps = (before >> 1).wrapping_add(carry) & WRAP_MASK;
                return u64::from(wraps).wrapping_shl(bits) | u64::from(count & mask);
            }
        }
    }

    fn bits(&self) -> u32 {
        self.timer_bits().wrapping_add(31) // at most 63
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::cell::Cell;

    /// A timer moved by hand.
    struct Hand {
        count: Cell<u32>,
        flag: Cell<bool>,
        cleared: Cell<u32>,
    }

    impl NarrowTimer for Hand {
        fn count(&self) -> u32 {
            self.count.get()
        }
        fn bits(&self) -> u32 {
            8
        }
        fn wrap_pending(&self) -> bool {
            self.flag.get()
        }
        fn clear_wrap(&self) {
            self.flag.set(false);
            self.cleared.set(self.cleared.get() + 1);
        }
    }

    #[test]
    fn counts_wraps_and_pending_wraps() {
        let t = ExtendedTimer::new(Hand {
            count: Cell::new(250),
            flag: Cell::new(false),
            cleared: Cell::new(0),
        });
        assert_eq!(t.bits(), 39);
        assert_eq!(t.ticks(), 250);
        t.timer().count.set(3);
        t.timer().flag.set(true);
        assert_eq!(t.ticks(), 256 + 3); // pending: counted already
        t.on_wrap();
        assert_eq!(t.timer().cleared.get(), 1);
        assert!(!t.timer().flag.get());
        assert_eq!(t.ticks(), 256 + 3);
        assert_eq!(t.wraps(), 1);
        // The interrupt between its stores: the flag (stale) is ignored.
        t.timer().flag.set(true);
        t.state.store(3, Ordering::Relaxed);
        assert_eq!(t.wraps(), 2);
        assert_eq!(t.ticks(), 512 + 3);
    }

    #[test]
    fn widths_are_clamped() {
        struct W(u32);
        impl NarrowTimer for W {
            fn count(&self) -> u32 {
                u32::MAX
            }
            fn bits(&self) -> u32 {
                self.0
            }
            fn wrap_pending(&self) -> bool {
                false
            }
            fn clear_wrap(&self) {}
        }
        assert_eq!(ExtendedTimer::new(W(0)).bits(), 32);
        assert_eq!(ExtendedTimer::new(W(0)).ticks(), 1);
        assert_eq!(ExtendedTimer::new(W(40)).bits(), 63);
        assert_eq!(ExtendedTimer::new(W(32)).ticks(), u64::from(u32::MAX));
        let w = ExtendedTimer::new(W(32));
        w.state.store(u32::MAX - 1, Ordering::Relaxed); // 2^31 − 1 wraps
        assert_eq!(w.ticks(), u64::MAX >> 1);
    }
}
