//! Thin wrappers over the Linux syscalls the benchmark needs and that neither
//! `std` nor `socket2` expose: integer socket options (busy polling, UDP GSO
//! and GRO), CPU affinity, thread ids, network-namespace switching, epoll and
//! the batched `recvmmsg`/`sendmmsg` calls.
//!
//! Every `unsafe` block of the crate lives here, so that the rest of the
//! crate can stay safe code; each block states why its pointers are valid.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// `SO_BUSY_POLL` (include/uapi/asm-generic/socket.h).
pub const SO_BUSY_POLL: libc::c_int = 46;
/// `SO_PREFER_BUSY_POLL` (Linux 5.11+).
pub const SO_PREFER_BUSY_POLL: libc::c_int = 69;
/// `SOL_UDP`.
pub const SOL_UDP: libc::c_int = 17;
/// `UDP_SEGMENT` (UDP GSO, Linux 4.18+).
pub const UDP_SEGMENT: libc::c_int = 103;
/// `UDP_GRO` (Linux 5.0+).
pub const UDP_GRO: libc::c_int = 104;

fn cvt(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn cvt_size(ret: libc::ssize_t) -> io::Result<usize> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret as usize)
    }
}

/// Sets an `int`-valued socket option.
pub fn setsockopt_int(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: the option value points at a live c_int and the length passed
    // is exactly its size; the kernel only reads that many bytes.
    let ret = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    cvt(ret).map(|_| ())
}

/// Reads an `int`-valued socket option.
pub fn getsockopt_int(fd: RawFd, level: libc::c_int, name: libc::c_int) -> io::Result<i32> {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: value and len are live locals; the kernel writes at most `len`
    // bytes into value and updates len.
    let ret = unsafe {
        libc::getsockopt(
            fd,
            level,
            name,
            (&mut value as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    cvt(ret).map(|_| value)
}

/// shutdown(SHUT_RDWR): wakes a thread blocked in recv on this socket.
pub fn shutdown(fd: RawFd) -> io::Result<()> {
    // SAFETY: shutdown takes no memory arguments; the caller keeps fd open.
    cvt(unsafe { libc::shutdown(fd, libc::SHUT_RDWR) }).map(|_| ())
}

/// Sets O_NONBLOCK on a descriptor.
pub fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl F_GETFL on a descriptor the caller owns; no memory arguments.
    let flags = cvt(unsafe { libc::fcntl(fd, libc::F_GETFL) })?;
    // SAFETY: as above, F_SETFL takes an int.
    cvt(unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) }).map(|_| ())
}

/// Sets SO_RCVTIMEO (which also bounds accept()).
pub fn set_rcvtimeo(fd: RawFd, timeout: std::time::Duration) -> io::Result<()> {
    let tv = libc::timeval {
        tv_sec: timeout.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_usec: libc::suseconds_t::from(timeout.subsec_micros() as i32),
    };
    // SAFETY: tv is a live timeval and the length passed is its size.
    let ret = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    cvt(ret).map(|_| ())
}

/// Pins the calling thread to `cpus`.
pub fn set_affinity(cpus: &[usize]) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain data; zeroed is its empty value.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus {
        if cpu >= libc::CPU_SETSIZE as usize {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("cpu {cpu} is beyond CPU_SETSIZE"),
            ));
        }
        // SAFETY: cpu is below CPU_SETSIZE, checked above.
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    // SAFETY: set is a live cpu_set_t and the size passed is its size; pid 0
    // means the calling thread.
    let ret = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    cvt(ret).map(|_| ())
}

/// The CPUs the calling thread may run on, as the kernel reports them.
pub fn get_affinity() -> io::Result<Vec<usize>> {
    // SAFETY: cpu_set_t is plain data; zeroed is its empty value.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: set is a live cpu_set_t and the size passed is its size.
    let ret =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    cvt(ret)?;
    Ok((0..libc::CPU_SETSIZE as usize)
        // SAFETY: i is below CPU_SETSIZE and set is initialised.
        .filter(|&i| unsafe { libc::CPU_ISSET(i, &set) })
        .collect())
}

/// The kernel thread id of the calling thread.
pub fn gettid() -> i32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::gettid() }
}

/// Ticks per second of the CPU times in /proc (USER_HZ).
pub fn clock_ticks() -> u64 {
    // SAFETY: sysconf has no memory arguments.
    let v = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if v > 0 {
        v as u64
    } else {
        100
    }
}

/// Raises the soft open-file limit as far as allowed (root: to `want`), since
/// 10 000 flows on both ends of one process need 20 000 descriptors.
pub fn raise_fd_limit(want: u64) -> io::Result<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: lim is a live rlimit the kernel fills.
    cvt(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) })?;
    if lim.rlim_cur >= want {
        return Ok(lim.rlim_cur);
    }
    let raised = libc::rlimit {
        rlim_cur: want,
        rlim_max: lim.rlim_max.max(want),
    };
    // SAFETY: raised is a live rlimit the kernel reads.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
        return Ok(want);
    }
    // Not allowed to raise the hard limit: take what the hard limit allows.
    let capped = libc::rlimit {
        rlim_cur: lim.rlim_max,
        rlim_max: lim.rlim_max,
    };
    // SAFETY: capped is a live rlimit the kernel reads.
    cvt(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &capped) })?;
    Ok(lim.rlim_max)
}

/// The soft and hard open-file limits (RLIMIT_NOFILE).
pub fn fd_limits() -> io::Result<(u64, u64)> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: lim is a live rlimit the kernel fills.
    cvt(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) })?;
    Ok((lim.rlim_cur, lim.rlim_max))
}

/// Descriptors a process needs besides its flows (control sockets, epoll
/// instances, listeners, /proc files).
pub const FD_MARGIN: u64 = 256;

/// Raises RLIMIT_NOFILE for `flows` descriptors and says how they will be
/// held: `Ok(false)` in one shared table, `Ok(true)` in one table per
/// worker (the limit could not be raised, but each worker's share fits),
/// or an error that names the limit and what would fit.
pub fn plan_descriptors(flows: u64, threads: u64, who: &str) -> Result<bool, String> {
    let need = flows + FD_MARGIN;
    let limit = raise_fd_limit(need)
        .or_else(|_| fd_limits().map(|l| l.0))
        .unwrap_or(1024);
    if limit >= need {
        return Ok(false);
    }
    let per_thread = flows.div_ceil(threads.max(1)) + FD_MARGIN;
    if per_thread <= limit {
        return Ok(true);
    }
    let fit = flows.div_ceil(limit.saturating_sub(FD_MARGIN).max(1));
    Err(format!(
        "{flows} flows need {need} open files in the {who}, but RLIMIT_NOFILE is {limit} and \
         cannot be raised (no CAP_SYS_RESOURCE, or fs.nr_open); split over {threads} \
         thread(s) they need {per_thread} each: use at least {fit} {who} threads, or raise \
         the hard limit (ulimit -Hn, LimitNOFILE=)"
    ))
}

/// Gives the calling thread a private copy of the process's descriptor
/// table (`unshare(CLONE_FILES)`).
///
/// RLIMIT_NOFILE bounds the descriptor *numbers* of one table, not the
/// process: where the limit cannot be raised (no CAP_SYS_RESOURCE), workers
/// with tables of their own hold that many flows each. Descriptors opened
/// afterwards exist only in this thread's table; those inherited stay open
/// in both until each table closes them.
pub fn unshare_fd_table() -> io::Result<()> {
    // SAFETY: unshare takes no pointers; CLONE_FILES only affects the
    // calling thread's descriptor table.
    cvt(unsafe { libc::unshare(libc::CLONE_FILES) }).map(|_| ())
}

/// The fields of `struct tcp_info` (include/uapi/linux/tcp.h) the reports
/// use, read with `getsockopt(TCP_INFO)`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpInfoRaw {
    /// Smoothed RTT, microseconds (`tcpi_rtt`).
    pub rtt_us: u32,
    /// RTT variance, microseconds (`tcpi_rttvar`).
    pub rttvar_us: u32,
    /// Congestion window, segments (`tcpi_snd_cwnd`).
    pub snd_cwnd: u32,
    /// Retransmitted segments over the connection (`tcpi_total_retrans`).
    pub total_retrans: u32,
    /// Minimum RTT seen, microseconds (`tcpi_min_rtt`, 4.10+).
    pub min_rtt_us: Option<u32>,
    /// Delivery rate, bytes per second (`tcpi_delivery_rate`, 4.9+).
    pub delivery_rate: Option<u64>,
    /// Bytes acknowledged by the peer (`tcpi_bytes_acked`, 4.1+).
    pub bytes_acked: Option<u64>,
    /// Bytes received (`tcpi_bytes_received`, 4.1+).
    pub bytes_received: Option<u64>,
}

/// Reads TCP_INFO of a TCP socket. Fields beyond what the running kernel
/// returns are None (the struct grew over time; offsets are the UAPI's).
pub fn tcp_info(fd: RawFd) -> io::Result<TcpInfoRaw> {
    let mut buf = [0u8; 256];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: buf is writable for len bytes and len is a live socklen_t.
    cvt(unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    })?;
    Ok(parse_tcp_info(&buf[..(len as usize).min(buf.len())]))
}

/// Decodes the bytes of a `struct tcp_info` (native endianness).
pub fn parse_tcp_info(b: &[u8]) -> TcpInfoRaw {
    let u32_at = |o: usize| {
        b.get(o..o + 4)
            .map(|s| u32::from_ne_bytes([s[0], s[1], s[2], s[3]]))
    };
    let u64_at = |o: usize| {
        b.get(o..o + 8).map(|s| {
            let mut a = [0u8; 8];
            a.copy_from_slice(s);
            u64::from_ne_bytes(a)
        })
    };
    TcpInfoRaw {
        rtt_us: u32_at(68).unwrap_or(0),
        rttvar_us: u32_at(72).unwrap_or(0),
        snd_cwnd: u32_at(80).unwrap_or(0),
        total_retrans: u32_at(100).unwrap_or(0),
        bytes_acked: u64_at(120),
        bytes_received: u64_at(128),
        min_rtt_us: u32_at(148),
        delivery_rate: u64_at(160),
    }
}

/// Accepts one connection from the listening socket `fd` (a descriptor of
/// the calling thread's table, owned elsewhere), non-blocking, close-on-exec.
pub fn accept_nonblocking(fd: RawFd) -> io::Result<std::net::TcpStream> {
    // SAFETY: null address pointers are allowed by accept4; the flags are
    // valid.
    let new = cvt(unsafe {
        libc::accept4(
            fd,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            libc::SOCK_CLOEXEC,
        )
    })?;
    // SAFETY: accept4 returned a fresh descriptor that nothing else owns.
    Ok(unsafe { std::net::TcpStream::from_raw_fd(new) })
}

/// An epoll instance (level- or edge-triggered as registered).
#[derive(Debug)]
pub struct Epoll {
    fd: OwnedFd,
}

/// Readiness flags re-exported for the engines.
pub const EPOLLIN: u32 = libc::EPOLLIN as u32;
/// Writable.
pub const EPOLLOUT: u32 = libc::EPOLLOUT as u32;
/// Edge-triggered.
pub const EPOLLET: u32 = libc::EPOLLET as u32;
/// Error or hang-up.
pub const EPOLLERR_HUP: u32 = (libc::EPOLLERR | libc::EPOLLHUP | libc::EPOLLRDHUP) as u32;

/// One ready event: the token registered and the flags.
pub type Event = libc::epoll_event;

impl Epoll {
    /// Creates an epoll instance (close-on-exec).
    pub fn new() -> io::Result<Self> {
        // SAFETY: epoll_create1 has no memory arguments.
        let fd = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        // SAFETY: fd was just returned by the kernel and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Self { fd })
    }

    /// Registers `fd` with `events` and the token `data`.
    pub fn add(&self, fd: RawFd, events: u32, data: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: data };
        // SAFETY: ev is a live epoll_event the kernel copies.
        cvt(unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) })
            .map(|_| ())
    }

    /// Removes `fd` (before it is handed elsewhere while still open).
    pub fn delete(&self, fd: RawFd) -> io::Result<()> {
        let mut ev = libc::epoll_event { events: 0, u64: 0 };
        // SAFETY: ev is a live epoll_event (ignored by EPOLL_CTL_DEL).
        cvt(unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), libc::EPOLL_CTL_DEL, fd, &mut ev) })
            .map(|_| ())
    }

    /// Waits up to `timeout_ms` and fills `events`; returns how many are ready.
    pub fn wait(&self, events: &mut [Event], timeout_ms: i32) -> io::Result<usize> {
        let max = events.len().min(i32::MAX as usize) as libc::c_int;
        // SAFETY: events is a live, writable slice of `max` epoll_event.
        let ret =
            unsafe { libc::epoll_wait(self.fd.as_raw_fd(), events.as_mut_ptr(), max, timeout_ms) };
        match cvt(ret) {
            Ok(n) => Ok(n as usize),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(0),
            Err(e) => Err(e),
        }
    }
}

/// An empty event buffer of `n` entries for [`Epoll::wait`].
pub fn event_buffer(n: usize) -> Vec<Event> {
    vec![libc::epoll_event { events: 0, u64: 0 }; n]
}

/// Token of a ready event.
pub fn event_token(ev: &Event) -> u64 {
    ev.u64
}

/// Flags of a ready event.
pub fn event_flags(ev: &Event) -> u32 {
    ev.events
}

/// Buffers for `recvmmsg`: `n` messages of `size` bytes each, with room for
/// the source address and a control message (UDP_GRO's segment size).
pub struct RecvBatch {
    bufs: Vec<Vec<u8>>,
    iovs: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
    addrs: Vec<libc::sockaddr_storage>,
    ctrl: Vec<[u64; 8]>,
}

impl std::fmt::Debug for RecvBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecvBatch")
            .field("messages", &self.bufs.len())
            .finish()
    }
}

// SAFETY: the raw pointers inside the headers only ever point into buffers
// owned by the same RecvBatch, and they are rebuilt before every call.
unsafe impl Send for RecvBatch {}

impl RecvBatch {
    /// `n` messages (at least one) of `size` bytes.
    pub fn new(n: usize, size: usize) -> Self {
        let n = n.max(1);
        Self {
            bufs: (0..n).map(|_| vec![0u8; size.max(1)]).collect(),
            // SAFETY: iovec, mmsghdr and sockaddr_storage are plain data for
            // which all-zero is a valid value.
            iovs: vec![unsafe { std::mem::zeroed() }; n],
            // SAFETY: as above.
            hdrs: vec![unsafe { std::mem::zeroed() }; n],
            // SAFETY: as above.
            addrs: vec![unsafe { std::mem::zeroed() }; n],
            ctrl: vec![[0u64; 8]; n],
        }
    }

    /// Receives up to the batch size (blocking for the first message only).
    pub fn recv(&mut self, fd: RawFd) -> io::Result<usize> {
        let n = self.bufs.len();
        for i in 0..n {
            self.iovs[i] = libc::iovec {
                iov_base: self.bufs[i].as_mut_ptr().cast(),
                iov_len: self.bufs[i].len(),
            };
            let hdr = &mut self.hdrs[i].msg_hdr;
            hdr.msg_name = (&mut self.addrs[i] as *mut libc::sockaddr_storage).cast();
            hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            hdr.msg_iov = &mut self.iovs[i];
            hdr.msg_iovlen = 1;
            hdr.msg_control = self.ctrl[i].as_mut_ptr().cast();
            hdr.msg_controllen = std::mem::size_of::<[u64; 8]>();
            hdr.msg_flags = 0;
            self.hdrs[i].msg_len = 0;
        }
        // SAFETY: every header points at buffers owned by self that stay
        // alive and unmoved for the call; lengths match the buffers.
        let ret = unsafe {
            libc::recvmmsg(
                fd,
                self.hdrs.as_mut_ptr(),
                n as libc::c_uint,
                libc::MSG_WAITFORONE,
                std::ptr::null_mut(),
            )
        };
        cvt(ret).map(|v| v as usize)
    }

    /// Bytes received in message `i` of the last call.
    pub fn len(&self, i: usize) -> usize {
        self.hdrs[i].msg_len as usize
    }

    /// Number of message slots.
    pub fn capacity(&self) -> usize {
        self.bufs.len()
    }

    /// Whether the batch has no slots (never: it has at least one).
    pub fn is_empty(&self) -> bool {
        self.bufs.is_empty()
    }

    /// The segment size the kernel reported through UDP_GRO for message `i`.
    pub fn gro_size(&self, i: usize) -> Option<usize> {
        let hdr = &self.hdrs[i].msg_hdr;
        if hdr.msg_controllen == 0 {
            return None;
        }
        // SAFETY: msg_control points at self.ctrl[i] and msg_controllen was
        // set by the kernel to the bytes it wrote there; the CMSG macros stay
        // inside that range.
        unsafe {
            let mut cmsg = libc::CMSG_FIRSTHDR(hdr);
            while !cmsg.is_null() {
                if (*cmsg).cmsg_level == SOL_UDP && (*cmsg).cmsg_type == UDP_GRO {
                    let v = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>());
                    return usize::try_from(v).ok().filter(|&s| s > 0);
                }
                cmsg = libc::CMSG_NXTHDR(hdr, cmsg);
            }
        }
        None
    }

    /// Source address and its length for message `i` (for replies).
    fn addr(&self, i: usize) -> (libc::sockaddr_storage, libc::socklen_t) {
        (self.addrs[i], self.hdrs[i].msg_hdr.msg_namelen)
    }

    /// The bytes of message `i` of the last call (as far as they fit).
    pub fn data(&self, i: usize) -> &[u8] {
        &self.bufs[i][..self.len(i).min(self.bufs[i].len())]
    }

    /// The source address of message `i` of the last call.
    pub fn source(&self, i: usize) -> Option<std::net::SocketAddr> {
        use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
        let (storage, len) = self.addr(i);
        let len = len as usize;
        match i32::from(storage.ss_family) {
            libc::AF_INET if len >= std::mem::size_of::<libc::sockaddr_in>() => {
                // SAFETY: the kernel wrote a sockaddr_in (family AF_INET, long
                // enough) into the storage, which is aligned for any address.
                let a = unsafe {
                    &*(&storage as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>()
                };
                Some(SocketAddr::V4(SocketAddrV4::new(
                    Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)),
                    u16::from_be(a.sin_port),
                )))
            }
            libc::AF_INET6 if len >= std::mem::size_of::<libc::sockaddr_in6>() => {
                // SAFETY: as above, a sockaddr_in6.
                let a = unsafe {
                    &*(&storage as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>()
                };
                Some(SocketAddr::V6(SocketAddrV6::new(
                    Ipv6Addr::from(a.sin6_addr.s6_addr),
                    u16::from_be(a.sin6_port),
                    a.sin6_flowinfo,
                    a.sin6_scope_id,
                )))
            }
            _ => None,
        }
    }
}

/// Sends replies of `payload` to the sources of the messages of `from`
/// numbered in `which` with one `sendmmsg` call; returns how many were sent.
pub fn send_replies(
    fd: RawFd,
    from: &RecvBatch,
    which: &[usize],
    payload: &[u8],
) -> io::Result<usize> {
    let which: Vec<usize> = which
        .iter()
        .copied()
        .filter(|&i| i < from.capacity())
        .collect();
    let count = which.len();
    let mut addrs: Vec<(libc::sockaddr_storage, libc::socklen_t)> =
        which.iter().map(|&i| from.addr(i)).collect();
    let mut iovs: Vec<libc::iovec> = (0..count)
        .map(|_| libc::iovec {
            iov_base: payload.as_ptr() as *mut libc::c_void,
            iov_len: payload.len(),
        })
        .collect();
    let mut hdrs: Vec<libc::mmsghdr> = (0..count)
        .map(|i| {
            // SAFETY: mmsghdr is plain data; all-zero is valid.
            let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
            h.msg_hdr.msg_name = (&mut addrs[i].0 as *mut libc::sockaddr_storage).cast();
            h.msg_hdr.msg_namelen = addrs[i].1;
            h.msg_hdr.msg_iov = &mut iovs[i];
            h.msg_hdr.msg_iovlen = 1;
            h
        })
        .collect();
    send_mmsg(fd, &mut hdrs)
}

fn send_mmsg(fd: RawFd, hdrs: &mut [libc::mmsghdr]) -> io::Result<usize> {
    let mut sent = 0;
    while sent < hdrs.len() {
        let rest = &mut hdrs[sent..];
        // SAFETY: every header points at iovecs, payloads and addresses that
        // the caller keeps alive for the call; lengths match.
        let ret = unsafe {
            libc::sendmmsg(
                fd,
                rest.as_mut_ptr(),
                rest.len() as libc::c_uint,
                libc::MSG_NOSIGNAL,
            )
        };
        match cvt(ret) {
            Ok(0) => break,
            Ok(n) => sent += n as usize,
            Err(e) if sent > 0 && e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) => return Err(e),
        }
    }
    Ok(sent)
}

/// Sends `count` copies of `payload` on a connected socket with sendmmsg.
pub fn send_copies(fd: RawFd, payload: &[u8], count: usize) -> io::Result<usize> {
    let mut iov = libc::iovec {
        iov_base: payload.as_ptr() as *mut libc::c_void,
        iov_len: payload.len(),
    };
    let iov_ptr: *mut libc::iovec = &mut iov;
    let mut hdrs: Vec<libc::mmsghdr> = (0..count.max(1))
        .map(|_| {
            // SAFETY: mmsghdr is plain data; all-zero is valid.
            let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
            h.msg_hdr.msg_iov = iov_ptr;
            h.msg_hdr.msg_iovlen = 1;
            h
        })
        .collect();
    send_mmsg(fd, &mut hdrs)
}

/// One `send` with MSG_NOSIGNAL (a vanished peer gives EPIPE, not SIGPIPE).
pub fn send(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: buf is a live slice of buf.len() readable bytes.
    cvt_size(unsafe { libc::send(fd, buf.as_ptr().cast(), buf.len(), libc::MSG_NOSIGNAL) })
}

/// One `recv`.
pub fn recv(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: buf is a live slice of buf.len() writable bytes.
    cvt_size(unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0) })
}

/// Reads what `fd` has without waiting: `WouldBlock` when nothing is there.
pub fn recv_nowait(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: buf is a live slice of buf.len() writable bytes.
    cvt_size(unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) })
}

/// Whether a read on `fd` would return at once (data, end or error),
/// without consuming anything.
pub fn readable_now(fd: RawFd) -> bool {
    let mut one = [0u8; 1];
    // SAFETY: one is a live, writable byte.
    let r = unsafe {
        libc::recv(
            fd,
            one.as_mut_ptr().cast(),
            1,
            libc::MSG_DONTWAIT | libc::MSG_PEEK,
        )
    };
    r >= 0 || io::Error::last_os_error().kind() != io::ErrorKind::WouldBlock
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn affinity_round_trips_for_an_allowed_cpu() {
        let allowed = get_affinity().unwrap();
        assert!(!allowed.is_empty());
        let handle = std::thread::spawn(move || {
            set_affinity(&allowed[..1]).unwrap();
            get_affinity().unwrap()
        });
        let got = handle.join().unwrap();
        assert_eq!(got.len(), 1);
    }

    #[test]
    fn cpu_beyond_setsize_is_an_error_not_a_panic() {
        let err = set_affinity(&[1 << 20]).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn int_socket_option_round_trips() {
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let fd = sock.as_raw_fd();
        setsockopt_int(fd, SOL_UDP, UDP_GRO, 1).unwrap();
        assert_eq!(getsockopt_int(fd, SOL_UDP, UDP_GRO).unwrap(), 1);
        setsockopt_int(fd, libc::SOL_SOCKET, SO_BUSY_POLL, 50).unwrap();
        assert_eq!(
            getsockopt_int(fd, libc::SOL_SOCKET, SO_BUSY_POLL).unwrap(),
            50
        );
    }

    #[test]
    fn recvmmsg_and_sendmmsg_move_a_batch() {
        let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        assert_eq!(send_copies(tx.as_raw_fd(), b"abcd", 5).unwrap(), 5);
        let mut batch = RecvBatch::new(8, 64);
        let mut got = 0;
        while got < 5 {
            let n = batch.recv(rx.as_raw_fd()).unwrap();
            for i in 0..n {
                assert_eq!(batch.len(i), 4);
            }
            got += n;
        }
        assert_eq!(got, 5);
        assert_eq!(batch.source(0), Some(tx.local_addr().unwrap()));
        assert_eq!(batch.data(0), b"abcd");
        // Replies go back to tx's address.
        assert_eq!(
            send_replies(rx.as_raw_fd(), &batch, &[0], b"xy").unwrap(),
            1
        );
        let mut buf = [0u8; 8];
        assert_eq!(tx.recv(&mut buf).unwrap(), 2);
    }
}
