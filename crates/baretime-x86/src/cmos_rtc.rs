//! [`CmosRtc`]: the PC's CMOS real-time clock (MC146818 and its descendants) through ports
//! 0x70/0x71, read by the update-in-progress rule, as the boot's time of day
//! ([`CmosRtc::read_at_edge`]) and as a slow [`Reference`] (each read waits for the next edge).

use baretime::{Accuracy, Clock, Counter, Frequency, Reference, SecondsEdge, Source};

use crate::cmos::{
    CmosError, Raw, DAY, HOURS, MINUTES, MONTH, SECONDS, STATUS_A, STATUS_B, UIP, YEAR,
};
use crate::port::{inb, outb};
use crate::tolerance::RTC_TOLERANCE_PPB;

/// The CMOS index port (bit 7 of the index masks NMIs; this driver leaves it clear, as
/// Linux's `CMOS_READ` does) and the data port.
const INDEX: u16 = 0x70;
const DATA: u16 = 0x71;
/// How many times a full read is repeated for two that agree.
const SETTLE_TRIES: u32 = 16;
/// How long [`CmosRtc::read_at_edge`] waits for the seconds to change: a second, plus the
/// update cycle's 10 %, plus a 100 ms margin.
const EDGE_WAIT_NS: u64 = 1_200_000_000;
/// How many polls (a register A read and, UIP clear, a seconds read: 2–4 µs of port I/O on a
/// PC) a [`Reference::read`] waits for the next edge: 2^22, 8–16 s, before it gives up.
const REFERENCE_POLLS: u32 = 1 << 22;
/// The reference's rate: Unix time in milliseconds (the crate's slowest rate, 1 kHz), which
/// steps by 1000 once a second.
const MILLIHZ_1KHZ: u64 = 1_000_000;

const RTC_FREQUENCY: Frequency = const_frequency!(
    millihz: MILLIHZ_1KHZ,
    Source::Reference,
    Accuracy::Nominal {
        tolerance_ppb: RTC_TOLERANCE_PPB,
    }
);

/// The CMOS real-time clock: the PC's battery-backed time of day, to the second.
///
/// [`CmosRtc::read_unix_seconds`] follows the update-in-progress rule: wait for register A's
/// UIP bit to clear (an update then does not start for at least 244 µs), read the time
/// registers, and read them again until two reads agree. Register B says whether they are BCD
/// or binary and 12- or 24-hour; the century comes from the register the FADT names
/// (`CENTURY`, offset 108), else the year is taken to be 20xx. The RTC is taken to keep UTC
/// (Linux's and most hypervisors' default; a PC set by Windows keeps local time).
///
/// [`CmosRtc::read_at_edge`] polls UIP and the seconds register until the second changes and
/// returns the new second with the [`Clock`]'s readings around that change: the boot's time
/// of day to a few microseconds of poll (under QEMU 7.2, TCG: `cargo xtask qemu wall-x86`),
/// instead of to the second. The registers change at the end of the RTC's update cycle, so
/// the edge is the RTC's own second as software sees it: on real hardware the update takes
/// up to about 2 ms after the RTC's internal 1 Hz tick, and how well the RTC was set (and its
/// crystal, ±20–100 ppm) is the floor of what any reading of it can give.
///
/// As a [`Reference`] it counts Unix milliseconds at 1 kHz (stated ±100 ppm), and each read
/// **waits for the next seconds edge** (up to a second) and returns that edge's count, so
/// that every read is latched at an instant the calibrator can bracket (a read that
/// returned the current second at once would stand still for a second at a time, which the
/// calibrator rightly takes for a stuck reference). The brackets are then about a second
/// wide, and the calibrator's bound with them: a model of it (`tests/rtc_reference.rs` in
/// the core) measured a 1 GHz counter to 0.003 ppm in 100 s with a stated ±59 ppm (±159
/// with the crystal's tolerance); it needs windows of minutes, not a boot's 50 ms — a slow
/// check of a rate (a watchdog's), not a boot calibration. A read that finds no edge in
/// 2^22 polls, or an unreadable time, returns the previous count (0 before any read found
/// one).
#[derive(Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CmosRtc {
    century: Option<u8>,
    last_ms: u64,
}

impl CmosRtc {
    /// The CMOS RTC, with the century register the FADT's `CENTURY` byte names (`None` where
    /// it is 0: the firmware offers none, and years are 20xx).
    ///
    /// # Safety
    ///
    /// The CPU runs with I/O privilege for ports 0x70 and 0x71 and the machine has a
    /// PC-compatible RTC there; while the `CmosRtc` lives no other code writes port 0x70
    /// (an index written between this type's index write and its data read would make it
    /// read another register: mask interrupts whose handlers touch the CMOS, or leave the
    /// CMOS to this type), and nobody writes the RTC's registers.
    pub unsafe fn new(century_register: Option<u8>) -> CmosRtc {
        CmosRtc {
            century: century_register.filter(|r| *r != 0),
            last_ms: 0,
        }
    }

    fn register(&mut self, index: u8) -> u8 {
        // SAFETY: `new`'s contract: I/O privilege and sole use of ports 0x70/0x71. Reading a
        // CMOS register has no side effect (registers C, which acknowledges interrupts, is
        // never read here).
        unsafe {
            outb(INDEX, index & 0x7f);
            inb(DATA)
        }
    }

    fn update_in_progress(&mut self) -> bool {
        self.register(STATUS_A) & UIP != 0
    }

    /// One read of the time registers after UIP has cleared.
    fn raw(&mut self) -> Raw {
        while self.update_in_progress() {
            core::hint::spin_loop();
        }
        self.registers()
    }

    /// [`CmosRtc::raw`] with the wait for UIP bounded: `None` once `give_up` says so.
    fn raw_within(&mut self, give_up: &mut impl FnMut() -> bool) -> Option<Raw> {
        while self.update_in_progress() {
            if give_up() {
                return None;
            }
            core::hint::spin_loop();
        }
        Some(self.registers())
    }

    /// [`CmosRtc::read_unix_seconds`] with each wait for UIP bounded by `give_up`
    /// ([`CmosError::NotTicking`] once it says so).
    fn read_within(&mut self, mut give_up: impl FnMut() -> bool) -> Result<u64, CmosError> {
        let mut last = self.raw_within(&mut give_up).ok_or(CmosError::NotTicking)?;
        for _ in 0..SETTLE_TRIES {
            let again = self.raw_within(&mut give_up).ok_or(CmosError::NotTicking)?;
            if again == last {
                return again.unix_seconds();
            }
            last = again;
        }
        Err(CmosError::Unsettled)
    }

    /// The time registers, read once.
    fn registers(&mut self) -> Raw {
        Raw {
            seconds: self.register(SECONDS),
            minutes: self.register(MINUTES),
            hours: self.register(HOURS),
            day: self.register(DAY),
            month: self.register(MONTH),
            year: self.register(YEAR),
            century: self.century.map(|r| (r, self.register(r))),
            status_b: self.register(STATUS_B),
        }
    }

    /// The time the RTC shows, in Unix seconds: read by the update-in-progress rule until two
    /// reads agree. Errors: [`CmosError::BadBcd`], [`CmosError::BadDate`] for registers that
    /// hold no date, [`CmosError::Unsettled`] if no two reads agreed in 16.
    ///
    /// The wait for UIP to clear is at most the update cycle (under 2 ms) on a working RTC;
    /// an RTC stuck in an update hangs it, as it hangs Linux's `mc146818_get_time`.
    pub fn read_unix_seconds(&mut self) -> Result<u64, CmosError> {
        let mut last = self.raw();
        for _ in 0..SETTLE_TRIES {
            let again = self.raw();
            if again == last {
                return again.unix_seconds();
            }
            last = again;
        }
        Err(CmosError::Unsettled)
    }

    /// Waits for the RTC's next seconds edge and returns it: the second that began, and
    /// `clock`'s readings before the last read that saw the previous second (or UIP set)
    /// and after the first that saw the new one. The edge lies between them; set a
    /// [`baretime::WallClock`] from it with `set_at_edge`. An interrupt (or a vCPU preempted)
    /// during the poll widens the bracket: poll with interrupts masked, or check
    /// [`SecondsEdge::width_ns`](baretime::SecondsEdge::width_ns) and read the next edge.
    ///
    /// Gives up with [`CmosError::NotTicking`] at the first poll that finds more than 1.2 s
    /// of `clock` time gone (a second, the update cycle, a 100 ms margin), so the wait
    /// overshoots 1.2 s by up to one poll (a clock read and a few port reads), or after 2^22
    /// polls (8–16 s), whichever comes first: a [`Clock`] not started yet (its time stands at
    /// zero) never reaches 1.2 s, and the poll count ends the wait there. The full read that
    /// follows the edge ([`CmosRtc::read_unix_seconds`]'s, with its errors) waits for UIP
    /// under the same limit, so an update bit stuck set after the edge is `NotTicking`, not
    /// a hang. The time is computed from the date registers into a `u64`: no wrap in 2106.
    /// The poll is [`SecondsEdge::measure`]'s, over UIP and the seconds register.
    pub fn read_at_edge<C: Counter>(&mut self, clock: &Clock<C>) -> Result<SecondsEdge, CmosError> {
        let start = clock.now();
        let edge = SecondsEdge::measure(clock, REFERENCE_POLLS, || {
            if self.update_in_progress() {
                None // the registers have not changed yet
            } else {
                Some(u64::from(self.register(SECONDS)))
            }
        })
        .ok_or(CmosError::NotTicking)?;
        // The full read follows the edge by microseconds: its second is the new one, unless
        // it raced the next edge (a second later: not here). It waits for UIP under the same
        // limits.
        let mut polls = 0u32;
        let unix_seconds = self.read_within(|| {
            polls = polls.saturating_add(1);
            polls > REFERENCE_POLLS
                || clock.now().saturating_duration_since(start).as_nanos()
                    > u128::from(EDGE_WAIT_NS)
        })?;
        Ok(SecondsEdge {
            unix_seconds,
            ..edge
        })
    }
}

impl Reference for CmosRtc {
    /// Waits for the next seconds edge (at most 2^22 polls) and returns its
    /// Unix time in milliseconds: the count is latched at the edge, the end of the read. The
    /// previous count if no edge came or the time was unreadable (a calibration then ends
    /// in `ReferenceStuck`, never a wrong rate); 0 if no read has found an edge yet.
    fn read(&mut self) -> u64 {
        let mut polls = 0u32;
        let mut give_up = || {
            polls = polls.saturating_add(1);
            polls > REFERENCE_POLLS
        };
        let mut first = None;
        while !give_up() {
            if self.update_in_progress() {
                continue;
            }
            let seconds = self.register(SECONDS);
            match first {
                None => first = Some(seconds),
                Some(s) if s != seconds => {
                    // The full read, under the same poll limit, just after the edge.
                    let full = self.read_within(&mut give_up);
                    if let Some(ms) = full.ok().and_then(|s| s.checked_mul(1_000)) {
                        self.last_ms = ms;
                    }
                    break;
                }
                Some(_) => {}
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
        "cmos_rtc"
    }
}
