//! What a timestamp costs: the raw counter reads, baretime's `Clock`, and the peers
//! (`std::time::Instant`, `quanta`, `minstant`), side by side in one run.
//!
//! `cargo bench --bench read_cost` (or `cargo xtask bench`). Compare ratios within one run:
//! the absolute figures move with the machine's load.
#![allow(missing_docs)] // criterion_group! generates an undocumented pub fn

use std::hint::black_box;

use baretime::{Clock, Counter, Frequency};
use criterion::{criterion_group, criterion_main, Criterion};

mod common;

use common::counter;

fn reads(c: &mut Criterion) {
    let counter = counter();
    // Any plausible rate: the cost of a read does not depend on it.
    let clock = Clock::new(counter, Frequency::exact_hz(2_000_000_000).unwrap());
    let plain = clock.counter().unordered();
    let plain_clock = Clock::new(plain, Frequency::exact_hz(2_000_000_000).unwrap());

    let mut g = c.benchmark_group("read");
    g.bench_function("raw counter, ordered", |b| {
        b.iter(|| black_box(counter.ticks()))
    });
    g.bench_function("baretime Clock::raw (ordered)", |b| {
        b.iter(|| black_box(clock.raw()))
    });
    g.bench_function("baretime Clock::now (ordered)", |b| {
        b.iter(|| black_box(clock.now()))
    });
    g.bench_function("raw counter, plain", |b| {
        b.iter(|| black_box(plain.ticks()))
    });
    g.bench_function("baretime Clock::raw (plain)", |b| {
        b.iter(|| black_box(plain_clock.raw()))
    });
    g.bench_function("baretime Clock::now (plain)", |b| {
        b.iter(|| black_box(plain_clock.now()))
    });
    g.bench_function("std Instant::now", |b| {
        b.iter(|| black_box(std::time::Instant::now()))
    });
    let q = quanta::Clock::new();
    g.bench_function("quanta Clock::now", |b| b.iter(|| black_box(q.now())));
    g.bench_function("quanta Clock::raw", |b| b.iter(|| black_box(q.raw())));
    g.bench_function("minstant Instant::now", |b| {
        b.iter(|| black_box(minstant::Instant::now()))
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(2));
    targets = reads
}
criterion_main!(benches);
