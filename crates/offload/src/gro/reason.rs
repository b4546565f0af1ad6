//! Why a packet left the GRO engine: the product's currency.
//!
//! Every delivered packet carries one [`FlushReason`]. For a held packet
//! (a super-packet or a single held segment) it is why the kernel completed
//! it; for a packet that went up alone it is why GRO would not hold it.
//! Each variant names the kernel condition it stands for.

use core::fmt;

/// Why GRO delivered a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
#[repr(u8)]
pub enum FlushReason {
    // ---- a held packet was completed because of the next segment ----
    /// `tcp_gro_receive`: the incoming segment carries CWR (`flags & TCP_FLAG_CWR`, before 7.0).
    CwrSet,
    /// `tcp_flag_word` differs outside FIN/PSH: one of SYN, RST, URG, ACK, ECE, CWR, reserved bits.
    TcpFlagsChanged,
    /// `tcp_flag_word` differs in the window field.
    WindowChanged,
    /// `tcp_flag_word` differs in the data offset (TCP header length).
    HeaderLengthChanged,
    /// `th->ack_seq` differs.
    AckChanged,
    /// TCP option bytes differ only in the timestamp option.
    TimestampChanged,
    /// TCP option bytes differ.
    OptionsChanged,
    /// `inet_gro_flush`: IPv4 TTL differs.
    TtlChanged,
    /// `inet_gro_flush` / `ipv6_gro_flush`: IPv4 TOS or IPv6 traffic class (incl. ECN) differs.
    TosChanged,
    /// `inet_gro_flush`: DF bit differs.
    DfChanged,
    /// `inet_gro_flush`: the IP ID is neither head ID + count nor fixed.
    IpIdMismatch,
    /// `ipv6_gro_flush`: hop limit differs.
    HopLimitChanged,
    /// Tunnel: the outer IPv4 ID is neither head ID + count nor fixed (6.18 checks outer IDs whatever DF says).
    OuterIpIdMismatch,
    /// Tunnel: outer TTL / hop limit differs.
    OuterTtlChanged,
    /// Tunnel: outer TOS / traffic class differs.
    OuterTosChanged,
    /// Tunnel: outer DF bit differs.
    OuterDfChanged,
    /// The segment carries more payload than the run's MSS (`(len - 1) >= mss`).
    SegmentLarger,
    /// The segment's sequence number is below the end of the held packet (retransmission, overlap).
    SequenceBehind,
    /// The segment's sequence number is beyond the end of the held packet (a gap: loss or reordering).
    SequenceGap,
    /// `skb_gro_receive`: merging would reach `gro_max_size` / `gro_ipv4_max_size` (or 64 KiB for non-TCP).
    SizeLimit,
    /// The incoming segment could not merge because its own L3 length was inconsistent.
    IncomingLengthMismatch,
    /// `udp_gro_receive_segment`: the UDP datagram count reached `UDP_GRO_CNT_MAX` (64).
    SegmentCountLimit,
    /// UDP: the datagram is larger than the run's datagram size.
    DatagramLarger,

    // ---- a held packet ended its run after the last merge ----
    /// A segment shorter than the MSS was merged and ends the run.
    ShortSegment,
    /// A segment with PSH was merged and ends the run.
    PshFlag,
    /// A segment with FIN was merged and ends the run.
    FinFlag,

    // ---- table and time ----
    /// `gro_flush_oldest`: the bucket already held `MAX_GRO_SKBS` (8) packets.
    TableFull,
    /// The capture shows an idle gap longer than the flush timeout.
    Timeout,
    /// End of input.
    EndOfInput,

    // ---- a packet that GRO did not hold at all ----
    /// Not IPv4/IPv6 (no packet offload for the EtherType).
    NotIp,
    /// No GRO handler for the transport protocol (or plain UDP without UDP GRO).
    UnsupportedProtocol,
    /// IPv4 header with options (first byte not 0x45).
    IpOptions,
    /// IPv4 fragment, or IPv6 with a fragment/unknown extension header.
    Fragment,
    /// Bad IPv4 header checksum.
    BadIpChecksum,
    /// TCP/UDP checksum does not verify.
    BadChecksum,
    /// IP length field disagrees with the bytes present (Ethernet padding, truncation, BIG TCP input).
    LengthMismatch,
    /// A header could not be read (short frame, bad data offset).
    Malformed,
    /// No payload (a pure ACK, or a zero-length segment).
    NoPayload,
    /// The segment carries PSH with no run to end (never held).
    PshAlone,
    /// The segment carries FIN with no run to end.
    FinAlone,
    /// The segment carries SYN, RST or URG.
    ControlFlags,
    /// The capture stored fewer bytes than the packet had (snap length).
    CaptureTruncated,
    /// The capture shows the packet leaving the host: receive offloads do not apply.
    Outgoing,
    /// UDP GRO needs a non-zero UDP checksum ("for symmetry with GSO").
    UdpZeroChecksum,
    /// A VLAN-tagged frame on a kernel without a VLAN GRO handler
    /// (`CONFIG_VLAN_8021Q` not set, as on the reference 6.18 build).
    VlanNotOffloaded,
    /// A tunnel inside a tunnel: GRO looks through one level only
    /// (`NAPI_GRO_CB(skb)->encap_mark` in `udp_gro_receive`,
    /// `ipip_gro_receive`, `sit_ip6ip6_gro_receive`, `gre_gro_receive`).
    NestedTunnel,
    /// GRE with a sequence number, routing, or a version other than 0
    /// (`gre_gro_receive`: only the key and checksum flags are taken).
    GreUnsupported,
    /// Geneve with a version other than 0 or the OAM bit
    /// (`geneve_gro_receive`).
    GeneveUnsupported,
}

impl FlushReason {
    /// Why GRO passes a frame whose tunnel header the tunnel's rules
    /// refused (`crate::tunnel`).
    pub(super) fn of_tunnel(r: crate::tunnel::Refusal) -> Self {
        use crate::tunnel::Refusal;
        match r {
            Refusal::Truncated => FlushReason::Malformed,
            Refusal::GeneveVersionOrOam => FlushReason::GeneveUnsupported,
            Refusal::GreFlags => FlushReason::GreUnsupported,
            Refusal::GreChecksum => FlushReason::BadChecksum,
            Refusal::Payload(_) => FlushReason::UnsupportedProtocol,
        }
    }
}

impl FlushReason {
    /// Every reason, in declaration order.
    pub const ALL: &'static [FlushReason] = &[
        FlushReason::CwrSet,
        FlushReason::TcpFlagsChanged,
        FlushReason::WindowChanged,
        FlushReason::HeaderLengthChanged,
        FlushReason::AckChanged,
        FlushReason::TimestampChanged,
        FlushReason::OptionsChanged,
        FlushReason::TtlChanged,
        FlushReason::TosChanged,
        FlushReason::DfChanged,
        FlushReason::IpIdMismatch,
        FlushReason::HopLimitChanged,
        FlushReason::OuterIpIdMismatch,
        FlushReason::OuterTtlChanged,
        FlushReason::OuterTosChanged,
        FlushReason::OuterDfChanged,
        FlushReason::SegmentLarger,
        FlushReason::SequenceBehind,
        FlushReason::SequenceGap,
        FlushReason::SizeLimit,
        FlushReason::IncomingLengthMismatch,
        FlushReason::SegmentCountLimit,
        FlushReason::DatagramLarger,
        FlushReason::ShortSegment,
        FlushReason::PshFlag,
        FlushReason::FinFlag,
        FlushReason::TableFull,
        FlushReason::Timeout,
        FlushReason::EndOfInput,
        FlushReason::NotIp,
        FlushReason::UnsupportedProtocol,
        FlushReason::IpOptions,
        FlushReason::Fragment,
        FlushReason::BadIpChecksum,
        FlushReason::BadChecksum,
        FlushReason::LengthMismatch,
        FlushReason::Malformed,
        FlushReason::NoPayload,
        FlushReason::PshAlone,
        FlushReason::FinAlone,
        FlushReason::ControlFlags,
        FlushReason::CaptureTruncated,
        FlushReason::Outgoing,
        FlushReason::UdpZeroChecksum,
        FlushReason::VlanNotOffloaded,
        FlushReason::NestedTunnel,
        FlushReason::GreUnsupported,
        FlushReason::GeneveUnsupported,
    ];

    /// Index into [`FlushReason::ALL`] (for counters).
    #[inline]
    pub fn index(self) -> usize {
        self as usize
    }

    /// A stable machine name (used in JSON and tables).
    pub fn name(self) -> &'static str {
        use FlushReason::*;
        match self {
            CwrSet => "cwr-set",
            TcpFlagsChanged => "tcp-flags-changed",
            WindowChanged => "window-changed",
            HeaderLengthChanged => "tcp-header-length-changed",
            AckChanged => "ack-changed",
            TimestampChanged => "timestamp-changed",
            OptionsChanged => "options-changed",
            TtlChanged => "ttl-changed",
            TosChanged => "tos-changed",
            DfChanged => "df-changed",
            IpIdMismatch => "ip-id-mismatch",
            HopLimitChanged => "hop-limit-changed",
            OuterIpIdMismatch => "outer-ip-id-mismatch",
            OuterTtlChanged => "outer-ttl-changed",
            OuterTosChanged => "outer-tos-changed",
            OuterDfChanged => "outer-df-changed",
            SegmentLarger => "segment-larger-than-mss",
            SequenceBehind => "sequence-behind",
            SequenceGap => "sequence-gap",
            SizeLimit => "size-limit",
            IncomingLengthMismatch => "incoming-length-mismatch",
            SegmentCountLimit => "segment-count-limit",
            DatagramLarger => "datagram-larger",
            ShortSegment => "short-segment",
            PshFlag => "psh",
            FinFlag => "fin",
            TableFull => "table-full",
            Timeout => "timeout",
            EndOfInput => "end-of-input",
            NotIp => "not-ip",
            UnsupportedProtocol => "unsupported-protocol",
            IpOptions => "ip-options",
            Fragment => "fragment",
            BadIpChecksum => "bad-ip-checksum",
            BadChecksum => "bad-checksum",
            LengthMismatch => "length-mismatch",
            Malformed => "malformed",
            NoPayload => "no-payload",
            PshAlone => "psh-alone",
            FinAlone => "fin-alone",
            ControlFlags => "syn-rst-urg",
            CaptureTruncated => "capture-truncated",
            Outgoing => "outgoing",
            UdpZeroChecksum => "udp-zero-checksum",
            VlanNotOffloaded => "vlan-not-offloaded",
            NestedTunnel => "nested-tunnel",
            GreUnsupported => "gre-unsupported",
            GeneveUnsupported => "geneve-unsupported",
        }
    }

    /// The kernel condition this reason stands for: file, function and
    /// the kernel lines it holds on ("engine model" for the engine's own
    /// choices about captures and time). One hop from a reason to its rule.
    pub fn citation(self) -> &'static str {
        use FlushReason::*;
        match self {
            CwrSet => "net/ipv4/tcp_offload.c tcp_gro_receive: flush = flags & TCP_FLAG_CWR (all lines up to 6.19; removed in 7.0)",
            TcpFlagsChanged => "net/ipv4/tcp_offload.c tcp_gro_receive: tcp_flag_word differs outside ~(FIN|PSH) (6.18+; CWR also masked before 6.18)",
            WindowChanged => "net/ipv4/tcp_offload.c tcp_gro_receive: tcp_flag_word (window half) differs (all lines)",
            HeaderLengthChanged => "net/ipv4/tcp_offload.c tcp_gro_receive: tcp_flag_word (data offset) differs (all lines)",
            AckChanged => "net/ipv4/tcp_offload.c tcp_gro_receive: th->ack_seq ^ th2->ack_seq (all lines)",
            TimestampChanged => "net/ipv4/tcp_offload.c tcp_gro_receive: option words differ, timestamp only (all lines)",
            OptionsChanged => "net/ipv4/tcp_offload.c tcp_gro_receive: option words differ (all lines)",
            TtlChanged => "include/net/gro.h inet_gro_flush (6.10+); net/ipv4/af_inet.c inet_gro_receive NAPI_GRO_CB(p)->flush (<= 6.9): ttl differs",
            TosChanged => "include/net/gro.h inet_gro_flush / ipv6_gro_flush (6.10+); af_inet.c inet_gro_receive, ip6_offload.c ipv6_gro_receive (<= 6.9): TOS / traffic class differs",
            DfChanged => "include/net/gro.h inet_gro_flush (6.10+); af_inet.c inet_gro_receive (<= 6.9): DF differs",
            IpIdMismatch => "include/net/gro.h inet_gro_flush (6.10-6.17 one fixed-ID bit, 6.18+ two); af_inet.c inet_gro_receive flush_id + tcp_offload.c is_atomic (<= 6.9)",
            HopLimitChanged => "include/net/gro.h ipv6_gro_flush (6.10+); net/ipv6/ip6_offload.c ipv6_gro_receive (<= 6.9): hop limit differs",
            OuterIpIdMismatch => "include/net/gro.h gro_receive_network_flush, outer header (6.18+ any DF; 6.10-6.17 DF=0 only); af_inet.c flush_id ORed for DF=0 outer (<= 6.9)",
            OuterTtlChanged => "include/net/gro.h gro_receive_network_flush, outer header (6.10+); af_inet.c / ip6_offload.c same_flow loop (<= 6.9)",
            OuterTosChanged => "include/net/gro.h gro_receive_network_flush, outer header (6.10+); af_inet.c / ip6_offload.c same_flow loop (<= 6.9)",
            OuterDfChanged => "include/net/gro.h gro_receive_network_flush, outer header (6.10+); af_inet.c inet_gro_receive (<= 6.9)",
            SegmentLarger => "net/ipv4/tcp_offload.c tcp_gro_receive: (len - 1) >= mss (all lines)",
            SequenceBehind => "net/ipv4/tcp_offload.c tcp_gro_receive: th2->seq + skb_gro_len(p) != th->seq (all lines)",
            SequenceGap => "net/ipv4/tcp_offload.c tcp_gro_receive: th2->seq + skb_gro_len(p) != th->seq (all lines)",
            SizeLimit => "net/core/gro.c skb_gro_receive: -E2BIG at gro_max_size / gro_ipv4_max_size (6.3+), gro_max_size and 64 KiB for IPv4 (<= 6.2)",
            IncomingLengthMismatch => "net/core/gro.c skb_gro_receive: NAPI_GRO_CB(skb)->flush set by inet_gro_receive / ipv6_gro_receive length check (all lines)",
            SegmentCountLimit => "net/ipv4/udp_offload.c udp_gro_receive_segment: count >= UDP_GRO_CNT_MAX (all lines)",
            DatagramLarger => "net/ipv4/udp_offload.c udp_gro_receive_segment: ulen > ntohs(uh2->len) (all lines)",
            ShortSegment => "net/ipv4/tcp_offload.c tcp_gro_receive out_check_final: len < mss; udp_gro_receive_segment: ulen != uh2->len (all lines)",
            PshFlag => "net/ipv4/tcp_offload.c tcp_gro_receive out_check_final: flags & PSH (all lines)",
            FinFlag => "net/ipv4/tcp_offload.c tcp_gro_receive out_check_final: flags & FIN (all lines)",
            TableFull => "net/core/gro.c dev_gro_receive -> gro_flush_oldest at MAX_GRO_SKBS (all lines)",
            Timeout => "engine model of net/core/dev.c napi_complete_done / gro_flush_timeout (decision 0002)",
            EndOfInput => "engine model: end of the capture",
            NotIp => "net/core/gro.c dev_gro_receive: no packet_offload for the EtherType (all lines)",
            UnsupportedProtocol => "net/ipv4/af_inet.c inet_gro_receive / ip6_offload.c ipv6_gro_receive: no inet_offloads[proto]; udp_offload.c udp_gro_receive: no UDP GRO socket or feature (all lines)",
            IpOptions => "net/ipv4/af_inet.c inet_gro_receive: *(u8 *)iph != 0x45 (all lines)",
            Fragment => "net/ipv4/af_inet.c inet_gro_receive ip_is_fragment; ip6_offload.c ipv6_gro_receive: no offload for NEXTHDR_FRAGMENT (all lines)",
            BadIpChecksum => "net/ipv4/af_inet.c inet_gro_receive: ip_fast_csum != 0 (all lines)",
            BadChecksum => "net/ipv4/tcp_offload.c tcp4_gro_receive skb_gro_checksum_validate; udp_offload.c udp_gro_receive; gre_offload.c gre_gro_receive (all lines)",
            LengthMismatch => "net/ipv4/af_inet.c inet_gro_receive / ip6_offload.c ipv6_gro_receive: length flush bit, skb passes (all lines)",
            Malformed => "net/ipv4/tcp_offload.c tcp_gro_pull_header / skb_gro_header_slow: header not present (all lines)",
            NoPayload => "net/ipv4/tcp_offload.c tcp_gro_receive out_check_final: len == 0 with mss 1 (all lines)",
            PshAlone => "net/ipv4/tcp_offload.c tcp_gro_receive out_check_final: PSH with no held packet (all lines)",
            FinAlone => "net/ipv4/tcp_offload.c tcp_gro_receive out_check_final: FIN with no held packet (all lines)",
            ControlFlags => "net/ipv4/tcp_offload.c tcp_gro_receive out_check_final: SYN, RST or URG (all lines)",
            CaptureTruncated => "engine model: the capture holds fewer bytes than the packet had",
            Outgoing => "engine model: a packet leaving the host never meets receive offloads (PACKET_OUTGOING)",
            UdpZeroChecksum => "net/ipv4/udp_offload.c udp_gro_receive_segment: !uh->check (all lines)",
            VlanNotOffloaded => "net/8021q/vlan_core.c vlan_gro_receive is registered only with CONFIG_VLAN_8021Q (not on the reference 6.18 build)",
            NestedTunnel => "net/ipv4/af_inet.c ipip_gro_receive, ip6_offload.c sit_ip6ip6_gro_receive, udp_offload.c udp_gro_receive: NAPI_GRO_CB(skb)->encap_mark (all lines)",
            GeneveUnsupported => "drivers/net/geneve.c geneve_gro_receive: gh->ver != GENEVE_VER || gh->oam (all lines)",
            GreUnsupported => "net/ipv4/gre_offload.c gre_gro_receive: greh->flags & ~(GRE_KEY|GRE_CSUM) (all lines)",
        }
    }

    /// True when the reason ends a run that could have gone on (the ones an
    /// operator can fix), as opposed to natural ends (PSH, end of input) and
    /// packets that were never candidates.
    pub fn is_obstacle(self) -> bool {
        use FlushReason::*;
        matches!(
            self,
            CwrSet
                | TcpFlagsChanged
                | WindowChanged
                | HeaderLengthChanged
                | AckChanged
                | TimestampChanged
                | OptionsChanged
                | TtlChanged
                | TosChanged
                | DfChanged
                | IpIdMismatch
                | HopLimitChanged
                | OuterIpIdMismatch
                | OuterTtlChanged
                | OuterTosChanged
                | OuterDfChanged
                | SegmentLarger
                | SequenceBehind
                | SequenceGap
                | IncomingLengthMismatch
                | TableFull
                | BadChecksum
                | LengthMismatch
                | DatagramLarger
        )
    }

    /// True for reasons given to packets GRO never held.
    pub fn is_pass_through(self) -> bool {
        self >= FlushReason::NotIp
    }
}

/// Why a packet GRO completed never reached the stack sound: the kernel
/// line's completion drops or corrupts it ([`super::Delivered::lost`]).
/// Its segments count as lost; a datapath that wants the working
/// behaviour turns the model off ([`super::GroConfig::kernel_losses`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum LossReason {
    /// BIG TCP over an IPv6-outer IP-in-IP or GRE tunnel (ip6ip6, ip4ip6,
    /// ip6gre, ip6gretap): `ipv6_gro_complete` writes the Hop-by-Hop Jumbo
    /// header over the tunnel's header; the completion chain then hits
    /// `WARN_ON(!ops ...)` and the packet is freed (5.19–6.19;
    /// [`super::KernelLine::ipv6_outer_tunnel_loss`]).
    Ipv6TunnelJumboDropped,
    /// BIG TCP over VXLAN or Geneve over IPv6: the Hop-by-Hop Jumbo header
    /// replaces the outer UDP header and the packet goes up mangled, as
    /// UDP GSO (5.19–6.19).
    Ipv6TunnelJumboMangled,
}

impl LossReason {
    /// The short name used in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            LossReason::Ipv6TunnelJumboDropped => "ipv6-tunnel-jumbo-dropped",
            LossReason::Ipv6TunnelJumboMangled => "ipv6-tunnel-jumbo-mangled",
        }
    }

    /// The kernel code that loses the packet.
    pub fn citation(self) -> &'static str {
        match self {
            LossReason::Ipv6TunnelJumboDropped => "net/ipv6/ip6_offload.c ipv6_gro_complete (HBH jumbo insert, 81fbc812132c, 5.19-6.19; WARN_ON(!ops) there or in net/ipv4/af_inet.c inet_gro_complete); fixed by 81be30c1f5f2 (7.0)",
            LossReason::Ipv6TunnelJumboMangled => "net/ipv6/ip6_offload.c ipv6_gro_complete (HBH jumbo over the outer UDP header, 5.19-6.19); net/ipv6/udp_offload.c udp6_gro_complete -> udp_gro_complete_segment; fixed by 81be30c1f5f2 (7.0)",
        }
    }
}

impl fmt::Display for LossReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Display for FlushReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_indices_round_trip() {
        let mut names: Vec<_> = FlushReason::ALL.iter().map(|r| r.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), FlushReason::ALL.len());
        for (i, r) in FlushReason::ALL.iter().enumerate() {
            assert_eq!(r.index(), i);
        }
    }

    #[test]
    fn every_reason_cites_its_kernel_rule() {
        for r in FlushReason::ALL {
            let c = r.citation();
            assert!(
                c.starts_with("engine model") || c.contains(".c ") || c.contains(".h "),
                "{r}: {c}"
            );
        }
    }

    #[test]
    fn pass_through_split_is_where_the_enum_says() {
        assert!(FlushReason::NotIp.is_pass_through());
        assert!(FlushReason::GreUnsupported.is_pass_through());
        assert!(!FlushReason::EndOfInput.is_pass_through());
        assert!(!FlushReason::SequenceGap.is_pass_through());
    }
}
