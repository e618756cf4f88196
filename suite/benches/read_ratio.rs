//! What `Clock::now` costs over the raw counter read it is built on, measured the way that
//! survives a noisy machine: interleaved rounds in one process, the median of per-round
//! ratios (each round times every read back to back, so load changes hit all alike).
//!
//! `cargo bench --bench read_ratio [-- ROUNDS CALLS]` (default 40 rounds of 1 000 000 calls).
//! Prints one line per read with its median ns per call and its median ratio to its base,
//! then `Clock::now` over the bare floor (below), by rounds and by short adjacent pairs.
//!
//! `bare floor` is the least a correct lock-free clock read does, written here (`Floor`): a
//! generation word, one slot of base ticks, base ns and a multiplier with its shift, the
//! counter read (ordered or plain, as the `Clock::now` beside it), the generation checked
//! again, one `u128` multiply. `Clock::now` is also given as a ratio to it, on the same
//! counter read: what the crate's protocol costs beyond the least one.
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

// The bare floor, shared with the report (one copy: what both call "the floor").
#[path = "../../report/examples/common/floor.rs"]
mod floor;

use floor::Floor;

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
    let floor = Floor::new(counter.ticks(), 2_000_000_000);
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
            &floor,
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
    floor: &Floor,
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
        "bare floor (ordered)",
        "bare floor (plain)",
    ];
    // Each read's base for the ratio: the ordered or the plain raw read; for the coarse
    // clock, the plain `Clock::now` it stands in for.
    let base = [0usize, 0, 2, 2, 0, 2, 2, 3, 0, 2];
    // `Clock::now` over the bare floor on the same counter read: (read, floor).
    let over_floor = [(1usize, 8usize), (3, 9)];
    let mut ns: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    let mut ratio: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    let mut floor_ratio: Vec<Vec<f64>> = vec![Vec::new(); over_floor.len()];
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
            time(calls, || {
                black_box(floor.now(counter));
            }),
            time(calls, || {
                black_box(floor.now(&plain));
            }),
        ];
        for (i, v) in r.iter().enumerate() {
            ns[i].push(*v);
            ratio[i].push(v / r[base[i]]);
        }
        for (k, (read, fl)) in over_floor.iter().enumerate() {
            floor_ratio[k].push(r[*read] / r[*fl]);
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
    for (k, (read, fl)) in over_floor.iter().enumerate() {
        report_ratio(
            &format!("{} / {}, rounds", names[*read], names[*fl]),
            floor_ratio[k].clone(),
        );
    }
    // The same ratios from short adjacent pairs (the order alternating), many of them: a
    // preemption spoils a few pairs, not a whole round.
    let pairs = 20 * rounds;
    let short = (calls / 100).max(1);
    let mut ordered = Vec::new();
    let mut unordered = Vec::new();
    for i in 0..pairs {
        let (a, b) = paired(i, short, || floor.now(counter), || clock.now());
        ordered.push(b / a);
        let (a, b) = paired(i, short, || floor.now(&plain), || plain_clock.now());
        unordered.push(b / a);
    }
    report_ratio(
        &format!("Clock::now / bare floor (ordered), {pairs} pairs of {short} calls"),
        ordered,
    );
    report_ratio(
        &format!("Clock::now / bare floor (plain), {pairs} pairs of {short} calls"),
        unordered,
    );
}

/// Times `a` and `b` over `calls` calls each, back to back, `a` first on even `i`.
fn paired<A, B>(
    i: u32,
    calls: u32,
    mut a: impl FnMut() -> A,
    mut b: impl FnMut() -> B,
) -> (f64, f64) {
    if i % 2 == 0 {
        let ta = time(calls, || {
            black_box(a());
        });
        (
            ta,
            time(calls, || {
                black_box(b());
            }),
        )
    } else {
        let tb = time(calls, || {
            black_box(b());
        });
        (
            time(calls, || {
                black_box(a());
            }),
            tb,
        )
    }
}

/// Prints the median of `v` and its quartiles.
fn report_ratio(what: &str, mut v: Vec<f64>) {
    v.sort_by(|a, b| a.total_cmp(b));
    let q = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
    println!(
        "{what}: {:.3}x (quartiles {:.3} .. {:.3})",
        q(0.5),
        q(0.25),
        q(0.75)
    );
}
