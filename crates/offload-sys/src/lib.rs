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
//! - [`sockdiag`]: every TCP socket's drop count (`sock_diag`, as `ss -tm`);
//! - [`bpf`], [`btf`]: hand-assembled raw-tracepoint programs and their
//!   maps, with structure offsets from the running kernel's BTF;
//! - [`tun`]: the TUN/TAP ioctls and fd I/O, on which offload-tun's
//!   `TunDevice` (the project's one TUN device type) is built.
//!
//! The `control-plane` feature (on by default) holds everything but
//! [`tun`]; with `default-features = false` the crate is the TUN ioctls on
//! `libc` alone, so a TUN user does not build the netlink crates.
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

#[cfg(feature = "control-plane")]
#[allow(unsafe_code)]
pub mod bpf;
#[cfg(feature = "control-plane")]
pub mod btf;
#[cfg(feature = "control-plane")]
pub mod error;
#[cfg(feature = "control-plane")]
#[allow(unsafe_code)]
pub mod ethtool;
#[cfg(feature = "control-plane")]
pub mod netlink;
#[cfg(feature = "control-plane")]
#[allow(unsafe_code)]
pub mod netns;
#[cfg(feature = "control-plane")]
pub mod node;
#[cfg(feature = "control-plane")]
#[allow(unsafe_code)]
pub mod packet;
#[cfg(feature = "control-plane")]
#[allow(unsafe_code)]
pub mod perf;
#[cfg(feature = "control-plane")]
pub mod qstats;
#[cfg(feature = "control-plane")]
pub mod rtnl;
#[cfg(feature = "control-plane")]
pub mod sockdiag;
#[cfg(feature = "control-plane")]
pub mod sysfs;
#[allow(unsafe_code)]
pub mod tun;

#[cfg(feature = "control-plane")]
pub use error::{Error, Result};
#[cfg(feature = "control-plane")]
pub use netns::NetNs;

/// Whether the process runs with effective uid 0 (what every module here
/// needs; tests that need it are `#[ignore]`d for other users).
#[cfg(feature = "control-plane")]
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}
