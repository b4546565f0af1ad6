//! TCP header view (RFC 9293) with options.
//!
//! ```text
//!  0               16              31
//!  |  source port  |   dest port   |
//!  |        sequence number        |
//!  |     acknowledgment number     |
//!  |doff|rsv|flags |    window     |   <- "flag word" (tcp_flag_word)
//!  |   checksum    |  urgent ptr   |
//!  |        options (doff*4-20)    |
//! ```

use super::{be16, be32, put16, put32, WireError};

pub const MIN_HEADER_LEN: usize = 20;

/// TCP flag bits within the flag byte (byte 13).
pub mod flags {
    pub const FIN: u8 = 0x01;
    pub const SYN: u8 = 0x02;
    pub const RST: u8 = 0x04;
    pub const PSH: u8 = 0x08;
    pub const ACK: u8 = 0x10;
    pub const URG: u8 = 0x20;
    pub const ECE: u8 = 0x40;
    pub const CWR: u8 = 0x80;
}

/// Bits of the 32-bit flag word (`TCP_FLAG_*` in `include/net/tcp.h`).
pub mod flag_word {
    pub const FIN: u32 = 0x0001_0000;
    pub const SYN: u32 = 0x0002_0000;
    pub const RST: u32 = 0x0004_0000;
    pub const PSH: u32 = 0x0008_0000;
    pub const ACK: u32 = 0x0010_0000;
    pub const URG: u32 = 0x0020_0000;
    pub const ECE: u32 = 0x0040_0000;
    pub const CWR: u32 = 0x0080_0000;
    pub const WINDOW: u32 = 0x0000_ffff;
    pub const DATA_OFFSET: u32 = 0xf000_0000;
    pub const RESERVED: u32 = 0x0f00_0000;
}

/// Option kinds.
pub mod option {
    pub const END: u8 = 0;
    pub const NOP: u8 = 1;
    pub const MSS: u8 = 2;
    pub const WSCALE: u8 = 3;
    pub const SACK_PERM: u8 = 4;
    pub const SACK: u8 = 5;
    pub const TIMESTAMP: u8 = 8;
}

/// A view of a TCP header at the start of `buf`.
#[derive(Debug, Clone, Copy)]
pub struct Tcp<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Tcp<T> {
    /// Checks data offset ≥ 5 and that the header with options is present.
    pub fn new_checked(buf: T) -> Result<Self, WireError> {
        let b = buf.as_ref();
        if b.len() < MIN_HEADER_LEN {
            return Err(WireError::truncated(
                "TCP",
                "header",
                MIN_HEADER_LEN,
                b.len(),
            ));
        }
        let doff = (b[12] >> 4) as usize * 4;
        if doff < MIN_HEADER_LEN {
            return Err(WireError::invalid(
                "TCP",
                "data offset",
                (b[12] >> 4) as u64,
                "5 to 15",
            ));
        }
        if b.len() < doff {
            return Err(WireError::truncated("TCP", "options", doff, b.len()));
        }
        Ok(Tcp { buf })
    }
    pub fn new_unchecked(buf: T) -> Self {
        Tcp { buf }
    }
    #[inline]
    fn b(&self) -> &[u8] {
        self.buf.as_ref()
    }
    pub fn src_port(&self) -> u16 {
        be16(self.b(), 0)
    }
    pub fn dst_port(&self) -> u16 {
        be16(self.b(), 2)
    }
    /// Source and destination port as one word (what GRO compares).
    pub fn port_word(&self) -> u32 {
        be32(self.b(), 0)
    }
    pub fn seq(&self) -> u32 {
        be32(self.b(), 4)
    }
    pub fn ack(&self) -> u32 {
        be32(self.b(), 8)
    }
    pub fn header_len(&self) -> usize {
        (self.b()[12] >> 4) as usize * 4
    }
    pub fn flags(&self) -> u8 {
        self.b()[13]
    }
    /// Data offset, reserved bits, flags and window (`tcp_flag_word`).
    pub fn flag_word(&self) -> u32 {
        be32(self.b(), 12)
    }
    pub fn window(&self) -> u16 {
        be16(self.b(), 14)
    }
    pub fn checksum(&self) -> u16 {
        be16(self.b(), 16)
    }
    pub fn urgent(&self) -> u16 {
        be16(self.b(), 18)
    }
    /// The option bytes.
    pub fn options(&self) -> &[u8] {
        &self.b()[MIN_HEADER_LEN..self.header_len()]
    }
    /// TSval/TSecr of the timestamp option, if present and well formed.
    pub fn timestamps(&self) -> Option<(u32, u32)> {
        let o = self.options();
        let mut i = 0;
        while i < o.len() {
            match o[i] {
                option::END => return None,
                option::NOP => i += 1,
                kind => {
                    let len = *o.get(i + 1)? as usize;
                    if len < 2 || i + len > o.len() {
                        return None;
                    }
                    if kind == option::TIMESTAMP && len == 10 {
                        return Some((be32(o, i + 2), be32(o, i + 6)));
                    }
                    i += len;
                }
            }
        }
        None
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Tcp<T> {
    pub fn set_seq(&mut self, v: u32) {
        put32(self.buf.as_mut(), 4, v)
    }
    pub fn set_ack(&mut self, v: u32) {
        put32(self.buf.as_mut(), 8, v)
    }
    pub fn set_flags(&mut self, v: u8) {
        self.buf.as_mut()[13] = v
    }
    pub fn set_window(&mut self, v: u16) {
        put16(self.buf.as_mut(), 14, v)
    }
    pub fn set_checksum(&mut self, v: u16) {
        put16(self.buf.as_mut(), 16, v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_fields_and_timestamp_option() {
        let mut h = [0u8; 32];
        h[0..4].copy_from_slice(&[0x1f, 0x90, 0xc3, 0x50]);
        h[4..8].copy_from_slice(&1000u32.to_be_bytes());
        h[8..12].copy_from_slice(&77u32.to_be_bytes());
        h[12] = 8 << 4;
        h[13] = flags::ACK | flags::PSH;
        h[14..16].copy_from_slice(&512u16.to_be_bytes());
        h[20..32].copy_from_slice(&[1, 1, 8, 10, 0, 0, 0, 5, 0, 0, 0, 9]);
        let t = Tcp::new_checked(&h[..]).unwrap();
        assert_eq!((t.src_port(), t.dst_port()), (8080, 50000));
        assert_eq!(
            (t.seq(), t.ack(), t.header_len(), t.window()),
            (1000, 77, 32, 512)
        );
        assert_eq!(t.flag_word() & flag_word::PSH, flag_word::PSH);
        assert_eq!(t.timestamps(), Some((5, 9)));
    }

    #[test]
    fn rejects_short_data_offset_and_missing_options() {
        let mut h = [0u8; 24];
        h[12] = 4 << 4;
        assert_eq!(Tcp::new_checked(&h[..]).unwrap_err().field, "data offset");
        h[12] = 8 << 4;
        assert_eq!(Tcp::new_checked(&h[..]).unwrap_err().field, "options");
    }

    #[test]
    fn malformed_options_do_not_panic() {
        let mut h = [0u8; 24];
        h[12] = 6 << 4;
        h[20..24].copy_from_slice(&[8, 0, 1, 1]);
        assert_eq!(Tcp::new_checked(&h[..]).unwrap().timestamps(), None);
        h[20..24].copy_from_slice(&[8, 10, 1, 1]);
        assert_eq!(Tcp::new_checked(&h[..]).unwrap().timestamps(), None);
    }
}
