//! Commands run inside a network namespace, veth pairs between two, and
//! bulk TCP transfers across them.
//!
//! The tests' namespaces are anonymous (`NetNs::new_anonymous`, or
//! `offload_sys::node::Node`, which holds one): the kernel removes them,
//! and every device, address and route in them, when the test process's
//! last fd on them closes, on return, panic or kill. Nothing here needs
//! a cleanup step of its own, and nothing is created in the host's
//! namespace, even for a moment.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::Duration;

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

/// One bulk TCP transfer the kernel carries: `bytes` from namespace
/// `from` to `to`, whose listener is bound in `into`. The sender writes
/// `write_size` bytes a call (`bytes` in one call leaves where PSH goes to
/// the kernel alone), shuts its side down and waits for the receiver's
/// close; the receiver starts reading after `reader_pause` (a receiver
/// slow to read: zero windows). Fails unless every byte arrived.
pub fn bulk_transfer(
    from: &NetNs,
    into: &NetNs,
    to: SocketAddr,
    bytes: usize,
    write_size: usize,
    reader_pause: Duration,
) {
    let listener = into
        .run(move || Ok(TcpListener::bind(to)))
        .unwrap()
        .unwrap_or_else(|e| panic!("listen on {to}: {e}"));
    let reader = std::thread::spawn(move || {
        let (mut c, _) = listener.accept().unwrap();
        std::thread::sleep(reader_pause);
        let mut n = 0usize;
        let mut buf = vec![0u8; 1 << 16];
        loop {
            match c.read(&mut buf).unwrap() {
                0 => break n,
                k => n += k,
            }
        }
    });
    from.run(move || {
        let mut c = TcpStream::connect(to).unwrap();
        let data: Vec<u8> = (0..bytes).map(|i| (i % 253) as u8).collect();
        for chunk in data.chunks(write_size.max(1)) {
            c.write_all(chunk).unwrap();
        }
        c.shutdown(std::net::Shutdown::Write).unwrap();
        let _ = c.read(&mut [0u8; 1]);
        Ok(())
    })
    .unwrap();
    assert_eq!(reader.join().unwrap(), bytes, "transfer to {to} incomplete");
}
