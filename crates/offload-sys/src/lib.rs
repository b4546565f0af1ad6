//! offload-sys: the Linux control plane every other offload crate builds on.
//!
//! Throw-away network setups that cannot leak: everything lives in an
//! *anonymous* network namespace ([`NetNs`]) held only by file descriptors,
//! so the kernel tears it down, devices included, when the process lets go
//! of it — on return, on panic, or on `SIGKILL`.
//!
//! - [`netns`]: anonymous namespaces and running code inside them;
//! - [`node`]: a namespace with its handles, and veth pairs between two;
//! - [`netlink`]: the one netlink request/reply loop;
//! - [`rtnl`]: synchronous rtnetlink (links, addresses, routes,
//!   neighbours, GRO size knobs, veth, VXLAN and Geneve creation);
//! - [`qstats`]: the `netdev` generic-netlink family's queue statistics;
//! - [`ethtool`]: ethtool features, channels, rings through `SIOCETHTOOL`;
//! - [`sysfs`]: a namespace's sysfs (detached mount) and sysctls;
//! - [`packet`]: an `AF_PACKET` socket that sees packets after GRO;
//! - [`perf`]: tracepoint counters (`perf_event_open`);
//! - [`bpf`], [`btf`]: hand-assembled raw-tracepoint programs and their
//!   maps, with structure offsets from the running kernel's BTF;
//! - [`tun`]: the TUN/TAP ioctls and a device handle with any `IFF_*` flags.
//!
//! Nothing here knows about experiments, findings or reports: those are
//! offload-lab's, offload-bench's and the CLI's. Everything needs
//! `CAP_NET_ADMIN` and `CAP_SYS_ADMIN` (root), and [`tun`] needs
//! `/dev/net/tun`; failures say which step and which object failed.

#![warn(missing_docs)]
// Unsafe code only in the modules that make raw syscalls (AF_PACKET, the
// ethtool ioctl, perf_event_open, bpf, the TUN ioctls, setns/mount); each block
// there carries its SAFETY comment.
#![deny(unsafe_code)]

#[allow(unsafe_code)]
pub mod bpf;
pub mod btf;
pub mod error;
#[allow(unsafe_code)]
pub mod ethtool;
pub mod netlink;
#[allow(unsafe_code)]
pub mod netns;
pub mod node;
#[allow(unsafe_code)]
pub mod packet;
#[allow(unsafe_code)]
pub mod perf;
pub mod qstats;
pub mod rtnl;
pub mod sysfs;
#[allow(unsafe_code)]
pub mod tun;

pub use error::{Error, Result};
pub use netns::NetNs;

/// Whether the process runs with effective uid 0 (what every module here
/// needs; tests that need it are `#[ignore]`d for other users).
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}
