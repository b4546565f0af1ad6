//! # offload: the engine
//!
//! Coalesces packets (GRO) and segments super-packets (GSO/TSO) exactly as
//! the Linux kernel does, BIG TCP included, with a named reason for every
//! flush. No I/O and no Linux-only dependencies: a VPN or a userspace stack
//! can depend on this crate alone.
//!
//! - [`wire`]: typed zero-copy views over headers, tolerant of snap-length
//!   truncation and BIG TCP length encodings.
//! - [`checksum`]: Internet checksums with the kernel's incremental arithmetic.
//! - [`link`]: link layers (Ethernet/VLAN, SLL, SLL2, raw IP).
//! - [`gro`]: the receive-side engine and its [`gro::FlushReason`]s; it
//!   delivers zero-copy (headers plus payload ranges of the input frames).
//! - [`gso`]: segmentation of super-packets.
//! - [`vnet`]: `virtio_net_hdr` for TUN/TAP and virtio datapaths.
//!
//! The packet builder the workspace's tests, benches and conformance
//! suites use (`offload::build`) is test support, behind the
//! `test-support` feature, not part of this API.
//!
//! # A TUN datapath
//!
//! A VPN reads IP packets from its peers (here: a batch of raw IPv4
//! packets) and writes them into a TUN device opened with
//! `IFF_VNET_HDR`. GRO merges what the kernel's GRO would have merged;
//! each delivery goes out as one `virtio_net_hdr` plus the packet, the
//! super-packets as GSO writes the kernel segments again if it must. Held
//! packets wait at most the flush timeout: the datapath sleeps until
//! [`gro::GroEngine::poll_timeout`] and then calls
//! [`gro::GroEngine::handle_timeout`], as the kernel's `gro_flush_timeout`
//! timer does.
//!
//! ```
//! use offload::gro::{Delivered, GroConfig, GroEngine, Input};
//! use offload::vnet::{VnetHdr, HDR_LEN};
//! use offload::LinkKind;
//!
//! /// Stands for the TUN device: one `writev` per packet.
//! struct Tun(Vec<Vec<u8>>);
//! impl Tun {
//!     fn writev(&mut self, parts: &[&[u8]]) {
//!         self.0.push(parts.concat());
//!     }
//! }
//!
//! /// A raw IPv4/TCP segment `i` of one flow (checksums left to the peer's
//! /// NIC, so the receiver does not verify them here).
//! fn segment(i: u32) -> Vec<u8> {
//!     let payload = 1000u32;
//!     let mut p = vec![0u8; 40 + payload as usize];
//!     p[0] = 0x45;
//!     p[2..4].copy_from_slice(&(40 + payload as u16).to_be_bytes());
//!     p[4..6].copy_from_slice(&(i as u16).to_be_bytes()); // incrementing ID
//!     p[6] = 0x40; // DF
//!     p[8] = 64;
//!     p[9] = 6; // TCP
//!     p[12..16].copy_from_slice(&[10, 0, 0, 1]);
//!     p[16..20].copy_from_slice(&[10, 0, 0, 2]);
//!     let c = offload::checksum::checksum(&p[..20]);
//!     p[10..12].copy_from_slice(&c.to_be_bytes());
//!     p[20..22].copy_from_slice(&40000u16.to_be_bytes());
//!     p[22..24].copy_from_slice(&443u16.to_be_bytes());
//!     p[24..28].copy_from_slice(&(1 + i * payload).to_be_bytes());
//!     p[32] = 5 << 4; // data offset
//!     p[33] = 0x10; // ACK
//!     p[34..36].copy_from_slice(&512u16.to_be_bytes());
//!     p
//! }
//!
//! let batch: Vec<Vec<u8>> = (0..8).map(segment).collect();
//! let now_ns = 1_000_000;
//! let mut gro = GroEngine::new(GroConfig::default().verify_checksums(false));
//! let mut tun = Tun(Vec::new());
//! let mut write = |d: &Delivered<'_>| {
//!     // Zero-copy: `d.data` has the rewritten headers, `d.frags` the
//!     // payload ranges still in `batch` (frame numbers are 1-based).
//!     let hdr = VnetHdr::for_delivery(d).expect("a TCP packet");
//!     let mut vnet = [0u8; HDR_LEN];
//!     hdr.encode(&mut vnet);
//!     let mut parts: Vec<&[u8]> = vec![&vnet, d.data];
//!     for f in d.frags {
//!         let frame = &batch[f.frame as usize - 1];
//!         parts.push(&frame[f.offset as usize..][..f.len as usize]);
//!     }
//!     tun.writev(&parts);
//! };
//! gro.receive_batch(
//!     batch.iter().enumerate().map(|(i, p)| Input {
//!         data: p,
//!         link: LinkKind::Ipv4,
//!         timestamp_ns: now_ns,
//!         frame: i as u64 + 1,
//!         orig_len: p.len() as u32,
//!     }),
//!     &mut write,
//! );
//! // The flow is held until its flush timeout; then it goes out.
//! let deadline = gro.poll_timeout().expect("a held packet");
//! assert_eq!(deadline, now_ns + gro.config().flush_timeout_ns);
//! gro.handle_timeout(deadline - 1, &mut write); // too early: still held
//! gro.handle_timeout(deadline, &mut write);
//! assert_eq!(gro.poll_timeout(), None);
//! assert_eq!(tun.0.len(), 1); // one super-packet of 8 segments
//! assert_eq!(tun.0[0].len(), HDR_LEN + 40 + 8 * 1000);
//! ```
#![deny(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

#[cfg(any(test, feature = "test-support"))]
pub mod build;
pub mod checksum;
pub mod gro;
pub mod gso;
pub mod layout;
pub mod link;
mod tunnel;
pub mod vnet;
pub mod wire;

// GRO -> GSO round trips through every tunnel: they need both halves, so
// they live above both (gro and gso stay one-way).
#[cfg(test)]
mod tunnel_tests;

pub use gro::{Delivered, FlushReason, GroConfig, GroEngine, GroStats, Input, RxChecksum};
pub use link::LinkKind;
