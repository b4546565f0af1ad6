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
//!
//! VLAN tags: `__netif_receive_skb_core` moves an in-band 802.1Q/802.1ad tag
//! into skb metadata (`skb_vlan_untag`) *before* the taps run, so a raw
//! packet socket would see the frame without its tag. The socket asks for
//! `PACKET_AUXDATA` and puts the tag back where it was (after the MAC
//! addresses), as libpcap does, so captured frames are byte-identical to
//! what was on the wire.

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

const PACKET_AUXDATA: libc::c_int = 8;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
const TP_STATUS_VLAN_TPID_VALID: u32 = 1 << 6;
/// Room kept in front of each received frame for a re-inserted VLAN tag.
const TAG_ROOM: usize = 4;
const ETH_P_ALL_BE: u16 = (libc::ETH_P_ALL as u16).to_be();

const PACKET_VNET_HDR: libc::c_int = 15;

/// Options of a [`PacketSocket`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CaptureOptions {
    /// Receive buffer in bytes (`SO_RCVBUFFORCE`, so `rmem_max` does not cap it).
    pub rcvbuf: usize,
    /// Do not receive the host's own transmissions (`PACKET_IGNORE_OUTGOING`).
    pub ignore_outgoing: bool,
    /// Ask for a `virtio_net_hdr` with every frame (`PACKET_VNET_HDR`): it
    /// tells the `gso_size`/`gso_type` of GRO super-packets. Caveat: the
    /// kernel drops a frame whose GSO type has no virtio equivalent
    /// (`recvmsg` fails with `EINVAL`), so use it on a second socket when
    /// every frame matters.
    pub vnet_hdr: bool,
}

impl Default for CaptureOptions {
    fn default() -> Self {
        CaptureOptions {
            rcvbuf: 64 << 20,
            ignore_outgoing: true,
            vnet_hdr: false,
        }
    }
}

/// One captured frame, borrowed from the socket's buffer.
#[derive(Debug, Clone, Copy)]
pub struct Captured<'a> {
    /// `sll_pkttype`: [`PACKET_HOST`], [`PACKET_OUTGOING`], ...
    pub pkttype: u8,
    /// The frame, VLAN tag restored.
    pub frame: &'a [u8],
    /// The `virtio_net_hdr` the kernel built for it, with
    /// [`CaptureOptions::vnet_hdr`].
    pub vnet: Option<VnetHdr>,
}

/// A bound `AF_PACKET`/`SOCK_RAW` socket.
#[derive(Debug)]
pub struct PacketSocket {
    fd: OwnedFd,
    buf: Vec<u8>,
    ifindex: u32,
    vnet_hdr: bool,
}

impl PacketSocket {
    /// Opens a capture socket on `ifindex`. Must be called in the device's
    /// namespace.
    pub fn open(ifindex: u32, opts: CaptureOptions) -> Result<Self> {
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
        let size = libc::c_int::try_from(opts.rcvbuf).unwrap_or(libc::c_int::MAX);
        setsockopt_int(
            fd.as_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            size,
            "SO_RCVBUFFORCE",
        )?;
        setsockopt_int(
            fd.as_fd(),
            libc::SOL_PACKET,
            PACKET_AUXDATA,
            1,
            "PACKET_AUXDATA",
        )?;
        if opts.vnet_hdr {
            setsockopt_int(
                fd.as_fd(),
                libc::SOL_PACKET,
                PACKET_VNET_HDR,
                1,
                "PACKET_VNET_HDR",
            )?;
        }
        if opts.ignore_outgoing {
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
            buf: vec![0; MAX_FRAME + TAG_ROOM + VNET_LEN],
            ifindex,
            vnet_hdr: opts.vnet_hdr,
        })
    }

    /// The interface index the socket is bound to.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// Receives one frame, waiting at most `timeout` (`None`: do not wait);
    /// `None` when nothing arrived. A VLAN tag the stack moved into metadata
    /// is re-inserted into the frame.
    pub fn recv(&mut self, timeout: Option<Duration>) -> Result<Option<Captured<'_>>> {
        let hdr_len = if self.vnet_hdr { VNET_LEN } else { 0 };
        let room = self.buf.len() - TAG_ROOM;
        loop {
            // SAFETY: sockaddr_ll is plain old data; all-zero is valid.
            let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            // u64 storage keeps the control buffer aligned for cmsghdr.
            let mut control = [0u64; 16];
            let mut iov = libc::iovec {
                iov_base: self.buf[TAG_ROOM..].as_mut_ptr().cast(),
                iov_len: room,
            };
            // SAFETY: msghdr is plain old data; all-zero is valid.
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            msg.msg_name = (&mut sll as *mut libc::sockaddr_ll).cast();
            msg.msg_namelen = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = control.as_mut_ptr().cast();
            msg.msg_controllen = std::mem::size_of_val(&control) as _;
            // SAFETY: recvmsg(2) writes into the iovec's buffer (a live,
            // exclusively borrowed part of `self.buf`), the sockaddr and the
            // control buffer, each bounded by the lengths given in `msg`.
            let n = unsafe { libc::recvmsg(self.fd.as_raw_fd(), &mut msg, libc::MSG_TRUNC) };
            if n >= 0 {
                let n = n as usize;
                if n > room {
                    return Err(Error::Truncated { len: n, buf: room });
                }
                if n < hdr_len {
                    return Err(Error::Truncated {
                        len: n,
                        buf: hdr_len,
                    });
                }
                let vnet = (hdr_len > 0)
                    .then(|| VnetHdr::decode(&self.buf[TAG_ROOM..TAG_ROOM + hdr_len], hdr_len).ok())
                    .flatten();
                let start = TAG_ROOM + hdr_len;
                let len = n - hdr_len;
                let clen = (msg.msg_controllen as usize).min(std::mem::size_of_val(&control));
                let control: Vec<u8> = control.iter().flat_map(|w| w.to_ne_bytes()).collect();
                let frame = match vlan_tag(&control[..clen]) {
                    Some((tpid, tci)) if len >= 12 => {
                        // Move the MAC addresses 4 bytes to the front (over
                        // the already copied vnet header or spare room) and
                        // put the tag between them and the EtherType.
                        let at = start - TAG_ROOM;
                        self.buf.copy_within(start..start + 12, at);
                        self.buf[at + 12..at + 14].copy_from_slice(&tpid.to_be_bytes());
                        self.buf[at + 14..at + 16].copy_from_slice(&tci.to_be_bytes());
                        &self.buf[at..start + len]
                    }
                    _ => &self.buf[start..start + len],
                };
                return Ok(Some(Captured {
                    pkttype: sll.sll_pkttype,
                    frame,
                    vnet,
                }));
            }
            let err = io::Error::last_os_error();
            if self.vnet_hdr && err.raw_os_error() == Some(libc::EINVAL) {
                // packet_rcv_vnet refused the frame's GSO type and the kernel
                // freed it: it is lost to this socket (see CaptureOptions).
                continue;
            }
            match err.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock => {}
                _ => return Err(Error::sys("recvmsg(AF_PACKET)", err)),
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
pub fn setsockopt_int(
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

/// Finds the `PACKET_AUXDATA` control message and returns the VLAN tag
/// (TPID, TCI) it carries, if the frame had one.
fn vlan_tag(control: &[u8]) -> Option<(u16, u16)> {
    let hdr = std::mem::size_of::<libc::cmsghdr>();
    let align = std::mem::size_of::<usize>();
    let mut off = 0;
    while off + hdr <= control.len() {
        let len = usize::from_ne_bytes(control[off..off + align].try_into().ok()?);
        let level = i32::from_ne_bytes(control[off + align..off + align + 4].try_into().ok()?);
        let kind = i32::from_ne_bytes(control[off + align + 4..off + align + 8].try_into().ok()?);
        if len < hdr || off + len > control.len() {
            return None;
        }
        if level == libc::SOL_PACKET && kind == PACKET_AUXDATA && len >= hdr + 20 {
            // struct tpacket_auxdata { u32 tp_status, tp_len, tp_snaplen;
            // u16 tp_mac, tp_net, tp_vlan_tci, tp_vlan_tpid; }
            let d = &control[off + hdr..off + len];
            let status = u32::from_ne_bytes(d[0..4].try_into().ok()?);
            let tci = u16::from_ne_bytes(d[16..18].try_into().ok()?);
            let tpid = u16::from_ne_bytes(d[18..20].try_into().ok()?);
            if status & TP_STATUS_VLAN_VALID == 0 && tci == 0 {
                return None;
            }
            let tpid = if status & TP_STATUS_VLAN_TPID_VALID != 0 && tpid != 0 {
                tpid
            } else {
                0x8100
            };
            return Some((tpid, tci));
        }
        off += len.div_ceil(align) * align;
    }
    None
}

// The `virtio_net_hdr` of a captured frame is the engine's type (one
// vocabulary for the header across the project).
use offload::vnet::VnetHdr;

/// Length of the header `PACKET_VNET_HDR` puts in front of each frame
/// (the legacy 10-byte `struct virtio_net_hdr`).
const VNET_LEN: usize = offload::vnet::HDR_LEN;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vlan_tag_is_read_from_auxdata() {
        let hdr = std::mem::size_of::<libc::cmsghdr>();
        let mut c = vec![0u8; hdr + 20];
        c[..std::mem::size_of::<usize>()].copy_from_slice(&(hdr + 20).to_ne_bytes());
        let a = std::mem::size_of::<usize>();
        c[a..a + 4].copy_from_slice(&libc::SOL_PACKET.to_ne_bytes());
        c[a + 4..a + 8].copy_from_slice(&PACKET_AUXDATA.to_ne_bytes());
        c[hdr..hdr + 4].copy_from_slice(&TP_STATUS_VLAN_VALID.to_ne_bytes());
        c[hdr + 16..hdr + 18].copy_from_slice(&100u16.to_ne_bytes());
        assert_eq!(vlan_tag(&c), Some((0x8100, 100)));
        c[hdr..hdr + 4].copy_from_slice(&0u32.to_ne_bytes());
        c[hdr + 16..hdr + 18].copy_from_slice(&0u16.to_ne_bytes());
        assert_eq!(vlan_tag(&c), None, "no tag");
        assert_eq!(vlan_tag(&c[..hdr - 1]), None, "truncated control data");
    }
}
