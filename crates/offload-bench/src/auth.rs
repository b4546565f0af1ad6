//! Shared-secret authentication of the control connection: a
//! challenge-response keyed hash (HMAC-SHA-256) in both directions, so the
//! secret itself never crosses the wire and a recorded exchange cannot be
//! replayed.
//!
//! ```text
//! client                                     server (started with a secret)
//!   Hello { magic, version }          ->
//!                                     <-     Challenge { nonce: S (32 random bytes) }
//!   Auth { nonce: C (32 random bytes),
//!          mac: HMAC(k, "client" | S | C) } ->
//!                                     <-     Welcome { .., proof: HMAC(k, "server" | S | C) }
//! ```
//!
//! The server checks `mac` in constant time before it answers anything
//! else; the client checks `proof`, so it knows it reached a server that
//! holds the same secret before it sends a test. The two labels keep one
//! side's answer from being reflected as the other's. iperf3 authenticates
//! its clients too (RSA-encrypted user name and password); a symmetric
//! keyed hash needs no key pair and no user database for a lab tool
//! (docs/decisions/0100-bench-control-authentication.md).

use std::fmt;
use std::path::Path;

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::error::BenchError;

/// The environment variable a client or server reads its secret from when
/// no `--auth-file` is given (as iperf3's `IPERF3_PASSWORD`).
pub const SECRET_ENV: &str = "OFFLOAD_BENCH_SECRET";
/// Shortest secret accepted, in bytes.
pub const MIN_SECRET_LEN: usize = 16;
/// Longest secret accepted, in bytes (a secret file is read up to this).
pub const MAX_SECRET_LEN: usize = 4096;
/// Bytes in a nonce.
pub const NONCE_LEN: usize = 32;

type HmacSha256 = Hmac<Sha256>;

/// A shared secret. Its `Debug` output never shows the bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Vec<u8>);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret({} bytes)", self.0.len())
    }
}

impl Secret {
    /// A secret of these bytes (16 to 4096 of them).
    pub fn new(bytes: impl Into<Vec<u8>>) -> Result<Self, BenchError> {
        let bytes = bytes.into();
        if bytes.len() < MIN_SECRET_LEN || bytes.len() > MAX_SECRET_LEN {
            return Err(BenchError::Config(format!(
                "the shared secret has {} bytes; it needs {MIN_SECRET_LEN} to {MAX_SECRET_LEN} \
                 (e.g. `head -c 32 /dev/urandom | base64 > secret`)",
                bytes.len()
            )));
        }
        Ok(Secret(bytes))
    }

    /// Reads a secret file: its bytes without the trailing line break.
    pub fn from_file(path: &Path) -> Result<Self, BenchError> {
        use std::io::Read;
        let file = std::fs::File::open(path).map_err(|e| BenchError::File {
            file: path.display().to_string(),
            source: e,
        })?;
        let mut bytes = Vec::new();
        file.take(MAX_SECRET_LEN as u64 + 2)
            .read_to_end(&mut bytes)
            .map_err(|e| BenchError::File {
                file: path.display().to_string(),
                source: e,
            })?;
        while bytes.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
            bytes.pop();
        }
        Secret::new(bytes).map_err(|e| match e {
            BenchError::Config(m) => BenchError::Config(format!("{}: {m}", path.display())),
            other => other,
        })
    }

    /// The secret in [`SECRET_ENV`], if that variable is set.
    pub fn from_env() -> Result<Option<Self>, BenchError> {
        match std::env::var_os(SECRET_ENV) {
            None => Ok(None),
            Some(v) => {
                use std::os::unix::ffi::OsStrExt;
                Secret::new(v.as_bytes().to_vec())
                    .map(Some)
                    .map_err(|e| BenchError::Config(format!("{SECRET_ENV}: {e}")))
            }
        }
    }

    /// The secret of `file` if given, else of [`SECRET_ENV`] if set, else
    /// none (what `--auth-file` means on both sides).
    pub fn from_file_or_env(file: Option<&Path>) -> Result<Option<Self>, BenchError> {
        match file {
            Some(f) => Secret::from_file(f).map(Some),
            None => Secret::from_env(),
        }
    }

    /// A fresh random secret, for a server and client in one process (a lab
    /// experiment in its own namespaces).
    pub fn random() -> Result<Self, BenchError> {
        Ok(Secret(random_bytes::<32>()?.to_vec()))
    }

    fn mac(&self, label: &[u8], server_nonce: &[u8], client_nonce: &[u8]) -> HmacSha256 {
        let mut m = <HmacSha256 as KeyInit>::new_from_slice(&self.0)
            .expect("HMAC takes a key of any length");
        m.update(b"offload-bench auth v1 ");
        m.update(label);
        m.update(server_nonce);
        m.update(client_nonce);
        m
    }

    /// The client's answer to a challenge, as hex.
    pub fn client_mac(&self, server_nonce: &[u8], client_nonce: &[u8]) -> String {
        hex(&self
            .mac(b"client", server_nonce, client_nonce)
            .finalize()
            .into_bytes())
    }

    /// The server's proof, as hex.
    pub fn server_proof(&self, server_nonce: &[u8], client_nonce: &[u8]) -> String {
        hex(&self
            .mac(b"server", server_nonce, client_nonce)
            .finalize()
            .into_bytes())
    }

    /// Whether `mac_hex` is the client's answer (constant-time comparison).
    pub fn check_client_mac(
        &self,
        server_nonce: &[u8],
        client_nonce: &[u8],
        mac_hex: &str,
    ) -> bool {
        match unhex(mac_hex) {
            Some(mac) => self
                .mac(b"client", server_nonce, client_nonce)
                .verify_slice(&mac)
                .is_ok(),
            None => false,
        }
    }

    /// Whether `proof_hex` is the server's proof (constant-time comparison).
    pub fn check_server_proof(
        &self,
        server_nonce: &[u8],
        client_nonce: &[u8],
        proof_hex: &str,
    ) -> bool {
        match unhex(proof_hex) {
            Some(p) => self
                .mac(b"server", server_nonce, client_nonce)
                .verify_slice(&p)
                .is_ok(),
            None => false,
        }
    }
}

/// `N` bytes from the kernel's random generator (getrandom(2)).
pub fn random_bytes<const N: usize>() -> Result<[u8; N], BenchError> {
    let mut b = [0u8; N];
    getrandom::fill(&mut b)
        .map_err(|e| BenchError::io("getrandom", std::io::Error::other(e.to_string())))?;
    Ok(b)
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 15)] as char);
    }
    s
}

/// Bytes of a hex string (either case); None if it is not hex or longer
/// than 128 digits (nothing this protocol sends is).
pub fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || s.len() > 128 {
        return None;
    }
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    s.as_bytes()
        .chunks(2)
        .map(|p| Some(digit(p[0])? << 4 | digit(p[1])?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_verify_only_with_the_same_secret_nonces_and_role() {
        let k = Secret::new(b"0123456789abcdef-secret".to_vec()).unwrap();
        let other = Secret::new(b"0123456789abcdef-other!".to_vec()).unwrap();
        let (s, c) = ([1u8; 32], [2u8; 32]);
        let mac = k.client_mac(&s, &c);
        assert_eq!(mac.len(), 64);
        assert!(k.check_client_mac(&s, &c, &mac));
        assert!(!other.check_client_mac(&s, &c, &mac));
        assert!(!k.check_client_mac(&c, &s, &mac), "nonces swapped");
        assert!(
            !k.check_client_mac(&[3u8; 32], &c, &mac),
            "another challenge"
        );
        // The client's answer is not the server's proof (no reflection).
        assert!(!k.check_server_proof(&s, &c, &mac));
        let proof = k.server_proof(&s, &c);
        assert!(k.check_server_proof(&s, &c, &proof));
        assert!(!k.check_client_mac(&s, &c, &proof));
        assert!(!k.check_client_mac(&s, &c, "zz"));
        assert!(!k.check_client_mac(&s, &c, &mac[..62]));
        assert!(!k.check_client_mac(&s, &c, ""));
    }

    #[test]
    fn secrets_need_sixteen_bytes_and_hide_in_debug() {
        assert!(Secret::new(b"short".to_vec()).is_err());
        let k = Secret::new(vec![b'x'; 16]).unwrap();
        assert_eq!(format!("{k:?}"), "Secret(16 bytes)");
        assert_ne!(Secret::random().unwrap(), Secret::random().unwrap());
    }

    #[test]
    fn a_secret_file_loses_its_line_break_only() {
        let dir = std::env::temp_dir().join(format!("ofl-bench-auth-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("secret");
        std::fs::write(&f, b"  sixteen bytes and more \r\n").unwrap();
        let k = Secret::from_file(&f).unwrap();
        assert_eq!(
            k,
            Secret::new(b"  sixteen bytes and more ".to_vec()).unwrap()
        );
        std::fs::write(&f, b"tiny\n").unwrap();
        let e = Secret::from_file(&f).unwrap_err().to_string();
        assert!(e.contains("secret") && e.contains("4 bytes"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(Secret::from_file(&dir.join("missing")).is_err());
    }

    #[test]
    fn hex_round_trips() {
        let b = [0u8, 1, 0xab, 0xff];
        assert_eq!(hex(&b), "0001abff");
        assert_eq!(unhex("0001ABff").unwrap(), b);
        assert!(unhex("0g").is_none());
        assert!(unhex("abc").is_none());
    }
}
