//! The warp check on host threads (feature `std`), one per CPU, pinned where the OS allows.

use core::time::Duration;

use crate::warp::{StdPatience, WarpCheck, WarpError, WarpReport};
use baretime::Counter;

/// What [`warp_check_threads`] did: the check's report, and how the threads were placed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ThreadedWarp {
    /// The warp check's figures.
    pub report: WarpReport,
    /// Threads pinned to a CPU of their own (`sched_setaffinity` on Linux). Elsewhere, and
    /// where pinning failed, the OS placed the threads: the check then compares threads, which
    /// are on different CPUs only while both run (two threads spinning at once are, on a
    /// machine with a CPU free for each).
    pub pinned: u32,
    /// The OS error of the first pinning that failed (Linux errno), if any.
    pub pin_error: Option<i32>,
    /// Threads that could not be spawned (their CPUs' pairs are left out).
    pub not_spawned: u32,
    /// The first participant's error, if one ended early (a timeout, or the abort that
    /// followed it).
    pub error: Option<WarpError>,
}

/// Runs a [`WarpCheck`] of `threads` host threads (at most 256, as [`WarpCheck::new`] cuts
/// them) sharing `counter`, `checks_per_pair` checks of each ordered pair. On Linux thread `i` is pinned to the `i`-th CPU the calling thread may
/// run on (modulo their number: with more threads than CPUs some share one); a pinning that
/// fails is reported in [`ThreadedWarp::pin_error`] and the check runs on unpinned. Each wait
/// gives up after `patience_per_wait` of wall-clock time ([`StdPatience`]).
///
/// ```
/// use baretime_diag::warp_check_threads;
/// use baretime::FnCounter;
/// use core::time::Duration;
/// use std::sync::atomic::{AtomicU64, Ordering};
/// let time = AtomicU64::new(0);
/// let counter = FnCounter::new(|| time.fetch_add(1, Ordering::Relaxed), 64);
/// let run = warp_check_threads(&counter, 2, 1000, Duration::from_secs(5));
/// assert_eq!(run.report.checks, 2000); // 1000 each way, every one a handover
/// assert!(run.report.is_consistent());
/// ```
pub fn warp_check_threads<C: Counter + Sync + ?Sized>(
    counter: &C,
    threads: u32,
    checks_per_pair: u32,
    patience_per_wait: Duration,
) -> ThreadedWarp {
    let check = WarpCheck::new(threads, checks_per_pair);
    let cpus = allowed_cpus();
    let mut out = ThreadedWarp {
        report: WarpReport::default(),
        pinned: 0,
        pin_error: cpus.as_ref().err().copied().flatten(),
        not_spawned: 0,
        error: None,
    };
    let cpu_list = cpus.ok();
    std::thread::scope(|s| {
        let mut handles = std::vec::Vec::new();
        for id in 0..check.cpus() {
            let check = &check;
            let target = cpu_list.as_ref().and_then(|l| {
                let n = l.len();
                usize::try_from(id)
                    .ok()
                    .and_then(|i| i.checked_rem(n))
                    .and_then(|i| l.get(i).copied())
            });
            let spawned = std::thread::Builder::new().spawn_scoped(s, move || {
                let pinned = target.map(pin_current);
                let result =
                    check.participate(id, counter, &mut StdPatience::new(patience_per_wait));
                (pinned, result)
            });
            match spawned {
                Ok(h) => handles.push(h),
                Err(_) => out.not_spawned = out.not_spawned.saturating_add(1),
            }
        }
        for h in handles {
            let Ok((pinned, result)) = h.join() else {
                continue;
            };
            match pinned {
                Some(Ok(())) => out.pinned = out.pinned.saturating_add(1),
                Some(Err(e)) => out.pin_error = out.pin_error.or(Some(e)),
                None => {}
            }
            if let Err(e) = result {
                // A timeout explains the aborts that follow it: keep it over them.
                let keep = matches!(out.error, None | Some(WarpError::Aborted { .. }));
                if keep && !matches!(e, WarpError::Aborted { .. }) || out.error.is_none() {
                    out.error = Some(e);
                }
            }
        }
    });
    out.report = check.report();
    out
}

/// The CPUs this thread may run on; `Err(None)` where the OS offers no way to ask.
#[cfg(target_os = "linux")]
fn allowed_cpus() -> Result<std::vec::Vec<usize>, Option<i32>> {
    crate::pin::allowed_cpus().map_err(Some)
}

#[cfg(not(target_os = "linux"))]
fn allowed_cpus() -> Result<std::vec::Vec<usize>, Option<i32>> {
    Err(None)
}

#[cfg(target_os = "linux")]
fn pin_current(cpu: usize) -> Result<(), i32> {
    crate::pin::pin_current_thread(cpu)
}

#[cfg(not(target_os = "linux"))]
fn pin_current(_cpu: usize) -> Result<(), i32> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::WarpVerdict;
    use baretime::FnCounter;
    use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

    #[test]
    fn threads_are_pinned_and_every_check_compares_two() {
        let time = AtomicU64::new(0);
        let c = FnCounter::new(|| time.fetch_add(1, Ordering::Relaxed), 64);
        let run = warp_check_threads(&c, 2, 2000, Duration::from_secs(30));
        assert_eq!(run.error, None);
        assert_eq!(run.not_spawned, 0);
        #[cfg(target_os = "linux")]
        assert!(run.pinned == 2 || run.pin_error.is_some(), "{run:?}");
        let r = run.report;
        assert_eq!((r.cpus, r.cpus_covered, r.checks), (2, 2, 4000));
        assert_eq!(r.verdict(), WarpVerdict::Consistent);
    }

    /// The real TSC: the check runs to the end on two pinned threads, every ordered pair
    /// checked as often as asked (whether this machine's TSCs warp is not asserted).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn real_tsc_every_pair_covered() {
        let tsc = baretime_x86::Tsc::probe().unwrap();
        let run = warp_check_threads(&tsc, 2, 5000, Duration::from_secs(30));
        assert_eq!(run.error, None);
        let r = run.report;
        assert_eq!((r.cpus_covered, r.pairs_compared, r.checks), (2, 1, 10_000));
        assert_eq!(r.min_checks_per_pair, 5000);
        assert_ne!(r.verdict(), WarpVerdict::Inconclusive);
    }

    #[test]
    fn a_thread_behind_is_found() {
        // The first thread to read gets offset 0, the second is a million ticks behind.
        std::thread_local!(static OFFSET: core::cell::Cell<Option<u64>> = const { core::cell::Cell::new(None) });
        let next = AtomicU32::new(0);
        let time = AtomicU64::new(1 << 40);
        let c = FnCounter::new(
            || {
                let offset = OFFSET.with(|o| {
                    let v = o.get().unwrap_or_else(|| {
                        u64::from(next.fetch_add(1, Ordering::Relaxed)) * 1_000_000
                    });
                    o.set(Some(v));
                    v
                });
                time.fetch_add(1, Ordering::Relaxed) - offset
            },
            64,
        );
        let r = warp_check_threads(&c, 2, 100, Duration::from_secs(30)).report;
        assert_eq!((r.warps, r.max_warp_ticks), (100, 999_999));
        assert!(matches!(
            r.verdict(),
            WarpVerdict::Warped {
                max_warp_ticks: 999_999,
                ..
            }
        ));
    }
}
