//! An `AF_PACKET` capture socket bound to one device.
//!
//! Packet taps run after GRO (`__netif_receive_skb_core`), so this socket
//! sees the super-packets GRO built, up to `GRO_MAX_SIZE` (524280) plus link
//! and Hop-by-Hop headers: the receive buffer is [`MAX_FRAME`] bytes and a
//! larger frame is reported as [`Error::Truncated`], never silently cut.
//!
//! The socket is opened with protocol 0 (receives nothing) and only then
//! bound to `ETH_P_ALL` on the device, so no frame of another device can
//! slip in between `socket()` and `bind()`. `PACKET_IGNORE_OUTGOING` keeps
//! the kernel's own transmissions (RSTs, ICMP errors, MLD, ...) out, and
//! [`PacketSocket::recv`] still reports `sll_pkttype` so callers can check.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::Duration;

use crate::error::{Error, Result};

/// Receive buffer size: the largest GRO packet (524280) + Ethernet (14) +
/// Hop-by-Hop jumbo header (8) + VLAN tags, rounded up to 640 KiB.
pub const MAX_FRAME: usize = 640 * 1024;

/// `sll_pkttype` of a frame addressed to this host.
pub const PACKET_HOST: u8 = 0;
/// `sll_pkttype` of a frame the host transmitted.
pub const PACKET_OUTGOING: u8 = 4;

const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
const ETH_P_ALL_BE: u16 = (libc::ETH_P_ALL as u16).to_be();

/// A bound `AF_PACKET`/`SOCK_RAW` socket.
#[derive(Debug)]
pub struct PacketSocket {
    fd: OwnedFd,
    buf: Vec<u8>,
    ifindex: u32,
}

impl PacketSocket {
    /// Opens a capture socket on `ifindex` with a receive buffer of
    /// `rcvbuf` bytes (`SO_RCVBUFFORCE`, so `rmem_max` does not cap it).
    /// Must be called in the device's namespace.
    pub fn open(ifindex: u32, rcvbuf: usize, ignore_outgoing: bool) -> Result<Self> {
        // SAFETY: socket(2) with constant arguments; checked and owned once.
        let raw = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                0,
            )
        };
        if raw < 0 {
            return Err(Error::last_os("socket(AF_PACKET, SOCK_RAW)"));
        }
        // SAFETY: `raw` is a fresh, valid fd that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let size = libc::c_int::try_from(rcvbuf).unwrap_or(libc::c_int::MAX);
        setsockopt_int(
            fd.as_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            size,
            "SO_RCVBUFFORCE",
        )?;
        if ignore_outgoing {
            setsockopt_int(
                fd.as_fd(),
                libc::SOL_PACKET,
                PACKET_IGNORE_OUTGOING,
                1,
                "PACKET_IGNORE_OUTGOING",
            )?;
        }
        // SAFETY: sockaddr_ll is plain old data; all-zero is a valid value.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = ETH_P_ALL_BE;
        sll.sll_ifindex = ifindex as libc::c_int;
        // SAFETY: bind(2) reads a sockaddr_ll of the stated length from a live local.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if r < 0 {
            return Err(Error::last_os(format!(
                "bind(AF_PACKET) to ifindex {ifindex}"
            )));
        }
        Ok(PacketSocket {
            fd,
            buf: vec![0; MAX_FRAME],
            ifindex,
        })
    }

    /// The interface index the socket is bound to.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// Receives one frame, waiting at most `timeout` (`None`: do not wait).
    /// Returns `(sll_pkttype, frame)` or `None` when nothing arrived.
    pub fn recv(&mut self, timeout: Option<Duration>) -> Result<Option<(u8, &[u8])>> {
        loop {
            // SAFETY: sockaddr_ll is plain old data; all-zero is valid.
            let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            let mut sll_len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            // SAFETY: recvfrom(2) writes at most `buf.len()` bytes into our
            // buffer and at most `sll_len` bytes into `sll`, both live.
            let n = unsafe {
                libc::recvfrom(
                    self.fd.as_raw_fd(),
                    self.buf.as_mut_ptr().cast(),
                    self.buf.len(),
                    libc::MSG_TRUNC,
                    (&mut sll as *mut libc::sockaddr_ll).cast(),
                    &mut sll_len,
                )
            };
            if n >= 0 {
                let n = n as usize;
                if n > self.buf.len() {
                    return Err(Error::Truncated {
                        len: n,
                        buf: self.buf.len(),
                    });
                }
                return Ok(Some((sll.sll_pkttype, &self.buf[..n])));
            }
            let err = io::Error::last_os_error();
            match err.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock => {}
                _ => return Err(Error::sys("recvfrom(AF_PACKET)", err)),
            }
            let Some(t) = timeout else { return Ok(None) };
            if !self.wait_readable(t)? {
                return Ok(None);
            }
        }
    }

    /// Waits until a frame is queued or `timeout` passes; `true` if readable.
    pub fn wait_readable(&self, timeout: Duration) -> Result<bool> {
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = libc::c_int::try_from(timeout.as_millis().max(1)).unwrap_or(libc::c_int::MAX);
        loop {
            // SAFETY: poll(2) on one live pollfd.
            let r = unsafe { libc::poll(&mut pfd, 1, ms) };
            if r >= 0 {
                return Ok(r > 0);
            }
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(Error::sys("poll(AF_PACKET)", err));
            }
        }
    }

    /// Discards everything queued; returns how many frames were dropped.
    pub fn drain(&mut self) -> Result<usize> {
        let mut n = 0;
        while self.recv(None)?.is_some() {
            n += 1;
        }
        Ok(n)
    }
}

impl AsFd for PacketSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// `setsockopt(fd, level, name, &value, sizeof(int))`.
pub(crate) fn setsockopt_int(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
    what: &str,
) -> Result<()> {
    // SAFETY: setsockopt(2) reads one int from a live local.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(Error::last_os(format!("setsockopt({what}={value})")));
    }
    Ok(())
}
