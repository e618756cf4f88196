//! Arm semihosting requests the kernel makes (`HLT #0xF000`): its command line and its exit.
//! (The library keeps its own copy private for `SemihostingElapsed`.)

use core::arch::asm;

/// `SYS_GET_CMDLINE`: parameter block `[buffer address, buffer length]`; the host copies the
/// NUL-terminated command line into the buffer and sets the second field to its length.
/// Returns 0 on success. (QEMU gives `-semihosting-config arg=…`, else `-kernel` + `-append`.)
pub const SYS_GET_CMDLINE: usize = 0x15;
/// `SYS_EXIT_EXTENDED`: parameter block `[reason, subcode]`; with reason
/// [`ADP_STOPPED_APPLICATION_EXIT`], QEMU exits with status `subcode`.
pub const SYS_EXIT_EXTENDED: usize = 0x20;
/// `ADP_Stopped_ApplicationExit`: the reason code of a normal exit.
pub const ADP_STOPPED_APPLICATION_EXIT: usize = 0x20026;

/// Makes semihosting request `op` with parameter `param` and returns the host's answer (X0).
///
/// # Safety
///
/// A semihosting host is attached (QEMU `-semihosting`; without one `HLT` traps as
/// undefined), and `param` is what `op` expects: for a parameter block, the address of a block
/// of the size the request defines, writable where the host writes, alive for the call.
#[inline]
pub unsafe fn call(op: usize, param: usize) -> usize {
    let ret: usize;
    // SAFETY: the caller guarantees a host and a valid `param` (# Safety). The host may read
    // and write the block, so not `nomem`; it returns in X0 and preserves X1; no stack.
    unsafe { asm!("hlt #0xf000", inout("x0") op => ret, in("x1") param, options(nostack)) };
    ret
}
