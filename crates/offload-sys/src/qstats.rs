//! Hardware GRO and GSO counters from the `netdev` generic-netlink family's
//! queue statistics (`qstats-get`, Documentation/netlink/specs/netdev.yaml;
//! the hw-gro/hw-gso fields since Linux 6.10).
//!
//! Drivers fill `struct netdev_queue_stats_rx/tx` through
//! `netdev_stat_ops`; the kernel (net/core/netdev-genl.c,
//! `netdev_nl_stats_write_rx/tx`) leaves out every counter a driver left at
//! its "not reported" value, so an absent attribute means *this driver does
//! not count it*, not zero. Messages go through `netlink-packet-generic`
//! (the rust-netlink family, decision 0023): the family id is resolved with
//! the controller's `CTRL_CMD_GETFAMILY`, and the reply's attributes are
//! plain u64 NLAs read with `netlink-packet-core`'s iterator.

use std::collections::BTreeMap;

use netlink_packet_core::{
    DecodeError, DefaultNla, Emitable, NlaBuffer, NlasIterator, ParseableParametrized, NLM_F_DUMP,
};
use netlink_packet_generic::ctrl::nlas::GenlCtrlAttrs;
use netlink_packet_generic::ctrl::{GenlCtrl, GenlCtrlCmd};
use netlink_packet_generic::{GenlFamily, GenlHeader, GenlMessage};
use netlink_sys::protocols::NETLINK_GENERIC;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::netlink::NetlinkSocket;

/// include/uapi/linux/netdev.h
const NETDEV_CMD_QUEUE_GET: u8 = 10;
const NETDEV_CMD_NAPI_GET: u8 = 11;
const NETDEV_CMD_QSTATS_GET: u8 = 12;
const NETDEV_A_QSTATS_IFINDEX: u16 = 1;
const NETDEV_A_QSTATS_QUEUE_TYPE: u16 = 2;
const NETDEV_A_QSTATS_QUEUE_ID: u16 = 3;
const NETDEV_A_QSTATS_SCOPE: u16 = 4;
const NETDEV_QSTATS_SCOPE_QUEUE: u32 = 1;
const NETDEV_A_QUEUE_ID: u16 = 1;
const NETDEV_A_QUEUE_IFINDEX: u16 = 2;
const NETDEV_A_QUEUE_TYPE: u16 = 3;
const NETDEV_A_QUEUE_NAPI_ID: u16 = 4;
const NETDEV_A_NAPI_IFINDEX: u16 = 1;
const NETDEV_A_NAPI_ID: u16 = 2;
const NETDEV_A_NAPI_IRQ: u16 = 3;

/// Every queue counter of the netdev spec (`NETDEV_A_QSTATS_*` from 8 on),
/// by attribute number.
const QUEUE_COUNTERS: [(u16, &str); 27] = [
    (8, "rx-packets"),
    (9, "rx-bytes"),
    (10, "tx-packets"),
    (11, "tx-bytes"),
    (12, "rx-alloc-fail"),
    (13, "rx-hw-drops"),
    (14, "rx-hw-drop-overruns"),
    (15, "rx-csum-complete"),
    (16, "rx-csum-unnecessary"),
    (17, "rx-csum-none"),
    (18, "rx-csum-bad"),
    (19, "rx-hw-gro-packets"),
    (20, "rx-hw-gro-bytes"),
    (21, "rx-hw-gro-wire-packets"),
    (22, "rx-hw-gro-wire-bytes"),
    (23, "rx-hw-drop-ratelimits"),
    (24, "tx-hw-drops"),
    (25, "tx-hw-drop-errors"),
    (26, "tx-csum-none"),
    (27, "tx-needs-csum"),
    (28, "tx-hw-gso-packets"),
    (29, "tx-hw-gso-bytes"),
    (30, "tx-hw-gso-wire-packets"),
    (31, "tx-hw-gso-wire-bytes"),
    (32, "tx-hw-drop-ratelimits"),
    (33, "tx-stop"),
    (34, "tx-wake"),
];

/// One queue's statistics as the driver reports them (`qstats-get` with
/// `scope: queue`); counters it does not fill are absent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueueStats {
    /// `rx` or `tx`.
    pub kind: &'static str,
    /// Queue id.
    pub id: u32,
    /// Counters by spec name.
    pub counters: BTreeMap<String, u64>,
}

/// A queue and the NAPI instance serving it (`queue-get`, 6.8+).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct QueueNapi {
    /// `rx` or `tx`.
    pub kind: &'static str,
    /// Queue id.
    pub id: u32,
    /// NAPI id, when the driver linked one (`netif_queue_set_napi`).
    pub napi_id: Option<u32>,
}

/// A NAPI instance (`napi-get`, 6.8+): its id and IRQ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Napi {
    /// NAPI id.
    pub id: u32,
    /// The IRQ it runs from, when the driver set one (`netif_napi_set_irq`).
    pub irq: Option<u32>,
}

fn number(value: &[u8]) -> Option<u64> {
    match value.len() {
        8 => Some(u64::from_ne_bytes(value.try_into().ok()?)),
        4 => Some(u64::from(u32::from_ne_bytes(value.try_into().ok()?))),
        _ => None,
    }
}

fn dump(cmd: u8, op: &str, nlas: Vec<DefaultNla>) -> Result<Option<Vec<NetdevMsg>>> {
    let mut genl = Genl::open()?;
    let Some(family) = genl.family_id("netdev")? else {
        return Ok(None);
    };
    let mut msg = GenlMessage::from_payload(NetdevMsg {
        cmd,
        nlas,
        received: Vec::new(),
    });
    msg.set_resolved_family_id(family);
    genl.request(op, msg, NLM_F_DUMP).map(Some)
}

fn queue_kind(v: u64) -> &'static str {
    if v == 0 {
        "rx"
    } else {
        "tx"
    }
}

/// Per-queue statistics of device `ifindex` (calling thread's namespace).
/// `Ok(None)`: no netdev family; an empty list: the driver reports none.
pub fn queue_stats(ifindex: u32) -> Result<Option<Vec<QueueStats>>> {
    let nlas = vec![
        DefaultNla::new(NETDEV_A_QSTATS_IFINDEX, ifindex.to_ne_bytes().to_vec()),
        DefaultNla::new(
            NETDEV_A_QSTATS_SCOPE,
            NETDEV_QSTATS_SCOPE_QUEUE.to_ne_bytes().to_vec(),
        ),
    ];
    let replies = match dump(NETDEV_CMD_QSTATS_GET, "netdev qstats-get scope queue", nlas) {
        Ok(r) => r,
        // A device without netdev_stat_ops answers EOPNOTSUPP.
        Err(Error::Netlink { source, .. }) if source.raw_os_error() == Some(libc::EOPNOTSUPP) => {
            return Ok(Some(Vec::new()))
        }
        Err(e) => return Err(e),
    };
    let Some(replies) = replies else {
        return Ok(None);
    };
    let mut out = Vec::new();
    for reply in &replies {
        let mut q = QueueStats {
            kind: "rx",
            id: 0,
            counters: BTreeMap::new(),
        };
        for (kind, n) in numbers(reply) {
            match kind {
                NETDEV_A_QSTATS_QUEUE_TYPE => q.kind = queue_kind(n),
                NETDEV_A_QSTATS_QUEUE_ID => q.id = n as u32,
                k => {
                    if let Some((_, name)) = QUEUE_COUNTERS.iter().find(|(id, _)| *id == k) {
                        q.counters.insert((*name).to_string(), n);
                    }
                }
            }
        }
        out.push(q);
    }
    Ok(Some(out))
}

/// The queues of device `ifindex` and their NAPI ids. `Ok(None)`: the
/// kernel has no netdev family or no `queue-get` (before 6.8).
pub fn queue_napis(ifindex: u32) -> Result<Option<Vec<QueueNapi>>> {
    let replies = device_dump(
        NETDEV_CMD_QUEUE_GET,
        "netdev queue-get",
        NETDEV_A_QUEUE_IFINDEX,
        ifindex,
    )?;
    Ok(replies.map(|replies| {
        replies
            .iter()
            .map(|attrs| {
                let mut q = QueueNapi {
                    kind: "rx",
                    id: 0,
                    napi_id: None,
                };
                for &(kind, n) in attrs {
                    match kind {
                        NETDEV_A_QUEUE_ID => q.id = n as u32,
                        NETDEV_A_QUEUE_TYPE => q.kind = queue_kind(n),
                        NETDEV_A_QUEUE_NAPI_ID => q.napi_id = Some(n as u32),
                        _ => {}
                    }
                }
                q
            })
            .collect()
    }))
}

/// The NAPI instances of device `ifindex` with their IRQs. `Ok(None)`: no
/// netdev family or no `napi-get` (before 6.8).
pub fn napis(ifindex: u32) -> Result<Option<Vec<Napi>>> {
    let replies = device_dump(
        NETDEV_CMD_NAPI_GET,
        "netdev napi-get",
        NETDEV_A_NAPI_IFINDEX,
        ifindex,
    )?;
    Ok(replies.map(|replies| {
        replies
            .iter()
            .filter_map(|attrs| {
                let mut id = None;
                let mut irq = None;
                for &(kind, n) in attrs {
                    match kind {
                        NETDEV_A_NAPI_ID => id = Some(n as u32),
                        NETDEV_A_NAPI_IRQ => irq = Some(n as u32),
                        _ => {}
                    }
                }
                Some(Napi { id: id?, irq })
            })
            .collect()
    }))
}

/// A per-device dump of the netdev family (`queue-get`, `napi-get`):
/// `cmd` with `ifindex` as attribute `ifindex_attr`, each reply as its
/// numeric attributes. `Ok(None)`: no netdev family, or a kernel without
/// the command (`EOPNOTSUPP` or `EINVAL`: before 6.8).
fn device_dump(cmd: u8, op: &str, ifindex_attr: u16, ifindex: u32) -> Result<Option<Vec<Numbers>>> {
    let nlas = vec![DefaultNla::new(
        ifindex_attr,
        ifindex.to_ne_bytes().to_vec(),
    )];
    match dump(cmd, op, nlas) {
        Ok(replies) => Ok(replies.map(|r| r.iter().map(numbers).collect())),
        Err(Error::Netlink { source, .. })
            if matches!(
                source.raw_os_error(),
                Some(libc::EOPNOTSUPP) | Some(libc::EINVAL)
            ) =>
        {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// A reply's attributes that hold a number (u32 or u64), in order: type
/// and value.
type Numbers = Vec<(u16, u64)>;

/// A reply's [`Numbers`].
fn numbers(reply: &NetdevMsg) -> Numbers {
    reply
        .received
        .iter()
        .filter_map(|(kind, value)| number(value).map(|n| (*kind, n)))
        .collect()
}

/// The counters reported, by their names in the netdev spec.
const COUNTERS: [(u16, &str); 8] = [
    (19, "rx-hw-gro-packets"),
    (20, "rx-hw-gro-bytes"),
    (21, "rx-hw-gro-wire-packets"),
    (22, "rx-hw-gro-wire-bytes"),
    (28, "tx-hw-gso-packets"),
    (29, "tx-hw-gso-bytes"),
    (30, "tx-hw-gso-wire-packets"),
    (31, "tx-hw-gso-wire-bytes"),
];

/// One device's hardware GRO/GSO counters, summed over its queues.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HwOffloadStats {
    /// Counters the driver reports, by spec name; those it does not are
    /// absent (see the module doc).
    pub counters: BTreeMap<String, u64>,
    /// Whether the device answered `qstats-get` at all (drivers without
    /// `netdev_stat_ops` are not listed in the dump).
    pub qstats_supported: bool,
}

impl HwOffloadStats {
    /// Wire packets per coalesced packet for hardware GRO, where reported.
    pub fn hw_gro_ratio(&self) -> Option<f64> {
        let gro = *self.counters.get("rx-hw-gro-packets")?;
        let wire = *self.counters.get("rx-hw-gro-wire-packets")?;
        (gro > 0).then(|| wire as f64 / gro as f64)
    }
}

/// A netdev-family request or reply: the command and its raw attributes.
#[derive(Debug, Clone)]
struct NetdevMsg {
    cmd: u8,
    /// Attributes to send.
    nlas: Vec<DefaultNla>,
    /// Attributes received: type (flags masked off) and value.
    received: Vec<(u16, Vec<u8>)>,
}

impl GenlFamily for NetdevMsg {
    fn family_name() -> &'static str {
        "netdev"
    }
    fn command(&self) -> u8 {
        self.cmd
    }
    fn version(&self) -> u8 {
        1
    }
}

impl Emitable for NetdevMsg {
    fn buffer_len(&self) -> usize {
        self.nlas.as_slice().buffer_len()
    }
    fn emit(&self, buffer: &mut [u8]) {
        self.nlas.as_slice().emit(buffer)
    }
}

impl ParseableParametrized<[u8], GenlHeader> for NetdevMsg {
    fn parse_with_param(buf: &[u8], header: GenlHeader) -> std::result::Result<Self, DecodeError> {
        let mut received = Vec::new();
        for nla in NlasIterator::new(buf) {
            let nla: NlaBuffer<&[u8]> = nla?;
            received.push((nla.kind(), nla.value().to_vec()));
        }
        Ok(NetdevMsg {
            cmd: header.cmd,
            nlas: Vec::new(),
            received,
        })
    }
}

/// A generic-netlink socket in the calling thread's namespace.
struct Genl {
    sock: NetlinkSocket,
}

impl Genl {
    fn open() -> Result<Self> {
        Ok(Genl {
            sock: NetlinkSocket::open(NETLINK_GENERIC, "NETLINK_GENERIC")?,
        })
    }

    /// Sends `msg` and returns the payloads of the replies up to ACK/DONE
    /// ([`NetlinkSocket::request`]).
    fn request<F>(&mut self, op: &str, mut msg: GenlMessage<F>, flags: u16) -> Result<Vec<F>>
    where
        F: GenlFamily + Emitable + ParseableParametrized<[u8], GenlHeader> + std::fmt::Debug,
    {
        msg.finalize();
        Ok(self
            .sock
            .request(op, msg, flags)?
            .into_iter()
            .map(|reply| reply.into_parts().1)
            .collect())
    }

    /// The dynamically assigned id of a generic-netlink family, or `None`
    /// when the kernel has no such family (netdev: before 6.5).
    fn family_id(&mut self, name: &str) -> Result<Option<u16>> {
        let msg = GenlMessage::from_payload(GenlCtrl {
            cmd: GenlCtrlCmd::GetFamily,
            nlas: vec![GenlCtrlAttrs::FamilyName(name.into())],
        });
        match self.request("CTRL_CMD_GETFAMILY", msg, 0) {
            Ok(replies) => Ok(replies.iter().flat_map(|r| &r.nlas).find_map(|a| match a {
                GenlCtrlAttrs::FamilyId(id) => Some(*id),
                _ => None,
            })),
            Err(Error::Netlink { source, .. }) if source.raw_os_error() == Some(libc::ENOENT) => {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }
}

/// Reads the device-level queue statistics of every device in the calling
/// thread's namespace that reports them, by ifindex. `Ok(None)`: the
/// kernel has no netdev family.
pub fn read_all() -> Result<Option<BTreeMap<u32, HwOffloadStats>>> {
    let mut genl = Genl::open()?;
    let Some(family) = genl.family_id("netdev")? else {
        return Ok(None);
    };
    let mut msg = GenlMessage::from_payload(NetdevMsg {
        cmd: NETDEV_CMD_QSTATS_GET,
        nlas: Vec::new(),
        received: Vec::new(),
    });
    msg.set_resolved_family_id(family);
    let replies = genl.request("netdev qstats-get", msg, NLM_F_DUMP)?;
    let mut out = BTreeMap::new();
    for reply in replies {
        let mut ifindex = None;
        let mut stats = HwOffloadStats {
            qstats_supported: true,
            ..Default::default()
        };
        for (kind, value) in &reply.received {
            let value = value.as_slice();
            let number = match value.len() {
                8 => u64::from_ne_bytes(value.try_into().unwrap_or_default()),
                4 => u64::from(u32::from_ne_bytes(value.try_into().unwrap_or_default())),
                _ => continue,
            };
            if *kind == NETDEV_A_QSTATS_IFINDEX {
                ifindex = u32::try_from(number).ok();
            } else if let Some((_, name)) = COUNTERS.iter().find(|(id, _)| *id == *kind) {
                stats.counters.insert((*name).to_string(), number);
            }
        }
        if let Some(i) = ifindex {
            out.insert(i, stats);
        }
    }
    Ok(Some(out))
}

/// The names of the counters this module reads, in spec order.
pub fn counter_names() -> impl Iterator<Item = &'static str> {
    COUNTERS.iter().map(|(_, n)| *n)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The dump works on this kernel (6.5+ has the family) and lists only
    /// known counters; a device absent from the dump reports none.
    #[test]
    fn qstats_dump_parses() {
        let Some(all) = read_all().expect("qstats-get") else {
            panic!("this kernel (6.18 here) has the netdev family");
        };
        for s in all.values() {
            for k in s.counters.keys() {
                assert!(counter_names().any(|n| n == k), "{k}");
            }
        }
    }
}
