//! Many flows under an open-file limit that cannot be raised: client and
//! server hold their flows in one descriptor table per worker
//! (`unshare(CLONE_FILES)`), and the server's workers admit the flows from
//! one shared count (decision 0256). CI's own limit is high enough for one
//! table, so without this test that path would run only on hosts with a
//! low hard limit.
//!
//! This file is its own test binary because it lowers the process's
//! RLIMIT_NOFILE for good.

mod common;

use common::{assert_sane, short};
use offload_bench::{client, Server, TestKind};

/// The hard limit this test runs under, and the flows it opens: more than
/// one table holds, half of them (plus the margin) fits in each.
const LIMIT: u64 = 1200;
const FLOWS: u32 = 1600;

/// Drops CAP_SYS_RESOURCE (which lets root raise a hard limit) from this
/// process's effective and permitted sets, then lowers RLIMIT_NOFILE to
/// [`LIMIT`], so the limit cannot be raised back whoever runs the test.
fn pin_a_low_open_file_limit() {
    const CAP_SYS_RESOURCE: u32 = 24;
    const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let mut header = Header {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut data = [Data::default(); 2];
    // SAFETY: capget writes the calling thread's sets into `data`, two
    // structs for version 3, and reads `header`; both outlive the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_capget,
            &mut header as *mut Header,
            data.as_mut_ptr(),
        )
    };
    assert_eq!(rc, 0, "capget: {}", std::io::Error::last_os_error());
    data[0].effective &= !(1 << CAP_SYS_RESOURCE);
    data[0].permitted &= !(1 << CAP_SYS_RESOURCE);
    // SAFETY: capset reads `header` and the two structs of `data`; only
    // dropping a capability, which needs no privilege.
    let rc = unsafe { libc::syscall(libc::SYS_capset, &header as *const Header, data.as_ptr()) };
    assert_eq!(rc, 0, "capset: {}", std::io::Error::last_os_error());
    let low = libc::rlimit {
        rlim_cur: LIMIT,
        rlim_max: LIMIT,
    };
    // SAFETY: setrlimit reads the struct it is given.
    let rc = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &low) };
    assert_eq!(rc, 0, "setrlimit: {}", std::io::Error::last_os_error());
    assert!(
        offload_bench::sys::raise_fd_limit(u64::from(FLOWS) * 2).unwrap_or(LIMIT) <= LIMIT,
        "the open-file limit could still be raised"
    );
}

#[test]
fn flows_past_the_open_file_limit_run_in_one_table_per_worker() {
    pin_a_low_open_file_limit();
    let s = Server::bind("127.0.0.1:0".parse().unwrap())
        .unwrap()
        .echo_log(false)
        .spawn()
        .unwrap();
    // Several runs: a flow lost between the server's workers (a fixed
    // share closing a flow still sending its token) leaves a run with no
    // transaction or an error.
    for run in 1..=3 {
        let mut c = short(TestKind::TcpRr, s.addr());
        c.spec.flows = FLOWS;
        c.threads = 2;
        c.spec.server_threads = 2;
        let r = client::run_once(&c, &mut |_| {})
            .unwrap_or_else(|e| panic!("run {run} of {FLOWS} flows: {e}"));
        assert_sane(&r);
        assert!(
            r.settings
                .notes
                .iter()
                .any(|n| n.contains("descriptor table of its own")),
            "run {run}: the client did not split its flows: {:?}",
            r.settings.notes
        );
        assert!(
            r.settings.server_settings.per_thread_fd_tables,
            "run {run}: the server did not split its flows"
        );
        assert_eq!(r.server.flows_accepted, u64::from(FLOWS), "run {run}");
        let t = r.tcp_info.as_ref().expect("client TCP_INFO");
        assert_eq!(t.flows, FLOWS as usize, "run {run}");
        assert!(
            r.counts.client_window > 0,
            "run {run}: no transaction in the window"
        );
    }
}
