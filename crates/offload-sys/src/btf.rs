//! The running kernel's type layout from its BTF (`/sys/kernel/btf/vmlinux`):
//! byte offsets of structure members, so a BPF program reads `sk_buff`,
//! `net_device` and `struct net` fields where *this* kernel keeps them.
//!
//! The format is the kernel's (Documentation/bpf/btf.rst): a header (magic
//! 0xeb9f), then `struct btf_type` records numbered from 1, each followed by
//! data whose size depends on its kind, then the string section. Members of
//! anonymous structures and unions (`sk_buff`'s `dev` sits in two) are found
//! through them, as C names them. A structure's size and its members as
//! declared ([`Btf::members`]) serve readers of its layout, such as the lab's
//! cache-line groups.

use crate::error::{Error, Result};

const STRUCT: u32 = 4;
const UNION: u32 = 5;
const TYPEDEF: u32 = 8;
const VOLATILE: u32 = 9;
const CONST: u32 = 10;
const RESTRICT: u32 = 11;
const TYPE_TAG: u32 = 18;

/// One member of a structure as BTF declares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// Its name (empty for an anonymous structure or union).
    pub name: String,
    /// Byte offset from the start of the structure (bit offset / 8).
    pub offset: u32,
}

/// Decoded type records of one BTF blob (types only; members on demand).
#[derive(Debug)]
pub struct Btf {
    raw: Vec<u8>,
    /// Byte position of each type's record in `raw`; index = type id - 1.
    records: Vec<usize>,
    strings: (usize, usize),
}

fn bad(what: impl Into<String>) -> Error {
    Error::sys(what, std::io::Error::from(std::io::ErrorKind::InvalidData))
}

impl Btf {
    /// Reads the running kernel's BTF.
    pub fn running_kernel() -> Result<Self> {
        let path = "/sys/kernel/btf/vmlinux";
        let raw = std::fs::read(path).map_err(|e| Error::sys(format!("read {path}"), e))?;
        Btf::parse(raw).map_err(|e| bad(format!("{path}: {e}")))
    }

    /// Indexes a BTF blob (little-endian, as every x86 and arm64 kernel's).
    pub fn parse(raw: Vec<u8>) -> Result<Self> {
        let u32_at = |off: usize| -> Result<u32> {
            raw.get(off..off + 4)
                .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
                .ok_or_else(|| bad(format!("BTF truncated at byte {off}")))
        };
        if raw.get(0..2) != Some(&[0x9f, 0xeb]) {
            return Err(bad("not little-endian BTF (magic 0xeb9f)"));
        }
        let hdr = u32_at(4)? as usize;
        let (type_off, type_len) = (u32_at(8)? as usize, u32_at(12)? as usize);
        let (str_off, str_len) = (u32_at(16)? as usize, u32_at(20)? as usize);
        let types = (hdr + type_off, hdr + type_off + type_len);
        let strings = (hdr + str_off, hdr + str_off + str_len);
        if types.1 > raw.len() || strings.1 > raw.len() {
            return Err(bad("BTF sections out of bounds"));
        }
        let mut records = Vec::new();
        let mut pos = types.0;
        while pos + 12 <= types.1 {
            let info = u32_at(pos + 4)?;
            let vlen = (info & 0xffff) as usize;
            let extra = match (info >> 24) & 0x1f {
                1 | 14 | 17 => 4,             // INT, VAR, DECL_TAG
                3 => 12,                      // ARRAY
                4 | 5 | 15 | 19 => 12 * vlen, // STRUCT, UNION, DATASEC, ENUM64
                6 | 13 => 8 * vlen,           // ENUM, FUNC_PROTO
                2 | 7..=12 | 16 | 18 => 0, // PTR, FWD, TYPEDEF, qualifiers, FUNC, FLOAT, TYPE_TAG
                k => return Err(bad(format!("unknown BTF kind {k} at byte {pos}"))),
            };
            records.push(pos);
            pos += 12 + extra;
        }
        Ok(Btf {
            raw,
            records,
            strings,
        })
    }

    fn u32_at(&self, off: usize) -> u32 {
        self.raw
            .get(off..off + 4)
            .map_or(0, |s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }

    fn name(&self, name_off: u32) -> &str {
        let (start, end) = self.strings;
        let rest = self.raw.get(start + name_off as usize..end).unwrap_or(&[]);
        let len = rest.iter().position(|&c| c == 0).unwrap_or(rest.len());
        std::str::from_utf8(&rest[..len]).unwrap_or("")
    }

    /// (kind, vlen, kind_flag, size_or_type, record position) of type `id`.
    fn info(&self, id: u32) -> Option<(u32, usize, bool, u32, usize)> {
        let pos = *self.records.get((id as usize).checked_sub(1)?)?;
        let info = self.u32_at(pos + 4);
        Some((
            (info >> 24) & 0x1f,
            (info & 0xffff) as usize,
            info >> 31 == 1,
            self.u32_at(pos + 8),
            pos,
        ))
    }

    /// Type `id` with typedefs and qualifiers peeled off.
    fn resolve(&self, mut id: u32) -> u32 {
        for _ in 0..32 {
            match self.info(id) {
                Some((TYPEDEF | VOLATILE | CONST | RESTRICT | TYPE_TAG, _, _, next, _)) => {
                    id = next
                }
                _ => break,
            }
        }
        id
    }

    /// The id of the structure named `name`: the first with members, as a
    /// forward declaration's twin has none.
    pub fn struct_id(&self, name: &str) -> Option<u32> {
        (1..=self.records.len() as u32).find(|&id| {
            matches!(self.info(id), Some((STRUCT, vlen, ..)) if vlen > 0)
                && self.name(self.u32_at(self.records[id as usize - 1])) == name
        })
    }

    /// Size in bytes of the structure named `name` ([`Btf::struct_id`]).
    pub fn struct_size(&self, name: &str) -> Result<u32> {
        let id = self
            .struct_id(name)
            .ok_or_else(|| bad(format!("BTF has no struct {name}")))?;
        Ok(self.info(id).map_or(0, |(_, _, _, size, _)| size))
    }

    /// The members of the structure named `name`, in declaration order,
    /// top level only (an anonymous member is listed once, unnamed).
    pub fn members(&self, name: &str) -> Result<Vec<Member>> {
        let id = self
            .struct_id(name)
            .ok_or_else(|| bad(format!("BTF has no struct {name}")))?;
        let (_, vlen, kind_flag, _, pos) = self
            .info(id)
            .ok_or_else(|| bad(format!("BTF type {id} missing")))?;
        Ok((0..vlen)
            .map(|m| {
                let at = pos + 12 + 12 * m;
                let raw = self.u32_at(at + 8);
                // With kind_flag the low 24 bits are the offset and the
                // high 8 a bitfield size (Documentation/bpf/btf.rst).
                let bits = if kind_flag { raw & 0x00ff_ffff } else { raw };
                Member {
                    name: self.name(self.u32_at(at)).to_string(),
                    offset: bits / 8,
                }
            })
            .collect())
    }

    /// Byte offset and type id of member `member` of structure or union
    /// `id`, looking through anonymous members.
    fn member(&self, id: u32, member: &str, depth: u32) -> Option<(u32, u32)> {
        let (kind, vlen, kind_flag, _, pos) = self.info(self.resolve(id))?;
        if !(kind == STRUCT || kind == UNION) || depth > 8 {
            return None;
        }
        for m in 0..vlen {
            let at = pos + 12 + 12 * m;
            let name = self.name(self.u32_at(at));
            let ty = self.u32_at(at + 4);
            let raw = self.u32_at(at + 8);
            let bits = if kind_flag { raw & 0x00ff_ffff } else { raw };
            if name == member {
                return Some((bits / 8, ty));
            }
            if name.is_empty() {
                if let Some((off, ty)) = self.member(ty, member, depth + 1) {
                    return Some((bits / 8 + off, ty));
                }
            }
        }
        None
    }

    /// Byte offset of `path` (`"dev"`, `"ns.inum"`: members of members)
    /// inside structure `structure`.
    pub fn offset_of(&self, structure: &str, path: &str) -> Result<u32> {
        let mut id = self
            .struct_id(structure)
            .ok_or_else(|| bad(format!("BTF has no struct {structure}")))?;
        let mut offset = 0;
        for part in path.split('.') {
            let (off, ty) = self
                .member(id, part, 0)
                .ok_or_else(|| bad(format!("BTF: struct {structure} has no member {path}")))?;
            offset += off;
            id = ty;
        }
        Ok(offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(Btf::parse(b"not btf at all, not at all....".to_vec()).is_err());
        assert!(Btf::parse(vec![0x9f, 0xeb, 1, 0]).is_err());
    }

    /// The running kernel's offsets of the members the live GRO counter
    /// reads, checked against what every kernel since 5.x has: `dev` in
    /// `sk_buff`'s first cache line, `ifindex` and `nd_net` inside
    /// `net_device`, `inum` inside `struct net`.
    #[test]
    fn running_kernel_offsets_are_plausible() {
        let Ok(btf) = Btf::running_kernel() else {
            // A kernel without CONFIG_DEBUG_INFO_BTF: nothing to check.
            assert!(!std::path::Path::new("/sys/kernel/btf/vmlinux").exists());
            return;
        };
        let dev = btf.offset_of("sk_buff", "dev").unwrap();
        assert!((16..64).contains(&dev), "sk_buff.dev at {dev}");
        let len = btf.offset_of("sk_buff", "len").unwrap();
        assert!(len > dev && len < 256, "sk_buff.len at {len}");
        assert!(btf.offset_of("net_device", "ifindex").unwrap() < 4096);
        assert!(btf.offset_of("net_device", "nd_net").unwrap() < 4096);
        assert!(btf.offset_of("net", "ns.inum").unwrap() < 1024);
        let members = btf.members("sk_buff").unwrap();
        assert!(members.iter().any(|m| m.name == "len" && m.offset == len));
        assert!(btf.struct_size("sk_buff").unwrap() > len);
        assert!(btf.members("no_such_struct").is_err());
        assert!(btf.offset_of("net", "no_such_member").is_err());
        assert!(btf.offset_of("no_such_struct", "x").is_err());
    }
}
