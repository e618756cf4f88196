//! `IA32_TSC_ADJUST`: the per-CPU offset firmware (or a hypervisor, or a bug) adds to the TSC.
//!
//! Every x86 CPU's TSC is its own counter. Where CPUID.(EAX=7, ECX=0):EBX bit 1 says so, each
//! CPU also has `IA32_TSC_ADJUST` (MSR 0x3B), a signed offset that the CPU adds to its TSC; a
//! write to the TSC moves it by the same amount (Intel SDM vol. 3B, 18.17.3). Firmware that
//! "synchronises" the TSCs by writing them, or that sets the offset on some CPUs only, leaves
//! the CPUs' counters apart by exactly the difference of their `TSC_ADJUST` values: a warp
//! that [`crate::diag::WarpCheck`] would find, with its cause readable directly.
//!
//! Linux (`arch/x86/kernel/tsc_sync.c`, `tsc_store_and_check_tsc_adjust`) reads the value on
//! every CPU as it comes up, compares it with the value of a CPU already up in the same
//! package, and writes that value back where they differ; on the boot CPU it also forces a
//! non-zero value to 0 (a firmware bug, unless the platform is known to reset TSCs
//! asynchronously). This module offers the same pieces, with the decisions kept pure so
//! that they are tested on any host:
//!
//! - [`TscAdjust`]: the MSR on the CPU this runs on (ring 0 only: [`TscAdjust::probe`] is
//!   `unsafe`), with [`TscAdjust::restore`] to write a reference value back and read again.
//! - [`TscAdjustTable`]: one recorded value per CPU (usable in a `static`); its
//!   [`TscAdjustTable::summary`] reports non-zero values and values unequal to the boot CPU's.
//! - [`compare`] and [`repair_value`]: the pure decisions.

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use raw_cpuid::{CpuId, CpuIdReader};

use super::msr::{rdmsr, wrmsr, IA32_TSC_ADJUST};

/// Whether `cpuid` says `IA32_TSC_ADJUST` exists: CPUID.(EAX=7, ECX=0):EBX bit 1.
///
/// ```
/// use baretime::arch::x86_64::tsc_adjust::tsc_adjust_in_cpuid;
/// use raw_cpuid::{CpuId, CpuIdResult};
/// let leaf = |eax: u32, _ecx: u32| match eax {
///     0 => CpuIdResult { eax: 7, ebx: 0, ecx: 0, edx: 0 },
///     7 => CpuIdResult { eax: 0, ebx: 1 << 1, ecx: 0, edx: 0 },
///     _ => CpuIdResult { eax: 0, ebx: 0, ecx: 0, edx: 0 },
/// };
/// assert!(tsc_adjust_in_cpuid(&CpuId::with_cpuid_reader(leaf)));
/// ```
pub fn tsc_adjust_in_cpuid<R: CpuIdReader>(cpuid: &CpuId<R>) -> bool {
    cpuid
        .get_extended_feature_info()
        .is_some_and(|f| f.has_tsc_adjust_msr())
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
    /// `Some` where CPUID says the MSR exists (see [`tsc_adjust_in_cpuid`]).
    ///
    /// # Safety
    ///
    /// The caller runs at CPL 0 (ring 0), and so does all code it hands the token to: the
    /// token's reads and writes execute `RDMSR` / `WRMSR`, which raise #GP elsewhere. (In a
    /// user-space process the call itself is harmless, but no use of the result is.)
    pub unsafe fn probe() -> Option<TscAdjust> {
        tsc_adjust_in_cpuid(&CpuId::new()).then_some(TscAdjust { _ring0: () })
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
    /// from those after it (a [`crate::Clock`] on this CPU sees a jump, or time standing
    /// still if it moves back).
    pub fn write(&self, value: i64) {
        // SAFETY: CPL 0 and the MSR as in `read`; every value is valid for IA32_TSC_ADJUST (no
        // reserved bits), and its only effect, this CPU's TSC moving, is in the docs.
        unsafe { wrmsr(IA32_TSC_ADJUST, value as u64) };
    }

    /// Linux's repair: if this CPU's value differs from `reference` (the boot CPU's, or
    /// another CPU's of the same package), writes `reference` and reads the MSR again.
    /// [`TscAdjustRepair::is_fixed`] says whether it took (a hypervisor may ignore the
    /// write). Afterwards this CPU's TSC agrees with the reference CPU's to within what the
    /// offsets alone explain: run the warp check again to see.
    pub fn restore(&self, reference: i64) -> TscAdjustRepair {
        restore_via(reference, || self.read(), |v| self.write(v))
    }
}

/// [`TscAdjust::restore`] on any MSR access (the tests give it a simulated one).
fn restore_via(
    reference: i64,
    mut read: impl FnMut() -> i64,
    mut write: impl FnMut(i64),
) -> TscAdjustRepair {
    let before = read();
    let wrote = repair_value(reference, before);
    if let Some(v) = wrote {
        write(v);
    }
    TscAdjustRepair {
        reference,
        before,
        wrote,
        after: read(),
    }
}

/// The value to write on a CPU whose `IA32_TSC_ADJUST` reads `this`, to match `reference`:
/// `None` when they are equal already. (Linux's rule; a pure function so it is tested on
/// any host.)
pub const fn repair_value(reference: i64, this: i64) -> Option<i64> {
    if reference == this {
        None
    } else {
        Some(reference)
    }
}

/// What [`TscAdjust::restore`] did.
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

/// One CPU's `IA32_TSC_ADJUST` against the boot CPU's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum TscAdjustFinding {
    /// Both 0: nothing has moved either TSC.
    Zero,
    /// Equal to the boot CPU's, but not 0: both counters are moved by the same offset
    /// (harmless between them; firmware wrote the TSCs, which Linux reports as a bug).
    SameNonZero {
        /// The common value.
        value: i64,
    },
    /// Unequal: this CPU's TSC is `this − boot` ticks ahead of the boot CPU's (behind if
    /// negative), on top of whatever else sets them apart.
    Differs {
        /// The boot CPU's value.
        boot: i64,
        /// This CPU's value.
        this: i64,
        /// `this − boot`, exact.
        diff_ticks: i128,
    },
}

/// Compares a CPU's value `this` with the boot CPU's `boot`.
///
/// ```
/// use baretime::arch::x86_64::tsc_adjust::{compare, TscAdjustFinding};
/// assert_eq!(compare(0, 0), TscAdjustFinding::Zero);
/// assert_eq!(
///     compare(0, -300_000),
///     TscAdjustFinding::Differs { boot: 0, this: -300_000, diff_ticks: -300_000 }
/// );
/// ```
pub const fn compare(boot: i64, this: i64) -> TscAdjustFinding {
    if boot != this {
        // Two i64s: the difference is within ±2^64, exact in i128.
        let diff_ticks = (this as i128).wrapping_sub(boot as i128);
        TscAdjustFinding::Differs {
            boot,
            this,
            diff_ticks,
        }
    } else if this == 0 {
        TscAdjustFinding::Zero
    } else {
        TscAdjustFinding::SameNonZero { value: this }
    }
}

/// Why a value was not recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum TscAdjustError {
    /// `cpu` is not below the table's size.
    CpuOutOfRange {
        /// The CPU given.
        cpu: usize,
        /// CPUs the table holds.
        cpus: usize,
    },
}

impl core::fmt::Display for TscAdjustError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            TscAdjustError::CpuOutOfRange { cpu, cpus } => {
                write!(f, "CPU {cpu} is outside the table's {cpus} CPUs")
            }
        }
    }
}

impl core::error::Error for TscAdjustError {}

/// One recorded `IA32_TSC_ADJUST` value per CPU, for CPUs `0..N`, with one of them the boot
/// CPU (the reference). Lock-free (each CPU writes its own entry), usable in a `static`.
///
/// ```
/// use baretime::arch::x86_64::TscAdjustTable;
/// static TABLE: TscAdjustTable<4> = TscAdjustTable::new(0);
/// // Each CPU, as it comes up: TABLE.record(cpu, tsc_adjust.read())
/// TABLE.record(0, 0).unwrap();
/// TABLE.record(1, 0).unwrap();
/// TABLE.record(2, -250_000).unwrap();
/// let s = TABLE.summary();
/// assert_eq!((s.recorded, s.nonzero, s.differing), (3, 1, 1));
/// assert_eq!(s.worst, Some((2, -250_000)));
/// assert!(!s.is_clean());
/// ```
#[derive(Debug)]
pub struct TscAdjustTable<const N: usize> {
    boot_cpu: usize,
    values: [AtomicU64; N],
    recorded: [AtomicBool; N],
}

impl<const N: usize> TscAdjustTable<N> {
    /// An empty table whose reference is CPU `boot_cpu`.
    pub const fn new(boot_cpu: usize) -> TscAdjustTable<N> {
        TscAdjustTable {
            boot_cpu,
            values: [const { AtomicU64::new(0) }; N],
            recorded: [const { AtomicBool::new(false) }; N],
        }
    }

    /// Records CPU `cpu`'s value (again, after a repair: the latest counts).
    pub fn record(&self, cpu: usize, value: i64) -> Result<(), TscAdjustError> {
        let (Some(v), Some(r)) = (self.values.get(cpu), self.recorded.get(cpu)) else {
            return Err(TscAdjustError::CpuOutOfRange { cpu, cpus: N });
        };
        v.store(value as u64, Ordering::Relaxed);
        // Release: whoever sees the flag sees the value.
        r.store(true, Ordering::Release);
        Ok(())
    }

    /// CPU `cpu`'s recorded value.
    pub fn value(&self, cpu: usize) -> Option<i64> {
        let recorded = self.recorded.get(cpu)?.load(Ordering::Acquire);
        recorded.then(|| {
            self.values
                .get(cpu)
                .map(|v| v.load(Ordering::Relaxed) as i64)
        })?
    }

    /// The boot CPU's recorded value: what [`TscAdjust::restore`] should aim for.
    pub fn boot_value(&self) -> Option<i64> {
        self.value(self.boot_cpu)
    }

    /// CPU `cpu` against the boot CPU (`None` until both are recorded).
    pub fn finding(&self, cpu: usize) -> Option<TscAdjustFinding> {
        Some(compare(self.boot_value()?, self.value(cpu)?))
    }

    /// On CPU `cpu`, the CPU this runs on: records its value, and where it differs from the
    /// boot CPU's recorded value, writes that back ([`TscAdjust::restore`]) and records the
    /// value read afterwards. `Ok(None)` when the boot CPU is not recorded yet (nothing to
    /// restore to: the value is recorded all the same).
    pub fn check_and_restore(
        &self,
        adjust: &TscAdjust,
        cpu: usize,
    ) -> Result<Option<TscAdjustRepair>, TscAdjustError> {
        self.record(cpu, adjust.read())?;
        let Some(boot) = self.boot_value() else {
            return Ok(None);
        };
        let repair = adjust.restore(boot);
        self.record(cpu, repair.after)?;
        Ok(Some(repair))
    }

    /// Every recorded CPU against the boot CPU.
    pub fn summary(&self) -> TscAdjustSummary {
        let boot = self.boot_value();
        let mut s = TscAdjustSummary {
            recorded: 0,
            boot_value: boot,
            nonzero: 0,
            differing: 0,
            worst: None,
        };
        let mut worst_by = 0u128;
        for cpu in 0..N {
            let Some(v) = self.value(cpu) else { continue };
            s.recorded = s.recorded.saturating_add(1);
            if v != 0 {
                s.nonzero = s.nonzero.saturating_add(1);
            }
            if let Some(TscAdjustFinding::Differs { diff_ticks, .. }) = boot.map(|b| compare(b, v))
            {
                s.differing = s.differing.saturating_add(1);
                if diff_ticks.unsigned_abs() > worst_by {
                    worst_by = diff_ticks.unsigned_abs();
                    s.worst = Some((cpu, v));
                }
            }
        }
        s
    }
}

/// What a [`TscAdjustTable`] holds, against its boot CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct TscAdjustSummary {
    /// CPUs recorded.
    pub recorded: u32,
    /// The boot CPU's value (`None` until it is recorded: nothing is compared before).
    pub boot_value: Option<i64>,
    /// CPUs whose value is not 0 (the boot CPU included).
    pub nonzero: u32,
    /// CPUs whose value differs from the boot CPU's.
    pub differing: u32,
    /// The CPU furthest from the boot CPU's value, and its value.
    pub worst: Option<(usize, i64)>,
}

impl TscAdjustSummary {
    /// The boot CPU is recorded, and every recorded value is 0.
    pub const fn is_clean(&self) -> bool {
        self.boot_value.is_some() && self.nonzero == 0 && self.differing == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use raw_cpuid::CpuIdResult;

    fn cpuid(max_leaf: u32, leaf7_ebx: u32) -> CpuId<impl CpuIdReader> {
        CpuId::with_cpuid_reader(move |eax: u32, _ecx: u32| {
            let zero = CpuIdResult {
                eax: 0,
                ebx: 0,
                ecx: 0,
                edx: 0,
            };
            match eax {
                0 => CpuIdResult {
                    eax: max_leaf,
                    ..zero
                },
                7 if max_leaf >= 7 => CpuIdResult {
                    ebx: leaf7_ebx,
                    ..zero
                },
                _ => zero,
            }
        })
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
                boot: 100,
                this: -200,
                diff_ticks: -300
            }
        );
        // The extremes do not overflow.
        assert_eq!(
            compare(i64::MIN, i64::MAX),
            TscAdjustFinding::Differs {
                boot: i64::MIN,
                this: i64::MAX,
                diff_ticks: (1i128 << 64) - 1
            }
        );
        assert_eq!(repair_value(7, 7), None);
        assert_eq!(repair_value(7, -1), Some(7));
    }

    #[test]
    fn table_reports_nonzero_and_unequal_values() {
        let t: TscAdjustTable<8> = TscAdjustTable::new(1);
        assert!(!t.summary().is_clean()); // nothing recorded: not clean
        assert_eq!(
            t.record(8, 0),
            Err(TscAdjustError::CpuOutOfRange { cpu: 8, cpus: 8 })
        );
        t.record(0, 0).unwrap();
        // Before the boot CPU is recorded nothing is compared.
        assert_eq!(t.finding(0), None);
        let s = t.summary();
        assert_eq!((s.recorded, s.boot_value, s.differing), (1, None, 0));
        t.record(1, 0).unwrap();
        t.record(3, 0).unwrap();
        assert!(t.summary().is_clean());
        t.record(5, 1_000).unwrap();
        t.record(6, -400_000).unwrap();
        t.record(7, 399_999).unwrap();
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
                boot: 0,
                this: -400_000,
                diff_ticks: -400_000
            })
        );
        // After the repair each CPU records again: clean.
        for cpu in [5, 6, 7] {
            let fixed = repair_value(t.boot_value().unwrap(), t.value(cpu).unwrap());
            t.record(cpu, fixed.unwrap()).unwrap();
        }
        assert!(t.summary().is_clean());
    }

    #[test]
    fn restore_writes_the_reference_and_reads_back() {
        use std::cell::Cell;
        // A simulated MSR.
        let msr = Cell::new(-400_000i64);
        let writes = Cell::new(0);
        let write = |v| {
            writes.set(writes.get() + 1);
            msr.set(v);
        };
        let r = restore_via(0, || msr.get(), write);
        assert_eq!((r.before, r.wrote, r.after), (-400_000, Some(0), 0));
        assert!(r.is_fixed());
        // Equal already: no write.
        let r = restore_via(0, || msr.get(), write);
        assert_eq!((r.wrote, writes.get()), (None, 1));
        assert!(r.is_fixed());
        // A hypervisor that ignores the write: the re-check says so.
        let stuck = Cell::new(5i64);
        let r = restore_via(0, || stuck.get(), |_| {});
        assert_eq!((r.before, r.wrote, r.after), (5, Some(0), 5));
        assert!(!r.is_fixed());
    }

    #[test]
    fn a_nonzero_boot_value_is_reported_and_is_the_reference() {
        let t: TscAdjustTable<2> = TscAdjustTable::new(0);
        t.record(0, -12).unwrap();
        t.record(1, -12).unwrap();
        let s = t.summary();
        assert_eq!((s.nonzero, s.differing, s.worst), (2, 0, None));
        assert!(!s.is_clean());
        assert_eq!(
            t.finding(1),
            Some(TscAdjustFinding::SameNonZero { value: -12 })
        );
    }
}
