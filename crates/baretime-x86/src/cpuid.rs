//! Where CPUID answers come from: the CPU, a recorded dump, or a function. This crate's own
//! small trait, so that no other crate's type is part of its API.

/// The four registers one `CPUID` instruction returns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CpuidRegs {
    /// EAX.
    pub eax: u32,
    /// EBX.
    pub ebx: u32,
    /// ECX.
    pub ecx: u32,
    /// EDX.
    pub edx: u32,
}

/// Something that answers `CPUID`: the CPU itself ([`NativeCpuid`], x86_64 only), a recorded
/// `Dump` (feature `dump`), or any function `Fn(leaf, subleaf) -> CpuidRegs`,
/// so that discovery runs on register values from anywhere.
///
/// A source may return anything for any leaf; [`discover_with`](crate::discover_with) reads a
/// leaf only when the range's maximum leaf says it exists, and never panics.
///
/// ```
/// use baretime_x86::{discover_with, CpuidRegs};
///
/// // A CPU with nothing but its vendor leaf.
/// let d = discover_with(&|leaf: u32, _subleaf: u32| match leaf {
///     0 => CpuidRegs { eax: 0, ebx: 0x756E_6547, ecx: 0x6C65_746E, edx: 0x4965_6E69 },
///     _ => CpuidRegs::default(),
/// });
/// assert_eq!(d.vendor(), b"GenuineIntel");
/// assert_eq!(d.best(), None);
/// ```
pub trait CpuidSource {
    /// The registers `CPUID` returns with EAX = `leaf` and ECX = `subleaf`.
    fn cpuid(&self, leaf: u32, subleaf: u32) -> CpuidRegs;
}

impl<F: Fn(u32, u32) -> CpuidRegs> CpuidSource for F {
    fn cpuid(&self, leaf: u32, subleaf: u32) -> CpuidRegs {
        self(leaf, subleaf)
    }
}

/// The `CPUID` instruction of the CPU this code runs on.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct NativeCpuid;

#[cfg(target_arch = "x86_64")]
impl CpuidSource for NativeCpuid {
    fn cpuid(&self, leaf: u32, subleaf: u32) -> CpuidRegs {
        // `__cpuid_count` is an `unsafe fn` up to Rust 1.86 (the MSRV is 1.81) and safe after.
        #[allow(unused_unsafe)]
        // SAFETY: CPUID exists on every x86_64 CPU, at every privilege level; it writes only
        // the four registers the intrinsic returns.
        let r = unsafe { core::arch::x86_64::__cpuid_count(leaf, subleaf) };
        CpuidRegs {
            eax: r.eax,
            ebx: r.ebx,
            ecx: r.ecx,
            edx: r.edx,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closure_is_a_source() {
        let f = |leaf: u32, subleaf: u32| CpuidRegs {
            eax: leaf,
            ebx: subleaf,
            ecx: 3,
            edx: 4,
        };
        let r = f.cpuid(7, 1);
        assert_eq!((r.eax, r.ebx, r.ecx, r.edx), (7, 1, 3, 4));
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_native_source_answers_the_vendor_leaf() {
        // Leaf 0's vendor is 12 printable ASCII bytes on every CPU and hypervisor.
        let r = NativeCpuid.cpuid(0, 0);
        let bytes: Vec<u8> = [r.ebx, r.edx, r.ecx]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        assert!(
            bytes.iter().all(|b| b.is_ascii_graphic() || *b == b' '),
            "{bytes:?}"
        );
    }
}
