//! [`TunDevice`]: one queue of a TUN or TAP device, with or without
//! `virtio_net_hdr`.
//!
//! The device is created in the network namespace of the calling thread
//! (the tun socket takes `current`'s namespace at `open()`) and, unless made
//! persistent, disappears when the last fd on it closes.
//!
//! Whether packets carry a vnet header is decided by the kernel's flags for
//! the device, read back with `TUNGETIFF`, never by what the caller hoped:
//! an fd handed over by another process (Android's VpnService, a
//! supervisor, a device re-attached without `IFF_VNET_HDR`) may not have
//! one, and reading a header that is not there eats the first 10 bytes of
//! every IP packet.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::Duration;

use offload::vnet::{VnetHdr, HDR_LEN, HDR_LEN_V1};
use offload::{LinkKind, RxChecksum};

use crate::arena::FrameArena;
use crate::error::{Result, TunError};
use crate::offloads::{negotiate, Negotiation, Offloads};
use crate::read::{
    split_into, split_packet, split_packet_into, split_packet_with_checksum, RawPacket, Split,
};
use offload_sys::tun as sys;

/// Largest packet read: 64 KiB (TUN's `tso_max_size`) plus headers.
const READ_BUF: usize = 65536 + 256;

/// How to open a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TunOptions {
    /// TAP (Ethernet frames) instead of TUN (IP packets).
    pub tap: bool,
    /// `virtio_net_hdr` size: 10 (legacy) or 12 (v1, with `num_buffers`),
    /// or 0 for no `IFF_VNET_HDR` at all (then no offloads either).
    pub vnet_hdr_len: usize,
    /// Offloads to ask for; see [`negotiate`] for the fallback order.
    pub offloads: Offloads,
    /// `IFF_NAPI`: packets written enter the stack through the device's
    /// NAPI instance, i.e. through `napi_gro_receive` like frames from a
    /// NIC, so the kernel's GRO sees them (`drivers/net/tun.c`,
    /// `tun_get_user`, since 4.15; needs `CAP_NET_ADMIN`). The kernel GRO
    /// oracle's TAP uses it; a datapath normally does not.
    pub napi: bool,
}

impl Default for TunOptions {
    /// TUN, 12-byte header, every offload.
    fn default() -> Self {
        TunOptions {
            tap: false,
            vnet_hdr_len: HDR_LEN_V1,
            offloads: Offloads::ALL,
            napi: false,
        }
    }
}

impl TunOptions {
    /// TUN without vnet headers or offloads: one MTU-sized packet per read.
    pub fn plain() -> Self {
        TunOptions {
            tap: false,
            vnet_hdr_len: 0,
            offloads: Offloads::NONE,
            napi: false,
        }
    }
}

/// One queue of a TUN/TAP device.
#[derive(Debug)]
pub struct TunDevice {
    fd: OwnedFd,
    name: String,
    link: LinkKind,
    /// 0 when the kernel puts no vnet header in front of packets.
    vnet_hdr_len: usize,
    negotiation: Negotiation,
    buf: Vec<u8>,
}

impl TunDevice {
    /// Creates (or attaches to) device `name` in the calling thread's
    /// network namespace and negotiates offloads.
    pub fn open(name: &str, opts: TunOptions) -> Result<Self> {
        if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains(['\0', '/']) {
            return Err(TunError::InvalidOption(format!(
                "interface name {name:?} (1..=15 bytes, no NUL or '/')"
            )));
        }
        if ![0, HDR_LEN, HDR_LEN_V1].contains(&opts.vnet_hdr_len) {
            return Err(TunError::InvalidOption(format!(
                "vnet_hdr_len {} (0, 10 or 12)",
                opts.vnet_hdr_len
            )));
        }
        let fd = sys::open_tun().map_err(|e| TunError::os("open", "/dev/net/tun", e))?;
        let mut flags = sys::IFF_NO_PI | if opts.tap { sys::IFF_TAP } else { sys::IFF_TUN };
        if opts.vnet_hdr_len != 0 {
            flags |= sys::IFF_VNET_HDR;
        }
        if opts.napi {
            flags |= sys::IFF_NAPI;
        }
        let actual = sys::set_iff(fd.as_fd(), name, flags)
            .map_err(|e| TunError::os("TUNSETIFF", name, e))?;
        if opts.vnet_hdr_len != 0 {
            sys::set_vnet_hdr_size(fd.as_fd(), opts.vnet_hdr_len)
                .map_err(|e| TunError::os("TUNSETVNETHDRSZ", &actual, e))?;
        }
        Self::adopt(fd, actual, opts.offloads)
    }

    /// Adopts an fd already attached to a device (opened by another
    /// process or an earlier attach). The kernel's flags decide whether
    /// vnet headers are used; offloads are negotiated only when they are,
    /// and are switched off otherwise, because a device re-attached without
    /// `IFF_VNET_HDR` keeps the offloads of its previous owner and would
    /// hand out 64 KiB packets with unfinished checksums.
    pub fn from_fd(fd: OwnedFd, offloads: Offloads) -> Result<Self> {
        let (name, _) = sys::get_iff(fd.as_fd()).map_err(|e| TunError::os("TUNGETIFF", "fd", e))?;
        Self::adopt(fd, name, offloads)
    }

    fn adopt(fd: OwnedFd, name: String, offloads: Offloads) -> Result<Self> {
        let (_, kflags) =
            sys::get_iff(fd.as_fd()).map_err(|e| TunError::os("TUNGETIFF", &name, e))?;
        if kflags & sys::IFF_NO_PI == 0 {
            return Err(TunError::Unsupported {
                dev: name,
                what: "packet information prefix (IFF_NO_PI not set)",
            });
        }
        let link = if kflags & sys::IFF_TAP != 0 {
            LinkKind::Ethernet
        } else {
            LinkKind::RawIp
        };
        let vnet_hdr_len = if kflags & sys::IFF_VNET_HDR != 0 {
            let n = sys::get_vnet_hdr_size(fd.as_fd())
                .map_err(|e| TunError::os("TUNGETVNETHDRSZ", &name, e))?;
            if !(HDR_LEN..=24).contains(&n) {
                return Err(TunError::Unsupported {
                    dev: name,
                    what: "vnet header size outside 10..=24 bytes",
                });
            }
            n
        } else {
            0
        };
        let want = if vnet_hdr_len == 0 {
            Offloads::NONE
        } else {
            offloads
        };
        let negotiation = negotiate(want, |o| sys::set_offload(fd.as_fd(), o.bits()))
            .map_err(|e| TunError::os("TUNSETOFFLOAD", &name, e))?;
        Ok(TunDevice {
            fd,
            name,
            link,
            vnet_hdr_len,
            negotiation,
            buf: vec![0; READ_BUF],
        })
    }

    /// The device name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `RawIp` for TUN, `Ethernet` for TAP.
    pub fn link(&self) -> LinkKind {
        self.link
    }

    /// Size of the vnet header in front of each packet; 0 when there is none.
    pub fn vnet_hdr_len(&self) -> usize {
        self.vnet_hdr_len
    }

    /// The offloads the kernel granted.
    pub fn offloads(&self) -> Offloads {
        self.negotiation.granted
    }

    /// The whole negotiation, attempts included.
    pub fn negotiation(&self) -> &Negotiation {
        &self.negotiation
    }

    /// The kernel's current flags for the device (`TUNGETIFF`).
    pub fn kernel_flags(&self) -> Result<u16> {
        sys::get_iff(self.fd.as_fd())
            .map(|(_, f)| f)
            .map_err(|e| TunError::os("TUNGETIFF", &self.name, e))
    }

    /// A second handle on the same queue (`dup`), with its own read buffer:
    /// one thread can read while another writes.
    pub fn try_clone(&self) -> Result<Self> {
        Ok(TunDevice {
            fd: sys::dup(self.fd.as_fd()).map_err(|e| TunError::os("dup", &self.name, e))?,
            name: self.name.clone(),
            link: self.link,
            vnet_hdr_len: self.vnet_hdr_len,
            negotiation: self.negotiation.clone(),
            buf: vec![0; READ_BUF],
        })
    }

    /// `TUNSETPERSIST`: keep the device when the last fd closes.
    pub fn set_persist(&self, on: bool) -> Result<()> {
        sys::set_persist(self.fd.as_fd(), on)
            .map_err(|e| TunError::os("TUNSETPERSIST", &self.name, e))
    }

    /// Switches `O_NONBLOCK` (shared with clones: it is a file flag).
    pub fn set_nonblocking(&self, on: bool) -> Result<()> {
        sys::set_nonblocking(self.fd.as_fd(), on).map_err(|e| TunError::os("fcntl", &self.name, e))
    }

    /// Waits for a packet to read; `false` on timeout.
    pub fn wait_readable(&self, timeout: Option<Duration>) -> Result<bool> {
        sys::wait_readable(self.fd.as_fd(), timeout)
            .map_err(|e| TunError::os("poll", &self.name, e))
    }

    /// Reads one packet as the kernel sent it. `Ok(None)` when the fd is
    /// non-blocking and nothing is queued.
    pub fn read_raw(&mut self) -> Result<Option<RawPacket<'_>>> {
        let Some((vnet, n)) = self.read_one()? else {
            return Ok(None);
        };
        Ok(Some(RawPacket {
            vnet,
            packet: &mut self.buf[self.vnet_hdr_len..n],
        }))
    }

    /// Reads one packet and hands out wire-sized packets with complete
    /// checksums (a super-packet becomes its segments). Returns what was
    /// done, or `None` when a non-blocking fd had nothing.
    pub fn read_packets(&mut self, out: &mut impl FnMut(&[u8])) -> Result<Option<Split>> {
        let Some((vnet, n)) = self.read_one()? else {
            return Ok(None);
        };
        let packet = &mut self.buf[self.vnet_hdr_len..n];
        split_packet(&self.name, vnet.as_ref(), self.link, packet, out).map(Some)
    }

    /// [`TunDevice::read_packets`], with what is known of each packet's
    /// checksum (see [`crate::split_packet_with_checksum`]): pass it to
    /// [`crate::Coalescer::push_with_checksum`] so that GRO verifies only
    /// the checksums nobody has computed or vouched for.
    pub fn read_packets_with_checksum(
        &mut self,
        out: &mut impl FnMut(&[u8], RxChecksum),
    ) -> Result<Option<Split>> {
        let Some((vnet, n)) = self.read_one()? else {
            return Ok(None);
        };
        let packet = &mut self.buf[self.vnet_hdr_len..n];
        split_packet_with_checksum(&self.name, vnet.as_ref(), self.link, packet, out).map(Some)
    }

    /// [`TunDevice::read_packets_with_checksum`] into `arena`: a
    /// super-packet is segmented straight into it (see
    /// [`crate::split_packet_into`]), ready for a zero-copy
    /// [`crate::Coalescer`] ([`crate::Coalescer::arena_mut`],
    /// [`crate::Coalescer::push_staged`]).
    ///
    /// While the arena's super-packet area has room for a whole read, the
    /// packet is read there and kept, so that the coalescer can write a
    /// merged super-packet's payload as one range of it (see
    /// `FrameArena`); otherwise it is read into the device's buffer.
    pub fn read_into(&mut self, arena: &mut FrameArena) -> Result<Option<Split>> {
        let need = self.buf.len();
        let Some(at) = arena.src_room(need) else {
            let Some((vnet, n)) = self.read_one()? else {
                return Ok(None);
            };
            let packet = &mut self.buf[self.vnet_hdr_len..n];
            return split_packet_into(&self.name, vnet.as_ref(), self.link, packet, arena)
                .map(Some);
        };
        let h = self.vnet_hdr_len;
        let (src, bytes, frames) = (&mut arena.src, &mut arena.bytes, &mut arena.frames);
        let Some((vnet, n)) = self.read_one_into(at, src, need)? else {
            return Ok(None);
        };
        let packet = &mut src[at + h..at + n];
        let split = split_into(
            &self.name,
            vnet.as_ref(),
            self.link,
            packet,
            bytes,
            frames,
            Some(at + h),
        )?;
        // Kept only when segments refer to it.
        if matches!(split, Split::Segmented(_)) {
            arena.src_used = at + n;
        }
        Ok(Some(split))
    }

    /// Reads into the buffer: the decoded header and the bytes read.
    fn read_one(&mut self) -> Result<Option<(Option<VnetHdr>, usize)>> {
        let (at, need) = (0, self.buf.len());
        let mut buf = std::mem::take(&mut self.buf);
        let r = self.read_one_into(at, &mut buf, need);
        self.buf = buf;
        r
    }

    /// Reads into `buf[at..at + len]`: the decoded header and the bytes
    /// read (counted from `at`).
    fn read_one_into(
        &self,
        at: usize,
        buf: &mut [u8],
        len: usize,
    ) -> Result<Option<(Option<VnetHdr>, usize)>> {
        let buf = &mut buf[at..at + len];
        let n = loop {
            match sys::read(self.fd.as_fd(), buf) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
                Err(e) => return Err(TunError::os("read", &self.name, e)),
            }
        };
        let h = self.vnet_hdr_len;
        if n < h {
            return Err(TunError::ShortRead {
                dev: self.name.clone(),
                len: n,
                hdr_len: h,
            });
        }
        let vnet = if h == 0 {
            None
        } else {
            Some(
                VnetHdr::decode(&buf[..n], h).map_err(|source| TunError::BadVnetHeader {
                    dev: self.name.clone(),
                    len: n,
                    source,
                })?,
            )
        };
        Ok(Some((vnet, n)))
    }

    /// The vnet header that goes in front of a written packet and its
    /// length (0 on a device without vnet headers): `vnet` encoded, or all
    /// zeros for `None` (a complete, non-GSO packet); `EINVAL` for a header
    /// on a device without them.
    fn vnet_prefix(&self, vnet: Option<&VnetHdr>) -> io::Result<([u8; 24], usize)> {
        let mut hdr = [0u8; 24];
        let h = self.vnet_hdr_len.min(hdr.len());
        match vnet {
            Some(v) if h != 0 => v.encode(&mut hdr[..h]),
            Some(_) => return Err(io::Error::from_raw_os_error(libc::EINVAL)),
            None => {}
        }
        Ok((hdr, h))
    }

    /// Writes one packet. On a device with vnet headers, `vnet` goes in
    /// front (`None`: an all-zero header, i.e. a complete, non-GSO packet);
    /// on one without, `vnet` must be `None`.
    pub fn write_packet(&self, vnet: Option<&VnetHdr>, packet: &[u8]) -> io::Result<()> {
        let (hdr, h) = self.vnet_prefix(vnet)?;
        loop {
            match sys::write2(self.fd.as_fd(), &hdr[..h], packet) {
                Ok(_) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

impl TunDevice {
    /// Writes one packet made of `parts`, in order, with one `writev(2)`:
    /// the vnet header (as in [`TunDevice::write_packet`]) and then the
    /// parts, so that a super-packet held as rewritten headers plus payload
    /// ranges borrowed from other buffers (GRO's zero-copy delivery) is
    /// never assembled in userspace; the kernel copies each range once,
    /// into the skb. At most [`offload_sys::tun::IOV_MAX`]` - 1` parts (`EINVAL`
    /// otherwise, before any system call).
    pub fn write_vectored(
        &self,
        vnet: Option<&VnetHdr>,
        parts: &[io::IoSlice<'_>],
    ) -> io::Result<()> {
        let (hdr, h) = self.vnet_prefix(vnet)?;
        let skip = usize::from(h == 0);
        // The iovec list on the stack for up to 63 parts (a 64 KiB TCP
        // super-packet of 1448-byte segments has 46), on the heap above.
        const ON_STACK: usize = 64;
        let mut stack = [io::IoSlice::new(&[]); ON_STACK];
        let mut heap = Vec::new();
        let iov: &[io::IoSlice<'_>] = if parts.len() < ON_STACK {
            stack[0] = io::IoSlice::new(&hdr[..h]);
            stack[1..=parts.len()].copy_from_slice(parts);
            &stack[skip..=parts.len()]
        } else {
            heap.reserve(parts.len() + 1);
            if h != 0 {
                heap.push(io::IoSlice::new(&hdr[..h]));
            }
            heap.extend_from_slice(parts);
            &heap
        };
        loop {
            match sys::writev(self.fd.as_fd(), iov) {
                Ok(_) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

impl AsFd for TunDevice {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
