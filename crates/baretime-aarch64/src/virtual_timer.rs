//! The EL1 virtual timer (CNTV_CVAL_EL0, CNTV_CTL_EL0) as a [`baretime::Alarm`].
//!
//! The register sequences are written once, over [`Regs`], so that a fake register file tests
//! their order on any host; on aarch64 [`VirtualTimer`] runs them on the real registers.

/// CNTV_CTL_EL0.ENABLE (bit 0): the timer compares.
const ENABLE: u64 = 1 << 0;
/// CNTV_CTL_EL0.IMASK (bit 1): the condition is not signalled as an interrupt.
const IMASK: u64 = 1 << 1;
/// CNTV_CTL_EL0.ISTATUS (bit 2, read-only): CNTVCT_EL0 ≥ CNTV_CVAL_EL0 (UNKNOWN while
/// disabled).
const ISTATUS: u64 = 1 << 2;

/// The virtual timer's registers: the real ones on aarch64, a recording fake in the tests.
pub(crate) trait Regs {
    fn read_ctl(&self) -> u64;
    fn write_ctl(&self, v: u64);
    fn write_cval(&self, v: u64);
    /// A context synchronization event: a system-register write before it has taken effect
    /// (the timer's output follows it) before anything after it.
    fn isb(&self);
}

/// Arms: CVAL, then CTL = ENABLE with IMASK clear, then ISB (Linux's `set_next_event`). The
/// ISB makes the new condition the timer's before `arm` returns, so that an interrupt left from
/// the previous compare value is deasserted by then (the contract: none raised after a later
/// `arm` returns, except one already pending at the interrupt controller).
pub(crate) fn arm<R: Regs + ?Sized>(r: &R, ticks: u64) {
    r.write_cval(ticks);
    r.write_ctl(ENABLE);
    r.isb();
}

/// Disarms: CTL = 0 (disabled, the output deasserted), then ISB.
pub(crate) fn disarm<R: Regs + ?Sized>(r: &R) {
    r.write_ctl(0);
    r.isb();
}

/// Masks: IMASK set, ENABLE kept (ISTATUS still says whether the compare value is reached).
pub(crate) fn mask<R: Regs + ?Sized>(r: &R) {
    let ctl = r.read_ctl();
    r.write_ctl((ctl | IMASK) & (ENABLE | IMASK));
    r.isb();
}

/// Whether the timer is enabled and its condition met (ISTATUS counts only while enabled).
pub(crate) fn is_pending<R: Regs + ?Sized>(r: &R) -> bool {
    r.read_ctl() & (ENABLE | ISTATUS) == ENABLE | ISTATUS
}

#[cfg(target_arch = "aarch64")]
pub use token::VirtualTimer;

#[cfg(target_arch = "aarch64")]
mod token {
    use aarch64_cpu::asm::barrier;
    use aarch64_cpu::registers::{Readable, Writeable, CNTV_CTL_EL0, CNTV_CVAL_EL0};

    use super::Regs;
    use baretime::Alarm;

    /// The EL1 virtual timer: a compare timer on the generic timer's virtual count
    /// (CNTVCT_EL0, what [`GenericTimer`](crate::GenericTimer) reads), as a
    /// [`baretime::Alarm`]. Holding one is the right to program this CPU's CNTV_CVAL_EL0 and
    /// CNTV_CTL_EL0; every call on it is safe.
    ///
    /// - [`Alarm::arm`]`(ticks)` writes CNTV_CVAL_EL0 = `ticks` (counter ticks of
    ///   CNTVCT_EL0: a [`Deadline::ticks`](baretime::Deadline::ticks) of a `Clock` on
    ///   [`GenericTimer`](crate::GenericTimer), as it is), then CNTV_CTL_EL0 = ENABLE with
    ///   IMASK clear, then ISB. The timer's condition is CNTVCT_EL0 ≥ CNTV_CVAL_EL0, so a tick
    ///   the counter has already passed fires at once, as [`Alarm`] requires. (The compare is
    ///   unsigned over 64 bits: a tick past a 64-bit wrap of the count, centuries away at any
    ///   rate the architecture allows, would not fire until the count reaches it.)
    /// - [`Alarm::disarm`] writes CNTV_CTL_EL0 = 0, then ISB.
    ///
    /// The interrupt is the caller's: the virtual timer raises PPI 27 ([`VirtualTimer::INTID`])
    /// on this CPU's interrupt controller, level-triggered: it stays asserted while the
    /// condition is met and unmasked. A handler therefore re-arms (a later tick deasserts it),
    /// disarms, or [`VirtualTimer::mask`]s before it ends the interrupt at the controller,
    /// else the interrupt is taken again at once. The embassy driver's `on_alarm` (and a
    /// handler that runs [`Clock::check`](baretime::Clock::check) and arms what it returns, or
    /// disarms) always does one of the first two.
    ///
    /// Each CPU has its own virtual timer: a call programs the timer of the CPU it runs on.
    /// The type is `Send` and `Sync` (a `static` driver holds it); use one from the CPU whose
    /// PPI 27 you handle.
    ///
    /// # A kernel's timer interrupt
    ///
    /// ```no_run
    /// # #[cfg(target_arch = "aarch64")] {
    /// use baretime::{Alarm, Clock, Deadline, Instant, Wake};
    /// use baretime_aarch64::{GenericTimer, VirtualTimer};
    /// use core::sync::atomic::{AtomicU64, Ordering};
    ///
    /// static CLOCK: Clock<GenericTimer> = Clock::uninit(GenericTimer::any_core());
    /// // SAFETY: this kernel runs at EL1 and nothing else programs the virtual timer.
    /// static TIMER: VirtualTimer = unsafe { VirtualTimer::new() };
    /// // The pending wake's instant in ns; 0: none.
    /// static WAKE_AT: AtomicU64 = AtomicU64::new(0);
    ///
    /// fn sleep_until(at: Instant) {
    ///     WAKE_AT.store(at.as_nanos(), Ordering::Relaxed);
    ///     let deadline: Deadline = CLOCK.deadline(at).unwrap();
    ///     TIMER.arm(deadline.ticks()); // PPI 27 enabled at the GIC by the kernel
    /// }
    ///
    /// // Called by the IRQ vector once the GIC's acknowledge register said INTID 27; the
    /// // vector writes the end of interrupt after it returns.
    /// fn on_virtual_timer_irq() {
    ///     let at = Instant::from_nanos(WAKE_AT.load(Ordering::Relaxed));
    ///     match CLOCK.deadline(at).map(|d| CLOCK.check(d)) {
    ///         Ok(Wake::Rearm(next)) => TIMER.arm(next.ticks()), // early: wait again
    ///         Ok(Wake::Fired) | Err(_) => {
    ///             TIMER.disarm(); // deasserts the level interrupt before the EOI
    ///             WAKE_AT.store(0, Ordering::Relaxed);
    ///             // ... wake whoever waited for `at`
    ///         }
    ///     }
    /// }
    /// # let _ = (sleep_until, on_virtual_timer_irq);
    /// # }
    /// ```
    ///
    /// An embassy executor gets `embassy_time::Timer` from the same two statics through
    /// baretime-embassy's `ClockDriver`, whose `on_alarm` the handler calls instead.
    #[derive(Debug, PartialEq, Eq)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct VirtualTimer {
        _private: (),
    }

    impl VirtualTimer {
        /// The interrupt ID of the EL1 virtual timer's PPI on a GIC (PPI 11, INTID 27; the
        /// devicetree's `arm,armv8-timer` node lists it third). Under FEAT_VHE at EL2 with
        /// HCR_EL2.E2H = 1 the same registers program the EL2 virtual timer, INTID 28.
        pub const INTID: u32 = 27;

        /// The virtual timer of the CPU that uses it. A `const fn`, for a `static` alarm or
        /// driver.
        ///
        /// There is nothing to probe: the generic timer is architectural, every AArch64 core
        /// has the virtual timer. What decides whether its registers can be written is the
        /// exception level, and CurrentEL itself cannot be read at EL0; so the caller's
        /// knowledge of where it runs is the contract.
        ///
        /// # Safety
        ///
        /// - Every CPU that calls a method runs at EL1 or higher (or at EL0 with
        ///   CNTKCTL_EL1.EL0VTEN set, and under FEAT_VHE with what CNTHCTL_EL2 requires);
        ///   otherwise the register accesses trap.
        /// - The virtual timer is this token's alone: nothing else on those CPUs programs
        ///   CNTV_CVAL_EL0, CNTV_TVAL_EL0 or CNTV_CTL_EL0 (an OS's own clockevent driver, at
        ///   EL1 under Linux, does), or an arming here replaces theirs.
        pub const unsafe fn new() -> VirtualTimer {
            VirtualTimer { _private: () }
        }

        /// Sets IMASK, keeping ENABLE and the compare value: the condition is no longer
        /// signalled (the level interrupt deasserts) while [`VirtualTimer::is_pending`] still
        /// reports it. The next [`Alarm::arm`] unmasks.
        pub fn mask(&self) {
            super::mask(self)
        }

        /// Whether the timer is enabled and the count has reached the compare value
        /// (CNTV_CTL_EL0.ENABLE and ISTATUS; ISTATUS ignores IMASK): the interrupt is raised
        /// unless masked.
        pub fn is_pending(&self) -> bool {
            super::is_pending(self)
        }
    }

    impl Regs for VirtualTimer {
        #[inline(always)]
        fn read_ctl(&self) -> u64 {
            CNTV_CTL_EL0.get()
        }
        #[inline(always)]
        fn write_ctl(&self, v: u64) {
            CNTV_CTL_EL0.set(v)
        }
        #[inline(always)]
        fn write_cval(&self, v: u64) {
            CNTV_CVAL_EL0.set(v)
        }
        #[inline(always)]
        fn isb(&self) {
            barrier::isb(barrier::SY)
        }
    }

    impl Alarm for VirtualTimer {
        /// CNTV_CVAL_EL0 = `ticks`, CNTV_CTL_EL0 = ENABLE (IMASK clear), ISB.
        #[inline]
        fn arm(&self, ticks: u64) {
            super::arm(self, ticks)
        }
        /// CNTV_CTL_EL0 = 0, ISB.
        #[inline]
        fn disarm(&self) {
            super::disarm(self)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::{Cell, RefCell};

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Op {
        Ctl(u64),
        Cval(u64),
        Isb,
    }

    /// A virtual timer modelled by the architecture's rules: the condition is
    /// `count >= cval`, ISTATUS reads it while enabled; every write is recorded.
    #[derive(Default)]
    struct Fake {
        count: Cell<u64>,
        ctl: Cell<u64>,
        cval: Cell<u64>,
        ops: RefCell<Vec<Op>>,
    }

    impl Fake {
        /// The interrupt line: enabled, condition met, not masked.
        fn asserted(&self) -> bool {
            is_pending(self) && self.ctl.get() & IMASK == 0
        }
        fn take_ops(&self) -> Vec<Op> {
            self.ops.take()
        }
    }

    impl Regs for Fake {
        fn read_ctl(&self) -> u64 {
            let ctl = self.ctl.get();
            let met = ctl & ENABLE != 0 && self.count.get() >= self.cval.get();
            ctl | if met { ISTATUS } else { 0 }
        }
        fn write_ctl(&self, v: u64) {
            assert_eq!(v & ISTATUS, 0, "ISTATUS is read-only: written {v:#x}");
            self.ctl.set(v);
            self.ops.borrow_mut().push(Op::Ctl(v));
        }
        fn write_cval(&self, v: u64) {
            self.cval.set(v);
            self.ops.borrow_mut().push(Op::Cval(v));
        }
        fn isb(&self) {
            self.ops.borrow_mut().push(Op::Isb);
        }
    }

    #[test]
    fn arm_writes_the_compare_value_before_enabling_unmasked_then_synchronizes() {
        let t = Fake::default();
        t.ctl.set(IMASK); // masked by an earlier handler
        arm(&t, 1234);
        assert_eq!(t.take_ops(), [Op::Cval(1234), Op::Ctl(ENABLE), Op::Isb]);
        disarm(&t);
        assert_eq!(t.take_ops(), [Op::Ctl(0), Op::Isb]);
    }

    #[test]
    fn a_passed_tick_fires_at_once_and_a_later_arm_or_disarm_deasserts() {
        let t = Fake::default();
        t.count.set(1000);
        arm(&t, 999); // already passed: the Alarm contract says fire at once
        assert!(t.asserted());
        arm(&t, 2000); // replaces it: deasserted before arm returns
        assert!(!t.asserted() && !is_pending(&t));
        t.count.set(1999);
        assert!(!t.asserted());
        t.count.set(2000); // reached: not late
        assert!(t.asserted());
        disarm(&t);
        assert!(!t.asserted() && !is_pending(&t));
    }

    #[test]
    fn a_clock_deadline_armed_as_the_compare_value_asserts_first_when_the_clock_reaches_it() {
        use baretime::{Clock, FnCounter, Frequency, Instant, Wake};

        // QEMU `virt`'s counter: 62.5 MHz, 16 ns a tick; the fake's count is the counter. Each
        // deadline starts from a count of 0 on a fresh clock (a clock never goes back).
        let t = Fake::default();
        let counter = FnCounter::new(|| t.count.get(), 64);
        for at_ns in [1, 15, 16, 17, 1_000_003, 12_345_678] {
            t.count.set(0);
            let clock = Clock::new(&counter, Frequency::exact_hz(62_500_000).unwrap());
            let at = Instant::from_nanos(at_ns);
            let deadline = clock.deadline(at).unwrap();
            arm(&t, deadline.ticks());
            // Step the count until the line asserts: up to then the clock reads before `at`
            // (not late), from then on `at` or later (not early: Clock::check says Fired).
            while !t.asserted() {
                assert!(
                    clock.now() < at,
                    "{at_ns} ns: reached at {:?}, not asserted",
                    clock.now()
                );
                t.count.set(t.count.get() + 1);
                assert!(t.count.get() < 1 << 24, "never asserted for {at_ns} ns");
            }
            assert!(
                clock.now() >= at,
                "{at_ns} ns: asserted at {:?}",
                clock.now()
            );
            assert_eq!(clock.check(deadline), Wake::Fired);
            disarm(&t);
        }
    }

    #[test]
    fn mask_keeps_the_condition_visible_but_deasserts_until_the_next_arm() {
        let t = Fake::default();
        t.count.set(50);
        arm(&t, 10);
        mask(&t);
        assert_eq!(t.take_ops().last(), Some(&Op::Isb));
        assert!(!t.asserted());
        assert!(is_pending(&t), "ISTATUS ignores IMASK");
        assert_eq!(t.ctl.get(), ENABLE | IMASK);
        arm(&t, 10);
        assert!(t.asserted(), "arm unmasks");
        // Masking a disabled timer leaves it disabled, and a disabled timer is not pending
        // (ISTATUS is UNKNOWN then: it is not consulted).
        disarm(&t);
        mask(&t);
        assert_eq!(t.ctl.get(), IMASK);
        assert!(!is_pending(&t));
    }
}
