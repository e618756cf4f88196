//! The BBC micro:bit (nRF51822, Cortex-M0) as QEMU emulates it: 16 MHz timers.
//!
//! | what | hardware | priority |
//! | --- | --- | --- |
//! | the clock's counter | TIMER0, 32-bit at 16 MHz, read by a capture into CC[3] | — |
//! | the watchdog | TIMER0's COMPARE[0], moved 1 ms ahead each time (IRQ 8) | 0x00 |
//! | the high reader | SysTick, ~10 kHz (QEMU gives the nRF51 one; the chip has none) | 0x40 |
//! | the mid reader and updater | TIMER2, 16-bit, cleared at COMPARE[0]: ~8 kHz (IRQ 10) | 0x80 |
//! | the narrow timer | TIMER1, 16-bit (as on the chip): COMPARE[0] at 0 is its wrap (IRQ 9) | 0xc0 |
//!
//! TIMER1's wrap flag is EVENTS_COMPARE[0], which only software clears: readers above its
//! interrupt (the high and mid readers here) read the extended count too.
//!
//! Captures: several contexts trigger CAPTURE[n] and read CC[n] of the same timer. A handler
//! that runs between another context's trigger and read overwrites CC[n] with a later
//! count, so every read still returns a count taken during its own call.
//!
//! The `cost` scenario (`src/cost.rs`) keeps the clock's counter and the narrow timer (its
//! wrap interrupt on only while the extended clock is measured), and times calls with a
//! stopwatch: TIMER2, 32-bit at 16 MHz, read by a capture into CC[1], no interrupt.
// The `cost` build uses the counters and the stopwatch only.
#![cfg_attr(feature = "cost", allow(dead_code, unused_imports))]

use baretime::{Counter, NarrowTimer};
use cortex_m::peripheral::scb::SystemHandler;
use cortex_m::peripheral::syst::SystClkSource;
use cortex_m::peripheral::{NVIC, SCB, SYST};

use crate::mmio::{read, write};
#[cfg(not(feature = "cost"))]
use crate::run::Role;

/// The timers' rate (prescaler 0) and the core clock's.
pub const HZ: u64 = 16_000_000;
/// The narrow timer's width: TIMER1 in 16-bit mode.
pub const NARROW_BITS: u32 = 16;
/// The board, as the results name it.
pub const NAME: &str = "microbit";
#[cfg(not(feature = "cost"))]
/// What SysTick's handler does.
pub const SYSTICK_ROLE: Role = Role::High;

const TIMER0: usize = 0x4000_8000;
const TIMER1: usize = 0x4000_9000;
const TIMER2: usize = 0x4000_a000;
const START: usize = 0x000;
const STOP: usize = 0x004;
const CLEAR: usize = 0x00c;
const fn capture(n: usize) -> usize {
    0x040 + 4 * n
}
const fn compare_event(n: usize) -> usize {
    0x140 + 4 * n
}
const fn cc(n: usize) -> usize {
    0x540 + 4 * n
}
const SHORTS: usize = 0x200;
const INTENSET: usize = 0x304;
#[cfg(feature = "cost")]
const INTENCLR: usize = 0x308;
const MODE: usize = 0x504;
const BITMODE: usize = 0x508;
const PRESCALER: usize = 0x510;
const BITMODE_16: u32 = 0;
const BITMODE_32: u32 = 3;
const INT_COMPARE0: u32 = 1 << 16;
const SHORT_COMPARE0_CLEAR: u32 = 1;

const IRQ_TIMER0: u16 = 8;
const IRQ_TIMER1: u16 = 9;
const IRQ_TIMER2: u16 = 10;

/// The watchdog's period in TIMER0 ticks: 1 ms.
const WATCHDOG_TICKS: u32 = (HZ / 1000) as u32;

/// The clock's counter: TIMER0's count, captured into CC[3].
pub struct Main;

impl Counter for Main {
    #[inline]
    fn ticks(&self) -> u64 {
        write(TIMER0 + capture(3), 1);
        u64::from(read(TIMER0 + cc(3)))
    }
    fn bits(&self) -> u32 {
        32
    }
}

/// TIMER1, 16-bit: its count captured into CC[1]; its wrap raises EVENTS_COMPARE[0] (CC[0]
/// is 0).
pub struct Narrow;

impl NarrowTimer for Narrow {
    #[inline]
    fn count(&self) -> u32 {
        write(TIMER1 + capture(1), 1);
        read(TIMER1 + cc(1)) & 0xffff
    }
    fn bits(&self) -> u32 {
        NARROW_BITS
    }
    #[inline]
    fn wrap_pending(&self) -> bool {
        read(TIMER1 + compare_event(0)) != 0
    }
    fn clear_wrap(&self) {
        write(TIMER1 + compare_event(0), 0);
    }
}

#[derive(Clone, Copy)]
struct Irq(u16);

// SAFETY: the numbers are the nRF51's timer IRQs (IRQ_* above).
unsafe impl cortex_m::interrupt::InterruptNumber for Irq {
    fn number(self) -> u16 {
        self.0
    }
}

fn setup(timer: usize, bitmode: u32) {
    write(timer + STOP, 1);
    write(timer + MODE, 0); // timer
    write(timer + BITMODE, bitmode);
    write(timer + PRESCALER, 0); // 16 MHz
    write(timer + CLEAR, 1);
}

/// Starts the counters (their interrupts stay off).
pub fn start_counters(_syst: &mut SYST) {
    setup(TIMER0, BITMODE_32);
    write(TIMER0 + cc(0), WATCHDOG_TICKS);
    write(TIMER0 + START, 1);
    setup(TIMER1, BITMODE_16);
    write(TIMER1 + cc(0), 0); // the wrap
    write(TIMER1 + START, 1);
}

#[cfg(not(feature = "cost"))]
/// Sets the priorities and starts the periodic interrupts and TIMER1's wrap interrupt.
pub fn start_interrupts(syst: &mut SYST, scb: &mut SCB, nvic: &mut NVIC) {
    // SAFETY: priorities are set before the interrupts are unmasked, no priority-based
    // critical section is in use.
    unsafe {
        nvic.set_priority(Irq(IRQ_TIMER0), 0x00);
        scb.set_priority(SystemHandler::SysTick, 0x40);
        nvic.set_priority(Irq(IRQ_TIMER2), 0x80);
        nvic.set_priority(Irq(IRQ_TIMER1), 0xc0);
    }
    write(TIMER0 + compare_event(0), 0);
    write(TIMER0 + INTENSET, INT_COMPARE0);
    setup(TIMER2, BITMODE_16);
    write(TIMER2 + cc(0), 1_999);
    write(TIMER2 + SHORTS, SHORT_COMPARE0_CLEAR);
    write(TIMER2 + INTENSET, INT_COMPARE0);
    write(TIMER2 + START, 1);
    write(TIMER1 + INTENSET, INT_COMPARE0);
    syst.set_clock_source(SystClkSource::Core);
    syst.set_reload(1_600);
    syst.clear_current();
    syst.enable_counter();
    syst.enable_interrupt();
    // SAFETY: the handlers are ready for these interrupts.
    unsafe {
        NVIC::unmask(Irq(IRQ_TIMER0));
        NVIC::unmask(Irq(IRQ_TIMER1));
        NVIC::unmask(Irq(IRQ_TIMER2));
    }
}

#[cfg(not(feature = "cost"))]
/// The role of device interrupt `irqn`, its source acknowledged (the wrap's flag is
/// `ExtendedTimer::on_wrap`'s to clear).
pub fn take_irq(irqn: i16) -> Option<Role> {
    match irqn {
        8 => {
            write(TIMER0 + compare_event(0), 0);
            // From the count now, not the last compare: a late watchdog must not fall a
            // whole 2^32-tick wrap behind.
            let next = (Main.ticks() as u32).wrapping_add(WATCHDOG_TICKS);
            write(TIMER0 + cc(0), next);
            Some(Role::Watchdog)
        }
        9 => Some(Role::Wrap),
        10 => {
            write(TIMER2 + compare_event(0), 0);
            Some(Role::Mid)
        }
        _ => None,
    }
}

/// The `cost` scenario's stopwatch: TIMER2, 32-bit at [`HZ`], no interrupt.
#[cfg(feature = "cost")]
pub fn start_stopwatch() {
    setup(TIMER2, BITMODE_32);
    write(TIMER2 + START, 1);
}

/// The stopwatch's count, captured into CC[1].
#[cfg(feature = "cost")]
#[inline(always)]
pub fn stopwatch() -> u32 {
    write(TIMER2 + capture(1), 1);
    read(TIMER2 + cc(1))
}

/// The narrow timer's wrap interrupt: TIMER1's.
#[cfg(feature = "cost")]
pub const WRAP_IRQ: Option<i16> = Some(IRQ_TIMER1 as i16);

/// Turns the narrow timer's wrap interrupt (TIMER1's COMPARE[0]) on or off.
#[cfg(feature = "cost")]
pub fn wrap_interrupt(_syst: &mut SYST, on: bool) {
    if on {
        write(TIMER1 + INTENSET, INT_COMPARE0);
        // SAFETY: the cost scenario's handler is ready for the wrap.
        unsafe { NVIC::unmask(Irq(IRQ_TIMER1)) };
    } else {
        NVIC::mask(Irq(IRQ_TIMER1));
        write(TIMER1 + INTENCLR, INT_COMPARE0);
    }
}
