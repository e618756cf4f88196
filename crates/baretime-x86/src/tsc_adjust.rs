//! `IA32_TSC_ADJUST`: the per-CPU offset firmware (or a hypervisor, or a bug) adds to the TSC,
//! checked and repaired *within each package*, as Linux does.
//!
//! Every x86 CPU's TSC is its own counter. Where CPUID.(EAX=7, ECX=0):EBX bit 1 says so, each
//! CPU also has `IA32_TSC_ADJUST` (MSR 0x3B), a signed offset that the CPU adds to its TSC; a
//! write to the TSC moves it by the same amount (Intel SDM vol. 3B, 18.17.3). Firmware that
//! "synchronises" the TSCs by writing them, or that sets the offset on some CPUs only, leaves
//! the CPUs' counters apart by exactly the difference of their `TSC_ADJUST` values: a warp
//! that [`baretime_diag::WarpCheck`] would find, with its cause readable directly.
//!
//! # What Linux does, and what this module does
//!
//! Linux (`arch/x86/kernel/tsc_sync.c`, `tsc_store_and_check_tsc_adjust`, SMP build) reads the
//! value on every CPU as it comes up and keeps it (`bootval`) with the value the CPU should
//! hold (`adjusted`). Then:
//!
//! - **Within a package** (a CPU whose package already has a CPU online, found through
//!   `topology_core_cpumask`): the CPUs of one package share one TSC clock domain, so their
//!   values must be equal. A boot value unequal to the other CPU's boot value is reported once
//!   as a firmware bug ("TSC ADJUST differs within socket(s), fixing all errors"), and a value
//!   unequal to the other CPU's `adjusted` value is overwritten with it. Such a CPU skips the
//!   TSC warp test: its package is known to be in sync.
//! - **The first CPU of a package** is compared with nothing: "the new package might have been
//!   physically hotplugged, where TSC_ADJUST is expected to be different". Packages (sockets)
//!   may be reset at different times, so their values may legitimately differ. That CPU keeps
//!   its value and runs the TSC warp test against an online CPU instead; where that test
//!   finds a warp and the MSR exists, Linux adds the measured warp to the new CPU's
//!   `TSC_ADJUST` and tests again (`check_tsc_sync_target`, up to three runs).
//! - **The boot CPU** is the first CPU of its package, and `tsc_sanitize_first_cpu` forces a
//!   non-zero value on it to 0 (with `FW_BUG "TSC ADJUST: CPU%u: %lld force to 0"`), unless
//!   the platform has said that its sockets' TSCs are reset asynchronously
//!   (`mark_tsc_async_resets`, called by the HPE/SGI UV platform code), where socket 0 may
//!   validly hold a non-zero value ("NOT forced to 0"). A non-boot first CPU is never forced
//!   to 0: a hotplugged package's firmware should have set a value that puts its TSCs in step
//!   with the running ones.
//! - Later, `tsc_verify_tsc_adjust` (on idle entry, resume and a 10-minute timer) reads each
//!   CPU's MSR again and writes back the value it should hold.
//!
//! [`TscAdjustTable`] keeps the same decisions, lock-free and without allocation, with the
//! package of each CPU given by the caller (a [`PackageId`]; [`package_in_cpuid`] derives it
//! from CPUID leaf 0x1F, 0xB or 1):
//!
//! - the boot CPU's value is its package's reference; the first CPU of any other package
//!   recorded after the boot CPU is that package's reference (a race between two CPUs of
//!   one package is decided by a compare-and-swap: one reference per package). Linux
//!   compares with any CPU of the package already online; each of those holds the first
//!   one's value after its own check, so the comparison is the same;
//! - [`TscAdjustTable::check_and_restore`] on a CPU writes its package reference's value where
//!   this CPU's differs (and reads back: a hypervisor may ignore the write); on a reference
//!   CPU checked again, the value it held (Linux's `tsc_verify_tsc_adjust`);
//! - the boot CPU's non-zero value is reset to 0 or kept, as the table was built
//!   ([`BootCpuValue`]; Linux's default is to reset);
//! - differences **between** packages are reported ([`TscAdjustTable::package_differences`],
//!   [`TscAdjustSummary::package_pairs_differing`], [`TscAdjustTable::package_finding`]),
//!   never written: whether the packages' TSCs agree is for the warp check to measure
//!   ([`baretime_diag::WarpCheck`]). This module does not compensate a measured warp as Linux's
//!   sync test does.
//!
//! The pieces:
//!
//! - [`TscAdjust`]: the MSR on the CPU this runs on (ring 0 only: [`TscAdjust::probe`] is
//!   `unsafe`), with [`TscAdjust::restore`] to write a reference value back and read again.
//! - [`TscAdjustMsr`]: what the table needs of an MSR (read, write, restore): [`TscAdjust`]
//!   on hardware, a simulated register in tests.
//! - [`TscAdjustTable`]: one recorded value and package per CPU, one reference per package
//!   (usable in a `static`); its [`TscAdjustTable::summary`] reports non-zero values, values
//!   unequal to their package's reference, and package pairs whose values differ.
//! - `compare` and `repair_value`: the pure decisions (crate-private, unit-tested).

use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use crate::cpuid::{CpuidSource, NativeCpuid};

use crate::msr::{rdmsr, wrmsr, IA32_TSC_ADJUST};

/// Whether `cpuid` says `IA32_TSC_ADJUST` exists: CPUID.(EAX=7, ECX=0):EBX bit 1, where the
/// maximum basic leaf reaches 7. (Discovery reports the same bit as
/// [`X86Features::TSC_ADJUST`](crate::X86Features::TSC_ADJUST).)
pub(crate) fn tsc_adjust_in_cpuid<S: CpuidSource + ?Sized>(cpuid: &S) -> bool {
    cpuid.cpuid(0, 0).eax >= 7 && cpuid.cpuid(7, 0).ebx & (1 << 1) != 0
}

/// A CPU package (socket): the CPUs that share one package share one TSC clock domain, so
/// their `IA32_TSC_ADJUST` values must agree; two packages' values may differ.
///
/// Any numbering the kernel uses will do, as long as every CPU of one package gets the same
/// id and CPUs of different packages different ids: the APIC ID's package bits
/// ([`PackageId::from_apic_id`], [`package_in_cpuid`]), or a logical package number from the
/// firmware's tables. Ids need not be dense.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PackageId(pub u32);

impl PackageId {
    /// The package bits of an (x2)APIC ID: `apic_id >> shift`, where `shift` is the number of
    /// low bits that number the CPUs within a package (CPUID leaf 0x1F or 0xB: `EAX[4:0]` of
    /// the highest level below the package). A `shift` of 32 or more gives package 0.
    ///
    /// ```
    /// use baretime_x86::PackageId;
    /// // 2 threads × 8 cores per package: 4 low bits; APIC ID 0x23 is in package 2.
    /// assert_eq!(PackageId::from_apic_id(0x23, 4), PackageId(2));
    /// ```
    pub const fn from_apic_id(apic_id: u32, shift: u32) -> PackageId {
        match apic_id.checked_shr(shift) {
            Some(p) => PackageId(p),
            None => PackageId(0),
        }
    }
}

/// The package of the CPU whose CPUID `reader` reads, from its APIC ID:
///
/// 1. leaf 0x1F (V2 extended topology), else leaf 0xB (extended topology), where the maximum
///    basic leaf includes it and its sub-leaf 0 names a level: the x2APIC ID (EDX) shifted
///    right by `EAX[4:0]` of the last level before the terminating sub-leaf (level type 0;
///    at most 32 sub-leaves are read, so a reader that never terminates cannot loop);
/// 2. else leaf 1: the initial APIC ID (`EBX[31:24]`), shifted right by the bits that number
///    `EBX[23:16]` logical processors where EDX bit 28 (HTT) is set (0 where clear: one
///    logical processor per package), or by the AMD ApicIdSize (leaf 0x8000_0008
///    `ECX[15:12]`) where that is larger (Intel reports 0 there).
///
/// `None` where the maximum basic leaf is 0. Read on the CPU in question (CPUID describes the
/// CPU that executes it). Platforms whose package is not in the APIC ID this way (a
/// hypervisor that presents a flat topology over several sockets, say) must pass the id
/// from elsewhere.
///
/// ```
/// use baretime_x86::{package_in_cpuid, CpuidRegs, PackageId};
/// // Leaf 0xB: SMT (shift 1), then core (shift 4), on the CPU with x2APIC ID 0x23.
/// let leaf = |eax: u32, ecx: u32| {
///     let r = |eax, ebx, ecx, edx| CpuidRegs { eax, ebx, ecx, edx };
///     match (eax, ecx) {
///         (0, _) => r(0xB, 0, 0, 0),
///         (0xB, 0) => r(1, 2, 0x100, 0x23),
///         (0xB, 1) => r(4, 16, 0x201, 0x23),
///         (0xB, _) => r(0, 0, ecx, 0x23),
///         _ => r(0, 0, 0, 0),
///     }
/// };
/// assert_eq!(package_in_cpuid(&leaf), Some(PackageId(2)));
/// ```
pub fn package_in_cpuid<S: CpuidSource + ?Sized>(reader: &S) -> Option<PackageId> {
    let max_leaf = reader.cpuid(0, 0).eax;
    if max_leaf == 0 {
        return None;
    }
    for leaf in [0x1F, 0xB] {
        if leaf <= max_leaf {
            if let Some(p) = package_in_topology_leaf(reader, leaf) {
                return Some(p);
            }
        }
    }
    let l1 = reader.cpuid(1, 0);
    let apic_id = l1.ebx >> 24;
    let mut shift = 0;
    if l1.edx & (1 << 28) != 0 {
        let logical = (l1.ebx >> 16) & 0xFF;
        // The bits that number `logical` CPUs: 0 for 0 or 1, 8 for 129..=255.
        shift = logical
            .checked_next_power_of_two()
            .map_or(8, u32::trailing_zeros);
    }
    if reader.cpuid(0x8000_0000, 0).eax >= 0x8000_0008 {
        let apic_id_size = (reader.cpuid(0x8000_0008, 0).ecx >> 12) & 0xF;
        shift = shift.max(apic_id_size);
    }
    Some(PackageId::from_apic_id(apic_id, shift))
}

/// Leaf 0x1F or 0xB: `None` where its sub-leaf 0 names no level.
fn package_in_topology_leaf<S: CpuidSource + ?Sized>(reader: &S, leaf: u32) -> Option<PackageId> {
    let mut last: Option<(u32, u32)> = None; // (shift, x2APIC ID)
    for sub_leaf in 0..32 {
        let r = reader.cpuid(leaf, sub_leaf);
        if (r.ecx >> 8) & 0xFF == 0 {
            break; // level type 0: no more levels
        }
        last = Some((r.eax & 0x1F, r.edx));
    }
    last.map(|(shift, x2apic_id)| PackageId::from_apic_id(x2apic_id, shift))
}

/// What a [`TscAdjustTable`] needs of the `IA32_TSC_ADJUST` of the CPU the code runs on:
/// [`TscAdjust`] on hardware; in tests, a simulated register.
pub trait TscAdjustMsr {
    /// The register's value, as the signed offset it is.
    fn read(&self) -> i64;

    /// Sets the register to `value`.
    fn write(&self, value: i64);

    /// Linux's repair: if the value differs from `reference`, writes `reference` and reads
    /// the register again ([`TscAdjustRepair::is_fixed`] says whether the write took).
    fn restore(&self, reference: i64) -> TscAdjustRepair {
        let before = self.read();
        let wrote = repair_value(reference, before);
        if let Some(v) = wrote {
            self.write(v);
        }
        TscAdjustRepair {
            reference,
            before,
            wrote,
            after: self.read(),
        }
    }
}

/// `IA32_TSC_ADJUST` of the CPU the code runs on. Holding one proves that the MSR exists and
/// that the holder runs at ring 0, so reads and writes are safe.
///
/// A `TscAdjust` names no CPU: each call reads or writes the MSR of the CPU that executes
/// it. Use it on the CPU whose value you mean, with migration off (a kernel's per-CPU code).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TscAdjust {
    _ring0: (),
}

impl TscAdjust {
    /// `Some` where CPUID says the MSR exists (leaf 7 EBX bit 1: discovery's
    /// [`X86Features::TSC_ADJUST`](crate::X86Features::TSC_ADJUST)).
    ///
    /// # Safety
    ///
    /// The caller runs at CPL 0 (ring 0), and so does all code it hands the token to: the
    /// token's reads and writes execute `RDMSR` / `WRMSR`, which raise #GP elsewhere. (In a
    /// user-space process the call itself is harmless, but no use of the result is.)
    pub unsafe fn probe() -> Option<TscAdjust> {
        tsc_adjust_in_cpuid(&NativeCpuid).then_some(TscAdjust { _ring0: () })
    }

    /// This CPU's `IA32_TSC_ADJUST`, as the signed offset it is.
    pub fn read(&self) -> i64 {
        // A TscAdjust proves CPL 0 (probe's contract) and that MSR 0x3B exists (CPUID said so
        // in probe; an MSR that one CPU of a system reports exists on all of them).
        // SAFETY: so RDMSR does not fault; reading this MSR has no side effect.
        let raw = unsafe { rdmsr(IA32_TSC_ADJUST) };
        raw as i64 // the MSR holds a two's-complement 64-bit value
    }

    /// Sets this CPU's `IA32_TSC_ADJUST` to `value`: its TSC moves by `value − read()`
    /// ticks at once. Every timestamp taken on this CPU before the write is that much off
    /// from those after it (a [`baretime::Clock`] on this CPU sees a jump, or time standing
    /// still if it moves back).
    pub fn write(&self, value: i64) {
        // SAFETY: CPL 0 and the MSR as in `read`; every value is valid for IA32_TSC_ADJUST (no
        // reserved bits), and its only effect, this CPU's TSC moving, is in the docs.
        unsafe { wrmsr(IA32_TSC_ADJUST, value as u64) };
    }

    /// Linux's repair: if this CPU's value differs from `reference` (its package
    /// reference's), writes `reference` and reads the MSR again.
    /// [`TscAdjustRepair::is_fixed`] says whether it took (a hypervisor may ignore the
    /// write). Afterwards this CPU's TSC agrees with the reference CPU's to within what the
    /// offsets alone explain: run the warp check again to see.
    pub fn restore(&self, reference: i64) -> TscAdjustRepair {
        TscAdjustMsr::restore(self, reference)
    }
}

impl TscAdjustMsr for TscAdjust {
    fn read(&self) -> i64 {
        TscAdjust::read(self)
    }

    fn write(&self, value: i64) {
        TscAdjust::write(self, value);
    }
}

/// The value to write on a CPU whose `IA32_TSC_ADJUST` reads `this`, to match `reference`:
/// `None` when they are equal already. (Linux's rule; a pure function so it is tested on
/// any host.)
pub(crate) const fn repair_value(reference: i64, this: i64) -> Option<i64> {
    if reference == this {
        None
    } else {
        Some(reference)
    }
}

/// What [`TscAdjust::restore`] / [`TscAdjustMsr::restore`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct TscAdjustRepair {
    /// The value it aimed for.
    pub reference: i64,
    /// This CPU's value before.
    pub before: i64,
    /// The value written, if one was (`None`: it was equal already).
    pub wrote: Option<i64>,
    /// The value read back afterwards.
    pub after: i64,
}

impl TscAdjustRepair {
    /// True when the value read back is the reference.
    pub const fn is_fixed(&self) -> bool {
        self.after == self.reference
    }
}

/// One value of `IA32_TSC_ADJUST` against a reference: a CPU's against its package
/// reference's ([`TscAdjustTable::finding`]), or a package's against the boot CPU's package
/// ([`TscAdjustTable::package_finding`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum TscAdjustFinding {
    /// Both 0: nothing has moved either TSC.
    Zero,
    /// Equal to the reference, but not 0: both counters are moved by the same offset
    /// (harmless between them; firmware wrote the TSCs, which Linux reports as a bug on the
    /// boot CPU).
    SameNonZero {
        /// The common value.
        value: i64,
    },
    /// Unequal: this TSC is `this − reference` ticks ahead of the reference's (behind if
    /// negative), on top of whatever else sets them apart. Within a package, a fault to
    /// repair; between packages, a difference to measure (the warp check), not a fault.
    Differs {
        /// The reference's value.
        reference: i64,
        /// This value.
        this: i64,
        /// `this − reference`, exact.
        diff_ticks: i128,
    },
}

/// Compares a value `this` with a reference value.
pub(crate) const fn compare(reference: i64, this: i64) -> TscAdjustFinding {
    if reference != this {
        TscAdjustFinding::Differs {
            reference,
            this,
            diff_ticks: diff_ticks(reference, this),
        }
    } else if this == 0 {
        TscAdjustFinding::Zero
    } else {
        TscAdjustFinding::SameNonZero { value: this }
    }
}

/// `this − reference`: two i64s differ by less than 2^64, exact in i128.
const fn diff_ticks(reference: i64, this: i64) -> i128 {
    (this as i128).wrapping_sub(reference as i128)
}

/// Why a value was not recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum TscAdjustError {
    /// `cpu` is not below the table's size (or, for a table of 2^32 − 1 CPUs or more, not
    /// below 2^32 − 1).
    CpuOutOfRange {
        /// The CPU given.
        cpu: usize,
        /// CPUs the table holds.
        cpus: usize,
    },
    /// `cpu` was recorded in package `was` and is now given as in package `now`: a CPU does
    /// not change package, so one of the two ids is wrong. Nothing was recorded or written.
    PackageChanged {
        /// The CPU given.
        cpu: usize,
        /// The package it was recorded in.
        was: PackageId,
        /// The package given now.
        now: PackageId,
    },
}

impl core::fmt::Display for TscAdjustError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            TscAdjustError::CpuOutOfRange { cpu, cpus } => {
                write!(f, "CPU {cpu} is outside the table's {cpus} CPUs")
            }
            TscAdjustError::PackageChanged { cpu, was, now } => write!(
                f,
                "CPU {cpu} was recorded in package {} and is now given as in package {}",
                was.0, now.0
            ),
        }
    }
}

impl core::error::Error for TscAdjustError {}

/// What a [`TscAdjustTable`] does with a non-zero value on the boot CPU in
/// [`TscAdjustTable::check_and_restore`] (Linux's `tsc_sanitize_first_cpu`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum BootCpuValue {
    /// Write 0 (Linux's default: a non-zero value on the boot CPU is a firmware bug). This
    /// moves the boot CPU's TSC: check before anything takes timestamps on it, in
    /// particular before a [`baretime::Clock`] on the TSC starts.
    ResetToZero,
    /// Keep it as the boot package's reference (Linux where the platform reset its sockets'
    /// TSCs asynchronously, `tsc_async_resets`; or a kernel whose clock already runs on the
    /// boot CPU's TSC and must not see it jump).
    Keep,
}

/// A CPU's part in its package, as [`TscAdjustTable::record`] and
/// [`TscAdjustTable::check_and_restore`] found it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum TscAdjustRole {
    /// Its package's reference: the boot CPU for the boot CPU's package; for any other
    /// package the first of its CPUs recorded after the boot CPU. Compared with nothing
    /// (another package's value may legitimately differ).
    Reference,
    /// A later CPU of a package that has a reference: compared with it (and repaired to it,
    /// by `check_and_restore`).
    Member {
        /// Its package's reference CPU.
        reference_cpu: usize,
    },
    /// Recorded before the boot CPU: no package has a reference yet, so nothing was compared
    /// or written. Check this CPU again once the boot CPU is recorded.
    BeforeBootCpu,
}

/// What [`TscAdjustTable::check_and_restore`] did on one CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct TscAdjustCheck {
    /// The CPU's package.
    pub package: PackageId,
    /// Its part in the package.
    pub role: TscAdjustRole,
    /// The value read on entry.
    pub found: i64,
    /// The restore, where a value was aimed for: a member's package reference, a reference
    /// CPU's own earlier value (checked again), or 0 on the boot CPU under
    /// [`BootCpuValue::ResetToZero`]. `None` on a package's first check of its reference
    /// (other than such a boot CPU) and before the boot CPU.
    pub repair: Option<TscAdjustRepair>,
    /// The value recorded afterwards (read back after any write).
    pub value: i64,
}

impl TscAdjustCheck {
    /// True unless a write did not take (the value read back is not the one aimed for).
    pub const fn is_fixed(&self) -> bool {
        match self.repair {
            Some(r) => r.is_fixed(),
            None => true,
        }
    }
}

/// A package's reference: its CPU and that CPU's recorded value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct PackageReference {
    /// The package.
    pub package: PackageId,
    /// Its reference CPU.
    pub cpu: usize,
    /// That CPU's recorded value.
    pub value: i64,
}

/// Two packages whose reference values differ: reported, never repaired.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct PackageDifference {
    /// The package whose reference was recorded first.
    pub first: PackageReference,
    /// The other.
    pub second: PackageReference,
    /// `second.value − first.value`, exact: how far the second package's TSCs are moved
    /// ahead of the first's by the offsets alone.
    pub diff_ticks: i128,
}

/// A package slot holding nothing.
const EMPTY_SLOT: u64 = 0;

/// A package slot's word: the package in the high half, the reference CPU + 1 in the low
/// half (so that no claimed slot is [`EMPTY_SLOT`]). `None` where `cpu + 1` needs more than
/// 32 bits.
fn slot_word(package: PackageId, cpu: usize) -> Option<u64> {
    let cpu_plus_1 = u32::try_from(cpu).ok()?.checked_add(1)?;
    Some((u64::from(package.0) << 32) | u64::from(cpu_plus_1))
}

/// The package and reference CPU of a slot's word (`None`: empty).
fn slot_parts(word: u64) -> Option<(PackageId, usize)> {
    let cpu = (word as u32).checked_sub(1)?; // the low half
    Some((PackageId((word >> 32) as u32), cpu as usize))
}

/// One recorded `IA32_TSC_ADJUST` value and package per CPU, for CPUs `0..N`, with one
/// reference per package: the boot CPU for its own package, the first CPU recorded after it
/// for each other package: Linux's rules (`tsc_store_and_check_tsc_adjust` in
/// `arch/x86/kernel/tsc_sync.c`), which these are. Lock-free (each CPU writes its own entry; a package's reference is claimed by a
/// compare-and-swap), no allocation, usable in a `static`.
///
/// ```
/// use baretime_x86::{BootCpuValue, PackageId, TscAdjustTable};
/// static TABLE: TscAdjustTable<4> = TscAdjustTable::new(0, BootCpuValue::ResetToZero);
/// // Each CPU, as it comes up, the boot CPU first:
/// //     TABLE.check_and_restore(&tsc_adjust, cpu, package)
/// // or, to record values read elsewhere without writing anything:
/// let (p0, p1) = (PackageId(0), PackageId(1));
/// TABLE.record(0, p0, 0).unwrap();
/// TABLE.record(1, p0, 0).unwrap();
/// TABLE.record(2, p1, -250_000).unwrap(); // package 1's reference
/// TABLE.record(3, p1, -250_001).unwrap(); // disagrees within package 1
/// let s = TABLE.summary();
/// assert_eq!((s.recorded, s.packages, s.differing), (4, 2, 1));
/// assert_eq!(s.worst, Some((3, -250_001)));
/// assert_eq!(s.package_pairs_differing, 1); // reported, not a fault
/// assert!(!s.is_consistent());
/// ```
#[derive(Debug)]
pub struct TscAdjustTable<const N: usize> {
    boot_cpu: usize,
    boot_value: BootCpuValue,
    /// Each CPU's latest recorded value (what it holds, or should: Linux's `adjusted`).
    values: [AtomicU64; N],
    /// Each CPU's first recorded value (as firmware left it: Linux's `bootval`).
    found: [AtomicU64; N],
    packages: [AtomicU32; N],
    recorded: [AtomicBool; N],
    /// One per package with a reference, filled in order from slot 0 (the boot CPU's):
    /// [`slot_word`]. A CPU claims at most one slot (its package never changes), so `N`
    /// slots hold every package.
    slots: [AtomicU64; N],
}

impl<const N: usize> TscAdjustTable<N> {
    /// An empty table whose boot CPU (its package's reference, and the first CPU to be
    /// recorded) is `boot_cpu`, and which treats a non-zero value on it as `boot_value` says.
    pub const fn new(boot_cpu: usize, boot_value: BootCpuValue) -> TscAdjustTable<N> {
        TscAdjustTable {
            boot_cpu,
            boot_value,
            values: [const { AtomicU64::new(0) }; N],
            found: [const { AtomicU64::new(0) }; N],
            packages: [const { AtomicU32::new(0) }; N],
            recorded: [const { AtomicBool::new(false) }; N],
            slots: [const { AtomicU64::new(EMPTY_SLOT) }; N],
        }
    }

    /// The boot CPU given to [`TscAdjustTable::new`].
    pub const fn boot_cpu(&self) -> usize {
        self.boot_cpu
    }

    fn out_of_range(cpu: usize) -> TscAdjustError {
        TscAdjustError::CpuOutOfRange { cpu, cpus: N }
    }

    /// CPU `cpu`'s package, if recorded; an error if `cpu` is out of range.
    fn recorded_package(&self, cpu: usize) -> Result<Option<PackageId>, TscAdjustError> {
        let (Some(r), Some(p)) = (self.recorded.get(cpu), self.packages.get(cpu)) else {
            return Err(Self::out_of_range(cpu));
        };
        Ok(r.load(Ordering::Acquire)
            .then(|| PackageId(p.load(Ordering::Relaxed))))
    }

    /// Stores CPU `cpu`'s value (and, on its first record, `found` and its package), after
    /// checking that the package did not change.
    fn store(
        &self,
        cpu: usize,
        package: PackageId,
        found: i64,
        value: i64,
    ) -> Result<(), TscAdjustError> {
        let (Some(v), Some(f), Some(p), Some(r)) = (
            self.values.get(cpu),
            self.found.get(cpu),
            self.packages.get(cpu),
            self.recorded.get(cpu),
        ) else {
            return Err(Self::out_of_range(cpu));
        };
        if slot_word(package, cpu).is_none() {
            return Err(Self::out_of_range(cpu));
        }
        if r.load(Ordering::Acquire) {
            let was = PackageId(p.load(Ordering::Relaxed));
            if was != package {
                return Err(TscAdjustError::PackageChanged {
                    cpu,
                    was,
                    now: package,
                });
            }
        } else {
            f.store(found as u64, Ordering::Relaxed);
            p.store(package.0, Ordering::Relaxed);
        }
        v.store(value as u64, Ordering::Relaxed);
        // Release: whoever sees the flag (or, through the package slot claimed after this,
        // the reference) sees the value, the found value and the package.
        r.store(true, Ordering::Release);
        Ok(())
    }

    /// CPU `cpu`'s part in package `package`, claiming the package's reference where it has
    /// none (only once the boot CPU holds slot 0; the boot CPU claims slot 0). `cpu` is
    /// recorded already.
    fn claim(&self, cpu: usize, package: PackageId) -> TscAdjustRole {
        let Some(mine) = slot_word(package, cpu) else {
            return TscAdjustRole::BeforeBootCpu; // `store` refused such a CPU already
        };
        let boot_claimed = self
            .slots
            .first()
            .is_some_and(|s| s.load(Ordering::Acquire) != EMPTY_SLOT);
        if cpu != self.boot_cpu && !boot_claimed {
            return TscAdjustRole::BeforeBootCpu;
        }
        for slot in &self.slots {
            let mut word = slot.load(Ordering::Acquire);
            if word == EMPTY_SLOT {
                // AcqRel: publishes this CPU's value with the claim; on failure, Acquire sees
                // the winner's.
                match slot.compare_exchange(EMPTY_SLOT, mine, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => return TscAdjustRole::Reference,
                    Err(now) => word = now,
                }
            }
            if let Some((p, reference_cpu)) = slot_parts(word) {
                if p == package {
                    return if reference_cpu == cpu {
                        TscAdjustRole::Reference
                    } else {
                        TscAdjustRole::Member { reference_cpu }
                    };
                }
            }
        }
        // Every slot holds another package, each claimed by another CPU: N other CPUs in a
        // table of N, which cannot be. Compared with nothing, as before the boot CPU.
        TscAdjustRole::BeforeBootCpu
    }

    /// Records CPU `cpu`'s `value` in `package` (again, after a write: the latest counts; the
    /// first is kept as the value found), and returns its part in the package: where the
    /// package has no reference yet and the boot CPU is recorded (or this is the boot CPU),
    /// this CPU becomes it. Reads and writes no MSR (and does not reset the boot CPU's
    /// value: [`TscAdjustTable::check_and_restore`] does).
    pub fn record(
        &self,
        cpu: usize,
        package: PackageId,
        value: i64,
    ) -> Result<TscAdjustRole, TscAdjustError> {
        self.store(cpu, package, value, value)?;
        Ok(self.claim(cpu, package))
    }

    /// Linux's `tsc_store_and_check_tsc_adjust` (and, on a CPU checked before,
    /// `tsc_verify_tsc_adjust`) on CPU `cpu`, the CPU that runs this, whose package is
    /// `package` and whose MSR is `msr`. Check the boot CPU first.
    ///
    /// - The boot CPU: a non-zero value is written to 0 under [`BootCpuValue::ResetToZero`]
    ///   (and read back), kept under [`BootCpuValue::Keep`]; the value is its package's
    ///   reference.
    /// - The first CPU of another package (recorded after the boot CPU): its value becomes
    ///   the package's reference; nothing is written, whatever other packages hold (see
    ///   [`TscAdjustTable::package_finding`] for how it compares).
    /// - Any other CPU: where its value differs from its package reference's, that value is
    ///   written and read back ([`TscAdjustMsr::restore`]).
    /// - A reference CPU checked again: its own recorded value is written back where the MSR
    ///   has changed since (0 on a boot CPU under `ResetToZero`).
    /// - A CPU checked before the boot CPU is recorded: recorded only
    ///   ([`TscAdjustRole::BeforeBootCpu`]); check it again later.
    ///
    /// The value read back afterwards is recorded. Errors (nothing written): `cpu` out of
    /// range, or a package other than the one `cpu` was recorded in.
    pub fn check_and_restore<M: TscAdjustMsr + ?Sized>(
        &self,
        msr: &M,
        cpu: usize,
        package: PackageId,
    ) -> Result<TscAdjustCheck, TscAdjustError> {
        if let Some(was) = self.recorded_package(cpu)? {
            if was != package {
                return Err(TscAdjustError::PackageChanged {
                    cpu,
                    was,
                    now: package,
                });
            }
        }
        let found = msr.read();
        let reset = cpu == self.boot_cpu && matches!(self.boot_value, BootCpuValue::ResetToZero);
        let (role, repair) = match self.package_reference(package) {
            Some(r) => {
                let (role, target) = if r.cpu == cpu {
                    (TscAdjustRole::Reference, if reset { 0 } else { r.value })
                } else {
                    (
                        TscAdjustRole::Member {
                            reference_cpu: r.cpu,
                        },
                        r.value,
                    )
                };
                (role, Some(msr.restore(target)))
            }
            None => {
                // The package's first check of its reference, or a race for it.
                let repair = reset.then(|| msr.restore(0));
                let value = repair.map_or(found, |r| r.after);
                self.store(cpu, package, found, value)?;
                match self.claim(cpu, package) {
                    TscAdjustRole::Member { reference_cpu } => {
                        // Another CPU of the package claimed it first.
                        let target = self.value(reference_cpu).unwrap_or(value);
                        let role = TscAdjustRole::Member { reference_cpu };
                        (role, Some(msr.restore(target)))
                    }
                    role => (role, repair),
                }
            }
        };
        let value = repair.map_or(found, |r| r.after);
        self.store(cpu, package, found, value)?;
        Ok(TscAdjustCheck {
            package,
            role,
            found,
            repair,
            value,
        })
    }

    /// CPU `cpu`'s latest recorded value.
    pub fn value(&self, cpu: usize) -> Option<i64> {
        let recorded = self.recorded.get(cpu)?.load(Ordering::Acquire);
        recorded.then(|| {
            self.values
                .get(cpu)
                .map(|v| v.load(Ordering::Relaxed) as i64)
        })?
    }

    /// CPU `cpu`'s first recorded value: the value firmware left, where the CPU was first
    /// recorded by [`TscAdjustTable::check_and_restore`] (Linux's `bootval`).
    pub fn found(&self, cpu: usize) -> Option<i64> {
        let recorded = self.recorded.get(cpu)?.load(Ordering::Acquire);
        recorded.then(|| {
            self.found
                .get(cpu)
                .map(|v| v.load(Ordering::Relaxed) as i64)
        })?
    }

    /// CPU `cpu`'s package, once recorded.
    pub fn package(&self, cpu: usize) -> Option<PackageId> {
        self.recorded_package(cpu).ok().flatten()
    }

    /// The boot CPU's recorded value: the reference of its package.
    pub fn boot_value(&self) -> Option<i64> {
        self.value(self.boot_cpu)
    }

    /// The reference of the package in `slot`, if claimed.
    fn reference_in(&self, slot: &AtomicU64) -> Option<PackageReference> {
        let (package, cpu) = slot_parts(slot.load(Ordering::Acquire))?;
        Some(PackageReference {
            package,
            cpu,
            value: self.value(cpu)?,
        })
    }

    /// The packages with a reference, in the order they were claimed (the boot CPU's
    /// first).
    pub fn packages(&self) -> impl Iterator<Item = PackageReference> + '_ {
        self.slots.iter().map_while(|s| self.reference_in(s))
    }

    /// `package`'s reference, if it has one.
    pub fn package_reference(&self, package: PackageId) -> Option<PackageReference> {
        self.packages().find(|r| r.package == package)
    }

    /// CPU `cpu` against its package's reference (`None` until both are recorded).
    pub fn finding(&self, cpu: usize) -> Option<TscAdjustFinding> {
        let reference = self.package_reference(self.package(cpu)?)?;
        Some(compare(reference.value, self.value(cpu)?))
    }

    /// `package`'s reference value against the boot CPU's package's: a report, never a
    /// fault to repair (packages may be reset at different times). `None` until both have a
    /// reference.
    pub fn package_finding(&self, package: PackageId) -> Option<TscAdjustFinding> {
        let boot = self.packages().next()?;
        Some(compare(boot.value, self.package_reference(package)?.value))
    }

    /// Every pair of packages whose reference values differ, each pair once, in the order
    /// the packages were claimed. Reported, never repaired.
    pub fn package_differences(&self) -> impl Iterator<Item = PackageDifference> + '_ {
        self.packages().enumerate().flat_map(move |(i, first)| {
            self.packages()
                .skip(i.saturating_add(1))
                .filter(move |second| second.value != first.value)
                .map(move |second| PackageDifference {
                    first,
                    second,
                    diff_ticks: diff_ticks(first.value, second.value),
                })
        })
    }

    /// Every recorded CPU against its package's reference, and the packages against each
    /// other.
    pub fn summary(&self) -> TscAdjustSummary {
        let mut s = TscAdjustSummary {
            recorded: 0,
            boot_value: self.boot_value(),
            nonzero: 0,
            differing: 0,
            worst: None,
            found_differing: 0,
            unreferenced: 0,
            packages: 0,
            package_pairs_differing: 0,
        };
        let mut worst_by = 0u128;
        for cpu in 0..N {
            let (Some(v), Some(found), Some(package)) =
                (self.value(cpu), self.found(cpu), self.package(cpu))
            else {
                continue;
            };
            s.recorded = s.recorded.saturating_add(1);
            if v != 0 {
                s.nonzero = s.nonzero.saturating_add(1);
            }
            let Some(reference) = self.package_reference(package) else {
                s.unreferenced = s.unreferenced.saturating_add(1);
                continue;
            };
            if v != reference.value {
                s.differing = s.differing.saturating_add(1);
                let by = diff_ticks(reference.value, v).unsigned_abs();
                if by > worst_by {
                    worst_by = by;
                    s.worst = Some((cpu, v));
                }
            }
            if self
                .found(reference.cpu)
                .is_some_and(|reference_found| reference_found != found)
            {
                s.found_differing = s.found_differing.saturating_add(1);
            }
        }
        s.packages = count_u32(self.packages());
        s.package_pairs_differing = count_u32(self.package_differences());
        s
    }
}

/// An iterator's length, saturating at `u32::MAX`.
fn count_u32<T>(it: impl Iterator<Item = T>) -> u32 {
    it.fold(0u32, |n, _| n.saturating_add(1))
}

/// What a [`TscAdjustTable`] holds: each CPU against its package's reference, and the
/// packages against each other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct TscAdjustSummary {
    /// CPUs recorded.
    pub recorded: u32,
    /// The boot CPU's value (`None` until it is recorded).
    pub boot_value: Option<i64>,
    /// CPUs whose value is not 0 (the boot CPU included).
    pub nonzero: u32,
    /// CPUs whose value differs from their package reference's: faults that
    /// [`TscAdjustTable::check_and_restore`] repairs (0 after a repair that took).
    pub differing: u32,
    /// The CPU furthest from its package reference's value, and its value.
    pub worst: Option<(usize, i64)>,
    /// CPUs whose value as found differed from their package reference's as found: Linux's
    /// "TSC ADJUST differs within socket(s)" firmware bug, still counted after a repair.
    pub found_differing: u32,
    /// CPUs whose package has no reference (recorded before the boot CPU, and the only ones
    /// of their package): compared with nothing.
    pub unreferenced: u32,
    /// Packages with a reference.
    pub packages: u32,
    /// Pairs of packages whose reference values differ ([`TscAdjustTable::package_differences`]
    /// lists them): reported, not repaired; the warp check says whether their TSCs agree.
    pub package_pairs_differing: u32,
}

impl TscAdjustSummary {
    /// The boot CPU is recorded, and every recorded value is 0.
    pub const fn is_clean(&self) -> bool {
        self.boot_value.is_some()
            && self.nonzero == 0
            && self.differing == 0
            && self.unreferenced == 0
    }

    /// The boot CPU is recorded, and every recorded CPU holds its package reference's value
    /// (packages may hold different ones): nothing left to repair.
    pub const fn is_consistent(&self) -> bool {
        self.boot_value.is_some() && self.differing == 0 && self.unreferenced == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpuid::CpuidRegs as CpuIdResult;
    use std::cell::Cell;

    fn cpuid(max_leaf: u32, leaf7_ebx: u32) -> impl Fn(u32, u32) -> CpuIdResult {
        move |eax: u32, _ecx: u32| {
            let zero = CpuIdResult::default();
            match eax {
                0 => CpuIdResult {
                    eax: max_leaf,
                    ..zero
                },
                // What the CPU answers whatever the maximum: discovery must check it.
                7 => CpuIdResult {
                    ebx: leaf7_ebx,
                    ..zero
                },
                _ => zero,
            }
        }
    }

    /// A simulated MSR; `ignore_writes` is a hypervisor that drops them.
    struct Sim {
        value: Cell<i64>,
        writes: Cell<u32>,
        ignore_writes: bool,
    }

    impl Sim {
        fn new(value: i64) -> Sim {
            Sim {
                value: Cell::new(value),
                writes: Cell::new(0),
                ignore_writes: false,
            }
        }
    }

    impl TscAdjustMsr for Sim {
        fn read(&self) -> i64 {
            self.value.get()
        }
        fn write(&self, value: i64) {
            self.writes.set(self.writes.get() + 1);
            if !self.ignore_writes {
                self.value.set(value);
            }
        }
    }

    #[test]
    fn cpuid_bit_decides() {
        assert!(tsc_adjust_in_cpuid(&cpuid(7, 1 << 1)));
        assert!(tsc_adjust_in_cpuid(&cpuid(0x20, 0xFFFF_FFFF)));
        assert!(!tsc_adjust_in_cpuid(&cpuid(7, !(1 << 1))));
        // Leaf 7 beyond the maximum leaf: not read, so not claimed.
        assert!(!tsc_adjust_in_cpuid(&cpuid(6, 1 << 1)));
    }

    #[test]
    fn findings() {
        assert_eq!(compare(0, 0), TscAdjustFinding::Zero);
        assert_eq!(compare(-5, -5), TscAdjustFinding::SameNonZero { value: -5 });
        assert_eq!(
            compare(100, -200),
            TscAdjustFinding::Differs {
                reference: 100,
                this: -200,
                diff_ticks: -300
            }
        );
        // The extremes do not overflow.
        assert_eq!(
            compare(i64::MIN, i64::MAX),
            TscAdjustFinding::Differs {
                reference: i64::MIN,
                this: i64::MAX,
                diff_ticks: (1i128 << 64) - 1
            }
        );
        assert_eq!(repair_value(7, 7), None);
        assert_eq!(repair_value(7, -1), Some(7));
    }

    #[test]
    fn slot_words_round_trip() {
        assert_eq!(slot_parts(EMPTY_SLOT), None);
        for (p, cpu) in [
            (0, 0),
            (u32::MAX, 0),
            (7, 255),
            (u32::MAX, u32::MAX as usize - 1),
        ] {
            let w = slot_word(PackageId(p), cpu).unwrap();
            assert_ne!(w, EMPTY_SLOT);
            assert_eq!(slot_parts(w), Some((PackageId(p), cpu)));
        }
        assert_eq!(slot_word(PackageId(0), u32::MAX as usize), None);
    }

    #[test]
    fn table_reports_nonzero_and_unequal_values() {
        let p0 = PackageId(0);
        let t: TscAdjustTable<8> = TscAdjustTable::new(1, BootCpuValue::Keep);
        assert!(!t.summary().is_clean()); // nothing recorded: not clean
        assert_eq!(
            t.record(8, p0, 0),
            Err(TscAdjustError::CpuOutOfRange { cpu: 8, cpus: 8 })
        );
        // Before the boot CPU is recorded nothing is compared.
        assert_eq!(t.record(0, p0, 0), Ok(TscAdjustRole::BeforeBootCpu));
        assert_eq!(t.finding(0), None);
        let s = t.summary();
        assert_eq!((s.recorded, s.boot_value, s.differing), (1, None, 0));
        assert_eq!((s.unreferenced, s.packages), (1, 0));
        assert_eq!(t.record(1, p0, 0), Ok(TscAdjustRole::Reference));
        // CPU 0, recorded before, is compared once its package has a reference.
        assert_eq!(t.finding(0), Some(TscAdjustFinding::Zero));
        assert_eq!(
            t.record(3, p0, 0),
            Ok(TscAdjustRole::Member { reference_cpu: 1 })
        );
        assert!(t.summary().is_clean());
        t.record(5, p0, 1_000).unwrap();
        t.record(6, p0, -400_000).unwrap();
        t.record(7, p0, 399_999).unwrap();
        let s = t.summary();
        assert_eq!(
            (s.recorded, s.boot_value, s.nonzero, s.differing),
            (6, Some(0), 3, 3)
        );
        assert_eq!(s.worst, Some((6, -400_000)));
        assert!(!s.is_clean());
        assert_eq!(
            t.finding(6),
            Some(TscAdjustFinding::Differs {
                reference: 0,
                this: -400_000,
                diff_ticks: -400_000
            })
        );
        // After the repair each CPU records again: clean, and the values found are kept.
        for cpu in [5, 6, 7] {
            let fixed = repair_value(t.boot_value().unwrap(), t.value(cpu).unwrap());
            t.record(cpu, p0, fixed.unwrap()).unwrap();
        }
        let s = t.summary();
        assert!(s.is_clean());
        assert_eq!((s.found_differing, t.found(6)), (3, Some(-400_000)));
    }

    #[test]
    fn restore_writes_the_reference_and_reads_back() {
        let msr = Sim::new(-400_000);
        let r = msr.restore(0);
        assert_eq!((r.before, r.wrote, r.after), (-400_000, Some(0), 0));
        assert!(r.is_fixed());
        // Equal already: no write.
        let r = msr.restore(0);
        assert_eq!((r.wrote, msr.writes.get()), (None, 1));
        assert!(r.is_fixed());
        // A hypervisor that ignores the write: the re-check says so.
        let stuck = Sim {
            ignore_writes: true,
            ..Sim::new(5)
        };
        let r = stuck.restore(0);
        assert_eq!((r.before, r.wrote, r.after), (5, Some(0), 5));
        assert!(!r.is_fixed());
    }

    #[test]
    fn a_kept_nonzero_boot_value_is_reported_and_is_the_reference() {
        let t: TscAdjustTable<2> = TscAdjustTable::new(0, BootCpuValue::Keep);
        let (m0, m1) = (Sim::new(-12), Sim::new(-12));
        let c0 = t.check_and_restore(&m0, 0, PackageId(0)).unwrap();
        assert_eq!((c0.role, c0.repair), (TscAdjustRole::Reference, None));
        let c1 = t.check_and_restore(&m1, 1, PackageId(0)).unwrap();
        assert_eq!(c1.role, TscAdjustRole::Member { reference_cpu: 0 });
        assert_eq!((m0.writes.get(), m1.writes.get()), (0, 0));
        let s = t.summary();
        assert_eq!((s.nonzero, s.differing, s.worst), (2, 0, None));
        assert!(!s.is_clean());
        assert!(s.is_consistent());
        assert_eq!(
            t.finding(1),
            Some(TscAdjustFinding::SameNonZero { value: -12 })
        );
    }

    #[test]
    fn package_in_cpuid_reads_the_topology_leaves() {
        fn r(eax: u32, ebx: u32, ecx: u32, edx: u32) -> CpuIdResult {
            CpuIdResult { eax, ebx, ecx, edx }
        }
        // Leaf 0x1F preferred over 0xB: SMT (1), core (4), die (6); x2APIC ID 0x1C5.
        let v2 = |eax: u32, ecx: u32| match (eax, ecx) {
            (0, _) => r(0x1F, 0, 0, 0),
            (0x1F, 0) => r(1, 2, 0x100, 0x1C5),
            (0x1F, 1) => r(4, 16, 0x201, 0x1C5),
            (0x1F, 2) => r(6, 32, 0x502, 0x1C5),
            (0x1F, _) => r(0, 0, ecx, 0x1C5),
            (0xB, 0) => r(1, 2, 0x100, 0x1C5),
            (0xB, 1) => r(4, 16, 0x201, 0x1C5),
            (0xB, _) => r(0, 0, ecx, 0x1C5),
            _ => r(0, 0, 0, 0),
        };
        assert_eq!(package_in_cpuid(&v2), Some(PackageId(0x1C5 >> 6)));
        // Leaf 0x1F present but empty: leaf 0xB.
        let b = |eax: u32, ecx: u32| match (eax, ecx) {
            (0, _) => r(0x1F, 0, 0, 0),
            (0xB, 0) => r(1, 2, 0x100, 0x1C5),
            (0xB, 1) => r(4, 16, 0x201, 0x1C5),
            (0xB, _) => r(0, 0, ecx, 0x1C5),
            _ => r(0, 0, 0, 0),
        };
        assert_eq!(package_in_cpuid(&b), Some(PackageId(0x1C5 >> 4)));
        // A reader whose levels never end: bounded; the 32nd level's shift counts.
        let endless = |eax: u32, _ecx: u32| match eax {
            0 => r(0xB, 0, 0, 0),
            0xB => r(3, 1, 0x200, 0x40),
            _ => r(0, 0, 0, 0),
        };
        assert_eq!(package_in_cpuid(&endless), Some(PackageId(0x40 >> 3)));
        // Leaf 1 only: initial APIC ID 13, HTT with 6 logical CPUs (3 bits): package 1.
        let legacy = |eax: u32, _ecx: u32| match eax {
            0 => r(1, 0, 0, 0),
            1 => r(0, (13 << 24) | (6 << 16), 0, 1 << 28),
            _ => r(0, 0, 0, 0),
        };
        assert_eq!(package_in_cpuid(&legacy), Some(PackageId(1)));
        // No HTT: one logical CPU per package.
        let single = |eax: u32, _ecx: u32| match eax {
            0 => r(1, 0, 0, 0),
            1 => r(0, (13 << 24) | (6 << 16), 0, 0),
            _ => r(0, 0, 0, 0),
        };
        assert_eq!(package_in_cpuid(&single), Some(PackageId(13)));
        // AMD's ApicIdSize (4 bits) wider than the count's 3.
        let amd = |eax: u32, _ecx: u32| match eax {
            0 => r(1, 0, 0, 0),
            1 => r(0, (0x13 << 24) | (6 << 16), 0, 1 << 28),
            0x8000_0000 => r(0x8000_0008, 0, 0, 0),
            0x8000_0008 => r(0, 0, 4 << 12, 0),
            _ => r(0, 0, 0, 0),
        };
        assert_eq!(package_in_cpuid(&amd), Some(PackageId(1)));
        // 255 logical CPUs: 8 bits.
        let many = |eax: u32, _ecx: u32| match eax {
            0 => r(1, 0, 0, 0),
            1 => r(0, (0xFF << 24) | (0xFF << 16), 0, 1 << 28),
            _ => r(0, 0, 0, 0),
        };
        assert_eq!(package_in_cpuid(&many), Some(PackageId(0)));
        assert_eq!(package_in_cpuid(&|_: u32, _: u32| r(0, 0, 0, 0)), None);
        assert_eq!(PackageId::from_apic_id(u32::MAX, 32), PackageId(0));
        assert_eq!(PackageId::from_apic_id(u32::MAX, 31), PackageId(1));
    }
}
