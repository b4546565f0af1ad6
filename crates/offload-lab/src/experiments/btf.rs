//! The fast-path cache-line groups of the running kernel's structures,
//! read from its BTF (`/sys/kernel/btf/vmlinux`).
//!
//! Since 6.8 (the "net: group hot fields" series) `struct tcp_sock`,
//! `net_device`, `netns_ipv4` and `sock` carry zero-size markers
//! `__cacheline_group_begin__NAME` / `__cacheline_group_end__NAME`
//! (include/linux/cache.h) around the fields each fast path reads or
//! writes. BTF keeps every member with its bit offset, so the groups, their
//! sizes and the cache lines they span can be read from the kernel itself;
//! a kernel without the markers (before 6.8) shows none.
//!
//! The format is the kernel's (Documentation/bpf/btf.rst): a header
//! (magic 0xeb9f), then `struct btf_type` records, each followed by data
//! whose size depends on its kind, then the string section. Only what the
//! groups need is decoded.

use std::collections::BTreeMap;

use anyhow::{bail, Context as _};
use serde::Serialize;

/// The structures whose groups are reported.
pub const STRUCTS: [&str; 4] = ["tcp_sock", "net_device", "netns_ipv4", "sock"];

/// One cache-line group of a structure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Group {
    /// Group name (`tcp_sock_read_tx`).
    pub name: String,
    /// Byte offset of its first field.
    pub offset: u32,
    /// Bytes from the begin marker to the end marker.
    pub bytes: u32,
    /// Cache lines (64 bytes) the group touches.
    pub cache_lines: u32,
}

/// A structure's size and groups.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StructGroups {
    /// Structure name.
    pub name: String,
    /// Its size in bytes.
    pub size: u32,
    /// Its groups in offset order (empty before 6.8).
    pub groups: Vec<Group>,
}

fn u32_at(b: &[u8], off: usize, le: bool) -> anyhow::Result<u32> {
    let s: [u8; 4] = b
        .get(off..off + 4)
        .and_then(|s| s.try_into().ok())
        .with_context(|| format!("BTF truncated at byte {off}"))?;
    Ok(if le {
        u32::from_le_bytes(s)
    } else {
        u32::from_be_bytes(s)
    })
}

fn str_at(strings: &[u8], off: u32) -> &str {
    let rest = strings.get(off as usize..).unwrap_or(&[]);
    let end = rest.iter().position(|&c| c == 0).unwrap_or(rest.len());
    std::str::from_utf8(&rest[..end]).unwrap_or("")
}

/// Reads the groups of `wanted` structures from raw BTF.
pub fn parse(btf: &[u8], wanted: &[&str]) -> anyhow::Result<Vec<StructGroups>> {
    if btf.len() < 24 {
        bail!("BTF shorter than its header");
    }
    let le = match [btf[0], btf[1]] {
        [0x9f, 0xeb] => true,
        [0xeb, 0x9f] => false,
        m => bail!("not BTF (magic {m:02x?})"),
    };
    let hdr_len = u32_at(btf, 4, le)? as usize;
    let type_off = u32_at(btf, 8, le)? as usize;
    let type_len = u32_at(btf, 12, le)? as usize;
    let str_off = u32_at(btf, 16, le)? as usize;
    let str_len = u32_at(btf, 20, le)? as usize;
    let types = btf
        .get(hdr_len + type_off..hdr_len + type_off + type_len)
        .context("BTF type section out of bounds")?;
    let strings = btf
        .get(hdr_len + str_off..hdr_len + str_off + str_len)
        .context("BTF string section out of bounds")?;
    let mut found: BTreeMap<String, StructGroups> = BTreeMap::new();
    let mut pos = 0usize;
    while pos + 12 <= types.len() {
        let name_off = u32_at(types, pos, le)?;
        let info = u32_at(types, pos + 4, le)?;
        let size = u32_at(types, pos + 8, le)?;
        let vlen = (info & 0xffff) as usize;
        let kind = (info >> 24) & 0x1f;
        let kind_flag = info >> 31 == 1;
        pos += 12;
        // Bytes of kind-specific data after the record.
        let extra = match kind {
            1 | 14 | 17 => 4,             // INT, VAR, DECL_TAG
            3 => 12,                      // ARRAY
            4 | 5 | 15 | 19 => 12 * vlen, // STRUCT, UNION, DATASEC, ENUM64
            6 | 13 => 8 * vlen,           // ENUM, FUNC_PROTO
            2 | 7..=12 | 16 | 18 => 0,    // PTR, FWD, TYPEDEF, qualifiers, FUNC, FLOAT, TYPE_TAG
            k => bail!("unknown BTF kind {k} at type byte {}", pos - 12),
        };
        let name = str_at(strings, name_off);
        if kind == 4 && wanted.contains(&name) && !found.contains_key(name) {
            let mut begins: BTreeMap<String, u32> = BTreeMap::new();
            let mut ends: BTreeMap<String, u32> = BTreeMap::new();
            for m in 0..vlen {
                let at = pos + 12 * m;
                let mname = str_at(strings, u32_at(types, at, le)?);
                let raw = u32_at(types, at + 8, le)?;
                let bits = if kind_flag { raw & 0x00ff_ffff } else { raw };
                if let Some(g) = mname.strip_prefix("__cacheline_group_begin__") {
                    begins.insert(g.to_string(), bits / 8);
                } else if let Some(g) = mname.strip_prefix("__cacheline_group_end__") {
                    ends.insert(g.to_string(), bits / 8);
                }
            }
            let mut groups: Vec<Group> = begins
                .iter()
                .filter_map(|(g, &b)| {
                    let e = *ends.get(g)?;
                    let bytes = e.saturating_sub(b);
                    let cache_lines = if bytes == 0 {
                        0
                    } else {
                        (e - 1) / 64 - b / 64 + 1
                    };
                    Some(Group {
                        name: g.clone(),
                        offset: b,
                        bytes,
                        cache_lines,
                    })
                })
                .collect();
            groups.sort_by_key(|g| g.offset);
            found.insert(
                name.to_string(),
                StructGroups {
                    name: name.to_string(),
                    size,
                    groups,
                },
            );
        }
        pos += extra;
    }
    Ok(wanted.iter().filter_map(|w| found.remove(*w)).collect())
}

/// The groups of [`STRUCTS`] in the running kernel.
pub fn running_kernel() -> anyhow::Result<Vec<StructGroups>> {
    let path = "/sys/kernel/btf/vmlinux";
    let raw = std::fs::read(path).with_context(|| format!("reading {path}"))?;
    parse(&raw, &STRUCTS).with_context(|| format!("parsing {path}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A BTF blob with one struct `s` of 192 bytes whose members are a
    /// group `g` from byte 8 to byte 72 and an int.
    fn blob() -> Vec<u8> {
        let strings = b"\0s\0__cacheline_group_begin__g\0__cacheline_group_end__g\0x\0int\0";
        let off = |needle: &str| {
            let n = needle.as_bytes();
            (0..strings.len())
                .find(|&i| strings[i..].starts_with(n) && (i == 0 || strings[i - 1] == 0))
                .unwrap() as u32
        };
        let mut t = Vec::new();
        let push = |t: &mut Vec<u8>, v: u32| t.extend_from_slice(&v.to_le_bytes());
        // type 1: int (kind 1), 4 bytes, then its 4-byte encoding.
        push(&mut t, off("int"));
        push(&mut t, 1 << 24);
        push(&mut t, 4);
        push(&mut t, 32);
        // type 2: struct s, 3 members.
        push(&mut t, off("s"));
        push(&mut t, (4 << 24) | 3);
        push(&mut t, 192);
        for (name, bits) in [
            ("__cacheline_group_begin__g", 64),
            ("x", 64),
            ("__cacheline_group_end__g", 72 * 8),
        ] {
            push(&mut t, off(name));
            push(&mut t, 1);
            push(&mut t, bits);
        }
        let mut b = vec![0x9f, 0xeb, 1, 0];
        for v in [
            24u32,
            0,
            t.len() as u32,
            t.len() as u32,
            strings.len() as u32,
        ] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&t);
        b.extend_from_slice(strings);
        b
    }

    #[test]
    fn groups_come_from_the_markers() {
        let g = parse(&blob(), &["s", "absent"]).unwrap();
        assert_eq!(g.len(), 1);
        assert_eq!(g[0].size, 192);
        assert_eq!(
            g[0].groups,
            [Group {
                name: "g".into(),
                offset: 8,
                bytes: 64,
                cache_lines: 2
            }]
        );
        assert!(parse(b"not btf at all, not at all....", &["s"]).is_err());
    }
}
