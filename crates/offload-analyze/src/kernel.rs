//! Kernel eras of GRO: which header states each kernel line merges.
//!
//! The what-if runs the engine with the profile's [`KernelLine`]
//! (`offload::gro::profile`), which chooses every rule that changed
//! between the lines per packet. [`KernelProfile::ids_mergeable`] remains
//! for the findings' wording (which advice fits which line); it is not
//! applied to the figures.

use offload::gro::KernelLine;
use serde::Serialize;
use std::fmt;
use std::str::FromStr;

/// How a header's IPv4 IDs move from packet to packet within a flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum IdPattern {
    /// Each packet's ID is the previous one plus its segment count.
    IncrementingPerFlow,
    /// IDs go up by varying small steps: a counter shared with other flows.
    GlobalCounter,
    /// Always 0.
    FixedZero,
    /// Always the same non-zero value.
    Fixed,
    /// No order.
    Random,
    /// IPv6 (no ID) or too few packets to say.
    NotApplicable,
}

impl IdPattern {
    pub fn name(self) -> &'static str {
        match self {
            IdPattern::IncrementingPerFlow => "incrementing per flow",
            IdPattern::GlobalCounter => "global counter",
            IdPattern::FixedZero => "fixed zero",
            IdPattern::Fixed => "fixed",
            IdPattern::Random => "random",
            IdPattern::NotApplicable => "n/a",
        }
    }
}

/// The kernel whose GRO rules the what-if applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum KernelProfile {
    #[serde(rename = "6.1")]
    V6_1,
    #[serde(rename = "6.12")]
    V6_12,
    #[serde(rename = "6.18")]
    V6_18,
    #[serde(rename = "7.x")]
    V7,
}

impl KernelProfile {
    pub const ALL: [KernelProfile; 4] = [
        KernelProfile::V6_1,
        KernelProfile::V6_12,
        KernelProfile::V6_18,
        KernelProfile::V7,
    ];

    pub fn name(self) -> &'static str {
        match self {
            KernelProfile::V6_1 => "6.1",
            KernelProfile::V6_12 => "6.12",
            KernelProfile::V6_18 => "6.18",
            KernelProfile::V7 => "7.x",
        }
    }

    /// The engine's kernel line.
    pub fn engine_line(self) -> KernelLine {
        match self {
            KernelProfile::V6_1 => KernelLine::V6_1,
            KernelProfile::V6_12 => KernelLine::V6_12,
            KernelProfile::V6_18 => KernelLine::V6_18,
            KernelProfile::V7 => KernelLine::V7,
        }
    }

    /// The engine's profile was compared with a live kernel of this line:
    /// 6.18 on the host, 6.1 and 6.12 booted in a VM (decision 0072,
    /// `crates/offload-conformance/tests/kernel_lines.rs`).
    pub fn verified_live(self) -> bool {
        self != KernelProfile::V7
    }

    /// IP ID rule before 6.18: a fixed ID is accepted only with DF set,
    /// and a tunnel's outer header with DF set is not checked
    /// (`inet_gro_flush` up to 6.17; the `flush_id` logic before 6.10).
    fn legacy_ip_id(self) -> bool {
        matches!(self, KernelProfile::V6_1 | KernelProfile::V6_12)
    }

    /// IPv4 BIG TCP (`gro_ipv4_max_size`) arrived in 6.3.
    pub fn ipv4_big_tcp(self) -> bool {
        self != KernelProfile::V6_1
    }

    /// Whether a header with this DF state and ID pattern lets GRO merge.
    /// `outer` is the outer header of a tunnel.
    pub fn ids_mergeable(self, pattern: IdPattern, df_set: bool, outer: bool) -> bool {
        use IdPattern::*;
        match pattern {
            IncrementingPerFlow | NotApplicable => true,
            Fixed | FixedZero => !self.legacy_ip_id() || df_set,
            GlobalCounter | Random => self.legacy_ip_id() && outer && df_set,
        }
    }
}

impl fmt::Display for KernelProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl From<KernelLine> for KernelProfile {
    fn from(line: KernelLine) -> Self {
        match line {
            KernelLine::V6_1 => KernelProfile::V6_1,
            KernelLine::V6_12 => KernelProfile::V6_12,
            KernelLine::V6_18 => KernelProfile::V6_18,
            KernelLine::V7 => KernelProfile::V7,
        }
    }
}

/// Exactly the names `offload gro --kernel` takes (`KernelLine::parse`).
impl FromStr for KernelProfile {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        KernelLine::parse(s)
            .map(KernelProfile::from)
            .ok_or_else(|| format!("`{s}` is not a kernel line (6.1, 6.12, 6.18 or 7.x)"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::whatif::config_for;

    #[test]
    fn profiles_parse_as_the_engine_lines_and_only_7_is_unverified() {
        for p in KernelProfile::ALL {
            assert_eq!(p.name().parse::<KernelProfile>(), Ok(p));
            assert_eq!(KernelProfile::from(p.engine_line()), p);
            assert_eq!(p.engine_line().name(), p.name());
        }
        assert_eq!("7".parse::<KernelProfile>(), Ok(KernelProfile::V7));
        assert!("5.4".parse::<KernelProfile>().is_err());
        assert!("6.6".parse::<KernelProfile>().is_err());
        assert!(KernelProfile::V6_18.verified_live());
        assert!(KernelProfile::V6_12.verified_live());
        assert!(!KernelProfile::V7.verified_live());
    }

    #[test]
    fn ip_id_rules_follow_the_reference_eras() {
        use KernelProfile::*;
        // 6.18: fixed IDs merge whatever DF says; random never.
        assert!(V6_18.ids_mergeable(IdPattern::Fixed, false, true));
        assert!(!V6_18.ids_mergeable(IdPattern::Random, true, true));
        // Before 6.10: fixed needs DF; an outer header with DF is not checked.
        assert!(!V6_12.ids_mergeable(IdPattern::FixedZero, false, false));
        assert!(V6_12.ids_mergeable(IdPattern::FixedZero, true, false));
        assert!(V6_1.ids_mergeable(IdPattern::Random, true, true));
        assert!(!V6_1.ids_mergeable(IdPattern::Random, true, false));
        assert!(!V6_1.ipv4_big_tcp() && V6_12.ipv4_big_tcp());
        assert_eq!(config_for(185000, V6_1, true, &[]).gro_ipv4_max_size, 65536);
        assert_eq!(
            config_for(185000, V6_18, true, &[]).gro_ipv4_max_size,
            185000
        );
    }
}
