//! The control protocol between `offload bench` clients and the server.
//!
//! One TCP connection per client. Every frame is a 4-byte big-endian length
//! followed by that many bytes of JSON (at most [`MAX_FRAME`]). The exchange:
//!
//! ```text
//! client                                   server
//!   Hello { magic, version }        ->
//!                                   <-     Challenge { nonce }         (server with a secret)
//!   Auth { nonce, mac }             ->     (see crate::auth)
//!                                   <-     Welcome { version, host, proof } | Error
//!   Start { spec }                  ->
//!                                   <-     Ready { data_port, token, .. } | Error
//!   (data connections present the token first; udp-rr flows join with it; warm-up)
//!   Mark { window_start }           ->
//!                                   <-     Marked
//!   Mark { window_end }             ->
//!                                   <-     Marked
//!   Finish                          ->
//!                                   <-     Report { report }
//!   Start ... (another test) | Bye | close
//! ```
//!
//! Frames from a client that has not completed its handshake are at most
//! [`MAX_HELLO_FRAME`] bytes, later ones at most [`MAX_CLIENT_FRAME`]; only
//! the server's report may be larger (up to [`MAX_FRAME`]).
//!
//! JSON keeps the protocol readable in a packet capture and lets either side
//! add fields without breaking the other; the version number changes when a
//! change is not compatible. Anything unexpected is a typed [`ProtoError`].

use std::io::{self, Read, Write};

use serde::{de::DeserializeOwned, Deserialize, Serialize};

use crate::config::TestSpec;
use crate::report::{HostInfo, ServerReport, ServerSettings};

pub use crate::error::PROTOCOL_VERSION;
/// The magic string of the Hello frame.
pub const MAGIC: &str = "offload-bench";
pub use crate::error::MAX_FRAME;
/// Largest frame a server reads before the handshake is complete (Hello,
/// Auth): a few hundred bytes are enough.
pub const MAX_HELLO_FRAME: u32 = 4 << 10;
/// Largest frame a server reads from a client (Start with a CPU list of
/// every CPU is some 20 KB).
pub const MAX_CLIENT_FRAME: u32 = 64 << 10;
/// First bytes of a udp-rr join datagram; the test's token follows.
pub const UDP_JOIN: [u8; 4] = *b"OBJ2";
/// First bytes of the server's answer to a join; the token follows.
pub const UDP_JOIN_ACK: [u8; 4] = *b"OBA2";
/// Bytes of a per-test token.
pub const TOKEN_LEN: usize = 16;
/// Bytes of a join datagram and of its answer (the answer is never larger
/// than the datagram that asked for it).
pub const JOIN_LEN: usize = 4 + TOKEN_LEN;
/// First bytes every TCP data connection sends (tcp-rr and tcp-stream
/// flows once, tcp-crr on each connection); the test's token follows.
pub const TCP_DATA_HELLO: [u8; 4] = *b"OBT3";
/// Bytes of a TCP data connection's preamble.
pub const TCP_PREAMBLE_LEN: usize = 4 + TOKEN_LEN;

/// The preamble a TCP data connection of the test with `token` sends first.
pub fn tcp_preamble(token: &[u8; TOKEN_LEN]) -> [u8; TCP_PREAMBLE_LEN] {
    let mut p = [0u8; TCP_PREAMBLE_LEN];
    p[..4].copy_from_slice(&TCP_DATA_HELLO);
    p[4..].copy_from_slice(token);
    p
}

/// Whether `got` is the preamble of the test with `token`, compared in
/// time independent of where they differ.
pub fn is_tcp_preamble(got: &[u8], token: &[u8; TOKEN_LEN]) -> bool {
    got.len() == TCP_PREAMBLE_LEN && same_bytes(got, &tcp_preamble(token))
}

/// Compares two byte strings of equal length without an early exit, so the
/// time taken says nothing of the first difference.
pub fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Which edge of the measurement window a mark is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mark {
    /// The warm-up is over: counters and CPU are sampled.
    WindowStart,
    /// The window is over: counters and CPU are sampled again.
    WindowEnd,
}

/// Frames a client sends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ClientMsg {
    /// First frame: who we are and which protocol we speak.
    Hello {
        /// Must be [`MAGIC`].
        magic: String,
        /// Must be [`PROTOCOL_VERSION`].
        version: u32,
    },
    /// Answer to a Challenge (see [`crate::auth`]).
    Auth {
        /// The client's nonce, hex.
        nonce: String,
        /// HMAC-SHA-256 of the secret over both nonces, hex.
        mac: String,
    },
    /// Set up a test.
    Start {
        /// The test.
        spec: TestSpec,
    },
    /// An edge of the measurement window.
    Mark {
        /// Which edge.
        mark: Mark,
    },
    /// The client's workers have stopped: stop, and report.
    Finish,
    /// The client is done with this connection.
    Bye,
}

/// Frames the server sends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ServerMsg {
    /// Answer to Hello from a server with a secret: prove you hold it.
    Challenge {
        /// The server's nonce, hex.
        nonce: String,
    },
    /// Answer to Hello (or to Auth).
    Welcome {
        /// The server's protocol version.
        version: u32,
        /// Kernel, sysctls and interfaces of the server's namespace; empty
        /// for a client the server does not trust (see docs/bench.md,
        /// "Security").
        #[serde(default)]
        host: HostInfo,
        /// The server's proof that it holds the secret, hex (after Auth).
        #[serde(default)]
        proof: Option<String>,
    },
    /// The data sockets are listening.
    Ready {
        /// Port of the (first) data listener or of the UDP sockets.
        data_port: u16,
        /// Ports of every TCP data listener (`TestSpec::listeners` of them);
        /// empty from a server that opens one.
        #[serde(default)]
        data_ports: Vec<u16>,
        /// What the server actually applied.
        settings: ServerSettings,
        /// The test's token (hex): each TCP data connection sends it first
        /// ([`tcp_preamble`]), each udp-rr flow in its join datagram; the
        /// server serves no connection and answers no address without it.
        #[serde(default)]
        token: Option<String>,
    },
    /// Answer to Mark.
    Marked,
    /// Answer to Finish.
    Report {
        /// The server's counts and CPU.
        report: ServerReport,
    },
    /// Something was wrong; the server keeps serving other clients.
    Error {
        /// What.
        message: String,
    },
}

pub use crate::error::ProtoError;

/// Writes one frame holding `msg`.
pub fn write_frame<W: Write, T: Serialize>(w: &mut W, msg: &T) -> Result<(), ProtoError> {
    let body = serde_json::to_vec(msg)?;
    let len = u32::try_from(body.len())
        .ok()
        .filter(|&l| l <= MAX_FRAME)
        .ok_or(ProtoError::FrameTooLarge {
            len: body.len().min(u32::MAX as usize) as u32,
            max: MAX_FRAME,
        })?;
    let mut frame = Vec::with_capacity(body.len() + 4);
    frame.extend_from_slice(&len.to_be_bytes());
    frame.extend_from_slice(&body);
    w.write_all(&frame)?;
    w.flush()?;
    Ok(())
}

/// Reads one frame (at most [`MAX_FRAME`] bytes) and decodes it as `T`.
pub fn read_frame<R: Read, T: DeserializeOwned>(r: &mut R) -> Result<T, ProtoError> {
    read_frame_limited(r, MAX_FRAME)
}

/// Reads one frame of at most `max` bytes and decodes it as `T`.
pub fn read_frame_limited<R: Read, T: DeserializeOwned>(
    r: &mut R,
    max: u32,
) -> Result<T, ProtoError> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Err(ProtoError::Closed),
        Err(e) => return Err(e.into()),
    }
    let len = u32::from_be_bytes(len);
    if len > max.min(MAX_FRAME) {
        return Err(ProtoError::FrameTooLarge {
            len,
            max: max.min(MAX_FRAME),
        });
    }
    // Grows with what arrives: a bogus length costs no memory up front.
    let mut body = Vec::with_capacity((len as usize).min(1 << 16));
    r.take(u64::from(len)).read_to_end(&mut body)?;
    if body.len() < len as usize {
        return Err(ProtoError::Closed);
    }
    Ok(serde_json::from_slice(&body)?)
}

/// Checks a Hello frame.
pub fn check_hello(msg: &ClientMsg) -> Result<(), ProtoError> {
    match msg {
        ClientMsg::Hello { magic, version } => {
            if magic != MAGIC {
                Err(ProtoError::BadMagic(magic.chars().take(64).collect()))
            } else if *version != PROTOCOL_VERSION {
                Err(ProtoError::Version { got: *version })
            } else {
                Ok(())
            }
        }
        other => Err(ProtoError::Unexpected {
            expected: "hello",
            got: msg_name(other).into(),
        }),
    }
}

/// A short name of a client frame for error messages.
pub fn msg_name(msg: &ClientMsg) -> &'static str {
    match msg {
        ClientMsg::Hello { .. } => "hello",
        ClientMsg::Auth { .. } => "auth",
        ClientMsg::Start { .. } => "start",
        ClientMsg::Mark { .. } => "mark",
        ClientMsg::Finish => "finish",
        ClientMsg::Bye => "bye",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip() {
        let mut buf = Vec::new();
        let hello = ClientMsg::Hello {
            magic: MAGIC.into(),
            version: PROTOCOL_VERSION,
        };
        write_frame(&mut buf, &hello).unwrap();
        write_frame(&mut buf, &ClientMsg::Finish).unwrap();
        let mut r = &buf[..];
        let a: ClientMsg = read_frame(&mut r).unwrap();
        let b: ClientMsg = read_frame(&mut r).unwrap();
        assert_eq!(a, hello);
        assert_eq!(b, ClientMsg::Finish);
        check_hello(&a).unwrap();
        assert!(matches!(
            read_frame::<_, ClientMsg>(&mut r),
            Err(ProtoError::Closed)
        ));
    }

    #[test]
    fn oversized_truncated_and_garbage_frames_are_typed_errors() {
        let mut r = &[0xffu8, 0xff, 0xff, 0xff][..];
        assert!(matches!(
            read_frame::<_, ClientMsg>(&mut r),
            Err(ProtoError::FrameTooLarge { len: u32::MAX, .. })
        ));
        // A server's limit before the handshake.
        let big = frame_bytes(&[b' '; 5000]);
        let mut r = &big[..];
        assert!(matches!(
            read_frame_limited::<_, ClientMsg>(&mut r, MAX_HELLO_FRAME),
            Err(ProtoError::FrameTooLarge {
                len: 5000,
                max: MAX_HELLO_FRAME
            })
        ));
        let mut r = &[0u8, 0, 0, 10, b'{'][..];
        assert!(matches!(
            read_frame::<_, ClientMsg>(&mut r),
            Err(ProtoError::Closed)
        ));
        let mut r = &[0u8, 0, 0, 3, b'a', b'b', b'c'][..];
        assert!(matches!(
            read_frame::<_, ClientMsg>(&mut r),
            Err(ProtoError::Json(_))
        ));
    }

    fn frame_bytes(body: &[u8]) -> Vec<u8> {
        let mut f = (body.len() as u32).to_be_bytes().to_vec();
        f.extend_from_slice(body);
        f
    }

    #[test]
    fn wrong_magic_or_version_is_refused() {
        let bad_v = ClientMsg::Hello {
            magic: MAGIC.into(),
            version: 99,
        };
        assert!(matches!(
            check_hello(&bad_v),
            Err(ProtoError::Version { got: 99 })
        ));
        let bad_m = ClientMsg::Hello {
            magic: "netperf".into(),
            version: 1,
        };
        assert!(matches!(check_hello(&bad_m), Err(ProtoError::BadMagic(_))));
        assert!(matches!(
            check_hello(&ClientMsg::Bye),
            Err(ProtoError::Unexpected { .. })
        ));
        let text = ProtoError::Version { got: 99 }.to_string();
        assert!(
            text.contains("99") && text.contains(&PROTOCOL_VERSION.to_string()),
            "{text}"
        );
    }
}
