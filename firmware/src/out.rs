//! Output and exit through Arm semihosting (`BKPT 0xAB`, which QEMU answers with
//! `-semihosting-config enable=on`): `SYS_WRITE0` for each line, `SYS_EXIT` at the end.

use core::fmt;

/// `SYS_WRITE0`: write a NUL-terminated string to the debug console.
const SYS_WRITE0: u32 = 0x04;
/// `SYS_TIME`: the host's time, in seconds since 1970-01-01T00:00:00Z.
#[cfg_attr(
    any(feature = "timers", feature = "rtic", feature = "cost"),
    allow(dead_code)
)]
const SYS_TIME: u32 = 0x11;
/// `SYS_EXIT`; on 32-bit Arm its argument is the reason code itself.
const SYS_EXIT: u32 = 0x18;
/// `ADP_Stopped_ApplicationExit` (QEMU exits with status 0) and `ADP_Stopped_RunTimeErrorUnknown`
/// (status 1).
const APPLICATION_EXIT: u32 = 0x20026;
const RUN_TIME_ERROR: u32 = 0x20024;

/// One output line, built with `write!` and sent by [`Line::send`].
pub struct Line {
    buf: [u8; 480],
    len: usize,
}

impl Line {
    pub const fn new() -> Line {
        Line {
            buf: [0; 480],
            len: 0,
        }
    }

    /// Sends the line (with a newline) to the console.
    pub fn send(mut self) {
        let end = self.len.min(self.buf.len() - 2);
        self.buf[end] = b'\n';
        self.buf[end + 1] = 0;
        // SAFETY: SYS_WRITE0 reads the NUL-terminated string at the address, which lives
        // until the call returns.
        unsafe {
            cortex_m::asm::semihosting_syscall(SYS_WRITE0, self.buf.as_ptr() as u32);
        }
    }
}

impl fmt::Write for Line {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for &b in s.as_bytes() {
            if self.len + 2 < self.buf.len() {
                self.buf[self.len] = b;
                self.len += 1;
            }
        }
        Ok(())
    }
}

/// The host's Unix time in whole seconds (semihosting `SYS_TIME`): the time of day the
/// wall clock is set from, as a firmware would set it from its RTC.
#[cfg_attr(
    any(feature = "timers", feature = "rtic", feature = "cost"),
    allow(dead_code)
)]
pub fn unix_seconds() -> u32 {
    // SAFETY: SYS_TIME takes no argument (r1 is ignored) and only returns a value.
    unsafe { cortex_m::asm::semihosting_syscall(SYS_TIME, 0) }
}

/// Ends the run: QEMU exits with status 0 when `ok`, else 1.
pub fn exit(ok: bool) -> ! {
    let reason = if ok { APPLICATION_EXIT } else { RUN_TIME_ERROR };
    // SAFETY: SYS_EXIT takes the reason code in r1; QEMU ends the emulation.
    unsafe {
        cortex_m::asm::semihosting_syscall(SYS_EXIT, reason);
    }
    loop {
        cortex_m::asm::bkpt();
    }
}

/// A panic is a failed run: say where, then exit with status 1.
#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    use core::fmt::Write;
    cortex_m::interrupt::disable();
    let mut line = Line::new();
    let _ = write!(line, "panic=\"{info}\"");
    line.send();
    exit(false)
}
