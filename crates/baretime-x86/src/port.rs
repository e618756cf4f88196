//! x86 port I/O: the `IN` and `OUT` instructions the legacy timers need (the PIT's ports
//! 0x40–0x43 and 0x61, the ACPI PM timer's port from the FADT). Internal: a kernel has its
//! own port I/O (as `boot/src/x86_64/port.rs` does) and hands ports to the references
//! through their `unsafe` constructors.
//!
//! They are `unsafe` because a port write can do anything to the machine (reprogram a timer an OS depends on, reset the CPU through 0xCF9),
//! and even a read has side effects on some devices (it acknowledges, latches or pops a FIFO).
//! [`crate::reference`] wraps them in types whose construction carries the contract once.
//!
//! Every `asm!` here is `nostack, preserves_flags` and deliberately *not* `nomem`: a port
//! access is a side effect the compiler must not reorder with surrounding memory accesses
//! (a device may DMA, or the access may be ordered against MMIO).

use core::arch::asm;

/// Reads a byte from I/O port `port` (`IN AL, DX`).
///
/// # Safety
///
/// The code runs with I/O privilege for `port` (CPL 0, or IOPL/the TSS I/O bitmap allows it;
/// otherwise the instruction raises #GP), and reading `port` has no side effect that breaks an
/// invariant of other code on the machine (some devices acknowledge or pop data on a read).
#[inline]
pub(crate) unsafe fn inb(port: u16) -> u8 {
    let v: u8;
    // SAFETY: the caller guarantees privilege and that the read is harmless (# Safety). IN
    // writes only AL (declared as the output), reads DX, touches neither stack nor flags.
    unsafe { asm!("in al, dx", out("al") v, in("dx") port, options(nostack, preserves_flags)) };
    v
}

/// Reads a 32-bit doubleword from I/O port `port` (`IN EAX, DX`).
///
/// # Safety
///
/// As for [`inb`]: I/O privilege for the port, and the read does no harm.
#[inline]
pub(crate) unsafe fn inl(port: u16) -> u32 {
    let v: u32;
    // SAFETY: as in `inb`; writes only EAX.
    unsafe { asm!("in eax, dx", out("eax") v, in("dx") port, options(nostack, preserves_flags)) };
    v
}

/// Writes a byte to I/O port `port` (`OUT DX, AL`).
///
/// # Safety
///
/// The code runs with I/O privilege for `port`, and writing `value` there is what the caller
/// means to do to that device: the compiler cannot check what a port write changes (a timer
/// an OS relies on, an interrupt controller, a reset register).
#[inline]
pub(crate) unsafe fn outb(port: u16, value: u8) {
    // SAFETY: the caller guarantees privilege and the write's intended effect (# Safety). OUT
    // reads DX and AL only, touches neither stack nor flags.
    unsafe { asm!("out dx, al", in("dx") port, in("al") value, options(nostack, preserves_flags)) };
}
