//! The atomics the [`crate::Clock`] publishes its timebase with.
//!
//! `loom` replaces them in the model-checking build (`RUSTFLAGS="--cfg loom"`). Targets
//! without 64-bit atomics (Cortex-M) store a `u64` as two `u32` halves: the clock's
//! generation check already rejects any read that raced a write, torn halves included, so
//! no lock or critical section is needed.

pub(crate) use core::sync::atomic::Ordering;

/// What a reader does while it waits for a writer's store: a CPU hint, or a yield to the
/// model checker (a spin loop would never end under loom).
#[inline(always)]
pub(crate) fn spin_loop() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    core::hint::spin_loop();
}
#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{fence, AtomicBool, AtomicU32};
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicU32};

/// A `u64` that is read and written with relaxed atomics (possibly as two halves).
pub(crate) struct RelaxedU64 {
    #[cfg(all(target_has_atomic = "64", not(loom)))]
    v: core::sync::atomic::AtomicU64,
    #[cfg(all(target_has_atomic = "64", loom))]
    v: loom::sync::atomic::AtomicU64,
    #[cfg(not(target_has_atomic = "64"))]
    lo: AtomicU32,
    #[cfg(not(target_has_atomic = "64"))]
    hi: AtomicU32,
}

impl RelaxedU64 {
    #[cfg(all(target_has_atomic = "64", not(loom)))]
    pub(crate) const fn new(v: u64) -> Self {
        RelaxedU64 {
            v: core::sync::atomic::AtomicU64::new(v),
        }
    }
    #[cfg(all(target_has_atomic = "64", loom))]
    pub(crate) fn new(v: u64) -> Self {
        RelaxedU64 {
            v: loom::sync::atomic::AtomicU64::new(v),
        }
    }
    #[cfg(not(target_has_atomic = "64"))]
    pub(crate) const fn new(v: u64) -> Self {
        RelaxedU64 {
            lo: AtomicU32::new(v as u32),
            hi: AtomicU32::new((v >> 32) as u32),
        }
    }

    #[inline(always)]
    pub(crate) fn load(&self) -> u64 {
        #[cfg(target_has_atomic = "64")]
        {
            self.v.load(Ordering::Relaxed)
        }
        #[cfg(not(target_has_atomic = "64"))]
        {
            let lo = self.lo.load(Ordering::Relaxed) as u64;
            let hi = self.hi.load(Ordering::Relaxed) as u64;
            (hi << 32) | lo
        }
    }

    #[inline(always)]
    pub(crate) fn store(&self, v: u64) {
        #[cfg(target_has_atomic = "64")]
        {
            self.v.store(v, Ordering::Relaxed)
        }
        #[cfg(not(target_has_atomic = "64"))]
        {
            self.lo.store(v as u32, Ordering::Relaxed);
            self.hi.store((v >> 32) as u32, Ordering::Relaxed);
        }
    }
}
