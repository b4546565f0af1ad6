//! `TUNSETOFFLOAD` negotiation.
//!
//! The offload bits say what the *user* side accepts from the kernel
//! (kernel → user GSO and partial checksums); user → kernel GSO writes are
//! accepted whatever was set. The kernel's `set_offload()` (drivers/net/tun.c)
//! honours nothing without `TUN_F_CSUM`, takes `TUN_F_TSO_ECN` only with
//! TSO4 or TSO6, takes USO only when both USO4 and USO6 are set, and fails
//! with `EINVAL` when a bit is left over that it does not know: that is how
//! a kernel without USO (before 6.2) says no. [`negotiate`] normalises the
//! request to shapes the kernel can accept, then drops features one step at
//! a time on `EINVAL`, and records every attempt.

use core::fmt;
use std::io;

use offload_sys::tun::offload::{
    TUN_F_CSUM, TUN_F_TSO4, TUN_F_TSO6, TUN_F_TSO_ECN, TUN_F_USO4, TUN_F_USO6,
};

/// A set of `TUN_F_*` offload bits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Offloads(u32);

impl Offloads {
    /// Nothing: plain packets, complete checksums.
    pub const NONE: Offloads = Offloads(0);
    /// `TUN_F_CSUM`: partial checksums (`NEEDS_CSUM`).
    pub const CSUM: Offloads = Offloads(TUN_F_CSUM);
    /// `TUN_F_TSO4`.
    pub const TSO4: Offloads = Offloads(TUN_F_TSO4);
    /// `TUN_F_TSO6`.
    pub const TSO6: Offloads = Offloads(TUN_F_TSO6);
    /// `TUN_F_TSO_ECN`: TSO super-packets with CWR.
    pub const TSO_ECN: Offloads = Offloads(TUN_F_TSO_ECN);
    /// `TUN_F_USO4` (6.2+).
    pub const USO4: Offloads = Offloads(TUN_F_USO4);
    /// `TUN_F_USO6` (6.2+).
    pub const USO6: Offloads = Offloads(TUN_F_USO6);
    /// Everything this crate can take from the kernel.
    pub const ALL: Offloads =
        Offloads(TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_TSO_ECN | TUN_F_USO4 | TUN_F_USO6);

    /// From raw `TUN_F_*` bits; unknown bits are dropped (tunnel GSO needs
    /// the 24-byte header, which this crate does not speak).
    pub const fn from_bits(bits: u32) -> Offloads {
        Offloads(bits & Self::ALL.0)
    }

    /// The raw bits.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// True when every bit of `other` is set.
    pub const fn contains(self, other: Offloads) -> bool {
        self.0 & other.0 == other.0
    }

    /// True when no bit is set.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Union.
    pub const fn union(self, other: Offloads) -> Offloads {
        Offloads(self.0 | other.0)
    }

    /// `self` without the bits of `other`.
    pub const fn without(self, other: Offloads) -> Offloads {
        Offloads(self.0 & !other.0)
    }

    /// True when any GSO type is granted (the reader may see super-packets).
    pub const fn any_gso(self) -> bool {
        self.0 & (TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_USO4 | TUN_F_USO6) != 0
    }

    /// The request reshaped to what `set_offload()` can accept: nothing
    /// without CSUM, TSO_ECN only with some TSO, USO only as a pair.
    pub const fn normalised(self) -> Offloads {
        let mut b = self.0 & Self::ALL.0;
        if b & Self::CSUM.0 == 0 {
            return Offloads::NONE;
        }
        if b & (Self::TSO4.0 | Self::TSO6.0) == 0 {
            b &= !Self::TSO_ECN.0;
        }
        if b & (Self::USO4.0 | Self::USO6.0) != (Self::USO4.0 | Self::USO6.0) {
            b &= !(Self::USO4.0 | Self::USO6.0);
        }
        Offloads(b)
    }
}

impl fmt::Debug for Offloads {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for Offloads {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("none");
        }
        let names = [
            (Self::CSUM, "csum"),
            (Self::TSO4, "tso4"),
            (Self::TSO6, "tso6"),
            (Self::TSO_ECN, "tso_ecn"),
            (Self::USO4, "uso4"),
            (Self::USO6, "uso6"),
        ];
        let mut first = true;
        for (bit, name) in names {
            if self.contains(bit) {
                if !first {
                    f.write_str("|")?;
                }
                f.write_str(name)?;
                first = false;
            }
        }
        Ok(())
    }
}

/// The outcome of a negotiation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Negotiation {
    /// What the caller asked for.
    pub requested: Offloads,
    /// What the kernel accepted (the last successful `TUNSETOFFLOAD`).
    pub granted: Offloads,
    /// Every `TUNSETOFFLOAD` tried, in order, with the errno of refusals.
    pub attempts: Vec<(Offloads, Option<i32>)>,
}

/// Tries `requested` and then smaller sets, calling `set` (the ioctl) for
/// each, until one is accepted. The fallback order drops the newest
/// features first: USO (6.2), then TSO_ECN, then TSO6, then TSO4, then
/// CSUM, ending with `NONE`, which every kernel accepts. Only `EINVAL` means
/// "not supported"; any other error is returned as is.
pub fn negotiate(
    requested: Offloads,
    mut set: impl FnMut(Offloads) -> io::Result<()>,
) -> io::Result<Negotiation> {
    let mut candidates = Vec::new();
    let mut cur = requested.normalised();
    candidates.push(cur);
    for drop in [
        Offloads::USO4.union(Offloads::USO6),
        Offloads::TSO_ECN,
        Offloads::TSO6,
        Offloads::TSO4,
        Offloads::CSUM,
    ] {
        let next = cur.without(drop).normalised();
        if next != cur {
            candidates.push(next);
            cur = next;
        }
    }
    if cur != Offloads::NONE {
        candidates.push(Offloads::NONE);
    }
    let mut attempts = Vec::new();
    for c in candidates {
        match set(c) {
            Ok(()) => {
                attempts.push((c, None));
                return Ok(Negotiation {
                    requested,
                    granted: c,
                    attempts,
                });
            }
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                attempts.push((c, Some(libc::EINVAL)));
            }
            Err(e) => return Err(e),
        }
    }
    // Even NONE was refused with EINVAL: not a TUN fd we understand.
    Err(io::Error::from_raw_os_error(libc::EINVAL))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake `set_offload()` of a kernel that knows only `known` bits and
    /// applies the kernel's pairing rules.
    fn kernel(known: u32) -> impl FnMut(Offloads) -> io::Result<()> {
        move |o: Offloads| {
            let mut b = o.bits();
            if b & 0x01 != 0 {
                b &= !0x01;
                if b & 0x06 != 0 {
                    b &= !0x0e;
                }
                if b & 0x60 == 0x60 && known & 0x60 == 0x60 {
                    b &= !0x60;
                }
            }
            if b != 0 || o.bits() & !known != 0 {
                Err(io::Error::from_raw_os_error(libc::EINVAL))
            } else {
                Ok(())
            }
        }
    }

    #[test]
    fn modern_kernel_grants_everything_at_once() {
        let n = negotiate(Offloads::ALL, kernel(0x7f)).unwrap();
        assert_eq!(n.granted, Offloads::ALL);
        assert_eq!(n.attempts.len(), 1);
    }

    #[test]
    fn kernel_without_uso_falls_back_to_tso() {
        let n = negotiate(Offloads::ALL, kernel(0x0f)).unwrap();
        assert_eq!(n.granted.bits(), 0x0f);
        assert_eq!(
            n.attempts,
            vec![
                (Offloads::ALL, Some(libc::EINVAL)),
                (Offloads::from_bits(0x0f), None)
            ]
        );
    }

    #[test]
    fn kernel_without_tso_ecn_keeps_tso() {
        let n = negotiate(Offloads::ALL, kernel(0x07)).unwrap();
        assert_eq!(n.granted.bits(), 0x07);
    }

    #[test]
    fn kernel_with_csum_only() {
        let n = negotiate(Offloads::ALL, kernel(0x01)).unwrap();
        assert_eq!(n.granted, Offloads::CSUM);
        assert_eq!(n.attempts.last(), Some(&(Offloads::CSUM, None)));
    }

    #[test]
    fn nothing_without_csum() {
        let req = Offloads::TSO4.union(Offloads::TSO6);
        assert_eq!(req.normalised(), Offloads::NONE);
        let n = negotiate(req, kernel(0x7f)).unwrap();
        assert_eq!(n.granted, Offloads::NONE);
    }

    #[test]
    fn uso_only_as_a_pair_and_ecn_only_with_tso() {
        let req = Offloads::CSUM
            .union(Offloads::USO4)
            .union(Offloads::TSO_ECN);
        assert_eq!(req.normalised(), Offloads::CSUM);
    }

    #[test]
    fn other_errors_are_not_fallbacks() {
        let e = negotiate(Offloads::ALL, |_| {
            Err(io::Error::from_raw_os_error(libc::EBADF))
        })
        .unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EBADF));
    }

    #[test]
    fn display_names_bits() {
        assert_eq!(
            Offloads::ALL.to_string(),
            "csum|tso4|tso6|tso_ecn|uso4|uso6"
        );
        assert_eq!(Offloads::NONE.to_string(), "none");
    }
}
