//! MPS2 AN385 (Cortex-M3) and AN386 (Cortex-M4) as QEMU emulates them: everything at the
//! 25 MHz system clock.
//!
//! | what | hardware | priority |
//! | --- | --- | --- |
//! | the clock's counter | dual timer's timer 2: free-running 32-bit, counting down, no interrupt | — |
//! | the narrow timer | SysTick, reload 2^16 − 1 (a 16-bit timer); its wrap interrupt counts wraps | 0x40 |
//! | the watchdog | dual timer's timer 1, periodic at 1 kHz (IRQ 10) | 0x00 |
//! | the high reader | CMSDK timer 0, periodic at ~10 kHz (IRQ 8) | 0x80 |
//! | the mid reader and updater | CMSDK timer 1, periodic at ~8.3 kHz (IRQ 9) | 0xc0 |
//!
//! SysTick's pending flag (ICSR.PENDSTSET) is cleared by the hardware on entry, so every
//! reader of the extended count runs at SysTick's priority or below (baretime's
//! `ExtendedTimer` docs: "Who reads").
//!
//! The `timers` scenario (`src/timers.rs`) uses the hardware differently:
//!
//! | what | hardware | priority |
//! | --- | --- | --- |
//! | the clock's counter | dual timer's timer 2, as above | — |
//! | the alarm ([`Timer0Alarm`]) | CMSDK timer 0, one-shot (IRQ 8) | 0x80 |
//! | the tick: `update()`, the run's time limit | dual timer's timer 1, periodic at 1 kHz (IRQ 10) | 0x40 |
//!
//! The `rtic` scenario (`src/rtic_app.rs`) uses the same three, the alarm and the tick as
//! RTIC hardware tasks whose priorities RTIC sets (the alarm 2, the tick 4: `src/pac.rs`
//! has 3 priority bits).
//!
//! The `cost` scenario (`src/cost.rs`) keeps the clock's counter and the narrow timer (its
//! wrap interrupt on only while the extended clock is measured), and times calls with a
//! stopwatch: CMSDK timer 1, free-running at 25 MHz, no interrupt.
// The `cost` build uses the counters and the stopwatch only.
#![cfg_attr(feature = "cost", allow(dead_code, unused_imports))]

#[cfg(any(feature = "timers", feature = "rtic"))]
use baretime::Alarm;
use baretime::Counter;
#[cfg(not(any(feature = "timers", feature = "rtic")))]
use baretime::NarrowTimer;
#[cfg(any(feature = "timers", feature = "rtic"))]
use core::sync::atomic::{AtomicU32, Ordering::Relaxed};
#[cfg(not(any(feature = "timers", feature = "rtic", feature = "cost")))]
use cortex_m::peripheral::scb::SystemHandler;
#[cfg(not(any(feature = "timers", feature = "rtic")))]
use cortex_m::peripheral::syst::SystClkSource;
use cortex_m::peripheral::NVIC;
#[cfg(not(any(feature = "timers", feature = "rtic")))]
use cortex_m::peripheral::{SCB, SYST};

use crate::mmio::{read, write};
#[cfg(not(any(feature = "timers", feature = "rtic", feature = "cost")))]
use crate::run::Role;

/// QEMU's mps2 system clock, which drives SysTick and the APB timers.
pub const HZ: u64 = 25_000_000;
#[cfg(not(any(feature = "timers", feature = "rtic")))]
/// The narrow timer's width: SysTick with a reload of 2^16 − 1.
pub const NARROW_BITS: u32 = 16;
/// The board, as the results name it (AN385 and AN386 differ only in the core).
pub const NAME: &str = "mps2";
#[cfg(not(any(feature = "timers", feature = "rtic", feature = "cost")))]
/// What SysTick's handler does.
pub const SYSTICK_ROLE: Role = Role::Wrap;

const DUALTIMER: usize = 0x4000_2000;
const DT1: usize = DUALTIMER; // timer 1: the watchdog
const DT2: usize = DUALTIMER + 0x20; // timer 2: the clock's counter
const DT_LOAD: usize = 0x00;
const DT_VALUE: usize = 0x04;
const DT_CONTROL: usize = 0x08;
const DT_INTCLR: usize = 0x0c;
/// CONTROL: enable, periodic mode, interrupt enable, 32-bit.
const DT_ENABLE: u32 = 1 << 7;
const DT_PERIODIC: u32 = 1 << 6;
const DT_INTEN: u32 = 1 << 5;
const DT_32BIT: u32 = 1 << 1;

const TIMER0: usize = 0x4000_0000;
#[cfg(not(any(feature = "timers", feature = "rtic")))]
const TIMER1: usize = 0x4000_1000;
const T_CTRL: usize = 0x00;
const T_RELOAD: usize = 0x08;
const T_INTCLEAR: usize = 0x0c;

/// IRQ numbers: CMSDK timers 0 and 1, the dual timer.
const IRQ_TIMER0: u16 = 8;
#[cfg(not(any(feature = "timers", feature = "rtic", feature = "cost")))]
const IRQ_TIMER1: u16 = 9;
#[cfg(not(feature = "rtic"))]
const IRQ_DUALTIMER: u16 = 10;

/// The clock's counter: the dual timer's timer 2, counting down from 2^32 − 1, reported
/// counting up.
pub struct Main;

impl Counter for Main {
    #[inline]
    fn ticks(&self) -> u64 {
        u64::from(!read(DT2 + DT_VALUE))
    }
    fn bits(&self) -> u32 {
        32
    }
}

#[cfg(not(any(feature = "timers", feature = "rtic")))]
/// SysTick as a 16-bit up-counter.
pub struct Narrow;

#[cfg(not(any(feature = "timers", feature = "rtic")))]
impl NarrowTimer for Narrow {
    #[inline]
    fn count(&self) -> u32 {
        // (2^16 − VAL) mod 2^16: 0 while VAL is 0 (before the first reload, and on the tick
        // the wrap flag is raised), not `0xffff − VAL` (`NarrowTimer`'s docs).
        SYST::get_current().wrapping_neg() & 0xffff
    }
    fn bits(&self) -> u32 {
        NARROW_BITS
    }
    #[inline]
    fn wrap_pending(&self) -> bool {
        SCB::is_pendst_pending()
    }
    /// The hardware cleared PENDSTSET on entry.
    fn clear_wrap(&self) {}
}

/// Starts the clock's counter: free-running, no interrupt.
fn start_main() {
    write(DT2 + DT_CONTROL, 0);
    write(DT2 + DT_LOAD, u32::MAX);
    write(DT2 + DT_CONTROL, DT_ENABLE | DT_32BIT);
}

#[derive(Clone, Copy)]
struct Irq(u16);

// SAFETY: the numbers are mps2's IRQs (IRQ_* above).
unsafe impl cortex_m::interrupt::InterruptNumber for Irq {
    fn number(self) -> u16 {
        self.0
    }
}

#[cfg(not(any(feature = "timers", feature = "rtic")))]
/// Starts the counters, and SysTick's wrap interrupt (interrupts are off until the clocks
/// run).
pub fn start_counters(syst: &mut SYST) {
    start_main();
    syst.set_clock_source(SystClkSource::Core);
    syst.set_reload(0xffff);
    syst.clear_current();
    // The wrap interrupt from the first wrap on (interrupts are still off: it waits).
    syst.enable_interrupt();
    syst.enable_counter();
}

#[cfg(not(any(feature = "timers", feature = "rtic", feature = "cost")))]
/// Sets the priorities and starts the periodic interrupts.
pub fn start_interrupts(_syst: &mut SYST, scb: &mut SCB, nvic: &mut NVIC) {
    // SAFETY: priorities are set before the interrupts are unmasked, no priority-based
    // critical section is in use.
    unsafe {
        nvic.set_priority(Irq(IRQ_DUALTIMER), 0x00);
        scb.set_priority(SystemHandler::SysTick, 0x40);
        nvic.set_priority(Irq(IRQ_TIMER0), 0x80);
        nvic.set_priority(Irq(IRQ_TIMER1), 0xc0);
    }
    write(DT1 + DT_CONTROL, 0);
    write(DT1 + DT_LOAD, (HZ / 1000) as u32);
    write(
        DT1 + DT_CONTROL,
        DT_ENABLE | DT_PERIODIC | DT_INTEN | DT_32BIT,
    );
    write(TIMER0 + T_RELOAD, 2_503);
    write(TIMER0 + T_CTRL, 0b1001); // enable, interrupt enable
    write(TIMER1 + T_RELOAD, 3_001);
    write(TIMER1 + T_CTRL, 0b1001);
    // SAFETY: the handlers below are ready for these interrupts.
    unsafe {
        NVIC::unmask(Irq(IRQ_DUALTIMER));
        NVIC::unmask(Irq(IRQ_TIMER0));
        NVIC::unmask(Irq(IRQ_TIMER1));
    }
}

#[cfg(not(any(feature = "timers", feature = "rtic", feature = "cost")))]
/// The role of device interrupt `irqn`, its source acknowledged.
pub fn take_irq(irqn: i16) -> Option<Role> {
    match irqn {
        10 => {
            write(DT1 + DT_INTCLR, 1);
            Some(Role::Watchdog)
        }
        8 => {
            write(TIMER0 + T_INTCLEAR, 1);
            Some(Role::High)
        }
        9 => {
            write(TIMER1 + T_INTCLEAR, 1);
            Some(Role::Mid)
        }
        _ => None,
    }
}

/// CMSDK timer CTRL: enable, interrupt enable. VALUE: the count.
#[cfg(any(feature = "timers", feature = "rtic", feature = "cost"))]
const T_ENABLE: u32 = 1 << 0;
#[cfg(any(feature = "timers", feature = "rtic"))]
const T_IRQEN: u32 = 1 << 3;
#[cfg(any(feature = "timers", feature = "rtic", feature = "cost"))]
const T_VALUE: usize = 0x04;

/// Ticks by which [`Timer0Alarm::arm`] shortens the load, for the time between its counter
/// read and the write that starts the timer (three instructions: a subtraction and two stores;
/// under QEMU's `-icount shift=5` 32 ns each, 96 ns, less than 3 ticks of 40 ns). Never late
/// is the contract; firing this much early only costs a re-arm.
#[cfg(any(feature = "timers", feature = "rtic"))]
const ARM_LEAD_TICKS: u32 = 3;

/// An [`Alarm`] on CMSDK timer 0 — a 32-bit down-counter at the board clock, the clock
/// counter's rate — as a user would write one: the distance from the counter's value now to
/// the asked tick, in the counter's 32 bits, loaded as a one-shot count (RELOAD 0: the timer
/// stops at zero), whose interrupt (IRQ 8) comes when the count goes from 1 to 0. A tick
/// already passed (or at most [`ARM_LEAD_TICKS`] away) pends the interrupt by hand.
#[cfg(any(feature = "timers", feature = "rtic"))]
pub struct Timer0Alarm;

/// The counter value (low 32 bits) the loaded count runs out at.
#[cfg(any(feature = "timers", feature = "rtic"))]
static LOADED_FOR: AtomicU32 = AtomicU32::new(0);

#[cfg(any(feature = "timers", feature = "rtic"))]
impl Timer0Alarm {
    /// Acknowledges the timer's interrupt (its handler's first step). When the timer itself
    /// raised it (not a hand-pended one), the counter value it was loaded to run out at.
    pub fn clear() -> Option<u32> {
        let fired = read(TIMER0 + T_INTCLEAR) & 1 != 0; // INTSTATUS
        write(TIMER0 + T_INTCLEAR, 1);
        fired.then(|| LOADED_FOR.load(Relaxed))
    }

    /// Stops the timer and drops its interrupt, raised or pending.
    fn stop() {
        write(TIMER0 + T_CTRL, 0);
        write(TIMER0 + T_INTCLEAR, 1);
        NVIC::unpend(Irq(IRQ_TIMER0));
    }
}

#[cfg(any(feature = "timers", feature = "rtic"))]
impl Alarm for Timer0Alarm {
    fn arm(&self, ticks: u64) {
        Timer0Alarm::stop();
        write(TIMER0 + T_RELOAD, 0); // one-shot: no reload, no second interrupt
        let now = Main.ticks() as u32;
        let distance = (ticks as u32).wrapping_sub(now);
        // Passed: at or more than half a wrap behind (the trait's contract), or too close to
        // load.
        if distance <= ARM_LEAD_TICKS || distance >= 1 << 31 {
            NVIC::pend(Irq(IRQ_TIMER0));
            return;
        }
        LOADED_FOR.store(now.wrapping_add(distance - ARM_LEAD_TICKS), Relaxed);
        write(TIMER0 + T_VALUE, distance - ARM_LEAD_TICKS);
        write(TIMER0 + T_CTRL, T_ENABLE | T_IRQEN);
    }

    fn disarm(&self) {
        Timer0Alarm::stop();
    }
}

/// The `timers` scenario's hardware: starts the clock's counter (interrupts are off until
/// the clock runs).
#[cfg(any(feature = "timers", feature = "rtic"))]
pub fn start_timers_counter() {
    start_main();
    Timer0Alarm::stop();
}

/// The `timers` scenario's interrupts: the alarm's (armed later) and the 1 kHz tick.
#[cfg(feature = "timers")]
pub fn start_timers_interrupts(nvic: &mut NVIC) {
    // SAFETY: priorities are set before the interrupts are unmasked, no priority-based
    // critical section is in use.
    unsafe {
        nvic.set_priority(Irq(IRQ_DUALTIMER), 0x40);
        nvic.set_priority(Irq(IRQ_TIMER0), 0x80);
    }
    start_tick();
    // SAFETY: the handlers in `timers` are ready for these interrupts.
    unsafe {
        NVIC::unmask(Irq(IRQ_DUALTIMER));
        NVIC::unmask(Irq(IRQ_TIMER0));
    }
}

/// Starts the 1 kHz tick (dual timer 1, IRQ 10); its priority and mask are the caller's (the
/// `rtic` scenario's are RTIC's).
#[cfg(any(feature = "timers", feature = "rtic"))]
pub fn start_tick() {
    write(DT1 + DT_CONTROL, 0);
    write(DT1 + DT_LOAD, (HZ / 1000) as u32);
    write(
        DT1 + DT_CONTROL,
        DT_ENABLE | DT_PERIODIC | DT_INTEN | DT_32BIT,
    );
}

/// Acknowledges the 1 kHz tick (the `rtic` scenario's handler).
#[cfg(feature = "rtic")]
pub fn clear_tick() {
    write(DT1 + DT_INTCLR, 1);
}

/// Device interrupts in the `timers` scenario.
#[cfg(feature = "timers")]
pub enum TimersIrq {
    /// CMSDK timer 0: the alarm (not yet acknowledged: [`Timer0Alarm::clear`]).
    Alarm,
    /// Dual timer 1: the 1 kHz tick (acknowledged).
    Tick,
}

/// Which of the `timers` scenario's interrupts `irqn` is; the tick acknowledged.
#[cfg(feature = "timers")]
pub fn timers_irq(irqn: i16) -> Option<TimersIrq> {
    match irqn {
        8 => Some(TimersIrq::Alarm),
        10 => {
            write(DT1 + DT_INTCLR, 1);
            Some(TimersIrq::Tick)
        }
        _ => None,
    }
}

/// Ticks since the 1 kHz tick's count last ran out: in its handler, how late the handler
/// started (its entry latency, interrupts held off included).
#[cfg(feature = "timers")]
pub fn tick_elapsed() -> u32 {
    ((HZ / 1000) as u32).wrapping_sub(read(DT1 + DT_VALUE))
}

/// Raises the alarm's interrupt by hand: the driver plans its wake again (after a
/// recalibration).
#[cfg(feature = "timers")]
pub fn pend_alarm() {
    NVIC::pend(Irq(IRQ_TIMER0));
}

/// The `cost` scenario's stopwatch: CMSDK timer 1, free-running down from 2^32 − 1 at
/// [`HZ`], no interrupt.
#[cfg(feature = "cost")]
pub fn start_stopwatch() {
    write(TIMER1 + T_CTRL, 0);
    write(TIMER1 + T_RELOAD, u32::MAX);
    write(TIMER1 + T_VALUE, u32::MAX);
    write(TIMER1 + T_CTRL, T_ENABLE);
}

/// The stopwatch's count, counting up.
#[cfg(feature = "cost")]
#[inline(always)]
pub fn stopwatch() -> u32 {
    !read(TIMER1 + T_VALUE)
}

/// The narrow timer's wrap interrupt is SysTick's exception, not a device interrupt.
#[cfg(feature = "cost")]
pub const WRAP_IRQ: Option<i16> = None;

/// Turns the narrow timer's wrap interrupt (SysTick's) on or off.
#[cfg(feature = "cost")]
pub fn wrap_interrupt(syst: &mut SYST, on: bool) {
    if on {
        syst.enable_interrupt();
    } else {
        syst.disable_interrupt();
    }
}
