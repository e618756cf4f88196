//! The boards' memory-mapped registers: the firmware's one volatile read and write.

use core::ptr::{read_volatile, write_volatile};

/// Writes `value` to the 32-bit device register at `addr`.
pub fn write(addr: usize, value: u32) {
    // SAFETY: every caller passes the address of a 32-bit device register of the board the
    // firmware is built for (the constants in `board`), written by the one context that
    // owns it, as the board's documentation (QEMU's mps2 CMSDK timers, the nRF51 TIMERs)
    // describes.
    unsafe { write_volatile(addr as *mut u32, value) }
}

/// Reads the 32-bit device register at `addr`.
pub fn read(addr: usize) -> u32 {
    // SAFETY: as for `write`; reading these registers has no side effect.
    unsafe { read_volatile(addr as *const u32) }
}
