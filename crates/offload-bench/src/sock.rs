//! Socket construction with the benchmark's knobs applied before connect or
//! bind (buffer sizes must be set before the handshake to shape the window),
//! and read-back of what the kernel actually applied.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};

use crate::config::SocketKnobs;
use crate::sys;

/// Applies the options shared by TCP and UDP sockets.
fn apply_common(sock: &Socket, knobs: &SocketKnobs) -> io::Result<()> {
    if let Some(b) = knobs.sndbuf {
        sock.set_send_buffer_size(b as usize)?;
    }
    if let Some(b) = knobs.rcvbuf {
        sock.set_recv_buffer_size(b as usize)?;
    }
    if let Some(us) = knobs.busy_poll_us {
        let fd = sock.as_raw_fd();
        sys::setsockopt_int(fd, libc::SOL_SOCKET, sys::SO_BUSY_POLL, us as i32)?;
        sys::setsockopt_int(fd, libc::SOL_SOCKET, sys::SO_PREFER_BUSY_POLL, 1)?;
    }
    Ok(())
}

fn domain(addr: &SocketAddr) -> Domain {
    if addr.is_ipv6() {
        Domain::IPV6
    } else {
        Domain::IPV4
    }
}

/// Applies the knobs to an accepted or connected TCP socket.
pub fn apply_tcp(stream: &TcpStream, knobs: &SocketKnobs) -> io::Result<()> {
    let sock = socket2::SockRef::from(stream);
    if knobs.nodelay {
        sock.set_tcp_nodelay(true)?;
    }
    if let Some(us) = knobs.busy_poll_us {
        let fd = stream.as_raw_fd();
        sys::setsockopt_int(fd, libc::SOL_SOCKET, sys::SO_BUSY_POLL, us as i32)?;
        sys::setsockopt_int(fd, libc::SOL_SOCKET, sys::SO_PREFER_BUSY_POLL, 1)?;
    }
    Ok(())
}

/// A TCP connection to `addr` with the knobs applied before the handshake.
pub fn tcp_connect(addr: SocketAddr, knobs: &SocketKnobs) -> io::Result<TcpStream> {
    let sock = Socket::new(domain(&addr), Type::STREAM, Some(Protocol::TCP))?;
    apply_common(&sock, knobs)?;
    if knobs.nodelay {
        sock.set_tcp_nodelay(true)?;
    }
    sock.connect_timeout(&addr.into(), Duration::from_secs(10))?;
    Ok(sock.into())
}

/// A TCP listener on `addr` whose accepted sockets inherit the buffer sizes.
pub fn tcp_listen(addr: SocketAddr, knobs: &SocketKnobs, backlog: i32) -> io::Result<TcpListener> {
    let sock = Socket::new(domain(&addr), Type::STREAM, Some(Protocol::TCP))?;
    sock.set_reuse_address(true)?;
    if addr.is_ipv6() {
        sock.set_only_v6(false).ok();
    }
    apply_common(&sock, knobs)?;
    sock.bind(&addr.into())?;
    sock.listen(backlog)?;
    Ok(sock.into())
}

/// A UDP socket bound to `addr` (receivers: optionally SO_REUSEPORT, UDP_GRO).
pub fn udp_bind(addr: SocketAddr, knobs: &SocketKnobs, reuseport: bool) -> io::Result<UdpSocket> {
    let sock = Socket::new(domain(&addr), Type::DGRAM, Some(Protocol::UDP))?;
    if reuseport {
        sock.set_reuse_port(true)?;
    }
    if addr.is_ipv6() {
        sock.set_only_v6(false).ok();
    }
    apply_common(&sock, knobs)?;
    if knobs.udp_gro {
        sys::setsockopt_int(sock.as_raw_fd(), sys::SOL_UDP, sys::UDP_GRO, 1)?;
    }
    sock.bind(&addr.into())?;
    Ok(sock.into())
}

/// A UDP socket connected to `addr` (senders: optionally UDP_SEGMENT).
pub fn udp_connect(addr: SocketAddr, knobs: &SocketKnobs) -> io::Result<UdpSocket> {
    let sock = Socket::new(domain(&addr), Type::DGRAM, Some(Protocol::UDP))?;
    apply_common(&sock, knobs)?;
    if let Some(seg) = knobs.udp_gso {
        sys::setsockopt_int(
            sock.as_raw_fd(),
            sys::SOL_UDP,
            sys::UDP_SEGMENT,
            i32::from(seg),
        )?;
    }
    sock.connect(&addr.into())?;
    Ok(sock.into())
}

/// Effective SO_SNDBUF, SO_RCVBUF and (TCP) TCP_NODELAY of a socket.
pub fn read_back(fd: RawFd, tcp: bool) -> (Option<u32>, Option<u32>, Option<bool>) {
    let get = |level, name| sys::getsockopt_int(fd, level, name).ok();
    let snd = get(libc::SOL_SOCKET, libc::SO_SNDBUF).map(|v| v as u32);
    let rcv = get(libc::SOL_SOCKET, libc::SO_RCVBUF).map(|v| v as u32);
    let nodelay = if tcp {
        get(libc::IPPROTO_TCP, libc::TCP_NODELAY).map(|v| v != 0)
    } else {
        None
    };
    (snd, rcv, nodelay)
}

/// Sets a read timeout on a raw socket (SO_RCVTIMEO); also bounds accept().
pub fn set_recv_timeout(fd: RawFd, timeout: Duration) -> io::Result<()> {
    sys::set_rcvtimeo(fd, timeout)
}

/// Sets TCP_DEFER_ACCEPT: the kernel passes a connection to accept() only
/// once data arrived (or, for a silent one, after about `secs` seconds of
/// SYN-ACK retransmissions), as nginx's `deferred` listeners do.
pub fn set_defer_accept(listener: &TcpListener, secs: u32) -> io::Result<()> {
    sys::setsockopt_int(
        listener.as_raw_fd(),
        libc::IPPROTO_TCP,
        libc::TCP_DEFER_ACCEPT,
        secs.min(i32::MAX as u32) as i32,
    )
}

/// Sets SO_LINGER 0 so that close() sends RST.
pub fn set_linger_zero(stream: &TcpStream) -> io::Result<()> {
    socket2::SockRef::from(stream).set_linger(Some(Duration::ZERO))
}
