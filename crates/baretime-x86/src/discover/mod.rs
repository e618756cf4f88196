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
//! calibration ([`baretime::calibrate_and_verify`]) is what settles it.
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

use crate::bytes::{regs_to_bytes, until_nul};
use crate::candidates::{Candidates, Disagreement, Implausible, MAX_CANDIDATES};
#[cfg(doc)]
use crate::candidates::{
    BASE_FREQUENCY_TOLERANCE_PPB, BRAND_STRING_TOLERANCE_PPB, KNOWN_CRYSTAL_TOLERANCE_PPB,
};
use crate::saturate_u64;
#[cfg(doc)]
use baretime::Accuracy;
use baretime::{Frequency, Source};
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
    /// say which: verify the pick with [`baretime::calibrate_and_verify`].
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
    /// use baretime_x86::replay;
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

    /// Adds a claim that a ring-0 kernel read from the hypervisor —
    /// [`Source::KvmPvclock`], [`Source::HyperVTscFrequencyMsr`] (see
    /// [`crate::paravirt`]) — at its trust position: ahead of every CPUID claim,
    /// the Hyper-V MSR before pvclock (`discover::paravirt::insert_claim`). A claim
    /// from any other source goes last. Like the CPUID claims, a rate outside
    /// [`MIN_PLAUSIBLE_TSC_HZ`]..=[`MAX_PLAUSIBLE_TSC_HZ`] is no candidate: it is listed in
    /// [`X86Discovery::implausible`] and `false` is returned. When the list is full (every
    /// CPUID source and two ring-0 claims), its least trusted candidate makes room.
    /// [`X86Discovery::best`] and [`X86Discovery::disagreements`] then include the claim.
    ///
    /// ```
    /// use baretime_x86::replay;
    /// use baretime_x86::PvclockTimeInfo;
    /// use baretime::Source;
    /// // A KVM guest with no TSC leaf (this project's machines), and what pvclock said.
    /// let mut d = replay(b"CPUID 00000000: 00000016-68747541-444D4163-69746E65\n\
    ///                      CPUID 00000001: 00A10F11-00000800-80202001-078BFBFF\n\
    ///                      CPUID 40000000: 40000001-4B4D564B-564B4D56-0000004D\n").unwrap();
    /// assert_eq!(d.best(), None);
    /// let pv = PvclockTimeInfo { tsc_to_system_mul: 0xD15F_52CE, tsc_shift: -1, ..Default::default() };
    /// assert!(d.add_claim(pv.tsc_frequency().unwrap()));
    /// assert_eq!(d.best().unwrap().source(), Source::KvmPvclock);
    /// assert_eq!(d.best().unwrap().as_hz(), 2_445_404_000);
    /// ```
    pub fn add_claim(&mut self, claim: Frequency) -> bool {
        let hz = claim.as_hz();
        if !(MIN_PLAUSIBLE_TSC_HZ..=MAX_PLAUSIBLE_TSC_HZ).contains(&hz) {
            // A full list of implausible claims loses this one; the return says so anyway.
            let _ = self.implausible.push(Implausible {
                source: claim.source(),
                hz,
            });
            return false;
        }
        crate::paravirt::insert_claim(&mut self.candidates, claim);
        true
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
    /// ([`paravirt::HV_X64_MSR_TSC_FREQUENCY`](crate::paravirt::HV_X64_MSR_TSC_FREQUENCY)) can be read: a figure only a ring-0 kernel
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
                        hz: saturate_u64(c.millihz / 1000),
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
mod tests;
