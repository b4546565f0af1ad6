//! Topologies for `offload lab`: namespaces joined by veth pairs, tunnels,
//! and a userspace middle hop, built over rtnetlink and torn down by the
//! kernel when the handles go.
//!
//! Every namespace is anonymous ([`NetNs`]), so nothing a scenario builds
//! can outlive the process: devices, addresses, routes and the sysctls
//! written inside them (`net.*` sysctls are per namespace) all vanish with
//! the last fd, on return, panic, Ctrl-C or `SIGKILL`. The host's own
//! namespace is only read, never written.
//!
//! Device names carry the process id ([`unique_name`]): tracepoints are
//! global, filtered by device name, so a lab's counters must not pick up a
//! same-named device of another namespace.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::AsFd;

use crate::error::Result;
use crate::ethtool::Ethtool;
use crate::netns::NetNs;
use crate::rtnl::{LinkState, Rtnl, VxlanParams};
use crate::sysfs::write_sysctl;

/// `PREFIX` + process id, cut to 15 bytes (IFNAMSIZ - 1).
pub fn unique_name(prefix: &str) -> String {
    let mut s = format!("{prefix}{}", std::process::id());
    s.truncate(15);
    s
}

/// One namespace with its netlink and ethtool sockets.
#[derive(Debug)]
pub struct Node {
    /// The namespace.
    pub ns: NetNs,
    rtnl: Rtnl,
    ethtool: Ethtool,
}

impl Node {
    /// A fresh anonymous namespace with `lo` up.
    pub fn new() -> Result<Self> {
        let ns = NetNs::new_anonymous()?;
        let (mut rtnl, ethtool) = ns.run(|| Ok((Rtnl::open()?, Ethtool::open()?)))?;
        let lo = rtnl.link_by_name("lo")?.index;
        rtnl.set_up(lo, true)?;
        Ok(Node { ns, rtnl, ethtool })
    }

    /// The namespace's rtnetlink socket.
    pub fn rtnl(&mut self) -> &mut Rtnl {
        &mut self.rtnl
    }

    /// The namespace's ethtool socket.
    pub fn ethtool(&self) -> &Ethtool {
        &self.ethtool
    }

    /// Index of device `name`.
    pub fn index(&mut self, name: &str) -> Result<u32> {
        Ok(self.rtnl.link_by_name(name)?.index)
    }

    /// State of device `name`.
    pub fn link(&mut self, name: &str) -> Result<LinkState> {
        self.rtnl.link_by_name(name)
    }

    /// Brings `name` up.
    pub fn up(&mut self, name: &str) -> Result<()> {
        let i = self.index(name)?;
        self.rtnl.set_up(i, true)
    }

    /// Adds an address to `name`.
    pub fn addr(&mut self, name: &str, ip: IpAddr, prefix: u8) -> Result<()> {
        let i = self.index(name)?;
        self.rtnl.add_address(i, ip, prefix)
    }

    /// Adds a route out of `dev`, through `gateway` if given.
    pub fn route(
        &mut self,
        dst: IpAddr,
        prefix: u8,
        gateway: Option<IpAddr>,
        dev: &str,
    ) -> Result<()> {
        let i = self.index(dev)?;
        self.rtnl.add_route(dst, prefix, gateway, Some(i))
    }

    /// Writes a sysctl of this namespace (`net/ipv4/ip_forward`, ...).
    pub fn sysctl(&self, key: &str, value: &str) -> Result<()> {
        let (k, v) = (key.to_string(), value.to_string());
        self.ns.run(move || write_sysctl(&k, &v))
    }

    /// Switches ethtool features and checks each took effect.
    pub fn features(&self, dev: &str, features: &[(&str, bool)]) -> Result<()> {
        for (f, on) in features {
            self.ethtool.set_feature(dev, f, *on)?;
        }
        Ok(())
    }

    /// Switches every TSO feature off (veth then runs GRO on its peer:
    /// `veth_skb_is_eligible_for_gro` checks `NETIF_F_ALL_TSO`).
    pub fn tso_off(&self, dev: &str) -> Result<()> {
        let names = self.ethtool.feature_names(dev)?;
        for f in [
            "tx-tcp-segmentation",
            "tx-tcp-ecn-segmentation",
            "tx-tcp-mangleid-segmentation",
            "tx-tcp6-segmentation",
        ] {
            if names.iter().any(|n| n == f) {
                self.ethtool.set_feature(dev, f, false)?;
            }
        }
        Ok(())
    }

    /// Sets the BIG TCP knobs of `dev` to `size` in the order that works
    /// (IPv6 knobs first: a value <= 64 KiB there overwrites the IPv4 knob,
    /// `netif_set_gso_max_size`/`netif_set_gro_max_size`), and returns the
    /// four values read back.
    pub fn set_big_tcp(&mut self, dev: &str, size: u32) -> Result<BTreeMap<String, u64>> {
        let i = self.index(dev)?;
        self.rtnl.set_gso_max_size(i, size)?;
        self.rtnl.set_gro_max_size(i, size)?;
        self.rtnl.set_gso_ipv4_max_size(i, size)?;
        self.rtnl.set_gro_ipv4_max_size(i, size)?;
        let back = self.knobs(dev)?;
        for (k, v) in &back {
            if k.ends_with("max_size") && !k.starts_with("tso") && *v != u64::from(size) {
                return Err(crate::Error::KnobMismatch {
                    knob: format!("{k} of {dev}"),
                    wanted: u64::from(size),
                    actual: *v,
                });
            }
        }
        Ok(back)
    }

    /// The size knobs of `dev` as read back over rtnetlink.
    pub fn knobs(&mut self, dev: &str) -> Result<BTreeMap<String, u64>> {
        let l = self.link(dev)?;
        let mut m = BTreeMap::new();
        for (k, v) in [
            ("gso_max_size", l.gso_max_size),
            ("gro_max_size", l.gro_max_size),
            ("gso_ipv4_max_size", l.gso_ipv4_max_size),
            ("gro_ipv4_max_size", l.gro_ipv4_max_size),
            ("tso_max_size", l.tso_max_size),
        ] {
            if let Some(v) = v {
                m.insert(k.to_string(), u64::from(v));
            }
        }
        m.insert("mtu".into(), u64::from(l.mtu));
        Ok(m)
    }
}

/// Creates a veth pair `a_dev` (in `a`) <-> `b_dev` (in `b`), both up.
pub fn veth(a: &mut Node, a_dev: &str, b: &mut Node, b_dev: &str) -> Result<()> {
    a.rtnl.create_veth(a_dev, b_dev)?;
    let peer = a.index(b_dev)?;
    a.rtnl.move_to_netns(peer, b.ns.as_fd())?;
    a.up(a_dev)?;
    b.up(b_dev)
}

/// Two namespaces over one veth pair, with IPv4 and IPv6 addresses.
#[derive(Debug)]
pub struct VethPair {
    /// The client side.
    pub client: Node,
    /// The server side.
    pub server: Node,
    /// The client's device.
    pub client_dev: String,
    /// The server's device.
    pub server_dev: String,
}

impl VethPair {
    /// Client address, IPv4.
    pub const CLIENT4: Ipv4Addr = Ipv4Addr::new(10, 201, 0, 1);
    /// Server address, IPv4.
    pub const SERVER4: Ipv4Addr = Ipv4Addr::new(10, 201, 0, 2);
    /// Client address, IPv6.
    pub const CLIENT6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x201, 0, 0, 0, 0, 0, 1);
    /// Server address, IPv6.
    pub const SERVER6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x201, 0, 0, 0, 0, 0, 2);

    /// Builds the pair; `tag` (one or two letters) goes into the device names.
    pub fn new(tag: &str) -> Result<Self> {
        let mut client = Node::new()?;
        let mut server = Node::new()?;
        let client_dev = unique_name(&format!("o{tag}c"));
        let server_dev = unique_name(&format!("o{tag}s"));
        veth(&mut client, &client_dev, &mut server, &server_dev)?;
        client.addr(&client_dev, Self::CLIENT4.into(), 24)?;
        client.addr(&client_dev, Self::CLIENT6.into(), 64)?;
        server.addr(&server_dev, Self::SERVER4.into(), 24)?;
        server.addr(&server_dev, Self::SERVER6.into(), 64)?;
        Ok(VethPair {
            client,
            server,
            client_dev,
            server_dev,
        })
    }
}

/// `gro_flush_timeout` of the receiver in [`VxlanPath`], in ns.
pub const RECEIVER_GRO_FLUSH_TIMEOUT_NS: u64 = 1_000_000;

/// The VXLAN path of the `vxlan-ip-id` scenario:
///
/// ```text
///  A: vxlan (192.168.77.1) over veth ─ M1: forward ─ TUN ┐
///                                                         │ userspace relay
///  B: vxlan (192.168.77.2) over veth ─ M2: forward ─ TUN ┘ (offload-tun)
/// ```
///
/// A's underlay is 10.71.0.0/24, B's 10.72.0.0/24; M1 routes B's underlay
/// into its TUN, M2 routes A's into its own, and the relay carries packets
/// between the two TUN devices (see [`crate::relay`]). M2's veth towards B
/// has TSO off, so B's veth runs GRO on what arrives: B's underlay device is
/// the receiver whose merge ratio the scenario measures.
#[derive(Debug)]
pub struct VxlanPath {
    /// Sender.
    pub a: Node,
    /// First half of the middle hop.
    pub m1: Node,
    /// Second half of the middle hop.
    pub m2: Node,
    /// Receiver.
    pub b: Node,
    /// A's underlay device.
    pub a_dev: String,
    /// B's underlay device (the GRO receiver).
    pub b_dev: String,
    /// M1's TUN device.
    pub m1_tun: String,
    /// M2's TUN device.
    pub m2_tun: String,
    /// VXLAN device name in A and B.
    pub vxlan_dev: String,
}

impl VxlanPath {
    /// Inner address of A.
    pub const A_INNER: Ipv4Addr = Ipv4Addr::new(192, 168, 77, 1);
    /// Inner address of B.
    pub const B_INNER: Ipv4Addr = Ipv4Addr::new(192, 168, 77, 2);
    /// A's underlay address.
    pub const A_OUTER: Ipv4Addr = Ipv4Addr::new(10, 71, 0, 1);
    /// B's underlay address.
    pub const B_OUTER: Ipv4Addr = Ipv4Addr::new(10, 72, 0, 1);
    /// VXLAN port.
    pub const PORT: u16 = 4789;

    /// Builds the four namespaces, without the TUN devices (which the
    /// relay opens: see [`VxlanPath::attach_tuns`]).
    pub fn new() -> Result<Self> {
        let (mut a, mut m1, mut m2, mut b) =
            (Node::new()?, Node::new()?, Node::new()?, Node::new()?);
        let a_dev = unique_name("ova");
        let m1_dev = unique_name("ovm");
        let m2_dev = unique_name("ovn");
        let b_dev = unique_name("ovb");
        veth(&mut a, &a_dev, &mut m1, &m1_dev)?;
        veth(&mut m2, &m2_dev, &mut b, &b_dev)?;
        let m1_addr = Ipv4Addr::new(10, 71, 0, 254);
        let m2_addr = Ipv4Addr::new(10, 72, 0, 254);
        a.addr(&a_dev, Self::A_OUTER.into(), 24)?;
        m1.addr(&m1_dev, m1_addr.into(), 24)?;
        m2.addr(&m2_dev, m2_addr.into(), 24)?;
        b.addr(&b_dev, Self::B_OUTER.into(), 24)?;
        a.route(
            Ipv4Addr::new(10, 72, 0, 0).into(),
            24,
            Some(m1_addr.into()),
            &a_dev,
        )?;
        b.route(
            Ipv4Addr::new(10, 71, 0, 0).into(),
            24,
            Some(m2_addr.into()),
            &b_dev,
        )?;
        m1.sysctl("net/ipv4/ip_forward", "1")?;
        m2.sysctl("net/ipv4/ip_forward", "1")?;
        // B's veth receives with GRO; M2's side sends without TSO so that
        // veth runs GRO at all.
        b.features(&b_dev, &[("rx-gro", true)])?;
        m2.tso_off(&m2_dev)?;
        // gro_flush_timeout on the receiver: the relay injects one packet
        // per write(2), and veth's NAPI polls (and, by default, flushes GRO)
        // for each on its own, so nothing would ever merge. With a flush
        // timeout, napi_complete_done flushes only packets older than the
        // current jiffy and re-arms a timer (net/core/dev.c), so GRO holds a
        // train across polls as it does on a NIC whose ring fills between
        // interrupts. 1 ms: the timer fires only after the flow pauses.
        let dev = b_dev.clone();
        b.ns.run(move || {
            crate::sysfs::Sysfs::mount_here()?.set_net_attr(
                &dev,
                "gro_flush_timeout",
                RECEIVER_GRO_FLUSH_TIMEOUT_NS,
            )
        })?;
        let vxlan_dev = "vxlan-lab".to_string();
        for (node, dev, local, remote, inner) in [
            (&mut a, &a_dev, Self::A_OUTER, Self::B_OUTER, Self::A_INNER),
            (&mut b, &b_dev, Self::B_OUTER, Self::A_OUTER, Self::B_INNER),
        ] {
            let link = node.index(dev)?;
            node.rtnl().create_vxlan_remote(
                &vxlan_dev,
                &VxlanParams {
                    vni: 42,
                    port: Self::PORT,
                    local: Some(local),
                    local6: None,
                    link: Some(link),
                },
                remote,
            )?;
            node.addr(&vxlan_dev, inner.into(), 24)?;
            node.up(&vxlan_dev)?;
        }
        Ok(VxlanPath {
            a,
            m1,
            m2,
            b,
            a_dev,
            b_dev,
            m1_tun: unique_name("ovt"),
            m2_tun: unique_name("ovu"),
            vxlan_dev,
        })
    }

    /// Once the relay's TUN devices exist: brings them up and routes each
    /// far underlay into them.
    pub fn attach_tuns(&mut self) -> Result<()> {
        let (t1, t2) = (self.m1_tun.clone(), self.m2_tun.clone());
        self.m1.up(&t1)?;
        self.m2.up(&t2)?;
        self.m1
            .route(Ipv4Addr::new(10, 72, 0, 0).into(), 24, None, &t1)?;
        self.m2
            .route(Ipv4Addr::new(10, 71, 0, 0).into(), 24, None, &t2)?;
        Ok(())
    }
}
