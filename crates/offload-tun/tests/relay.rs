//! End to end: two namespaces, a TUN in each, a relay in this process
//! (read and segment on one side, coalesce and write on the other, through
//! the zero-copy path `tun_relay` runs and through the copying one), and a
//! real TCP connection between the namespaces carrying a byte stream that
//! must arrive intact, with offloads on and off. Root is required; without
//! it the tests fail, they never skip.

mod common;

use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::*;
use offload_tun::{CoalesceStats, Coalescer, CoalescerOptions, Split, TunDevice, TunOptions};

/// How the relay moves packets.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Path {
    /// As `tun_relay` does by default: `read_into` segments into the
    /// coalescer's arena, `push_staged` merges zero-copy, one `writev` per
    /// super-packet.
    ZeroCopy,
    /// `read_packets_with_checksum` and `push_with_checksum`, GRO merging
    /// by copy and contiguous writes (`tun_relay --copy`).
    Copying,
}

/// Relays from `src` to `dst` until `stop`; returns (super-packets read,
/// coalescer counters).
fn relay(
    mut src: TunDevice,
    mut dst: TunDevice,
    path: Path,
    stop: &AtomicBool,
) -> (u64, CoalesceStats) {
    src.set_nonblocking(true).unwrap();
    let opts = CoalescerOptions {
        zero_copy: path == Path::ZeroCopy,
        ..CoalescerOptions::default()
    };
    let mut co = Coalescer::for_device(&dst, opts);
    let mut supers = 0;
    while !stop.load(Ordering::SeqCst) {
        if !src.wait_readable(Some(Duration::from_millis(20))).unwrap() {
            continue;
        }
        for _ in 0..64 {
            let r = match path {
                Path::ZeroCopy => {
                    let r = src.read_into(co.arena_mut()).unwrap();
                    co.push_staged(&mut dst).unwrap();
                    r
                }
                Path::Copying => src
                    .read_packets_with_checksum(&mut |p: &[u8], csum| {
                        co.push_with_checksum(p, csum, &mut dst).unwrap()
                    })
                    .unwrap(),
            };
            match r {
                None => break,
                Some(Split::Segmented(_)) => supers += 1,
                Some(_) => {}
            }
        }
        co.flush(&mut dst).unwrap();
    }
    (supers, *co.stats())
}

fn stream_through_relay(
    opts: TunOptions,
    path: Path,
    net: u8,
) -> ((u64, CoalesceStats), (u64, CoalesceStats)) {
    let (a_addr, b_addr) = (Ipv4Addr::new(10, net, 0, 1), Ipv4Addr::new(10, net, 0, 2));
    let (ns_a, ns_b) = (namespace(), namespace());
    let tun_a = tun_in(&ns_a, "ofl-ra", a_addr, opts);
    let tun_b = tun_in(&ns_b, "ofl-rb", b_addr, opts);
    let (a2, b2) = (tun_a.try_clone().unwrap(), tun_b.try_clone().unwrap());
    let listener = ns_b
        .run(|| TcpListener::bind((b_addr, 5010)).map_err(lab))
        .unwrap();
    let data = pattern(8 << 20, 50);
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let ab = s.spawn(|| relay(tun_a, tun_b, path, &stop));
        let ba = s.spawn(|| relay(b2, a2, path, &stop));
        let server = s.spawn(|| {
            let (mut c, _) = listener.accept().unwrap();
            c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
            let mut v = Vec::new();
            c.read_to_end(&mut v).unwrap();
            v
        });
        ns_a.run(|| {
            let mut c = TcpStream::connect((b_addr, 5010)).map_err(lab)?;
            c.write_all(&data).map_err(lab)?;
            Ok(())
        })
        .unwrap();
        let got = server.join().unwrap();
        stop.store(true, Ordering::SeqCst);
        assert_eq!(got.len(), data.len());
        assert!(got == data, "the stream arrived altered");
        (ab.join().unwrap(), ba.join().unwrap())
    })
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn relay_with_offloads_moves_super_packets_and_the_stream_intact() {
    require_root();
    for (path, net) in [(Path::ZeroCopy, 87), (Path::Copying, 86)] {
        let ((supers, co), _) = stream_through_relay(TunOptions::default(), path, net);
        assert!(
            supers > 0,
            "{path:?}: A's kernel handed over no TSO super-packets"
        );
        assert!(
            co.super_packets > 0,
            "{path:?}: no super-packet written to B: {co:?}"
        );
        assert!(co.merged_packets > co.super_packets * 2, "{path:?}: {co:?}");
        // Zero-copy: every super-packet went out as head + ranges.
        let vectored = if path == Path::ZeroCopy {
            co.super_packets
        } else {
            0
        };
        assert_eq!(co.vectored_writes, vectored, "{path:?}: {co:?}");
        // ... and the payload ranges of one super-packet as read joined
        // into one: head + one range, more only where a merged packet
        // spans two reads or the arena's super-packet area was full (45
        // ranges each without the joining).
        if path == Path::ZeroCopy {
            eprintln!("{co:?}");
            assert!(
                co.parts_written < co.vectored_writes * 3,
                "payload ranges not joined: {co:?}"
            );
        }
    }
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn relay_without_offloads_moves_plain_packets_and_the_stream_intact() {
    require_root();
    for (path, net) in [(Path::ZeroCopy, 88), (Path::Copying, 85)] {
        let ((supers, co), _) = stream_through_relay(TunOptions::plain(), path, net);
        assert_eq!((supers, co.super_packets), (0, 0), "{path:?}: {co:?}");
        assert!(co.writes > (8 << 20) / 1500, "{path:?}: {co:?}");
    }
}
