//! Throw-away pairs of network namespaces joined by a veth link, for the
//! tests and for measurements between namespaces.
//!
//! The topology is offload-sys's ([`offload_sys::node::VethPair`], the one
//! `offload lab` uses): two *anonymous* namespaces held
//! only by file descriptors, so no `ip` process runs, nothing shows in
//! `ip netns list`, and the kernel removes the namespaces (with the veth
//! pair and every per-namespace sysctl) when the pair and every socket made
//! inside are gone: on drop, during a panic's unwinding, or on SIGKILL.
//! Addresses are 10.201.0.0/24 and fd00:201::/64 and exist only inside the
//! two namespaces, so no traffic can leave them.

use std::os::fd::{AsFd, OwnedFd};

use offload_sys::node::VethPair;
use offload_sys::NetNs;

use crate::error::BenchError;

/// Which end of the pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// Namespace A (10.201.0.1, fd00:201::1).
    A,
    /// Namespace B (10.201.0.2, fd00:201::2).
    B,
}

/// Two namespaces joined by veth; removed by the kernel once dropped.
#[derive(Debug)]
pub struct NetnsPair {
    pair: VethPair,
}

impl NetnsPair {
    /// IPv4 address of a side.
    pub fn addr4(side: Side) -> std::net::IpAddr {
        match side {
            Side::A => VethPair::CLIENT4.into(),
            Side::B => VethPair::SERVER4.into(),
        }
    }

    /// IPv6 address of a side.
    pub fn addr6(side: Side) -> std::net::IpAddr {
        match side {
            Side::A => VethPair::CLIENT6.into(),
            Side::B => VethPair::SERVER6.into(),
        }
    }

    /// Creates the pair; `tag` is kept for callers that tell pairs apart
    /// (anonymous namespaces never clash). Needs root: without it this fails
    /// loudly, it never skips.
    pub fn create(tag: &str) -> Result<Self, BenchError> {
        let _ = tag;
        if !offload_sys::is_root() {
            return Err(BenchError::Config(
                "network namespaces need root; run the tests as root".into(),
            ));
        }
        let pair = VethPair::new("b")
            .map_err(|e| BenchError::Config(format!("building the namespace pair: {e}")))?;
        Ok(NetnsPair { pair })
    }

    fn ns(&self, side: Side) -> &NetNs {
        match side {
            Side::A => &self.pair.client.ns,
            Side::B => &self.pair.server.ns,
        }
    }

    /// A descriptor of a side's namespace (for example to give it an nsid
    /// and watch it disappear).
    pub fn ns_fd(&self, side: Side) -> Result<OwnedFd, BenchError> {
        self.ns(side)
            .as_fd()
            .try_clone_to_owned()
            .map_err(|e| BenchError::io("duplicating a namespace descriptor", e))
    }

    /// The name of a side's veth end.
    pub fn dev(&self, side: Side) -> &str {
        match side {
            Side::A => &self.pair.client_dev,
            Side::B => &self.pair.server_dev,
        }
    }

    /// The inode of a side's namespace (`net:[INODE]`).
    pub fn inode(&self, side: Side) -> u64 {
        self.ns(side).inode()
    }

    /// Runs `f` on a new thread inside a side's namespace (threads it
    /// spawns stay there) and returns its result.
    pub fn run_in<T: Send + 'static>(
        &self,
        side: Side,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, BenchError> {
        self.spawn_in(side, f)?
            .join()
            .map_err(|_| BenchError::Config("a thread inside the namespace panicked".into()))
    }

    /// Spawns `f` on a thread inside a side's namespace.
    pub fn spawn_in<T: Send + 'static>(
        &self,
        side: Side,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<std::thread::JoinHandle<T>, BenchError> {
        self.ns(side)
            .spawn_entered("ofl-bench-ns", f)
            .map_err(|e| BenchError::Config(format!("entering namespace {side:?}: {e}")))
    }

    /// Writes a sysctl inside a side's namespace (gone with the namespace).
    pub fn sysctl(&self, side: Side, key: &str, value: &str) -> Result<(), BenchError> {
        let path = format!("/proc/sys/{}", key.replace('.', "/"));
        let value = value.to_string();
        self.run_in(side, move || {
            std::fs::write(&path, value).map_err(|source| BenchError::File { file: path, source })
        })?
    }
}
