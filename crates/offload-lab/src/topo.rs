//! Topologies for `offload lab` beyond a plain veth pair: tunnels and a
//! userspace middle hop, built from offload-sys's nodes
//! ([`offload_sys::node`]) and torn down by the kernel when the handles go.
//! Nothing a scenario builds can outlive the process (every namespace is
//! anonymous); the host's own namespace is only read, never written.

use std::net::Ipv4Addr;

use offload_sys::error::Result;
use offload_sys::node::{unique_name, veth, Node};
use offload_sys::rtnl::VxlanParams;

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
    /// M2's veth towards B: what leaves it is what B's GRO receives.
    pub m2_dev: String,
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
            offload_sys::sysfs::Sysfs::mount_here()?.set_net_attr(
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
            m2_dev,
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
