//! GRO counted per device *identity* — (network namespace, ifindex) — by a
//! small BPF program on the kernel's GRO tracepoints.
//!
//! The `net` tracepoints name a device only by its name, which is per
//! namespace: a perf counter filtered on `name == "veth0"` credits every
//! namespace's `veth0`. Here one raw-tracepoint program per hook reads
//! `skb->dev->ifindex` and `skb->dev->nd_net->ns.inum` (offsets from the
//! running kernel's BTF, [`offload_sys::btf`]) and counts only the devices
//! asked for, in a per-CPU array, so nothing is sampled and nothing is
//! lost:
//!
//! - `napi_gro_receive_entry`, `napi_gro_frags_entry` (`gro_receive_skb`,
//!   `napi_gro_frags`, net/core/gro.c): a packet enters GRO — packets,
//!   bytes (`skb->len`), the largest;
//! - `napi_gro_receive_exit`, `napi_gro_frags_exit`: what GRO did with it,
//!   the `gro_result` (include/linux/netdevice.h): `GRO_MERGED` and
//!   `GRO_MERGED_FREE` (merged into a held packet), `GRO_HELD` (starts a
//!   super-packet, flushed later), `GRO_NORMAL` (goes up unmerged:
//!   `NAPI_GRO_CB(skb)->flush` set by a protocol's gro_receive, or no GRO
//!   handler), `GRO_CONSUMED`. The exit hook carries no skb: the entry hook
//!   leaves the device's slot in a per-CPU variable (GRO runs in softirq
//!   context, entry and exit on one CPU with nothing in between that
//!   re-enters GRO);
//! - `netif_receive_skb` (`__netif_receive_skb_core`, net/core/dev.c):
//!   a packet enters the stack on that device, merged or not — packets,
//!   bytes, the largest (a BIG TCP super-packet shows here above 65536).
//!
//! Packets out of GRO are `GRO_HELD + GRO_NORMAL`: every held packet is
//! flushed up once, as one super-packet however many merged into it.

use std::os::fd::OwnedFd;

use offload_sys::bpf::{helper, Asm, Cond, Map, MapType, Program, Reg, Size};
use offload_sys::btf::Btf;
use serde::Serialize;

use offload_sys::error::{Error, Result};

/// Fields of a slot's per-CPU counters (u64 each).
mod field {
    pub const GRO_IN: i16 = 0;
    pub const RESULT: i16 = 3; // GRO_MERGED .. GRO_CONSUMED, then "other"
    pub const STACK: i16 = 9;
    pub const COUNT: u32 = 12;
}

/// A device by identity: its namespace's inode number
/// (`stat -L -c %i /proc/PID/ns/net`) and its ifindex there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct DeviceId {
    /// Inode number of the device's network namespace.
    pub netns: u64,
    /// The device's ifindex in that namespace.
    pub ifindex: u32,
}

/// The calling thread's network namespace inode number.
pub fn current_netns() -> Result<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/thread-self/ns/net")
        .map(|m| m.ino())
        .map_err(|e| Error::sys("stat /proc/thread-self/ns/net", e))
}

/// One device's counters since the probe was attached.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct GroTotals {
    /// Packets into GRO.
    pub gro_in: u64,
    /// Their bytes (`skb->len`: from the network header on, since the
    /// driver's `eth_type_trans` pulled the Ethernet header).
    pub gro_in_bytes: u64,
    /// The largest packet into GRO.
    pub gro_in_largest: u64,
    /// `GRO_MERGED` + `GRO_MERGED_FREE`: merged into a held packet.
    pub merged: u64,
    /// `GRO_HELD`: started a super-packet.
    pub held: u64,
    /// `GRO_NORMAL`: passed up unmerged at once.
    pub normal: u64,
    /// `GRO_CONSUMED` and any other result.
    pub consumed: u64,
    /// Packets into the stack on this device (`netif_receive_skb`).
    pub stack: u64,
    /// Their bytes (`skb->len`, from the network header on, as on the
    /// GRO side).
    pub stack_bytes: u64,
    /// The largest packet into the stack: the largest super-packet.
    pub stack_largest: u64,
}

impl GroTotals {
    /// Packets out of GRO: each held packet goes up once, plus those
    /// passed up at once.
    pub fn gro_out(&self) -> u64 {
        self.held + self.normal
    }

    /// `self - earlier` for the counters; the largest sizes stay those
    /// since the start (a maximum has no difference).
    pub fn since(&self, earlier: &GroTotals) -> GroTotals {
        GroTotals {
            gro_in: self.gro_in.saturating_sub(earlier.gro_in),
            gro_in_bytes: self.gro_in_bytes.saturating_sub(earlier.gro_in_bytes),
            gro_in_largest: self.gro_in_largest,
            merged: self.merged.saturating_sub(earlier.merged),
            held: self.held.saturating_sub(earlier.held),
            normal: self.normal.saturating_sub(earlier.normal),
            consumed: self.consumed.saturating_sub(earlier.consumed),
            stack: self.stack.saturating_sub(earlier.stack),
            stack_bytes: self.stack_bytes.saturating_sub(earlier.stack_bytes),
            stack_largest: self.stack_largest,
        }
    }
}

/// Kernel offsets the programs read, from BTF.
#[derive(Debug, Clone, Copy)]
struct Offsets {
    skb_dev: i32,
    skb_len: i32,
    dev_ifindex: i32,
    dev_net: i32,
    net_inum: i32,
}

impl Offsets {
    fn read() -> Result<Self> {
        let btf = Btf::running_kernel()?;
        let get = |s: &str, m: &str| -> Result<i32> {
            let off = btf.offset_of(s, m)?;
            i32::try_from(off).map_err(|_| {
                Error::sys(
                    format!("BTF: {s}.{m} at {off}"),
                    std::io::Error::from(std::io::ErrorKind::InvalidData),
                )
            })
        };
        Ok(Offsets {
            skb_dev: get("sk_buff", "dev")?,
            skb_len: get("sk_buff", "len")?,
            dev_ifindex: get("net_device", "ifindex")?,
            // possible_net_t holds one `struct net *net` (CONFIG_NET_NS).
            dev_net: get("net_device", "nd_net")? + get("possible_net_t", "net").unwrap_or(0),
            net_inum: get("net", "ns.inum")?,
        })
    }
}

const R0: Reg = Reg(0);
const R1: Reg = Reg(1);
const R2: Reg = Reg(2);
const R3: Reg = Reg(3);
const R6: Reg = Reg(6);
const R7: Reg = Reg(7);
const R8: Reg = Reg(8);
const FP: Reg = Reg(10);

/// `bpf_probe_read_kernel(fp + dst, size, base + off)`.
fn probe_read(a: &mut Asm, dst: i16, size: i32, base: Reg, off: i32) {
    a.mov(R1, FP)
        .add_imm(R1, i32::from(dst))
        .mov_imm(R2, size)
        .mov(R3, base)
        .add_imm(R3, off)
        .call(helper::PROBE_READ_KERNEL);
}

/// Sets this CPU's "last GRO slot" to `value` (a register or 0).
fn set_last(a: &mut Asm, last: &Map, value: Option<Reg>) {
    a.store_imm(Size::W, FP, -44, 0)
        .ld_map_fd(R1, last)
        .mov(R2, FP)
        .add_imm(R2, -44)
        .call(helper::MAP_LOOKUP_ELEM)
        .jump_imm(Cond::Eq, R0, 0, "out");
    match value {
        Some(r) => a.store(Size::W, R0, 0, r),
        None => a.store_imm(Size::W, R0, 0, 0),
    };
}

/// The program of an skb hook: finds the device's slot, then adds one
/// packet, its bytes and its size to the fields from `base` on; with
/// `last`, leaves the slot (0: not watched) for the exit hook.
fn skb_program(
    o: &Offsets,
    devs: &Map,
    stats: &Map,
    last: Option<&Map>,
    base: i16,
) -> Result<Vec<[u8; 8]>> {
    let mut a = Asm::default();
    a.load(Size::DW, R6, R1, 0); // args[0]: the skb
    a.store_imm(Size::DW, FP, -8, 0);
    probe_read(&mut a, -8, 8, R6, o.skb_dev);
    a.load(Size::DW, R7, FP, -8)
        .jump_imm(Cond::Eq, R7, 0, "miss");
    a.store_imm(Size::DW, FP, -16, 0);
    probe_read(&mut a, -16, 4, R6, o.skb_len);
    // Key {u32 netns inode, u32 ifindex} at fp-24.
    a.store_imm(Size::DW, FP, -24, 0);
    probe_read(&mut a, -20, 4, R7, o.dev_ifindex);
    a.store_imm(Size::DW, FP, -32, 0);
    probe_read(&mut a, -32, 8, R7, o.dev_net);
    a.load(Size::DW, R7, FP, -32)
        .jump_imm(Cond::Eq, R7, 0, "miss");
    probe_read(&mut a, -24, 4, R7, o.net_inum);
    a.ld_map_fd(R1, devs)
        .mov(R2, FP)
        .add_imm(R2, -24)
        .call(helper::MAP_LOOKUP_ELEM)
        .jump_imm(Cond::Eq, R0, 0, "miss")
        .load(Size::W, R8, R0, 0)
        .store(Size::W, FP, -40, R8)
        .ld_map_fd(R1, stats)
        .mov(R2, FP)
        .add_imm(R2, -40)
        .call(helper::MAP_LOOKUP_ELEM)
        .jump_imm(Cond::Eq, R0, 0, "miss");
    let at = |f: i16| f * 8;
    a.load(Size::DW, R1, R0, at(base))
        .add_imm(R1, 1)
        .store(Size::DW, R0, at(base), R1)
        .load(Size::DW, R2, FP, -16)
        .load(Size::DW, R1, R0, at(base + 1))
        .add(R1, R2)
        .store(Size::DW, R0, at(base + 1), R1)
        .load(Size::DW, R1, R0, at(base + 2))
        .jump_reg(Cond::Ge, R1, R2, "counted")
        .store(Size::DW, R0, at(base + 2), R2)
        .label("counted");
    if let Some(last) = last {
        set_last(&mut a, last, Some(R8));
    }
    a.goto("out").label("miss");
    if let Some(last) = last {
        set_last(&mut a, last, None);
    }
    a.label("out").exit_with(0);
    a.finish()
}

/// The program of a GRO exit hook: counts the `gro_result` for the slot
/// the entry hook left, and clears it.
fn exit_program(stats: &Map, last: &Map) -> Result<Vec<[u8; 8]>> {
    let mut a = Asm::default();
    a.load(Size::DW, R6, R1, 0) // args[0]: the gro_result
        .store_imm(Size::W, FP, -4, 0)
        .ld_map_fd(R1, last)
        .mov(R2, FP)
        .add_imm(R2, -4)
        .call(helper::MAP_LOOKUP_ELEM)
        .jump_imm(Cond::Eq, R0, 0, "out")
        .load(Size::W, R8, R0, 0)
        .jump_imm(Cond::Eq, R8, 0, "out")
        .store_imm(Size::W, R0, 0, 0)
        .store(Size::W, FP, -8, R8)
        .ld_map_fd(R1, stats)
        .mov(R2, FP)
        .add_imm(R2, -8)
        .call(helper::MAP_LOOKUP_ELEM)
        .jump_imm(Cond::Eq, R0, 0, "out")
        // GRO_MERGED 0 .. GRO_CONSUMED 4; anything else counts as 5.
        .jump_imm(Cond::Le, R6, 4, "known")
        .mov_imm(R6, 5)
        .label("known")
        .lsh_imm(R6, 3)
        .add(R0, R6)
        .load(Size::DW, R1, R0, field::RESULT * 8)
        .add_imm(R1, 1)
        .store(Size::DW, R0, field::RESULT * 8, R1)
        .label("out")
        .exit_with(0);
    a.finish()
}

/// Devices one probe watches at most (its maps are sized for them: 96
/// bytes per device and CPU).
pub const MAX_DEVICES: usize = 4096;

/// The attached programs and their maps; everything detaches on drop.
#[derive(Debug)]
pub struct GroProbe {
    devices: Vec<DeviceId>,
    stats: Map,
    cpus: usize,
    // Held for their fds: the links keep the programs attached.
    _links: Vec<OwnedFd>,
    _programs: Vec<Program>,
    _maps: Vec<Map>,
}

impl GroProbe {
    /// Loads and attaches the programs for `devices` (1 to
    /// [`MAX_DEVICES`]).
    pub fn attach(devices: &[DeviceId]) -> Result<Self> {
        if devices.is_empty() || devices.len() > MAX_DEVICES {
            return Err(Error::sys(
                format!("GRO probe: {} devices (1 to {MAX_DEVICES})", devices.len()),
                std::io::Error::from(std::io::ErrorKind::InvalidInput),
            ));
        }
        let offsets = Offsets::read()?;
        let n = devices.len() as u32;
        let devs = Map::create("ofl_gro_devs", MapType::Hash, 8, 4, n)?;
        // Slot 0 is "not watched"; device i has slot i + 1.
        let stats = Map::create(
            "ofl_gro_stats",
            MapType::PerCpuArray,
            4,
            field::COUNT * 8,
            n + 1,
        )?;
        let last = Map::create("ofl_gro_last", MapType::PerCpuArray, 4, 4, 1)?;
        for (i, d) in devices.iter().enumerate() {
            let netns = u32::try_from(d.netns).map_err(|_| {
                Error::sys(
                    format!("namespace inode {} beyond 32 bits", d.netns),
                    std::io::Error::from(std::io::ErrorKind::InvalidInput),
                )
            })?;
            let mut key = [0u8; 8];
            key[..4].copy_from_slice(&netns.to_ne_bytes());
            key[4..].copy_from_slice(&d.ifindex.to_ne_bytes());
            devs.update(&key, &(i as u32 + 1).to_ne_bytes())?;
        }
        let entry = Program::load_raw_tracepoint(
            "ofl_gro_entry",
            &skb_program(&offsets, &devs, &stats, Some(&last), field::GRO_IN)?,
        )?;
        let exit = Program::load_raw_tracepoint("ofl_gro_exit", &exit_program(&stats, &last)?)?;
        let stack = Program::load_raw_tracepoint(
            "ofl_gro_stack",
            &skb_program(&offsets, &devs, &stats, None, field::STACK)?,
        )?;
        // Exit hooks first, the stack hook, then the entry hooks: no entry
        // is counted whose result could go unseen.
        let mut links = Vec::new();
        for tp in ["napi_gro_receive_exit", "napi_gro_frags_exit"] {
            links.push(exit.attach_raw_tracepoint(tp)?);
        }
        links.push(stack.attach_raw_tracepoint("netif_receive_skb")?);
        for tp in ["napi_gro_receive_entry", "napi_gro_frags_entry"] {
            links.push(entry.attach_raw_tracepoint(tp)?);
        }
        Ok(GroProbe {
            devices: devices.to_vec(),
            stats,
            cpus: offload_sys::bpf::possible_cpus()?,
            _links: links,
            _programs: vec![entry, exit, stack],
            _maps: vec![devs, last],
        })
    }

    /// The devices, in the order [`GroProbe::read`] returns them.
    pub fn devices(&self) -> &[DeviceId] {
        &self.devices
    }

    /// Each device's totals since the probe was attached, summed over CPUs.
    pub fn read(&self) -> Result<Vec<GroTotals>> {
        (0..self.devices.len())
            .map(|i| {
                let slot = (i as u32 + 1).to_ne_bytes();
                let raw = self.stats.lookup(&slot)?.unwrap_or_default();
                let stride = field::COUNT as usize * 8;
                let mut f = [0u64; field::COUNT as usize];
                let mut largest = [0u64; 2];
                for cpu in raw.chunks_exact(stride).take(self.cpus) {
                    for (k, v) in f.iter_mut().enumerate() {
                        let x =
                            u64::from_ne_bytes(cpu[k * 8..k * 8 + 8].try_into().unwrap_or([0; 8]));
                        match k {
                            2 => largest[0] = largest[0].max(x),
                            11 => largest[1] = largest[1].max(x),
                            _ => *v += x,
                        }
                    }
                }
                Ok(GroTotals {
                    gro_in: f[0],
                    gro_in_bytes: f[1],
                    gro_in_largest: largest[0],
                    merged: f[3] + f[4],
                    held: f[5],
                    normal: f[6],
                    consumed: f[7] + f[8],
                    stack: f[9],
                    stack_bytes: f[10],
                    stack_largest: largest[1],
                })
            })
            .collect()
    }
}
