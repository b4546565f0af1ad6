//! The few `bpf(2)` calls a hand-assembled counting program needs: maps
//! (hash, array, per-CPU array), loading a raw-tracepoint program, attaching
//! it (`BPF_RAW_TRACEPOINT_OPEN`), and an assembler with labels.
//!
//! No BPF toolchain, no ELF, no libbpf: a program is a few dozen
//! instructions built with [`Asm`] (encoding from the kernel's
//! Documentation/bpf/standardization/instruction-set.rst), so the kernel's
//! verifier is the only judge. Everything is held by file descriptors: a
//! program detaches and its maps go away when the process lets go of them,
//! on every exit path, `SIGKILL` included. Needs `CAP_BPF` and
//! `CAP_PERFMON` (root).

use std::collections::BTreeMap;
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::error::{Error, Result};

const BPF_MAP_CREATE: libc::c_int = 0;
const BPF_MAP_LOOKUP_ELEM: libc::c_int = 1;
const BPF_MAP_UPDATE_ELEM: libc::c_int = 2;
const BPF_PROG_LOAD: libc::c_int = 5;
const BPF_RAW_TRACEPOINT_OPEN: libc::c_int = 17;
const BPF_PROG_TYPE_RAW_TRACEPOINT: u32 = 17;

/// Map types used here (`enum bpf_map_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum MapType {
    /// `BPF_MAP_TYPE_HASH`.
    Hash = 1,
    /// `BPF_MAP_TYPE_ARRAY`.
    Array = 2,
    /// `BPF_MAP_TYPE_PERCPU_ARRAY`: one value per possible CPU, so a
    /// program updates its CPU's copy without atomics.
    PerCpuArray = 6,
}

/// Helper function ids (`enum bpf_func_id`).
pub mod helper {
    /// `bpf_map_lookup_elem(map, key)`.
    pub const MAP_LOOKUP_ELEM: i32 = 1;
    /// `bpf_probe_read_kernel(dst, size, unsafe_ptr)` (5.5+).
    pub const PROBE_READ_KERNEL: i32 = 113;
}

/// `union bpf_attr`, as far as the commands here fill it (the kernel
/// zero-extends a shorter one).
#[repr(C, align(8))]
struct Attr([u8; 128]);

impl Attr {
    fn new() -> Self {
        Attr([0; 128])
    }
    fn u32(mut self, off: usize, v: u32) -> Self {
        self.0[off..off + 4].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn u64(mut self, off: usize, v: u64) -> Self {
        self.0[off..off + 8].copy_from_slice(&v.to_ne_bytes());
        self
    }
}

fn sys_bpf(cmd: libc::c_int, attr: &mut Attr) -> libc::c_long {
    // SAFETY: bpf(2) reads (and for some commands writes) at most
    // `size_of::<Attr>()` bytes of a live, aligned buffer; pointers inside
    // it point at buffers the callers keep alive across the call.
    unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut Attr,
            std::mem::size_of::<Attr>() as libc::c_uint,
        )
    }
}

fn owned(raw: libc::c_long, op: impl FnOnce() -> String) -> Result<OwnedFd> {
    if raw < 0 {
        return Err(Error::last_os(op()));
    }
    // SAFETY: a fresh fd returned by the kernel, owned once.
    Ok(unsafe { OwnedFd::from_raw_fd(raw as i32) })
}

/// Number of possible CPUs (`/sys/devices/system/cpu/possible`): the
/// number of values a per-CPU map holds per key.
pub fn possible_cpus() -> Result<usize> {
    let path = "/sys/devices/system/cpu/possible";
    let text = std::fs::read_to_string(path).map_err(|e| Error::sys(format!("read {path}"), e))?;
    let mut n = 0usize;
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let last = part.rsplit('-').next().unwrap_or(part);
        let last: usize = last.parse().map_err(|_| {
            Error::sys(
                format!("{path}: {text:?}"),
                std::io::Error::from(std::io::ErrorKind::InvalidData),
            )
        })?;
        n = n.max(last + 1);
    }
    Ok(n.max(1))
}

/// A BPF map held by its fd.
#[derive(Debug)]
pub struct Map {
    fd: OwnedFd,
    ty: MapType,
    key_size: usize,
    value_size: usize,
    name: String,
}

impl Map {
    /// Creates a map of `max_entries` entries.
    pub fn create(
        name: &str,
        ty: MapType,
        key_size: u32,
        value_size: u32,
        max_entries: u32,
    ) -> Result<Self> {
        let mut attr = Attr::new()
            .u32(0, ty as u32)
            .u32(4, key_size)
            .u32(8, value_size)
            .u32(12, max_entries);
        // map_name[16] at byte 28: shown by bpftool, 15 bytes at most.
        for (i, b) in name.bytes().take(15).enumerate() {
            attr.0[28 + i] = b;
        }
        let fd = owned(sys_bpf(BPF_MAP_CREATE, &mut attr), || {
            format!("bpf(BPF_MAP_CREATE {name})")
        })?;
        Ok(Map {
            fd,
            ty,
            key_size: key_size as usize,
            value_size: value_size as usize,
            name: name.to_string(),
        })
    }

    /// The fd a program refers to the map by ([`Asm::ld_map_fd`]).
    pub fn raw_fd(&self) -> i32 {
        self.fd.as_raw_fd()
    }

    /// Bytes one lookup returns: the value, or one 8-byte-aligned value
    /// per possible CPU for a per-CPU map.
    fn lookup_size(&self) -> Result<usize> {
        Ok(match self.ty {
            MapType::PerCpuArray => self.value_size.next_multiple_of(8) * possible_cpus()?,
            _ => self.value_size,
        })
    }

    /// Sets `key` to `value` (`BPF_ANY`).
    pub fn update(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let want = self.lookup_size()?;
        if key.len() != self.key_size || value.len() != want {
            return Err(Error::sys(
                format!(
                    "map {} update: key {} bytes (want {}), value {} (want {want})",
                    self.name,
                    key.len(),
                    self.key_size,
                    value.len()
                ),
                std::io::Error::from(std::io::ErrorKind::InvalidInput),
            ));
        }
        let mut attr = Attr::new()
            .u32(0, self.raw_fd() as u32)
            .u64(8, key.as_ptr() as u64)
            .u64(16, value.as_ptr() as u64);
        if sys_bpf(BPF_MAP_UPDATE_ELEM, &mut attr) < 0 {
            return Err(Error::last_os(format!(
                "bpf(BPF_MAP_UPDATE_ELEM {})",
                self.name
            )));
        }
        Ok(())
    }

    /// The value of `key` (per-CPU maps: every possible CPU's, each
    /// padded to 8 bytes), or `None` when absent.
    pub fn lookup(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if key.len() != self.key_size {
            return Err(Error::sys(
                format!("map {} lookup: key of {} bytes", self.name, key.len()),
                std::io::Error::from(std::io::ErrorKind::InvalidInput),
            ));
        }
        let mut value = vec![0u8; self.lookup_size()?];
        let mut attr = Attr::new()
            .u32(0, self.raw_fd() as u32)
            .u64(8, key.as_ptr() as u64)
            .u64(16, value.as_mut_ptr() as u64);
        if sys_bpf(BPF_MAP_LOOKUP_ELEM, &mut attr) < 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ENOENT) {
                return Ok(None);
            }
            return Err(Error::sys(
                format!("bpf(BPF_MAP_LOOKUP_ELEM {})", self.name),
                e,
            ));
        }
        Ok(Some(value))
    }
}

/// Registers, `r0`..`r10` (`r10` is the read-only frame pointer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reg(pub u8);

/// Access sizes of loads and stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Size {
    /// 4 bytes.
    W,
    /// 8 bytes.
    DW,
}

impl Size {
    fn bits(self) -> u8 {
        match self {
            Size::W => 0x00,
            Size::DW => 0x18,
        }
    }
}

/// Conditional jumps (64-bit, unsigned where it matters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cond {
    /// `==`.
    Eq,
    /// `!=`.
    Ne,
    /// `>=`, unsigned.
    Ge,
    /// `<=`, unsigned.
    Le,
}

impl Cond {
    fn op(self) -> u8 {
        match self {
            Cond::Eq => 0x10,
            Cond::Ne => 0x50,
            Cond::Ge => 0x30,
            Cond::Le => 0xb0,
        }
    }
}

/// A BPF assembler with forward labels.
#[derive(Debug, Default)]
pub struct Asm {
    insns: Vec<[u8; 8]>,
    labels: BTreeMap<&'static str, usize>,
    jumps: Vec<(usize, &'static str)>,
}

const JMP: u8 = 0x05;
const ALU64: u8 = 0x07;

impl Asm {
    fn raw(&mut self, code: u8, dst: Reg, src: Reg, off: i16, imm: i32) -> &mut Self {
        let mut i = [0u8; 8];
        i[0] = code;
        i[1] = (dst.0 & 0xf) | (src.0 << 4);
        i[2..4].copy_from_slice(&off.to_le_bytes());
        i[4..8].copy_from_slice(&imm.to_le_bytes());
        self.insns.push(i);
        self
    }
    /// `dst = imm`.
    pub fn mov_imm(&mut self, dst: Reg, imm: i32) -> &mut Self {
        self.raw(ALU64 | 0xb0, dst, Reg(0), 0, imm)
    }
    /// `dst = src`.
    pub fn mov(&mut self, dst: Reg, src: Reg) -> &mut Self {
        self.raw(ALU64 | 0xb0 | 0x08, dst, src, 0, 0)
    }
    /// `dst += imm`.
    pub fn add_imm(&mut self, dst: Reg, imm: i32) -> &mut Self {
        self.raw(ALU64, dst, Reg(0), 0, imm)
    }
    /// `dst += src`.
    pub fn add(&mut self, dst: Reg, src: Reg) -> &mut Self {
        self.raw(ALU64 | 0x08, dst, src, 0, 0)
    }
    /// `dst <<= imm`.
    pub fn lsh_imm(&mut self, dst: Reg, imm: i32) -> &mut Self {
        self.raw(ALU64 | 0x60, dst, Reg(0), 0, imm)
    }
    /// `dst = *(size *)(src + off)`.
    pub fn load(&mut self, size: Size, dst: Reg, src: Reg, off: i16) -> &mut Self {
        self.raw(0x61 | size.bits(), dst, src, off, 0)
    }
    /// `*(size *)(dst + off) = src`.
    pub fn store(&mut self, size: Size, dst: Reg, off: i16, src: Reg) -> &mut Self {
        self.raw(0x63 | size.bits(), dst, src, off, 0)
    }
    /// `*(size *)(dst + off) = imm`.
    pub fn store_imm(&mut self, size: Size, dst: Reg, off: i16, imm: i32) -> &mut Self {
        self.raw(0x62 | size.bits(), dst, Reg(0), off, imm)
    }
    /// `dst = map` (a 16-byte `BPF_LD_IMM64` with `BPF_PSEUDO_MAP_FD`).
    pub fn ld_map_fd(&mut self, dst: Reg, map: &Map) -> &mut Self {
        self.raw(0x18, dst, Reg(1), 0, map.raw_fd());
        self.raw(0, Reg(0), Reg(0), 0, 0)
    }
    /// `call helper`.
    pub fn call(&mut self, helper: i32) -> &mut Self {
        self.raw(JMP | 0x80, Reg(0), Reg(0), 0, helper)
    }
    /// `if dst COND imm goto label`.
    pub fn jump_imm(&mut self, cond: Cond, dst: Reg, imm: i32, label: &'static str) -> &mut Self {
        self.jumps.push((self.insns.len(), label));
        self.raw(JMP | cond.op(), dst, Reg(0), 0, imm)
    }
    /// `if dst COND src goto label`.
    pub fn jump_reg(&mut self, cond: Cond, dst: Reg, src: Reg, label: &'static str) -> &mut Self {
        self.jumps.push((self.insns.len(), label));
        self.raw(JMP | cond.op() | 0x08, dst, src, 0, 0)
    }
    /// `goto label`.
    pub fn goto(&mut self, label: &'static str) -> &mut Self {
        self.jumps.push((self.insns.len(), label));
        self.raw(JMP, Reg(0), Reg(0), 0, 0)
    }
    /// Places `label` at the next instruction.
    pub fn label(&mut self, label: &'static str) -> &mut Self {
        self.labels.insert(label, self.insns.len());
        self
    }
    /// `return imm`.
    pub fn exit_with(&mut self, imm: i32) -> &mut Self {
        self.mov_imm(Reg(0), imm);
        self.raw(JMP | 0x90, Reg(0), Reg(0), 0, 0)
    }

    /// The encoded program, jumps resolved.
    pub fn finish(mut self) -> Result<Vec<[u8; 8]>> {
        for (at, label) in std::mem::take(&mut self.jumps) {
            let target = *self.labels.get(label).ok_or_else(|| {
                Error::sys(
                    format!("BPF program: undefined label {label}"),
                    std::io::Error::from(std::io::ErrorKind::InvalidInput),
                )
            })?;
            let off = i16::try_from(target as i64 - at as i64 - 1).map_err(|_| {
                Error::sys(
                    format!("BPF program: jump to {label} too far"),
                    std::io::Error::from(std::io::ErrorKind::InvalidInput),
                )
            })?;
            self.insns[at][2..4].copy_from_slice(&off.to_le_bytes());
        }
        Ok(self.insns)
    }
}

/// A loaded raw-tracepoint program.
#[derive(Debug)]
pub struct Program {
    fd: OwnedFd,
    name: String,
}

impl Program {
    /// Loads `insns` as a `BPF_PROG_TYPE_RAW_TRACEPOINT` program. The
    /// license string is "Dual MIT/GPL": the project's code is MIT or
    /// Apache-2.0, and `bpf_probe_read_kernel` is offered only to
    /// GPL-compatible programs. On a verifier refusal the error carries
    /// the verifier's log.
    pub fn load_raw_tracepoint(name: &str, insns: &[[u8; 8]]) -> Result<Self> {
        let license = c"Dual MIT/GPL";
        let mut log = vec![0u8; 64 * 1024];
        let mut attr = Attr::new()
            .u32(0, BPF_PROG_TYPE_RAW_TRACEPOINT)
            .u32(4, insns.len() as u32)
            .u64(8, insns.as_ptr() as u64)
            .u64(16, license.as_ptr() as u64)
            .u32(24, 1)
            .u32(28, log.len() as u32)
            .u64(32, log.as_mut_ptr() as u64);
        for (i, b) in name.bytes().take(15).enumerate() {
            attr.0[48 + i] = b;
        }
        let raw = sys_bpf(BPF_PROG_LOAD, &mut attr);
        if raw < 0 {
            let e = std::io::Error::last_os_error();
            let end = log.iter().position(|&c| c == 0).unwrap_or(log.len());
            let text = String::from_utf8_lossy(&log[..end]);
            let tail: Vec<&str> = text.lines().rev().take(12).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            return Err(Error::sys(
                format!("bpf(BPF_PROG_LOAD {name}) (verifier: {})", tail.join(" | ")),
                e,
            ));
        }
        let fd = owned(raw, String::new)?;
        Ok(Program {
            fd,
            name: name.to_string(),
        })
    }

    /// Attaches the program to raw tracepoint `tracepoint` (e.g.
    /// `napi_gro_receive_entry`); it runs until the returned fd is closed.
    pub fn attach_raw_tracepoint(&self, tracepoint: &str) -> Result<OwnedFd> {
        let c = CString::new(tracepoint).map_err(|_| {
            Error::sys(
                format!("tracepoint name {tracepoint:?}"),
                std::io::Error::from(std::io::ErrorKind::InvalidInput),
            )
        })?;
        let mut attr = Attr::new()
            .u64(0, c.as_ptr() as u64)
            .u32(8, self.fd.as_raw_fd() as u32);
        owned(sys_bpf(BPF_RAW_TRACEPOINT_OPEN, &mut attr), || {
            format!("bpf(BPF_RAW_TRACEPOINT_OPEN {tracepoint}, {})", self.name)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jumps_are_resolved_relative_to_the_next_instruction() {
        let mut a = Asm::default();
        a.jump_imm(Cond::Eq, Reg(1), 0, "out")
            .mov_imm(Reg(0), 1)
            .label("out")
            .exit_with(0);
        let p = a.finish().unwrap();
        assert_eq!(p.len(), 4);
        assert_eq!(p[0][0], 0x15);
        assert_eq!(i16::from_le_bytes([p[0][2], p[0][3]]), 1);
        let mut b = Asm::default();
        b.goto("nowhere");
        assert!(b.finish().is_err());
    }

    #[test]
    fn possible_cpus_covers_online_ones() {
        let online = crate::perf::online_cpus();
        let n = possible_cpus().unwrap();
        assert!(online.iter().all(|&c| (c as usize) < n), "{online:?} {n}");
    }
}
