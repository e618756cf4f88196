//! Pinning the calling thread to one CPU (Linux `sched_setaffinity`), for the threaded warp
//! check. std has no affinity API; this is the crate's only OS call, through the optional
//! `libc` dependency that the feature `std` turns on (on Linux only): the crate's only
//! `unsafe`.

use std::vec::Vec;

/// The CPUs the calling thread may run on, lowest first, or the OS error number.
pub(crate) fn allowed_cpus() -> Result<Vec<usize>, i32> {
    // SAFETY: cpu_set_t is a plain bit array, valid when zeroed.
    let mut set: libc::cpu_set_t = unsafe { core::mem::zeroed() };
    let size = core::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: pid 0 is the calling thread; `set` is a live, writable cpu_set_t of `size` bytes,
    // which is all the kernel writes.
    let rc = unsafe { libc::sched_getaffinity(0, size, &mut set) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
    }
    let bits = usize::try_from(libc::CPU_SETSIZE).unwrap_or(0);
    let allowed = |cpu: usize| {
        // SAFETY: CPU_ISSET reads bit `cpu` of `set`; every `cpu` < CPU_SETSIZE is inside it.
        unsafe { libc::CPU_ISSET(cpu, &set) }
    };
    Ok((0..bits).filter(|&cpu| allowed(cpu)).collect())
}

/// Pins the calling thread to `cpu`, or returns the OS error number (EINVAL for a CPU that
/// is not allowed or does not exist).
pub(crate) fn pin_current_thread(cpu: usize) -> Result<(), i32> {
    let bits = usize::try_from(libc::CPU_SETSIZE).unwrap_or(0);
    if cpu >= bits {
        return Err(libc::EINVAL);
    }
    // SAFETY: cpu_set_t is a plain bit array, valid when zeroed.
    let mut set: libc::cpu_set_t = unsafe { core::mem::zeroed() };
    // SAFETY: CPU_SET writes bit `cpu` of `set`, and `cpu` < CPU_SETSIZE was checked above.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    let size = core::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: pid 0 is the calling thread; the kernel reads `size` bytes of `set`, a live
    // cpu_set_t. Changing the thread's own affinity affects no memory of ours.
    let rc = unsafe { libc::sched_setaffinity(0, size, &set) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
    }
}
