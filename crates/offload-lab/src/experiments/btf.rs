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
//! The members come from [`offload_sys::btf`], the project's one BTF
//! reader; this module only pairs the markers into groups.

use std::collections::BTreeMap;

use anyhow::Context as _;
use offload_sys::btf::Btf;
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

/// The groups of the `wanted` structures that `btf` has (absent ones are
/// left out).
pub fn groups(btf: &Btf, wanted: &[&str]) -> anyhow::Result<Vec<StructGroups>> {
    let mut out = Vec::new();
    for &name in wanted {
        let Ok(members) = btf.members(name) else {
            continue;
        };
        let mut begins: BTreeMap<&str, u32> = BTreeMap::new();
        let mut ends: BTreeMap<&str, u32> = BTreeMap::new();
        for m in &members {
            if let Some(g) = m.name.strip_prefix("__cacheline_group_begin__") {
                begins.insert(g, m.offset);
            } else if let Some(g) = m.name.strip_prefix("__cacheline_group_end__") {
                ends.insert(g, m.offset);
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
                    name: g.to_string(),
                    offset: b,
                    bytes,
                    cache_lines,
                })
            })
            .collect();
        groups.sort_by_key(|g| g.offset);
        out.push(StructGroups {
            name: name.to_string(),
            size: btf.struct_size(name)?,
            groups,
        });
    }
    Ok(out)
}

/// The groups of [`STRUCTS`] in the running kernel.
pub fn running_kernel() -> anyhow::Result<Vec<StructGroups>> {
    let btf = Btf::running_kernel().context("the running kernel's BTF")?;
    groups(&btf, &STRUCTS)
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
        let g = groups(&Btf::parse(blob()).unwrap(), &["s", "absent"]).unwrap();
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
        assert!(Btf::parse(b"not btf at all, not at all....".to_vec()).is_err());
    }
}
