//! aarch64 discovery: CNTFRQ_EL0, MIDR_EL1 and ID_AA64MMFR0_EL1 (the public docs are on
//! [`Aarch64Discovery`]).

use baretime::{Accuracy, Frequency, Source};

/// Tolerance of CNTFRQ_EL0: when firmware programs it right it is the crystal's rate (about
/// ±100 ppm); when it programs it wrong, no tolerance helps and calibration must catch it.
const CNTFRQ_TOLERANCE_PPB: u64 = 1_000_000;

/// MIDR_EL1 decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Midr {
    /// Bits 31:24: implementer code (0x41 Arm, 0x51 Qualcomm, 0x61 Apple, …).
    pub implementer: u8,
    /// Bits 23:20: variant (the `r` of `rNpM`).
    pub variant: u8,
    /// Bits 19:16: architecture (0xF: by ID registers).
    pub architecture: u8,
    /// Bits 15:4: primary part number (0xD49: Neoverse N2).
    pub part: u16,
    /// Bits 3:0: revision (the `p` of `rNpM`).
    pub revision: u8,
}

impl Midr {
    /// Decodes the low 32 bits of MIDR_EL1 (the upper 32 are RES0).
    pub const fn from_bits(midr: u64) -> Midr {
        Midr {
            implementer: (midr >> 24) as u8,
            variant: ((midr >> 20) & 0xF) as u8,
            architecture: ((midr >> 16) & 0xF) as u8,
            part: ((midr >> 4) & 0xFFF) as u16,
            revision: (midr & 0xF) as u8,
        }
    }

    /// The implementer's name, for the codes Arm has assigned and this crate knows.
    pub const fn implementer_name(&self) -> Option<&'static str> {
        Some(match self.implementer {
            0x41 => "Arm",
            0x42 => "Broadcom",
            0x43 => "Cavium",
            0x46 => "Fujitsu",
            0x48 => "HiSilicon",
            0x4E => "NVIDIA",
            0x50 => "APM",
            0x51 => "Qualcomm",
            0x61 => "Apple",
            0x6D => "Microsoft",
            0xC0 => "Ampere",
            _ => return None,
        })
    }
}

/// Everything the aarch64 system registers say about the generic timer: [`from_registers`]
/// decodes three register values (a pure function, tested on any host), `discover()`
/// (aarch64 only) reads them from the running CPU.
///
/// CNTFRQ_EL0 is not a measurement: firmware writes it at boot, and nothing in the hardware
/// checks it. It is usually right (24 MHz, 25 MHz, 19.2 MHz, 1 GHz on Armv8.6+ parts with
/// FEAT_ECV's scaling), occasionally wildly wrong; hence [`Accuracy::Nominal`] (±1000 ppm)
/// until calibration has verified it. A value of 0 means "not programmed": no candidate.
///
/// ```
/// use baretime_aarch64::from_registers;
///
/// // A Neoverse N2 (MIDR 0x410FD493) whose firmware programmed 1 GHz; no FEAT_ECV.
/// let d = from_registers(1_000_000_000, 0x410F_D493, 0x0000_0111_FF00_0000);
/// assert_eq!(d.best().map(|f| f.as_hz()), Some(1_000_000_000));
/// assert_eq!((d.midr.implementer_name(), d.midr.part), (Some("Arm"), 0xD49));
/// assert!(!d.ecv());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct Aarch64Discovery {
    /// CNTFRQ_EL0 as read (bits 31:0 are the frequency in Hz, the rest RES0).
    pub cntfrq: u64,
    /// MIDR_EL1 as read.
    pub midr_raw: u64,
    /// MIDR_EL1 decoded.
    pub midr: Midr,
    /// ID_AA64MMFR0_EL1 as read (ECV, the field [`Aarch64Discovery::ecv`] decodes, is bits
    /// 63:60).
    pub id_aa64mmfr0: u64,
    candidate: Option<Frequency>,
}

impl Aarch64Discovery {
    /// The frequency candidates: CNTFRQ_EL0 when it is programmed (non-zero, in range).
    pub fn candidates(&self) -> &[Frequency] {
        self.candidate.as_slice()
    }

    /// The most trusted candidate (the only one: CNTFRQ_EL0).
    pub fn best(&self) -> Option<Frequency> {
        self.candidate
    }

    /// FEAT_ECV (ID_AA64MMFR0_EL1.ECV ≥ 1): the self-synchronised counter view CNTVCTSS_EL0
    /// exists, ordered without an ISB (what `GenericTimer::new` uses when it is there).
    pub const fn ecv(&self) -> bool {
        self.id_aa64mmfr0 >> 60 != 0
    }
}

/// Decodes the three registers. Pure: never reads hardware, never panics.
pub fn from_registers(cntfrq: u64, midr: u64, id_aa64mmfr0: u64) -> Aarch64Discovery {
    let hz = cntfrq & 0xFFFF_FFFF;
    let candidate = Frequency::from_hz(
        hz,
        Source::Cntfrq,
        Accuracy::Nominal {
            tolerance_ppb: CNTFRQ_TOLERANCE_PPB,
        },
    );
    Aarch64Discovery {
        cntfrq,
        midr_raw: midr,
        midr: Midr::from_bits(midr),
        id_aa64mmfr0,
        candidate,
    }
}

/// Reads CNTFRQ_EL0, MIDR_EL1 and ID_AA64MMFR0_EL1 from the running CPU and decodes them.
#[cfg(target_arch = "aarch64")]
pub fn discover() -> Aarch64Discovery {
    use crate::generic_timer::{read_cntfrq_el0, read_id_aa64mmfr0_el1, read_midr_el1};
    from_registers(read_cntfrq_el0(), read_midr_el1(), read_id_aa64mmfr0_el1())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn neoverse_n2_from_the_libcpuid_dump() {
        // arm_midr=00000000410fd493, arm_id_aa64mmfr0=00000111ff000000 (no ECV).
        let d = from_registers(1_000_000_000, 0x410F_D493, 0x0000_0111_FF00_0000);
        assert_eq!(
            d.midr,
            Midr {
                implementer: 0x41,
                variant: 0,
                architecture: 0xF,
                part: 0xD49,
                revision: 3
            }
        );
        assert_eq!(d.midr.implementer_name(), Some("Arm"));
        assert!(!d.ecv());
        let f = d.best().unwrap();
        assert_eq!(f.source(), Source::Cntfrq);
        assert_eq!(f.as_hz(), 1_000_000_000);
        assert!(!f.accuracy().is_exact());
        assert_eq!(d.candidates().len(), 1);
    }

    #[test]
    fn cntfrq_zero_or_out_of_range_gives_no_candidate() {
        assert_eq!(from_registers(0, 0, 0).best(), None);
        assert!(from_registers(0, 0, 0).candidates().is_empty());
        assert_eq!(from_registers(999, 0, 0).best(), None);
        // Only bits 31:0 hold the frequency.
        assert_eq!(from_registers(0xFFFF_FFFF_0000_0000, 0, 0).best(), None);
        assert_eq!(
            from_registers((1 << 40) | 24_000_000, 0, 0)
                .best()
                .unwrap()
                .as_hz(),
            24_000_000
        );
    }

    #[test]
    fn ecv_levels() {
        assert!(from_registers(0, 0, 1 << 60).ecv());
        assert!(from_registers(0, 0, 2 << 60).ecv());
        assert!(from_registers(0, 0, 0xF << 60).ecv());
        assert!(!from_registers(0, 0, (1 << 60) - 1).ecv());
    }

    #[cfg(target_arch = "aarch64")]
    #[test]
    fn live_registers() {
        // Under Linux (and qemu-user) the ID registers are emulated at EL0; CNTFRQ_EL0 is set.
        let d = discover();
        assert!(d.best().is_some(), "{d:?}");
        assert_eq!(d.midr, Midr::from_bits(d.midr_raw));
    }

    #[test]
    fn midr_fields() {
        // Apple M1 Firestorm: 0x611F0230? implementer 0x61, variant 1, part 0x023, rev 0.
        let m = Midr::from_bits(0x611F_0230);
        assert_eq!(
            (m.implementer, m.variant, m.part, m.revision),
            (0x61, 1, 0x023, 0)
        );
        assert_eq!(m.implementer_name(), Some("Apple"));
        assert_eq!(Midr::from_bits(0).implementer_name(), None);
        assert_eq!(Midr::from_bits(u64::MAX).part, 0xFFF);
    }
}
