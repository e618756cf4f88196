//! What `Clock::now` costs over the raw counter read it is built on, measured the way that
//! survives a noisy machine: interleaved rounds in one process, the median of per-round
//! ratios (each round times every read back to back, so load changes hit all alike).
//!
//! `cargo bench --bench read_ratio [-- ROUNDS CALLS]` (default 40 rounds of 1 000 000 calls).
//! Prints one line per read with its median ns per call and its median ratio to its base.
//!
//! `CoarseClock::now` is measured against `Clock::now (plain)`, the read it stands in for on
//! a hot path, with a refresher thread storing a fresh time every millisecond meanwhile (a
//! periodic tick's cache-line traffic, as in use). Its goal: at most 0.5×.

use std::hint::black_box;
use std::time::Instant;

use std::sync::atomic::{AtomicBool, Ordering};

use baretime::{Clock, CoarseClock, Counter, Frequency};

mod common;

use common::counter;

/// Nanoseconds per call of `f` over `calls` calls.
fn time(calls: u32, mut f: impl FnMut()) -> f64 {
    let t = Instant::now();
    for _ in 0..calls {
        f();
    }
    t.elapsed().as_nanos() as f64 / f64::from(calls)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let args: Vec<u32> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let rounds = args.first().copied().unwrap_or(40).max(1);
    let calls = args.get(1).copied().unwrap_or(1_000_000).max(1);
    let counter = counter();
    let clock = Clock::new(counter, Frequency::exact_hz(2_000_000_000).unwrap());
    let plain = clock.counter().unordered();
    let plain_clock = Clock::new(plain, Frequency::exact_hz(2_000_000_000).unwrap());
    let q = quanta::Clock::new();
    let coarse = CoarseClock::new();
    coarse.refresh(&plain_clock);
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        // The tick: refreshes the coarse clock every millisecond while the rounds run.
        scope.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                coarse.refresh(&plain_clock);
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        });
        rounds_of(
            rounds,
            calls,
            &counter,
            &clock,
            plain,
            &plain_clock,
            &q,
            &coarse,
        );
        stop.store(true, Ordering::Relaxed);
    });
}

/// The interleaved rounds and their report.
#[allow(clippy::too_many_arguments)]
fn rounds_of<C: Counter, P: Counter>(
    rounds: u32,
    calls: u32,
    counter: &C,
    clock: &Clock<C>,
    plain: P,
    plain_clock: &Clock<P>,
    q: &quanta::Clock,
    coarse: &CoarseClock,
) {
    let names = [
        "raw counter, ordered",
        "Clock::now (ordered)",
        "raw counter, plain",
        "Clock::now (plain)",
        "std Instant::now",
        "quanta Clock::now",
        "minstant Instant::now",
        "CoarseClock::now",
    ];
    // Each read's base for the ratio: the ordered or the plain raw read; for the coarse
    // clock, the plain `Clock::now` it stands in for.
    let base = [0usize, 0, 2, 2, 0, 2, 2, 3];
    let mut ns: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    let mut ratio: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    for _ in 0..rounds {
        let r = [
            time(calls, || {
                black_box(counter.ticks());
            }),
            time(calls, || {
                black_box(clock.now());
            }),
            time(calls, || {
                black_box(plain.ticks());
            }),
            time(calls, || {
                black_box(plain_clock.now());
            }),
            time(calls, || {
                black_box(Instant::now());
            }),
            time(calls, || {
                black_box(q.now());
            }),
            time(calls, || {
                black_box(minstant::Instant::now());
            }),
            time(calls, || {
                black_box(coarse.now());
            }),
        ];
        for (i, v) in r.iter().enumerate() {
            ns[i].push(*v);
            ratio[i].push(v / r[base[i]]);
        }
    }
    println!(
        "{rounds} interleaved rounds of {calls} calls; median per-round ratio to its base read"
    );
    for (i, name) in names.iter().enumerate() {
        println!(
            "{name:<24} {:>7.2} ns  {:>5.3}x {}",
            median(ns[i].clone()),
            median(ratio[i].clone()),
            match base[i] {
                0 => "ordered raw",
                2 => "plain raw",
                _ => "Clock::now (plain)",
            }
        );
    }
}
