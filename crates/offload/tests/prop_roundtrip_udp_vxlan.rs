//! The reversibility rule (`gro-gso-reference.md` §12) for UDP (GRO's
//! segment path ↔ USO) and for TCP inside VXLAN (tunnel GRO ↔
//! `skb_udp_tunnel_segment`): `gso(gro(train)) == train` byte for byte, and
//! GRO merges as much as the kernel would.
//!
//! UDP trains keep incrementing IPv4 IDs: USO always increments (there is no
//! fixed-ID flag for UDP), so a fixed-ID UDP train is not reversible in the
//! kernel either. VXLAN trains draw outer and inner ID modes, DF bits, the
//! outer UDP checksum (zero or full) and the outer and inner IP versions at
//! random (inner MSS up to 1378 so that an IPv6-in-IPv6 frame stays 1514
//! bytes).

use offload::build::{vxlan_payload, FrameSpec, TcpSpec};
use offload::gro::{gso_type, UdpGro};
use offload::gso::{segment, GsoParams};
use offload::wire::tcp::flags;
use offload::{Delivered, FlushReason, GroConfig, GroEngine, Input, LinkKind};
use proptest::prelude::*;

#[derive(Debug, Clone, PartialEq, Eq)]
struct Out {
    data: Vec<u8>,
    segments: u32,
    gso_size: u32,
    gso_type: u32,
    reason: FlushReason,
}

fn config() -> GroConfig {
    GroConfig::default()
        .flush_timeout_ns(u64::MAX / 4)
        .udp(UdpGro::AllPorts)
}

fn gro(frames: &[Vec<u8>]) -> Vec<Out> {
    let mut engine = GroEngine::new(config());
    let mut outs = Vec::new();
    let mut push = |d: &Delivered<'_>| {
        outs.push(Out {
            data: d.to_vec(|n| &frames[n as usize - 1]),
            segments: d.segments,
            gso_size: d.gso_size,
            gso_type: d.gso_type,
            reason: d.reason,
        })
    };
    for (i, f) in frames.iter().enumerate() {
        let input = Input {
            data: f,
            link: LinkKind::Ethernet,
            timestamp_ns: 1_000 * i as u64,
            frame: i as u64 + 1,
            orig_len: f.len() as u32,
        };
        engine.receive(input, &mut push);
    }
    engine.finish(&mut push);
    outs
}

/// Segments every delivery again and compares with the input.
fn check_roundtrip(frames: &[Vec<u8>], outs: &[Out]) -> Result<(), TestCaseError> {
    let merged: u32 = outs.iter().map(|o| o.segments).sum();
    prop_assert_eq!(merged as usize, frames.len());
    let mut back: Vec<Vec<u8>> = Vec::new();
    for o in outs {
        if o.segments <= 1 {
            back.push(o.data.clone());
            continue;
        }
        let p = GsoParams::from_gso(o.gso_size, o.gso_type);
        let n = segment(
            LinkKind::Ethernet,
            &o.data,
            &p,
            &[4789],
            &mut |s: &[u8]| back.push(s.to_vec()),
        )
        .map_err(|e| TestCaseError::fail(format!("segment failed: {e}")))?;
        prop_assert_eq!(n, o.segments as usize, "GSO count vs GRO count");
    }
    prop_assert_eq!(back.len(), frames.len());
    for (i, (g, w)) in back.iter().zip(frames).enumerate() {
        if g != w {
            let at = g.iter().zip(w).position(|(a, b)| a != b);
            return Err(TestCaseError::fail(format!(
                "frame {i}: lengths {} vs {}, first differing byte {:?} of {:?}",
                g.len(),
                w.len(),
                at.map(|a| (a, g[a], w[a])),
                outs.iter()
                    .map(|o| (o.segments, o.gso_type, o.reason))
                    .collect::<Vec<_>>()
            )));
        }
    }
    Ok(())
}

fn bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[derive(Debug, Clone)]
struct UdpTrain {
    v6: bool,
    size: usize,
    count: usize,
    tail: Option<usize>,
    id0: u16,
    df: bool,
    ports: (u16, u16),
    seed: u64,
}

fn udp_train() -> impl Strategy<Value = UdpTrain> {
    (
        any::<bool>(),
        (1usize..=1472, 1usize..=70, any::<bool>()).prop_flat_map(|(size, count, t)| {
            let tail = if t && size > 1 {
                (1..size).prop_map(Some).boxed()
            } else {
                Just(None).boxed()
            };
            (Just(size), Just(count), tail)
        }),
        any::<u16>(),
        any::<bool>(),
        // Not a tunnel port: 4789 is VXLAN, 6081 Geneve, and GSO refuses
        // the unmodelled UDP tunnels' ports by name.
        (
            1u16..4789,
            (4790u16..=u16::MAX).prop_filter("a UDP tunnel's port", |p| {
                *p != offload::wire::geneve::PORT
                    && !offload::gso::UNMODELLED_UDP_TUNNEL_PORTS.contains(p)
            }),
        ),
        any::<u64>(),
    )
        .prop_map(|(v6, (size, count, tail), id0, df, ports, seed)| UdpTrain {
            v6,
            size,
            count,
            tail,
            id0,
            df,
            ports,
            seed,
        })
}

impl UdpTrain {
    fn frames(&self) -> Vec<Vec<u8>> {
        let n = self.count + usize::from(self.tail.is_some());
        (0..n)
            .map(|i| {
                let len = if i < self.count {
                    self.size
                } else {
                    self.tail.expect("tail index")
                };
                let payload = bytes(self.seed ^ i as u64, len);
                let (sp, dp) = self.ports;
                if self.v6 {
                    FrameSpec::udp6([0xfd; 16], [0xfe; 16], sp, dp)
                        .payload(payload)
                        .build()
                } else {
                    let mut s =
                        FrameSpec::udp4([10, 0, 0, 1], [10, 0, 0, 2], sp, dp).payload(payload);
                    s.v4_mut().id = self.id0.wrapping_add(i as u16);
                    s.v4_mut().df = self.df;
                    s.build()
                }
            })
            .collect()
    }
}

#[derive(Debug, Clone)]
struct VxlanTrain {
    inner_v6: bool,
    outer_v6: bool,
    mss: usize,
    count: usize,
    tail: Option<usize>,
    outer_id0: u16,
    outer_fixed: bool,
    outer_df: bool,
    outer_csum: bool,
    inner_id0: u16,
    inner_fixed: bool,
    inner_df: bool,
    vni: u32,
    seq0: u32,
    psh_last: bool,
    seed: u64,
}

fn vxlan_train() -> impl Strategy<Value = VxlanTrain> {
    (
        (any::<bool>(), any::<bool>()),
        (100usize..=1378, 1usize..=50, any::<bool>()).prop_flat_map(|(mss, count, t)| {
            let tail = if t {
                (1..mss).prop_map(Some).boxed()
            } else {
                Just(None).boxed()
            };
            (Just(mss), Just(count), tail)
        }),
        (any::<u16>(), any::<bool>(), any::<bool>(), any::<bool>()),
        (any::<u16>(), any::<bool>(), any::<bool>()),
        (0u32..1 << 24, any::<u32>(), any::<bool>(), any::<u64>()),
    )
        .prop_map(
            |(
                (inner_v6, outer_v6),
                (mss, count, tail),
                (outer_id0, outer_fixed, outer_df, outer_csum),
                (inner_id0, inner_fixed, inner_df),
                (vni, seq0, psh_last, seed),
            )| VxlanTrain {
                inner_v6,
                outer_v6,
                mss,
                count,
                tail,
                outer_id0,
                outer_fixed,
                outer_df,
                outer_csum,
                inner_id0,
                inner_fixed,
                inner_df,
                vni,
                seq0,
                psh_last,
                seed,
            },
        )
}

impl VxlanTrain {
    fn frames(&self) -> Vec<Vec<u8>> {
        let n = self.count + usize::from(self.tail.is_some());
        (0..n)
            .map(|i| {
                let len = if i < self.count {
                    self.mss
                } else {
                    self.tail.expect("tail index")
                };
                let mut tcp =
                    TcpSpec::data(33_333, 80, self.seq0.wrapping_add((i * self.mss) as u32));
                if i + 1 == n && self.psh_last {
                    tcp.flags |= flags::PSH;
                }
                let payload = bytes(self.seed ^ i as u64, len);
                let inner = if self.inner_v6 {
                    FrameSpec::tcp6([0xfd; 16], [0xfc; 16], tcp)
                        .payload(payload)
                        .build()
                } else {
                    let mut s =
                        FrameSpec::tcp4([192, 168, 0, 2], [192, 168, 0, 1], tcp).payload(payload);
                    s.v4_mut().id = if self.inner_fixed {
                        self.inner_id0
                    } else {
                        self.inner_id0.wrapping_add(i as u16)
                    };
                    s.v4_mut().df = self.inner_df;
                    s.build()
                };
                let payload = vxlan_payload(self.vni, &inner);
                let mut outer = if self.outer_v6 {
                    FrameSpec::udp6([0xfa; 16], [0xfb; 16], 40_000, 4789).payload(payload)
                } else {
                    let mut o = FrameSpec::udp4([10, 0, 0, 1], [10, 0, 0, 2], 40_000, 4789)
                        .payload(payload);
                    o.v4_mut().id = if self.outer_fixed {
                        self.outer_id0
                    } else {
                        self.outer_id0.wrapping_add(i as u16)
                    };
                    o.v4_mut().df = self.outer_df;
                    o
                };
                outer.udp_mut().zero_checksum = !self.outer_csum;
                outer.build()
            })
            .collect()
    }
}

proptest! {
    #[test]
    fn udp_gso_of_gro_is_the_train(t in udp_train()) {
        let frames = t.frames();
        let outs = gro(&frames);
        for o in &outs[..outs.len() - 1] {
            // 64 datagrams or 64 KiB: the only limits a conforming train meets.
            prop_assert!(
                matches!(o.reason, FlushReason::SizeLimit | FlushReason::SegmentCountLimit),
                "run cut by {:?}", o.reason
            );
        }
        for o in outs.iter().filter(|o| o.segments > 1) {
            prop_assert!(o.gso_type & gso_type::UDP_L4 != 0, "gso_type {:#x}", o.gso_type);
            prop_assert_eq!(o.gso_size as usize, t.size);
        }
        check_roundtrip(&frames, &outs)?;
    }

    #[test]
    fn vxlan_gso_of_gro_is_the_train(t in vxlan_train()) {
        let frames = t.frames();
        let outs = gro(&frames);
        for o in &outs[..outs.len() - 1] {
            prop_assert_eq!(o.reason, FlushReason::SizeLimit, "run cut early");
        }
        for o in outs.iter().filter(|o| o.segments > 1) {
            let tunnel = if t.outer_csum {
                gso_type::UDP_TUNNEL_CSUM
            } else {
                gso_type::UDP_TUNNEL
            };
            prop_assert!(o.gso_type & tunnel != 0, "gso_type {:#x}", o.gso_type);
            prop_assert_eq!(
                o.gso_type & gso_type::TCP_FIXEDID != 0,
                t.outer_fixed && !t.outer_v6
            );
            prop_assert_eq!(
                o.gso_type & gso_type::TCP_FIXEDID_INNER != 0,
                t.inner_fixed && !t.inner_v6
            );
        }
        check_roundtrip(&frames, &outs)?;
    }
}
