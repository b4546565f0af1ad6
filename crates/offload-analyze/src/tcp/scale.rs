//! The receive window's scale from the handshake (RFC 7323 section 2):
//! the window field of a SYN or SYN-ACK is never scaled; a direction's
//! later windows are shifted by the scale its own SYN announced, but only
//! when both SYNs carried the option (a host that receives none does not
//! scale). A SYN whose answer was not captured is taken at its word, as
//! Wireshark takes it. Without the direction's SYN the scale is unknown: windows are then
//! the raw field, and the report says so (Wireshark shows "window size
//! scaling factor: -1 (unknown)" for the same case).

use serde::Serialize;

/// What the capture knows about one direction's window scale.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "state", content = "shift")]
pub enum WindowScale {
    /// No SYN of this direction in the capture: raw windows.
    Unknown,
    /// The handshake was seen and does not enable scaling.
    NotUsed,
    /// Both SYNs carried the option: windows are shifted by this.
    Shift(u8),
}

/// What one direction's SYN said: `None` before a SYN was seen, else its
/// window-scale option and whether it was the SYN-ACK.
pub type SynSeen = Option<(Option<u8>, bool)>;

/// The window-scale "option" of a SYN whose options the capture cut
/// before one was found (`editcap -s 64` of a Linux SYN: MSS, SACK
/// permitted and part of the timestamp captured, the scale not): whether
/// it had one is unknown, so the direction's scale is, as tshark shows
/// "window size scaling factor: -1" then. Option values are at most 14.
pub const WSCALE_CUT: u8 = u8::MAX;

/// The scale of the windows sent by the direction whose SYN is `own`,
/// given the peer's SYN `peer`.
pub fn scale_of(own: SynSeen, peer: SynSeen) -> WindowScale {
    match (own, peer) {
        // Either SYN without the option: nobody scales.
        (Some((None, _)), _) | (_, Some((None, _))) => WindowScale::NotUsed,
        // Either SYN cut before its options were read: unknown.
        (Some((Some(WSCALE_CUT), _)), _) | (_, Some((Some(WSCALE_CUT), _))) => WindowScale::Unknown,
        (Some((Some(s), _)), Some((Some(_), _))) => WindowScale::Shift(s),
        // A SYN-ACK with the option answers a SYN that had it; a SYN with
        // the option whose SYN-ACK was not captured (a capture of one
        // direction) is taken at its word, as Wireshark does (the
        // direction's `win_scale` comes from its own SYN; only a peer's
        // SYN without the option cancels it).
        (Some((Some(s), _)), None) => WindowScale::Shift(s),
        // No SYN of this direction.
        _ => WindowScale::Unknown,
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

    #[test]
    fn the_handshake_rules() {
        // Both sides: each direction its own shift.
        assert_eq!(
            scale_of(Some((Some(7), false)), Some((Some(9), true))),
            WindowScale::Shift(7)
        );
        assert_eq!(
            scale_of(Some((Some(9), true)), Some((Some(7), false))),
            WindowScale::Shift(9)
        );
        // One side without the option: neither scales.
        assert_eq!(
            scale_of(Some((Some(7), false)), Some((None, true))),
            WindowScale::NotUsed
        );
        assert_eq!(
            scale_of(Some((None, true)), Some((Some(7), false))),
            WindowScale::NotUsed
        );
        // A SYN-ACK with the option implies the SYN had it.
        assert_eq!(scale_of(Some((Some(9), true)), None), WindowScale::Shift(9));
        // A SYN alone is taken at its word (as Wireshark does); no SYN of
        // this direction: unknown.
        assert_eq!(
            scale_of(Some((Some(7), false)), None),
            WindowScale::Shift(7)
        );
        assert_eq!(scale_of(None, None), WindowScale::Unknown);
        assert_eq!(scale_of(None, Some((Some(7), false))), WindowScale::Unknown);
        // The SYN's own window is never scaled.
        assert_eq!(WindowScale::Shift(7).apply(64240, true), 64240);
        assert_eq!(WindowScale::Shift(7).apply(509, false), 509 << 7);
        assert_eq!(WindowScale::Unknown.apply(509, false), 509);
        // A SYN whose options the capture cut: unknown, unless the other
        // SYN had no option (then nobody scales).
        let cut = Some((Some(WSCALE_CUT), false));
        assert_eq!(scale_of(cut, Some((Some(7), true))), WindowScale::Unknown);
        assert_eq!(scale_of(Some((Some(7), true)), cut), WindowScale::Unknown);
        assert_eq!(scale_of(cut, None), WindowScale::Unknown);
        assert_eq!(scale_of(cut, Some((None, true))), WindowScale::NotUsed);
    }
}
