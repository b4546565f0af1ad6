//! Two anonymous network namespaces joined by a veth link, with addresses,
//! built entirely over rtnetlink: the topology of a benchmark between two
//! hosts (used by `offload bench`'s tests and measurements).
//!
//! Both namespaces are [`NetNs`] handles, so nothing is named or mounted and
//! the kernel removes the namespaces, the veth pair and every per-namespace
//! sysctl when the [`VethPair`] (and every socket made inside) is dropped,
//! also on panic or `SIGKILL`.

use std::io;
use std::net::IpAddr;
use std::os::fd::{AsFd, AsRawFd};

use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_ACK, NLM_F_REQUEST,
};
use netlink_packet_route::link::{LinkAttribute, LinkMessage};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};

use crate::error::{Error, Result};
use crate::netns::NetNs;
use crate::rtnl::Rtnl;

/// Addresses of one end of the pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndConfig {
    /// Name of the veth end inside its namespace.
    pub dev: String,
    /// Addresses with their prefix length (IPv6 ones get `nodad`).
    pub addrs: Vec<(IpAddr, u8)>,
}

/// Two namespaces, `a` and `b`, joined by veth, both ends up with their
/// addresses, `lo` up in both.
#[derive(Debug)]
pub struct VethPair {
    /// Namespace of end A.
    pub a: NetNs,
    /// Namespace of end B.
    pub b: NetNs,
    /// Interface index of end A (in namespace A).
    pub a_index: u32,
    /// Interface index of end B (in namespace B).
    pub b_index: u32,
}

impl VethPair {
    /// Builds the pair. Needs CAP_NET_ADMIN and CAP_SYS_ADMIN.
    pub fn create(a: &EndConfig, b: &EndConfig) -> Result<Self> {
        let ns_a = NetNs::new_anonymous()?;
        let ns_b = NetNs::new_anonymous()?;
        let b_fd = ns_b.as_fd();
        let a_index = ns_a.run(|| {
            let mut rtnl = Rtnl::open()?;
            rtnl.create_veth(&a.dev, &b.dev)?;
            let peer = rtnl.link_by_name(&b.dev)?;
            move_link_to_netns(peer.index, &b.dev, b_fd.as_raw_fd())?;
            configure(&mut rtnl, a)
        })?;
        let b_index = ns_b.run(|| configure(&mut Rtnl::open()?, b))?;
        Ok(VethPair {
            a: ns_a,
            b: ns_b,
            a_index,
            b_index,
        })
    }
}

/// Brings `lo` and the end up and adds its addresses; returns its index.
fn configure(rtnl: &mut Rtnl, end: &EndConfig) -> Result<u32> {
    let lo = rtnl.link_by_name("lo")?;
    rtnl.set_up(lo.index, true)?;
    let dev = rtnl.link_by_name(&end.dev)?;
    for &(addr, prefix) in &end.addrs {
        rtnl.add_address(dev.index, addr, prefix)?;
    }
    rtnl.set_up(dev.index, true)?;
    Ok(dev.index)
}

/// `RTM_NEWLINK` with `IFLA_NET_NS_FD`: moves a link of the calling thread's
/// namespace into the namespace behind `ns_fd` (`ip link set DEV netns NS`).
pub fn move_link_to_netns(index: u32, name: &str, ns_fd: i32) -> Result<()> {
    let op = format!("RTM_NEWLINK {name} netns fd {ns_fd}");
    let sys = |source: io::Error| Error::Netlink {
        op: op.clone(),
        source,
    };
    let mut sock = Socket::new(NETLINK_ROUTE).map_err(sys)?;
    sock.bind_auto().map_err(sys)?;
    let mut msg = LinkMessage::default();
    msg.header.index = index;
    msg.attributes.push(LinkAttribute::NetNsFd(ns_fd));
    let mut header = NetlinkHeader::default();
    header.flags = NLM_F_REQUEST | NLM_F_ACK;
    header.sequence_number = 1;
    let mut packet = NetlinkMessage::new(
        header,
        NetlinkPayload::from(RouteNetlinkMessage::SetLink(msg)),
    );
    packet.finalize();
    let mut out = vec![0u8; packet.buffer_len()];
    packet.serialize(&mut out);
    sock.send_to(&out, &SocketAddr::new(0, 0), 0).map_err(sys)?;
    let mut buf = Vec::with_capacity(64 * 1024);
    loop {
        buf.clear();
        let (len, _) = sock.recv_from(&mut buf, 0).map_err(sys)?;
        let reply =
            NetlinkMessage::<RouteNetlinkMessage>::deserialize(&buf[..len]).map_err(|e| {
                Error::NetlinkReply {
                    op: op.clone(),
                    detail: e.to_string(),
                }
            })?;
        if let NetlinkPayload::Error(err) = reply.payload {
            return match err.code {
                None => Ok(()),
                Some(code) => Err(sys(io::Error::from_raw_os_error(-code.get()))),
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pair_is_built_with_both_ends_up_and_vanishes_with_its_handles() {
        let a = EndConfig {
            dev: "ofl-ta".into(),
            addrs: vec![("10.202.0.1".parse().unwrap(), 24)],
        };
        let b = EndConfig {
            dev: "ofl-tb".into(),
            addrs: vec![("10.202.0.2".parse().unwrap(), 24)],
        };
        let pair = VethPair::create(&a, &b).unwrap();
        let state = pair.b.run(|| Rtnl::open()?.link_by_name("ofl-tb")).unwrap();
        assert!(state.up);
        assert_eq!(state.index, pair.b_index);
        assert_eq!(state.kind.as_deref(), Some("veth"));
        // The peer left namespace A.
        assert!(pair.a.run(|| Rtnl::open()?.link_by_name("ofl-tb")).is_err());
        // The ends reach each other.
        let listener = pair
            .b
            .run(|| std::net::TcpListener::bind("10.202.0.2:0").map_err(|e| Error::sys("bind", e)))
            .unwrap();
        let to = listener.local_addr().unwrap();
        pair.a
            .run(|| std::net::TcpStream::connect(to).map_err(|e| Error::sys("connect", e)))
            .unwrap();
    }
}
