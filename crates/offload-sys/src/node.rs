//! Nodes (an anonymous namespace with its rtnetlink and ethtool handles)
//! and the veth pair between two of them: the building blocks of every
//! topology (`offload lab`'s, the bench's namespace pairs, the tests').
//!
//! Every namespace is anonymous ([`NetNs`]), so nothing built here can
//! outlive the process: devices, addresses, routes and the sysctls
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
use crate::ethtool::{first_group, Ethtool, TSO_GROUP};
use crate::netns::NetNs;
use crate::rtnl::{LinkState, Rtnl};
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
    /// `veth_skb_is_eligible_for_gro` checks `NETIF_F_ALL_TSO`) and reads
    /// TSO back as `ethtool -k` does ([`Node::tso`]): the list of features
    /// is the kernel's, so one a newer kernel adds (6.18's
    /// `tx-tcp-accecn-segmentation`) is switched off too.
    pub fn tso_off(&self, dev: &str) -> Result<()> {
        for f in self.ethtool.feature_names(dev)? {
            if first_group(&f) == Some(TSO_GROUP) {
                self.ethtool.set_feature(dev, &f, false)?;
            }
        }
        if self.tso(dev)? {
            return Err(crate::Error::FeatureRefused {
                dev: dev.to_string(),
                feature: TSO_GROUP.to_string(),
                wanted: false,
                actual: true,
            });
        }
        Ok(())
    }

    /// `ethtool -k`'s `tcp-segmentation-offload`: on while any
    /// `tx-tcp*-segmentation` feature is active (ethtool's netlink/features.c
    /// folds a legacy flag's features that way).
    pub fn tso(&self, dev: &str) -> Result<bool> {
        Ok(self
            .ethtool
            .features(dev)?
            .iter()
            .any(|f| f.active && first_group(&f.name) == Some(TSO_GROUP)))
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
