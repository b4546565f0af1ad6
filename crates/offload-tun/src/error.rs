//! The crate's error type: each variant names the device and the operation
//! or packet that failed, because "EINVAL" alone says nothing about which
//! ioctl or which write the kernel refused.

use std::io;

use offload::gso::GsoError;
use offload::vnet::VnetError;

/// Result alias of this crate.
pub type Result<T, E = TunError> = std::result::Result<T, E>;

/// What can go wrong with a TUN/TAP device.
#[derive(Debug, thiserror::Error)]
pub enum TunError {
    /// A system call failed.
    #[error("{op} on {dev}: {source}")]
    Os {
        /// The operation, e.g. `"TUNSETIFF"` or `"write"`.
        op: &'static str,
        /// The device name (or `/dev/net/tun` before it has one).
        dev: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// An option or argument the crate does not accept.
    #[error("invalid option: {0}")]
    InvalidOption(String),
    /// The fd is attached to a device in a mode this crate does not handle.
    #[error("{dev}: unsupported device mode: {what}")]
    Unsupported {
        /// The device name.
        dev: String,
        /// What is unsupported.
        what: &'static str,
    },
    /// A packet read from the device is shorter than its vnet header.
    #[error("{dev}: read {len} bytes, shorter than the {hdr_len}-byte virtio_net_hdr")]
    ShortRead {
        /// The device name.
        dev: String,
        /// Bytes read.
        len: usize,
        /// Configured header length.
        hdr_len: usize,
    },
    /// The kernel's `virtio_net_hdr` does not fit the packet it came with.
    #[error("{dev}: packet of {len} bytes: {source}")]
    BadVnetHeader {
        /// The device name.
        dev: String,
        /// Packet length (without the vnet header).
        len: usize,
        /// What is wrong.
        #[source]
        source: VnetError,
    },
    /// A super-packet could not be segmented.
    #[error("{dev}: packet of {len} bytes could not be segmented: {source}")]
    Segment {
        /// The device name (or `"coalescer"` on the write side).
        dev: String,
        /// Packet length.
        len: usize,
        /// Why.
        #[source]
        source: GsoError,
    },
}

impl TunError {
    pub(crate) fn os(op: &'static str, dev: &str, source: io::Error) -> Self {
        TunError::Os {
            op,
            dev: dev.to_string(),
            source,
        }
    }

    /// The OS error number, when the failure was a system call.
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            TunError::Os { source, .. } => source.raw_os_error(),
            _ => None,
        }
    }
}
