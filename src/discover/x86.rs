//! x86 discovery: CPUID decoded through an injectable [`CpuIdReader`].
//!
//! [`discover_with`] reads the leaves that say anything about the TSC and lists every
//! frequency the CPU or hypervisor states, most trusted first:
//!
//! | source | leaf | accuracy |
//! | --- | --- | --- |
//! | [`Source::HypervisorLeaf`] | 0x40000010 EAX (kHz), only with the hypervisor bit | exact |
//! | [`Source::CpuidTscLeaf`] | 0x15 (Intel only): ECX (crystal Hz) × EBX / EAX | exact (a rational: kept to the mHz) |
//! | [`Source::CpuidTscLeafKnownCrystal`] | 0x15 ratio (Intel only), ECX = 0, crystal from the model table | nominal, [`KNOWN_CRYSTAL_TOLERANCE_PPB`] |
//! | [`Source::CpuidTscLeafDerivedCrystal`] | 0x15 ratio (Intel only), ECX = 0, crystal = 0x16 base × EAX / EBX | nominal, [`BASE_FREQUENCY_TOLERANCE_PPB`] |
//! | [`Source::CpuidBaseFrequency`] | 0x16 EAX (MHz) | nominal, [`BASE_FREQUENCY_TOLERANCE_PPB`] |
//! | [`Source::BrandString`] | 0x80000002..4, `@ 2.10GHz` / `1700MHz` | nominal, [`BRAND_STRING_TOLERANCE_PPB`] |
//!
//! A leaf above the maximum its range reports (leaf 0 EAX, 0x80000000 EAX, 0x40000000 EAX)
//! does not exist, whatever the reader returns for it: Intel CPUs answer such leaves with the
//! data of the highest basic leaf, and QEMU TCG with junk. A zero numerator or denominator in
//! leaf 0x15, a zero base in 0x16 and a zero rate in 0x40000010 mean "unknown": no candidate.
//!
//! Leaf 0x15 is the TSC/crystal ratio only in Intel's CPUID (the SDM); it is read on
//! `GenuineIntel` parts only, as Linux's `native_calibrate_tsc` does (`X86_VENDOR_INTEL`).
//! AMD's and Hygon's manuals do not define it with that meaning, and Centaur/Zhaoxin
//! (`CentaurHauls`, `  Shanghai  `) document no TSC leaf that Linux uses. An exact claim from
//! a leaf that the vendor never defined would outrank every measurement, so on other vendors
//! [`X86Discovery::tsc_leaf`] is still recorded raw but yields no candidate and no crystal.
//!
//! The known-crystal table follows the Intel SDM ("nominal core crystal clock frequency") and
//! Linux's `native_calibrate_tsc`: 24 MHz for the Skylake-derived client parts (Skylake,
//! Kaby/Coffee/Whiskey/Amber Lake, Comet Lake), 19.2 MHz for Atom Goldmont, 25 MHz for
//! Atom Goldmont-D (Denverton). Skylake-X (06_55H) ships with both 24 and 25 MHz crystals,
//! so it is not in the table: its crystal is derived from leaf 0x16 instead.

use core::fmt;

use raw_cpuid::{CpuIdReader, CpuIdResult};

use super::{
    Candidates, BASE_FREQUENCY_TOLERANCE_PPB, BRAND_STRING_TOLERANCE_PPB,
    KNOWN_CRYSTAL_TOLERANCE_PPB,
};
use crate::{Accuracy, Frequency, Source};

/// Leaf 0x0: maximum basic leaf and vendor.
pub const LEAF_VENDOR: u32 = 0x0;
/// Leaf 0x1: signature and feature bits.
pub const LEAF_FEATURES: u32 = 0x1;
/// Leaf 0x7 subleaf 0: structured extended features (TSC_ADJUST).
pub const LEAF_EXTENDED_FEATURES: u32 = 0x7;
/// Leaf 0x15: TSC / core crystal clock ratio.
pub const LEAF_TSC: u32 = 0x15;
/// Leaf 0x16: processor base / max / bus frequency in MHz.
pub const LEAF_FREQUENCY: u32 = 0x16;
/// Leaf 0x40000000: maximum hypervisor leaf and hypervisor vendor.
pub const LEAF_HYPERVISOR: u32 = 0x4000_0000;
/// Leaf 0x40000010: hypervisor timing information (TSC and bus rate in kHz).
pub const LEAF_HYPERVISOR_TIMING: u32 = 0x4000_0010;
/// Leaf 0x80000000: maximum extended leaf.
pub const LEAF_EXTENDED_MAX: u32 = 0x8000_0000;
/// Leaf 0x80000001: extended feature bits (RDTSCP).
pub const LEAF_EXTENDED_FEATURES_1: u32 = 0x8000_0001;
/// Leaf 0x80000002: first of the three brand-string leaves.
pub const LEAF_BRAND_FIRST: u32 = 0x8000_0002;
/// Leaf 0x80000007: advanced power management (invariant TSC).
pub const LEAF_POWER_MANAGEMENT: u32 = 0x8000_0007;

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

/// Raw leaf 0x15 (present only when the maximum basic leaf reaches it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TscLeaf {
    /// EAX: denominator of the TSC / crystal ratio (0 = not enumerated).
    pub denominator: u32,
    /// EBX: numerator of the TSC / crystal ratio (0 = not enumerated).
    pub numerator: u32,
    /// ECX: core crystal clock in Hz (0 = not enumerated).
    pub crystal_hz: u32,
}

/// Raw leaf 0x16 (present only when the maximum basic leaf reaches it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct FrequencyLeaf {
    /// EAX bits 15:0: processor base frequency in MHz.
    pub base_mhz: u16,
    /// EBX bits 15:0: maximum frequency in MHz.
    pub max_mhz: u16,
    /// ECX bits 15:0: bus (reference) frequency in MHz.
    pub bus_mhz: u16,
}

/// Raw hypervisor leaf 0x40000010 (VMware's timing leaf, also offered by KVM and others).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct HypervisorTiming {
    /// EAX: (virtual) TSC frequency in kHz; 0 = unknown.
    pub tsc_khz: u32,
    /// EBX: (virtual) local APIC bus frequency in kHz; 0 = unknown.
    pub bus_khz: u32,
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
    /// leaf number (0x40000000..=0x4FFFFFFF), only the vendor leaf itself is assumed.
    pub max_hypervisor_leaf: Option<u32>,
    /// Hypervisor vendor from leaf 0x40000000 (EBX, ECX, EDX), e.g. `KVMKVMKVM\0\0\0`; zeros
    /// without a hypervisor.
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
    /// Raw leaf 0x40000010, when the hypervisor bit is set and it exists.
    pub hypervisor_timing: Option<HypervisorTiming>,
    /// The core crystal frequency, when known.
    pub crystal: Option<Crystal>,
    candidates: Candidates,
}

#[cfg(feature = "defmt")]
impl defmt::Format for X86Discovery {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(
            f,
            "X86Discovery {{ vendor: {=[u8]:a}, family: {=u32:#x}, model: {=u32:#x}, features: {}, candidates: {=[?]} }}",
            &self.vendor[..],
            self.family,
            self.model,
            self.features,
            self.candidates.as_slice()
        )
    }
}

impl X86Discovery {
    /// Every frequency candidate found, most trusted first.
    pub fn candidates(&self) -> &[Frequency] {
        &self.candidates
    }

    /// The most trusted candidate: the hypervisor leaf (only ever read with the hypervisor
    /// bit), then leaf 0x15 with its crystal, then 0x15 with a known crystal, then 0x15 with a
    /// derived crystal, then 0x16, then the brand string.
    pub fn best(&self) -> Option<Frequency> {
        self.candidates
            .iter()
            .copied()
            .min_by_key(|f| trust_rank(f.source()))
    }

    /// The candidate from `source`, if there is one.
    pub fn candidate(&self, source: Source) -> Option<Frequency> {
        self.candidates
            .iter()
            .copied()
            .find(|f| f.source() == source)
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
        trim_ascii(until_nul(&self.brand))
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
}

/// Lower is more trusted.
fn trust_rank(source: Source) -> u8 {
    match source {
        Source::HypervisorLeaf => 0,
        Source::CpuidTscLeaf => 1,
        Source::CpuidTscLeafKnownCrystal => 2,
        Source::CpuidTscLeafDerivedCrystal => 3,
        Source::CpuidBaseFrequency => 4,
        Source::BrandString => 5,
        _ => 6,
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
    let tsc_leaf = basic(LEAF_TSC).map(|r| TscLeaf {
        denominator: r.eax,
        numerator: r.ebx,
        crystal_hz: r.ecx,
    });
    let frequency_leaf = basic(LEAF_FREQUENCY).map(|r| FrequencyLeaf {
        base_mhz: r.eax as u16,
        max_mhz: r.ebx as u16,
        bus_mhz: r.ecx as u16,
    });

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

    let mut max_hypervisor_leaf = None;
    let mut hypervisor_vendor = [0u8; 12];
    let mut hypervisor_timing = None;
    if features.contains(X86Features::HYPERVISOR) {
        let h = reader.cpuid2(LEAF_HYPERVISOR, 0);
        hypervisor_vendor = regs_to_bytes([h.ebx, h.ecx, h.edx]);
        let max = if (LEAF_HYPERVISOR..=0x4FFF_FFFF).contains(&h.eax) {
            h.eax
        } else {
            LEAF_HYPERVISOR
        };
        max_hypervisor_leaf = Some(max);
        if max >= LEAF_HYPERVISOR_TIMING {
            let t = reader.cpuid2(LEAF_HYPERVISOR_TIMING, 0);
            hypervisor_timing = Some(HypervisorTiming {
                tsc_khz: t.eax,
                bus_khz: t.ebx,
            });
        }
    }

    let vendor = regs_to_bytes([leaf0.ebx, leaf0.edx, leaf0.ecx]);
    let mut d = X86Discovery {
        vendor,
        max_basic_leaf,
        max_extended_leaf,
        max_hypervisor_leaf,
        hypervisor_vendor,
        signature,
        family,
        model,
        stepping,
        features,
        brand,
        tsc_leaf,
        frequency_leaf,
        hypervisor_timing,
        crystal: None,
        candidates: Candidates::new(),
    };
    collect_candidates(&mut d);
    d
}

fn collect_candidates(d: &mut X86Discovery) {
    let mut list = Candidates::new();
    // At most 6 pushes into a list of MAX_CANDIDATES (8): ignoring a full list cannot drop one.
    let mut push = |f: Option<Frequency>| {
        if let Some(f) = f {
            let _ = list.push(f);
        }
    };

    if let Some(t) = d.hypervisor_timing {
        if t.tsc_khz != 0 {
            push(Frequency::from_hz(
                u64::from(t.tsc_khz).saturating_mul(1000), // < 2^42: exact
                Source::HypervisorLeaf,
                Accuracy::Exact,
            ));
        }
    }

    let base_hz = d
        .frequency_leaf
        .map(|f| u64::from(f.base_mhz).saturating_mul(1_000_000)) // < 2^36: exact
        .filter(|&hz| hz != 0);

    // Leaf 0x15 means TSC / crystal on Intel only (see the module docs).
    if let Some(t) = d.tsc_leaf.filter(|_| d.is_intel()) {
        if t.denominator != 0 && t.numerator != 0 {
            if t.crystal_hz != 0 {
                d.crystal = Some(Crystal {
                    hz: t.crystal_hz,
                    source: CrystalSource::Reported,
                });
                push(tsc_from_ratio(
                    u64::from(t.crystal_hz),
                    t,
                    Source::CpuidTscLeaf,
                    Accuracy::Exact,
                ));
            } else {
                if let Some(hz) = known_crystal_hz(d.family, d.model) {
                    d.crystal = Some(Crystal {
                        hz,
                        source: CrystalSource::KnownModel,
                    });
                    push(tsc_from_ratio(
                        u64::from(hz),
                        t,
                        Source::CpuidTscLeafKnownCrystal,
                        Accuracy::Nominal {
                            tolerance_ppb: KNOWN_CRYSTAL_TOLERANCE_PPB,
                        },
                    ));
                }
                if let Some(base) = base_hz {
                    // crystal = base × EAX / EBX, rounded to the Hz; < 2^16·10^6·2^32 < 2^85.
                    let num = u128::from(base).saturating_mul(u128::from(t.denominator));
                    let crystal = div_round(num, u128::from(t.numerator));
                    if let Some(hz) = crystal.and_then(|c| u32::try_from(c).ok()) {
                        if hz != 0 {
                            if d.crystal.is_none() {
                                d.crystal = Some(Crystal {
                                    hz,
                                    source: CrystalSource::DerivedFromBase,
                                });
                            }
                            push(tsc_from_ratio(
                                u64::from(hz),
                                t,
                                Source::CpuidTscLeafDerivedCrystal,
                                Accuracy::Nominal {
                                    tolerance_ppb: BASE_FREQUENCY_TOLERANCE_PPB,
                                },
                            ));
                        }
                    }
                }
            }
        }
    }

    if let Some(hz) = base_hz {
        push(Frequency::from_hz(
            hz,
            Source::CpuidBaseFrequency,
            Accuracy::Nominal {
                tolerance_ppb: BASE_FREQUENCY_TOLERANCE_PPB,
            },
        ));
    }

    if let Some(hz) = parse_brand_frequency(&d.brand) {
        push(Frequency::from_hz(
            hz,
            Source::BrandString,
            Accuracy::Nominal {
                tolerance_ppb: BRAND_STRING_TOLERANCE_PPB,
            },
        ));
    }
    d.candidates = list;
}

/// crystal × EBX / EAX in millihertz, rounded to the nearest; `None` outside the accepted
/// range. The product is below 2^32 · 2^32 · 2^10 = 2^74: exact in `u128`.
fn tsc_from_ratio(
    crystal_hz: u64,
    t: TscLeaf,
    source: Source,
    accuracy: Accuracy,
) -> Option<Frequency> {
    // < 2^32 · 2^32 · 2^10: exact in u128 (the saturation never triggers).
    let num = u128::from(crystal_hz)
        .saturating_mul(u128::from(t.numerator))
        .saturating_mul(1000);
    let millihz = u64::try_from(div_round(num, u128::from(t.denominator))?).ok()?;
    Frequency::from_millihz(millihz, source, accuracy)
}

/// `num / den` rounded to the nearest; `None` for `den == 0` (or a sum past `u128`).
fn div_round(num: u128, den: u128) -> Option<u128> {
    num.checked_add(den / 2)?.checked_div(den)
}

/// The nominal core crystal of Intel family-6 models that leave leaf 0x15 ECX at 0.
pub fn known_crystal_hz(family: u32, model: u32) -> Option<u32> {
    if family != 6 {
        return None;
    }
    match model {
        // Skylake (L, S), Kaby Lake (L, S) and their Coffee/Whiskey/Amber Lake successors,
        // Comet Lake (S, L).
        0x4E | 0x5E | 0x8E | 0x9E | 0xA5 | 0xA6 => Some(24_000_000),
        // Atom Goldmont (Apollo Lake, Broxton).
        0x5C => Some(19_200_000),
        // Atom Goldmont-D (Denverton).
        0x5F => Some(25_000_000),
        _ => None,
    }
}

/// (family, model, stepping) from a leaf-1 signature, as Linux decodes it.
pub fn decode_signature(signature: u32) -> (u32, u32, u32) {
    let base_family = (signature >> 8) & 0xF;
    let mut family = base_family;
    if base_family == 0xF {
        // 0xF + at most 0xFF: no overflow.
        family = family.saturating_add((signature >> 20) & 0xFF);
    }
    let mut model = (signature >> 4) & 0xF;
    if family >= 6 {
        model |= ((signature >> 16) & 0xF) << 4;
    }
    (family, model, signature & 0xF)
}

/// Parses the frequency a brand string states: the last `<number>GHz` or `<number>MHz`
/// (optionally with a space before the unit, as in `@ 2.10GHz`, `1700MHz`, `3.0 GHz`), in Hz.
///
/// Integer arithmetic only: the fraction is kept to the Hz (digits beyond are dropped).
/// `None` when there is no such figure, it is 0 or it overflows.
pub fn parse_brand_frequency(brand: &[u8]) -> Option<u64> {
    let brand = until_nul(brand);
    // Each unit not followed by a letter or digit, from the last one back: the first with a
    // number before it wins.
    brand.windows(3).enumerate().rev().find_map(|(at, unit)| {
        let after = brand.get(at..).and_then(|rest| rest.get(3));
        if after.is_some_and(u8::is_ascii_alphanumeric) {
            return None;
        }
        parse_number_before(brand.get(..at)?, unit_multiplier(unit)?)
    })
}

/// Hz per unit for `GHz` / `MHz` (any case).
fn unit_multiplier(unit: &[u8]) -> Option<u64> {
    let [scale, h, z] = unit else {
        return None;
    };
    if !h.eq_ignore_ascii_case(&b'h') || !z.eq_ignore_ascii_case(&b'z') {
        return None;
    }
    match scale.to_ascii_lowercase() {
        b'g' => Some(1_000_000_000),
        b'm' => Some(1_000_000),
        _ => None,
    }
}

/// The decimal number that ends `s` (after optional spaces), times `mult`.
fn parse_number_before(s: &[u8], mult: u64) -> Option<u64> {
    let s = match s.iter().rposition(|&c| c != b' ') {
        Some(last) => s.get(..=last)?,
        None => return None,
    };
    let start = s
        .iter()
        .rposition(|&c| !(c.is_ascii_digit() || c == b'.'))
        .map_or(0, |p| p.saturating_add(1));
    let (head, num) = (s.get(..start)?, s.get(start..)?);
    if head.last().is_some_and(u8::is_ascii_alphanumeric) {
        return None;
    }
    let mut parts = num.splitn(2, |&c| c == b'.');
    let int = parts.next().unwrap_or(&[]);
    let frac = parts.next().unwrap_or(&[]);
    if frac.contains(&b'.') || (int.is_empty() && frac.is_empty()) {
        return None;
    }
    let mut hz: u64 = 0;
    for &c in int {
        hz = hz.checked_mul(10)?.checked_add(digit(c)?)?;
    }
    hz = hz.checked_mul(mult)?;
    let mut scale = mult;
    for &c in frac {
        scale /= 10;
        if scale == 0 {
            break;
        }
        hz = hz.checked_add(digit(c)?.checked_mul(scale)?)?;
    }
    (hz != 0).then_some(hz)
}

fn digit(c: u8) -> Option<u64> {
    (c as char).to_digit(10).map(u64::from)
}

fn bit(reg: u32, n: u32) -> bool {
    reg & (1 << n) != 0
}

fn regs_to_bytes(regs: [u32; 3]) -> [u8; 12] {
    let mut out = [0u8; 12];
    for (bytes, r) in out.chunks_exact_mut(4).zip(regs) {
        bytes.copy_from_slice(&r.to_le_bytes());
    }
    out
}

fn until_nul(b: &[u8]) -> &[u8] {
    b.split(|&c| c == 0).next().unwrap_or(b)
}

fn trim_ascii(mut b: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = b {
        if first.is_ascii_whitespace() {
            b = rest;
        } else {
            break;
        }
    }
    while let [rest @ .., last] = b {
        if last.is_ascii_whitespace() {
            b = rest;
        } else {
            break;
        }
    }
    b
}

/// Writes bytes as text: printable ASCII as is, anything else (spaces included) as `_`, so a
/// vendor like `"  Shanghai  "` stays one whitespace-free token of the same length.
pub(crate) struct Token<'a>(pub &'a [u8]);

impl fmt::Display for Token<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use fmt::Write;
        for &c in self.0 {
            f.write_char(if c.is_ascii_graphic() { c as char } else { '_' })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::vec::Vec;

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
            .with(LEAF_HYPERVISOR_TIMING, [tsc_khz, 1_000_000, 0, 0])
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
    fn signature_decoding() {
        assert_eq!(decode_signature(0x000806EC), (6, 0x8E, 0xC));
        assert_eq!(decode_signature(0x00000F34), (0xF, 0x3, 0x4));
        // AMD Zen 2: base family F + extended 8 = 0x17, model 0x90 | ... .
        assert_eq!(decode_signature(0x00890F10), (0x17, 0x91, 0x0));
        // Pentium (family 5): no extended model.
        assert_eq!(decode_signature(0x000F0543), (5, 0x4, 0x3));
    }

    #[test]
    fn brand_string_parsing() {
        let cases: &[(&str, Option<u64>)] = &[
            (
                "Intel(R) Core(TM) i3-10110U CPU @ 2.10GHz",
                Some(2_100_000_000),
            ),
            ("@ 3.00GHz", Some(3_000_000_000)),
            ("Intel(R) Pentium(R) 4 CPU 1700MHz", Some(1_700_000_000)),
            (
                "              Intel(R) Pentium(R) 4 CPU 3.00GHz",
                Some(3_000_000_000),
            ),
            ("VIA C7-M Processor 1200MHz", Some(1_200_000_000)),
            (
                "Intel(R) Core(TM)2 CPU T7200 @ 2.00 GHz",
                Some(2_000_000_000),
            ),
            (
                "Genuine Intel(R) CPU 0000 @ 1.234567891234GHz",
                Some(1_234_567_891),
            ),
            ("@ 1.GHz", Some(1_000_000_000)),
            ("@ .5GHz", Some(500_000_000)),
            ("@ 3.00ghz", Some(3_000_000_000)),
            ("2.40GHz junk MHz", Some(2_400_000_000)),
            ("Intel(R) Xeon(R) Processor", None),
            ("AMD Ryzen 7 5800H with Radeon Graphics", None),
            ("AMD Athlon(tm) 64 X2 Dual Core Processor 5200+", None),
            ("", None),
            ("GHz", None),
            ("@ GHz", None),
            ("@ . GHz", None),
            ("@ 1.2.3GHz", None),
            ("@ 0.00GHz", None),
            ("@ 2.10GHzX", None),
            ("@ 2.10KHz", None),
            ("X2.10GHz", None),
            ("@ 99999999999999999999GHz", None),
            ("@ 18446744074GHz", None),
        ];
        for (s, want) in cases {
            assert_eq!(parse_brand_frequency(s.as_bytes()), *want, "{s:?}");
        }
        // Stops at NUL.
        assert_eq!(
            parse_brand_frequency(b"@ 2.00GHz\0@ 3.00GHz"),
            Some(2_000_000_000)
        );
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

    #[test]
    fn token_replaces_non_graphic_bytes() {
        assert_eq!(std::format!("{}", Token(b"  Shanghai  ")), "__Shanghai__");
        assert_eq!(std::format!("{}", Token(b"Genu\0\xffe")), "Genu__e");
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
                    LEAF_HYPERVISOR_TIMING => self.h10,
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

        fn check_invariants(d: &X86Discovery) {
            for f in d.candidates() {
                let hz = f.as_millihz() / 1000;
                assert!((Frequency::MIN_HZ..=Frequency::MAX_HZ).contains(&hz));
                let exact_source =
                    matches!(f.source(), Source::CpuidTscLeaf | Source::HypervisorLeaf);
                assert_eq!(f.accuracy().is_exact(), exact_source, "{f:?}");
            }
            if let Some(b) = d.best() {
                assert!(d.candidates().contains(&b));
                assert!(d
                    .candidates()
                    .iter()
                    .all(|f| trust_rank(b.source()) <= trust_rank(f.source())));
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
                    None => prop_assert!(!(1_000_000..=100_000_000_000_000).contains(&want)),
                }
            }

            /// The brand parser takes any bytes.
            #[test]
            fn brand_parser_takes_any_bytes(b in proptest::collection::vec(any::<u8>(), 0..64)) {
                if let Some(hz) = parse_brand_frequency(&b) {
                    prop_assert!(hz > 0);
                }
            }

            /// `@ I.FFGHz` parses to I.FF × 10^9 exactly.
            #[test]
            fn brand_parser_round_trips(int in 0u64..100, frac in 0u64..100) {
                let s = std::format!("Some CPU @ {int}.{frac:02}GHz");
                let want = int * 1_000_000_000 + frac * 10_000_000;
                prop_assert_eq!(parse_brand_frequency(s.as_bytes()), (want > 0).then_some(want));
            }
        }
    }
}
