//! Options shared by `offload gro`, `gso` and `analyze`: one definition of
//! each range and default, so that the three commands agree.

use offload::gro::GRO_MAX_SIZE;

use offload::wire::vxlan;

/// The path MTU assumed unless `--mtu` says otherwise.
pub const DEFAULT_MTU: u32 = 1500;

/// `--vxlan-port` and `--strict`, flattened into each capture command.
#[derive(Debug, Clone, clap::Args)]
pub struct CaptureOpts {
    /// UDP destination ports read as VXLAN (comma-separated or repeated;
    /// default 4789,8472; `0` for none).
    #[arg(long = "vxlan-port", value_name = "PORT", value_delimiter = ',')]
    pub vxlan_ports: Vec<u16>,
    /// Stop at a frame whose captured length exceeds the file's snapshot
    /// length (by default such frames are read and counted, as tshark does).
    #[arg(long)]
    pub strict: bool,
}

impl CaptureOpts {
    /// The VXLAN ports to use: the default when none is given, none for `0`.
    pub fn vxlan_ports(&self) -> Vec<u16> {
        if self.vxlan_ports.is_empty() {
            vxlan::DEFAULT_PORTS.to_vec()
        } else {
            self.vxlan_ports
                .iter()
                .copied()
                .filter(|p| *p != 0)
                .collect()
        }
    }
}

/// A `gro_max_size` / `gro_ipv4_max_size`: 1 to the kernel's GRO_MAX_SIZE
/// (524280, include/linux/netdevice.h since 5.19), as `ip link` accepts.
pub fn parse_gro_size(s: &str) -> Result<u32, String> {
    let v: u32 = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a byte count (a whole number, e.g. 65536)"))?;
    if !(1..=GRO_MAX_SIZE).contains(&v) {
        return Err(format!(
            "{v} is outside 1..={GRO_MAX_SIZE} (the kernel's GRO_MAX_SIZE)"
        ));
    }
    Ok(v)
}

/// An MTU: 68 (IPv4's minimum, RFC 791) to 65535 (the IPv4 length field).
pub fn parse_mtu(s: &str) -> Result<u32, String> {
    let v: u32 = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not an MTU in bytes (e.g. 1500 or 9000)"))?;
    if !(68..=65535).contains(&v) {
        return Err(format!("{v} is outside 68..=65535"));
    }
    Ok(v)
}

/// A segment size (`--mss`): 1 to 65535.
pub fn parse_mss(s: &str) -> Result<u32, String> {
    let v: u32 = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a segment size in bytes (e.g. 1448)"))?;
    if !(1..=65535).contains(&v) {
        return Err(format!("{v} is outside 1..=65535"));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_library_defaults_agree_with_the_cli() {
        assert_eq!(
            vxlan::DEFAULT_PORTS.to_vec(),
            offload::GroConfig::default().vxlan_ports
        );
        assert_eq!(
            vxlan::DEFAULT_PORTS.to_vec(),
            offload_transform::GsoOptions::default().vxlan_ports
        );
        assert_eq!(DEFAULT_MTU, offload_transform::GsoOptions::default().mtu);
        assert_eq!(DEFAULT_MTU, offload_analyze::Options::default().mtu);
    }

    #[test]
    fn ranges() {
        assert!(parse_gro_size("0").is_err());
        assert_eq!(parse_gro_size("524280"), Ok(GRO_MAX_SIZE));
        assert!(parse_gro_size("524281").is_err());
        assert!(parse_mtu("67").is_err() && parse_mtu("65536").is_err());
        assert_eq!(parse_mtu("9000"), Ok(9000));
        assert!(parse_mss("0").is_err() && parse_mss("x").is_err());
    }
}
