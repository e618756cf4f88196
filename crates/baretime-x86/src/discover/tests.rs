//! Tests of x86 discovery as a whole: register tables in, candidates out.

use super::*;
use std::collections::BTreeMap;
use std::vec::Vec;

use crate::candidates::{BASE_FREQUENCY_TOLERANCE_PPB, BRAND_STRING_TOLERANCE_PPB};
use baretime::Accuracy;

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

impl CpuidSource for Table {
    fn cpuid(&self, eax: u32, _ecx: u32) -> CpuidRegs {
        let r = self.0.get(&eax).copied().unwrap_or([0; 4]);
        CpuidRegs {
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
    let d = discover_with(&intel(0x20, 0xB0671).with(0x15, [2, 166, 38_400_000, 0]));
    let f = d.best().unwrap();
    assert_eq!(f.source(), Source::CpuidTscLeaf);
    assert!(f.accuracy().is_exact());
    assert_eq!(f.as_millihz(), 3_187_200_000_000);
    assert_eq!(d.crystal.unwrap().source, CrystalSource::Reported);
    // A ratio that does not divide: 25 MHz × 7 / 3 = 58 333 333.333 Hz, kept to the mHz.
    let d = discover_with(&intel(0x15, 0).with(0x15, [3, 7, 25_000_000, 0]));
    assert_eq!(d.best().unwrap().as_millihz(), 58_333_333_333);
}

#[test]
fn leaf_15_zero_ratio_fields_give_no_candidate() {
    for regs in [[0, 166, 38_400_000, 0], [2, 0, 38_400_000, 0], [0, 0, 0, 0]] {
        let d = discover_with(&intel(0x15, 0x906EA).with(0x15, regs));
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
    let d = discover_with(&t);
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
    let d = discover_with(&t);
    let best = d.best().unwrap();
    assert_eq!(best.source(), Source::CpuidTscLeafDerivedCrystal);
    assert!(best.as_hz().abs_diff(3_500_000_000) < 3_500);
    assert_eq!(d.crystal.unwrap().source, CrystalSource::DerivedFromBase);

    // Known crystal without leaf 0x16 (Goldmont has none).
    let t = intel(0x15, 0x506C9).with(0x15, [1, 78, 0, 0]);
    let d = discover_with(&t);
    assert_eq!(d.model, 0x5C);
    assert_eq!(d.best().unwrap().as_hz(), 19_200_000 * 78);
    // Not Intel: no table.
    let t = Table::default()
        .with(0, [0x15, 0x6874_7541, 0x444D_4163, 0x6974_6E65])
        .with(1, [0x906EA, 0, 0, 0])
        .with(0x15, [2, 184, 0, 0]);
    assert_eq!(discover_with(&t).best(), None);
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
        let d = discover_with(&table([2, 200, 24_000_000, 0]));
        assert_eq!(&d.vendor, vendor);
        assert!(d.tsc_leaf.is_some(), "the raw leaf is recorded");
        let exact = d.candidate(Source::CpuidTscLeaf);
        assert_eq!(exact.is_some(), intel, "{:?}", d.vendor());
        assert_eq!(d.crystal.is_some(), intel);
        if !intel {
            // Leaf 0x16's base is still a (nominal) candidate; nothing exact.
            assert_eq!(d.best().unwrap().source(), Source::CpuidBaseFrequency);
        }
        // Crystal not enumerated: no derived crystal either.
        let d = discover_with(&table([2, 200, 0, 0]));
        let derived = d.candidate(Source::CpuidTscLeafDerivedCrystal);
        assert_eq!(derived.is_some(), intel, "{:?}", d.vendor());
    }
}

#[test]
fn leaf_16_is_nominal() {
    let d = discover_with(&intel(0x16, 0x906EA).with(0x16, [3600, 5000, 100, 0]));
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
    let d = discover_with(&intel(0x16, 0).with(0x16, [0xFFFF_0000, 0, 0, 0]));
    assert_eq!(d.best(), None);
}

#[test]
fn leaves_above_the_maximum_do_not_exist() {
    // Haswell i5-4258U: max basic 0xD; the dump holds junk for 0x15/0x16.
    let t = intel(0xD, 0x40651)
        .with(0x15, [7, 0x340, 0x340, 0])
        .with(0x16, [7, 0x340, 0x340, 0]);
    let d = discover_with(&t);
    assert_eq!(d.tsc_leaf, None);
    assert_eq!(d.frequency_leaf, None);
    assert_eq!(d.best(), None);

    // Extended leaves: 0x80000000 EAX below 0x80000000 means none.
    let t = with_brand(intel(1, 0), 0x0000_0005, "CPU @ 2.00GHz")
        .with(0x8000_0007, [0, 0, 0, 1 << 8])
        .with(0x8000_0001, [0, 0, 0, 1 << 27]);
    let d = discover_with(&t);
    assert_eq!(d.max_extended_leaf, None);
    assert!(!d.invariant_tsc());
    assert!(!d.features.contains(X86Features::RDTSCP));
    assert_eq!(d.best(), None);
    // Max extended 0x80000006: 0x80000007 is junk, the brand is real.
    let t =
        with_brand(intel(1, 0), 0x8000_0006, "CPU @ 2.00GHz").with(0x8000_0007, [0, 0, 0, 1 << 8]);
    let d = discover_with(&t);
    assert!(!d.invariant_tsc());
    assert_eq!(d.best().unwrap().as_hz(), 2_000_000_000);
    // Max extended 0x80000003: no brand string at all.
    let t = with_brand(intel(1, 0), 0x8000_0003, "CPU @ 2.00GHz");
    let d = discover_with(&t);
    assert_eq!(d.brand(), None);
    assert_eq!(d.brand(), None);
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
fn kvm_feature_leaf_is_read_where_the_range_reaches_it() {
    // QEMU's default KVM features for -cpu host: clocksource, clocksource2, stable bit, ….
    let t = hypervisor_table(0x4000_0010, 0, true).with(0x4000_0001, [0x0100_7AFB, 0, 0, 0]);
    let kvm = discover_with(&t)
        .kvm_features()
        .expect("KVM's feature leaf");
    assert_eq!((kvm.base(), kvm.bits()), (0x4000_0000, 0x0100_7AFB));
    assert_eq!(kvm.clock_msr(), Ok(0x4b56_4d01));
    assert!(kvm.stable_bit());
    // The range ends at its base leaf: no feature leaf, whatever the table holds.
    let t = hypervisor_table(0x4000_0000, 0, true).with(0x4000_0001, [0x0100_7AFB, 0, 0, 0]);
    assert_eq!(discover_with(&t).kvm_features(), None);
    // Not a guest: nothing read.
    let t = hypervisor_table(0x4000_0010, 0, false).with(0x4000_0001, [0x0100_7AFB, 0, 0, 0]);
    assert_eq!(discover_with(&t).kvm_features(), None);
    // Another hypervisor's range at the same place: not KVM's leaf.
    let t = hypervisor_table(0x4000_0010, 0, true)
        .with(
            LEAF_HYPERVISOR,
            [0x4000_0010, 0x7263_694D, 0x666F_736F, 0x7648_2074],
        )
        .with(0x4000_0001, [0x0100_7AFB, 0, 0, 0]);
    assert_eq!(discover_with(&t).kvm_features(), None);
}

#[test]
fn hypervisor_leaf_wins_with_the_hypervisor_bit() {
    let d = discover_with(&hypervisor_table(0x4000_0010, 2_300_000, true));
    assert!(d.features().contains(X86Features::HYPERVISOR));
    assert_eq!(&d.hypervisors()[0].signature, b"KVMKVMKVM\0\0\0");
    let f = d.best().unwrap();
    assert_eq!(f.source(), Source::HypervisorLeaf);
    assert!(f.accuracy().is_exact());
    assert_eq!(f.as_hz(), 2_300_000_000);
}

#[test]
fn hypervisor_leaf_needs_bit_max_leaf_and_nonzero_rate() {
    // No hypervisor bit: 0x40000010 is junk on bare metal.
    let d = discover_with(&hypervisor_table(0x4000_0010, 2_300_000, false));
    assert!(d.hypervisors().is_empty());
    assert_eq!(d.best().unwrap().source(), Source::CpuidBaseFrequency);
    // Max hypervisor leaf below 0x40000010 (the KVM guest dump: 0x40000001).
    let d = discover_with(&hypervisor_table(0x4000_0001, 2_300_000, true));
    assert_eq!(d.hypervisor_timing, None);
    assert_eq!(d.best().unwrap().source(), Source::CpuidBaseFrequency);
    // A rate of 0 means unknown.
    let d = discover_with(&hypervisor_table(0x4000_0010, 0, true));
    assert!(d.hypervisor_timing.is_some());
    assert_eq!(d.best().unwrap().source(), Source::CpuidBaseFrequency);
    // EAX that is no hypervisor leaf number: only the vendor leaf.
    let d = discover_with(&hypervisor_table(0x8000_0010, 2_300_000, true));
    assert_eq!(d.hypervisors()[0].max_leaf, LEAF_HYPERVISOR);
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
        let d = discover_with(&t);
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
    let d = discover_with(&guest(&[
        (0x4000_0000, range(0x4000_0002, b"XenVMMXenVMM")),
        (0x4000_0003, [0, 0, 2_893_437, 0]),
    ]));
    assert_eq!(d.xen_time, None);
    assert_eq!(d.best().unwrap().source(), Source::CpuidBaseFrequency);
    // A rate of 0: the leaf is recorded, no candidate.
    let d = discover_with(&guest(&[
        (0x4000_0000, range(0x4000_0005, b"XenVMMXenVMM")),
        (0x4000_0003, [0, 0, 0, 0]),
    ]));
    assert!(d.xen_time.is_some());
    assert_eq!(d.candidate(Source::XenTimeLeaf), None);
    // Xen's base + 0x10 is not VMware's timing leaf.
    let d = discover_with(&guest(&[
        (0x4000_0000, range(0x4000_0010, b"XenVMMXenVMM")),
        (0x4000_0010, [2_300_000, 0, 0, 0]),
    ]));
    assert_eq!(d.hypervisor_timing, None);
    // The time leaf of a range that is not Xen's is not read as one.
    let d = discover_with(&guest(&[
        (0x4000_0000, range(0x4000_0005, b"KVMKVMKVM\0\0\0")),
        (0x4000_0003, [0, 0, 2_893_437, 0]),
    ]));
    assert_eq!(d.xen_time, None);
}

#[test]
fn hyperv_frequency_msr_is_noted_not_a_candidate() {
    let hv = |eax: u32, edx: u32, max: u32| {
        discover_with(&guest(&[
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
    let d = discover_with(&t);
    assert!(d.hypervisors().is_empty());
    assert!(!d.hyperv_tsc_frequency_msr());
}

#[test]
fn timing_leaf_is_found_through_the_walk() {
    // KVM behind Hyper-V's interface, with its timing leaf at its own base + 0x10.
    let d = discover_with(&guest(&[
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
        let d = discover_with(&guest(&[
            (0x4000_0000, range(0x4000_0010, s)),
            (0x4000_0010, [2_300_000, 0, 0, 0]),
        ]));
        assert_eq!(d.best().unwrap().source(), Source::HypervisorLeaf, "{s:?}");
    }
}

#[test]
fn implausible_claims_are_no_candidates() {
    // Leaf 0x16 = 0xFFFF MHz: not "65.5 GHz, nominal".
    let d = discover_with(&intel(0x16, 0x906EA).with(0x16, [0xFFFF, 0, 0, 0]));
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
        &intel(0x16, 0x50654)
            .with(0x15, [2, u32::MAX, 0, 0])
            .with(0x16, [0xFFFF, 0, 0, 0]),
    );
    assert_eq!(d.best(), None);
    let sources: Vec<(Source, u64)> = d.implausible().iter().map(|i| (i.source, i.hz)).collect();
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
        let d = discover_with(&hypervisor_table(0x4000_0010, khz, true));
        assert_eq!(d.candidate(Source::HypervisorLeaf).is_some(), ok, "{khz}");
        assert_eq!(d.implausible().len(), usize::from(!ok), "{khz}");
    }
}

#[test]
fn exact_claims_disagree_only_past_their_resolution() {
    // Xen's 2 300 000 kHz against an exact 0x15 figure (25 MHz × n / 25 000).
    let with_15 = |n: u32| {
        discover_with(
            &guest(&[
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
    let d = discover_with(&t);
    assert_eq!(d.features, X86Features::all());
    assert_eq!(d.vendor(), b"GenuineIntel");
    assert!(d.is_intel());
    // Leaf 7 above the maximum: no TSC_ADJUST.
    let t = Table::default()
        .with(0, [6, GENU, NTEL, INEI])
        .with(7, [0, 1 << 1, 0, 0]);
    assert!(!discover_with(&t).features.contains(X86Features::TSC_ADJUST));
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
    let d = discover_with(&t);
    assert_eq!(d.brand(), Some("Intel(R) Core(TM) i3-10110U CPU @ 2.10GHz"));
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
    let d = discover_with(&t);
    assert_eq!(d.model, 0xA6);
    assert_eq!(d.best().unwrap().as_hz(), 2_592_000_000);
}

#[test]
fn out_of_range_rates_are_dropped() {
    // 0x15 giving 4 GHz × 2^32: beyond Frequency::MAX_HZ.
    let d = discover_with(&intel(0x15, 0).with(0x15, [1, u32::MAX, u32::MAX, 0]));
    assert_eq!(d.best(), None);
    // 0x15 giving below 1 kHz.
    let d = discover_with(&intel(0x15, 0).with(0x15, [1000, 1, 1000, 0]));
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

    impl CpuidSource for Fuzz {
        fn cpuid(&self, eax: u32, ecx: u32) -> CpuidRegs {
            let r = if self.masked && !self.exists(eax) {
                [0; 4]
            } else {
                self.raw(eax, ecx)
            };
            CpuidRegs {
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
            assert!(d.features().contains(X86Features::HYPERVISOR));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

    /// Any signature, family and model: no panic, bounded fields. (From
    /// suite/tests/no_panic.rs: the helpers are crate-private.)
    #[test]
    fn x86_helpers_any_value(sig in any::<u32>(), family in any::<u32>(), model in any::<u32>()) {
        let (f, m, s) = decode_signature(sig);
        prop_assert!(f <= 0xF + 0xFF && m <= 0xFF && s <= 0xF);
        if let Some(hz) = known_crystal_hz(family, model) {
            prop_assert_eq!(family, 6);
            prop_assert!(hz >= 19_200_000);
        }
    }

    /// Long brand-like strings full of digits, dots, spaces and units.
    #[test]
    fn brand_parser_long_inputs(parts in prop::collection::vec(
        prop_oneof![
            Just("GHz"), Just("MHz"), Just("ghz"), Just("Hz"), Just("@ "), Just("."), Just(" "),
            Just("9"), Just("99999999999999999999"), Just("0"), Just("\0"), Just("x"),
        ],
        0..200,
    )) {
        let s: String = parts.concat();
        if let Some(hz) = parse_brand_frequency(s.as_bytes()) {
            prop_assert!(hz > 0);
        }
    }


        /// Hypervisor ranges with real signatures, any maxima and any contents: no panic, the
        /// rules hold, the walk stops where a range is not valid, and each hypervisor's
        /// leaves are read only within its own range.
        #[test]
        fn hypervisor_ranges_with_any_contents(
            seed in any::<u64>(),
            ranges in proptest::collection::vec(
                (
                    prop_oneof![
                        Just(*b"XenVMMXenVMM"),
                        Just(*b"Microsoft Hv"),
                        Just(*b"KVMKVMKVM\0\0\0"),
                        Just(*b"VMwareVMware"),
                        any::<[u8; 12]>(),
                    ],
                    prop_oneof![0u32..0x20, any::<u32>()],
                ),
                0..6,
            ),
        ) {
            let table = ranges.clone();
            let reader = move |leaf: u32, sub: u32| {
                let junk = |r| mix(seed, leaf, sub, r);
                let r = match leaf {
                    0 => [0x16, GENU, NTEL, INEI],
                    1 => [0x906EA, 0, 1 << 31, 1 << 4],
                    0x4000_0000..=0x4000_05FF if leaf & 0xFF == 0 => {
                        let i = ((leaf - 0x4000_0000) >> 8) as usize;
                        match table.get(i) {
                            Some((s, max)) => {
                                let [b, c, d] = sig(s);
                                // Small maxima are offsets in the range; others any value.
                                let eax = if *max < 0x20 { leaf + max } else { *max };
                                [eax, b, c, d]
                            }
                            None => [0; 4],
                        }
                    }
                    _ => [junk(0), junk(1), junk(2), junk(3)],
                };
                CpuidRegs { eax: r[0], ebx: r[1], ecx: r[2], edx: r[3] }
            };
            let d = discover_with(&reader);
            check_invariants(&d);
            let found = d.hypervisors();
            prop_assert!(!found.is_empty() && found.len() <= hypervisor::MAX_HYPERVISOR_RANGES);
            for (i, r) in found.iter().enumerate() {
                prop_assert_eq!(r.base, 0x4000_0000 + 0x100 * i as u32);
                prop_assert!(r.max_leaf >= r.base);
                if let Some((s, _)) = ranges.get(i) {
                    prop_assert_eq!(&r.signature, s);
                }
            }
            let reaches = |kind, offset| {
                found.iter().any(|r| r.kind == kind && r.leaf(offset).is_some())
            };
            if d.xen_time.is_some() {
                prop_assert!(reaches(HypervisorKind::Xen, 3));
            }
            if d.hyperv_features.is_some() {
                prop_assert!(reaches(HypervisorKind::HyperV, 3));
            }
            if d.hypervisor_timing.is_some() {
                prop_assert!(found.iter().any(|r| r.kind.has_timing_leaf()
                    && r.leaf(0x10).is_some()));
            }
        }

        /// Any reader output at all: no panic, and the candidate list keeps its rules.
        #[test]
        fn any_reader_output_is_safe(seed in any::<u64>()) {
            let reader = move |leaf: u32, sub: u32| CpuidRegs {
                eax: mix(seed, leaf, sub, 0),
                ebx: mix(seed, leaf, sub, 1),
                ecx: mix(seed, leaf, sub, 2),
                edx: mix(seed, leaf, sub, 3),
            };
            check_invariants(&discover_with(&reader));
        }

        /// Junk above any maximum leaf changes nothing: discovery equals discovery on
        /// the same CPU with every non-existent leaf zeroed.
        #[test]
        fn leaves_above_the_maxima_are_never_used(f in fuzz()) {
            let raw = discover_with(&f.clone());
            let masked = discover_with(&Fuzz { masked: true, ..f });
            check_invariants(&raw);
            prop_assert_eq!(raw, masked);
        }

        /// A complete leaf 0x15 is the best claim unless a hypervisor leaf outranks it,
        /// and it is exact to the millihertz.
        #[test]
        fn complete_leaf_15_is_exact(
            den in 1u32..1000, num in 1u32..1000, crystal in 1_000_000u32..100_000_000,
        ) {
            let d = discover_with(&intel(0x15, 0x906EA).with(0x15, [den, num, crystal, 0]));
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

#[test]
fn features_print_as_bitflags_did() {
    assert_eq!(format!("{:?}", X86Features::empty()), "X86Features(0x0)");
    assert_eq!(
        format!("{:?}", X86Features::all()),
        "X86Features(TSC | RDTSCP | INVARIANT_TSC | TSC_ADJUST | TSC_DEADLINE | HYPERVISOR)"
    );
    let mut f = X86Features::all();
    f.set(X86Features::TSC | X86Features::HYPERVISOR, false);
    assert!(f.contains(X86Features::RDTSCP | X86Features::TSC_DEADLINE));
    assert!(!f.contains(X86Features::TSC));
    assert!(f.contains(X86Features::empty()));
}
