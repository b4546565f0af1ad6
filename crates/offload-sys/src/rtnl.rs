//! Synchronous rtnetlink control of links, addresses, neighbours and the GRO
//! size knobs.
//!
//! Messages are built with `netlink-packet-route` and sent through the
//! crate's one request loop ([`crate::netlink::NetlinkSocket`]): one
//! request, then read until the kernel's ACK (or `NLMSG_DONE` for dumps).
//!
//! An [`Rtnl`] socket acts on the network namespace it was *created* in, and
//! keeps doing so from whatever thread later uses it.

use std::net::{IpAddr, Ipv4Addr};

use netlink_packet_core::{NLM_F_ACK, NLM_F_CREATE, NLM_F_DUMP, NLM_F_EXCL, NLM_F_REPLACE};
use netlink_packet_route::address::{AddressAttribute, AddressFlags, AddressMessage};
use netlink_packet_route::link::{
    InfoData, InfoGeneve, InfoKind, InfoVeth, InfoVxlan, LinkAttribute, LinkFlags, LinkInfo,
    LinkMessage,
};
use netlink_packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourMessage, NeighbourState,
};
use netlink_packet_route::nsid::{NsidAttribute, NsidMessage};
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteHeader, RouteMessage, RouteProtocol, RouteScope, RouteType,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::protocols::NETLINK_ROUTE;

use crate::error::{Error, Result};
use crate::netlink::NetlinkSocket;

// The GRO size knobs' bound is the engine's constant (`GRO_MAX_SIZE` =
// 8 × 65535, the largest `gro_max_size` / `gro_ipv4_max_size` the kernel
// accepts).
use offload::gro::GRO_MAX_SIZE;

/// The parts of a link's state the lab cares about, as read by `RTM_GETLINK`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LinkState {
    /// Interface index.
    pub index: u32,
    /// Interface name.
    pub name: String,
    /// `IFF_UP` is set.
    pub up: bool,
    /// MTU in bytes.
    pub mtu: u32,
    /// Link-layer address (6 bytes for Ethernet).
    pub mac: Vec<u8>,
    /// `IFLA_GRO_MAX_SIZE` (IPv6 and non-IP limit).
    pub gro_max_size: Option<u32>,
    /// `IFLA_GRO_IPV4_MAX_SIZE` (IPv4 limit, 6.3+).
    pub gro_ipv4_max_size: Option<u32>,
    /// `IFLA_GSO_MAX_SIZE`.
    pub gso_max_size: Option<u32>,
    /// `IFLA_GSO_IPV4_MAX_SIZE`.
    pub gso_ipv4_max_size: Option<u32>,
    /// `IFLA_TSO_MAX_SIZE` (read-only, set by the driver).
    pub tso_max_size: Option<u32>,
    /// `IFLA_INFO_KIND`, e.g. `"tun"`, `"veth"`, `"vxlan"`.
    pub kind: Option<String>,
    /// `IFLA_TSO_MAX_SEGS` (read-only, set by the driver).
    pub tso_max_segs: Option<u32>,
    /// `IFLA_NUM_RX_QUEUES`.
    pub rx_queues: Option<u32>,
    /// `IFLA_NUM_TX_QUEUES`.
    pub tx_queues: Option<u32>,
    /// `IFLA_QDISC`, the root qdisc's kind.
    pub qdisc: Option<String>,
    /// `IFF_LOOPBACK` is set.
    pub loopback: bool,
    /// An XDP program is attached (`IFLA_XDP` with a program id).
    pub xdp: bool,
    /// For a VXLAN device, `IFLA_VXLAN_LINK`: its underlay device's index
    /// (also the `link` of ip6tnl, GRE and ip6gre tunnels).
    pub tunnel_link: Option<u32>,
    /// `IFLA_LINK`: the lower device of a macvlan, ipvlan, VLAN or
    /// tunnel (and a veth's peer), by index in `link_netnsid`'s namespace.
    pub link: Option<u32>,
    /// `IFLA_LINK_NETNSID`: `link` lives in another namespace.
    pub link_netnsid: Option<i32>,
    /// A tunnel whose outer header is IPv6: ip6tnl, ip6gre, ip6gretap,
    /// ip6erspan, or VXLAN/Geneve with an IPv6 remote or local address.
    pub ipv6_outer: bool,
}

/// Parameters of a VXLAN device (`ip link add NAME type vxlan ...`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VxlanParams {
    /// VXLAN Network Identifier (24 bits).
    pub vni: u32,
    /// UDP destination port the device listens on (4789 is the IANA port).
    pub port: u16,
    /// Local IPv4 address to bind to, if any.
    pub local: Option<Ipv4Addr>,
    /// Local IPv6 address to bind to, if any (the device then listens on IPv6).
    pub local6: Option<std::net::Ipv6Addr>,
    /// Lower device index (`dev`), if any.
    pub link: Option<u32>,
}

/// A blocking rtnetlink socket bound to one network namespace.
#[derive(Debug)]
pub struct Rtnl {
    sock: NetlinkSocket,
}

impl Rtnl {
    /// Opens a socket in the *calling thread's* network namespace.
    pub fn open() -> Result<Self> {
        Ok(Rtnl {
            sock: NetlinkSocket::open(NETLINK_ROUTE, "NETLINK_ROUTE")?,
        })
    }

    /// Sends one request and collects every inner message of the reply until
    /// the final ACK or `NLMSG_DONE` ([`NetlinkSocket::request`]).
    fn request(
        &mut self,
        op: &str,
        msg: RouteNetlinkMessage,
        flags: u16,
    ) -> Result<Vec<RouteNetlinkMessage>> {
        self.sock.request(op, msg, flags)
    }

    fn ack(&mut self, op: &str, msg: RouteNetlinkMessage, flags: u16) -> Result<()> {
        self.request(op, msg, NLM_F_ACK | flags).map(|_| ())
    }

    /// Returns the state of the link called `name`.
    pub fn link_by_name(&mut self, name: &str) -> Result<LinkState> {
        let mut msg = LinkMessage::default();
        msg.attributes.push(LinkAttribute::IfName(name.to_string()));
        let op = format!("RTM_GETLINK {name}");
        let replies = match self.request(&op, RouteNetlinkMessage::GetLink(msg), 0) {
            Err(Error::Netlink { source, .. }) if source.raw_os_error() == Some(libc::ENODEV) => {
                return Err(Error::NoDevice(name.to_string()))
            }
            other => other?,
        };
        first_link(&op, replies)
    }

    /// Returns the state of the link with index `index`.
    pub fn link(&mut self, index: u32) -> Result<LinkState> {
        let mut msg = LinkMessage::default();
        msg.header.index = index;
        let op = format!("RTM_GETLINK ifindex {index}");
        let replies = self.request(&op, RouteNetlinkMessage::GetLink(msg), 0)?;
        first_link(&op, replies)
    }

    /// Lists every link in the namespace.
    pub fn links(&mut self) -> Result<Vec<LinkState>> {
        let replies = self.request(
            "RTM_GETLINK dump",
            RouteNetlinkMessage::GetLink(LinkMessage::default()),
            NLM_F_DUMP,
        )?;
        Ok(replies
            .into_iter()
            .filter_map(|m| match m {
                RouteNetlinkMessage::NewLink(l) => Some(link_state(&l)),
                _ => None,
            })
            .collect())
    }

    fn set_link(&mut self, op: &str, index: u32, f: impl FnOnce(&mut LinkMessage)) -> Result<()> {
        let mut msg = LinkMessage::default();
        msg.header.index = index;
        f(&mut msg);
        self.ack(op, RouteNetlinkMessage::SetLink(msg), 0)
    }

    /// Sets `IFF_UP` (or clears it).
    pub fn set_up(&mut self, index: u32, up: bool) -> Result<()> {
        let op = format!(
            "RTM_SETLINK ifindex {index} {}",
            if up { "up" } else { "down" }
        );
        self.set_link(&op, index, |m| {
            m.header.change_mask = LinkFlags::Up;
            if up {
                m.header.flags = LinkFlags::Up;
            }
        })
    }

    /// Sets the link-layer address.
    pub fn set_mac(&mut self, index: u32, mac: [u8; 6]) -> Result<()> {
        let op = format!("RTM_SETLINK ifindex {index} address {}", fmt_mac(mac));
        self.set_link(&op, index, |m| {
            m.attributes.push(LinkAttribute::Address(mac.to_vec()))
        })
    }

    /// Sets the MTU.
    pub fn set_mtu(&mut self, index: u32, mtu: u32) -> Result<()> {
        let op = format!("RTM_SETLINK ifindex {index} mtu {mtu}");
        self.set_link(&op, index, |m| m.attributes.push(LinkAttribute::Mtu(mtu)))
    }

    /// Sets `gro_max_size` (`IFLA_GRO_MAX_SIZE`, the IPv6 and non-IP limit).
    ///
    /// Kernel coupling rule (`netif_set_gro_max_size`): a value ≤ 65536 also
    /// overwrites `gro_ipv4_max_size`. Use [`Rtnl::set_gro_sizes`] to set both
    /// in the right order.
    pub fn set_gro_max_size(&mut self, index: u32, size: u32) -> Result<()> {
        check_gro_size("gro_max_size", size)?;
        let op = format!("RTM_SETLINK ifindex {index} gro_max_size {size}");
        self.set_link(&op, index, |m| {
            m.attributes.push(LinkAttribute::GroMaxSize(size))
        })
    }

    /// Sets `gro_ipv4_max_size` (`IFLA_GRO_IPV4_MAX_SIZE`, 6.3+).
    pub fn set_gro_ipv4_max_size(&mut self, index: u32, size: u32) -> Result<()> {
        check_gro_size("gro_ipv4_max_size", size)?;
        let op = format!("RTM_SETLINK ifindex {index} gro_ipv4_max_size {size}");
        self.set_link(&op, index, |m| {
            m.attributes.push(LinkAttribute::GroIpv4MaxSize(size))
        })
    }

    /// Sets both GRO size knobs, IPv6 first (its coupling rule would otherwise
    /// overwrite the IPv4 value), then reads them back and fails on mismatch.
    pub fn set_gro_sizes(
        &mut self,
        index: u32,
        gro_max_size: u32,
        gro_ipv4_max_size: u32,
    ) -> Result<()> {
        self.set_gro_max_size(index, gro_max_size)?;
        self.set_gro_ipv4_max_size(index, gro_ipv4_max_size)?;
        let state = self.link(index)?;
        let name = state.name.clone();
        for (knob, wanted, actual) in [
            ("gro_max_size", gro_max_size, state.gro_max_size),
            (
                "gro_ipv4_max_size",
                gro_ipv4_max_size,
                state.gro_ipv4_max_size,
            ),
        ] {
            if actual != Some(wanted) {
                return Err(Error::KnobMismatch {
                    knob: format!("{knob} of {name}"),
                    wanted: u64::from(wanted),
                    actual: actual.map_or(0, u64::from),
                });
            }
        }
        Ok(())
    }

    /// Adds an address. IPv6 addresses get `nodad` so they are usable at once
    /// and the kernel sends no Duplicate Address Detection probes.
    pub fn add_address(&mut self, index: u32, addr: IpAddr, prefix_len: u8) -> Result<()> {
        let mut msg = AddressMessage::default();
        msg.header.index = index;
        msg.header.prefix_len = prefix_len;
        match addr {
            IpAddr::V4(_) => {
                msg.header.family = AddressFamily::Inet;
                msg.attributes.push(AddressAttribute::Local(addr));
                msg.attributes.push(AddressAttribute::Address(addr));
            }
            IpAddr::V6(_) => {
                msg.header.family = AddressFamily::Inet6;
                msg.attributes.push(AddressAttribute::Address(addr));
                msg.attributes
                    .push(AddressAttribute::Flags(AddressFlags::Nodad));
            }
        }
        let op = format!("RTM_NEWADDR {addr}/{prefix_len} ifindex {index}");
        self.ack(
            &op,
            RouteNetlinkMessage::NewAddress(msg),
            NLM_F_CREATE | NLM_F_EXCL,
        )
    }

    /// Adds (or replaces) a permanent neighbour entry, so the kernel can
    /// answer `ip` without ARP or Neighbour Discovery traffic.
    pub fn add_neighbour(&mut self, index: u32, ip: IpAddr, mac: [u8; 6]) -> Result<()> {
        let mut msg = NeighbourMessage::default();
        msg.header.ifindex = index;
        msg.header.state = NeighbourState::Permanent;
        msg.header.kind = RouteType::Unicast;
        let dst = match ip {
            IpAddr::V4(v4) => {
                msg.header.family = AddressFamily::Inet;
                NeighbourAddress::Inet(v4)
            }
            IpAddr::V6(v6) => {
                msg.header.family = AddressFamily::Inet6;
                NeighbourAddress::Inet6(v6)
            }
        };
        msg.attributes.push(NeighbourAttribute::Destination(dst));
        msg.attributes
            .push(NeighbourAttribute::LinkLayerAddress(mac.to_vec()));
        let op = format!("RTM_NEWNEIGH {ip} lladdr {} ifindex {index}", fmt_mac(mac));
        self.ack(
            &op,
            RouteNetlinkMessage::NewNeighbour(msg),
            NLM_F_CREATE | NLM_F_REPLACE,
        )
    }

    fn new_link(&mut self, op: &str, name: &str, infos: Vec<LinkInfo>) -> Result<()> {
        check_ifname(name)?;
        let mut msg = LinkMessage::default();
        msg.attributes.push(LinkAttribute::IfName(name.to_string()));
        msg.attributes.push(LinkAttribute::LinkInfo(infos));
        self.ack(
            op,
            RouteNetlinkMessage::NewLink(msg),
            NLM_F_CREATE | NLM_F_EXCL,
        )
    }

    /// Creates a veth pair `name` <-> `peer` in this namespace.
    pub fn create_veth(&mut self, name: &str, peer: &str) -> Result<()> {
        check_ifname(peer)?;
        let mut peer_msg = LinkMessage::default();
        peer_msg
            .attributes
            .push(LinkAttribute::IfName(peer.to_string()));
        let op = format!("RTM_NEWLINK {name} type veth peer {peer}");
        self.new_link(
            &op,
            name,
            vec![
                LinkInfo::Kind(InfoKind::Veth),
                LinkInfo::Data(InfoData::Veth(InfoVeth::Peer(peer_msg))),
            ],
        )
    }

    /// Creates a VXLAN device. Bring it up to make the kernel open its UDP
    /// socket (only then does GRO look inside VXLAN packets on that port).
    pub fn create_vxlan(&mut self, name: &str, params: &VxlanParams) -> Result<()> {
        self.create_vxlan_inner(name, params, None)
    }

    /// Creates a point-to-point VXLAN device whose every frame goes to
    /// `remote` (`ip link add NAME type vxlan ... remote REMOTE`).
    pub fn create_vxlan_remote(
        &mut self,
        name: &str,
        params: &VxlanParams,
        remote: Ipv4Addr,
    ) -> Result<()> {
        self.create_vxlan_inner(name, params, Some(remote))
    }

    fn create_vxlan_inner(
        &mut self,
        name: &str,
        params: &VxlanParams,
        remote: Option<Ipv4Addr>,
    ) -> Result<()> {
        if params.vni >= 1 << 24 {
            return Err(Error::OutOfRange {
                knob: "vxlan vni",
                value: u64::from(params.vni),
                range: "0..16777216",
            });
        }
        let mut data = vec![InfoVxlan::Id(params.vni), InfoVxlan::Port(params.port)];
        if let Some(local) = params.local {
            data.push(InfoVxlan::Local(local));
        }
        if let Some(local6) = params.local6 {
            data.push(InfoVxlan::Local6(local6));
        }
        if let Some(link) = params.link {
            data.push(InfoVxlan::Link(link));
        }
        if let Some(remote) = remote {
            data.push(InfoVxlan::Group(remote));
        }
        let op = format!(
            "RTM_NEWLINK {name} type vxlan id {} dstport {}",
            params.vni, params.port
        );
        self.new_link(
            &op,
            name,
            vec![
                LinkInfo::Kind(InfoKind::Vxlan),
                LinkInfo::Data(InfoData::Vxlan(data)),
            ],
        )
    }

    /// Creates a Geneve device with `vni` sending to `remote` on the IANA
    /// port 6081 (`ip link add NAME type geneve id VNI remote REMOTE`).
    /// Bringing it up opens the UDP socket whose GRO handler
    /// (`geneve_gro_receive`, drivers/net/geneve.c) coalesces Geneve.
    pub fn create_geneve(&mut self, name: &str, vni: u32, remote: Ipv4Addr) -> Result<()> {
        if vni >= 1 << 24 {
            return Err(Error::OutOfRange {
                knob: "geneve vni",
                value: u64::from(vni),
                range: "0..16777216",
            });
        }
        let op = format!("RTM_NEWLINK {name} type geneve id {vni} remote {remote}");
        self.new_link(
            &op,
            name,
            vec![
                LinkInfo::Kind(InfoKind::Geneve),
                LinkInfo::Data(InfoData::Geneve(vec![
                    InfoGeneve::Id(vni),
                    InfoGeneve::Remote(remote),
                ])),
            ],
        )
    }

    /// Adds a route to `dst/prefix_len`, through `gateway` or directly out
    /// of `oif` (`ip route add DST [via GW] [dev OIF]`).
    pub fn add_route(
        &mut self,
        dst: IpAddr,
        prefix_len: u8,
        gateway: Option<IpAddr>,
        oif: Option<u32>,
    ) -> Result<()> {
        let mut msg = RouteMessage::default();
        msg.header.address_family = match dst {
            IpAddr::V4(_) => AddressFamily::Inet,
            IpAddr::V6(_) => AddressFamily::Inet6,
        };
        msg.header.destination_prefix_length = prefix_len;
        msg.header.table = RouteHeader::RT_TABLE_MAIN;
        msg.header.protocol = RouteProtocol::Static;
        msg.header.scope = if gateway.is_some() {
            RouteScope::Universe
        } else {
            RouteScope::Link
        };
        msg.header.kind = RouteType::Unicast;
        msg.attributes
            .push(RouteAttribute::Destination(RouteAddress::from(dst)));
        if let Some(gw) = gateway {
            msg.attributes
                .push(RouteAttribute::Gateway(RouteAddress::from(gw)));
        }
        if let Some(oif) = oif {
            msg.attributes.push(RouteAttribute::Oif(oif));
        }
        let op = format!("RTM_NEWROUTE {dst}/{prefix_len} via {gateway:?} oif {oif:?}");
        self.ack(
            &op,
            RouteNetlinkMessage::NewRoute(msg),
            NLM_F_CREATE | NLM_F_EXCL,
        )
    }

    /// Moves a link into the namespace behind `ns_fd` (`ip link set DEV
    /// netns NS`). The index may change there; look it up by name.
    pub fn move_to_netns(&mut self, index: u32, ns_fd: std::os::fd::BorrowedFd<'_>) -> Result<()> {
        use std::os::fd::AsRawFd;
        let op = format!("RTM_SETLINK ifindex {index} netns fd");
        self.set_link(&op, index, |m| {
            m.attributes.push(LinkAttribute::NetNsFd(ns_fd.as_raw_fd()))
        })
    }

    /// Sets `gso_max_size` (`IFLA_GSO_MAX_SIZE`). Like the GRO knob, a
    /// value <= 65536 also overwrites `gso_ipv4_max_size` (6.3+).
    pub fn set_gso_max_size(&mut self, index: u32, size: u32) -> Result<()> {
        check_gro_size("gso_max_size", size)?;
        let op = format!("RTM_SETLINK ifindex {index} gso_max_size {size}");
        self.set_link(&op, index, |m| {
            m.attributes.push(LinkAttribute::GsoMaxSize(size))
        })
    }

    /// Sets `gso_ipv4_max_size` (`IFLA_GSO_IPV4_MAX_SIZE`, 6.3+).
    pub fn set_gso_ipv4_max_size(&mut self, index: u32, size: u32) -> Result<()> {
        check_gro_size("gso_ipv4_max_size", size)?;
        let op = format!("RTM_SETLINK ifindex {index} gso_ipv4_max_size {size}");
        self.set_link(&op, index, |m| {
            m.attributes.push(LinkAttribute::GsoIpv4MaxSize(size))
        })
    }

    /// Deletes a link.
    pub fn delete_link(&mut self, index: u32) -> Result<()> {
        let mut msg = LinkMessage::default();
        msg.header.index = index;
        let op = format!("RTM_DELLINK ifindex {index}");
        self.ack(&op, RouteNetlinkMessage::DelLink(msg), 0)
    }

    /// Assigns a namespace id (in *this* socket's namespace) to the namespace
    /// behind `ns_fd`; `None` lets the kernel choose. Namespace ids vanish
    /// when the namespace they name is destroyed, which makes them a witness
    /// of namespace teardown.
    pub fn assign_nsid(
        &mut self,
        ns_fd: std::os::fd::BorrowedFd<'_>,
        id: Option<i32>,
    ) -> Result<()> {
        use std::os::fd::AsRawFd;
        let raw = u32::try_from(ns_fd.as_raw_fd()).map_err(|_| Error::NetlinkReply {
            op: "RTM_NEWNSID".into(),
            detail: "negative fd".into(),
        })?;
        let mut msg = NsidMessage::default();
        msg.header.family = AddressFamily::Unspec;
        msg.attributes.push(NsidAttribute::Fd(raw));
        msg.attributes.push(NsidAttribute::Id(id.unwrap_or(-1)));
        self.ack("RTM_NEWNSID", RouteNetlinkMessage::NewNsId(msg), 0)
    }

    /// Returns the id this namespace uses for the namespace behind `ns_fd`,
    /// if one is assigned.
    pub fn nsid_of(&mut self, ns_fd: std::os::fd::BorrowedFd<'_>) -> Result<Option<i32>> {
        use std::os::fd::AsRawFd;
        let raw = u32::try_from(ns_fd.as_raw_fd()).map_err(|_| Error::NetlinkReply {
            op: "RTM_GETNSID".into(),
            detail: "negative fd".into(),
        })?;
        let mut msg = NsidMessage::default();
        msg.header.family = AddressFamily::Unspec;
        msg.attributes.push(NsidAttribute::Fd(raw));
        let replies = self.request("RTM_GETNSID", RouteNetlinkMessage::GetNsId(msg), 0)?;
        Ok(nsids(replies).into_iter().next().filter(|id| *id >= 0))
    }

    /// Lists every namespace id assigned in this namespace.
    pub fn nsids(&mut self) -> Result<Vec<i32>> {
        let mut msg = NsidMessage::default();
        msg.header.family = AddressFamily::Unspec;
        let replies = self.request(
            "RTM_GETNSID dump",
            RouteNetlinkMessage::GetNsId(msg),
            NLM_F_DUMP,
        )?;
        Ok(nsids(replies))
    }
}

fn nsids(replies: Vec<RouteNetlinkMessage>) -> Vec<i32> {
    let mut out = Vec::new();
    for r in replies {
        if let RouteNetlinkMessage::NewNsId(m) = r {
            for a in m.attributes {
                if let NsidAttribute::Id(id) = a {
                    out.push(id);
                }
            }
        }
    }
    out
}

fn first_link(op: &str, replies: Vec<RouteNetlinkMessage>) -> Result<LinkState> {
    for r in replies {
        if let RouteNetlinkMessage::NewLink(l) = r {
            return Ok(link_state(&l));
        }
    }
    Err(Error::NetlinkReply {
        op: op.to_string(),
        detail: "no RTM_NEWLINK in reply".into(),
    })
}

fn link_state(l: &LinkMessage) -> LinkState {
    let mut s = LinkState {
        index: l.header.index,
        up: l.header.flags.contains(LinkFlags::Up),
        loopback: l.header.flags.contains(LinkFlags::Loopback),
        ..LinkState::default()
    };
    for a in &l.attributes {
        match a {
            LinkAttribute::IfName(n) => s.name.clone_from(n),
            LinkAttribute::Mtu(m) => s.mtu = *m,
            LinkAttribute::Address(mac) => s.mac.clone_from(mac),
            LinkAttribute::GroMaxSize(v) => s.gro_max_size = Some(*v),
            LinkAttribute::GroIpv4MaxSize(v) => s.gro_ipv4_max_size = Some(*v),
            LinkAttribute::GsoMaxSize(v) => s.gso_max_size = Some(*v),
            LinkAttribute::GsoIpv4MaxSize(v) => s.gso_ipv4_max_size = Some(*v),
            LinkAttribute::TsoMaxSize(v) => s.tso_max_size = Some(*v),
            LinkAttribute::TsoMaxSegs(v) => s.tso_max_segs = Some(*v),
            LinkAttribute::NumRxQueues(v) => s.rx_queues = Some(*v),
            LinkAttribute::NumTxQueues(v) => s.tx_queues = Some(*v),
            LinkAttribute::Qdisc(q) => s.qdisc = Some(q.clone()),
            LinkAttribute::Link(i) => s.link = Some(*i),
            LinkAttribute::LinkNetNsId(i) => s.link_netnsid = Some(*i),
            LinkAttribute::Xdp(x) => {
                s.xdp = x.iter().any(
                    |a| matches!(a, netlink_packet_route::link::LinkXdp::ProgId(id) if *id != 0),
                )
            }
            LinkAttribute::LinkInfo(infos) => {
                for i in infos {
                    match i {
                        LinkInfo::Kind(k) => {
                            s.kind = Some(k.to_string());
                            if matches!(
                                k,
                                InfoKind::Ip6Tnl
                                    | InfoKind::GreTun6
                                    | InfoKind::GreTap6
                                    | InfoKind::Ip6ErSpan
                            ) {
                                s.ipv6_outer = true;
                            }
                        }
                        LinkInfo::Data(InfoData::Vxlan(data)) => {
                            for d in data {
                                match d {
                                    InfoVxlan::Link(idx) => s.tunnel_link = Some(*idx),
                                    InfoVxlan::Group6(_) | InfoVxlan::Local6(_) => {
                                        s.ipv6_outer = true
                                    }
                                    _ => {}
                                }
                            }
                        }
                        LinkInfo::Data(InfoData::Geneve(data))
                            if data.iter().any(|d| {
                                matches!(d, InfoGeneve::Remote6(_) | InfoGeneve::Local6(_))
                            }) =>
                        {
                            s.ipv6_outer = true;
                        }
                        LinkInfo::Data(InfoData::IpTunnel(data)) => {
                            for d in data {
                                match d {
                                    netlink_packet_route::link::InfoIpTunnel::Link(i)
                                        if *i != 0 =>
                                    {
                                        s.tunnel_link = Some(*i)
                                    }
                                    netlink_packet_route::link::InfoIpTunnel::Remote(
                                        IpAddr::V6(_),
                                    )
                                    | netlink_packet_route::link::InfoIpTunnel::Local(
                                        IpAddr::V6(_),
                                    ) => s.ipv6_outer = true,
                                    _ => {}
                                }
                            }
                        }
                        LinkInfo::Data(
                            InfoData::GreTun6(data)
                            | InfoData::GreTap6(data)
                            | InfoData::Ip6ErSpan(data),
                        ) => {
                            s.ipv6_outer = true;
                            for d in data {
                                if let netlink_packet_route::link::InfoGre6::Link(i) = d {
                                    if *i != 0 {
                                        s.tunnel_link = Some(*i);
                                    }
                                }
                            }
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    s
}

fn check_gro_size(knob: &'static str, size: u32) -> Result<()> {
    if size == 0 || size > GRO_MAX_SIZE {
        return Err(Error::OutOfRange {
            knob,
            value: u64::from(size),
            range: "1..=524280",
        });
    }
    Ok(())
}

/// Checks that `name` is a valid interface name (1..=15 bytes, no NUL, `/`
/// or whitespace).
pub fn check_ifname(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() < libc::IFNAMSIZ
        && !name
            .bytes()
            .any(|b| b == 0 || b == b'/' || b.is_ascii_whitespace());
    if ok {
        Ok(())
    } else {
        Err(Error::BadIfName(name.to_string()))
    }
}

/// Formats a MAC address as `aa:bb:cc:dd:ee:ff`.
pub fn fmt_mac(mac: [u8; 6]) -> String {
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}
