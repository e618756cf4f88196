//! aarch64 generic-timer errata: the read paths Linux uses on counters that misread. The
//! public docs are on [`Erratum`]; the rules are pure functions over a "read the raw counter"
//! closure, compiled on every target and so tested on any host (the register reads live in
//! `generic_timer.rs`, aarch64 only).

use core::fmt;

use crate::discover::Midr;

/// Most read pairs the A-008585 workaround takes (Linux's figure).
pub(crate) const FSL_A008585_MAX_PAIRS: u32 = 200;
/// Most read pairs the HiSilicon 161010101 workaround takes (Linux's figure).
pub(crate) const HISILICON_161010101_MAX_PAIRS: u32 = 50;
/// Two reads of a HiSilicon 161010101 counter agree when the second is ahead by less than
/// this many ticks (Linux: `(new - old) >> 5 == 0`).
pub(crate) const HISILICON_161010101_AGREE_TICKS: u64 = 32;
/// Most reads the Allwinner A64 workaround takes: Linux's bound, the CPU cycles in three
/// periods of the 24 MHz counter.
pub(crate) const SUN50I_UNKNOWN1_MAX_READS: u32 = 150;
/// The low bits that read as all ones or all zeros on an Allwinner A64 while a higher bit
/// rolls over (mainline Linux's 9 bits, `GENMASK(8, 0)`).
pub(crate) const SUN50I_UNKNOWN1_LOW_MASK: u64 = 0x1FF;
/// The bit whose change between two reads the Cortex-A73 858921 workaround looks at.
pub(crate) const ARM_858921_BIT: u32 = 32;

/// MIDR_EL1 implementer code of Arm.
const MIDR_IMPLEMENTER_ARM: u8 = 0x41;
/// MIDR_EL1 part number of the Cortex-A73.
const MIDR_PART_CORTEX_A73: u16 = 0xD09;

/// A generic-timer erratum whose read workaround this crate implements.
///
/// Four silicon bugs make `MRS CNTVCT_EL0` return a wrong value now and then. Linux carries a
/// workaround for each in `drivers/clocksource/arm_arch_timer.c`; [`Erratum::read`] implements
/// the same rules, with the same retry bounds, over any "read the raw counter" closure, and
/// [`GenericTimer`]'s [`Counter`](baretime::Counter) implementations apply the selected one.
///
/// | erratum | parts | the bug | the workaround (Linux's) | bound |
/// | --- | --- | --- | --- | --- |
/// | [`FslA008585`](Erratum::FslA008585) | NXP/Freescale LS1043A, LS2080A, … | a read returns a garbage value, once | read pairs until the two reads of a pair agree; return that value | 200 pairs |
/// | [`Hisilicon161010101`](Erratum::Hisilicon161010101) | HiSilicon Hip05, Hip06, Hip07 | a read is off by a multiple of 32 | read pairs until the second is ahead of the first by less than 32 (wrapping); return the second | 50 pairs |
/// | [`Arm858921`](Erratum::Arm858921) | Arm Cortex-A73, every revision | a read as bit 32 carries gets the new high word with the old low word | read twice; if bit 32 differs, return the first, else the second | 2 reads |
/// | [`Sun50iUnknown1`](Erratum::Sun50iUnknown1) | Allwinner A64 | while bit 10 or above rolls over, the low bits read as all ones or all zeros (7ff → 000 → 800, or 7ff → fff → 800) | read until the low 9 bits are neither all ones nor all zeros | 150 reads |
///
/// # Selecting one
///
/// Only 858921 can be told from the CPU itself: [`Erratum::for_midr`] (MIDR_EL1 implementer
/// 0x41, part 0xD09), which [`GenericTimer::new`] applies by itself. The other three are
/// properties of the SoC, not of its CPU cores (an A-008585 LS1043A has ordinary Cortex-A53
/// cores), so nothing a CPU register says identifies them: the caller selects them from what
/// firmware says, as Linux does — the devicetree timer node's boolean property
/// ([`Erratum::devicetree_property`], [`Erratum::from_devicetree_property`]), or for HiSilicon
/// the ACPI GTDT's OEM identity ([`Erratum::from_acpi_oem`]) — with
/// [`GenericTimer::with_erratum`].
///
/// 858921 is per core: on a big.LITTLE part with Cortex-A73 and Cortex-A53 cores only the
/// A73s need it, and [`GenericTimer::new`] only sees the core it runs on. A counter that may
/// be read on any core (a `Clock` in a `static`) should select it if any core needs it; it is
/// cheap (one extra read, no loop) and harmless elsewhere, which is why
/// [`GenericTimer::any_core`] selects it.
///
/// # When the bound is hit
///
/// The loops are bounded, as Linux's are ("well beyond the highest number of iterations the
/// loop has been observed to take"): a workaround never spins for ever on a counter that
/// misbehaves worse than its erratum. When the bound is hit the result is defined: the last
/// value read, which is what Linux returns too (after a one-time warning); [`Erratum::read`]
/// says so with [`ErratumRead::settled`]` == false` so a caller can count or report it. Such
/// a value is not trustworthy; a `Clock` on it never goes back, but may jump ahead.
///
/// # How this differs from Linux
///
/// The rules and bounds are Linux's; what Linux does around them (per-CPU selection through
/// CPU capabilities, a `WARN_ON_ONCE`, the timer-value (`TVAL`) reads that need the same
/// treatment) is the caller's. For the Allwinner erratum Linux has used three conditions over
/// time: low 10 bits all ones or zeros (2019), low 9 bits (2021, mainline since: some chips
/// were seen with only the low 9 bits anomalous), and in some trees "low 10 bits and the
/// value went back". This crate uses mainline's 9-bit rule without the direction test: a
/// forward glitch (7ff → fff) does not go back, but the next correct read does, so a
/// direction test lets every forward glitch through.
///
/// ```
/// use baretime_aarch64::Erratum;
/// use core::cell::Cell;
///
/// // A counter whose second read is garbage: A-008585's workaround reads on until two agree.
/// let reads = [100, 0xdead_beef, 101, 101];
/// let i = Cell::new(0);
/// let raw = || { let v = reads[i.get()]; i.set(i.get() + 1); v };
/// assert_eq!(Erratum::FslA008585.read(raw).ticks, 101);
/// assert_eq!(Erratum::from_devicetree_property("fsl,erratum-a008585"), Some(Erratum::FslA008585));
/// ```
///
/// [`GenericTimer`]: crate::GenericTimer
/// [`GenericTimer::new`]: crate::GenericTimer::new
/// [`GenericTimer::with_erratum`]: crate::GenericTimer::with_erratum
/// [`GenericTimer::any_core`]: crate::GenericTimer::any_core
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Erratum {
    /// Freescale/NXP A-008585 (LS1043A, LS2080A): a read may return a garbage value. Read
    /// pairs until both reads of a pair agree, at most 200 pairs.
    FslA008585,
    /// HiSilicon 161010101 (Hip05/06/07): a read may be off by a multiple of 32. Read pairs
    /// until the second is less than 32 ticks ahead of the first, at most 50 pairs.
    Hisilicon161010101,
    /// Arm 858921 (Cortex-A73, all revisions): a read as bit 32 carries may be wrong. Read
    /// twice and take the first if bit 32 differs, else the second.
    Arm858921,
    /// Allwinner A64 ("sun50i erratum UNKNOWN1"): while bit 10 or above rolls over the low
    /// bits read as all ones or all zeros. Read until the low 9 bits are neither, at most 150
    /// reads.
    Sun50iUnknown1,
}

impl Erratum {
    /// Every erratum this crate knows.
    pub const ALL: [Erratum; 4] = [
        Erratum::FslA008585,
        Erratum::Hisilicon161010101,
        Erratum::Arm858921,
        Erratum::Sun50iUnknown1,
    ];

    /// A short token: `fsl_a008585`, `hisilicon_161010101`, `arm_858921`, `sun50i_unknown1`.
    pub const fn token(self) -> &'static str {
        match self {
            Erratum::FslA008585 => "fsl_a008585",
            Erratum::Hisilicon161010101 => "hisilicon_161010101",
            Erratum::Arm858921 => "arm_858921",
            Erratum::Sun50iUnknown1 => "sun50i_unknown1",
        }
    }

    /// The boolean property of the devicetree timer node (`compatible = "arm,armv8-timer"`)
    /// that declares the erratum, as Linux reads it; `None` for 858921, which is found from
    /// MIDR_EL1 instead.
    pub const fn devicetree_property(self) -> Option<&'static str> {
        match self {
            Erratum::FslA008585 => Some("fsl,erratum-a008585"),
            Erratum::Hisilicon161010101 => Some("hisilicon,erratum-161010101"),
            Erratum::Arm858921 => None,
            Erratum::Sun50iUnknown1 => Some("allwinner,erratum-unknown1"),
        }
    }

    /// The erratum a devicetree timer-node property declares, if it is one of these.
    pub fn from_devicetree_property(name: &str) -> Option<Erratum> {
        Erratum::ALL
            .into_iter()
            .find(|e| e.devicetree_property() == Some(name))
    }

    /// HiSilicon 161010101 if the ACPI GTDT's header names a Hip05, Hip06 or Hip07 (OEM ID
    /// `"HISI  "`, OEM table ID `"HIP05   "`/`"HIP06   "`/`"HIP07   "`, revision 0), as
    /// Linux matches it on ACPI systems; else `None`.
    pub fn from_acpi_oem(
        oem_id: &[u8; 6],
        oem_table_id: &[u8; 8],
        oem_revision: u32,
    ) -> Option<Erratum> {
        let hip = matches!(oem_table_id, b"HIP05   " | b"HIP06   " | b"HIP07   ");
        (oem_id == b"HISI  " && hip && oem_revision == 0).then_some(Erratum::Hisilicon161010101)
    }

    /// The erratum a CPU core has by its MIDR_EL1: 858921 on every Cortex-A73 (implementer
    /// 0x41, part 0xD09, any variant and revision, as Linux matches it); else `None`.
    pub const fn for_midr(midr: &Midr) -> Option<Erratum> {
        if midr.implementer == MIDR_IMPLEMENTER_ARM && midr.part == MIDR_PART_CORTEX_A73 {
            Some(Erratum::Arm858921)
        } else {
            None
        }
    }

    /// Reads a counter through `raw` with this erratum's workaround, and says how many raw
    /// reads it took and whether the retry bound was hit (the type docs give each rule and
    /// bound).
    ///
    /// `raw` is one read of the counter as the hardware gives it (CNTVCT_EL0, CNTPCT_EL0, a
    /// model of either); it is called at least once and at most [`Erratum::max_reads`] times.
    /// Pure and bounded: no panics, no unbounded loops.
    ///
    /// ```
    /// use baretime_aarch64::Erratum;
    ///
    /// // 858921: bit 32 carried between the two reads, so the first one is taken.
    /// let mut reads = [0xFFFF_FFFF, 0x1_0000_0001].into_iter();
    /// let r = Erratum::Arm858921.read(|| reads.next().unwrap_or(0));
    /// assert_eq!((r.ticks, r.reads, r.settled), (0xFFFF_FFFF, 2, true));
    /// ```
    #[inline]
    pub fn read(self, raw: impl FnMut() -> u64) -> ErratumRead {
        read_counted(self, raw)
    }

    /// The most raw reads one workaround read takes.
    pub const fn max_reads(self) -> u32 {
        match self {
            Erratum::FslA008585 => FSL_A008585_MAX_PAIRS.saturating_mul(2),
            Erratum::Hisilicon161010101 => HISILICON_161010101_MAX_PAIRS.saturating_mul(2),
            Erratum::Arm858921 => 2,
            Erratum::Sun50iUnknown1 => SUN50I_UNKNOWN1_MAX_READS,
        }
    }
}

impl fmt::Display for Erratum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Erratum::FslA008585 => "Freescale/NXP erratum A-008585",
            Erratum::Hisilicon161010101 => "HiSilicon erratum 161010101",
            Erratum::Arm858921 => "Arm Cortex-A73 erratum 858921",
            Erratum::Sun50iUnknown1 => "Allwinner A64 erratum UNKNOWN1",
        })
    }
}

/// What one workaround read gave ([`Erratum::read`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ErratumRead {
    /// The value to use.
    pub ticks: u64,
    /// Raw reads taken, 1..=[`Erratum::max_reads`].
    pub reads: u32,
    /// `false` when the retry bound was hit: `ticks` is then the last value read (Linux's
    /// choice too) and not known to be right.
    pub settled: bool,
}

/// [`Erratum::read`]'s value alone: the `Counter` implementations' path.
#[cfg(any(test, target_arch = "aarch64"))]
#[inline(always)]
pub(crate) fn read_with(erratum: Erratum, raw: impl FnMut() -> u64) -> u64 {
    read_counted(erratum, raw).ticks
}

/// See [`Erratum::read`].
#[inline]
fn read_counted(erratum: Erratum, mut raw: impl FnMut() -> u64) -> ErratumRead {
    match erratum {
        Erratum::FslA008585 => read_pairs(FSL_A008585_MAX_PAIRS, raw, |old, new| old == new),
        Erratum::Hisilicon161010101 => {
            read_pairs(HISILICON_161010101_MAX_PAIRS, raw, |old, new| {
                new.wrapping_sub(old) < HISILICON_161010101_AGREE_TICKS
            })
        }
        Erratum::Arm858921 => {
            let old = raw();
            let new = raw();
            let carried = (old ^ new) >> ARM_858921_BIT & 1 != 0;
            ErratumRead {
                ticks: if carried { old } else { new },
                reads: 2,
                settled: true,
            }
        }
        Erratum::Sun50iUnknown1 => {
            let mut reads = 0u32;
            let mut value = 0;
            while reads < SUN50I_UNKNOWN1_MAX_READS {
                value = raw();
                reads = reads.saturating_add(1);
                // Low 9 bits all ones (v + 1 ≡ 0) or all zeros (v + 1 ≡ 1): indeterminate.
                if value.wrapping_add(1) & SUN50I_UNKNOWN1_LOW_MASK > 1 {
                    return ErratumRead {
                        ticks: value,
                        reads,
                        settled: true,
                    };
                }
            }
            ErratumRead {
                ticks: value,
                reads,
                settled: false,
            }
        }
    }
}

/// Reads pairs `(old, new)` until `agree(old, new)`, at most `max_pairs`; returns `new`.
#[inline(always)]
fn read_pairs(
    max_pairs: u32,
    mut raw: impl FnMut() -> u64,
    agree: impl Fn(u64, u64) -> bool,
) -> ErratumRead {
    let mut reads = 0u32;
    let mut new = 0;
    for _ in 0..max_pairs {
        let old = raw();
        new = raw();
        reads = reads.saturating_add(2);
        if agree(old, new) {
            return ErratumRead {
                ticks: new,
                reads,
                settled: true,
            };
        }
    }
    ErratumRead {
        ticks: new,
        reads,
        settled: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::cell::Cell;
    use std::format;

    /// A raw read that plays back `values`, then repeats the last one.
    fn playback(values: &[u64]) -> impl FnMut() -> u64 + '_ {
        let mut n = 0;
        move || {
            let v = values[n.min(values.len() - 1)];
            n += 1;
            v
        }
    }

    #[test]
    fn fsl_reads_pairs_until_they_agree() {
        let r = read_counted(Erratum::FslA008585, playback(&[5, 900, 6, 6]));
        assert_eq!(
            r,
            ErratumRead {
                ticks: 6,
                reads: 4,
                settled: true
            }
        );
        // A pair is two fresh reads: the second read of a failed pair is not reused.
        let raw = playback(&[5, 6, 6, 7, 7]);
        assert_eq!(read_counted(Erratum::FslA008585, raw).ticks, 7);
    }

    #[test]
    fn fsl_bound_returns_the_last_read_unsettled() {
        let c = Cell::new(0u64);
        let raw = || {
            c.set(c.get() + 1);
            c.get()
        };
        let r = read_counted(Erratum::FslA008585, raw);
        assert_eq!(
            r,
            ErratumRead {
                ticks: 400,
                reads: 400,
                settled: false
            }
        );
        assert_eq!(Erratum::FslA008585.max_reads(), 400);
    }

    #[test]
    fn hisilicon_agrees_below_32_ahead_only() {
        let raw = playback(&[100, 131]);
        assert_eq!(read_counted(Erratum::Hisilicon161010101, raw).reads, 2);
        // 32 ahead: retried; behind (wraps to a huge difference): retried.
        let raw = playback(&[100, 132, 140, 139, 150, 151]);
        let r = read_counted(Erratum::Hisilicon161010101, raw);
        assert_eq!(
            r,
            ErratumRead {
                ticks: 151,
                reads: 6,
                settled: true
            }
        );
        // Across the u64 wrap, a small forward step agrees.
        let raw = playback(&[u64::MAX - 3, 5]);
        assert_eq!(read_counted(Erratum::Hisilicon161010101, raw).ticks, 5);
        let c = Cell::new(0u64);
        let r = read_counted(Erratum::Hisilicon161010101, || {
            c.set(c.get() + 32);
            c.get()
        });
        assert_eq!(
            r,
            ErratumRead {
                ticks: 3200,
                reads: 100,
                settled: false
            }
        );
    }

    #[test]
    fn a73_takes_the_first_read_when_bit_32_changed() {
        let raw = playback(&[0x1_FFFF_FFF0, 0x2_0000_0004]);
        assert_eq!(read_with(Erratum::Arm858921, raw), 0x1_FFFF_FFF0);
        let raw = playback(&[0x2_0000_0004, 0x2_0000_0008]);
        assert_eq!(read_with(Erratum::Arm858921, raw), 0x2_0000_0008);
        // Bit 33 changing alone (bit 32 did not) is not a bit-32 carry.
        let raw = playback(&[0x1_0000_0000, 0x3_0000_0000]);
        assert_eq!(read_with(Erratum::Arm858921, raw), 0x3_0000_0000);
    }

    #[test]
    fn a64_skips_low_bits_all_ones_or_zeros() {
        let r = read_counted(Erratum::Sun50iUnknown1, playback(&[0x7FF, 0xC00, 0x801]));
        assert_eq!(
            r,
            ErratumRead {
                ticks: 0x801,
                reads: 3,
                settled: true
            }
        );
        // Nine bits, not ten: 0x200 has its low nine bits clear, 0x3FF all set.
        let raw = playback(&[0x200, 0x3FF, 0x1FF, 0x401]);
        assert_eq!(read_with(Erratum::Sun50iUnknown1, raw), 0x401);
        let raw = playback(&[u64::MAX, 0x400]);
        assert_eq!(read_counted(Erratum::Sun50iUnknown1, raw).reads, 150);
        let raw = playback(&[u64::MAX, 0x400]);
        assert!(!read_counted(Erratum::Sun50iUnknown1, raw).settled);
    }

    #[test]
    fn selection() {
        let a73 = Midr::from_bits(0x411F_D090); // Cortex-A73 r1p0
        assert_eq!(Erratum::for_midr(&a73), Some(Erratum::Arm858921));
        let a73_r0p2 = Midr::from_bits(0x410F_D092);
        assert_eq!(Erratum::for_midr(&a73_r0p2), Some(Erratum::Arm858921));
        let a53 = Midr::from_bits(0x410F_D034);
        assert_eq!(Erratum::for_midr(&a53), None);
        // Another implementer's part 0xD09 is not a Cortex-A73.
        assert_eq!(Erratum::for_midr(&Midr::from_bits(0x480F_D090)), None);
        for e in Erratum::ALL {
            if let Some(p) = e.devicetree_property() {
                assert_eq!(Erratum::from_devicetree_property(p), Some(e));
            }
            assert!(e.max_reads() >= 2 || e == Erratum::Sun50iUnknown1);
            assert!(!e.token().is_empty());
            assert!(!format!("{e}").is_empty());
        }
        assert_eq!(
            Erratum::from_devicetree_property("arm,no-tick-in-suspend"),
            None
        );
        assert_eq!(
            Erratum::from_acpi_oem(b"HISI  ", b"HIP06   ", 0),
            Some(Erratum::Hisilicon161010101)
        );
        assert_eq!(Erratum::from_acpi_oem(b"HISI  ", b"HIP08   ", 0), None);
        assert_eq!(Erratum::from_acpi_oem(b"HISI  ", b"HIP07   ", 1), None);
    }
}
