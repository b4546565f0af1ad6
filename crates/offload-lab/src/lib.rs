//! offload-lab: topologies, the live-kernel GRO oracle, host inspection
//! and the experiments of `offload lab`, on the Linux control plane of
//! offload-sys.
//!
//! - [`topo`]: topologies beyond a veth pair (a VXLAN path with a userspace
//!   middle hop);
//! - [`oracle::KernelGro`] turns the running kernel into a function from
//!   packet trains to GRO output, for the engine's conformance suite (see
//!   `docs/lab.md`);
//! - [`inspect`], [`live`], [`sample`]: a host's offload state, GRO
//!   measured as it runs, a post-GRO capture;
//! - [`relay`]: the userspace relay between two TUN devices;
//! - [`experiments`]: the experiments of `offload lab`, one module each
//!   behind the [`experiments::Experiment`] trait, with their paired
//!   statistics and their text and HTML reports; the traffic comes from
//!   offload-bench's library.
//!
//! The plumbing (namespaces, rtnetlink, ethtool, sysfs, queue statistics,
//! TUN ioctls, packet sockets and the error type they share) is
//! offload-sys's; callers import it from there.
//!
//! Everything here needs `CAP_NET_ADMIN` and `CAP_SYS_ADMIN` (root) and
//! `/dev/net/tun`; failures say which step and which object failed.

#![warn(missing_docs)]
// Unsafe code only where a module makes a raw syscall; each block there
// carries its SAFETY comment.
#![deny(unsafe_code)]

pub mod experiments;
pub mod inspect;
pub mod live;
pub mod oracle;
pub mod relay;
pub mod sample;
pub mod topo;

pub use oracle::{GroKnobs, KernelGro, TrainOutcome, VxlanConf};
