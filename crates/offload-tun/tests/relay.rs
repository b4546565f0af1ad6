//! End to end: two namespaces, a TUN in each, a relay in this process
//! (read and segment on one side, coalesce and write on the other), and a
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

/// Relays from `src` to `dst` until `stop`; returns (super-packets read,
/// coalescer counters).
fn relay(mut src: TunDevice, mut dst: TunDevice, stop: &AtomicBool) -> (u64, CoalesceStats) {
    src.set_nonblocking(true).unwrap();
    let mut co = Coalescer::for_device(&dst, CoalescerOptions::default());
    let mut supers = 0;
    while !stop.load(Ordering::SeqCst) {
        if !src.wait_readable(Some(Duration::from_millis(20))).unwrap() {
            continue;
        }
        for _ in 0..64 {
            let r = src
                .read_packets(&mut |p: &[u8]| co.push(p, &mut dst).unwrap())
                .unwrap();
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

fn stream_through_relay(opts: TunOptions, net: u8) -> ((u64, CoalesceStats), (u64, CoalesceStats)) {
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
        let ab = s.spawn(|| relay(tun_a, tun_b, &stop));
        let ba = s.spawn(|| relay(b2, a2, &stop));
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
fn relay_with_offloads_moves_super_packets_and_the_stream_intact() {
    require_root();
    let ((supers, co), _) = stream_through_relay(TunOptions::default(), 87);
    assert!(supers > 0, "A's kernel handed over no TSO super-packets");
    assert!(co.super_packets > 0, "no super-packet written to B: {co:?}");
    assert!(co.merged_packets > co.super_packets * 2, "{co:?}");
}

#[test]
fn relay_without_offloads_moves_plain_packets_and_the_stream_intact() {
    require_root();
    let ((supers, co), _) = stream_through_relay(TunOptions::plain(), 88);
    assert_eq!((supers, co.super_packets), (0, 0), "{co:?}");
    assert!(co.writes > (8 << 20) / 1500, "{co:?}");
}
