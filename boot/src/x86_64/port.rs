//! Port I/O for COM1 and isa-debug-exit (the library keeps its own copy private for the PIT
//! and the ACPI PM timer).

use core::arch::asm;

/// Reads a byte from I/O port `port` (`IN AL, DX`).
///
/// # Safety
///
/// Ring 0 (or I/O privilege for `port`), and the read has no side effect other code relies on.
#[inline]
pub unsafe fn inb(port: u16) -> u8 {
    let v: u8;
    // SAFETY: the caller guarantees privilege and a harmless read (# Safety); IN writes only
    // AL (declared) and touches neither stack nor flags. Not `nomem`: a device access.
    unsafe { asm!("in al, dx", out("al") v, in("dx") port, options(nostack, preserves_flags)) };
    v
}

/// Writes a byte to I/O port `port` (`OUT DX, AL`).
///
/// # Safety
///
/// Ring 0 (or I/O privilege for `port`), and the write is what the caller means to do to that
/// device.
#[inline]
pub unsafe fn outb(port: u16, value: u8) {
    // SAFETY: the caller guarantees privilege and the write's intended effect (# Safety); OUT
    // reads DX and AL only, touches neither stack nor flags.
    unsafe { asm!("out dx, al", in("dx") port, in("al") value, options(nostack, preserves_flags)) };
}
