//! Honest references (issue "Time never goes back … close the holes", item 7): the hardware
//! references state a nominal tolerance by default, calibration adds it to its bound, and
//! `verify` keeps an exact CPUID 0x15 claim that a reference's crystal, off within that
//! tolerance, appears to contradict — while a claim off by more still disagrees.
//!
//! The references are simulated ([`baretime_sim`]); the accuracy they state is the one the
//! hardware types state by default (on x86_64, read from the types themselves).

#[cfg(target_arch = "x86_64")]
use baretime::Reference;
use baretime::{calibrate_and_verify, Config, Verdict, Verified};
use baretime::{Accuracy, Frequency, Source};
use baretime_sim::{SimCounter, SimReference, SimTimer, SimWorld};

/// The tolerances baretime-x86's ACPI PM timer and HPET state (100 ppm for the board's
/// crystal; the HPET specification's ±0.05 %), checked against the real types on x86_64.
const ACPI_PM_TOLERANCE_PPB: u64 = 100_000;
const HPET_TOLERANCE_PPB: u64 = 500_000;

/// The accuracy the ACPI PM timer states by default.
fn pm_timer_accuracy() -> Accuracy {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `new` only records the port and width; this test never reads the timer,
        // so no port I/O happens and the I/O-privilege condition is never exercised.
        let pm =
            unsafe { baretime_x86::AcpiPmTimer::new(0x608, baretime_x86::AcpiPmWidth::Bits24) };
        let accuracy = pm.frequency().accuracy();
        assert_eq!(
            accuracy,
            Accuracy::Nominal {
                tolerance_ppb: ACPI_PM_TOLERANCE_PPB
            }
        );
        accuracy
    }
    #[cfg(not(target_arch = "x86_64"))]
    Accuracy::Nominal {
        tolerance_ppb: ACPI_PM_TOLERANCE_PPB,
    }
}

/// The accuracy an HPET states by default (here the PC's 14.318 MHz one).
fn hpet_accuracy() -> Accuracy {
    #[cfg(target_arch = "x86_64")]
    {
        /// A fake register block: capabilities, configuration, …, main counter.
        #[repr(C, align(1024))]
        struct Regs([u64; 32]);
        let mut regs = Regs([0; 32]);
        regs.0[0] = 69_841_279u64 << 32; // period in fs: 14.318 MHz
                                         // SAFETY: `base` is a live, writable block standing in for the HPET's registers, and
                                         // it outlives the `Hpet`.
        let hpet = unsafe { baretime_x86::Hpet::new(regs.0.as_mut_ptr() as usize) }
            .expect("a valid fake HPET");
        let accuracy = hpet.frequency().accuracy();
        assert_eq!(
            accuracy,
            Accuracy::Nominal {
                tolerance_ppb: HPET_TOLERANCE_PPB
            }
        );
        accuracy
    }
    #[cfg(not(target_arch = "x86_64"))]
    Accuracy::Nominal {
        tolerance_ppb: HPET_TOLERANCE_PPB,
    }
}

fn cpuid_15h(hz: u64) -> Frequency {
    Frequency::from_hz(hz, Source::CpuidTscLeaf, Accuracy::Exact).unwrap()
}

/// Error of `f` from the true rate `true_millihz`, in ppb.
fn err_ppb(f: Frequency, true_millihz: u64) -> u64 {
    (u128::from(f.as_millihz().abs_diff(true_millihz)) * 1_000_000_000 / u128::from(true_millihz))
        as u64
}

/// Calibrates a counter at exactly `tsc_hz` against `reference_timer` (stating `accuracy`)
/// and verifies `claim`.
fn run(
    seed: u64,
    tsc_hz: u64,
    reference_timer: SimTimer,
    accuracy: Accuracy,
    claim: Frequency,
) -> (Verified, u64) {
    let world = SimWorld::new(seed);
    let tsc = SimCounter::new(&world, SimTimer::new(tsc_hz));
    let reference = SimReference::new(&world, reference_timer, "sim").with_accuracy(accuracy);
    let v = calibrate_and_verify(&tsc, reference, Some(claim), Config::new()).unwrap();
    (v, tsc.timer().true_millihz())
}

#[test]
fn exact_claim_survives_a_pm_timer_50_ppm_fast() {
    let claim = cpuid_15h(2_400_000_000);
    let pm = SimTimer::acpi_pm().with_error_ppb(50_000);
    let (v, truth) = run(1, 2_400_000_000, pm, pm_timer_accuracy(), claim);
    let cal = v.calibration;
    eprintln!("{cal}\n{}", v.verdict);
    // The measurement is 50 ppm slow (the reference runs fast) …
    let cal_err = err_ppb(cal.frequency, truth);
    assert!((49_000..51_000).contains(&cal_err), "{cal}");
    // … and says so: its bound covers the error because it includes the timer's tolerance.
    assert!(cal.frequency.accuracy().bound_ppb() >= 100_000, "{cal}");
    assert!(
        cal_err <= cal.frequency.accuracy().bound_ppb(),
        "{cal_err} ppb vs {cal}"
    );
    // The exact claim is right, and kept.
    assert!(
        matches!(v.verdict, Verdict::Confirmed { .. }),
        "{}",
        v.verdict
    );
    assert_eq!(v.chosen, claim);
    assert_eq!(err_ppb(v.chosen, truth), 0);
}

#[test]
fn exact_claim_survives_a_pm_timer_slow_within_tolerance() {
    for (seed, error_ppb) in [(2, -50_000), (3, -90_000), (4, 90_000)] {
        let claim = cpuid_15h(2_400_000_000);
        let pm = SimTimer::acpi_pm().with_error_ppb(error_ppb);
        let (v, truth) = run(seed, 2_400_000_000, pm, pm_timer_accuracy(), claim);
        assert_eq!(v.chosen, claim, "{error_ppb}: {}", v.verdict);
        let cal = v.calibration;
        assert!(
            err_ppb(cal.frequency, truth) <= cal.frequency.accuracy().bound_ppb(),
            "{cal}"
        );
    }
}

#[test]
fn a_wrong_claim_still_disagrees_against_a_pm_timer() {
    // 0x15 says 2.7 GHz; the TSC runs at 2.6 GHz; the PM timer is 50 ppm fast.
    let claim = cpuid_15h(2_700_000_000);
    let pm = SimTimer::acpi_pm().with_error_ppb(50_000);
    let (v, truth) = run(5, 2_600_000_000, pm, pm_timer_accuracy(), claim);
    let cal = v.calibration;
    match v.verdict {
        Verdict::Disagrees {
            claim: got,
            deviation_ppb,
            allowed_ppb,
        } => {
            assert_eq!(got, claim);
            assert!(deviation_ppb > 38_000_000, "{}", v.verdict); // +3.8 %
            assert!(allowed_ppb < 110_000, "{}", v.verdict);
        }
        other => panic!("{other}"),
    }
    assert_eq!(v.chosen, cal.frequency);
    assert!(
        err_ppb(v.chosen, truth) <= cal.frequency.accuracy().bound_ppb(),
        "{cal}"
    );
}

#[test]
fn hpet_within_its_500_ppm_keeps_the_claim_but_not_a_0_4_percent_error() {
    // A PC HPET (14.318 MHz, 32 bits) whose crystal is 300 ppm slow.
    let hpet = SimTimer::new(14_318_180)
        .with_bits(32)
        .with_read_cost(
            core::time::Duration::from_nanos(600),
            core::time::Duration::from_nanos(100),
        )
        .with_error_ppb(-300_000);
    let claim = cpuid_15h(2_400_000_000);
    let (v, truth) = run(6, 2_400_000_000, hpet, hpet_accuracy(), claim);
    assert_eq!(v.chosen, claim, "{}", v.verdict);
    let cal = v.calibration;
    assert!(cal.frequency.accuracy().bound_ppb() >= 500_000, "{cal}");
    assert!(
        err_ppb(cal.frequency, truth) <= cal.frequency.accuracy().bound_ppb(),
        "{cal}"
    );
    // A claim 0.4 % off (the kind of error seen in the field) is still caught.
    let wrong = cpuid_15h(2_409_600_000);
    let (v, _) = run(7, 2_400_000_000, hpet, hpet_accuracy(), wrong);
    assert!(v.verdict.is_disagreement(), "{}", v.verdict);
}
