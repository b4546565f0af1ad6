//! Typed, zero-copy views over packet bytes, one module per header.
//!
//! Each view wraps any `T: AsRef<[u8]>` (read) or `AsMut<[u8]>` (write) and
//! has a checked constructor (`new_checked`) that verifies the *header* is
//! present. Views never require the payload to be complete: captures are
//! often cut by a snap length, and BIG TCP / TSO frames carry an IPv4 total
//! length of 0 or an IPv6 payload length of 0 with a Jumbo option. Accessors
//! report what the header says; [`crate::packet`] relates it to the bytes.
//!
//! ```text
//!  link (Ethernet / 802.1Q / QinQ / SLL / SLL2 / raw)
//!   └─ IPv4 (options) | IPv6 (extension headers, Hop-by-Hop Jumbo)
//!       └─ TCP (options) | UDP ─ VXLAN ─ inner Ethernet ...
//! ```

pub mod ethernet;
pub mod geneve;
pub mod gre;
pub mod ipv4;
pub mod ipv6;
pub mod sll;
pub mod tcp;
pub mod udp;

use core::fmt;

/// Why a header could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireError {
    /// The header being read, e.g. `"IPv4"`.
    pub header: &'static str,
    /// The field that is short or inconsistent, e.g. `"ihl"`.
    pub field: &'static str,
    /// Byte offset of the header within the buffer handed to the view.
    pub offset: usize,
    /// What was wrong.
    pub kind: WireErrorKind,
}

/// The kind of a [`WireError`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireErrorKind {
    /// The buffer ends before the field does.
    Truncated { need: usize, have: usize },
    /// The field holds a value the header cannot have.
    Invalid { found: u64, expected: &'static str },
}

impl WireError {
    pub(crate) fn truncated(
        header: &'static str,
        field: &'static str,
        need: usize,
        have: usize,
    ) -> Self {
        WireError {
            header,
            field,
            offset: 0,
            kind: WireErrorKind::Truncated { need, have },
        }
    }

    pub(crate) fn invalid(
        header: &'static str,
        field: &'static str,
        found: u64,
        expected: &'static str,
    ) -> Self {
        WireError {
            header,
            field,
            offset: 0,
            kind: WireErrorKind::Invalid { found, expected },
        }
    }

    /// The same error, with its offset moved by `base` (for nested headers).
    pub fn at(mut self, base: usize) -> Self {
        self.offset += base;
        self
    }
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            WireErrorKind::Truncated { need, have } => write!(
                f,
                "{} header at byte {}: field {} needs {} bytes, only {} present",
                self.header, self.offset, self.field, need, have
            ),
            WireErrorKind::Invalid { found, expected } => write!(
                f,
                "{} header at byte {}: field {} = {} (expected {})",
                self.header, self.offset, self.field, found, expected
            ),
        }
    }
}

impl std::error::Error for WireError {}

#[inline]
pub(crate) fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

#[inline]
pub(crate) fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

#[inline]
pub(crate) fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

#[inline]
pub(crate) fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_be_bytes());
}
