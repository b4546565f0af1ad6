//! Anonymous network namespaces that cannot outlive their owner.
//!
//! [`NetNs::new_anonymous`] creates a namespace from a short-lived thread
//! (`unshare(CLONE_NEWNET)` affects only the calling thread) and keeps a file
//! descriptor on it (`/proc/thread-self/ns/net`). The namespace is never
//! bind-mounted or named, so it does not appear in `ip netns list`, and the
//! kernel destroys it, with every device in it, as soon as the last
//! reference goes: that descriptor, plus any socket or TAP fd created inside.
//! All of those are plain fds, closed by `Drop` on unwind and by the kernel
//! on `SIGKILL`; nothing can leak past the process.
//!
//! Code that must *create* something in the namespace (sockets, TAP devices,
//! sysfs mounts, `/proc/sys` writes) runs through [`NetNs::run`], which
//! spawns a scoped helper thread, `setns()`s it into the namespace and runs the
//! closure there. Objects created that way keep their namespace and are then
//! used from any thread: the caller's threads never change namespace.

use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::MetadataExt;

use rustix::thread::{LinkNameSpaceType, UnshareFlags};

use crate::error::{Error, Result};

/// An anonymous network namespace, alive as long as this handle (and
/// anything created inside it) is.
#[derive(Debug)]
pub struct NetNs {
    fd: OwnedFd,
    inode: u64,
}

impl NetNs {
    /// Creates a fresh, empty network namespace (only `lo`, down).
    pub fn new_anonymous() -> Result<Self> {
        let handle = std::thread::Builder::new()
            .name("ofl-netns-new".into())
            .spawn(|| -> Result<NetNs> {
                // SAFETY: CLONE_NEWNET only changes this helper thread's
                // network namespace. The hazard `unshare_unsafe` warns about
                // is CLONE_FILES (fd tables diverging between threads), which
                // is not requested.
                unsafe { rustix::thread::unshare_unsafe(UnshareFlags::NEWNET) }
                    .map_err(|e| Error::sys("unshare(CLONE_NEWNET)", e.into()))?;
                Self::current_thread()
            })
            .map_err(|e| Error::sys("spawn namespace thread", e))?;
        join(handle.join())?
    }

    /// Returns a handle on the calling thread's current network namespace.
    pub fn current_thread() -> Result<Self> {
        let file = File::open("/proc/thread-self/ns/net")
            .map_err(|e| Error::sys("open /proc/thread-self/ns/net", e))?;
        let inode = file
            .metadata()
            .map_err(|e| Error::sys("fstat netns fd", e))?
            .ino();
        Ok(NetNs {
            fd: file.into(),
            inode,
        })
    }

    /// The namespace's inode number, as shown by `ls -l /proc/*/ns/net`
    /// (`net:[INODE]`) and `lsns`.
    pub fn inode(&self) -> u64 {
        self.inode
    }

    /// Runs `f` on a helper thread that has joined this namespace, and returns
    /// its result. Use it to create fds that must belong to the namespace.
    /// A panic in `f` is reported as [`Error::ThreadPanicked`].
    pub fn run<F, R>(&self, f: F) -> Result<R>
    where
        F: FnOnce() -> Result<R> + Send,
        R: Send,
    {
        let fd = self.fd.as_fd();
        std::thread::scope(|s| {
            let handle = std::thread::Builder::new()
                .name("ofl-netns-run".into())
                .spawn_scoped(s, move || -> Result<R> {
                    rustix::thread::move_into_link_name_space(fd, Some(LinkNameSpaceType::Network))
                        .map_err(|e| Error::sys("setns(CLONE_NEWNET)", e.into()))?;
                    f()
                })
                .map_err(|e| Error::sys("spawn namespace thread", e))?;
            join(handle.join())?
        })
    }
}

impl NetNs {
    /// Spawns a long-lived thread inside this namespace; threads it spawns
    /// in turn inherit the namespace (a new thread copies its creator's).
    pub fn spawn<F, R>(&self, name: &str, f: F) -> Result<std::thread::JoinHandle<Result<R>>>
    where
        F: FnOnce() -> Result<R> + Send + 'static,
        R: Send + 'static,
    {
        let fd = self
            .fd
            .try_clone()
            .map_err(|e| Error::sys("dup netns fd", e))?;
        std::thread::Builder::new()
            .name(name.into())
            .spawn(move || -> Result<R> {
                rustix::thread::move_into_link_name_space(
                    fd.as_fd(),
                    Some(LinkNameSpaceType::Network),
                )
                .map_err(|e| Error::sys("setns(CLONE_NEWNET)", e.into()))?;
                drop(fd);
                f()
            })
            .map_err(|e| Error::sys("spawn namespace thread", e))
    }
}

impl NetNs {
    /// Spawns a thread inside this namespace and returns once it is there:
    /// a failed `setns` is this call's error, and `f` then never runs (the
    /// thread ends without running it, silently). Threads `f` spawns stay in
    /// the namespace.
    pub fn spawn_entered<F, R>(&self, name: &str, f: F) -> Result<std::thread::JoinHandle<R>>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        let fd = self
            .fd
            .try_clone()
            .map_err(|e| Error::sys("dup netns fd", e))?;
        let (tx, rx) = std::sync::mpsc::channel();
        let handle = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || -> R {
                let entered = rustix::thread::move_into_link_name_space(
                    fd.as_fd(),
                    Some(LinkNameSpaceType::Network),
                );
                drop(fd);
                let failed = entered.is_err();
                let _ = tx.send(entered);
                if failed {
                    // The spawner reports the error; unwinding without the
                    // panic hook ends the thread quietly, before `f`.
                    std::panic::resume_unwind(Box::new(()));
                }
                f()
            })
            .map_err(|e| Error::sys("spawn namespace thread", e))?;
        match rx.recv() {
            Ok(Ok(())) => Ok(handle),
            Ok(Err(e)) => Err(Error::sys(
                format!("setns(CLONE_NEWNET) into net:[{}]", self.inode()),
                e.into(),
            )),
            Err(_) => Err(Error::ThreadPanicked(
                "the namespace thread died before entering".into(),
            )),
        }
    }
}

impl AsFd for NetNs {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

fn join<R>(r: std::thread::Result<R>) -> Result<R> {
    r.map_err(|payload| {
        let msg = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "non-string panic payload".into());
        Error::ThreadPanicked(msg)
    })
}
