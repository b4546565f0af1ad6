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
//! - [`build`]: a packet builder for tests, generators and samples.
#![deny(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

pub mod build;
pub mod checksum;
pub mod gro;
pub mod gso;
pub mod layout;
pub mod link;
pub mod vnet;
pub mod wire;

// GRO -> GSO round trips through every tunnel: they need both halves, so
// they live above both (gro and gso stay one-way).
#[cfg(test)]
mod tunnel_tests;

pub use gro::{Delivered, FlushReason, GroConfig, GroEngine, GroStats, Input, RxChecksum};
pub use link::LinkKind;
