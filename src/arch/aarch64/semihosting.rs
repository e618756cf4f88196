//! Arm semihosting: requests from the target to a debugger or emulator (`HLT #0xF000`).
//!
//! QEMU (`-semihosting`) and debug probes answer these. [`crate::reference`] uses
//! [`SYS_ELAPSED`] and [`SYS_TICKFREQ`] as a reference timer; test kernels use
//! [`SYS_EXIT_EXTENDED`] to end QEMU with an exit status.
//!
//! Without an attached semihosting host, `HLT` is an undefined instruction (or a debug halt):
//! that is why [`call`] is `unsafe`.

use core::arch::asm;

/// `SYS_GET_CMDLINE`: parameter block `[buffer address, buffer length]`; the host copies the
/// NUL-terminated command line into the buffer and sets the second field to its length.
/// Returns 0 on success. (QEMU gives `-semihosting-config arg=…`, else `-kernel` + `-append`.)
pub const SYS_GET_CMDLINE: usize = 0x15;
/// `SYS_EXIT_EXTENDED`: parameter block `[reason, subcode]`; with reason
/// [`ADP_STOPPED_APPLICATION_EXIT`], QEMU exits with status `subcode`.
pub const SYS_EXIT_EXTENDED: usize = 0x20;
/// `SYS_ELAPSED`: parameter is a pointer to a block the host fills with the number of ticks
/// since execution started (on AArch64 one 64-bit field). Returns 0 on success, -1 otherwise.
pub const SYS_ELAPSED: usize = 0x30;
/// `SYS_TICKFREQ`: returns the rate of [`SYS_ELAPSED`]'s ticks in Hz, or -1 if unknown.
pub const SYS_TICKFREQ: usize = 0x31;
/// `ADP_Stopped_ApplicationExit`: the reason code of a normal exit.
pub const ADP_STOPPED_APPLICATION_EXIT: usize = 0x20026;

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
pub unsafe fn call(op: usize, param: usize) -> usize {
    let ret: usize;
    // The host may read and write the parameter block, so this is not `nomem`/`readonly`;
    // the host returns the result in X0 and the protocol preserves X1.
    // SAFETY: the caller guarantees a semihosting host and a valid `param` (# Safety); the
    // asm declares every register it writes and touches no stack.
    unsafe { asm!("hlt #0xf000", inout("x0") op => ret, in("x1") param, options(nostack)) };
    ret
}
