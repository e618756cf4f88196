//! [`SemihostingElapsed`]: elapsed time from an Arm semihosting host (QEMU, a debug probe).
//!
//! `SYS_ELAPSED` returns the ticks since the program started and `SYS_TICKFREQ` their rate.
//! Under QEMU these come from the host's monotonic clock in nanoseconds (1 GHz), which makes
//! them a good reference for checking a guest's CNTFRQ_EL0 — and the only one a `virt`
//! machine has besides the generic timer itself.

use core::fmt;

use crate::semihosting_call::{call, SYS_ELAPSED, SYS_TICKFREQ};
use baretime::Reference;
use baretime::{Accuracy, Frequency, Source};

/// Why [`SemihostingElapsed::new`] could not use the host's clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum SemihostingError {
    /// `SYS_TICKFREQ` failed, or gave a rate outside [`Frequency`]'s range (value in Hz).
    TickFrequency(u64),
    /// `SYS_ELAPSED` failed.
    Elapsed,
}

impl fmt::Display for SemihostingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SemihostingError::TickFrequency(hz) => {
                write!(f, "semihosting SYS_TICKFREQ gave no usable rate ({hz})")
            }
            SemihostingError::Elapsed => f.write_str("semihosting SYS_ELAPSED failed"),
        }
    }
}

impl core::error::Error for SemihostingError {}

/// The semihosting host's elapsed-time counter as a 64-bit [`Reference`].
///
/// Each read is a trap to the host (a few microseconds under QEMU's TCG), which the
/// calibrator's bracketing accounts for. The rate is what `SYS_TICKFREQ` states,
/// [`Accuracy::Exact`]; it is as good as the host's clock.
#[derive(Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SemihostingElapsed {
    frequency: Frequency,
    last: u64,
}

impl SemihostingElapsed {
    /// Asks the host for its tick rate and checks that `SYS_ELAPSED` works.
    ///
    /// # Safety
    ///
    /// A semihosting host is attached and handles `HLT #0xF000` at the current exception
    /// level, for as long as the `SemihostingElapsed` lives (for QEMU: `-semihosting`).
    /// Without one the first call traps as an undefined instruction.
    pub unsafe fn new() -> Result<SemihostingElapsed, SemihostingError> {
        // SAFETY: the caller guarantees a semihosting host (# Safety); SYS_TICKFREQ takes no
        // parameter block (its parameter must be 0).
        let hz = unsafe { call(SYS_TICKFREQ, 0) } as u64;
        let frequency = Frequency::from_hz(hz, Source::Reference, Accuracy::Exact)
            .ok_or(SemihostingError::TickFrequency(hz))?;
        let mut this = SemihostingElapsed { frequency, last: 0 };
        this.elapsed().ok_or(SemihostingError::Elapsed)?;
        Ok(this)
    }

    /// One `SYS_ELAPSED` request: the host's ticks since start, or `None` if it failed.
    pub fn elapsed(&mut self) -> Option<u64> {
        // Two fields, as the specification describes the block; on AArch64 the host writes
        // the whole 64-bit count into the first.
        let mut block = [0u64; 2];
        // SAFETY: `new`'s contract guarantees the host; `block` is a writable 16-byte block
        // that outlives the call, as SYS_ELAPSED requires.
        let ret = unsafe { call(SYS_ELAPSED, block.as_mut_ptr() as usize) };
        if ret != 0 {
            return None;
        }
        self.last = block[0];
        Some(block[0])
    }
}

impl Reference for SemihostingElapsed {
    /// `SYS_ELAPSED`; should a request fail, the previous count again (a reference that stops
    /// advancing is a calibration error, never a wrong frequency).
    fn read(&mut self) -> u64 {
        match self.elapsed() {
            Some(v) => v,
            None => self.last,
        }
    }

    fn bits(&self) -> u32 {
        64
    }

    fn frequency(&self) -> Frequency {
        self.frequency
    }

    fn name(&self) -> &'static str {
        "semihosting"
    }
}
