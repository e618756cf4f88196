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

use baretime::{Counter, NarrowTimer};
use cortex_m::peripheral::scb::SystemHandler;
use cortex_m::peripheral::syst::SystClkSource;
use cortex_m::peripheral::{NVIC, SCB, SYST};

use crate::mmio::{read, write};
use crate::run::Role;

/// QEMU's mps2 system clock, which drives SysTick and the APB timers.
pub const HZ: u64 = 25_000_000;
/// The narrow timer's width: SysTick with a reload of 2^16 − 1.
pub const NARROW_BITS: u32 = 16;
/// The board, as the results name it (AN385 and AN386 differ only in the core).
pub const NAME: &str = "mps2";
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
const TIMER1: usize = 0x4000_1000;
const T_CTRL: usize = 0x00;
const T_RELOAD: usize = 0x08;
const T_INTCLEAR: usize = 0x0c;

/// IRQ numbers: CMSDK timers 0 and 1, the dual timer.
const IRQ_TIMER0: u16 = 8;
const IRQ_TIMER1: u16 = 9;
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

/// SysTick as a 16-bit up-counter.
pub struct Narrow;

impl NarrowTimer for Narrow {
    #[inline]
    fn count(&self) -> u32 {
        0xffff - SYST::get_current()
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

#[derive(Clone, Copy)]
struct Irq(u16);

// SAFETY: the numbers are mps2's IRQs (IRQ_* above).
unsafe impl cortex_m::interrupt::InterruptNumber for Irq {
    fn number(self) -> u16 {
        self.0
    }
}

/// Starts the counters, and SysTick's wrap interrupt (interrupts are off until the clocks
/// run).
pub fn start_counters(syst: &mut SYST) {
    write(DT2 + DT_CONTROL, 0);
    write(DT2 + DT_LOAD, u32::MAX);
    write(DT2 + DT_CONTROL, DT_ENABLE | DT_32BIT); // free-running, no interrupt
    syst.set_clock_source(SystClkSource::Core);
    syst.set_reload(0xffff);
    syst.clear_current();
    // The wrap interrupt from the first wrap on (interrupts are still off: it waits).
    syst.enable_interrupt();
    syst.enable_counter();
}

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
