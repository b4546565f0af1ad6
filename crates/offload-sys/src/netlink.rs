//! The one netlink request/reply loop, for every family the crate speaks
//! (rtnetlink in the `rtnl` module, generic netlink in `qstats`).
//!
//! A request goes out with `NLM_F_REQUEST` and a fresh sequence number;
//! replies are read until the kernel's ACK (an `NLMSG_ERROR` with code 0),
//! an error, or `NLMSG_DONE` for dumps. A request with neither `NLM_F_DUMP`
//! nor `NLM_F_ACK` ends with its first reply. Messages of another sequence
//! number are skipped, so replies can never be mixed up. The socket is
//! blocking: callers make a handful of requests, never on a hot path
//! (docs/decisions/0020-netlink-and-syscall-crates.md).

use std::io;

use netlink_packet_core::{
    NetlinkDeserializable, NetlinkHeader, NetlinkMessage, NetlinkPayload, NetlinkSerializable,
    NLM_F_ACK, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_sys::{Socket, SocketAddr};

use crate::error::{Error, Result};

/// A blocking netlink socket of one protocol, in the network namespace of
/// the thread that opened it.
#[derive(Debug)]
pub struct NetlinkSocket {
    sock: Socket,
    seq: u32,
    buf: Vec<u8>,
}

impl NetlinkSocket {
    /// Opens and binds a socket of `protocol` (`NETLINK_ROUTE`,
    /// `NETLINK_GENERIC`); `name` is that protocol's name for errors.
    pub fn open(protocol: isize, name: &str) -> Result<Self> {
        let mut sock =
            Socket::new(protocol).map_err(|e| Error::sys(format!("socket({name})"), e))?;
        sock.bind_auto()
            .map_err(|e| Error::sys(format!("bind({name})"), e))?;
        // Extended ACKs make the kernel's refusal reasons (e.g. "too big
        // gro_max_size") part of the error; failure to enable them is harmless.
        let _ = sock.set_ext_ack(true);
        Ok(NetlinkSocket {
            sock,
            seq: 0,
            buf: Vec::with_capacity(256 * 1024),
        })
    }

    /// Sends `msg` with `NLM_F_REQUEST | flags` and returns the inner
    /// messages of the reply. `op` names the request in errors.
    pub fn request<I>(&mut self, op: &str, msg: I, flags: u16) -> Result<Vec<I>>
    where
        I: NetlinkSerializable + NetlinkDeserializable + std::fmt::Debug,
    {
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        let mut header = NetlinkHeader::default();
        header.flags = NLM_F_REQUEST | flags;
        header.sequence_number = seq;
        let mut packet = NetlinkMessage::new(header, NetlinkPayload::InnerMessage(msg));
        packet.finalize();
        let mut out = vec![0u8; packet.buffer_len()];
        packet.serialize(&mut out);
        let netlink_err = |source: io::Error| Error::Netlink {
            op: op.to_string(),
            source,
        };
        self.sock
            .send_to(&out, &SocketAddr::new(0, 0), 0)
            .map_err(netlink_err)?;

        let dump = flags & NLM_F_DUMP == NLM_F_DUMP;
        let mut replies = Vec::new();
        loop {
            self.buf.clear();
            let (len, _) = self.sock.recv_from(&mut self.buf, 0).map_err(netlink_err)?;
            let mut offset = 0;
            while offset < len {
                let reply =
                    NetlinkMessage::<I>::deserialize(&self.buf[offset..len]).map_err(|e| {
                        Error::NetlinkReply {
                            op: op.to_string(),
                            detail: e.to_string(),
                        }
                    })?;
                let step = reply.header.length as usize;
                if step == 0 {
                    return Err(Error::NetlinkReply {
                        op: op.to_string(),
                        detail: "zero-length netlink message".into(),
                    });
                }
                offset += (step + 3) & !3;
                if reply.header.sequence_number != seq {
                    continue;
                }
                match reply.payload {
                    NetlinkPayload::Error(err) => {
                        return match err.code {
                            None => Ok(replies),
                            Some(code) => {
                                Err(netlink_err(io::Error::from_raw_os_error(-code.get())))
                            }
                        };
                    }
                    NetlinkPayload::Done(_) => return Ok(replies),
                    NetlinkPayload::InnerMessage(inner) => {
                        replies.push(inner);
                        if !dump && flags & NLM_F_ACK == 0 {
                            return Ok(replies);
                        }
                    }
                    _ => {}
                }
            }
        }
    }
}
