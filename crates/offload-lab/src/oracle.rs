//! The live-kernel GRO oracle: hand it a train of Ethernet frames, get back
//! what the running kernel's GRO made of them, byte for byte.
//!
//! Setup: an anonymous network
//! namespace ([`NetNs`]) holding a TAP device opened with
//! `IFF_TAP | IFF_NO_PI | IFF_NAPI`, so every `write()` enters the stack
//! through `napi_gro_receive`; a non-zero `gro_flush_timeout` so held packets
//! survive from one write (one NAPI poll) to the next; an `AF_PACKET` socket
//! on the TAP, which sees packets after GRO.
//!
//! # How a train is run, and why it is fast and exact
//!
//! With `gro_flush_timeout` set, each NAPI poll ends in
//! `napi_complete_done`, which flushes only the held packets whose `age`
//! (the jiffy they arrived in) is older than the current jiffy, then re-arms
//! the flush timer. So a train written inside one jiffy is coalesced exactly
//! as one NAPI batch would be, and its leftovers are flushed by the first
//! poll of a later jiffy. [`KernelGro::run_train`] uses this instead of
//! sleeping past the flush timer:
//!
//! 1. wait until the jiffy changes (`CLOCK_MONOTONIC_COARSE` advances only
//!    on the tick that also advances `jiffies`), so the whole jiffy is
//!    available for the train;
//! 2. write the frames back to back;
//! 3. write sentinel **A** (an Ethernet frame with an experimental EtherType,
//!    which GRO passes through untouched) and read until it is captured:
//!    every train frame has then been through GRO (the TAP queue is FIFO);
//! 4. wait for the next jiffy and write sentinel **B**: its poll flushes
//!    every held packet (all are older than the current jiffy);
//! 5. write sentinel **C** and read until it is captured: C's poll starts
//!    only after B's poll delivered everything, so the capture is complete.
//!
//! A run is *clean* when steps 2–3 happened in one jiffy and no gap between
//! two writes reached the flush timeout: then no jiffy boundary or timer
//! split the train, and the answer is the kernel's answer. Otherwise the
//! train is replayed (at most [`MAX_ATTEMPTS`] runs) and the answer with the
//! fewest frames kept (a jiffy boundary can only add flushes). Step 1 is skipped when the previous train's step 4 saw a
//! tick less than half a jiffy ago, so back-to-back trains cost about one
//! jiffy each (4 ms at HZ=250), not the 3 × 20 ms of a timer-based wait.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, UdpSocket};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rustix::time::{ClockId, Timespec};

use offload::gro::{GRO_LEGACY_MAX_SIZE, GRO_MAX_SIZE};
use offload::vnet::VnetHdr;
use offload::{Delivered, GroEngine, Input, LinkKind};
use offload_sys::error::{Error, Result};
use offload_sys::ethtool::Ethtool;
use offload_sys::netns::NetNs;
use offload_sys::packet::{setsockopt_int, CaptureOptions, PacketSocket, PACKET_OUTGOING};
use offload_sys::rtnl::{Rtnl, VxlanParams};
use offload_sys::sysfs::{write_sysctl, Sysfs};
use offload_tun::{Offloads, TunDevice, TunOptions};

/// Name of the oracle's TAP device (inside its private namespace).
pub const TAP_NAME: &str = "ofl0";
/// Name of the oracle's VXLAN device, when one is configured.
pub const VXLAN_NAME: &str = "oflvx0";
/// Name of the oracle's Geneve device, when one is configured.
pub const GENEVE_NAME: &str = "oflgnv0";
/// The TAP's MAC address (locally administered).
pub const TAP_MAC: [u8; 6] = [0x02, 0x6f, 0x66, 0x6c, 0x00, 0x01];
/// The MAC address trains should use as source (a permanent neighbour).
pub const PEER_MAC: [u8; 6] = [0x02, 0x6f, 0x66, 0x6c, 0x00, 0x02];
/// The TAP's IPv4 address (TEST-NET-1, RFC 5737), prefix /24.
pub const TAP_IPV4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
/// The IPv4 source address trains should use.
pub const PEER_IPV4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);
/// The TAP's IPv6 address (documentation prefix, RFC 3849), prefix /64.
pub const TAP_IPV6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
/// The IPv6 source address trains should use.
pub const PEER_IPV6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);
/// At most this many runs of one train (the first run plus three replays).
pub const MAX_ATTEMPTS: u32 = 4;

/// EtherType of the sentinel frames (IEEE 802 local experimental 1): GRO
/// has no handler for it, so it neither merges nor flushes anything.
const SENTINEL_ETHERTYPE: [u8; 2] = [0x88, 0xb5];
const SENTINEL_MAGIC: &[u8; 12] = b"offload-lab\0";
const SENTINEL_SRC: [u8; 6] = [0x02, 0x6f, 0x66, 0x6c, 0xff, 0xff];
/// How long to wait for a sentinel before declaring the oracle stuck.
const SENTINEL_TIMEOUT: Duration = Duration::from_secs(5);

/// `frames` (Ethernet, 1 us apart, numbered from 1) through `engine`, then
/// the end of the train: the engine's side of a train [`KernelGro`] puts
/// through the kernel (one NAPI batch, flushed at its end). Every place that
/// sets the engine beside the kernel feeds it this way: the lab's model
/// lines and the conformance suite.
pub fn engine_train<F: FnMut(&Delivered<'_>)>(
    engine: &mut GroEngine,
    frames: &[Vec<u8>],
    push: &mut F,
) {
    for (i, f) in frames.iter().enumerate() {
        engine.receive(
            Input {
                data: f,
                link: LinkKind::Ethernet,
                timestamp_ns: i as u64 * 1_000,
                frame: i as u64 + 1,
                orig_len: f.len() as u32,
            },
            push,
        );
    }
    engine.finish(push);
}

/// A VXLAN device for the oracle to create (GRO only
/// looks inside VXLAN when a VXLAN socket listens on the destination port).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VxlanConf {
    /// VXLAN Network Identifier.
    pub vni: u32,
    /// UDP port the device listens on (4789 is the IANA port).
    pub port: u16,
}

/// The GRO-relevant configuration of the oracle's TAP device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroKnobs {
    /// `gro_max_size` (IPv6 and non-IP), 1..=524280.
    pub gro_max_size: u32,
    /// `gro_ipv4_max_size`, 1..=524280.
    pub gro_ipv4_max_size: u32,
    /// `gro_flush_timeout`. Must be non-zero for anything to merge across
    /// writes; 20 ms is the reference setting.
    pub flush_timeout: Duration,
    /// Ports on which UDP sockets with `UDP_GRO` listen on the TAP's IPv4 and
    /// IPv6 addresses (plain UDP is coalesced only for such sockets, or with
    /// the forwarding features below).
    pub udp_gro_ports: Vec<u16>,
    /// ethtool `rx-udp-gro-forwarding`.
    pub udp_gro_forwarding: bool,
    /// ethtool `rx-gro-list` (fraglist GRO).
    pub gro_list: bool,
    /// A VXLAN device listening on the TAP's IPv4 address, if any.
    pub vxlan: Option<VxlanConf>,
    /// Bind that VXLAN device to the TAP's IPv6 address instead (outer IPv6).
    pub vxlan_ipv6: bool,
    /// A Geneve device with this VNI listening on UDP port 6081 (GRO looks
    /// inside Geneve only while its socket exists). Needs `CONFIG_GENEVE`,
    /// which the Debian kernels booted by `scripts/kernel-vm.sh` have.
    pub geneve_vni: Option<u32>,
}

impl Default for GroKnobs {
    fn default() -> Self {
        GroKnobs {
            gro_max_size: GRO_LEGACY_MAX_SIZE,
            gro_ipv4_max_size: GRO_LEGACY_MAX_SIZE,
            flush_timeout: Duration::from_millis(20),
            udp_gro_ports: Vec::new(),
            udp_gro_forwarding: false,
            gro_list: false,
            vxlan: None,
            vxlan_ipv6: false,
            geneve_vni: None,
        }
    }
}

impl GroKnobs {
    fn validate(&self) -> Result<()> {
        for (knob, v) in [
            ("gro_max_size", self.gro_max_size),
            ("gro_ipv4_max_size", self.gro_ipv4_max_size),
        ] {
            if v == 0 || v > GRO_MAX_SIZE {
                return Err(Error::OutOfRange {
                    knob,
                    value: u64::from(v),
                    range: "1..=524280",
                });
            }
        }
        if let Some(v) = self.vxlan {
            if v.vni >= 1 << 24 {
                return Err(Error::OutOfRange {
                    knob: "vxlan vni",
                    value: u64::from(v.vni),
                    range: "0..16777216",
                });
            }
        }
        Ok(())
    }
}

/// What one [`KernelGro::run_train_detailed`] call observed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TrainOutcome {
    /// The frames the kernel delivered after GRO, in capture order.
    pub frames: Vec<Vec<u8>>,
    /// How many times the train was written.
    pub attempts: u32,
    /// The kept answer came from a clean run (no jiffy boundary or flush
    /// timer inside the train). `false` means: fewest frames of
    /// [`MAX_ATTEMPTS`] runs, none of them provably clean.
    pub clean: bool,
    /// With [`KernelGro::set_gso_meta`] on: for each frame, the
    /// `virtio_net_hdr` the kernel reported (`gso_size`, `gso_type` of a
    /// super-packet; `gso_type` 0 for a frame GRO left alone), `None` if the
    /// kernel would not describe it. Empty when off.
    pub gso: Vec<Option<VnetHdr>>,
}

/// The kernel's GRO, in a private namespace, as a function from trains to
/// frames. Dropping it closes every fd, and the kernel then destroys the
/// namespace with its devices.
#[derive(Debug)]
pub struct KernelGro {
    // Field order is drop order: sockets and devices before the namespace
    // handle (any order would do, the namespace dies with the last one).
    capture: PacketSocket,
    /// Second capture with `PACKET_VNET_HDR`, for GSO metadata only.
    meta: Option<PacketSocket>,
    udp: Vec<UdpSocket>,
    tap: TunDevice,
    rtnl: Rtnl,
    ethtool: Ethtool,
    sysfs: Sysfs,
    netns: NetNs,
    tap_index: u32,
    vxlan_index: Option<u32>,
    knobs: GroKnobs,
    nonce: u64,
    sentinel_seq: u64,
    /// Resolution of `CLOCK_MONOTONIC_COARSE`, i.e. one jiffy.
    tick: Duration,
    /// The last jiffy start we saw, and when we saw it.
    last_tick: Option<(Timespec, Instant)>,
}

impl KernelGro {
    /// Builds the namespace, the TAP and the capture, and applies `knobs`.
    pub fn new(knobs: GroKnobs) -> Result<Self> {
        knobs.validate()?;
        let netns = NetNs::new_anonymous()?;
        let (rtnl, ethtool, sysfs, tap, tap_index, capture) = netns.run(|| {
            let mut rtnl = Rtnl::open()?;
            let lo = rtnl.link_by_name("lo")?;
            rtnl.set_up(lo.index, true)?;
            // New devices copy net.ipv6.conf.default: no DAD, no router
            // solicitations, no RA processing, so the kernel stays quiet.
            for (key, val) in [
                ("accept_dad", "0"),
                ("dad_transmits", "0"),
                ("router_solicitations", "0"),
                ("accept_ra", "0"),
            ] {
                write_sysctl(&format!("net/ipv6/conf/default/{key}"), val)?;
            }
            // A TAP whose writes go through `napi_gro_receive` (IFF_NAPI),
            // with no vnet header: frames enter as a NIC's would.
            let opts = TunOptions {
                tap: true,
                vnet_hdr_len: 0,
                offloads: Offloads::NONE,
                napi: true,
            };
            let tap = TunDevice::open(TAP_NAME, opts).map_err(|e| {
                Error::sys(format!("open TAP {TAP_NAME}"), std::io::Error::other(e))
            })?;
            let index = rtnl.link_by_name(tap.name())?.index;
            rtnl.set_mac(index, TAP_MAC)?;
            rtnl.add_address(index, IpAddr::V4(TAP_IPV4), 24)?;
            rtnl.add_address(index, IpAddr::V6(TAP_IPV6), 64)?;
            rtnl.set_up(index, true)?;
            // Replies (RSTs, ICMP) then need no ARP/ND round.
            rtnl.add_neighbour(index, IpAddr::V4(PEER_IPV4), PEER_MAC)?;
            rtnl.add_neighbour(index, IpAddr::V6(PEER_IPV6), PEER_MAC)?;
            let ethtool = Ethtool::open()?;
            let sysfs = Sysfs::mount_here()?;
            let capture = PacketSocket::open(index, CaptureOptions::default())?;
            Ok((rtnl, ethtool, sysfs, tap, index, capture))
        })?;
        let tick = rustix::time::clock_getres(ClockId::MonotonicCoarse);
        let tick = Duration::new(tick.tv_sec as u64, tick.tv_nsec as u32);
        // Sentinels only have to differ from train frames and from earlier
        // sentinels of this oracle; pid + a per-process counter is enough.
        static ORACLES: AtomicU64 = AtomicU64::new(0);
        let nonce = u64::from(std::process::id()) << 32 | ORACLES.fetch_add(1, Ordering::Relaxed);
        let mut oracle = KernelGro {
            capture,
            meta: None,
            udp: Vec::new(),
            tap,
            rtnl,
            ethtool,
            sysfs,
            netns,
            tap_index,
            vxlan_index: None,
            knobs: GroKnobs::default(),
            nonce,
            sentinel_seq: 0,
            tick,
            last_tick: None,
        };
        oracle.ethtool.set_feature(TAP_NAME, "rx-gro", true)?;
        oracle.apply(knobs, true)?;
        Ok(oracle)
    }

    /// The TAP's MAC: trains must use it as destination.
    pub fn tap_mac(&self) -> [u8; 6] {
        TAP_MAC
    }
    /// The TAP's IPv4 address: trains' IPv4 destination.
    pub fn tap_ipv4(&self) -> Ipv4Addr {
        TAP_IPV4
    }
    /// The TAP's IPv6 address: trains' IPv6 destination.
    pub fn tap_ipv6(&self) -> Ipv6Addr {
        TAP_IPV6
    }
    /// Source MAC for trains (installed as a permanent neighbour).
    pub fn peer_mac(&self) -> [u8; 6] {
        PEER_MAC
    }
    /// Source IPv4 address for trains.
    pub fn peer_ipv4(&self) -> Ipv4Addr {
        PEER_IPV4
    }
    /// Source IPv6 address for trains.
    pub fn peer_ipv6(&self) -> Ipv6Addr {
        PEER_IPV6
    }
    /// The knobs currently applied.
    pub fn knobs(&self) -> &GroKnobs {
        &self.knobs
    }
    /// The private namespace (for inspection, e.g. its inode).
    pub fn netns(&self) -> &NetNs {
        &self.netns
    }
    /// One jiffy, as measured by the resolution of `CLOCK_MONOTONIC_COARSE`.
    pub fn jiffy(&self) -> Duration {
        self.tick
    }
    /// The rtnetlink socket of the namespace, for reading or changing more
    /// knobs than [`GroKnobs`] covers.
    pub fn rtnl(&mut self) -> &mut Rtnl {
        &mut self.rtnl
    }
    /// The ethtool socket of the namespace.
    pub fn ethtool(&self) -> &Ethtool {
        &self.ethtool
    }
    /// The namespace's detached sysfs.
    pub fn sysfs(&self) -> &Sysfs {
        &self.sysfs
    }
    /// The TAP's interface index.
    pub fn tap_index(&self) -> u32 {
        self.tap_index
    }

    /// Also reports each output frame's `virtio_net_hdr` (`gso_size`,
    /// `gso_type`) in [`TrainOutcome::gso`]. It comes from a second capture
    /// socket with `PACKET_VNET_HDR`, so a frame the kernel cannot describe
    /// costs only its metadata, never the frame.
    pub fn set_gso_meta(&mut self, on: bool) -> Result<()> {
        if !on {
            self.meta = None;
        } else if self.meta.is_none() {
            let index = self.tap_index;
            self.meta = Some(self.netns.run(move || {
                PacketSocket::open(
                    index,
                    CaptureOptions {
                        vnet_hdr: true,
                        ..CaptureOptions::default()
                    },
                )
            })?);
        }
        Ok(())
    }

    /// Changes the knobs between trains without rebuilding the namespace.
    /// Only what differs from the current knobs is touched.
    pub fn set_knobs(&mut self, knobs: GroKnobs) -> Result<()> {
        knobs.validate()?;
        self.apply(knobs, false)
    }

    /// Shorthand for changing only the two GRO size knobs.
    pub fn set_gro_sizes(&mut self, gro_max_size: u32, gro_ipv4_max_size: u32) -> Result<()> {
        let knobs = GroKnobs {
            gro_max_size,
            gro_ipv4_max_size,
            ..self.knobs.clone()
        };
        self.set_knobs(knobs)
    }

    /// Applies `k`, step by step. After each step `self.knobs` records what
    /// is now in effect, so a failure part-way leaves `knobs()` truthful.
    fn apply(&mut self, k: GroKnobs, all: bool) -> Result<()> {
        if all
            || (k.gro_max_size, k.gro_ipv4_max_size)
                != (self.knobs.gro_max_size, self.knobs.gro_ipv4_max_size)
        {
            // Kernels before 6.3 have no IFLA_GRO_IPV4_MAX_SIZE (IPv4 is
            // then bound by gro_max_size and by 64 KiB): set what exists.
            let has_ipv4_knob = self.rtnl.link(self.tap_index)?.gro_ipv4_max_size.is_some();
            let r = if has_ipv4_knob {
                self.rtnl
                    .set_gro_sizes(self.tap_index, k.gro_max_size, k.gro_ipv4_max_size)
            } else {
                self.rtnl.set_gro_max_size(self.tap_index, k.gro_max_size)
            };
            if let Ok(st) = self.rtnl.link(self.tap_index) {
                self.knobs.gro_max_size = st.gro_max_size.unwrap_or(0);
                // A kernel without the knob (< 6.3) keeps what was asked
                // (it has no effect there).
                self.knobs.gro_ipv4_max_size = st.gro_ipv4_max_size.unwrap_or(k.gro_ipv4_max_size);
            }
            r?;
        }
        if all || k.flush_timeout != self.knobs.flush_timeout {
            let ns = u64::try_from(k.flush_timeout.as_nanos()).unwrap_or(u64::MAX);
            self.sysfs.set_net_attr(TAP_NAME, "gro_flush_timeout", ns)?;
            self.knobs.flush_timeout = k.flush_timeout;
        }
        if all || k.udp_gro_forwarding != self.knobs.udp_gro_forwarding {
            self.ethtool
                .set_feature(TAP_NAME, "rx-udp-gro-forwarding", k.udp_gro_forwarding)?;
            self.knobs.udp_gro_forwarding = k.udp_gro_forwarding;
        }
        if all || k.gro_list != self.knobs.gro_list {
            self.ethtool
                .set_feature(TAP_NAME, "rx-gro-list", k.gro_list)?;
            self.knobs.gro_list = k.gro_list;
        }
        if all || k.udp_gro_ports != self.knobs.udp_gro_ports {
            // Close the old sockets first: the new ones may reuse ports.
            self.udp.clear();
            self.knobs.udp_gro_ports.clear();
            let ports = k.udp_gro_ports.clone();
            self.udp = self.netns.run(move || udp_gro_sockets(&ports))?;
            self.knobs.udp_gro_ports = k.udp_gro_ports;
        }
        if all || k.vxlan != self.knobs.vxlan || k.vxlan_ipv6 != self.knobs.vxlan_ipv6 {
            if let Some(index) = self.vxlan_index.take() {
                self.rtnl.delete_link(index)?;
            }
            self.knobs.vxlan = None;
            if let Some(v) = k.vxlan {
                let params = VxlanParams {
                    vni: v.vni,
                    port: v.port,
                    local: (!k.vxlan_ipv6).then_some(TAP_IPV4),
                    local6: k.vxlan_ipv6.then_some(TAP_IPV6),
                    link: None,
                };
                self.rtnl.create_vxlan(VXLAN_NAME, &params)?;
                let index = self.rtnl.link_by_name(VXLAN_NAME)?.index;
                self.vxlan_index = Some(index);
                // The UDP socket GRO looks up exists only while it is up.
                self.rtnl.set_up(index, true)?;
                self.knobs.vxlan = Some(v);
            }
        }
        if all || k.geneve_vni != self.knobs.geneve_vni {
            self.knobs.geneve_vni = None;
            if let Some(vni) = k.geneve_vni {
                self.create_geneve(vni)?;
                self.knobs.geneve_vni = Some(vni);
            }
        }
        Ok(())
    }

    /// Creates (or replaces) the Geneve device, up, so that its UDP socket
    /// on port 6081 exists (rtnetlink; the device is gone with the
    /// namespace).
    fn create_geneve(&mut self, vni: u32) -> Result<()> {
        if let Ok(old) = self.rtnl.link_by_name(GENEVE_NAME) {
            self.rtnl.delete_link(old.index)?;
        }
        self.rtnl.create_geneve(GENEVE_NAME, vni, PEER_IPV4)?;
        let index = self.rtnl.link_by_name(GENEVE_NAME)?.index;
        self.rtnl.set_up(index, true)
    }

    /// Runs `frames` through the kernel's GRO and returns what it delivered.
    /// Each frame must be a complete Ethernet frame addressed to
    /// [`KernelGro::tap_mac`], with correct checksums unless the test is
    /// about bad ones (a TAP gives GRO `CHECKSUM_NONE`).
    pub fn run_train(&mut self, frames: &[Vec<u8>]) -> Result<Vec<Vec<u8>>> {
        Ok(self.run_train_detailed(frames)?.frames)
    }

    /// Like [`KernelGro::run_train`], and says how the answer was obtained.
    pub fn run_train_detailed(&mut self, frames: &[Vec<u8>]) -> Result<TrainOutcome> {
        for (index, f) in frames.iter().enumerate() {
            if f.len() < 14 {
                return Err(Error::BadFrame {
                    index,
                    reason: format!("{} bytes, shorter than an Ethernet header", f.len()),
                });
            }
        }
        if frames.is_empty() {
            return Ok(TrainOutcome {
                frames: Vec::new(),
                attempts: 0,
                clean: true,
                gso: Vec::new(),
            });
        }
        let mut best: Option<TrainOutcome> = None;
        let mut attempts = 0;
        while attempts < MAX_ATTEMPTS {
            attempts += 1;
            let run = self.attempt(frames, attempts == 1)?;
            let better = match &best {
                None => true,
                Some(b) => {
                    run.frames.len() < b.frames.len()
                        || (run.frames.len() == b.frames.len() && run.clean && !b.clean)
                }
            };
            if better {
                best = Some(run);
            }
            if best
                .as_ref()
                .is_some_and(|b| b.clean || b.frames.len() <= 1)
            {
                break;
            }
        }
        let mut best = best.unwrap_or_default();
        best.attempts = attempts;
        Ok(best)
    }

    /// One run of the train (steps 1–5 of the module doc).
    ///
    /// `reuse_tick`: if the previous run ended less than half a jiffy after
    /// a tick, start in that jiffy instead of waiting for the next one (the
    /// cleanliness check catches a wrong guess, and replays always wait).
    fn attempt(&mut self, frames: &[Vec<u8>], reuse_tick: bool) -> Result<TrainOutcome> {
        self.capture.drain()?;
        if let Some(m) = &mut self.meta {
            m.drain()?;
        }
        self.drain_udp();
        let now = coarse_now();
        let start_tick = match self.last_tick {
            Some((tick, seen)) if reuse_tick && tick == now && seen.elapsed() < self.tick / 2 => {
                now
            }
            _ => wait_tick_after(now),
        };
        let mut max_gap = Duration::ZERO;
        let mut last = Instant::now();
        for (index, f) in frames.iter().enumerate() {
            // One write(2) is one frame: `tun_get_user` takes it whole or
            // fails, so there is no short write to check.
            if let Err(source) = self.tap.write_packet(None, f) {
                return Err(Error::FrameWrite {
                    index,
                    len: f.len(),
                    source,
                });
            }
            let now = Instant::now();
            max_gap = max_gap.max(now - last);
            last = now;
        }
        let mut out = Vec::new();
        self.sentinel(&mut out)?; // A: every train frame has been through GRO
        let seen_tick = coarse_now();
        let ft = self.knobs.flush_timeout;
        let clean = seen_tick == start_tick && (ft.is_zero() || max_gap < ft);
        let flush_tick = wait_tick_after(seen_tick);
        self.last_tick = Some((flush_tick, Instant::now()));
        self.sentinel(&mut out)?; // B: its poll flushes everything held
        let last = self.sentinel(&mut out)?; // C: B's poll has delivered everything
        let gso = self.collect_meta(&out, &last)?;
        Ok(TrainOutcome {
            frames: out,
            attempts: 1,
            clean,
            gso,
        })
    }

    /// Reads the metadata capture up to sentinel `last` and pairs its
    /// headers with `out`, frame by frame (a frame the metadata socket lost
    /// gets `None`).
    fn collect_meta(&mut self, out: &[Vec<u8>], last: &[u8]) -> Result<Vec<Option<VnetHdr>>> {
        let Some(meta) = &mut self.meta else {
            return Ok(Vec::new());
        };
        let mut seen: Vec<(Vec<u8>, Option<VnetHdr>)> = Vec::new();
        let deadline = Instant::now() + SENTINEL_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Error::Timeout {
                    what: "last sentinel on the GSO metadata capture".into(),
                    waited_ms: SENTINEL_TIMEOUT.as_millis() as u64,
                });
            }
            let Some(c) = meta.recv(Some(left))? else {
                continue;
            };
            if c.pkttype == PACKET_OUTGOING {
                continue;
            }
            if c.frame == last {
                break;
            }
            if !is_sentinel(c.frame) {
                seen.push((c.frame.to_vec(), c.vnet));
            }
        }
        let mut j = 0;
        Ok(out
            .iter()
            .map(|f| {
                if seen.get(j).is_some_and(|(m, _)| m == f) {
                    j += 1;
                    seen[j - 1].1
                } else {
                    None
                }
            })
            .collect())
    }

    /// Writes a sentinel frame and collects captured frames into `out` until
    /// the sentinel itself shows up.
    fn sentinel(&mut self, out: &mut Vec<Vec<u8>>) -> Result<Vec<u8>> {
        self.sentinel_seq += 1;
        let frame = sentinel_frame(self.nonce, self.sentinel_seq);
        self.tap
            .write_packet(None, &frame)
            .map_err(|source| Error::FrameWrite {
                index: usize::MAX,
                len: frame.len(),
                source,
            })?;
        let deadline = Instant::now() + SENTINEL_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Error::Timeout {
                    what: format!("sentinel frame {} on the capture socket", self.sentinel_seq),
                    waited_ms: SENTINEL_TIMEOUT.as_millis() as u64,
                });
            }
            let Some(c) = self.capture.recv(Some(left))? else {
                continue;
            };
            let (pkttype, data) = (c.pkttype, c.frame);
            if pkttype == PACKET_OUTGOING {
                continue;
            }
            if data == frame.as_slice() {
                return Ok(frame);
            }
            if is_sentinel(data) {
                // A sentinel of an earlier, failed run: not part of any answer.
                continue;
            }
            out.push(data.to_vec());
        }
    }

    fn drain_udp(&self) {
        let mut buf = vec![0u8; 65536];
        for s in &self.udp {
            // Non-blocking: stop at the first WouldBlock (or any error; the
            // sockets only exist to switch UDP GRO on, their data is unused).
            while s.recv(&mut buf).is_ok() {}
        }
    }
}

/// UDP sockets with `UDP_GRO` on every port, on both TAP addresses.
fn udp_gro_sockets(ports: &[u16]) -> Result<Vec<UdpSocket>> {
    let mut socks = Vec::new();
    for &port in ports {
        for ip in [IpAddr::V4(TAP_IPV4), IpAddr::V6(TAP_IPV6)] {
            let s = UdpSocket::bind((ip, port))
                .map_err(|e| Error::sys(format!("bind UDP {ip} port {port}"), e))?;
            s.set_nonblocking(true)
                .map_err(|e| Error::sys(format!("O_NONBLOCK on UDP {ip} port {port}"), e))?;
            setsockopt_int(s.as_fd(), libc::SOL_UDP, libc::UDP_GRO, 1, "UDP_GRO")?;
            socks.push(s);
        }
    }
    Ok(socks)
}

fn sentinel_frame(nonce: u64, seq: u64) -> Vec<u8> {
    let mut f = Vec::with_capacity(60);
    f.extend_from_slice(&TAP_MAC);
    f.extend_from_slice(&SENTINEL_SRC);
    f.extend_from_slice(&SENTINEL_ETHERTYPE);
    f.extend_from_slice(SENTINEL_MAGIC);
    f.extend_from_slice(&nonce.to_be_bytes());
    f.extend_from_slice(&seq.to_be_bytes());
    f.resize(60, 0);
    f
}

fn is_sentinel(frame: &[u8]) -> bool {
    frame.len() >= 26
        && frame[6..12] == SENTINEL_SRC
        && frame[12..14] == SENTINEL_ETHERTYPE
        && &frame[14..26] == SENTINEL_MAGIC
}

fn coarse_now() -> Timespec {
    rustix::time::clock_gettime(ClockId::MonotonicCoarse)
}

/// Waits until the coarse clock (hence `jiffies`) moves past `seen`, and
/// returns the new value. Sleeps in short steps: a sleeping CPU may stop its
/// tick (NOHZ), but `jiffies` is caught up on wake-up before we read.
fn wait_tick_after(seen: Timespec) -> Timespec {
    loop {
        let now = coarse_now();
        if now != seen {
            return now;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentinel_is_recognised_and_distinct_per_sequence() {
        let a = sentinel_frame(7, 1);
        let b = sentinel_frame(7, 2);
        assert!(is_sentinel(&a));
        assert_ne!(a, b);
        assert_eq!(&a[..6], &TAP_MAC);
        let mut not = a.clone();
        not[13] = 0x00;
        assert!(!is_sentinel(&not));
    }

    #[test]
    fn knobs_out_of_range_are_rejected() {
        let k = GroKnobs {
            gro_max_size: GRO_MAX_SIZE + 1,
            ..GroKnobs::default()
        };
        assert!(matches!(
            k.validate(),
            Err(Error::OutOfRange {
                knob: "gro_max_size",
                ..
            })
        ));
        let k = GroKnobs {
            vxlan: Some(VxlanConf {
                vni: 1 << 24,
                port: 4789,
            }),
            ..GroKnobs::default()
        };
        assert!(k.validate().is_err());
        assert!(GroKnobs::default().validate().is_ok());
    }
}
