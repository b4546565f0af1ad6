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
const ETHTOOL_GCOALESCE: u32 = 0x0e;
const ETHTOOL_SCOALESCE: u32 = 0x0f;
const ETHTOOL_GRINGPARAM: u32 = 0x10;
const ETHTOOL_SRINGPARAM: u32 = 0x11;
const ETHTOOL_GRXRINGS: u32 = 0x2d;
const ETHTOOL_GRXCLSRLCNT: u32 = 0x2e;
const ETHTOOL_GRXCLSRULE: u32 = 0x2f;
const ETHTOOL_GRXCLSRLALL: u32 = 0x30;
const ETHTOOL_GRSSH: u32 = 0x46;
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
    /// The device allows changing it (`hw_features` has the bit).
    pub changeable: bool,
    /// The kernel never lets it change (`NETIF_F_NEVER_CHANGE`).
    pub never_changed: bool,
}

impl Feature {
    /// `ethtool -k` prints it `[fixed]`: not in the device's changeable
    /// set, or one the kernel never changes (`dump_feature` in ethtool's
    /// netlink/features.c: `!hw || nochange`).
    pub fn fixed(&self) -> bool {
        !self.changeable || self.never_changed
    }
}

/// `ethtool -k`'s legacy flags: long name and the pattern of kernel
/// feature names each covers, in ethtool's `off_flag_def` order (common.c).
pub const ETHTOOL_GROUPS: &[(&str, &str)] = &[
    ("rx-checksumming", "rx-checksum"),
    ("tx-checksumming", "tx-checksum-*"),
    ("scatter-gather", "tx-scatter-gather*"),
    ("tcp-segmentation-offload", "tx-tcp*-segmentation"),
    ("udp-fragmentation-offload", "tx-udp-fragmentation"),
    ("generic-segmentation-offload", "tx-generic-segmentation"),
    ("generic-receive-offload", "rx-gro"),
    ("large-receive-offload", "rx-lro"),
    ("rx-vlan-offload", "rx-vlan-hw-parse"),
    ("tx-vlan-offload", "tx-vlan-hw-insert"),
    ("ntuple-filters", "rx-ntuple-filter"),
    ("receive-hashing", "rx-hashing"),
];

/// The legacy flag (group) a kernel feature name belongs to: the first of
/// [`ETHTOOL_GROUPS`] whose pattern matches.
pub fn first_group(name: &str) -> Option<&'static str> {
    ETHTOOL_GROUPS
        .iter()
        .find(|(_, p)| pattern_match(name, p))
        .map(|(g, _)| *g)
}

/// ethtool's `flag_pattern_match`: at most one `*`, matching any run.
fn pattern_match(name: &str, pattern: &str) -> bool {
    match pattern.split_once('*') {
        None => name == pattern,
        Some((head, tail)) => {
            name.len() >= head.len() + tail.len() && name.starts_with(head) && name.ends_with(tail)
        }
    }
}

/// TSO as `ethtool -k` folds it: the features of its legacy flag
/// `tcp-segmentation-offload` (`tx-tcp*-segmentation`: `tx-tcp-`,
/// `-ecn-`, `-mangleid-`, `tx-tcp6-` and, since 6.18, `tx-tcp-accecn-`).
pub const TSO_GROUP: &str = "tcp-segmentation-offload";

/// Ring sizes as `ethtool -g` shows them (`struct ethtool_ringparam`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Rings {
    /// Pre-set maximum RX ring.
    pub rx_max: u32,
    /// Pre-set maximum RX mini ring.
    pub rx_mini_max: u32,
    /// Pre-set maximum RX jumbo ring.
    pub rx_jumbo_max: u32,
    /// Pre-set maximum TX ring.
    pub tx_max: u32,
    /// Current RX ring.
    pub rx: u32,
    /// Current RX mini ring.
    pub rx_mini: u32,
    /// Current RX jumbo ring.
    pub rx_jumbo: u32,
    /// Current TX ring.
    pub tx: u32,
}

/// Interrupt coalescing as `ethtool -c` shows it: the fields of
/// `struct ethtool_coalesce`, in its order, under `ethtool -c`'s names.
pub const COALESCE_FIELDS: [&str; 22] = [
    "rx-usecs",
    "rx-frames",
    "rx-usecs-irq",
    "rx-frames-irq",
    "tx-usecs",
    "tx-frames",
    "tx-usecs-irq",
    "tx-frames-irq",
    "stats-block-usecs",
    "adaptive-rx",
    "adaptive-tx",
    "pkt-rate-low",
    "rx-usecs-low",
    "rx-frame-low",
    "tx-usecs-low",
    "tx-frame-low",
    "pkt-rate-high",
    "rx-usecs-high",
    "rx-frame-high",
    "tx-usecs-high",
    "tx-frame-high",
    "sample-interval",
];

/// RSS configuration as `ethtool -x` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct Rss {
    /// The indirection table: RX queue of each entry (empty when the driver
    /// has none).
    pub indirection: Vec<u32>,
    /// The hash key, hex bytes joined by `:` as `ethtool -x` prints it
    /// (empty when the driver has none).
    pub key: String,
    /// Hash functions on (`toeplitz`, `xor`, `crc32`).
    pub hash_functions: Vec<String>,
}

/// One ntuple (flow steering) rule as `ethtool -n` lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct NtupleRule {
    /// Rule location (`loc` in `ethtool -N`).
    pub location: u32,
    /// `flow_type` (`TCP_V4_FLOW` = 1, ...).
    pub flow_type: u32,
    /// `ring_cookie`: the RX queue it steers to; `u64::MAX` drops.
    pub action: u64,
}

/// Queue counts as `ethtool -l` shows them (`struct ethtool_channels`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Channels {
    /// Maximum RX-only channels.
    pub max_rx: u32,
    /// Maximum TX-only channels.
    pub max_tx: u32,
    /// Maximum other channels.
    pub max_other: u32,
    /// Maximum combined channels.
    pub max_combined: u32,
    /// Current RX-only channels.
    pub rx: u32,
    /// Current TX-only channels.
    pub tx: u32,
    /// Current other channels.
    pub other: u32,
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

    /// A command whose structure is `u32 cmd` and then `N` u32 fields
    /// (`ethtool_channels`, `ethtool_ringparam`, `ethtool_coalesce`):
    /// sends `words`, and reads them back as the kernel left them.
    fn words_ioctl<const N: usize>(
        &self,
        dev: &str,
        cmd: u32,
        words: &mut [u32; N],
        what: &str,
    ) -> Result<()> {
        let mut buf = vec![0u8; 4 + 4 * N];
        put_u32(&mut buf, 0, cmd);
        for (i, w) in words.iter().enumerate() {
            put_u32(&mut buf, 4 + 4 * i, *w);
        }
        self.ioctl(dev, &mut buf, what)?;
        for (i, w) in words.iter_mut().enumerate() {
            *w = get_u32(&buf, 4 + 4 * i);
        }
        Ok(())
    }

    /// The `N` fields of a get command of that shape.
    fn get_words<const N: usize>(&self, dev: &str, cmd: u32, what: &str) -> Result<[u32; N]> {
        let mut words = [0; N];
        self.words_ioctl(dev, cmd, &mut words, what)?;
        Ok(words)
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
                    never_changed: get_u32(&buf, base + 12) & bit != 0,
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
        let [max_rx, max_tx, max_other, max_combined, rx, tx, other, combined] =
            self.get_words(dev, ETHTOOL_GCHANNELS, "ETHTOOL_GCHANNELS")?;
        Ok(Channels {
            max_rx,
            max_tx,
            max_other,
            max_combined,
            rx,
            tx,
            other,
            combined,
        })
    }

    /// Ring sizes (`ethtool -g`); `EOPNOTSUPP` where the driver has none.
    pub fn rings(&self, dev: &str) -> Result<Rings> {
        // struct ethtool_ringparam { u32 cmd; u32 rx_max_pending,
        // rx_mini_max_pending, rx_jumbo_max_pending, tx_max_pending,
        // rx_pending, rx_mini_pending, rx_jumbo_pending, tx_pending; }
        let [rx_max, rx_mini_max, rx_jumbo_max, tx_max, rx, rx_mini, rx_jumbo, tx] =
            self.get_words(dev, ETHTOOL_GRINGPARAM, "ETHTOOL_GRINGPARAM")?;
        Ok(Rings {
            rx_max,
            rx_mini_max,
            rx_jumbo_max,
            tx_max,
            rx,
            rx_mini,
            rx_jumbo,
            tx,
        })
    }

    /// Sets the current RX and TX ring sizes (`ethtool -G dev rx N tx M`).
    pub fn set_rings(&self, dev: &str, rx: u32, tx: u32) -> Result<()> {
        let now = self.rings(dev)?;
        let mut words = [
            now.rx_max,
            now.rx_mini_max,
            now.rx_jumbo_max,
            now.tx_max,
            rx,
            now.rx_mini,
            now.rx_jumbo,
            tx,
        ];
        let what = format!("ETHTOOL_SRINGPARAM rx {rx} tx {tx}");
        self.words_ioctl(dev, ETHTOOL_SRINGPARAM, &mut words, &what)
    }

    /// Interrupt coalescing (`ethtool -c`), by [`COALESCE_FIELDS`] name;
    /// `EOPNOTSUPP` where the driver has none.
    pub fn coalesce(&self, dev: &str) -> Result<std::collections::BTreeMap<String, u32>> {
        // struct ethtool_coalesce: u32 cmd, then 22 u32 fields.
        let words: [u32; COALESCE_FIELDS.len()] =
            self.get_words(dev, ETHTOOL_GCOALESCE, "ETHTOOL_GCOALESCE")?;
        Ok(COALESCE_FIELDS
            .iter()
            .zip(words)
            .map(|(n, v)| ((*n).to_string(), v))
            .collect())
    }

    /// Sets one coalescing field (`ethtool -C dev rx-usecs N`), keeping the
    /// others as they are.
    pub fn set_coalesce(&self, dev: &str, field: &str, value: u32) -> Result<()> {
        let Some(pos) = COALESCE_FIELDS.iter().position(|f| *f == field) else {
            return Err(Error::NoFeature {
                dev: dev.to_string(),
                feature: field.to_string(),
            });
        };
        let mut words: [u32; COALESCE_FIELDS.len()] =
            self.get_words(dev, ETHTOOL_GCOALESCE, "ETHTOOL_GCOALESCE")?;
        words[pos] = value;
        let what = format!("ETHTOOL_SCOALESCE {field} {value}");
        self.words_ioctl(dev, ETHTOOL_SCOALESCE, &mut words, &what)
    }

    /// RSS indirection table, key and hash function (`ethtool -x`), through
    /// `ETHTOOL_GRSSH`; `EOPNOTSUPP` where the driver has no RSS.
    pub fn rss(&self, dev: &str) -> Result<Rss> {
        // struct ethtool_rxfh { u32 cmd, rss_context, indir_size, key_size;
        // u8 hfunc, input_xfrm, rsvd8[2]; u32 rsvd32; u32 rss_config[]; }
        // A first call with both sizes 0 returns the sizes.
        let mut head = vec![0u8; 24];
        put_u32(&mut head, 0, ETHTOOL_GRSSH);
        self.ioctl(dev, &mut head, "ETHTOOL_GRSSH sizes")?;
        let indir = get_u32(&head, 8) as usize;
        let key = get_u32(&head, 12) as usize;
        // Bounded: the kernel caps both far below this.
        if indir > 1 << 16 || key > 1 << 12 {
            return Err(Error::sys(
                format!("ETHTOOL_GRSSH on {dev}: sizes {indir}/{key}"),
                std::io::Error::from(std::io::ErrorKind::InvalidData),
            ));
        }
        let mut buf = vec![0u8; 24 + 4 * indir + key];
        put_u32(&mut buf, 0, ETHTOOL_GRSSH);
        put_u32(&mut buf, 8, indir as u32);
        put_u32(&mut buf, 12, key as u32);
        self.ioctl(dev, &mut buf, "ETHTOOL_GRSSH")?;
        let hfunc = buf[16];
        let names = ["toeplitz", "xor", "crc32"];
        Ok(Rss {
            indirection: (0..indir).map(|i| get_u32(&buf, 24 + 4 * i)).collect(),
            key: buf[24 + 4 * indir..24 + 4 * indir + key]
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<Vec<_>>()
                .join(":"),
            hash_functions: names
                .iter()
                .enumerate()
                .filter(|(i, _)| hfunc & (1 << i) != 0)
                .map(|(_, n)| (*n).to_string())
                .collect(),
        })
    }

    /// Number of RX rings the RSS and ntuple layer sees (`ETHTOOL_GRXRINGS`,
    /// the "N RX rings available" of `ethtool -n`).
    pub fn rx_rings(&self, dev: &str) -> Result<u64> {
        let mut buf = vec![0u8; RXNFC_LEN];
        put_u32(&mut buf, 0, ETHTOOL_GRXRINGS);
        self.ioctl(dev, &mut buf, "ETHTOOL_GRXRINGS")?;
        Ok(get_u64(&buf, 8))
    }

    /// The ntuple rules (`ethtool -n`); `EOPNOTSUPP` where the driver has
    /// no classification rules.
    pub fn ntuple_rules(&self, dev: &str) -> Result<Vec<NtupleRule>> {
        let mut buf = vec![0u8; RXNFC_LEN];
        put_u32(&mut buf, 0, ETHTOOL_GRXCLSRLCNT);
        self.ioctl(dev, &mut buf, "ETHTOOL_GRXCLSRLCNT")?;
        let count = (get_u32(&buf, RXNFC_RULE_CNT) as usize).min(1 << 16);
        let mut all = vec![0u8; RXNFC_LEN + 4 * count];
        put_u32(&mut all, 0, ETHTOOL_GRXCLSRLALL);
        put_u32(&mut all, RXNFC_RULE_CNT, count as u32);
        if count > 0 {
            self.ioctl(dev, &mut all, "ETHTOOL_GRXCLSRLALL")?;
        }
        let got = (get_u32(&all, RXNFC_RULE_CNT) as usize).min(count);
        let mut out = Vec::with_capacity(got);
        for i in 0..got {
            let location = get_u32(&all, RXNFC_RULE_LOCS + 4 * i);
            let mut one = vec![0u8; RXNFC_LEN];
            put_u32(&mut one, 0, ETHTOOL_GRXCLSRULE);
            put_u32(&mut one, RXNFC_FS + FS_LOCATION, location);
            self.ioctl(dev, &mut one, "ETHTOOL_GRXCLSRULE")?;
            out.push(NtupleRule {
                location,
                flow_type: get_u32(&one, RXNFC_FS),
                action: get_u64(&one, RXNFC_FS + FS_RING_COOKIE),
            });
        }
        Ok(out)
    }

    /// Sets the requested state of several features at once, leaving the
    /// rest alone; returns the names that did not end up as asked.
    pub fn set_features(&self, dev: &str, wanted: &[(String, bool)]) -> Result<Vec<String>> {
        let names = self.feature_names(dev)?;
        let blocks = names.len().div_ceil(32);
        let mut buf = vec![0u8; 8 + blocks * 8];
        put_u32(&mut buf, 0, ETHTOOL_SFEATURES);
        put_u32(&mut buf, 4, blocks as u32);
        for (name, on) in wanted {
            let index = names
                .iter()
                .position(|n| n == name)
                .ok_or_else(|| Error::NoFeature {
                    dev: dev.to_string(),
                    feature: name.clone(),
                })?;
            let (block, bit) = (index / 32, 1u32 << (index % 32));
            let valid = get_u32(&buf, 8 + block * 8) | bit;
            put_u32(&mut buf, 8 + block * 8, valid);
            let req = get_u32(&buf, 8 + block * 8 + 4);
            put_u32(
                &mut buf,
                8 + block * 8 + 4,
                if *on { req | bit } else { req & !bit },
            );
        }
        self.ioctl(dev, &mut buf, "ETHTOOL_SFEATURES")?;
        let now = self.features(dev)?;
        Ok(wanted
            .iter()
            .filter(|(n, on)| now.iter().any(|f| &f.name == n && f.requested != *on))
            .map(|(n, _)| n.clone())
            .collect())
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

/// `struct ethtool_rxnfc` (include/uapi/linux/ethtool.h): u32 cmd,
/// flow_type; u64 data at 8; `struct ethtool_rx_flow_spec fs` at 16 (168
/// bytes: u32 flow_type, a 52-byte union and a 20-byte extension for value
/// and for mask, then u64 ring_cookie at 152 after padding and u32
/// location at 160); `rule_cnt` at 184; `rule_locs[]` at 188; size 192.
const RXNFC_FS: usize = 16;
const RXNFC_RULE_LOCS: usize = 188;
const FS_RING_COOKIE: usize = 152;
const FS_LOCATION: usize = 160;
const RXNFC_RULE_CNT: usize = 184;
const RXNFC_LEN: usize = 192;

fn get_u64(buf: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&buf[at..at + 8]);
    u64::from_ne_bytes(b)
}

fn put_u32(buf: &mut [u8], at: usize, v: u32) {
    buf[at..at + 4].copy_from_slice(&v.to_ne_bytes());
}

fn get_u32(buf: &[u8], at: usize) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&buf[at..at + 4]);
    u32::from_ne_bytes(b)
}

#[cfg(test)]
mod tso_tests {
    use super::{first_group, TSO_GROUP};

    #[test]
    fn tso_is_every_tx_tcp_segmentation_feature() {
        // The names in 6.18's netdev_features_strings (net/ethtool/common.c).
        for f in [
            "tx-tcp-segmentation",
            "tx-tcp-ecn-segmentation",
            "tx-tcp-mangleid-segmentation",
            "tx-tcp6-segmentation",
            "tx-tcp-accecn-segmentation",
        ] {
            assert_eq!(first_group(f), Some(TSO_GROUP), "{f}");
        }
        for f in [
            "tx-udp-segmentation",
            "tx-generic-segmentation",
            "tx-gre-segmentation",
            "tx-tcp",
            "rx-gro",
        ] {
            assert_ne!(first_group(f), Some(TSO_GROUP), "{f}");
        }
    }
}
