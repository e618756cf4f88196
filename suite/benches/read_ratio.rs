//! What `Clock::now` costs over the raw counter read it is built on, measured the way that
//! survives a noisy machine: interleaved rounds in one process, the median of per-round
//! ratios (each round times every read back to back, so load changes hit all alike).
//!
//! `cargo bench --bench read_ratio [-- ROUNDS CALLS]` (default 40 rounds of 1 000 000 calls).
//! Prints one line per read with its median ns per call and its median ratio to its base.

use std::hint::black_box;
use std::time::Instant;

use baretime::{Clock, Counter, Frequency};

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

    let names = [
        "raw counter, ordered",
        "Clock::now (ordered)",
        "raw counter, plain",
        "Clock::now (plain)",
        "std Instant::now",
        "quanta Clock::now",
        "minstant Instant::now",
    ];
    // Each read's base for the ratio: the ordered or the plain raw read.
    let base = [0usize, 0, 2, 2, 0, 2, 2];
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
        ];
        for (i, v) in r.iter().enumerate() {
            ns[i].push(*v);
            ratio[i].push(v / r[base[i]]);
        }
    }
    println!(
        "{rounds} interleaved rounds of {calls} calls; median per-round ratio to the raw read"
    );
    for (i, name) in names.iter().enumerate() {
        println!(
            "{name:<24} {:>7.2} ns  {:>5.3}x {}",
            median(ns[i].clone()),
            median(ratio[i].clone()),
            if base[i] == 0 {
                "ordered raw"
            } else {
                "plain raw"
            }
        );
    }
}
