//! UDP header view (RFC 768).

use super::{be16, put16, WireError};

/// Length of the header.
pub const HEADER_LEN: usize = 8;

/// Byte offsets and ranges of the header's fields.
pub mod field {
    use core::ops::Range;
    /// Source port.
    pub const SRC_PORT: Range<usize> = 0..2;
    /// Destination port.
    pub const DST_PORT: Range<usize> = 2..4;
    /// Both ports.
    pub const PORTS: Range<usize> = 0..4;
    /// Length, header included.
    pub const LENGTH: Range<usize> = 4..6;
    /// Checksum (0: none, IPv4 and tunnels only).
    pub const CHECKSUM: usize = 6;
}

/// A view of a UDP header at the start of `buf`.
#[derive(Debug, Clone, Copy)]
pub struct Udp<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Udp<T> {
    /// Checks that the 8-byte header is present.
    pub fn new_checked(buf: T) -> Result<Self, WireError> {
        if buf.as_ref().len() < HEADER_LEN {
            return Err(WireError::truncated(
                "UDP",
                "header",
                HEADER_LEN,
                buf.as_ref().len(),
            ));
        }
        Ok(Udp { buf })
    }
    /// A view without checks.
    pub fn new_unchecked(buf: T) -> Self {
        Udp { buf }
    }
    /// Source port.
    pub fn src_port(&self) -> u16 {
        be16(self.buf.as_ref(), field::SRC_PORT.start)
    }
    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        be16(self.buf.as_ref(), field::DST_PORT.start)
    }
    /// The length field (header + payload; 0 for jumbograms).
    pub fn length(&self) -> u16 {
        be16(self.buf.as_ref(), field::LENGTH.start)
    }
    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        be16(self.buf.as_ref(), field::CHECKSUM)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Udp<T> {
    /// Writes the length.
    pub fn set_length(&mut self, v: u16) {
        put16(self.buf.as_mut(), field::LENGTH.start, v)
    }
    /// Writes the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        put16(self.buf.as_mut(), field::CHECKSUM, v)
    }
    /// Writes both ports.
    pub fn set_ports(&mut self, src: u16, dst: u16) {
        put16(self.buf.as_mut(), field::SRC_PORT.start, src);
        put16(self.buf.as_mut(), field::DST_PORT.start, dst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields() {
        let h = [0x12, 0x34, 0x12, 0xb5, 0, 20, 0xab, 0xcd];
        let u = Udp::new_checked(&h[..]).unwrap();
        assert_eq!(
            (u.src_port(), u.dst_port(), u.length(), u.checksum()),
            (0x1234, 4789, 20, 0xabcd)
        );
        assert!(Udp::new_checked(&h[..7]).is_err());
    }
}
