//! Finding the timers through ACPI: RSDP → RSDT/XSDT → FADT (PM timer port and width, the
//! RTC's century register) and
//! the HPET table (MMIO base). Physical memory is identity-mapped, so a table's physical
//! address is a pointer.

use core::ptr;

/// What the firmware's ACPI tables say about the platform timers.
#[derive(Clone, Copy, Debug, Default)]
pub struct Timers {
    /// ACPI PM timer: I/O port and whether it has 32 bits (FADT `TMR_VAL_EXT`).
    pub pm_timer: Option<(u16, bool)>,
    /// HPET register block, physical address.
    pub hpet: Option<u64>,
    /// The CMOS RTC's century register (FADT `CENTURY`, offset 108), where it is not 0.
    pub rtc_century: Option<u8>,
}

/// Reads the tables starting from the RSDP at `rsdp` (from the PVH start info), or, if that is
/// 0, from the RSDP found by scanning the BIOS area 0xE0000..0x100000 as the spec allows.
pub fn find_timers(rsdp: u64) -> Timers {
    let mut timers = Timers::default();
    let rsdp = if rsdp != 0 {
        rsdp
    } else {
        scan_for_rsdp().unwrap_or(0)
    };
    if !mapped(rsdp, 36) || bytes::<8>(rsdp) != *b"RSD PTR " {
        return timers;
    }
    // Revision 2+ has a 64-bit XSDT; older firmware only the 32-bit RSDT.
    let revision = read::<u8>(rsdp + 15);
    let xsdt = if revision >= 2 {
        read::<u64>(rsdp + 24)
    } else {
        0
    };
    let (root, entry_size) = match xsdt {
        0 => (u64::from(read::<u32>(rsdp + 16)), 4),
        x => (x, 8),
    };
    if !checksum_ok(root) {
        return timers;
    }
    let entries = (u64::from(read::<u32>(root + 4)).saturating_sub(36)) / entry_size;
    for i in 0..entries {
        let at = root + 36 + i * entry_size;
        let table = if entry_size == 8 {
            read::<u64>(at)
        } else {
            u64::from(read::<u32>(at))
        };
        if !checksum_ok(table) {
            continue;
        }
        match &bytes::<4>(table) {
            b"FACP" => {
                timers.pm_timer = pm_timer(table);
                if read::<u32>(table + 4) > 108 {
                    timers.rtc_century = Some(read::<u8>(table + 108)).filter(|r| *r != 0);
                }
            }
            // Base address: a generic address structure at offset 40, in memory space (0).
            b"HPET" if read::<u8>(table + 40) == 0 => timers.hpet = Some(read::<u64>(table + 44)),
            _ => {}
        }
    }
    timers
}

/// The PM timer from the FADT: `X_PM_TMR_BLK` (offset 208) when present and in I/O space,
/// else `PM_TMR_BLK` (offset 76); 32 bits when `Flags` (offset 112) has `TMR_VAL_EXT` (bit 8).
fn pm_timer(fadt: u64) -> Option<(u16, bool)> {
    let length = read::<u32>(fadt + 4);
    let extended = length >= 116 && read::<u32>(fadt + 112) & (1 << 8) != 0;
    let mut port = u64::from(read::<u32>(fadt + 76));
    if length >= 220 && read::<u8>(fadt + 208) == 1 {
        let x = read::<u64>(fadt + 212);
        if x != 0 {
            port = x;
        }
    }
    match u16::try_from(port) {
        Ok(p) if p != 0 => Some((p, extended)),
        _ => None,
    }
}

fn scan_for_rsdp() -> Option<u64> {
    (0xE_0000..0x10_0000u64)
        .step_by(16)
        .find(|&a| bytes::<8>(a) == *b"RSD PTR ")
}

/// Whether `len` bytes at `paddr` lie in the identity-mapped low 4 GiB (and not at 0).
fn mapped(paddr: u64, len: u64) -> bool {
    paddr != 0 && paddr.checked_add(len).is_some_and(|end| end <= 1 << 32)
}

/// An ACPI table's bytes (its length at offset 4) sum to 0 modulo 256.
fn checksum_ok(table: u64) -> bool {
    if !mapped(table, 36) {
        return false;
    }
    let len = read::<u32>(table + 4);
    if !(36..=1 << 20).contains(&len) || !mapped(table, u64::from(len)) {
        return false;
    }
    (0..u64::from(len)).fold(0u8, |sum, i| sum.wrapping_add(read::<u8>(table + i))) == 0
}

fn read<T: Copy>(paddr: u64) -> T {
    // SAFETY: the kernel identity-maps the low 4 GiB, where PC firmware puts its ACPI tables,
    // and only reads them; unaligned reads are fine for plain integers.
    unsafe { ptr::read_unaligned(paddr as *const T) }
}

fn bytes<const N: usize>(paddr: u64) -> [u8; N] {
    read::<[u8; N]>(paddr)
}
