//! The one error type of the crate: where in which file, which field, and what is wrong.
//!
//! Every error names the file, the byte offset of the structure being read (or
//! written), the frame number when the structure is a packet record (1-based,
//! numbered the way Wireshark numbers them), the structure and field, and a
//! [`ErrorKind`] carrying the numbers involved, so that a message such as
//!
//! ```text
//! in.pcap: frame 17 at byte 123456: record header field caplen = 4294967295 exceeds the remaining 80 bytes
//! ```
//!
//! can be printed without the caller knowing the file format.

use std::fmt;
use std::io;

use crate::LinkType;

/// What went wrong; the numbers are the ones read from (or meant for) the file.
#[derive(Debug)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The operating system failed a read, write, open or seek.
    Io(io::Error),
    /// The file ends inside a structure: `available` of its `needed` bytes are present.
    Truncated {
        /// Bytes the structure needs.
        needed: u64,
        /// Bytes the file still had.
        available: u64,
    },
    /// A length field is larger than what is left of the file (known size only).
    ExceedsRemaining {
        /// The length read.
        value: u64,
        /// Bytes left in the file after the field's structure header.
        remaining: u64,
    },
    /// A captured length is larger than the room its pcapng block has for data.
    ExceedsBlock {
        /// The captured length read.
        value: u64,
        /// Bytes the block has after its fixed fields.
        room: u64,
    },
    /// A captured length is larger than the snapshot length declared for it.
    ExceedsSnaplen {
        /// The captured length read.
        value: u64,
        /// The snapshot length of the file or interface.
        snaplen: u32,
    },
    /// A length is larger than this crate accepts (see [`crate::MAX_FRAME_LEN`]).
    TooLarge {
        /// The length read or given.
        value: u64,
        /// The largest accepted value.
        max: u64,
    },
    /// A length is smaller than the structure's fixed part.
    TooSmall {
        /// The length read.
        value: u64,
        /// The smallest valid value.
        min: u64,
    },
    /// A pcapng block length is not a multiple of 4.
    NotMultipleOf4 {
        /// The length read.
        value: u64,
    },
    /// The length at the end of a pcapng block differs from the one at its start.
    TrailingLengthMismatch {
        /// Length at the start of the block.
        leading: u32,
        /// Length at the end of the block.
        trailing: u32,
    },
    /// The first four bytes are neither a pcap nor a pcapng magic number.
    UnknownMagic {
        /// The magic as read, big-endian.
        magic: u32,
    },
    /// A version this reader does not understand.
    UnsupportedVersion {
        /// Major version.
        major: u16,
        /// Minor version.
        minor: u16,
    },
    /// A packet block names an interface that its section never declared.
    UnknownInterface {
        /// Interface id in the block (section-relative).
        interface: u32,
        /// Number of interfaces the section declared so far.
        declared: u32,
    },
    /// A field holds a value that has no meaning.
    InvalidValue {
        /// The value read or given.
        value: u64,
        /// Why it is invalid.
        reason: &'static str,
    },
    /// A timestamp does not fit the nanosecond range of the API (`i64` nanoseconds
    /// since 1970, years 1677 to 2262) or of the output format.
    TimestampOutOfRange {
        /// The timestamp in the units of its source.
        value: i128,
    },
    /// The pcap writer got a frame whose link type differs from the file's.
    LinkTypeMismatch {
        /// Link type of the file.
        file: LinkType,
        /// Link type of the frame.
        frame: LinkType,
    },
    /// The output path has no extension that names a capture format.
    UnknownExtension,
}

/// Where and what: the content of a [`CaptureError`].
#[derive(Debug)]
pub struct ErrorDetail {
    /// File name (or the name given to a reader/writer built on a stream).
    pub file: String,
    /// 1-based number of the frame being read or written, `None` when the
    /// structure is not a packet record (file header, interface block, ...).
    pub frame: Option<u64>,
    /// Number of the last frame read or written before the error (0 if none).
    pub last_frame: u64,
    /// Byte offset of the structure's first byte in the file.
    pub offset: u64,
    /// The structure, e.g. `"record header"`, `"enhanced packet block"`.
    pub structure: &'static str,
    /// The field, e.g. `"caplen"`.
    pub field: &'static str,
    /// What is wrong.
    pub kind: ErrorKind,
}

/// An error while reading or writing a capture. See the module documentation.
///
/// The detail is boxed so that `Result<Option<Frame>, CaptureError>` stays
/// small on the per-frame return path; the fields are reached through `Deref`
/// (`err.frame`, `err.kind`, ...).
#[derive(Debug)]
pub struct CaptureError(Box<ErrorDetail>);

impl From<ErrorDetail> for CaptureError {
    fn from(d: ErrorDetail) -> CaptureError {
        CaptureError(Box::new(d))
    }
}

impl std::ops::Deref for CaptureError {
    type Target = ErrorDetail;
    fn deref(&self) -> &ErrorDetail {
        &self.0
    }
}

impl CaptureError {
    /// The detail, by value.
    pub fn into_detail(self) -> ErrorDetail {
        *self.0
    }

    /// True when the error is an I/O failure rather than bad content.
    pub fn is_io(&self) -> bool {
        matches!(self.kind, ErrorKind::Io(_))
    }
}

impl fmt::Display for CaptureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.file)?;
        let (s, fld) = (self.structure, self.field);
        if let ErrorKind::Io(e) = &self.kind {
            // Opening or creating failed: there is no position to name.
            match (s, fld) {
                ("file", "open") => return write!(f, "cannot open: {e}"),
                ("output file", "create") => {
                    return write!(f, "cannot create the output file: {e}")
                }
                _ => {}
            }
        }
        match self.frame {
            Some(n) => write!(f, "frame {n} at byte {}: ", self.offset)?,
            None if self.last_frame > 0 => write!(
                f,
                "at byte {} (after frame {}): ",
                self.offset, self.last_frame
            )?,
            None if self.offset == 0 => {}
            None => write!(f, "at byte {}: ", self.offset)?,
        }
        match &self.kind {
            ErrorKind::Io(e) => write!(f, "{s} {fld}: I/O error: {e}"),
            ErrorKind::Truncated { needed, available } => write!(
                f,
                "{s} {fld} is cut short: the file ends after {available} of its {needed} bytes"
            ),
            ErrorKind::ExceedsBlock { value, room } => write!(
                f,
                "{s} field {fld} = {value} exceeds the {room} bytes of packet data the block holds"
            ),
            ErrorKind::ExceedsRemaining { value, remaining } => write!(
                f,
                "{s} field {fld} = {value} exceeds the remaining {remaining} bytes"
            ),
            ErrorKind::ExceedsSnaplen { value, snaplen } => write!(
                f,
                "{s} field {fld} = {value} exceeds the snapshot length {snaplen}"
            ),
            ErrorKind::TooLarge { value, max } => write!(
                f,
                "{s} field {fld} = {value} is larger than the maximum {max} this reader accepts"
            ),
            ErrorKind::TooSmall { value, min } => write!(
                f,
                "{s} field {fld} = {value} is smaller than the minimum {min}"
            ),
            ErrorKind::NotMultipleOf4 { value } => {
                write!(f, "{s} field {fld} = {value} is not a multiple of 4")
            }
            ErrorKind::TrailingLengthMismatch { leading, trailing } => write!(
                f,
                "{s} field {fld} = {trailing} differs from the leading block length {leading}"
            ),
            ErrorKind::UnknownMagic { magic } => write!(
                f,
                "{s} field {fld} = 0x{magic:08x} is not a pcap or pcapng magic number"
            ),
            ErrorKind::UnsupportedVersion { major, minor } => {
                write!(f, "{s} field {fld} = {major}.{minor} is not a supported version")
            }
            ErrorKind::UnknownInterface { interface, declared } => write!(
                f,
                "{s} field {fld} = {interface} names an interface never declared (the section declared {declared})"
            ),
            ErrorKind::InvalidValue { value, reason } => {
                write!(f, "{s} field {fld} = {value} is invalid: {reason}")
            }
            ErrorKind::TimestampOutOfRange { value } if fld == "ts_sec" => write!(
                f,
                "{s} field {fld}: timestamp {value} ns is outside what pcap can hold \
                 (seconds 0 to 2^32-1, 1970 to 2106); write .pcapng instead"
            ),
            ErrorKind::TimestampOutOfRange { value } => write!(
                f,
                "{s} field {fld} = {value} is outside the representable time range"
            ),
            ErrorKind::LinkTypeMismatch { file, frame } => write!(
                f,
                "{s} field {fld} = {frame} differs from the file's link type {file} (pcap holds one link type; write pcapng for several)"
            ),
            ErrorKind::UnknownExtension => write!(
                f,
                "{s} {fld}: the extension names no capture format (use .pcap, .cap or .pcapng)"
            ),
        }
    }
}

impl std::error::Error for CaptureError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            ErrorKind::Io(e) => Some(e),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_matches_the_documented_shape() {
        let e = CaptureError::from(ErrorDetail {
            file: "in.pcap".into(),
            frame: Some(17),
            last_frame: 16,
            offset: 123456,
            structure: "record header",
            field: "caplen",
            kind: ErrorKind::ExceedsRemaining {
                value: 4294967295,
                remaining: 80,
            },
        });
        assert_eq!(
            e.to_string(),
            "in.pcap: frame 17 at byte 123456: record header field caplen = 4294967295 exceeds the remaining 80 bytes"
        );
    }

    #[test]
    fn display_without_frame_names_the_previous_frame() {
        let e = CaptureError::from(ErrorDetail {
            file: "x.pcapng".into(),
            frame: None,
            last_frame: 3,
            offset: 400,
            structure: "block",
            field: "block_total_length",
            kind: ErrorKind::NotMultipleOf4 { value: 33 },
        });
        assert_eq!(
            e.to_string(),
            "x.pcapng: at byte 400 (after frame 3): block field block_total_length = 33 is not a multiple of 4"
        );
    }

    #[test]
    fn io_errors_expose_their_source() {
        let e = CaptureError::from(ErrorDetail {
            file: "f".into(),
            frame: None,
            last_frame: 0,
            offset: 0,
            structure: "file",
            field: "open",
            kind: ErrorKind::Io(io::Error::other("boom")),
        });
        assert!(e.is_io());
        assert!(std::error::Error::source(&e).is_some());
    }
}
