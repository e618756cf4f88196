//! x86 discovery: CPUID decoded through an injectable [`CpuIdReader`].
//!
//! [`discover_with`] reads the leaves that say anything about the TSC and lists every
//! frequency the CPU or hypervisor states, most trusted first. Each source is one function
//! (in `sources.rs`), called in this order; the first candidate is the most trusted:
//!
//! | source | leaf | accuracy |
//! | --- | --- | --- |
//! | [`Source::XenTimeLeaf`] | Xen range base + 3 sub-leaf 0, ECX (kHz) | exact, to 1 kHz |
//! | [`Source::HypervisorLeaf`] | range base + 0x10 (0x40000010) EAX (kHz), any range but Xen's and Hyper-V's | exact, to 1 kHz |
//! | [`Source::CpuidTscLeaf`] | 0x15 (Intel only): ECX (crystal Hz) × EBX / EAX | exact (a rational: kept to the mHz) |
//! | [`Source::CpuidTscLeafKnownCrystal`] | 0x15 ratio (Intel only), ECX = 0, crystal from the model table | nominal, [`KNOWN_CRYSTAL_TOLERANCE_PPB`] |
//! | [`Source::CpuidTscLeafDerivedCrystal`] | 0x15 ratio (Intel only), ECX = 0, crystal = 0x16 base × EAX / EBX | nominal, [`BASE_FREQUENCY_TOLERANCE_PPB`] |
//! | [`Source::CpuidBaseFrequency`] | 0x16 EAX (MHz) | nominal, [`BASE_FREQUENCY_TOLERANCE_PPB`] |
//! | [`Source::BrandString`] | 0x80000002..4, `@ 2.10GHz` / `1700MHz` | nominal, [`BRAND_STRING_TOLERANCE_PPB`] |
//!
//! A leaf above the maximum its range reports (leaf 0 EAX, 0x80000000 EAX, a hypervisor
//! range's EAX) does not exist, whatever the reader returns for it: Intel CPUs answer such
//! leaves with the data of the highest basic leaf, and QEMU TCG with junk. A zero numerator
//! or denominator in leaf 0x15, a zero base in 0x16 and a zero rate in a hypervisor leaf
//! mean "unknown": no candidate.
//!
//! # Hypervisors
//!
//! With the hypervisor bit (leaf 1 ECX bit 31), the hypervisor ranges 0x40000000,
//! 0x40000100, … are walked ([`X86Discovery::hypervisors`]), each named by its signature
//! ([`HypervisorKind`]). Xen may sit at 0x40000100 behind Hyper-V's interface ("Viridian"),
//! and KVM likewise with Hyper-V enlightenments. Xen's time leaf gives the guest TSC rate in
//! kHz; Hyper-V's feature leaf says whether the TSC frequency MSR can be read
//! ([`X86Discovery::hyperv_tsc_frequency_msr`]: CPUID cannot read it, a ring-0 kernel can).
//! The hypervisors' kHz figures are [`Accuracy::Exact`]: the rate the hypervisor gives the
//! guest, stated by the hypervisor; its resolution (1 kHz, 0.4 ppm of 2.5 GHz) is
//! [`Source::resolution_hz`], which [`Disagreement`] allows for.
//!
//! # Plausibility and disagreement
//!
//! A claim outside [`MIN_PLAUSIBLE_TSC_HZ`]..=[`MAX_PLAUSIBLE_TSC_HZ`] is no candidate: it is
//! dropped and listed in [`X86Discovery::implausible`] (leaf 0x16 = 0xFFFF MHz is not
//! "65.5 GHz, nominal"). Candidates that disagree beyond their stated accuracies are listed
//! by [`X86Discovery::disagreements`]; [`X86Discovery::best`] is still the first, and
//! calibration ([`crate::calibrate::calibrate_and_verify`]) is what settles it.
//!
//! # Vendors
//!
//! Leaf 0x15 is the TSC/crystal ratio only in Intel's CPUID (the SDM); it is read on
//! `GenuineIntel` parts only, as Linux's `native_calibrate_tsc` does (`X86_VENDOR_INTEL`).
//! AMD's and Hygon's manuals do not define it with that meaning, and Centaur/Zhaoxin
//! (`CentaurHauls`, `  Shanghai  `) document no TSC leaf that Linux uses. An exact claim from
//! a leaf that the vendor never defined would outrank every measurement, so on other vendors
//! [`X86Discovery::tsc_leaf`] is still recorded raw but yields no candidate and no crystal.
//!
//! The known-crystal table ([`known_crystal_hz`]) follows the Intel SDM and Linux's
//! `native_calibrate_tsc`, with Linux's model names.
//!
//! [`CpuIdReader`] and [`CpuIdResult`] are raw-cpuid's, re-exported here: implement
//! `CpuIdReader` for your own source of register values and pass it to [`discover_with`]
//! without depending on raw-cpuid yourself.

mod brand;
mod crystal;
mod hypervisor;
mod leaves;
mod sources;

pub use raw_cpuid::{CpuIdReader, CpuIdResult};

pub use brand::parse_brand_frequency;
pub use crystal::known_crystal_hz;
pub use hypervisor::{HypervisorKind, HypervisorRange, MAX_HYPERVISOR_RANGES};
pub use leaves::{
    decode_signature, FrequencyLeaf, HyperVFeatures, HypervisorTiming, TscLeaf, XenTimeLeaf,
};

use super::bytes::{regs_to_bytes, until_nul};
use super::{Candidates, Disagreement, Implausible, MAX_CANDIDATES};
#[cfg(doc)]
use super::{
    BASE_FREQUENCY_TOLERANCE_PPB, BRAND_STRING_TOLERANCE_PPB, KNOWN_CRYSTAL_TOLERANCE_PPB,
};
#[cfg(doc)]
use crate::Accuracy;
use crate::{Frequency, Source};
use hypervisor::HypervisorRanges;
use leaves::*;

/// The lowest TSC rate a claim may state to be a candidate: 10 MHz. The first x86 with a
/// TSC (Pentium, 1993) ran at 60 MHz; nothing since is slower, and a hypervisor that
/// offers a slower guest TSC would make it useless as a clock.
pub const MIN_PLAUSIBLE_TSC_HZ: u64 = 10_000_000;

/// The highest TSC rate a claim may state to be a candidate: 10 GHz. The TSC runs at the
/// nominal (base) rate, below 6 GHz on every x86 part shipped; twice that leaves room for
/// what has not shipped yet, while 0xFFFF MHz in leaf 0x16 (65.5 GHz) or an all-ones 0x15
/// ratio stays out.
pub const MAX_PLAUSIBLE_TSC_HZ: u64 = 10_000_000_000;

bitflags::bitflags! {
    /// The CPUID feature bits that matter for using the TSC as a clock.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub struct X86Features: u32 {
        /// Leaf 0x1 EDX bit 4: the RDTSC instruction exists.
        const TSC = 1 << 0;
        /// Leaf 0x80000001 EDX bit 27: RDTSCP exists (with IA32_TSC_AUX).
        const RDTSCP = 1 << 1;
        /// Leaf 0x80000007 EDX bit 8: the TSC runs at a constant rate in every P-, C- and
        /// T-state. Without it the TSC is no clock.
        const INVARIANT_TSC = 1 << 2;
        /// Leaf 0x7 EBX bit 1: the IA32_TSC_ADJUST MSR exists.
        const TSC_ADJUST = 1 << 3;
        /// Leaf 0x1 ECX bit 24: the local APIC timer has TSC-deadline mode.
        const TSC_DEADLINE = 1 << 4;
        /// Leaf 0x1 ECX bit 31: running under a hypervisor.
        const HYPERVISOR = 1 << 5;
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for X86Features {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(f, "X86Features({=u32:#x})", self.bits())
    }
}

/// Where the core crystal frequency came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum CrystalSource {
    /// Leaf 0x15 ECX.
    Reported,
    /// The table of known models (leaf 0x15 ECX was 0).
    KnownModel,
    /// Leaf 0x16 base × 0x15 EAX / EBX, rounded to the Hz (leaf 0x15 ECX was 0).
    DerivedFromBase,
}

/// The core crystal clock (the ART and, on newer parts, the local APIC timer run from it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Crystal {
    /// Frequency in Hz.
    pub hz: u32,
    /// Where it came from.
    pub source: CrystalSource,
}

/// Everything x86 CPUID says about the TSC.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct X86Discovery {
    /// Vendor string from leaf 0 (EBX, EDX, ECX), e.g. `GenuineIntel`, `AuthenticAMD`.
    pub vendor: [u8; 12],
    /// Leaf 0 EAX: the highest basic leaf.
    pub max_basic_leaf: u32,
    /// Leaf 0x80000000 EAX when it lies in 0x80000000..=0x8000FFFF; `None` means no extended
    /// leaf exists.
    pub max_extended_leaf: Option<u32>,
    /// Leaf 0x40000000 EAX, read only with the hypervisor bit. When EAX is not a hypervisor
    /// leaf number (0x40000000..=0x4FFFFFFF), only the vendor leaf itself is assumed. The
    /// first of [`X86Discovery::hypervisors`].
    pub max_hypervisor_leaf: Option<u32>,
    /// Hypervisor signature from leaf 0x40000000 (EBX, ECX, EDX), e.g. `KVMKVMKVM\0\0\0`;
    /// zeros without a hypervisor. The first of [`X86Discovery::hypervisors`].
    pub hypervisor_vendor: [u8; 12],
    /// Leaf 1 EAX: the processor signature (0 when leaf 1 does not exist).
    pub signature: u32,
    /// Display family (base family, plus the extended family when the base is 0xF).
    pub family: u32,
    /// Display model (base model, plus the extended model << 4 when the family is ≥ 6).
    pub model: u32,
    /// Stepping.
    pub stepping: u32,
    /// Feature bits.
    pub features: X86Features,
    /// Brand string bytes from 0x80000002..=0x80000004 (zeros when absent).
    pub brand: [u8; 48],
    /// Raw leaf 0x15, when it exists.
    pub tsc_leaf: Option<TscLeaf>,
    /// Raw leaf 0x16, when it exists.
    pub frequency_leaf: Option<FrequencyLeaf>,
    /// Raw timing leaf (range base + 0x10, 0x40000010 in practice) of the first hypervisor
    /// range that has one and is neither Xen's nor Hyper-V's.
    pub hypervisor_timing: Option<HypervisorTiming>,
    /// Raw Xen time leaf (Xen range base + 3), when a Xen range reaches it.
    pub xen_time: Option<XenTimeLeaf>,
    /// Raw Hyper-V feature leaf (Hyper-V range base + 3), when a Hyper-V range reaches it.
    pub hyperv_features: Option<HyperVFeatures>,
    /// The core crystal frequency, when known.
    pub crystal: Option<Crystal>,
    hypervisors: HypervisorRanges,
    candidates: Candidates,
    implausible: heapless::Vec<Implausible, MAX_CANDIDATES>,
}

#[cfg(feature = "defmt")]
impl defmt::Format for X86Discovery {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(
            f,
            "X86Discovery {{ vendor: {=[u8]:a}, family: {=u32:#x}, model: {=u32:#x}, features: {}, hypervisors: {=[?]}, candidates: {=[?]} }}",
            &self.vendor[..],
            self.family,
            self.model,
            self.features,
            self.hypervisors.as_slice(),
            self.candidates.as_slice()
        )
    }
}

impl X86Discovery {
    /// Every plausible frequency candidate found, most trusted first (the order of the
    /// table in the module docs).
    pub fn candidates(&self) -> &[Frequency] {
        &self.candidates
    }

    /// The most trusted candidate: the first of [`X86Discovery::candidates`].
    ///
    /// It stays the first even when another candidate disagrees with it
    /// ([`X86Discovery::disagreements`]): the order says whose word counts more, not who is
    /// right. A disagreement means at least one claim is wrong, and only a measurement can
    /// say which: verify the pick with [`crate::calibrate::calibrate_and_verify`].
    pub fn best(&self) -> Option<Frequency> {
        self.candidates.first().copied()
    }

    /// The candidate from `source`, if there is one.
    pub fn candidate(&self, source: Source) -> Option<Frequency> {
        self.candidates
            .iter()
            .copied()
            .find(|f| f.source() == source)
    }

    /// Every pair of candidates that disagree beyond their stated accuracies (see
    /// [`Disagreement::between`]), the more trusted one first in each pair.
    ///
    /// ```
    /// use baretime::discover::dump::replay;
    /// // Kaby Lake-X: leaf 0x15 = 342/2 with no crystal, 0x16 base 4300 MHz.
    /// let d = replay(b"CPUID 00000000: 00000016-756E6547-6C65746E-49656E69\n\
    ///                  CPUID 00000001: 000906E9-00100800-7FFAFBBF-BFEBFBFF\n\
    ///                  CPUID 00000015: 00000002-00000156-00000000-00000000\n\
    ///                  CPUID 00000016: 000010CC-00001194-00000064-00000000\n").unwrap();
    /// let first = d.disagreements().next().unwrap();
    /// assert_eq!(first.a, baretime::Source::CpuidTscLeafKnownCrystal);
    /// assert!(first.apart_ppb > 40_000_000); // 4104 MHz vs 4300 MHz: 4.8 %
    /// ```
    pub fn disagreements(&self) -> impl Iterator<Item = Disagreement> + '_ {
        let c = self.candidates.as_slice();
        c.iter().enumerate().flat_map(move |(i, &a)| {
            c.get(i.saturating_add(1)..)
                .unwrap_or(&[])
                .iter()
                .filter_map(move |&b| Disagreement::between(a, b))
        })
    }

    /// Claims dropped for a rate outside
    /// [`MIN_PLAUSIBLE_TSC_HZ`]..=[`MAX_PLAUSIBLE_TSC_HZ`], in trust order.
    pub fn implausible(&self) -> &[Implausible] {
        &self.implausible
    }

    /// The hypervisor CPUID ranges found (empty without the hypervisor bit), in leaf order.
    pub fn hypervisors(&self) -> &[HypervisorRange] {
        &self.hypervisors
    }

    /// Whether Hyper-V's interface says its TSC frequency MSR
    /// ([`HyperVFeatures::MSR_TSC_FREQUENCY`]) can be read: a figure only a ring-0 kernel
    /// can fetch, so discovery reports it and does not list it as a candidate.
    pub fn hyperv_tsc_frequency_msr(&self) -> bool {
        self.hyperv_features.is_some_and(|h| h.tsc_frequency_msr())
    }

    /// The vendor string, or `None` when it is not UTF-8.
    pub fn vendor_str(&self) -> Option<&str> {
        core::str::from_utf8(&self.vendor).ok()
    }

    /// True for `GenuineIntel`.
    pub fn is_intel(&self) -> bool {
        &self.vendor == b"GenuineIntel"
    }

    /// The brand string without its NUL padding and surrounding spaces (empty when absent).
    pub fn brand_bytes(&self) -> &[u8] {
        until_nul(&self.brand).trim_ascii()
    }

    /// The brand string, or `None` when absent or not UTF-8.
    pub fn brand_str(&self) -> Option<&str> {
        let b = self.brand_bytes();
        if b.is_empty() {
            return None;
        }
        core::str::from_utf8(b).ok()
    }

    /// The invariant-TSC bit.
    pub fn invariant_tsc(&self) -> bool {
        self.features.contains(X86Features::INVARIANT_TSC)
    }

    /// The hypervisor bit.
    pub fn hypervisor(&self) -> bool {
        self.features.contains(X86Features::HYPERVISOR)
    }

    /// Calls every source in trust order: plausible claims become candidates, the rest are
    /// listed as implausible.
    fn collect_candidates(&mut self) {
        self.crystal = sources::crystal(self);
        let mut candidates = Candidates::new();
        let mut implausible = heapless::Vec::new();
        for source in sources::IN_TRUST_ORDER {
            let Some(c) = source(self) else { continue };
            let plausible = (u128::from(MIN_PLAUSIBLE_TSC_HZ) * 1000
                ..=u128::from(MAX_PLAUSIBLE_TSC_HZ) * 1000)
                .contains(&c.millihz);
            let f = u64::try_from(c.millihz)
                .ok()
                .filter(|_| plausible)
                .and_then(|mhz| Frequency::from_millihz(mhz, c.source, c.accuracy));
            // At most 7 sources for lists of MAX_CANDIDATES (8): a push cannot fail.
            let _ = match f {
                Some(f) => candidates.push(f).map_err(drop),
                None => implausible
                    .push(Implausible {
                        source: c.source,
                        hz: u64::try_from(c.millihz / 1000).unwrap_or(u64::MAX),
                    })
                    .map_err(drop),
            };
        }
        self.candidates = candidates;
        self.implausible = implausible;
    }
}

/// Discovers through the CPU's own CPUID instruction.
#[cfg(target_arch = "x86_64")]
pub fn discover() -> X86Discovery {
    discover_with(raw_cpuid::CpuIdReaderNative)
}

/// Discovers through `reader`: the live CPU (`raw_cpuid::CpuIdReaderNative`, x86 only), a
/// recorded dump (`&`[`super::dump::Dump`]) or a closure `Fn(u32, u32) -> CpuIdResult`.
///
/// Never panics, whatever the reader returns.
pub fn discover_with<R: CpuIdReader>(reader: R) -> X86Discovery {
    let leaf0 = reader.cpuid2(LEAF_VENDOR, 0);
    let max_basic_leaf = leaf0.eax;
    let basic = |leaf: u32| -> Option<CpuIdResult> {
        (leaf <= max_basic_leaf).then(|| reader.cpuid2(leaf, 0))
    };

    let mut features = X86Features::empty();
    let mut signature = 0;
    if let Some(r) = basic(LEAF_FEATURES) {
        signature = r.eax;
        features.set(X86Features::TSC, bit(r.edx, 4));
        features.set(X86Features::TSC_DEADLINE, bit(r.ecx, 24));
        features.set(X86Features::HYPERVISOR, bit(r.ecx, 31));
    }
    if let Some(r) = basic(LEAF_EXTENDED_FEATURES) {
        features.set(X86Features::TSC_ADJUST, bit(r.ebx, 1));
    }
    let (family, model, stepping) = decode_signature(signature);
    let tsc_leaf = basic(LEAF_TSC).map(TscLeaf::decode);
    let frequency_leaf = basic(LEAF_FREQUENCY).map(FrequencyLeaf::decode);

    let ext_max = reader.cpuid2(LEAF_EXTENDED_MAX, 0).eax;
    let max_extended_leaf = (ext_max & 0xFFFF_0000 == LEAF_EXTENDED_MAX).then_some(ext_max);
    let extended = |leaf: u32| -> Option<CpuIdResult> {
        max_extended_leaf
            .filter(|&max| leaf <= max)
            .map(|_| reader.cpuid2(leaf, 0))
    };
    if let Some(r) = extended(LEAF_EXTENDED_FEATURES_1) {
        features.set(X86Features::RDTSCP, bit(r.edx, 27));
    }
    if let Some(r) = extended(LEAF_POWER_MANAGEMENT) {
        features.set(X86Features::INVARIANT_TSC, bit(r.edx, 8));
    }
    let mut brand = [0u8; 48];
    // The brand string takes all three leaves; with fewer it is not supported.
    if max_extended_leaf.is_some_and(|max| max >= LEAF_BRAND_FIRST + 2) {
        for (chunk, leaf) in brand.chunks_exact_mut(16).zip(LEAF_BRAND_FIRST..) {
            let r = reader.cpuid2(leaf, 0);
            for (bytes, reg) in chunk.chunks_exact_mut(4).zip([r.eax, r.ebx, r.ecx, r.edx]) {
                bytes.copy_from_slice(&reg.to_le_bytes());
            }
        }
    }

    let mut hypervisors = HypervisorRanges::new();
    let mut hypervisor_timing = None;
    let mut xen_time = None;
    let mut hyperv_features = None;
    if features.contains(X86Features::HYPERVISOR) {
        hypervisors = hypervisor::walk(&reader);
        for range in &hypervisors {
            let read = |offset: u32, sub: u32| range.leaf(offset).map(|l| reader.cpuid2(l, sub));
            match range.kind {
                HypervisorKind::Xen if xen_time.is_none() => {
                    xen_time = read(XEN_TIME_OFFSET, 0).map(|sub0| {
                        let zero = CpuIdResult {
                            eax: 0,
                            ebx: 0,
                            ecx: 0,
                            edx: 0,
                        };
                        XenTimeLeaf::decode(sub0, read(XEN_TIME_OFFSET, 2).unwrap_or(zero))
                    });
                }
                HypervisorKind::HyperV if hyperv_features.is_none() => {
                    hyperv_features = read(HYPERV_FEATURES_OFFSET, 0).map(HyperVFeatures::decode);
                }
                kind if kind.has_timing_leaf() && hypervisor_timing.is_none() => {
                    hypervisor_timing =
                        read(HYPERVISOR_TIMING_OFFSET, 0).map(HypervisorTiming::decode);
                }
                _ => {}
            }
        }
    }
    let first = hypervisors.first();

    let vendor = regs_to_bytes([leaf0.ebx, leaf0.edx, leaf0.ecx]);
    let mut d = X86Discovery {
        vendor,
        max_basic_leaf,
        max_extended_leaf,
        max_hypervisor_leaf: first.map(|r| r.max_leaf),
        hypervisor_vendor: first.map_or([0; 12], |r| r.signature),
        signature,
        family,
        model,
        stepping,
        features,
        brand,
        tsc_leaf,
        frequency_leaf,
        hypervisor_timing,
        xen_time,
        hyperv_features,
        crystal: None,
        hypervisors,
        candidates: Candidates::new(),
        implausible: heapless::Vec::new(),
    };
    d.collect_candidates();
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::vec::Vec;

    use crate::discover::{BASE_FREQUENCY_TOLERANCE_PPB, BRAND_STRING_TOLERANCE_PPB};
    use crate::Accuracy;

    const HYPERVISOR_TIMING: u32 = 0x4000_0010;

    /// A table reader: leaves not in the table read as zeros.
    #[derive(Clone, Default)]
    struct Table(BTreeMap<u32, [u32; 4]>);

    impl Table {
        fn with(mut self, leaf: u32, r: [u32; 4]) -> Self {
            self.0.insert(leaf, r);
            self
        }
    }

    impl CpuIdReader for Table {
        fn cpuid2(&self, eax: u32, _ecx: u32) -> CpuIdResult {
            let r = self.0.get(&eax).copied().unwrap_or([0; 4]);
            CpuIdResult {
                eax: r[0],
                ebx: r[1],
                ecx: r[2],
                edx: r[3],
            }
        }
    }

    const GENU: u32 = 0x756E_6547;
    const INEI: u32 = 0x4965_6E69;
    const NTEL: u32 = 0x6C65_746E;

    fn intel(max_basic: u32, signature: u32) -> Table {
        Table::default()
            .with(0, [max_basic, GENU, NTEL, INEI])
            .with(1, [signature, 0, 0, 1 << 4])
    }

    fn brand_regs(s: &str) -> [[u32; 4]; 3] {
        let mut b = [0u8; 48];
        b[..s.len()].copy_from_slice(s.as_bytes());
        let mut out = [[0u32; 4]; 3];
        for (i, w) in b.chunks_exact(4).enumerate() {
            out[i / 4][i % 4] = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
        }
        out
    }

    fn with_brand(t: Table, max_ext: u32, s: &str) -> Table {
        let r = brand_regs(s);
        t.with(LEAF_EXTENDED_MAX, [max_ext, 0, 0, 0])
            .with(0x8000_0002, r[0])
            .with(0x8000_0003, r[1])
            .with(0x8000_0004, r[2])
    }

    #[test]
    fn leaf_15_with_crystal_is_exact_to_the_millihertz() {
        // 38.4 MHz × 166 / 2 = 3187.2 MHz (Raptor Lake).
        let d = discover_with(intel(0x20, 0xB0671).with(0x15, [2, 166, 38_400_000, 0]));
        let f = d.best().unwrap();
        assert_eq!(f.source(), Source::CpuidTscLeaf);
        assert!(f.accuracy().is_exact());
        assert_eq!(f.as_millihz(), 3_187_200_000_000);
        assert_eq!(d.crystal.unwrap().source, CrystalSource::Reported);
        // A ratio that does not divide: 25 MHz × 7 / 3 = 58 333 333.333 Hz, kept to the mHz.
        let d = discover_with(intel(0x15, 0).with(0x15, [3, 7, 25_000_000, 0]));
        assert_eq!(d.best().unwrap().as_millihz(), 58_333_333_333);
    }

    #[test]
    fn leaf_15_zero_ratio_fields_give_no_candidate() {
        for regs in [[0, 166, 38_400_000, 0], [2, 0, 38_400_000, 0], [0, 0, 0, 0]] {
            let d = discover_with(intel(0x15, 0x906EA).with(0x15, regs));
            assert_eq!(d.best(), None, "{regs:?}");
            assert_eq!(d.crystal, None);
        }
    }

    #[test]
    fn zero_crystal_uses_the_known_model_then_the_derived_one() {
        // i7-8750H: Coffee Lake 06_9EH, 0x15 = 2/184/0, 0x16 base 2200 MHz.
        let t = intel(0x16, 0x906EA)
            .with(0x15, [2, 184, 0, 0])
            .with(0x16, [2200, 4100, 100, 0]);
        let d = discover_with(t);
        assert_eq!((d.family, d.model, d.stepping), (6, 0x9E, 0xA));
        let best = d.best().unwrap();
        assert_eq!(best.source(), Source::CpuidTscLeafKnownCrystal);
        assert_eq!(best.as_hz(), 2_208_000_000);
        assert!(!best.accuracy().is_exact());
        let derived = d.candidate(Source::CpuidTscLeafDerivedCrystal).unwrap();
        // crystal = 2200 MHz × 2 / 184 = 23 913 043 Hz (rounded) → 2 199 999 956 Hz.
        assert_eq!(derived.as_hz(), 2_199_999_956);
        assert_eq!(d.crystal.unwrap().hz, 24_000_000);
        assert_eq!(d.crystal.unwrap().source, CrystalSource::KnownModel);

        // Skylake-X (06_55H) is not in the table: derived, within a ppm of the base.
        let t = intel(0x16, 0x50654)
            .with(0x15, [2, 292, 0, 0])
            .with(0x16, [3500, 4000, 100, 0]);
        let d = discover_with(t);
        let best = d.best().unwrap();
        assert_eq!(best.source(), Source::CpuidTscLeafDerivedCrystal);
        assert!(best.as_hz().abs_diff(3_500_000_000) < 3_500);
        assert_eq!(d.crystal.unwrap().source, CrystalSource::DerivedFromBase);

        // Known crystal without leaf 0x16 (Goldmont has none).
        let t = intel(0x15, 0x506C9).with(0x15, [1, 78, 0, 0]);
        let d = discover_with(t);
        assert_eq!(d.model, 0x5C);
        assert_eq!(d.best().unwrap().as_hz(), 19_200_000 * 78);
        // Not Intel: no table.
        let t = Table::default()
            .with(0, [0x15, 0x6874_7541, 0x444D_4163, 0x6974_6E65])
            .with(1, [0x906EA, 0, 0, 0])
            .with(0x15, [2, 184, 0, 0]);
        assert_eq!(discover_with(t).best(), None);
    }

    #[test]
    fn leaf_15_is_read_on_intel_only() {
        // A complete leaf 0x15 (and a 0x16 base, for the derived crystal) under each vendor.
        let vendors: [(&[u8; 12], bool); 6] = [
            (b"GenuineIntel", true),
            (b"AuthenticAMD", false),
            (b"HygonGenuine", false),
            (b"CentaurHauls", false),
            (b"  Shanghai  ", false),
            (b"GenuineIotel", false),
        ];
        for (vendor, intel) in vendors {
            let regs = |i: usize| u32::from_le_bytes(vendor[i..i + 4].try_into().unwrap());
            let table = |l15| {
                Table::default()
                    .with(0, [0x16, regs(0), regs(8), regs(4)])
                    .with(1, [0x906EA, 0, 0, 0])
                    .with(0x15, l15)
                    .with(0x16, [2200, 4100, 100, 0])
            };
            let d = discover_with(table([2, 200, 24_000_000, 0]));
            assert_eq!(&d.vendor, vendor);
            assert!(d.tsc_leaf.is_some(), "the raw leaf is recorded");
            let exact = d.candidate(Source::CpuidTscLeaf);
            assert_eq!(exact.is_some(), intel, "{:?}", d.vendor_str());
            assert_eq!(d.crystal.is_some(), intel);
            if !intel {
                // Leaf 0x16's base is still a (nominal) candidate; nothing exact.
                assert_eq!(d.best().unwrap().source(), Source::CpuidBaseFrequency);
            }
            // Crystal not enumerated: no derived crystal either.
            let d = discover_with(table([2, 200, 0, 0]));
            let derived = d.candidate(Source::CpuidTscLeafDerivedCrystal);
            assert_eq!(derived.is_some(), intel, "{:?}", d.vendor_str());
        }
    }

    #[test]
    fn leaf_16_is_nominal() {
        let d = discover_with(intel(0x16, 0x906EA).with(0x16, [3600, 5000, 100, 0]));
        let f = d.best().unwrap();
        assert_eq!(f.source(), Source::CpuidBaseFrequency);
        assert_eq!(f.as_hz(), 3_600_000_000);
        assert_eq!(
            f.accuracy(),
            Accuracy::Nominal {
                tolerance_ppb: BASE_FREQUENCY_TOLERANCE_PPB
            }
        );
        // Upper 16 bits are reserved.
        let d = discover_with(intel(0x16, 0).with(0x16, [0xFFFF_0000, 0, 0, 0]));
        assert_eq!(d.best(), None);
    }

    #[test]
    fn leaves_above_the_maximum_do_not_exist() {
        // Haswell i5-4258U: max basic 0xD; the dump holds junk for 0x15/0x16.
        let t = intel(0xD, 0x40651)
            .with(0x15, [7, 0x340, 0x340, 0])
            .with(0x16, [7, 0x340, 0x340, 0]);
        let d = discover_with(t);
        assert_eq!(d.tsc_leaf, None);
        assert_eq!(d.frequency_leaf, None);
        assert_eq!(d.best(), None);

        // Extended leaves: 0x80000000 EAX below 0x80000000 means none.
        let t = with_brand(intel(1, 0), 0x0000_0005, "CPU @ 2.00GHz")
            .with(0x8000_0007, [0, 0, 0, 1 << 8])
            .with(0x8000_0001, [0, 0, 0, 1 << 27]);
        let d = discover_with(t);
        assert_eq!(d.max_extended_leaf, None);
        assert!(!d.invariant_tsc());
        assert!(!d.features.contains(X86Features::RDTSCP));
        assert_eq!(d.best(), None);
        // Max extended 0x80000006: 0x80000007 is junk, the brand is real.
        let t = with_brand(intel(1, 0), 0x8000_0006, "CPU @ 2.00GHz")
            .with(0x8000_0007, [0, 0, 0, 1 << 8]);
        let d = discover_with(t);
        assert!(!d.invariant_tsc());
        assert_eq!(d.best().unwrap().as_hz(), 2_000_000_000);
        // Max extended 0x80000003: no brand string at all.
        let t = with_brand(intel(1, 0), 0x8000_0003, "CPU @ 2.00GHz");
        let d = discover_with(t);
        assert_eq!(d.brand_bytes(), b"");
        assert_eq!(d.brand_str(), None);
        assert_eq!(d.best(), None);
    }

    fn hypervisor_table(max_hv: u32, tsc_khz: u32, hv_bit: bool) -> Table {
        let ecx = if hv_bit { 1 << 31 } else { 0 };
        Table::default()
            .with(0, [0x16, GENU, NTEL, INEI])
            .with(1, [0x906EA, 0, ecx, 1 << 4])
            .with(0x16, [2200, 0, 0, 0])
            .with(
                LEAF_HYPERVISOR,
                [max_hv, 0x4B4D_564B, 0x564B_4D56, 0x0000_004D],
            )
            .with(HYPERVISOR_TIMING, [tsc_khz, 1_000_000, 0, 0])
    }

    #[test]
    fn hypervisor_leaf_wins_with_the_hypervisor_bit() {
        let d = discover_with(hypervisor_table(0x4000_0010, 2_300_000, true));
        assert!(d.hypervisor());
        assert_eq!(&d.hypervisor_vendor, b"KVMKVMKVM\0\0\0");
        let f = d.best().unwrap();
        assert_eq!(f.source(), Source::HypervisorLeaf);
        assert!(f.accuracy().is_exact());
        assert_eq!(f.as_hz(), 2_300_000_000);
    }

    #[test]
    fn hypervisor_leaf_needs_bit_max_leaf_and_nonzero_rate() {
        // No hypervisor bit: 0x40000010 is junk on bare metal.
        let d = discover_with(hypervisor_table(0x4000_0010, 2_300_000, false));
        assert_eq!(d.max_hypervisor_leaf, None);
        assert_eq!(d.best().unwrap().source(), Source::CpuidBaseFrequency);
        // Max hypervisor leaf below 0x40000010 (the KVM guest dump: 0x40000001).
        let d = discover_with(hypervisor_table(0x4000_0001, 2_300_000, true));
        assert_eq!(d.hypervisor_timing, None);
        assert_eq!(d.best().unwrap().source(), Source::CpuidBaseFrequency);
        // A rate of 0 means unknown.
        let d = discover_with(hypervisor_table(0x4000_0010, 0, true));
        assert!(d.hypervisor_timing.is_some());
        assert_eq!(d.best().unwrap().source(), Source::CpuidBaseFrequency);
        // EAX that is no hypervisor leaf number: only the vendor leaf.
        let d = discover_with(hypervisor_table(0x8000_0010, 2_300_000, true));
        assert_eq!(d.max_hypervisor_leaf, Some(LEAF_HYPERVISOR));
        assert_eq!(d.hypervisor_timing, None);
    }

    /// A guest (hypervisor bit) on an Intel part with 0x16 base 2200 MHz, plus `ranges`.
    fn guest(ranges: &[(u32, [u32; 4])]) -> Table {
        let mut t = Table::default()
            .with(0, [0x16, GENU, NTEL, INEI])
            .with(1, [0x906EA, 0, 1 << 31, 1 << 4])
            .with(0x16, [2200, 0, 0, 0]);
        for &(leaf, r) in ranges {
            t = t.with(leaf, r);
        }
        t
    }

    /// EBX, ECX, EDX of a signature.
    fn sig(s: &[u8; 12]) -> [u32; 3] {
        let w = |i: usize| u32::from_le_bytes([s[i], s[i + 1], s[i + 2], s[i + 3]]);
        [w(0), w(4), w(8)]
    }

    fn range(eax: u32, s: &[u8; 12]) -> [u32; 4] {
        let [b, c, d] = sig(s);
        [eax, b, c, d]
    }

    #[test]
    fn xen_time_leaf_at_either_base() {
        // Xen's cpuid.h: base + 3 sub-leaf 0 = flags, tsc_mode, guest kHz, incarnation.
        let xen_time = [0b10, 0, 2_893_437, 3];
        let plain = guest(&[
            (0x4000_0000, range(0x4000_0005, b"XenVMMXenVMM")),
            (0x4000_0003, xen_time),
        ]);
        // With Viridian: Hyper-V's interface first, Xen's at 0x40000100.
        let viridian = guest(&[
            (0x4000_0000, range(0x4000_0006, b"Microsoft Hv")),
            (0x4000_0003, [0, 0, 0, 0]),
            (0x4000_0100, range(0x4000_0105, b"XenVMMXenVMM")),
            (0x4000_0103, xen_time),
        ]);
        for (t, xen_base) in [(plain, 0x4000_0000), (viridian, 0x4000_0100)] {
            let d = discover_with(t);
            let f = d.best().unwrap();
            assert_eq!(f.source(), Source::XenTimeLeaf);
            assert_eq!(f.accuracy(), Accuracy::Exact);
            assert_eq!(f.as_hz(), 2_893_437_000);
            assert_eq!(d.xen_time.unwrap().incarnation, 3);
            let xen = d
                .hypervisors()
                .iter()
                .find(|r| r.kind == HypervisorKind::Xen);
            assert_eq!(xen.unwrap().base, xen_base);
            // 0x16's nominal base (2200 MHz) disagrees with Xen's 2893 MHz.
            let x = d.disagreements().next().unwrap();
            assert_eq!(
                (x.a, x.b),
                (Source::XenTimeLeaf, Source::CpuidBaseFrequency)
            );
            assert!(!d.hyperv_tsc_frequency_msr());
        }
    }

    #[test]
    fn xen_time_leaf_needs_its_range_and_a_rate() {
        // Xen's range ends below base + 3: no time leaf.
        let d = discover_with(guest(&[
            (0x4000_0000, range(0x4000_0002, b"XenVMMXenVMM")),
            (0x4000_0003, [0, 0, 2_893_437, 0]),
        ]));
        assert_eq!(d.xen_time, None);
        assert_eq!(d.best().unwrap().source(), Source::CpuidBaseFrequency);
        // A rate of 0: the leaf is recorded, no candidate.
        let d = discover_with(guest(&[
            (0x4000_0000, range(0x4000_0005, b"XenVMMXenVMM")),
            (0x4000_0003, [0, 0, 0, 0]),
        ]));
        assert!(d.xen_time.is_some());
        assert_eq!(d.candidate(Source::XenTimeLeaf), None);
        // Xen's base + 0x10 is not VMware's timing leaf.
        let d = discover_with(guest(&[
            (0x4000_0000, range(0x4000_0010, b"XenVMMXenVMM")),
            (0x4000_0010, [2_300_000, 0, 0, 0]),
        ]));
        assert_eq!(d.hypervisor_timing, None);
        // The time leaf of a range that is not Xen's is not read as one.
        let d = discover_with(guest(&[
            (0x4000_0000, range(0x4000_0005, b"KVMKVMKVM\0\0\0")),
            (0x4000_0003, [0, 0, 2_893_437, 0]),
        ]));
        assert_eq!(d.xen_time, None);
    }

    #[test]
    fn hyperv_frequency_msr_is_noted_not_a_candidate() {
        let hv = |eax: u32, edx: u32, max: u32| {
            discover_with(guest(&[
                (0x4000_0000, range(max, b"Microsoft Hv")),
                (0x4000_0003, [eax, 0, 0, edx]),
            ]))
        };
        let d = hv(1 << 11, 1 << 8, 0x4000_000A);
        assert!(d.hyperv_tsc_frequency_msr());
        assert_eq!(d.best().unwrap().source(), Source::CpuidBaseFrequency);
        assert!(!hv(1 << 11, 0, 0x4000_000A).hyperv_tsc_frequency_msr());
        assert!(!hv(0, 1 << 8, 0x4000_000A).hyperv_tsc_frequency_msr());
        // The feature leaf above the range's maximum does not exist.
        assert!(!hv(1 << 11, 1 << 8, 0x4000_0002).hyperv_tsc_frequency_msr());
        // Without the hypervisor bit nothing is walked.
        let mut t = guest(&[
            (0x4000_0000, range(0x4000_000A, b"Microsoft Hv")),
            (0x4000_0003, [1 << 11, 0, 0, 1 << 8]),
        ]);
        t = t.with(1, [0x906EA, 0, 0, 1 << 4]);
        let d = discover_with(t);
        assert!(d.hypervisors().is_empty());
        assert!(!d.hyperv_tsc_frequency_msr());
    }

    #[test]
    fn timing_leaf_is_found_through_the_walk() {
        // KVM behind Hyper-V's interface, with its timing leaf at its own base + 0x10.
        let d = discover_with(guest(&[
            (0x4000_0000, range(0x4000_000A, b"Microsoft Hv")),
            (0x4000_0010, [1_000_000, 0, 0, 0]),
            (0x4000_0100, range(0x4000_0110, b"KVMKVMKVM\0\0\0")),
            (0x4000_0110, [2_300_000, 1_000_000, 0, 0]),
        ]));
        let f = d.best().unwrap();
        assert_eq!(f.source(), Source::HypervisorLeaf);
        assert_eq!(f.as_hz(), 2_300_000_000);
        // VMware, ACRN, TCG and unknown signatures: 0x40000010 as before.
        for s in [
            b"VMwareVMware",
            b"ACRNACRNACRN",
            b"TCGTCGTCGTCG",
            b"VBoxVBoxVBox",
        ] {
            let d = discover_with(guest(&[
                (0x4000_0000, range(0x4000_0010, s)),
                (0x4000_0010, [2_300_000, 0, 0, 0]),
            ]));
            assert_eq!(d.best().unwrap().source(), Source::HypervisorLeaf, "{s:?}");
        }
    }

    #[test]
    fn implausible_claims_are_no_candidates() {
        // Leaf 0x16 = 0xFFFF MHz: not "65.5 GHz, nominal".
        let d = discover_with(intel(0x16, 0x906EA).with(0x16, [0xFFFF, 0, 0, 0]));
        assert_eq!(d.best(), None);
        assert_eq!(
            d.implausible(),
            [Implausible {
                source: Source::CpuidBaseFrequency,
                hz: 65_535_000_000
            }]
        );
        // Leaf 0x15 = 0xFFFFFFFF / 2 over a crystal derived from that base (Skylake-X: not in
        // the table): 31 Hz × 2^31 = 66.6 GHz.
        let d = discover_with(
            intel(0x16, 0x50654)
                .with(0x15, [2, u32::MAX, 0, 0])
                .with(0x16, [0xFFFF, 0, 0, 0]),
        );
        assert_eq!(d.best(), None);
        let sources: Vec<(Source, u64)> =
            d.implausible().iter().map(|i| (i.source, i.hz)).collect();
        assert_eq!(
            sources,
            [
                (Source::CpuidTscLeafDerivedCrystal, 66_571_993_072),
                (Source::CpuidBaseFrequency, 65_535_000_000)
            ]
        );
        // The bounds themselves are plausible; one step past them is not.
        for (khz, ok) in [
            (10_000, true),
            (9_999, false),
            (10_000_000, true),
            (10_000_001, false),
        ] {
            let d = discover_with(hypervisor_table(0x4000_0010, khz, true));
            assert_eq!(d.candidate(Source::HypervisorLeaf).is_some(), ok, "{khz}");
            assert_eq!(d.implausible().len(), usize::from(!ok), "{khz}");
        }
    }

    #[test]
    fn exact_claims_disagree_only_past_their_resolution() {
        // Xen's 2 300 000 kHz against an exact 0x15 figure (25 MHz × n / 25 000).
        let with_15 = |n: u32| {
            discover_with(
                guest(&[
                    (0x4000_0000, range(0x4000_0005, b"XenVMMXenVMM")),
                    (0x4000_0003, [0, 0, 2_300_000, 0]),
                ])
                .with(0x15, [25_000, n, 25_000_000, 0]),
            )
        };
        // 1 kHz apart: within Xen's 1 kHz unit (435 ppb of 2.3 GHz) → no disagreement.
        let d = with_15(2_300_001);
        assert_eq!(d.candidates().len(), 3);
        assert!(d.disagreements().all(|x| x.b == Source::CpuidBaseFrequency));
        // 2 kHz apart → a disagreement between the two exact claims.
        let d = with_15(2_300_002);
        let x = d.disagreements().next().unwrap();
        assert_eq!((x.a, x.b), (Source::XenTimeLeaf, Source::CpuidTscLeaf));
        assert_eq!((x.apart_ppb, x.allowed_ppb), (869, 435));
        assert_eq!(
            d.best().unwrap().source(),
            Source::XenTimeLeaf,
            "still the first"
        );
    }

    #[test]
    fn feature_bits() {
        let t = Table::default()
            .with(0, [7, GENU, NTEL, INEI])
            .with(1, [0, 0, (1 << 24) | (1 << 31), 1 << 4])
            .with(7, [0, 1 << 1, 0, 0])
            .with(LEAF_EXTENDED_MAX, [0x8000_0008, 0, 0, 0])
            .with(0x8000_0001, [0, 0, 0, 1 << 27])
            .with(0x8000_0007, [0, 0, 0, 1 << 8]);
        let d = discover_with(t);
        assert_eq!(d.features, X86Features::all());
        assert_eq!(d.vendor_str(), Some("GenuineIntel"));
        assert!(d.is_intel());
        // Leaf 7 above the maximum: no TSC_ADJUST.
        let t = Table::default()
            .with(0, [6, GENU, NTEL, INEI])
            .with(7, [0, 1 << 1, 0, 0]);
        assert!(!discover_with(t).features.contains(X86Features::TSC_ADJUST));
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn live_cpu() {
        let d = discover();
        // Every x86_64 CPU has a TSC and at least leaf 1 and the brand leaves... except
        // that hypervisors may hide things; only the TSC bit and leaf 1 are certain.
        assert!(d.features.contains(X86Features::TSC), "{d:?}");
        assert!(d.max_basic_leaf >= 1);
        assert_ne!(d.vendor, [0; 12]);
    }

    #[test]
    fn brand_string_candidate_is_nominal_and_last_in_trust() {
        let t = with_brand(
            intel(0x16, 0xA0660).with(0x16, [2100, 0, 0, 0]),
            0x8000_0004,
            "Intel(R) Core(TM) i3-10110U CPU @ 2.10GHz",
        );
        let d = discover_with(t);
        assert_eq!(
            d.brand_str(),
            Some("Intel(R) Core(TM) i3-10110U CPU @ 2.10GHz")
        );
        let b = d.candidate(Source::BrandString).unwrap();
        assert_eq!(b.as_hz(), 2_100_000_000);
        assert_eq!(
            b.accuracy(),
            Accuracy::Nominal {
                tolerance_ppb: BRAND_STRING_TOLERANCE_PPB
            }
        );
        assert_eq!(d.best().unwrap().source(), Source::CpuidBaseFrequency);
        let sources: Vec<Source> = d.candidates().iter().map(|f| f.source()).collect();
        assert_eq!(sources, [Source::CpuidBaseFrequency, Source::BrandString]);
    }

    #[test]
    fn comet_lake_known_crystal_beats_the_base() {
        // i3-10110U: 0x15 = 2/216/0; base 2100 MHz; the TSC runs at 2592 MHz.
        let t = intel(0x16, 0xA0660)
            .with(0x15, [2, 216, 0, 0])
            .with(0x16, [2100, 4100, 100, 0]);
        let d = discover_with(t);
        assert_eq!(d.model, 0xA6);
        assert_eq!(d.best().unwrap().as_hz(), 2_592_000_000);
    }

    #[test]
    fn out_of_range_rates_are_dropped() {
        // 0x15 giving 4 GHz × 2^32: beyond Frequency::MAX_HZ.
        let d = discover_with(intel(0x15, 0).with(0x15, [1, u32::MAX, u32::MAX, 0]));
        assert_eq!(d.best(), None);
        // 0x15 giving below 1 kHz.
        let d = discover_with(intel(0x15, 0).with(0x15, [1000, 1, 1000, 0]));
        assert_eq!(d.best(), None);
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        fn mix(seed: u64, leaf: u32, sub: u32, reg: u32) -> u32 {
            // splitmix64 of the inputs: any value, deterministic.
            let mut z = seed
                ^ (u64::from(leaf) << 32 | u64::from(sub)).wrapping_mul(0x9E37_79B9_7F4A_7C15)
                ^ u64::from(reg).wrapping_mul(0xD1B5_4A32_D192_ED03);
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            (z ^ (z >> 31)) as u32
        }

        /// A CPU whose interesting leaves are drawn by proptest and whose every other leaf
        /// (including everything above the maxima) is junk.
        #[derive(Clone, Debug)]
        struct Fuzz {
            seed: u64,
            max_basic: u32,
            max_ext: u32,
            max_hv: u32,
            intel: bool,
            leaf1: [u32; 4],
            l15: [u32; 4],
            l16: [u32; 4],
            h10: [u32; 4],
            masked: bool,
        }

        impl Fuzz {
            fn raw(&self, leaf: u32, sub: u32) -> [u32; 4] {
                let junk = |r| mix(self.seed, leaf, sub, r);
                match leaf {
                    0 if self.intel => [self.max_basic, GENU, NTEL, INEI],
                    0 => [self.max_basic, junk(1), junk(2), junk(3)],
                    1 => self.leaf1,
                    0x15 => self.l15,
                    0x16 => self.l16,
                    LEAF_HYPERVISOR => [self.max_hv, junk(1), junk(2), junk(3)],
                    HYPERVISOR_TIMING => self.h10,
                    LEAF_EXTENDED_MAX => [self.max_ext, junk(1), junk(2), junk(3)],
                    _ => [junk(0), junk(1), junk(2), junk(3)],
                }
            }

            /// Whether `leaf` exists on this CPU by the architectural rules.
            fn exists(&self, leaf: u32) -> bool {
                let hv_bit = self.max_basic >= 1 && self.leaf1[2] >> 31 == 1;
                match leaf {
                    0 | LEAF_EXTENDED_MAX => true,
                    0..=0x3FFF_FFFF => leaf <= self.max_basic,
                    0x4000_0000..=0x4FFF_FFFF => {
                        let max = if (0x4000_0000..=0x4FFF_FFFF).contains(&self.max_hv) {
                            self.max_hv
                        } else {
                            LEAF_HYPERVISOR
                        };
                        hv_bit && leaf <= max
                    }
                    0x8000_0000..=u32::MAX => self.max_ext >> 16 == 0x8000 && leaf <= self.max_ext,
                    _ => false,
                }
            }
        }

        impl CpuIdReader for Fuzz {
            fn cpuid2(&self, eax: u32, ecx: u32) -> CpuIdResult {
                let r = if self.masked && !self.exists(eax) {
                    [0; 4]
                } else {
                    self.raw(eax, ecx)
                };
                CpuIdResult {
                    eax: r[0],
                    ebx: r[1],
                    ecx: r[2],
                    edx: r[3],
                }
            }
        }

        fn reg() -> impl Strategy<Value = u32> {
            prop_oneof![
                Just(0u32),
                1u32..300,
                1_000_000u32..40_000_000,
                any::<u32>()
            ]
        }

        fn regs() -> impl Strategy<Value = [u32; 4]> {
            [reg(), reg(), reg(), reg()]
        }

        fn fuzz() -> impl Strategy<Value = Fuzz> {
            (
                any::<u64>(),
                prop_oneof![0u32..0x20, any::<u32>()],
                prop_oneof![
                    0x8000_0000u32..0x8000_0010,
                    0x7FFF_FFF0u32..0x8000_0000,
                    any::<u32>()
                ],
                prop_oneof![0x4000_0000u32..0x4000_0012, any::<u32>()],
                any::<bool>(),
                (any::<u32>(), any::<u32>(), any::<u32>(), any::<u32>()),
                (regs(), regs(), regs()),
            )
                .prop_map(
                    |(seed, max_basic, max_ext, max_hv, intel, l1, (l15, l16, h10))| Fuzz {
                        seed,
                        max_basic,
                        max_ext,
                        max_hv,
                        intel,
                        leaf1: [l1.0, l1.1, l1.2, l1.3],
                        l15,
                        l16,
                        h10,
                        masked: false,
                    },
                )
        }

        const TRUST_ORDER: [Source; 7] = [
            Source::XenTimeLeaf,
            Source::HypervisorLeaf,
            Source::CpuidTscLeaf,
            Source::CpuidTscLeafKnownCrystal,
            Source::CpuidTscLeafDerivedCrystal,
            Source::CpuidBaseFrequency,
            Source::BrandString,
        ];

        fn check_invariants(d: &X86Discovery) {
            for f in d.candidates() {
                let hz = f.as_millihz() / 1000;
                assert!((MIN_PLAUSIBLE_TSC_HZ..=MAX_PLAUSIBLE_TSC_HZ).contains(&hz));
                let exact_source = matches!(
                    f.source(),
                    Source::CpuidTscLeaf | Source::HypervisorLeaf | Source::XenTimeLeaf
                );
                assert_eq!(f.accuracy().is_exact(), exact_source, "{f:?}");
            }
            if let Some(b) = d.best() {
                assert!(d.candidates().contains(&b));
                assert_eq!(d.candidates().first(), Some(&b));
                // The candidates come in the order of the sources' trust.
                let rank = |s: Source| TRUST_ORDER.iter().position(|&t| t == s).unwrap();
                assert!(d
                    .candidates()
                    .windows(2)
                    .all(|w| rank(w[0].source()) < rank(w[1].source())));
            } else {
                assert!(d.candidates().is_empty());
            }
            if d.candidate(Source::HypervisorLeaf).is_some() {
                assert!(d.hypervisor());
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(512))]

            /// Any reader output at all: no panic, and the candidate list keeps its rules.
            #[test]
            fn any_reader_output_is_safe(seed in any::<u64>()) {
                let reader = move |leaf: u32, sub: u32| CpuIdResult {
                    eax: mix(seed, leaf, sub, 0),
                    ebx: mix(seed, leaf, sub, 1),
                    ecx: mix(seed, leaf, sub, 2),
                    edx: mix(seed, leaf, sub, 3),
                };
                check_invariants(&discover_with(reader));
            }

            /// Junk above any maximum leaf changes nothing: discovery equals discovery on
            /// the same CPU with every non-existent leaf zeroed.
            #[test]
            fn leaves_above_the_maxima_are_never_used(f in fuzz()) {
                let raw = discover_with(f.clone());
                let masked = discover_with(Fuzz { masked: true, ..f });
                check_invariants(&raw);
                prop_assert_eq!(raw, masked);
            }

            /// A complete leaf 0x15 is the best claim unless a hypervisor leaf outranks it,
            /// and it is exact to the millihertz.
            #[test]
            fn complete_leaf_15_is_exact(
                den in 1u32..1000, num in 1u32..1000, crystal in 1_000_000u32..100_000_000,
            ) {
                let d = discover_with(intel(0x15, 0x906EA).with(0x15, [den, num, crystal, 0]));
                let want = (u128::from(crystal) * u128::from(num) * 1000
                    + u128::from(den) / 2) / u128::from(den);
                match d.best() {
                    Some(f) => {
                        prop_assert_eq!(f.source(), Source::CpuidTscLeaf);
                        prop_assert_eq!(u128::from(f.as_millihz()), want);
                    }
                    None => prop_assert!(!(10_000_000_000..=10_000_000_000_000).contains(&want)),
                }
            }
        }
    }
}
