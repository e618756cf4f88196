//! A real-time clock as a calibration `Reference`, modelled: what baretime-x86's `CmosRtc` and
//! baretime-aarch64's `Pl031` do. A 1 Hz count read at once stands still for a second at a
//! time, and the calibrator rightly calls it stuck; a read that waits for the next seconds
//! edge and returns it is latched at an instant (the end of the read), and calibrates — with
//! a bound as wide as its second-long brackets make it, which these figures state.

use std::sync::atomic::{AtomicU64, Ordering};

use baretime::{
    calibrate, Accuracy, CalibrationError, Config, FnCounter, Frequency, Reference, Source,
};
use core::time::Duration;

/// Simulated time (ns): each counter read costs 10 µs; the counter is a 1 GHz count of it.
static NOW: AtomicU64 = AtomicU64::new(0);
const READ_NS: u64 = 10_000;
/// How long the RTC read that sees the edge takes after it (a port or MMIO read).
const EDGE_READ_NS: u64 = 3_000;

fn rate() -> Frequency {
    Frequency::from_millihz(
        1_000_000,
        Source::Reference,
        Accuracy::Nominal {
            tolerance_ppb: 100_000,
        },
    )
    .unwrap()
}

/// The second as it stands, in ms (what a plain RTC read gives).
struct AtOnce;
impl Reference for AtOnce {
    fn read(&mut self) -> u64 {
        NOW.fetch_add(READ_NS, Ordering::Relaxed) / 1_000_000_000 * 1_000
    }
    fn bits(&self) -> u32 {
        64
    }
    fn frequency(&self) -> Frequency {
        rate()
    }
    fn name(&self) -> &'static str {
        "rtc_at_once"
    }
}

/// The next seconds edge, in ms (what the crates' RTC references give).
struct AtEdge;
impl Reference for AtEdge {
    fn read(&mut self) -> u64 {
        let next = (NOW.load(Ordering::Relaxed) / 1_000_000_000 + 1) * 1_000_000_000;
        NOW.store(next + EDGE_READ_NS, Ordering::Relaxed);
        next / 1_000_000_000 * 1_000
    }
    fn bits(&self) -> u32 {
        64
    }
    fn frequency(&self) -> Frequency {
        rate()
    }
    fn name(&self) -> &'static str {
        "rtc_at_edge"
    }
}

fn counter() -> FnCounter<impl Fn() -> u64> {
    FnCounter::new(|| NOW.fetch_add(READ_NS, Ordering::Relaxed), 64)
}

#[test]
fn an_rtc_read_at_once_is_stuck_and_one_read_at_its_edge_calibrates() {
    let config = |s| {
        Config::new()
            .with_target_ppb(1_000)
            .with_max_duration(Duration::from_secs(s))
    };
    NOW.store(0, Ordering::Relaxed);
    assert_eq!(
        calibrate(counter(), AtOnce, config(30)).unwrap_err(),
        CalibrationError::ReferenceStuck
    );

    // 100 s of edges: the rate found, within the bound it states.
    NOW.store(0, Ordering::Relaxed);
    let cal = calibrate(counter(), AtEdge, config(100)).unwrap();
    let hz = cal.frequency.as_millihz() as f64 / 1000.0;
    let err_ppm = (hz / 1e9 - 1.0) * 1e6;
    let Accuracy::Measured { uncertainty_ppb } = cal.frequency.accuracy() else {
        panic!()
    };
    println!(
        "100 s at the edge: {hz} Hz, {err_ppm:+.4} ppm, bound ±{} ppb, {} samples",
        uncertainty_ppb, cal.samples_used
    );
    assert!(err_ppm.abs() * 1000.0 <= uncertainty_ppb as f64);
    assert!(
        err_ppm.abs() < 0.1,
        "a 1 Hz reference over 100 s: {err_ppm} ppm"
    );
}
