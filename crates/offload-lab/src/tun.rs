//! TUN/TAP devices: open `/dev/net/tun`, `TUNSETIFF`, and the ioctls a
//! userspace datapath needs (`TUNSETOFFLOAD`, `TUNSETVNETHDRSZ`).
//!
//! The device is created in the network namespace of the thread that calls
//! [`TunDevice::open`] (the tun file's socket takes `current`'s namespace at
//! `open()` time) and, not being persistent, is destroyed by the kernel when
//! the fd closes. Reads and writes are plain `read(2)`/`write(2)` of one frame
//! each (with a `virtio_net_hdr` in front when [`IFF_VNET_HDR`] is set).

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use crate::error::{Error, Result};
use crate::rtnl::check_ifname;

/// `IFF_TUN`: layer-3 device, frames start with the IP header.
pub const IFF_TUN: u16 = 0x0001;
/// `IFF_TAP`: layer-2 device, frames start with the Ethernet header.
pub const IFF_TAP: u16 = 0x0002;
/// `IFF_NAPI`: writes enter the stack through the device's NAPI instance,
/// i.e. through `napi_gro_receive`, like frames from a NIC.
pub const IFF_NAPI: u16 = 0x0010;
/// `IFF_NAPI_FRAGS`: like `IFF_NAPI`, with `napi_get_frags` (needs `writev`).
pub const IFF_NAPI_FRAGS: u16 = 0x0020;
/// `IFF_NO_PI`: no 4-byte packet-information prefix.
pub const IFF_NO_PI: u16 = 0x1000;
/// `IFF_VNET_HDR`: every frame is preceded by a `virtio_net_hdr`.
pub const IFF_VNET_HDR: u16 = 0x4000;
/// `IFF_MULTI_QUEUE`: one fd per queue.
pub const IFF_MULTI_QUEUE: u16 = 0x0100;

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

// ioctl numbers from include/uapi/linux/if_tun.h (_IOW('T', n, int)).
const TUNSETIFF: libc::Ioctl = 0x4004_54ca;
const TUNSETOFFLOAD: libc::Ioctl = 0x4004_54d0;
const TUNGETIFF: libc::Ioctl = 0x8004_54d2;
const TUNSETVNETHDRSZ: libc::Ioctl = 0x4004_54d8;

/// `struct ifreq` restricted to the name and the `ifr_flags` union member.
#[repr(C)]
struct IfReqFlags {
    name: [u8; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

/// An open TUN or TAP device.
#[derive(Debug)]
pub struct TunDevice {
    fd: OwnedFd,
    name: String,
    flags: u16,
}

impl TunDevice {
    /// Opens `/dev/net/tun` and attaches it to a new device `name` with
    /// `flags` (e.g. `IFF_TAP | IFF_NO_PI | IFF_NAPI`).
    pub fn open(name: &str, flags: u16) -> Result<Self> {
        check_ifname(name)?;
        // SAFETY: plain open(2) of a NUL-terminated constant path; the result
        // is checked before use and owned exactly once below.
        let raw = unsafe { libc::open(c"/dev/net/tun".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
        if raw < 0 {
            return Err(Error::last_os("open /dev/net/tun"));
        }
        // SAFETY: `raw` is a fresh, valid fd that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let mut req = IfReqFlags {
            name: [0; libc::IFNAMSIZ],
            flags: flags as libc::c_short,
            _pad: [0; 22],
        };
        req.name[..name.len()].copy_from_slice(name.as_bytes());
        // SAFETY: TUNSETIFF reads and writes a `struct ifreq`; `req` has
        // its layout (name + short flags, padded to 40 bytes) and lives for
        // the whole call.
        let r = unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF, &mut req as *mut IfReqFlags) };
        if r < 0 {
            return Err(Error::last_os(format!(
                "TUNSETIFF {name} flags {flags:#06x}"
            )));
        }
        let len = req
            .name
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(req.name.len());
        let actual = String::from_utf8_lossy(&req.name[..len]).into_owned();
        Ok(TunDevice {
            fd,
            name: actual,
            flags,
        })
    }

    /// The device name the kernel gave (as requested, or expanded from `%d`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The flags the device was opened with.
    pub fn flags(&self) -> u16 {
        self.flags
    }

    /// Reads the flags back from the kernel (`TUNGETIFF`).
    pub fn kernel_flags(&self) -> Result<u16> {
        let mut req = IfReqFlags {
            name: [0; libc::IFNAMSIZ],
            flags: 0,
            _pad: [0; 22],
        };
        // SAFETY: TUNGETIFF fills a `struct ifreq`, which `req` matches.
        let r = unsafe { libc::ioctl(self.fd.as_raw_fd(), TUNGETIFF, &mut req as *mut IfReqFlags) };
        if r < 0 {
            return Err(Error::last_os(format!("TUNGETIFF {}", self.name)));
        }
        Ok(req.flags as u16)
    }

    /// `TUNSETOFFLOAD`: which offloads the user side accepts (bits in
    /// [`offload`]). Unknown bits make the kernel fail with `EINVAL`, which
    /// is how userspace probes for support.
    pub fn set_offload(&self, flags: u32) -> Result<()> {
        // SAFETY: TUNSETOFFLOAD takes its argument by value (an unsigned long).
        let r = unsafe {
            libc::ioctl(
                self.fd.as_raw_fd(),
                TUNSETOFFLOAD,
                libc::c_ulong::from(flags),
            )
        };
        if r < 0 {
            return Err(Error::last_os(format!(
                "TUNSETOFFLOAD {} {flags:#x}",
                self.name
            )));
        }
        Ok(())
    }

    /// `TUNSETVNETHDRSZ`: size of the `virtio_net_hdr` in front of each
    /// frame (10, 12, 20 or 24; the kernel requires ≥ 10).
    pub fn set_vnet_hdr_size(&self, size: i32) -> Result<()> {
        let mut v: libc::c_int = size;
        // SAFETY: TUNSETVNETHDRSZ reads an int through the pointer, which
        // points at a live local.
        let r = unsafe {
            libc::ioctl(
                self.fd.as_raw_fd(),
                TUNSETVNETHDRSZ,
                &mut v as *mut libc::c_int,
            )
        };
        if r < 0 {
            return Err(Error::last_os(format!(
                "TUNSETVNETHDRSZ {} {size}",
                self.name
            )));
        }
        Ok(())
    }

    /// Writes one frame. With `IFF_NAPI` the frame has been through GRO (and
    /// possibly delivered) when this returns, unless softirq processing was
    /// deferred to `ksoftirqd`.
    pub fn write_frame(&self, frame: &[u8]) -> io::Result<usize> {
        // SAFETY: write(2) reads `frame.len()` bytes from a live slice.
        let n = unsafe {
            libc::write(
                self.fd.as_raw_fd(),
                frame.as_ptr().cast::<libc::c_void>(),
                frame.len(),
            )
        };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }

    /// Reads one frame the kernel transmitted on the device (blocking unless
    /// the fd was made non-blocking).
    pub fn read_frame(&self, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: read(2) writes at most `buf.len()` bytes into a live,
        // exclusively borrowed slice.
        let n = unsafe {
            libc::read(
                self.fd.as_raw_fd(),
                buf.as_mut_ptr().cast::<libc::c_void>(),
                buf.len(),
            )
        };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }
}

impl AsFd for TunDevice {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
