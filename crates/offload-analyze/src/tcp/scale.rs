//! The receive window's scale from the handshake (RFC 7323 section 2):
//! the window field of a SYN or SYN-ACK is never scaled; a direction's
//! later windows are shifted by the scale its own SYN announced, but only
//! when both SYNs carried the option (a host that receives none does not
//! scale). Without the direction's SYN the scale is unknown: windows are
//! then the raw field, and the report says so (Wireshark shows "window
//! size scaling factor: -1 (unknown)" for the same case).
//!
//! Repeated and odd handshakes (a SYN resent without the option, a SYN-ACK
//! before its SYN, options cut by the snap length) follow Wireshark's state
//! machine, so the windows equal tshark's: `dissect_tcpopt_wscale` stores a
//! SYN's option, `verify_tcp_window_scaling` then cancels scaling only when
//! the direction never announced one (epan/dissectors/packet-tcp.c,
//! Wireshark 4.0). Deliberate difference: a window-scale option in a
//! segment without SYN is ignored, as RFC 7323 section 2.2 says and Linux
//! does (`tcp_parse_options` in net/ipv4/tcp_input.c reads it only when
//! `th->syn`); Wireshark would store it.

use serde::Serialize;

/// What the capture knows about one direction's window scale.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "state", content = "shift")]
pub enum WindowScale {
    /// No SYN of this direction in the capture: raw windows.
    #[default]
    Unknown,
    /// The handshake was seen and does not enable scaling.
    NotUsed,
    /// Both SYNs carried the option: windows are shifted by this.
    Shift(u8),
}

/// The window-scale "option" of a SYN whose options the capture cut
/// before one was found (`editcap -s 64` of a Linux SYN: MSS, SACK
/// permitted and part of the timestamp captured, the scale not): whether
/// it had one is unknown, so the direction's scale is, as tshark shows
/// "window size scaling factor: -1" then. Option values are at most 14.
pub const WSCALE_CUT: u8 = u8::MAX;

/// A SYN's (or SYN-ACK's, `synack`) effect on the scales of its own
/// direction and of the peer, given its window-scale `option`.
/// Wireshark's order: the option, when present, becomes the direction's
/// shift; then a direction that never announced one turns scaling off for
/// both, and a SYN-ACK answering a SYN without the option turns off its
/// own. A SYN whose options the capture cut ([`WSCALE_CUT`]) changes
/// nothing: tshark stops dissecting it at the cut, before either step.
pub fn on_syn(own: &mut WindowScale, peer: &mut WindowScale, option: Option<u8>, synack: bool) {
    match option {
        Some(WSCALE_CUT) => return,
        Some(shift) => *own = WindowScale::Shift(shift),
        None => {}
    }
    if *own == WindowScale::Unknown {
        *own = WindowScale::NotUsed;
        *peer = WindowScale::NotUsed;
    } else if synack && *peer == WindowScale::NotUsed {
        *own = WindowScale::NotUsed;
    }
}

impl WindowScale {
    /// The window in bytes of a segment's window field.
    #[inline]
    pub fn apply(self, raw: u16, syn: bool) -> u32 {
        match self {
            WindowScale::Shift(s) if !syn => (raw as u32) << s.min(14),
            _ => raw as u32,
        }
    }

    pub fn known(self) -> bool {
        self != WindowScale::Unknown
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The scales after the SYNs `syns` (sender is direction 0 or 1,
    /// option, SYN-ACK), in order.
    fn after(syns: &[(usize, Option<u8>, bool)]) -> [WindowScale; 2] {
        let mut scales = [WindowScale::Unknown; 2];
        for &(dir, option, synack) in syns {
            let [a, b] = &mut scales;
            let (own, peer) = if dir == 0 { (a, b) } else { (b, a) };
            on_syn(own, peer, option, synack);
        }
        scales
    }

    #[test]
    fn the_handshake_rules() {
        use WindowScale::*;
        // Both sides: each direction its own shift.
        assert_eq!(
            after(&[(0, Some(7), false), (1, Some(9), true)]),
            [Shift(7), Shift(9)]
        );
        // One side without the option: neither scales.
        assert_eq!(
            after(&[(0, Some(7), false), (1, None, true)]),
            [NotUsed, NotUsed]
        );
        assert_eq!(
            after(&[(0, None, false), (1, Some(7), true)]),
            [NotUsed, NotUsed]
        );
        // A SYN-ACK alone or a SYN alone is taken at its word (as
        // Wireshark takes it); the other direction stays unknown.
        assert_eq!(after(&[(1, Some(9), true)]), [Unknown, Shift(9)]);
        assert_eq!(after(&[(0, Some(7), false)]), [Shift(7), Unknown]);
        assert_eq!(after(&[]), [Unknown, Unknown]);
        // The SYN's own window is never scaled.
        assert_eq!(Shift(7).apply(64240, true), 64240);
        assert_eq!(Shift(7).apply(509, false), 509 << 7);
        assert_eq!(Unknown.apply(509, false), 509);
    }

    #[test]
    fn repeated_and_odd_handshakes_follow_wireshark() {
        use WindowScale::*;
        // A SYN resent without the option after one with it keeps the
        // shift (Suricata's tests/tcp-fastopen-10-syn-data-ignore: tshark
        // scales both directions).
        assert_eq!(
            after(&[
                (0, Some(5), false),
                (1, Some(8), true),
                (0, None, false),
                (1, Some(8), true)
            ]),
            [Shift(5), Shift(8)]
        );
        // A SYN-ACK without the option seen before its SYN: scaling off for
        // both, then the SYN's option is stored for its own direction.
        assert_eq!(
            after(&[(1, None, true), (0, Some(7), false)]),
            [Shift(7), NotUsed]
        );
        // A SYN with the option after one without: its own direction
        // scales, the peer's stays off.
        assert_eq!(
            after(&[(0, None, false), (0, Some(7), false)]),
            [Shift(7), NotUsed]
        );
    }

    #[test]
    fn a_cut_syn_changes_nothing() {
        use WindowScale::*;
        let cut = Some(WSCALE_CUT);
        assert_eq!(
            after(&[(0, cut, false), (1, Some(7), true)]),
            [Unknown, Shift(7)]
        );
        assert_eq!(
            after(&[(0, Some(7), false), (1, cut, true)]),
            [Shift(7), Unknown]
        );
        assert_eq!(after(&[(0, cut, false)]), [Unknown, Unknown]);
        assert_eq!(
            after(&[(0, cut, false), (1, None, true)]),
            [NotUsed, NotUsed]
        );
    }
}
