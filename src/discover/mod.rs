//! Frequency discovery: what the hardware *claims* about its counter.
//!
//! Discovery never measures anything. It collects every figure the CPU (or the hypervisor,
//! or firmware) states about the counter's rate, each as a [`Frequency`] that carries its
//! [`Source`] and [`Accuracy`], plus the feature flags that say whether the counter can be
//! trusted at all (invariant TSC, hypervisor, ECV). Calibration then checks the best claim
//! against a reference timer.
//!
//! - [`x86`]: CPUID, decoded through an injectable [`x86::CpuIdReader`] (raw-cpuid's,
//!   re-exported), so the same code runs on the live CPU and on a recorded dump ([`dump`]) on
//!   any host; in a guest it walks the hypervisor ranges (KVM, Xen, Hyper-V, VMware, …).
//! - [`aarch64`]: CNTFRQ_EL0, MIDR_EL1 and ID_AA64MMFR0_EL1, decoded by a pure function of the
//!   register values.
//! - [`paravirt`]: the TSC rate a hypervisor tells a ring-0 guest kernel (KVM pvclock,
//!   Hyper-V's frequency MSR) — decoding, the version protocol and trust placement; the
//!   MSR and memory access is `crate::arch::x86_64::paravirt`.
//! - [`dump`]: parses CPUID dumps in the three common text formats (`cpuid -r`, AIDA64 /
//!   InstLatx64, libcpuid) into a fixed-capacity table that is itself a CPUID reader.
//!
//! Third-party types: a user who injects a CPUID reader implements `raw_cpuid`'s
//! `CpuIdReader` (returning its `CpuIdResult`), re-exported from [`x86`] so that no direct
//! `raw-cpuid` dependency is needed. Candidate lists come back as `&[Frequency]`, never as a
//! `heapless` type: a slice is all a caller needs (iterate, index, `first`, `len`), and
//! keeping `heapless` (0.x) out of the API means its next major version is not a breaking
//! change of ours (the Rust API guidelines' C-STABLE: a crate's public dependencies hold its
//! own version back).
//!
//! Claims are checked before anyone uses them: one outside any plausible rate is no
//! candidate ([`Implausible`]), and candidates further apart than their stated accuracies are
//! reported ([`Disagreement`]) without reordering them: the most trusted claim stays first,
//! and calibration decides.
//!
//! Everything here is integer arithmetic, allocates nothing and does not panic on any input:
//! a CPUID reader may return anything, and a dump may be any bytes. The crate's lints (in
//! lib.rs) hold the code to that outside tests (no unchecked arithmetic, indexing, `unwrap`
//! or `panic!`).
//!
//! [`Frequency`]: crate::Frequency
//! [`Source`]: crate::Source
//! [`Accuracy`]: crate::Accuracy

pub mod aarch64;
mod bytes;
pub mod dump;
pub mod paravirt;
pub mod x86;

use crate::scale::saturate_u64;
use crate::{Frequency, Source};

/// Tolerance of a CPUID 0x15 figure whose crystal comes from the table of known models:
/// the crystal's own tolerance (about ±100 ppm) with a margin for a table entry that is right
/// for the model but off for a board.
pub const KNOWN_CRYSTAL_TOLERANCE_PPB: u64 = 500_000;

/// Tolerance of the CPUID 0x16 base frequency and of a 0x15 figure whose crystal was derived
/// from it. The base frequency is a whole number of MHz that the TSC usually matches to a few
/// tenths of a percent (i7-8750H: base 2200 MHz, TSC 2208 MHz); some parts miss it by far
/// more (i3-10110U: base 2100 MHz, TSC 2592 MHz), which verification then catches.
pub const BASE_FREQUENCY_TOLERANCE_PPB: u64 = 10_000_000;

/// Tolerance of the brand string's `@ x.xxGHz`: a marketing figure, 20 % and more off the
/// TSC rate on some parts (i3-10110U: "2.10GHz", TSC 2.592 GHz).
pub const BRAND_STRING_TOLERANCE_PPB: u64 = 250_000_000;

/// Tolerance of CNTFRQ_EL0: when firmware programs it right it is the crystal's rate (about
/// ±100 ppm); when it programs it wrong, no tolerance helps and calibration must catch it.
pub const CNTFRQ_TOLERANCE_PPB: u64 = 1_000_000;

/// Most frequency candidates one discovery can list.
pub const MAX_CANDIDATES: usize = 8;

/// A fixed-capacity list of frequency candidates, most trusted first.
///
/// Not public: discovery hands its candidates out as `&[Frequency]`
/// (`X86Discovery::candidates`, [`aarch64::Aarch64Discovery::candidates`]), so `heapless` stays
/// a private dependency and a new `heapless` major version is not a breaking change of ours.
pub(crate) type Candidates = heapless::Vec<crate::Frequency, MAX_CANDIDATES>;

/// A claim that was no candidate: its rate lies outside any plausible counter rate (for x86,
/// [`x86::MIN_PLAUSIBLE_TSC_HZ`]..=[`x86::MAX_PLAUSIBLE_TSC_HZ`]).
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
    /// [`crate::Accuracy::bound_ppb`], 0 for an exact claim) plus their resolutions allow.
    ///
    /// ```
    /// use baretime::discover::Disagreement;
    /// use baretime::{Accuracy, Frequency, Source};
    /// let nominal = |hz, source| {
    ///     Frequency::from_hz(hz, source, Accuracy::Nominal { tolerance_ppb: 10_000_000 }).unwrap()
    /// };
    /// let base = nominal(4_300_000_000, Source::CpuidBaseFrequency);
    /// // 1 % each: 2 % allowed; 4104 MHz is 4.6 % below.
    /// let d = Disagreement::between(base, nominal(4_104_000_000, Source::BrandString)).unwrap();
    /// assert_eq!(d.apart_ppb, 45_581_395);
    /// assert!(Disagreement::between(base, nominal(4_250_000_000, Source::BrandString)).is_none());
    /// ```
    pub fn between(a: Frequency, b: Frequency) -> Option<Disagreement> {
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
