//! Per-namespace sysfs and sysctl access without touching any mount table.
//!
//! `/sys/class/net` shows the devices of the namespace that *mounted* that
//! sysfs, so the host's `/sys` cannot see a device inside a private network
//! namespace. Instead of a private mount namespace with a second sysfs on
//! `/sys`, [`Sysfs::mount_here`] uses the new mount API (`fsopen("sysfs")`,
//! `fsconfig(CMD_CREATE)`, `fsmount`) to make a *detached* sysfs mount, tagged
//! with the calling thread's network namespace and reachable only through the
//! returned fd. It is attached nowhere, so nothing shows in any
//! `/proc/*/mountinfo`, and it disappears when the fd closes
//! (docs/decisions/0021-oracle-isolation.md).
//!
//! `/proc/sys/net` is resolved against the network namespace of the thread
//! doing the lookup, so [`write_sysctl`] must run inside the namespace
//! (through [`crate::NetNs::run`]).

use std::io::{Read, Write};
use std::os::fd::OwnedFd;

use rustix::fs::{Mode, OFlags};
use rustix::mount::{FsMountFlags, FsOpenFlags, MountAttrFlags};

use crate::error::{Error, Result};

/// A detached sysfs mount of one network namespace.
#[derive(Debug)]
pub struct Sysfs {
    root: OwnedFd,
}

impl Sysfs {
    /// Mounts sysfs for the calling thread's network namespace, detached.
    pub fn mount_here() -> Result<Self> {
        let fs = rustix::mount::fsopen("sysfs", FsOpenFlags::FSOPEN_CLOEXEC)
            .map_err(|e| Error::sys("fsopen(sysfs)", e.into()))?;
        rustix::mount::fsconfig_create(&fs)
            .map_err(|e| Error::sys("fsconfig(sysfs, CMD_CREATE)", e.into()))?;
        let root = rustix::mount::fsmount(
            &fs,
            FsMountFlags::FSMOUNT_CLOEXEC,
            MountAttrFlags::MOUNT_ATTR_NOSUID
                | MountAttrFlags::MOUNT_ATTR_NODEV
                | MountAttrFlags::MOUNT_ATTR_NOEXEC,
        )
        .map_err(|e| Error::sys("fsmount(sysfs)", e.into()))?;
        Ok(Sysfs { root })
    }

    /// Reads a sysfs file, e.g. `class/net/ofl0/gro_flush_timeout`, trimmed.
    pub fn read(&self, rel: &str) -> Result<String> {
        let fd = rustix::fs::openat(
            &self.root,
            rel,
            OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| Error::sys(format!("open sysfs {rel}"), e.into()))?;
        let mut s = String::new();
        std::fs::File::from(fd)
            .read_to_string(&mut s)
            .map_err(|e| Error::sys(format!("read sysfs {rel}"), e))?;
        Ok(s.trim().to_string())
    }

    /// Whether `rel` exists (a file, directory or symlink).
    pub fn exists(&self, rel: &str) -> bool {
        rustix::fs::statat(&self.root, rel, rustix::fs::AtFlags::SYMLINK_NOFOLLOW).is_ok()
    }

    /// Names in directory `rel`, unsorted, without `.` and `..`.
    pub fn list(&self, rel: &str) -> Result<Vec<String>> {
        let fd = rustix::fs::openat(
            &self.root,
            rel,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| Error::sys(format!("open sysfs dir {rel}"), e.into()))?;
        let dir = rustix::fs::Dir::read_from(&fd)
            .map_err(|e| Error::sys(format!("read sysfs dir {rel}"), e.into()))?;
        let mut out = Vec::new();
        for entry in dir {
            let entry = entry.map_err(|e| Error::sys(format!("read sysfs dir {rel}"), e.into()))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name != "." && name != ".." {
                out.push(name);
            }
        }
        Ok(out)
    }

    /// The target of symlink `rel`, if it is one.
    pub fn read_link(&self, rel: &str) -> Option<String> {
        rustix::fs::readlinkat(&self.root, rel, Vec::new())
            .ok()
            .map(|t| t.to_string_lossy().into_owned())
    }

    /// Writes `value` to a sysfs file.
    pub fn write(&self, rel: &str, value: &str) -> Result<()> {
        let fd = rustix::fs::openat(
            &self.root,
            rel,
            OFlags::WRONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| Error::sys(format!("open sysfs {rel}"), e.into()))?;
        std::fs::File::from(fd)
            .write_all(value.as_bytes())
            .map_err(|e| Error::sys(format!("write {value:?} to sysfs {rel}"), e))
    }

    /// Reads `/sys/class/net/<dev>/<attr>`.
    pub fn net_attr(&self, dev: &str, attr: &str) -> Result<String> {
        crate::rtnl::check_ifname(dev)?;
        self.read(&format!("class/net/{dev}/{attr}"))
    }

    /// Writes `/sys/class/net/<dev>/<attr>` and reads it back.
    pub fn set_net_attr(&self, dev: &str, attr: &str, value: u64) -> Result<()> {
        crate::rtnl::check_ifname(dev)?;
        let rel = format!("class/net/{dev}/{attr}");
        self.write(&rel, &value.to_string())?;
        let back = self.read(&rel)?;
        if back != value.to_string() {
            return Err(Error::KnobMismatch {
                knob: format!("/sys/{rel}"),
                wanted: value,
                actual: back.parse().unwrap_or(u64::MAX),
            });
        }
        Ok(())
    }
}

/// Writes a sysctl of the calling thread's network namespace, e.g.
/// `write_sysctl("net/ipv6/conf/ofl0/accept_dad", "0")`. Must run inside the
/// namespace (see the module doc).
pub fn write_sysctl(key: &str, value: &str) -> Result<()> {
    if key.contains("..") || key.starts_with('/') {
        return Err(Error::sys(
            format!("sysctl {key}"),
            std::io::Error::from(std::io::ErrorKind::InvalidInput),
        ));
    }
    let path = format!("/proc/sys/{key}");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .and_then(|mut f| f.write_all(value.as_bytes()))
        .map_err(|e| Error::sys(format!("write {value:?} to {path}"), e))
}

/// Reads a sysctl of the calling thread's network namespace, trimmed.
pub fn read_sysctl(key: &str) -> Result<String> {
    let path = format!("/proc/sys/{key}");
    std::fs::read_to_string(&path)
        .map(|s| s.trim().to_string())
        .map_err(|e| Error::sys(format!("read {path}"), e))
}
