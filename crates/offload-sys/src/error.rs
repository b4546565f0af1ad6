//! The crate's error type: every failure names the operation, device, file or
//! frame it concerns, because a lab or oracle failure is only actionable when
//! it says *which* knob or packet went wrong.

use std::io;

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong while building or driving a lab.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A system call failed. `op` says what was being attempted.
    #[error("{op}: {source}")]
    Sys {
        /// The operation, e.g. `"open /dev/net/tun"` or `"TUNSETIFF ofl0"`.
        op: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The kernel answered a netlink request with an error code.
    #[error("netlink {op}: {source}")]
    Netlink {
        /// The request, e.g. `"RTM_NEWLINK set gro_max_size=185000 on ofl0"`.
        op: String,
        /// The errno the kernel returned.
        #[source]
        source: io::Error,
    },
    /// A netlink reply could not be decoded or had an unexpected shape.
    #[error("netlink {op}: unexpected reply: {detail}")]
    NetlinkReply {
        /// The request that got the reply.
        op: String,
        /// What was wrong with it.
        detail: String,
    },
    /// A device does not exist in the namespace.
    #[error("no such device {0:?}")]
    NoDevice(String),
    /// A device name does not fit in `IFNAMSIZ` or holds a NUL byte.
    #[error("invalid interface name {0:?} (1..=15 bytes, no NUL)")]
    BadIfName(String),
    /// An ethtool feature name is not known to the device.
    #[error("device {dev}: no ethtool feature named {feature:?}")]
    NoFeature {
        /// Device name.
        dev: String,
        /// Feature name, e.g. `"rx-gro-list"`.
        feature: String,
    },
    /// An ethtool feature could not be switched to the requested state.
    #[error("device {dev}: feature {feature:?} stayed {actual} (wanted {wanted})")]
    FeatureRefused {
        /// Device name.
        dev: String,
        /// Feature name.
        feature: String,
        /// Requested state.
        wanted: bool,
        /// State after the request.
        actual: bool,
    },
    /// A knob read back with a different value than was written.
    #[error("{knob}: wrote {wanted}, read back {actual}")]
    KnobMismatch {
        /// Knob name, e.g. `"gro_ipv4_max_size of ofl0"`.
        knob: String,
        /// The value written.
        wanted: u64,
        /// The value read back.
        actual: u64,
    },
    /// A frame given to the oracle cannot be written to a TAP device.
    #[error("frame {index}: {reason}")]
    BadFrame {
        /// Position of the frame in the train.
        index: usize,
        /// Why it was rejected.
        reason: String,
    },
    /// Writing a frame to the TAP device failed or was short.
    #[error("frame {index} ({len} bytes): write to TAP failed: {source}")]
    FrameWrite {
        /// Position of the frame in the train.
        index: usize,
        /// Its length.
        len: usize,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A captured frame was larger than the receive buffer.
    #[error("captured frame of {len} bytes exceeds the {buf}-byte receive buffer")]
    Truncated {
        /// Real length reported by the kernel.
        len: usize,
        /// Buffer size.
        buf: usize,
    },
    /// Something expected from the kernel did not happen in time.
    #[error("timed out after {waited_ms} ms waiting for {what}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long.
        waited_ms: u64,
    },
    /// A helper thread that was running code inside the namespace panicked.
    #[error("namespace helper thread panicked: {0}")]
    ThreadPanicked(String),
    /// A knob value is outside what the kernel accepts.
    #[error("{knob} = {value} is out of range ({range})")]
    OutOfRange {
        /// Knob name.
        knob: &'static str,
        /// Offending value.
        value: u64,
        /// Accepted range, human readable.
        range: &'static str,
    },
}

impl Error {
    /// Wraps the current `errno` as [`Error::Sys`].
    pub fn last_os(op: impl Into<String>) -> Self {
        Error::Sys {
            op: op.into(),
            source: io::Error::last_os_error(),
        }
    }

    /// Wraps an `io::Error` as [`Error::Sys`].
    pub fn sys(op: impl Into<String>, source: io::Error) -> Self {
        Error::Sys {
            op: op.into(),
            source,
        }
    }
}
