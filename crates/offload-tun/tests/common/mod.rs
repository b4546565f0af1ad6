//! Scaffolding for the kernel tests: namespaces with a TUN device, a tiny
//! hand-driven TCP peer on the TUN side, and the kernel's own software GSO
//! as an oracle (a `PACKET_VNET_HDR` socket transmitting a super-packet on
//! a veth whose TX offloads are off, captured on its peer).
//!
//! Everything lives in anonymous namespaces (`offload_sys::NetNs`): the
//! kernel removes them, devices included, when the test lets go, on panic
//! too.

#![allow(dead_code)]

use std::io;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

use offload::build::{FrameSpec, L2Spec, TcpSpec};
use offload::vnet::VnetHdr;
use offload_sys::ethtool::Ethtool;
use offload_sys::packet::{CaptureOptions, PacketSocket};
use offload_sys::rtnl::Rtnl;
use offload_sys::sysfs::write_sysctl;
use offload_sys::NetNs;
use offload_tun::{TunDevice, TunOptions};

/// Fails (never skips) when not root.
pub fn require_root() {
    // SAFETY: geteuid(2) has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "this test needs root (CAP_NET_ADMIN); run it as root"
    );
    assert!(
        std::path::Path::new("/dev/net/tun").exists(),
        "this test needs /dev/net/tun"
    );
}

/// Converts this crate's error for `NetNs::run` closures.
pub fn lab<E: std::fmt::Display>(e: E) -> offload_sys::Error {
    offload_sys::Error::Sys {
        op: e.to_string(),
        source: io::Error::other("offload-tun"),
    }
}

/// A fresh namespace without IPv6 (no router solicitations or MLD reports
/// on the TUN) and with `lo` up.
pub fn namespace() -> NetNs {
    let ns = NetNs::new_anonymous().expect("namespace");
    ns.run(|| {
        write_sysctl("net/ipv6/conf/all/disable_ipv6", "1")?;
        write_sysctl("net/ipv6/conf/default/disable_ipv6", "1")?;
        let mut rtnl = Rtnl::open()?;
        let lo = rtnl.link_by_name("lo")?;
        rtnl.set_up(lo.index, true)
    })
    .expect("namespace setup");
    ns
}

/// A fresh namespace with IPv6 on, without duplicate address detection
/// (addresses usable at once), and with `lo` up.
pub fn namespace_v6() -> NetNs {
    let ns = NetNs::new_anonymous().expect("namespace");
    ns.run(|| {
        write_sysctl("net/ipv6/conf/all/accept_dad", "0")?;
        write_sysctl("net/ipv6/conf/default/accept_dad", "0")?;
        let mut rtnl = Rtnl::open()?;
        let lo = rtnl.link_by_name("lo")?;
        rtnl.set_up(lo.index, true)
    })
    .expect("namespace setup");
    ns
}

/// Opens TUN `name` in `ns`, gives it `addr`/24 (IPv4) or /64 (IPv6) and
/// brings it up.
pub fn tun_in(ns: &NetNs, name: &str, addr: impl Into<IpAddr>, opts: TunOptions) -> TunDevice {
    let addr = addr.into();
    ns.run(|| {
        let dev = TunDevice::open(name, opts).map_err(lab)?;
        let mut rtnl = Rtnl::open()?;
        let l = rtnl.link_by_name(name)?;
        rtnl.add_address(l.index, addr, if addr.is_ipv4() { 24 } else { 64 })?;
        rtnl.set_up(l.index, true)?;
        Ok(dev)
    })
    .expect("tun setup")
}

/// The TCP fields a test looks at (IPv4, or IPv6 without extension headers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tcp4 {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub sport: u16,
    pub dport: u16,
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    pub window: u16,
    pub payload_off: usize,
    pub payload_len: usize,
}

/// Parses a TCP packet over IPv4, or over IPv6 without extension headers
/// (None for anything else).
pub fn parse_tcp4(p: &[u8]) -> Option<Tcp4> {
    let (ihl, tot, src, dst): (usize, usize, IpAddr, IpAddr) = match p.first()? >> 4 {
        4 if p.len() >= 40 && p[9] == 6 => (
            usize::from(p[0] & 15) * 4,
            usize::from(u16::from_be_bytes([p[2], p[3]])).min(p.len()),
            <[u8; 4]>::try_from(&p[12..16]).unwrap().into(),
            <[u8; 4]>::try_from(&p[16..20]).unwrap().into(),
        ),
        6 if p.len() >= 60 && p[6] == 6 => (
            40,
            (40 + usize::from(u16::from_be_bytes([p[4], p[5]]))).min(p.len()),
            <[u8; 16]>::try_from(&p[8..24]).unwrap().into(),
            <[u8; 16]>::try_from(&p[24..40]).unwrap().into(),
        ),
        _ => return None,
    };
    let t = &p[ihl..];
    let doff = usize::from(t[12] >> 4) * 4;
    Some(Tcp4 {
        src,
        dst,
        sport: u16::from_be_bytes([t[0], t[1]]),
        dport: u16::from_be_bytes([t[2], t[3]]),
        seq: u32::from_be_bytes(t[4..8].try_into().unwrap()),
        ack: u32::from_be_bytes(t[8..12].try_into().unwrap()),
        flags: t[13],
        window: u16::from_be_bytes([t[14], t[15]]),
        payload_off: ihl + doff,
        payload_len: tot - ihl - doff,
    })
}

/// The addresses and ports of one direction of a TCP connection.
#[derive(Debug, Clone, Copy)]
pub struct Conn {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub sport: u16,
    pub dport: u16,
}

impl Conn {
    pub fn new(src: impl Into<IpAddr>, dst: impl Into<IpAddr>, sport: u16, dport: u16) -> Self {
        Conn {
            src: src.into(),
            dst: dst.into(),
            sport,
            dport,
        }
    }
}

/// A TCP packet without link header, with correct checksums.
pub fn tcp4(c: &Conn, seq: u32, ack: u32, flags: u8, options: Vec<u8>, payload: &[u8]) -> Vec<u8> {
    let mut t = TcpSpec::data(c.sport, c.dport, seq);
    t.ack = ack;
    t.flags = flags;
    t.window = 65535;
    t.options = options;
    let mut s = match (c.src, c.dst) {
        (IpAddr::V4(a), IpAddr::V4(b)) => FrameSpec::tcp4(a.octets(), b.octets(), t),
        (IpAddr::V6(a), IpAddr::V6(b)) => FrameSpec::tcp6(a.octets(), b.octets(), t),
        _ => panic!("mixed address families in {c:?}"),
    }
    .payload(payload.to_vec());
    s.l2 = L2Spec::None;
    s.build()
}

/// Reads raw packets from `dev` until `want` accepts one (its vnet header
/// and packet are returned). Panics when none comes within 20 s, so a
/// broken test fails instead of hanging.
pub fn read_until(
    dev: &mut TunDevice,
    want: impl FnMut(Option<&VnetHdr>, &[u8]) -> bool,
) -> (Option<VnetHdr>, Vec<u8>) {
    read_until_within(dev, Duration::from_secs(20), want)
        .unwrap_or_else(|| panic!("no wanted packet from {} within 20 s", dev.name()))
}

/// [`read_until`] for at most `within`: None when no packet `want`
/// accepts arrived in that time (a caller that must resend, as a TCP
/// client resends its SYN, asks this).
pub fn read_until_within(
    dev: &mut TunDevice,
    within: Duration,
    mut want: impl FnMut(Option<&VnetHdr>, &[u8]) -> bool,
) -> Option<(Option<VnetHdr>, Vec<u8>)> {
    let deadline = std::time::Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() || !dev.wait_readable(Some(left)).unwrap() {
            return None;
        }
        let Some(raw) = dev.read_raw().unwrap() else {
            continue;
        };
        if want(raw.vnet.as_ref(), raw.packet) {
            return Some((raw.vnet, raw.packet.to_vec()));
        }
    }
}

/// The kernel's software GSO as a function: a namespace with a veth pair,
/// TX offloads off on `ofl-ga` (so the stack segments and checksums in
/// software), GRO off on `ofl-gb`, a `PACKET_VNET_HDR` sender on `ofl-ga`
/// and a capture socket on `ofl-gb`.
pub struct KernelGso {
    _ns: NetNs,
    tx: OwnedFd,
    ifindex: i32,
    rx: PacketSocket,
    dst_mac: [u8; 6],
    src_mac: [u8; 6],
    marker: u32,
}

const PACKET_VNET_HDR: libc::c_int = 15;

impl KernelGso {
    pub fn new() -> Self {
        let ns = namespace();
        let (tx, ifindex, rx, src_mac, dst_mac) = ns
            .run(|| {
                let mut rtnl = Rtnl::open()?;
                rtnl.create_veth("ofl-ga", "ofl-gb")?;
                let a = rtnl.link_by_name("ofl-ga")?;
                let b = rtnl.link_by_name("ofl-gb")?;
                let et = Ethtool::open()?;
                for f in [
                    "tx-checksum-ip-generic",
                    "tx-tcp-segmentation",
                    "tx-tcp-ecn-segmentation",
                    "tx-tcp-mangleid-segmentation",
                    "tx-tcp6-segmentation",
                    "tx-udp-segmentation",
                    "tx-generic-segmentation",
                ] {
                    et.set_feature("ofl-ga", f, false)?;
                }
                et.set_feature("ofl-gb", "rx-gro", false)?;
                // Peer first: when `ofl-ga` comes up its carrier is then on
                // at once and its qdisc is activated synchronously, not by
                // linkwatch later (until then transmissions are dropped).
                rtnl.set_up(b.index, true)?;
                rtnl.set_up(a.index, true)?;
                let rx = PacketSocket::open(b.index, CaptureOptions::default())?;
                // SAFETY: socket(2) with constant arguments; checked below
                // and owned exactly once.
                let raw = unsafe {
                    libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0)
                };
                if raw < 0 {
                    return Err(offload_sys::Error::Sys {
                        op: "socket(AF_PACKET)".into(),
                        source: io::Error::last_os_error(),
                    });
                }
                // SAFETY: fresh fd owned by nobody else.
                let tx = unsafe { OwnedFd::from_raw_fd(raw) };
                let one: libc::c_int = 1;
                // SAFETY: setsockopt reads one int from a live local.
                let r = unsafe {
                    libc::setsockopt(
                        tx.as_raw_fd(),
                        libc::SOL_PACKET,
                        PACKET_VNET_HDR,
                        (&one as *const libc::c_int).cast(),
                        std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                    )
                };
                if r < 0 {
                    return Err(offload_sys::Error::Sys {
                        op: "PACKET_VNET_HDR".into(),
                        source: io::Error::last_os_error(),
                    });
                }
                let mac = |m: &[u8]| -> [u8; 6] { m.try_into().unwrap_or([0; 6]) };
                Ok((tx, a.index as i32, rx, mac(&a.mac), mac(&b.mac)))
            })
            .expect("GSO oracle setup");
        let mut k = KernelGso {
            _ns: ns,
            tx,
            ifindex,
            rx,
            dst_mac,
            src_mac,
            marker: 0,
        };
        // The path is ready once a marker makes it through.
        let ready = (0..200).any(|_| k.marker_round_trip(Duration::from_millis(100)));
        assert!(
            ready,
            "kernel GSO oracle: the veth pair never passed a frame"
        );
        k
    }

    /// Sends a numbered marker frame (local experimental ethertype) and
    /// collects the frames captured before it; `None` if it did not come
    /// back within `wait`. Stale markers of earlier rounds are skipped.
    fn marker_round_trip_collect(&mut self, wait: Duration) -> Option<Vec<Vec<u8>>> {
        self.marker += 1;
        let mut body = vec![0u8; 46];
        body[..4].copy_from_slice(&self.marker.to_be_bytes());
        self.send_raw_ethertype(0x88b5, &body);
        let mut out = Vec::new();
        loop {
            let c = self.rx.recv(Some(wait)).expect("capture")?;
            if u16::from_be_bytes([c.frame[12], c.frame[13]]) == 0x88b5 {
                if c.frame[14..18] == self.marker.to_be_bytes() {
                    return Some(out);
                }
                continue;
            }
            out.push(c.frame[14..].to_vec());
        }
    }

    fn marker_round_trip(&mut self, wait: Duration) -> bool {
        self.marker_round_trip_collect(wait).is_some()
    }

    fn send(&self, hdr: &VnetHdr, ip_packet: &[u8]) {
        let mut frame = Vec::with_capacity(10 + 14 + ip_packet.len());
        let mut h = *hdr;
        h.num_buffers = None;
        if h.flags & offload::vnet::flags::NEEDS_CSUM != 0 {
            h.csum_start += 14;
        }
        h.hdr_len = h.hdr_len.saturating_add(14);
        let mut hb = [0u8; 10];
        h.encode(&mut hb);
        frame.extend_from_slice(&hb);
        frame.extend_from_slice(&self.dst_mac);
        frame.extend_from_slice(&self.src_mac);
        let et: u16 = if ip_packet[0] >> 4 == 6 {
            0x86dd
        } else {
            0x0800
        };
        frame.extend_from_slice(&et.to_be_bytes());
        frame.extend_from_slice(ip_packet);
        // SAFETY: a zeroed sockaddr_ll is valid; the fields are set below.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_ifindex = self.ifindex;
        sll.sll_halen = 6;
        sll.sll_addr[..6].copy_from_slice(&self.dst_mac);
        // SAFETY: sendto reads `frame` and `sll`, both live for the call.
        let n = unsafe {
            libc::sendto(
                self.tx.as_raw_fd(),
                frame.as_ptr().cast(),
                frame.len(),
                0,
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        assert!(
            n >= 0,
            "PACKET_VNET_HDR send of {} bytes: {}",
            frame.len(),
            io::Error::last_os_error()
        );
    }

    /// What the kernel puts on the wire for `ip_packet` with `hdr`: the IP
    /// packets (Ethernet header removed) its GSO and checksum code make.
    pub fn segment(&mut self, hdr: &VnetHdr, ip_packet: &[u8]) -> Vec<Vec<u8>> {
        self.send(hdr, ip_packet);
        // A veth keeps order: everything captured before the marker that
        // follows belongs to the packet.
        self.marker_round_trip_collect(Duration::from_secs(20))
            .expect("kernel GSO oracle: marker not captured within 20 s")
    }

    fn send_raw_ethertype(&self, et: u16, body: &[u8]) {
        let mut frame = vec![0u8; 10];
        frame.extend_from_slice(&self.dst_mac);
        frame.extend_from_slice(&self.src_mac);
        frame.extend_from_slice(&et.to_be_bytes());
        frame.extend_from_slice(body);
        // SAFETY: as in `send`.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_ifindex = self.ifindex;
        // SAFETY: sendto reads `frame` and `sll`, both live for the call.
        let n = unsafe {
            libc::sendto(
                self.tx.as_raw_fd(),
                frame.as_ptr().cast(),
                frame.len(),
                0,
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        assert!(n >= 0, "marker send: {}", io::Error::last_os_error());
    }
}

/// A deterministic byte pattern (not periodic at any small stride, so a
/// misplaced or repeated segment shows up).
pub fn pattern(len: usize, seed: u32) -> Vec<u8> {
    let mut x = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}
