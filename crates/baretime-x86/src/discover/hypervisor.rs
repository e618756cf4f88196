//! The hypervisor CPUID ranges: 0x40000000, 0x40000100, … each with a 12-byte signature in
//! EBX, ECX, EDX and its maximum leaf in EAX. A hypervisor that also presents another's
//! interface (Xen or KVM with Hyper-V's "Viridian" enlightenments) puts the foreign one at
//! 0x40000000 and its own at 0x40000100.

use crate::cpuid::{CpuidRegs, CpuidSource};

use super::leaves::{HYPERVISOR_RANGES_END, HYPERVISOR_RANGE_STRIDE, LEAF_HYPERVISOR};
use crate::bytes::regs_to_bytes;

/// Most hypervisor ranges one discovery records (real hypervisors present one or two).
pub(crate) const MAX_HYPERVISOR_RANGES: usize = 4;

/// A fixed-capacity list of hypervisor ranges, in leaf order.
pub(crate) type HypervisorRanges = heapless::Vec<HypervisorRange, MAX_HYPERVISOR_RANGES>;

/// Which hypervisor a range's signature names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum HypervisorKind {
    /// `KVMKVMKVM\0\0\0`: Linux KVM (QEMU/KVM, Firecracker, cloud-hypervisor, crosvm).
    Kvm,
    /// `XenVMMXenVMM`: Xen.
    Xen,
    /// `Microsoft Hv`: Hyper-V, or another hypervisor's Hyper-V interface.
    HyperV,
    /// `VMwareVMware`: VMware.
    Vmware,
    /// `TCGTCGTCGTCG`: QEMU without acceleration (TCG).
    QemuTcg,
    /// `ACRNACRNACRN`: ACRN.
    Acrn,
    /// `bhyve bhyve `: FreeBSD bhyve.
    Bhyve,
    /// Any other signature (kept in [`HypervisorRange::signature`]).
    Unknown,
}

impl HypervisorKind {
    /// The kind a signature names.
    pub(crate) fn from_signature(signature: &[u8; 12]) -> Self {
        match signature {
            b"KVMKVMKVM\0\0\0" => HypervisorKind::Kvm,
            b"XenVMMXenVMM" => HypervisorKind::Xen,
            b"Microsoft Hv" => HypervisorKind::HyperV,
            b"VMwareVMware" => HypervisorKind::Vmware,
            b"TCGTCGTCGTCG" => HypervisorKind::QemuTcg,
            b"ACRNACRNACRN" => HypervisorKind::Acrn,
            b"bhyve bhyve " => HypervisorKind::Bhyve,
            _ => HypervisorKind::Unknown,
        }
    }

    /// A short stable token for logs and `key=value` output.
    pub const fn token(self) -> &'static str {
        match self {
            HypervisorKind::Kvm => "kvm",
            HypervisorKind::Xen => "xen",
            HypervisorKind::HyperV => "hyperv",
            HypervisorKind::Vmware => "vmware",
            HypervisorKind::QemuTcg => "tcg",
            HypervisorKind::Acrn => "acrn",
            HypervisorKind::Bhyve => "bhyve",
            HypervisorKind::Unknown => "unknown",
        }
    }

    /// Whether range base + 0x10 is the VMware-style timing leaf (TSC kHz in EAX). Xen and
    /// Hyper-V define their own leaves and never that one.
    pub(super) const fn has_timing_leaf(self) -> bool {
        !matches!(self, HypervisorKind::Xen | HypervisorKind::HyperV)
    }
}

/// One hypervisor CPUID range.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct HypervisorRange {
    /// The range's first leaf: 0x40000000, 0x40000100, …
    pub base: u32,
    /// The highest leaf of the range (EAX of the base leaf). Where EAX is no leaf of the
    /// hypervisor ranges at all (old KVM answered 0), only the base leaf is assumed.
    pub max_leaf: u32,
    /// EBX, ECX, EDX of the base leaf.
    pub signature: [u8; 12],
    /// Which hypervisor the signature names.
    pub kind: HypervisorKind,
}

impl HypervisorRange {
    /// The range's leaf `base + offset`, when it lies within its maximum.
    pub(super) fn leaf(&self, offset: u32) -> Option<u32> {
        let leaf = self.base.checked_add(offset)?;
        (leaf <= self.max_leaf).then_some(leaf)
    }

    fn decode(base: u32, r: CpuidRegs) -> Self {
        let signature = regs_to_bytes([r.ebx, r.ecx, r.edx]);
        HypervisorRange {
            base,
            max_leaf: if (base..=0x4FFF_FFFF).contains(&r.eax) {
                r.eax
            } else {
                base
            },
            signature,
            kind: HypervisorKind::from_signature(&signature),
        }
    }
}

/// A signature a hypervisor could have written: printable ASCII or NUL padding, not empty.
/// Junk (QEMU TCG answers leaves past every maximum with other leaves' data) and the zeros a
/// dump gives for a leaf it lacks both fail this.
fn plausible_signature(s: &[u8; 12]) -> bool {
    s.iter().all(|&c| c == 0 || (0x20..=0x7E).contains(&c)) && s.iter().any(|&c| c > 0x20)
}

/// Walks the hypervisor ranges (only call it with the hypervisor bit set).
///
/// 0x40000000 is always recorded (the bit says a hypervisor is there, whatever its
/// signature). The walk goes on to 0x40000100, 0x40000200, … below 0x40010000 (Linux's
/// `hypervisor_cpuid_base` bound) while every range so far had a plausible signature, and
/// records a further range only when its signature is plausible *and* its EAX lies within
/// its own range: it stops at the first that is not, since a guest has no gaps and junk
/// past the maximum leaves must not be taken for a hypervisor. At most
/// [`MAX_HYPERVISOR_RANGES`] are recorded.
pub(super) fn walk<R: CpuidSource + ?Sized>(reader: &R) -> HypervisorRanges {
    let mut ranges = HypervisorRanges::new();
    let first = HypervisorRange::decode(LEAF_HYPERVISOR, reader.cpuid(LEAF_HYPERVISOR, 0));
    let mut go_on = plausible_signature(&first.signature);
    // The list is empty: this push cannot fail.
    let _ = ranges.push(first);
    let mut base = LEAF_HYPERVISOR;
    while go_on && !ranges.is_full() {
        base = match base.checked_add(HYPERVISOR_RANGE_STRIDE) {
            Some(b) if b < HYPERVISOR_RANGES_END => b,
            _ => break,
        };
        let r = reader.cpuid(base, 0);
        let own_range = base.saturating_add(HYPERVISOR_RANGE_STRIDE - 1);
        let range = HypervisorRange::decode(base, r);
        go_on = plausible_signature(&range.signature) && (base..=own_range).contains(&r.eax);
        if go_on {
            // Not full: checked by the loop condition.
            let _ = ranges.push(range);
        }
    }
    ranges
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn sig_regs(s: &[u8; 12]) -> [u32; 3] {
        let w = |i: usize| u32::from_le_bytes([s[i], s[i + 1], s[i + 2], s[i + 3]]);
        [w(0), w(4), w(8)]
    }

    struct Leaves(BTreeMap<u32, CpuidRegs>);

    impl Leaves {
        fn new(ranges: &[(u32, u32, &[u8; 12])]) -> Self {
            let mut m = BTreeMap::new();
            for &(base, eax, s) in ranges {
                let [ebx, ecx, edx] = sig_regs(s);
                m.insert(base, CpuidRegs { eax, ebx, ecx, edx });
            }
            Leaves(m)
        }
    }

    impl CpuidSource for Leaves {
        fn cpuid(&self, eax: u32, _: u32) -> CpuidRegs {
            self.0.get(&eax).copied().unwrap_or(CpuidRegs {
                eax: 0,
                ebx: 0,
                ecx: 0,
                edx: 0,
            })
        }
    }

    fn kinds(r: &HypervisorRanges) -> std::vec::Vec<(u32, HypervisorKind, u32)> {
        r.iter().map(|r| (r.base, r.kind, r.max_leaf)).collect()
    }

    #[test]
    fn signatures() {
        for (s, k, t) in [
            (b"KVMKVMKVM\0\0\0", HypervisorKind::Kvm, "kvm"),
            (b"XenVMMXenVMM", HypervisorKind::Xen, "xen"),
            (b"Microsoft Hv", HypervisorKind::HyperV, "hyperv"),
            (b"VMwareVMware", HypervisorKind::Vmware, "vmware"),
            (b"TCGTCGTCGTCG", HypervisorKind::QemuTcg, "tcg"),
            (b"ACRNACRNACRN", HypervisorKind::Acrn, "acrn"),
            (b"bhyve bhyve ", HypervisorKind::Bhyve, "bhyve"),
            (b"VBoxVBoxVBox", HypervisorKind::Unknown, "unknown"),
            (b"KVMKVMKVM   ", HypervisorKind::Unknown, "unknown"),
        ] {
            assert_eq!(HypervisorKind::from_signature(s), k);
            assert_eq!(k.token(), t);
        }
    }

    #[test]
    fn viridian_then_xen() {
        // Xen with Viridian: Hyper-V's interface at 0x40000000, Xen's at 0x40000100.
        let l = Leaves::new(&[
            (0x4000_0000, 0x4000_0006, b"Microsoft Hv"),
            (0x4000_0100, 0x4000_0105, b"XenVMMXenVMM"),
        ]);
        assert_eq!(
            kinds(&walk(&l)),
            [
                (0x4000_0000, HypervisorKind::HyperV, 0x4000_0006),
                (0x4000_0100, HypervisorKind::Xen, 0x4000_0105)
            ]
        );
    }

    #[test]
    fn recorded_kvm_guest_stops_at_zeros() {
        // tests/data/kvm-guest-xeon-2300mhz: 0x40000000 KVM (max 0x40000001), 0x40000100
        // all zeros.
        let l = Leaves::new(&[
            (0x4000_0000, 0x4000_0001, b"KVMKVMKVM\0\0\0"),
            (0x4000_0100, 0, &[0; 12]),
        ]);
        assert_eq!(
            kinds(&walk(&l)),
            [(0x4000_0000, HypervisorKind::Kvm, 0x4000_0001)]
        );
    }

    #[test]
    fn junk_stops_the_walk() {
        // A plausible signature whose EAX lies outside its range (TCG's echo of a basic leaf),
        // and a range after it that would be valid: neither is taken.
        let l = Leaves::new(&[
            (0x4000_0000, 0x4000_0010, b"TCGTCGTCGTCG"),
            (0x4000_0100, 0x0000_000D, b"GenuineIntel"),
            (0x4000_0200, 0x4000_0201, b"KVMKVMKVM\0\0\0"),
        ]);
        assert_eq!(
            kinds(&walk(&l)),
            [(0x4000_0000, HypervisorKind::QemuTcg, 0x4000_0010)]
        );
        // An implausible first signature: recorded (the bit is set), nothing after it.
        let l = Leaves::new(&[
            (0x4000_0000, 0x4000_0001, b"\xff\x01junkjunkju"),
            (0x4000_0100, 0x4000_0101, b"KVMKVMKVM\0\0\0"),
        ]);
        assert_eq!(
            kinds(&walk(&l)),
            [(0x4000_0000, HypervisorKind::Unknown, 0x4000_0001)]
        );
        // Old KVM: EAX 0 at the base: only the base leaf.
        let l = Leaves::new(&[(0x4000_0000, 0, b"KVMKVMKVM\0\0\0")]);
        assert_eq!(
            kinds(&walk(&l)),
            [(0x4000_0000, HypervisorKind::Kvm, 0x4000_0000)]
        );
    }

    #[test]
    fn capacity_and_end_bound() {
        // Every range valid: the list fills up and the walk stops without overflow.
        let all: std::vec::Vec<(u32, u32, &[u8; 12])> = (0..0x100u32)
            .map(|i| {
                (
                    0x4000_0000 + i * 0x100,
                    0x4000_0001 + i * 0x100,
                    b"VMwareVMware",
                )
            })
            .collect();
        let l = Leaves::new(&all);
        let r = walk(&l);
        assert_eq!(r.len(), MAX_HYPERVISOR_RANGES);
        assert_eq!(r.last().unwrap().base, 0x4000_0300);
        assert_eq!(r[0].leaf(1), Some(0x4000_0001));
        assert_eq!(r[0].leaf(2), None);
    }
}
