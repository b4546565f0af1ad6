//! A panic in the middle of a lab leaves nothing behind: the unwinding
//! drops every namespace handle, relay and TUN fd, and the namespaces the
//! lab built are no longer referenced by the process. Needs root.

use std::collections::BTreeSet;

use offload_lab::relay::{Mode, Relay};
use offload_lab::topo::VxlanPath;
use offload_sys::node::VethPair;
use offload_sys::rtnl::Rtnl;

/// Network namespaces this process references (threads, fds, mounts).
fn held_netns() -> BTreeSet<u64> {
    let mut out = BTreeSet::new();
    let mut add = |s: String| {
        if let Some(n) = s.strip_prefix("net:[").and_then(|r| r.strip_suffix(']')) {
            out.insert(n.parse::<u64>().unwrap());
        }
    };
    for t in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        if let Ok(l) = std::fs::read_link(t.path().join("ns/net")) {
            add(l.display().to_string());
        }
    }
    for f in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
        if let Ok(l) = std::fs::read_link(f.path()) {
            add(l.display().to_string());
        }
    }
    for l in std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
    {
        if let Some(i) = l.find("net:[") {
            add(l[i..].split_whitespace().next().unwrap().to_string());
        }
    }
    out
}

fn host_links() -> BTreeSet<(String, u32, bool)> {
    Rtnl::open()
        .unwrap()
        .links()
        .unwrap()
        .into_iter()
        .map(|l| (l.name, l.mtu, l.up))
        .collect()
}

fn sysctl(key: &str) -> String {
    std::fs::read_to_string(format!("/proc/sys/{key}")).unwrap()
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn panic_mid_scenario_leaves_nothing() {
    let links = host_links();
    let forward = sysctl("net/ipv4/ip_forward");
    let mut inodes = Vec::new();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut path = VxlanPath::new().unwrap();
        let relay = Relay::start(&path.m1.ns, &path.m1_tun, &path.m2.ns, &path.m2_tun).unwrap();
        path.attach_tuns().unwrap();
        relay.set_mode(Mode::Scramble);
        let mut pair = VethPair::new("p").unwrap();
        pair.client.set_big_tcp(&pair.client_dev, 185_000).unwrap();
        for n in [
            &path.a,
            &path.m1,
            &path.m2,
            &path.b,
            &pair.client,
            &pair.server,
        ] {
            inodes.push(n.ns.inode());
        }
        // The middle hop forwards (ip_forward = 1 inside M1 and M2 only).
        let fwd = path
            .m1
            .ns
            .run(|| offload_sys::sysfs::read_sysctl("net/ipv4/ip_forward"))
            .unwrap();
        assert_eq!(fwd, "1");
        panic!("deliberate panic with the lab built");
    }));
    assert!(r.is_err());
    assert_eq!(inodes.len(), 6);
    let held = held_netns();
    for i in &inodes {
        assert!(
            !held.contains(i),
            "namespace {i} still referenced after the panic"
        );
    }
    assert_eq!(host_links(), links, "host links changed");
    assert_eq!(
        sysctl("net/ipv4/ip_forward"),
        forward,
        "host ip_forward changed"
    );
}
