//! The bare floor of a clock read, written once for the report and `cargo bench --bench
//! read_ratio` (suite/benches/read_ratio.rs includes this file by path): a one-slot seqlock
//! (generation word, the counter read, base ticks, base ns, multiplier and shift, the
//! generation again) and one `u128` multiply — the least a correct lock-free conversion does.
//! `Clock::now` over it on the same counter read is what the crate's protocol costs beyond
//! that. A writer (none runs in either) would make `seq` odd, store the words, then make it
//! even.

use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

use baretime::Counter;

/// One slot of `ns = base_ns + (ticks − base_ticks) × mult >> shift`.
pub struct Floor {
    seq: AtomicU32,
    base_ticks: AtomicU64,
    base_ns: AtomicU64,
    mult: AtomicU64,
    shift: AtomicU32,
}

impl Floor {
    /// From `ticks` on, at `hz` (taken as at least 1).
    pub fn new(ticks: u64, hz: u64) -> Floor {
        let shift = 32;
        Floor {
            seq: AtomicU32::new(0),
            base_ticks: AtomicU64::new(ticks),
            base_ns: AtomicU64::new(0),
            mult: AtomicU64::new(((1_000_000_000u128 << shift) / u128::from(hz.max(1))) as u64),
            shift: AtomicU32::new(shift),
        }
    }

    /// The time in ns at `counter`'s reading, read under the slot's generation.
    #[inline(always)]
    pub fn now(&self, counter: &impl Counter) -> u64 {
        loop {
            let s1 = self.seq.load(Ordering::Acquire);
            let t = counter.ticks();
            let b = self.base_ticks.load(Ordering::Relaxed);
            let ns = self.base_ns.load(Ordering::Relaxed);
            let mult = self.mult.load(Ordering::Relaxed);
            let shift = self.shift.load(Ordering::Relaxed);
            fence(Ordering::Acquire);
            if self.seq.load(Ordering::Relaxed) == s1 && s1 & 1 == 0 {
                let d = u128::from(t.wrapping_sub(b));
                return ns.wrapping_add(((d * u128::from(mult)) >> (shift & 127)) as u64);
            }
            std::hint::spin_loop();
        }
    }
}
