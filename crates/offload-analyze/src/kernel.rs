//! The kernel line whose GRO the what-if runs: the engine's
//! [`KernelLine`], with its predicates (IP-ID rule, IPv4 BIG TCP, BIG TCP
//! over IPv6-outer tunnels), so analyze has no rules of its own. What is
//! here is analyze's vocabulary around it: which lines were checked live,
//! and the serde names of the line and of an IP ID pattern in the report.

use offload::gro::{IpIdPattern, KernelLine};

/// The engine's rules for this line were compared with a live kernel:
/// 6.18 on the host, 6.1 and 6.12 booted in a VM (decision 0072,
/// `crates/offload-conformance/tests/kernel_lines.rs`); 7.x follows its
/// sources.
pub fn verified_live(line: KernelLine) -> bool {
    line != KernelLine::V7
}

/// Parses `--kernel`: exactly the names `offload gro --kernel` takes.
pub fn parse_line(s: &str) -> Result<KernelLine, String> {
    KernelLine::parse(s)
        .ok_or_else(|| format!("`{s}` is not a kernel line (6.1, 6.12, 6.18 or 7.x)"))
}

/// Serialises a line as its name (`"6.18"`).
pub fn serialize_line<S: serde::Serializer>(line: &KernelLine, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(line.name())
}

/// The JSON name of an ID pattern (`"incrementing-per-flow"`).
pub fn pattern_key(p: IpIdPattern) -> &'static str {
    match p {
        IpIdPattern::IncrementingPerFlow => "incrementing-per-flow",
        IpIdPattern::GlobalCounter => "global-counter",
        IpIdPattern::FixedZero => "fixed-zero",
        IpIdPattern::Fixed => "fixed",
        IpIdPattern::Random => "random",
        _ => "not-applicable",
    }
}

/// Serialises an ID pattern by [`pattern_key`].
pub fn serialize_pattern<S: serde::Serializer>(p: &IpIdPattern, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(pattern_key(*p))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::whatif::config_for;

    #[test]
    fn lines_parse_as_the_engine_names_and_only_7_is_unverified() {
        for l in KernelLine::ALL {
            assert_eq!(parse_line(l.name()), Ok(l));
        }
        assert_eq!(parse_line("7"), Ok(KernelLine::V7));
        assert!(parse_line("5.4").is_err());
        assert!(parse_line("6.6").is_err());
        assert!(verified_live(KernelLine::V6_18));
        assert!(verified_live(KernelLine::V6_12));
        assert!(!verified_live(KernelLine::V7));
    }

    #[test]
    fn the_what_if_takes_ipv4_big_tcp_from_the_line() {
        use KernelLine::*;
        assert_eq!(
            config_for(185000, V6_1, true, &[], 50_000).gro_ipv4_max_size,
            65536
        );
        assert_eq!(
            config_for(185000, V6_18, true, &[], 50_000).gro_ipv4_max_size,
            185000
        );
        assert_eq!(config_for(185000, V6_12, true, &[], 50_000).kernel, V6_12);
    }
}
