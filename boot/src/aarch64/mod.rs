//! The aarch64 kernel: `virt` entry, PL011 output, semihosting exit, the scenarios.

mod entry;

use core::fmt::{self, Write};

use baretime::arch::aarch64::semihosting::{
    call, ADP_STOPPED_APPLICATION_EXIT, SYS_EXIT_EXTENDED, SYS_GET_CMDLINE,
};

/// The PL011 UART of QEMU's `virt` machine. (QEMU needs no set-up; real hardware would want
/// the baud rate and UARTEN programmed first.)
pub struct Serial(());

const PL011: usize = 0x0900_0000;
/// Flag register; bit 5: transmit FIFO full.
const PL011_FR: usize = PL011 + 0x18;

impl Serial {
    /// The console.
    pub fn get() -> Serial {
        Serial(())
    }

    fn put(&mut self, byte: u8) {
        // SAFETY: the PL011's data and flag registers are mapped as device memory by the entry
        // code, and this kernel is their only user.
        unsafe {
            while core::ptr::read_volatile(PL011_FR as *const u32) & (1 << 5) != 0 {
                core::hint::spin_loop();
            }
            core::ptr::write_volatile(PL011 as *mut u32, u32::from(byte));
        }
    }
}

impl Write for Serial {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for b in s.bytes() {
            if b == b'\n' {
                self.put(b'\r');
            }
            self.put(b);
        }
        Ok(())
    }
}

/// Ends QEMU with exit status `code` (semihosting `SYS_EXIT_EXTENDED`).
pub fn exit(code: u8) -> ! {
    let block = [ADP_STOPPED_APPLICATION_EXIT, usize::from(code)];
    // SAFETY: the kernel runs under `-semihosting`; `block` is the two-field parameter block
    // SYS_EXIT_EXTENDED reads, alive for the call.
    unsafe { call(SYS_EXIT_EXTENDED, block.as_ptr() as usize) };
    loop {
        core::hint::spin_loop();
    }
}

/// The semihosting command line (QEMU: `-kernel` path and `-append` text), or "".
fn command_line(buf: &mut [u8; 256]) -> &str {
    let mut block = [buf.as_mut_ptr() as usize, buf.len()];
    // SAFETY: under `-semihosting`; the block names a writable buffer of the given length
    // that outlives the call, and the host writes at most that many bytes.
    let ret = unsafe { call(SYS_GET_CMDLINE, block.as_mut_ptr() as usize) };
    if ret != 0 {
        return "";
    }
    let len = block[1].min(buf.len());
    core::str::from_utf8(&buf[..len]).unwrap_or("")
}

fn current_el() -> u64 {
    let el: u64;
    // SAFETY: reading CurrentEL has no side effects.
    unsafe { core::arch::asm!("mrs {}, CurrentEL", out(reg) el, options(nomem, nostack)) };
    (el >> 2) & 3
}

/// Called by the entry code with the MMU on.
#[no_mangle]
extern "C" fn kernel_main() -> ! {
    let mut out = Serial::get();
    let mut buf = [0u8; 256];
    let cmdline = command_line(&mut buf);
    let _ = writeln!(
        out,
        "arch=aarch64 el={} cmdline=\"{cmdline}\"",
        current_el()
    );
    let _ = writeln!(out, "done=1");
    exit(0);
}
