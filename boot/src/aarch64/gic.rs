//! The GICv2 of QEMU's `virt` machine (its default with `-cpu cortex-a72`: distributor at
//! 0x0800_0000, CPU interface at 0x0801_0000), as much of it as one private peripheral
//! interrupt needs: enable it, acknowledge it, end it.
//!
//! QEMU's `virt` without `secure=on` has no Security Extensions: every interrupt is Group 0
//! and, with GICC_CTLR.FIQEn clear, is signalled as IRQ. The first GiB, the GIC included, is
//! device memory in the entry code's map.

/// Distributor.
const GICD: usize = 0x0800_0000;
/// GICD_CTLR: bit 0 forwards Group 0 interrupts to the CPU interfaces.
const GICD_CTLR: usize = GICD;
/// GICD_ISENABLERn: one set-enable bit per INTID.
const GICD_ISENABLER: usize = GICD + 0x100;
/// GICD_IPRIORITYRn: one priority byte per INTID (lower is more urgent).
const GICD_IPRIORITYR: usize = GICD + 0x400;

/// CPU interface.
const GICC: usize = 0x0801_0000;
/// GICC_CTLR: bit 0 signals Group 0 interrupts to the CPU.
const GICC_CTLR: usize = GICC;
/// GICC_PMR: interrupts with a priority value below this are signalled.
const GICC_PMR: usize = GICC + 0x004;
/// GICC_IAR: reading acknowledges the highest-priority pending interrupt (INTID in bits 9:0).
const GICC_IAR: usize = GICC + 0x00c;
/// GICC_EOIR: writing the acknowledged value ends it.
const GICC_EOIR: usize = GICC + 0x010;

/// The INTID GICC_IAR returns when nothing is pending.
pub const SPURIOUS: u32 = 1023;

fn write(addr: usize, v: u32) {
    // SAFETY: `addr` is one of the GIC registers above, mapped as device memory by the entry
    // code; this kernel is the GIC's only user, and 32-bit accesses are what the GICv2 takes.
    unsafe { core::ptr::write_volatile(addr as *mut u32, v) }
}

fn read(addr: usize) -> u32 {
    // SAFETY: as in `write`.
    unsafe { core::ptr::read_volatile(addr as *const u32) }
}

/// Turns the distributor and this CPU's interface on and enables `intid` (a PPI: 16..=31,
/// level-sensitive by the architecture) at a middle priority.
pub fn enable_ppi(intid: u32) {
    let intid = intid & 31;
    let shift = (intid % 4) * 8;
    let reg = GICD_IPRIORITYR + (intid / 4 * 4) as usize;
    write(reg, (read(reg) & !(0xff << shift)) | (0x80 << shift));
    write(GICD_ISENABLER, 1 << intid);
    write(GICD_CTLR, 1);
    write(GICC_PMR, 0xff);
    write(GICC_CTLR, 1);
}

/// Acknowledges the highest-priority pending interrupt: the value to pass to [`end`], whose
/// low 10 bits are the INTID ([`SPURIOUS`]: none).
pub fn acknowledge() -> u32 {
    read(GICC_IAR)
}

/// Ends the interrupt [`acknowledge`] returned.
pub fn end(iar: u32) {
    write(GICC_EOIR, iar);
}
