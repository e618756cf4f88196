//! Arbitrary bytes into the CPUID dump parser, then x86 discovery over what it parsed; and
//! the same bytes as a raw register table behind a closure reader, so that discovery also
//! sees register values no text dump would spell.
//!
//! Checked: nothing panics; a parsed dump holds leaf 0 and at most `DUMP_CAPACITY` records,
//! each of which `get` finds again; discovery returns at most `MAX_CANDIDATES` candidates,
//! most trusted first (`best()` is the first), one per source, every rate within the
//! plausible TSC range; the hypervisors' candidates only with the hypervisor bit; what was
//! dropped as implausible is outside that range; every disagreement names two candidates.
#![no_main]

use baretime::{Frequency, Source};
use baretime_x86::Dump;
use baretime_x86::{
    discover_with, CpuidRegs, X86Discovery, X86Features, MAX_PLAUSIBLE_TSC_HZ, MIN_PLAUSIBLE_TSC_HZ,
};
use libfuzzer_sys::fuzz_target;

/// The most records a dump holds (`DumpError::TooManyLeaves` beyond).
const DUMP_CAPACITY: usize = 256;
/// One candidate per CPUID source (7) and the ring-0 claims: never more than 8.
const MAX_CANDIDATES: usize = 8;

/// The trust order the x86 discovery docs give: Xen's time leaf, the hypervisor timing leaf,
/// 0x15 with its crystal, with a known crystal, with a derived crystal, 0x16, the brand
/// string. (Ring-0 claims enter only through `add_claim`, never from CPUID.)
fn trust(source: Source) -> u8 {
    match source {
        Source::XenTimeLeaf => 0,
        Source::HypervisorLeaf => 1,
        Source::CpuidTscLeaf => 2,
        Source::CpuidTscLeafKnownCrystal => 3,
        Source::CpuidTscLeafDerivedCrystal => 4,
        Source::CpuidBaseFrequency => 5,
        Source::BrandString => 6,
        _ => 7,
    }
}

fn check(d: &X86Discovery) {
    let c = d.candidates();
    assert!(c.len() <= MAX_CANDIDATES, "{} candidates", c.len());
    for f in c {
        assert!(
            (Frequency::MIN_HZ..=Frequency::MAX_HZ).contains(&f.as_hz()),
            "candidate out of range: {f:?}"
        );
        assert!(
            f.as_millihz() >= Frequency::MIN_HZ * 1000
                && f.as_millihz() <= Frequency::MAX_HZ * 1000,
            "candidate out of range: {f:?}"
        );
        assert!(
            trust(f.source()) < 7,
            "candidate from a non-CPUID source: {f:?}"
        );
        assert!(
            (MIN_PLAUSIBLE_TSC_HZ..=MAX_PLAUSIBLE_TSC_HZ).contains(&f.as_hz()),
            "implausible candidate: {f:?}"
        );
        assert_eq!(
            d.candidate(f.source()),
            Some(*f),
            "two candidates from one source"
        );
    }
    for pair in c.windows(2) {
        assert!(
            trust(pair[0].source()) <= trust(pair[1].source()),
            "candidates not sorted by trust: {c:?}"
        );
    }
    assert_eq!(
        d.best(),
        c.first().copied(),
        "best() is not the first candidate"
    );
    for source in [Source::HypervisorLeaf, Source::XenTimeLeaf] {
        if d.candidate(source).is_some() {
            assert!(
                d.features().contains(X86Features::HYPERVISOR),
                "{source:?} read without the hypervisor bit"
            );
        }
    }
    for dropped in d.implausible() {
        assert!(
            !(MIN_PLAUSIBLE_TSC_HZ..=MAX_PLAUSIBLE_TSC_HZ).contains(&dropped.hz),
            "a plausible claim dropped: {dropped:?}"
        );
    }
    for x in d.disagreements() {
        assert!(
            d.candidate(x.a).is_some()
                && d.candidate(x.b).is_some()
                && x.apart_ppb >= x.allowed_ppb,
            "a disagreement that is none: {x:?}"
        );
    }
    // The accessors over the raw fields.
    let _ = (
        d.vendor(),
        d.brand(),
        d.invariant_tsc(),
        d.crystal(),
        d.kvm_features(),
    );
    let _ = (
        d.family(),
        d.model(),
        d.stepping(),
        d.max_basic_leaf(),
        d.max_extended_leaf(),
    );
    if let Some(k) = d.kvm_features() {
        assert!(
            d.hypervisors().iter().any(|h| h.base == k.base()),
            "KVM's feature leaf outside the ranges walked: {k:?}"
        );
        let _ = (k.clock_msr(), k.stable_bit());
    }
    let _ = format!("{d:?}");
}

/// Leaves a raw register table fills, in order: the ones discovery reads.
const LEAVES: [u32; 17] = [
    0,
    1,
    0x15,
    0x16,
    0x4000_0000,
    0x4000_0001,
    0x4000_0003,
    0x4000_0010,
    0x4000_0100,
    0x4000_0103,
    0x4000_0110,
    0x8000_0000,
    0x8000_0002,
    0x8000_0003,
    0x8000_0004,
    0x8000_0007,
    0x8000_0008,
];

fuzz_target!(|data: &[u8]| {
    // 1. The bytes as a text dump.
    if let Ok(dump) = Dump::parse(data) {
        let entries = dump.entries();
        assert!(!entries.is_empty() && entries.len() <= DUMP_CAPACITY);
        assert!(
            entries.iter().any(|e| e.leaf == 0),
            "parsed dump without leaf 0"
        );
        for e in entries {
            assert!(
                dump.get(e.leaf, e.subleaf).is_some(),
                "record not found again: {e:?}"
            );
        }
        let _ = dump.format();
        check(&discover_with(&dump));
    }

    // 2. The bytes as registers (16 bytes per leaf, in LEAVES order; zeros past the end),
    //    every subleaf alike.
    let regs = |leaf: u32, _subleaf: u32| -> CpuidRegs {
        let Some(i) = LEAVES.iter().position(|&l| l == leaf) else {
            return CpuidRegs::default();
        };
        let word = |k: usize| -> u32 {
            let at = i * 16 + k * 4;
            let mut b = [0u8; 4];
            for (j, byte) in b.iter_mut().enumerate() {
                *byte = data.get(at + j).copied().unwrap_or(0);
            }
            u32::from_le_bytes(b)
        };
        CpuidRegs {
            eax: word(0),
            ebx: word(1),
            ecx: word(2),
            edx: word(3),
        }
    };
    check(&discover_with(&regs));
});
