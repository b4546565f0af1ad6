//! TUN/TAP devices opened with any `IFF_*` flags (the oracle's TAP uses
//! `IFF_NAPI`), on offload-tun's ioctl layer (`offload_tun::sys`): the
//! project has one implementation of the TUN ioctls, this is a thin handle
//! over it for callers that need flags `offload_tun::TunDevice` does not
//! offer.
//!
//! The device is created in the network namespace of the thread that calls
//! [`TunDevice::open`] (the tun file's socket takes `current`'s namespace at
//! `open()` time) and, not being persistent, is destroyed by the kernel when
//! the fd closes. Reads and writes are plain `read(2)`/`write(2)` of one frame
//! each (with a `virtio_net_hdr` in front when [`IFF_VNET_HDR`] is set).

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use offload_tun::sys;

use crate::error::{Error, Result};
use crate::rtnl::check_ifname;

pub use offload_tun::sys::{
    IFF_MULTI_QUEUE, IFF_NAPI, IFF_NAPI_FRAGS, IFF_NO_PI, IFF_TAP, IFF_TUN, IFF_VNET_HDR,
};

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
        let fd = sys::open_tun().map_err(|e| Error::sys("open /dev/net/tun", e))?;
        let actual = sys::set_iff(fd.as_fd(), name, flags)
            .map_err(|e| Error::sys(format!("TUNSETIFF {name} flags {flags:#06x}"), e))?;
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
        sys::get_iff(self.fd.as_fd())
            .map(|(_, flags)| flags)
            .map_err(|e| Error::sys(format!("TUNGETIFF {}", self.name), e))
    }

    /// `TUNSETOFFLOAD`: which offloads the user side accepts (bits in
    /// [`offload`]). Unknown bits make the kernel fail with `EINVAL`, which
    /// is how userspace probes for support.
    pub fn set_offload(&self, flags: u32) -> Result<()> {
        sys::set_offload(self.fd.as_fd(), flags)
            .map_err(|e| Error::sys(format!("TUNSETOFFLOAD {} {flags:#x}", self.name), e))
    }

    /// `TUNSETVNETHDRSZ`: size of the `virtio_net_hdr` in front of each
    /// frame (10, 12, 20 or 24; the kernel requires >= 10).
    pub fn set_vnet_hdr_size(&self, size: i32) -> Result<()> {
        let bad = || {
            Error::sys(
                format!("TUNSETVNETHDRSZ {} {size}", self.name),
                io::Error::from_raw_os_error(libc::EINVAL),
            )
        };
        let size_u = usize::try_from(size).map_err(|_| bad())?;
        sys::set_vnet_hdr_size(self.fd.as_fd(), size_u)
            .map_err(|e| Error::sys(format!("TUNSETVNETHDRSZ {} {size}", self.name), e))
    }

    /// Writes one frame. With `IFF_NAPI` the frame has been through GRO (and
    /// possibly delivered) when this returns, unless softirq processing was
    /// deferred to `ksoftirqd`.
    pub fn write_frame(&self, frame: &[u8]) -> io::Result<usize> {
        sys::write2(self.fd.as_fd(), &[], frame)
    }

    /// Reads one frame the kernel transmitted on the device (blocking unless
    /// the fd was made non-blocking).
    pub fn read_frame(&self, buf: &mut [u8]) -> io::Result<usize> {
        sys::read(self.fd.as_fd(), buf)
    }
}

impl AsFd for TunDevice {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
