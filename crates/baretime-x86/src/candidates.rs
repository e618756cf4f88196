//! The candidate list, and the checks on claims: implausible rates and disagreements.

use crate::saturate_u64;
use baretime::{Frequency, Source};

/// Tolerance of a CPUID 0x15 figure whose crystal comes from the table of known models:
/// the crystal's own tolerance (about ±100 ppm) with a margin for a table entry that is right
/// for the model but off for a board.
pub(crate) const KNOWN_CRYSTAL_TOLERANCE_PPB: u64 = 500_000;

/// Tolerance of the CPUID 0x16 base frequency and of a 0x15 figure whose crystal was derived
/// from it. The base frequency is a whole number of MHz that the TSC usually matches to a few
/// tenths of a percent (i7-8750H: base 2200 MHz, TSC 2208 MHz); some parts miss it by far
/// more (i3-10110U: base 2100 MHz, TSC 2592 MHz), which verification then catches.
pub(crate) const BASE_FREQUENCY_TOLERANCE_PPB: u64 = 10_000_000;

/// Tolerance of the brand string's `@ x.xxGHz`: a marketing figure, 20 % and more off the
/// TSC rate on some parts (i3-10110U: "2.10GHz", TSC 2.592 GHz).
pub(crate) const BRAND_STRING_TOLERANCE_PPB: u64 = 250_000_000;

/// Most frequency candidates one discovery can list.
pub(crate) const MAX_CANDIDATES: usize = 8;

/// A fixed-capacity list of frequency candidates, most trusted first.
///
/// Not public: discovery hands its candidates out as `&[Frequency]`
/// (`X86Discovery::candidates`, [`aarch64::Aarch64Discovery::candidates`]), so `heapless` stays
/// a private dependency and a new `heapless` major version is not a breaking change of ours.
pub(crate) type Candidates = heapless::Vec<baretime::Frequency, MAX_CANDIDATES>;

/// A claim that was no candidate: its rate lies outside any plausible counter rate (for x86,
/// [`MIN_PLAUSIBLE_TSC_HZ`](crate::MIN_PLAUSIBLE_TSC_HZ)..=[`MAX_PLAUSIBLE_TSC_HZ`](crate::MAX_PLAUSIBLE_TSC_HZ)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Implausible {
    /// Who claimed it.
    pub source: Source,
    /// The rate claimed, in Hz (rounded down; `u64::MAX` when even that does not fit).
    pub hz: u64,
}

/// Two candidates further apart than both their accuracies allow: at least one is wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Disagreement {
    /// The more trusted claim's source.
    pub a: Source,
    /// The less trusted claim's source.
    pub b: Source,
    /// How far apart the two rates are: |a − b| / a, in ppb (rounded down).
    pub apart_ppb: u64,
    /// How far apart their accuracies allow them to be: a's bound + b's bound, plus both
    /// sources' resolutions ([`Source::resolution_hz`]) relative to a, in ppb (rounded up).
    pub allowed_ppb: u64,
}

impl Disagreement {
    /// `Some` when `a` and `b` are further apart than `a`'s bound plus `b`'s bound (each
    /// [`baretime::Accuracy::bound_ppb`], 0 for an exact claim) plus their resolutions allow.
    pub(crate) fn between(a: Frequency, b: Frequency) -> Option<Disagreement> {
        let (ma, mb) = (u128::from(a.as_millihz()), u128::from(b.as_millihz()));
        // A Frequency is at least 1 kHz: ma > 0. Products < 2^64 · 2^30: exact in u128.
        let apart = ma
            .abs_diff(mb)
            .saturating_mul(1_000_000_000)
            .checked_div(ma)?;
        let resolution_millihz = u128::from(a.source().resolution_hz())
            .saturating_add(u128::from(b.source().resolution_hz()))
            .saturating_mul(1000);
        let resolution = resolution_millihz
            .saturating_mul(1_000_000_000)
            .saturating_add(ma.saturating_sub(1))
            .checked_div(ma)?;
        let allowed = u128::from(a.accuracy().bound_ppb())
            .saturating_add(u128::from(b.accuracy().bound_ppb()))
            .saturating_add(resolution);
        (apart > allowed).then(|| Disagreement {
            a: a.source(),
            b: b.source(),
            apart_ppb: saturate_u64(apart),
            allowed_ppb: saturate_u64(allowed),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baretime::Accuracy;

    #[test]
    fn between_allows_both_bounds() {
        let nominal = |hz, source| {
            Frequency::from_hz(
                hz,
                source,
                Accuracy::Nominal {
                    tolerance_ppb: 10_000_000,
                },
            )
            .unwrap()
        };
        let base = nominal(4_300_000_000, Source::CpuidBaseFrequency);
        // 1 % each: 2 % allowed; 4104 MHz is 4.6 % below.
        let d = Disagreement::between(base, nominal(4_104_000_000, Source::BrandString)).unwrap();
        assert_eq!(d.apart_ppb, 45_581_395);
        assert_eq!(
            (d.a, d.b),
            (Source::CpuidBaseFrequency, Source::BrandString)
        );
        assert!(Disagreement::between(base, nominal(4_250_000_000, Source::BrandString)).is_none());
    }
}
