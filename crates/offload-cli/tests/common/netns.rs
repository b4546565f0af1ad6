//! Commands run inside a network namespace, and veth pairs between two.
//!
//! The tests' namespaces are anonymous (`NetNs::new_anonymous`, or
//! `offload_sys::node::Node`, which holds one): the kernel removes them,
//! and every device, address and route in them, when the test process's
//! last fd on them closes, on return, panic or kill. Nothing here needs
//! a cleanup step of its own, and nothing is created in the host's
//! namespace, even for a moment.

use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;

use offload_sys::rtnl::Rtnl;
use offload_sys::NetNs;

/// `prog args` to run inside `ns`, as `ip netns exec` runs it: the child
/// enters the namespace between fork and exec, so the test's own threads
/// stay where they are. `ns` must outlive the spawn (the child enters it
/// through the test's open fd).
pub fn command_in(ns: &NetNs, prog: impl AsRef<std::ffi::OsStr>, args: &[&str]) -> Command {
    let fd = ns.as_fd().as_raw_fd();
    let mut cmd = Command::new(prog);
    cmd.args(args);
    // SAFETY: between fork and exec the child only calls setns(2), which is
    // async-signal-safe; `fd` stays open in the parent while the child
    // starts (the caller holds `ns`).
    unsafe {
        cmd.pre_exec(move || {
            if libc::setns(fd, libc::CLONE_NEWNET) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd
}

/// The release binary with `args`, to run inside `ns`.
pub fn offload_in(ns: &NetNs, args: &[&str]) -> Command {
    command_in(ns, super::BIN, args)
}

/// Creates a veth pair, `a_dev` in `a` and `b_dev` in `b`, both down:
/// made inside `a` over rtnetlink, its peer then moved to `b`. Callers
/// set features and addresses before they bring the ends up.
pub fn veth_pair(a: &NetNs, a_dev: &str, b: &NetNs, b_dev: &str) {
    a.run(|| {
        let mut rtnl = Rtnl::open()?;
        rtnl.create_veth(a_dev, b_dev)?;
        let peer = rtnl.link_by_name(b_dev)?.index;
        rtnl.move_to_netns(peer, b.as_fd())
    })
    .unwrap_or_else(|e| panic!("veth {a_dev} <-> {b_dev}: {e}"));
}
