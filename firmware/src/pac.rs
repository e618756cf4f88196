//! The few lines of a device crate that RTIC needs for QEMU's MPS2 AN386 (no PAC crate for
//! it is in the workspace): the interrupts the `rtic` scenario binds or dispatches on, their
//! vector table, and the priority bits. `#[rtic::app(device = crate::pac)]` reads
//! `Interrupt` (as `interrupt`) and `NVIC_PRIO_BITS`; cortex-m-rt's `device` feature takes
//! the vector table from here (`__INTERRUPTS`) and the handlers' default from `device.x`
//! (written by `build.rs`: every name below `PROVIDE`d as `DefaultHandler`).
//!
//! | IRQ | name | what |
//! | --- | --- | --- |
//! | 8 | `TIMER0` | CMSDK timer 0: the alarm |
//! | 10 | `DUALTIMER` | the dual timer: timer 1's 1 kHz tick |
//! | 14 | `I2S` | the audio I2S interface, which QEMU does not model: RTIC's first dispatcher |
//! | 15 | `TOUCHSCREEN` | the touchscreen, likewise: RTIC's second dispatcher |

/// The priority bits of the AN386's NVIC (its CMSIS header's `__NVIC_PRIO_BITS`).
pub const NVIC_PRIO_BITS: u8 = 3;

/// The device interrupts the firmware names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(clippy::upper_case_acronyms)]
pub enum Interrupt {
    /// CMSDK timer 0.
    TIMER0 = 8,
    /// The dual timer.
    DUALTIMER = 10,
    /// Audio I2S (not modelled by QEMU).
    I2S = 14,
    /// Touchscreen (not modelled by QEMU).
    TOUCHSCREEN = 15,
}

pub use self::Interrupt as interrupt;

// SAFETY: the numbers are the AN386's IRQs (the table above), each below the 32 it has.
unsafe impl cortex_m::interrupt::InterruptNumber for Interrupt {
    fn number(self) -> u16 {
        self as u16
    }
}

extern "C" {
    fn TIMER0();
    fn DUALTIMER();
    fn I2S();
    fn TOUCHSCREEN();
    fn DefaultHandler();
}

/// One entry of the vector table: a handler's address.
#[derive(Clone, Copy)]
#[repr(transparent)]
pub struct Vector {
    _handler: unsafe extern "C" fn(),
}

/// The 32 device interrupts' vectors: the named ones' handlers (RTIC's, or `DefaultHandler`
/// through `device.x`), `DefaultHandler` for the rest.
#[link_section = ".vector_table.interrupts"]
#[no_mangle]
pub static __INTERRUPTS: [Vector; 32] = {
    let default = Vector {
        _handler: DefaultHandler,
    };
    let mut table = [default; 32];
    table[8] = Vector { _handler: TIMER0 };
    table[10] = Vector {
        _handler: DUALTIMER,
    };
    table[14] = Vector { _handler: I2S };
    table[15] = Vector {
        _handler: TOUCHSCREEN,
    };
    table
};
