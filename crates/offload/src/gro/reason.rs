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
    /// UDP tunnel: outer checksum zero vs non-zero mismatch (a different flow in the kernel; listed for completeness).
    OuterChecksumMismatch,

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
    /// The input was already a GSO packet that cannot merge (DODGY or non-TCP).
    GsoInput,
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
        FlushReason::OuterChecksumMismatch,
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
        FlushReason::GsoInput,
        FlushReason::UdpZeroChecksum,
        FlushReason::VlanNotOffloaded,
        FlushReason::NestedTunnel,
        FlushReason::GreUnsupported,
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
            OuterChecksumMismatch => "outer-checksum-mismatch",
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
            GsoInput => "gso-input",
            UdpZeroChecksum => "udp-zero-checksum",
            VlanNotOffloaded => "vlan-not-offloaded",
            NestedTunnel => "nested-tunnel",
            GreUnsupported => "gre-unsupported",
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
                | OuterChecksumMismatch
                | DatagramLarger
        )
    }

    /// True for reasons given to packets GRO never held.
    pub fn is_pass_through(self) -> bool {
        self >= FlushReason::NotIp
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
    fn pass_through_split_is_where_the_enum_says() {
        assert!(FlushReason::NotIp.is_pass_through());
        assert!(FlushReason::GsoInput.is_pass_through());
        assert!(!FlushReason::EndOfInput.is_pass_through());
        assert!(!FlushReason::SequenceGap.is_pass_through());
    }
}
