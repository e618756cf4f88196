//! [`Pit`]: channel 2 of the 8254 programmable interval timer, the PC's oldest timer.
//!
//! Channel 2 is the one a kernel may borrow: channel 0 drives the legacy timer interrupt and
//! channel 2's output only reaches the PC speaker, behind the gate and enable bits of port
//! 0x61. Linux's `pit_calibrate_tsc` and `quick_pit_calibrate` use the same channel.

use crate::port::{inb, outb};
use crate::tolerance::PIT_TOLERANCE_PPB;
use baretime::Reference;
use baretime::{Accuracy, Frequency, Source};

/// Channel 2's data port.
const CHANNEL2: u16 = 0x42;
/// Mode/command register.
const COMMAND: u16 = 0x43;
/// NMI status and control: bit 0 gates channel 2, bit 1 connects its output to the speaker.
const GATE: u16 = 0x61;
/// Command: channel 2 (bits 7:6 = 10), low then high byte (5:4 = 11), mode 2 rate generator
/// (3:1 = 010), binary (0).
const CMD_CH2_LOHI_MODE2: u8 = 0b1011_0100;
/// Command: latch channel 2's count (bits 7:6 = 10, 5:4 = 00).
const CMD_CH2_LATCH: u8 = 0b1000_0000;

/// The PIT's input clock: the PC's 14.31818 MHz colour-burst crystal divided by 12, that is
/// 1 193 181.818… Hz, given to the millihertz (1 193 181 818 mHz).
pub(crate) const PIT_MILLIHZ: u64 = 1_193_181_818;

const PIT_FREQUENCY: Frequency = const_frequency!(
    millihz: PIT_MILLIHZ,
    Source::Reference,
    Accuracy::Nominal {
        tolerance_ppb: PIT_TOLERANCE_PPB,
    }
);

/// Channel 2 of the 8254 PIT as a 16-bit [`Reference`] at 1.193182 MHz.
///
/// [`Pit::new`] programs the channel as a rate generator (mode 2) with the largest reload
/// (65 536), so it counts down forever through every 16-bit value; [`Reference::read`]
/// latches the count, reads it (three port accesses, about 2–3 µs on real hardware) and
/// inverts it so that it counts up. The count wraps every 54.9 ms, which the calibrator
/// unwraps as long as it reads more often than that.
///
/// The rate is the platform's definition, but the crystal behind it is a board's, and a
/// calibration against the PIT is only as good as that crystal: the rate is stated as
/// [`Accuracy::Nominal`] with a tolerance of 100 ppm, which calibration adds to its
/// bound, so that a PIT a few dozen ppm off neither makes a measurement look better than it
/// is nor overrules an exact CPUID 0x15 claim (Linux, too, trusts 0x15 over a PIT
/// calibration). State a tighter (or looser) tolerance with [`baretime::WithAccuracy`] when the
/// board's is known. (QEMU emulates the PIT at 1 193 182 Hz, 0.15 ppm above the definition.)
#[derive(Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Pit {
    _private: (),
}

impl Pit {
    /// Takes over PIT channel 2: opens its gate, disconnects the speaker, and starts it
    /// counting down from 65 536 in mode 2.
    ///
    /// # Safety
    ///
    /// - The CPU runs with I/O privilege for ports 0x42, 0x43 and 0x61 (CPL 0, or IOPL 3, or
    ///   an I/O bitmap that allows them), and the machine has a PC-compatible 8254 there.
    /// - While the `Pit` lives, no other code touches channel 2, port 0x61's low bits, or the
    ///   PIT's command port 0x43: a command written between this type's latch and its two
    ///   data reads (say, by an interrupt handler reprogramming channel 0) would corrupt the
    ///   read. Run calibration with such interrupts masked, as early-boot code does anyway.
    pub unsafe fn new() -> Pit {
        // Setting bit 0 of 0x61 enables channel 2's gate, clearing bit 1 keeps its output away
        // from the speaker; the other bits are written back as read. The command selects
        // channel 2, mode 2, and the two data writes load the reload value 0 (65 536).
        // SAFETY: the caller guarantees I/O privilege and exclusive use of ports 0x42, 0x43
        // and 0x61 (# Safety); these writes touch nothing else.
        unsafe {
            let gate = inb(GATE);
            outb(GATE, (gate & !0x02) | 0x01);
            outb(COMMAND, CMD_CH2_LOHI_MODE2);
            outb(CHANNEL2, 0);
            outb(CHANNEL2, 0);
        }
        Pit { _private: () }
    }

    /// Latches and reads channel 2's count as the 8254 has it: counting *down*.
    pub(crate) fn read_down(&mut self) -> u16 {
        // The latch command freezes the count for the two byte reads that follow (low byte
        // first, as programmed), so the pair is consistent.
        // SAFETY: `self` exists, so `new`'s contract holds: we have I/O privilege and sole use
        // of ports 0x42/0x43.
        let (lo, hi) = unsafe {
            outb(COMMAND, CMD_CH2_LATCH);
            (inb(CHANNEL2), inb(CHANNEL2))
        };
        u16::from_le_bytes([lo, hi])
    }
}

impl Reference for Pit {
    /// The latched count, inverted to count up (`0xFFFF - down`, i.e. `!down`).
    fn read(&mut self) -> u64 {
        u64::from(!self.read_down())
    }

    fn bits(&self) -> u32 {
        16
    }

    fn frequency(&self) -> Frequency {
        PIT_FREQUENCY
    }

    fn name(&self) -> &'static str {
        "pit"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_is_crystal_over_twelve() {
        // The crystal is 4 × the NTSC colour burst, 4 × 315/88 MHz = 14.318181… MHz, and
        // 315 000 000 000 mHz / 22 / 12 = 1 193 181 818.18… mHz.
        assert_eq!(PIT_FREQUENCY.as_millihz(), 315_000_000_000 / 22 / 12);
        assert_eq!(PIT_FREQUENCY.as_hz(), 1_193_182);
        assert_eq!(
            PIT_FREQUENCY.accuracy(),
            Accuracy::Nominal {
                tolerance_ppb: 100_000
            }
        );
    }
}
