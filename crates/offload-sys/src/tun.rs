//! The system calls: `/dev/net/tun`, the TUN ioctls, `read`, `writev`,
//! `poll`. Every `unsafe` block of the crate lives here, each with the
//! reason it is sound; callers get `io::Result`s.
//!
//! Ioctl numbers and flags are from `include/uapi/linux/if_tun.h`
//! (`_IOW('T', n, int)` / `_IOR`).
//!
//! This is the project's one TUN ioctl layer. It has no device type of its
//! own: offload-tun's `TunDevice` is the one, for datapaths and for the
//! kernel GRO oracle's TAP alike. It needs `libc` only, so it is built
//! without offload-sys's `control-plane` feature too.
//!
//! A device is created in the network namespace of the thread that calls
//! [`set_iff`] on a fresh [`open_tun`] fd (the tun file's socket takes
//! `current`'s namespace at `open()` time) and, unless made persistent, is
//! destroyed by the kernel when the last fd on it closes.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// `IFF_TUN`: layer 3, packets start with the IP header.
pub const IFF_TUN: u16 = 0x0001;
/// `IFF_TAP`: layer 2, frames start with the Ethernet header.
pub const IFF_TAP: u16 = 0x0002;
/// `IFF_NAPI`: writes enter the stack through the device's NAPI instance,
/// i.e. through `napi_gro_receive`, like frames from a NIC (needs
/// `CAP_NET_ADMIN`).
pub const IFF_NAPI: u16 = 0x0010;
/// `IFF_NAPI_FRAGS`: like `IFF_NAPI`, with `napi_get_frags` (needs `writev`).
pub const IFF_NAPI_FRAGS: u16 = 0x0020;
/// `IFF_MULTI_QUEUE`: one fd per queue.
pub const IFF_MULTI_QUEUE: u16 = 0x0100;
/// `IFF_NO_PI`: no 4-byte packet-information prefix.
pub const IFF_NO_PI: u16 = 0x1000;
/// `IFF_VNET_HDR`: a `virtio_net_hdr` precedes every packet.
pub const IFF_VNET_HDR: u16 = 0x4000;

const TUNSETIFF: libc::Ioctl = 0x4004_54ca;
const TUNSETPERSIST: libc::Ioctl = 0x4004_54cb;
const TUNSETOFFLOAD: libc::Ioctl = 0x4004_54d0;
const TUNGETIFF: libc::Ioctl = 0x8004_54d2;
const TUNGETVNETHDRSZ: libc::Ioctl = 0x8004_54d7;
const TUNSETVNETHDRSZ: libc::Ioctl = 0x4004_54d8;

/// `struct ifreq` reduced to the name and the `ifr_flags` union member,
/// padded to the kernel's 40 bytes.
#[repr(C)]
struct IfReqFlags {
    name: [u8; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Opens `/dev/net/tun` (close-on-exec, so children such as iperf3 never
/// hold the device).
pub fn open_tun() -> io::Result<OwnedFd> {
    // SAFETY: open(2) of a NUL-terminated constant path; the result is
    // checked and owned exactly once.
    let raw = cvt(unsafe { libc::open(c"/dev/net/tun".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) })?;
    // SAFETY: `raw` is a fresh fd nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// `TUNSETIFF`: attaches the fd to device `name` (created if missing) with
/// `flags`; returns the name the kernel used.
pub fn set_iff(fd: BorrowedFd<'_>, name: &str, flags: u16) -> io::Result<String> {
    let mut req = IfReqFlags {
        name: [0; libc::IFNAMSIZ],
        flags: flags as libc::c_short,
        _pad: [0; 22],
    };
    // The caller checked that the name fits (< IFNAMSIZ).
    req.name[..name.len()].copy_from_slice(name.as_bytes());
    // SAFETY: TUNSETIFF reads and writes a `struct ifreq`, which `req`
    // matches in layout and size, and which lives across the call.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF, &mut req as *mut IfReqFlags) })?;
    Ok(ifname(&req.name))
}

/// `TUNGETIFF`: the device name and the flags the kernel holds for it.
pub fn get_iff(fd: BorrowedFd<'_>) -> io::Result<(String, u16)> {
    let mut req = IfReqFlags {
        name: [0; libc::IFNAMSIZ],
        flags: 0,
        _pad: [0; 22],
    };
    // SAFETY: TUNGETIFF fills a `struct ifreq`, which `req` matches.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), TUNGETIFF, &mut req as *mut IfReqFlags) })?;
    Ok((ifname(&req.name), req.flags as u16))
}

fn ifname(raw: &[u8]) -> String {
    let len = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
    String::from_utf8_lossy(&raw[..len]).into_owned()
}

/// `TUNSETOFFLOAD` with `TUN_F_*` bits.
pub fn set_offload(fd: BorrowedFd<'_>, bits: u32) -> io::Result<()> {
    // SAFETY: TUNSETOFFLOAD takes its argument by value (unsigned long).
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETOFFLOAD, libc::c_ulong::from(bits)) })?;
    Ok(())
}

/// `TUNSETVNETHDRSZ`.
pub fn set_vnet_hdr_size(fd: BorrowedFd<'_>, size: usize) -> io::Result<()> {
    let mut v =
        libc::c_int::try_from(size).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: TUNSETVNETHDRSZ reads an int through the pointer, which points
    // at a live local.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETVNETHDRSZ, &mut v as *mut libc::c_int) })?;
    Ok(())
}

/// `TUNGETVNETHDRSZ`.
pub fn get_vnet_hdr_size(fd: BorrowedFd<'_>) -> io::Result<usize> {
    let mut v: libc::c_int = 0;
    // SAFETY: TUNGETVNETHDRSZ writes an int through the pointer, which
    // points at a live local.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), TUNGETVNETHDRSZ, &mut v as *mut libc::c_int) })?;
    Ok(v.max(0) as usize)
}

/// `TUNSETPERSIST`.
pub fn set_persist(fd: BorrowedFd<'_>, on: bool) -> io::Result<()> {
    // SAFETY: TUNSETPERSIST takes its argument by value.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETPERSIST, libc::c_ulong::from(on)) })?;
    Ok(())
}

/// Sets or clears `O_NONBLOCK`.
pub fn set_nonblocking(fd: BorrowedFd<'_>, on: bool) -> io::Result<()> {
    // SAFETY: F_GETFL has no pointer arguments.
    let fl = cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) })?;
    let fl = if on {
        fl | libc::O_NONBLOCK
    } else {
        fl & !libc::O_NONBLOCK
    };
    // SAFETY: F_SETFL with an integer argument.
    cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, fl) })?;
    Ok(())
}

/// `dup(2)` with close-on-exec: a second handle on the same queue.
pub fn dup(fd: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    fd.try_clone_to_owned()
}

/// Waits until the fd is readable; `false` on timeout.
pub fn wait_readable(fd: BorrowedFd<'_>, timeout: Option<Duration>) -> io::Result<bool> {
    let ms = timeout.map_or(-1, |t| t.as_millis().min(i32::MAX as u128) as libc::c_int);
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    loop {
        // SAFETY: one pollfd, living across the call.
        let r = unsafe { libc::poll(&mut p, 1, ms) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        return Ok(r > 0);
    }
}

/// `read(2)` into `buf`.
pub fn read(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: read(2) writes at most `buf.len()` bytes into a live,
    // exclusively borrowed slice.
    let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// `writev(2)` of up to two parts (vnet header, packet) as one packet.
pub fn write2(fd: BorrowedFd<'_>, a: &[u8], b: &[u8]) -> io::Result<usize> {
    let iov = [
        libc::iovec {
            iov_base: a.as_ptr() as *mut libc::c_void,
            iov_len: a.len(),
        },
        libc::iovec {
            iov_base: b.as_ptr() as *mut libc::c_void,
            iov_len: b.len(),
        },
    ];
    let (ptr, cnt) = if a.is_empty() {
        (iov[1..].as_ptr(), 1)
    } else {
        (iov.as_ptr(), 2)
    };
    // SAFETY: writev(2) only reads the `cnt` iovecs, which point into live
    // slices borrowed for the duration of the call.
    let n = unsafe { libc::writev(fd.as_raw_fd(), ptr, cnt) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Most iovecs one `writev(2)` takes (`UIO_MAXIOV`); more is `EINVAL`.
pub const IOV_MAX: usize = 1024;

/// `writev(2)` of `parts` as one packet (at most [`IOV_MAX`] of them).
pub fn writev(fd: BorrowedFd<'_>, parts: &[io::IoSlice<'_>]) -> io::Result<usize> {
    if parts.len() > IOV_MAX {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: `IoSlice` is ABI-compatible with `struct iovec` on Unix (the
    // standard library guarantees it); writev(2) only reads the
    // `parts.len()` iovecs and the bytes they point at, all borrowed for
    // the duration of the call.
    let n = unsafe {
        libc::writev(
            fd.as_raw_fd(),
            parts.as_ptr().cast::<libc::iovec>(),
            parts.len() as libc::c_int,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// `TUNSETOFFLOAD` bits (`include/uapi/linux/if_tun.h`): what the *user*
/// side accepts from the kernel.
pub mod offload {
    /// Partial checksums.
    pub const TUN_F_CSUM: u32 = 0x01;
    /// TSO over IPv4.
    pub const TUN_F_TSO4: u32 = 0x02;
    /// TSO over IPv6.
    pub const TUN_F_TSO6: u32 = 0x04;
    /// TSO with ECN (CWR).
    pub const TUN_F_TSO_ECN: u32 = 0x08;
    /// UFO (accepted, never produced by the kernel).
    pub const TUN_F_UFO: u32 = 0x10;
    /// USO over IPv4 (6.2+, needs `TUN_F_USO6` too).
    pub const TUN_F_USO4: u32 = 0x20;
    /// USO over IPv6 (6.2+, needs `TUN_F_USO4` too).
    pub const TUN_F_USO6: u32 = 0x40;
    /// UDP tunnel GSO (6.17+).
    pub const TUN_F_UDP_TUNNEL_GSO: u32 = 0x080;
    /// UDP tunnel GSO with outer checksum (6.17+).
    pub const TUN_F_UDP_TUNNEL_GSO_CSUM: u32 = 0x100;
}
