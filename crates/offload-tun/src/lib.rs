//! offload-tun: TUN/TAP devices with `virtio_net_hdr` offloads, for
//! userspace datapaths (VPNs, tunnels, userspace stacks) on Linux.
//!
//! The engine crate (`offload`) knows the rules and has no I/O; this crate
//! is the thin Linux layer around it:
//!
//! - [`TunDevice::open`] creates a TUN or TAP device with `IFF_VNET_HDR`
//!   and negotiates `TUNSETOFFLOAD` step by step ([`negotiate`]), keeping
//!   what the kernel granted; [`TunDevice::from_fd`] adopts an fd opened by
//!   someone else and finds out with `TUNGETIFF` whether it carries vnet
//!   headers at all (the re-attach case).
//! - Reading: [`TunDevice::read_packets`] reads one packet and hands out
//!   wire-sized packets: super-packets are segmented and partial checksums
//!   completed ([`split_packet`], built on `offload::vnet::plan` and
//!   `offload::gso`), with the kernel's `hdr_len` never trusted.
//! - Writing: a [`Coalescer`] runs the engine's GRO over a batch and writes
//!   super-packets with `VnetHdr::for_delivery`; when the kernel refuses a
//!   GSO write with `EINVAL` (the 6.6.44 tail bug, tailscale#13041) it
//!   writes the segments instead. Without offloads it writes packet by
//!   packet.
//!
//! See `docs/tun.md` for the design and `examples/tun_relay.rs` for a relay
//! between two namespaces.

#![warn(missing_docs)]
#![deny(unsafe_code)]

mod arena;
mod coalesce;
mod device;
mod error;
mod offloads;
mod read;

pub use arena::FrameArena;
pub use coalesce::{CoalesceStats, Coalescer, CoalescerOptions, PacketWriter};
pub use device::{TunDevice, TunOptions};
pub use error::{Result, TunError};
pub use offloads::{negotiate, Negotiation, Offloads};
pub use read::{split_packet, split_packet_into, split_packet_with_checksum, RawPacket, Split};
