//! UDP header view (RFC 768).

use super::{be16, put16, WireError};

pub const HEADER_LEN: usize = 8;

/// A view of a UDP header at the start of `buf`.
#[derive(Debug, Clone, Copy)]
pub struct Udp<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Udp<T> {
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
    pub fn new_unchecked(buf: T) -> Self {
        Udp { buf }
    }
    pub fn src_port(&self) -> u16 {
        be16(self.buf.as_ref(), 0)
    }
    pub fn dst_port(&self) -> u16 {
        be16(self.buf.as_ref(), 2)
    }
    /// The length field (header + payload; 0 for jumbograms).
    pub fn length(&self) -> u16 {
        be16(self.buf.as_ref(), 4)
    }
    pub fn checksum(&self) -> u16 {
        be16(self.buf.as_ref(), 6)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Udp<T> {
    pub fn set_length(&mut self, v: u16) {
        put16(self.buf.as_mut(), 4, v)
    }
    pub fn set_checksum(&mut self, v: u16) {
        put16(self.buf.as_mut(), 6, v)
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
