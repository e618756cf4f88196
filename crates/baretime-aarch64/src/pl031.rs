//! [`Pl031`]: Arm's PrimeCell PL031 real-time clock (QEMU `virt`'s RTC at 0x0901_0000), a
//! 32-bit count of seconds, as the boot's time of day ([`Pl031::read_at_edge`]) and as a
//! slow [`Reference`] (each read waits for the next edge).

use core::fmt;
use core::ptr;

use baretime::{Accuracy, Clock, Counter, Frequency, Reference, SecondsEdge, Source};

/// The data register: the current count, in seconds.
const RTCDR: usize = 0x000;
/// How many RTCDR reads (0.1–1 µs each on hardware, about 1 µs under QEMU) a
/// [`Reference::read`] or [`Pl031::read_at_edge`] waits for the next edge: 2^24, 1.6–17 s,
/// before it gives up.
const REFERENCE_POLLS: u32 = 1 << 24;
/// The crystal's tolerance, in ppb: a 32.768 kHz watch crystal, commonly ±20 ppm at 25 °C,
/// worse over temperature and age; 100 ppm covers an untrimmed board.
const RTC_TOLERANCE_PPB: u64 = 100_000;

const RTC_FREQUENCY: Frequency = match Frequency::from_millihz(
    1_000_000, // Unix milliseconds: the crate's slowest rate, 1 kHz
    Source::Reference,
    Accuracy::Nominal {
        tolerance_ppb: RTC_TOLERANCE_PPB,
    },
) {
    Some(f) => f,
    None => panic!("1 kHz is within Frequency's range"),
};

/// Why [`Pl031::read_at_edge`] found no edge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Pl031Error {
    /// The count did not change within 1.2 s of the clock (or 2^24 polls, on a clock that
    /// does not move): the RTC does not tick (not started: RTCCR's enable bit clear, or no
    /// PL031 at the address).
    NotTicking,
}

impl fmt::Display for Pl031Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pl031Error::NotTicking => f.write_str("PL031 count did not change in 1.2 s"),
        }
    }
}

impl core::error::Error for Pl031Error {}

/// The PL031 real-time clock: its data register RTCDR counts seconds, which firmware (and
/// QEMU, from `-rtc base=`) sets to Unix time, as Linux's `rtc-pl031` takes it.
///
/// [`Pl031::read_at_edge`] polls RTCDR until it changes and returns the new count with the
/// [`Clock`]'s readings around that change, so the boot's time of day is good to the poll (a
/// few microseconds under QEMU: `cargo xtask qemu wall-aarch64`) instead of to the second;
/// the RTC's own error (how well it was set, its crystal) is the floor.
///
/// As a [`Reference`] it counts Unix milliseconds at 1 kHz (stated ±100 ppm), and each read
/// **waits for the next seconds edge** (up to a second) and returns that edge's count, so
/// that every read is latched at an instant the calibrator can bracket (a count read at once
/// would stand still for a second at a time: a stuck reference to the calibrator). The
/// brackets are about a second wide, and the bound with them: a model of it
/// (`tests/rtc_reference.rs` in the core) measured a 1 GHz counter to 0.003 ppm in 100 s with
/// a stated ±59 ppm (±159 with the crystal's tolerance): a slow check of a rate over
/// minutes, not a boot calibration. A read that finds no edge in 2^24 reads returns the
/// previous count (0 before any read found one). The count is 32 bits
/// of seconds: it wraps in 2106 (to 0, a step back for the reference and for
/// [`Pl031::read_unix_seconds`]).
#[derive(Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Pl031 {
    base: usize,
    last_ms: u64,
}

impl Pl031 {
    /// The PL031 whose registers are mapped (as device memory) at `base`: from the device
    /// tree's `arm,pl031` node or the board's manual (`virt`: 0x0901_0000).
    ///
    /// # Safety
    ///
    /// `base` is the address, mapped as device memory, of a PL031's register block for as
    /// long as the `Pl031` lives; reading RTCDR there has no side effect on anything else.
    pub unsafe fn new(base: usize) -> Pl031 {
        Pl031 { base, last_ms: 0 }
    }

    /// The count: Unix seconds, as the RTC was set.
    pub fn read_unix_seconds(&mut self) -> u64 {
        // SAFETY: `new`'s contract: a PL031's registers are mapped at `base`; RTCDR is a
        // read-only 32-bit register, read with one aligned volatile load.
        let v = unsafe { ptr::read_volatile(self.base.wrapping_add(RTCDR) as *const u32) };
        u64::from(v)
    }

    /// Waits for the RTC's next seconds edge and returns it: the second that began, and
    /// `clock`'s readings before the last read that saw the previous second and after the
    /// first that saw the new one. The edge lies between them; set a
    /// [`baretime::WallClock`] from it with `set_at_edge`. An interrupt (or a vCPU preempted)
    /// during the poll widens the bracket: poll with interrupts masked, or check
    /// [`SecondsEdge::width_ns`](baretime::SecondsEdge::width_ns) and read the next edge.
    ///
    /// Gives up with [`Pl031Error::NotTicking`] at the first poll that finds more than 1.2 s
    /// of `clock` time gone, so the wait overshoots 1.2 s by up to one poll (a clock read and
    /// an RTCDR read), or after 2^24 polls (1.6–17 s), whichever comes first: a [`Clock`] not
    /// started yet (its time stands at zero) never reaches 1.2 s, and the poll count ends
    /// the wait there. The poll is [`SecondsEdge::measure`]'s, over RTCDR.
    ///
    /// The count is 32 bits: at its wrap (2106-02-07T06:28:16Z) the edge returned is second 0
    /// (1970), a step back of 2^32 s for a wall clock set from it.
    pub fn read_at_edge<C: Counter>(
        &mut self,
        clock: &Clock<C>,
    ) -> Result<SecondsEdge, Pl031Error> {
        SecondsEdge::measure(clock, REFERENCE_POLLS, || Some(self.read_unix_seconds()))
            .ok_or(Pl031Error::NotTicking)
    }
}

impl Reference for Pl031 {
    /// Waits for the next seconds edge (at most 2^24 reads) and returns its
    /// count in milliseconds: latched at the edge, the end of the read. The previous count if
    /// no edge came (a calibration then ends in `ReferenceStuck`, never a wrong rate); 0 if
    /// no read has found an edge yet.
    fn read(&mut self) -> u64 {
        let first = self.read_unix_seconds();
        for _ in 0..REFERENCE_POLLS {
            let seconds = self.read_unix_seconds();
            if seconds != first {
                self.last_ms = seconds.saturating_mul(1_000);
                break;
            }
        }
        self.last_ms
    }

    fn bits(&self) -> u32 {
        64
    }

    fn frequency(&self) -> Frequency {
        RTC_FREQUENCY
    }

    fn name(&self) -> &'static str {
        "pl031"
    }
}
