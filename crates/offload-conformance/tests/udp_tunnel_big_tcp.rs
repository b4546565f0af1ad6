//! What happens after GRO to a BIG TCP packet merged through a UDP tunnel
//! with an IPv4 outer header, on the running kernel: a loss the engine
//! does not model (docs/engine.md, "BIG TCP through tunnels with an IPv6
//! outer header", last paragraph).
//!
//! `udp_gro_complete` (`net/ipv4/udp_offload.c`) writes the merged length
//! into the 16-bit UDP length field, so past 64 KiB it wraps; the GRO
//! output (what a packet socket sees, and what the engine reproduces byte
//! for byte: `kernel_lines.rs`) keeps every byte, but `__udp4_lib_rcv`
//! (`net/ipv4/udp.c`) then trims the packet to that wrapped length
//! (`pskb_trim_rcsum(skb, ulen)`), and the VXLAN device receives only
//! its first bytes. At 64 KiB (`gro_max_size` 65536) nothing is trimmed.
//! The test measures it with the VXLAN device's `rx_bytes`.

use offload_conformance::generate_tunnel::{big_tcp_train, BigTcpShape, BigTcpTunnel};
use offload_lab::oracle::{GroKnobs, KernelGro, VxlanConf, VXLAN_NAME};
use std::time::{Duration, Instant};

/// The VXLAN device's received bytes, once they stop changing.
fn rx_bytes(k: &KernelGro) -> u64 {
    let read = || {
        k.sysfs()
            .net_attr(VXLAN_NAME, "statistics/rx_bytes")
            .unwrap()
            .trim()
            .parse::<u64>()
            .unwrap()
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut last = read();
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let now = read();
        if now == last || Instant::now() > deadline {
            return now;
        }
        last = now;
    }
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn vxlan_over_ipv4_big_tcp_is_cut_to_its_wrapped_udp_length_after_gro() {
    let mut kernel = KernelGro::new(GroKnobs::default()).expect("the kernel oracle");
    let a = offload_conformance::oracle_addrs(&kernel);
    let t = big_tcp_train(&a, BigTcpTunnel::Vxlan4, false, BigTcpShape::ONE_BIG);
    for size in [65_536u32, 185_000] {
        kernel
            .set_knobs(GroKnobs {
                gro_max_size: size,
                gro_ipv4_max_size: size,
                flush_timeout: Duration::from_millis(400),
                vxlan: Some(VxlanConf {
                    vni: 42,
                    port: 4789,
                }),
                ..GroKnobs::default()
            })
            .unwrap();
        let before = rx_bytes(&kernel);
        let out = kernel.run_train(&t.frames).unwrap();
        let got = rx_bytes(&kernel) - before;
        // What the VXLAN device counts of a whole packet: the inner frame
        // less its Ethernet header (outer Ethernet, IPv4, UDP, VXLAN and
        // inner Ethernet headers: 64 bytes).
        let whole: u64 = out.iter().map(|f| f.len() as u64 - 64).sum();
        eprintln!(
            "gro_max_size {size}: GRO delivered {:?} bytes; the VXLAN device received {got} of {whole} bytes",
            out.iter().map(Vec::len).collect::<Vec<_>>()
        );
        if size == 65_536 || !offload_conformance::running_line().has_ipv4_big_tcp() {
            assert_eq!(got, whole, "below 64 KiB nothing is cut");
            continue;
        }
        assert_eq!(out.len(), 1, "one merge past 64 KiB");
        let f = &out[0];
        let udp_bytes = f.len() - 14 - 20;
        let ulen = u16::from_be_bytes([f[14 + 20 + 4], f[14 + 20 + 5]]) as usize;
        assert_eq!(ulen, udp_bytes % 65_536, "the UDP length wraps");
        assert_eq!(
            got,
            (ulen - 8 - 8 - 14) as u64,
            "the VXLAN device gets the packet cut to the wrapped UDP length"
        );
    }
}
