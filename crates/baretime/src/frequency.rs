//! [`Frequency`], with its [`Source`] and [`Accuracy`]. Private: all three are re-exported at
//! the crate root.

use core::fmt;

/// Where a frequency figure came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Source {
    /// CPUID leaf 0x15 with all three fields: crystal Hz × EBX / EAX. Exact.
    CpuidTscLeaf,
    /// CPUID leaf 0x15 ratio with the crystal frequency taken from a table of known models.
    CpuidTscLeafKnownCrystal,
    /// CPUID leaf 0x15 ratio with the crystal derived from leaf 0x16's base frequency.
    CpuidTscLeafDerivedCrystal,
    /// CPUID leaf 0x16 EAX: the processor base frequency in MHz.
    CpuidBaseFrequency,
    /// Hypervisor timing leaf 0x40000010 EAX: the TSC frequency in kHz (VMware, KVM, …).
    HypervisorLeaf,
    /// Xen's time leaf (0x40000003 or 0x40000103, sub-leaf 0) ECX: the guest TSC frequency
    /// in kHz, as Xen states it. [`Accuracy::Exact`] to its 1 kHz unit
    /// ([`Source::resolution_hz`]): Xen sets the guest's rate and states it, rounded to kHz.
    XenTimeLeaf,
    /// The `@ x.xxGHz` suffix of the CPUID brand string.
    BrandString,
    /// KVM's pvclock area (`tsc_to_system_mul`, `tsc_shift`), registered by a ring-0 kernel
    /// through MSR_KVM_SYSTEM_TIME(_NEW): the hypervisor's figure, to the encoding's
    /// resolution (≈ 2 ppb; baretime-x86 decodes it).
    KvmPvclock,
    /// Hyper-V's `HV_X64_MSR_TSC_FREQUENCY` (0x40000022), read by a ring-0 kernel: in Hz.
    HyperVTscFrequencyMsr,
    /// aarch64 CNTFRQ_EL0, as programmed by firmware.
    Cntfrq,
    /// Measured by calibration against a reference timer.
    Calibrated,
    /// A reference timer's nominal rate (PIT, ACPI PM timer, HPET period, …).
    Reference,
    /// Supplied by the caller.
    User,
}

impl Source {
    /// A short stable token for logs and `key=value` output.
    pub const fn token(self) -> &'static str {
        match self {
            Source::CpuidTscLeaf => "cpuid_15h",
            Source::CpuidTscLeafKnownCrystal => "cpuid_15h_known_crystal",
            Source::CpuidTscLeafDerivedCrystal => "cpuid_15h_derived_crystal",
            Source::CpuidBaseFrequency => "cpuid_16h",
            Source::HypervisorLeaf => "hypervisor_40000010h",
            Source::XenTimeLeaf => "xen_time_leaf",
            Source::BrandString => "brand_string",
            Source::KvmPvclock => "kvm_pvclock",
            Source::HyperVTscFrequencyMsr => "hyperv_tsc_frequency_msr",
            Source::Cntfrq => "cntfrq_el0",
            Source::Calibrated => "calibrated",
            Source::Reference => "reference",
            Source::User => "user",
        }
    }
}

impl Source {
    /// The unit the source states its figure in, in Hz: a claim is exact only to within one
    /// such unit (a hypervisor's kHz figure may be rounded or truncated). 0 where the unit is
    /// finer than a millihertz or the source states no unit of its own.
    ///
    /// ```
    /// use baretime::Source;
    /// assert_eq!(Source::XenTimeLeaf.resolution_hz(), 1_000);
    /// assert_eq!(Source::CpuidTscLeaf.resolution_hz(), 0);
    /// ```
    pub const fn resolution_hz(self) -> u64 {
        match self {
            // pvclock encodes the hypervisor's kHz figure (KVM's tsc_khz).
            Source::HypervisorLeaf | Source::XenTimeLeaf | Source::KvmPvclock => 1_000,
            Source::HyperVTscFrequencyMsr => 1,
            Source::CpuidBaseFrequency | Source::CpuidTscLeafDerivedCrystal => 1_000_000,
            Source::BrandString => 10_000_000,
            Source::CpuidTscLeaf
            | Source::CpuidTscLeafKnownCrystal
            | Source::Cntfrq
            | Source::Calibrated
            | Source::Reference
            | Source::User => 0,
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.token())
    }
}

/// How far a frequency figure can be trusted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Accuracy {
    /// Exact by construction: the hardware or hypervisor states the rate itself.
    /// (It may still be *wrong*: verification compares it against a measurement.)
    Exact,
    /// A nominal figure (base frequency, brand string, firmware register) that the counter
    /// may miss by up to about this many parts per billion.
    Nominal {
        /// Expected worst-case deviation, in ppb (1000 ppb = 1 ppm), like every other
        /// accuracy figure in the crate.
        tolerance_ppb: u64,
    },
    /// Measured, with this uncertainty bound in parts per billion (for a calibration: an
    /// expanded bound with at least 99 % coverage, see [`crate::Calibration`]).
    Measured {
        /// Uncertainty of the measurement, in ppb (1000 ppb = 1 ppm).
        uncertainty_ppb: u64,
    },
}

impl Accuracy {
    /// True for [`Accuracy::Exact`].
    pub const fn is_exact(self) -> bool {
        matches!(self, Accuracy::Exact)
    }

    /// The bound in ppb this accuracy implies (0 for exact figures).
    pub const fn bound_ppb(self) -> u64 {
        match self {
            Accuracy::Exact => 0,
            Accuracy::Nominal { tolerance_ppb } => tolerance_ppb,
            Accuracy::Measured { uncertainty_ppb } => uncertainty_ppb,
        }
    }
}

/// A counter rate in millihertz, with its provenance.
///
/// A rate is stored in millihertz (`u64`): 10 GHz is 10^13 mHz, far inside `u64`, and one
/// millihertz is 0.4 ppt of a 2.5 GHz counter — finer than any calibration can resolve.
/// Every `Frequency` carries its [`Source`] (which instruction, register or measurement said
/// so) and its [`Accuracy`] (exact by construction, a nominal figure with a tolerance, or a
/// measurement with an uncertainty), because "the TSC runs at 2.1 GHz" is only as good as
/// whoever said it.
///
/// Equality compares rate, source and accuracy; compare [`Frequency::as_millihz`] to compare
/// rates alone.
///
/// Three constructors, by what the caller knows:
///
/// | constructor | for | accuracy |
/// | --- | --- | --- |
/// | [`Frequency::nominal_hz`]`(hz, tolerance_ppb)` | a rate you state with its tolerance (a crystal) | [`Accuracy::Nominal`] |
/// | [`Frequency::exact_hz`]`(hz)` | a rate exact by definition (a simulation, a verified figure) | [`Accuracy::Exact`] |
/// | [`Frequency::from_hz`]`(hz, source, accuracy)`, [`Frequency::from_millihz`] | everything else: a discovery, a measurement | as given |
///
/// Each returns `None` outside [`Frequency::MIN_HZ`]..=[`Frequency::MAX_HZ`] (never a panic);
/// in a `const` item, `match` on it.
///
/// ```
/// use baretime::{Accuracy, Frequency, Source};
///
/// // What a caller knows: a 24 MHz crystal of ±20 ppm.
/// let hz = Frequency::nominal_hz(24_000_000, 20_000).expect("in 1 kHz..=100 GHz");
/// assert_eq!(hz.as_hz(), 24_000_000);
/// assert_eq!(hz.accuracy(), Accuracy::Nominal { tolerance_ppb: 20_000 });
/// assert_eq!(hz.source(), Source::User);
///
/// // A calibration's answer, to the millihertz, with its bound.
/// let measured = Frequency::from_millihz(
///     24_000_480_000,
///     Source::Calibrated,
///     Accuracy::Measured { uncertainty_ppb: 150 },
/// )
/// .unwrap();
/// assert_eq!(measured.deviation_ppb_from(&hz), 20_000); // 20 ppm fast
/// assert_eq!(measured.source().token(), "calibrated");
///
/// // `exact_hz`: a figure exact by definition. Out of range is `None`, not a panic.
/// assert!(Frequency::exact_hz(10).is_none());
/// assert!(Frequency::exact_hz(1_000).unwrap().accuracy().is_exact());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Frequency {
    millihz: u64,
    source: Source,
    accuracy: Accuracy,
}

/// Millihertz in one hertz.
pub(crate) const MILLIHZ_PER_HZ: u64 = 1000;

impl Frequency {
    /// The lowest rate the crate accepts: 1 kHz. Slower counters cannot time a delay.
    pub const MIN_HZ: u64 = 1_000;
    /// The highest rate the crate accepts: 100 GHz, ten times any counter that exists.
    pub const MAX_HZ: u64 = 100_000_000_000;

    /// [`Frequency::MAX_HZ`] as a rate: what a clock that has not started counts waits with,
    /// so that they are never short.
    #[cfg_attr(
        not(any(loom, feature = "portable-atomic", target_has_atomic = "32")),
        allow(dead_code)
    )]
    pub(crate) const FASTEST: Frequency = Frequency {
        millihz: Self::MAX_HZ.saturating_mul(MILLIHZ_PER_HZ),
        source: Source::User,
        accuracy: Accuracy::Exact,
    };

    /// The slowest rate the crate accepts ([`Frequency::MIN_HZ`]): the longest tick.
    pub(crate) const SLOWEST: Frequency = Frequency {
        millihz: Self::MIN_HZ.saturating_mul(MILLIHZ_PER_HZ),
        source: Source::User,
        accuracy: Accuracy::Exact,
    };

    /// A rate of `hz` hertz, or `None` outside [`Frequency::MIN_HZ`]..=[`Frequency::MAX_HZ`].
    pub const fn from_hz(hz: u64, source: Source, accuracy: Accuracy) -> Option<Self> {
        if hz < Self::MIN_HZ || hz > Self::MAX_HZ {
            return None;
        }
        Some(Frequency {
            millihz: hz.saturating_mul(MILLIHZ_PER_HZ), // hz ≤ 10^11: exact
            source,
            accuracy,
        })
    }

    /// A rate of `millihz` millihertz, or `None` outside the accepted range.
    pub const fn from_millihz(millihz: u64, source: Source, accuracy: Accuracy) -> Option<Self> {
        if millihz < Self::MIN_HZ * MILLIHZ_PER_HZ || millihz > Self::MAX_HZ * MILLIHZ_PER_HZ {
            return None;
        }
        Some(Frequency {
            millihz,
            source,
            accuracy,
        })
    }

    /// A rate of `hz` hertz that the counter may miss by up to `tolerance_ppb` parts per
    /// billion: what a datasheet states (a ±20 ppm crystal is `20_000` ppb). Source
    /// [`Source::User`], accuracy [`Accuracy::Nominal`]; `None` outside
    /// [`Frequency::MIN_HZ`]..=[`Frequency::MAX_HZ`].
    ///
    /// The rate to state for a counter whose crystal you know: [`crate::verify`] checks it
    /// against a measurement with that tolerance, and keeps it only if it is more precise.
    pub const fn nominal_hz(hz: u64, tolerance_ppb: u64) -> Option<Self> {
        Self::from_hz(hz, Source::User, Accuracy::Nominal { tolerance_ppb })
    }

    /// A rate of exactly `hz` hertz: source [`Source::User`], accuracy [`Accuracy::Exact`];
    /// `None` outside [`Frequency::MIN_HZ`]..=[`Frequency::MAX_HZ`].
    ///
    /// For a rate that is exact by definition (a simulated counter, a timer whose rate the
    /// platform defines, a figure already verified). An exact claim that agrees with a
    /// measurement is always preferred to it by [`crate::verify`]: state a crystal's rate
    /// with its tolerance instead ([`Frequency::nominal_hz`]).
    pub const fn exact_hz(hz: u64) -> Option<Self> {
        Self::from_hz(hz, Source::User, Accuracy::Exact)
    }

    /// The rate in millihertz.
    pub const fn as_millihz(&self) -> u64 {
        self.millihz
    }

    /// The rate in hertz, rounded to the nearest.
    pub const fn as_hz(&self) -> u64 {
        self.millihz.saturating_add(MILLIHZ_PER_HZ / 2) / MILLIHZ_PER_HZ
    }

    /// Where the figure came from.
    pub const fn source(&self) -> Source {
        self.source
    }

    /// How far to trust it.
    pub const fn accuracy(&self) -> Accuracy {
        self.accuracy
    }

    /// The same rate with another provenance.
    pub const fn with_provenance(self, source: Source, accuracy: Accuracy) -> Self {
        Frequency {
            millihz: self.millihz,
            source,
            accuracy,
        }
    }

    /// Signed difference of `self` from `other`, in parts per billion of `other`
    /// (positive when `self` is faster).
    pub const fn deviation_ppb_from(&self, other: &Frequency) -> i64 {
        let a = self.millihz as i128;
        let b = other.millihz as i128;
        // |a - b| < 2^57 and ×10^9 < 2^87: no overflow in i128; b ≥ 10^6 so no division by 0.
        let ppb = match a
            .saturating_sub(b)
            .saturating_mul(1_000_000_000)
            .checked_div(b)
        {
            Some(ppb) => ppb,
            None => 0, // b ≥ 10^6: never taken
        };
        if ppb > i64::MAX as i128 {
            i64::MAX
        } else if ppb < i64::MIN as i128 {
            i64::MIN
        } else {
            ppb as i64
        }
    }
}

/// Thousandths shown with three decimals, from the integer: ppb as ppm, mHz as Hz, µs as
/// ms (`0.012`). The crate's one such formatting; no float rounding anywhere.
pub(crate) struct Milli(pub u64);

impl fmt::Display for Milli {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:03}", self.0 / 1000, self.0 % 1000)
    }
}

/// [`Milli`] with its sign always shown (`+0.012`, `-1.500`).
pub(crate) struct SignedMilli(pub i64);

impl fmt::Display for SignedMilli {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.0 < 0 { '-' } else { '+' };
        write!(f, "{sign}{}", Milli(self.0.unsigned_abs()))
    }
}

/// Millihertz as MHz with six decimals, truncated to the hertz (`2596.118000`).
pub(crate) struct Mhz(pub u64);

impl fmt::Display for Mhz {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let whole = self.0 / 1_000_000_000;
        let frac = (self.0 % 1_000_000_000) / 1000;
        write!(f, "{whole}.{frac:06}")
    }
}

/// A ppb figure shown in ppm: whole ppm as an integer (`100 ppm`), else three decimals
/// (`0.012 ppm`).
struct Ppm(u64);

impl fmt::Display for Ppm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 % 1000 == 0 {
            write!(f, "{} ppm", self.0 / 1000)
        } else {
            write!(f, "{} ppm", Milli(self.0))
        }
    }
}

impl fmt::Display for Frequency {
    /// `2596.118000 MHz (cpuid_15h, exact)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} MHz ({}", Mhz(self.millihz), self.source)?;
        match self.accuracy {
            Accuracy::Exact => f.write_str(", exact)"),
            Accuracy::Nominal { tolerance_ppb } => {
                write!(f, ", ±{} nominal)", Ppm(tolerance_ppb))
            }
            Accuracy::Measured { uncertainty_ppb } => {
                write!(f, ", ±{} measured)", Ppm(uncertainty_ppb))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_is_enforced() {
        assert!(Frequency::exact_hz(999).is_none());
        assert!(Frequency::exact_hz(1_000).is_some());
        assert!(Frequency::exact_hz(Frequency::MAX_HZ).is_some());
        assert!(Frequency::exact_hz(Frequency::MAX_HZ + 1).is_none());
        assert!(Frequency::from_millihz(999_999, Source::User, Accuracy::Exact).is_none());
        assert!(Frequency::exact_hz(0).is_none());
        assert!(Frequency::exact_hz(u64::MAX).is_none());
    }

    #[test]
    fn the_short_constructors_say_their_accuracy() {
        let crystal = Frequency::nominal_hz(32_768_000, 20_000).unwrap();
        assert_eq!(crystal.as_millihz(), 32_768_000_000);
        assert_eq!(crystal.source(), Source::User);
        assert_eq!(
            crystal.accuracy(),
            Accuracy::Nominal {
                tolerance_ppb: 20_000
            }
        );
        assert!(!crystal.accuracy().is_exact());
        assert_eq!(
            Frequency::exact_hz(32_768_000).unwrap().accuracy(),
            Accuracy::Exact
        );
        assert!(Frequency::nominal_hz(999, 0).is_none());
        assert!(Frequency::nominal_hz(Frequency::MAX_HZ + 1, 0).is_none());
    }

    #[test]
    fn hz_rounds_to_nearest() {
        let f = Frequency::from_millihz(2_596_118_000_500, Source::User, Accuracy::Exact).unwrap();
        assert_eq!(f.as_hz(), 2_596_118_001);
        let f = Frequency::from_millihz(2_596_118_000_499, Source::User, Accuracy::Exact).unwrap();
        assert_eq!(f.as_hz(), 2_596_118_000);
    }

    #[test]
    fn deviation_is_signed_ppb() {
        let a = Frequency::exact_hz(1_000_001_000).unwrap();
        let b = Frequency::exact_hz(1_000_000_000).unwrap();
        assert_eq!(a.deviation_ppb_from(&b), 1_000);
        assert_eq!(b.deviation_ppb_from(&a), -999);
    }
}
