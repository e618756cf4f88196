//! [`AcpiPmTimer`]: the ACPI power-management timer, a free-running 3.579545 MHz counter.
//!
//! Every ACPI PC has one. Its I/O port is in the FADT: `PM_TMR_BLK` (offset 76), or the
//! `X_PM_TMR_BLK` generic address (offset 208) when that is an I/O-space address; bit 8 of
//! the FADT's `Flags` (offset 112), `TMR_VAL_EXT`, says whether it has 32 bits instead of 24.
//! QEMU's i440fx and q35 machines put it at port 0x608.

use crate::port::inl;
use crate::tolerance::ACPI_PM_TOLERANCE_PPB;
use baretime::Reference;
use baretime::Width;
use baretime::{Accuracy, Frequency, Source};

/// The PM timer's rate: the NTSC colour-burst crystal, 315/88 MHz = 3 579 545.45… Hz, given
/// to the millihertz.
pub(crate) const ACPI_PM_MILLIHZ: u64 = 3_579_545_454;

const ACPI_PM_FREQUENCY: Frequency = const_frequency!(
    millihz: ACPI_PM_MILLIHZ,
    Source::Reference,
    Accuracy::Nominal {
        tolerance_ppb: ACPI_PM_TOLERANCE_PPB,
    }
);

/// How many extra reads [`AcpiPmTimer`] makes, at most, looking for three monotonic ones.
const MAX_EXTRA_READS: u32 = 8;

/// The ACPI PM timer as a 24- or 32-bit [`Reference`] at 3.579545 MHz.
///
/// Some chipsets (Intel PIIX4 and ICH4-M among them, per Linux's `acpi_pm.c`) do not latch
/// the counter while it is read, so a read can return a value whose bytes come from two
/// different counts. [`Reference::read`] therefore reads until three consecutive values are
/// in order (each a short step forward from the one before, modulo the wrap) and returns the
/// middle one. It gives up after a few extra reads and returns the last middle value, so a
/// read never hangs: a timer that never settles shows up as a calibration error instead.
///
/// The rate is the ACPI specification's, but the crystal behind it is a board's, with the
/// usual tolerance of tens of ppm: the rate is stated as [`Accuracy::Nominal`] with a
/// tolerance of 100 ppm, which calibration adds to its bound, so that a timer
/// 50 ppm fast neither makes a measurement look better than it is nor overrules an exact
/// CPUID 0x15 claim. State a tighter (or looser) tolerance with [`baretime::WithAccuracy`]
/// when the board's is known. (QEMU emulates the timer at 3 579 545 Hz.)
#[derive(Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct AcpiPmTimer {
    port: u16,
    bits: u32,
}

/// How wide the PM timer's counter is: the FADT's `Flags` bit 8, `TMR_VAL_EXT`, says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum AcpiPmWidth {
    /// `TMR_VAL_EXT` clear: a 24-bit counter (wraps every 4.7 s).
    Bits24,
    /// `TMR_VAL_EXT` set: a 32-bit counter (wraps every 20 min).
    Bits32,
}

impl AcpiPmTimer {
    /// The PM timer at I/O port `port`, `width` wide (the FADT's `TMR_VAL_EXT`).
    ///
    /// ```no_run
    /// # #[cfg(target_arch = "x86_64")] {
    /// use baretime_x86::{AcpiPmTimer, AcpiPmWidth};
    /// // QEMU's i440fx and q35: port 0x608, TMR_VAL_EXT set.
    /// // SAFETY: ring 0, and the FADT gives this port.
    /// let pm = unsafe { AcpiPmTimer::new(0x608, AcpiPmWidth::Bits32) };
    /// # let _ = pm;
    /// # }
    /// ```
    ///
    /// # Safety
    ///
    /// - `port` is the PM timer's port as the FADT gives it, on this machine.
    /// - The CPU runs with I/O privilege for `port` (CPL 0, IOPL 3, or an I/O bitmap that
    ///   allows it) for as long as the `AcpiPmTimer` lives.
    ///
    /// Reading the PM timer has no side effects, so sharing it with other readers is fine.
    pub unsafe fn new(port: u16, width: AcpiPmWidth) -> AcpiPmTimer {
        AcpiPmTimer {
            port,
            bits: match width {
                AcpiPmWidth::Bits24 => 24,
                AcpiPmWidth::Bits32 => 32,
            },
        }
    }

    /// The I/O port the timer is read from.
    pub const fn port(&self) -> u16 {
        self.port
    }

    /// One raw read of the counter, masked to its width: no check that it was latched.
    pub(crate) fn read_raw(&mut self) -> u64 {
        // SAFETY: `new`'s contract: `port` is the PM timer's and we have I/O privilege for it.
        // Reading the PM timer has no side effects.
        let v = unsafe { inl(self.port) };
        Width::new(self.bits).value(u64::from(v))
    }
}

/// True when `a, b, c` are in order modulo `mask + 1`: each step forward is short (less than
/// a quarter of the range), so a value from a torn read, which lands off by a whole byte's
/// worth of counts in either direction, breaks the chain.
fn in_order(a: u64, b: u64, c: u64, width: Width) -> bool {
    let short = width.half() >> 1;
    width.delta(a, b) <= short && width.delta(b, c) <= short
}

impl Reference for AcpiPmTimer {
    /// The middle one of the first three consecutive reads that are in order (see the type's
    /// documentation).
    fn read(&mut self) -> u64 {
        let width = Width::new(self.bits);
        let mut a = self.read_raw();
        let mut b = self.read_raw();
        for _ in 0..MAX_EXTRA_READS {
            let c = self.read_raw();
            if in_order(a, b, c, width) {
                return b;
            }
            a = b;
            b = c;
        }
        b
    }

    fn bits(&self) -> u32 {
        self.bits
    }

    fn frequency(&self) -> Frequency {
        ACPI_PM_FREQUENCY
    }

    fn name(&self) -> &'static str {
        "acpi_pm"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_is_colour_burst() {
        assert_eq!(ACPI_PM_FREQUENCY.as_millihz(), 315_000_000_000 / 88);
        assert_eq!(ACPI_PM_FREQUENCY.as_hz(), 3_579_545);
        assert_eq!(
            ACPI_PM_FREQUENCY.accuracy(),
            Accuracy::Nominal {
                tolerance_ppb: 100_000
            }
        );
    }

    #[test]
    fn order_check_handles_wrap_and_torn_reads() {
        let m24 = Width::new(24);
        assert!(in_order(10, 11, 13, m24));
        assert!(in_order(10, 10, 10, m24));
        // Across the 24-bit wrap.
        assert!(in_order(0xff_fffe, 0xff_ffff, 0x00_0001, m24));
        // A torn read: high byte already incremented, low byte not yet wrapped (ahead by 256).
        assert!(!in_order(0x00_12ff, 0x00_13ff, 0x00_1300, m24));
        // A torn read behind (high byte not yet incremented, low byte wrapped).
        assert!(!in_order(0x00_12ff, 0x00_1200, 0x00_1301, m24));
        // Backwards at the first step.
        assert!(!in_order(0x00_1300, 0x00_12ff, 0x00_1301, m24));
        let m32 = Width::new(32);
        assert!(in_order(0xffff_fff0, 0xffff_ffff, 0x10, m32));
        assert!(!in_order(0x10, 0x0f, 0x11, m32));
    }
}
