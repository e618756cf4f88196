//! Coverage: over 1400 seeded runs in varied conditions, the reported bound contains the
//! true error at least 99 % of the time. Not timed: true time is simulated.
//!
//! Scenario 6 is what QEMU's `aarch64-virt` showed (issue 15): a vCPU scheduled out every
//! few milliseconds comes back with reference reads up to 200 ns slower, mostly after the
//! latch, so the bracket midpoints shift with the bracket widths for milliseconds at a time.
//! A fit through the midpoints alone took those shifts for a rate and missed its bound in
//! about 3 % of the boots there, and in this scenario.

use baretime::{calibrate, Config};
use baretime_sim::{SimCounter, SimReference, SimTimer, SimWorld};
use core::time::Duration;

struct Outcome {
    err_ppb: i64,
    bound_ppb: u64,
}

/// Scenarios: the six of the references a PC or a board has, and the emulated target.
const SCENARIOS: u64 = 7;

/// One run of scenario `seed % SCENARIOS`, with a counter error drawn from the seed.
fn run(seed: u64) -> Outcome {
    let world = if seed % SCENARIOS == 6 {
        // The host takes the vCPU away for 4 ms about 150 times a second.
        SimWorld::new(seed).with_smi(150, Duration::from_millis(4))
    } else {
        SimWorld::new(seed).with_smi(200, Duration::from_micros(100))
    };
    let err = (world.random_below(400_001) as i64) - 200_000; // ±200 ppm
    let hz = 1_000_000_000 + world.random_below(3_000_000_000);
    let (reference, counter, config) = match seed % SCENARIOS {
        // PIT for a fixed 4 ms.
        0 => (
            SimTimer::pit(),
            SimTimer::new(hz),
            Config::new()
                .with_target_ppb(0)
                .with_max_duration(Duration::from_millis(4)),
        ),
        // PIT with early stop at 20 ppm.
        1 => (
            SimTimer::pit(),
            SimTimer::new(hz),
            Config::new()
                .with_target_ppb(20_000)
                .with_max_duration(Duration::from_millis(20)),
        ),
        // ACPI PM timer (24 bits), latched late in the read, for 3 ms.
        2 => (
            SimTimer::acpi_pm().with_latch_at_permille(900),
            SimTimer::new(hz),
            Config::new()
                .with_target_ppb(0)
                .with_max_duration(Duration::from_millis(3)),
        ),
        // A fast 64-bit reference (HPET-like, 14.318 MHz) with early stop at 2 ppm.
        3 => (
            SimTimer::new(14_318_180)
                .with_read_cost(Duration::from_nanos(500), Duration::from_nanos(200)),
            SimTimer::new(hz),
            Config::new()
                .with_target_ppb(2_000)
                .with_max_duration(Duration::from_millis(4)),
        ),
        // A coarse reference: 1 MHz counting in steps of 16, 32 bits.
        4 => (
            SimTimer::new(1_000_000)
                .with_bits(32)
                .with_quantum(16)
                .with_read_cost(Duration::from_nanos(300), Duration::from_nanos(100)),
            SimTimer::new(hz),
            Config::new()
                .with_target_ppb(0)
                .with_max_duration(Duration::from_millis(2)),
        ),
        // A slow counter (24 MHz, like CNTVCT) against a 1 GHz reference read in 30 ns.
        5 => (
            SimTimer::new(1_000_000_000)
                .with_read_cost(Duration::from_nanos(30), Duration::from_nanos(10)),
            SimTimer::new(24_000_000)
                .with_read_cost(Duration::from_nanos(10), Duration::from_nanos(3)),
            Config::new()
                .with_target_ppb(0)
                .with_max_duration(Duration::from_micros(500)),
        ),
        // QEMU's aarch64 virt: the 62.5 MHz generic timer against semihosting's elapsed time
        // (1 GHz, a trap to the host), each regime between preemptions up to 200 ns slower, a
        // quarter of it before the latch; early stop at 1 ppm, as the boot kernel does.
        _ => (
            SimTimer::new(1_000_000_000)
                .with_read_cost(Duration::from_nanos(250), Duration::from_nanos(30))
                .with_regime_cost(Duration::from_nanos(200), 250),
            SimTimer::new(62_500_000)
                .with_read_cost(Duration::from_nanos(40), Duration::from_nanos(10)),
            Config::new()
                .with_target_ppb(1_000)
                .with_max_duration(Duration::from_millis(200)),
        ),
    };
    let start = world.random();
    let tsc = SimCounter::new(&world, counter.with_error_ppb(err).with_start_ticks(start));
    let reference = SimReference::new(
        &world,
        reference.with_start_ticks(start.rotate_left(17)),
        "sim",
    );
    let cal = calibrate(&tsc, reference, config).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    let truth = tsc.timer().true_millihz() as i128;
    let err_ppb = ((cal.frequency.as_millihz() as i128 - truth) * 1_000_000_000 / truth) as i64;
    Outcome {
        err_ppb,
        bound_ppb: cal.frequency.accuracy().bound_ppb(),
    }
}

#[test]
fn bound_contains_true_error_in_99_percent_of_runs() {
    let runs = 1400u64;
    let mut misses = [0u32; SCENARIOS as usize];
    let mut ratios: Vec<(u64, f64)> = Vec::new();
    for seed in 0..runs {
        let o = run(seed);
        if o.err_ppb.unsigned_abs() > o.bound_ppb {
            misses[(seed % SCENARIOS) as usize] += 1;
        }
        ratios.push((
            seed % SCENARIOS,
            o.err_ppb.unsigned_abs() as f64 / o.bound_ppb as f64,
        ));
    }
    for s in 0..SCENARIOS {
        let mut r: Vec<f64> = ratios
            .iter()
            .filter(|(k, _)| *k == s)
            .map(|(_, v)| *v)
            .collect();
        r.sort_by(|a, b| a.partial_cmp(b).unwrap());
        eprintln!(
            "scenario {s}: misses {}, |err|/bound median {:.3}, 95% {:.3}, max {:.3}",
            misses[s as usize],
            r[r.len() / 2],
            r[r.len() * 95 / 100],
            r[r.len() - 1]
        );
    }
    let total: u32 = misses.iter().sum();
    assert!(
        total as u64 * 100 <= runs,
        "{total} of {runs} runs outside the bound"
    );
    // And in each scenario on its own: a bound that holds on average over easy references
    // but not on one kind of hardware is no bound there.
    let per = runs / SCENARIOS;
    for (s, m) in misses.iter().enumerate() {
        assert!(
            u64::from(*m) * 100 <= per,
            "scenario {s}: {m} of {per} runs outside the bound"
        );
    }
}
