//! The crate's error type: every failure names what it was doing (the file,
//! the control-protocol frame, the peer) so that a user can act on it.

use std::io;

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
    /// The control protocol failed (see [`crate::proto::ProtoError`]).
    #[error("control connection to {peer}: {source}")]
    Control {
        /// The peer's address.
        peer: String,
        /// The cause.
        source: crate::proto::ProtoError,
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
