//! `IA32_TSC_ADJUST` checked and repaired per package, as Linux's
//! `tsc_store_and_check_tsc_adjust` does (issue 15, item 5): a simulated MSR per CPU, CPUs in
//! packages, driven through `TscAdjustTable::check_and_restore`.
#![cfg(target_arch = "x86_64")]

use std::sync::atomic::{AtomicI64, AtomicU32, Ordering};

use baretime_x86::{
    BootCpuValue, PackageId, TscAdjustCheck, TscAdjustFinding, TscAdjustMsr, TscAdjustRole,
    TscAdjustTable,
};

/// One simulated CPU: its package and its `IA32_TSC_ADJUST`.
struct Cpu {
    package: PackageId,
    msr: AtomicI64,
    writes: AtomicU32,
    /// A hypervisor that drops writes to the MSR.
    ignore_writes: bool,
}

impl Cpu {
    fn new(package: u32, value: i64) -> Cpu {
        Cpu {
            package: PackageId(package),
            msr: AtomicI64::new(value),
            writes: AtomicU32::new(0),
            ignore_writes: false,
        }
    }

    fn value(&self) -> i64 {
        self.msr.load(Ordering::SeqCst)
    }

    fn writes(&self) -> u32 {
        self.writes.load(Ordering::SeqCst)
    }
}

impl TscAdjustMsr for Cpu {
    fn read(&self) -> i64 {
        self.value()
    }

    fn write(&self, value: i64) {
        self.writes.fetch_add(1, Ordering::SeqCst);
        if !self.ignore_writes {
            self.msr.store(value, Ordering::SeqCst);
        }
    }
}

/// A machine: `(package, value)` per CPU, CPU 0 the boot CPU.
fn machine(cpus: &[(u32, i64)]) -> Vec<Cpu> {
    cpus.iter().map(|&(p, v)| Cpu::new(p, v)).collect()
}

/// Every CPU checked in `order`, as each would on coming up.
fn bring_up<const N: usize>(
    table: &TscAdjustTable<N>,
    cpus: &[Cpu],
    order: impl IntoIterator<Item = usize>,
) -> Vec<(usize, TscAdjustCheck)> {
    order
        .into_iter()
        .map(|cpu| {
            let c = &cpus[cpu];
            (cpu, table.check_and_restore(c, cpu, c.package).unwrap())
        })
        .collect()
}

fn values(cpus: &[Cpu]) -> Vec<i64> {
    cpus.iter().map(Cpu::value).collect()
}

/// Two sockets, each consistent within itself, socket 1 moved 5000 ticks from socket 0 (as
/// firmware may leave sockets reset at different times): nothing is "repaired", and the
/// difference is reported as a package pair. Today's code (before this change) wrote socket
/// 0's value into both CPUs of socket 1.
#[test]
fn two_sockets_with_different_but_consistent_values_are_not_repaired() {
    let cpus = machine(&[(0, 0), (0, 0), (1, 5_000), (1, 5_000)]);
    let t: TscAdjustTable<4> = TscAdjustTable::new(0, BootCpuValue::ResetToZero);
    let checks = bring_up(&t, &cpus, 0..4);
    assert_eq!(values(&cpus), [0, 0, 5_000, 5_000]);
    assert_eq!(cpus.iter().map(Cpu::writes).sum::<u32>(), 0);
    let roles: Vec<_> = checks.iter().map(|(_, c)| c.role).collect();
    assert_eq!(
        roles,
        [
            TscAdjustRole::Reference,
            TscAdjustRole::Member { reference_cpu: 0 },
            TscAdjustRole::Reference,
            TscAdjustRole::Member { reference_cpu: 2 },
        ]
    );
    assert!(checks.iter().all(|(_, c)| c.is_fixed()));

    let s = t.summary();
    assert_eq!((s.recorded, s.packages, s.nonzero), (4, 2, 2));
    assert_eq!((s.differing, s.found_differing, s.worst), (0, 0, None));
    assert_eq!(s.package_pairs_differing, 1);
    assert!(s.is_consistent());
    assert!(!s.is_clean()); // non-zero values remain: reported
    assert_eq!(
        t.finding(3),
        Some(TscAdjustFinding::SameNonZero { value: 5_000 })
    );
    assert_eq!(
        t.package_finding(PackageId(1)),
        Some(TscAdjustFinding::Differs {
            reference: 0,
            this: 5_000,
            diff_ticks: 5_000
        })
    );
    let pairs: Vec<_> = t
        .package_differences()
        .map(|d| {
            (
                d.first.package,
                d.first.cpu,
                d.second.package,
                d.second.cpu,
                d.diff_ticks,
            )
        })
        .collect();
    assert_eq!(pairs, [(PackageId(0), 0, PackageId(1), 2, 5_000)]);
}

/// A CPU that disagrees within its package is written its package's value: 0 in the boot
/// package, the first CPU's 7000 in package 1 (not the boot CPU's 0).
#[test]
fn a_cpu_that_disagrees_within_its_package_is_repaired_to_its_package_value() {
    let cpus = machine(&[
        (0, 0),
        (0, 0),
        (0, -300),
        (1, 7_000),
        (1, 7_000),
        (1, 6_999),
    ]);
    let t: TscAdjustTable<6> = TscAdjustTable::new(0, BootCpuValue::ResetToZero);
    let checks = bring_up(&t, &cpus, 0..6);
    assert_eq!(values(&cpus), [0, 0, 0, 7_000, 7_000, 7_000]);
    assert_eq!(
        cpus.iter().map(Cpu::writes).collect::<Vec<_>>(),
        [0, 0, 1, 0, 0, 1]
    );
    let (_, c5) = checks[5];
    assert_eq!(c5.role, TscAdjustRole::Member { reference_cpu: 3 });
    assert_eq!(c5.found, 6_999);
    let r = c5.repair.unwrap();
    assert_eq!(
        (r.reference, r.before, r.wrote, r.after),
        (7_000, 6_999, Some(7_000), 7_000)
    );
    assert_eq!(c5.value, 7_000);

    let s = t.summary();
    assert_eq!((s.differing, s.found_differing), (0, 2)); // repaired; the firmware bug is kept
    assert_eq!((s.packages, s.package_pairs_differing), (2, 1));
    assert!(s.is_consistent());
    assert_eq!((t.found(2), t.value(2)), (Some(-300), Some(0)));
}

/// Before any repair (values recorded only), the summary finds the CPUs that disagree
/// within their package and no others, and names the worst.
#[test]
fn the_summary_blames_only_cpus_that_disagree_within_their_package() {
    let t: TscAdjustTable<6> = TscAdjustTable::new(0, BootCpuValue::Keep);
    for (cpu, package, value) in [
        (0, 0, 0),
        (1, 0, 0),
        (2, 0, -300),
        (3, 1, 7_000),
        (4, 1, 7_000),
        (5, 1, 6_000),
    ] {
        t.record(cpu, PackageId(package), value).unwrap();
    }
    let s = t.summary();
    assert_eq!((s.differing, s.found_differing), (2, 2));
    assert_eq!(s.worst, Some((5, 6_000)));
    assert!(!s.is_consistent());
    assert_eq!(
        t.finding(5),
        Some(TscAdjustFinding::Differs {
            reference: 7_000,
            this: 6_000,
            diff_ticks: -1_000
        })
    );
}

/// Reports say which package pairs differ: every pair once, sparse package ids (APIC ID
/// bits), packages in the order their first CPU came up.
#[test]
fn reports_say_which_package_pairs_differ() {
    // Packages 0x10 (boot), 0x30 and 0x20, coming up in that order; 0x10 and 0x20 agree.
    let cpus = machine(&[
        (0x10, 0),
        (0x30, 4_000),
        (0x20, 0),
        (0x30, 4_000),
        (0x20, 0),
    ]);
    let t: TscAdjustTable<5> = TscAdjustTable::new(0, BootCpuValue::ResetToZero);
    bring_up(&t, &cpus, 0..5);
    let packages: Vec<_> = t
        .packages()
        .map(|r| (r.package.0, r.cpu, r.value))
        .collect();
    assert_eq!(packages, [(0x10, 0, 0), (0x30, 1, 4_000), (0x20, 2, 0)]);
    let pairs: Vec<_> = t
        .package_differences()
        .map(|d| (d.first.package.0, d.second.package.0, d.diff_ticks))
        .collect();
    assert_eq!(pairs, [(0x10, 0x30, 4_000), (0x30, 0x20, -4_000)]);
    let s = t.summary();
    assert_eq!(
        (s.packages, s.package_pairs_differing, s.differing),
        (3, 2, 0)
    );
    assert_eq!(
        t.package_finding(PackageId(0x20)),
        Some(TscAdjustFinding::Zero)
    );
    assert_eq!(t.package_finding(PackageId(0x99)), None);
    assert_eq!(cpus.iter().map(Cpu::writes).sum::<u32>(), 0);
}

/// Linux's `tsc_sanitize_first_cpu`: a non-zero value on the boot CPU is forced to 0 (and
/// the rest of its package follows); the first CPU of another package keeps its non-zero
/// value (a hotplugged package's firmware sets one to match the running CPUs).
#[test]
fn the_boot_cpu_is_reset_to_zero_and_no_other_first_cpu_is() {
    let cpus = machine(&[(0, -12), (0, -12), (1, -12), (1, -12)]);
    let t: TscAdjustTable<4> = TscAdjustTable::new(0, BootCpuValue::ResetToZero);
    let checks = bring_up(&t, &cpus, 0..4);
    assert_eq!(values(&cpus), [0, 0, -12, -12]);
    let (_, boot) = checks[0];
    let r = boot.repair.unwrap();
    assert_eq!(
        (boot.role, boot.found, r.wrote, boot.value),
        (TscAdjustRole::Reference, -12, Some(0), 0)
    );
    let s = t.summary();
    // CPU 1 was as firmware left the boot CPU: not a within-package firmware bug.
    assert_eq!(
        (s.differing, s.found_differing, s.package_pairs_differing),
        (0, 0, 1)
    );
    assert_eq!((t.found(0), t.boot_value()), (Some(-12), Some(0)));

    // Keep (Linux's tsc_async_resets, or a clock already running on the boot CPU).
    let cpus = machine(&[(0, -12), (0, -12), (0, 3)]);
    let t: TscAdjustTable<3> = TscAdjustTable::new(0, BootCpuValue::Keep);
    bring_up(&t, &cpus, 0..3);
    assert_eq!(values(&cpus), [-12, -12, -12]);
    assert_eq!(cpus[0].writes(), 0);
    assert!(t.summary().is_consistent());
}

/// The reference of a package other than the boot CPU's is its first CPU to come up, not
/// its lowest-numbered one.
#[test]
fn the_first_cpu_to_come_up_is_its_package_reference() {
    let cpus = machine(&[(0, 0), (1, 100), (1, 200), (1, 300)]);
    let t: TscAdjustTable<4> = TscAdjustTable::new(0, BootCpuValue::ResetToZero);
    bring_up(&t, &cpus, [0, 2, 3, 1]);
    assert_eq!(values(&cpus), [0, 200, 200, 200]);
    assert_eq!(t.package_reference(PackageId(1)).map(|r| r.cpu), Some(2));
}

/// A CPU checked before the boot CPU is recorded only; checked again afterwards, it is
/// repaired. A package whose only CPU came before the boot CPU is unreferenced until then.
#[test]
fn cpus_checked_before_the_boot_cpu_wait_for_it() {
    let cpus = machine(&[(0, 0), (0, 55), (1, 9)]);
    let t: TscAdjustTable<3> = TscAdjustTable::new(0, BootCpuValue::ResetToZero);
    for cpu in [1, 2] {
        let c = t
            .check_and_restore(&cpus[cpu], cpu, cpus[cpu].package)
            .unwrap();
        assert_eq!((c.role, c.repair), (TscAdjustRole::BeforeBootCpu, None));
    }
    let s = t.summary();
    assert_eq!(
        (s.recorded, s.unreferenced, s.packages, s.boot_value),
        (2, 2, 0, None)
    );
    bring_up(&t, &cpus, [0]);
    // CPU 1 is compared with the boot CPU now; CPU 2's package still has no reference.
    let s = t.summary();
    assert_eq!(
        (s.differing, s.unreferenced, s.worst),
        (1, 1, Some((1, 55)))
    );
    assert!(!s.is_consistent());
    let checks = bring_up(&t, &cpus, [1, 2]);
    assert_eq!(checks[0].1.role, TscAdjustRole::Member { reference_cpu: 0 });
    assert_eq!(checks[1].1.role, TscAdjustRole::Reference);
    assert_eq!(values(&cpus), [0, 0, 9]);
    assert!(t.summary().is_consistent());
}

/// Checked again later (Linux's `tsc_verify_tsc_adjust`), every CPU gets back the value it
/// should hold: a reference its own, a member its package's.
#[test]
fn a_second_check_restores_what_firmware_changed_since() {
    let cpus = machine(&[(0, 0), (0, 0), (1, 5_000), (1, 5_000)]);
    let t: TscAdjustTable<4> = TscAdjustTable::new(0, BootCpuValue::ResetToZero);
    bring_up(&t, &cpus, 0..4);
    // SMM code moves every CPU's offset by 100.
    for c in &cpus {
        c.msr.fetch_add(100, Ordering::SeqCst);
    }
    let checks = bring_up(&t, &cpus, [2, 3, 0, 1]);
    assert_eq!(values(&cpus), [0, 0, 5_000, 5_000]);
    assert!(checks
        .iter()
        .all(|(_, c)| c.repair.is_some_and(|r| r.wrote.is_some())));
    assert_eq!(checks[0].1.role, TscAdjustRole::Reference);
    // The values found on the first check are kept.
    assert_eq!(t.found(2), Some(5_000));
}

/// A hypervisor that ignores the write: the check says so, and the summary still counts
/// the CPU as differing.
#[test]
fn a_write_that_does_not_take_is_reported() {
    let mut cpus = machine(&[(0, 0), (0, 77)]);
    cpus[1].ignore_writes = true;
    let t: TscAdjustTable<2> = TscAdjustTable::new(0, BootCpuValue::ResetToZero);
    let checks = bring_up(&t, &cpus, 0..2);
    assert!(!checks[1].1.is_fixed());
    assert_eq!((checks[1].1.value, cpus[1].writes()), (77, 1));
    let s = t.summary();
    assert_eq!((s.differing, s.worst), (1, Some((1, 77))));
}

#[test]
fn wrong_cpus_and_packages_are_refused_and_nothing_is_written() {
    let cpus = machine(&[(0, 0), (1, 40)]);
    let t: TscAdjustTable<2> = TscAdjustTable::new(0, BootCpuValue::ResetToZero);
    bring_up(&t, &cpus, 0..2);
    let moved = Cpu::new(0, 40);
    let e = t.check_and_restore(&moved, 1, PackageId(0)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "CPU 1 was recorded in package 1 and is now given as in package 0"
    );
    assert!(t.record(1, PackageId(2), 0).is_err());
    let e = t.check_and_restore(&moved, 2, PackageId(0)).unwrap_err();
    assert_eq!(e.to_string(), "CPU 2 is outside the table's 2 CPUs");
    assert_eq!((moved.writes(), t.value(1)), (0, Some(40)));
}

/// CPUs coming up at once, on threads: one reference per package whatever the
/// interleaving, and every CPU ends at its package's value, with no package written
/// another's.
#[test]
fn concurrent_bring_up_keeps_one_reference_per_package() {
    const PACKAGES: u32 = 4;
    const PER_PACKAGE: u32 = 4;
    const CPUS: usize = (PACKAGES * PER_PACKAGE) as usize;
    for round in 0..200i64 {
        // Package p holds 1000·p on most CPUs; one CPU per package is off by `round + 1`.
        let cpus: Vec<Cpu> = (0..CPUS as u32)
            .map(|cpu| {
                let p = cpu % PACKAGES;
                let off = i64::from(cpu / PACKAGES == 2) * (round + 1);
                Cpu::new(p, i64::from(p) * 1_000 + off)
            })
            .collect();
        let t: TscAdjustTable<CPUS> = TscAdjustTable::new(0, BootCpuValue::Keep);
        bring_up(&t, &cpus, [0]);
        std::thread::scope(|s| {
            for (cpu, c) in cpus.iter().enumerate().skip(1) {
                let t = &t;
                s.spawn(move || t.check_and_restore(c, cpu, c.package).unwrap());
            }
        });
        let refs: Vec<_> = t.packages().collect();
        assert_eq!(refs.len(), PACKAGES as usize, "round {round}");
        for r in &refs {
            // Each package's reference is one of its own CPUs, and its value is what that
            // CPU holds.
            assert_eq!(cpus[r.cpu].package, r.package, "round {round}");
            assert_eq!(cpus[r.cpu].value(), r.value, "round {round}");
        }
        for c in &cpus {
            let r = t.package_reference(c.package).unwrap();
            assert_eq!(c.value(), r.value, "round {round}");
            // Within 1000·p, + the one CPU's offset if it won its package's race.
            let base = i64::from(c.package.0) * 1_000;
            assert!(
                c.value() == base || c.value() == base + round + 1,
                "round {round}"
            );
        }
        let s = t.summary();
        assert!(s.is_consistent(), "round {round}: {s:?}");
        assert_eq!(s.packages, PACKAGES, "round {round}");
    }
}
