//! [`Hpet`]: the High Precision Event Timer's main counter.
//!
//! The HPET's MMIO base is in the ACPI `HPET` table (the generic address at offset 44); on PCs
//! and in QEMU it is 0xFED0_0000. Its capabilities register states the counter period in
//! femtoseconds, so its rate needs no table.

use core::fmt;
use core::ptr;

use crate::tolerance::HPET_TOLERANCE_PPB;
use baretime::Reference;
use baretime::{Accuracy, Frequency, Source};

/// General capabilities and ID: period in bits 63:32, COUNT_SIZE_CAP in bit 13.
const CAPABILITIES: usize = 0x000;
/// General configuration: ENABLE_CNF in bit 0.
const CONFIGURATION: usize = 0x010;
/// Main counter value.
const MAIN_COUNTER: usize = 0x0F0;
const ENABLE_CNF: u64 = 1;
const COUNT_SIZE_CAP: u64 = 1 << 13;
/// The specification's longest period: 100 ns (a 10 MHz counter).
const MAX_PERIOD_FS: u32 = 100_000_000;
const FS_PER_S_TIMES_MILLI: u64 = 1_000_000_000_000_000_000; // 10^15 fs/s × 10^3 mHz/Hz

/// Why [`Hpet::new`] refused the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum HpetError {
    /// The capabilities register reads all ones or all zeros: nothing answers at the address.
    NoDevice,
    /// The period is 0 or longer than the specification's 100 ns (value in femtoseconds).
    BadPeriod(u32),
}

impl fmt::Display for HpetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HpetError::NoDevice => f.write_str("no HPET at this address"),
            HpetError::BadPeriod(fs) => write!(f, "HPET period {fs} fs is outside 1..=100 ns"),
        }
    }
}

impl core::error::Error for HpetError {}

/// The HPET main counter as a 32-bit [`Reference`] at the rate its capabilities state.
///
/// It reads only the low 32 bits of the main counter, as Linux's HPET clocksource does: one
/// 32-bit MMIO read cannot tear, while a 64-bit read may be split into two halves by the CPU,
/// the bus or an emulator (QEMU's HPET implements 4-byte accesses only) and then be off by
/// 2^32 ticks. The calibrator unwraps the 32-bit count; the wrap period is 300 s at the PC's
/// 14.318 MHz and 43 s at QEMU's 100 MHz.
///
/// The rate is `10^15 / period` Hz from the period in femtoseconds, as the hardware states
/// it; the oscillator behind it may miss it by the specification's ±500 ppm, so the rate is
/// stated as [`Accuracy::Nominal`] with a tolerance of 500 ppm, which calibration adds to
/// its bound: an HPET a few hundred ppm off neither makes a measurement look better than it
/// is nor overrules an exact CPUID 0x15 claim (Linux, too, trusts 0x15 over an HPET
/// calibration). State a tighter tolerance with [`baretime::WithAccuracy`] when the board's
/// is known.
///
/// A kernel takes the HPET where ACPI lists one and the PIT otherwise (`no_run`: both need
/// ring 0 and the hardware):
///
/// ```no_run
/// # #[cfg(target_arch = "x86_64")] {
/// use baretime_x86::Tsc;
/// use baretime::{Calibration, CalibrationError, Config, calibrate};
/// use baretime_x86::{Hpet, Pit};
///
/// fn calibrate_tsc(tsc: Tsc, hpet_base: Option<usize>) -> Result<Calibration, CalibrationError> {
///     let config = Config::new();
///     // SAFETY: `base` is the ACPI HPET table's address, identity-mapped uncached, and this
///     // kernel owns the HPET during boot.
///     if let Some(Ok(hpet)) = hpet_base.map(|base| unsafe { Hpet::new(base) }) {
///         return calibrate(tsc, hpet, config);
///     }
///     // SAFETY: ring 0, interrupts masked, and nothing else uses PIT channel 2.
///     let pit = unsafe { Pit::new() };
///     calibrate(tsc, pit, config)
/// }
/// # let _ = calibrate_tsc(Tsc::probe().unwrap(), Some(0xfed0_0000));
/// # }
/// ```
#[derive(Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Hpet {
    base: usize,
    period_fs: u32,
    counter_64bit: bool,
    frequency: Frequency,
}

impl Hpet {
    /// Checks the HPET at MMIO address `base`, reads its period and enables its main counter
    /// (ENABLE_CNF; the legacy-replacement bit and the timers are left as they are).
    ///
    /// # Safety
    ///
    /// - `base` is the address, as this code sees it (identity-mapped or wherever the kernel
    ///   mapped it), of the HPET's 1 KiB register block on this machine (the ACPI `HPET`
    ///   table's address), mapped uncached (device memory) and readable and writable for as
    ///   long as the `Hpet` lives.
    /// - Enabling the main counter is acceptable to the rest of the system; an OS that owns
    ///   the HPET has it enabled anyway. Nobody else disables or rewrites the main counter
    ///   while the `Hpet` lives.
    pub unsafe fn new(base: usize) -> Result<Hpet, HpetError> {
        // Both registers are 64-bit, 8-byte aligned, and reading them has no side effect.
        // SAFETY: the caller guarantees `base` points at the HPET's registers, mapped as
        // device memory (# Safety).
        let caps = unsafe { ptr::read_volatile(base.wrapping_add(CAPABILITIES) as *const u64) };
        if caps == 0 || caps == u64::MAX {
            return Err(HpetError::NoDevice);
        }
        let period_fs = (caps >> 32) as u32;
        if period_fs == 0 || period_fs > MAX_PERIOD_FS {
            return Err(HpetError::BadPeriod(period_fs));
        }
        let period = u64::from(period_fs);
        let frequency = FS_PER_S_TIMES_MILLI
            .saturating_add(period / 2)
            .checked_div(period)
            .and_then(|millihz| {
                Frequency::from_millihz(
                    millihz,
                    Source::Reference,
                    Accuracy::Nominal {
                        tolerance_ppb: HPET_TOLERANCE_PPB,
                    },
                )
            })
            .ok_or(HpetError::BadPeriod(period_fs))?;
        // SAFETY: as above; the caller accepts that the main counter gets enabled. Only
        // ENABLE_CNF is set, every other configuration bit is written back as read.
        unsafe {
            let config = base.wrapping_add(CONFIGURATION) as *mut u64;
            let value = ptr::read_volatile(config);
            if value & ENABLE_CNF == 0 {
                ptr::write_volatile(config, value | ENABLE_CNF);
            }
        }
        Ok(Hpet {
            base,
            period_fs,
            counter_64bit: caps & COUNT_SIZE_CAP != 0,
            frequency,
        })
    }

    /// The counter period in femtoseconds, from the capabilities register.
    pub const fn period_fs(&self) -> u32 {
        self.period_fs
    }

    /// Whether the main counter has 64 bits (COUNT_SIZE_CAP); this type reads 32 either way.
    pub const fn counter_is_64bit(&self) -> bool {
        self.counter_64bit
    }
}

impl Reference for Hpet {
    /// The low 32 bits of the main counter (one 32-bit MMIO read).
    fn read(&mut self) -> u64 {
        // SAFETY: `new`'s contract keeps the register block mapped and the counter enabled;
        // the main counter's low half is a 4-byte aligned register without read side effects.
        let v = unsafe { ptr::read_volatile(self.base.wrapping_add(MAIN_COUNTER) as *const u32) };
        u64::from(v)
    }

    fn bits(&self) -> u32 {
        32
    }

    fn frequency(&self) -> Frequency {
        self.frequency
    }

    fn name(&self) -> &'static str {
        "hpet"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake register block in memory: capabilities, configuration, counter.
    #[repr(C, align(1024))]
    struct Regs([u64; 32]);

    #[test]
    fn reads_period_enables_and_counts() {
        let mut regs = Regs([0; 32]);
        regs.0[0] = (10_000_000u64 << 32) | COUNT_SIZE_CAP | 0x8086_a201; // QEMU: 10 ns
        regs.0[0xF0 / 8] = 0x1234_5678_9abc_def0;
        let base = regs.0.as_mut_ptr() as usize;
        // SAFETY: `base` points at a live, writable 256-byte block standing in for the HPET.
        let mut hpet = unsafe { Hpet::new(base) }.unwrap();
        assert_eq!(hpet.frequency().as_hz(), 100_000_000);
        assert_eq!(
            hpet.frequency().accuracy(),
            Accuracy::Nominal {
                tolerance_ppb: 500_000
            }
        );
        assert_eq!(hpet.period_fs(), 10_000_000);
        assert!(hpet.counter_is_64bit());
        assert_eq!(hpet.read(), 0x9abc_def0);
        assert_eq!(hpet.bits(), 32);
        assert_eq!(regs.0[2] & ENABLE_CNF, ENABLE_CNF);
    }

    #[test]
    fn rejects_missing_device_and_bad_period() {
        for (caps, err) in [
            (0, HpetError::NoDevice),
            (u64::MAX, HpetError::NoDevice),
            (1, HpetError::BadPeriod(0)),
            (
                ((MAX_PERIOD_FS as u64) + 1) << 32,
                HpetError::BadPeriod(MAX_PERIOD_FS + 1),
            ),
            // 1 fs would be 10^15 Hz: beyond Frequency's range.
            (1 << 32, HpetError::BadPeriod(1)),
        ] {
            let mut regs = Regs([0; 32]);
            regs.0[0] = caps;
            // SAFETY: a live, writable fake register block.
            let r = unsafe { Hpet::new(regs.0.as_mut_ptr() as usize) };
            assert_eq!(r.unwrap_err(), err);
        }
        // The PC's 14.318 MHz HPET: 69 841 279 fs.
        let mut regs = Regs([0; 32]);
        regs.0[0] = 69_841_279u64 << 32;
        // SAFETY: a live, writable fake register block.
        let hpet = unsafe { Hpet::new(regs.0.as_mut_ptr() as usize) }.unwrap();
        assert_eq!(hpet.frequency().as_hz(), 14_318_180);
    }
}
