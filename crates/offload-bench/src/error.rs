//! The crate's error type: every failure names what it was doing (the file,
//! the control-protocol frame, the peer) so that a user can act on it.

use std::io;

/// Largest control frame accepted, in bytes (the control protocol's limit).
/// The server's report carries TCP_INFO of every flow (about 200 bytes
/// each): 64 MiB holds some 300,000 flows. Readers allocate as the bytes
/// arrive, not from the announced length.
pub const MAX_FRAME: u32 = 64 << 20;
/// The control protocol's version; a server refuses any other. Version 2
/// added authentication (Challenge/Auth), the Welcome's proof and the
/// udp-rr join token; version 3 the token every TCP data connection
/// presents first.
pub const PROTOCOL_VERSION: u32 = 3;

/// Everything that can go wrong in a benchmark run or in the server.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A system file could not be read.
    #[error("reading {file}: {source}")]
    File {
        /// The path.
        file: String,
        /// The cause.
        source: io::Error,
    },
    /// A system file had an unexpected shape.
    #[error("parsing {file}: {what}")]
    Parse {
        /// The path.
        file: String,
        /// What was wrong.
        what: String,
    },
    /// A socket or syscall failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The cause.
        source: io::Error,
    },
    /// The control protocol failed (see [`ProtoError`]).
    #[error("control connection to {peer}: {source}")]
    Control {
        /// The peer's address.
        peer: String,
        /// The cause.
        source: ProtoError,
    },
    /// The server reported an error.
    #[error("server {peer} refused the test: {message}")]
    Server {
        /// The server's address.
        peer: String,
        /// The server's message.
        message: String,
    },
    /// A configuration value was invalid.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// A data-path worker failed.
    #[error("worker {worker}: {message}")]
    Worker {
        /// Worker index.
        worker: usize,
        /// What happened.
        message: String,
    },
}

impl BenchError {
    /// Wraps an io error with what was being done.
    pub fn io(context: impl Into<String>, source: io::Error) -> Self {
        BenchError::Io {
            context: context.into(),
            source,
        }
    }
}

/// A control-protocol failure.
#[derive(Debug, thiserror::Error)]
pub enum ProtoError {
    /// The socket failed or timed out.
    #[error("i/o: {0}")]
    Io(#[from] io::Error),
    /// The peer closed the connection.
    #[error("the peer closed the connection")]
    Closed,
    /// A frame's length field is above the frame limit.
    #[error("frame of {len} bytes is above the limit of {max}")]
    FrameTooLarge {
        /// The length announced.
        len: u32,
        /// The limit at that point of the exchange.
        max: u32,
    },
    /// A frame is not a valid message.
    #[error("frame is not a valid message: {0}")]
    Json(#[from] serde_json::Error),
    /// The Hello frame has another magic string.
    #[error("not an offload-bench peer (magic {0:?})")]
    BadMagic(String),
    /// The peer speaks another protocol version.
    #[error("protocol version {got} is not supported (this side speaks {PROTOCOL_VERSION})")]
    Version {
        /// The peer's version.
        got: u32,
    },
    /// A valid frame arrived at the wrong time.
    #[error("expected {expected}, got {got}")]
    Unexpected {
        /// What was expected.
        expected: &'static str,
        /// What came.
        got: String,
    },
}
