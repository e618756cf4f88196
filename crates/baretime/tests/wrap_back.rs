//! A narrow counter that reads a whole wrap back once — a SysTick read as `0xff_ffff − VAL`
//! while VAL is 0 before its first reload, then 0 after it (issue 26, item 5; the recipe's
//! side is tests/systick_recipe.rs) — on a 32-bit target, where the clock reads the count
//! modulo 2^32 (modelled here by a 32-bit counter).
//!
//! The promise asked for: such a reading never freezes the clock silently at its deadline.
//! Either it is prevented (the clock does not jump), or it is reported, in `health()` and by
//! the next `update()`.
//!
//! On this host (64-bit atomics: 64-bit gate words) it is reported: the clock jumps +85.9 s,
//! and the first update returns `Late` and counts in `health()`. The issue saw it silent on
//! a Cortex-M4 (32-bit gate words, `WIDE_ATOMICS` false). That path is reported too: run on a
//! target without 64-bit atomics, powerpc-unknown-linux-gnu under qemu-user (2026-12-04,
//! `CARGO_TARGET_POWERPC_UNKNOWN_LINUX_GNU_LINKER=powerpc-linux-gnu-gcc
//! CARGO_TARGET_POWERPC_UNKNOWN_LINUX_GNU_RUNNER="qemu-ppc -L /usr/powerpc-linux-gnu" cargo
//! test --target powerpc-unknown-linux-gnu -p baretime --test wrap_back`), the same jump,
//! `late_updates: 1` and `Err(Late)`. CI runs it on the host's path only.

use std::cell::Cell;

use baretime::{Clock, FnCounter, Frequency};

const HZ: u64 = 25_000_000;

#[test]
fn a_narrow_counter_read_a_wrap_back_once_never_freezes_the_clock_silently() {
    let ticks = Cell::new(0xff_ffffu64); // the start reads 0xff_ffff (VAL = 0)
    let clock = Clock::uninit(FnCounter::new(|| ticks.get(), 32));
    clock.start(Frequency::exact_hz(HZ).unwrap()).unwrap();
    ticks.set(0); // the reload: 2^24 − 1 ticks back, no wrap seen
    let jumped = clock.now().as_nanos();
    // SysTick runs on; its wrap interrupt updates the clock every 2^24 ticks (0.67 s).
    let mut update = Ok(());
    for wrap in 1..=3u64 {
        ticks.set(wrap << 24);
        update = update.and(clock.update());
    }
    let truth = (3u64 << 24) * 1_000_000_000 / HZ; // 2.01 s after the reload
    let now = clock.now().as_nanos();
    let prevented = jumped < 1_000_000_000 && now.abs_diff(truth) < 1_000_000_000;
    let health = clock.health();
    let reported = (health.counter_behind || health.late_updates > 0) && update.is_err();
    assert!(
        prevented || reported,
        "read a wrap back once: now() jumped to {jumped} ns, reads {now} ns after 2.01 s \
         ({truth} ns); health {health:?}; the updates returned {update:?}"
    );
}
