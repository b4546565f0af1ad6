//! offload-lab: Linux plumbing for offload experiments, and the live-kernel
//! GRO oracle.
//!
//! The crate builds throw-away network setups that cannot leak: everything
//! lives in an *anonymous* network namespace ([`NetNs`]) held only by file
//! descriptors, so the kernel tears it down, devices included, when the
//! process lets go of it — on return, on panic, or on `SIGKILL`.
//!
//! Building blocks, each usable on its own:
//! - [`netns`]: anonymous namespaces and running code inside them;
//! - [`tun`]: TUN/TAP devices and their ioctls (`TUNSETIFF`,
//!   `TUNSETOFFLOAD`, `TUNSETVNETHDRSZ`), reusable by userspace datapaths;
//! - [`rtnl`]: synchronous rtnetlink (links, addresses, neighbours, GRO size
//!   knobs, veth and VXLAN creation);
//! - [`ethtool`]: ethtool features through `SIOCETHTOOL`;
//! - [`sysfs`]: a namespace's sysfs (detached mount) and sysctls;
//! - [`capture`]: an `AF_PACKET` socket that sees packets after GRO.
//!
//! On top of them, [`oracle::KernelGro`] turns the running kernel into a
//! function from packet trains to GRO output, for the engine's conformance
//! suite (see `docs/lab.md`).
//!
//! Everything here needs `CAP_NET_ADMIN` and `CAP_SYS_ADMIN` (root) and
//! `/dev/net/tun`; failures say which step and which object failed.

#![warn(missing_docs)]
// Unsafe code only in the modules that make raw syscalls (AF_PACKET,
// the ethtool ioctl, perf_event_open, setns/mount); each block there
// carries its SAFETY comment.
#![deny(unsafe_code)]

#[allow(unsafe_code)]
pub mod capture;
pub mod error;
#[allow(unsafe_code)]
pub mod ethtool;
pub mod inspect;
#[allow(unsafe_code)]
pub mod live;
#[allow(unsafe_code)]
pub mod netns;
pub mod oracle;
pub mod qstats;
pub mod relay;
pub mod rtnl;
pub mod sample;
pub mod sysfs;
pub mod topo;
pub mod tun;

pub use error::{Error, Result};
pub use netns::NetNs;
pub use oracle::{GroKnobs, KernelGro, TrainOutcome, VxlanConf};
