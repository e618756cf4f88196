//! Arm semihosting: requests from the target to a debugger or emulator (`HLT #0xF000`).
//!
//! QEMU (`-semihosting`) and debug probes answer these. `SemihostingElapsed` uses
//! [`SYS_ELAPSED`] and [`SYS_TICKFREQ`] as a reference timer. Internal: a kernel that wants
//! other requests (its command line, its exit) makes them itself, as
//! `boot/src/aarch64/semihosting.rs` does.
//!
//! Without an attached semihosting host, `HLT` is an undefined instruction (or a debug halt):
//! that is why [`call`] is `unsafe`.

use core::arch::asm;

/// `SYS_ELAPSED`: parameter is a pointer to a block the host fills with the number of ticks
/// since execution started (on AArch64 one 64-bit field). Returns 0 on success, -1 otherwise.
pub(crate) const SYS_ELAPSED: usize = 0x30;
/// `SYS_TICKFREQ`: returns the rate of [`SYS_ELAPSED`]'s ticks in Hz, or -1 if unknown.
pub(crate) const SYS_TICKFREQ: usize = 0x31;
/// Makes semihosting request `op` with parameter `param` (a value or the address of a
/// parameter block) and returns the host's answer (the value of `X0` afterwards).
///
/// # Safety
///
/// - A semihosting host is attached and enabled for this exception level (QEMU with
///   `-semihosting` or `-semihosting-config enable=on`, or a debugger that handles
///   `HLT #0xF000`). Without one the instruction traps as undefined.
/// - `param` is what `op` expects: for requests that take a parameter block, the address of a
///   readable (and, where the host writes results, writable) block of the size the request
///   defines, valid for the duration of the call.
#[inline]
pub(crate) unsafe fn call(op: usize, param: usize) -> usize {
    let ret: usize;
    // The host may read and write the parameter block, so this is not `nomem`/`readonly`;
    // the host returns the result in X0 and the protocol preserves X1.
    // SAFETY: the caller guarantees a semihosting host and a valid `param` (# Safety); the
    // asm declares every register it writes and touches no stack.
    unsafe { asm!("hlt #0xf000", inout("x0") op => ret, in("x1") param, options(nostack)) };
    ret
}
