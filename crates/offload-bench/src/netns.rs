//! Throw-away pairs of network namespaces joined by a veth link, for the
//! tests and for measurements between namespaces.
//!
//! Names carry the prefix `ofl-bench-<pid>-`, addresses are 10.201.0.0/24
//! and fd00:6f66:6c::/64 and exist only inside the two namespaces, so no
//! traffic can leave them. The namespaces (and with them the veth pair and
//! every per-namespace sysctl) are deleted when the guard drops, including
//! during a panic's unwinding; namespaces left by a process that was killed
//! outright are deleted by the next [`NetnsPair::create`].

use std::path::PathBuf;
use std::process::Command;

use crate::error::BenchError;
use crate::sys;

/// Which end of the pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// Namespace A (10.201.0.1, fd00:6f66:6c::1).
    A,
    /// Namespace B (10.201.0.2, fd00:6f66:6c::2).
    B,
}

/// Two namespaces joined by veth; deleted on drop.
#[derive(Debug)]
pub struct NetnsPair {
    /// Name of namespace A.
    pub a: String,
    /// Name of namespace B.
    pub b: String,
}

const PREFIX: &str = "ofl-bench-";

fn ip(args: &[&str]) -> Result<(), BenchError> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| BenchError::io("running ip (install iproute2)", e))?;
    if !out.status.success() {
        return Err(BenchError::Config(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

impl NetnsPair {
    /// IPv4 address of a side.
    pub fn addr4(side: Side) -> std::net::IpAddr {
        match side {
            Side::A => [10, 201, 0, 1].into(),
            Side::B => [10, 201, 0, 2].into(),
        }
    }

    /// IPv6 address of a side.
    pub fn addr6(side: Side) -> std::net::IpAddr {
        let last = if side == Side::A { 1 } else { 2 };
        std::net::Ipv6Addr::new(0xfd00, 0x6f66, 0x6c, 0, 0, 0, 0, last).into()
    }

    /// Creates the pair; `tag` tells concurrent pairs of one process apart.
    /// Needs root: without it this fails loudly, it never skips.
    pub fn create(tag: &str) -> Result<Self, BenchError> {
        if !sys::is_root() {
            return Err(BenchError::Config(
                "network namespaces need root; run the tests as root".into(),
            ));
        }
        cleanup_stale();
        let pid = std::process::id();
        let pair = NetnsPair {
            a: format!("{PREFIX}{pid}-{tag}-a"),
            b: format!("{PREFIX}{pid}-{tag}-b"),
        };
        // From here on, Drop removes whatever was made.
        ip(&["netns", "add", &pair.a])?;
        ip(&["netns", "add", &pair.b])?;
        let (a, b) = (pair.a.as_str(), pair.b.as_str());
        ip(&[
            "-n", a, "link", "add", "ofl-va", "type", "veth", "peer", "name", "ofl-vb", "netns", b,
        ])?;
        for (ns, dev, side) in [(a, "ofl-va", Side::A), (b, "ofl-vb", Side::B)] {
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
            let v4 = format!("{}/24", Self::addr4(side));
            let v6 = format!("{}/64", Self::addr6(side));
            ip(&["-n", ns, "addr", "add", &v4, "dev", dev])?;
            ip(&["-n", ns, "addr", "add", &v6, "dev", dev, "nodad"])?;
            ip(&["-n", ns, "link", "set", dev, "up"])?;
        }
        Ok(pair)
    }

    /// Name of a side's namespace.
    pub fn name(&self, side: Side) -> &str {
        match side {
            Side::A => &self.a,
            Side::B => &self.b,
        }
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
        let path = PathBuf::from("/var/run/netns").join(self.name(side));
        let (tx, rx) = std::sync::mpsc::channel();
        let h = std::thread::Builder::new()
            .name("ofl-bench-ns".into())
            .spawn(move || {
                let entered = sys::enter_netns(&path);
                let ok = entered.is_ok();
                let _ = tx.send(entered);
                if !ok {
                    // The caller gets the error; f must not run outside.
                    std::process::abort();
                }
                f()
            })
            .map_err(|e| BenchError::io("spawning a namespace thread", e))?;
        match rx.recv() {
            Ok(Ok(())) => Ok(h),
            Ok(Err(e)) => Err(BenchError::io(
                format!("entering namespace {}", self.name(side)),
                e,
            )),
            Err(_) => Err(BenchError::Config("the namespace thread died".into())),
        }
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

impl Drop for NetnsPair {
    fn drop(&mut self) {
        // Deleting a namespace deletes its veth end, which deletes the peer.
        let _ = ip(&["netns", "del", &self.a]);
        let _ = ip(&["netns", "del", &self.b]);
    }
}

/// Deletes `ofl-bench-<pid>-*` namespaces whose process no longer exists.
pub fn cleanup_stale() {
    let Ok(dir) = std::fs::read_dir("/var/run/netns") else {
        return;
    };
    for entry in dir.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(PREFIX) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = ip(&["netns", "del", &name]);
        }
    }
}
