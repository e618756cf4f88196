//! COM1, the first 16550 UART at port 0x3F8: 115200 baud, 8N1, polled.

use super::port::{inb, outb};
use core::fmt;

const COM1: u16 = 0x3F8;
/// Line status register; bit 5: transmit holding register empty.
const LSR: u16 = COM1 + 5;

/// The serial port, for `write!`.
pub struct Serial(());

impl Serial {
    /// Programs COM1 (done once at boot; output then needs no state).
    pub fn init() -> Serial {
        // SAFETY: ring 0, and COM1 belongs to this kernel: nothing else drives the UART.
        unsafe {
            outb(COM1 + 1, 0x00); // no interrupts
            outb(COM1 + 3, 0x80); // DLAB: the next two bytes set the divisor
            outb(COM1, 0x01); // 115200 / 1
            outb(COM1 + 1, 0x00);
            outb(COM1 + 3, 0x03); // 8 bits, no parity, one stop bit
            outb(COM1 + 2, 0xC7); // FIFOs on and cleared
            outb(COM1 + 4, 0x03); // DTR, RTS
        }
        Serial(())
    }

    /// The already programmed port (for the panic handler).
    pub fn get() -> Serial {
        Serial(())
    }

    fn put(&mut self, byte: u8) {
        // SAFETY: ring 0; COM1 is this kernel's. Reading LSR has no side effect that matters
        // here, writing the data register sends the byte.
        unsafe {
            while inb(LSR) & 0x20 == 0 {
                core::hint::spin_loop();
            }
            outb(COM1, byte);
        }
    }
}

impl fmt::Write for Serial {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        crate::scenario::write_crlf(s, |b| self.put(b));
        Ok(())
    }
}
