//! The CPUID leaves that say anything about the TSC, and their decoders: pure functions of
//! register values, testable from recorded or documented values without a CPU.

use crate::cpuid::CpuidRegs;

/// Leaf 0x0: maximum basic leaf and vendor.
pub(super) const LEAF_VENDOR: u32 = 0x0;
/// Leaf 0x1: signature and feature bits.
pub(super) const LEAF_FEATURES: u32 = 0x1;
/// Leaf 0x7 subleaf 0: structured extended features (TSC_ADJUST).
pub(super) const LEAF_EXTENDED_FEATURES: u32 = 0x7;
/// Leaf 0x15: TSC / core crystal clock ratio.
pub(super) const LEAF_TSC: u32 = 0x15;
/// Leaf 0x16: processor base / max / bus frequency in MHz.
pub(super) const LEAF_FREQUENCY: u32 = 0x16;
/// Leaf 0x40000000: the first hypervisor range (signature and its maximum leaf).
pub(super) const LEAF_HYPERVISOR: u32 = 0x4000_0000;
/// Distance between hypervisor ranges (0x40000000, 0x40000100, …).
pub(super) const HYPERVISOR_RANGE_STRIDE: u32 = 0x100;
/// End (exclusive) of the hypervisor ranges walked, as Linux's `hypervisor_cpuid_base`.
pub(super) const HYPERVISOR_RANGES_END: u32 = 0x4001_0000;
/// Offset of the VMware-style timing leaf in its range (0x40000010: TSC and bus kHz).
pub(super) const HYPERVISOR_TIMING_OFFSET: u32 = 0x10;
/// Offset of Xen's time leaf in its range ("Leaf 4 (0x40000x03)" in Xen's
/// public/arch-x86/cpuid.h).
pub(super) const XEN_TIME_OFFSET: u32 = 3;
/// Offset of KVM's feature leaf in its range (KVM_CPUID_FEATURES, 0x40000001).
pub(super) const KVM_FEATURES_OFFSET: u32 = 1;
/// Offset of Hyper-V's feature leaf in its range (HYPERV_CPUID_FEATURES, 0x40000003).
pub(super) const HYPERV_FEATURES_OFFSET: u32 = 3;
/// Leaf 0x80000000: maximum extended leaf.
pub(super) const LEAF_EXTENDED_MAX: u32 = 0x8000_0000;
/// Leaf 0x80000001: extended feature bits (RDTSCP).
pub(super) const LEAF_EXTENDED_FEATURES_1: u32 = 0x8000_0001;
/// Leaf 0x80000002: first of the three brand-string leaves.
pub(super) const LEAF_BRAND_FIRST: u32 = 0x8000_0002;
/// Leaf 0x80000007: advanced power management (invariant TSC).
pub(super) const LEAF_POWER_MANAGEMENT: u32 = 0x8000_0007;

/// Raw leaf 0x15 (present only when the maximum basic leaf reaches it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub(crate) struct TscLeaf {
    /// EAX: denominator of the TSC / crystal ratio (0 = not enumerated).
    pub(crate) denominator: u32,
    /// EBX: numerator of the TSC / crystal ratio (0 = not enumerated).
    pub(crate) numerator: u32,
    /// ECX: core crystal clock in Hz (0 = not enumerated).
    pub(crate) crystal_hz: u32,
}

impl TscLeaf {
    pub(super) const fn decode(r: CpuidRegs) -> Self {
        TscLeaf {
            denominator: r.eax,
            numerator: r.ebx,
            crystal_hz: r.ecx,
        }
    }

    /// Both ratio fields are enumerated.
    pub(super) const fn has_ratio(&self) -> bool {
        self.denominator != 0 && self.numerator != 0
    }
}

/// Raw leaf 0x16 (present only when the maximum basic leaf reaches it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub(crate) struct FrequencyLeaf {
    /// EAX bits 15:0: processor base frequency in MHz.
    pub(crate) base_mhz: u16,
    /// EBX bits 15:0: maximum frequency in MHz.
    pub(crate) max_mhz: u16,
    /// ECX bits 15:0: bus (reference) frequency in MHz.
    pub(crate) bus_mhz: u16,
}

impl FrequencyLeaf {
    pub(super) const fn decode(r: CpuidRegs) -> Self {
        // Bits 31:16 are reserved: the truncation is the decoding.
        FrequencyLeaf {
            base_mhz: r.eax as u16,
            max_mhz: r.ebx as u16,
            bus_mhz: r.ecx as u16,
        }
    }
}

/// Raw hypervisor timing leaf at range base + 0x10 (0x40000010: VMware's timing leaf, also
/// offered by QEMU/KVM with `vmware-cpuid-freq`, ACRN and others).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub(crate) struct HypervisorTiming {
    /// EAX: (virtual) TSC frequency in kHz; 0 = unknown.
    pub(crate) tsc_khz: u32,
    /// EBX: (virtual) local APIC bus frequency in kHz; 0 = unknown.
    pub(crate) bus_khz: u32,
}

impl HypervisorTiming {
    pub(super) const fn decode(r: CpuidRegs) -> Self {
        HypervisorTiming {
            tsc_khz: r.eax,
            bus_khz: r.ebx,
        }
    }
}

/// Raw Xen time leaf, range base + 3 sub-leaf 0 ("Leaf 4 (0x40000x03)" in Xen's
/// public/arch-x86/cpuid.h).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub(crate) struct XenTimeLeaf {
    /// Sub-leaf 0 EAX: bit 0 the TSC is emulated, bit 1 the host TSC is known to be
    /// reliable, bit 2 RDTSCP is available.
    pub(crate) flags: u32,
    /// Sub-leaf 0 EBX: `tsc_mode` (0 default: emulate if necessary, 1 always emulate, 2 never
    /// emulate, 3 no emulation with TSC_AUX).
    pub(crate) tsc_mode: u32,
    /// Sub-leaf 0 ECX: the guest TSC frequency in kHz; 0 = unknown.
    pub(crate) tsc_khz: u32,
    /// Sub-leaf 0 EDX: the guest TSC incarnation (how often the guest has migrated).
    pub(crate) incarnation: u32,
    /// Sub-leaf 2 EAX: the host TSC frequency in kHz (informative: the guest's rate is
    /// [`XenTimeLeaf::tsc_khz`]).
    pub(crate) host_tsc_khz: u32,
}

impl XenTimeLeaf {
    /// Bit 0 of [`XenTimeLeaf::flags`]: the guest's TSC reads are emulated.
    #[cfg(test)]
    pub(crate) const FLAG_EMULATED_TSC: u32 = 1 << 0;
    /// Bit 1 of [`XenTimeLeaf::flags`]: the host TSC is known to be reliable.
    #[cfg(test)]
    pub(crate) const FLAG_HOST_TSC_RELIABLE: u32 = 1 << 1;

    pub(super) const fn decode(sub0: CpuidRegs, sub2: CpuidRegs) -> Self {
        XenTimeLeaf {
            flags: sub0.eax,
            tsc_mode: sub0.ebx,
            tsc_khz: sub0.ecx,
            incarnation: sub0.edx,
            host_tsc_khz: sub2.eax,
        }
    }
}

/// Raw Hyper-V feature leaf, range base + 3 (HYPERV_CPUID_FEATURES, 0x40000003).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub(crate) struct HyperVFeatures {
    /// EAX: the partition's privileges (Linux `ms_hyperv.features`).
    pub(crate) privileges: u32,
    /// EDX: miscellaneous features (Linux `ms_hyperv.misc_features`).
    pub(crate) misc: u32,
}

impl HyperVFeatures {
    /// EAX bit 11, Linux `HV_ACCESS_FREQUENCY_MSRS`: the guest may read the frequency MSRs.
    pub(crate) const ACCESS_FREQUENCY_MSRS: u32 = 1 << 11;
    /// EDX bit 8, Linux `HV_FEATURE_FREQUENCY_MSRS_AVAILABLE`: the frequency MSRs exist.
    pub(crate) const FREQUENCY_MSRS_AVAILABLE: u32 = 1 << 8;

    pub(super) const fn decode(r: CpuidRegs) -> Self {
        HyperVFeatures {
            privileges: r.eax,
            misc: r.edx,
        }
    }

    /// Whether a ring-0 kernel can read `HV_X64_MSR_TSC_FREQUENCY`
    /// (`HV_X64_MSR_TSC_FREQUENCY`, 0x40000022): both bits
    /// set, the condition Linux's `ms_hyperv_init_platform` checks before it uses
    /// `hv_get_tsc_khz`. CPUID cannot say what the MSR holds: discovery only reports it.
    pub(crate) const fn tsc_frequency_msr(&self) -> bool {
        self.privileges & Self::ACCESS_FREQUENCY_MSRS != 0
            && self.misc & Self::FREQUENCY_MSRS_AVAILABLE != 0
    }
}

/// (family, model, stepping) from a leaf-1 signature, as Linux decodes it.
pub(crate) fn decode_signature(signature: u32) -> (u32, u32, u32) {
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

/// Bit `n` of `reg`.
pub(super) const fn bit(reg: u32, n: u32) -> bool {
    reg & (1 << (n & 31)) != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn regs(eax: u32, ebx: u32, ecx: u32, edx: u32) -> CpuidRegs {
        CpuidRegs { eax, ebx, ecx, edx }
    }

    #[test]
    fn signature_decoding() {
        assert_eq!(decode_signature(0x000806EC), (6, 0x8E, 0xC));
        assert_eq!(decode_signature(0x00000F34), (0xF, 0x3, 0x4));
        // AMD Zen 2: base family F + extended 8 = 0x17, model 0x90 | ... .
        assert_eq!(decode_signature(0x00890F10), (0x17, 0x91, 0x0));
        // Pentium (family 5): no extended model.
        assert_eq!(decode_signature(0x000F0543), (5, 0x4, 0x3));
        // i7-7740X (recorded, tests/data): Kaby Lake 06_9EH stepping 9.
        assert_eq!(decode_signature(0x000906E9), (6, 0x9E, 0x9));
    }

    #[test]
    fn tsc_and_frequency_leaves() {
        // i7-7740X (recorded): 0x15 = 2 / 0x156 / 0, 0x16 = 4300 / 4500 / 100.
        let t = TscLeaf::decode(regs(2, 0x156, 0, 0));
        assert_eq!((t.denominator, t.numerator, t.crystal_hz), (2, 342, 0));
        assert!(t.has_ratio());
        assert!(!TscLeaf::decode(regs(0, 0x156, 0, 0)).has_ratio());
        let f = FrequencyLeaf::decode(regs(0x10CC, 0x1194, 0x64, 0));
        assert_eq!((f.base_mhz, f.max_mhz, f.bus_mhz), (4300, 4500, 100));
        // The reserved upper half is dropped.
        assert_eq!(
            FrequencyLeaf::decode(regs(0xFFFF_0000, 0, 0, 0)).base_mhz,
            0
        );
    }

    #[test]
    fn hypervisor_timing_leaf() {
        // QEMU/KVM with vmware-cpuid-freq on a 2.3 GHz host: 2 300 000 kHz, APIC bus 1 GHz.
        let t = HypervisorTiming::decode(regs(0x0023_1860, 0x000F_4240, 0, 0));
        assert_eq!((t.tsc_khz, t.bus_khz), (2_300_000, 1_000_000));
    }

    #[test]
    fn xen_time_leaf() {
        // Xen's cpuid.h layout: sub-leaf 0 = flags, tsc_mode, guest kHz, incarnation;
        // sub-leaf 2 EAX = host kHz.
        let x = XenTimeLeaf::decode(regs(0b110, 2, 2_893_437, 1), regs(2_893_437, 0, 0, 0));
        assert_eq!(x.tsc_khz, 2_893_437);
        assert_eq!(x.tsc_mode, 2);
        assert_eq!(x.incarnation, 1);
        assert_eq!(x.host_tsc_khz, 2_893_437);
        assert_eq!(x.flags & XenTimeLeaf::FLAG_EMULATED_TSC, 0);
        assert_ne!(x.flags & XenTimeLeaf::FLAG_HOST_TSC_RELIABLE, 0);
    }

    #[test]
    fn hyperv_frequency_msrs_need_both_bits() {
        // KVM's Hyper-V emulation with hv-frequencies sets EAX bit 11 and EDX bit 8.
        let both = HyperVFeatures::decode(regs(1 << 11, 0, 0, 1 << 8));
        assert!(both.tsc_frequency_msr());
        for (eax, edx) in [(1 << 11, 0), (0, 1 << 8), (0, 0), (!(1 << 11), !(1 << 8))] {
            assert!(
                !HyperVFeatures::decode(regs(eax, 0, 0, edx)).tsc_frequency_msr(),
                "{eax:#x} {edx:#x}"
            );
        }
    }
}
