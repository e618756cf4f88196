//! The x86_64 kernel: PVH entry, COM1 output, ACPI lookup of the timers, the scenarios.

mod acpi;
mod entry;
mod serial;

use core::fmt::Write;

use baretime::arch::x86_64::port::outb;
pub use serial::Serial;

/// Ends QEMU through `-device isa-debug-exit,iobase=0xf4,iosize=4`: QEMU exits with status
/// `(code << 1) | 1`. Without that device, halts.
pub fn exit(code: u8) -> ! {
    // SAFETY: ring 0; port 0xF4 is QEMU's debug-exit device (or unused on a PC).
    unsafe { outb(0xF4, code) };
    loop {
        // SAFETY: HLT with interrupts off stops this CPU for good, which is the intent.
        unsafe { core::arch::asm!("cli; hlt", options(nomem, nostack)) };
    }
}

/// The command line QEMU passed with `-append` (empty if none).
fn command_line(info: &entry::StartInfo) -> &'static str {
    if info.cmdline_paddr == 0 {
        return "";
    }
    let start = info.cmdline_paddr as *const u8;
    let mut len = 0;
    // SAFETY: the PVH protocol gives a NUL-terminated string at cmdline_paddr, which the
    // identity map covers; the kernel never writes there. 4 KiB caps a runaway scan.
    let bytes = unsafe {
        while len < 4096 && *start.add(len) != 0 {
            len += 1;
        }
        core::slice::from_raw_parts(start, len)
    };
    core::str::from_utf8(bytes).unwrap_or("")
}

/// Called by the entry code in long mode with the physical address of `hvm_start_info`.
#[no_mangle]
extern "C" fn kernel_main(start_info: u64) -> ! {
    let mut out = Serial::init();
    // SAFETY: the entry code passes the address the PVH loader put in EBX; it is identity
    // mapped and the loader does not touch it afterwards.
    let info = unsafe { &*(start_info as *const entry::StartInfo) };
    if info.magic != entry::START_INFO_MAGIC {
        let _ = writeln!(out, "error=bad_start_info_magic magic={:#x}", info.magic);
        exit(1);
    }
    let cmdline = command_line(info);
    let _ = writeln!(out, "arch=x86_64 cmdline=\"{cmdline}\"");
    let timers = acpi::find_timers(info.rsdp_paddr);
    let _ = writeln!(
        out,
        "rsdp={:#x} pm_timer={:?} hpet={:?}",
        info.rsdp_paddr, timers.pm_timer, timers.hpet
    );
    let _ = writeln!(out, "done=1");
    exit(0);
}
