//! One function per frequency source, each a pure function of the decoded leaves, listed in
//! trust order in [`IN_TRUST_ORDER`]: the candidate list is built by calling them in that
//! order, so the first candidate is the most trusted and no separate ranking exists.

use super::leaves::TscLeaf;
use super::{Crystal, CrystalSource, X86Discovery};
use crate::candidates::{
    BASE_FREQUENCY_TOLERANCE_PPB, BRAND_STRING_TOLERANCE_PPB, KNOWN_CRYSTAL_TOLERANCE_PPB,
};
use baretime::{Accuracy, Source};

/// A source's claim before the plausibility check: the rate in millihertz, unbounded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Claim {
    pub millihz: u128,
    pub source: Source,
    pub accuracy: Accuracy,
}

/// A source: what it claims, from the decoded leaves.
pub(super) type SourceFn = fn(&X86Discovery) -> Option<Claim>;

/// Every CPUID source, most trusted first.
///
/// The hypervisor's own statements come first: in a guest the hypervisor may scale the TSC,
/// so the host's leaf 0x15 ratio (which hypervisors often pass through) need not be the
/// guest's rate. Then leaf 0x15 by how its crystal is known, then 0x16's base, then the
/// brand string.
pub(super) const IN_TRUST_ORDER: [SourceFn; 7] = [
    xen_time_leaf,
    hypervisor_timing_leaf,
    tsc_leaf,
    tsc_leaf_known_crystal,
    tsc_leaf_derived_crystal,
    base_frequency,
    brand_string,
];

/// A rate in kHz as a claim (exact: the hypervisor states it, to 1 kHz resolution).
fn khz_claim(khz: u32, source: Source) -> Option<Claim> {
    (khz != 0).then_some(Claim {
        // < 2^32 · 10^6 < 2^52: exact.
        millihz: u128::from(khz).saturating_mul(1_000_000),
        source,
        accuracy: Accuracy::Exact,
    })
}

/// Xen's time leaf (base + 3 sub-leaf 0) ECX: the guest TSC rate in kHz.
fn xen_time_leaf(d: &X86Discovery) -> Option<Claim> {
    khz_claim(d.xen_time?.tsc_khz, Source::XenTimeLeaf)
}

/// The VMware-style timing leaf (base + 0x10) EAX: the TSC rate in kHz.
fn hypervisor_timing_leaf(d: &X86Discovery) -> Option<Claim> {
    khz_claim(d.hypervisor_timing?.tsc_khz, Source::HypervisorLeaf)
}

/// Leaf 0x15 with both ratio fields, on Intel only (see the module docs).
fn intel_ratio(d: &X86Discovery) -> Option<TscLeaf> {
    d.tsc_leaf.filter(|t| d.is_intel() && t.has_ratio())
}

/// Leaf 0x16's base in Hz, when not zero.
fn base_hz(d: &X86Discovery) -> Option<u64> {
    d.frequency_leaf
        .map(|f| u64::from(f.base_mhz).saturating_mul(1_000_000)) // < 2^36: exact
        .filter(|&hz| hz != 0)
}

/// crystal × EBX / EAX in millihertz, rounded to the nearest.
fn ratio_claim(crystal_hz: u32, t: TscLeaf, source: Source, accuracy: Accuracy) -> Option<Claim> {
    // < 2^32 · 2^32 · 2^10 = 2^74: exact in u128 (the saturation never triggers).
    let num = u128::from(crystal_hz)
        .saturating_mul(u128::from(t.numerator))
        .saturating_mul(1000);
    Some(Claim {
        millihz: div_round(num, u128::from(t.denominator))?,
        source,
        accuracy,
    })
}

/// Leaf 0x15 with all three fields: exact, kept to the millihertz.
fn tsc_leaf(d: &X86Discovery) -> Option<Claim> {
    let t = intel_ratio(d).filter(|t| t.crystal_hz != 0)?;
    ratio_claim(t.crystal_hz, t, Source::CpuidTscLeaf, Accuracy::Exact)
}

/// Leaf 0x15's ratio over the crystal of the known-model table (ECX = 0).
fn tsc_leaf_known_crystal(d: &X86Discovery) -> Option<Claim> {
    let t = intel_ratio(d).filter(|t| t.crystal_hz == 0)?;
    ratio_claim(
        super::known_crystal_hz(d.family, d.model)?,
        t,
        Source::CpuidTscLeafKnownCrystal,
        Accuracy::Nominal {
            tolerance_ppb: KNOWN_CRYSTAL_TOLERANCE_PPB,
        },
    )
}

/// Leaf 0x15's ratio over a crystal derived from leaf 0x16's base (ECX = 0).
fn tsc_leaf_derived_crystal(d: &X86Discovery) -> Option<Claim> {
    let t = intel_ratio(d).filter(|t| t.crystal_hz == 0)?;
    ratio_claim(
        derived_crystal_hz(d, t)?,
        t,
        Source::CpuidTscLeafDerivedCrystal,
        Accuracy::Nominal {
            tolerance_ppb: BASE_FREQUENCY_TOLERANCE_PPB,
        },
    )
}

/// crystal = 0x16 base × EAX / EBX, rounded to the Hz; `None` when 0 or past `u32`.
fn derived_crystal_hz(d: &X86Discovery, t: TscLeaf) -> Option<u32> {
    // < 2^16·10^6 · 2^32 < 2^85: exact in u128.
    let num = u128::from(base_hz(d)?).saturating_mul(u128::from(t.denominator));
    u32::try_from(div_round(num, u128::from(t.numerator))?)
        .ok()
        .filter(|&hz| hz != 0)
}

/// Leaf 0x16's base frequency.
fn base_frequency(d: &X86Discovery) -> Option<Claim> {
    Some(Claim {
        millihz: u128::from(base_hz(d)?).saturating_mul(1000),
        source: Source::CpuidBaseFrequency,
        accuracy: Accuracy::Nominal {
            tolerance_ppb: BASE_FREQUENCY_TOLERANCE_PPB,
        },
    })
}

/// The brand string's `@ x.xxGHz`.
fn brand_string(d: &X86Discovery) -> Option<Claim> {
    Some(Claim {
        millihz: u128::from(super::parse_brand_frequency(&d.brand)?).saturating_mul(1000),
        source: Source::BrandString,
        accuracy: Accuracy::Nominal {
            tolerance_ppb: BRAND_STRING_TOLERANCE_PPB,
        },
    })
}

/// The core crystal: leaf 0x15 ECX, else the known-model table, else derived from 0x16.
pub(super) fn crystal(d: &X86Discovery) -> Option<Crystal> {
    let t = intel_ratio(d)?;
    if t.crystal_hz != 0 {
        return Some(Crystal {
            hz: t.crystal_hz,
            source: CrystalSource::Reported,
        });
    }
    if let Some(hz) = super::known_crystal_hz(d.family, d.model) {
        return Some(Crystal {
            hz,
            source: CrystalSource::KnownModel,
        });
    }
    Some(Crystal {
        hz: derived_crystal_hz(d, t)?,
        source: CrystalSource::DerivedFromBase,
    })
}

/// `num / den` rounded to the nearest; `None` for `den == 0` (or a sum past `u128`).
fn div_round(num: u128, den: u128) -> Option<u128> {
    num.checked_add(den / 2)?.checked_div(den)
}
