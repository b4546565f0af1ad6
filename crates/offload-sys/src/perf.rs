//! Counting kernel tracepoints with `perf_event_open(PERF_TYPE_TRACEPOINT)`:
//! one counter per online CPU, each with an ftrace filter (`name == "eth0"`,
//! `len > 65535`) so the kernel counts only the events whose fields match;
//! no sampling, no kprobe, no BPF toolchain.
//!
//! A tracepoint's id lives in tracefs (`events/SUBSYSTEM/NAME/id`). When
//! tracefs is not mounted, [`tracepoint_ids`] mounts a *detached* tracefs
//! (`fsopen("tracefs")`, `fsmount`) that appears in no mount table and goes
//! away with its fd; only if that fails does it mount tracefs on
//! `/sys/kernel/tracing` and unmount it as soon as the ids are read.

use std::ffi::CString;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::error::{Error, Result};

/// The ids of tracepoints `SUBSYSTEM:EVENT` for each of `events`, in order.
pub fn tracepoint_ids(subsystem: &str, events: &[&str]) -> Result<Vec<u64>> {
    let rel = |event: &str| format!("events/{subsystem}/{event}/id");
    for base in ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"] {
        let texts: Vec<_> = events
            .iter()
            .map(|e| std::fs::read_to_string(format!("{base}/{}", rel(e))))
            .collect();
        if texts.iter().all(|t| t.is_ok()) {
            return texts
                .into_iter()
                .zip(events)
                .map(|(t, e)| parse_id(&t.unwrap_or_default(), subsystem, e))
                .collect();
        }
    }
    match read_detached(subsystem, events) {
        Ok(ids) => Ok(ids),
        Err(detached) => read_mounted(subsystem, events).map_err(|e| {
            Error::sys(
                format!("tracefs: detached mount failed ({detached}), and"),
                std::io::Error::other(e.to_string()),
            )
        }),
    }
}

fn parse_id(text: &str, subsystem: &str, event: &str) -> Result<u64> {
    text.trim().parse::<u64>().map_err(|_| {
        Error::sys(
            format!("tracepoint id of {subsystem}:{event}: {text:?}"),
            std::io::Error::from(std::io::ErrorKind::InvalidData),
        )
    })
}

fn read_detached(subsystem: &str, events: &[&str]) -> Result<Vec<u64>> {
    use rustix::fs::{Mode, OFlags};
    use rustix::mount::{FsMountFlags, FsOpenFlags, MountAttrFlags};
    let fs = rustix::mount::fsopen("tracefs", FsOpenFlags::FSOPEN_CLOEXEC)
        .map_err(|e| Error::sys("fsopen(tracefs)", e.into()))?;
    rustix::mount::fsconfig_create(&fs)
        .map_err(|e| Error::sys("fsconfig(tracefs, CMD_CREATE)", e.into()))?;
    let root = rustix::mount::fsmount(
        &fs,
        FsMountFlags::FSMOUNT_CLOEXEC,
        MountAttrFlags::MOUNT_ATTR_NOSUID
            | MountAttrFlags::MOUNT_ATTR_NODEV
            | MountAttrFlags::MOUNT_ATTR_NOEXEC,
    )
    .map_err(|e| Error::sys("fsmount(tracefs)", e.into()))?;
    events
        .iter()
        .map(|event| {
            let rel = format!("events/{subsystem}/{event}/id");
            let fd =
                rustix::fs::openat(&root, &rel, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())
                    .map_err(|e| Error::sys(format!("open tracefs {rel}"), e.into()))?;
            let mut s = String::new();
            std::fs::File::from(fd)
                .read_to_string(&mut s)
                .map_err(|e| Error::sys(format!("read tracefs {rel}"), e))?;
            parse_id(&s, subsystem, event)
        })
        .collect()
}

fn read_mounted(subsystem: &str, events: &[&str]) -> Result<Vec<u64>> {
    let target = "/sys/kernel/tracing";
    rustix::mount::mount(
        "nodev",
        target,
        "tracefs",
        rustix::mount::MountFlags::empty(),
        None,
    )
    .map_err(|e| Error::sys(format!("mount tracefs on {target}"), e.into()))?;
    let ids = events
        .iter()
        .map(|event| {
            let text = std::fs::read_to_string(format!("{target}/events/{subsystem}/{event}/id"))
                .map_err(|e| Error::sys("read tracepoint id", e))?;
            parse_id(&text, subsystem, event)
        })
        .collect();
    // Unmount what we mounted, whatever happened.
    let _ = rustix::mount::unmount(target, rustix::mount::UnmountFlags::DETACH);
    ids
}

const PERF_TYPE_TRACEPOINT: u32 = 2;
const PERF_ATTR_SIZE: u32 = 136;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;
/// `_IOW('$', 6, char *)`.
const PERF_EVENT_IOC_SET_FILTER: libc::Ioctl = 0x4008_2406;
/// `_IO('$', 0)`.
const PERF_EVENT_IOC_ENABLE: libc::Ioctl = 0x2400;
/// `_IO('$', 3)`.
const PERF_EVENT_IOC_RESET: libc::Ioctl = 0x2403;
/// `perf_event_attr.disabled`: bit 0 of the flag word at byte 40.
const ATTR_FLAGS_WORD: usize = 5;
const ATTR_DISABLED: u64 = 1;

/// One counting perf event (a tracepoint on one CPU, filtered).
#[derive(Debug)]
struct Counter {
    fd: OwnedFd,
}

impl Counter {
    fn open(id: u64, cpu: i32, filter: &str) -> Result<Self> {
        // struct perf_event_attr (PERF_ATTR_SIZE_VER8 = 136 bytes): type at 0,
        // size at 4, config at 8, the flag bits at 40; everything else zero
        // means "count, no sampling". It opens *disabled*: a counter enabled
        // from the start counts every event of its CPU, from any device in
        // any namespace, until the filter below is attached
        // (perf_event_set_filter in kernel/events/core.c installs it on a
        // live event), which once put a super-packet above 131 KiB into
        // big-tcp's IPv4 65536 arm. It is enabled only once filtered.
        let mut attr = [0u64; (PERF_ATTR_SIZE / 8) as usize];
        attr[0] = u64::from(PERF_TYPE_TRACEPOINT) | (u64::from(PERF_ATTR_SIZE) << 32);
        attr[1] = id;
        attr[ATTR_FLAGS_WORD] = ATTR_DISABLED;
        // SAFETY: perf_event_open reads `size` bytes of attr from a live
        // array of exactly that size; the other arguments are integers.
        let raw = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                attr.as_ptr(),
                -1 as libc::pid_t,
                cpu as libc::c_int,
                -1 as libc::c_int,
                PERF_FLAG_FD_CLOEXEC,
            )
        };
        if raw < 0 {
            return Err(Error::last_os(format!(
                "perf_event_open(tracepoint {id}, cpu {cpu})"
            )));
        }
        // SAFETY: a fresh fd returned by the kernel, owned once.
        let fd = unsafe { OwnedFd::from_raw_fd(raw as i32) };
        let c = CString::new(filter).map_err(|_| {
            Error::sys(
                format!("filter {filter:?}"),
                std::io::Error::from(std::io::ErrorKind::InvalidInput),
            )
        })?;
        // SAFETY: the ioctl reads a NUL-terminated string that outlives it.
        let r = unsafe { libc::ioctl(fd.as_raw_fd(), PERF_EVENT_IOC_SET_FILTER, c.as_ptr()) };
        if r < 0 {
            return Err(Error::last_os(format!(
                "PERF_EVENT_IOC_SET_FILTER {filter:?}"
            )));
        }
        for (ioctl, name) in [
            (PERF_EVENT_IOC_RESET, "PERF_EVENT_IOC_RESET"),
            (PERF_EVENT_IOC_ENABLE, "PERF_EVENT_IOC_ENABLE"),
        ] {
            // SAFETY: an argument-less perf ioctl on an fd we own.
            let r = unsafe { libc::ioctl(fd.as_raw_fd(), ioctl, 0) };
            if r < 0 {
                return Err(Error::last_os(format!("{name} ({filter:?})")));
            }
        }
        Ok(Counter { fd })
    }

    fn read(&self) -> u64 {
        let mut v = [0u8; 8];
        // SAFETY: read(2) of at most 8 bytes into a live local array.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), v.as_mut_ptr().cast(), 8) };
        if n == 8 {
            u64::from_ne_bytes(v)
        } else {
            0
        }
    }
}

/// One tracepoint counted on every online CPU through one ftrace filter
/// (`name == "veth0" && len > 65535`): the kernel counts only the events
/// whose fields match, so a size histogram costs no sampling.
#[derive(Debug)]
pub struct TracepointCounter {
    counters: Vec<Counter>,
}

impl TracepointCounter {
    /// Opens tracepoint `id` with `filter` on every online CPU.
    pub fn open(id: u64, filter: &str) -> Result<Self> {
        let counters = online_cpus()
            .into_iter()
            .map(|cpu| Counter::open(id, cpu, filter))
            .collect::<Result<_>>()?;
        Ok(TracepointCounter { counters })
    }

    /// Events counted since it was opened, all CPUs.
    pub fn read(&self) -> u64 {
        self.counters.iter().map(Counter::read).sum()
    }
}

/// Online CPU numbers (`/sys/devices/system/cpu/online`, e.g. `0-1`).
pub fn online_cpus() -> Vec<i32> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
    let mut out = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<i32>(), b.parse::<i32>()) {
                    out.extend(a..=b);
                }
            }
            None => out.extend(part.parse::<i32>().ok()),
        }
    }
    if out.is_empty() {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        out.extend(0..n as i32);
    }
    out
}
