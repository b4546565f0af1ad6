//! Every TCP socket of the calling thread's namespace with its drop count,
//! through `sock_diag` (`NETLINK_SOCK_DIAG`, `SOCK_DIAG_BY_FAMILY` with
//! `INET_DIAG_SKMEMINFO`): the kernel's `sk->sk_drops`, which `ss -tm`
//! prints as `d` in `skmem:(...)`. `/proc/net/tcp` has no drops column
//! (`/proc/net/udp` has). Messages are the rust-netlink family's
//! `netlink-packet-sock-diag`.

use std::net::SocketAddr;

use netlink_packet_sock_diag::constants::{AF_INET, AF_INET6, IPPROTO_TCP, TCP_LISTEN};
use netlink_packet_sock_diag::inet::nlas::Nla;
use netlink_packet_sock_diag::inet::{ExtensionFlags, InetRequest, SocketId, StateFlags};
use netlink_packet_sock_diag::SockDiagMessage;
use netlink_sys::protocols::NETLINK_SOCK_DIAG;

use crate::error::Result;
use crate::netlink::NetlinkSocket;

/// One TCP socket and its drops since it was created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpSocketDrops {
    /// The kernel's socket cookie: unique for the socket's lifetime.
    pub cookie: u64,
    /// Local address and port.
    pub local: SocketAddr,
    /// Remote address and port (unspecified for a listener).
    pub remote: SocketAddr,
    /// Whether the socket listens (drops are then accept-queue overflows,
    /// `tcp_listendrop`).
    pub listening: bool,
    /// Socket inode (0 for a socket without a file, e.g. `TIME_WAIT`).
    pub inode: u32,
    /// `sk_drops`.
    pub drops: u32,
}

/// Every TCP socket (IPv4 and IPv6, all states) with its drop count.
pub fn tcp_socket_drops() -> Result<Vec<TcpSocketDrops>> {
    let mut sock = NetlinkSocket::open(NETLINK_SOCK_DIAG, "NETLINK_SOCK_DIAG")?;
    let mut out = Vec::new();
    for (family, id) in [
        (AF_INET, SocketId::new_v4()),
        (AF_INET6, SocketId::new_v6()),
    ] {
        let req = SockDiagMessage::InetRequest(InetRequest {
            family,
            protocol: IPPROTO_TCP,
            extensions: ExtensionFlags::SKMEMINFO,
            states: StateFlags::all(),
            socket_id: id,
        });
        let replies = sock.request(
            "SOCK_DIAG_BY_FAMILY tcp",
            req,
            netlink_packet_core::NLM_F_DUMP,
        )?;
        for reply in replies {
            let SockDiagMessage::InetResponse(r) = reply else {
                continue;
            };
            let drops = r.nlas.iter().find_map(|n| match n {
                Nla::MemInfo(m) => Some(m.drops),
                _ => None,
            });
            let id = &r.header.socket_id;
            out.push(TcpSocketDrops {
                cookie: u64::from_ne_bytes(id.cookie),
                local: SocketAddr::new(id.source_address, id.source_port),
                remote: SocketAddr::new(id.destination_address, id.destination_port),
                listening: r.header.state == TCP_LISTEN,
                inode: r.header.inode,
                drops: drops.unwrap_or(0),
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A listening socket of this process is found, by its port, with no
    /// drops.
    #[test]
    fn finds_a_listener_of_this_process() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let all = tcp_socket_drops().unwrap();
        let me = all
            .iter()
            .find(|s| s.local.port() == port && s.listening)
            .unwrap_or_else(|| panic!("listener on {port} not in {all:?}"));
        assert_eq!(me.drops, 0);
        assert_ne!(me.inode, 0);
    }
}
