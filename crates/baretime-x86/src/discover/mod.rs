//! x86 discovery: CPUID decoded through a [`CpuidSource`]. The user-facing description (the
//! trust order of the sources, plausibility, vendors) is on [`X86Discovery`].

mod brand;
mod crystal;
mod hypervisor;
mod leaves;
mod sources;

pub use hypervisor::{HypervisorKind, HypervisorRange};

use brand::parse_brand_frequency;
use crystal::known_crystal_hz;
use leaves::{
    decode_signature, FrequencyLeaf, HyperVFeatures, HypervisorTiming, TscLeaf, XenTimeLeaf,
};

use crate::bytes::{regs_to_bytes, until_nul};
use crate::candidates::{Candidates, Disagreement, Implausible, MAX_CANDIDATES};
use crate::cpuid::{CpuidRegs, CpuidSource};
use crate::paravirt::KvmFeatures;
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

/// The CPUID feature bits that matter for using the TSC as a clock: a set, read with
/// [`X86Features::contains`] (`a | b` is the set of both).
///
/// ```
/// use baretime_x86::X86Features;
/// let f = X86Features::TSC | X86Features::INVARIANT_TSC;
/// assert!(f.contains(X86Features::INVARIANT_TSC));
/// assert!(!f.contains(X86Features::INVARIANT_TSC | X86Features::HYPERVISOR));
/// assert_eq!(format!("{f:?}"), "X86Features(TSC | INVARIANT_TSC)");
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct X86Features(u32);

impl X86Features {
    /// Leaf 0x1 EDX bit 4: the RDTSC instruction exists.
    pub const TSC: X86Features = X86Features(1 << 0);
    /// Leaf 0x80000001 EDX bit 27: RDTSCP exists (with IA32_TSC_AUX).
    pub const RDTSCP: X86Features = X86Features(1 << 1);
    /// Leaf 0x80000007 EDX bit 8: the TSC runs at a constant rate in every P-, C- and
    /// T-state. Without it the TSC is no clock.
    pub const INVARIANT_TSC: X86Features = X86Features(1 << 2);
    /// Leaf 0x7 EBX bit 1: the IA32_TSC_ADJUST MSR exists.
    pub const TSC_ADJUST: X86Features = X86Features(1 << 3);
    /// Leaf 0x1 ECX bit 24: the local APIC timer has TSC-deadline mode.
    pub const TSC_DEADLINE: X86Features = X86Features(1 << 4);
    /// Leaf 0x1 ECX bit 31: running under a hypervisor.
    pub const HYPERVISOR: X86Features = X86Features(1 << 5);

    /// Every flag with its name, in bit order (for `Debug`).
    const NAMED: [(X86Features, &'static str); 6] = [
        (X86Features::TSC, "TSC"),
        (X86Features::RDTSCP, "RDTSCP"),
        (X86Features::INVARIANT_TSC, "INVARIANT_TSC"),
        (X86Features::TSC_ADJUST, "TSC_ADJUST"),
        (X86Features::TSC_DEADLINE, "TSC_DEADLINE"),
        (X86Features::HYPERVISOR, "HYPERVISOR"),
    ];

    /// No flag.
    pub(crate) const fn empty() -> X86Features {
        X86Features(0)
    }

    /// Every flag.
    #[cfg(test)]
    pub(crate) const fn all() -> X86Features {
        X86Features(0x3F)
    }

    /// The raw bits (bit 0 `TSC` … bit 5 `HYPERVISOR`).
    #[cfg(feature = "defmt")]
    pub(crate) const fn bits(self) -> u32 {
        self.0
    }

    /// Whether every flag of `other` is set here.
    pub const fn contains(self, other: X86Features) -> bool {
        self.0 & other.0 == other.0
    }

    /// Sets (`on`) or clears the flags of `other`.
    pub(crate) fn set(&mut self, other: X86Features, on: bool) {
        if on {
            self.0 |= other.0;
        } else {
            self.0 &= !other.0;
        }
    }
}

impl core::ops::BitOr for X86Features {
    type Output = X86Features;
    fn bitor(self, other: X86Features) -> X86Features {
        X86Features(self.0 | other.0)
    }
}

/// As bitflags writes it: `X86Features(TSC | RDTSCP)`, `X86Features(0x0)` when empty.
impl core::fmt::Debug for X86Features {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("X86Features(")?;
        if self.0 == 0 {
            f.write_str("0x0")?;
        }
        let mut first = true;
        for (flag, name) in X86Features::NAMED {
            if self.contains(flag) {
                if !first {
                    f.write_str(" | ")?;
                }
                first = false;
                f.write_str(name)?;
            }
        }
        f.write_str(")")
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

/// Everything x86 CPUID says about the TSC: the flags that say whether it can be trusted as
/// a clock, and every rate the CPU or the hypervisor states for it. Made by [`discover`] (the
/// CPU this code runs on) or [`discover_with`] (any [`CpuidSource`]: a recorded dump, a
/// function). Discovery never measures.
///
/// # Where the rates come from
///
/// Each source is read in this order; the first candidate ([`X86Discovery::best`]) is the
/// most trusted:
///
/// | source | leaf | accuracy |
/// | --- | --- | --- |
/// | [`Source::XenTimeLeaf`] | Xen range base + 3 sub-leaf 0, ECX (kHz) | exact, to 1 kHz |
/// | [`Source::HypervisorLeaf`] | range base + 0x10 (0x40000010) EAX (kHz), any range but Xen's and Hyper-V's | exact, to 1 kHz |
/// | [`Source::CpuidTscLeaf`] | 0x15 (Intel only): ECX (crystal Hz) × EBX / EAX | exact (a rational: kept to the mHz) |
/// | [`Source::CpuidTscLeafKnownCrystal`] | 0x15 ratio (Intel only), ECX = 0, crystal from the model table | nominal, ±500 ppm |
/// | [`Source::CpuidTscLeafDerivedCrystal`] | 0x15 ratio (Intel only), ECX = 0, crystal = 0x16 base × EAX / EBX | nominal, ±1 % |
/// | [`Source::CpuidBaseFrequency`] | 0x16 EAX (MHz) | nominal, ±1 % |
/// | [`Source::BrandString`] | 0x80000002..4, `@ 2.10GHz` / `1700MHz` | nominal, ±25 % |
///
/// A ring-0 kernel adds what the hypervisor tells it through MSRs ([`KvmPvclock`],
/// [`read_hyperv_tsc_frequency`]) with [`X86Discovery::add_claim`], ahead of all of these.
///
/// A leaf above the maximum its range reports (leaf 0 EAX, 0x80000000 EAX, a hypervisor
/// range's EAX) does not exist, whatever the source returns for it: Intel CPUs answer such
/// leaves with the data of the highest basic leaf, and QEMU TCG with junk. A zero numerator
/// or denominator in leaf 0x15, a zero base in 0x16 and a zero rate in a hypervisor leaf
/// mean "unknown": no candidate.
///
/// # Hypervisors
///
/// With the hypervisor bit ([`X86Features::HYPERVISOR`]), the hypervisor ranges 0x40000000,
/// 0x40000100, … are walked ([`X86Discovery::hypervisors`]), each named by its signature
/// ([`HypervisorKind`]). Xen may sit at 0x40000100 behind Hyper-V's interface ("Viridian"),
/// and KVM likewise with Hyper-V enlightenments. Xen's time leaf gives the guest TSC rate in
/// kHz; Hyper-V's feature leaf says whether the TSC frequency MSR can be read
/// ([`X86Discovery::hyperv_tsc_frequency_msr`]), KVM's which pvclock MSR a kernel registers
/// ([`X86Discovery::kvm_features`]). The hypervisors' kHz figures are [`Accuracy::Exact`]:
/// the rate the hypervisor gives the guest, stated by the hypervisor; its resolution (1 kHz,
/// 0.4 ppm of 2.5 GHz) is [`Source::resolution_hz`], which [`Disagreement`] allows for.
///
/// # Plausibility and disagreement
///
/// A claim outside [`MIN_PLAUSIBLE_TSC_HZ`]..=[`MAX_PLAUSIBLE_TSC_HZ`] is no candidate: it is
/// dropped and listed in [`X86Discovery::implausible`] (leaf 0x16 = 0xFFFF MHz is not
/// "65.5 GHz, nominal"). Candidates that disagree beyond their stated accuracies are listed
/// by [`X86Discovery::disagreements`]; [`X86Discovery::best`] is still the first, and
/// calibration ([`baretime::calibrate_and_verify`]) is what settles it.
///
/// # Vendors
///
/// Leaf 0x15 is the TSC/crystal ratio only in Intel's CPUID (the SDM); it is read on
/// `GenuineIntel` parts only, as Linux's `native_calibrate_tsc` does (`X86_VENDOR_INTEL`).
/// AMD's and Hygon's manuals do not define it with that meaning, and Centaur/Zhaoxin
/// (`CentaurHauls`, `  Shanghai  `) document no TSC leaf that Linux uses. An exact claim from
/// a leaf that the vendor never defined would outrank every measurement, so on other vendors
/// it yields no candidate and no crystal. The known-crystal table follows the Intel SDM and
/// Linux's `native_calibrate_tsc`.
///
/// [`KvmPvclock`]: crate::KvmPvclock
/// [`read_hyperv_tsc_frequency`]: crate::read_hyperv_tsc_frequency
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct X86Discovery {
    /// Vendor string from leaf 0 (EBX, EDX, ECX).
    vendor: [u8; 12],
    /// Leaf 0 EAX: the highest basic leaf.
    max_basic_leaf: u32,
    /// Leaf 0x80000000 EAX when it lies in 0x80000000..=0x8000FFFF.
    max_extended_leaf: Option<u32>,
    /// Display family, model and stepping (0 when leaf 1 does not exist).
    family: u32,
    model: u32,
    stepping: u32,
    /// Feature bits.
    features: X86Features,
    /// Brand string bytes from 0x80000002..=0x80000004 (zeros when absent).
    brand: [u8; 48],
    /// Raw leaf 0x15, when it exists.
    tsc_leaf: Option<TscLeaf>,
    /// Raw leaf 0x16, when it exists.
    frequency_leaf: Option<FrequencyLeaf>,
    /// Raw timing leaf (range base + 0x10) of the first hypervisor range that has one and is
    /// neither Xen's nor Hyper-V's.
    hypervisor_timing: Option<HypervisorTiming>,
    /// Raw Xen time leaf (Xen range base + 3), when a Xen range reaches it.
    xen_time: Option<XenTimeLeaf>,
    /// Raw Hyper-V feature leaf (Hyper-V range base + 3), when a Hyper-V range reaches it.
    hyperv_features: Option<HyperVFeatures>,
    /// KVM's feature leaf (KVM range base + 1) of the first KVM range reaching it.
    kvm_features: Option<KvmFeatures>,
    /// The core crystal frequency, when known.
    crystal: Option<Crystal>,
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
    /// [`Disagreement`]), the more trusted one first in each pair.
    ///
    /// ```
    /// use baretime_x86::{discover_with, CpuidRegs};
    /// // Kaby Lake-X: leaf 0x15 = 342/2 with no crystal, 0x16 base 4300 MHz.
    /// let d = discover_with(&|leaf: u32, _subleaf: u32| {
    ///     let r = |eax, ebx, ecx, edx| CpuidRegs { eax, ebx, ecx, edx };
    ///     match leaf {
    ///         0 => r(0x16, 0x756E_6547, 0x6C65_746E, 0x4965_6E69), // GenuineIntel
    ///         1 => r(0x0009_06E9, 0, 0, 1 << 4), // family 6 model 0x9E
    ///         0x15 => r(2, 342, 0, 0),
    ///         0x16 => r(4300, 4500, 100, 0),
    ///         _ => CpuidRegs::default(),
    ///     }
    /// });
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
    /// [`KvmPvclock`](crate::KvmPvclock), [`read_hyperv_tsc_frequency`](crate::read_hyperv_tsc_frequency))
    /// — at its trust position: ahead of every CPUID claim, the Hyper-V MSR before
    /// pvclock. A claim
    /// from any other source goes last. Like the CPUID claims, a rate outside
    /// [`MIN_PLAUSIBLE_TSC_HZ`]..=[`MAX_PLAUSIBLE_TSC_HZ`] is no candidate: it is listed in
    /// [`X86Discovery::implausible`] and `false` is returned. When the list is full (every
    /// CPUID source and two ring-0 claims), its least trusted candidate makes room.
    /// [`X86Discovery::best`] and [`X86Discovery::disagreements`] then include the claim.
    ///
    /// ```
    /// use baretime_x86::{discover_with, CpuidRegs, PvclockTimeInfo};
    /// use baretime::Source;
    /// // A KVM guest with no TSC leaf (this project's machines), and what pvclock said.
    /// let mut d = discover_with(&|leaf: u32, _subleaf: u32| {
    ///     let r = |eax, ebx, ecx, edx| CpuidRegs { eax, ebx, ecx, edx };
    ///     match leaf {
    ///         0 => r(0x16, 0x6874_7541, 0x444D_4163, 0x6974_6E65), // AuthenticAMD
    ///         1 => r(0x00A1_0F11, 0x800, 0x8020_2001, 0x078B_FBFF), // hypervisor bit
    ///         0x4000_0000 => r(0x4000_0001, 0x4B4D_564B, 0x564B_4D56, 0x4D), // KVMKVMKVM
    ///         _ => CpuidRegs::default(),
    ///     }
    /// });
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

    /// The hypervisor CPUID ranges found, in leaf order: empty without the hypervisor bit
    /// ([`X86Features::HYPERVISOR`]), whose range 0x40000000 is always the first.
    pub fn hypervisors(&self) -> &[HypervisorRange] {
        &self.hypervisors
    }

    /// Whether Hyper-V's interface (its feature leaf, range base + 3: EAX bit 11 and EDX bit
    /// 8, as Linux's `ms_hyperv_init_platform` checks) says its TSC frequency MSR can be read:
    /// a figure only a ring-0 kernel can fetch ([`read_hyperv_tsc_frequency`]), so discovery
    /// reports it and does not list it as a candidate.
    ///
    /// [`read_hyperv_tsc_frequency`]: crate::read_hyperv_tsc_frequency
    pub fn hyperv_tsc_frequency_msr(&self) -> bool {
        self.hyperv_features.is_some_and(|h| h.tsc_frequency_msr())
    }

    /// KVM's feature leaf (its range base + 1) of the first KVM range that reaches it: what
    /// [`KvmPvclock::register`](crate::KvmPvclock::register) needs. `None` outside KVM.
    pub fn kvm_features(&self) -> Option<KvmFeatures> {
        self.kvm_features
    }

    /// The vendor string from leaf 0 (EBX, EDX, ECX): `GenuineIntel`, `AuthenticAMD`,
    /// `HygonGenuine`, `CentaurHauls`, `  Shanghai  `, … Twelve bytes as the CPU gave them.
    pub fn vendor(&self) -> &[u8; 12] {
        &self.vendor
    }

    /// The brand string (leaves 0x80000002..=0x80000004) without its NUL padding and
    /// surrounding spaces; `None` when the CPU has none or it is not UTF-8.
    pub fn brand(&self) -> Option<&str> {
        let b = until_nul(&self.brand).trim_ascii();
        if b.is_empty() {
            return None;
        }
        core::str::from_utf8(b).ok()
    }

    /// Display family (base family, plus the extended family when the base is 0xF), as
    /// Linux decodes leaf 1 EAX; 0 when leaf 1 does not exist.
    pub fn family(&self) -> u32 {
        self.family
    }

    /// Display model (base model, plus the extended model << 4 when the family is ≥ 6).
    pub fn model(&self) -> u32 {
        self.model
    }

    /// Stepping (leaf 1 EAX bits 3:0).
    pub fn stepping(&self) -> u32 {
        self.stepping
    }

    /// Leaf 0 EAX: the highest basic leaf.
    pub fn max_basic_leaf(&self) -> u32 {
        self.max_basic_leaf
    }

    /// Leaf 0x80000000 EAX, the highest extended leaf; `None` when no extended leaf exists
    /// (EAX outside 0x80000000..=0x8000FFFF).
    pub fn max_extended_leaf(&self) -> Option<u32> {
        self.max_extended_leaf
    }

    /// The feature bits that matter for the TSC, the hypervisor bit among them.
    pub fn features(&self) -> X86Features {
        self.features
    }

    /// The invariant-TSC bit ([`X86Features::INVARIANT_TSC`]): the TSC runs at a constant
    /// rate in every P-, C- and T-state. Without it the TSC is no clock to keep.
    pub fn invariant_tsc(&self) -> bool {
        self.features.contains(X86Features::INVARIANT_TSC)
    }

    /// The core crystal clock, when leaf 0x15 states it or the model is known (Intel only).
    pub fn crystal(&self) -> Option<Crystal> {
        self.crystal
    }

    /// `GenuineIntel`: the one vendor whose leaf 0x15 is the TSC/crystal ratio.
    fn is_intel(&self) -> bool {
        &self.vendor == b"GenuineIntel"
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

/// Discovers through the CPU's own CPUID instruction ([`NativeCpuid`](crate::NativeCpuid)).
#[cfg(target_arch = "x86_64")]
pub fn discover() -> X86Discovery {
    discover_with(&crate::cpuid::NativeCpuid)
}

/// Discovers through `reader`: the live CPU ([`NativeCpuid`](crate::NativeCpuid), x86_64
/// only), a recorded `Dump` (feature `dump`) or a function
/// `Fn(u32, u32) -> CpuidRegs`.
///
/// Never panics, whatever the source returns.
pub fn discover_with<S: CpuidSource + ?Sized>(reader: &S) -> X86Discovery {
    let leaf0 = reader.cpuid(LEAF_VENDOR, 0);
    let max_basic_leaf = leaf0.eax;
    let basic = |leaf: u32| -> Option<CpuidRegs> {
        (leaf <= max_basic_leaf).then(|| reader.cpuid(leaf, 0))
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

    let ext_max = reader.cpuid(LEAF_EXTENDED_MAX, 0).eax;
    let max_extended_leaf = (ext_max & 0xFFFF_0000 == LEAF_EXTENDED_MAX).then_some(ext_max);
    let extended = |leaf: u32| -> Option<CpuidRegs> {
        max_extended_leaf
            .filter(|&max| leaf <= max)
            .map(|_| reader.cpuid(leaf, 0))
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
            let r = reader.cpuid(leaf, 0);
            for (bytes, reg) in chunk.chunks_exact_mut(4).zip([r.eax, r.ebx, r.ecx, r.edx]) {
                bytes.copy_from_slice(&reg.to_le_bytes());
            }
        }
    }

    let mut hypervisors = HypervisorRanges::new();
    let mut hypervisor_timing = None;
    let mut xen_time = None;
    let mut hyperv_features = None;
    let mut kvm_features = None;
    if features.contains(X86Features::HYPERVISOR) {
        hypervisors = hypervisor::walk(reader);
        for range in &hypervisors {
            let read = |offset: u32, sub: u32| range.leaf(offset).map(|l| reader.cpuid(l, sub));
            match range.kind {
                HypervisorKind::Xen if xen_time.is_none() => {
                    xen_time = read(XEN_TIME_OFFSET, 0).map(|sub0| {
                        XenTimeLeaf::decode(sub0, read(XEN_TIME_OFFSET, 2).unwrap_or_default())
                    });
                }
                HypervisorKind::HyperV if hyperv_features.is_none() => {
                    hyperv_features = read(HYPERV_FEATURES_OFFSET, 0).map(HyperVFeatures::decode);
                }
                HypervisorKind::Kvm if kvm_features.is_none() => {
                    kvm_features = read(KVM_FEATURES_OFFSET, 0)
                        .map(|r| KvmFeatures::decode(range.base, r.eax));
                    if hypervisor_timing.is_none() {
                        hypervisor_timing =
                            read(HYPERVISOR_TIMING_OFFSET, 0).map(HypervisorTiming::decode);
                    }
                }
                kind if kind.has_timing_leaf() && hypervisor_timing.is_none() => {
                    hypervisor_timing =
                        read(HYPERVISOR_TIMING_OFFSET, 0).map(HypervisorTiming::decode);
                }
                _ => {}
            }
        }
    }

    let vendor = regs_to_bytes([leaf0.ebx, leaf0.edx, leaf0.ecx]);
    let mut d = X86Discovery {
        vendor,
        max_basic_leaf,
        max_extended_leaf,
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
        kvm_features,
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
