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

/// Length of a header without options.
pub const MIN_HEADER_LEN: usize = 20;

/// Byte offsets and ranges of the header's fields.
pub mod field {
    use core::ops::Range;
    /// Source port.
    pub const SRC_PORT: Range<usize> = 0..2;
    /// Destination port.
    pub const DST_PORT: Range<usize> = 2..4;
    /// Both ports: the flow key's transport part.
    pub const PORTS: Range<usize> = 0..4;
    /// Sequence number.
    pub const SEQ: Range<usize> = 4..8;
    /// Acknowledgment number.
    pub const ACK: Range<usize> = 8..12;
    /// Data offset (high nibble, in 4-byte words) and reserved bits.
    pub const DATA_OFFSET: usize = 12;
    /// The flag byte ([`super::flags`]).
    pub const FLAGS: usize = 13;
    /// Data offset, reserved bits, flags and window: `tcp_flag_word`.
    pub const FLAG_WORD: Range<usize> = 12..16;
    /// Receive window.
    pub const WINDOW: Range<usize> = 14..16;
    /// Checksum.
    pub const CHECKSUM: usize = 16;
    /// Urgent pointer.
    pub const URGENT: Range<usize> = 18..20;
    /// Start of the options.
    pub const OPTIONS: usize = 20;
}

/// The header length in bytes from the data offset of the header in `b`.
#[inline]
pub fn header_len(b: &[u8]) -> usize {
    (b[field::DATA_OFFSET] >> 4) as usize * 4
}

/// TCP flag bits within the flag byte ([`field::FLAGS`]).
pub mod flags {
    /// No more data (FIN).
    pub const FIN: u8 = 0x01;
    /// Synchronize sequence numbers.
    pub const SYN: u8 = 0x02;
    /// Reset.
    pub const RST: u8 = 0x04;
    /// Push.
    pub const PSH: u8 = 0x08;
    /// Acknowledgment field valid.
    pub const ACK: u8 = 0x10;
    /// Urgent pointer valid.
    pub const URG: u8 = 0x20;
    /// ECN echo.
    pub const ECE: u8 = 0x40;
    /// Congestion window reduced.
    pub const CWR: u8 = 0x80;
}

/// Bits of the 32-bit flag word (`TCP_FLAG_*` in `include/net/tcp.h`).
pub mod flag_word {
    /// No more data (FIN).
    pub const FIN: u32 = 0x0001_0000;
    /// Synchronize sequence numbers.
    pub const SYN: u32 = 0x0002_0000;
    /// Reset.
    pub const RST: u32 = 0x0004_0000;
    /// Push.
    pub const PSH: u32 = 0x0008_0000;
    /// Acknowledgment field valid.
    pub const ACK: u32 = 0x0010_0000;
    /// Urgent pointer valid.
    pub const URG: u32 = 0x0020_0000;
    /// ECN echo.
    pub const ECE: u32 = 0x0040_0000;
    /// Congestion window reduced.
    pub const CWR: u32 = 0x0080_0000;
    /// The window.
    pub const WINDOW: u32 = 0x0000_ffff;
    /// The data offset.
    pub const DATA_OFFSET: u32 = 0xf000_0000;
    /// The reserved bits (AccECN's AE among them).
    pub const RESERVED: u32 = 0x0f00_0000;
}

/// Option kinds.
pub mod option {
    /// End of option list.
    pub const END: u8 = 0;
    /// No operation (padding).
    pub const NOP: u8 = 1;
    /// Maximum segment size.
    pub const MSS: u8 = 2;
    /// Window scale.
    pub const WSCALE: u8 = 3;
    /// SACK permitted.
    pub const SACK_PERM: u8 = 4;
    /// Selective acknowledgment blocks.
    pub const SACK: u8 = 5;
    /// Timestamps (TSval, TSecr).
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
        let doff = header_len(b);
        if doff < MIN_HEADER_LEN {
            return Err(WireError::invalid(
                "TCP",
                "data offset",
                (b[field::DATA_OFFSET] >> 4) as u64,
                "5 to 15",
            ));
        }
        if b.len() < doff {
            return Err(WireError::truncated("TCP", "options", doff, b.len()));
        }
        Ok(Tcp { buf })
    }
    /// A view without checks; accessors may panic if the header is short.
    pub fn new_unchecked(buf: T) -> Self {
        Tcp { buf }
    }
    #[inline]
    fn b(&self) -> &[u8] {
        self.buf.as_ref()
    }
    /// Source port.
    pub fn src_port(&self) -> u16 {
        be16(self.b(), field::SRC_PORT.start)
    }
    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        be16(self.b(), field::DST_PORT.start)
    }
    /// Source and destination port as one word (what GRO compares).
    pub fn port_word(&self) -> u32 {
        be32(self.b(), field::PORTS.start)
    }
    /// Sequence number.
    pub fn seq(&self) -> u32 {
        be32(self.b(), field::SEQ.start)
    }
    /// Acknowledgment number.
    pub fn ack(&self) -> u32 {
        be32(self.b(), field::ACK.start)
    }
    /// Header length in bytes, options included.
    pub fn header_len(&self) -> usize {
        header_len(self.b())
    }
    /// The flag byte ([`flags`]).
    pub fn flags(&self) -> u8 {
        self.b()[field::FLAGS]
    }
    /// Data offset, reserved bits, flags and window (`tcp_flag_word`).
    pub fn flag_word(&self) -> u32 {
        be32(self.b(), field::FLAG_WORD.start)
    }
    /// Receive window.
    pub fn window(&self) -> u16 {
        be16(self.b(), field::WINDOW.start)
    }
    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        be16(self.b(), field::CHECKSUM)
    }
    /// Urgent pointer.
    pub fn urgent(&self) -> u16 {
        be16(self.b(), field::URGENT.start)
    }
    /// The option bytes.
    pub fn options(&self) -> &[u8] {
        &self.b()[field::OPTIONS..self.header_len()]
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
    /// Writes the sequence number.
    pub fn set_seq(&mut self, v: u32) {
        put32(self.buf.as_mut(), field::SEQ.start, v)
    }
    /// Writes the acknowledgment number.
    pub fn set_ack(&mut self, v: u32) {
        put32(self.buf.as_mut(), field::ACK.start, v)
    }
    /// Writes the flag byte.
    pub fn set_flags(&mut self, v: u8) {
        self.buf.as_mut()[field::FLAGS] = v
    }
    /// Writes the window.
    pub fn set_window(&mut self, v: u16) {
        put16(self.buf.as_mut(), field::WINDOW.start, v)
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
    /// Writes the data offset from a header length in bytes (a multiple of 4, 20 to 60).
    pub fn set_header_len(&mut self, len: usize) {
        self.buf.as_mut()[field::DATA_OFFSET] = ((len / 4) as u8) << 4;
    }
    /// Writes the urgent pointer.
    pub fn set_urgent(&mut self, v: u16) {
        put16(self.buf.as_mut(), field::URGENT.start, v)
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
