//! Nothing the oracle creates survives its owner: not after a panic in the
//! thread using it, not after `SIGKILL` of the process holding it.
//!
//! Witness: before the owner dies, the test gives the oracle's anonymous
//! namespace a namespace id in the host namespace (`RTM_NEWNSID`). The kernel
//! removes that id only when the namespace itself is destroyed
//! (`cleanup_net`), so waiting for the id to vanish proves the namespace,
//! and every device in it, is gone. Needs root; fails without it.

mod common;

use std::io::{BufRead, BufReader};
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::require_root;
use offload_lab::{GroKnobs, KernelGro};
use offload_sys::rtnl::Rtnl;

const CHILD_ENV: &str = "OFL_NO_LEAK_CHILD";

/// Waits (bounded, not timed) for the kernel to drop namespace id `id`.
fn wait_nsid_gone(host: &mut Rtnl, id: i32) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let ids = host.nsids().expect("RTM_GETNSID dump");
        if !ids.contains(&id) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "namespace with nsid {id} still alive 20 s after its owner died: leaked"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The host shows none of the oracle's devices and no named namespace that
/// is the oracle's.
fn assert_host_clean(host: &mut Rtnl, ns_inode: u64) {
    for l in host.links().expect("host link dump") {
        assert!(
            l.name != offload_lab::oracle::TAP_NAME && l.name != offload_lab::oracle::VXLAN_NAME,
            "host namespace has device {}",
            l.name
        );
    }
    // Named namespaces are bind mounts under /run/netns (what `ip netns
    // list` reads): none may be the oracle's.
    if let Ok(dir) = std::fs::read_dir("/run/netns") {
        for e in dir.flatten() {
            if let Ok(meta) = std::fs::metadata(e.path()) {
                assert_ne!(
                    meta.ino(),
                    ns_inode,
                    "the oracle's namespace is named {}",
                    e.file_name().to_string_lossy()
                );
            }
        }
    }
    // This process holds no handle on the namespace any more.
    let needle = format!("net:[{ns_inode}]");
    for e in std::fs::read_dir("/proc/self/fd")
        .expect("read /proc/self/fd")
        .flatten()
    {
        if let Ok(target) = std::fs::read_link(e.path()) {
            assert_ne!(
                target.to_string_lossy(),
                needle,
                "fd {:?} still holds the namespace",
                e.file_name()
            );
        }
    }
}

fn small_train(o: &KernelGro) -> Vec<Vec<u8>> {
    let ip = common::V4::new(o.peer_ipv4(), o.tap_ipv4(), 1, true);
    let t = common::Tcp {
        sport: 1,
        dport: 2,
        seq: 1,
        ack: 1,
        flags: common::ACK,
    };
    vec![common::tcp4(o.tap_mac(), o.peer_mac(), ip, t, &[1, 2, 3])]
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn panic_inside_a_thread_using_the_oracle_leaks_nothing() {
    require_root();
    let mut host = Rtnl::open().expect("host rtnetlink");
    const ID: i32 = 0x0f1_0001;
    let (tx, rx) = std::sync::mpsc::channel();
    let worker = std::thread::spawn(move || {
        let mut o = KernelGro::new(GroKnobs {
            vxlan: Some(offload_lab::VxlanConf {
                vni: 42,
                port: 4789,
            }),
            udp_gro_ports: vec![9000],
            ..GroKnobs::default()
        })
        .expect("oracle setup");
        let out = o.run_train(&small_train(&o)).expect("train");
        assert_eq!(out.len(), 1);
        let mut host = Rtnl::open().expect("host rtnetlink in worker");
        host.assign_nsid(o.netns().as_fd(), Some(ID))
            .expect("assign nsid");
        tx.send(o.netns().inode()).expect("send inode");
        panic!("deliberate panic while the oracle is alive");
    });
    let inode = rx.recv().expect("worker reached the panic point");
    let joined = worker.join();
    assert!(joined.is_err(), "the worker must have panicked");
    wait_nsid_gone(&mut host, ID);
    assert_host_clean(&mut host, inode);
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn sigkilled_process_holding_the_oracle_leaks_nothing() {
    require_root();
    if std::env::var_os(CHILD_ENV).is_some() {
        // Child side: hold a working oracle until killed.
        let mut o = KernelGro::new(GroKnobs::default()).expect("oracle setup in child");
        o.run_train(&small_train(&o)).expect("train in child");
        println!("READY {}", o.netns().inode());
        std::thread::sleep(Duration::from_secs(120));
        panic!("child was not killed");
    }
    let mut host = Rtnl::open().expect("host rtnetlink");
    const ID: i32 = 0x0f1_0002;
    let exe = std::env::current_exe().expect("current_exe");
    let mut child = Command::new(exe)
        .args([
            "--exact",
            "sigkilled_process_holding_the_oracle_leaks_nothing",
            // The test is #[ignore]d (it needs root): the child must run it.
            "--include-ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn child test process");
    let stdout = child.stdout.take().expect("child stdout");
    let mut inode = None;
    for line in BufReader::new(stdout).lines() {
        let line = line.expect("read child stdout");
        // libtest may have printed "test NAME ... " on the same line.
        if let Some(pos) = line.find("READY ") {
            inode = Some(line[pos + 6..].trim().parse::<u64>().expect("inode"));
            break;
        }
    }
    let Some(inode) = inode else {
        let _ = child.kill();
        let _ = child.wait();
        panic!("child never reported READY");
    };
    // Find the child's handle on the namespace and name it from the host.
    let needle = format!("net:[{inode}]");
    let mut assigned = false;
    for e in std::fs::read_dir(format!("/proc/{}/fd", child.id()))
        .expect("child fds")
        .flatten()
    {
        if std::fs::read_link(e.path()).is_ok_and(|t| t.to_string_lossy() == needle) {
            let f = std::fs::File::open(e.path()).expect("open child's netns fd");
            host.assign_nsid(f.as_fd(), Some(ID)).expect("assign nsid");
            assigned = true;
            break;
        }
    }
    if !assigned {
        let _ = child.kill();
        let _ = child.wait();
        panic!("child holds no fd on namespace {needle}");
    }
    assert!(host.nsids().expect("nsid dump").contains(&ID));
    child.kill().expect("SIGKILL child");
    child.wait().expect("reap child");
    wait_nsid_gone(&mut host, ID);
    assert_host_clean(&mut host, inode);
}
