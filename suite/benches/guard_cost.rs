//! What the opt-in monotonic guard costs: `MonotonicClock::now` beside the plain
//! `Clock::now`, with 1, 2 and all CPUs reading at once (each thread in a tight loop, so the
//! guard's shared mark is contended as much as it can be). Prints ns per call per thread and
//! the ratio, measured in one run; nothing is asserted (a shared machine is noisy).
//!
//! Each thread times chunks of [`CHUNK`] calls, the two kinds of clock measured alternately.
//! With several threads only *overlapped* chunks count: those during which every other
//! thread made about as many calls (½ to 2 chunks), so that the threads really ran at
//! once (on a loaded machine they are often time-sliced on one CPU, and then nothing
//! contends; a chunk in which this thread was preempted sees the others make many more).
//! The figures are the median and the minimum over those chunks of all threads.
//!
//! `cargo bench --bench guard_cost`

#[path = "common/mod.rs"]
mod common;

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::Instant as StdInstant;

use baretime::{Clock, Counter, Frequency, MonotonicClock};

const CHUNK: u32 = 20_000;
const CHUNKS: u32 = 100;
const ROUNDS: u32 = 5;

/// A thread's call count, alone on its cache line.
#[repr(align(128))]
#[derive(Default)]
struct Progress(AtomicU64);

/// Calls another thread must make during a chunk for it to count as overlapped: about as many
/// as this thread (a thread preempted in its chunk sees the others make many more; one whose
/// partner was preempted sees it make fewer).
const CHUNK_LO: u64 = CHUNK as u64 / 2;
const CHUNK_HI: u64 = CHUNK as u64 * 2;

/// Calls between two updates of a thread's [`Progress`].
const STRIDE: u32 = 250;

/// ns per call of each overlapped chunk of each thread: `threads` threads each call `f` in
/// [`CHUNKS`] chunks of [`CHUNK`] after a common start.
fn chunk_ns(threads: usize, f: &(dyn Fn() -> u64 + Sync)) -> Vec<f64> {
    let start = Barrier::new(threads);
    let progress: Vec<Progress> = (0..threads).map(|_| Progress::default()).collect();
    let others = |me: usize| -> Vec<u64> {
        (0..threads)
            .filter(|&i| i != me)
            .map(|i| progress[i].0.load(Ordering::Relaxed))
            .collect()
    };
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|me| {
                let (start, progress, others) = (&start, &progress, &others);
                s.spawn(move || {
                    start.wait();
                    let mut out = Vec::new();
                    let mut done = 0u64;
                    for _ in 0..CHUNKS {
                        let before = others(me);
                        let t = StdInstant::now();
                        for _ in 0..CHUNK / STRIDE {
                            for _ in 0..STRIDE {
                                black_box(f());
                            }
                            done += u64::from(STRIDE);
                            progress[me].0.store(done, Ordering::Relaxed);
                        }
                        let ns = t.elapsed().as_nanos() as f64 / f64::from(CHUNK);
                        let overlapped = others(me).iter().zip(before).all(|(after, before)| {
                            let d = after - before;
                            (CHUNK_LO..=CHUNK_HI).contains(&d)
                        });
                        if overlapped {
                            out.push(ns);
                        }
                    }
                    out
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    })
}

/// Median, minimum and count (NaN for no chunk).
fn median_min(mut v: Vec<f64>) -> (f64, f64, usize) {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    (
        v.get(n / 2).copied().unwrap_or(f64::NAN),
        v.first().copied().unwrap_or(f64::NAN),
        n,
    )
}

fn measure<C: Counter + Sync>(counter: C) {
    let clock = Clock::new(counter, Frequency::exact_hz(1_000_000_000).unwrap());
    let guarded = MonotonicClock::new(&clock);
    let all = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut counts = vec![1, 2, all];
    counts.sort_unstable();
    counts.dedup();
    println!("ns per call per thread, median (min) over overlapped chunks of {CHUNK} calls");
    println!(
        "threads   Clock::now       MonotonicClock::now   ratio of medians (of minima)  chunks"
    );
    for threads in counts {
        // The two interleaved, so that both see the same machine.
        let (mut plain, mut guard) = (Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            plain.extend(chunk_ns(threads, &|| clock.now().as_nanos()));
            guard.extend(chunk_ns(threads, &|| guarded.now().as_nanos()));
        }
        let ((pm, p0, pn), (gm, g0, gn)) = (median_min(plain), median_min(guard));
        let label = if threads == all {
            format!("{threads} (all)")
        } else {
            threads.to_string()
        };
        println!(
            "{label:<9} {pm:>7.2} ({p0:>6.2})  {gm:>9.2} ({g0:>6.2})      {:.2}x ({:.2}x)   \
             {pn}/{gn}",
            gm / pm,
            g0 / p0
        );
    }
}

fn main() {
    // `cargo test --benches` runs bench targets without `--bench`: do nothing there.
    if !std::env::args().any(|a| a == "--bench") {
        println!("guard_cost: run with `cargo bench --bench guard_cost`");
        return;
    }
    measure(common::counter());
}
