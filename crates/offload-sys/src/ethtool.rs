//! ethtool features (`rx-gro`, `rx-udp-gro-forwarding`, `rx-gro-list`, ...)
//! through the `SIOCETHTOOL` ioctl.
//!
//! The legacy ioctl is used rather than the ethtool generic-netlink family
//! because three fixed-layout commands cover everything the lab needs
//! (`ETHTOOL_GSTRINGS` for the feature names, `ETHTOOL_GFEATURES`,
//! `ETHTOOL_SFEATURES`) and it needs no family-id resolution
//! (docs/decisions/0020-netlink-and-syscall-crates.md). Like every socket,
//! an [`Ethtool`] handle acts on the namespace it was created in.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::error::{Error, Result};
use crate::rtnl::check_ifname;

const SIOCETHTOOL: libc::c_ulong = 0x8946;
const ETHTOOL_GDRVINFO: u32 = 0x03;
const ETHTOOL_GSTRINGS: u32 = 0x1b;
const ETHTOOL_GCHANNELS: u32 = 0x3c;
const ETHTOOL_GSSET_INFO: u32 = 0x37;
const ETHTOOL_GFEATURES: u32 = 0x3a;
const ETHTOOL_SFEATURES: u32 = 0x3b;
const ETH_SS_FEATURES: u32 = 4;
const ETH_GSTRING_LEN: usize = 32;

/// `struct ifreq` with the `ifr_data` pointer member.
#[repr(C)]
struct IfReqData {
    name: [u8; libc::IFNAMSIZ],
    data: *mut libc::c_void,
    _pad: [u8; 16],
}

/// One feature's state as `ethtool -k` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Feature {
    /// Feature name, e.g. `"rx-gro"`.
    pub name: String,
    /// Currently on.
    pub active: bool,
    /// Requested on (may differ from `active` when dependencies forbid it).
    pub requested: bool,
    /// The device allows changing it.
    pub changeable: bool,
}

/// Queue counts as `ethtool -l` shows them (`struct ethtool_channels`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Channels {
    /// Maximum RX-only channels.
    pub max_rx: u32,
    /// Maximum TX-only channels.
    pub max_tx: u32,
    /// Maximum combined channels.
    pub max_combined: u32,
    /// Current RX-only channels.
    pub rx: u32,
    /// Current TX-only channels.
    pub tx: u32,
    /// Current combined channels.
    pub combined: u32,
}

/// An ioctl socket for ethtool requests in one namespace.
#[derive(Debug)]
pub struct Ethtool {
    sock: OwnedFd,
}

impl Ethtool {
    /// Opens a control socket in the calling thread's network namespace.
    pub fn open() -> Result<Self> {
        // SAFETY: socket(2) with constant arguments; the fd is checked and
        // owned exactly once.
        let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(Error::last_os("socket(AF_INET, SOCK_DGRAM) for ethtool"));
        }
        // SAFETY: `raw` is a fresh, valid fd that nothing else owns.
        let sock = unsafe { OwnedFd::from_raw_fd(raw) };
        Ok(Ethtool { sock })
    }

    /// Issues one `SIOCETHTOOL` command; `buf` starts with the command word.
    fn ioctl(&self, dev: &str, buf: &mut [u8], what: &str) -> Result<libc::c_int> {
        check_ifname(dev)?;
        let mut req = IfReqData {
            name: [0; libc::IFNAMSIZ],
            data: buf.as_mut_ptr().cast(),
            _pad: [0; 16],
        };
        req.name[..dev.len()].copy_from_slice(dev.as_bytes());
        // SAFETY: SIOCETHTOOL reads the ifreq, then copies the command
        // structure in and out of `buf` through `ifr_data`; every caller
        // sizes `buf` for the structure and element count it declares, and
        // both `req` and `buf` outlive the call. The kernel uses
        // copy_from_user/copy_to_user, so alignment does not matter.
        let r = unsafe {
            libc::ioctl(
                self.sock.as_raw_fd(),
                SIOCETHTOOL,
                &mut req as *mut IfReqData,
            )
        };
        if r < 0 {
            return Err(Error::last_os(format!("SIOCETHTOOL {what} on {dev}")));
        }
        Ok(r)
    }

    /// Names of the device's features, in bit order.
    pub fn feature_names(&self, dev: &str) -> Result<Vec<String>> {
        // struct ethtool_sset_info { u32 cmd; u32 reserved; u64 sset_mask; u32 data[]; }
        let mut info = vec![0u8; 24];
        put_u32(&mut info, 0, ETHTOOL_GSSET_INFO);
        info[8..16].copy_from_slice(&(1u64 << ETH_SS_FEATURES).to_ne_bytes());
        self.ioctl(dev, &mut info, "ETHTOOL_GSSET_INFO")?;
        let mask = u64::from_ne_bytes(info[8..16].try_into().unwrap_or([0; 8]));
        if mask & (1 << ETH_SS_FEATURES) == 0 {
            return Ok(Vec::new());
        }
        let count = get_u32(&info, 16) as usize;
        // struct ethtool_gstrings { u32 cmd; u32 string_set; u32 len; u8 data[]; }
        let mut strings = vec![0u8; 12 + count * ETH_GSTRING_LEN];
        put_u32(&mut strings, 0, ETHTOOL_GSTRINGS);
        put_u32(&mut strings, 4, ETH_SS_FEATURES);
        put_u32(&mut strings, 8, count as u32);
        self.ioctl(dev, &mut strings, "ETHTOOL_GSTRINGS features")?;
        let got = (get_u32(&strings, 8) as usize).min(count);
        Ok((0..got)
            .map(|i| {
                let raw = &strings[12 + i * ETH_GSTRING_LEN..12 + (i + 1) * ETH_GSTRING_LEN];
                let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
                String::from_utf8_lossy(&raw[..end]).into_owned()
            })
            .collect())
    }

    /// Every feature of the device with its state (`ethtool -k`).
    pub fn features(&self, dev: &str) -> Result<Vec<Feature>> {
        let names = self.feature_names(dev)?;
        let blocks = names.len().div_ceil(32);
        // struct ethtool_gfeatures { u32 cmd; u32 size; struct { u32 available,
        // requested, active, never_changed; } features[size]; }
        let mut buf = vec![0u8; 8 + blocks * 16];
        put_u32(&mut buf, 0, ETHTOOL_GFEATURES);
        put_u32(&mut buf, 4, blocks as u32);
        self.ioctl(dev, &mut buf, "ETHTOOL_GFEATURES")?;
        Ok(names
            .into_iter()
            .enumerate()
            .map(|(i, name)| {
                let (block, bit) = (i / 32, 1u32 << (i % 32));
                let base = 8 + block * 16;
                Feature {
                    name,
                    changeable: get_u32(&buf, base) & bit != 0,
                    requested: get_u32(&buf, base + 4) & bit != 0,
                    active: get_u32(&buf, base + 8) & bit != 0,
                }
            })
            .collect())
    }

    /// The driver's name (`ethtool -i`), e.g. `"veth"`, `"virtio_net"`.
    pub fn driver(&self, dev: &str) -> Result<String> {
        // struct ethtool_drvinfo { u32 cmd; char driver[32]; char version[32];
        // char fw_version[32]; char bus_info[32]; char erom_version[32];
        // char reserved2[12]; u32 n_priv_flags, n_stats, testinfo_len,
        // eedump_len, regdump_len; } = 196 bytes.
        let mut buf = vec![0u8; 196];
        put_u32(&mut buf, 0, ETHTOOL_GDRVINFO);
        self.ioctl(dev, &mut buf, "ETHTOOL_GDRVINFO")?;
        let raw = &buf[4..36];
        let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
        Ok(String::from_utf8_lossy(&raw[..end]).into_owned())
    }

    /// Channel (queue) counts (`ethtool -l`); `EOPNOTSUPP` for devices
    /// without channels.
    pub fn channels(&self, dev: &str) -> Result<Channels> {
        // struct ethtool_channels { u32 cmd, max_rx, max_tx, max_other,
        // max_combined, rx_count, tx_count, other_count, combined_count; }
        let mut buf = vec![0u8; 36];
        put_u32(&mut buf, 0, ETHTOOL_GCHANNELS);
        self.ioctl(dev, &mut buf, "ETHTOOL_GCHANNELS")?;
        Ok(Channels {
            max_rx: get_u32(&buf, 4),
            max_tx: get_u32(&buf, 8),
            max_combined: get_u32(&buf, 16),
            rx: get_u32(&buf, 20),
            tx: get_u32(&buf, 24),
            combined: get_u32(&buf, 32),
        })
    }

    /// Whether feature `name` is currently active.
    pub fn feature(&self, dev: &str, name: &str) -> Result<bool> {
        self.features(dev)?
            .into_iter()
            .find(|f| f.name == name)
            .map(|f| f.active)
            .ok_or_else(|| Error::NoFeature {
                dev: dev.to_string(),
                feature: name.to_string(),
            })
    }

    /// Switches feature `name` on or off (`ethtool -K dev name on|off`) and
    /// checks that it took effect.
    pub fn set_feature(&self, dev: &str, name: &str, on: bool) -> Result<()> {
        let names = self.feature_names(dev)?;
        let index = names
            .iter()
            .position(|n| n == name)
            .ok_or_else(|| Error::NoFeature {
                dev: dev.to_string(),
                feature: name.to_string(),
            })?;
        let blocks = names.len().div_ceil(32);
        // struct ethtool_sfeatures { u32 cmd; u32 size; struct { u32 valid;
        // u32 requested; } features[size]; }
        let mut buf = vec![0u8; 8 + blocks * 8];
        put_u32(&mut buf, 0, ETHTOOL_SFEATURES);
        put_u32(&mut buf, 4, blocks as u32);
        let (block, bit) = (index / 32, 1u32 << (index % 32));
        put_u32(&mut buf, 8 + block * 8, bit);
        put_u32(&mut buf, 8 + block * 8 + 4, if on { bit } else { 0 });
        self.ioctl(dev, &mut buf, &format!("ETHTOOL_SFEATURES {name}={on}"))?;
        let actual = self.feature(dev, name)?;
        if actual != on {
            return Err(Error::FeatureRefused {
                dev: dev.to_string(),
                feature: name.to_string(),
                wanted: on,
                actual,
            });
        }
        Ok(())
    }
}

fn put_u32(buf: &mut [u8], at: usize, v: u32) {
    buf[at..at + 4].copy_from_slice(&v.to_ne_bytes());
}

fn get_u32(buf: &[u8], at: usize) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&buf[at..at + 4]);
    u32::from_ne_bytes(b)
}
